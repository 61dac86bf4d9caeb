/* Sessions: one sequence's KV cache, activations and worker pool, all sized
 * at init, and the f32 forward pass (LLMK_PATH_F32). LLMK_PATH_FAST hands
 * the sequence to the fused-phase executor (src/exec_cpu.c); the f64
 * reference path lives in src/ref/decode.c. */
#include "internal.h"
#include "kernels/glu.h"
#include "kernels/kernels.h"
#include "kernels/norm_fused.h"
#include "kernels/ops_f32.h"
#include "model.h"
#include "exec_cpu.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* One sequence's f32 KV cache: per layer, n_ctx rows of kv_dim floats for K
 * and the same for V. A later batched step gives each sequence one of these. */
struct kv_f32 {
    float *k, *v;
    int64_t layer_stride; /* n_ctx * kv_dim */
    uint64_t bytes;       /* of each of k and v: pages from the OS, committed as written */
};

struct llmk_session {
    const llmk_model *m;
    int path;
    int32_t n_ctx, n_batch, pos;
    llmk_pool *pool;
    int n_threads;
    struct llmk_ref_state *ref;
    struct llmk_exec *ex; /* LLMK_PATH_FAST: the fused-phase executor (src/exec_cpu.c) */
    /* f32 path */
    struct kv_f32 kv;
    float *rope_cs;  /* [n_ctx][n_rot/2][cos, sin] */
    float *rope_cs_swa; /* the same for sliding layers (NULL: none) */
    float *x, *xn, *q, *k, *v, *att, *o, *g, *u; /* [n_batch][width] activations */
    float *row_scratch; /* [n_threads][max_in] dequantized weight rows */
    int64_t row_stride;
    float *scores;      /* [n_threads][n_ctx] attention scores */
    /* mixture of experts: per token the router logits [n_expert] and its k
     * choices and weights; the tile map; one expert's gathered rows (in, g,
     * u, [n_batch] each) and every (token, slot)'s expert output [n_batch * k][n_embd] */
    float *moe_logits, *moe_w, *moe_in, *moe_g, *moe_u, *moe_y;
    int32_t *moe_sel, *moe_off, *moe_slots;
};

static void *alloc_floats(uint64_t a, uint64_t b, int *st) {
    uint64_t n, bytes;
    if (*st != LLMK_OK) return NULL;
    if (!llmk_mul_u64(a, b, &n) || !llmk_mul_u64(n, sizeof(float), &bytes) || bytes > SIZE_MAX) {
        *st = llmk_fail(LLMK_OUT_OF_MEMORY, "session: %llu x %llu floats overflow", (unsigned long long)a,
                        (unsigned long long)b);
        return NULL;
    }
    void *p = malloc(bytes ? (size_t)bytes : 1);
    if (!p) *st = llmk_fail(LLMK_OUT_OF_MEMORY, "session: %llu bytes", (unsigned long long)bytes);
    return p;
}

