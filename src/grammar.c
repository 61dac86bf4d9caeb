/* The grammar runtime: exact token masks over a vocabulary (docs/grammar.md).
 *
 * A position in the grammar is a set of parse stacks (each a chain of
 * "next element" positions, the top one a character class), plus, between
 * the bytes of one UTF-8 character, the bits read so far. Stacks are
 * hash-consed nodes (pos, parent), so a stack is one id and shared tails
 * cost nothing. Each distinct (stack set, partial character) becomes a
 * state of a lazily built DFA over bytes; a transition, once computed, is
 * one table load. The mask walks the vocabulary's byte trie (tokens sorted,
 * one node per distinct prefix, in depth-first order) with the DFA: a dead
 * state skips the node's whole subtree, and a token is allowed iff the
 * state after its last byte is alive - which is exactly "its bytes can
 * continue the text". A state's mask is cached, so a grammar that returns
 * to a state (inside a string, between list items) pays one bitmap pass.
 * The stack set is bounded (LLMK_GRAMMAR_MAX_STACKS-like limits below), so
 * a step costs at most (trie nodes) x (a bounded expansion): linear in the
 * vocabulary. Memory over a soft budget is dropped between steps (the
 * caches restart from the current position). */
#include "grammar.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#define NO_NODE 0xFFFFFFFFu
#define EMPTY_STACK 0xFFFFFFFEu /* the stack of a finished parse; sorts last */
#define MAX_STACKS 1024          /* stacks alive at once */
#define MAX_EXPAND_WORK 200000   /* expansion steps for one character */
#define MAX_STACK_DEPTH 100000   /* frames in one stack (nesting) */
#define MAX_EXPAND_REC 2000      /* nested calls expanded without consuming */
#define SOFT_BUDGET ((size_t)32 << 20)
#define HARD_BUDGET ((size_t)256 << 20)
#define TRANS_UNKNOWN (-2)
#define TRANS_DEAD (-1)

/* ---- the vocabulary trie -------------------------------------------------- */

struct gvocab {
    size_t n_vocab;
    uint32_t n_nodes, max_depth;
    uint8_t *byte;       /* per node: the byte on the edge into it */
    uint32_t *end;       /* per node: index after its subtree */
    uint32_t *depth;     /* per node: 1 + depth of its parent (root children: 1) */
    uint32_t *tok_start; /* n_nodes + 1: tokens ending at node i are toks[tok_start[i] ..) */
    int32_t *toks;
    int32_t *eog;
    size_t n_eog;
};

void llmk_grammar_vocab_free(void *p) {
    struct gvocab *v = p;
    if (!v) return;
    free(v->byte);
    free(v->end);
    free(v->depth);
    free(v->tok_start);
    free(v->toks);
    free(v->eog);
    free(v);
}

struct vtok {
    int32_t id;
    uint32_t len;
    size_t off;
};

static _Thread_local const char *g_sort_arena; /* qsort has no context argument */

static int vtok_cmp(const void *a, const void *b) {
    const struct vtok *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(g_sort_arena + x->off, g_sort_arena + y->off, n);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : 1;
}

/* Node arrays from the sorted tokens: a node per new prefix byte. */
static int vocab_nodes(struct gvocab *v, const struct vtok *tk, size_t n, const char *arena, size_t total) {
    size_t cap = total + 1;
    v->byte = malloc(cap);
    v->end = malloc(cap * sizeof *v->end);
    v->depth = malloc(cap * sizeof *v->depth);
    v->tok_start = calloc(cap + 1, sizeof *v->tok_start);
    v->toks = malloc((n ? n : 1) * sizeof *v->toks);
    uint32_t *path = malloc((v->max_depth + 1) * sizeof *path);
    uint32_t *tok_node = malloc((n ? n : 1) * sizeof *tok_node);
    if (!v->byte || !v->end || !v->depth || !v->tok_start || !v->toks || !path || !tok_node) {
        free(path);
        free(tok_node);
        return llmk_fail(LLMK_OUT_OF_MEMORY, "grammar: vocabulary trie");
    }
    uint32_t nn = 0, plen = 0;
    const struct vtok *prev = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *s = arena + tk[i].off;
        uint32_t l = 0;
        if (prev) {
            const char *ps = arena + prev->off;
            while (l < prev->len && l < tk[i].len && ps[l] == s[l]) l++;
        }
        for (uint32_t d = l; d < plen; d++) v->end[path[d]] = nn; /* close subtrees left */
        for (uint32_t d = l; d < tk[i].len; d++) {
            v->byte[nn] = (uint8_t)s[d];
            v->depth[nn] = d + 1;
            path[d] = nn++;
        }
        plen = tk[i].len;
        tok_node[i] = path[tk[i].len - 1];
        v->toks[i] = tk[i].id;
        prev = &tk[i];
    }
    for (uint32_t d = 0; d < plen; d++) v->end[path[d]] = nn;
    v->n_nodes = nn;
    for (size_t i = 0; i < n; i++) v->tok_start[tok_node[i] + 1]++;
    for (uint32_t i = 0; i < nn; i++) v->tok_start[i + 1] += v->tok_start[i];
    free(path);
    free(tok_node);
    return LLMK_OK;
}

