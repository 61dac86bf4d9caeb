/* GGUF reader and writer: round trip of every value type and several tensors,
 * copy_kv (nested arrays included), the default model, and hostile images:
 * every truncation, byte mutations, and one crafted file per refusal.
 * `test_gguf --write-corpus DIR` writes the crafted images as a fuzz seed corpus. */
#include "check.h"
#include "llmk.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- a little-endian image builder ---------------------------------------- */

typedef struct {
    uint8_t *p;
    size_t len, cap;
} img;

static void put(img *b, const void *s, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}
static void put_le(img *b, uint64_t v, unsigned n) {
    for (unsigned k = 0; k < n; k++) {
        uint8_t c = (uint8_t)(v >> (8 * k));
        put(b, &c, 1);
    }
}
static void u32(img *b, uint32_t v) { put_le(b, v, 4); }
static void u64(img *b, uint64_t v) { put_le(b, v, 8); }
static void str(img *b, const char *s) {
    u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void header(img *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    put(b, "GGUF", 4);
    u32(b, version);
    u64(b, n_tensors);
    u64(b, n_kv);
}
static void kv_u32(img *b, const char *key, uint32_t v) {
    str(b, key);
    u32(b, LLMK_GGUF_UINT32);
    u32(b, v);
}
static void tinfo(img *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                  uint64_t offset) {
    str(b, name);
    u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) u64(b, ne[d]);
    u32(b, type);
    u64(b, offset);
}
static void pad(img *b, size_t a) {
    while (b->len % a) put_le(b, 0, 1);
}
static void zeros(img *b, size_t n) {
    while (n--) put_le(b, 0, 1);
}

/* Open from an exactly-sized heap copy so ASan sees any read past the end. */
static int open_copy(const uint8_t *p, size_t n, llmk_gguf **g) {
    uint8_t *c = malloc(n ? n : 1);
    if (n) memcpy(c, p, n);
    int st = llmk_gguf_open_memory(c, n, g);
    if (st == LLMK_OK) {
        llmk_gguf_close(*g); /* reopen from the real bytes: the handle must not outlive c */
        free(c);
        return llmk_gguf_open_memory(p, n, g);
    }
    free(c);
    return st;
}

/* ---- round trip --------------------------------------------------------- */

static char tmp_dir[] = "/tmp/llmk_test_gguf_XXXXXX";

static uint8_t *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(sz > 0 ? (size_t)sz : 1);
    *n = fread(p, 1, (size_t)sz, f);
    fclose(f);
    return p;
}

