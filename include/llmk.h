/*
 * llmk.h — the public header of llmk, an LLM inference engine in C: what an
 * application that runs models needs. Two more public headers sit beside it:
 * llmk_primitives.h (seed 000's f64 decode primitives) and llmk_formulas.h
 * (seed 001's formula layer).
 *
 * Every function that can fail returns an `int` status from one vocabulary
 * (section 1). On failure a thread-local message with the detail is available
 * from llmk_last_error().
 *
 * Sections (each owned by one part of the library):
 *   1. Status vocabulary and errors            (src/status.c)
 *   2. Tensor types and codecs                 (src/codec/)
 *   3. GGUF reader and writer                  (src/gguf.c)
 *   4. Tokenizer                               (src/tokenizer.c)
 *   5. Model, session and context              (src/model.c, src/session.c, src/context.c)
 *   6. Sampling                                (src/sample.c)
 *   7. Files llmk writes                       (src/outfile.c)
 *   8. Configuration                           (src/config.c)
 */
#ifndef LLMK_H
#define LLMK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the shared library exports: the library is built with
 * -fvisibility=hidden, so only declarations marked LLMK_API are visible
 * (`nm -D libllmk.so` lists exactly this API; tests/py/test_abi.py). */
#if defined(__GNUC__) || defined(__clang__)
#define LLMK_API __attribute__((visibility("default")))
#else
#define LLMK_API
#endif

/* ======================================================================== */
/* 1. Status vocabulary                                                      */
/* ======================================================================== */
/*
 * Code ranges (each block is reserved whole; new codes take the next free
 * number inside the block that fits them):
 *   560-571  seed 000's vocabulary, numbers and names unchanged
 *   572-579  general runtime conditions
 *   600-619  file format (GGUF) problems
 *   620-639  model problems (architecture, tensors, hyperparameters)
 *   640-659  tokenizer and text problems
 *   660-679  generation / request problems (sampling, context, templates)
 * 580-599 is deliberately left unused: the seed's wider tree gave it to
 * another family, and keeping it free avoids any confusion when comparing.
 */
enum llmk_status {
    LLMK_OK = 560,                      /* the call did its work; every output is defined */
    LLMK_EMPTY_DIMENSION = 561,         /* a required dimension was < 1 */
    LLMK_A_LENGTH_MISMATCH = 562,       /* residual_add_flat: len(a) != n */
    LLMK_B_LENGTH_MISMATCH = 563,       /* residual_add_flat: len(b) != n */
    LLMK_DIMENSION_TOO_LARGE = 564,     /* a dimension exceeds LLMK_MAX_DIM */
    LLMK_CODE_OUT_OF_RANGE = 565,       /* not a code of this vocabulary (llmk_status_name's fallback) */
    LLMK_CACHE_LENGTH_MISMATCH = 566,   /* kv_cache_append_flat: len(cache) != cache_len */
    LLMK_NEW_LENGTH_MISMATCH = 567,     /* kv_cache_append_flat: len(new_vals) != n_new */
    LLMK_LOGITS_LENGTH_MISMATCH = 568,  /* greedy_argmax_flat: len(logits) != n */
    LLMK_GEMV_A_LENGTH_MISMATCH = 569,  /* gemv_transposed_parallel_flat: len(a) != m*n */
    LLMK_GEMV_X_LENGTH_MISMATCH = 570,  /* gemv_transposed_parallel_flat: len(x) != m */
    LLMK_CACHE_CAPACITY_EXCEEDED = 571, /* a reserved-capacity append would overrun its buffer */

    LLMK_INVALID_ARGUMENT = 572,        /* a NULL pointer, bad flag value or out-of-range number */
    LLMK_OUT_OF_MEMORY = 573,           /* an allocation failed */
    LLMK_IO_ERROR = 574,                /* open/read/write/mmap failed (errno in the message) */
    LLMK_UNSUPPORTED = 575,             /* a valid request this build does not implement */
    LLMK_BUFFER_TOO_SMALL = 576,        /* caller's output buffer is too small; size reported */
    LLMK_NOT_FOUND = 577,               /* a named thing (key, tensor, file) does not exist */
    LLMK_INTERRUPTED = 578,             /* stopped on request (Ctrl-C) */
    LLMK_NAN_INPUT = 579,               /* NaN where a number is required (e.g. argmax over NaN logits) */

    LLMK_BAD_MAGIC = 600,               /* not a GGUF file */
    LLMK_BAD_VERSION = 601,             /* GGUF version other than 2 or 3 */
    LLMK_TRUNCATED_FILE = 602,          /* a read would go past the end of the file */
    LLMK_COUNT_TOO_LARGE = 603,         /* a count (tensors, keys, array length) is implausible */
    LLMK_DIMENSION_OVERFLOW = 604,      /* a product of dimensions or sizes overflows */
    LLMK_BAD_ALIGNMENT = 605,           /* alignment not a power of two, or an offset not aligned */
    LLMK_OFFSET_OUT_OF_FILE = 606,      /* tensor data lies (partly) outside the file */
    LLMK_UNKNOWN_TYPE = 607,            /* unknown metadata value type or tensor type id */
    LLMK_BAD_STRING = 608,              /* a string length past the end, or a key that is empty */
    LLMK_DUPLICATE_NAME = 609,          /* two keys or two tensors with the same name */
    LLMK_TYPE_MISMATCH = 610,           /* a key holds another type than the one asked for */
    LLMK_BAD_TENSOR_INFO = 611,         /* n_dims out of range, zero dimension, row not whole blocks */
    LLMK_TENSOR_DATA_OVERLAP = 612,     /* a tensor's data overlaps or precedes the previous tensor's */

    LLMK_UNSUPPORTED_ARCHITECTURE = 620, /* general.architecture is not one llmk runs */
    LLMK_UNSUPPORTED_FEATURE = 621,      /* a model feature llmk does not implement (named) */
    LLMK_MISSING_TENSOR = 622,           /* a tensor the architecture needs is absent */
    LLMK_TENSOR_SHAPE_MISMATCH = 623,    /* a tensor's shape differs from what the hparams imply */
    LLMK_TENSOR_TYPE_UNSUPPORTED = 624,  /* a tensor's codec has no kernel for this use */
    LLMK_BAD_HYPERPARAMETER = 625,       /* a hyperparameter missing or out of range */

    LLMK_TOKENIZER_UNSUPPORTED = 640,    /* tokenizer.ggml.model / .pre not implemented */
    LLMK_TOKENIZER_BAD_DATA = 641,       /* vocab/merges/scores inconsistent */
    LLMK_INVALID_TOKEN = 642,            /* a token id outside the vocabulary */
    LLMK_INVALID_UTF8 = 643,             /* text is not valid UTF-8 where it must be */

    LLMK_CONTEXT_FULL = 660,             /* the sequence would exceed the session's context */
    LLMK_BAD_SAMPLER_CONFIG = 661,       /* a sampler parameter out of its range */
    LLMK_TEMPLATE_UNKNOWN = 662,         /* the chat template is not one llmk recognises */
    LLMK_BAD_REQUEST = 663,              /* a malformed request (JSON, messages, flags) */
    LLMK_OUTPUT_IS_INPUT = 664,          /* an output path names the same file as an input */
    LLMK_CONTEXT_OVER_TRAIN = 665,       /* a context longer than the model was trained for, not allowed */
    LLMK_QUEUE_FULL = 666,               /* the engine's request queue is at its bound; retry later */
    LLMK_BAD_GRAMMAR = 667,              /* a GBNF grammar that does not parse or cannot run (line:col named) */
};

/* Largest dimension any seed-000 primitive accepts (a ceiling, not a model size). */
#define LLMK_MAX_DIM (1 << 24)

/* Name of a status code ("llmk_ok", "llmk_bad_magic", ...); for a number that is
 * not a code, the name of LLMK_CODE_OUT_OF_RANGE. Never NULL. */
LLMK_API const char *llmk_status_name(int code);

/* Detail of the failure behind the status the last llmk call on this thread
 * returned: "" after a call that succeeded, so a caller may test it. Valid
 * until the next llmk call on the same thread. */
LLMK_API const char *llmk_last_error(void);

/* ======================================================================== */
/* 2. Tensor types and codecs                                                */
/* ======================================================================== */
/* Type ids are GGUF's (ggml_type) numbers, so a file's ids are used as-is. */
enum llmk_type {
    LLMK_TYPE_F32 = 0,
    LLMK_TYPE_F16 = 1,
    LLMK_TYPE_Q4_0 = 2,
    LLMK_TYPE_Q4_1 = 3,
    LLMK_TYPE_Q5_0 = 6,
    LLMK_TYPE_Q5_1 = 7,
    LLMK_TYPE_Q8_0 = 8,
    LLMK_TYPE_Q8_1 = 9,
    LLMK_TYPE_Q2_K = 10,
    LLMK_TYPE_Q3_K = 11,
    LLMK_TYPE_Q4_K = 12,
    LLMK_TYPE_Q5_K = 13,
    LLMK_TYPE_Q6_K = 14,
    LLMK_TYPE_Q8_K = 15,
    LLMK_TYPE_IQ4_NL = 20,
    LLMK_TYPE_IQ4_XS = 23,
    LLMK_TYPE_I8 = 24,
    LLMK_TYPE_I16 = 25,
    LLMK_TYPE_I32 = 26,
    LLMK_TYPE_I64 = 27,
    LLMK_TYPE_F64 = 28,
    LLMK_TYPE_BF16 = 30,
    LLMK_TYPE_MXFP4 = 39,
    LLMK_TYPE_NVFP4 = 40, /* ggml's id: 64-element blocks, 4 UE4M3 scales (src/codec/nvfp4.c) */
    LLMK_TYPE_COUNT_ = 41 /* one past the largest id; not a type */
};

/* Facts about a type id; all return 0 / NULL for an id llmk does not know. */
LLMK_API const char *llmk_type_name(uint32_t type);          /* "q4_1", "f16", ... */
LLMK_API uint32_t llmk_type_block_elems(uint32_t type);      /* elements per block (1 for plain types) */
LLMK_API uint32_t llmk_type_block_bytes(uint32_t type);      /* bytes per block */
/* Type id from a name, case-insensitive ("Q4_1", "bf16"). */
LLMK_API int llmk_type_from_name(const char *name, uint32_t *type_out);
/* Bytes of a row of n elements: checks the type, that n is whole blocks and
 * that the product does not overflow. */