static int vocab_build(const llmk_tokenizer *t, struct gvocab **out) {
    size_t nv = llmk_tokenizer_n_vocab(t), total = 0, n = 0, cap = 1 << 16;
    struct gvocab *v = calloc(1, sizeof *v);
    struct vtok *tk = malloc((nv ? nv : 1) * sizeof *tk);
    char *arena = malloc(cap);
    int st = v && tk && arena ? LLMK_OK : llmk_fail(LLMK_OUT_OF_MEMORY, "grammar: vocabulary");
    if (st == LLMK_OK) v->n_vocab = nv, v->eog = malloc(sizeof *v->eog * (nv ? nv : 1));
    if (st == LLMK_OK && !v->eog) st = llmk_fail(LLMK_OUT_OF_MEMORY, "grammar: vocabulary");
    for (size_t id = 0; st == LLMK_OK && id < nv; id++) {
        if (llmk_tokenizer_is_eog(t, (int32_t)id)) {
            v->eog[v->n_eog++] = (int32_t)id;
            continue;
        }
        size_t len = 0;
        st = llmk_tokenizer_token_bytes(t, (int32_t)id, arena + total, cap - total, &len);
        if (st == LLMK_BUFFER_TOO_SMALL) {
            while (cap - total < len) cap *= 2;
            char *na = realloc(arena, cap);
            if (!na) {
                st = llmk_fail(LLMK_OUT_OF_MEMORY, "grammar: vocabulary bytes");
                break;
            }
            arena = na;
            st = llmk_tokenizer_token_bytes(t, (int32_t)id, arena + total, cap - total, &len);
        }
        if (st != LLMK_OK || !len) continue; /* control tokens add no text: never allowed */
        tk[n++] = (struct vtok){(int32_t)id, (uint32_t)len, total};
        total += len;
        if (len > v->max_depth) v->max_depth = (uint32_t)len;
    }
    if (st == LLMK_OK) {
        g_sort_arena = arena;
        qsort(tk, n, sizeof *tk, vtok_cmp);
        st = vocab_nodes(v, tk, n, arena, total);
    }
    free(tk);
    free(arena);
    if (st != LLMK_OK) {
        llmk_grammar_vocab_free(v);
        return st;
    }
    *out = v;
    return LLMK_OK;
}

/* The tokenizer's trie, built once (two threads racing both build; one wins). */
static int vocab_get(const llmk_tokenizer *t, const struct gvocab **out) {
    struct gvocab *v = llmk_tokenizer_grammar_cache(t);
    if (!v) {
        int st = vocab_build(t, &v);
        if (st != LLMK_OK) return st;
        struct gvocab *won = llmk_tokenizer_set_grammar_cache(t, v);
        if (won != v) llmk_grammar_vocab_free(v);
        v = won;
    }
    *out = v;
    return LLMK_OK;
}

/* ---- stacks and the lazy DFA ---------------------------------------------- */

struct gnode {
    uint32_t pos, parent, depth;
};

struct dstate {
    uint32_t off, n; /* its stacks: sets[off .. off+n), ascending */
    uint32_t partial;
    uint32_t hash;
    int32_t *trans;  /* 256 next states (TRANS_UNKNOWN until computed), allocated on first use */
    uint64_t *mask;  /* allowed tokens, once computed */
};

struct vec32 {
    uint32_t *v;
    size_t n, cap;
};

struct gengine {
    const struct llmk_grammar *g;
    size_t mask_words;
    struct gnode *nodes;
    uint32_t n_nodes, cap_nodes;
    uint32_t *nht; /* node id + 1 */
    uint32_t nht_cap;
    struct dstate *states;
    uint32_t n_states, cap_states;
    uint32_t *sht; /* state id + 1 */
    uint32_t sht_cap;
    struct vec32 sets, tmp_in, tmp_out;
    size_t bytes, work;
    int status; /* sticky: LLMK_OK until a limit or allocation fails */
};

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static bool efail(struct gengine *e, int status, const char *fmt, ...) {
    if (e->status == LLMK_OK) {
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        e->status = llmk_fail(status, "grammar: %s", msg);
    }
    return false;
}

static bool v32_push(struct gengine *e, struct vec32 *a, uint32_t x) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 64;
        uint32_t *nv = realloc(a->v, cap * sizeof *nv);
        if (!nv) return efail(e, LLMK_OUT_OF_MEMORY, "out of memory");
        e->bytes += (cap - a->cap) * sizeof *nv;
        a->v = nv;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return true;
}

