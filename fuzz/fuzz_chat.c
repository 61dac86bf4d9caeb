/* libFuzzer target for chat templates and messages JSON: a fuzzed template
 * (text, or a GGUF image holding tokenizer.chat_template and the BOS/EOS
 * vocabulary) and a fuzzed messages array through llmk_chat_parse_messages,
 * llmk_chat_template_init / llmk_chat_template_from_gguf and
 * llmk_chat_render.
 *
 * Input: one flags byte, then a two-part body (fuzz_split in fuzz_common.h:
 * a 4-byte little-endian length L, L bytes of template part, then the
 * messages JSON as the rest). Flags:
 *   bits 0-2  template name: 0 chatml, 1 llama3, 2 zephyr, 3 llama2,
 *             4-7 none (recognise the family from the template text)
 *   bit 3     add_generation_prompt
 *   bit 4     the template part is a GGUF image (llmk_chat_template_from_gguf);
 *             otherwise it is template text (llmk_chat_template_init with
 *             BOS "<s>" and EOS "</s>")
 *
 * Checked beyond "no crash, leak or UB": parsed messages have both strings,
 * the rendered prompt is NUL-terminated at the length reported, and
 * rendering is deterministic and does not depend on the GGUF image staying
 * alive after the template is built.
 *
 * Built by scripts/fuzz.sh; replayed by tests/test_fuzz_corpus.c. With
 * -DLLMK_FUZZ_REPLAY it gets a main() that runs the target over files. */
#include "fuzz_common.h"
#include "llmk.h"

static const char *const fchat_names[] = {"chatml", "llama3", "zephyr", "llama2"};

static int fchat_template(uint8_t flags, const uint8_t *part, size_t len,
                          llmk_chat_template **out) {
    const char *name = (flags & 7) < 4 ? fchat_names[flags & 7] : NULL;
    int rc;
    if (flags & 16) {
        llmk_gguf *g = NULL;
        rc = llmk_gguf_open_memory(part, len, &g);
        if (rc != LLMK_OK) return rc;
        rc = llmk_chat_template_from_gguf(g, name, out);
        llmk_gguf_close(g);
    } else {
        rc = llmk_chat_template_init(name, (const char *)part, len, "<s>", "</s>", out);
    }
    FUZZ_REQUIRE((rc == LLMK_OK) == (*out != NULL));
    if (rc != LLMK_OK) FUZZ_REQUIRE(*llmk_last_error());
    if (rc == LLMK_OK && name) FUZZ_REQUIRE(!strcmp(llmk_chat_template_name(*out), name));
    return rc;
}

/* Render n messages twice; the prompt is one NUL-terminated string of the
 * reported length, the same both times. */
static int fchat_render(const llmk_chat_template *t, const llmk_chat_message *m, size_t n,
                        bool gen) {
    char *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    int rc = llmk_chat_render(t, m, n, gen, &a, &la);
    if (rc != LLMK_OK) {
        FUZZ_REQUIRE(a == NULL && la == 0 && *llmk_last_error());
        return rc;
    }
    FUZZ_REQUIRE(a != NULL && strlen(a) == la);
    FUZZ_REQUIRE(llmk_chat_render(t, m, n, gen, &b, &lb) == LLMK_OK);
    FUZZ_REQUIRE(lb == la && memcmp(a, b, la) == 0);
    free(a);
    free(b);
    return rc;
}

/* 1 when the messages parse, the template builds and the render succeeds. */
static int fuzz_chat_one(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t flags = data[0];
    uint8_t *part;
    size_t part_len, json_len;
    const uint8_t *json;
    if (!fuzz_split(data + 1, size - 1, &part, &part_len, &json, &json_len)) return 0;
    bool gen = flags & 8;

    llmk_chat_message *msgs = NULL;
    size_t n = 0;
    int rm = llmk_chat_parse_messages((const char *)json, json_len, &msgs, &n);
    if (rm == LLMK_OK) {
        FUZZ_REQUIRE(msgs != NULL);
        for (size_t i = 0; i < n; i++) FUZZ_REQUIRE(msgs[i].role && msgs[i].content);
    } else {
        FUZZ_REQUIRE(msgs == NULL && n == 0 && *llmk_last_error());
    }

    llmk_chat_template *t = NULL;
    int rt = fchat_template(flags, part, part_len, &t);
    /* The template must keep its own copies of anything it read. */
    free(part);
    int rr = LLMK_BAD_REQUEST;
    if (rt == LLMK_OK) {
        const char *sys = llmk_chat_template_default_system(t);
        if (sys) FUZZ_REQUIRE(strlen(sys) > 0);
        /* An empty conversation renders, but for harmony: OpenAI's template
         * reads messages[0], so llmk refuses it as transformers does. */
        int r0 = fchat_render(t, NULL, 0, gen);
        if (strcmp(llmk_chat_template_name(t), "harmony") != 0) FUZZ_REQUIRE(r0 == LLMK_OK);
        else FUZZ_REQUIRE(r0 == LLMK_BAD_REQUEST);
        if (rm == LLMK_OK) {
            rr = fchat_render(t, msgs, n, gen);
            if (n > 1) (void)fchat_render(t, msgs + 1, n - 1, !gen);
        }
        llmk_chat_template_free(t);
    }
    free(msgs);
    return rm == LLMK_OK && rt == LLMK_OK && rr == LLMK_OK;
}

#ifndef LLMK_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_chat_one(data, size);
    return 0;
}
#ifdef LLMK_FUZZ_REPLAY
int main(int argc, char **argv) { return fuzz_replay_main(argc, argv, fuzz_chat_one); }
#endif
#endif
