/* Model loading and the two decode paths: hyperparameters against the file's
 * metadata, ref (f64) vs f32 logits, bitwise determinism across threads,
 * chunking and repeated runs, session refusals, and load refusals on small
 * GGUF files written here (wrong shape, missing tensor, unknown architecture,
 * unsupported features). Tiny random-weight llama/qwen2/qwen3 models keep the
 * ref-path comparisons cheap; the default model gets one short sequence. */
#include "check.h"

#include "kernels/kernels.h"
#include "kernels/ops_f32.h"
#include "llmk.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------- */

static double rel_l2(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static float frand(void) { /* uniform in [-1, 1) */
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(rng_state >> 40) / (double)(1ULL << 24) * 2.0 - 1.0);
}

/* Evaluate ids on a fresh session; logits of every position into out. */
static int eval_all(const llmk_model *m, int path, int threads, const int32_t *ids, size_t n, float *out) {
    llmk_session_params p = {.n_ctx = 64, .n_threads = threads, .path = path};
    llmk_session *s = NULL;
    int st = llmk_session_init(m, &p, &s);
    if (st != LLMK_OK) return st;
    st = llmk_session_eval(s, ids, n, out, n * (size_t)llmk_model_hparams(m)->n_vocab, true);
    llmk_session_free(s);
    return st;
}

/* ---- tiny synthetic models ------------------------------------------------ */

enum { T_EMBD = 64, T_HEAD = 4, T_HEAD_KV = 2, T_HD = 16, T_FF = 96, T_VOCAB = 128, T_LAYERS = 2 };

struct tiny_opts {
    const char *arch;         /* "llama" by default */
    const char *skip;         /* tensor left out */
    const char *wrong_shape;  /* tensor written with one extra row */
    const char *extra;        /* an extra tensor of shape [T_EMBD] */
    const char *rope_scaling; /* <arch>.rope.scaling.type */
    bool rope_freqs;          /* write rope_freqs.weight (llama3 factors) */
    bool with_bias, with_qk_norm, separate_output;
};

/* Llama 3.1 factors for the tiny model's rope (factor 8, low 1, high 4,
 * original context 32) — computed independently of the loader. */
static void llama3_factors(float *ff, int half, double theta) {
    for (int i = 0; i < half; i++) {
        double freq = pow(theta, -2.0 * i / (2 * half));
        double wl = 2 * M_PI / freq, lo = 32.0 / 1.0, hi = 32.0 / 4.0;
        if (wl < hi) {
            ff[i] = 1.0f;
        } else if (wl > lo) {
            ff[i] = 8.0f;
        } else {
            double smooth = (32.0 / wl - 1.0) / (4.0 - 1.0);
            ff[i] = (float)(1.0 / ((1 - smooth) / 8.0 + smooth));
        }
    }
}

struct tbuf {
    void *p[64];
    int n;
};

static void *keep(struct tbuf *b, void *p) {
    if (b->n < 64) b->p[b->n++] = p;
    return p;
}

static void add_tensor(llmk_gguf_writer *w, struct tbuf *bufs, const struct tiny_opts *o, const char *name,
                       uint32_t type, uint64_t ne0, uint64_t ne1) {
    if (o->skip && !strcmp(o->skip, name)) return;
    if (o->wrong_shape && !strcmp(o->wrong_shape, name)) ne1 += 1;
    uint64_t n = ne0 * ne1, ne[2] = {ne0, ne1};
    float *f = keep(bufs, malloc(n * sizeof *f));
    /* Norm weights near 1, everything else small and random. */
    bool is_norm = strstr(name, "norm") != NULL;
    for (uint64_t i = 0; i < n; i++) f[i] = is_norm ? 1.0f + 0.2f * frand() : 0.25f * frand();
    uint64_t bytes = 0;
    llmk_row_bytes(type, ne0, &bytes);
    bytes *= ne1;
    void *data = f;
    if (type != LLMK_TYPE_F32) {
        data = keep(bufs, malloc(bytes));
        for (uint64_t r = 0; r < ne1; r++) {
            uint64_t rb = bytes / ne1;
            llmk_quantize_row(type, f + r * ne0, (char *)data + r * rb, (int64_t)ne0);
        }
    }
    llmk_gguf_writer_add_tensor(w, name, type, ne1 > 1 ? 2 : 1, ne, data, bytes);
}

static int write_tiny(const char *path, const struct tiny_opts *o) {
    const char *arch = o->arch ? o->arch : "llama";
    llmk_gguf_writer *w = NULL;
    struct tbuf bufs = {0};
    int st = llmk_gguf_writer_init(&w);
    if (st != LLMK_OK) return st;
    char key[128];
    llmk_gguf_writer_set_str(w, "general.architecture", arch);
#define KEY(s) (snprintf(key, sizeof key, "%s." s, arch), key)
    llmk_gguf_writer_set_u32(w, KEY("block_count"), T_LAYERS);
    llmk_gguf_writer_set_u32(w, KEY("embedding_length"), T_EMBD);
    llmk_gguf_writer_set_u32(w, KEY("feed_forward_length"), T_FF);
    llmk_gguf_writer_set_u32(w, KEY("attention.head_count"), T_HEAD);
    llmk_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), T_HEAD_KV);
    llmk_gguf_writer_set_u32(w, KEY("context_length"), 128);
    llmk_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    llmk_gguf_writer_set_f32(w, KEY("rope.freq_base"), 10000.0f);
    if (o->rope_scaling) {
        llmk_gguf_writer_set_str(w, KEY("rope.scaling.type"), o->rope_scaling);
        llmk_gguf_writer_set_f32(w, KEY("rope.scaling.factor"), 8.0f);
        llmk_gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), 32);
    }
