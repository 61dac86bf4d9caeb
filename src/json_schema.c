/* JSON Schema -> GBNF grammar (llama.cpp's dialect), for constrained decoding.
 *
 * The promise is one-sided: every text the grammar accepts is a JSON document
 * the schema accepts. Where JSON Schema allows more than a grammar can say
 * (properties in any order, numbers in any spelling) the grammar takes one
 * canonical subset; a constraint the grammar cannot enforce (numeric bounds,
 * patterns, uniqueness) is refused with its keyword and JSON pointer rather
 * than dropped. docs/json_schema.md lists both.
 *
 * Shape of the output: `root ::= ws X`, one rule per schema reached by
 * $ref (so recursive schemas become recursive rules), one per object member,
 * and the shared primitives (ws, string, number, ...) at the end, emitted only
 * when used. Rules are created in a fixed traversal order, so the text is a
 * function of the schema alone. Everything is bounded: nesting depth, rule
 * count, output bytes, repetition counts. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    JS_MAX_DEPTH = 32,       /* nested subschemas (and $ref hops) on one path; keeps a rule's
                              * groups within what the grammar parser nests */
    JS_MAX_OUT = 1 << 20,    /* bytes of grammar text */
    JS_MAX_RULES = 1 << 14,  /* rules in one grammar */
    JS_MAX_COUNT = LLMK_GRAMMAR_MAX_REPEAT, /* minItems, maxItems, minLength, maxLength */
    JS_MAX_NAME = 1024,      /* bytes of a property name (the key trie recurses over it) */
    JS_PATH_CAP = 256,       /* bytes of JSON pointer kept for messages */
    JS_HINT_CAP = 48,        /* bytes of a rule name taken from the schema */
};

/* ---- growable text ------------------------------------------------------ */

struct sb {
    char *p;
    size_t n, cap;
    int err; /* 0, or the status that stopped it (too big, out of memory) */
};

static void sb_add(struct sb *b, const char *s, size_t n) {
    if (b->err) return;
    if (n > JS_MAX_OUT || b->n + n > JS_MAX_OUT) {
        b->err = LLMK_COUNT_TOO_LARGE;
        return;
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->err = LLMK_OUT_OF_MEMORY;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_puts(struct sb *b, const char *s) { sb_add(b, s, strlen(s)); }

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void sb_printf(struct sb *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    LLMK_CHECK(n >= 0 && (size_t)n < sizeof tmp); /* callers print short numbers and names */
    sb_add(b, tmp, (size_t)n);
}

static void sb_free(struct sb *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* ---- the converter's state ------------------------------------------------ */

struct rule {
    char *name;
    char *body; /* NULL while being built */
};

struct refent {
    const cJSON *target;
    size_t rule;
    int epoch; /* the epoch its body started in */
    bool done;
};

/* The shared primitives, in output order; a bit each in js.prims. */
enum prim {
    P_WS, P_VALUE, P_OBJECT, P_ARRAY, P_STRING, P_CHAR, P_KCHAR, P_NUMBER, P_INTEGER, P_BOOLEAN,
    P_NULL, P_DATE_TIME, P_DATE, P_TIME, P_YEAR, P_LEAP, P_HOUR, P_UUID, P_HEX4, P_IPV4, P_OCTET,
    P_COUNT
};

struct js {
    const cJSON *doc;
    struct rule *rules;
    size_t n_rules, cap_rules;
    char **names; /* open-addressing set of every rule name taken */
    size_t names_cap, names_n;
    struct refent *refs;
    size_t n_refs, cap_refs;
    size_t total;    /* bytes of rule text so far */
    uint32_t prims;  /* P_* bits used */
    int depth;
    /* Each '{' or '[' the grammar consumes starts a new epoch; a $ref back to
     * a schema still being built in the same epoch is left recursion (a rule
     * deriving itself before reading a character), which no grammar engine
     * can run. */
    int epoch, next_epoch;
    char path[JS_PATH_CAP];
    size_t plen;
    bool path_cut;
};

static const char *js_path(struct js *j) {
    if (j->path_cut) memcpy(j->path + j->plen, "/...", 5); /* path_push keeps room for it */
    return j->path;
}

/* Appends one pointer segment (RFC 6901 escapes) and returns what path_pop
 * needs; a segment that does not fit is left out, and the path shows "/...". */
static size_t path_push(struct js *j, const char *seg) {
    char buf[JS_PATH_CAP];
    size_t n = 0;
    buf[n++] = '/';
    for (const char *c = seg; *c && n + 2 < sizeof buf; c++) {
        if (*c == '~' || *c == '/') {
            buf[n++] = '~';
            buf[n++] = *c == '~' ? '0' : '1';
        } else {
            buf[n++] = *c;
        }
    }
    if (j->path_cut || j->plen + n + 6 >= sizeof j->path) {
        j->path_cut = true;
        return SIZE_MAX;
    }
    size_t saved = j->plen;
    memcpy(j->path + j->plen, buf, n);
    j->plen += n;
    j->path[j->plen] = 0;
    return saved;
}

static size_t path_push_index(struct js *j, const char *kw, int i) {
    size_t saved = path_push(j, kw);
    char num[16];
    snprintf(num, sizeof num, "%d", i);
    size_t inner = path_push(j, num);
    if (saved != SIZE_MAX && inner == SIZE_MAX) j->path_cut = true; /* popped together below */
    return saved;
}

static void path_pop(struct js *j, size_t saved) {
    if (saved == SIZE_MAX) return; /* cut further up: the pop that restores the cut point clears it */
    j->plen = saved;
    j->path[saved] = 0;
    j->path_cut = false;
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int js_fail(struct js *j, int status, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return llmk_fail(status, "JSON Schema %s: %s", js_path(j), msg);
}

static int unsupported_kw(struct js *j, const char *kw, const char *why) {
    return js_fail(j, LLMK_UNSUPPORTED, "keyword \"%s\" is not supported%s%s", kw, why ? ": " : "",
                   why ? why : "");
}

static int sb_status(struct js *j, const struct sb *b) {
    if (!b->err) return LLMK_OK;
    if (b->err == LLMK_OUT_OF_MEMORY) return js_fail(j, LLMK_OUT_OF_MEMORY, "out of memory");
    return js_fail(j, LLMK_UNSUPPORTED, "the grammar would exceed %d bytes", JS_MAX_OUT);
}

/* ---- rule names ---------------------------------------------------------- */

static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static bool name_taken(const struct js *j, const char *s) {
    if (!j->names_cap) return false;
    for (size_t i = name_hash(s) & (j->names_cap - 1);; i = (i + 1) & (j->names_cap - 1)) {
        if (!j->names[i]) return false;
        if (!strcmp(j->names[i], s)) return true;
    }
}

/* Records s (owned by the caller's rule) in the set; false when out of memory. */
static bool name_insert(struct js *j, char *s) {
    if (2 * (j->names_n + 1) > j->names_cap) {
        size_t cap = j->names_cap ? 2 * j->names_cap : 64;
        char **nn = calloc(cap, sizeof *nn);
        if (!nn) return false;
        for (size_t k = 0; k < j->names_cap; k++) {
            if (!j->names[k]) continue;
            size_t i = name_hash(j->names[k]) & (cap - 1);
            while (nn[i]) i = (i + 1) & (cap - 1);
            nn[i] = j->names[k];
        }
        free(j->names);
        j->names = nn;
        j->names_cap = cap;
    }
    size_t i = name_hash(s) & (j->names_cap - 1);
    while (j->names[i]) i = (i + 1) & (j->names_cap - 1);
    j->names[i] = s;
    j->names_n++;
    return true;
}

static const char *const prim_names[P_COUNT] = {
    "ws", "value", "object", "array", "string", "char", "key-char", "number", "integer", "boolean",
    "null", "date-time", "date", "time", "year", "leap-year", "hour", "uuid", "hex4", "ipv4", "octet",
};

/* GBNF rule names are letters, digits and '-': anything else becomes '-'. */
static void sanitize(const char *hint, char *out, size_t cap) {
    size_t n = 0;
    for (const char *c = hint; *c && n + 1 < cap; c++) {
        bool word = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9');
        if (word) out[n++] = *c;
        else if (n && out[n - 1] != '-') out[n++] = '-';
    }
    while (n && out[n - 1] == '-') n--;
    if (!n) out[n++] = 'r';
    out[n] = 0;
}

/* A new rule named after hint (made unique); its body comes later. */
static int rule_new(struct js *j, const char *hint, size_t *idx) {
    if (j->n_rules >= JS_MAX_RULES)
        return js_fail(j, LLMK_UNSUPPORTED, "the grammar would need more than %d rules", JS_MAX_RULES);
    if (j->n_rules == j->cap_rules) {
        size_t cap = j->cap_rules ? 2 * j->cap_rules : 32;
        struct rule *r = realloc(j->rules, cap * sizeof *r);
        if (!r) return js_fail(j, LLMK_OUT_OF_MEMORY, "out of memory");
        j->rules = r;
        j->cap_rules = cap;
    }
    char base[JS_HINT_CAP], name[JS_HINT_CAP + 24];
    sanitize(hint, base, sizeof base);
    snprintf(name, sizeof name, "%s", base);
    for (size_t k = 2; name_taken(j, name); k++) snprintf(name, sizeof name, "%s-%zu", base, k);
    char *copy = strdup(name);
    if (!copy || !name_insert(j, copy)) {
        free(copy);
        return js_fail(j, LLMK_OUT_OF_MEMORY, "out of memory");
    }
    j->rules[j->n_rules] = (struct rule){copy, NULL};
    *idx = j->n_rules++;
    return LLMK_OK;
}

/* Takes the text of b as the rule's body (b is left empty). */
static int rule_set(struct js *j, size_t idx, struct sb *b) {
    int rc = sb_status(j, b);
    if (rc != LLMK_OK) return rc;
    j->total += b->n + strlen(j->rules[idx].name) + 6;
    if (j->total > JS_MAX_OUT) return js_fail(j, LLMK_UNSUPPORTED, "the grammar would exceed %d bytes", JS_MAX_OUT);
    if (!b->p) {
        sb_puts(b, "\"\"");
        if ((rc = sb_status(j, b)) != LLMK_OK) return rc;
    }
    j->rules[idx].body = b->p;
    memset(b, 0, sizeof *b);
    return LLMK_OK;
}

/* A rule whose body is the expression in b; its name is appended to out. */
static int rule_from(struct js *j, const char *hint, struct sb *b, struct sb *out) {
    size_t idx;
    int rc = rule_new(j, hint, &idx);
    if (rc == LLMK_OK) rc = rule_set(j, idx, b);
    if (rc == LLMK_OK) sb_puts(out, j->rules[idx].name);
    return rc;
}

static void hint_join(char *out, size_t cap, const char *a, const char *b) {
    snprintf(out, cap, "%s-%s", a, b);
}

/* Marks a primitive (and what its body refers to) as used; returns its name. */
static const char *prim(struct js *j, enum prim p) {
    static const uint32_t deps[P_COUNT] = {
        [P_VALUE] = 1u << P_OBJECT | 1u << P_ARRAY | 1u << P_STRING | 1u << P_NUMBER | 1u << P_BOOLEAN |
                    1u << P_NULL,
        [P_OBJECT] = 1u << P_WS | 1u << P_STRING | 1u << P_VALUE,
        [P_ARRAY] = 1u << P_WS | 1u << P_VALUE,
        [P_STRING] = 1u << P_CHAR,
        [P_DATE_TIME] = 1u << P_DATE | 1u << P_TIME,
        [P_DATE] = 1u << P_YEAR | 1u << P_LEAP,
        [P_TIME] = 1u << P_HOUR,
        [P_UUID] = 1u << P_HEX4,
        [P_IPV4] = 1u << P_OCTET,
    };
    if (!(j->prims & (1u << p))) {
        j->prims |= 1u << p;
        for (int q = 0; q < P_COUNT; q++)
            if (deps[p] & (1u << q)) prim(j, (enum prim)q);
    }
    return prim_names[p];
}

/* The primitives' bodies. Strings: raw characters except '"', '\\' and
 * controls, or an escape; \u escapes of UTF-16 surrogates are left out, so
 * the grammar's count of characters is the decoded string's (minLength and
 * maxLength hold for what a JSON parser returns). Numbers: JSON's syntax
 * with bounded digit runs, so a model cannot loop on digits. */
static const char *prim_body(enum prim p) {
    switch (p) {
    case P_WS: return "( \"\\n\" | \"\\r\\n\" )? [ \\t]{0,20}"; /* one line break, then indentation */
    case P_VALUE: return "object | array | string | number | boolean | null";
    case P_OBJECT:
        return "\"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\"";
    case P_ARRAY: return "\"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"";
    case P_STRING: return "\"\\\"\" char* \"\\\"\"";
    case P_CHAR:
        return "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-CefEF] [0-9a-fA-F]{3} | "
               "[dD] [0-7] [0-9a-fA-F]{2} ) )";
    case P_KCHAR: return "[^\"\\\\\\x00-\\x1F]";
    case P_NUMBER: return "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?";
    case P_INTEGER: return "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} )";
    case P_BOOLEAN: return "\"true\" | \"false\"";
    case P_NULL: return "\"null\"";
    case P_DATE_TIME: return "date \"T\" time";
    case P_DATE:
        return "year \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] ) | "
               "( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) | "
               "\"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) ) | leap-year \"-02-29\"";
    case P_TIME:
        return "hour \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,9} )? "
               "( \"Z\" | [+-] hour \":\" [0-5] [0-9] )";
    case P_YEAR: return "[1-9] [0-9]{3} | \"0\" ( [1-9] [0-9]{2} | \"0\" ( [1-9] [0-9] | \"0\" [1-9] ) )";
    case P_LEAP:
        /* divisible by 4 and not by 100, or by 400 (year 0000 does not exist) */
        return "[0-9] [0-9] ( \"0\" [48] | [2468] [048] | [13579] [26] ) | "
               "( \"0\" [48] | [2468] [048] | [13579] [26] ) \"00\"";
    case P_HOUR: return "[01] [0-9] | \"2\" [0-3]";
    case P_UUID: return "hex4 hex4 \"-\" hex4 \"-\" hex4 \"-\" hex4 \"-\" hex4 hex4 hex4";
    case P_HEX4: return "[0-9a-fA-F]{4}";
    case P_IPV4: return "octet \".\" octet \".\" octet \".\" octet";
    case P_OCTET: return "\"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9]";
    case P_COUNT: break;
    }
    return "";
}

/* ---- text of literals ------------------------------------------------------ */

/* Decodes one code point of valid UTF-8 at s (n bytes left); 0 bytes when invalid. */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned char c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t need;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) need = 2, v = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) need = 3, v = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) need = 4, v = c & 0x07, min = 0x10000;
    else return 0;
    if (n < need) return 0;
    for (size_t k = 1; k < need; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[k] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return need;
}

static bool utf8_valid(const char *s) {
    size_t n = strlen(s);
    uint32_t cp;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_next((const unsigned char *)s + i, n - i, &cp);
        if (!k) return false;
        i += k;
    }
    return true;
}