static int f32_init(llmk_session *s) {
    const llmk_hparams *hp = &s->m->hp;
    int st = LLMK_OK;
    uint64_t kvd = (uint64_t)hp->n_head_kv * hp->head_dim, qd = (uint64_t)hp->n_head * hp->head_dim;
    uint64_t nb = (uint64_t)s->n_batch;
    s->kv.layer_stride = (int64_t)((uint64_t)s->n_ctx * kvd);
    s->kv.bytes = (uint64_t)hp->n_layer * (uint64_t)s->n_ctx * kvd * sizeof(float); /* bounded by session_budget */
    if (!(s->kv.k = llmk_pages_alloc(s->kv.bytes)) || !(s->kv.v = llmk_pages_alloc(s->kv.bytes)))
        return llmk_fail(LLMK_OUT_OF_MEMORY, "session: KV cache of 2 x %llu bytes", (unsigned long long)s->kv.bytes);
    int half = hp->n_rot / 2;
    s->rope_cs = alloc_floats((uint64_t)s->n_ctx, 2 * (uint64_t)half, &st);
    if (s->m->rope_inv_freq_swa) s->rope_cs_swa = alloc_floats((uint64_t)s->n_ctx, 2 * (uint64_t)half, &st);
    s->x = alloc_floats(nb, (uint64_t)hp->n_embd, &st);
    s->xn = alloc_floats(nb, (uint64_t)hp->n_embd, &st);
    s->q = alloc_floats(nb, qd, &st);
    s->k = alloc_floats(nb, kvd, &st);
    s->v = alloc_floats(nb, kvd, &st);
    s->att = alloc_floats(nb, qd, &st);
    s->o = alloc_floats(nb, (uint64_t)hp->n_embd, &st);
    s->g = alloc_floats(nb, (uint64_t)hp->n_ff, &st);
    s->u = alloc_floats(nb, (uint64_t)hp->n_ff, &st);
    int64_t max_in = hp->n_embd;
    if (hp->n_ff > max_in) max_in = hp->n_ff;
    const struct llmk_moe_hp *mo = &s->m->moe;
    if (mo->n_expert) {
        uint64_t nk = nb * (uint64_t)mo->n_used;
        s->moe_logits = alloc_floats(nb, (uint64_t)mo->n_expert, &st);
        s->moe_w = alloc_floats(nk, 1, &st);
        s->moe_sel = (int32_t *)alloc_floats(nk, 1, &st);
        s->moe_slots = (int32_t *)alloc_floats(nk, 1, &st);
        s->moe_off = (int32_t *)alloc_floats((uint64_t)mo->n_expert + 1, 1, &st);
        s->moe_in = alloc_floats(nb, (uint64_t)hp->n_embd, &st);
        s->moe_g = alloc_floats(nb, (uint64_t)mo->n_ff_exp, &st);
        s->moe_u = alloc_floats(nb, (uint64_t)mo->n_ff_exp, &st);
        s->moe_y = alloc_floats(nk, (uint64_t)hp->n_embd, &st);
        if (mo->n_ff_exp > max_in) max_in = mo->n_ff_exp;
    }
    if ((int64_t)qd > max_in) max_in = (int64_t)qd;
    s->row_stride = (max_in + 15) & ~(int64_t)15;
    s->row_scratch = alloc_floats((uint64_t)s->n_threads, (uint64_t)s->row_stride, &st);
    s->scores = alloc_floats((uint64_t)s->n_threads, (uint64_t)s->n_ctx, &st);
    if (st != LLMK_OK) return st;
    llmk_rope_cs_table(s->m->rope_inv_freq, half, s->n_ctx, hp->rope_attn_factor, s->rope_cs);
    if (s->rope_cs_swa) llmk_rope_cs_table(s->m->rope_inv_freq_swa, half, s->n_ctx, 1.0, s->rope_cs_swa);
    return LLMK_OK;
}

/* The ref and f32 paths' bytes, checked before allocating (the fast path's
 * executor checks its own): the f64 or f32 KV cache, and what grows with the
 * context (RoPE table, per-thread scores) or the batch (activations). */
static int session_budget(const llmk_model *m, const llmk_session_params *p, int32_t n_ctx, int32_t n_batch) {
    const llmk_hparams *hp = &m->hp;
    int st = llmk_check_context(m, n_ctx, p->allow_long_ctx);
    if (st != LLMK_OK) return st;
    double elem = p->path == LLMK_PATH_REF ? 8 : 4, nth = p->n_threads > 0 ? p->n_threads : llmk_cpu_count();
    double kv = llmk_kv_bytes(1, n_ctx, hp->n_head_kv, hp->head_dim, elem) * hp->n_layer;
    double width = 3.0 * hp->n_embd + 2.0 * hp->n_head * hp->head_dim + 2.0 * hp->n_head_kv * hp->head_dim +
                   2.0 * hp->n_ff;
    if (m->moe.n_expert) /* f32_moe's rows */
        width += (2.0 + m->moe.n_used) * hp->n_embd + 2.0 * m->moe.n_ff_exp + m->moe.n_expert + 3.0 * m->moe.n_used;
    double scratch = elem * ((double)n_ctx * (hp->n_rot + nth) + (double)n_batch * width + hp->n_vocab);
    return llmk_check_memory(kv, scratch, p->mem_limit, n_ctx, 1, n_ctx);
}

