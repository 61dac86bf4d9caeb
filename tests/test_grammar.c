/* GBNF grammars (src/grammar_parse.c, src/grammar.c): every parser refusal
 * with its line:column, whole-string matching, and the token mask checked
 * token by token against a brute-force reference - each token's bytes
 * appended to the text so far and matched directly against the grammar
 * (llmk_grammar_match: code points stepped one at a time, no DFA, no trie)
 * - on a tiny vocabulary fixture and on the default model's vocabulary. */
#include "check.h"
#include "llmk.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static llmk_grammar *parse(const char *text) {
    llmk_grammar *g = NULL;
    int st = llmk_grammar_parse(text, strlen(text), &g);
    if (st != LLMK_OK) fprintf(stderr, "parse failed: %s\n  %s\n", text, llmk_last_error());
    CHECK(st == LLMK_OK);
    return g;
}

static void test_errors(void) {
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"", "line 1, column 1: no rule named 'root'"},
        {"root ::= foo", "line 1, column 10: undefined rule 'foo'"},
        {"root ::= \"abc", "line 1, column 10: unterminated string literal"},
        {"root ::= [a-z", "line 1, column 10: unterminated character class"},
        {"root ::= [z-a]", "line 1, column 12: range end"},
        {"root ::= (\"a\"", "line 1, column 10: '(' is never closed"},
        {"root ::= \"a\")", "line 1, column 13: unmatched ')'"},
        {"root ::= \"\\q\"", "line 1, column 11: unknown escape"},
        {"root ::= \"\\x4\"", "needs 2 hex digits"},
        {"root ::= \"\\uD800\"", "not a Unicode scalar value"},
        {"root ::= \"\\U00110000\"", "not a Unicode scalar value"},
        {"root ::= \"a\"{3,1}", "the maximum is below the minimum"},
        {"root ::= \"a\"{1001}", "repetition count above 1000"},
        {"root ::= \"a\"{2", "expected '}'"},
        {"root ::= \"a\"{,2}", "expected a number"},
        {"root ::= root \"a\" | \"b\"", "line 1, column 1: rule 'root' can reach itself"},
        {"root ::= a\na ::= \"x\"? root", "can reach itself"},
        {"root ::= (\"a\"?)*", "can reach itself"},
        {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice (first at line 1, column 1)"},
        {"root = \"a\"", "line 1, column 6: expected '::='"},
        {"root ::= \"a\"\n  @", "line 2, column 3: expected a rule name"},
        {"::= \"a\"", "line 1, column 1: expected a rule definition"},
        {"root ::= \"\xff\"", "invalid UTF-8"},
        {"# only a comment\n", "no rule named 'root'"},
        {"root ::= x\nx ::= \"é\" y", "line 2, column 11: undefined rule 'y'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        llmk_grammar *g = NULL;
        int st = llmk_grammar_parse(cases[i].text, strlen(cases[i].text), &g);
        bool ok = st == LLMK_BAD_GRAMMAR && !g && strstr(llmk_last_error(), cases[i].want);
        if (!ok) fprintf(stderr, "case %zu: status %d, message '%s', want '%s'\n", i, st, llmk_last_error(), cases[i].want);
        CHECK(ok);
    }
    /* a NUL inside the text, and a text over the size limit */
    llmk_grammar *g = NULL;
    CHECK_EQ_INT(llmk_grammar_parse("root ::= \"a\"\0", 13, &g), LLMK_BAD_GRAMMAR);
    CHECK(strstr(llmk_last_error(), "NUL byte") != NULL);
    CHECK_EQ_INT(llmk_grammar_parse("", (size_t)LLMK_GRAMMAR_MAX_TEXT + 1, &g), LLMK_BAD_GRAMMAR);
    CHECK_EQ_INT(llmk_grammar_parse(NULL, 0, NULL), LLMK_INVALID_ARGUMENT);
    CHECK(strcmp(llmk_status_name(LLMK_BAD_GRAMMAR), "llmk_bad_grammar") == 0);
}

struct mcase {
    const char *s;
    bool complete, prefix;
};

