/* Continuous batching over one llmk_context (docs/batching.md).
 *
 * The engine keeps requests in two places: running (holding a sequence slot
 * of the context, listed in admission order) and waiting (a FIFO queue;
 * preempted requests go back to its front). Each step admits what fits, plans
 * one llmk_context_eval (a decode row per running request whose prompt is
 * done, then prompt chunks up to step_tokens), makes room by preemption when
 * the plan needs more KV blocks than the pool has, evaluates, and reports the
 * chosen tokens. Everything the engine decides changes only which rows share
 * a pass; the context's reductions are per row, so no decision changes a
 * request's bits. Admission and the choice of victim use seed 001's
 * continuous-batching formulas (admission_control_accept, preemption_score);
 * a prompt alone goes in chunked_prefill_chunks(prompt, step_tokens) pieces
 * (tests/test_engine.c checks the count). */
#include "internal.h"
#include "llmk_formulas.h"
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct req {
    int64_t id;
    void *user;
    int32_t *tok;           /* prompt, then generated tokens: n_prompt + max_gen */
    int32_t *stop;          /* [n_stop] */
    int32_t n_prompt, n_tok, max_gen, n_stop;
    int32_t seq;            /* context sequence while running, else -1 */
    int32_t n_done;         /* tokens whose K/V the sequence holds */
    int32_t n_cached;       /* prompt tokens the first admission found in the prefix cache */
    bool preempted;         /* waiting to be recomputed */
    bool ended;             /* cancelled during a step: removed when the step ends */
    struct llmk_sampler *sampler;
    struct llmk_spec *spec; /* speculative decoding, or NULL */
    int32_t *draft;         /* [SPEC_MAX]: this step's drafts */
    int32_t n_draft;        /* drafts in this step's plan */
    double draft_s;         /* the drafter's time for them */
    bool drafted;           /* this step's drafts were made with the pool's others (pooled_drafts) */
    int32_t verified;       /* rows of this step delivered so far (spec: the pending one, then drafts) */
    bool rejected;          /* a row of this step chose other than its draft: its later rows are dead */
    struct req *next;       /* waiting queue */
};

#define SPEC_MAX 64 /* most drafts per step (llmk_spec_params.draft_max's limit) */

