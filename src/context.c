/* Many sequences in one executor: the public face of src/exec_cpu.c's
 * sequence slots. A call's items run as (a) the tokens of each sequence that
 * has several in the call, as a prefill of that sequence split where logits
 * are asked for, then (b) every sequence with one token in the call as a
 * decode row of one pass. The executor's reductions are per row and per
 * sequence, so neither the grouping nor the other sequences change any
 * sequence's bits. The context also shows its executor's program and phase
 * timings (profiling), the introspection tools such as llmk bench need. */
#include "exec_cpu.h"
#include "internal.h"
#include "model.h"
#include "program.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct llmk_context {
    const llmk_model *m;
    struct llmk_exec *ex;
    int32_t n_seq, n_ctx, rows; /* rows: decode rows per pass */
    size_t V;
    /* per-call scratch, sized at init (nothing is allocated per call) */
    int32_t *count, *last, *saved; /* [n_seq]: items this call, index of the last one, position before */
    int32_t *ids;                  /* [n_ctx]: one sequence's ids of this call */
    int32_t *row_seq, *row_id, *row_out; /* [rows]: a decode pass (row_out: output row or -1) */
    bool *row_want;                /* [rows]: a one-pass call's logits flags */
    float *row_logits;             /* [rows][V] */
};

void llmk_context_free(llmk_context *c) {
    if (!c) return;
    llmk_exec_free(c->ex);
    free(c->count), free(c->last), free(c->saved), free(c->ids);
    free(c->row_seq), free(c->row_id), free(c->row_out), free(c->row_logits), free(c->row_want);
    free(c);
}

int llmk_context_init(const llmk_model *m, const llmk_context_params *p, llmk_context **out) {
    llmk_error_clear();
    if (!out || !m) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_context_init: NULL argument");
    *out = NULL;
    llmk_context_params dp = {0};
    if (!p) p = &dp;
    llmk_context *c = calloc(1, sizeof *c);
    if (!c) return llmk_fail(LLMK_OUT_OF_MEMORY, "llmk_context_init: struct");
    struct llmk_exec_params ep = {.n_ctx = p->n_ctx, .n_threads = p->n_threads, .n_batch = p->n_batch,
                                  .n_seq = p->n_seq_max, .n_kv_blocks = p->n_kv_blocks, .kv_type = p->kv_type,
                                  .allow_long_ctx = p->allow_long_ctx, .mem_limit = p->mem_limit,
                                  .progress = p->progress_callback, .progress_user = p->progress_callback_user_data};
    int st = llmk_exec_init(m, &ep, &c->ex);
    if (st != LLMK_OK) {
        llmk_context_free(c);
        return st;
    }
    c->m = m;
    c->n_seq = p->n_seq_max > 0 ? p->n_seq_max : 1;
    c->n_ctx = llmk_exec_n_ctx(c->ex);
    c->rows = llmk_exec_rows_cap(c->ex); /* max(n_batch, n_seq) */
    c->V = (size_t)m->hp.n_vocab;
    size_t ns = (size_t)c->n_seq, nr = (size_t)c->rows;
    c->count = malloc(ns * sizeof *c->count), c->last = malloc(ns * sizeof *c->last);
    c->saved = malloc(ns * sizeof *c->saved), c->ids = malloc((size_t)c->n_ctx * sizeof *c->ids);
    c->row_seq = malloc(nr * sizeof *c->row_seq), c->row_id = malloc(nr * sizeof *c->row_id);
    c->row_out = malloc(nr * sizeof *c->row_out), c->row_logits = malloc(ns * c->V * sizeof *c->row_logits);
    c->row_want = malloc(nr * sizeof *c->row_want);
    if (!c->count || !c->last || !c->saved || !c->ids || !c->row_seq || !c->row_id || !c->row_out ||
        !c->row_logits || !c->row_want) {
        llmk_context_free(c);
        return llmk_fail(LLMK_OUT_OF_MEMORY, "llmk_context_init: buffers for %d sequences", c->n_seq);
    }
    *out = c;
    return LLMK_OK;
}

