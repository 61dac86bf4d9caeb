/* Tokenizer built from a GGUF file's tokenizer.ggml.* metadata.
 *
 * Two models:
 *   - byte-level BPE ("gpt2"): text is split into pre-tokens by a chain of
 *     PCRE2 regexes chosen by tokenizer.ggml.pre, each pre-token's bytes are
 *     mapped to GPT-2's printable byte alphabet, and symbol pairs are merged
 *     by merge rank (lowest first, leftmost on ties);
 *   - SentencePiece-style BPE ("llama"): spaces become U+2581, one U+2581 is
 *     prepended, and adjacent symbols are merged while the merged text is a
 *     vocabulary piece, highest score first (leftmost on ties); symbols left
 *     outside the vocabulary fall back to <0xXX> byte tokens.
 * Special tokens are cut out of the text first (leftmost, longest match).
 *
 * Input text must be valid UTF-8 (LLMK_INVALID_UTF8 otherwise, naming the
 * byte offset): the regexes work on code points, and silently replacing bytes
 * would hand the model text the caller never wrote. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "internal.h"
#include "grammar.h"

#include <pcre2.h>
#include <stdatomic.h>
#include <string.h>

/* GGUF token types (llama.cpp's numbering, a fact of the format). */
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };
enum { KIND_BPE = 1, KIND_SPM = 2 };

/* Upper bounds that keep every size computation far from overflow. */
#define MAX_VOCAB (1u << 24)
#define MAX_PIECE_LEN (1u << 16)
#define MAX_PRE_REGEX 3

/* One merge: (left id, right id) -> rank and the id of the merged piece. */
struct merge_slot {
    uint64_t key; /* (left << 32 | right) + 1; 0 = empty */
    int32_t rank;
    int32_t result;
};

struct llmk_tokenizer {
    int kind;
    size_t n_vocab;
    char *arena;       /* every piece, NUL-terminated */
    uint64_t *off;     /* piece i starts at arena + off[i] */
    uint32_t *len;     /* and has len[i] bytes */
    uint8_t *type;     /* TT_* */
    float *score;      /* SPM only */
    int32_t *vocab_ht; /* open addressing, id + 1; 0 = empty */
    size_t vocab_mask;
    struct merge_slot *merge_ht;
    size_t merge_mask;
    int32_t byte_tok[256]; /* BPE: token of each byte's alphabet char; SPM: <0xXX> */
    pcre2_code *re[MAX_PRE_REGEX];
    int n_re;
    bool ignore_merges; /* Llama 3: a pre-token that is a whole vocab entry is used as is */
    /* Special tokens (control, unknown, user-defined), grouped by first byte,
     * longest first within a group. */
    int32_t *special;
    uint32_t special_start[257];
    int32_t bos, eos, eot, unk;
    bool add_bos, add_space_prefix;
    int32_t eog[16];
    int n_eog;
    /* The grammar mask's vocabulary trie (src/grammar.c), built on first use
     * by whichever thread asks first; the tokenizer is otherwise immutable. */
    _Atomic(void *) grammar_cache;
};

/* ---- UTF-8 ------------------------------------------------------------------ */

/* Length of the well-formed UTF-8 sequence at s[0..n), or 0 when it is not
 * one (overlongs, surrogates, > U+10FFFF and truncation are all refused). */
static size_t utf8_seq_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else
        return 0;
    if (n < need) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t k = 2; k < need; k++)
        if (s[k] < 0x80 || s[k] > 0xBF) return 0;
    return need;
}

/* Code point of a sequence already known to be well-formed. */
static uint32_t utf8_decode(const unsigned char *s, size_t n) {
    if (n == 1) return s[0];
    uint32_t cp = s[0] & (0xFF >> (n + 1));
    for (size_t k = 1; k < n; k++) cp = (cp << 6) | (s[k] & 0x3F);
    return cp;
}

static size_t utf8_encode(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* GPT-2's byte alphabet: printable Latin-1 bytes stand for themselves, the
 * other 68 bytes take code points 256.. in byte order. */
static bool byte_is_printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}
static uint32_t byte_to_cp(unsigned b) {
    if (byte_is_printable(b)) return b;
    uint32_t n = 0;
    for (unsigned x = 0; x < b; x++)
        if (!byte_is_printable(x)) n++;
    return 256 + n;
}
/* Inverse map, code point -> byte, for code points below 324; -1 otherwise. */
static int cp_to_byte(uint32_t cp) {
    static int16_t table[324];
    static bool ready; /* benign: every thread computes the same table */
    if (!ready) {
        for (int i = 0; i < 324; i++) table[i] = -1;
        for (unsigned b = 0; b < 256; b++) table[byte_to_cp(b)] = (int16_t)b;
        __atomic_store_n(&ready, true, __ATOMIC_RELEASE);
    }
    return cp < 324 ? table[cp] : -1;
}

/* ---- hashing ----------------------------------------------------------------- */

static uint64_t hash_bytes(const void *p, size_t n) {
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}
static uint64_t hash_u64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

int32_t llmk_tokenizer_find(const llmk_tokenizer *t, const char *piece, size_t len) {
    if (!t || (!piece && len)) return -1;
    size_t i = hash_bytes(piece, len) & t->vocab_mask;
    for (;;) {
        int32_t v = t->vocab_ht[i];
        if (!v) return -1;
        int32_t id = v - 1;
        if (t->len[id] == len && memcmp(t->arena + t->off[id], piece, len) == 0) return id;
        i = (i + 1) & t->vocab_mask;
    }
}

static const struct merge_slot *merge_find(const llmk_tokenizer *t, int32_t a, int32_t b) {
    if (!t->merge_ht) return NULL;
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    size_t i = hash_u64(key) & t->merge_mask;
    for (;;) {
        const struct merge_slot *m = &t->merge_ht[i];
        if (!m->key) return NULL;
        if (m->key == key) return m;
        i = (i + 1) & t->merge_mask;
    }
}

/* ---- pre-tokenizers ---------------------------------------------------------- */

/* Regexes as the models' tokenizer.json define them, written for PCRE2.
 * PCRE2 10.42 still counts U+180E (now a format character) as \s, Hugging
 * Face's engine does not, so the whitespace pieces leave it out: WS1 is one
 * whitespace character, PUNCT1 one character that is not whitespace, letter or
 * number, and END_WS "no non-whitespace follows". */
#define WS1 "(?:(?!\\x{180E})\\s)"
#define PUNCT1 "(?:[^\\s\\p{L}\\p{N}]|\\x{180E})"
#define END_WS "(?!\\S|\\x{180E})"
static const char RE_GPT2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?" PUNCT1 "+|" WS1
                              "+" END_WS "|" WS1 "+";
