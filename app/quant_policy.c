/* The presets' per-tensor rules (quant_policy.h). The facts restated from
 * llama-quantize: which tensors get more bits in which presets, the layers
 * "use_more_bits" picks, the output (or the tied token_embd) rule, and the
 * fallbacks for rows that are not whole blocks. */
#include "quant_policy.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* llama_ftype numbers written to general.file_type (format facts). q3_k,
 * q4_k and q5_k are llama-quantize's aliases of the _M presets. */
static const struct quant_preset presets[] = {
    {"f32", LLMK_TYPE_F32, QMIX_NONE, 0},       {"f16", LLMK_TYPE_F16, QMIX_NONE, 1},
    {"bf16", LLMK_TYPE_BF16, QMIX_NONE, 32},    {"q4_0", LLMK_TYPE_Q4_0, QMIX_NONE, 2},
    {"q4_1", LLMK_TYPE_Q4_1, QMIX_NONE, 3},     {"q8_0", LLMK_TYPE_Q8_0, QMIX_NONE, 7},
    {"q5_0", LLMK_TYPE_Q5_0, QMIX_NONE, 8},     {"q5_1", LLMK_TYPE_Q5_1, QMIX_NONE, 9},
    {"q2_k", LLMK_TYPE_Q2_K, QMIX_NONE, 10},    {"q3_k", LLMK_TYPE_Q3_K, QMIX_M, 12},
    {"q3_k_s", LLMK_TYPE_Q3_K, QMIX_S, 11},     {"q3_k_m", LLMK_TYPE_Q3_K, QMIX_M, 12},
    {"q3_k_l", LLMK_TYPE_Q3_K, QMIX_L, 13},     {"q4_k", LLMK_TYPE_Q4_K, QMIX_M, 15},
    {"q4_k_s", LLMK_TYPE_Q4_K, QMIX_S, 14},     {"q4_k_m", LLMK_TYPE_Q4_K, QMIX_M, 15},
    {"q5_k", LLMK_TYPE_Q5_K, QMIX_M, 17},       {"q5_k_s", LLMK_TYPE_Q5_K, QMIX_S, 16},
    {"q5_k_m", LLMK_TYPE_Q5_K, QMIX_M, 17},     {"q6_k", LLMK_TYPE_Q6_K, QMIX_NONE, 18},
    {"iq4_nl", LLMK_TYPE_IQ4_NL, QMIX_NONE, 25}, {"iq4_xs", LLMK_TYPE_IQ4_XS, QMIX_NONE, 30},
    {"mxfp4", LLMK_TYPE_MXFP4, QMIX_NONE, 38},
    {"nvfp4", LLMK_TYPE_NVFP4, QMIX_NONE, 39}, /* LLAMA_FTYPE_MOSTLY_NVFP4 */
};

const struct quant_preset *quant_preset_find(const char *name) {
    for (size_t i = 0; i < CLI_LEN(presets); i++)
        if (!strcasecmp(presets[i].name, name)) return &presets[i];
    return NULL;
}

/* llama-quantize's substitutes for rows that are not whole blocks. */
static uint32_t fallback(uint32_t t) {
    switch (t) {
    case LLMK_TYPE_Q2_K: case LLMK_TYPE_Q3_K: return LLMK_TYPE_Q4_0;
    case LLMK_TYPE_Q4_K: return LLMK_TYPE_Q5_0;
    case LLMK_TYPE_Q5_K: return LLMK_TYPE_Q5_1;
    case LLMK_TYPE_Q6_K: case LLMK_TYPE_Q8_K: return LLMK_TYPE_Q8_0;
    case LLMK_TYPE_IQ4_XS: return LLMK_TYPE_IQ4_NL;
    default: return LLMK_TYPE_F16;
    }
}

uint32_t quant_fit_rows(uint32_t t, uint64_t ne0) {
    while (ne0 % llmk_type_block_elems(t) != 0) t = fallback(t);
    return t;
}

static uint32_t meta_u32(const llmk_gguf *g, const char *arch, const char *key, uint32_t dflt) {
    char k[128];
    uint32_t v;
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return llmk_gguf_get_u32(g, k, &v) == LLMK_OK ? v : dflt;
}

void quant_policy_init(struct quant_policy *q, const struct quant_preset *p, const llmk_gguf *g) {
    memset(q, 0, sizeof *q);
    q->p = p;
    const char *arch = "llama";
    size_t len;
    char a[64];
    if (llmk_gguf_get_str(g, "general.architecture", &arch, &len) == LLMK_OK) {
        snprintf(a, sizeof a, "%.*s", (int)len, arch);
        arch = a;
    }
    q->n_layer = (int)meta_u32(g, arch, "block_count", 0);
    uint32_t nh = meta_u32(g, arch, "attention.head_count", 1), nkv = meta_u32(g, arch, "attention.head_count_kv", nh);
    q->n_gqa = nkv ? (int)(nh / nkv) : 1;
    q->n_expert = (int)meta_u32(g, arch, "expert_count", 0);
    for (size_t i = 0; i < llmk_gguf_n_tensors(g); i++) {
        const char *n = llmk_gguf_tensor(g, i)->name;
        if (strstr(n, "attn_v.weight") || strstr(n, "attn_qkv.weight") || strstr(n, "attn_kv_b.weight"))
            q->n_attention_wv++;
        else if (!strcmp(n, "output.weight"))
            q->has_output = true;
    }
}

