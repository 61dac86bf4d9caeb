/* llmk info: describe a GGUF model file from its metadata and tensor infos
 * (no weights are read). --tensors lists every tensor; --json dumps all
 * metadata and tensor infos as one JSON object (what the tests compare with
 * gguf-py). */
#include "cli.h"
#include "opts.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: llmk info [-m MODEL | MODEL] [--tensors] [--json] [--program] | --system\n"
    "\n"
    "Describes a GGUF file: format version, architecture, hyperparameters,\n"
    "tensor count by type, total size and parameter count, tokenizer kind and\n"
    "whether a chat template is present. MODEL may also be given as the only argument.\n";

/* ---- text output --------------------------------------------------------- */

static void print_u32_key(const llmk_gguf *g, const char *label, const char *arch,
                          const char *suffix) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint32_t v;
    int st = llmk_gguf_get_u32(g, key, &v);
    if (st == LLMK_OK) printf("  %-22s %u\n", label, v);
    else if (st == LLMK_NOT_FOUND) printf("  %-22s (absent)\n", label);
    else printf("  %-22s (%s)\n", label, llmk_last_error());
}

static void print_f32_key(const llmk_gguf *g, const char *label, const char *arch,
                          const char *suffix) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    double v;
    int st = llmk_gguf_get_f64(g, key, &v);
    if (st == LLMK_OK) printf("  %-22s %g\n", label, v);
    else if (st == LLMK_NOT_FOUND) printf("  %-22s (absent)\n", label);
    else printf("  %-22s (%s)\n", label, llmk_last_error());
}

static const char *str_or(const llmk_gguf *g, const char *key, const char *fallback) {
    const char *s;
    return llmk_gguf_get_str(g, key, &s, NULL) == LLMK_OK ? s : fallback;
}

static void human_bytes(uint64_t n, char *buf, size_t cap) {
    if (n >= (1ull << 30)) snprintf(buf, cap, "%.2f GiB", (double)n / (1ull << 30));
    else if (n >= (1ull << 20)) snprintf(buf, cap, "%.2f MiB", (double)n / (1ull << 20));
    else if (n >= 1024) snprintf(buf, cap, "%.2f KiB", (double)n / 1024);
    else snprintf(buf, cap, "%" PRIu64 " B", n);
}

/* general.file_type's names: llama.cpp's llama_ftype without the LLAMA_FTYPE_
 * prefix (ids it retired have no name here). */
static const char *ftype_name(uint32_t ft) {
    static const struct {
        uint32_t id;
        const char *name;
    } names[] = {
        {0, "ALL_F32"},        {1, "MOSTLY_F16"},     {2, "MOSTLY_Q4_0"},    {3, "MOSTLY_Q4_1"},
        {7, "MOSTLY_Q8_0"},    {8, "MOSTLY_Q5_0"},    {9, "MOSTLY_Q5_1"},    {10, "MOSTLY_Q2_K"},
        {11, "MOSTLY_Q3_K_S"}, {12, "MOSTLY_Q3_K_M"}, {13, "MOSTLY_Q3_K_L"}, {14, "MOSTLY_Q4_K_S"},
        {15, "MOSTLY_Q4_K_M"}, {16, "MOSTLY_Q5_K_S"}, {17, "MOSTLY_Q5_K_M"}, {18, "MOSTLY_Q6_K"},
        {25, "MOSTLY_IQ4_NL"}, {30, "MOSTLY_IQ4_XS"}, {32, "MOSTLY_BF16"},   {38, "MOSTLY_MXFP4_MOE"},
        {39, "MOSTLY_NVFP4"},
    };
    for (size_t i = 0; i < CLI_LEN(names); i++)
        if (names[i].id == ft) return names[i].name;
    return "unknown to llmk";
}

/* The chat template line: the family llmk's chat code recognises (what
 * llmk chat and llmk run use), or why there is none. */
static void print_chat_template(const llmk_gguf *g) {
    const char *tmpl;
    size_t tlen;
    if (llmk_gguf_get_str(g, "tokenizer.chat_template", &tmpl, &tlen) != LLMK_OK) {
        printf("chat template: absent (llmk run continues the prompt as plain text)\n");
        return;
    }
    llmk_chat_template *tp = NULL;
    if (llmk_chat_template_from_gguf(g, NULL, &tp) == LLMK_OK)
        printf("chat template: %s (%zu bytes)\n", llmk_chat_template_name(tp), tlen);
    else printf("chat template: present (%zu bytes), not one llmk recognises\n", tlen);
    llmk_chat_template_free(tp);
}