static const char RE_DIGIT[] = "\\p{N}";
static const char RE_LLAMA3[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
                                "\\p{N}{1,3}| ?" PUNCT1 "+[\\r\\n]*|" WS1 "*[\\r\\n]+|" WS1
                                "+" END_WS "|" WS1 "+";
static const char RE_QWEN2[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
                               "\\p{N}| ?" PUNCT1 "+[\\r\\n]*|" WS1 "*[\\r\\n]+|" WS1 "+"
                               END_WS "|" WS1 "+";
/* o200k (GPT-4o, gpt-oss): a word is an optional leading non-letter, then
 * upper-case-ish letters and lower-case-ish ones (either run may come first,
 * marks join both), then an optional contraction; digits in runs of up to 3;
 * punctuation runs keep trailing newlines and slashes. */
#define O200K_UP "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define O200K_LO "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
#define O200K_CONTR "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
static const char RE_GPT4O[] = "[^\\r\\n\\p{L}\\p{N}]?" O200K_UP "*" O200K_LO "+" O200K_CONTR
                               "|[^\\r\\n\\p{L}\\p{N}]?" O200K_UP "+" O200K_LO "*" O200K_CONTR
                               "|\\p{N}{1,3}| ?" PUNCT1 "+[\\r\\n/]*|" WS1 "*[\\r\\n]+|" WS1
                               "+" END_WS "|" WS1 "+";

static const struct pre_def {
    const char *name;
    const char *re[MAX_PRE_REGEX];
    bool ignore_merges;
} pre_defs[] = {
    {"default", {RE_GPT2}, false},
    {"gpt2", {RE_GPT2}, false},
    /* SmolLM / StarCoder family: Digits(individual) then ByteLevel's GPT-2 regex. */
    {"smollm", {RE_DIGIT, RE_GPT2}, false},
    {"starcoder", {RE_DIGIT, RE_GPT2}, false},
    {"refact", {RE_DIGIT, RE_GPT2}, false},
    {"llama-bpe", {RE_LLAMA3}, true},
    {"llama3", {RE_LLAMA3}, true},
    {"qwen2", {RE_QWEN2}, false},
    {"gpt-4o", {RE_GPT4O}, false},
};

/* ---- loading ----------------------------------------------------------------- */

void llmk_tokenizer_free(llmk_tokenizer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_re; i++) pcre2_code_free(t->re[i]);
    free(t->arena);
    free(t->off);
    free(t->len);
    free(t->type);
    free(t->score);
    free(t->vocab_ht);
    free(t->merge_ht);
    free(t->special);
    llmk_grammar_vocab_free(atomic_load(&t->grammar_cache));
    free(t);
}

static int load_optional_id(const llmk_gguf *g, const char *key, size_t n_vocab, int32_t *out) {
    *out = -1;
    if (llmk_gguf_find_key(g, key) < 0) return LLMK_OK;
    uint64_t v;
    int st = llmk_gguf_get_u64(g, key, &v);
    if (st != LLMK_OK) return llmk_fail(st, "%s: %s", key, llmk_last_error());
    if (v >= n_vocab)
        return llmk_fail(LLMK_TOKENIZER_BAD_DATA, "%s = %llu, vocabulary has %zu tokens", key,
                         (unsigned long long)v, n_vocab);
    *out = (int32_t)v;
    return LLMK_OK;
}

static int load_optional_bool(const llmk_gguf *g, const char *key, bool dflt, bool *out) {
    *out = dflt;
    if (llmk_gguf_find_key(g, key) < 0) return LLMK_OK;
    int st = llmk_gguf_get_bool(g, key, out);
    if (st != LLMK_OK) return llmk_fail(st, "%s: %s", key, llmk_last_error());
    return LLMK_OK;
}

static int load_vocab(const llmk_gguf *g, llmk_tokenizer *t) {
    const char *key = "tokenizer.ggml.tokens";
    uint32_t et;
    uint64_t n;
    int st = llmk_gguf_get_arr(g, key, &et, &n);
    if (st != LLMK_OK) return llmk_fail(st, "%s: %s", key, llmk_last_error());
    if (et != LLMK_GGUF_STRING)
        return llmk_fail(LLMK_TOKENIZER_BAD_DATA, "%s holds element type %u, want strings", key,
                         et);
    if (n == 0 || n > MAX_VOCAB)
        return llmk_fail(LLMK_TOKENIZER_BAD_DATA, "%s has %llu tokens, want 1..%u", key,
                         (unsigned long long)n, MAX_VOCAB);
    t->n_vocab = (size_t)n;
    t->off = calloc(n, sizeof *t->off);
    t->len = calloc(n, sizeof *t->len);
    t->type = calloc(n, sizeof *t->type);
    if (!t->off || !t->len || !t->type)
        return llmk_fail(LLMK_OUT_OF_MEMORY, "tokenizer: %llu tokens", (unsigned long long)n);
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        st = llmk_gguf_arr_str(g, key, i, &s, &len);
        if (st != LLMK_OK) return llmk_fail(st, "%s[%llu]: %s", key, (unsigned long long)i,
                                            llmk_last_error());
        if (len > MAX_PIECE_LEN)
            return llmk_fail(LLMK_TOKENIZER_BAD_DATA, "%s[%llu] is %zu bytes, limit %u", key,
                             (unsigned long long)i, len, MAX_PIECE_LEN);
        t->off[i] = total;
        t->len[i] = (uint32_t)len;
        total += len + 1; /* <= 2^24 * (2^16 + 1): no overflow */
    }
    t->arena = malloc(total);
    if (!t->arena)
        return llmk_fail(LLMK_OUT_OF_MEMORY, "tokenizer: %llu bytes of pieces",
                         (unsigned long long)total);
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        llmk_gguf_arr_str(g, key, i, &s, &len);
        memcpy(t->arena + t->off[i], s, len);
        t->arena[t->off[i] + len] = 0;
    }
    /* Hash table at most half full; a duplicated piece keeps its lowest id. */
    size_t cap = pow2_at_least(2 * (size_t)n);
    t->vocab_ht = calloc(cap, sizeof *t->vocab_ht);
    if (!t->vocab_ht) return llmk_fail(LLMK_OUT_OF_MEMORY, "tokenizer: vocab hash of %zu", cap);
    t->vocab_mask = cap - 1;
    for (size_t id = 0; id < n; id++) {
        size_t i = hash_bytes(t->arena + t->off[id], t->len[id]) & t->vocab_mask;
        bool dup = false;
        while (t->vocab_ht[i]) {
            int32_t o = t->vocab_ht[i] - 1;
            if (t->len[o] == t->len[id] &&
                memcmp(t->arena + t->off[o], t->arena + t->off[id], t->len[id]) == 0) {
                dup = true;
                break;
            }
            i = (i + 1) & t->vocab_mask;
        }
        if (!dup) t->vocab_ht[i] = (int32_t)id + 1;
    }

    /* Token types: absent means all normal. */
    key = "tokenizer.ggml.token_type";
    for (size_t i = 0; i < n; i++) t->type[i] = TT_NORMAL;
    if (llmk_gguf_find_key(g, key) >= 0) {
        uint64_t nt;
        st = llmk_gguf_get_arr(g, key, &et, &nt);
        if (st != LLMK_OK) return llmk_fail(st, "%s: %s", key, llmk_last_error());
        if (nt != n)
            return llmk_fail(LLMK_TOKENIZER_BAD_DATA, "%s has %llu entries, %zu tokens", key,
                             (unsigned long long)nt, (size_t)n);
        for (uint64_t i = 0; i < n; i++) {
            double v;
            st = llmk_gguf_arr_num(g, key, i, &v);
            if (st != LLMK_OK) return llmk_fail(st, "%s[%llu]: %s", key,
                                                (unsigned long long)i, llmk_last_error());
            if (!(v >= 0 && v <= 6))
                return llmk_fail(LLMK_TOKENIZER_BAD_DATA, "%s[%llu] = %g, want 0..6", key,
                                 (unsigned long long)i, v);
            /* 0 (undefined) is treated as normal. */
            t->type[i] = v == 0 ? TT_NORMAL : (uint8_t)v;
        }
    }
    return LLMK_OK;
}

