/* The f64 reference decode loop (LLMK_PATH_REF): one readable layer walk
 * composed from the seed-000 primitives (gemv_transposed, residual add, KV
 * reserve/append_into) and small f64 helpers for the rest. Slow on purpose;
 * every faster path is compared with it.
 *
 * Weights: for each chunk of up to REF_CHUNK tokens, each matrix is
 * dequantized (f32 row decoder, then widened) into one f64 scratch in the
 * transposed m x n layout gemv_transposed wants, and applied to every token of
 * the chunk. So memory is one largest matrix in f64 (the LM head: n_embd x
 * n_vocab x 8 bytes, 226 MB for SmolLM2-135M) rather than the whole model
 * (about 1.1 GB), at the price of re-decoding the weights every chunk. */
#include "internal.h"
#include "model.h"
#include "ref/ref.h"
#include "kernels/moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { REF_CHUNK = 64, REF_ROWS = 16 };

struct llmk_ref_state {
    const llmk_model *m;
    llmk_pool *pool;
    int32_t n_ctx;
    double **k_cache, **v_cache; /* per layer, n_ctx * kv_dim, from llmk_kv_cache_reserve_flat */
    size_t kv_capacity;
    double *w;       /* transposed weight scratch (largest matrix) */
    size_t w_len;
    float *row;      /* REF_ROWS f32 weight rows (also the embedding row) */
    double *x, *xn, *q, *k, *v, *att, *o, *g, *u, *scores, *logits;
    /* mixture of experts: per token k choices and weights; one expert's
     * gathered rows (in, g, u, out); every (token, slot)'s output */
    int32_t *moe_sel;
    double *moe_w, *moe_in, *moe_g, *moe_u, *moe_o, *moe_y;
};

static double *dalloc(uint64_t n, int *st) {
    if (*st != LLMK_OK) return NULL;
    uint64_t bytes;
    if (!llmk_mul_u64(n ? n : 1, sizeof(double), &bytes) || bytes > SIZE_MAX) {
        *st = llmk_fail(LLMK_OUT_OF_MEMORY, "ref: %llu doubles overflow", (unsigned long long)n);
        return NULL;
    }
    double *p = malloc((size_t)bytes);
    if (!p) *st = llmk_fail(LLMK_OUT_OF_MEMORY, "ref: %llu bytes", (unsigned long long)bytes);
    return p;
}

void llmk_ref_state_free(struct llmk_ref_state *st) {
    if (!st) return;
    for (int il = 0; st->k_cache && il < st->m->hp.n_layer; il++) {
        free(st->k_cache[il]);
        free(st->v_cache[il]);
    }
    free(st->k_cache);
    free(st->v_cache);
    free(st->w);
    free(st->row);
    double *bufs[] = {st->x, st->xn, st->q, st->k, st->v, st->att, st->o, st->g, st->u, st->scores, st->logits,
                      st->moe_w, st->moe_in, st->moe_g, st->moe_u, st->moe_o, st->moe_y};
    free(st->moe_sel);
    for (size_t i = 0; i < LLMK_ARRAY_LEN(bufs); i++) free(bufs[i]);
    free(st);
}

