/* llmk run: generate text from a prompt, streaming it to stdout, and end with
 * a stats line on stderr. */
#include "cli.h"
#include "llmk_primitives.h"
#include "gen_opts.h"
#include "spec_opts.h"
#include "opts.h"
#include "progress.h"


#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char CMD[] = "run";
static const char USAGE[] =
    "usage: llmk run [-m MODEL] -p PROMPT | -f FILE [-n N] [--temp T] [-s SEED] [-t THREADS] [--raw]\n"
    "                [--path ref|f32|fast] [--kv-type f32|f16|q8_0] [-c N] [--special] [-cnv]\n"
    "  Streams the model's answer to PROMPT to stdout; a stats line goes to stderr.\n"
    "  When the model has a chat template, PROMPT is one user turn in it and the\n"
    "  answer ends at the end of the turn; --raw continues the text instead (and\n"
    "  echoes it first, as llama-cli does). A harmony model's (gpt-oss) answer is\n"
    "  its final channel; its reasoning (the analysis channel) goes to stderr.\n";
static const char EPILOG[] =
    "(defaults as llama-cli: temperature 0.8, a random seed that is reported; --temp 0 is greedy)\n";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the token-choice point ----------------------------------------------
 * Everything that decides the next token from the logits happens here: the
 * sampler chain of app/gen_opts.c (src/sample.c), greedy at --temp 0. The
 * reference path, when the choice is plain greedy (no penalty, no bias), picks
 * with seed 000's llmk_greedy_argmax_flat over the f64 logits, as the seed's
 * reference decode loop composes it; the first maximum wins either way, so
 * the tokens are the sampler's. */
static bool plain_greedy(const llmk_sampler_params *p) {
    return p->temperature <= 0 && p->n_bias == 0 && p->repeat_penalty == 1.0 && p->frequency_penalty == 0 &&
           p->presence_penalty == 0;
}

static int choose_token(struct gen_ctx *c, const float *logits, double *logits64, int32_t n_vocab, int32_t *id) {
    if (!logits64) return gen_choose(c, logits, (size_t)n_vocab, id);
    for (int32_t i = 0; i < n_vocab; i++) logits64[i] = logits[i];
    int64_t best;
    double v;
    int st = llmk_greedy_argmax_flat(logits64, (size_t)n_vocab, n_vocab, &best, &v);
    if (st == LLMK_OK) *id = (int32_t)best;
    return st;
}

struct run_opts {
    const char *model, *prompt, *prompt_file, *prompt_ids;
    long n_predict, threads, n_ctx;
    int path;
    uint32_t kv_type;
    bool print_ids, special, long_ctx, raw, conversation, escape, no_display, verbose;
    struct cli_progress_flags pf;
    double load_s;       /* llmk_model_load's time, for -v */
    struct gen_opts go;
    struct spec_opts so;
    char *prompt_buf;    /* the prompt read from -f or stdin, or unescaped (-e); else NULL */
    const char *template_name; /* the chat template's family (chatml, ...) when chatting */
    const char **chat_argv; /* --conversation: the arguments handed on to llmk chat */
    int chat_argc;
};

/* --conversation: run's arguments for llmk chat, less the conversation flags
 * and --chat, with -p TEXT as the system message (as llama-cli -cnv -p). */
static int conversation_args(struct run_opts *o, const struct cli_cmd *spec, int argc, char **argv) {
    if (o->prompt_ids || o->prompt_file || o->print_ids || o->raw || o->escape || o->special || o->no_display)
        return cli_usage_error(CMD, "--conversation runs llmk chat, which takes none of -f, --prompt-ids, "
                                    "--print-ids, --raw, -e, --special and --no-display-prompt");
    if (!(o->chat_argv = malloc(((size_t)argc + 2) * sizeof *o->chat_argv))) {
        fprintf(stderr, "llmk %s: out of memory\n", CMD);
        return CLI_EXIT_FAIL;
    }
    int n = 0;
    o->chat_argv[n++] = "chat";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-cnv") || !strcmp(a, "--conversation") || !strcmp(a, "-i") || !strcmp(a, "--interactive") ||
            !strcmp(a, "--chat"))
            continue;
        bool value = cli_opts_takes_value(spec, a);
        if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) a = "--system";
        else if (!strncmp(a, "--prompt=", 9)) {
            o->chat_argv[n++] = "--system";
            a += 9;
        }
        o->chat_argv[n++] = a;
        if (value && i + 1 < argc) o->chat_argv[n++] = argv[++i];
    }
    o->chat_argv[n] = NULL;
    o->chat_argc = n;
    return CLI_OPTS_GO;
}

