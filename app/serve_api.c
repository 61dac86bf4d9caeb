/* llmk serve: the OpenAI API's JSON (docs/serve.md). A request body becomes
 * a checked serve_req or a 400 naming the field; a job's tokens become a
 * chat.completion / text_completion object, or SSE chunks. Shapes follow
 * the OpenAI API reference; unknown fields are ignored, as OpenAI-compatible
 * servers do, so clients that send more than we use still work. */
#include "gen_opts.h"
#include "serve.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEED_MAX 9007199254740992.0 /* 2^53: larger integers do not survive JSON's doubles */

void serve_req_free(struct serve_req *r) {
    free(r->prompt), free(r->bias);
    llmk_grammar_free(r->grammar);
    for (size_t i = 0; i < r->n_stops; i++) free(r->stops[i]);
    memset(r, 0, sizeof *r);
}

char *api_error(const char *message, const char *type, const char *param, const char *code) {
    cJSON *root = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(e, "message", message);
    cJSON_AddStringToObject(e, "type", type);
    if (param) cJSON_AddStringToObject(e, "param", param);
    else cJSON_AddNullToObject(e, "param");
    if (code) cJSON_AddStringToObject(e, "code", code);
    else cJSON_AddNullToObject(e, "code");
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

/* ---- requests ----------------------------------------------------------------- */

struct parse {
    struct server *s;
    const cJSON *root;
    struct serve_req *r;
    char **err;
};

int api_bad_v(char **err, const char *param, const char *fmt, va_list ap) {
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    *err = api_error(msg, "invalid_request_error", param, NULL);
    return 400;
}

static int bad(struct parse *p, const char *param, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int bad(struct parse *p, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int code = api_bad_v(p->err, param, fmt, ap);
    va_end(ap);
    return code;
}

static const char *kind(const cJSON *j) {
    return cJSON_IsString(j) ? "a string" : cJSON_IsNumber(j) ? "a number" : cJSON_IsBool(j) ? "a boolean"
           : cJSON_IsNull(j) ? "null" : cJSON_IsArray(j) ? "an array" : "an object";
}

/* The field, or NULL when absent or null (null means "the default" in OpenAI's API). */
static const cJSON *field(const struct parse *p, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(p->root, key);
    return cJSON_IsNull(v) ? NULL : v;
}

/* The schema's grammar into r->grammar; a schema the converter refuses is a
 * 400 that names the keyword and its JSON pointer. */
static int schema_grammar(struct parse *p, struct serve_req *r, const char *param, const cJSON *schema) {
    if (r->grammar) return bad(p, param, "'%s' and 'grammar' constrain the output twice: give one", param);
    if (!cJSON_IsObject(schema) && !cJSON_IsBool(schema))
        return bad(p, param, "'%s': the schema must be an object, got %s", param, kind(schema));
    char *text = cJSON_PrintUnformatted(schema);
    if (!text) return bad(p, param, "'%s': out of memory", param);
    int st = gen_schema_grammar(text, strlen(text), &r->grammar);
    free(text);
    if (st != LLMK_OK) return bad(p, param, "'%s': %s", param, llmk_last_error());
    return 0;
}

/* OpenAI's response_format ({"type": "text" | "json_object" | "json_schema"})
 * and llama-server's "json_schema" body field. 0 when fine. */
static int schema_fields(struct parse *p, struct serve_req *r) {
    const cJSON *js = field(p, "json_schema"), *rf = field(p, "response_format");
    if (js && rf) return bad(p, "response_format", "give 'response_format' or 'json_schema', not both");
    if (js) return schema_grammar(p, r, "json_schema", js);
    if (!rf) return 0;
    const cJSON *t = cJSON_IsObject(rf) ? cJSON_GetObjectItemCaseSensitive(rf, "type") : NULL;
    if (!cJSON_IsString(t))
        return bad(p, "response_format", "'response_format' must be an object with a 'type' (text, json_object, "
                   "json_schema)");
    if (!strcmp(t->valuestring, "text")) return 0;
    if (!strcmp(t->valuestring, "json_object")) {
        const cJSON *sc = cJSON_GetObjectItemCaseSensitive(rf, "schema"); /* llama-server's extension */
        if (sc) return schema_grammar(p, r, "response_format", sc);
        cJSON *any = cJSON_Parse(LLMK_JSON_SCHEMA_ANY_OBJECT);
        int rc = any ? schema_grammar(p, r, "response_format", any) : bad(p, "response_format", "out of memory");
        cJSON_Delete(any);
        return rc;
    }
    if (strcmp(t->valuestring, "json_schema") != 0)
        return bad(p, "response_format", "'response_format.type' must be text, json_object or json_schema, got '%.60s'",
                   t->valuestring);
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
    if (!cJSON_IsObject(w))
        return bad(p, "response_format", "'response_format.json_schema' must be an object with a 'schema'");
    const cJSON *strict = cJSON_GetObjectItemCaseSensitive(w, "strict"), *name = cJSON_GetObjectItemCaseSensitive(w, "name");
    if (strict && !cJSON_IsBool(strict) && !cJSON_IsNull(strict))
        return bad(p, "response_format", "'response_format.json_schema.strict' must be a boolean");
    if (name && !cJSON_IsString(name))
        return bad(p, "response_format", "'response_format.json_schema.name' must be a string");
    /* The grammar always holds the output to the schema, so strict false gets it too. */
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(w, "schema");
    if (!sc) {
        cJSON *any = cJSON_Parse(LLMK_JSON_SCHEMA_ANY_VALUE);
        int rc = any ? schema_grammar(p, r, "response_format", any) : bad(p, "response_format", "out of memory");
        cJSON_Delete(any);
        return rc;
    }
    return schema_grammar(p, r, "response_format", sc);
}

/* An optional number in [lo, hi] (integer: whole). 0 when fine. */
static int num(struct parse *p, const char *key, double lo, double hi, bool integer, double *out, bool *given) {
    const cJSON *v = field(p, key);
    *given = v != NULL;
    if (!v) return 0;
    const char *what = integer ? "an integer" : "a number";
    if (!cJSON_IsNumber(v)) return bad(p, key, "'%s' must be %s, got %s", key, what, kind(v));
    double d = v->valuedouble;
    if (!isfinite(d) || (integer && d != floor(d)) || d < lo || d > hi)
        return bad(p, key, "'%s' must be %s in [%g, %g], got %.17g", key, what, lo, hi, d);
    *out = d;
    return 0;
}

static int boolean(struct parse *p, const char *key, bool *out) {
    const cJSON *v = field(p, key);
    if (!v) return 0;
    if (!cJSON_IsBool(v)) return bad(p, key, "'%s' must be a boolean, got %s", key, kind(v));
    *out = cJSON_IsTrue(v);
    return 0;
}

/* Without a tokenizer (fuzz/fuzz_serve.c parses bodies with no model loaded)
 * each byte is one token, so a prompt's length still meets the context and
 * its ids the vocabulary's bounds. */
static int bytes_as_tokens(struct parse *p, const char *param, const char *text, size_t len) {
    if (!(p->r->prompt = malloc((len + 1) * sizeof *p->r->prompt))) return bad(p, param, "out of memory");
    for (size_t i = 0; i < len; i++) p->r->prompt[i] = (int32_t)((unsigned char)text[i] % p->s->n_vocab);
    p->r->n_prompt = len;
    return 0;
}

static int tokenize(struct parse *p, const char *param, const char *text, bool add_bos, bool special) {
    const llmk_tokenizer *t = p->s->tok;
    size_t len = strlen(text), cap = len + 8, n = 0;
    if (!t) return bytes_as_tokens(p, param, text, len);
    for (int pass = 0; pass < 2; pass++) {
        int32_t *v = malloc(cap * sizeof *v);
        if (!v) return bad(p, param, "the prompt of %zu bytes is too large", len);
        int st = llmk_tokenize(t, text, len, add_bos, special, v, cap, &n);
        if (st == LLMK_OK) {
            p->r->prompt = v, p->r->n_prompt = n;
            return 0;
        }
        free(v);
        if (st != LLMK_BUFFER_TOO_SMALL) return bad(p, param, "tokenizing: %s", llmk_last_error());
        cap = n;
    }
    return bad(p, param, "tokenizing: the token count changed between passes");
}

/* A message's content: a string, or a list of {"type": "text", "text": ...}
 * parts (joined); *owned is set when the text was allocated. */
static int content(struct parse *p, const cJSON *c, size_t i, const char **out, char **owned) {
    if (cJSON_IsString(c)) return *out = c->valuestring, 0;
    if (cJSON_IsNull(c) || !c) return *out = "", 0;
    if (!cJSON_IsArray(c)) return bad(p, "messages", "messages[%zu].content must be a string or a list of text "
                                      "parts, got %s", i, kind(c));
    size_t len = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(part, "type"),
                    *tx = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "text") || !cJSON_IsString(tx))
            return bad(p, "messages", "messages[%zu].content: only {\"type\": \"text\", \"text\": ...} parts are "
                       "supported", i);
        len += strlen(tx->valuestring);
    }
    if (!(*owned = malloc(len + 1))) return bad(p, "messages", "out of memory");
    len = 0;
    cJSON_ArrayForEach(part, c) {
        const char *tx = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
        memcpy(*owned + len, tx, strlen(tx));
        len += strlen(tx);
    }
    (*owned)[len] = 0;
    *out = *owned;
    return 0;
}

