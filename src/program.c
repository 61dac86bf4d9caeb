/* Compiling a model into its phase program (see program.h). Per layer:
 *   norm+quant (attn_norm) | Q/K/V matmul (+bias) | QK-norm + RoPE + KV append |
 *   attention (+quant) | O-projection + residual | norm+quant (ffn_norm) |
 *   gate/up matmul + SwiGLU (+quant) | down-projection + residual
 * then, on the rows that want logits: final norm+quant | LM head | argmax.
 * Norms are fused into the quantization of the next matmul's input, and
 * every producer of a matmul input writes it already quantized, so each
 * weight pass reads activations that were quantized exactly once. */
#include "program.h"

#include "codec/codec.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static const char *const op_names[LLMK_OP_COUNT_] = {"embed", "norm_quant", "matmul", "rope_kv", "attn",
                                                     "argmax", "moe_route", "moe_gather", "moe_gate_up",
                                                     "moe_down", "moe_combine", "post_norm"};
static const char *const buf_names[LLMK_BUF_COUNT_] = {"x", "xn", "q", "k", "v", "att", "o", "g", "u", "logits",
                                                       "xg", "mg", "mu", "my"};
static const char *const epi_names[] = {"", "+bias", "+residual", "+swiglu", "+geglu", "+softcap"};

const char *llmk_op_name(int op) { return op >= 0 && op < LLMK_OP_COUNT_ ? op_names[op] : "?"; }

unsigned llmk_act_form_bit(uint32_t wtype) {
    const struct llmk_codec *c = llmk_codec_get(wtype);
    if (!c) return 0;
    switch (c->act_type) {
    case LLMK_TYPE_Q8_0: return 1u << LLMK_ACT_Q8_0;
    case LLMK_TYPE_Q8_1: return 1u << LLMK_ACT_Q8_1;
    case LLMK_TYPE_Q8_K: return 1u << LLMK_ACT_Q8_K;
    default: return 0;
    }
}

/* The weight must have a codec with a dot kernel and rows of `k` whole blocks. */
static int check_weight(const llmk_tensor_info *t, int64_t k) {
    if (!t) return llmk_fail(LLMK_MISSING_TENSOR, "program: a weight is missing");
    if (!llmk_codec_get(t->type) || !llmk_codec_get(t->type)->dot)
        return llmk_fail(LLMK_TENSOR_TYPE_UNSUPPORTED, "program: tensor %s has type %s, which has no dot kernel",
                         t->name, llmk_type_name(t->type) ? llmk_type_name(t->type) : "unknown");
    const struct llmk_codec *c = llmk_codec_get(t->type);
    uint32_t be = llmk_type_block_elems(t->type), abe = llmk_type_block_elems(c->act_type);
    if ((uint64_t)k != t->ne[0] || k % be != 0 || k % abe != 0)
        return llmk_fail(LLMK_TENSOR_TYPE_UNSUPPORTED,
                         "program: tensor %s rows hold %llu elements, expected %lld in whole %u-blocks of %s and %u-blocks "
                         "of its activations",
                         t->name, (unsigned long long)t->ne[0], (long long)k, be, llmk_type_name(t->type), abe);
    return LLMK_OK;
}

static struct llmk_phase *add(struct llmk_program *p, int op, int layer, const char *what) {
    struct llmk_phase *ph = &p->ph[p->n_phases++];
    memset(ph, 0, sizeof *ph);
    ph->op = (uint8_t)op;
    ph->layer = (int16_t)layer;
    if (layer >= 0)
        snprintf(ph->name, sizeof ph->name, "blk.%d.%s", layer, what);
    else
        snprintf(ph->name, sizeof ph->name, "%s", what);
    return ph;
}

static int matmul(struct llmk_program *p, int layer, const char *what, int in, int64_t k, int n_w,
                  const llmk_tensor_info *const *w, const int *out, int epi, struct llmk_phase **res) {
    struct llmk_phase *ph = add(p, LLMK_OP_MATMUL, layer, what);
    ph->in = (uint8_t)in;
    ph->k = k;
    ph->n_w = n_w;
    ph->epilogue = (uint8_t)epi;
    for (int i = 0; i < n_w; i++) {
        int st = check_weight(w[i], k);
        if (st != LLMK_OK) return st;
        ph->w[i] = w[i];
        ph->out[i] = (uint8_t)out[i];
        ph->rows[i] = (int64_t)w[i]->ne[1];
    }
    *res = ph;
    return LLMK_OK;
}