static void check_matches(const char *grammar, const struct mcase *c, size_t n) {
    llmk_grammar *g = parse(grammar);
    if (!g) return;
    for (size_t i = 0; i < n; i++) {
        bool whole, pre;
        CHECK_EQ_INT(llmk_grammar_match(g, c[i].s, strlen(c[i].s), &whole, &pre), LLMK_OK);
        if (whole != c[i].complete || pre != c[i].prefix)
            fprintf(stderr, "grammar %s on '%s': complete %d prefix %d\n", grammar, c[i].s, whole, pre);
        CHECK(whole == c[i].complete && pre == c[i].prefix);
    }
    llmk_grammar_free(g);
}

static void test_match(void) {
    const struct mcase yn[] = {{"yes.", 1, 1}, {"no.", 1, 1}, {"ye", 0, 1}, {"", 0, 1}, {"No.", 0, 0}, {"yes. ", 0, 0}};
    check_matches("root ::= (\"yes\" | \"no\") \".\"", yn, 6);
    const struct mcase list[] = {{"[1,22,333]", 1, 1}, {"[]", 0, 0}, {"[1,", 0, 1}, {"[01]", 1, 1}, {"[1,,2]", 0, 0}};
    check_matches("root ::= \"[\" num (\",\" num)* \"]\"\nnum ::= [0-9]+ # digits\n", list, 5);
    const struct mcase rep[] = {{"aa", 1, 1}, {"a", 0, 1}, {"aaaa", 1, 1}, {"aaaaa", 0, 0}, {"aab", 0, 0}};
    check_matches("root ::= \"a\"{2,4}", rep, 5);
    const struct mcase rep2[] = {{"ab", 1, 1}, {"abab", 1, 1}, {"", 0, 1}, {"aba", 0, 1}};
    check_matches("root ::= (\"a\" \"b\"){1,}", rep2, 4);
    const struct mcase neg[] = {{"\"hi\"", 1, 1}, {"\"h\"i\"", 0, 0}, {"\"é\xe2\x82", 0, 1}, {"\"\xe2\x82\xac\"", 1, 1},
                                {"\"\xc3", 0, 1}, {"\"\xc3(", 0, 0}, {"\"\\\"", 1, 1}};
    check_matches("root ::= \"\\\"\" [^\"]* \"\\\"\"", neg, 7);
    const struct mcase utf[] = {{"héllo", 1, 1}, {"h\xc3", 0, 1}, {"h\xc3\xa8", 0, 0}, {"\xf0\x9f\x98\x80", 1, 1},
                                {"\xf0\x9f", 0, 1}, {"\xf0\x9f\x98\x81", 0, 0}};
    check_matches("root ::= \"héllo\" | \"\\U0001F600\"", utf, 6);
    const struct mcase dot[] = {{"x", 1, 1}, {"\xe4\xb8\xad", 1, 1}, {"\n", 1, 1}, {"xy", 0, 0}, {"\xc0\x80", 0, 0}};
    check_matches("root ::= .", dot, 5);
    const struct mcase cls[] = {{"a-", 1, 1}, {"]", 1, 1}, {"\t", 1, 1}, {"b", 0, 0}};
    check_matches("root ::= [a\\-\\]\\x09]+", cls, 4);
    const struct mcase nest[] = {{"(())", 1, 1}, {"(()", 0, 1}, {"())", 0, 0}, {"", 1, 1}};
    check_matches("root ::= (\"(\" root \")\")*", nest, 4);
    const struct mcase opt[] = {{"", 1, 1}, {"ab", 1, 1}, {"a", 1, 1}, {"b", 0, 0}, {"aab", 0, 0}};
    check_matches("root ::= (\"a\" \"b\"?)?", opt, 5);
    const struct mcase multi[] = {{"x=1", 1, 1}, {"x=", 0, 1}, {"xx=1", 0, 0}};
    check_matches("root ::=\n  \"x\"\n  \"=\"\n  val\nval ::= \"1\"\n    | \"2\"", multi, 3);
}

/* ---- the mask against brute force ----------------------------------------- */

