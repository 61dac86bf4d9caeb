/* A Hugging Face model folder (config.json, *.safetensors, tokenizer.json,
 * tokenizer_config.json, generation_config.json) opened as the same GGUF view
 * the model loader and the tokenizer read: config.json and the tokenizer
 * files become the metadata llama.cpp's converter would write (a GGUF image
 * built with llmk's writer and parsed back by the hardened reader), and the
 * safetensors tensors get llama.cpp's names, their shapes reversed (GGUF
 * lists the row length first) and their data left in the mapping.
 *
 * Facts of the formats that matter here:
 *  - llama-family GGUFs store attn_q / attn_k with each head's rows
 *    interleaved (GGUF row h*hd + 2i + s = HF row h*hd + s*hd/2 + i) and rope
 *    then rotates adjacent pairs; qwen2/qwen3 GGUFs keep HF's order and rotate
 *    split halves. So for llama those two matrices (and their biases) are the
 *    one copy made: their rows permuted, bit for bit what the converter writes.
 *  - 1-D tensors (norms, biases) stay in their dtype; the loader reads them
 *    as f32 either way (bf16 and f16 widen exactly).
 *  - BF16 / F16 / F32 matrices keep their type: the f32 path decodes rows
 *    inside the matvec, as for a GGUF of that type. */
#include "codec/half.h"
#include "gguf_internal.h"
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#define HF_MAX_JSON (256u << 20) /* tokenizer.json of a 256k vocabulary is ~20 MB */
#define HF_MAX_SHARDS 4096

enum hf_arch { HF_LLAMA, HF_QWEN2, HF_QWEN3, HF_QWEN3MOE, HF_GEMMA3, HF_GPTOSS };

static const struct {
    const char *hf, *gguf;
    enum hf_arch id;
} hf_archs[] = {{"LlamaForCausalLM", "llama", HF_LLAMA},
                {"Qwen2ForCausalLM", "qwen2", HF_QWEN2},
                {"Qwen3ForCausalLM", "qwen3", HF_QWEN3},
                {"Qwen3MoeForCausalLM", "qwen3moe", HF_QWEN3MOE},
                {"Gemma3ForCausalLM", "gemma3", HF_GEMMA3},
                {"GptOssForCausalLM", "gpt-oss", HF_GPTOSS}};

/* What the view's tensors point into, released when it closes. */
struct hf_owner {
    llmk_safetensors **files;
    size_t n_files;
    void **copies;
    size_t n_copies;
};

static void owner_release(void *p) {
    struct hf_owner *o = p;
    if (!o) return;
    for (size_t i = 0; i < o->n_files; i++) llmk_safetensors_close(o->files[i]);
    for (size_t i = 0; i < o->n_copies; i++) free(o->copies[i]);
    free(o->files);
    free(o->copies);
    free(o);
}

/* ---- files ----------------------------------------------------------------- */

/* Read dir/name whole (NUL-terminated). LLMK_NOT_FOUND when absent. */
static int read_text(const char *dir, const char *name, char **text, size_t *len) {
    char path[4096];
    *text = NULL;
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "%s: path too long", dir);
    struct stat sb;
    if (stat(path, &sb) != 0) return llmk_fail(LLMK_NOT_FOUND, "%s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return llmk_fail(LLMK_IO_ERROR, "%s: not a regular file", path);
    if ((uint64_t)sb.st_size > HF_MAX_JSON)
        return llmk_fail(LLMK_COUNT_TOO_LARGE, "%s: %lld bytes, more than the %u a model folder's JSON may have", path,
                         (long long)sb.st_size, HF_MAX_JSON);
    FILE *f = fopen(path, "rb");
    if (!f) return llmk_fail(LLMK_IO_ERROR, "%s: cannot open: %s", path, strerror(errno));
    char *buf = malloc((size_t)sb.st_size + 1);
    size_t got = buf ? fread(buf, 1, (size_t)sb.st_size, f) : 0;
    fclose(f);
    if (!buf) return llmk_fail(LLMK_OUT_OF_MEMORY, "%s: %lld bytes", path, (long long)sb.st_size);
    if (got != (size_t)sb.st_size) {
        free(buf);
        return llmk_fail(LLMK_IO_ERROR, "%s: short read", path);
    }
    buf[got] = 0;
    *text = buf;
    *len = got;
    return LLMK_OK;
}

/* Parse dir/name as a JSON object; *out NULL (LLMK_OK) when the file is
 * absent and optional. */
static int read_json(const char *dir, const char *name, bool required, cJSON **out) {
    char *text;
    size_t len;
    *out = NULL;
    int st = read_text(dir, name, &text, &len);
    if (st == LLMK_NOT_FOUND && !required) {
        llmk_error_clear();
        return LLMK_OK;
    }
    if (st == LLMK_NOT_FOUND) /* an I/O error as for any path that is not a model file */
        return llmk_fail(LLMK_IO_ERROR, "a directory without %s, so not a Hugging Face model folder (which has "
                         "config.json, *.safetensors and tokenizer.json)", name);
    if (st != LLMK_OK) return st;
    *out = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        return llmk_fail(LLMK_BAD_REQUEST, "%s/%s: not a JSON object", dir, name);
    }
    return LLMK_OK;
}

/* ---- config.json ------------------------------------------------------------ */

static const cJSON *jget(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

/* An integer field in [lo, hi]; LLMK_NOT_FOUND when absent (no message). */
static int jint(const cJSON *o, const char *key, double lo, double hi, int64_t *out) {
    const cJSON *v = jget(o, key);
    if (!v || cJSON_IsNull(v)) return LLMK_NOT_FOUND;
    if (!cJSON_IsNumber(v) || floor(v->valuedouble) != v->valuedouble || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "config.json: %s is not an integer in [%g, %g]", key, lo, hi);
    *out = (int64_t)v->valuedouble;
    return LLMK_OK;
}

static int jreal(const cJSON *o, const char *key, double *out) {
    const cJSON *v = jget(o, key);
    if (!v || cJSON_IsNull(v)) return LLMK_NOT_FOUND;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "config.json: %s is not a number", key);
    *out = v->valuedouble;
    return LLMK_OK;
}

static bool jtrue(const cJSON *o, const char *key) { return cJSON_IsTrue(jget(o, key)); }

struct hf_hp {
    enum hf_arch arch;
    const char *arch_name;
    int64_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_ctx, n_vocab;
    int64_t n_tok; /* tokens the view's tokenizer has (0: no tokenizer.json) */
    int64_t n_expert; /* qwen3moe: experts per layer (0: dense) */
    bool tied;
};

static int put_u32(llmk_gguf_writer *w, const char *arch, const char *suffix, int64_t v) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return llmk_gguf_writer_set_u32(w, key, (uint32_t)v);
}

static int put_f32(llmk_gguf_writer *w, const char *arch, const char *suffix, double v) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return llmk_gguf_writer_set_f32(w, key, (float)v);
}

/* ARCH.rope.scaling.type and .factor, which every scaling type writes. */
static int put_scaling(llmk_gguf_writer *w, const char *a, const char *type, double factor) {
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    int st = llmk_gguf_writer_set_str(w, key, type);
    return st != LLMK_OK ? st : put_f32(w, a, "rope.scaling.factor", factor);
}

/* The scaling keys of one rope_scaling / rope_parameters object (NULL:
 * none): default, linear and (unless !llama3_ok) llama3 are what the loader
 * implements; the rest are refused. */
enum { ROPE_LLAMA3 = 1, ROPE_YARN = 2 }; /* the scaling types a family takes beside linear */

/* gpt-oss's YaRN as the converter writes it. transformers truncates the
 * ramp's ends to whole dimensions unless truncate is false, which gpt-oss's
 * configs set and llmk's gpt-oss RoPE computes; a truncating config is
 * refused. */
