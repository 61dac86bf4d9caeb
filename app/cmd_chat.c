/* llmk chat: an interactive conversation. Each turn re-renders the whole
 * conversation with the model's chat template, tokenizes it, and prefills
 * only what differs from the tokens already in the KV cache (normally just
 * the new turn); when the context is full the oldest turns are dropped.
 * Ctrl-C stops the current reply; end of input ends the chat. Reading the
 * message and the slash commands are chat_line.c's. */
#include "chat_line.h"
#include "cli.h"
#include "llmk_formulas.h"
#include "gen_opts.h"
#include "spec_opts.h"
#include "opts.h"
#include "progress.h"

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
    "  A line ending in '\\' continues on the next; /help lists the commands\n"
    "  (/clear, /system, /save, /load, /exit; '//' sends a '/'). On a terminal\n"
    "  the line can be edited and earlier lines recalled (libedit). A full context\n"
    "  drops the oldest turns. Ctrl-C stops a reply; EOF ends.\n";
static const char EPILOG[] = "(chat's default temperature is 0.8)\n";

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
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
    bool verbose, long_ctx, conversation;
    struct cli_progress_flags pf;
    double load_s; /* llmk_model_load's time, for -v */
    struct gen_opts go;
    struct spec_opts so;
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
        CLI_OPT_VERBOSE(&o->verbose, "the load's times, kernels and threads, and per-turn token counts (reused / "
                                     "prefilled / generated) on stderr"),
        CLI_OPT_LOG_DISABLE(&o->go.quiet, "no seed, per-turn or progress lines on stderr (errors still)"),
        CLI_OPT_PROGRESS(&o->pf),
        /* llama-cli's spellings for "a conversation": chat always is one */
        CLI_FLAG2("--conversation", "-cnv", 0, &o->conversation, "accepted and ignored: chat is always a conversation"),
        CLI_FLAG("--interactive", 'i', &o->conversation, "the same as --conversation"),
    };
    const struct cli_opt_section sections[] = {{NULL, table, CLI_LEN(table)}, gen_opts_section(&o->go),
                                               spec_opts_section(&o->so)};
    struct cli_cmd spec = {.name = CMD, .usage = USAGE, .epilog = EPILOG, .sections = sections,
                           .n_sections = CLI_LEN(sections)};
    int rc = cli_opts_parse(&spec, argc, argv);
    if (rc != CLI_OPTS_GO || (rc = spec_opts_check(CMD, &o->so)) != CLI_OPTS_GO) return rc;
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
    llmk_model *draft; /* --model-draft */
    llmk_spec *spec;   /* NULL without --spec */
    struct chat_conv conv;
    struct chat_input in;
    int64_t n_ctx;
    size_t n_vocab, ids_cap, n_hist;
    int32_t *hist, *ids; /* the tokens in the KV cache, in order, then room for the pending one; this turn's
                          * conversation */
    float *logits;
    char *text, *reply; /* the rendered conversation; the reply (its answer: a harmony reply's final channel) */
    size_t reply_len, reply_cap;
    bool harmony;          /* a harmony template (gpt-oss): the analysis channel is reasoning, on stderr */
    llmk_harmony_state hs; /* this reply's */
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
    struct cli_progress load; /* drawn once the init (the repacking) has taken a second */
    cli_progress_start(&load, CMD, cli_progress_wanted(&o->pf, o->go.quiet), 1.0);
    sp.progress_callback = cli_progress_load, sp.progress_callback_user_data = &load;
    double t_init = cli_now();
    st = llmk_session_init(m, &sp, &c->s);
    cli_progress_clear(&load);
    if (st != LLMK_OK) return st;
    if (o->verbose)
        cli_log_load(CMD, o->load_s, cli_now() - t_init, llmk_session_kernels(c->s), sp.n_threads, o->kv_type);
    c->n_ctx = llmk_session_n_ctx(c->s);
    c->n_vocab = (size_t)hp->n_vocab;
    c->ids_cap = (size_t)c->n_ctx + 1;
    c->hist = malloc(((size_t)c->n_ctx + 1) * sizeof *c->hist);
    c->ids = malloc(c->ids_cap * sizeof *c->ids);
    c->logits = malloc(c->n_vocab * sizeof *c->logits);
    if (!c->hist || !c->ids || !c->logits)
        return cli_fail(LLMK_OUT_OF_MEMORY, "chat buffers for %lld tokens", (long long)c->n_ctx);
    if ((st = gen_ctx_init(&c->gc, CMD, &o->go, c->n_vocab)) != LLMK_OK) return st;
    if ((st = gen_ctx_grammar(&c->gc, &o->go, c->tok)) != LLMK_OK) return st; /* every reply obeys it */
    if ((st = spec_opts_init(&o->so, m, sp.n_threads, &c->draft, &c->spec)) != LLMK_OK) return st;
    if (o->go.system && (st = chat_conv_add(&c->conv, "system", o->go.system, strlen(o->go.system))) != LLMK_OK)
        return st;
    if (o->history && (st = chat_conv_load(&c->conv, o->history)) != LLMK_OK) return st;
    int32_t bos = llmk_tokenizer_bos(c->tok);
    c->bos_text = bos >= 0 ? llmk_tokenizer_piece(c->tok, bos, &c->bos_len) : NULL;
    c->harmony = !strcmp(llmk_chat_template_name(c->tp), "harmony") && llmk_harmony_init(c->tok, &c->hs) == LLMK_OK;
    return LLMK_OK;
}

