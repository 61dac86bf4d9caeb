/* llmk_context: many sequences in one executor. Every sequence's logits must
 * be bitwise the ones a fast-path session computes for it alone, whatever
 * slot it has, whatever else is in each call, the order of the items, how
 * its tokens are split across calls, the thread count and profiling mode;
 * truncation and refusals leave positions as documented; the introspection
 * calls agree with the program dump and the timings accumulate and reset.
 * Runs on the committed tiny models
 * (tests/fixtures/model/tiny, run from the repo root) and on the default
 * model when it is present. */
#include "check.h"
#include "llmk.h"

#include <stdlib.h>
#include <string.h>

enum { NSEQ = 3, MAXLEN = 40 };
static const int lens[NSEQ] = {23, 9, 37};

struct ref {
    size_t V;
    int32_t ids[NSEQ][MAXLEN];
    float *rows[NSEQ]; /* [len][V]: logits of every position, from a session */
};

static void make_ref(const llmk_model *m, struct ref *r, uint32_t kv) {
    r->V = (size_t)llmk_model_hparams(m)->n_vocab;
    for (int s = 0; s < NSEQ; s++) {
        uint32_t x = 2166136261u ^ (uint32_t)s;
        for (int i = 0; i < lens[s]; i++) x = x * 1664525u + 1013904223u, r->ids[s][i] = (int32_t)(x % r->V);
        r->rows[s] = malloc((size_t)lens[s] * r->V * sizeof(float));
        llmk_session_params sp = {.n_ctx = 64, .n_threads = 2, .path = LLMK_PATH_FAST, .kv_type = kv};
        llmk_session *ss = NULL;
        CHECK_STATUS(llmk_session_init(m, &sp, &ss), LLMK_OK);
        CHECK_STATUS(llmk_session_eval(ss, r->ids[s], (size_t)lens[s], r->rows[s], (size_t)lens[s] * r->V, true),
                     LLMK_OK);
        llmk_session_free(ss);
    }
}

static bool same_row(const struct ref *r, int s, int pos, const float *row) {
    return memcmp(r->rows[s] + (size_t)pos * r->V, row, r->V * sizeof(float)) == 0;
}

/* Feed the three sequences into slots slot[s], `step` tokens per sequence per
 * call, the items of a call interleaved (or reversed), logits for every item;
 * every row must equal the session's. */
static void mixed(const llmk_model *m, const struct ref *r, const int slot[NSEQ], int step, bool reverse, int threads,
                  uint32_t kv, bool profile) {
    llmk_context_params cp = {.n_seq_max = 4, .n_ctx = 64, .n_threads = threads, .kv_type = kv, .n_batch = 16};
    llmk_context *c = NULL;
    CHECK_STATUS(llmk_context_init(m, &cp, &c), LLMK_OK);
    if (!c) return;
    CHECK_STATUS(llmk_context_set_profiling(c, profile), LLMK_OK);
    llmk_batch_item items[NSEQ * MAXLEN];
    int pos[NSEQ] = {0}, who[NSEQ * MAXLEN], at[NSEQ * MAXLEN];
    float *out = malloc(sizeof items / sizeof items[0] * r->V * sizeof(float));
    bool ok = true;
    for (;;) {
        size_t n = 0;
        for (int k = 0; k < step; k++)
            for (int j = 0; j < NSEQ; j++) {
                int s = reverse ? NSEQ - 1 - j : j;
                if (pos[s] + k < lens[s]) {
                    items[n] = (llmk_batch_item){slot[s], r->ids[s][pos[s] + k], true};
                    who[n] = s, at[n] = pos[s] + k, n++;
                }
            }
        if (n == 0) break;
        CHECK_STATUS(llmk_context_eval(c, items, n, out, n * r->V), LLMK_OK);
        for (size_t i = 0; i < n; i++) ok &= same_row(r, who[i], at[i], out + i * r->V);
        for (int s = 0; s < NSEQ; s++) pos[s] = pos[s] + step < lens[s] ? pos[s] + step : lens[s];
    }
    for (int s = 0; s < NSEQ; s++) CHECK_EQ_INT(llmk_context_seq_pos(c, slot[s]), lens[s]);
    if (!ok) fprintf(stderr, "context: step %d reverse %d threads %d profile %d: rows differ from the session's\n",
                     step, reverse, threads, profile);
    CHECK(ok);
    free(out);
    llmk_context_free(c);
}

