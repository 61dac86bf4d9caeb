/* llmk chat: an interactive conversation. Each turn re-renders the whole
 * conversation with the model's chat template, tokenizes it, and prefills
 * only what differs from the tokens already in the KV cache (normally just
 * the new turn). Ctrl-C stops the current reply; end of input ends the chat. */
#include "cli.h"
#include "llmk_formulas.h"
#include "gen_opts.h"
#include "opts.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char CMD[] = "chat";
static const char USAGE[] =
    "usage: llmk chat [-m MODEL] [--system TEXT] [-n N] [sampling flags]\n"
    "  Reads one user message per line (at most 1 MiB, UTF-8 without NUL bytes)\n"
    "  from standard input and streams the model's replies to standard output.\n"
    "  Ctrl-C stops a reply; EOF ends.\n";
static const char EPILOG[] = "(chat's default temperature is 0.8)\n";

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

struct conv {
    llmk_chat_message *m;
    size_t n, cap;
};

static int conv_add(struct conv *c, const char *role, const char *content, size_t len) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        llmk_chat_message *nm = realloc(c->m, cap * sizeof *nm);
        if (!nm) return cli_fail(LLMK_OUT_OF_MEMORY, "conversation of %zu messages", c->n);
        c->m = nm;
        c->cap = cap;
    }
    char *s = malloc(len + 1);
    if (!s) return cli_fail(LLMK_OUT_OF_MEMORY, "message of %zu bytes", len);
    memcpy(s, content, len);
    s[len] = 0;
    c->m[c->n].role = role; /* a literal, or a role of --messages (kept to the end) */
    c->m[c->n].content = s;
    c->n++;
    return LLMK_OK;
}

static void conv_free(struct conv *c) {
    for (size_t i = 0; i < c->n; i++) free((char *)c->m[i].content);
    free(c->m);
}

/* The conversation as a JSON messages array, through an outfile: a failed
 * save leaves the previous one whole. */
static int save_conv(const char *path, const char *model, const struct conv *c) {
    llmk_outfile *of;
    int st = cli_outfile_open(path, &model, 1, &of);
    if (st != LLMK_OK) return st;
    FILE *f = llmk_outfile_stream(of);
    fputc('[', f);
    for (size_t i = 0; i < c->n; i++) {
        fprintf(f, "%s{\"role\": \"%s\", \"content\": \"", i ? ", " : "", c->m[i].role);
        for (const unsigned char *p = (const unsigned char *)c->m[i].content; *p; p++) {
            if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
            else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
            else fputc(*p, f);
        }
        fputs("\"}", f);
    }
    fputs("]\n", f);
    return cli_outfile_commit(of); /* a write error seen on the stream fails here */
}

/* One line of standard input, without its end of line, at most LINE_MAX_BYTES
 * (a stated cap: `chat < /dev/zero` must not grow without bound). Returns
 * LLMK_OK with *len, LLMK_NOT_FOUND at end of input (or Ctrl-C while
 * waiting), LLMK_BAD_REQUEST for a line that is too long or holds a NUL. */
enum { LINE_MAX_BYTES = 1 << 20 };
static int read_line(char **buf, size_t *len) {
    if (!*buf && !(*buf = malloc(LINE_MAX_BYTES + 1)))
        return cli_fail(LLMK_OUT_OF_MEMORY, "a line buffer of %d bytes", LINE_MAX_BYTES);
    size_t n = 0;
    int ch;
    bool nul = false;
    while ((ch = getchar()) != EOF && ch != '\n') {
        if (n == LINE_MAX_BYTES)
            return cli_fail(LLMK_BAD_REQUEST, "an input line is longer than %d bytes (1 MiB), the chat limit",
                             LINE_MAX_BYTES);
        nul |= ch == 0;
        (*buf)[n++] = (char)ch;
    }
    if (ch == EOF && n == 0) return LLMK_NOT_FOUND;
    if (nul) return cli_fail(LLMK_BAD_REQUEST, "an input line holds a NUL byte; messages are text");
    while (n > 0 && (*buf)[n - 1] == '\r') n--;
    (*buf)[n] = 0;
    *len = n;
    return LLMK_OK;
}

/* Append to the reply text; the buffer lives for the whole chat and only
 * grows (doubling), so a reply's tokens almost never allocate. */
static int reply_add(char **b, size_t *len, size_t *cap, const char *s, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t nc = *cap ? *cap : 1 << 16;
        while (nc < *len + n + 1) nc *= 2;
        char *nb = realloc(*b, nc);
        if (!nb) return cli_fail(LLMK_OUT_OF_MEMORY, "reply text of %zu bytes", *len + n);
        *b = nb;
        *cap = nc;
    }
    memcpy(*b + *len, s, n);
    *len += n;
    (*b)[*len] = 0;
    return LLMK_OK;
}