struct llmk_engine {
    llmk_context *c;
    int32_t n_seq, n_ctx, step_tokens, max_waiting;
    size_t V;
    struct req **run;       /* [n_seq]: running requests in admission order */
    int32_t n_run;
    struct req *wait_head, *wait_tail;
    int32_t n_wait;
    int64_t next_id;
    bool in_step;           /* callbacks run: cancellations wait for the step's end */
    /* one step's plan, sized at init */
    llmk_batch_item *items; /* [step_tokens] */
    int32_t n_items;
    int32_t *count;         /* [n_seq]: items of run[i] in the plan */
    struct req **row_req;   /* [rows_cap]: the request of each logits row, in item order */
    int32_t n_rows, rows_cap; /* rows_cap: n_seq, or more once speculative rows need it */
    float *logits;          /* [rows_cap][V] */
    /* the step's timing, for the drafters' cost model: a step that decodes
     * only (no prompt chunk) is timed; its eval time and drafted rows */
    bool decode_only;
    int32_t step_drafts;
    double step_s;
    struct llmk_spec_job *jobs; /* [n_seq]: pooled_drafts' */
    llmk_engine_stats st;
    char err[512];          /* the detail error events carry */
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void req_free(struct req *r) {
    if (!r) return;
    free(r->tok), free(r->stop), free(r->draft), free(r);
}

void llmk_engine_free(llmk_engine *e) {
    if (!e) return;
    for (int32_t i = 0; i < e->n_run; i++) req_free(e->run[i]);
    for (struct req *r = e->wait_head, *n; r; r = n) n = r->next, req_free(r);
    llmk_context_free(e->c);
    free(e->run), free(e->items), free(e->count), free(e->row_req), free(e->logits);
    free(e->jobs);
    free(e);
}

int llmk_engine_init(const llmk_model *m, const llmk_engine_params *p, llmk_engine **out) {
    llmk_error_clear();
    if (!m || !p || !out) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_engine_init: NULL argument");
    *out = NULL;
    llmk_engine *e = calloc(1, sizeof *e);
    if (!e) return llmk_fail(LLMK_OUT_OF_MEMORY, "llmk_engine_init: struct");
    int st = llmk_context_init(m, &p->ctx, &e->c);
    if (st != LLMK_OK) {
        free(e);
        return st;
    }
    e->n_seq = llmk_context_n_seq_max(e->c);
    e->n_ctx = llmk_context_n_ctx(e->c);
    e->V = (size_t)m->hp.n_vocab;
    int32_t steps = p->step_tokens > 0 ? p->step_tokens : p->ctx.n_batch > 0 ? p->ctx.n_batch : 512;
    e->step_tokens = steps < e->n_seq ? e->n_seq : steps;
    e->max_waiting = p->max_waiting > 0 ? p->max_waiting : 1024;
    e->next_id = 1;
    size_t ns = (size_t)e->n_seq;
    e->run = calloc(ns, sizeof *e->run);
    e->items = malloc((size_t)e->step_tokens * sizeof *e->items);
    e->count = malloc(ns * sizeof *e->count);
    e->row_req = malloc((size_t)e->step_tokens * sizeof *e->row_req);
    e->logits = malloc(ns * e->V * sizeof *e->logits);
    e->rows_cap = e->n_seq;
    e->jobs = malloc(ns * sizeof *e->jobs);
    if (!e->run || !e->items || !e->count || !e->row_req || !e->logits || !e->jobs) {
        llmk_engine_free(e);
        return llmk_fail(LLMK_OUT_OF_MEMORY, "llmk_engine_init: buffers for %zu sequences", ns);
    }
    *out = e;
    return LLMK_OK;
}

/* ---- submission ------------------------------------------------------------ */

/* Refusals of a request that could never run, with the figures. */
static int check_request(const llmk_engine *e, const llmk_request *r) {
    if (!r->prompt || r->n_prompt == 0)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "engine: request with an empty prompt");
    if (r->max_tokens < 1)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "engine: max_tokens %d (at least 1)", r->max_tokens);
    if (r->n_stop && !r->stop_ids) return llmk_fail(LLMK_INVALID_ARGUMENT, "engine: %zu stop ids, NULL", r->n_stop);
    for (size_t i = 0; i < r->n_prompt; i++)
        if (r->prompt[i] < 0 || (size_t)r->prompt[i] >= e->V)
            return llmk_fail(LLMK_INVALID_TOKEN, "engine: prompt token %zu is %d, outside the vocabulary [0, %zu)",
                             i, r->prompt[i], e->V);
    if (r->n_prompt >= (size_t)e->n_ctx)
        return llmk_fail(LLMK_CONTEXT_FULL, "engine: a prompt of %zu tokens leaves no room to generate in a context "
                         "of %d", r->n_prompt, e->n_ctx);
    int64_t total = (int64_t)r->n_prompt + r->max_tokens;
    if (total > e->n_ctx) total = e->n_ctx;
    llmk_kv_info kv;
    llmk_context_kv_info(e->c, &kv);
    int64_t blocks = (int64_t)llmk_paged_attention_block_count((double)total, kv.block_size);
    if (blocks > kv.n_blocks)
        return llmk_fail(LLMK_CACHE_CAPACITY_EXCEEDED, "engine: %lld tokens (prompt %zu + up to %d generated) need "
                         "%lld KV blocks of %d; the pool has %d", (long long)total, r->n_prompt, r->max_tokens,
                         (long long)blocks, kv.block_size, kv.n_blocks);
    if (e->n_wait >= e->max_waiting)
        return llmk_fail(LLMK_QUEUE_FULL, "engine: %d requests already wait (max_waiting)", e->n_wait);
    return LLMK_OK;
}