static int load_scores(const llmk_gguf *g, llmk_tokenizer *t) {
    const char *key = "tokenizer.ggml.scores";
    t->score = calloc(t->n_vocab, sizeof *t->score);
    if (!t->score) return llmk_fail(LLMK_OUT_OF_MEMORY, "tokenizer: %zu scores", t->n_vocab);
    if (llmk_gguf_find_key(g, key) < 0) return LLMK_OK; /* all 0: leftmost merges */
    uint32_t et;
    uint64_t n;
    int st = llmk_gguf_get_arr(g, key, &et, &n);
    if (st != LLMK_OK) return llmk_fail(st, "%s: %s", key, llmk_last_error());
    if (n != t->n_vocab)
        return llmk_fail(LLMK_TOKENIZER_BAD_DATA, "%s has %llu entries, %zu tokens", key,
                         (unsigned long long)n, t->n_vocab);
    for (uint64_t i = 0; i < n; i++) {
        double v;
        st = llmk_gguf_arr_num(g, key, i, &v);
        if (st != LLMK_OK)
            return llmk_fail(st, "%s[%llu]: %s", key, (unsigned long long)i, llmk_last_error());
        if (v != v)
            return llmk_fail(LLMK_TOKENIZER_BAD_DATA, "%s[%llu] is NaN", key,
                             (unsigned long long)i);
        t->score[i] = (float)v;
    }
    return LLMK_OK;
}

static int load_merges(const llmk_gguf *g, llmk_tokenizer *t) {
    const char *key = "tokenizer.ggml.merges";
    uint32_t et;
    uint64_t n;
    int st = llmk_gguf_get_arr(g, key, &et, &n);
    if (st == LLMK_NOT_FOUND)
        return llmk_fail(LLMK_TOKENIZER_BAD_DATA, "%s is missing (needed by model gpt2)", key);
    if (st != LLMK_OK) return llmk_fail(st, "%s: %s", key, llmk_last_error());
    if (n && et != LLMK_GGUF_STRING)
        return llmk_fail(LLMK_TOKENIZER_BAD_DATA, "%s holds element type %u, want strings", key,
                         et);
    if (n > MAX_VOCAB)
        return llmk_fail(LLMK_TOKENIZER_BAD_DATA, "%s has %llu merges, limit %u", key,
                         (unsigned long long)n, MAX_VOCAB);
    size_t cap = pow2_at_least(2 * (size_t)n);
    t->merge_ht = calloc(cap, sizeof *t->merge_ht);
    if (!t->merge_ht) return llmk_fail(LLMK_OUT_OF_MEMORY, "tokenizer: merge hash of %zu", cap);
    t->merge_mask = cap - 1;
    char *buf = malloc(2 * MAX_PIECE_LEN + 2);
    if (!buf) return llmk_fail(LLMK_OUT_OF_MEMORY, "tokenizer: merge buffer");
    for (uint64_t r = 0; r < n; r++) {
        const char *s;
        size_t len;
        st = llmk_gguf_arr_str(g, key, r, &s, &len);
        if (st != LLMK_OK) {
            free(buf);
            return llmk_fail(st, "%s[%llu]: %s", key, (unsigned long long)r, llmk_last_error());
        }
        /* "left right": the split is the first space after the first byte. */
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        size_t ll = sp ? (size_t)(sp - s) : 0, rl = sp ? len - ll - 1 : 0;
        if (!sp || rl == 0 || ll > MAX_PIECE_LEN || rl > MAX_PIECE_LEN) {
            free(buf);
            return llmk_fail(LLMK_TOKENIZER_BAD_DATA,
                             "%s[%llu] = \"%.40s\" is not two pieces separated by a space", key,
                             (unsigned long long)r, s);
        }
        int32_t a = llmk_tokenizer_find(t, s, ll), b = llmk_tokenizer_find(t, sp + 1, rl);
        memcpy(buf, s, ll);
        memcpy(buf + ll, sp + 1, rl);
        int32_t m = llmk_tokenizer_find(t, buf, ll + rl);
        if (a < 0 || b < 0 || m < 0) {
            free(buf);
            return llmk_fail(LLMK_TOKENIZER_BAD_DATA,
                             "%s[%llu] = \"%.40s\": %s is not in the vocabulary", key,
                             (unsigned long long)r, s,
                             a < 0 ? "the left piece" : b < 0 ? "the right piece"
                                                              : "the merged piece");
        }
        uint64_t k = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
        size_t i = hash_u64(k) & t->merge_mask;
        while (t->merge_ht[i].key && t->merge_ht[i].key != k) i = (i + 1) & t->merge_mask;
        if (!t->merge_ht[i].key) { /* a repeated pair keeps its first (lowest) rank */
            t->merge_ht[i].key = k;
            t->merge_ht[i].rank = (int32_t)r;
            t->merge_ht[i].result = m;
        }
    }
    free(buf);
    return LLMK_OK;
}

