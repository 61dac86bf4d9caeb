/* Model loading: architecture and hyperparameters from GGUF metadata, every
 * tensor's type and shape checked against them, weights left in the mapping. */
#include "model.h"

#include "gguf_internal.h"
#include "internal.h"
#include "kernels/moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum arch_id { ARCH_LLAMA, ARCH_QWEN2, ARCH_QWEN3, ARCH_QWEN3MOE, ARCH_GEMMA3, ARCH_GPTOSS };

static const struct {
    const char *name;
    enum arch_id id;
} known_archs[] = {{"llama", ARCH_LLAMA},       {"qwen2", ARCH_QWEN2},   {"qwen3", ARCH_QWEN3},
                   {"qwen3moe", ARCH_QWEN3MOE}, {"gemma3", ARCH_GEMMA3}, {"gpt-oss", ARCH_GPTOSS}};

/* Sanity ceilings: far above any model llmk targets, low enough that products
 * of them cannot overflow 64-bit arithmetic. */
enum { MAX_LAYERS = 4096, MAX_EMBD = 1 << 17, MAX_HEADS = 4096, MAX_FF = 1 << 20, MAX_EXPERTS = 4096 };

/* ---- metadata helpers ---------------------------------------------------- */

static int key_u32(const llmk_gguf *g, const char *arch, const char *suffix, bool required,
                   uint32_t dflt, uint32_t lo, uint32_t hi, int32_t *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint32_t v;
    int st = llmk_gguf_get_u32(g, key, &v);
    if (st == LLMK_NOT_FOUND && !required) {
        v = dflt;
    } else if (st == LLMK_NOT_FOUND) {
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "model: required key %s is missing", key);
    } else if (st != LLMK_OK) {
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "model: key %s: %s (want an unsigned integer)",
                         key, llmk_last_error());
    }
    if (v < lo || v > hi)
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "model: key %s = %u is outside [%u, %u]", key,
                         v, lo, hi);
    *out = (int32_t)v;
    return LLMK_OK;
}

static int key_f64(const llmk_gguf *g, const char *arch, const char *suffix, bool required,
                   double dflt, double lo, double hi, double *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    double v;
    int st = llmk_gguf_get_f64(g, key, &v);
    if (st == LLMK_NOT_FOUND && !required) {
        v = dflt;
    } else if (st == LLMK_NOT_FOUND) {
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "model: required key %s is missing", key);
    } else if (st != LLMK_OK) {
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "model: key %s: %s (want a float)", key,
                         llmk_last_error());
    }
    if (!(v >= lo && v <= hi)) /* also refuses NaN */
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "model: key %s = %g is outside [%g, %g]", key,
                         v, lo, hi);
    *out = v;
    return LLMK_OK;
}

/* ---- tensor checks ------------------------------------------------------- */

static void shape_str(const uint64_t *ne, int n, char *buf, size_t cap) {
    size_t off = 0;
    off += (size_t)snprintf(buf + off, cap - off, "[");
    for (int i = 0; i < n && off < cap; i++)
        off += (size_t)snprintf(buf + off, cap - off, "%s%llu", i ? ", " : "",
                                (unsigned long long)ne[i]);
    if (off < cap) snprintf(buf + off, cap - off, "]");
}

/* Find `name` and check its shape is exactly ne0 x ne1 x ne2 (1 for the
 * dimensions it lacks) and that its type has a row decoder. NULL *out with
 * LLMK_OK for an absent optional tensor. */
static int get_tensor3(const llmk_gguf *g, const char *name, bool required, uint64_t ne0, uint64_t ne1,
                       uint64_t ne2, const llmk_tensor_info **out) {
    const llmk_tensor_info *t = llmk_gguf_find_tensor(g, name);
    *out = NULL;
    uint64_t want[4] = {ne0, ne1, ne2, 1};
    int nd = ne2 > 1 ? 3 : ne1 > 1 ? 2 : 1;
    if (!t) {
        if (!required) return LLMK_OK;
        char e[96];
        shape_str(want, nd, e, sizeof e);
        return llmk_fail(LLMK_MISSING_TENSOR, "model: tensor %s is missing (expected shape %s)", name, e);
    }
    if (memcmp(want, t->ne, sizeof want) != 0) {
        char e[96], a[96];
        shape_str(want, nd, e, sizeof e);
        shape_str(t->ne, (int)(t->n_dims ? t->n_dims : 1), a, sizeof a);
        return llmk_fail(LLMK_TENSOR_SHAPE_MISMATCH, "model: tensor %s: expected shape %s, got %s",
                         name, e, a);
    }
    /* Every matrix row is decoded with llmk_dequantize_row: probe that this
     * type has a decoder, on a zero row rather than the file's (a read of
     * the mapping would make its pages resident, as many as the kernel maps
     * around a fault, beside the repacked copy). */
    uint64_t rb = 0;
    if (llmk_row_bytes(t->type, ne0, &rb) != LLMK_OK)
        return llmk_fail(LLMK_TENSOR_TYPE_UNSUPPORTED,
                         "model: tensor %s: type %s (id %u) cannot hold rows of %llu elements", name,
                         llmk_type_name(t->type) ? llmk_type_name(t->type) : "unknown", t->type,
                         (unsigned long long)ne0);
    float *row = malloc((size_t)ne0 * sizeof *row);
    void *zero = calloc(1, (size_t)rb);
    int st = row && zero ? llmk_dequantize_row(t->type, zero, row, (int64_t)ne0) : LLMK_OUT_OF_MEMORY;
    free(row);
    free(zero);
    if (st == LLMK_OUT_OF_MEMORY)
        return llmk_fail(st, "model: %llu bytes for a row probe", (unsigned long long)(rb + ne0 * sizeof *row));
    if (st != LLMK_OK)
        return llmk_fail(LLMK_TENSOR_TYPE_UNSUPPORTED, "model: tensor %s: type %s has no row decoder (%s)",
                         name, llmk_type_name(t->type) ? llmk_type_name(t->type) : "unknown",
                         llmk_status_name(st));
    *out = t;
    return LLMK_OK;
}

static int get_tensor(const llmk_gguf *g, const char *name, bool required, uint64_t ne0, uint64_t ne1,
                      const llmk_tensor_info **out) {
    return get_tensor3(g, name, required, ne0, ne1, 1, out);
}

static int layer_tensor3(const llmk_gguf *g, int il, const char *what, bool required, uint64_t ne0,
                         uint64_t ne1, uint64_t ne2, const llmk_tensor_info **out) {
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s", il, what);
    return get_tensor3(g, name, required, ne0, ne1, ne2, out);
}

static int layer_tensor(const llmk_gguf *g, int il, const char *what, bool required, uint64_t ne0,
                        uint64_t ne1, const llmk_tensor_info **out) {
    return layer_tensor3(g, il, what, required, ne0, ne1, 1, out);
}