int llmk_engine_submit(llmk_engine *e, const llmk_request *r, int64_t *id) {
    llmk_error_clear();
    if (!e || !r || !id) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_engine_submit: NULL argument");
    *id = 0;
    int st = check_request(e, r);
    if (st != LLMK_OK) return st;
    struct req *q = calloc(1, sizeof *q);
    int32_t max_gen = r->max_tokens < e->n_ctx - (int32_t)r->n_prompt ? r->max_tokens : e->n_ctx - (int32_t)r->n_prompt;
    if (q) q->tok = malloc(((size_t)r->n_prompt + (size_t)max_gen) * sizeof *q->tok);
    if (q && r->n_stop) q->stop = malloc(r->n_stop * sizeof *q->stop);
    if (q && r->spec) q->draft = malloc(SPEC_MAX * sizeof *q->draft);
    if (!q || !q->tok || (r->n_stop && !q->stop) || (r->spec && !q->draft)) {
        req_free(q);
        return llmk_fail(LLMK_OUT_OF_MEMORY, "engine: a request of %zu tokens", r->n_prompt);
    }
    memcpy(q->tok, r->prompt, r->n_prompt * sizeof *q->tok);
    if (r->n_stop) memcpy(q->stop, r->stop_ids, r->n_stop * sizeof *q->stop);
    q->n_prompt = q->n_tok = (int32_t)r->n_prompt;
    q->max_gen = max_gen, q->n_stop = (int32_t)r->n_stop;
    q->sampler = r->sampler, q->spec = r->spec, q->user = r->user, q->seq = -1;
    q->id = *id = e->next_id++;
    if (e->wait_tail) e->wait_tail->next = q;
    else e->wait_head = q;
    e->wait_tail = q;
    e->n_wait++;
    e->st.n_submitted++;
    return LLMK_OK;
}

/* ---- the running set ---------------------------------------------------------- */

static void wait_push_front(llmk_engine *e, struct req *r) {
    r->next = e->wait_head;
    e->wait_head = r;
    if (!e->wait_tail) e->wait_tail = r;
    e->n_wait++;
}

static struct req *wait_pop(llmk_engine *e) {
    struct req *r = e->wait_head;
    e->wait_head = r->next;
    if (!e->wait_head) e->wait_tail = NULL;
    r->next = NULL;
    e->n_wait--;
    return r;
}

/* Takes run[i] out of the running set, keeping the admission order, and
 * frees its sequence (its full blocks stay cached for a later prefix). */
static struct req *run_remove(llmk_engine *e, int32_t i) {
    struct req *r = e->run[i];
    memmove(&e->run[i], &e->run[i + 1], (size_t)(e->n_run - i - 1) * sizeof *e->run);
    e->n_run--;
    llmk_context_seq_truncate(e->c, r->seq, 0);
    r->seq = -1;
    return r;
}

static int32_t free_seq(const llmk_engine *e) {
    for (int32_t s = 0; s < e->n_seq; s++) {
        bool used = false;
        for (int32_t i = 0; i < e->n_run && !used; i++) used = e->run[i]->seq == s;
        if (!used) return s;
    }
    return -1;
}

static int32_t blocks_available(const llmk_engine *e) {
    llmk_kv_info kv;
    llmk_context_kv_info(e->c, &kv);
    return kv.n_free + kv.n_cached;
}

/* Blocks the running requests take at their next step at most: a decode
 * row, or the rest of a prompt. */
static int64_t blocks_reserved(const llmk_engine *e) {
    int64_t n = 0;
    for (int32_t i = 0; i < e->n_run; i++) {
        const struct req *r = e->run[i];
        n += llmk_context_blocks_needed(e->c, r->seq, r->n_tok - r->n_done);
    }
    return n;
}