/* Every refusal before any work: ranges, each sequence's room, the buffer. */
static int check_items(llmk_context *c, const llmk_batch_item *items, size_t n, const float *logits, size_t cap) {
    memset(c->count, 0, (size_t)c->n_seq * sizeof *c->count);
    size_t flagged = 0;
    for (size_t i = 0; i < n; i++) {
        const llmk_batch_item *it = &items[i];
        if (it->seq < 0 || it->seq >= c->n_seq)
            return llmk_fail(LLMK_INVALID_ARGUMENT, "context: item %zu: sequence %d outside [0, %d)", i, it->seq,
                             c->n_seq);
        if (it->id < 0 || (size_t)it->id >= c->V)
            return llmk_fail(LLMK_INVALID_TOKEN, "context: item %zu: token id %d outside the vocabulary [0, %zu)",
                             i, it->id, c->V);
        c->count[it->seq]++;
        c->last[it->seq] = (int32_t)i;
        flagged += it->logits;
    }
    int64_t blocks = 0;
    for (int32_t s = 0; s < c->n_seq; s++) {
        if (c->count[s] > c->n_ctx - llmk_exec_pos(c->ex, s))
            return llmk_fail(LLMK_CONTEXT_FULL, "context: sequence %d: %d tokens at position %d exceed its %d",
                             s, c->count[s], llmk_exec_pos(c->ex, s), c->n_ctx);
        blocks += llmk_exec_blocks_needed(c->ex, s, c->count[s]);
    }
    if (blocks > llmk_exec_blocks_available(c->ex))
        return llmk_fail(LLMK_CACHE_CAPACITY_EXCEEDED, "context: the call needs %lld new KV blocks, %d are free or "
                         "cached", (long long)blocks, llmk_exec_blocks_available(c->ex));
    if (flagged && (!logits || cap / c->V < flagged))
        return llmk_fail(LLMK_BUFFER_TOO_SMALL, "context: logits buffer holds %zu floats, %zu x %zu needed", cap,
                         flagged, c->V);
    return LLMK_OK;
}

/* (a) Sequence s's items, in order, as prefill pieces that end where logits
 * are asked for (chunking does not change the bits). */
static int prefill_seq(llmk_context *c, int32_t s, const llmk_batch_item *items, size_t n, float *logits) {
    int32_t k = 0;
    size_t out_row = 0;
    for (size_t i = 0; i < n; i++) {
        if (items[i].seq == s) {
            c->ids[k++] = items[i].id;
            if (items[i].logits) {
                int st = llmk_exec_eval(c->ex, s, c->ids, (size_t)k, logits + out_row * c->V, c->V, false);
                if (st != LLMK_OK) return st;
                k = 0;
            }
        }
        out_row += items[i].logits;
    }
    return k ? llmk_exec_eval(c->ex, s, c->ids, (size_t)k, NULL, 0, false) : LLMK_OK;
}

/* (b) The rows gathered so far as one decode pass; flagged rows' logits to
 * their output rows. */
static int decode_rows(llmk_context *c, int32_t nr, float *logits) {
    /* Rows that all want logits, at consecutive output rows (a generation
     * step's usual call), are written in place: no n_vocab copy per row. */
    bool any = false, direct = c->row_out[0] >= 0;
    for (int32_t r = 0; r < nr; r++) any |= c->row_out[r] >= 0, direct &= c->row_out[r] == c->row_out[0] + r;
    float *dst = direct ? logits + (size_t)c->row_out[0] * c->V : any ? c->row_logits : NULL;
    int st = llmk_exec_decode_batch(c->ex, c->row_seq, c->row_id, (size_t)nr, dst, any ? (size_t)nr * c->V : 0,
                                    NULL);
    if (st != LLMK_OK || direct) return st;
    for (int32_t r = 0; r < nr; r++)
        if (c->row_out[r] >= 0)
            memcpy(logits + (size_t)c->row_out[r] * c->V, c->row_logits + (size_t)r * c->V, c->V * sizeof *logits);
    return LLMK_OK;
}

static int run_items(llmk_context *c, const llmk_batch_item *items, size_t n, float *logits) {
    if (n <= (size_t)c->rows) { /* one pass: prefill pieces and decode rows share each weight read */
        for (size_t i = 0; i < n; i++)
            c->row_seq[i] = items[i].seq, c->row_id[i] = items[i].id, c->row_want[i] = items[i].logits;
        return llmk_exec_run_rows(c->ex, c->row_seq, c->row_id, c->row_want, n, logits, n * c->V);
    }
    for (size_t i = 0; i < n; i++) { /* (a), each sequence once, at its last item */
        int32_t s = items[i].seq;
        if ((int32_t)i == c->last[s] && c->count[s] > 1) {
            int st = prefill_seq(c, s, items, n, logits);
            if (st != LLMK_OK) return st;
        }
    }
    int32_t nr = 0;
    size_t out_row = 0;
    for (size_t i = 0; i < n; i++) { /* (b) */
        const llmk_batch_item *it = &items[i];
        if (c->count[it->seq] == 1) {
            c->row_seq[nr] = it->seq, c->row_id[nr] = it->id, c->row_out[nr] = it->logits ? (int32_t)out_row : -1;
            if (++nr == c->rows) {
                int st = decode_rows(c, nr, logits);
                if (st != LLMK_OK) return st;
                nr = 0;
            }
        }
        out_row += it->logits;
    }
    return nr ? decode_rows(c, nr, logits) : LLMK_OK;
}

