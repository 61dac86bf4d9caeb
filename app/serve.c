/* llmk serve: an OpenAI-compatible HTTP server on the continuous-batching
 * engine (docs/serve.md). This file is the command: options, start-up
 * (listen first, so /health can say "loading" while the model loads),
 * signals and the drain on SIGTERM/SIGINT. */
#include "cli.h"
#include "opts.h"
#include "serve.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char CMD[] = "serve";
static const char USAGE[] =
    "usage: llmk serve [-m MODEL] [--host ADDR] [--port N] [-np N] [-c N] [-t N] [--api-key KEY] [--alias ID]\n"
    "  Serves the model over HTTP with the OpenAI API: POST /v1/chat/completions, POST /v1/completions,\n"
    "  GET /v1/models, GET /health, GET /metrics (Prometheus), and with --embeddings POST /v1/embeddings.\n"
    "  Requests run side by side on one\n"
    "  continuous-batching engine, -np at once; the others wait in its queue (--max-queue).\n";
static const char EPILOG[] =
    "Prints \"llmk serve: listening on http://ADDR:PORT\" on stderr once it listens (--port 0 picks a free\n"
    "port), then loads the model; /health answers 503 {\"status\":\"loading\"} until it is ready. SIGTERM or\n"
    "SIGINT drains: new requests get 503, running ones finish (up to --drain-timeout), then it exits 0.\n"
    "Sampling defaults are the OpenAI API's (temperature 1, top_p 1); see docs/serve.md.\n";

enum { SERVE_MAX_PARALLEL = 256, SERVE_DEFAULT_CTX = 4096 };

static int opt_pooling(const char *cmd, const char *flag, const char *value, void *ctx) {
    int *out = ctx;
    if ((*out = embed_pooling_from_name(value, 0)) < 0)
        return cli_usage_error(cmd, "%s expects mean or last, got '%s'", flag, value), 0;
    return 1;
}

static int parse_args(struct serve_opts *o, int argc, char **argv) {
    const struct cli_opt table[] = {
        CLI_OPT_MODEL(&o->model),
        CLI_STR("--host", 0, &o->host, "ADDR", "address to listen on (default 127.0.0.1; 0.0.0.0: all)"),
        CLI_LONG("--port", 0, &o->port, 0, 65535, "N", "port (default 8080; 0: a free one, printed)"),
        CLI_LONG("--parallel", 0, &o->n_parallel, 1, SERVE_MAX_PARALLEL, "N",
                 "sequences generated at once (default 4); also -np"),
        CLI_LONG("-np", 0, &o->n_parallel, 1, SERVE_MAX_PARALLEL, "N", "the same as --parallel (llama-server)"),
        CLI_OPT_CTX(&o->n_ctx, "tokens of one sequence, prompt and output (default: the model's, at most 4096)"),
        CLI_OPT_THREADS(&o->threads),
        CLI_OPT_KV_TYPE(&o->kv_type, CLI_KV_TYPE_HELP),
        CLI_LONG("--kv-blocks", 0, &o->kv_blocks, 1, INT32_MAX, "N",
                 "KV pool of N blocks of 128 positions (default: -np full contexts)"),
        CLI_LONG("--step-tokens", 0, &o->step_tokens, 1, 8192, "N",
                 "tokens per engine step: decode rows plus prompt chunks (default 512)"),
        CLI_LONG("--max-queue", 0, &o->max_queue, 1, 1 << 20, "N",
                 "requests waiting beyond the running ones before 429 (default 64)"),
        CLI_STR("--api-key", 0, &o->api_key, "KEY", "require \"Authorization: Bearer KEY\" (not on /health)"),
        CLI_STR("--alias", 0, &o->alias, "ID", "the model's id in the API (default: the file's name)"),
        CLI_STR("--chat-template", 0, &o->chat_template, "NAME",
                "chatml, llama3, zephyr, llama2, gemma or harmony instead of the model's"),
        CLI_LONG("--timeout", 0, &o->timeout_s, 0, 86400, "S",
                 "a request generating longer ends with what it has, finish_reason \"length\" (default 600; 0: "
                 "none)"),
        CLI_LONG("--max-body", 0, &o->max_body, 1, 1L << 30, "BYTES", "largest request body (default 8 MiB; 413)"),
        CLI_FLAG2("--embeddings", "--embedding", 0, &o->embeddings,
                  "answer /v1/embeddings (llama-server's flag): the final hidden states, pooled, L2-normalized"),
        CLI_FN("--pooling", 0, opt_pooling, &o->pooling, "P",
               "how /v1/embeddings pools a text's tokens: mean (the default) or last"),
        CLI_LONG("--drain-timeout", 0, &o->drain_timeout_s, 0, 86400, "S",
                 "on SIGTERM/SIGINT, wait this long for running requests (default 30)"),
    };
    const struct cli_opt_section sections[] = {{NULL, table, CLI_LEN(table)}, spec_opts_section(&o->so)};
    struct cli_cmd spec = {.name = CMD, .usage = USAGE, .epilog = EPILOG, .sections = sections,
                           .n_sections = CLI_LEN(sections)};
    int rc = cli_opts_parse(&spec, argc, argv);
    if (rc != CLI_OPTS_GO || (rc = spec_opts_check(CMD, &o->so)) != CLI_OPTS_GO) return rc;
    if (!o->model) o->model = cli_default_model();
    o->kv_type = cli_kv_type_or_default(o->kv_type, LLMK_PATH_FAST);
    return CLI_OPTS_GO;
}

