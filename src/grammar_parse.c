/* GBNF text -> struct llmk_grammar (src/grammar.h). Recursive descent over
 * llama.cpp's format; repetitions and groups become synthetic rules so the
 * runtime only sees alternatives of characters classes and rule calls.
 * Every size is bounded (text, elements, rules, {m,n}, nesting), and the
 * checks that need the whole grammar (undefined rules, left recursion) run
 * after parsing, in time linear in its size. */
#include "grammar.h"

#include <stdarg.h>
#include <string.h>

#define MAX_NESTING 128

struct u32vec {
    uint32_t *v;
    size_t n, cap;
};

static bool vec_push(struct u32vec *a, uint32_t x) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 16;
        uint32_t *nv = realloc(a->v, cap * sizeof *nv);
        if (!nv) return false;
        a->v = nv;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return true;
}

/* A rule while parsing: defined once; referenced possibly before. */
struct prule {
    uint32_t name_off, name_len;
    bool defined;
    size_t ref_pos; /* first reference, for "undefined rule" */
    size_t def_pos;
    uint32_t alt_off, n_alts;
};

struct parser {
    const char *s;
    size_t len, pos;
    int status;
    int depth;
    struct u32vec elems, alts, ranges;
    struct u32vec classes; /* pairs off, n */
    struct prule *rules;
    size_t n_rules, cap_rules;
    char *names;
    size_t names_len, names_cap;
    uint32_t *ht; /* rule name -> id + 1, open addressing */
    size_t ht_cap;
    uint32_t synth;
};

