/* Speculative decoding (src/spec.c): the prompt-lookup drafter's choices,
 * the adaptive draft length against seed 001's formulas, refusals, and on a
 * committed tiny model the verify step's promise: tokens bitwise those of
 * plain decoding (greedy and sampled, every thread count), and sampled
 * tokens distributed as the target's (a chi-square test of the first and
 * second token of a step whose draft is the target's own greedy guess). */
#include "check.h"
#include "llmk.h"
#include "llmk_formulas.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TINY "tests/fixtures/model/tiny/tiny_qwen3.gguf"

static void test_ngram(const llmk_model *m) {
    llmk_spec_params p = {.mode = LLMK_SPEC_NGRAM, .ngram_min = 2, .ngram_max = 16, .draft_max = 16};
    llmk_spec *sp = NULL;
    CHECK_STATUS(llmk_spec_init(m, &p, &sp), LLMK_OK);
    int32_t d[16], n = -1;
    /* the suffix 1 2 3 occurred at the start: what followed it there */
    const int32_t a[] = {1, 2, 3, 4, 5, 9, 9, 1, 2, 3};
    CHECK_STATUS(llmk_spec_draft(sp, a, 10, 16, d, &n), LLMK_OK);
    CHECK_EQ_INT(n, 7);
    CHECK(n == 7 && d[0] == 4 && d[1] == 5 && d[2] == 9 && d[6] == 3);
    CHECK_STATUS(llmk_spec_draft(sp, a, 10, 3, d, &n), LLMK_OK); /* capped by max */
    CHECK_EQ_INT(n, 3);
    /* two matches of the same length: the latest */
    const int32_t b[] = {7, 1, 2, 8, 1, 2, 9, 1, 2};
    CHECK_STATUS(llmk_spec_draft(sp, b, 9, 16, d, &n), LLMK_OK);
    CHECK(n == 3 && d[0] == 9 && d[1] == 1 && d[2] == 2);
    /* a longer match beats a later one */
    const int32_t c[] = {5, 1, 2, 3, 6, 2, 3, 7, 1, 2, 3};
    CHECK_STATUS(llmk_spec_draft(sp, c, 11, 16, d, &n), LLMK_OK);
    CHECK(n == 7 && d[0] == 6 && d[1] == 2);
    /* only the last token occurred before: short of ngram_min */
    const int32_t e[] = {1, 2, 3, 4, 1};
    CHECK_STATUS(llmk_spec_draft(sp, e, 5, 16, d, &n), LLMK_OK);
    CHECK_EQ_INT(n, 0);
    llmk_spec_free(sp);
    p.ngram_min = 1; /* one token is enough */
    CHECK_STATUS(llmk_spec_init(m, &p, &sp), LLMK_OK);
    CHECK_STATUS(llmk_spec_draft(sp, e, 5, 16, d, &n), LLMK_OK);
    CHECK(n == 4 && d[0] == 2 && d[3] == 1);
    const int32_t bad[] = {1, -3};
    CHECK_STATUS(llmk_spec_draft(sp, bad, 2, 4, d, &n), LLMK_INVALID_TOKEN);
    llmk_spec_free(sp);
}

static void test_params(const llmk_model *m) {
    llmk_spec *sp = NULL;
    int32_t mode = -1;
    CHECK_STATUS(llmk_spec_mode_from_name("ngram", &mode), LLMK_OK);
    CHECK_EQ_INT(mode, LLMK_SPEC_NGRAM);
    CHECK_STATUS(llmk_spec_mode_from_name("draft", &mode), LLMK_OK);
    CHECK_EQ_INT(mode, LLMK_SPEC_DRAFT);
    CHECK_STATUS(llmk_spec_mode_from_name("medusa", &mode), LLMK_INVALID_ARGUMENT);
    llmk_spec_params bad[] = {
        {.mode = 7},
        {.mode = LLMK_SPEC_NGRAM, .draft_max = 65},
        {.mode = LLMK_SPEC_NGRAM, .draft_min = 9, .draft_max = 4},
        {.mode = LLMK_SPEC_NGRAM, .ngram_min = 5, .ngram_max = 3},
        {.mode = LLMK_SPEC_DRAFT}, /* no draft model */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_STATUS(llmk_spec_init(m, &bad[i], &sp), LLMK_INVALID_ARGUMENT);
        CHECK(sp == NULL);
    }
    llmk_spec_params ok = {.mode = LLMK_SPEC_NGRAM};
    CHECK_STATUS(llmk_spec_init(NULL, &ok, &sp), LLMK_INVALID_ARGUMENT); /* no target */
    CHECK_STATUS(llmk_spec_init(m, &ok, &sp), LLMK_OK);
    int32_t d[4], n;
    CHECK_STATUS(llmk_spec_draft(sp, NULL, 0, 4, d, &n), LLMK_INVALID_ARGUMENT);
    llmk_spec_free(sp);
}