static int compile_pre(llmk_tokenizer *t, const char *pre, size_t pre_len) {
    const struct pre_def *d = NULL;
    for (size_t i = 0; i < LLMK_ARRAY_LEN(pre_defs); i++)
        if (strlen(pre_defs[i].name) == pre_len && memcmp(pre_defs[i].name, pre, pre_len) == 0)
            d = &pre_defs[i];
    if (!d)
        return llmk_fail(LLMK_TOKENIZER_UNSUPPORTED,
                         "tokenizer.ggml.pre = \"%.*s\" is not a pre-tokenizer llmk knows "
                         "(known: default, gpt2, smollm, starcoder, refact, llama-bpe, llama3, "
                         "qwen2, gpt-4o)",
                         (int)(pre_len > 64 ? 64 : pre_len), pre);
    t->ignore_merges = d->ignore_merges;
    for (int i = 0; i < MAX_PRE_REGEX && d->re[i]; i++) {
        int err;
        PCRE2_SIZE eoff;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)d->re[i], PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &eoff,
                                       NULL);
        if (!re) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(err, msg, sizeof msg);
            return llmk_fail(LLMK_UNSUPPORTED, "pre-tokenizer %s regex %d at offset %zu: %s",
                             d->name, i, (size_t)eoff, (const char *)msg);
        }
        pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: the interpreter is the fallback */
        t->re[t->n_re++] = re;
    }
    return LLMK_OK;
}

/* Order of special tokens inside one first-byte bucket: longest first, then
 * by id (the leftmost-longest match takes the first that fits). */
struct special_key {
    uint32_t len;
    int32_t id;
};
static int special_key_cmp(const void *pa, const void *pb) {
    const struct special_key *a = pa, *b = pb;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static int build_specials(llmk_tokenizer *t) {
    size_t n = 0;
    for (size_t i = 0; i < t->n_vocab; i++)
        if ((t->type[i] == TT_CONTROL || t->type[i] == TT_USER || t->type[i] == TT_UNKNOWN) &&
            t->len[i] > 0)
            n++;
    t->special = malloc((n ? n : 1) * sizeof *t->special);
    if (!t->special) return llmk_fail(LLMK_OUT_OF_MEMORY, "tokenizer: %zu special tokens", n);
    /* Counting sort by first byte, then each bucket sorted by length
     * (descending). qsort, not an insertion sort: a hostile vocabulary can put
     * nearly all its tokens in one bucket (200k control tokens starting with
     * '<' took 5 s to load, quadratic in their count). */
    uint32_t count[256] = {0};
    for (size_t i = 0; i < t->n_vocab; i++)
        if ((t->type[i] == TT_CONTROL || t->type[i] == TT_USER || t->type[i] == TT_UNKNOWN) &&
            t->len[i] > 0)
            count[(unsigned char)t->arena[t->off[i]]]++;
    t->special_start[0] = 0;
    for (int b = 0; b < 256; b++) t->special_start[b + 1] = t->special_start[b] + count[b];
    uint32_t fill[256];
    memcpy(fill, t->special_start, sizeof fill);
    for (size_t i = 0; i < t->n_vocab; i++)
        if ((t->type[i] == TT_CONTROL || t->type[i] == TT_USER || t->type[i] == TT_UNKNOWN) &&
            t->len[i] > 0)
            t->special[fill[(unsigned char)t->arena[t->off[i]]]++] = (int32_t)i;
    struct special_key *keys = malloc((n ? n : 1) * sizeof *keys);
    if (!keys) return llmk_fail(LLMK_OUT_OF_MEMORY, "tokenizer: %zu special tokens", n);
    for (size_t i = 0; i < n; i++) keys[i] = (struct special_key){t->len[t->special[i]], t->special[i]};
    for (int b = 0; b < 256; b++) {
        uint32_t lo = t->special_start[b], hi = t->special_start[b + 1];
        if (hi - lo > 1) qsort(keys + lo, hi - lo, sizeof *keys, special_key_cmp);
    }
    for (size_t i = 0; i < n; i++) t->special[i] = keys[i].id;
    free(keys);
    return LLMK_OK;
}

static void add_eog(llmk_tokenizer *t, int32_t id) {
    if (id < 0) return;
    for (int i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return;
    if (t->n_eog < (int)LLMK_ARRAY_LEN(t->eog)) t->eog[t->n_eog++] = id;
}

static int load(const llmk_gguf *g, llmk_tokenizer *t) {
    const char *model;
    size_t model_len;
    int st = llmk_gguf_get_str(g, "tokenizer.ggml.model", &model, &model_len);
    if (st == LLMK_NOT_FOUND)
        return llmk_fail(LLMK_TOKENIZER_UNSUPPORTED, "the file has no tokenizer.ggml.model");
    if (st != LLMK_OK) return llmk_fail(st, "tokenizer.ggml.model: %s", llmk_last_error());
    if (model_len == 4 && memcmp(model, "gpt2", 4) == 0) t->kind = KIND_BPE;
    else if (model_len == 5 && memcmp(model, "llama", 5) == 0) t->kind = KIND_SPM;
    else
        return llmk_fail(LLMK_TOKENIZER_UNSUPPORTED,
                         "tokenizer.ggml.model = \"%.*s\" is not one llmk implements "
                         "(gpt2, llama)",
                         (int)(model_len > 64 ? 64 : model_len), model);

    if ((st = load_vocab(g, t)) != LLMK_OK) return st;
    for (int b = 0; b < 256; b++) t->byte_tok[b] = -1;
    if (t->kind == KIND_BPE) {
        if ((st = load_merges(g, t)) != LLMK_OK) return st;
        const char *pre = "default";
        size_t pre_len = 7;
        if (llmk_gguf_find_key(g, "tokenizer.ggml.pre") >= 0) {
            st = llmk_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pre_len);
            if (st != LLMK_OK) return llmk_fail(st, "tokenizer.ggml.pre: %s", llmk_last_error());
        }
        if ((st = compile_pre(t, pre, pre_len)) != LLMK_OK) return st;
        for (unsigned b = 0; b < 256; b++) {
            char u[4];
            size_t n = utf8_encode(byte_to_cp(b), u);
            t->byte_tok[b] = llmk_tokenizer_find(t, u, n);
        }
    } else {
        if ((st = load_scores(g, t)) != LLMK_OK) return st;
        for (unsigned b = 0; b < 256; b++) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", b);
            t->byte_tok[b] = llmk_tokenizer_find(t, name, 6);
        }
    }
    if ((st = build_specials(t)) != LLMK_OK) return st;
    if ((st = load_optional_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos)) != LLMK_OK ||
        (st = load_optional_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos)) != LLMK_OK ||
        (st = load_optional_id(g, "tokenizer.ggml.eot_token_id", t->n_vocab, &t->eot)) != LLMK_OK ||
        (st = load_optional_id(g, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk)) != LLMK_OK)
        return st;
    if (t->unk < 0) /* no key: the vocabulary's own unknown token, if it marks one */
        for (size_t i = 0; i < t->n_vocab && t->unk < 0; i++)
            if (t->type[i] == TT_UNKNOWN) t->unk = (int32_t)i;
    if ((st = load_optional_bool(g, "tokenizer.ggml.add_bos_token", t->kind == KIND_SPM,
                                 &t->add_bos)) != LLMK_OK ||
        (st = load_optional_bool(g, "tokenizer.ggml.add_space_prefix", t->kind == KIND_SPM,
                                 &t->add_space_prefix)) != LLMK_OK)
        return st;
    if (t->kind == KIND_BPE) t->add_space_prefix = false; /* ByteLevel without prefix space */
    add_eog(t, t->eos);
    add_eog(t, t->eot);
    static const char *const end_names[] = {"<|im_end|>",    "<|eot_id|>",     "<|endoftext|>",
                                            "<|end_of_text|>", "<|eom_id|>",   "<end_of_turn>",
                                            "<|end|>",         "<|return|>",   "<|call|>"};
    int32_t end_ids[LLMK_ARRAY_LEN(end_names)];
    for (size_t i = 0; i < LLMK_ARRAY_LEN(end_names); i++) {
        int32_t id = llmk_tokenizer_find(t, end_names[i], strlen(end_names[i]));
        if (id >= 0 && !(t->type[id] == TT_CONTROL || t->type[id] == TT_USER)) id = -1;
        end_ids[i] = id;
        add_eog(t, id);
    }
    /* Harmony (gpt-oss): <|end|> closes a message, not the turn; the model
     * goes on with <|start|>assistant and its final channel, and stops at
     * <|return|> or at a tool <|call|>. Where a vocabulary has both of those,
     * <|end|> is no end of generation (as llama.cpp decides). */
    if (end_ids[7] >= 0 && end_ids[8] >= 0 && end_ids[6] >= 0) {
        int w = 0;
        for (int i = 0; i < t->n_eog; i++)
            if (t->eog[i] != end_ids[6]) t->eog[w++] = t->eog[i];
        t->n_eog = w;
    }
    return LLMK_OK;
}

