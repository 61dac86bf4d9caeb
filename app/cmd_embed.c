/* llmk embed: text embeddings from a model's final hidden states, as
 * llama.cpp's llama-embedding gives them: the text is split into prompts,
 * each prompt is run on its own, its tokens' hidden states (the output of
 * the final RMSNorm, llmk_session_eval_hidden) are pooled and normalized.
 * docs/embeddings.md. */
#include "cli.h"
#include "embed_pool.h"
#include "opts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char CMD[] = "embed";
static const char USAGE[] =
    "usage: llmk embed [-m MODEL] -p TEXT | -f FILE [--pooling mean|last|none] [--embd-normalize N]\n"
    "                  [--embd-output-format text|array|json] [--embd-separator SEP] [--path ref|f32|fast]\n"
    "                  [-t N] [-c N]\n"
    "  Prints an embedding of each prompt: the model's final hidden states (the\n"
    "  output of its last RMSNorm, the vector the LM head multiplies) pooled over\n"
    "  the prompt's tokens and normalized. The text is split into prompts at each\n"
    "  separator; each prompt is tokenized as llama-embedding does (BOS when the\n"
    "  model adds one, special-token texts recognised) and run on its own.\n";
static const char EPILOG[] =
    "output formats (--embd-output-format):\n"
    "  text   one embedding per line, values separated by spaces (with --pooling none\n"
    "         one line per token, a blank line between prompts)\n"
    "  array  one JSON array of the embeddings: [[...],[...]]\n"
    "  json   {\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":0,\"embedding\":[...]},\n"
    "         ...],\"model\":\"FILE\",\"usage\":{\"prompt_tokens\":N,\"total_tokens\":N}}; with\n"
    "         --pooling none one entry per token, which also has \"prompt\", \"position\"\n"
    "         and \"token\" (its id)\n"
    "values are printed with 9 significant digits: the f32 value exactly.\n";

enum out_format { FMT_TEXT, FMT_ARRAY, FMT_JSON };

struct embed_opts {
    const char *model, *prompt, *file, *separator;
    long threads, n_ctx, normalize;
    int path, pooling, format;
    uint32_t kv_type;
    bool long_ctx;
};

/* One prompt: its text (inside the read buffer), its tokens, and its
 * embeddings (one row, or one per token with --pooling none). */
struct prompt {
    const char *text;
    int32_t *ids;
    size_t n_ids;
    float *emb;
    size_t n_rows;
};

static int opt_pooling(const char *cmd, const char *flag, const char *value, void *ctx) {
    int *out = ctx;
    if ((*out = embed_pooling_from_name(value, 1)) < 0)
        return cli_usage_error(cmd, "%s expects mean, last or none, got '%s'", flag, value), 0;
    return 1;
}

static int opt_format(const char *cmd, const char *flag, const char *value, void *ctx) {
    int *out = ctx;
    if (!strcmp(value, "text") || !*value) *out = FMT_TEXT; /* llama.cpp's default is the empty string */
    else if (!strcmp(value, "array")) *out = FMT_ARRAY;
    else if (!strcmp(value, "json")) *out = FMT_JSON;
    else return cli_usage_error(cmd, "%s expects text, array or json, got '%s'", flag, value), 0;
    return 1;
}