static void print_ids(const char *what, int turn, const int32_t *ids, size_t n) {
    fprintf(stderr, "llmk chat: turn %d %s: [", turn, what);
    for (size_t i = 0; i < n; i++) fprintf(stderr, "%s%d", i ? ", " : "", ids[i]);
    fprintf(stderr, "]\n");
}

struct chat_opts {
    const char *model, *save, *history;
    long n_predict, threads, n_ctx;
    int path;
    uint32_t kv_type;
    bool verbose, long_ctx;
    struct gen_opts go;
};

/* Parses the options and fills in the defaults; CLI_OPTS_GO, or the exit code. */
static int parse_args(struct chat_opts *o, int argc, char **argv) {
    const struct cli_opt table[] = {
        CLI_OPT_MODEL(&o->model),
        CLI_LONG("--n-predict", 'n', &o->n_predict, -1, 1 << 24, "N",
                 "tokens per reply at most (default 1024; -1: until the end of the turn or a full context)"),
        CLI_OPT_THREADS(&o->threads),
        CLI_OPT_CTX(&o->n_ctx, "context size in tokens (default: min(4096, the model's))"),
        CLI_OPT_LONG_CTX(&o->long_ctx),
        CLI_OPT_PATH(&o->path),
        CLI_OPT_KV_TYPE(&o->kv_type, CLI_KV_TYPE_HELP),
        CLI_STR("--save", 0, &o->save, "FILE", "write the conversation as a JSON messages array after each turn"),
        CLI_STR("--messages", 0, &o->history, "FILE", "start from this conversation (e.g. one written by --save)"),
        CLI_FLAG("--verbose", 'v', &o->verbose, "per-turn token counts (reused / prefilled / generated) on stderr"),
        CLI_FLAG("--log-disable", 0, &o->go.quiet, "no seed or per-turn lines on stderr (errors still)"),
    };
    const struct cli_opt_section sections[] = {{NULL, table, CLI_LEN(table)}, gen_opts_section(&o->go)};
    struct cli_cmd spec = {.name = CMD, .usage = USAGE, .epilog = EPILOG, .sections = sections,
                           .n_sections = CLI_LEN(sections)};
    int rc = cli_opts_parse(&spec, argc, argv);
    if (rc != CLI_OPTS_GO) return rc;
    if (o->n_predict == 0) return cli_usage_error(CMD, "-n 0 leaves no room for a reply (-1: no limit)");
    if (o->go.quiet) o->verbose = false;
    if (!o->model) o->model = cli_default_model();
    o->kv_type = cli_kv_type_or_default(o->kv_type, o->path);
    return CLI_OPTS_GO;
}

/* A chat: the session and the tokens in its KV cache, the conversation, and
 * buffers that live for the whole chat (a turn allocates only when one grows). */
struct chat {
    const struct chat_opts *o;
    llmk_session *s;
    const llmk_tokenizer *tok;
    llmk_chat_template *tp;
    struct gen_ctx gc;
    struct conv conv;
    int64_t n_ctx;
    size_t n_vocab, ids_cap, n_hist;
    int32_t *hist, *ids; /* the tokens in the KV cache, in order; this turn's conversation */
    float *logits;
    char *line, *text, *reply; /* the user's line; the rendered conversation; the reply */
    size_t reply_len, reply_cap;
    char *hist_json;
    llmk_chat_message *loaded; /* --messages: roles point into it */
    const char *bos_text;
    size_t bos_len;
};