static void line_col(const char *s, size_t pos, uint32_t *line, uint32_t *col) {
    uint32_t l = 1, c = 1;
    for (size_t i = 0; i < pos; i++) {
        if (s[i] == '\n') {
            l++;
            c = 1;
        } else if (((unsigned char)s[i] & 0xC0) != 0x80) {
            c++;
        }
    }
    *line = l;
    *col = c;
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static bool perr(struct parser *p, size_t pos, const char *fmt, ...) {
    if (p->status != LLMK_OK) return false;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    uint32_t l, c;
    line_col(p->s, pos > p->len ? p->len : pos, &l, &c);
    p->status = llmk_fail(LLMK_BAD_GRAMMAR, "grammar: line %u, column %u: %s", l, c, msg);
    return false;
}

static bool oom(struct parser *p) {
    if (p->status == LLMK_OK) p->status = llmk_fail(LLMK_OUT_OF_MEMORY, "grammar: out of memory");
    return false;
}

static bool push(struct parser *p, struct u32vec *a, uint32_t x) {
    return vec_push(a, x) || oom(p);
}

/* ---- rules by name ----------------------------------------------------- */

static uint64_t hash_name(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

static bool ht_grow(struct parser *p) {
    size_t cap = p->ht_cap ? 2 * p->ht_cap : 64;
    uint32_t *ht = calloc(cap, sizeof *ht);
    if (!ht) return oom(p);
    for (size_t r = 0; r < p->n_rules; r++) {
        const char *nm = p->names + p->rules[r].name_off;
        size_t i = hash_name(nm, p->rules[r].name_len) & (cap - 1);
        while (ht[i]) i = (i + 1) & (cap - 1);
        ht[i] = (uint32_t)r + 1;
    }
    free(p->ht);
    p->ht = ht;
    p->ht_cap = cap;
    return true;
}

/* The id of the rule named s[0..n), created (undefined) when new; -1 on error. */
static int64_t rule_id(struct parser *p, const char *s, size_t n, size_t at) {
    if (p->ht_cap) {
        size_t i = hash_name(s, n) & (p->ht_cap - 1);
        while (p->ht[i]) {
            const struct prule *r = &p->rules[p->ht[i] - 1];
            if (r->name_len == n && !memcmp(p->names + r->name_off, s, n)) return p->ht[i] - 1;
            i = (i + 1) & (p->ht_cap - 1);
        }
    }
    if (p->n_rules >= GRAMMAR_MAX_RULES) return perr(p, at, "more than %u rules", GRAMMAR_MAX_RULES), -1;
    if (p->n_rules == p->cap_rules) {
        size_t cap = p->cap_rules ? 2 * p->cap_rules : 32;
        struct prule *nr = realloc(p->rules, cap * sizeof *nr);
        if (!nr) return oom(p), -1;
        p->rules = nr;
        p->cap_rules = cap;
    }
    if (p->names_len + n + 1 > p->names_cap) {
        size_t cap = p->names_cap ? p->names_cap : 256;
        while (cap < p->names_len + n + 1) cap *= 2;
        char *nn = realloc(p->names, cap);
        if (!nn) return oom(p), -1;
        p->names = nn;
        p->names_cap = cap;
    }
    memcpy(p->names + p->names_len, s, n);
    p->names[p->names_len + n] = 0;
    p->rules[p->n_rules] = (struct prule){(uint32_t)p->names_len, (uint32_t)n, false, at, at, 0, 0};
    p->names_len += n + 1;
    p->n_rules++;
    if (2 * p->n_rules > p->ht_cap) {
        if (!ht_grow(p)) return -1;
    } else {
        size_t i = hash_name(s, n) & (p->ht_cap - 1);
        while (p->ht[i]) i = (i + 1) & (p->ht_cap - 1);
        p->ht[i] = (uint32_t)p->n_rules;
    }
    return (int64_t)p->n_rules - 1;
}

/* Give rule r its alternatives (each a sequence of elements). */
static bool define(struct parser *p, uint32_t r, struct u32vec *seqs, size_t n_seqs, size_t at) {
    size_t total = p->elems.n;
    for (size_t i = 0; i < n_seqs; i++) total += seqs[i].n + 1;
    if (total > GRAMMAR_MAX_ELEMS) return perr(p, at, "grammar larger than %u elements", GRAMMAR_MAX_ELEMS);
    p->rules[r].alt_off = (uint32_t)p->alts.n;
    p->rules[r].n_alts = (uint32_t)n_seqs;
    p->rules[r].defined = true;
    p->rules[r].def_pos = at;
    for (size_t i = 0; i < n_seqs; i++) {
        if (!push(p, &p->alts, (uint32_t)p->elems.n)) return false;
        for (size_t j = 0; j < seqs[i].n; j++)
            if (!push(p, &p->elems, seqs[i].v[j])) return false;
        if (!push(p, &p->elems, GE_END)) return false;
    }
    return true;
}

/* A new rule named after its parent (parent~N: '~' cannot be written in a
 * rule name, so it never meets a user's rule), defined by seqs. */
static int64_t synth_rule(struct parser *p, uint32_t parent, struct u32vec *seqs, size_t n_seqs, size_t at) {
    char nm[96];
    const struct prule *pr = &p->rules[parent];
    int k = snprintf(nm, sizeof nm, "%.*s~%u", (int)(pr->name_len > 64 ? 64 : pr->name_len),
                     p->names + pr->name_off, ++p->synth);
    int64_t r = rule_id(p, nm, (size_t)k, at);
    if (r < 0 || !define(p, (uint32_t)r, seqs, n_seqs, at)) return -1;
    return r;
}

/* ---- lexical ------------------------------------------------------------ */

static bool is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static void skip_ws(struct parser *p) {
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
            p->pos++;
        } else if (c == '#') {
            while (p->pos < p->len && p->s[p->pos] != '\n') p->pos++;
        } else {
            break;
        }
    }
}

static size_t word_len(const struct parser *p, size_t at) {
    size_t n = 0;
    while (at + n < p->len && is_word(p->s[at + n])) n++;
    return n;
}

/* A name followed by "::=" starts the next rule (newlines are plain space). */
static bool at_rule_start(struct parser *p) {
    size_t n = word_len(p, p->pos);
    if (!n) return false;
    size_t save = p->pos;
    p->pos += n;
    skip_ws(p);
    bool yes = p->len - p->pos >= 3 && !memcmp(p->s + p->pos, "::=", 3);
    p->pos = save;
    return yes;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One UTF-8 character of the grammar text. */
static bool read_utf8(struct parser *p, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)p->s + p->pos;
    size_t left = p->len - p->pos;
    unsigned char c = s[0];
    size_t n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!n || n > left) return perr(p, p->pos, "invalid UTF-8");
    uint32_t v = n == 1 ? c : n == 2 ? c & 0x1Fu : n == 3 ? c & 0x0Fu : c & 0x07u;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return perr(p, p->pos, "invalid UTF-8");
        v = v << 6 | (s[i] & 0x3Fu);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min_cp[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return perr(p, p->pos, "invalid UTF-8");
    p->pos += n;
    *cp = v;
    return true;
}

