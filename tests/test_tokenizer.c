/* Tokenizer unit tests: the streaming detokenizer with split UTF-8, buffer
 * contracts, UTF-8 refusals, merge order on hand-made vocabularies, and
 * refusal of hostile tokenizer metadata. Token ids against reference
 * tokenizers are checked by tests/py/test_tokenizer.py. */
#include "check.h"
#include "llmk.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIX "tests/fixtures/tokenizer/"

static llmk_gguf *open_fixture(const char *name) {
    llmk_gguf *g = NULL;
    int st = llmk_gguf_open(name, &g);
    CHECK_STATUS(st, LLMK_OK);
    return st == LLMK_OK ? g : NULL;
}

static llmk_tokenizer *load_fixture(const char *name) {
    llmk_gguf *g = open_fixture(name);
    if (!g) return NULL;
    llmk_tokenizer *t = NULL;
    CHECK_STATUS(llmk_tokenizer_load(g, &t), LLMK_OK);
    llmk_gguf_close(g); /* the tokenizer keeps its own copy */
    return t;
}

/* Token of the GPT-2 alphabet character standing for byte b. */
static int32_t byte_token(const llmk_tokenizer *t, unsigned b) {
    unsigned cp = b;
    if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
        cp = 256;
        for (unsigned x = 0; x < b; x++)
            if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) cp++;
    }
    char u[3];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    }
    return llmk_tokenizer_find(t, u, n);
}

static bool valid_utf8(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t need = p[i] < 0x80 ? 1 : p[i] < 0xE0 ? 2 : p[i] < 0xF0 ? 3 : 4;
        if (p[i] >= 0x80 && p[i] < 0xC2) return false;
        if (i + need > n) return false;
        for (size_t k = 1; k < need; k++)
            if ((p[i + k] & 0xC0) != 0x80) return false;
        i += need;
    }
    return true;
}

/* Decode ids one by one; every chunk must be whole UTF-8 on its own. */
static size_t stream_decode(const llmk_tokenizer *t, const int32_t *ids, size_t n, bool special,
                            char *out, size_t cap) {
    llmk_detok_state st = {0};
    size_t pos = 0, got;
    for (size_t i = 0; i < n; i++) {
        CHECK_STATUS(llmk_detok_feed(t, &st, ids[i], special, out + pos, cap - pos, &got), LLMK_OK);
        CHECK(valid_utf8(out + pos, got));
        pos += got;
    }
    CHECK_STATUS(llmk_detok_flush(t, &st, out + pos, cap - pos, &got), LLMK_OK);
    return pos + got;
}