/* A MoE layer's FFN after its ffn_norm: route, gather, gate/up + SwiGLU,
 * down, combine. The experts run on the codecs' own dot kernels (the DOT
 * route) over their GGUF rows: expert e of a stack is rows [e * n, (e+1) * n). */
static int moe_phases(struct llmk_program *p, int il, struct llmk_phase *norm) {
    const struct llmk_model *m = p->m;
    const struct llmk_layer *L = &m->layers[il];
    int64_t E = m->hp.n_embd, FE = m->moe.n_ff_exp;
    int st;
    if ((st = check_weight(L->gate_exps, E)) != LLMK_OK || (st = check_weight(L->up_exps, E)) != LLMK_OK ||
        (st = check_weight(L->down_exps, FE)) != LLMK_OK)
        return st;
    unsigned gu_form = llmk_act_form_bit(L->gate_exps->type);
    norm->qmask = (uint8_t)gu_form;
    struct llmk_phase *ph = add(p, LLMK_OP_MOE_ROUTE, il, "moe_route");
    ph->in = LLMK_BUF_XN, ph->n_w = 1, ph->w[0] = L->gate_inp, ph->vec[0] = L->gate_inp_f, ph->vec[1] = L->gate_inp_b_f;
    ph->rows[0] = m->moe.n_expert, ph->k = E;
    ph = add(p, LLMK_OP_MOE_GATHER, il, "moe_gather");
    ph->in = LLMK_BUF_XN, ph->out[0] = LLMK_BUF_XG, ph->n_w = 1, ph->w[0] = L->gate_exps, ph->rows[0] = E;
    ph->qmask = (uint8_t)gu_form;
    ph = add(p, LLMK_OP_MOE_GATE_UP, il, "moe_gate_up");
    ph->in = LLMK_BUF_XG, ph->out[0] = LLMK_BUF_MG, ph->out[1] = LLMK_BUF_MU, ph->n_w = 2;
    ph->w[0] = L->gate_exps, ph->w[1] = L->up_exps, ph->rows[0] = ph->rows[1] = FE, ph->k = E;
    ph->vec[0] = L->gate_exps_b_f, ph->vec[1] = L->up_exps_b_f; /* per expert, n_ff_exp each (gpt-oss) */
    ph->epilogue = LLMK_EPI_SWIGLU;
    ph->qmask = (uint8_t)llmk_act_form_bit(L->down_exps->type);
    ph = add(p, LLMK_OP_MOE_DOWN, il, "moe_down");
    ph->in = LLMK_BUF_MG, ph->out[0] = LLMK_BUF_MY, ph->n_w = 1, ph->w[0] = L->down_exps, ph->rows[0] = E, ph->k = FE;
    ph->vec[0] = L->down_exps_b_f;
    ph = add(p, LLMK_OP_MOE_COMBINE, il, "moe_combine");
    ph->in = LLMK_BUF_MY, ph->out[0] = LLMK_BUF_X, ph->rows[0] = E;
    return LLMK_OK;
}

