/* Generation flags and the pick-and-print helpers shared by run and chat. */
#include "gen_opts.h"

#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void gen_opts_default(struct gen_opts *o, double temperature) {
    memset(o, 0, sizeof *o);
    llmk_sampler_params_default(&o->sp);
    o->sp.temperature = temperature;
}

/* --logit-bias ID=BIAS, appended to the sampler's list. */
static int opt_bias(const char *cmd, const char *flag, const char *v, void *ctx) {
    struct gen_opts *o = ctx;
    llmk_sampler_params *p = &o->sp;
    if (p->n_bias == GEN_MAX_BIAS) return cli_usage_error(cmd, "at most %d %s flags", GEN_MAX_BIAS, flag), 0;
    char *end;
    errno = 0;
    long id = strtol(v, &end, 10);
    if (end == v || *end != '=' || errno || id < 0 || id > INT32_MAX)
        return cli_usage_error(cmd, "%s expects ID=BIAS, got '%s'", flag, v), 0;
    const char *bs = end + 1;
    double bias;
    if (!strcmp(bs, "-inf") || !strcmp(bs, "-INF")) {
        bias = -INFINITY;
    } else {
        errno = 0;
        bias = strtod(bs, &end);
        if (!*bs || *end || errno || !isfinite(bias))
            return cli_usage_error(cmd, "%s expects ID=BIAS with a finite BIAS or -inf, got '%s'", flag, v), 0;
    }
    o->bias[p->n_bias++] = (llmk_logit_bias){(int32_t)id, (float)bias};
    p->bias = o->bias;
    return 1;
}

static int opt_samplers(const char *cmd, const char *flag, const char *v, void *ctx) {
    struct gen_opts *o = ctx;
    if (llmk_sampler_parse_order(v, &o->sp) != LLMK_OK)
        return cli_usage_error(cmd, "%s: %s", flag, llmk_last_error()), 0;
    o->samplers_given = true;
    return 1;
}

static int opt_stop(const char *cmd, const char *flag, const char *v, void *ctx) {
    struct gen_opts *o = ctx;
    if (!*v) return cli_usage_error(cmd, "%s needs a non-empty string", flag), 0;
    if (o->n_stops == GEN_MAX_STOPS) return cli_usage_error(cmd, "at most %d %s strings", GEN_MAX_STOPS, flag), 0;
    o->stops[o->n_stops++] = v;
    return 1;
}

struct cli_opt_section gen_opts_section(struct gen_opts *o) {
    llmk_sampler_params *p = &o->sp;
    const struct cli_opt rows[] = {
        CLI_NUM("--temp", 0, &p->temperature, 0, 1e6, "T", "temperature; 0 = greedy"),
        CLI_I32("--top-k", 0, &p->top_k, 0, INT32_MAX, "K", "keep the K most likely tokens (default 40, 0 = off)"),
        CLI_NUM("--top-p", 0, &p->top_p, 0, 1, "P", "nucleus: smallest set with mass >= P (default 0.95, 1 = off)"),
        CLI_NUM("--min-p", 0, &p->min_p, 0, 1, "P",
                "drop tokens below P x the top probability (default 0.05, 0 = off)"),
        CLI_NUM("--typical-p", 0, &p->typical_p, 0, 1, "P",
                "locally typical sampling (default 1 = off); without --samplers the stage runs after the default "
                "chain"),
        CLI_NUM("--eta", 0, &p->eta, 0, 1, "E", "eta sampling epsilon (default 0 = off); likewise"),
        CLI_NUM("--repeat-penalty", 0, &p->repeat_penalty, 1e-6, 1e6, "R",
                "penalise tokens of the last N (default 1 = off)"),
        CLI_I32("--repeat-last-n", 0, &p->repeat_last_n, 0, 1 << 20, "N",
                "the penalties' window (default 64, 0 = off)"),
        CLI_NUM("--frequency-penalty", 0, &p->frequency_penalty, -100, 100, "F", "subtract F x count (default 0)"),
        CLI_NUM("--presence-penalty", 0, &p->presence_penalty, -100, 100, "F",
                "subtract F once a token occurred (default 0)"),
        CLI_REPEAT("--logit-bias", 0, opt_bias, o, "ID=BIAS", "add BIAS to token ID's logit (-inf bans it)"),
        CLI_FN("--samplers", 0, opt_samplers, o, "LIST",
               "stage order, e.g. 'penalties;temperature;top_k;min_p;top_p' (also typical_p, eta) or letters "
               "'etkmp' (y typical, a eta)"),
        CLI_I64("--seed", 's', &p->seed, -1, INT64_MAX, "S", "RNG seed (default -1: random, reported on stderr)"),
        CLI_REPEAT("--stop", 0, opt_stop, o, "STR", "stop when STR is generated (not printed)"),
        CLI_STR("--system", 0, &o->system, "TEXT", "system message (chat formatting)"),
        CLI_STR("--chat-template", 0, &o->chat_template, "NAME",
                "chatml, llama3, zephyr, llama2, gemma or harmony instead of the model's"),
        CLI_STR("--reasoning-effort", 0, &o->reasoning_effort, "LEVEL",
                "low, medium or high: the harmony template's (gpt-oss) reasoning effort (default medium)"),
        CLI_STR("--grammar", 0, &o->grammar, "GBNF",
                "constrain the output to a GBNF grammar (llama.cpp's format; docs/grammar.md)"),
        CLI_STR("--grammar-file", 0, &o->grammar_file, "FILE", "the same, read from FILE"),
        CLI_STR("--json-schema", 'j', &o->json_schema, "SCHEMA",
                "constrain the output to JSON that the JSON Schema accepts (docs/json_schema.md; '{}': any JSON)"),
        {.name = "--json-schema-file", .alias = "-jf", .kind = CLI_OPT_STR, .dest.s = &o->json_schema_file,
         .metavar = "FILE", .help = "the same, read from FILE"},
    };
    _Static_assert(sizeof rows / sizeof rows[0] == GEN_OPT_ROWS, "GEN_OPT_ROWS counts the rows");
    memcpy(o->rows, rows, sizeof rows);
    return (struct cli_opt_section){"sampling (applied in --samplers order; see docs/sampling.md) and stopping:",
                                    o->rows, GEN_OPT_ROWS};
}