/* The messages as the model's chat template renders them (as llmk chat /
 * batch); with no model (the request fuzzer), as ChatML renders them. */
static int render_chat(const struct parse *p, const llmk_chat_message *msgs, size_t n, const char *effort,
                       char **text, bool *add_bos) {
    if (p->s->tok)
        return gen_chat_messages(llmk_model_gguf(p->s->m), p->s->tok, p->s->o.chat_template, effort, msgs, n, text,
                                 add_bos);
    llmk_chat_template *tp = NULL;
    int st = llmk_chat_template_init("chatml", NULL, 0, "<s>", "</s>", &tp);
    size_t len = 0;
    llmk_chat_render_opts ro = {.add_generation_prompt = true, .reasoning_effort = effort};
    if (st == LLMK_OK) st = llmk_chat_render_with(tp, msgs, n, &ro, text, &len);
    llmk_chat_template_free(tp);
    *add_bos = false;
    return st;
}

/* "reasoning_effort" (OpenAI's field), or chat_template_kwargs' (vLLM's and
 * llama.cpp's way to a template variable): low, medium or high; the
 * harmony template (gpt-oss) renders it, the others have no such field. */
static int reasoning_effort(struct parse *p, const char **out) {
    const cJSON *v = field(p, "reasoning_effort"), *kw = field(p, "chat_template_kwargs");
    const char *param = "reasoning_effort";
    if (kw && !cJSON_IsObject(kw))
        return bad(p, "chat_template_kwargs", "'chat_template_kwargs' must be an object, got %s", kind(kw));
    if (!v && kw && (v = cJSON_GetObjectItemCaseSensitive(kw, "reasoning_effort")))
        param = "chat_template_kwargs";
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsString(v) || (strcmp(v->valuestring, "low") && strcmp(v->valuestring, "medium") &&
                               strcmp(v->valuestring, "high")))
        return bad(p, param, "'reasoning_effort' must be \"low\", \"medium\" or \"high\"");
    *out = v->valuestring;
    return 0;
}

