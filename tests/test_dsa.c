/* DSA kernels (src/kernels/dsa.h): the AVX2 set against the scalar
 * references bit for bit over odd shapes and qL 1, 2, 5; top-k against a
 * full stable sort; the sparse attention against a dense double-precision
 * softmax over exactly the listed rows; hostile sizes refused.
 *
 * `test_dsa io OP DIR ARGS...` is the bridge for tests/py/test_dsa.py: it
 * reads raw little-endian arrays from DIR, runs one checked entry point and
 * writes DIR/out.bin (numpy does the independent references there). */
#include "check.h"
#include "internal.h"
#include "kernels/dsa.h"
#include "kernels/kernels.h"

#include <stdlib.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}
static float *rand_vec(int64_t n, float scale) {
    float *x = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) x[i] = frand() * scale;
    return x;
}
static int same_bits(const float *a, const float *b, int64_t n) {
    return memcmp(a, b, sizeof(float) * (size_t)n) == 0;
}

static const struct llmk_dsa_kernels *fast_set(void) {
#if defined(__x86_64__)
    if (llmk_kernels()->cpu & LLMK_CPU_AVX2) return &llmk_dsa_kernels_avx2;
#endif
    return NULL;
}

static void test_scores(const struct llmk_dsa_kernels *fast) {
    static const int64_t nqs[] = {1, 2, 5};
    static const int heads[] = {1, 3, 8}, dims[] = {7, 16, 33, 128};
    static const int64_t nks[] = {0, 1, 13, 100};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 4; c++)
                for (int d = 0; d < 4; d++) {
                    int64_t nq = nqs[a], nk = nks[d];
                    int H = heads[b], D = dims[c];
                    float *q = rand_vec(nq * H * D, 1), *k = rand_vec(nk * D, 1), *w = rand_vec(nq * H, 1);
                    float *o[4];
                    for (int i = 0; i < 4; i++) o[i] = calloc((size_t)(nq * nk + 1), sizeof(float));
                    CHECK_STATUS(llmk_dsa_indexer_scores(&llmk_dsa_kernels_ref, q, k, w, nq, H, D, nk, o[0]), LLMK_OK);
                    if (fast) CHECK_STATUS(llmk_dsa_indexer_scores(fast, q, k, w, nq, H, D, nk, o[1]), LLMK_OK);
                    int dec = nq <= LLMK_DSA_DECODE_MAX_Q ? LLMK_OK : LLMK_INVALID_ARGUMENT;
                    CHECK_STATUS(llmk_dsa_indexer_score_decode(&llmk_dsa_kernels_ref, q, k, w, nq, H, D, nk, o[2]), dec);
                    if (fast) CHECK_STATUS(llmk_dsa_indexer_score_decode(fast, q, k, w, nq, H, D, nk, o[3]), dec);
                    if (fast) CHECK(same_bits(o[0], o[1], nq * nk));
                    if (dec == LLMK_OK) CHECK(same_bits(o[0], o[2], nq * nk));
                    if (dec == LLMK_OK && fast) CHECK(same_bits(o[0], o[3], nq * nk));
                    /* against double precision: the formula itself */
                    double worst = 0;
                    for (int64_t m = 0; m < nq; m++)
                        for (int64_t n = 0; n < nk; n++) {
                            double acc = 0;
                            for (int h = 0; h < H; h++) {
                                double s = 0;
                                for (int i = 0; i < D; i++) s += (double)q[(m * H + h) * D + i] * k[n * D + i];
                                acc += (s > 0 ? s : 0) * w[m * H + h];
                            }
                            double e = fabs(acc - o[0][m * nk + n]);
                            if (e > worst) worst = e;
                        }
                    CHECK(worst < 1e-4 * D * H);
                    free(q), free(k), free(w);
                    for (int i = 0; i < 4; i++) free(o[i]);
                }
}

/* The brute-force set: a stable descending sort of the keys, first k. */
static uint16_t *sort_keys;
static int cmp_desc(const void *a, const void *b) {
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    if (sort_keys[i] != sort_keys[j]) return sort_keys[i] > sort_keys[j] ? -1 : 1;
    return i < j ? -1 : 1;
}

