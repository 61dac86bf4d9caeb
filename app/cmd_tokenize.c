/* llmk tokenize / llmk detokenize: text <-> token ids with a model's tokenizer. */
#include "cli.h"
#include "opts.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int open_tokenizer(const char *cmd, const char *model, llmk_gguf **g,
                          llmk_tokenizer **t) {
    int st = llmk_gguf_open_path(model, g);
    if (st != LLMK_OK) return cli_report(cmd, st);
    st = llmk_tokenizer_load(*g, t);
    if (st != LLMK_OK) {
        llmk_gguf_close(*g);
        return cli_report(cmd, st);
    }
    return CLI_EXIT_OK;
}

static const char TOKENIZE_USAGE[] =
    "usage: llmk tokenize [-m MODEL] [--special] [--no-bos] [--pieces] [-f FILE | TEXT]\n"
    "Tokenize TEXT (or the contents of FILE, '-' for stdin) and print the ids as one\n"
    "JSON array on one line. The text must be valid UTF-8; '--' before a TEXT that\n"
    "starts with '-'.\n";

int cmd_tokenize(int argc, char **argv) {
    const char *cmd = "tokenize", *model = NULL, *file = NULL, *text = NULL;
    bool special = false, no_bos = false, pieces = false;
    const struct cli_opt table[] = {
        CLI_OPT_MODEL(&model),
        CLI_STR("--file", 'f', &file, "FILE", "tokenize this file's contents ('-': standard input)"),
        CLI_FLAG("--special", 0, &special, "recognise control-token texts such as <|im_start|> in the text"),
        CLI_FLAG("--no-bos", 0, &no_bos, "do not add BOS even if the model asks for it"),
        CLI_FLAG("--pieces", 0, &pieces, "print the vocabulary pieces (JSON strings) instead of ids"),
    };
    const struct cli_opt_section sections[] = {{NULL, table, CLI_LEN(table)}};
    struct cli_cmd spec = {.name = cmd, .usage = TOKENIZE_USAGE, .sections = sections, .n_sections = CLI_LEN(sections),
                           .pos = &text, .max_pos = 1, .pos_name = "TEXT"};
    int prc = cli_opts_parse(&spec, argc, argv);
    if (prc != CLI_OPTS_GO) return prc;
    if (file && text) return cli_usage_error(cmd, "give either -f FILE or TEXT, not both");
    if (!file && !text) return cli_usage_error(cmd, "no text: give TEXT or -f FILE");

    char *owned = NULL;
    size_t len = 0;
    if (file) {
        int st = cli_read_file(file, &owned, &len);
        if (st != LLMK_OK) return cli_report(cmd, st);
        text = owned;
    } else {
        len = strlen(text);
    }
    llmk_gguf *g = NULL;
    llmk_tokenizer *t = NULL;
    int rc = open_tokenizer(cmd, model ? model : cli_default_model(), &g, &t);
    if (rc != CLI_EXIT_OK) {
        free(owned);
        return rc;
    }
    bool bos = !no_bos && llmk_tokenizer_add_bos(t);
    size_t n = 0, cap = len + 16;
    int32_t *ids = malloc(cap * sizeof *ids);
    int st = ids ? llmk_tokenize(t, text, len, bos, special, ids, cap, &n) : LLMK_OUT_OF_MEMORY;
    if (st == LLMK_BUFFER_TOO_SMALL) {
        int32_t *more = realloc(ids, n * sizeof *ids);
        if (more) {
            ids = more;
            cap = n;
            st = llmk_tokenize(t, text, len, bos, special, ids, cap, &n);
        } else
            st = LLMK_OUT_OF_MEMORY;
    }
    if (st != LLMK_OK) {
        rc = cli_report(cmd, st);
    } else {
        cJSON *arr = cJSON_CreateArray();
        for (size_t i = 0; arr && i < n; i++) {
            cJSON *item;
            if (pieces) {
                size_t pl;
                const char *p = llmk_tokenizer_piece(t, ids[i], &pl);
                /* cJSON strings end at NUL; pieces never hold one in practice. */
                char *z = malloc(pl + 1);
                if (z) {
                    memcpy(z, p, pl);
                    z[pl] = 0;
                }
                item = z ? cJSON_CreateString(z) : NULL;
                free(z);
            } else {
                item = cJSON_CreateNumber(ids[i]);
            }
            if (!item || !cJSON_AddItemToArray(arr, item)) {
                cJSON_Delete(item);
                cJSON_Delete(arr);
                arr = NULL;
            }
        }
        char *js = arr ? cJSON_PrintUnformatted(arr) : NULL;
        if (js) {
            printf("%s\n", js);
        } else {
            fprintf(stderr, "llmk %s: error: llmk_out_of_memory: printing %zu ids\n", cmd, n);
            rc = CLI_EXIT_FAIL;
        }
        cJSON_free(js);
        cJSON_Delete(arr);
    }
    free(ids);
    free(owned);
    llmk_tokenizer_free(t);
    llmk_gguf_close(g);
    return rc;
}