int llmk_ref_state_init(const llmk_model *m, int32_t n_ctx, llmk_pool *pool, struct llmk_ref_state **out) {
    const llmk_hparams *hp = &m->hp;
    *out = NULL;
    struct llmk_ref_state *s = calloc(1, sizeof *s);
    if (!s) return llmk_fail(LLMK_OUT_OF_MEMORY, "ref: state");
    s->m = m;
    s->pool = pool;
    s->n_ctx = n_ctx;
    int st = LLMK_OK;
    uint64_t E = (uint64_t)hp->n_embd, F = (uint64_t)hp->n_ff, V = (uint64_t)hp->n_vocab;
    uint64_t qd = (uint64_t)hp->n_head * hp->head_dim, kvd = (uint64_t)hp->n_head_kv * hp->head_dim;
    uint64_t cap = (uint64_t)n_ctx * kvd;
    if (cap > (uint64_t)LLMK_MAX_DIM) {
        llmk_ref_state_free(s);
        return llmk_fail(LLMK_DIMENSION_TOO_LARGE,
                         "ref: KV cache of %d tokens x %llu values per layer exceeds the seed limit of %d elements",
                         n_ctx, (unsigned long long)kvd, LLMK_MAX_DIM);
    }
    s->kv_capacity = (size_t)cap;
    s->k_cache = calloc((size_t)hp->n_layer, sizeof *s->k_cache);
    s->v_cache = calloc((size_t)hp->n_layer, sizeof *s->v_cache);
    if (!s->k_cache || !s->v_cache) st = llmk_fail(LLMK_OUT_OF_MEMORY, "ref: cache tables");
    for (int il = 0; st == LLMK_OK && il < hp->n_layer; il++) {
        if ((st = llmk_kv_cache_reserve_flat((int64_t)cap, &s->k_cache[il])) == LLMK_OK)
            st = llmk_kv_cache_reserve_flat((int64_t)cap, &s->v_cache[il]);
    }
    uint64_t wmax = E * V;
    uint64_t FE = (uint64_t)m->moe.n_ff_exp, KU = (uint64_t)m->moe.n_used;
    uint64_t cand[] = {E * qd, E * kvd, qd * E, E * F, F * E, E * FE, E * (uint64_t)m->moe.n_expert};
    for (size_t i = 0; i < LLMK_ARRAY_LEN(cand); i++)
        if (cand[i] > wmax) wmax = cand[i];
    s->w = dalloc(wmax, &st);
    s->w_len = (size_t)wmax;
    uint64_t max_in = E > F ? E : F;
    if (FE > max_in) max_in = FE;
    if (qd > max_in) max_in = qd;
    if (st == LLMK_OK && !(s->row = malloc((size_t)max_in * REF_ROWS * sizeof(float))))
        st = llmk_fail(LLMK_OUT_OF_MEMORY, "ref: row scratch");
    uint64_t C = REF_CHUNK;
    s->x = dalloc(C * E, &st);
    s->xn = dalloc(C * E, &st);
    s->q = dalloc(C * qd, &st);
    s->k = dalloc(C * kvd, &st);
    s->v = dalloc(C * kvd, &st);
    s->att = dalloc(C * qd, &st);
    s->o = dalloc(C * E, &st);
    s->g = dalloc(C * F, &st);
    s->u = dalloc(C * F, &st);
    s->scores = dalloc((uint64_t)n_ctx, &st);
    s->logits = dalloc(V, &st);
    if (m->moe.n_expert) {
        s->moe_w = dalloc(C * KU, &st);
        s->moe_sel = (int32_t *)dalloc(C * KU, &st);
        s->moe_in = dalloc(C * E, &st);
        s->moe_g = dalloc(C * FE, &st);
        s->moe_u = dalloc(C * FE, &st);
        s->moe_o = dalloc(C * E, &st);
        s->moe_y = dalloc(C * KU * E, &st);
    }
    if (st != LLMK_OK) {
        llmk_ref_state_free(s);
        return st;
    }
    *out = s;
    return LLMK_OK;
}

/* ---- small f64 helpers --------------------------------------------------- */

static void rmsnorm(double *out, const double *x, const float *w, int64_t n, double eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * r * (double)w[i];
}

/* af: YaRN's attention factor on cos and sin (1 otherwise). */
static void rope(double *x, int n_heads, int head_dim, const double *inv_freq, int32_t pos, bool neox, double af) {
    int half = head_dim / 2;
    for (int i = 0; i < half; i++) {
        double a = (double)pos * inv_freq[i], c = cos(a) * af, s = sin(a) * af;
        for (int h = 0; h < n_heads; h++) {
            double *v = x + (int64_t)h * head_dim;
            int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
            double p = v[i0], q = v[i1];
            v[i0] = p * c - q * s;
            v[i1] = p * s + q * c;
        }
    }
}

