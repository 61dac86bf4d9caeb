/* 16-bit activation kernels (src/kernels/a16.h) against the 8-bit ones, one
 * thread: microseconds per matvec (M = 1) and per activation row at M = 8
 * (the multi-row kernels), for Q4_1 and Q8_0 weights at the default model's
 * shapes (n x k: n weight rows of k). Columns: a16 (src/kernels/r8.h: the
 * AVX2 kernel on repacked weights, or the scalar reference without AVX2), q8
 * (the kernel table's vec_dot / vec_dotm with the codec's 8-bit activations) and,
 * for Q4_1 with AVX2, q4_1_x2 (the executor's repacked kernel with q8_1x
 * activations). Each figure is the minimum over repeated calls (the machine
 * is shared; the minimum measures the kernel). Prints; asserts nothing.
 * Arguments: type names (default q4_1 q8_0); a type whose blocks are 256
 * elements (the K-quants) runs at k = 1024 and 3072 instead of 576 and 1536.
 * Levers: LLMK_KERNELS=ref, LLMK_CPU_MASK=none, LLMK_RECORDS=portable. */
#include "../app/env_config.h"
#include "bench_util.h"
#include "codec/codec.h"
#include "internal.h"
#include "kernels/a16.h"
#include "kernels/a8.h"
#include "kernels/kernels.h"
#include "kernels/r8.h"
#include "kernels/q4_1_x2.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { M_ROWS = 8 };

struct job {
    int kind; /* 0 a16, 1 q8 codec, 2 q4_1_x2, 3 r8 with a8 activations */
    uint32_t t;
    int64_t n, k, m;
    const void *w;
    size_t ws;
    const void *act;
    size_t as;
    const struct llmk_q4_1_x2 *xw;
    const struct llmk_r8 *rw;
    float *y;
    void *scratch; /* the r8 kernel's tables (r8.h) */
    size_t scratch_bytes;
};

static void run(const struct job *j) {
    if (j->kind == 2) {
        llmk_gemm_q4_1_x2_q8_1x_avx2(j->xw, 0, j->n, j->act, j->as, j->m, j->y, j->n);
        return;
    }
    if (j->kind == 3) {
        llmk_kernels()->gemm_r8_a8(j->rw, 0, j->n, j->act, j->as, j->m, j->y, (size_t)j->n, NULL, 0);
        return;
    }
    if (j->kind == 0) {
        llmk_gemm_r8_a16_fn f = llmk_kernels()->gemm_r8_a16;
        if (f && j->rw->data) f(j->rw, 0, j->n, j->act, j->as, j->m, j->y, (size_t)j->n, j->scratch, j->scratch_bytes);
        else llmk_r8_ref(j->t, j->k, j->w, j->ws, 0, j->n, j->act, j->as, j->m, j->y, (size_t)j->n);
        return;
    }
    llmk_dotm_fn dm = llmk_kernels()->type[j->t].vec_dotm;
    if (j->m > 1 && dm) {
        dm(j->k, j->w, j->ws, j->n, j->act, j->as, j->m, j->y, (size_t)j->n);
        return;
    }
    llmk_dot_fn d = llmk_kernels()->type[j->t].vec_dot;
    for (int64_t i = 0; i < j->m; i++) d(j->k, j->w, j->ws, j->n, (const char *)j->act + (size_t)i * j->as, j->y + i * j->n);
}

/* minimum seconds per call over ~0.1 s of calls */
static double best(const struct job *j) {
    double t0 = bench_now();
    run(j);
    double one = bench_now() - t0, m = one;
    int reps = (int)(0.1 / (one > 1e-7 ? one : 1e-7));
    reps = reps < 5 ? 5 : reps > 5000 ? 5000 : reps;
    for (int r = 0; r < reps; r++) {
        double a = bench_now();
        run(j);
        a = bench_now() - a;
        if (a < m) m = a;
    }
    return m;
}

