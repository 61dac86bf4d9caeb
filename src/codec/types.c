/* Facts about GGUF tensor type ids: name, block size in elements and bytes.
 * Sizes are the format's (ggml_type); types llmk has no codec for are still
 * listed so a file holding them opens and the refusal names the type. */
#include "internal.h"

#include <string.h>
#include <strings.h>

static const struct type_fact {
    const char *name;
    uint32_t block_elems, block_bytes;
} type_facts[LLMK_TYPE_COUNT_] = {
    [LLMK_TYPE_F32] = {"f32", 1, 4},
    [LLMK_TYPE_F16] = {"f16", 1, 2},
    [LLMK_TYPE_Q4_0] = {"q4_0", 32, 18},
    [LLMK_TYPE_Q4_1] = {"q4_1", 32, 20},
    [LLMK_TYPE_Q5_0] = {"q5_0", 32, 22},
    [LLMK_TYPE_Q5_1] = {"q5_1", 32, 24},
    [LLMK_TYPE_Q8_0] = {"q8_0", 32, 34},
    [LLMK_TYPE_Q8_1] = {"q8_1", 32, 36},
    [LLMK_TYPE_Q2_K] = {"q2_k", 256, 84},
    [LLMK_TYPE_Q3_K] = {"q3_k", 256, 110},
    [LLMK_TYPE_Q4_K] = {"q4_k", 256, 144},
    [LLMK_TYPE_Q5_K] = {"q5_k", 256, 176},
    [LLMK_TYPE_Q6_K] = {"q6_k", 256, 210},
    [LLMK_TYPE_Q8_K] = {"q8_k", 256, 292},
    [16] = {"iq2_xxs", 256, 66},
    [17] = {"iq2_xs", 256, 74},
    [18] = {"iq3_xxs", 256, 98},
    [19] = {"iq1_s", 256, 50},
    [LLMK_TYPE_IQ4_NL] = {"iq4_nl", 32, 18},
    [21] = {"iq3_s", 256, 110},
    [22] = {"iq2_s", 256, 82},
    [LLMK_TYPE_IQ4_XS] = {"iq4_xs", 256, 136},
    [LLMK_TYPE_I8] = {"i8", 1, 1},
    [LLMK_TYPE_I16] = {"i16", 1, 2},
    [LLMK_TYPE_I32] = {"i32", 1, 4},
    [LLMK_TYPE_I64] = {"i64", 1, 8},
    [LLMK_TYPE_F64] = {"f64", 1, 8},
    [29] = {"iq1_m", 256, 56},
    [LLMK_TYPE_BF16] = {"bf16", 1, 2},
    [34] = {"tq1_0", 256, 54},
    [35] = {"tq2_0", 256, 66},
    [LLMK_TYPE_MXFP4] = {"mxfp4", 32, 17},
    [LLMK_TYPE_NVFP4] = {"nvfp4", 64, 36},
};

static const struct type_fact *fact(uint32_t type) {
    if (type >= LLMK_TYPE_COUNT_ || !type_facts[type].name) return NULL;
    return &type_facts[type];
}

const char *llmk_type_name(uint32_t type) {
    const struct type_fact *f = fact(type);
    return f ? f->name : NULL;
}

uint32_t llmk_type_block_elems(uint32_t type) {
    const struct type_fact *f = fact(type);
    return f ? f->block_elems : 0;
}

uint32_t llmk_type_block_bytes(uint32_t type) {
    const struct type_fact *f = fact(type);
    return f ? f->block_bytes : 0;
}

int llmk_type_from_name(const char *name, uint32_t *type_out) {
    llmk_error_clear();
    if (!name || !type_out) return llmk_fail(LLMK_INVALID_ARGUMENT, "type name: NULL argument");
    for (uint32_t t = 0; t < LLMK_TYPE_COUNT_; t++) {
        if (type_facts[t].name && strcasecmp(type_facts[t].name, name) == 0) {
            *type_out = t;
            return LLMK_OK;
        }
    }
    return llmk_fail(LLMK_UNKNOWN_TYPE, "unknown tensor type name '%s'", name);
}

int llmk_row_bytes(uint32_t type, uint64_t n, uint64_t *bytes_out) {
    llmk_error_clear();
    const struct type_fact *f = fact(type);
    if (!f) return llmk_fail(LLMK_UNKNOWN_TYPE, "unknown tensor type id %u", type);
    if (n % f->block_elems != 0)
        return llmk_fail(LLMK_BAD_TENSOR_INFO,
                         "%llu elements of type %s are not whole blocks of %u",
                         (unsigned long long)n, f->name, f->block_elems);
    if (!llmk_mul_u64(n / f->block_elems, f->block_bytes, bytes_out))
        return llmk_fail(LLMK_DIMENSION_OVERFLOW, "%llu elements of type %s overflow a byte count",
                         (unsigned long long)n, f->name);
    return LLMK_OK;
}