void llmk_expert_view(const llmk_tensor_info *t, int64_t e, llmk_tensor_info *out) {
    *out = *t;
    uint64_t bytes = t->n_bytes / t->ne[2]; /* whole rows: row bytes x ne[1] */
    out->n_dims = 2;
    out->ne[2] = 1;
    out->n_elements = t->ne[0] * t->ne[1];
    out->n_bytes = bytes;
    out->offset = t->offset + (uint64_t)e * bytes;
    out->data = (const unsigned char *)t->data + (uint64_t)e * bytes;
}

/* Is `name` one of the tensors this architecture uses? Anything else (MoE
 * experts, output biases, ...) is a feature llmk would silently ignore, so it
 * is refused by name instead. */
static bool tensor_known(const char *name, int n_layer, bool moe, enum arch_id arch) {
    static const char *const globals[] = {"token_embd.weight", "output_norm.weight",
                                          "output.weight", "rope_freqs.weight"};
    static const char *const per_layer[] = {
        "attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
        "attn_output.weight", "attn_q.bias", "attn_k.bias", "attn_v.bias",
        "attn_q_norm.weight", "attn_k_norm.weight", "ffn_norm.weight", "ffn_gate.weight",
        "ffn_up.weight", "ffn_down.weight"};
    static const char *const per_layer_moe[] = {"ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_up_exps.weight",
                                                "ffn_down_exps.weight"};
    static const char *const per_layer_gemma3[] = {"post_attention_norm.weight", "post_ffw_norm.weight"};
    /* gpt-oss's FFN norm is stored under the post-attention name */
    static const char *const per_layer_gptoss[] = {"post_attention_norm.weight", "attn_output.bias", "attn_sinks.weight",
                                                   "ffn_gate_inp.bias", "ffn_gate_exps.bias", "ffn_up_exps.bias",
                                                   "ffn_down_exps.bias"};
    for (size_t i = 0; i < LLMK_ARRAY_LEN(globals); i++)
        if (!strcmp(name, globals[i])) return true;
    if (strncmp(name, "blk.", 4) != 0) return false;
    const char *p = name + 4;
    long il = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 6) il = il * 10 + (*p++ - '0'), digits++;
    if (!digits || *p != '.' || il >= n_layer) return false;
    p++;
    bool own_ffn_norm = arch != ARCH_GPTOSS;
    for (size_t i = 0; i < LLMK_ARRAY_LEN(per_layer); i++)
        if (!strcmp(p, per_layer[i]) && (!moe || strncmp(p, "ffn_", 4) != 0 || !strcmp(p, "ffn_norm.weight")) &&
            (own_ffn_norm || strcmp(p, "ffn_norm.weight") != 0))
            return true;
    for (size_t i = 0; moe && i < LLMK_ARRAY_LEN(per_layer_moe); i++)
        if (!strcmp(p, per_layer_moe[i])) return true;
    for (size_t i = 0; arch == ARCH_GEMMA3 && i < LLMK_ARRAY_LEN(per_layer_gemma3); i++)
        if (!strcmp(p, per_layer_gemma3[i])) return true;
    for (size_t i = 0; arch == ARCH_GPTOSS && i < LLMK_ARRAY_LEN(per_layer_gptoss); i++)
        if (!strcmp(p, per_layer_gptoss[i])) return true;
    return false;
}

/* ---- weight scales ------------------------------------------------------- */

/* The length of a weight-scale suffix name ends with (".scale", or
 * ".input_scale": an activation scale for FP4 activations, which a
 * weight-only product does not use; llama.cpp reads and ignores it on the
 * CPU as well), else 0. */
static size_t scale_suffix(const char *name) {
    size_t n = strlen(name);
    if (n > 12 && !strcmp(name + n - 12, ".input_scale")) return 12;
    if (n > 6 && !strcmp(name + n - 6, ".scale")) return 6;
    return 0;
}

/* The matmul weights a scale may come with: the projections, the experts
 * and the LM head (not token_embd, whose rows are also the embedding). */
