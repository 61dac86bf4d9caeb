/* The LLMK_* environment levers, read into the library's configuration
 * (llmk_config): the library itself reads no environment. Shared by the
 * llmk command (app/main.c) and the bench programs, which include it.
 *
 *   LLMK_CPU_MASK       none | avx2 | avx512 | neon | all   features kernels may use
 *   LLMK_KERNELS        ref                                  scalar _ref kernels only
 *   LLMK_KV_TYPE        f32 | f16 | q8_0                     KV type when none is chosen
 *   LLMK_ACT            a16 | q8 | a8                        fast-path activations
 *   LLMK_REPACK         0 | 1                                Q4_1 repack for the q8 route
 *   LLMK_RECORDS        auto | portable                      r8 record forms (compact where read)
 *   LLMK_PREFETCH_NEXT  0 | 1                                next matmul's rows into L2
 *   LLMK_PHASE_CLOCK    thread | wall                        phase timing clock
 *   LLMK_EXEC_F32ACT    0 | 1 | KIND,KIND...                 f32-activation check mode
 */
#ifndef LLMK_APP_ENV_CONFIG_H
#define LLMK_APP_ENV_CONFIG_H

#include "llmk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Index of v in the NULL-terminated names, or -1; unset or empty is `dflt`. */
static inline int env_config_pick(const char *var, const char *const *names, int dflt, char *err, size_t cap) {
    const char *v = getenv(var);
    if (!v || !*v) return dflt;
    for (int i = 0; names[i]; i++)
        if (strcmp(v, names[i]) == 0) return i;
    size_t o = (size_t)snprintf(err, cap, "%s=%s: expected", var, v);
    for (int i = 0; names[i] && o < cap; i++) o += (size_t)snprintf(err + o, cap - o, " %s", names[i]);
    return -1;
}

/* c from the environment over the defaults; 0 with a message in err when a
 * variable holds something it cannot mean. */
static inline int env_config_read(llmk_config *c, char *err, size_t cap) {
    static const char *const masks[] = {"all", "none", "avx2", "avx512", "neon", NULL};
    static const uint32_t mask_bits[] = {LLMK_CPU_ALL, 0, LLMK_CPU_AVX2,
                                         LLMK_CPU_AVX2 | LLMK_CPU_AVX512 | LLMK_CPU_AVX512_VNNI |
                                             LLMK_CPU_AVX512_BF16,
                                         LLMK_CPU_NEON | LLMK_CPU_NEON_DOTPROD};
    static const char *const kernels[] = {"auto", "ref", NULL}, *const kv[] = {"f32", "f16", "q8_0", NULL};
    static const uint32_t kv_types[] = {LLMK_TYPE_F32, LLMK_TYPE_F16, LLMK_TYPE_Q8_0};
    static const char *const act[] = {"a16", "q8", "a8", NULL}, *const onoff[] = {"0", "1", NULL};
    static const char *const clock[] = {"wall", "thread", NULL}, *const records[] = {"auto", "portable", NULL};
    llmk_config_default(c);
    int i;
    if ((i = env_config_pick("LLMK_CPU_MASK", masks, 0, err, cap)) < 0) return 0;
    c->cpu_mask = mask_bits[i];
    if ((i = env_config_pick("LLMK_KERNELS", kernels, 0, err, cap)) < 0) return 0;
    c->ref_kernels = i == 1;
    if ((i = env_config_pick("LLMK_KV_TYPE", kv, 0, err, cap)) < 0) return 0;
    c->kv_type = kv_types[i];
    if ((i = env_config_pick("LLMK_ACT", act, 0, err, cap)) < 0) return 0;
    c->act_q8 = i == 1, c->act_a8 = i == 2;
    if ((i = env_config_pick("LLMK_REPACK", onoff, 1, err, cap)) < 0) return 0;
    c->repack = i == 1;
    if ((i = env_config_pick("LLMK_RECORDS", records, 0, err, cap)) < 0) return 0;
    c->portable_records = i == 1;
    if ((i = env_config_pick("LLMK_PREFETCH_NEXT", onoff, 1, err, cap)) < 0) return 0;
    c->prefetch_next = i == 1;
    if ((i = env_config_pick("LLMK_PHASE_CLOCK", clock, 0, err, cap)) < 0) return 0;
    c->phase_clock_thread = i == 1;
    const char *f = getenv("LLMK_EXEC_F32ACT"); /* 1: every matmul; a list: those phase kinds */
    c->f32_act = !f || !*f || strcmp(f, "0") == 0 ? NULL : strcmp(f, "1") == 0 ? "all" : f;
    return 1;
}

/* Read and apply; prints the problem as "PROG: ..." and returns 0 on failure. */
static inline int env_config_apply(const char *prog) {
    llmk_config c;
    char err[256] = "";
    if (!env_config_read(&c, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 0;
    }
    if (llmk_configure(&c) != LLMK_OK) {
        fprintf(stderr, "%s: %s\n", prog, llmk_last_error());
        return 0;
    }
    return 1;
}

#endif