#undef KEY
    add_tensor(w, &bufs, o, "token_embd.weight", LLMK_TYPE_Q8_0, T_EMBD, T_VOCAB);
    add_tensor(w, &bufs, o, "output_norm.weight", LLMK_TYPE_F32, T_EMBD, 1);
    if (o->separate_output) add_tensor(w, &bufs, o, "output.weight", LLMK_TYPE_F16, T_EMBD, T_VOCAB);
    if (o->rope_freqs) {
        float *ff = keep(&bufs, malloc(T_HD / 2 * sizeof *ff));
        llama3_factors(ff, T_HD / 2, 10000.0);
        uint64_t ne[1] = {T_HD / 2};
        llmk_gguf_writer_add_tensor(w, "rope_freqs.weight", LLMK_TYPE_F32, 1, ne, ff, T_HD / 2 * sizeof *ff);
    }
    if (o->extra) add_tensor(w, &bufs, o, o->extra, LLMK_TYPE_F32, T_EMBD, 1);
    for (int il = 0; il < T_LAYERS; il++) {
        char n[64];
#define T(suffix, type, a, b) (snprintf(n, sizeof n, "blk.%d." suffix, il), add_tensor(w, &bufs, o, n, type, a, b))
        T("attn_norm.weight", LLMK_TYPE_F32, T_EMBD, 1);
        T("attn_q.weight", LLMK_TYPE_Q8_0, T_EMBD, T_HEAD * T_HD);
        T("attn_k.weight", LLMK_TYPE_Q4_1, T_EMBD, T_HEAD_KV * T_HD);
        T("attn_v.weight", LLMK_TYPE_Q4_0, T_EMBD, T_HEAD_KV * T_HD);
        T("attn_output.weight", LLMK_TYPE_F16, T_HEAD * T_HD, T_EMBD);
        if (o->with_bias) {
            T("attn_q.bias", LLMK_TYPE_F32, T_HEAD * T_HD, 1);
            T("attn_k.bias", LLMK_TYPE_F32, T_HEAD_KV * T_HD, 1);
            T("attn_v.bias", LLMK_TYPE_F32, T_HEAD_KV * T_HD, 1);
        }
        if (o->with_qk_norm) {
            T("attn_q_norm.weight", LLMK_TYPE_F32, T_HD, 1);
            T("attn_k_norm.weight", LLMK_TYPE_F32, T_HD, 1);
        }
        T("ffn_norm.weight", LLMK_TYPE_F32, T_EMBD, 1);
        T("ffn_gate.weight", LLMK_TYPE_BF16, T_EMBD, T_FF);
        T("ffn_up.weight", LLMK_TYPE_F32, T_EMBD, T_FF);
        T("ffn_down.weight", LLMK_TYPE_Q8_0, T_FF, T_EMBD);
#undef T
    }
    st = llmk_gguf_writer_write(w, path);
    llmk_gguf_writer_free(w);
    for (int i = 0; i < bufs.n; i++) free(bufs.p[i]);
    return st;
}

static char tmpdir[] = "/tmp/llmk_test_model_XXXXXX";

static int load_tiny(const struct tiny_opts *o, llmk_model **m) {
    char path[128];
    snprintf(path, sizeof path, "%s/tiny.gguf", tmpdir);
    rng_state = 0x9e3779b97f4a7c15ULL; /* same weights for every variant */
    int st = write_tiny(path, o);
    if (st != LLMK_OK) {
        fprintf(stderr, "write_tiny: %s\n", llmk_last_error());
        return st;
    }
    st = llmk_model_load(path, m);
    unlink(path);
    return st;
}

/* ---- tests --------------------------------------------------------------- */