int llmk_tokenizer_load(const llmk_gguf *g, llmk_tokenizer **out) {
    llmk_error_clear();
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_tokenizer_load: out is NULL");
    *out = NULL;
    if (!g) return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_tokenizer_load: file is NULL");
    llmk_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return llmk_fail(LLMK_OUT_OF_MEMORY, "tokenizer: %zu bytes", sizeof *t);
    int st = load(g, t);
    if (st != LLMK_OK) {
        llmk_tokenizer_free(t);
        return st;
    }
    *out = t;
    return LLMK_OK;
}

/* ---- accessors --------------------------------------------------------------- */

size_t llmk_tokenizer_n_vocab(const llmk_tokenizer *t) { return t ? t->n_vocab : 0; }
int32_t llmk_tokenizer_bos(const llmk_tokenizer *t) { return t ? t->bos : -1; }
int32_t llmk_tokenizer_eos(const llmk_tokenizer *t) { return t ? t->eos : -1; }
int32_t llmk_tokenizer_eot(const llmk_tokenizer *t) { return t ? t->eot : -1; }
bool llmk_tokenizer_add_bos(const llmk_tokenizer *t) { return t && t->add_bos; }

bool llmk_tokenizer_is_eog(const llmk_tokenizer *t, int32_t id) {
    if (!t) return false;
    for (int i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return true;
    return false;
}

const char *llmk_tokenizer_piece(const llmk_tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || (size_t)id >= t->n_vocab) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = t->len[id];
    return t->arena + t->off[id];
}

int llmk_tokenizer_token_type(const llmk_tokenizer *t, int32_t id) {
    llmk_error_clear();
    if (!t || id < 0 || (size_t)id >= t->n_vocab) return 0;
    return t->type[id];
}

/* ---- encoding ---------------------------------------------------------------- */

/* Per-call state: the caller's output and growable scratch for one word. */
struct enc {
    const llmk_tokenizer *t;
    int32_t *ids;
    size_t cap, n;
    /* symbol list */
    int32_t *sym_id;
    int32_t *prev, *next;
    uint32_t *sym_off, *sym_len; /* SPM: byte span of each symbol */
    struct cand *heap;
    size_t heap_n, sym_cap, heap_cap;
    char *buf; /* mapped / normalised text */
    size_t buf_cap;
    pcre2_match_data *md[MAX_PRE_REGEX];
};

struct cand {
    double key; /* lower first: BPE rank, or minus the SPM score */
    int32_t l, r;
    int32_t idl, idr; /* BPE: the ids the pair had when queued (stale check) */
    uint32_t lenl, lenr; /* SPM: the lengths the pair had when queued */
};

static void push_id(struct enc *e, int32_t id) {
    if (e->n < e->cap) e->ids[e->n] = id;
    e->n++;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return LLMK_OK;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return llmk_fail(LLMK_OUT_OF_MEMORY, "tokenizer: scratch of %zu x %zu bytes", c, elem);
    *p = q;
    *cap = c;
    return LLMK_OK;
}

static int ensure_syms(struct enc *e, size_t n) {
    if (n <= e->sym_cap) return LLMK_OK;
    size_t c = e->sym_cap ? e->sym_cap : 64;
    while (c < n) c *= 2;
    void *a = realloc(e->sym_id, c * sizeof(int32_t));
    if (a) e->sym_id = a;
    void *b = realloc(e->prev, c * sizeof(int32_t));
    if (b) e->prev = b;
    void *d = realloc(e->next, c * sizeof(int32_t));
    if (d) e->next = d;
    void *f = realloc(e->sym_off, c * sizeof(uint32_t));
    if (f) e->sym_off = f;
    void *h = realloc(e->sym_len, c * sizeof(uint32_t));
    if (h) e->sym_len = h;
    if (!a || !b || !d || !f || !h)
        return llmk_fail(LLMK_OUT_OF_MEMORY, "tokenizer: %zu symbols", c);
    e->sym_cap = c;
    return LLMK_OK;
}

static bool cand_less(const struct cand *a, const struct cand *b) {
    return a->key < b->key || (a->key == b->key && a->l < b->l);
}