/* One code point as GBNF writes it inside a literal or a class: printable
 * ASCII as itself (escaped where the syntax needs it), the rest as escapes,
 * so the grammar text is ASCII. */
static void gbnf_cp(struct sb *b, uint32_t cp, bool in_class) {
    bool word = (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9');
    if (word || (!in_class && cp >= 0x20 && cp < 0x7F && cp != '"' && cp != '\\')) {
        char c = (char)cp;
        sb_add(b, &c, 1);
    } else if (cp == '"' || cp == '\\') {
        sb_printf(b, "\\%c", (char)cp);
    } else if (cp < 0x80) {
        sb_printf(b, "\\x%02X", (unsigned)cp);
    } else if (cp < 0x10000) {
        sb_printf(b, "\\u%04X", (unsigned)cp);
    } else {
        sb_printf(b, "\\U%08X", (unsigned)cp);
    }
}

/* A GBNF literal matching exactly the bytes s[0..n) (valid UTF-8). */
static void gbnf_literal(struct sb *b, const char *s, size_t n) {
    sb_add(b, "\"", 1);
    uint32_t cp;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_next((const unsigned char *)s + i, n - i, &cp);
        LLMK_CHECK(k > 0);
        gbnf_cp(b, cp, false);
        i += k;
    }
    sb_add(b, "\"", 1);
}

/* A string's JSON text: '"', '\\' and control characters escaped, the rest raw. */
static void json_string(struct sb *b, const char *s) {
    sb_add(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        switch (*c) {
        case '"': sb_puts(b, "\\\""); break;
        case '\\': sb_puts(b, "\\\\"); break;
        case '\n': sb_puts(b, "\\n"); break;
        case '\r': sb_puts(b, "\\r"); break;
        case '\t': sb_puts(b, "\\t"); break;
        case '\b': sb_puts(b, "\\b"); break;
        case '\f': sb_puts(b, "\\f"); break;
        default:
            if (*c < 0x20) sb_printf(b, "\\u%04x", *c);
            else sb_add(b, (const char *)c, 1);
        }
    }
    sb_add(b, "\"", 1);
}

/* A number's shortest text that reads back to the same double. Integers are
 * written without a fraction; past 2^53 the schema's own digits may not be
 * what cJSON kept, so a value there is refused rather than guessed. */
static int json_number(struct js *j, struct sb *b, double d) {
    if (!isfinite(d)) return js_fail(j, LLMK_BAD_REQUEST, "a number that is not finite");
    if (d == floor(d)) {
        if (fabs(d) >= 9007199254740992.0)
            return js_fail(j, LLMK_UNSUPPORTED, "the integer %.17g is beyond 2^53, where its exact value is lost", d);
        sb_printf(b, "%lld", (long long)d);
        return LLMK_OK;
    }
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break;
    }
    sb_puts(b, buf);
    return LLMK_OK;
}

/* The compact JSON text of a value (for enum/const literals). */
static int json_value(struct js *j, struct sb *b, const cJSON *v, int depth) {
    if (depth > JS_MAX_DEPTH) return js_fail(j, LLMK_UNSUPPORTED, "a value nested deeper than %d", JS_MAX_DEPTH);
    if (cJSON_IsNull(v)) sb_puts(b, "null");
    else if (cJSON_IsTrue(v)) sb_puts(b, "true");
    else if (cJSON_IsFalse(v)) sb_puts(b, "false");
    else if (cJSON_IsNumber(v)) return json_number(j, b, v->valuedouble);
    else if (cJSON_IsString(v)) {
        if (!utf8_valid(v->valuestring)) return js_fail(j, LLMK_BAD_REQUEST, "a string that is not valid UTF-8");
        json_string(b, v->valuestring);
    } else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        bool obj = cJSON_IsObject(v);
        sb_puts(b, obj ? "{" : "[");
        for (const cJSON *c = v->child; c; c = c->next) {
            if (c != v->child) sb_puts(b, ",");
            if (obj) {
                if (!utf8_valid(c->string)) return js_fail(j, LLMK_BAD_REQUEST, "a key that is not valid UTF-8");
                json_string(b, c->string);
                sb_puts(b, ":");
            }
            int rc = json_value(j, b, c, depth + 1);
            if (rc != LLMK_OK) return rc;
        }
        sb_puts(b, obj ? "}" : "]");
    } else {
        return js_fail(j, LLMK_BAD_REQUEST, "a value of unknown type");
    }
    return sb_status(j, b);
}

