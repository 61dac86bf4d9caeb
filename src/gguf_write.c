/* GGUF v3 writer. Metadata is encoded as it is set (so the file keeps the
 * insertion order), tensors are collected as borrowed pointers and laid out
 * at write time: infos, padding to the alignment, then each tensor's data
 * padded to the alignment. */
#include "gguf_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define WRITER_ALIGNMENT 32u

struct wbuf {
    uint8_t *p;
    size_t len, cap;
};

struct wtensor {
    char *name;
    uint32_t type, n_dims;
    uint64_t ne[4];
    const void *data;
    uint64_t n_bytes;
};

struct llmk_gguf_writer {
    struct wbuf kv; /* encoded pairs, in insertion order */
    char **keys;
    size_t n_kv, cap_kv;
    struct wtensor *t;
    size_t n_t, cap_t;
    uint32_t alignment;
};

static int wbuf_put(struct wbuf *b, const void *src, size_t n) {
    if (n > SIZE_MAX - b->len) return llmk_fail(LLMK_OUT_OF_MEMORY, "gguf writer: %zu bytes", n);
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) {
            if (cap > SIZE_MAX / 2) return llmk_fail(LLMK_OUT_OF_MEMORY, "gguf writer: buffer");
            cap *= 2;
        }
        uint8_t *p = realloc(b->p, cap);
        if (!p) return llmk_fail(LLMK_OUT_OF_MEMORY, "gguf writer: buffer of %zu bytes", cap);
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
    return LLMK_OK;
}

static void store_le(uint8_t *dst, uint64_t v, unsigned n) {
    for (unsigned k = 0; k < n; k++) dst[k] = (uint8_t)(v >> (8 * k));
}

static int wbuf_uint(struct wbuf *b, uint64_t v, unsigned n) {
    uint8_t tmp[8];
    store_le(tmp, v, n);
    return wbuf_put(b, tmp, n);
}

static int wbuf_str(struct wbuf *b, const char *s, uint64_t n) {
    int st = wbuf_uint(b, n, 8);
    return st != LLMK_OK ? st : wbuf_put(b, s, (size_t)n);
}

int llmk_gguf_writer_init(llmk_gguf_writer **out) {
    llmk_error_clear();
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf_writer_init: NULL out");
    *out = calloc(1, sizeof **out);
    if (!*out) return llmk_fail(LLMK_OUT_OF_MEMORY, "gguf writer");
    (*out)->alignment = WRITER_ALIGNMENT;
    return LLMK_OK;
}

void llmk_gguf_writer_free(llmk_gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    free(w->keys);
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->t);
    free(w->kv.p);
    free(w);
}

/* Start a pair: check the key, remember it, write key and type. The value
 * bytes follow; on a later failure the caller rolls back to `mark`. */
static int begin_kv(llmk_gguf_writer *w, const char *key, uint32_t type, size_t *mark) {
    if (!w || !key) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf writer: NULL argument");
    if (!*key) return llmk_fail(LLMK_BAD_STRING, "gguf writer: empty key");
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0)
            return llmk_fail(LLMK_DUPLICATE_NAME, "gguf writer: key %s set twice", key);
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 16;
        char **k = realloc(w->keys, cap * sizeof *k);
        if (!k) return llmk_fail(LLMK_OUT_OF_MEMORY, "gguf writer: %zu keys", cap);
        w->keys = k;
        w->cap_kv = cap;
    }
    char *copy = strdup(key);
    if (!copy) return llmk_fail(LLMK_OUT_OF_MEMORY, "gguf writer: key %s", key);
    *mark = w->kv.len;
    int st = wbuf_str(&w->kv, key, strlen(key));
    if (st == LLMK_OK) st = wbuf_uint(&w->kv, type, 4);
    if (st != LLMK_OK) {
        free(copy);
        w->kv.len = *mark;
        return st;
    }
    w->keys[w->n_kv++] = copy;
    return LLMK_OK;
}

static int end_kv(llmk_gguf_writer *w, size_t mark, int st) {
    if (st != LLMK_OK) { /* forget the half-written pair */
        w->kv.len = mark;
        free(w->keys[--w->n_kv]);
    }
    return st;
}