int llmk_program_build(const struct llmk_model *m, struct llmk_program *p) {
    memset(p, 0, sizeof *p);
    const llmk_hparams *hp = &m->hp;
    if (hp->head_dim % 2 != 0 || hp->n_rot != hp->head_dim)
        return llmk_fail(LLMK_UNSUPPORTED_FEATURE, "program: head_dim %d with %d rotated dimensions (partial rotary "
                         "embeddings are not implemented by the fast path)", hp->head_dim, hp->n_rot);
    p->m = m;
    p->ph = calloc((size_t)hp->n_layer * 11 + 4, sizeof *p->ph);
    if (!p->ph) return llmk_fail(LLMK_OUT_OF_MEMORY, "program: %d phases", hp->n_layer * 11 + 4);
    int64_t E = hp->n_embd, F = hp->n_ff, qd = (int64_t)hp->n_head * hp->head_dim;
    int st;
    struct llmk_phase *ph = add(p, LLMK_OP_EMBED, -1, "embed");
    ph->n_w = 1;
    ph->w[0] = m->tok_embd;
    ph->out[0] = LLMK_BUF_X;
    ph->rows[0] = E;
    for (int il = 0; il < hp->n_layer; il++) {
        const struct llmk_layer *L = &m->layers[il];
        struct llmk_phase *norm = add(p, LLMK_OP_NORM_QUANT, il, "attn_norm");
        norm->in = LLMK_BUF_X, norm->out[0] = LLMK_BUF_XN, norm->vec[0] = L->attn_norm_f, norm->rows[0] = E;
        norm->vec[1] = il > 0 ? m->layers[il - 1].ffn_post_norm_f : NULL;
        const llmk_tensor_info *qkv[3] = {L->wq, L->wk, L->wv};
        int qkv_out[3] = {LLMK_BUF_Q, LLMK_BUF_K, LLMK_BUF_V};
        if ((st = matmul(p, il, "qkv", LLMK_BUF_XN, E, 3, qkv, qkv_out, L->bq_f ? LLMK_EPI_BIAS : LLMK_EPI_NONE, &ph)) != LLMK_OK)
            goto fail;
        ph->vec[0] = L->bq_f, ph->vec[1] = L->bk_f, ph->vec[2] = L->bv_f;
        norm->qmask = (uint8_t)(llmk_act_form_bit(L->wq->type) | llmk_act_form_bit(L->wk->type) |
                                llmk_act_form_bit(L->wv->type));
        ph = add(p, LLMK_OP_ROPE_KV, il, "rope_kv");
        ph->vec[0] = L->q_norm_f, ph->vec[1] = L->k_norm_f;
        ph->rows[0] = hp->head_dim;
        struct llmk_phase *attn = add(p, LLMK_OP_ATTN, il, "attn");
        attn->out[0] = LLMK_BUF_ATT;
        attn->rows[0] = hp->head_dim;
        attn->qmask = (uint8_t)llmk_act_form_bit(L->wo->type);
        int o_out[1] = {LLMK_BUF_O};
        /* a post-normed branch leaves its output in o for the next norm */
        int epi = L->attn_post_norm_f ? LLMK_EPI_NONE : LLMK_EPI_RESIDUAL;
        if ((st = matmul(p, il, "attn_out", LLMK_BUF_ATT, qd, 1, &L->wo, o_out, epi, &ph)) != LLMK_OK) goto fail;
        ph->vec[0] = L->bo_f; /* added before the residual (gpt-oss) */
        norm = add(p, LLMK_OP_NORM_QUANT, il, "ffn_norm");
        norm->in = LLMK_BUF_X, norm->out[0] = LLMK_BUF_XN, norm->vec[0] = L->ffn_norm_f, norm->rows[0] = E;
        norm->vec[1] = L->attn_post_norm_f;
        if (L->gate_exps) {
            if ((st = moe_phases(p, il, norm)) != LLMK_OK) goto fail;
            continue;
        }
        norm->qmask = (uint8_t)(llmk_act_form_bit(L->w_gate->type) | llmk_act_form_bit(L->w_up->type));
        const llmk_tensor_info *gu[2] = {L->w_gate, L->w_up};
        int gu_out[2] = {LLMK_BUF_G, LLMK_BUF_U};
        if ((st = matmul(p, il, "gate_up", LLMK_BUF_XN, E, 2, gu, gu_out, hp->ffn_gelu ? LLMK_EPI_GEGLU : LLMK_EPI_SWIGLU,
                         &ph)) != LLMK_OK)
            goto fail;
        if (L->w_gate->ne[1] != (uint64_t)F || L->w_up->ne[1] != (uint64_t)F) {
            st = llmk_fail(LLMK_TENSOR_SHAPE_MISMATCH, "program: layer %d gate/up have %llu/%llu rows, n_ff is %lld", il,
                           (unsigned long long)L->w_gate->ne[1], (unsigned long long)L->w_up->ne[1], (long long)F);
            goto fail;
        }
        ph->qmask = (uint8_t)llmk_act_form_bit(L->w_down->type);
        epi = L->ffn_post_norm_f ? LLMK_EPI_NONE : LLMK_EPI_RESIDUAL;
        if ((st = matmul(p, il, "ffn_down", LLMK_BUF_G, F, 1, &L->w_down, o_out, epi, &ph)) != LLMK_OK) goto fail;
        if (L->ffn_post_norm_f && il == hp->n_layer - 1) {
            ph = add(p, LLMK_OP_POST_NORM, il, "ffn_post_norm");
            ph->in = LLMK_BUF_O, ph->out[0] = LLMK_BUF_X, ph->vec[0] = L->ffn_post_norm_f, ph->rows[0] = E;
        }
    }
    p->n_layer_phases = p->n_phases;
    struct llmk_phase *norm = add(p, LLMK_OP_NORM_QUANT, -1, "output_norm");
    norm->in = LLMK_BUF_X, norm->out[0] = LLMK_BUF_XN, norm->vec[0] = m->out_norm_f, norm->rows[0] = E;
    norm->qmask = (uint8_t)llmk_act_form_bit(m->output->type);
    norm->final = 1;
    int l_out[1] = {LLMK_BUF_LOGITS};
    int head_epi = hp->logit_softcap > 0 ? LLMK_EPI_SOFTCAP : LLMK_EPI_NONE;
    if ((st = matmul(p, -1, "lm_head", LLMK_BUF_XN, E, 1, &m->output, l_out, head_epi, &ph)) != LLMK_OK) goto fail;
    ph->final = 1;
    ph = add(p, LLMK_OP_ARGMAX, -1, "argmax");
    ph->in = LLMK_BUF_LOGITS;
    ph->rows[0] = hp->n_vocab;
    ph->final = 1;
    for (int i = 0; i < p->n_phases; i++) {
        struct llmk_phase *q = &p->ph[i];
        bool mm = q->op == LLMK_OP_MATMUL || q->op == LLMK_OP_MOE_GATE_UP || q->op == LLMK_OP_MOE_DOWN;
        for (int w = 0; w < 3; w++) q->wscale[w] = mm && w < q->n_w ? llmk_model_weight_scale(m, q->w[w]) : 1.0f;
    }
    return LLMK_OK;
fail:
    llmk_program_free(p);
    return st;
}