static int type_by_name(const char *name, uint32_t *t) {
    for (uint32_t i = 0; i < LLMK_TYPE_COUNT_; i++)
        if (llmk_type_name(i) && strcmp(llmk_type_name(i), name) == 0 && llmk_a16_supports(i)) return *t = i, 1;
    return 0;
}

int main(int argc, char **argv) {
    if (!env_config_apply("bench_a16")) return 2;
    static const int64_t shapes32[][2] = {{576, 576}, {1536, 576}, {576, 1536}, {49152, 576}};
    static const int64_t shapes256[][2] = {{1024, 1024}, {3072, 1024}, {1024, 3072}, {49152, 1024}};
    uint32_t types[16] = {LLMK_TYPE_Q4_1, LLMK_TYPE_Q8_0};
    size_t n_types = 2;
    if (argc > 1) {
        n_types = 0;
        for (int i = 1; i < argc && n_types < LLMK_ARRAY_LEN(types); i++)
            if (!type_by_name(argv[i], &types[n_types++])) {
                fprintf(stderr, "bench_a16: %s is not a type the a16 kernels take\n", argv[i]);
                return 2;
            }
    }
    int avx2 = (llmk_cpu_detect() & LLMK_CPU_AVX2) != 0;
    const char *q8name;
    printf("a16 kernels: %s, a8: %s; 1 thread; minimum us per matvec (M=1) and per activation row at M=%d\n",
           !llmk_kernels()->gemm_r8_a16                          ? "r8_ref"
           : llmk_kernels()->gemm_r8_a16 == llmk_gemm_r8_a16_avx2 ? "r8_avx2"
                                                             : "r8_avx512",
           !llmk_kernels()->gemm_r8_a8                          ? "none"
           : llmk_kernels()->gemm_r8_a8 == llmk_gemm_r8_a8_avx2 ? "r8_a8_avx2"
                                                           : "r8_a8_avx512",
           M_ROWS);
    printf("%-6s %-11s %9s %9s %9s %9s   %9s %9s %9s %9s  %s\n", "type", "n x k", "a16 M=1", "q8 M=1", "q4_1_x2",
           "r8 a8", "a16 M=8", "q8 M=8", "q4_1_x2", "r8 a8", "8-bit kernel");
    srand(7);
    for (size_t ti = 0; ti < n_types; ti++) {
        uint32_t t = types[ti];
        const int64_t(*shapes)[2] = llmk_type_block_elems(t) == 256 ? shapes256 : shapes32;
        q8name = llmk_kernels()->type[t].vec_dot_name;
        const struct llmk_codec *c = llmk_codec_get(t), *ac = llmk_codec_get(c->act_type);
        for (size_t si = 0; si < LLMK_ARRAY_LEN(shapes32); si++) {
            int64_t n = shapes[si][0], k = shapes[si][1];
            uint64_t rb, arb;
            llmk_row_bytes(t, (uint64_t)k, &rb);
            llmk_row_bytes(c->act_type, (uint64_t)k, &arb);
            unsigned char *w = aligned_alloc(64, ((size_t)rb * (size_t)n + 63) / 64 * 64);
            float *x = malloc((size_t)k * M_ROWS * sizeof *x), *y = malloc((size_t)n * M_ROWS * sizeof *y);
            int64_t proto = n < 64 ? n : 64; /* 64 random rows, tiled */
            for (int64_t r = 0; r < proto; r++) {
                for (int64_t i = 0; i < k; i++) x[i] = (float)((rand() % 2001) - 1000) / 1000.0f;
                llmk_quantize_row(t, x, w + (size_t)r * rb, k);
            }
            for (int64_t r = proto; r < n; r++) memcpy(w + (size_t)r * rb, w + (size_t)(r % proto) * rb, rb);
            for (int64_t i = 0; i < k * M_ROWS; i++) x[i] = (float)((rand() % 2001) - 1000) / 1000.0f;
            size_t as16 = llmk_a16_row_bytes(k), asx = llmk_q8_1x_row_bytes(k);
            size_t asr = llmk_a8_row_bytes(k);
            unsigned char *a16 = malloc(as16 * M_ROWS), *a8 = malloc((size_t)arb * M_ROWS), *ax = malloc(asx * M_ROWS);
            unsigned char *ar = malloc(asr * M_ROWS);
            for (int i = 0; i < M_ROWS; i++) {
                llmk_kernels()->act_quant[LLMK_ACT_A16](x + (int64_t)i * k, k, 0, k, a16 + (size_t)i * as16);
                ac->quantize(x + (int64_t)i * k, a8 + (size_t)i * arb, k);
                llmk_q8_1x_quantize(x + (int64_t)i * k, k, 0, k, ax + (size_t)i * asx);
                llmk_a8_quantize_row_ref(x + (int64_t)i * k, k, 0, k, ar + (size_t)i * asr);
            }
            struct llmk_q4_1_x2 xw = {0};
            struct llmk_r8 rw = {0};
            int have_x = 0;
            llmk_tensor_info ti_ = {.name = "w", .type = t, .n_dims = 2, .ne = {(uint64_t)k, (uint64_t)n, 1, 1},
                                    .n_elements = (uint64_t)k * (uint64_t)n, .n_bytes = rb * (uint64_t)n, .data = w};
            if (t == LLMK_TYPE_Q4_1 && avx2) have_x = llmk_q4_1_x2_repack(&ti_, &xw) == LLMK_OK;
            llmk_config cf;
            llmk_config_get(&cf);
            unsigned forms = cf.portable_records ? 0 : llmk_kernels()->r8_forms; /* LLMK_RECORDS=portable */
            if (llmk_kernels()->gemm_r8_a16 && llmk_r8_repack(&ti_, forms, &rw) != LLMK_OK) return 1;
            size_t sb = (llmk_r8_scratch_bytes(k, LLMK_R8_TABLE_ROWS) + 63) / 64 * 64;
            void *scratch = aligned_alloc(64, sb);
            int have_r = avx2 && llmk_kernels()->gemm_r8_a8 && llmk_a8_supports(t) && rw.data;
            double us[2][4] = {{0}};
            for (int mi = 0; mi < 2; mi++) {
                int64_t m = mi ? M_ROWS : 1;
                struct job a = {0, t, n, k, m, w, (size_t)rb, a16, as16, NULL, &rw, y, scratch, sb};
                struct job b = {1, t, n, k, m, w, (size_t)rb, a8, (size_t)arb, NULL, NULL, y, NULL, 0};
                struct job xj = {2, t, n, k, m, w, (size_t)rb, ax, asx, &xw, NULL, y, NULL, 0};
                us[mi][0] = best(&a) * 1e6 / (double)m;
                us[mi][1] = best(&b) * 1e6 / (double)m;
                struct job rj = {3, t, n, k, m, w, (size_t)rb, ar, asr, NULL, &rw, y, NULL, 0};
                us[mi][2] = have_x ? best(&xj) * 1e6 / (double)m : 0;
                us[mi][3] = have_r ? best(&rj) * 1e6 / (double)m : 0;
            }
            char shape[32], xs[2][2][16];
            snprintf(shape, sizeof shape, "%lldx%lld", (long long)n, (long long)k);
            for (int mi = 0; mi < 2; mi++)
                for (int col = 0; col < 2; col++)
                    if (col ? have_r : have_x) snprintf(xs[mi][col], sizeof xs[mi][col], "%.1f", us[mi][2 + col]);
                    else snprintf(xs[mi][col], sizeof xs[mi][col], "-");
            printf("%-6s %-11s %9.1f %9.1f %9s %9s   %9.1f %9.1f %9s %9s  %s\n", llmk_type_name(t), shape, us[0][0],
                   us[0][1], xs[0][0], xs[0][1], us[1][0], us[1][1], xs[1][0], xs[1][1], q8name);
            fflush(stdout);
            if (have_x) llmk_q4_1_x2_free(&xw);
            llmk_r8_free(&rw);
            free(w), free(x), free(y), free(a16), free(a8), free(ax), free(ar), free(scratch);
        }
    }
    return 0;
}
