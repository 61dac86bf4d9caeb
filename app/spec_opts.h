/* Speculative-decoding flags shared by run, chat, batch, serve and bench
 * (llama.cpp's names: --model-draft/-md, --draft-max, --draft-min), and the
 * drafter they configure (include/llmk.h, llmk_spec). */
#ifndef LLMK_SPEC_OPTS_H
#define LLMK_SPEC_OPTS_H

#include "llmk.h"
#include "opts.h"

enum { SPEC_OPT_ROWS = 7 };

struct spec_opts {
    llmk_spec_params p;        /* mode, lengths; draft_model set by spec_opts_init */
    const char *draft_path;    /* --model-draft FILE */
    long draft_threads;        /* --threads-draft (0: the target's) */
    struct cli_opt rows[SPEC_OPT_ROWS];
};

void spec_opts_default(struct spec_opts *o);
/* The flags as a section of a command's table; o must not move while in use. */
struct cli_opt_section spec_opts_section(struct spec_opts *o);
/* After parsing: --model-draft alone means --spec draft; --spec draft
 * without it is a usage error. CLI_OPTS_GO or the exit code. */
int spec_opts_check(const char *cmd, struct spec_opts *o);
bool spec_opts_on(const struct spec_opts *o);
/* Load the draft model (if any) and make the drafter for target, n_threads
 * the target's worker count. *spec is NULL when speculation is off. */
int spec_opts_init(const struct spec_opts *o, const llmk_model *target, int32_t n_threads, llmk_model **draft,
                   llmk_spec **spec);
/* batch and serve: with --spec draft, the draft model behind one shared
 * context of n_slots sequences of n_ctx tokens (llmk_draft_pool); *draft
 * and *pool NULL otherwise. Each request's drafter takes o->p with
 * draft_pool set to *pool. */
int spec_opts_pool(const struct spec_opts *o, const llmk_model *target, int32_t n_threads, int32_t n_slots,
                   int32_t n_ctx, llmk_model **draft, llmk_draft_pool **pool);
const char *spec_opts_mode_name(const struct spec_opts *o);
/* "speculative ngram: 812/1024 drafts accepted (79.3%), 4.10 tokens per step, draft length 9" */
void spec_opts_report(const char *cmd, const struct spec_opts *o, const llmk_spec *spec, FILE *f);

#endif