static int parse_args(struct embed_opts *o, int argc, char **argv) {
    const struct cli_opt table[] = {
        CLI_OPT_MODEL(&o->model),
        CLI_STR("--prompt", 'p', &o->prompt, "TEXT", "the text ('-': standard input)"),
        CLI_STR("--file", 'f', &o->file, "FILE", "read the text from FILE ('-': standard input); one final newline "
                "is dropped"),
        CLI_STR("--embd-separator", 0, &o->separator, "SEP", "split the text into prompts at SEP (default: a "
                "newline; \\n \\t \\r \\\\ are read as escapes)"),
        CLI_FN("--pooling", 0, opt_pooling, &o->pooling, "P", "mean (of the prompt's tokens, the default), last "
               "(the last token's) or none (every token's)"),
        CLI_LONG("--embd-normalize", 0, &o->normalize, -1, 1000, "N", "-1 none, 0 max absolute to the int16 range "
                 "(32760), 1 taxicab, 2 euclidean (the default), N > 2 p-norm"),
        CLI_FN("--embd-output-format", 0, opt_format, &o->format, "F", "text (the default), array or json"),
        CLI_OPT_PATH(&o->path),
        CLI_OPT_KV_TYPE(&o->kv_type, CLI_KV_TYPE_HELP),
        CLI_OPT_THREADS(&o->threads),
        CLI_OPT_CTX(&o->n_ctx, "context size (default: the longest prompt's tokens)"),
        CLI_OPT_LONG_CTX(&o->long_ctx),
    };
    const struct cli_opt_section sections[] = {{NULL, table, CLI_LEN(table)}};
    struct cli_cmd spec = {.name = CMD, .usage = USAGE, .epilog = EPILOG, .sections = sections,
                           .n_sections = CLI_LEN(sections)};
    int rc = cli_opts_parse(&spec, argc, argv);
    if (rc != CLI_OPTS_GO) return rc;
    if (!o->prompt == !o->file) return cli_usage_error(CMD, "give one of -p TEXT and -f FILE");
    if (!o->model) o->model = cli_default_model();
    o->kv_type = cli_kv_type_or_default(o->kv_type, o->path);
    return CLI_OPTS_GO;
}

/* The separator with its escapes read, into a malloc'd string; "\n" when
 * none was given. NULL, with the error printed, when it is empty. */
static char *separator_of(const char *given) {
    const char *s = given ? given : "\\n";
    char *out = malloc(strlen(s) + 1), *w = out;
    if (!out) {
        fprintf(stderr, "llmk %s: out of memory\n", CMD);
        return NULL;
    }
    for (; *s; s++) {
        char c = *s;
        if (c == '\\' && s[1]) {
            char e = s[1] == 'n' ? '\n' : s[1] == 't' ? '\t' : s[1] == 'r' ? '\r' : s[1] == '\\' ? '\\' : 0;
            if (e) c = e, s++;
        }
        *w++ = c;
    }
    *w = 0;
    if (!*out) {
        free(out);
        cli_usage_error(CMD, "--embd-separator is empty");
        return NULL;
    }
    return out;
}

/* The text: -p as given, or read from -f FILE or standard input with one
 * final newline dropped (as llmk run -f). *buf is malloc'd. Status. */
static int load_text(const struct embed_opts *o, char **buf) {
    const char *from = o->file ? o->file : !strcmp(o->prompt, "-") ? "-" : NULL;
    if (!from) return (*buf = strdup(o->prompt)) ? LLMK_OK : cli_fail(LLMK_OUT_OF_MEMORY, "prompt text");
    size_t len = 0;
    int st = cli_read_file(from, buf, &len);
    if (st != LLMK_OK) return st;
    if (strlen(*buf) != len)
        return cli_fail(LLMK_INVALID_ARGUMENT, "the text (%s) holds a NUL byte; a prompt is text",
                        strcmp(from, "-") ? from : "standard input");
    if (len && (*buf)[len - 1] == '\n') (*buf)[--len] = 0;
    if (len && (*buf)[len - 1] == '\r') (*buf)[--len] = 0;
    return LLMK_OK;
}

/* Split text in place at every sep into *ps (malloc'd, *n entries). At a
 * newline separator a "\r" before it goes too (CRLF lines). An empty prompt
 * is a usage error: it has no tokens to pool. CLI_OPTS_GO, or the exit
 * code. */
static int split_prompts(char *text, const char *sep, struct prompt **ps, size_t *n) {
    size_t count = 1, sl = strlen(sep);
    for (const char *p = strstr(text, sep); p; p = strstr(p + sl, sep)) count++;
    if (!(*ps = calloc(count, sizeof **ps))) {
        fprintf(stderr, "llmk %s: out of memory\n", CMD);
        return CLI_EXIT_FAIL;
    }
    *n = count;
    char *p = text;
    for (size_t i = 0; i < count; i++) {
        char *end = strstr(p, sep);
        if (end) *end = 0;
        if (end && end > p && end[-1] == '\r' && !strcmp(sep, "\n")) end[-1] = 0;
        (*ps)[i].text = p;
        if (!*p)
            return count == 1 ? cli_usage_error(CMD, "the prompt is empty")
                              : cli_usage_error(CMD, "prompt %zu of %zu is empty (prompts are separated by "
                                                     "--embd-separator, default a newline)", i + 1, count);
        p = end ? end + sl : p + strlen(p);
    }
    return CLI_OPTS_GO;
}

