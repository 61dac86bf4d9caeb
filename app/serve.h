/* llmk serve: the pieces shared by its files (docs/serve.md).
 *
 *   serve.c        the command: options, start-up, signals, drain
 *   serve_http.c   libmicrohttpd: routing, bodies, auth, answers, SSE streams
 *   serve_api.c    OpenAI request JSON -> a checked serve_req; answers as JSON
 *   serve_sched.c  the engine thread, jobs, the text of a choice, metrics
 *
 * Threads: libmicrohttpd runs one thread per connection; one engine thread
 * owns the llmk_engine and is the only thread that calls llmk_engine_*. An
 * HTTP thread turns a request into a job, queues it on the server (s->mu,
 * s->cv) and then reads the job's tokens as the engine thread appends them
 * (job->mu, job->cv). Lock order: never s->mu and a job's mu together. */
#ifndef LLMK_SERVE_H
#define LLMK_SERVE_H

#include "embed_pool.h"
#include "llmk.h"
#include "spec_opts.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    SERVE_MAX_STOPS = 16,
    SERVE_MAX_N = 16,           /* choices per request */
    SERVE_MAX_TOP_LOGPROBS = 20,
    SERVE_N_CODES = 11,         /* HTTP statuses counted in /metrics */
    SERVE_N_BUCKETS = 12,
    SERVE_MAX_EMBED_INPUTS = 2048, /* /v1/embeddings inputs per request (OpenAI's limit) */
};

struct serve_opts {
    const char *model, *host, *api_key, *alias, *chat_template;
    long port, n_parallel, n_ctx, threads, timeout_s, max_body, drain_timeout_s, max_queue, kv_blocks,
        step_tokens;
    uint32_t kv_type;
    struct spec_opts so; /* --spec ngram: every choice gets its own drafter */
    bool embeddings;     /* --embeddings: /v1/embeddings answers */
    int pooling;         /* --pooling: enum embed_pooling (mean or last) */
};

/* A checked request (serve_api.c); owns its allocations (serve_req_free). */
struct serve_req {
    bool chat, stream, include_usage, return_ids;
    int32_t *prompt;
    size_t n_prompt;
    int32_t max_tokens; /* at most n_ctx - n_prompt */
    int n;              /* choices */
    llmk_sampler_params sp;
    llmk_logit_bias *bias; /* sp.bias points here */
    char *stops[SERVE_MAX_STOPS];
    size_t n_stops;
    int logprobs; /* -1: none; else how many top alternatives per token (0 .. 20) */
    int32_t spec_max, spec_min; /* "speculative.n_max" / "speculative.n_min" (llama-server's); -1: not given */
    llmk_grammar *grammar;      /* llama-server's "grammar" (GBNF), or NULL; shared by the choices */
};
void serve_req_free(struct serve_req *r);

/* One token's log-probability and its top alternatives (logprobs asked). */
struct serve_lp {
    int32_t id;
    float lp;
};

/* One choice: one engine request. */
struct serve_choice {
    struct serve_job *job;
    int index;
    /* the engine thread's */
    int64_t eid;
    llmk_sampler *smp;
    llmk_spec *spec;      /* --spec: borrowed by the engine, like smp */
    llmk_grammar_state *gstate; /* the request's grammar, attached to smp */
    bool eng_ended;
    double t_last;
    int32_t cached;       /* prompt tokens the engine took from the prefix cache */
    /* under job->mu: written by the engine thread. tokens[] never moves, so a
     * reader may use tokens[0 .. n_tokens) after unlocking. */
    int32_t *tokens, n_tokens, cap;
    struct serve_lp *lps; /* cap * (1 + logprobs) when logprobs >= 0 */
    bool done, stop_req;  /* done: no more tokens; stop_req: the reader asks the engine to end it */
    enum llmk_finish finish;
    int status;
    char message[256];
    /* the reading HTTP thread's */
    int32_t n_read, n_used; /* tokens read; tokens the answer counts (up to a stop string) */
    llmk_detok_state ds;
    llmk_stop_matcher *stop;
    char *scratch;
    size_t scratch_cap;
    char *text; /* the released text so far */
    size_t text_len, text_cap, text_sent;
    bool harmony;          /* a chat answer of a harmony model: its analysis channel is reasoning */
    llmk_harmony_state hs;
    char *reason;          /* the reasoning so far (reasoning_content) */
    size_t reason_len, reason_cap, reason_sent;
    int32_t lp_sent;  /* streamed tokens whose logprobs were sent */
    bool ended, finish_sent, failed;
    const char *finish_reason;
};

enum job_state { JOB_QUEUED, JOB_ACCEPTED, JOB_REFUSED };

/* One HTTP request: n choices. Reference-counted: the HTTP connection, a
 * streaming response and the engine thread each hold one. */
struct serve_job {
    struct server *srv;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;             /* under mu */
    enum job_state state; /* under mu */
    bool cancel;          /* under mu: client gone, timeout or shutdown */
    bool cancel_counted;  /* under mu: counted in the metrics' cancelled requests */
    int refuse_http;      /* with JOB_REFUSED */
    char refuse_msg[320];
    struct serve_req req;
    struct serve_choice ch[SERVE_MAX_N];
    double t_arrival, deadline; /* monotonic seconds; deadline 0: none */
    bool first_token;           /* the engine thread's: TTFT recorded */
    char id[48];
    long long created; /* unix seconds */
    struct serve_job *next; /* the server's queue, then the engine thread's list */
};