/* --typical-p / --eta without --samplers: the default order has no such
 * stage, so the flag would do nothing; append the stage instead. */
static void add_stage_if_set(llmk_sampler_params *p, int stage, bool set) {
    if (!set) return;
    for (size_t i = 0; i < p->n_order; i++)
        if (p->order[i] == stage) return;
    if (p->n_order < LLMK_SAMPLER_MAX_STAGES) p->order[p->n_order++] = (uint8_t)stage;
}

void gen_sampler_params(const struct gen_opts *o, llmk_sampler_params *sp) {
    *sp = o->sp;
    if (!o->samplers_given) {
        add_stage_if_set(sp, LLMK_STAGE_TYPICAL_P, sp->typical_p < 1.0);
        add_stage_if_set(sp, LLMK_STAGE_ETA, sp->eta > 0.0);
    }
}

int gen_ctx_init(struct gen_ctx *c, const char *cmd, const struct gen_opts *o, size_t n_vocab) {
    memset(c, 0, sizeof *c);
    llmk_sampler_params sp;
    gen_sampler_params(o, &sp);
    int st = llmk_sampler_init(&sp, n_vocab, &c->smp);
    if (st == LLMK_OK) st = llmk_stop_init(o->stops, o->n_stops, &c->stop);
    if (st == LLMK_OK) {
        /* room for any token's text plus what the matcher may release */
        c->cap = 4096 + llmk_stop_max_len(c->stop);
        c->buf = malloc(c->cap);
        if (!c->buf) st = cli_fail(LLMK_OUT_OF_MEMORY, "generation text buffer");
    }
    if (st != LLMK_OK) {
        gen_ctx_free(c);
        return st;
    }
    if (o->sp.seed < 0 && o->sp.temperature > 0 && !o->quiet)
        fprintf(stderr, "llmk %s: seed %llu\n", cmd,
                (unsigned long long)llmk_sampler_seed(c->smp));
    return LLMK_OK;
}

/* -j / -jf: the schema's grammar. */
static int schema_grammar(const struct gen_opts *o, char **out, size_t *len) {
    char *file = NULL;
    size_t n = 0;
    int st = LLMK_OK;
    if (o->json_schema_file) st = cli_read_file(o->json_schema_file, &file, &n);
    else n = strlen(o->json_schema);
    if (st == LLMK_OK) st = llmk_json_schema_to_gbnf(file ? file : o->json_schema, n, out, len);
    free(file);
    return st;
}

int gen_grammar_text(const struct gen_opts *o, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    int given = (o->grammar != NULL) + (o->grammar_file != NULL) + (o->json_schema != NULL) +
                (o->json_schema_file != NULL);
    if (given > 1)
        return cli_fail(LLMK_INVALID_ARGUMENT,
                        "give one of --grammar, --grammar-file, --json-schema and --json-schema-file");
    if (o->json_schema || o->json_schema_file) return schema_grammar(o, out, len);
    if (o->grammar) {
        *len = strlen(o->grammar);
        if (!(*out = malloc(*len + 1))) return cli_fail(LLMK_OUT_OF_MEMORY, "grammar text");
        memcpy(*out, o->grammar, *len + 1);
        return LLMK_OK;
    }
    if (!o->grammar_file) return LLMK_OK;
    FILE *f = fopen(o->grammar_file, "rb");
    if (!f) return cli_fail(LLMK_IO_ERROR, "--grammar-file %s: %s", o->grammar_file, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            if (cap > (size_t)LLMK_GRAMMAR_MAX_TEXT + 2) break;
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - 1 - n, f);
        n += r;
        if (!r) break;
    }
    bool err = ferror(f);
    fclose(f);
    if (!buf) return cli_fail(LLMK_OUT_OF_MEMORY, "grammar text");
    if (err) {
        free(buf);
        return cli_fail(LLMK_IO_ERROR, "--grammar-file %s: read error", o->grammar_file);
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return LLMK_OK;
}

