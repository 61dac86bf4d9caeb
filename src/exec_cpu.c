/* The CPU executor (see exec_cpu.h and docs/executor.md).
 *
 * A call evaluates a set of rows (tokens), each with its own sequence and
 * position: a prefill chunk is rows of one sequence at consecutive positions,
 * a batched decode step one row per sequence. Matmuls see all rows at once
 * (one weight pass per chunk); attention, RoPE and the KV append are per row.
 *
 * Partitions: matmul output rows in units of MM_UNIT (SwiGLU in whole blocks
 * of its quantized output), norms and embeddings by row, attention by items.
 * Every output element is written by exactly one worker with a fixed
 * arithmetic sequence, so no result depends on the partition. */
#include "exec_cpu.h"

#include "gguf_internal.h"
#include "internal.h"
#include "kvpool.h"
#include "kernels/a16.h"
#include "kernels/a8.h"
#include "kernels/glu.h"
#include "kernels/kernels.h"
#include "kernels/norm_fused.h"
#include "kernels/ops_f32.h"
#include "plan.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    MM_UNIT = LLMK_MM_UNIT,
    SPLIT_ROWS = 16,  /* at most this many rows: attention splits keys across workers */
    ATTN_ROW_SPLIT = 2, /* from this many rows a worker, decode attention by rows (attn_rows_split) */
    R8_CHUNK = 64,    /* weight rows per pass of the activation rows (r8 kernels) */
    DUP_ROWS = LLMK_DUP_ROWS,
    ATTN_Q = 4,       /* prefill attention: rows of one sequence per K/V pass */
    ATTN_MQ = LLMK_ATTN_MULTI, /* ... times query heads of one KV head: queries per pass */
    MAX_WORKERS = 256,
    CLAIM_STRIDE = 8, /* atomics per claim counter: one cache line each */
    NEXT_RUN_BYTES = 4096 /* prefetch_next_runs: bytes per run start (8 KB: no better) */
};

/* A worker's first NaN or infinity of the current call: phase index and row
 * (INT32_MAX: none). */
struct nonfinite {
    int32_t phase, row;
};

/* A KV block's chunk and the decode rows that read it (attn_units_build). */
struct attn_unit {
    int32_t c, block, row0; /* chunk index, block, the first row reading it */
    uint32_t rows;          /* bit t: row t reads it (t < SPLIT_ROWS) */
};

struct llmk_exec {
    const struct llmk_model *m;
    struct llmk_program prog;  /* what the model computes (immutable) */
    struct llmk_plan plan;     /* how: routes, forms, splits (plan.h) */
    const struct llmk_kernels *K, *VK; /* the plan's matmul/activation and vector/attention kernels */
    llmk_pool *pool;
    int nth;
    int32_t n_ctx, n_batch, n_seq, rows_cap;
    int64_t kvd, qd, max_chunks; /* K/V and Q widths of a row; key chunks of a full context */
    /* KV cache: a pool of blocks of LLMK_KV_BLOCK positions, each
     * [layer][kv head][LLMK_KV_BLOCK] head rows; kvp says which block holds
     * which positions of which sequence (see kv_head) */
    uint32_t kv_type;
    size_t kv_row_bytes;      /* one head's row (head_dim values) */
    size_t kv_pos_bytes;      /* one position of every KV head */
    llmk_quant_fn kv_quant;   /* q8_0 cache: the codec's reference quantizer; NULL: f32/f16 */
    llmk_attn_chunk_fn attn;  /* the chunk kernel of the cache's type */
    llmk_attn_multi_fn attn_multi; /* its multi-query form, or NULL */
    unsigned char *kv_k, *kv_v;
    uint64_t kv_bytes;        /* of each; pages from the OS, committed as written */
    int32_t n_blocks;
    llmk_kvpool *kvp;
    const int32_t **table;    /* [n_seq]: each slot's block table (the pool's, fixed) */
    int32_t *pos;             /* [n_seq]: the pool's lengths, mirrored for the hot paths */
    float *rope_cs;           /* [n_ctx][half][cos, sin] */
    float *rope_cs_swa;       /* the same for sliding-window layers (NULL: none) */
    /* activations: f32 rows of each buffer, and their quantized forms */
    float *buf[LLMK_BUF_COUNT_];
    int64_t width[LLMK_BUF_COUNT_];
    unsigned char *act[LLMK_BUF_COUNT_][LLMK_ACT_FORMS];
    size_t act_row_bytes[LLMK_BUF_COUNT_][LLMK_ACT_FORMS];
    /* repacked weights */
    struct llmk_r8 *r8;       /* [n_phases][3][nth]: R8_A16 weights, worker views into r8_arena */
    unsigned char *r8_arena;
    struct llmk_q4_1_x2 *x2;    /* [n_phases][3]: X2_Q8_1X weights (qs NULL when not) */
    int repack_phase;         /* the phase repack_worker packs */
    /* scratch */
    float *f32_rows;          /* F32_CHECK route: [nth][f32_row_stride] dequantized weight rows */
    int64_t f32_row_stride;
    float *parts;             /* split attention: [SPLIT_ROWS][n_head][max_chunks][hd + 2] */
    struct attn_unit *units;  /* decode attention's work: [SPLIT_ROWS * max_chunks] */
    int32_t n_units;
    bool units_shared;        /* some unit is read by more than one row */
    float *wparts, *wscores;  /* per worker: [ATTN_MQ][max_chunks][hd + 2], [ATTN_MQ][LLMK_ATTN_CHUNK] */
    unsigned char *dup_rows;  /* per worker: a private normed row (f32) and DUP_ROWS a16 rows, see dup_norm */
    size_t dup_rows_bytes;
    unsigned char *r8_scratch; /* per worker: the r8 kernel's tables for a few activation rows (r8.h) */
    size_t r8_scratch_bytes;
    float *argmax_val;        /* per worker argmax partials [nth][rows_cap] */
    int32_t *argmax_idx;
    int32_t *argmax;          /* [rows_cap] */
    struct nonfinite *nf;     /* [nth], see note_nonfinite */
    atomic_llong *claims;     /* [n_phases][nth][CLAIM_STRIDE]: see claimed() */
    /* the current call */
    int32_t n_rows, out_first;
    int32_t *row_id, *row_seq, *row_pos;
    float *logits;            /* LM head destination: rows out_first.. */
    float *hidden;            /* llmk_exec_eval_hidden's destination (rows out_first..), or NULL */
    bool run_final;
    int ph_lo, ph_hi;
    /* llmk_exec_run_rows: per sequence its rows' count, and the sequences in
     * the order they first appear with their ids gathered */
    int32_t *run_count, *run_seqs, *run_ids;
    /* a generation (llmk_exec_generate): per call, worker 0's state */
    const llmk_gen_seq *gen;
    int32_t *gen_row;         /* [rows_cap]: the gen a row of the step is */
    int32_t *gen_next;        /* [n_seq]: per gen, the token its next step feeds; -1: finished */
    int32_t *gen_count;       /* [n_seq]: tokens chosen so far */
    size_t gen_n;
    llmk_gen_callback gen_cb;
    void *gen_user;
    int gen_status;
    /* mixture of experts (moe_* phases): per row its k experts and weights;
     * per worker its own copy of the call's tile map (moe_map_of) */
    int32_t moe_k, moe_x;
    int32_t *moe_sel;
    float *moe_w;
    float *moe_logits;        /* decode's router logits, [rows < nth][moe_x] */
    int32_t *moe_map;
    size_t moe_map_stride;
    /* modes */
    bool phase_mode;          /* one timed pool region per phase; generation: timed in place */
    bool prefetch_next;       /* prefetch_next_runs (configuration prefetch_next) */
    bool clock_thread;        /* configuration phase_clock_thread */
    double *phase_ns;
};

/* ---- helpers ------------------------------------------------------------ */

/* The plan of program phase ph. */
static inline const struct llmk_plan_phase *plan_of(const struct llmk_exec *ex, const struct llmk_phase *ph) {
    return &ex->plan.ph[ph - ex->prog.ph];
}

static void *xalloc(uint64_t a, uint64_t b, int *st) {
    uint64_t bytes;
    if (*st != LLMK_OK) return NULL;
    if (!llmk_mul_u64(a, b, &bytes) || bytes > SIZE_MAX / 2) {
        *st = llmk_fail(LLMK_OUT_OF_MEMORY, "exec: %llu x %llu bytes overflow", (unsigned long long)a,
                        (unsigned long long)b);
        return NULL;
    }
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? (size_t)bytes : 64) != 0) p = NULL;
    if (!p) *st = llmk_fail(LLMK_OUT_OF_MEMORY, "exec: %llu bytes", (unsigned long long)bytes);
    else memset(p, 0, bytes ? (size_t)bytes : 64);
    return p;
}

static void *pages_or_fail(uint64_t bytes, int *st) {
    if (*st != LLMK_OK) return NULL;
    void *p = llmk_pages_alloc(bytes);
    if (!p) *st = llmk_fail(LLMK_OUT_OF_MEMORY, "exec: KV cache of %llu bytes", (unsigned long long)bytes);
    return p;
}

/* Before allocating: the context against the model's training length, and
 * the KV cache plus the buffers that grow with context or batch against
 * the memory there is. */
static int exec_check_budget(const struct llmk_exec *ex, const struct llmk_exec_params *p) {
    const llmk_hparams *hp = &ex->m->hp;
    int st = llmk_check_context(ex->m, ex->n_ctx, p->allow_long_ctx);
    if (st != LLMK_OK) return st;
    double hd = hp->head_dim, nth = p->n_threads > 0 ? p->n_threads : llmk_cpu_count();
    double kv = llmk_kv_bytes(1, (double)ex->n_blocks * LLMK_KV_BLOCK, hp->n_head_kv, hd, (double)ex->kv_row_bytes / hd) *
                hp->n_layer;
    double widths = 3.0 * hp->n_embd + 2.0 * (double)ex->qd + 2.0 * (double)ex->kvd + 2.0 * hp->n_ff;
    const struct llmk_moe_hp *mo = &ex->m->moe;
    if (mo->n_expert) /* the per-slot rows (x2 for their quantized forms, roughly) and the routing */
        widths += 2.0 * mo->n_used * (2.0 * hp->n_embd + 2.0 * mo->n_ff_exp) + 2.0 * mo->n_used;
    double scratch = 4.0 * ((double)ex->n_ctx * hd                                        /* rope table */
                            + (SPLIT_ROWS * hp->n_head + nth * ATTN_MQ) * (double)ex->max_chunks * (hd + 2)
                            + ex->rows_cap * widths + (double)ex->n_seq * hp->n_vocab); /* activations, logits */
    return llmk_check_memory(kv, scratch, p->mem_limit, ex->n_ctx, ex->n_seq, (int64_t)ex->n_blocks * LLMK_KV_BLOCK);
}

/* Row `slot` of KV head g in block b. Head-major inside a block: one head's
 * keys (or values) for the block's positions are one contiguous run, so an
 * attention pass over a chunk (LLMK_ATTN_CHUNK = LLMK_KV_BLOCK positions,
 * one block) streams adjacent rows (decode at depth 1024 spent half its time
 * in attention with a position-major layout). */
static inline unsigned char *kv_row(const struct llmk_exec *ex, unsigned char *base, int32_t b, int layer, int g,
                                    int32_t slot) {
    int64_t idx = (((int64_t)b * ex->m->hp.n_layer + layer) * ex->m->hp.n_head_kv + g) * LLMK_KV_BLOCK + slot;
    return base + (size_t)idx * ex->kv_row_bytes;
}

/* KV head g's row at pos of sequence seq, through its block table. */
static inline unsigned char *kv_head(const struct llmk_exec *ex, unsigned char *base, int32_t seq, int layer, int g,
                                     int32_t pos) {
    return kv_row(ex, base, ex->table[seq][pos / LLMK_KV_BLOCK], layer, g, pos % LLMK_KV_BLOCK);
}

/* Phase timings use the wall clock; the configuration's phase_clock_thread
 * switches to the calling thread's CPU time (meaningful with one thread on a
 * busy machine). */
