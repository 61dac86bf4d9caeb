/* Helpers shared by the formula modules (src/formulas/). Not installed. */
#ifndef LLMK_SRC_FORMULAS_H
#define LLMK_SRC_FORMULAS_H

#include "llmk.h"
#include "llmk_formulas.h"

#include <math.h>
#include <stdint.h>

/* The seed's integer ceiling idiom ends in Int64(q): truncate q toward zero
 * as a 64-bit integer. Outside the int64 range a double is already a whole
 * number (and the cast would be undefined), so it is returned as it is;
 * NaN stays NaN. */
static inline double llmk_trunc_i64(double q) {
    if (q > -9223372036854775808.0 && q < 9223372036854775808.0) return (double)(int64_t)q;
    return q;
}

#endif
