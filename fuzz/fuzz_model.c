/* libFuzzer target for the model loader: a fuzzed GGUF image through
 * llmk_model_load_memory, which runs the same checks as llmk_model_load
 * (architecture, hyperparameters, every tensor's type and shape, RoPE
 * set-up, the tokenizer).
 *
 * Input: the GGUF image, nothing else.
 *
 * When the model loads, what the loader promises is checked directly
 * (src/model.h): every weight it hands out lies inside the image and holds
 * exactly the rows its shape needs, every f32 view of a 1-D tensor is
 * readable for its length, the RoPE inverse frequencies are finite and
 * positive. A tiny model (the seeds are such) is then run for two tokens on
 * every decode path, one thread and a 4-token context, so a shape the loader
 * let through but the forward pass cannot handle shows up here.
 *
 * Built by scripts/fuzz.sh; replayed by tests/test_fuzz_corpus.c. With
 * -DLLMK_FUZZ_REPLAY it gets a main() that runs the target over files. */
#include "fuzz_common.h"
#include "llmk.h"
#include "model.h"

#include <math.h>

/* Weight bytes below which a loaded model is also evaluated: enough for the
 * seeds and their mutants, small enough to keep executions fast. */
#define FMODEL_EVAL_MAX_BYTES (512u * 1024u)

struct fmodel_span {
    const uint8_t *lo, *hi; /* the image */
    uint64_t bytes;         /* weight bytes seen */
};

/* A weight the model uses: inside the image, exactly ne1 rows of ne0. */
static void fmodel_weight(struct fmodel_span *sp, const llmk_tensor_info *t, uint64_t ne0,
                          uint64_t ne1) {
    if (!t) return;
    FUZZ_REQUIRE(t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == 1 && t->ne[3] == 1);
    uint64_t row = 0, need = 0;
    FUZZ_REQUIRE(llmk_row_bytes(t->type, ne0, &row) == LLMK_OK);
    FUZZ_REQUIRE(!__builtin_mul_overflow(row, ne1, &need) && need == t->n_bytes && need > 0);
    const uint8_t *p = t->data;
    FUZZ_REQUIRE(p >= sp->lo && t->n_bytes <= (uint64_t)(sp->hi - p));
    volatile uint8_t sink = p[0] ^ p[t->n_bytes - 1];
    (void)sink;
    sp->bytes += t->n_bytes;
}

/* An expert stack: ne2 matrices of ne1 rows of ne0, inside the image. */
static void fmodel_stack(struct fmodel_span *sp, const llmk_tensor_info *t, uint64_t ne0, uint64_t ne1,
                         uint64_t ne2) {
    FUZZ_REQUIRE(t && t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == ne2 && t->ne[3] == 1);
    uint64_t row = 0, need = 0;
    FUZZ_REQUIRE(llmk_row_bytes(t->type, ne0, &row) == LLMK_OK);
    FUZZ_REQUIRE(!__builtin_mul_overflow(row, ne1 * ne2, &need) && need == t->n_bytes && need > 0);
    const uint8_t *p = t->data;
    FUZZ_REQUIRE(p >= sp->lo && t->n_bytes <= (uint64_t)(sp->hi - p));
    sp->bytes += t->n_bytes;
}

/* A MoE layer (qwen3moe): no dense FFN; the router, its f32 rows and the
 * three stacks; gate and up of one type. */
static void fmodel_moe(struct fmodel_span *sp, const llmk_model *m, const struct llmk_layer *L) {
    uint64_t E = (uint64_t)m->hp.n_embd, X = (uint64_t)m->moe.n_expert, FE = (uint64_t)m->moe.n_ff_exp;
    FUZZ_REQUIRE(!L->w_gate && !L->w_up && !L->w_down && L->gate_inp && L->gate_inp_f);
    FUZZ_REQUIRE(m->moe.n_used >= 1 && m->moe.n_used <= m->moe.n_expert && FE >= 1);
    fmodel_weight(sp, L->gate_inp, E, X);
    fmodel_stack(sp, L->gate_exps, E, FE, X);
    fmodel_stack(sp, L->up_exps, E, FE, X);
    fmodel_stack(sp, L->down_exps, FE, E, X);
    FUZZ_REQUIRE(L->gate_exps->type == L->up_exps->type);
    volatile float sink = 0;
    for (uint64_t i = 0; i < X * E; i++) sink += L->gate_inp_f[i];
    (void)sink;
}

