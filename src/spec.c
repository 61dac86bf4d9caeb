/* Speculative decoding: drafters (prompt lookup, a draft model), the
 * adaptive draft length and the session's verify step. Nothing here changes
 * what is computed: the verify step evaluates the drafts with the pending
 * token in one call (the executor gives every row the bits of plain
 * decoding) and hands the rows, in order, to the caller's chooser, which is
 * plain decoding's. Drafts only decide how many rows one call evaluates.
 * docs/speculative.md. */
#include "internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SPEC_DRAFT_CAP 64

/* The acceptance estimate is a decayed count of kept / tried draft tokens
 * plus a prior of PRIOR_WEIGHT tries at PRIOR_RATE: without drafts the
 * counts decay toward the prior, so a length of 0 is retried later. */
#define PRIOR_RATE 0.5
#define PRIOR_WEIGHT 2.0
#define DECAY 0.9
/* Until steps are timed: an extra verified row costs this share of a
 * one-row step (a decode step reads every weight once; rows are compute). */
#define PRIOR_ROW_COST 0.25

/* The costs are shares of a plain step's time, so the first step is plain
 * and every REFRESH_EVERY-th after it too (the machine and the context
 * length change it). A draft model's cost is only known once it has
 * drafted: until then, and every PROBE_EVERY plain steps after, a step
 * drafts PROBE_LEN tokens so the estimates can change their mind. (Prompt
 * lookup costs nothing to draft: its acceptance estimate decays back to
 * the prior instead.) */
#define PROBE_EVERY 32 /* at first; doubled after each probe that finds drafting not worth it, and after */
#define PROBE_MAX 128  /* the one at this interval no more probes: each costs the draft model catching up on
                        * every token since the last */
#define PROBE_LEN 4
#define REFRESH_EVERY 64
/* Prompt lookup's estimate decays back to the prior, which never pays where
 * a verified row costs more than about half a plain step (Zen 1: 0.6-0.75):
 * drafting, once off, stayed off for the rest of a copy. So it probes too,
 * PROBE_LEN tokens every probe_every plain steps (doubled while probes fail,
 * up to PROBE_MAX, where it stays), but only where the context repeats its
 * last NGRAM_PROBE_MATCH tokens: what copying looks like, and rare in free
 * text, where each failed probe costs its verified rows. */
#define NGRAM_PROBE_MATCH 4

/* A draft context shared by the drafters of an engine: slot i is sequence i. */
struct llmk_draft_pool {
    const llmk_model *draft;
    llmk_context *c;
    pthread_mutex_t mu;
    bool *taken; /* [n_slots] */
    int32_t n_slots;
};

struct llmk_spec {
    llmk_spec_params p;
    size_t n_vocab;
    /* draft model: its context (its own, one sequence; or sequence dseq of
     * p.draft_pool's once taken, -1 before) and the tokens its KV holds */
    llmk_context *dc;
    int32_t dseq;
    int32_t *dtok;
    size_t n_dtok, dcap;
    float *dlogits;
    /* adaptive length */
    double acc_kept, acc_tried;  /* decayed counts */
    double t_plain, t_row, t_draft; /* seconds: a one-row step, each extra row, one drafted token */
    bool have_plain, have_row, have_draft;
    int32_t plain_run; /* steps since the last one that verified drafts */
    int32_t probe_every; /* plain steps between probes, doubled while probes find drafting not worth it */
    int32_t draft_run; /* steps since the last plain one */
    llmk_spec_stats st;
    /* the verify step's buffers */
    int32_t *ids;
    float *logits;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int llmk_spec_mode_from_name(const char *name, int32_t *mode_out) {
    llmk_error_clear();
    if (!name || !mode_out) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_spec_mode_from_name: NULL argument");
    static const struct {
        const char *name;
        int32_t mode;
    } names[] = {{"none", LLMK_SPEC_NONE}, {"ngram", LLMK_SPEC_NGRAM}, {"lookup", LLMK_SPEC_NGRAM},
                 {"draft", LLMK_SPEC_DRAFT}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i].name)) return *mode_out = names[i].mode, LLMK_OK;
    return llmk_fail(LLMK_INVALID_ARGUMENT, "speculative mode '%s': expected none, ngram or draft", name);
}

