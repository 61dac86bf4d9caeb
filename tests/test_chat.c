/* Chat templates through the library API: recognition, default system
 * prompts (raw and escaped newlines), rendering details and refusals.
 * Byte-for-byte agreement with jinja2 is tests/py/test_chat.py. */
#include "check.h"
#include "llmk.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* src/internal.h: the harmony template's date, fixed for a test */
int llmk_chat_template_set_date(llmk_chat_template *t, const char *date);

static char *render(const llmk_chat_template *t, const llmk_chat_message *m, size_t n, bool gen) {
    char *out = NULL;
    size_t len = 0;
    int st = llmk_chat_render(t, m, n, gen, &out, &len);
    if (st != LLMK_OK) {
        fprintf(stderr, "render: %s %s\n", llmk_status_name(st), llmk_last_error());
        return NULL;
    }
    CHECK_EQ_INT(len, strlen(out));
    return out;
}

static void expect(const llmk_chat_template *t, const llmk_chat_message *m, size_t n, bool gen,
                   const char *want) {
    char *got = render(t, m, n, gen);
    CHECK(got && !strcmp(got, want));
    if (got && strcmp(got, want)) fprintf(stderr, "got  [%s]\nwant [%s]\n", got, want);
    free(got);
}

static void test_recognise(void) {
    llmk_chat_template *t = NULL;
    /* escaped newline inside a Jinja string literal, as Qwen2 writes it */
    const char *qwen = "{% if loop.first %}{{ '<|im_start|>system\\nYou are a helpful assistant."
                       "<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n'}}";
    CHECK_STATUS(llmk_chat_template_init(NULL, qwen, strlen(qwen), "", "<|im_end|>", &t), LLMK_OK);
    CHECK(!strcmp(llmk_chat_template_name(t), "chatml"));
    CHECK(llmk_chat_template_default_system(t) &&
          !strcmp(llmk_chat_template_default_system(t), "You are a helpful assistant."));
    llmk_chat_message u = {"user", "hi"};
    expect(t, &u, 1, true,
           "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nhi"
           "<|im_end|>\n<|im_start|>assistant\n");
    llmk_chat_message s2[2] = {{"system", "Be brief."}, {"user", "hi"}};
    expect(t, s2, 2, false, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n");
    expect(t, NULL, 0, true, "<|im_start|>assistant\n"); /* nothing injected without messages */
    llmk_chat_template_free(t);

    /* a system line built from a variable is not a default */
    const char *var = "{{ '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>' }}";
    CHECK_STATUS(llmk_chat_template_init(NULL, var, strlen(var), "", "", &t), LLMK_OK);
    CHECK(llmk_chat_template_default_system(t) == NULL);
    llmk_chat_template_free(t);

    const char *l3 = "{{ '<|start_header_id|>' }}";
    CHECK_STATUS(llmk_chat_template_init(NULL, l3, strlen(l3), "<|begin_of_text|>", "", &t), LLMK_OK);
    CHECK(!strcmp(llmk_chat_template_name(t), "llama3"));
    llmk_chat_message tr = {"user", " \t padded \n"};
    expect(t, &tr, 1, true,
           "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\npadded<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n");
    llmk_chat_template_free(t);

    const char *l31 = "{{- '<|start_header_id|>system<|end_header_id|>' }}{{- 'Cutting Knowledge Date: "
                      "December 2023' }}";
    CHECK_STATUS(llmk_chat_template_init(NULL, l31, strlen(l31), "", "", &t), LLMK_TEMPLATE_UNKNOWN);
    CHECK(strstr(llmk_last_error(), "3.1") != NULL);
    CHECK_STATUS(llmk_chat_template_init("llama3", l31, strlen(l31), "", "", &t), LLMK_OK);
    llmk_chat_template_free(t);

    const char *z = "{{ '<|user|>\\n' }}";
    CHECK_STATUS(llmk_chat_template_init(NULL, z, strlen(z), "<s>", "</s>", &t), LLMK_OK);
    CHECK(!strcmp(llmk_chat_template_name(t), "zephyr"));
    llmk_chat_message zm[2] = {{"tool", "ignored"}, {"user", "hi"}};
    expect(t, zm, 2, true, "<|user|>\nhi</s>\n<|assistant|>\n");
    llmk_chat_template_free(t);

    const char *l2 = "{{ bos_token + '[INST] ' }}";
    CHECK_STATUS(llmk_chat_template_init(NULL, l2, strlen(l2), "<s>", "</s>", &t), LLMK_OK);
    CHECK(!strcmp(llmk_chat_template_name(t), "llama2"));
    llmk_chat_message l2m[3] = {{"system", "S"}, {"user", "a"}, {"assistant", "b"}};
    expect(t, l2m, 3, true, "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\na [/INST] b </s>");
    llmk_chat_message bad[2] = {{"assistant", "x"}, {"user", "y"}};
    char *out = NULL;
    CHECK_STATUS(llmk_chat_render(t, bad, 2, true, &out, NULL), LLMK_BAD_REQUEST);
    CHECK(out == NULL);
    llmk_chat_template_free(t);

    /* Gemma: the system text starts the first user turn, assistant is "model" */
    const char *gm = "{{ '<start_of_turn>' + role + '\\n' }}";
    CHECK_STATUS(llmk_chat_template_init(NULL, gm, strlen(gm), "<bos>", "<eos>", &t), LLMK_OK);
    CHECK(!strcmp(llmk_chat_template_name(t), "gemma"));
    llmk_chat_message gmm[3] = {{"system", " S "}, {"user", " a\n"}, {"assistant", "b"}};
    expect(t, gmm, 3, true,
           "<bos><start_of_turn>user\n S \n\na<end_of_turn>\n<start_of_turn>model\nb<end_of_turn>\n"
           "<start_of_turn>model\n");
    expect(t, gmm, 1, false, "<bos>");
    CHECK_STATUS(llmk_chat_render(t, bad, 2, true, &out, NULL), LLMK_BAD_REQUEST);
    CHECK(out == NULL && strstr(llmk_last_error(), "alternate") != NULL);
    llmk_chat_template_free(t);

    /* Templates without the field ignore the render variables */
    CHECK_STATUS(llmk_chat_template_init("chatml", NULL, 0, "", "", &t), LLMK_OK);
    llmk_chat_message one[1] = {{"user", "a"}};
    char *as_is = render(t, one, 1, true), *with = NULL;
    CHECK_STATUS(llmk_chat_render_with(t, one, 1, &(llmk_chat_render_opts){true, "high", "2026-01-02"}, &with, NULL),
                 LLMK_OK);
    CHECK(as_is && with && !strcmp(as_is, with));
    free(as_is), free(with);
    llmk_chat_template_free(t);

    /* Harmony (gpt-oss): the dated system preamble, the system text as the
     * developer's instructions, <|return|> closing a last assistant turn;
     * tool messages, channel tags and an empty conversation refused */
    const char *hm = "{{- \"<|start|>assistant<|channel|>final<|message|>\" + message.content }}";
    CHECK_STATUS(llmk_chat_template_init(NULL, hm, strlen(hm), "<|startoftext|>", "<|return|>", &t), LLMK_OK);
    CHECK(!strcmp(llmk_chat_template_name(t), "harmony"));
    CHECK_STATUS(llmk_chat_template_set_date(t, "2025-08-05"), LLMK_OK);
    static const char pre[] =
        "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
        "Knowledge cutoff: 2024-06\nCurrent date: 2025-08-05\n\nReasoning: medium\n\n# Valid channels: "
        "analysis, commentary, final. Channel must be included for every message.<|end|>";
    llmk_chat_message hmm[3] = {{"system", "S"}, {"user", "a"}, {"assistant", "b"}};
    expect(t, hmm, 3, false,
           "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
           "Knowledge cutoff: 2024-06\nCurrent date: 2025-08-05\n\nReasoning: medium\n\n# Valid channels: "
           "analysis, commentary, final. Channel must be included for every message.<|end|>"
           "<|start|>developer<|message|># Instructions\n\nS\n\n<|end|><|start|>user<|message|>a<|end|>"
           "<|start|>assistant<|channel|>final<|message|>b<|return|>");
    char *hr = render(t, hmm + 1, 1, true);
    CHECK(hr && !strncmp(hr, pre, sizeof pre - 1) &&
          !strcmp(hr + sizeof pre - 1, "<|start|>user<|message|>a<|end|><|start|>assistant"));
    free(hr);
    llmk_chat_message tool[2] = {{"user", "a"}, {"tool", "{}"}};
    CHECK_STATUS(llmk_chat_render(t, tool, 2, true, &out, NULL), LLMK_BAD_REQUEST);
    CHECK(out == NULL && strstr(llmk_last_error(), "tool") != NULL);
    llmk_chat_message tag[2] = {{"user", "a"}, {"assistant", "<|channel|>analysis<|message|>x"}};
    CHECK_STATUS(llmk_chat_render(t, tag, 2, true, &out, NULL), LLMK_BAD_REQUEST);
    CHECK_STATUS(llmk_chat_render(t, NULL, 0, true, &out, NULL), LLMK_BAD_REQUEST);
    CHECK_STATUS(llmk_chat_template_set_date(t, "2025-08-05 and more"), LLMK_INVALID_ARGUMENT);
    /* the template's variables: reasoning_effort and the date per render (over set_date) */
    llmk_chat_render_opts ro = {.add_generation_prompt = true, .reasoning_effort = "high", .date = "2026-01-02"};
    size_t hl = 0;
    CHECK_STATUS(llmk_chat_render_with(t, hmm + 1, 1, &ro, &out, &hl), LLMK_OK);
    CHECK(out && strstr(out, "Current date: 2026-01-02\n\nReasoning: high\n\n") != NULL && hl == strlen(out));
    free(out);
    ro.reasoning_effort = "Medium";
    CHECK_STATUS(llmk_chat_render_with(t, hmm + 1, 1, &ro, &out, NULL), LLMK_BAD_REQUEST);
    CHECK(out == NULL && strstr(llmk_last_error(), "reasoning_effort 'Medium'") != NULL);
    ro.reasoning_effort = NULL, ro.date = "2026-1-2";
    CHECK_STATUS(llmk_chat_render_with(t, hmm + 1, 1, &ro, &out, NULL), LLMK_BAD_REQUEST);
    ro.date = "2026-0a-02";
    CHECK_STATUS(llmk_chat_render_with(t, hmm + 1, 1, &ro, &out, NULL), LLMK_BAD_REQUEST);
    CHECK_STATUS(llmk_chat_render_with(t, hmm + 1, 1, NULL, &out, NULL), LLMK_INVALID_ARGUMENT);
    llmk_chat_template_free(t);
    /* no date set: today's, local time */
    CHECK_STATUS(llmk_chat_template_init("harmony", NULL, 0, "", "<|return|>", &t), LLMK_OK);
    hr = render(t, hmm + 1, 1, true);
    char today[16];
    time_t now = time(NULL);
    struct tm tm;
    CHECK(localtime_r(&now, &tm) && strftime(today, sizeof today, "%Y-%m-%d", &tm));
    CHECK(hr && strstr(hr, "Current date: ") && !strncmp(strstr(hr, "Current date: ") + 14, today, 10));
    free(hr);
    llmk_chat_template_free(t);

    /* the name overrides the text */
    CHECK_STATUS(llmk_chat_template_init("zephyr", l3, strlen(l3), "", "</s>", &t), LLMK_OK);
    CHECK(!strcmp(llmk_chat_template_name(t), "zephyr"));
    llmk_chat_template_free(t);

    const char *plain = "{% for m in messages %}{{ m.content }}{% endfor %}";
    CHECK_STATUS(llmk_chat_template_init(NULL, plain, strlen(plain), "", "", &t), LLMK_TEMPLATE_UNKNOWN);
    CHECK(t == NULL);
    CHECK(strstr(llmk_last_error(), "--chat-template") != NULL);
    CHECK_STATUS(llmk_chat_template_init(NULL, NULL, 0, "", "", &t), LLMK_TEMPLATE_UNKNOWN);
    CHECK_STATUS(llmk_chat_template_init("jinja", NULL, 0, "", "", &t), LLMK_TEMPLATE_UNKNOWN);
    CHECK(strstr(llmk_last_error(), "jinja") != NULL);
    /* a marker cut short at the end of the text is not a marker */
    CHECK_STATUS(llmk_chat_template_init(NULL, "<|im_start", 10, "", "", &t), LLMK_TEMPLATE_UNKNOWN);
    /* a default-system scan that runs off the end finds nothing */
    const char *cut = "<|im_start|>system\nunterminated";
    CHECK_STATUS(llmk_chat_template_init(NULL, cut, strlen(cut), "", "", &t), LLMK_OK);
    CHECK(llmk_chat_template_default_system(t) == NULL);
    llmk_chat_message nul = {"user", NULL};
    CHECK_STATUS(llmk_chat_render(t, &nul, 1, true, &out, NULL), LLMK_BAD_REQUEST);
    llmk_chat_template_free(t);
}

static void test_parse_messages(void) {
    llmk_chat_message *m = NULL;
    size_t n = 0;
    const char *j = "{\"messages\": [{\"role\": \"system\", \"content\": \"a\\nb\"},"
                    " {\"role\": \"user\", \"content\": \"\\u00e9\", \"name\": \"x\"}]}";
    CHECK_STATUS(llmk_chat_parse_messages(j, strlen(j), &m, &n), LLMK_OK);
    CHECK_EQ_INT(n, 2);
    CHECK(m && !strcmp(m[0].role, "system") && !strcmp(m[0].content, "a\nb"));
    CHECK(m && !strcmp(m[1].content, "\xc3\xa9"));
    free(m);
    CHECK_STATUS(llmk_chat_parse_messages("[]", 2, &m, &n), LLMK_OK);
    CHECK_EQ_INT(n, 0);
    free(m);
    const char *bad[] = {"", "[", "{}", "[1]", "[{\"role\":\"user\"}]", "[{\"role\":null,\"content\":\"x\"}]",
                         "\"str\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_STATUS(llmk_chat_parse_messages(bad[i], strlen(bad[i]), &m, &n), LLMK_BAD_REQUEST);
        CHECK(m == NULL);
    }
    /* the length rules, not the NUL: a valid prefix cut short is refused */
    const char *full = "[{\"role\":\"user\",\"content\":\"x\"}]";
    CHECK_STATUS(llmk_chat_parse_messages(full, strlen(full) - 1, &m, &n), LLMK_BAD_REQUEST);
}

/* A reply's text with its markers split by llmk_harmony_feed, on the tiny
 * gpt-oss fixture's vocabulary (o200k_harmony's special tokens). */
static void split_reply(const llmk_tokenizer *t, const char *reply, char *content, char *reasoning, size_t cap) {
    int32_t ids[256];
    size_t n = 0;
    llmk_harmony_state hs;
    CHECK_STATUS(llmk_tokenize(t, reply, strlen(reply), false, true, ids, 256, &n), LLMK_OK);
    CHECK_STATUS(llmk_harmony_init(t, &hs), LLMK_OK);
    size_t lc = 0, lr = 0;
    content[0] = reasoning[0] = 0;
    for (size_t i = 0; i < n; i++) {
        llmk_harmony_part part = llmk_harmony_feed(&hs, t, ids[i]);
        char b[64];
        size_t k = 0;
        if (llmk_tokenizer_token_bytes(t, ids[i], b, sizeof b, &k) != LLMK_OK) k = 0;
        char *dst = part == LLMK_HARMONY_CONTENT ? content : part == LLMK_HARMONY_REASONING ? reasoning : NULL;
        size_t *len = part == LLMK_HARMONY_CONTENT ? &lc : &lr;
        if (dst && *len + k < cap) memcpy(dst + *len, b, k), *len += k, dst[*len] = 0;
    }
}

/* Ids of text (special tokens recognised) appended at ids + *n. */
static void append_ids(const llmk_tokenizer *t, const char *text, int32_t *ids, size_t *n, size_t cap) {
    size_t k = 0;
    CHECK_STATUS(llmk_tokenize(t, text, strlen(text), false, true, ids + *n, cap - *n, &k), LLMK_OK);
    *n += k;
}

/* The byte-level token of one byte (GPT-2's byte-to-character map: 0xC3 is
 * "Ã", 0xA9 is itself). */
static int32_t byte_token(const llmk_tokenizer *t, const char *piece, unsigned char byte) {
    int32_t id = llmk_tokenizer_find(t, piece, strlen(piece));
    char b[8];
    size_t k = 0;
    CHECK(id >= 0 && llmk_tokenizer_token_bytes(t, id, b, sizeof b, &k) == LLMK_OK && k == 1 &&
          (unsigned char)b[0] == byte);
    return id;
}

/* A character whose first byte ends the analysis message and whose second
 * opens the final one: each part ends or starts with U+FFFD, neither gets
 * the other's byte (fed one part at a time, "é" would land in the answer). */
static void test_harmony_split_character(const llmk_tokenizer *t) {
    int32_t ids[128];
    size_t n = 0;
    append_ids(t, "<|channel|>analysis<|message|>Think", ids, &n, 128);
    ids[n++] = byte_token(t, "\xc3\x83", 0xc3);
    append_ids(t, "<|end|><|start|>assistant<|channel|>final<|message|>", ids, &n, 128);
    ids[n++] = byte_token(t, "\xc2\xa9", 0xa9);
    append_ids(t, "ok<|return|>", ids, &n, 128);
    llmk_harmony_state hs;
    llmk_detok_state ds = {0};
    CHECK_STATUS(llmk_harmony_init(t, &hs), LLMK_OK);
    char text[2][64] = {{0}}, piece[16];
    size_t len[2] = {0, 0};
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        llmk_harmony_part part = LLMK_HARMONY_NONE;
        CHECK_STATUS(llmk_harmony_text(&hs, t, &ds, ids[i], piece, sizeof piece, &k, &part), LLMK_OK);
        if (!k) continue;
        CHECK(part == LLMK_HARMONY_CONTENT || part == LLMK_HARMONY_REASONING);
        int w = part == LLMK_HARMONY_REASONING;
        if (len[w] + k < sizeof text[w]) memcpy(text[w] + len[w], piece, k), len[w] += k;
    }
    CHECK(!strcmp(text[1], "Think\xef\xbf\xbd"));
    CHECK(!strcmp(text[0], "\xef\xbf\xbdok"));
    /* a buffer too small for the ending: the size needed, and neither state changed */
    size_t m = 0, k = 0;
    int32_t lead = byte_token(t, "\xc3\x83", 0xc3);
    while (ids[m] != lead) m++;
    llmk_harmony_state h2;
    llmk_detok_state d2 = {0};
    llmk_harmony_part part;
    CHECK_STATUS(llmk_harmony_init(t, &h2), LLMK_OK);
    for (size_t i = 0; i <= m; i++)
        CHECK_STATUS(llmk_harmony_text(&h2, t, &d2, ids[i], piece, sizeof piece, &k, &part), LLMK_OK);
    CHECK(k == 0 && d2.n_pending == 1 && h2.phase != 0);
    int phase = h2.phase; /* in the analysis body; the <|end|> that follows would close it */
    CHECK_STATUS(llmk_harmony_text(&h2, t, &d2, ids[m + 1], piece, 2, &k, &part), LLMK_BUFFER_TOO_SMALL);
    CHECK(k == 3 && d2.n_pending == 1 && h2.phase == phase && h2.analysis);
    CHECK_STATUS(llmk_harmony_text(&h2, t, &d2, ids[m + 1], piece, sizeof piece, &k, &part), LLMK_OK);
    CHECK(k == 3 && part == LLMK_HARMONY_REASONING && d2.n_pending == 0 && h2.phase != phase);
    CHECK_STATUS(llmk_harmony_text(NULL, t, &d2, ids[0], piece, sizeof piece, &k, &part), LLMK_INVALID_ARGUMENT);
}

