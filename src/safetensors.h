/* safetensors reader (src/safetensors.c): one file of a Hugging Face
 * checkpoint, mapped read-only. Not installed; used by src/hf.c, the fuzz
 * target and the tests. */
#ifndef LLMK_SAFETENSORS_H
#define LLMK_SAFETENSORS_H

#include "internal.h"

/* The header is JSON of at most this many bytes (the reference library's
 * own bound): a larger length field is a corrupt or hostile file. */
#define LLMK_ST_MAX_HEADER (100u << 20)

typedef struct llmk_st_tensor {
    char *name;          /* NUL-terminated */
    uint32_t type;       /* LLMK_TYPE_F32, _F16 or _BF16 */
    uint32_t n_dims;     /* 1..4 */
    uint64_t shape[4];   /* as the file lists it: shape[0] outermost (rows) */
    uint64_t n_elements;
    uint64_t begin, end; /* data_offsets, from the start of the data section */
    const void *data;    /* into the image; end - begin bytes */
} llmk_st_tensor;

typedef struct llmk_safetensors llmk_safetensors;

/* Parse an image already in memory (no copy: `data` must outlive the
 * handle). Every tensor's dtype, shape and data_offsets are checked against
 * the image: offsets inside the data section, end - begin equal to the
 * shape's byte count, no two tensors overlapping, no duplicate names. */
int llmk_safetensors_parse(const void *data, size_t size, llmk_safetensors **out);
/* Map `path` read-only and parse it; the mapping lives as long as the handle. */
int llmk_safetensors_open(const char *path, llmk_safetensors **out);
void llmk_safetensors_close(llmk_safetensors *s);

size_t llmk_safetensors_n_tensors(const llmk_safetensors *s);
/* Tensors in data order (ascending begin). */
const llmk_st_tensor *llmk_safetensors_tensor(const llmk_safetensors *s, size_t i);
const llmk_st_tensor *llmk_safetensors_find(const llmk_safetensors *s, const char *name);
/* A "__metadata__" string value, or NULL. */
const char *llmk_safetensors_meta(const llmk_safetensors *s, const char *key);

#endif
