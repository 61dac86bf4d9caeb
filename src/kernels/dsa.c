/* DSA kernels (dsa.h): the scalar references, the shared top-k select and
 * the checked entry points that validate shapes and dispatch to a kernel set. */
#include "kernels/dsa.h"

#include "codec/half.h"
#include "internal.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF /* a * b + c stays two roundings, as in the vector kernels */
#endif

/* ---- scalar building blocks ---- */

float llmk_dsa_exp(float x) {
    if (x != x) return x;
    x = -87.0f > x ? -87.0f : x; /* the operand order of the vector max/min */
    x = 88.0f < x ? 88.0f : x;
    float n = nearbyintf(x * 1.44269504088896341f);
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * (r * r) + (r + 1.0f);
    return y * llmk_f32_from_bits((uint32_t)((int32_t)n + 127) << 23);
}

uint16_t llmk_dsa_score_key(float s) {
    if (s != s) return 0;
    uint16_t b = llmk_fp32_to_bf16(s);
    return (b & 0x8000u) ? (uint16_t)~b : (uint16_t)(b | 0x8000u);
}

/* The dot order of dsa.h: eight partial sums, a fixed combine, the tail. */
static float dot_ref(const float *a, const float *b, int n) {
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) s[l] = s[l] + a[i + l] * b[i + l];
    float t = ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
    for (; i < n; i++) t = t + a[i] * b[i];
    return t;
}

/* ---- references ---- */

static void scores_decode_ref(const float *q, const float *k, const float *w, int64_t n_q, int n_heads, int dim,
                              int64_t n_keys, float *out) {
    for (int64_t m = 0; m < n_q; m++)
        for (int64_t n = 0; n < n_keys; n++) {
            float acc = 0;
            for (int h = 0; h < n_heads; h++) {
                float d = dot_ref(q + ((size_t)m * n_heads + h) * dim, k + (size_t)n * dim, dim);
                acc = acc + (d > 0 ? d : 0.0f) * w[m * n_heads + h];
            }
            out[m * n_keys + n] = acc;
        }
}

/* The prefill form: per query row and key tile, the heads' tile scores
 * [H][tile] first (the seed's GEMM shape), then their weighted sum. */
#define SCORE_TILE 32
static void scores_ref(const float *q, const float *k, const float *w, int64_t n_q, int n_heads, int dim,
                       int64_t n_keys, float *out) {
    float *t = malloc(sizeof(float) * SCORE_TILE * (size_t)n_heads);
    if (!t) { /* the same values without the tile buffer */
        scores_decode_ref(q, k, w, n_q, n_heads, dim, n_keys, out);
        return;
    }
    for (int64_t m = 0; m < n_q; m++)
        for (int64_t n0 = 0; n0 < n_keys; n0 += SCORE_TILE) {
            int nt = n_keys - n0 < SCORE_TILE ? (int)(n_keys - n0) : SCORE_TILE;
            for (int h = 0; h < n_heads; h++)
                for (int j = 0; j < nt; j++)
                    t[h * SCORE_TILE + j] = dot_ref(q + ((size_t)m * n_heads + h) * dim, k + (size_t)(n0 + j) * dim, dim);
            for (int j = 0; j < nt; j++) {
                float acc = 0;
                for (int h = 0; h < n_heads; h++) {
                    float d = t[h * SCORE_TILE + j];
                    acc = acc + (d > 0 ? d : 0.0f) * w[m * n_heads + h];
                }
                out[m * n_keys + n0 + j] = acc;
            }
        }
    free(t);
}

static void keys_ref(const float *scores, int64_t n, uint16_t *keys) {
    for (int64_t i = 0; i < n; i++) keys[i] = llmk_dsa_score_key(scores[i]);
}

static void attn_part_ref(const float *q, const float *const *krows, const float *const *vrows, int64_t n, int dk,
                          int dv, float scale, int key_tile, float *part, float *scratch) {
    float mx = -INFINITY, l = 0, *o = part + 2;
    for (int d = 0; d < dv; d++) o[d] = 0;
    for (int64_t j0 = 0; j0 < n; j0 += key_tile) {
        int64_t nt = n - j0 < key_tile ? n - j0 : key_tile;
        float tm = mx;
        for (int64_t j = 0; j < nt; j++) {
            float s = dot_ref(q, krows[j0 + j], dk) * scale;
            scratch[j] = s;
            if (s > tm) tm = s;
        }
        if (mx != -INFINITY) {
            float alpha = llmk_dsa_exp(mx - tm);
            l = l * alpha;
            for (int d = 0; d < dv; d++) o[d] = o[d] * alpha;
        }
        mx = tm;
        for (int64_t j = 0; j < nt; j++) {
            float p = llmk_dsa_exp(scratch[j] - mx);
            l = l + p;
            const float *vr = vrows[j0 + j];
            for (int d = 0; d < dv; d++) o[d] = o[d] + p * vr[d];
        }
    }
    part[0] = mx;
    part[1] = l;
}