static void check_topk_row(const float *s, int64_t n, int k, const int32_t *got) {
    uint16_t *key = malloc(sizeof(uint16_t) * (size_t)(n + 1));
    int32_t *ord = malloc(sizeof(int32_t) * (size_t)(n + 1));
    char *in = calloc((size_t)n + 1, 1);
    for (int64_t i = 0; i < n; i++) key[i] = llmk_dsa_score_key(s[i]), ord[i] = (int32_t)i;
    sort_keys = key;
    qsort(ord, (size_t)n, sizeof *ord, cmp_desc);
    int64_t want = n < k ? n : k;
    for (int64_t i = 0; i < want; i++) in[ord[i]] = 1;
    int ok = 1;
    for (int64_t i = 0; i < k; i++) {
        if (i >= want) ok &= got[i] == -1;
        else ok &= got[i] >= 0 && got[i] < n && in[got[i]] && (i == 0 || got[i] > got[i - 1]);
    }
    CHECK(ok);
    free(key), free(ord), free(in);
}

static void test_topk(const struct llmk_dsa_kernels *fast) {
    static const int64_t nks[] = {1, 7, 300, 5000};
    static const int ks[] = {1, 5, 64, 512};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int ties = 0; ties < 2; ties++) {
                int64_t nk = nks[a], nq = 5, valid[5];
                int k = ks[b];
                float *s = rand_vec(nq * nk, 100);
                if (ties) /* few distinct values: ties at the threshold */
                    for (int64_t i = 0; i < nq * nk; i++) s[i] = floorf(s[i] / 40);
                s[0] = -INFINITY;
                if (nk > 3) s[3] = NAN, s[2] = -0.0f;
                for (int m = 0; m < nq; m++) valid[m] = m == 1 ? nk / 2 : m == 3 ? 0 : nk;
                int32_t *r = malloc(sizeof(int32_t) * (size_t)(nq * k)), *f = malloc(sizeof(int32_t) * (size_t)(nq * k));
                CHECK_STATUS(llmk_dsa_topk_indices(&llmk_dsa_kernels_ref, s, nq, nk, nk, valid, k, r), LLMK_OK);
                if (fast) {
                    CHECK_STATUS(llmk_dsa_topk_indices(fast, s, nq, nk, nk, valid, k, f), LLMK_OK);
                    CHECK(memcmp(r, f, sizeof(int32_t) * (size_t)(nq * k)) == 0);
                }
                for (int m = 0; m < nq; m++) check_topk_row(s + m * nk, valid[m], k, r + m * k);
                free(s), free(r), free(f);
            }
}

/* Dense double-precision attention over exactly row m's listed rows. */
static double attn_err(const struct llmk_dsa_attn *a, const float *out) {
    double worst = 0;
    int per = a->n_heads / a->n_kv;
    for (int64_t m = 0; m < a->n_q; m++)
        for (int h = 0; h < a->n_heads; h++) {
            int g = h / per;
            const float *q = a->q + (m * a->n_heads + h) * a->dk;
            double mx = a->sinks ? a->sinks[h] : -INFINITY, l = 0, o[64] = {0};
            const float *kr[1200], *vr[1200];
            int n = 0;
            for (int64_t p = a->pos0 + m - a->window + 1; a->window > 0 && p <= a->pos0 + m; p++)
                if (p >= 0) kr[n] = a->k + (p * a->n_kv + g) * a->dk, vr[n++] = a->v + (p * a->n_kv + g) * a->dv;
            for (int t = 0; t < a->topk; t++) {
                int32_t i = a->idx[m * a->topk + t];
                if (i >= 0) kr[n] = a->pk + ((int64_t)i * a->n_kv + g) * a->dk, vr[n++] = a->pv + ((int64_t)i * a->n_kv + g) * a->dv;
            }
            double s[1200];
            for (int j = 0; j < n; j++) {
                s[j] = 0;
                for (int d = 0; d < a->dk; d++) s[j] += (double)q[d] * kr[j][d];
                s[j] *= a->scale;
                if (s[j] > mx) mx = s[j];
            }
            for (int j = 0; j < n; j++) {
                double p = exp(s[j] - mx);
                l += p;
                for (int d = 0; d < a->dv; d++) o[d] += p * vr[j][d];
            }
            if (a->sinks) l += exp(a->sinks[h] - mx);
            for (int d = 0; d < a->dv; d++) {
                double want = n ? o[d] / l : 0, e = fabs(want - out[(m * a->n_heads + h) * a->dv + d]);
                if (e > worst) worst = e;
            }
        }
    return worst;
}