static void test_bytelevel_fixture(void) {
    llmk_tokenizer *t = load_fixture(FIX "tiny_qwen2.gguf");
    if (!t) return;
    int32_t im_end = llmk_tokenizer_find(t, "<|im_end|>", 10);
    int32_t eot = llmk_tokenizer_find(t, "<|endoftext|>", 13);
    int32_t im_start = llmk_tokenizer_find(t, "<|im_start|>", 12);
    CHECK(im_end >= 0 && eot >= 0 && im_start >= 0);
    CHECK_EQ_INT(llmk_tokenizer_eos(t), im_end);
    CHECK_EQ_INT(llmk_tokenizer_bos(t), -1);
    CHECK(!llmk_tokenizer_add_bos(t));
    CHECK(llmk_tokenizer_is_eog(t, im_end));
    CHECK(llmk_tokenizer_is_eog(t, eot)); /* a well-known end token */
    CHECK(!llmk_tokenizer_is_eog(t, im_start));
    CHECK_EQ_INT(llmk_tokenizer_token_type(t, im_start), 3);
    CHECK_EQ_INT(llmk_tokenizer_token_type(t, -1), 0);
    size_t plen;
    CHECK(llmk_tokenizer_piece(t, -1, &plen) == NULL);
    CHECK(llmk_tokenizer_piece(t, (int32_t)llmk_tokenizer_n_vocab(t), &plen) == NULL);

    /* Buffer contract: the full count always comes back. */
    const char *text = "Hello world, 123 <|im_end|> 你好 👨‍👩‍👧 done";
    size_t n = 0, n2 = 0;
    CHECK_STATUS(llmk_tokenize(t, text, strlen(text), false, true, NULL, 0, &n),
                 LLMK_BUFFER_TOO_SMALL);
    CHECK(n > 10);
    int32_t ids[256];
    CHECK_STATUS(llmk_tokenize(t, text, strlen(text), false, true, ids, 3, &n2),
                 LLMK_BUFFER_TOO_SMALL);
    CHECK_EQ_INT(n2, n);
    CHECK_STATUS(llmk_tokenize(t, text, strlen(text), false, true, ids, n, &n2), LLMK_OK);
    CHECK_EQ_INT(n2, n);
    bool saw_end = false;
    for (size_t i = 0; i < n; i++) saw_end |= ids[i] == im_end;
    CHECK(saw_end);
    /* Without parse_special the same text does not produce the control token. */
    int32_t ids2[256];
    CHECK_STATUS(llmk_tokenize(t, text, strlen(text), false, false, ids2, 256, &n2), LLMK_OK);
    for (size_t i = 0; i < n2; i++) CHECK(ids2[i] != im_end);

    /* Streaming decode of the whole thing, control tokens dropped. */
    char out[512];
    size_t m = stream_decode(t, ids2, n2, false, out, sizeof out);
    CHECK(m == strlen(text) && memcmp(out, text, m) == 0);
    m = stream_decode(t, ids, n, false, out, sizeof out);
    const char *without = "Hello world, 123  你好 👨‍👩‍👧 done";
    CHECK(m == strlen(without) && memcmp(out, without, m) == 0);
    m = stream_decode(t, ids, n, true, out, sizeof out);
    CHECK(m == strlen(text) && memcmp(out, text, m) == 0);

    /* Split UTF-8: "€" = E2 82 AC fed as three byte tokens. */
    llmk_detok_state st = {0};
    char buf[16];
    size_t got = 99;
    CHECK_STATUS(llmk_detok_feed(t, &st, byte_token(t, 0xE2), false, buf, sizeof buf, &got),
                 LLMK_OK);
    CHECK_EQ_INT(got, 0);
    CHECK_STATUS(llmk_detok_feed(t, &st, byte_token(t, 0x82), false, buf, sizeof buf, &got),
                 LLMK_OK);
    CHECK_EQ_INT(got, 0);
    /* Too small a buffer: the size needed comes back, the state stays. */
    CHECK_STATUS(llmk_detok_feed(t, &st, byte_token(t, 0xAC), false, buf, 2, &got),
                 LLMK_BUFFER_TOO_SMALL);
    CHECK_EQ_INT(got, 3);
    CHECK_EQ_INT(st.n_pending, 2);
    CHECK_STATUS(llmk_detok_feed(t, &st, byte_token(t, 0xAC), false, buf, 3, &got), LLMK_OK);
    CHECK(got == 3 && memcmp(buf, "\xE2\x82\xAC", 3) == 0);
    CHECK_STATUS(llmk_detok_flush(t, &st, buf, sizeof buf, &got), LLMK_OK);
    CHECK_EQ_INT(got, 0);

    /* A 4-byte emoji split 1+3, then an interrupted sequence and a flush. */
    const unsigned char smile[4] = {0xF0, 0x9F, 0x98, 0x80};
    llmk_detok_state s2 = {0};
    CHECK_STATUS(llmk_detok_feed(t, &s2, byte_token(t, smile[0]), false, buf, 16, &got), LLMK_OK);
    CHECK_EQ_INT(got, 0);
    for (int i = 1; i < 4; i++)
        CHECK_STATUS(llmk_detok_feed(t, &s2, byte_token(t, smile[i]), false, buf, 16, &got),
                     LLMK_OK);
    CHECK(got == 4 && memcmp(buf, smile, 4) == 0);
    /* E2 then 'A': the cut-short prefix becomes U+FFFD, 'A' survives. */
    CHECK_STATUS(llmk_detok_feed(t, &s2, byte_token(t, 0xE2), false, buf, 16, &got), LLMK_OK);
    CHECK_STATUS(llmk_detok_feed(t, &s2, byte_token(t, 'A'), false, buf, 16, &got), LLMK_OK);
    CHECK(got == 4 && memcmp(buf, "\xEF\xBF\xBD" "A", 4) == 0);
    /* A lone continuation byte and a never-valid byte: one U+FFFD each. */
    CHECK_STATUS(llmk_detok_feed(t, &s2, byte_token(t, 0x80), false, buf, 16, &got), LLMK_OK);
    CHECK(got == 3 && memcmp(buf, "\xEF\xBF\xBD", 3) == 0);
    CHECK_STATUS(llmk_detok_feed(t, &s2, byte_token(t, 0xC0), false, buf, 16, &got), LLMK_OK);
    CHECK(got == 3 && memcmp(buf, "\xEF\xBF\xBD", 3) == 0);
    /* Surrogate lead (ED A0): refused at the second byte. */
    CHECK_STATUS(llmk_detok_feed(t, &s2, byte_token(t, 0xED), false, buf, 16, &got), LLMK_OK);
    CHECK_EQ_INT(got, 0);
    CHECK_STATUS(llmk_detok_feed(t, &s2, byte_token(t, 0xA0), false, buf, 16, &got), LLMK_OK);
    CHECK(got == 6 && memcmp(buf, "\xEF\xBF\xBD\xEF\xBF\xBD", 6) == 0);
    /* An unfinished tail at the end becomes one U+FFFD on flush. */
    CHECK_STATUS(llmk_detok_feed(t, &s2, byte_token(t, 0xF0), false, buf, 16, &got), LLMK_OK);
    CHECK_STATUS(llmk_detok_feed(t, &s2, byte_token(t, 0x9F), false, buf, 16, &got), LLMK_OK);
    CHECK_EQ_INT(got, 0);
    CHECK_STATUS(llmk_detok_flush(t, &s2, buf, 2, &got), LLMK_BUFFER_TOO_SMALL);
    CHECK_EQ_INT(got, 3);
    CHECK_STATUS(llmk_detok_flush(t, &s2, buf, 16, &got), LLMK_OK);
    CHECK(got == 3 && memcmp(buf, "\xEF\xBF\xBD", 3) == 0);
    CHECK_EQ_INT(s2.n_pending, 0);

    /* Bad ids and arguments. */
    CHECK_STATUS(llmk_detok_feed(t, &s2, -1, false, buf, 16, &got), LLMK_INVALID_TOKEN);
    CHECK_STATUS(llmk_detok_feed(t, &s2, (int32_t)llmk_tokenizer_n_vocab(t), false, buf, 16, &got),
                 LLMK_INVALID_TOKEN);
    CHECK_STATUS(llmk_tokenize(t, NULL, 5, false, false, ids, 256, &n), LLMK_INVALID_ARGUMENT);
    CHECK_STATUS(llmk_tokenize(t, NULL, 0, false, false, ids, 256, &n), LLMK_OK);
    CHECK_EQ_INT(n, 0);

    /* Invalid UTF-8 is refused, naming the offset; never replaced. */
    static const char *const bad[] = {"ok\xff", "ok\xc0\x80", "ok\xed\xa0\x80", "ok\xe4\xbd",
                                      "ok\xf4\x90\x80\x80", "ok\x80", "ok\xf0\x9f\x98"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_STATUS(llmk_tokenize(t, bad[i], strlen(bad[i]), false, false, ids, 256, &n),
                     LLMK_INVALID_UTF8);
        CHECK(strstr(llmk_last_error(), "byte 2") != NULL);
    }
    /* NUL bytes are text like any other. */
    CHECK_STATUS(llmk_tokenize(t, "a\0b", 3, false, false, ids, 256, &n), LLMK_OK);
    m = stream_decode(t, ids, n, false, out, sizeof out);
    CHECK(m == 3 && memcmp(out, "a\0b", 3) == 0);

    /* A long run without spaces and a long whitespace run stay exact. */
    size_t big = 20000;
    char *long_text = malloc(big);
    int32_t *long_ids = malloc(big * sizeof *long_ids);
    char *long_out = malloc(big + 16);
    if (long_text && long_ids && long_out) {
        for (size_t i = 0; i < big; i++) long_text[i] = i < big / 2 ? "ab"[i % 2] : " \n\t"[i % 3];
        CHECK_STATUS(llmk_tokenize(t, long_text, big, false, false, long_ids, big, &n), LLMK_OK);
        m = stream_decode(t, long_ids, n, false, long_out, big + 16);
        CHECK(m == big && memcmp(long_out, long_text, big) == 0);
    }
    free(long_text);
    free(long_ids);
    free(long_out);
    llmk_tokenizer_free(t);
}