/* Causal attention of one query head over n_kv cached positions (k and v
 * at the first one the query sees); sink: a logit in the softmax's
 * denominator only (gpt-oss; -INFINITY: none). */
static void attend(const double *q, const double *k, const double *v, int64_t n_kv, int64_t stride,
                   int head_dim, double scale, double sink, double *scores, double *out) {
    double mx = sink;
    for (int64_t j = 0; j < n_kv; j++) {
        double d = 0;
        for (int i = 0; i < head_dim; i++) d += q[i] * k[j * stride + i];
        scores[j] = d * scale;
        if (scores[j] > mx) mx = scores[j];
    }
    double sum = exp(sink - mx);
    for (int64_t j = 0; j < n_kv; j++) sum += (scores[j] = exp(scores[j] - mx));
    for (int i = 0; i < head_dim; i++) out[i] = 0;
    for (int64_t j = 0; j < n_kv; j++)
        for (int i = 0; i < head_dim; i++) out[i] += scores[j] / sum * v[j * stride + i];
}

static void swiglu(double *g, const double *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
}

/* gpt-oss's clamped SwiGLU: gate capped at limit, up clipped to +-limit,
 * gate sigmoid(alpha gate) (up + 1). */
static void swiglu_clamp(double *g, const double *u, int64_t n, double alpha, double limit) {
    for (int64_t i = 0; i < n; i++) {
        double v = g[i] < limit ? g[i] : limit, c = u[i] < -limit ? -limit : u[i] > limit ? limit : u[i];
        g[i] = v / (1.0 + exp(-alpha * v)) * (c + 1.0);
    }
}

/* GELU in its tanh form (gemma's gelu_pytorch_tanh) times up. */
static void geglu(double *g, const double *u, int64_t n) {
    const double c = sqrt(2.0 / M_PI);
    for (int64_t i = 0; i < n; i++) g[i] = 0.5 * g[i] * (1.0 + tanh(c * (g[i] + 0.044715 * g[i] * g[i] * g[i]))) * u[i];
}


/* Decode w ([n_in, n_out], rows of n_in) into s->w as the m x n = n_in x n_out
 * matrix A with A[i*n_out + j] = W[j][i], so y = A^T x is W x; times w's
 * scale (llmk_model_weight_scale), exact in double. */
static int load_transposed(struct llmk_ref_state *s, const llmk_tensor_info *w) {
    int64_t n_in = (int64_t)w->ne[0], n_out = (int64_t)w->ne[1];
    double scale = llmk_model_weight_scale(s->m, w);
    uint64_t rb;
    int st = llmk_row_bytes(w->type, w->ne[0], &rb);
    if (st != LLMK_OK) return st;
    LLMK_CHECK((uint64_t)n_in * (uint64_t)n_out <= s->w_len);
    /* REF_ROWS rows at a time, so the transposed writes land in runs of
     * REF_ROWS doubles instead of one cache line per element. */
    for (int64_t j0 = 0; j0 < n_out; j0 += REF_ROWS) {
        int64_t nj = n_out - j0 < REF_ROWS ? n_out - j0 : REF_ROWS;
        for (int64_t r = 0; r < nj; r++)
            if ((st = llmk_dequantize_row(w->type, (const unsigned char *)w->data + (uint64_t)(j0 + r) * rb,
                                          s->row + r * n_in, n_in)) != LLMK_OK)
                return llmk_fail(st, "ref: tensor %s row %lld: %s", w->name, (long long)(j0 + r), llmk_last_error());
        for (int64_t i = 0; i < n_in; i++)
            for (int64_t r = 0; r < nj; r++) s->w[i * n_out + j0 + r] = (double)s->row[r * n_in + i] * scale;
    }
    return LLMK_OK;
}