static int heap_push(struct enc *e, struct cand c) {
    int st = grow((void **)&e->heap, &e->heap_cap, e->heap_n + 1, sizeof *e->heap);
    if (st != LLMK_OK) return st;
    size_t i = e->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &e->heap[p])) break;
        e->heap[i] = e->heap[p];
        i = p;
    }
    e->heap[i] = c;
    return LLMK_OK;
}

static struct cand heap_pop(struct enc *e) {
    struct cand top = e->heap[0], last = e->heap[--e->heap_n];
    size_t i = 0, n = e->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && cand_less(&e->heap[c + 1], &e->heap[c])) c++;
        if (!cand_less(&e->heap[c], &last)) break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (n) e->heap[i] = last;
    return top;
}

static int bpe_queue(struct enc *e, int32_t l, int32_t r) {
    int32_t a = e->sym_id[l], b = e->sym_id[r];
    if (a < 0 || b < 0) return LLMK_OK;
    const struct merge_slot *m = merge_find(e->t, a, b);
    if (!m) return LLMK_OK;
    struct cand c = {.key = m->rank, .l = l, .r = r, .idl = a, .idr = b};
    return heap_push(e, c);
}

/* One pre-token of byte-level BPE. */
static int bpe_word(struct enc *e, const unsigned char *s, size_t n) {
    const llmk_tokenizer *t = e->t;
    if (n == 0) return LLMK_OK;
    if (n > INT32_MAX / 2)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "tokenizer: a %zu-byte pre-token", n);
    if (t->ignore_merges && n <= MAX_PIECE_LEN) {
        int st = grow((void **)&e->buf, &e->buf_cap, 2 * n, 1);
        if (st != LLMK_OK) return st;
        size_t m = 0;
        for (size_t i = 0; i < n; i++) m += utf8_encode(byte_to_cp(s[i]), e->buf + m);
        int32_t id = llmk_tokenizer_find(t, e->buf, m);
        if (id >= 0) {
            push_id(e, id);
            return LLMK_OK;
        }
    }
    int st = ensure_syms(e, n);
    if (st != LLMK_OK) return st;
    for (size_t i = 0; i < n; i++) {
        e->sym_id[i] = t->byte_tok[s[i]];
        e->prev[i] = (int32_t)i - 1;
        e->next[i] = (int32_t)i + 1;
    }
    e->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if ((st = bpe_queue(e, (int32_t)i, (int32_t)i + 1)) != LLMK_OK) return st;
    while (e->heap_n) {
        struct cand c = heap_pop(e);
        /* Stale: the left symbol was absorbed or changed, or its neighbour did. */
        if (e->sym_id[c.l] != c.idl || e->next[c.l] != c.r || e->sym_id[c.r] != c.idr) continue;
        e->sym_id[c.l] = merge_find(t, c.idl, c.idr)->result;
        e->sym_id[c.r] = -2; /* dead */
        int32_t nr = e->next[c.r];
        e->next[c.l] = nr;
        if (nr < (int32_t)n) e->prev[nr] = c.l;
        if (e->prev[c.l] >= 0 && (st = bpe_queue(e, e->prev[c.l], c.l)) != LLMK_OK) return st;
        if (nr < (int32_t)n && (st = bpe_queue(e, c.l, nr)) != LLMK_OK) return st;
    }
    for (int32_t i = 0; i < (int32_t)n; i = e->next[i]) {
        if (e->sym_id[i] >= 0) push_id(e, e->sym_id[i]);
        else if (t->unk >= 0) push_id(e, t->unk); /* a byte the vocabulary lacks */
    }
    return LLMK_OK;
}

/* Split s[0..n) with pre-tokenizer regex `level` and pass every match and every
 * gap between matches on to the next level (HF's "Isolated" split). */
static int pre_split(struct enc *e, int level, const unsigned char *s, size_t n) {
    if (level == e->t->n_re) return bpe_word(e, s, n);
    pcre2_code *re = e->t->re[level];
    pcre2_match_data *md = e->md[level];
    size_t pos = 0, start = 0;
    int st;
    while (start < n) {
        int rc = pcre2_match(re, s, n, start, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
            rc = pcre2_match(re, s, n, start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0)
            return llmk_fail(LLMK_UNSUPPORTED, "pre-tokenizer regex %d failed with PCRE2 error %d "
                             "at byte %zu of a %zu-byte piece", level, rc, start, n);
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me <= ms) { /* empty match: step over one character */
            start = ms + 1;
            while (start < n && (s[start] & 0xC0) == 0x80) start++;
            continue;
        }
        if (ms > pos && (st = pre_split(e, level + 1, s + pos, ms - pos)) != LLMK_OK) return st;
        if ((st = pre_split(e, level + 1, s + ms, me - ms)) != LLMK_OK) return st;
        pos = start = me;
    }
    if (pos < n) return pre_split(e, level + 1, s + pos, n - pos);
    return LLMK_OK;
}

static int spm_queue(struct enc *e, int32_t l, int32_t r) {
    const llmk_tokenizer *t = e->t;
    int32_t id = llmk_tokenizer_find(t, e->buf + e->sym_off[l], e->sym_len[l] + e->sym_len[r]);
    if (id < 0 || (t->type[id] != TT_NORMAL && t->type[id] != TT_USER)) return LLMK_OK;
    struct cand c = {.key = -(double)t->score[id], .l = l, .r = r,
                     .lenl = e->sym_len[l], .lenr = e->sym_len[r]};
    return heap_push(e, c);
}

