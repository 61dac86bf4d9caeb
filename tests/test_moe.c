/* Mixture-of-experts kernels and the qwen3moe paths' determinism.
 *
 * Kernels (src/kernels/moe.c): the router's top-k rule (ties to the lower
 * index, NaN last) and weights against an f64 softmax written here; the tile
 * map against a naive grouping; the combine and the gathered expert matvec of
 * the process's kernel table bit for bit against the scalar references, and
 * the matvec against an f64 dot of the dequantized rows.
 *
 * Model (tests/fixtures/model/tiny/tiny_qwen3moe*.gguf and tiny_gptoss*.gguf, run from the repo
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
#include "model_paths.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    /* the table's router is the one-pass selection, or the reference itself */
    CHECK(llmk_kernels()->moe_router == llmk_moe_router_topk || llmk_kernels()->moe_router == llmk_moe_router_ref);
}

/* The one-pass selection gives the reference's bits (sel and w): random
 * logits drawn from few values (ties), with NaNs and infinities planted,
 * every k up to the expert count (at most the kernels' 64). */
static void router_topk(void) {
    enum { NMAX = 300 };
    float l[NMAX];
    for (int rep = 0; rep < 400; rep++) {
        int n = 1 + (int)((frand() + 1) * 0.5f * (rep < 200 ? 64 : NMAX - 1));
        int k = 1 + (int)((frand() + 1) * 0.5f * (float)(n < LLMK_MOE_KMAX ? n - 1 : LLMK_MOE_KMAX - 1));
        int levels = rep % 3 == 0 ? 4 : 1 << 20;
        for (int e = 0; e < n; e++) l[e] = (float)(int)((frand() + 1) * (float)levels) / (float)levels * 8.0f - 4.0f;
        if (rep % 5 == 1) l[rep % n] = NAN;
        if (rep % 7 == 2) l[(rep * 3) % n] = INFINITY;
        if (rep % 11 == 3) l[(rep * 5) % n] = -INFINITY;
        int32_t sa[LLMK_MOE_KMAX], sb[LLMK_MOE_KMAX];
        float wa[LLMK_MOE_KMAX], wb[LLMK_MOE_KMAX];
        bool norm = rep % 2;
        llmk_moe_router_ref(l, n, k, norm, sa, wa);
        llmk_moe_router_topk(l, n, k, norm, sb, wb);
        CHECK(memcmp(sa, sb, (size_t)k * sizeof *sa) == 0);
        CHECK(memcmp(wa, wb, (size_t)k * sizeof *wa) == 0);
    }
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

static void one_model(const char *path) {
    llmk_model *m = NULL;
    CHECK_STATUS(llmk_model_load(path, &m), LLMK_OK);
    if (!m) return;
    CHECK_EQ_INT(m->moe.n_expert, 8);
    CHECK_EQ_INT(m->moe.n_used, 2);
    fprintf(stderr, "  %s\n", path);
    fast_determinism(m, 40);
    fast_batch(m);
    f32_determinism(m);
    llmk_model_free(m);
}

/* path with its expert stacks quantized to type (the rest copied), written
 * to out: the stacks a route needs that no committed fixture has. */
static bool requantize_experts(const char *path, uint32_t type, const char *out) {
    llmk_gguf *g = NULL;
    llmk_gguf_writer *w = NULL;
    CHECK_STATUS(llmk_gguf_open(path, &g), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_init(&w), LLMK_OK);
    if (!g || !w) return false;
    for (size_t i = 0; i < llmk_gguf_n_kv(g); i++) CHECK_STATUS(llmk_gguf_writer_copy_kv(w, g, i), LLMK_OK);
    size_t nt = llmk_gguf_n_tensors(g);
    void **bufs = calloc(nt, sizeof *bufs);
    for (size_t i = 0; i < nt; i++) {
        const llmk_tensor_info *t = llmk_gguf_tensor(g, i);
        if (!strstr(t->name, "_exps") || t->type != LLMK_TYPE_F32) {
            CHECK_STATUS(llmk_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->n_bytes), LLMK_OK);
            continue;
        }
        uint64_t rb, rows = t->n_elements / t->ne[0];
        CHECK_STATUS(llmk_row_bytes(type, t->ne[0], &rb), LLMK_OK);
        unsigned char *q = bufs[i] = malloc(rb * rows);
        for (uint64_t r = 0; r < rows; r++)
            CHECK_STATUS(llmk_quantize_row(type, (const float *)t->data + r * t->ne[0], q + r * rb, (int64_t)t->ne[0]),
                         LLMK_OK);
        CHECK_STATUS(llmk_gguf_writer_add_tensor(w, t->name, type, t->n_dims, t->ne, q, rb * rows), LLMK_OK);
    }
    int st = llmk_gguf_writer_write(w, out);
    CHECK_STATUS(st, LLMK_OK);
    for (size_t i = 0; i < nt; i++) free(bufs[i]);
    free(bufs);
    llmk_gguf_writer_free(w);
    llmk_gguf_close(g);
    return st == LLMK_OK;
}

