/* llmk_context_generate, a whole generation in one executor call: its token
 * streams (greedy and seeded sampling, entries ending at different steps,
 * one stopped by the callback) must be exactly those of one llmk_context_eval
 * per token with the same choices made outside; a pool too small for the
 * whole generation fails with the tokens reported so far kept; refusals.
 * Runs on a committed tiny model (from the repo root) and the default model
 * when present. */
#include "check.h"
#include "llmk.h"

#include <stdlib.h>
#include <string.h>

enum { NS = 3, MAXT = 40 };
static const int plen[NS] = {5, 17, 9}, maxt[NS] = {20, 7, 15};
enum { STOP_ENTRY = 2, STOP_AT = 10 }; /* the callback ends entry 2 at its 10th token */

struct rec {
    int32_t tok[NS][MAXT];
    int n[NS];
};

static int record(void *user, size_t entry, int32_t token) {
    struct rec *r = user;
    if (entry < NS && r->n[entry] < MAXT) r->tok[entry][r->n[entry]++] = token;
    return entry == STOP_ENTRY && r->n[entry] == STOP_AT;
}

static int32_t argmax_lowest(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}

static llmk_sampler *make_sampler(size_t V) {
    llmk_sampler_params sp;
    llmk_sampler_params_default(&sp);
    sp.seed = 42;
    llmk_sampler *s = NULL;
    CHECK_STATUS(llmk_sampler_init(&sp, V, &s), LLMK_OK);
    return s;
}

/* Every prompt but its last token, so the generation's first step feeds it. */
static llmk_context *prompted(const llmk_model *m, int32_t prompts[NS][MAXT], int32_t blocks) {
    llmk_context_params cp = {.n_seq_max = NS, .n_ctx = 64, .n_threads = 2, .kv_type = LLMK_TYPE_F16,
                              .n_kv_blocks = blocks};
    llmk_context *c = NULL;
    CHECK_STATUS(llmk_context_init(m, &cp, &c), LLMK_OK);
    for (int s = 0; c && s < NS; s++) {
        llmk_batch_item it[MAXT];
        for (int i = 0; i < plen[s] - 1; i++) it[i] = (llmk_batch_item){.seq = s, .id = prompts[s][i]};
        CHECK_STATUS(llmk_context_eval(c, it, (size_t)plen[s] - 1, NULL, 0), LLMK_OK);
    }
    return c;
}

/* The reference: one eval per step over the live entries, choices made here. */
static void stepwise(const llmk_model *m, int32_t prompts[NS][MAXT], size_t V, struct rec *r) {
    llmk_context *c = prompted(m, prompts, 0);
    llmk_sampler *smp = make_sampler(V);
    float *logits = malloc(NS * V * sizeof(float));
    int32_t next[NS];
    bool live[NS];
    for (int s = 0; s < NS; s++) next[s] = prompts[s][plen[s] - 1], live[s] = true;
    for (bool any = true; any && c;) {
        llmk_batch_item it[NS];
        int who[NS], k = 0;
        for (int s = 0; s < NS; s++)
            if (live[s]) it[k] = (llmk_batch_item){.seq = s, .id = next[s], .logits = true}, who[k++] = s;
        CHECK_STATUS(llmk_context_eval(c, it, (size_t)k, logits, NS * V), LLMK_OK);
        for (int j = 0; j < k; j++) {
            int s = who[j];
            int32_t t = argmax_lowest(logits + (size_t)j * V, V);
            if (s == 1) CHECK_STATUS(llmk_sampler_sample(smp, logits + (size_t)j * V, V, &t), LLMK_OK);
            bool stop = record(r, (size_t)s, t) != 0;
            live[s] = !stop && r->n[s] < maxt[s];
            next[s] = t;
        }
        any = false;
        for (int s = 0; s < NS; s++) any |= live[s];
    }
    free(logits);
    llmk_sampler_free(smp);
    llmk_context_free(c);
}

/* The generation's entries: each prompt's last token fed, entry 1 sampled. */
static void gen_entries(int32_t prompts[NS][MAXT], llmk_sampler *smp, llmk_gen_seq g[NS]) {
    for (int s = 0; s < NS; s++)
        g[s] = (llmk_gen_seq){.seq = s, .id = prompts[s][plen[s] - 1], .max_tokens = maxt[s],
                              .sampler = s == 1 ? smp : NULL};
}

/* Profiling mode times the generation's phases in place: every phase of
 * the program runs each step, so each has time, and the tokens stay the
 * fused run's. Without it nothing is timed. */