/* A value as a grammar: scalars as one literal, arrays and objects as their
 * tokens with the bounded whitespace between them (JSON may be spaced out). */
static int gbnf_value(struct js *j, struct sb *out, const cJSON *v, int depth) {
    int rc;
    if (!cJSON_IsArray(v) && !cJSON_IsObject(v)) {
        struct sb lit = {0};
        if ((rc = json_value(j, &lit, v, depth)) == LLMK_OK) gbnf_literal(out, lit.p, lit.n);
        sb_free(&lit);
        return rc == LLMK_OK ? sb_status(j, out) : rc;
    }
    if (depth > JS_MAX_DEPTH) return js_fail(j, LLMK_UNSUPPORTED, "a value nested deeper than %d", JS_MAX_DEPTH);
    bool obj = cJSON_IsObject(v);
    sb_printf(out, "%s %s", obj ? "\"{\"" : "\"[\"", "ws");
    for (const cJSON *c = v->child; c; c = c->next) {
        if (c != v->child) sb_puts(out, " \",\" ws");
        sb_puts(out, " ");
        if (obj) {
            struct sb key = {0};
            if (!utf8_valid(c->string)) rc = js_fail(j, LLMK_BAD_REQUEST, "a key that is not valid UTF-8");
            else json_string(&key, c->string), rc = sb_status(j, &key);
            if (rc == LLMK_OK) gbnf_literal(out, key.p, key.n);
            sb_free(&key);
            if (rc != LLMK_OK) return rc;
            sb_puts(out, " ws \":\" ws ");
        }
        if ((rc = gbnf_value(j, out, c, depth + 1)) != LLMK_OK) return rc;
        sb_puts(out, " ws");
    }
    sb_puts(out, obj ? " \"}\"" : " \"]\"");
    return sb_status(j, out);
}

/* ---- keywords ---------------------------------------------------------------- */

enum kw {
    K_DESC = 1u << 0, K_DEFS = 1u << 1, K_REF = 1u << 2, K_ANYOF = 1u << 3, K_ONEOF = 1u << 4,
    K_ALLOF = 1u << 5, K_ENUM = 1u << 6, K_CONST = 1u << 7, K_TYPE = 1u << 8, K_NULLABLE = 1u << 9,
    K_PROPS = 1u << 10, K_REQ = 1u << 11, K_ADDP = 1u << 12, K_ITEMS = 1u << 13, K_PREFIX = 1u << 14,
    K_ADDITEMS = 1u << 15, K_MINITEMS = 1u << 16, K_MAXITEMS = 1u << 17, K_MINLEN = 1u << 18,
    K_MAXLEN = 1u << 19, K_FORMAT = 1u << 20, K_ID = 1u << 21,
};
#define K_OBJECT_KW (K_PROPS | K_REQ | K_ADDP)
#define K_ARRAY_KW (K_ITEMS | K_PREFIX | K_ADDITEMS | K_MINITEMS | K_MAXITEMS)
#define K_STRING_KW (K_MINLEN | K_MAXLEN | K_FORMAT)

static const struct {
    const char *name;
    uint32_t bit;
} keywords[] = {
    /* annotations: they do not change what validates */
    {"title", K_DESC}, {"description", K_DESC}, {"default", K_DESC}, {"examples", K_DESC},
    {"$schema", K_DESC}, {"$comment", K_DESC}, {"deprecated", K_DESC}, {"readOnly", K_DESC},
    {"writeOnly", K_DESC}, {"discriminator", K_DESC}, {"$id", K_ID},
    {"$defs", K_DEFS}, {"definitions", K_DEFS}, {"$ref", K_REF}, {"anyOf", K_ANYOF},
    {"oneOf", K_ONEOF}, {"allOf", K_ALLOF}, {"enum", K_ENUM}, {"const", K_CONST}, {"type", K_TYPE},
    {"nullable", K_NULLABLE}, {"properties", K_PROPS}, {"required", K_REQ},
    {"additionalProperties", K_ADDP}, {"items", K_ITEMS}, {"prefixItems", K_PREFIX},
    {"additionalItems", K_ADDITEMS}, {"minItems", K_MINITEMS}, {"maxItems", K_MAXITEMS},
    {"minLength", K_MINLEN}, {"maxLength", K_MAXLEN}, {"format", K_FORMAT},
};

/* Why some well-known keywords are refused (the rest get the plain message). */
static const char *refusal_reason(const char *kw) {
    static const struct {
        const char *kw, *why;
    } reasons[] = {
        {"minimum", "numeric bounds cannot be enforced by a grammar"},
        {"maximum", "numeric bounds cannot be enforced by a grammar"},
        {"exclusiveMinimum", "numeric bounds cannot be enforced by a grammar"},
        {"exclusiveMaximum", "numeric bounds cannot be enforced by a grammar"},
        {"multipleOf", "numeric bounds cannot be enforced by a grammar"},
        {"pattern", "regular expressions are not converted"},
        {"patternProperties", "regular expressions are not converted"},
        {"uniqueItems", "uniqueness cannot be enforced by a grammar"},
        {"not", "negation is not converted"},
        {"if", "conditionals are not converted"},
        {"then", "conditionals are not converted"},
        {"else", "conditionals are not converted"},
    };
    for (size_t i = 0; i < LLMK_ARRAY_LEN(reasons); i++)
        if (!strcmp(reasons[i].kw, kw)) return reasons[i].why;
    return NULL;
}

static uint32_t kw_bit(const char *name) {
    for (size_t i = 0; i < LLMK_ARRAY_LEN(keywords); i++)
        if (!strcmp(keywords[i].name, name)) return keywords[i].bit;
    return 0;
}

/* The keywords present in s (each bit once); an unknown one is refused. */
static int kw_scan(struct js *j, const cJSON *s, uint32_t *present) {
    *present = 0;
    for (const cJSON *c = s->child; c; c = c->next) {
        uint32_t bit = kw_bit(c->string);
        if (!bit) return unsupported_kw(j, c->string, refusal_reason(c->string));
        if (bit == K_ID && s != j->doc)
            return unsupported_kw(j, c->string, "an $id below the root changes what $ref means");
        if ((*present & bit) && bit != K_DESC && bit != K_DEFS)
            return js_fail(j, LLMK_BAD_REQUEST, "keyword \"%s\" appears twice", c->string);
        *present |= bit;
    }
    return LLMK_OK;
}

/* First keyword of s in the bits `bad`, for a message. */
static const char *kw_first(const cJSON *s, uint32_t bad) {
    for (const cJSON *c = s->child; c; c = c->next)
        if (kw_bit(c->string) & bad) return c->string;
    return "?";
}

/* A count keyword: an integer in [0, JS_MAX_COUNT]; *v untouched when absent. */
static int kw_count(struct js *j, const cJSON *s, const char *kw, long *v) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(s, kw);
    if (!c) return LLMK_OK;
    if (!cJSON_IsNumber(c) || c->valuedouble < 0 || c->valuedouble != floor(c->valuedouble))
        return js_fail(j, LLMK_BAD_REQUEST, "\"%s\" must be a non-negative integer", kw);
    if (c->valuedouble > JS_MAX_COUNT)
        return js_fail(j, LLMK_UNSUPPORTED, "\"%s\" %.17g is above %d, the largest count converted", kw,
                       c->valuedouble, JS_MAX_COUNT);
    *v = (long)c->valuedouble;
    return LLMK_OK;
}

/* Kinds of JSON value, for "type" and for proving oneOf branches disjoint. */
enum {
    KI_NULL = 1, KI_BOOL = 2, KI_INT = 4, KI_FRAC = 8, KI_STR = 16, KI_ARR = 32, KI_OBJ = 64,
    KI_ALL = 127
};

static unsigned type_kind(const char *t) {
    static const struct {
        const char *name;
        unsigned k;
    } types[] = {{"null", KI_NULL},     {"boolean", KI_BOOL}, {"integer", KI_INT},
                 {"number", KI_INT | KI_FRAC}, {"string", KI_STR}, {"array", KI_ARR},
                 {"object", KI_OBJ}};
    for (size_t i = 0; i < LLMK_ARRAY_LEN(types); i++)
        if (!strcmp(types[i].name, t)) return types[i].k;
    return 0;
}

/* The kinds "type" allows (a name or an array of names). */
static int type_kinds(struct js *j, const cJSON *t, unsigned *k) {
    *k = 0;
    if (cJSON_IsString(t)) {
        *k = type_kind(t->valuestring);
        if (!*k) return js_fail(j, LLMK_BAD_REQUEST, "unknown type \"%s\"", t->valuestring);
        return LLMK_OK;
    }
    if (!cJSON_IsArray(t) || !t->child)
        return js_fail(j, LLMK_BAD_REQUEST, "\"type\" must be a type name or a non-empty array of them");
    for (const cJSON *c = t->child; c; c = c->next) {
        unsigned one = cJSON_IsString(c) ? type_kind(c->valuestring) : 0;
        if (!one) return js_fail(j, LLMK_BAD_REQUEST, "\"type\" holds something that is not a type name");
        *k |= one;
    }
    return LLMK_OK;
}

static unsigned value_kind(const cJSON *v) {
    if (cJSON_IsNull(v)) return KI_NULL;
    if (cJSON_IsBool(v)) return KI_BOOL;
    if (cJSON_IsNumber(v)) return v->valuedouble == floor(v->valuedouble) ? KI_INT : KI_FRAC;
    if (cJSON_IsString(v)) return KI_STR;
    if (cJSON_IsArray(v)) return KI_ARR;
    return KI_OBJ;
}

