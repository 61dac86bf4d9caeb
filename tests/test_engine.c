/* The continuous-batching engine: every request's tokens and the logits
 * they were chosen from must be bitwise those of the same request run alone
 * on a one-sequence context (one eval for the prompt, one per token),
 * whatever runs beside it: many at once with chunked prefill mixed into
 * decode steps, submitted in another order, after a prefix-cache hit, and
 * after preemption and recompute in a pool too small for all of them.
 * Refusals, cancellation and the callback's stop are checked too. Runs on a
 * committed tiny model (from the repo root) and on the default model when
 * present. */
#include "check.h"
#include "llmk.h"
#include "llmk_formulas.h"

#include <stdlib.h>
#include <string.h>

enum { NR = 6, MAXP = 300, MAXG = 48, CTX = 512 };

struct spec {
    int n_prompt, max_tokens;
    bool sampled;   /* seeded sampler, else greedy */
    int stop_index; /* >= 0: the token the reference generates there is a stop id */
};
static const struct spec SPECS[NR] = {
    {5, 20, false, -1}, {120, 20, false, -1}, {37, 30, true, -1},
    {260, 8, false, -1}, {100, 40, false, 6}, {200, 16, true, -1},
};

struct result {
    int32_t tok[MAXG];
    uint64_t hash[MAXG]; /* FNV-1a of the logits row each token was chosen from */
    int n;
    enum llmk_finish finish;
    int events_after_finish;
};

struct world {
    const llmk_model *m;
    size_t V;
    int32_t prompt[NR][MAXP];
    int32_t stop_id[NR];
    struct result want[NR];
};

