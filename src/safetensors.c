/* safetensors reader. A file is an 8-byte little-endian header length N, N
 * bytes of JSON ({name: {"dtype", "shape", "data_offsets": [begin, end]}, an
 * optional "__metadata__" of strings}), then the data section that the
 * offsets count from. Everything in the header is outside input: each entry
 * is checked (dtype known and supported, shape of sane integers, offsets
 * inside the file and matching the shape's byte count, no overlaps, no
 * duplicate names) before a pointer into the image is handed out. */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct llmk_safetensors {
    const uint8_t *base;
    uint64_t size;
    void *map; /* non-NULL when we own an mmap of size bytes */
    uint64_t data_start;
    size_t n;
    llmk_st_tensor *t;
    cJSON *meta; /* the "__metadata__" object, detached from the header */
};

/* dtype names the format defines; the first three are weights llmk runs,
 * U8 the bytes of packed formats, the rest are named in the refusal. */
static const struct {
    const char *name;
    uint32_t type;
    unsigned bytes;
} dtypes[] = {{"F32", LLMK_TYPE_F32, 4}, {"F16", LLMK_TYPE_F16, 2}, {"BF16", LLMK_TYPE_BF16, 2},
               {"U8", LLMK_TYPE_I8, 1}}; /* bytes: gpt-oss's MXFP4 blocks and scales (src/hf.c), no weight alone */
static const char *const known_unsupported[] = {"F64", "I64", "U64", "I32", "U32", "I16", "U16", "I8",
                                                "BOOL", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4",
                                                "F6_E2M3", "F6_E3M2", "C64"};

void llmk_safetensors_close(llmk_safetensors *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) free(s->t[i].name);
    free(s->t);
    cJSON_Delete(s->meta);
    if (s->map) munmap(s->map, (size_t)s->size);
    free(s);
}

/* A JSON number that is a whole number in [0, 2^53] (exact in a double). */
static bool json_u64(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!isfinite(d) || d < 0 || d > 9007199254740992.0 || floor(d) != d) return false;
    *out = (uint64_t)d;
    return true;
}

static int parse_dtype(const char *name, const cJSON *v, llmk_st_tensor *t, unsigned *bytes) {
    if (!cJSON_IsString(v))
        return llmk_fail(LLMK_BAD_TENSOR_INFO, "safetensors: tensor %.150s: \"dtype\" is missing or not a string",
                         name);
    for (size_t k = 0; k < LLMK_ARRAY_LEN(dtypes); k++)
        if (!strcmp(v->valuestring, dtypes[k].name)) {
            t->type = dtypes[k].type;
            *bytes = dtypes[k].bytes;
            return LLMK_OK;
        }
    for (size_t k = 0; k < LLMK_ARRAY_LEN(known_unsupported); k++)
        if (!strcmp(v->valuestring, known_unsupported[k]))
            return llmk_fail(LLMK_TENSOR_TYPE_UNSUPPORTED,
                             "safetensors: tensor %.150s: dtype %s is not supported (F32, F16, BF16; U8 for MXFP4 blocks)", name,
                             v->valuestring);
    return llmk_fail(LLMK_UNKNOWN_TYPE, "safetensors: tensor %.150s: unknown dtype \"%.32s\"", name,
                     v->valuestring);
}

static int parse_shape(const char *name, const cJSON *v, llmk_st_tensor *t) {
    if (!cJSON_IsArray(v))
        return llmk_fail(LLMK_BAD_TENSOR_INFO, "safetensors: tensor %.150s: \"shape\" is missing or not an array",
                         name);
    int rank = cJSON_GetArraySize(v);
    if (rank < 1 || rank > 4)
        return llmk_fail(LLMK_BAD_TENSOR_INFO, "safetensors: tensor %.150s: rank %d, supported are 1..4", name,
                         rank);
    t->n_dims = (uint32_t)rank;
    t->n_elements = 1;
    for (int d = 0; d < 4; d++) t->shape[d] = 1;
    int d = 0;
    for (const cJSON *e = v->child; e; e = e->next, d++) {
        if (!json_u64(e, &t->shape[d]) || t->shape[d] == 0)
            return llmk_fail(LLMK_BAD_TENSOR_INFO,
                             "safetensors: tensor %.150s: dimension %d is not a positive integer", name, d);
        if (!llmk_mul_u64(t->n_elements, t->shape[d], &t->n_elements))
            return llmk_fail(LLMK_DIMENSION_OVERFLOW, "safetensors: tensor %.150s: shape overflows an element count",
                             name);
    }
    return LLMK_OK;
}