LLMK_API int llmk_row_bytes(uint32_t type, uint64_t n, uint64_t *bytes_out);

/* LLMK_SECTION_CODECS_BEGIN */
/* Scalar reference conversions for one row of n elements (n whole blocks).
 * dequantize: src holds llmk_row_bytes(type, n) bytes. These are the _ref
 * kernels every fast path is tested against. */
LLMK_API int llmk_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n);
LLMK_API int llmk_quantize_row(uint32_t type, const float *src, void *dst, int64_t n);
/* A per-tensor scale beside the blocks (NVFP4: GGUF keeps it as a one-value
 * F32 tensor X.scale next to X.weight, and X's products are multiplied by
 * it). llmk_tensor_scale: the scale of a tensor whose largest magnitude is
 * amax (NVFP4: amax / (6 * 448), which puts the largest block scale on
 * E4M3's largest value; 1 for other types, or amax 0 or not finite).
 * llmk_quantize_row_scaled: llmk_quantize_row of src / scale (a scale other
 * than 1 for NVFP4 only). llmk_weight_takes_scale: whether a model applies
 * an X.scale to tensor `name` (the projections, the experts, output). */
LLMK_API float llmk_tensor_scale(uint32_t type, float amax);
LLMK_API int llmk_quantize_row_scaled(uint32_t type, const float *src, void *dst, int64_t n, float scale);
LLMK_API bool llmk_weight_takes_scale(const char *name);

/* Names of the codecs llmk implements ("f32", "q4_1", "q6_k", ...), in type-id
 * order; *n receives the count and the array is NULL-terminated. Static. */
LLMK_API const char *const *llmk_codecs(size_t *n);
/* Human-readable report: the CPU features detected (CPUID and OS state) and,
 * per codec, the dot kernel dispatch chose ("q4_1: q4_1_avx2"). Static. */
LLMK_API const char *llmk_cpu_features(void);

/* A pool of worker threads created once and reused for every parallel
 * region (src/pool.c): no thread is created per call, and the caller of
 * llmk_pool_run takes part as worker 0. Sessions and executors own theirs;
 * an application may make one for its own parallel work. */
typedef struct llmk_pool llmk_pool;
/* fn is called once on every worker, ith in [0, nth). */
typedef void (*llmk_pool_fn)(void *ctx, int ith, int nth);
/* n_threads < 1 means "one per online CPU". */
LLMK_API int llmk_pool_create(int n_threads, llmk_pool **out);
LLMK_API void llmk_pool_free(llmk_pool *pool);
LLMK_API int llmk_pool_size(const llmk_pool *pool);
/* Run fn on all workers and return when every one has returned. Not
 * re-entrant: one region at a time per pool. A NULL pool runs fn(ctx, 0, 1). */
LLMK_API void llmk_pool_run(llmk_pool *pool, llmk_pool_fn fn, void *ctx);
/* Number of online CPUs (at least 1). */
LLMK_API int llmk_cpu_count(void);

/* y = x . W^T: W is n rows of k elements in codec `wtype` (row r at
 * w + r * row_bytes, the layout of a GGUF tensor with ne = {k, n}), x is m
 * rows of k f32 (row stride k), y receives m rows of n f32 (row stride n).
 * Runs on `pool` (NULL: the calling thread). Output rows are split across
 * workers with llmk_split_range and each y element is one dot product in a
 * fixed order, so y is bitwise identical for any thread count and any m.
 * Allocates a scratch buffer for the quantized activations per call. k must
 * be whole blocks of wtype. */
LLMK_API int llmk_quantized_matmul(llmk_pool *pool, uint32_t wtype, const void *w, int64_t n, int64_t k,
                          const float *x, int64_t m, float *y);
/* LLMK_SECTION_CODECS_END */

/* ======================================================================== */
/* 3. GGUF reader and writer                                                 */
/* ======================================================================== */
/* LLMK_SECTION_GGUF_BEGIN */
/* A GGUF v2/v3 file opened read-only through mmap. Opening validates the whole
 * header, every metadata value and every tensor info against the file size
 * (overflow-safe); accessors afterwards cannot read outside the mapping.
 * Keys and string values are copied out NUL-terminated (with their length:
 * a value may hold NUL bytes); tensor data stays in the mapping. */
typedef struct llmk_gguf llmk_gguf;

/* Metadata value types, numbered as GGUF stores them. */
enum llmk_gguf_type {
    LLMK_GGUF_UINT8 = 0, LLMK_GGUF_INT8 = 1, LLMK_GGUF_UINT16 = 2, LLMK_GGUF_INT16 = 3,
    LLMK_GGUF_UINT32 = 4, LLMK_GGUF_INT32 = 5, LLMK_GGUF_FLOAT32 = 6, LLMK_GGUF_BOOL = 7,
    LLMK_GGUF_STRING = 8, LLMK_GGUF_ARRAY = 9, LLMK_GGUF_UINT64 = 10, LLMK_GGUF_INT64 = 11,
    LLMK_GGUF_FLOAT64 = 12
};

typedef struct llmk_tensor_info {
    const char *name;      /* NUL-terminated */
    uint32_t type;         /* enum llmk_type */
    uint32_t n_dims;       /* 1..4 */
    uint64_t ne[4];        /* elements per dimension, ne[0] innermost (row length); unused = 1 */
    uint64_t n_elements;   /* product of ne */
    uint64_t offset;       /* from the start of the data section (aligned) */
    uint64_t n_bytes;      /* size of the data */
    const void *data;      /* into the mapping; n_bytes readable */
} llmk_tensor_info;

LLMK_API int llmk_gguf_open(const char *path, llmk_gguf **out);
/* Parse a GGUF image already in memory (no copy: `data` must outlive the
 * handle). Used by the fuzz target and by tests. */
LLMK_API int llmk_gguf_open_memory(const void *data, size_t size, llmk_gguf **out);
LLMK_API void llmk_gguf_close(llmk_gguf *g);

LLMK_API uint32_t llmk_gguf_version(const llmk_gguf *g);
LLMK_API uint32_t llmk_gguf_alignment(const llmk_gguf *g);
LLMK_API uint64_t llmk_gguf_file_size(const llmk_gguf *g);
/* Byte where the (aligned) data section starts; tensor offsets are from here. */
LLMK_API uint64_t llmk_gguf_data_offset(const llmk_gguf *g);
/* "u8", "str", "array", ... for a metadata value type; NULL for an unknown id. */
LLMK_API const char *llmk_gguf_type_name(uint32_t type);

/* Metadata, by index (0 .. n_kv-1, file order) or by key. */
LLMK_API size_t llmk_gguf_n_kv(const llmk_gguf *g);
LLMK_API const char *llmk_gguf_kv_key(const llmk_gguf *g, size_t i);
LLMK_API uint32_t llmk_gguf_kv_type(const llmk_gguf *g, size_t i);           /* enum llmk_gguf_type */
/* Index of a key, or -1 when absent. */
LLMK_API int64_t llmk_gguf_find_key(const llmk_gguf *g, const char *key);

/* Typed getters. LLMK_NOT_FOUND when the key is absent, LLMK_TYPE_MISMATCH
 * when it holds another type. Integer getters accept any integer type whose
 * value fits the requested one; get_f32/get_f64 accept either float type. */
LLMK_API int llmk_gguf_get_u32(const llmk_gguf *g, const char *key, uint32_t *out);
LLMK_API int llmk_gguf_get_i32(const llmk_gguf *g, const char *key, int32_t *out);
LLMK_API int llmk_gguf_get_u64(const llmk_gguf *g, const char *key, uint64_t *out);
LLMK_API int llmk_gguf_get_i64(const llmk_gguf *g, const char *key, int64_t *out);
LLMK_API int llmk_gguf_get_f32(const llmk_gguf *g, const char *key, float *out);
LLMK_API int llmk_gguf_get_f64(const llmk_gguf *g, const char *key, double *out);
LLMK_API int llmk_gguf_get_bool(const llmk_gguf *g, const char *key, bool *out);
LLMK_API int llmk_gguf_get_str(const llmk_gguf *g, const char *key, const char **s, size_t *len);
/* Arrays: element type and count; then elements by index. Nested arrays are
 * parsed and validated but only their count is exposed (no GGUF key that
 * llmk reads nests arrays). */
LLMK_API int llmk_gguf_get_arr(const llmk_gguf *g, const char *key, uint32_t *elem_type, uint64_t *n);
LLMK_API int llmk_gguf_arr_str(const llmk_gguf *g, const char *key, uint64_t i, const char **s, size_t *len);
/* Any numeric (or bool) array element converted to double. */
LLMK_API int llmk_gguf_arr_num(const llmk_gguf *g, const char *key, uint64_t i, double *out);

/* Tensors, in file order. */
LLMK_API size_t llmk_gguf_n_tensors(const llmk_gguf *g);
LLMK_API const llmk_tensor_info *llmk_gguf_tensor(const llmk_gguf *g, size_t i);
LLMK_API const llmk_tensor_info *llmk_gguf_find_tensor(const llmk_gguf *g, const char *name); /* NULL if absent */

/* A Hugging Face model folder (config.json, model.safetensors or shards named
 * by model.safetensors.index.json, tokenizer.json, tokenizer_config.json,
 * generation_config.json) opened as the GGUF view llama.cpp's converter would
 * produce: metadata under GGUF keys, tensors under GGUF names with data in
 * the safetensors mappings (F32, F16 and BF16 kept as they are; llama's
 * attn_q/attn_k rows permuted into GGUF's order). docs/model.md says what
 * loads and what is refused. */
LLMK_API int llmk_hf_open(const char *dir, llmk_gguf **out);
/* llmk_hf_open when `path` is a directory, llmk_gguf_open otherwise: what
 * every command that takes a model calls. */
LLMK_API int llmk_gguf_open_path(const char *path, llmk_gguf **out);

/* Writer: collect metadata and tensors, then write a GGUF v3 file. Tensor
 * data pointers are borrowed until llmk_gguf_writer_write returns. */