/* Logits only where asked; truncation and re-evaluation; slot reuse. */
static void flags_and_truncate(const llmk_model *m, const struct ref *r, uint32_t kv) {
    llmk_context_params cp = {.n_seq_max = 2, .n_ctx = 64, .n_threads = 2, .kv_type = kv};
    llmk_context *c = NULL;
    CHECK_STATUS(llmk_context_init(m, &cp, &c), LLMK_OK);
    if (!c) return;
    size_t V = r->V;
    float *out = malloc(3 * V * sizeof(float));
    /* sequence 2 whole in slot 1, logits at positions 5, 20 and the last only */
    llmk_batch_item items[MAXLEN];
    for (int i = 0; i < lens[2]; i++) items[i] = (llmk_batch_item){1, r->ids[2][i], i == 5 || i == 20 || i == lens[2] - 1};
    CHECK_STATUS(llmk_context_eval(c, items, (size_t)lens[2], out, 3 * V), LLMK_OK);
    CHECK(same_row(r, 2, 5, out) && same_row(r, 2, 20, out + V) && same_row(r, 2, lens[2] - 1, out + 2 * V));
    /* back to position 12, then the rest again one token at a time */
    CHECK_STATUS(llmk_context_seq_truncate(c, 1, 12), LLMK_OK);
    bool ok = true;
    for (int i = 12; i < lens[2]; i++) {
        llmk_batch_item it = {1, r->ids[2][i], true};
        CHECK_STATUS(llmk_context_eval(c, &it, 1, out, V), LLMK_OK);
        ok &= same_row(r, 2, i, out);
    }
    CHECK(ok);
    /* slot 1 freed and reused for sequence 1 */
    CHECK_STATUS(llmk_context_seq_truncate(c, 1, 0), LLMK_OK);
    for (int i = 0; i < lens[1]; i++) items[i] = (llmk_batch_item){1, r->ids[1][i], i == lens[1] - 1};
    CHECK_STATUS(llmk_context_eval(c, items, (size_t)lens[1], out, V), LLMK_OK);
    CHECK(same_row(r, 1, lens[1] - 1, out));
    free(out);
    llmk_context_free(c);
}

static void refusals(const llmk_model *m, const struct ref *r) {
    llmk_context_params cp = {.n_seq_max = 2, .n_ctx = 8, .n_threads = 1};
    llmk_context *c = NULL;
    CHECK_STATUS(llmk_context_init(m, &cp, &c), LLMK_OK);
    if (!c) return;
    float row[1];
    llmk_batch_item ok1 = {0, 1, false}, bad_seq = {2, 1, false}, neg = {-1, 1, false};
    llmk_batch_item bad_id = {1, (int32_t)r->V, false}, want = {1, 1, true};
    CHECK_STATUS(llmk_context_eval(c, &ok1, 1, NULL, 0), LLMK_OK);
    llmk_batch_item two[2] = {ok1, bad_seq};
    CHECK_STATUS(llmk_context_eval(c, two, 2, NULL, 0), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_context_eval(c, &neg, 1, NULL, 0), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_context_eval(c, &bad_id, 1, NULL, 0), LLMK_INVALID_TOKEN);
    CHECK_STATUS(llmk_context_eval(c, &want, 1, row, 1), LLMK_BUFFER_TOO_SMALL);
    CHECK_STATUS(llmk_context_eval(c, &want, 1, NULL, 0), LLMK_BUFFER_TOO_SMALL);
    llmk_batch_item eight[8];
    for (int i = 0; i < 8; i++) eight[i] = ok1;
    CHECK_STATUS(llmk_context_eval(c, eight, 8, NULL, 0), LLMK_CONTEXT_FULL); /* 1 + 8 > 8 */
    CHECK_EQ_INT(llmk_context_seq_pos(c, 0), 1);                                /* nothing moved */
    CHECK_EQ_INT(llmk_context_seq_pos(c, 1), 0);
    CHECK_STATUS(llmk_context_seq_truncate(c, 0, 2), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_context_seq_truncate(c, 5, 0), LLMK_INVALID_ARGUMENT);
    CHECK_EQ_INT(llmk_context_seq_pos(c, 7), -1);
    CHECK_EQ_INT(llmk_context_n_seq_max(c), 2);
    CHECK_EQ_INT(llmk_context_n_ctx(c), 8);
    CHECK_STATUS(llmk_context_eval(c, eight, 7, NULL, 0), LLMK_OK);
    CHECK_EQ_INT(llmk_context_seq_pos(c, 0), 8);
    llmk_context_free(c);
    llmk_context_params big = {.n_seq_max = 2000};
    CHECK(llmk_context_init(m, &big, &c) != LLMK_OK && c == NULL && *llmk_last_error());
}