static void test_load_refusals(void) {
    llmk_model *m = NULL;
    CHECK_STATUS(load_tiny(&(struct tiny_opts){.wrong_shape = "blk.1.attn_k.weight"}, &m),
                 LLMK_TENSOR_SHAPE_MISMATCH);
    CHECK(m == NULL);
    /* expected [64, 32], got [64, 33], and the tensor named */
    CHECK(strstr(llmk_last_error(), "blk.1.attn_k.weight") != NULL);
    CHECK(strstr(llmk_last_error(), "expected shape [64, 32]") != NULL);
    CHECK(strstr(llmk_last_error(), "got [64, 33]") != NULL);

    CHECK_STATUS(load_tiny(&(struct tiny_opts){.skip = "blk.0.ffn_up.weight"}, &m), LLMK_MISSING_TENSOR);
    CHECK(strstr(llmk_last_error(), "blk.0.ffn_up.weight") != NULL);
    CHECK_STATUS(load_tiny(&(struct tiny_opts){.skip = "output_norm.weight"}, &m), LLMK_MISSING_TENSOR);
    CHECK_STATUS(load_tiny(&(struct tiny_opts){.arch = "gpt2"}, &m), LLMK_UNSUPPORTED_ARCHITECTURE);
    CHECK(strstr(llmk_last_error(), "gpt2") != NULL);
    CHECK_STATUS(load_tiny(&(struct tiny_opts){.rope_scaling = "longrope"}, &m), LLMK_UNSUPPORTED_FEATURE);
    CHECK(strstr(llmk_last_error(), "longrope") != NULL);
    CHECK_STATUS(load_tiny(&(struct tiny_opts){.extra = "blk.0.ffn_gate_exps.weight"}, &m),
                 LLMK_UNSUPPORTED_FEATURE);
    CHECK(strstr(llmk_last_error(), "ffn_gate_exps") != NULL);
    /* qwen2 needs its Q/K/V biases, qwen3 its Q/K norms. */
    CHECK_STATUS(load_tiny(&(struct tiny_opts){.arch = "qwen2"}, &m), LLMK_MISSING_TENSOR);
    CHECK(strstr(llmk_last_error(), "attn_q.bias") != NULL);
    CHECK_STATUS(load_tiny(&(struct tiny_opts){.arch = "qwen3"}, &m), LLMK_MISSING_TENSOR);
    CHECK(strstr(llmk_last_error(), "attn_q_norm.weight") != NULL);
    CHECK_STATUS(load_tiny(&(struct tiny_opts){.arch = "qwen2", .with_bias = true,
                                               .wrong_shape = "blk.0.attn_v.bias"}, &m),
                 LLMK_TENSOR_SHAPE_MISMATCH);
    CHECK_STATUS(llmk_model_load("/nonexistent/model.gguf", &m), LLMK_NOT_FOUND);
    CHECK(m == NULL);

    int path = -1;
    CHECK_STATUS(llmk_path_from_name("ref", &path), LLMK_OK);
    CHECK_EQ_INT(path, LLMK_PATH_REF);
    CHECK_STATUS(llmk_path_from_name("f32", &path), LLMK_OK);
    CHECK_EQ_INT(path, LLMK_PATH_F32);
    CHECK_STATUS(llmk_path_from_name("fast", &path), LLMK_OK);
    CHECK_EQ_INT(path, LLMK_PATH_FAST);
    CHECK_STATUS(llmk_path_from_name("f64", &path), LLMK_INVALID_ARGUMENT);

    /* Session parameter refusals. */
    CHECK_STATUS(load_tiny(&(struct tiny_opts){0}, &m), LLMK_OK);
    if (m) {
        llmk_session *s = NULL;
        CHECK_STATUS(llmk_session_init(m, &(llmk_session_params){.path = 7}, &s), LLMK_INVALID_ARGUMENT);
        CHECK_STATUS(llmk_session_init(m, &(llmk_session_params){.n_ctx = 1 << 30}, &s), LLMK_INVALID_ARGUMENT);
        CHECK(s == NULL);
        CHECK_STATUS(llmk_session_init(m, &(llmk_session_params){.n_ctx = 4, .n_threads = 1}, &s), LLMK_OK);
        CHECK_STATUS(llmk_session_eval(s, NULL, 1, NULL, 0, false), LLMK_INVALID_ARGUMENT);
        const int32_t one = 1;
        CHECK_STATUS(llmk_session_eval(s, &one, 0, NULL, 0, false), LLMK_INVALID_ARGUMENT);
        llmk_session_free(s);
        llmk_model_free(m);
    }
}

/* Load a tiny model, check ref vs f32, thread and chunking invariance. */
static void check_tiny_paths(const char *what, const struct tiny_opts *o, llmk_hparams *hp_out) {
    llmk_model *m = NULL;
    CHECK_STATUS(load_tiny(o, &m), LLMK_OK);
    if (!m) return;
    const llmk_hparams *hp = llmk_model_hparams(m);
    CHECK(!strcmp(hp->arch, o->arch ? o->arch : "llama"));
    if (hp_out) {
        *hp_out = *hp;
        hp_out->arch = NULL; /* owned by the model, freed below */
    }
    /* No tokenizer metadata: the model loads anyway, the tokenizer reports why. */
    const llmk_tokenizer *tok = (const llmk_tokenizer *)1;
    CHECK(llmk_model_tokenizer(m, &tok) != LLMK_OK);
    CHECK(tok == NULL);
    const int32_t ids[] = {5, 77, 3, 127, 0, 64, 12, 99, 1, 42};
    enum { N = sizeof ids / sizeof ids[0] };
    float *ref = malloc(N * T_VOCAB * sizeof *ref), *f1 = malloc(N * T_VOCAB * sizeof *f1),
          *f2 = malloc(N * T_VOCAB * sizeof *f2);
    CHECK_STATUS(eval_all(m, LLMK_PATH_REF, 1, ids, N, ref), LLMK_OK);
    CHECK_STATUS(eval_all(m, LLMK_PATH_F32, 1, ids, N, f1), LLMK_OK);
    CHECK_STATUS(eval_all(m, LLMK_PATH_F32, 2, ids, N, f2), LLMK_OK);
    double worst = 0;
    for (int t = 0; t < N; t++) {
        double e = rel_l2(f1 + t * T_VOCAB, ref + t * T_VOCAB, T_VOCAB);
        if (e > worst) worst = e;
    }
    if (!(worst < 1e-5)) fprintf(stderr, "%s: ref vs f32 worst relative L2 %g\n", what, worst);
    CHECK(worst < 1e-5);
    CHECK(worst > 0); /* two real implementations, not one path twice */
    CHECK(memcmp(f1, f2, N * T_VOCAB * sizeof *f1) == 0);
    free(ref);
    free(f1);
    free(f2);
    llmk_model_free(m);
}

static void test_tiny_architectures(void) {
    llmk_hparams hp;
    check_tiny_paths("llama", &(struct tiny_opts){0}, &hp);
    CHECK(hp.tied_output && !hp.rope_neox && !hp.has_qkv_bias && !hp.has_qk_norm);
    CHECK_EQ_INT(hp.head_dim, T_HD);
    CHECK_EQ_INT(hp.n_vocab, T_VOCAB);
    check_tiny_paths("llama+output", &(struct tiny_opts){.separate_output = true}, &hp);
    CHECK(!hp.tied_output);
    check_tiny_paths("qwen2", &(struct tiny_opts){.arch = "qwen2", .with_bias = true}, &hp);
    CHECK(hp.rope_neox && hp.has_qkv_bias && !hp.has_qk_norm);
    check_tiny_paths("qwen3", &(struct tiny_opts){.arch = "qwen3", .with_qk_norm = true}, &hp);
    CHECK(hp.rope_neox && hp.has_qk_norm);
    check_tiny_paths("llama3 rope", &(struct tiny_opts){.rope_scaling = "llama3"}, &hp);
    CHECK_EQ_INT(hp.rope_scaling, LLMK_ROPE_SCALING_LLAMA3);
    CHECK_EQ_INT(hp.rope_orig_ctx, 32);
    check_tiny_paths("rope_freqs", &(struct tiny_opts){.rope_freqs = true}, &hp);
    CHECK(hp.has_rope_freqs);
}