/* y[t] = W x[t] (+ bias) for t < n_tok. */
static int project(struct llmk_ref_state *s, const llmk_tensor_info *w, const float *bias, const double *x,
                   int64_t n_tok, double *y) {
    int64_t n_in = (int64_t)w->ne[0], n_out = (int64_t)w->ne[1];
    int st = load_transposed(s, w);
    for (int64_t t = 0; st == LLMK_OK && t < n_tok; t++) {
        st = llmk_ref_gemv_transposed(s->pool, s->w, (size_t)(n_in * n_out), x + t * n_in, (size_t)n_in, n_in,
                                      n_out, y + t * n_out, (size_t)n_out);
        if (bias)
            for (int64_t j = 0; j < n_out; j++) y[t * n_out + j] += (double)bias[j];
    }
    return st;
}

static int residual(struct llmk_ref_state *s, double *x, const double *d, int64_t n) {
    return llmk_ref_residual_add(s->pool, x, (size_t)n, d, (size_t)n, n, x, (size_t)n);
}

/* x[t] += rmsnorm(d[t]) * w for n rows of E (gemma's post-norms), or the
 * plain residual add without w. */
static int post_residual(struct llmk_ref_state *s, const float *w, double *d, int64_t n, int64_t E) {
    if (!w) return residual(s, s->x, d, n * E);
    for (int64_t t = 0; t < n; t++) {
        rmsnorm(d + t * E, d + t * E, w, E, s->m->hp.rms_eps);
        for (int64_t i = 0; i < E; i++) s->x[t * E + i] += d[t * E + i];
    }
    return LLMK_OK;
}

/* Route one token in f64: softmax of the router logits, the k largest
 * (equal logits: the lower index first), renormalised when norm_w. */
static void route(const struct llmk_moe_hp *mo, const double *l, int32_t *sel, double *w) {
    double mx = -INFINITY, sum = 0, ssum = 0;
    for (int e = 0; e < mo->n_expert; e++)
        if (l[e] > mx) mx = l[e];
    for (int e = 0; e < mo->n_expert; e++) sum += exp(l[e] - mx);
    for (int j = 0; j < mo->n_used; j++) {
        int best = -1;
        for (int e = 0; e < mo->n_expert; e++) {
            bool taken = false;
            for (int i = 0; i < j; i++) taken = taken || sel[i] == e;
            if (!taken && (best < 0 || l[e] > l[best])) best = e;
        }
        sel[j] = best;
        ssum += (w[j] = exp(l[best] - mx) / sum);
    }
    if (mo->norm_w)
        for (int j = 0; j < mo->n_used; j++) w[j] /= ssum;
}

/* The MoE FFN on the normed rows xn of n tokens, added to x: each token
 * routed, each expert's matrices decoded once for the tokens that chose it,
 * the outputs summed in slot order. */
static int moe_ffn(struct llmk_ref_state *s, const struct llmk_layer *L, int64_t n) {
    const struct llmk_moe_hp *mo = &s->m->moe;
    int64_t E = s->m->hp.n_embd, X = mo->n_expert, k = mo->n_used, FE = mo->n_ff_exp;
    for (int64_t t = 0; t < n; t++) {
        double l[4096]; /* n_expert <= MAX_EXPERTS = 4096 (model.c) */
        for (int64_t e = 0; e < X; e++) {
            double d = 0;
            for (int64_t i = 0; i < E; i++) d += s->xn[t * E + i] * (double)L->gate_inp_f[e * E + i];
            l[e] = d + (L->gate_inp_b_f ? (double)L->gate_inp_b_f[e] : 0.0);
        }
        route(mo, l, s->moe_sel + t * k, s->moe_w + t * k);
    }
    for (int64_t e = 0; e < X; e++) {
        int64_t cnt = 0;
        for (int64_t sl = 0; sl < n * k; sl++)
            if (s->moe_sel[sl] == e) memcpy(s->moe_in + cnt++ * E, s->xn + (sl / k) * E, (size_t)E * sizeof(double));
        if (!cnt) continue;
        llmk_tensor_info gv, uv, dv;
        llmk_expert_view(L->gate_exps, e, &gv), llmk_expert_view(L->up_exps, e, &uv), llmk_expert_view(L->down_exps, e, &dv);
        int st;
        const float *bg = L->gate_exps_b_f ? L->gate_exps_b_f + e * FE : NULL;
        const float *bu = L->up_exps_b_f ? L->up_exps_b_f + e * FE : NULL;
        const float *bd = L->down_exps_b_f ? L->down_exps_b_f + e * E : NULL;
        if ((st = project(s, &gv, bg, s->moe_in, cnt, s->moe_g)) != LLMK_OK ||
            (st = project(s, &uv, bu, s->moe_in, cnt, s->moe_u)) != LLMK_OK)
            return st;
        if (mo->clamp_glu)
            swiglu_clamp(s->moe_g, s->moe_u, cnt * FE, mo->glu_alpha, mo->glu_limit);
        else
            swiglu(s->moe_g, s->moe_u, cnt * FE);
        if ((st = project(s, &dv, bd, s->moe_g, cnt, s->moe_o)) != LLMK_OK) return st;
        cnt = 0;
        for (int64_t sl = 0; sl < n * k; sl++)
            if (s->moe_sel[sl] == e) memcpy(s->moe_y + sl * E, s->moe_o + cnt++ * E, (size_t)E * sizeof(double));
    }
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < E; i++) {
            double acc = 0;
            for (int64_t j = 0; j < k; j++) acc += s->moe_w[t * k + j] * s->moe_y[(t * k + j) * E + i];
            s->x[t * E + i] += acc;
        }
    return LLMK_OK;
}