int llmk_session_init(const llmk_model *m, const llmk_session_params *p, llmk_session **out) {
    llmk_error_clear();
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_session_init: out is NULL");
    *out = NULL;
    if (!m) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_session_init: model is NULL");
    llmk_session_params dp = {0};
    if (!p) p = &dp;
    if (p->path < LLMK_PATH_REF || p->path > LLMK_PATH_FAST)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_session_init: path %d is not ref/f32/fast", p->path);
    if (p->kv_type != LLMK_TYPE_F32 && p->kv_type != LLMK_TYPE_F16 && p->kv_type != LLMK_TYPE_Q8_0)
        return llmk_fail(LLMK_UNSUPPORTED, "llmk_session_init: KV cache type %u (%s) is not f32, f16 or q8_0",
                         p->kv_type, llmk_type_name(p->kv_type) ? llmk_type_name(p->kv_type) : "unknown");
    if (p->kv_type != LLMK_TYPE_F32 && p->path != LLMK_PATH_FAST)
        return llmk_fail(LLMK_UNSUPPORTED, "llmk_session_init: a %s KV cache needs the fast path (ref and f32 keep f32)",
                         llmk_type_name(p->kv_type));
    int32_t n_ctx = p->n_ctx > 0 ? p->n_ctx : m->hp.n_ctx_train;
    if (n_ctx > (1 << 22))
        return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_session_init: n_ctx %d exceeds the limit %d", n_ctx, 1 << 22);
    int32_t n_batch = p->n_batch > 0 ? (p->n_batch < 4096 ? p->n_batch : 4096) : 32;
    if (p->path != LLMK_PATH_FAST) {
        int bst = session_budget(m, p, n_ctx, n_batch);
        if (bst != LLMK_OK) return bst;
    }
    llmk_session *s = calloc(1, sizeof *s);
    if (!s) return llmk_fail(LLMK_OUT_OF_MEMORY, "llmk_session_init: session struct");
    s->m = m;
    s->path = p->path;
    s->n_ctx = n_ctx;
    s->n_batch = n_batch;
    int st;
    if (s->path == LLMK_PATH_FAST) { /* the executor brings its own workers */
        struct llmk_exec_params ep = {.n_ctx = n_ctx, .n_threads = p->n_threads, .n_batch = p->n_batch, .n_seq = 1,
                                      .kv_type = p->kv_type, .allow_long_ctx = p->allow_long_ctx,
                                      .mem_limit = p->mem_limit, .progress = p->progress_callback,
                                      .progress_user = p->progress_callback_user_data};
        st = llmk_exec_init(m, &ep, &s->ex);
    } else if ((st = llmk_pool_create(p->n_threads, &s->pool)) == LLMK_OK) {
        s->n_threads = llmk_pool_size(s->pool);
        if (s->path == LLMK_PATH_REF)
            st = llmk_ref_state_init(m, n_ctx, s->pool, &s->ref);
        else
            st = f32_init(s);
        /* nothing is repacked on these paths: the one report is the last */
        if (st == LLMK_OK && p->progress_callback && !p->progress_callback(1.0f, p->progress_callback_user_data))
            st = llmk_fail(LLMK_INTERRUPTED, "llmk_session_init: cancelled by the progress callback at 100%%");
    }
    if (st != LLMK_OK) {
        llmk_session_free(s);
        return st;
    }
    *out = s;
    return LLMK_OK;
}

void llmk_session_free(llmk_session *s) {
    if (!s) return;
    if (s->ref) llmk_ref_state_free(s->ref);
    llmk_exec_free(s->ex);
    if (s->pool) llmk_pool_free(s->pool);
    llmk_pages_free(s->kv.k, s->kv.bytes);
    llmk_pages_free(s->kv.v, s->kv.bytes);
    free(s->rope_cs);
    free(s->rope_cs_swa);
    free(s->x);
    free(s->xn);
    free(s->q);
    free(s->k);
    free(s->v);
    free(s->att);
    free(s->o);
    free(s->g);
    free(s->u);
    float *moe[] = {s->moe_logits, s->moe_w, s->moe_in, s->moe_g, s->moe_u, s->moe_y};
    for (size_t i = 0; i < LLMK_ARRAY_LEN(moe); i++) free(moe[i]);
    free(s->moe_sel), free(s->moe_off), free(s->moe_slots);
    free(s->row_scratch);
    free(s->scores);
    free(s);
}

int32_t llmk_session_pos(const llmk_session *s) { return s ? s->pos : 0; }
int32_t llmk_session_n_ctx(const llmk_session *s) { return s ? s->n_ctx : 0; }
int32_t llmk_session_n_threads(const llmk_session *s) {
    return !s ? 0 : s->ex ? llmk_exec_n_threads(s->ex) : s->n_threads;
}
const char *llmk_session_kernels(const llmk_session *s) {
    return !s ? NULL : s->ex ? llmk_exec_kernels(s->ex) : s->path == LLMK_PATH_REF ? "ref" : "f32";
}