/* A character inside "..." or [...], escapes decoded. */
static bool read_char(struct parser *p, uint32_t *cp) {
    if (p->pos >= p->len) return perr(p, p->pos, "unexpected end of grammar");
    if (p->s[p->pos] != '\\') return read_utf8(p, cp);
    size_t at = p->pos++;
    if (p->pos >= p->len) return perr(p, at, "unexpected end of grammar after '\\'");
    char e = p->s[p->pos++];
    int digits = 0;
    switch (e) {
    case 'n': *cp = '\n'; return true;
    case 'r': *cp = '\r'; return true;
    case 't': *cp = '\t'; return true;
    case '0': *cp = 0; return true;
    case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': case '/': *cp = (uint8_t)e; return true;
    case 'x': digits = 2; break;
    case 'u': digits = 4; break;
    case 'U': digits = 8; break;
    default: return perr(p, at, "unknown escape '\\%c'", e >= 32 && e < 127 ? e : '?');
    }
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        int h = p->pos < p->len ? hexval(p->s[p->pos]) : -1;
        if (h < 0) return perr(p, at, "'\\%c' needs %d hex digits", e, digits);
        v = v << 4 | (uint32_t)h;
        p->pos++;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return perr(p, at, "escape is not a Unicode scalar value (U+%X)", v);
    *cp = v;
    return true;
}

/* ---- character classes -------------------------------------------------- */

static int cmp_pair(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0;
}

/* Sort, merge, optionally complement, and cut out the surrogates, so the
 * runtime sees disjoint ascending ranges of scalar values only. */
static int64_t add_class(struct parser *p, uint32_t *pairs, size_t n, bool negate, size_t at) {
    if (n > 1) qsort(pairs, n, 2 * sizeof *pairs, cmp_pair); /* an empty class: pairs may be NULL */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && pairs[2 * i] <= pairs[2 * m - 1] + 1) {
            if (pairs[2 * i + 1] > pairs[2 * m - 1]) pairs[2 * m - 1] = pairs[2 * i + 1];
        } else {
            pairs[2 * m] = pairs[2 * i];
            pairs[2 * m + 1] = pairs[2 * i + 1];
            m++;
        }
    }
    if (p->ranges.n / 2 + m + 2 > GRAMMAR_MAX_RANGES) return perr(p, at, "too many character ranges"), -1;
    uint32_t off = (uint32_t)(p->ranges.n / 2);
    uint32_t next = 0; /* complement: the first code point not yet covered */
    for (size_t i = 0; i <= m; i++) {
        uint32_t lo, hi;
        if (negate) {
            lo = next;
            hi = i < m ? pairs[2 * i] : 0x110000;
            if (i < m) next = pairs[2 * i + 1] + 1;
            if (hi == 0) continue;
            hi--;
            if (lo > hi) continue;
        } else {
            if (i == m) break;
            lo = pairs[2 * i];
            hi = pairs[2 * i + 1];
        }
        uint32_t parts[4] = {lo, hi, 1, 0};
        int np = 1;
        if (lo <= 0xDFFF && hi >= 0xD800) { /* split around the surrogates */
            np = 0;
            if (lo < 0xD800) parts[2 * np] = lo, parts[2 * np + 1] = 0xD7FF, np++;
            if (hi > 0xDFFF) parts[2 * np] = 0xE000, parts[2 * np + 1] = hi, np++;
        }
        for (int k = 0; k < np; k++)
            if (!push(p, &p->ranges, parts[2 * k]) || !push(p, &p->ranges, parts[2 * k + 1])) return -1;
    }
    uint32_t cnt = (uint32_t)(p->ranges.n / 2) - off;
    if (!push(p, &p->classes, off) || !push(p, &p->classes, cnt)) return -1;
    return (int64_t)(p->classes.n / 2) - 1;
}