static double now_ns(const struct llmk_exec *ex) {
    struct timespec ts;
    clock_gettime(ex->clock_thread ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ---- phases ------------------------------------------------------------- */

static void rows_of(const struct llmk_exec *ex, const struct llmk_phase *ph, int32_t *t0, int32_t *t1) {
    *t0 = ph->final ? ex->out_first : 0;
    *t1 = ex->n_rows;
}

static void ph_embed(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int nth) {
    int64_t lo, hi, E = ph->rows[0];
    llmk_split_range(ex->n_rows, ith, nth, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        LLMK_CHECK(llmk_model_row_f32(ex->m, ph->w[0], ex->row_id[t], ex->buf[LLMK_BUF_X] + t * E, E) == LLMK_OK);
        if (ex->m->hp.embd_scale != 1.0) llmk_scale_f32(ex->buf[LLMK_BUF_X] + t * E, E, (float)ex->m->hp.embd_scale);
    }
}

/* Worker ith met a NaN or infinity in row t of phase ph. Each worker keeps
 * the first in (phase, row) order in its own record, read after the run:
 * the place reported is then the same for any thread count or work split,
 * with no atomics, and a run without one costs nothing here. */
static void note_nonfinite(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int32_t t) {
    struct nonfinite *r = &ex->nf[ith];
    int32_t i = (int32_t)(ph - ex->prog.ph);
    if (i < r->phase || (i == r->phase && t < r->row)) r->phase = i, r->row = t;
}

/* Quantize row t's elements [e0, e1) of buffer b into every form of ph's
 * qmask. The quantizers report a NaN or infinity from their amax pass: the
 * matmul that reads the result would turn it into ordinary numbers. */
static void quantize_part(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int b, int64_t t, int64_t e0,
                          int64_t e1) {
    const float *src = ex->buf[b] + t * ex->width[b];
    unsigned qmask = plan_of(ex, ph)->qmask;
    int bad = 0;
    for (int f = 0; f < LLMK_ACT_FORMS; f++)
        if (qmask & (1u << f))
            bad |= ex->K->act_quant[f](src, ex->width[b], e0, e1, ex->act[b][f] + (size_t)t * ex->act_row_bytes[b][f]);
    if (bad) note_nonfinite(ex, ph, ith, (int32_t)t);
}

/* Whether the norm phase ph runs on every worker for all its rows, into the
 * worker's private buffer, with no barrier before the matmul that follows:
 * for a few rows the norm costs less than a barrier and the wait for the one
 * worker that would do it. Only when that matmul reads nothing but a16
 * activations (no f32 consumer of the shared normed buffer). Same functions
 * on the same data: the bytes are the ones the shared path writes. */
static bool dup_norm(const struct llmk_exec *ex, const struct llmk_phase *ph) {
    if (!plan_of(ex, ph)->a16_only || ph->vec[1]) return false; /* a fused post-norm writes x: once per row */
    int32_t t0, t1;
    rows_of(ex, ph, &t0, &t1);
    return t1 - t0 <= DUP_ROWS;
}

/* The worker's private a16 rows of dup_norm (row t - t0 of the phase). */
static unsigned char *dup_a16_rows(const struct llmk_exec *ex, int ith) {
    return ex->dup_rows + (size_t)ith * ex->dup_rows_bytes + (size_t)ex->width[LLMK_BUF_X] * sizeof(float);
}

static void ph_norm(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int nth) {
    int32_t t0, t1;
    rows_of(ex, ph, &t0, &t1);
    int64_t lo, hi, E = ph->rows[0];
    if (dup_norm(ex, ph)) {
        float *xn = (float *)(ex->dup_rows + (size_t)ith * ex->dup_rows_bytes);
        size_t rb = llmk_a16_row_bytes(E);
        for (int32_t t = t0; t < t1; t++) {
            ex->K->rmsnorm(xn, ex->buf[ph->in] + t * E, ph->vec[0], E, (float)ex->m->hp.rms_eps);
            if (ex->K->act_quant[LLMK_ACT_A16](xn, E, 0, E, dup_a16_rows(ex, ith) + (size_t)(t - t0) * rb))
                note_nonfinite(ex, ph, ith, t);
        }
        return;
    }
    llmk_split_range(t1 - t0, ith, nth, &lo, &hi);
    float eps = (float)ex->m->hp.rms_eps;
    for (int64_t t = t0 + lo; t < t0 + hi; t++) {
        float *x = ex->buf[ph->in] + t * E;
        if (ph->vec[1]) ex->K->norm->add_rmsnorm(x, x, ex->buf[LLMK_BUF_O] + t * E, ph->vec[1], E, eps, 1.0f);
        ex->K->rmsnorm(ex->buf[ph->out[0]] + t * E, x, ph->vec[0], E, eps);
        quantize_part(ex, ph, ith, ph->out[0], t, 0, E);
    }
}

/* x += rmsnorm(o) * w, by row (the add_rmsnorm kernel: the bits of the norm
 * and then the add). */
static void ph_post_norm(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int nth) {
    int64_t lo, hi, E = ph->rows[0];
    llmk_split_range(ex->n_rows, ith, nth, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        float *x = ex->buf[ph->out[0]] + t * E;
        ex->K->norm->add_rmsnorm(x, x, ex->buf[ph->in] + t * E, ph->vec[0], E, (float)ex->m->hp.rms_eps, 1.0f);
    }
}

/* Whether ph is a Q/K/V matmul whose RoPE phase follows it without a
 * barrier: the matmul is then split in whole heads (units of head_dim
 * rows, a multiple of the r8 kernels' 8 rows) and each worker ropes and
 * appends exactly the heads it computed. The split depends only on the
 * shape, and each element's arithmetic is unchanged, so the bits are the
 * same as with a barrier (and as phase-at-a-time mode). */
static bool rope_fused(const struct llmk_exec *ex, const struct llmk_phase *ph) { return plan_of(ex, ph)->rope_fused; }

/* Prefill matmuls (more than SPLIT_ROWS rows) are claimed, not assigned:
 * the phase's rows are cut into units that workers take from per-owner
 * counters, their own share first, then the others'. A core slowed by
 * another tenant (seen here: one core at half the other's speed for
 * minutes) then costs its share of the work, not the whole phase waiting
 * at the barrier. Each output element is the same kernel call's whoever
 * computes it, so the bits do not change. Decode keeps the fixed shares:
 * there each worker's streaming prefetch over its own rows is the speed. */
static bool claimed(const struct llmk_exec *ex, const struct llmk_phase *ph) {
    int32_t t0, t1;
    rows_of(ex, ph, &t0, &t1);
    return t1 - t0 > SPLIT_ROWS;
}

/* The F32_CHECK route: each weight row dequantized, then f32 dots. */
static void mm_f32_check(struct llmk_exec *ex, const struct llmk_phase *ph, const llmk_tensor_info *w, int64_t r0,
                         int64_t r1, int32_t t0, int32_t t1, float *out, int64_t out_stride, int ith) {
    int64_t k = ph->k;
    size_t ws = (size_t)(w->n_bytes / w->ne[1]);
    float *row = ex->f32_rows + (int64_t)ith * ex->f32_row_stride;
    for (int64_t r = r0; r < r1; r++) {
        LLMK_CHECK(llmk_f32_dequant_row(w->type, (const char *)w->data + (size_t)r * ws, row, k) == LLMK_OK);
        ex->K->f32_dots(row, 0, 1, ex->buf[ph->in] + (int64_t)t0 * ex->width[ph->in], (size_t)ex->width[ph->in], t1 - t0,
                        k, out + r, (size_t)out_stride);
    }
}

static void *r8_scratch(struct llmk_exec *ex, int ith) {
    return ex->r8_scratch ? ex->r8_scratch + (size_t)ith * ex->r8_scratch_bytes : NULL;
}

/* The A16 and A8 routes: chunks of R8_CHUNK weight rows (L2-resident)
 * against every activation row, 4 at a time (L1); one activation row
 * reuses nothing, so the kernel streams the whole range. */
static void mm_r8(struct llmk_exec *ex, const struct llmk_phase *ph, int wi, int64_t r0, int64_t r1, int32_t t0,
                  int32_t t1, float *out, int64_t out_stride, int ith, int owner) {
    const llmk_tensor_info *w = ph->w[wi];
    int in = ph->in, route = plan_of(ex, ph)->w[wi].route;
    bool a8 = route == LLMK_ROUTE_R8_A8 || route == LLMK_ROUTE_ROWS_A8;
    int form = a8 ? LLMK_ACT_A8 : LLMK_ACT_A16;
    size_t as = ex->act_row_bytes[in][form], ws = (size_t)(w->n_bytes / w->ne[1]);
    const unsigned char *act = ex->act[in][form] + (size_t)t0 * as;
    if (!a8 && ph > ex->prog.ph && dup_norm(ex, ph - 1)) act = dup_a16_rows(ex, ith), as = llmk_a16_row_bytes(ph->k);
    llmk_gemm_r8_a16_fn packed = !llmk_route_r8(route) ? NULL : a8 ? ex->K->gemm_r8_a8 : ex->K->gemm_r8_a16;
    const struct llmk_r8 *rw = &ex->r8[((ph - ex->prog.ph) * 3 + wi) * ex->nth + owner];
    int64_t chunk = t1 - t0 <= LLMK_R8_TABLE_ROWS ? r1 - r0 : R8_CHUNK;
    for (int64_t c0 = r0; c0 < r1; c0 += chunk) {
        int64_t c1 = c0 + chunk < r1 ? c0 + chunk : r1;
        if (packed)
            packed(rw, c0, c1, act, as, t1 - t0, out, (size_t)out_stride, r8_scratch(ex, ith), ex->r8_scratch_bytes);
        else
            (a8 ? ex->K->gemm_rows_a8 : ex->K->gemm_rows_a16)(w->type, ph->k, w->data, ws, c0, c1, act, as, t1 - t0, out,
                                                              (size_t)out_stride);
    }
}

/* The DOT route: the codec's kernels on the GGUF rows, MM_UNIT rows at a
 * time against every activation row (vec_dotm: several rows per weight pass,
 * the same bits as vec_dot per row). */
static void mm_dot(struct llmk_exec *ex, const struct llmk_phase *ph, int wi, int64_t r0, int64_t r1, int32_t t0,
                   int32_t t1, float *out, int64_t out_stride) {
    const llmk_tensor_info *w = ph->w[wi];
    int in = ph->in, f = plan_of(ex, ph)->w[wi].form;
    const unsigned char *act;
    size_t astride;
    if (f < 0) act = (const unsigned char *)ex->buf[in], astride = (size_t)ex->width[in] * sizeof(float);
    else act = ex->act[in][f], astride = ex->act_row_bytes[in][f];
    size_t ws = (size_t)(w->n_bytes / w->ne[1]);
    const struct llmk_type_kernels *tk = &ex->K->type[w->type];
    const char *wp = w->data;
    for (int64_t c0 = r0; c0 < r1; c0 += MM_UNIT) {
        int64_t c1 = c0 + MM_UNIT < r1 ? c0 + MM_UNIT : r1;
        if (tk->vec_dotm && t1 - t0 > 1)
            tk->vec_dotm(ph->k, wp + (size_t)c0 * ws, ws, c1 - c0, act + (size_t)t0 * astride, astride, t1 - t0,
                         out + c0, (size_t)out_stride);
        else
            for (int32_t t = t0; t < t1; t++)
                tk->vec_dot(ph->k, wp + (size_t)c0 * ws, ws, c1 - c0, act + (size_t)t * astride,
                            out + (int64_t)(t - t0) * out_stride + c0);
    }
}

/* out[t][r] for r in [r0, r1) and t in [t0, t1) by the weight's route.
 * Rows [r0, r1) lie in worker owner's share (its repacked view); ith is the
 * worker doing it (its scratch). */
static void mm_rows(struct llmk_exec *ex, const struct llmk_phase *ph, int wi, int64_t r0, int64_t r1, int32_t t0,
                    int32_t t1, float *out, int64_t out_stride, int ith, int owner) {
    switch (plan_of(ex, ph)->w[wi].route) {
    case LLMK_ROUTE_F32_CHECK: mm_f32_check(ex, ph, ph->w[wi], r0, r1, t0, t1, out, out_stride, ith); break;
    case LLMK_ROUTE_R8_A16:
    case LLMK_ROUTE_ROWS_A16:
    case LLMK_ROUTE_R8_A8:
    case LLMK_ROUTE_ROWS_A8: mm_r8(ex, ph, wi, r0, r1, t0, t1, out, out_stride, ith, owner); break;
    case LLMK_ROUTE_X2_Q8_1X: {
        size_t as = ex->act_row_bytes[ph->in][LLMK_ACT_Q8_1X];
        const unsigned char *act = ex->act[ph->in][LLMK_ACT_Q8_1X] + (size_t)t0 * as;
        const struct llmk_q4_1_x2 *xw = &ex->x2[(ph - ex->prog.ph) * 3 + wi];
        for (int64_t c0 = r0; c0 < r1; c0 += MM_UNIT) {
            int64_t c1 = c0 + MM_UNIT < r1 ? c0 + MM_UNIT : r1;
            ex->K->gemm_q4_1_x2_q8_1x(xw, c0, c1, act, as, t1 - t0, out, out_stride);
        }
        break;
    }
    default: mm_dot(ex, ph, wi, r0, r1, t0, t1, out, out_stride);
    }
    if (ph->wscale[wi] != 1.0f) /* an NVFP4 tensor's X.scale, on the products as llama.cpp applies it */
        for (int32_t t = t0; t < t1; t++) llmk_scale_f32(out + (int64_t)(t - t0) * out_stride + r0, r1 - r0, ph->wscale[wi]);
}

/* Worker ith's share of weight wi of matmul phase ph (plan.h). */
static void mm_share(const struct llmk_exec *ex, const struct llmk_phase *ph, int wi, int ith, int nth, int64_t *r0,
                     int64_t *r1) {
    LLMK_CHECK(nth == ex->plan.nth);
    llmk_plan_share(&ex->plan, (int)(ph - ex->prog.ph), wi, ith, r0, r1);
}

/* One head's row of n values; a q8_0 row is whole blocks (n % 32 == 0 is
 * checked at init), each quantized on its own as the codec does. */
static void store_kv(const struct llmk_exec *ex, unsigned char *dst, const float *src, int64_t n) {
    if (ex->kv_quant) {
        ex->kv_quant(src, dst, n);
    } else if (ex->kv_type == LLMK_TYPE_F16) {
        ex->VK->to_f16(src, (uint16_t *)dst, n);
    } else {
        memcpy(dst, src, (size_t)n * sizeof(float));
    }
}

/* Head unit u of row t: q heads 0..H-1 (QK-norm, RoPE), k heads H..H+Hkv-1
 * (QK-norm, RoPE, append), v heads after them (append). Each head row is
 * checked for a NaN or infinity (by worker ith): no quantizer reads q, k or
 * v, attention's vector exp clamps a NaN score to a finite weight, and a
 * q8_0 cache quantizes NaN to 0. */
static void rope_unit(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int32_t t, int u) {
    const llmk_hparams *hp = &ex->m->hp;
    int HD = hp->head_dim, H = hp->n_head, Hkv = hp->n_head_kv, half = HD / 2;
    float eps = (float)hp->rms_eps;
    const float *cs = (ex->m->layers[ph->layer].swa && ex->rope_cs_swa ? ex->rope_cs_swa : ex->rope_cs) +
                      (int64_t)ex->row_pos[t] * half * 2;
    if (u < H) {
        float *q = ex->buf[LLMK_BUF_Q] + (int64_t)t * ex->qd + (int64_t)u * HD;
        if (ph->vec[0]) ex->K->rmsnorm(q, q, ph->vec[0], HD, eps);
        ex->K->rope(q, 1, HD, cs, hp->rope_neox);
        if (ex->K->nonfinite(q, HD)) note_nonfinite(ex, ph, ith, t);
    } else if (u < H + Hkv) {
        int h = u - H;
        float *k = ex->buf[LLMK_BUF_K] + (int64_t)t * ex->kvd + (int64_t)h * HD;
        if (ph->vec[1]) ex->K->rmsnorm(k, k, ph->vec[1], HD, eps);
        ex->K->rope(k, 1, HD, cs, hp->rope_neox);
        if (ex->K->nonfinite(k, HD)) note_nonfinite(ex, ph, ith, t);
        store_kv(ex, kv_head(ex, ex->kv_k, ex->row_seq[t], ph->layer, h, ex->row_pos[t]), k, HD);
    } else {
        int h = u - H - Hkv;
        const float *v = ex->buf[LLMK_BUF_V] + (int64_t)t * ex->kvd + (int64_t)h * HD;
        if (ex->K->nonfinite(v, HD)) note_nonfinite(ex, ph, ith, t);
        store_kv(ex, kv_head(ex, ex->kv_v, ex->row_seq[t], ph->layer, h, ex->row_pos[t]), v, HD);
    }
}

static void ph_rope_kv(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int nth) {
    const llmk_hparams *hp = &ex->m->hp;
    int U = hp->n_head + 2 * hp->n_head_kv;
    int64_t lo, hi;
    if (rope_fused(ex, ph - 1) && claimed(ex, ph - 1)) return; /* the claimers roped their units */
    if (rope_fused(ex, ph - 1)) {
        /* the head units this worker's Q/K/V matmul share produced (same
         * split, no barrier in between): all rows of each */
        llmk_split_range(U, ith, nth, &lo, &hi);
        for (int64_t u = lo; u < hi; u++)
            for (int32_t t = 0; t < ex->n_rows; t++) rope_unit(ex, ph, ith, t, (int)u);
        return;
    }
    llmk_split_range((int64_t)ex->n_rows * U, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) rope_unit(ex, ph, ith, (int32_t)(it / U), (int)(it % U));
}

/* Bias or residual of weight i's rows [r0, r1), rows t0..t1 of the call;
 * out as mm_rows wrote it (row t at t - t0), the residual stream x by
 * absolute row. */
static void mm_epilogue(struct llmk_exec *ex, const struct llmk_phase *ph, int i, int64_t r0, int64_t r1, int32_t t0,
                        int32_t t1, float *out) {
    int64_t n = ph->rows[i];
    if (ph->epilogue == LLMK_EPI_BIAS && ph->vec[i]) {
        for (int32_t t = t0; t < t1; t++) ex->VK->add(out + (int64_t)(t - t0) * n + r0, ph->vec[i] + r0, r1 - r0);
    } else if (ph->epilogue == LLMK_EPI_RESIDUAL) {
        float *x = ex->buf[LLMK_BUF_X];
        for (int32_t t = t0; t < t1; t++) {
            if (ph->vec[0]) ex->VK->add(out + (int64_t)(t - t0) * n + r0, ph->vec[0] + r0, r1 - r0); /* gpt-oss's O bias */
            ex->VK->add(x + (int64_t)t * n + r0, out + (int64_t)(t - t0) * n + r0, r1 - r0);
        }
    } else if (ph->epilogue == LLMK_EPI_SOFTCAP) {
        for (int32_t t = t0; t < t1; t++)
            llmk_softcap_f32(out + (int64_t)(t - t0) * n + r0, r1 - r0, (float)ex->m->hp.logit_softcap);
    }
}

/* Gate and up rows [r0, r1) of owner's share, then SwiGLU (or GEGLU) and
 * the down-projection's activation forms of those rows. */
static void mm_swiglu(struct llmk_exec *ex, const struct llmk_phase *ph, int64_t r0, int64_t r1, int32_t t0,
                      int32_t t1, int ith, int owner) {
    int64_t F = ph->rows[0];
    float *g = ex->buf[ph->out[0]], *u = ex->buf[ph->out[1]];
    mm_rows(ex, ph, 0, r0, r1, t0, t1, g, F, ith, owner);
    mm_rows(ex, ph, 1, r0, r1, t0, t1, u, F, ith, owner);
    for (int32_t t = t0; t < t1; t++) {
        if (ph->epilogue == LLMK_EPI_GEGLU) ex->K->glu->gelu_glu(g + (int64_t)t * F + r0, u + (int64_t)t * F + r0, r1 - r0);
        else ex->VK->swiglu(g + (int64_t)t * F + r0, u + (int64_t)t * F + r0, r1 - r0);
        quantize_part(ex, ph, ith, ph->out[0], t, r0, r1);
    }
}

static float *mm_out(struct llmk_exec *ex, const struct llmk_phase *ph, int i) {
    return ph->out[i] == LLMK_BUF_LOGITS ? ex->logits : ex->buf[ph->out[i]];
}

static atomic_llong *claim_counter(struct llmk_exec *ex, const struct llmk_phase *ph, int owner) {
    return &ex->claims[((ph - ex->prog.ph) * ex->nth + owner) * CLAIM_STRIDE];
}

/* The next unreserved unit of [0, n_units), or -1: owner ranges are those
 * of llmk_split_range; *from counts the owners ith has emptied. */
static int64_t claim_next(struct llmk_exec *ex, const struct llmk_phase *ph, int64_t n_units, int ith, int nth,
                          int *from) {
    for (; *from < nth; ++*from) {
        int w = (ith + *from) % nth;
        int64_t lo, hi;
        llmk_split_range(n_units, w, nth, &lo, &hi);
        int64_t j = lo + atomic_fetch_add_explicit(claim_counter(ex, ph, w), 1, memory_order_relaxed);
        if (j < hi) return j;
    }
    return -1;
}

/* The next unreserved item of [0, n), or -1, from the phase's first counter. */
static int64_t claim_any(struct llmk_exec *ex, const struct llmk_phase *ph, int64_t n) {
    int64_t j = atomic_fetch_add_explicit(claim_counter(ex, ph, 0), 1, memory_order_relaxed);
    return j < n ? j : -1;
}

/* Units of rows a claimed matmul is cut into: whole heads where RoPE
 * follows (the claimer ropes them), whole SwiGLU units, at least R8_CHUNK. */
static int64_t claim_unit(const struct llmk_exec *ex, const struct llmk_phase *ph) {
    int64_t u = plan_of(ex, ph)->unit;
    return rope_fused(ex, ph) ? u : (R8_CHUNK + u - 1) / u * u;
}

static void ph_matmul_claimed(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int nth) {
    int32_t t0, t1;
    rows_of(ex, ph, &t0, &t1);
    bool swiglu = llmk_epi_glu(ph->epilogue);
    int64_t unit = claim_unit(ex, ph), total = 0;
    for (int i = 0; i < (swiglu ? 1 : ph->n_w); i++) total += ph->rows[i];
    int from = 0;
    for (int64_t j; (j = claim_next(ex, ph, (total + unit - 1) / unit, ith, nth, &from)) >= 0;) {
        int64_t g0 = j * unit, g1 = g0 + unit < total ? g0 + unit : total, base = 0;
        /* the unit's rows of each weight, cut at the owners' shares */
        for (int i = 0; i < (swiglu ? 1 : ph->n_w); base += ph->rows[i], i++) {
            int64_t a = g0 - base > 0 ? g0 - base : 0, b = g1 - base < ph->rows[i] ? g1 - base : ph->rows[i];
            for (int w = 0; w < nth && a < b; w++) {
                int64_t s0, s1;
                mm_share(ex, ph, i, w, nth, &s0, &s1);
                int64_t r0 = a > s0 ? a : s0, r1 = b < s1 ? b : s1;
                if (r0 >= r1) continue;
                if (swiglu) {
                    mm_swiglu(ex, ph, r0, r1, t0, t1, ith, w);
                } else {
                    mm_rows(ex, ph, i, r0, r1, t0, t1, mm_out(ex, ph, i), ph->rows[i], ith, w);
                    mm_epilogue(ex, ph, i, r0, r1, t0, t1, mm_out(ex, ph, i));
                }
            }
        }
        if (rope_fused(ex, ph)) /* unit j is rope unit j (Q heads, then K, then V) */
            for (int32_t t = t0; t < t1; t++) rope_unit(ex, ph + 1, ith, t, (int)j);
    }
}

static void ph_matmul(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int nth) {
    if (claimed(ex, ph)) {
        ph_matmul_claimed(ex, ph, ith, nth);
        return;
    }
    int32_t t0, t1;
    rows_of(ex, ph, &t0, &t1);
    int64_t r0, r1;
    if (llmk_epi_glu(ph->epilogue)) {
        mm_share(ex, ph, 0, ith, nth, &r0, &r1);
        if (r0 < r1) mm_swiglu(ex, ph, r0, r1, t0, t1, ith, ith);
        return;
    }
    for (int i = 0; i < ph->n_w; i++) {
        mm_share(ex, ph, i, ith, nth, &r0, &r1);
        if (r0 >= r1) continue;
        mm_rows(ex, ph, i, r0, r1, t0, t1, mm_out(ex, ph, i), ph->rows[i], ith, ith);
        mm_epilogue(ex, ph, i, r0, r1, t0, t1, mm_out(ex, ph, i));
    }
}

/* A worker's partials of its item's query slot i (prefill attention):
 * max_chunks of them, one per key chunk. */
static float *parts_slot(const struct llmk_exec *ex, float *wp, int i) {
    return wp + (int64_t)i * ex->max_chunks * (ex->m->hp.head_dim + 2);
}

/* Partial of (row t, head h, key chunk c). */
/* Head h's nc chunk partials merged into out, with the layer's attention
 * sink when it has one. */
static void merge_head(const struct llmk_exec *ex, int layer, int h, const float *parts, int nc, float *out) {
    const float *sinks = ex->m->layers[layer].sinks_f;
    ex->VK->attn_merge(parts, nc, ex->m->hp.head_dim, sinks ? &sinks[h] : NULL, out);
}

/* Row t's keys in chunk c of layer: [*a, *a + n) (a sliding window cuts
 * its first chunk; n <= 0: none). */
static int64_t chunk_keys(const struct llmk_exec *ex, int layer, int32_t t, int64_t c, int32_t *a) {
    int32_t lo = llmk_layer_key_lo(ex->m, layer, ex->row_pos[t]);
    int64_t c0 = c * LLMK_ATTN_CHUNK, e = (int64_t)ex->row_pos[t] + 1;
    if (e > c0 + LLMK_ATTN_CHUNK) e = c0 + LLMK_ATTN_CHUNK;
    *a = (int32_t)(c0 > lo ? c0 : lo);
    return e - *a;
}

/* The first key chunk row t reads in layer (0 unless a window starts later). */
static int64_t first_chunk(const struct llmk_exec *ex, int layer, int32_t t) {
    return llmk_layer_key_lo(ex->m, layer, ex->row_pos[t]) / LLMK_ATTN_CHUNK;
}

static void attn_part(struct llmk_exec *ex, int layer, int32_t t, int h, int64_t c, float *part, float *scores) {
    const llmk_hparams *hp = &ex->m->hp;
    int HD = hp->head_dim, g = h / (hp->n_head / hp->n_head_kv);
    int32_t k0;
    int64_t n = chunk_keys(ex, layer, t, c, &k0);
    const unsigned char *K = kv_head(ex, ex->kv_k, ex->row_seq[t], layer, g, k0);
    const unsigned char *V = kv_head(ex, ex->kv_v, ex->row_seq[t], layer, g, k0);
    const float *q = ex->buf[LLMK_BUF_Q] + (int64_t)t * ex->qd + (int64_t)h * HD;
    float scale = (float)hp->attn_scale;
    ex->attn(q, K, V, n, HD, HD, scale, part, scores);
}

static int64_t n_chunks(const struct llmk_exec *ex, int32_t t) {
    return ((int64_t)ex->row_pos[t] + LLMK_ATTN_CHUNK) / LLMK_ATTN_CHUNK;
}

/* Decode attention's work (at most SPLIT_ROWS rows): one unit per distinct
 * KV block a row's key chunk lies in, listing every row that reads it
 * (bit t of `rows`). Rows of sequences that share a prefix share its blocks,
 * so a pass reads each shared chunk once for all of them (seed 002's cascade
 * attention). Built once per call, before the workers start: the rows'
 * tables and positions are the same in every layer. */
static void attn_units_build(struct llmk_exec *ex) {
    ex->n_units = 0;
    if (ex->n_rows > SPLIT_ROWS) return;
    int64_t most = 0;
    for (int32_t t = 0; t < ex->n_rows; t++) most = n_chunks(ex, t) > most ? n_chunks(ex, t) : most;
    for (int64_t c = 0; c < most; c++) {
        int32_t first = ex->n_units; /* units of chunk c: a shared block is at the same chunk in each sequence */
        for (int32_t t = 0; t < ex->n_rows; t++) {
            if (c >= n_chunks(ex, t)) continue;
            int32_t b = ex->table[ex->row_seq[t]][c * LLMK_ATTN_CHUNK / LLMK_KV_BLOCK], u = first;
            while (u < ex->n_units && ex->units[u].block != b) u++;
            if (u == ex->n_units) ex->units[ex->n_units++] = (struct attn_unit){.c = (int32_t)c, .block = b, .row0 = t};
            ex->units[u].rows |= 1u << t;
        }
    }
    ex->units_shared = false;
    for (int32_t u = 0; u < ex->n_units; u++) ex->units_shared |= __builtin_popcount(ex->units[u].rows) > 1;
}

/* Queries (row, head) of unit u, ordered (KV group, row, head of the group). */
static int64_t unit_queries(const struct llmk_exec *ex, const struct attn_unit *u) {
    return (int64_t)__builtin_popcount(u->rows) * ex->m->hp.n_head;
}

/* A query's share of the split in unit u: its keys (the unit's longest
 * row's; a partial last chunk is cheaper) plus a fixed part for the
 * softmax and the partial's setup. Split by query count, the worker whose
 * range held the full chunks kept the other waiting at the merge barrier
 * (depth 512: the two workers' waits summed 5.3-6.1 us a layer, now
 * 3.7-4.5). */
static int64_t unit_cost(const struct llmk_exec *ex, const struct attn_unit *u) {
    int64_t k0 = (int64_t)u->c * LLMK_ATTN_CHUNK, n = 1;
    for (int32_t t = u->row0; t < ex->n_rows; t++)
        if (u->rows & (1u << t)) n = (int64_t)ex->row_pos[t] + 1 - k0 > n ? (int64_t)ex->row_pos[t] + 1 - k0 : n;
    return (n < LLMK_ATTN_CHUNK ? n : LLMK_ATTN_CHUNK) + 16;
}

/* Query (row t, head h) of split decode attention: its nc chunk partials
 * (ex->parts) merged into the output, and quantized where heads are whole
 * blocks. */
static void finish_head(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int32_t t, int h, int nc,
                        bool head_quant) {
    int HD = ex->m->hp.head_dim, H = ex->m->hp.n_head;
    merge_head(ex, ph->layer, h, ex->parts + ((int64_t)t * H + h) * ex->max_chunks * (HD + 2), nc,
               ex->buf[LLMK_BUF_ATT] + (int64_t)t * ex->qd + (int64_t)h * HD);
    if (head_quant) quantize_part(ex, ph, ith, LLMK_BUF_ATT, t, (int64_t)h * HD, (int64_t)(h + 1) * HD);
}

/* Queries [j0, j1) of unit u through the chunk kernels, batched per KV group
 * up to ATTN_MQ per K/V pass (the multi-query kernel gives each query the
 * single-query bits). With one chunk per row (most == 1) each query's
 * partial is final: merged and quantized here. */
static void attn_unit(struct llmk_exec *ex, const struct llmk_phase *ph, const struct attn_unit *u, int64_t j0,
                      int64_t j1, int ith, bool merge_now, bool head_quant, float *scores) {
    const llmk_hparams *hp = &ex->m->hp;
    int HD = hp->head_dim, H = hp->n_head, gs = H / hp->n_head_kv, nr = __builtin_popcount(u->rows);
    int32_t trow[SPLIT_ROWS];
    for (int32_t t = 0, k = 0; t < ex->n_rows; t++)
        if (u->rows & (1u << t)) trow[k++] = t;
    int64_t ps = HD + 2, k0 = (int64_t)u->c * LLMK_ATTN_CHUNK;
    float scale = (float)hp->attn_scale;
    while (j0 < j1) {
        int g = (int)(j0 / ((int64_t)nr * gs));
        int64_t je = ((int64_t)g + 1) * nr * gs; /* the end of group g's queries */
        je = je < j1 ? je : j1, je = je - j0 > ATTN_MQ ? j0 + ATTN_MQ : je;
        const float *q[ATTN_MQ];
        int64_t n[ATTN_MQ];
        float *pp[ATTN_MQ], *sc[ATTN_MQ];
        int nq = 0;
        for (int64_t j = j0; j < je; j++, nq++) {
            int64_t w = j % ((int64_t)nr * gs);
            int32_t t = trow[w / gs];
            int h = g * gs + (int)(w % gs);
            int64_t nk = (int64_t)ex->row_pos[t] + 1 - k0;
            q[nq] = ex->buf[LLMK_BUF_Q] + (int64_t)t * ex->qd + (int64_t)h * HD;
            n[nq] = nk > LLMK_ATTN_CHUNK ? LLMK_ATTN_CHUNK : nk;
            pp[nq] = ex->parts + (((int64_t)t * H + h) * ex->max_chunks + u->c) * ps;
            sc[nq] = scores + (int64_t)nq * LLMK_ATTN_CHUNK;
        }
        const unsigned char *K = kv_head(ex, ex->kv_k, ex->row_seq[u->row0], ph->layer, g, (int32_t)k0);
        const unsigned char *V = kv_head(ex, ex->kv_v, ex->row_seq[u->row0], ph->layer, g, (int32_t)k0);
        if (ex->attn_multi) ex->attn_multi(nq, q, n, K, V, HD, HD, scale, pp, sc);
        else
            for (int i = 0; i < nq; i++) ex->attn(q[i], K, V, n[i], HD, HD, scale, pp[i], scores);
        for (int64_t j = j0; merge_now && j < je; j++) {
            int64_t w = j % ((int64_t)nr * gs);
            int32_t t = trow[w / gs];
            int h = g * gs + (int)(w % gs);
            finish_head(ex, ph, ith, t, h, 1, head_quant);
        }
        j0 = je;
    }
}

/* The rows worker ith owns (bits) when attention splits by rows: rows in
 * order, cut by their keys (plus a fixed part a chunk, as unit_cost). */
static uint32_t attn_own_rows(const struct llmk_exec *ex, int ith, int nth) {
    int64_t cost[SPLIT_ROWS], total = 0, lo, hi, base = 0;
    for (int32_t t = 0; t < ex->n_rows; t++)
        total += cost[t] = (int64_t)ex->row_pos[t] + 1 + 16 * n_chunks(ex, t);
    llmk_split_range(total, ith, nth, &lo, &hi);
    uint32_t own = 0;
    for (int32_t t = 0; t < ex->n_rows; base += cost[t++])
        if (base >= lo && base < hi) own |= 1u << t;
    return own;
}

/* Attention for rows that share no KV block (batched decode of separate
 * sequences, at least ATTN_ROW_SPLIT a worker): each worker takes whole
 * rows, every chunk of them, so it merges its own partials with no barrier
 * between. Splitting each unit's queries instead (below) left the worker
 * holding the partial last chunks behind the other at the merge barrier
 * (16 rows at depth 128-256: 131 of the phase's 513 ms in a 128-token
 * run), and had each worker read every sequence's cache; by rows the phase
 * took 400-407 ms where the old split took 438-446 alternating, S_TG
 * 1268-1279 -> 1343-1351 t/s. Rows that share blocks (a verify step's, a
 * shared prefix) keep the split below: by rows each worker would read all
 * the shared K/V (a 4-row verify step at depth 512, one alternation: 3.3 ->
 * 3.7 ms). */
static void attn_rows_split(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int nth, bool head_quant,
                            float *scores) {
    int H = ex->m->hp.n_head;
    uint32_t own = attn_own_rows(ex, ith, nth);
    for (int32_t u = 0; u < ex->n_units; u++) {
        struct attn_unit mine = ex->units[u];
        mine.rows &= own;
        if (mine.rows) attn_unit(ex, ph, &mine, 0, unit_queries(ex, &mine), ith, false, head_quant, scores);
    }
    for (int32_t t = 0; t < ex->n_rows; t++)
        for (int h = 0; own & (1u << t) && h < H; h++) finish_head(ex, ph, ith, t, h, (int)n_chunks(ex, t), head_quant);
}

/* Attention for few rows (decode, batched decode): the units' queries,
 * split into contiguous ranges by count. Partials merge in chunk order: at
 * once when every row has one chunk, else after a barrier. Neither the
 * grouping nor the split changes a bit, so results depend on neither the
 * thread count nor which other rows share a block. */
static void attn_few_rows(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int nth, bool head_quant,
                          float *scores) {
    int H = ex->m->hp.n_head;
    int64_t total = 0, most = 1;
    if (ex->n_rows >= ATTN_ROW_SPLIT * nth && !ex->units_shared) {
        attn_rows_split(ex, ph, ith, nth, head_quant, scores);
        return;
    }
    for (int32_t t = 0; t < ex->n_rows; t++) most = n_chunks(ex, t) > most ? n_chunks(ex, t) : most;
    for (int32_t u = 0; u < ex->n_units; u++) total += unit_queries(ex, &ex->units[u]) * unit_cost(ex, &ex->units[u]);
    int64_t lo, hi, base = 0;
    llmk_split_range(total, ith, nth, &lo, &hi);
    for (int32_t u = 0; u < ex->n_units && base < hi; u++) {
        int64_t nq = unit_queries(ex, &ex->units[u]), c = unit_cost(ex, &ex->units[u]);
        /* the queries whose cost starts in [lo, hi): neighbours' ranges meet exactly */
        int64_t j0 = lo > base ? (lo - base + c - 1) / c : 0, j1 = (hi - base + c - 1) / c;
        j0 = j0 < nq ? j0 : nq, j1 = j1 < nq ? j1 : nq;
        if (j0 < j1) attn_unit(ex, ph, &ex->units[u], j0, j1, ith, most == 1, head_quant, scores);
        base += nq * c;
    }
    if (most == 1) return;
    llmk_pool_barrier(ex->pool);
    for (int64_t it = ith; it < (int64_t)ex->n_rows * H; it += nth) {
        int32_t t = (int32_t)(it / H);
        finish_head(ex, ph, ith, t, (int)(it % H), (int)n_chunks(ex, t), head_quant);
    }
}

/* Query (row t, head h) of a sliding-window layer over its keys
 * [key_lo, pos]: the chunks that range touches, each into wp, merged in
 * chunk order. */
static void attn_window_query(struct llmk_exec *ex, const struct llmk_phase *ph, int32_t t, int h, float *wp,
                              float *scores) {
    int HD = ex->m->hp.head_dim;
    int64_t c0 = first_chunk(ex, ph->layer, t), nc = n_chunks(ex, t) - c0;
    for (int64_t c = 0; c < nc; c++) attn_part(ex, ph->layer, t, h, c0 + c, wp + c * (HD + 2), scores);
    merge_head(ex, ph->layer, h, wp, (int)nc, ex->buf[LLMK_BUF_ATT] + (int64_t)t * ex->qd + (int64_t)h * HD);
}

/* A sliding-window layer's attention for a few rows (decode): (row, head)
 * queries split statically. The single-query kernel gives the bits the
 * multi-query one does, and a chunk's keys depend only on the position, so
 * a row's result does not depend on the batch, the chunking or the thread
 * count. */
static void attn_window(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int nth, bool head_quant,
                        float *scores) {
    int H = ex->m->hp.n_head, HD = ex->m->hp.head_dim;
    int64_t lo, hi;
    float *wp = ex->wparts + (int64_t)ith * ATTN_MQ * ex->max_chunks * (HD + 2);
    llmk_split_range((int64_t)ex->n_rows * H, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) {
        int32_t t = (int32_t)(it / H);
        int h = (int)(it % H);
        attn_window_query(ex, ph, t, h, wp, scores);
        if (head_quant) quantize_part(ex, ph, ith, LLMK_BUF_ATT, t, (int64_t)h * HD, (int64_t)(h + 1) * HD);
    }
}

static void ph_attn(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int nth) {
    const llmk_hparams *hp = &ex->m->hp;
    int HD = hp->head_dim, H = hp->n_head;
    int64_t ps = HD + 2;
    float *scores = ex->wscores + (int64_t)ith * ATTN_MQ * LLMK_ATTN_CHUNK;
    bool head_quant = plan_of(ex, ph)->head_quant; /* each head's output is whole blocks of every form */
    if (ex->m->layers[ph->layer].swa && ex->n_rows <= SPLIT_ROWS) {
        attn_window(ex, ph, ith, nth, head_quant, scores);
    } else if (ex->n_rows <= SPLIT_ROWS) {
        attn_few_rows(ex, ph, ith, nth, head_quant, scores);
    } else {
        /* items are (group of up to ATTN_Q rows, batch of the query heads of
         * one KV head); a group's rows of one sequence share each chunk's
         * K/V pass across the batch's heads too (the multi-query kernel gives
         * each query the single-query bits) */
        int gs = H / hp->n_head_kv, hb = ATTN_MQ / ATTN_Q < gs ? ATTN_MQ / ATTN_Q : gs, nhb = (gs + hb - 1) / hb;
        float *wp = ex->wparts + (int64_t)ith * ATTN_MQ * ex->max_chunks * ps;
        int64_t ngroups = (ex->n_rows + ATTN_Q - 1) / ATTN_Q, units = (int64_t)hp->n_head_kv * nhb;
        float scale = (float)hp->attn_scale;
        /* claimed in order from one counter: items differ in cost (causal) */
        for (int64_t it; (it = claim_any(ex, ph, ngroups * units)) >= 0;) {
            int32_t t0 = (int32_t)(it / units) * ATTN_Q, t1 = t0 + ATTN_Q < ex->n_rows ? t0 + ATTN_Q : ex->n_rows;
            int g = (int)(it % units) / nhb, h0 = g * gs + (int)(it % units) % nhb * hb;
            int h1 = h0 + hb < (g + 1) * gs ? h0 + hb : (g + 1) * gs;
            bool shared = ex->attn_multi != NULL;
            for (int32_t t = t0 + 1; t < t1; t++) shared = shared && ex->row_seq[t] == ex->row_seq[t0];
            if (shared) {
                int64_t ncmax = 0;
                for (int32_t t = t0; t < t1; t++) ncmax = n_chunks(ex, t) > ncmax ? n_chunks(ex, t) : ncmax;
                for (int64_t c = 0; c < ncmax; c++) {
                    const float *q[ATTN_MQ];
                    int64_t n[ATTN_MQ];
                    float *pp[ATTN_MQ], *sc[ATTN_MQ];
                    int nq = 0;
                    for (int32_t t = t0; t < t1; t++) {
                        int32_t a;
                        int64_t nk = chunk_keys(ex, ph->layer, t, c, &a);
                        if (nk <= 0) continue;
                        for (int h = h0; h < h1; h++) {
                            float *part = parts_slot(ex, wp, (t - t0) * hb + h - h0) + c * ps;
                            if (a > c * LLMK_ATTN_CHUNK) { /* a window's cut chunk: keys from a */
                                attn_part(ex, ph->layer, t, h, c, part, scores + (int64_t)nq * LLMK_ATTN_CHUNK);
                                continue;
                            }
                            q[nq] = ex->buf[LLMK_BUF_Q] + (int64_t)t * ex->qd + (int64_t)h * HD;
                            n[nq] = nk, pp[nq] = part, sc[nq] = scores + (int64_t)nq * LLMK_ATTN_CHUNK;
                            nq++;
                        }
                    }
                    if (!nq) continue;
                    int32_t k0 = (int32_t)(c * LLMK_ATTN_CHUNK);
                    const unsigned char *K = kv_head(ex, ex->kv_k, ex->row_seq[t0], ph->layer, g, k0);
                    const unsigned char *V = kv_head(ex, ex->kv_v, ex->row_seq[t0], ph->layer, g, k0);
                    ex->attn_multi(nq, q, n, K, V, HD, HD, scale, pp, sc);
                }
            } else {
                for (int32_t t = t0; t < t1; t++)
                    for (int h = h0; h < h1; h++)
                        for (int64_t c = first_chunk(ex, ph->layer, t); c < n_chunks(ex, t); c++)
                            attn_part(ex, ph->layer, t, h, c, parts_slot(ex, wp, (t - t0) * hb + h - h0) + c * ps, scores);
            }
            for (int32_t t = t0; t < t1; t++)
                for (int h = h0; h < h1; h++) {
                    int64_t cf = first_chunk(ex, ph->layer, t);
                    merge_head(ex, ph->layer, h, parts_slot(ex, wp, (t - t0) * hb + h - h0) + cf * ps,
                               (int)(n_chunks(ex, t) - cf), ex->buf[LLMK_BUF_ATT] + (int64_t)t * ex->qd + (int64_t)h * HD);
                    if (head_quant)
                        quantize_part(ex, ph, ith, LLMK_BUF_ATT, t, (int64_t)h * HD, (int64_t)(h + 1) * HD);
                }
        }
    }
    if (!head_quant) {
        llmk_pool_barrier(ex->pool);
        int64_t lo, hi;
        llmk_split_range(ex->n_rows, ith, nth, &lo, &hi);
        for (int64_t t = lo; t < hi; t++) quantize_part(ex, ph, ith, LLMK_BUF_ATT, t, 0, ex->qd);
    }
}

static void ph_argmax(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int nth) {
    int64_t V = ph->rows[0], lo, hi;
    int32_t nr = ex->n_rows - ex->out_first;
    llmk_split_range(V, ith, nth, &lo, &hi);
    for (int32_t r = 0; r < nr; r++) {
        const float *l = ex->logits + (int64_t)r * V;
        /* else the argmax skips a NaN, takes a +inf, and the caller's sampler sees the row */
        if (ex->K->nonfinite(l + lo, hi - lo)) note_nonfinite(ex, ph, ith, ex->out_first + r);
        int64_t j = ex->K->argmax(l + lo, hi - lo);
        ex->argmax_val[(int64_t)ith * ex->rows_cap + r] = j < 0 ? -INFINITY : l[lo + j];
        ex->argmax_idx[(int64_t)ith * ex->rows_cap + r] = j < 0 ? -1 : (int32_t)(lo + j);
    }
    llmk_pool_barrier(ex->pool);
    if (ith != 0) return;
    for (int32_t r = 0; r < nr; r++) {
        float best = -INFINITY;
        int32_t bi = -1;
        for (int w = 0; w < nth; w++) { /* worker ranges ascend, so the first maximum wins ties */
            float v = ex->argmax_val[(int64_t)w * ex->rows_cap + r];
            int32_t i = ex->argmax_idx[(int64_t)w * ex->rows_cap + r];
            if (i >= 0 && (bi < 0 || v > best)) best = v, bi = i;
        }
        ex->argmax[r] = bi;
    }
}

/* ---- mixture of experts -------------------------------------------------- */

/* Worker ith's tile map of the call: off[n_expert + 1], the active experts
 * (active[0] of them in active[1..]), the slots in expert order and each
 * slot's position in that order (inv). Every worker builds the same map
 * from the routing (a pure function of it), so no barrier or shared write
 * is needed between the gather and the phases that read it. */
struct moe_map {
    int32_t *off, *active, *slots, *inv;
};

static struct moe_map moe_map_of(const struct llmk_exec *ex, int ith) {
    int32_t *b = ex->moe_map + (size_t)ith * ex->moe_map_stride;
    int64_t nk = (int64_t)ex->rows_cap * ex->moe_k;
    return (struct moe_map){b, b + ex->moe_x + 1, b + 2 * (ex->moe_x + 1), b + 2 * (ex->moe_x + 1) + nk};
}

static struct moe_map moe_map_build(struct llmk_exec *ex, int ith) {
    struct moe_map mp = moe_map_of(ex, ith);
    int k = ex->moe_k;
    llmk_moe_tile_map(ex->moe_sel, ex->n_rows, k, ex->moe_x, mp.off, mp.slots);
    for (int32_t p = 0; p < ex->n_rows * k; p++) mp.inv[mp.slots[p]] = p;
    mp.active[0] = 0;
    for (int32_t e = 0; e < ex->moe_x; e++)
        if (mp.off[e + 1] > mp.off[e]) mp.active[1 + mp.active[0]++] = e;
    return mp;
}

/* Router logits of rows [t0, t1) for experts [e0, e1) into l (moe_x a row). */
static void router_logits(const struct llmk_exec *ex, const struct llmk_phase *ph, int64_t t0, int64_t t1, int64_t e0,
                          int64_t e1, float *l) {
    int64_t E = ph->k;
    ex->K->f32_dots(ph->vec[0] + e0 * E, (size_t)E, e1 - e0, ex->buf[ph->in] + t0 * E, (size_t)E, t1 - t0, E, l + e0,
                    (size_t)ex->moe_x);
}

/* With fewer rows than workers (decode) the experts' dot products are split
 * among the workers into moe_logits and, after a barrier, each row's owner
 * routes it: one worker reading the f32 router alone from memory took ~8
 * us a layer (qwen3moe-shaped, 48 experts of 1024) while the others
 * waited. Otherwise each worker takes its rows a block at a time (the
 * router's rows read once per block: f32_dots). Each logit is the same
 * f32_dot whoever computes it and however many at once. */
static void ph_moe_route(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int nth) {
    enum { L_FLOATS = 4096 };
    int64_t lo, hi;
    float l[L_FLOATS]; /* n_expert <= 4096 (model.c) */
    bool split = ex->n_rows < nth;
    if (split) {
        int64_t e0, e1;
        llmk_split_range(ex->moe_x, ith, nth, &e0, &e1);
        router_logits(ex, ph, 0, ex->n_rows, e0, e1, ex->moe_logits);
        llmk_pool_barrier(ex->pool);
    }
    llmk_split_range(ex->n_rows, ith, nth, &lo, &hi);
    int64_t block = L_FLOATS / ex->moe_x;
    for (int64_t t0 = lo; t0 < hi; t0 += block) {
        int64_t t1 = t0 + block < hi ? t0 + block : hi;
        if (split) memcpy(l, ex->moe_logits + t0 * ex->moe_x, (size_t)((t1 - t0) * ex->moe_x) * sizeof *l);
        else router_logits(ex, ph, t0, t1, 0, ex->moe_x, l);
        for (int64_t t = t0; t < t1; t++) {
            float *lr = l + (t - t0) * ex->moe_x;
            if (ph->vec[1]) ex->VK->add(lr, ph->vec[1], ex->moe_x); /* the router's bias (gpt-oss) */
            if (ex->K->nonfinite(lr, ex->moe_x)) note_nonfinite(ex, ph, ith, (int32_t)t); /* the routing would be arbitrary */
            ex->K->moe_router(lr, ex->moe_x, ex->moe_k, ex->m->moe.norm_w, ex->moe_sel + t * ex->moe_k,
                              ex->moe_w + t * ex->moe_k);
        }
    }
}

/* The activation rows of buffer b in the form the plan gives weight wi of
 * ph (f32 rows for an F32 stack): base and stride. */
static const unsigned char *moe_act(const struct llmk_exec *ex, const struct llmk_phase *ph, int b, size_t *stride) {
    int f = plan_of(ex, ph)->w[0].form;
    if (f < 0) {
        *stride = (size_t)ex->width[b] * sizeof(float);
        return (const unsigned char *)ex->buf[b];
    }
    *stride = ex->act_row_bytes[b][f];
    return ex->act[b][f];
}

static void ph_moe_gather(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int nth) {
    struct moe_map mp = moe_map_build(ex, ith);
    size_t rb;
    const unsigned char *src = moe_act(ex, ph, ph->in, &rb);
    unsigned char *dst = (unsigned char *)moe_act(ex, ph, ph->out[0], &rb);
    int64_t lo, hi;
    llmk_split_range((int64_t)ex->n_rows * ex->moe_k, ith, nth, &lo, &hi);
    for (int64_t p = lo; p < hi; p++) memcpy(dst + (size_t)p * rb, src + (size_t)(mp.slots[p] / ex->moe_k) * rb, rb);
}

/* Items of a per-expert phase: (active expert, unit of its output rows),
 * statically split for a decode step, claimed for prefill (which worker
 * computes an item never changes its bits). Calls fn for each of worker
 * ith's items with the expert and rows [r0, r1). */
typedef void (*moe_item_fn)(struct llmk_exec *ex, const struct llmk_phase *ph, const struct moe_map *mp, int32_t e,
                            int64_t r0, int64_t r1, int ith);

static void moe_items(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int nth, int64_t unit, moe_item_fn fn) {
    struct moe_map mp = moe_map_of(ex, ith);
    int64_t rows = ph->rows[0], nu = (rows + unit - 1) / unit, n = (int64_t)mp.active[0] * nu;
    if (ex->n_rows > SPLIT_ROWS) {
        for (int64_t j; (j = claim_any(ex, ph, n)) >= 0;) {
            int64_t r0 = (j % nu) * unit;
            fn(ex, ph, &mp, mp.active[1 + j / nu], r0, r0 + unit < rows ? r0 + unit : rows, ith);
        }
        return;
    }
    /* A worker's consecutive items of one expert go as one call: one long
     * run of weight rows streams from memory with its prefetches running
     * ahead, where calls of one unit each started cold (qwen3moe-shaped
     * Q4_K_M decode, one thread: gate_up 5.5 -> 4.2 ms a token). A row's
     * products do not depend on the call, so neither do the bits. */
    int64_t lo, hi;
    llmk_split_range(n, ith, nth, &lo, &hi);
    for (int64_t j = lo, end; j < hi; j = end) {
        int64_t e = j / nu;
        end = (e + 1) * nu < hi ? (e + 1) * nu : hi;
        int64_t r1 = ((end - 1) % nu + 1) * unit;
        fn(ex, ph, &mp, mp.active[1 + e], (j % nu) * unit, r1 < rows ? r1 : rows, ith);
    }
}

/* Rows [r0, r1) of expert e (of `rows` each) of weight wi against its m
 * gathered activation rows, into y (row r of the expert at y[r], the next
 * activation row ys further): the r8 kernels on the repacked stack, or the
 * codec's dot on the GGUF rows, by the plan's route. */
static void moe_matvec(struct llmk_exec *ex, const struct llmk_phase *ph, int wi, int64_t e, int64_t rows, int64_t r0,
                       int64_t r1, const unsigned char *act, size_t as, int64_t m, float *y, size_t ys, int ith) {
    int route = plan_of(ex, ph)->w[wi].route;
    if (!llmk_route_r8(route)) {
        llmk_moe_expert_matvec(&ex->K->type[ph->w[wi]->type], ph->w[wi], e, r0, r1, act, as, m, y + r0, ys);
    } else {
        struct llmk_r8 v = ex->r8[((ph - ex->prog.ph) * 3 + wi) * ex->nth]; /* the whole stack */
        int64_t groups = rows / LLMK_R8_ROWS;
        v.data += (size_t)(e * groups) * (size_t)v.nb * v.block_bytes;
        v.n = rows, v.g0 = 0, v.g1 = groups;
        (route == LLMK_ROUTE_R8_A8 ? ex->K->gemm_r8_a8 : ex->K->gemm_r8_a16)(&v, r0, r1, act, as, m, y, ys,
                                                                           r8_scratch(ex, ith), ex->r8_scratch_bytes);
    }
    if (ph->wscale[wi] != 1.0f)
        for (int64_t i = 0; i < m; i++) llmk_scale_f32(y + (size_t)i * ys + r0, r1 - r0, ph->wscale[wi]);
}

/* Gate and up rows [r0, r1) of expert e for its gathered rows, SwiGLU, and
 * down's activation form of those rows (a NaN is reported at the row whose
 * slot it is). */
static void moe_gate_up_item(struct llmk_exec *ex, const struct llmk_phase *ph, const struct moe_map *mp, int32_t e,
                             int64_t r0, int64_t r1, int ith) {
    int64_t F = ph->rows[0];
    int32_t a = mp->off[e], cnt = mp->off[e + 1] - a;
    size_t as;
    const unsigned char *act = moe_act(ex, ph, ph->in, &as) + (size_t)a * as;
    float *g = ex->buf[ph->out[0]] + (int64_t)a * F, *u = ex->buf[ph->out[1]] + (int64_t)a * F;
    moe_matvec(ex, ph, 0, e, F, r0, r1, act, as, cnt, g, (size_t)F, ith);
    moe_matvec(ex, ph, 1, e, F, r0, r1, act, as, cnt, u, (size_t)F, ith);
    unsigned qmask = plan_of(ex, ph)->qmask;
    const struct llmk_moe_hp *mo = &ex->m->moe;
    for (int32_t i = 0; i < cnt; i++) {
        int64_t p = a + i;
        if (ph->vec[0]) { /* the experts' gate and up biases (gpt-oss) */
            ex->VK->add(g + i * F + r0, ph->vec[0] + e * F + r0, r1 - r0);
            ex->VK->add(u + i * F + r0, ph->vec[1] + e * F + r0, r1 - r0);
        }
        if (mo->clamp_glu) ex->K->glu->swiglu_clamp(g + i * F + r0, u + i * F + r0, r1 - r0, mo->glu_alpha, mo->glu_limit);
        else ex->VK->swiglu(g + i * F + r0, u + i * F + r0, r1 - r0);
        int bad = 0;
        for (int f = 0; f < LLMK_ACT_FORMS; f++)
            if (qmask & (1u << f))
                bad |= ex->K->act_quant[f](ex->buf[ph->out[0]] + p * F, F, r0, r1,
                                           ex->act[ph->out[0]][f] + (size_t)p * ex->act_row_bytes[ph->out[0]][f]);
        if (!qmask) bad = ex->K->nonfinite(g + i * F + r0, r1 - r0);
        if (bad) note_nonfinite(ex, ph, ith, mp->slots[p] / ex->moe_k);
    }
}

static void moe_down_item(struct llmk_exec *ex, const struct llmk_phase *ph, const struct moe_map *mp, int32_t e,
                          int64_t r0, int64_t r1, int ith) {
    int64_t E = ph->rows[0];
    int32_t a = mp->off[e], cnt = mp->off[e + 1] - a;
    size_t as;
    const unsigned char *act = moe_act(ex, ph, ph->in, &as) + (size_t)a * as;
    float *y = ex->buf[ph->out[0]] + (int64_t)a * E;
    moe_matvec(ex, ph, 0, e, E, r0, r1, act, as, cnt, y, (size_t)E, ith);
    for (int32_t i = 0; ph->vec[0] && i < cnt; i++) ex->VK->add(y + i * E + r0, ph->vec[0] + e * E + r0, r1 - r0);
}

static void ph_moe_gate_up(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int nth) {
    moe_items(ex, ph, ith, nth, plan_of(ex, ph)->unit, moe_gate_up_item);
}

static void ph_moe_down(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int nth) {
    moe_items(ex, ph, ith, nth, ex->n_rows > SPLIT_ROWS ? R8_CHUNK : MM_UNIT, moe_down_item);
}

static void ph_moe_combine(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int nth) {
    struct moe_map mp = moe_map_of(ex, ith);
    int64_t lo, hi, E = ph->rows[0];
    int k = ex->moe_k;
    llmk_split_range(ex->n_rows, ith, nth, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        const float *ys[LLMK_MOE_KMAX];
        for (int j = 0; j < k; j++) ys[j] = ex->buf[ph->in] + (int64_t)mp.inv[t * k + j] * E;
        ex->K->moe_combine(ex->buf[ph->out[0]] + t * E, ys, ex->moe_w + t * k, k, E);
    }
}

static void run_phase(struct llmk_exec *ex, const struct llmk_phase *ph, int ith, int nth) {
    switch (ph->op) {
    case LLMK_OP_EMBED: ph_embed(ex, ph, ith, nth); break;
    case LLMK_OP_NORM_QUANT: ph_norm(ex, ph, ith, nth); break;
    case LLMK_OP_MATMUL: ph_matmul(ex, ph, ith, nth); break;
    case LLMK_OP_ROPE_KV: ph_rope_kv(ex, ph, ith, nth); break;
    case LLMK_OP_ATTN: ph_attn(ex, ph, ith, nth); break;
    case LLMK_OP_ARGMAX: ph_argmax(ex, ph, ith, nth); break;
    case LLMK_OP_MOE_ROUTE: ph_moe_route(ex, ph, ith, nth); break;
    case LLMK_OP_MOE_GATHER: ph_moe_gather(ex, ph, ith, nth); break;
    case LLMK_OP_MOE_GATE_UP: ph_moe_gate_up(ex, ph, ith, nth); break;
    case LLMK_OP_MOE_DOWN: ph_moe_down(ex, ph, ith, nth); break;
    case LLMK_OP_MOE_COMBINE: ph_moe_combine(ex, ph, ith, nth); break;
    case LLMK_OP_POST_NORM: ph_post_norm(ex, ph, ith, nth); break;
    default: LLMK_CHECK(!"unknown op");
    }
}

/* Decode: the first group (at most NEXT_RUN_BYTES) of each of the
 * LLMK_R8_RUNS runs this worker's share of the next matmul starts with,
 * fetched into L2 before the barrier. The kernels prefetch 4 KB ahead of
 * where they read, so without this a run's start arrives as demand misses,
 * 4 runs per weight, ~150 short phases per token. (A full 4 KB per run
 * where groups are smaller, 2.9 KB at k = 576: no better, 0.92 and 0.98.) */
static void prefetch_next_runs(const struct llmk_exec *ex, int i, int ith) {
    for (int j = i + 1; j < ex->ph_hi; j++) {
        const struct llmk_phase *ph = &ex->prog.ph[j];
        if (ph->final && !ex->run_final) return;
        if (ph->op != LLMK_OP_MATMUL) continue;
        int32_t t0, t1;
        rows_of(ex, ph, &t0, &t1);
        if (t1 - t0 != 1 || !ex->r8_arena) return;
        for (int wi = 0; wi < ph->n_w; wi++) {
            const struct llmk_r8 *w = &ex->r8[((ph - ex->prog.ph) * 3 + wi) * ex->nth + ith];
            int64_t r0, r1;
            mm_share(ex, ph, wi, ith, ex->nth, &r0, &r1);
            if (!w->data || r0 >= r1) continue;
            int64_t g0 = r0 / 8, g1 = (r1 + 7) / 8, len = (g1 - g0 + LLMK_R8_RUNS - 1) / LLMK_R8_RUNS;
            size_t gb = (size_t)w->nb * w->block_bytes;
            for (int64_t g = g0; g < g1; g += len) {
                const char *p = (const char *)w->data + (size_t)(g - w->g0) * gb;
                size_t n = gb < NEXT_RUN_BYTES ? gb : NEXT_RUN_BYTES; /* its first group */
                for (size_t o = 0; o < n; o += 64) __builtin_prefetch(p + o, 0, 2);
            }
        }
        return;
    }
}

static void worker(void *ctx, int ith, int nth) {
    struct llmk_exec *ex = ctx;
    for (int i = ex->ph_lo; i < ex->ph_hi; i++) {
        const struct llmk_phase *ph = &ex->prog.ph[i];
        if (ph->final && !ex->run_final) break; /* final phases are last */
        run_phase(ex, ph, ith, nth);
        if (ex->prefetch_next) prefetch_next_runs(ex, i, ith);
        /* a Q/K/V matmul split by heads feeds its RoPE phase worker-locally */
        if (i + 1 < ex->ph_hi && !rope_fused(ex, ph) && !dup_norm(ex, ph)) llmk_pool_barrier(ex->pool);
    }
}

/* After a run: LLMK_NAN_INPUT naming the first NaN or infinity the workers
 * met (phase, sequence, position), else LLMK_OK. */
static int nonfinite_status(const struct llmk_exec *ex) {
    struct nonfinite f = {INT32_MAX, INT32_MAX};
    for (int w = 0; w < ex->nth; w++)
        if (ex->nf[w].phase < f.phase || (ex->nf[w].phase == f.phase && ex->nf[w].row < f.row)) f = ex->nf[w];
    if (f.phase == INT32_MAX) return LLMK_OK;
    const struct llmk_phase *ph = &ex->prog.ph[f.phase];
    int32_t seq = ex->row_seq[f.row], pos = ex->row_pos[f.row];
    if (ph->op == LLMK_OP_ARGMAX) {
        int64_t V = ph->rows[0], j = 0;
        const float *l = ex->logits + (int64_t)(f.row - ex->out_first) * V;
        while (j < V - 1 && isfinite(l[j])) j++;
        return llmk_fail(LLMK_NAN_INPUT, "exec: logit of token %lld is %g (sequence %d, position %d): the LM head "
                         "gave a NaN or infinity (phase %d, %s)", (long long)j, (double)l[j], seq, pos, f.phase - 1,
                         ph[-1].name);
    }
    const char *what = ph->op == LLMK_OP_ROPE_KV ? "q, k or v" : ph->op == LLMK_OP_ATTN ? "the attention output"
                     : ph->op == LLMK_OP_MATMUL ? "the SwiGLU output"
                     : ph->op == LLMK_OP_MOE_GATE_UP ? "an expert's SwiGLU output"
                     : ph->op == LLMK_OP_MOE_ROUTE ? "the router logits" : "the normed activations";
    return llmk_fail(LLMK_NAN_INPUT, "exec: NaN or infinity in %s of phase %d (%s), sequence %d, position %d: a "
                     "weight or activation at or before it is not finite", what, f.phase, ph->name, seq, pos);
}

/* The hidden-state output (llmk_exec_eval_hidden), in place of the final
 * phases: output_norm's RMSNorm of rows out_first.. straight into the
 * caller's rows. The same kernel on the same operands as ph_norm, so a row
 * holds the bits the LM head's activations are quantized from; it is
 * checked here because no quantizer reads it. */
static void hidden_worker(void *ctx, int ith, int nth) {
    struct llmk_exec *ex = ctx;
    const struct llmk_phase *ph = &ex->prog.ph[ex->prog.n_layer_phases];
    int64_t E = ph->rows[0], lo, hi;
    llmk_split_range(ex->n_rows - ex->out_first, ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        int32_t t = ex->out_first + (int32_t)r;
        float *y = ex->hidden + r * E;
        ex->K->rmsnorm(y, ex->buf[ph->in] + t * E, ph->vec[0], E, (float)ex->m->hp.rms_eps);
        if (ex->K->nonfinite(y, E)) note_nonfinite(ex, ph, ith, t);
    }
}

static void run_hidden(struct llmk_exec *ex) {
    const struct llmk_phase *ph = &ex->prog.ph[ex->prog.n_layer_phases];
    LLMK_CHECK(!ex->run_final && ph->op == LLMK_OP_NORM_QUANT && ph->final);
    double t = ex->phase_mode ? now_ns(ex) : 0;
    llmk_pool_run(ex->pool, hidden_worker, ex);
    if (ex->phase_mode) ex->phase_ns[ex->prog.n_layer_phases] += now_ns(ex) - t; /* output_norm's time */
}

static int run_program(struct llmk_exec *ex) {
    int n = ex->run_final ? ex->prog.n_phases : ex->prog.n_layer_phases;
    if (ex->n_rows > SPLIT_ROWS) /* the pool's start orders these before any claim */
        for (int64_t i = 0; i < (int64_t)n * ex->nth; i++)
            atomic_store_explicit(&ex->claims[i * CLAIM_STRIDE], 0, memory_order_relaxed);
    for (int w = 0; w < ex->nth; w++) ex->nf[w] = (struct nonfinite){INT32_MAX, INT32_MAX};
    attn_units_build(ex);
    if (!ex->phase_mode) {
        ex->ph_lo = 0, ex->ph_hi = n;
        llmk_pool_run(ex->pool, worker, ex);
    } else {
        for (int i = 0; i < n; i++) {
            ex->ph_lo = i, ex->ph_hi = i + 1;
            double t = now_ns(ex);
            llmk_pool_run(ex->pool, worker, ex);
            ex->phase_ns[i] += now_ns(ex) - t;
        }
    }
    if (ex->hidden) run_hidden(ex);
    return nonfinite_status(ex);
}

/* ---- lifetime ------------------------------------------------------------ */

enum { PACK_CHUNK = 64 }; /* groups (512 rows) read and packed at a time */

/* Groups [g0, g1) of t into w, PACK_CHUNK groups at a time: each chunk's
 * rows are read from the file into rows (PACK_CHUNK * 8 of t's rows), so
 * the file's copy never becomes resident beside the repacked one (peak RSS
 * 217 MB for SmolLM2's 98 MB file when packed through the mapping, and
 * still 200 MB on CI's machines when released behind the packing). Without
 * a buffer the rows come from the mapping, and are released after. */
static void pack_from_file(const llmk_gguf *gg, const llmk_tensor_info *t, struct llmk_r8 *w, int64_t g0, int64_t g1,
                           unsigned char *rows) {
    uint64_t row = t->n_bytes / t->ne[1];
    for (int64_t g = g0; g < g1; g += PACK_CHUNK) {
        int64_t ge = g + PACK_CHUNK < g1 ? g + PACK_CHUNK : g1;
        uint64_t r0 = (uint64_t)g * LLMK_R8_ROWS, r1 = (uint64_t)ge * LLMK_R8_ROWS;
        if (r1 > t->ne[1]) r1 = t->ne[1];
        const unsigned char *src = (const unsigned char *)t->data + r0 * row;
        if (rows) {
            llmk_gguf_read_range(gg, src, (r1 - r0) * row, rows);
            llmk_r8_pack_rows(t, rows, w, g, ge);
        } else {
            llmk_r8_pack(t, w, g, ge);
        }
        /* the pages other reads mapped around a small tensor beside it */
        llmk_gguf_release_range(gg, src, (r1 - r0) * row);
    }
}

/* Each worker packs its own shares of the r8 weights (96 MB for SmolLM2:
 * the init's largest cost), so the pages it streams are its own first.
 * One region per phase (ex->repack_phase), so that the caller can report
 * progress and cancel between phases. */
static void repack_worker(void *ctx, int ith, int nth) {
    struct llmk_exec *ex = ctx;
    int i0 = ex->repack_phase * 3;
    uint64_t row_max = 0;
    for (int i = i0; i < i0 + 3; i++) {
        const llmk_tensor_info *t = ex->r8[i * nth + ith].data ? ex->prog.ph[i / 3].w[i % 3] : NULL;
        if (t && t->n_bytes / t->ne[1] > row_max) row_max = t->n_bytes / t->ne[1];
    }
    unsigned char *rows = row_max ? malloc((size_t)row_max * PACK_CHUNK * LLMK_R8_ROWS) : NULL;
    for (int i = i0; i < i0 + 3; i++) {
        struct llmk_r8 *w = &ex->r8[i * nth + ith];
        if (w->data && w->g1 > w->g0) pack_from_file(ex->m->gguf, ex->prog.ph[i / 3].w[i % 3], w, w->g0, w->g1, rows);
    }
    free(rows);
}

/* The KV cache's bytes per head row and per position. */
static void exec_kv_layout(struct llmk_exec *ex, uint32_t kvt) {
    const llmk_hparams *hp = &ex->m->hp;
    ex->kv_type = kvt;
    if (kvt == LLMK_TYPE_Q8_0) ex->kv_row_bytes = (size_t)(hp->head_dim / 32) * llmk_type_block_bytes(LLMK_TYPE_Q8_0);
    else ex->kv_row_bytes = (size_t)hp->head_dim * (kvt == LLMK_TYPE_F16 ? 2 : 4);
    ex->kv_pos_bytes = (size_t)hp->n_head_kv * ex->kv_row_bytes;
}

/* The plan, and the kernels of the cache's type from its vector set. */
static int exec_plan(struct llmk_exec *ex) {
    const llmk_config *cf = llmk_cfg();
    struct llmk_plan_options o = {.act_q8 = cf->act_q8, .act_a8 = cf->act_a8, .repack = cf->repack,
                                   .portable = cf->portable_records, .f32_act = cf->f32_act};
    int st = llmk_plan_build(&ex->prog, llmk_kernels(), &o, ex->nth, &ex->plan);
    if (st != LLMK_OK) return st;
    ex->K = ex->plan.K, ex->VK = ex->plan.VK;
    if (ex->kv_type == LLMK_TYPE_Q8_0) {
        ex->kv_quant = llmk_codec_get(LLMK_TYPE_Q8_0)->quantize;
        ex->attn = ex->VK->attn_q8_0;
    } else {
        bool f16 = ex->kv_type == LLMK_TYPE_F16;
        ex->attn = f16 ? ex->VK->attn_f16 : ex->VK->attn_f32;
        ex->attn_multi = f16 ? ex->VK->attn_multi_f16 : ex->VK->attn_multi_f32;
    }
    ex->prefetch_next = cf->prefetch_next; /* off for A/B runs */
    ex->clock_thread = cf->phase_clock_thread;
    return LLMK_OK;
}

/* The parameters, checked, with their defaults: the KV type, the context,
 * sequences and batch rows. */
static int exec_params(const struct llmk_model *m, const struct llmk_exec_params *p, uint32_t *kvt, int32_t *n_ctx,
                       int32_t *n_seq, int32_t *n_batch, int32_t *n_blocks) {
    const llmk_hparams *hp = &m->hp;
    *kvt = p->kv_type ? p->kv_type : llmk_cfg()->kv_type; /* callers that do not choose follow the configuration */
    if (*kvt != LLMK_TYPE_F32 && *kvt != LLMK_TYPE_F16 && *kvt != LLMK_TYPE_Q8_0)
        return llmk_fail(LLMK_UNSUPPORTED, "exec: KV cache type %s (f32, f16 and q8_0 are implemented)",
                         llmk_type_name(*kvt) ? llmk_type_name(*kvt) : "unknown");
    if (*kvt == LLMK_TYPE_Q8_0 && (hp->head_dim <= 0 || hp->head_dim % 32 != 0))
        return llmk_fail(LLMK_UNSUPPORTED, "exec: a q8_0 KV cache stores each head's row as 32-value blocks; "
                         "head_dim %d is not a multiple of 32", hp->head_dim);
    *n_ctx = p->n_ctx > 0 ? p->n_ctx : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    if (*n_ctx < 1 || *n_ctx > (1 << 22))
        return llmk_fail(LLMK_INVALID_ARGUMENT, "exec: n_ctx %d outside [1, %d]", *n_ctx, 1 << 22);
    *n_seq = p->n_seq > 0 ? p->n_seq : 1, *n_batch = p->n_batch > 0 ? p->n_batch : 512;
    if (*n_seq > 1024 || *n_batch > 8192)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "exec: n_seq %d (max 1024) or n_batch %d (max 8192)", *n_seq, *n_batch);
    int64_t per_seq = (*n_ctx + LLMK_KV_BLOCK - 1) / LLMK_KV_BLOCK, blocks = p->n_kv_blocks > 0 ? p->n_kv_blocks
                                                                                                 : *n_seq * per_seq;
    if (blocks > (1 << 24))
        return llmk_fail(LLMK_INVALID_ARGUMENT, "exec: %lld KV blocks (max %d)", (long long)blocks, 1 << 24);
    *n_blocks = (int32_t)blocks;
    return LLMK_OK;
}

/* KV cache, positions, RoPE table and the activation buffers. */
static int exec_alloc_state(struct llmk_exec *ex) {
    const llmk_hparams *hp = &ex->m->hp;
    int st = LLMK_OK;
    uint64_t rc = (uint64_t)ex->rows_cap, cells = (uint64_t)ex->n_blocks * hp->n_layer * LLMK_KV_BLOCK;
    if (!llmk_mul_u64(cells, ex->kv_pos_bytes, &ex->kv_bytes)) return llmk_fail(LLMK_OUT_OF_MEMORY, "exec: KV cache size overflows");
    ex->kv_k = pages_or_fail(ex->kv_bytes, &st);
    ex->kv_v = pages_or_fail(ex->kv_bytes, &st);
    llmk_kvpool_params kp = {.n_blocks = ex->n_blocks, .block_size = LLMK_KV_BLOCK, .n_seq_max = ex->n_seq,
                             .max_blocks_per_seq = (ex->n_ctx + LLMK_KV_BLOCK - 1) / LLMK_KV_BLOCK,
                             .n_layers = hp->n_layer, .n_kv_heads = hp->n_head_kv, .head_dim = hp->head_dim,
                             .dtype_bytes = (double)ex->kv_row_bytes / hp->head_dim};
    if (st == LLMK_OK) st = llmk_kvpool_init(&kp, &ex->kvp);
    ex->table = xalloc((uint64_t)ex->n_seq, sizeof *ex->table, &st);
    for (int32_t s = 0; st == LLMK_OK && s < ex->n_seq; s++) ex->table[s] = llmk_kvpool_table_array(ex->kvp, s);
    ex->pos = xalloc((uint64_t)ex->n_seq, sizeof(int32_t), &st);
    ex->rope_cs = xalloc((uint64_t)ex->n_ctx * 2 * (uint64_t)(hp->head_dim / 2), sizeof(float), &st);
    if (ex->m->rope_inv_freq_swa)
        ex->rope_cs_swa = xalloc((uint64_t)ex->n_ctx * 2 * (uint64_t)(hp->head_dim / 2), sizeof(float), &st);
    int64_t fe = ex->m->moe.n_ff_exp;
    int64_t widths[LLMK_BUF_COUNT_] = {hp->n_embd, hp->n_embd, ex->qd, ex->kvd, ex->kvd, ex->qd,
                                       hp->n_embd, hp->n_ff, hp->n_ff, hp->n_vocab, hp->n_embd, fe, fe, hp->n_embd};
    for (int b = 0; b < LLMK_BUF_COUNT_; b++) {
        ex->width[b] = widths[b];
        uint64_t rows = b == LLMK_BUF_LOGITS ? (uint64_t)ex->n_seq : b >= LLMK_BUF_XG ? rc * (uint64_t)ex->moe_k : rc;
        ex->buf[b] = xalloc(rows * (uint64_t)widths[b], sizeof(float), &st);
    }
    return st;
}

/* The caller's progress callback: false when it asks to stop. */
static bool report(const struct llmk_exec_params *p, double fraction) {
    return !p->progress || p->progress((float)fraction, p->progress_user);
}

static int cancelled(double fraction) {
    return llmk_fail(LLMK_INTERRUPTED, "exec: init cancelled by the progress callback at %.0f%%", 100 * fraction);
}

/* Whether phase i has a weight on a repacked route; its bytes in the file. */
static bool moe_weights(const struct llmk_phase *ph) {
    return ph->op == LLMK_OP_MOE_GATE_UP || ph->op == LLMK_OP_MOE_DOWN;
}

static bool phase_repacked(const struct llmk_exec *ex, int i, uint64_t *bytes) {
    const struct llmk_phase *ph = &ex->prog.ph[i];
    *bytes = 0;
    for (int w = 0; w < ph->n_w && (ph->op == LLMK_OP_MATMUL || moe_weights(ph)); w++) {
        int route = ex->plan.ph[i].w[w].route;
        if (route == LLMK_ROUTE_X2_Q8_1X || llmk_route_r8(route)) *bytes += ph->w[w]->n_bytes;
    }
    return *bytes > 0;
}

/* Phase i's repacked weights: X2 per tensor here, r8 by the workers into
 * their views of the plan's arena. */
static int repack_phase(struct llmk_exec *ex, int i) {
    const struct llmk_phase *ph = &ex->prog.ph[i];
    bool r8 = false;
    for (int w = 0; w < ph->n_w && moe_weights(ph); w++) { /* a whole stack, packed here */
        if (!llmk_route_r8(ex->plan.ph[i].w[w].route)) continue;
        llmk_tensor_info f = llmk_plan_flat_experts(ph->w[w]);
        struct llmk_r8 *v = &ex->r8[(size_t)(i * 3 + w) * (size_t)ex->nth];
        int64_t groups = (int64_t)f.ne[1] / LLMK_R8_ROWS;
        llmk_r8_place_view(&f, ex->plan.r8_forms, v, ex->r8_arena + ex->plan.r8_off[(size_t)(i * 3 + w) * (size_t)ex->nth], 0, groups);
        unsigned char *rows = malloc((size_t)(f.n_bytes / f.ne[1]) * PACK_CHUNK * LLMK_R8_ROWS);
        pack_from_file(ex->m->gguf, &f, v, 0, groups, rows);
        free(rows);
    }
    for (int w = 0; w < ph->n_w && ph->op == LLMK_OP_MATMUL; w++) {
        int route = ex->plan.ph[i].w[w].route, st;
        if (route == LLMK_ROUTE_X2_Q8_1X) { /* then its file pages go, as repack_worker's */
            if ((st = llmk_q4_1_x2_repack(ph->w[w], &ex->x2[i * 3 + w])) != LLMK_OK) return st;
            llmk_gguf_release_range(ex->m->gguf, ph->w[w]->data, ph->w[w]->n_bytes);
        }
        for (int ith = 0; llmk_route_r8(route) && ith < ex->nth; ith++) {
            int64_t r0, r1;
            llmk_plan_share(&ex->plan, i, w, ith, &r0, &r1);
            int64_t g0 = r0 / LLMK_R8_ROWS, g1 = r1 > r0 ? (r1 + LLMK_R8_ROWS - 1) / LLMK_R8_ROWS : g0;
            size_t k = (size_t)(i * 3 + w) * (size_t)ex->nth + (size_t)ith;
            llmk_r8_place_view(ph->w[w], ex->plan.r8_forms, &ex->r8[k], ex->r8_arena + ex->plan.r8_off[k], g0, g1);
            r8 = true;
        }
    }
    if (r8) {
        ex->repack_phase = i;
        llmk_pool_run(ex->pool, repack_worker, ex);
    }
    return LLMK_OK;
}

/* The repacked weights the plan routes through them, phase by phase; the
 * progress is the share of their file bytes done. */
static int exec_repack(struct llmk_exec *ex, const struct llmk_exec_params *p) {
    int st = LLMK_OK;
    ex->x2 = xalloc((uint64_t)ex->prog.n_phases * 3, sizeof *ex->x2, &st);
    ex->r8 = xalloc((uint64_t)ex->prog.n_phases * 3 * (uint64_t)ex->nth, sizeof *ex->r8, &st);
    if (st != LLMK_OK) return st;
    if (ex->plan.r8_bytes && !(ex->r8_arena = llmk_r8_buffer(ex->plan.r8_bytes)))
        return llmk_fail(LLMK_OUT_OF_MEMORY, "exec: %zu bytes of repacked weights", ex->plan.r8_bytes);
    uint64_t total = 0, done = 0, b;
    for (int i = 0; i < ex->prog.n_phases; i++)
        if (phase_repacked(ex, i, &b)) total += b;
    if (!report(p, 0.0)) return cancelled(0.0);
    for (int i = 0; i < ex->prog.n_phases; i++) {
        if (!phase_repacked(ex, i, &b)) continue;
        if ((st = repack_phase(ex, i)) != LLMK_OK) return st;
        done += b;
        /* below 1 until the whole init has succeeded */
        double f = 0.99 * (double)done / (double)total;
        if (!report(p, f)) return cancelled(f);
    }
    return LLMK_OK;
}

/* Quantized forms of each matmul input the plan asks for, attention
 * partials, claim counters, per-worker scratch and the per-row arrays. */
static int exec_alloc_scratch(struct llmk_exec *ex) {
    const llmk_hparams *hp = &ex->m->hp;
    uint64_t rc = (uint64_t)ex->rows_cap;
    int st = LLMK_OK;
    for (int b = 0; b < LLMK_BUF_COUNT_; b++)
        for (int f = 0; f < LLMK_ACT_FORMS; f++)
            if (ex->plan.need[b] & (1u << f)) {
                uint64_t rb;
                if (f == LLMK_ACT_Q8_1X) rb = llmk_q8_1x_row_bytes(ex->width[b]);
                else if (f == LLMK_ACT_A16) rb = llmk_a16_row_bytes(ex->width[b]);
                else if (f == LLMK_ACT_A8) rb = llmk_a8_row_bytes(ex->width[b]);
                else if ((st = llmk_row_bytes(f == LLMK_ACT_Q8_0 ? LLMK_TYPE_Q8_0 : f == LLMK_ACT_Q8_1 ? LLMK_TYPE_Q8_1
                                              : LLMK_TYPE_Q8_K, (uint64_t)ex->width[b], &rb)) != LLMK_OK)
                    return st;
                ex->act_row_bytes[b][f] = (size_t)rb;
                ex->act[b][f] = xalloc(b >= LLMK_BUF_XG ? rc * (uint64_t)ex->moe_k : rc, rb, &st);
            }
    int64_t ps = hp->head_dim + 2;
    ex->parts = xalloc((uint64_t)SPLIT_ROWS * hp->n_head * (uint64_t)ex->max_chunks, (uint64_t)ps * sizeof(float), &st);
    ex->units = xalloc((uint64_t)SPLIT_ROWS * (uint64_t)ex->max_chunks, sizeof *ex->units, &st);
    ex->wparts = xalloc((uint64_t)ex->nth * ATTN_MQ * (uint64_t)ex->max_chunks, (uint64_t)ps * sizeof(float), &st);
    ex->wscores = xalloc((uint64_t)ex->nth * ATTN_MQ * LLMK_ATTN_CHUNK, sizeof(float), &st);
    ex->claims = xalloc((uint64_t)ex->prog.n_phases * (uint64_t)ex->nth * CLAIM_STRIDE, sizeof *ex->claims, &st);
    bool dup = false;
    for (int i = 0; i < ex->prog.n_phases; i++) dup = dup || ex->plan.ph[i].a16_only;
    if (dup) {
        ex->dup_rows_bytes = ((size_t)hp->n_embd * sizeof(float) + DUP_ROWS * llmk_a16_row_bytes(hp->n_embd) + 63) / 64 * 64;
        ex->dup_rows = xalloc((uint64_t)ex->nth, ex->dup_rows_bytes, &st);
    }
    int64_t kmax = 0;
    for (int i = 0; i < ex->prog.n_phases; i++) kmax = ex->prog.ph[i].k > kmax ? ex->prog.ph[i].k : kmax;
    ex->r8_scratch_bytes = (llmk_r8_scratch_bytes(kmax, LLMK_R8_TABLE_ROWS) + 63) / 64 * 64;
    if (ex->plan.r8_bytes) ex->r8_scratch = xalloc((uint64_t)ex->nth, ex->r8_scratch_bytes, &st);
    else ex->r8_scratch_bytes = 0;
    ex->argmax_val = xalloc((uint64_t)ex->nth * rc, sizeof(float), &st);
    ex->argmax_idx = xalloc((uint64_t)ex->nth * rc, sizeof(int32_t), &st);
    ex->argmax = xalloc(rc, sizeof(int32_t), &st);
    ex->nf = xalloc((uint64_t)ex->nth, sizeof *ex->nf, &st);
    ex->row_id = xalloc(rc, sizeof(int32_t), &st);
    ex->row_seq = xalloc(rc, sizeof(int32_t), &st);
    ex->row_pos = xalloc(rc, sizeof(int32_t), &st);
    ex->phase_ns = xalloc((uint64_t)ex->prog.n_phases, sizeof(double), &st);
    if (ex->moe_k) {
        uint64_t nk = rc * (uint64_t)ex->moe_k;
        ex->moe_sel = xalloc(nk, sizeof(int32_t), &st);
        ex->moe_w = xalloc(nk, sizeof(float), &st);
        ex->moe_logits = xalloc((uint64_t)ex->nth * (uint64_t)ex->moe_x, sizeof(float), &st); /* rows < nth */
        ex->moe_map_stride = (size_t)(2 * ((uint64_t)ex->moe_x + 1) + 2 * nk + 15) / 16 * 16; /* own cache lines */
        ex->moe_map = xalloc((uint64_t)ex->nth * ex->moe_map_stride, sizeof(int32_t), &st);
    }
    ex->gen_row = xalloc(rc, sizeof(int32_t), &st);
    ex->run_count = xalloc((uint64_t)ex->n_seq, sizeof(int32_t), &st);
    ex->run_seqs = xalloc(rc, sizeof(int32_t), &st);
    ex->run_ids = xalloc(rc, sizeof(int32_t), &st);
    ex->gen_next = xalloc((uint64_t)ex->n_seq, sizeof(int32_t), &st);
    ex->gen_count = xalloc((uint64_t)ex->n_seq, sizeof(int32_t), &st);
    int64_t mk = hp->n_embd > hp->n_ff ? hp->n_embd : hp->n_ff;
    ex->f32_row_stride = (ex->qd > mk ? ex->qd : mk) + 16;
    if (ex->plan.any_f32_check) ex->f32_rows = xalloc((uint64_t)ex->nth * (uint64_t)ex->f32_row_stride, sizeof(float), &st);
    return st;
}

/* cos/sin per position: angles in double, rounded once to f32. */
static void exec_rope_table(struct llmk_exec *ex) {
    int half = ex->m->hp.head_dim / 2;
    llmk_rope_cs_table(ex->m->rope_inv_freq, half, ex->n_ctx, ex->m->hp.rope_attn_factor, ex->rope_cs);
    if (ex->rope_cs_swa) llmk_rope_cs_table(ex->m->rope_inv_freq_swa, half, ex->n_ctx, 1.0, ex->rope_cs_swa);
}

int llmk_exec_init(const struct llmk_model *m, const struct llmk_exec_params *p, struct llmk_exec **out) {
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_exec_init: out is NULL");
    *out = NULL;
    if (!m) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_exec_init: model is NULL");
    struct llmk_exec_params dp = {0};
    if (!p) p = &dp;
    uint32_t kvt = 0;
    int32_t n_ctx = 0, n_seq = 0, n_batch = 0, n_blocks = 0;
    int st = exec_params(m, p, &kvt, &n_ctx, &n_seq, &n_batch, &n_blocks);
    if (st != LLMK_OK) return st;
    struct llmk_exec *ex = calloc(1, sizeof *ex);
    if (!ex) return llmk_fail(LLMK_OUT_OF_MEMORY, "exec: struct");
    ex->m = m;
    ex->moe_k = m->moe.n_used, ex->moe_x = m->moe.n_expert;
    ex->n_ctx = n_ctx, ex->n_seq = n_seq, ex->n_batch = n_batch, ex->n_blocks = n_blocks;
    ex->rows_cap = n_batch > n_seq ? n_batch : n_seq;
    ex->kvd = (int64_t)m->hp.n_head_kv * m->hp.head_dim;
    ex->qd = (int64_t)m->hp.n_head * m->hp.head_dim;
    ex->max_chunks = (n_ctx + LLMK_ATTN_CHUNK - 1) / LLMK_ATTN_CHUNK;
    exec_kv_layout(ex, kvt);
    st = exec_check_budget(ex, p);
    if (st == LLMK_OK) st = llmk_program_build(m, &ex->prog);
    if (st == LLMK_OK) st = llmk_pool_create(p->n_threads, &ex->pool);
    if (st == LLMK_OK && (ex->nth = llmk_pool_size(ex->pool)) > MAX_WORKERS)
        st = llmk_fail(LLMK_INVALID_ARGUMENT, "exec: %d threads (max %d)", ex->nth, MAX_WORKERS);
    if (st == LLMK_OK) st = exec_plan(ex);
    if (st == LLMK_OK) st = exec_alloc_state(ex);
    if (st == LLMK_OK) st = exec_repack(ex, p);
    if (st == LLMK_OK) st = exec_alloc_scratch(ex);
    if (st == LLMK_OK) exec_rope_table(ex);
    if (st == LLMK_OK && !report(p, 1.0)) st = cancelled(1.0);
    if (st != LLMK_OK) {
        llmk_exec_free(ex);
        return st;
    }
    *out = ex;
    return LLMK_OK;
}

void llmk_exec_free(struct llmk_exec *ex) {
    if (!ex) return;
    if (ex->pool) llmk_pool_free(ex->pool);
    for (int i = 0; ex->x2 && i < ex->prog.n_phases * 3; i++) llmk_q4_1_x2_free(&ex->x2[i]);
    free(ex->x2);
    for (int i = 0; ex->r8 && i < ex->prog.n_phases * 3 * ex->nth; i++) llmk_r8_free(&ex->r8[i]);
    free(ex->r8);
    free(ex->r8_arena);
    llmk_plan_free(&ex->plan);
    llmk_program_free(&ex->prog);
    llmk_pages_free(ex->kv_k, ex->kv_bytes), llmk_pages_free(ex->kv_v, ex->kv_bytes), free(ex->pos), free(ex->rope_cs);
    free(ex->rope_cs_swa);
    llmk_kvpool_free(ex->kvp), free(ex->table);
    for (int b = 0; b < LLMK_BUF_COUNT_; b++) {
        free(ex->buf[b]);
        for (int f = 0; f < LLMK_ACT_FORMS; f++) free(ex->act[b][f]);
    }
    free(ex->parts), free(ex->units), free(ex->wparts), free(ex->wscores), free(ex->dup_rows), free(ex->claims);
    free(ex->r8_scratch);
    free(ex->argmax_val), free(ex->argmax_idx), free(ex->argmax), free(ex->nf);
    free(ex->row_id), free(ex->row_seq), free(ex->row_pos), free(ex->phase_ns), free(ex->f32_rows);
    free(ex->gen_row), free(ex->gen_next), free(ex->gen_count);
    free(ex->moe_sel), free(ex->moe_w), free(ex->moe_map), free(ex->moe_logits);
    free(ex->run_count), free(ex->run_seqs), free(ex->run_ids);
    free(ex);
}

/* ---- calls --------------------------------------------------------------- */

static int check_ids(const struct llmk_exec *ex, const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= ex->m->hp.n_vocab)
            return llmk_fail(LLMK_INVALID_TOKEN, "exec: token id %d (index %zu) outside the vocabulary [0, %d)", ids[i],
                             i, ex->m->hp.n_vocab);
    return LLMK_OK;
}