/* Llama-3 scaling from metadata and from a rope_freqs.weight tensor holding
 * the same factors must give the same model; and scaling must matter. */
static void test_llama3_rope(void) {
    llmk_model *a = NULL, *b = NULL, *c = NULL;
    CHECK_STATUS(load_tiny(&(struct tiny_opts){.rope_scaling = "llama3"}, &a), LLMK_OK);
    CHECK_STATUS(load_tiny(&(struct tiny_opts){.rope_freqs = true}, &b), LLMK_OK);
    CHECK_STATUS(load_tiny(&(struct tiny_opts){0}, &c), LLMK_OK);
    if (a && b && c) {
        const int32_t ids[] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 11, 22, 33, 44, 55, 66};
        enum { N = sizeof ids / sizeof ids[0] };
        float *la = malloc(N * T_VOCAB * 4), *lb = malloc(N * T_VOCAB * 4), *lc = malloc(N * T_VOCAB * 4);
        CHECK_STATUS(eval_all(a, LLMK_PATH_F32, 1, ids, N, la), LLMK_OK);
        CHECK_STATUS(eval_all(b, LLMK_PATH_F32, 1, ids, N, lb), LLMK_OK);
        CHECK_STATUS(eval_all(c, LLMK_PATH_F32, 1, ids, N, lc), LLMK_OK);
        double ab = rel_l2(la + (N - 1) * T_VOCAB, lb + (N - 1) * T_VOCAB, T_VOCAB);
        double ac = rel_l2(la + (N - 1) * T_VOCAB, lc + (N - 1) * T_VOCAB, T_VOCAB);
        CHECK(ab < 1e-5);
        CHECK(ac > 1e-4);
        free(la);
        free(lb);
        free(lc);
    }
    llmk_model_free(a);
    llmk_model_free(b);
    llmk_model_free(c);
}

/* The inline row decoders of the f32 path equal the codec's _ref ones bit for bit. */
static void test_row_decoders(void) {
    const uint32_t types[] = {LLMK_TYPE_Q4_0, LLMK_TYPE_Q4_1, LLMK_TYPE_Q8_0, LLMK_TYPE_F32, LLMK_TYPE_F16};
    enum { N = 256 };
    float src[N], a[N], b[N];
    unsigned char q[N * 4];
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        for (int i = 0; i < N; i++) src[i] = 3.0f * frand();
        CHECK_STATUS(llmk_quantize_row(types[k], src, q, N), LLMK_OK);
        CHECK_STATUS(llmk_dequantize_row(types[k], q, a, N), LLMK_OK);
        CHECK_STATUS(llmk_f32_dequant_row(types[k], q, b, N), LLMK_OK);
        CHECK(memcmp(a, b, sizeof a) == 0);
    }
}

/* The AVX2 kernels of the f32 path equal the baseline ones bit for bit
 * (same lanes, same order, no FMA), ragged dot lengths included. */
static void test_avx2_kernels(void) {
#if defined(__x86_64__)
    if (llmk_kernels()->f32_dot != llmk_f32_dot_avx2) {
        printf("test_model: no AVX2 here (or LLMK_CPU_MASK), AVX2 kernel checks skipped\n");
        return;
    }
    enum { N = 320 };
    float w[N], x[N], row[N];
    unsigned char q[N * 4];
    for (int len = 1; len <= 40; len++) {
        for (int i = 0; i < len; i++) w[i] = frand(), x[i] = frand();
        float a = llmk_f32_dot(w, x, len), b = llmk_f32_dot_avx2(w, x, len);
        CHECK(memcmp(&a, &b, sizeof a) == 0);
    }
    /* many dots at once: each element f32_dot's bits, every tile shape and
     * tail (rows and vectors 1..11, lengths with and without a vector tail),
     * strides wider than the length, the kernel table's form too */
    enum { DR = 11, DT = 11, DN = 1031, DS = DN + 5 };
    static float dw[DR * DS], dx[DT * DS], dy[DT * 16], dref[DT * 16];
    for (int i = 0; i < DR * DS; i++) dw[i] = frand();
    for (int i = 0; i < DT * DS; i++) dx[i] = frand();
    const int lens[] = {1, 7, 8, 9, 40, 1024, 1031};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (int nr = 1; nr <= DR; nr++)
            for (int nt = 1; nt <= DT; nt += nt < 5 ? 1 : 3) {
                int n = lens[li];
                for (int t = 0; t < nt; t++)
                    for (int r = 0; r < nr; r++) dref[t * 16 + r] = llmk_f32_dot(dw + r * DS, dx + t * DS, n);
                memset(dy, 0xff, sizeof dy);
                llmk_f32_dots_avx2(dw, DS, nr, dx, DS, nt, n, dy, 16);
                for (int t = 0; t < nt; t++) CHECK(memcmp(dy + t * 16, dref + t * 16, (size_t)nr * sizeof(float)) == 0);
                llmk_kernels()->f32_dots(dw, DS, nr, dx, DS, nt, n, dy, 16);
                for (int t = 0; t < nt; t++) CHECK(memcmp(dy + t * 16, dref + t * 16, (size_t)nr * sizeof(float)) == 0);
            }
    const uint32_t types[] = {LLMK_TYPE_Q4_0, LLMK_TYPE_Q4_1, LLMK_TYPE_Q8_0};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
        for (int rep = 0; rep < 20; rep++) {
            for (int i = 0; i < N; i++) w[i] = 2.0f * frand(), x[i] = frand();
            CHECK_STATUS(llmk_quantize_row(types[k], w, q, N), LLMK_OK);
            CHECK_STATUS(llmk_f32_dequant_row(types[k], q, row, N), LLMK_OK);
            float want = llmk_f32_dot(row, x, N), got = 0;
            CHECK(llmk_f32_rowdot_avx2(types[k], q, x, N, &got) == 1);
            CHECK(memcmp(&want, &got, sizeof got) == 0);
        }
    float dummy;
    CHECK(llmk_f32_rowdot_avx2(LLMK_TYPE_F16, q, x, 32, &dummy) == 0);
#endif
}

