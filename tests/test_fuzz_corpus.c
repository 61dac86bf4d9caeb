/* Replays the tokenizer, model, chat, serve, safetensors, hf, grammar and json_schema fuzz
 * corpora (fuzz/corpus/<name>, run from the repo root) through
 * the very target functions libFuzzer runs (the target files are compiled in
 * below; the serve target's parser, app/serve_api.c, is linked in by the
 * Makefile's rule for this test), so every
 * input the fuzzer once kept, and every reproducer of a fixed bug, runs
 * again in the optimised and the ASan+UBSan builds. A target stops the
 * program on a broken property; here each file must also not crash, and
 * files named valid_* (the seeds written by fuzz/make_seeds.py) must go the
 * whole way: the vocabulary loads and the text encodes, the model loads, the
 * messages render, the request is accepted, the safetensors file parses,
 * the folder's tokenizer loads; for the serve, safetensors and hf corpora, files named bad_* must be refused
 * (each seeds one of the parser's checks). Each file is read into an
 * exactly-sized buffer. */
#define LLMK_FUZZ_NO_ENTRY
#include "../fuzz/fuzz_chat.c"
#include "../fuzz/fuzz_grammar.c"
#include "../fuzz/fuzz_json_schema.c"
#include "../fuzz/fuzz_model.c"
#include "../fuzz/fuzz_safetensors.c"
#include "../fuzz/fuzz_hf.c"
#include "../fuzz/fuzz_serve.c"
#include "../fuzz/fuzz_tokenizer.c"

#include "check.h"

#include <dirent.h>

static const struct {
    const char *dir;
    int (*one)(const uint8_t *, size_t);
    int min_valid; /* seeds make_seeds.py writes; fewer means the corpus lost some */
    bool bad_refused; /* bad_* files must not go through */
} corpora[] = {
    {"fuzz/corpus/tokenizer", fuzz_tokenizer_one, 8, false},
    {"fuzz/corpus/model", fuzz_model_one, 3, false},
    {"fuzz/corpus/chat", fuzz_chat_one, 8, false},
    {"fuzz/corpus/serve", fuzz_serve_one, 10, true},
    {"fuzz/corpus/safetensors", fuzz_safetensors_one, 3, true},
    {"fuzz/corpus/hf", fuzz_hf_one, 3, true},
    {"fuzz/corpus/grammar", fuzz_grammar_one, 8, true},
    {"fuzz/corpus/json_schema", fuzz_json_schema_one, 10, true},
};

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void replay(const char *dir, int (*one)(const uint8_t *, size_t), int min_valid, bool bad_refused) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "test_fuzz_corpus: %s not found (run from the repo root)\n", dir);
        CHECK(!"corpus directory missing");
        return;
    }
    /* Sorted, so a failure names the same file on every run. */
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) break;
            names = nn;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_names);
    int valid = 0;
    for (size_t i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        uint8_t *buf;
        size_t len;
        bool read_ok = fuzz_read_file(path, &buf, &len);
        CHECK(read_ok);
        if (read_ok) {
            int went_through = one(buf, len);
            if (strncmp(names[i], "valid_", 6) == 0) {
                valid++;
                if (!went_through)
                    fprintf(stderr, "%s: a seed that must go all the way through its target "
                            "stopped early\n", path);
                CHECK(went_through);
            }
            if (bad_refused && strncmp(names[i], "bad_", 4) == 0) {
                if (went_through) fprintf(stderr, "%s: a seed that must be refused went through\n", path);
                CHECK(!went_through);
            }
            free(buf);
        }
        free(names[i]);
    }
    free(names);
    CHECK(valid >= min_valid);
    printf("test_fuzz_corpus: %s: %zu files (%d valid_*)\n", dir, n, valid);
}

int main(void) {
    for (size_t i = 0; i < sizeof corpora / sizeof corpora[0]; i++)
        replay(corpora[i].dir, corpora[i].one, corpora[i].min_valid, corpora[i].bad_refused);
    return check_summary("test_fuzz_corpus");
}