/* Give sequence seq blocks for n more tokens (starting the slot, with no
 * prefix, if it is empty): LLMK_CACHE_CAPACITY_EXCEEDED when the pool
 * cannot, nothing changed. */
static int seq_append(struct llmk_exec *ex, int32_t seq, const int32_t *ids, size_t n) {
    int st = LLMK_OK;
    if (!llmk_kvpool_active(ex->kvp, seq)) st = llmk_kvpool_start(ex->kvp, seq, NULL, 0, NULL);
    if (st == LLMK_OK) st = llmk_kvpool_append(ex->kvp, seq, ids, (int32_t)n);
    return st;
}

/* Undo appends whose K/V a failed run did not (all) write: back to pos. */
static void seq_rollback(struct llmk_exec *ex, int32_t seq, int32_t pos) {
    if (llmk_kvpool_active(ex->kvp, seq)) LLMK_CHECK(llmk_kvpool_rollback(ex->kvp, seq, pos) == LLMK_OK);
    ex->pos[seq] = pos;
}

/* llmk_exec_eval and llmk_exec_eval_hidden: out holds logits (n_vocab per
 * row) or, with hidden, final hidden states (n_embd per row). */
static int exec_eval(struct llmk_exec *ex, int32_t seq, const int32_t *ids, size_t n, float *out, size_t cap,
                     bool all_positions, bool hidden) {
    if (!ex || (!ids && n)) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_exec_eval: NULL argument");
    if (n == 0) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_exec_eval: no tokens");
    if (seq < 0 || seq >= ex->n_seq)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_exec_eval: sequence %d outside [0, %d)", seq, ex->n_seq);
    int32_t pos = ex->pos[seq];
    if (n > (size_t)(ex->n_ctx - pos))
        return llmk_fail(LLMK_CONTEXT_FULL, "exec: %zu tokens at position %d exceed the context of %d", n, pos,
                         ex->n_ctx);
    int st = check_ids(ex, ids, n);
    if (st != LLMK_OK) return st;
    size_t W = (size_t)(hidden ? ex->m->hp.n_embd : ex->m->hp.n_vocab);
    if (out) {
        uint64_t need;
        if (!llmk_mul_u64(all_positions ? n : 1, W, &need) || cap < need)
            return llmk_fail(LLMK_BUFFER_TOO_SMALL, "exec: %s buffer holds %zu floats, %zu x %zu needed",
                             hidden ? "hidden-state" : "logits", cap, all_positions ? n : 1, W);
    }
    if ((st = seq_append(ex, seq, ids, n)) != LLMK_OK) return st;
    for (size_t off = 0; off < n; off += (size_t)ex->n_batch) {
        size_t c = n - off < (size_t)ex->n_batch ? n - off : (size_t)ex->n_batch;
        bool last = off + c == n;
        ex->n_rows = (int32_t)c;
        for (size_t t = 0; t < c; t++)
            ex->row_id[t] = ids[off + t], ex->row_seq[t] = seq, ex->row_pos[t] = pos + (int32_t)(off + t);
        bool wanted = out && (all_positions || last);
        float *dst = all_positions && out ? out + off * W : out;
        ex->run_final = wanted && !hidden;
        ex->out_first = all_positions ? 0 : (int32_t)c - 1;
        ex->logits = hidden ? NULL : dst;
        ex->hidden = wanted && hidden ? dst : NULL;
        st = run_program(ex);
        ex->hidden = NULL; /* the other calls never write it */
        if (st != LLMK_OK) {
            seq_rollback(ex, seq, pos);
            return st;
        }
    }
    ex->pos[seq] = pos + (int32_t)n;
    return LLMK_OK;
}