static void pool_give_back(llmk_spec *sp) {
    llmk_draft_pool *dp = sp->p.draft_pool;
    if (!dp || sp->dseq < 0) return;
    pthread_mutex_lock(&dp->mu);
    dp->taken[sp->dseq] = false; /* its KV stays until the next taker truncates it (in the drafting thread) */
    pthread_mutex_unlock(&dp->mu);
    sp->dseq = -1;
}

/* A free sequence of the pool, once: false when none is free (no drafts). */
static bool pool_take(llmk_spec *sp) {
    llmk_draft_pool *dp = sp->p.draft_pool;
    if (!dp || sp->dseq >= 0) return true;
    pthread_mutex_lock(&dp->mu);
    for (int32_t i = 0; i < dp->n_slots && sp->dseq < 0; i++)
        if (!dp->taken[i]) dp->taken[i] = true, sp->dseq = i;
    pthread_mutex_unlock(&dp->mu);
    sp->n_dtok = 0; /* whatever the sequence holds is the last taker's: sync_jobs truncates it */
    return sp->dseq >= 0;
}

void llmk_spec_free(llmk_spec *sp) {
    if (!sp) return;
    pool_give_back(sp);
    if (!sp->p.draft_pool) llmk_context_free(sp->dc);
    free(sp->dtok), free(sp->dlogits), free(sp->ids), free(sp->logits);
    free(sp);
}

static int check_params(llmk_spec_params *p) {
    if (p->mode < LLMK_SPEC_NONE || p->mode > LLMK_SPEC_DRAFT)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "speculative decoding: mode %d is not one of none, ngram, draft",
                         p->mode);
    if (p->draft_max <= 0) p->draft_max = 16;
    if (p->draft_min <= 0) p->draft_min = 1;
    if (p->ngram_min <= 0) p->ngram_min = 2;
    if (p->ngram_max <= 0) p->ngram_max = p->ngram_min > 16 ? p->ngram_min : 16;
    if (p->draft_max > SPEC_DRAFT_CAP)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "speculative decoding: --draft-max %d exceeds %d", p->draft_max,
                         SPEC_DRAFT_CAP);
    if (p->draft_min > p->draft_max)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "speculative decoding: --draft-min %d exceeds --draft-max %d",
                         p->draft_min, p->draft_max);
    if (p->ngram_min > p->ngram_max || p->ngram_max > 64)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "speculative decoding: n-gram lengths %d..%d (want 1 <= min <= max "
                         "<= 64)", p->ngram_min, p->ngram_max);
    if (p->mode == LLMK_SPEC_DRAFT && !p->draft_model && !p->draft_pool)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "speculative decoding: mode draft needs a draft model");
    return LLMK_OK;
}

/* The draft model must map ids to the same tokens: same vocabulary size and
 * the same special ids (what llama.cpp checks as well); the pieces of the
 * first and last ids as a spot check. */
static int check_vocab(const llmk_model *target, const llmk_model *draft) {
    const llmk_tokenizer *a, *b;
    int32_t na = llmk_model_hparams(target)->n_vocab, nb = llmk_model_hparams(draft)->n_vocab;
    if (na != nb)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "draft model: vocabulary of %d tokens, the target has %d", nb, na);
    if (llmk_model_tokenizer(target, &a) != LLMK_OK || llmk_model_tokenizer(draft, &b) != LLMK_OK)
        return LLMK_OK; /* no tokenizer on either: the sizes are all there is to compare */
    if (llmk_tokenizer_bos(a) != llmk_tokenizer_bos(b) || llmk_tokenizer_eos(a) != llmk_tokenizer_eos(b) ||
        llmk_tokenizer_eot(a) != llmk_tokenizer_eot(b))
        return llmk_fail(LLMK_INVALID_ARGUMENT, "draft model: special tokens (bos %d, eos %d) differ from the "
                         "target's (bos %d, eos %d)", llmk_tokenizer_bos(b), llmk_tokenizer_eos(b),
                         llmk_tokenizer_bos(a), llmk_tokenizer_eos(a));
    int32_t probe[3] = {0, na / 2, na - 1};
    for (int i = 0; i < 3; i++) {
        size_t la = 0, lb = 0;
        const char *pa = llmk_tokenizer_piece(a, probe[i], &la), *pb = llmk_tokenizer_piece(b, probe[i], &lb);
        if (!pa || !pb || la != lb || memcmp(pa, pb, la))
            return llmk_fail(LLMK_INVALID_ARGUMENT, "draft model: token %d differs from the target's", probe[i]);
    }
    return LLMK_OK;
}