/* "messages" through the chat template. */
static int chat_prompt(struct parse *p) {
    const cJSON *m = field(p, "messages");
    if (!m) return bad(p, "messages", "'messages' is required");
    if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) == 0)
        return bad(p, "messages", "'messages' must be a non-empty array, got %s", kind(m));
    size_t n = (size_t)cJSON_GetArraySize(m), i = 0;
    llmk_chat_message *msgs = calloc(n, sizeof *msgs);
    char **owned = calloc(n, sizeof *owned), *text = NULL;
    int rc = msgs && owned ? 0 : bad(p, "messages", "out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, m) {
        if (rc) break;
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role");
        if (!cJSON_IsObject(it) || !cJSON_IsString(role)) {
            rc = bad(p, "messages", "messages[%zu] must be an object with a string 'role'", i);
            break;
        }
        const char *r = role->valuestring;
        if (!strcmp(r, "developer")) r = "system"; /* OpenAI's newer name for it */
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant")) {
            rc = bad(p, "messages", "messages[%zu].role must be system, developer, user or assistant, got '%.40s'",
                     i, role->valuestring);
            break;
        }
        msgs[i].role = r;
        rc = content(p, cJSON_GetObjectItemCaseSensitive(it, "content"), i, &msgs[i].content, &owned[i]);
        i++;
    }
    bool add_bos = false;
    const char *effort = NULL;
    if (!rc) rc = reasoning_effort(p, &effort);
    if (!rc && render_chat(p, msgs, n, effort, &text, &add_bos) != LLMK_OK)
        rc = bad(p, "messages", "chat template: %s", llmk_last_error());
    if (!rc) rc = tokenize(p, "messages", text, add_bos, true); /* the template's own markers */
    for (size_t k = 0; owned && k < n; k++) free(owned[k]);
    free(owned), free(msgs), free(text);
    return rc;
}