/* A step's time in these tests: a plain step 1 s, each verified draft 0.4 s more. */
static void step(llmk_spec *sp, int32_t n_draft, int32_t kept) {
    llmk_spec_feedback(sp, n_draft, kept, 0, 1.0 + 0.4 * n_draft);
}

/* The length the runtime picks is the one seed 001's formulas rank best
 * for the measured acceptance and step times, and its figures are the
 * formulas' own. */
static void test_adaptive(const llmk_model *m) {
    llmk_spec_params p = {.mode = LLMK_SPEC_NGRAM, .draft_max = 12};
    llmk_spec *sp = NULL;
    CHECK_STATUS(llmk_spec_init(m, &p, &sp), LLMK_OK);
    llmk_spec_stats st;
    step(sp, 0, 0);
    for (int i = 0; i < 40; i++) step(sp, 12, 12); /* every draft kept */
    CHECK_EQ_INT(llmk_spec_draft_len(sp), 12);
    CHECK_STATUS(llmk_spec_stats_get(sp, &st), LLMK_OK);
    CHECK(st.accept_rate > 0.95 && st.draft_len == 12);
    double e = llmk_speculative_expected_tokens(st.accept_rate, 12);
    CHECK_EQ_DBL(st.expected_tokens, e);
    /* seed 001's speedup with the target step taken as the verify of 13 rows, over a plain step */
    CHECK_NEAR(st.speedup, llmk_draft_model_speedup(e, 1.0 + 0.4 * 12, 0, 12) / (1.0 + 0.4 * 12), 1e-9);
    CHECK_EQ_INT(st.n_drafted, 480);
    CHECK_EQ_INT(st.n_tokens, 41 + 40 * 12);
    for (int i = 0; i < 40; i++) step(sp, 4, 0); /* every draft rejected */
    CHECK_EQ_INT(llmk_spec_draft_len(sp), 0);
    CHECK_STATUS(llmk_spec_stats_get(sp, &st), LLMK_OK);
    CHECK(st.accept_rate < 0.3 && st.speedup == 1.0);
    int plain = 0; /* steps without drafts let the estimate drift back until drafting is tried again */
    while (llmk_spec_draft_len(sp) == 0 && plain < 200) step(sp, 0, 0), plain++;
    CHECK(plain > 3 && plain < 200);
    llmk_spec_free(sp);
    p.fixed_len = true;
    CHECK_STATUS(llmk_spec_init(m, &p, &sp), LLMK_OK);
    for (int i = 0; i < 10; i++) step(sp, 4, 0);
    CHECK_EQ_INT(llmk_spec_draft_len(sp), 12);
    llmk_spec_free(sp);
}

/* Where a verified row costs more than half a plain step, the prior (0.5)
 * never pays: prompt lookup probes after 32 plain steps, but drafts the
 * probe only where the context repeats its last 4 tokens. */
