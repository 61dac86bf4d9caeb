/* The CPU executor (src/exec_cpu.c): its determinism promises, bitwise, on a
 * tiny generated model with mixed codecs (so every activation form and both
 * attention-quantization routes run) and, when present, the default model:
 *   - 1 thread vs 2 and 3 threads (prefill work is claimed at run time);
 *   - prefill in one chunk vs token by token (promised by the executor: the
 *     matmul dot kernels and attention key chunks do not depend on M);
 *   - a sequence decoded alone vs inside a batch of 4 with other prompts;
 *   - fused vs phase-at-a-time; repeated runs;
 * for f32, f16 and q8_0 KV caches (q8_0 on a head_dim 32 variant: it needs
 * whole 32-value blocks per head), plus closeness to the f32 session path,
 * of the f16/q8_0 caches to the f32 cache, and the refusals; and a NaN or
 * infinity in any weight fails every path with LLMK_NAN_INPUT (nonfinite).
 * Final hidden states (llmk_session_eval_hidden) on every path: times the
 * LM head they give the path's logits, the fast path's are deterministic
 * as its logits are, and close to the f64 reference's (hidden_states). */
#include "check.h"
#include "exec_cpu.h"
#include "internal.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { T_LAYERS = 2, T_EMBD = 64, T_FF = 128, T_HEAD = 4, T_HEAD_KV = 2, T_HD = 16, T_VOCAB = 256 };

/* The executor's check modes are configuration (llmk_configure), not
 * environment: f32_act ("all": f32 activations everywhere) and the
 * activations: ACT_Q8 (act_q8), ACT_A8 (act_a8) or else A16. */
enum { ACT_A16, ACT_Q8, ACT_A8 };
static void set_config(const char *f32_act, int act) {
    llmk_config c;
    llmk_config_get(&c);
    c.f32_act = f32_act;
    c.act_q8 = act == ACT_Q8, c.act_a8 = act == ACT_A8;
    CHECK_STATUS(llmk_configure(&c), LLMK_OK);
}
static const char *act_name(const llmk_config *c) { return c->act_q8 ? "q8" : c->act_a8 ? "a8" : "a16"; }

static uint64_t rng = 1;
static float frand(void) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

struct arena {
    void *p[128];
    int n;
};
static void *hold(struct arena *a, void *p) {
    if (a->n < 128) a->p[a->n++] = p;
    return p;
}

/* Set by nonfinite(): tiny_model writes corrupt_h (f16 bits of a NaN or an
 * infinity) into tensor `corrupt`'s row 1 (row 0 of a vector): as the first
 * block's f16 scale, the first f16 element, or as an f32 first element. */
static const char *corrupt;
static uint16_t corrupt_h;

static void tensor(llmk_gguf_writer *w, struct arena *a, const char *name, uint32_t type, uint64_t ne0, uint64_t ne1) {
    uint64_t n = ne0 * ne1, ne[2] = {ne0, ne1}, rb = 0;
    float *f = hold(a, malloc(n * sizeof *f));
    int norm = strstr(name, "norm") != NULL;
    for (uint64_t i = 0; i < n; i++) f[i] = norm ? 1.0f + 0.2f * frand() : 0.3f * frand();
    llmk_row_bytes(type, ne0, &rb);
    void *data = f;
    if (type != LLMK_TYPE_F32) {
        data = hold(a, malloc(rb * ne1));
        for (uint64_t r = 0; r < ne1; r++) llmk_quantize_row(type, f + r * ne0, (char *)data + r * rb, (int64_t)ne0);
    }
    if (corrupt && strcmp(name, corrupt) == 0) {
        unsigned char *row = (unsigned char *)data + (ne1 > 1 ? rb : 0);
        float v = corrupt_h == 0x7c00 ? INFINITY : corrupt_h == 0xfc00 ? -INFINITY : NAN;
        if (type == LLMK_TYPE_F32) memcpy(row, &v, sizeof v);
        else memcpy(row, &corrupt_h, sizeof corrupt_h); /* Q4_0/Q4_1/Q8_0 blocks start with d */
    }
    llmk_gguf_writer_add_tensor(w, name, type, ne1 > 1 ? 2 : 1, ne, data, rb * ne1);
}

/* variant 0: llama; 1: qwen3 (per-head Q/K norms); 2: qwen2 (Q/K/V biases).
 * hd: head dimension (T_HD, or 32 for a q8_0 cache). */
static llmk_model *tiny_model(int variant, int hd) {
    int qk_norm = variant == 1, bias = variant == 2;
    const char *arch = variant == 1 ? "qwen3" : variant == 2 ? "qwen2" : "llama";
    char path[] = "/tmp/llmk_test_exec_XXXXXX", key[96], n[64];
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    close(fd);
    rng = 12345;
    llmk_gguf_writer *w;
    struct arena a = {0};
    if (llmk_gguf_writer_init(&w) != LLMK_OK) return NULL;
    llmk_gguf_writer_set_str(w, "general.architecture", arch);
#define KEY(s) (snprintf(key, sizeof key, "%s." s, arch), key)
    llmk_gguf_writer_set_u32(w, KEY("block_count"), T_LAYERS);
    llmk_gguf_writer_set_u32(w, KEY("embedding_length"), T_EMBD);
    llmk_gguf_writer_set_u32(w, KEY("feed_forward_length"), T_FF);
    llmk_gguf_writer_set_u32(w, KEY("attention.head_count"), T_HEAD);
    llmk_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), T_HEAD_KV);
    llmk_gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)hd);
    llmk_gguf_writer_set_u32(w, KEY("context_length"), 512);
    llmk_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    llmk_gguf_writer_set_f32(w, KEY("rope.freq_base"), 10000.0f);
