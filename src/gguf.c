/* GGUF v2/v3 reader. The file is mapped read-only and parsed once, front to
 * back; every length, count, dimension product and offset is checked against
 * the bytes that remain before it is used, so the accessors afterwards never
 * look outside the mapping. Multi-byte values are assembled byte by byte
 * (GGUF is little-endian), so unaligned fields and any host order are fine. */
#include "gguf_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Nested arrays deeper than this are refused: no real key nests at all, and
 * the recursion must be bounded on hostile input. */
#define GGUF_MAX_DEPTH 8
#define GGUF_DEFAULT_ALIGNMENT 32u

struct gguf_kv {
    char *key;
    uint32_t type;
    const uint8_t *raw; /* the value's bytes in the image (after the type id) */
    uint64_t raw_len;
    union {
        uint64_t u;
        int64_t i;
        double f;
    } num;
    char *str; /* STRING: copied, NUL-terminated */
    uint64_t str_len;
    /* ARRAY */
    uint32_t elem_type;
    uint64_t count;
    const uint8_t *elems; /* numeric elements in the image */
    char *arena;          /* string elements, each NUL-terminated */
    uint64_t *str_off;    /* count+1 offsets into arena (length = next - this - 1) */
};

struct name_index {
    uint32_t *slot; /* item index + 1; 0 = empty */
    size_t cap;     /* power of two */
};

struct llmk_gguf {
    const uint8_t *base;
    uint64_t size;
    void *map; /* non-NULL when we own an mmap */
    int fd;    /* the mapped file, for llmk_gguf_read_range; -1 otherwise */
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    size_t n_kv;
    struct gguf_kv *kv;
    struct name_index kv_index;
    size_t n_tensors;
    llmk_tensor_info *tensors;
    struct name_index tensor_index;
    /* A view (llmk_gguf_open_view): the metadata image it parsed, and what
     * keeps its tensors' data alive, released at close. */
    uint8_t *own_meta;
    void (*release)(void *);
    void *owner;
};

/* ---- little-endian loads -------------------------------------------------- */

static uint64_t load_le(const uint8_t *p, unsigned n) {
    uint64_t v = 0;
    for (unsigned k = 0; k < n; k++) v |= (uint64_t)p[k] << (8 * k);
    return v;
}

static int64_t sign_extend(uint64_t v, unsigned bytes) {
    if (bytes >= 8) return (int64_t)v;
    uint64_t sign = (uint64_t)1 << (8 * bytes - 1);
    return (int64_t)((v ^ sign) - sign);
}

