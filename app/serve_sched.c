/* llmk serve: the engine thread, the jobs it serves, and the text of a
 * choice (docs/serve.md). The engine thread is the only caller of
 * llmk_engine_*: it takes queued jobs, applies cancellations, runs a step,
 * hands each token to its job, and sleeps on s->cv when there is nothing to
 * do. HTTP threads never touch the engine; they read tokens from their job. */
#include "serve.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double serve_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- jobs -------------------------------------------------------------------- */

struct serve_job *job_new(struct server *s, struct serve_req *r) {
    struct serve_job *j = calloc(1, sizeof *j);
    if (!j) {
        serve_req_free(r);
        return NULL;
    }
    j->srv = s;
    j->req = *r;
    memset(r, 0, sizeof *r);
    j->refs = 1;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->t_arrival = serve_now();
    j->created = (long long)time(NULL);
    j->deadline = s->o.timeout_s > 0 ? j->t_arrival + (double)s->o.timeout_s : 0;
    int32_t room = s->n_ctx - (int32_t)j->req.n_prompt;
    int32_t cap = j->req.max_tokens < room ? j->req.max_tokens : room;
    size_t per = j->req.logprobs >= 0 ? (size_t)(1 + j->req.logprobs) : 0;
    bool ok = true;
    for (int i = 0; i < j->req.n; i++) {
        struct serve_choice *c = &j->ch[i];
        c->job = j, c->index = i, c->cap = cap;
        c->tokens = malloc((size_t)cap * sizeof *c->tokens);
        if (per) c->lps = malloc((size_t)cap * per * sizeof *c->lps);
        /* a token's text, plus what the stop matcher may release with it */
        ok = ok && c->tokens && (!per || c->lps) &&
             llmk_stop_init((const char *const *)j->req.stops, j->req.n_stops, &c->stop) == LLMK_OK;
        /* two halves: a token's text, then what the stop matcher releases with it */
        c->scratch_cap = ok ? 2 * (s->piece_cap + 64 + llmk_stop_max_len(c->stop)) : 0;
        ok = ok && (c->scratch = malloc(c->scratch_cap));
        c->ds.started = true; /* a continuation: keep a SentencePiece leading space */
        c->harmony = s->harmony && j->req.chat && llmk_harmony_init(s->tok, &c->hs) == LLMK_OK;
    }
    pthread_mutex_lock(&s->mu);
    s->n_jobs++;
    snprintf(j->id, sizeof j->id, "%s-%llu", j->req.chat ? "chatcmpl" : "cmpl", (unsigned long long)++s->next_id);
    pthread_mutex_unlock(&s->mu);
    if (!ok) {
        job_release(j);
        return NULL;
    }
    return j;
}

static void job_free(struct serve_job *j) {
    struct server *s = j->srv;
    for (int i = 0; i < SERVE_MAX_N; i++) {
        struct serve_choice *c = &j->ch[i];
        free(c->tokens), free(c->lps), free(c->scratch), free(c->text), free(c->reason);
        llmk_stop_free(c->stop);
        llmk_sampler_free(c->smp);
        llmk_grammar_state_free(c->gstate);
        llmk_spec_free(c->spec);
    }
    serve_req_free(&j->req);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
    pthread_mutex_lock(&s->mu);
    s->n_jobs--;
    pthread_cond_broadcast(&s->jobs_cv);
    pthread_mutex_unlock(&s->mu);
}

void job_retain(struct serve_job *j) {
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
}

void job_release(struct serve_job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left == 0) job_free(j);
}