#undef KEY
    tensor(w, &a, "token_embd.weight", LLMK_TYPE_Q8_0, T_EMBD, T_VOCAB);
    tensor(w, &a, "output_norm.weight", LLMK_TYPE_F32, T_EMBD, 1);
    for (int il = 0; il < T_LAYERS; il++) {
#define T(suffix, type, x, y) (snprintf(n, sizeof n, "blk.%d." suffix, il), tensor(w, &a, n, type, x, y))
        T("attn_norm.weight", LLMK_TYPE_F32, T_EMBD, 1);
        T("attn_q.weight", LLMK_TYPE_Q4_1, T_EMBD, T_HEAD * hd);
        T("attn_k.weight", LLMK_TYPE_Q8_0, T_EMBD, T_HEAD_KV * hd);
        T("attn_v.weight", LLMK_TYPE_F16, T_EMBD, T_HEAD_KV * hd);
        T("attn_output.weight", LLMK_TYPE_Q4_1, T_HEAD * hd, T_EMBD);
        if (bias) {
            T("attn_q.bias", LLMK_TYPE_F32, T_HEAD * hd, 1);
            T("attn_k.bias", LLMK_TYPE_F32, T_HEAD_KV * hd, 1);
            T("attn_v.bias", LLMK_TYPE_F32, T_HEAD_KV * hd, 1);
        }
        if (qk_norm) {
            T("attn_q_norm.weight", LLMK_TYPE_F32, hd, 1);
            T("attn_k_norm.weight", LLMK_TYPE_F32, hd, 1);
        }
        T("ffn_norm.weight", LLMK_TYPE_F32, T_EMBD, 1);
        T("ffn_gate.weight", LLMK_TYPE_Q4_1, T_EMBD, T_FF);
        T("ffn_up.weight", LLMK_TYPE_Q4_0, T_EMBD, T_FF);
        T("ffn_down.weight", LLMK_TYPE_Q4_1, T_FF, T_EMBD);
#undef T
    }
    int st = llmk_gguf_writer_write(w, path);
    llmk_gguf_writer_free(w);
    for (int i = 0; i < a.n; i++) free(a.p[i]);
    llmk_model *m = NULL;
    if (st == LLMK_OK) st = llmk_model_load(path, &m);
    unlink(path);
    if (st != LLMK_OK) fprintf(stderr, "tiny model: %s\n", llmk_last_error());
    return m;
}

static struct llmk_exec *mk(const llmk_model *m, int threads, int n_batch, int n_seq, uint32_t kv) {
    struct llmk_exec_params p = {.n_ctx = 512, .n_threads = threads, .n_batch = n_batch, .n_seq = n_seq, .kv_type = kv};
    struct llmk_exec *ex = NULL;
    int st = llmk_exec_init(m, &p, &ex);
    if (st != LLMK_OK) fprintf(stderr, "exec init: %s\n", llmk_last_error());
    return ex;
}

/* all-position logits of ids under a configuration; step > 0 feeds the
 * tokens in calls of `step`. */
static float *run(const llmk_model *m, int threads, int n_batch, uint32_t kv, bool phases, const int32_t *ids,
                  size_t n, size_t step) {
    size_t V = (size_t)llmk_model_hparams(m)->n_vocab;
    float *out = malloc(n * V * sizeof *out);
    struct llmk_exec *ex = mk(m, threads, n_batch, 1, kv);
    if (!ex || !out) {
        free(out);
        llmk_exec_free(ex);
        return NULL;
    }
    llmk_exec_set_phase_mode(ex, phases);
    for (size_t off = 0; off < n; off += step) {
        size_t c = n - off < step ? n - off : step;
        CHECK_STATUS(llmk_exec_eval(ex, 0, ids + off, c, out + off * V, (n - off) * V, true), LLMK_OK);
    }
    llmk_exec_free(ex);
    return out;
}

static int same(const float *a, const float *b, size_t n) { return a && b && memcmp(a, b, n * sizeof *a) == 0; }

static void tokens(int32_t *ids, size_t n, int32_t V, uint32_t seed) {
    for (size_t i = 0; i < n; i++) ids[i] = (int32_t)((i * 7919u + seed * 131u + 17u) % (uint32_t)V);
}

static void determinism(const llmk_model *m, size_t n, uint32_t kv, const char *what) {
    size_t V = (size_t)llmk_model_hparams(m)->n_vocab;
    int32_t *ids = malloc(n * sizeof *ids);
    tokens(ids, n, (int32_t)V, 1);
    float *base = run(m, 1, 512, kv, false, ids, n, n);
    float *two = run(m, 2, 512, kv, false, ids, n, n);
    float *again = run(m, 2, 512, kv, false, ids, n, n);
    float *tok = run(m, 2, 512, kv, false, ids, n, 1);
    /* 3 threads split KV groups' heads differently; oversubscribed here, so a
     * shorter run that still crosses the first key chunk */
    size_t n3 = n < 136 ? n : 136;
    float *tok3 = run(m, 3, 512, kv, false, ids, n3, 1);
    float *one3 = run(m, 3, 512, kv, false, ids, n3, n3); /* prefill work claimed by 3 */
    float *small = run(m, 2, 7, kv, false, ids, n, n);
    float *ph = run(m, 2, 512, kv, true, ids, n, n);
    fprintf(stderr, "  %s: n=%zu kv=%s\n", what, n, llmk_type_name(kv));
    CHECK(same(base, two, n * V));   /* 1 vs 2 threads */
    CHECK(same(two, again, n * V));  /* repeated run */
    CHECK(same(base, tok, n * V));   /* one chunk vs token by token */
    CHECK(same(base, tok3, n3 * V)); /* ... on 3 threads */
    CHECK(same(base, one3, n3 * V)); /* one chunk on 3 threads */
    CHECK(same(base, small, n * V)); /* chunks of 7 rows */
    CHECK(same(base, ph, n * V));    /* phase-at-a-time */
    free(base), free(two), free(again), free(tok), free(tok3), free(one3), free(small), free(ph), free(ids);
}