static bool scalable(const char *base) {
    static const char *const names[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                                        "ffn_down", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    if (!strcmp(base, "output")) return true;
    const char *dot = strncmp(base, "blk.", 4) ? NULL : strchr(base + 4, '.');
    for (size_t i = 0; dot && i < LLMK_ARRAY_LEN(names); i++)
        if (!strcmp(dot + 1, names[i])) return true;
    return false;
}

bool llmk_weight_takes_scale(const char *name) {
    size_t n = name ? strlen(name) : 0;
    char base[160];
    if (n <= 7 || n >= sizeof base || strcmp(name + n - 7, ".weight") != 0) return false;
    memcpy(base, name, n - 7);
    base[n - 7] = 0;
    return scalable(base);
}

/* X.scale: one positive F32 value, which GGUF's NVFP4 files (llama.cpp's
 * convention) keep beside X.weight and multiply X's products by: E4M3
 * block scales saturate at 448, so the quantizer divides the tensor by a
 * scale first. Every X.scale and X.input_scale needs its X.weight, a
 * matmul weight this architecture uses. */
static int load_weight_scales(llmk_model *m, enum arch_id arch) {
    const llmk_gguf *g = m->gguf;
    size_t nt = llmk_gguf_n_tensors(g);
    for (size_t i = 0; i < nt; i++) {
        const llmk_tensor_info *t = llmk_gguf_tensor(g, i);
        size_t suf = scale_suffix(t->name), len = strlen(t->name) - suf;
        if (!suf) continue;
        char base[160];
        if (len + sizeof ".weight" > sizeof base)
            return llmk_fail(LLMK_UNSUPPORTED_FEATURE, "model: tensor %s: name too long", t->name);
        memcpy(base, t->name, len);
        base[len] = 0;
        if (!scalable(base) || !tensor_known(strcat(base, ".weight"), m->hp.n_layer, m->moe.n_expert > 0, arch) ||
            !llmk_gguf_find_tensor(g, base))
            return llmk_fail(LLMK_UNSUPPORTED_FEATURE, "model: tensor %s scales %s, not a matmul weight of this %s file",
                             t->name, base, m->arch);
        if (suf == 12) continue;
        float v = 0;
        if (t->type == LLMK_TYPE_F32 && t->n_elements == 1) llmk_gguf_read_range(g, t->data, sizeof v, &v);
        if (!(v > 0) || !isfinite(v))
            return llmk_fail(LLMK_UNSUPPORTED_FEATURE,
                             "model: tensor %s: a weight scale is one positive finite F32 value (this one is %s "
                             "of %llu elements%s)", t->name, llmk_type_name(t->type) ? llmk_type_name(t->type) : "?",
                             (unsigned long long)t->n_elements, t->type == LLMK_TYPE_F32 && t->n_elements == 1 ? ", not positive" : "");
        if (!m->wscale) {
            if (!(m->wscale = malloc(nt * sizeof *m->wscale)))
                return llmk_fail(LLMK_OUT_OF_MEMORY, "model: %zu weight scales", nt);
            for (size_t j = 0; j < nt; j++) m->wscale[j] = 1.0f;
        }
        m->wscale[llmk_gguf_find_tensor(g, base) - llmk_gguf_tensor(g, 0)] = v;
    }
    return LLMK_OK;
}

float llmk_model_weight_scale(const llmk_model *m, const llmk_tensor_info *w) {
    const llmk_tensor_info *t = m && m->wscale && w ? llmk_gguf_find_tensor(m->gguf, w->name) : NULL;
    return t ? m->wscale[t - llmk_gguf_tensor(m->gguf, 0)] : 1.0f;
}

/* ---- RoPE frequencies ---------------------------------------------------- */

/* YaRN's blend for pair i: 1 keeps the original frequency (extrapolation),
 * 0 takes it divided by the factor (interpolation), a linear ramp over the
 * pairs between the dimensions where beta_fast and beta_slow rotations fit
 * the original context. truncate rounds the ramp's ends outwards (llama.cpp,
 * transformers' default); gpt-oss's config turns that off. */
static double yarn_keep(const llmk_hparams *hp, double theta, int i, bool truncate) {
    double dim = hp->n_rot, ctx = hp->rope_orig_ctx;
    double lo = dim * log(ctx / (hp->rope_yarn_beta_fast * 2 * M_PI)) / (2 * log(theta));
    double hi = dim * log(ctx / (hp->rope_yarn_beta_slow * 2 * M_PI)) / (2 * log(theta));
    if (truncate) lo = floor(lo), hi = ceil(hi);
    lo = lo > 0 ? lo : 0, hi = hi < dim - 1 ? hi : dim - 1;
    if (hi == lo) hi += 0.001;
    double ramp = (i - lo) / (hi - lo);
    return 1.0 - (ramp < 0 ? 0 : ramp > 1 ? 1 : ramp);
}

/* Inverse frequencies for base theta: with the file's scaling when scaled,
 * each divided by rope_freqs.weight's factor when ff is given. */
static int rope_table(const llmk_hparams *hp, double theta, bool scaled, bool yarn_truncate,
                      const llmk_tensor_info *ff, double **out) {
    int half = hp->n_rot / 2;
    double *t = *out = malloc((size_t)half * sizeof *t);
    if (!t) return llmk_fail(LLMK_OUT_OF_MEMORY, "model: rope table of %d", half);
    const unsigned char *ffv = ff ? (const unsigned char *)ff->data : NULL;
    int scaling = scaled ? hp->rope_scaling : LLMK_ROPE_SCALING_NONE;
    for (int i = 0; i < half; i++) {
        double inv = pow(theta, -2.0 * i / hp->n_rot);
        if (scaling == LLMK_ROPE_SCALING_YARN) {
            double keep = yarn_keep(hp, theta, i, yarn_truncate);
            inv = inv / hp->rope_scale_factor * (1 - keep) + inv * keep;
        } else if (scaling == LLMK_ROPE_SCALING_LINEAR) {
            inv /= hp->rope_scale_factor;
        } else if (scaling == LLMK_ROPE_SCALING_LLAMA3) {
            /* Llama 3.1: long wavelengths slowed by `factor`, short ones kept,
             * a linear blend in between (by wavelength vs original context). */
            double wavelen = 2.0 * M_PI / inv;
            double lo_wl = hp->rope_orig_ctx / hp->rope_low_freq_factor;
            double hi_wl = hp->rope_orig_ctx / hp->rope_high_freq_factor;
            if (wavelen > lo_wl) {
                inv /= hp->rope_scale_factor;
            } else if (wavelen >= hi_wl) {
                double smooth = (hp->rope_orig_ctx / wavelen - hp->rope_low_freq_factor) /
                                (hp->rope_high_freq_factor - hp->rope_low_freq_factor);
                inv = (1.0 - smooth) * inv / hp->rope_scale_factor + smooth * inv;
            }
        }
        if (ffv) {
            float f; /* memcpy: a hostile file's alignment may leave the data unaligned */
            memcpy(&f, ffv + (size_t)i * sizeof f, sizeof f);
            if (!(f > 0) || !isfinite(f))
                return llmk_fail(LLMK_BAD_HYPERPARAMETER, "model: rope_freqs.weight[%d] = %g is not a positive factor",
                                 i, (double)f);
            inv /= f;
        }
        t[i] = inv;
    }
    return LLMK_OK;
}

/* YaRN's keys: the original context, the ramp's rotation counts, and the
 * factor cos and sin are multiplied by (the key's value, or transformers'
 * default 0.1 ln(factor) + 1). */
static int yarn_setup(llmk_model *m) {
    llmk_hparams *hp = &m->hp;
    const llmk_gguf *g = m->gguf;
    double dflt_af = hp->rope_scale_factor > 1 ? 0.1 * log(hp->rope_scale_factor) + 1.0 : 1.0;
    int st;
    if ((st = key_u32(g, m->arch, "rope.scaling.original_context_length", true, 0, 1, 1u << 30, &hp->rope_orig_ctx)) !=
            LLMK_OK ||
        (st = key_f64(g, m->arch, "rope.scaling.yarn_beta_fast", false, 32.0, 1e-6, 1e6, &hp->rope_yarn_beta_fast)) !=
            LLMK_OK ||
        (st = key_f64(g, m->arch, "rope.scaling.yarn_beta_slow", false, 1.0, 1e-6, 1e6, &hp->rope_yarn_beta_slow)) !=
            LLMK_OK ||
        (st = key_f64(g, m->arch, "rope.scaling.yarn_attn_factor", false, dflt_af, 1e-6, 1e6, &hp->rope_attn_factor)) !=
            LLMK_OK)
        return st;
    if (!(hp->rope_yarn_beta_fast > hp->rope_yarn_beta_slow))
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "model: yarn rope: beta_fast %g must exceed beta_slow %g",
                         hp->rope_yarn_beta_fast, hp->rope_yarn_beta_slow);
    return LLMK_OK;
}