static void test_round_trip(void) {
    char path[128];
    snprintf(path, sizeof path, "%s/rt.gguf", tmp_dir);
    llmk_gguf_writer *w;
    CHECK_STATUS(llmk_gguf_writer_init(&w), LLMK_OK);
    /* every scalar type */
    uint8_t u8v = 0xab;
    int8_t i8v = -123;
    uint16_t u16v = 0xbeef;
    int16_t i16v = -32767;
    int64_t i64v = -0x123456789abcll;
    double f64v = -1.0 / 3.0;
    CHECK_STATUS(llmk_gguf_writer_set_scalar(w, "t.u8", LLMK_GGUF_UINT8, &u8v), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_set_scalar(w, "t.i8", LLMK_GGUF_INT8, &i8v), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_set_scalar(w, "t.u16", LLMK_GGUF_UINT16, &u16v), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_set_scalar(w, "t.i16", LLMK_GGUF_INT16, &i16v), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_set_u32(w, "t.u32", 0xdeadbeefu), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_set_i32(w, "t.i32", -2000000000), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_set_f32(w, "t.f32", 1.5e-5f), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_set_bool(w, "t.bool", true), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_set_str(w, "t.str", "héllo, wörld"), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_set_u64(w, "t.u64", 0x123456789abcdef0ull), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_set_scalar(w, "t.i64", LLMK_GGUF_INT64, &i64v), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_set_scalar(w, "t.f64", LLMK_GGUF_FLOAT64, &f64v), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_set_str(w, "t.empty", ""), LLMK_OK);
    /* arrays of every numeric type */
    int16_t a16[5] = {-3, 7, 32767, -32768, 0};
    float af[4] = {0.25f, -2.0f, 1e30f, -0.0f};
    int32_t ai32[3] = {-1, 2, INT32_MIN};
    uint64_t au64[2] = {UINT64_MAX, 42};
    uint8_t abool[3] = {1, 0, 1};
    double af64[2] = {3.25, -1e-300};
    CHECK_STATUS(llmk_gguf_writer_set_arr(w, "a.i16", LLMK_GGUF_INT16, a16, 5), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_set_arr(w, "a.f32", LLMK_GGUF_FLOAT32, af, 4), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_set_arr(w, "a.i32", LLMK_GGUF_INT32, ai32, 3), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_set_arr(w, "a.u64", LLMK_GGUF_UINT64, au64, 2), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_set_arr(w, "a.bool", LLMK_GGUF_BOOL, abool, 3), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_set_arr(w, "a.f64", LLMK_GGUF_FLOAT64, af64, 2), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_set_arr(w, "a.empty", LLMK_GGUF_UINT8, NULL, 0), LLMK_OK);
    const char *strs[] = {"<s>", "", "Ġthe", "a\tb"};
    CHECK_STATUS(llmk_gguf_writer_set_arr_str(w, "a.str", strs, 4), LLMK_OK);
    /* refusals leave the writer intact */
    CHECK_STATUS(llmk_gguf_writer_set_u32(w, "t.u32", 1), LLMK_DUPLICATE_NAME);
    CHECK_STATUS(llmk_gguf_writer_set_u32(w, "", 1), LLMK_BAD_STRING);
    CHECK_STATUS(llmk_gguf_writer_set_arr(w, "a.bad", LLMK_GGUF_STRING, strs, 1), LLMK_UNKNOWN_TYPE);
    CHECK_STATUS(llmk_gguf_writer_set_scalar(w, "t.bad", LLMK_GGUF_ARRAY, &u8v), LLMK_UNKNOWN_TYPE);

    /* tensors: several types and ranks, sizes not multiples of 32 bytes */
    enum { NT = 4 };
    const char *names[NT] = {"tok.weight", "blk.0.norm", "q41", "cube"};
    uint32_t types[NT] = {LLMK_TYPE_F16, LLMK_TYPE_F32, LLMK_TYPE_Q4_1, LLMK_TYPE_Q8_0};
    uint32_t ndims[NT] = {2, 1, 2, 4};
    uint64_t nes[NT][4] = {{3, 5, 1, 1}, {7, 1, 1, 1}, {64, 3, 1, 1}, {32, 2, 1, 3}};
    uint8_t *datas[NT];
    uint64_t nbytes[NT];
    for (int i = 0; i < NT; i++) {
        uint64_t n = nes[i][0] * nes[i][1] * nes[i][2] * nes[i][3];
        CHECK_STATUS(llmk_row_bytes(types[i], n, &nbytes[i]), LLMK_OK);
        datas[i] = malloc(nbytes[i]);
        for (uint64_t k = 0; k < nbytes[i]; k++) datas[i][k] = (uint8_t)(k * 31 + i * 7 + 1);
        CHECK_STATUS(llmk_gguf_writer_add_tensor(w, names[i], types[i], ndims[i], nes[i], datas[i],
                                                 nbytes[i]),
                     LLMK_OK);
    }
    CHECK_STATUS(llmk_gguf_writer_add_tensor(w, "q41", LLMK_TYPE_F32, 1, nes[1], datas[1], 28),
                 LLMK_DUPLICATE_NAME);
    CHECK_STATUS(llmk_gguf_writer_add_tensor(w, "x", LLMK_TYPE_F32, 1, nes[1], datas[1], 27),
                 LLMK_BAD_TENSOR_INFO);
    CHECK_STATUS(llmk_gguf_writer_add_tensor(w, "x", LLMK_TYPE_Q4_1, 1, nes[1], datas[1], 20),
                 LLMK_BAD_TENSOR_INFO);
    CHECK_STATUS(llmk_gguf_writer_add_tensor(w, "x", 4, 1, nes[1], datas[1], 28), LLMK_UNKNOWN_TYPE);
    CHECK_STATUS(llmk_gguf_writer_write(w, path), LLMK_OK);
    llmk_gguf_writer_free(w);

    llmk_gguf *g;
    CHECK_STATUS(llmk_gguf_open(path, &g), LLMK_OK);
    if (!g) return;
    CHECK_EQ_INT(llmk_gguf_version(g), 3);
    CHECK_EQ_INT(llmk_gguf_alignment(g), 32);
    CHECK_EQ_INT(llmk_gguf_n_kv(g), 21);
    CHECK(llmk_gguf_kv_key(g, 0) && strcmp(llmk_gguf_kv_key(g, 0), "t.u8") == 0);
    CHECK(llmk_gguf_kv_key(g, 20) && strcmp(llmk_gguf_kv_key(g, 20), "a.str") == 0);
    CHECK_EQ_INT(llmk_gguf_kv_type(g, 1), LLMK_GGUF_INT8);
    CHECK_EQ_INT(llmk_gguf_kv_type(g, 11), LLMK_GGUF_FLOAT64);
    uint32_t v32;
    int32_t i32;
    uint64_t v64;
    float f;
    double d;
    bool b;
    CHECK_STATUS(llmk_gguf_get_u32(g, "t.u8", &v32), LLMK_OK);
    CHECK_EQ_INT(v32, u8v);
    CHECK_STATUS(llmk_gguf_get_i32(g, "t.i8", &i32), LLMK_OK);
    CHECK_EQ_INT(i32, i8v);
    CHECK_STATUS(llmk_gguf_get_u32(g, "t.i8", &v32), LLMK_TYPE_MISMATCH); /* negative */
    CHECK_STATUS(llmk_gguf_get_u32(g, "t.u16", &v32), LLMK_OK);
    CHECK_EQ_INT(v32, u16v);
    CHECK_STATUS(llmk_gguf_get_i32(g, "t.i16", &i32), LLMK_OK);
    CHECK_EQ_INT(i32, i16v);
    CHECK_STATUS(llmk_gguf_get_u32(g, "t.u32", &v32), LLMK_OK);
    CHECK_EQ_INT(v32, 0xdeadbeefu);
    CHECK_STATUS(llmk_gguf_get_i32(g, "t.u32", &i32), LLMK_TYPE_MISMATCH); /* does not fit */
    CHECK_STATUS(llmk_gguf_get_i32(g, "t.i32", &i32), LLMK_OK);
    CHECK_EQ_INT(i32, -2000000000);
    CHECK_STATUS(llmk_gguf_get_f32(g, "t.f32", &f), LLMK_OK);
    CHECK(f == 1.5e-5f);
    CHECK_STATUS(llmk_gguf_get_u32(g, "t.f32", &v32), LLMK_TYPE_MISMATCH);
    CHECK_STATUS(llmk_gguf_get_bool(g, "t.bool", &b), LLMK_OK);
    CHECK(b);
    const char *s;
    size_t n;
    CHECK_STATUS(llmk_gguf_get_str(g, "t.str", &s, &n), LLMK_OK);
    CHECK(n == strlen("héllo, wörld") && strcmp(s, "héllo, wörld") == 0);
    CHECK_STATUS(llmk_gguf_get_str(g, "t.empty", &s, &n), LLMK_OK);
    CHECK(n == 0 && s && *s == 0);
    CHECK_STATUS(llmk_gguf_get_u64(g, "t.u64", &v64), LLMK_OK);
    CHECK(v64 == 0x123456789abcdef0ull);
    CHECK_STATUS(llmk_gguf_get_u32(g, "t.u64", &v32), LLMK_TYPE_MISMATCH);
    CHECK_STATUS(llmk_gguf_get_u64(g, "t.i64", &v64), LLMK_TYPE_MISMATCH);
    CHECK_STATUS(llmk_gguf_get_f64(g, "t.f64", &d), LLMK_OK);
    CHECK_EQ_DBL(d, f64v);
    CHECK_STATUS(llmk_gguf_get_f64(g, "t.f32", &d), LLMK_OK);
    CHECK_EQ_DBL(d, (double)1.5e-5f);
    CHECK_STATUS(llmk_gguf_get_u32(g, "nope", &v32), LLMK_NOT_FOUND);
    CHECK_STATUS(llmk_gguf_get_str(g, "t.u32", &s, &n), LLMK_TYPE_MISMATCH);
    CHECK_EQ_INT(llmk_gguf_find_key(g, "a.f32"), 14);
    CHECK_EQ_INT(llmk_gguf_find_key(g, "a.f3"), -1);
    uint32_t et;
    uint64_t cnt;
    CHECK_STATUS(llmk_gguf_get_arr(g, "a.i16", &et, &cnt), LLMK_OK);
    CHECK(et == LLMK_GGUF_INT16 && cnt == 5);
    for (int k = 0; k < 5; k++) {
        CHECK_STATUS(llmk_gguf_arr_num(g, "a.i16", (uint64_t)k, &d), LLMK_OK);
        CHECK_EQ_DBL(d, a16[k]);
    }
    CHECK_STATUS(llmk_gguf_arr_num(g, "a.i16", 5, &d), LLMK_INVALID_ARGUMENT);
    for (int k = 0; k < 4; k++) {
        CHECK_STATUS(llmk_gguf_arr_num(g, "a.f32", (uint64_t)k, &d), LLMK_OK);
        CHECK_EQ_DBL(d, af[k]);
    }
    for (int k = 0; k < 3; k++) {
        CHECK_STATUS(llmk_gguf_arr_num(g, "a.i32", (uint64_t)k, &d), LLMK_OK);
        CHECK_EQ_DBL(d, ai32[k]);
        CHECK_STATUS(llmk_gguf_arr_num(g, "a.bool", (uint64_t)k, &d), LLMK_OK);
        CHECK_EQ_DBL(d, abool[k]);
    }
    for (int k = 0; k < 2; k++) {
        CHECK_STATUS(llmk_gguf_arr_num(g, "a.u64", (uint64_t)k, &d), LLMK_OK);
        CHECK_EQ_DBL(d, (double)au64[k]);
        CHECK_STATUS(llmk_gguf_arr_num(g, "a.f64", (uint64_t)k, &d), LLMK_OK);
        CHECK_EQ_DBL(d, af64[k]);
    }
    CHECK_STATUS(llmk_gguf_get_arr(g, "a.empty", &et, &cnt), LLMK_OK);
    CHECK(et == LLMK_GGUF_UINT8 && cnt == 0);
    CHECK_STATUS(llmk_gguf_get_arr(g, "a.str", &et, &cnt), LLMK_OK);
    CHECK(et == LLMK_GGUF_STRING && cnt == 4);
    for (int k = 0; k < 4; k++) {
        CHECK_STATUS(llmk_gguf_arr_str(g, "a.str", (uint64_t)k, &s, &n), LLMK_OK);
        CHECK(n == strlen(strs[k]) && strcmp(s, strs[k]) == 0);
    }
    CHECK_STATUS(llmk_gguf_arr_str(g, "a.i16", 0, &s, &n), LLMK_TYPE_MISMATCH);
    CHECK_STATUS(llmk_gguf_arr_num(g, "a.str", 0, &d), LLMK_TYPE_MISMATCH);
    CHECK_STATUS(llmk_gguf_get_arr(g, "t.u8", &et, &cnt), LLMK_TYPE_MISMATCH);

    CHECK_EQ_INT(llmk_gguf_n_tensors(g), NT);
    for (int i = 0; i < NT; i++) {
        const llmk_tensor_info *t = llmk_gguf_tensor(g, (size_t)i);
        CHECK(t && t == llmk_gguf_find_tensor(g, names[i]));
        if (!t) continue;
        CHECK(strcmp(t->name, names[i]) == 0);
        CHECK_EQ_INT(t->type, types[i]);
        CHECK_EQ_INT(t->n_dims, ndims[i]);
        for (int k = 0; k < 4; k++) CHECK_EQ_INT(t->ne[k], nes[i][k]);
        CHECK_EQ_INT(t->n_bytes, nbytes[i]);
        CHECK_EQ_INT(t->offset % 32, 0);
        CHECK_EQ_INT(((const uint8_t *)t->data - (const uint8_t *)llmk_gguf_tensor(g, 0)->data) % 32, 0);
        CHECK(memcmp(t->data, datas[i], nbytes[i]) == 0);
    }
    CHECK(llmk_gguf_find_tensor(g, "cub") == NULL);
    CHECK(llmk_gguf_tensor(g, NT) == NULL);
    CHECK_EQ_INT(llmk_gguf_data_offset(g) % 32, 0);

    /* copy every key into a second file: identical metadata bytes */
    char path2[128];
    snprintf(path2, sizeof path2, "%s/rt2.gguf", tmp_dir);
    CHECK_STATUS(llmk_gguf_writer_init(&w), LLMK_OK);
    for (size_t i = 0; i < llmk_gguf_n_kv(g); i++) CHECK_STATUS(llmk_gguf_writer_copy_kv(w, g, i), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_copy_kv(w, g, 0), LLMK_DUPLICATE_NAME);
    for (size_t i = 0; i < llmk_gguf_n_tensors(g); i++) {
        const llmk_tensor_info *t = llmk_gguf_tensor(g, i);
        CHECK_STATUS(llmk_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->n_bytes),
                     LLMK_OK);
    }
    CHECK_STATUS(llmk_gguf_writer_write(w, path2), LLMK_OK);
    llmk_gguf_writer_free(w);
    size_t n1, n2;
    uint8_t *b1 = read_file(path, &n1), *b2 = read_file(path2, &n2);
    CHECK(b1 && b2 && n1 == n2 && memcmp(b1, b2, n1) == 0);
    free(b1);
    free(b2);
    llmk_gguf_close(g);
    for (int i = 0; i < NT; i++) free(datas[i]);
    CHECK_STATUS(llmk_gguf_writer_init(&w), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_write(w, "/nonexistent-dir/x.gguf"), LLMK_IO_ERROR);
    llmk_gguf_writer_free(w);
}