/* general.alignment decides where the reader expects data: honour it. */
static int note_alignment(llmk_gguf_writer *w, const char *key, uint32_t type, uint64_t v) {
    if (strcmp(key, "general.alignment") != 0) return LLMK_OK;
    if (type != LLMK_GGUF_UINT32)
        return llmk_fail(LLMK_TYPE_MISMATCH, "gguf writer: general.alignment must be u32, got %s",
                         llmk_gguf_type_name(type) ? llmk_gguf_type_name(type) : "?");
    if (v == 0 || v > (1u << 30) || (v & (v - 1)))
        return llmk_fail(LLMK_BAD_ALIGNMENT, "gguf writer: general.alignment %llu is not a power of two",
                         (unsigned long long)v);
    w->alignment = (uint32_t)v;
    return LLMK_OK;
}

int llmk_gguf_writer_set_scalar(llmk_gguf_writer *w, const char *key, uint32_t type,
                                const void *value) {
    llmk_error_clear();
    unsigned sz = llmk_gguf_scalar_size(type);
    if (!sz)
        return llmk_fail(LLMK_UNKNOWN_TYPE, "gguf writer: key %s: %u is not a scalar value type",
                         key ? key : "(null)", type);
    if (!value) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf writer: key %s: NULL value", key ? key : "(null)");
    uint64_t v = 0;
    memcpy(&v, value, sz); /* host order in, little-endian out */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v >>= 8 * (8 - sz);
#endif
    size_t mark;
    int st = begin_kv(w, key, type, &mark);
    if (st != LLMK_OK) return st;
    st = note_alignment(w, key, type, v);
    if (st == LLMK_OK) st = wbuf_uint(&w->kv, v, sz);
    return end_kv(w, mark, st);
}

int llmk_gguf_writer_set_u32(llmk_gguf_writer *w, const char *key, uint32_t v) {
    llmk_error_clear();
    return llmk_gguf_writer_set_scalar(w, key, LLMK_GGUF_UINT32, &v);
}
int llmk_gguf_writer_set_i32(llmk_gguf_writer *w, const char *key, int32_t v) {
    llmk_error_clear();
    return llmk_gguf_writer_set_scalar(w, key, LLMK_GGUF_INT32, &v);
}
int llmk_gguf_writer_set_u64(llmk_gguf_writer *w, const char *key, uint64_t v) {
    llmk_error_clear();
    return llmk_gguf_writer_set_scalar(w, key, LLMK_GGUF_UINT64, &v);
}
int llmk_gguf_writer_set_f32(llmk_gguf_writer *w, const char *key, float v) {
    llmk_error_clear();
    return llmk_gguf_writer_set_scalar(w, key, LLMK_GGUF_FLOAT32, &v);
}
int llmk_gguf_writer_set_bool(llmk_gguf_writer *w, const char *key, bool v) {
    llmk_error_clear();
    uint8_t b = v ? 1 : 0;
    return llmk_gguf_writer_set_scalar(w, key, LLMK_GGUF_BOOL, &b);
}

int llmk_gguf_writer_set_str(llmk_gguf_writer *w, const char *key, const char *v) {
    llmk_error_clear();
    if (!v) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf writer: key %s: NULL string", key ? key : "(null)");
    size_t mark;
    int st = begin_kv(w, key, LLMK_GGUF_STRING, &mark);
    if (st != LLMK_OK) return st;
    return end_kv(w, mark, wbuf_str(&w->kv, v, strlen(v)));
}

int llmk_gguf_writer_set_arr(llmk_gguf_writer *w, const char *key, uint32_t elem_type,
                             const void *data, uint64_t n) {
    llmk_error_clear();
    unsigned sz = llmk_gguf_scalar_size(elem_type);
    if (!sz)
        return llmk_fail(LLMK_UNKNOWN_TYPE,
                         "gguf writer: key %s: %u is not a numeric element type (strings: set_arr_str)",
                         key ? key : "(null)", elem_type);
    uint64_t bytes;
    if (!llmk_mul_u64(n, sz, &bytes) || bytes > SIZE_MAX)
        return llmk_fail(LLMK_COUNT_TOO_LARGE, "gguf writer: key %s: %llu elements", key ? key : "(null)",
                         (unsigned long long)n);
    if (!data && n) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf writer: key %s: NULL data", key ? key : "(null)");
    size_t mark;
    int st = begin_kv(w, key, LLMK_GGUF_ARRAY, &mark);
    if (st != LLMK_OK) return st;
    st = wbuf_uint(&w->kv, elem_type, 4);
    if (st == LLMK_OK) st = wbuf_uint(&w->kv, n, 8);
    const uint8_t *src = data;
    for (uint64_t i = 0; st == LLMK_OK && i < n; i++) { /* host order in, little-endian out */
        uint64_t v = 0;
        memcpy(&v, src + i * sz, sz);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        v >>= 8 * (8 - sz);
#endif
        st = wbuf_uint(&w->kv, v, sz);
    }
    return end_kv(w, mark, st);
}