/* ---- $ref --------------------------------------------------------------------- */

/* The node a local JSON pointer ("#", "#/$defs/a~1b") names, or NULL. */
static const cJSON *resolve(const cJSON *doc, const char *ref) {
    if (ref[0] != '#') return NULL;
    const cJSON *n = doc;
    const char *p = ref + 1;
    if (*p && *p != '/') return NULL;
    while (*p == '/' && n) {
        p++;
        char seg[JS_MAX_NAME + 1];
        size_t k = 0;
        for (; *p && *p != '/'; p++) {
            char c = *p;
            if (c == '~') {
                if (p[1] != '0' && p[1] != '1') return NULL;
                c = p[1] == '0' ? '~' : '/';
                p++;
            }
            if (k >= JS_MAX_NAME) return NULL;
            seg[k++] = c;
        }
        seg[k] = 0;
        if (cJSON_IsArray(n)) {
            char *end;
            long i = strtol(seg, &end, 10);
            if (!k || *end || i < 0 || (k > 1 && seg[0] == '0')) return NULL;
            n = cJSON_GetArrayItem(n, (int)(i > INT32_MAX ? -1 : i));
        } else if (cJSON_IsObject(n)) {
            n = cJSON_GetObjectItemCaseSensitive(n, seg);
        } else {
            return NULL;
        }
    }
    return n;
}

/* Follows a chain of plain {"$ref": ...} schemas (for classification; no errors). */
static const cJSON *deref(const struct js *j, const cJSON *s) {
    for (int hops = 0; hops < JS_MAX_DEPTH && cJSON_IsObject(s); hops++) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "$ref");
        if (!cJSON_IsString(r)) return s;
        s = resolve(j->doc, r->valuestring);
    }
    return cJSON_IsObject(s) || cJSON_IsBool(s) ? s : NULL;
}

/* ---- oneOf: proving branches disjoint ------------------------------------------ */

/* A superset of the kinds of value s accepts. */
static unsigned kinds_of(const struct js *j, const cJSON *s, int depth) {
    s = deref(j, s);
    if (!s || depth > JS_MAX_DEPTH) return KI_ALL;
    if (cJSON_IsBool(s)) return cJSON_IsTrue(s) ? KI_ALL : 0;
    unsigned k = KI_ALL, t;
    const cJSON *c;
    struct js *mj = (struct js *)j; /* type_kinds only records a message on failure */
    if ((c = cJSON_GetObjectItemCaseSensitive(s, "type")) && type_kinds(mj, c, &t) == LLMK_OK) k &= t;
    if ((c = cJSON_GetObjectItemCaseSensitive(s, "const"))) k &= value_kind(c);
    if (cJSON_IsArray(c = cJSON_GetObjectItemCaseSensitive(s, "enum"))) {
        t = 0;
        for (const cJSON *v = c->child; v; v = v->next) t |= value_kind(v);
        k &= t;
    }
    const char *alts[] = {"anyOf", "oneOf"};
    for (size_t a = 0; a < 2; a++) {
        if (!cJSON_IsArray(c = cJSON_GetObjectItemCaseSensitive(s, alts[a]))) continue;
        t = 0;
        for (const cJSON *v = c->child; v; v = v->next) t |= kinds_of(j, v, depth + 1);
        k &= t;
    }
    if (cJSON_IsArray(c = cJSON_GetObjectItemCaseSensitive(s, "allOf")))
        for (const cJSON *v = c->child; v; v = v->next) k &= kinds_of(j, v, depth + 1);
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "nullable"))) k |= KI_NULL;
    return k;
}

/* enum/const values of s when they are all scalars (numbers, strings, ...). */
static bool scalar_values(const cJSON *s, const cJSON **one, const cJSON **list) {
    *one = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(s, "enum");
    *list = cJSON_IsArray(e) ? e->child : NULL;
    if (*one && (e || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "nullable")))) return false;
    if (*one) return !cJSON_IsArray(*one) && !cJSON_IsObject(*one);
    if (!cJSON_IsArray(e) || !*list) return false;
    for (const cJSON *v = *list; v; v = v->next)
        if (cJSON_IsArray(v) || cJSON_IsObject(v)) return false;
    return !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "nullable"));
}

static bool scalar_equal(const cJSON *a, const cJSON *b) {
    if (value_kind(a) & (KI_INT | KI_FRAC)) return cJSON_IsNumber(b) && a->valuedouble == b->valuedouble;
    if (cJSON_IsString(a)) return cJSON_IsString(b) && !strcmp(a->valuestring, b->valuestring);
    return value_kind(a) == value_kind(b) && (cJSON_IsNull(a) || cJSON_IsTrue(a) == cJSON_IsTrue(b));
}

static bool disjoint(const struct js *j, const cJSON *a, const cJSON *b, int depth);

/* Objects that differ in a member both require, or where one requires a
 * member the other forbids. */
static bool objects_disjoint(const struct js *j, const cJSON *a, const cJSON *b, int depth) {
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(a, "required");
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(a, "properties");
    const cJSON *pb = cJSON_GetObjectItemCaseSensitive(b, "properties");
    const cJSON *rb = cJSON_GetObjectItemCaseSensitive(b, "required");
    bool b_closed = cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(b, "additionalProperties"));
    if (!cJSON_IsArray(req)) return false;
    for (const cJSON *r = req->child; r; r = r->next) {
        if (!cJSON_IsString(r)) continue;
        const cJSON *sb_ = cJSON_IsObject(pb) ? cJSON_GetObjectItemCaseSensitive(pb, r->valuestring) : NULL;
        if (!sb_ && b_closed) return true;
        bool b_requires = false;
        if (cJSON_IsArray(rb))
            for (const cJSON *x = rb->child; x; x = x->next)
                if (cJSON_IsString(x) && !strcmp(x->valuestring, r->valuestring)) b_requires = true;
        const cJSON *sa = cJSON_IsObject(pa) ? cJSON_GetObjectItemCaseSensitive(pa, r->valuestring) : NULL;
        if (b_requires && sa && sb_ && disjoint(j, sa, sb_, depth + 1)) return true;
    }
    return false;
}

/* True only when no value can match both a and b (false when unsure). */
static bool disjoint(const struct js *j, const cJSON *a, const cJSON *b, int depth) {
    if (depth > JS_MAX_DEPTH) return false;
    unsigned ka = kinds_of(j, a, depth), kb = kinds_of(j, b, depth);
    if (!(ka & kb)) return true;
    a = deref(j, a);
    b = deref(j, b);
    if (!cJSON_IsObject(a) || !cJSON_IsObject(b)) return false;
    const cJSON *oa, *la, *ob, *lb;
    bool va = scalar_values(a, &oa, &la), vb = scalar_values(b, &ob, &lb);
    if (va && vb) {
        for (const cJSON *x = oa ? oa : la; x; x = oa ? NULL : x->next)
            for (const cJSON *y = ob ? ob : lb; y; y = ob ? NULL : y->next)
                if (scalar_equal(x, y)) return false;
        return true;
    }
    if (va || vb) { /* every listed value has a kind the other side never takes */
        unsigned other = va ? kb : ka;
        const cJSON *o1 = va ? oa : ob, *l1 = va ? la : lb;
        for (const cJSON *x = o1 ? o1 : l1; x; x = o1 ? NULL : x->next)
            if (value_kind(x) & other) return false;
        return true;
    }
    if (ka == KI_OBJ && kb == KI_OBJ)
        return objects_disjoint(j, a, b, depth) || objects_disjoint(j, b, a, depth);
    return false;
}

/* ---- the conversion ----------------------------------------------------------- */

static int gen(struct js *j, const cJSON *s, const char *hint, struct sb *out);

/* The schema s as one symbol: an existing rule's name, or a new rule. */
static int gen_symbol(struct js *j, const cJSON *s, const char *hint, struct sb *out) {
    struct sb e = {0};
    int rc = gen(j, s, hint, &e);
    if (rc == LLMK_OK) rc = sb_status(j, &e);
    if (rc == LLMK_OK) {
        if (!strpbrk(e.p, " |()\"[")) sb_puts(out, e.p);
        else rc = rule_from(j, hint, &e, out);
    }
    sb_free(&e);
    return rc;
}

/* item (one symbol) repeated lo..hi times (hi < 0: unbounded). */
static void repeat(struct sb *b, const char *item, long lo, long hi) {
    sb_puts(b, item);
    if (lo == 0 && hi < 0) sb_puts(b, "*");
    else if (lo == 1 && hi < 0) sb_puts(b, "+");
    else if (lo == 0 && hi == 1) sb_puts(b, "?");
    else if (lo == hi) sb_printf(b, "{%ld}", lo);
    else if (hi < 0) sb_printf(b, "{%ld,}", lo);
    else sb_printf(b, "{%ld,%ld}", lo, hi);
}