/* The outputs of a chunk of n tokens whose layers have run: the rows from
 * first on (out_rows 1: the last, 2: all) get the final RMSNorm, rounded once
 * to f32 with hidden, else its product with the LM head. */
static int chunk_output(struct llmk_ref_state *s, int64_t n, float *out, int out_rows, bool hidden) {
    const llmk_model *m = s->m;
    const llmk_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, first = out_rows == 1 ? n - 1 : 0, V = hp->n_vocab;
    int st;
    if (!hidden && (st = load_transposed(s, m->output)) != LLMK_OK) return st;
    for (int64_t t = first; t < n; t++) {
        rmsnorm(s->xn, s->x + t * E, m->out_norm_f, E, hp->rms_eps);
        if (hidden) {
            for (int64_t i = 0; i < E; i++) out[(t - first) * E + i] = (float)s->xn[i];
            continue;
        }
        if ((st = llmk_ref_gemv_transposed(s->pool, s->w, (size_t)(E * V), s->xn, (size_t)E, E, V, s->logits,
                                           (size_t)V)) != LLMK_OK)
            return st;
        double cap = hp->logit_softcap;
        for (int64_t j = 0; j < V; j++)
            out[(t - first) * V + j] = (float)(cap > 0 ? cap * tanh(s->logits[j] / cap) : s->logits[j]);
    }
    return LLMK_OK;
}

