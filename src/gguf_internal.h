/* Pieces of the GGUF reader the writer shares (src/gguf.c, src/gguf_write.c). */
#ifndef LLMK_GGUF_INTERNAL_H
#define LLMK_GGUF_INTERNAL_H

#include "internal.h"

/* Bytes of one scalar metadata value; 0 for STRING, ARRAY and unknown ids. */
unsigned llmk_gguf_scalar_size(uint32_t type);

/* The encoded bytes of metadata value i as they are in the file (after the
 * type id): what copy_kv writes out again unchanged. */
int llmk_gguf_kv_raw(const llmk_gguf *g, size_t i, const void **raw, uint64_t *len);

/* Copy n bytes of tensor data at p (inside g's image) to dst without
 * mapping them into the resident set where g is a mapped file. */
void llmk_gguf_read_range(const llmk_gguf *g, const void *p, uint64_t n, void *dst);

/* Give back the resident pages of a mapped file range (tensor data a
 * caller has repacked and will not read again soon); a no-op off a mapping. */
void llmk_gguf_release_range(const llmk_gguf *g, const void *p, uint64_t n);

/* A GGUF view of tensors another reader found (src/hf.c): the metadata is
 * parsed from `meta`, a GGUF image of meta_size bytes holding no tensors
 * (malloc'd; the view owns it); the n tensor infos are copied (names too)
 * and their data must stay valid until close, which calls release(owner).
 * On failure everything given is freed/released as well. */
int llmk_gguf_open_view(uint8_t *meta, size_t meta_size, const llmk_tensor_info *tensors, size_t n,
                        void (*release)(void *), void *owner, llmk_gguf **out);

#endif