/* "prompt": a string, a list of one string, or token ids (a list of ints, or a list of one such list). */
static int completion_prompt(struct parse *p) {
    const cJSON *v = field(p, "prompt");
    if (!v) return bad(p, "prompt", "'prompt' is required");
    if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 1 && !cJSON_IsNumber(cJSON_GetArrayItem(v, 0)))
        v = cJSON_GetArrayItem(v, 0);
    if (cJSON_IsString(v))
        return tokenize(p, "prompt", v->valuestring, p->s->tok && llmk_tokenizer_add_bos(p->s->tok), false);
    if (!cJSON_IsArray(v))
        return bad(p, "prompt", "'prompt' must be a string, a list of one string or a list of token ids, got %s",
                   kind(v));
    size_t n = (size_t)cJSON_GetArraySize(v), i = 0;
    if (!(p->r->prompt = malloc((n + 1) * sizeof *p->r->prompt))) return bad(p, "prompt", "out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        double d = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (d != floor(d) || d < 0 || d >= (double)p->s->n_vocab)
            return bad(p, "prompt", "prompt[%zu] must be a token id in [0, %zu) (one prompt per request)", i,
                       p->s->n_vocab);
        p->r->prompt[i++] = (int32_t)d;
    }
    p->r->n_prompt = n;
    return 0;
}

static int stop_field(struct parse *p) {
    const cJSON *v = field(p, "stop"), *it;
    if (!v) return 0;
    if (!cJSON_IsString(v) && !cJSON_IsArray(v))
        return bad(p, "stop", "'stop' must be a string or a list of strings, got %s", kind(v));
    if (cJSON_IsArray(v) && cJSON_GetArraySize(v) > SERVE_MAX_STOPS)
        return bad(p, "stop", "'stop' has more than %d strings", SERVE_MAX_STOPS);
    bool one = cJSON_IsString(v);
    for (it = one ? v : v->child; it; it = one ? NULL : it->next) {
        if (!cJSON_IsString(it) || !*it->valuestring)
            return bad(p, "stop", "'stop' strings must be non-empty strings");
        if (!(p->r->stops[p->r->n_stops] = strdup(it->valuestring))) return bad(p, "stop", "out of memory");
        p->r->n_stops++;
    }
    return 0;
}

static int bias_field(struct parse *p) {
    const cJSON *v = field(p, "logit_bias"), *it;
    if (!v) return 0;
    if (!cJSON_IsObject(v)) return bad(p, "logit_bias", "'logit_bias' must be an object, got %s", kind(v));
    size_t n = (size_t)cJSON_GetArraySize(v), i = 0;
    if (n > p->s->n_vocab) return bad(p, "logit_bias", "'logit_bias' has more entries than the vocabulary");
    if (!(p->r->bias = malloc((n + 1) * sizeof *p->r->bias))) return bad(p, "logit_bias", "out of memory");
    cJSON_ArrayForEach(it, v) {
        char *end;
        long id = strtol(it->string, &end, 10);
        if (!*it->string || *end || id < 0 || (size_t)id >= p->s->n_vocab)
            return bad(p, "logit_bias", "logit_bias key '%.40s' must be a token id in [0, %zu)", it->string,
                       p->s->n_vocab);
        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || fabs(it->valuedouble) > 100)
            return bad(p, "logit_bias", "logit_bias['%s'] must be a number in [-100, 100]", it->string);
        p->r->bias[i++] = (llmk_logit_bias){(int32_t)id, (float)it->valuedouble};
    }
    p->r->sp.bias = p->r->bias, p->r->sp.n_bias = i;
    return 0;
}

/* Sampling: OpenAI's defaults (temperature 1, top_p 1) with llmk's top_k
 * and min_p off unless asked for. */