static void test_spm_fixture(void) {
    llmk_tokenizer *t = load_fixture(FIX "tiny_spm.gguf");
    if (!t) return;
    CHECK(llmk_tokenizer_add_bos(t));
    CHECK_EQ_INT(llmk_tokenizer_bos(t), 1);
    CHECK_EQ_INT(llmk_tokenizer_eos(t), 2);
    CHECK(llmk_tokenizer_is_eog(t, 2));
    /* "€" is not in the training text: three byte-fallback tokens. */
    int32_t ids[64];
    size_t n;
    CHECK_STATUS(llmk_tokenize(t, "€", 3, true, false, ids, 64, &n), LLMK_OK);
    CHECK(n >= 4 && ids[0] == 1);
    int32_t e2 = llmk_tokenizer_find(t, "<0xE2>", 6), x82 = llmk_tokenizer_find(t, "<0x82>", 6),
            xac = llmk_tokenizer_find(t, "<0xAC>", 6);
    CHECK(n >= 3 && ids[n - 3] == e2 && ids[n - 2] == x82 && ids[n - 1] == xac);
    CHECK_EQ_INT(llmk_tokenizer_token_type(t, e2), 6);
    char out[64];
    size_t m = stream_decode(t, ids, n, false, out, sizeof out);
    CHECK(m == 3 && memcmp(out, "€", 3) == 0);
    /* The first piece's leading space is the dummy prefix and is dropped,
     * unless the stream is a continuation. */
    CHECK_STATUS(llmk_tokenize(t, "Hello world", 11, false, false, ids, 64, &n), LLMK_OK);
    m = stream_decode(t, ids, n, false, out, sizeof out);
    CHECK(m == 11 && memcmp(out, "Hello world", 11) == 0);
    llmk_detok_state st = {.started = true};
    size_t got;
    CHECK_STATUS(llmk_detok_feed(t, &st, ids[0], false, out, sizeof out, &got), LLMK_OK);
    CHECK(got >= 1 && out[0] == ' ');
    /* BOS renders only when asked, and then sets the stream going. */
    int32_t seq[2] = {1, ids[0]};
    m = stream_decode(t, seq, 2, true, out, sizeof out);
    CHECK(m >= 4 && memcmp(out, "<s> ", 4) == 0);
    llmk_tokenizer_free(t);
}

