/* The executor plan (plan.h). */
#include "plan.h"

#include "internal.h"
#include "codec/blocks.h"
#include "kernels/a16.h"
#include "kernels/a8.h"
#include "kernels/r8.h"

#include <stdlib.h>
#include <string.h>

const char *llmk_act_form_name(int form) {
    static const char *const names[LLMK_ACT_FORMS] = {"q8_0", "q8_1", "q8_k", "q8_1x", "a16", "a8"};
    return form >= 0 && form < LLMK_ACT_FORMS ? names[form] : "f32";
}

const char *llmk_mm_route_name(int route) {
    static const char *const names[] = {"f32_check", "dot", "rows_a16", "r8_a16", "x2_q8_1x", "r8_a8", "rows_a8"};
    return route >= 0 && route <= LLMK_ROUTE_ROWS_A8 ? names[route] : "?";
}

static int codec_form(uint32_t wtype) {
    uint32_t a = llmk_codec_get(wtype)->act_type;
    return a == LLMK_TYPE_Q8_0 ? LLMK_ACT_Q8_0 : a == LLMK_TYPE_Q8_1 ? LLMK_ACT_Q8_1 : a == LLMK_TYPE_Q8_K ? LLMK_ACT_Q8_K
                                                                                                          : -1;
}

/* Whether phase ph's weights run on the f32 check route: f32_act "all", or
 * a list naming the phase's kind (the part of its name after the last '.'). */
static bool f32_checked(const struct llmk_phase *ph, const char *f32_act) {
    if (!f32_act || !*f32_act) return false;
    if (strcmp(f32_act, "all") == 0) return true;
    const char *dot = strrchr(ph->name, '.');
    return strstr(f32_act, dot ? dot + 1 : ph->name) != NULL;
}

static struct llmk_plan_weight plan_weight(const struct llmk_plan *p, const struct llmk_plan_options *o,
                                           const struct llmk_phase *ph, uint32_t wtype) {
    struct llmk_plan_weight w = {.route = LLMK_ROUTE_DOT, .form = (int8_t)codec_form(wtype)};
    if (o->act_a8 && llmk_a8_supports(wtype)) {
        w.form = LLMK_ACT_A8;
        w.route = p->K->gemm_r8_a8 ? LLMK_ROUTE_R8_A8 : LLMK_ROUTE_ROWS_A8;
    } else if (!o->act_q8 && llmk_a16_supports(wtype)) {
        w.form = LLMK_ACT_A16;
        w.route = p->K->gemm_r8_a16 ? LLMK_ROUTE_R8_A16 : LLMK_ROUTE_ROWS_A16;
    } else if (o->repack && p->K->gemm_q4_1_x2_q8_1x && wtype == LLMK_TYPE_Q4_1) {
        w.form = LLMK_ACT_Q8_1X;
        w.route = LLMK_ROUTE_X2_Q8_1X;
    }
    /* the check route reads f32; the form stays what the consumers of the
     * producer's output are quantized for, so the other phases are unchanged */
    if (f32_checked(ph, o->f32_act)) w.route = LLMK_ROUTE_F32_CHECK;
    return w;
}

/* A stack of experts as the one 2-D matrix its repacking sees: expert e is
 * rows [e * ne[1], (e + 1) * ne[1]). */
llmk_tensor_info llmk_plan_flat_experts(const llmk_tensor_info *t) {
    llmk_tensor_info f = *t;
    f.ne[1] *= f.ne[2] ? f.ne[2] : 1;
    f.ne[2] = 1;
    f.n_dims = 2;
    return f;
}