/* Four sequences with different prompts; each decoded alone and all four in
 * one batch step after step: every row's logits bitwise equal. */
static void batch(const llmk_model *m, int threads, size_t steps, uint32_t kv) {
    size_t V = (size_t)llmk_model_hparams(m)->n_vocab;
    enum { B = 4 };
    size_t plen[B] = {5, 140, 1, 33};
    int32_t prompt[B][160], gen[B][64];
    float *alone = malloc(B * steps * V * sizeof *alone), *batched = malloc(B * V * sizeof *batched);
    for (int b = 0; b < B; b++) {
        tokens(prompt[b], plen[b], (int32_t)V, (uint32_t)(b + 3));
        for (size_t s = 0; s < steps; s++) gen[b][s] = (int32_t)((s * 31 + (size_t)b * 7 + 1) % V);
        struct llmk_exec *ex = mk(m, threads, 64, 1, kv);
        CHECK_STATUS(llmk_exec_eval(ex, 0, prompt[b], plen[b], NULL, 0, false), LLMK_OK);
        for (size_t s = 0; s < steps; s++)
            CHECK_STATUS(llmk_exec_eval(ex, 0, &gen[b][s], 1, alone + (b * steps + s) * V, V, false), LLMK_OK);
        llmk_exec_free(ex);
    }
    struct llmk_exec *ex = mk(m, threads, 64, B, kv);
    for (int b = 0; b < B; b++) CHECK_STATUS(llmk_exec_eval(ex, b, prompt[b], plen[b], NULL, 0, false), LLMK_OK);
    int ok = 1;
    for (size_t s = 0; s < steps; s++) {
        int32_t seqs[B], ids[B], am[B];
        for (int b = 0; b < B; b++) { /* rotate the row order every step */
            int sq = (int)((b + s) % B);
            seqs[b] = sq, ids[b] = gen[sq][s];
        }
        CHECK_STATUS(llmk_exec_decode_batch(ex, seqs, ids, B, batched, B * V, am), LLMK_OK);
        for (int b = 0; b < B; b++) {
            const float *want = alone + ((size_t)seqs[b] * steps + s) * V;
            if (memcmp(batched + b * V, want, V * sizeof(float)) != 0) ok = 0;
            int32_t best = 0;
            for (size_t i = 1; i < V; i++)
                if (want[i] > want[best]) best = (int32_t)i;
            if (am[b] != best) ok = 0;
        }
    }
    CHECK(ok);
    for (int b = 0; b < B; b++) CHECK_EQ_INT(llmk_exec_pos(ex, b), (int32_t)(plen[b] + steps));
    llmk_exec_free(ex);
    free(alone), free(batched);
}

/* Fast path vs the f32 session path: close (quantized activations), argmax
 * mostly equal. A wrong phase (e.g. RoPE or residual missing) fails this. */
static void vs_f32(const llmk_model *m, size_t n, double max_rel) {
    size_t V = (size_t)llmk_model_hparams(m)->n_vocab;
    int32_t *ids = malloc(n * sizeof *ids);
    tokens(ids, n, (int32_t)V, 9);
    float *fast = run(m, 2, 512, LLMK_TYPE_F32, false, ids, n, n);
    float *f16 = run(m, 2, 512, LLMK_TYPE_F16, false, ids, n, n);
    float *ref = malloc(n * V * sizeof *ref);
    llmk_session_params sp = {.n_ctx = 512, .n_threads = 2, .path = LLMK_PATH_F32};
    llmk_session *s = NULL;
    CHECK_STATUS(llmk_session_init(m, &sp, &s), LLMK_OK);
    CHECK_STATUS(llmk_session_eval(s, ids, n, ref, n * V, true), LLMK_OK);
    llmk_session_free(s);
    /* the same program with f32 activations (LLMK_EXEC_F32ACT=1: dequantized
     * weight rows, the f32 path's dot) must match the f32 path to rounding:
     * this isolates the executor's logic from the 8-bit activations */
    llmk_config saved;
    llmk_config_get(&saved);
    set_config("all", ACT_A16);
    float *exact = run(m, 2, 512, LLMK_TYPE_F32, false, ids, n, n);
    CHECK_STATUS(llmk_configure(&saved), LLMK_OK);
    double en = 0, ed = 0;
    for (size_t i = 0; exact && i < n * V; i++) {
        double d = (double)exact[i] - ref[i];
        en += d * d, ed += (double)ref[i] * ref[i];
    }
    fprintf(stderr, "  fast with f32 activations vs f32 path: rel l2 %.3g\n", sqrt(en / ed));
    CHECK(exact && sqrt(en / ed) < 1e-5);
    free(exact);
    double num = 0, den = 0, num16 = 0;
    size_t agree = 0;
    for (size_t t = 0; t < n; t++) {
        size_t a = 0, b = 0;
        for (size_t i = 0; i < V; i++) {
            double d = (double)fast[t * V + i] - ref[t * V + i], d16 = (double)f16[t * V + i] - fast[t * V + i];
            num += d * d, den += (double)ref[t * V + i] * ref[t * V + i], num16 += d16 * d16;
            if (fast[t * V + i] > fast[t * V + a]) a = i;
            if (ref[t * V + i] > ref[t * V + b]) b = i;
        }
        agree += a == b;
    }
    double rel = sqrt(num / den), rel16 = sqrt(num16 / den);
    fprintf(stderr, "  fast vs f32: rel l2 %.3g, argmax agree %zu/%zu; f16 kv vs f32 kv rel l2 %.3g\n", rel, agree, n,
            rel16);
    CHECK(rel < max_rel);
    CHECK(agree * 10 >= n * 9);
    CHECK(rel16 < 0.05 && rel16 > 0); /* f16 rounding, amplified by re-quantized activations */
    free(ids), free(fast), free(f16), free(ref);
}

