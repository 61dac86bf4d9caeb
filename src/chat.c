/* Chat templates. llmk does not run Jinja: it recognises the handful of
 * template families its models use by their marker tokens and renders each
 * with a small C function that produces the same bytes the model's Jinja
 * template does (checked against jinja2 renderings in tests/fixtures/chat). */
#include "internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum tkind { T_CHATML, T_LLAMA3, T_ZEPHYR, T_LLAMA2, T_GEMMA, T_HARMONY, T_COUNT };

static const struct {
    const char *name;
    const char *marker; /* a string only this family's template text contains */
} kinds[T_COUNT] = {
    [T_CHATML] = {"chatml", "<|im_start|>"},
    [T_LLAMA3] = {"llama3", "<|start_header_id|>"},
    [T_ZEPHYR] = {"zephyr", "<|user|>"},
    [T_LLAMA2] = {"llama2", "[INST]"},
    [T_GEMMA] = {"gemma", "<start_of_turn>"},
    [T_HARMONY] = {"harmony", "<|channel|>"},
};

struct llmk_chat_template {
    enum tkind kind;
    char *default_system; /* NULL when the template injects none */
    char *bos, *eos;
    char date[16]; /* harmony's "Current date"; empty: today, local time */
};

/* ---- a growing output string ----------------------------------------- */

typedef struct {
    char *p;
    size_t len, cap;
    int err;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->err) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) {
            if (cap > SIZE_MAX / 2) {
                b->err = 1;
                return;
            }
            cap *= 2;
        }
        char *np = realloc(b->p, cap);
        if (!np) {
            b->err = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

/* Jinja's trim / Python's str.strip() for the ASCII whitespace it removes. */
static void sb_trimmed(sbuf *b, const char *s) {
    size_t n = strlen(s), i = 0;
    while (i < n && strchr(" \t\n\r\v\f", s[i])) i++;
    while (n > i && strchr(" \t\n\r\v\f", s[n - 1])) n--;
    sb_put(b, s + i, n - i);
}

/* ---- recognising ------------------------------------------------------ */

/* A ChatML template that injects a system prompt when the conversation has
 * none carries it as a literal: '<|im_start|>system' + newline (raw or the
 * two characters backslash-n) + text + '<|im_end|>'. The text must be plain
 * (no quote or Jinja syntax), otherwise it is an expression, not a default. */
static char *find_default_system(const char *t, size_t len) {
    static const char head[] = "<|im_start|>system";
    static const char tail[] = "<|im_end|>";
    const char *end = t + len;
    for (const char *p = t; p + sizeof head - 1 <= end; p++) {
        if (memcmp(p, head, sizeof head - 1)) continue;
        const char *q = p + sizeof head - 1;
        if (q < end && *q == '\n') q++;
        else if (q + 1 < end && q[0] == '\\' && q[1] == 'n') q += 2;
        else continue;
        const char *e = q;
        while (e + sizeof tail - 1 <= end && memcmp(e, tail, sizeof tail - 1)) {
            if (strchr("'\"{}+", *e)) break;
            e++;
        }
        if (e + sizeof tail - 1 > end || memcmp(e, tail, sizeof tail - 1) || e == q) continue;
        char *out = malloc((size_t)(e - q) + 1);
        if (!out) return NULL;
        size_t w = 0;
        for (const char *c = q; c < e; c++) {
            if (c[0] == '\\' && c + 1 < e && c[1] == 'n') {
                out[w++] = '\n';
                c++;
            } else {
                out[w++] = *c;
            }
        }
        out[w] = 0;
        return out;
    }
    return NULL;
}

static int contains(const char *t, size_t len, const char *needle) {
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= len; i++)
        if (!memcmp(t + i, needle, n)) return 1;
    return 0;
}