int llmk_exec_eval(struct llmk_exec *ex, int32_t seq, const int32_t *ids, size_t n, float *logits, size_t cap,
                   bool all_positions) {
    return exec_eval(ex, seq, ids, n, logits, cap, all_positions, false);
}

int llmk_exec_eval_hidden(struct llmk_exec *ex, int32_t seq, const int32_t *ids, size_t n, float *hidden, size_t cap,
                          bool all_positions) {
    return exec_eval(ex, seq, ids, n, hidden, cap, all_positions, true);
}

int llmk_exec_decode_batch(struct llmk_exec *ex, const int32_t *seqs, const int32_t *ids, size_t B, float *logits,
                           size_t cap, int32_t *argmax) {
    if (!ex || !seqs || !ids) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_exec_decode_batch: NULL argument");
    if (B == 0 || B > (size_t)ex->rows_cap || B > (size_t)ex->n_seq)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "exec: batch of %zu sequences (1..%d)", B, ex->n_seq);
    int st = check_ids(ex, ids, B);
    if (st != LLMK_OK) return st;
    for (size_t b = 0; b < B; b++) {
        if (seqs[b] < 0 || seqs[b] >= ex->n_seq)
            return llmk_fail(LLMK_INVALID_ARGUMENT, "exec: batch row %zu: sequence %d outside [0, %d)", b, seqs[b],
                             ex->n_seq);
        for (size_t c = 0; c < b; c++)
            if (seqs[c] == seqs[b])
                return llmk_fail(LLMK_INVALID_ARGUMENT, "exec: sequence %d appears twice in one batch (rows %zu, %zu)",
                                 seqs[b], c, b);
        if (ex->pos[seqs[b]] >= ex->n_ctx)
            return llmk_fail(LLMK_CONTEXT_FULL, "exec: sequence %d is at position %d, the context holds %d", seqs[b],
                             ex->pos[seqs[b]], ex->n_ctx);
    }
    size_t V = (size_t)ex->m->hp.n_vocab;
    if (logits && cap < B * V)
        return llmk_fail(LLMK_BUFFER_TOO_SMALL, "exec: logits buffer holds %zu floats, %zu x %zu needed", cap, B, V);
    for (size_t b = 0; b < B; b++)
        if ((st = seq_append(ex, seqs[b], &ids[b], 1)) != LLMK_OK) {
            while (b-- > 0) seq_rollback(ex, seqs[b], ex->pos[seqs[b]]);
            return st;
        }
    ex->n_rows = (int32_t)B;
    for (size_t b = 0; b < B; b++) ex->row_id[b] = ids[b], ex->row_seq[b] = seqs[b], ex->row_pos[b] = ex->pos[seqs[b]];
    ex->run_final = logits || argmax;
    ex->out_first = 0;
    ex->logits = logits ? logits : ex->buf[LLMK_BUF_LOGITS];
    if ((st = run_program(ex)) != LLMK_OK) {
        for (size_t b = 0; b < B; b++) seq_rollback(ex, seqs[b], ex->pos[seqs[b]]);
        return st;
    }
    for (size_t b = 0; b < B; b++) {
        ex->pos[seqs[b]]++;
        if (argmax) argmax[b] = ex->argmax[b];
    }
    return LLMK_OK;
}