/* The model, its tokenizer's end-of-generation ids (they end a choice with
 * "stop"), the longest token text, and the API's model id. */
static int load_model(struct server *s) {
    int st = llmk_model_load(s->o.model, &s->m);
    if (st == LLMK_OK) st = llmk_model_tokenizer(s->m, &s->tok);
    if (st != LLMK_OK) return st;
    s->n_vocab = llmk_tokenizer_n_vocab(s->tok);
    if (s->n_vocab != (size_t)llmk_model_hparams(s->m)->n_vocab)
        return cli_fail(LLMK_TOKENIZER_BAD_DATA, "the tokenizer has %zu tokens, the model %d", s->n_vocab,
                        llmk_model_hparams(s->m)->n_vocab);
    s->piece_cap = 64;
    for (int32_t i = 0; i < (int32_t)s->n_vocab; i++) {
        size_t len = 0;
        if (llmk_tokenizer_piece(s->tok, i, &len) && len + 16 > s->piece_cap) s->piece_cap = len + 16;
        s->n_eog += llmk_tokenizer_is_eog(s->tok, i);
    }
    if (!(s->eog = malloc((s->n_eog + 1) * sizeof *s->eog))) return cli_fail(LLMK_OUT_OF_MEMORY, "eog ids");
    llmk_chat_template *tp = NULL;
    llmk_harmony_state hs;
    s->harmony = llmk_chat_template_from_gguf(llmk_model_gguf(s->m), s->o.chat_template, &tp) == LLMK_OK &&
                 !strcmp(llmk_chat_template_name(tp), "harmony") && llmk_harmony_init(s->tok, &hs) == LLMK_OK;
    llmk_chat_template_free(tp);
    size_t k = 0;
    for (int32_t i = 0; i < (int32_t)s->n_vocab; i++)
        if (llmk_tokenizer_is_eog(s->tok, i)) s->eog[k++] = i;
    const char *base = strrchr(s->o.model, '/');
    s->n_embd = llmk_model_hparams(s->m)->n_embd;
    snprintf(s->model_id, sizeof s->model_id, "%s", s->o.alias ? s->o.alias : base ? base + 1 : s->o.model);
    return LLMK_OK;
}

static int start_engine(struct server *s) {
    const struct serve_opts *o = &s->o;
    int32_t train = llmk_model_hparams(s->m)->n_ctx_train;
    s->n_ctx = o->n_ctx ? (int32_t)o->n_ctx : train < SERVE_DEFAULT_CTX ? train : SERVE_DEFAULT_CTX;
    int64_t blocks = o->kv_blocks ? o->kv_blocks
                                  : o->n_parallel * (((int64_t)s->n_ctx + LLMK_KV_BLOCK - 1) / LLMK_KV_BLOCK);
    if (blocks > INT32_MAX) blocks = INT32_MAX;
    llmk_engine_params ep = {.ctx = {.n_seq_max = (int32_t)o->n_parallel, .n_ctx = s->n_ctx,
                                     .n_kv_blocks = (int32_t)blocks, .n_threads = (int32_t)o->threads,
                                     .kv_type = o->kv_type},
                             .step_tokens = (int32_t)o->step_tokens, .max_waiting = (int32_t)o->max_queue};
    int st = llmk_engine_init(s->m, &ep, &s->e);
    if (st == LLMK_OK)
        st = spec_opts_pool(&o->so, s->m, (int32_t)o->threads, (int32_t)o->n_parallel, s->n_ctx, &s->draft, &s->dpool);
    if (st == LLMK_OK) st = embed_start(s);
    if (st != LLMK_OK) return st;
    return sched_start(s);
}