static void kv_qat_ref(float *x, int64_t n, bool f16_round) {
    for (int64_t b = 0; b < n; b += 64) {
        float amax = 0;
        for (int i = 0; i < 64; i++)
            if (fabsf(x[b + i]) > amax) amax = fabsf(x[b + i]);
        float s = (amax > 1e-4f ? amax : 1e-4f) / 448.0f;
        for (int i = 0; i < 64; i++) {
            float y = llmk_round_e4m3(x[b + i] / s) * s;
            x[b + i] = f16_round ? llmk_fp16_to_fp32(llmk_fp32_to_fp16(y)) : y;
        }
    }
}

static void hadamard_ref(float *x, int64_t n) {
    for (int64_t b = 0; b < n; b += 128) {
        float *v = x + b;
        for (int h = 1; h < 128; h <<= 1)
            for (int i = 0; i < 128; i += 2 * h)
                for (int j = i; j < i + h; j++) {
                    float a = v[j], c = v[j + h];
                    v[j] = a + c;
                    v[j + h] = a - c;
                }
        for (int i = 0; i < 128; i++) v[i] = v[i] * 0.0883883476483184405f;
    }
}

float llmk_dsa_e8m0_scale(float amax) {
    int e;
    float v = amax / 6.0f, f = frexpf(v, &e);
    return f == 0.5f ? v : ldexpf(1.0f, e);
}

static void fp4_qat_ref(float *x, int64_t n) {
    for (int64_t b = 0; b < n; b += 32) {
        float amax = 0;
        for (int i = 0; i < 32; i++)
            if (fabsf(x[b + i]) > amax) amax = fabsf(x[b + i]);
        if (!(amax > 0)) continue; /* zeros stay as they are */
        float s = llmk_dsa_e8m0_scale(amax);
        for (int i = 0; i < 32; i++) x[b + i] = llmk_round_e2m1(x[b + i] / s) * s;
    }
}

const struct llmk_dsa_kernels llmk_dsa_kernels_ref = {
    .name = "ref",
    .indexer_scores = scores_ref,
    .indexer_score_decode = scores_decode_ref,
    .score_keys = keys_ref,
    .attn_part = attn_part_ref,
    .kv_qat = kv_qat_ref,
    .hadamard128 = hadamard_ref,
    .fp4_qat = fp4_qat_ref,
};

/* ---- checked entry points ---- */

static const struct llmk_dsa_kernels *pick(const struct llmk_dsa_kernels *kt) {
    return kt ? kt : llmk_kernels()->dsa;
}

static int check_scores(const char *what, const void *q, const void *k, const void *w, const void *out, int64_t n_q,
                        int n_heads, int dim, int64_t n_keys, int64_t max_q) {
    if (!q || !k || !w || !out) return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: NULL buffer", what);
    if (n_q < 1 || n_q > max_q)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: %lld query rows (1..%lld)", what, (long long)n_q, (long long)max_q);
    if (n_heads < 1 || n_heads > LLMK_DSA_MAX_HEADS)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: %d heads (1..%d)", what, n_heads, LLMK_DSA_MAX_HEADS);
    if (dim < 1 || dim > LLMK_DSA_MAX_HEAD_DIM)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: head dim %d (1..%d)", what, dim, LLMK_DSA_MAX_HEAD_DIM);
    if (n_keys < 0 || n_keys > LLMK_DSA_MAX_ROWS)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: %lld keys (0..%lld)", what, (long long)n_keys,
                         (long long)LLMK_DSA_MAX_ROWS);
    if (n_q * n_keys > ((int64_t)1 << 40))
        return llmk_fail(LLMK_DIMENSION_OVERFLOW, "%s: %lld x %lld scores are too many", what, (long long)n_q,
                         (long long)n_keys);
    return LLMK_OK;
}

int llmk_dsa_indexer_scores(const struct llmk_dsa_kernels *kt, const float *q, const float *k, const float *w,
                            int64_t n_q, int n_heads, int dim, int64_t n_keys, float *out) {
    llmk_error_clear();
    int st = check_scores("dsa_indexer_scores", q, k, w, out, n_q, n_heads, dim, n_keys, LLMK_DSA_MAX_ROWS);
    if (st != LLMK_OK) return st;
    pick(kt)->indexer_scores(q, k, w, n_q, n_heads, dim, n_keys, out);
    return LLMK_OK;
}

