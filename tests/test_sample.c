/* Sampler chain, RNG and stop-string matcher.
 * Exact values on small vectors for every stage; chi-square tests that the
 * draw follows the distribution each stage defines, against an independent
 * straightforward computation written here. */
#include "check.h"
#include "llmk.h"

#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NV 8

/* ---- counting allocations ---------------------------------------------
 * malloc/calloc/realloc defined here take precedence over libc's for the
 * whole program (the library is linked statically), count while `counting`
 * is set, and pass on to the next definition (libc or the sanitizer). */
static volatile int counting;
static volatile long n_allocs;
static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static int in_dlsym;
/* dlsym itself may allocate before the real functions are known; those few
 * requests come from here and are never freed. */
static unsigned char early[8192];
static size_t early_used;

static void *early_alloc(size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n > sizeof early - early_used) return NULL;
    early_used += n;
    return early + early_used - n;
}

static int find_real(void) {
    if (real_malloc) return 1;
    if (in_dlsym) return 0;
    in_dlsym = 1;
    real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    in_dlsym = 0;
    return real_malloc != NULL;
}

void *malloc(size_t n) {
    if (!find_real()) return early_alloc(n);
    n_allocs += counting;
    return real_malloc(n);
}
void *calloc(size_t k, size_t n) {
    if (!find_real()) return k && n > sizeof early ? NULL : early_alloc(k * n);
    n_allocs += counting;
    return real_calloc(k, n);
}
void *realloc(void *p, size_t n) {
    find_real();
    n_allocs += counting;
    return real_realloc(p, n);
}

static llmk_sampler *make(const llmk_sampler_params *p, size_t nv) {
    llmk_sampler *s = NULL;
    int rc = llmk_sampler_init(p, nv, &s);
    if (rc != LLMK_OK) fprintf(stderr, "init: %s %s\n", llmk_status_name(rc), llmk_last_error());
    return s;
}

/* Params with every stage off and only `order` active. */
static llmk_sampler_params only(const char *order) {
    llmk_sampler_params p;
    llmk_sampler_params_default(&p);
    p.temperature = 1.0;
    p.top_k = 0;
    p.top_p = 1.0;
    p.min_p = 0.0;
    p.seed = 1234;
    int rc = llmk_sampler_parse_order(order, &p);
    CHECK_STATUS(rc, LLMK_OK);
    return p;
}

/* Candidate probability of id (0 when filtered out). */
static double cand_p(const llmk_token_prob *c, size_t n, int32_t id) {
    for (size_t i = 0; i < n; i++)
        if (c[i].id == id) return c[i].p;
    return 0.0;
}

/* ---- independent reference -------------------------------------------- */

/* softmax of l[] restricted to keep[] (1/0) into out[]. */
static void ref_softmax(const double *l, const int *keep, int n, double *out) {
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++)
        if (keep[i] && l[i] > mx) mx = l[i];
    for (int i = 0; i < n; i++) {
        out[i] = keep[i] ? exp(l[i] - mx) : 0.0;
        sum += out[i];
    }
    for (int i = 0; i < n; i++) out[i] /= sum;
}

/* Rank of i by (logit desc, id asc) among kept tokens. */
static int ref_rank(const double *l, const int *keep, int n, int i) {
    int r = 0;
    for (int j = 0; j < n; j++)
        if (keep[j] && j != i && (l[j] > l[i] || (l[j] == l[i] && j < i))) r++;
    return r;
}

/* Chi-square statistic of counts against probabilities; bins with p = 0
 * must have no draws (any draw there is an outright failure: returns 1e30). */
static double chi_square(const long *counts, const double *p, int n, long draws, int *df) {
    double x = 0;
    *df = -1;
    for (int i = 0; i < n; i++) {
        if (p[i] <= 0) {
            if (counts[i]) return 1e30;
            continue;
        }
        double e = p[i] * (double)draws;
        x += (counts[i] - e) * (counts[i] - e) / e;
        (*df)++;
    }
    return x;
}

/* Chi-square critical value at upper-tail 1e-4 (z = 3.719) by the
 * Wilson-Hilferty approximation; accurate to a few % for df >= 1. */
static double chi_crit(int df) {
    if (df < 1) return 0;
    double k = df, z = 3.719;
    double t = 1 - 2 / (9 * k) + z * sqrt(2 / (9 * k));
    return k * t * t * t;
}

#define DRAWS 20000

/* Draw DRAWS tokens and run the chi-square test against want[]. Returns the
 * statistic divided by the critical value (< 1 passes). */
static double draw_ratio(llmk_sampler *s, const float *logits, const double *want, int n) {
    long counts[NV] = {0};
    for (int i = 0; i < DRAWS; i++) {
        int32_t id = -1;
        if (llmk_sampler_sample(s, logits, (size_t)n, &id) != LLMK_OK || id < 0 || id >= n)
            return 1e30;
        counts[id]++;
    }
    int df;
    double x = chi_square(counts, want, n, DRAWS, &df);
    if (df < 1) return x > 0 ? 1e30 : 0.0;
    return x / chi_crit(df);
}

static const float L8[NV] = {2.0f, 1.5f, 1.2f, 1.0f, 0.5f, 0.3f, -0.5f, -1.0f};