/* Whether r should wait for a running request that is still computing full
 * blocks r's prompt starts with: admitted now, r would compute them again;
 * a step or two later it finds them in the prefix cache (the same bits).
 * So n choices of one prompt, or requests with one system prompt, submitted
 * together share their common blocks. */
static bool prefix_in_flight(const llmk_engine *e, const struct req *r) {
    int32_t usable = (r->n_tok - 1) / LLMK_KV_BLOCK * LLMK_KV_BLOCK; /* seq_start reuses whole blocks only */
    for (int32_t i = 0; i < e->n_run && usable > 0; i++) {
        const struct req *q = e->run[i];
        int32_t n = usable < q->n_tok ? usable : q->n_tok, common = 0;
        while (common < n && q->tok[common] == r->tok[common]) common++;
        common = common / LLMK_KV_BLOCK * LLMK_KV_BLOCK;
        if (common > 0 && q->n_done < common) return true;
    }
    return false;
}

/* Admits waiting requests, first come first served, while a slot is free
 * and the pool holds the new request's uncached tokens beside what the
 * running ones need next (seed 001's admission control, no margin). The
 * head that does not fit, or waits for blocks a running request is still
 * computing, stops admission: nothing overtakes it. */
static void admit(llmk_engine *e) {
    while (e->wait_head && e->n_run < e->n_seq) {
        struct req *r = e->wait_head;
        if (prefix_in_flight(e, r)) return;
        int32_t s = free_seq(e), cached = 0;
        if (llmk_context_seq_start(e->c, s, r->tok, (size_t)r->n_tok, &cached) != LLMK_OK) return;
        int64_t need = llmk_context_blocks_needed(e->c, s, r->n_tok - cached);
        int64_t room = blocks_available(e) - blocks_reserved(e);
        if (llmk_admission_control_accept((double)need * LLMK_KV_BLOCK, (double)room * LLMK_KV_BLOCK, 0.0) != 1.0) {
            llmk_context_seq_truncate(e->c, s, 0); /* the hit blocks go back to the cache */
            return;
        }
        wait_pop(e);
        r->seq = s, r->n_done = cached;
        e->run[e->n_run++] = r;
        e->st.cached_tokens += cached;
        if (!r->preempted) r->n_cached = cached < r->n_prompt ? cached : r->n_prompt;
        if (r->preempted) e->st.recomputed_tokens += r->n_tok - cached;
        else e->st.prompt_tokens += r->n_prompt;
        r->preempted = false;
    }
}

/* ---- one step -------------------------------------------------------------------- */

static void plan_item(llmk_engine *e, int32_t i, int32_t pos, bool logits) {
    struct req *r = e->run[i];
    e->items[e->n_items++] = (llmk_batch_item){.seq = r->seq, .id = r->tok[pos], .logits = logits};
    e->count[i]++;
    if (logits) e->row_req[e->n_rows++] = r;
}

/* Drafts for a decoding request: as many as its drafter wants, within its
 * token budget (the last row's token must still be one it may generate),
 * n_ctx and the step's remaining room. */
static int32_t draft_room(const llmk_engine *e, const struct req *r, int32_t room) {
    int32_t max = llmk_spec_draft_len(r->spec), left = r->max_gen - (r->n_tok - r->n_prompt) - 1;
    if (max > left) max = left;
    if (max > e->n_ctx - r->n_tok) max = e->n_ctx - r->n_tok;
    if (max > room) max = room;
    if (max > SPEC_MAX) max = SPEC_MAX;
    return max > 0 ? max : 0;
}

/* The drafts of every decoding request whose drafter is a draft model's
 * pool sequence, made in one batched generation before the plan is laid
 * out (one draft step for all of them, not one per request); each gets the
 * batch's time in proportion to its drafts. Room: what the step has after
 * every decode row, taken in request order. */