int llmk_session_truncate(llmk_session *s, int32_t pos) {
    llmk_error_clear();
    if (!s) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_session_truncate: session is NULL");
    if (pos < 0 || pos > s->pos)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_session_truncate: position %d outside [0, %d]", pos, s->pos);
    s->pos = pos; /* cache rows past pos are overwritten before they are read again */
    return LLMK_OK;
}

/* ---- f32 forward --------------------------------------------------------- */

struct attn_ctx {
    llmk_session *s;
    int il;
    int32_t pos0;
    int64_t n_tok;
};

static void attn_worker(void *arg, int ith, int nth) {
    struct attn_ctx *c = arg;
    llmk_session *s = c->s;
    const llmk_hparams *hp = &s->m->hp;
    int64_t lo, hi, items = c->n_tok * hp->n_head;
    llmk_split_range(items, ith, nth, &lo, &hi);
    int64_t kvd = (int64_t)hp->n_head_kv * hp->head_dim, qd = (int64_t)hp->n_head * hp->head_dim;
    int group = hp->n_head / hp->n_head_kv;
    float scale = (float)hp->attn_scale;
    const float *K = s->kv.k + c->il * s->kv.layer_stride, *V = s->kv.v + c->il * s->kv.layer_stride;
    for (int64_t it = lo; it < hi; it++) {
        int64_t t = it / hp->n_head;
        int h = (int)(it % hp->n_head), g = h / group;
        int64_t k0 = llmk_layer_key_lo(s->m, c->il, c->pos0 + (int32_t)t), off = k0 * kvd + (int64_t)g * hp->head_dim;
        const float *sinks = s->m->layers[c->il].sinks_f;
        llmk_f32_attend(s->q + t * qd + (int64_t)h * hp->head_dim, K + off, V + off, c->pos0 + t + 1 - k0, kvd,
                        hp->head_dim, scale, sinks ? sinks[h] : -INFINITY, s->scores + (int64_t)ith * s->n_ctx,
                        s->att + t * qd + (int64_t)h * hp->head_dim);
    }
}

/* x += o row by row, through the branch's post-norm w when it has one
 * (gemma: x += rmsnorm(o) * w). */
static void add_branch(llmk_session *s, const float *w, int64_t n_tok) {
    const struct llmk_kernels *K = llmk_kernels();
    int64_t E = s->m->hp.n_embd;
    if (!w) {
        for (int64_t i = 0; i < n_tok * E; i++) s->x[i] += s->o[i];
        return;
    }
    for (int64_t t = 0; t < n_tok; t++)
        K->norm->add_rmsnorm(s->x + t * E, s->x + t * E, s->o + t * E, w, E, (float)s->m->hp.rms_eps, 1.0f);
}

static void add_bias(float *y, const float *b, int64_t n_tok, int64_t n) {
    if (!b) return;
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t i = 0; i < n; i++) y[t * n + i] += b[i];
}

/* y's n_tok rows of w's outputs times w's scale (an NVFP4 tensor's X.scale;
 * llama.cpp scales the product the same way). */
static void weight_scale(const llmk_session *s, const llmk_tensor_info *w, float *y, int64_t n_tok) {
    float sc = llmk_model_weight_scale(s->m, w);
    if (sc != 1.0f) llmk_scale_f32(y, n_tok * (int64_t)w->ne[1], sc);
}

/* The MoE FFN of layer L on the normed rows xn: route each token, then per
 * expert (tile map order) its tokens' rows gathered, gate/up, SwiGLU and
 * down as one matmul each, and each token's outputs combined in slot
 * order. A row's dots do not depend on which rows share the matmul
 * (llmk_f32_matmul), so neither do the logits. */
