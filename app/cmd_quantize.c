/* llmk quantize: re-quantize a GGUF file into another codec (or dequantize it
 * to f32/f16/bf16). Metadata (tokenizer included) is copied; general.file_type
 * is set to the result's type. Per-tensor policy in choose_type() and
 * docs/codecs.md. */
#include "cli.h"
#include "opts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *CMD = "quantize";

static const char USAGE[] =
    "usage: llmk quantize IN.gguf OUT.gguf TYPE [--pure] [--tensor-type NAME=TYPE]...\n"
    "\n"
    "TYPE (case-insensitive) is a codec (f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k\n"
    "q3_k q4_k q5_k q6_k iq4_nl iq4_xs mxfp4) or a preset: q2_k, q3_k_s, q3_k_m,\n"
    "q4_k_s, q4_k_m, q5_k_s, q5_k_m, q6_k, q8_0 ...\n"
    "Defaults (without --pure):\n"
    "  - 1-D tensors (norms, biases) stay f32;\n"
    "  - *_M presets: token_embd/output get q6_k, attn_v and ffn_down one K-step\n"
    "    higher (q3_k->q4_k, q4_k->q5_k, q5_k->q6_k); *_S: output gets q6_k;\n"
    "  - rows not whole blocks of the chosen codec fall back: q2_k/q3_k->q4_0,\n"
    "    q4_k->q5_0, q5_k->q5_1, q6_k->q8_0, iq4_xs->iq4_nl, then f16.\n";

/* llama_ftype numbers written to general.file_type (format facts). */
static const struct preset {
    const char *name;
    uint32_t type;
    int mix; /* 0 none, 1 _S, 2 _M */
    uint32_t ftype;
} presets[] = {
    {"f32", LLMK_TYPE_F32, 0, 0},      {"f16", LLMK_TYPE_F16, 0, 1},      {"bf16", LLMK_TYPE_BF16, 0, 32},
    {"q4_0", LLMK_TYPE_Q4_0, 0, 2},    {"q4_1", LLMK_TYPE_Q4_1, 0, 3},    {"q8_0", LLMK_TYPE_Q8_0, 0, 7},
    {"q5_0", LLMK_TYPE_Q5_0, 0, 8},    {"q5_1", LLMK_TYPE_Q5_1, 0, 9},    {"q2_k", LLMK_TYPE_Q2_K, 0, 10},
    {"q3_k", LLMK_TYPE_Q3_K, 2, 12},   {"q3_k_s", LLMK_TYPE_Q3_K, 1, 11}, {"q3_k_m", LLMK_TYPE_Q3_K, 2, 12},
    {"q4_k", LLMK_TYPE_Q4_K, 2, 15},   {"q4_k_s", LLMK_TYPE_Q4_K, 1, 14}, {"q4_k_m", LLMK_TYPE_Q4_K, 2, 15},
    {"q5_k", LLMK_TYPE_Q5_K, 2, 17},   {"q5_k_s", LLMK_TYPE_Q5_K, 1, 16}, {"q5_k_m", LLMK_TYPE_Q5_K, 2, 17},
    {"q6_k", LLMK_TYPE_Q6_K, 0, 18},   {"iq4_nl", LLMK_TYPE_IQ4_NL, 0, 25}, {"iq4_xs", LLMK_TYPE_IQ4_XS, 0, 30},
    {"mxfp4", LLMK_TYPE_MXFP4, 0, 38},
};

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

static uint32_t bump(uint32_t t) {
    switch (t) {
    case LLMK_TYPE_Q2_K: return LLMK_TYPE_Q3_K;
    case LLMK_TYPE_Q3_K: return LLMK_TYPE_Q4_K;
    case LLMK_TYPE_Q4_K: return LLMK_TYPE_Q5_K;
    case LLMK_TYPE_Q5_K: return LLMK_TYPE_Q6_K;
    default: return t;
    }
}

/* A codec whose blocks tile a row of ne0 elements: t itself or its fallbacks. */
static uint32_t fit_rows(uint32_t t, uint64_t ne0) {
    while (ne0 % llmk_type_block_elems(t) != 0) t = fallback(t);
    return t;
}

struct override {
    const char *pat; /* pat[0 .. len): the NAME of --tensor-type NAME=TYPE */
    size_t len;
    uint32_t type;
};

/* strstr for a pattern that is not NUL-terminated. */
static bool contains(const char *s, const char *pat, size_t len) {
    for (; *s; s++)
        if (!strncmp(s, pat, len)) return true;
    return len == 0;
}