static int gen_ref(struct js *j, const cJSON *s, struct sb *out) {
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (!cJSON_IsString(r)) return js_fail(j, LLMK_BAD_REQUEST, "\"$ref\" must be a string");
    if (r->valuestring[0] != '#')
        return unsupported_kw(j, "$ref", "only references inside the schema (\"#...\") are resolved");
    const cJSON *t = resolve(j->doc, r->valuestring);
    if (!t) return js_fail(j, LLMK_BAD_REQUEST, "\"$ref\" %.200s names nothing in the schema", r->valuestring);
    for (size_t i = 0; i < j->n_refs; i++) {
        if (j->refs[i].target != t) continue;
        if (!j->refs[i].done && j->refs[i].epoch == j->epoch)
            return js_fail(j, LLMK_UNSUPPORTED,
                           "\"$ref\" %.200s refers back to itself before any character is read (left recursion)",
                           r->valuestring);
        sb_puts(out, j->rules[j->refs[i].rule].name);
        return LLMK_OK;
    }
    if (j->n_refs == j->cap_refs) {
        size_t cap = j->cap_refs ? 2 * j->cap_refs : 16;
        struct refent *n = realloc(j->refs, cap * sizeof *n);
        if (!n) return js_fail(j, LLMK_OUT_OF_MEMORY, "out of memory");
        j->refs = n;
        j->cap_refs = cap;
    }
    const char *last = strrchr(r->valuestring, '/');
    size_t idx, me = j->n_refs;
    int rc = rule_new(j, last && last[1] ? last + 1 : "schema", &idx);
    if (rc != LLMK_OK) return rc;
    j->refs[j->n_refs++] = (struct refent){t, idx, j->epoch, false};
    /* Messages inside name the target's own pointer. */
    char saved[JS_PATH_CAP];
    size_t saved_len = j->plen;
    bool saved_cut = j->path_cut;
    memcpy(saved, j->path, sizeof saved);
    snprintf(j->path, sizeof j->path, "%.200s", r->valuestring);
    j->plen = strlen(j->path);
    j->path_cut = false;
    struct sb body = {0};
    rc = gen(j, t, j->rules[idx].name, &body);
    if (rc == LLMK_OK) rc = rule_set(j, idx, &body);
    sb_free(&body);
    if (rc != LLMK_OK) return rc;
    memcpy(j->path, saved, sizeof saved);
    j->plen = saved_len;
    j->path_cut = saved_cut;
    j->refs[me].done = true;
    sb_puts(out, j->rules[idx].name);
    return LLMK_OK;
}

/* enum / const: the alternatives' literals, those of the wrong "type" left out. */
static int gen_enum(struct js *j, const cJSON *s, uint32_t present, struct sb *out) {
    unsigned allowed = KI_ALL;
    int rc;
    if (present & K_TYPE) {
        if ((rc = type_kinds(j, cJSON_GetObjectItemCaseSensitive(s, "type"), &allowed)) != LLMK_OK) return rc;
    }
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(s, "const"), *e = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if ((present & K_ENUM) && (!cJSON_IsArray(e) || !e->child))
        return js_fail(j, LLMK_BAD_REQUEST, "\"enum\" must be a non-empty array");
    const cJSON *first = c ? c : e->child;
    int n = 0;
    sb_puts(out, "( ");
    for (const cJSON *v = first; v; v = c ? NULL : v->next) {
        if (!(value_kind(v) & allowed)) continue;
        if (n++) sb_puts(out, " | ");
        if (cJSON_IsArray(v) || cJSON_IsObject(v)) prim(j, P_WS);
        if ((rc = gbnf_value(j, out, v, 0)) != LLMK_OK) return rc;
    }
    if (!n) return js_fail(j, LLMK_BAD_REQUEST, "no value of \"%s\" has the schema's type", c ? "const" : "enum");
    sb_puts(out, " )");
    return sb_status(j, out);
}

/* One branch of a merged allOf into m's properties and required: a plain
 * object schema (type "object", properties, required, annotations;
 * additionalProperties only as true, since in a branch it would see that
 * branch's properties alone), reached through $refs if need be. */
static int allof_branch(struct js *j, const cJSON *b, cJSON *props, cJSON *req, bool *object) {
    for (int hops = 0; cJSON_IsObject(b) && cJSON_GetObjectItemCaseSensitive(b, "$ref"); hops++) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(b, "$ref");
        const cJSON *t = cJSON_IsString(r) && r->valuestring[0] == '#' ? resolve(j->doc, r->valuestring) : NULL;
        if (!t || hops == JS_MAX_DEPTH || b->child->next)
            return unsupported_kw(j, "allOf", "a branch's $ref must stand alone and name a schema in the document");
        b = t;
    }
    if (cJSON_IsTrue(b)) return LLMK_OK;
    if (!cJSON_IsObject(b)) return unsupported_kw(j, "allOf", "a branch that is not a schema object");
    uint32_t present;
    int rc = kw_scan(j, b, &present);
    if (rc != LLMK_OK) return rc;
    uint32_t other = present & ~(uint32_t)(K_DESC | K_TYPE | K_PROPS | K_REQ | K_ADDP);
    if (other)
        return unsupported_kw(j, "allOf", "of more than one schema, only object schemas (type, properties, "
                                          "required) are merged");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(b, "type"), *x = cJSON_GetObjectItemCaseSensitive(b, "additionalProperties");
    if (t && !(cJSON_IsString(t) && !strcmp(t->valuestring, "object")))
        return unsupported_kw(j, "allOf", "of more than one schema, only object schemas are merged");
    if (x && !cJSON_IsTrue(x))
        return unsupported_kw(j, "allOf", "a merged branch's additionalProperties sees only its own properties");
    *object |= t || (present & (K_PROPS | K_REQ));
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(b, "properties"), *r = cJSON_GetObjectItemCaseSensitive(b, "required");
    if (p && !cJSON_IsObject(p)) return js_fail(j, LLMK_BAD_REQUEST, "\"properties\" must be an object");
    if (r && !cJSON_IsArray(r)) return js_fail(j, LLMK_BAD_REQUEST, "\"required\" must be an array");
    for (const cJSON *c = p ? p->child : NULL; c; c = c->next) {
        const cJSON *had = cJSON_GetObjectItemCaseSensitive(props, c->string);
        if (had && !cJSON_Compare(had, c, true))
            return js_fail(j, LLMK_UNSUPPORTED, "keyword \"allOf\": property \"%.200s\" has different schemas in "
                                                "two branches, which are not intersected", c->string);
        if (!had && !cJSON_AddItemReferenceToObject(props, c->string, (cJSON *)c))
            return js_fail(j, LLMK_OUT_OF_MEMORY, "out of memory");
    }
    for (const cJSON *c = r ? r->child : NULL; c; c = c->next) {
        if (!cJSON_IsString(c)) return js_fail(j, LLMK_BAD_REQUEST, "\"required\" must list strings");
        bool seen = false;
        for (const cJSON *d = req->child; d && !seen; d = d->next) seen = !strcmp(d->valuestring, c->valuestring);
        if (!seen && !cJSON_AddItemToArray(req, cJSON_CreateString(c->valuestring)))
            return js_fail(j, LLMK_OUT_OF_MEMORY, "out of memory");
    }
    return LLMK_OK;
}

/* allOf of several object schemas, the common way to extend one: one object
 * with the union of their properties and of their required names. */
static int gen_allof_objects(struct js *j, const cJSON *a, const char *hint, struct sb *out) {
    cJSON *m = cJSON_CreateObject(), *props = cJSON_CreateObject(), *req = cJSON_CreateArray();
    int rc = m && props && req ? LLMK_OK : js_fail(j, LLMK_OUT_OF_MEMORY, "out of memory");
    bool object = false;
    int i = 0;
    for (const cJSON *b = a->child; b && rc == LLMK_OK; b = b->next, i++) {
        size_t saved = path_push_index(j, "allOf", i);
        if ((rc = allof_branch(j, b, props, req, &object)) == LLMK_OK) path_pop(j, saved);
    }
    if (rc == LLMK_OK && object) {
        cJSON_AddItemToObject(m, "type", cJSON_CreateString("object"));
        cJSON_AddItemToObject(m, "properties", props), props = NULL;
        if (req->child) cJSON_AddItemToObject(m, "required", req), req = NULL;
        if (!cJSON_GetObjectItemCaseSensitive(m, "type")) rc = js_fail(j, LLMK_OUT_OF_MEMORY, "out of memory");
    }
    if (rc == LLMK_OK) rc = gen(j, m, hint, out);
    cJSON_Delete(m);
    cJSON_Delete(props);
    cJSON_Delete(req);
    return rc;
}

/* anyOf / oneOf: one alternative per branch (oneOf only when no value can
 * match two branches: the grammar cannot exclude the overlap); allOf of a
 * single schema is that schema. */
static int gen_comb(struct js *j, const cJSON *s, uint32_t present, const char *hint, struct sb *out) {
    const char *kw = present & K_ANYOF ? "anyOf" : present & K_ONEOF ? "oneOf" : "allOf";
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(s, kw);
    if (!cJSON_IsArray(a) || !a->child) return js_fail(j, LLMK_BAD_REQUEST, "\"%s\" must be a non-empty array", kw);
    if (present & K_ALLOF) {
        if (a->child->next) return gen_allof_objects(j, a, hint, out);
        size_t saved = path_push_index(j, kw, 0);
        int rc = gen(j, a->child, hint, out);
        if (rc == LLMK_OK) path_pop(j, saved);
        return rc;
    }
    if (present & K_ONEOF) {
        int i = 0;
        for (const cJSON *x = a->child; x; x = x->next, i++) {
            int k = i + 1;
            for (const cJSON *y = x->next; y; y = y->next, k++)
                if (!disjoint(j, x, y, 0))
                    return js_fail(j, LLMK_UNSUPPORTED,
                                   "keyword \"oneOf\": branches %d and %d may both match one value, which "
                                   "the grammar cannot exclude (use anyOf if that is meant)", i, k);
        }
    }
    sb_puts(out, "( ");
    int i = 0;
    for (const cJSON *x = a->child; x; x = x->next, i++) {
        if (i) sb_puts(out, " | ");
        char h[JS_HINT_CAP + 16];
        snprintf(h, sizeof h, "%.40s-%d", hint, i);
        size_t saved = path_push_index(j, kw, i);
        int rc = gen(j, x, h, out);
        if (rc != LLMK_OK) return rc;
        path_pop(j, saved);
    }
    sb_puts(out, " )");
    return sb_status(j, out);
}