static int f32_moe(llmk_session *s, const struct llmk_layer *L, int64_t n_tok) {
    const struct llmk_moe_hp *mo = &s->m->moe;
    const struct llmk_kernels *K = llmk_kernels();
    int64_t E = s->m->hp.n_embd, X = mo->n_expert, k = mo->n_used;
    int st;
    if ((st = llmk_f32_matmul(s->pool, L->gate_inp, s->xn, n_tok, s->moe_logits, s->row_scratch, s->row_stride)) != LLMK_OK)
        return st;
    add_bias(s->moe_logits, L->gate_inp_b_f, n_tok, X);
    for (int64_t t = 0; t < n_tok; t++)
        K->moe_router(s->moe_logits + t * X, (int)X, (int)k, mo->norm_w, s->moe_sel + t * k, s->moe_w + t * k);
    llmk_moe_tile_map(s->moe_sel, (int32_t)n_tok, (int)k, (int)X, s->moe_off, s->moe_slots);
    for (int64_t e = 0; e < X; e++) {
        int32_t a = s->moe_off[e], n = s->moe_off[e + 1] - a;
        if (!n) continue;
        for (int32_t i = 0; i < n; i++)
            memcpy(s->moe_in + i * E, s->xn + (s->moe_slots[a + i] / k) * E, (size_t)E * sizeof(float));
        llmk_tensor_info gv, uv, dv;
        llmk_expert_view(L->gate_exps, e, &gv), llmk_expert_view(L->up_exps, e, &uv), llmk_expert_view(L->down_exps, e, &dv);
        const llmk_tensor_info *gu[2] = {&gv, &uv};
        float *const gu_out[2] = {s->moe_g, s->moe_u};
        if ((st = llmk_f32_matmul_multi(s->pool, 2, gu, s->moe_in, n, gu_out, s->row_scratch, s->row_stride)) != LLMK_OK)
            return st;
        weight_scale(s, &gv, s->moe_g, n), weight_scale(s, &uv, s->moe_u, n);
        int64_t FE = mo->n_ff_exp;
        add_bias(s->moe_g, L->gate_exps_b_f ? L->gate_exps_b_f + e * FE : NULL, n, FE);
        add_bias(s->moe_u, L->up_exps_b_f ? L->up_exps_b_f + e * FE : NULL, n, FE);
        if (mo->clamp_glu)
            K->glu->swiglu_clamp(s->moe_g, s->moe_u, (int64_t)n * FE, mo->glu_alpha, mo->glu_limit);
        else
            llmk_f32_swiglu(s->moe_g, s->moe_u, (int64_t)n * FE);
        if ((st = llmk_f32_matmul(s->pool, &dv, s->moe_g, n, s->moe_in, s->row_scratch, s->row_stride)) != LLMK_OK)
            return st;
        weight_scale(s, &dv, s->moe_in, n);
        add_bias(s->moe_in, L->down_exps_b_f ? L->down_exps_b_f + e * E : NULL, n, E);
        for (int32_t i = 0; i < n; i++)
            memcpy(s->moe_y + (int64_t)s->moe_slots[a + i] * E, s->moe_in + i * E, (size_t)E * sizeof(float));
    }
    for (int64_t t = 0; t < n_tok; t++) {
        const float *ys[LLMK_MOE_KMAX];
        for (int64_t j = 0; j < k; j++) ys[j] = s->moe_y + (t * k + j) * E;
        K->moe_combine(s->x + t * E, ys, s->moe_w + t * k, (int)k, E);
    }
    return LLMK_OK;
}

/* One chunk of n_tok <= n_batch tokens at positions pos0.. . out_rows: which
 * rows get an output (0 none, 1 the last, 2 all); out: their destination,
 * logits, or with hidden the final RMSNorm's rows (what the LM head reads). */
