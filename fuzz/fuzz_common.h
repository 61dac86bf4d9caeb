/* Shared by the libFuzzer targets fuzz/fuzz_{tokenizer,model,chat}.c and by
 * tests/test_fuzz_corpus.c, which #includes those targets to replay their
 * corpora: everything here is static, and a target's own entry points
 * (LLVMFuzzerTestOneInput, the replay main) are left out when the includer
 * defines LLMK_FUZZ_NO_ENTRY. */
#ifndef LLMK_FUZZ_COMMON_H
#define LLMK_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A property the library promises did not hold: stop loudly, so libFuzzer
 * keeps the input as a crash and the replay test fails. */
#define FUZZ_REQUIRE(cond)                                                                \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "fuzz: property failed at %s:%d: %s\n", __FILE__, __LINE__,  \
                    #cond);                                                               \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

/* Two-part inputs: a 4-byte little-endian length L, then L bytes of the first
 * part, then the second part (the rest). An L past the end is clamped, so
 * every byte string is a valid input. The first part is copied into its own
 * exactly-sized allocation (the second already ends where the input ends) so
 * ASan sees a read past the end of either. *first is NULL when the input is
 * shorter than the prefix; otherwise the caller frees it. */
static inline bool fuzz_split(const uint8_t *data, size_t size, uint8_t **first, size_t *first_len,
                              const uint8_t **second, size_t *second_len) {
    *first = NULL;
    if (size < 4) return false;
    size_t len = (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 |
                 (size_t)data[3] << 24;
    if (len > size - 4) len = size - 4;
    *first = malloc(len ? len : 1);
    if (!*first) return false;
    if (len) memcpy(*first, data + 4, len);
    *first_len = len;
    *second = data + 4 + len;
    *second_len = size - 4 - len;
    return true;
}

/* Well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
static inline bool fuzz_valid_utf8(const char *text, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t need;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            need = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 3;
            lo = c == 0xE0 ? 0xA0 : 0x80;
            hi = c == 0xED ? 0x9F : 0xBF;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 4;
            lo = c == 0xF0 ? 0x90 : 0x80;
            hi = c == 0xF4 ? 0x8F : 0xBF;
        } else {
            return false;
        }
        if (n - i < need || s[i + 1] < lo || s[i + 1] > hi) return false;
        for (size_t k = 2; k < need; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return false;
        i += need;
    }
    return true;
}

/* A whole file in an exactly-sized allocation (*data NULL for an empty one). */
static inline bool fuzz_read_file(const char *path, uint8_t **data, size_t *size) {
    *data = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    bool ok = fseek(f, 0, SEEK_END) == 0;
    long n = ok ? ftell(f) : -1;
    ok = n >= 0 && fseek(f, 0, SEEK_SET) == 0;
    if (ok && n > 0) {
        *data = malloc((size_t)n);
        ok = *data && fread(*data, 1, (size_t)n, f) == (size_t)n;
        if (ok) *size = (size_t)n;
    }
    fclose(f);
    if (!ok) {
        free(*data);
        *data = NULL;
    }
    return ok;
}

/* The replay main of a target built with -DLLMK_FUZZ_REPLAY (no libFuzzer):
 * run `one` over every file named on the command line. */
static inline int fuzz_replay_main(int argc, char **argv, int (*one)(const uint8_t *, size_t)) {
    for (int i = 1; i < argc; i++) {
        uint8_t *buf;
        size_t n;
        if (!fuzz_read_file(argv[i], &buf, &n)) {
            perror(argv[i]);
            return 1;
        }
        one(buf, n);
        free(buf);
    }
    printf("replayed %d inputs\n", argc - 1);
    return 0;
}

#endif