static int rope_setup(llmk_model *m) {
    const llmk_gguf *g = m->gguf;
    llmk_hparams *hp = &m->hp;
    char key[128];
    const char *type = NULL;
    size_t type_len = 0;
    snprintf(key, sizeof key, "%s.rope.scaling.type", m->arch);
    int st = llmk_gguf_get_str(g, key, &type, &type_len);
    if (st != LLMK_OK && st != LLMK_NOT_FOUND)
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "model: key %s: %s", key, llmk_last_error());
    hp->rope_scaling = LLMK_ROPE_SCALING_NONE;
    hp->rope_scale_factor = 1.0;
    hp->rope_low_freq_factor = 1.0;
    hp->rope_high_freq_factor = 4.0;
    hp->rope_orig_ctx = hp->n_ctx_train;
    if (st == LLMK_OK && strcmp(type, "none") != 0) {
        if (!strcmp(type, "linear"))
            hp->rope_scaling = LLMK_ROPE_SCALING_LINEAR;
        else if (!strcmp(type, "llama3"))
            hp->rope_scaling = LLMK_ROPE_SCALING_LLAMA3;
        else if (!strcmp(type, "yarn"))
            hp->rope_scaling = LLMK_ROPE_SCALING_YARN;
        else
            return llmk_fail(LLMK_UNSUPPORTED_FEATURE,
                             "model: rope scaling type '%.40s' (%s) is not supported (none, linear, llama3, yarn)",
                             type, key);
        if ((st = key_f64(g, m->arch, "rope.scaling.factor", true, 1, 1e-6, 1e6,
                          &hp->rope_scale_factor)) != LLMK_OK)
            return st;
    }
    hp->rope_attn_factor = 1.0;
    if (hp->rope_scaling == LLMK_ROPE_SCALING_YARN && (st = yarn_setup(m)) != LLMK_OK) return st;
    if (hp->rope_scaling == LLMK_ROPE_SCALING_LLAMA3) {
        if ((st = key_u32(g, m->arch, "rope.scaling.original_context_length", true, 0, 1,
                          1u << 30, &hp->rope_orig_ctx)) != LLMK_OK ||
            (st = key_f64(g, m->arch, "rope.scaling.low_freq_factor", false, 1.0, 1e-6, 1e6,
                          &hp->rope_low_freq_factor)) != LLMK_OK ||
            (st = key_f64(g, m->arch, "rope.scaling.high_freq_factor", false, 4.0, 1e-6, 1e6,
                          &hp->rope_high_freq_factor)) != LLMK_OK)
            return st;
        if (!(hp->rope_high_freq_factor > hp->rope_low_freq_factor))
            return llmk_fail(LLMK_BAD_HYPERPARAMETER,
                             "model: llama3 rope: high_freq_factor %g must exceed low_freq_factor %g",
                             hp->rope_high_freq_factor, hp->rope_low_freq_factor);
    }

    int half = hp->n_rot / 2;
    const llmk_tensor_info *ff = NULL;
    if ((st = get_tensor(g, "rope_freqs.weight", false, (uint64_t)half, 1, &ff)) != LLMK_OK) return st;
    if (ff && ff->type != LLMK_TYPE_F32)
        return llmk_fail(LLMK_TENSOR_TYPE_UNSUPPORTED, "model: tensor rope_freqs.weight: type %s, expected f32",
                         llmk_type_name(ff->type));
    hp->has_rope_freqs = ff != NULL;
    bool truncate = strcmp(m->arch, "gpt-oss") != 0;
    if ((st = rope_table(hp, hp->rope_theta, true, truncate, ff, &m->rope_inv_freq)) != LLMK_OK) return st;
    /* gemma3's sliding layers: their own base, unscaled (as llama.cpp's) */
    return hp->n_swa && hp->rope_theta_swa > 0 ? rope_table(hp, hp->rope_theta_swa, false, true, NULL, &m->rope_inv_freq_swa)
                                               : LLMK_OK;
}

/* ---- 1-D tensors as f32 -------------------------------------------------- */

/* All of t as f32 into dst, its bytes read past the mapping
 * (llmk_gguf_read_range), so that its neighbours' pages stay out too. */
static int decode_read(const llmk_gguf *g, const llmk_tensor_info *t, float *dst) {
    void *raw = malloc((size_t)t->n_bytes ? (size_t)t->n_bytes : 1);
    if (!raw) return llmk_fail(LLMK_OUT_OF_MEMORY, "model: %llu bytes of %s", (unsigned long long)t->n_bytes, t->name);
    llmk_gguf_read_range(g, t->data, t->n_bytes, raw);
    int st = llmk_dequantize_row(t->type, raw, dst, (int64_t)t->n_elements);
    free(raw);
    return st;
}

int llmk_model_row_f32(const llmk_model *m, const llmk_tensor_info *t, int64_t r, float *dst, int64_t n) {
    uint64_t rb;
    int st = llmk_row_bytes(t->type, (uint64_t)n, &rb);
    if (st != LLMK_OK) return st;
    uint32_t be = llmk_type_block_elems(t->type), bb = llmk_type_block_bytes(t->type);
    unsigned char raw[4096]; /* a stack's worth of whole blocks at a time */
    int64_t step = (int64_t)(sizeof raw / bb) * be;
    if (step <= 0) return llmk_fail(LLMK_INVALID_ARGUMENT, "model: %s: blocks of %u bytes", t->name, bb);
    const unsigned char *row = (const unsigned char *)t->data + (uint64_t)r * rb;
    for (int64_t i = 0; i < n && st == LLMK_OK; i += step) {
        int64_t k = n - i < step ? n - i : step;
        llmk_gguf_read_range(m->gguf, row + (uint64_t)(i / be) * bb, (uint64_t)(k / be) * bb, raw);
        st = llmk_dequantize_row(t->type, raw, dst + i, k);
    }
    return st;
}

/* A copy even of an F32 vector: a norm read from the mapping every token
 * would keep the file's pages around it resident (a whole large folio per
 * fault on current kernels: 70 MB of SmolLM2's 98 MB file, beside their
 * repacked copy). */
static int vec_f32(llmk_model *m, const llmk_tensor_info *t, size_t *used, const float **out) {
    *out = NULL;
    if (!t) return LLMK_OK;
    float *dst = m->vec_store + *used; /* (a 2-D bias stack: all its rows) */
    int st = decode_read(m->gguf, t, dst);
    if (st != LLMK_OK) return st;
    *used += t->n_elements;
    *out = dst;
    return LLMK_OK;
}

/* ---- load ---------------------------------------------------------------- */

static int load_dense_ffn(const llmk_gguf *g, int il, uint64_t E, uint64_t F, struct llmk_layer *L) {
    int st;
    if ((st = layer_tensor(g, il, "ffn_gate.weight", true, E, F, &L->w_gate)) != LLMK_OK ||
        (st = layer_tensor(g, il, "ffn_up.weight", true, E, F, &L->w_up)) != LLMK_OK ||
        (st = layer_tensor(g, il, "ffn_down.weight", true, F, E, &L->w_down)) != LLMK_OK)
        return st;
    return LLMK_OK;
}

/* Layer il's router and expert stacks (every layer of a MoE model is MoE:
 * a dense FFN tensor there is refused as unknown). Gate and up must share a
 * type: the executor quantizes their input once for both. */