/* One raw fragment of SentencePiece BPE. */
static int spm_fragment(struct enc *e, const unsigned char *s, size_t n, bool prefix) {
    const llmk_tokenizer *t = e->t;
    if (n == 0) return LLMK_OK;
    if (n > (INT32_MAX - 3) / 3)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "tokenizer: a %zu-byte text fragment", n);
    int st = grow((void **)&e->buf, &e->buf_cap, 3 * n + 3, 1);
    if (st != LLMK_OK) return st;
    size_t m = 0;
    if (prefix) {
        memcpy(e->buf, "\xE2\x96\x81", 3);
        m = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(e->buf + m, "\xE2\x96\x81", 3);
            m += 3;
        } else
            e->buf[m++] = (char)s[i];
    }
    if ((st = ensure_syms(e, m)) != LLMK_OK) return st;
    int32_t ns = 0;
    for (size_t i = 0; i < m;) {
        size_t cl = utf8_seq_len((const unsigned char *)e->buf + i, m - i);
        if (!cl) cl = 1; /* cannot happen: the text was validated */
        e->sym_off[ns] = (uint32_t)i;
        e->sym_len[ns] = (uint32_t)cl;
        e->prev[ns] = ns - 1;
        e->next[ns] = ns + 1;
        ns++;
        i += cl;
    }
    e->heap_n = 0;
    for (int32_t i = 0; i + 1 < ns; i++)
        if ((st = spm_queue(e, i, i + 1)) != LLMK_OK) return st;
    while (e->heap_n) {
        struct cand c = heap_pop(e);
        if (e->sym_len[c.l] != c.lenl || e->next[c.l] != c.r || e->sym_len[c.r] != c.lenr)
            continue;
        e->sym_len[c.l] += e->sym_len[c.r];
        e->sym_len[c.r] = 0; /* dead */
        int32_t nr = e->next[c.r];
        e->next[c.l] = nr;
        if (nr < ns) e->prev[nr] = c.l;
        if (e->prev[c.l] >= 0 && (st = spm_queue(e, e->prev[c.l], c.l)) != LLMK_OK) return st;
        if (nr < ns && (st = spm_queue(e, c.l, nr)) != LLMK_OK) return st;
    }
    for (int32_t i = 0; i < ns; i = e->next[i]) {
        const char *p = e->buf + e->sym_off[i];
        int32_t id = llmk_tokenizer_find(t, p, e->sym_len[i]);
        if (id >= 0 && (t->type[id] == TT_NORMAL || t->type[id] == TT_USER)) {
            push_id(e, id);
            continue;
        }
        for (uint32_t k = 0; k < e->sym_len[i]; k++) { /* byte fallback */
            int32_t b = t->byte_tok[(unsigned char)p[k]];
            if (b >= 0) push_id(e, b);
            else if (t->unk >= 0) {
                push_id(e, t->unk); /* one <unk> for the whole symbol */
                break;
            }
        }
    }
    return LLMK_OK;
}

/* The longest special token that starts at s[0..n) and may match, or -1. */
static int32_t match_special(const llmk_tokenizer *t, const unsigned char *s, size_t n,
                             bool parse_special) {
    for (uint32_t i = t->special_start[s[0]]; i < t->special_start[s[0] + 1]; i++) {
        int32_t id = t->special[i];
        /* User-defined tokens are always whole tokens (as in HF's non-special
         * added tokens); control and unknown ones only when asked. */
        if (t->type[id] != TT_USER && !parse_special) continue;
        if (t->len[id] <= n && memcmp(t->arena + t->off[id], s, t->len[id]) == 0) return id;
    }
    return -1;
}

static int encode_raw(struct enc *e, const unsigned char *s, size_t n, bool after_special) {
    if (n == 0) return LLMK_OK;
    if (e->t->kind == KIND_SPM) return spm_fragment(e, s, n, e->t->add_space_prefix && after_special);
    return pre_split(e, 0, s, n);
}

static int encode(struct enc *e, const unsigned char *s, size_t n, bool add_bos,
                  bool parse_special) {
    const llmk_tokenizer *t = e->t;
    if (add_bos && t->bos >= 0) push_id(e, t->bos);
    size_t frag = 0;
    bool after_special = true; /* the text start counts as a boundary */
    int st;
    for (size_t i = 0; i < n;) {
        int32_t id = match_special(t, s + i, n - i, parse_special);
        if (id < 0) {
            i++;
            continue;
        }
        if ((st = encode_raw(e, s + frag, i - frag, after_special)) != LLMK_OK) return st;
        push_id(e, id);
        after_special = true;
        i += t->len[id];
        frag = i;
    }
    if (frag < n) return encode_raw(e, s + frag, n - frag, after_special);
    return LLMK_OK;
}

int llmk_tokenize(const llmk_tokenizer *t, const char *text, size_t len, bool add_bos,
                  bool parse_special, int32_t *ids, size_t cap, size_t *n_out) {
    llmk_error_clear();
    if (n_out) *n_out = 0;
    if (!t || !n_out || (!text && len) || (!ids && cap))
        return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_tokenize: NULL tokenizer, text (len %zu), "
                         "ids (cap %zu) or n_out", len, cap);
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        size_t cl = utf8_seq_len(s + i, len - i);
        if (!cl)
            return llmk_fail(LLMK_INVALID_UTF8,
                             "text is not valid UTF-8 at byte %zu of %zu (byte 0x%02X)", i, len,
                             s[i]);
        i += cl;
    }
    struct enc e = {.t = t, .ids = ids, .cap = cap};
    int st = LLMK_OK;
    for (int i = 0; i < t->n_re; i++) {
        e.md[i] = pcre2_match_data_create_from_pattern(t->re[i], NULL);
        if (!e.md[i]) st = llmk_fail(LLMK_OUT_OF_MEMORY, "tokenizer: PCRE2 match data");
    }
    if (st == LLMK_OK) st = encode(&e, s, len, add_bos, parse_special);
    for (int i = 0; i < t->n_re; i++) pcre2_match_data_free(e.md[i]);
    free(e.sym_id);
    free(e.prev);
    free(e.next);
    free(e.sym_off);
    free(e.sym_len);
    free(e.heap);
    free(e.buf);
    if (st != LLMK_OK) return st;
    *n_out = e.n;
    if (e.n > cap)
        return llmk_fail(LLMK_BUFFER_TOO_SMALL, "llmk_tokenize: %zu ids, buffer holds %zu", e.n,
                         cap);
    return LLMK_OK;
}

/* ---- decoding ---------------------------------------------------------------- */

