/* llmk chat: an interactive conversation. Each turn re-renders the whole
 * conversation with the model's chat template, tokenizes it, and prefills
 * only what differs from the tokens already in the KV cache (normally just
 * the new turn). Ctrl-C stops the current reply; end of input ends the chat. */
#include "cli.h"
#include "llmk_formulas.h"
#include "gen_opts.h"
#include "internal.h"
#include "pool.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *to) {
    fprintf(to,
            "usage: llmk chat [-m MODEL] [--system TEXT] [-n N] [sampling flags]\n"
            "  Reads one user message per line (at most 1 MiB, UTF-8 without NUL bytes)\n"
            "  from standard input and streams the model's replies to standard output.\n"
            "  Ctrl-C stops a reply; EOF ends.\n"
            "  -m MODEL     GGUF model (default %s)\n"
            "  -n N         tokens per reply at most (default 1024)\n"
            "  -t N         worker threads (default: number of cores)\n"
            "  --ctx N      context size in tokens (default min(4096, the model's))\n"
            CLI_LONG_CTX_HELP
            "  --path P     decode path: ref, f32, fast (default fast)\n"
            "  --kv-type T  KV cache type: f16 (the fast path's default), f32 or q8_0 (not f32: fast path only)\n"
            "  --save FILE  write the conversation as a JSON messages array after each turn\n"
            "  --messages FILE  start from this conversation (e.g. one written by --save)\n"
            "  --verbose    per-turn token counts (reused / prefilled / generated) on stderr\n",
            cli_default_model());
    gen_opts_usage(to);
    fprintf(to, "  (chat's default temperature is 0.8)\n");
}

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
        if (!nm) return llmk_fail(LLMK_OUT_OF_MEMORY, "conversation of %zu messages", c->n);
        c->m = nm;
        c->cap = cap;
    }
    char *s = malloc(len + 1);
    if (!s) return llmk_fail(LLMK_OUT_OF_MEMORY, "message of %zu bytes", len);
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
        return llmk_fail(LLMK_OUT_OF_MEMORY, "a line buffer of %d bytes", LINE_MAX_BYTES);
    size_t n = 0;
    int ch;
    bool nul = false;
    while ((ch = getchar()) != EOF && ch != '\n') {
        if (n == LINE_MAX_BYTES)
            return llmk_fail(LLMK_BAD_REQUEST, "an input line is longer than %d bytes (1 MiB), the chat limit",
                             LINE_MAX_BYTES);
        nul |= ch == 0;
        (*buf)[n++] = (char)ch;
    }
    if (ch == EOF && n == 0) return LLMK_NOT_FOUND;
    if (nul) return llmk_fail(LLMK_BAD_REQUEST, "an input line holds a NUL byte; messages are text");
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
        if (!nb) return llmk_fail(LLMK_OUT_OF_MEMORY, "reply text of %zu bytes", *len + n);
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