/* A compressed KV cache (f16, q8_0) against the f32 cache, both on the fast
 * path: mean KL(f32 kv || kv) over the positions, argmax agreement, rel l2. */
static void kv_vs_f32(const llmk_model *m, size_t n, uint32_t kv, double max_kl, double min_agree) {
    size_t V = (size_t)llmk_model_hparams(m)->n_vocab;
    int32_t *ids = malloc(n * sizeof *ids);
    tokens(ids, n, (int32_t)V, 11);
    float *a = run(m, 2, 512, LLMK_TYPE_F32, false, ids, n, n), *b = run(m, 2, 512, kv, false, ids, n, n);
    double kl = 0, num = 0, den = 0;
    size_t agree = 0;
    for (size_t t = 0; a && b && t < n; t++) {
        const float *x = a + t * V, *y = b + t * V;
        size_t ia = 0, ib = 0;
        double mx = x[0], my = y[0], zx = 0, zy = 0;
        for (size_t i = 0; i < V; i++) {
            if (x[i] > x[ia]) ia = i;
            if (y[i] > y[ib]) ib = i;
            if (x[i] > mx) mx = x[i];
            if (y[i] > my) my = y[i];
            num += ((double)x[i] - y[i]) * ((double)x[i] - y[i]), den += (double)x[i] * x[i];
        }
        for (size_t i = 0; i < V; i++) zx += exp(x[i] - mx), zy += exp(y[i] - my);
        for (size_t i = 0; i < V; i++) {
            double lp = x[i] - mx - log(zx), lq = y[i] - my - log(zy);
            kl += exp(lp) * (lp - lq);
        }
        agree += ia == ib;
    }
    kl /= (double)n;
    fprintf(stderr, "  %s kv vs f32 kv: n=%zu mean KL %.3g, argmax agree %zu/%zu, rel l2 %.3g\n", llmk_type_name(kv), n,
            kl, agree, n, sqrt(num / den));
    CHECK(a && b && kl <= max_kl && (double)agree >= min_agree * (double)n);
    CHECK(num > 0); /* the cache type really reached the executor */
    free(ids), free(a), free(b);
}