int llmk_gguf_writer_set_arr_str(llmk_gguf_writer *w, const char *key, const char *const *strs,
                                 uint64_t n) {
    llmk_error_clear();
    if (!strs && n) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf writer: key %s: NULL strings", key ? key : "(null)");
    for (uint64_t i = 0; i < n; i++)
        if (!strs[i])
            return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf writer: key %s: string %llu is NULL",
                             key ? key : "(null)", (unsigned long long)i);
    size_t mark;
    int st = begin_kv(w, key, LLMK_GGUF_ARRAY, &mark);
    if (st != LLMK_OK) return st;
    st = wbuf_uint(&w->kv, LLMK_GGUF_STRING, 4);
    if (st == LLMK_OK) st = wbuf_uint(&w->kv, n, 8);
    for (uint64_t i = 0; st == LLMK_OK && i < n; i++) st = wbuf_str(&w->kv, strs[i], strlen(strs[i]));
    return end_kv(w, mark, st);
}

int llmk_gguf_writer_copy_kv(llmk_gguf_writer *w, const llmk_gguf *g, size_t i) {
    llmk_error_clear();
    const void *raw;
    uint64_t len;
    int st = llmk_gguf_kv_raw(g, i, &raw, &len);
    if (st != LLMK_OK) return st;
    const char *key = llmk_gguf_kv_key(g, i);
    uint32_t type = llmk_gguf_kv_type(g, i);
    size_t mark;
    st = begin_kv(w, key, type, &mark);
    if (st != LLMK_OK) return st;
    if (strcmp(key, "general.alignment") == 0) {
        uint64_t a = 0;
        if (llmk_gguf_get_u64(g, key, &a) != LLMK_OK) a = 0;
        st = note_alignment(w, key, type, a);
    }
    /* The value's encoding is the same in v2 and v3: copy it unchanged. */
    if (st == LLMK_OK) st = wbuf_put(&w->kv, raw, (size_t)len);
    return end_kv(w, mark, st);
}

int llmk_gguf_writer_add_tensor(llmk_gguf_writer *w, const char *name, uint32_t type,
                                uint32_t n_dims, const uint64_t *ne, const void *data,
                                uint64_t n_bytes) {
    llmk_error_clear();
    if (!w || !name || !ne) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf writer: NULL argument");
    if (!*name) return llmk_fail(LLMK_BAD_STRING, "gguf writer: empty tensor name");
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return llmk_fail(LLMK_DUPLICATE_NAME, "gguf writer: tensor %s added twice", name);
    if (n_dims < 1 || n_dims > 4)
        return llmk_fail(LLMK_BAD_TENSOR_INFO, "gguf writer: tensor %s: n_dims %u, must be 1..4", name, n_dims);
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] == 0)
            return llmk_fail(LLMK_BAD_TENSOR_INFO, "gguf writer: tensor %s: dimension %u is 0", name, d);
        if (!llmk_mul_u64(n, ne[d], &n))
            return llmk_fail(LLMK_DIMENSION_OVERFLOW, "gguf writer: tensor %s: element count overflows", name);
    }
    uint64_t row, want;
    int st = llmk_row_bytes(type, ne[0], &row);
    if (st != LLMK_OK) return llmk_fail(st, "gguf writer: tensor %s: %s", name, llmk_last_error());
    if (!llmk_mul_u64(row, n / ne[0], &want))
        return llmk_fail(LLMK_DIMENSION_OVERFLOW, "gguf writer: tensor %s: byte count overflows", name);
    if (n_bytes != want)
        return llmk_fail(LLMK_BAD_TENSOR_INFO,
                         "gguf writer: tensor %s: %llu bytes given, its shape and type %s need %llu",
                         name, (unsigned long long)n_bytes, llmk_type_name(type),
                         (unsigned long long)want);
    if (!data) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf writer: tensor %s: NULL data", name);
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 16;
        struct wtensor *t = realloc(w->t, cap * sizeof *t);
        if (!t) return llmk_fail(LLMK_OUT_OF_MEMORY, "gguf writer: %zu tensors", cap);
        w->t = t;
        w->cap_t = cap;
    }
    struct wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    if (!t->name) return llmk_fail(LLMK_OUT_OF_MEMORY, "gguf writer: tensor %s", name);
    t->type = type;
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < 4; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->data = data;
    t->n_bytes = n_bytes;
    w->n_t++;
    return LLMK_OK;
}