static void test_attn_case(const struct llmk_dsa_kernels *fast, int64_t nq, int window, int topk, int sinks, int tile,
                           int split, int dk, int dv) {
    struct llmk_dsa_attn a = {.n_q = nq, .n_heads = 4, .n_kv = 2, .dk = dk, .dv = dv, .window = window, .topk = topk,
                              .scale = 0.3f, .params = {tile, split}};
    a.n_local = 40 + nq, a.pos0 = 37, a.n_pool = 700;
    float *k = rand_vec(a.n_local * 2 * dk, 1), *v = rand_vec(a.n_local * 2 * dv, 1);
    float *pk = rand_vec(a.n_pool * 2 * dk, 1), *pv = rand_vec(a.n_pool * 2 * dv, 1);
    float *q = rand_vec(nq * 4 * dk, 2), *sk = rand_vec(4, 3);
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)(nq * topk + 1));
    for (int64_t i = 0; i < nq * topk; i++) idx[i] = (i % 7 == 3) ? -1 : (int32_t)((i * 7919) % a.n_pool);
    a.q = q, a.k = k, a.v = v, a.pk = pk, a.pv = pv, a.idx = idx, a.sinks = sinks ? sk : NULL;
    size_t no = (size_t)(nq * 4 * dv);
    float *r = malloc(sizeof(float) * no), *f = malloc(sizeof(float) * no);
    CHECK_STATUS(llmk_dsa_sparse_attention(&llmk_dsa_kernels_ref, &a, r), LLMK_OK);
    if (fast) {
        CHECK_STATUS(llmk_dsa_sparse_attention(fast, &a, f), LLMK_OK);
        CHECK(same_bits(r, f, (int64_t)no));
    }
    CHECK(attn_err(&a, r) < 2e-5);
    free(k), free(v), free(pk), free(pv), free(q), free(sk), free(idx), free(r), free(f);
}

static void test_attn(const struct llmk_dsa_kernels *fast) {
    static const int64_t nqs[] = {1, 2, 5};
    static const int wins[] = {0, 3, 64}, tks[] = {0, 5, 300};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 3; c++) {
                if (wins[b] == 0 && tks[c] == 0) continue;
                test_attn_case(fast, nqs[a], wins[b], tks[c], (a + b + c) & 1, 0, 0, 24, 40);
                test_attn_case(fast, nqs[a], wins[b], tks[c], 1, 128, 3, 13, 21);
                test_attn_case(fast, nqs[a], wins[b], tks[c], 0, 256, 1, 64, 64);
            }
}

static void test_qat(const struct llmk_dsa_kernels *fast) {
    int64_t n = 128 * 12;
    float *x = rand_vec(n, 1);
    for (int64_t i = 0; i < n; i++) x[i] *= (i / 128 == 1) ? 1e-7f : (i / 128 == 2) ? 3e3f : 1.0f;
    for (int64_t i = 128 * 3; i < 128 * 3 + 64; i++) x[i] = 0; /* a zero block */
    float *r = malloc(sizeof(float) * (size_t)n), *f = malloc(sizeof(float) * (size_t)n);
    for (int f16 = 0; f16 < 2; f16++) {
        memcpy(r, x, sizeof(float) * (size_t)n), memcpy(f, x, sizeof(float) * (size_t)n);
        CHECK_STATUS(llmk_dsa_kv_qat(&llmk_dsa_kernels_ref, r, n, f16), LLMK_OK);
        if (fast) CHECK_STATUS(llmk_dsa_kv_qat(fast, f, n, f16), LLMK_OK);
        if (fast) CHECK(same_bits(r, f, n));
    }
    memcpy(r, x, sizeof(float) * (size_t)n), memcpy(f, x, sizeof(float) * (size_t)n);
    CHECK_STATUS(llmk_dsa_indexer_qat(&llmk_dsa_kernels_ref, r, n), LLMK_OK);
    if (fast) CHECK_STATUS(llmk_dsa_indexer_qat(fast, f, n), LLMK_OK);
    if (fast) CHECK(same_bits(r, f, n));
    /* every E4M3 / E2M1 value is its own rounding; the largest saturate */
    CHECK_EQ_DBL(llmk_round_e4m3(448.0f), 448.0);
    CHECK_EQ_DBL(llmk_round_e4m3(1e9f), 448.0);
    CHECK_EQ_DBL(llmk_round_e4m3(0x1p-9f), 0x1p-9);
    CHECK_EQ_DBL(llmk_round_e4m3(0x1p-10f), 0.0); /* a tie: to even (zero) */
    CHECK_EQ_DBL(llmk_round_e2m1(5.0f), 4.0);     /* a tie between 4 and 6: to even (4) */
    CHECK_EQ_DBL(llmk_round_e2m1(-0.75f), -1.0);
    CHECK_EQ_DBL(llmk_round_e2m1(100.0f), 6.0);
    free(x), free(r), free(f);
}