void llmk_program_free(struct llmk_program *p) {
    if (!p) return;
    free(p->ph);
    p->ph = NULL;
    p->n_phases = 0;
}

static void qmask_str(unsigned qm, char *s, size_t cap) {
    static const char *const nm[LLMK_ACT_FORMS] = {"q8_0", "q8_1", "q8_k", "q8_1x", "a16", "a8"};
    s[0] = 0;
    for (int i = 0; i < LLMK_ACT_FORMS; i++)
        if (qm & (1u << i)) {
            size_t l = strlen(s);
            snprintf(s + l, cap - l, "%s%s", l ? "," : " -> ", nm[i]);
        }
}

void llmk_program_dump(const struct llmk_program *p, FILE *f) {
    const llmk_hparams *hp = &p->m->hp;
    /* phases per layer, and any a layer has beyond that (gemma3's last FFN post-norm) */
    int per = (p->n_layer_phases - 1) / hp->n_layer, extra = p->n_layer_phases - 1 - per * hp->n_layer;
    char more[32] = "";
    if (extra) snprintf(more, sizeof more, " + %d", extra);
    fprintf(f, "program: %d phases (1 + %d layers x %d%s + %d final), d_model %d, heads %d/%d x %d, ffn %d, vocab %d\n",
            p->n_phases, hp->n_layer, per, more, p->n_phases - p->n_layer_phases, hp->n_embd, hp->n_head,
            hp->n_head_kv, hp->head_dim, hp->n_ff, hp->n_vocab);
    if (p->m->moe.n_expert)
        fprintf(f, "experts: %d, %d per token, expert ffn %d\n", p->m->moe.n_expert, p->m->moe.n_used,
                p->m->moe.n_ff_exp);
    for (int i = 0; i < p->n_phases; i++) {
        const struct llmk_phase *ph = &p->ph[i];
        char q[48];
        qmask_str(ph->qmask, q, sizeof q);
        fprintf(f, "%4d  %-10s %-18s", i, llmk_op_name(ph->op), ph->name);
        switch (ph->op) {
        case LLMK_OP_EMBED:
            fprintf(f, " %s[%s] ids -> %s[%lld]", ph->w[0]->name, llmk_type_name(ph->w[0]->type),
                    buf_names[ph->out[0]], (long long)ph->rows[0]);
            break;
        case LLMK_OP_NORM_QUANT:
            fprintf(f, "%s rmsnorm(%s[%lld]) * w -> %s%s", ph->vec[1] ? " x += rmsnorm(o) * w_post;" : "",
                    buf_names[ph->in], (long long)ph->rows[0], buf_names[ph->out[0]], q);
            break;
        case LLMK_OP_POST_NORM:
            fprintf(f, " %s += rmsnorm(%s[%lld]) * w", buf_names[ph->out[0]], buf_names[ph->in], (long long)ph->rows[0]);
            break;
        case LLMK_OP_MATMUL:
            fprintf(f, " %s[%lld] x", buf_names[ph->in], (long long)ph->k);
            for (int w = 0; w < ph->n_w; w++)
                fprintf(f, "%s %s[%s %lldx%lld] -> %s", w ? "," : "", ph->w[w]->name, llmk_type_name(ph->w[w]->type),
                        (long long)ph->rows[w], (long long)ph->k, buf_names[ph->out[w]]);
            fprintf(f, "%s%s", epi_names[ph->epilogue], q);
            break;
        case LLMK_OP_ROPE_KV:
            fprintf(f, " %sq[%d x %lld], k[%d x %lld] -> rope -> kv cache", ph->vec[0] ? "qk_norm, " : "",
                    hp->n_head, (long long)ph->rows[0], hp->n_head_kv, (long long)ph->rows[0]);
            break;
        case LLMK_OP_ATTN:
            fprintf(f, " softmax(q k^T * %.6g) v, %d heads over %d kv heads", hp->attn_scale, hp->n_head, hp->n_head_kv);
            if (p->m->layers[ph->layer].swa) fprintf(f, ", window %d", hp->n_swa);
            if (p->m->layers[ph->layer].sinks_f) fprintf(f, ", sinks");
            fprintf(f, " -> %s%s", buf_names[ph->out[0]], q);
            break;
        case LLMK_OP_ARGMAX:
            fprintf(f, " %s[%lld] -> token id", buf_names[ph->in], (long long)ph->rows[0]);
            break;
        case LLMK_OP_MOE_ROUTE:
            fprintf(f, " %s[%lld] x %s[%s %lldx%lld] -> softmax, top-%d%s", buf_names[ph->in], (long long)ph->k,
                    ph->w[0]->name, llmk_type_name(ph->w[0]->type), (long long)ph->rows[0], (long long)ph->k,
                    p->m->moe.n_used, p->m->moe.norm_w ? ", renormalised" : "");
            break;
        case LLMK_OP_MOE_GATHER:
            fprintf(f, " %s[%lld] -> %s by expert%s", buf_names[ph->in], (long long)ph->rows[0], buf_names[ph->out[0]], q);
            break;
        case LLMK_OP_MOE_GATE_UP:
        case LLMK_OP_MOE_DOWN:
            fprintf(f, " %s[%lld] x", buf_names[ph->in], (long long)ph->k);
            for (int w = 0; w < ph->n_w; w++)
                fprintf(f, "%s %s[%s %lldx%lldx%llu] -> %s", w ? "," : "", ph->w[w]->name, llmk_type_name(ph->w[w]->type),
                        (long long)ph->rows[w], (long long)ph->k, (unsigned long long)ph->w[w]->ne[2],
                        buf_names[ph->out[w]]);
            fprintf(f, "%s%s", epi_names[ph->epilogue], q);
            break;
        case LLMK_OP_MOE_COMBINE:
            fprintf(f, " x += sum of %d %s rows x weights", p->m->moe.n_used, buf_names[ph->in]);
            break;
        default: break;
        }
        fputc('\n', f);
    }
}
