/* Fast dot kernels for neon (built with its ISA flags; registered at start-up
 * only when the CPU has the features). */
#include "codec/blocks.h"
#include "codec/codec.h"
#include "codec/half.h"
#include "internal.h"

void llmk_codec_register_neon(llmk_dot_fn *tab, const char **names) {
    LLMK_UNUSED(tab);
    LLMK_UNUSED(names);
}
