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
#include "gguf_internal.h"
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#define HF_MAX_JSON (256u << 20) /* tokenizer.json of a 256k vocabulary is ~20 MB */
#define HF_MAX_SHARDS 4096

enum hf_arch { HF_LLAMA, HF_QWEN2, HF_QWEN3 };

static const struct {
    const char *hf, *gguf;
    enum hf_arch id;
} hf_archs[] = {{"LlamaForCausalLM", "llama", HF_LLAMA},
                {"Qwen2ForCausalLM", "qwen2", HF_QWEN2},
                {"Qwen3ForCausalLM", "qwen3", HF_QWEN3}};

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

/* rope_scaling (transformers 4) or rope_parameters (5): none/default,
 * linear, llama3 are what the loader implements; the rest are refused. */
static int config_rope(const cJSON *cfg, const char *a, llmk_gguf_writer *w) {
    const cJSON *rp = jget(cfg, "rope_parameters");
    const cJSON *rs = jget(cfg, "rope_scaling");
    double theta = 10000.0;
    int st = jreal(cfg, "rope_theta", &theta);
    if (st == LLMK_NOT_FOUND && cJSON_IsObject(rp)) st = jreal(rp, "rope_theta", &theta);
    if (st != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    if ((st = put_f32(w, a, "rope.freq_base", theta)) != LLMK_OK) return st;
    const cJSON *sc = cJSON_IsObject(rs) ? rs : cJSON_IsObject(rp) ? rp : NULL;
    if (!sc) return LLMK_OK;
    const cJSON *type = jget(sc, "rope_type");
    if (!type) type = jget(sc, "type");
    const char *t = cJSON_IsString(type) ? type->valuestring : "default";
    if (!strcmp(t, "default")) return LLMK_OK;
    double factor = 0;
    if (jreal(sc, "factor", &factor) != LLMK_OK || !(factor > 0))
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "config.json: rope scaling '%.32s' without a positive factor", t);
    char key[128];
    if (!strcmp(t, "linear")) {
        snprintf(key, sizeof key, "%s.rope.scaling.type", a);
        if ((st = llmk_gguf_writer_set_str(w, key, "linear")) != LLMK_OK) return st;
        return put_f32(w, a, "rope.scaling.factor", factor);
    }
    if (strcmp(t, "llama3") != 0)
        return llmk_fail(LLMK_UNSUPPORTED_FEATURE, "config.json: rope scaling '%.32s' is not supported (linear, llama3)",
                         t);
    double lo = 1, hi = 4;
    int64_t orig = 0;
    if (jint(sc, "original_max_position_embeddings", 1, 1 << 30, &orig) != LLMK_OK)
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "config.json: llama3 rope scaling needs original_max_position_embeddings");
    if ((st = jreal(sc, "low_freq_factor", &lo)) != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    if ((st = jreal(sc, "high_freq_factor", &hi)) != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    if ((st = llmk_gguf_writer_set_str(w, key, "llama3")) != LLMK_OK ||
        (st = put_f32(w, a, "rope.scaling.factor", factor)) != LLMK_OK ||
        (st = put_u32(w, a, "rope.scaling.original_context_length", orig)) != LLMK_OK ||
        (st = put_f32(w, a, "rope.scaling.low_freq_factor", lo)) != LLMK_OK ||
        (st = put_f32(w, a, "rope.scaling.high_freq_factor", hi)) != LLMK_OK)
        return st;
    return LLMK_OK;
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
    return llmk_fail(LLMK_UNSUPPORTED_ARCHITECTURE,
                     "config.json: architecture %.80s is not supported (LlamaForCausalLM, Qwen2ForCausalLM, "
                     "Qwen3ForCausalLM)", first->valuestring);
}

/* Features of these classes llmk does not implement, refused by name
 * rather than silently ignored. */
static int config_refusals(const cJSON *cfg) {
    const cJSON *act = jget(cfg, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0))
        return llmk_fail(LLMK_UNSUPPORTED_FEATURE, "config.json: hidden_act %.40s is not supported (silu)",
                         cJSON_IsString(act) ? act->valuestring : "(not a string)");
    if (jtrue(cfg, "mlp_bias")) return llmk_fail(LLMK_UNSUPPORTED_FEATURE, "config.json: mlp_bias is not supported");
    if (jtrue(cfg, "use_sliding_window"))
        return llmk_fail(LLMK_UNSUPPORTED_FEATURE, "config.json: use_sliding_window is not supported");
    double prf = 1;
    if (jreal(cfg, "partial_rotary_factor", &prf) == LLMK_OK && prf != 1)
        return llmk_fail(LLMK_UNSUPPORTED_FEATURE, "config.json: partial_rotary_factor %g is not supported", prf);
    llmk_error_clear();
    return LLMK_OK;
}

