/*
 * llmk.h — the one public header of llmk, an LLM inference engine in C.
 *
 * Every function that can fail returns an `int` status from one vocabulary
 * (section 1). On failure a thread-local message with the detail is available
 * from llmk_last_error().
 *
 * Sections (each owned by one part of the library):
 *   1. Status vocabulary and errors            (src/status.c)
 *   2. Seed-000 decode primitives, f64         (src/ref/)
 *   3. Formula layer, seed 001                 (src/formulas/)
 *   4. Tensor types and codecs                 (src/codec/)
 *   5. GGUF reader and writer                  (src/gguf.c)
 *   6. Tokenizer                               (src/tokenizer.c)
 *   7. Model and session                       (src/model.c, src/session.c)
 *   8. Sampling                                (src/sample.c)
 */
#ifndef LLMK_H
#define LLMK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
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
};

/* Largest dimension any seed-000 primitive accepts (a ceiling, not a model size). */
#define LLMK_MAX_DIM (1 << 24)

/* Name of a status code ("llmk_ok", "llmk_bad_magic", ...); for a number that is
 * not a code, the name of LLMK_CODE_OUT_OF_RANGE. Never NULL. */
const char *llmk_status_name(int code);

/* Detail of the last failure on this thread ("" if none). Valid until the next
 * failing llmk call on the same thread. */
const char *llmk_last_error(void);

/* ======================================================================== */
/* 2. Seed-000 decode primitives (f64)                                       */
/* ======================================================================== */
/* LLMK_SECTION_PRIMITIVES_BEGIN */
/* LLMK_SECTION_PRIMITIVES_END */

/* ======================================================================== */
/* 3. Formula layer (seed 001)                                               */
/* ======================================================================== */
/* LLMK_SECTION_FORMULAS_BEGIN */
/* LLMK_SECTION_FORMULAS_END */

/* ======================================================================== */
/* 4. Tensor types and codecs                                                */
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
    LLMK_TYPE_COUNT_ = 40 /* one past the largest id; not a type */
};

/* Facts about a type id; all return 0 / NULL for an id llmk does not know. */
const char *llmk_type_name(uint32_t type);          /* "q4_1", "f16", ... */
uint32_t llmk_type_block_elems(uint32_t type);      /* elements per block (1 for plain types) */
uint32_t llmk_type_block_bytes(uint32_t type);      /* bytes per block */
/* Type id from a name, case-insensitive ("Q4_1", "bf16"). */
int llmk_type_from_name(const char *name, uint32_t *type_out);
/* Bytes of a row of n elements: checks the type, that n is whole blocks and
 * that the product does not overflow. */
int llmk_row_bytes(uint32_t type, uint64_t n, uint64_t *bytes_out);

/* LLMK_SECTION_CODECS_BEGIN */
/* Scalar reference conversions for one row of n elements (n whole blocks).
 * dequantize: src holds llmk_row_bytes(type, n) bytes. These are the _ref
 * kernels every fast path is tested against. */
int llmk_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n);
int llmk_quantize_row(uint32_t type, const float *src, void *dst, int64_t n);
/* LLMK_SECTION_CODECS_END */

/* ======================================================================== */
/* 5. GGUF reader and writer                                                 */
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

int llmk_gguf_open(const char *path, llmk_gguf **out);
/* Parse a GGUF image already in memory (no copy: `data` must outlive the
 * handle). Used by the fuzz target and by tests. */
int llmk_gguf_open_memory(const void *data, size_t size, llmk_gguf **out);
void llmk_gguf_close(llmk_gguf *g);

uint32_t llmk_gguf_version(const llmk_gguf *g);
uint32_t llmk_gguf_alignment(const llmk_gguf *g);
uint64_t llmk_gguf_file_size(const llmk_gguf *g);