typedef struct llmk_gguf_writer llmk_gguf_writer;
LLMK_API int llmk_gguf_writer_init(llmk_gguf_writer **out);
LLMK_API void llmk_gguf_writer_free(llmk_gguf_writer *w);
LLMK_API int llmk_gguf_writer_set_u32(llmk_gguf_writer *w, const char *key, uint32_t v);
LLMK_API int llmk_gguf_writer_set_i32(llmk_gguf_writer *w, const char *key, int32_t v);
LLMK_API int llmk_gguf_writer_set_u64(llmk_gguf_writer *w, const char *key, uint64_t v);
LLMK_API int llmk_gguf_writer_set_f32(llmk_gguf_writer *w, const char *key, float v);
LLMK_API int llmk_gguf_writer_set_bool(llmk_gguf_writer *w, const char *key, bool v);
LLMK_API int llmk_gguf_writer_set_str(llmk_gguf_writer *w, const char *key, const char *v);
/* Any scalar value type (u8 .. f64, bool); `value` points to one value of
 * that type in host order. A key set twice is LLMK_DUPLICATE_NAME. A u32
 * general.alignment (power of two) changes the alignment the file is laid
 * out with (default 32). */
LLMK_API int llmk_gguf_writer_set_scalar(llmk_gguf_writer *w, const char *key, uint32_t type,
                                const void *value);
/* Numeric array: `data` holds n little-endian elements of elem_type. */
LLMK_API int llmk_gguf_writer_set_arr(llmk_gguf_writer *w, const char *key, uint32_t elem_type,
                             const void *data, uint64_t n);
LLMK_API int llmk_gguf_writer_set_arr_str(llmk_gguf_writer *w, const char *key,
                                 const char *const *strs, uint64_t n);
/* Copy key i of an open file (any type, arrays included) into the writer. */
LLMK_API int llmk_gguf_writer_copy_kv(llmk_gguf_writer *w, const llmk_gguf *g, size_t i);
LLMK_API int llmk_gguf_writer_add_tensor(llmk_gguf_writer *w, const char *name, uint32_t type,
                                uint32_t n_dims, const uint64_t *ne, const void *data,
                                uint64_t n_bytes);
/* Write the file through an outfile (section 7): a temporary file in the
 * same folder renamed over `path` when complete, so a failure leaves the
 * target as it was. */
LLMK_API int llmk_gguf_writer_write(llmk_gguf_writer *w, const char *path);
/* The same bytes onto an open stream; name is for messages. With
 * llmk_outfile_open(path, inputs, ...) a caller also refuses an output that
 * is one of its inputs (llmk quantize); it then commits or discards. */
LLMK_API int llmk_gguf_writer_write_stream(const llmk_gguf_writer *w, FILE *f, const char *name);
/* LLMK_SECTION_GGUF_END */

/* ======================================================================== */
/* 4. Tokenizer                                                              */
/* ======================================================================== */
/* LLMK_SECTION_TOKENIZER_BEGIN */
/* Built from a GGUF file's tokenizer.ggml.* metadata: byte-level BPE
 * (model "gpt2", pre-tokenizer from tokenizer.ggml.pre) or SentencePiece-style
 * BPE (model "llama", with byte fallback). */
typedef struct llmk_tokenizer llmk_tokenizer;

LLMK_API int llmk_tokenizer_load(const llmk_gguf *g, llmk_tokenizer **out);
LLMK_API void llmk_tokenizer_free(llmk_tokenizer *t);

/* Encode UTF-8 text. add_bos: prepend BOS (callers usually pass
 * llmk_tokenizer_add_bos(t)); parse_special: recognise special/control token
 * texts such as "<|im_start|>" in the text (otherwise they are plain text).
 * Writes at most cap ids; *n_out is always the full count, and
 * LLMK_BUFFER_TOO_SMALL is returned when it exceeds cap. */
LLMK_API int llmk_tokenize(const llmk_tokenizer *t, const char *text, size_t len, bool add_bos,
                  bool parse_special, int32_t *ids, size_t cap, size_t *n_out);

LLMK_API size_t llmk_tokenizer_n_vocab(const llmk_tokenizer *t);
LLMK_API int32_t llmk_tokenizer_bos(const llmk_tokenizer *t);   /* -1 when the model has none */
LLMK_API int32_t llmk_tokenizer_eos(const llmk_tokenizer *t);   /* -1 when none */
LLMK_API int32_t llmk_tokenizer_eot(const llmk_tokenizer *t);   /* end of turn; -1 when none */
LLMK_API bool llmk_tokenizer_add_bos(const llmk_tokenizer *t);  /* tokenizer.ggml.add_bos_token */
/* True for ids that end generation (EOS, EOT and other end-of-generation ids). */
LLMK_API bool llmk_tokenizer_is_eog(const llmk_tokenizer *t, int32_t id);
/* The vocabulary entry as stored (e.g. "Ġthe", "▁the", "<0x0A>"); NULL for a bad id. */
LLMK_API const char *llmk_tokenizer_piece(const llmk_tokenizer *t, int32_t id, size_t *len);
/* Look up a vocabulary entry by its stored text; -1 when absent. */
LLMK_API int32_t llmk_tokenizer_find(const llmk_tokenizer *t, const char *piece, size_t len);
/* GGUF token type of an id: 1 normal, 2 unknown, 3 control, 4 user-defined,
 * 5 unused, 6 byte; 0 for a bad id. */
LLMK_API int llmk_tokenizer_token_type(const llmk_tokenizer *t, int32_t id);
/* The raw bytes a token adds to generated text (byte-level BPE mapped back
 * to bytes, SentencePiece's U+2581 as a space, <0xXX> as the byte; a piece
 * may end inside a UTF-8 character). Control and unknown tokens give 0
 * bytes. *n_out is the full length; LLMK_BUFFER_TOO_SMALL when over cap. */
LLMK_API int llmk_tokenizer_token_bytes(const llmk_tokenizer *t, int32_t id, char *out, size_t cap,
                                        size_t *n_out);
/* Notes on llmk_tokenize: text must be valid UTF-8 (LLMK_INVALID_UTF8 names
 * the byte offset; nothing is replaced). User-defined tokens (type 4) are
 * always matched as whole tokens, like Hugging Face's non-special added
 * tokens; control tokens only with parse_special. add_bos with a model that
 * has no BOS adds nothing. */

/* Detokenize as a stream: bytes of a multi-byte UTF-8 character split across
 * tokens are held back until complete. Zero-initialise the state. */
typedef struct llmk_detok_state {
    unsigned char pending[8];
    unsigned n_pending;
    bool started; /* SentencePiece: the leading space of the first piece is dropped */
} llmk_detok_state;
/* Append the text of `id` to out (at most cap bytes, *n_out written). With
 * render_special false, control tokens (BOS, <|im_end|>, ...) produce nothing. */
LLMK_API int llmk_detok_feed(const llmk_tokenizer *t, llmk_detok_state *st, int32_t id, bool render_special,
                    char *out, size_t cap, size_t *n_out);
/* The output is always valid UTF-8: malformed byte sequences become U+FFFD.
 * On LLMK_BUFFER_TOO_SMALL *n_out is the size needed and the state is left
 * unchanged, so the call can be repeated with a bigger buffer. To decode a
 * continuation (e.g. generated tokens after a prompt) start with started =
 * true so a SentencePiece leading space is kept. */
/* Emit whatever is still pending (an incomplete UTF-8 tail becomes U+FFFD). */
LLMK_API int llmk_detok_flush(const llmk_tokenizer *t, llmk_detok_state *st, char *out, size_t cap,
                     size_t *n_out);
/* LLMK_SECTION_TOKENIZER_END */

/* ======================================================================== */
/* 5. Model and session                                                      */
/* ======================================================================== */
/* LLMK_SECTION_MODEL_BEGIN */
/* A model: hyperparameters from GGUF metadata, weights as read-only views into
 * the file's mapping (nothing copied), and its tokenizer. Architectures:
 * "llama" (incl. Llama-3 rope frequency factors), "qwen2" (Q/K/V biases),
 * "qwen3" (per-head Q/K RMSNorm). Every tensor's type and shape is checked at
 * load against the architecture; see docs/model.md. */
typedef struct llmk_model llmk_model;

enum llmk_rope_scaling {
    LLMK_ROPE_SCALING_NONE = 0,
    LLMK_ROPE_SCALING_LINEAR = 1, /* positions divided by rope_scale_factor */
    LLMK_ROPE_SCALING_LLAMA3 = 2, /* Llama-3.1 per-frequency smoothing */
    LLMK_ROPE_SCALING_YARN = 3    /* YaRN: interpolated and extrapolated frequencies blended by a ramp */
};

typedef struct llmk_hparams {
    const char *arch;        /* general.architecture ("llama", "qwen2", "qwen3", "qwen3moe", "gemma3", "gpt-oss") */
    int32_t n_layer;         /* <arch>.block_count */
    int32_t n_embd;          /* <arch>.embedding_length */
    int32_t n_head;          /* <arch>.attention.head_count */
    int32_t n_head_kv;       /* <arch>.attention.head_count_kv (default n_head) */
    int32_t head_dim;        /* <arch>.attention.key_length (default n_embd / n_head) */
    int32_t n_rot;           /* <arch>.rope.dimension_count (default head_dim) */
    int32_t n_ff;            /* <arch>.feed_forward_length */
    int32_t n_vocab;         /* token_embd.weight's second dimension */
    int32_t n_ctx_train;     /* <arch>.context_length */
    double rms_eps;          /* <arch>.attention.layer_norm_rms_epsilon */
    double rope_theta;       /* <arch>.rope.freq_base (default 10000) */
    int32_t rope_scaling;    /* enum llmk_rope_scaling */
    double rope_scale_factor;      /* <arch>.rope.scaling.factor (1 if none) */
    int32_t rope_orig_ctx;         /* <arch>.rope.scaling.original_context_length */
    double rope_low_freq_factor;   /* llama3 only (default 1) */
    double rope_high_freq_factor;  /* llama3 only (default 4) */
    bool rope_neox;          /* split-half rotation (qwen2/3); false: adjacent pairs (llama GGUF) */
    bool has_rope_freqs;     /* rope_freqs.weight divides each frequency */
    bool tied_output;        /* no output.weight: the LM head is token_embd */
    bool has_qkv_bias;       /* blk.N.attn_{q,k,v}.bias */
    bool has_qk_norm;        /* blk.N.attn_{q,k}_norm.weight */
    /* gemma3 (defaults elsewhere: no window, 1/sqrt(head_dim), no scale,
     * no cap, SiLU, no post-norms) */
    int32_t n_swa;           /* <arch>.attention.sliding_window: keys a sliding layer sees (0: none) */
    int32_t swa_pattern;     /* <arch>.attention.sliding_window_pattern (gemma3 default 6): layer il
                              * slides when il % pattern < pattern - 1 */
    double rope_theta_swa;   /* <arch>.rope.freq_base_swa (default 10000): sliding layers' base, unscaled */
    double attn_scale;       /* query scale before the softmax */
    double embd_scale;       /* token embeddings times this (gemma: sqrt(n_embd)) */
    double logit_softcap;    /* <arch>.final_logit_softcapping: logits = c tanh(l / c) (0: none) */
    bool ffn_gelu;           /* gated FFN with GELU (tanh form) instead of SiLU */
    bool has_post_norms;     /* blk.N.post_attention_norm / post_ffw_norm on each branch's output */
    /* YaRN (rope_scaling YARN) and gpt-oss */
    double rope_yarn_beta_fast;  /* <arch>.rope.scaling.yarn_beta_fast (default 32) */
    double rope_yarn_beta_slow;  /* <arch>.rope.scaling.yarn_beta_slow (default 1) */
    double rope_attn_factor;     /* cos and sin multiplied by this (YaRN's attention factor; else 1) */
    bool has_attn_sinks;     /* blk.N.attn_sinks.weight: a per-head logit in each softmax's denominator */
    bool has_o_bias;         /* blk.N.attn_output.bias */
} llmk_hparams;