static void chat_free(struct chat *c) {
    free(c->reply);
    free(c->text);
    free(c->hist);
    free(c->ids);
    free(c->logits);
    chat_conv_free(&c->conv);
    chat_input_free(&c->in);
    gen_ctx_free(&c->gc);
    if (!c->o->go.quiet) spec_opts_report(CMD, &c->o->so, c->spec, stderr);
    llmk_spec_free(c->spec);
    llmk_model_free(c->draft);
    llmk_chat_template_free(c->tp);
    llmk_session_free(c->s);
}

/* Messages as the template renders them, tokenized into c->ids. */
static int render_msgs(struct chat *c, const llmk_chat_message *msgs, size_t n, size_t *n_ids) {
    size_t text_len = 0;
    free(c->text);
    c->text = NULL;
    llmk_chat_render_opts ro = {.add_generation_prompt = true, .reasoning_effort = c->o->go.reasoning_effort};
    int st = llmk_chat_render_with(c->tp, msgs, n, &ro, &c->text, &text_len);
    if (st != LLMK_OK) return st;
    bool add_bos = llmk_tokenizer_add_bos(c->tok) &&
                   !(c->bos_text && c->bos_len && text_len >= c->bos_len && !memcmp(c->text, c->bos_text, c->bos_len));
    st = llmk_tokenize(c->tok, c->text, text_len, add_bos, true, c->ids, c->ids_cap, n_ids);
    if (st == LLMK_BUFFER_TOO_SMALL) *n_ids = c->ids_cap; /* more than the context holds */
    return st == LLMK_BUFFER_TOO_SMALL ? LLMK_OK : st;
}

/* Whether the system messages and the newest user message alone fit: when
 * they do not (*too_long), no old turn is dropped for a message that is
 * refused anyway, and *n_ids is the size of that shortest conversation. */
static int newest_fits(struct chat *c, size_t first, size_t last, size_t *n_ids, bool *too_long) {
    llmk_chat_message *m = malloc((first + 1) * sizeof *m);
    if (!m) return cli_fail(LLMK_OUT_OF_MEMORY, "%zu messages", first + 1);
    memcpy(m, c->conv.m, first * sizeof *m);
    m[first] = c->conv.m[last];
    size_t n = 0;
    int st = render_msgs(c, m, first + 1, &n);
    free(m);
    *too_long = st == LLMK_OK && n >= (size_t)c->n_ctx;
    if (*too_long) *n_ids = n;
    else if (st == LLMK_OK) st = render_msgs(c, c->conv.m, c->conv.n, n_ids);
    return st;
}

/* Makes the conversation fit the context: drops the oldest turns (a user
 * message and what follows it up to the next one; the system message stays)
 * until the prompt leaves room for a reply, so a long chat goes on instead of
 * ending. The room is a quarter of the context (at most -n): without it each
 * turn would fill the context after a few reply tokens. LLMK_CONTEXT_FULL
 * when the newest user message alone does not fit; it is then taken back. */