/* Metadata, by index (0 .. n_kv-1, file order) or by key. */
size_t llmk_gguf_n_kv(const llmk_gguf *g);
const char *llmk_gguf_kv_key(const llmk_gguf *g, size_t i);
uint32_t llmk_gguf_kv_type(const llmk_gguf *g, size_t i);           /* enum llmk_gguf_type */
/* Index of a key, or -1 when absent. */
int64_t llmk_gguf_find_key(const llmk_gguf *g, const char *key);

/* Typed getters. LLMK_NOT_FOUND when the key is absent, LLMK_TYPE_MISMATCH
 * when it holds another type. Integer getters accept any integer type whose
 * value fits the requested one; get_f32/get_f64 accept either float type. */
int llmk_gguf_get_u32(const llmk_gguf *g, const char *key, uint32_t *out);
int llmk_gguf_get_i32(const llmk_gguf *g, const char *key, int32_t *out);
int llmk_gguf_get_u64(const llmk_gguf *g, const char *key, uint64_t *out);
int llmk_gguf_get_f32(const llmk_gguf *g, const char *key, float *out);
int llmk_gguf_get_f64(const llmk_gguf *g, const char *key, double *out);
int llmk_gguf_get_bool(const llmk_gguf *g, const char *key, bool *out);
int llmk_gguf_get_str(const llmk_gguf *g, const char *key, const char **s, size_t *len);
/* Arrays: element type and count; then elements by index. Nested arrays are
 * parsed and validated but only their count is exposed (no GGUF key that
 * llmk reads nests arrays). */
int llmk_gguf_get_arr(const llmk_gguf *g, const char *key, uint32_t *elem_type, uint64_t *n);
int llmk_gguf_arr_str(const llmk_gguf *g, const char *key, uint64_t i, const char **s, size_t *len);
/* Any numeric (or bool) array element converted to double. */
int llmk_gguf_arr_num(const llmk_gguf *g, const char *key, uint64_t i, double *out);

/* Tensors, in file order. */
size_t llmk_gguf_n_tensors(const llmk_gguf *g);
const llmk_tensor_info *llmk_gguf_tensor(const llmk_gguf *g, size_t i);
const llmk_tensor_info *llmk_gguf_find_tensor(const llmk_gguf *g, const char *name); /* NULL if absent */

/* Writer: collect metadata and tensors, then write a GGUF v3 file. Tensor
 * data pointers are borrowed until llmk_gguf_writer_write returns. */
typedef struct llmk_gguf_writer llmk_gguf_writer;
int llmk_gguf_writer_init(llmk_gguf_writer **out);
void llmk_gguf_writer_free(llmk_gguf_writer *w);
int llmk_gguf_writer_set_u32(llmk_gguf_writer *w, const char *key, uint32_t v);
int llmk_gguf_writer_set_i32(llmk_gguf_writer *w, const char *key, int32_t v);
int llmk_gguf_writer_set_u64(llmk_gguf_writer *w, const char *key, uint64_t v);
int llmk_gguf_writer_set_f32(llmk_gguf_writer *w, const char *key, float v);
int llmk_gguf_writer_set_bool(llmk_gguf_writer *w, const char *key, bool v);
int llmk_gguf_writer_set_str(llmk_gguf_writer *w, const char *key, const char *v);
/* Numeric array: `data` holds n little-endian elements of elem_type. */
int llmk_gguf_writer_set_arr(llmk_gguf_writer *w, const char *key, uint32_t elem_type,
                             const void *data, uint64_t n);
int llmk_gguf_writer_set_arr_str(llmk_gguf_writer *w, const char *key,
                                 const char *const *strs, uint64_t n);
/* Copy key i of an open file (any type, arrays included) into the writer. */
int llmk_gguf_writer_copy_kv(llmk_gguf_writer *w, const llmk_gguf *g, size_t i);
int llmk_gguf_writer_add_tensor(llmk_gguf_writer *w, const char *name, uint32_t type,
                                uint32_t n_dims, const uint64_t *ne, const void *data,
                                uint64_t n_bytes);