/* argmax: the first maximum, NaNs skipped, -1 when none; the AVX2 kernel
 * agrees on random rows with planted ties, NaNs and infinities. */
/* The AVX2 RMSNorm gives the scalar definition's bits: ragged widths, with
 * and without a weight, in place, rows of large and tiny magnitude. */
static void test_rmsnorm(void) {
#if defined(__x86_64__)
    if (llmk_kernels()->f32_dot != llmk_f32_dot_avx2) return;
    enum { N = 600 };
    float x[N], w[N], a[N], b[N];
    for (int rep = 0; rep < 200; rep++) {
        int n = 1 + rep * 7 % N;
        float mag = rep % 3 == 0 ? 1e-20f : rep % 3 == 1 ? 1.0f : 1e15f;
        for (int i = 0; i < n; i++) x[i] = mag * ((float)rand() / (float)RAND_MAX - 0.5f), w[i] = (float)rand() / (float)RAND_MAX;
        const float *wp = rep % 4 == 0 ? NULL : w;
        llmk_f32_rmsnorm_ref(a, x, wp, n, 1e-5f);
        llmk_f32_rmsnorm_avx2(b, x, wp, n, 1e-5f);
        CHECK(memcmp(a, b, (size_t)n * sizeof(float)) == 0);
        memcpy(b, x, (size_t)n * sizeof(float));
        llmk_kernels()->rmsnorm(b, b, wp, n, 1e-5f); /* in place, through the kernel table */
        CHECK(memcmp(a, b, (size_t)n * sizeof(float)) == 0);
    }
#endif
}

/* The AVX2 RoPE gives the scalar definition's bits, both pairings, head
 * sizes with and without a vector tail. */
static void test_rope(void) {
#if defined(__x86_64__)
    if (llmk_kernels()->f32_dot != llmk_f32_dot_avx2) return;
    enum { MAXD = 256, H = 3 };
    float x[H * MAXD], a[H * MAXD], b[H * MAXD], cs[MAXD];
    const int hds[] = {2, 6, 8, 16, 24, 64, 80, 128, 256};
    for (size_t di = 0; di < sizeof hds / sizeof hds[0]; di++)
        for (int neox = 0; neox < 2; neox++) {
            int hd = hds[di];
            for (int i = 0; i < H * hd; i++) x[i] = 100.0f * ((float)rand() / (float)RAND_MAX - 0.5f);
            for (int i = 0; i < hd / 2; i++) cs[2 * i] = cosf(0.37f * i + 1), cs[2 * i + 1] = sinf(0.37f * i + 1);
            memcpy(a, x, sizeof x), memcpy(b, x, sizeof x);
            llmk_f32_rope_ref(a, H, hd, cs, neox);
            llmk_f32_rope_avx2(b, H, hd, cs, neox);
            CHECK(memcmp(a, b, (size_t)(H * hd) * sizeof(float)) == 0);
        }
#endif
}

static void test_argmax(void) {
    const float nan = NAN, inf = INFINITY;
    const float a[] = {nan, 1, 3, nan, 3, 2}, b[] = {nan, nan}, c[] = {-inf, nan, -inf}, d[] = {-0.0f, 0.0f, -1};
    int64_t (*fns[2])(const float *, int64_t) = {llmk_f32_argmax, llmk_kernels()->argmax};
    for (int f = 0; f < 2; f++) {
        CHECK(fns[f](a, 6) == 2);
        CHECK(fns[f](b, 2) == -1);
        CHECK(fns[f](a, 0) == -1);
        CHECK(fns[f](c, 3) == 0);
        CHECK(fns[f](d, 3) == 0);
    }
    enum { N = 80 };
    float x[N];
    for (int rep = 0; rep < 400; rep++) {
        int n = rep % N;
        for (int i = 0; i < n; i++) x[i] = (float)(rand() % 7) - 3.0f; /* many ties */
        if (n && rep % 3 == 0) x[rand() % n] = nan;
        if (n && rep % 5 == 0) x[rand() % n] = rep % 10 ? inf : -inf;
        if (rep % 7 == 0)
            for (int i = 0; i < n; i++) x[i] = nan;
        int64_t want = -1;
        for (int i = 0; i < n; i++) /* the definition, written out */
            if (x[i] == x[i] && (want < 0 || x[i] > x[want])) want = i;
        CHECK(llmk_f32_argmax(x, n) == want);
#if defined(__x86_64__)
        if (llmk_kernels()->f32_dot == llmk_f32_dot_avx2) CHECK(llmk_f32_argmax_avx2(x, n) == want);
#endif
    }
}

/* llmk_f32_nonfinite and its AVX2 version: a NaN (either sign) or an
 * infinity anywhere in the range, vector part or tail, is found; the
 * largest and smallest finite magnitudes are not; elements outside the
 * range are not read. */