static void test_ngram_probe(const llmk_model *m) {
    llmk_spec_params p = {.mode = LLMK_SPEC_NGRAM, .draft_max = 8};
    llmk_spec *sp = NULL;
    CHECK_STATUS(llmk_spec_init(m, &p, &sp), LLMK_OK);
    llmk_spec_feedback(sp, 0, 0, 0, 1.0);
    for (int i = 0; i < 10; i++) llmk_spec_feedback(sp, 2, 0, 0, 1.0 + 0.7 * 2); /* rejected, rows 0.7 */
    CHECK_EQ_INT(llmk_spec_draft_len(sp), 0);
    int plain = 0;
    while (llmk_spec_draft_len(sp) == 0 && plain < 100) llmk_spec_feedback(sp, 0, 0, 0, 1.0), plain++;
    CHECK_EQ_INT(plain, 64); /* 32, doubled: the first drafting step, rejected, was a failed probe */
    CHECK_EQ_INT(llmk_spec_draft_len(sp), 4);
    /* 7 8 9 recurs (3 tokens): enough for a drafting step, not for a probe */
    int32_t three[] = {1, 7, 8, 9, 5, 6, 2, 7, 8, 9}, four[] = {6, 7, 8, 9, 5, 4, 2, 6, 7, 8, 9};
    int32_t d[8], n = -1;
    CHECK_STATUS(llmk_spec_draft(sp, three, 10, 4, d, &n), LLMK_OK);
    CHECK_EQ_INT(n, 0);
    CHECK_STATUS(llmk_spec_draft(sp, four, 11, 4, d, &n), LLMK_OK);
    CHECK_EQ_INT(n, 4);
    CHECK(d[0] == 5 && d[1] == 4 && d[2] == 2 && d[3] == 6);
    /* a failed probe doubles the wait, up to 128, where probing goes on */
    for (int want = 128, i = 0; i < 2; i++) {
        llmk_spec_feedback(sp, 4, 0, 0, 1.0 + 0.7 * 4);
        plain = 0;
        while (llmk_spec_draft_len(sp) == 0 && plain < 300) llmk_spec_feedback(sp, 0, 0, 0, 1.0), plain++;
        CHECK_EQ_INT(plain, want);
    }
    llmk_spec_free(sp);
}

/* A few slow verify steps (a host slowing down for a while) turn drafting
 * off with a row cost of 0.7; the probe that comes later finds rows at 0.1
 * and every draft kept: its figure replaces the stale estimate at once, so
 * drafting resumes (a fifth of the way, 0.58, kept it off). A probe that
 * finds rows dearer still only moves the average. */
static void test_probe_recovers(const llmk_model *m) {
    llmk_spec_params p = {.mode = LLMK_SPEC_NGRAM, .draft_max = 8};
    llmk_spec *sp = NULL;
    llmk_spec_stats st;
    CHECK_STATUS(llmk_spec_init(m, &p, &sp), LLMK_OK);
    llmk_spec_feedback(sp, 0, 0, 0, 1.0);
    for (int i = 0; i < 3; i++) llmk_spec_feedback(sp, 2, 1, 0, 1.0 + 0.7 * 2);
    CHECK_EQ_INT(llmk_spec_draft_len(sp), 0);
    int plain = 0;
    while (llmk_spec_draft_len(sp) == 0 && plain < 300) llmk_spec_feedback(sp, 0, 0, 0, 1.0), plain++;
    CHECK(plain < 300);
    int32_t g = llmk_spec_draft_len(sp);
    llmk_spec_feedback(sp, g, g, 0, 1.0 + 0.1 * g); /* the probe */
    CHECK_STATUS(llmk_spec_stats_get(sp, &st), LLMK_OK);
    CHECK_NEAR(st.row_cost, 0.1, 1e-9);
    CHECK(st.draft_len > 0);
    llmk_spec_free(sp);
    /* dearer: the average moves, by a fifth */
    CHECK_STATUS(llmk_spec_init(m, &p, &sp), LLMK_OK);
    llmk_spec_feedback(sp, 0, 0, 0, 1.0);
    for (int i = 0; i < 3; i++) llmk_spec_feedback(sp, 2, 1, 0, 1.0 + 0.7 * 2);
    for (plain = 0; llmk_spec_draft_len(sp) == 0 && plain < 300; plain++) llmk_spec_feedback(sp, 0, 0, 0, 1.0);
    g = llmk_spec_draft_len(sp);
    llmk_spec_feedback(sp, g, 0, 0, 1.0 + 0.9 * g);
    CHECK_STATUS(llmk_spec_stats_get(sp, &st), LLMK_OK);
    CHECK_NEAR(st.row_cost, 0.8 * 0.7 + 0.2 * 0.9, 1e-9);
    CHECK_EQ_INT(st.draft_len, 0);
    llmk_spec_free(sp);
}