/* ---- hand-made vocabularies through the GGUF writer ------------------------- */

struct spec {
    const char *model, *pre;
    const char *const *tokens;
    uint64_t n_tokens;
    const char *const *merges;
    uint64_t n_merges;
    const float *scores;
    const int32_t *types;
    uint64_t n_types;
    int64_t bos; /* -1: absent */
    bool tokens_as_ints;
};

static int build(const struct spec *s, llmk_tokenizer **out) {
    char path[] = "/tmp/llmk_test_tok_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return LLMK_IO_ERROR;
    close(fd);
    llmk_gguf_writer *w = NULL;
    CHECK_STATUS(llmk_gguf_writer_init(&w), LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_set_str(w, "general.architecture", "llama"), LLMK_OK);
    if (s->model) CHECK_STATUS(llmk_gguf_writer_set_str(w, "tokenizer.ggml.model", s->model), LLMK_OK);
    if (s->pre) CHECK_STATUS(llmk_gguf_writer_set_str(w, "tokenizer.ggml.pre", s->pre), LLMK_OK);
    if (s->tokens_as_ints) {
        int32_t v[3] = {1, 2, 3};
        CHECK_STATUS(llmk_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", LLMK_GGUF_INT32, v, 3),
                     LLMK_OK);
    } else if (s->tokens) {
        CHECK_STATUS(llmk_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", s->tokens,
                                                  s->n_tokens), LLMK_OK);
    }
    if (s->merges)
        CHECK_STATUS(llmk_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", s->merges,
                                                  s->n_merges), LLMK_OK);
    if (s->scores)
        CHECK_STATUS(llmk_gguf_writer_set_arr(w, "tokenizer.ggml.scores", LLMK_GGUF_FLOAT32,
                                              s->scores, s->n_tokens), LLMK_OK);
    if (s->types)
        CHECK_STATUS(llmk_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", LLMK_GGUF_INT32,
                                              s->types, s->n_types), LLMK_OK);
    if (s->bos >= 0)
        CHECK_STATUS(llmk_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)s->bos),
                     LLMK_OK);
    CHECK_STATUS(llmk_gguf_writer_write(w, path), LLMK_OK);
    llmk_gguf_writer_free(w);
    llmk_gguf *g = NULL;
    int st = llmk_gguf_open(path, &g);
    CHECK_STATUS(st, LLMK_OK);
    unlink(path);
    if (st != LLMK_OK) return st;
    *out = NULL;
    st = llmk_tokenizer_load(g, out);
    llmk_gguf_close(g);
    return st;
}