/* Output cursor that counts everything but writes only what fits. */
struct sink {
    char *out;
    size_t cap, n;
};
static void sink_put(struct sink *k, const void *p, size_t n) {
    const char *c = p;
    for (size_t i = 0; i < n; i++, k->n++)
        if (k->n < k->cap) k->out[k->n] = c[i];
}
static const char REPLACEMENT[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

/* Feed one byte through the UTF-8 assembler: complete characters go out,
 * an unfinished one waits in st->pending, a malformed one becomes U+FFFD. */
static void utf8_feed(llmk_detok_state *st, unsigned char b, struct sink *k) {
    for (;;) {
        if (st->n_pending == 0) {
            if (b < 0x80) sink_put(k, &b, 1);
            else if ((b >= 0xC2 && b <= 0xDF) || (b >= 0xE0 && b <= 0xF4)) {
                st->pending[0] = b;
                st->n_pending = 1;
            } else
                sink_put(k, REPLACEMENT, 3);
            return;
        }
        unsigned char tmp[4];
        memcpy(tmp, st->pending, st->n_pending);
        tmp[st->n_pending] = b;
        unsigned char c = tmp[0];
        size_t need = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        /* Is tmp[0..n_pending] still a prefix of a well-formed sequence? */
        unsigned char lo = 0x80, hi = 0xBF;
        if (st->n_pending == 1) {
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        }
        if (b >= lo && b <= hi) {
            st->pending[st->n_pending++] = b;
            if (st->n_pending == need) {
                sink_put(k, st->pending, need);
                st->n_pending = 0;
            }
            return;
        }
        /* The pending prefix is cut short: replace it, then look at b afresh. */
        sink_put(k, REPLACEMENT, 3);
        st->n_pending = 0;
    }
}

/* One byte of a token: through the UTF-8 assembler, or raw (token_bytes). */
static void emit(llmk_detok_state *st, unsigned char b, struct sink *k, bool raw) {
    if (raw) sink_put(k, &b, 1);
    else utf8_feed(st, b, k);
}

/* The bytes a token stands for, through the UTF-8 assembler (or raw) into k. */
static void detok_token(const llmk_tokenizer *t, llmk_detok_state *st, int32_t id,
                        bool render_special, bool raw, struct sink *k) {
    const unsigned char *p = (const unsigned char *)t->arena + t->off[id];
    size_t n = t->len[id];
    int ty = t->type[id];
    bool drop_space = t->kind == KIND_SPM && t->add_space_prefix && !st->started;
    if (ty == TT_CONTROL || ty == TT_UNKNOWN) {
        if (!render_special || n == 0) return;
        st->started = true;
        for (size_t i = 0; i < n; i++) emit(st, p[i], k, raw);
        return;
    }
    if (n == 0) return;
    st->started = true;
    if (ty == TT_USER) {
        for (size_t i = 0; i < n; i++) emit(st, p[i], k, raw);
        return;
    }
    if (ty == TT_BYTE && n == 6 && p[0] == '<' && p[1] == '0' && p[2] == 'x' && p[5] == '>') {
        unsigned v = 0;
        bool ok = true;
        for (int i = 3; i < 5; i++) {
            unsigned char c = p[i];
            v <<= 4;
            if (c >= '0' && c <= '9') v |= c - '0';
            else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
            else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
            else ok = false;
        }
        if (ok) {
            if (!(drop_space && v == ' ')) emit(st, (unsigned char)v, k, raw);
            return;
        }
    }
    for (size_t i = 0; i < n;) {
        size_t cl = utf8_seq_len(p + i, n - i);
        if (!cl) { /* a malformed piece: pass the byte on, the assembler replaces it */
            emit(st, p[i], k, raw);
            i++;
            continue;
        }
        if (t->kind == KIND_BPE) {
            int b = cp_to_byte(utf8_decode(p + i, cl));
            if (b >= 0) emit(st, (unsigned char)b, k, raw);
            else
                for (size_t j = 0; j < cl; j++) emit(st, p[i + j], k, raw);
        } else if (cl == 3 && p[i] == 0xE2 && p[i + 1] == 0x96 && p[i + 2] == 0x81) {
            if (!(drop_space && i == 0)) emit(st, ' ', k, raw);
        } else {
            for (size_t j = 0; j < cl; j++) emit(st, p[i + j], k, raw);
        }
        i += cl;
    }
}

int llmk_detok_feed(const llmk_tokenizer *t, llmk_detok_state *st, int32_t id, bool render_special,
                    char *out, size_t cap, size_t *n_out) {
    llmk_error_clear();
    if (n_out) *n_out = 0;
    if (!t || !st || !n_out || (!out && cap))
        return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_detok_feed: NULL argument");
    if (id < 0 || (size_t)id >= t->n_vocab)
        return llmk_fail(LLMK_INVALID_TOKEN, "token id %d is outside the vocabulary of %zu", id,
                         t->n_vocab);
    if (st->n_pending >= 4)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_detok_feed: state holds %u pending bytes",
                         st->n_pending);
    llmk_detok_state next = *st;
    struct sink k = {out, cap, 0};
    detok_token(t, &next, id, render_special, false, &k);
    *n_out = k.n;
    if (k.n > cap)
        return llmk_fail(LLMK_BUFFER_TOO_SMALL, "token %d decodes to %zu bytes, buffer holds %zu",
                         id, k.n, cap);
    *st = next;
    return LLMK_OK;
}

int llmk_tokenizer_token_bytes(const llmk_tokenizer *t, int32_t id, char *out, size_t cap,
                               size_t *n_out) {
    llmk_error_clear();
    if (n_out) *n_out = 0;
    if (!t || !n_out || (!out && cap))
        return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_tokenizer_token_bytes: NULL argument");
    if (id < 0 || (size_t)id >= t->n_vocab)
        return llmk_fail(LLMK_INVALID_TOKEN, "token id %d is outside the vocabulary of %zu", id,
                         t->n_vocab);
    llmk_detok_state st = {.started = true}; /* a continuation: SentencePiece keeps its space */
    struct sink k = {out, cap, 0};
    detok_token(t, &st, id, false, true, &k);
    *n_out = k.n;
    if (k.n > cap)
        return llmk_fail(LLMK_BUFFER_TOO_SMALL, "token %d has %zu bytes, buffer holds %zu", id, k.n, cap);
    return LLMK_OK;
}

void *llmk_tokenizer_grammar_cache(const llmk_tokenizer *t) {
    return atomic_load_explicit(&((llmk_tokenizer *)t)->grammar_cache, memory_order_acquire);
}

void *llmk_tokenizer_set_grammar_cache(const llmk_tokenizer *t, void *v) {
    void *expect = NULL;
    if (atomic_compare_exchange_strong_explicit(&((llmk_tokenizer *)t)->grammar_cache, &expect, v,
                                                memory_order_acq_rel, memory_order_acquire))
        return v;
    return expect;
}

int llmk_detok_flush(const llmk_tokenizer *t, llmk_detok_state *st, char *out, size_t cap,
                     size_t *n_out) {
    llmk_error_clear();
    if (n_out) *n_out = 0;
    if (!t || !st || !n_out || (!out && cap))
        return llmk_fail(LLMK_INVALID_ARGUMENT, "llmk_detok_flush: NULL argument");
    size_t need = st->n_pending ? 3 : 0;
    *n_out = need;
    if (need > cap)
        return llmk_fail(LLMK_BUFFER_TOO_SMALL, "flush needs %zu bytes, buffer holds %zu", need,
                         cap);
    if (need) memcpy(out, REPLACEMENT, 3);
    st->n_pending = 0;
    return LLMK_OK;
}