/* A v2 file with nested arrays (arrays of arrays of strings and numbers),
 * alignment 64 and one tensor; built by hand since the writer has no nested setter. */
static img nested_image(uint32_t version) {
    img b = {0};
    header(&b, version, 1, 3);
    kv_u32(&b, "general.alignment", 64);
    str(&b, "nested");
    u32(&b, LLMK_GGUF_ARRAY);
    u32(&b, LLMK_GGUF_ARRAY);
    u64(&b, 2);
    u32(&b, LLMK_GGUF_STRING); /* [["ab", "c"], [[1, 2, 3]]] */
    u64(&b, 2);
    str(&b, "ab");
    str(&b, "c");
    u32(&b, LLMK_GGUF_ARRAY);
    u64(&b, 1);
    u32(&b, LLMK_GGUF_INT16);
    u64(&b, 3);
    put_le(&b, 1, 2);
    put_le(&b, 2, 2);
    put_le(&b, 3, 2);
    str(&b, "after");
    u32(&b, LLMK_GGUF_BOOL);
    put_le(&b, 1, 1);
    uint64_t ne[2] = {4, 2};
    tinfo(&b, "w", 2, ne, LLMK_TYPE_F32, 0);
    pad(&b, 64);
    for (int i = 0; i < 8; i++) put_le(&b, 0x3f800000u + (uint32_t)i, 4);
    return b;
}