/* Experts on the r8 kernels when A16 covers every stack of the layer, an
 * expert's rows are whole groups of 8 (so no group straddles two experts)
 * and the repacked stack is at most 1.7x the file's bytes: Q8_0, Q4_1,
 * Q4_0, MXFP4 (MX4, 1.18x), Q4_K (Q4S, 1.33x) and Q6_K (Q8S, 1.68x); not
 * Q5_K, Q3_K, IQ4_XS or IQ4_NL, whose 8-bit records are 1.9-2.6x. Where
 * the kernels read the compact forms (r8.h) their sizes count: IQ4_NL (NL4,
 * 1.0x), IQ4_XS (XS4, 1.12x), Q5_K (Q8M, 1.59x), Q3_K (Q3C, 1.09x) and
 * Q2_K (Q2C, 1.24x) and Q5_1 (Q51, 1.0x) then pass (Q6_K: Q6C, 1.03x; MXFP4:
 * MXC, 1.0x). A decode
 * step streams the experts it picks, so a bigger copy costs bandwidth the
 * kernels must win back: Q8S's 2.4x for Q4_K lost 11% of qwen3moe Q4_K_M's
 * tg128; at 1.7x its pp512 gains 18% and tg128 loses 4%, at 1.2x (Q4_K
 * and Q6_K layers on the dot) neither (docs/model.md). Else the codec's
 * dot on its own form (f32 for F32). */
static bool moe_r8(const struct llmk_plan *p, const struct llmk_plan_options *o, const struct llmk_phase *ph) {
    if (o->act_q8 || !p->K->gemm_r8_a16) return false;
    for (int w = 0; w < ph->n_w; w++) {
        const llmk_tensor_info *t = ph->w[w];
        if (!llmk_a16_supports(t->type) || t->ne[1] % LLMK_R8_ROWS != 0 || t->ne[0] % LLMK_QK) return false;
        llmk_tensor_info f = llmk_plan_flat_experts(t);
        size_t bytes;
        if (llmk_r8_size(&f, p->r8_forms, &bytes) != LLMK_OK) {
            llmk_error_clear();
            return false;
        }
        if ((double)bytes > 1.7 * (double)t->n_bytes) return false;
    }
    return true;
}

/* Whether an r8 MoE phase reads A8: every stack of a type a8.h takes. */
static bool moe_a8(const struct llmk_plan *p, const struct llmk_plan_options *o, const struct llmk_phase *ph) {
    if (!o->act_a8 || !p->K->gemm_r8_a8) return false;
    for (int w = 0; w < ph->n_w; w++)
        if (!llmk_a8_supports(ph->w[w]->type)) return false;
    return true;
}

/* The MoE phases of one layer (norm, route, gather, gate_up, down at i-2 ..
 * i+2 from the gather): their routes, and the forms the norm and gate_up
 * quantize for the gather and for down (the gather copies gate_up's). */
static void plan_moe(struct llmk_plan *p, const struct llmk_plan_options *o, int i) {
    const struct llmk_phase *ph = &p->prog->ph[i];
    LLMK_CHECK(i >= 2 && i + 2 < p->prog->n_phases && ph[-2].op == LLMK_OP_NORM_QUANT &&
               ph[1].op == LLMK_OP_MOE_GATE_UP && ph[2].op == LLMK_OP_MOE_DOWN);
    bool r8 = moe_r8(p, o, &ph[1]) && moe_r8(p, o, &ph[2]);
    bool a8[3] = {r8 && moe_a8(p, o, &ph[1]), r8 && moe_a8(p, o, &ph[1]), r8 && moe_a8(p, o, &ph[2])};
    for (int j = 0; j <= 2; j++) {
        struct llmk_plan_phase *pp = &p->ph[i + j];
        for (int w = 0; w < ph[j].n_w; w++) {
            int f = !r8 ? codec_form(ph[j].w[w]->type) : a8[j] ? LLMK_ACT_A8 : LLMK_ACT_A16;
            int route = !r8 ? LLMK_ROUTE_DOT : a8[j] ? LLMK_ROUTE_R8_A8 : LLMK_ROUTE_R8_A16;
            pp->w[w] = (struct llmk_plan_weight){.route = (uint8_t)route, .form = (int8_t)f};
            if (f >= 0) p->need[ph[j].in] |= 1u << f;
            if (f >= 0 && j == 0) p->need[ph[j].out[0]] |= 1u << f;
        }
    }
    unsigned in = p->ph[i].w[0].form >= 0 ? 1u << p->ph[i].w[0].form : 0;
    p->ph[i - 2].qmask = p->ph[i].qmask = (uint8_t)in;
    p->ph[i + 1].qmask = (uint8_t)(p->ph[i + 2].w[0].form >= 0 ? 1u << p->ph[i + 2].w[0].form : 0);
}