/* Each sequence's rows of the call appended to the pool in order, the
 * sequences listed in ex->run_seqs (*n_seqs); all or nothing. */
static int run_rows_append(struct llmk_exec *ex, const int32_t *seqs, const int32_t *ids, size_t n, int32_t *n_seqs) {
    int32_t ns = 0;
    for (size_t i = 0; i < n; i++)
        if (ex->run_count[seqs[i]]++ == 0) ex->run_seqs[ns++] = seqs[i];
    int st = LLMK_OK;
    for (int32_t k = 0; k < ns && st == LLMK_OK; k++) {
        int32_t s = ex->run_seqs[k], m = 0;
        for (size_t i = 0; i < n; i++)
            if (seqs[i] == s) ex->run_ids[m++] = ids[i];
        if ((st = seq_append(ex, s, ex->run_ids, (size_t)m)) != LLMK_OK)
            while (k-- > 0) seq_rollback(ex, ex->run_seqs[k], ex->pos[ex->run_seqs[k]]);
    }
    *n_seqs = ns;
    return st;
}

int llmk_exec_run_rows(struct llmk_exec *ex, const int32_t *seqs, const int32_t *ids, const bool *want, size_t n,
                       float *logits, size_t cap) {
    if (!ex || !seqs || !ids || !want) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_exec_run_rows: NULL argument");
    if (n == 0 || n > (size_t)ex->rows_cap)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "exec: %zu rows in one pass (1..%d)", n, ex->rows_cap);
    size_t flagged = 0, V = (size_t)ex->m->hp.n_vocab;
    for (size_t i = 0; i < n; i++) flagged += want[i];
    if (flagged && (!logits || cap / V < flagged))
        return llmk_fail(LLMK_BUFFER_TOO_SMALL, "exec: logits buffer holds %zu floats, %zu x %zu needed", cap, flagged,
                         V);
    for (int32_t s = 0; s < ex->n_seq; s++) ex->run_count[s] = 0;
    int32_t ns;
    int st = run_rows_append(ex, seqs, ids, n, &ns);
    if (st != LLMK_OK) return st;
    /* rows without logits first, then the flagged ones in call order: the
     * final phases run on a tail of the rows */
    for (int32_t s = 0; s < ex->n_seq; s++) ex->run_count[s] = 0;
    int32_t r = 0, t = (int32_t)(n - flagged);
    for (size_t i = 0; i < n; i++) {
        int32_t *row = want[i] ? &t : &r;
        ex->row_id[*row] = ids[i], ex->row_seq[*row] = seqs[i];
        ex->row_pos[*row] = ex->pos[seqs[i]] + ex->run_count[seqs[i]]++;
        ++*row;
    }
    ex->n_rows = (int32_t)n, ex->out_first = (int32_t)(n - flagged);
    ex->run_final = flagged > 0, ex->logits = logits;
    if ((st = run_program(ex)) != LLMK_OK) {
        for (int32_t k = 0; k < ns; k++) seq_rollback(ex, ex->run_seqs[k], ex->pos[ex->run_seqs[k]]);
        return st;
    }
    for (int32_t k = 0; k < ns; k++) ex->pos[ex->run_seqs[k]] += ex->run_count[ex->run_seqs[k]];
    return LLMK_OK;
}