static void refusals(const llmk_model *m) {
    struct llmk_exec *ex = NULL;
    /* q8_0 needs head_dim % 32 == 0 (this model's is 16); q4_0 is no cache type */
    struct llmk_exec_params p = {.n_ctx = 8, .n_threads = 2, .n_seq = 2, .kv_type = LLMK_TYPE_Q8_0};
    CHECK_STATUS(llmk_exec_init(m, &p, &ex), LLMK_UNSUPPORTED);
    CHECK(ex == NULL && strstr(llmk_last_error(), "head_dim 16") != NULL);
    p.kv_type = LLMK_TYPE_Q4_0;
    CHECK_STATUS(llmk_exec_init(m, &p, &ex), LLMK_UNSUPPORTED);
    llmk_session_params sp = {.n_ctx = 8, .n_threads = 1, .path = LLMK_PATH_F32, .kv_type = LLMK_TYPE_Q8_0};
    llmk_session *s = NULL;
    CHECK_STATUS(llmk_session_init(m, &sp, &s), LLMK_UNSUPPORTED); /* the f32 path keeps f32 */
    CHECK(s == NULL);
    p.kv_type = 0;
    CHECK_STATUS(llmk_exec_init(m, &p, &ex), LLMK_OK);
    int32_t ids[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, bad = T_VOCAB, seqs[2] = {1, 1};
    float lg[T_VOCAB];
    CHECK_STATUS(llmk_exec_eval(ex, 0, &bad, 1, NULL, 0, false), LLMK_INVALID_TOKEN);
    CHECK_STATUS(llmk_exec_eval(ex, 0, ids, 9, NULL, 0, false), LLMK_CONTEXT_FULL);
    CHECK_STATUS(llmk_exec_eval(ex, 2, ids, 1, NULL, 0, false), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_exec_eval(ex, 0, ids, 2, lg, T_VOCAB, true), LLMK_BUFFER_TOO_SMALL);
    CHECK_EQ_INT(llmk_exec_pos(ex, 0), 0);
    CHECK_STATUS(llmk_exec_decode_batch(ex, seqs, ids, 2, NULL, 0, NULL), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_exec_eval(ex, 0, ids, 8, lg, T_VOCAB, false), LLMK_OK);
    seqs[0] = 0;
    CHECK_STATUS(llmk_exec_decode_batch(ex, seqs, ids, 2, NULL, 0, NULL), LLMK_CONTEXT_FULL);
    CHECK_STATUS(llmk_exec_truncate(ex, 0, 9), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_exec_truncate(ex, 0, 3), LLMK_OK);
    CHECK_EQ_INT(llmk_exec_pos(ex, 0), 3);
    llmk_exec_free(ex);
}

/* Nothing is allocated per token: the heap in use is the same before and
 * after a prefill and decode steps (glibc's mallinfo2 counts every malloc). */
static void no_alloc(const llmk_model *m) {
    struct llmk_exec *ex = mk(m, 2, 64, 2, LLMK_TYPE_F32);
    float *lg = malloc(2 * T_VOCAB * sizeof *lg);
    int32_t ids[40], seqs[2] = {0, 1}, am[2];
    tokens(ids, 40, T_VOCAB, 5);
    CHECK_STATUS(llmk_exec_eval(ex, 0, ids, 1, lg, T_VOCAB, false), LLMK_OK); /* first call: lazy init anywhere */
    CHECK_STATUS(llmk_exec_eval(ex, 1, ids, 1, lg, T_VOCAB, false), LLMK_OK);
    CHECK_STATUS(llmk_exec_decode_batch(ex, seqs, ids, 2, lg, 2 * T_VOCAB, am), LLMK_OK);
    size_t before = mallinfo2().uordblks;
    CHECK_STATUS(llmk_exec_eval(ex, 0, ids, 40, lg, T_VOCAB, false), LLMK_OK);
    for (int s = 0; s < 10; s++) {
        CHECK_STATUS(llmk_exec_eval(ex, 1, ids + s, 1, lg, T_VOCAB, false), LLMK_OK);
        CHECK_STATUS(llmk_exec_decode_batch(ex, seqs, ids + s, 2, lg, 2 * T_VOCAB, am), LLMK_OK);
    }
    llmk_exec_set_phase_mode(ex, true);
    CHECK_STATUS(llmk_exec_eval(ex, 1, ids, 3, lg, T_VOCAB, false), LLMK_OK);
    CHECK_EQ_INT(mallinfo2().uordblks, before);
    free(lg);
    llmk_exec_free(ex);
}

/* One eval of ids (n tokens) on a fresh executor: its status, the error
 * text into msg, and the position it leaves. */
static int nf_eval(const llmk_model *m, int threads, bool phases, const int32_t *ids, size_t n, char *msg,
                   size_t cap, int32_t *pos) {
    struct llmk_exec *ex = mk(m, threads, 64, 1, LLMK_TYPE_F16);
    float lg[T_VOCAB];
    if (!ex) return -1;
    llmk_exec_set_phase_mode(ex, phases);
    int st = llmk_exec_eval(ex, 0, ids, n, lg, T_VOCAB, false);
    snprintf(msg, cap, "%s", llmk_last_error());
    *pos = llmk_exec_pos(ex, 0);
    llmk_exec_free(ex);
    return st;
}

/* A NaN or infinity in one weight of a tiny model (f16 bits h written by
 * tensor()): every configuration of the fast path fails with LLMK_NAN_INPUT
 * naming the phase `where` (and the same place for 1, 2 or 3 threads, a
 * prefill that claims its work or one of a few rows, phase-at-a-time),
 * leaves the position, fails a batched step without advancing it, and the
 * f32 and ref session paths fail with the same status. The tiny model's
 * weights cover every route: Q4_1 (a16 / r8, or q8_1x on LLMK_ACT=q8), Q8_0
 * (a16), Q4_0 (codec Q8_0 activations), F16 (f32 activations) and f32 norms. */
static void nonfinite(const char *name, uint16_t h, const char *where, bool act_q8, int at) {
    corrupt = name, corrupt_h = h;
    if (act_q8) set_config(NULL, ACT_Q8);
    llmk_model *m = tiny_model(0, T_HD);
    corrupt = NULL;
    CHECK(m != NULL);
    if (!m) return;
    int32_t ids[20], seqs[2] = {0, 1}, am[2];
    tokens(ids, 20, T_VOCAB, 2);
    for (int i = 0; i < 20; i++) ids[i] = ids[i] == 1 ? 2 : ids[i]; /* token 1: see nonfinite_cases */
    if (at >= 0) ids[at] = 1;
    char first[512], msg[512];
    int32_t pos = -1;
    CHECK_STATUS(nf_eval(m, 1, false, ids, 20, first, sizeof first, &pos), LLMK_NAN_INPUT);
    CHECK_EQ_INT(pos, 0);
    fprintf(stderr, "  %s = %04x%s: %s\n", name, h, act_q8 ? " (q8)" : "", first);
    CHECK(strstr(first, where) != NULL);
    static const struct { int threads; bool phases; size_t n; } cfg[] = {{2, false, 20}, {3, false, 20}, {2, true, 20},
                                                                        {1, false, 3}, {2, false, 1}, {3, false, 2}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        CHECK_STATUS(nf_eval(m, cfg[c].threads, cfg[c].phases, ids, cfg[c].n, msg, sizeof msg, &pos), LLMK_NAN_INPUT);
        CHECK_EQ_INT(pos, 0);
        /* the final phases run on the last row only: fewer rows, another position */
        CHECK(cfg[c].n == 20 ? strcmp(msg, first) == 0 : at >= 0 || strstr(msg, where) != NULL);
    }
    struct llmk_exec *ex = mk(m, 2, 64, 2, LLMK_TYPE_F32);
    float *lg = malloc(2 * T_VOCAB * sizeof *lg);
    CHECK_STATUS(llmk_exec_decode_batch(ex, seqs, ids, 2, lg, 2 * T_VOCAB, am), LLMK_NAN_INPUT);
    CHECK(llmk_exec_pos(ex, 0) == 0 && llmk_exec_pos(ex, 1) == 0);
    llmk_exec_free(ex);
    for (int path = LLMK_PATH_REF; path <= LLMK_PATH_F32; path++) {
        llmk_session_params sp = {.n_ctx = 64, .n_threads = 2, .path = path};
        llmk_session *s = NULL;
        CHECK_STATUS(llmk_session_init(m, &sp, &s), LLMK_OK);
        CHECK_STATUS(llmk_session_eval(s, ids, 4, lg, T_VOCAB, false), LLMK_NAN_INPUT);
        CHECK_EQ_INT(llmk_session_pos(s), 0);
        llmk_session_free(s);
    }
    /* Hidden states meet the same NaN, output_norm's included, on every
     * path; only a corrupt LM head row (token_embd, tied, when its token is
     * not in the prompt) leaves them finite: no LM head runs. */
    bool head_only = !strcmp(name, "token_embd.weight") && at < 0;
    float *hid = malloc(20 * T_EMBD * sizeof *hid);
    for (int path = LLMK_PATH_REF; path <= LLMK_PATH_FAST; path++) {
        llmk_session_params sp = {.n_ctx = 64, .n_threads = 2, .path = path};
        llmk_session *s = NULL;
        CHECK_STATUS(llmk_session_init(m, &sp, &s), LLMK_OK);
        CHECK_STATUS(llmk_session_eval_hidden(s, ids, 20, hid, 20 * T_EMBD, true), head_only ? LLMK_OK : LLMK_NAN_INPUT);
        if (path == LLMK_PATH_FAST && !head_only) CHECK(strstr(llmk_last_error(), where) != NULL);
        CHECK_EQ_INT(llmk_session_pos(s), head_only ? 20 : 0);
        llmk_session_free(s);
    }
    free(hid);
    free(lg);
    llmk_model_free(m);
    set_config(NULL, ACT_A16);
}

/* token_embd is also the LM head (tied): its row 1 corrupt is logit 1, or,
 * when token 1 is in the prompt (at 5), that row's embedding, found by the
 * first norm at its position (calls of fewer rows do not reach it). */
static void nonfinite_cases(void) {
    nonfinite("blk.0.attn_norm.weight", 0x7e00, "(blk.0.attn_norm)", false, -1);
    nonfinite("blk.0.attn_q.weight", 0x7c00, "(blk.0.rope_kv)", false, -1);
    nonfinite("blk.1.attn_k.weight", 0x7e00, "(blk.1.rope_kv)", false, -1);
    nonfinite("blk.0.attn_v.weight", 0xfc00, "(blk.0.rope_kv)", false, -1);
    nonfinite("blk.0.attn_output.weight", 0x7e00, "(blk.0.ffn_norm)", false, -1);
    nonfinite("blk.1.ffn_gate.weight", 0x7c00, "(blk.1.gate_up)", false, -1);
    nonfinite("blk.0.ffn_up.weight", 0x7e00, "(blk.0.gate_up)", false, -1);
    nonfinite("blk.1.ffn_down.weight", 0x7e00, "(output_norm)", false, -1);
    nonfinite("token_embd.weight", 0x7e00, "logit of token 1 ", false, -1);
    nonfinite("token_embd.weight", 0x7c00, "(blk.0.attn_norm), sequence 0, position 5:", false, 5);
    nonfinite("blk.1.ffn_gate.weight", 0x7e00, "(blk.1.gate_up)", true, -1);
    nonfinite("blk.0.attn_output.weight", 0x7c00, "(blk.0.ffn_norm)", true, -1);
    nonfinite("blk.0.ffn_up.weight", 0x7c00, "(blk.0.gate_up)", true, -1);
}

/* ---- final hidden states (llmk_session_eval_hidden) ---------------------- */

/* All n rows of n_embd hidden states of ids on a new session of `path`,
 * fed in calls of `step` tokens. */
static float *hidden_run(const llmk_model *m, int path, int threads, const int32_t *ids, size_t n, size_t step) {
    size_t E = (size_t)llmk_model_hparams(m)->n_embd;
    float *out = malloc(n * E * sizeof *out);
    llmk_session_params sp = {.n_ctx = 512, .n_threads = threads, .path = path};
    llmk_session *s = NULL;
    CHECK_STATUS(llmk_session_init(m, &sp, &s), LLMK_OK);
    for (size_t off = 0; s && out && off < n; off += step) {
        size_t c = n - off < step ? n - off : step;
        CHECK_STATUS(llmk_session_eval_hidden(s, ids + off, c, out + off * E, (n - off) * E, true), LLMK_OK);
    }
    llmk_session_free(s);
    return out;
}

/* All n rows of logits of ids on a new session of `path`. */
static float *logits_run(const llmk_model *m, int path, const int32_t *ids, size_t n) {
    size_t V = (size_t)llmk_model_hparams(m)->n_vocab;
    float *out = malloc(n * V * sizeof *out);
    llmk_session_params sp = {.n_ctx = 512, .n_threads = 2, .path = path};
    llmk_session *s = NULL;
    CHECK_STATUS(llmk_session_init(m, &sp, &s), LLMK_OK);
    if (s && out) CHECK_STATUS(llmk_session_eval(s, ids, n, out, n * V, true), LLMK_OK);
    llmk_session_free(s);
    return out;
}

static double rel_l2(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; a && b && i < n; i++) num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), den += (double)b[i] * b[i];
    return a && b && den > 0 ? sqrt(num / den) : INFINITY;
}