bool job_enqueue(struct serve_job *j) {
    struct server *s = j->srv;
    job_retain(j); /* the engine thread's */
    pthread_mutex_lock(&s->mu);
    bool ok = s->state == SERVE_READY;
    if (ok) {
        if (s->queue_tail) s->queue_tail->next = j;
        else s->queue = j;
        s->queue_tail = j;
        s->n_queued++;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    if (!ok) job_release(j);
    return ok;
}

enum job_state job_wait_accept(struct serve_job *j) {
    pthread_mutex_lock(&j->mu);
    while (j->state == JOB_QUEUED) pthread_cond_wait(&j->cv, &j->mu);
    enum job_state st = j->state;
    pthread_mutex_unlock(&j->mu);
    return st;
}

static void wake_engine(struct server *s) {
    pthread_mutex_lock(&s->mu);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void job_cancel(struct serve_job *j) {
    pthread_mutex_lock(&j->mu);
    bool was = j->cancel;
    j->cancel = true;
    pthread_mutex_unlock(&j->mu);
    if (!was) wake_engine(j->srv);
}

void job_wait(struct serve_job *j, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&j->mu);
    bool news = false;
    for (int i = 0; i < j->req.n && !news; i++)
        news = !j->ch[i].ended && (j->ch[i].n_tokens > j->ch[i].n_read || j->ch[i].done);
    if (!news) pthread_cond_timedwait(&j->cv, &j->mu, &ts);
    pthread_mutex_unlock(&j->mu);
}

/* ---- the text of a choice (the reading HTTP thread) ----------------------------- */

static bool buf_add(char **buf, size_t *len, size_t *cap, const char *p, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = (*len + n + 1) * 2;
        char *t = realloc(*buf, c);
        if (!t) return false;
        *buf = t, *cap = c;
    }
    memcpy(*buf + *len, p, n);
    *len += n;
    (*buf)[*len] = 0;
    return true;
}

static bool text_add(struct serve_choice *c, const char *p, size_t n) {
    return buf_add(&c->text, &c->text_len, &c->text_cap, p, n);
}

/* One token's text through the stop matcher; true once a stop string ended the choice. */
static bool feed_text(struct serve_choice *c, const char *p, size_t n) {
    size_t half = c->scratch_cap / 2, out = 0;
    bool stopped = false;
    if (llmk_stop_feed(c->stop, p, n, c->scratch + half, c->scratch_cap - half, &out, &stopped) != LLMK_OK ||
        !text_add(c, c->scratch + half, out))
        c->failed = true;
    return stopped;
}

/* The choice's new tokens into its text. A stop string ends it at once (the
 * engine is asked to end the request); the token that completes it is the
 * last one counted. An ending end-of-generation token counts but has no text,
 * as in `llmk run`. */
static void choice_pull(struct server *s, struct serve_choice *c) {
    struct serve_job *j = c->job;
    pthread_mutex_lock(&j->mu);
    int32_t n = c->n_tokens;
    bool done = c->done;
    enum llmk_finish fin = c->finish;
    pthread_mutex_unlock(&j->mu);
    size_t half = c->scratch_cap / 2, nt = 0;
    for (int32_t k = c->n_read; k < n && !c->ended; k++) {
        c->n_used = k + 1;
        if (done && fin == LLMK_FINISH_STOP && k == n - 1 && llmk_tokenizer_is_eog(s->tok, c->tokens[k])) break;
        llmk_harmony_part part = LLMK_HARMONY_CONTENT;
        int32_t id = c->tokens[k];
        if ((c->harmony ? llmk_harmony_text(&c->hs, s->tok, &c->ds, id, c->scratch, half, &nt, &part)
                        : llmk_detok_feed(s->tok, &c->ds, id, false, c->scratch, half, &nt)) != LLMK_OK) {
            c->failed = true;
            break;
        }
        if (part == LLMK_HARMONY_REASONING) { /* stop strings match the answer's content only */
            c->failed |= !buf_add(&c->reason, &c->reason_len, &c->reason_cap, c->scratch, nt);
            continue;
        }
        if (part == LLMK_HARMONY_CONTENT && feed_text(c, c->scratch, nt)) {
            c->ended = true, c->finish_reason = "stop";
            pthread_mutex_lock(&j->mu);
            c->stop_req = true;
            pthread_mutex_unlock(&j->mu);
            wake_engine(s);
        }
    }
    c->n_read = n;
    if (c->ended || !done) return;
    if (llmk_detok_flush(s->tok, &c->ds, c->scratch, half, &nt) == LLMK_OK && !feed_text(c, c->scratch, nt) &&
        llmk_stop_flush(c->stop, c->scratch + half, c->scratch_cap - half, &nt) == LLMK_OK)
        c->failed |= !text_add(c, c->scratch + half, nt);
    c->ended = true;
    if (fin == LLMK_FINISH_ERROR) c->failed = true;
    c->finish_reason = fin == LLMK_FINISH_STOP ? "stop" : "length";
}