/* Session, template, buffers and the conversation so far (--system, --messages). */
static int chat_init(struct chat *c, llmk_model *m) {
    const struct chat_opts *o = c->o;
    const llmk_hparams *hp = llmk_model_hparams(m);
    int st = llmk_model_tokenizer(m, &c->tok);
    if (st != LLMK_OK) return st;
    if ((st = llmk_chat_template_from_gguf(llmk_model_gguf(m), o->go.chat_template, &c->tp)) != LLMK_OK) return st;
    int64_t n_ctx = o->n_ctx ? o->n_ctx : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    llmk_session_params sp = {.n_ctx = (int32_t)n_ctx, .path = o->path, .kv_type = o->kv_type,
                              .n_threads = o->threads > 0 ? (int32_t)o->threads : llmk_cpu_count(),
                              .allow_long_ctx = o->long_ctx};
    if (o->long_ctx) cli_warn_long_ctx(CMD, m, n_ctx);
    if ((st = llmk_session_init(m, &sp, &c->s)) != LLMK_OK) return st;
    c->n_ctx = llmk_session_n_ctx(c->s);
    c->n_vocab = (size_t)hp->n_vocab;
    c->ids_cap = (size_t)c->n_ctx + 1;
    c->hist = malloc((size_t)c->n_ctx * sizeof *c->hist);
    c->ids = malloc(c->ids_cap * sizeof *c->ids);
    c->logits = malloc(c->n_vocab * sizeof *c->logits);
    if (!c->hist || !c->ids || !c->logits)
        return cli_fail(LLMK_OUT_OF_MEMORY, "chat buffers for %lld tokens", (long long)c->n_ctx);
    if ((st = gen_ctx_init(&c->gc, CMD, &o->go, c->n_vocab)) != LLMK_OK) return st;
    if (o->go.system && (st = conv_add(&c->conv, "system", o->go.system, strlen(o->go.system))) != LLMK_OK)
        return st;
    if (o->history) {
        size_t hl = 0, hn = 0;
        if ((st = cli_read_file(o->history, &c->hist_json, &hl)) != LLMK_OK) return st;
        if ((st = llmk_chat_parse_messages(c->hist_json, hl, &c->loaded, &hn)) != LLMK_OK) return st;
        for (size_t k = 0; k < hn; k++)
            if ((st = conv_add(&c->conv, c->loaded[k].role, c->loaded[k].content,
                               strlen(c->loaded[k].content))) != LLMK_OK)
                return st;
    }
    int32_t bos = llmk_tokenizer_bos(c->tok);
    c->bos_text = bos >= 0 ? llmk_tokenizer_piece(c->tok, bos, &c->bos_len) : NULL;
    return LLMK_OK;
}

static void chat_free(struct chat *c) {
    free(c->reply);
    free(c->loaded);
    free(c->hist_json);
    free(c->line);
    free(c->text);
    free(c->hist);
    free(c->ids);
    free(c->logits);
    conv_free(&c->conv);
    gen_ctx_free(&c->gc);
    llmk_chat_template_free(c->tp);
    llmk_session_free(c->s);
}

/* The whole conversation as the template renders it, tokenized; only what
 * differs from the KV cache is evaluated, leaving the reply's first logits. */
static int prefill_turn(struct chat *c, int turn) {
    size_t text_len = 0, n_ids = 0;
    free(c->text);
    c->text = NULL;
    int st = llmk_chat_render(c->tp, c->conv.m, c->conv.n, true, &c->text, &text_len);
    if (st != LLMK_OK) return st;
    bool add_bos = llmk_tokenizer_add_bos(c->tok) &&
                   !(c->bos_text && c->bos_len && text_len >= c->bos_len && !memcmp(c->text, c->bos_text, c->bos_len));
    st = llmk_tokenize(c->tok, c->text, text_len, add_bos, true, c->ids, c->ids_cap, &n_ids);
    if (st == LLMK_BUFFER_TOO_SMALL || n_ids >= (size_t)c->n_ctx)
        return cli_fail(LLMK_CONTEXT_FULL, "the conversation is %zu tokens, the context holds %lld (use --ctx)",
                         n_ids, (long long)c->n_ctx);
    if (st != LLMK_OK) return st;
    /* Reuse the longest common prefix; at least one token is evaluated
     * so there are logits for the reply. */
    size_t reuse = 0;
    while (reuse < c->n_hist && reuse < n_ids && c->hist[reuse] == c->ids[reuse]) reuse++;
    if (reuse == n_ids) reuse--;
    if ((st = llmk_session_truncate(c->s, (int32_t)reuse)) != LLMK_OK) return st;
    memcpy(c->hist + reuse, c->ids + reuse, (n_ids - reuse) * sizeof *c->ids);
    c->n_hist = n_ids;
    if ((st = llmk_session_eval(c->s, c->ids + reuse, n_ids - reuse, c->logits, c->n_vocab, false)) != LLMK_OK)
        return st;
    if (c->o->verbose) {
        fprintf(stderr, "llmk chat: turn %d: reused %zu tokens, prefilled %zu tokens\n", turn, reuse, n_ids - reuse);
        print_ids("prompt ids", turn, c->ids, n_ids);
    }
    return LLMK_OK;
}

/* The reply: streamed to stdout until the end of the turn, -n, a stop
 * string, Ctrl-C or a full context, and added to the conversation. */
