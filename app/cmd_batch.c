/* llmk batch: offline generation for many prompts at once, as vLLM's offline
 * LLM.generate, on the continuous-batching engine (src/engine.c,
 * docs/batching.md). The input is JSON lines, one request each; the output is
 * one JSON object per request, in input order.
 *
 * Every line is read, checked and tokenized before anything is generated: a
 * bad line (not JSON, no prompt, a wrong type, a prompt the context cannot
 * hold) fails the whole command with its line number, so an offline batch
 * never stops half way on an input error and no output file is written. */
#include "cli.h"
#include "gen_opts.h"
#include "spec_opts.h"
#include "opts.h"
#include "progress.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char CMD[] = "batch";
static const char USAGE[] =
    "usage: llmk batch -f PROMPTS.jsonl [-o OUT.jsonl] [-m MODEL] [-P N] [-n N] [--temp T] [--seed S]\n"
    "                  [-t THREADS] [--ctx N] [--kv-type f16|q8_0|f32] [--kv-blocks N]\n"
    "  Generates a completion for every line of PROMPTS.jsonl, N at a time (-P) on one\n"
    "  continuous-batching engine, and writes one JSON object per request, in input order.\n"
    "  A line is {\"prompt\": \"text\"} or {\"messages\": [{\"role\": \"user\", \"content\": \"...\"}]}\n"
    "  (the model's chat template, as run --chat), with optional fields \"id\" (any JSON,\n"
    "  echoed), \"max_tokens\", \"temperature\", \"seed\", \"top_k\", \"top_p\", \"min_p\" and\n"
    "  \"stop_token_ids\" (a list of ids), \"grammar\" (GBNF text the output must follow) and\n"
    "  \"json_schema\" (a JSON Schema the output must follow).\n"
    "  Blank lines are skipped; other fields are errors.\n";
static const char EPILOG[] =
    "The flags are every request's defaults (temperature 0.8 as llmk run; --temp 0 is greedy); a line's\n"
    "fields override them. All lines are checked before anything is generated: a bad line fails the\n"
    "command, naming it. Output objects: index (among the requests), id (when given), text, token_ids\n"
    "(an end-of-generation or stop id included, its text not), prompt_tokens, completion_tokens,\n"
    "finish_reason (\"stop\" or \"length\"), seed (when sampling). Progress and a stats line go to stderr:\n"
    "on a terminal one progress line rewritten in place, else a line at every tenth of the requests.\n";

enum { BATCH_MAX_PARALLEL = 1024, BATCH_MAX_TOKENS = 1 << 24 };
#define SEED_MAX 9007199254740992.0 /* 2^53: larger integers do not survive JSON's doubles */

struct batch_opts {
    const char *model, *file, *out;
    long n_predict, threads, n_ctx, n_parallel, kv_blocks, step_tokens;
    uint32_t kv_type;
    bool long_ctx, special;
    bool quiet, verbose; /* --log-disable, -v */
    struct cli_progress_flags pf;
    double load_s;       /* llmk_model_load's time, for -v */
    struct gen_opts go;
    struct cli_opt gen_rows[GEN_OPT_ROWS];
    struct spec_opts so;
};

/* One request: a non-blank line of the input. */
struct req {
    long line;                 /* 1-based, for messages */
    char *id_json;             /* "id" as compact JSON (cJSON_free), or NULL */
    int32_t *prompt;           /* freed once submitted (the engine copies it) */
    size_t n_prompt;
    int32_t *stop;             /* the line's stop_token_ids, then the tokenizer's end-of-generation ids */
    size_t n_stop;
    int32_t max_tokens;
    llmk_sampler_params sp;
    /* from submission until written */
    llmk_sampler *smp;         /* borrowed by the engine until the request finishes */
    llmk_spec *spec;           /* --spec: likewise */
    llmk_grammar *grammar;     /* the line's "grammar" (GBNF), or NULL */
    llmk_grammar_state *gstate; /* attached to smp; freed with it */
    uint64_t seed;
    int32_t *gen, n_gen, cap;
    enum llmk_finish finish;
    bool grammar_end;          /* it ended by completing its grammar: the last token is text, not a stop id */
    bool done;
    struct req *next_done;     /* finished in the step now ending */
};

struct batch {
    const struct batch_opts *o;
    const llmk_model *m;
    const llmk_tokenizer *tok;
    size_t n_vocab;
    int32_t *eog;
    size_t n_eog;
    struct req *reqs;
    size_t n_reqs;
    int32_t n_ctx;
    llmk_engine *e;
    llmk_model *draft;        /* --spec draft: the draft model, behind dpool */
    llmk_draft_pool *dpool;
    llmk_spec_params spp;     /* each request's drafter */
    FILE *out;
    struct req *done_list;
    size_t next_submit, next_out, n_finished;
    int64_t n_generated;
    int fail_status; /* a request's LLMK_FINISH_ERROR status (on_token records the line) */
    long fail_line;
    int32_t fail_gen;    /* tokens it had */
    char fail_why[256];  /* the evaluation's message, if one was seen */
    char *text; /* one token's text */
    size_t text_cap;
    double t0;
    struct cli_progress prog; /* the line rewritten in place (a terminal, or --progress) */
    int tenths_shown;         /* otherwise a line at every tenth of the requests */
    llmk_spec_stats spec;     /* summed over finished requests */
};