static int64_t parse_class(struct parser *p) {
    size_t at = p->pos++; /* '[' */
    bool negate = p->pos < p->len && p->s[p->pos] == '^';
    if (negate) p->pos++;
    struct u32vec pairs = {0};
    int64_t id = -1;
    for (;;) {
        if (p->pos >= p->len) {
            perr(p, at, "unterminated character class");
            goto out;
        }
        if (p->s[p->pos] == ']') break;
        uint32_t lo, hi;
        if (!read_char(p, &lo)) goto out;
        hi = lo;
        if (p->pos + 1 < p->len && p->s[p->pos] == '-' && p->s[p->pos + 1] != ']') {
            size_t rat = p->pos++;
            if (!read_char(p, &hi)) goto out;
            if (hi < lo) {
                perr(p, rat, "range end U+%X is below its start U+%X", hi, lo);
                goto out;
            }
        }
        if (pairs.n >= 2 * (size_t)GRAMMAR_MAX_RANGES) {
            perr(p, at, "too many character ranges");
            goto out;
        }
        if (!push(p, &pairs, lo) || !push(p, &pairs, hi)) goto out;
    }
    p->pos++; /* ']' */
    id = add_class(p, pairs.v, pairs.n / 2, negate, at);
out:
    free(pairs.v);
    return id;
}

/* ---- grammar ------------------------------------------------------------ */

static bool parse_alternates(struct parser *p, uint32_t rule, struct u32vec **seqs, size_t *n_seqs);

static void free_seqs(struct u32vec *seqs, size_t n) {
    for (size_t i = 0; i < n; i++) free(seqs[i].v);
    free(seqs);
}

/* The item just parsed (elements item->v) as one element: itself, or a
 * synthetic rule whose one alternative it is. */
static bool as_one(struct parser *p, uint32_t rule, struct u32vec *item, size_t at) {
    if (item->n == 1) return true;
    struct u32vec one = *item;
    int64_t r = synth_rule(p, rule, &one, 1, at);
    if (r < 0) return false;
    item->n = 0;
    return push(p, item, GE_REF | (uint32_t)r);
}

/* x repeated: x* is R ::= x R | "" ; x? is R ::= x | "" ; x{m,n} is x
 * m times, then n-m nested optionals. */
static int64_t star_rule(struct parser *p, uint32_t rule, uint32_t x, size_t at) {
    int64_t r = rule_id(p, "", 0, at); /* placeholder name, renamed below */
    if (r < 0) return -1;
    struct u32vec seqs[2] = {{0}, {0}};
    uint32_t body[2] = {x, GE_REF | (uint32_t)r};
    seqs[0].v = body;
    seqs[0].n = 2;
    /* give it a proper name: reuse synth naming by defining through synth_rule
     * is not possible for a self reference, so name it here */
    char nm[96];
    const struct prule *pr = &p->rules[rule];
    int k = snprintf(nm, sizeof nm, "%.*s~%u", (int)(pr->name_len > 64 ? 64 : pr->name_len),
                     p->names + pr->name_off, ++p->synth);
    /* the placeholder "" is never looked up again: the hash table keeps its
     * slot, but an empty name cannot be written in a grammar */
    if (p->names_len + (size_t)k + 1 > p->names_cap) {
        size_t cap = p->names_cap;
        while (cap < p->names_len + (size_t)k + 1) cap *= 2;
        char *nn = realloc(p->names, cap);
        if (!nn) return oom(p), -1;
        p->names = nn;
        p->names_cap = cap;
    }
    memcpy(p->names + p->names_len, nm, (size_t)k + 1);
    p->rules[r].name_off = (uint32_t)p->names_len;
    p->rules[r].name_len = (uint32_t)k;
    p->names_len += (size_t)k + 1;
    if (!define(p, (uint32_t)r, seqs, 2, at)) return -1;
    return r;
}

static bool parse_int(struct parser *p, uint32_t *v) {
    size_t at = p->pos;
    uint32_t x = 0;
    size_t n = 0;
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
        x = x * 10 + (uint32_t)(p->s[p->pos++] - '0');
        if (x > LLMK_GRAMMAR_MAX_REPEAT)
            return perr(p, at, "repetition count above %d", LLMK_GRAMMAR_MAX_REPEAT);
        n++;
    }
    if (!n) return perr(p, at, "expected a number");
    *v = x;
    return true;
}

