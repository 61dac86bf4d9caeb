/* The paged KV cache behind llmk_context: a sequence's logits are bitwise a
 * fast-path session's after a prefix-cache hit, while another sequence
 * shares its prefix blocks, after a truncation that copies a shared block,
 * and across refusals for lack of blocks, which move nothing; the pool's
 * figures are seed 001's formulas of its real state. Runs on the committed
 * tiny models (from the repo root) and on the default model when present. */
#include "check.h"
#include "llmk.h"
#include "llmk_formulas.h"

#include <stdlib.h>
#include <string.h>

enum { LEN = 300, SHARED = 260, CUT = 200, BLK = LLMK_KV_BLOCK };

struct prompts {
    size_t V;
    int32_t p[LEN], q[LEN], r[LEN]; /* q shares p's first SHARED tokens, r q's first CUT */
};

static void make_prompts(size_t V, struct prompts *pr) {
    uint32_t x = 2166136261u;
    pr->V = V;
    for (int i = 0; i < LEN; i++) {
        x = x * 1664525u + 1013904223u, pr->p[i] = (int32_t)(x % V);
        x = x * 1664525u + 1013904223u, pr->q[i] = i < SHARED ? pr->p[i] : (int32_t)(x % V);
        x = x * 1664525u + 1013904223u, pr->r[i] = i < CUT ? pr->q[i] : (int32_t)(x % V);
    }
}

/* Every position's logits of ids[0..n) from a fast-path session. */
static float *session_rows(const llmk_model *m, const int32_t *ids, int n, uint32_t kv) {
    size_t V = (size_t)llmk_model_hparams(m)->n_vocab;
    float *rows = malloc((size_t)n * V * sizeof(float));
    llmk_session_params sp = {.n_ctx = 512, .n_threads = 2, .path = LLMK_PATH_FAST, .kv_type = kv,
                              .allow_long_ctx = true};
    llmk_session *s = NULL;
    CHECK_STATUS(llmk_session_init(m, &sp, &s), LLMK_OK);
    CHECK_STATUS(llmk_session_eval(s, ids, (size_t)n, rows, (size_t)n * V, true), LLMK_OK);
    llmk_session_free(s);
    return rows;
}

/* Evaluate ids[from..to) of seq with logits everywhere; compare with want's rows. */
static bool eval_matches(llmk_context *c, int32_t seq, const int32_t *ids, int from, int to, const float *want,
                         size_t V) {
    llmk_batch_item items[LEN];
    for (int i = from; i < to; i++) items[i - from] = (llmk_batch_item){.seq = seq, .id = ids[i], .logits = true};
    float *out = malloc((size_t)(to - from) * V * sizeof(float));
    int st = llmk_context_eval(c, items, (size_t)(to - from), out, (size_t)(to - from) * V);
    CHECK_STATUS(st, LLMK_OK);
    bool same = st == LLMK_OK && memcmp(out, want + (size_t)from * V, (size_t)(to - from) * V * sizeof(float)) == 0;
    free(out);
    return same;
}

static llmk_context *make_ctx(const llmk_model *m, uint32_t kv, int32_t blocks) {
    llmk_context_params cp = {.n_seq_max = 2, .n_ctx = 512, .n_threads = 2, .kv_type = kv, .n_batch = 64,
                              .n_kv_blocks = blocks, .allow_long_ctx = true};
    llmk_context *c = NULL;
    CHECK_STATUS(llmk_context_init(m, &cp, &c), LLMK_OK);
    return c;
}

/* A prefix hit, a prefix shared by two live sequences, and a copy on
 * truncation inside the shared block: every row bitwise the session's. */
