/* libFuzzer target for the tokenizer: a vocabulary from a fuzzed GGUF image
 * (tokenizer.ggml.* metadata, BPE "gpt2" or SentencePiece "llama") and a
 * fuzzed text, through llmk_tokenizer_load, llmk_tokenize (with and without
 * parse_special) and the streaming detokenizer (llmk_detok_feed/flush).
 *
 * Input: a 4-byte little-endian length L, L bytes of GGUF image, then the
 * text (the rest of the input); see fuzz_split in fuzz_common.h. The text is
 * also read as a sequence of 16-bit token ids (modulo the vocabulary size)
 * and detokenized, so id sequences no encoder would produce (lone byte
 * tokens, split UTF-8, control tokens anywhere) are decoded too.
 *
 * Checked beyond "no crash, leak or UB": encode ids lie inside the
 * vocabulary, a short id buffer reports the same count as a long one, the
 * detokenizer's buffer-too-small answer is exact and leaves its state
 * unchanged, and the decoded text is always valid UTF-8. Where the
 * vocabulary has harmony's markers (gpt-oss), the id sequence also goes
 * through llmk_harmony_text, with the same checks for each part's text.
 *
 * Built by scripts/fuzz.sh; replayed by tests/test_fuzz_corpus.c. With
 * -DLLMK_FUZZ_REPLAY it gets a main() that runs the target over files. */
#include "fuzz_common.h"
#include "llmk.h"

/* Decoded text of one stream, accumulated in a growing buffer. */
struct ftok_text {
    char *p;
    size_t len, cap;
};

static void ftok_append(struct ftok_text *t, const char *s, size_t n) {
    if (t->len + n > t->cap) {
        size_t cap = t->cap ? t->cap : 64;
        while (cap < t->len + n) cap *= 2;
        char *np = realloc(t->p, cap);
        FUZZ_REQUIRE(np != NULL);
        t->p = np;
        t->cap = cap;
    }
    if (n) memcpy(t->p + t->len, s, n);
    t->len += n;
}

/* Field by field: padding bytes of a struct copy are unspecified. */
static bool ftok_same_state(const llmk_detok_state *a, const llmk_detok_state *b) {
    return a->n_pending == b->n_pending && a->started == b->started &&
           memcmp(a->pending, b->pending, sizeof a->pending) == 0;
}

/* Feed one id, first into a 2-byte buffer: when that is too small, the
 * answer must name the exact size and leave the state as it was, so the
 * retry into an exactly-sized buffer (ASan sees any overrun) succeeds. */
static void ftok_feed(const llmk_tokenizer *t, llmk_detok_state *st, int32_t id, bool special,
                      struct ftok_text *out) {
    char small[2];
    size_t n = 0;
    llmk_detok_state before = *st;
    int rc = llmk_detok_feed(t, st, id, special, small, sizeof small, &n);
    if (rc == LLMK_OK) {
        FUZZ_REQUIRE(n <= sizeof small);
        ftok_append(out, small, n);
        return;
    }
    FUZZ_REQUIRE(rc == LLMK_BUFFER_TOO_SMALL && n > sizeof small);
    FUZZ_REQUIRE(ftok_same_state(&before, st));
    size_t need = n;
    char *buf = malloc(need);
    FUZZ_REQUIRE(buf != NULL);
    rc = llmk_detok_feed(t, st, id, special, buf, need, &n);
    FUZZ_REQUIRE(rc == LLMK_OK && n == need);
    ftok_append(out, buf, n);
    free(buf);
}

static void ftok_finish(const llmk_tokenizer *t, llmk_detok_state *st, struct ftok_text *out) {
    char tail[3];
    size_t n = 0;
    FUZZ_REQUIRE(llmk_detok_flush(t, st, tail, sizeof tail, &n) == LLMK_OK);
    ftok_append(out, tail, n);
    FUZZ_REQUIRE(st->n_pending == 0);
    FUZZ_REQUIRE(fuzz_valid_utf8(out->p, out->len));
    free(out->p);
    *out = (struct ftok_text){0};
}

static void ftok_decode(const llmk_tokenizer *t, const int32_t *ids, size_t n, bool special,
                        bool started) {
    llmk_detok_state st = {.started = started};
    struct ftok_text out = {0};
    for (size_t i = 0; i < n; i++) ftok_feed(t, &st, ids[i], special, &out);
    ftok_finish(t, &st, &out);
}

/* Encode, count first (cap 0) then for real; LLMK_OK when the text encodes.
 * *ids_out is malloc'd (NULL when there are none). */