/* Adds a finished request's speculation figures to the run's. */
static void spec_account(struct batch *b, const llmk_spec *spec) {
    llmk_spec_stats s;
    if (!spec || llmk_spec_stats_get(spec, &s) != LLMK_OK) return;
    b->spec.n_steps += s.n_steps, b->spec.n_drafted += s.n_drafted;
    b->spec.n_accepted += s.n_accepted, b->spec.n_tokens += s.n_tokens;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- options --------------------------------------------------------------- */

/* The generation flags, as every request's defaults: run's, less --stop (stop
 * strings are not matched here; stop_token_ids are) and --system (a
 * messages line carries its own). */
static struct cli_opt_section batch_gen_section(struct batch_opts *o) {
    struct cli_opt_section s = gen_opts_section(&o->go);
    size_t n = 0;
    for (size_t i = 0; i < s.n; i++) {
        const char *name = s.rows[i].name ? s.rows[i].name : "";
        if (!strcmp(name, "--stop") || !strcmp(name, "--system") || !strcmp(name, "--grammar") ||
            !strcmp(name, "--grammar-file") || !strcmp(name, "--json-schema") || !strcmp(name, "--json-schema-file"))
            continue; /* a line's own "grammar" / "json_schema" field constrains it */
        o->gen_rows[n] = s.rows[i];
        if (!strcmp(name, "--seed"))
            o->gen_rows[n].help = "RNG seed of every request (default -1: a random one each, reported as its "
                                  "\"seed\")";
        n++;
    }
    return (struct cli_opt_section){"sampling, every request's defaults (see docs/sampling.md):", o->gen_rows, n};
}

static int parse_args(struct batch_opts *o, int argc, char **argv) {
    const struct cli_opt table[] = {
        CLI_STR("--file", 'f', &o->file, "FILE", "the requests, one JSON object per line ('-': standard input)"),
        CLI_STR("--output", 'o', &o->out, "FILE", "write the results here (whole or not at all) instead of stdout"),
        CLI_OPT_MODEL(&o->model),
        CLI_LONG("--parallel", 'P', &o->n_parallel, 1, BATCH_MAX_PARALLEL, "N",
                 "requests running at once (sequence slots; default 16)"),
        CLI_LONG("--n-predict", 'n', &o->n_predict, 1, BATCH_MAX_TOKENS, "N",
                 "tokens to generate per request at most, unless its line says \"max_tokens\" (default 128)"),
        CLI_OPT_THREADS(&o->threads),
        CLI_OPT_CTX(&o->n_ctx, "tokens of one request at most (default: the longest prompt + max_tokens, at "
                               "most the model's)"),
        CLI_OPT_KV_TYPE(&o->kv_type, CLI_KV_TYPE_HELP),
        CLI_LONG("--kv-blocks", 0, &o->kv_blocks, 1, INT32_MAX, "N",
                 "KV pool of N blocks of 128 positions shared by all requests (default: room for the -P "
                 "largest requests at once); a smaller pool preempts and recomputes"),
        CLI_LONG("--step-tokens", 0, &o->step_tokens, 1, 8192, "N",
                 "tokens per engine step: decode rows plus prompt chunks (default 512)"),
        CLI_OPT_LONG_CTX(&o->long_ctx),
        CLI_FLAG("--special", 0, &o->special, "recognise special-token texts (<|im_start|>) in \"prompt\" lines"),
        CLI_OPT_LOG_DISABLE(&o->quiet, "no progress or stats lines on stderr (errors still)"),
        CLI_OPT_VERBOSE(&o->verbose, "the load's times, kernels and threads, and the KV pool, on stderr"),
        CLI_OPT_PROGRESS(&o->pf),
    };
    const struct cli_opt_section sections[] = {{NULL, table, CLI_LEN(table)}, batch_gen_section(o),
                                               spec_opts_section(&o->so)};
    struct cli_cmd spec = {.name = CMD, .usage = USAGE, .epilog = EPILOG, .sections = sections,
                           .n_sections = CLI_LEN(sections)};
    int rc = cli_opts_parse(&spec, argc, argv);
    if (rc != CLI_OPTS_GO || (rc = spec_opts_check(CMD, &o->so)) != CLI_OPTS_GO) return rc;
    if (!o->file) return cli_usage_error(CMD, "-f FILE (the requests, JSON lines) is required");
    if (!o->model) o->model = cli_default_model();
    o->kv_type = cli_kv_type_or_default(o->kv_type, LLMK_PATH_FAST);
    if (o->quiet) o->verbose = false; /* --log-disable wins, as in run and chat */
    return CLI_OPTS_GO;
}

/* ---- reading the requests ------------------------------------------------------- */

/* A failure of one input line: "FILE line N: ..." with the given status. */
static int bad_line(const struct batch *b, long line, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static int bad_line(const struct batch *b, long line, int status, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cli_fail(status, "%s line %ld: %s", b->o->file, line, msg);
}

static const char *json_kind(const cJSON *j) {
    return cJSON_IsString(j) ? "a string" : cJSON_IsNumber(j) ? "a number" : cJSON_IsBool(j) ? "a boolean"
           : cJSON_IsNull(j) ? "null" : cJSON_IsArray(j) ? "an array" : "an object";
}

/* Optional number field `key` in [lo, hi] (integer: a whole number). */
static int num_field(const struct batch *b, const struct req *r, const cJSON *j, const char *key, double lo,
                     double hi, bool integer, double *out, bool *given) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    *given = v != NULL;
    if (!v) return LLMK_OK;
    const char *what = integer ? "an integer" : "a number";
    if (!cJSON_IsNumber(v)) return bad_line(b, r->line, LLMK_BAD_REQUEST, "\"%s\" must be %s, got %s", key, what,
                                            json_kind(v));
    double d = v->valuedouble;
    if (!isfinite(d) || (integer && d != floor(d)) || d < lo || d > hi)
        return bad_line(b, r->line, LLMK_BAD_REQUEST, "\"%s\" must be %s in [%.17g, %.17g], got %.17g", key, what,
                        lo, hi, d);
    *out = d;
    return LLMK_OK;
}

/* The line's stop_token_ids, then the tokenizer's end-of-generation ids. */
static int stop_field(const struct batch *b, struct req *r, const cJSON *j) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "stop_token_ids");
    if (v && !cJSON_IsArray(v))
        return bad_line(b, r->line, LLMK_BAD_REQUEST, "\"stop_token_ids\" must be an array of token ids, got %s",
                        json_kind(v));
    size_t n = v ? (size_t)cJSON_GetArraySize(v) : 0;
    if (!(r->stop = malloc((n + b->n_eog + 1) * sizeof *r->stop))) return cli_fail(LLMK_OUT_OF_MEMORY, "stop ids");
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        double d = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (d != floor(d) || d < 0 || d >= (double)b->n_vocab)
            return bad_line(b, r->line, LLMK_BAD_REQUEST, "\"stop_token_ids\"[%zu] must be a token id in [0, %zu)",
                            r->n_stop, b->n_vocab);
        r->stop[r->n_stop++] = (int32_t)d;
    }
    memcpy(r->stop + r->n_stop, b->eog, b->n_eog * sizeof *b->eog);
    r->n_stop += b->n_eog;
    return LLMK_OK;
}

