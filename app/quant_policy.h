/* llmk quantize's per-tensor type choice for the presets: llama-quantize's
 * rules (llama.cpp's llama_tensor_get_type, as llama-cpp-python 0.3.36
 * vendors it) restated, so that a preset picks the same type for every
 * tensor of the same source file as llama-quantize does. */
#ifndef LLMK_QUANT_POLICY_H
#define LLMK_QUANT_POLICY_H

#include "cli.h"

#include <stdbool.h>
#include <stdint.h>

enum quant_mix { QMIX_NONE, QMIX_S, QMIX_M, QMIX_L };

struct quant_preset {
    const char *name;
    uint32_t type;  /* the base codec */
    enum quant_mix mix;
    uint32_t ftype; /* llama_ftype, written to general.file_type */
};

/* The file-wide facts the rules read, and their running counters. */
struct quant_policy {
    const struct quant_preset *p;
    int n_layer, n_gqa, n_expert;
    bool has_output;     /* output.weight exists (else token_embd is the output) */
    int n_attention_wv;  /* attn_v tensors in the file */
    int i_attention_wv;  /* attn_v tensors chosen so far, in file order */
    int i_ffn_down;
};

/* The preset named name (case-insensitive), or NULL. */
const struct quant_preset *quant_preset_find(const char *name);
/* Fill the facts from the source file. */
void quant_policy_init(struct quant_policy *q, const struct quant_preset *p, const llmk_gguf *g);
/* The type for tensor ti (of 2+ dims; called once per tensor, in file order). */
uint32_t quant_policy_choose(struct quant_policy *q, const llmk_tensor_info *ti);
/* A codec whose blocks tile a row of ne0 elements: t or its fallbacks. */
uint32_t quant_fit_rows(uint32_t t, uint64_t ne0);

#endif