/* ---- the verify step on a model ---------------------------------------------- */

struct chooser {
    llmk_sampler *smp; /* NULL: greedy */
    size_t V;
    int32_t *out;
    int n, max;
};

static int32_t argmax_lowest(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}

static int choose(void *user, const float *logits, int32_t *token, bool *end) {
    struct chooser *c = user;
    if (c->smp) {
        int st = llmk_sampler_sample(c->smp, logits, c->V, token);
        if (st != LLMK_OK || (st = llmk_sampler_accept(c->smp, *token)) != LLMK_OK) return st;
    } else {
        *token = argmax_lowest(logits, c->V);
    }
    c->out[c->n++] = *token;
    *end = c->n >= c->max;
    return LLMK_OK;
}

static llmk_sampler *sampler(size_t V, int64_t seed, int32_t top_k) {
    llmk_sampler_params sp;
    llmk_sampler_params_default(&sp);
    sp.seed = seed, sp.temperature = 1.0, sp.top_k = top_k, sp.top_p = 1.0, sp.min_p = 0;
    llmk_sampler *s = NULL;
    CHECK_STATUS(llmk_sampler_init(&sp, V, &s), LLMK_OK);
    return s;
}

enum { PLEN = 12, GEN = 40 };

/* Plain decoding: one eval per token. hist gets prompt + tokens. */
static void plain_tokens(const llmk_model *m, int threads, const int32_t *prompt, llmk_sampler *smp, int32_t *hist) {
    size_t V = (size_t)llmk_model_hparams(m)->n_vocab;
    llmk_session_params sp = {.n_ctx = 128, .n_threads = threads, .path = LLMK_PATH_FAST};
    llmk_session *s = NULL;
    CHECK_STATUS(llmk_session_init(m, &sp, &s), LLMK_OK);
    float *l = malloc(V * sizeof *l);
    memcpy(hist, prompt, PLEN * sizeof *hist);
    CHECK_STATUS(llmk_session_eval(s, prompt, PLEN, l, V, false), LLMK_OK);
    struct chooser c = {smp, V, hist + PLEN, 0, GEN};
    bool end = false;
    int32_t id;
    while (!end) {
        CHECK_STATUS(choose(&c, l, &id, &end), LLMK_OK);
        if (!end) CHECK_STATUS(llmk_session_eval(s, &id, 1, l, V, false), LLMK_OK);
    }
    free(l);
    llmk_session_free(s);
}

/* The same through speculative steps; returns the steps taken. */
static int spec_tokens(const llmk_model *m, int threads, const llmk_spec_params *p, const int32_t *prompt,
                       llmk_sampler *smp, int32_t *hist) {
    size_t V = (size_t)llmk_model_hparams(m)->n_vocab;
    llmk_session_params sp = {.n_ctx = 128, .n_threads = threads, .path = LLMK_PATH_FAST};
    llmk_session *s = NULL;
    llmk_spec *spec = NULL;
    CHECK_STATUS(llmk_session_init(m, &sp, &s), LLMK_OK);
    CHECK_STATUS(llmk_spec_init(m, p, &spec), LLMK_OK);
    float *l = malloc(V * sizeof *l);
    memcpy(hist, prompt, PLEN * sizeof *hist);
    CHECK_STATUS(llmk_session_eval(s, prompt, PLEN, l, V, false), LLMK_OK);
    struct chooser c = {smp, V, hist + PLEN, 0, GEN};
    bool end = false;
    int32_t id, steps = 0;
    CHECK_STATUS(choose(&c, l, &id, &end), LLMK_OK);
    while (!end && s && spec) {
        int32_t out[65];
        size_t n_out = 0;
        int st = llmk_session_spec_step(s, spec, hist, (size_t)(PLEN + c.n), choose, &c, out, 65, &n_out, &end);
        CHECK_STATUS(st, LLMK_OK);
        if (st != LLMK_OK) break;
        CHECK(n_out >= 1 && llmk_session_pos(s) == PLEN + c.n - 1);
        steps++;
    }
    free(l);
    llmk_spec_free(spec);
    llmk_session_free(s);
    return steps;
}