static bool budget_ok(struct gengine *e) {
    if (e->bytes <= HARD_BUDGET) return true;
    return efail(e, LLMK_BAD_GRAMMAR, "parse state needs more than %zu MiB (grammar too ambiguous)",
                 HARD_BUDGET >> 20);
}

static uint32_t mix32(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (uint32_t)h;
}

static bool nht_grow(struct gengine *e) {
    uint32_t cap = e->nht_cap ? 2 * e->nht_cap : 1024;
    uint32_t *ht = calloc(cap, sizeof *ht);
    if (!ht) return efail(e, LLMK_OUT_OF_MEMORY, "out of memory");
    for (uint32_t i = 0; i < e->n_nodes; i++) {
        uint32_t h = mix32((uint64_t)e->nodes[i].pos << 32 | e->nodes[i].parent) & (cap - 1);
        while (ht[h]) h = (h + 1) & (cap - 1);
        ht[h] = i + 1;
    }
    e->bytes += (size_t)(cap - e->nht_cap) * sizeof *ht;
    free(e->nht);
    e->nht = ht;
    e->nht_cap = cap;
    return true;
}

/* The stack (pos on top of parent), interned; NO_NODE on failure. */
static uint32_t node(struct gengine *e, uint32_t pos, uint32_t parent) {
    if (2 * (e->n_nodes + 1) > e->nht_cap && !nht_grow(e)) return NO_NODE;
    uint32_t h = mix32((uint64_t)pos << 32 | parent) & (e->nht_cap - 1);
    while (e->nht[h]) {
        const struct gnode *x = &e->nodes[e->nht[h] - 1];
        if (x->pos == pos && x->parent == parent) return e->nht[h] - 1;
        h = (h + 1) & (e->nht_cap - 1);
    }
    uint32_t depth = parent == NO_NODE ? 1 : e->nodes[parent].depth + 1;
    if (depth > MAX_STACK_DEPTH)
        return efail(e, LLMK_BAD_GRAMMAR, "nesting deeper than %d levels", MAX_STACK_DEPTH), NO_NODE;
    if (e->n_nodes == e->cap_nodes) {
        uint32_t cap = e->cap_nodes ? 2 * e->cap_nodes : 1024;
        struct gnode *nn = realloc(e->nodes, (size_t)cap * sizeof *nn);
        if (!nn) return efail(e, LLMK_OUT_OF_MEMORY, "out of memory"), NO_NODE;
        e->bytes += (size_t)(cap - e->cap_nodes) * sizeof *nn;
        e->nodes = nn;
        e->cap_nodes = cap;
        if (!budget_ok(e)) return NO_NODE;
    }
    e->nodes[e->n_nodes] = (struct gnode){pos, parent, depth};
    e->nht[h] = ++e->n_nodes;
    return e->n_nodes - 1;
}

/* Push the stacks that "match element pos next, then continue with parent"
 * stands for, each with a character class on top (or EMPTY_STACK). */