static int load_experts(llmk_model *m, int il, bool biases) {
    const llmk_gguf *g = m->gguf;
    struct llmk_layer *L = &m->layers[il];
    uint64_t E = (uint64_t)m->hp.n_embd, X = (uint64_t)m->moe.n_expert, FE = (uint64_t)m->moe.n_ff_exp;
    int st;
    if ((st = layer_tensor(g, il, "ffn_gate_inp.weight", true, E, X, &L->gate_inp)) != LLMK_OK ||
        (st = layer_tensor3(g, il, "ffn_gate_exps.weight", true, E, FE, X, &L->gate_exps)) != LLMK_OK ||
        (st = layer_tensor3(g, il, "ffn_up_exps.weight", true, E, FE, X, &L->up_exps)) != LLMK_OK ||
        (st = layer_tensor3(g, il, "ffn_down_exps.weight", true, FE, E, X, &L->down_exps)) != LLMK_OK)
        return st;
    if (biases && ((st = layer_tensor(g, il, "ffn_gate_inp.bias", true, X, 1, &L->gate_inp_b)) != LLMK_OK ||
                   (st = layer_tensor(g, il, "ffn_gate_exps.bias", true, FE, X, &L->gate_exps_b)) != LLMK_OK ||
                   (st = layer_tensor(g, il, "ffn_up_exps.bias", true, FE, X, &L->up_exps_b)) != LLMK_OK ||
                   (st = layer_tensor(g, il, "ffn_down_exps.bias", true, E, X, &L->down_exps_b)) != LLMK_OK))
        return st;
    if (L->gate_exps->type != L->up_exps->type)
        return llmk_fail(LLMK_TENSOR_TYPE_UNSUPPORTED,
                         "model: layer %d: ffn_gate_exps is %s but ffn_up_exps is %s (they must share a type)", il,
                         llmk_type_name(L->gate_exps->type), llmk_type_name(L->up_exps->type));
    return LLMK_OK;
}

/* The routers as f32 rows (n_expert x n_embd per layer): read by every path
 * for every token, and small. */
static int routers_f32(llmk_model *m) {
    const llmk_hparams *hp = &m->hp;
    uint64_t per = (uint64_t)m->moe.n_expert * (uint64_t)hp->n_embd;
    m->router_store = malloc((size_t)(per * (uint64_t)hp->n_layer) * sizeof(float));
    if (!m->router_store) return llmk_fail(LLMK_OUT_OF_MEMORY, "model: %llu floats for the routers",
                                           (unsigned long long)(per * (uint64_t)hp->n_layer));
    for (int il = 0; il < hp->n_layer; il++) {
        struct llmk_layer *L = &m->layers[il];
        float *dst = m->router_store + (size_t)il * per;
        int st = decode_read(m->gguf, L->gate_inp, dst); /* rows are whole blocks: one row after another */
        if (st != LLMK_OK) return st;
        L->gate_inp_f = dst;
    }
    return LLMK_OK;
}

/* The sliding-window layers: the window (required when `required`, else 0
 * = none) and which layers slide, from the pattern key (an unsigned n:
 * layer il slides when il % n < n - 1; or one bool per layer, read by
 * layer_slides), default_pattern when absent (llama.cpp's: 6 for gemma3, 2
 * for gpt-oss, whose converters write no pattern). */
static int load_swa(llmk_model *m, bool required, int32_t default_pattern) {
    const llmk_gguf *g = m->gguf;
    llmk_hparams *hp = &m->hp;
    const char *a = m->arch;
    int st;
    if ((st = key_u32(g, a, "attention.sliding_window", required, 0, required ? 1 : 0, 1u << 30, &hp->n_swa)) != LLMK_OK)
        return st;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", a);
    uint32_t et;
    uint64_t n;
    if (llmk_gguf_get_arr(g, key, &et, &n) == LLMK_OK) {
        if (n != (uint64_t)hp->n_layer)
            return llmk_fail(LLMK_BAD_HYPERPARAMETER, "model: key %s has %llu entries for %d layers", key,
                             (unsigned long long)n, hp->n_layer);
        hp->swa_pattern = -1; /* per layer: read by load_weights */
        return LLMK_OK;
    }
    return key_u32(g, a, "attention.sliding_window_pattern", false, (uint32_t)default_pattern, 0, MAX_LAYERS,
                   &hp->swa_pattern);
}

/* What gemma3 and gpt-oss add (defaults for every other architecture).
 * gemma3: sliding windows with their own RoPE base, the query scale, scaled
 * embeddings, a final logit soft-cap, GELU gating, post-norms; as llama.cpp
 * reads the converter's keys: sliding base 10000, and the 27B (62 layers)
 * scaling queries by n_embd / n_head instead of head_dim. gpt-oss: sliding
 * windows on the global layers' RoPE, attention sinks, the O-projection's
 * bias. */
static int load_arch_hparams(llmk_model *m, enum arch_id arch) {
    const llmk_gguf *g = m->gguf;
    llmk_hparams *hp = &m->hp;
    const char *a = m->arch;
    hp->attn_scale = 1.0 / sqrt((double)hp->head_dim);
    hp->embd_scale = 1.0;
    int st;
    if (arch == ARCH_GPTOSS) {
        hp->has_attn_sinks = hp->has_o_bias = true;
        return load_swa(m, true, 2);
    }
    if (arch != ARCH_GEMMA3) return LLMK_OK;
    if ((st = load_swa(m, false, 6)) != LLMK_OK ||
        (st = key_f64(g, a, "rope.freq_base_swa", false, 10000.0, 1e-3, 1e12, &hp->rope_theta_swa)) != LLMK_OK ||
        (st = key_f64(g, a, "final_logit_softcapping", false, 0.0, 0.0, 1e6, &hp->logit_softcap)) != LLMK_OK)
        return st;
    double per_head = hp->n_layer == 62 ? (double)(hp->n_embd / hp->n_head) : (double)hp->head_dim;
    hp->attn_scale = 1.0 / sqrt(per_head);
    hp->embd_scale = sqrt((double)hp->n_embd);
    hp->ffn_gelu = true;
    hp->has_post_norms = true;
    return LLMK_OK;
}

/* Whether layer il of a model with a sliding window slides. */
static int layer_slides(const llmk_model *m, int il, bool *out) {
    const llmk_hparams *hp = &m->hp;
    *out = false;
    if (!hp->n_swa) return LLMK_OK;
    if (hp->swa_pattern >= 0) {
        *out = hp->swa_pattern == 0 || il % hp->swa_pattern < hp->swa_pattern - 1;
        return LLMK_OK;
    }
    char key[128];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", m->arch);
    double v;
    int st = llmk_gguf_arr_num(m->gguf, key, (uint64_t)il, &v);
    if (st != LLMK_OK) return llmk_fail(LLMK_BAD_HYPERPARAMETER, "model: key %s[%d]: %s", key, il, llmk_last_error());
    *out = v != 0;
    return LLMK_OK;
}

