/* Mixture-of-experts kernels and the qwen3moe paths' determinism.
 *
 * Kernels (src/kernels/moe.c): the router's top-k rule (ties to the lower
 * index, NaN last) and weights against an f64 softmax written here; the tile
 * map against a naive grouping; the combine and the gathered expert matvec of
 * the process's kernel table bit for bit against the scalar references, and
 * the matvec against an f64 dot of the dequantized rows.
 *
 * Model (tests/fixtures/model/tiny/tiny_qwen3moe*.gguf, run from the repo
 * root): logits bitwise identical for 1, 2 and 3 threads, one chunk vs token
 * by token vs chunks of 7, phase-at-a-time, and for sequences decoded alone
 * vs together in one batch; the f32 path for thread counts and batch sizes.
 * Accuracy against transformers is tests/py/test_moe.py's. */
#include "check.h"
#include "exec_cpu.h"
#include "internal.h"
#include "kernels/kernels.h"
#include "kernels/moe.h"
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 7;
static float frand(void) { /* uniform in [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 40) / (double)(1ull << 23) - 1.0);
}

/* ---- router -------------------------------------------------------------- */

static void router_expect(const float *l, int n, int k, bool norm, const int32_t *want_sel) {
    int32_t sel[LLMK_MOE_KMAX];
    float w[LLMK_MOE_KMAX];
    llmk_moe_router_ref(l, n, k, norm, sel, w);
    double mx = -INFINITY, sum = 0, ssum = 0;
    for (int e = 0; e < n; e++)
        if (!isnan(l[e]) && l[e] > mx) mx = l[e];
    for (int e = 0; e < n; e++) sum += isnan(l[e]) ? 0 : exp((double)l[e] - mx);
    for (int j = 0; j < k; j++) {
        CHECK_EQ_INT(sel[j], want_sel[j]);
        ssum += exp((double)l[want_sel[j]] - mx) / sum;
    }
    for (int j = 0; j < k; j++) {
        double p = exp((double)l[want_sel[j]] - mx) / sum;
        CHECK_NEAR(w[j], norm ? p / ssum : p, 1e-7);
    }
}

static void router(void) {
    float l1[] = {1, 3, 3, 2, 3};
    router_expect(l1, 5, 2, true, (int32_t[]){1, 2});
    router_expect(l1, 5, 4, true, (int32_t[]){1, 2, 4, 3});
    router_expect(l1, 5, 3, false, (int32_t[]){1, 2, 4});
    float l2[8] = {0}; /* all tied: the first k */
    router_expect(l2, 8, 3, true, (int32_t[]){0, 1, 2});
    float l3[] = {-5, 0.5f, 7, 0.5f, -1, 7, 2, 0.5f};
    router_expect(l3, 8, 2, true, (int32_t[]){2, 5});
    router_expect(l3, 8, 5, true, (int32_t[]){2, 5, 6, 1, 3});
    /* a NaN ranks after every number, whatever its index */
    float l4[] = {NAN, 1, 2, NAN};
    int32_t sel[4];
    float w[4];
    llmk_moe_router_ref(l4, 4, 3, true, sel, w);
    CHECK_EQ_INT(sel[0], 2);
    CHECK_EQ_INT(sel[1], 1);
    CHECK_EQ_INT(sel[2], 0);
    /* the table's router is the reference */
    CHECK(llmk_kernels()->moe_router == llmk_moe_router_ref);
}

/* ---- tile map ------------------------------------------------------------ */

static void tile_map(void) {
    enum { R = 37, K = 3, X = 11 };
    int32_t sel[R * K], off[X + 1], slots[R * K];
    for (int t = 0; t < R; t++) /* k distinct experts per row, skewed towards low ids, some experts unused */
        for (int j = 0; j < K; j++) {
            int e;
            bool dup;
            do {
                e = (int)((frand() + 1) * (frand() + 1) * X / 4) % (X - 2);
                dup = false;
                for (int i = 0; i < j; i++) dup = dup || sel[t * K + i] == e;
            } while (dup);
            sel[t * K + j] = e;
        }
    llmk_moe_tile_map(sel, R, K, X, off, slots);
    int p = 0;
    for (int e = 0; e < X; e++) {
        CHECK_EQ_INT(off[e], p);
        for (int s = 0; s < R * K; s++) /* naive: every slot of e, in slot order */
            if (sel[s] == e) {
                CHECK_EQ_INT(slots[p], s);
                p++;
            }
    }
    CHECK_EQ_INT(off[X], R * K);
    CHECK_EQ_INT(off[X - 1], off[X]); /* unused experts are empty */
}

/* ---- combine ------------------------------------------------------------- */

static void combine(void) {
    const struct llmk_kernels *K = llmk_kernels();
    for (int k = 1; k <= 9; k += 2)
        for (int64_t n = 1; n <= 67; n += 11) {
            float y[9][67], w[9], x0[67], xa[67], xb[67];
            const float *ys[9];
            for (int j = 0; j < k; j++) {
                w[j] = frand();
                ys[j] = y[j];
                for (int64_t i = 0; i < n; i++) y[j][i] = 100 * frand();
            }
            for (int64_t i = 0; i < n; i++) x0[i] = xa[i] = xb[i] = frand();
            llmk_moe_combine_ref(xa, ys, w, k, n);
            K->moe_combine(xb, ys, w, k, n);
            CHECK(memcmp(xa, xb, (size_t)n * sizeof(float)) == 0);
            double err = 0;
            for (int64_t i = 0; i < n; i++) {
                double acc = 0;
                for (int j = 0; j < k; j++) acc += (double)w[j] * y[j][i];
                err = fmax(err, fabs(xa[i] - (x0[i] + acc)));
            }
            CHECK(err < 1e-3);
        }
}

/* ---- gathered expert matvec ---------------------------------------------- */

static void expert_matvec_type(uint32_t type, int64_t kin) {
    const struct llmk_codec *c = llmk_codec_get(type);
    if (!c || !c->dot) return;
    enum { ROWS = 24, X = 5, M = 3 };
    uint64_t rb;
    CHECK_STATUS(llmk_row_bytes(type, (uint64_t)kin, &rb), LLMK_OK);
    unsigned char *data = malloc(rb * ROWS * X);
    float *wf = malloc(sizeof(float) * (size_t)kin * ROWS * X), *row = malloc(sizeof(float) * (size_t)kin);
    for (int64_t r = 0; r < ROWS * X; r++) {
        for (int64_t i = 0; i < kin; i++) row[i] = frand();
        c->quantize(row, data + r * rb, kin);
        CHECK_STATUS(llmk_dequantize_row(type, data + r * rb, wf + r * kin, kin), LLMK_OK);
    }
    llmk_tensor_info t = {.name = "exps", .type = type, .n_dims = 3, .ne = {(uint64_t)kin, ROWS, X, 1},
                          .n_elements = (uint64_t)kin * ROWS * X, .n_bytes = rb * ROWS * X, .data = data};
    /* M activation rows in the codec's form */
    uint64_t ab = (uint64_t)kin * sizeof(float);
    if (c->act_type != LLMK_TYPE_F32) CHECK_STATUS(llmk_row_bytes(c->act_type, (uint64_t)kin, &ab), LLMK_OK);
    unsigned char *act = malloc(ab * M);
    float *af = malloc(sizeof(float) * (size_t)kin * M);
    for (int i = 0; i < M; i++) {
        for (int64_t j = 0; j < kin; j++) row[j] = frand();
        if (c->act_type == LLMK_TYPE_F32) memcpy(act + i * ab, row, ab);
        else llmk_codec_get(c->act_type)->quantize(row, act + i * ab, kin);
        CHECK_STATUS(llmk_dequantize_row(c->act_type, act + i * ab, af + i * kin, kin), LLMK_OK);
    }
    /* the gathered matvec is the table's vec_dot per row, bit for bit (so a
     * row's result does not depend on the rows or experts beside it), for
     * the process's table and the references; each close to an f64 dot */
    const struct llmk_kernels *tabs[2] = {llmk_kernels(), llmk_kernels_ref()};
    for (int ti = 0; ti < 2; ti++)
        for (int64_t e = 0; e < X; e += 2)
            for (int m = 1; m <= M; m++) {
                const struct llmk_type_kernels *tk = &tabs[ti]->type[type];
                float y[M][ROWS], one[ROWS];
                llmk_moe_expert_matvec(tk, &t, e, 3, 19, act, ab, m, y[0], ROWS);
                for (int i = 0; i < m; i++) {
                    tk->vec_dot(kin, data + (e * ROWS + 3) * rb, rb, 16, act + i * ab, one);
                    CHECK(memcmp(y[i], one, 16 * sizeof(float)) == 0);
                    for (int64_t r = 3; r < 19; r++) {
                        double d = 0, mag = 0;
                        for (int64_t j = 0; j < kin; j++) {
                            double p = (double)wf[((e * ROWS) + r) * kin + j] * af[i * kin + j];
                            d += p, mag += fabs(p);
                        }
                        CHECK(fabs(y[i][r - 3] - d) <= 1e-3 * mag);
                    }
                }
            }
    free(data), free(wf), free(row), free(act), free(af);
}

static void expert_matvec(void) {
    const uint32_t types[] = {LLMK_TYPE_F32, LLMK_TYPE_F16, LLMK_TYPE_Q4_0, LLMK_TYPE_Q4_1, LLMK_TYPE_Q8_0,
                              LLMK_TYPE_Q4_K, LLMK_TYPE_Q5_K, LLMK_TYPE_Q6_K};
    for (size_t i = 0; i < LLMK_ARRAY_LEN(types); i++) expert_matvec_type(types[i], 512);
}

/* ---- the model's paths ---------------------------------------------------- */

static struct llmk_exec *mk(const llmk_model *m, int threads, int n_batch, int n_seq) {
    struct llmk_exec_params p = {.n_ctx = 128, .n_threads = threads, .n_batch = n_batch, .n_seq = n_seq,
                                 .kv_type = LLMK_TYPE_F16};
    struct llmk_exec *ex = NULL;
    CHECK_STATUS(llmk_exec_init(m, &p, &ex), LLMK_OK);
    return ex;
}

static float *run(const llmk_model *m, int threads, int n_batch, bool phases, const int32_t *ids, size_t n,
                  size_t step) {
    size_t V = (size_t)llmk_model_hparams(m)->n_vocab;
    float *out = calloc(n * V, sizeof *out);
    struct llmk_exec *ex = mk(m, threads, n_batch, 1);
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

static void fast_determinism(const llmk_model *m) {
    enum { N = 40 };
    size_t V = (size_t)llmk_model_hparams(m)->n_vocab;
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (int32_t)((i * 7919u + 17u) % V);
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
    free(base), free(two), free(three), free(tok), free(tok3), free(small), free(ph);
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
        struct llmk_exec *ex = mk(m, 2, 64, 1);
        CHECK_STATUS(llmk_exec_eval(ex, 0, prompt[b], plen[b], NULL, 0, false), LLMK_OK);
        for (int s = 0; s < STEPS; s++)
            CHECK_STATUS(llmk_exec_eval(ex, 0, &gen[b][s], 1, alone + (b * STEPS + s) * V, V, false), LLMK_OK);
        llmk_exec_free(ex);
    }
    struct llmk_exec *ex = mk(m, 2, 64, B);
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

static void one_model(const char *path) {
    llmk_model *m = NULL;
    CHECK_STATUS(llmk_model_load(path, &m), LLMK_OK);
    if (!m) return;
    CHECK_EQ_INT(m->moe.n_expert, 8);
    CHECK_EQ_INT(m->moe.n_used, 2);
    fprintf(stderr, "  %s\n", path);
    fast_determinism(m);
    fast_batch(m);
    f32_determinism(m);
    llmk_model_free(m);
}

int main(void) {
    router();
    tile_map();
    combine();
    expert_matvec();
    one_model("tests/fixtures/model/tiny/tiny_qwen3moe.gguf");
    one_model("tests/fixtures/model/tiny/tiny_qwen3moe_q8_0.gguf");
    return check_summary("test_moe");
}