static int gen_string(struct js *j, const cJSON *s, uint32_t present, struct sb *out) {
    if (present & K_FORMAT) {
        static const struct {
            const char *name;
            enum prim p;
        } formats[] = {{"date-time", P_DATE_TIME}, {"date", P_DATE}, {"time", P_TIME}, {"uuid", P_UUID},
                       {"ipv4", P_IPV4}};
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(s, "format");
        if (!cJSON_IsString(f)) return js_fail(j, LLMK_BAD_REQUEST, "\"format\" must be a string");
        if (present & (K_MINLEN | K_MAXLEN))
            return unsupported_kw(j, kw_first(s, K_MINLEN | K_MAXLEN), "a length bound next to \"format\"");
        for (size_t i = 0; i < LLMK_ARRAY_LEN(formats); i++) {
            if (strcmp(formats[i].name, f->valuestring) != 0) continue;
            sb_printf(out, "\"\\\"\" %s \"\\\"\"", prim(j, formats[i].p));
            return LLMK_OK;
        }
        return js_fail(j, LLMK_UNSUPPORTED,
                       "keyword \"format\": \"%.60s\" is not supported (converted: date-time, date, time, uuid, ipv4)",
                       f->valuestring);
    }
    long lo = 0, hi = -1;
    int rc;
    if ((rc = kw_count(j, s, "minLength", &lo)) != LLMK_OK || (rc = kw_count(j, s, "maxLength", &hi)) != LLMK_OK)
        return rc;
    if (hi >= 0 && lo > hi) return js_fail(j, LLMK_BAD_REQUEST, "minLength %ld is above maxLength %ld", lo, hi);
    if (lo == 0 && hi < 0) {
        sb_puts(out, prim(j, P_STRING));
        return LLMK_OK;
    }
    sb_puts(out, "\"\\\"\" ");
    if (hi != 0) {
        repeat(out, prim(j, P_CHAR), lo, hi);
        sb_puts(out, " ");
    }
    sb_puts(out, "\"\\\"\"");
    return LLMK_OK;
}

/* Item schemas of an array: the prefix (prefixItems, or items as an array
 * with additionalItems) and the schema of the rest (NULL: any value). */
static int array_parts(struct js *j, const cJSON *s, const cJSON **prefix, const cJSON **rest, const char **rest_kw) {
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    *prefix = NULL;
    *rest = NULL;
    *rest_kw = "items";
    if (pre) {
        if (!cJSON_IsArray(pre)) return js_fail(j, LLMK_BAD_REQUEST, "\"prefixItems\" must be an array");
        if (cJSON_IsArray(items))
            return js_fail(j, LLMK_BAD_REQUEST, "\"items\" must be a schema next to \"prefixItems\"");
        *prefix = pre;
        *rest = items;
    } else if (cJSON_IsArray(items)) {
        *prefix = items;
        *rest = cJSON_GetObjectItemCaseSensitive(s, "additionalItems");
        *rest_kw = "additionalItems";
    } else {
        *rest = items;
    }
    return LLMK_OK;
}

static int gen_array(struct js *j, const cJSON *s, const char *hint, struct sb *out) {
    const cJSON *prefix, *rest;
    const char *rest_kw;
    long lo = 0, hi = -1;
    int rc;
    if ((rc = array_parts(j, s, &prefix, &rest, &rest_kw)) != LLMK_OK ||
        (rc = kw_count(j, s, "minItems", &lo)) != LLMK_OK || (rc = kw_count(j, s, "maxItems", &hi)) != LLMK_OK)
        return rc;
    long n = prefix ? cJSON_GetArraySize(prefix) : 0;
    if (hi >= 0 && lo > hi) return js_fail(j, LLMK_BAD_REQUEST, "minItems %ld is above maxItems %ld", lo, hi);
    if (hi >= 0 && hi < n)
        return unsupported_kw(j, "maxItems", "below the number of prefix items, which the grammar requires in full");
    long rest_lo = lo > n ? lo - n : 0, rest_hi = hi < 0 ? -1 : hi - n;
    if (cJSON_IsFalse(rest)) rest_hi = 0;
    if (rest_hi >= 0 && rest_lo > rest_hi)
        return js_fail(j, LLMK_BAD_REQUEST, "minItems %ld needs more items than the schema allows", lo);
    sb_puts(out, "\"[\" ");
    sb_puts(out, prim(j, P_WS));
    int saved_epoch = j->epoch;
    j->epoch = ++j->next_epoch;
    char h[JS_HINT_CAP + 16];
    for (long i = 0; i < n; i++) {
        size_t saved = path_push_index(j, prefix == cJSON_GetObjectItemCaseSensitive(s, "items") ? "items" : "prefixItems", (int)i);
        snprintf(h, sizeof h, "%.40s-%ld", hint, i);
        sb_puts(out, i ? " \",\" ws " : " ");
        if ((rc = gen(j, cJSON_GetArrayItem(prefix, (int)i), h, out)) != LLMK_OK) return rc;
        sb_puts(out, " ws");
        path_pop(j, saved);
    }
    if (rest_hi != 0) {
        struct sb item = {0};
        if (rest && !cJSON_IsTrue(rest)) {
            size_t saved = path_push(j, rest_kw);
            hint_join(h, sizeof h, hint, "item");
            rc = gen_symbol(j, rest, h, &item);
            if (rc != LLMK_OK) {
                sb_free(&item);
                return rc;
            }
            path_pop(j, saved);
        } else {
            sb_puts(&item, prim(j, P_VALUE));
        }
        if ((rc = sb_status(j, &item)) != LLMK_OK) {
            sb_free(&item);
            return rc;
        }
        struct sb one = {0};
        sb_printf(&one, "( \",\" ws %s ws )", item.p);
        if (n) {
            sb_puts(out, " ");
            if (one.p) repeat(out, one.p, rest_lo, rest_hi);
        } else {
            sb_printf(out, " %s%s ws ", rest_lo ? "" : "( ", item.p);
            if (one.p) repeat(out, one.p, rest_lo ? rest_lo - 1 : 0, rest_hi < 0 ? -1 : rest_hi - 1);
            if (!rest_lo) sb_puts(out, " )?");
        }
        rc = sb_status(j, &one);
        sb_free(&one);
        sb_free(&item);
        if (rc != LLMK_OK) return rc;
    }
    j->epoch = saved_epoch;
    sb_puts(out, " \"]\"");
    return sb_status(j, out);
}

/* ---- objects --------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A key needs no JSON escape: the only keys an escape-free extra key could spell. */
static bool plain_key(const char *s) {
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        if (*c == '"' || *c == '\\' || *c < 0x20) return false;
    return true;
}

/* Rule idx: the rest of a key's characters (no escapes) after a prefix of d
 * bytes shared by names[lo..hi), such that the whole key is none of those
 * names. One rule per trie node: either the next character leaves the trie,
 * or it follows a branch into the child's rule. */
static int key_trie(struct js *j, char **names, size_t lo, size_t hi, size_t d, size_t idx) {
    bool terminal = strlen(names[lo]) == d; /* sorted: a name equal to the prefix comes first */
    size_t start = terminal ? lo + 1 : lo;
    struct sb body = {0}, alts = {0};
    int rc = LLMK_OK;
    sb_puts(&body, "[^\"\\\\\\x00-\\x1F");
    for (size_t k = start; k < hi;) {
        uint32_t cp;
        size_t len = utf8_next((const unsigned char *)names[k] + d, strlen(names[k] + d), &cp);
        LLMK_CHECK(len > 0);
        size_t e = k + 1;
        while (e < hi && !strncmp(names[e] + d, names[k] + d, len)) e++;
        gbnf_cp(&body, cp, true);
        size_t child;
        if ((rc = rule_new(j, j->rules[idx].name, &child)) != LLMK_OK) break;
        sb_puts(&alts, " | ");
        gbnf_literal(&alts, names[k] + d, len);
        sb_printf(&alts, " %s", j->rules[child].name);
        if ((rc = key_trie(j, names, k, e, d + len, child)) != LLMK_OK) break;
        k = e;
    }
    if (rc == LLMK_OK) {
        sb_printf(&body, "] %s*", prim(j, P_KCHAR));
        if (alts.p) sb_puts(&body, alts.p);
        if (!terminal) {
            struct sb wrapped = {0};
            sb_printf(&wrapped, "( %s )?", body.p ? body.p : "");
            sb_free(&body);
            body = wrapped;
        }
        rc = sb_status(j, &alts);
        if (rc == LLMK_OK) rc = rule_set(j, idx, &body);
    }
    sb_free(&body);
    sb_free(&alts);
    return rc;
}

/* The rule for one extra member ("key": value): with listed properties, its
 * key may be none of their names (else a listed member could come back under
 * the extra member's schema). */