static void expect_ids(const llmk_tokenizer *t, const char *text, const int32_t *want, size_t nw) {
    int32_t ids[64];
    size_t n = 0;
    CHECK_STATUS(llmk_tokenize(t, text, strlen(text), false, false, ids, 64, &n), LLMK_OK);
    CHECK_EQ_INT(n, nw);
    for (size_t i = 0; i < n && i < nw; i++) CHECK_EQ_INT(ids[i], want[i]);
}

static void test_handmade_bpe(void) {
    /* Merge order by rank, not by position: "b c" outranks "a b", so "abc"
     * becomes a+bc (bc exists) rather than ab+c. */
    static const char *const tok[] = {"a", "b", "c", "ab", "bc", "abc", "Ġ", "Ġa"};
    static const char *const mer[] = {"b c", "a b", "Ġ a", "a bc"};
    struct spec s = {.model = "gpt2", .pre = "gpt2", .tokens = tok, .n_tokens = 8,
                     .merges = mer, .n_merges = 4, .bos = -1};
    llmk_tokenizer *t = NULL;
    CHECK_STATUS(build(&s, &t), LLMK_OK);
    if (t) {
        expect_ids(t, "abc", (const int32_t[]){5}, 1);
        expect_ids(t, "ab", (const int32_t[]){3}, 1);
        /* Ties between equal pairs go left first: "aab" -> a, ab. */
        expect_ids(t, "aab", (const int32_t[]){0, 3}, 2);
        expect_ids(t, "a abc", (const int32_t[]){0, 7, 4}, 3);
        /* 'd' has no token and the model no <unk>: it is dropped, as HF does. */
        expect_ids(t, "adb", (const int32_t[]){0, 1}, 2);
        CHECK(!llmk_tokenizer_add_bos(t)); /* gpt2 default */
        llmk_tokenizer_free(t);
    }

    /* Llama 3's pre-tokenizer uses a word that is itself a vocabulary entry
     * whole (ignore_merges); GPT-2's merges it: "abc" -> ab + c there. */
    static const char *const tok2[] = {"a", "b", "c", "ab", "bc", "abc"};
    static const char *const mer2[] = {"a b", "b c"};
    struct spec s2 = {.model = "gpt2", .pre = "gpt2", .tokens = tok2, .n_tokens = 6,
                      .merges = mer2, .n_merges = 2, .bos = -1};
    CHECK_STATUS(build(&s2, &t), LLMK_OK);
    if (t) {
        expect_ids(t, "abc", (const int32_t[]){3, 2}, 2);
        llmk_tokenizer_free(t);
    }
    s2.pre = "llama-bpe";
    CHECK_STATUS(build(&s2, &t), LLMK_OK);
    if (t) {
        expect_ids(t, "abc", (const int32_t[]){5}, 1);
        expect_ids(t, "abcab", (const int32_t[]){3, 2, 3}, 3); /* not whole: merges by rank */
        llmk_tokenizer_free(t);
    }

    /* U+180E (bytes E1 A0 8E = "áłİ" in GPT-2's alphabet) is not whitespace to
     * Hugging Face's regex engine (PCRE2 10.42 says it is), so "\u180e!" is one
     * punctuation pre-token and may merge into one token. */
    static const char *const tok3[] = {"\xC3\xA1", "\xC5\x82", "\xC4\xB0", "!",
                                       "\xC3\xA1\xC5\x82", "\xC3\xA1\xC5\x82\xC4\xB0",
                                       "\xC3\xA1\xC5\x82\xC4\xB0!"};
    static const char *const mer3[] = {"\xC3\xA1 \xC5\x82", "\xC3\xA1\xC5\x82 \xC4\xB0",
                                       "\xC3\xA1\xC5\x82\xC4\xB0 !"};
    struct spec s3 = {.model = "gpt2", .pre = "gpt2", .tokens = tok3, .n_tokens = 7,
                      .merges = mer3, .n_merges = 3, .bos = -1};
    CHECK_STATUS(build(&s3, &t), LLMK_OK);
    if (t) {
        expect_ids(t, "\xE1\xA0\x8E!", (const int32_t[]){6}, 1);
        llmk_tokenizer_free(t);
    }

    /* Refusals, each naming the thing. */
    s.pre = "no-such-pre";
    CHECK_STATUS(build(&s, &t), LLMK_TOKENIZER_UNSUPPORTED);
    CHECK(strstr(llmk_last_error(), "no-such-pre") != NULL);
    s.pre = "gpt2";
    s.model = "bert";
    CHECK_STATUS(build(&s, &t), LLMK_TOKENIZER_UNSUPPORTED);
    CHECK(strstr(llmk_last_error(), "bert") != NULL);
    s.model = NULL;
    CHECK_STATUS(build(&s, &t), LLMK_TOKENIZER_UNSUPPORTED);
    s.model = "gpt2";
    static const char *const bad_merge1[] = {"a d"};
    s.merges = bad_merge1;
    s.n_merges = 1;
    CHECK_STATUS(build(&s, &t), LLMK_TOKENIZER_BAD_DATA);
    CHECK(strstr(llmk_last_error(), "tokenizer.ggml.merges[0]") != NULL);
    static const char *const bad_merge2[] = {"b c", "abc"};
    s.merges = bad_merge2;
    s.n_merges = 2;
    CHECK_STATUS(build(&s, &t), LLMK_TOKENIZER_BAD_DATA);
    CHECK(strstr(llmk_last_error(), "merges[1]") != NULL);
    static const char *const bad_merge3[] = {"c a"}; /* "ca" is not a token */
    s.merges = bad_merge3;
    s.n_merges = 1;
    CHECK_STATUS(build(&s, &t), LLMK_TOKENIZER_BAD_DATA);
    s.merges = NULL;
    CHECK_STATUS(build(&s, &t), LLMK_TOKENIZER_BAD_DATA); /* gpt2 needs merges */
    s.merges = mer;
    s.n_merges = 4;
    s.bos = 8; /* one past the vocabulary */
    CHECK_STATUS(build(&s, &t), LLMK_TOKENIZER_BAD_DATA);
    CHECK(strstr(llmk_last_error(), "bos_token_id") != NULL);
    s.bos = 7;
    static const int32_t types_short[] = {1, 1, 1};
    s.types = types_short;
    s.n_types = 3;
    CHECK_STATUS(build(&s, &t), LLMK_TOKENIZER_BAD_DATA);
    static const int32_t types_bad[] = {1, 1, 1, 1, 1, 1, 1, 9};
    s.types = types_bad;
    s.n_types = 8;
    CHECK_STATUS(build(&s, &t), LLMK_TOKENIZER_BAD_DATA);
    s.types = NULL;
    s.tokens_as_ints = true;
    CHECK_STATUS(build(&s, &t), LLMK_TOKENIZER_BAD_DATA);
    s.tokens_as_ints = false;
    s.tokens = NULL;
    CHECK(build(&s, &t) != LLMK_OK);
    CHECK_STATUS(llmk_tokenizer_load(NULL, &t), LLMK_INVALID_ARGUMENT);
    llmk_tokenizer_free(NULL);
}