static double f32_from_bits(uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static double f64_from_bits(uint64_t b) {
    double d;
    memcpy(&d, &b, 8);
    return d;
}

/* Bytes of one scalar value type; 0 for STRING, ARRAY and unknown ids. */
unsigned llmk_gguf_scalar_size(uint32_t type) {
    switch (type) {
    case LLMK_GGUF_UINT8: case LLMK_GGUF_INT8: case LLMK_GGUF_BOOL: return 1;
    case LLMK_GGUF_UINT16: case LLMK_GGUF_INT16: return 2;
    case LLMK_GGUF_UINT32: case LLMK_GGUF_INT32: case LLMK_GGUF_FLOAT32: return 4;
    case LLMK_GGUF_UINT64: case LLMK_GGUF_INT64: case LLMK_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

const char *llmk_gguf_type_name(uint32_t type) {
    static const char *const names[] = {"u8",  "i8",  "u16",   "i16", "u32", "i32",   "f32",
                                        "bool", "str", "array", "u64", "i64", "f64"};
    return type < LLMK_ARRAY_LEN(names) ? names[type] : NULL;
}

static bool is_signed_int(uint32_t t) {
    return t == LLMK_GGUF_INT8 || t == LLMK_GGUF_INT16 || t == LLMK_GGUF_INT32 ||
           t == LLMK_GGUF_INT64;
}
static bool is_unsigned_int(uint32_t t) {
    return t == LLMK_GGUF_UINT8 || t == LLMK_GGUF_UINT16 || t == LLMK_GGUF_UINT32 ||
           t == LLMK_GGUF_UINT64;
}
static bool is_float(uint32_t t) { return t == LLMK_GGUF_FLOAT32 || t == LLMK_GGUF_FLOAT64; }

/* A scalar at p (its size checked by the caller) as a double. */
static double scalar_to_double(uint32_t type, const uint8_t *p) {
    unsigned n = llmk_gguf_scalar_size(type);
    uint64_t v = load_le(p, n);
    if (type == LLMK_GGUF_FLOAT32) return f32_from_bits((uint32_t)v);
    if (type == LLMK_GGUF_FLOAT64) return f64_from_bits(v);
    if (is_signed_int(type)) return (double)sign_extend(v, n);
    return (double)v; /* unsigned and bool */
}

/* ---- name index (open addressing, FNV-1a) ---------------------------------- */

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int index_init(struct name_index *ix, size_t n, const char *what) {
    size_t cap = 16;
    while (cap < 2 * n) {
        if (cap > SIZE_MAX / 4) return llmk_fail(LLMK_OUT_OF_MEMORY, "%s index: %zu names", what, n);
        cap *= 2;
    }
    ix->slot = calloc(cap, sizeof *ix->slot);
    if (!ix->slot) return llmk_fail(LLMK_OUT_OF_MEMORY, "%s index: %zu slots", what, cap);
    ix->cap = cap;
    return LLMK_OK;
}

/* Index of `name` among items named by get(ctx, i), or -1. */
typedef const char *(*name_of_fn)(const void *ctx, size_t i);

static int64_t index_find(const struct name_index *ix, const char *name, name_of_fn get,
                          const void *ctx) {
    if (!ix->slot) return -1;
    size_t mask = ix->cap - 1;
    for (size_t h = (size_t)hash_name(name) & mask;; h = (h + 1) & mask) {
        uint32_t s = ix->slot[h];
        if (!s) return -1;
        if (strcmp(get(ctx, s - 1), name) == 0) return (int64_t)(s - 1);
    }
}

/* Insert item i; returns the index of an earlier item with the same name, or -1. */
static int64_t index_insert(struct name_index *ix, size_t i, name_of_fn get, const void *ctx) {
    const char *name = get(ctx, i);
    size_t mask = ix->cap - 1;
    for (size_t h = (size_t)hash_name(name) & mask;; h = (h + 1) & mask) {
        uint32_t s = ix->slot[h];
        if (!s) {
            ix->slot[h] = (uint32_t)(i + 1);
            return -1;
        }
        if (strcmp(get(ctx, s - 1), name) == 0) return (int64_t)(s - 1);
    }
}

static const char *kv_name(const void *ctx, size_t i) {
    return ((const llmk_gguf *)ctx)->kv[i].key;
}
static const char *tensor_name(const void *ctx, size_t i) {
    return ((const llmk_gguf *)ctx)->tensors[i].name;
}

/* ---- the parser ------------------------------------------------------------- */

struct parser {
    const uint8_t *base;
    uint64_t size, pos;
    char what[192]; /* the item being read, for messages: "key general.name" */
};

static uint64_t remaining(const struct parser *p) { return p->size - p->pos; }

static int need(struct parser *p, uint64_t n, const char *field) {
    if (n > remaining(p))
        return llmk_fail(LLMK_TRUNCATED_FILE,
                         "%s: %s needs %llu bytes at byte %llu, file has %llu", p->what, field,
                         (unsigned long long)n, (unsigned long long)p->pos,
                         (unsigned long long)p->size);
    return LLMK_OK;
}

static int read_uint(struct parser *p, unsigned n, const char *field, uint64_t *out) {
    int st = need(p, n, field);
    if (st != LLMK_OK) return st;
    *out = load_le(p->base + p->pos, n);
    p->pos += n;
    return LLMK_OK;
}

static int read_u32(struct parser *p, const char *field, uint32_t *out) {
    uint64_t v = 0;
    int st = read_uint(p, 4, field, &v);
    *out = (uint32_t)v;
    return st;
}

/* A GGUF string: u64 length, then the bytes. Leaves *s pointing into the image. */
static int read_string(struct parser *p, const char *field, const uint8_t **s, uint64_t *len) {
    uint64_t n;
    int st = read_uint(p, 8, field, &n);
    if (st != LLMK_OK) return st;
    if (n > remaining(p))
        return llmk_fail(LLMK_BAD_STRING,
                         "%s: %s length %llu at byte %llu runs past the end of the file (%llu bytes)",
                         p->what, field, (unsigned long long)n, (unsigned long long)(p->pos - 8),
                         (unsigned long long)p->size);
    *s = p->base + p->pos;
    *len = n;
    p->pos += n;
    return LLMK_OK;
}

static char *copy_str(const uint8_t *s, uint64_t n) {
    if (n >= SIZE_MAX) return NULL;
    char *c = malloc((size_t)n + 1);
    if (!c) return NULL;
    if (n) memcpy(c, s, (size_t)n);
    c[n] = 0;
    return c;
}

/* Names (keys and tensor names) are looked up as C strings: empty names and
 * names holding a NUL byte could never be found, so they are refused. */
static int check_name(struct parser *p, const uint8_t *s, uint64_t n, const char *kind,
                      uint64_t at) {
    if (n == 0)
        return llmk_fail(LLMK_BAD_STRING, "%s: empty %s at byte %llu", p->what, kind,
                         (unsigned long long)at);
    if (memchr(s, 0, (size_t)n))
        return llmk_fail(LLMK_BAD_STRING, "%s: %s of %llu bytes at byte %llu holds a NUL byte",
                         p->what, kind, (unsigned long long)n, (unsigned long long)at);
    return LLMK_OK;
}

/* Smallest encoding of one array element of `type` (for count checks). */
static uint64_t min_elem_bytes(uint32_t type) {
    if (type == LLMK_GGUF_STRING) return 8;
    if (type == LLMK_GGUF_ARRAY) return 12;
    return llmk_gguf_scalar_size(type);
}

/* Validate and skip one value of `type` (a nested array element when depth > 0). */
static int skip_value(struct parser *p, uint32_t type, int depth);

static int read_array_header(struct parser *p, int depth, uint32_t *elem_type, uint64_t *count) {
    int st = read_u32(p, "array element type", elem_type);
    if (st != LLMK_OK) return st;
    if (!llmk_gguf_type_name(*elem_type))
        return llmk_fail(LLMK_UNKNOWN_TYPE, "%s: unknown array element type %u at byte %llu",
                         p->what, *elem_type, (unsigned long long)(p->pos - 4));
    if (*elem_type == LLMK_GGUF_ARRAY && depth + 1 >= GGUF_MAX_DEPTH)
        return llmk_fail(LLMK_COUNT_TOO_LARGE, "%s: arrays nested deeper than %d at byte %llu",
                         p->what, GGUF_MAX_DEPTH, (unsigned long long)(p->pos - 4));
    st = read_uint(p, 8, "array count", count);
    if (st != LLMK_OK) return st;
    uint64_t min = min_elem_bytes(*elem_type);
    if (*count > remaining(p) / min)
        return llmk_fail(LLMK_COUNT_TOO_LARGE,
                         "%s: array of %llu %s elements (at least %llu bytes each) at byte %llu, "
                         "only %llu bytes remain",
                         p->what, (unsigned long long)*count, llmk_gguf_type_name(*elem_type),
                         (unsigned long long)min, (unsigned long long)(p->pos - 8),
                         (unsigned long long)remaining(p));
    return LLMK_OK;
}

static int skip_value(struct parser *p, uint32_t type, int depth) {
    unsigned sz = llmk_gguf_scalar_size(type);
    if (sz) {
        int st = need(p, sz, "value");
        if (st == LLMK_OK) p->pos += sz;
        return st;
    }
    if (type == LLMK_GGUF_STRING) {
        const uint8_t *s;
        uint64_t n;
        return read_string(p, "string value", &s, &n);
    }
    if (type != LLMK_GGUF_ARRAY)
        return llmk_fail(LLMK_UNKNOWN_TYPE, "%s: unknown value type %u", p->what, type);
    uint32_t et;
    uint64_t count;
    int st = read_array_header(p, depth, &et, &count);
    if (st != LLMK_OK) return st;
    unsigned esz = llmk_gguf_scalar_size(et);
    if (esz) { /* count * esz <= remaining was checked */
        p->pos += count * esz;
        return LLMK_OK;
    }
    for (uint64_t k = 0; k < count; k++) {
        st = skip_value(p, et, depth + 1);
        if (st != LLMK_OK) return st;
    }
    return LLMK_OK;
}

/* Parse the value of kv (its type already read) into its decoded form. */
static int parse_value(struct parser *p, struct gguf_kv *kv) {
    uint64_t start = p->pos;
    unsigned sz = llmk_gguf_scalar_size(kv->type);
    int st;
    if (sz) {
        uint64_t v;
        st = read_uint(p, sz, "value", &v);
        if (st != LLMK_OK) return st;
        if (kv->type == LLMK_GGUF_FLOAT32) kv->num.f = f32_from_bits((uint32_t)v);
        else if (kv->type == LLMK_GGUF_FLOAT64) kv->num.f = f64_from_bits(v);
        else if (is_signed_int(kv->type)) kv->num.i = sign_extend(v, sz);
        else kv->num.u = v;
    } else if (kv->type == LLMK_GGUF_STRING) {
        const uint8_t *s;
        st = read_string(p, "string value", &s, &kv->str_len);
        if (st != LLMK_OK) return st;
        kv->str = copy_str(s, kv->str_len);
        if (!kv->str)
            return llmk_fail(LLMK_OUT_OF_MEMORY, "%s: string of %llu bytes", p->what,
                             (unsigned long long)kv->str_len);
    } else if (kv->type == LLMK_GGUF_ARRAY) {
        st = read_array_header(p, 0, &kv->elem_type, &kv->count);
        if (st != LLMK_OK) return st;
        unsigned esz = llmk_gguf_scalar_size(kv->elem_type);
        if (esz) {
            kv->elems = p->base + p->pos;
            p->pos += kv->count * esz;
        } else if (kv->elem_type == LLMK_GGUF_STRING) {
            /* Two passes: validate and size, then copy into one arena. */
            uint64_t first = p->pos, total = 0;
            for (uint64_t k = 0; k < kv->count; k++) {
                const uint8_t *s;
                uint64_t n;
                char field[48];
                snprintf(field, sizeof field, "string element %llu", (unsigned long long)k);
                st = read_string(p, field, &s, &n);
                if (st != LLMK_OK) return st;
                total += n + 1; /* bounded by the file size plus count */
            }
            if (total >= SIZE_MAX || kv->count >= SIZE_MAX / 8)
                return llmk_fail(LLMK_OUT_OF_MEMORY, "%s: %llu strings", p->what,
                                 (unsigned long long)kv->count);
            kv->arena = malloc(total ? (size_t)total : 1);
            kv->str_off = malloc(((size_t)kv->count + 1) * sizeof *kv->str_off);
            if (!kv->arena || !kv->str_off)
                return llmk_fail(LLMK_OUT_OF_MEMORY, "%s: %llu strings of %llu bytes", p->what,
                                 (unsigned long long)kv->count, (unsigned long long)total);
            uint64_t at = 0, q = first;
            for (uint64_t k = 0; k < kv->count; k++) {
                uint64_t n = load_le(p->base + q, 8);
                kv->str_off[k] = at;
                if (n) memcpy(kv->arena + at, p->base + q + 8, (size_t)n);
                kv->arena[at + n] = 0;
                at += n + 1;
                q += 8 + n;
            }
            kv->str_off[kv->count] = at;
        } else { /* nested arrays: validated, only the count is exposed */
            for (uint64_t k = 0; k < kv->count; k++) {
                st = skip_value(p, kv->elem_type, 1);
                if (st != LLMK_OK) return st;
            }
        }
    } else {
        return llmk_fail(LLMK_UNKNOWN_TYPE, "%s: unknown value type %u at byte %llu", p->what,
                         kv->type, (unsigned long long)(p->pos - 4));
    }
    kv->raw = p->base + start;
    kv->raw_len = p->pos - start;
    return LLMK_OK;
}

static int parse_kvs(struct parser *p, llmk_gguf *g, uint64_t n_kv) {
    /* Each pair takes at least a key length (8), one key byte and a type (4). */
    if (n_kv > remaining(p) / 13)
        return llmk_fail(LLMK_COUNT_TOO_LARGE,
                         "header: %llu metadata keys cannot fit in the %llu bytes after the header",
                         (unsigned long long)n_kv, (unsigned long long)remaining(p));
    if (n_kv >= UINT32_MAX)
        return llmk_fail(LLMK_COUNT_TOO_LARGE, "header: %llu metadata keys", (unsigned long long)n_kv);
    g->kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kv);
    if (!g->kv) return llmk_fail(LLMK_OUT_OF_MEMORY, "%llu metadata keys", (unsigned long long)n_kv);
    int st = index_init(&g->kv_index, (size_t)n_kv, "metadata");
    if (st != LLMK_OK) return st;
    for (uint64_t i = 0; i < n_kv; i++) {
        struct gguf_kv *kv = &g->kv[i];
        snprintf(p->what, sizeof p->what, "metadata key %llu", (unsigned long long)i);
        const uint8_t *s;
        uint64_t n, at = p->pos;
        st = read_string(p, "key", &s, &n);
        if (st != LLMK_OK) return st;
        st = check_name(p, s, n, "key", at);
        if (st != LLMK_OK) return st;
        kv->key = copy_str(s, n);
        if (!kv->key) return llmk_fail(LLMK_OUT_OF_MEMORY, "key of %llu bytes", (unsigned long long)n);
        g->n_kv = (size_t)i + 1; /* from here on close() frees this entry */
        snprintf(p->what, sizeof p->what, "key %.150s", kv->key);
        int64_t dup = index_insert(&g->kv_index, (size_t)i, kv_name, g);
        if (dup >= 0)
            return llmk_fail(LLMK_DUPLICATE_NAME, "key %.150s: appears as metadata pair %lld and %llu",
                             kv->key, (long long)dup, (unsigned long long)i);
        st = read_u32(p, "value type", &kv->type);
        if (st != LLMK_OK) return st;
        if (!llmk_gguf_type_name(kv->type))
            return llmk_fail(LLMK_UNKNOWN_TYPE, "key %.150s: unknown value type %u at byte %llu",
                             kv->key, kv->type, (unsigned long long)(p->pos - 4));
        st = parse_value(p, kv);
        if (st != LLMK_OK) return st;
    }
    return LLMK_OK;
}

static int parse_tensor_info(struct parser *p, llmk_gguf *g, uint64_t i) {
    llmk_tensor_info *t = &g->tensors[i];
    snprintf(p->what, sizeof p->what, "tensor info %llu", (unsigned long long)i);
    const uint8_t *s;
    uint64_t n, at = p->pos;
    int st = read_string(p, "name", &s, &n);
    if (st != LLMK_OK) return st;
    st = check_name(p, s, n, "tensor name", at);
    if (st != LLMK_OK) return st;
    char *name = copy_str(s, n);
    if (!name) return llmk_fail(LLMK_OUT_OF_MEMORY, "tensor name of %llu bytes", (unsigned long long)n);
    t->name = name;
    g->n_tensors = (size_t)i + 1;
    snprintf(p->what, sizeof p->what, "tensor %.150s", name);
    int64_t dup = index_insert(&g->tensor_index, (size_t)i, tensor_name, g);
    if (dup >= 0)
        return llmk_fail(LLMK_DUPLICATE_NAME, "tensor %.150s: appears as tensor %lld and %llu", name,
                         (long long)dup, (unsigned long long)i);
    st = read_u32(p, "n_dims", &t->n_dims);
    if (st != LLMK_OK) return st;
    if (t->n_dims < 1 || t->n_dims > 4)
        return llmk_fail(LLMK_BAD_TENSOR_INFO, "tensor %.150s: n_dims %u, must be 1..4", name,
                         t->n_dims);
    t->n_elements = 1;
    for (unsigned d = 0; d < 4; d++) t->ne[d] = 1;
    for (unsigned d = 0; d < t->n_dims; d++) {
        st = read_uint(p, 8, "dimension", &t->ne[d]);
        if (st != LLMK_OK) return st;
    }
    for (unsigned d = 0; d < t->n_dims; d++) {
        if (t->ne[d] == 0)
            return llmk_fail(LLMK_BAD_TENSOR_INFO, "tensor %.150s: dimension %u is 0", name, d);
        if (!llmk_mul_u64(t->n_elements, t->ne[d], &t->n_elements))
            return llmk_fail(LLMK_DIMENSION_OVERFLOW,
                             "tensor %.150s: shape [%llu, %llu, %llu, %llu] overflows an element count",
                             name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                             (unsigned long long)t->ne[2], (unsigned long long)t->ne[3]);
    }
    st = read_u32(p, "type", &t->type);
    if (st != LLMK_OK) return st;
    if (!llmk_type_name(t->type))
        return llmk_fail(LLMK_UNKNOWN_TYPE, "tensor %.150s: unknown tensor type id %u", name, t->type);
    uint64_t row;
    st = llmk_row_bytes(t->type, t->ne[0], &row);
    if (st == LLMK_BAD_TENSOR_INFO)
        return llmk_fail(st, "tensor %.150s: row of %llu elements is not whole %s blocks of %u",
                         name, (unsigned long long)t->ne[0], llmk_type_name(t->type),
                         llmk_type_block_elems(t->type));
    if (st != LLMK_OK || !llmk_mul_u64(row, t->n_elements / t->ne[0], &t->n_bytes))
        return llmk_fail(LLMK_DIMENSION_OVERFLOW,
                         "tensor %.150s: %llu elements of %s overflow a byte count", name,
                         (unsigned long long)t->n_elements, llmk_type_name(t->type));
    return read_uint(p, 8, "offset", &t->offset);
}

static int parse_tensors(struct parser *p, llmk_gguf *g, uint64_t n_tensors) {
    /* Each info takes at least a name (8 + 1), n_dims (4), a dim (8), type (4), offset (8). */
    if (n_tensors > remaining(p) / 33)
        return llmk_fail(LLMK_COUNT_TOO_LARGE,
                         "header: %llu tensor infos cannot fit in the %llu bytes after the metadata",
                         (unsigned long long)n_tensors, (unsigned long long)remaining(p));
    if (n_tensors >= UINT32_MAX)
        return llmk_fail(LLMK_COUNT_TOO_LARGE, "header: %llu tensors", (unsigned long long)n_tensors);
    g->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *g->tensors);
    if (!g->tensors)
        return llmk_fail(LLMK_OUT_OF_MEMORY, "%llu tensor infos", (unsigned long long)n_tensors);
    int st = index_init(&g->tensor_index, (size_t)n_tensors, "tensor");
    if (st != LLMK_OK) return st;
    for (uint64_t i = 0; i < n_tensors; i++) {
        st = parse_tensor_info(p, g, i);
        if (st != LLMK_OK) return st;
    }
    return LLMK_OK;
}

static int read_alignment(llmk_gguf *g) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t k = llmk_gguf_find_key(g, "general.alignment");
    if (k < 0) return LLMK_OK;
    const struct gguf_kv *kv = &g->kv[k];
    if (!is_unsigned_int(kv->type) && !is_signed_int(kv->type))
        return llmk_fail(LLMK_TYPE_MISMATCH, "key general.alignment: holds %s, expected u32",
                         llmk_gguf_type_name(kv->type));
    uint64_t a = kv->num.u;
    if (is_signed_int(kv->type) && kv->num.i < 0) a = 0;
    if (a == 0 || a > (1u << 30) || (a & (a - 1)))
        return llmk_fail(LLMK_BAD_ALIGNMENT,
                         "key general.alignment: %lld is not a power of two in [1, 2^30]",
                         is_signed_int(kv->type) ? (long long)kv->num.i : (long long)a);
    g->alignment = (uint32_t)a;
    return LLMK_OK;
}