static void test_refusals(void) {
    float b[256] = {0};
    int32_t ix[8] = {0};
    CHECK_STATUS(llmk_dsa_indexer_scores(NULL, b, b, b, 1, 0, 8, 1, b), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_dsa_indexer_scores(NULL, b, b, b, 1, 1, 5000, 1, b), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_dsa_indexer_scores(NULL, b, b, b, 0, 1, 8, 1, b), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_dsa_indexer_scores(NULL, b, b, b, (int64_t)1 << 27, 1, 8, (int64_t)1 << 27, b),
                 LLMK_DIMENSION_OVERFLOW);
    CHECK_STATUS(llmk_dsa_indexer_scores(NULL, NULL, b, b, 1, 1, 8, 1, b), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_dsa_indexer_score_decode(NULL, b, b, b, 5, 1, 8, 1, b), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_dsa_topk_indices(NULL, b, 1, 8, 8, NULL, 0, ix), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_dsa_topk_indices(NULL, b, 1, 8, 4, NULL, 2, ix), LLMK_INVALID_ARGUMENT);
    int64_t bad_valid = 9;
    CHECK_STATUS(llmk_dsa_topk_indices(NULL, b, 1, 8, 8, &bad_valid, 2, ix), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_dsa_topk_indices(NULL, b, 1, 8, 8, NULL, LLMK_DSA_MAX_TOPK + 1, ix), LLMK_INVALID_ARGUMENT);
    struct llmk_dsa_attn a = {.n_q = 1, .pos0 = 3, .n_heads = 2, .n_kv = 1, .dk = 8, .dv = 8, .q = b, .k = b, .v = b,
                              .n_local = 4, .window = 2, .pk = b, .pv = b, .n_pool = 4, .idx = ix, .topk = 2,
                              .scale = 1};
    CHECK_STATUS(llmk_dsa_sparse_attention(NULL, &a, b + 128), LLMK_OK);
    struct llmk_dsa_attn x = a;
    x.n_kv = 3;
    CHECK_STATUS(llmk_dsa_sparse_attention(NULL, &x, b + 128), LLMK_INVALID_ARGUMENT);
    x = a, x.pos0 = 4; /* the query past the local cache */
    CHECK_STATUS(llmk_dsa_sparse_attention(NULL, &x, b + 128), LLMK_INVALID_ARGUMENT);
    x = a, x.params.key_tile = 64;
    CHECK_STATUS(llmk_dsa_sparse_attention(NULL, &x, b + 128), LLMK_INVALID_ARGUMENT);
    x = a, x.dv = 100000;
    CHECK_STATUS(llmk_dsa_sparse_attention(NULL, &x, b + 128), LLMK_INVALID_ARGUMENT);
    x = a, x.scale = NAN;
    CHECK_STATUS(llmk_dsa_sparse_attention(NULL, &x, b + 128), LLMK_INVALID_ARGUMENT);
    ix[1] = 4; /* an index past the pooled rows */
    CHECK_STATUS(llmk_dsa_sparse_attention(NULL, &a, b + 128), LLMK_INVALID_ARGUMENT);
    CHECK(strstr(llmk_last_error(), "outside 4 pooled rows") != NULL);
    ix[1] = -2;
    CHECK_STATUS(llmk_dsa_sparse_attention(NULL, &a, b + 128), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_dsa_kv_qat(NULL, b, 65, true), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_dsa_indexer_qat(NULL, b, 64), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_dsa_indexer_qat(NULL, NULL, 128), LLMK_INVALID_ARGUMENT);
}

/* ---- the bridge for tests/py/test_dsa.py ---- */

/* Every buffer of one io call, freed before it returns (leak-checked builds). */
static void *held[16];
static int n_held;
static void *hold(void *p) {
    if (!p || n_held == 16) exit(3);
    return held[n_held++] = p;
}
static int release(int rc) {
    while (n_held > 0) free(held[--n_held]);
    return rc;
}

static void *load(const char *dir, const char *name, size_t bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!f || !p || fread(p, 1, bytes, f) != bytes) {
        fprintf(stderr, "test_dsa io: cannot read %zu bytes of %s\n", bytes, path);
        exit(3);
    }
    fclose(f);
    return hold(p);
}

static int save(const char *dir, const void *p, size_t bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/out.bin", dir);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(p, 1, bytes, f) == bytes;
    if (f) fclose(f);
    return ok ? 0 : 3;
}

static int io_done(int st, const char *dir, const void *p, size_t bytes) {
    if (st != LLMK_OK) {
        fprintf(stderr, "test_dsa io: %s\n", llmk_last_error());
        return release(2);
    }
    return release(save(dir, p, bytes));
}