int32_t llmk_exec_argmax(const struct llmk_exec *ex, size_t row) {
    return ex && row < (size_t)ex->rows_cap ? ex->argmax[row] : -1;
}

int llmk_exec_truncate(struct llmk_exec *ex, int32_t seq, int32_t pos) {
    if (!ex || seq < 0 || seq >= ex->n_seq)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_exec_truncate: no sequence %d", seq);
    if (pos < 0 || pos > ex->pos[seq])
        return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_exec_truncate: position %d outside [0, %d]", pos, ex->pos[seq]);
    if (!llmk_kvpool_active(ex->kvp, seq)) return LLMK_OK; /* empty */
    if (pos == 0) { /* the slot is free; its registered blocks stay cached for a later prefix */
        ex->pos[seq] = 0;
        return llmk_kvpool_release(ex->kvp, seq);
    }
    llmk_kvpool_cow cow;
    int st = llmk_kvpool_truncate(ex->kvp, seq, pos, &cow);
    if (st != LLMK_OK) return st;
    /* the sequence keeps its positions in a block of its own: copy them */
    for (int layer = 0; cow.src >= 0 && layer < ex->m->hp.n_layer; layer++)
        for (int g = 0; g < ex->m->hp.n_head_kv; g++) {
            size_t bytes = (size_t)cow.n_tokens * ex->kv_row_bytes;
            memcpy(kv_row(ex, ex->kv_k, cow.dst, layer, g, 0), kv_row(ex, ex->kv_k, cow.src, layer, g, 0), bytes);
            memcpy(kv_row(ex, ex->kv_v, cow.dst, layer, g, 0), kv_row(ex, ex->kv_v, cow.src, layer, g, 0), bytes);
        }
    ex->pos[seq] = pos;
    return LLMK_OK;
}

