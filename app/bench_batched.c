/* llmk bench -B: llama-batched-bench's measurement on llmk's multi-sequence
 * context. For each B in the list, B sequences each get a prompt of PP
 * tokens, all evaluated in one call (T_PP), then TG tokens each generated
 * together in one llmk_context_generate (T_TG, seed 003's single launch:
 * every sequence's token chosen by argmax inside the executor's step loop).
 * The figures are llama-batched-bench's: N_KV = B * (PP + TG), S_PP =
 * B * PP / T_PP, S_TG = B * TG / T_TG, S = N_KV / (T_PP + T_TG).
 *
 * Prompts are distinct pseudo-random tokens per sequence, configuration and
 * repetition: the KV pool's prefix cache never hits (llama.cpp has none), so
 * every prompt token is computed. */
#include "bench_batched.h"
#include "bench_phases.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int bench_parse_batch_list(const char *cmd, const char *flag, const char *value, void *ctx) {
    struct bench_batch_list *l = ctx;
    l->n = 0;
    const char *p = value;
    for (;;) {
        char *end;
        long b = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',') || b < 1 || b > BENCH_MAX_B)
            return cli_usage_error(cmd, "%s expects a comma-separated list of sequence counts in 1..%d, as 1,4,16; "
                                        "got '%s'", flag, BENCH_MAX_B, value), 0;
        for (int i = 0; i < l->n; i++)
            if (l->b[i] == b) return cli_usage_error(cmd, "%s lists %ld twice ('%s')", flag, b, value), 0;
        if (l->n == BENCH_MAX_LIST)
            return cli_usage_error(cmd, "%s lists more than %d counts", flag, BENCH_MAX_LIST), 0;
        l->b[l->n++] = (int32_t)b;
        if (!*end) return 1;
        p = end + 1;
    }
}

struct batched {
    const struct bench_batched_opts *o;
    llmk_context *c;
    llmk_batch_item *items; /* [max B * PP] */
    float *logits;          /* [max B][V] */
    llmk_gen_seq *gen;      /* [max B] */
    size_t V;
    uint64_t rng;
    long generated;         /* tokens the generation reported */
    bool profile;           /* the generations time their phases (--phases; not the warm-up) */
};

/* Distinct tokens for every prompt (xorshift64*): no prefix-cache hits. */
static int32_t next_token(struct batched *w) {
    w->rng ^= w->rng >> 12, w->rng ^= w->rng << 25, w->rng ^= w->rng >> 27;
    return (int32_t)((w->rng * 2685821657736338717ull >> 33) % w->V);
}

static int count_token(void *user, size_t entry, int32_t token) {
    (void)entry, (void)token;
    ((struct batched *)user)->generated++;
    return 0;
}

static int clear_seqs(struct batched *w, int32_t b) {
    int st = LLMK_OK;
    for (int32_t s = 0; s < b && st == LLMK_OK; s++) st = llmk_context_seq_truncate(w->c, s, 0);
    return st;
}

/* One measurement of B sequences: prefill then generation, from empty. */
static int measure(struct batched *w, int32_t b, long pp, long tg, double *t_pp, double *t_tg) {
    int st = clear_seqs(w, b);
    if (st != LLMK_OK) return st;
    size_t n = 0;
    for (int32_t s = 0; s < b; s++)
        for (long i = 0; i < pp; i++)
            w->items[n++] = (llmk_batch_item){.seq = s, .id = next_token(w), .logits = i + 1 == pp};
    double t0 = now_s();
    if ((st = llmk_context_eval(w->c, w->items, n, w->logits, (size_t)b * w->V)) != LLMK_OK) return st;
    *t_pp = now_s() - t0;
    *t_tg = 0;
    if (tg == 0) return LLMK_OK;
    for (int32_t s = 0; s < b; s++) /* the first generated token is fed; TG evaluations per sequence */
        w->gen[s] = (llmk_gen_seq){.seq = s, .id = next_token(w), .max_tokens = (int32_t)tg};
    w->generated = 0;
    if (w->profile && (st = llmk_context_set_profiling(w->c, true)) != LLMK_OK) return st;
    t0 = now_s();
    st = llmk_context_generate(w->c, w->gen, (size_t)b, count_token, w);
    *t_tg = now_s() - t0;
    if (w->profile) llmk_context_set_profiling(w->c, false); /* the prefills stay fused */
    if (st == LLMK_OK && w->generated != (long)b * tg)
        return cli_fail(LLMK_UNSUPPORTED, "bench: the generation reported %ld tokens, not %ld", w->generated,
                        (long)b * tg);
    return st;
}

static void print_header(const struct bench_batched_opts *o, int32_t n_kv_max, int nth) {
    if (o->json) return;
    printf("llmk bench -B: n_kv_max = %d, n_batch = %ld, kv_type = %s, n_threads = %d; prompts not shared\n\n",
           n_kv_max, o->n_batch > 0 ? o->n_batch : 512, llmk_type_name(o->kv_type), nth);
    printf("|%6s |%7s |%5s |%7s |%9s |%9s |%9s |%9s |%9s |%9s |\n", "PP", "TG", "B", "N_KV", "T_PP s", "S_PP t/s",
           "T_TG s", "S_TG t/s", "T s", "S t/s");
    printf("|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|\n");
}