static void ref_stage(const char *stage, const double *in, double *out, const llmk_sampler_params *p) {
    int keep[NV];
    double l[NV], pr[NV];
    for (int i = 0; i < NV; i++) {
        keep[i] = 1;
        l[i] = in[i];
    }
    if (!strcmp(stage, "temperature")) {
        for (int i = 0; i < NV; i++) l[i] = in[i] / p->temperature;
    } else if (!strcmp(stage, "top_k")) {
        for (int i = 0; i < NV; i++) keep[i] = ref_rank(in, keep, NV, i) < p->top_k;
    } else if (!strcmp(stage, "min_p")) {
        ref_softmax(l, keep, NV, pr);
        double mx = 0;
        for (int i = 0; i < NV; i++) mx = pr[i] > mx ? pr[i] : mx;
        for (int i = 0; i < NV; i++) keep[i] = pr[i] >= mx * p->min_p;
    } else if (!strcmp(stage, "top_p")) {
        ref_softmax(l, keep, NV, pr);
        int k2[NV];
        for (int i = 0; i < NV; i++) {
            /* mass of the tokens ranked strictly before i */
            double before = 0;
            for (int j = 0; j < NV; j++)
                if (ref_rank(l, keep, NV, j) < ref_rank(l, keep, NV, i)) before += pr[j];
            k2[i] = before < p->top_p || ref_rank(l, keep, NV, i) == 0;
        }
        memcpy(keep, k2, sizeof keep);
    } else if (!strcmp(stage, "typical_p")) {
        ref_softmax(l, keep, NV, pr);
        double h = 0;
        for (int i = 0; i < NV; i++) h -= pr[i] * log(pr[i]);
        double sc[NV];
        for (int i = 0; i < NV; i++) sc[i] = fabs(-log(pr[i]) - h);
        int k2[NV];
        for (int i = 0; i < NV; i++) {
            double before = 0;
            int first = 1;
            for (int j = 0; j < NV; j++)
                if (sc[j] < sc[i] || (sc[j] == sc[i] && (l[j] > l[i] || (l[j] == l[i] && j < i)))) {
                    before += pr[j];
                    first = 0;
                }
            k2[i] = before < p->typical_p || first;
        }
        memcpy(keep, k2, sizeof keep);
    } else if (!strcmp(stage, "eta")) {
        ref_softmax(l, keep, NV, pr);
        double h = 0;
        for (int i = 0; i < NV; i++) h -= pr[i] * log(pr[i]);
        double eps = p->eta, thr = fmin(eps, sqrt(eps) * exp(-h));
        for (int i = 0; i < NV; i++) keep[i] = pr[i] > thr;
    }
    ref_softmax(l, keep, NV, out);
}

/* ---- tests -------------------------------------------------------------- */

static void test_rng(void) {
    CHECK(llmk_rng_u64(42, 7) == llmk_rng_u64(42, 7));
    CHECK(llmk_rng_u64(42, 7) != llmk_rng_u64(42, 8));
    CHECK(llmk_rng_u64(42, 7) != llmk_rng_u64(43, 7));
    /* splitmix64 with state 0: its first output is a published constant. */
    CHECK(llmk_rng_u64(0, 0) == 0xE220A8397B1DCDAFULL);
    double sum = 0, mn = 1, mx = 0;
    long bins[10] = {0};
    for (uint64_t i = 0; i < 100000; i++) {
        double u = llmk_rng_uniform(99, i);
        sum += u;
        mn = u < mn ? u : mn;
        mx = u > mx ? u : mx;
        bins[(int)(u * 10)]++;
    }
    CHECK(mn >= 0.0 && mx < 1.0);
    CHECK_NEAR(sum / 100000, 0.5, 0.005);
    double want[10];
    for (int i = 0; i < 10; i++) want[i] = 0.1;
    int df;
    CHECK(chi_square(bins, want, 10, 100000, &df) < chi_crit(df));
}

