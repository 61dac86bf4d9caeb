/* The speculative-decoding flags and their drafter (app/spec_opts.h). */
#include "spec_opts.h"

#include "cli.h"

#include <string.h>

static const char *const mode_names[] = {"none", "ngram", "draft"};

static int opt_spec(const char *cmd, const char *flag, const char *value, void *ctx) {
    llmk_spec_params *p = ctx;
    if (llmk_spec_mode_from_name(value, &p->mode) != LLMK_OK)
        return cli_usage_error(cmd, "%s: '%s' is not a mode (none, ngram or draft)", flag, value), 0;
    return 1;
}

void spec_opts_default(struct spec_opts *o) {
    memset(o, 0, sizeof *o);
}

struct cli_opt_section spec_opts_section(struct spec_opts *o) {
    llmk_spec_params *p = &o->p;
    const struct cli_opt rows[] = {
        CLI_FN("--spec", 0, opt_spec, p, "MODE",
               "speculative decoding: ngram (prompt lookup: continue text found earlier in the context) or "
               "draft (a draft model, -md); the output is unchanged, only faster (default none)"),
        {.name = "--model-draft", .alias = "-md", .kind = CLI_OPT_STR, .dest.s = &o->draft_path,
         .metavar = "FILE", .help = "draft model with the target's vocabulary (implies --spec draft)"},
        {.name = "--draft-max", .alias = "--draft", .kind = CLI_OPT_I32, .dest.i32 = &p->draft_max, .lo = 1,
         .hi = 64, .metavar = "N", .help = "most tokens drafted per step (default 16)"},
        CLI_I32("--draft-min", 0, &p->draft_min, 1, 64, "N", "fewer drafted tokens are not verified (default 1)"),
        CLI_I32("--spec-ngram-min", 0, &p->ngram_min, 1, 64, "N",
                "prompt lookup: the fewest context tokens a match must share (default 2)"),
        CLI_I32("--spec-ngram-max", 0, &p->ngram_max, 1, 64, "N",
                "prompt lookup: the most compared; the longest match wins (default 16)"),
        CLI_FLAG("--draft-fixed", 0, &p->fixed_len,
                 "always draft --draft-max tokens (default: the length the measured acceptance rate makes best)"),
    };
    _Static_assert(sizeof rows / sizeof rows[0] == SPEC_OPT_ROWS, "SPEC_OPT_ROWS counts the rows");
    memcpy(o->rows, rows, sizeof rows);
    return (struct cli_opt_section){"speculative decoding (docs/speculative.md):", o->rows, SPEC_OPT_ROWS};
}

int spec_opts_check(const char *cmd, struct spec_opts *o) {
    if (o->draft_path && o->p.mode == LLMK_SPEC_NONE) o->p.mode = LLMK_SPEC_DRAFT;
    if (o->p.mode == LLMK_SPEC_DRAFT && !o->draft_path)
        return cli_usage_error(cmd, "--spec draft needs --model-draft FILE");
    if (o->draft_path && o->p.mode != LLMK_SPEC_DRAFT)
        return cli_usage_error(cmd, "--model-draft goes with --spec draft, not --spec %s", mode_names[o->p.mode]);
    if (o->p.draft_min > 0 && o->p.draft_max > 0 && o->p.draft_min > o->p.draft_max)
        return cli_usage_error(cmd, "--draft-min %d exceeds --draft-max %d", o->p.draft_min, o->p.draft_max);
    return CLI_OPTS_GO;
}

bool spec_opts_on(const struct spec_opts *o) { return o->p.mode != LLMK_SPEC_NONE; }

int spec_opts_init(const struct spec_opts *o, const llmk_model *target, int32_t n_threads, llmk_model **draft,
                   llmk_spec **spec) {
    *draft = NULL, *spec = NULL;
    if (!spec_opts_on(o)) return LLMK_OK;
    llmk_spec_params p = o->p;
    int st;
    if (o->draft_path) {
        if ((st = llmk_model_load(o->draft_path, draft)) != LLMK_OK) return st;
        p.draft_model = *draft;
        p.draft_threads = n_threads;
    }
    if ((st = llmk_spec_init(target, &p, spec)) != LLMK_OK) {
        llmk_model_free(*draft);
        *draft = NULL;
    }
    return st;
}

int spec_opts_pool(const struct spec_opts *o, const llmk_model *target, int32_t n_threads, int32_t n_slots,
                   int32_t n_ctx, llmk_model **draft, llmk_draft_pool **pool) {
    *draft = NULL, *pool = NULL;
    if (o->p.mode != LLMK_SPEC_DRAFT || !o->draft_path) return LLMK_OK;
    int st = llmk_model_load(o->draft_path, draft);
    if (st == LLMK_OK && (st = llmk_draft_pool_init(target, *draft, n_slots, n_ctx, n_threads, pool)) != LLMK_OK) {
        llmk_model_free(*draft);
        *draft = NULL;
    }
    return st;
}

const char *spec_opts_mode_name(const struct spec_opts *o) { return mode_names[o->p.mode]; }

void spec_opts_report(const char *cmd, const struct spec_opts *o, const llmk_spec *spec, FILE *f) {
    llmk_spec_stats s;
    if (!spec || llmk_spec_stats_get(spec, &s) != LLMK_OK) return;
    fprintf(f,
            "llmk %s: speculative %s: %lld/%lld drafted tokens accepted (%.1f%%), %.2f tokens per step over %lld "
            "steps; now: acceptance estimate %.3f, draft cost %.3f, row cost %.3f -> draft length %d, %.3f "
            "expected tokens per step, predicted speedup %.3fx (llmk plan --accept-rate A --draft-cost C "
            "--row-cost R prints the same)\n",
            cmd, mode_names[o->p.mode], (long long)s.n_accepted, (long long)s.n_drafted,
            s.n_drafted ? 100.0 * (double)s.n_accepted / (double)s.n_drafted : 0.0,
            s.n_steps ? (double)s.n_tokens / (double)s.n_steps : 0.0, (long long)s.n_steps, s.accept_rate,
            s.draft_cost, s.row_cost, s.draft_len, s.expected_tokens, s.speedup);
}