/* Open, validate and map a GGUF model. On failure *out is NULL. A tokenizer
 * that fails to load does not fail the model (logits need none): the failure
 * is kept and returned by llmk_model_tokenizer. */
LLMK_API int llmk_model_load(const char *path, llmk_model **out);
/* The same from a GGUF image already in memory (no copy: `data` must outlive
 * the model). Used by the fuzz target and by tests. */
LLMK_API int llmk_model_load_memory(const void *data, size_t size, llmk_model **out);
LLMK_API void llmk_model_free(llmk_model *m);
LLMK_API const llmk_hparams *llmk_model_hparams(const llmk_model *m);
LLMK_API const llmk_gguf *llmk_model_gguf(const llmk_model *m);
/* The model's tokenizer, or the status and message of its load failure. */
LLMK_API int llmk_model_tokenizer(const llmk_model *m, const llmk_tokenizer **out);

/* Decode paths. REF: the seed-000 f64 reference (slow, memory-hungry).
 * F32: f32 with weights dequantized row by row inside the matvec.
 * FAST: the model compiled into fused phases, run by the persistent-worker
 * executor on quantized activations (src/program.c, src/exec_cpu.c). */
enum llmk_path { LLMK_PATH_REF = 0, LLMK_PATH_F32 = 1, LLMK_PATH_FAST = 2 };
/* Name -> path ("ref", "f32", "fast"); LLMK_INVALID_ARGUMENT otherwise. */
LLMK_API int llmk_path_from_name(const char *name, int *path_out);

/* Progress of a session's or context's init. Loading a model maps the file
 * and checks it without reading the weights (some 20 ms whatever its size);
 * the init is where the time goes, because the fast path repacks the
 * weights into its kernels' layouts and so reads the whole file (0.2-0.9 s
 * for SmolLM2-135M on two cores; far longer for a large model or a cold
 * disk). The callback runs on the calling thread with a fraction in [0, 1]
 * that never decreases: 0 before the repacking, more after each phase's
 * weights, and 1 last, once the init has succeeded (on the ref and f32
 * paths, which repack nothing, only the 1). Returning false cancels: the
 * init frees what it made and fails with LLMK_INTERRUPTED. */
typedef bool (*llmk_progress_callback)(float fraction, void *user_data);

/* A session: one sequence's KV cache, scratch and worker pool, all allocated
 * at init (nothing per token). Zero-initialise, then set what you need. */
typedef struct llmk_session_params {
    int32_t n_ctx;     /* KV capacity in tokens; <= 0: the model's n_ctx_train */
    int32_t n_threads; /* <= 0: one per online CPU */
    int32_t path;      /* enum llmk_path */
    int32_t n_batch;   /* tokens per forward chunk; <= 0: 32 on ref and f32, 512 on fast.
                        * Results do not depend on it. */
    uint32_t kv_type;  /* KV cache element type: 0 (llmk_config.kv_type, LLMK_TYPE_F32 unless
                        * configured), LLMK_TYPE_F32, LLMK_TYPE_F16 or LLMK_TYPE_Q8_0
                        * (fast path only; q8_0 needs head_dim % 32 == 0) */
    bool allow_long_ctx; /* n_ctx above the model's n_ctx_train: refused
                          * (LLMK_CONTEXT_OVER_TRAIN) unless this is set */
    uint64_t mem_limit;  /* bytes the KV cache and scratch may take; 0: the
                          * machine's memory. Checked before allocating
                          * (LLMK_OUT_OF_MEMORY names the figures). */
    llmk_progress_callback progress_callback; /* NULL: none */
    void *progress_callback_user_data;        /* its second argument */
} llmk_session_params;
typedef struct llmk_session llmk_session;

LLMK_API int llmk_session_init(const llmk_model *m, const llmk_session_params *p, llmk_session **out);
LLMK_API void llmk_session_free(llmk_session *s);
/* Append n tokens at the current position and advance it. logits may be NULL
 * (no LM head is run); otherwise it receives n_vocab floats for the last
 * token, or n x n_vocab (row per token) when all_positions is true;
 * logits_cap is its length in floats. LLMK_INVALID_TOKEN for an id outside
 * the vocabulary, LLMK_CONTEXT_FULL when pos + n > n_ctx; on any failure the
 * position is unchanged. Results are bitwise identical however the tokens
 * are split across calls and whatever the thread count. */
LLMK_API int llmk_session_eval(llmk_session *s, const int32_t *ids, size_t n, float *logits,
                      size_t logits_cap, bool all_positions);
/* The same, but out receives final hidden states instead of logits: per
 * row n_embd floats, the output of the last RMSNorm times
 * output_norm.weight (llama.cpp's result_norm), the vector the LM head
 * multiplies; no LM head runs. Embeddings pool these rows (llmk embed,
 * docs/embeddings.md). out: the last token's row, or n rows with
 * all_positions; out_cap floats; never NULL (LLMK_INVALID_ARGUMENT). On the
 * ref path computed in f64 and rounded once to f32; on the fast path they
 * are the bits its LM head quantizes, alike for any thread count or split.
 * Errors and the position as llmk_session_eval; calls of both may be mixed
 * on one session. */
LLMK_API int llmk_session_eval_hidden(llmk_session *s, const int32_t *ids, size_t n, float *out, size_t out_cap,
                                      bool all_positions);
LLMK_API int32_t llmk_session_pos(const llmk_session *s);
LLMK_API int32_t llmk_session_n_ctx(const llmk_session *s);
/* Workers the session runs on, and the name of its kernel set: the fast
 * path's (as llmk_context_kernels), "ref" or "f32" on the others. For a
 * command's verbose line; 0 and NULL for NULL. */
LLMK_API int32_t llmk_session_n_threads(const llmk_session *s);
LLMK_API const char *llmk_session_kernels(const llmk_session *s);
/* Forget every token from pos on (0 <= pos <= current position), so a chat
 * can reuse the cached prefix. */
LLMK_API int llmk_session_truncate(llmk_session *s, int32_t pos);
/* Many sequences at once (src/context.c): up to n_seq_max sequences, each
 * with its own KV cache slot, run by the fused executor (the fast path) so
 * that one call evaluates tokens of several sequences. A sequence's logits
 * are bitwise identical whatever else is in the call, which slot it has, the
 * order of the items and how its tokens are split across calls — the same
 * bits as a session on the fast path with the same KV type. */
typedef struct llmk_context_params {
    int32_t n_seq_max;   /* sequence slots, 0 .. n_seq_max - 1 (<= 0: 1; at most 1024) */
    int32_t n_ctx;       /* most tokens of one sequence (<= 0: the model's n_ctx_train, at most 4096) */
    int32_t n_kv_blocks; /* KV pool: blocks of LLMK_KV_BLOCK positions shared by all sequences
                          * (<= 0: n_seq_max x ceil(n_ctx / LLMK_KV_BLOCK), room for every
                          * sequence at full length) */
    int32_t n_batch;     /* rows per executor pass (<= 0: 512; at most 8192) */
    int32_t n_threads;   /* <= 0: one per online CPU */
    uint32_t kv_type;    /* LLMK_TYPE_F16, LLMK_TYPE_Q8_0, or 0: the configuration's (f32) */
    bool allow_long_ctx; /* as llmk_session_params */
    uint64_t mem_limit;  /* as llmk_session_params */
    llmk_progress_callback progress_callback; /* as llmk_session_params */
    void *progress_callback_user_data;
} llmk_context_params;
typedef struct llmk_context llmk_context;

/* One token of a call: appended to sequence `seq` at its next position. Items
 * of one sequence take consecutive positions in the order they are listed. */
typedef struct llmk_batch_item {
    int32_t seq;
    int32_t id;
    bool logits; /* return this position's logits */
} llmk_batch_item;

LLMK_API int llmk_context_init(const llmk_model *m, const llmk_context_params *p, llmk_context **out);
LLMK_API void llmk_context_free(llmk_context *c);
/* Evaluate n items. logits receives one row of n_vocab floats per item with
 * .logits set, in item order (logits_cap floats; may be NULL when none is
 * set). Refusals (a sequence out of range, an id outside the vocabulary, a
 * sequence past n_ctx: LLMK_CONTEXT_FULL, a small buffer) come before any
 * work; on any failure (LLMK_NAN_INPUT included) no sequence moves. */
LLMK_API int llmk_context_eval(llmk_context *c, const llmk_batch_item *items, size_t n, float *logits,
                               size_t logits_cap);
LLMK_API int32_t llmk_context_seq_pos(const llmk_context *c, int32_t seq);
/* Forget the sequence's tokens from pos on (0 <= pos <= its position); pos 0
 * frees the slot for a new sequence. */
LLMK_API int llmk_context_seq_truncate(llmk_context *c, int32_t seq, int32_t pos);
LLMK_API int32_t llmk_context_n_seq_max(const llmk_context *c);
LLMK_API int32_t llmk_context_n_ctx(const llmk_context *c);