static int load_weights(llmk_model *m, enum arch_id arch) {
    const llmk_gguf *g = m->gguf;
    llmk_hparams *hp = &m->hp;
    int st;
    uint64_t E = (uint64_t)hp->n_embd, V = (uint64_t)hp->n_vocab, F = (uint64_t)hp->n_ff;
    uint64_t QD = (uint64_t)hp->n_head * (uint64_t)hp->head_dim;
    uint64_t KD = (uint64_t)hp->n_head_kv * (uint64_t)hp->head_dim;

    if ((st = get_tensor(g, "output_norm.weight", true, E, 1, &m->out_norm)) != LLMK_OK) return st;
    if ((st = get_tensor(g, "output.weight", false, E, V, &m->output)) != LLMK_OK) return st;
    hp->tied_output = m->output == NULL;
    if (hp->tied_output) m->output = m->tok_embd;

    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return llmk_fail(LLMK_OUT_OF_MEMORY, "model: %d layers", hp->n_layer);
    bool bias = arch == ARCH_QWEN2 || arch == ARCH_GPTOSS, gptoss = arch == ARCH_GPTOSS;
    bool qkn = arch == ARCH_QWEN3 || arch == ARCH_QWEN3MOE || arch == ARCH_GEMMA3;
    hp->has_qkv_bias = bias;
    hp->has_qk_norm = qkn;
    for (int il = 0; il < hp->n_layer; il++) {
        struct llmk_layer *L = &m->layers[il];
        if ((st = layer_tensor(g, il, "attn_norm.weight", true, E, 1, &L->attn_norm)) != LLMK_OK ||
            (st = layer_tensor(g, il, "attn_q.weight", true, E, QD, &L->wq)) != LLMK_OK ||
            (st = layer_tensor(g, il, "attn_k.weight", true, E, KD, &L->wk)) != LLMK_OK ||
            (st = layer_tensor(g, il, "attn_v.weight", true, E, KD, &L->wv)) != LLMK_OK ||
            (st = layer_tensor(g, il, "attn_output.weight", true, QD, E, &L->wo)) != LLMK_OK ||
            (st = layer_tensor(g, il, gptoss ? "post_attention_norm.weight" : "ffn_norm.weight", true, E, 1,
                               &L->ffn_norm)) != LLMK_OK)
            return st;
        if ((st = m->moe.n_expert ? load_experts(m, il, gptoss) : load_dense_ffn(g, il, E, F, L)) != LLMK_OK) return st;
        if ((st = layer_tensor(g, il, "attn_output.bias", gptoss, E, 1, &L->bo)) != LLMK_OK ||
            (st = layer_tensor(g, il, "attn_sinks.weight", gptoss, (uint64_t)hp->n_head, 1, &L->sinks)) != LLMK_OK)
            return st;
        /* Biases: required by qwen2; elsewhere a present bias is used. */
        if ((st = layer_tensor(g, il, "attn_q.bias", bias, QD, 1, &L->bq)) != LLMK_OK ||
            (st = layer_tensor(g, il, "attn_k.bias", bias, KD, 1, &L->bk)) != LLMK_OK ||
            (st = layer_tensor(g, il, "attn_v.bias", bias, KD, 1, &L->bv)) != LLMK_OK)
            return st;
        if ((L->bq != NULL) != (L->bk != NULL) || (L->bk != NULL) != (L->bv != NULL))
            return llmk_fail(LLMK_MISSING_TENSOR,
                             "model: layer %d has only some of attn_q.bias, attn_k.bias, attn_v.bias", il);
        if (L->bq) hp->has_qkv_bias = true;
        if ((st = layer_tensor(g, il, "attn_q_norm.weight", qkn, (uint64_t)hp->head_dim, 1, &L->q_norm)) != LLMK_OK ||
            (st = layer_tensor(g, il, "attn_k_norm.weight", qkn, (uint64_t)hp->head_dim, 1, &L->k_norm)) != LLMK_OK)
            return st;
        if ((L->q_norm != NULL) != (L->k_norm != NULL))
            return llmk_fail(LLMK_MISSING_TENSOR,
                             "model: layer %d has only one of attn_q_norm.weight, attn_k_norm.weight", il);
        if (L->q_norm) hp->has_qk_norm = true;
        /* gemma3's post-norms (gpt-oss's post_attention_norm is its FFN norm, above) */
        if (hp->has_post_norms &&
            ((st = layer_tensor(g, il, "post_attention_norm.weight", true, E, 1, &L->attn_post_norm)) != LLMK_OK ||
             (st = layer_tensor(g, il, "post_ffw_norm.weight", true, E, 1, &L->ffn_post_norm)) != LLMK_OK))
            return st;
        if ((st = layer_slides(m, il, &L->swa)) != LLMK_OK) return st;
    }

    /* f32 views of every 1-D tensor. */
    size_t need = 0, used = 0;
    uint64_t X = (uint64_t)m->moe.n_expert, FE = (uint64_t)m->moe.n_ff_exp;
    for (int il = 0; il < hp->n_layer; il++)
        need += (size_t)(5 * E + QD + 2 * KD + 2 * (uint64_t)hp->head_dim + (uint64_t)hp->n_head + X * (1 + 2 * FE + E));
    need += (size_t)E;
    m->vec_store = malloc(need * sizeof(float));
    if (!m->vec_store) return llmk_fail(LLMK_OUT_OF_MEMORY, "model: %zu floats for norm vectors", need);
    if ((st = vec_f32(m, m->out_norm, &used, &m->out_norm_f)) != LLMK_OK) return st;
    for (int il = 0; il < hp->n_layer; il++) {
        struct llmk_layer *L = &m->layers[il];
        if ((st = vec_f32(m, L->attn_norm, &used, &L->attn_norm_f)) != LLMK_OK ||
            (st = vec_f32(m, L->ffn_norm, &used, &L->ffn_norm_f)) != LLMK_OK ||
            (st = vec_f32(m, L->bq, &used, &L->bq_f)) != LLMK_OK || (st = vec_f32(m, L->bk, &used, &L->bk_f)) != LLMK_OK ||
            (st = vec_f32(m, L->bv, &used, &L->bv_f)) != LLMK_OK ||
            (st = vec_f32(m, L->q_norm, &used, &L->q_norm_f)) != LLMK_OK ||
            (st = vec_f32(m, L->k_norm, &used, &L->k_norm_f)) != LLMK_OK ||
            (st = vec_f32(m, L->attn_post_norm, &used, &L->attn_post_norm_f)) != LLMK_OK ||
            (st = vec_f32(m, L->ffn_post_norm, &used, &L->ffn_post_norm_f)) != LLMK_OK ||
            (st = vec_f32(m, L->bo, &used, &L->bo_f)) != LLMK_OK || (st = vec_f32(m, L->sinks, &used, &L->sinks_f)) != LLMK_OK ||
            (st = vec_f32(m, L->gate_inp_b, &used, &L->gate_inp_b_f)) != LLMK_OK ||
            (st = vec_f32(m, L->gate_exps_b, &used, &L->gate_exps_b_f)) != LLMK_OK ||
            (st = vec_f32(m, L->up_exps_b, &used, &L->up_exps_b_f)) != LLMK_OK ||
            (st = vec_f32(m, L->down_exps_b, &used, &L->down_exps_b_f)) != LLMK_OK)
            return st;
    }
    LLMK_CHECK(used <= need);
    if (m->moe.n_expert && (st = routers_f32(m)) != LLMK_OK) return st;

    if ((st = load_weight_scales(m, arch)) != LLMK_OK) return st;
    size_t nt = llmk_gguf_n_tensors(g);
    for (size_t i = 0; i < nt; i++) {
        const llmk_tensor_info *t = llmk_gguf_tensor(g, i);
        if (!tensor_known(t->name, hp->n_layer, m->moe.n_expert > 0, arch) && !scale_suffix(t->name))
            return llmk_fail(LLMK_UNSUPPORTED_FEATURE,
                             "model: tensor %s is not part of architecture %s as llmk implements it "
                             "(an unsupported feature such as MoE experts or extra biases)",
                             t->name, m->arch);
    }
    return LLMK_OK;
}