static int place_tensors(llmk_gguf *g, uint64_t infos_end) {
    uint64_t a = g->alignment, start;
    if (!llmk_add_u64(infos_end, a - 1, &start))
        return llmk_fail(LLMK_DIMENSION_OVERFLOW, "data section start overflows");
    g->data_offset = start / a * a;
    uint64_t prev_end = 0; /* end of the previous tensor's data, relative to the data section */
    for (size_t i = 0; i < g->n_tensors; i++) {
        llmk_tensor_info *t = &g->tensors[i];
        /* As llama.cpp requires: each tensor's data follows the previous one's.
         * Overlapping ranges would let one write show through another tensor. */
        if (t->offset < prev_end)
            return llmk_fail(LLMK_TENSOR_DATA_OVERLAP,
                             "tensor %.150s: data at offset %llu begins before the previous tensor %.150s "
                             "ends (offset %llu); tensor data must not overlap and must be in table order",
                             t->name, (unsigned long long)t->offset, g->tensors[i - 1].name,
                             (unsigned long long)prev_end);
        if (t->offset % a)
            return llmk_fail(LLMK_BAD_ALIGNMENT,
                             "tensor %.150s: data offset %llu is not a multiple of the alignment %u",
                             t->name, (unsigned long long)t->offset, g->alignment);
        uint64_t begin, end;
        if (!llmk_add_u64(g->data_offset, t->offset, &begin) ||
            !llmk_add_u64(begin, t->n_bytes, &end))
            return llmk_fail(LLMK_OFFSET_OUT_OF_FILE,
                             "tensor %.150s: data of %llu bytes at offset %llu (data section at "
                             "byte %llu) ends past byte 2^64, file has %llu",
                             t->name, (unsigned long long)t->n_bytes,
                             (unsigned long long)t->offset, (unsigned long long)g->data_offset,
                             (unsigned long long)g->size);
        if (end > g->size)
            return llmk_fail(LLMK_OFFSET_OUT_OF_FILE,
                             "tensor %.150s: data ends at byte %llu, file has %llu (%llu bytes at "
                             "offset %llu of the data section at byte %llu)",
                             t->name, (unsigned long long)end, (unsigned long long)g->size,
                             (unsigned long long)t->n_bytes, (unsigned long long)t->offset,
                             (unsigned long long)g->data_offset);
        t->data = g->base + begin;
        prev_end = t->offset + t->n_bytes; /* no wrap: begin + n_bytes did not */
    }
    return LLMK_OK;
}