/* {m}, {m,}, {m,n} after the '{'. max UINT32_MAX: unbounded. */
static bool parse_braces(struct parser *p, uint32_t *mn, uint32_t *mx) {
    size_t at = p->pos - 1;
    skip_ws(p);
    if (!parse_int(p, mn)) return false;
    skip_ws(p);
    *mx = *mn;
    if (p->pos < p->len && p->s[p->pos] == ',') {
        p->pos++;
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == '}') *mx = UINT32_MAX;
        else if (!parse_int(p, mx)) return false;
        skip_ws(p);
    }
    if (p->pos >= p->len || p->s[p->pos] != '}') return perr(p, at, "expected '}' to close the repetition");
    p->pos++;
    if (*mx < *mn) return perr(p, at, "repetition {%u,%u}: the maximum is below the minimum", *mn, *mx);
    return true;
}

static bool apply_repeat(struct parser *p, uint32_t rule, struct u32vec *item, size_t at) {
    char c = p->s[p->pos++];
    uint32_t mn = 0, mx = UINT32_MAX;
    if (c == '*') mn = 0;
    else if (c == '+') mn = 1;
    else if (c == '?') mx = 1;
    else if (!parse_braces(p, &mn, &mx)) return false;
    if (!item->n) return true; /* "" repeated is "" */
    if (!as_one(p, rule, item, at)) return false;
    uint32_t x = item->v[0];
    item->n = 0;
    if ((size_t)mn + p->elems.n > GRAMMAR_MAX_ELEMS)
        return perr(p, at, "grammar larger than %u elements", GRAMMAR_MAX_ELEMS);
    for (uint32_t i = 0; i < mn; i++)
        if (!push(p, item, x)) return false;
    if (mx == UINT32_MAX) {
        int64_t r = star_rule(p, rule, x, at);
        return r >= 0 && push(p, item, GE_REF | (uint32_t)r);
    }
    uint32_t tail = GE_END; /* R_k ::= x R_{k-1} | "" */
    for (uint32_t k = mn; k < mx; k++) {
        struct u32vec seqs[2] = {{0}, {0}};
        uint32_t body[2] = {x, tail};
        seqs[0].v = body;
        seqs[0].n = tail == GE_END ? 1 : 2;
        int64_t r = synth_rule(p, rule, seqs, 2, at);
        if (r < 0) return false;
        tail = GE_REF | (uint32_t)r;
    }
    return tail == GE_END || push(p, item, tail);
}

static bool parse_literal(struct parser *p, struct u32vec *item) {
    size_t at = p->pos++;
    for (;;) {
        if (p->pos >= p->len) return perr(p, at, "unterminated string literal");
        if (p->s[p->pos] == '"') break;
        size_t cat = p->pos;
        uint32_t cp;
        if (!read_char(p, &cp)) return false;
        uint32_t pair[2] = {cp, cp};
        int64_t k = add_class(p, pair, 1, false, cat);
        if (k < 0 || !push(p, item, (uint32_t)k)) return false;
    }
    p->pos++;
    return true;
}

static bool parse_primary(struct parser *p, uint32_t rule, struct u32vec *item) {
    size_t at = p->pos;
    char c = p->s[p->pos];
    if (c == '"') return parse_literal(p, item);
    if (c == '[') {
        int64_t k = parse_class(p);
        return k >= 0 && push(p, item, (uint32_t)k);
    }
    if (c == '.') {
        p->pos++;
        uint32_t any[2] = {0, 0x10FFFF};
        int64_t k = add_class(p, any, 1, false, at);
        return k >= 0 && push(p, item, (uint32_t)k);
    }
    if (c == '(') {
        if (++p->depth > MAX_NESTING) return perr(p, at, "groups nested deeper than %d", MAX_NESTING);
        p->pos++;
        struct u32vec *seqs = NULL;
        size_t n = 0;
        bool ok = parse_alternates(p, rule, &seqs, &n);
        if (ok) {
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ')') ok = perr(p, at, "'(' is never closed");
            else p->pos++;
        }
        int64_t r = ok ? synth_rule(p, rule, seqs, n, at) : -1;
        free_seqs(seqs, n);
        p->depth--;
        return r >= 0 && push(p, item, GE_REF | (uint32_t)r);
    }
    size_t n = word_len(p, p->pos);
    if (!n) {
        if (c == ')') return perr(p, at, "unmatched ')'");
        if (c == ':' ) return perr(p, at, "'::=' without a rule name before it");
        return perr(p, at, "expected a rule name, a \"string\", a [class], '.' or '(' but found '%c'",
                    c >= 32 && c < 127 ? c : '?');
    }
    int64_t r = rule_id(p, p->s + p->pos, n, at);
    p->pos += n;
    return r >= 0 && push(p, item, GE_REF | (uint32_t)r);
}