/* 8-bit activations into the repacked experts (LLMK_ACT=a8, a8.h), on Q4_1
 * stacks: every determinism promise of the default path, and the logits
 * close to the int16 path's (and not equal: the A8 route ran). */
static void a8_experts(void) {
    char out[] = "/tmp/llmk_test_moe_q4_1_XXXXXX";
    int fd = mkstemp(out);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    if (requantize_experts("tests/fixtures/model/tiny/tiny_qwen3moe.gguf", LLMK_TYPE_Q4_1, out)) {
        llmk_model *m = NULL;
        CHECK_STATUS(llmk_model_load(out, &m), LLMK_OK);
        if (m) {
            enum { N = 24 };
            size_t V = (size_t)llmk_model_hparams(m)->n_vocab;
            int32_t ids[N];
            for (size_t i = 0; i < N; i++) ids[i] = (int32_t)((i * 7919u + 17u) % V);
            float *a16 = run(m, 2, 64, false, ids, N, N);
            llmk_config saved, c;
            llmk_config_get(&saved);
            c = saved, c.act_a8 = true;
            CHECK_STATUS(llmk_configure(&c), LLMK_OK);
            fprintf(stderr, "  %s (Q4_1 experts, a8 activations)\n", out);
            fast_determinism(m, 40);
            fast_batch(m);
            float *a8 = run(m, 2, 64, false, ids, N, N);
            double en = 0, ed = 0;
            int agree = 0;
            for (size_t t = 0; t < N; t++) {
                size_t am8 = 0, am16 = 0;
                for (size_t v = 0; v < V; v++) {
                    double d = (double)a8[t * V + v] - a16[t * V + v];
                    en += d * d, ed += (double)a16[t * V + v] * a16[t * V + v];
                    if (a8[t * V + v] > a8[t * V + am8]) am8 = v;
                    if (a16[t * V + v] > a16[t * V + am16]) am16 = v;
                }
                agree += am8 == am16;
            }
            fprintf(stderr, "  a8 vs a16: rel l2 %.3g, argmax %d/%d\n", sqrt(en / ed), agree, N);
            CHECK(en > 0 && sqrt(en / ed) < 0.05 && agree >= N - 2); /* measured: 0.0089, 24/24 */
            CHECK_STATUS(llmk_configure(&saved), LLMK_OK);
            free(a16), free(a8);
            llmk_model_free(m);
        }
    }
    unlink(out);
}

int main(void) {
    router();
    router_topk();
    tile_map();
    combine();
    expert_matvec();
    one_model("tests/fixtures/model/tiny/tiny_qwen3moe.gguf");
    one_model("tests/fixtures/model/tiny/tiny_qwen3moe_q8_0.gguf");
    /* gpt-oss: sinks, biases, clamped experts, windows on layers 0 and 2 */
    one_model("tests/fixtures/model/tiny/tiny_gptoss.gguf");
    one_model("tests/fixtures/model/tiny/tiny_gptoss_mxfp4.gguf");
    a8_experts();
    return check_summary("test_moe");
}
