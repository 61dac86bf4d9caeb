/* The KV byte count, in one place: every memory formula in the six modules
 * calls this rather than restating the product. */
#include "formulas.h"

double llmk_kv_bytes(double batch, double tokens, double n_heads, double head_dim,
                     double dtype_bytes) {
    /* K and V: two tensors of batch x tokens x n_heads x head_dim elements. */
    return 2.0 * batch * tokens * n_heads * head_dim * dtype_bytes;
}