static int sampling(struct parse *p) {
    llmk_sampler_params *sp = &p->r->sp;
    llmk_sampler_params_default(sp);
    sp->temperature = 1.0, sp->top_p = 1.0, sp->top_k = 0, sp->min_p = 0;
    double v;
    bool g;
    int rc;
    if ((rc = num(p, "temperature", 0, 2, false, &v, &g))) return rc;
    if (g) sp->temperature = v;
    if ((rc = num(p, "top_p", 0, 1, false, &v, &g))) return rc;
    if (g) sp->top_p = v;
    if ((rc = num(p, "top_k", 0, INT32_MAX, true, &v, &g))) return rc;
    if (g) sp->top_k = (int32_t)v;
    if ((rc = num(p, "min_p", 0, 1, false, &v, &g))) return rc;
    if (g) sp->min_p = v;
    if ((rc = num(p, "presence_penalty", -2, 2, false, &v, &g))) return rc;
    if (g) sp->presence_penalty = v;
    if ((rc = num(p, "frequency_penalty", -2, 2, false, &v, &g))) return rc;
    if (g) sp->frequency_penalty = v;
    if ((rc = num(p, "seed", -SEED_MAX, SEED_MAX, true, &v, &g))) return rc;
    if (g) sp->seed = v < 0 ? (int64_t)(-v) : (int64_t)v; /* -1 would mean "random" to the sampler */
    if ((rc = bias_field(p))) return rc;
    llmk_sampler *smp = NULL; /* the whole chain checked now, not on the engine thread */
    if (llmk_sampler_init(sp, p->s->n_vocab, &smp) != LLMK_OK) return bad(p, NULL, "%s", llmk_last_error());
    llmk_sampler_free(smp);
    return 0;
}