static void test_harmony_reply(void) {
    llmk_gguf *g = NULL;
    llmk_tokenizer *t = NULL;
    CHECK_STATUS(llmk_gguf_open("tests/fixtures/model/tiny/tiny_gptoss.gguf", &g), LLMK_OK);
    CHECK_STATUS(llmk_tokenizer_load(g, &t), LLMK_OK);
    if (!t) return;
    char c[512], r[512];
    split_reply(t,
                "<|channel|>analysis<|message|>The user greets. Reply.<|end|><|start|>assistant<|channel|>final"
                "<|message|>Hello there!<|return|>",
                c, r, sizeof c);
    CHECK(!strcmp(c, "Hello there!") && !strcmp(r, "The user greets. Reply."));
    /* a commentary preamble is the answer's; a tool call's header ("to=...") is not text */
    split_reply(t,
                "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
                "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
                c, r, sizeof c);
    CHECK(!strcmp(c, "{\"city\":\"Paris\"}") && !strcmp(r, "Need the weather."));
    /* no markers at all (a model that ignores the format): all content */
    split_reply(t, "Just text.", c, r, sizeof c);
    CHECK(!strcmp(c, "Just text.") && !r[0]);
    test_harmony_split_character(t);
    llmk_harmony_state hs;
    llmk_tokenizer_free(t);
    llmk_gguf_close(g);
    /* a vocabulary without the markers */
    CHECK_STATUS(llmk_gguf_open("tests/fixtures/model/tiny/tiny_qwen3.gguf", &g), LLMK_OK);
    CHECK_STATUS(llmk_tokenizer_load(g, &t), LLMK_OK);
    if (t) CHECK_STATUS(llmk_harmony_init(t, &hs), LLMK_NOT_FOUND);
    llmk_tokenizer_free(t);
    llmk_gguf_close(g);
}

int main(void) {
    test_recognise();
    test_parse_messages();
    test_harmony_reply();
    return check_summary("test_chat");
}