int gen_schema_grammar(const char *schema, size_t len, llmk_grammar **out) {
    char *gbnf = NULL;
    size_t n = 0;
    *out = NULL;
    int st = llmk_json_schema_to_gbnf(schema, len, &gbnf, &n);
    if (st == LLMK_OK) st = llmk_grammar_parse(gbnf, n, out);
    free(gbnf);
    return st;
}

int gen_ctx_grammar(struct gen_ctx *c, const struct gen_opts *o, const llmk_tokenizer *t) {
    char *text;
    size_t len;
    int st = gen_grammar_text(o, &text, &len);
    if (st != LLMK_OK || !text) return st;
    st = llmk_grammar_parse(text, len, &c->grammar);
    free(text);
    if (st == LLMK_OK && !t) st = cli_fail(LLMK_UNSUPPORTED, "--grammar needs the model's tokenizer");
    if (st == LLMK_OK) st = llmk_grammar_state_init(c->grammar, t, &c->gstate);
    if (st == LLMK_OK) st = llmk_sampler_set_grammar(c->smp, c->gstate);
    return st;
}

bool gen_grammar_done(const struct gen_ctx *c) { return c->gstate && llmk_grammar_state_done(c->gstate); }

void gen_ctx_free(struct gen_ctx *c) {
    llmk_sampler_free(c->smp);
    llmk_grammar_state_free(c->gstate);
    llmk_grammar_free(c->grammar);
    llmk_stop_free(c->stop);
    free(c->buf);
    memset(c, 0, sizeof *c);
}

int gen_choose(struct gen_ctx *c, const float *logits, size_t n_vocab, int32_t *id) {
    int st = llmk_sampler_sample(c->smp, logits, n_vocab, id);
    if (st == LLMK_OK) st = llmk_sampler_accept(c->smp, *id);
    return st;
}

bool gen_write(struct gen_ctx *c, FILE *out, const char *text, size_t n) {
    while (n && !c->stopped) {
        size_t chunk = n < 4096 ? n : 4096, w = 0;
        if (llmk_stop_feed(c->stop, text, chunk, c->buf, c->cap, &w, &c->stopped) != LLMK_OK) break;
        fwrite(c->buf, 1, w, out);
        text += chunk;
        n -= chunk;
    }
    fflush(out);
    return c->stopped;
}

void gen_finish(struct gen_ctx *c, FILE *out) {
    size_t w = 0;
    if (!c->stopped && llmk_stop_flush(c->stop, c->buf, c->cap, &w) == LLMK_OK)
        fwrite(c->buf, 1, w, out);
    fflush(out);
    llmk_stop_reset(c->stop);
    c->stopped = false;
}

int gen_chat_prompt(const llmk_gguf *g, const llmk_tokenizer *t, const struct gen_opts *o,
                    const char *prompt, char **out, bool *add_bos) {
    llmk_chat_message m[2];
    size_t n = 0;
    if (o->system) m[n++] = (llmk_chat_message){"system", o->system};
    m[n++] = (llmk_chat_message){"user", prompt};
    return gen_chat_messages(g, t, o->chat_template, o->reasoning_effort, m, n, out, add_bos);
}

int gen_chat_messages(const llmk_gguf *g, const llmk_tokenizer *t, const char *template_name,
                      const char *reasoning_effort, const llmk_chat_message *msgs, size_t n, char **out,
                      bool *add_bos) {
    llmk_chat_template *tp = NULL;
    int st = llmk_chat_template_from_gguf(g, template_name, &tp);
    if (st != LLMK_OK) return st;
    size_t len = 0;
    llmk_chat_render_opts ro = {.add_generation_prompt = true, .reasoning_effort = reasoning_effort};
    st = llmk_chat_render_with(tp, msgs, n, &ro, out, &len);
    llmk_chat_template_free(tp);
    if (st != LLMK_OK) return st;
    *add_bos = llmk_tokenizer_add_bos(t);
    int32_t bos = llmk_tokenizer_bos(t);
    size_t bl = 0;
    const char *bt = bos >= 0 ? llmk_tokenizer_piece(t, bos, &bl) : NULL;
    if (bt && bl && len >= bl && !memcmp(*out, bt, bl)) *add_bos = false;
    return LLMK_OK;
}