static bool expand(struct gengine *e, uint32_t pos, uint32_t parent, struct vec32 *out, int rec) {
    const struct llmk_grammar *g = e->g;
    for (;;) {
        if (++e->work > MAX_EXPAND_WORK)
            return efail(e, LLMK_BAD_GRAMMAR, "more than %d expansion steps for one character (grammar too "
                         "ambiguous)", MAX_EXPAND_WORK);
        uint32_t el = g->elems[pos];
        if (el == GE_END) { /* the alternative is done: return to the caller's continuation */
            if (parent == NO_NODE) return v32_push(e, out, EMPTY_STACK);
            pos = e->nodes[parent].pos;
            parent = e->nodes[parent].parent;
            continue;
        }
        if (!GE_IS_REF(el)) {
            uint32_t id = node(e, pos, parent);
            return id != NO_NODE && v32_push(e, out, id);
        }
        if (rec > MAX_EXPAND_REC)
            return efail(e, LLMK_BAD_GRAMMAR, "rules nested deeper than %d without a character", MAX_EXPAND_REC);
        const struct grule *r = &g->rules[el & ~GE_REF];
        uint32_t cont = parent; /* a call in tail position returns straight to the caller's caller */
        if (g->elems[pos + 1] != GE_END && (cont = node(e, pos + 1, parent)) == NO_NODE) return false;
        for (uint32_t a = 0; a < r->n_alts; a++)
            if (!expand(e, g->alts[r->alt_off + a], cont, out, rec + 1)) return false;
        return true;
    }
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static bool sort_unique(struct gengine *e, struct vec32 *a) {
    if (a->n > 1) qsort(a->v, a->n, sizeof *a->v, cmp_u32);
    size_t m = 0;
    for (size_t i = 0; i < a->n; i++)
        if (!m || a->v[i] != a->v[m - 1]) a->v[m++] = a->v[i];
    a->n = m;
    if (m > MAX_STACKS)
        return efail(e, LLMK_BAD_GRAMMAR, "more than %d parse stacks at once (grammar too ambiguous)", MAX_STACKS);
    return true;
}

/* The stacks after code point cp. */
static bool step_cp(struct gengine *e, const uint32_t *in, size_t n, uint32_t cp, struct vec32 *out) {
    out->n = 0;
    e->work = 0;
    for (size_t i = 0; i < n; i++) {
        if (in[i] == EMPTY_STACK) continue;
        const struct gnode *s = &e->nodes[in[i]];
        if (!gclass_has(e->g, e->g->elems[s->pos], cp)) continue;
        uint32_t pos = s->pos + 1, parent = s->parent;
        if (!expand(e, pos, parent, out, 0)) return false;
    }
    return sort_unique(e, out);
}

/* The stacks that can take some character in [lo, hi] (between the bytes of one). */
static bool filter_range(struct gengine *e, const uint32_t *in, size_t n, uint32_t lo, uint32_t hi,
                         struct vec32 *out) {
    out->n = 0;
    for (size_t i = 0; i < n; i++)
        if (in[i] != EMPTY_STACK && gclass_meets(e->g, e->g->elems[e->nodes[in[i]].pos], lo, hi) &&
            !v32_push(e, out, in[i]))
            return false;
    return true;
}

/* Partial character: flag, total length, bytes still to come, bits so far. */
#define PARTIAL(total, rem, bits) (0x80000000u | (uint32_t)(total) << 28 | (uint32_t)(rem) << 24 | (bits))
#define P_TOTAL(p) (((p) >> 28) & 7u)
#define P_REM(p) (((p) >> 24) & 3u)
#define P_BITS(p) ((p)&0x1FFFFFu)

static bool partial_range(uint32_t p, uint32_t *lo, uint32_t *hi) {
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    unsigned sh = 6 * P_REM(p);
    *lo = P_BITS(p) << sh;
    *hi = *lo | ((1u << sh) - 1);
    if (*lo < min_cp[P_TOTAL(p)]) *lo = min_cp[P_TOTAL(p)];
    if (*hi > 0x10FFFF) *hi = 0x10FFFF;
    return *lo <= *hi;
}

static bool state_grow(struct gengine *e) {
    uint32_t cap = e->sht_cap ? 2 * e->sht_cap : 256;
    uint32_t *ht = calloc(cap, sizeof *ht);
    if (!ht) return efail(e, LLMK_OUT_OF_MEMORY, "out of memory");
    for (uint32_t i = 0; i < e->n_states; i++) {
        uint32_t h = e->states[i].hash & (cap - 1);
        while (ht[h]) h = (h + 1) & (cap - 1);
        ht[h] = i + 1;
    }
    e->bytes += (size_t)(cap - e->sht_cap) * sizeof *ht;
    free(e->sht);
    e->sht = ht;
    e->sht_cap = cap;
    return true;
}

/* The DFA state of (stacks, partial); -1 for the dead (empty) one or on failure. */
static int32_t state_of(struct gengine *e, const uint32_t *st, size_t n, uint32_t partial) {
    if (!n) return TRANS_DEAD;
    uint64_t h = 1469598103934665603ULL ^ partial;
    for (size_t i = 0; i < n; i++) h = (h ^ st[i]) * 1099511628211ULL;
    uint32_t hash = mix32(h);
    if (2 * (e->n_states + 1) > e->sht_cap && !state_grow(e)) return TRANS_DEAD;
    uint32_t k = hash & (e->sht_cap - 1);
    while (e->sht[k]) {
        const struct dstate *d = &e->states[e->sht[k] - 1];
        if (d->hash == hash && d->partial == partial && d->n == n && !memcmp(e->sets.v + d->off, st, n * sizeof *st))
            return (int32_t)e->sht[k] - 1;
        k = (k + 1) & (e->sht_cap - 1);
    }
    if (e->n_states == e->cap_states) {
        uint32_t cap = e->cap_states ? 2 * e->cap_states : 256;
        struct dstate *ns = realloc(e->states, (size_t)cap * sizeof *ns);
        if (!ns) return efail(e, LLMK_OUT_OF_MEMORY, "out of memory"), TRANS_DEAD;
        e->bytes += (size_t)(cap - e->cap_states) * sizeof *ns;
        e->states = ns;
        e->cap_states = cap;
    }
    size_t off = e->sets.n;
    for (size_t i = 0; i < n; i++)
        if (!v32_push(e, &e->sets, st[i])) return TRANS_DEAD;
    if (!budget_ok(e)) return TRANS_DEAD;
    e->states[e->n_states] = (struct dstate){(uint32_t)off, (uint32_t)n, partial, hash, NULL, NULL};
    e->sht[k] = ++e->n_states;
    return (int32_t)e->n_states - 1;
}

/* Compute state sid's transition on byte b (not cached yet). */
static int32_t step_slow(struct gengine *e, int32_t sid, uint8_t b) {
    const struct dstate *d = &e->states[sid];
    uint32_t partial = d->partial, np = 0, cp = 0;
    bool whole = false;
    if (!partial) {
        if (b < 0x80) whole = true, cp = b;
        else if (b >= 0xC2 && b <= 0xDF) np = PARTIAL(2, 1, b & 0x1Fu);
        else if (b >= 0xE0 && b <= 0xEF) np = PARTIAL(3, 2, b & 0x0Fu);
        else if (b >= 0xF0 && b <= 0xF4) np = PARTIAL(4, 3, b & 0x07u);
        else return TRANS_DEAD;
    } else {
        if ((b & 0xC0) != 0x80) return TRANS_DEAD;
        uint32_t bits = P_BITS(partial) << 6 | (b & 0x3Fu);
        if (P_REM(partial) == 1) {
            static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
            if (bits < min_cp[P_TOTAL(partial)] || bits > 0x10FFFF || (bits >= 0xD800 && bits <= 0xDFFF))
                return TRANS_DEAD;
            whole = true, cp = bits;
        } else {
            np = PARTIAL(P_TOTAL(partial), P_REM(partial) - 1, bits);
        }
    }
    /* the source set is copied: interning may move e->sets */
    e->tmp_in.n = 0;
    for (uint32_t i = 0; i < d->n; i++)
        if (!v32_push(e, &e->tmp_in, e->sets.v[d->off + i])) return TRANS_DEAD;
    bool ok;
    if (whole) {
        ok = step_cp(e, e->tmp_in.v, e->tmp_in.n, cp, &e->tmp_out);
    } else {
        uint32_t lo, hi;
        if (!partial_range(np, &lo, &hi)) return TRANS_DEAD;
        ok = filter_range(e, e->tmp_in.v, e->tmp_in.n, lo, hi, &e->tmp_out);
    }
    if (!ok) return TRANS_DEAD;
    return state_of(e, e->tmp_out.v, e->tmp_out.n, whole ? 0 : np);
}

static inline int32_t step(struct gengine *e, int32_t sid, uint8_t b) {
    int32_t *tr = e->states[sid].trans;
    if (tr && tr[b] != TRANS_UNKNOWN) return tr[b];
    if (!tr) {
        tr = malloc(256 * sizeof *tr);
        if (!tr) return efail(e, LLMK_OUT_OF_MEMORY, "out of memory"), TRANS_DEAD;
        for (int i = 0; i < 256; i++) tr[i] = TRANS_UNKNOWN;
        e->states[sid].trans = tr;
        e->bytes += 256 * sizeof *tr;
    }
    int32_t t = step_slow(e, sid, b);
    if (e->status != LLMK_OK) return TRANS_DEAD;
    e->states[sid].trans[b] = t;
    return t;
}

static void eng_clear(struct gengine *e) {
    for (uint32_t i = 0; i < e->n_states; i++) {
        free(e->states[i].trans);
        free(e->states[i].mask);
    }
    free(e->nodes);
    free(e->nht);
    free(e->states);
    free(e->sht);
    free(e->sets.v);
    free(e->tmp_in.v);
    free(e->tmp_out.v);
    const struct llmk_grammar *g = e->g;
    size_t mw = e->mask_words;
    memset(e, 0, sizeof *e);
    e->g = g;
    e->mask_words = mw;
    e->status = LLMK_OK;
}

/* The start state: the root rule's alternatives expanded. */
static int32_t eng_start(struct gengine *e) {
    const struct grule *r = &e->g->rules[e->g->root];
    struct vec32 out = {0};
    e->work = 0;
    bool ok = true;
    for (uint32_t a = 0; ok && a < r->n_alts; a++) ok = expand(e, e->g->alts[r->alt_off + a], NO_NODE, &out, 0);
    int32_t s = ok && sort_unique(e, &out) ? state_of(e, out.v, out.n, 0) : TRANS_DEAD;
    free(out.v);
    if (s < 0 && e->status == LLMK_OK)
        efail(e, LLMK_BAD_GRAMMAR, "the root rule matches nothing");
    return s;
}

/* Drop every cache, keeping only state sid (renumbered): stacks are copied
 * out as position chains and interned again. */
static int32_t eng_rebase(struct gengine *e, int32_t sid) {
    const struct dstate *d = &e->states[sid];
    uint32_t partial = d->partial;
    size_t total = 0;
    for (uint32_t i = 0; i < d->n; i++) {
        uint32_t s = e->sets.v[d->off + i];
        total += 1 + (s == EMPTY_STACK ? 0 : e->nodes[s].depth);
    }
    uint32_t *chain = malloc((total ? total : 1) * sizeof *chain), n = d->n;
    if (!chain) return efail(e, LLMK_OUT_OF_MEMORY, "out of memory"), TRANS_DEAD;
    size_t k = 0;
    for (uint32_t i = 0; i < n; i++) { /* each: depth, then positions top to bottom */
        uint32_t s = e->sets.v[d->off + i];
        uint32_t dep = s == EMPTY_STACK ? 0 : e->nodes[s].depth;
        chain[k++] = s == EMPTY_STACK ? UINT32_MAX : dep;
        for (uint32_t x = s; s != EMPTY_STACK && x != NO_NODE; x = e->nodes[x].parent) chain[k++] = e->nodes[x].pos;
    }
    eng_clear(e);
    struct vec32 st = {0};
    k = 0;
    bool ok = true;
    for (uint32_t i = 0; ok && i < n; i++) {
        uint32_t dep = chain[k++];
        if (dep == UINT32_MAX) {
            ok = v32_push(e, &st, EMPTY_STACK);
            continue;
        }
        uint32_t x = NO_NODE;
        for (uint32_t j = dep; ok && j-- > 0;) ok = (x = node(e, chain[k + j], x)) != NO_NODE;
        k += dep;
        ok = ok && v32_push(e, &st, x);
    }
    int32_t s = ok && sort_unique(e, &st) ? state_of(e, st.v, st.n, partial) : TRANS_DEAD;
    free(st.v);
    free(chain);
    return s;
}

static bool state_accepting(const struct gengine *e, int32_t sid) {
    const struct dstate *d = &e->states[sid];
    return !d->partial && d->n && e->sets.v[d->off + d->n - 1] == EMPTY_STACK;
}

/* ---- one sequence's state ------------------------------------------------- */

struct llmk_grammar_state {
    struct gengine e;
    const llmk_tokenizer *t;
    const struct gvocab *v;
    int32_t cur;
    bool ended;      /* an end-of-generation token was accepted */
    uint32_t *walk;  /* DFA state per trie depth */
    uint64_t *empty; /* an all-zero mask (nothing allowed after the end) */
};

int llmk_grammar_state_init(const llmk_grammar *g, const llmk_tokenizer *t, llmk_grammar_state **out) {
    llmk_error_clear();
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "grammar_state_init: NULL out");
    *out = NULL;
    if (!g || !t) return llmk_fail(LLMK_INVALID_ARGUMENT, "grammar_state_init: NULL grammar or tokenizer");
    const struct gvocab *v;
    int st = vocab_get(t, &v);
    if (st != LLMK_OK) return st;
    llmk_grammar_state *s = calloc(1, sizeof *s);
    if (!s) return llmk_fail(LLMK_OUT_OF_MEMORY, "grammar state");
    s->t = t;
    s->v = v;
    s->e.g = g;
    s->e.status = LLMK_OK;
    s->e.mask_words = (v->n_vocab + 63) / 64;
    s->walk = malloc(((size_t)v->max_depth + 1) * sizeof *s->walk);
    s->empty = calloc(s->e.mask_words ? s->e.mask_words : 1, sizeof *s->empty);
    if (!s->walk || !s->empty) {
        llmk_grammar_state_free(s);
        return llmk_fail(LLMK_OUT_OF_MEMORY, "grammar state");
    }
    s->cur = eng_start(&s->e);
    if (s->cur < 0) {
        st = s->e.status;
        llmk_grammar_state_free(s);
        return st;
    }
    *out = s;
    return LLMK_OK;
}