static int io_main(int argc, char **argv) {
    const char *op = argv[2], *dir = argv[3];
    int64_t v[16] = {0};
    for (int i = 4; i < argc && i < 20; i++) v[i - 4] = strtoll(argv[i], NULL, 10);
    const struct llmk_dsa_kernels *kt = NULL; /* the kernel table's */
    if (!strcmp(op, "scores") || !strcmp(op, "decode")) { /* nq H D N */
        size_t nq = (size_t)v[0], H = (size_t)v[1], D = (size_t)v[2], N = (size_t)v[3];
        float *q = load(dir, "q.bin", 4 * nq * H * D), *k = load(dir, "k.bin", 4 * N * D), *w = load(dir, "w.bin", 4 * nq * H);
        float *o = hold(calloc(nq * N + 1, 4));
        int st = (!strcmp(op, "scores") ? llmk_dsa_indexer_scores : llmk_dsa_indexer_score_decode)(
            kt, q, k, w, (int64_t)nq, (int)H, (int)D, (int64_t)N, o);
        return io_done(st, dir, o, 4 * nq * N);
    }
    if (!strcmp(op, "topk")) { /* nq N k has_valid */
        size_t nq = (size_t)v[0], N = (size_t)v[1], k = (size_t)v[2];
        float *s = load(dir, "s.bin", 4 * nq * N);
        int64_t *valid = v[3] ? load(dir, "valid.bin", 8 * nq) : NULL;
        int32_t *idx = hold(calloc(nq * k + 1, 4));
        return io_done(llmk_dsa_topk_indices(kt, s, (int64_t)nq, (int64_t)N, (int64_t)N, valid, (int)k, idx), dir, idx,
                       4 * nq * k);
    }
    if (!strcmp(op, "attn")) { /* nq pos0 H KV dk dv n_local window n_pool topk sinks tile split scale*1e6 */
        struct llmk_dsa_attn a = {.n_q = v[0], .pos0 = v[1], .n_heads = (int)v[2], .n_kv = (int)v[3], .dk = (int)v[4],
                                  .dv = (int)v[5], .n_local = v[6], .window = v[7], .n_pool = v[8], .topk = (int)v[9],
                                  .params = {(int)v[11], (int)v[12]}, .scale = (float)v[13] / 1e6f};
        size_t nq = (size_t)a.n_q, kv = (size_t)a.n_kv;
        a.q = load(dir, "q.bin", 4 * nq * (size_t)a.n_heads * (size_t)a.dk);
        a.k = load(dir, "k.bin", 4 * (size_t)a.n_local * kv * (size_t)a.dk);
        a.v = load(dir, "v.bin", 4 * (size_t)a.n_local * kv * (size_t)a.dv);
        a.pk = load(dir, "pk.bin", 4 * (size_t)a.n_pool * kv * (size_t)a.dk);
        a.pv = load(dir, "pv.bin", 4 * (size_t)a.n_pool * kv * (size_t)a.dv);
        a.idx = load(dir, "idx.bin", 4 * nq * (size_t)a.topk);
        a.sinks = v[10] ? load(dir, "sinks.bin", 4 * (size_t)a.n_heads) : NULL;
        float *o = hold(calloc(nq * (size_t)a.n_heads * (size_t)a.dv + 1, 4));
        return io_done(llmk_dsa_sparse_attention(kt, &a, o), dir, o, 4 * nq * (size_t)a.n_heads * (size_t)a.dv);
    }
    if (!strcmp(op, "kvqat") || !strcmp(op, "idxqat") || !strcmp(op, "hadamard")) { /* n [f16] */
        float *x = load(dir, "x.bin", 4 * (size_t)v[0]);
        int st = !strcmp(op, "kvqat")    ? llmk_dsa_kv_qat(kt, x, v[0], v[1] != 0)
                 : !strcmp(op, "idxqat") ? llmk_dsa_indexer_qat(kt, x, v[0])
                                         : llmk_dsa_hadamard128(kt, x, v[0]);
        return io_done(st, dir, x, 4 * (size_t)v[0]);
    }
    fprintf(stderr, "test_dsa io: unknown op %s\n", op);
    return 2;
}

int main(int argc, char **argv) {
    if (argc >= 4 && !strcmp(argv[1], "io")) return io_main(argc, argv);
    const struct llmk_dsa_kernels *fast = fast_set();
    if (!fast) fprintf(stderr, "test_dsa: no AVX2, the fast set is not tested here\n");
    test_scores(fast);
    test_topk(fast);
    test_attn(fast);
    test_qat(fast);
    test_refusals();
    return check_summary("dsa");
}