/* The checks between options that the table cannot state. */
static int check_args(const struct run_opts *o) {
    int sources = !!o->prompt + !!o->prompt_file + !!o->prompt_ids;
    if (sources == 0) return cli_usage_error(CMD, "-p PROMPT (or -f FILE, or --prompt-ids) is required");
    if (sources > 1) return cli_usage_error(CMD, "-p, -f and --prompt-ids exclude each other");
    if (o->go.chat && o->prompt_ids) return cli_usage_error(CMD, "--chat needs -p PROMPT or -f FILE");
    if (o->raw && (o->go.chat || o->go.system || o->go.chat_template))
        return cli_usage_error(CMD, "--raw excludes --chat, --system and --chat-template");
    if (o->escape && o->prompt_ids) return cli_usage_error(CMD, "-e applies to -p or -f, not --prompt-ids");
    return CLI_OPTS_GO;
}

/* Parses and checks the options, then fills in the defaults; CLI_OPTS_GO,
 * or the exit code. */
static int parse_args(struct run_opts *o, int argc, char **argv) {
    const struct cli_opt table[] = {
        CLI_OPT_MODEL(&o->model),
        CLI_STR("--prompt", 'p', &o->prompt, "TEXT", "the prompt ('-': standard input)"),
        CLI_STR("--file", 'f', &o->prompt_file, "FILE",
                "read the prompt from FILE ('-': standard input); one final newline is dropped"),
        CLI_STR("--prompt-ids", 0, &o->prompt_ids, "LIST",
                "use these comma-separated ids as the prompt (no BOS added, no chat template)"),
        CLI_LONG("--n-predict", 'n', &o->n_predict, -1, 1 << 24, "N",
                 "tokens to generate at most (default 128; -1: until an end-of-generation token or a full "
                 "context); stops early at an end-of-generation token"),
        CLI_FLAG2("--raw", "--no-chat", 0, &o->raw,
                  "plain completion: no chat template, and the prompt is echoed before its continuation"),
        CLI_FLAG("--chat", 0, &o->go.chat,
                 "format the prompt as one user turn with the chat template (the default when the model has one)"),
        CLI_FLAG2("--conversation", "-cnv", 0, &o->conversation,
                  "interactive conversation: runs llmk chat with these options, -p as the system message"),
        CLI_FLAG("--interactive", 'i', &o->conversation, "the same as --conversation"),
        CLI_FLAG("--escape", 'e', &o->escape, "process escapes in the prompt: \\n \\r \\t \\' \\\" \\\\ \\xHH"),
        CLI_FLAG("--no-display-prompt", 0, &o->no_display, "with --raw, do not echo the prompt"),
        CLI_OPT_THREADS(&o->threads),
        CLI_OPT_PATH(&o->path),
        CLI_OPT_KV_TYPE(&o->kv_type, CLI_KV_TYPE_HELP),
        CLI_OPT_CTX(&o->n_ctx, "context size (default: prompt + N, at most the model's; with -n -1, "
                               "min(4096, the model's))"),
        CLI_OPT_LONG_CTX(&o->long_ctx),
        CLI_FLAG("--special", 0, &o->special, "recognise special-token texts (<|im_start|>) in the prompt"),
        CLI_FLAG("--print-ids", 0, &o->print_ids,
                 "print the generated ids (end-of-generation token included) as one JSON array on one line "
                 "instead of text"),
        CLI_OPT_VERBOSE(&o->verbose, "also say how the prompt was formatted (chat template or raw), and the "
                                     "load's times, kernels and threads"),
        CLI_OPT_LOG_DISABLE(&o->go.quiet, "no seed, stats or progress lines on stderr (errors still)"),
        CLI_OPT_PROGRESS(&o->pf),
    };
    const struct cli_opt_section sections[] = {{NULL, table, CLI_LEN(table)}, gen_opts_section(&o->go),
                                               spec_opts_section(&o->so)};
    struct cli_cmd spec = {.name = CMD, .usage = USAGE, .epilog = EPILOG, .sections = sections,
                           .n_sections = CLI_LEN(sections)};
    int rc = cli_opts_parse(&spec, argc, argv);
    if (rc != CLI_OPTS_GO) return rc;
    if (o->conversation) return conversation_args(o, &spec, argc, argv);
    if (o->go.quiet) o->verbose = false; /* as chat: --log-disable wins */
    if ((rc = check_args(o)) != CLI_OPTS_GO || (rc = spec_opts_check(CMD, &o->so)) != CLI_OPTS_GO) return rc;
    if (!o->model) o->model = cli_default_model();
    o->kv_type = cli_kv_type_or_default(o->kv_type, o->path);
    return CLI_OPTS_GO;
}

