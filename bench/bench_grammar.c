/* The grammar mask's own cost (src/grammar.c), apart from the model: a
 * grammar state over a GGUF file's vocabulary walks `steps` tokens, each the
 * allowed non-end token with the highest of a fixed pseudo-random logit row
 * (an adversarial walk: it visits many new states), restarting the grammar
 * when it is complete. Prints the vocabulary trie's build time and the mask
 * + accept time per token. Usage: bench_grammar MODEL.gguf GRAMMAR [STEPS]. */
#include "llmk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_grammar MODEL.gguf GRAMMAR [STEPS]\n");
        return 2;
    }
    int steps = argc > 3 ? atoi(argv[3]) : 128;
    llmk_gguf *f = NULL;
    llmk_tokenizer *t = NULL;
    llmk_grammar *g = NULL;
    llmk_grammar_state *s = NULL;
    if (llmk_gguf_open(argv[1], &f) != LLMK_OK || llmk_tokenizer_load(f, &t) != LLMK_OK ||
        llmk_grammar_parse(argv[2], strlen(argv[2]), &g) != LLMK_OK) {
        fprintf(stderr, "bench_grammar: %s\n", llmk_last_error());
        return 1;
    }
    double t0 = now_s();
    if (llmk_grammar_state_init(g, t, &s) != LLMK_OK) {
        fprintf(stderr, "bench_grammar: %s\n", llmk_last_error());
        return 1;
    }
    printf("vocabulary trie and first state: %.1f ms\n", (now_s() - t0) * 1e3);
    size_t nv = llmk_tokenizer_n_vocab(t);
    float *l = malloc(nv * sizeof *l);
    double total = 0;
    int k = 0;
    for (; l && k < steps; k++) {
        for (size_t i = 0; i < nv; i++) l[i] = (float)((i * 2654435761u + (size_t)k * 977u) % 1000);
        double a = now_s();
        if (llmk_grammar_state_mask(s, l, nv) != LLMK_OK) break;
        int32_t best = -1;
        for (size_t i = 0; i < nv; i++)
            if (l[i] > -1e30f && !llmk_tokenizer_is_eog(t, (int32_t)i) && (best < 0 || l[i] > l[best])) best = (int32_t)i;
        if (best < 0 || llmk_grammar_state_accept(s, best) != LLMK_OK) break;
        total += now_s() - a;
        if (llmk_grammar_state_done(s)) llmk_grammar_state_reset(s);
    }
    printf("%d tokens: mask + accept %.1f ms in all, %.3f ms per token%s\n", k, total * 1e3,
           k ? total * 1e3 / k : 0.0, k < steps ? " (stopped early: no token allowed)" : "");
    free(l);
    llmk_grammar_state_free(s);
    llmk_grammar_free(g);
    llmk_tokenizer_free(t);
    llmk_gguf_close(f);
    return 0;
}