bool job_pull(struct serve_job *j) {
    bool all = true;
    for (int i = 0; i < j->req.n; i++) {
        struct serve_choice *c = &j->ch[i];
        if (!c->ended) choice_pull(j->srv, c);
        all = all && c->ended;
    }
    return all;
}

/* ---- metrics ------------------------------------------------------------------- */

static const int CODES[SERVE_N_CODES] = {200, 400, 401, 404, 405, 413, 429, 500, 503, 504, 0};
static const double TTFT_LE[SERVE_N_BUCKETS] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
static const double ITL_LE[SERVE_N_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};

void metrics_count(struct server *s, int http) {
    int k = 0;
    while (CODES[k] && CODES[k] != http) k++; /* the last slot: any other */
    pthread_mutex_lock(&s->mu);
    s->met.by_code[k]++;
    pthread_mutex_unlock(&s->mu);
}

static void observe(uint64_t *b, double *sum, const double *le, double v) {
    int k = 0;
    while (k < SERVE_N_BUCKETS && v > le[k]) k++;
    b[k]++;
    *sum += v;
}

static int hist_text(char *p, size_t cap, const char *name, const char *help, const uint64_t *b, double sum,
                     const double *le) {
    int n = snprintf(p, cap, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t acc = 0;
    for (int k = 0; k <= SERVE_N_BUCKETS; k++) {
        acc += b[k];
        if (k < SERVE_N_BUCKETS) n += snprintf(p + n, cap - (size_t)n, "%s_bucket{le=\"%g\"} %llu\n", name, le[k],
                                               (unsigned long long)acc);
        else n += snprintf(p + n, cap - (size_t)n, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)acc);
    }
    n += snprintf(p + n, cap - (size_t)n, "%s_sum %.6f\n%s_count %llu\n", name, sum, name, (unsigned long long)acc);
    return n;
}

char *metrics_text(struct server *s) {
    size_t cap = 16384;
    char *p = malloc(cap);
    if (!p) return NULL;
    pthread_mutex_lock(&s->mu);
    struct serve_metrics m = s->met;
    int queued = s->n_queued, conns = s->n_conns;
    pthread_mutex_unlock(&s->mu);
    int n = snprintf(p, cap, "# HELP llmk_requests_total HTTP requests answered, by status code.\n"
                             "# TYPE llmk_requests_total counter\n");
    for (int k = 0; k < SERVE_N_CODES; k++)
        if (CODES[k]) n += snprintf(p + n, cap - (size_t)n, "llmk_requests_total{status=\"%d\"} %llu\n", CODES[k],
                                    (unsigned long long)m.by_code[k]);
        else n += snprintf(p + n, cap - (size_t)n, "llmk_requests_total{status=\"other\"} %llu\n",
                           (unsigned long long)m.by_code[k]);
#define ROW(name, type, help, fmt, v) \
    n += snprintf(p + n, cap - (size_t)n, "# HELP " name " " help "\n# TYPE " name " " type "\n" name " " fmt "\n", v)
    ROW("llmk_requests_cancelled_total", "counter", "Requests ended early: client gone, timeout or shutdown.",
        "%llu", (unsigned long long)m.cancelled);
    ROW("llmk_prompt_tokens_total", "counter", "Prompt tokens of admitted sequences.", "%lld",
        (long long)m.es.prompt_tokens);
    ROW("llmk_generated_tokens_total", "counter", "Tokens generated.", "%lld", (long long)m.es.generated_tokens);
    ROW("llmk_draft_tokens_total", "counter", "Speculative draft tokens verified.", "%lld",
        (long long)m.es.drafted_tokens);
    ROW("llmk_draft_tokens_accepted_total", "counter", "Speculative draft tokens kept.", "%lld",
        (long long)m.es.accepted_drafts);
    ROW("llmk_prefix_cache_hit_tokens_total", "counter", "Prompt tokens taken from the prefix cache.", "%lld",
        (long long)m.es.cached_tokens);
    ROW("llmk_preemptions_total", "counter", "Sequences preempted (recomputed later).", "%lld",
        (long long)m.es.n_preempted);
    ROW("llmk_sequences_running", "gauge", "Sequences holding a slot.", "%d", m.es.n_running);
    ROW("llmk_sequences_queued", "gauge", "Sequences waiting for a slot.", "%d", m.es.n_waiting + queued);
    ROW("llmk_kv_blocks_used", "gauge", "KV blocks held by sequences.", "%d", m.kv.n_used);
    ROW("llmk_kv_blocks_cached", "gauge", "KV blocks no sequence holds that a prefix may still hit.", "%d",
        m.kv.n_cached);
    ROW("llmk_kv_blocks_free", "gauge", "KV blocks free.", "%d", m.kv.n_free);
    ROW("llmk_kv_blocks_total", "gauge", "KV blocks in the pool.", "%d", m.kv.n_blocks);
    ROW("llmk_http_connections_open", "gauge", "HTTP connections open (this scrape's included).", "%d", conns);
#undef ROW
    n += hist_text(p + n, cap - (size_t)n, "llmk_time_to_first_token_seconds",
                   "From a request's arrival to its first token.", m.ttft, m.ttft_sum, TTFT_LE);
    hist_text(p + n, cap - (size_t)n, "llmk_inter_token_latency_seconds", "Between two tokens of a sequence.",
              m.itl, m.itl_sum, ITL_LE);
    return p;
}