static void test_nonfinite(void) {
    static const float bad[] = {NAN, -NAN, INFINITY, -INFINITY}, edge[] = {FLT_MAX, -FLT_MAX, 0x1p-149f, -0.0f};
    bool (*fns[3])(const float *, int64_t) = {llmk_f32_nonfinite, llmk_kernels()->nonfinite, NULL};
    int nfn = 2;
#if defined(__x86_64__)
    if (llmk_kernels()->f32_dot == llmk_f32_dot_avx2) fns[nfn++] = llmk_f32_nonfinite_avx2;
#endif
    enum { N = 80 };
    float x[N + 1];
    for (int rep = 0; rep < 800; rep++) {
        int n = rep % N;
        for (int i = 0; i <= N; i++) x[i] = 100.0f * ((float)rand() / (float)RAND_MAX - 0.5f);
        x[n] = bad[rep % 4]; /* just past the range */
        int want = n > 0 && rep % 3 != 0;
        if (n) x[rand() % n] = want ? bad[rep % 4] : edge[rep % 4];
        for (int f = 0; f < nfn; f++) CHECK_EQ_INT(fns[f](x, n), want);
    }
}

static const char *default_model(void) { return check_default_model("test_model", 0); }

/* ---- init progress ---------------------------------------------------------- */

struct progress_log {
    float f[4096];
    int n;
    int stop_at; /* the call (1-based) that returns false; 0: never */
};

static bool log_progress(float fraction, void *user) {
    struct progress_log *l = user;
    if (l->n < (int)(sizeof l->f / sizeof l->f[0])) l->f[l->n] = fraction;
    l->n++;
    return l->n != l->stop_at;
}

/* 0 first, never decreasing, 1 once and last; at least one report per layer
 * between (the repacking goes phase by phase). */
static void check_progress_log(const struct progress_log *l, int n_layer) {
    CHECK(l->n >= n_layer + 2 && l->n <= (int)(sizeof l->f / sizeof l->f[0]));
    if (l->n < 2 || l->n > (int)(sizeof l->f / sizeof l->f[0])) return;
    CHECK(l->f[0] == 0.0f);
    bool rising = true, below_one = true;
    for (int i = 1; i < l->n; i++) rising = rising && l->f[i] >= l->f[i - 1];
    for (int i = 0; i + 1 < l->n; i++) below_one = below_one && l->f[i] < 1.0f;
    CHECK(rising && below_one);
    CHECK(l->f[l->n - 1] == 1.0f);
}

/* The init's progress callback (where a load's time goes: the repacking),
 * for a session and a context, and cancellation at its start, in the middle
 * and at the final 1: LLMK_INTERRUPTED, nothing returned, nothing leaked
 * (the ASan build runs this too). */
static void test_init_progress(const llmk_model *m) {
    int n_layer = llmk_model_hparams(m)->n_layer;
    struct progress_log *l = calloc(1, sizeof *l);
    llmk_session_params sp = {.n_ctx = 16, .n_threads = 2, .path = LLMK_PATH_FAST,
                              .progress_callback = log_progress, .progress_callback_user_data = l};
    llmk_session *s = NULL;
    CHECK_STATUS(llmk_session_init(m, &sp, &s), LLMK_OK);
    check_progress_log(l, n_layer);
    CHECK_EQ_INT(llmk_session_n_threads(s), 2);
    CHECK(llmk_session_kernels(s) && *llmk_session_kernels(s));
    int full = l->n;
    llmk_session_free(s);

    llmk_context_params cp = {.n_seq_max = 2, .n_ctx = 16, .n_threads = 1,
                              .progress_callback = log_progress, .progress_callback_user_data = l};
    llmk_context *c = NULL;
    memset(l, 0, sizeof *l);
    CHECK_STATUS(llmk_context_init(m, &cp, &c), LLMK_OK);
    check_progress_log(l, n_layer);
    llmk_context_free(c);

    int stops[] = {1, full / 2, full};
    for (size_t k = 0; k < sizeof stops / sizeof stops[0]; k++) {
        memset(l, 0, sizeof *l);
        l->stop_at = stops[k];
        s = (llmk_session *)l; /* must come back NULL */
        CHECK_STATUS(llmk_session_init(m, &sp, &s), LLMK_INTERRUPTED);
        CHECK(s == NULL && strstr(llmk_last_error(), "cancelled by the progress callback"));
        CHECK_EQ_INT(l->n, stops[k]); /* no call after the one that said stop */
        memset(l, 0, sizeof *l);
        l->stop_at = stops[k];
        c = (llmk_context *)l;
        CHECK_STATUS(llmk_context_init(m, &cp, &c), LLMK_INTERRUPTED);
        CHECK(c == NULL);
    }

    /* The f32 path repacks nothing: one report, the final 1; a stop there cancels too. */
    memset(l, 0, sizeof *l);
    sp.path = LLMK_PATH_F32;
    CHECK_STATUS(llmk_session_init(m, &sp, &s), LLMK_OK);
    CHECK(l->n == 1 && l->f[0] == 1.0f);
    CHECK(s && !strcmp(llmk_session_kernels(s), "f32"));
    llmk_session_free(s);
    memset(l, 0, sizeof *l);
    l->stop_at = 1;
    CHECK_STATUS(llmk_session_init(m, &sp, &s), LLMK_INTERRUPTED);
    CHECK(s == NULL);
    free(l);
}