static void print_summary(const char *path, const llmk_gguf *g, bool tensors) {
    const char *arch = str_or(g, "general.architecture", NULL);
    char hb[64];
    human_bytes(llmk_gguf_file_size(g), hb, sizeof hb);
    struct stat sb;
    /* A Hugging Face folder is read into the same view, with no GGUF header
     * of its own to describe. */
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        printf("folder:        %s\n", path);
        uint64_t bytes = 0;
        for (size_t i = 0; i < llmk_gguf_n_tensors(g); i++) bytes += llmk_gguf_tensor(g, i)->n_bytes;
        human_bytes(bytes, hb, sizeof hb);
        printf("format:        Hugging Face folder (config.json, safetensors), %" PRIu64 " bytes of tensors (%s)\n",
               bytes, hb);
    } else {
        printf("file:          %s\n", path);
        printf("format:        GGUF v%u, %" PRIu64 " bytes (%s), alignment %u, data at byte %" PRIu64 "\n",
               llmk_gguf_version(g), llmk_gguf_file_size(g), hb, llmk_gguf_alignment(g),
               llmk_gguf_data_offset(g));
    }
    printf("metadata:      %zu keys\n", llmk_gguf_n_kv(g));
    printf("architecture:  %s\n", arch ? arch : "(absent)");
    printf("name:          %s\n", str_or(g, "general.name", "(absent)"));
    uint32_t ft;
    if (llmk_gguf_get_u32(g, "general.file_type", &ft) == LLMK_OK)
        printf("file type:     %s (%u)\n", ftype_name(ft), ft);
    if (arch) {
        printf("hyperparameters:\n");
        print_u32_key(g, "block_count", arch, "block_count");
        print_u32_key(g, "context_length", arch, "context_length");
        print_u32_key(g, "embedding_length", arch, "embedding_length");
        print_u32_key(g, "feed_forward_length", arch, "feed_forward_length");
        print_u32_key(g, "head_count", arch, "attention.head_count");
        print_u32_key(g, "head_count_kv", arch, "attention.head_count_kv");
        print_u32_key(g, "key_length", arch, "attention.key_length");
        print_u32_key(g, "rope.dimension_count", arch, "rope.dimension_count");
        print_f32_key(g, "rope.freq_base", arch, "rope.freq_base");
        print_f32_key(g, "rms_epsilon", arch, "attention.layer_norm_rms_epsilon");
        print_u32_key(g, "vocab_size", arch, "vocab_size");
        /* sliding-window models (gemma3): only where the file has the key */
        char key[256];
        snprintf(key, sizeof key, "%s.attention.sliding_window", arch);
        if (llmk_gguf_find_key(g, key) >= 0) {
            print_u32_key(g, "sliding_window", arch, "attention.sliding_window");
            print_f32_key(g, "rope.freq_base_swa", arch, "rope.freq_base_swa");
        }
    }
    uint32_t et;
    uint64_t n_vocab;
    printf("tokenizer:     model %s, pre %s", str_or(g, "tokenizer.ggml.model", "(absent)"),
           str_or(g, "tokenizer.ggml.pre", "(absent)"));
    if (llmk_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n_vocab) == LLMK_OK)
        printf(", %" PRIu64 " tokens", n_vocab);
    bool has_merges = llmk_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n_vocab) == LLMK_OK;
    if (has_merges) printf(", %" PRIu64 " merges", n_vocab);
    printf("\n");
    print_chat_template(g);

    /* tensors by type, total size and parameter count */
    uint64_t count[LLMK_TYPE_COUNT_] = {0}, bytes[LLMK_TYPE_COUNT_] = {0}, params = 0, total = 0;
    size_t nt = llmk_gguf_n_tensors(g);
    for (size_t i = 0; i < nt; i++) {
        const llmk_tensor_info *t = llmk_gguf_tensor(g, i);
        count[t->type]++; /* the reader refuses unknown type ids */
        bytes[t->type] += t->n_bytes;
        params += t->n_elements;
        total += t->n_bytes;
    }
    human_bytes(total, hb, sizeof hb);
    printf("tensors:       %zu, %" PRIu64 " bytes (%s), %" PRIu64 " parameters (%.1f M)\n", nt, total,
           hb, params, (double)params / 1e6);
    for (uint32_t ty = 0; ty < LLMK_TYPE_COUNT_; ty++) {
        if (!count[ty]) continue;
        human_bytes(bytes[ty], hb, sizeof hb);
        printf("  %-8s %5" PRIu64 " tensors, %s\n", llmk_type_name(ty), count[ty], hb);
    }
    if (tensors) {
        printf("tensor list (name, type, shape ne0..., offset in data section, bytes):\n");
        for (size_t i = 0; i < nt; i++) {
            const llmk_tensor_info *t = llmk_gguf_tensor(g, i);
            char shape[128];
            int k = snprintf(shape, sizeof shape, "[");
            for (uint32_t d = 0; d < t->n_dims && k > 0 && (size_t)k < sizeof shape; d++)
                k += snprintf(shape + k, sizeof shape - (size_t)k, "%s%" PRIu64, d ? ", " : "", t->ne[d]);
            if (k > 0 && (size_t)k < sizeof shape) snprintf(shape + k, sizeof shape - (size_t)k, "]");
            printf("  %-32s %-6s %-20s %12" PRIu64 " %12" PRIu64 "\n", t->name, llmk_type_name(t->type),
                   shape, t->offset, t->n_bytes);
        }
    }
}