static int reply_turn(struct chat *c, int turn) {
    const struct chat_opts *o = c->o;
    c->reply_len = 0;
    int st = reply_add(&c->reply, &c->reply_len, &c->reply_cap, "", 0);
    if (st != LLMK_OK) return st;
    llmk_detok_state ds = {0};
    char piece[256];
    size_t n_gen = 0, n_fed = 0, np = 0;
    const char *why = "max tokens";
    llmk_sampler_reset(c->gc.smp);
    for (;;) {
        if (interrupted) {
            why = "interrupted";
            break;
        }
        int32_t id;
        if ((st = gen_choose(&c->gc, c->logits, c->n_vocab, &id)) != LLMK_OK) return st;
        n_gen++;
        if (llmk_tokenizer_is_eog(c->tok, id)) {
            why = "end of turn";
            break;
        }
        np = 0;
        if (llmk_detok_feed(c->tok, &ds, id, false, piece, sizeof piece, &np) == LLMK_OK) {
            if ((st = reply_add(&c->reply, &c->reply_len, &c->reply_cap, piece, np)) != LLMK_OK) return st;
            if (gen_write(&c->gc, stdout, piece, np)) {
                why = "stop string";
                break;
            }
            if ((st = cli_stdout_status()) != LLMK_OK) return st;
        }
        if (o->n_predict > 0 && llmk_max_tokens_stop((double)n_gen, (double)o->n_predict) == 1.0) break;
        if (c->n_hist >= (size_t)c->n_ctx) {
            why = "context full";
            fprintf(stderr, "\nllmk chat: the context of %lld tokens is full; ending the reply\n", (long long)c->n_ctx);
            break;
        }
        if ((st = llmk_session_eval(c->s, &id, 1, c->logits, c->n_vocab, false)) != LLMK_OK) return st;
        c->hist[c->n_hist++] = id;
        n_fed++;
    }
    np = 0;
    if (llmk_detok_flush(c->tok, &ds, piece, sizeof piece, &np) == LLMK_OK && np) {
        if ((st = reply_add(&c->reply, &c->reply_len, &c->reply_cap, piece, np)) != LLMK_OK) return st;
        gen_write(&c->gc, stdout, piece, np);
    }
    gen_finish(&c->gc, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    /* The conversation keeps what was shown: text before a stop string. */
    size_t keep = c->reply_len;
    for (size_t k = 0; k < o->go.n_stops; k++) {
        char *hit = strstr(c->reply, o->go.stops[k]);
        if (hit && (size_t)(hit - c->reply) < keep) keep = (size_t)(hit - c->reply);
    }
    if ((st = conv_add(&c->conv, "assistant", c->reply, keep)) != LLMK_OK) return st;
    if (o->verbose)
        fprintf(stderr, "llmk chat: turn %d: generated %zu tokens (%zu evaluated), %s\n", turn, n_gen, n_fed, why);
    return LLMK_OK;
}

int cmd_chat(int argc, char **argv) {
    struct chat_opts o = {.n_predict = 1024, .path = LLMK_PATH_FAST, .kv_type = (uint32_t)CLI_KV_DEFAULT};
    gen_opts_default(&o.go, 0.8);
    int rc = parse_args(&o, argc, argv);
    if (rc != CLI_OPTS_GO) return rc;
    rc = CLI_EXIT_OK;
    llmk_model *m = NULL;
    struct chat c = {.o = &o};
    int st = LLMK_OK;
    /* --save must not name the model: refused before anything is loaded. */
    if (o.save && (st = llmk_output_check(o.save, &o.model, 1)) != LLMK_OK) goto fail;
    if ((st = llmk_model_load(o.model, &m)) != LLMK_OK) goto fail;
    if ((st = chat_init(&c, m)) != LLMK_OK) goto fail;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: Ctrl-C at the prompt ends the read */

    bool tty = isatty(0);
    for (int turn = 1;; turn++) {
        if (tty) {
            fprintf(stderr, "> ");
            fflush(stderr);
        }
        interrupted = 0;
        size_t got = 0;
        if ((st = read_line(&c.line, &got)) == LLMK_NOT_FOUND) break; /* EOF, or Ctrl-C while waiting */
        if (st != LLMK_OK) goto fail;
        if (got == 0) {
            turn--;
            continue;
        }
        if ((st = conv_add(&c.conv, "user", c.line, got)) != LLMK_OK) goto fail;
        if ((st = prefill_turn(&c, turn)) != LLMK_OK || (st = reply_turn(&c, turn)) != LLMK_OK) goto fail;
        if (o.save && (st = save_conv(o.save, o.model, &c.conv)) != LLMK_OK) goto fail;
    }
    goto done;
fail:
    rc = cli_report(CMD, st);
done:
    chat_free(&c);
    llmk_model_free(m);
    return rc;
}