static void test_lossless(const llmk_model *m) {
    size_t V = (size_t)llmk_model_hparams(m)->n_vocab;
    /* a prompt that repeats itself, so prompt lookup has drafts to offer */
    int32_t prompt[PLEN];
    for (int i = 0; i < PLEN; i++) prompt[i] = (int32_t)((i % 5) * 37 + 11) % (int32_t)V;
    llmk_spec_params modes[] = {
        {.mode = LLMK_SPEC_NGRAM, .ngram_min = 1, .draft_max = 6, .fixed_len = true}, /* mostly rejected */
        {.mode = LLMK_SPEC_NGRAM},                                                     /* adaptive */
        {.mode = LLMK_SPEC_DRAFT, .draft_model = m, .draft_max = 5, .draft_threads = 1, .fixed_len = true},
        {.mode = LLMK_SPEC_DRAFT, .draft_model = m, .draft_max = 5, .draft_threads = 1}, /* adaptive */
    };
    for (int threads = 1; threads <= 3; threads++)
        for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++)
            for (int sampled = 0; sampled < 2; sampled++) {
                int32_t want[PLEN + GEN], got[PLEN + GEN];
                llmk_sampler *a = sampled ? sampler(V, 1000 + threads, 0) : NULL;
                llmk_sampler *b = sampled ? sampler(V, 1000 + threads, 0) : NULL;
                plain_tokens(m, threads, prompt, a, want);
                int steps = spec_tokens(m, threads, &modes[k], prompt, b, got);
                CHECK(memcmp(want, got, sizeof want) == 0);
                if (k == 2 && !sampled) CHECK(steps <= GEN / 4); /* the target drafting for itself: all kept */
                llmk_sampler_free(a), llmk_sampler_free(b);
            }
}

/* Chi-square statistic over candidates (probabilities p, counts c); see test_sample.c. */
static double chi_ratio(const long *counts, const double *p, int n, long draws) {
    double x = 0;
    int df = -1;
    for (int i = 0; i < n; i++) {
        if (p[i] <= 0) {
            if (counts[i]) return 1e30;
            continue;
        }
        double e = p[i] * (double)draws;
        x += (counts[i] - e) * (counts[i] - e) / e;
        df++;
    }
    if (df < 1) return 0;
    double k = df, z = 3.719, t = 1 - 2 / (9 * k) + z * sqrt(2 / (9 * k)); /* upper tail 1e-4 */
    return x / (k * t * t * t);
}

enum { TOPK = 6, DRAWS = 3000 };

/* A step whose draft is the target's own greedy continuation (the model
 * drafting for itself) under temperature-1 top-6 sampling: over many seeds
 * the first token must follow row 0's distribution and, when it equals the
 * draft, the second token row 1's: the target's distribution exactly. */