static void set_state(struct server *s, enum serve_state st) {
    pthread_mutex_lock(&s->mu);
    s->state = st;
    pthread_cond_broadcast(&s->cv); /* the engine thread: STOPPING cancels what it runs */
    pthread_mutex_unlock(&s->mu);
}

/* Waits, with s->mu held, until no job is left or the deadline passes. */
static void wait_jobs(struct server *s, double deadline) {
    while (s->n_jobs > 0 && serve_now() < deadline) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&s->jobs_cv, &s->mu, &ts);
    }
}

/* SIGTERM/SIGINT: stop taking requests (503, /health "draining"), let the
 * running ones finish until --drain-timeout, then end the rest (they answer
 * with what they have) and give them a moment to be sent. */
static void drain(struct server *s, int sig) {
    fprintf(stderr, "llmk serve: %s: draining (up to %ld s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
            s->o.drain_timeout_s);
    set_state(s, SERVE_DRAINING);
    pthread_mutex_lock(&s->mu);
    wait_jobs(s, serve_now() + (double)s->o.drain_timeout_s);
    int left = s->n_jobs;
    pthread_mutex_unlock(&s->mu);
    if (left) fprintf(stderr, "llmk serve: drain deadline: ending %d requests\n", left);
    set_state(s, SERVE_STOPPING);
    pthread_mutex_lock(&s->mu);
    wait_jobs(s, serve_now() + 5.0);
    pthread_mutex_unlock(&s->mu);
}

static int serve(struct server *s, const sigset_t *sigs) {
    struct MHD_Daemon *d = NULL;
    char why[256] = "";
    int port = 0, st = http_start(s, &d, &port, why, sizeof why);
    if (st != LLMK_OK) return cli_fail(st, "%s", why);
    bool v6 = strchr(s->o.host, ':') != NULL;
    fprintf(stderr, "llmk serve: listening on http://%s%s%s:%d\n", v6 ? "[" : "", s->o.host, v6 ? "]" : "", port);
    if ((st = load_model(s)) == LLMK_OK) st = start_engine(s);
    if (st == LLMK_OK) {
        set_state(s, SERVE_READY);
        fprintf(stderr, "llmk serve: ready: model %s, %ld sequences of %d tokens\n", s->model_id, s->o.n_parallel,
                s->n_ctx);
        int sig = 0;
        while (sigwait(sigs, &sig) != 0) continue;
        drain(s, sig);
    }
    http_stop(d); /* joins the connection threads; they have all answered by now */
    sched_stop(s);
    return st;
}

int cmd_serve(int argc, char **argv) {
    struct server s = {.o = {.host = "127.0.0.1", .port = 8080, .n_parallel = 4, .timeout_s = 600,
                             .max_body = 8L << 20, .drain_timeout_s = 30, .max_queue = 64,
                             .kv_type = (uint32_t)CLI_KV_DEFAULT}};
    int rc = parse_args(&s.o, argc, argv);
    if (rc != CLI_OPTS_GO) return rc;
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    pthread_cond_init(&s.jobs_cv, NULL);
    /* Signals are taken by sigwait on this thread: blocked here before any
     * thread starts, so every thread inherits the mask. A write to a closed
     * socket must fail with EPIPE, not end the process. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    int st = serve(&s, &sigs);
    rc = st == LLMK_OK ? CLI_EXIT_OK : cli_report(CMD, st);
    llmk_engine_free(s.e);
    embed_stop(&s);
    llmk_draft_pool_free(s.dpool);
    llmk_model_free(s.draft);
    llmk_model_free(s.m);
    free(s.eog);
    pthread_cond_destroy(&s.jobs_cv);
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
    return rc;
}