static int extra_member(struct js *j, const cJSON *props, const cJSON *extra, const char *hint, struct sb *out) {
    char h[JS_HINT_CAP + 16];
    struct sb body = {0};
    char **names = NULL;
    size_t n = 0;
    int rc = LLMK_OK;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next) n += plain_key(p->string);
    if (n && !(names = malloc(n * sizeof *names))) return js_fail(j, LLMK_OUT_OF_MEMORY, "out of memory");
    n = 0;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next)
        if (plain_key(p->string)) names[n++] = p->string;
    if (n) {
        qsort(names, n, sizeof *names, cmp_str);
        size_t idx;
        hint_join(h, sizeof h, hint, "extra-key");
        if ((rc = rule_new(j, h, &idx)) == LLMK_OK) rc = key_trie(j, names, 0, n, 0, idx);
        if (rc == LLMK_OK) sb_printf(&body, "\"\\\"\" %s \"\\\"\"", j->rules[idx].name);
    } else {
        sb_puts(&body, prim(j, P_STRING));
    }
    free(names);
    if (rc == LLMK_OK) {
        sb_printf(&body, " %s \":\" ws ", prim(j, P_WS));
        hint_join(h, sizeof h, hint, "extra");
        if (extra) {
            size_t saved = path_push(j, "additionalProperties");
            rc = gen(j, extra, h, &body);
            if (rc == LLMK_OK) path_pop(j, saved);
        } else {
            sb_puts(&body, prim(j, P_VALUE));
        }
        sb_puts(&body, " ws");
    }
    if (rc == LLMK_OK) rc = rule_from(j, h, &body, out);
    sb_free(&body);
    return rc;
}

/* properties / required / additionalProperties checked; *open tells whether
 * members beyond the listed ones may come (absent additionalProperties with
 * listed properties: no, a canonical subset; without properties: yes). */
static int object_check(struct js *j, const cJSON *s, const cJSON **props, const cJSON **extra, bool *open) {
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *addp = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    if (*props && !cJSON_IsObject(*props)) return js_fail(j, LLMK_BAD_REQUEST, "\"properties\" must be an object");
    if (addp && !cJSON_IsBool(addp) && !cJSON_IsObject(addp))
        return js_fail(j, LLMK_BAD_REQUEST, "\"additionalProperties\" must be a boolean or a schema");
    *open = addp ? !cJSON_IsFalse(addp) : !*props;
    *extra = cJSON_IsObject(addp) ? addp : NULL;
    if (req && !cJSON_IsArray(req)) return js_fail(j, LLMK_BAD_REQUEST, "\"required\" must be an array of names");
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        if (!cJSON_IsString(r)) return js_fail(j, LLMK_BAD_REQUEST, "\"required\" must be an array of names");
        const cJSON *p = *props ? cJSON_GetObjectItemCaseSensitive(*props, r->valuestring) : NULL;
        if (!p)
            return unsupported_kw(j, "required", "a required name that \"properties\" does not list");
        if (cJSON_IsFalse(p))
            return js_fail(j, LLMK_BAD_REQUEST, "property \"%.100s\" is required and its schema is false", r->valuestring);
    }
    size_t n = 0;
    for (const cJSON *p = *props ? (*props)->child : NULL; p; p = p->next, n++) {
        if (strlen(p->string) > JS_MAX_NAME)
            return js_fail(j, LLMK_UNSUPPORTED, "a property name longer than %d bytes", JS_MAX_NAME);
        if (!utf8_valid(p->string)) return js_fail(j, LLMK_BAD_REQUEST, "a property name that is not valid UTF-8");
    }
    if (n > 1) { /* duplicate names: sorted copies side by side */
        const char **names = malloc(n * sizeof *names);
        if (!names) return js_fail(j, LLMK_OUT_OF_MEMORY, "out of memory");
        n = 0;
        for (const cJSON *p = (*props)->child; p; p = p->next) names[n++] = p->string;
        qsort(names, n, sizeof *names, cmp_str);
        for (size_t i = 1; i < n; i++) {
            if (strcmp(names[i - 1], names[i]) != 0) continue;
            int rc = js_fail(j, LLMK_BAD_REQUEST, "property \"%.100s\" is listed twice", names[i]);
            free(names);
            return rc;
        }
        free(names);
    }
    return LLMK_OK;
}

static bool is_required(const cJSON *s, const char *name) {
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
        if (cJSON_IsString(r) && !strcmp(r->valuestring, name)) return true;
    return false;
}

/* One rule per listed member: "\"name\"" ws ":" ws value ws. */
static int member_rules(struct js *j, const cJSON *s, const cJSON *props, const char *hint, size_t *kv,
                        bool *req, size_t *m) {
    *m = 0;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next) {
        if (cJSON_IsFalse(p)) continue; /* may not appear; not required (object_check) */
        char h[2 * JS_HINT_CAP];
        hint_join(h, sizeof h, hint, p->string);
        size_t idx;
        int rc = rule_new(j, h, &idx);
        if (rc != LLMK_OK) return rc;
        struct sb body = {0}, key = {0};
        json_string(&key, p->string);
        if ((rc = sb_status(j, &key)) == LLMK_OK) {
            gbnf_literal(&body, key.p, key.n);
            sb_printf(&body, " %s \":\" ws ", prim(j, P_WS));
            size_t saved = path_push(j, "properties");
            size_t saved2 = path_push(j, p->string);
            rc = gen(j, p, j->rules[idx].name, &body);
            path_pop(j, saved2);
            if (rc == LLMK_OK) path_pop(j, saved);
            sb_puts(&body, " ws");
        }
        if (rc == LLMK_OK) rc = rule_set(j, idx, &body);
        sb_free(&body);
        sb_free(&key);
        if (rc != LLMK_OK) return rc;
        kv[*m] = idx;
        req[(*m)++] = is_required(s, p->string);
    }
    return LLMK_OK;
}

/* Members in the listed order, optional ones possibly left out, then any
 * extra members. rest[i] is a rule for "members i.. after one already
 * written" (each preceded by a comma); the opening alternatives pick the
 * first member written, which can be no later than the first required one. */
static int object_layout(struct js *j, const size_t *kv, const bool *req, size_t m, const char *xkv,
                         const char *hint, struct sb *out) {
    char **rest = calloc(m + 1, sizeof *rest);
    if (!rest) return js_fail(j, LLMK_OUT_OF_MEMORY, "out of memory");
    int rc = LLMK_OK;
    char h[JS_HINT_CAP + 24];
    for (size_t i = m + 1; i-- > 0 && rc == LLMK_OK;) {
        if (i == 0 && m > 0) break; /* rest[0] is never used: the opening alternatives stand for it */
        struct sb body = {0}, name = {0};
        snprintf(h, sizeof h, "%.40s-rest-%zu", hint, i);
        if (i == m && xkv) sb_printf(&body, "( \",\" ws %s )*", xkv);
        else if (i < m) sb_printf(&body, req[i] ? "\",\" ws %s%s%s" : "( \",\" ws %s )?%s%s", j->rules[kv[i]].name,
                                  rest[i + 1] ? " " : "", rest[i + 1] ? rest[i + 1] : "");
        if (body.p && (rc = rule_from(j, h, &body, &name)) == LLMK_OK) rc = sb_status(j, &name);
        rest[i] = name.p;
        sb_free(&body);
    }
    bool any_required = false;
    sb_printf(out, "\"{\" %s ( ", prim(j, P_WS));
    for (size_t i = 0; i < m && rc == LLMK_OK; i++) {
        sb_printf(out, "%s%s%s%s", i ? " | " : "", j->rules[kv[i]].name, rest[i + 1] ? " " : "",
                  rest[i + 1] ? rest[i + 1] : "");
        if ((any_required = req[i])) break;
    }
    if (!any_required && xkv) sb_printf(out, "%s%s%s%s", m ? " | " : "", xkv, rest[m] ? " " : "", rest[m] ? rest[m] : "");
    sb_puts(out, any_required ? " ) \"}\"" : " )? \"}\"");
    for (size_t i = 0; i <= m; i++) free(rest[i]);
    free(rest);
    return rc == LLMK_OK ? sb_status(j, out) : rc;
}

static int gen_object(struct js *j, const cJSON *s, const char *hint, struct sb *out) {
    const cJSON *props = NULL, *extra = NULL;
    bool open = false;
    int rc = object_check(j, s, &props, &extra, &open);
    if (rc != LLMK_OK) return rc;
    size_t n = props ? (size_t)cJSON_GetArraySize(props) : 0, m;
    size_t *kv = malloc((n ? n : 1) * sizeof *kv);
    bool *req = malloc(n ? n : 1);
    struct sb xkv = {0};
    int saved_epoch = j->epoch;
    j->epoch = ++j->next_epoch;
    if (!kv || !req) rc = js_fail(j, LLMK_OUT_OF_MEMORY, "out of memory");
    if (rc == LLMK_OK) rc = member_rules(j, s, props, hint, kv, req, &m);
    if (rc == LLMK_OK && open) rc = extra_member(j, props, extra, hint, &xkv);
    if (rc == LLMK_OK) {
        bool all_required = true;
        for (size_t i = 0; i < m; i++) all_required &= req[i];
        if (!open && (all_required || !m)) { /* a fixed sequence */
            sb_printf(out, "\"{\" %s", prim(j, P_WS));
            for (size_t i = 0; i < m; i++) sb_printf(out, "%s%s", i ? " \",\" ws " : " ", j->rules[kv[i]].name);
            sb_puts(out, " \"}\"");
            rc = sb_status(j, out);
        } else {
            rc = object_layout(j, kv, req, m, xkv.p, hint, out);
        }
    }
    j->epoch = saved_epoch;
    sb_free(&xkv);
    free(kv);
    free(req);
    return rc;
}

/* ---- types, and the dispatch --------------------------------------------------- */