/* llama.cpp's escapes (its -e): \n \r \t \' \" \\ and \xHH; any other
 * backslash stays as written, and so does \x00, which would cut the prompt
 * short. In place: the text only shrinks. */
static void unescape(char *s) {
    char *w = s;
    for (const char *r = s; *r; r++) {
        char c = *r == '\\' ? r[1] : 0, out = 0;
        switch (c) {
        case 'n': out = '\n'; break;
        case 'r': out = '\r'; break;
        case 't': out = '\t'; break;
        case '\'': case '"': case '\\': out = c; break;
        case 'x':
            if (isxdigit((unsigned char)r[2]) && isxdigit((unsigned char)r[3])) {
                char hex[3] = {r[2], r[3], 0};
                out = (char)strtol(hex, NULL, 16);
                if (out) r += 2; /* the two digits; the 'x' below */
            }
            break;
        default: break;
        }
        if (out) {
            *w++ = out;
            r++;
        } else {
            *w++ = *r;
        }
    }
    *w = 0;
}

/* The prompt text: -p as given, or read from -f FILE or standard input
 * (-p -, -f -), then unescaped with -e. Status. */
static int load_prompt(struct run_opts *o) {
    const char *from = o->prompt_file ? o->prompt_file : o->prompt && !strcmp(o->prompt, "-") ? "-" : NULL;
    if (from) {
        size_t len = 0;
        int st = cli_read_file(from, &o->prompt_buf, &len);
        if (st != LLMK_OK) return st;
        if (strlen(o->prompt_buf) != len)
            return cli_fail(LLMK_INVALID_ARGUMENT, "the prompt (%s) holds a NUL byte; a prompt is text",
                            strcmp(from, "-") ? from : "standard input");
        if (len && o->prompt_buf[len - 1] == '\n') o->prompt_buf[--len] = 0; /* as llama-cli -f */
        if (len && o->prompt_buf[len - 1] == '\r') o->prompt_buf[--len] = 0;
    } else if (o->escape && o->prompt && !(o->prompt_buf = strdup(o->prompt))) {
        return cli_fail(LLMK_OUT_OF_MEMORY, "prompt of %zu bytes", strlen(o->prompt));
    }
    if (o->prompt_buf) {
        if (o->escape) unescape(o->prompt_buf);
        o->prompt = o->prompt_buf;
    }
    return LLMK_OK;
}

/* Chat formatting or plain completion. --chat, --system or --chat-template
 * ask for the template (an unknown one is an error); otherwise a prompt (not
 * --prompt-ids) goes through the model's template when llmk knows it,
 * unless --raw. Sets o->go.chat and o->template_name. Status. */