int llmk_context_eval(llmk_context *c, const llmk_batch_item *items, size_t n, float *logits, size_t logits_cap) {
    llmk_error_clear();
    if (!c || (!items && n)) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_context_eval: NULL argument");
    if (n == 0) return LLMK_OK;
    int st = check_items(c, items, n, logits, logits_cap);
    if (st != LLMK_OK) return st;
    for (int32_t s = 0; s < c->n_seq; s++) c->saved[s] = llmk_exec_pos(c->ex, s);
    st = run_items(c, items, n, logits);
    if (st != LLMK_OK) /* rows written past the saved positions are dead */
        for (int32_t s = 0; s < c->n_seq; s++)
            if (llmk_exec_pos(c->ex, s) != c->saved[s]) llmk_exec_rollback(c->ex, s, c->saved[s]);
    return st;
}

int32_t llmk_context_seq_pos(const llmk_context *c, int32_t seq) {
    return c && seq >= 0 && seq < c->n_seq ? llmk_exec_pos(c->ex, seq) : -1;
}

int llmk_context_seq_truncate(llmk_context *c, int32_t seq, int32_t pos) {
    llmk_error_clear();
    if (!c) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_context_seq_truncate: NULL");
    return llmk_exec_truncate(c->ex, seq, pos);
}

int32_t llmk_context_n_seq_max(const llmk_context *c) { return c ? c->n_seq : 0; }
int32_t llmk_context_n_ctx(const llmk_context *c) { return c ? c->n_ctx : 0; }

/* ---- introspection and profiling ------------------------------------------ */
/* Thin views of the executor's program and phase timings, so tools need no
 * executor internals. */

int32_t llmk_context_n_threads(const llmk_context *c) { return c ? llmk_exec_n_threads(c->ex) : 0; }
const char *llmk_context_kernels(const llmk_context *c) { return c ? llmk_exec_kernels(c->ex) : NULL; }
int32_t llmk_context_n_phases(const llmk_context *c) { return c ? llmk_exec_program(c->ex)->n_phases : 0; }

int llmk_context_describe(const llmk_context *c, FILE *f) {
    llmk_error_clear();
    if (!c || !f) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_context_describe: NULL argument");
    llmk_program_dump(llmk_exec_program(c->ex), f);
    return LLMK_OK;
}

int llmk_context_set_profiling(llmk_context *c, bool on) {
    llmk_error_clear();
    if (!c) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_context_set_profiling: NULL context");
    llmk_exec_set_phase_mode(c->ex, on);
    return LLMK_OK;
}

int llmk_context_reset_timings(llmk_context *c) {
    llmk_error_clear();
    if (!c) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_context_reset_timings: NULL context");
    llmk_exec_reset_timings(c->ex);
    return LLMK_OK;
}

int llmk_context_phase(const llmk_context *c, int32_t i, llmk_phase_info *out) {
    llmk_error_clear();
    if (!c || !out) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_context_phase: NULL argument");
    const struct llmk_program *p = llmk_exec_program(c->ex);
    if (i < 0 || i >= p->n_phases)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_context_phase: phase %d outside [0, %d)", i, p->n_phases);
    const struct llmk_phase *ph = &p->ph[i];
    *out = (llmk_phase_info){.name = ph->name, .op = llmk_op_name(ph->op), .layer = ph->layer,
                             .ns = llmk_exec_phase_ns(c->ex)[i]};
    return LLMK_OK;
}

/* ---- KV pool ----------------------------------------------------------------- */

int llmk_context_seq_start(llmk_context *c, int32_t seq, const int32_t *ids, size_t n, int32_t *n_cached) {
    llmk_error_clear();
    if (!c || !n_cached || (!ids && n)) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_context_seq_start: NULL argument");
    *n_cached = 0;
    if (seq < 0 || seq >= c->n_seq)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_context_seq_start: sequence %d outside [0, %d)", seq, c->n_seq);
    if (llmk_exec_pos(c->ex, seq) != 0)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_context_seq_start: sequence %d is at position %d, not empty", seq,
                         llmk_exec_pos(c->ex, seq));
    if (n > (size_t)c->n_ctx)
        return llmk_fail(LLMK_CONTEXT_FULL, "llmk_context_seq_start: %zu tokens exceed the context of %d", n, c->n_ctx);
    return llmk_exec_seq_start(c->ex, seq, ids, n, n_cached);
}

int32_t llmk_context_blocks_needed(const llmk_context *c, int32_t seq, int32_t n) {
    if (!c || seq < 0 || seq >= c->n_seq || n < 0) return -1;
    return llmk_exec_blocks_needed(c->ex, seq, n);
}

int llmk_context_kv_info(const llmk_context *c, llmk_kv_info *out) {
    llmk_error_clear();
    if (!c || !out) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_context_kv_info: NULL argument");
    llmk_exec_kv_info(c->ex, out);
    return LLMK_OK;
}

int llmk_context_generate(llmk_context *c, const llmk_gen_seq *seqs, size_t n, llmk_gen_callback cb, void *user) {
    llmk_error_clear();
    if (!c || (!seqs && n)) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_context_generate: NULL argument");
    return llmk_exec_generate(c->ex, seqs, n, cb, user);
}
