/* llmk run: generate text from a prompt, streaming it to stdout, and end with
 * a stats line on stderr. */
#include "cli.h"
#include "gen_opts.h"

#include "internal.h"
#include "pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* In app/cmd_logits.c. */

static void usage(FILE *to) {
    fprintf(to,
            "usage: llmk run [-m MODEL] -p PROMPT [-n N] [--temp T] [--seed S] [-t THREADS]\n"
            "                [--path ref|f32|fast] [--kv-type f32|f16|q8_0] [--ctx N] [--special]\n"
            "  Streams a completion of PROMPT to stdout; a stats line goes to stderr.\n"
            "  -m MODEL        GGUF model (default %s)\n"
            "  -p PROMPT       prompt text (BOS added when the model asks for it)\n"
            "  -n N            tokens to generate at most (default 128); stops early at\n"
            "                  an end-of-generation token\n"
            "  --chat          format PROMPT as one user turn with the model's chat template\n"
            "  -t N            worker threads (default: number of cores)\n"
            "  --path P        decode path: ref (f64 reference), f32, fast (default fast)\n"
            "  --kv-type T     KV cache type: f16 (the fast path's default), f32 or q8_0 (not f32: fast path only)\n"
            "  --ctx N         context size (default: prompt + N, at most the model's)\n"
            CLI_LONG_CTX_HELP
            "  --special       recognise special-token texts (<|im_start|>) in the prompt\n"
            "  --prompt-ids L  use these comma-separated ids as the prompt (no BOS added)\n"
            "  --print-ids     print the generated ids (end-of-generation token included)\n"
            "                  as one JSON array on one line instead of text\n",
            cli_default_model());
    gen_opts_usage(to);
    fprintf(to, "  (defaults as llama-cli: temperature 0.8, a random seed that is reported; --temp 0 is greedy)\n");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the token-choice point ----------------------------------------------
 * Everything that decides the next token from the logits happens here: the
 * sampler chain of app/gen_opts.c (src/sample.c), greedy at --temp 0. */
static int choose_token(struct gen_ctx *c, const float *logits, int32_t n_vocab, int32_t *id) {
    return gen_choose(c, logits, (size_t)n_vocab, id);
}

int cmd_run(int argc, char **argv) {
    const char *cmd = "run", *model_path = NULL, *prompt = NULL, *prompt_ids = NULL;
    long n_predict = 128, threads = 0, n_ctx_arg = 0;
    struct gen_opts go;
    gen_opts_default(&go, 0.8);
    int path = LLMK_PATH_FAST;
    uint32_t kv_type = (uint32_t)CLI_KV_DEFAULT;
    bool print_ids = false, special = false, long_ctx = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int g = gen_opts_parse(cmd, &go, argc, argv, &i);
        if (g < 0) return CLI_EXIT_USAGE;
        if (g) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        if (!strcmp(a, "--print-ids")) {
            print_ids = true;
            continue;
        }
        if (!strcmp(a, "--special")) {
            special = true;
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
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            prompt = v;
        } else if (!strcmp(a, "--prompt-ids")) {
            prompt_ids = v;
        } else if (!strcmp(a, "-n")) {
            if (!cli_parse_long(cmd, a, v, 0, 1 << 24, &n_predict)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!cli_parse_long(cmd, a, v, 1, 1024, &threads)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) {
            if (!cli_parse_long(cmd, a, v, 1, 1 << 22, &n_ctx_arg)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--path")) {
            if (!cli_parse_path(cmd, v, &path)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--kv-type")) {
            if (!cli_parse_kv_type(cmd, v, &kv_type)) return CLI_EXIT_USAGE;
        } else {
            return cli_usage_error(cmd, "unknown option: %s", a);
        }
    }
    if (!prompt && !prompt_ids) return cli_usage_error(cmd, "-p PROMPT (or --prompt-ids) is required");
    if (prompt && prompt_ids) return cli_usage_error(cmd, "-p and --prompt-ids exclude each other");
    if (!model_path) model_path = cli_default_model();
    kv_type = cli_kv_type_or_default(kv_type, path);
    if (go.chat && !prompt) return cli_usage_error(cmd, "--chat needs -p PROMPT");

    int rc = CLI_EXIT_OK, st;
    llmk_model *m = NULL;
    llmk_session *s = NULL;
    int32_t *ids = NULL, *gen = NULL;
    float *logits = NULL;
    char *text = NULL;
    struct gen_ctx ch = {0};
    char *chat_text = NULL;
    size_t n_prompt = 0;
    if (prompt_ids) {
        if (cli_parse_ids(cmd, "--prompt-ids", prompt_ids, &ids, &n_prompt) != CLI_EXIT_OK)
            return CLI_EXIT_USAGE;
        if (n_prompt == 0) {
            free(ids);
            return cli_usage_error(cmd, "--prompt-ids: no token ids given");
        }
    }

    if ((st = llmk_model_load(model_path, &m)) != LLMK_OK) {
        rc = cli_report(cmd, st);
        goto done;
    }
    const llmk_hparams *hp = llmk_model_hparams(m);
    const llmk_tokenizer *tok = NULL;
    st = llmk_model_tokenizer(m, &tok);
    if (st != LLMK_OK && (!prompt_ids || !print_ids)) {
        rc = cli_report(cmd, st); /* text in or out needs the tokenizer */
        goto done;
    }
    bool add_bos = tok && llmk_tokenizer_add_bos(tok);
    if (prompt && go.chat) {
        if ((st = gen_chat_prompt(llmk_model_gguf(m), tok, &go, prompt, &chat_text, &add_bos)) != LLMK_OK) {
            rc = cli_report(cmd, st);
            goto done;
        }
        prompt = chat_text;
        special = true;
    }
    if (prompt) {
        size_t len = strlen(prompt), cap = len + 8;
        if (!(ids = malloc(cap * sizeof *ids))) {
            rc = cli_report(cmd, llmk_fail(LLMK_OUT_OF_MEMORY, "prompt ids"));
            goto done;
        }
        st = llmk_tokenize(tok, prompt, len, add_bos, special, ids, cap, &n_prompt);
        if (st != LLMK_OK) {
            rc = cli_report(cmd, st);
            goto done;
        }
    }
    if (n_prompt == 0) {
        rc = cli_usage_error(cmd, "the prompt has no tokens");
        goto done;
    }
    for (size_t i = 0; i < n_prompt; i++)
        if (ids[i] < 0 || ids[i] >= hp->n_vocab) {
            rc = cli_report(cmd, llmk_fail(LLMK_INVALID_TOKEN, "prompt token id %d (index %zu) outside the vocabulary [0, %d)",
                                           ids[i], i, hp->n_vocab));
            goto done;
        }
    int64_t n_ctx = n_ctx_arg ? n_ctx_arg : (int64_t)n_prompt + n_predict;
    if (!n_ctx_arg && n_ctx > hp->n_ctx_train) n_ctx = hp->n_ctx_train;
    if ((int64_t)n_prompt > n_ctx) {
        rc = cli_report(cmd, llmk_fail(LLMK_CONTEXT_FULL, "the prompt has %zu tokens, the context holds %lld",
                                       n_prompt, (long long)n_ctx));
        goto done;
    }
    llmk_session_params sp = {.n_ctx = (int32_t)n_ctx, .path = path, .kv_type = kv_type,
                              .n_threads = threads > 0 ? (int32_t)threads : llmk_cpu_count(),
                              .allow_long_ctx = long_ctx};
    if (long_ctx) cli_warn_long_ctx(cmd, m, n_ctx);
    if ((st = llmk_session_init(m, &sp, &s)) != LLMK_OK) {
        rc = cli_report(cmd, st);
        goto done;
    }
    logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    gen = malloc(((size_t)n_predict + 1) * sizeof *gen);
    if ((st = gen_ctx_init(&ch, cmd, &go, (size_t)hp->n_vocab)) != LLMK_OK) {
        rc = cli_report(cmd, st);
        goto done;
    }
    if (!logits || !gen) {
        rc = cli_report(cmd, llmk_fail(LLMK_OUT_OF_MEMORY, "generation buffers"));
        goto done;
    }

    /* A token's text is at most its stored piece (byte-level and SentencePiece
     * pieces only shrink when decoded) plus bytes held back from earlier tokens. */
    size_t text_cap = 64;
    for (int32_t i = 0; tok && i < (int32_t)llmk_tokenizer_n_vocab(tok); i++) {
        size_t len = 0;
        if (llmk_tokenizer_piece(tok, i, &len) && len + 16 > text_cap) text_cap = len + 16;
    }
    if (!(text = malloc(text_cap))) {
        rc = cli_report(cmd, llmk_fail(LLMK_OUT_OF_MEMORY, "text buffer of %zu bytes", text_cap));
        goto done;
    }

    double t0 = now_s();
    if ((st = llmk_session_eval(s, ids, n_prompt, logits, (size_t)hp->n_vocab, false)) != LLMK_OK) {
        rc = cli_report(cmd, st);
        goto done;
    }
    double t1 = now_s();
    llmk_detok_state ds = {0};
    size_t n_gen = 0, n_decoded = 0;
    while ((long)n_gen < n_predict) {
        int32_t id;
        if ((st = choose_token(&ch, logits, hp->n_vocab, &id)) != LLMK_OK) {
            rc = cli_report(cmd, st);
            goto done;
        }
        gen[n_gen++] = id;
        if (tok && llmk_tokenizer_is_eog(tok, id)) break;
        if (!print_ids) {
            size_t nt = 0;
            if ((st = llmk_detok_feed(tok, &ds, id, false, text, text_cap, &nt)) != LLMK_OK) {
                rc = cli_report(cmd, st);
                goto done;
            }
            if (gen_write(&ch, stdout, text, nt)) break; /* a stop string: it and what follows are not printed */
            if ((st = cli_stdout_status()) != LLMK_OK) {
                rc = cli_report(cmd, st);
                goto done;
            }
        }
        if ((long)n_gen >= n_predict) break;
        if (llmk_session_pos(s) >= llmk_session_n_ctx(s)) {
            fprintf(stderr, "\nllmk run: note: context of %d tokens is full\n", llmk_session_n_ctx(s));
            break;
        }
        if ((st = llmk_session_eval(s, &id, 1, logits, (size_t)hp->n_vocab, false)) != LLMK_OK) {
            rc = cli_report(cmd, st);
            goto done;
        }
        n_decoded++;
    }
    double t2 = now_s();
    if (print_ids) {
        printf("[");
        for (size_t i = 0; i < n_gen; i++) printf("%s%d", i ? ", " : "", gen[i]);
        printf("]\n");
    } else {
        size_t nt = 0;
        if (!ch.stopped && llmk_detok_flush(tok, &ds, text, text_cap, &nt) == LLMK_OK)
            gen_write(&ch, stdout, text, nt);
        gen_finish(&ch, stdout);
        printf("\n");
    }
    fflush(stdout);
    static const char *const path_names[] = {"ref", "f32", "fast"};
    fprintf(stderr,
            "llmk run: prompt %zu tokens, prefill %.2f tok/s, decode %.2f tok/s (%zu tokens generated), "
            "path %s, %d threads\n",
            n_prompt, (double)n_prompt / (t1 - t0), n_decoded ? (double)n_decoded / (t2 - t1) : 0.0, n_gen,
            path_names[path], sp.n_threads);
done:
    free(text);
    free(ids);
    free(gen);
    free(logits);
    gen_ctx_free(&ch);
    free(chat_text);
    llmk_session_free(s);
    llmk_model_free(m);
    return rc;
}