/* A whole generation of several sequences in one call (seed 003's single
 * launch: one executor region runs every step). Entry i's sequence is fed
 * `id` at the first step (a prompt's last token, or a token already chosen),
 * then at each step the token chosen from the previous step's logits: the
 * argmax (lowest id on ties) or `sampler`'s draw. cb(user, i, token) gets
 * each chosen token on the calling thread, in order per entry; an entry ends
 * after max_tokens tokens, when cb returns nonzero, or when its sequence is
 * full. The tokens are bitwise those of one llmk_context_eval per token. On
 * a failure (LLMK_NAN_INPUT, LLMK_CACHE_CAPACITY_EXCEEDED, ...) the failing
 * step is undone; tokens already reported stay in their sequences. */
struct llmk_sampler;
typedef struct llmk_gen_seq {
    int32_t seq;
    int32_t id;                    /* fed at the first step */
    int32_t max_tokens;            /* tokens to choose, >= 1 */
    struct llmk_sampler *sampler;  /* NULL: greedy */
} llmk_gen_seq;
typedef int (*llmk_gen_callback)(void *user, size_t entry, int32_t token);
LLMK_API int llmk_context_generate(llmk_context *c, const llmk_gen_seq *seqs, size_t n, llmk_gen_callback cb,
                                   void *user);

/* Paged KV and prefix caching (docs/paged_kv.md). The KV cache is one pool
 * of blocks of LLMK_KV_BLOCK positions (every layer, K and V); a sequence
 * holds a table of blocks. A block a sequence has filled is registered under
 * its exact token prefix; when a sequence ends (truncated to 0) its
 * registered blocks stay cached (least recently used evicted first) and a
 * later sequence starting with the same tokens reuses them: the same bits as
 * computing them again. An eval that needs more blocks than are free or
 * cached fails with LLMK_CACHE_CAPACITY_EXCEEDED and moves no sequence (a
 * scheduler then preempts one). */
#define LLMK_KV_BLOCK 128
/* Start empty sequence seq (position 0) on the longest cached prefix of
 * ids[0..n): whole blocks, fewer than n tokens (the last prompt token is
 * always computed: its logits are wanted). Sets the position to *n_cached;
 * the caller then evaluates ids[*n_cached..n). LLMK_INVALID_ARGUMENT for a
 * sequence out of range or not empty; LLMK_CONTEXT_FULL when n > n_ctx. */
LLMK_API int llmk_context_seq_start(llmk_context *c, int32_t seq, const int32_t *ids, size_t n,
                                    int32_t *n_cached);
/* New blocks appending n tokens to seq would take (-1: bad arguments). */
LLMK_API int32_t llmk_context_blocks_needed(const llmk_context *c, int32_t seq, int32_t n);
typedef struct llmk_kv_info {
    int32_t block_size;             /* LLMK_KV_BLOCK */
    int32_t n_blocks;               /* n_free + n_cached + n_used */
    int32_t n_free, n_cached, n_used; /* cached: no sequence holds it, a prefix may still hit it */
    int64_t n_tokens;               /* positions held by all sequences */
    int64_t n_shared;               /* block references that cost no block (prefix sharing) */
    double pool_bytes, used_bytes, shared_bytes; /* K+V bytes, all layers */
} llmk_kv_info;
LLMK_API int llmk_context_kv_info(const llmk_context *c, llmk_kv_info *out);

/* Introspection and profiling of a context's executor, for tools (llmk
 * bench --phases, llmk info --program). The executor runs the model as a
 * program of phases ("blk.3.qkv", "lm_head"; docs/executor.md). */
LLMK_API int32_t llmk_context_n_threads(const llmk_context *c); /* workers it runs on; 0 for NULL */
/* Name of the attention/activation kernel set chosen at init ("avx2",
 * "ref", ...); NULL for NULL. Valid while the context lives. */
LLMK_API const char *llmk_context_kernels(const llmk_context *c);
/* The phase program, one line per phase (index, op, name, operands, sizes),
 * after a header line. Errors on the stream are the caller's to check. */
LLMK_API int llmk_context_describe(const llmk_context *c, FILE *f);
/* Profiling mode: every phase runs as its own parallel region and is timed.
 * Slower (a region start per phase) but bitwise identical to the fused run.
 * llmk_context_generate instead times its phases in place, the run still
 * fused (worker 0's clock, from a phase's start to the barrier after it).
 * Times accumulate, across calls, until llmk_context_reset_timings. */
LLMK_API int llmk_context_set_profiling(llmk_context *c, bool on);
LLMK_API int llmk_context_reset_timings(llmk_context *c);
LLMK_API int32_t llmk_context_n_phases(const llmk_context *c); /* 0 for NULL */
typedef struct llmk_phase_info {
    const char *name; /* "blk.3.qkv", "lm_head"; valid while the context lives */
    const char *op;   /* what the phase does: "embed", "norm_quant", "matmul", "attn", ... */
    int32_t layer;    /* -1 outside the layers */
    double ns;        /* nanoseconds spent in it in profiling mode since the last reset: wall
                       * clock, or the calling thread's CPU time with llmk_config.phase_clock_thread.
                       * The final phases (output norm, LM head, argmax) only run when logits are asked. */
} llmk_phase_info;
/* Phase i, 0 <= i < llmk_context_n_phases(c), in the order they run. */
LLMK_API int llmk_context_phase(const llmk_context *c, int32_t i, llmk_phase_info *out);

/* Continuous batching (src/engine.c, docs/batching.md): an engine owns a
 * context and serves requests (a prompt, a token budget, a sampler) that
 * come and go. Each step is one llmk_context_eval: a decode row for every
 * running request, then prompt chunks of requests still prefilling, up to
 * step_tokens tokens (chunked prefill mixed into decode). Waiting requests
 * are admitted first come, first served, when a sequence slot is free and
 * the KV pool can hold their prompt; a prompt starts on its longest cached
 * prefix. When the pool runs out mid-generation the engine preempts the
 * request seed 001's preemption score picks (most KV per token generated),
 * frees its blocks, and later recomputes it from its prompt and the tokens
 * it had generated. A request's logits, and so its tokens, are bitwise those
 * of the same request run alone: whatever else runs, in any order, after a
 * prefix-cache hit or after preemption. One thread drives an engine. */
typedef struct llmk_engine_params {
    llmk_context_params ctx; /* the context the engine owns (n_seq_max: requests running at once) */
    int32_t step_tokens;     /* tokens per step (<= 0: ctx.n_batch, or 512); at least n_seq_max */
    int32_t max_waiting;     /* requests queued beyond the running ones (<= 0: 1024) */
} llmk_engine_params;
typedef struct llmk_engine llmk_engine;

typedef struct llmk_request {
    const int32_t *prompt;          /* n_prompt >= 1 token ids, copied by submit */
    size_t n_prompt;
    int32_t max_tokens;             /* tokens to generate, >= 1; also ends when the sequence fills n_ctx */
    struct llmk_sampler *sampler;   /* NULL: greedy (the lowest id on ties); borrowed until it finishes */
    const int32_t *stop_ids;        /* tokens that end it (the token is reported), copied by submit */
    size_t n_stop;
    void *user;                     /* handed back in its events */
    struct llmk_spec *spec;         /* NULL, or speculative decoding (llmk_spec_init): each decode step
                                     * verifies its drafts in the step's batch; the same tokens. The
                                     * request's own (it keeps the drafter's state); borrowed until it
                                     * finishes */
} llmk_request;

enum llmk_finish {
    LLMK_FINISH_NONE = 0, /* more tokens follow */
    LLMK_FINISH_STOP,     /* a stop id was generated (it is this event's token) */
    LLMK_FINISH_LENGTH,   /* max_tokens generated, or the sequence reached n_ctx */
    LLMK_FINISH_ERROR,    /* the step failed for it (status): no token */
};

typedef struct llmk_token_event {
    int64_t request;      /* the id submit returned */
    void *user;           /* the request's user pointer */
    int32_t token;        /* the chosen token; -1 with LLMK_FINISH_ERROR */
    int32_t index;        /* its index among the request's generated tokens */
    enum llmk_finish finish;
    int status;           /* LLMK_OK, or why with LLMK_FINISH_ERROR */
    const float *logits;  /* n_vocab floats the token was chosen from, valid during the callback; NULL on error */
    const char *message;  /* with LLMK_FINISH_ERROR, the failure's detail (what llmk_last_error() said);
                             valid during the callback; "" otherwise */
    int32_t cached_tokens; /* prompt tokens its first admission took from the prefix cache */
} llmk_token_event;
/* Called on the driving thread for every event, in step order. A nonzero
 * return ends that request at once (as llmk_engine_cancel). */
typedef int (*llmk_engine_callback)(void *user, const llmk_token_event *ev);

LLMK_API int llmk_engine_init(const llmk_model *m, const llmk_engine_params *p, llmk_engine **out);
LLMK_API void llmk_engine_free(llmk_engine *e);
/* Queue a request; *id names it in events. Refused, with the figures, when
 * it could never run: an empty prompt or max_tokens < 1
 * (LLMK_INVALID_ARGUMENT), an id outside the vocabulary (LLMK_INVALID_TOKEN),
 * a prompt that leaves no room to generate in n_ctx (LLMK_CONTEXT_FULL), a
 * prompt plus max_tokens (up to n_ctx) that needs more KV blocks than the
 * whole pool (LLMK_CACHE_CAPACITY_EXCEEDED); LLMK_QUEUE_FULL when
 * max_waiting requests already wait. */
LLMK_API int llmk_engine_submit(llmk_engine *e, const llmk_request *r, int64_t *id);
/* One step: admit, run one batch, report its tokens through cb. A step whose
 * evaluation fails ends the requests in it with LLMK_FINISH_ERROR events
 * (status says why) and returns LLMK_OK; the others go on. */
LLMK_API int llmk_engine_step(llmk_engine *e, llmk_engine_callback cb, void *user);
/* Steps until no request is left. */
LLMK_API int llmk_engine_run(llmk_engine *e, llmk_engine_callback cb, void *user);
LLMK_API bool llmk_engine_idle(const llmk_engine *e); /* no request running or waiting */
/* End a request now, waiting or running, with no further event; its cached
 * prefix stays for others. LLMK_NOT_FOUND for an id not in the engine. */