int llmk_chat_template_init(const char *name, const char *text, size_t text_len, const char *bos,
                            const char *eos, llmk_chat_template **out) {
    llmk_error_clear();
    if (!out) return llmk_fail(LLMK_INVALID_ARGUMENT, "chat_template_init: NULL out");
    *out = NULL;
    if (!name && !text)
        return llmk_fail(LLMK_TEMPLATE_UNKNOWN,
                         "the model has no tokenizer.chat_template; pass --chat-template "
                         "chatml|llama3|zephyr|llama2|gemma|harmony");
    int kind = -1;
    if (name) {
        for (int i = 0; i < T_COUNT; i++)
            if (!strcmp(name, kinds[i].name)) kind = i;
        if (kind < 0)
            return llmk_fail(LLMK_TEMPLATE_UNKNOWN,
                             "chat template '%s' is not one of chatml, llama3, zephyr, llama2, gemma, "
                             "harmony",
                             name);
    } else {
        for (int i = 0; i < T_COUNT && kind < 0; i++)
            if (contains(text, text_len, kinds[i].marker)) kind = i;
        /* Llama-3.1+ templates always inject a dated system header (and
         * tool sections) that the 3.0 renderer does not write: refuse rather
         * than build a prompt that differs from the model's own. */
        if (kind == T_LLAMA3 && contains(text, text_len, "Cutting Knowledge Date"))
            return llmk_fail(LLMK_TEMPLATE_UNKNOWN,
                             "tokenizer.chat_template is the Llama-3.1 form (dated system header), "
                             "which llmk does not render; --chat-template llama3 uses the 3.0 form");
        if (kind < 0)
            return llmk_fail(LLMK_TEMPLATE_UNKNOWN,
                             "tokenizer.chat_template (%zu bytes) has none of the markers of "
                             "chatml, llama3, zephyr, llama2, gemma or harmony; pass --chat-template NAME",
                             text_len);
    }
    llmk_chat_template *t = calloc(1, sizeof *t);
    if (!t) return llmk_fail(LLMK_OUT_OF_MEMORY, "chat template");
    t->kind = (enum tkind)kind;
    t->bos = strdup(bos ? bos : "");
    t->eos = strdup(eos ? eos : "");
    if (kind == T_CHATML && text) t->default_system = find_default_system(text, text_len);
    if (!t->bos || !t->eos) {
        llmk_chat_template_free(t);
        return llmk_fail(LLMK_OUT_OF_MEMORY, "chat template");
    }
    *out = t;
    return LLMK_OK;
}

static const char *vocab_text(const llmk_gguf *g, const char *id_key) {
    uint32_t id;
    const char *s;
    size_t len;
    if (llmk_gguf_get_u32(g, id_key, &id) != LLMK_OK) return "";
    if (llmk_gguf_arr_str(g, "tokenizer.ggml.tokens", id, &s, &len) != LLMK_OK) return "";
    return s;
}

int llmk_chat_template_from_gguf(const llmk_gguf *g, const char *name, llmk_chat_template **out) {
    llmk_error_clear();
    if (!g) return llmk_fail(LLMK_INVALID_ARGUMENT, "chat_template_from_gguf: NULL file");
    const char *text = NULL;
    size_t len = 0;
    if (llmk_gguf_get_str(g, "tokenizer.chat_template", &text, &len) != LLMK_OK) text = NULL;
    return llmk_chat_template_init(name, text, len, vocab_text(g, "tokenizer.ggml.bos_token_id"),
                                   vocab_text(g, "tokenizer.ggml.eos_token_id"), out);
}

void llmk_chat_template_free(llmk_chat_template *t) {
    if (!t) return;
    free(t->default_system);
    free(t->bos);
    free(t->eos);
    free(t);
}

const char *llmk_chat_template_name(const llmk_chat_template *t) {
    return t ? kinds[t->kind].name : "?";
}

const char *llmk_chat_template_default_system(const llmk_chat_template *t) {
    return t ? t->default_system : NULL;
}

