/* llmk quantize: re-quantize a GGUF file into another codec (or dequantize it
 * to f32/f16/bf16). Metadata (tokenizer included) is copied; general.file_type
 * is set to the result's type. Per-tensor policy in choose_type() and
 * docs/codecs.md. */
#include "cli.h"
#include "opts.h"
#include "progress.h"
#include "quant_policy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *CMD = "quantize";

static const char USAGE[] =
    "usage: llmk quantize IN.gguf OUT.gguf TYPE [--pure] [--tensor-type NAME=TYPE]... [--allow-requantize] [-v]\n"
    "\n"
    "TYPE (case-insensitive) is a codec (f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k\n"
    "q3_k q4_k q5_k q6_k iq4_nl iq4_xs mxfp4 nvfp4) or a preset: q2_k, q3_k_s, q3_k_m,\n"
    "q3_k_l, q4_k_s, q4_k_m, q5_k_s, q5_k_m, q6_k, q8_0 ...\n"
    "Without --pure, each tensor gets the type llama-quantize gives it for the\n"
    "same preset: 1-D tensors stay f32; the output (or token_embd when the model\n"
    "ties them) gets q6_k; the presets give attn_v, attn_output and ffn_down more\n"
    "bits in some layers; rows that are not whole blocks fall back (q2_k/q3_k->\n"
    "q4_0, q4_k->q5_0, q5_k->q5_1, q6_k->q8_0, iq4_xs->iq4_nl, then f16).\n"
    "A quantized input is re-quantized only with --allow-requantize (it compounds\n"
    "the error); f32, f16 and bf16 outputs need no flag.\n"
    "An MoE router (ffn_gate_inp) keeps its type, as llama-quantize keeps it.\n"
    "On a terminal a progress line on stderr names the tensor being converted.\n";

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