static void profiled(const llmk_model *m, int32_t prompts[NS][MAXT], size_t V, const struct rec *want) {
    for (int on = 0; on < 2; on++) {
        llmk_context *c = prompted(m, prompts, 0);
        llmk_sampler *smp = make_sampler(V);
        llmk_gen_seq g[NS];
        gen_entries(prompts, smp, g);
        struct rec got = {0};
        CHECK_STATUS(llmk_context_set_profiling(c, on), LLMK_OK);
        CHECK_STATUS(llmk_context_reset_timings(c), LLMK_OK);
        CHECK_STATUS(llmk_context_generate(c, g, NS, record, &got), LLMK_OK);
        CHECK(memcmp(&got, want, sizeof got) == 0);
        int timed = 0;
        for (int32_t i = 0; i < llmk_context_n_phases(c); i++) {
            llmk_phase_info ph;
            CHECK_STATUS(llmk_context_phase(c, i, &ph), LLMK_OK);
            timed += ph.ns > 0;
        }
        CHECK(timed == (on ? llmk_context_n_phases(c) : 0));
        llmk_sampler_free(smp);
        llmk_context_free(c);
    }
}

static void one_model(const char *path, bool required) {
    llmk_model *m = NULL;
    int st = llmk_model_load(path, &m);
    if (st != LLMK_OK) {
        if (required) CHECK_STATUS(st, LLMK_OK);
        else printf("test_generate: %s not present, skipped\n", path);
        return;
    }
    size_t V = (size_t)llmk_model_hparams(m)->n_vocab;
    int32_t prompts[NS][MAXT];
    uint32_t x = 12345;
    for (int s = 0; s < NS; s++)
        for (int i = 0; i < plen[s]; i++) x = x * 1664525u + 1013904223u, prompts[s][i] = (int32_t)(x % V);
    struct rec want = {0}, got = {0};
    stepwise(m, prompts, V, &want);
    CHECK(want.n[0] == maxt[0] && want.n[1] == maxt[1] && want.n[STOP_ENTRY] == STOP_AT);

    llmk_context *c = prompted(m, prompts, 0);
    llmk_sampler *smp = make_sampler(V);
    llmk_gen_seq g[NS];
    gen_entries(prompts, smp, g);
    CHECK_STATUS(llmk_context_generate(c, g, NS, record, &got), LLMK_OK);
    CHECK(memcmp(&got, &want, sizeof got) == 0); /* token for token, greedy and sampled */
    for (int s = 0; s < NS; s++) CHECK(llmk_context_seq_pos(c, s) == plen[s] - 1 + want.n[s]);
    /* refusals: nothing runs */
    llmk_gen_seq bad[2] = {g[0], g[0]};
    CHECK_STATUS(llmk_context_generate(c, bad, 2, record, &got), LLMK_INVALID_ARGUMENT);
    bad[0].id = (int32_t)V;
    CHECK_STATUS(llmk_context_generate(c, bad, 1, record, &got), LLMK_INVALID_TOKEN);
    bad[0] = g[0], bad[0].max_tokens = 0;
    CHECK_STATUS(llmk_context_generate(c, bad, 1, record, &got), LLMK_INVALID_ARGUMENT);
    bad[0] = g[0], bad[0].seq = NS;
    CHECK_STATUS(llmk_context_generate(c, bad, 1, record, &got), LLMK_INVALID_ARGUMENT);
    CHECK(llmk_context_seq_pos(c, 0) == plen[0] - 1 + want.n[0]);
    llmk_sampler_free(smp);
    llmk_context_free(c);
    profiled(m, prompts, V, &want);

    llmk_model_free(m);
}

/* A pool that runs out mid-generation: the failing step is undone, the
 * tokens reported before it stay in the sequence. */
static void runs_out(const char *path) {
    llmk_model *m = NULL;
    if (llmk_model_load(path, &m) != LLMK_OK) return;
    size_t V = (size_t)llmk_model_hparams(m)->n_vocab;
    llmk_context_params cp = {.n_seq_max = 2, .n_ctx = 256, .n_threads = 2, .n_kv_blocks = 2,
                              .allow_long_ctx = true};
    llmk_context *c = NULL;
    CHECK_STATUS(llmk_context_init(m, &cp, &c), LLMK_OK);
    if (c) {
        llmk_batch_item it[120];
        for (int i = 0; i < 120; i++) it[i] = (llmk_batch_item){.seq = 0, .id = (int32_t)((i * 31 + 7) % V)};
        CHECK_STATUS(llmk_context_eval(c, it, 120, NULL, 0), LLMK_OK);
        for (int i = 0; i < 3; i++) it[i].seq = 1; /* sequence 1 holds the other block */
        CHECK_STATUS(llmk_context_eval(c, it, 3, NULL, 0), LLMK_OK);
        struct rec got = {0};
        llmk_gen_seq g = {.seq = 0, .id = 5, .max_tokens = 30};
        /* positions 120..127 fit the one block: 8 steps, the 9th needs a second block */
        CHECK_STATUS(llmk_context_generate(c, &g, 1, record, &got), LLMK_CACHE_CAPACITY_EXCEEDED);
        CHECK(got.n[0] == 8 && llmk_context_seq_pos(c, 0) == 128);
        llmk_context_free(c);
    }
    llmk_model_free(m);
}

int main(void) {
    one_model("tests/fixtures/model/tiny/tiny_qwen3.gguf", true);
    runs_out("tests/fixtures/model/tiny/tiny_qwen3.gguf");
    one_model(check_default_model("test_generate", 0), false);
    return check_summary("test_generate");
}
