/* libFuzzer target for the JSON Schema -> GBNF converter: the input is
 * schema text for llmk_json_schema_to_gbnf.
 *
 * Checked beyond "no crash, leak or UB": a status comes with a message that
 * names the schema ("JSON Schema ...") and no output, success with a
 * NUL-terminated grammar of the reported length; the conversion is a
 * function of the input (run twice, same bytes); and every grammar it
 * produces is one the GBNF parser accepts, so a schema never turns into a
 * grammar that fails later.
 *
 * Built by scripts/fuzz.sh; replayed by tests/test_fuzz_corpus.c (valid_*
 * seeds must convert, bad_* must be refused). With -DLLMK_FUZZ_REPLAY it gets
 * a main() that runs the target over files. */
#include "fuzz_common.h"
#include "llmk.h"

/* 1 when the schema converted and its grammar parsed. */
static int fuzz_json_schema_one(const uint8_t *data, size_t size) {
    char *text = malloc(size ? size : 1); /* exactly sized: ASan sees a read past the end */
    if (!text) return 0;
    if (size) memcpy(text, data, size);
    char *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    int rc = llmk_json_schema_to_gbnf(text, size, &a, &la);
    int went = 0;
    if (rc != LLMK_OK) {
        FUZZ_REQUIRE(a == NULL && la == 0);
        FUZZ_REQUIRE(rc == LLMK_BAD_REQUEST || rc == LLMK_UNSUPPORTED || rc == LLMK_OUT_OF_MEMORY);
        FUZZ_REQUIRE(!strncmp(llmk_last_error(), "JSON Schema", 11));
    } else {
        FUZZ_REQUIRE(a != NULL && strlen(a) == la && !strncmp(a, "root ::= ", 9));
        FUZZ_REQUIRE(llmk_json_schema_to_gbnf(text, size, &b, &lb) == LLMK_OK);
        FUZZ_REQUIRE(lb == la && !memcmp(a, b, la));
        llmk_grammar *g = NULL;
        int pr = llmk_grammar_parse(a, la, &g);
        if (pr != LLMK_OK) fprintf(stderr, "fuzz_json_schema: grammar refused: %s\n", llmk_last_error());
        FUZZ_REQUIRE(pr == LLMK_OK || pr == LLMK_OUT_OF_MEMORY);
        went = pr == LLMK_OK;
        llmk_grammar_free(g);
    }
    free(a);
    free(b);
    free(text);
    return went;
}

#ifndef LLMK_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_json_schema_one(data, size);
    return 0;
}
#ifdef LLMK_FUZZ_REPLAY
int main(int argc, char **argv) { return fuzz_replay_main(argc, argv, fuzz_json_schema_one); }
#endif
#endif