int cmd_chat(int argc, char **argv) {
    const char *cmd = "chat", *model_path = NULL, *save = NULL, *history = NULL;
    long n_predict = 1024, threads = 0, n_ctx_arg = 0;
    int path = LLMK_PATH_FAST;
    uint32_t kv_type = (uint32_t)CLI_KV_DEFAULT;
    bool verbose = false, long_ctx = false;
    struct gen_opts o;
    gen_opts_default(&o, 0.8);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int g = gen_opts_parse(cmd, &o, argc, argv, &i);
        if (g < 0) return CLI_EXIT_USAGE;
        if (g) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            verbose = true;
            continue;
        }
        if (!strcmp(a, "--allow-long-ctx")) {
            long_ctx = true;
            continue;
        }
        if (i + 1 >= argc) return cli_usage_error(cmd, "unknown option or missing value: %s", a);
        const char *v = argv[++i];
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            model_path = v;
        } else if (!strcmp(a, "--save")) {
            save = v;
        } else if (!strcmp(a, "--messages")) {
            history = v;
        } else if (!strcmp(a, "-n")) {
            if (!cli_parse_long(cmd, a, v, 1, 1 << 24, &n_predict)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!cli_parse_long(cmd, a, v, 1, 1024, &threads)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) {
            if (!cli_parse_long(cmd, a, v, 8, 1 << 22, &n_ctx_arg)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--path")) {
            if (!cli_parse_path(cmd, v, &path)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--kv-type")) {
            if (!cli_parse_kv_type(cmd, v, &kv_type)) return CLI_EXIT_USAGE;
        } else {
            return cli_usage_error(cmd, "unknown option: %s", a);
        }
    }
    if (o.chat) return cli_usage_error(cmd, "--chat is for llmk run; chat always uses the template");
    if (!model_path) model_path = cli_default_model();
    kv_type = cli_kv_type_or_default(kv_type, path);

    int rc = CLI_EXIT_OK, st;
    llmk_model *m = NULL;
    llmk_session *s = NULL;
    llmk_chat_template *tp = NULL;
    struct gen_ctx gc = {0};
    struct conv conv = {0};
    int32_t *hist = NULL, *ids = NULL;
    float *logits = NULL;
    char *line = NULL, *text = NULL, *reply = NULL, *hist_json = NULL;
    llmk_chat_message *loaded = NULL; /* --messages: roles point into it */
    size_t reply_len = 0, reply_cap = 0;

    /* --save must not name the model: refused before anything is loaded. */
    if (save && (st = llmk_output_check(save, &model_path, 1)) != LLMK_OK) goto fail;
    if ((st = llmk_model_load(model_path, &m)) != LLMK_OK) goto fail;
    const llmk_hparams *hp = llmk_model_hparams(m);
    const llmk_tokenizer *tok = NULL;
    if ((st = llmk_model_tokenizer(m, &tok)) != LLMK_OK) goto fail;
    if ((st = llmk_chat_template_from_gguf(llmk_model_gguf(m), o.chat_template, &tp)) != LLMK_OK)
        goto fail;
    int64_t n_ctx = n_ctx_arg ? n_ctx_arg : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    llmk_session_params sp = {.n_ctx = (int32_t)n_ctx, .path = path, .kv_type = kv_type,
                              .n_threads = threads > 0 ? (int32_t)threads : llmk_cpu_count(),
                              .allow_long_ctx = long_ctx};
    if (long_ctx) cli_warn_long_ctx(cmd, m, n_ctx);
    if ((st = llmk_session_init(m, &sp, &s)) != LLMK_OK) goto fail;
    n_ctx = llmk_session_n_ctx(s);
    size_t n_vocab = (size_t)hp->n_vocab, ids_cap = (size_t)n_ctx + 1;
    hist = malloc((size_t)n_ctx * sizeof *hist); /* the tokens in the KV cache, in order */
    ids = malloc(ids_cap * sizeof *ids);
    logits = malloc(n_vocab * sizeof *logits);
    if (!hist || !ids || !logits) {
        st = llmk_fail(LLMK_OUT_OF_MEMORY, "chat buffers for %lld tokens", (long long)n_ctx);
        goto fail;
    }
    if ((st = gen_ctx_init(&gc, cmd, &o, n_vocab)) != LLMK_OK) goto fail;
    if (o.system && (st = conv_add(&conv, "system", o.system, strlen(o.system))) != LLMK_OK) goto fail;
    if (history) {
        size_t hl = 0, hn = 0;
        if ((st = cli_read_file(history, &hist_json, &hl)) != LLMK_OK) goto fail;
        if ((st = llmk_chat_parse_messages(hist_json, hl, &loaded, &hn)) != LLMK_OK) goto fail;
        for (size_t k = 0; k < hn; k++)
            if ((st = conv_add(&conv, loaded[k].role, loaded[k].content,
                               strlen(loaded[k].content))) != LLMK_OK)
                goto fail;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: Ctrl-C at the prompt ends the read */

    bool tty = isatty(0);
    size_t n_hist = 0;
    int32_t bos = llmk_tokenizer_bos(tok);
    size_t bos_len = 0;
    const char *bos_text = bos >= 0 ? llmk_tokenizer_piece(tok, bos, &bos_len) : NULL;
    for (int turn = 1;; turn++) {
        if (tty) {
            fprintf(stderr, "> ");
            fflush(stderr);
        }
        interrupted = 0;
        size_t got = 0;
        if ((st = read_line(&line, &got)) == LLMK_NOT_FOUND) break; /* EOF, or Ctrl-C while waiting */
        if (st != LLMK_OK) goto fail;
        if (got == 0) {
            turn--;
            continue;
        }
        if ((st = conv_add(&conv, "user", line, (size_t)got)) != LLMK_OK) goto fail;

        /* The whole conversation, as the template renders it. */
        size_t text_len = 0;
        free(text);
        text = NULL;
        if ((st = llmk_chat_render(tp, conv.m, conv.n, true, &text, &text_len)) != LLMK_OK) goto fail;
        bool add_bos = llmk_tokenizer_add_bos(tok) &&
                       !(bos_text && bos_len && text_len >= bos_len && !memcmp(text, bos_text, bos_len));
        size_t n_ids = 0;
        st = llmk_tokenize(tok, text, text_len, add_bos, true, ids, ids_cap, &n_ids);
        if (st == LLMK_BUFFER_TOO_SMALL || n_ids >= (size_t)n_ctx) {
            st = llmk_fail(LLMK_CONTEXT_FULL,
                           "the conversation is %zu tokens, the context holds %lld (use --ctx)",
                           n_ids, (long long)n_ctx);
            goto fail;
        }
        if (st != LLMK_OK) goto fail;
        /* Reuse the longest common prefix; at least one token is evaluated
         * so there are logits for the reply. */
        size_t reuse = 0;
        while (reuse < n_hist && reuse < n_ids && hist[reuse] == ids[reuse]) reuse++;
        if (reuse == n_ids) reuse--;
        if ((st = llmk_session_truncate(s, (int32_t)reuse)) != LLMK_OK) goto fail;
        memcpy(hist + reuse, ids + reuse, (n_ids - reuse) * sizeof *ids);
        n_hist = n_ids;
        if ((st = llmk_session_eval(s, ids + reuse, n_ids - reuse, logits, n_vocab, false)) != LLMK_OK)
            goto fail;
        if (verbose) {
            fprintf(stderr, "llmk chat: turn %d: reused %zu tokens, prefilled %zu tokens\n", turn,
                    reuse, n_ids - reuse);
            print_ids("prompt ids", turn, ids, n_ids);
        }

        /* The reply: streamed to stdout and kept for the conversation. */
        reply_len = 0;
        if ((st = reply_add(&reply, &reply_len, &reply_cap, "", 0)) != LLMK_OK) goto fail;
        llmk_detok_state ds = {0};
        char piece[256];
        size_t n_gen = 0, n_fed = 0;
        const char *why = "max tokens";
        llmk_sampler_reset(gc.smp);
        for (;;) {
            if (interrupted) {
                why = "interrupted";
                break;
            }
            int32_t id;
            if ((st = gen_choose(&gc, logits, n_vocab, &id)) != LLMK_OK) goto fail;
            n_gen++;
            if (llmk_tokenizer_is_eog(tok, id)) {
                why = "end of turn";
                break;
            }
            size_t np = 0;
            if (llmk_detok_feed(tok, &ds, id, false, piece, sizeof piece, &np) == LLMK_OK) {
                if ((st = reply_add(&reply, &reply_len, &reply_cap, piece, np)) != LLMK_OK) goto fail;
                if (gen_write(&gc, stdout, piece, np)) {
                    why = "stop string";
                    break;
                }
                if ((st = cli_stdout_status()) != LLMK_OK) goto fail;
            }
            if (llmk_max_tokens_stop((double)n_gen, (double)n_predict) == 1.0) break;
            if (n_hist >= (size_t)n_ctx) {
                why = "context full";
                fprintf(stderr, "\nllmk chat: the context of %lld tokens is full; ending the reply\n",
                        (long long)n_ctx);
                break;
            }
            if ((st = llmk_session_eval(s, &id, 1, logits, n_vocab, false)) != LLMK_OK) goto fail;
            hist[n_hist++] = id;
            n_fed++;
        }
        size_t np = 0;
        if (llmk_detok_flush(tok, &ds, piece, sizeof piece, &np) == LLMK_OK && np) {
            if ((st = reply_add(&reply, &reply_len, &reply_cap, piece, np)) != LLMK_OK) goto fail;
            gen_write(&gc, stdout, piece, np);
        }
        gen_finish(&gc, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        /* The conversation keeps what was shown: text before a stop string. */
        size_t keep = reply_len;
        for (size_t k = 0; k < o.n_stops; k++) {
            char *hit = strstr(reply, o.stops[k]);
            if (hit && (size_t)(hit - reply) < keep) keep = (size_t)(hit - reply);
        }
        if ((st = conv_add(&conv, "assistant", reply, keep)) != LLMK_OK) goto fail;
        if (verbose)
            fprintf(stderr, "llmk chat: turn %d: generated %zu tokens (%zu evaluated), %s\n", turn,
                    n_gen, n_fed, why);
        if (save && (st = save_conv(save, model_path, &conv)) != LLMK_OK) goto fail;
    }
    goto done;
fail:
    rc = cli_report(cmd, st);
done:
    free(reply);
    free(loaded);
    free(hist_json);
    free(line);
    free(text);
    free(hist);
    free(ids);
    free(logits);
    conv_free(&conv);
    gen_ctx_free(&gc);
    llmk_chat_template_free(tp);
    llmk_session_free(s);
    llmk_model_free(m);
    return rc;
}