static void test_handmade_spm(void) {
    /* Highest score first: "ab" (-1) beats "▁a" (-2), so "ab" gives ▁ + ab,
     * which then merge into "▁ab". Without "▁ab" the result would differ. */
    static const char *const tok[] = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b",
                                      "\xE2\x96\x81" "a", "ab", "\xE2\x96\x81" "ab",
                                      "<0x63>", "<user>"};
    static const float sc[] = {0, 0, 0, -5, -6, -7, -2, -1, -3, 0, 0};
    static const int32_t ty[] = {2, 3, 3, 1, 1, 1, 1, 1, 1, 6, 4};
    struct spec s = {.model = "llama", .tokens = tok, .n_tokens = 11, .scores = sc, .types = ty,
                     .n_types = 11, .bos = 1};
    llmk_tokenizer *t = NULL;
    CHECK_STATUS(build(&s, &t), LLMK_OK);
    if (!t) return;
    CHECK(llmk_tokenizer_add_bos(t)); /* SentencePiece default */
    expect_ids(t, "ab", (const int32_t[]){8}, 1);
    expect_ids(t, "ba", (const int32_t[]){3, 5, 4}, 3);
    /* "c" falls back to its byte token; "d" has none and becomes <unk>. */
    expect_ids(t, "ac", (const int32_t[]){6, 9}, 2);
    expect_ids(t, "ad", (const int32_t[]){6, 0}, 2);
    /* A user-defined token is whole even without parse_special; "<s>" is
     * text unless parse_special. */
    expect_ids(t, "a<user>a", (const int32_t[]){6, 10, 6}, 3);
    int32_t ids[32];
    size_t n;
    CHECK_STATUS(llmk_tokenize(t, "<s>ab", 5, true, true, ids, 32, &n), LLMK_OK);
    CHECK(n == 3 && ids[0] == 1 && ids[1] == 1 && ids[2] == 8);
    CHECK_STATUS(llmk_tokenize(t, "<s>", 3, false, false, ids, 32, &n), LLMK_OK);
    CHECK(n > 1); /* plain text: ▁ then byte fallback / unk pieces */
    char out[32];
    size_t m = stream_decode(t, (const int32_t[]){1, 8, 3, 5}, 4, false, out, sizeof out);
    CHECK(m == 4 && memcmp(out, "ab b", 4) == 0);
    llmk_tokenizer_free(t);
}