int llmk_gguf_writer_write(llmk_gguf_writer *w, const char *path);
/* LLMK_SECTION_GGUF_END */

/* ======================================================================== */
/* 6. Tokenizer                                                              */
/* ======================================================================== */
/* LLMK_SECTION_TOKENIZER_BEGIN */
/* Built from a GGUF file's tokenizer.ggml.* metadata: byte-level BPE
 * (model "gpt2", pre-tokenizer from tokenizer.ggml.pre) or SentencePiece-style
 * BPE (model "llama", with byte fallback). */
typedef struct llmk_tokenizer llmk_tokenizer;

int llmk_tokenizer_load(const llmk_gguf *g, llmk_tokenizer **out);
void llmk_tokenizer_free(llmk_tokenizer *t);

/* Encode UTF-8 text. add_bos: prepend BOS (callers usually pass
 * llmk_tokenizer_add_bos(t)); parse_special: recognise special/control token
 * texts such as "<|im_start|>" in the text (otherwise they are plain text).
 * Writes at most cap ids; *n_out is always the full count, and
 * LLMK_BUFFER_TOO_SMALL is returned when it exceeds cap. */
int llmk_tokenize(const llmk_tokenizer *t, const char *text, size_t len, bool add_bos,
                  bool parse_special, int32_t *ids, size_t cap, size_t *n_out);

size_t llmk_tokenizer_n_vocab(const llmk_tokenizer *t);
int32_t llmk_tokenizer_bos(const llmk_tokenizer *t);   /* -1 when the model has none */
int32_t llmk_tokenizer_eos(const llmk_tokenizer *t);   /* -1 when none */
int32_t llmk_tokenizer_eot(const llmk_tokenizer *t);   /* end of turn; -1 when none */
bool llmk_tokenizer_add_bos(const llmk_tokenizer *t);  /* tokenizer.ggml.add_bos_token */
/* True for ids that end generation (EOS, EOT and other end-of-generation ids). */
bool llmk_tokenizer_is_eog(const llmk_tokenizer *t, int32_t id);
/* The vocabulary entry as stored (e.g. "Ġthe", "▁the", "<0x0A>"); NULL for a bad id. */
const char *llmk_tokenizer_piece(const llmk_tokenizer *t, int32_t id, size_t *len);
/* Look up a vocabulary entry by its stored text; -1 when absent. */
int32_t llmk_tokenizer_find(const llmk_tokenizer *t, const char *piece, size_t len);

/* Detokenize as a stream: bytes of a multi-byte UTF-8 character split across
 * tokens are held back until complete. Zero-initialise the state. */
typedef struct llmk_detok_state {
    unsigned char pending[8];
    unsigned n_pending;
    bool started; /* SentencePiece: the leading space of the first piece is dropped */
} llmk_detok_state;
/* Append the text of `id` to out (at most cap bytes, *n_out written). With
 * render_special false, control tokens (BOS, <|im_end|>, ...) produce nothing. */
int llmk_detok_feed(const llmk_tokenizer *t, llmk_detok_state *st, int32_t id, bool render_special,
                    char *out, size_t cap, size_t *n_out);
/* Emit whatever is still pending (an incomplete UTF-8 tail becomes U+FFFD). */
int llmk_detok_flush(const llmk_tokenizer *t, llmk_detok_state *st, char *out, size_t cap,
                     size_t *n_out);
/* LLMK_SECTION_TOKENIZER_END */

/* ======================================================================== */
/* 7. Model and session                                                      */
/* ======================================================================== */
/* LLMK_SECTION_MODEL_BEGIN */
/* LLMK_SECTION_MODEL_END */

/* ======================================================================== */
/* 8. Sampling                                                               */
/* ======================================================================== */
/* LLMK_SECTION_SAMPLING_BEGIN */
/* LLMK_SECTION_SAMPLING_END */

#ifdef __cplusplus
}
#endif
#endif /* LLMK_H */