/* ---- the engine thread ---------------------------------------------------------- */

/* log-softmax of the row in double; the chosen token's and the k best. */
static void logprobs(const float *row, size_t n, int32_t tok, int k, struct serve_lp *out) {
    double mx = -INFINITY, sum = 0;
    for (size_t i = 0; i < n; i++) mx = row[i] > mx ? row[i] : mx;
    for (size_t i = 0; i < n; i++) sum += exp((double)row[i] - mx);
    double lse = mx + log(sum);
    out[0] = (struct serve_lp){tok, (float)((double)row[tok] - lse)};
    struct serve_lp *best = out + 1; /* the k largest logits, largest first; on a tie the lower id first */
    int have = 0;
    for (size_t i = 0; i < n && k > 0; i++) {
        if (have == k && row[i] <= best[k - 1].lp) continue;
        int at = have < k ? have++ : k - 1;
        for (; at > 0 && best[at - 1].lp < row[i]; at--) best[at] = best[at - 1];
        best[at] = (struct serve_lp){(int32_t)i, row[i]};
    }
    for (int i = 0; i < have; i++) best[i].lp = (float)((double)best[i].lp - lse);
}

static void end_choice_locked(struct serve_choice *c, enum llmk_finish fin, int status, const char *msg) {
    c->done = true;
    c->finish = fin;
    c->status = status;
    snprintf(c->message, sizeof c->message, "%s", msg ? msg : "");
    c->eng_ended = true;
}

/* Whether job j is now to be counted among the cancelled requests: once,
 * by whichever path ends it first (apply_cancels before a step, on_event
 * during one). j->mu held; the caller counts after unlocking it (the two
 * locks are never nested). */
static bool take_cancel_count_locked(struct serve_job *j) {
    if (j->cancel_counted) return false;
    j->cancel_counted = true;
    return true;
}

static void count_cancel(struct server *s) {
    pthread_mutex_lock(&s->mu);
    s->met.cancelled++;
    pthread_mutex_unlock(&s->mu);
}