static int is_codec(uint32_t t) {
    size_t n;
    const char *const *names = llmk_codecs(&n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], llmk_type_name(t))) return t != LLMK_TYPE_Q8_1 && t != LLMK_TYPE_Q8_K;
    return 0;
}

static uint32_t choose_type(const llmk_tensor_info *ti, const struct preset *p, int pure,
                            const struct override *ov, int n_ov) {
    for (int i = 0; i < n_ov; i++)
        if (contains(ti->name, ov[i].pat, ov[i].len)) return fit_rows(ov[i].type, ti->ne[0]);
    if (ti->n_dims < 2) return LLMK_TYPE_F32;
    if (pure) return ti->ne[0] % llmk_type_block_elems(p->type) ? LLMK_TYPE_F16 : p->type;
    uint32_t t = p->type;
    int is_embd = strstr(ti->name, "token_embd") != NULL, is_out = strcmp(ti->name, "output.weight") == 0;
    if (p->mix == 2 && (is_embd || is_out)) t = LLMK_TYPE_Q6_K;
    if (p->mix == 1 && is_out) t = LLMK_TYPE_Q6_K;
    if (p->mix == 2 && (strstr(ti->name, "attn_v.weight") || strstr(ti->name, "ffn_down.weight"))) t = bump(t);
    return fit_rows(t, ti->ne[0]);
}

/* Convert rows [lo, hi) of one tensor, on the pool (dst NULL: check only).
 * Every source row must be finite, and so must the converted row read back:
 * a value past the target's range (1e30 into a codec with f16 scales) would
 * otherwise become Inf. Each worker reports its own first failure; the
 * lowest row among them is reported, so the message does not depend on timing. */
struct conv_fail {
    int status;
    int64_t row, col; /* col >= k: column col - k of the converted row */
};
struct conv_job {
    const llmk_tensor_info *ti;
    uint32_t dst_type;
    void *dst;
    uint64_t src_rb, dst_rb, rows;
    struct conv_fail *fails; /* [n workers] */
};

static int64_t first_non_finite(const float *x, int64_t k) {
    for (int64_t i = 0; i < k; i++)
        if (!isfinite(x[i])) return i;
    return -1;
}

/* The source column that overflowed the block holding output column col:
 * the block's largest magnitude (every value of the block shares its scale). */
static int64_t largest_in_block(const float *x, int64_t k, int64_t col, int64_t block) {
    int64_t b0 = block > 0 ? col / block * block : 0, b1 = block > 0 && b0 + block < k ? b0 + block : k, best = b0;
    for (int64_t i = b0; i < b1; i++)
        if (fabsf(x[i]) > fabsf(x[best])) best = i;
    return best;
}

static void conv_worker(void *ctx, int ith, int nth) {
    struct conv_job *j = ctx;
    struct conv_fail *f = &j->fails[ith];
    int64_t lo, hi, k = (int64_t)j->ti->ne[0];
    cli_split_range((int64_t)j->rows, ith, nth, &lo, &hi);
    float *buf = malloc(2 * (size_t)k * sizeof *buf);
    if (!buf) {
        *f = (struct conv_fail){LLMK_OUT_OF_MEMORY, lo, -1};
        return;
    }
    for (int64_t r = lo; r < hi; r++) {
        char *out = j->dst ? (char *)j->dst + (size_t)(r * (int64_t)j->dst_rb) : NULL;
        int st = llmk_dequantize_row(j->ti->type, (const char *)j->ti->data + (size_t)(r * (int64_t)j->src_rb), buf, k);
        if (!out && st == LLMK_UNSUPPORTED) break; /* copied as is: a type with no numbers to check */
        int64_t col = st == LLMK_OK ? first_non_finite(buf, k) : -1;
        if (out && st == LLMK_OK && col < 0) st = llmk_quantize_row(j->dst_type, buf, out, k);
        if (out && st == LLMK_OK && col < 0) st = llmk_dequantize_row(j->dst_type, out, buf + k, k);
        if (out && st == LLMK_OK && col < 0 && (col = first_non_finite(buf + k, k)) >= 0)
            col = k + largest_in_block(buf, k, col, llmk_type_block_elems(j->dst_type));
        if (st != LLMK_OK || col >= 0) {
            *f = (struct conv_fail){st != LLMK_OK ? st : LLMK_NAN_INPUT, r, col};
            break;
        }
    }
    free(buf);
}