/* The draft model's context: n_seq sequences of n_ctx (<= 0: 4096) tokens,
 * at most its training context. */
static int draft_context(const llmk_model *draft, int32_t n_seq, int32_t n_ctx, int32_t n_threads,
                         llmk_context **out) {
    llmk_context_params cp = {.n_seq_max = n_seq, .n_ctx = n_ctx > 0 ? n_ctx : 4096, .n_threads = n_threads,
                              .kv_type = LLMK_TYPE_F16};
    const llmk_hparams *hp = llmk_model_hparams(draft);
    if (cp.n_ctx > hp->n_ctx_train) cp.n_ctx = hp->n_ctx_train;
    return llmk_context_init(draft, &cp, out);
}

int llmk_draft_pool_init(const llmk_model *target, const llmk_model *draft, int32_t n_slots, int32_t n_ctx,
                         int32_t n_threads, llmk_draft_pool **out) {
    llmk_error_clear();
    if (!target || !draft || !out) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_draft_pool_init: NULL argument");
    *out = NULL;
    if (n_slots < 1) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_draft_pool_init: %d slots", n_slots);
    int st = check_vocab(target, draft);
    if (st != LLMK_OK) return st;
    llmk_draft_pool *dp = calloc(1, sizeof *dp);
    if (!dp || !(dp->taken = calloc((size_t)n_slots, sizeof *dp->taken))) {
        free(dp);
        return llmk_fail(LLMK_OUT_OF_MEMORY, "llmk_draft_pool_init: %d slots", n_slots);
    }
    dp->draft = draft, dp->n_slots = n_slots;
    pthread_mutex_init(&dp->mu, NULL);
    if ((st = draft_context(draft, n_slots, n_ctx, n_threads, &dp->c)) != LLMK_OK) {
        llmk_draft_pool_free(dp);
        return st;
    }
    *out = dp;
    return LLMK_OK;
}

void llmk_draft_pool_free(llmk_draft_pool *dp) {
    if (!dp) return;
    llmk_context_free(dp->c);
    pthread_mutex_destroy(&dp->mu);
    free(dp->taken);
    free(dp);
}

static int draft_init(llmk_spec *sp) {
    const llmk_spec_params *p = &sp->p;
    int st;
    if (p->draft_pool) {
        sp->dc = p->draft_pool->c;
    } else {
        if ((st = draft_context(p->draft_model, 1, p->draft_n_ctx, p->draft_threads, &sp->dc)) != LLMK_OK)
            return st;
        sp->dseq = 0;
    }
    sp->dcap = (size_t)llmk_context_n_ctx(sp->dc);
    sp->dtok = malloc(sp->dcap * sizeof *sp->dtok);
    sp->dlogits = malloc(sp->n_vocab * sizeof *sp->dlogits);
    if (!sp->dtok || !sp->dlogits) return llmk_fail(LLMK_OUT_OF_MEMORY, "draft model: token buffers");
    return LLMK_OK;
}