static int on_event(void *user, const llmk_token_event *ev) {
    struct server *s = user;
    struct serve_choice *c = ev->user;
    struct serve_job *j = c->job;
    double t = serve_now();
    bool first = !j->first_token;
    if (ev->finish != LLMK_FINISH_ERROR) {
        pthread_mutex_lock(&s->mu);
        if (first) observe(s->met.ttft, &s->met.ttft_sum, TTFT_LE, t - j->t_arrival);
        else if (ev->index > 0) observe(s->met.itl, &s->met.itl_sum, ITL_LE, t - c->t_last);
        pthread_mutex_unlock(&s->mu);
        j->first_token = true;
        c->t_last = t;
    }
    int k = j->req.logprobs;
    struct serve_lp lp[1 + SERVE_MAX_TOP_LOGPROBS + 1];
    if (k >= 0 && ev->logits) logprobs(ev->logits, s->n_vocab, ev->token, k, lp);
    pthread_mutex_lock(&j->mu);
    c->cached = ev->cached_tokens;
    bool stop = j->cancel || c->stop_req;
    if (ev->finish != LLMK_FINISH_ERROR && c->n_tokens < c->cap) {
        if (k >= 0) memcpy(c->lps + (size_t)c->n_tokens * (size_t)(1 + k), lp, (size_t)(1 + k) * sizeof *lp);
        c->tokens[c->n_tokens++] = ev->token;
    }
    if (ev->finish != LLMK_FINISH_NONE) end_choice_locked(c, ev->finish, ev->status, ev->message);
    else if (stop) end_choice_locked(c, LLMK_FINISH_LENGTH, LLMK_OK, NULL); /* the return below ends it */
    bool count = j->cancel && ev->finish == LLMK_FINISH_NONE && take_cancel_count_locked(j);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (count) count_cancel(s);
    return stop && ev->finish == LLMK_FINISH_NONE;
}

/* A job the engine will not run: its reader answers refuse_http; the
 * engine thread's reference and samplers go at once. */
static void refuse(struct serve_job *j, int st) {
    pthread_mutex_lock(&j->mu);
    j->state = JOB_REFUSED;
    j->refuse_http = st == LLMK_QUEUE_FULL      ? 429
                     : st == LLMK_OUT_OF_MEMORY ? 500
                     : st == LLMK_INTERRUPTED   ? 503
                                                : 400; /* a request that cannot fit */
    snprintf(j->refuse_msg, sizeof j->refuse_msg, "%s: %s", llmk_status_name(st),
             st == LLMK_INTERRUPTED ? "the server is shutting down" : llmk_last_error());
    for (int i = 0; i < j->req.n; i++) j->ch[i].eng_ended = true;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* Submits every choice of j; on a refusal the ones already in are
 * cancelled and j is refused with the HTTP status for it. */
static bool submit_job(struct server *s, struct serve_job *j) {
    int st = LLMK_OK, in = 0;
    while (in < j->req.n && st == LLMK_OK) {
        struct serve_choice *c = &j->ch[in];
        llmk_sampler_params sp = j->req.sp;
        if (sp.seed >= 0) sp.seed += in; /* n choices of one seeded request differ, reproducibly */
        if ((st = llmk_sampler_init(&sp, s->n_vocab, &c->smp)) != LLMK_OK) break;
        if (j->req.grammar && ((st = llmk_grammar_state_init(j->req.grammar, s->tok, &c->gstate)) != LLMK_OK ||
                               (st = llmk_sampler_set_grammar(c->smp, c->gstate)) != LLMK_OK))
            break;
        llmk_spec_params spp = s->o.so.p; /* the server's --spec, as the request adjusts it */
        spp.draft_pool = s->dpool;
        if (j->req.spec_max >= 0) /* on: the server's drafter, prompt lookup when it has none */
            spp.mode = !j->req.spec_max ? LLMK_SPEC_NONE : s->dpool ? LLMK_SPEC_DRAFT : LLMK_SPEC_NGRAM;
        if (j->req.spec_max > 0) spp.draft_max = j->req.spec_max;
        if (j->req.spec_min > 0) spp.draft_min = j->req.spec_min;
        if (spp.mode != LLMK_SPEC_NONE && (st = llmk_spec_init(s->m, &spp, &c->spec)) != LLMK_OK) break;
        llmk_request q = {.prompt = j->req.prompt, .n_prompt = j->req.n_prompt, .max_tokens = c->cap,
                          .sampler = c->smp, .stop_ids = s->eog, .n_stop = s->n_eog, .user = c,
                          .spec = c->spec};
        if ((st = llmk_engine_submit(s->e, &q, &c->eid)) == LLMK_OK) in++;
    }
    if (st != LLMK_OK) refuse(j, st);
    for (int k = 0; st != LLMK_OK && k < in; k++) llmk_engine_cancel(s->e, j->ch[k].eid);
    pthread_mutex_lock(&j->mu);
    if (st == LLMK_OK) j->state = JOB_ACCEPTED;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return st == LLMK_OK;
}

/* Ends the choices whose reader is gone or done with them (a stop string),
 * waiting or running; their blocks go back to the pool at once. */
static void apply_cancels(struct server *s, struct serve_job *list, bool all) {
    for (struct serve_job *j = list; j; j = j->next) {
        pthread_mutex_lock(&j->mu);
        bool cancel = j->cancel || all;
        int n = 0;
        for (int i = 0; i < j->req.n; i++) {
            struct serve_choice *c = &j->ch[i];
            if (c->eng_ended || !(cancel || c->stop_req)) continue;
            llmk_engine_cancel(s->e, c->eid);
            end_choice_locked(c, LLMK_FINISH_LENGTH, LLMK_OK, NULL);
            n += cancel;
        }
        bool count = n && take_cancel_count_locked(j);
        if (n) pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&j->mu);
        if (count) count_cancel(s);
    }
}