/* ||hid W^T - logits|| / ||logits|| over n rows, W the LM head (output.weight,
 * or token_embd tied) dequantized here, products in f64: the check that a
 * hidden row is what the path's LM head multiplies, independent of the
 * executor's kernels. */
static double head_err(const llmk_model *m, const float *hid, const float *logits, size_t n) {
    const llmk_hparams *hp = llmk_model_hparams(m);
    size_t E = (size_t)hp->n_embd, V = (size_t)hp->n_vocab;
    const llmk_tensor_info *w = llmk_gguf_find_tensor(llmk_model_gguf(m), "output.weight");
    if (!w) w = llmk_gguf_find_tensor(llmk_model_gguf(m), "token_embd.weight");
    uint64_t rb = 0;
    float *row = malloc(E * sizeof *row);
    if (!w || !hid || !logits || !row || llmk_row_bytes(w->type, E, &rb) != LLMK_OK) {
        free(row);
        return INFINITY;
    }
    double num = 0, den = 0;
    for (size_t j = 0; j < V; j++) {
        llmk_dequantize_row(w->type, (const unsigned char *)w->data + j * rb, row, (int64_t)E);
        for (size_t t = 0; t < n; t++) {
            double d = 0;
            for (size_t i = 0; i < E; i++) d += (double)hid[t * E + i] * row[i];
            num += (d - logits[t * V + j]) * (d - logits[t * V + j]), den += (double)logits[t * V + j] * logits[t * V + j];
        }
    }
    free(row);
    return sqrt(num / den);
}

