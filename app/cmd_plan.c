/* llmk plan: memory and speed planning from a model's metadata (or explicit
 * numbers), before anything is loaded. Every figure comes from the formula
 * layer (section 3 of llmk.h); no tensor data is read. */
#include "cli.h"
#include "opts.h"
#include "llmk_formulas.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *CMD = "plan";

static const char USAGE[] =
    "usage: llmk plan [-m MODEL | --layers L --kv-heads H --head-dim D] --ctx N\n"
    "                 [--batch B] [--kv-type f32|f16|q8_0] [--block-size S]\n"
    "                 [--prefix P] [--accept-rate A [--draft-depth K] [--draft-cost C] [--row-cost R]]\n"
    "                 [--json]\n"
    "\n"
    "KV-cache and weight memory for a model before it is loaded, from the GGUF\n"
    "metadata alone (default model when neither -m nor the three numbers are given).\n";

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
    int st = llmk_gguf_open_path(path, &g);
    if (st != LLMK_OK) return st;
    const char *arch = NULL;
    size_t arch_len = 0;
    st = llmk_gguf_get_str(g, "general.architecture", &arch, &arch_len);
    if (st != LLMK_OK) {
        llmk_gguf_close(g);
        return cli_fail(LLMK_BAD_HYPERPARAMETER, "%s: no general.architecture string", path);
    }
    if (arch_len == 0 || arch_len >= sizeof pm->arch || memchr(arch, '\0', arch_len)) {
        llmk_gguf_close(g);
        return cli_fail(LLMK_BAD_HYPERPARAMETER, "%s: general.architecture is empty or too long",
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
        return cli_fail(LLMK_BAD_HYPERPARAMETER, "%s: metadata %s.%s is missing or not an integer",
                         path, pm->arch, missing);
    }
    /* Without an explicit KV head count the model has plain multi-head attention. */
    if (arch_u32(g, pm->arch, "attention.head_count_kv", &kv_heads) != LLMK_OK) kv_heads = heads;
    if (layers == 0 || heads == 0 || kv_heads == 0 || embd == 0) {
        llmk_gguf_close(g);
        return cli_fail(LLMK_BAD_HYPERPARAMETER,
                         "%s: block_count %u, head_count %u, head_count_kv %u, embedding_length %u: "
                         "none may be 0", path, layers, heads, kv_heads, embd);
    }
    if (arch_u32(g, pm->arch, "attention.key_length", &key_len) == LLMK_OK && key_len > 0) {
        pm->head_dim = key_len;
    } else {
        if (embd % heads != 0) {
            llmk_gguf_close(g);
            return cli_fail(LLMK_BAD_HYPERPARAMETER,
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

/* What was asked for: the options. */
struct plan_req {
    const char *model;
    uint32_t kv;
    long ctx, batch, block, prefix, depth, layers, kv_heads, head_dim;
    double accept, draft_cost, row_cost;
    bool json;
};

/* Parses and checks the options; CLI_OPTS_GO, or the exit code. */
static int parse_args(struct plan_req *r, int argc, char **argv) {
    const long big = 1L << 24;
    const struct cli_opt table[] = {
        CLI_OPT_MODEL(&r->model),
        CLI_OPT_CTX(&r->ctx, "tokens per sequence (required)"),
        CLI_LONG("--batch", 0, &r->batch, 1, 1L << 20, "B", "sequences (default 1)"),
        CLI_OPT_KV_TYPE(&r->kv, "KV storage: f32 (4 bytes), f16 (2, default), q8_0 (34/32)"),
        CLI_LONG("--layers", 0, &r->layers, 1, 1L << 16, "L", "layers (instead of -m, with --kv-heads and --head-dim)"),
        CLI_LONG("--kv-heads", 0, &r->kv_heads, 1, 1L << 16, "H", "KV heads per layer"),
        CLI_LONG("--head-dim", 0, &r->head_dim, 1, 1L << 16, "D", "values per head"),
        CLI_LONG("--block-size", 0, &r->block, 1, big, "S", "paged-KV block size in tokens (default 128, the runtime's; others are what-ifs)"),
        CLI_LONG("--prefix", 0, &r->prefix, 0, big, "P", "tokens of a prefix all B sequences share: memory saved"),
        CLI_NUM("--accept-rate", 0, &r->accept, 0.0, 1.0, "A",
                "speculative decoding: per-token acceptance rate in [0, 1]"),
        CLI_LONG("--draft-depth", 0, &r->depth, 1, 1024, "K", "draft tokens per step (default 4 with --accept-rate)"),
        CLI_NUM("--draft-cost", 0, &r->draft_cost, 0.0, 100.0, "C",
                "draft step time as a fraction of a target step (default 0.1)"),
        CLI_NUM("--row-cost", 0, &r->row_cost, 0.0, 100.0, "R",
                "extra time of each verified draft row as a fraction of a target step (default 0; llmk run "
                "--spec prints its measured one)"),
        CLI_FLAG("--json", 0, &r->json, "one JSON object (bytes as numbers) instead of text"),
    };
    const struct cli_opt_section sections[] = {{NULL, table, CLI_LEN(table)}};
    struct cli_cmd spec = {.name = CMD, .usage = USAGE, .sections = sections, .n_sections = CLI_LEN(sections)};
    int rc = cli_opts_parse(&spec, argc, argv);
    if (rc != CLI_OPTS_GO) return rc;
    if (r->ctx == 0) return cli_usage_error(CMD, "--ctx N is required"); /* the row's lower limit is 1 */
    if (r->prefix > r->ctx)
        return cli_usage_error(CMD, "--prefix %ld is longer than --ctx %ld", r->prefix, r->ctx);
    if (r->depth > 0 && r->accept < 0)
        return cli_usage_error(CMD, "--draft-depth needs --accept-rate");
    if (r->accept >= 0 && r->depth < 0) r->depth = 4;
    int explicit_n = (r->layers > 0) + (r->kv_heads > 0) + (r->head_dim > 0);
    if (explicit_n && r->model)
        return cli_usage_error(CMD, "give either -m MODEL or --layers/--kv-heads/--head-dim, not both");
    if (explicit_n && explicit_n != 3)
        return cli_usage_error(CMD, "--layers, --kv-heads and --head-dim go together");
    return CLI_OPTS_GO;
}

/* The figures, every one from the formula layer. */
struct plan_fig {
    double dtype_bytes, per_layer, total, per_token, blocks_seq, blocks_total, paged_total, savings;
    double expected, speedup;
    int32_t best_depth; /* the depth llmk_spec_best_len picks in 1..64 (the runtime's choice) */
};

static void compute(const struct plan_req *r, const struct plan_model *pm, struct plan_fig *f) {
    /* q8_0: a 2-byte scale and 32 int8 per block of 32 values */
    double db = f->dtype_bytes = r->kv == LLMK_TYPE_F32 ? 4.0 : r->kv == LLMK_TYPE_F16 ? 2.0 : 34.0 / 32.0;
    const double L = (double)pm->layers, H = (double)pm->kv_heads, D = (double)pm->head_dim;
    const double B = (double)r->batch, T = (double)r->ctx;
    f->per_layer = llmk_kv_cache_memory_per_layer(B, T, H, D, db);
    f->total = llmk_kv_cache_total_memory(f->per_layer, L);
    f->per_token = llmk_kv_cache_total_memory(llmk_kv_cache_memory_per_layer(1, 1, H, D, db), L);
    f->blocks_seq = llmk_paged_attention_block_count(T, (double)r->block);
    f->blocks_total = f->blocks_seq * B;
    /* Paged storage rounds each sequence up to whole blocks. */
    f->paged_total = f->blocks_total * L * llmk_kv_bytes(1, (double)r->block, H, D, db);
    /* the runtime shares whole blocks only (a partial block is never shared) */
    double shared = r->prefix >= 0 ? (double)(r->prefix / r->block * r->block) : 0.0;
    f->savings = r->prefix >= 0 ? llmk_prefix_sharing_savings(shared, B, L, H, D, db) : 0.0;
    f->expected = f->speedup = 0.0;
    f->best_depth = 0;
    if (r->accept >= 0) {
        f->expected = llmk_speculative_expected_tokens(r->accept, (double)r->depth);
        f->speedup = llmk_spec_predicted_speedup(r->accept, (int32_t)r->depth, r->draft_cost, r->row_cost);
        f->best_depth = llmk_spec_best_len(r->accept, r->draft_cost, r->row_cost, 1, 64);
    }
}

static int print_json(const struct plan_req *r, const struct plan_model *pm, const struct plan_fig *f) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return cli_report(CMD, cli_fail(LLMK_OUT_OF_MEMORY, "plan: JSON"));
    if (r->model) cJSON_AddStringToObject(o, "model", r->model);
    cJSON_AddStringToObject(o, "arch", pm->arch);
    cJSON_AddNumberToObject(o, "n_layers", (double)pm->layers);
    cJSON_AddNumberToObject(o, "n_kv_heads", (double)pm->kv_heads);
    cJSON_AddNumberToObject(o, "head_dim", (double)pm->head_dim);
    cJSON_AddStringToObject(o, "kv_type", llmk_type_name(r->kv));
    cJSON_AddNumberToObject(o, "kv_dtype_bytes", f->dtype_bytes);
    cJSON_AddNumberToObject(o, "ctx", (double)r->ctx);
    cJSON_AddNumberToObject(o, "batch", (double)r->batch);
    if (pm->weight_bytes >= 0) {
        cJSON_AddNumberToObject(o, "weight_bytes", pm->weight_bytes);
        cJSON_AddNumberToObject(o, "n_tensors", (double)pm->n_tensors);
    }
    cJSON_AddNumberToObject(o, "kv_bytes_per_token", f->per_token);
    cJSON_AddNumberToObject(o, "kv_bytes_per_layer", f->per_layer);
    cJSON_AddNumberToObject(o, "kv_bytes_total", f->total);
    cJSON_AddNumberToObject(o, "block_size", (double)r->block);
    cJSON_AddNumberToObject(o, "blocks_per_sequence", f->blocks_seq);
    cJSON_AddNumberToObject(o, "blocks_total", f->blocks_total);
    cJSON_AddNumberToObject(o, "paged_kv_bytes_total", f->paged_total);
    if (r->prefix >= 0) {
        cJSON_AddNumberToObject(o, "prefix_tokens", (double)r->prefix);
        cJSON_AddNumberToObject(o, "prefix_sharing_savings_bytes", f->savings);
    }
    if (r->accept >= 0) {
        cJSON_AddNumberToObject(o, "accept_rate", r->accept);
        cJSON_AddNumberToObject(o, "draft_depth", (double)r->depth);
        cJSON_AddNumberToObject(o, "draft_cost", r->draft_cost);
        cJSON_AddNumberToObject(o, "expected_tokens_per_step", f->expected);
        cJSON_AddNumberToObject(o, "row_cost", r->row_cost);
        cJSON_AddNumberToObject(o, "speculative_speedup", f->speedup);
        cJSON_AddNumberToObject(o, "best_draft_depth", f->best_depth);
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) return cli_report(CMD, cli_fail(LLMK_OUT_OF_MEMORY, "plan: JSON"));
    printf("%s\n", s);
    cJSON_free(s);
    return CLI_EXIT_OK;
}

static void print_text(const struct plan_req *r, const struct plan_model *pm, const struct plan_fig *f) {
    if (r->model) printf("model                        %s (%s)\n", r->model, pm->arch);
    printf("shape                        %ld layers, %ld KV heads, head_dim %ld\n", pm->layers,
           pm->kv_heads, pm->head_dim);
    printf("KV storage                   %s (%g bytes per value)\n", llmk_type_name(r->kv), f->dtype_bytes);
    printf("request                      %ld tokens x %ld sequence%s\n", r->ctx, r->batch,
           r->batch == 1 ? "" : "s");
    if (pm->weight_bytes >= 0) print_bytes("weights", pm->weight_bytes);
    print_bytes("KV per token (all layers)", f->per_token);
    print_bytes("KV per layer", f->per_layer);
    print_bytes("KV total", f->total);
    printf("%-28s %.0f per sequence, %.0f in all (block %ld tokens%s)\n", "paged blocks", f->blocks_seq,
           f->blocks_total, r->block, r->block == LLMK_KV_BLOCK ? ", the runtime's" : ", a what-if: llmk uses 128");
    print_bytes("paged KV total", f->paged_total);
    if (r->block == LLMK_KV_BLOCK)
        printf("%-28s the pool llmk_context and llmk batch allocate for %ld sequences of %ld tokens\n", "", r->batch,
               r->ctx);
    if (pm->weight_bytes >= 0) print_bytes("weights + KV", pm->weight_bytes + f->total);
    if (r->prefix >= 0) {
        printf("%-28s %ld tokens shared by %ld sequences: %ld in whole blocks\n", "prefix sharing", r->prefix,
               r->batch, r->prefix / r->block * r->block);
        print_bytes("  saved", f->savings);
        printf("%-28s assumes the prefix cache: sequences started with llmk_context_seq_start (llmk batch does)\n",
               "");
    }
    if (r->accept >= 0) {
        printf("%-28s accept %.3g, depth %ld, draft cost %.3g and row cost %.3g of a target step\n",
               "speculative decoding", r->accept, r->depth, r->draft_cost, r->row_cost);
        printf("%-28s %.4f tokens per step, %.3fx speedup\n", "", f->expected, f->speedup);
        printf("%-28s best depth %d (the length llmk run --spec drafts at this acceptance and these costs)\n", "",
               f->best_depth);
    }
}

int cmd_plan(int argc, char **argv) {
    struct plan_req r = {.kv = LLMK_TYPE_F16, .batch = 1, .block = LLMK_KV_BLOCK, .prefix = -1, .depth = -1,
                         .layers = -1, .kv_heads = -1, .head_dim = -1, .accept = -1.0, .draft_cost = 0.1};
    int rc = parse_args(&r, argc, argv);
    if (rc != CLI_OPTS_GO) return rc;
    struct plan_model pm = {.weight_bytes = -1.0};
    if (r.layers > 0) { /* parse_args saw all three numbers */
        snprintf(pm.arch, sizeof pm.arch, "(explicit)");
        pm.layers = r.layers;
        pm.kv_heads = r.kv_heads;
        pm.head_dim = r.head_dim;
    } else {
        if (!r.model) r.model = cli_default_model();
        int st = read_model(r.model, &pm);
        if (st != LLMK_OK) return cli_report(CMD, st);
    }
    struct plan_fig f;
    compute(&r, &pm, &f);
    if (r.json) return print_json(&r, &pm, &f);
    print_text(&r, &pm, &f);
    return CLI_EXIT_OK;
}