LLMK_API int llmk_engine_cancel(llmk_engine *e, int64_t id);
/* The context the engine runs on (introspection, KV figures); not to be evaluated on. */
LLMK_API const llmk_context *llmk_engine_context(const llmk_engine *e);
typedef struct llmk_engine_stats {
    int32_t n_running, n_waiting;      /* now (running: holding a sequence slot) */
    int64_t n_submitted, n_finished, n_cancelled, n_preempted;
    int64_t n_steps;
    int64_t prompt_tokens;             /* prompt tokens of admitted requests */
    int64_t cached_tokens;             /* of them and of recomputations, taken from the prefix cache */
    int64_t recomputed_tokens;         /* evaluated again after a preemption */
    int64_t generated_tokens;
    int64_t prefill_chunks;            /* prompt pieces evaluated (a prompt split across steps counts each) */
    double busy_s;                     /* wall time inside steps */
    int64_t drafted_tokens;            /* speculative drafts verified */
    int64_t accepted_drafts;           /* of them, kept */
} llmk_engine_stats;
LLMK_API int llmk_engine_stats_get(const llmk_engine *e, llmk_engine_stats *out);

/* The machine's memory read bandwidth in GB/s (1e9 bytes/s), to set a
 * decode's effective weight bandwidth against (llmk bench): n_threads
 * workers (< 1: one per online CPU) each read their share of a buffer of
 * `bytes` (0: 256 MiB; else a positive multiple of 128) with the widest
 * loads the CPU has; the best of 5 passes. Takes as long as the reads do
 * (tens of milliseconds for the default). */
LLMK_API int llmk_memory_read_bandwidth(int n_threads, size_t bytes, double *gbs_out);

/* Speculative decoding (src/spec.c, docs/speculative.md). A drafter proposes
 * the tokens that may follow a sequence; the target model evaluates the
 * pending token and the drafts in one multi-position step, the caller's
 * chooser picks a token from each row in order, and the step keeps the
 * tokens up to the first choice that differs from its draft. Every row's
 * logits are bitwise those of plain decoding (the executor's chunking
 * invariance) and the chooser runs on exactly the rows plain decoding would
 * give it, in order, so the tokens - greedy or sampled, with the sampler's
 * draw counter and penalty history - are bitwise plain decoding's. For the
 * point-mass drafts these drafters make, "choose, keep while it matches" is
 * the standard accept/resample rule: a draft d is kept with probability
 * p(d), and otherwise the token comes from p without d, renormalised. */
enum llmk_spec_mode {
    LLMK_SPEC_NONE = 0,
    LLMK_SPEC_NGRAM = 1, /* prompt lookup: continue an earlier occurrence of the context's last tokens */
    LLMK_SPEC_DRAFT = 2, /* a smaller model with the same vocabulary, greedy */
};
/* "none", "ngram" (also "lookup"), "draft" -> mode; LLMK_INVALID_ARGUMENT otherwise. */
LLMK_API int llmk_spec_mode_from_name(const char *name, int32_t *mode_out);
typedef struct llmk_spec_params {
    int32_t mode;                  /* enum llmk_spec_mode */
    int32_t draft_max;             /* most tokens drafted per step (<= 0: 16; at most 64) */
    int32_t draft_min;             /* a shorter proposal is not verified (<= 0: 1) */
    int32_t ngram_min, ngram_max;  /* prompt lookup: the shortest suffix match used, and the longest
                                    * compared (<= 0: 2, 16); the longest match wins, ties the latest */
    bool fixed_len;                /* draft draft_max every step; else the length is adapted (below) */
    const llmk_model *draft_model; /* LLMK_SPEC_DRAFT: borrowed; same vocabulary size and special ids */
    int32_t draft_n_ctx;           /* LLMK_SPEC_DRAFT: the draft model's context (<= 0: 4096) */
    int32_t draft_threads;         /* LLMK_SPEC_DRAFT: its workers (<= 0: one per online CPU) */
    struct llmk_draft_pool *draft_pool; /* LLMK_SPEC_DRAFT: a sequence of this shared context instead of a
                                    * context of its own (draft_model, draft_n_ctx, draft_threads unused) */
} llmk_spec_params;
typedef struct llmk_spec llmk_spec;
/* One draft-model context for the many drafters of an engine (llmk batch,
 * llmk serve): n_slots sequences of n_ctx tokens (<= 0: 4096, at most the
 * draft model's training context) and one worker pool, instead of a
 * context and a pool per request. A drafter takes a free sequence when it
 * first drafts and gives it back when freed; with none free it drafts
 * nothing (its tokens are the same either way). Slots are taken and given
 * back under a lock; drafting itself must come from one thread at a time
 * (the engine's step). The target checks the vocabulary as llmk_spec_init
 * does. Free it after every drafter that uses it. */
typedef struct llmk_draft_pool llmk_draft_pool;
LLMK_API int llmk_draft_pool_init(const llmk_model *target, const llmk_model *draft, int32_t n_slots, int32_t n_ctx,
                                  int32_t n_threads, llmk_draft_pool **out);
LLMK_API void llmk_draft_pool_free(llmk_draft_pool *dp);
/* LLMK_INVALID_ARGUMENT for a bad mode or lengths, or a draft model whose
 * vocabulary differs from the target's (the message names the difference). */
LLMK_API int llmk_spec_init(const llmk_model *target, const llmk_spec_params *p, llmk_spec **out);
LLMK_API void llmk_spec_free(llmk_spec *sp);
/* Prepare the drafter for a sequence that starts with ids[0..n) (a draft
 * model evaluates them, so the first draft does not pay for the prompt);
 * optional, and a no-op for prompt lookup. */
LLMK_API int llmk_spec_prefill(llmk_spec *sp, const int32_t *ids, size_t n);
/* The drafter alone: up to max tokens that may follow hist[0..n) (n >= 1). */
LLMK_API int llmk_spec_draft(llmk_spec *sp, const int32_t *hist, size_t n, int32_t max, int32_t *draft,
                             int32_t *n_draft);
/* The cost model behind the adaptive length (llmk plan prints the same):
 * drafting g tokens at per-token acceptance rate `accept`, each drafted
 * token costing draft_cost and each verified row row_cost of a plain
 * step, speeds decoding up by seed 001's llmk_draft_model_speedup with
 * llmk_speculative_expected_tokens(accept, g) tokens per step, the target
 * step being the verify of g + 1 rows (1 + g row_cost), over a plain step. */
LLMK_API double llmk_spec_predicted_speedup(double accept, int32_t g, double draft_cost, double row_cost);
/* The g in [g_min, g_max] with the highest predicted speedup, 0 when none beats 1. */
LLMK_API int32_t llmk_spec_best_len(double accept, double draft_cost, double row_cost, int32_t g_min, int32_t g_max);
/* How many tokens to draft next (0: a plain step). Unless fixed_len,
 * llmk_spec_best_len for the measured acceptance rate and step costs. */
LLMK_API int32_t llmk_spec_draft_len(const llmk_spec *sp);
/* A verify step's outcome, for the acceptance estimate and cost model:
 * n_draft tokens verified, n_accepted kept, the step took verify_s seconds
 * (draft_s drafting). Steps that verified no draft count as plain steps. */
LLMK_API void llmk_spec_feedback(llmk_spec *sp, int32_t n_draft, int32_t n_accepted, double draft_s,
                                 double verify_s);
typedef struct llmk_spec_stats {
    int64_t n_steps;        /* verify steps (plain ones included) */
    int64_t n_drafted;      /* draft tokens verified */
    int64_t n_accepted;     /* of them, kept */
    int64_t n_tokens;       /* tokens produced (accepted drafts + one per step) */
    double accept_rate;     /* the running per-token acceptance estimate */
    int32_t draft_len;      /* llmk_spec_draft_len now */
    double expected_tokens; /* llmk_speculative_expected_tokens(accept_rate, draft_len) */
    double speedup;         /* the predicted speedup over plain decoding at draft_len */
    double draft_cost, row_cost; /* the measured costs (of a plain step) the prediction uses */
    double draft_s, verify_s;
} llmk_spec_stats;
LLMK_API int llmk_spec_stats_get(const llmk_spec *sp, llmk_spec_stats *out);
/* The chooser: pick the token for one row of logits (n_vocab floats), as
 * plain decoding would (greedy, or a sampler draw and its history); *end:
 * generation ends with this token (end of generation, a budget, a stop). */
typedef int (*llmk_spec_choose_fn)(void *user, const float *logits, int32_t *token, bool *end);
/* One speculative step on a session: hist[0..n_hist) is the whole sequence,
 * its last token pending (chosen, not yet evaluated: n_hist == pos + 1).
 * Drafts up to llmk_spec_draft_len tokens (fewer near n_ctx or cap), verifies
 * them with the pending token in one eval, and writes the chosen tokens to
 * out (cap >= 1; *n_out >= 1 on success); the last one is the new pending
 * token. The session keeps the positions whose rows were chosen from. A
 * chooser's failure is returned with the session at the tokens before it. */
LLMK_API int llmk_session_spec_step(llmk_session *s, llmk_spec *sp, const int32_t *hist, size_t n_hist,
                                    llmk_spec_choose_fn choose, void *user, int32_t *out, size_t cap,
                                    size_t *n_out, bool *ended);
/* LLMK_SECTION_MODEL_END */

/* ======================================================================== */
/* 6. Sampling                                                               */
/* ======================================================================== */
/* LLMK_SECTION_SAMPLING_BEGIN */
/* Sampler chain over the full vocabulary (src/sample.c). Logit bias is
 * applied first, then the stages in `order`; each stage calls its seed-001
 * formula. Temperature <= 0 picks the maximum (ties: lowest id) after the
 * stages before temperature. The draw uses a counter-based RNG: draw number
 * `step` of a sampler depends only on (seed, step), so the same seed and
 * logits give the same tokens on any thread count. docs/sampling.md. */
enum llmk_sampler_stage {
    LLMK_STAGE_PENALTIES = 0,   /* repetition, frequency, presence over the last N tokens */
    LLMK_STAGE_TEMPERATURE = 1,
    LLMK_STAGE_TOP_K = 2,
    LLMK_STAGE_MIN_P = 3,
    LLMK_STAGE_TOP_P = 4,
    LLMK_STAGE_TYPICAL_P = 5,
    LLMK_STAGE_ETA = 6,
    LLMK_STAGE_COUNT_ = 7 /* not a stage */
};
#define LLMK_SAMPLER_MAX_STAGES 16
/* Default order: seed 001's production arm. */
#define LLMK_SAMPLER_DEFAULT_ORDER "penalties;temperature;top_k;min_p;top_p"