/* Gemma's SentencePiece settings, from the tiny gemma3 model fixture (its
 * ids against transformers are tests/py/test_gemma3.py): no dummy prefix,
 * whitespace-run pieces, turn tokens that are control tokens, and
 * <end_of_turn> ending generation besides <eos>. */
static void test_gemma_fixture(void) {
    llmk_tokenizer *t = load_fixture("tests/fixtures/model/tiny/tiny_gemma3.gguf");
    if (!t) return;
    CHECK(llmk_tokenizer_add_bos(t));
    CHECK_EQ_INT(llmk_tokenizer_bos(t), 2);
    CHECK_EQ_INT(llmk_tokenizer_eos(t), 1);
    int32_t sot = llmk_tokenizer_find(t, "<start_of_turn>", 15);
    int32_t eot = llmk_tokenizer_find(t, "<end_of_turn>", 13);
    CHECK(sot == 5 && eot == 6);
    CHECK(llmk_tokenizer_is_eog(t, 1) && llmk_tokenizer_is_eog(t, eot));
    CHECK(!llmk_tokenizer_is_eog(t, sot) && !llmk_tokenizer_is_eog(t, 2));
    CHECK_EQ_INT(llmk_tokenizer_token_type(t, eot), 3);
    int32_t ids[64];
    size_t n;
    /* the turn token is one id only when special text is parsed */
    CHECK_STATUS(llmk_tokenize(t, "<end_of_turn>", 13, false, true, ids, 64, &n), LLMK_OK);
    CHECK(n == 1 && ids[0] == eot);
    CHECK_STATUS(llmk_tokenize(t, "<end_of_turn>", 13, false, false, ids, 64, &n), LLMK_OK);
    CHECK(n > 1);
    /* no dummy prefix: a leading space run is kept, in ids and in text */
    int32_t two = llmk_tokenizer_find(t, "\xE2\x96\x81\xE2\x96\x81", 6);
    CHECK(two >= 0);
    CHECK_STATUS(llmk_tokenize(t, "  The", 5, false, false, ids, 64, &n), LLMK_OK);
    CHECK(n >= 2 && ids[0] == two);
    char out[64];
    size_t m = stream_decode(t, ids, n, false, out, sizeof out);
    CHECK(m == 5 && memcmp(out, "  The", 5) == 0);
    llmk_tokenizer_free(t);
}