static llmk_tokenizer *load_tok(const char *path) {
    llmk_gguf *g = NULL;
    if (llmk_gguf_open(path, &g) != LLMK_OK) return NULL;
    llmk_tokenizer *t = NULL;
    if (llmk_tokenizer_load(g, &t) != LLMK_OK) t = NULL;
    llmk_gguf_close(g);
    return t;
}

/* Check the mask at the current position (text[0..n) generated so far). */
static void check_mask(llmk_grammar *g, const llmk_tokenizer *t, llmk_grammar_state *s, const char *text, size_t n) {
    size_t nv = llmk_tokenizer_n_vocab(t);
    float *logits = malloc(nv * sizeof *logits);
    char *buf = malloc(n + 4096);
    if (!logits || !buf) return;
    for (size_t i = 0; i < nv; i++) logits[i] = 0;
    int st = llmk_grammar_state_mask(s, logits, nv);
    CHECK(st == LLMK_OK);
    memcpy(buf, text, n);
    bool whole_now, pre_now;
    llmk_grammar_match(g, text, n, &whole_now, &pre_now);
    size_t bad = 0;
    for (size_t id = 0; id < nv; id++) {
        bool want;
        size_t len = 0;
        if (llmk_tokenizer_is_eog(t, (int32_t)id)) {
            want = whole_now;
        } else if (llmk_tokenizer_token_bytes(t, (int32_t)id, buf + n, 4096, &len) != LLMK_OK || !len) {
            want = false;
        } else {
            bool whole, pre;
            llmk_grammar_match(g, buf, n + len, &whole, &pre);
            want = pre;
        }
        bool got = logits[id] == 0;
        if (got != want && bad++ < 5)
            fprintf(stderr, "token %zu ('%.*s') after '%.*s': mask %d, reference %d\n", id, (int)len, buf + n, (int)n,
                    text, got, want);
        CHECK(got == want || bad > 5);
    }
    CHECK_EQ_INT(bad, 0);
    free(logits);
    free(buf);
}

/* Walk steps tokens: at each, check the mask, then take an allowed token
 * chosen by a fixed pseudo-random rule (preferring non-EOG ones). */
static void walk_grammar(const char *grammar, const llmk_tokenizer *t, int steps, uint64_t seed) {
    llmk_grammar *g = parse(grammar);
    if (!g) return;
    llmk_grammar_state *s = NULL;
    CHECK_EQ_INT(llmk_grammar_state_init(g, t, &s), LLMK_OK);
    if (!s) return;
    size_t nv = llmk_tokenizer_n_vocab(t);
    char text[4096];
    size_t n = 0;
    for (int k = 0; k < steps && !llmk_grammar_state_done(s); k++) {
        check_mask(g, t, s, text, n);
        int32_t pick = -1, count = 0;
        for (size_t id = 0; id < nv; id++)
            if (llmk_grammar_state_allows(s, (int32_t)id) && !llmk_tokenizer_is_eog(t, (int32_t)id))
                if (llmk_rng_u64(seed, (uint64_t)(k * 1000003 + (int64_t)id)) % (uint64_t)(++count) == 0) pick = (int32_t)id;
        if (pick < 0) break;
        size_t len = 0;
        llmk_tokenizer_token_bytes(t, pick, text + n, sizeof text - n, &len);
        if (n + len + 64 > sizeof text) break;
        n += len;
        CHECK_EQ_INT(llmk_grammar_state_accept(s, pick), LLMK_OK);
        /* a clone and a fresh replay agree with the state */
        llmk_grammar_state *c = NULL;
        CHECK_EQ_INT(llmk_grammar_state_clone(s, &c), LLMK_OK);
        for (size_t id = 0; c && id < nv; id += 97) CHECK(llmk_grammar_state_allows(c, (int32_t)id) == llmk_grammar_state_allows(s, (int32_t)id));
        llmk_grammar_state_free(c);
    }
    check_mask(g, t, s, text, n);
    /* a refused token leaves the state as it was */
    for (size_t id = 0; id < nv; id++)
        if (!llmk_grammar_state_allows(s, (int32_t)id)) {
            CHECK_EQ_INT(llmk_grammar_state_accept(s, (int32_t)id), LLMK_BAD_GRAMMAR);
            break;
        }
    llmk_grammar_state_reset(s);
    check_mask(g, t, s, "", 0);
    llmk_grammar_state_free(s);
    llmk_grammar_free(g);
}