static void pooled_drafts(llmk_engine *e) {
    int32_t room = e->step_tokens, m = 0;
    for (int32_t i = 0; i < e->n_run; i++) room -= e->run[i]->n_tok - e->run[i]->n_done == 1;
    for (int32_t i = 0; i < e->n_run; i++) {
        struct req *r = e->run[i];
        r->drafted = false;
        if (r->n_tok - r->n_done != 1 || !r->spec || !llmk_spec_pooled(r->spec)) continue;
        int32_t max = draft_room(e, r, room);
        if (max <= 0) continue;
        room -= max;
        e->jobs[m++] = (struct llmk_spec_job){.sp = r->spec, .hist = r->tok, .n = (size_t)r->n_tok, .max = max,
                                              .draft = r->draft, .user = r};
    }
    if (!m) return;
    double t0 = now_s();
    llmk_spec_draft_pooled(e->jobs, m); /* on failure every n_draft is 0: a drafter that fails only costs its drafts */
    double t = now_s() - t0;
    llmk_error_clear();
    int64_t total = 0;
    for (int32_t j = 0; j < m; j++) total += e->jobs[j].n_draft;
    for (int32_t j = 0; j < m; j++) {
        struct req *r = e->jobs[j].user;
        r->drafted = true;
        r->n_draft = e->jobs[j].n_draft;
        r->draft_s = total ? t * (double)r->n_draft / (double)total : 0;
    }
}

static void plan_drafts(llmk_engine *e, struct req *r, int32_t room) {
    if (r->drafted) { /* made by pooled_drafts: only the room may have shrunk */
        if (r->n_draft > room) r->n_draft = room > 0 ? room : 0;
        return;
    }
    r->n_draft = 0;
    int32_t max = draft_room(e, r, room);
    int32_t n = 0;
    double t0 = now_s();
    if (max > 0 && llmk_spec_draft(r->spec, r->tok, (size_t)r->n_tok, max, r->draft, &n) == LLMK_OK) r->n_draft = n;
    r->draft_s = now_s() - t0;
    llmk_error_clear(); /* a drafter that fails only costs its drafts */
}

/* Decode rows first (one token each, with its drafts when speculating),
 * then prompt chunks in admission order until step_tokens; a chunk wants
 * logits only where its prompt ends. with_drafts false: a plan that must
 * shrink to fit the KV pool drops every draft before anyone is preempted. */
static void plan(llmk_engine *e, bool with_drafts) {
    e->n_items = e->n_rows = e->step_drafts = 0;
    memset(e->count, 0, (size_t)e->n_seq * sizeof *e->count);
    int32_t n_decode = 0;
    for (int32_t i = 0; i < e->n_run; i++) n_decode += e->run[i]->n_tok - e->run[i]->n_done == 1;
    for (int32_t i = 0; i < e->n_run; i++) {
        struct req *r = e->run[i];
        r->n_draft = 0, r->draft_s = 0, r->verified = 0, r->rejected = false, r->drafted = false;
    }
    if (with_drafts) pooled_drafts(e);
    for (int32_t i = 0; i < e->n_run; i++) {
        struct req *r = e->run[i];
        if (r->n_tok - r->n_done != 1) continue;
        plan_item(e, i, r->n_done, true);
        if (!r->spec || !with_drafts) continue;
        plan_drafts(e, r, e->step_tokens - e->n_items - (n_decode - 1));
        for (int32_t k = 0; k < r->n_draft; k++) {
            e->items[e->n_items++] = (llmk_batch_item){.seq = r->seq, .id = r->draft[k], .logits = true};
            e->count[i]++;
            e->row_req[e->n_rows++] = r;
        }
        e->step_drafts += r->n_draft;
        n_decode--;
    }
    e->decode_only = true;
    for (int32_t i = 0; i < e->n_run && e->n_items < e->step_tokens; i++) {
        struct req *r = e->run[i];
        int32_t pending = r->n_tok - r->n_done, room = e->step_tokens - e->n_items;
        if (pending < 2) continue;
        int32_t n = pending < room ? pending : room;
        for (int32_t k = 0; k < n; k++) plan_item(e, i, r->n_done + k, r->n_done + k + 1 == r->n_tok);
        e->st.prefill_chunks++;
        e->decode_only = false;
    }
}