void llmk_grammar_state_free(llmk_grammar_state *s) {
    if (!s) return;
    eng_clear(&s->e);
    free(s->walk);
    free(s->empty);
    free(s);
}

int llmk_grammar_state_clone(const llmk_grammar_state *s, llmk_grammar_state **out) {
    llmk_error_clear();
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "grammar_state_clone: NULL out");
    *out = NULL;
    if (!s) return llmk_fail(LLMK_INVALID_ARGUMENT, "grammar_state_clone: NULL state");
    llmk_grammar_state *c;
    int st = llmk_grammar_state_init(s->e.g, s->t, &c);
    if (st != LLMK_OK) return st;
    /* copy the position: the source's stacks, interned again in the clone */
    struct gengine tmp = s->e; /* read-only use of the source's tables */
    const struct dstate *d = &tmp.states[s->cur];
    eng_clear(&c->e);
    struct vec32 stk = {0};
    bool ok = true;
    for (uint32_t i = 0; ok && i < d->n; i++) {
        uint32_t x = tmp.sets.v[d->off + i], y = NO_NODE;
        if (x == EMPTY_STACK) {
            ok = v32_push(&c->e, &stk, EMPTY_STACK);
            continue;
        }
        uint32_t dep = tmp.nodes[x].depth;
        uint32_t *pos = malloc(dep * sizeof *pos);
        if (!pos) {
            ok = efail(&c->e, LLMK_OUT_OF_MEMORY, "out of memory");
            break;
        }
        for (uint32_t j = 0; j < dep; j++, x = tmp.nodes[x].parent) pos[j] = tmp.nodes[x].pos;
        for (uint32_t j = dep; ok && j-- > 0;) ok = (y = node(&c->e, pos[j], y)) != NO_NODE;
        free(pos);
        ok = ok && v32_push(&c->e, &stk, y);
    }
    c->cur = ok && sort_unique(&c->e, &stk) ? state_of(&c->e, stk.v, stk.n, d->partial) : TRANS_DEAD;
    free(stk.v);
    c->ended = s->ended;
    if (c->cur < 0) {
        st = c->e.status != LLMK_OK ? c->e.status : llmk_fail(LLMK_BAD_GRAMMAR, "grammar: clone failed");
        llmk_grammar_state_free(c);
        return st;
    }
    *out = c;
    return LLMK_OK;
}