static const char *const GRAMMARS[] = {
    "root ::= (\"yes\" | \"no\") \".\"",
    "root ::= \"[\" num (\", \" num)* \"]\"\nnum ::= \"-\"? [0-9]+",
    ("root ::= obj\nobj ::= \"{\" ws (pair (\",\" ws pair)*)? \"}\"\npair ::= str \":\" ws val\n"
     "val ::= str | [0-9]+ | obj | \"[\" (val (\", \" val)*)? \"]\"\nstr ::= \"\\\"\" [^\"\\\\]* \"\\\"\"\nws ::= \" \"?"),
    "root ::= [а-яё ]+ \"!\" | \"日本\" [^a-z]{1,3}",
    "root ::= .{3,6}",
};

static void test_mask_fixture(void) {
    llmk_tokenizer *t = load_tok("tests/fixtures/tokenizer/tiny_qwen2.gguf");
    CHECK(t != NULL);
    if (!t) return;
    for (size_t i = 0; i < sizeof GRAMMARS / sizeof GRAMMARS[0]; i++) walk_grammar(GRAMMARS[i], t, 12, 1 + i);
    llmk_tokenizer_free(t);
    t = load_tok("tests/fixtures/tokenizer/tiny_spm.gguf");
    CHECK(t != NULL);
    if (!t) return;
    for (size_t i = 0; i < sizeof GRAMMARS / sizeof GRAMMARS[0]; i++) walk_grammar(GRAMMARS[i], t, 8, 7 + i);
    llmk_tokenizer_free(t);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_mask_model(void) {
    const char *path = check_default_model("test_grammar", 0);
    llmk_tokenizer *t = load_tok(path);
    if (!t) {
        fprintf(stderr, "test_grammar: %s not found, default-model checks skipped\n", path);
        return;
    }
    for (size_t i = 0; i < sizeof GRAMMARS / sizeof GRAMMARS[0]; i++) walk_grammar(GRAMMARS[i], t, 3, 11 + i);
    /* A pathological grammar: many overlapping alternatives and ambiguity.
     * A step stays bounded (the stack set is capped), far from vocab^2. */
    llmk_grammar *g = parse("root ::= (a | b | c)*\na ::= [a-z]+ \" \"?\nb ::= [a-m]* [n-z]\nc ::= ([a-z] [a-z]?){1,20}");
    llmk_grammar_state *s = NULL;
    if (g && llmk_grammar_state_init(g, t, &s) == LLMK_OK) {
        size_t nv = llmk_tokenizer_n_vocab(t);
        float *l = calloc(nv, sizeof *l);
        double t0 = now_s();
        int st = LLMK_OK;
        for (int k = 0; k < 3 && st == LLMK_OK; k++) {
            memset(l, 0, nv * sizeof *l);
            st = llmk_grammar_state_mask(s, l, nv);
            int32_t pick = -1;
            for (size_t id = 0; id < nv && st == LLMK_OK; id++)
                if (l[id] == 0 && !llmk_tokenizer_is_eog(t, (int32_t)id)) pick = (int32_t)id;
            if (st == LLMK_OK && pick >= 0) st = llmk_grammar_state_accept(s, pick);
        }
        double dt = now_s() - t0;
        fprintf(stderr, "test_grammar: pathological grammar, 3 steps in %.3f s (status %s)\n", dt, llmk_status_name(st));
        CHECK(st == LLMK_OK || st == LLMK_BAD_GRAMMAR); /* refusing as too ambiguous is allowed */
        CHECK(dt < 30.0);
        free(l);
    }
    llmk_grammar_state_free(s);
    llmk_grammar_free(g);
    llmk_tokenizer_free(t);
}

/* Sampler integration: a greedy sampler under a grammar only ever picks
 * tokens the grammar allows, whatever the logits say. */
static void test_sampler(void) {
    llmk_tokenizer *t = load_tok("tests/fixtures/tokenizer/tiny_qwen2.gguf");
    llmk_grammar *g = parse("root ::= (\"yes\" | \"no\") \".\"");
    llmk_grammar_state *s = NULL;
    if (!t || !g || llmk_grammar_state_init(g, t, &s) != LLMK_OK) {
        CHECK(!"setup");
        return;
    }
    size_t nv = llmk_tokenizer_n_vocab(t);
    for (int temp = 0; temp < 2; temp++) {
        llmk_sampler_params p;
        llmk_sampler_params_default(&p);
        p.temperature = temp ? 1.0 : 0.0;
        p.seed = 5;
        llmk_sampler *smp = NULL;
        CHECK_EQ_INT(llmk_sampler_init(&p, nv, &smp), LLMK_OK);
        CHECK_EQ_INT(llmk_sampler_set_grammar(smp, s), LLMK_OK);
        CHECK(llmk_sampler_grammar(smp) == s);
        llmk_sampler_reset(smp);
        float *l = malloc(nv * sizeof *l);
        char out[256];
        size_t n = 0;
        for (int k = 0; k < 20 && !llmk_grammar_state_done(s); k++) {
            for (size_t i = 0; i < nv; i++) l[i] = (float)((i * 2654435761u + (unsigned)k * 97u) % 1000) / 100.0f;
            int32_t id;
            CHECK_EQ_INT(llmk_sampler_sample(smp, l, nv, &id), LLMK_OK);
            size_t len = 0;
            llmk_tokenizer_token_bytes(t, id, out + n, sizeof out - n, &len);
            n += len;
        }
        bool whole, pre;
        llmk_grammar_match(g, out, n, &whole, &pre);
        CHECK(whole);
        CHECK(llmk_grammar_state_done(s));
        free(l);
        llmk_sampler_free(smp);
    }
    /* greedy under the grammar: the one-pass choice (default chain) and the
     * full chain (an active top_k that keeps everything) pick the same ids */
    llmk_sampler_params pf, pc;
    llmk_sampler_params_default(&pf);
    pf.temperature = 0;
    pc = pf;
    CHECK_EQ_INT(llmk_sampler_parse_order("top_k;temperature", &pc), LLMK_OK);
    pc.top_k = (int32_t)nv;
    llmk_grammar_state *s2 = NULL;
    llmk_sampler *fa = NULL, *fb = NULL;
    CHECK_EQ_INT(llmk_grammar_state_init(g, t, &s2), LLMK_OK);
    CHECK_EQ_INT(llmk_sampler_init(&pf, nv, &fa), LLMK_OK);
    CHECK_EQ_INT(llmk_sampler_init(&pc, nv, &fb), LLMK_OK);
    float *l = malloc(nv * sizeof *l);
    if (fa && fb && s2 && l) {
        llmk_grammar_state_reset(s);
        CHECK_EQ_INT(llmk_sampler_set_grammar(fa, s), LLMK_OK);
        CHECK_EQ_INT(llmk_sampler_set_grammar(fb, s2), LLMK_OK);
        for (int k = 0; k < 3; k++) {
            for (size_t i = 0; i < nv; i++) l[i] = (float)((i * 40503u + (unsigned)k * 31u) % 50) / 10.0f;
            int32_t ia = -1, ib = -2;
            CHECK_EQ_INT(llmk_sampler_sample(fa, l, nv, &ia), LLMK_OK);
            CHECK_EQ_INT(llmk_sampler_sample(fb, l, nv, &ib), LLMK_OK);
            CHECK_EQ_INT(ia, ib);
        }
    }
    free(l);
    llmk_sampler_free(fa), llmk_sampler_free(fb);
    llmk_grammar_state_free(s2);
    llmk_grammar_state_free(s);
    llmk_grammar_free(g);
    llmk_tokenizer_free(t);
}

int main(void) {
    test_errors();
    test_match();
    test_sampler();
    test_mask_fixture();
    test_mask_model();
    return check_summary("test_grammar");
}