/* Experts: required by qwen3moe, refused elsewhere (the other architectures'
 * MoE variants are other files: qwen2moe, llama4, ...). */
static int load_moe_hparams(llmk_model *m, enum arch_id arch) {
    const llmk_gguf *g = m->gguf;
    const char *a = m->arch;
    char key[128];
    snprintf(key, sizeof key, "%s.expert_count", a);
    uint32_t n_expert = 0;
    if (arch != ARCH_QWEN3MOE && arch != ARCH_GPTOSS) {
        if (llmk_gguf_get_u32(g, key, &n_expert) == LLMK_OK && n_expert > 0)
            return llmk_fail(LLMK_UNSUPPORTED_FEATURE,
                             "model: %s = %u: mixture-of-experts is supported for architectures qwen3moe and gpt-oss only",
                             key, n_expert);
        return LLMK_OK;
    }
    struct llmk_moe_hp *h = &m->moe;
    int st;
    if ((st = key_u32(g, a, "expert_count", true, 0, 1, MAX_EXPERTS, &h->n_expert)) != LLMK_OK ||
        (st = key_u32(g, a, "expert_used_count", true, 0, 1,
                      (uint32_t)(h->n_expert < LLMK_MOE_KMAX ? h->n_expert : LLMK_MOE_KMAX), &h->n_used)) != LLMK_OK ||
        (st = key_u32(g, a, "expert_feed_forward_length", true, 0, 1, MAX_FF, &h->n_ff_exp)) != LLMK_OK)
        return st;
    /* llama.cpp renormalises qwen3moe's top-k weights whatever the file says
     * (Qwen3-MoE checkpoints set norm_topk_prob); the key, when a converter
     * writes it, is honoured. */
    bool norm = true;
    snprintf(key, sizeof key, "%s.expert_weights_norm", a);
    st = llmk_gguf_get_bool(g, key, &norm);
    if (st != LLMK_OK && st != LLMK_NOT_FOUND)
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "model: key %s: %s (want a bool)", key, llmk_last_error());
    h->norm_w = st == LLMK_NOT_FOUND ? true : norm;
    /* gpt-oss: the softmax over the k chosen logits (llama.cpp's
     * SOFTMAX_WEIGHT gating), which is the renormalised top-k of the full
     * softmax; experts' SwiGLU clamped with OpenAI's constants */
    if (arch == ARCH_GPTOSS) h->norm_w = true, h->clamp_glu = true, h->glu_alpha = 1.702f, h->glu_limit = 7.0f;
    snprintf(key, sizeof key, "%s.expert_shared_count", a);
    uint32_t shared = 0;
    if (llmk_gguf_get_u32(g, key, &shared) == LLMK_OK && shared > 0)
        return llmk_fail(LLMK_UNSUPPORTED_FEATURE, "model: %s = %u: shared experts are not implemented", key, shared);
    return LLMK_OK;
}