static bool parse_sequence(struct parser *p, uint32_t rule, struct u32vec *seq) {
    for (;;) {
        skip_ws(p);
        if (p->pos >= p->len) return true;
        char c = p->s[p->pos];
        if (c == '|' || c == ')' || at_rule_start(p)) return true;
        size_t at = p->pos;
        struct u32vec item = {0};
        bool ok = parse_primary(p, rule, &item);
        while (ok && p->pos < p->len && strchr("*+?{", p->s[p->pos]) && p->s[p->pos]) ok = apply_repeat(p, rule, &item, at);
        for (size_t i = 0; ok && i < item.n; i++) ok = push(p, seq, item.v[i]);
        free(item.v);
        if (!ok) return false;
    }
}

static bool parse_alternates(struct parser *p, uint32_t rule, struct u32vec **seqs, size_t *n_seqs) {
    size_t cap = 0;
    *seqs = NULL;
    *n_seqs = 0;
    for (;;) {
        if (*n_seqs == cap) {
            cap = cap ? 2 * cap : 4;
            struct u32vec *ns = realloc(*seqs, cap * sizeof *ns);
            if (!ns) return oom(p);
            *seqs = ns;
        }
        (*seqs)[*n_seqs] = (struct u32vec){0};
        (*n_seqs)++;
        if (!parse_sequence(p, rule, &(*seqs)[*n_seqs - 1])) return false;
        skip_ws(p);
        if (p->pos >= p->len || p->s[p->pos] != '|') return true;
        p->pos++;
    }
}

static bool parse_rule(struct parser *p) {
    size_t at = p->pos;
    size_t n = word_len(p, p->pos);
    if (!n) {
        char c = p->s[p->pos];
        return perr(p, at, "expected a rule definition 'name ::= ...' but found '%c'", c >= 32 && c < 127 ? c : '?');
    }
    int64_t r = rule_id(p, p->s + p->pos, n, at);
    if (r < 0) return false;
    p->pos += n;
    skip_ws(p);
    if (p->len - p->pos < 3 || memcmp(p->s + p->pos, "::=", 3))
        return perr(p, p->pos, "expected '::=' after the rule name '%.*s'", (int)(n > 64 ? 64 : n), p->s + at);
    if (p->rules[r].defined) {
        uint32_t l, c;
        line_col(p->s, p->rules[r].def_pos, &l, &c);
        return perr(p, at, "rule '%.*s' is defined twice (first at line %u, column %u)", (int)(n > 64 ? 64 : n),
                    p->s + at, l, c);
    }
    p->pos += 3;
    struct u32vec *seqs = NULL;
    size_t n_seqs = 0;
    bool ok = parse_alternates(p, (uint32_t)r, &seqs, &n_seqs);
    if (ok && p->pos < p->len && p->s[p->pos] == ')') ok = perr(p, p->pos, "unmatched ')'");
    if (ok) ok = define(p, (uint32_t)r, seqs, n_seqs, at);
    free_seqs(seqs, n_seqs);
    return ok;
}

/* ---- whole-grammar checks ----------------------------------------------- */

/* Rules that can match the empty string: a worklist over "elements of this
 * alternative not yet known nullable", linear in the grammar's size. */
