/* The phase program: a model compiled once, when an executor is created, into
 * a flat array of fused phases. Each phase names its op, its operands
 * (weights as tensor views into the model's mapping, activation buffers by
 * id) and its sizes. The CPU executor (src/exec_cpu.c) walks the array with
 * every worker taking a share of each phase and crossing a barrier between
 * phases; the program itself holds no state and allocates nothing to run.
 * How each phase runs on this CPU (kernels, activation forms, splits) is the
 * plan's (plan.h), made from the program without changing it. */
#ifndef LLMK_PROGRAM_H
#define LLMK_PROGRAM_H

#include "kernels/kernels.h"
#include "model.h"

#include <stdint.h>
#include <stdio.h>

enum llmk_op {
    LLMK_OP_EMBED = 0,     /* x[t] = dequant(tok_embd row ids[t]) */
    LLMK_OP_NORM_QUANT,    /* out = rmsnorm(in) * norm, quantized into the consumers' act forms; with
                            * vec[1] first x += rmsnorm(o) * vec[1] (the previous branch's post-norm) */
    LLMK_OP_MATMUL,        /* out_i = in . W_i^T for up to 3 weights, then an epilogue */
    LLMK_OP_ROPE_KV,       /* QK-norm + RoPE on q and k, K/V appended to each row's cache */
    LLMK_OP_ATTN,          /* causal attention over each row's cache, out quantized */
    LLMK_OP_ARGMAX,        /* argmax of each logits row */
    /* mixture of experts: the FFN of a MoE layer is these four phases */
    LLMK_OP_MOE_ROUTE,     /* router logits (f32), top-k and weights per row */
    LLMK_OP_MOE_GATHER,    /* tile map; the rows' quantized input gathered in expert order */
    LLMK_OP_MOE_GATE_UP,   /* per expert: silu(in . Wg_e^T) * (in . Wu_e^T), quantized for down */
    LLMK_OP_MOE_DOWN,      /* per expert: out = in . Wd_e^T (a row per (row, slot), in map order) */
    LLMK_OP_MOE_COMBINE,   /* x += sum of each row's slot outputs times their weights, slot order */
    LLMK_OP_POST_NORM,     /* x += rmsnorm(o) * norm: a post-norm with no norm after it to fuse into */
    LLMK_OP_COUNT_
};

/* What a matmul does with its outputs before the next barrier. */
enum llmk_epilogue {
    LLMK_EPI_NONE = 0,
    LLMK_EPI_BIAS,      /* out_i += bias_i (Q/K/V biases) */
    LLMK_EPI_RESIDUAL,  /* x += out_0 (O-projection, down-projection); with vec[0] out_0 += vec[0] first */
    LLMK_EPI_SWIGLU,    /* g = silu(out_0) * out_1, quantized for the down-projection */
    LLMK_EPI_GEGLU,     /* g = gelu(out_0) * out_1 (tanh form), the same */
    LLMK_EPI_SOFTCAP,   /* out_0 = c tanh(out_0 / c), c = hp.logit_softcap (the LM head) */
};

/* A gated-unit epilogue: gate and up computed together, split in whole
 * quantization blocks of the gated output. */
static inline bool llmk_epi_glu(int e) { return e == LLMK_EPI_SWIGLU || e == LLMK_EPI_GEGLU; }

/* Activation buffers of the executor, [rows][width] f32 each. */
enum llmk_buf {
    LLMK_BUF_X = 0,  /* residual stream, n_embd */
    LLMK_BUF_XN,     /* normed input of a matmul, n_embd */
    LLMK_BUF_Q,      /* n_head * head_dim */
    LLMK_BUF_K,      /* n_head_kv * head_dim */
    LLMK_BUF_V,
    LLMK_BUF_ATT,    /* attention output, n_head * head_dim */
    LLMK_BUF_O,      /* matmul output before the residual add, n_embd */
    LLMK_BUF_G,      /* gate, then silu(gate) * up, n_ff */
    LLMK_BUF_U,      /* up, n_ff */
    LLMK_BUF_LOGITS, /* n_vocab (the caller's buffer or the executor's) */
    /* mixture of experts: one row per (row, slot), in tile-map order
     * (grouped by expert), rows_cap * n_used rows */
    LLMK_BUF_XG,     /* the normed input, gathered, n_embd */
    LLMK_BUF_MG,     /* gate, then silu(gate) * up, n_ff_exp */
    LLMK_BUF_MU,     /* up, n_ff_exp */
    LLMK_BUF_MY,     /* expert output, n_embd */
    LLMK_BUF_COUNT_
};

struct llmk_phase {
    uint8_t op;       /* enum llmk_op */
    uint8_t epilogue; /* enum llmk_epilogue (matmul) */
    int16_t layer;    /* -1 outside the layers */
    uint8_t in, out[3]; /* enum llmk_buf */
    uint8_t qmask;    /* codec act forms (enum llmk_act_form) the consumers read; the plan may choose others */
    uint8_t final;    /* the phase only runs on rows that want logits */
    int n_w;          /* weights of a matmul (1..3), 1 for embed */
    const llmk_tensor_info *w[3];
    float wscale[3];  /* each weight's products times this (its X.scale; 1 without) */
    const float *vec[3]; /* norm weights (norm, rope_kv: q_norm, k_norm) or biases */
    int64_t rows[3];  /* output rows of each weight (matmul), elements per row otherwise */
    int64_t k;        /* input width */
    char name[48];    /* "blk.3.qkv", for dumps and timings */
};

struct llmk_program {
    const struct llmk_model *m;
    struct llmk_phase *ph;
    int n_phases;
    int n_layer_phases; /* phases before the final norm (all rows run them) */
};

/* Compile the model's program. Checks every weight's codec has a dot kernel
 * and that widths are whole blocks of it (LLMK_TENSOR_TYPE_UNSUPPORTED names
 * the tensor otherwise). */
int llmk_program_build(const struct llmk_model *m, struct llmk_program *p);
void llmk_program_free(struct llmk_program *p);
const char *llmk_op_name(int op);
/* Bit (1 << LLMK_ACT_*) of the activation form a weight type consumes; 0 for f32. */
unsigned llmk_act_form_bit(uint32_t wtype);
/* One line per phase: index, op, name, operands, sizes. */
void llmk_program_dump(const struct llmk_program *p, FILE *f);

#endif