int llmk_spec_init(const llmk_model *target, const llmk_spec_params *p, llmk_spec **out) {
    llmk_error_clear();
    if (!target || !p || !out) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_spec_init: NULL argument");
    *out = NULL;
    llmk_spec *sp = calloc(1, sizeof *sp);
    if (!sp) return llmk_fail(LLMK_OUT_OF_MEMORY, "llmk_spec_init: struct");
    sp->p = *p;
    sp->dseq = -1;
    sp->n_vocab = (size_t)llmk_model_hparams(target)->n_vocab;
    int st = check_params(&sp->p);
    if (st == LLMK_OK && sp->p.mode == LLMK_SPEC_DRAFT &&
        (st = check_vocab(target, p->draft_pool ? p->draft_pool->draft : p->draft_model)) == LLMK_OK)
        st = draft_init(sp);
    if (st == LLMK_OK) {
        sp->ids = malloc((SPEC_DRAFT_CAP + 1) * sizeof *sp->ids);
        sp->logits = malloc((SPEC_DRAFT_CAP + 1) * sp->n_vocab * sizeof *sp->logits);
        if (!sp->ids || !sp->logits) st = llmk_fail(LLMK_OUT_OF_MEMORY, "speculative decoding: verify buffers");
    }
    if (st != LLMK_OK) {
        llmk_spec_free(sp);
        return st;
    }
    sp->probe_every = PROBE_EVERY;
    sp->st.draft_len = llmk_spec_draft_len(sp);
    *out = sp;
    return LLMK_OK;
}

/* ---- drafters ---------------------------------------------------------- */

static bool ngram_probing(const llmk_spec *sp);

/* Prompt lookup: the earlier position whose preceding tokens match the
 * longest suffix of hist (at least ngram_min tokens, compared up to
 * ngram_max; ties: the latest), and the tokens that followed it there are
 * the draft. A longer match tells the text being copied from the many
 * places a short n-gram recurs (code repeats "item." everywhere), and the
 * latest occurrence is the likeliest to be copied next. */
static int32_t draft_ngram(const llmk_spec *sp, const int32_t *hist, size_t n, int32_t max, size_t min_len,
                           int32_t *draft) {
    size_t cap = (size_t)sp->p.ngram_max, best_len = 0, best_end = 0;
    const int32_t last = hist[n - 1];
    /* a match ending at e (exclusive, e < n) continues with hist[e..n) */
    for (size_t e = n - 1; e >= 1 && best_len < cap; e--) {
        if (hist[e - 1] != last) continue;
        size_t len = 1;
        while (len < cap && len < e && hist[e - 1 - len] == hist[n - 1 - len]) len++;
        if (len > best_len) best_len = len, best_end = e;
    }
    if (best_len < min_len) return 0;
    int32_t k = 0;
    while (k < max && best_end + (size_t)k < n) draft[k] = hist[best_end + (size_t)k], k++;
    return k;
}

/* Brings each job's draft sequence to its hist (whole, or but the last
 * token): the longest common prefix with what the sequence holds is kept,
 * the rest of every job evaluated in one call. */
static int sync_jobs(llmk_context *c, struct llmk_spec_job *jb, int m, bool whole) {
    size_t total = 0;
    for (int j = 0; j < m; j++) {
        llmk_spec *sp = jb[j].sp;
        size_t want = jb[j].n - !whole, lcp = 0;
        while (lcp < sp->n_dtok && lcp < want && sp->dtok[lcp] == jb[j].hist[lcp]) lcp++;
        int st = llmk_context_seq_truncate(c, sp->dseq, (int32_t)lcp);
        if (st != LLMK_OK) return st;
        sp->n_dtok = lcp;
        total += want - lcp;
    }
    if (!total) return LLMK_OK;
    llmk_batch_item *it = malloc(total * sizeof *it);
    if (!it) return llmk_fail(LLMK_OUT_OF_MEMORY, "draft model: %zu items", total);
    size_t k = 0;
    for (int j = 0; j < m; j++)
        for (size_t q = jb[j].sp->n_dtok; q < jb[j].n - !whole; q++)
            it[k++] = (llmk_batch_item){.seq = jb[j].sp->dseq, .id = jb[j].hist[q]};
    int st = llmk_context_eval(c, it, total, NULL, 0);
    free(it);
    for (int j = 0; j < m; j++) {
        llmk_spec *sp = jb[j].sp;
        size_t want = jb[j].n - !whole;
        if (st == LLMK_OK) memcpy(sp->dtok + sp->n_dtok, jb[j].hist + sp->n_dtok, (want - sp->n_dtok) * sizeof *sp->dtok);
        sp->n_dtok = st == LLMK_OK ? want : 0; /* after a failure: start over next time */
    }
    return st;
}