static const char DETOKENIZE_USAGE[] =
    "usage: llmk detokenize [-m MODEL] [--special] IDS\n"
    "Print the text of token ids. IDS is a comma/space separated list (1,2,3) or a\n"
    "JSON array ([1, 2, 3]); '-' reads it from stdin.\n";

int cmd_detokenize(int argc, char **argv) {
    const char *cmd = "detokenize", *model = NULL, *arg = NULL;
    bool special = false;
    const struct cli_opt table[] = {
        CLI_OPT_MODEL(&model),
        CLI_FLAG("--special", 0, &special, "render control tokens (BOS, <|im_end|>, ...) as their text"),
    };
    const struct cli_opt_section sections[] = {{NULL, table, CLI_LEN(table)}};
    struct cli_cmd spec = {.name = cmd, .usage = DETOKENIZE_USAGE, .sections = sections,
                           .n_sections = CLI_LEN(sections), .pos = &arg, .max_pos = 1, .pos_name = "IDS argument"};
    int prc = cli_opts_parse(&spec, argc, argv);
    if (prc != CLI_OPTS_GO) return prc;
    if (!arg) return cli_usage_error(cmd, "no IDS given");
    char *owned = NULL;
    if (!strcmp(arg, "-")) {
        size_t len;
        int st = cli_read_file("-", &owned, &len);
        if (st != LLMK_OK) return cli_report(cmd, st);
        arg = owned;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = cli_parse_ids(cmd, "IDS", arg, &ids, &n);
    free(owned);
    if (rc != CLI_EXIT_OK) return rc;
    llmk_gguf *g = NULL;
    llmk_tokenizer *t = NULL;
    rc = open_tokenizer(cmd, model ? model : cli_default_model(), &g, &t);
    if (rc != CLI_EXIT_OK) {
        free(ids);
        return rc;
    }
    llmk_detok_state st = {0};
    size_t cap = 1 << 16;
    char *buf = malloc(cap);
    int s = buf ? LLMK_OK : LLMK_OUT_OF_MEMORY;
    for (size_t i = 0; s == LLMK_OK && i <= n; i++) {
        size_t got;
        s = i < n ? llmk_detok_feed(t, &st, ids[i], special, buf, cap, &got)
                  : llmk_detok_flush(t, &st, buf, cap, &got);
        if (s == LLMK_BUFFER_TOO_SMALL) {
            char *nb = realloc(buf, got);
            if (!nb) {
                s = LLMK_OUT_OF_MEMORY;
                break;
            }
            buf = nb;
            cap = got;
            i--; /* the state was left unchanged: feed the same id again */
            s = LLMK_OK;
            continue;
        }
        if (s == LLMK_OK) fwrite(buf, 1, got, stdout);
    }
    if (s != LLMK_OK) rc = cli_report(cmd, s);
    else printf("\n");
    free(buf);
    free(ids);
    llmk_tokenizer_free(t);
    llmk_gguf_close(g);
    return rc;
}