static void test_nested_and_v2(void) {
    for (uint32_t version = 2; version <= 3; version++) {
        img b = nested_image(version);
        llmk_gguf *g;
        CHECK_STATUS(open_copy(b.p, b.len, &g), LLMK_OK);
        if (!g) continue;
        CHECK_EQ_INT(llmk_gguf_version(g), version);
        CHECK_EQ_INT(llmk_gguf_alignment(g), 64);
        CHECK_EQ_INT(llmk_gguf_data_offset(g) % 64, 0);
        uint32_t et;
        uint64_t n;
        CHECK_STATUS(llmk_gguf_get_arr(g, "nested", &et, &n), LLMK_OK);
        CHECK(et == LLMK_GGUF_ARRAY && n == 2);
        double d;
        CHECK_STATUS(llmk_gguf_arr_num(g, "nested", 0, &d), LLMK_TYPE_MISMATCH);
        bool bv = false;
        CHECK_STATUS(llmk_gguf_get_bool(g, "after", &bv), LLMK_OK);
        CHECK(bv);
        const llmk_tensor_info *t = llmk_gguf_find_tensor(g, "w");
        CHECK(t && t->n_bytes == 32 && t->data == b.p + llmk_gguf_data_offset(g));
        /* copy_kv carries the nested array and the alignment into a v3 file */
        char path[128];
        snprintf(path, sizeof path, "%s/nested.gguf", tmp_dir);
        llmk_gguf_writer *w;
        CHECK_STATUS(llmk_gguf_writer_init(&w), LLMK_OK);
        for (size_t i = 0; i < llmk_gguf_n_kv(g); i++) CHECK_STATUS(llmk_gguf_writer_copy_kv(w, g, i), LLMK_OK);
        CHECK_STATUS(llmk_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->n_bytes),
                     LLMK_OK);
        CHECK_STATUS(llmk_gguf_writer_write(w, path), LLMK_OK);
        llmk_gguf_writer_free(w);
        llmk_gguf *g2;
        CHECK_STATUS(llmk_gguf_open(path, &g2), LLMK_OK);
        if (g2) {
            CHECK_EQ_INT(llmk_gguf_version(g2), 3);
            CHECK_EQ_INT(llmk_gguf_alignment(g2), 64);
            CHECK_STATUS(llmk_gguf_get_arr(g2, "nested", &et, &n), LLMK_OK);
            CHECK(et == LLMK_GGUF_ARRAY && n == 2);
            const llmk_tensor_info *t2 = llmk_gguf_find_tensor(g2, "w");
            CHECK(t2 && t2->n_bytes == 32 && memcmp(t2->data, t->data, 32) == 0);
            CHECK_EQ_INT(llmk_gguf_data_offset(g2) % 64, 0);
            llmk_gguf_close(g2);
        }
        llmk_gguf_close(g);
        free(b.p);
    }
}