static int on_job_token(void *user, size_t entry, int32_t token) {
    struct llmk_spec_job *j = (struct llmk_spec_job *)user + entry;
    j->draft[j->n_draft++] = token;
    return 0;
}

/* Each job's drafts, greedy, in one executor call for all of them (fed the
 * last token of its hist; its sequence holds the rest, sync_jobs). */
static int generate_jobs(llmk_context *c, struct llmk_spec_job *jb, int m) {
    if (m <= 0) return LLMK_OK;
    llmk_gen_seq *gs = calloc((size_t)m, sizeof *gs);
    if (!gs) return llmk_fail(LLMK_OUT_OF_MEMORY, "draft model: %d sequences", m);
    for (int j = 0; j < m; j++)
        gs[j] = (llmk_gen_seq){.seq = jb[j].sp->dseq, .id = jb[j].hist[jb[j].n - 1], .max_tokens = jb[j].max};
    int st = llmk_context_generate(c, gs, (size_t)m, on_job_token, jb);
    free(gs);
    for (int j = 0; j < m; j++) {
        llmk_spec *sp = jb[j].sp;
        if (st != LLMK_OK) { /* start over next time rather than track a half-done generation */
            jb[j].n_draft = 0, sp->n_dtok = 0;
            continue;
        }
        /* the sequence now holds hist and every draft but the last (chosen, not fed) */
        sp->dtok[jb[j].n - 1] = jb[j].hist[jb[j].n - 1];
        for (int32_t q = 0; q + 1 < jb[j].n_draft; q++) sp->dtok[jb[j].n + (size_t)q] = jb[j].draft[q];
        sp->n_dtok = (size_t)llmk_context_seq_pos(c, sp->dseq);
    }
    return st;
}

int llmk_spec_prefill(llmk_spec *sp, const int32_t *ids, size_t n) {
    llmk_error_clear();
    if (!sp || (!ids && n)) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_spec_prefill: NULL argument");
    if (sp->p.mode != LLMK_SPEC_DRAFT || n > sp->dcap) return LLMK_OK; /* nothing to prepare, or no room */
    if (!pool_take(sp)) return LLMK_OK;
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (size_t)ids[i] >= sp->n_vocab)
            return llmk_fail(LLMK_INVALID_TOKEN, "llmk_spec_prefill: token %d (index %zu) outside the vocabulary",
                             ids[i], i);
    struct llmk_spec_job jb = {.sp = sp, .hist = ids, .n = n};
    return sync_jobs(sp->dc, &jb, 1, true);
}

/* The draft model, greedy: its KV is brought to hist but the last token,
 * then it generates max tokens in one executor call (fed that token). */
static int draft_model(llmk_spec *sp, const int32_t *hist, size_t n, int32_t max, int32_t *draft, int32_t *n_draft) {
    *n_draft = 0;
    if (n + (size_t)max > sp->dcap) max = n < sp->dcap ? (int32_t)(sp->dcap - n) : 0;
    if (max <= 0 || !pool_take(sp)) return LLMK_OK;
    struct llmk_spec_job jb = {.sp = sp, .hist = hist, .n = n, .max = max, .draft = draft};
    int st = sync_jobs(sp->dc, &jb, 1, false);
    if (st == LLMK_OK) st = generate_jobs(sp->dc, &jb, 1);
    *n_draft = jb.n_draft;
    return st;
}

/* ---- drafting for many sequences of one pool at once (the engine) -------- */

bool llmk_spec_pooled(const llmk_spec *sp) { return sp && sp->p.mode == LLMK_SPEC_DRAFT && sp->p.draft_pool; }