static void test_default_model(void) {
    llmk_model *m = NULL;
    CHECK_STATUS(llmk_model_load(default_model(), &m), LLMK_OK);
    if (!m) return;
    const llmk_hparams *hp = llmk_model_hparams(m);
    const llmk_gguf *g = llmk_model_gguf(m);
    uint32_t u = 0;
    double f = 0;
    CHECK(!strcmp(hp->arch, "llama"));
    CHECK(llmk_gguf_get_u32(g, "llama.block_count", &u) == LLMK_OK && (int32_t)u == hp->n_layer);
    CHECK(llmk_gguf_get_u32(g, "llama.embedding_length", &u) == LLMK_OK && (int32_t)u == hp->n_embd);
    CHECK(llmk_gguf_get_u32(g, "llama.feed_forward_length", &u) == LLMK_OK && (int32_t)u == hp->n_ff);
    CHECK(llmk_gguf_get_u32(g, "llama.attention.head_count", &u) == LLMK_OK && (int32_t)u == hp->n_head);
    CHECK(llmk_gguf_get_u32(g, "llama.attention.head_count_kv", &u) == LLMK_OK && (int32_t)u == hp->n_head_kv);
    CHECK(llmk_gguf_get_u32(g, "llama.context_length", &u) == LLMK_OK && (int32_t)u == hp->n_ctx_train);
    CHECK(llmk_gguf_get_f64(g, "llama.rope.freq_base", &f) == LLMK_OK && f == hp->rope_theta);
    CHECK(llmk_gguf_get_f64(g, "llama.attention.layer_norm_rms_epsilon", &f) == LLMK_OK && f == hp->rms_eps);
    CHECK_EQ_INT(hp->head_dim, hp->n_embd / hp->n_head);
    const llmk_tensor_info *te = llmk_gguf_find_tensor(g, "token_embd.weight");
    CHECK(te && (int64_t)te->ne[1] == hp->n_vocab);
    CHECK(hp->tied_output == (llmk_gguf_find_tensor(g, "output.weight") == NULL));
    CHECK(!hp->rope_neox);
    const llmk_tokenizer *tok = NULL;
    CHECK_STATUS(llmk_model_tokenizer(m, &tok), LLMK_OK);
    CHECK(tok && (int64_t)llmk_tokenizer_n_vocab(tok) == hp->n_vocab);

    /* Kept short: every f32 eval call streams the whole model, and this also
     * runs under ASan. */
    const int32_t ids[] = {504, 3458, 314};
    enum { N = 3 };
    size_t V = (size_t)hp->n_vocab;
    float *ref = malloc(N * V * 4), *f1 = malloc(N * V * 4), *f2 = malloc(N * V * 4), *f3 = malloc(N * V * 4);
    CHECK_STATUS(eval_all(m, LLMK_PATH_REF, 0, ids, N, ref), LLMK_OK);
    CHECK_STATUS(eval_all(m, LLMK_PATH_F32, 1, ids, N, f1), LLMK_OK);
    CHECK_STATUS(eval_all(m, LLMK_PATH_F32, 2, ids, N, f2), LLMK_OK);
    for (int t = 0; t < N; t++) {
        double e = rel_l2(f1 + t * V, ref + t * V, V);
        if (!(e < 1e-5)) fprintf(stderr, "default model: position %d ref vs f32 relative L2 %g\n", t, e);
        CHECK(e < 1e-5);
    }
    CHECK(memcmp(f1, f2, N * V * 4) == 0);                  /* 1 vs 2 threads */
    CHECK_STATUS(eval_all(m, LLMK_PATH_F32, 2, ids, N, f3), LLMK_OK);
    CHECK(memcmp(f2, f3, N * V * 4) == 0);                  /* repeated run */

    /* Token by token (n_batch 2 as well) vs one call: identical. */
    llmk_session_params p = {.n_ctx = 5, .n_threads = 2, .path = LLMK_PATH_F32, .n_batch = 2};
    llmk_session *s = NULL;
    CHECK_STATUS(llmk_session_init(m, &p, &s), LLMK_OK);
    if (s) {
        float *row = malloc(V * 4);
        for (int t = 0; t < N; t++) {
            CHECK_STATUS(llmk_session_eval(s, &ids[t], 1, row, V, false), LLMK_OK);
            CHECK(memcmp(row, f1 + t * V, V * 4) == 0);
        }
        CHECK_EQ_INT(llmk_session_pos(s), N);
        /* Truncate and replay the last two tokens in one call (a 2-token chunk). */
        CHECK_STATUS(llmk_session_truncate(s, 1), LLMK_OK);
        CHECK_STATUS(llmk_session_eval(s, ids + 1, 2, row, V, false), LLMK_OK);
        CHECK(memcmp(row, f1 + 2 * V, V * 4) == 0);
        /* Refusals leave the position alone. */
        int32_t bad = hp->n_vocab;
        CHECK_STATUS(llmk_session_eval(s, &bad, 1, row, V, false), LLMK_INVALID_TOKEN);
        int32_t neg = -1;
        CHECK_STATUS(llmk_session_eval(s, &neg, 1, row, V, false), LLMK_INVALID_TOKEN);
        CHECK_STATUS(llmk_session_eval(s, ids, 1, row, V - 1, false), LLMK_BUFFER_TOO_SMALL);
        CHECK_STATUS(llmk_session_eval(s, ids, 3, NULL, 0, false), LLMK_CONTEXT_FULL);
        CHECK_STATUS(llmk_session_truncate(s, N + 1), LLMK_INVALID_ARGUMENT);
        CHECK_EQ_INT(llmk_session_pos(s), N);
        CHECK_STATUS(llmk_session_eval(s, ids, 2, NULL, 0, false), LLMK_OK); /* fills the context exactly */
        CHECK_EQ_INT(llmk_session_pos(s), 5);
        CHECK_STATUS(llmk_session_eval(s, ids, 1, NULL, 0, false), LLMK_CONTEXT_FULL);
        free(row);
        llmk_session_free(s);
    }
    free(ref);
    free(f1);
    free(f2);
    free(f3);
    test_init_progress(m);
    llmk_model_free(m);
}