int llmk_exec_rollback(struct llmk_exec *ex, int32_t seq, int32_t pos) {
    if (!ex || seq < 0 || seq >= ex->n_seq || pos < 0 || pos > ex->pos[seq])
        return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_exec_rollback: sequence %d, position %d", seq, pos);
    seq_rollback(ex, seq, pos);
    return LLMK_OK;
}

int32_t llmk_exec_pos(const struct llmk_exec *ex, int32_t seq) {
    return ex && seq >= 0 && seq < ex->n_seq ? ex->pos[seq] : 0;
}
int32_t llmk_exec_n_ctx(const struct llmk_exec *ex) { return ex ? ex->n_ctx : 0; }
int32_t llmk_exec_rows_cap(const struct llmk_exec *ex) { return ex ? ex->rows_cap : 0; }
int llmk_exec_n_threads(const struct llmk_exec *ex) { return ex ? ex->nth : 0; }
const struct llmk_program *llmk_exec_program(const struct llmk_exec *ex) { return &ex->prog; }
const char *llmk_exec_kernels(const struct llmk_exec *ex) { return ex->VK->name; }
void llmk_exec_set_phase_mode(struct llmk_exec *ex, bool on) { ex->phase_mode = on; }
void llmk_exec_reset_timings(struct llmk_exec *ex) {
    memset(ex->phase_ns, 0, (size_t)ex->prog.n_phases * sizeof(double));
}
const double *llmk_exec_phase_ns(const struct llmk_exec *ex) { return ex->phase_ns; }

