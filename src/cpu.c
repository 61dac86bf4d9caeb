/* CPU feature detection for kernel dispatch: CPUID plus the OS's XSAVE state
 * (a CPU may have AVX-512 that the kernel does not enable). Detected once. */
#include "kernels/kernels.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static unsigned detect_raw(void) {
    unsigned a, b, c, d, f = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return 0;
    uint64_t xcr0 = xgetbv0();
    if ((xcr0 & 6) != 6) return 0; /* SSE and AVX state enabled by the OS */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    int avx2 = (b >> 5) & 1;
    if (avx2 && fma && f16c) f |= LLMK_CPU_AVX2;
    int f512 = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
    int vnni = (c >> 11) & 1;
    if ((f & LLMK_CPU_AVX2) && f512 && dq && bw && vl && (xcr0 & 0xe0) == 0xe0) {
        f |= LLMK_CPU_AVX512;
        if (vnni) f |= LLMK_CPU_AVX512_VNNI;
        unsigned a1, b1, c1, d1;
        if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) && ((a1 >> 5) & 1)) f |= LLMK_CPU_AVX512_BF16;
    }
    return f;
}
#elif defined(__aarch64__)
#include <sys/auxv.h>
static unsigned detect_raw(void) {
    unsigned f = LLMK_CPU_NEON; /* architectural on arm64 */
#ifdef HWCAP_ASIMDDP
    if (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) f |= LLMK_CPU_NEON_DOTPROD;
#endif
    return f;
}
#else
static unsigned detect_raw(void) { return 0; }
#endif

/* What dispatch may use: the detected features, masked by the configured
 * cpu_mask (scalar only, AVX2 only, ...: for measuring and testing). */
unsigned llmk_cpu_detect(void) { return detect_raw() & llmk_config_kernels()->cpu_mask; }