/* An f32 view of a 1-D tensor: n readable floats, present iff the tensor is. */
static void fmodel_vec(const llmk_tensor_info *t, const float *v, uint64_t n) {
    FUZZ_REQUIRE((t == NULL) == (v == NULL));
    if (!v) return;
    volatile float sink = 0;
    for (uint64_t i = 0; i < n; i++) sink += v[i];
    (void)sink;
}

static void fmodel_check(const llmk_model *m, const uint8_t *data, size_t size,
                         uint64_t *weight_bytes) {
    const llmk_hparams *hp = llmk_model_hparams(m);
    FUZZ_REQUIRE(hp == &m->hp && llmk_model_gguf(m) == m->gguf);
    FUZZ_REQUIRE(hp->n_layer >= 1 && hp->n_embd >= 1 && hp->n_head >= 1 && hp->n_ff >= 1);
    FUZZ_REQUIRE(hp->n_head_kv >= 1 && hp->n_head % hp->n_head_kv == 0);
    FUZZ_REQUIRE(hp->head_dim >= 2 && hp->head_dim % 2 == 0 && hp->n_rot == hp->head_dim);
    FUZZ_REQUIRE(hp->n_vocab >= 1 && hp->n_ctx_train >= 1);
    FUZZ_REQUIRE(hp->rms_eps >= 0 && hp->rms_eps <= 1);
    uint64_t E = (uint64_t)hp->n_embd, V = (uint64_t)hp->n_vocab, F = (uint64_t)hp->n_ff;
    uint64_t QD = (uint64_t)hp->n_head * (uint64_t)hp->head_dim;
    uint64_t KD = (uint64_t)hp->n_head_kv * (uint64_t)hp->head_dim;
    uint64_t HD = (uint64_t)hp->head_dim;
    struct fmodel_span sp = {data, data + size, 0};
    FUZZ_REQUIRE(m->tok_embd && m->out_norm && m->output && m->layers && m->rope_inv_freq);
    fmodel_weight(&sp, m->tok_embd, E, V);
    fmodel_weight(&sp, m->out_norm, E, 1);
    FUZZ_REQUIRE(hp->tied_output == (m->output == m->tok_embd));
    if (!hp->tied_output) fmodel_weight(&sp, m->output, E, V);
    fmodel_vec(m->out_norm, m->out_norm_f, E);
    for (int il = 0; il < hp->n_layer; il++) {
        const struct llmk_layer *L = &m->layers[il];
        FUZZ_REQUIRE(L->attn_norm && L->wq && L->wk && L->wv && L->wo && L->ffn_norm);
        if (m->moe.n_expert) fmodel_moe(&sp, m, L);
        else FUZZ_REQUIRE(L->w_gate && L->w_up && L->w_down && !L->gate_exps);
        fmodel_weight(&sp, L->attn_norm, E, 1);
        fmodel_weight(&sp, L->wq, E, QD);
        fmodel_weight(&sp, L->wk, E, KD);
        fmodel_weight(&sp, L->wv, E, KD);
        fmodel_weight(&sp, L->wo, QD, E);
        fmodel_weight(&sp, L->ffn_norm, E, 1);
        fmodel_weight(&sp, L->w_gate, E, F);
        fmodel_weight(&sp, L->w_up, E, F);
        fmodel_weight(&sp, L->w_down, F, E);
        fmodel_weight(&sp, L->bq, QD, 1);
        fmodel_weight(&sp, L->bk, KD, 1);
        fmodel_weight(&sp, L->bv, KD, 1);
        fmodel_weight(&sp, L->q_norm, HD, 1);
        fmodel_weight(&sp, L->k_norm, HD, 1);
        FUZZ_REQUIRE(!L->bq == !L->bk && !L->bk == !L->bv && !L->q_norm == !L->k_norm);
        FUZZ_REQUIRE(hp->has_qkv_bias || !L->bq);
        FUZZ_REQUIRE(hp->has_qk_norm || !L->q_norm);
        fmodel_vec(L->attn_norm, L->attn_norm_f, E);
        fmodel_vec(L->ffn_norm, L->ffn_norm_f, E);
        fmodel_vec(L->bq, L->bq_f, QD);
        fmodel_vec(L->bk, L->bk_f, KD);
        fmodel_vec(L->bv, L->bv_f, KD);
        fmodel_vec(L->q_norm, L->q_norm_f, HD);
        fmodel_vec(L->k_norm, L->k_norm_f, HD);
    }
    /* angle = pos * inv_freq: a non-finite or non-positive one would turn
     * every position's rotation into NaN or nothing. */
    for (int i = 0; i < hp->n_rot / 2; i++)
        FUZZ_REQUIRE(isfinite(m->rope_inv_freq[i]) && m->rope_inv_freq[i] > 0);
    *weight_bytes = sp.bytes;
}