/* A tokenizer whose vocabulary is not token_embd's row count fails the load
 * with both numbers (it used to load and fail mid-generation). The tiny
 * qwen3 fixture is rewritten with one token more (a vocabulary longer than
 * the rows) or one zero row more in token_embd and output (rows past the
 * vocabulary: ids the model could pick and nobody could print). */
static void vocab_variant(const llmk_gguf *g, bool more_tokens, bool more_rows, const char *path) {
    llmk_gguf_writer *w = NULL;
    CHECK_STATUS(llmk_gguf_writer_init(&w), LLMK_OK);
    static const char *const per_token[] = {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type"};
    uint64_t n_tok = 0;
    uint32_t et;
    CHECK_STATUS(llmk_gguf_get_arr(g, per_token[0], &et, &n_tok), LLMK_OK);
    uint64_t n_new = n_tok + (more_tokens ? 1 : 0);
    for (size_t i = 0; i < llmk_gguf_n_kv(g); i++) {
        const char *key = llmk_gguf_kv_key(g, i);
        if (strcmp(key, per_token[0]) && strcmp(key, per_token[1])) CHECK_STATUS(llmk_gguf_writer_copy_kv(w, g, i), LLMK_OK);
    }
    const char **strs = calloc(n_new, sizeof *strs);
    int32_t *types = calloc(n_new, sizeof *types);
    for (uint64_t i = 0; i < n_new; i++) {
        size_t len;
        double v = 1; /* a normal token */
        if (i < n_tok) {
            CHECK_STATUS(llmk_gguf_arr_str(g, per_token[0], i, &strs[i], &len), LLMK_OK);
            llmk_gguf_arr_num(g, per_token[1], i, &v);
        } else {
            strs[i] = "<|extra_token|>";
        }
        types[i] = (int32_t)v;
    }
    CHECK_STATUS(llmk_gguf_writer_set_arr_str(w, per_token[0], strs, n_new), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_set_arr(w, per_token[1], LLMK_GGUF_INT32, types, n_new), LLMK_OK);
    void *grown[2] = {NULL, NULL};
    int ng = 0;
    for (size_t i = 0; i < llmk_gguf_n_tensors(g); i++) {
        const llmk_tensor_info *ti = llmk_gguf_tensor(g, i);
        uint64_t ne[4] = {ti->ne[0], ti->ne[1], ti->ne[2], ti->ne[3]}, bytes = ti->n_bytes;
        const void *data = ti->data;
        if (more_rows && (!strcmp(ti->name, "token_embd.weight") || !strcmp(ti->name, "output.weight")) && ng < 2) {
            uint64_t rb = 0;
            CHECK_STATUS(llmk_row_bytes(ti->type, ti->ne[0], &rb), LLMK_OK);
            ne[1]++, bytes += rb;
            data = grown[ng] = calloc(1, (size_t)bytes); /* the new row: zero bytes, a zero row in every codec */
            memcpy(grown[ng++], ti->data, (size_t)ti->n_bytes);
        }
        CHECK_STATUS(llmk_gguf_writer_add_tensor(w, ti->name, ti->type, ti->n_dims, ne, data, bytes), LLMK_OK);
    }
    CHECK_STATUS(llmk_gguf_writer_write(w, path), LLMK_OK);
    llmk_gguf_writer_free(w);
    free(grown[0]), free(grown[1]), free(strs), free(types);
}

static void test_vocab_must_match_embeddings(void) {
    llmk_gguf *g = NULL;
    CHECK_STATUS(llmk_gguf_open("tests/fixtures/model/tiny/tiny_qwen3.gguf", &g), LLMK_OK);
    if (!g) return;
    uint64_t rows = llmk_gguf_find_tensor(g, "token_embd.weight")->ne[1];
    char path[512], want_rows[64], want_tokens[64];
    snprintf(path, sizeof path, "%s/vocab.gguf", tmpdir);
    for (int k = 0; k < 3; k++) {
        bool more_tokens = k == 1, more_rows = k == 2;
        vocab_variant(g, more_tokens, more_rows, path);
        llmk_model *m = NULL;
        int st = llmk_model_load(path, &m);
        snprintf(want_rows, sizeof want_rows, "token_embd.weight has %llu rows", (unsigned long long)(rows + more_rows));
        snprintf(want_tokens, sizeof want_tokens, "tokenizer has %llu tokens", (unsigned long long)(rows + more_tokens));
        if (k == 0) {
            CHECK_STATUS(st, LLMK_OK); /* the rewrite itself is faithful */
            const llmk_tokenizer *tok = NULL;
            CHECK_STATUS(llmk_model_tokenizer(m, &tok), LLMK_OK);
        } else {
            CHECK_STATUS(st, LLMK_TENSOR_SHAPE_MISMATCH);
            CHECK(m == NULL && strstr(llmk_last_error(), want_rows) && strstr(llmk_last_error(), want_tokens));
            if (st != LLMK_TENSOR_SHAPE_MISMATCH) fprintf(stderr, "vocab case %d: %s\n", k, llmk_last_error());
        }
        llmk_model_free(m);
    }
    unlink(path);
    llmk_gguf_close(g);
}

int main(void) {
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_row_decoders();
    test_avx2_kernels();
    test_argmax();
    test_nonfinite();
    test_rmsnorm();
    test_rope();
    test_load_refusals();
    test_vocab_must_match_embeddings();
    test_tiny_architectures();
    test_llama3_rope();
    test_default_model();
    rmdir(tmpdir);
    return check_summary("test_model");
}