/* ---- JSON output ----------------------------------------------------------- */

/* JSON strings must be UTF-8; metadata strings are bytes from a hostile file.
 * Invalid sequences become U+FFFD, NUL becomes U+FFFD too (cJSON takes C strings). */
static char *utf8_clean(const char *s, size_t n) {
    char *o = malloc(3 * n + 1);
    if (!o) return NULL;
    size_t k = 0;
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i], len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = len > 0 && c != 0 && i + len <= n;
        for (unsigned j = 1; ok && j < len; j++) ok = (p[i + j] & 0xc0) == 0x80;
        if (ok && len > 1) { /* reject overlong forms, surrogates and > U+10FFFF */
            uint32_t cp = c & (0x7f >> len);
            for (unsigned j = 1; j < len; j++) cp = (cp << 6) | (p[i + j] & 0x3f);
            ok = !(cp < (len == 2 ? 0x80u : len == 3 ? 0x800u : 0x10000u)) && !(cp >= 0xd800 && cp <= 0xdfff) &&
                 cp <= 0x10ffff;
        }
        if (ok) {
            memcpy(o + k, p + i, len);
            k += len;
            i += len;
        } else {
            memcpy(o + k, "\xef\xbf\xbd", 3);
            k += 3;
            i += 1;
        }
    }
    o[k] = 0;
    return o;
}

static cJSON *json_str(const char *s, size_t n) {
    char *c = utf8_clean(s, n);
    cJSON *j = c ? cJSON_CreateString(c) : NULL;
    free(c);
    return j;
}

/* cJSON prints doubles with 15 significant digits when they compare equal
 * within an epsilon; the dump must be exact, so numbers are written with 17.
 * JSON has no NaN or infinity: those become the strings "nan", "inf", "-inf". */
static cJSON *json_double(double d) {
    char b[40];
    if (isnan(d)) return cJSON_CreateString("nan");
    if (isinf(d)) return cJSON_CreateString(d > 0 ? "inf" : "-inf");
    snprintf(b, sizeof b, "%.17g", d);
    return cJSON_CreateRaw(b);
}

/* Integers beyond 2^53 do not survive a JSON double: write them as strings. */
static cJSON *json_num(double d, uint32_t type) {
    if ((type == LLMK_GGUF_UINT64 || type == LLMK_GGUF_INT64) && (d > 9007199254740992.0 || d < -9007199254740992.0)) {
        char b[32];
        snprintf(b, sizeof b, "%.0f", d);
        return cJSON_CreateString(b);
    }
    if (type == LLMK_GGUF_BOOL) return cJSON_CreateBool(d != 0);
    return json_double(d);
}