static int64_t plan_blocks(const llmk_engine *e) {
    int64_t n = 0;
    for (int32_t i = 0; i < e->n_run; i++)
        if (e->count[i]) n += llmk_context_blocks_needed(e->c, e->run[i]->seq, e->count[i]);
    return n;
}

/* The running request seed 001's preemption score picks: the most KV per
 * token generated, the latest admitted on a tie. It is recomputed later from
 * its prompt and generated tokens (its full blocks may still be cached). */
static void preempt_one(llmk_engine *e) {
    int32_t victim = 0;
    double best = -1;
    for (int32_t i = 0; i < e->n_run; i++) {
        const struct req *r = e->run[i];
        double s = llmk_preemption_score(1.0, r->n_tok - r->n_prompt, r->n_done);
        if (s >= best) best = s, victim = i;
    }
    struct req *r = run_remove(e, victim);
    r->n_done = 0, r->preempted = true;
    wait_push_front(e, r);
    e->st.n_preempted++;
}

/* Freeing sequences clears the thread's error, so every error event of a
 * step carries its own copy of the detail. */
static void keep_error(llmk_engine *e) { snprintf(e->err, sizeof e->err, "%s", llmk_last_error()); }

static int emit(llmk_engine *e, struct req *r, llmk_engine_callback cb, void *user, llmk_token_event *ev) {
    ev->request = r->id, ev->user = r->user, ev->cached_tokens = r->n_cached;
    ev->message = ev->finish == LLMK_FINISH_ERROR ? e->err : "";
    return cb ? cb(user, ev) : 0;
}

static void finish(llmk_engine *e, struct req *r) {
    for (int32_t i = 0; i < e->n_run; i++)
        if (e->run[i] == r) {
            req_free(run_remove(e, i));
            break;
        }
    e->st.n_finished++;
}

/* Every request in the failed plan ends with an error event. */
static void fail_plan(llmk_engine *e, int status, llmk_engine_callback cb, void *user) {
    keep_error(e);
    for (int32_t i = e->n_run - 1; i >= 0; i--) {
        if (!e->count[i]) continue;
        struct req *r = e->run[i];
        llmk_token_event ev = {.token = -1, .index = r->n_tok - r->n_prompt, .finish = LLMK_FINISH_ERROR,
                               .status = status};
        emit(e, r, cb, user, &ev);
        req_free(run_remove(e, i));
        e->st.n_finished++;
    }
}

static int argmax_row(const float *l, size_t n, int32_t *id) {
    size_t best = 0;
    for (size_t i = 0; i < n; i++) {
        if (l[i] != l[i]) return llmk_fail(LLMK_NAN_INPUT, "engine: logit of token %zu is NaN", i);
        if (l[i] > l[best]) best = i;
    }
    *id = (int32_t)best;
    return LLMK_OK;
}

static enum llmk_finish finish_reason(const struct req *r, int32_t tok) {
    for (int32_t k = 0; k < r->n_stop; k++)
        if (r->stop[k] == tok) return LLMK_FINISH_STOP;
    /* a grammar that is complete with nothing able to follow ends it like a stop id */
    if (r->sampler && llmk_grammar_state_done(llmk_sampler_grammar(r->sampler))) return LLMK_FINISH_STOP;
    return r->n_tok - r->n_prompt >= r->max_gen ? LLMK_FINISH_LENGTH : LLMK_FINISH_NONE;
}

/* A speculating request's verify ended at this step's row r->verified - 1:
 * the positions after it (rows of rejected drafts) leave its sequence. */