void llmk_grammar_state_reset(llmk_grammar_state *s) {
    if (!s) return;
    eng_clear(&s->e);
    s->ended = false;
    s->cur = eng_start(&s->e);
}

/* Walk the trie from the current state: the allowed tokens' bitmap. */
static int compute_mask(llmk_grammar_state *s, uint64_t *bits) {
    struct gengine *e = &s->e;
    const struct gvocab *v = s->v;
    uint32_t *w = s->walk;
    w[0] = (uint32_t)s->cur;
    for (uint32_t i = 0; i < v->n_nodes;) {
        uint32_t d = v->depth[i];
        int32_t t = step(e, (int32_t)w[d - 1], v->byte[i]);
        if (t < 0) {
            if (e->status != LLMK_OK) return e->status;
            i = v->end[i];
            continue;
        }
        w[d] = (uint32_t)t;
        for (uint32_t k = v->tok_start[i]; k < v->tok_start[i + 1]; k++) {
            uint32_t id = (uint32_t)v->toks[k];
            bits[id >> 6] |= 1ULL << (id & 63);
        }
        i++;
    }
    if (state_accepting(e, s->cur))
        for (size_t k = 0; k < v->n_eog; k++) {
            uint32_t id = (uint32_t)v->eog[k];
            bits[id >> 6] |= 1ULL << (id & 63);
        }
    return LLMK_OK;
}