static void print_row(const struct bench_batched_opts *o, int32_t n_kv_max, int nth, int32_t b, double t_pp,
                      double t_tg) {
    long pp = o->n_prompt, tg = o->n_gen, n_kv = (long)b * (pp + tg);
    double s_pp = t_pp > 0 ? (double)b * (double)pp / t_pp : 0, s_tg = t_tg > 0 ? (double)b * (double)tg / t_tg : 0;
    double t = t_pp + t_tg, s = t > 0 ? (double)n_kv / t : 0;
    if (o->json) {
        printf("{\"n_kv_max\": %d, \"n_batch\": %ld, \"kv_type\": \"%s\", \"is_pp_shared\": 0, \"n_threads\": %d, "
               "\"pp\": %ld, \"tg\": %ld, \"pl\": %d, \"n_kv\": %ld, \"t_pp\": %f, \"speed_pp\": %f, "
               "\"t_tg\": %f, \"speed_tg\": %f, \"t\": %f, \"speed\": %f}\n",
               n_kv_max, o->n_batch > 0 ? o->n_batch : 512, llmk_type_name(o->kv_type), nth, pp, tg, b, n_kv, t_pp,
               s_pp, t_tg, s_tg, t,
               s);
        return;
    }
    printf("|%6ld |%7ld |%5d |%7ld |%9.3f |%9.2f |%9.3f |%9.2f |%9.3f |%9.2f |\n", pp, tg, b, n_kv, t_pp, s_pp, t_tg,
           s_tg, t, s);
}

/* --phases: each count's decode steps by phase kind (timed in place, the
 * generation fused; the prefills are not in them). */
static void print_phase_tables(const struct bench_batched_opts *o, const struct bench_phase_sums *ph) {
    FILE *to = o->json ? stderr : stdout;
    long steps = o->n_gen * o->reps;
    for (int i = 0; i < o->list.n; i++) {
        fprintf(to, "\nphases (decode, B=%d, %ld steps, in place)\n", o->list.b[i], steps);
        bench_phase_sums_print(to, &ph[i], steps, "us/step");
    }
}

/* Every configuration, after one warm-up of the largest; each row the mean
 * time of o->reps runs. */
static int run_all(struct batched *w, int32_t n_kv_max) {
    const struct bench_batched_opts *o = w->o;
    int nth = llmk_context_n_threads(w->c);
    double t_pp, t_tg;
    int32_t bmax = 1;
    for (int i = 0; i < o->list.n; i++)
        if (o->list.b[i] > bmax) bmax = o->list.b[i];
    int st = measure(w, bmax, o->n_prompt, o->n_gen < 4 ? o->n_gen : 4, &t_pp, &t_tg);
    print_header(o, n_kv_max, nth);
    struct bench_phase_sums *ph = o->phases ? calloc((size_t)o->list.n, sizeof *ph) : NULL;
    if (o->phases && !ph) st = cli_fail(LLMK_OUT_OF_MEMORY, "bench: phase timings for %d counts", o->list.n);
    w->profile = ph != NULL;
    for (int i = 0; i < o->list.n && st == LLMK_OK; i++) {
        double sum_pp = 0, sum_tg = 0;
        if (ph) st = llmk_context_reset_timings(w->c);
        for (long r = 0; r < o->reps && st == LLMK_OK; r++) {
            st = measure(w, o->list.b[i], o->n_prompt, o->n_gen, &t_pp, &t_tg);
            sum_pp += t_pp, sum_tg += t_tg;
        }
        if (st == LLMK_OK) print_row(o, n_kv_max, nth, o->list.b[i], sum_pp / (double)o->reps,
                                     sum_tg / (double)o->reps);
        if (ph) bench_phase_sums_read(w->c, &ph[i]);
        fflush(stdout);
    }
    if (st == LLMK_OK && ph) print_phase_tables(o, ph);
    free(ph);
    return st;
}

int bench_batched(const llmk_model *m, const struct bench_batched_opts *o) {
    int32_t bmax = 1;
    for (int i = 0; i < o->list.n; i++)
        if (o->list.b[i] > bmax) bmax = o->list.b[i];
    int32_t n_ctx = (int32_t)(o->n_prompt + o->n_gen);
    if (o->long_ctx) cli_warn_long_ctx("bench", m, n_ctx);
    /* the pool: every sequence at full length, as llama-batched-bench's n_kv_max */
    int32_t per_seq = (n_ctx + LLMK_KV_BLOCK - 1) / LLMK_KV_BLOCK;
    llmk_context_params cp = {.n_seq_max = bmax, .n_ctx = n_ctx, .n_kv_blocks = bmax * per_seq,
                              .n_threads = (int32_t)o->threads, .n_batch = (int32_t)o->n_batch,
                              .kv_type = o->kv_type, .allow_long_ctx = o->long_ctx,
                              .progress_callback = cli_progress_load, .progress_callback_user_data = o->load};
    struct batched w = {.o = o, .V = (size_t)llmk_model_hparams(m)->n_vocab, .rng = 0x9E3779B97F4A7C15ull};
    double t_init = cli_now();
    int st = llmk_context_init(m, &cp, &w.c);
    cli_progress_clear(o->load);
    if (st != LLMK_OK) return st;
    if (o->verbose)
        cli_log_load("bench", o->load_s, cli_now() - t_init, llmk_context_kernels(w.c), llmk_context_n_threads(w.c),
                     o->kv_type);
    w.items = malloc((size_t)bmax * (size_t)o->n_prompt * sizeof *w.items);
    w.logits = malloc((size_t)bmax * w.V * sizeof *w.logits);
    w.gen = malloc((size_t)bmax * sizeof *w.gen);
    if (!w.items || !w.logits || !w.gen)
        st = cli_fail(LLMK_OUT_OF_MEMORY, "bench: buffers for %d prompts of %ld tokens", bmax, o->n_prompt);
    else
        st = run_all(&w, bmax * per_seq * LLMK_KV_BLOCK);
    free(w.items), free(w.logits), free(w.gen);
    llmk_context_free(w.c);
    return st;
}