/* Run one tensor's conversion (or check) and name the first failure. */
static int convert(llmk_pool *pool, struct conv_job *j, uint32_t t) {
    int nth = llmk_pool_size(pool);
    struct conv_fail *fails = calloc((size_t)nth, sizeof *fails), *f = NULL;
    if (!fails) return cli_fail(LLMK_OUT_OF_MEMORY, "quantize: %d worker results", nth);
    for (int i = 0; i < nth; i++) fails[i].status = LLMK_OK;
    j->fails = fails;
    llmk_pool_run(pool, conv_worker, j);
    for (int i = 0; i < nth; i++)
        if (fails[i].status != LLMK_OK && (!f || fails[i].row < f->row)) f = &fails[i];
    const llmk_tensor_info *ti = j->ti;
    int64_t k = (int64_t)ti->ne[0];
    int st = LLMK_OK;
    if (f && f->status == LLMK_NAN_INPUT && f->col < k)
        st = cli_fail(f->status, "quantize: tensor %s row %lld column %lld is not finite (NaN or Inf in the input)",
                       ti->name, (long long)f->row, (long long)f->col);
    else if (f && f->status == LLMK_NAN_INPUT)
        st = cli_fail(f->status, "quantize: tensor %s row %lld column %lld: the value is too large for %s "
                       "(its block's scale would become Inf)", ti->name, (long long)f->row, (long long)(f->col - k),
                       llmk_type_name(t));
    else if (f)
        st = cli_fail(f->status, "quantize: tensor %s row %lld: %s -> %s failed", ti->name, (long long)f->row,
                       llmk_type_name(ti->type), llmk_type_name(t));
    free(fails);
    return st;
}

/* --tensor-type NAME=TYPE, collected in order (the first match wins). */
struct overrides {
    struct override ov[64];
    int n;
};

static int opt_tensor_type(const char *cmd, const char *flag, const char *v, void *ctx) {
    struct overrides *o = ctx;
    const char *eq = strrchr(v, '=');
    if (!eq || eq == v || !eq[1]) return cli_usage_error(cmd, "%s '%s': expected NAME=TYPE", flag, v), 0;
    if (o->n == (int)CLI_LEN(o->ov)) return cli_usage_error(cmd, "more than %d %s", o->n, flag), 0;
    uint32_t t;
    if (llmk_type_from_name(eq + 1, &t) != LLMK_OK || !is_codec(t))
        return cli_usage_error(cmd, "%s '%s': '%s' is not a codec llmk writes", flag, v, eq + 1), 0;
    /* the name part, without copying: it ends where the '=' is */
    o->ov[o->n++] = (struct override){v, (size_t)(eq - v), t};
    return 1;
}

