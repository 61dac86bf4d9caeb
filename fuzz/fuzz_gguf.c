/* libFuzzer target for the GGUF reader: parse the input; when it opens, walk
 * every metadata value and touch the first and last byte of every tensor, so
 * a validation gap shows up as an ASan report rather than passing silently.
 * Built by scripts/fuzz.sh. With -DLLMK_FUZZ_REPLAY it gets a main() that
 * runs the target over files given on the command line (no libFuzzer needed). */
#include "llmk.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    llmk_gguf *g = NULL;
    if (llmk_gguf_open_memory(data, size, &g) != LLMK_OK) return 0;
    for (size_t i = 0; i < llmk_gguf_n_kv(g); i++) {
        const char *key = llmk_gguf_kv_key(g, i);
        uint32_t u32;
        uint64_t u64, n;
        int32_t i32;
        double d;
        float f;
        bool b;
        const char *s;
        size_t len;
        (void)llmk_gguf_get_u32(g, key, &u32);
        (void)llmk_gguf_get_i32(g, key, &i32);
        (void)llmk_gguf_get_u64(g, key, &u64);
        (void)llmk_gguf_get_f32(g, key, &f);
        (void)llmk_gguf_get_f64(g, key, &d);
        (void)llmk_gguf_get_bool(g, key, &b);
        (void)llmk_gguf_get_str(g, key, &s, &len);
        uint32_t et;
        if (llmk_gguf_get_arr(g, key, &et, &n) == LLMK_OK && n) {
            (void)llmk_gguf_arr_num(g, key, 0, &d);
            (void)llmk_gguf_arr_num(g, key, n - 1, &d);
            (void)llmk_gguf_arr_str(g, key, 0, &s, &len);
            (void)llmk_gguf_arr_str(g, key, n - 1, &s, &len);
        }
        if (llmk_gguf_find_key(g, key) != (int64_t)i) abort(); /* keys are unique */
    }
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < llmk_gguf_n_tensors(g); i++) {
        const llmk_tensor_info *t = llmk_gguf_tensor(g, i);
        if (llmk_gguf_find_tensor(g, t->name) != t) abort();
        const uint8_t *p = t->data;
        if (t->n_bytes) sink ^= p[0] ^ p[t->n_bytes - 1];
    }
    (void)sink;
    llmk_gguf_close(g);
    return 0;
}

#ifdef LLMK_FUZZ_REPLAY
int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            perror(argv[i]);
            return 1;
        }
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
        size_t got = n > 0 ? fread(buf, 1, (size_t)n, f) : 0;
        fclose(f);
        LLVMFuzzerTestOneInput(buf, got);
        free(buf);
    }
    printf("replayed %d inputs\n", argc - 1);
    return 0;
}
#endif