/* The fast path's hidden states: bitwise alike for 1, 2 and 3 threads, one
 * chunk or token by token, the last row alone, after logits calls on the
 * same session, and in phase-at-a-time mode. */
static void hidden_determinism(const llmk_model *m, const int32_t *ids, size_t n, const float *base) {
    size_t E = (size_t)llmk_model_hparams(m)->n_embd, V = (size_t)llmk_model_hparams(m)->n_vocab, k = n / 3;
    float *two = hidden_run(m, LLMK_PATH_FAST, 2, ids, n, n), *tok = hidden_run(m, LLMK_PATH_FAST, 3, ids, n, 1);
    CHECK(same(base, two, n * E));
    CHECK(same(base, tok, n * E));
    float *last = malloc(E * sizeof *last), *lg = malloc(V * sizeof *lg);
    llmk_session_params sp = {.n_ctx = 512, .n_threads = 2, .path = LLMK_PATH_FAST};
    llmk_session *s = NULL;
    CHECK_STATUS(llmk_session_init(m, &sp, &s), LLMK_OK);
    CHECK_STATUS(llmk_session_eval_hidden(s, ids, n, last, E, false), LLMK_OK);
    CHECK(same(last, base + (n - 1) * E, E));
    CHECK_STATUS(llmk_session_truncate(s, 0), LLMK_OK);
    CHECK_STATUS(llmk_session_eval(s, ids, k, lg, V, false), LLMK_OK); /* logits, then hidden states */
    CHECK_STATUS(llmk_session_eval_hidden(s, ids + k, n - k, two, (n - k) * E, true), LLMK_OK);
    CHECK(same(two, base + k * E, (n - k) * E));
    CHECK_EQ_INT(llmk_session_pos(s), (int32_t)n);
    llmk_session_free(s);
    struct llmk_exec *ex = mk(m, 2, 512, 1, LLMK_TYPE_F32); /* phase-at-a-time: output_norm timed */
    llmk_exec_set_phase_mode(ex, true);
    CHECK_STATUS(llmk_exec_eval_hidden(ex, 0, ids, n, two, n * E, true), LLMK_OK);
    CHECK(same(base, two, n * E));
    CHECK(llmk_exec_phase_ns(ex)[llmk_exec_program(ex)->n_layer_phases] > 0);
    llmk_exec_free(ex);
    free(two), free(tok), free(last), free(lg);
}

/* Refusals of llmk_session_eval_hidden: no output buffer, a small one
 * (named), as llmk_session_eval's otherwise; the position does not move. */
static void hidden_refusals(const llmk_model *m) {
    size_t E = (size_t)llmk_model_hparams(m)->n_embd;
    int32_t ids[3] = {1, 2, 3}, bad = T_VOCAB;
    float *out = malloc(3 * E * sizeof *out);
    for (int path = LLMK_PATH_REF; path <= LLMK_PATH_FAST; path++) {
        llmk_session_params sp = {.n_ctx = 4, .n_threads = 2, .path = path};
        llmk_session *s = NULL;
        CHECK_STATUS(llmk_session_init(m, &sp, &s), LLMK_OK);
        CHECK_STATUS(llmk_session_eval_hidden(s, ids, 3, NULL, 0, true), LLMK_INVALID_ARGUMENT);
        CHECK_STATUS(llmk_session_eval_hidden(s, ids, 3, out, 3 * E - 1, true), LLMK_BUFFER_TOO_SMALL);
        CHECK(strstr(llmk_last_error(), "hidden-state buffer") != NULL);
        CHECK_STATUS(llmk_session_eval_hidden(s, ids, 0, out, 3 * E, true), LLMK_INVALID_ARGUMENT);
        CHECK_STATUS(llmk_session_eval_hidden(s, &bad, 1, out, E, true), LLMK_INVALID_TOKEN);
        CHECK_STATUS(llmk_session_eval_hidden(s, ids, 3, out, E, false), LLMK_OK); /* the last row fits E */
        CHECK_STATUS(llmk_session_eval_hidden(s, ids, 2, out, 2 * E, true), LLMK_CONTEXT_FULL);
        CHECK_EQ_INT(llmk_session_pos(s), 3);
        llmk_session_free(s);
    }
    CHECK_STATUS(llmk_session_eval_hidden(NULL, ids, 1, out, E, true), LLMK_INVALID_ARGUMENT);
    free(out);
}

/* Every path's hidden states times the LM head are that path's logits (the
 * fast path's with its LM head on f32 activations, so only the hidden
 * state's rounding is left); the f32 and fast paths are close to the f64
 * reference's. */