int cmd_quantize(int argc, char **argv) {
    const char *pos[3];
    bool pure = false;
    struct overrides ovs = {.n = 0};
    const struct cli_opt table[] = {
        CLI_FLAG("--pure", 0, &pure, "every tensor of 2+ dims gets TYPE (f16 if its rows cannot hold TYPE's "
                 "blocks); 1-D stay f32"),
        CLI_REPEAT("--tensor-type", 0, opt_tensor_type, &ovs, "NAME=T",
                   "tensors whose name contains NAME get codec T (the first match wins)"),
    };
    const struct cli_opt_section sections[] = {{NULL, table, CLI_LEN(table)}};
    struct cli_cmd spec = {.name = CMD, .usage = USAGE, .sections = sections, .n_sections = CLI_LEN(sections),
                           .pos = pos, .max_pos = 3, .pos_name = "IN.gguf OUT.gguf TYPE"};
    int prc = cli_opts_parse(&spec, argc, argv);
    if (prc != CLI_OPTS_GO) return prc;
    int npos = spec.n_pos, n_ov = ovs.n;
    const struct override *ov = ovs.ov;
    int rc = CLI_EXIT_OK;
    llmk_gguf *g = NULL;
    llmk_gguf_writer *wr = NULL;
    llmk_pool *pool = NULL;
    void **bufs = NULL;
    size_t nt = 0;
    if (npos != 3) {
        rc = cli_usage_error(CMD, "expected IN.gguf OUT.gguf TYPE");
        goto out;
    }
    const struct preset *p = NULL;
    for (size_t i = 0; i < CLI_LEN(presets); i++)
        if (!strcasecmp(presets[i].name, pos[2])) p = &presets[i];
    if (!p) {
        rc = cli_usage_error(CMD, "unknown type or preset '%s'", pos[2]);
        goto out;
    }
    /* Before reading anything: an output that is the input would be replaced
     * while mapped, and the user surely meant another path. */
    int st = llmk_output_check(pos[1], &pos[0], 1);
    if (st == LLMK_OK) st = llmk_gguf_open(pos[0], &g);
    if (st == LLMK_OK) st = llmk_gguf_writer_init(&wr);
    if (st == LLMK_OK) st = llmk_pool_create(0, &pool);
    if (st != LLMK_OK) goto fail;
    for (size_t i = 0; i < llmk_gguf_n_kv(g) && st == LLMK_OK; i++) {
        const char *key = llmk_gguf_kv_key(g, i);
        if (strcmp(key, "general.file_type") && strcmp(key, "general.quantization_version"))
            st = llmk_gguf_writer_copy_kv(wr, g, i);
    }
    if (st == LLMK_OK) st = llmk_gguf_writer_set_u32(wr, "general.file_type", p->ftype);
    if (st == LLMK_OK && llmk_type_block_elems(p->type) > 1)
        st = llmk_gguf_writer_set_u32(wr, "general.quantization_version", 2);
    if (st != LLMK_OK) goto fail;
    nt = llmk_gguf_n_tensors(g);
    bufs = calloc(nt ? nt : 1, sizeof *bufs);
    if (!bufs) {
        st = cli_fail(LLMK_OUT_OF_MEMORY, "quantize: %zu tensor pointers", nt);
        goto fail;
    }
    uint64_t in_bytes = 0, out_bytes = 0;
    for (size_t i = 0; i < nt; i++) {
        const llmk_tensor_info *ti = llmk_gguf_tensor(g, i);
        uint32_t t = choose_type(ti, p, pure, ov, n_ov);
        uint64_t src_rb, dst_rb, bytes;
        st = llmk_row_bytes(ti->type, ti->ne[0], &src_rb);
        if (st == LLMK_OK) st = llmk_row_bytes(t, ti->ne[0], &dst_rb);
        if (st != LLMK_OK) goto fail;
        uint64_t rows = ti->n_elements / ti->ne[0];
        if (!cli_mul_u64(dst_rb, rows, &bytes) || bytes > SIZE_MAX) {
            st = cli_fail(LLMK_DIMENSION_OVERFLOW, "quantize: tensor %s output size overflows", ti->name);
            goto fail;
        }
        if (t != ti->type && !(bufs[i] = malloc(bytes ? (size_t)bytes : 1))) {
            st = cli_fail(LLMK_OUT_OF_MEMORY, "quantize: %llu bytes for tensor %s", (unsigned long long)bytes, ti->name);
            goto fail;
        }
        /* A tensor kept in its type is still checked: the output must not carry NaN on. */
        struct conv_job job = {ti, t, bufs[i], src_rb, dst_rb, rows, NULL};
        if ((st = convert(pool, &job, t)) != LLMK_OK) goto fail;
        const void *data = bufs[i] ? bufs[i] : ti->data;
        st = llmk_gguf_writer_add_tensor(wr, ti->name, t, ti->n_dims, ti->ne, data, bytes);
        if (st != LLMK_OK) goto fail;
        in_bytes += ti->n_bytes, out_bytes += bytes;
        printf("%-40s %-7s -> %-7s\n", ti->name, llmk_type_name(ti->type), llmk_type_name(t));
    }
    llmk_outfile *of;
    if ((st = cli_outfile_open(pos[1], &pos[0], 1, &of)) != LLMK_OK) goto fail;
    if ((st = llmk_gguf_writer_write_stream(wr, llmk_outfile_stream(of), pos[1])) != LLMK_OK) {
        cli_outfile_discard(of); /* the temporary file only: OUT is as it was */
        goto fail;
    }
    if ((st = cli_outfile_commit(of)) != LLMK_OK) goto fail;
    printf("%s: %zu tensors, %.2f MiB -> %.2f MiB (%s)\n", pos[1], nt, (double)in_bytes / 1048576.0,
           (double)out_bytes / 1048576.0, p->name);
    goto out;
fail:
    rc = cli_report(CMD, st);
out:
    if (bufs)
        for (size_t i = 0; i < nt; i++) free(bufs[i]);
    free(bufs);
    llmk_pool_free(pool);
    llmk_gguf_writer_free(wr);
    llmk_gguf_close(g);
    return rc;
}
