/* Internal view of a loaded model, shared by the session and the two decode
 * paths (src/session.c, src/ref/decode.c). Weights are tensor infos of the
 * open GGUF file; their data points into its mapping. */
#ifndef LLMK_MODEL_H
#define LLMK_MODEL_H

#include "llmk.h"
#include "pool.h"

struct llmk_layer {
    const llmk_tensor_info *attn_norm, *wq, *wk, *wv, *wo;
    const llmk_tensor_info *bq, *bk, *bv;         /* NULL unless has_qkv_bias */
    const llmk_tensor_info *q_norm, *k_norm;      /* NULL unless has_qk_norm */
    const llmk_tensor_info *ffn_norm, *w_gate, *w_up, *w_down;
    /* 1-D tensors as f32 copies (model->vec_store, never the mapping):
     * norms and biases are read as plain float arrays. */
    const float *attn_norm_f, *ffn_norm_f, *bq_f, *bk_f, *bv_f, *q_norm_f, *k_norm_f;
    /* mixture of experts (qwen3moe; w_gate/w_up/w_down NULL): the router
     * [n_embd, n_expert] (gate_inp_f: its rows as f32, n_expert x n_embd)
     * and the experts' stacks, 3-D [n_embd, n_ff_exp, n_expert] for gate and
     * up, [n_ff_exp, n_embd, n_expert] for down (llmk_expert_view). */
    const llmk_tensor_info *gate_inp, *gate_exps, *up_exps, *down_exps;
    const float *gate_inp_f;
    /* gemma3: RMSNorm of each branch's output before its residual add
     * (NULL elsewhere), and whether the layer's attention slides */
    const llmk_tensor_info *attn_post_norm, *ffn_post_norm;
    const float *attn_post_norm_f, *ffn_post_norm_f;
    bool swa;
    /* gpt-oss: the O-projection's bias, the per-head attention sinks, and
     * the router's and experts' biases ([n_expert], then per expert its
     * n_ff_exp gate and up and n_embd down values, as f32) */
    const llmk_tensor_info *bo, *sinks, *gate_inp_b, *gate_exps_b, *up_exps_b, *down_exps_b;
    const float *bo_f, *sinks_f, *gate_inp_b_f, *gate_exps_b_f, *up_exps_b_f, *down_exps_b_f;
};

/* Mixture-of-experts hyperparameters (n_expert 0: a dense model). */
struct llmk_moe_hp {
    int32_t n_expert;      /* <arch>.expert_count */
    int32_t n_used;        /* <arch>.expert_used_count: experts per token (top-k) */
    int32_t n_ff_exp;      /* <arch>.expert_feed_forward_length */
    bool norm_w;           /* <arch>.expert_weights_norm (default true): top-k weights renormalised to sum 1 */
    bool clamp_glu;        /* gpt-oss: experts' clamped SwiGLU (glu.h swiglu_clamp) with glu_alpha, glu_limit */
    float glu_alpha, glu_limit;
};

struct llmk_model {
    llmk_gguf *gguf;
    llmk_tokenizer *tok;
    int tok_status;          /* LLMK_OK or why the tokenizer did not load */
    char tok_error[512];
    char arch[32];
    llmk_hparams hp;
    const llmk_tensor_info *tok_embd, *out_norm, *output; /* output == tok_embd when tied */
    const float *out_norm_f;
    struct llmk_layer *layers;
    float *vec_store;        /* f32 copies of the 1-D tensors */
    /* RoPE inverse frequency for each rotated pair i in [0, n_rot/2), with
     * freq base, scaling and rope_freqs already applied: angle = pos * inv_freq[i]. */
    double *rope_inv_freq;
    /* the same for sliding-window layers (gemma3: rope_theta_swa, unscaled);
     * NULL when sliding layers use rope_inv_freq (gpt-oss) or none slides */
    double *rope_inv_freq_swa;
    struct llmk_moe_hp moe;
    float *router_store;     /* f32 copies of routers not stored as aligned F32 */
    float *wscale;           /* per GGUF tensor: its X.scale (1 without one); NULL when no weight has one */
};

/* Layer il's RoPE inverse frequencies. */
static inline const double *llmk_layer_rope(const struct llmk_model *m, int il) {
    return m->layers[il].swa && m->rope_inv_freq_swa ? m->rope_inv_freq_swa : m->rope_inv_freq;
}

/* The first key position a query at pos attends to in layer il. */
static inline int32_t llmk_layer_key_lo(const struct llmk_model *m, int il, int32_t pos) {
    int32_t w = m->hp.n_swa;
    return m->layers[il].swa && pos >= w ? pos - w + 1 : 0;
}

/* Expert e's 2-D matrix of a 3-D expert stack t (rows ne[1], row length
 * ne[0]): a view into the same mapping, usable wherever a 2-D weight is. */
void llmk_expert_view(const llmk_tensor_info *t, int64_t e, llmk_tensor_info *out);

/* The factor weight w's products are multiplied by: its X.scale tensor
 * (the NVFP4 per-tensor scale), 1 without one. w may be a view of a
 * weight (an expert): found by name. */
float llmk_model_weight_scale(const struct llmk_model *m, const llmk_tensor_info *w);

/* Row r of the 2-D weight t (a token's embedding) as n f32, its bytes
 * read past the file mapping so that embedding lookups never make the
 * file's pages resident (a whole large folio each on current kernels). */
int llmk_model_row_f32(const struct llmk_model *m, const llmk_tensor_info *t, int64_t r, float *dst, int64_t n);

/* f64 reference decode (src/ref/decode.c). */
struct llmk_ref_state;
int llmk_ref_state_init(const struct llmk_model *m, int32_t n_ctx, llmk_pool *pool,
                        struct llmk_ref_state **out);
void llmk_ref_state_free(struct llmk_ref_state *st);
/* Evaluate ids[0..n) at positions pos..pos+n-1 (KV for earlier positions
 * already cached). out: per requested row (all rows when all_positions, else
 * only the last) n_vocab logits, or with hidden the n_embd final hidden
 * state (output_norm's RMSNorm, computed in f64, rounded to f32). */
int llmk_ref_eval(struct llmk_ref_state *st, int32_t pos, const int32_t *ids, size_t n,
                  float *out, bool all_positions, bool hidden);

#endif