static int tokenize_prompts(const llmk_tokenizer *tok, struct prompt *ps, size_t n) {
    bool bos = llmk_tokenizer_add_bos(tok);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(ps[i].text), cap = len + 8; /* a token per byte at most, and BOS */
        if (!(ps[i].ids = malloc(cap * sizeof *ps[i].ids))) return cli_fail(LLMK_OUT_OF_MEMORY, "prompt ids");
        int st = llmk_tokenize(tok, ps[i].text, len, bos, true, ps[i].ids, cap, &ps[i].n_ids);
        if (st == LLMK_BUFFER_TOO_SMALL) { /* *n_ids is the count: once more with room for it */
            int32_t *more = realloc(ps[i].ids, ps[i].n_ids * sizeof *more);
            if (!more) return cli_fail(LLMK_OUT_OF_MEMORY, "prompt ids");
            ps[i].ids = more, cap = ps[i].n_ids;
            st = llmk_tokenize(tok, ps[i].text, len, bos, true, ps[i].ids, cap, &ps[i].n_ids);
        }
        if (st != LLMK_OK) return cli_fail(st, "prompt %zu: %s", i + 1, llmk_last_error());
        if (ps[i].n_ids == 0) return cli_fail(LLMK_INVALID_ARGUMENT, "prompt %zu has no tokens", i + 1);
    }
    return LLMK_OK;
}

/* Each prompt on the session from position 0: its hidden states (the last
 * row only with --pooling last), pooled and normalized into p->emb. */
static int embed_prompts(const struct embed_opts *o, llmk_session *s, struct prompt *ps, size_t n, size_t E) {
    size_t most = 0;
    for (size_t i = 0; i < n; i++) most = ps[i].n_ids > most ? ps[i].n_ids : most;
    struct embed_scratch sc;
    int st = embed_scratch_init(&sc, most, E);
    for (size_t i = 0; i < n && st == LLMK_OK; i++) {
        ps[i].n_rows = o->pooling == EMBED_POOL_NONE ? ps[i].n_ids : 1;
        if (!(ps[i].emb = malloc(ps[i].n_rows * E * sizeof *ps[i].emb))) {
            st = cli_fail(LLMK_OUT_OF_MEMORY, "embeddings");
            break;
        }
        st = embed_eval(s, ps[i].ids, ps[i].n_ids, o->pooling, o->normalize, &sc, ps[i].emb);
        if (st != LLMK_OK) st = cli_fail(st, "prompt %zu: %s", i + 1, llmk_last_error());
    }
    embed_scratch_free(&sc);
    return st;
}

static void print_vector(const float *v, size_t E, const char *sep) {
    for (size_t i = 0; i < E; i++) printf("%s%.9g", i ? sep : "", (double)v[i]);
}

static void print_json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

/* --embd-output-format json: OpenAI's embeddings response shape. */
static void print_json(const struct embed_opts *o, const struct prompt *ps, size_t n, size_t E) {
    const char *base = strrchr(o->model, '/');
    size_t index = 0, tokens = 0;
    printf("{\"object\":\"list\",\"data\":[");
    for (size_t i = 0; i < n; i++) {
        tokens += ps[i].n_ids;
        for (size_t r = 0; r < ps[i].n_rows; r++, index++) {
            printf("%s{\"object\":\"embedding\",\"index\":%zu,", index ? "," : "", index);
            if (o->pooling == EMBED_POOL_NONE)
                printf("\"prompt\":%zu,\"position\":%zu,\"token\":%d,", i, r, ps[i].ids[r]);
            printf("\"embedding\":[");
            print_vector(ps[i].emb + r * E, E, ",");
            printf("]}");
        }
    }
    printf("],\"model\":");
    print_json_string(base ? base + 1 : o->model);
    printf(",\"usage\":{\"prompt_tokens\":%zu,\"total_tokens\":%zu}}\n", tokens, tokens);
}