/* Per phase: the routes of a matmul's weights and, for each producer, the
 * forms its consumer (the next phase) reads. */
static void plan_forms(struct llmk_plan *p, const struct llmk_plan_options *o) {
    const struct llmk_program *prog = p->prog;
    for (int i = 0; i < prog->n_phases; i++) {
        const struct llmk_phase *ph = &prog->ph[i];
        if (ph->op != LLMK_OP_MOE_GATE_UP && ph->op != LLMK_OP_MOE_DOWN) p->ph[i].qmask = ph->qmask;
        if (ph->op == LLMK_OP_MOE_GATHER) plan_moe(p, o, i); /* the gather, gate_up and down */
        if (ph->op == LLMK_OP_MOE_GATHER || ph->op == LLMK_OP_MOE_GATE_UP || ph->op == LLMK_OP_MOE_DOWN) continue;
        if (ph->op != LLMK_OP_MATMUL) continue;
        for (int w = 0; w < ph->n_w; w++) {
            p->ph[i].w[w] = plan_weight(p, o, ph, ph->w[w]->type);
            if (p->ph[i].w[w].route == LLMK_ROUTE_F32_CHECK) p->any_f32_check = true;
            if (p->ph[i].w[w].form >= 0) p->need[ph->in] |= 1u << p->ph[i].w[w].form;
        }
    }
    for (int i = 0; i + 1 < prog->n_phases; i++) {
        const struct llmk_phase *next = &prog->ph[i + 1];
        if (!p->ph[i].qmask || next->op != LLMK_OP_MATMUL) continue;
        unsigned qm = 0;
        for (int w = 0; w < next->n_w; w++)
            if (p->ph[i + 1].w[w].form >= 0) qm |= 1u << p->ph[i + 1].w[w].form;
        p->ph[i].qmask = (uint8_t)qm;
    }
}

/* Fusions and share units, from the forms. */
static void plan_splits(struct llmk_plan *p, const struct llmk_plan_options *o) {
    const struct llmk_program *prog = p->prog;
    const llmk_hparams *hp = &prog->m->hp;
    bool a16_rows = !o->act_q8 && hp->n_embd % LLMK_QK == 0; /* the per-worker rows of dup_norm exist */
    for (int i = 0; i < prog->n_phases; i++) {
        const struct llmk_phase *ph = &prog->ph[i], *next = i + 1 < prog->n_phases ? ph + 1 : NULL;
        struct llmk_plan_phase *pp = &p->ph[i];
        pp->unit = LLMK_MM_UNIT;
        pp->rope_fused = ph->op == LLMK_OP_MATMUL && next && next->op == LLMK_OP_ROPE_KV && hp->head_dim % LLMK_MM_UNIT == 0;
        if (pp->rope_fused) pp->unit = hp->head_dim;
        if (llmk_epi_glu(ph->epilogue)) /* (also a MoE gate/up: whole blocks of down's form) */
            for (int f = 0; f < LLMK_ACT_FORMS; f++)
                if ((pp->qmask & (1u << f)) && p->K->act_block[f] > pp->unit) pp->unit = p->K->act_block[f];
        pp->head_quant = true;
        for (int f = 0; f < LLMK_ACT_FORMS; f++)
            if ((pp->qmask & (1u << f)) && hp->head_dim % (int)p->K->act_block[f] != 0) pp->head_quant = false;
        pp->a16_only = ph->op == LLMK_OP_NORM_QUANT && pp->qmask == 1u << LLMK_ACT_A16 && !p->any_f32_check &&
                       a16_rows && next && next->op == LLMK_OP_MATMUL;
        for (int w = 0; pp->a16_only && w < next->n_w; w++)
            if (p->ph[i + 1].w[w].form != LLMK_ACT_A16) pp->a16_only = false;
    }
}