static void spec_settle(llmk_engine *e, struct req *r) {
    int32_t dead = r->n_draft + 1 - r->verified;
    if (dead > 0) {
        r->n_done -= dead;
        llmk_context_seq_truncate(e->c, r->seq, r->n_done); /* a cut of the sequence's own tail: cannot fail */
    }
    int32_t kept = r->verified - 1 < r->n_draft ? r->verified - 1 : r->n_draft;
    llmk_spec_feedback_step(r->spec, r->n_draft, kept, r->draft_s, e->decode_only ? e->step_s : 0, e->step_drafts);
    e->st.drafted_tokens += r->n_draft;
    e->st.accepted_drafts += kept;
    r->rejected = true;
}

/* Finishes r (freed) at this row: its later rows of the step forget it. */
static void finish_rows(llmk_engine *e, struct req *r, int32_t row, int32_t later) {
    for (int32_t k = 1; k <= later; k++) e->row_req[row + k] = NULL;
    finish(e, r);
}

/* Chooses row i's token for its request, appends it and reports it. A
 * speculating request's rows come in order (its pending token, then its
 * drafts); after a row whose token differs from the next draft the rest are
 * dead and skipped: the tokens are those of one row per step. */
static void deliver(llmk_engine *e, int32_t row, llmk_engine_callback cb, void *user) {
    struct req *r = e->row_req[row];
    if (!r || r->ended || r->rejected) return;
    int32_t later = r->spec ? r->n_draft - r->verified : 0; /* r's rows after this one */
    const float *l = e->logits + (size_t)row * e->V;
    int32_t tok = -1;
    int st = r->sampler ? llmk_sampler_sample(r->sampler, l, e->V, &tok) : argmax_row(l, e->V, &tok);
    if (st == LLMK_OK && r->sampler) st = llmk_sampler_accept(r->sampler, tok);
    llmk_token_event ev = {.token = tok, .index = r->n_tok - r->n_prompt, .status = st, .logits = l};
    if (st != LLMK_OK) {
        keep_error(e);
        ev.token = -1, ev.finish = LLMK_FINISH_ERROR, ev.logits = NULL;
        emit(e, r, cb, user, &ev);
        finish_rows(e, r, row, later);
        return;
    }
    r->tok[r->n_tok++] = tok;
    e->st.generated_tokens++;
    ev.finish = finish_reason(r, tok);
    bool stop = emit(e, r, cb, user, &ev) != 0;
    if (ev.finish != LLMK_FINISH_NONE) {
        finish_rows(e, r, row, later);
        return;
    }
    if (stop) r->ended = true;
    if (!r->spec) return;
    int32_t j = r->verified++; /* this row's index among the request's rows */
    if (stop || j == r->n_draft || tok != r->draft[j]) spec_settle(e, r);
}

/* Removes the requests cancelled during the step's callbacks. */
static void sweep_ended(llmk_engine *e) {
    for (int32_t i = e->n_run - 1; i >= 0; i--)
        if (e->run[i]->ended) {
            req_free(run_remove(e, i));
            e->st.n_cancelled++;
        }
}

/* Nothing runs and the queue's head still was not admitted: it can never
 * be (submit's checks make this unreachable); it ends with an error rather
 * than stalling the engine. */
static void fail_head(llmk_engine *e, llmk_engine_callback cb, void *user) {
    struct req *r = wait_pop(e);
    snprintf(e->err, sizeof e->err, "engine: request %lld can never be admitted (its blocks exceed the pool)",
             (long long)r->id);
    llmk_token_event ev = {.token = -1, .index = r->n_tok - r->n_prompt, .finish = LLMK_FINISH_ERROR,
                           .status = LLMK_CACHE_CAPACITY_EXCEEDED};
    emit(e, r, cb, user, &ev);
    req_free(r);
    e->st.n_finished++;
}

/* Room for a plan's logits rows beyond one per sequence (drafts). */
static bool grow_logits(llmk_engine *e) {
    int32_t cap = e->rows_cap * 2 > e->n_rows ? e->rows_cap * 2 : e->n_rows;
    if (cap > e->step_tokens) cap = e->step_tokens;
    float *l = realloc(e->logits, (size_t)cap * e->V * sizeof *l);
    if (!l) return false;
    e->logits = l, e->rows_cap = cap;
    return true;
}

