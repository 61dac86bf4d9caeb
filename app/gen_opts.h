/* Generation options shared by `llmk run` and `llmk chat`: the sampling and
 * stop flags, and a small per-generation context (sampler, stop-string
 * matcher) so both commands pick and print tokens the same way. */
#ifndef LLMK_GEN_OPTS_H
#define LLMK_GEN_OPTS_H

#include "llmk.h"
#include "opts.h"

#include <stdbool.h>
#include <stdio.h>

#define GEN_MAX_BIAS 256
#define GEN_MAX_STOPS 16
enum { GEN_OPT_ROWS = 21 };

struct gen_opts {
    llmk_sampler_params sp;
    llmk_logit_bias bias[GEN_MAX_BIAS];
    const char *stops[GEN_MAX_STOPS];
    size_t n_stops;
    bool chat;                 /* run --chat: format -p as one user turn */
    const char *system;        /* --system TEXT */
    const char *chat_template; /* --chat-template NAME */
    const char *reasoning_effort; /* --reasoning-effort low|medium|high (harmony) */
    bool samplers_given;       /* --samplers was used: its order is final */
    bool quiet;                /* --log-disable: no seed or stats lines on stderr */
    const char *grammar;       /* --grammar TEXT (GBNF, docs/grammar.md) */
    const char *grammar_file;  /* --grammar-file FILE */
    const char *json_schema;      /* -j/--json-schema SCHEMA: converted to a grammar (docs/json_schema.md) */
    const char *json_schema_file; /* -jf/--json-schema-file FILE */
    struct cli_opt rows[GEN_OPT_ROWS]; /* the flags' rows, pointing into this struct */
};

/* Sampling defaults (llama.cpp's), except the temperature, which each
 * command chooses. */
void gen_opts_default(struct gen_opts *o, double temperature);

/* The generation flags as a section of a command's option table (app/opts.h):
 * fills o->rows, whose destinations are o's fields, so o must not move while
 * the table is in use. */
struct cli_opt_section gen_opts_section(struct gen_opts *o);


/* The sampler parameters the flags give: o->sp, plus the --typical-p / --eta
 * stage when the flag is set and --samplers was not given. */
void gen_sampler_params(const struct gen_opts *o, llmk_sampler_params *sp);

/* One generation: the sampler and the stop-string matcher. */
struct gen_ctx {
    llmk_sampler *smp;
    llmk_stop_matcher *stop;
    char *buf;
    size_t cap;
    bool stopped; /* a stop string completed */
    llmk_grammar *grammar;        /* --grammar / --grammar-file, or NULL */
    llmk_grammar_state *gstate;   /* attached to smp */
};
/* Status; reports a random seed on stderr as "llmk CMD: seed N" (not when o->quiet). */
int gen_ctx_init(struct gen_ctx *c, const char *cmd, const struct gen_opts *o, size_t n_vocab);
void gen_ctx_free(struct gen_ctx *c);
/* Read and parse o's grammar (if any) and attach it to c's sampler, over
 * tokenizer t. A parse error names the line and column. */
int gen_ctx_grammar(struct gen_ctx *c, const struct gen_opts *o, const llmk_tokenizer *t);
/* The grammar text of --grammar, --grammar-file, or the grammar -j/-jf's
 * JSON Schema converts to (malloc'd, *out NULL
 * without one); shared with commands that parse it themselves. */
int gen_grammar_text(const struct gen_opts *o, char **out, size_t *len);
/* The grammar of a JSON Schema (its text), parsed: for batch's and the
 * server's per-request "json_schema". */
int gen_schema_grammar(const char *schema, size_t len, llmk_grammar **out);
/* The grammar is complete and nothing can follow: the generation ends. */
bool gen_grammar_done(const struct gen_ctx *c);
/* Sample the next token and record it in the penalty history. */
int gen_choose(struct gen_ctx *c, const float *logits, size_t n_vocab, int32_t *id);
/* Print text through the stop matcher; true once a stop string ended the
 * generation (the stop string itself is never printed). */
bool gen_write(struct gen_ctx *c, FILE *out, const char *text, size_t n);
/* End of the generation: print held-back text, reset for the next one. */
void gen_finish(struct gen_ctx *c, FILE *out);

/* Text of a prompt with the model's chat template: one user turn with
 * o->system (or the template's default), generation prompt added. *add_bos
 * tells whether the tokenizer should still prepend BOS (not when the
 * template wrote it). *out is malloc'd. */
int gen_chat_prompt(const llmk_gguf *g, const llmk_tokenizer *t, const struct gen_opts *o,
                    const char *prompt, char **out, bool *add_bos);
/* The same for a whole conversation: msgs[0..n) rendered with the template
 * named template_name (NULL: the model's), generation prompt added;
 * reasoning_effort as llmk_chat_render_opts takes it (NULL: the default). */
int gen_chat_messages(const llmk_gguf *g, const llmk_tokenizer *t, const char *template_name,
                      const char *reasoning_effort, const llmk_chat_message *msgs, size_t n, char **out,
                      bool *add_bos);

#endif