/* id, max_tokens, the sampling overrides, the stop ids. */
static int line_fields(const struct batch *b, struct req *r, const cJSON *j) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
    if (id && !(r->id_json = cJSON_PrintUnformatted(id))) return cli_fail(LLMK_OUT_OF_MEMORY, "line id");
    double v;
    bool given;
    int st;
    r->max_tokens = (int32_t)b->o->n_predict;
    if ((st = num_field(b, r, j, "max_tokens", 1, BATCH_MAX_TOKENS, true, &v, &given)) != LLMK_OK) return st;
    if (given) r->max_tokens = (int32_t)v;
    gen_sampler_params(&b->o->go, &r->sp);
    if ((st = num_field(b, r, j, "temperature", 0, 1e6, false, &v, &given)) != LLMK_OK) return st;
    if (given) r->sp.temperature = v;
    if ((st = num_field(b, r, j, "seed", -1, SEED_MAX, true, &v, &given)) != LLMK_OK) return st;
    if (given) r->sp.seed = (int64_t)v;
    if ((st = num_field(b, r, j, "top_k", 0, INT32_MAX, true, &v, &given)) != LLMK_OK) return st;
    if (given) r->sp.top_k = (int32_t)v;
    if ((st = num_field(b, r, j, "top_p", 0, 1, false, &v, &given)) != LLMK_OK) return st;
    if (given) r->sp.top_p = v;
    if ((st = num_field(b, r, j, "min_p", 0, 1, false, &v, &given)) != LLMK_OK) return st;
    if (given) r->sp.min_p = v;
    llmk_sampler *s = NULL; /* the whole chain checked now, not when its turn comes */
    if ((st = llmk_sampler_init(&r->sp, b->n_vocab, &s)) != LLMK_OK)
        return bad_line(b, r->line, st, "%s", llmk_last_error());
    llmk_sampler_free(s);
    const cJSON *gr = cJSON_GetObjectItemCaseSensitive(j, "grammar");
    if (gr && !cJSON_IsString(gr))
        return bad_line(b, r->line, LLMK_BAD_REQUEST, "\"grammar\" must be a string (GBNF), got %s", json_kind(gr));
    if (gr && (st = llmk_grammar_parse(gr->valuestring, strlen(gr->valuestring), &r->grammar)) != LLMK_OK)
        return bad_line(b, r->line, st, "\"grammar\": %s", llmk_last_error());
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(j, "json_schema");
    if (js && gr) return bad_line(b, r->line, LLMK_BAD_REQUEST, "give \"grammar\" or \"json_schema\", not both");
    if (js && !cJSON_IsObject(js) && !cJSON_IsBool(js))
        return bad_line(b, r->line, LLMK_BAD_REQUEST, "\"json_schema\" must be a schema (an object), got %s",
                        json_kind(js));
    if (js) {
        char *text = cJSON_PrintUnformatted(js);
        st = text ? gen_schema_grammar(text, strlen(text), &r->grammar) : LLMK_OUT_OF_MEMORY;
        free(text);
        if (st != LLMK_OK) return bad_line(b, r->line, st, "\"json_schema\": %s", llmk_last_error());
    }
    return stop_field(b, r, j);
}