/* Drops the jobs whose choices have all ended from the engine thread's list. */
static struct serve_job *reap(struct serve_job *list) {
    struct serve_job **pp = &list;
    while (*pp) {
        struct serve_job *j = *pp;
        bool all = true;
        for (int i = 0; i < j->req.n; i++) all = all && j->ch[i].eng_ended;
        if (!all) {
            pp = &j->next;
            continue;
        }
        *pp = j->next;
        for (int i = 0; i < j->req.n; i++) {
            llmk_sampler_free(j->ch[i].smp); /* the engine is done with it */
            j->ch[i].smp = NULL;
            llmk_spec_free(j->ch[i].spec);
            j->ch[i].spec = NULL;
        }
        job_release(j);
    }
    return list;
}

static void snapshot(struct server *s) {
    llmk_engine_stats es;
    llmk_kv_info kv;
    if (llmk_engine_stats_get(s->e, &es) != LLMK_OK ||
        llmk_context_kv_info(llmk_engine_context(s->e), &kv) != LLMK_OK)
        return;
    pthread_mutex_lock(&s->mu);
    s->met.es = es, s->met.kv = kv;
    pthread_mutex_unlock(&s->mu);
}

static void *engine_main(void *arg) {
    struct server *s = arg;
    struct serve_job *active = NULL;
    snapshot(s);
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->engine_stop && !s->queue && llmk_engine_idle(s->e)) pthread_cond_wait(&s->cv, &s->mu);
        if (s->engine_stop) break;
        struct serve_job *q = s->queue;
        s->queue = s->queue_tail = NULL;
        s->n_queued = 0;
        bool all = s->state == SERVE_STOPPING;
        pthread_mutex_unlock(&s->mu);
        while (q) {
            struct serve_job *j = q;
            q = q->next;
            j->next = NULL;
            if (submit_job(s, j)) j->next = active, active = j;
            else reap(j); /* its samplers; the engine thread's reference */
        }
        apply_cancels(s, active, all);
        if (!llmk_engine_idle(s->e)) {
            int st = llmk_engine_step(s->e, on_event, s);
            if (st != LLMK_OK) /* not a request's failure (those come as events): say it, end everything */
                fprintf(stderr, "llmk serve: engine step failed: %s: %s\n", llmk_status_name(st), llmk_last_error());
            if (st != LLMK_OK) apply_cancels(s, active, true);
        }
        active = reap(active);
        snapshot(s);
        pthread_mutex_lock(&s->mu);
    }
    struct serve_job *q = s->queue; /* never to run: their readers wait for an answer */
    s->queue = s->queue_tail = NULL;
    pthread_mutex_unlock(&s->mu);
    while (q) {
        struct serve_job *j = q;
        q = q->next;
        j->next = NULL;
        refuse(j, LLMK_INTERRUPTED);
        reap(j);
    }
    apply_cancels(s, active, true);
    reap(active);
    return NULL;
}

int sched_start(struct server *s) {
    int rc = pthread_create(&s->engine_thread, NULL, engine_main, s);
    if (rc) return LLMK_OUT_OF_MEMORY;
    s->engine_started = true;
    return LLMK_OK;
}

void sched_stop(struct server *s) {
    if (!s->engine_started) return;
    pthread_mutex_lock(&s->mu);
    s->engine_stop = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->engine_thread, NULL);
    s->engine_started = false;
}
