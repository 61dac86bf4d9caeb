/* Internal representation of a parsed GBNF grammar (src/grammar_parse.c
 * builds it, src/grammar.c runs it). Not installed. */
#ifndef LLMK_GRAMMAR_H
#define LLMK_GRAMMAR_H

#include "internal.h"

#include <stdbool.h>
#include <stdint.h>

/* An element is one uint32: GE_END closes an alternative, GE_REF|r calls
 * rule r, anything else is the index of a character class. */
#define GE_END 0xFFFFFFFFu
#define GE_REF 0x80000000u
#define GE_IS_REF(e) ((e) != GE_END && ((e)&GE_REF))

#define GRAMMAR_MAX_ELEMS (1u << 20)
#define GRAMMAR_MAX_RULES (1u << 16)
#define GRAMMAR_MAX_RANGES (1u << 20)

struct gclass {
    uint32_t off, n; /* ranges[off .. off+n): sorted, disjoint, surrogates excluded */
};

struct grule {
    uint32_t alt_off, n_alts; /* alts[alt_off .. +n_alts): element index where each starts */
    uint32_t line, col;       /* where it is defined (synthetic rules: where their text is) */
    uint32_t name_off;        /* its name in names[] (NUL-terminated) */
};

struct llmk_grammar {
    uint32_t *elems;
    uint32_t n_elems;
    uint32_t *alts;
    uint32_t n_alts;
    struct grule *rules;
    uint32_t n_rules;
    uint32_t root;
    struct gclass *classes;
    uint32_t n_classes;
    uint32_t *ranges; /* pairs lo, hi */
    uint32_t n_ranges;
    char *names;
};

static inline bool gclass_has(const struct llmk_grammar *g, uint32_t c, uint32_t cp) {
    const struct gclass *k = &g->classes[c];
    if (!k->n) return false; /* an empty class ('[]'); a grammar of only such has ranges NULL */
    const uint32_t *r = g->ranges + 2 * (size_t)k->off;
    uint32_t lo = 0, hi = k->n;
    while (lo < hi) { /* first range with hi >= cp */
        uint32_t mid = lo + (hi - lo) / 2;
        if (r[2 * mid + 1] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < k->n && r[2 * lo] <= cp;
}

/* Does class c contain some code point in [lo, hi]? */
static inline bool gclass_meets(const struct llmk_grammar *g, uint32_t c, uint32_t lo, uint32_t hi) {
    const struct gclass *k = &g->classes[c];
    if (!k->n) return false;
    const uint32_t *r = g->ranges + 2 * (size_t)k->off;
    for (uint32_t i = 0; i < k->n; i++)
        if (r[2 * i] <= hi && r[2 * i + 1] >= lo) return true;
    return false;
}

/* The per-vocabulary trie the mask walks (src/grammar.c), cached on the
 * tokenizer (src/tokenizer.c): get returns NULL until set; set installs v
 * unless another thread was first, and returns the one installed. */
void *llmk_tokenizer_grammar_cache(const llmk_tokenizer *t);
void *llmk_tokenizer_set_grammar_cache(const llmk_tokenizer *t, void *v);
void llmk_grammar_vocab_free(void *v);
/* The current position's allowed-token bitmap (bit i of word i/64), cached
 * until the state moves; NULL with *status on failure. For the sampler. */
const uint64_t *llmk_grammar_state_bits(llmk_grammar_state *s, int *status);

#endif
