/* llmk plan: memory and speed planning from a model's metadata (or explicit
 * numbers), before anything is loaded. Every figure comes from the formula
 * layer (section 3 of llmk.h); no tensor data is read. */
#include "cli.h"
#include "llmk_formulas.h"
#include "internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *CMD = "plan";

static void usage(FILE *to) {
    fprintf(to,
            "usage: llmk plan [-m MODEL | --layers L --kv-heads H --head-dim D] --ctx N\n"
            "                 [--batch B] [--kv-type f32|f16|q8_0] [--block-size S]\n"
            "                 [--prefix P] [--accept-rate A --draft-depth K [--draft-cost C]]\n"
            "                 [--json]\n"
            "\n"
            "KV-cache and weight memory for a model before it is loaded, from the GGUF\n"
            "metadata alone (default model when neither -m nor the three numbers are given).\n"
            "  --ctx N          tokens per sequence (required)\n"
            "  --batch B        sequences (default 1)\n"
            "  --kv-type T      KV storage: f32 (4 bytes), f16 (2, default), q8_0 (34/32)\n"
            "  --block-size S   paged-KV block size in tokens (default 16)\n"
            "  --prefix P       tokens of a prefix all B sequences share: memory saved\n"
            "  --accept-rate A  speculative decoding: per-token acceptance rate in [0, 1]\n"
            "  --draft-depth K  draft tokens per step (default 4 with --accept-rate)\n"
            "  --draft-cost C   draft step time as a fraction of a target step (default 0.1)\n"
            "  --json           one JSON object (bytes as numbers) instead of text\n");
}

struct plan_model {
    char arch[64];
    long layers, kv_heads, head_dim;
    double weight_bytes; /* < 0 when not known (explicit numbers) */
    unsigned long long n_tensors;
};

/* "<arch>.<suffix>" as an unsigned 32-bit metadata value. */
static int arch_u32(const llmk_gguf *g, const char *arch, const char *suffix, uint32_t *out) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return llmk_gguf_get_u32(g, key, out);
}

static int read_model(const char *path, struct plan_model *pm) {
    llmk_gguf *g = NULL;
    int st = llmk_gguf_open(path, &g);
    if (st != LLMK_OK) return st;
    const char *arch = NULL;
    size_t arch_len = 0;
    st = llmk_gguf_get_str(g, "general.architecture", &arch, &arch_len);
    if (st != LLMK_OK) {
        llmk_gguf_close(g);
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "%s: no general.architecture string", path);
    }
    if (arch_len == 0 || arch_len >= sizeof pm->arch || memchr(arch, '\0', arch_len)) {
        llmk_gguf_close(g);
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "%s: general.architecture is empty or too long",
                         path);
    }
    memcpy(pm->arch, arch, arch_len);
    pm->arch[arch_len] = '\0';

    uint32_t layers = 0, heads = 0, kv_heads = 0, embd = 0, key_len = 0;
    const char *missing = NULL;
    if (arch_u32(g, pm->arch, "block_count", &layers) != LLMK_OK) missing = "block_count";
    else if (arch_u32(g, pm->arch, "embedding_length", &embd) != LLMK_OK) missing = "embedding_length";
    else if (arch_u32(g, pm->arch, "attention.head_count", &heads) != LLMK_OK) missing = "attention.head_count";
    if (missing) {
        llmk_gguf_close(g);
        return llmk_fail(LLMK_BAD_HYPERPARAMETER, "%s: metadata %s.%s is missing or not an integer",
                         path, pm->arch, missing);
    }
    /* Without an explicit KV head count the model has plain multi-head attention. */
    if (arch_u32(g, pm->arch, "attention.head_count_kv", &kv_heads) != LLMK_OK) kv_heads = heads;
    if (layers == 0 || heads == 0 || kv_heads == 0 || embd == 0) {
        llmk_gguf_close(g);
        return llmk_fail(LLMK_BAD_HYPERPARAMETER,
                         "%s: block_count %u, head_count %u, head_count_kv %u, embedding_length %u: "
                         "none may be 0", path, layers, heads, kv_heads, embd);
    }
    if (arch_u32(g, pm->arch, "attention.key_length", &key_len) == LLMK_OK && key_len > 0) {
        pm->head_dim = key_len;
    } else {
        if (embd % heads != 0) {
            llmk_gguf_close(g);
            return llmk_fail(LLMK_BAD_HYPERPARAMETER,
                             "%s: embedding_length %u is not a multiple of head_count %u", path,
                             embd, heads);
        }
        pm->head_dim = embd / heads;
    }
    pm->layers = layers;
    pm->kv_heads = kv_heads;

    double bytes = 0.0;
    size_t nt = llmk_gguf_n_tensors(g);
    for (size_t i = 0; i < nt; i++) {
        const llmk_tensor_info *ti = llmk_gguf_tensor(g, i);
        if (ti) bytes += (double)ti->n_bytes;
    }
    pm->weight_bytes = bytes;
    pm->n_tensors = nt;
    llmk_gguf_close(g);
    return LLMK_OK;
}