static int config_hparams(const cJSON *cfg, struct hf_hp *hp, llmk_gguf_writer *w) {
    int st;
    if ((st = config_arch(cfg, hp)) != LLMK_OK || (st = config_refusals(cfg)) != LLMK_OK) return st;
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
    hp->head_dim = hp->n_embd / hp->n_head;
    bool explicit_hd = (st = jint(cfg, "head_dim", 1, 1 << 16, &hp->head_dim)) == LLMK_OK;
    if (st != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    hp->n_vocab = 0;
    if ((st = jint(cfg, "vocab_size", 1, 1 << 24, &hp->n_vocab)) != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    double eps = 1e-6;
    if ((st = jreal(cfg, "rms_norm_eps", &eps)) != LLMK_OK && st != LLMK_NOT_FOUND) return st;
    const cJSON *tie = jget(cfg, "tie_word_embeddings");
    hp->tied = cJSON_IsTrue(tie); /* the three classes default to untied */
    llmk_error_clear();

    const char *a = hp->arch_name;
    if ((st = llmk_gguf_writer_set_str(w, "general.architecture", a)) != LLMK_OK ||
        (st = put_u32(w, a, "block_count", hp->n_layer)) != LLMK_OK ||
        (st = put_u32(w, a, "context_length", hp->n_ctx)) != LLMK_OK ||
        (st = put_u32(w, a, "embedding_length", hp->n_embd)) != LLMK_OK ||
        (st = put_u32(w, a, "feed_forward_length", hp->n_ff)) != LLMK_OK ||
        (st = put_u32(w, a, "attention.head_count", hp->n_head)) != LLMK_OK ||
        (st = put_u32(w, a, "attention.head_count_kv", hp->n_head_kv)) != LLMK_OK ||
        (st = put_u32(w, a, "rope.dimension_count", hp->head_dim)) != LLMK_OK ||
        (st = put_f32(w, a, "attention.layer_norm_rms_epsilon", eps)) != LLMK_OK)
        return st;
    if (explicit_hd && ((st = put_u32(w, a, "attention.key_length", hp->head_dim)) != LLMK_OK ||
                        (st = put_u32(w, a, "attention.value_length", hp->head_dim)) != LLMK_OK))
        return st;
    return config_rope(cfg, a, w);
}

/* ---- tokenizer.json ------------------------------------------------------------ */

/* GGUF token types (llama.cpp's numbering, a fact of the format). */
enum { TT_NORMAL = 1, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5 };

/* The split patterns of the families' tokenizer.json files, as JSON decodes
 * them (facts of those files); each maps to the tokenizer.ggml.pre name
 * llama.cpp's converter gives the family. */
static const char PAT_QWEN2[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
                                " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char PAT_LLAMA3[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
                                 " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

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
    const char **text; /* into the JSON, or into pads */
    uint8_t *type;
    char *pads;        /* "[PADi]" texts of unused ids */
    const char **merges;
    char *merge_arena;
    size_t n_merges;
};

static void vocab_free(struct hf_vocab *v) {
    free(v->text);
    free(v->type);
    free(v->pads);
    free(v->merges);
    free(v->merge_arena);
}

static bool looks_special(const char *s) {
    size_t n = strlen(s);
    return !strcmp(s, "<pad>") || !strcmp(s, "<mask>") ||
           (n >= 4 && !strncmp(s, "<|", 2) && !strcmp(s + n - 2, "|>"));
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
    static const char *const typs[] = {"bos", "eos", "unk", "pad"};
    for (size_t i = 0; i < LLMK_ARRAY_LEN(typs); i++) {
        int64_t id = special_from_config(tj, tc, typs[i]);
        if (id < 0) id = special_id_field(cfg, typs[i], false);
        if (id < 0) id = special_id_field(gen, typs[i], true);
        if (id < 0 || id >= n) continue;
        char key[64];
        snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", !strcmp(typs[i], "pad") ? "padding" : typs[i]);
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

static int tok_check(const cJSON *tj, const char **pre) {
    const cJSON *model = jget(tj, "model");
    if (!is_type(model, "BPE"))
        return llmk_fail(LLMK_TOKENIZER_UNSUPPORTED, "tokenizer.json: model type %.40s is not supported (BPE)",
                         cJSON_IsString(jget(model, "type")) ? jget(model, "type")->valuestring : "(none)");
    if (jtrue(model, "byte_fallback"))
        return llmk_fail(LLMK_TOKENIZER_UNSUPPORTED,
                         "tokenizer.json: a SentencePiece-style BPE (byte_fallback) is not supported from a folder "
                         "(byte-level BPE is)");
    const cJSON *norm = jget(tj, "normalizer");
    /* NFC is what Qwen2's file names; the GGUF conversion drops it too. */
    if (norm && !cJSON_IsNull(norm) && !is_type(norm, "NFC"))
        return llmk_fail(LLMK_TOKENIZER_UNSUPPORTED, "tokenizer.json: normalizer %.40s is not supported (none, NFC)",
                         cJSON_IsString(jget(norm, "type")) ? jget(norm, "type")->valuestring : "(no type)");
    *pre = pre_name(jget(tj, "pre_tokenizer"));
    if (!*pre)
        return llmk_fail(LLMK_TOKENIZER_UNSUPPORTED,
                         "tokenizer.json: the pre-tokenizer is not one llmk maps (ByteLevel; Digits + ByteLevel; "
                         "the Qwen2 or Llama 3 Split + ByteLevel)");
    return LLMK_OK;
}

/* tokenizer.json (+ tokenizer_config.json, generation_config.json) into
 * tokenizer.ggml.* metadata. No tokenizer.json: no tokenizer keys (the
 * model still runs on ids). */
static int tokenizer_meta(const char *dir, const cJSON *cfg, int64_t n_cfg, llmk_gguf_writer *w) {
    cJSON *tj = NULL, *tc = NULL, *gen = NULL;
    struct hf_vocab v = {0};
    const char *pre = NULL;
    int st = read_json(dir, "tokenizer.json", false, &tj);
    if (st != LLMK_OK || !tj) return st;
    if ((st = read_json(dir, "tokenizer_config.json", false, &tc)) == LLMK_OK &&
        (st = read_json(dir, "generation_config.json", false, &gen)) == LLMK_OK && (st = tok_check(tj, &pre)) == LLMK_OK &&
        (st = vocab_ids(tj, n_cfg, &v)) == LLMK_OK && (st = vocab_merges(jget(tj, "model"), &v)) == LLMK_OK) {
        uint8_t *tt = malloc((size_t)v.n * 4);
        if (!tt) st = llmk_fail(LLMK_OUT_OF_MEMORY, "tokenizer: token types");
        for (int64_t i = 0; tt && i < v.n; i++) tt[4 * i] = v.type[i], tt[4 * i + 1] = tt[4 * i + 2] = tt[4 * i + 3] = 0;
        if (st == LLMK_OK) st = llmk_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
        if (st == LLMK_OK) st = llmk_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
        if (st == LLMK_OK) st = llmk_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", v.text, (uint64_t)v.n);
        if (st == LLMK_OK) st = llmk_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", LLMK_GGUF_INT32, tt, (uint64_t)v.n);
        if (st == LLMK_OK) st = llmk_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", v.merges, v.n_merges);
        free(tt);
        if (st == LLMK_OK) st = tok_specials(tj, tc, cfg, gen, v.n, w);
        if (st == LLMK_OK) st = tok_add_bos(tj, tc, w);
        if (st == LLMK_OK) st = tok_chat_template(dir, tc, w);
    }
    vocab_free(&v);
    cJSON_Delete(tj);
    cJSON_Delete(tc);
    cJSON_Delete(gen);
    return st;
}

/* ---- tensors ------------------------------------------------------------------- */

/* llama.cpp's name for an HF tensor: 1 mapped, 0 skipped on purpose, -1 no
 * counterpart (refused by the caller). */
static int gguf_name(const char *hf, const struct hf_hp *hp, char *out, size_t cap) {
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

/* Every tensor of every shard, named, checked and (llama q/k) permuted. */
static int collect_tensors(const struct hf_hp *hp, struct hf_owner *o, llmk_tensor_info **out, char **names_out,
                           size_t *n_out) {
    size_t total = 0;
    for (size_t f = 0; f < o->n_files; f++) total += llmk_safetensors_n_tensors(o->files[f]);
    llmk_tensor_info *t = calloc(total ? total : 1, sizeof *t);
    char *names = malloc(total ? total * 96 : 1);
    *out = t;
    *names_out = names;
    *n_out = 0;
    if (!t || !names) return llmk_fail(LLMK_OUT_OF_MEMORY, "model folder: %zu tensors", total);
    for (size_t f = 0; f < o->n_files; f++)
        for (size_t i = 0; i < llmk_safetensors_n_tensors(o->files[f]); i++) {
            const llmk_st_tensor *s = llmk_safetensors_tensor(o->files[f], i);
            char *g = names + *n_out * 96;
            int m = gguf_name(s->name, hp, g, 96);
            if (m < 0)
                return llmk_fail(LLMK_UNSUPPORTED_FEATURE,
                                 "tensor %.100s has no counterpart in %s as llmk implements it", s->name, hp->arch_name);
            if (m == 0) continue;
            int st = tensor_info(s, hp, o, g, &t[*n_out]);
            if (st != LLMK_OK) return st;
            ++*n_out;
        }
    return LLMK_OK;
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
    if (st == LLMK_OK) st = tokenizer_meta(dir, cfg, hp.n_vocab, w);
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