int llmk_dsa_indexer_score_decode(const struct llmk_dsa_kernels *kt, const float *q, const float *k, const float *w,
                                  int64_t n_q, int n_heads, int dim, int64_t n_keys, float *out) {
    llmk_error_clear();
    int st = check_scores("dsa_indexer_score_decode", q, k, w, out, n_q, n_heads, dim, n_keys, LLMK_DSA_DECODE_MAX_Q);
    if (st != LLMK_OK) return st;
    pick(kt)->indexer_score_decode(q, k, w, n_q, n_heads, dim, n_keys, out);
    return LLMK_OK;
}

/* Two-pass radix select over one row's 16-bit keys (see dsa.h). */
static void topk_row(const uint16_t *key, int64_t n, int k, int32_t *out) {
    if (n <= k) {
        for (int64_t i = 0; i < n; i++) out[i] = (int32_t)i;
        for (int64_t i = n; i < k; i++) out[i] = -1;
        return;
    }
    int64_t hist[256] = {0}, above = 0;
    for (int64_t i = 0; i < n; i++) hist[key[i] >> 8]++;
    int hb = 255;
    for (; hb > 0 && above + hist[hb] < k; hb--) above += hist[hb];
    memset(hist, 0, sizeof hist);
    for (int64_t i = 0; i < n; i++)
        if ((key[i] >> 8) == hb) hist[key[i] & 255]++;
    int lb = 255;
    for (; lb > 0 && above + hist[lb] < k; lb--) above += hist[lb];
    /* every key above t is taken (above < k of them), then the lowest
     * indices holding t itself until k */
    uint16_t t = (uint16_t)(hb << 8 | lb);
    int64_t need = k - above, c = 0;
    for (int64_t i = 0; i < n && c < k; i++)
        if (key[i] > t || (key[i] == t && need > 0)) {
            if (key[i] == t) need--;
            out[c++] = (int32_t)i;
        }
}

int llmk_dsa_topk_indices(const struct llmk_dsa_kernels *kt, const float *scores, int64_t n_q, int64_t n_keys,
                          int64_t row_stride, const int64_t *n_valid, int k, int32_t *idx) {
    llmk_error_clear();
    const char *what = "dsa_topk_indices";
    if (!scores || !idx) return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: NULL buffer", what);
    if (n_q < 1 || n_q > LLMK_DSA_MAX_ROWS || n_keys < 0 || n_keys > LLMK_DSA_MAX_ROWS)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: %lld rows of %lld scores (1..%lld, 0..%lld)", what,
                         (long long)n_q, (long long)n_keys, (long long)LLMK_DSA_MAX_ROWS, (long long)LLMK_DSA_MAX_ROWS);
    if (row_stride < n_keys || (n_q - 1) * row_stride > ((int64_t)1 << 40))
        return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: row stride %lld for %lld scores", what, (long long)row_stride,
                         (long long)n_keys);
    if (k < 1 || k > LLMK_DSA_MAX_TOPK)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: k = %d (1..%d)", what, k, LLMK_DSA_MAX_TOPK);
    for (int64_t m = 0; n_valid && m < n_q; m++)
        if (n_valid[m] < 0 || n_valid[m] > n_keys)
            return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: row %lld has %lld valid of %lld scores", what, (long long)m,
                             (long long)n_valid[m], (long long)n_keys);
    uint16_t *keys = malloc(sizeof(uint16_t) * (size_t)(n_keys ? n_keys : 1));
    if (!keys) return llmk_fail(LLMK_OUT_OF_MEMORY, "%s: no memory for %lld keys", what, (long long)n_keys);
    const struct llmk_dsa_kernels *x = pick(kt);
    for (int64_t m = 0; m < n_q; m++) {
        int64_t n = n_valid ? n_valid[m] : n_keys;
        x->score_keys(scores + m * row_stride, n, keys);
        topk_row(keys, n, k, idx + m * (int64_t)k);
    }
    free(keys);
    return LLMK_OK;
}