static int ftok_encode(const llmk_tokenizer *t, const char *text, size_t len, bool add_bos,
                       bool special, int32_t **ids_out, size_t *n_out) {
    *ids_out = NULL;
    *n_out = 0;
    size_t n = 0;
    int rc = llmk_tokenize(t, text, len, add_bos, special, NULL, 0, &n);
    if (rc != LLMK_OK && rc != LLMK_BUFFER_TOO_SMALL) {
        FUZZ_REQUIRE(n == 0);
        return rc;
    }
    FUZZ_REQUIRE((rc == LLMK_OK) == (n == 0));
    if (n == 0) return LLMK_OK;
    int32_t *ids = malloc(n * sizeof *ids);
    FUZZ_REQUIRE(ids != NULL);
    size_t n2 = 0;
    rc = llmk_tokenize(t, text, len, add_bos, special, ids, n, &n2);
    FUZZ_REQUIRE(rc == LLMK_OK && n2 == n);
    size_t n_vocab = llmk_tokenizer_n_vocab(t);
    for (size_t i = 0; i < n; i++) FUZZ_REQUIRE(ids[i] >= 0 && (size_t)ids[i] < n_vocab);
    if (n > 1) { /* one id short: the same count, and the prefix is the same */
        int32_t *part = malloc((n - 1) * sizeof *part);
        FUZZ_REQUIRE(part != NULL);
        size_t n3 = 0;
        rc = llmk_tokenize(t, text, len, add_bos, special, part, n - 1, &n3);
        FUZZ_REQUIRE(rc == LLMK_BUFFER_TOO_SMALL && n3 == n);
        FUZZ_REQUIRE(memcmp(part, ids, (n - 1) * sizeof *part) == 0);
        free(part);
    }
    *ids_out = ids;
    *n_out = n;
    return LLMK_OK;
}

/* The header's contract for one id, composed of the parts it names: the
 * token's part (llmk_harmony_feed) and its text (llmk_detok_feed), or for a
 * marker or header the held-back bytes flushed into the last part. */
static void ftok_harmony_ref(const llmk_tokenizer *t, llmk_harmony_state *hs, llmk_detok_state *ds,
                             llmk_harmony_part *last, int32_t id, struct ftok_text *text) {
    llmk_harmony_part p = llmk_harmony_feed(hs, t, id);
    if (p == LLMK_HARMONY_NONE) {
        char tail[3];
        size_t n = 0;
        FUZZ_REQUIRE(llmk_detok_flush(t, ds, tail, sizeof tail, &n) == LLMK_OK);
        ftok_append(&text[*last], tail, n);
    } else {
        *last = p;
        ftok_feed(t, ds, id, false, &text[p]);
    }
}

/* Harmony's split of an id sequence (vocabularies with its markers): each
 * id first into a 2-byte buffer, whose too-small answer must leave both
 * states as they were; each part's text is valid UTF-8 (a character a
 * marker interrupts ends in the part it began in) and what the reference
 * composition gives. */
static void ftok_harmony(const llmk_tokenizer *t, const int32_t *ids, size_t n) {
    llmk_harmony_state hs, ref_hs;
    if (llmk_harmony_init(t, &hs) != LLMK_OK) return;
    FUZZ_REQUIRE(llmk_harmony_init(t, &ref_hs) == LLMK_OK);
    llmk_detok_state ds = {0}, ref_ds = {0};
    llmk_harmony_part ref_last = LLMK_HARMONY_CONTENT;
    struct ftok_text text[3] = {{0}}, ref[3] = {{0}};
    for (size_t i = 0; i < n; i++) {
        ftok_harmony_ref(t, &ref_hs, &ref_ds, &ref_last, ids[i], ref);
        char small[2], *buf = small;
        size_t got = 0;
        llmk_harmony_part part = LLMK_HARMONY_NONE;
        llmk_harmony_state hs0 = hs;
        llmk_detok_state ds0 = ds;
        int rc = llmk_harmony_text(&hs, t, &ds, ids[i], small, sizeof small, &got, &part);
        if (rc == LLMK_BUFFER_TOO_SMALL) {
            FUZZ_REQUIRE(got > sizeof small && ftok_same_state(&ds0, &ds));
            FUZZ_REQUIRE(hs0.phase == hs.phase && hs0.analysis == hs.analysis && hs0.last == hs.last &&
                         hs0.chan_len == hs.chan_len);
            FUZZ_REQUIRE((buf = malloc(got)) != NULL);
            size_t need = got;
            rc = llmk_harmony_text(&hs, t, &ds, ids[i], buf, need, &got, &part);
            FUZZ_REQUIRE(got == need);
        }
        FUZZ_REQUIRE(rc == LLMK_OK && (part == LLMK_HARMONY_CONTENT || part == LLMK_HARMONY_REASONING));
        ftok_append(&text[part], buf, got);
        if (buf != small) free(buf);
    }
    char tail[3];
    size_t got = 0;
    FUZZ_REQUIRE(llmk_detok_flush(t, &ds, tail, sizeof tail, &got) == LLMK_OK);
    ftok_append(&text[hs.last], tail, got);
    FUZZ_REQUIRE(llmk_detok_flush(t, &ref_ds, tail, sizeof tail, &got) == LLMK_OK);
    ftok_append(&ref[ref_last], tail, got);
    for (int p = 0; p < 3; p++) {
        FUZZ_REQUIRE(fuzz_valid_utf8(text[p].p, text[p].len));
        FUZZ_REQUIRE(text[p].len == ref[p].len && (!ref[p].len || memcmp(text[p].p, ref[p].p, ref[p].len) == 0));
        free(text[p].p);
        free(ref[p].p);
    }
}