static void test_distribution(const llmk_model *m) {
    size_t V = (size_t)llmk_model_hparams(m)->n_vocab;
    int32_t prompt[PLEN];
    for (int i = 0; i < PLEN; i++) prompt[i] = (int32_t)(i * 53 + 7) % (int32_t)V;
    llmk_session_params spp = {.n_ctx = 64, .n_threads = 2, .path = LLMK_PATH_FAST};
    llmk_session *s = NULL;
    CHECK_STATUS(llmk_session_init(m, &spp, &s), LLMK_OK);
    if (!s) return;
    float *l = malloc(2 * V * sizeof *l);
    /* the distributions: row 0 after the prompt, row 1 after the greedy draft */
    int32_t ids[2] = {prompt[PLEN - 1], 0};
    CHECK_STATUS(llmk_session_eval(s, prompt, PLEN - 1, NULL, 0, false), LLMK_OK);
    CHECK_STATUS(llmk_session_eval(s, ids, 1, l, V, false), LLMK_OK);
    ids[1] = argmax_lowest(l, V);
    CHECK_STATUS(llmk_session_truncate(s, PLEN - 1), LLMK_OK);
    CHECK_STATUS(llmk_session_eval(s, ids, 2, l, 2 * V, true), LLMK_OK);
    int32_t cand[2][TOPK];
    double p[2][TOPK];
    llmk_sampler *probe = sampler(V, 1, TOPK);
    for (int r = 0; r < 2; r++) {
        const llmk_token_prob *tp;
        size_t nc = 0;
        CHECK_STATUS(llmk_sampler_candidates(probe, l + (size_t)r * V, V, &tp, &nc), LLMK_OK);
        CHECK_EQ_INT(nc, TOPK);
        for (int i = 0; i < TOPK && i < (int)nc; i++) cand[r][i] = tp[i].id, p[r][i] = tp[i].p;
    }
    llmk_sampler_free(probe);
    long c0[TOPK] = {0}, c1[TOPK] = {0}, n1 = 0;
    llmk_spec_params pp = {.mode = LLMK_SPEC_DRAFT, .draft_model = m, .draft_max = 1, .fixed_len = true,
                           .draft_threads = 1, .draft_n_ctx = 64};
    llmk_spec *spec = NULL;
    CHECK_STATUS(llmk_spec_init(m, &pp, &spec), LLMK_OK);
    for (long seed = 0; spec && seed < DRAWS; seed++) {
        int32_t hist[PLEN + 2], out[2];
        memcpy(hist, prompt, sizeof prompt);
        llmk_sampler *smp = sampler(V, seed, TOPK);
        struct chooser c = {smp, V, hist + PLEN, 0, 2};
        size_t n_out = 0;
        bool end = false;
        CHECK_STATUS(llmk_session_truncate(s, PLEN - 1), LLMK_OK);
        CHECK_STATUS(llmk_session_spec_step(s, spec, hist, PLEN, choose, &c, out, 2, &n_out, &end), LLMK_OK);
        for (int i = 0; i < TOPK; i++) c0[i] += out[0] == cand[0][i];
        if (n_out == 2) { /* the draft was kept: the second token is row 1's */
            CHECK_EQ_INT(out[0], ids[1]);
            for (int i = 0; i < TOPK; i++) c1[i] += out[1] == cand[1][i];
            n1++;
        } else {
            CHECK(n_out == 1 && out[0] != ids[1]);
        }
        llmk_sampler_free(smp);
    }
    double r0 = chi_ratio(c0, p[0], TOPK, DRAWS), r1 = chi_ratio(c1, p[1], TOPK, n1);
    printf("test_spec: first token chi2/crit %.3f over %d draws, second %.3f over %ld (draft kept %.1f%%, p %.3f)\n",
           r0, DRAWS, r1, n1, 100.0 * (double)n1 / DRAWS, p[0][0]);
    CHECK(r0 < 1.0);
    CHECK(n1 > 200 && r1 < 1.0);
    llmk_spec_free(spec);
    free(l);
    llmk_session_free(s);
}

/* ---- speculation inside the engine (llmk batch, llmk serve) ---------------- */

struct collected {
    int32_t tok[2][GEN];
    int32_t n[2];
};
static int collect(void *user, const llmk_token_event *ev) {
    struct collected *c = user;
    int k = (int)(intptr_t)ev->user;
    if (ev->token >= 0 && c->n[k] < GEN) c->tok[k][c->n[k]++] = ev->token;
    return 0;
}

/* Two greedy requests in one engine, plain or each with its own drafter:
 * the tokens, and the drafter's and the engine's figures. */