static int parse_entry(llmk_safetensors *s, const cJSON *e, llmk_st_tensor *t) {
    const char *name = e->string;
    if (!cJSON_IsObject(e))
        return llmk_fail(LLMK_BAD_TENSOR_INFO, "safetensors: entry %.150s is not an object", name);
    if (!*name) return llmk_fail(LLMK_BAD_STRING, "safetensors: a tensor has an empty name");
    if (!(t->name = strdup(name))) return llmk_fail(LLMK_OUT_OF_MEMORY, "safetensors: tensor name");
    unsigned bytes = 0;
    int st = parse_dtype(name, cJSON_GetObjectItemCaseSensitive(e, "dtype"), t, &bytes);
    if (st != LLMK_OK) return st;
    if ((st = parse_shape(name, cJSON_GetObjectItemCaseSensitive(e, "shape"), t)) != LLMK_OK) return st;
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || !json_u64(off->child, &t->begin) ||
        !json_u64(off->child->next, &t->end))
        return llmk_fail(LLMK_BAD_TENSOR_INFO,
                         "safetensors: tensor %.150s: \"data_offsets\" is not two non-negative integers", name);
    uint64_t want, data_size = s->size - s->data_start;
    if (!llmk_mul_u64(t->n_elements, bytes, &want))
        return llmk_fail(LLMK_DIMENSION_OVERFLOW, "safetensors: tensor %.150s: byte count overflows", name);
    if (t->end < t->begin || t->end - t->begin != want)
        return llmk_fail(LLMK_BAD_TENSOR_INFO,
                         "safetensors: tensor %.150s: data_offsets [%llu, %llu] hold %lld bytes, its shape needs %llu",
                         name, (unsigned long long)t->begin, (unsigned long long)t->end,
                         (long long)(t->end - t->begin), (unsigned long long)want);
    if (t->end > data_size)
        return llmk_fail(LLMK_OFFSET_OUT_OF_FILE,
                         "safetensors: tensor %.150s: data ends at byte %llu of the data section, which has %llu "
                         "(truncated file?)",
                         name, (unsigned long long)t->end, (unsigned long long)data_size);
    t->data = s->base + s->data_start + t->begin;
    return LLMK_OK;
}

static int cmp_begin(const void *a, const void *b) {
    const llmk_st_tensor *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int check_layout(llmk_safetensors *s) {
    if (s->n) qsort(s->t, s->n, sizeof *s->t, cmp_begin);
    for (size_t i = 1; i < s->n; i++)
        if (s->t[i].begin < s->t[i - 1].end)
            return llmk_fail(LLMK_TENSOR_DATA_OVERLAP,
                             "safetensors: tensors %.100s [%llu, %llu) and %.100s [%llu, %llu) overlap",
                             s->t[i - 1].name, (unsigned long long)s->t[i - 1].begin,
                             (unsigned long long)s->t[i - 1].end, s->t[i].name,
                             (unsigned long long)s->t[i].begin, (unsigned long long)s->t[i].end);
    /* Duplicate names (JSON allows repeated keys; cJSON keeps both): sorted
     * names, adjacent equal ones. */
    const char **names = malloc((s->n ? s->n : 1) * sizeof *names);
    if (!names) return llmk_fail(LLMK_OUT_OF_MEMORY, "safetensors: %zu names", s->n);
    for (size_t i = 0; i < s->n; i++) names[i] = s->t[i].name;
    if (s->n) qsort(names, s->n, sizeof *names, cmp_name);
    int st = LLMK_OK;
    for (size_t i = 1; i < s->n && st == LLMK_OK; i++)
        if (!strcmp(names[i], names[i - 1]))
            st = llmk_fail(LLMK_DUPLICATE_NAME, "safetensors: tensor %.150s appears twice", names[i]);
    free(names);
    return st;
}

static int parse_header(llmk_safetensors *s) {
    if (s->size < 8)
        return llmk_fail(LLMK_TRUNCATED_FILE, "safetensors: file has %llu bytes, too short for the header length",
                         (unsigned long long)s->size);
    uint64_t n = 0;
    for (int k = 0; k < 8; k++) n |= (uint64_t)s->base[k] << (8 * k);
    if (n < 2 || n > LLMK_ST_MAX_HEADER)
        return llmk_fail(LLMK_COUNT_TOO_LARGE, "safetensors: header length %llu is outside [2, %u]",
                         (unsigned long long)n, LLMK_ST_MAX_HEADER);
    if (n > s->size - 8)
        return llmk_fail(LLMK_TRUNCATED_FILE, "safetensors: header of %llu bytes, the file has %llu after the length",
                         (unsigned long long)n, (unsigned long long)(s->size - 8));
    s->data_start = 8 + n;
    const char *json = (const char *)s->base + 8;
    if (json[0] != '{')
        return llmk_fail(LLMK_BAD_MAGIC, "safetensors: header does not start with '{' (not a safetensors file)");
    cJSON *root = cJSON_ParseWithLength(json, (size_t)n);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return llmk_fail(LLMK_BAD_TENSOR_INFO, "safetensors: header is not a JSON object");
    }
    size_t count = 0;
    for (const cJSON *e = root->child; e; e = e->next) count++;
    int st = LLMK_OK;
    s->t = calloc(count ? count : 1, sizeof *s->t);
    if (!s->t) st = llmk_fail(LLMK_OUT_OF_MEMORY, "safetensors: %zu tensor entries", count);
    for (cJSON *e = root->child, *next; e && st == LLMK_OK; e = next) {
        next = e->next;
        if (!strcmp(e->string, "__metadata__")) {
            if (s->meta || !cJSON_IsObject(e)) {
                st = llmk_fail(LLMK_BAD_TENSOR_INFO, "safetensors: \"__metadata__\" is not one object");
                break;
            }
            s->meta = cJSON_DetachItemViaPointer(root, e);
            continue;
        }
        st = parse_entry(s, e, &s->t[s->n]);
        s->n++; /* close() frees its name even when it failed */
    }
    cJSON_Delete(root);
    if (st != LLMK_OK) return st;
    return check_layout(s);
}

