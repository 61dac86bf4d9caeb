/* Generation flags and the pick-and-print helpers shared by run and chat. */
#include "gen_opts.h"

#include "cli.h"
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void gen_opts_default(struct gen_opts *o, double temperature) {
    memset(o, 0, sizeof *o);
    llmk_sampler_params_default(&o->sp);
    o->sp.temperature = temperature;
}

void gen_opts_usage(FILE *to) {
    fprintf(to,
            "sampling (applied in --samplers order; see docs/sampling.md):\n"
            "  --temp T              temperature; 0 = greedy\n"
            "  --top-k K             keep the K most likely tokens (default 40, 0 = off)\n"
            "  --top-p P             nucleus: smallest set with mass >= P (default 0.95, 1 = off)\n"
            "  --min-p P             drop tokens below P x the top probability (default 0.05, 0 = off)\n"
            "  --typical-p P         locally typical sampling (default 1 = off); without\n"
            "                        --samplers the stage runs after the default chain\n"
            "  --eta E               eta sampling epsilon (default 0 = off); likewise\n"
            "  --repeat-penalty R    penalise tokens of the last N (default 1 = off)\n"
            "  --repeat-last-n N     the penalties' window (default 64, 0 = off)\n"
            "  --frequency-penalty F subtract F x count (default 0)\n"
            "  --presence-penalty F  subtract F once a token occurred (default 0)\n"
            "  --logit-bias ID=BIAS  add BIAS to token ID's logit (-inf bans it); repeatable\n"
            "  --samplers LIST       stage order, e.g. 'penalties;temperature;top_k;min_p;top_p'\n"
            "                        (also typical_p, eta) or letters 'etkmp' (y typical, a eta)\n"
            "  --seed S              RNG seed (default -1: random, reported on stderr)\n"
            "  --stop STR            stop when STR is generated (not printed); repeatable\n"
            "  --system TEXT         system message (chat formatting)\n"
            "  --chat-template NAME  chatml, llama3, zephyr or llama2 instead of the model's\n");
}

static int parse_bias(const char *cmd, const char *v, llmk_logit_bias *b) {
    char *end;
    errno = 0;
    long id = strtol(v, &end, 10);
    if (end == v || *end != '=' || errno || id < 0 || id > INT32_MAX) {
        cli_usage_error(cmd, "--logit-bias expects ID=BIAS, got '%s'", v);
        return 0;
    }
    const char *bs = end + 1;
    double bias;
    if (!strcmp(bs, "-inf") || !strcmp(bs, "-INF")) {
        bias = -INFINITY;
    } else {
        errno = 0;
        bias = strtod(bs, &end);
        if (!*bs || *end || errno || !isfinite(bias)) {
            cli_usage_error(cmd, "--logit-bias expects ID=BIAS with a finite BIAS or -inf, got '%s'", v);
            return 0;
        }
    }
    b->id = (int32_t)id;
    b->bias = (float)bias;
    return 1;
}