/* ---- hostile images ------------------------------------------------------ */

/* Every prefix of a valid file fails until the last tensor's data is whole;
 * from there on (only padding missing) it opens. */
static void test_truncations(void) {
    img b = nested_image(3);
    llmk_gguf *g;
    CHECK_STATUS(open_copy(b.p, b.len, &g), LLMK_OK);
    if (!g) return;
    const llmk_tensor_info *t = llmk_gguf_tensor(g, 0);
    size_t end = (size_t)(llmk_gguf_data_offset(g) + t->offset + t->n_bytes);
    llmk_gguf_close(g);
    int wrong = 0, silent = 0;
    for (size_t n = 0; n <= b.len; n++) {
        int st = open_copy(b.p, n, &g);
        if ((st == LLMK_OK) != (n >= end)) wrong++;
        if (st != LLMK_OK && !*llmk_last_error()) silent++;
        if (st == LLMK_OK) llmk_gguf_close(g);
    }
    CHECK_EQ_INT(wrong, 0);
    CHECK_EQ_INT(silent, 0);
    free(b.p);
}

/* Overwrite each byte with a few values: any status, no crash, no over-read. */
static void test_mutations(void) {
    img b = nested_image(3);
    static const uint8_t vals[] = {0x00, 0x01, 0x7f, 0xff, 0x40};
    int opened = 0, refused = 0;
    for (size_t i = 0; i < b.len; i++) {
        uint8_t keep = b.p[i];
        for (size_t v = 0; v < sizeof vals; v++) {
            b.p[i] = vals[v];
            llmk_gguf *g;
            if (open_copy(b.p, b.len, &g) == LLMK_OK) {
                opened++;
                for (size_t k = 0; k < llmk_gguf_n_kv(g); k++) {
                    uint32_t et;
                    uint64_t n;
                    const char *key = llmk_gguf_kv_key(g, k);
                    if (llmk_gguf_get_arr(g, key, &et, &n) == LLMK_OK && n) {
                        double d;
                        const char *s;
                        size_t len;
                        (void)llmk_gguf_arr_num(g, key, n - 1, &d);
                        (void)llmk_gguf_arr_str(g, key, n - 1, &s, &len);
                    }
                }
                llmk_gguf_close(g);
            } else {
                refused++;
            }
        }
        b.p[i] = keep;
    }
    CHECK(opened > 0 && refused > 0);
    free(b.p);
}