static void hidden_states(const llmk_model *m, size_t n) {
    size_t E = (size_t)llmk_model_hparams(m)->n_embd, V = (size_t)llmk_model_hparams(m)->n_vocab;
    int32_t *ids = malloc(n * sizeof *ids);
    tokens(ids, n, (int32_t)V, 13);
    float *ref = hidden_run(m, LLMK_PATH_REF, 2, ids, n, n), *f32 = hidden_run(m, LLMK_PATH_F32, 2, ids, n, 7);
    float *fast = hidden_run(m, LLMK_PATH_FAST, 1, ids, n, n);
    float *ref_lg = logits_run(m, LLMK_PATH_REF, ids, n), *f32_lg = logits_run(m, LLMK_PATH_F32, ids, n);
    llmk_config saved, c;
    llmk_config_get(&saved);
    c = saved, c.f32_act = "lm_head"; /* the activation path under test stays */
    CHECK_STATUS(llmk_configure(&c), LLMK_OK);
    float *fast_lg = logits_run(m, LLMK_PATH_FAST, ids, n);
    CHECK_STATUS(llmk_configure(&saved), LLMK_OK);
    double e_ref = head_err(m, ref, ref_lg, n), e_f32 = head_err(m, f32, f32_lg, n);
    double e_fast = head_err(m, fast, fast_lg, n);
    double f32_vs = rel_l2(f32, ref, n * E), fast_vs = rel_l2(fast, ref, n * E);
    fprintf(stderr, "  hidden x LM head vs logits: ref %.3g, f32 %.3g, fast %.3g; vs ref: f32 %.3g, fast %.3g (%s)\n",
            e_ref, e_f32, e_fast, f32_vs, fast_vs, act_name(&saved));
    /* f32 rounding of the hidden state and of the LM head's sums: measured
     * 4e-8 (ref), 8e-8 (f32, fast) */
    CHECK(e_ref < 1e-6 && e_f32 < 1e-5 && e_fast < 1e-5);
    /* measured: f32 4-6e-7; fast 8e-5..1e-4 on a16 activations, 0.025 on q8 */
    CHECK(f32_vs < 1e-5 && fast_vs < (saved.act_q8 || saved.act_a8 ? 0.05 : 1e-3) && fast_vs > 0);
    hidden_determinism(m, ids, n, fast);
    free(ids), free(ref), free(f32), free(fast), free(ref_lg), free(f32_lg), free(fast_lg);
}

int main(void) {
    /* every promise for each activation path: int16 (default), 8-bit
     * (LLMK_ACT=q8, with the repacked Q4_1 kernel) and A8 (LLMK_ACT=a8) */
    for (int qk = 0; qk < 5; qk++) {
        int act = qk < 3 ? ACT_A16 : qk == 3 ? ACT_Q8 : ACT_A8;
        static const char *const names[] = {"a16", "q8", "a8"};
        set_config(NULL, act);
        llmk_model *m = tiny_model(qk % 3, T_HD);
        CHECK(m != NULL);
        if (!m) continue;
        fprintf(stderr, "tiny %s model, %s activations\n", llmk_model_hparams(m)->arch, names[act]);
        determinism(m, 300, LLMK_TYPE_F32, "tiny"); /* crosses key chunks at 128, 256 */
        determinism(m, 150, LLMK_TYPE_F16, "tiny");
        batch(m, 2, 6, LLMK_TYPE_F32);
        batch(m, 1, 3, LLMK_TYPE_F32);
        hidden_states(m, 40);
        vs_f32(m, 200, 0.05);
        if (!qk) refusals(m), no_alloc(m), hidden_refusals(m);
        llmk_model_free(m);
        /* head_dim 32: the q8_0 cache (llama and qwen3, both activation paths) */
        if (qk == 2) continue;
        m = tiny_model(qk % 3, 32);
        CHECK(m != NULL);
        if (!m) continue;
        fprintf(stderr, "tiny %s model, head_dim 32, %s activations\n", llmk_model_hparams(m)->arch, names[act]);
        determinism(m, 300, LLMK_TYPE_Q8_0, "tiny hd32");
        batch(m, 2, 6, LLMK_TYPE_Q8_0);
        batch(m, 1, 3, LLMK_TYPE_Q8_0);
        /* random weights amplify the cache's rounding: measured KL 2e-4..1.2e-3, argmax 95-98.5% */
        kv_vs_f32(m, 200, LLMK_TYPE_Q8_0, 5e-3, 0.9);
        llmk_model_free(m);
    }
    set_config(NULL, ACT_A16);
    nonfinite_cases();
    llmk_model *m = NULL;
    const char *path = check_default_model("test_exec", 1);
    if (path && access(path, R_OK) == 0 && llmk_model_load(path, &m) == LLMK_OK) {
        fprintf(stderr, "default model\n");
        determinism(m, 20, LLMK_TYPE_F32, "smollm2");
        set_config(NULL, ACT_Q8);
        determinism(m, 12, LLMK_TYPE_F32, "smollm2 q8");
        set_config(NULL, ACT_A8);
        determinism(m, 12, LLMK_TYPE_F32, "smollm2 a8");
        batch(m, 2, 2, LLMK_TYPE_F32);
        set_config(NULL, ACT_A16);
        determinism(m, 20, LLMK_TYPE_Q8_0, "smollm2");
        batch(m, 2, 2, LLMK_TYPE_F32);
        batch(m, 2, 2, LLMK_TYPE_Q8_0);
        vs_f32(m, 16, 0.1);
        kv_vs_f32(m, 24, LLMK_TYPE_Q8_0, 1e-3, 0.95); /* measured KL 4e-4, 24/24 */
        llmk_model_free(m);
    } else {
        fprintf(stderr, "default model not found: its part is skipped\n");
    }
    return check_summary("exec");
}