/* n, max_tokens, stream, logprobs. */
static int shape(struct parse *p, bool chat) {
    struct serve_req *r = p->r;
    double v;
    bool g;
    int rc;
    int32_t room = p->s->n_ctx - (int32_t)r->n_prompt;
    r->n = 1;
    if ((rc = num(p, "n", 1, SERVE_MAX_N, true, &v, &g))) return rc;
    if (g) r->n = (int)v;
    r->max_tokens = room;
    const char *mt = chat && field(p, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if ((rc = num(p, mt, 1, 1 << 30, true, &v, &g))) return rc;
    if (g && v < room) r->max_tokens = (int32_t)v;
    if ((rc = boolean(p, "stream", &r->stream)) || (rc = boolean(p, "return_token_ids", &r->return_ids))) return rc;
    const cJSON *so = field(p, "stream_options");
    if (so && !cJSON_IsObject(so)) return bad(p, "stream_options", "'stream_options' must be an object");
    const cJSON *iu = so ? cJSON_GetObjectItemCaseSensitive(so, "include_usage") : NULL;
    if (iu && !cJSON_IsBool(iu)) return bad(p, "stream_options", "'stream_options.include_usage' must be a boolean");
    r->include_usage = cJSON_IsTrue(iu);
    r->logprobs = -1;
    if (chat) {
        bool lp = false;
        if ((rc = boolean(p, "logprobs", &lp)) || (rc = num(p, "top_logprobs", 0, 20, true, &v, &g))) return rc;
        if (g && !lp) return bad(p, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
        if (lp) r->logprobs = g ? (int)v : 0;
    } else {
        if ((rc = num(p, "logprobs", 0, 20, true, &v, &g))) return rc;
        if (g) r->logprobs = (int)v;
    }
    /* llama-server's per-request speculation: n_max 0 turns it off, more turns prompt lookup on */
    r->spec_max = r->spec_min = -1;
    if ((rc = num(p, "speculative.n_max", 0, 64, true, &v, &g))) return rc;
    if (g) r->spec_max = (int32_t)v;
    if ((rc = num(p, "speculative.n_min", 1, 64, true, &v, &g))) return rc;
    if (g) r->spec_min = (int32_t)v;
    if (r->spec_min > 0 && r->spec_max > 0 && r->spec_min > r->spec_max)
        return bad(p, "speculative.n_min", "'speculative.n_min' %d exceeds 'speculative.n_max' %d", r->spec_min,
                   r->spec_max);
    const cJSON *gr = field(p, "grammar"); /* llama-server's GBNF constraint */
    if (gr && !cJSON_IsString(gr)) return bad(p, "grammar", "'grammar' must be a string (GBNF), got %s", kind(gr));
    if (gr && llmk_grammar_parse(gr->valuestring, strlen(gr->valuestring), &r->grammar) != LLMK_OK)
        return bad(p, "grammar", "'grammar': %s", llmk_last_error());
    if ((rc = schema_fields(p, r))) return rc;
    bool echo = false;
    if ((rc = boolean(p, "echo", &echo))) return rc;
    if (echo) return bad(p, "echo", "'echo' is not supported");
    return 0;
}

int api_parse(struct server *s, bool chat, const char *body, size_t len, struct serve_req *out, char **err) {
    memset(out, 0, sizeof *out);
    size_t nul = cli_json_nul_escape(body, len);
    cJSON *root = nul < len ? NULL : cJSON_ParseWithLength(body, len);
    struct parse p = {.s = s, .root = root, .r = out, .err = err};
    int rc = 0;
    if (nul < len) rc = bad(&p, NULL, "\\u0000 (NUL) at byte %zu: a C string cannot hold it, and cutting the text "
                            "there would change the request", nul);
    else if (!root) rc = bad(&p, NULL, "the body is not valid JSON");
    else if (!cJSON_IsObject(root)) rc = bad(&p, NULL, "the body must be a JSON object, got %s", kind(root));
    const cJSON *model = root ? field(&p, "model") : NULL;
    if (!rc && model && !cJSON_IsString(model)) rc = bad(&p, "model", "'model' must be a string");
    if (!rc && model && *model->valuestring && strcmp(model->valuestring, s->model_id)) {
        char msg[400];
        snprintf(msg, sizeof msg, "The model '%.200s' does not exist; this server has '%.150s'",
                 model->valuestring, s->model_id);
        *err = api_error(msg, "invalid_request_error", "model", "model_not_found");
        rc = 404;
    }
    out->chat = chat;
    if (!rc) rc = chat ? chat_prompt(&p) : completion_prompt(&p);
    if (!rc && out->n_prompt == 0) rc = bad(&p, chat ? "messages" : "prompt", "the prompt has no tokens");
    if (!rc && (int64_t)out->n_prompt >= s->n_ctx)
        rc = bad(&p, chat ? "messages" : "prompt", "the prompt has %zu tokens; the context (-c) of %d leaves no "
                 "room to generate", out->n_prompt, s->n_ctx);
    if (!rc) rc = stop_field(&p);
    if (!rc) rc = sampling(&p);
    if (!rc) rc = shape(&p, chat);
    cJSON_Delete(root);
    if (rc) serve_req_free(out);
    return rc ? rc : 200;
}

char *api_models(const struct server *s) {
    cJSON *root = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(root, "data"), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON_AddStringToObject(m, "id", s->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", 0);
    cJSON_AddStringToObject(m, "owned_by", "llmk");
    cJSON_AddItemToArray(data, m);
    char *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return out;
}

/* ---- answers ---------------------------------------------------------------------- */

/* One token's text alone (U+FFFD for a piece of a UTF-8 character). */
static void token_text(const struct server *s, int32_t id, char *buf, size_t cap) {
    llmk_detok_state ds = {.started = true};
    size_t n = 0, m = 0;
    if (llmk_detok_feed(s->tok, &ds, id, true, buf, cap - 1, &n) != LLMK_OK) n = 0;
    if (llmk_detok_flush(s->tok, &ds, buf + n, cap - 1 - n, &m) != LLMK_OK) m = 0;
    buf[n + m] = 0;
}

static cJSON *bytes_of(const char *t) {
    cJSON *a = cJSON_CreateArray();
    for (const unsigned char *p = (const unsigned char *)t; *p; p++) cJSON_AddItemToArray(a, cJSON_CreateNumber(*p));
    return a;
}

/* logprobs of tokens [from, to) of a choice: chat's {"content": [...]} or
 * the completions API's {"tokens", "token_logprobs", "top_logprobs", "text_offset"}. */
static cJSON *logprobs_json(const struct serve_job *j, const struct serve_choice *c, int32_t from, int32_t to) {
    const struct server *s = j->srv;
    int k = j->req.logprobs;
    char *t = malloc(s->piece_cap + 64);
    cJSON *root = cJSON_CreateObject();
    if (!t) return root;
    cJSON *content = j->req.chat ? cJSON_AddArrayToObject(root, "content") : NULL;
    cJSON *toks = content ? NULL : cJSON_AddArrayToObject(root, "tokens");
    cJSON *tlp = content ? NULL : cJSON_AddArrayToObject(root, "token_logprobs");
    cJSON *top = content ? NULL : cJSON_AddArrayToObject(root, "top_logprobs");
    cJSON *off = content ? NULL : cJSON_AddArrayToObject(root, "text_offset");
    size_t at = 0;
    for (int32_t i = from; i < to; i++) {
        const struct serve_lp *lp = c->lps + (size_t)i * (size_t)(1 + k);
        token_text(s, lp[0].id, t, s->piece_cap + 64);
        if (content) {
            cJSON *e = cJSON_CreateObject(), *alts;
            cJSON_AddStringToObject(e, "token", t);
            cJSON_AddNumberToObject(e, "logprob", lp[0].lp);
            cJSON_AddItemToObject(e, "bytes", bytes_of(t));
            alts = cJSON_AddArrayToObject(e, "top_logprobs");
            for (int a = 1; a <= k; a++) {
                cJSON *x = cJSON_CreateObject();
                token_text(s, lp[a].id, t, s->piece_cap + 64);
                cJSON_AddStringToObject(x, "token", t);
                cJSON_AddNumberToObject(x, "logprob", lp[a].lp);
                cJSON_AddItemToObject(x, "bytes", bytes_of(t));
                cJSON_AddItemToArray(alts, x);
            }
            cJSON_AddItemToArray(content, e);
            continue;
        }
        cJSON_AddItemToArray(toks, cJSON_CreateString(t));
        cJSON_AddItemToArray(tlp, cJSON_CreateNumber(lp[0].lp));
        cJSON_AddItemToArray(off, cJSON_CreateNumber((double)at));
        at += strlen(t);
        cJSON *alts = cJSON_CreateObject();
        for (int a = 1; a <= k; a++) {
            token_text(s, lp[a].id, t, s->piece_cap + 64);
            if (!cJSON_GetObjectItemCaseSensitive(alts, t)) cJSON_AddNumberToObject(alts, t, lp[a].lp);
        }
        cJSON_AddItemToArray(top, alts);
    }
    if (content) cJSON_AddNullToObject(root, "refusal");
    free(t);
    return root;
}

static void add_usage(cJSON *root, const struct serve_job *j) {
    int64_t gen = 0;
    for (int i = 0; i < j->req.n; i++) gen += j->ch[i].n_used;
    cJSON *u = cJSON_AddObjectToObject(root, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)j->req.n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)gen);
    cJSON_AddNumberToObject(u, "total_tokens", (double)j->req.n_prompt + (double)gen);
    /* the prompt is counted once: its first choice's prefix-cache hit */
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "prompt_tokens_details"), "cached_tokens",
                            (double)j->ch[0].cached);
}