static void test_params(void) {
    llmk_sampler_params p;
    llmk_sampler_params_default(&p);
    CHECK_EQ_DBL(p.temperature, 0.8);
    CHECK_EQ_INT(p.top_k, 40);
    CHECK_EQ_DBL(p.top_p, 0.95);
    CHECK_EQ_DBL(p.min_p, 0.05);
    CHECK_EQ_DBL(p.repeat_penalty, 1.0);
    CHECK_EQ_INT(p.repeat_last_n, 64);
    CHECK_EQ_INT(p.seed, -1);
    CHECK_EQ_INT(p.n_order, 5);
    CHECK_EQ_INT(p.order[0], LLMK_STAGE_PENALTIES);
    CHECK_EQ_INT(p.order[1], LLMK_STAGE_TEMPERATURE);
    CHECK_EQ_INT(p.order[2], LLMK_STAGE_TOP_K);
    CHECK_EQ_INT(p.order[3], LLMK_STAGE_MIN_P);
    CHECK_EQ_INT(p.order[4], LLMK_STAGE_TOP_P);

    CHECK_STATUS(llmk_sampler_parse_order("top_k,temp;typ_p;eta", &p), LLMK_OK);
    CHECK_EQ_INT(p.n_order, 4);
    CHECK_EQ_INT(p.order[0], LLMK_STAGE_TOP_K);
    CHECK_EQ_INT(p.order[1], LLMK_STAGE_TEMPERATURE);
    CHECK_EQ_INT(p.order[2], LLMK_STAGE_TYPICAL_P);
    CHECK_EQ_INT(p.order[3], LLMK_STAGE_ETA);
    CHECK_STATUS(llmk_sampler_parse_order("kmpt", &p), LLMK_OK);
    CHECK_EQ_INT(p.n_order, 4);
    CHECK_EQ_INT(p.order[3], LLMK_STAGE_TEMPERATURE);
    CHECK_STATUS(llmk_sampler_parse_order("temp", &p), LLMK_OK);
    CHECK_EQ_INT(p.n_order, 1);
    CHECK_EQ_INT(p.order[0], LLMK_STAGE_TEMPERATURE);
    CHECK_STATUS(llmk_sampler_parse_order("top_k;bogus", &p), LLMK_BAD_SAMPLER_CONFIG);
    CHECK(strstr(llmk_last_error(), "bogus") != NULL);
    CHECK_STATUS(llmk_sampler_parse_order("kkkkkkkkkkkkkkkkk", &p), LLMK_BAD_SAMPLER_CONFIG);
    CHECK(!strcmp(llmk_sampler_stage_name(LLMK_STAGE_MIN_P), "min_p"));
    CHECK(!strcmp(llmk_sampler_stage_name(99), "?"));

    llmk_sampler *s = NULL;
    llmk_sampler_params_default(&p);
    p.top_p = 1.5;
    CHECK_STATUS(llmk_sampler_init(&p, 10, &s), LLMK_BAD_SAMPLER_CONFIG);
    CHECK(s == NULL);
    llmk_sampler_params_default(&p);
    p.min_p = NAN;
    CHECK_STATUS(llmk_sampler_init(&p, 10, &s), LLMK_BAD_SAMPLER_CONFIG);
    llmk_sampler_params_default(&p);
    p.repeat_last_n = -5;
    CHECK_STATUS(llmk_sampler_init(&p, 10, &s), LLMK_BAD_SAMPLER_CONFIG);
    llmk_sampler_params_default(&p);
    p.repeat_penalty = 0;
    CHECK_STATUS(llmk_sampler_init(&p, 10, &s), LLMK_BAD_SAMPLER_CONFIG);
    llmk_sampler_params_default(&p);
    llmk_logit_bias b = {10, 1.0f};
    p.bias = &b;
    p.n_bias = 1;
    CHECK_STATUS(llmk_sampler_init(&p, 10, &s), LLMK_INVALID_TOKEN);
    llmk_sampler_params_default(&p);
    p.order[0] = 42;
    CHECK_STATUS(llmk_sampler_init(&p, 10, &s), LLMK_BAD_SAMPLER_CONFIG);
    llmk_sampler_params_default(&p);
    CHECK_STATUS(llmk_sampler_init(&p, 0, &s), LLMK_INVALID_ARGUMENT);
}