static int choose_chat(struct run_opts *o, const llmk_model *m) {
    bool asked = o->go.chat || o->go.system || o->go.chat_template;
    if (!asked && (o->raw || !o->prompt)) return LLMK_OK;
    const llmk_gguf *g = llmk_model_gguf(m);
    const char *text;
    if (!asked && llmk_gguf_get_str(g, "tokenizer.chat_template", &text, NULL) != LLMK_OK) return LLMK_OK;
    llmk_chat_template *tp = NULL;
    int st = llmk_chat_template_from_gguf(g, o->go.chat_template, &tp);
    if (st == LLMK_OK) {
        o->go.chat = true;
        o->template_name = llmk_chat_template_name(tp); /* a static name */
    } else if (!asked) {
        fprintf(stderr, "llmk %s: note: llmk does not know the model's chat template (%s); plain completion "
                        "(--chat-template NAME chooses one)\n", CMD, llmk_last_error());
        st = LLMK_OK;
    }
    llmk_chat_template_free(tp);
    return st;
}

/* -p's token ids (malloc'd), through the chat template when chatting. */
static int tokenize_prompt(const struct run_opts *o, const llmk_model *m, const llmk_tokenizer *tok, int32_t **ids,
                           size_t *n) {
    const char *prompt = o->prompt;
    char *chat_text = NULL;
    bool add_bos = tok && llmk_tokenizer_add_bos(tok), special = o->special;
    int st = LLMK_OK;
    if (o->go.chat) {
        if ((st = gen_chat_prompt(llmk_model_gguf(m), tok, &o->go, prompt, &chat_text, &add_bos)) != LLMK_OK)
            return st;
        prompt = chat_text;
        special = true; /* the template's own markers */
    }
    size_t len = strlen(prompt), cap = len + 8;
    if (!(*ids = malloc(cap * sizeof **ids))) st = cli_fail(LLMK_OUT_OF_MEMORY, "prompt ids");
    else st = llmk_tokenize(tok, prompt, len, add_bos, special, *ids, cap, n);
    if (st == LLMK_OK && o->verbose) {
        if (o->go.chat)
            fprintf(stderr, "llmk %s: chat template %s: the prompt is one user turn, %zu tokens\n", CMD,
                    o->template_name, *n);
        else fprintf(stderr, "llmk %s: plain completion of the prompt, %zu tokens\n", CMD, *n);
    }
    free(chat_text);
    return st;
}

/* What the decode loop works with. */
struct decode {
    llmk_session *s;
    const llmk_tokenizer *tok; /* NULL with --prompt-ids --print-ids and no tokenizer */
    struct gen_ctx ch;
    float *logits;
    double *logits64; /* the reference path's greedy choice (choose_token), else NULL */
    int32_t *hist; /* the prompt, then the generated ids */
    int32_t *gen;  /* hist + the prompt's length */
    char *text;   /* one token's text */
    size_t text_cap, n_vocab, n_gen, n_decoded;
    llmk_detok_state ds;
    llmk_model *draft; /* --model-draft */
    llmk_spec *spec;   /* NULL without --spec */
    bool harmony;          /* a harmony chat (gpt-oss): the analysis channel goes to stderr, markers nowhere */
    llmk_harmony_state hs;
};

static int decode_init(struct decode *d, const struct run_opts *o, const int32_t *ids, size_t n_prompt) {
    d->logits = malloc(d->n_vocab * sizeof *d->logits);
    if ((d->hist = malloc((n_prompt + (size_t)o->n_predict + 1) * sizeof *d->hist))) {
        memcpy(d->hist, ids, n_prompt * sizeof *ids);
        d->gen = d->hist + n_prompt;
    }
    int st = gen_ctx_init(&d->ch, CMD, &o->go, d->n_vocab);
    if (st == LLMK_OK) st = gen_ctx_grammar(&d->ch, &o->go, d->tok);
    if (st != LLMK_OK) return st;
    /* the reference path's own argmax would bypass the grammar's mask: only without one */
    if (o->path == LLMK_PATH_REF && plain_greedy(&o->go.sp) && !d->ch.gstate && !(d->logits64 = malloc(d->n_vocab * sizeof(double))))
        return cli_fail(LLMK_OUT_OF_MEMORY, "generation buffers");
    if (!d->logits || !d->gen) return cli_fail(LLMK_OUT_OF_MEMORY, "generation buffers");
    /* A token's text is at most its stored piece (byte-level and SentencePiece
     * pieces only shrink when decoded) plus bytes held back from earlier tokens. */
    d->text_cap = 64;
    for (int32_t i = 0; d->tok && i < (int32_t)llmk_tokenizer_n_vocab(d->tok); i++) {
        size_t len = 0;
        if (llmk_tokenizer_piece(d->tok, i, &len) && len + 16 > d->text_cap) d->text_cap = len + 16;
    }
    if (!(d->text = malloc(d->text_cap)))
        return cli_fail(LLMK_OUT_OF_MEMORY, "text buffer of %zu bytes", d->text_cap);
    return LLMK_OK;
}

