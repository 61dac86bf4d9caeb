/* llmk logits: teacher-forced logits of every position as little-endian f32
 * rows [n_ids x n_vocab], for comparing decode paths with a reference. */
#include "cli.h"
#include "opts.h"


#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: llmk logits [-m MODEL] --ids 1,2,3 [--path ref|f32|fast] [--kv-type f32|f16|q8_0] [-t THREADS] [--out FILE]\n"
    "  Evaluates the ids as one sequence (no BOS added) and writes the logits of\n"
    "  every position as little-endian f32 rows [n_ids x n_vocab] to FILE (stdout\n"
    "  when absent).\n";

static int write_le_f32(FILE *f, const float *v, size_t n) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (size_t i = 0; i < n; i++) {
        unsigned char b[4];
        memcpy(b, &v[i], 4);
        unsigned char r[4] = {b[3], b[2], b[1], b[0]};
        if (fwrite(r, 1, 4, f) != 4) return 0;
    }
    return 1;
#else
    return fwrite(v, sizeof *v, n, f) == n;
#endif
}

int cmd_logits(int argc, char **argv) {
    const char *cmd = "logits", *model_path = NULL, *ids_arg = NULL, *out_path = NULL;
    int path = LLMK_PATH_FAST;
    uint32_t kv_type = (uint32_t)CLI_KV_DEFAULT;
    long threads = 0;
    bool long_ctx = false;
    const struct cli_opt table[] = {
        CLI_OPT_MODEL(&model_path),
        CLI_STR("--ids", 0, &ids_arg, "LIST", "comma-separated token ids"),
        CLI_OPT_PATH(&path),
        CLI_OPT_KV_TYPE(&kv_type, CLI_KV_TYPE_HELP),
        CLI_OPT_THREADS(&threads),
        CLI_STR("--out", 'o', &out_path, "FILE", "output file (written whole or not at all; never the model)"),
        CLI_OPT_LONG_CTX(&long_ctx),
    };
    const struct cli_opt_section sections[] = {{NULL, table, CLI_LEN(table)}};
    struct cli_cmd spec = {.name = cmd, .usage = USAGE, .sections = sections, .n_sections = CLI_LEN(sections)};
    int prc = cli_opts_parse(&spec, argc, argv);
    if (prc != CLI_OPTS_GO) return prc;
    if (!ids_arg) return cli_usage_error(cmd, "--ids is required");
    int32_t *ids = NULL;
    size_t n = 0;
    if (cli_parse_ids(cmd, "--ids", ids_arg, &ids, &n) != CLI_EXIT_OK) return CLI_EXIT_USAGE;
    if (n == 0) {
        free(ids);
        return cli_usage_error(cmd, "--ids: no token ids given");
    }
    if (!model_path) model_path = cli_default_model();
    kv_type = cli_kv_type_or_default(kv_type, path);

    llmk_model *m = NULL;
    llmk_session *s = NULL;
    float *logits = NULL;
    FILE *f = NULL;
    llmk_outfile *of = NULL;
    int rc = CLI_EXIT_OK;
    int st = out_path ? llmk_output_check(out_path, &model_path, 1) : LLMK_OK;
    if (st == LLMK_OK) st = llmk_model_load(model_path, &m);
    if (st != LLMK_OK) {
        rc = cli_report(cmd, st);
        goto done;
    }
    const llmk_hparams *hp = llmk_model_hparams(m);
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= hp->n_vocab) {
            fprintf(stderr, "llmk logits: error: %s: token id %d (index %zu) outside the vocabulary [0, %d)\n",
                    llmk_status_name(LLMK_INVALID_TOKEN), ids[i], i, hp->n_vocab);
            rc = CLI_EXIT_FAIL;
            goto done;
        }
    if (long_ctx) cli_warn_long_ctx(cmd, m, (int64_t)n);
    llmk_session_params sp = {.n_ctx = (int32_t)n, .n_threads = threads > 0 ? (int32_t)threads : llmk_cpu_count(),
                              .path = path, .kv_type = kv_type, .allow_long_ctx = long_ctx};
    if ((st = llmk_session_init(m, &sp, &s)) != LLMK_OK) {
        rc = cli_report(cmd, st);
        goto done;
    }
    /* Chunks bound the buffer; the session's results do not depend on them. */
    enum { CHUNK = 64 };
    size_t V = (size_t)hp->n_vocab;
    logits = malloc(CHUNK * V * sizeof *logits);
    if (!logits) {
        rc = cli_report(cmd, cli_fail(LLMK_OUT_OF_MEMORY, "logits buffer of %zu floats", CHUNK * V));
        goto done;
    }
    if (out_path && (st = cli_outfile_open(out_path, &model_path, 1, &of)) != LLMK_OK) {
        rc = cli_report(cmd, st);
        goto done;
    }
    f = of ? llmk_outfile_stream(of) : stdout;
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t c = n - off < CHUNK ? n - off : CHUNK;
        if ((st = llmk_session_eval(s, ids + off, c, logits, CHUNK * V, true)) != LLMK_OK) {
            rc = cli_report(cmd, st);
            goto done;
        }
        if (!write_le_f32(f, logits, c * V)) {
            rc = cli_report(cmd, cli_fail(LLMK_IO_ERROR, "writing %s: %s", out_path ? out_path : "stdout",
                                           strerror(errno)));
            goto done;
        }
    }
    if (of) {
        st = cli_outfile_commit(of);
        of = NULL;
        if (st != LLMK_OK) rc = cli_report(cmd, st);
    } else if (fflush(f) != 0) {
        rc = cli_report(cmd, cli_fail(LLMK_IO_ERROR, "writing stdout: %s", strerror(errno)));
    }
done:
    if (of) cli_outfile_discard(of); /* a failure: OUT keeps what it had */
    free(logits);
    free(ids);
    llmk_session_free(s);
    llmk_model_free(m);
    return rc;
}