/* The layer a tensor belongs to, from its name (blk.N.), else the running
 * count: llama-quantize visits the layers in order, while files often list
 * them as names sort (blk.0, blk.1, blk.10, ...). */
static int layer_of(const char *name, int counted) {
    int i;
    return sscanf(name, "blk.%d.", &i) == 1 && i >= 0 ? i : counted;
}

/* The first and last eighth of the layers and every third one between. */
static bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static bool is_preset(const struct quant_policy *q, uint32_t type, enum quant_mix mix) {
    return q->p->type == type && q->p->mix == mix;
}

static uint32_t attn_v_type(struct quant_policy *q, const char *name, uint32_t t) {
    int i = layer_of(name, q->i_attention_wv++);
    if (q->p->type == LLMK_TYPE_Q2_K) t = q->n_gqa >= 4 ? LLMK_TYPE_Q4_K : LLMK_TYPE_Q3_K;
    else if (is_preset(q, LLMK_TYPE_Q3_K, QMIX_M)) t = i < 2 ? LLMK_TYPE_Q5_K : LLMK_TYPE_Q4_K;
    else if (is_preset(q, LLMK_TYPE_Q3_K, QMIX_L)) t = LLMK_TYPE_Q5_K;
    else if ((q->p->type == LLMK_TYPE_IQ4_NL || q->p->type == LLMK_TYPE_IQ4_XS) && q->n_gqa >= 4) t = LLMK_TYPE_Q5_K;
    else if ((is_preset(q, LLMK_TYPE_Q4_K, QMIX_M) || is_preset(q, LLMK_TYPE_Q5_K, QMIX_M)) &&
             use_more_bits(i, q->n_attention_wv))
        t = LLMK_TYPE_Q6_K;
    else if (is_preset(q, LLMK_TYPE_Q4_K, QMIX_S) && i < 4) t = LLMK_TYPE_Q5_K;
    if (q->n_expert == 8) t = LLMK_TYPE_Q8_0; /* 8 experts share attn_v: more bits cost little */
    return t;
}

static uint32_t ffn_down_type(struct quant_policy *q, const char *name, uint32_t t) {
    int i = layer_of(name, q->i_ffn_down++), n = q->n_layer;
    if (q->p->type == LLMK_TYPE_Q2_K) t = LLMK_TYPE_Q3_K;
    else if (is_preset(q, LLMK_TYPE_Q3_K, QMIX_M)) t = i < n / 16 ? LLMK_TYPE_Q5_K : LLMK_TYPE_Q4_K;
    else if (is_preset(q, LLMK_TYPE_Q3_K, QMIX_L)) t = LLMK_TYPE_Q5_K;
    else if (is_preset(q, LLMK_TYPE_Q4_K, QMIX_M)) t = use_more_bits(i, n) ? LLMK_TYPE_Q6_K : t;
    else if (i < n / 8 && (q->p->type == LLMK_TYPE_IQ4_NL || q->p->type == LLMK_TYPE_IQ4_XS)) t = LLMK_TYPE_Q5_K;
    else if (is_preset(q, LLMK_TYPE_Q5_K, QMIX_M) && use_more_bits(i, n)) t = LLMK_TYPE_Q6_K;
    else if (is_preset(q, LLMK_TYPE_Q4_K, QMIX_S) && i < n / 8) t = LLMK_TYPE_Q5_K;
    return t;
}

static uint32_t attn_output_type(const struct quant_policy *q, uint32_t t) {
    uint32_t b = q->p->type;
    if (q->n_expert == 8)
        return (b == LLMK_TYPE_Q2_K || b == LLMK_TYPE_Q3_K || b == LLMK_TYPE_IQ4_NL || b == LLMK_TYPE_IQ4_XS ||
                is_preset(q, LLMK_TYPE_Q4_K, QMIX_S) || is_preset(q, LLMK_TYPE_Q4_K, QMIX_M))
                   ? LLMK_TYPE_Q5_K
                   : t;
    if (b == LLMK_TYPE_Q2_K) return LLMK_TYPE_Q3_K;
    if (is_preset(q, LLMK_TYPE_Q3_K, QMIX_M)) return LLMK_TYPE_Q4_K;
    if (is_preset(q, LLMK_TYPE_Q3_K, QMIX_L)) return LLMK_TYPE_Q5_K;
    return t;
}

uint32_t quant_policy_choose(struct quant_policy *q, const llmk_tensor_info *ti) {
    uint32_t t = q->p->type;
    if (llmk_type_block_elems(t) <= 1) return t; /* f32/f16/bf16: no mixing */
    const char *n = ti->name;
    bool tied_embd = !q->has_output && !strcmp(n, "token_embd.weight");
    if (!strcmp(n, "output.weight") || tied_embd) {
        /* the output: q6_k unless the preset is q8_0; q8_0 when its rows do not hold the preset's blocks */
        if (ti->ne[0] % llmk_type_block_elems(t) != 0) t = LLMK_TYPE_Q8_0;
        else if (t != LLMK_TYPE_Q8_0) t = LLMK_TYPE_Q6_K;
    } else if (strstr(n, "attn_v.weight")) {
        t = attn_v_type(q, n, t);
    } else if (strstr(n, "attn_k.weight")) {
        if (q->n_expert == 8) t = LLMK_TYPE_Q8_0;
    } else if (strstr(n, "ffn_down")) {
        t = ffn_down_type(q, n, t);
    } else if (strstr(n, "attn_output.weight")) {
        t = attn_output_type(q, t);
    }
    return quant_fit_rows(t, ti->ne[0]);
}