struct bad_case {
    const char *name;
    int want;
    img b;
};

static struct bad_case bad_cases[48];
static int n_bad;

static img *bad(const char *name, int want) {
    if (n_bad == (int)(sizeof bad_cases / sizeof bad_cases[0])) {
        fprintf(stderr, "bad_cases is full: make it larger\n");
        abort();
    }
    bad_cases[n_bad].name = name;
    bad_cases[n_bad].want = want;
    memset(&bad_cases[n_bad].b, 0, sizeof(img));
    return &bad_cases[n_bad++].b;
}

/* One tensor file with a chosen tensor info; data of `data_bytes` after alignment 32. */
static void one_tensor(img *b, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t offset,
                       size_t data_bytes) {
    header(b, 3, 1, 0);
    tinfo(b, "blk.3.attn_q.weight", n_dims, ne, type, offset);
    pad(b, 32);
    zeros(b, data_bytes);
}

static void build_bad_cases(void) {
    img *b;
    uint64_t ne4[4] = {32, 2, 1, 1};
    b = bad("empty file", LLMK_TRUNCATED_FILE);
    b = bad("bad magic", LLMK_BAD_MAGIC);
    header(b, 3, 0, 0);
    b->p[0] = 'G', b->p[1] = 'G', b->p[2] = 'M', b->p[3] = 'L';
    b = bad("version 1", LLMK_BAD_VERSION);
    header(b, 1, 0, 0);
    b = bad("version 4", LLMK_BAD_VERSION);
    header(b, 4, 0, 0);
    b = bad("big-endian version", LLMK_BAD_VERSION);
    header(b, 0x03000000u, 0, 0);
    b = bad("huge tensor count", LLMK_COUNT_TOO_LARGE);
    header(b, 3, UINT64_MAX / 2, 0);
    zeros(b, 64);
    b = bad("huge kv count", LLMK_COUNT_TOO_LARGE);
    header(b, 3, 0, 1ull << 60);
    zeros(b, 64);
    b = bad("huge array count", LLMK_COUNT_TOO_LARGE);
    header(b, 3, 0, 1);
    str(b, "tokenizer.ggml.tokens");
    u32(b, LLMK_GGUF_ARRAY);
    u32(b, LLMK_GGUF_STRING);
    u64(b, 1ull << 40);
    str(b, "a");
    b = bad("huge numeric array count", LLMK_COUNT_TOO_LARGE);
    header(b, 3, 0, 1);
    str(b, "scores");
    u32(b, LLMK_GGUF_ARRAY);
    u32(b, LLMK_GGUF_FLOAT32);
    u64(b, UINT64_MAX / 4 + 1); /* count * 4 wraps to 0 */
    b = bad("key length past the end", LLMK_BAD_STRING);
    header(b, 3, 0, 1);
    u64(b, 1000);
    put(b, "general.name", 12);
    u32(b, 0);
    b = bad("string value length past the end", LLMK_BAD_STRING);
    header(b, 3, 0, 1);
    str(b, "general.name");
    u32(b, LLMK_GGUF_STRING);
    u64(b, UINT64_MAX);
    put(b, "abc", 3);
    b = bad("tensor name length past the end", LLMK_BAD_STRING);
    header(b, 3, 1, 0);
    u64(b, 0x7fffffffffffffffull);
    zeros(b, 40);
    b = bad("empty key", LLMK_BAD_STRING);
    header(b, 3, 0, 1);
    str(b, "");
    u32(b, LLMK_GGUF_UINT8);
    zeros(b, 16);
    b = bad("unknown value type", LLMK_UNKNOWN_TYPE);
    header(b, 3, 0, 1);
    str(b, "general.x");
    u32(b, 13);
    zeros(b, 16);
    b = bad("unknown array element type", LLMK_UNKNOWN_TYPE);
    header(b, 3, 0, 1);
    str(b, "general.x");
    u32(b, LLMK_GGUF_ARRAY);
    u32(b, 0xffffffffu);
    u64(b, 1);
    zeros(b, 16);
    b = bad("arrays nested too deep", LLMK_COUNT_TOO_LARGE);
    header(b, 3, 0, 1);
    str(b, "deep");
    u32(b, LLMK_GGUF_ARRAY);
    for (int i = 0; i < 20; i++) {
        u32(b, LLMK_GGUF_ARRAY);
        u64(b, 1);
    }
    zeros(b, 16);
    b = bad("duplicate key", LLMK_DUPLICATE_NAME);
    header(b, 3, 0, 2);
    kv_u32(b, "llama.block_count", 30);
    kv_u32(b, "llama.block_count", 31);
    b = bad("alignment not a power of two", LLMK_BAD_ALIGNMENT);
    header(b, 3, 0, 1);
    kv_u32(b, "general.alignment", 48);
    b = bad("alignment zero", LLMK_BAD_ALIGNMENT);
    header(b, 3, 0, 1);
    kv_u32(b, "general.alignment", 0);
    b = bad("unknown tensor type", LLMK_UNKNOWN_TYPE);
    one_tensor(b, 2, ne4, 4, 0, 256);
    b = bad("tensor type 200", LLMK_UNKNOWN_TYPE);
    one_tensor(b, 2, ne4, 200, 0, 256);
    b = bad("n_dims 0", LLMK_BAD_TENSOR_INFO);
    one_tensor(b, 0, ne4, LLMK_TYPE_F32, 0, 256);
    b = bad("n_dims 5", LLMK_BAD_TENSOR_INFO);
    header(b, 3, 1, 0);
    uint64_t ne5[5] = {1, 1, 1, 1, 1};
    tinfo(b, "t", 5, ne5, LLMK_TYPE_F32, 0);
    zeros(b, 64);
    b = bad("zero dimension", LLMK_BAD_TENSOR_INFO);
    uint64_t nez[2] = {32, 0};
    one_tensor(b, 2, nez, LLMK_TYPE_F32, 0, 256);
    b = bad("overflowing dimensions", LLMK_DIMENSION_OVERFLOW);
    uint64_t neo[3] = {1ull << 32, 1ull << 32, 1ull << 8};
    one_tensor(b, 3, neo, LLMK_TYPE_F32, 0, 256);
    b = bad("overflowing byte count", LLMK_DIMENSION_OVERFLOW);
    uint64_t neb[2] = {1ull << 32, 1ull << 31};
    one_tensor(b, 2, neb, LLMK_TYPE_F64, 0, 256);
    b = bad("row not whole blocks", LLMK_BAD_TENSOR_INFO);
    uint64_t neq[2] = {48, 2};
    one_tensor(b, 2, neq, LLMK_TYPE_Q4_1, 0, 256);
    b = bad("misaligned offset", LLMK_BAD_ALIGNMENT);
    one_tensor(b, 2, ne4, LLMK_TYPE_F32, 8, 512);
    b = bad("offset out of file", LLMK_OFFSET_OUT_OF_FILE);
    one_tensor(b, 2, ne4, LLMK_TYPE_F32, 1 << 20, 512);
    b = bad("offset overflow", LLMK_OFFSET_OUT_OF_FILE);
    one_tensor(b, 2, ne4, LLMK_TYPE_F32, UINT64_MAX - 31, 512);
    b = bad("data one byte short", LLMK_OFFSET_OUT_OF_FILE);
    one_tensor(b, 2, ne4, LLMK_TYPE_F32, 0, 255);
    b = bad("duplicate tensor", LLMK_DUPLICATE_NAME);
    header(b, 3, 2, 0);
    tinfo(b, "w", 1, ne4, LLMK_TYPE_F32, 0);
    tinfo(b, "w", 1, ne4, LLMK_TYPE_F32, 128);
    pad(b, 32);
    zeros(b, 256);
    /* llama.cpp requires each tensor's data to follow the previous one's. */
    b = bad("overlapping tensor data", LLMK_TENSOR_DATA_OVERLAP);
    header(b, 3, 2, 0);
    tinfo(b, "a", 2, ne4, LLMK_TYPE_F32, 0);
    tinfo(b, "b", 2, ne4, LLMK_TYPE_F32, 128); /* a's 256 bytes end at 256 */
    pad(b, 32);
    zeros(b, 512);
    b = bad("every tensor at offset 0", LLMK_TENSOR_DATA_OVERLAP);
    header(b, 3, 3, 0);
    tinfo(b, "a", 2, ne4, LLMK_TYPE_F32, 0);
    tinfo(b, "b", 2, ne4, LLMK_TYPE_F32, 0);
    tinfo(b, "c", 2, ne4, LLMK_TYPE_F32, 0);
    pad(b, 32);
    zeros(b, 256);
    b = bad("tensor data out of table order", LLMK_TENSOR_DATA_OVERLAP);
    header(b, 3, 2, 0);
    tinfo(b, "a", 2, ne4, LLMK_TYPE_F32, 256);
    tinfo(b, "b", 2, ne4, LLMK_TYPE_F32, 0);
    pad(b, 32);
    zeros(b, 512);
    b = bad("truncated inside a u64 count", LLMK_TRUNCATED_FILE);
    header(b, 3, 0, 0);
    b->len -= 3;
}