int gen_opts_parse(const char *cmd, struct gen_opts *o, int argc, char **argv, int *i) {
    static const char *const flags[] = {
        "--temp", "--top-k", "--top-p", "--min-p", "--typical-p", "--eta", "--repeat-penalty",
        "--repeat-last-n", "--frequency-penalty", "--presence-penalty", "--logit-bias",
        "--samplers", "--seed", "--stop", "--system", "--chat-template"};
    const char *a = argv[*i];
    if (!strcmp(a, "--chat")) {
        o->chat = true;
        return 1;
    }
    bool ours = false;
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) ours |= !strcmp(a, flags[k]);
    if (!ours) return 0;
    if (*i + 1 >= argc) {
        cli_usage_error(cmd, "%s needs a value", a);
        return -1;
    }
    const char *v = argv[++*i];
    llmk_sampler_params *p = &o->sp;
    long l;
    if (!strcmp(a, "--temp")) return cli_parse_double(cmd, a, v, 0, 1e6, &p->temperature) ? 1 : -1;
    if (!strcmp(a, "--top-p")) return cli_parse_double(cmd, a, v, 0, 1, &p->top_p) ? 1 : -1;
    if (!strcmp(a, "--min-p")) return cli_parse_double(cmd, a, v, 0, 1, &p->min_p) ? 1 : -1;
    if (!strcmp(a, "--typical-p")) return cli_parse_double(cmd, a, v, 0, 1, &p->typical_p) ? 1 : -1;
    if (!strcmp(a, "--eta")) return cli_parse_double(cmd, a, v, 0, 1, &p->eta) ? 1 : -1;
    if (!strcmp(a, "--repeat-penalty"))
        return cli_parse_double(cmd, a, v, 1e-6, 1e6, &p->repeat_penalty) ? 1 : -1;
    if (!strcmp(a, "--frequency-penalty"))
        return cli_parse_double(cmd, a, v, -100, 100, &p->frequency_penalty) ? 1 : -1;
    if (!strcmp(a, "--presence-penalty"))
        return cli_parse_double(cmd, a, v, -100, 100, &p->presence_penalty) ? 1 : -1;
    if (!strcmp(a, "--top-k")) {
        if (!cli_parse_long(cmd, a, v, 0, INT32_MAX, &l)) return -1;
        p->top_k = (int32_t)l;
        return 1;
    }
    if (!strcmp(a, "--repeat-last-n")) {
        if (!cli_parse_long(cmd, a, v, 0, 1 << 20, &l)) return -1;
        p->repeat_last_n = (int32_t)l;
        return 1;
    }
    if (!strcmp(a, "--seed")) {
        if (!cli_parse_long(cmd, a, v, -1, INT64_MAX, &l)) return -1;
        p->seed = l;
        return 1;
    }
    if (!strcmp(a, "--logit-bias")) {
        if (p->n_bias == GEN_MAX_BIAS) {
            cli_usage_error(cmd, "at most %d --logit-bias flags", GEN_MAX_BIAS);
            return -1;
        }
        if (!parse_bias(cmd, v, &o->bias[p->n_bias])) return -1;
        p->n_bias++;
        p->bias = o->bias;
        return 1;
    }
    if (!strcmp(a, "--samplers")) {
        if (llmk_sampler_parse_order(v, p) != LLMK_OK) {
            cli_usage_error(cmd, "--samplers: %s", llmk_last_error());
            return -1;
        }
        o->samplers_given = true;
        return 1;
    }
    if (!strcmp(a, "--stop")) {
        if (!*v) {
            cli_usage_error(cmd, "--stop needs a non-empty string");
            return -1;
        }
        if (o->n_stops == GEN_MAX_STOPS) {
            cli_usage_error(cmd, "at most %d --stop strings", GEN_MAX_STOPS);
            return -1;
        }
        o->stops[o->n_stops++] = v;
        return 1;
    }
    if (!strcmp(a, "--system")) {
        o->system = v;
        return 1;
    }
    o->chat_template = v; /* --chat-template */
    return 1;
}


/* --typical-p / --eta without --samplers: the default order has no such
 * stage, so the flag would do nothing; append the stage instead. */
static void add_stage_if_set(llmk_sampler_params *p, int stage, bool set) {
    if (!set) return;
    for (size_t i = 0; i < p->n_order; i++)
        if (p->order[i] == stage) return;
    if (p->n_order < LLMK_SAMPLER_MAX_STAGES) p->order[p->n_order++] = (uint8_t)stage;
}

int gen_ctx_init(struct gen_ctx *c, const char *cmd, const struct gen_opts *o, size_t n_vocab) {
    memset(c, 0, sizeof *c);
    llmk_sampler_params sp = o->sp;
    if (!o->samplers_given) {
        add_stage_if_set(&sp, LLMK_STAGE_TYPICAL_P, sp.typical_p < 1.0);
        add_stage_if_set(&sp, LLMK_STAGE_ETA, sp.eta > 0.0);
    }
    int st = llmk_sampler_init(&sp, n_vocab, &c->smp);
    if (st == LLMK_OK) st = llmk_stop_init(o->stops, o->n_stops, &c->stop);
    if (st == LLMK_OK) {
        /* room for any token's text plus what the matcher may release */
        c->cap = 4096 + llmk_stop_max_len(c->stop);
        c->buf = malloc(c->cap);
        if (!c->buf) st = llmk_fail(LLMK_OUT_OF_MEMORY, "generation text buffer");
    }
    if (st != LLMK_OK) {
        gen_ctx_free(c);
        return st;
    }
    if (o->sp.seed < 0 && o->sp.temperature > 0)
        fprintf(stderr, "llmk %s: seed %llu\n", cmd,
                (unsigned long long)llmk_sampler_seed(c->smp));
    return LLMK_OK;
}

void gen_ctx_free(struct gen_ctx *c) {
    llmk_sampler_free(c->smp);
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
    llmk_chat_template *tp = NULL;
    int st = llmk_chat_template_from_gguf(g, o->chat_template, &tp);
    if (st != LLMK_OK) return st;
    llmk_chat_message m[2];
    size_t n = 0;
    if (o->system) m[n++] = (llmk_chat_message){"system", o->system};
    m[n++] = (llmk_chat_message){"user", prompt};
    size_t len = 0;
    st = llmk_chat_render(tp, m, n, true, out, &len);
    llmk_chat_template_free(tp);
    if (st != LLMK_OK) return st;
    *add_bos = llmk_tokenizer_add_bos(t);
    int32_t bos = llmk_tokenizer_bos(t);
    size_t bl = 0;
    const char *bt = bos >= 0 ? llmk_tokenizer_piece(t, bos, &bl) : NULL;
    if (bt && bl && len >= bl && !memcmp(*out, bt, bl)) *add_bos = false;
    return LLMK_OK;
}