int llmk_safetensors_parse(const void *data, size_t size, llmk_safetensors **out) {
    llmk_error_clear();
    if (!out || (!data && size)) return llmk_fail(LLMK_INVALID_ARGUMENT, "safetensors_parse: NULL argument");
    *out = NULL;
    llmk_safetensors *s = calloc(1, sizeof *s);
    if (!s) return llmk_fail(LLMK_OUT_OF_MEMORY, "safetensors handle");
    static const uint8_t empty[1];
    s->base = data ? data : empty;
    s->size = size;
    int st = parse_header(s);
    if (st != LLMK_OK) {
        llmk_safetensors_close(s);
        return st;
    }
    *out = s;
    return LLMK_OK;
}

int llmk_safetensors_open(const char *path, llmk_safetensors **out) {
    llmk_error_clear();
    if (!out || !path) return llmk_fail(LLMK_INVALID_ARGUMENT, "safetensors_open: NULL argument");
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) /* a FIFO would block open() */
        return llmk_fail(LLMK_IO_ERROR, "%s: not a regular file", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        return llmk_fail(e == ENOENT ? LLMK_NOT_FOUND : LLMK_IO_ERROR, "%s: cannot open: %s", path, strerror(e));
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return llmk_fail(LLMK_IO_ERROR, "%s: not a regular file of a mappable size", path);
    }
    size_t size = (size_t)sb.st_size;
    void *map = NULL;
    if (size) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return llmk_fail(LLMK_IO_ERROR, "%s: mmap of %zu bytes failed: %s", path, size, strerror(e));
        }
    }
    close(fd);
    int st = llmk_safetensors_parse(map, size, out);
    if (st != LLMK_OK) {
        if (map) munmap(map, size);
        return llmk_fail(st, "%s: %s", path, llmk_last_error());
    }
    (*out)->map = map;
    return LLMK_OK;
}

size_t llmk_safetensors_n_tensors(const llmk_safetensors *s) { return s ? s->n : 0; }

const llmk_st_tensor *llmk_safetensors_tensor(const llmk_safetensors *s, size_t i) {
    return s && i < s->n ? &s->t[i] : NULL;
}

/* Linear: a checkpoint shard holds at most a few thousand tensors and each is
 * looked up once at load. */
const llmk_st_tensor *llmk_safetensors_find(const llmk_safetensors *s, const char *name) {
    if (!s || !name) return NULL;
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->t[i].name, name)) return &s->t[i];
    return NULL;
}

const char *llmk_safetensors_meta(const llmk_safetensors *s, const char *key) {
    const cJSON *v = s && s->meta ? cJSON_GetObjectItemCaseSensitive(s->meta, key) : NULL;
    return cJSON_IsString(v) ? v->valuestring : NULL;
}