static int parse(llmk_gguf *g) {
    struct parser p = {.base = g->base, .size = g->size, .pos = 0};
    snprintf(p.what, sizeof p.what, "header");
    if (g->size < 4)
        return llmk_fail(LLMK_TRUNCATED_FILE, "header: file has %llu bytes, too short for the magic",
                         (unsigned long long)g->size);
    if (memcmp(g->base, "GGUF", 4) != 0)
        return llmk_fail(LLMK_BAD_MAGIC,
                         "header: magic bytes %02x %02x %02x %02x, expected \"GGUF\"", g->base[0],
                         g->base[1], g->base[2], g->base[3]);
    p.pos = 4;
    int st = read_u32(&p, "version", &g->version);
    if (st != LLMK_OK) return st;
    if (g->version != 2 && g->version != 3) {
        if (g->version == 1)
            return llmk_fail(LLMK_BAD_VERSION, "header: GGUF version 1 is not supported (only 2 and 3)");
        if ((g->version & 0xffff) == 0)
            return llmk_fail(LLMK_BAD_VERSION,
                             "header: version %u (a big-endian file?); only little-endian 2 and 3",
                             g->version);
        return llmk_fail(LLMK_BAD_VERSION, "header: GGUF version %u, supported are 2 and 3",
                         g->version);
    }
    uint64_t n_tensors, n_kv;
    if ((st = read_uint(&p, 8, "tensor count", &n_tensors)) != LLMK_OK) return st;
    if ((st = read_uint(&p, 8, "metadata count", &n_kv)) != LLMK_OK) return st;
    if ((st = parse_kvs(&p, g, n_kv)) != LLMK_OK) return st;
    if ((st = read_alignment(g)) != LLMK_OK) return st;
    if ((st = parse_tensors(&p, g, n_tensors)) != LLMK_OK) return st;
    return place_tensors(g, p.pos);
}