static int fit_turn(struct chat *c, size_t *n_ids) {
    int64_t room = c->n_ctx / 4;
    if (c->o->n_predict > 0 && c->o->n_predict < room) room = c->o->n_predict;
    size_t first = chat_conv_n_system(&c->conv), last = c->conv.n - 1; /* the newest user message */
    int dropped = 0, st = render_msgs(c, c->conv.m, c->conv.n, n_ids);
    bool too_long = false;
    if (st == LLMK_OK && *n_ids >= (size_t)c->n_ctx && first < last)
        st = newest_fits(c, first, last, n_ids, &too_long);
    while (st == LLMK_OK && !too_long && first < last && (int64_t)*n_ids + room > c->n_ctx) {
        size_t end = first + 1;
        while (end < last && strcmp(c->conv.m[end].role, "user")) end++;
        chat_conv_remove(&c->conv, first, end - first);
        last -= end - first;
        dropped++;
        st = render_msgs(c, c->conv.m, c->conv.n, n_ids);
    }
    if (st != LLMK_OK) return st;
    if (dropped)
        fprintf(stderr, "llmk chat: context full: dropped the oldest %d turn%s\n", dropped, dropped == 1 ? "" : "s");
    if (*n_ids < (size_t)c->n_ctx) return LLMK_OK;
    chat_conv_remove(&c->conv, last, 1);
    return cli_fail(LLMK_CONTEXT_FULL, "the conversation is %s%zu tokens, the context holds %lld (use --ctx); "
                    "the message was not sent", *n_ids == c->ids_cap ? "over " : "", *n_ids - (*n_ids == c->ids_cap),
                    (long long)c->n_ctx);
}

/* Only what differs from the KV cache is evaluated, leaving the reply's
 * first logits. */
static int prefill_turn(struct chat *c, int turn) {
    size_t n_ids = 0;
    int st = fit_turn(c, &n_ids);
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
    if (c->spec && (st = llmk_spec_prefill(c->spec, c->ids, n_ids)) != LLMK_OK) return st; /* a draft model's */
    if (c->o->verbose) {
        fprintf(stderr, "llmk chat: turn %d: reused %zu tokens, prefilled %zu tokens\n", turn, reuse, n_ids - reuse);
        print_ids("prompt ids", turn, c->ids, n_ids);
    }
    return LLMK_OK;
}

/* One reply in progress: what the token loop shares with its chooser. */
struct reply {
    struct chat *c;
    llmk_detok_state ds;
    size_t n_gen, n_fed;
    const char *why;
    int st;
};

/* Choose a token from logits and show it; true when the reply ends with it
 * (end of turn, stop string, -n; the reason in r->why), r->st on failure. */
static bool reply_token(struct reply *r, const float *logits, int32_t *id) {
    struct chat *c = r->c;
    char piece[256];
    size_t np = 0;
    if ((r->st = gen_choose(&c->gc, logits, c->n_vocab, id)) != LLMK_OK) return true;
    r->n_gen++;
    if (llmk_tokenizer_is_eog(c->tok, *id)) return r->why = "end of turn", true;
    llmk_harmony_part part = LLMK_HARMONY_CONTENT;
    int dst = c->harmony ? llmk_harmony_text(&c->hs, c->tok, &r->ds, *id, piece, sizeof piece, &np, &part)
                         : llmk_detok_feed(c->tok, &r->ds, *id, false, piece, sizeof piece, &np);
    if (dst != LLMK_OK) np = 0;
    if (part == LLMK_HARMONY_REASONING) {
        /* shown on stderr, not kept: the template renders past turns' final channel only */
        fwrite(piece, 1, np, stderr);
    } else if (part == LLMK_HARMONY_CONTENT && np) {
        if ((r->st = reply_add(&c->reply, &c->reply_len, &c->reply_cap, piece, np)) != LLMK_OK) return true;
        if (gen_write(&c->gc, stdout, piece, np)) return r->why = "stop string", true;
        if ((r->st = cli_stdout_status()) != LLMK_OK) return true;
    }
    if (gen_grammar_done(&c->gc)) return r->why = "grammar complete", true;
    return c->o->n_predict > 0 && llmk_max_tokens_stop((double)r->n_gen, (double)c->o->n_predict) == 1.0;
}

static bool reply_stops(struct reply *r) {
    if (interrupted) return r->why = "interrupted", true;
    if (r->c->n_hist < (size_t)r->c->n_ctx) return false;
    r->why = "context full";
    fprintf(stderr, "\nllmk chat: the context of %lld tokens is full; ending the reply\n", (long long)r->c->n_ctx);
    return true;
}

static int spec_choose(void *user, const float *logits, int32_t *token, bool *end) {
    struct reply *r = user;
    *end = reply_token(r, logits, token);
    return r->st;
}

/* The reply's tokens: one evaluation per token, or speculative steps (the
 * same tokens). */
