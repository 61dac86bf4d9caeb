/* libFuzzer target for the safetensors reader (src/safetensors.c): parse the
 * input as one .safetensors file; when it opens, check what the reader
 * promises (tensors in data order without overlap, each inside the data
 * section with exactly its shape's bytes, every name found again) and touch
 * the first and last byte of every tensor, so a validation gap is an ASan
 * report rather than a silent pass. Built by scripts/fuzz.sh; replayed by
 * tests/test_fuzz_corpus.c (fuzz/corpus/safetensors, seeds from
 * fuzz/make_seeds.py). */
#include "fuzz_common.h"
#include "llmk.h"
#include "safetensors.h"

static int fuzz_safetensors_one(const uint8_t *data, size_t size) {
    llmk_safetensors *s = NULL;
    int rc = llmk_safetensors_parse(data, size, &s);
    if (rc != LLMK_OK) {
        FUZZ_REQUIRE(s == NULL && *llmk_last_error());
        return 0;
    }
    volatile uint8_t sink = 0;
    uint64_t prev_end = 0;
    for (size_t i = 0; i < llmk_safetensors_n_tensors(s); i++) {
        const llmk_st_tensor *t = llmk_safetensors_tensor(s, i);
        FUZZ_REQUIRE(llmk_safetensors_find(s, t->name) == t);
        FUZZ_REQUIRE(t->begin >= prev_end && t->end >= t->begin);
        FUZZ_REQUIRE((const uint8_t *)t->data >= data && (const uint8_t *)t->data + (t->end - t->begin) <= data + size);
        uint64_t es = t->type == LLMK_TYPE_F32 ? 4 : 2;
        FUZZ_REQUIRE(t->n_elements * es == t->end - t->begin);
        const uint8_t *p = t->data;
        if (t->end > t->begin) sink ^= p[0] ^ p[t->end - t->begin - 1];
        prev_end = t->end;
    }
    (void)llmk_safetensors_meta(s, "format");
    (void)sink;
    llmk_safetensors_close(s);
    return 1;
}

#ifndef LLMK_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_safetensors_one(data, size);
    return 0;
}
#ifdef LLMK_FUZZ_REPLAY
int main(int argc, char **argv) { return fuzz_replay_main(argc, argv, fuzz_safetensors_one); }
#endif
#endif