static void engine_tokens(const llmk_model *m, const llmk_spec_params *p, const int32_t *prompt,
                          struct collected *out, llmk_spec_stats *ss, llmk_engine_stats *es) {
    llmk_engine_params ep = {.ctx = {.n_seq_max = 2, .n_ctx = 128, .n_threads = 2}};
    llmk_engine *e = NULL;
    llmk_spec *spec[2] = {NULL, NULL};
    memset(out, 0, sizeof *out);
    CHECK_STATUS(llmk_engine_init(m, &ep, &e), LLMK_OK);
    for (int k = 0; k < 2 && e; k++) {
        if (p) CHECK_STATUS(llmk_spec_init(m, p, &spec[k]), LLMK_OK);
        llmk_request q = {.prompt = prompt + k, .n_prompt = PLEN - k, .max_tokens = GEN, .user = (void *)(intptr_t)k,
                          .spec = spec[k]};
        int64_t id;
        CHECK_STATUS(llmk_engine_submit(e, &q, &id), LLMK_OK);
    }
    if (e) CHECK_STATUS(llmk_engine_run(e, collect, out), LLMK_OK);
    if (e) CHECK_STATUS(llmk_engine_stats_get(e, es), LLMK_OK);
    if (spec[0]) CHECK_STATUS(llmk_spec_stats_get(spec[0], ss), LLMK_OK);
    llmk_engine_free(e);
    llmk_spec_free(spec[0]), llmk_spec_free(spec[1]);
}

/* The engine's steps are timed for the adaptive length: before, it fed the
 * drafters no times, so an adaptive drafter never drafted in batch or serve. */
static void test_engine(const llmk_model *m) {
    size_t V = (size_t)llmk_model_hparams(m)->n_vocab;
    int32_t prompt[PLEN];
    for (int i = 0; i < PLEN; i++) prompt[i] = (int32_t)((i % 5) * 37 + 11) % (int32_t)V;
    struct collected plain, got;
    llmk_spec_stats ss;
    llmk_engine_stats es;
    engine_tokens(m, NULL, prompt, &plain, &ss, &es);
    CHECK(plain.n[0] == GEN && plain.n[1] == GEN && es.drafted_tokens == 0);
    llmk_spec_params fixed = {.mode = LLMK_SPEC_NGRAM, .ngram_min = 1, .draft_max = 6, .fixed_len = true};
    engine_tokens(m, &fixed, prompt, &got, &ss, &es);
    CHECK(memcmp(&plain, &got, sizeof plain) == 0);
    CHECK(ss.n_drafted > 0 && es.drafted_tokens >= ss.n_drafted && es.accepted_drafts <= es.drafted_tokens);
    llmk_spec_params adaptive = {.mode = LLMK_SPEC_NGRAM};
    engine_tokens(m, &adaptive, prompt, &got, &ss, &es);
    CHECK(memcmp(&plain, &got, sizeof plain) == 0);
    CHECK(ss.n_steps > 0 && ss.verify_s > 0); /* decode-only steps were timed */
    CHECK(es.drafted_tokens >= ss.n_drafted);
    /* a draft model shared through a pool (the target drafting for itself:
     * every draft kept); with one slot the second drafter finds none taken
     * free while the first runs and drafts nothing, with the same tokens */
    for (int32_t slots = 1; slots <= 2; slots++) {
        llmk_draft_pool *dp = NULL;
        CHECK_STATUS(llmk_draft_pool_init(m, m, slots, 128, 1, &dp), LLMK_OK);
        llmk_spec_params pooled = {.mode = LLMK_SPEC_DRAFT, .draft_pool = dp, .draft_max = 4, .fixed_len = true};
        engine_tokens(m, &pooled, prompt, &got, &ss, &es);
        CHECK(memcmp(&plain, &got, sizeof plain) == 0);
        CHECK(ss.n_drafted > 0 && ss.n_accepted == ss.n_drafted);
        CHECK(es.accepted_drafts == es.drafted_tokens && (es.drafted_tokens > ss.n_drafted) == (slots == 2));
        llmk_draft_pool_free(dp);
    }
    llmk_draft_pool *dp = NULL;
    CHECK_STATUS(llmk_draft_pool_init(m, m, 0, 128, 1, &dp), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_draft_pool_init(NULL, m, 1, 128, 1, &dp), LLMK_INVALID_ARGUMENT);
}

int main(void) {
    llmk_model *m = NULL;
    CHECK_STATUS(llmk_model_load(TINY, &m), LLMK_OK);
    if (m) {
        test_ngram(m);
        test_params(m);
        test_adaptive(m);
        test_ngram_probe(m);
        test_probe_recovers(m);
        test_lossless(m);
        test_distribution(m);
        test_engine(m);
    }
    llmk_model_free(m);
    return check_summary("test_spec");
}