static bool *nullable_rules(const struct llmk_grammar *g, uint32_t *alt_rule) {
    bool *nul = calloc(g->n_rules ? g->n_rules : 1, sizeof *nul);
    uint32_t *left = calloc(g->n_alts ? g->n_alts : 1, sizeof *left);
    uint32_t *occ_start = calloc((size_t)g->n_rules + 1, sizeof *occ_start);
    uint32_t *occ = malloc((g->n_elems ? g->n_elems : 1) * sizeof *occ);
    uint32_t *work = malloc((g->n_rules ? g->n_rules : 1) * sizeof *work);
    bool ok = nul && left && occ_start && occ && work;
    if (ok) {
        for (uint32_t a = 0; a < g->n_alts; a++)
            for (uint32_t e = g->alts[a]; g->elems[e] != GE_END; e++)
                if (GE_IS_REF(g->elems[e])) occ_start[(g->elems[e] & ~GE_REF) + 1]++;
        for (uint32_t r = 0; r < g->n_rules; r++) occ_start[r + 1] += occ_start[r];
        size_t nw = 0;
        for (uint32_t a = 0; a < g->n_alts; a++) {
            bool has_char = false;
            for (uint32_t e = g->alts[a]; g->elems[e] != GE_END; e++) {
                if (GE_IS_REF(g->elems[e])) occ[occ_start[g->elems[e] & ~GE_REF]++] = a, left[a]++;
                else has_char = true;
            }
            if (has_char) left[a] = UINT32_MAX;
            else if (!left[a] && !nul[alt_rule[a]]) nul[alt_rule[a]] = true, work[nw++] = alt_rule[a];
        }
        for (uint32_t r = g->n_rules; r > 0; r--) occ_start[r] = occ_start[r - 1];
        occ_start[0] = 0;
        while (nw) {
            uint32_t r = work[--nw];
            for (uint32_t i = occ_start[r]; i < occ_start[r + 1]; i++) {
                uint32_t a = occ[i];
                if (left[a] != UINT32_MAX && --left[a] == 0 && !nul[alt_rule[a]])
                    nul[alt_rule[a]] = true, work[nw++] = alt_rule[a];
            }
        }
    }
    free(left);
    free(occ_start);
    free(occ);
    free(work);
    if (!ok) {
        free(nul);
        return NULL;
    }
    return nul;
}

/* A rule that can call itself before consuming anything would make the
 * runtime's expansion loop: find one by an iterative DFS over the "may
 * start with" edges (a call preceded only by nullable calls). */
struct lr_frame {
    uint32_t rule, alt, elem; /* next edge: alternative alt, element index elem */
};

static void lr_enter(const struct llmk_grammar *g, struct lr_frame *f, uint32_t r) {
    f->rule = r;
    f->alt = 0;
    f->elem = g->rules[r].n_alts ? g->alts[g->rules[r].alt_off] : 0;
}

static int64_t left_recursive_rule(const struct llmk_grammar *g, const bool *nul) {
    uint8_t *color = calloc(g->n_rules ? g->n_rules : 1, 1); /* 1: on the path, 2: done */
    struct lr_frame *stk = malloc(((size_t)g->n_rules + 1) * sizeof *stk);
    int64_t found = (!color || !stk) ? -2 : -1;
    for (uint32_t s = 0; s < g->n_rules && found == -1; s++) {
        if (color[s]) continue;
        size_t sp = 1;
        lr_enter(g, &stk[0], s);
        color[s] = 1;
        while (sp && found == -1) {
            struct lr_frame *f = &stk[sp - 1];
            const struct grule *rr = &g->rules[f->rule];
            if (f->alt >= rr->n_alts) {
                color[f->rule] = 2;
                sp--;
                continue;
            }
            uint32_t e = g->elems[f->elem];
            if (!GE_IS_REF(e)) { /* a character or the end: this alternative's left edges are done */
                if (++f->alt < rr->n_alts) f->elem = g->alts[rr->alt_off + f->alt];
                continue;
            }
            uint32_t t = e & ~GE_REF;
            if (nul[t]) f->elem++;
            else f->elem = g->n_elems - 1; /* the trailing GE_END: no edge after a non-nullable call */
            if (color[t] == 1) found = t;
            else if (!color[t]) color[t] = 1, lr_enter(g, &stk[sp++], t);
        }
    }
    free(color);
    free(stk);
    return found;
}

static bool check_grammar(struct parser *p, struct llmk_grammar *g) {
    for (size_t r = 0; r < p->n_rules; r++)
        if (!p->rules[r].defined)
            return perr(p, p->rules[r].ref_pos, "undefined rule '%s'", g->names + p->rules[r].name_off);
    uint32_t *alt_rule = malloc((g->n_alts ? g->n_alts : 1) * sizeof *alt_rule);
    if (!alt_rule) return oom(p);
    for (uint32_t r = 0; r < g->n_rules; r++)
        for (uint32_t a = 0; a < g->rules[r].n_alts; a++) alt_rule[g->rules[r].alt_off + a] = r;
    bool *nul = nullable_rules(g, alt_rule);
    free(alt_rule);
    if (!nul) return oom(p);
    int64_t lr = left_recursive_rule(g, nul);
    free(nul);
    if (lr == -2) return oom(p);
    if (lr >= 0)
        return perr(p, p->rules[lr].def_pos,
                    "rule '%s' can reach itself without consuming any character (left recursion, or a "
                    "repetition of something that can be empty)",
                    g->names + p->rules[lr].name_off);
    return true;
}