/* The current state's mask (cached on its DFA state); NULL with a status. */
const uint64_t *llmk_grammar_state_bits(llmk_grammar_state *s, int *status) {
    struct gengine *e = &s->e;
    *status = LLMK_OK;
    if (e->status != LLMK_OK || s->cur < 0) {
        *status = e->status != LLMK_OK ? e->status : llmk_fail(LLMK_BAD_GRAMMAR, "grammar: no state");
        return NULL;
    }
    if (s->ended) return s->empty;
    if (e->bytes > SOFT_BUDGET && !e->states[s->cur].mask) {
        s->cur = eng_rebase(e, s->cur);
        if (s->cur < 0) {
            *status = e->status != LLMK_OK ? e->status : llmk_fail(LLMK_BAD_GRAMMAR, "grammar: rebase failed");
            return NULL;
        }
    }
    if (e->states[s->cur].mask) return e->states[s->cur].mask;
    uint64_t *bits = calloc(e->mask_words ? e->mask_words : 1, sizeof *bits);
    if (!bits) {
        *status = llmk_fail(LLMK_OUT_OF_MEMORY, "grammar: mask");
        return NULL;
    }
    int st = compute_mask(s, bits);
    if (st != LLMK_OK) {
        free(bits);
        *status = st;
        return NULL;
    }
    e->states[s->cur].mask = bits;
    e->bytes += e->mask_words * sizeof *bits;
    return bits;
}

int llmk_grammar_state_mask(llmk_grammar_state *s, float *logits, size_t n) {
    llmk_error_clear();
    if (!s || !logits) return llmk_fail(LLMK_INVALID_ARGUMENT, "grammar_state_mask: NULL argument");
    if (n != s->v->n_vocab)
        return llmk_fail(LLMK_LOGITS_LENGTH_MISMATCH, "grammar_state_mask: %zu logits, vocabulary has %zu", n,
                         s->v->n_vocab);
    int st;
    const uint64_t *bits = llmk_grammar_state_bits(s, &st);
    if (!bits) return st;
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        if (bits[i >> 6] >> (i & 63) & 1) any = true;
        else logits[i] = -INFINITY;
    }
    if (!any) return llmk_fail(LLMK_BAD_GRAMMAR, "grammar: no token of the vocabulary can continue the text");
    return LLMK_OK;
}

bool llmk_grammar_state_allows(llmk_grammar_state *s, int32_t id) {
    if (!s || id < 0 || (size_t)id >= s->v->n_vocab) return false;
    int st;
    const uint64_t *bits = llmk_grammar_state_bits(s, &st);
    return bits && (bits[(uint32_t)id >> 6] >> (id & 63) & 1);
}