static void print_bytes(const char *label, double b) {
    printf("%-28s %.0f bytes (%.2f MiB)\n", label, b, b / 1048576.0);
}

int cmd_plan(int argc, char **argv) {
    const char *model = NULL, *kv_type = "f16";
    long ctx = -1, batch = 1, block = 16, prefix = -1, depth = -1;
    long layers = -1, kv_heads = -1, head_dim = -1;
    double accept = -1.0, draft_cost = 0.1;
    int json = 0;
    const long big = 1L << 24;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        }
        if (i + 1 >= argc) return cli_usage_error(CMD, "%s needs a value", a);
        const char *v = argv[++i];
        int ok = 1;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--ctx")) ok = cli_parse_long(CMD, a, v, 1, big, &ctx);
        else if (!strcmp(a, "--batch")) ok = cli_parse_long(CMD, a, v, 1, 1L << 20, &batch);
        else if (!strcmp(a, "--layers")) ok = cli_parse_long(CMD, a, v, 1, 1L << 16, &layers);
        else if (!strcmp(a, "--kv-heads")) ok = cli_parse_long(CMD, a, v, 1, 1L << 16, &kv_heads);
        else if (!strcmp(a, "--head-dim")) ok = cli_parse_long(CMD, a, v, 1, 1L << 16, &head_dim);
        else if (!strcmp(a, "--block-size")) ok = cli_parse_long(CMD, a, v, 1, big, &block);
        else if (!strcmp(a, "--prefix")) ok = cli_parse_long(CMD, a, v, 0, big, &prefix);
        else if (!strcmp(a, "--draft-depth")) ok = cli_parse_long(CMD, a, v, 1, 1024, &depth);
        else if (!strcmp(a, "--accept-rate")) ok = cli_parse_double(CMD, a, v, 0.0, 1.0, &accept);
        else if (!strcmp(a, "--draft-cost")) ok = cli_parse_double(CMD, a, v, 0.0, 100.0, &draft_cost);
        else if (!strcmp(a, "--kv-type")) kv_type = v;
        else return cli_usage_error(CMD, "unknown option '%s'", a);
        if (!ok) return CLI_EXIT_USAGE;
    }

    double dtype_bytes;
    if (!strcmp(kv_type, "f32")) dtype_bytes = 4.0;
    else if (!strcmp(kv_type, "f16")) dtype_bytes = 2.0;
    else if (!strcmp(kv_type, "q8_0")) dtype_bytes = 34.0 / 32.0; /* 2-byte scale + 32 int8 */
    else return cli_usage_error(CMD, "--kv-type expects f32, f16 or q8_0, got '%s'", kv_type);

    if (ctx < 0) return cli_usage_error(CMD, "--ctx N is required");
    if (prefix > ctx)
        return cli_usage_error(CMD, "--prefix %ld is longer than --ctx %ld", prefix, ctx);
    if (depth > 0 && accept < 0)
        return cli_usage_error(CMD, "--draft-depth needs --accept-rate");
    if (accept >= 0 && depth < 0) depth = 4;

    int explicit_n = (layers > 0) + (kv_heads > 0) + (head_dim > 0);
    if (explicit_n && model)
        return cli_usage_error(CMD, "give either -m MODEL or --layers/--kv-heads/--head-dim, not both");
    if (explicit_n && explicit_n != 3)
        return cli_usage_error(CMD, "--layers, --kv-heads and --head-dim go together");

    struct plan_model pm = {.weight_bytes = -1.0};
    if (explicit_n == 3) {
        snprintf(pm.arch, sizeof pm.arch, "(explicit)");
        pm.layers = layers;
        pm.kv_heads = kv_heads;
        pm.head_dim = head_dim;
    } else {
        if (!model) model = cli_default_model();
        int st = read_model(model, &pm);
        if (st != LLMK_OK) return cli_report(CMD, st);
    }

    const double L = (double)pm.layers, H = (double)pm.kv_heads, D = (double)pm.head_dim;
    const double B = (double)batch, T = (double)ctx;
    double per_layer = llmk_kv_cache_memory_per_layer(B, T, H, D, dtype_bytes);
    double total = llmk_kv_cache_total_memory(per_layer, L);
    double per_token = llmk_kv_cache_total_memory(llmk_kv_cache_memory_per_layer(1, 1, H, D, dtype_bytes), L);
    double blocks_seq = llmk_paged_attention_block_count(T, (double)block);
    double blocks_total = blocks_seq * B;
    /* Paged storage rounds each sequence up to whole blocks. */
    double paged_total = blocks_total * L * llmk_kv_bytes(1, (double)block, H, D, dtype_bytes);
    double savings = prefix >= 0 ? llmk_prefix_sharing_savings((double)prefix, B, L, H, D, dtype_bytes) : 0.0;
    double expected = 0.0, speedup = 0.0;
    if (accept >= 0) {
        expected = llmk_speculative_expected_tokens(accept, (double)depth);
        speedup = llmk_draft_model_speedup(expected, 1.0, draft_cost, (double)depth);
    }

    if (json) {
        cJSON *o = cJSON_CreateObject();
        if (!o) return cli_report(CMD, llmk_fail(LLMK_OUT_OF_MEMORY, "plan: JSON"));
        if (model) cJSON_AddStringToObject(o, "model", model);
        cJSON_AddStringToObject(o, "arch", pm.arch);
        cJSON_AddNumberToObject(o, "n_layers", L);
        cJSON_AddNumberToObject(o, "n_kv_heads", H);
        cJSON_AddNumberToObject(o, "head_dim", D);
        cJSON_AddStringToObject(o, "kv_type", kv_type);
        cJSON_AddNumberToObject(o, "kv_dtype_bytes", dtype_bytes);
        cJSON_AddNumberToObject(o, "ctx", T);
        cJSON_AddNumberToObject(o, "batch", B);
        if (pm.weight_bytes >= 0) {
            cJSON_AddNumberToObject(o, "weight_bytes", pm.weight_bytes);
            cJSON_AddNumberToObject(o, "n_tensors", (double)pm.n_tensors);
        }
        cJSON_AddNumberToObject(o, "kv_bytes_per_token", per_token);
        cJSON_AddNumberToObject(o, "kv_bytes_per_layer", per_layer);
        cJSON_AddNumberToObject(o, "kv_bytes_total", total);
        cJSON_AddNumberToObject(o, "block_size", (double)block);
        cJSON_AddNumberToObject(o, "blocks_per_sequence", blocks_seq);
        cJSON_AddNumberToObject(o, "blocks_total", blocks_total);
        cJSON_AddNumberToObject(o, "paged_kv_bytes_total", paged_total);
        if (prefix >= 0) {
            cJSON_AddNumberToObject(o, "prefix_tokens", (double)prefix);
            cJSON_AddNumberToObject(o, "prefix_sharing_savings_bytes", savings);
        }
        if (accept >= 0) {
            cJSON_AddNumberToObject(o, "accept_rate", accept);
            cJSON_AddNumberToObject(o, "draft_depth", (double)depth);
            cJSON_AddNumberToObject(o, "draft_cost", draft_cost);
            cJSON_AddNumberToObject(o, "expected_tokens_per_step", expected);
            cJSON_AddNumberToObject(o, "speculative_speedup", speedup);
        }
        char *s = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!s) return cli_report(CMD, llmk_fail(LLMK_OUT_OF_MEMORY, "plan: JSON"));
        printf("%s\n", s);
        cJSON_free(s);
        return CLI_EXIT_OK;
    }

    if (model) printf("model                        %s (%s)\n", model, pm.arch);
    printf("shape                        %ld layers, %ld KV heads, head_dim %ld\n", pm.layers,
           pm.kv_heads, pm.head_dim);
    printf("KV storage                   %s (%g bytes per value)\n", kv_type, dtype_bytes);
    printf("request                      %ld tokens x %ld sequence%s\n", ctx, batch,
           batch == 1 ? "" : "s");
    if (pm.weight_bytes >= 0) print_bytes("weights", pm.weight_bytes);
    print_bytes("KV per token (all layers)", per_token);
    print_bytes("KV per layer", per_layer);
    print_bytes("KV total", total);
    printf("%-28s %.0f per sequence, %.0f in all (block %ld tokens)\n", "paged blocks", blocks_seq,
           blocks_total, block);
    print_bytes("paged KV total", paged_total);
    if (pm.weight_bytes >= 0) print_bytes("weights + KV", pm.weight_bytes + total);
    if (prefix >= 0) {
        printf("%-28s %ld tokens shared by %ld sequences\n", "prefix sharing", prefix, batch);
        print_bytes("  saved", savings);
    }
    if (accept >= 0) {
        printf("%-28s accept %.3g, depth %ld, draft cost %.3g of a target step\n",
               "speculative decoding", accept, depth, draft_cost);
        printf("%-28s %.4f tokens per step, %.3fx speedup\n", "", expected, speedup);
    }
    return CLI_EXIT_OK;
}