/* 1 when the vocabulary loaded and the text encoded both ways, else 0. */
static int fuzz_tokenizer_one(const uint8_t *data, size_t size) {
    uint8_t *gbuf;
    size_t glen, tlen;
    const uint8_t *tbytes;
    if (!fuzz_split(data, size, &gbuf, &glen, &tbytes, &tlen)) return 0;
    llmk_gguf *g = NULL;
    int rc = llmk_gguf_open_memory(gbuf, glen, &g);
    llmk_tokenizer *t = NULL;
    if (rc == LLMK_OK) {
        rc = llmk_tokenizer_load(g, &t);
        FUZZ_REQUIRE((rc == LLMK_OK) == (t != NULL));
        if (rc != LLMK_OK) FUZZ_REQUIRE(*llmk_last_error());
        llmk_gguf_close(g);
    }
    /* The tokenizer keeps its own copy of everything: freeing the image now
     * turns any pointer it kept into the file into an ASan report. */
    free(gbuf);
    if (rc != LLMK_OK) return 0;

    const char *text = (const char *)tbytes;
    size_t n_vocab = llmk_tokenizer_n_vocab(t);
    FUZZ_REQUIRE(n_vocab > 0);
    int32_t specials[] = {llmk_tokenizer_bos(t), llmk_tokenizer_eos(t), llmk_tokenizer_eot(t)};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        FUZZ_REQUIRE(specials[i] >= -1 && specials[i] < (int64_t)n_vocab);

    int32_t *plain = NULL, *special = NULL;
    size_t n_plain = 0, n_special = 0;
    int rp = ftok_encode(t, text, tlen, llmk_tokenizer_add_bos(t), false, &plain, &n_plain);
    int rs = ftok_encode(t, text, tlen, true, true, &special, &n_special);
    FUZZ_REQUIRE((rp == LLMK_INVALID_UTF8) == (rs == LLMK_INVALID_UTF8));
    FUZZ_REQUIRE((rp == LLMK_INVALID_UTF8) == !fuzz_valid_utf8(text, tlen));
    ftok_decode(t, plain, n_plain, false, false);
    ftok_decode(t, special, n_special, true, false);
    ftok_harmony(t, special, n_special);

    /* Arbitrary id sequences, rendering specials on odd-numbered ids. */
    size_t n_raw = tlen / 2;
    if (n_raw > 4096) n_raw = 4096;
    llmk_detok_state st = {0};
    struct ftok_text out = {0};
    int32_t *raw = malloc((n_raw ? n_raw : 1) * sizeof *raw);
    FUZZ_REQUIRE(raw != NULL);
    for (size_t i = 0; i < n_raw; i++) {
        uint32_t v = (uint32_t)tbytes[2 * i] | (uint32_t)tbytes[2 * i + 1] << 8;
        int32_t id = raw[i] = (int32_t)(v % n_vocab);
        size_t plen = 0;
        const char *piece = llmk_tokenizer_piece(t, id, &plen);
        FUZZ_REQUIRE(piece != NULL && piece[plen] == 0);
        FUZZ_REQUIRE(llmk_tokenizer_find(t, piece, plen) >= 0);
        int ty = llmk_tokenizer_token_type(t, id);
        FUZZ_REQUIRE(ty >= 1 && ty <= 6);
        (void)llmk_tokenizer_is_eog(t, id);
        ftok_feed(t, &st, id, v & 1, &out);
    }
    /* Ids outside the vocabulary are refused without touching the state. */
    llmk_detok_state before = st;
    char buf[8];
    size_t n = 0;
    FUZZ_REQUIRE(llmk_detok_feed(t, &st, (int32_t)n_vocab, true, buf, sizeof buf, &n) ==
                 LLMK_INVALID_TOKEN);
    FUZZ_REQUIRE(llmk_detok_feed(t, &st, -1, true, buf, sizeof buf, &n) == LLMK_INVALID_TOKEN);
    FUZZ_REQUIRE(ftok_same_state(&before, &st));
    FUZZ_REQUIRE(llmk_tokenizer_piece(t, (int32_t)n_vocab, &n) == NULL && n == 0);
    ftok_finish(t, &st, &out);
    ftok_harmony(t, raw, n_raw);
    free(raw);

    free(plain);
    free(special);
    llmk_tokenizer_free(t);
    return rp == LLMK_OK && rs == LLMK_OK;
}

#ifndef LLMK_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_tokenizer_one(data, size);
    return 0;
}
#ifdef LLMK_FUZZ_REPLAY
int main(int argc, char **argv) { return fuzz_replay_main(argc, argv, fuzz_tokenizer_one); }
#endif
#endif