int llmk_engine_step(llmk_engine *e, llmk_engine_callback cb, void *user) {
    llmk_error_clear();
    if (!e) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_engine_step: NULL engine");
    double t0 = now_s();
    admit(e);
    if (e->n_run == 0) {
        if (e->wait_head) fail_head(e, cb, user);
        return LLMK_OK;
    }
    int st;
    for (;;) {
        plan(e, true);
        if (plan_blocks(e) > blocks_available(e)) plan(e, false);
        /* Preempt until the plan fits; one request alone always fits (submit checked). */
        while (e->n_run > 1 && plan_blocks(e) > blocks_available(e)) {
            preempt_one(e);
            plan(e, false);
        }
        if (e->n_rows > e->rows_cap && !grow_logits(e)) plan(e, false); /* no memory for drafts' rows */
        double t1 = now_s();
        st = llmk_context_eval(e->c, e->items, (size_t)e->n_items, e->logits, (size_t)e->rows_cap * e->V);
        e->step_s = now_s() - t1;
        if (st != LLMK_CACHE_CAPACITY_EXCEEDED || e->n_run < 2) break;
        preempt_one(e); /* the estimate missed (it should not): make room and plan again */
    }
    e->st.n_steps++;
    e->in_step = true;
    if (st != LLMK_OK) {
        fail_plan(e, st, cb, user);
    } else {
        for (int32_t i = 0; i < e->n_run; i++) e->run[i]->n_done += e->count[i];
        for (int32_t row = 0; row < e->n_rows; row++) deliver(e, row, cb, user);
    }
    e->in_step = false;
    sweep_ended(e);
    e->st.busy_s += now_s() - t0;
    llmk_error_clear();
    return LLMK_OK;
}

bool llmk_engine_idle(const llmk_engine *e) { return !e || (e->n_run == 0 && e->n_wait == 0); }

int llmk_engine_run(llmk_engine *e, llmk_engine_callback cb, void *user) {
    llmk_error_clear();
    if (!e) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_engine_run: NULL engine");
    while (!llmk_engine_idle(e)) {
        int st = llmk_engine_step(e, cb, user);
        if (st != LLMK_OK) return st;
    }
    return LLMK_OK;
}

int llmk_engine_cancel(llmk_engine *e, int64_t id) {
    llmk_error_clear();
    if (!e) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_engine_cancel: NULL engine");
    for (int32_t i = 0; i < e->n_run; i++)
        if (e->run[i]->id == id && !e->run[i]->ended) {
            if (e->in_step) { /* a callback's: rows of this step may still point at it */
                e->run[i]->ended = true;
                return LLMK_OK;
            }
            req_free(run_remove(e, i));
            e->st.n_cancelled++;
            return LLMK_OK;
        }
    for (struct req **p = &e->wait_head, *prev = NULL; *p; prev = *p, p = &(*p)->next)
        if ((*p)->id == id) {
            struct req *r = *p;
            *p = r->next;
            if (e->wait_tail == r) e->wait_tail = prev;
            e->n_wait--;
            req_free(r);
            e->st.n_cancelled++;
            return LLMK_OK;
        }
    return llmk_fail(LLMK_NOT_FOUND, "llmk_engine_cancel: no request %lld in the engine", (long long)id);
}

const llmk_context *llmk_engine_context(const llmk_engine *e) { return e ? e->c : NULL; }

int llmk_engine_stats_get(const llmk_engine *e, llmk_engine_stats *out) {
    llmk_error_clear();
    if (!e || !out) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_engine_stats_get: NULL argument");
    *out = e->st;
    out->n_running = e->n_run, out->n_waiting = e->n_wait;
    return LLMK_OK;
}