struct llmk_dsa_params llmk_dsa_resolve(const struct llmk_dsa_attn *a) {
    struct llmk_dsa_params p = a->params;
    if (p.key_tile == 0) p.key_tile = a->topk <= 128 ? 128 : 256;
    if (p.split == 0) {
        int64_t w = a->window < a->n_local ? a->window : a->n_local, most = w + a->topk;
        int64_t c = (most + 2 * p.key_tile - 1) / (2 * p.key_tile);
        p.split = (a->n_q <= 4 && a->n_kv == 1) ? (int)(c < 1 ? 1 : c > 8 ? 8 : c) : 1;
    }
    return p;
}

static int check_attn(const struct llmk_dsa_attn *a, const float *out) {
    const char *what = "dsa_sparse_attention";
    if (!a || !out || !a->q) return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: NULL argument", what);
    if (a->n_q < 1 || a->n_q > LLMK_DSA_MAX_ROWS)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: %lld query rows", what, (long long)a->n_q);
    if (a->n_heads < 1 || a->n_heads > LLMK_DSA_MAX_HEADS || a->n_kv < 1 || a->n_heads % a->n_kv != 0)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: %d query heads over %d KV heads", what, a->n_heads, a->n_kv);
    if (a->dk < 1 || a->dk > LLMK_DSA_MAX_HEAD_DIM || a->dv < 1 || a->dv > LLMK_DSA_MAX_HEAD_DIM)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: head dims %d / %d (1..%d)", what, a->dk, a->dv,
                         LLMK_DSA_MAX_HEAD_DIM);
    if (a->window < 0 || a->window > LLMK_DSA_MAX_ROWS || a->topk < 0 || a->topk > LLMK_DSA_MAX_TOPK)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: window %lld, top-k %d", what, (long long)a->window, a->topk);
    if (a->window > 0 && (!a->k || !a->v || a->pos0 < 0 || a->n_local > LLMK_DSA_MAX_ROWS ||
                          a->pos0 > a->n_local - a->n_q))
        return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: queries at %lld..%lld outside a local cache of %lld rows", what,
                         (long long)a->pos0, (long long)(a->pos0 + a->n_q - 1), (long long)a->n_local);
    if (a->topk > 0 && (!a->idx || !a->pk || !a->pv || a->n_pool < 0 || a->n_pool > LLMK_DSA_MAX_ROWS))
        return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: top-k %d without indices or %lld pooled rows", what, a->topk,
                         (long long)a->n_pool);
    if (!isfinite(a->scale)) return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: scale is not finite", what);
    int kt = a->params.key_tile, sp = a->params.split;
    if ((kt != 0 && kt != 128 && kt != 256) || sp < 0 || sp > 64)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: key tile %d (0, 128, 256), split %d (0..64)", what, kt, sp);
    for (int64_t i = 0; i < a->n_q * (int64_t)a->topk; i++)
        if (a->idx[i] < -1 || a->idx[i] >= a->n_pool)
            return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: index %d at %lld is outside %lld pooled rows", what,
                             a->idx[i], (long long)i, (long long)a->n_pool);
    return LLMK_OK;
}

/* Chunks' partials merged in order with the sink (sink NULL: none) into
 * out[dv]: one max, each chunk weighted by exp(its max - the max). */
static void merge_parts(const float *parts, int nc, int dv, const float *sink, float *out) {
    float mx = -INFINITY;
    for (int c = 0; c < nc; c++)
        if (parts[(size_t)c * (dv + 2)] > mx) mx = parts[(size_t)c * (dv + 2)];
    if (sink && *sink > mx) mx = *sink;
    float l = 0;
    for (int d = 0; d < dv; d++) out[d] = 0;
    for (int c = 0; c < nc; c++) {
        const float *p = parts + (size_t)c * (dv + 2);
        float w = llmk_dsa_exp(p[0] - mx);
        l = l + p[1] * w;
        for (int d = 0; d < dv; d++) out[d] = out[d] + p[2 + d] * w;
    }
    if (sink) l = l + llmk_dsa_exp(*sink - mx);
    float inv = l > 0 ? 1.0f / l : 0.0f;
    for (int d = 0; d < dv; d++) out[d] = out[d] * inv;
}

/* Row m's key list (local window rows, then pooled rows) as row indices:
 * local ones as is, pooled ones as n_local + index. Returns its length. */
static int64_t key_list(const struct llmk_dsa_attn *a, int64_t m, int64_t *rows) {
    int64_t n = 0, pos = a->pos0 + m;
    if (a->window > 0)
        for (int64_t p = pos - a->window + 1 < 0 ? 0 : pos - a->window + 1; p <= pos; p++) rows[n++] = p;
    for (int t = 0; t < a->topk; t++) {
        int32_t i = a->idx[m * a->topk + t];
        if (i >= 0) rows[n++] = a->n_local + i;
    }
    return n;
}