/* ---- open / close -------------------------------------------------------- */

void llmk_gguf_close(llmk_gguf *g) {
    if (!g) return;
    for (size_t i = 0; i < g->n_kv; i++) {
        free(g->kv[i].key);
        free(g->kv[i].str);
        free(g->kv[i].arena);
        free(g->kv[i].str_off);
    }
    free(g->kv);
    free(g->kv_index.slot);
    for (size_t i = 0; i < g->n_tensors; i++) free((char *)g->tensors[i].name);
    free(g->tensors);
    free(g->tensor_index.slot);
    if (g->map) munmap(g->map, (size_t)g->size);
    if (g->fd >= 0) close(g->fd);
    if (g->release) g->release(g->owner);
    free(g->own_meta);
    free(g);
}

static int open_image(const void *data, size_t size, void *map, llmk_gguf **out) {
    llmk_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        if (map) munmap(map, size);
        return llmk_fail(LLMK_OUT_OF_MEMORY, "gguf handle");
    }
    g->base = data;
    g->size = size;
    g->map = map;
    g->fd = -1;
    int st = parse(g);
    if (st != LLMK_OK) {
        llmk_gguf_close(g);
        return st;
    }
    *out = g;
    return LLMK_OK;
}

int llmk_gguf_open_memory(const void *data, size_t size, llmk_gguf **out) {
    llmk_error_clear();
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf_open_memory: NULL out");
    *out = NULL;
    if (!data && size) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf_open_memory: NULL data");
    static const uint8_t empty[1];
    return open_image(data ? data : empty, size, NULL, out);
}