void llmk_plan_share(const struct llmk_plan *p, int i, int wi, int ith, int64_t *r0, int64_t *r1) {
    const struct llmk_phase *ph = &p->prog->ph[i];
    int64_t lo, hi, unit = p->ph[i].unit;
    if (llmk_epi_glu(ph->epilogue)) {
        int64_t F = ph->rows[0];
        llmk_split_range((F + unit - 1) / unit, ith, p->nth, &lo, &hi);
        *r0 = lo * unit, *r1 = hi * unit < F ? hi * unit : F;
        return;
    }
    int64_t total = 0, base = 0;
    for (int w = 0; w < ph->n_w; w++) total += ph->rows[w];
    for (int w = 0; w < wi; w++) base += ph->rows[w];
    llmk_split_range((total + unit - 1) / unit, ith, p->nth, &lo, &hi);
    lo = lo * unit - base, hi = hi * unit - base;
    *r0 = lo < 0 ? 0 : lo < ph->rows[wi] ? lo : ph->rows[wi];
    *r1 = hi < *r0 ? *r0 : hi < ph->rows[wi] ? hi : ph->rows[wi];
}

/* The r8 arena: one stream per worker, its shares of every matmul in program
 * order, so its reads run on from one phase into the next (tg +5% over one
 * region per tensor, measured with a reading stand-in for the kernels). */
static int plan_r8_arena(struct llmk_plan *p) {
    const struct llmk_program *prog = p->prog;
    size_t off = 0;
    for (int ith = 0; ith < p->nth; ith++)
        for (int i = 0; i < prog->n_phases; i++)
            for (int w = 0; w < prog->ph[i].n_w; w++) {
                if (!llmk_route_r8(p->ph[i].w[w].route)) continue;
                const llmk_tensor_info *t = prog->ph[i].w[w];
                size_t whole;
                if (prog->ph[i].op == LLMK_OP_MOE_GATE_UP || prog->ph[i].op == LLMK_OP_MOE_DOWN) {
                    /* a whole stack, in worker 0's stream: any worker may take any expert */
                    llmk_tensor_info f = llmk_plan_flat_experts(t);
                    int st = llmk_r8_size(&f, p->r8_forms, &whole);
                    if (st != LLMK_OK) return st;
                    if (ith == 0) p->r8_off[(i * 3 + w) * p->nth] = off, off += whole;
                    continue;
                }
                if (prog->ph[i].op != LLMK_OP_MATMUL) continue;
                int st = llmk_r8_size(t, p->r8_forms, &whole);
                if (st != LLMK_OK) return st;
                int64_t r0, r1;
                llmk_plan_share(p, i, w, ith, &r0, &r1);
                LLMK_CHECK(r0 % LLMK_R8_ROWS == 0);
                int64_t g0 = r0 / LLMK_R8_ROWS, g1 = r1 > r0 ? (r1 + LLMK_R8_ROWS - 1) / LLMK_R8_ROWS : g0;
                p->r8_off[(i * 3 + w) * p->nth + ith] = off;
                off += llmk_r8_view_bytes(t, p->r8_forms, g0, g1);
            }
    p->r8_bytes = off;
    return LLMK_OK;
}

int llmk_plan_build(const struct llmk_program *prog, const struct llmk_kernels *K, const struct llmk_plan_options *o,
                    int nth, struct llmk_plan *out) {
    memset(out, 0, sizeof *out);
    out->prog = prog, out->K = K, out->nth = nth;
    out->r8_forms = o->portable ? 0 : K->r8_forms;
    int hd = prog->m->hp.head_dim;
    out->VK = hd % K->attn_head_multiple == 0 ? K : llmk_kernels_ref();
    out->ph = calloc((size_t)prog->n_phases, sizeof *out->ph);
    out->r8_off = calloc((size_t)prog->n_phases * 3 * (size_t)nth, sizeof *out->r8_off);
    if (!out->ph || !out->r8_off) {
        llmk_plan_free(out);
        return llmk_fail(LLMK_OUT_OF_MEMORY, "plan: %d phases", prog->n_phases);
    }
    plan_forms(out, o);
    plan_splits(out, o);
    int st = plan_r8_arena(out);
    if (st != LLMK_OK) llmk_plan_free(out);
    return st;
}

void llmk_plan_free(struct llmk_plan *p) {
    free(p->ph), free(p->r8_off);
    p->ph = NULL, p->r8_off = NULL;
}