/* ---- generation inside the executor ------------------------------------------ */
/* Seed 003's single-launch generation: one pool region runs every step of a
 * generation. Worker 0 chooses each row's token between steps (the argmax
 * phase's result, or the gen's sampler on its logits row) while the others
 * wait at a barrier, and feeds it to the next step's embedding. The steps
 * are the phases a decode_batch call runs on the same rows, so the logits,
 * and with them the tokens, are bitwise those of one call per token. */

/* The next step's rows, one per live gen, each given its block for the fed
 * token; n_rows = 0 ends the generation. Worker 0 only. */
static void gen_prepare(struct llmk_exec *ex) {
    int32_t nr = 0;
    for (size_t i = 0; i < ex->gen_n && ex->gen_status == LLMK_OK; i++) {
        if (ex->gen_next[i] < 0) continue;
        int32_t seq = ex->gen[i].seq;
        if (ex->pos[seq] >= ex->n_ctx) { /* full: the gen ends without another token */
            ex->gen_next[i] = -1;
            continue;
        }
        int st = seq_append(ex, seq, &ex->gen_next[i], 1);
        if (st != LLMK_OK) { /* the rows appended for this step never run */
            for (int32_t r = 0; r < nr; r++) seq_rollback(ex, ex->row_seq[r], ex->pos[ex->row_seq[r]]);
            ex->gen_status = st, nr = 0;
            break;
        }
        ex->row_id[nr] = ex->gen_next[i], ex->row_seq[nr] = seq, ex->row_pos[nr] = ex->pos[seq];
        ex->gen_row[nr++] = (int32_t)i;
    }
    ex->n_rows = nr;
    ex->out_first = 0, ex->run_final = true, ex->logits = ex->buf[LLMK_BUF_LOGITS];
    ex->ph_lo = 0, ex->ph_hi = ex->prog.n_phases;
    if (nr > SPLIT_ROWS)
        for (int64_t i = 0; i < (int64_t)ex->prog.n_phases * ex->nth; i++)
            atomic_store_explicit(&ex->claims[i * CLAIM_STRIDE], 0, memory_order_relaxed);
    for (int w = 0; w < ex->nth; w++) ex->nf[w] = (struct nonfinite){INT32_MAX, INT32_MAX};
    attn_units_build(ex);
}

/* After a step: each row's token, reported; a gen ends at its count, when
 * the callback says so, or on a failure. Worker 0 only. */
static void gen_choose(struct llmk_exec *ex) {
    int st = nonfinite_status(ex);
    size_t V = (size_t)ex->m->hp.n_vocab;
    for (int32_t r = 0; r < ex->n_rows; r++) {
        if (st != LLMK_OK) { /* this step's tokens are not delivered: its rows are undone */
            seq_rollback(ex, ex->row_seq[r], ex->pos[ex->row_seq[r]]);
            continue;
        }
        int32_t i = ex->gen_row[r], tok = ex->argmax[r];
        const llmk_gen_seq *g = &ex->gen[i];
        if (g->sampler && (st = llmk_sampler_sample(g->sampler, ex->logits + (size_t)r * V, V, &tok)) != LLMK_OK) {
            seq_rollback(ex, ex->row_seq[r], ex->pos[ex->row_seq[r]]);
            continue;
        }
        ex->pos[g->seq]++;
        ex->gen_count[i]++;
        bool stop = ex->gen_cb && ex->gen_cb(ex->gen_user, i, tok) != 0;
        if (g->sampler && llmk_grammar_state_done(llmk_sampler_grammar(g->sampler))) stop = true;
        ex->gen_next[i] = stop || ex->gen_count[i] >= g->max_tokens ? -1 : tok;
    }
    if (st != LLMK_OK) ex->gen_status = st;
}

/* The generation's step loop. In profiling mode worker 0 times each phase in
 * place, from its start to the end of the barrier after it (or to the next
 * phase's start where none follows): the run stays fused, so these are the
 * phases' costs as the fused run pays them, waits included; one region per
 * phase would add a start per phase and take the workers' overlap away. */
static void gen_worker(void *ctx, int ith, int nth) {
    struct llmk_exec *ex = ctx;
    bool timed = ex->phase_mode && ith == 0;
    for (;;) {
        if (ith == 0) gen_prepare(ex);
        llmk_pool_barrier(ex->pool);
        if (ex->n_rows == 0) return;
        for (int i = 0; i < ex->prog.n_phases; i++) {
            const struct llmk_phase *ph = &ex->prog.ph[i];
            double t = timed ? now_ns(ex) : 0;
            run_phase(ex, ph, ith, nth);
            if (ex->prefetch_next) prefetch_next_runs(ex, i, ith);
            if (!rope_fused(ex, ph) && !dup_norm(ex, ph)) llmk_pool_barrier(ex->pool);
            if (timed) ex->phase_ns[i] += now_ns(ex) - t;
        }
        if (ith == 0) gen_choose(ex);
        /* the others wait for the choice at the next step's first barrier */
    }
}

static int check_gen(const struct llmk_exec *ex, const llmk_gen_seq *g, size_t n) {
    if (n > (size_t)ex->n_seq || n > (size_t)ex->rows_cap)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "exec: generate: %zu sequences (at most %d)", n, ex->n_seq);
    for (size_t i = 0; i < n; i++) {
        if (g[i].seq < 0 || g[i].seq >= ex->n_seq)
            return llmk_fail(LLMK_INVALID_ARGUMENT, "exec: generate: entry %zu: sequence %d outside [0, %d)", i,
                             g[i].seq, ex->n_seq);
        if (g[i].id < 0 || g[i].id >= ex->m->hp.n_vocab)
            return llmk_fail(LLMK_INVALID_TOKEN, "exec: generate: entry %zu: token id %d outside the vocabulary "
                             "[0, %d)", i, g[i].id, ex->m->hp.n_vocab);
        if (g[i].max_tokens < 1)
            return llmk_fail(LLMK_INVALID_ARGUMENT, "exec: generate: entry %zu: max_tokens %d (at least 1)", i,
                             g[i].max_tokens);
        if (ex->pos[g[i].seq] >= ex->n_ctx)
            return llmk_fail(LLMK_CONTEXT_FULL, "exec: generate: sequence %d is at position %d, the context holds "
                             "%d", g[i].seq, ex->pos[g[i].seq], ex->n_ctx);
        for (size_t j = 0; j < i; j++)
            if (g[j].seq == g[i].seq)
                return llmk_fail(LLMK_INVALID_ARGUMENT, "exec: generate: sequence %d appears twice (entries %zu, "
                                 "%zu)", g[i].seq, j, i);
    }
    return LLMK_OK;
}

int llmk_exec_generate(struct llmk_exec *ex, const llmk_gen_seq *g, size_t n, llmk_gen_callback cb, void *user) {
    if (!ex || (!g && n)) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_exec_generate: NULL argument");
    int st = check_gen(ex, g, n);
    if (st != LLMK_OK || n == 0) return st;
    ex->gen = g, ex->gen_n = n, ex->gen_cb = cb, ex->gen_user = user, ex->gen_status = LLMK_OK;
    for (size_t i = 0; i < n; i++) ex->gen_next[i] = g[i].id, ex->gen_count[i] = 0;
    llmk_pool_run(ex->pool, gen_worker, ex);
    ex->gen = NULL;
    return ex->gen_status;
}

/* ---- KV blocks ---------------------------------------------------------------- */

_Static_assert(LLMK_KV_BLOCK % LLMK_ATTN_CHUNK == 0, "an attention chunk must lie in one KV block");

int llmk_exec_seq_start(struct llmk_exec *ex, int32_t seq, const int32_t *ids, size_t n, int32_t *n_cached) {
    if (seq < 0 || seq >= ex->n_seq || ex->pos[seq] != 0)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "exec: sequence %d is not an empty slot", seq);
    if (n > (size_t)ex->n_ctx)
        return llmk_fail(LLMK_CONTEXT_FULL, "exec: %zu tokens exceed the context of %d", n, ex->n_ctx);
    if (llmk_kvpool_active(ex->kvp, seq)) LLMK_CHECK(llmk_kvpool_release(ex->kvp, seq) == LLMK_OK);
    int st = llmk_kvpool_start(ex->kvp, seq, ids, (int32_t)n, n_cached);
    if (st == LLMK_OK) ex->pos[seq] = *n_cached;
    return st;
}

int32_t llmk_exec_blocks_needed(const struct llmk_exec *ex, int32_t seq, int32_t n) {
    if (seq < 0 || seq >= ex->n_seq || n < 0) return -1;
    if (!llmk_kvpool_active(ex->kvp, seq)) return (int32_t)(((int64_t)n + LLMK_KV_BLOCK - 1) / LLMK_KV_BLOCK);
    return llmk_kvpool_append_blocks(ex->kvp, seq, n);
}

int32_t llmk_exec_blocks_available(const struct llmk_exec *ex) {
    llmk_kvpool_stats st;
    llmk_kvpool_stats_get(ex->kvp, &st);
    return st.n_free + st.n_cached;
}

void llmk_exec_kv_info(const struct llmk_exec *ex, llmk_kv_info *out) {
    llmk_kvpool_stats st;
    llmk_kvpool_stats_get(ex->kvp, &st);
    *out = (llmk_kv_info){.block_size = LLMK_KV_BLOCK, .n_blocks = st.n_blocks, .n_free = st.n_free,
                          .n_cached = st.n_cached, .n_used = st.n_used, .n_tokens = st.n_tokens,
                          .n_shared = st.n_shared, .pool_bytes = st.pool_bytes, .used_bytes = st.used_bytes,
                          .shared_bytes = st.shared_bytes};
}