static cJSON *kv_json(const llmk_gguf *g, size_t i) {
    const char *key = llmk_gguf_kv_key(g, i);
    uint32_t type = llmk_gguf_kv_type(g, i);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", llmk_gguf_type_name(type));
    if (type == LLMK_GGUF_STRING) {
        const char *s;
        size_t n;
        llmk_gguf_get_str(g, key, &s, &n);
        cJSON_AddItemToObject(o, "value", json_str(s, n));
    } else if (type == LLMK_GGUF_ARRAY) {
        uint32_t et;
        uint64_t n;
        llmk_gguf_get_arr(g, key, &et, &n);
        cJSON_AddStringToObject(o, "elem_type", llmk_gguf_type_name(et));
        cJSON_AddNumberToObject(o, "count", (double)n);
        if (et != LLMK_GGUF_ARRAY) {
            cJSON *arr = cJSON_AddArrayToObject(o, "value");
            for (uint64_t k = 0; k < n; k++) {
                if (et == LLMK_GGUF_STRING) {
                    const char *s;
                    size_t len;
                    llmk_gguf_arr_str(g, key, k, &s, &len);
                    cJSON_AddItemToArray(arr, json_str(s, len));
                } else {
                    double d;
                    llmk_gguf_arr_num(g, key, k, &d);
                    cJSON_AddItemToArray(arr, json_num(d, et));
                }
            }
        }
    } else if (type == LLMK_GGUF_BOOL) {
        bool b = false;
        llmk_gguf_get_bool(g, key, &b);
        cJSON_AddBoolToObject(o, "value", b);
    } else if (type == LLMK_GGUF_FLOAT32 || type == LLMK_GGUF_FLOAT64) {
        double d = 0;
        llmk_gguf_get_f64(g, key, &d);
        cJSON_AddItemToObject(o, "value", json_double(d));
    } else { /* integers; beyond 2^53 as exact decimal strings */
        uint64_t u;
        int64_t v = 0;
        char buf[32];
        bool big;
        if (llmk_gguf_get_u64(g, key, &u) == LLMK_OK) {
            snprintf(buf, sizeof buf, "%" PRIu64, u);
            big = u > (1ull << 53);
            v = (int64_t)u;
        } else {
            llmk_gguf_get_i64(g, key, &v);
            snprintf(buf, sizeof buf, "%" PRId64, v);
            big = v < -(1ll << 53);
        }
        if (big) cJSON_AddStringToObject(o, "value", buf);
        else cJSON_AddNumberToObject(o, "value", (double)v);
    }
    return o;
}

static int print_json(const char *path, const llmk_gguf *g) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "file", json_str(path, strlen(path)));
    cJSON_AddNumberToObject(root, "version", llmk_gguf_version(g));
    cJSON_AddNumberToObject(root, "alignment", llmk_gguf_alignment(g));
    cJSON_AddNumberToObject(root, "file_size", (double)llmk_gguf_file_size(g));
    cJSON_AddNumberToObject(root, "data_offset", (double)llmk_gguf_data_offset(g));
    cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
    cJSON *order = cJSON_AddArrayToObject(root, "key_order");
    for (size_t i = 0; i < llmk_gguf_n_kv(g); i++) {
        const char *key = llmk_gguf_kv_key(g, i);
        cJSON_AddItemToArray(order, json_str(key, strlen(key)));
        char *clean = utf8_clean(key, strlen(key));
        cJSON_AddItemToObject(meta, clean ? clean : "?", kv_json(g, i));
        free(clean);
    }
    cJSON *ts = cJSON_AddArrayToObject(root, "tensors");
    for (size_t i = 0; i < llmk_gguf_n_tensors(g); i++) {
        const llmk_tensor_info *t = llmk_gguf_tensor(g, i);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "name", json_str(t->name, strlen(t->name)));
        cJSON_AddStringToObject(o, "type", llmk_type_name(t->type));
        cJSON_AddNumberToObject(o, "type_id", t->type);
        cJSON *shape = cJSON_AddArrayToObject(o, "shape");
        for (uint32_t d = 0; d < t->n_dims; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->ne[d]));
        cJSON_AddNumberToObject(o, "n_elements", (double)t->n_elements);
        cJSON_AddNumberToObject(o, "offset", (double)t->offset);
        cJSON_AddNumberToObject(o, "n_bytes", (double)t->n_bytes);
        cJSON_AddItemToArray(ts, o);
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text) return LLMK_OUT_OF_MEMORY;
    puts(text);
    free(text);
    return LLMK_OK;
}