static uint64_t fnv(const float *x, size_t n) {
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)x;
    for (size_t i = 0; i < n * sizeof *x; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static int32_t argmax_lowest(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}

static llmk_sampler *make_sampler(size_t V, int64_t seed) {
    llmk_sampler_params sp;
    llmk_sampler_params_default(&sp);
    sp.seed = seed;
    sp.repeat_penalty = 1.1f; /* the history the sampler keeps must be the same too */
    llmk_sampler *s = NULL;
    CHECK_STATUS(llmk_sampler_init(&sp, V, &s), LLMK_OK);
    return s;
}

/* Request i alone: a one-sequence context, the prompt in one eval, then one
 * eval per token; the choice as the engine documents it. */
static void reference(struct world *w, int i) {
    const struct spec *sp = &SPECS[i];
    llmk_context_params cp = {.n_seq_max = 1, .n_ctx = CTX, .n_threads = 1, .kv_type = LLMK_TYPE_F16,
                              .allow_long_ctx = true};
    llmk_context *c = NULL;
    CHECK_STATUS(llmk_context_init(w->m, &cp, &c), LLMK_OK);
    if (!c) return;
    llmk_sampler *smp = sp->sampled ? make_sampler(w->V, 100 + i) : NULL;
    float *logits = malloc(w->V * sizeof *logits);
    llmk_batch_item *it = malloc(MAXP * sizeof *it);
    for (int k = 0; k < sp->n_prompt; k++)
        it[k] = (llmk_batch_item){.seq = 0, .id = w->prompt[i][k], .logits = k + 1 == sp->n_prompt};
    CHECK_STATUS(llmk_context_eval(c, it, (size_t)sp->n_prompt, logits, w->V), LLMK_OK);
    struct result *r = &w->want[i];
    r->finish = LLMK_FINISH_LENGTH;
    for (;;) {
        int32_t t = argmax_lowest(logits, w->V);
        if (smp) {
            CHECK_STATUS(llmk_sampler_sample(smp, logits, w->V, &t), LLMK_OK);
            CHECK_STATUS(llmk_sampler_accept(smp, t), LLMK_OK);
        }
        r->hash[r->n] = fnv(logits, w->V);
        r->tok[r->n++] = t;
        if (r->n == sp->max_tokens) break;
        llmk_batch_item one = {.seq = 0, .id = t, .logits = true};
        CHECK_STATUS(llmk_context_eval(c, &one, 1, logits, w->V), LLMK_OK);
    }
    if (sp->stop_index >= 0) { /* the engine ends at the stop id's first appearance */
        w->stop_id[i] = r->tok[sp->stop_index], r->finish = LLMK_FINISH_STOP;
        for (int k = 0; k < r->n; k++)
            if (r->tok[k] == w->stop_id[i]) {
                r->n = k + 1;
                break;
            }
    }
    free(it), free(logits);
    llmk_sampler_free(smp);
    llmk_context_free(c);
}

struct run {
    struct world *w;
    int64_t ids[NR];
    struct result got[NR];
    int stop_after; /* request 0 ends from the callback after this many tokens (0: never) */
};

static int on_event(void *user, const llmk_token_event *ev) {
    struct run *run = user;
    int i = (int)(intptr_t)ev->user;
    struct result *r = &run->got[i];
    CHECK(ev->request == run->ids[i]);
    if (r->finish != LLMK_FINISH_NONE) {
        r->events_after_finish++;
        return 0;
    }
    CHECK(ev->status == LLMK_OK && ev->logits);
    if (ev->status != LLMK_OK || !ev->logits || r->n >= MAXG || ev->index != r->n) {
        r->finish = LLMK_FINISH_ERROR;
        return 0;
    }
    r->hash[r->n] = fnv(ev->logits, run->w->V);
    r->tok[r->n++] = ev->token;
    r->finish = ev->finish;
    return i == 0 && run->stop_after && r->n == run->stop_after;
}

static llmk_engine *engine(const struct world *w, int n_seq, int blocks, int step_tokens) {
    llmk_engine_params ep = {.ctx = {.n_seq_max = n_seq, .n_ctx = CTX, .n_threads = 2, .kv_type = LLMK_TYPE_F16,
                                     .n_kv_blocks = blocks, .allow_long_ctx = true},
                             .step_tokens = step_tokens};
    llmk_engine *e = NULL;
    CHECK_STATUS(llmk_engine_init(w->m, &ep, &e), LLMK_OK);
    return e;
}

static void submit(struct run *run, llmk_engine *e, int i, llmk_sampler **smp) {
    const struct spec *sp = &SPECS[i];
    *smp = sp->sampled ? make_sampler(run->w->V, 100 + i) : NULL;
    llmk_request rq = {.prompt = run->w->prompt[i], .n_prompt = (size_t)sp->n_prompt, .max_tokens = sp->max_tokens,
                       .sampler = *smp, .stop_ids = sp->stop_index >= 0 ? &run->w->stop_id[i] : NULL,
                       .n_stop = sp->stop_index >= 0, .user = (void *)(intptr_t)i};
    CHECK_STATUS(llmk_engine_submit(e, &rq, &run->ids[i]), LLMK_OK);
}

/* All requests through one engine, in `order`; each must match its reference. */
static void batched(struct world *w, const char *what, const int *order, int n_seq, int blocks, int step_tokens,
                    llmk_engine_stats *st_out) {
    llmk_engine *e = engine(w, n_seq, blocks, step_tokens);
    if (!e) return;
    struct run run = {.w = w};
    llmk_sampler *smp[NR] = {0};
    for (int k = 0; k < NR; k++) submit(&run, e, order[k], &smp[order[k]]);
    CHECK_STATUS(llmk_engine_run(e, on_event, &run), LLMK_OK);
    CHECK(llmk_engine_idle(e));
    for (int i = 0; i < NR; i++) {
        const struct result *g = &run.got[i], *want = &w->want[i];
        bool same = g->n == want->n && g->finish == want->finish && g->events_after_finish == 0 &&
                    memcmp(g->tok, want->tok, (size_t)g->n * sizeof *g->tok) == 0 &&
                    memcmp(g->hash, want->hash, (size_t)g->n * sizeof *g->hash) == 0;
        CHECK(same);
        if (!same)
            fprintf(stderr, "  %s: request %d: %d tokens (finish %d), want %d (finish %d)\n", what, i, g->n,
                    g->finish, want->n, want->finish);
    }
    llmk_engine_stats st;
    CHECK_STATUS(llmk_engine_stats_get(e, &st), LLMK_OK);
    int64_t gen = 0, prompt = 0;
    for (int i = 0; i < NR; i++) gen += w->want[i].n, prompt += SPECS[i].n_prompt;
    CHECK(st.n_submitted == NR && st.n_finished == NR && st.n_cancelled == 0);
    CHECK(st.n_running == 0 && st.n_waiting == 0);
    CHECK(st.generated_tokens == gen && st.prompt_tokens == prompt);
    llmk_kv_info kv;
    CHECK_STATUS(llmk_context_kv_info(llmk_engine_context(e), &kv), LLMK_OK);
    CHECK(kv.n_used == 0 && kv.n_tokens == 0); /* every sequence gave its blocks back */
    if (st_out) *st_out = st;
    for (int i = 0; i < NR; i++) llmk_sampler_free(smp[i]);
    llmk_engine_free(e);
}

/* A second request with the first one's prompt, after it finished, starts on
 * its cached blocks and still produces the same bits. */
static void prefix_hit(struct world *w) {
    llmk_engine *e = engine(w, 2, 0, 64);
    if (!e) return;
    struct run run = {.w = w};
    llmk_sampler *smp = NULL;
    submit(&run, e, 3, &smp); /* 260 tokens: two full blocks */
    CHECK_STATUS(llmk_engine_run(e, on_event, &run), LLMK_OK);
    run.got[3] = (struct result){0};
    submit(&run, e, 3, &smp);
    CHECK_STATUS(llmk_engine_run(e, on_event, &run), LLMK_OK);
    CHECK(run.got[3].n == w->want[3].n &&
          memcmp(run.got[3].hash, w->want[3].hash, (size_t)w->want[3].n * sizeof(uint64_t)) == 0);
    llmk_engine_stats st;
    llmk_engine_stats_get(e, &st);
    CHECK(st.cached_tokens == 2 * LLMK_KV_BLOCK && st.prompt_tokens == 2 * SPECS[3].n_prompt);
    /* alone, a prompt goes in step-sized chunks: seed 001's count, then the uncached rest */
    CHECK(st.prefill_chunks == (int64_t)(llmk_chunked_prefill_chunks(SPECS[3].n_prompt, 64) +
                                         llmk_chunked_prefill_chunks(SPECS[3].n_prompt - 2 * LLMK_KV_BLOCK, 64)));
    llmk_engine_free(e);
}

/* Submitted together, request 5 (whose first block is request 3's) waits
 * until 3 has computed that block and then starts on it from the prefix
 * cache: one block shared, and both still give their own bits. */
static void prefix_in_flight(struct world *w) {
    llmk_engine *e = engine(w, 2, 0, 64);
    if (!e) return;
    struct run run = {.w = w};
    llmk_sampler *smp[2] = {0};
    submit(&run, e, 3, &smp[0]);
    submit(&run, e, 5, &smp[1]);
    CHECK_STATUS(llmk_engine_run(e, on_event, &run), LLMK_OK);
    for (int i = 3; i <= 5; i += 2)
        CHECK(run.got[i].n == w->want[i].n && memcmp(run.got[i].tok, w->want[i].tok, (size_t)w->want[i].n * 4) == 0 &&
              memcmp(run.got[i].hash, w->want[i].hash, (size_t)w->want[i].n * sizeof(uint64_t)) == 0);
    llmk_engine_stats st;
    llmk_engine_stats_get(e, &st);
    CHECK(st.cached_tokens == LLMK_KV_BLOCK);
    llmk_sampler_free(smp[0]), llmk_sampler_free(smp[1]);
    llmk_engine_free(e);
}

/* Refusals before anything queues, the queue bound, cancellation, and the
 * callback ending a request. */
static void refusals(struct world *w) {
    llmk_engine_params ep = {.ctx = {.n_seq_max = 2, .n_ctx = CTX, .n_threads = 1, .n_kv_blocks = 3,
                                     .allow_long_ctx = true},
                             .max_waiting = 3};
    llmk_engine *e = NULL;
    CHECK_STATUS(llmk_engine_init(w->m, &ep, &e), LLMK_OK);
    if (!e) return;
    int64_t id = 0;
    llmk_request rq = {.prompt = w->prompt[0], .n_prompt = 5, .max_tokens = 4};
    llmk_request bad = rq;
    bad.n_prompt = 0;
    CHECK_STATUS(llmk_engine_submit(e, &bad, &id), LLMK_INVALID_ARGUMENT);
    bad = rq, bad.max_tokens = 0;
    CHECK_STATUS(llmk_engine_submit(e, &bad, &id), LLMK_INVALID_ARGUMENT);
    int32_t outside[2] = {1, (int32_t)w->V};
    bad = rq, bad.prompt = outside, bad.n_prompt = 2;
    CHECK_STATUS(llmk_engine_submit(e, &bad, &id), LLMK_INVALID_TOKEN);
    int32_t *longp = calloc(CTX, sizeof *longp);
    bad = rq, bad.prompt = longp, bad.n_prompt = CTX;
    CHECK_STATUS(llmk_engine_submit(e, &bad, &id), LLMK_CONTEXT_FULL);
    bad.n_prompt = 300, bad.max_tokens = 200; /* 500 tokens: 4 blocks, the pool has 3 */
    CHECK_STATUS(llmk_engine_submit(e, &bad, &id), LLMK_CACHE_CAPACITY_EXCEEDED);
    CHECK(strstr(llmk_last_error(), "4 KV blocks") && strstr(llmk_last_error(), "pool has 3"));
    bad.max_tokens = 84; /* 384 tokens: exactly the pool */
    CHECK_STATUS(llmk_engine_submit(e, &bad, &id), LLMK_OK);
    CHECK_STATUS(llmk_engine_cancel(e, id), LLMK_OK); /* waiting */
    CHECK_STATUS(llmk_engine_cancel(e, id), LLMK_NOT_FOUND);
    free(longp);

    struct run run = {.w = w, .stop_after = 2};
    for (int i = 0; i < 3; i++) {
        llmk_request ok = {.prompt = w->prompt[i], .n_prompt = 5, .max_tokens = 10, .user = (void *)(intptr_t)i};
        CHECK_STATUS(llmk_engine_submit(e, &ok, &run.ids[i]), LLMK_OK);
    }
    CHECK_STATUS(llmk_engine_submit(e, &rq, &id), LLMK_QUEUE_FULL);
    CHECK_STATUS(llmk_engine_step(e, on_event, &run), LLMK_OK); /* admits 0 and 1 (two slots) */
    CHECK_STATUS(llmk_engine_cancel(e, run.ids[1]), LLMK_OK);    /* running */
    CHECK_STATUS(llmk_engine_run(e, on_event, &run), LLMK_OK);
    CHECK(run.got[0].n == 2);  /* the callback ended it */
    CHECK(run.got[1].n == 1);  /* the first step's token, then cancelled */
    CHECK(run.got[2].n == 10 && run.got[2].finish == LLMK_FINISH_LENGTH);
    llmk_engine_stats st;
    llmk_engine_stats_get(e, &st);
    CHECK(st.n_cancelled == 3 && st.n_finished == 1 && st.n_submitted == 4);
    CHECK_STATUS(llmk_engine_step(NULL, NULL, NULL), LLMK_INVALID_ARGUMENT);
    llmk_engine_free(e);
}

static void one_model(const char *path, bool all) {
    llmk_model *m = NULL;
    if (llmk_model_load(path, &m) != LLMK_OK) {
        if (all) CHECK(!"tiny model missing");
        else fprintf(stderr, "test_engine: %s not present, skipped\n", path);
        return;
    }
    struct world *w = calloc(1, sizeof *w);
    w->m = m, w->V = (size_t)llmk_model_hparams(m)->n_vocab;
    uint32_t x = 777;
    for (int i = 0; i < NR; i++)
        for (int k = 0; k < MAXP; k++) x = x * 1664525u + 1013904223u, w->prompt[i][k] = (int32_t)((x >> 8) % w->V);
    memcpy(w->prompt[5], w->prompt[3], 150 * sizeof(int32_t)); /* 5 shares 3's first block */
    for (int i = 0; i < NR; i++) reference(w, i);

    static const int fwd[NR] = {0, 1, 2, 3, 4, 5}, rev[NR] = {5, 4, 3, 2, 1, 0};
    batched(w, "16 at once, step 512", fwd, 16, 0, 512, NULL);
    if (all) {
        batched(w, "4 slots, step 64", fwd, 4, 0, 64, NULL);
        batched(w, "reversed, 3 slots, step 40", rev, 3, 0, 40, NULL);
        /* 6 requests of 1-3 blocks each in 8 blocks: admission waits, and
         * sequences crossing a block boundary preempt others */
        llmk_engine_stats st = {0};
        batched(w, "8 blocks", fwd, 6, 8, 96, &st);
        CHECK(st.n_preempted > 0 && st.recomputed_tokens > 0);
        fprintf(stderr, "test_engine: 8 blocks: %lld preemptions, %lld tokens recomputed, %lld from the cache\n",
                (long long)st.n_preempted, (long long)st.recomputed_tokens, (long long)st.cached_tokens);
        prefix_hit(w);
        prefix_in_flight(w);
        refusals(w);
    }
    free(w);
    llmk_model_free(m);
}

int main(void) {
    one_model("tests/fixtures/model/tiny/tiny_qwen3.gguf", true);
    const char *path = check_default_model("test_engine", 1);
    if (path) one_model(path, false);
    return check_summary("test_engine");
}