enum serve_state { SERVE_LOADING, SERVE_READY, SERVE_DRAINING, SERVE_STOPPING };

struct serve_metrics {
    uint64_t by_code[SERVE_N_CODES];
    uint64_t cancelled;
    uint64_t ttft[SERVE_N_BUCKETS + 1], itl[SERVE_N_BUCKETS + 1];
    double ttft_sum, itl_sum;
    /* the engine thread's snapshot after its latest step */
    llmk_engine_stats es;
    llmk_kv_info kv;
};

struct server {
    struct serve_opts o;
    llmk_model *m;
    const llmk_tokenizer *tok;
    bool harmony; /* the chat template is harmony (gpt-oss): answers split into content and reasoning */
    size_t n_vocab, piece_cap;
    int32_t *eog;
    size_t n_eog;
    int32_t n_ctx;
    char model_id[256];
    llmk_engine *e;
    llmk_model *draft;         /* --spec draft: the draft model, behind dpool */
    llmk_draft_pool *dpool;
    pthread_t engine_thread;
    bool engine_started;
    pthread_mutex_t mu;        /* guards everything below */
    pthread_cond_t cv;         /* the engine thread waits here for work */
    pthread_cond_t jobs_cv;    /* drain waits here for n_jobs to reach 0 */
    enum serve_state state;
    bool engine_stop;
    struct serve_job *queue, *queue_tail;
    int n_queued, n_jobs;
    int n_conns; /* open HTTP connections (MHD's connection notifications) */
    uint64_t next_id;
    struct serve_metrics met;
    /* /v1/embeddings (--embeddings): a session of its own, one request at a time */
    int32_t n_embd;
    llmk_session *emb;
    struct embed_scratch emb_sc;
    pthread_mutex_t emb_mu;
};

double serve_now(void);

/* serve_sched.c */
int sched_start(struct server *s);
void sched_stop(struct server *s);
/* A new job for r (moved in); NULL when out of memory (r is freed). One
 * reference, the caller's. */
struct serve_job *job_new(struct server *s, struct serve_req *r);
void job_retain(struct serve_job *j);
void job_release(struct serve_job *j);
/* Queue j for the engine thread (it takes a reference); false, with j
 * untouched, when the server is not accepting (loading, draining). */
bool job_enqueue(struct serve_job *j);
/* Waits until the engine thread accepted or refused j. */
enum job_state job_wait_accept(struct serve_job *j);
void job_cancel(struct serve_job *j);
/* Reads the new tokens of every choice into its text (stop strings,
 * detokenizing); true when every choice has ended. */
bool job_pull(struct serve_job *j);
/* Waits up to ms milliseconds for new tokens or an end. */
void job_wait(struct serve_job *j, int ms);
/* Every HTTP status answered is counted here (/metrics). */
void metrics_count(struct server *s, int http);
/* The /metrics page (malloc'd). */
char *metrics_text(struct server *s);

/* serve_api.c. Parse a request body: 200, or the HTTP status with an
 * OpenAI error object in *err_json (malloc'd). It reads s's model_id, n_ctx,
 * n_vocab, tok, m and o.chat_template only; with tok NULL (no model: the
 * request fuzzer, fuzz/fuzz_serve.c) a byte is a token and messages render
 * as ChatML. */
int api_parse(struct server *s, bool chat, const char *body, size_t len, struct serve_req *out, char **err_json);
char *api_error(const char *message, const char *type, const char *param, const char *code);
/* A 400 invalid_request_error with the formatted message into *err (malloc'd); returns 400. */
int api_bad_v(char **err, const char *param, const char *fmt, va_list ap);
char *api_models(const struct server *s);
char *api_response(struct serve_job *j);
/* The SSE events a stream owes now, appended to *buf (malloc'd, grown): new
 * text, finishes, and after the last finish usage and [DONE]. */
int api_stream_events(struct serve_job *j, bool all_ended, bool *first, char **buf, size_t *len, size_t *cap);

/* serve_embed.c: /v1/embeddings. A checked request: each input's tokens. */
struct serve_embed_req {
    int32_t **ids;
    size_t *n_ids, n, n_tokens;
    bool base64; /* "encoding_format": "base64" */
};
void serve_embed_req_free(struct serve_embed_req *r);
/* As api_parse (200, or the status with an error object in *err_json); it
 * reads s's model_id, n_ctx, n_embd, n_vocab and tok (NULL: a byte is a token). */
int api_parse_embed(const struct server *s, const char *body, size_t len, struct serve_embed_req *out,
                    char **err_json);
/* The session and scratch, with --embeddings (after the model is loaded). */
int embed_start(struct server *s);
void embed_stop(struct server *s);
/* Every input's vector into out (r->n rows of n_embd); an llmk status. */
int serve_embed_run(struct server *s, const struct serve_embed_req *r, float *out);
char *api_embed_response(const struct server *s, const struct serve_embed_req *r, const float *vecs);

/* serve_http.c */
struct MHD_Daemon;
/* Listens on --host:--port; *port is the port bound (--port 0 picks one). */
int http_start(struct server *s, struct MHD_Daemon **d, int *port, char *why, size_t why_cap);
void http_stop(struct MHD_Daemon *d);

#endif