/* gpt-oss's harmony tokens, from the tiny gpt-oss fixture (its ids against
 * transformers are tests/py/test_gptoss.py): generation ends at <|return|>,
 * at a tool <|call|> and at <|endoftext|>, never at <|end|> (which closes
 * the analysis message before the final one), as llama.cpp decides for a
 * vocabulary holding both <|return|> and <|call|>. */
static void test_gptoss_fixture(void) {
    llmk_tokenizer *t = load_fixture("tests/fixtures/model/tiny/tiny_gptoss.gguf");
    if (!t) return;
    CHECK(!llmk_tokenizer_add_bos(t));
    static const char *const eog[] = {"<|return|>", "<|call|>", "<|endoftext|>"};
    static const char *const not_eog[] = {"<|end|>", "<|start|>", "<|message|>", "<|channel|>",
                                          "<|constrain|>", "<|startoftext|>"};
    for (size_t i = 0; i < sizeof eog / sizeof eog[0]; i++) {
        int32_t id = llmk_tokenizer_find(t, eog[i], strlen(eog[i]));
        CHECK(id >= 0 && llmk_tokenizer_is_eog(t, id));
    }
    for (size_t i = 0; i < sizeof not_eog / sizeof not_eog[0]; i++) {
        int32_t id = llmk_tokenizer_find(t, not_eog[i], strlen(not_eog[i]));
        CHECK(id >= 0 && !llmk_tokenizer_is_eog(t, id));
        if (id >= 0 && llmk_tokenizer_is_eog(t, id)) fprintf(stderr, "%s ends generation\n", not_eog[i]);
    }
    CHECK_EQ_INT(llmk_tokenizer_eos(t), llmk_tokenizer_find(t, "<|return|>", 10));
    llmk_tokenizer_free(t);
}

int main(void) {
    test_bytelevel_fixture();
    test_gptoss_fixture();
    test_spm_fixture();
    test_gemma_fixture();
    test_handmade_bpe();
    test_handmade_spm();
    return check_summary("test_tokenizer");
}