static int tokenize(const llmk_tokenizer *t, const char *s, bool add_bos, bool special, int32_t **ids, size_t *n) {
    size_t len = strlen(s), cap = len + 8;
    for (int pass = 0; pass < 2; pass++) {
        int32_t *v = malloc(cap * sizeof *v);
        if (!v) return cli_fail(LLMK_OUT_OF_MEMORY, "prompt of %zu bytes", len);
        int st = llmk_tokenize(t, s, len, add_bos, special, v, cap, n);
        if (st == LLMK_OK) {
            *ids = v;
            return LLMK_OK;
        }
        free(v);
        if (st != LLMK_BUFFER_TOO_SMALL) return st;
        cap = *n;
    }
    return cli_fail(LLMK_BUFFER_TOO_SMALL, "prompt of %zu bytes: token count changed between passes", len);
}

/* The prompt's token ids: "prompt" as given (BOS as run -p), or "messages"
 * through the model's chat template (as run --chat). */
static int line_prompt(const struct batch *b, struct req *r, const cJSON *j, const char *text, size_t len) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "prompt");
    bool add_bos = llmk_tokenizer_add_bos(b->tok), special = b->o->special;
    char *chat = NULL;
    int st;
    if (p && !cJSON_IsString(p))
        return bad_line(b, r->line, LLMK_BAD_REQUEST, "\"prompt\" must be a string, got %s", json_kind(p));
    if (!p) {
        llmk_chat_message *msgs = NULL;
        size_t n = 0;
        if ((st = llmk_chat_parse_messages(text, len, &msgs, &n)) != LLMK_OK)
            return bad_line(b, r->line, st, "%s", llmk_last_error());
        if (n == 0) st = bad_line(b, r->line, LLMK_BAD_REQUEST, "\"messages\" is empty");
        else if ((st = gen_chat_messages(llmk_model_gguf(b->m), b->tok, b->o->go.chat_template,
                                         b->o->go.reasoning_effort, msgs, n, &chat, &add_bos)) != LLMK_OK)
            st = bad_line(b, r->line, st, "%s", llmk_last_error());
        free(msgs);
        if (st != LLMK_OK) return st;
        special = true; /* the template's own markers */
    }
    st = tokenize(b->tok, chat ? chat : p->valuestring, add_bos, special, &r->prompt, &r->n_prompt);
    free(chat);
    if (st != LLMK_OK) return bad_line(b, r->line, st, "tokenizing the prompt: %s", llmk_last_error());
    if (r->n_prompt == 0) return bad_line(b, r->line, LLMK_BAD_REQUEST, "the prompt has no tokens");
    return LLMK_OK;
}

/* An object with exactly one of "prompt" and "messages" and no unknown
 * field (a misspelt "max_token" must not silently mean 128). */
static int check_keys(const struct batch *b, const struct req *r, const cJSON *j) {
    static const char *const known[] = {"prompt", "messages", "id", "max_tokens", "temperature",
                                        "seed", "top_k", "top_p", "min_p", "stop_token_ids", "grammar",
                                        "json_schema"};
    if (!cJSON_IsObject(j))
        return bad_line(b, r->line, LLMK_BAD_REQUEST, "expected a JSON object, got %s", json_kind(j));
    const cJSON *it;
    cJSON_ArrayForEach(it, j) {
        size_t k = 0;
        while (k < CLI_LEN(known) && strcmp(it->string, known[k])) k++;
        if (k == CLI_LEN(known))
            return bad_line(b, r->line, LLMK_BAD_REQUEST, "unknown field \"%.60s\" (known: prompt, messages, id, "
                            "max_tokens, temperature, seed, top_k, top_p, min_p, stop_token_ids, grammar, json_schema)", it->string);
    }
    bool has_p = cJSON_HasObjectItem(j, "prompt"), has_m = cJSON_HasObjectItem(j, "messages");
    if (has_p && has_m)
        return bad_line(b, r->line, LLMK_BAD_REQUEST, "has both \"prompt\" and \"messages\"; give one");
    if (!has_p && !has_m)
        return bad_line(b, r->line, LLMK_BAD_REQUEST, "needs \"prompt\" (a string) or \"messages\" (an array)");
    return LLMK_OK;
}

static int parse_line(const struct batch *b, struct req *r, const char *text, size_t len) {
    size_t nul = cli_json_nul_escape(text, len);
    if (nul < len)
        return bad_line(b, r->line, LLMK_BAD_REQUEST, "\\u0000 (NUL) at byte %zu: a C string cannot hold it", nul);
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!j) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= text && at <= text + len ? (size_t)(at - text) : len;
        return bad_line(b, r->line, LLMK_BAD_REQUEST, "not valid JSON (near byte %zu of %zu)", off, len);
    }
    size_t rest = end && end >= text && end <= text + len ? (size_t)(end - text) : len;
    while (rest < len && (text[rest] == ' ' || text[rest] == '\t' || text[rest] == '\r')) rest++;
    int st = rest < len ? bad_line(b, r->line, LLMK_BAD_REQUEST, "text after the JSON object at byte %zu", rest)
                        : check_keys(b, r, j);
    if (st == LLMK_OK) st = line_fields(b, r, j);
    if (st == LLMK_OK) st = line_prompt(b, r, j, text, len);
    cJSON_Delete(j);
    return st;
}