static int eval_chunk(struct llmk_ref_state *s, int32_t pos0, const int32_t *ids, int64_t n, float *out,
                      int out_rows, bool hidden) {
    const llmk_model *m = s->m;
    const llmk_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, F = hp->n_ff, HD = hp->head_dim;
    int64_t qd = hp->n_head * HD, kvd = hp->n_head_kv * HD;
    int group = hp->n_head / hp->n_head_kv;
    int st;
    uint64_t erb;
    if ((st = llmk_row_bytes(m->tok_embd->type, (uint64_t)E, &erb)) != LLMK_OK) return st;
    for (int64_t t = 0; t < n; t++) {
        if ((st = llmk_dequantize_row(m->tok_embd->type, (const unsigned char *)m->tok_embd->data + (uint64_t)ids[t] * erb,
                                      s->row, E)) != LLMK_OK)
            return st;
        for (int64_t i = 0; i < E; i++) s->x[t * E + i] = (double)s->row[i] * hp->embd_scale;
    }
    for (int il = 0; il < hp->n_layer; il++) {
        const struct llmk_layer *L = &m->layers[il];
        for (int64_t t = 0; t < n; t++) rmsnorm(s->xn + t * E, s->x + t * E, L->attn_norm_f, E, hp->rms_eps);
        if ((st = project(s, L->wq, L->bq_f, s->xn, n, s->q)) != LLMK_OK || (st = project(s, L->wk, L->bk_f, s->xn, n, s->k)) != LLMK_OK ||
            (st = project(s, L->wv, L->bv_f, s->xn, n, s->v)) != LLMK_OK)
            return st;
        for (int64_t t = 0; t < n; t++) {
            double *q = s->q + t * qd, *k = s->k + t * kvd;
            if (L->q_norm_f) {
                for (int h = 0; h < hp->n_head; h++) rmsnorm(q + h * HD, q + h * HD, L->q_norm_f, HD, hp->rms_eps);
                for (int h = 0; h < hp->n_head_kv; h++) rmsnorm(k + h * HD, k + h * HD, L->k_norm_f, HD, hp->rms_eps);
            }
            rope(q, hp->n_head, (int)HD, llmk_layer_rope(m, il), pos0 + (int32_t)t, hp->rope_neox, hp->rope_attn_factor);
            rope(k, hp->n_head_kv, (int)HD, llmk_layer_rope(m, il), pos0 + (int32_t)t, hp->rope_neox, hp->rope_attn_factor);
            int64_t len = (pos0 + t) * kvd;
            if ((st = llmk_kv_cache_append_into_flat(s->k_cache[il], s->kv_capacity, k, (size_t)kvd, len, kvd)) != LLMK_OK ||
                (st = llmk_kv_cache_append_into_flat(s->v_cache[il], s->kv_capacity, s->v + t * kvd, (size_t)kvd,
                                                     len, kvd)) != LLMK_OK)
                return st;
            int64_t lo = llmk_layer_key_lo(m, il, pos0 + (int32_t)t);
            for (int h = 0; h < hp->n_head; h++) {
                int64_t off = lo * kvd + (int64_t)(h / group) * HD;
                attend(q + h * HD, s->k_cache[il] + off, s->v_cache[il] + off, pos0 + t + 1 - lo, kvd, (int)HD,
                       hp->attn_scale, L->sinks_f ? (double)L->sinks_f[h] : -INFINITY, s->scores, s->att + t * qd + h * HD);
            }
        }
        if ((st = project(s, L->wo, L->bo_f, s->att, n, s->o)) != LLMK_OK ||
            (st = post_residual(s, L->attn_post_norm_f, s->o, n, E)) != LLMK_OK)
            return st;
        for (int64_t t = 0; t < n; t++) rmsnorm(s->xn + t * E, s->x + t * E, L->ffn_norm_f, E, hp->rms_eps);
        if (L->gate_exps) {
            if ((st = moe_ffn(s, L, n)) != LLMK_OK) return st;
            continue;
        }
        if ((st = project(s, L->w_gate, NULL, s->xn, n, s->g)) != LLMK_OK || (st = project(s, L->w_up, NULL, s->xn, n, s->u)) != LLMK_OK)
            return st;
        (hp->ffn_gelu ? geglu : swiglu)(s->g, s->u, n * F);
        if ((st = project(s, L->w_down, NULL, s->g, n, s->o)) != LLMK_OK ||
            (st = post_residual(s, L->ffn_post_norm_f, s->o, n, E)) != LLMK_OK)
            return st;
    }
    return out_rows ? chunk_output(s, n, out, out_rows, hidden) : LLMK_OK;
}

int llmk_ref_eval(struct llmk_ref_state *s, int32_t pos, const int32_t *ids, size_t n, float *out,
                  bool all_positions, bool hidden) {
    int st = LLMK_OK;
    size_t W = (size_t)(hidden ? s->m->hp.n_embd : s->m->hp.n_vocab);
    for (size_t off = 0; off < n && st == LLMK_OK; off += REF_CHUNK) {
        size_t c = n - off < REF_CHUNK ? n - off : REF_CHUNK;
        int rows = !out ? 0 : all_positions ? 2 : off + c == n ? 1 : 0;
        float *dst = rows == 2 ? out + off * W : out;
        st = eval_chunk(s, pos + (int32_t)off, ids + off, (int64_t)c, dst, rows, hidden);
    }
    return st;
}