int llmk_gguf_open_view(uint8_t *meta, size_t meta_size, const llmk_tensor_info *tensors, size_t n,
                        void (*release)(void *), void *owner, llmk_gguf **out) {
    *out = NULL;
    llmk_gguf *g = NULL;
    int st = open_image(meta, meta_size, NULL, &g);
    if (st == LLMK_OK && g->n_tensors)
        st = llmk_fail(LLMK_BAD_TENSOR_INFO, "view: the metadata image holds tensors");
    if (st != LLMK_OK) {
        llmk_gguf_close(g);
        if (release) release(owner);
        free(meta);
        return st;
    }
    g->own_meta = meta;
    g->release = release;
    g->owner = owner;
    free(g->tensors);
    free(g->tensor_index.slot);
    g->tensor_index.slot = NULL;
    g->tensors = calloc(n ? n : 1, sizeof *g->tensors);
    if (!g->tensors) st = llmk_fail(LLMK_OUT_OF_MEMORY, "view: %zu tensor infos", n);
    if (st == LLMK_OK) st = index_init(&g->tensor_index, n, "tensor");
    for (size_t i = 0; st == LLMK_OK && i < n; i++) {
        g->tensors[i] = tensors[i];
        g->tensors[i].name = copy_str((const uint8_t *)tensors[i].name, strlen(tensors[i].name));
        if (!g->tensors[i].name) {
            st = llmk_fail(LLMK_OUT_OF_MEMORY, "view: tensor name");
            break;
        }
        g->n_tensors = i + 1;
        int64_t dup = index_insert(&g->tensor_index, i, tensor_name, g);
        if (dup >= 0)
            st = llmk_fail(LLMK_DUPLICATE_NAME, "tensor %.150s: appears twice", tensors[i].name);
    }
    if (st != LLMK_OK) {
        llmk_gguf_close(g);
        return st;
    }
    *out = g;
    return LLMK_OK;
}