static int f32_forward(llmk_session *s, const int32_t *ids, int64_t n_tok, int32_t pos0, int out_rows,
                       float *out, bool hidden) {
    const llmk_model *m = s->m;
    const llmk_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, F = hp->n_ff, HD = hp->head_dim;
    int64_t qd = hp->n_head * HD, kvd = hp->n_head_kv * HD;
    float eps = (float)hp->rms_eps;
    int half = hp->n_rot / 2;
    const struct llmk_kernels *K = llmk_kernels();
    int st;
    for (int64_t t = 0; t < n_tok; t++) {
        if ((st = llmk_model_row_f32(m, m->tok_embd, ids[t], s->x + t * E, E)) != LLMK_OK)
            return llmk_fail(st, "embedding row %d: %s", ids[t], llmk_last_error());
        if (hp->embd_scale != 1.0) llmk_scale_f32(s->x + t * E, E, (float)hp->embd_scale);
    }
    for (int il = 0; il < hp->n_layer; il++) {
        const struct llmk_layer *L = &m->layers[il];
        for (int64_t t = 0; t < n_tok; t++) K->rmsnorm(s->xn + t * E, s->x + t * E, L->attn_norm_f, E, eps);
        const llmk_tensor_info *qkv[3] = {L->wq, L->wk, L->wv};
        float *const qkv_out[3] = {s->q, s->k, s->v};
        if ((st = llmk_f32_matmul_multi(s->pool, 3, qkv, s->xn, n_tok, qkv_out, s->row_scratch, s->row_stride)) != LLMK_OK)
            return st;
        for (int i = 0; i < 3; i++) weight_scale(s, qkv[i], qkv_out[i], n_tok);
        add_bias(s->q, L->bq_f, n_tok, qd);
        add_bias(s->k, L->bk_f, n_tok, kvd);
        add_bias(s->v, L->bv_f, n_tok, kvd);
        float *Kc = s->kv.k + il * s->kv.layer_stride, *Vc = s->kv.v + il * s->kv.layer_stride;
        for (int64_t t = 0; t < n_tok; t++) {
            float *q = s->q + t * qd, *k = s->k + t * kvd;
            if (L->q_norm_f) {
                for (int h = 0; h < hp->n_head; h++) K->rmsnorm(q + h * HD, q + h * HD, L->q_norm_f, HD, eps);
                for (int h = 0; h < hp->n_head_kv; h++) K->rmsnorm(k + h * HD, k + h * HD, L->k_norm_f, HD, eps);
            }
            const float *cs = (L->swa && s->rope_cs_swa ? s->rope_cs_swa : s->rope_cs) + (int64_t)(pos0 + t) * half * 2;
            K->rope(q, hp->n_head, (int)HD, cs, hp->rope_neox);
            K->rope(k, hp->n_head_kv, (int)HD, cs, hp->rope_neox);
            memcpy(Kc + (pos0 + t) * kvd, k, (size_t)kvd * sizeof(float));
            memcpy(Vc + (pos0 + t) * kvd, s->v + t * kvd, (size_t)kvd * sizeof(float));
        }
        struct attn_ctx ac = {s, il, pos0, n_tok};
        llmk_pool_run(s->pool, attn_worker, &ac);
        if ((st = llmk_f32_matmul(s->pool, L->wo, s->att, n_tok, s->o, s->row_scratch, s->row_stride)) != LLMK_OK)
            return st;
        weight_scale(s, L->wo, s->o, n_tok);
        add_bias(s->o, L->bo_f, n_tok, E);
        add_branch(s, L->attn_post_norm_f, n_tok);
        for (int64_t t = 0; t < n_tok; t++) K->rmsnorm(s->xn + t * E, s->x + t * E, L->ffn_norm_f, E, eps);
        if (L->gate_exps) {
            if ((st = f32_moe(s, L, n_tok)) != LLMK_OK) return st;
            continue;
        }
        const llmk_tensor_info *gu[2] = {L->w_gate, L->w_up};
        float *const gu_out[2] = {s->g, s->u};
        if ((st = llmk_f32_matmul_multi(s->pool, 2, gu, s->xn, n_tok, gu_out, s->row_scratch, s->row_stride)) != LLMK_OK)
            return st;
        weight_scale(s, L->w_gate, s->g, n_tok), weight_scale(s, L->w_up, s->u, n_tok);
        if (hp->ffn_gelu)
            K->glu->gelu_glu(s->g, s->u, n_tok * F);
        else
            llmk_f32_swiglu(s->g, s->u, n_tok * F);
        if ((st = llmk_f32_matmul(s->pool, L->w_down, s->g, n_tok, s->o, s->row_scratch, s->row_stride)) != LLMK_OK)
            return st;
        weight_scale(s, L->w_down, s->o, n_tok);
        add_branch(s, L->ffn_post_norm_f, n_tok);
    }
    if (out_rows == 0) return LLMK_OK;
    int64_t first = out_rows == 1 ? n_tok - 1 : 0;
    for (int64_t t = first; t < n_tok; t++)
        K->rmsnorm(hidden ? out + (t - first) * E : s->xn + t * E, s->x + t * E, m->out_norm_f, E, eps);
    if (hidden) return LLMK_OK;
    st = llmk_f32_matmul(s->pool, m->output, s->xn + first * E, n_tok - first, out, s->row_scratch, s->row_stride);
    if (st == LLMK_OK) weight_scale(s, m->output, out, n_tok - first);
    if (st == LLMK_OK && hp->logit_softcap > 0) llmk_softcap_f32(out, (n_tok - first) * hp->n_vocab, (float)hp->logit_softcap);
    return st;
}