/* Two tokens on one path; the ids come from the tokenizer when it has some
 * inside the model's vocabulary. */
static void fmodel_eval(const llmk_model *m, int path, const int32_t ids[2]) {
    const llmk_hparams *hp = llmk_model_hparams(m);
    llmk_session_params p = {.n_ctx = 4, .n_threads = 1, .path = path, .n_batch = 2};
    llmk_session *s = NULL;
    if (llmk_session_init(m, &p, &s) != LLMK_OK) {
        FUZZ_REQUIRE(s == NULL && *llmk_last_error());
        return;
    }
    size_t nv = (size_t)hp->n_vocab;
    float *logits = malloc(2 * nv * sizeof *logits);
    FUZZ_REQUIRE(logits != NULL);
    int rc = llmk_session_eval(s, ids, 2, logits, 2 * nv, true);
    FUZZ_REQUIRE(rc == LLMK_OK || *llmk_last_error());
    FUZZ_REQUIRE(llmk_session_pos(s) == (rc == LLMK_OK ? 2 : 0));
    int32_t bad = hp->n_vocab;
    FUZZ_REQUIRE(llmk_session_eval(s, &bad, 1, logits, nv, false) == LLMK_INVALID_TOKEN);
    free(logits);
    llmk_session_free(s);
}

/* 1 when the image loads as a model, else 0. */
static int fuzz_model_one(const uint8_t *data, size_t size) {
    llmk_model *m = NULL;
    int rc = llmk_model_load_memory(data, size, &m);
    if (rc != LLMK_OK) {
        FUZZ_REQUIRE(m == NULL && *llmk_last_error());
        return 0;
    }
    FUZZ_REQUIRE(m != NULL);
    uint64_t weight_bytes = 0;
    fmodel_check(m, data, size, &weight_bytes);

    const llmk_tokenizer *t = NULL;
    int32_t ids[2] = {0, m->hp.n_vocab - 1};
    if (llmk_model_tokenizer(m, &t) == LLMK_OK) {
        FUZZ_REQUIRE(t != NULL);
        int32_t tok[8];
        size_t n = 0;
        rc = llmk_tokenize(t, "Hi there", 8, true, false, tok, 8, &n);
        FUZZ_REQUIRE(rc == LLMK_OK || rc == LLMK_BUFFER_TOO_SMALL);
        for (size_t i = 0; i < n && i < 8; i++)
            if (tok[i] < m->hp.n_vocab) ids[i & 1] = tok[i];
    } else {
        FUZZ_REQUIRE(t == NULL && *llmk_last_error());
    }
    if (weight_bytes <= FMODEL_EVAL_MAX_BYTES && m->hp.n_layer <= 4)
        for (int path = LLMK_PATH_REF; path <= LLMK_PATH_FAST; path++) fmodel_eval(m, path, ids);
    llmk_model_free(m);
    return 1;
}

#ifndef LLMK_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_model_one(data, size);
    return 0;
}
#ifdef LLMK_FUZZ_REPLAY
int main(int argc, char **argv) { return fuzz_replay_main(argc, argv, fuzz_model_one); }
#endif
#endif
