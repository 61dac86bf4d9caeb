/* The process-wide configuration that replaces the environment levers: the
 * library reads no environment variable; the application sets this. */
#include "internal.h"

#include <stdatomic.h>
#include <string.h>

static llmk_config cfg = {.cpu_mask = LLMK_CPU_ALL, .kv_type = LLMK_TYPE_F32, .repack = true,
                          .prefetch_next = true};
/* Set once a kernel was chosen with cfg's cpu_mask and ref_kernels: kernel
 * choices are cached, so changing those two afterwards would not apply. */
static atomic_bool kernels_fixed;

void llmk_config_default(llmk_config *c) {
    if (!c) return;
    memset(c, 0, sizeof *c);
    c->cpu_mask = LLMK_CPU_ALL;
    c->kv_type = LLMK_TYPE_F32;
    c->repack = true;
    c->prefetch_next = true;
}

int llmk_configure(const llmk_config *c) {
    llmk_error_clear();
    if (!c) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_configure: NULL");
    if (c->kv_type != LLMK_TYPE_F32 && c->kv_type != LLMK_TYPE_F16 && c->kv_type != LLMK_TYPE_Q8_0)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "config: kv_type %u is not f32, f16 or q8_0", c->kv_type);
    if (c->act_q8 && c->act_a8) return llmk_fail(LLMK_INVALID_ARGUMENT, "config: act_q8 and act_a8 are exclusive");
    if (atomic_load(&kernels_fixed) && (c->cpu_mask != cfg.cpu_mask || c->ref_kernels != cfg.ref_kernels))
        return llmk_fail(LLMK_INVALID_ARGUMENT, "config: cpu_mask and ref_kernels are fixed once kernels "
                         "were chosen; set them before the first model, session or kernel call");
    cfg = *c;
    return LLMK_OK;
}

void llmk_config_get(llmk_config *out) {
    if (out) *out = cfg;
}

const llmk_config *llmk_cfg(void) { return &cfg; }

const llmk_config *llmk_config_kernels(void) {
    atomic_store(&kernels_fixed, true);
    return &cfg;
}
