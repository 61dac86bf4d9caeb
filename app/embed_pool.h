/* One input's embeddings from an llmk session: the hidden states of its
 * tokens (llmk_session_eval_hidden), pooled and normalized. Shared by
 * `llmk embed` and llmk serve's /v1/embeddings, so both give the same
 * vectors bit for bit (docs/embeddings.md). */
#ifndef LLMK_APP_EMBED_POOL_H
#define LLMK_APP_EMBED_POOL_H

#include "llmk.h"

#include <stddef.h>
#include <stdint.h>

enum embed_pooling { EMBED_POOL_MEAN, EMBED_POOL_LAST, EMBED_POOL_NONE };

/* "mean", "last", "none" (with allow_none); -1 for anything else. */
int embed_pooling_from_name(const char *name, int allow_none);

/* llama.cpp's --embd-normalize p of one vector, in f64: -1 none, 0 int16
 * range, p >= 1 the p-norm. */
void embed_normalize(double *v, size_t n, long p);

/* Scratch for embed_eval: hidden states of up to max_tokens tokens. */
struct embed_scratch {
    float *h;
    double *acc;
    size_t max_tokens, E;
};
int embed_scratch_init(struct embed_scratch *sc, size_t max_tokens, size_t E);
void embed_scratch_free(struct embed_scratch *sc);

/* ids (1 .. sc->max_tokens of them) evaluated on s from position 0 (the
 * session is truncated first), pooled: out gets one row of E floats, or n
 * rows with EMBED_POOL_NONE. An llmk status (the session's message). */
int embed_eval(llmk_session *s, const int32_t *ids, size_t n, int pooling, long normalize, struct embed_scratch *sc,
               float *out);

#endif