int llmk_spec_draft_pooled(struct llmk_spec_job *jobs, int count) {
    llmk_draft_pool *dp = NULL;
    int m = 0; /* the jobs that draft, moved to the front */
    for (int i = 0; i < count; i++) {
        struct llmk_spec_job *j = &jobs[i];
        llmk_spec *sp = j->sp;
        j->n_draft = 0;
        if (j->max > sp->p.draft_max) j->max = sp->p.draft_max;
        if (j->n + (size_t)j->max > sp->dcap) j->max = j->n < sp->dcap ? (int32_t)(sp->dcap - j->n) : 0;
        if (!llmk_spec_pooled(sp) || (dp && dp != sp->p.draft_pool) || j->max <= 0 || j->n == 0 || !pool_take(sp))
            continue; /* (a second pool's drafters draft nothing in this call) */
        dp = sp->p.draft_pool;
        struct llmk_spec_job t = jobs[m];
        jobs[m++] = *j, *j = t;
    }
    if (!m) return LLMK_OK;
    int st = sync_jobs(dp->c, jobs, m, false);
    if (st == LLMK_OK) st = generate_jobs(dp->c, jobs, m);
    return st;
}

int llmk_spec_draft(llmk_spec *sp, const int32_t *hist, size_t n, int32_t max, int32_t *draft, int32_t *n_draft) {
    llmk_error_clear();
    if (!sp || !hist || !draft || !n_draft || n == 0)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_spec_draft: NULL argument or empty history");
    *n_draft = 0;
    if (max > sp->p.draft_max) max = sp->p.draft_max;
    if (max <= 0 || sp->p.mode == LLMK_SPEC_NONE) return LLMK_OK;
    for (size_t i = 0; i < n; i++)
        if (hist[i] < 0 || (size_t)hist[i] >= sp->n_vocab)
            return llmk_fail(LLMK_INVALID_TOKEN, "llmk_spec_draft: token %d (index %zu) outside the vocabulary",
                             hist[i], i);
    if (sp->p.mode == LLMK_SPEC_NGRAM) {
        size_t min_len = (size_t)sp->p.ngram_min;
        if (ngram_probing(sp) && min_len < NGRAM_PROBE_MATCH) min_len = NGRAM_PROBE_MATCH;
        *n_draft = draft_ngram(sp, hist, n, max, min_len, draft);
        return LLMK_OK;
    }
    return draft_model(sp, hist, n, max, draft, n_draft);
}

/* ---- adaptive draft length ---------------------------------------------- */

static double accept_rate(const llmk_spec *sp) {
    return (sp->acc_kept + PRIOR_RATE * PRIOR_WEIGHT) / (sp->acc_tried + PRIOR_WEIGHT);
}

double llmk_spec_predicted_speedup(double accept, int32_t g, double draft_cost, double row_cost) {
    if (g <= 0) return 1.0;
    double tv = 1.0 + g * row_cost; /* the verify of g + 1 rows, in plain steps */
    double e = llmk_speculative_expected_tokens(accept, (double)g);
    return llmk_draft_model_speedup(e, tv, draft_cost, (double)g) / tv;
}

int32_t llmk_spec_best_len(double accept, double draft_cost, double row_cost, int32_t g_min, int32_t g_max) {
    double best = 1.0;
    int32_t len = 0;
    for (int32_t g = g_min < 1 ? 1 : g_min; g <= g_max; g++) {
        double s = llmk_spec_predicted_speedup(accept, g, draft_cost, row_cost);
        if (s > best) best = s, len = g;
    }
    return len;
}

/* The costs, as shares of a plain step: measured, or priors until measured. */
static double row_cost(const llmk_spec *sp) {
    return sp->have_row && sp->have_plain ? sp->t_row / sp->t_plain : PRIOR_ROW_COST;
}
static double draft_cost(const llmk_spec *sp) {
    if (sp->p.mode != LLMK_SPEC_DRAFT) return 0.0;
    return sp->have_draft && sp->have_plain ? sp->t_draft / sp->t_plain : 0.5;
}

static int32_t probe_len(const llmk_spec *sp) {
    int32_t g = PROBE_LEN < sp->p.draft_min ? sp->p.draft_min : PROBE_LEN;
    return g < sp->p.draft_max ? g : sp->p.draft_max;
}

static int32_t estimated_len(const llmk_spec *sp) {
    return llmk_spec_best_len(accept_rate(sp), draft_cost(sp), row_cost(sp), sp->p.draft_min, sp->p.draft_max);
}

/* Prompt lookup probes (NGRAM_PROBE_MATCH): its estimate says no, and
 * probe_every plain steps have passed. */
