/* libFuzzer target for the Hugging Face folder translation (src/hf.c):
 * config.json, tokenizer.json and tokenizer_config.json from the input are
 * written into a scratch folder (no weights: a tokenizer-only view) and
 * opened with llmk_hf_open; when that succeeds, the tokenizer is loaded
 * from the view and encodes a text. Input layout (fuzz_split twice):
 * u32 LE length + config.json, then u32 LE length + tokenizer.json, then
 * tokenizer_config.json (the rest). Built by scripts/fuzz.sh; replayed by
 * tests/test_fuzz_corpus.c (fuzz/corpus/hf, seeds from fuzz/make_seeds.py). */
#include "fuzz_common.h"
#include "llmk.h"

#include <unistd.h>

static bool fhf_put(const char *dir, const char *name, const void *p, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static char fhf_dir[64];

static void fhf_cleanup(void) {
    static const char *const names[] = {"config.json", "tokenizer.json", "tokenizer_config.json"};
    char path[512];
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", fhf_dir, names[i]);
        unlink(path);
    }
    rmdir(fhf_dir);
}

static int fuzz_hf_one(const uint8_t *data, size_t size) {
    const char *dir = fhf_dir;
    if (!fhf_dir[0]) { /* one scratch folder per process, reused, removed at exit */
        snprintf(fhf_dir, sizeof fhf_dir, "/tmp/llmk_fuzz_hf_XXXXXX");
        FUZZ_REQUIRE(mkdtemp(fhf_dir) != NULL);
        atexit(fhf_cleanup);
    }
    uint8_t *cfg = NULL, *tok = NULL;
    size_t cfg_n, tok_n, tc_n, rest_n;
    const uint8_t *rest, *tc;
    int went = 0;
    if (!fuzz_split(data, size, &cfg, &cfg_n, &rest, &rest_n)) goto done;
    if (!fuzz_split(rest, rest_n, &tok, &tok_n, &tc, &tc_n)) goto done;
    FUZZ_REQUIRE(fhf_put(dir, "config.json", cfg, cfg_n) && fhf_put(dir, "tokenizer.json", tok, tok_n) &&
                 fhf_put(dir, "tokenizer_config.json", tc, tc_n));
    llmk_gguf *g = NULL;
    int rc = llmk_hf_open(dir, &g);
    if (rc != LLMK_OK) {
        FUZZ_REQUIRE(g == NULL && *llmk_last_error());
        goto done;
    }
    llmk_tokenizer *t = NULL;
    if (llmk_tokenizer_load(g, &t) == LLMK_OK) {
        int32_t ids[16];
        size_t n = 0;
        rc = llmk_tokenize(t, "Hi there 123", 12, true, false, ids, 16, &n);
        FUZZ_REQUIRE(rc == LLMK_OK || rc == LLMK_BUFFER_TOO_SMALL);
        llmk_tokenizer_free(t);
        went = 1;
    }
    llmk_gguf_close(g);
done:
    free(cfg);
    free(tok);
    return went;
}

#ifndef LLMK_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_hf_one(data, size);
    return 0;
}
#ifdef LLMK_FUZZ_REPLAY
int main(int argc, char **argv) { return fuzz_replay_main(argc, argv, fuzz_hf_one); }
#endif
#endif