int llmk_gguf_open(const char *path, llmk_gguf **out) {
    llmk_error_clear();
    if (!out || !path) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf_open: NULL argument");
    *out = NULL;
    /* A FIFO or device would block open() or read forever: refuse it before
     * opening. O_NONBLOCK covers the race of a path swapped in between; the
     * fstat below checks what was really opened. */
    struct stat pre;
    if (stat(path, &pre) == 0 && !S_ISREG(pre.st_mode))
        return llmk_fail(LLMK_IO_ERROR, "%s: not a regular file (a %s)", path,
                         S_ISDIR(pre.st_mode) ? "directory" : S_ISFIFO(pre.st_mode) ? "FIFO" : "device or socket");
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        return llmk_fail(e == ENOENT ? LLMK_NOT_FOUND : LLMK_IO_ERROR, "%s: cannot open: %s", path,
                         strerror(e));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return llmk_fail(LLMK_IO_ERROR, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return llmk_fail(LLMK_IO_ERROR, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return llmk_fail(LLMK_IO_ERROR, "%s: %lld bytes do not fit the address space", path,
                         (long long)sb.st_size);
    }
    size_t size = (size_t)sb.st_size;
    if (size == 0) { /* mmap refuses length 0; the parser reports the short file */
        close(fd);
        int st = llmk_gguf_open_memory(NULL, 0, out);
        if (st != LLMK_OK) return llmk_fail(st, "%s: %s", path, llmk_last_error());
        return st;
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    if (map == MAP_FAILED) {
        close(fd);
        return llmk_fail(LLMK_IO_ERROR, "%s: mmap of %zu bytes failed: %s", path, size, strerror(e));
    }
    int st = open_image(map, size, map, out);
    if (st != LLMK_OK) {
        close(fd);
        return llmk_fail(st, "%s: %s", path, llmk_last_error());
    }
    (*out)->fd = fd; /* kept for llmk_gguf_read_range */
    return LLMK_OK;
}

/* ---- accessors ------------------------------------------------------------- */

uint32_t llmk_gguf_version(const llmk_gguf *g) { return g ? g->version : 0; }
uint32_t llmk_gguf_alignment(const llmk_gguf *g) { return g ? g->alignment : 0; }
uint64_t llmk_gguf_file_size(const llmk_gguf *g) { return g ? g->size : 0; }
uint64_t llmk_gguf_data_offset(const llmk_gguf *g) { return g ? g->data_offset : 0; }
size_t llmk_gguf_n_kv(const llmk_gguf *g) { return g ? g->n_kv : 0; }

const char *llmk_gguf_kv_key(const llmk_gguf *g, size_t i) {
    return g && i < g->n_kv ? g->kv[i].key : NULL;
}

uint32_t llmk_gguf_kv_type(const llmk_gguf *g, size_t i) {
    return g && i < g->n_kv ? g->kv[i].type : UINT32_MAX;
}

int64_t llmk_gguf_find_key(const llmk_gguf *g, const char *key) {
    if (!g || !key) return -1;
    return index_find(&g->kv_index, key, kv_name, g);
}

int llmk_gguf_kv_raw(const llmk_gguf *g, size_t i, const void **raw, uint64_t *len) {
    if (!g || i >= g->n_kv || !raw || !len)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf_kv_raw: bad argument (index %zu)", i);
    *raw = g->kv[i].raw;
    *len = g->kv[i].raw_len;
    return LLMK_OK;
}

static int lookup(const llmk_gguf *g, const char *key, const struct gguf_kv **kv) {
    if (!g || !key) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf get: NULL argument");
    int64_t k = llmk_gguf_find_key(g, key);
    if (k < 0) return llmk_fail(LLMK_NOT_FOUND, "key %s: not in the file", key);
    *kv = &g->kv[k];
    return LLMK_OK;
}

static int mismatch(const char *key, uint32_t type, const char *want) {
    return llmk_fail(LLMK_TYPE_MISMATCH, "key %s: holds %s, expected %s", key,
                     llmk_gguf_type_name(type), want);
}

/* Any integer-typed value within [lo, hi] (as signed) or [0, uhi] (unsigned). */
static int get_int(const llmk_gguf *g, const char *key, int64_t lo, uint64_t hi, const char *want,
                   uint64_t *bits) {
    const struct gguf_kv *kv = NULL;
    int st = lookup(g, key, &kv);
    if (st != LLMK_OK) return st;
    if (is_unsigned_int(kv->type)) {
        if (kv->num.u > hi)
            return llmk_fail(LLMK_TYPE_MISMATCH, "key %s: value %llu does not fit %s", key,
                             (unsigned long long)kv->num.u, want);
        *bits = kv->num.u;
        return LLMK_OK;
    }
    if (is_signed_int(kv->type)) {
        if (kv->num.i < lo || (kv->num.i >= 0 && (uint64_t)kv->num.i > hi))
            return llmk_fail(LLMK_TYPE_MISMATCH, "key %s: value %lld does not fit %s", key,
                             (long long)kv->num.i, want);
        *bits = (uint64_t)kv->num.i;
        return LLMK_OK;
    }
    return mismatch(key, kv->type, want);
}

int llmk_gguf_get_u32(const llmk_gguf *g, const char *key, uint32_t *out) {
    llmk_error_clear();
    uint64_t v;
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf_get_u32: NULL out");
    int st = get_int(g, key, 0, UINT32_MAX, "u32", &v);
    if (st == LLMK_OK) *out = (uint32_t)v;
    return st;
}

int llmk_gguf_get_i32(const llmk_gguf *g, const char *key, int32_t *out) {
    llmk_error_clear();
    uint64_t v;
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf_get_i32: NULL out");
    int st = get_int(g, key, INT32_MIN, INT32_MAX, "i32", &v);
    if (st == LLMK_OK) *out = (int32_t)(int64_t)v;
    return st;
}

int llmk_gguf_get_u64(const llmk_gguf *g, const char *key, uint64_t *out) {
    llmk_error_clear();
    uint64_t v;
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf_get_u64: NULL out");
    int st = get_int(g, key, 0, UINT64_MAX, "u64", &v);
    if (st == LLMK_OK) *out = v;
    return st;
}

int llmk_gguf_get_i64(const llmk_gguf *g, const char *key, int64_t *out) {
    llmk_error_clear();
    uint64_t v;
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf_get_i64: NULL out");
    int st = get_int(g, key, INT64_MIN, INT64_MAX, "i64", &v);
    if (st == LLMK_OK) *out = (int64_t)v;
    return st;
}

int llmk_gguf_get_f64(const llmk_gguf *g, const char *key, double *out) {
    llmk_error_clear();
    const struct gguf_kv *kv = NULL;
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf_get_f64: NULL out");
    int st = lookup(g, key, &kv);
    if (st != LLMK_OK) return st;
    if (!is_float(kv->type)) return mismatch(key, kv->type, "f32 or f64");
    *out = kv->num.f;
    return LLMK_OK;
}

int llmk_gguf_get_f32(const llmk_gguf *g, const char *key, float *out) {
    llmk_error_clear();
    double d;
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf_get_f32: NULL out");
    int st = llmk_gguf_get_f64(g, key, &d);
    if (st == LLMK_OK) *out = (float)d;
    return st;
}

int llmk_gguf_get_bool(const llmk_gguf *g, const char *key, bool *out) {
    llmk_error_clear();
    const struct gguf_kv *kv = NULL;
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf_get_bool: NULL out");
    int st = lookup(g, key, &kv);
    if (st != LLMK_OK) return st;
    if (kv->type != LLMK_GGUF_BOOL) return mismatch(key, kv->type, "bool");
    *out = kv->num.u != 0;
    return LLMK_OK;
}

int llmk_gguf_get_str(const llmk_gguf *g, const char *key, const char **s, size_t *len) {
    llmk_error_clear();
    const struct gguf_kv *kv = NULL;
    if (!s) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf_get_str: NULL out");
    int st = lookup(g, key, &kv);
    if (st != LLMK_OK) return st;
    if (kv->type != LLMK_GGUF_STRING) return mismatch(key, kv->type, "str");
    *s = kv->str;
    if (len) *len = (size_t)kv->str_len;
    return LLMK_OK;
}

int llmk_gguf_get_arr(const llmk_gguf *g, const char *key, uint32_t *elem_type, uint64_t *n) {
    llmk_error_clear();
    const struct gguf_kv *kv = NULL;
    int st = lookup(g, key, &kv);
    if (st != LLMK_OK) return st;
    if (kv->type != LLMK_GGUF_ARRAY) return mismatch(key, kv->type, "array");
    if (elem_type) *elem_type = kv->elem_type;
    if (n) *n = kv->count;
    return LLMK_OK;
}

static int array_elem(const llmk_gguf *g, const char *key, uint64_t i, const struct gguf_kv **kv) {
    int st = lookup(g, key, kv);
    if (st != LLMK_OK) return st;
    if ((*kv)->type != LLMK_GGUF_ARRAY) return mismatch(key, (*kv)->type, "array");
    if (i >= (*kv)->count)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "key %s: element %llu of an array of %llu", key,
                         (unsigned long long)i, (unsigned long long)(*kv)->count);
    return LLMK_OK;
}

int llmk_gguf_arr_str(const llmk_gguf *g, const char *key, uint64_t i, const char **s, size_t *len) {
    llmk_error_clear();
    const struct gguf_kv *kv = NULL;
    if (!s) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf_arr_str: NULL out");
    int st = array_elem(g, key, i, &kv);
    if (st != LLMK_OK) return st;
    if (kv->elem_type != LLMK_GGUF_STRING)
        return llmk_fail(LLMK_TYPE_MISMATCH, "key %s: array of %s, expected array of str", key,
                         llmk_gguf_type_name(kv->elem_type));
    *s = kv->arena + kv->str_off[i];
    if (len) *len = (size_t)(kv->str_off[i + 1] - kv->str_off[i] - 1);
    return LLMK_OK;
}

int llmk_gguf_arr_num(const llmk_gguf *g, const char *key, uint64_t i, double *out) {
    llmk_error_clear();
    const struct gguf_kv *kv = NULL;
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "gguf_arr_num: NULL out");
    int st = array_elem(g, key, i, &kv);
    if (st != LLMK_OK) return st;
    unsigned sz = llmk_gguf_scalar_size(kv->elem_type);
    if (!sz)
        return llmk_fail(LLMK_TYPE_MISMATCH, "key %s: array of %s, expected a numeric array", key,
                         llmk_gguf_type_name(kv->elem_type));
    *out = scalar_to_double(kv->elem_type, kv->elems + i * sz);
    return LLMK_OK;
}

