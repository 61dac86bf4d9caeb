/* The executor plan: what the CPU executor runs, decided once at init from
 * (program, kernel table, configuration, thread count). The program
 * (program.h) says what a model computes and stays immutable; the plan says
 * how this process computes it: each matmul weight's route (layout and
 * kernel), the activation forms each producer quantizes into, how phases are
 * split across workers and fused, and the layout of the repacked-weight
 * arena. The executor (exec_cpu.c) is then a loop over planned phases.
 *
 * Nothing here changes a bit of any result: every route of a weight gives the
 * bits its kernels' contracts promise, and every split depends only on the
 * shapes and the thread count (docs/executor.md). */
#ifndef LLMK_PLAN_H
#define LLMK_PLAN_H

#include "kernels/kernels.h"
#include "program.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    LLMK_MM_UNIT = 16, /* weight rows per work unit and per cache-resident chunk */
    LLMK_DUP_ROWS = 4, /* at most this many rows: every worker norms them itself (dup_norm) */
};

/* How one matmul weight is multiplied. */
enum llmk_mm_route {
    LLMK_ROUTE_F32_CHECK = 0, /* dequantized rows . f32 activations (configuration f32_act: a check) */
    LLMK_ROUTE_DOT,           /* GGUF rows . the codec's activation form (vec_dot, vec_dotm) */
    LLMK_ROUTE_ROWS_A16,      /* GGUF rows . A16 (the scalar reference; no repacking) */
    LLMK_ROUTE_R8_A16,        /* rows repacked 8 at a time (r8.h) . A16 */
    LLMK_ROUTE_X2_Q8_1X,      /* Q4_1 repacked in block pairs (q4_1_x2.h) . Q8_1X */
    LLMK_ROUTE_R8_A8,         /* rows repacked 8 at a time (r8.h) . A8 (a8.h) */
    LLMK_ROUTE_ROWS_A8,       /* GGUF rows . A8 (the scalar reference) */
};

/* Whether a route reads the r8 repacking (the plan's arena). */
static inline bool llmk_route_r8(int route) { return route == LLMK_ROUTE_R8_A16 || route == LLMK_ROUTE_R8_A8; }

struct llmk_plan_weight {
    uint8_t route; /* enum llmk_mm_route */
    int8_t form;   /* enum llmk_act_form it reads, -1: f32 */
};

struct llmk_plan_phase {
    uint8_t qmask;     /* forms this phase's output is quantized into (those the next matmul reads) */
    bool rope_fused;   /* Q/K/V matmul split by heads; each worker ropes and appends its own heads */
    bool a16_only;     /* norm whose consumer reads nothing but A16 (may run on every worker: dup_norm) */
    bool head_quant;   /* attention: each head's output is whole blocks of every form in qmask */
    int64_t unit;      /* matmul: rows per share unit (SwiGLU: whole blocks of qmask's forms) */
    struct llmk_plan_weight w[3];
};

struct llmk_plan_options {
    bool act_q8;         /* 8-bit activations for Q4_1/Q8_0 (no A16) */
    bool act_a8;         /* A8 for the types a8.h takes (the rest as without it) */
    bool repack;         /* Q4_1 in the x2 layout for the 8-bit route */
    bool portable;       /* r8 records in the portable forms only (not K's compact ones) */
    const char *f32_act; /* NULL: off; "all"; or phase kinds ("qkv,lm_head") on the f32 check route */
};

struct llmk_plan {
    const struct llmk_program *prog;
    const struct llmk_kernels *K;  /* matmul and activation kernels */
    unsigned r8_forms;             /* the record forms r8 weights are repacked into (r8.h) */
    const struct llmk_kernels *VK; /* vector and attention kernels: K, or the references for a head size K's do not take */
    int nth;
    struct llmk_plan_phase *ph;    /* [prog->n_phases] */
    unsigned need[LLMK_BUF_COUNT_]; /* forms each buffer is ever quantized into */
    bool any_f32_check;
    /* the r8 arena: worker ith's shares of every R8_A16 weight in program
     * order, one stream per worker; r8_off[(phase * 3 + w) * nth + ith] */
    size_t *r8_off, r8_bytes;
};

/* Plan prog for K with nth workers. */
int llmk_plan_build(const struct llmk_program *prog, const struct llmk_kernels *K, const struct llmk_plan_options *o,
                    int nth, struct llmk_plan *out);
void llmk_plan_free(struct llmk_plan *p);

/* Worker ith's rows [r0, r1) of weight wi of matmul phase i: a partition
 * that depends only on the shapes and nth (never on the rows of a call), so
 * the repacked weights can be laid out as one stream per worker. SwiGLU
 * phases give a worker the same gate and up rows, in whole units; the Q/K/V
 * phase that feeds RoPE splits by heads; others split the rows of all
 * weights, concatenated, in units of LLMK_MM_UNIT. */
void llmk_plan_share(const struct llmk_plan *p, int i, int wi, int ith, int64_t *r0, int64_t *r1);
/* A stack of experts (ne = {k, rows, n_expert}) as one 2-D matrix of
 * n_expert * rows rows: how MoE weights are repacked (whole, in worker 0's
 * stream of the r8 arena: any worker may take any expert). */
llmk_tensor_info llmk_plan_flat_experts(const llmk_tensor_info *t);

/* "a16", "q8_1x", ... for dumps. */
const char *llmk_act_form_name(int form);
const char *llmk_mm_route_name(int route);

#endif