static void prefix_and_sharing(const llmk_model *m, const struct prompts *pr, uint32_t kv) {
    size_t V = pr->V;
    float *rp = session_rows(m, pr->p, LEN, kv), *rq = session_rows(m, pr->q, LEN, kv);
    float *rr = session_rows(m, pr->r, LEN, kv);
    llmk_context *c = make_ctx(m, kv, 0);
    if (!c) return;
    llmk_kv_info ki;
    CHECK(eval_matches(c, 0, pr->p, 0, LEN, rp, V));
    CHECK_STATUS(llmk_context_seq_truncate(c, 0, 0), LLMK_OK); /* ends: its two full blocks stay cached */
    CHECK_STATUS(llmk_context_kv_info(c, &ki), LLMK_OK);
    CHECK(ki.n_cached == LEN / BLK && ki.n_used == 0 && ki.n_tokens == 0);
    int32_t hit = -1;
    CHECK_STATUS(llmk_context_seq_start(c, 1, pr->p, LEN, &hit), LLMK_OK);
    CHECK(hit == LEN / BLK * BLK && llmk_context_seq_pos(c, 1) == hit);
    CHECK(eval_matches(c, 1, pr->p, hit, LEN, rp, V)); /* the hit gives the computed bits */
    /* q shares p's first two blocks while seq 1 still holds them */
    CHECK_STATUS(llmk_context_seq_start(c, 0, pr->q, LEN, &hit), LLMK_OK);
    CHECK(hit == SHARED / BLK * BLK);
    CHECK(eval_matches(c, 0, pr->q, hit, LEN, rq, V));
    CHECK_STATUS(llmk_context_kv_info(c, &ki), LLMK_OK);
    CHECK(ki.n_shared == SHARED / BLK && ki.n_used == 2 * ((LEN + BLK - 1) / BLK) - SHARED / BLK);
    const llmk_hparams *hp = llmk_model_hparams(m);
    double eb = kv == LLMK_TYPE_F16 ? 2 : 4;
    CHECK(ki.shared_bytes == llmk_prefix_sharing_savings(SHARED / BLK * BLK, 2, hp->n_layer, hp->n_head_kv,
                                                         hp->head_dim, eb));
    CHECK(ki.pool_bytes == hp->n_layer * llmk_kv_bytes(1, (double)ki.n_blocks * BLK, hp->n_head_kv, hp->head_dim, eb));
    /* the default pool is what `llmk plan --batch 2 --ctx 512` reports */
    CHECK(ki.n_blocks == 2 * llmk_paged_attention_block_count(512, BLK));
    /* cut seq 0 inside the shared block 1: its kept positions are copied to a
     * block of its own; then r's tail, and seq 1 goes on unaffected */
    CHECK_STATUS(llmk_context_seq_truncate(c, 0, CUT), LLMK_OK);
    CHECK_STATUS(llmk_context_kv_info(c, &ki), LLMK_OK);
    CHECK(ki.n_shared == CUT / BLK);
    CHECK(eval_matches(c, 0, pr->r, CUT, LEN, rr, V));
    CHECK_STATUS(llmk_context_seq_truncate(c, 1, LEN - 7), LLMK_OK);
    CHECK(eval_matches(c, 1, pr->p, LEN - 7, LEN, rp, V));
    llmk_context_free(c);
    free(rp), free(rq), free(rr);
}

/* Two live sequences on one shared prefix decode together: each pass reads
 * the shared blocks once for both rows (cascade attention), and each row is
 * still bitwise its session's. */
static void shared_decode(const llmk_model *m, const struct prompts *pr, uint32_t kv) {
    size_t V = pr->V;
    enum { START = 270 };
    float *rp = session_rows(m, pr->p, LEN, kv), *rq = session_rows(m, pr->q, LEN, kv);
    llmk_context *c = make_ctx(m, kv, 0);
    if (!c) return;
    CHECK(eval_matches(c, 0, pr->p, 0, START, rp, V));
    int32_t hit = -1;
    CHECK_STATUS(llmk_context_seq_start(c, 1, pr->q, START + 5, &hit), LLMK_OK);
    CHECK(hit == SHARED / BLK * BLK);
    CHECK(eval_matches(c, 1, pr->q, hit, START + 5, rq, V)); /* five ahead: the rows see different key counts */
    float *out = malloc(2 * V * sizeof(float));
    bool same = true;
    for (int pos = START; pos + 5 < LEN; pos++) {
        llmk_batch_item it[2] = {{.seq = 1, .id = pr->q[pos + 5], .logits = true},
                                 {.seq = 0, .id = pr->p[pos], .logits = true}};
        CHECK_STATUS(llmk_context_eval(c, it, 2, out, 2 * V), LLMK_OK);
        same = same && memcmp(out, rq + (size_t)(pos + 5) * V, V * sizeof(float)) == 0 &&
               memcmp(out + V, rp + (size_t)pos * V, V * sizeof(float)) == 0;
    }
    CHECK(same);
    free(out), free(rp), free(rq);
    llmk_context_free(c);
}