static cJSON *head(const struct serve_job *j, bool chunk) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "id", j->id);
    cJSON_AddStringToObject(root, "object", j->req.chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                        : "text_completion");
    cJSON_AddNumberToObject(root, "created", (double)j->created);
    cJSON_AddStringToObject(root, "model", j->srv->model_id);
    cJSON_AddNullToObject(root, "system_fingerprint");
    return root;
}

static void add_ids(cJSON *ch, const struct serve_choice *c, int32_t from, int32_t to) {
    cJSON *a = cJSON_AddArrayToObject(ch, "token_ids");
    for (int32_t i = from; i < to; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(c->tokens[i]));
}

char *api_response(struct serve_job *j) {
    cJSON *root = head(j, false), *choices = cJSON_AddArrayToObject(root, "choices");
    for (int i = 0; i < j->req.n; i++) {
        const struct serve_choice *c = &j->ch[i];
        cJSON *ch = cJSON_CreateObject();
        cJSON_AddNumberToObject(ch, "index", i);
        if (j->req.chat) {
            cJSON *m = cJSON_AddObjectToObject(ch, "message");
            cJSON_AddStringToObject(m, "role", "assistant");
            cJSON_AddStringToObject(m, "content", c->text ? c->text : "");
            if (c->harmony) cJSON_AddStringToObject(m, "reasoning_content", c->reason ? c->reason : "");
            cJSON_AddNullToObject(m, "refusal");
        } else cJSON_AddStringToObject(ch, "text", c->text ? c->text : "");
        if (j->req.logprobs >= 0) cJSON_AddItemToObject(ch, "logprobs", logprobs_json(j, c, 0, c->n_used));
        else cJSON_AddNullToObject(ch, "logprobs");
        cJSON_AddStringToObject(ch, "finish_reason", c->finish_reason ? c->finish_reason : "length");
        if (j->req.return_ids) add_ids(ch, c, 0, c->n_used);
        cJSON_AddItemToArray(choices, ch);
    }
    add_usage(root, j);
    char *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return out;
}

