/* libFuzzer target for GBNF grammars: a fuzzed grammar text through
 * llmk_grammar_parse, then, when it parses, llmk_grammar_match on a fuzzed
 * string and on the string's prefixes.
 *
 * Input: the grammar text, then (after the first NUL byte, if any) the
 * string to match.
 *
 * Checked beyond "no crash, leak, hang or UB": a refusal is
 * LLMK_BAD_GRAMMAR (or a limit) with a message naming the line and column;
 * a parsed grammar answers every match with LLMK_OK or a limit status; a
 * complete match is also a prefix match, and every prefix of a viable
 * string is viable.
 *
 * Built by scripts/fuzz.sh; replayed by tests/test_fuzz_corpus.c. With
 * -DLLMK_FUZZ_REPLAY it gets a main() that runs the target over files. */
#include "fuzz_common.h"
#include "llmk.h"

int fuzz_grammar_one(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t glen = nul ? (size_t)(nul - data) : size;
    const char *s = nul ? (const char *)nul + 1 : "";
    size_t slen = nul ? size - glen - 1 : 0;
    llmk_grammar *g = NULL;
    int rc = llmk_grammar_parse((const char *)data, glen, &g);
    FUZZ_REQUIRE((rc == LLMK_OK) == (g != NULL));
    if (rc != LLMK_OK) {
        FUZZ_REQUIRE(rc == LLMK_BAD_GRAMMAR || rc == LLMK_OUT_OF_MEMORY);
        if (rc == LLMK_BAD_GRAMMAR) FUZZ_REQUIRE(strstr(llmk_last_error(), "line ") != NULL);
        return 0;
    }
    bool whole = false, pre = false, last_pre = true;
    int went = 1;
    for (size_t n = 0; n <= slen; n++) {
        bool w, p;
        int m = llmk_grammar_match(g, s, n, &w, &p);
        if (m != LLMK_OK) {
            FUZZ_REQUIRE(m == LLMK_BAD_GRAMMAR || m == LLMK_OUT_OF_MEMORY);
            went = 0;
            break;
        }
        FUZZ_REQUIRE(!w || p);
        FUZZ_REQUIRE(last_pre || !p); /* viable strings have viable prefixes */
        last_pre = p;
        whole = w, pre = p;
        if (n > 64) n += n / 8; /* long strings: sample the prefixes */
    }
    (void)pre;
    llmk_grammar_free(g);
    return went && (slen == 0 || whole); /* seeds named valid_* carry a string their grammar accepts */
}

#ifndef LLMK_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_grammar_one(data, size);
    return 0;
}
#ifdef LLMK_FUZZ_REPLAY
int main(int argc, char **argv) { return fuzz_replay_main(argc, argv, fuzz_grammar_one); }
#endif
#endif