static bool blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return false;
    return true;
}

/* Every non-blank line of buf, checked and tokenized. */
static int read_requests(struct batch *b, const char *buf, size_t len) {
    size_t max_lines = 1;
    for (size_t i = 0; i < len; i++) max_lines += buf[i] == '\n';
    if (!(b->reqs = calloc(max_lines, sizeof *b->reqs))) return cli_fail(LLMK_OUT_OF_MEMORY, "%zu lines", max_lines);
    long line = 0;
    for (const char *p = buf, *end = buf + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        line++;
        if (!blank(p, n)) {
            struct req *r = &b->reqs[b->n_reqs++];
            r->line = line;
            int st = parse_line(b, r, p, n);
            if (st != LLMK_OK) return st;
        }
        p += n + 1;
    }
    return LLMK_OK;
}

/* ---- the engine ------------------------------------------------------------------ */

static int64_t req_tokens(const struct req *r, int32_t n_ctx) {
    int64_t t = (int64_t)r->n_prompt + r->max_tokens;
    return t < n_ctx ? t : n_ctx;
}

static int cmp_desc(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

/* The default pool: the blocks of the n_seq largest requests together, so
 * any n_seq of them run to the end side by side (no preemption) without
 * reserving every slot for the longest one. */
static int default_blocks(const struct batch *b, int32_t n_seq, int32_t *out) {
    int64_t *need = malloc(b->n_reqs * sizeof *need), sum = 0;
    if (!need) return cli_fail(LLMK_OUT_OF_MEMORY, "block counts of %zu requests", b->n_reqs);
    for (size_t i = 0; i < b->n_reqs; i++)
        need[i] = (req_tokens(&b->reqs[i], b->n_ctx) + LLMK_KV_BLOCK - 1) / LLMK_KV_BLOCK;
    qsort(need, b->n_reqs, sizeof *need, cmp_desc);
    for (size_t i = 0; i < b->n_reqs && i < (size_t)n_seq; i++) sum += need[i];
    free(need);
    *out = sum > INT32_MAX ? INT32_MAX : (int32_t)sum;
    return LLMK_OK;
}

/* The context (-c, or what the longest request needs, at most the model's
 * training length), checked against every prompt before anything runs. */
static int choose_ctx(struct batch *b) {
    const struct batch_opts *o = b->o;
    int64_t n_ctx = o->n_ctx;
    if (!n_ctx) {
        for (size_t i = 0; i < b->n_reqs; i++) {
            int64_t t = (int64_t)b->reqs[i].n_prompt + b->reqs[i].max_tokens;
            if (t > n_ctx) n_ctx = t;
        }
        int32_t train = llmk_model_hparams(b->m)->n_ctx_train;
        if (n_ctx > train) n_ctx = train;
    }
    for (size_t i = 0; i < b->n_reqs; i++)
        if ((int64_t)b->reqs[i].n_prompt >= n_ctx)
            return bad_line(b, b->reqs[i].line, LLMK_CONTEXT_FULL,
                            "the prompt has %zu tokens; a context of %lld (%s) leaves no room to generate",
                            b->reqs[i].n_prompt, (long long)n_ctx,
                            o->n_ctx ? "--ctx" : "the model's training length; see --ctx");
    b->n_ctx = (int32_t)n_ctx;
    return LLMK_OK;
}

static int start_engine(struct batch *b) {
    const struct batch_opts *o = b->o;
    int st = choose_ctx(b);
    if (st != LLMK_OK) return st;
    int32_t n_seq = (size_t)o->n_parallel < b->n_reqs ? (int32_t)o->n_parallel : (int32_t)b->n_reqs, blocks = 0;
    if (o->kv_blocks) blocks = (int32_t)o->kv_blocks;
    else if ((st = default_blocks(b, n_seq, &blocks)) != LLMK_OK) return st;
    /* max_waiting = n_seq: a slot that frees finds a successor waiting, and
     * at most 2 n_seq samplers are alive at once whatever the input's size. */
    llmk_engine_params ep = {.ctx = {.n_seq_max = n_seq, .n_ctx = b->n_ctx, .n_kv_blocks = blocks,
                                     .n_threads = (int32_t)o->threads, .kv_type = o->kv_type,
                                     .allow_long_ctx = o->long_ctx},
                             .step_tokens = (int32_t)o->step_tokens, .max_waiting = n_seq};
    if (o->long_ctx) cli_warn_long_ctx(CMD, b->m, b->n_ctx);
    struct cli_progress load; /* drawn once the init (the repacking) has taken a second */
    cli_progress_start(&load, CMD, cli_progress_wanted(&o->pf, o->quiet), 1.0);
    ep.ctx.progress_callback = cli_progress_load, ep.ctx.progress_callback_user_data = &load;
    double t_init = now_s();
    st = llmk_engine_init(b->m, &ep, &b->e);
    cli_progress_clear(&load);
    if (st == LLMK_OK)
        st = spec_opts_pool(&o->so, b->m, (int32_t)o->threads, n_seq, b->n_ctx, &b->draft, &b->dpool);
    if (st != LLMK_OK) return st;
    b->spp = o->so.p;
    b->spp.draft_pool = b->dpool;
    const llmk_context *c = llmk_engine_context(b->e);
    llmk_kv_info kv;
    if ((st = llmk_context_kv_info(c, &kv)) != LLMK_OK) return st;
    if (o->verbose) {
        cli_log_load(CMD, o->load_s, now_s() - t_init, llmk_context_kernels(c), llmk_context_n_threads(c),
                     o->kv_type);
        fprintf(stderr, "llmk batch: %d requests at once, KV pool of %d blocks of %d positions (%.1f MiB), context "
                "%d tokens\n", n_seq, kv.n_blocks, kv.block_size, kv.pool_bytes / 1048576.0, b->n_ctx);
    }
    for (size_t i = 0; i < b->n_reqs; i++) {
        const struct req *r = &b->reqs[i];
        int64_t t = req_tokens(r, b->n_ctx), need = (t + kv.block_size - 1) / kv.block_size;
        if (need > kv.n_blocks)
            return bad_line(b, r->line, LLMK_CACHE_CAPACITY_EXCEEDED,
                            "%lld tokens (prompt %zu + up to %d generated) need %lld KV blocks of %d; the pool "
                            "has %d (--kv-blocks)", (long long)t, r->n_prompt, r->max_tokens, (long long)need,
                            kv.block_size, kv.n_blocks);
    }
    return LLMK_OK;
}

/* ---- generating -------------------------------------------------------------------- */

static int on_token(void *user, const llmk_token_event *ev) {
    struct batch *b = user;
    struct req *r = ev->user;
    if (ev->finish != LLMK_FINISH_ERROR) {
        if (r->n_gen < r->cap) r->gen[r->n_gen++] = ev->token;
        b->n_generated++;
    }
    if (ev->finish != LLMK_FINISH_NONE) {
        r->finish = ev->finish;
        r->grammar_end = ev->finish == LLMK_FINISH_STOP && r->gstate && llmk_grammar_state_done(r->gstate) &&
                         !llmk_tokenizer_is_eog(b->tok, ev->token);
        /* The earliest line of a failed step is named, with the
         * evaluation's own message (which phase saw a NaN). */
        if (ev->finish == LLMK_FINISH_ERROR) {
            if (!b->fail_status || r->line < b->fail_line) {
                b->fail_status = ev->status ? ev->status : LLMK_INVALID_ARGUMENT;
                b->fail_line = r->line;
                b->fail_gen = r->n_gen;
            }
            if (r->line == b->fail_line) snprintf(b->fail_why, sizeof b->fail_why, "%s", ev->message);
        }
        r->done = true;
        r->next_done = b->done_list;
        b->done_list = r;
        b->n_finished++;
    }
    return 0;
}

/* Submits requests in input order until the engine's queue is full. */
static int submit_more(struct batch *b) {
    while (b->next_submit < b->n_reqs) {
        struct req *r = &b->reqs[b->next_submit];
        int st;
        if (!r->smp && (st = llmk_sampler_init(&r->sp, b->n_vocab, &r->smp)) != LLMK_OK)
            return bad_line(b, r->line, st, "%s", llmk_last_error());
        if (r->grammar && !r->gstate &&
            ((st = llmk_grammar_state_init(r->grammar, b->tok, &r->gstate)) != LLMK_OK ||
             (st = llmk_sampler_set_grammar(r->smp, r->gstate)) != LLMK_OK))
            return bad_line(b, r->line, st, "\"grammar\": %s", llmk_last_error());
        if (spec_opts_on(&b->o->so) && !r->spec && (st = llmk_spec_init(b->m, &b->spp, &r->spec)) != LLMK_OK)
            return st;
        int64_t room = b->n_ctx - (int64_t)r->n_prompt;
        r->cap = r->max_tokens < room ? r->max_tokens : (int32_t)room;
        if (!r->gen && !(r->gen = malloc((size_t)r->cap * sizeof *r->gen)))
            return cli_fail(LLMK_OUT_OF_MEMORY, "%d generated ids", r->cap);
        llmk_request q = {.prompt = r->prompt, .n_prompt = r->n_prompt, .max_tokens = r->max_tokens,
                          .sampler = r->smp, .stop_ids = r->stop, .n_stop = r->n_stop, .user = r,
                          .spec = r->spec};
        int64_t id;
        st = llmk_engine_submit(b->e, &q, &id);
        if (st == LLMK_QUEUE_FULL) return LLMK_OK;
        if (st != LLMK_OK) return bad_line(b, r->line, st, "%s", llmk_last_error());
        r->seed = llmk_sampler_seed(r->smp);
        free(r->prompt), free(r->stop); /* copied by submit */
        r->prompt = r->stop = NULL;
        b->next_submit++;
    }
    return LLMK_OK;
}

/* Text as a JSON string's contents (the detokenizer's output is valid UTF-8). */
static void json_text(FILE *f, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
}

/* One result line. The text is that of `llmk run`: an ending stop or
 * end-of-generation token is in token_ids but adds no text. */
static int write_result(struct batch *b, const struct req *r, size_t index) {
    FILE *f = b->out;
    fprintf(f, "{\"index\": %zu", index);
    if (r->id_json) fprintf(f, ", \"id\": %s", r->id_json);
    fputs(", \"text\": \"", f);
    llmk_detok_state ds = {0};
    int32_t n_text = r->n_gen - (r->finish == LLMK_FINISH_STOP && !r->grammar_end && r->n_gen > 0);
    size_t nt = 0;
    int st = LLMK_OK;
    for (int32_t i = 0; i < n_text && st == LLMK_OK; i++) {
        st = llmk_detok_feed(b->tok, &ds, r->gen[i], false, b->text, b->text_cap, &nt);
        if (st == LLMK_OK) json_text(f, b->text, nt);
    }
    if (st == LLMK_OK && (st = llmk_detok_flush(b->tok, &ds, b->text, b->text_cap, &nt)) == LLMK_OK)
        json_text(f, b->text, nt);
    if (st != LLMK_OK) return bad_line(b, r->line, st, "detokenizing: %s", llmk_last_error());
    fputs("\", \"token_ids\": [", f);
    for (int32_t i = 0; i < r->n_gen; i++) fprintf(f, "%s%d", i ? ", " : "", r->gen[i]);
    fprintf(f, "], \"prompt_tokens\": %zu, \"completion_tokens\": %d, \"finish_reason\": \"%s\"", r->n_prompt,
            r->n_gen, r->finish == LLMK_FINISH_STOP ? "stop" : "length");
    if (r->sp.temperature > 0) fprintf(f, ", \"seed\": %llu", (unsigned long long)r->seed);
    fputs("}\n", f);
    return LLMK_OK;
}

/* Writes the finished requests that are next in input order. */
static int write_ready(struct batch *b) {
    while (b->next_out < b->n_reqs && b->reqs[b->next_out].done) {
        struct req *r = &b->reqs[b->next_out];
        int st = write_result(b, r, b->next_out);
        if (st != LLMK_OK) return st;
        free(r->gen);
        cJSON_free(r->id_json);
        r->gen = NULL, r->id_json = NULL;
        b->next_out++;
    }
    fflush(b->out);
    if (ferror(b->out))
        return b->out == stdout ? cli_stdout_status() : cli_fail(LLMK_IO_ERROR, "writing %s failed", b->o->out);
    return LLMK_OK;
}

/* Requests done / total, tokens, tok/s: rewritten in place on a terminal
 * (erased at the end: the stats line follows), else a line at every tenth
 * of the requests. */
static void progress(struct batch *b) {
    if (b->o->quiet) return;
    double el = now_s() - b->t0, rate = el > 0 ? (double)b->n_generated / el : 0.0;
    if (b->prog.on) {
        if (b->n_finished == b->n_reqs) cli_progress_clear(&b->prog);
        else cli_progress_show(&b->prog, "%zu/%zu requests, %lld tokens generated, %.1f tok/s", b->n_finished,
                               b->n_reqs, (long long)b->n_generated, rate);
        return;
    }
    int tenths = (int)(b->n_finished * 10 / b->n_reqs);
    if (tenths <= b->tenths_shown) return;
    b->tenths_shown = tenths;
    fprintf(stderr, "llmk batch: %zu/%zu requests, %lld tokens generated, %.1f tok/s\n", b->n_finished, b->n_reqs,
            (long long)b->n_generated, rate);
}

static int generate(struct batch *b) {
    while (b->next_out < b->n_reqs) {
        int st = submit_more(b);
        if (st != LLMK_OK) return st;
        if (llmk_engine_idle(b->e))
            return cli_fail(LLMK_INVALID_ARGUMENT, "the engine is idle with %zu requests unfinished",
                            b->n_reqs - b->n_finished);
        if ((st = llmk_engine_step(b->e, on_token, b)) != LLMK_OK) return st;
        for (struct req *r = b->done_list; r; r = r->next_done) {
            llmk_sampler_free(r->smp); /* the engine is done with it */
            r->smp = NULL;
            llmk_grammar_state_free(r->gstate);
            llmk_grammar_free(r->grammar);
            r->gstate = NULL, r->grammar = NULL;
            spec_account(b, r->spec);
            llmk_spec_free(r->spec);
            r->spec = NULL;
        }
        b->done_list = NULL;
        if (b->fail_status)
            return cli_fail(b->fail_status, "%s line %ld: generation failed after %d tokens%s%s%s", b->o->file,
                            b->fail_line, b->fail_gen, *b->fail_why ? " (the step's evaluation: " : "",
                            b->fail_why, *b->fail_why ? ")" : "");
        if ((st = write_ready(b)) != LLMK_OK) return st;
        progress(b);
    }
    return LLMK_OK;
}

static void print_stats(const struct batch *b) {
    if (b->o->quiet) return;
    llmk_engine_stats s = {0};
    if (b->e) llmk_engine_stats_get(b->e, &s);
    double el = now_s() - b->t0;
    fprintf(stderr,
            "llmk batch: %zu requests, prompt %lld tokens (%lld cached), generated %lld tokens, %lld preemptions "
            "(%lld tokens recomputed), %lld steps, %.2f s, %.1f tok/s\n",
            b->n_reqs, (long long)s.prompt_tokens, (long long)s.cached_tokens, (long long)s.generated_tokens,
            (long long)s.n_preempted, (long long)s.recomputed_tokens, (long long)s.n_steps, el,
            el > 0 ? (double)s.generated_tokens / el : 0.0);
    if (spec_opts_on(&b->o->so))
        fprintf(stderr, "llmk batch: speculative %s: %lld/%lld drafted tokens accepted (%.1f%%), %.2f tokens per "
                "decode step\n", spec_opts_mode_name(&b->o->so), (long long)b->spec.n_accepted, (long long)b->spec.n_drafted,
                b->spec.n_drafted ? 100.0 * (double)b->spec.n_accepted / (double)b->spec.n_drafted : 0.0,
                b->spec.n_steps ? (double)b->spec.n_tokens / (double)b->spec.n_steps : 0.0);
}

/* ---- the command --------------------------------------------------------------------- */

/* Tokenizer, its end-of-generation ids (they end a request as `llmk run`
 * stops on them) and a buffer for one token's text. */
static int batch_init(struct batch *b, const llmk_model *m) {
    b->m = m;
    int st = llmk_model_tokenizer(m, &b->tok);
    if (st != LLMK_OK) return st;
    b->n_vocab = llmk_tokenizer_n_vocab(b->tok);
    if (b->n_vocab != (size_t)llmk_model_hparams(m)->n_vocab)
        return cli_fail(LLMK_TOKENIZER_BAD_DATA, "the tokenizer has %zu tokens, the model %d", b->n_vocab,
                        llmk_model_hparams(m)->n_vocab);
    b->text_cap = 64;
    for (int32_t i = 0; i < (int32_t)b->n_vocab; i++) {
        size_t len = 0;
        if (llmk_tokenizer_piece(b->tok, i, &len) && len + 16 > b->text_cap) b->text_cap = len + 16;
        b->n_eog += llmk_tokenizer_is_eog(b->tok, i);
    }
    b->eog = malloc((b->n_eog + 1) * sizeof *b->eog);
    b->text = malloc(b->text_cap);
    if (!b->eog || !b->text) return cli_fail(LLMK_OUT_OF_MEMORY, "text buffer");
    size_t k = 0;
    for (int32_t i = 0; i < (int32_t)b->n_vocab; i++)
        if (llmk_tokenizer_is_eog(b->tok, i)) b->eog[k++] = i;
    cli_progress_start(&b->prog, CMD, cli_progress_wanted(&b->o->pf, b->o->quiet), 0);
    return LLMK_OK;
}

static void batch_free(struct batch *b) {
    llmk_engine_free(b->e); /* first: it borrows the samplers */
    for (size_t i = 0; b->reqs && i < b->n_reqs; i++) {
        struct req *r = &b->reqs[i];
        cJSON_free(r->id_json);
        free(r->prompt), free(r->stop), free(r->gen);
        llmk_sampler_free(r->smp);
        llmk_grammar_state_free(r->gstate);
        llmk_grammar_free(r->grammar);
        llmk_spec_free(r->spec);
    }
    llmk_draft_pool_free(b->dpool); /* after every drafter that takes its sequences */
    llmk_model_free(b->draft);
    free(b->reqs), free(b->eog), free(b->text);
}

int cmd_batch(int argc, char **argv) {
    struct batch_opts o = {.n_predict = 128, .n_parallel = 16, .kv_type = (uint32_t)CLI_KV_DEFAULT};
    gen_opts_default(&o.go, 0.8);
    spec_opts_default(&o.so);
    int rc = parse_args(&o, argc, argv);
    if (rc != CLI_OPTS_GO) return rc;
    rc = CLI_EXIT_OK;
    struct batch b = {.o = &o, .out = stdout};
    llmk_model *m = NULL;
    llmk_outfile *of = NULL;
    char *buf = NULL;
    size_t len = 0;
    const char *inputs[] = {o.file, o.model};
    int st;
    /* an output that is an input is refused before any work, not after it */
    if (o.out && (st = llmk_output_check(o.out, inputs, CLI_LEN(inputs))) != LLMK_OK) goto fail;
    if ((st = cli_read_file(o.file, &buf, &len)) != LLMK_OK) goto fail;
    double t_load = now_s();
    if ((st = llmk_model_load(o.model, &m)) != LLMK_OK) goto fail;
    o.load_s = now_s() - t_load;
    if ((st = batch_init(&b, m)) != LLMK_OK) goto fail;
    if ((st = read_requests(&b, buf, len)) != LLMK_OK) goto fail;
    free(buf);
    buf = NULL;
    if (b.n_reqs && (st = start_engine(&b)) != LLMK_OK) goto fail;
    if (o.out) {
        if ((st = cli_outfile_open(o.out, inputs, CLI_LEN(inputs), &of)) != LLMK_OK) goto fail;
        b.out = llmk_outfile_stream(of);
    }
    b.t0 = now_s();
    if ((st = generate(&b)) != LLMK_OK) goto fail;
    if (of) {
        st = cli_outfile_commit(of); /* a write error seen on the stream fails here */
        of = NULL;
        if (st != LLMK_OK) goto fail;
    }
    print_stats(&b);
    goto done;
fail:
    cli_progress_clear(&b.prog);
    rc = cli_report(CMD, st);
done:
    if (of) cli_outfile_discard(of); /* the temporary file only: OUT keeps what it had */
    batch_free(&b);
    llmk_model_free(m);
    free(buf);
    return rc;
}