static bool sse(char **buf, size_t *len, size_t *cap, cJSON *obj) {
    char *js = obj ? cJSON_PrintUnformatted(obj) : NULL;
    const char *body = obj ? js : "[DONE]";
    cJSON_Delete(obj);
    if (!body) return false;
    size_t n = strlen(body) + 8;
    if (*len + n + 1 > *cap) {
        size_t c = (*len + n + 1) * 2;
        char *b = realloc(*buf, c);
        if (!b) return free(js), false;
        *buf = b, *cap = c;
    }
    *len += (size_t)snprintf(*buf + *len, *cap - *len, "data: %s\n\n", body);
    free(js);
    return true;
}

/* One choice's chunk: its new text (and first, for chat, the role), the
 * logprobs of the tokens read since the last chunk, its finish once ended. */
static cJSON *choice_chunk(struct serve_job *j, struct serve_choice *c, bool role) {
    bool text = c->text_len > c->text_sent, fin = c->ended && !c->finish_sent && !c->failed;
    bool lps = j->req.logprobs >= 0 && c->n_used > c->lp_sent, reason = c->reason_len > c->reason_sent;
    if (!role && !text && !fin && !lps && !reason) return NULL;
    cJSON *root = head(j, true), *choices = cJSON_AddArrayToObject(root, "choices"), *ch = cJSON_CreateObject();
    cJSON_AddNumberToObject(ch, "index", c->index);
    const char *delta = c->text ? c->text + c->text_sent : "";
    if (j->req.chat) {
        cJSON *d = cJSON_AddObjectToObject(ch, "delta");
        if (role) cJSON_AddStringToObject(d, "role", "assistant");
        if (role || text) cJSON_AddStringToObject(d, "content", delta);
        if (reason) cJSON_AddStringToObject(d, "reasoning_content", c->reason + c->reason_sent);
    } else cJSON_AddStringToObject(ch, "text", delta);
    if (lps) cJSON_AddItemToObject(ch, "logprobs", logprobs_json(j, c, c->lp_sent, c->n_used));
    else cJSON_AddNullToObject(ch, "logprobs");
    if (fin) cJSON_AddStringToObject(ch, "finish_reason", c->finish_reason);
    else cJSON_AddNullToObject(ch, "finish_reason");
    if (j->req.return_ids) add_ids(ch, c, c->lp_sent, c->n_used);
    cJSON_AddItemToArray(choices, ch);
    c->text_sent = c->text_len, c->reason_sent = c->reason_len, c->lp_sent = c->n_used;
    c->finish_sent |= fin;
    return root;
}

int api_stream_events(struct serve_job *j, bool all_ended, bool *first, char **buf, size_t *len, size_t *cap) {
    for (int i = 0; i < j->req.n; i++) {
        struct serve_choice *c = &j->ch[i];
        if (c->failed && !c->finish_sent) { /* as OpenAI streams an error: an event with an error object */
            c->finish_sent = true;
            cJSON *e = cJSON_CreateObject(), *o = cJSON_AddObjectToObject(e, "error");
            cJSON_AddStringToObject(o, "message", c->message[0] ? c->message : "generation failed");
            cJSON_AddStringToObject(o, "type", "server_error");
            if (!sse(buf, len, cap, e)) return -1;
            continue;
        }
        cJSON *chunk = choice_chunk(j, c, *first && j->req.chat);
        if (chunk && !sse(buf, len, cap, chunk)) return -1;
    }
    *first = false;
    if (!all_ended) return 0;
    if (j->req.include_usage) {
        cJSON *u = head(j, true);
        cJSON_AddArrayToObject(u, "choices");
        add_usage(u, j);
        if (!sse(buf, len, cap, u)) return -1;
    }
    return sse(buf, len, cap, NULL) ? 1 : -1;
}
