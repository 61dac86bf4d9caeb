/* gemma3's hyperparameters as loaded, and its paths' determinism.
 *
 * Model (tests/fixtures/model/tiny/tiny_gemma3*.gguf, run from the repo
 * root; 6 layers, sliding window 8, gemma3's default pattern): the sliding
 * layers (0-4) and the global one (5), their RoPE tables, the query and
 * embedding scales; then model_paths.h's checks over 140 tokens, so the
 * windows cross the attention's 128-position key chunks: logits bitwise
 * identical for thread counts, chunkings, phase mode and batch composition.
 * Accuracy against transformers is tests/py/test_gemma3.py's. */
#include "check.h"
#include "exec_cpu.h"
#include "internal.h"
#include "model.h"
#include "model_paths.h"

static void hparams(const llmk_model *m) {
    const llmk_hparams *hp = llmk_model_hparams(m);
    CHECK_EQ_INT(hp->n_layer, 6);
    CHECK_EQ_INT(hp->n_swa, 8);
    CHECK_EQ_INT(hp->swa_pattern, 6);
    for (int il = 0; il < hp->n_layer; il++) CHECK_EQ_INT(m->layers[il].swa, il != 5);
    CHECK(hp->ffn_gelu && hp->has_post_norms && hp->has_qk_norm && hp->tied_output);
    CHECK(fabs(hp->attn_scale - 1.0 / sqrt(hp->head_dim)) < 1e-15);
    CHECK(fabs(hp->embd_scale - sqrt(hp->n_embd)) < 1e-12);
    CHECK(hp->logit_softcap == 0);
    /* global layers: base 1e6 with linear scaling 8; sliding ones: base 10000, unscaled */
    CHECK_EQ_INT(hp->rope_scaling, LLMK_ROPE_SCALING_LINEAR);
    int half = hp->n_rot / 2;
    for (int i = 0; i < half; i++) {
        double g = pow(1e6, -2.0 * i / hp->n_rot) / 8.0, l = pow(1e4, -2.0 * i / hp->n_rot);
        CHECK(fabs(m->rope_inv_freq[i] - g) <= 1e-15 * g);
        CHECK(fabs(m->rope_inv_freq_swa[i] - l) <= 1e-15 * l);
        CHECK(llmk_layer_rope(m, 0) == m->rope_inv_freq_swa && llmk_layer_rope(m, 5) == m->rope_inv_freq);
    }
    CHECK_EQ_INT(llmk_layer_key_lo(m, 0, 7), 0);
    CHECK_EQ_INT(llmk_layer_key_lo(m, 0, 8), 1);
    CHECK_EQ_INT(llmk_layer_key_lo(m, 0, 130), 123);
    CHECK_EQ_INT(llmk_layer_key_lo(m, 5, 130), 0);
}

static void one_model(const char *path) {
    llmk_model *m = NULL;
    CHECK_STATUS(llmk_model_load(path, &m), LLMK_OK);
    if (!m) return;
    fprintf(stderr, "  %s\n", path);
    hparams(m);
    fast_determinism(m, 140);
    fast_batch(m);
    f32_determinism(m);
    llmk_model_free(m);
}

int main(void) {
    one_model("tests/fixtures/model/tiny/tiny_gemma3.gguf");
    one_model("tests/fixtures/model/tiny/tiny_gemma3_q8_0.gguf");
    return check_summary("test_gemma3");
}