static bool ngram_probing(const llmk_spec *sp) {
    return sp->p.mode == LLMK_SPEC_NGRAM && !sp->p.fixed_len && sp->have_plain && sp->draft_run < REFRESH_EVERY &&
           sp->plain_run >= sp->probe_every && estimated_len(sp) == 0;
}

int32_t llmk_spec_draft_len(const llmk_spec *sp) {
    if (!sp || sp->p.mode == LLMK_SPEC_NONE) return 0;
    if (sp->p.fixed_len) return sp->p.draft_max;
    if (!sp->have_plain || sp->draft_run >= REFRESH_EVERY) return 0;
    if (sp->p.mode == LLMK_SPEC_DRAFT && (!sp->have_draft || sp->plain_run >= sp->probe_every)) return probe_len(sp);
    if (ngram_probing(sp)) return probe_len(sp);
    return estimated_len(sp);
}

static void ewma(double *v, bool *have, double x) {
    *v = *have ? 0.8 * *v + 0.2 * x : x;
    *have = true;
}

void llmk_spec_feedback(llmk_spec *sp, int32_t n_draft, int32_t n_accepted, double draft_s, double verify_s) {
    llmk_spec_feedback_step(sp, n_draft, n_accepted, draft_s, verify_s, n_draft);
}

/* step_drafts: the drafted rows of every sequence in the timed step (the
 * engine's batch), so that each extra row's cost is the step's extra time
 * over all of them; a step where only others drafted is no plain sample. */
void llmk_spec_feedback_step(llmk_spec *sp, int32_t n_draft, int32_t n_accepted, double draft_s, double verify_s,
                             int32_t step_drafts) {
    if (!sp || n_draft < 0 || n_accepted < 0 || n_accepted > n_draft || step_drafts < n_draft) return;
    /* drafts where the estimates said none pay: a probe */
    bool probe = n_draft > 0 && sp->have_row && estimated_len(sp) == 0;
    sp->st.n_steps++;
    sp->st.n_drafted += n_draft;
    sp->st.n_accepted += n_accepted;
    sp->st.n_tokens += n_accepted + 1;
    sp->st.draft_s += draft_s;
    sp->st.verify_s += verify_s;
    sp->acc_kept *= DECAY, sp->acc_tried *= DECAY;
    /* a draft model drafting after plain steps first catches up on their
     * tokens: a one-off that is not what drafting costs step after step */
    bool catch_up = sp->plain_run > 0;
    sp->plain_run = n_draft ? 0 : sp->plain_run + 1;
    sp->draft_run = n_draft ? sp->draft_run + 1 : 0;
    if (n_draft == 0) {
        if (verify_s > 0 && step_drafts == 0) ewma(&sp->t_plain, &sp->have_plain, verify_s);
    } else {
        /* the geometric model: n_accepted successes, then a failure unless all were kept */
        sp->acc_kept += n_accepted;
        sp->acc_tried += n_accepted + (n_accepted < n_draft);
        if (sp->have_plain && verify_s > 0) {
            double row = (verify_s - sp->t_plain) / step_drafts;
            row = row > 0 ? row : 0;
            /* A probe finding rows cheaper than the estimate that turned
             * drafting off takes its figure at once: on a host whose speed
             * drifts, a few slow verify steps had set that estimate (a row
             * cost of 0.7 where rows cost ~0.15) and it changes only at
             * probes, each moving it a fifth of the way. One that finds them
             * dearer goes into the average as any step. */
            if (probe && row < sp->t_row) sp->t_row = row;
            else ewma(&sp->t_row, &sp->have_row, row);
        }
        if (sp->p.mode == LLMK_SPEC_DRAFT && draft_s > 0 && (!catch_up || !sp->have_draft))
            ewma(&sp->t_draft, &sp->have_draft, draft_s / n_draft);
    }
    sp->st.accept_rate = accept_rate(sp);
    sp->st.draft_len = llmk_spec_draft_len(sp);
    /* A probe that turns drafting off backs off; one that shows drafting
     * could not pay even if every draft held ends probing for good. */
    if (n_draft && (catch_up || sp->st.n_steps <= 2) && !sp->st.draft_len) {
        if (llmk_spec_best_len(1.0, draft_cost(sp), row_cost(sp), 1, sp->p.draft_max) == 0)
            sp->probe_every = INT32_MAX;
        else if (sp->probe_every < PROBE_MAX)
            sp->probe_every = 2 * sp->probe_every;
        else /* prompt lookup drafts for nothing: it keeps probing */
            sp->probe_every = sp->p.mode == LLMK_SPEC_NGRAM ? PROBE_MAX : INT32_MAX;
    } else if (n_draft && sp->st.draft_len)
        sp->probe_every = PROBE_EVERY;
    sp->st.expected_tokens = llmk_speculative_expected_tokens(sp->st.accept_rate, (double)sp->st.draft_len);
    sp->st.draft_cost = draft_cost(sp), sp->st.row_cost = row_cost(sp);
    sp->st.speedup = llmk_spec_predicted_speedup(sp->st.accept_rate, sp->st.draft_len, sp->st.draft_cost,
                                                 sp->st.row_cost);
}