static int gen_types(struct js *j, const cJSON *s, uint32_t present, const char *hint, struct sb *out) {
    unsigned k = 0;
    int rc;
    if (present & K_TYPE) {
        if ((rc = type_kinds(j, cJSON_GetObjectItemCaseSensitive(s, "type"), &k)) != LLMK_OK) return rc;
    } else {
        /* No "type": the keywords tell which kinds were meant (a subset of
         * what validates, where other kinds pass untouched). */
        if (present & K_OBJECT_KW) k |= KI_OBJ;
        if (present & K_ARRAY_KW) k |= KI_ARR;
        if (present & K_STRING_KW) k |= KI_STR;
        if (!k) {
            sb_puts(out, prim(j, P_VALUE));
            return LLMK_OK;
        }
    }
    int n = 0;
    for (unsigned b = 1; b <= KI_OBJ; b <<= 1) n += (k & b) && b != KI_FRAC;
    if (n > 1) sb_puts(out, "( ");
    int i = 0;
    const char *sep = " | ";
    if (k & KI_OBJ) {
        if ((rc = gen_object(j, s, hint, out)) != LLMK_OK) return rc;
        i++;
    }
    if (k & KI_ARR) {
        if (i++) sb_puts(out, sep);
        if ((rc = gen_array(j, s, hint, out)) != LLMK_OK) return rc;
    }
    if (k & KI_STR) {
        if (i++) sb_puts(out, sep);
        if ((rc = gen_string(j, s, present, out)) != LLMK_OK) return rc;
    }
    if (k & (KI_INT | KI_FRAC)) sb_printf(out, "%s%s", i++ ? sep : "", prim(j, k & KI_FRAC ? P_NUMBER : P_INTEGER));
    if (k & KI_BOOL) sb_printf(out, "%s%s", i++ ? sep : "", prim(j, P_BOOLEAN));
    if (k & KI_NULL) sb_printf(out, "%s%s", i++ ? sep : "", prim(j, P_NULL));
    if (n > 1) sb_puts(out, " )");
    return sb_status(j, out);
}

/* Which of the keyword groups s uses, checked for combinations the grammar
 * cannot honour together. */
static int gen_keywords(struct js *j, const cJSON *s, uint32_t present, const char *hint, struct sb *out) {
    uint32_t core = present & ~(uint32_t)(K_DESC | K_DEFS | K_ID | K_NULLABLE);
    uint32_t comb = core & (K_ANYOF | K_ONEOF | K_ALLOF);
    if (core & K_REF) {
        if (core & ~(uint32_t)K_REF) return unsupported_kw(j, kw_first(s, core & ~(uint32_t)K_REF), "next to \"$ref\"");
        return gen_ref(j, s, out);
    }
    if (comb) {
        if (comb & (comb - 1)) return unsupported_kw(j, kw_first(s, comb & (comb - 1)), "next to another of anyOf/oneOf/allOf");
        if (core & ~comb) return unsupported_kw(j, kw_first(s, core & ~comb), "next to anyOf/oneOf/allOf");
        return gen_comb(j, s, present, hint, out);
    }
    if (core & (K_ENUM | K_CONST)) {
        if ((core & K_ENUM) && (core & K_CONST)) return unsupported_kw(j, "const", "next to \"enum\"");
        uint32_t other = core & ~(uint32_t)(K_ENUM | K_CONST | K_TYPE);
        if (other) return unsupported_kw(j, kw_first(s, other), "next to \"enum\" or \"const\"");
        return gen_enum(j, s, present, out);
    }
    return gen_types(j, s, present, hint, out);
}

/* Appends to out an expression for schema s that can stand in a sequence
 * (one symbol, a literal or a parenthesized group). */
static int gen(struct js *j, const cJSON *s, const char *hint, struct sb *out) {
    if (cJSON_IsTrue(s)) {
        sb_puts(out, prim(j, P_VALUE));
        return LLMK_OK;
    }
    if (cJSON_IsFalse(s)) return js_fail(j, LLMK_BAD_REQUEST, "the schema false matches nothing");
    if (!cJSON_IsObject(s)) return js_fail(j, LLMK_BAD_REQUEST, "a schema must be an object or a boolean");
    if (j->depth >= JS_MAX_DEPTH)
        return js_fail(j, LLMK_UNSUPPORTED, "schemas nested deeper than %d", JS_MAX_DEPTH);
    uint32_t present;
    int rc = kw_scan(j, s, &present);
    if (rc != LLMK_OK) return rc;
    for (const cJSON *c = s->child; c; c = c->next) {
        uint32_t bit = kw_bit(c->string);
        if (bit == K_DEFS && !cJSON_IsObject(c))
            return js_fail(j, LLMK_BAD_REQUEST, "\"%s\" must be an object", c->string);
    }
    const cJSON *nl = cJSON_GetObjectItemCaseSensitive(s, "nullable");
    if (nl && !cJSON_IsBool(nl)) return js_fail(j, LLMK_BAD_REQUEST, "\"nullable\" must be a boolean");
    bool nullable = cJSON_IsTrue(nl);
    j->depth++;
    if (nullable) sb_puts(out, "( ");
    rc = gen_keywords(j, s, present, hint, out);
    if (nullable) sb_printf(out, " | %s )", prim(j, P_NULL));
    j->depth--;
    return rc == LLMK_OK ? sb_status(j, out) : rc;
}

/* ---- entry ----------------------------------------------------------------------- */

/* Byte offset of the first \u0000 escape (len when none): cJSON would decode
 * it into a NUL that cuts a string short, and the grammar would then match
 * another string than the schema's. */
static size_t nul_escape(const char *s, size_t len) {
    for (size_t i = 0; i + 1 < len; i++) {
        if (s[i] != '\\') continue;
        if (s[i + 1] == 'u' && i + 5 < len && !memcmp(s + i + 2, "0000", 4)) return i;
        i++;
    }
    return len;
}

static int parse_schema(const char *text, size_t len, cJSON **root) {
    *root = NULL;
    size_t nul = nul_escape(text, len);
    if (nul < len) return llmk_fail(LLMK_BAD_REQUEST, "JSON Schema: \\u0000 (NUL) at byte %zu is not supported", nul);
    if (memchr(text, 0, len)) return llmk_fail(LLMK_BAD_REQUEST, "JSON Schema: a NUL byte in the text");
    const char *end = NULL;
    *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!*root) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= text && at <= text + len ? (size_t)(at - text) : len;
        return llmk_fail(LLMK_BAD_REQUEST, "JSON Schema: invalid JSON near byte %zu of %zu", off, len);
    }
    size_t rest = end && end >= text && end <= text + len ? (size_t)(end - text) : len;
    while (rest < len && strchr(" \t\n\r", text[rest])) rest++;
    if (rest < len) {
        cJSON_Delete(*root);
        *root = NULL;
        return llmk_fail(LLMK_BAD_REQUEST, "JSON Schema: unexpected text after the schema at byte %zu of %zu", rest, len);
    }
    return LLMK_OK;
}

/* The rules, then the primitives used, one "name ::= body" line each. */
static int assemble(struct js *j, char **gbnf, size_t *gbnf_len) {
    struct sb out = {0};
    for (size_t i = 0; i < j->n_rules; i++) sb_printf(&out, "%s ::= ", j->rules[i].name), sb_puts(&out, j->rules[i].body), sb_puts(&out, "\n");
    for (int p = 0; p < P_COUNT; p++)
        if (j->prims & (1u << p)) sb_printf(&out, "%s ::= ", prim_names[p]), sb_puts(&out, prim_body((enum prim)p)), sb_puts(&out, "\n");
    int rc = sb_status(j, &out);
    if (rc != LLMK_OK) {
        sb_free(&out);
        return rc;
    }
    *gbnf = out.p;
    if (gbnf_len) *gbnf_len = out.n;
    return LLMK_OK;
}

static void js_free(struct js *j) {
    for (size_t i = 0; i < j->n_rules; i++) {
        free(j->rules[i].name);
        free(j->rules[i].body);
    }
    free(j->rules);
    free(j->names);
    free(j->refs);
}

int llmk_json_schema_to_gbnf(const char *schema_json, size_t len, char **gbnf, size_t *gbnf_len) {
    llmk_error_clear();
    if (gbnf) *gbnf = NULL;
    if (gbnf_len) *gbnf_len = 0;
    if (!schema_json || !gbnf) return llmk_fail(LLMK_INVALID_ARGUMENT, "json_schema_to_gbnf: NULL argument");
    cJSON *doc;
    int rc = parse_schema(schema_json, len, &doc);
    if (rc != LLMK_OK) return rc;
    struct js *j = calloc(1, sizeof *j);
    if (!j) {
        cJSON_Delete(doc);
        return llmk_fail(LLMK_OUT_OF_MEMORY, "json_schema_to_gbnf: out of memory");
    }
    j->doc = doc;
    memcpy(j->path, "#", 2);
    j->plen = 1;
    /* The primitives' names are taken before any rule is named. */
    for (int p = 0; p < P_COUNT && rc == LLMK_OK; p++) {
        char *name = strdup(prim_names[p]);
        if (!name || !name_insert(j, name)) {
            free(name);
            rc = llmk_fail(LLMK_OUT_OF_MEMORY, "json_schema_to_gbnf: out of memory");
        }
    }
    size_t root;
    struct sb body = {0};
    if (rc == LLMK_OK) rc = rule_new(j, "root", &root);
    if (rc == LLMK_OK) {
        sb_printf(&body, "%s ", prim(j, P_WS));
        /* No whitespace after the value: generation ends where the JSON does. */
        rc = gen(j, doc, "root", &body);
    }
    if (rc == LLMK_OK) rc = rule_set(j, root, &body);
    if (rc == LLMK_OK) rc = assemble(j, gbnf, gbnf_len);
    sb_free(&body);
    /* The names set owns the primitives' names; the rules own theirs. */
    for (size_t i = 0; i < j->names_cap; i++) {
        if (!j->names[i]) continue;
        bool is_rule = false;
        for (int p = 0; p < P_COUNT && !is_rule; p++) is_rule = !strcmp(j->names[i], prim_names[p]);
        if (is_rule) free(j->names[i]);
    }
    js_free(j);
    free(j);
    cJSON_Delete(doc);
    return rc;
}