static int load_hparams(llmk_model *m, enum arch_id *arch_out) {
    const llmk_gguf *g = m->gguf;
    llmk_hparams *hp = &m->hp;
    const char *arch;
    size_t alen;
    int st = llmk_gguf_get_str(g, "general.architecture", &arch, &alen);
    if (st == LLMK_NOT_FOUND)
        return llmk_fail(LLMK_UNSUPPORTED_ARCHITECTURE, "model: general.architecture is missing");
    if (st != LLMK_OK)
        return llmk_fail(LLMK_UNSUPPORTED_ARCHITECTURE, "model: general.architecture: %s", llmk_last_error());
    size_t k = 0;
    for (; k < LLMK_ARRAY_LEN(known_archs); k++)
        if (alen == strlen(known_archs[k].name) && !memcmp(arch, known_archs[k].name, alen)) break;
    if (k == LLMK_ARRAY_LEN(known_archs))
        return llmk_fail(LLMK_UNSUPPORTED_ARCHITECTURE,
                         "model: architecture '%.64s' is not supported (llama, qwen2, qwen3, qwen3moe, gemma3, gpt-oss)", arch);
    *arch_out = known_archs[k].id;
    snprintf(m->arch, sizeof m->arch, "%s", known_archs[k].name);
    hp->arch = m->arch;
    const char *a = m->arch;

    if ((st = load_moe_hparams(m, *arch_out)) != LLMK_OK) return st;

    if ((st = key_u32(g, a, "block_count", true, 0, 1, MAX_LAYERS, &hp->n_layer)) != LLMK_OK ||
        (st = key_u32(g, a, "embedding_length", true, 0, 1, MAX_EMBD, &hp->n_embd)) != LLMK_OK ||
        (st = key_u32(g, a, "feed_forward_length", true, 0, 1, MAX_FF, &hp->n_ff)) != LLMK_OK ||
        (st = key_u32(g, a, "attention.head_count", true, 0, 1, MAX_HEADS, &hp->n_head)) != LLMK_OK ||
        (st = key_u32(g, a, "attention.head_count_kv", false, (uint32_t)hp->n_head, 1, MAX_HEADS,
                      &hp->n_head_kv)) != LLMK_OK ||
        (st = key_u32(g, a, "context_length", true, 0, 1, 1u << 30, &hp->n_ctx_train)) != LLMK_OK ||
        (st = key_f64(g, a, "attention.layer_norm_rms_epsilon", true, 0, 0, 1, &hp->rms_eps)) != LLMK_OK ||
        (st = key_f64(g, a, "rope.freq_base", false, 10000.0, 1e-3, 1e12, &hp->rope_theta)) != LLMK_OK)
        return st;
    if (hp->n_head % hp->n_head_kv != 0)
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "model: head_count %d is not a multiple of head_count_kv %d",
                         hp->n_head, hp->n_head_kv);
    int32_t dflt_hd = hp->n_embd / hp->n_head;
    int32_t vlen;
    if ((st = key_u32(g, a, "attention.key_length", false, (uint32_t)(dflt_hd > 0 ? dflt_hd : 1), 2, 1 << 14,
                      &hp->head_dim)) != LLMK_OK ||
        (st = key_u32(g, a, "attention.value_length", false, (uint32_t)hp->head_dim, 1, 1 << 14, &vlen)) != LLMK_OK)
        return st;
    if (vlen != hp->head_dim)
        return llmk_fail(LLMK_UNSUPPORTED_FEATURE, "model: value_length %d differs from key_length %d",
                         vlen, hp->head_dim);
    if (hp->head_dim % 2)
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "model: head dimension %d is odd", hp->head_dim);
    if ((st = key_u32(g, a, "rope.dimension_count", false, (uint32_t)hp->head_dim, 2, 1 << 14, &hp->n_rot)) != LLMK_OK)
        return st;
    if (hp->n_rot != hp->head_dim)
        return llmk_fail(LLMK_UNSUPPORTED_FEATURE,
                         "model: partial rotary embedding (rope.dimension_count %d < head dimension %d)",
                         hp->n_rot, hp->head_dim);
    hp->rope_neox = *arch_out != ARCH_LLAMA;
    if ((st = load_arch_hparams(m, *arch_out)) != LLMK_OK) return st;

    const llmk_tensor_info *te = llmk_gguf_find_tensor(g, "token_embd.weight");
    if (!te)
        return llmk_fail(LLMK_MISSING_TENSOR, "model: tensor token_embd.weight is missing (expected shape [%d, n_vocab])",
                         hp->n_embd);
    if (te->ne[1] < 1 || te->ne[1] > (1u << 24))
        return llmk_fail(LLMK_TENSOR_SHAPE_MISMATCH, "model: token_embd.weight has %llu rows (vocabulary), expected 1..%u",
                         (unsigned long long)te->ne[1], 1u << 24);
    hp->n_vocab = (int32_t)te->ne[1];
    if ((st = get_tensor(g, "token_embd.weight", true, (uint64_t)hp->n_embd, (uint64_t)hp->n_vocab,
                         &m->tok_embd)) != LLMK_OK)
        return st;
    return rope_setup(m);
}

/* The rest of a load once m->gguf is open (st: how opening went), shared by
 * the file and memory entries so both run exactly the same checks. */
static int load_opened(llmk_model *m, int st, llmk_model **out) {
    enum arch_id arch = ARCH_LLAMA;
    if (st == LLMK_OK) st = load_hparams(m, &arch);
    if (st == LLMK_OK) st = load_weights(m, arch);
    if (st != LLMK_OK) {
        llmk_model_free(m);
        return st;
    }
    m->tok_status = llmk_tokenizer_load(m->gguf, &m->tok);
    if (m->tok_status != LLMK_OK) {
        m->tok = NULL;
        snprintf(m->tok_error, sizeof m->tok_error, "%s", llmk_last_error());
        llmk_error_clear(); /* kept for llmk_model_tokenizer; the load itself succeeds */
    }
    /* As llama.cpp: the vocabulary and the embedding rows are one list. A
     * shorter vocabulary would let the model pick ids with no text (found
     * mid-generation); a longer one would encode ids with no embedding. */
    size_t nv = m->tok ? llmk_tokenizer_n_vocab(m->tok) : 0;
    if (m->tok && nv != (size_t)m->hp.n_vocab) {
        int32_t rows = m->hp.n_vocab;
        llmk_model_free(m);
        return llmk_fail(LLMK_TENSOR_SHAPE_MISMATCH,
                         "model: the tokenizer has %zu tokens but token_embd.weight has %d rows; "
                         "they must be equal", nv, rows);
    }
    *out = m;
    return LLMK_OK;
}

int llmk_model_load(const char *path, llmk_model **out) {
    llmk_error_clear();
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_model_load: out is NULL");
    *out = NULL;
    if (!path) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_model_load: path is NULL");
    llmk_model *m = calloc(1, sizeof *m);
    if (!m) return llmk_fail(LLMK_OUT_OF_MEMORY, "llmk_model_load: model struct");
    return load_opened(m, llmk_gguf_open_path(path, &m->gguf), out);
}

int llmk_model_load_memory(const void *data, size_t size, llmk_model **out) {
    llmk_error_clear();
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_model_load_memory: out is NULL");
    *out = NULL;
    llmk_model *m = calloc(1, sizeof *m);
    if (!m) return llmk_fail(LLMK_OUT_OF_MEMORY, "llmk_model_load_memory: model struct");
    return load_opened(m, llmk_gguf_open_memory(data, size, &m->gguf), out);
}

void llmk_model_free(llmk_model *m) {
    if (!m) return;
    if (m->tok) llmk_tokenizer_free(m->tok);
    if (m->gguf) llmk_gguf_close(m->gguf);
    free(m->layers);
    free(m->vec_store);
    free(m->rope_inv_freq);
    free(m->rope_inv_freq_swa);
    free(m->router_store);
    free(m->wscale);
    free(m);
}

const llmk_hparams *llmk_model_hparams(const llmk_model *m) { return m ? &m->hp : NULL; }
const llmk_gguf *llmk_model_gguf(const llmk_model *m) { return m ? m->gguf : NULL; }

int llmk_model_tokenizer(const llmk_model *m, const llmk_tokenizer **out) {
    llmk_error_clear();
    if (!m || !out) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_model_tokenizer: NULL argument");
    *out = m->tok;
    if (m->tok) return LLMK_OK;
    return llmk_fail(m->tok_status, "model has no usable tokenizer: %s", m->tok_error);
}

int llmk_path_from_name(const char *name, int *path_out) {
    llmk_error_clear();
    static const char *const names[] = {"ref", "f32", "fast"};
    for (int i = 0; name && i < 3; i++)
        if (!strcmp(name, names[i])) {
            *path_out = i;
            return LLMK_OK;
        }
    return llmk_fail(LLMK_INVALID_ARGUMENT, "unknown path '%s' (ref, f32, fast)", name ? name : "(null)");
}