static void parser_free(struct parser *p) {
    free(p->elems.v);
    free(p->alts.v);
    free(p->ranges.v);
    free(p->classes.v);
    free(p->rules);
    free(p->names);
    free(p->ht);
}

void llmk_grammar_free(llmk_grammar *g) {
    if (!g) return;
    free(g->elems);
    free(g->alts);
    free(g->rules);
    free(g->classes);
    free(g->ranges);
    free(g->names);
    free(g);
}

static int finish(struct parser *p, llmk_grammar **out) {
    int64_t root = -1;
    for (size_t r = 0; r < p->n_rules; r++)
        if (p->rules[r].defined && p->rules[r].name_len == 4 && !memcmp(p->names + p->rules[r].name_off, "root", 4))
            root = (int64_t)r;
    if (root < 0) return perr(p, 0, "no rule named 'root' (the start rule)"), p->status;
    struct llmk_grammar *g = calloc(1, sizeof *g);
    if (!g) return oom(p), p->status;
    g->rules = calloc(p->n_rules, sizeof *g->rules);
    g->classes = malloc((p->classes.n / 2 + 1) * sizeof *g->classes);
    if (!g->rules || !g->classes) {
        llmk_grammar_free(g);
        return oom(p), p->status;
    }
    for (size_t r = 0; r < p->n_rules; r++) {
        uint32_t l, c;
        line_col(p->s, p->rules[r].def_pos, &l, &c);
        g->rules[r] = (struct grule){p->rules[r].alt_off, p->rules[r].n_alts, l, c, p->rules[r].name_off};
    }
    for (size_t k = 0; k < p->classes.n / 2; k++)
        g->classes[k] = (struct gclass){p->classes.v[2 * k], p->classes.v[2 * k + 1]};
    g->n_classes = (uint32_t)(p->classes.n / 2);
    g->n_rules = (uint32_t)p->n_rules;
    g->root = (uint32_t)root;
    /* a trailing GE_END guards walks that step past an alternative's end */
    if (!push(p, &p->elems, GE_END)) {
        llmk_grammar_free(g);
        return p->status;
    }
    g->elems = p->elems.v, g->n_elems = (uint32_t)p->elems.n, p->elems.v = NULL;
    g->alts = p->alts.v, g->n_alts = (uint32_t)p->alts.n, p->alts.v = NULL;
    g->ranges = p->ranges.v, g->n_ranges = (uint32_t)(p->ranges.n / 2), p->ranges.v = NULL;
    g->names = p->names, p->names = NULL;
    if (!check_grammar(p, g)) {
        llmk_grammar_free(g);
        return p->status;
    }
    *out = g;
    return LLMK_OK;
}

int llmk_grammar_parse(const char *text, size_t len, llmk_grammar **out) {
    llmk_error_clear();
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "grammar_parse: NULL out");
    *out = NULL;
    if (!text && len) return llmk_fail(LLMK_INVALID_ARGUMENT, "grammar_parse: NULL text");
    if (len > LLMK_GRAMMAR_MAX_TEXT)
        return llmk_fail(LLMK_BAD_GRAMMAR, "grammar: %zu bytes of text, the limit is %d", len, LLMK_GRAMMAR_MAX_TEXT);
    struct parser p = {.s = text ? text : "", .len = len, .status = LLMK_OK};
    if (memchr(p.s, 0, len)) {
        size_t at = (size_t)((const char *)memchr(p.s, 0, len) - p.s);
        perr(&p, at, "NUL byte in the grammar");
    }
    skip_ws(&p);
    while (p.status == LLMK_OK && p.pos < p.len) {
        if (!parse_rule(&p)) break;
        skip_ws(&p);
    }
    int st = p.status == LLMK_OK ? finish(&p, out) : p.status;
    parser_free(&p);
    return st;
}