size_t llmk_gguf_n_tensors(const llmk_gguf *g) { return g ? g->n_tensors : 0; }

const llmk_tensor_info *llmk_gguf_tensor(const llmk_gguf *g, size_t i) {
    return g && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const llmk_tensor_info *llmk_gguf_find_tensor(const llmk_gguf *g, const char *name) {
    if (!g || !name) return NULL;
    int64_t k = index_find(&g->tensor_index, name, tensor_name, g);
    return k < 0 ? NULL : &g->tensors[k];
}

/* Copies n bytes of tensor data at p into dst. From a mapped file they are
 * read with pread, so that the mapping's pages never enter this process's
 * resident set (a repacked tensor is read once: mapping it would hold a
 * second copy until released, however the kernel maps and counts file
 * pages); a failed read falls back to the mapping, which holds the same
 * bytes. */
void llmk_gguf_read_range(const llmk_gguf *g, const void *p, uint64_t n, void *dst) {
    uintptr_t lo = (uintptr_t)p, base = g && g->map ? (uintptr_t)g->map : 0;
    if (g && g->fd >= 0 && lo >= base && n <= g->size && lo - base <= g->size - n) {
        uint64_t done = 0;
        while (done < n) {
            ssize_t r = pread(g->fd, (unsigned char *)dst + done, (size_t)(n - done), (off_t)(lo - base + done));
            if (r > 0) done += (uint64_t)r;
            else if (r < 0 && errno == EINTR) continue;
            else break;
        }
        if (done == n) return;
    }
    memcpy(dst, p, (size_t)n);
}

/* Drops the pages wholly inside [p, p + n) from this process's memory when
 * they belong to the file mapping: they are read-only copies of the file,
 * so a later access reads them again (never zeroes, as it would for
 * anonymous memory: a buffer-backed reader is left alone). */
void llmk_gguf_release_range(const llmk_gguf *g, const void *p, uint64_t n) {
    if (!g || !g->map || !p || n == 0) return;
    uintptr_t lo = (uintptr_t)p, hi = lo + n, base = (uintptr_t)g->map, end = base + g->size;
    if (lo < base || hi > end || hi < lo) return;
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0) return;
    uintptr_t a = (lo + (uintptr_t)ps - 1) / (uintptr_t)ps * (uintptr_t)ps, b = hi / (uintptr_t)ps * (uintptr_t)ps;
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}
