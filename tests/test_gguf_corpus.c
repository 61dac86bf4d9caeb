/* Replays the GGUF fuzz corpus (fuzz/corpus/gguf, run from the repo root)
 * through the reader: files named valid_* must open, bad_* must be refused
 * with a message, anything else (inputs the fuzzer found) must just not
 * crash. Each file is read into an exactly-sized buffer so ASan sees any
 * read past its end. */
#include "check.h"
#include "llmk.h"

#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CORPUS "fuzz/corpus/gguf"

static void replay(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", CORPUS, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        CHECK(!"cannot open corpus file");
        return;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    size_t got = n > 0 ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    CHECK(got == (size_t)(n > 0 ? n : 0));
    llmk_gguf *g = NULL;
    int st = llmk_gguf_open_memory(n > 0 ? buf : NULL, got, &g);
    if (strncmp(name, "valid_", 6) == 0) {
        if (st != LLMK_OK) fprintf(stderr, "%s: %s: %s\n", name, llmk_status_name(st), llmk_last_error());
        CHECK_STATUS(st, LLMK_OK);
    } else if (strncmp(name, "bad_", 4) == 0) {
        CHECK(st != LLMK_OK && g == NULL && *llmk_last_error());
    }
    if (st == LLMK_OK) {
        /* walk everything an accessor can reach */
        for (size_t i = 0; i < llmk_gguf_n_kv(g); i++) {
            const char *key = llmk_gguf_kv_key(g, i);
            uint32_t et;
            uint64_t cnt;
            if (llmk_gguf_get_arr(g, key, &et, &cnt) == LLMK_OK) {
                for (uint64_t k = 0; k < cnt && k < 64; k++) {
                    double d;
                    const char *s;
                    size_t len;
                    (void)llmk_gguf_arr_num(g, key, k, &d);
                    (void)llmk_gguf_arr_str(g, key, k, &s, &len);
                }
            }
        }
        volatile uint8_t sink = 0;
        for (size_t i = 0; i < llmk_gguf_n_tensors(g); i++) {
            const llmk_tensor_info *t = llmk_gguf_tensor(g, i);
            if (t->n_bytes) sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->n_bytes - 1];
        }
        (void)sink;
        llmk_gguf_close(g);
    }
    free(buf);
}

int main(void) {
    DIR *d = opendir(CORPUS);
    if (!d) {
        fprintf(stderr, "test_gguf_corpus: %s not found (run from the repo root)\n", CORPUS);
        return 1;
    }
    int files = 0, valid = 0, bad = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        files++;
        valid += strncmp(e->d_name, "valid_", 6) == 0;
        bad += strncmp(e->d_name, "bad_", 4) == 0;
        replay(e->d_name);
    }
    closedir(d);
    CHECK(valid >= 2 && bad >= 10);
    printf("test_gguf_corpus: %d files (%d valid, %d bad)\n", files, valid, bad);
    return check_summary("test_gguf_corpus");
}