/* Field by field: the struct's padding bytes are not part of its value. */
static bool same_kv(const llmk_kv_info *a, const llmk_kv_info *b) {
    return a->block_size == b->block_size && a->n_blocks == b->n_blocks && a->n_free == b->n_free &&
           a->n_cached == b->n_cached && a->n_used == b->n_used && a->n_tokens == b->n_tokens &&
           a->n_shared == b->n_shared && a->pool_bytes == b->pool_bytes && a->used_bytes == b->used_bytes &&
           a->shared_bytes == b->shared_bytes;
}

/* A pool of 3 blocks: a call that needs a fourth is refused and moves
 * nothing; a prefix hit that leaves no block for the rest is refused too. */
static void capacity(const llmk_model *m, const struct prompts *pr, uint32_t kv) {
    size_t V = pr->V;
    float *rp = session_rows(m, pr->p, LEN, kv);
    llmk_context *c = make_ctx(m, kv, 3);
    if (!c) return;
    llmk_kv_info a, b;
    CHECK(eval_matches(c, 0, pr->p, 0, LEN, rp, V)); /* 3 blocks */
    CHECK_STATUS(llmk_context_kv_info(c, &a), LLMK_OK);
    CHECK(a.n_free == 0 && a.n_used == 3);
    llmk_batch_item items[2] = {{.seq = 1, .id = pr->q[0]}, {.seq = 1, .id = pr->q[1], .logits = true}};
    float *out = malloc(V * sizeof(float));
    CHECK_STATUS(llmk_context_eval(c, items, 2, out, V), LLMK_CACHE_CAPACITY_EXCEEDED);
    CHECK_STATUS(llmk_context_kv_info(c, &b), LLMK_OK);
    CHECK(same_kv(&a, &b) && llmk_context_seq_pos(c, 0) == LEN && llmk_context_seq_pos(c, 1) == 0);
    CHECK(llmk_context_blocks_needed(c, 1, 2) == 1);
    CHECK_STATUS(llmk_context_seq_truncate(c, 0, 0), LLMK_OK); /* 2 cached, 1 free */
    CHECK_STATUS(llmk_context_eval(c, items, 2, out, V), LLMK_OK);
    int32_t hit = -1;
    CHECK_STATUS(llmk_context_seq_start(c, 0, pr->p, LEN, &hit), LLMK_OK); /* takes both cached blocks */
    CHECK(hit == 2 * BLK);
    llmk_batch_item more = {.seq = 0, .id = pr->p[hit], .logits = true};
    CHECK_STATUS(llmk_context_eval(c, &more, 1, out, V), LLMK_CACHE_CAPACITY_EXCEEDED);
    CHECK(llmk_context_seq_pos(c, 0) == hit);
    CHECK_STATUS(llmk_context_seq_truncate(c, 1, 0), LLMK_OK); /* its block was never full: free again */
    CHECK(eval_matches(c, 0, pr->p, hit, LEN, rp, V));
    /* refusals of seq_start: not empty, out of range, longer than n_ctx */
    CHECK_STATUS(llmk_context_seq_start(c, 0, pr->p, LEN, &hit), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_context_seq_start(c, 2, pr->p, LEN, &hit), LLMK_INVALID_ARGUMENT);
    int32_t *big = calloc(600, sizeof *big);
    CHECK_STATUS(llmk_context_seq_start(c, 1, big, 600, &hit), LLMK_CONTEXT_FULL);
    free(big), free(out), free(rp);
    llmk_context_free(c);
}

static void one_model(const char *path, bool required) {
    llmk_model *m = NULL;
    int st = llmk_model_load(path, &m);
    if (st != LLMK_OK) {
        if (required) CHECK_STATUS(st, LLMK_OK);
        else printf("test_paged: %s not present, skipped\n", path);
        return;
    }
    struct prompts pr;
    make_prompts((size_t)llmk_model_hparams(m)->n_vocab, &pr);
    prefix_and_sharing(m, &pr, LLMK_TYPE_F16);
    shared_decode(m, &pr, LLMK_TYPE_F16);
    shared_decode(m, &pr, LLMK_TYPE_Q8_0 * (llmk_model_hparams(m)->head_dim % 32 == 0) +
                              LLMK_TYPE_F32 * (llmk_model_hparams(m)->head_dim % 32 != 0));
    capacity(m, &pr, LLMK_TYPE_F32);
    llmk_model_free(m);
}

int main(void) {
    one_model("tests/fixtures/model/tiny/tiny_qwen3.gguf", true);
    one_model("tests/fixtures/model/tiny/tiny_llama3_keys.gguf", true);
    const char *path = check_default_model("test_paged", 1);
    if (path) one_model(path, false);
    return check_summary("test_paged");
}