/* ---- rendering --------------------------------------------------------- */

static void render_chatml(const llmk_chat_template *t, sbuf *b, const llmk_chat_message *m,
                          size_t n, bool gen) {
    if (n && t->default_system && strcmp(m[0].role, "system")) {
        sb_str(b, "<|im_start|>system\n");
        sb_str(b, t->default_system);
        sb_str(b, "<|im_end|>\n");
    }
    for (size_t i = 0; i < n; i++) {
        sb_str(b, "<|im_start|>");
        sb_str(b, m[i].role);
        sb_str(b, "\n");
        sb_str(b, m[i].content);
        sb_str(b, "<|im_end|>\n");
    }
    if (gen) sb_str(b, "<|im_start|>assistant\n");
}

static void render_llama3(const llmk_chat_template *t, sbuf *b, const llmk_chat_message *m,
                          size_t n, bool gen) {
    for (size_t i = 0; i < n; i++) {
        if (i == 0) sb_str(b, t->bos);
        sb_str(b, "<|start_header_id|>");
        sb_str(b, m[i].role);
        sb_str(b, "<|end_header_id|>\n\n");
        sb_trimmed(b, m[i].content);
        sb_str(b, "<|eot_id|>");
    }
    if (gen) sb_str(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static int render_zephyr(const llmk_chat_template *t, sbuf *b, const llmk_chat_message *m,
                         size_t n, bool gen) {
    for (size_t i = 0; i < n; i++) {
        const char *r = m[i].role;
        /* other roles render nothing, as the template's if/elif chain */
        if (!strcmp(r, "user") || !strcmp(r, "system") || !strcmp(r, "assistant")) {
            sb_str(b, "<|");
            sb_str(b, r);
            sb_str(b, "|>\n");
            sb_str(b, m[i].content);
            sb_str(b, t->eos);
            sb_str(b, "\n");
        }
        if (i + 1 == n && gen) sb_str(b, "<|assistant|>\n");
    }
    return LLMK_OK;
}

static int render_llama2(const llmk_chat_template *t, sbuf *b, const llmk_chat_message *m,
                         size_t n, bool gen) {
    (void)gen; /* the Llama-2 template adds nothing for the generation prompt */
    const char *sys = NULL;
    size_t first = 0;
    if (n && !strcmp(m[0].role, "system")) {
        sys = m[0].content;
        first = 1;
    }
    for (size_t i = first; i < n; i++) {
        bool user = !strcmp(m[i].role, "user");
        if (user != ((i - first) % 2 == 0))
            return llmk_fail(LLMK_BAD_REQUEST,
                             "llama2 template: message %zu has role '%s'; roles must alternate "
                             "user/assistant/user/...",
                             i, m[i].role);
        sbuf c = {0};
        if (i == first && sys) {
            sb_str(&c, "<<SYS>>\n");
            sb_str(&c, sys);
            sb_str(&c, "\n<</SYS>>\n\n");
        }
        sb_str(&c, m[i].content);
        if (c.err) {
            free(c.p);
            b->err = 1;
            return LLMK_OK;
        }
        if (user) {
            sb_str(b, t->bos);
            sb_str(b, "[INST] ");
            sb_trimmed(b, c.p ? c.p : "");
            sb_str(b, " [/INST]");
        } else if (!strcmp(m[i].role, "assistant")) {
            sb_str(b, " ");
            sb_trimmed(b, c.p ? c.p : "");
            sb_str(b, " ");
            sb_str(b, t->eos);
        }
        free(c.p);
    }
    return LLMK_OK;
}

/* Gemma (2 and 3): <bos>, then <start_of_turn>ROLE\n CONTENT <end_of_turn>\n
 * per message, the assistant written "model", contents trimmed. Gemma has no
 * system turn: a leading system message is written, untrimmed and followed by
 * a blank line, at the start of the first turn's content. As the template,
 * only the user/non-user alternation is checked; other roles pass through. */
static int render_gemma(const llmk_chat_template *t, sbuf *b, const llmk_chat_message *m,
                        size_t n, bool gen) {
    size_t first = 0;
    if (n && !strcmp(m[0].role, "system")) first = 1;
    sb_str(b, t->bos);
    for (size_t i = first; i < n; i++) {
        bool user = !strcmp(m[i].role, "user");
        if (user != ((i - first) % 2 == 0))
            return llmk_fail(LLMK_BAD_REQUEST,
                             "gemma template: message %zu has role '%s'; roles must alternate "
                             "user/assistant/user/...",
                             i, m[i].role);
        sb_str(b, "<start_of_turn>");
        sb_str(b, strcmp(m[i].role, "assistant") ? m[i].role : "model");
        sb_str(b, "\n");
        if (i == first && first) {
            sb_str(b, m[0].content);
            sb_str(b, "\n\n");
        }
        sb_trimmed(b, m[i].content);
        sb_str(b, "<end_of_turn>\n");
    }
    if (gen) sb_str(b, "<start_of_turn>model\n");
    return LLMK_OK;
}

/* Harmony (gpt-oss), as OpenAI's chat_template.jinja renders it without
 * tools, builtin tools or thinking fields and with its defaults
 * (model_identity, reasoning_effort "medium"): a system message with the
 * knowledge cutoff and the current date (the template's
 * strftime_now("%Y-%m-%d"), local time, as transformers and llama.cpp's
 * server give it), a developer message "# Instructions" holding a leading
 * system or developer message's text when it is not empty, then user turns
 * and the assistant's final-channel turns (<|end|>, or <|return|> for a last
 * assistant turn without the generation prompt). Roles the template skips
 * (system or developer after the first message, unknown ones) are skipped;
 * what it refuses (a tool message: llmk messages carry no tool calls; a
 * channel tag in an assistant's content, an empty conversation) is
 * refused. */
/* YYYY-MM-DD: digits and the two dashes (the template prints it as given). */
static bool iso_date(const char *d) {
    if (strlen(d) != 10) return false;
    for (int i = 0; i < 10; i++)
        if (i == 4 || i == 7 ? d[i] != '-' : (d[i] < '0' || d[i] > '9')) return false;
    return true;
}

static int render_harmony(const llmk_chat_template *t, sbuf *b, const llmk_chat_message *m,
                          size_t n, const llmk_chat_render_opts *o) {
    bool gen = o->add_generation_prompt;
    if (!n) /* the template reads messages[0] */
        return llmk_fail(LLMK_BAD_REQUEST, "harmony template: the conversation has no message");
    const char *effort = o->reasoning_effort ? o->reasoning_effort : "medium";
    if (strcmp(effort, "low") && strcmp(effort, "medium") && strcmp(effort, "high"))
        return llmk_fail(LLMK_BAD_REQUEST, "harmony template: reasoning_effort '%.40s' (low, medium or high)", effort);
    if (o->date && !iso_date(o->date))
        return llmk_fail(LLMK_BAD_REQUEST, "harmony template: date '%.40s' is not YYYY-MM-DD", o->date);
    char today[16];
    const char *date = o->date ? o->date : t->date;
    if (!date[0]) {
        time_t now = time(NULL);
        struct tm tm;
        if (!localtime_r(&now, &tm) || !strftime(today, sizeof today, "%Y-%m-%d", &tm))
            return llmk_fail(LLMK_UNSUPPORTED, "harmony template: cannot format today's date");
        date = today;
    }
    sb_str(b, "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
              "Knowledge cutoff: 2024-06\nCurrent date: ");
    sb_str(b, date);
    sb_str(b, "\n\nReasoning: ");
    sb_str(b, effort);
    sb_str(b, "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every "
              "message.<|end|>");
    size_t first = 0;
    if (n && (!strcmp(m[0].role, "system") || !strcmp(m[0].role, "developer"))) {
        first = 1;
        if (m[0].content[0]) {
            sb_str(b, "<|start|>developer<|message|># Instructions\n\n");
            sb_str(b, m[0].content);
            sb_str(b, "\n\n<|end|>");
        }
    }
    for (size_t i = first; i < n; i++) {
        const char *r = m[i].role, *c = m[i].content;
        if (!strcmp(r, "assistant")) {
            if (strstr(c, "<|channel|>analysis<|message|>") || strstr(c, "<|channel|>final<|message|>"))
                return llmk_fail(LLMK_BAD_REQUEST,
                                 "harmony template: message %zu (assistant) holds <|channel|> tags; "
                                 "pass only the final message's text",
                                 i);
            sb_str(b, "<|start|>assistant<|channel|>final<|message|>");
            sb_str(b, c);
            sb_str(b, i + 1 == n && !gen ? "<|return|>" : "<|end|>");
        } else if (!strcmp(r, "user")) {
            sb_str(b, "<|start|>user<|message|>");
            sb_str(b, c);
            sb_str(b, "<|end|>");
        } else if (!strcmp(r, "tool")) {
            return llmk_fail(LLMK_BAD_REQUEST,
                             "harmony template: message %zu has role 'tool'; tool calls and results "
                             "are not rendered by llmk",
                             i);
        }
    }
    if (gen) sb_str(b, "<|start|>assistant");
    return LLMK_OK;
}

int llmk_chat_template_set_date(llmk_chat_template *t, const char *date) {
    if (!t || !date || strlen(date) >= sizeof t->date)
        return llmk_fail(LLMK_INVALID_ARGUMENT, "chat_template_set_date: a date of at most %zu bytes",
                         sizeof t->date - 1);
    strcpy(t->date, date);
    return LLMK_OK;
}

int llmk_chat_render(const llmk_chat_template *t, const llmk_chat_message *msgs, size_t n,
                     bool add_generation_prompt, char **out, size_t *out_len) {
    llmk_chat_render_opts o = {.add_generation_prompt = add_generation_prompt};
    return llmk_chat_render_with(t, msgs, n, &o, out, out_len);
}

int llmk_chat_render_with(const llmk_chat_template *t, const llmk_chat_message *msgs, size_t n,
                          const llmk_chat_render_opts *opts, char **out, size_t *out_len) {
    llmk_error_clear();
    if (!t || !out || !opts || (n && !msgs))
        return llmk_fail(LLMK_INVALID_ARGUMENT, "chat_render: NULL argument");
    *out = NULL;
    if (out_len) *out_len = 0;
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content)
            return llmk_fail(LLMK_BAD_REQUEST, "chat_render: message %zu has no %s", i,
                             msgs[i].role ? "content" : "role");
    sbuf b = {0};
    sb_put(&b, "", 0); /* an empty conversation still gives a string */
    int rc = LLMK_OK;
    bool add_generation_prompt = opts->add_generation_prompt;
    switch (t->kind) {
    case T_CHATML: render_chatml(t, &b, msgs, n, add_generation_prompt); break;
    case T_LLAMA3: render_llama3(t, &b, msgs, n, add_generation_prompt); break;
    case T_ZEPHYR: rc = render_zephyr(t, &b, msgs, n, add_generation_prompt); break;
    case T_LLAMA2: rc = render_llama2(t, &b, msgs, n, add_generation_prompt); break;
    case T_GEMMA: rc = render_gemma(t, &b, msgs, n, add_generation_prompt); break;
    case T_HARMONY: rc = render_harmony(t, &b, msgs, n, opts); break;
    default: LLMK_CHECK(0);
    }
    if (rc != LLMK_OK || b.err) {
        free(b.p);
        return rc != LLMK_OK ? rc : llmk_fail(LLMK_OUT_OF_MEMORY, "chat_render: %zu messages", n);
    }
    *out = b.p;
    if (out_len) *out_len = b.len;
    return LLMK_OK;
}

/* ---- harmony replies ----------------------------------------------------- */

enum { HM_OUTSIDE, HM_HEADER, HM_CHANNEL, HM_BODY };

static int32_t marker(const llmk_tokenizer *t, const char *text) {
    return llmk_tokenizer_find(t, text, strlen(text));
}

int llmk_harmony_init(const llmk_tokenizer *t, llmk_harmony_state *st) {
    if (!t || !st) return llmk_fail(LLMK_INVALID_ARGUMENT, "harmony_init: NULL argument");
    memset(st, 0, sizeof *st);
    st->start = marker(t, "<|start|>"), st->channel = marker(t, "<|channel|>"), st->message = marker(t, "<|message|>");
    st->end = marker(t, "<|end|>"), st->ret = marker(t, "<|return|>"), st->call = marker(t, "<|call|>");
    st->phase = HM_OUTSIDE, st->last = LLMK_HARMONY_CONTENT;
    if (st->channel < 0 || st->message < 0 || st->end < 0)
        return llmk_fail(LLMK_NOT_FOUND, "harmony_init: the vocabulary has no <|channel|>, <|message|> or <|end|>");
    return LLMK_OK;
}

/* The channel a header names: its first word ("analysis", or "commentary
 * to=functions.f ..."). */
static bool analysis_channel(const llmk_harmony_state *st) {
    size_t n = strlen("analysis");
    return st->chan_len >= n && !memcmp(st->chan, "analysis", n) && (st->chan_len == n || st->chan[n] == ' ');
}

llmk_harmony_part llmk_harmony_feed(llmk_harmony_state *st, const llmk_tokenizer *t, int32_t id) {
    if (id < 0) return LLMK_HARMONY_NONE;
    if (id == st->start || id == st->end || id == st->ret || id == st->call) {
        st->phase = HM_HEADER;
        return LLMK_HARMONY_NONE;
    }
    if (id == st->channel) {
        st->phase = HM_CHANNEL, st->chan_len = 0;
        return LLMK_HARMONY_NONE;
    }
    if (id == st->message) {
        st->phase = HM_BODY, st->analysis = analysis_channel(st);
        return LLMK_HARMONY_NONE;
    }
    if (st->phase == HM_CHANNEL) { /* the name, kept up to the buffer's size */
        size_t n = 0;
        char buf[64];
        if (llmk_tokenizer_token_bytes(t, id, buf, sizeof buf, &n) == LLMK_OK)
            for (size_t i = 0; i < n && st->chan_len + 1 < sizeof st->chan; i++) st->chan[st->chan_len++] = buf[i];
        st->chan[st->chan_len] = 0;
        return LLMK_HARMONY_NONE;
    }
    if (st->phase == HM_HEADER) return LLMK_HARMONY_NONE;
    return st->phase == HM_BODY && st->analysis ? LLMK_HARMONY_REASONING : LLMK_HARMONY_CONTENT;
}

int llmk_harmony_text(llmk_harmony_state *st, const llmk_tokenizer *t, llmk_detok_state *ds, int32_t id, char *out,
                      size_t cap, size_t *n_out, llmk_harmony_part *part) {
    llmk_error_clear();
    if (!st || !t || !ds || !n_out || !part) return llmk_fail(LLMK_INVALID_ARGUMENT, "harmony_text: NULL argument");
    *n_out = 0;
    llmk_harmony_state before = *st;
    llmk_harmony_part p = llmk_harmony_feed(st, t, id);
    int rc = LLMK_OK;
    if (p != LLMK_HARMONY_NONE) {
        *part = p;
        if ((rc = llmk_detok_feed(t, ds, id, false, out, cap, n_out)) == LLMK_OK) st->last = p;
    } else {
        *part = st->last; /* a marker or header: only an interrupted character's ending, where it began */
        if (ds->n_pending) rc = llmk_detok_flush(t, ds, out, cap, n_out);
    }
    if (rc != LLMK_OK) *st = before;
    return rc;
}

/* ---- messages from JSON ------------------------------------------------ */

/* Byte offset of the first \u0000 escape in JSON text (len when none). A
 * backslash escapes the next character, so "\\u0000" (an escaped backslash,
 * then "u0000") is not one. cJSON decodes the escape into a NUL that would
 * silently cut the string short. */
static size_t find_nul_escape(const char *json, size_t len) {
    for (size_t i = 0; i + 1 < len; i++) {
        if (json[i] != '\\') continue;
        if (json[i + 1] == 'u' && i + 5 < len && !memcmp(json + i + 2, "0000", 4)) return i;
        i++; /* skip the escaped character */
    }
    return len;
}

int llmk_chat_parse_messages(const char *json, size_t len, llmk_chat_message **msgs, size_t *n) {
    llmk_error_clear();
    if (!json || !msgs || !n) return llmk_fail(LLMK_INVALID_ARGUMENT, "parse_messages: NULL argument");
    *msgs = NULL;
    *n = 0;
    size_t nul_at = find_nul_escape(json, len);
    if (nul_at < len)
        return llmk_fail(LLMK_BAD_REQUEST, "messages: \\u0000 (NUL) at byte %zu; C strings cannot hold it, "
                         "and cutting the text there would change the request", nul_at);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= json && at <= json + len ? (size_t)(at - json) : len;
        return llmk_fail(LLMK_BAD_REQUEST, "messages: invalid JSON near byte %zu of %zu", off, len);
    }
    size_t rest = end && end >= json && end <= json + len ? (size_t)(end - json) : len;
    while (rest < len && (json[rest] == ' ' || json[rest] == '\t' || json[rest] == '\n' || json[rest] == '\r'))
        rest++;
    if (rest < len) {
        cJSON_Delete(root);
        return llmk_fail(LLMK_BAD_REQUEST, "messages: unexpected text after the JSON value at byte %zu of %zu",
                         rest, len);
    }
    const cJSON *arr = root;
    if (cJSON_IsObject(root)) arr = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!cJSON_IsArray(arr)) {
        cJSON_Delete(root);
        return llmk_fail(LLMK_BAD_REQUEST,
                         "messages: expected an array of {role, content} (or {\"messages\": [...]})");
    }
    size_t count = (size_t)cJSON_GetArraySize(arr), bytes = count * sizeof(llmk_chat_message);
    size_t i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(it, "role");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "content");
        if (!cJSON_IsString(r) || !cJSON_IsString(c)) {
            cJSON_Delete(root);
            return llmk_fail(LLMK_BAD_REQUEST, "messages[%zu]: needs string \"role\" and \"content\"",
                             i);
        }
        bytes += strlen(r->valuestring) + strlen(c->valuestring) + 2;
        i++;
    }
    llmk_chat_message *m = malloc(bytes ? bytes : 1);
    if (!m) {
        cJSON_Delete(root);
        return llmk_fail(LLMK_OUT_OF_MEMORY, "messages: %zu bytes", bytes);
    }
    char *s = (char *)(m + count);
    i = 0;
    cJSON_ArrayForEach(it, arr) {
        const char *r = cJSON_GetObjectItemCaseSensitive(it, "role")->valuestring;
        const char *c = cJSON_GetObjectItemCaseSensitive(it, "content")->valuestring;
        size_t lr = strlen(r) + 1, lc = strlen(c) + 1;
        memcpy(s, r, lr);
        m[i].role = s;
        s += lr;
        memcpy(s, c, lc);
        m[i].content = s;
        s += lc;
        i++;
    }
    cJSON_Delete(root);
    *msgs = m;
    *n = count;
    return LLMK_OK;
}