struct attn_scratch {
    int64_t *rows;
    const float **kr, **vr;
    float *parts, *tile;
};

static void attn_row(const struct llmk_dsa_kernels *x, const struct llmk_dsa_attn *a, struct llmk_dsa_params p,
                     int64_t m, struct attn_scratch *s, float *out) {
    int64_t n = key_list(a, m, s->rows);
    int per = a->n_heads / a->n_kv;
    int64_t cl = n > 0 ? (n + p.split - 1) / p.split : 1;
    int nc = (int)((n + cl - 1) / cl);
    for (int g = 0; g < a->n_kv; g++) {
        for (int64_t j = 0; j < n; j++) {
            int64_t r = s->rows[j];
            int pooled = r >= a->n_local;
            size_t row = (size_t)(pooled ? r - a->n_local : r) * (size_t)a->n_kv + (size_t)g;
            s->kr[j] = (pooled ? a->pk : a->k) + row * (size_t)a->dk;
            s->vr[j] = (pooled ? a->pv : a->v) + row * (size_t)a->dv;
        }
        for (int h = g * per; h < (g + 1) * per; h++) {
            const float *q = a->q + ((size_t)m * a->n_heads + h) * a->dk;
            for (int c = 0; c < nc; c++) {
                int64_t j0 = c * cl, j1 = j0 + cl < n ? j0 + cl : n;
                x->attn_part(q, s->kr + j0, s->vr + j0, j1 - j0, a->dk, a->dv, a->scale, p.key_tile,
                             s->parts + (size_t)c * (a->dv + 2), s->tile);
            }
            merge_parts(s->parts, nc, a->dv, a->sinks ? a->sinks + h : NULL,
                        out + ((size_t)m * a->n_heads + h) * a->dv);
        }
    }
}

int llmk_dsa_sparse_attention(const struct llmk_dsa_kernels *kt, const struct llmk_dsa_attn *a, float *out) {
    llmk_error_clear();
    int st = check_attn(a, out);
    if (st != LLMK_OK) return st;
    struct llmk_dsa_params p = llmk_dsa_resolve(a);
    int64_t most = (a->window < a->n_local ? a->window : a->n_local) + a->topk + 1;
    struct attn_scratch s = {
        .rows = malloc(sizeof(int64_t) * (size_t)most),
        .kr = malloc(sizeof(float *) * (size_t)most),
        .vr = malloc(sizeof(float *) * (size_t)most),
        .parts = malloc(sizeof(float) * (size_t)p.split * (size_t)(a->dv + 2)),
        .tile = malloc(sizeof(float) * (size_t)p.key_tile),
    };
    if (s.rows && s.kr && s.vr && s.parts && s.tile) {
        const struct llmk_dsa_kernels *x = pick(kt);
        for (int64_t m = 0; m < a->n_q; m++) attn_row(x, a, p, m, &s, out);
    } else {
        st = llmk_fail(LLMK_OUT_OF_MEMORY, "dsa_sparse_attention: no memory for %lld keys", (long long)most);
    }
    free(s.rows), free(s.kr), free(s.vr), free(s.parts), free(s.tile);
    return st;
}

static int check_qat(const char *what, const float *x, int64_t n, int64_t block) {
    if (!x) return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: NULL buffer", what);
    if (n < 0 || n % block != 0)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: %lld elements are not whole blocks of %lld", what, (long long)n,
                         (long long)block);
    return LLMK_OK;
}

int llmk_dsa_kv_qat(const struct llmk_dsa_kernels *kt, float *x, int64_t n, bool f16_round) {
    llmk_error_clear();
    int st = check_qat("dsa_kv_qat", x, n, 64);
    if (st == LLMK_OK) pick(kt)->kv_qat(x, n, f16_round);
    return st;
}

int llmk_dsa_hadamard128(const struct llmk_dsa_kernels *kt, float *x, int64_t n) {
    llmk_error_clear();
    int st = check_qat("dsa_hadamard128", x, n, 128);
    if (st == LLMK_OK) pick(kt)->hadamard128(x, n);
    return st;
}

int llmk_dsa_indexer_qat(const struct llmk_dsa_kernels *kt, float *x, int64_t n) {
    llmk_error_clear();
    int st = check_qat("dsa_indexer_qat", x, n, 128);
    if (st != LLMK_OK) return st;
    const struct llmk_dsa_kernels *k = pick(kt);
    k->hadamard128(x, n);
    k->fp4_qat(x, n);
    return LLMK_OK;
}