int llmk_spec_stats_get(const llmk_spec *sp, llmk_spec_stats *out) {
    llmk_error_clear();
    if (!sp || !out) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_spec_stats_get: NULL argument");
    *out = sp->st;
    return LLMK_OK;
}

/* ---- the verify step ------------------------------------------------------ */

int llmk_session_spec_step(llmk_session *s, llmk_spec *sp, const int32_t *hist, size_t n_hist,
                           llmk_spec_choose_fn choose, void *user, int32_t *out, size_t cap, size_t *n_out,
                           bool *ended) {
    llmk_error_clear();
    if (!s || !sp || !hist || !choose || !out || !n_out || !ended || cap == 0)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_session_spec_step: NULL argument or no room for a token");
    *n_out = 0, *ended = false;
    int32_t pos = llmk_session_pos(s), n_ctx = llmk_session_n_ctx(s);
    if (n_hist != (size_t)pos + 1)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_session_spec_step: history of %zu tokens, the session holds "
                         "%d plus the pending one", n_hist, pos);
    if (pos >= n_ctx)
        return llmk_fail(LLMK_CONTEXT_FULL, "speculative step: the context of %d tokens is full", n_ctx);
    /* room: the pending token and the drafts within n_ctx, and no more rows than out takes */
    int32_t max = llmk_spec_draft_len(sp);
    if (max > n_ctx - pos - 1) max = n_ctx - pos - 1;
    if ((size_t)max > cap - 1) max = (int32_t)(cap - 1);
    double t0 = now_s();
    int32_t nd = 0;
    int st = max > 0 ? llmk_spec_draft(sp, hist, n_hist, max, sp->ids + 1, &nd) : LLMK_OK;
    if (st != LLMK_OK) return st;
    if (nd < sp->p.draft_min) nd = 0;
    double t1 = now_s();
    double draft_s = t1 - t0;
    sp->ids[0] = hist[n_hist - 1];
    size_t V = sp->n_vocab;
    if ((st = llmk_session_eval(s, sp->ids, (size_t)nd + 1, sp->logits, ((size_t)nd + 1) * V, true)) != LLMK_OK)
        return st;
    double t2 = now_s();
    /* rows in order, while the chosen token is the draft that was evaluated after it */
    int32_t i = 0;
    for (;; i++) {
        int32_t tok = -1;
        bool end = false;
        if ((st = choose(user, sp->logits + (size_t)i * V, &tok, &end)) != LLMK_OK) break;
        out[(*n_out)++] = tok;
        if (end) *ended = true;
        if (end || i == nd || tok != sp->ids[i + 1]) break;
    }
    /* keep the positions whose rows were chosen from (a failed choice's row too: its token is not out) */
    int32_t keep = pos + (st == LLMK_OK ? i + 1 : i);
    int tst = llmk_session_truncate(s, keep);
    if (st == LLMK_OK) st = tst;
    if (st == LLMK_OK) llmk_spec_feedback(sp, nd, i < nd ? i : nd, draft_s, t2 - t1);
    return st;
}
