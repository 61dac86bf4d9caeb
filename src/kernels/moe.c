/* Mixture-of-experts kernels: the scalar references (moe.h). */
#include "kernels/moe.h"

#include "kernels/kernels.h"

#include <math.h>

/* a ranks before b: larger logit, or equal logits and lower index; a NaN
 * ranks after every number. */
static bool ranks_before(const float *l, int a, int b) {
    if (isnan(l[b])) return !isnan(l[a]) || a < b;
    if (isnan(l[a])) return false;
    return l[a] > l[b] || (l[a] == l[b] && a < b);
}

void llmk_moe_router_ref(const float *logits, int n_expert, int k, bool norm, int32_t *sel, float *w) {
    double mx = -INFINITY, sum = 0;
    for (int e = 0; e < n_expert; e++)
        if (logits[e] > mx) mx = logits[e];
    for (int e = 0; e < n_expert; e++) sum += exp((double)logits[e] - mx);
    /* selection by k passes over the logits: k is small and this keeps the
     * rule (rank order, ties to the lower index) in one comparison */
    double p[LLMK_MOE_KMAX], sel_sum = 0;
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < n_expert; e++) {
            bool taken = false;
            for (int i = 0; i < j && !taken; i++) taken = sel[i] == e;
            if (!taken && (best < 0 || ranks_before(logits, e, best))) best = e;
        }
        sel[j] = best;
        p[j] = exp((double)logits[best] - mx) / sum;
        sel_sum += p[j];
    }
    for (int j = 0; j < k; j++) w[j] = (float)(norm ? p[j] / sel_sum : p[j]);
}

/* The reference's routing with the selection in one pass: each expert in
 * index order is inserted into the ranked list of the best so far (a strict
 * total order, so the same k experts in the same order); the k passes of
 * the reference compared up to k^2 n times, a third of a qwen3moe prefill's
 * routing phase. The probabilities are the reference's operations. */
void llmk_moe_router_topk(const float *logits, int n_expert, int k, bool norm, int32_t *sel, float *w) {
    double mx = -INFINITY, sum = 0;
    for (int e = 0; e < n_expert; e++)
        if (logits[e] > mx) mx = logits[e];
    for (int e = 0; e < n_expert; e++) sum += exp((double)logits[e] - mx);
    int cnt = 0;
    for (int e = 0; e < n_expert; e++) {
        if (cnt == k && !ranks_before(logits, e, sel[k - 1])) continue;
        int i = cnt < k ? cnt++ : k - 1;
        for (; i > 0 && ranks_before(logits, e, sel[i - 1]); i--) sel[i] = sel[i - 1];
        sel[i] = e;
    }
    double p[LLMK_MOE_KMAX], sel_sum = 0;
    for (int j = 0; j < k; j++) {
        p[j] = exp((double)logits[sel[j]] - mx) / sum;
        sel_sum += p[j];
    }
    for (int j = 0; j < k; j++) w[j] = (float)(norm ? p[j] / sel_sum : p[j]);
}

void llmk_moe_tile_map(const int32_t *sel, int32_t n_rows, int k, int n_expert, int32_t *off, int32_t *slots) {
    int64_t n = (int64_t)n_rows * k;
    for (int e = 0; e <= n_expert; e++) off[e] = 0;
    for (int64_t s = 0; s < n; s++) off[sel[s]]++;
    int32_t run = 0; /* exclusive prefix: off[e] = expert e's first entry */
    for (int e = 0; e <= n_expert; e++) {
        int32_t c = off[e];
        off[e] = run;
        run += c;
    }
    /* a counting sort in slot order, so rows ascend within an expert; each
     * cursor then ends at the next expert's start, shifted back after */
    for (int64_t s = 0; s < n; s++) slots[off[sel[s]]++] = (int32_t)s;
    for (int e = n_expert - 1; e > 0; e--) off[e] = off[e - 1];
    off[0] = 0;
}

void llmk_moe_expert_matvec(const struct llmk_type_kernels *tk, const llmk_tensor_info *w, int64_t e, int64_t r0,
                            int64_t r1, const void *act, size_t a_stride, int64_t m, float *y, size_t y_stride) {
    size_t ws = (size_t)(w->n_bytes / (w->ne[1] * w->ne[2]));
    const char *base = (const char *)w->data + ((size_t)e * (size_t)w->ne[1] + (size_t)r0) * ws;
    int64_t k_in = (int64_t)w->ne[0];
    if (tk->vec_dotm && m > 1) {
        tk->vec_dotm(k_in, base, ws, r1 - r0, act, a_stride, m, y, y_stride);
        return;
    }
    for (int64_t i = 0; i < m; i++)
        tk->vec_dot(k_in, base, ws, r1 - r0, (const char *)act + (size_t)i * a_stride, y + (size_t)i * y_stride);
}

void llmk_moe_combine_ref(float *x, const float *const *y, const float *w, int k, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float acc = 0.0f;
        for (int j = 0; j < k; j++) {
            float prod = w[j] * y[j][i];
            acc += prod;
        }
        x[i] += acc;
    }
}