static void test_bad_cases(void) {
    for (int i = 0; i < n_bad; i++) {
        llmk_gguf *g = (llmk_gguf *)1;
        int st = open_copy(bad_cases[i].b.p, bad_cases[i].b.len, &g);
        if (st != bad_cases[i].want)
            fprintf(stderr, "case '%s': got %s (%s)\n", bad_cases[i].name, llmk_status_name(st),
                    llmk_last_error());
        CHECK_EQ_INT(st, bad_cases[i].want);
        CHECK(g == NULL);
        CHECK(*llmk_last_error() != 0);
    }
    /* a tensor message names the tensor and the numbers */
    for (int i = 0; i < n_bad; i++) {
        if (strcmp(bad_cases[i].name, "data one byte short") != 0) continue;
        llmk_gguf *g;
        open_copy(bad_cases[i].b.p, bad_cases[i].b.len, &g);
        const char *e = llmk_last_error();
        CHECK(strstr(e, "blk.3.attn_q.weight") && strstr(e, "byte 352") && strstr(e, "file has 351"));
        if (!strstr(e, "file has 351")) fprintf(stderr, "message: %s\n", e);
    }
    llmk_gguf *g;
    CHECK_STATUS(llmk_gguf_open("/nonexistent/model.gguf", &g), LLMK_NOT_FOUND);
    CHECK_STATUS(llmk_gguf_open("/tmp", &g), LLMK_IO_ERROR);
    CHECK_STATUS(llmk_gguf_open_memory(NULL, 4, &g), LLMK_INVALID_ARGUMENT);
}