static void decode_free(struct decode *d) {
    free(d->text);
    free(d->hist);
    llmk_spec_free(d->spec);
    llmk_model_free(d->draft);
    free(d->logits);
    free(d->logits64);
    gen_ctx_free(&d->ch);
    llmk_session_free(d->s);
}

/* Record and print one chosen token; true when the generation ends with it
 * (an end-of-generation token, a stop string, -n). *st: a print failure. */
static bool emit_token(const struct run_opts *o, struct decode *d, int32_t id, int *st) {
    *st = LLMK_OK;
    d->gen[d->n_gen++] = id;
    if (d->tok && llmk_tokenizer_is_eog(d->tok, id)) return true;
    if (!o->print_ids) {
        size_t nt = 0;
        llmk_harmony_part part = LLMK_HARMONY_CONTENT;
        *st = d->harmony ? llmk_harmony_text(&d->hs, d->tok, &d->ds, id, d->text, d->text_cap, &nt, &part)
                         : llmk_detok_feed(d->tok, &d->ds, id, false, d->text, d->text_cap, &nt);
        if (*st != LLMK_OK) return true;
        if (part == LLMK_HARMONY_REASONING) {
            fwrite(d->text, 1, nt, stderr); /* as llmk chat: the reasoning beside the answer, not in it */
        } else if (part == LLMK_HARMONY_CONTENT) {
            if (gen_write(&d->ch, stdout, d->text, nt)) return true; /* a stop string: it and what follows are not printed */
            if ((*st = cli_stdout_status()) != LLMK_OK) return true;
        }
    }
    if (gen_grammar_done(&d->ch)) return true; /* the grammar is complete and nothing can follow */
    return (long)d->n_gen >= o->n_predict;
}

static bool context_full(const struct decode *d) {
    if (llmk_session_pos(d->s) < llmk_session_n_ctx(d->s)) return false;
    fprintf(stderr, "\nllmk run: note: context of %d tokens is full\n", llmk_session_n_ctx(d->s));
    return true;
}

/* After the prefill: pick, print and evaluate tokens until -n, an
 * end-of-generation token, a stop string or a full context. */
static int generate(const struct run_opts *o, struct decode *d) {
    while ((long)d->n_gen < o->n_predict) {
        int32_t id;
        int st = choose_token(&d->ch, d->logits, d->logits64, (int32_t)d->n_vocab, &id);
        if (st != LLMK_OK) return st;
        if (emit_token(o, d, id, &st) || context_full(d)) return st;
        if ((st = llmk_session_eval(d->s, &id, 1, d->logits, d->n_vocab, false)) != LLMK_OK) return st;
        d->n_decoded++;
    }
    return LLMK_OK;
}

/* The speculative loop's chooser: the plain loop's choice and output. */
struct spec_choice {
    const struct run_opts *o;
    struct decode *d;
};
static int spec_choose(void *user, const float *logits, int32_t *token, bool *end) {
    struct spec_choice *c = user;
    int st = choose_token(&c->d->ch, logits, c->d->logits64, (int32_t)c->d->n_vocab, token);
    if (st == LLMK_OK) *end = emit_token(c->o, c->d, *token, &st);
    return st;
}

/* The same tokens as generate(), several per evaluation where the drafts
 * hold (llmk_session_spec_step). */
static int generate_spec(const struct run_opts *o, struct decode *d, size_t n_prompt) {
    if ((long)d->n_gen >= o->n_predict) return LLMK_OK;
    struct spec_choice c = {o, d};
    bool end = false;
    int32_t id;
    int st = spec_choose(&c, d->logits, &id, &end);
    while (st == LLMK_OK && !end && !context_full(d)) {
        size_t n_out = 0, room = (size_t)(o->n_predict - (long)d->n_gen) + 1;
        st = llmk_session_spec_step(d->s, d->spec, d->hist, n_prompt + d->n_gen, spec_choose, &c,
                                    d->gen + d->n_gen, room, &n_out, &end);
        d->n_decoded += n_out;
    }
    return st;
}