/* --program: the phase program the fast path's executor runs for this model
 * (src/program.c), with the activation forms the executor chose. */
static int print_program(const char *model) {
    llmk_model *m = NULL;
    llmk_context *c = NULL;
    int st = llmk_model_load(model, &m);
    if (st == LLMK_OK) st = llmk_context_init(m, &(llmk_context_params){.n_ctx = 16, .n_threads = 1}, &c);
    if (st == LLMK_OK) st = llmk_context_describe(c, stdout);
    if (st == LLMK_OK) printf("attention/activation kernels: %s\n", llmk_context_kernels(c));
    llmk_context_free(c);
    if (m) llmk_model_free(m);
    return st == LLMK_OK ? CLI_EXIT_OK : cli_report("info", st);
}

/* --system: what this build and CPU offer; no model is opened. */
static int print_system(void) {
    size_t n;
    const char *const *names = llmk_codecs(&n);
    printf("%s", llmk_cpu_features());
    printf("codecs (%zu):", n);
    for (size_t k = 0; k < n; k++) printf(" %s", names[k]);
    printf("\n");
    /* The configuration in effect (the LLMK_* variables app/env_config.h read). */
    llmk_config c;
    llmk_config_get(&c);
    printf("config: cpu_mask 0x%x, kernels %s, kv_type %s, activations %s, repack %s, prefetch_next %s, "
           "phase clock %s, f32_act %s\n",
           c.cpu_mask, c.ref_kernels ? "ref" : "auto", llmk_type_name(c.kv_type),
           c.act_q8 ? "q8" : c.act_a8 ? "a8" : "a16",
           c.repack ? "on" : "off", c.prefetch_next ? "on" : "off", c.phase_clock_thread ? "thread" : "wall",
           c.f32_act ? c.f32_act : "off");
    if (fflush(stdout) == 0) return CLI_EXIT_OK;
    fprintf(stderr, "llmk info: error: %s: writing stdout failed\n", llmk_status_name(LLMK_IO_ERROR));
    return CLI_EXIT_FAIL;
}

int cmd_info(int argc, char **argv) {
    const char *model = NULL, *pos[1];
    bool tensors = false, json = false, program = false, system = false;
    const struct cli_opt table[] = {
        CLI_OPT_MODEL(&model),
        CLI_FLAG("--tensors", 0, &tensors, "also list every tensor: name, type, shape, offset, bytes"),
        CLI_FLAG("--json", 0, &json, "print every metadata value and tensor info as JSON"),
        CLI_FLAG("--system", 0, &system,
                 "print the CPU features detected, the dot kernel chosen per codec, and the codecs this build "
                 "implements (no model)"),
        CLI_FLAG("--program", 0, &program, "print the phase program the fast path runs for the model"),
    };
    const struct cli_opt_section sections[] = {{NULL, table, CLI_LEN(table)}};
    struct cli_cmd spec = {.name = "info", .usage = USAGE, .sections = sections, .n_sections = CLI_LEN(sections),
                           .pos = pos, .max_pos = 1, .pos_name = "model file"};
    int prc = cli_opts_parse(&spec, argc, argv);
    if (prc != CLI_OPTS_GO) return prc;
    if (system) return print_system();
    if (spec.n_pos && model)
        return cli_usage_error("info", "more than one model file ('%s' and '%s')", model, pos[0]);
    if (spec.n_pos) model = pos[0];
    if (!model) model = cli_default_model();
    if (program) return print_program(model);
    llmk_gguf *g;
    int st = llmk_gguf_open_path(model, &g);
    if (st != LLMK_OK) return cli_report("info", st);
    if (json) st = print_json(model, g);
    else print_summary(model, g, tensors);
    llmk_gguf_close(g);
    if (st != LLMK_OK) {
        fprintf(stderr, "llmk info: error: %s: out of memory printing the JSON\n", llmk_status_name(st));
        return CLI_EXIT_FAIL;
    }
    if (fflush(stdout) != 0) {
        fprintf(stderr, "llmk info: error: %s: writing stdout failed\n", llmk_status_name(LLMK_IO_ERROR));
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}