static void print_embeddings(const struct embed_opts *o, const struct prompt *ps, size_t n, size_t E) {
    if (o->format == FMT_JSON) {
        print_json(o, ps, n, E);
        return;
    }
    bool array = o->format == FMT_ARRAY, first = true;
    if (array) putchar('[');
    for (size_t i = 0; i < n; i++) {
        if (!array && i && o->pooling == EMBED_POOL_NONE) putchar('\n'); /* a blank line between prompts' tokens */
        for (size_t r = 0; r < ps[i].n_rows; r++, first = false) {
            if (array) fputs(first ? "[" : ",[", stdout);
            print_vector(ps[i].emb + r * E, E, array ? "," : " ");
            putchar(array ? ']' : '\n');
        }
    }
    if (array) printf("]\n");
}

/* The context: -c, else the longest prompt; each prompt must fit. */
static int session_for(const struct embed_opts *o, const llmk_model *m, const struct prompt *ps, size_t n,
                       llmk_session **s) {
    size_t most = 0, which = 0;
    for (size_t i = 0; i < n; i++)
        if (ps[i].n_ids > most) most = ps[i].n_ids, which = i;
    int64_t n_ctx = o->n_ctx ? o->n_ctx : (int64_t)most;
    if ((int64_t)most > n_ctx)
        return cli_fail(LLMK_CONTEXT_FULL, "prompt %zu has %zu tokens, the context holds %lld (-c)", which + 1, most,
                        (long long)n_ctx);
    if (o->long_ctx) cli_warn_long_ctx(CMD, m, n_ctx);
    llmk_session_params sp = {.n_ctx = (int32_t)n_ctx, .n_threads = o->threads > 0 ? (int32_t)o->threads : 0,
                              .path = o->path, .kv_type = o->kv_type, .allow_long_ctx = o->long_ctx};
    return llmk_session_init(m, &sp, s);
}

int cmd_embed(int argc, char **argv) {
    struct embed_opts o = {.normalize = 2, .pooling = EMBED_POOL_MEAN, .format = FMT_TEXT, .path = LLMK_PATH_FAST,
                           .kv_type = (uint32_t)CLI_KV_DEFAULT};
    int rc = parse_args(&o, argc, argv);
    if (rc != CLI_OPTS_GO) return rc;
    char *sep = separator_of(o.separator), *text = NULL;
    if (!sep) return o.separator && !*o.separator ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    struct prompt *ps = NULL;
    size_t n = 0;
    llmk_model *m = NULL;
    llmk_session *s = NULL;
    const llmk_tokenizer *tok = NULL;
    int st = load_text(&o, &text);
    if (st != LLMK_OK) {
        rc = cli_report(CMD, st);
        goto done;
    }
    if ((rc = split_prompts(text, sep, &ps, &n)) != CLI_OPTS_GO) goto done;
    rc = CLI_EXIT_OK;
    if ((st = llmk_model_load(o.model, &m)) != LLMK_OK || (st = llmk_model_tokenizer(m, &tok)) != LLMK_OK ||
        (st = tokenize_prompts(tok, ps, n)) != LLMK_OK || (st = session_for(&o, m, ps, n, &s)) != LLMK_OK ||
        (st = embed_prompts(&o, s, ps, n, (size_t)llmk_model_hparams(m)->n_embd)) != LLMK_OK) {
        rc = cli_report(CMD, st);
        goto done;
    }
    print_embeddings(&o, ps, n, (size_t)llmk_model_hparams(m)->n_embd);
done:
    for (size_t i = 0; ps && i < n; i++) free(ps[i].ids), free(ps[i].emb);
    free(ps);
    free(text);
    free(sep);
    llmk_session_free(s);
    llmk_model_free(m);
    return rc;
}
