#include "bench_phases.h"

#include <string.h>

/* strip "blk.N." so phases of all layers add up under one name */
static const char *phase_kind(const char *name) {
    if (strncmp(name, "blk.", 4) == 0) {
        const char *d = strchr(name + 4, '.');
        if (d) return d + 1;
    }
    return name;
}

void bench_phase_sums_read(const llmk_context *c, struct bench_phase_sums *s) {
    memset(s, 0, sizeof *s);
    for (int32_t i = 0; i < llmk_context_n_phases(c); i++) {
        llmk_phase_info ph;
        if (llmk_context_phase(c, i, &ph) != LLMK_OK) continue; /* i is in range: cannot fail */
        const char *k = phase_kind(ph.name);
        int j = 0;
        while (j < s->n && strcmp(s->kind[j], k) != 0) j++;
        if (j == s->n && s->n < BENCH_PHASE_KINDS) s->kind[s->n++] = k;
        if (j < BENCH_PHASE_KINDS) s->ns[j] += ph.ns;
    }
}

void bench_phase_sums_print(FILE *o, const struct bench_phase_sums *s, long n, const char *unit) {
    double total = 0;
    for (int j = 0; j < s->n; j++) total += s->ns[j];
    fprintf(o, "  %-14s %12s %7s\n", "phase", unit, "share");
    for (int j = 0; j < s->n; j++)
        if (s->ns[j] > 0)
            fprintf(o, "  %-14s %12.1f %6.1f%%\n", s->kind[j], s->ns[j] / 1e3 / (double)n, 100.0 * s->ns[j] / total);
}