static uint64_t pad_to(uint64_t x, uint64_t a) { return (a - x % a) % a; }

static int put_zeros(FILE *f, uint64_t n) {
    static const uint8_t zeros[64];
    while (n) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        if (fwrite(zeros, 1, k, f) != k) return -1;
        n -= k;
    }
    return 0;
}

/* Header, tensor infos and data, in that order, onto f. */
int llmk_gguf_writer_write_stream(const llmk_gguf_writer *w, FILE *f, const char *path) {
    llmk_error_clear();
    if (!w || !f || !path) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf_writer_write_stream: NULL argument");
    /* Header and tensor infos go through one buffer; data is streamed after. */
    struct wbuf head = {0};
    uint64_t a = w->alignment, off = 0;
    int st = wbuf_put(&head, "GGUF", 4);
    if (st == LLMK_OK) st = wbuf_uint(&head, 3, 4);
    if (st == LLMK_OK) st = wbuf_uint(&head, w->n_t, 8);
    if (st == LLMK_OK) st = wbuf_uint(&head, w->n_kv, 8);
    if (st == LLMK_OK) st = wbuf_put(&head, w->kv.p, w->kv.len);
    for (size_t i = 0; st == LLMK_OK && i < w->n_t; i++) {
        const struct wtensor *t = &w->t[i];
        st = wbuf_str(&head, t->name, strlen(t->name));
        if (st == LLMK_OK) st = wbuf_uint(&head, t->n_dims, 4);
        for (uint32_t d = 0; st == LLMK_OK && d < t->n_dims; d++) st = wbuf_uint(&head, t->ne[d], 8);
        if (st == LLMK_OK) st = wbuf_uint(&head, t->type, 4);
        if (st == LLMK_OK) st = wbuf_uint(&head, off, 8);
        if (!llmk_add_u64(off, t->n_bytes, &off) || !llmk_add_u64(off, pad_to(off, a), &off))
            st = llmk_fail(LLMK_DIMENSION_OVERFLOW, "gguf writer: data offsets overflow at tensor %s", t->name);
    }
    if (st != LLMK_OK) {
        free(head.p);
        return st;
    }
    int bad = fwrite(head.p, 1, head.len, f) != head.len || put_zeros(f, pad_to(head.len, a));
    free(head.p);
    for (size_t i = 0; !bad && i < w->n_t; i++) {
        const struct wtensor *t = &w->t[i];
        bad = fwrite(t->data, 1, (size_t)t->n_bytes, f) != t->n_bytes ||
              put_zeros(f, pad_to(t->n_bytes, a));
    }
    if (bad) return llmk_fail(LLMK_IO_ERROR, "%s: write failed: %s", path, strerror(errno));
    return LLMK_OK;
}

int llmk_gguf_writer_write(llmk_gguf_writer *w, const char *path) {
    llmk_error_clear();
    if (!w || !path) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf_writer_write: NULL argument");
    llmk_outfile *o;
    int st = llmk_outfile_open(path, NULL, 0, &o);
    if (st != LLMK_OK) return st;
    st = llmk_gguf_writer_write_stream(w, llmk_outfile_stream(o), path);
    if (st != LLMK_OK) {
        llmk_outfile_discard(o); /* removes the temporary file only; the target is untouched */
        return st;
    }
    return llmk_outfile_commit(o);
}