/* The end of the output: the ids, or the text held back. */
static void finish_output(const struct run_opts *o, struct decode *d) {
    if (o->print_ids) {
        printf("[");
        for (size_t i = 0; i < d->n_gen; i++) printf("%s%d", i ? ", " : "", d->gen[i]);
        printf("]\n");
    } else {
        size_t nt = 0;
        if (!d->ch.stopped && llmk_detok_flush(d->tok, &d->ds, d->text, d->text_cap, &nt) == LLMK_OK)
            gen_write(&d->ch, stdout, d->text, nt);
        gen_finish(&d->ch, stdout);
        printf("\n");
    }
    fflush(stdout);
}

/* The context: --ctx, else the prompt plus -n (within the model's), or with
 * -n -1 min(4096, the model's); -n -1 then becomes "until the context is
 * full" (the last token is chosen without being evaluated). */
static int64_t context_size(struct run_opts *o, const llmk_hparams *hp, size_t n_prompt) {
    int64_t n_ctx = o->n_ctx;
    if (!n_ctx && o->n_predict < 0) n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (!n_ctx) {
        n_ctx = (int64_t)n_prompt + o->n_predict;
        if (n_ctx > hp->n_ctx_train) n_ctx = hp->n_ctx_train;
    }
    if (o->n_predict < 0) o->n_predict = (long)(n_ctx - (int64_t)n_prompt + 1);
    return n_ctx;
}

/* The prompt's ids (from --prompt-ids, or the text tokenized), checked
 * against the vocabulary; status, or *rc set to a usage error. */
static int prompt_ids(struct run_opts *o, const llmk_model *m, struct decode *d, int32_t **ids, size_t *n,
                      int *rc) {
    const llmk_hparams *hp = llmk_model_hparams(m);
    int st;
    /* text in or out needs the tokenizer */
    if ((st = llmk_model_tokenizer(m, &d->tok)) != LLMK_OK && (!o->prompt_ids || !o->print_ids)) return st;
    if (st != LLMK_OK) d->tok = NULL;
    if (o->prompt) {
        if ((st = choose_chat(o, m)) != LLMK_OK || (st = tokenize_prompt(o, m, d->tok, ids, n)) != LLMK_OK)
            return st;
    }
    if (*n == 0) {
        *rc = cli_usage_error(CMD, "the prompt has no tokens");
        return LLMK_OK;
    }
    for (size_t i = 0; i < *n; i++)
        if ((*ids)[i] < 0 || (*ids)[i] >= hp->n_vocab)
            return cli_fail(LLMK_INVALID_TOKEN, "prompt token id %d (index %zu) outside the vocabulary [0, %d)",
                            (*ids)[i], i, hp->n_vocab);
    return LLMK_OK;
}