typedef struct llmk_logit_bias {
    int32_t id;
    float bias; /* added to the logit; -INFINITY bans the token */
} llmk_logit_bias;

typedef struct llmk_sampler_params {
    double temperature;       /* 0.8; <= 0: greedy */
    int32_t top_k;            /* 40; <= 0: off */
    double top_p;             /* 0.95; >= 1: off */
    double min_p;             /* 0.05; <= 0: off */
    double typical_p;         /* 1.0 (off); in (0, 1) keeps the most typical mass */
    double eta;               /* eta sampling epsilon; 0 (off) */
    double repeat_penalty;    /* 1.0 (off) */
    int32_t repeat_last_n;    /* 64; window of the penalties; 0 disables them */
    double frequency_penalty; /* 0 (off) */
    double presence_penalty;  /* 0 (off) */
    int64_t seed;             /* -1: random (read it back with llmk_sampler_seed) */
    const llmk_logit_bias *bias; /* borrowed until llmk_sampler_init returns (copied) */
    size_t n_bias;
    uint8_t order[LLMK_SAMPLER_MAX_STAGES]; /* enum llmk_sampler_stage */
    size_t n_order;
} llmk_sampler_params;

/* The defaults above (close to llama.cpp's), order = LLMK_SAMPLER_DEFAULT_ORDER. */
LLMK_API void llmk_sampler_params_default(llmk_sampler_params *p);
/* Parse a stage list: names separated by ';' or ',' (penalties, temperature
 * (temp), top_k, min_p, top_p, typical_p (typ_p), eta), or one letter each
 * ("e t k m p y a" as in "etkmp"). Replaces p->order; LLMK_BAD_SAMPLER_CONFIG
 * names an unknown stage. */
LLMK_API int llmk_sampler_parse_order(const char *spec, llmk_sampler_params *p);
LLMK_API const char *llmk_sampler_stage_name(int stage); /* "top_k", ...; "?" if none */

typedef struct llmk_sampler llmk_sampler;
/* Validates the parameters (LLMK_BAD_SAMPLER_CONFIG names the bad one) and
 * allocates all scratch for an n_vocab vocabulary once. */
LLMK_API int llmk_sampler_init(const llmk_sampler_params *p, size_t n_vocab, llmk_sampler **out);
LLMK_API void llmk_sampler_free(llmk_sampler *s);
LLMK_API uint64_t llmk_sampler_seed(const llmk_sampler *s); /* the seed in use (the random one for -1) */
/* Forget the token history and restart the draw counter at 0. */
LLMK_API void llmk_sampler_reset(llmk_sampler *s);
/* Record a token in the penalty history (generated tokens; callers may also
 * feed prompt tokens). LLMK_INVALID_TOKEN for an id outside the vocabulary. */
LLMK_API int llmk_sampler_accept(llmk_sampler *s, int32_t id);
/* Run the chain on a row of n logits (n == n_vocab) and draw one token; the
 * draw counter advances by one. NaN logits are LLMK_NAN_INPUT. */
LLMK_API int llmk_sampler_sample(llmk_sampler *s, const float *logits, size_t n, int32_t *id_out);

/* The candidates left after the chain (no draw, counter unchanged), with
 * probabilities normalised over them, in the order the draw walks them.
 * Points into the sampler; valid until its next call. For tests and tools. */
typedef struct llmk_token_prob {
    int32_t id;
    double logit; /* after penalties / temperature */
    double p;
} llmk_token_prob;
LLMK_API int llmk_sampler_candidates(llmk_sampler *s, const float *logits, size_t n,
                            const llmk_token_prob **cands, size_t *n_cands);

/* The counter-based generator: 64 random bits / a double in [0, 1) that
 * depend only on (seed, step) (splitmix64's output at position `step`). */
LLMK_API uint64_t llmk_rng_u64(uint64_t seed, uint64_t step);
LLMK_API double llmk_rng_uniform(uint64_t seed, uint64_t step);

/* Streaming stop-string matcher: text goes in piece by piece; text that may
 * still become a stop string is held back; a completed stop string and all
 * after it are never emitted. */
typedef struct llmk_stop_matcher llmk_stop_matcher;
LLMK_API int llmk_stop_init(const char *const *stops, size_t n_stops, llmk_stop_matcher **out);
LLMK_API void llmk_stop_free(llmk_stop_matcher *m);
/* Longest stop string in bytes (0 with none): feed's out needs len + this. */
LLMK_API size_t llmk_stop_max_len(const llmk_stop_matcher *m);
/* Feed len bytes; writes the bytes now safe to show to out (cap bytes,
 * *n_out). *stopped becomes true when a stop string completed: the text
 * before it has been written, the matcher holds nothing more, and further
 * feeds write nothing. */
LLMK_API int llmk_stop_feed(llmk_stop_matcher *m, const char *text, size_t len, char *out, size_t cap,
                   size_t *n_out, bool *stopped);
/* End of generation: write the held-back text (it did not become a stop string). */
LLMK_API int llmk_stop_flush(llmk_stop_matcher *m, char *out, size_t cap, size_t *n_out);
LLMK_API void llmk_stop_reset(llmk_stop_matcher *m);

/* Chat templates (src/chat.c): ChatML, Llama-3, Zephyr (TinyLlama) and
 * Llama-2 [INST], recognised from tokenizer.chat_template by their markers. */
typedef struct llmk_chat_message {
    const char *role;    /* "system", "user", "assistant" */
    const char *content;
} llmk_chat_message;

typedef struct llmk_chat_template llmk_chat_template;
/* name: "chatml", "llama3", "zephyr", "llama2", or NULL to recognise
 * template_text (LLMK_TEMPLATE_UNKNOWN with a message otherwise). The text is
 * also searched for a default system prompt the template injects when the
 * conversation has none. bos/eos: the token texts the template may use. */
LLMK_API int llmk_chat_template_init(const char *name, const char *template_text, size_t text_len,
                            const char *bos, const char *eos, llmk_chat_template **out);
/* From a GGUF file: tokenizer.chat_template, bos/eos texts from the vocabulary. */
LLMK_API int llmk_chat_template_from_gguf(const llmk_gguf *g, const char *name, llmk_chat_template **out);
LLMK_API void llmk_chat_template_free(llmk_chat_template *t);
LLMK_API const char *llmk_chat_template_name(const llmk_chat_template *t);
/* The default system prompt it injects (NULL when none). */
LLMK_API const char *llmk_chat_template_default_system(const llmk_chat_template *t);
/* Render messages; *out is malloc'd, NUL-terminated, freed by the caller. */
LLMK_API int llmk_chat_render(const llmk_chat_template *t, const llmk_chat_message *msgs, size_t n,
                     bool add_generation_prompt, char **out, size_t *out_len);
/* The template's variables beyond the messages (what chat_template_kwargs
 * carry to a Jinja template). reasoning_effort: harmony's (gpt-oss) "low",
 * "medium" or "high" (NULL: its default, medium; another value is
 * LLMK_BAD_REQUEST); date: harmony's "Current date" as YYYY-MM-DD (NULL:
 * today, local time). Templates without such a field ignore them. */
typedef struct llmk_chat_render_opts {
    bool add_generation_prompt;
    const char *reasoning_effort;
    const char *date;
} llmk_chat_render_opts;
LLMK_API int llmk_chat_render_with(const llmk_chat_template *t, const llmk_chat_message *msgs, size_t n,
                                   const llmk_chat_render_opts *opts, char **out, size_t *out_len);
/* A harmony reply (gpt-oss) by channel, token by token. The model answers
 * "<|channel|>NAME<|message|>TEXT<|end|>", more messages after
 * "<|start|>assistant", the last one closed by <|return|> or <|call|>.
 * llmk_harmony_feed says where token id's text goes: the answer's content
 * (the final and commentary channels, and text outside any message), its
 * reasoning (the analysis channel), or neither (the markers, the role and
 * channel headers). llmk_harmony_init: LLMK_NOT_FOUND when the vocabulary
 * has no harmony markers. */
typedef enum { LLMK_HARMONY_NONE, LLMK_HARMONY_CONTENT, LLMK_HARMONY_REASONING } llmk_harmony_part;
typedef struct llmk_harmony_state {
    int32_t start, channel, message, end, ret, call; /* the markers' ids (-1: absent) */
    int phase;                                       /* outside, header, channel name, body */
    bool analysis;                                   /* the message in progress is on the analysis channel */
    char chan[32];
    size_t chan_len;
    llmk_harmony_part last; /* the part of the last token that had one (llmk_harmony_text) */
} llmk_harmony_state;
LLMK_API int llmk_harmony_init(const llmk_tokenizer *t, llmk_harmony_state *st);
LLMK_API llmk_harmony_part llmk_harmony_feed(llmk_harmony_state *st, const llmk_tokenizer *t, int32_t id);
/* llmk_harmony_feed and the token's text in one step, the text streamed
 * through ds as llmk_detok_feed does (markers and headers give none): a
 * character whose bytes a marker interrupts ends there, as U+FFFD, in the
 * part it began in (*part then says which), so no part receives bytes of
 * another's. On an error (LLMK_BUFFER_TOO_SMALL: *n_out is the size needed)
 * neither state changes, so the call can be repeated. */
LLMK_API int llmk_harmony_text(llmk_harmony_state *st, const llmk_tokenizer *t, llmk_detok_state *ds, int32_t id,
                               char *out, size_t cap, size_t *n_out, llmk_harmony_part *part);

/* Parse an OpenAI-style JSON array [{"role":..,"content":..}, ...] (or an
 * object with a "messages" array). *msgs is one allocation (strings inside),
 * freed with free(). LLMK_BAD_REQUEST names what is wrong. */
LLMK_API int llmk_chat_parse_messages(const char *json, size_t len, llmk_chat_message **msgs,
                             size_t *n);