/* The ref and f32 paths carry a NaN or infinity through to their outputs
 * (the fast path's executor fails where it meets one): refuse it here, so
 * every path fails a corrupt model with the same status. rows of W values
 * (logits, or hidden-state elements), the first at position pos0. */
static int check_rows(const float *out, size_t rows, int64_t W, int32_t pos0, bool hidden) {
    for (size_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < W; j++)
            if (!isfinite(out[(int64_t)r * W + j]))
                return llmk_fail(LLMK_NAN_INPUT, "session: %s %lld is %g (position %d): a weight or activation "
                                 "is not finite", hidden ? "hidden-state element" : "logit of token", (long long)j,
                                 (double)out[(int64_t)r * W + j], pos0 + (int32_t)r);
    return LLMK_OK;
}

/* llmk_session_eval, or with hidden llmk_session_eval_hidden: out's rows are
 * W = n_vocab logits or n_embd hidden-state values. */
static int session_eval(llmk_session *s, const int32_t *ids, size_t n, float *out, size_t cap, bool all_positions,
                        bool hidden) {
    const char *fn = hidden ? "llmk_session_eval_hidden" : "llmk_session_eval";
    if (!s || (!ids && n)) return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: NULL argument", fn);
    if (n == 0) return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: no tokens", fn);
    const llmk_hparams *hp = &s->m->hp;
    if (n > (size_t)(s->n_ctx - s->pos))
        return llmk_fail(LLMK_CONTEXT_FULL, "session: %zu tokens at position %d exceed the context of %d", n,
                         s->pos, s->n_ctx);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= hp->n_vocab)
            return llmk_fail(LLMK_INVALID_TOKEN, "session: token id %d (index %zu) outside the vocabulary [0, %d)",
                             ids[i], i, hp->n_vocab);
    int64_t W = hidden ? hp->n_embd : hp->n_vocab;
    uint64_t need = 0;
    if (out) {
        if (!llmk_mul_u64(all_positions ? n : 1, (uint64_t)W, &need))
            return llmk_fail(LLMK_INVALID_ARGUMENT, "session: output size overflows");
        if (cap < need)
            return llmk_fail(LLMK_BUFFER_TOO_SMALL, "session: %s buffer holds %zu floats, %llu needed",
                             hidden ? "hidden-state" : "logits", cap, (unsigned long long)need);
    }
    int st = LLMK_OK;
    if (s->path == LLMK_PATH_REF) {
        st = llmk_ref_eval(s->ref, s->pos, ids, n, out, all_positions, hidden);
    } else if (s->ex) { /* the executor keeps its own position: align it with a truncation first */
        if ((st = llmk_exec_truncate(s->ex, 0, s->pos)) == LLMK_OK)
            st = hidden ? llmk_exec_eval_hidden(s->ex, 0, ids, n, out, cap, all_positions)
                        : llmk_exec_eval(s->ex, 0, ids, n, out, cap, all_positions);
    } else {
        for (size_t off = 0; off < n && st == LLMK_OK; off += (size_t)s->n_batch) {
            size_t c = n - off < (size_t)s->n_batch ? n - off : (size_t)s->n_batch;
            bool last_chunk = off + c == n;
            int rows = !out ? 0 : all_positions ? 2 : last_chunk ? 1 : 0;
            float *dst = rows == 2 ? out + off * (size_t)W : out;
            st = f32_forward(s, ids + off, (int64_t)c, s->pos + (int32_t)off, rows, dst, hidden);
        }
    }
    if (st == LLMK_OK && out && !s->ex)
        st = check_rows(out, all_positions ? n : 1, W, s->pos + (all_positions ? 0 : (int32_t)n - 1), hidden);
    if (st != LLMK_OK) return st; /* the position is unchanged: rows written past it are dead */
    s->pos += (int32_t)n;
    return LLMK_OK;
}

int llmk_session_eval(llmk_session *s, const int32_t *ids, size_t n, float *logits, size_t logits_cap,
                      bool all_positions) {
    llmk_error_clear();
    return session_eval(s, ids, n, logits, logits_cap, all_positions, false);
}

int llmk_session_eval_hidden(llmk_session *s, const int32_t *ids, size_t n, float *out, size_t out_cap,
                             bool all_positions) {
    llmk_error_clear();
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_session_eval_hidden: out is NULL (llmk_session_eval "
                               "with NULL logits appends without an output)");
    return session_eval(s, ids, n, out, out_cap, all_positions, true);
}
