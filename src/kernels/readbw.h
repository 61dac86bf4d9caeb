/* A memory-read probe: the XOR of every 64-bit word of a buffer, read with
 * the widest loads this CPU has (AVX2: four 256-bit streams), so the probe is
 * bounded by memory, not by a scalar add chain. llmk_memory_read_bandwidth
 * (src/membw.c) runs it on a pool, for `llmk bench` and bench_kernels to
 * print the machine's read bandwidth next to the kernels' effective one. */
#ifndef LLMK_KERNELS_READBW_H
#define LLMK_KERNELS_READBW_H

#include <stddef.h>
#include <stdint.h>

/* XOR of the words of p[0, bytes): bytes a multiple of 8, p 8-byte aligned. */
uint64_t llmk_read_xor(const void *p, size_t bytes);
uint64_t llmk_read_xor_ref(const void *p, size_t bytes);
uint64_t llmk_read_xor_avx2(const void *p, size_t bytes);

#endif