static void test_bad_input(void) {
    llmk_sampler_params p = only("temperature");
    llmk_sampler *s = make(&p, 4);
    float l[4] = {1, 2, NAN, 0};
    int32_t id;
    CHECK_STATUS(llmk_sampler_sample(s, l, 4, &id), LLMK_NAN_INPUT);
    l[2] = 0;
    CHECK_STATUS(llmk_sampler_sample(s, l, 3, &id), LLMK_LOGITS_LENGTH_MISMATCH);
    CHECK_STATUS(llmk_sampler_sample(s, NULL, 4, &id), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_sampler_accept(s, 4), LLMK_INVALID_TOKEN);
    CHECK_STATUS(llmk_sampler_accept(s, -1), LLMK_INVALID_TOKEN);
    float all_banned[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    CHECK_STATUS(llmk_sampler_sample(s, all_banned, 4, &id), LLMK_BAD_SAMPLER_CONFIG);
    /* +inf logits share all the mass */
    float inf[4] = {INFINITY, 0, INFINITY, 5};
    const llmk_token_prob *c;
    size_t n;
    CHECK_STATUS(llmk_sampler_candidates(s, inf, 4, &c, &n), LLMK_OK);
    CHECK_EQ_DBL(cand_p(c, n, 0), 0.5);
    CHECK_EQ_DBL(cand_p(c, n, 2), 0.5);
    CHECK_EQ_DBL(cand_p(c, n, 3), 0.0);
    llmk_sampler_free(s);
}

static void test_greedy(void) {
    llmk_sampler_params p;
    llmk_sampler_params_default(&p);
    p.temperature = 0;
    p.seed = 5;
    llmk_sampler *s = make(&p, 6);
    float l[6] = {0.1f, 3.0f, -2.0f, 3.0f, 2.9f, 1.0f};
    int32_t id = -1;
    for (int i = 0; i < 20; i++) {
        CHECK_STATUS(llmk_sampler_sample(s, l, 6, &id), LLMK_OK);
        CHECK_EQ_INT(id, 1); /* tie between 1 and 3: lowest id */
    }
    float eq[6] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
    CHECK_STATUS(llmk_sampler_sample(s, eq, 6, &id), LLMK_OK);
    CHECK_EQ_INT(id, 0);
    llmk_sampler_free(s);

    /* Greedy sees penalties: the repeated maximum loses to the runner-up. */
    p.repeat_penalty = 2.0;
    s = make(&p, 6);
    llmk_sampler_accept(s, 1);
    llmk_sampler_accept(s, 3);
    CHECK_STATUS(llmk_sampler_sample(s, l, 6, &id), LLMK_OK);
    CHECK_EQ_INT(id, 4);
    llmk_sampler_free(s);

    /* No temperature stage in the order: still greedy. */
    p = only("top_k");
    p.temperature = 0;
    s = make(&p, 6);
    CHECK_STATUS(llmk_sampler_sample(s, l, 6, &id), LLMK_OK);
    CHECK_EQ_INT(id, 1);
    llmk_sampler_free(s);
}

/* The one-pass greedy choice (every stage before the greedy one idle, no
 * bias) against the chain: top_k = n_vocab before temperature is a stage
 * that is not idle but keeps every token, so the chain runs in full. Rows
 * with ties, -inf and +inf logits. */
static void test_greedy_direct_is_the_chain(void) {
    enum { V = 97 };
    llmk_sampler_params fast, chain;
    llmk_sampler_params_default(&fast);
    fast.temperature = 0;
    chain = fast;
    CHECK_STATUS(llmk_sampler_parse_order("top_k;temperature", &chain), LLMK_OK);
    chain.top_k = V;
    llmk_sampler *a = make(&fast, V), *b = make(&chain, V);
    float l[V];
    uint32_t x = 12345;
    for (int row = 0; row < 400; row++) {
        for (int i = 0; i < V; i++) {
            x = x * 1664525u + 1013904223u;
            l[i] = (float)((x >> 24) % 7) - 3.0f; /* few values: many ties */
            if (row % 5 == 1 && i % 3 == 0) l[i] = -INFINITY;
        }
        if (row % 50 == 7) l[row % V] = INFINITY;
        int32_t ia = -1, ib = -2;
        CHECK_STATUS(llmk_sampler_sample(a, l, V, &ia), LLMK_OK);
        CHECK_STATUS(llmk_sampler_sample(b, l, V, &ib), LLMK_OK);
        CHECK_EQ_INT(ia, ib);
    }
    for (int i = 0; i < V; i++) l[i] = -INFINITY; /* the chain's refusal, also on the direct path */
    int32_t id;
    CHECK_STATUS(llmk_sampler_sample(a, l, V, &id), LLMK_BAD_SAMPLER_CONFIG);
    l[3] = NAN;
    CHECK_STATUS(llmk_sampler_sample(a, l, V, &id), LLMK_NAN_INPUT);
    llmk_sampler_free(a), llmk_sampler_free(b);
}

static void test_temperature_exact(void) {
    llmk_sampler_params p = only("temperature");
    p.temperature = 0.5;
    llmk_sampler *s = make(&p, 3);
    float l[3] = {1.0f, -2.0f, 0.25f};
    const llmk_token_prob *c;
    size_t n;
    CHECK_STATUS(llmk_sampler_candidates(s, l, 3, &c, &n), LLMK_OK);
    CHECK_EQ_INT(n, 3);
    double z = exp(2.0) + exp(-4.0) + exp(0.5);
    for (size_t i = 0; i < n; i++) {
        CHECK_EQ_DBL(c[i].logit, (double)l[c[i].id] / 0.5);
        CHECK_NEAR(c[i].p, exp((double)l[c[i].id] / 0.5) / z, 1e-12);
    }
    llmk_sampler_free(s);
}

static void test_top_k_exact(void) {
    float l[4] = {1.0f, 3.0f, 2.0f, 3.0f};
    const llmk_token_prob *c;
    size_t n;
    llmk_sampler_params p = only("top_k");
    p.top_k = 2;
    llmk_sampler *s = make(&p, 4);
    CHECK_STATUS(llmk_sampler_candidates(s, l, 4, &c, &n), LLMK_OK);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(c[0].id, 1);
    CHECK_EQ_INT(c[1].id, 3);
    CHECK_EQ_DBL(c[0].p, 0.5);
    llmk_sampler_free(s);

    p.top_k = 1; /* tie at the top: the lower id stays */
    s = make(&p, 4);
    CHECK_STATUS(llmk_sampler_candidates(s, l, 4, &c, &n), LLMK_OK);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(c[0].id, 1);
    CHECK_EQ_DBL(c[0].p, 1.0);
    llmk_sampler_free(s);

    p.top_k = 3; /* boundary between 2.0 and 1.0 */
    s = make(&p, 4);
    CHECK_STATUS(llmk_sampler_candidates(s, l, 4, &c, &n), LLMK_OK);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_DBL(cand_p(c, n, 0), 0.0);
    CHECK_EQ_INT(c[2].id, 2);
    llmk_sampler_free(s);

    p.top_k = 100; /* k larger than the vocabulary: everything stays */
    s = make(&p, 4);
    CHECK_STATUS(llmk_sampler_candidates(s, l, 4, &c, &n), LLMK_OK);
    CHECK_EQ_INT(n, 4);
    double z = exp(1.0) + 2 * exp(3.0) + exp(2.0);
    CHECK_NEAR(cand_p(c, n, 0), exp(1.0) / z, 1e-12);
    llmk_sampler_free(s);

    /* a larger vocabulary exercises the heap selection */
    enum { BIG = 1000 };
    static float big[BIG];
    for (int i = 0; i < BIG; i++) big[i] = (float)((i * 7919) % 1000) / 10.0f; /* a permutation */
    p.top_k = 5;
    s = make(&p, BIG);
    CHECK_STATUS(llmk_sampler_candidates(s, big, BIG, &c, &n), LLMK_OK);
    CHECK_EQ_INT(n, 5);
    for (size_t i = 0; i < n; i++) CHECK_EQ_DBL(c[i].logit, (double)((float)(999 - (int)i) / 10.0f));
    llmk_sampler_free(s);
}

static void test_top_p_exact(void) {
    const llmk_token_prob *c;
    size_t n;
    float eq[4] = {0, 0, 0, 0};
    llmk_sampler_params p = only("top_p");
    p.top_p = 0.5; /* masses before: 0, .25, .5 -> two tokens, lowest ids */
    llmk_sampler *s = make(&p, 4);
    CHECK_STATUS(llmk_sampler_candidates(s, eq, 4, &c, &n), LLMK_OK);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(c[0].id, 0);
    CHECK_EQ_INT(c[1].id, 1);
    CHECK_EQ_DBL(c[0].p, 0.5);
    llmk_sampler_free(s);

    float l[4] = {0.0f, 2.0f, 1.0f, -1.0f};
    p.top_p = 0.0; /* p = 0: only the top token */
    s = make(&p, 4);
    CHECK_STATUS(llmk_sampler_candidates(s, l, 4, &c, &n), LLMK_OK);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(c[0].id, 1);
    llmk_sampler_free(s);

    p.top_p = 1.0; /* p = 1: off */
    s = make(&p, 4);
    CHECK_STATUS(llmk_sampler_candidates(s, l, 4, &c, &n), LLMK_OK);
    CHECK_EQ_INT(n, 4);
    llmk_sampler_free(s);

    /* p just above the top token's mass keeps two */
    double z = exp(0.0) + exp(2.0) + exp(1.0) + exp(-1.0);
    p.top_p = exp(2.0) / z + 1e-9;
    s = make(&p, 4);
    CHECK_STATUS(llmk_sampler_candidates(s, l, 4, &c, &n), LLMK_OK);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(c[1].id, 2);
    CHECK_NEAR(c[1].p, exp(1.0) / (exp(2.0) + exp(1.0)), 1e-12);
    llmk_sampler_free(s);
}

static void test_min_p_exact(void) {
    const llmk_token_prob *c;
    size_t n;
    llmk_sampler_params p = only("min_p");
    p.min_p = 0.05;
    float dom[5] = {0.0f, 10.0f, 0.0f, 0.0f, 1.0f}; /* one dominant token */
    llmk_sampler *s = make(&p, 5);
    CHECK_STATUS(llmk_sampler_candidates(s, dom, 5, &c, &n), LLMK_OK);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(c[0].id, 1);
    CHECK_EQ_DBL(c[0].p, 1.0);
    /* exp(-3) = 0.0498 < 0.05 is dropped, exp(-2.9) = 0.055 is kept */
    float edge[3] = {0.0f, -3.0f, -2.9f};
    CHECK_STATUS(llmk_sampler_candidates(s, edge, 3, &c, &n), LLMK_LOGITS_LENGTH_MISMATCH);
    llmk_sampler_free(s);
    s = make(&p, 3);
    CHECK_STATUS(llmk_sampler_candidates(s, edge, 3, &c, &n), LLMK_OK);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_DBL(cand_p(c, n, 1), 0.0);
    CHECK(cand_p(c, n, 2) > 0);
    float eq[3] = {1, 1, 1}; /* all equal: all stay */
    CHECK_STATUS(llmk_sampler_candidates(s, eq, 3, &c, &n), LLMK_OK);
    CHECK_EQ_INT(n, 3);
    llmk_sampler_free(s);
}

static void test_penalties_exact(void) {
    const llmk_token_prob *c;
    size_t n;
    llmk_sampler_params p = only("penalties");
    p.repeat_penalty = 2.0;
    p.frequency_penalty = 0.5;
    p.presence_penalty = 0.25;
    p.repeat_last_n = 3;
    llmk_sampler *s = make(&p, 4);
    /* 3 falls out of the 3-token window; 1 twice, 2 once */
    int32_t hist[4] = {3, 1, 1, 2};
    for (int i = 0; i < 4; i++) CHECK_STATUS(llmk_sampler_accept(s, hist[i]), LLMK_OK);
    float l[4] = {1.0f, 2.0f, -1.0f, 3.0f};
    CHECK_STATUS(llmk_sampler_candidates(s, l, 4, &c, &n), LLMK_OK);
    CHECK_EQ_INT(n, 4);
    for (size_t i = 0; i < n; i++) {
        switch (c[i].id) {
        case 0: CHECK_EQ_DBL(c[i].logit, 1.0); break;
        case 1: CHECK_EQ_DBL(c[i].logit, 2.0 / 2 - 2 * 0.5 - 0.25); break;
        case 2: CHECK_EQ_DBL(c[i].logit, -1.0 * 2 - 1 * 0.5 - 0.25); break;
        case 3: CHECK_EQ_DBL(c[i].logit, 3.0); break;
        }
    }
    /* the same call again gives the same values (scratch counts cleared) */
    CHECK_STATUS(llmk_sampler_candidates(s, l, 4, &c, &n), LLMK_OK);
    CHECK_EQ_DBL(cand_p(c, n, 1) > 0, 1);
    for (size_t i = 0; i < n; i++)
        if (c[i].id == 1) CHECK_EQ_DBL(c[i].logit, -0.25);
    llmk_sampler_reset(s); /* history gone: logits untouched */
    CHECK_STATUS(llmk_sampler_candidates(s, l, 4, &c, &n), LLMK_OK);
    for (size_t i = 0; i < n; i++) CHECK_EQ_DBL(c[i].logit, (double)l[c[i].id]);
    llmk_sampler_free(s);

    /* logit bias: a ban removes the token, a boost adds */
    llmk_logit_bias b[2] = {{3, -INFINITY}, {0, 1.5f}};
    p = only("temperature");
    p.bias = b;
    p.n_bias = 2;
    s = make(&p, 4);
    CHECK_STATUS(llmk_sampler_candidates(s, l, 4, &c, &n), LLMK_OK);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_DBL(cand_p(c, n, 3), 0.0);
    for (size_t i = 0; i < n; i++)
        if (c[i].id == 0) CHECK_EQ_DBL(c[i].logit, 2.5);
    llmk_sampler_free(s);
}

static void test_typical_eta_exact(void) {
    const llmk_token_prob *c;
    size_t n;
    /* probabilities .5 .25 .125 .125: entropy 1.2130 nats; |surprise - H|
     * = .52, .17, .87, .87 -> order 1, 0, 2, 3 */
    float l[4] = {(float)log(0.5), (float)log(0.25), (float)log(0.125), (float)log(0.125)};
    llmk_sampler_params p = only("typical_p");
    p.typical_p = 0.3; /* token 1 (.25) then token 0: mass before 0 is .25 < .3 */
    llmk_sampler *s = make(&p, 4);
    CHECK_STATUS(llmk_sampler_candidates(s, l, 4, &c, &n), LLMK_OK);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(c[0].id, 1);
    CHECK_EQ_INT(c[1].id, 0);
    CHECK_NEAR(c[0].p, 1.0 / 3, 1e-6);
    llmk_sampler_free(s);
    p.typical_p = 0.2;
    s = make(&p, 4);
    CHECK_STATUS(llmk_sampler_candidates(s, l, 4, &c, &n), LLMK_OK);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(c[0].id, 1);
    llmk_sampler_free(s);

    /* eta: epsilon .2 -> threshold min(.2, sqrt(.2) exp(-1.2130)) = .1330:
     * the two .125 tokens go */
    p = only("eta");
    p.eta = 0.2;
    s = make(&p, 4);
    CHECK_STATUS(llmk_sampler_candidates(s, l, 4, &c, &n), LLMK_OK);
    CHECK_EQ_INT(n, 2);
    CHECK_NEAR(cand_p(c, n, 0), 2.0 / 3, 1e-6);
    llmk_sampler_free(s);
    /* epsilon large enough to reject everything: the top token stays */
    float eq[4] = {0, 0, 0, 0};
    p.eta = 0.9;
    s = make(&p, 4);
    CHECK_STATUS(llmk_sampler_candidates(s, eq, 4, &c, &n), LLMK_OK);
    CHECK_EQ_INT(n, 4); /* thr = min(.9, .949 * exp(-1.386)) = .237 < .25 */
    float skew[4] = {0, -5, -5, -5};
    CHECK_STATUS(llmk_sampler_candidates(s, skew, 4, &c, &n), LLMK_OK);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(c[0].id, 0);
    llmk_sampler_free(s);
}

/* Each stage alone, then the default chain: empirical frequencies match. */
static void test_distributions(void) {
    double in[NV];
    for (int i = 0; i < NV; i++) in[i] = L8[i];
    struct {
        const char *stage;
        double temperature, top_p, min_p, typical_p, eta;
        int top_k;
    } cases[] = {
        {"temperature", 0.7, 1, 0, 1, 0, 0},  {"temperature", 1.6, 1, 0, 1, 0, 0},
        {"top_k", 1, 1, 0, 1, 0, 3},          {"top_k", 1, 1, 0, 1, 0, 6},
        {"min_p", 1, 1, 0.2, 1, 0, 0},        {"top_p", 1, 0.8, 0, 1, 0, 0},
        {"typical_p", 1, 1, 0, 0.6, 0, 0},    {"eta", 1, 1, 0, 1, 0.1, 0},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        llmk_sampler_params p = only(cases[ci].stage);
        p.temperature = cases[ci].temperature;
        p.top_p = cases[ci].top_p;
        p.min_p = cases[ci].min_p;
        p.typical_p = cases[ci].typical_p;
        p.eta = cases[ci].eta;
        p.top_k = cases[ci].top_k;
        p.seed = 1000 + (int64_t)ci;
        double want[NV];
        ref_stage(cases[ci].stage, in, want, &p);
        int kept = 0;
        for (int i = 0; i < NV; i++) kept += want[i] > 0;
        CHECK(kept >= 2 && kept <= NV); /* the case really tests a draw */
        llmk_sampler *s = make(&p, NV);
        double r = draw_ratio(s, L8, want, NV);
        if (!(r < 1)) fprintf(stderr, "  stage %s case %zu: chi2/crit = %g\n", cases[ci].stage, ci, r);
        CHECK(r < 1);
        llmk_sampler_free(s);
    }

    /* Penalties alone, with a fixed history (sampling does not add to it). */
    {
        llmk_sampler_params p = only("penalties");
        p.repeat_penalty = 1.5;
        p.frequency_penalty = 0.3;
        p.presence_penalty = 0.2;
        p.seed = 2024;
        llmk_sampler *s = make(&p, NV);
        int32_t hist[3] = {0, 0, 6};
        for (int i = 0; i < 3; i++) llmk_sampler_accept(s, hist[i]);
        double pl[NV], want[NV];
        int all[NV] = {1, 1, 1, 1, 1, 1, 1, 1};
        for (int i = 0; i < NV; i++) pl[i] = in[i];
        pl[0] = in[0] / 1.5 - 2 * 0.3 - 0.2; /* positive logit, seen twice */
        pl[6] = in[6] * 1.5 - 0.3 - 0.2;     /* negative logit, seen once */
        ref_softmax(pl, all, NV, want);
        double r = draw_ratio(s, L8, want, NV);
        CHECK(r < 1);
        llmk_sampler_free(s);
    }

    /* The default chain (no history): temperature .8, top-k 40 (all 8),
     * min-p .05, top-p .95, composed by hand from the reference stages. */
    llmk_sampler_params p;
    llmk_sampler_params_default(&p);
    p.seed = 77;
    double t[NV], pr[NV], after_min[NV], want[NV];
    for (int i = 0; i < NV; i++) t[i] = in[i] / p.temperature;
    ref_stage("min_p", t, after_min, &p);
    /* top-p over the min-p survivors */
    int keep[NV];
    for (int i = 0; i < NV; i++) keep[i] = after_min[i] > 0;
    ref_softmax(t, keep, NV, pr);
    int keep2[NV];
    for (int i = 0; i < NV; i++) {
        double before = 0;
        for (int j = 0; j < NV; j++)
            if (keep[j] && ref_rank(t, keep, NV, j) < ref_rank(t, keep, NV, i)) before += pr[j];
        keep2[i] = keep[i] && before < p.top_p;
    }
    ref_softmax(t, keep2, NV, want);
    llmk_sampler *s = make(&p, NV);
    CHECK(draw_ratio(s, L8, want, NV) < 1);
    /* The same draws judged against the untempered distribution must fail:
     * the test can tell a missing stage. */
    double wrong[NV];
    int all[NV] = {1, 1, 1, 1, 1, 1, 1, 1};
    ref_softmax(in, all, NV, wrong);
    llmk_sampler_reset(s);
    CHECK(draw_ratio(s, L8, wrong, NV) > 1);
    llmk_sampler_free(s);
}

static void test_determinism(void) {
    llmk_sampler_params p;
    llmk_sampler_params_default(&p);
    p.seed = 42;
    llmk_sampler *a = make(&p, NV), *b = make(&p, NV);
    int32_t ia[64], ib[64];
    for (int i = 0; i < 64; i++) {
        llmk_sampler_sample(a, L8, NV, &ia[i]);
        llmk_sampler_sample(b, L8, NV, &ib[i]);
    }
    CHECK(!memcmp(ia, ib, sizeof ia));
    llmk_sampler_reset(a); /* reset: the same sequence again */
    int same = 1;
    for (int i = 0; i < 64; i++) {
        int32_t id;
        llmk_sampler_sample(a, L8, NV, &id);
        same &= id == ia[i];
    }
    CHECK(same);
    llmk_sampler_free(b);
    p.seed = 43;
    b = make(&p, NV);
    int differ = 0;
    for (int i = 0; i < 64; i++) {
        llmk_sampler_sample(b, L8, NV, &ib[i]);
        differ |= ib[i] != ia[i];
    }
    CHECK(differ);
    llmk_sampler_free(a);
    llmk_sampler_free(b);

    /* seed -1: a random seed is chosen and reported; reusing it repeats the run */
    p.seed = -1;
    a = make(&p, NV);
    uint64_t chosen = llmk_sampler_seed(a);
    p.seed = (int64_t)chosen;
    b = make(&p, NV);
    same = 1;
    for (int i = 0; i < 32; i++) {
        int32_t x, y;
        llmk_sampler_sample(a, L8, NV, &x);
        llmk_sampler_sample(b, L8, NV, &y);
        same &= x == y;
    }
    CHECK(same);
    llmk_sampler_free(a);
    llmk_sampler_free(b);
}

/* ---- stop strings ---------------------------------------------------- */

static void feed_all(llmk_stop_matcher *m, const char *const *pieces, size_t n, char *out,
                     size_t *len, bool *stopped) {
    char buf[256];
    *len = 0;
    *stopped = false;
    for (size_t i = 0; i < n && !*stopped; i++) {
        size_t w = 0;
        CHECK_STATUS(llmk_stop_feed(m, pieces[i], strlen(pieces[i]), buf, sizeof buf, &w, stopped),
                     LLMK_OK);
        memcpy(out + *len, buf, w);
        *len += w;
    }
    if (!*stopped) {
        size_t w = 0;
        CHECK_STATUS(llmk_stop_flush(m, buf, sizeof buf, &w), LLMK_OK);
        memcpy(out + *len, buf, w);
        *len += w;
    }
    out[*len] = 0;
}

static void test_stop_strings(void) {
    const char *stops[] = {"o W", "STOP"};
    llmk_stop_matcher *m = NULL;
    CHECK_STATUS(llmk_stop_init(stops, 2, &m), LLMK_OK);
    CHECK_EQ_INT(llmk_stop_max_len(m), 4);
    char out[256], buf[64];
    size_t len, w;
    bool stopped;
    const char *p1[] = {"Hel", "lo W", "orld"};
    feed_all(m, p1, 3, out, &len, &stopped);
    CHECK(stopped);
    CHECK(!strcmp(out, "Hell"));

    /* a possible prefix is held back, then released when it breaks */
    llmk_stop_reset(m);
    CHECK_STATUS(llmk_stop_feed(m, "abcST", 5, buf, sizeof buf, &w, &stopped), LLMK_OK);
    CHECK_EQ_INT(w, 3);
    CHECK(!memcmp(buf, "abc", 3));
    CHECK_STATUS(llmk_stop_feed(m, "x", 1, buf, sizeof buf, &w, &stopped), LLMK_OK);
    CHECK_EQ_INT(w, 3);
    CHECK(!memcmp(buf, "STx", 3));
    CHECK_STATUS(llmk_stop_feed(m, "STO", 3, buf, sizeof buf, &w, &stopped), LLMK_OK);
    CHECK_EQ_INT(w, 0);
    CHECK_STATUS(llmk_stop_flush(m, buf, sizeof buf, &w), LLMK_OK); /* generation ended */
    CHECK_EQ_INT(w, 3);
    CHECK(!memcmp(buf, "STO", 3));
    /* too small an output buffer is refused, not overrun */
    CHECK_STATUS(llmk_stop_feed(m, "abc", 3, buf, 4, &w, &stopped), LLMK_BUFFER_TOO_SMALL);
    llmk_stop_free(m);

    /* empty stop string refused */
    const char *bad[] = {""};
    CHECK_STATUS(llmk_stop_init(bad, 1, &m), LLMK_BAD_REQUEST);

    /* random texts against a direct search: output = text before the
     * earliest-ending stop occurrence (the longest of those ending there) */
    srand(7);
    for (int trial = 0; trial < 2000; trial++) {
        char text[40], s1[5], s2[5];
        int tl = 1 + rand() % 30, l1 = 1 + rand() % 4, l2 = 1 + rand() % 4;
        for (int i = 0; i < tl; i++) text[i] = "ab"[rand() % 2];
        text[tl] = 0;
        for (int i = 0; i < l1; i++) s1[i] = "ab"[rand() % 2];
        for (int i = 0; i < l2; i++) s2[i] = "abc"[rand() % 3];
        s1[l1] = s2[l2] = 0;
        const char *ss[2] = {s1, s2};
        int want_len = tl, want_stop = 0;
        for (int e = 1; e <= tl && !want_stop; e++)
            for (int k = 0; k < 2; k++) {
                int sl = (int)strlen(ss[k]);
                if (sl <= e && !memcmp(text + e - sl, ss[k], (size_t)sl)) {
                    int start = e - sl;
                    if (!want_stop || start < want_len) want_len = start;
                    want_stop = 1;
                }
            }
        /* split into random pieces */
        char pieces_buf[40][40];
        const char *pieces[40];
        int np = 0, pos = 0;
        while (pos < tl) {
            int pl = 1 + rand() % 5;
            if (pl > tl - pos) pl = tl - pos;
            memcpy(pieces_buf[np], text + pos, (size_t)pl);
            pieces_buf[np][pl] = 0;
            pieces[np] = pieces_buf[np];
            np++;
            pos += pl;
        }
        CHECK_STATUS(llmk_stop_init(ss, 2, &m), LLMK_OK);
        feed_all(m, pieces, (size_t)np, out, &len, &stopped);
        if ((int)stopped != want_stop || (int)len != want_len || memcmp(out, text, len)) {
            fprintf(stderr, "stop mismatch: text %s stops %s,%s got '%s' stop=%d want %d stop=%d\n",
                    text, s1, s2, out, stopped, want_len, want_stop);
            CHECK(0);
        }
        llmk_stop_free(m);
    }
    /* no stop strings: everything passes through */
    CHECK_STATUS(llmk_stop_init(NULL, 0, &m), LLMK_OK);
    const char *p2[] = {"any", "thing"};
    feed_all(m, p2, 2, out, &len, &stopped);
    CHECK(!stopped && !strcmp(out, "anything"));
    llmk_stop_free(m);
}

/* Sampling a large vocabulary through every stage (and the full sorts of
 * top-p and typical-p) allocates nothing. */
static void test_no_allocation_per_token(void) {
    enum { BIG = 20000 };
    static float l[BIG];
    for (int i = 0; i < BIG; i++) l[i] = (float)((i * 7919u) % 1000) / 100.0f;
    const char *orders[] = {LLMK_SAMPLER_DEFAULT_ORDER, "penalties;temperature;top_p",
                            "temperature;typical_p;eta", "top_k;min_p"};
    for (size_t o = 0; o < sizeof orders / sizeof orders[0]; o++) {
        llmk_sampler_params p;
        llmk_sampler_params_default(&p);
        p.seed = 3;
        p.top_k = 200; /* a k whose sort would need a merge buffer in qsort */
        p.repeat_penalty = 1.3;
        p.typical_p = 0.9;
        p.eta = 0.0003;
        CHECK_STATUS(llmk_sampler_parse_order(orders[o], &p), LLMK_OK);
        llmk_sampler *s = make(&p, BIG);
        for (int32_t i = 0; i < 100; i++) llmk_sampler_accept(s, i * 13);
        int32_t id;
        counting = 1;
        n_allocs = 0;
        for (int i = 0; i < 20; i++) {
            llmk_sampler_sample(s, l, BIG, &id);
            llmk_sampler_accept(s, id);
        }
        counting = 0;
        CHECK_EQ_INT(n_allocs, 0);
        llmk_sampler_free(s);
    }
    /* the counter works: a sampler init does allocate */
    llmk_sampler_params p;
    llmk_sampler_params_default(&p);
    counting = 1;
    n_allocs = 0;
    llmk_sampler *s = make(&p, 10);
    counting = 0;
    CHECK(n_allocs > 0);
    llmk_sampler_free(s);
}

int main(void) {
    test_rng();
    test_no_allocation_per_token();
    test_params();
    test_bad_input();
    test_greedy();
    test_greedy_direct_is_the_chain();
    test_temperature_exact();
    test_top_k_exact();
    test_top_p_exact();
    test_min_p_exact();
    test_penalties_exact();
    test_typical_eta_exact();
    test_distributions();
    test_determinism();
    test_stop_strings();
    return check_summary("test_sample");
}