/* ---- the default model ------------------------------------------------- */

static void test_default_model(void) {
    const char *path = check_default_model("test_gguf", 0);
    if (access(path, R_OK) != 0) {
        printf("test_gguf: default model absent, skipping its checks\n");
        return;
    }
    llmk_gguf *g;
    CHECK_STATUS(llmk_gguf_open(path, &g), LLMK_OK);
    if (!g) return;
    const char *arch;
    CHECK_STATUS(llmk_gguf_get_str(g, "general.architecture", &arch, NULL), LLMK_OK);
    CHECK(strcmp(arch, "llama") == 0);
    uint32_t v;
    CHECK_STATUS(llmk_gguf_get_u32(g, "llama.block_count", &v), LLMK_OK);
    CHECK_EQ_INT(v, 30);
    CHECK_STATUS(llmk_gguf_get_u32(g, "llama.embedding_length", &v), LLMK_OK);
    CHECK_EQ_INT(v, 576);
    CHECK_STATUS(llmk_gguf_get_u32(g, "llama.attention.head_count_kv", &v), LLMK_OK);
    CHECK_EQ_INT(v, 3);
    uint32_t et;
    uint64_t n;
    CHECK_STATUS(llmk_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n), LLMK_OK);
    CHECK(et == LLMK_GGUF_STRING && n == 49152);
    const llmk_tensor_info *q = llmk_gguf_find_tensor(g, "blk.3.attn_q.weight");
    CHECK(q && q->n_dims == 2 && q->ne[0] == 576 && q->ne[1] == 576);
    /* every tensor lies inside the file, aligned, sized by its type */
    uint64_t fsz = llmk_gguf_file_size(g), a = llmk_gguf_alignment(g);
    int bad_t = 0;
    for (size_t i = 0; i < llmk_gguf_n_tensors(g); i++) {
        const llmk_tensor_info *t = llmk_gguf_tensor(g, i);
        uint64_t rb;
        if (llmk_row_bytes(t->type, t->ne[0], &rb) != LLMK_OK || rb * (t->n_elements / t->ne[0]) != t->n_bytes ||
            t->offset % a || llmk_gguf_data_offset(g) + t->offset + t->n_bytes > fsz ||
            llmk_gguf_find_tensor(g, t->name) != t)
            bad_t++;
    }
    CHECK_EQ_INT(bad_t, 0);
    CHECK_EQ_INT(llmk_gguf_n_tensors(g), 272);
    llmk_gguf_close(g);
}

static void write_corpus(const char *dir) {
    mkdir(dir, 0755);
    char path[4096];
    for (int i = 0; i < n_bad; i++) {
        snprintf(path, sizeof path, "%s/bad_%02d", dir, i);
        FILE *f = fopen(path, "wb");
        if (!f) continue;
        fwrite(bad_cases[i].b.p, 1, bad_cases[i].b.len, f);
        fclose(f);
    }
    for (uint32_t version = 2; version <= 3; version++) {
        img b = nested_image(version);
        snprintf(path, sizeof path, "%s/nested_v%u", dir, version);
        FILE *f = fopen(path, "wb");
        if (f) {
            fwrite(b.p, 1, b.len, f);
            fclose(f);
        }
        free(b.p);
    }
}

int main(int argc, char **argv) {
    build_bad_cases();
    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0) {
        write_corpus(argv[2]);
        return 0;
    }
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip();
    test_nested_and_v2();
    test_truncations();
    test_mutations();
    test_bad_cases();
    test_default_model();
    for (int i = 0; i < n_bad; i++) free(bad_cases[i].b.p);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp_dir);
    return check_summary("test_gguf");
}