/* Prefill, generation and the stats line; status. */
static int run_session(struct run_opts *o, const llmk_model *m, struct decode *d, const int32_t *ids,
                       size_t n_prompt) {
    const llmk_hparams *hp = llmk_model_hparams(m);
    int64_t n_ctx = context_size(o, hp, n_prompt);
    if ((int64_t)n_prompt > n_ctx)
        return cli_fail(LLMK_CONTEXT_FULL, "the prompt has %zu tokens, the context holds %lld", n_prompt,
                        (long long)n_ctx);
    llmk_session_params sp = {.n_ctx = (int32_t)n_ctx, .path = o->path, .kv_type = o->kv_type,
                              .n_threads = o->threads > 0 ? (int32_t)o->threads : llmk_cpu_count(),
                              .allow_long_ctx = o->long_ctx};
    if (o->long_ctx) cli_warn_long_ctx(CMD, m, n_ctx);
    struct cli_progress load; /* drawn once the init (the repacking) has taken a second */
    cli_progress_start(&load, CMD, cli_progress_wanted(&o->pf, o->go.quiet), 1.0);
    sp.progress_callback = cli_progress_load, sp.progress_callback_user_data = &load;
    double t_init = cli_now();
    int st = llmk_session_init(m, &sp, &d->s);
    cli_progress_clear(&load);
    if (st != LLMK_OK) return st;
    if (o->verbose)
        cli_log_load(CMD, o->load_s, cli_now() - t_init, llmk_session_kernels(d->s), sp.n_threads, o->kv_type);
    d->n_vocab = (size_t)hp->n_vocab;
    d->harmony = o->go.chat && !strcmp(o->template_name, "harmony") && llmk_harmony_init(d->tok, &d->hs) == LLMK_OK;
    if ((st = decode_init(d, o, ids, n_prompt)) != LLMK_OK ||
        (st = spec_opts_init(&o->so, m, sp.n_threads, &d->draft, &d->spec)) != LLMK_OK)
        return st;
    /* plain completion shows the text it continues, as llama-cli does */
    if (!o->go.chat && o->prompt && !o->print_ids && !o->no_display) {
        fputs(o->prompt, stdout);
        fflush(stdout);
    }
    double t0 = now_s();
    if ((st = llmk_session_eval(d->s, ids, n_prompt, d->logits, d->n_vocab, false)) != LLMK_OK) return st;
    if (d->spec && (st = llmk_spec_prefill(d->spec, ids, n_prompt)) != LLMK_OK) return st; /* a draft model's prompt */
    double t1 = now_s();
    if ((st = d->spec ? generate_spec(o, d, n_prompt) : generate(o, d)) != LLMK_OK) return st;
    double t2 = now_s();
    finish_output(o, d);
    static const char *const path_names[] = {"ref", "f32", "fast"};
    if (!o->go.quiet)
        fprintf(stderr,
                "llmk run: prompt %zu tokens, prefill %.2f tok/s, decode %.2f tok/s (%zu tokens generated), "
                "path %s, %d threads\n",
                n_prompt, (double)n_prompt / (t1 - t0), d->n_decoded ? (double)d->n_decoded / (t2 - t1) : 0.0,
                d->n_gen, path_names[o->path], sp.n_threads);
    if (!o->go.quiet) spec_opts_report(CMD, &o->so, d->spec, stderr);
    return LLMK_OK;
}

int cmd_run(int argc, char **argv) {
    struct run_opts o = {.n_predict = 128, .path = LLMK_PATH_FAST, .kv_type = (uint32_t)CLI_KV_DEFAULT};
    gen_opts_default(&o.go, 0.8);
    spec_opts_default(&o.so);
    int rc = parse_args(&o, argc, argv);
    if (rc == CLI_OPTS_GO && o.conversation) rc = cmd_chat(o.chat_argc, (char **)o.chat_argv);
    free(o.chat_argv);
    if (rc != CLI_OPTS_GO) return rc;
    rc = CLI_EXIT_OK;
    int st;
    llmk_model *m = NULL;
    struct decode d = {0};
    int32_t *ids = NULL;
    size_t n_prompt = 0;
    if (o.prompt_ids) {
        if (cli_parse_ids(CMD, "--prompt-ids", o.prompt_ids, &ids, &n_prompt) != CLI_EXIT_OK)
            return CLI_EXIT_USAGE;
        if (n_prompt == 0) {
            free(ids);
            return cli_usage_error(CMD, "--prompt-ids: no token ids given");
        }
    }
    if ((st = load_prompt(&o)) != LLMK_OK) goto fail;
    double t_load = cli_now();
    if ((st = llmk_model_load(o.model, &m)) != LLMK_OK) goto fail;
    o.load_s = cli_now() - t_load;
    rc = CLI_OPTS_GO;
    if ((st = prompt_ids(&o, m, &d, &ids, &n_prompt, &rc)) != LLMK_OK) goto fail;
    if (rc != CLI_OPTS_GO) goto done;
    rc = CLI_EXIT_OK;
    if ((st = run_session(&o, m, &d, ids, n_prompt)) != LLMK_OK) goto fail;
    goto done;
fail:
    rc = cli_report(CMD, st);
done:
    free(ids);
    free(o.prompt_buf);
    decode_free(&d);
    llmk_model_free(m);
    return rc;
}
