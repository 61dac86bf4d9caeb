/* A model's fast and f32 paths checked for bitwise determinism, shared by
 * the architecture tests (test_moe.c, test_gemma3.c); tests include it
 * once, after check.h, exec_cpu.h and model.h. Sequences of n tokens (ids
 * spread over the vocabulary) in a context of n_ctx:
 *   fast path: 1, 2 and 3 threads, one chunk vs token by token vs chunks of
 *     7, phase-at-a-time, and sequences decoded alone vs together in one
 *     batch (rows rotated every step);
 *   f32 path: thread counts and batch sizes, and within 1e-4 of the f64
 *     reference. */
#ifndef LLMK_TESTS_MODEL_PATHS_H
#define LLMK_TESTS_MODEL_PATHS_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

static struct llmk_exec *mk(const llmk_model *m, int32_t n_ctx, int threads, int n_batch, int n_seq) {
    struct llmk_exec_params p = {.n_ctx = n_ctx, .n_threads = threads, .n_batch = n_batch, .n_seq = n_seq,
                                 .kv_type = LLMK_TYPE_F16};
    struct llmk_exec *ex = NULL;
    CHECK_STATUS(llmk_exec_init(m, &p, &ex), LLMK_OK);
    return ex;
}

static float *run(const llmk_model *m, int threads, int n_batch, bool phases, const int32_t *ids, size_t n,
                  size_t step) {
    size_t V = (size_t)llmk_model_hparams(m)->n_vocab;
    float *out = calloc(n * V, sizeof *out);
    struct llmk_exec *ex = mk(m, (int32_t)n, threads, n_batch, 1);
    if (!ex) return out;
    llmk_exec_set_phase_mode(ex, phases);
    for (size_t off = 0; off < n; off += step) {
        size_t c = n - off < step ? n - off : step;
        CHECK_STATUS(llmk_exec_eval(ex, 0, ids + off, c, out + off * V, (n - off) * V, true), LLMK_OK);
    }
    llmk_exec_free(ex);
    return out;
}

static int same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

static void fast_determinism(const llmk_model *m, size_t N) {
    size_t V = (size_t)llmk_model_hparams(m)->n_vocab;
    int32_t *ids = malloc(N * sizeof *ids);
    for (size_t i = 0; i < N; i++) ids[i] = (int32_t)((i * 7919u + 17u) % V);
    float *base = run(m, 1, 64, false, ids, N, N), *two = run(m, 2, 64, false, ids, N, N);
    float *three = run(m, 3, 64, false, ids, N, N), *tok = run(m, 2, 64, false, ids, N, 1);
    float *tok3 = run(m, 3, 64, false, ids, N, 1), *small = run(m, 2, 7, false, ids, N, N);
    float *ph = run(m, 2, 64, true, ids, N, N);
    CHECK(same(base, two, N * V));   /* 1 vs 2 threads (prefill: claimed items) */
    CHECK(same(base, three, N * V)); /* 3 threads */
    CHECK(same(base, tok, N * V));   /* one chunk vs token by token (decode: static items) */
    CHECK(same(base, tok3, N * V));
    CHECK(same(base, small, N * V)); /* chunks of 7 rows (at most SPLIT_ROWS: static items) */
    CHECK(same(base, ph, N * V));    /* phase-at-a-time */
    free(base), free(two), free(three), free(tok), free(tok3), free(small), free(ph), free(ids);
}

/* Four sequences, each decoded alone, then all in one batch (rows rotated
 * every step): a row's routing, and so its logits, do not depend on the
 * other rows of the step. */
static void fast_batch(const llmk_model *m) {
    enum { B = 4, STEPS = 6 };
    size_t V = (size_t)llmk_model_hparams(m)->n_vocab, plen[B] = {5, 30, 1, 17};
    int32_t prompt[B][32], gen[B][STEPS];
    float *alone = malloc(B * STEPS * V * sizeof *alone), *batched = malloc(B * V * sizeof *batched);
    for (int b = 0; b < B; b++) {
        for (size_t i = 0; i < plen[b]; i++) prompt[b][i] = (int32_t)((i * 131u + (unsigned)b * 977u + 3u) % V);
        for (int s = 0; s < STEPS; s++) gen[b][s] = (int32_t)(((size_t)s * 31 + (size_t)b * 7 + 1) % V);
        struct llmk_exec *ex = mk(m, 128, 2, 64, 1);
        CHECK_STATUS(llmk_exec_eval(ex, 0, prompt[b], plen[b], NULL, 0, false), LLMK_OK);
        for (int s = 0; s < STEPS; s++)
            CHECK_STATUS(llmk_exec_eval(ex, 0, &gen[b][s], 1, alone + (b * STEPS + s) * V, V, false), LLMK_OK);
        llmk_exec_free(ex);
    }
    struct llmk_exec *ex = mk(m, 128, 2, 64, B);
    for (int b = 0; b < B; b++) CHECK_STATUS(llmk_exec_eval(ex, b, prompt[b], plen[b], NULL, 0, false), LLMK_OK);
    int ok = 1;
    for (int s = 0; s < STEPS; s++) {
        int32_t seqs[B], ids[B], am[B];
        for (int b = 0; b < B; b++) seqs[b] = (b + s) % B, ids[b] = gen[seqs[b]][s];
        CHECK_STATUS(llmk_exec_decode_batch(ex, seqs, ids, B, batched, B * V, am), LLMK_OK);
        for (int b = 0; b < B; b++)
            if (!same(batched + b * V, alone + ((size_t)seqs[b] * STEPS + (size_t)s) * V, V)) ok = 0;
    }
    CHECK(ok);
    llmk_exec_free(ex);
    free(alone), free(batched);
}

static float *session_run(const llmk_model *m, int path, int threads, int n_batch, const int32_t *ids, size_t n) {
    size_t V = (size_t)llmk_model_hparams(m)->n_vocab;
    float *out = calloc(n * V, sizeof *out);
    llmk_session_params sp = {.n_ctx = 64, .n_threads = threads, .n_batch = n_batch, .path = path};
    llmk_session *s = NULL;
    CHECK_STATUS(llmk_session_init(m, &sp, &s), LLMK_OK);
    if (s) CHECK_STATUS(llmk_session_eval(s, ids, n, out, n * V, true), LLMK_OK);
    llmk_session_free(s);
    return out;
}

static void f32_determinism(const llmk_model *m) {
    enum { N = 20 };
    size_t V = (size_t)llmk_model_hparams(m)->n_vocab;
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (int32_t)((i * 613u + 5u) % V);
    float *a = session_run(m, LLMK_PATH_F32, 1, 32, ids, N), *b = session_run(m, LLMK_PATH_F32, 2, 32, ids, N);
    float *c = session_run(m, LLMK_PATH_F32, 3, 3, ids, N), *d = session_run(m, LLMK_PATH_F32, 2, 1, ids, N);
    CHECK(same(a, b, N * V));
    CHECK(same(a, c, N * V));
    CHECK(same(a, d, N * V));
    /* the f64 reference agrees with it */
    float *r = session_run(m, LLMK_PATH_REF, 2, 32, ids, N);
    double worst = 0;
    for (size_t t = 0; t < N; t++) {
        double num = 0, den = 0;
        for (size_t i = 0; i < V; i++) {
            double df = (double)a[t * V + i] - r[t * V + i];
            num += df * df, den += (double)r[t * V + i] * r[t * V + i];
        }
        worst = fmax(worst, sqrt(num / den));
    }
    CHECK(worst < 1e-4);
    free(a), free(b), free(c), free(d), free(r);
}

#endif