static int reply_tokens(struct reply *r) {
    struct chat *c = r->c;
    int32_t id;
    if (reply_token(r, c->logits, &id)) return r->st;
    while (!reply_stops(r)) {
        if (!c->spec) {
            if ((r->st = llmk_session_eval(c->s, &id, 1, c->logits, c->n_vocab, false)) != LLMK_OK) return r->st;
            c->hist[c->n_hist++] = id;
            r->n_fed++;
            if (reply_token(r, c->logits, &id)) return r->st;
            continue;
        }
        /* hist[n_hist] is the pending token; the step writes its tokens after it */
        c->hist[c->n_hist] = id;
        size_t n_out = 0;
        bool end = false;
        int st = llmk_session_spec_step(c->s, c->spec, c->hist, c->n_hist + 1, spec_choose, r,
                                        c->hist + c->n_hist + 1, (size_t)c->n_ctx - c->n_hist, &n_out, &end);
        if (st != LLMK_OK) return st;
        c->n_hist += n_out, r->n_fed += n_out;
        id = c->hist[c->n_hist];
        if (end) return r->st;
    }
    return r->st;
}

/* The reply: streamed to stdout until the end of the turn, -n, a stop
 * string, Ctrl-C or a full context, and added to the conversation. */
static int reply_turn(struct chat *c, int turn) {
    const struct chat_opts *o = c->o;
    c->reply_len = 0;
    int st = reply_add(&c->reply, &c->reply_len, &c->reply_cap, "", 0);
    if (st != LLMK_OK) return st;
    struct reply r = {.c = c, .why = "max tokens"};
    char piece[256];
    size_t np = 0;
    llmk_sampler_reset(c->gc.smp);
    if (c->harmony) llmk_harmony_init(c->tok, &c->hs); /* each reply starts outside a message */
    if ((st = reply_tokens(&r)) != LLMK_OK) return st;
    llmk_detok_state ds = r.ds;
    size_t n_gen = r.n_gen, n_fed = r.n_fed;
    const char *why = r.why;
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
    if ((st = chat_conv_add(&c->conv, "assistant", c->reply, keep)) != LLMK_OK) return st;
    if (o->verbose)
        fprintf(stderr, "llmk chat: turn %d: generated %zu tokens (%zu evaluated), %s\n", turn, n_gen, n_fed, why);
    return LLMK_OK;
}

int cmd_chat(int argc, char **argv) {
    struct chat_opts o = {.n_predict = 1024, .path = LLMK_PATH_FAST, .kv_type = (uint32_t)CLI_KV_DEFAULT};
    gen_opts_default(&o.go, 0.8);
    spec_opts_default(&o.so);
    int rc = parse_args(&o, argc, argv);
    if (rc != CLI_OPTS_GO) return rc;
    rc = CLI_EXIT_OK;
    llmk_model *m = NULL;
    struct chat c = {.o = &o};
    int st = LLMK_OK;
    /* --save must not name the model: refused before anything is loaded. */
    if (o.save && (st = llmk_output_check(o.save, &o.model, 1)) != LLMK_OK) goto fail;
    double t_load = cli_now();
    if ((st = llmk_model_load(o.model, &m)) != LLMK_OK) goto fail;
    o.load_s = cli_now() - t_load;
    if ((st = chat_init(&c, m)) != LLMK_OK) goto fail;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: Ctrl-C at the prompt ends the read */

    c.in.tty = isatty(0);
    c.in.interrupted = &interrupted;
    for (int turn = 1;; turn++) {
        interrupted = 0;
        size_t got = 0;
        if ((st = chat_input_read(&c.in, &got)) == LLMK_NOT_FOUND) break; /* EOF, or Ctrl-C while waiting */
        if (st != LLMK_OK) goto fail;
        const char *msg = c.in.buf;
        enum chat_line_action act = chat_line_command(&msg, &got, &c.conv, o.model);
        if (act == CHAT_LINE_EXIT) break;
        if (act == CHAT_LINE_SKIP || got == 0) {
            turn--;
            continue;
        }
        if ((st = chat_conv_add(&c.conv, "user", msg, got)) != LLMK_OK) goto fail;
        if ((st = prefill_turn(&c, turn)) == LLMK_CONTEXT_FULL) {
            cli_report(CMD, st); /* too long a message: said, and the chat goes on */
            turn--;
            continue;
        }
        if (st != LLMK_OK || (st = reply_turn(&c, turn)) != LLMK_OK) goto fail;
        if (o.save && (st = chat_conv_save(o.save, o.model, &c.conv)) != LLMK_OK) goto fail;
    }
    goto done;
fail:
    rc = cli_report(CMD, st);
done:
    chat_free(&c);
    llmk_model_free(m);
    return rc;
}