static uint32_t choose_type(const llmk_tensor_info *ti, struct quant_policy *q, int pure, const struct override *ov,
                            int n_ov) {
    /* an MoE router stays as it is, overrides and --pure included: llama-quantize never quantizes it (its
     * logits pick the experts, and it is small) */
    if (strstr(ti->name, "ffn_gate_inp.weight")) return ti->type;
    for (int i = 0; i < n_ov; i++)
        if (contains(ti->name, ov[i].pat, ov[i].len)) return quant_fit_rows(ov[i].type, ti->ne[0]);
    if (ti->n_dims < 2) return LLMK_TYPE_F32;
    if (pure) return ti->ne[0] % llmk_type_block_elems(q->p->type) ? LLMK_TYPE_F16 : q->p->type;
    return quant_policy_choose(q, ti);
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
    float scale;             /* the tensor scale its rows are quantized under (llmk_quantize_row_scaled) */
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
        if (out && st == LLMK_OK && col < 0) st = llmk_quantize_row_scaled(j->dst_type, buf, out, k, j->scale);
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

/* Every tensor's type, in file order (the presets' counters run in that
 * order), before anything is converted: a quantized input is refused here,
 * naming its first quantized tensor, unless requant. */
static int choose_all(const llmk_gguf *g, const struct quant_preset *p, bool pure, bool requant,
                      const struct override *ov, int n_ov, uint32_t *types) {
    struct quant_policy q;
    quant_policy_init(&q, p, g);
    for (size_t i = 0; i < llmk_gguf_n_tensors(g); i++) {
        const llmk_tensor_info *ti = llmk_gguf_tensor(g, i);
        types[i] = choose_type(ti, &q, pure, ov, n_ov);
        bool from_q = llmk_type_block_elems(ti->type) > 1, to_q = llmk_type_block_elems(types[i]) > 1;
        if (from_q && to_q && types[i] != ti->type && !requant)
            return cli_fail(LLMK_INVALID_ARGUMENT,
                            "quantize: tensor %s is already %s: quantizing it again to %s compounds the error; "
                            "start from an f32/f16/bf16 file, or pass --allow-requantize",
                            ti->name, llmk_type_name(ti->type), llmk_type_name(types[i]));
    }
    return LLMK_OK;
}

/* One line per output type: tensors and bytes (instead of a line per tensor). */
static void print_summary(const llmk_gguf *g, const uint32_t *types, const uint64_t *bytes) {
    uint64_t n[LLMK_TYPE_COUNT_] = {0}, b[LLMK_TYPE_COUNT_] = {0};
    for (size_t i = 0; i < llmk_gguf_n_tensors(g); i++)
        if (types[i] < LLMK_TYPE_COUNT_) n[types[i]]++, b[types[i]] += bytes[i];
    printf("%-8s %8s %10s\n", "type", "tensors", "MiB");
    for (uint32_t t = 0; t < LLMK_TYPE_COUNT_; t++)
        if (n[t]) printf("%-8s %8llu %10.2f\n", llmk_type_name(t), (unsigned long long)n[t], (double)b[t] / 1048576.0);
}

/* --dry-run: the choices and the sizes they would have, nothing written. */
static void dry_run(const llmk_gguf *g, const uint32_t *types, bool verbose) {
    size_t nt = llmk_gguf_n_tensors(g);
    uint64_t *b = calloc(nt ? nt : 1, sizeof *b), in = 0, out = 0;
    for (size_t i = 0; i < nt; i++) {
        const llmk_tensor_info *ti = llmk_gguf_tensor(g, i);
        uint64_t rb = 0;
        if (llmk_row_bytes(types[i], ti->ne[0], &rb) == LLMK_OK && b) b[i] = rb * (ti->n_elements / ti->ne[0]);
        in += ti->n_bytes, out += b ? b[i] : 0;
        if (verbose) printf("%-40s %-7s -> %-7s\n", ti->name, llmk_type_name(ti->type), llmk_type_name(types[i]));
    }
    if (b) print_summary(g, types, b);
    printf("dry run: %zu tensors, %.2f MiB -> %.2f MiB; nothing written\n", nt, (double)in / 1048576.0,
           (double)out / 1048576.0);
    free(b);
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

/* The conversion's state, shared by the loop and the command. */
struct qrun {
    const llmk_gguf *g;
    llmk_gguf_writer *wr;
    llmk_pool *pool;
    void **bufs;      /* [nt]: converted data (NULL: kept as is) */
    uint32_t *types;  /* [nt]: each tensor's output type */
    uint64_t *out_b;  /* [nt]: its output bytes */
    float *scales;    /* [nt]: its tensor scale (1: none written) */
    size_t nt;
    uint64_t in_bytes, out_bytes;
    bool verbose;
    struct cli_progress prog;
};

/* The scale a tensor converted to type t is quantized under: t's
 * llmk_tensor_scale of the tensor's largest magnitude (a first pass over
 * its rows; 1 for every type but NVFP4). */
static int tensor_scale(const llmk_tensor_info *ti, uint32_t t, uint64_t src_rb, uint64_t rows, float *scale) {
    *scale = 1.0f;
    if (llmk_tensor_scale(t, 1.0f) == 1.0f) return LLMK_OK; /* t takes none */
    int64_t k = (int64_t)ti->ne[0];
    float *buf = malloc((size_t)k * sizeof *buf), amax = 0;
    if (!buf) return cli_fail(LLMK_OUT_OF_MEMORY, "quantize: a row of %s", ti->name);
    int st = LLMK_OK;
    for (uint64_t r = 0; r < rows && st == LLMK_OK; r++) {
        st = llmk_dequantize_row(ti->type, (const char *)ti->data + r * src_rb, buf, k);
        for (int64_t c = 0; st == LLMK_OK && c < k; c++)
            if (fabsf(buf[c]) > amax) amax = fabsf(buf[c]); /* a NaN is named by the conversion after */
    }
    free(buf);
    if (st == LLMK_OK) *scale = llmk_tensor_scale(t, amax);
    return st;
}

/* Converts tensor i (or checks it when it keeps its type) and hands it to the writer. */
static int convert_one(struct qrun *q, size_t i) {
    const llmk_tensor_info *ti = llmk_gguf_tensor(q->g, i);
    uint32_t t = q->types[i];
    uint64_t src_rb, dst_rb, bytes;
    int st = llmk_row_bytes(ti->type, ti->ne[0], &src_rb);
    if (st == LLMK_OK) st = llmk_row_bytes(t, ti->ne[0], &dst_rb);
    if (st != LLMK_OK) return st;
    uint64_t rows = ti->n_elements / ti->ne[0];
    if (!cli_mul_u64(dst_rb, rows, &bytes) || bytes > SIZE_MAX)
        return cli_fail(LLMK_DIMENSION_OVERFLOW, "quantize: tensor %s output size overflows", ti->name);
    if (t != ti->type && !(q->bufs[i] = malloc(bytes ? (size_t)bytes : 1)))
        return cli_fail(LLMK_OUT_OF_MEMORY, "quantize: %llu bytes for tensor %s", (unsigned long long)bytes, ti->name);
    q->scales[i] = 1.0f;
    if (t != ti->type && llmk_weight_takes_scale(ti->name) && (st = tensor_scale(ti, t, src_rb, rows, &q->scales[i])) != LLMK_OK)
        return st;
    /* A tensor kept in its type is still checked: the output must not carry NaN on. */
    struct conv_job job = {ti, t, q->bufs[i], src_rb, dst_rb, rows, q->scales[i], NULL};
    if ((st = convert(q->pool, &job, t)) != LLMK_OK) return st;
    const void *data = q->bufs[i] ? q->bufs[i] : ti->data;
    if ((st = llmk_gguf_writer_add_tensor(q->wr, ti->name, t, ti->n_dims, ti->ne, data, bytes)) != LLMK_OK) return st;
    if (q->scales[i] != 1.0f) { /* X.weight's scale as X.scale, where llama.cpp looks for it */
        char name[256];
        const uint64_t one = 1;
        snprintf(name, sizeof name, "%.*s.scale", (int)(strlen(ti->name) - strlen(".weight")), ti->name);
        if (llmk_gguf_find_tensor(q->g, name)) /* the input's, which the new blocks would not be under */
            return cli_fail(LLMK_UNSUPPORTED_FEATURE, "quantize: tensor %s already has a scale %s; requantizing it "
                            "to %s under a new one is not supported", ti->name, name, llmk_type_name(t));
        if ((st = llmk_gguf_writer_add_tensor(q->wr, name, LLMK_TYPE_F32, 1, &one, &q->scales[i], sizeof(float))) != LLMK_OK)
            return st;
    }
    q->in_bytes += ti->n_bytes, q->out_bytes += bytes, q->out_b[i] = bytes;
    return LLMK_OK;
}

/* Every tensor in file order; the progress line names the one being
 * converted, as "[ 57/272] blk.6.ffn_up.weight  f16 -> q4_K". */
static int convert_all(struct qrun *q) {
    int digits = snprintf(NULL, 0, "%zu", q->nt);
    for (size_t i = 0; i < q->nt; i++) {
        const llmk_tensor_info *ti = llmk_gguf_tensor(q->g, i);
        cli_progress_show(&q->prog, "[%*zu/%zu] %s  %s -> %s", digits, i + 1, q->nt, ti->name,
                          llmk_type_name(ti->type), llmk_type_name(q->types[i]));
        int st = convert_one(q, i);
        if (st != LLMK_OK) return st;
        if (q->verbose) {
            cli_progress_clear(&q->prog); /* the line is redrawn below the tensor's */
            printf("%-40s %-7s -> %-7s\n", ti->name, llmk_type_name(ti->type), llmk_type_name(q->types[i]));
        }
    }
    return LLMK_OK;
}

/* The totals once written (not with --log-disable); with -v, the times. */
static void print_done(const struct qrun *q, const char *out, const char *preset, bool quiet, double t_conv,
                       double t_write) {
    if (!quiet) {
        print_summary(q->g, q->types, q->out_b);
        printf("%s: %zu tensors, %.2f MiB -> %.2f MiB (%s)\n", out, q->nt, (double)q->in_bytes / 1048576.0,
               (double)q->out_bytes / 1048576.0, preset);
    }
    if (q->verbose)
        fprintf(stderr, "llmk quantize: converted in %.2f s on %d threads, written in %.2f s\n", t_conv,
                llmk_pool_size(q->pool), t_write);
}

int cmd_quantize(int argc, char **argv) {
    const char *pos[3];
    bool pure = false, requant = false, verbose = false, dry = false, quiet = false;
    struct cli_progress_flags pf = {false, false};
    struct overrides ovs = {.n = 0};
    const struct cli_opt table[] = {
        CLI_FLAG("--pure", 0, &pure, "every tensor of 2+ dims gets TYPE (f16 if its rows cannot hold TYPE's "
                 "blocks); 1-D stay f32"),
        CLI_FLAG("--allow-requantize", 0, &requant, "quantize tensors that are already quantized (as llama-quantize)"),
        CLI_OPT_VERBOSE(&verbose, "one line per tensor before the summary; the times on stderr"),
        CLI_OPT_LOG_DISABLE(&quiet, "no summary table or totals line, and no progress (errors still)"),
        CLI_OPT_PROGRESS(&pf),
        CLI_FLAG("--dry-run", 0, &dry, "choose every tensor's type and print them (with -v) and the summary; "
                 "convert and write nothing"),
        CLI_REPEAT("--tensor-type", 0, opt_tensor_type, &ovs, "NAME=T",
                   "tensors whose name contains NAME get codec T (the first match wins)"),
    };
    const struct cli_opt_section sections[] = {{NULL, table, CLI_LEN(table)}};
    struct cli_cmd spec = {.name = CMD, .usage = USAGE, .sections = sections, .n_sections = CLI_LEN(sections),
                           .pos = pos, .max_pos = 3, .pos_name = "IN.gguf OUT.gguf TYPE"};
    int prc = cli_opts_parse(&spec, argc, argv);
    if (prc != CLI_OPTS_GO) return prc;
    verbose = verbose && !quiet; /* --log-disable wins, as in every command */
    int rc = CLI_EXIT_OK;
    llmk_gguf *g = NULL;
    struct qrun q = {.verbose = verbose};
    if (spec.n_pos != 3) return cli_usage_error(CMD, "expected IN.gguf OUT.gguf TYPE");
    const struct quant_preset *p = quant_preset_find(pos[2]);
    if (!p) return cli_usage_error(CMD, "unknown type or preset '%s'", pos[2]);
    /* Before reading anything: an output that is the input would be replaced
     * while mapped, and the user surely meant another path. */
    int st = llmk_output_check(pos[1], &pos[0], 1);
    if (st == LLMK_OK) st = llmk_gguf_open_path(pos[0], &g);
    if (st == LLMK_OK) st = llmk_gguf_writer_init(&q.wr);
    if (st == LLMK_OK) st = llmk_pool_create(0, &q.pool);
    if (st != LLMK_OK) goto fail;
    q.g = g;
    for (size_t i = 0; i < llmk_gguf_n_kv(g) && st == LLMK_OK; i++) {
        const char *key = llmk_gguf_kv_key(g, i);
        if (strcmp(key, "general.file_type") && strcmp(key, "general.quantization_version"))
            st = llmk_gguf_writer_copy_kv(q.wr, g, i);
    }
    if (st == LLMK_OK) st = llmk_gguf_writer_set_u32(q.wr, "general.file_type", p->ftype);
    if (st == LLMK_OK && llmk_type_block_elems(p->type) > 1)
        st = llmk_gguf_writer_set_u32(q.wr, "general.quantization_version", 2);
    if (st != LLMK_OK) goto fail;
    size_t nt = q.nt = llmk_gguf_n_tensors(g);
    q.bufs = calloc(nt ? nt : 1, sizeof *q.bufs);
    q.types = calloc(nt ? nt : 1, sizeof *q.types);
    q.out_b = calloc(nt ? nt : 1, sizeof *q.out_b);
    q.scales = calloc(nt ? nt : 1, sizeof *q.scales);
    if (!q.bufs || !q.types || !q.out_b || !q.scales) {
        st = cli_fail(LLMK_OUT_OF_MEMORY, "quantize: %zu tensor pointers", nt);
        goto fail;
    }
    if ((st = choose_all(g, p, pure, requant, ovs.ov, ovs.n, q.types)) != LLMK_OK) goto fail;
    if (dry) {
        dry_run(g, q.types, verbose);
        goto out;
    }
    cli_progress_start(&q.prog, CMD, cli_progress_wanted(&pf, quiet), 0);
    double t0 = cli_now();
    if ((st = convert_all(&q)) != LLMK_OK) goto fail;
    double t1 = cli_now();
    cli_progress_show_now(&q.prog, "writing %s", pos[1]);
    llmk_outfile *of;
    if ((st = cli_outfile_open(pos[1], &pos[0], 1, &of)) != LLMK_OK) goto fail;
    if ((st = llmk_gguf_writer_write_stream(q.wr, llmk_outfile_stream(of), pos[1])) != LLMK_OK) {
        cli_outfile_discard(of); /* the temporary file only: OUT is as it was */
        goto fail;
    }
    if ((st = cli_outfile_commit(of)) != LLMK_OK) goto fail;
    cli_progress_clear(&q.prog);
    print_done(&q, pos[1], p->name, quiet, t1 - t0, cli_now() - t1);
    goto out;
fail:
    cli_progress_clear(&q.prog);
    rc = cli_report(CMD, st);
out:
    if (q.bufs)
        for (size_t i = 0; i < q.nt; i++) free(q.bufs[i]);
    free(q.bufs), free(q.types), free(q.out_b), free(q.scales);
    llmk_pool_free(q.pool);
    llmk_gguf_writer_free(q.wr);
    llmk_gguf_close(g);
    return rc;
}