static int rope_yarn_keys(const cJSON *sc, const char *a, double factor, llmk_gguf_writer *w) {
    int64_t orig = 0;
    double fast = 32, slow = 1;
    int st;
    if (jint(sc, "original_max_position_embeddings", 1, 1 << 30, &orig) != LLMK_OK)
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "config.json: yarn rope scaling needs original_max_position_embeddings");
    if (jtrue(sc, "truncate"))
        return llmk_fail(LLMK_UNSUPPORTED_FEATURE, "config.json: yarn rope scaling with truncate true is not supported "
                         "(gpt-oss's is false)");
    if ((st = jreal(sc, "beta_fast", &fast)) != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    if ((st = jreal(sc, "beta_slow", &slow)) != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    if ((st = put_scaling(w, a, "yarn", factor)) != LLMK_OK ||
        (st = put_u32(w, a, "rope.scaling.original_context_length", orig)) != LLMK_OK ||
        (st = put_f32(w, a, "rope.scaling.yarn_beta_fast", fast)) != LLMK_OK ||
        (st = put_f32(w, a, "rope.scaling.yarn_beta_slow", slow)) != LLMK_OK)
        return st;
    llmk_error_clear();
    return LLMK_OK;
}

static int rope_scaling_keys(const cJSON *sc, const char *a, unsigned ok, llmk_gguf_writer *w) {
    if (!sc) return LLMK_OK;
    const cJSON *type = jget(sc, "rope_type");
    if (!type) type = jget(sc, "type");
    const char *t = cJSON_IsString(type) ? type->valuestring : "default";
    if (!strcmp(t, "default")) return LLMK_OK;
    double factor = 0;
    if (jreal(sc, "factor", &factor) != LLMK_OK || !(factor > 0))
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "config.json: rope scaling '%.32s' without a positive factor", t);
    int st;
    if (!strcmp(t, "linear")) return put_scaling(w, a, "linear", factor);
    if (!strcmp(t, "yarn") && (ok & ROPE_YARN)) return rope_yarn_keys(sc, a, factor, w);
    if (strcmp(t, "llama3") != 0 || !(ok & ROPE_LLAMA3))
        return llmk_fail(LLMK_UNSUPPORTED_FEATURE, "config.json: rope scaling '%.32s' is not supported (%s)", t,
                         ok & ROPE_LLAMA3 ? "linear, llama3" : ok & ROPE_YARN ? "linear, yarn" : "linear");
    double lo = 1, hi = 4;
    int64_t orig = 0;
    if (jint(sc, "original_max_position_embeddings", 1, 1 << 30, &orig) != LLMK_OK)
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "config.json: llama3 rope scaling needs original_max_position_embeddings");
    if ((st = jreal(sc, "low_freq_factor", &lo)) != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    if ((st = jreal(sc, "high_freq_factor", &hi)) != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    if ((st = put_scaling(w, a, "llama3", factor)) != LLMK_OK ||
        (st = put_u32(w, a, "rope.scaling.original_context_length", orig)) != LLMK_OK ||
        (st = put_f32(w, a, "rope.scaling.low_freq_factor", lo)) != LLMK_OK ||
        (st = put_f32(w, a, "rope.scaling.high_freq_factor", hi)) != LLMK_OK)
        return st;
    return LLMK_OK;
}

/* rope_scaling (transformers 4) or rope_parameters (5) of llama/qwen/gpt-oss. */
static int config_rope(const cJSON *cfg, const char *a, unsigned ok, llmk_gguf_writer *w) {
    const cJSON *rp = jget(cfg, "rope_parameters");
    const cJSON *rs = jget(cfg, "rope_scaling");
    double theta = 10000.0;
    int st = jreal(cfg, "rope_theta", &theta);
    if (st == LLMK_NOT_FOUND && cJSON_IsObject(rp)) st = jreal(rp, "rope_theta", &theta);
    if (st != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    if ((st = put_f32(w, a, "rope.freq_base", theta)) != LLMK_OK) return st;
    return rope_scaling_keys(cJSON_IsObject(rs) ? rs : cJSON_IsObject(rp) ? rp : NULL, a, ok, w);
}

static int config_arch(const cJSON *cfg, struct hf_hp *hp) {
    const cJSON *archs = jget(cfg, "architectures");
    const cJSON *first = cJSON_IsArray(archs) ? archs->child : NULL;
    if (!cJSON_IsString(first))
        return llmk_fail(LLMK_UNSUPPORTED_ARCHITECTURE, "config.json: no \"architectures\" list naming the model class");
    for (size_t i = 0; i < LLMK_ARRAY_LEN(hf_archs); i++)
        if (!strcmp(first->valuestring, hf_archs[i].hf)) {
            hp->arch = hf_archs[i].id;
            hp->arch_name = hf_archs[i].gguf;
            return LLMK_OK;
        }
    if (!strcmp(first->valuestring, "Gemma3ForConditionalGeneration"))
        return llmk_fail(LLMK_UNSUPPORTED_ARCHITECTURE,
                         "config.json: architecture Gemma3ForConditionalGeneration (Gemma 3 with its vision tower) is "
                         "not supported; the text-only Gemma3ForCausalLM is");
    return llmk_fail(LLMK_UNSUPPORTED_ARCHITECTURE,
                     "config.json: architecture %.80s is not supported (LlamaForCausalLM, Qwen2ForCausalLM, "
                     "Qwen3ForCausalLM, Qwen3MoeForCausalLM, Gemma3ForCausalLM, GptOssForCausalLM)", first->valuestring);
}

static int check_act(const cJSON *cfg, const char *key, const char *want) {
    const cJSON *act = jget(cfg, key);
    if (act && !cJSON_IsNull(act) && (!cJSON_IsString(act) || strcmp(act->valuestring, want) != 0))
        return llmk_fail(LLMK_UNSUPPORTED_FEATURE, "config.json: %s %.40s is not supported (%s)", key,
                         cJSON_IsString(act) ? act->valuestring : "(not a string)", want);
    return LLMK_OK;
}

/* Features of these classes llmk does not implement, refused by name
 * rather than silently ignored. */
static int config_refusals(const cJSON *cfg, enum hf_arch arch) {
    int st;
    if (arch == HF_GEMMA3) {
        /* Gemma3TextConfig's hidden_activation (hidden_act in older files) */
        if ((st = check_act(cfg, "hidden_activation", "gelu_pytorch_tanh")) != LLMK_OK ||
            (st = check_act(cfg, "hidden_act", "gelu_pytorch_tanh")) != LLMK_OK)
            return st;
        const cJSON *cap = jget(cfg, "attn_logit_softcapping");
        if (cap && !cJSON_IsNull(cap))
            return llmk_fail(LLMK_UNSUPPORTED_FEATURE,
                             "config.json: attn_logit_softcapping is not supported (Gemma 3 has none; set it null)");
        if (jtrue(cfg, "attention_bias"))
            return llmk_fail(LLMK_UNSUPPORTED_FEATURE, "config.json: attention_bias is not supported");
        if (jtrue(cfg, "use_bidirectional_attention"))
            return llmk_fail(LLMK_UNSUPPORTED_FEATURE,
                             "config.json: use_bidirectional_attention (an embedding model) is not supported");
    } else if ((st = check_act(cfg, "hidden_act", "silu")) != LLMK_OK) {
        return st;
    }
    if (jtrue(cfg, "mlp_bias")) return llmk_fail(LLMK_UNSUPPORTED_FEATURE, "config.json: mlp_bias is not supported");
    if (jtrue(cfg, "use_sliding_window"))
        return llmk_fail(LLMK_UNSUPPORTED_FEATURE, "config.json: use_sliding_window is not supported");
    double prf = 1;
    if (jreal(cfg, "partial_rotary_factor", &prf) == LLMK_OK && prf != 1)
        return llmk_fail(LLMK_UNSUPPORTED_FEATURE, "config.json: partial_rotary_factor %g is not supported", prf);
    llmk_error_clear();
    return LLMK_OK;
}

/* Gemma 3's layer kinds: transformers 5's layer_types list, else the
 * older sliding_window_pattern (every Nth layer global; 1: all global),
 * else Gemma3TextConfig's default of 6. The gemma3 GGUF has no pattern key
 * and llmk (as llama.cpp) then reads it as 6, so a list must be exactly that
 * layout; *slides false: no sliding layers (no window key, as the
 * converter writes none for pattern 1). */
static int gemma3_layer_kinds(const cJSON *cfg, int64_t n_layer, bool *slides) {
    const cJSON *lt = jget(cfg, "layer_types");
    *slides = true;
    if (lt && !cJSON_IsNull(lt)) {
        if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != n_layer)
            return llmk_fail(LLMK_BAD_HYPERPARAMETER, "config.json: layer_types is not a list of %lld layer kinds",
                             (long long)n_layer);
        int64_t il = 0;
        for (const cJSON *e = lt->child; e; e = e->next, il++) {
            const char *want = il % 6 < 5 ? "sliding_attention" : "full_attention";
            if (!cJSON_IsString(e) || strcmp(e->valuestring, want) != 0)
                return llmk_fail(LLMK_UNSUPPORTED_FEATURE,
                                 "config.json: layer_types[%lld] is %.40s, but llmk runs gemma3 in Gemma 3's pattern "
                                 "(five sliding_attention layers, then one full_attention)",
                                 (long long)il, cJSON_IsString(e) ? e->valuestring : "(not a string)");
        }
        return LLMK_OK;
    }
    int64_t pat = 6;
    int st = jint(cfg, "sliding_window_pattern", 0, 1 << 20, &pat);
    if (st == LLMK_NOT_FOUND) st = jint(cfg, "_sliding_window_pattern", 0, 1 << 20, &pat);
    if (st != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    if (pat != 6 && pat != 1)
        return llmk_fail(LLMK_UNSUPPORTED_FEATURE,
                         "config.json: sliding_window_pattern %lld is not supported (6, Gemma 3's; or 1, no sliding)",
                         (long long)pat);
    *slides = pat == 6;
    return LLMK_OK;
}

/* gemma3's keys as the converter writes them: rope_parameters keyed by
 * layer kind (transformers 5), or the older rope_theta / rope_scaling /
 * rope_local_base_freq; the sliding window; the final logit soft-cap. The
 * query scale is not a key: llmk (as llama.cpp) uses 1/sqrt(head_dim), or
 * 1/sqrt(hidden / heads) for the 62-layer 27B, so a query_pre_attn_scalar
 * other than that is refused. */
static int config_gemma3(const cJSON *cfg, const struct hf_hp *hp, llmk_gguf_writer *w) {
    const char *a = hp->arch_name;
    int st;
    const cJSON *rp = jget(cfg, "rope_parameters");
    if (!cJSON_IsObject(rp)) rp = jget(cfg, "rope_scaling");
    const cJSON *full = NULL, *slide = NULL;
    if (cJSON_IsObject(rp) && (jget(rp, "full_attention") || jget(rp, "sliding_attention"))) {
        full = jget(rp, "full_attention");
        slide = jget(rp, "sliding_attention");
        if ((full && !cJSON_IsObject(full)) || (slide && !cJSON_IsObject(slide)))
            return llmk_fail(LLMK_BAD_HYPERPARAMETER, "config.json: rope_parameters' entries are not objects");
    } else if (cJSON_IsObject(rp)) {
        full = rp;
    }
    double theta = 1e6, theta_swa = 0;
    if ((st = full ? jreal(full, "rope_theta", &theta) : LLMK_NOT_FOUND) == LLMK_NOT_FOUND)
        st = jreal(cfg, "rope_theta", &theta);
    if (st != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    if ((st = slide ? jreal(slide, "rope_theta", &theta_swa) : LLMK_NOT_FOUND) == LLMK_NOT_FOUND)
        st = jreal(cfg, "rope_local_base_freq", &theta_swa);
    bool has_swa_base = st == LLMK_OK;
    if (st != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    if (slide) { /* llmk's sliding layers rotate unscaled */
        const cJSON *t = jget(slide, "rope_type");
        if (t && (!cJSON_IsString(t) || strcmp(t->valuestring, "default") != 0))
            return llmk_fail(LLMK_UNSUPPORTED_FEATURE,
                             "config.json: rope scaling of the sliding layers is not supported (default)");
    }
    if ((st = put_f32(w, a, "rope.freq_base", theta)) != LLMK_OK ||
        (has_swa_base && (st = put_f32(w, a, "rope.freq_base_swa", theta_swa)) != LLMK_OK) ||
        (st = rope_scaling_keys(full, a, 0, w)) != LLMK_OK)
        return st;

    bool slides;
    if ((st = gemma3_layer_kinds(cfg, hp->n_layer, &slides)) != LLMK_OK) return st;
    int64_t window = 4096; /* Gemma3TextConfig's default */
    if ((st = jint(cfg, "sliding_window", 1, 1 << 30, &window)) != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    if (slides && (st = put_u32(w, a, "attention.sliding_window", window)) != LLMK_OK) return st;

    int64_t qpas = 256, want = hp->n_layer == 62 ? hp->n_embd / hp->n_head : hp->head_dim;
    if ((st = jint(cfg, "query_pre_attn_scalar", 1, 1 << 30, &qpas)) != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    if (qpas != want)
        return llmk_fail(LLMK_UNSUPPORTED_FEATURE,
                         "config.json: query_pre_attn_scalar %lld is not supported (llmk scales gemma3 queries by "
                         "1/sqrt(%lld))", (long long)qpas, (long long)want);
    double cap = 0;
    if ((st = jreal(cfg, "final_logit_softcapping", &cap)) != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    if (st == LLMK_OK && cap != 0 && (st = put_f32(w, a, "final_logit_softcapping", cap)) != LLMK_OK) return st;
    llmk_error_clear();
    return LLMK_OK;
}

/* Qwen3MoeConfig: every layer MoE (decoder_sparse_step 1, no
 * mlp_only_layers: the model loader has no dense layer in a MoE model), the
 * expert counts and width; norm_topk_prob false is written as
 * expert_weights_norm = false (llama.cpp's converter writes no key and
 * renormalises always, as Qwen3-MoE checkpoints ask). */
static int config_moe(const cJSON *cfg, struct hf_hp *hp, llmk_gguf_writer *w) {
    int64_t used = 0, ff = 0, step = 1;
    int st;
    const char *a = hp->arch_name;
    if ((st = jint(cfg, "num_experts", 1, 1 << 16, &hp->n_expert)) != LLMK_OK ||
        (st = jint(cfg, "num_experts_per_tok", 1, hp->n_expert, &used)) != LLMK_OK ||
        (st = jint(cfg, "moe_intermediate_size", 1, 1 << 30, &ff)) != LLMK_OK)
        return st == LLMK_NOT_FOUND ? llmk_fail(LLMK_BAD_HYPERPARAMETER, "config.json: num_experts, "
                                                "num_experts_per_tok and moe_intermediate_size are required") : st;
    if ((st = jint(cfg, "decoder_sparse_step", 1, 1 << 20, &step)) != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    const cJSON *dense = jget(cfg, "mlp_only_layers");
    if (step != 1 || (cJSON_IsArray(dense) && cJSON_GetArraySize(dense) > 0))
        return llmk_fail(LLMK_UNSUPPORTED_FEATURE, "config.json: dense layers among the MoE ones (decoder_sparse_step "
                         "%lld, mlp_only_layers) are not supported", (long long)step);
    llmk_error_clear();
    if ((st = put_u32(w, a, "expert_count", hp->n_expert)) != LLMK_OK ||
        (st = put_u32(w, a, "expert_used_count", used)) != LLMK_OK ||
        (st = put_u32(w, a, "expert_feed_forward_length", ff)) != LLMK_OK)
        return st;
    char key[96];
    snprintf(key, sizeof key, "%s.expert_weights_norm", a);
    return cJSON_IsFalse(jget(cfg, "norm_topk_prob")) ? llmk_gguf_writer_set_bool(w, key, false) : LLMK_OK;
}

/* GptOssConfig: experts of intermediate_size rows, the sliding window on
 * every other layer from the first (the loader's pattern for gpt-oss: the
 * converter writes no pattern key), YaRN, and the clamped SwiGLU whose
 * constants the loader fixes (alpha 1.702, limit 7). */
static int config_gptoss(const cJSON *cfg, struct hf_hp *hp, llmk_gguf_writer *w) {
    const char *a = hp->arch_name;
    int64_t used = 0, window = 0;
    int st;
    if ((st = jint(cfg, "num_local_experts", 1, 1 << 16, &hp->n_expert)) != LLMK_OK ||
        (st = jint(cfg, "num_experts_per_tok", 1, hp->n_expert, &used)) != LLMK_OK ||
        (st = jint(cfg, "sliding_window", 1, 1 << 30, &window)) != LLMK_OK)
        return st == LLMK_NOT_FOUND ? llmk_fail(LLMK_BAD_HYPERPARAMETER, "config.json: num_local_experts, "
                                                "num_experts_per_tok and sliding_window are required") : st;
    const cJSON *kinds = jget(cfg, "layer_types");
    int64_t i = 0;
    for (const cJSON *k = cJSON_IsArray(kinds) ? kinds->child : NULL; k; k = k->next, i++)
        if (!cJSON_IsString(k) || strcmp(k->valuestring, i % 2 ? "full_attention" : "sliding_attention") != 0)
            return llmk_fail(LLMK_UNSUPPORTED_FEATURE, "config.json: layer_types[%lld] is not the alternation of "
                             "sliding and full layers (sliding first) that gpt-oss files have", (long long)i);
    if (kinds && i != hp->n_layer)
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "config.json: %lld layer_types for %lld layers", (long long)i,
                         (long long)hp->n_layer);
    double alpha = 1.702, limit = 7.0;
    if ((st = jreal(cfg, "swiglu_alpha", &alpha)) != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    if ((st = jreal(cfg, "swiglu_limit", &limit)) != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    if (fabs(alpha - 1.702) > 1e-6 || limit != 7.0)
        return llmk_fail(LLMK_UNSUPPORTED_FEATURE, "config.json: swiglu_alpha %g / swiglu_limit %g are not gpt-oss's "
                         "1.702 / 7 (the GGUF has no key for them)", alpha, limit);
    llmk_error_clear();
    if ((st = put_u32(w, a, "expert_count", hp->n_expert)) != LLMK_OK ||
        (st = put_u32(w, a, "expert_used_count", used)) != LLMK_OK ||
        (st = put_u32(w, a, "expert_feed_forward_length", hp->n_ff)) != LLMK_OK ||
        (st = put_u32(w, a, "attention.sliding_window", window)) != LLMK_OK)
        return st;
    return config_rope(cfg, a, ROPE_YARN, w);
}

static int config_hparams(const cJSON *cfg, struct hf_hp *hp, llmk_gguf_writer *w) {
    int st;
    if ((st = config_arch(cfg, hp)) != LLMK_OK || (st = config_refusals(cfg, hp->arch)) != LLMK_OK) return st;
    static const char *const need[] = {"num_hidden_layers", "hidden_size", "intermediate_size",
                                       "num_attention_heads", "max_position_embeddings"};
    int64_t *dst[] = {&hp->n_layer, &hp->n_embd, &hp->n_ff, &hp->n_head, &hp->n_ctx};
    for (size_t i = 0; i < LLMK_ARRAY_LEN(need); i++) {
        st = jint(cfg, need[i], 1, 1 << 30, dst[i]);
        if (st == LLMK_NOT_FOUND)
            return llmk_fail(LLMK_BAD_HYPERPARAMETER, "config.json: %s is missing", need[i]);
        if (st != LLMK_OK) return st;
    }
    hp->n_head_kv = hp->n_head;
    if ((st = jint(cfg, "num_key_value_heads", 1, 1 << 20, &hp->n_head_kv)) != LLMK_OK && st != LLMK_NOT_FOUND)
        return st;
    /* Gemma3TextConfig's and GptOssConfig's defaults */
    hp->head_dim = hp->arch == HF_GEMMA3 ? 256 : hp->arch == HF_GPTOSS ? 64 : hp->n_embd / hp->n_head;
    bool explicit_hd = (st = jint(cfg, "head_dim", 1, 1 << 16, &hp->head_dim)) == LLMK_OK;
    if (st != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    hp->n_vocab = 0;
    if ((st = jint(cfg, "vocab_size", 1, 1 << 24, &hp->n_vocab)) != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    double eps = 1e-6;
    if ((st = jreal(cfg, "rms_norm_eps", &eps)) != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    const cJSON *tie = jget(cfg, "tie_word_embeddings");
    /* llama and qwen default to untied, Gemma3TextConfig to tied */
    hp->tied = hp->arch == HF_GEMMA3 ? !cJSON_IsFalse(tie) : cJSON_IsTrue(tie);
    llmk_error_clear();

    const char *a = hp->arch_name;
    if ((st = llmk_gguf_writer_set_str(w, "general.architecture", a)) != LLMK_OK ||
        (st = put_u32(w, a, "block_count", hp->n_layer)) != LLMK_OK ||
        (st = put_u32(w, a, "context_length", hp->n_ctx)) != LLMK_OK ||
        (st = put_u32(w, a, "embedding_length", hp->n_embd)) != LLMK_OK ||
        (st = put_u32(w, a, "feed_forward_length", hp->n_ff)) != LLMK_OK ||
        (st = put_u32(w, a, "attention.head_count", hp->n_head)) != LLMK_OK ||
        (st = put_u32(w, a, "attention.head_count_kv", hp->n_head_kv)) != LLMK_OK ||
        (st = put_f32(w, a, "attention.layer_norm_rms_epsilon", eps)) != LLMK_OK)
        return st;
    /* the gemma3 and gpt-oss conversions have no rope.dimension_count, and always the key/value length */
    bool own_hd = hp->arch == HF_GEMMA3 || hp->arch == HF_GPTOSS;
    if (!own_hd && (st = put_u32(w, a, "rope.dimension_count", hp->head_dim)) != LLMK_OK) return st;
    if ((explicit_hd || own_hd) &&
        ((st = put_u32(w, a, "attention.key_length", hp->head_dim)) != LLMK_OK ||
         (st = put_u32(w, a, "attention.value_length", hp->head_dim)) != LLMK_OK))
        return st;
    if (hp->arch == HF_QWEN3MOE && (st = config_moe(cfg, hp, w)) != LLMK_OK) return st;
    if (hp->arch == HF_GPTOSS) return config_gptoss(cfg, hp, w);
    return hp->arch == HF_GEMMA3 ? config_gemma3(cfg, hp, w) : config_rope(cfg, a, ROPE_LLAMA3, w);
}

/* ---- tokenizer.json ------------------------------------------------------------ */

/* GGUF token types (llama.cpp's numbering, a fact of the format). */
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

/* The split patterns of the families' tokenizer.json files, as JSON decodes
 * them (facts of those files); each maps to the tokenizer.ggml.pre name
 * llama.cpp's converter gives the family. */
static const char PAT_QWEN2[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
                                " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char PAT_LLAMA3[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
                                 " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* o200k's (gpt-oss's tokenizer.json) */
static const char PAT_GPT4O[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static bool is_type(const cJSON *o, const char *type) {
    const cJSON *t = jget(o, "type");
    return cJSON_IsObject(o) && cJSON_IsString(t) && !strcmp(t->valuestring, type);
}

/* ByteLevel with add_prefix_space false and use_regex as given (absent: true). */
static bool byte_level(const cJSON *o, bool use_regex) {
    const cJSON *re = jget(o, "use_regex");
    bool r = re ? cJSON_IsTrue(re) : true;
    return is_type(o, "ByteLevel") && !jtrue(o, "add_prefix_space") && r == use_regex;
}

static const char *split_pre(const cJSON *split) {
    const cJSON *pat = jget(split, "pattern");
    const cJSON *re = cJSON_IsObject(pat) ? jget(pat, "Regex") : NULL;
    const cJSON *beh = jget(split, "behavior");
    if (!is_type(split, "Split") || !cJSON_IsString(re) || jtrue(split, "invert") || !cJSON_IsString(beh) ||
        strcmp(beh->valuestring, "Isolated") != 0)
        return NULL;
    if (!strcmp(re->valuestring, PAT_QWEN2)) return "qwen2";
    if (!strcmp(re->valuestring, PAT_LLAMA3)) return "llama-bpe";
    if (!strcmp(re->valuestring, PAT_GPT4O)) return "gpt-4o";
    return NULL;
}

/* The pre-tokenizer as the name llmk's tokenizer knows, or NULL. */
static const char *pre_name(const cJSON *pre) {
    if (byte_level(pre, true)) return "gpt2";
    const cJSON *list = is_type(pre, "Sequence") ? jget(pre, "pretokenizers") : NULL;
    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) != 2) return NULL;
    const cJSON *a = list->child, *b = a->next;
    if (is_type(a, "Digits") && jtrue(a, "individual_digits") && byte_level(b, true)) return "smollm";
    if (byte_level(b, false)) return split_pre(a);
    return NULL;
}

struct hf_vocab {
    int64_t n;
    const char **text; /* into the JSON, or into pads / user_texts */
    uint8_t *type;
    float *score;      /* SentencePiece-style only */
    char *pads;        /* "[PADi]" texts of unused ids */
    char **user_texts; /* SentencePiece-style: user-defined tokens' texts with U+2581 as a space */
    size_t n_user_texts;
    const char **merges;
    char *merge_arena;
    size_t n_merges;
};

static void vocab_free(struct hf_vocab *v) {
    free(v->text);
    free(v->type);
    free(v->score);
    free(v->pads);
    for (size_t i = 0; i < v->n_user_texts; i++) free(v->user_texts[i]);
    free(v->user_texts);
    free(v->merges);
    free(v->merge_arena);
}

/* The added-token texts the converter types CONTROL even when not marked
 * special (its list: deepseek-coder's, gemma's). */
static bool looks_special(const char *s) {
    size_t n = strlen(s);
    return !strcmp(s, "<pad>") || !strcmp(s, "<mask>") || !strcmp(s, "<2mass>") || !strcmp(s, "[@BOS@]") ||
           (n >= 4 && !strncmp(s, "<|", 2) && !strcmp(s + n - 2, "|>")) ||
           (n >= 8 && !strncmp(s, "<\xef\xbd\x9c", 4) && !strcmp(s + n - 4, "\xef\xbd\x9c>")) ||
           (n >= 8 && !strncmp(s, "<unused", 7) && s[n - 1] == '>');
}

static int vocab_ids(const cJSON *tj, int64_t n_cfg, struct hf_vocab *v) {
    const cJSON *model = jget(tj, "model");
    const cJSON *vocab = jget(model, "vocab"), *added = jget(tj, "added_tokens");
    int64_t max_id = -1;
    for (const cJSON *e = cJSON_IsObject(vocab) ? vocab->child : NULL; e; e = e->next) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= (1 << 24) || floor(e->valuedouble) != e->valuedouble)
            return llmk_fail(LLMK_TOKENIZER_BAD_DATA, "tokenizer.json: token %.60s has no id in [0, 2^24)", e->string);
        if (e->valuedouble > max_id) max_id = (int64_t)e->valuedouble;
    }
    for (const cJSON *e = cJSON_IsArray(added) ? added->child : NULL; e; e = e->next) {
        const cJSON *id = jget(e, "id");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= (1 << 24) ||
            floor(id->valuedouble) != id->valuedouble || !cJSON_IsString(jget(e, "content")))
            return llmk_fail(LLMK_TOKENIZER_BAD_DATA, "tokenizer.json: an added token lacks an id in [0, 2^24) or content");
        if (id->valuedouble > max_id) max_id = (int64_t)id->valuedouble;
    }
    if (max_id < 0) return llmk_fail(LLMK_TOKENIZER_BAD_DATA, "tokenizer.json: the vocabulary is empty");
    if (n_cfg && max_id >= n_cfg)
        return llmk_fail(LLMK_TOKENIZER_BAD_DATA, "tokenizer.json: token id %lld, but config.json's vocab_size is %lld",
                         (long long)max_id, (long long)n_cfg);
    v->n = n_cfg ? n_cfg : max_id + 1;
    v->text = calloc((size_t)v->n, sizeof *v->text);
    v->type = calloc((size_t)v->n, 1);
    if (!v->text || !v->type) return llmk_fail(LLMK_OUT_OF_MEMORY, "tokenizer: %lld tokens", (long long)v->n);
    for (const cJSON *e = cJSON_IsObject(vocab) ? vocab->child : NULL; e; e = e->next) {
        int64_t id = (int64_t)e->valuedouble;
        if (v->text[id])
            return llmk_fail(LLMK_TOKENIZER_BAD_DATA, "tokenizer.json: tokens %.60s and %.60s share id %lld", v->text[id],
                             e->string, (long long)id);
        v->text[id] = e->string;
        v->type[id] = TT_NORMAL;
    }
    for (const cJSON *e = cJSON_IsArray(added) ? added->child : NULL; e; e = e->next) {
        int64_t id = (int64_t)jget(e, "id")->valuedouble;
        const char *c = jget(e, "content")->valuestring;
        if (v->text[id] && strcmp(v->text[id], c) != 0)
            return llmk_fail(LLMK_TOKENIZER_BAD_DATA, "tokenizer.json: added token %.60s has id %lld of token %.60s", c,
                             (long long)id, v->text[id]);
        v->text[id] = c;
        v->type[id] = jtrue(e, "special") || looks_special(c) ? TT_CONTROL : TT_USER;
    }
    int64_t missing = 0;
    for (int64_t i = 0; i < v->n; i++) missing += !v->text[i];
    v->pads = malloc(missing ? (size_t)missing * 16 : 1);
    if (!v->pads) return llmk_fail(LLMK_OUT_OF_MEMORY, "tokenizer: %lld placeholder tokens", (long long)missing);
    char *p = v->pads;
    for (int64_t i = 0; i < v->n; i++)
        if (!v->text[i]) { /* as the converter: a placeholder, never produced by encoding */
            p += 16;
            snprintf(p - 16, 16, "[PAD%d]", (int)(i & 0xffffff)); /* i < 2^24 */
            v->text[i] = p - 16;
            v->type[i] = TT_UNUSED;
        }
    return LLMK_OK;
}

/* Merges as "left right" strings; the pair-list form is joined with a space
 * (a space inside a part becomes U+0120 as gguf-py writes it). */
static int vocab_merges(const cJSON *model, struct hf_vocab *v) {
    const cJSON *m = jget(model, "merges");
    if (!cJSON_IsArray(m)) return llmk_fail(LLMK_TOKENIZER_BAD_DATA, "tokenizer.json: model.merges is not a list");
    size_t n = 0, bytes = 0;
    for (const cJSON *e = m->child; e; e = e->next, n++) {
        if (cJSON_IsString(e)) continue;
        const cJSON *a = cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 ? e->child : NULL;
        if (!a || !cJSON_IsString(a) || !cJSON_IsString(a->next))
            return llmk_fail(LLMK_TOKENIZER_BAD_DATA, "tokenizer.json: merge %zu is neither \"a b\" nor [\"a\", \"b\"]", n);
        bytes += 2 * (strlen(a->valuestring) + strlen(a->next->valuestring)) + 2;
    }
    v->merges = malloc((n ? n : 1) * sizeof *v->merges);
    v->merge_arena = malloc(bytes ? bytes : 1);
    if (!v->merges || !v->merge_arena) return llmk_fail(LLMK_OUT_OF_MEMORY, "tokenizer: %zu merges", n);
    char *p = v->merge_arena;
    for (const cJSON *e = m->child; e; e = e->next) {
        if (cJSON_IsString(e)) {
            v->merges[v->n_merges++] = e->valuestring;
            continue;
        }
        v->merges[v->n_merges++] = p;
        for (int k = 0; k < 2; k++) {
            for (const char *s = (k ? e->child->next : e->child)->valuestring; *s; s++)
                if (*s == ' ') *p++ = (char)0xc4, *p++ = (char)0xa0;
                else *p++ = *s;
            *p++ = k ? '\0' : ' ';
        }
    }
    return LLMK_OK;
}

/* "<0xHH>": a SentencePiece byte piece. */
static bool byte_piece(const char *s) {
    static const char hex[] = "0123456789ABCDEF";
    return strlen(s) == 6 && !strncmp(s, "<0x", 3) && s[5] == '>' && s[3] && strchr(hex, s[3]) && s[4] &&
           strchr(hex, s[4]);
}

/* U+2581 (the SentencePiece space) as ' ', in a copy the vocabulary owns. */
static int user_text(struct hf_vocab *v, const char *s, const char **out) {
    char **u = realloc(v->user_texts, (v->n_user_texts + 1) * sizeof *u);
    if (!u) return llmk_fail(LLMK_OUT_OF_MEMORY, "tokenizer: user-defined tokens");
    v->user_texts = u;
    char *d = malloc(strlen(s) + 1), *p = d;
    if (!d) return llmk_fail(LLMK_OUT_OF_MEMORY, "tokenizer: user-defined tokens");
    while (*s)
        if (!strncmp(s, "\xe2\x96\x81", 3)) *p++ = ' ', s += 3;
        else *p++ = *s++;
    *p = 0;
    v->user_texts[v->n_user_texts++] = d;
    *out = d;
    return LLMK_OK;
}

/* The SentencePiece view of a byte_fallback BPE, as the converter builds it
 * from tokenizer.model: byte pieces BYTE, the unk piece UNKNOWN, the other
 * pieces NORMAL with the scores SentencePiece's BPE trainer gives them (0,
 * -1, -2, ... in id order: a piece's score is minus its merge rank, which is
 * what orders merges in llmk's SentencePiece tokenizer); added tokens as
 * tokenizer.json types them, then tokenizer_config.json's
 * added_tokens_decoder, which the converter reads: special (or special-
 * looking) CONTROL, else USER_DEFINED with U+2581 read as a space, score
 * -1000; padding ids UNUSED, score -10000. */
static int vocab_spm(const cJSON *tj, const cJSON *tc, struct hf_vocab *v) {
    v->score = calloc((size_t)v->n, sizeof *v->score);
    uint8_t *added = calloc((size_t)v->n, 1);
    if (!v->score || !added) {
        free(added);
        return llmk_fail(LLMK_OUT_OF_MEMORY, "tokenizer: %lld scores", (long long)v->n);
    }
    const cJSON *list = jget(tj, "added_tokens");
    for (const cJSON *e = cJSON_IsArray(list) ? list->child : NULL; e; e = e->next)
        added[(int64_t)jget(e, "id")->valuedouble] = 1; /* vocab_ids checked the ids */
    const cJSON *unk = jget(jget(tj, "model"), "unk_token");
    int64_t rank = 0;
    for (int64_t i = 0; i < v->n; i++) {
        if (v->type[i] == TT_UNUSED) v->score[i] = -10000.0f;
        else if (added[i]) continue;
        else if (byte_piece(v->text[i])) v->type[i] = TT_BYTE;
        else if (cJSON_IsString(unk) && !strcmp(v->text[i], unk->valuestring)) v->type[i] = TT_UNKNOWN;
        else v->score[i] = -(float)rank++;
    }
    free(added);
    const cJSON *dec = jget(tc, "added_tokens_decoder");
    for (const cJSON *e = cJSON_IsObject(dec) ? dec->child : NULL; e; e = e->next) {
        const cJSON *c = jget(e, "content");
        char *end = NULL;
        errno = 0;
        long long id = strtoll(e->string, &end, 10);
        if (!cJSON_IsString(c) || !*e->string || *end || errno || id < 0)
            return llmk_fail(LLMK_TOKENIZER_BAD_DATA,
                             "tokenizer_config.json: added_tokens_decoder entry '%.40s' is not an id with a content",
                             e->string);
        if (id >= v->n) continue; /* the converter skips these */
        bool control = jtrue(e, "special") || looks_special(c->valuestring);
        v->type[id] = control ? TT_CONTROL : TT_USER;
        v->score[id] = -1000.0f;
        v->text[id] = c->valuestring;
        if (!control) {
            int st = user_text(v, c->valuestring, &v->text[id]);
            if (st != LLMK_OK) return st;
        }
    }
    return LLMK_OK;
}

/* The id of the added token whose content is tokenizer_config's <typ>_token. */
static int64_t special_from_config(const cJSON *tj, const cJSON *tc, const char *typ) {
    char key[32];
    snprintf(key, sizeof key, "%s_token", typ);
    const cJSON *e = jget(tc, key);
    if (cJSON_IsObject(e)) e = jget(e, "content");
    if (!cJSON_IsString(e)) return -1;
    const cJSON *added = jget(tj, "added_tokens");
    for (const cJSON *a = cJSON_IsArray(added) ? added->child : NULL; a; a = a->next)
        if (!strcmp(jget(a, "content")->valuestring, e->valuestring)) return (int64_t)jget(a, "id")->valuedouble;
    return -1;
}

static int64_t special_id_field(const cJSON *o, const char *typ, bool list_ok) {
    char key[32];
    snprintf(key, sizeof key, "%s_token_id", typ);
    const cJSON *e = jget(o, key);
    if (list_ok && cJSON_IsArray(e)) e = e->child;
    if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= (1 << 24) || floor(e->valuedouble) != e->valuedouble)
        return -1;
    return (int64_t)e->valuedouble;
}

/* bos/eos/unk/pad: tokenizer_config.json's token texts first, then
 * config.json's ids (the converter's order), then generation_config.json. */
static int tok_specials(const cJSON *tj, const cJSON *tc, const cJSON *cfg, const cJSON *gen, int64_t n,
                        llmk_gguf_writer *w) {
    static const char *const typs[] = {"bos", "eos", "unk", "pad", "mask"};
    for (size_t i = 0; i < LLMK_ARRAY_LEN(typs); i++) {
        int64_t id = special_from_config(tj, tc, typs[i]);
        if (id < 0) id = special_id_field(cfg, typs[i], false);
        if (id < 0) id = special_id_field(gen, typs[i], true);
        if (id < 0 || id >= n) continue;
        char key[64];
        /* GGUF's key names: padding_token_id, unknown_token_id */
        snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id",
                 !strcmp(typs[i], "pad") ? "padding" : !strcmp(typs[i], "unk") ? "unknown" : typs[i]);
        int st = llmk_gguf_writer_set_u32(w, key, (uint32_t)id);
        if (st != LLMK_OK) return st;
    }
    return LLMK_OK;
}

/* add_bos_token: a post-processor that is (or holds) ByteLevel says no; a
 * TemplateProcessing whose single template starts with the BOS says yes;
 * otherwise tokenizer_config.json's add_bos_token, if it has one. */
static int tok_add_bos(const cJSON *tj, const cJSON *tc, llmk_gguf_writer *w) {
    const cJSON *pp = jget(tj, "post_processor");
    const cJSON *list = jget(pp, "processors");
    int add = -1;
    const cJSON *first = cJSON_IsArray(list) ? list->child : pp;
    for (const cJSON *p = first; p; p = cJSON_IsArray(list) ? p->next : NULL) {
        if (is_type(p, "ByteLevel") && add < 0) add = 0;
        const cJSON *single = is_type(p, "TemplateProcessing") ? jget(p, "single") : NULL;
        if (cJSON_IsArray(single) && cJSON_GetArraySize(single) > 1) {
            const cJSON *sp = jget(single->child, "SpecialToken");
            const cJSON *id = jget(sp, "id");
            const cJSON *bos = jget(tc, "bos_token");
            if (cJSON_IsObject(bos)) bos = jget(bos, "content");
            if (cJSON_IsString(id)) add = cJSON_IsString(bos) && !strcmp(bos->valuestring, id->valuestring);
        }
    }
    const cJSON *cfg_add = jget(tc, "add_bos_token");
    if (add < 0 && cJSON_IsBool(cfg_add)) add = cJSON_IsTrue(cfg_add);
    return add < 0 ? LLMK_OK : llmk_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", add == 1);
}

/* tokenizer_config.json's chat_template (a string, or a list of named
 * templates: "default" and the others under their names), else the
 * folder's chat_template.jinja. */
static int tok_chat_template(const char *dir, const cJSON *tc, llmk_gguf_writer *w) {
    const cJSON *ct = jget(tc, "chat_template");
    if (cJSON_IsString(ct)) return llmk_gguf_writer_set_str(w, "tokenizer.chat_template", ct->valuestring);
    if (cJSON_IsArray(ct)) {
        for (const cJSON *e = ct->child; e; e = e->next) {
            const cJSON *name = jget(e, "name"), *tmpl = jget(e, "template");
            if (!cJSON_IsString(name) || !cJSON_IsString(tmpl) || strlen(name->valuestring) > 64) continue;
            char key[96];
            if (!strcmp(name->valuestring, "default")) snprintf(key, sizeof key, "tokenizer.chat_template");
            else snprintf(key, sizeof key, "tokenizer.chat_template.%s", name->valuestring);
            int st = llmk_gguf_writer_set_str(w, key, tmpl->valuestring);
            if (st != LLMK_OK) return st;
        }
        return LLMK_OK;
    }
    char *text;
    size_t len;
    int st = read_text(dir, "chat_template.jinja", &text, &len);
    if (st == LLMK_NOT_FOUND) {
        llmk_error_clear();
        return LLMK_OK;
    }
    if (st != LLMK_OK) return st;
    st = llmk_gguf_writer_set_str(w, "tokenizer.chat_template", text);
    free(text);
    return st;
}

static bool string_pattern(const cJSON *o, const char *s) {
    const cJSON *p = jget(jget(o, "pattern"), "String");
    return cJSON_IsString(p) && !strcmp(p->valuestring, s);
}

/* Gemma's SentencePiece-style tokenizer.json: a byte_fallback BPE with
 * spaces replaced by U+2581 and no prefix space added (so no pre-tokenizer
 * split is left to do: the Split on " " that follows finds none). */
static int tok_check_spm(const cJSON *tj) {
    const cJSON *model = jget(tj, "model"), *norm = jget(tj, "normalizer"), *pre = jget(tj, "pre_tokenizer");
    const cJSON *beh = jget(pre, "behavior");
    if ((jget(model, "continuing_subword_prefix") && !cJSON_IsNull(jget(model, "continuing_subword_prefix"))) ||
        (jget(model, "end_of_word_suffix") && !cJSON_IsNull(jget(model, "end_of_word_suffix"))))
        return llmk_fail(LLMK_TOKENIZER_UNSUPPORTED,
                         "tokenizer.json: a subword prefix or suffix is not supported in a SentencePiece-style BPE");
    const cJSON *rc = jget(norm, "content");
    if (!is_type(norm, "Replace") || !string_pattern(norm, " ") || !cJSON_IsString(rc) ||
        strcmp(rc->valuestring, "\xe2\x96\x81") != 0)
        return llmk_fail(LLMK_TOKENIZER_UNSUPPORTED,
                         "tokenizer.json: a SentencePiece-style BPE needs Gemma's normalizer (spaces replaced by "
                         "U+2581, no prefix space)");
    if (pre && !cJSON_IsNull(pre) &&
        !(is_type(pre, "Split") && string_pattern(pre, " ") && !jtrue(pre, "invert") && cJSON_IsString(beh) &&
          !strcmp(beh->valuestring, "MergedWithPrevious")))
        return llmk_fail(LLMK_TOKENIZER_UNSUPPORTED,
                         "tokenizer.json: a SentencePiece-style BPE with this pre-tokenizer is not supported (none, "
                         "or Gemma's Split on spaces)");
    return LLMK_OK;
}

static int tok_check(const cJSON *tj, enum hf_arch arch, const char **pre, bool *spm) {
    const cJSON *model = jget(tj, "model");
    *spm = false;
    if (!is_type(model, "BPE"))
        return llmk_fail(LLMK_TOKENIZER_UNSUPPORTED, "tokenizer.json: model type %.40s is not supported (BPE)",
                         cJSON_IsString(jget(model, "type")) ? jget(model, "type")->valuestring : "(none)");
    /* The converter reads gemma3's tokenizer.model (SentencePiece, no prefix
     * space); llama's would need the prefix space its tokenizer.json states
     * another way, and is not done. */
    if (jtrue(model, "byte_fallback") && arch == HF_GEMMA3) {
        *spm = true;
        *pre = "default";
        return tok_check_spm(tj);
    }
    if (jtrue(model, "byte_fallback"))
        return llmk_fail(LLMK_TOKENIZER_UNSUPPORTED,
                         "tokenizer.json: a SentencePiece-style BPE (byte_fallback) is not supported from a folder "
                         "of this architecture (byte-level BPE is; SentencePiece-style for gemma3)");
    const cJSON *norm = jget(tj, "normalizer");
    /* NFC is what Qwen2's file names; the GGUF conversion drops it too. */
    if (norm && !cJSON_IsNull(norm) && !is_type(norm, "NFC"))
        return llmk_fail(LLMK_TOKENIZER_UNSUPPORTED, "tokenizer.json: normalizer %.40s is not supported (none, NFC)",
                         cJSON_IsString(jget(norm, "type")) ? jget(norm, "type")->valuestring : "(no type)");
    *pre = pre_name(jget(tj, "pre_tokenizer"));
    if (!*pre)
        return llmk_fail(LLMK_TOKENIZER_UNSUPPORTED,
                         "tokenizer.json: the pre-tokenizer is not one llmk maps (ByteLevel; Digits + ByteLevel; "
                         "the Qwen2, Llama 3 or o200k Split + ByteLevel)");
    return LLMK_OK;
}

/* tokenizer.json (+ tokenizer_config.json, generation_config.json) into
 * tokenizer.ggml.* metadata. No tokenizer.json: no tokenizer keys (the
 * model still runs on ids). */
static int tokenizer_meta(const char *dir, const cJSON *cfg, struct hf_hp *hp, llmk_gguf_writer *w) {
    cJSON *tj = NULL, *tc = NULL, *gen = NULL;
    struct hf_vocab v = {0};
    const char *pre = NULL;
    bool spm = false;
    int st = read_json(dir, "tokenizer.json", false, &tj);
    if (st != LLMK_OK || !tj) return st;
    if ((st = read_json(dir, "tokenizer_config.json", false, &tc)) == LLMK_OK &&
        (st = read_json(dir, "generation_config.json", false, &gen)) == LLMK_OK &&
        (st = tok_check(tj, hp->arch, &pre, &spm)) == LLMK_OK && (st = vocab_ids(tj, hp->n_vocab, &v)) == LLMK_OK &&
        (st = spm ? vocab_spm(tj, tc, &v) : vocab_merges(jget(tj, "model"), &v)) == LLMK_OK) {
        hp->n_tok = v.n;
        uint8_t *tt = malloc((size_t)v.n * 4);
        if (!tt) st = llmk_fail(LLMK_OUT_OF_MEMORY, "tokenizer: token types");
        for (int64_t i = 0; tt && i < v.n; i++) tt[4 * i] = v.type[i], tt[4 * i + 1] = tt[4 * i + 2] = tt[4 * i + 3] = 0;
        if (st == LLMK_OK) st = llmk_gguf_writer_set_str(w, "tokenizer.ggml.model", spm ? "llama" : "gpt2");
        if (st == LLMK_OK) st = llmk_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
        if (st == LLMK_OK) st = llmk_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", v.text, (uint64_t)v.n);
        if (st == LLMK_OK && spm)
            st = llmk_gguf_writer_set_arr(w, "tokenizer.ggml.scores", LLMK_GGUF_FLOAT32, v.score, (uint64_t)v.n);
        if (st == LLMK_OK) st = llmk_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", LLMK_GGUF_INT32, tt, (uint64_t)v.n);
        if (st == LLMK_OK && !spm)
            st = llmk_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", v.merges, v.n_merges);
        free(tt);
        if (st == LLMK_OK) st = tok_specials(tj, tc, cfg, gen, v.n, w);
        if (st == LLMK_OK) st = tok_add_bos(tj, tc, w);
        const cJSON *add_eos = jget(tc, "add_eos_token");
        if (st == LLMK_OK && spm && cJSON_IsBool(add_eos))
            st = llmk_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", cJSON_IsTrue(add_eos));
        if (st == LLMK_OK && spm) st = llmk_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", false);
        if (st == LLMK_OK) st = tok_chat_template(dir, tc, w);
    }
    vocab_free(&v);
    cJSON_Delete(tj);
    cJSON_Delete(tc);
    cJSON_Delete(gen);
    return st;
}

/* ---- tensors ------------------------------------------------------------------- */

/* gpt-oss's experts: gate and up in one tensor, their rows interleaved
 * (gate even, up odd), as [n_in, 2 n_out] matrices per expert (the
 * transpose of a Linear's), or MXFP4 blocks and scales of [2 n_out, n_in]
 * rows; down as [n_in, n_out] or blocks and scales. The converter splits,
 * transposes and repacks them into GGUF's stacks; so does
 * gptoss_layer. */
enum { OSS_GU, OSS_GU_BIAS, OSS_GU_BLOCKS, OSS_GU_SCALES, OSS_DOWN, OSS_DOWN_BIAS, OSS_DOWN_BLOCKS, OSS_DOWN_SCALES,
       OSS_PARTS };
static const char *const oss_parts[OSS_PARTS] = {"gate_up_proj", "gate_up_proj_bias", "gate_up_proj_blocks",
                                                 "gate_up_proj_scales", "down_proj", "down_proj_bias",
                                                 "down_proj_blocks", "down_proj_scales"};

/* gpt-oss's own names under model.layers.N. (p): 1 mapped, 3 expert part
 * *part of layer out ("blk.N"), 0 not one of them. */
static int gptoss_name(const char *p, long il, char *out, size_t cap, int64_t *part) {
    static const char *const names[][2] = {{"post_attention_layernorm.weight", "post_attention_norm.weight"},
                                           {"self_attn.o_proj.bias", "attn_output.bias"},
                                           {"self_attn.sinks", "attn_sinks.weight"},
                                           {"mlp.router.weight", "ffn_gate_inp.weight"},
                                           {"mlp.router.bias", "ffn_gate_inp.bias"}};
    for (size_t i = 0; i < LLMK_ARRAY_LEN(names); i++)
        if (!strcmp(p, names[i][0])) return snprintf(out, cap, "blk.%ld.%s", il, names[i][1]), 1;
    for (int i = 0; !strncmp(p, "mlp.experts.", 12) && i < OSS_PARTS; i++)
        if (!strcmp(p + 12, oss_parts[i])) return *part = i, snprintf(out, cap, "blk.%ld", il), 3;
    return 0;
}

/* llama.cpp's name for an HF tensor: 1 mapped, 0 skipped on purpose, -1 no
 * counterpart (refused by the caller), 2 expert *expert's part of the
 * stack named out (qwen3moe's mlp.experts.E.*_proj: one 3-D tensor per
 * layer and projection in GGUF). */
static int gguf_name(const char *hf, const struct hf_hp *hp, char *out, size_t cap, int64_t *expert) {
    static const char *const per_layer[][2] = {
        {"input_layernorm.weight", "attn_norm.weight"},    {"self_attn.q_proj.weight", "attn_q.weight"},
        {"self_attn.k_proj.weight", "attn_k.weight"},      {"self_attn.v_proj.weight", "attn_v.weight"},
        {"self_attn.q_proj.bias", "attn_q.bias"},          {"self_attn.k_proj.bias", "attn_k.bias"},
        {"self_attn.v_proj.bias", "attn_v.bias"},          {"self_attn.o_proj.weight", "attn_output.weight"},
        {"self_attn.q_norm.weight", "attn_q_norm.weight"}, {"self_attn.k_norm.weight", "attn_k_norm.weight"},
        {"post_attention_layernorm.weight", "ffn_norm.weight"}, {"mlp.gate_proj.weight", "ffn_gate.weight"},
        {"mlp.up_proj.weight", "ffn_up.weight"},           {"mlp.down_proj.weight", "ffn_down.weight"}};
    if (!strcmp(hf, "model.embed_tokens.weight")) return snprintf(out, cap, "token_embd.weight"), 1;
    if (!strcmp(hf, "model.norm.weight")) return snprintf(out, cap, "output_norm.weight"), 1;
    if (!strcmp(hf, "lm_head.weight")) return hp->tied ? 0 : (snprintf(out, cap, "output.weight"), 1);
    const char *p = hf;
    if (strncmp(p, "model.layers.", 13) != 0) return -1;
    p += 13;
    long il = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 7) il = il * 10 + (*p++ - '0'), digits++;
    if (!digits || *p++ != '.' || il >= hp->n_layer) return -1;
    if (!strcmp(p, "self_attn.rotary_emb.inv_freq")) return 0; /* old checkpoints: recomputed from config */
    /* gemma3's four norms around each block (its post_attention_layernorm
     * is a post-norm, not llama's pre-FFN norm) */
    static const char *const gemma3_norms[][2] = {{"post_attention_layernorm.weight", "post_attention_norm.weight"},
                                                  {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
                                                  {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"}};
    for (size_t i = 0; hp->arch == HF_GEMMA3 && i < LLMK_ARRAY_LEN(gemma3_norms); i++)
        if (!strcmp(p, gemma3_norms[i][0])) return snprintf(out, cap, "blk.%ld.%s", il, gemma3_norms[i][1]), 1;
    if (hp->arch == HF_GPTOSS) {
        int m = gptoss_name(p, il, out, cap, expert);
        if (m) return m;
    }
    if (hp->arch == HF_QWEN3MOE && !strcmp(p, "mlp.gate.weight"))
        return snprintf(out, cap, "blk.%ld.ffn_gate_inp.weight", il), 1;
    if (hp->arch == HF_QWEN3MOE && !strncmp(p, "mlp.experts.", 12)) {
        static const char *const proj[][2] = {{"gate_proj.weight", "ffn_gate_exps.weight"},
                                              {"up_proj.weight", "ffn_up_exps.weight"},
                                              {"down_proj.weight", "ffn_down_exps.weight"}};
        const char *q = p + 12;
        *expert = 0;
        for (digits = 0; *q >= '0' && *q <= '9' && digits < 7; digits++) *expert = *expert * 10 + (*q++ - '0');
        for (size_t i = 0; digits && *q == '.' && *expert < hp->n_expert && i < LLMK_ARRAY_LEN(proj); i++)
            if (!strcmp(q + 1, proj[i][0])) return snprintf(out, cap, "blk.%ld.%s", il, proj[i][1]), 2;
        return -1;
    }
    for (size_t i = 0; i < LLMK_ARRAY_LEN(per_layer); i++)
        if (!strcmp(p, per_layer[i][0])) return snprintf(out, cap, "blk.%ld.%s", il, per_layer[i][1]), 1;
    return -1;
}

static int own_copy(struct hf_owner *o, void *p) {
    void **c = realloc(o->copies, (o->n_copies + 1) * sizeof *c);
    if (!c) {
        free(p);
        return llmk_fail(LLMK_OUT_OF_MEMORY, "model folder: bookkeeping");
    }
    o->copies = c;
    o->copies[o->n_copies++] = p;
    return LLMK_OK;
}

/* llama attn_q / attn_k (weight or bias) rows into GGUF's interleaved order. */
static int permute_rows(struct hf_owner *o, llmk_tensor_info *t, int64_t heads) {
    uint64_t rows = t->n_dims == 1 ? t->ne[0] : t->ne[1];
    uint64_t rb = t->n_bytes / rows, hd = rows / (uint64_t)heads;
    if (rows % (uint64_t)heads || hd % 2)
        return llmk_fail(LLMK_TENSOR_SHAPE_MISMATCH, "%s: %llu rows do not split into %lld heads of even size", t->name,
                         (unsigned long long)rows, (long long)heads);
    uint8_t *dst = malloc((size_t)t->n_bytes);
    if (!dst) return llmk_fail(LLMK_OUT_OF_MEMORY, "%s: %llu bytes", t->name, (unsigned long long)t->n_bytes);
    const uint8_t *src = t->data;
    for (uint64_t h = 0; h < (uint64_t)heads; h++)
        for (uint64_t i = 0; i < hd / 2; i++)
            for (uint64_t s = 0; s < 2; s++)
                memcpy(dst + (h * hd + 2 * i + s) * rb, src + (h * hd + s * hd / 2 + i) * rb, (size_t)rb);
    t->data = dst;
    return own_copy(o, dst);
}

/* Gemma3RMSNorm scales by 1 + w, and the converter stores 1 + w: an f32
 * copy (norms are 1-D and small), computed as the converter does: bf16
 * widened to f32 first, then + 1 in f32; f16 stays f16 for the sum, so
 * 1 + w rounds to f16 before it is widened. */
static int shift_norm(struct hf_owner *o, llmk_tensor_info *t) {
    if (t->n_dims != 1)
        return llmk_fail(LLMK_TENSOR_SHAPE_MISMATCH, "%s: a norm of %u dimensions (1 expected)", t->name, t->n_dims);
    float *dst = malloc((size_t)t->ne[0] * sizeof *dst);
    if (!dst) return llmk_fail(LLMK_OUT_OF_MEMORY, "%s: %llu floats", t->name, (unsigned long long)t->ne[0]);
    const unsigned char *src = t->data;
    for (uint64_t i = 0; i < t->ne[0]; i++) {
        uint16_t h;
        float f;
        if (t->type == LLMK_TYPE_F32) {
            memcpy(&f, src + 4 * i, 4);
            dst[i] = f + 1.0f;
            continue;
        }
        memcpy(&h, src + 2 * i, 2);
        if (t->type == LLMK_TYPE_BF16) dst[i] = llmk_bf16_to_fp32(h) + 1.0f;
        else dst[i] = llmk_fp16_to_fp32(llmk_fp32_to_fp16(llmk_fp16_to_fp32(h) + 1.0f));
    }
    t->type = LLMK_TYPE_F32;
    t->data = dst;
    t->n_bytes = t->ne[0] * sizeof *dst;
    return own_copy(o, dst);
}

/* An element-misaligned tensor (the format does not align data) gets an
 * aligned copy: kernels may load whole elements. */
static int align_data(struct hf_owner *o, llmk_tensor_info *t) {
    size_t es = t->type == LLMK_TYPE_F32 ? 4 : 2;
    if ((uintptr_t)t->data % es == 0) return LLMK_OK;
    void *p = malloc((size_t)t->n_bytes);
    if (!p) return llmk_fail(LLMK_OUT_OF_MEMORY, "%s: %llu bytes", t->name, (unsigned long long)t->n_bytes);
    memcpy(p, t->data, (size_t)t->n_bytes);
    t->data = p;
    return own_copy(o, p);
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static int tensor_info(const llmk_st_tensor *s, const struct hf_hp *hp, struct hf_owner *o, const char *gname,
                       llmk_tensor_info *t) {
    memset(t, 0, sizeof *t);
    t->name = gname;
    t->type = s->type;
    t->n_dims = s->n_dims;
    for (unsigned d = 0; d < 4; d++) t->ne[d] = d < s->n_dims ? s->shape[s->n_dims - 1 - d] : 1;
    t->n_elements = s->n_elements;
    t->offset = s->begin;
    t->n_bytes = s->end - s->begin;
    t->data = s->data;
    int st = align_data(o, t);
    if (st == LLMK_OK && hp->arch == HF_GEMMA3 && ends_with(s->name, "norm.weight")) st = shift_norm(o, t);
    /* The converter drops embedding rows beyond the tokenizer's vocabulary
     * (which, padded to config's vocab_size, is normally all of them). */
    if (st == LLMK_OK && hp->arch == HF_GEMMA3 && hp->n_tok && !strcmp(gname, "token_embd.weight") &&
        t->n_dims == 2 && t->ne[1] > (uint64_t)hp->n_tok) {
        t->n_bytes = t->n_bytes / t->ne[1] * (uint64_t)hp->n_tok;
        t->ne[1] = (uint64_t)hp->n_tok;
        t->n_elements = t->ne[0] * t->ne[1];
    }
    if (st != LLMK_OK || hp->arch != HF_LLAMA) return st;
    const char *dot = strrchr(gname, '.');
    size_t stem = dot ? (size_t)(dot - gname) : 0;
    bool q = stem >= 7 && !strncmp(dot - 7, ".attn_q", 7), k = stem >= 7 && !strncmp(dot - 7, ".attn_k", 7);
    if (q || k) st = permute_rows(o, t, q ? hp->n_head : hp->n_head_kv);
    return st;
}

static bool plain_name(const char *s) {
    return *s && strcmp(s, ".") && strcmp(s, "..") && !strchr(s, '/') && strlen(s) < 256;
}

static int open_shard(const char *dir, const char *name, struct hf_owner *o) {
    if (!plain_name(name))
        return llmk_fail(LLMK_BAD_REQUEST, "model.safetensors.index.json: file name '%.80s' is not a plain name in "
                         "the folder", name);
    if (o->n_files >= HF_MAX_SHARDS) return llmk_fail(LLMK_COUNT_TOO_LARGE, "more than %d shards", HF_MAX_SHARDS);
    llmk_safetensors **f = realloc(o->files, (o->n_files + 1) * sizeof *f);
    if (!f) return llmk_fail(LLMK_OUT_OF_MEMORY, "model folder: shard list");
    o->files = f;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int st = llmk_safetensors_open(path, &o->files[o->n_files]);
    if (st == LLMK_OK) o->n_files++;
    return st;
}

/* The shards: those model.safetensors.index.json's weight_map names (each
 * tensor checked to be in the file it is listed under), else
 * model.safetensors (absent too: no tensors). */
static int open_shards(const char *dir, struct hf_owner *o) {
    cJSON *ix = NULL;
    int st = read_json(dir, "model.safetensors.index.json", false, &ix);
    if (st != LLMK_OK) return st;
    if (!ix) {
        /* No weights at all is a tokenizer-only folder (llmk tokenize works,
         * the model loader then names token_embd.weight as missing). */
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        if (stat(path, &sb) != 0 && errno == ENOENT) return LLMK_OK;
        return open_shard(dir, "model.safetensors", o);
    }
    const cJSON *wm = jget(ix, "weight_map");
    if (!cJSON_IsObject(wm)) st = llmk_fail(LLMK_BAD_REQUEST, "model.safetensors.index.json: no weight_map object");
    size_t n = 0;
    for (const cJSON *e = wm ? wm->child : NULL; st == LLMK_OK && e; e = e->next, n++)
        if (!cJSON_IsString(e)) st = llmk_fail(LLMK_BAD_REQUEST, "model.safetensors.index.json: %.80s maps to no file name", e->string);
    char **names = calloc(n ? n : 1, sizeof *names);
    if (st == LLMK_OK && !names) st = llmk_fail(LLMK_OUT_OF_MEMORY, "index: %zu names", n);
    size_t nn = 0;
    for (const cJSON *e = wm ? wm->child : NULL; st == LLMK_OK && e; e = e->next) {
        size_t k = 0;
        while (k < nn && strcmp(names[k], e->valuestring)) k++;
        if (k == nn && !(names[nn++] = strdup(e->valuestring))) st = llmk_fail(LLMK_OUT_OF_MEMORY, "index");
        if (k == nn - 1 && st == LLMK_OK && o->n_files < nn) st = open_shard(dir, e->valuestring, o);
        if (st == LLMK_OK && !llmk_safetensors_find(o->files[k], e->string))
            st = llmk_fail(LLMK_MISSING_TENSOR, "model.safetensors.index.json lists %.80s in %.80s, which does not hold it",
                           e->string, e->valuestring);
    }
    if (st == LLMK_OK && nn == 0) st = llmk_fail(LLMK_BAD_REQUEST, "model.safetensors.index.json: weight_map is empty");
    for (size_t k = 0; k < nn; k++) free(names[k]);
    free(names);
    cJSON_Delete(ix);
    return st;
}

/* The experts of one layer's projection, gathered from their tensors. */
struct hf_stack {
    char name[96];
    const llmk_st_tensor **part; /* [n_expert] */
};

static int stack_part(struct hf_stack **stacks, size_t *n, int64_t n_expert, const char *name, int64_t e,
                      const llmk_st_tensor *s) {
    size_t i = 0;
    while (i < *n && strcmp((*stacks)[i].name, name)) i++;
    if (i == *n) {
        struct hf_stack *m = realloc(*stacks, (*n + 1) * sizeof *m);
        if (!m) return llmk_fail(LLMK_OUT_OF_MEMORY, "model folder: expert stacks");
        *stacks = m;
        snprintf(m[i].name, sizeof m[i].name, "%s", name);
        if (!(m[i].part = calloc((size_t)n_expert, sizeof *m[i].part)))
            return llmk_fail(LLMK_OUT_OF_MEMORY, "model folder: expert stacks");
        ++*n;
    }
    if ((*stacks)[i].part[e]) return llmk_fail(LLMK_BAD_REQUEST, "tensor %.100s appears twice", s->name);
    (*stacks)[i].part[e] = s;
    return LLMK_OK;
}

/* One stack as GGUF's 3-D [n_in, n_out, n_expert] tensor: its experts'
 * matrices, all of one type and shape, copied one after another. */
static int stack_tensor(const struct hf_stack *k, int64_t n_expert, struct hf_owner *o, char *gname,
                        llmk_tensor_info *t) {
    const llmk_st_tensor *p0 = k->part[0];
    for (int64_t e = 0; e < n_expert; e++) {
        const llmk_st_tensor *p = k->part[e];
        if (!p) return llmk_fail(LLMK_MISSING_TENSOR, "%s: expert %lld is missing", k->name, (long long)e);
        if (p->n_dims != 2 || p->type != p0->type || memcmp(p->shape, p0->shape, 2 * sizeof p->shape[0]) != 0)
            return llmk_fail(LLMK_TENSOR_SHAPE_MISMATCH, "%s: expert %lld is not a matrix of expert 0's type and shape",
                             k->name, (long long)e);
    }
    uint64_t each = p0->end - p0->begin;
    unsigned char *data = malloc((size_t)(each * (uint64_t)n_expert));
    if (!data) return llmk_fail(LLMK_OUT_OF_MEMORY, "%s: %llu bytes", k->name, (unsigned long long)(each * (uint64_t)n_expert));
    for (int64_t e = 0; e < n_expert; e++) memcpy(data + (uint64_t)e * each, k->part[e]->data, (size_t)each);
    snprintf(gname, 96, "%s", k->name);
    *t = (llmk_tensor_info){.name = gname, .type = p0->type, .n_dims = 3,
                            .ne = {p0->shape[1], p0->shape[0], (uint64_t)n_expert, 1},
                            .n_elements = p0->n_elements * (uint64_t)n_expert, .n_bytes = each * (uint64_t)n_expert,
                            .data = data};
    return own_copy(o, data);
}

/* One expert stack (or bias rows) built into a fresh buffer. */
struct oss_out {
    struct hf_owner *o;
    llmk_tensor_info *t; /* the next free slots */
    char *names;         /* their 96-byte names */
    size_t *n;
};

static int oss_emit(struct oss_out *q, const char *blk, const char *what, uint32_t type, unsigned n_dims,
                    const uint64_t ne[3], unsigned char *data, uint64_t bytes) {
    char *g = q->names + *q->n * 96;
    snprintf(g, 96, "%s.%s", blk, what);
    llmk_tensor_info *t = &q->t[*q->n];
    *t = (llmk_tensor_info){.name = g, .type = type, .n_dims = n_dims, .ne = {ne[0], ne[1], n_dims > 2 ? ne[2] : 1, 1},
                            .n_elements = ne[0] * ne[1] * (n_dims > 2 ? ne[2] : 1), .n_bytes = bytes, .data = data};
    ++*q->n;
    return own_copy(q->o, data);
}

static bool oss_shape(const llmk_st_tensor *s, unsigned n_dims, uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
    const uint64_t want[4] = {a, b, c, d};
    if (!s || s->n_dims != n_dims) return false;
    for (unsigned i = 0; i < n_dims; i++)
        if (s->shape[i] != want[i]) return false;
    return true;
}

/* Rows `row0, row0 + step, ...` (n_out of them) of each expert's [rows,
 * n_in] plain matrix src (transposed: src holds [n_in, rows] per expert)
 * as GGUF's [n_in, n_out, X] stack. */
static unsigned char *oss_gather(const llmk_st_tensor *s, uint64_t X, uint64_t n_in, uint64_t rows, uint64_t n_out,
                                 uint64_t row0, uint64_t step) {
    enum { TILE = 64 }; /* a transpose in 64 x 64 tiles: neither side strides through memory a byte at a time */
    size_t es = s->type == LLMK_TYPE_F32 ? 4 : 2;
    unsigned char *dst = malloc((size_t)(X * n_out * n_in) * es);
    const unsigned char *src = s->data;
    for (uint64_t x = 0; dst && x < X; x++)
        for (uint64_t r0 = 0; r0 < n_out; r0 += TILE)
            for (uint64_t i0 = 0; i0 < n_in; i0 += TILE)
                for (uint64_t r = r0; r < n_out && r < r0 + TILE; r++)
                    for (uint64_t i = i0; i < n_in && i < i0 + TILE; i++)
                        memcpy(dst + ((x * n_out + r) * n_in + i) * es,
                               src + ((x * n_in + i) * rows + row0 + r * step) * es, es);
    return dst;
}

/* The same for MXFP4 blocks [X, rows, n_in / 32, 16] and their E8M0 scales
 * [X, rows, n_in / 32]: GGUF's 17-byte blocks, the scale first, then each
 * element j (of 32) in the low nibble of byte j and j + 16 in the high one
 * where the checkpoint packs elements 2k and 2k + 1 into byte k. */
static unsigned char *oss_gather_mxfp4(const llmk_st_tensor *blocks, const llmk_st_tensor *scales, uint64_t X,
                                       uint64_t nb, uint64_t rows, uint64_t n_out, uint64_t row0, uint64_t step) {
    unsigned char *dst = malloc((size_t)(X * n_out * nb) * 17);
    const unsigned char *bs = blocks->data, *ss = scales->data;
    for (uint64_t x = 0; dst && x < X; x++)
        for (uint64_t r = 0; r < n_out; r++)
            for (uint64_t b = 0; b < nb; b++) {
                uint64_t src = (x * rows + row0 + r * step) * nb + b;
                const unsigned char *q = bs + src * 16;
                unsigned char *o = dst + ((x * n_out + r) * nb + b) * 17, e[32];
                o[0] = ss[src];
                for (int k = 0; k < 16; k++) e[2 * k] = q[k] & 15, e[2 * k + 1] = q[k] >> 4;
                for (int j = 0; j < 16; j++) o[1 + j] = (unsigned char)(e[j] | e[j + 16] << 4);
            }
    return dst;
}

/* Bias rows row0, row0 + step, ... of [X, rows] as GGUF's [n_out, X]. */
static unsigned char *oss_bias(const llmk_st_tensor *s, uint64_t X, uint64_t rows, uint64_t n_out, uint64_t row0,
                               uint64_t step) {
    return oss_gather(s, X, 1, rows, n_out, row0, step); /* a [1, rows] matrix per expert */
}

/* Layer blk's experts from its parts: gate, up and down stacks and biases. */
static int gptoss_layer(const struct hf_hp *hp, const llmk_st_tensor *const *p, const char *blk, struct oss_out *q) {
    uint64_t X = (uint64_t)hp->n_expert, E = (uint64_t)hp->n_embd, F = (uint64_t)hp->n_ff;
    bool any = false;
    for (int i = 0; i < OSS_PARTS; i++) any = any || p[i];
    if (!any) return LLMK_OK; /* none (a tokenizer-only folder): the loader names what is missing */
    bool mx = p[OSS_GU_BLOCKS] || p[OSS_GU_SCALES] || p[OSS_DOWN_BLOCKS] || p[OSS_DOWN_SCALES];
    const char *bad = NULL;
    if (!oss_shape(p[OSS_GU_BIAS], 2, X, 2 * F, 0, 0)) bad = "gate_up_proj_bias";
    else if (!oss_shape(p[OSS_DOWN_BIAS], 2, X, E, 0, 0)) bad = "down_proj_bias";
    else if (mx && (E % 32 || F % 32)) bad = "MXFP4 blocks (widths not whole blocks)";
    else if (mx && !(oss_shape(p[OSS_GU_BLOCKS], 4, X, 2 * F, E / 32, 16) && p[OSS_GU_BLOCKS]->type == LLMK_TYPE_I8 &&
                     oss_shape(p[OSS_GU_SCALES], 3, X, 2 * F, E / 32, 0) && p[OSS_GU_SCALES]->type == LLMK_TYPE_I8))
        bad = "gate_up_proj_blocks / _scales";
    else if (mx && !(oss_shape(p[OSS_DOWN_BLOCKS], 4, X, E, F / 32, 16) && p[OSS_DOWN_BLOCKS]->type == LLMK_TYPE_I8 &&
                     oss_shape(p[OSS_DOWN_SCALES], 3, X, E, F / 32, 0) && p[OSS_DOWN_SCALES]->type == LLMK_TYPE_I8))
        bad = "down_proj_blocks / _scales";
    else if (!mx && !oss_shape(p[OSS_GU], 3, X, E, 2 * F, 0)) bad = "gate_up_proj";
    else if (!mx && !oss_shape(p[OSS_DOWN], 3, X, F, E, 0)) bad = "down_proj";
    else if (mx && (p[OSS_GU] || p[OSS_DOWN])) bad = "gate_up_proj / down_proj beside MXFP4 blocks";
    for (int i = 0; !bad && i < OSS_PARTS; i++)
        if (p[i] && p[i]->type == LLMK_TYPE_I8 && i != OSS_GU_BLOCKS && i != OSS_GU_SCALES && i != OSS_DOWN_BLOCKS &&
            i != OSS_DOWN_SCALES)
            bad = oss_parts[i];
    if (bad)
        return llmk_fail(LLMK_TENSOR_SHAPE_MISMATCH, "%s (model.layers.*.mlp.experts): %s is missing or not of the "
                         "shape and type gpt-oss's %lld experts of %lld x %lld have", blk, bad, (long long)X,
                         (long long)E, (long long)F);
    const uint64_t ne_gu[3] = {E, F, X}, ne_d[3] = {F, E, X}, ne_gb[3] = {F, X, 1};
    uint32_t gt = mx ? LLMK_TYPE_MXFP4 : p[OSS_GU]->type, dt = mx ? LLMK_TYPE_MXFP4 : p[OSS_DOWN]->type;
    size_t ges = gt == LLMK_TYPE_F32 ? 4 : 2, des = dt == LLMK_TYPE_F32 ? 4 : 2;
    uint64_t gu_bytes = mx ? X * F * (E / 32) * 17 : X * F * E * ges, d_bytes = mx ? X * E * (F / 32) * 17 : X * F * E * des;
    unsigned char *w[3];
    for (int k = 0; k < 2; k++) /* gate: even rows, up: odd */
        w[k] = mx ? oss_gather_mxfp4(p[OSS_GU_BLOCKS], p[OSS_GU_SCALES], X, E / 32, 2 * F, F, (uint64_t)k, 2)
                  : oss_gather(p[OSS_GU], X, E, 2 * F, F, (uint64_t)k, 2);
    w[2] = mx ? oss_gather_mxfp4(p[OSS_DOWN_BLOCKS], p[OSS_DOWN_SCALES], X, F / 32, E, E, 0, 1)
              : oss_gather(p[OSS_DOWN], X, F, E, E, 0, 1);
    unsigned char *b[3] = {oss_bias(p[OSS_GU_BIAS], X, 2 * F, F, 0, 2), oss_bias(p[OSS_GU_BIAS], X, 2 * F, F, 1, 2),
                           oss_bias(p[OSS_DOWN_BIAS], X, E, E, 0, 1)};
    int st = LLMK_OK;
    static const char *const wn[3] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};
    static const char *const bn[3] = {"ffn_gate_exps.bias", "ffn_up_exps.bias", "ffn_down_exps.bias"};
    for (int k = 0; k < 3; k++) { /* each buffer is owned (or freed) once, even after a failure */
        if (st == LLMK_OK && !w[k]) st = llmk_fail(LLMK_OUT_OF_MEMORY, "%s experts", blk);
        if (st == LLMK_OK)
            st = oss_emit(q, blk, wn[k], k < 2 ? gt : dt, 3, k < 2 ? ne_gu : ne_d, w[k], k < 2 ? gu_bytes : d_bytes);
        else free(w[k]);
    }
    for (int k = 0; k < 3; k++) {
        const uint64_t ne_db[3] = {E, X, 1};
        if (st == LLMK_OK && !b[k]) st = llmk_fail(LLMK_OUT_OF_MEMORY, "%s expert biases", blk);
        uint32_t bt = p[k < 2 ? OSS_GU_BIAS : OSS_DOWN_BIAS]->type;
        if (st == LLMK_OK)
            st = oss_emit(q, blk, bn[k], bt, 2, k < 2 ? ne_gb : ne_db, b[k], (k < 2 ? F : E) * X * (bt == LLMK_TYPE_F32 ? 4 : 2));
        else free(b[k]);
    }
    return st;
}

/* Every tensor of every shard, named, checked and (llama q/k) permuted. */
static int collect_tensors(const struct hf_hp *hp, struct hf_owner *o, llmk_tensor_info **out, char **names_out,
                           size_t *n_out) {
    size_t total = 0;
    for (size_t f = 0; f < o->n_files; f++) total += llmk_safetensors_n_tensors(o->files[f]);
    total += 2 * (size_t)hp->n_layer; /* gpt-oss: 6 GGUF expert tensors from 4 (or more) of the folder's */
    llmk_tensor_info *t = calloc(total, sizeof *t);
    char *names = malloc(total * 96);
    const llmk_st_tensor **oss = hp->arch == HF_GPTOSS ? calloc((size_t)hp->n_layer * OSS_PARTS, sizeof *oss) : NULL;
    *out = t;
    *names_out = names;
    *n_out = 0;
    if (!t || !names || (hp->arch == HF_GPTOSS && !oss)) {
        free(oss);
        return llmk_fail(LLMK_OUT_OF_MEMORY, "model folder: %zu tensors", total);
    }
    struct hf_stack *stacks = NULL;
    size_t n_stacks = 0;
    int st = LLMK_OK;
    for (size_t f = 0; f < o->n_files && st == LLMK_OK; f++)
        for (size_t i = 0; i < llmk_safetensors_n_tensors(o->files[f]) && st == LLMK_OK; i++) {
            const llmk_st_tensor *s = llmk_safetensors_tensor(o->files[f], i);
            char *g = names + *n_out * 96;
            int64_t e = 0;
            int m = gguf_name(s->name, hp, g, 96, &e);
            if (m < 0)
                st = llmk_fail(LLMK_UNSUPPORTED_FEATURE, "tensor %.100s has no counterpart in %s as llmk implements it",
                               s->name, hp->arch_name);
            else if (m == 2)
                st = stack_part(&stacks, &n_stacks, hp->n_expert, g, e, s);
            else if (m == 3 && oss[(size_t)atol(g + 4) * OSS_PARTS + (size_t)e])
                st = llmk_fail(LLMK_BAD_REQUEST, "tensor %.100s appears twice", s->name);
            else if (m == 3)
                oss[(size_t)atol(g + 4) * OSS_PARTS + (size_t)e] = s;
            else if (m == 1 && (st = tensor_info(s, hp, o, g, &t[*n_out])) == LLMK_OK)
                ++*n_out;
        }
    /* a stack takes the slot of one of its n_expert >= 1 parts */
    for (size_t k = 0; k < n_stacks && st == LLMK_OK; k++)
        if ((st = stack_tensor(&stacks[k], hp->n_expert, o, names + *n_out * 96, &t[*n_out])) == LLMK_OK) ++*n_out;
    for (size_t k = 0; k < n_stacks; k++) free(stacks[k].part);
    free(stacks);
    struct oss_out q = {o, t, names, n_out};
    for (int64_t il = 0; oss && il < hp->n_layer && st == LLMK_OK; il++) {
        char blk[32];
        snprintf(blk, sizeof blk, "blk.%lld", (long long)il);
        st = gptoss_layer(hp, oss + il * OSS_PARTS, blk, &q);
    }
    free(oss);
    return st;
}

/* The writer's metadata (no tensors) as a malloc'd GGUF image. */
static int meta_image(const llmk_gguf_writer *w, uint8_t **img, size_t *size) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return llmk_fail(LLMK_OUT_OF_MEMORY, "model folder: metadata buffer");
    int st = llmk_gguf_writer_write_stream(w, f, "(model folder metadata)");
    if (fclose(f) != 0 && st == LLMK_OK) st = llmk_fail(LLMK_OUT_OF_MEMORY, "model folder: metadata buffer");
    if (st != LLMK_OK) {
        free(buf);
        return st;
    }
    *img = (uint8_t *)buf;
    *size = len;
    return LLMK_OK;
}

static int hf_open(const char *dir, llmk_gguf **out) {
    cJSON *cfg = NULL;
    llmk_gguf_writer *w = NULL;
    struct hf_owner *o = calloc(1, sizeof *o);
    llmk_tensor_info *t = NULL;
    char *names = NULL;
    size_t n = 0;
    struct hf_hp hp = {0};
    uint8_t *img = NULL;
    size_t img_size = 0;
    int st = o ? LLMK_OK : llmk_fail(LLMK_OUT_OF_MEMORY, "model folder");
    if (st == LLMK_OK) st = read_json(dir, "config.json", true, &cfg);
    if (st == LLMK_OK) st = llmk_gguf_writer_init(&w);
    if (st == LLMK_OK) st = config_hparams(cfg, &hp, w);
    if (st == LLMK_OK) st = tokenizer_meta(dir, cfg, &hp, w);
    if (st == LLMK_OK) st = open_shards(dir, o);
    if (st == LLMK_OK) st = collect_tensors(&hp, o, &t, &names, &n);
    if (st == LLMK_OK) st = meta_image(w, &img, &img_size);
    llmk_gguf_writer_free(w);
    cJSON_Delete(cfg);
    if (st == LLMK_OK) {
        st = llmk_gguf_open_view(img, img_size, t, n, owner_release, o, out);
        o = NULL; /* the view owns it now, even on failure */
    }
    free(t);
    free(names);
    owner_release(o);
    return st;
}

int llmk_hf_open(const char *dir, llmk_gguf **out) {
    llmk_error_clear();
    if (!dir || !out) return llmk_fail(LLMK_INVALID_ARGUMENT, "hf_open: NULL argument");
    *out = NULL;
    int st = hf_open(dir, out);
    if (st != LLMK_OK) return llmk_fail(st, "%s: %s", dir, llmk_last_error());
    return LLMK_OK;
}

int llmk_gguf_open_path(const char *path, llmk_gguf **out) {
    struct stat sb;
    if (path && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return llmk_hf_open(path, out);
    return llmk_gguf_open(path, out);
}