/* The phase views against the program dump: same count, and each dump line
 * "index op name ..." names phase index's op and name; layers follow the
 * names ("blk.N." is layer N, everything else -1). */
static void phases_match_dump(const llmk_context *c, const llmk_model *m) {
    int32_t n = llmk_context_n_phases(c);
    CHECK(n > 2);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK_STATUS(llmk_context_describe(c, f), LLMK_OK);
    fclose(f);
    int head = -1;
    CHECK(sscanf(text, "program: %d phases", &head) == 1);
    CHECK_EQ_INT(head, n);
    const char *line = strchr(text, '\n');
    bool ok = true;
    int last_layer = -1;
    for (int32_t i = 0; i < n && line; i++, line = strchr(line + 1, '\n')) {
        llmk_phase_info ph;
        CHECK_STATUS(llmk_context_phase(c, i, &ph), LLMK_OK);
        int idx = -1, layer = -1;
        char op[32] = "", name[64] = "";
        ok &= sscanf(line + 1, "%d %31s %63s", &idx, op, name) == 3 && idx == i && !strcmp(op, ph.op) &&
              !strcmp(name, ph.name);
        if (sscanf(ph.name, "blk.%d.", &layer) != 1) layer = -1;
        ok &= ph.layer == layer && (layer < 0 || layer >= last_layer);
        if (layer >= 0) last_layer = layer;
    }
    CHECK(ok);
    CHECK_EQ_INT(last_layer, llmk_model_hparams(m)->n_layer - 1);
    llmk_phase_info first, final;
    CHECK_STATUS(llmk_context_phase(c, 0, &first), LLMK_OK);
    CHECK_STATUS(llmk_context_phase(c, n - 1, &final), LLMK_OK);
    CHECK(!strcmp(first.op, "embed") && first.layer == -1 && !strcmp(final.op, "argmax") && final.layer == -1);
    free(text);
}

/* ns of every phase into t[]; how many are zero. */
static int32_t timings(const llmk_context *c, double *t) {
    int32_t zero = 0;
    for (int32_t i = 0; i < llmk_context_n_phases(c); i++) {
        llmk_phase_info ph = {0};
        llmk_context_phase(c, i, &ph);
        t[i] = ph.ns;
        zero += ph.ns == 0;
    }
    return zero;
}

/* Threads, kernels, phases, timings (accumulate, reset, fused runs add
 * nothing, calls without logits skip the final phases), the bandwidth probe
 * and every refusal. */
