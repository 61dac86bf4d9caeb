/* Pooling and normalization of hidden states (app/embed_pool.h). */
#include "embed_pool.h"

#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int embed_pooling_from_name(const char *name, int allow_none) {
    if (!strcmp(name, "mean")) return EMBED_POOL_MEAN;
    if (!strcmp(name, "last")) return EMBED_POOL_LAST;
    if (allow_none && !strcmp(name, "none")) return EMBED_POOL_NONE;
    return -1;
}

/* The p-norm is taken of the values over their largest magnitude, so a
 * large p does not overflow; a zero vector stays zero. */
void embed_normalize(double *v, size_t n, long p) {
    if (p < 0) return;
    double amax = 0, sum = 0, scale;
    for (size_t i = 0; i < n; i++) amax = fabs(v[i]) > amax ? fabs(v[i]) : amax;
    if (amax == 0) return;
    if (p == 0) {
        scale = amax / 32760.0;
    } else {
        for (size_t i = 0; i < n; i++) sum += p == 2 ? (v[i] / amax) * (v[i] / amax) : pow(fabs(v[i]) / amax, (double)p);
        scale = amax * (p == 2 ? sqrt(sum) : pow(sum, 1.0 / (double)p));
    }
    for (size_t i = 0; i < n; i++) v[i] /= scale;
}

int embed_scratch_init(struct embed_scratch *sc, size_t max_tokens, size_t E) {
    *sc = (struct embed_scratch){.max_tokens = max_tokens, .E = E};
    if (max_tokens == 0 || E == 0 || max_tokens > SIZE_MAX / sizeof(float) / E)
        return cli_fail(LLMK_INVALID_ARGUMENT, "embeddings: %zu tokens of %zu values", max_tokens, E);
    sc->h = malloc(max_tokens * E * sizeof *sc->h);
    sc->acc = malloc(E * sizeof *sc->acc);
    if (sc->h && sc->acc) return LLMK_OK;
    embed_scratch_free(sc);
    return cli_fail(LLMK_OUT_OF_MEMORY, "embeddings: hidden states of %zu tokens", max_tokens);
}

void embed_scratch_free(struct embed_scratch *sc) {
    free(sc->h);
    free(sc->acc);
    sc->h = NULL, sc->acc = NULL;
}

/* Mean: summed in order in f64, then divided; last: the only row computed;
 * none: every row. Rounded to f32 after normalizing. */
int embed_eval(llmk_session *s, const int32_t *ids, size_t n, int pooling, long normalize, struct embed_scratch *sc,
               float *out) {
    size_t E = sc->E;
    if (n == 0 || n > sc->max_tokens)
        return cli_fail(LLMK_INVALID_ARGUMENT, "embeddings: %zu tokens (1 .. %zu)", n, sc->max_tokens);
    int st = llmk_session_truncate(s, 0);
    if (st == LLMK_OK) st = llmk_session_eval_hidden(s, ids, n, sc->h, sc->max_tokens * E, pooling != EMBED_POOL_LAST);
    if (st != LLMK_OK) return st;
    size_t rows = pooling == EMBED_POOL_NONE ? n : 1;
    double *acc = sc->acc;
    for (size_t r = 0; r < rows; r++) {
        if (pooling == EMBED_POOL_MEAN) {
            for (size_t i = 0; i < E; i++) acc[i] = 0;
            for (size_t t = 0; t < n; t++)
                for (size_t i = 0; i < E; i++) acc[i] += sc->h[t * E + i];
            for (size_t i = 0; i < E; i++) acc[i] /= (double)n;
        } else {
            for (size_t i = 0; i < E; i++) acc[i] = sc->h[r * E + i];
        }
        embed_normalize(acc, E, normalize);
        for (size_t i = 0; i < E; i++) out[r * E + i] = (float)acc[i];
    }
    return LLMK_OK;
}