/* Grammars (src/grammar.c, docs/grammar.md): llama.cpp's GBNF format
 * (rules `name ::= alternatives`, `|`, `( )`, `* + ? {m} {m,} {m,n}`,
 * "literals" with \n \t \\ \" \xHH \uHHHH \UHHHHHHHH escapes, [a-z] and
 * [^...] classes, `.`, `#` comments; the start rule is "root"). A parsed
 * grammar is immutable and may be shared by any number of states and
 * threads. Refusals are LLMK_BAD_GRAMMAR with "line L, column C: why"
 * (undefined rules, left recursion, sizes over the limits below). */
typedef struct llmk_grammar llmk_grammar;
#define LLMK_GRAMMAR_MAX_TEXT (1 << 20)   /* bytes of grammar text */
#define LLMK_GRAMMAR_MAX_REPEAT 1000      /* m and n of {m,n} */
LLMK_API int llmk_grammar_parse(const char *text, size_t len, llmk_grammar **out);
LLMK_API void llmk_grammar_free(llmk_grammar *g);
/* Match bytes directly against the grammar (no vocabulary; for tests and
 * tools): *complete when they are a whole string of the grammar, *prefix
 * when they can be continued into one (a trailing incomplete UTF-8
 * character included). A status only for limits (too ambiguous) and memory. */
LLMK_API int llmk_grammar_match(const llmk_grammar *g, const char *text, size_t len, bool *complete,
                                bool *prefix);

/* One sequence's position in a grammar over a tokenizer's vocabulary. A
 * token is allowed iff its bytes (llmk_tokenizer_token_bytes) can continue
 * the text generated so far towards a string of the grammar - tokens that
 * span several grammar elements and UTF-8 characters split across tokens
 * included; an end-of-generation token only where the text so far is a
 * whole string of the grammar. The grammar and tokenizer are borrowed and
 * must outlive the state. One thread at a time per state. */
typedef struct llmk_grammar_state llmk_grammar_state;
LLMK_API int llmk_grammar_state_init(const llmk_grammar *g, const llmk_tokenizer *t, llmk_grammar_state **out);
LLMK_API void llmk_grammar_state_free(llmk_grammar_state *s);
/* A new state at the same position (its caches start empty). */
LLMK_API int llmk_grammar_state_clone(const llmk_grammar_state *s, llmk_grammar_state **out);
/* Back to the start of the grammar. */
LLMK_API void llmk_grammar_state_reset(llmk_grammar_state *s);
/* Set the logits of every token not allowed now to -INFINITY (n: the
 * vocabulary size). LLMK_BAD_GRAMMAR when no token at all is allowed. */
LLMK_API int llmk_grammar_state_mask(llmk_grammar_state *s, float *logits, size_t n);
/* Is token id allowed now? (The same answer as the mask.) */
LLMK_API bool llmk_grammar_state_allows(llmk_grammar_state *s, int32_t id);
/* Advance past a chosen token; LLMK_BAD_GRAMMAR (state unchanged) when it
 * is not allowed. After an end-of-generation token the state is ended. */
LLMK_API int llmk_grammar_state_accept(llmk_grammar_state *s, int32_t id);
/* The text so far is a whole string of the grammar. */
LLMK_API bool llmk_grammar_state_accepting(const llmk_grammar_state *s);
/* Generation must stop: an end-of-generation token was accepted, or the
 * text is complete and no byte can follow it. */
LLMK_API bool llmk_grammar_state_done(const llmk_grammar_state *s);

/* Attach a grammar state to a sampler (borrowed; NULL detaches): each
 * llmk_sampler_sample masks the row first (so greedy and seeded draws obey
 * it) and then advances the state past the token drawn; llmk_sampler_reset
 * resets it. The engine and llmk_context_generate end a sequence whose
 * sampler's grammar is done (LLMK_FINISH_STOP). */
LLMK_API int llmk_sampler_set_grammar(llmk_sampler *s, llmk_grammar_state *g);
LLMK_API llmk_grammar_state *llmk_sampler_grammar(const llmk_sampler *s);
/* LLMK_SECTION_SAMPLING_END */


/* ======================================================================== */
/* 7. Files llmk writes                                                      */
/* ======================================================================== */
/* LLMK_SECTION_OUTFILE_BEGIN */
/* Every file llmk writes goes through an outfile: the bytes go to a
 * temporary file in the target's folder (".NAME.llmk-..."), which commit
 * flushes, syncs and renames over the target; discard (or any failure)
 * removes only that temporary file. A model being read through a mapping is
 * therefore never written in place. Symlinks are followed (the file they name
 * is replaced); an existing character device or pipe (/dev/null, /dev/stdout)
 * is written in place and never removed; a directory is refused. */
typedef struct llmk_outfile llmk_outfile;
/* *same is true when a and b exist and are one file (same device and inode,
 * links followed). */
LLMK_API int llmk_path_same_file(const char *a, const char *b, bool *same);
/* The checks llmk_outfile_open makes before creating anything: path is not
 * one of inputs[0..n_inputs) (NULL entries skipped; LLMK_OUTPUT_IS_INPUT) and
 * not a directory. */
LLMK_API int llmk_output_check(const char *path, const char *const *inputs, size_t n_inputs);
LLMK_API int llmk_outfile_open(const char *path, const char *const *inputs, size_t n_inputs,
                      llmk_outfile **out);
LLMK_API FILE *llmk_outfile_stream(llmk_outfile *o);
/* The temporary file's path (NULL when writing a device in place), e.g. for a
 * signal handler that removes it. */
LLMK_API const char *llmk_outfile_temp_path(const llmk_outfile *o);
/* Flush, sync, close and rename; frees o whatever the result. A stream error
 * seen before (ferror) fails the commit and leaves the target unchanged. */
LLMK_API int llmk_outfile_commit(llmk_outfile *o);
/* Close and remove the temporary file; frees o. */
LLMK_API void llmk_outfile_discard(llmk_outfile *o);
/* LLMK_SECTION_OUTFILE_END */

/* ======================================================================== */
/* 8. Configuration                                                          */
/* ======================================================================== */
/* LLMK_SECTION_CONFIG_BEGIN */
/* The library reads no environment variable: what used to be LLMK_* levers
 * is this process-wide configuration, set by the application (the llmk
 * command fills it from the environment, app/env_config.h; `llmk info
 * --system` prints it). Set it from one thread before the work it affects. */

/* CPU features kernel dispatch may use (llmk_config.cpu_mask bits). */
enum llmk_cpu_feature {
    LLMK_CPU_AVX2 = 1u << 0, /* with FMA and F16C */
    LLMK_CPU_AVX512 = 1u << 1, /* F, BW, VL, DQ */
    LLMK_CPU_AVX512_VNNI = 1u << 2,
    LLMK_CPU_AVX512_BF16 = 1u << 3,
    LLMK_CPU_NEON = 1u << 4,
    LLMK_CPU_NEON_DOTPROD = 1u << 5,
    LLMK_CPU_ALL = 0xffffffffu
};

typedef struct llmk_config {
    uint32_t cpu_mask;      /* features kernels may use, of those the CPU has (LLMK_CPU_ALL) */
    bool ref_kernels;       /* every op on its scalar _ref kernel (false) */
    uint32_t kv_type;       /* KV cache type of an executor asked for type 0 (LLMK_TYPE_F32) */
    bool act_q8;            /* fast path: 8-bit activations for Q4_1/Q8_0 weights (false: 16-bit) */
    bool act_a8;            /* fast path: 8-bit activations into the repacked Q4_0/Q4_1 kernels, the
                             * other weights 16-bit: llama.cpp's activation precision at twice the
                             * products per integer multiply (false; not with act_q8) */
    bool repack;            /* fast path: Q4_1 repacked for the 8-bit AVX2 route (true) */
    bool portable_records;  /* fast path: K-quants repacked in the portable record forms even where
                             * the kernels read the compact ones (false; the same bits either way) */
    bool prefetch_next;     /* fast path: next matmul's first rows into L2 before a barrier (true) */
    bool phase_clock_thread; /* phase timings in thread CPU time, not wall time (false) */
    const char *f32_act;    /* fast path check mode: NULL off; "all" every matmul on f32
                             * activations and dequantized rows; else the phase kinds listed
                             * ("qkv,lm_head"). The string must outlive its use. */
} llmk_config;

LLMK_API void llmk_config_default(llmk_config *c);
/* Validate and set. cpu_mask and ref_kernels are fixed once a kernel has been
 * chosen (the first model, session or kernel call): changing them later is
 * refused with LLMK_INVALID_ARGUMENT. The rest apply to what starts after. */
LLMK_API int llmk_configure(const llmk_config *c);
LLMK_API void llmk_config_get(llmk_config *out);
/* LLMK_SECTION_CONFIG_END */

/* ======================================================================== */
/* 9. JSON Schema to grammar                                                 */
/* ======================================================================== */
/* LLMK_SECTION_JSON_SCHEMA_BEGIN */
/* Convert a JSON Schema (the schema's JSON text, len bytes) into a GBNF
 * grammar in llama.cpp's dialect whose start rule is `root`: every text the
 * grammar accepts is a JSON document the schema accepts (docs/json_schema.md
 * says which keywords are converted and where the grammar accepts less).
 * Whitespace between tokens is bounded (at most one line break, then up to
 * LLMK_JSON_SCHEMA_MAX_WS spaces or tabs per gap) so a model cannot loop in it. A keyword that the grammar cannot
 * enforce is refused, never ignored: LLMK_UNSUPPORTED with the keyword and
 * its JSON pointer ("#/properties/age: keyword \"minimum\" ..."); schema
 * text that is not a schema (bad JSON, a wrong value type, a $ref that
 * resolves to nothing) is LLMK_BAD_REQUEST. *gbnf is malloc'd and
 * NUL-terminated, freed by the caller with free(); NULL on failure.
 * gbnf_len may be NULL. The output is a function of the schema alone. */
LLMK_API int llmk_json_schema_to_gbnf(const char *schema_json, size_t len, char **gbnf, size_t *gbnf_len);
/* Schemas for the two "any JSON" modes (OpenAI's response_format
 * {"type":"json_object"} is the first). */
#define LLMK_JSON_SCHEMA_ANY_OBJECT "{\"type\":\"object\"}"
#define LLMK_JSON_SCHEMA_ANY_VALUE "{}"
#define LLMK_JSON_SCHEMA_MAX_WS 20
/* LLMK_SECTION_JSON_SCHEMA_END */

#ifdef __cplusplus
}
#endif
#endif /* LLMK_H */