static void introspection(const llmk_model *m, const struct ref *r) {
    llmk_context_params cp = {.n_seq_max = 1, .n_ctx = 64, .n_threads = 2};
    llmk_context *c = NULL;
    CHECK_STATUS(llmk_context_init(m, &cp, &c), LLMK_OK);
    if (!c) return;
    CHECK_EQ_INT(llmk_context_n_threads(c), 2);
    CHECK(llmk_context_kernels(c) && *llmk_context_kernels(c));
    phases_match_dump(c, m);
    int32_t n = llmk_context_n_phases(c);
    double *t0 = calloc((size_t)n, sizeof *t0), *t1 = calloc((size_t)n, sizeof *t1);
    float *out = malloc(r->V * sizeof *out);
    llmk_batch_item items[8];
    for (int i = 0; i < 8; i++) items[i] = (llmk_batch_item){0, r->ids[0][i], i == 7};
    CHECK_STATUS(llmk_context_eval(c, items, 8, out, r->V), LLMK_OK); /* fused: no timings */
    CHECK_EQ_INT(timings(c, t0), n);
    CHECK_STATUS(llmk_context_set_profiling(c, true), LLMK_OK);
    CHECK_STATUS(llmk_context_eval(c, &items[0], 1, NULL, 0), LLMK_OK); /* no logits: final phases skipped */
    timings(c, t0);
    CHECK(t0[0] > 0 && t0[n - 1] == 0);
    CHECK_STATUS(llmk_context_eval(c, &items[7], 1, out, r->V), LLMK_OK);
    CHECK_EQ_INT(timings(c, t1), 0);
    bool grew = true;
    for (int32_t i = 0; i < n; i++) grew &= t1[i] >= t0[i];
    CHECK(grew && t1[0] > t0[0]);
    CHECK_STATUS(llmk_context_reset_timings(c), LLMK_OK);
    CHECK_EQ_INT(timings(c, t0), n);
    CHECK_STATUS(llmk_context_set_profiling(c, false), LLMK_OK);
    CHECK_STATUS(llmk_context_eval(c, &items[1], 1, out, r->V), LLMK_OK);
    CHECK_EQ_INT(timings(c, t0), n);
    /* refusals */
    llmk_phase_info ph;
    CHECK_STATUS(llmk_context_phase(c, -1, &ph), LLMK_INVALID_ARGUMENT);
    CHECK(*llmk_last_error());
    CHECK_STATUS(llmk_context_phase(c, n, &ph), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_context_phase(c, 0, NULL), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_context_phase(NULL, 0, &ph), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_context_describe(c, NULL), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_context_describe(NULL, stdout), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_context_set_profiling(NULL, true), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_context_reset_timings(NULL), LLMK_INVALID_ARGUMENT);
    CHECK_EQ_INT(llmk_context_n_phases(NULL), 0);
    CHECK_EQ_INT(llmk_context_n_threads(NULL), 0);
    CHECK(llmk_context_kernels(NULL) == NULL);
    CHECK_STATUS(llmk_context_phase(c, 0, &ph), LLMK_OK);
    CHECK(*llmk_last_error() == 0);
    free(t0), free(t1), free(out);
    llmk_context_free(c);
}

/* A small buffer (1 MiB, mostly cache): a figure, not a measurement. */
static void read_bandwidth(void) {
    double gbs = -1;
    CHECK_STATUS(llmk_memory_read_bandwidth(1, (size_t)1 << 20, &gbs), LLMK_OK);
    CHECK(gbs > 0);
    CHECK_STATUS(llmk_memory_read_bandwidth(2, 1000, &gbs), LLMK_INVALID_ARGUMENT);
    CHECK(gbs == 0 && *llmk_last_error());
    CHECK_STATUS(llmk_memory_read_bandwidth(1, 128, NULL), LLMK_INVALID_ARGUMENT);
}

static void one_model(const char *path, bool required, size_t n_kv) {
    llmk_model *m = NULL;
    int st = llmk_model_load(path, &m);
    if (st != LLMK_OK) {
        if (required) CHECK_STATUS(st, LLMK_OK);
        else printf("test_context: %s not present, skipped\n", path);
        return;
    }
    static const int slots_a[NSEQ] = {0, 1, 2}, slots_b[NSEQ] = {3, 0, 2};
    static const uint32_t kvs[] = {LLMK_TYPE_F16, LLMK_TYPE_F32};
    for (size_t k = 0; k < n_kv; k++) {
        struct ref r;
        make_ref(m, &r, kvs[k]);
        mixed(m, &r, slots_a, 1, false, 2, kvs[k], false);  /* decode rows of three sequences per call */
        mixed(m, &r, slots_b, 4, true, 1, kvs[k], false);   /* prefill pieces and decode rows, other slots */
        mixed(m, &r, slots_b, 40, false, 2, kvs[k], false); /* each sequence whole in one call */
        mixed(m, &r, slots_a, 4, false, 2, kvs[k], true);   /* profiling mode: the same bits as fused */
        flags_and_truncate(m, &r, kvs[k]);
        if (k == 0) refusals(m, &r), introspection(m, &r);
        for (int s = 0; s < NSEQ; s++) free(r.rows[s]);
    }
    llmk_model_free(m);
}

int main(void) {
    read_bandwidth();
    one_model("tests/fixtures/model/tiny/tiny_qwen3.gguf", true, 2);
    one_model("tests/fixtures/model/tiny/tiny_llama3_keys.gguf", true, 2);
    const char *path = check_default_model("test_context", 1);
    if (path) one_model(path, false, 1); /* the f16 cache the CLI uses; f32 is covered on the tiny models */
    return check_summary("test_context");
}