int llmk_grammar_state_accept(llmk_grammar_state *s, int32_t id) {
    llmk_error_clear();
    if (!s) return llmk_fail(LLMK_INVALID_ARGUMENT, "grammar_state_accept: NULL state");
    if (id < 0 || (size_t)id >= s->v->n_vocab)
        return llmk_fail(LLMK_INVALID_TOKEN, "grammar_state_accept: token %d, vocabulary has %zu", id, s->v->n_vocab);
    if (s->e.status != LLMK_OK) return llmk_fail(s->e.status, "grammar: the state failed earlier");
    if (s->ended) return llmk_fail(LLMK_BAD_GRAMMAR, "grammar: token %d after the end of generation", id);
    if (llmk_tokenizer_is_eog(s->t, id)) {
        if (!state_accepting(&s->e, s->cur))
            return llmk_fail(LLMK_BAD_GRAMMAR, "grammar: end of generation (token %d) before the grammar is complete",
                             id);
        s->ended = true;
        return LLMK_OK;
    }
    char buf[256];
    size_t len = 0;
    int st = llmk_tokenizer_token_bytes(s->t, id, buf, sizeof buf, &len);
    char *p = buf;
    if (st == LLMK_BUFFER_TOO_SMALL) {
        p = malloc(len);
        if (!p) return llmk_fail(LLMK_OUT_OF_MEMORY, "grammar: token bytes");
        st = llmk_tokenizer_token_bytes(s->t, id, p, len, &len);
    }
    int32_t cur = s->cur;
    for (size_t i = 0; st == LLMK_OK && i < len && cur >= 0; i++) cur = step(&s->e, cur, (uint8_t)p[i]);
    if (p != buf) free(p);
    if (st != LLMK_OK) return st;
    if (s->e.status != LLMK_OK) return llmk_fail(s->e.status, "%s", llmk_last_error());
    if (!len || cur < 0) return llmk_fail(LLMK_BAD_GRAMMAR, "grammar: token %d cannot continue the text here", id);
    s->cur = cur;
    return LLMK_OK;
}

bool llmk_grammar_state_accepting(const llmk_grammar_state *s) {
    return s && s->e.status == LLMK_OK && s->cur >= 0 && (s->ended || state_accepting(&s->e, s->cur));
}

bool llmk_grammar_state_done(const llmk_grammar_state *s) {
    if (!s) return false;
    if (s->ended) return true;
    return s->e.status == LLMK_OK && s->cur >= 0 && state_accepting(&s->e, s->cur) && s->e.states[s->cur].n == 1;
}

/* ---- whole strings (tests, tools) ----------------------------------------- */

int llmk_grammar_match(const llmk_grammar *g, const char *text, size_t len, bool *complete, bool *prefix) {
    llmk_error_clear();
    if (!g || (!text && len) || !complete || !prefix)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "grammar_match: NULL argument");
    *complete = *prefix = false;
    struct gengine e = {.g = g, .status = LLMK_OK};
    int32_t s0 = eng_start(&e);
    struct vec32 cur = {0}, next = {0};
    bool ok = s0 >= 0;
    for (uint32_t i = 0; ok && i < e.states[s0].n; i++) ok = v32_push(&e, &cur, e.sets.v[e.states[s0].off + i]);
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    bool alive = ok;
    while (ok && alive && i < len) { /* whole characters, decoded directly (no DFA) */
        unsigned char c = s[i];
        size_t n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!n) {
            alive = false;
            break;
        }
        uint32_t bits = n == 1 ? c : c & (0x7Fu >> n);
        size_t k = 1;
        for (; k < n && i + k < len && (s[i + k] & 0xC0) == 0x80; k++) bits = bits << 6 | (s[i + k] & 0x3Fu);
        if (k < n && i + k < len) { /* a malformed sequence */
            alive = false;
            break;
        }
        if (k < n) { /* the text ends inside a character: can some completion continue? */
            uint32_t lo, hi;
            alive = partial_range(PARTIAL(n, n - k, bits), &lo, &hi) &&
                    (ok = filter_range(&e, cur.v, cur.n, lo, hi, &next)) && next.n > 0;
            i = len;
            break;
        }
        static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (bits < min_cp[n] || bits > 0x10FFFF || (bits >= 0xD800 && bits <= 0xDFFF)) {
            alive = false;
            break;
        }
        ok = step_cp(&e, cur.v, cur.n, bits, &next);
        struct vec32 t = cur;
        cur = next;
        next = t;
        alive = cur.n > 0;
        i += n;
        if (alive && i == len) *complete = cur.v[cur.n - 1] == EMPTY_STACK;
    }
    if (ok && len == 0) *complete = cur.n && cur.v[cur.n - 1] == EMPTY_STACK;
    *prefix = ok && alive;
    if (!*prefix) *complete = false;
    int st = ok ? LLMK_OK : e.status;
    free(cur.v);
    free(next.v);
    eng_clear(&e);
    return st;
}
