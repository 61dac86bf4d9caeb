/* llmk serve's /v1/embeddings (started with --embeddings): OpenAI's request
 * and answer shapes. The vectors are llmk embed's (app/embed_pool.c: the
 * final hidden states, pooled by --pooling, L2-normalized as OpenAI's and
 * llama-server's are), computed on a session of their own so generation's
 * engine and its KV pool are untouched; one request at a time holds it. */
#include "cli.h"
#include "embed_pool.h"
#include "serve.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void serve_embed_req_free(struct serve_embed_req *r) {
    for (size_t i = 0; r->ids && i < r->n; i++) free(r->ids[i]);
    free(r->ids), free(r->n_ids);
    memset(r, 0, sizeof *r);
}

static int embed_bad(char **err, const char *param, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int embed_bad(char **err, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int code = api_bad_v(err, param, fmt, ap);
    va_end(ap);
    return code;
}

/* Input i as text: tokenized as llmk embed does (BOS as the model wants,
 * special tokens recognised); without a tokenizer (the request fuzzer) a
 * byte is a token. */
static int embed_text(const struct server *s, const char *text, size_t i, int32_t **ids, size_t *n, char **err) {
    size_t len = strlen(text), cap = len + 8;
    for (int pass = 0; pass < 2; pass++) {
        if (!(*ids = malloc(cap * sizeof **ids))) return embed_bad(err, "input", "input[%zu]: out of memory", i);
        if (!s->tok) {
            for (size_t k = 0; k < len; k++) (*ids)[k] = (int32_t)((unsigned char)text[k] % s->n_vocab);
            *n = len;
            return 0;
        }
        int st = llmk_tokenize(s->tok, text, len, llmk_tokenizer_add_bos(s->tok), true, *ids, cap, n);
        if (st == LLMK_OK) return 0;
        free(*ids);
        *ids = NULL;
        if (st != LLMK_BUFFER_TOO_SMALL) return embed_bad(err, "input", "input[%zu]: %s", i, llmk_last_error());
        cap = *n;
    }
    return embed_bad(err, "input", "input[%zu]: the token count changed between passes", i);
}

static int embed_tokens(const struct server *s, const cJSON *v, size_t i, int32_t **ids, size_t *n, char **err) {
    size_t m = (size_t)cJSON_GetArraySize(v), k = 0;
    if (!(*ids = malloc((m + 1) * sizeof **ids))) return embed_bad(err, "input", "input[%zu]: out of memory", i);
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        double d = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (d != floor(d) || d < 0 || d >= (double)s->n_vocab)
            return embed_bad(err, "input", "input[%zu][%zu] must be a token id in [0, %zu)", i, k, s->n_vocab);
        (*ids)[k++] = (int32_t)d;
    }
    *n = m;
    return 0;
}

/* "input": a string, a list of strings, a list of token ids, or a list of
 * such lists (OpenAI's four forms). */
static int embed_inputs(const struct server *s, const cJSON *v, struct serve_embed_req *r, char **err) {
    if (!v || cJSON_IsNull(v)) return embed_bad(err, "input", "'input' is required");
    bool one = cJSON_IsString(v) || (cJSON_IsArray(v) && cJSON_IsNumber(cJSON_GetArrayItem(v, 0)));
    if (!one && !cJSON_IsArray(v))
        return embed_bad(err, "input", "'input' must be a string, a list of strings, a list of token ids or a "
                         "list of such lists");
    size_t n = one ? 1 : (size_t)cJSON_GetArraySize(v);
    if (n == 0) return embed_bad(err, "input", "'input' is an empty list");
    if (n > SERVE_MAX_EMBED_INPUTS)
        return embed_bad(err, "input", "'input' has %zu entries; at most %d per request", n, SERVE_MAX_EMBED_INPUTS);
    if (!(r->ids = calloc(n, sizeof *r->ids)) || !(r->n_ids = calloc(n, sizeof *r->n_ids)))
        return embed_bad(err, "input", "out of memory");
    r->n = n;
    for (size_t i = 0; i < n; i++) {
        const cJSON *e = one ? v : cJSON_GetArrayItem(v, (int)i);
        int rc = cJSON_IsString(e) ? embed_text(s, e->valuestring, i, &r->ids[i], &r->n_ids[i], err)
                 : cJSON_IsArray(e) ? embed_tokens(s, e, i, &r->ids[i], &r->n_ids[i], err)
                                    : embed_bad(err, "input", "input[%zu] must be a string or a list of token ids", i);
        if (rc) return rc;
        if (r->n_ids[i] == 0) return embed_bad(err, "input", "input[%zu] has no tokens", i);
        if (r->n_ids[i] > (size_t)s->n_ctx)
            return embed_bad(err, "input", "input[%zu] has %zu tokens; the context (-c) holds %d", i, r->n_ids[i],
                             s->n_ctx);
        r->n_tokens += r->n_ids[i];
    }
    return 0;
}

static int embed_options(const struct server *s, const cJSON *root, struct serve_embed_req *r, char **err) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "encoding_format");
    if (f && !cJSON_IsNull(f)) {
        if (cJSON_IsString(f) && !strcmp(f->valuestring, "base64")) r->base64 = true;
        else if (!cJSON_IsString(f) || strcmp(f->valuestring, "float"))
            return embed_bad(err, "encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
    }
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "dimensions");
    if (d && !cJSON_IsNull(d) && (!cJSON_IsNumber(d) || d->valuedouble != (double)s->n_embd))
        return embed_bad(err, "dimensions", "'dimensions': this model's embeddings have %d values; shortening "
                         "them is not supported", s->n_embd);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (m && !cJSON_IsNull(m) && !cJSON_IsString(m)) return embed_bad(err, "model", "'model' must be a string");
    if (m && cJSON_IsString(m) && *m->valuestring && strcmp(m->valuestring, s->model_id)) {
        char msg[400];
        snprintf(msg, sizeof msg, "The model '%.200s' does not exist; this server has '%.150s'", m->valuestring,
                 s->model_id);
        *err = api_error(msg, "invalid_request_error", "model", "model_not_found");
        return 404;
    }
    return 0;
}

int api_parse_embed(const struct server *s, const char *body, size_t len, struct serve_embed_req *out, char **err) {
    memset(out, 0, sizeof *out);
    size_t nul = cli_json_nul_escape(body, len);
    cJSON *root = nul < len ? NULL : cJSON_ParseWithLength(body, len);
    int rc = 0;
    if (nul < len) rc = embed_bad(err, NULL, "\\u0000 (NUL) at byte %zu: a C string cannot hold it", nul);
    else if (!root) rc = embed_bad(err, NULL, "the body is not valid JSON");
    else if (!cJSON_IsObject(root)) rc = embed_bad(err, NULL, "the body must be a JSON object");
    if (!rc) rc = embed_options(s, root, out, err);
    if (!rc) rc = embed_inputs(s, cJSON_GetObjectItemCaseSensitive(root, "input"), out, err);
    cJSON_Delete(root);
    if (rc) serve_embed_req_free(out);
    return rc ? rc : 200;
}

/* ---- computing ------------------------------------------------------------------ */

int embed_start(struct server *s) {
    if (!s->o.embeddings) return LLMK_OK;
    llmk_session_params sp = {.n_ctx = s->n_ctx, .n_threads = (int32_t)s->o.threads, .path = LLMK_PATH_FAST,
                              .kv_type = s->o.kv_type};
    int st = llmk_session_init(s->m, &sp, &s->emb);
    if (st == LLMK_OK) st = embed_scratch_init(&s->emb_sc, (size_t)s->n_ctx, (size_t)s->n_embd);
    if (st == LLMK_OK) pthread_mutex_init(&s->emb_mu, NULL);
    return st;
}

void embed_stop(struct server *s) {
    if (!s->emb) return;
    llmk_session_free(s->emb);
    embed_scratch_free(&s->emb_sc);
    pthread_mutex_destroy(&s->emb_mu);
    s->emb = NULL;
}

int serve_embed_run(struct server *s, const struct serve_embed_req *r, float *out) {
    int st = LLMK_OK;
    pthread_mutex_lock(&s->emb_mu);
    for (size_t i = 0; i < r->n && st == LLMK_OK; i++)
        st = embed_eval(s->emb, r->ids[i], r->n_ids[i], s->o.pooling, 2, &s->emb_sc, out + i * (size_t)s->n_embd);
    pthread_mutex_unlock(&s->emb_mu);
    return st;
}

/* ---- answers ---------------------------------------------------------------------- */

/* The vector's f32 values, little-endian, in base64 (what OpenAI's clients
 * ask for by default and decode as float32). */
static char *base64_f32(const float *v, size_t n) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t nb = n * 4;
    unsigned char *b = malloc(nb + 2);
    char *out = malloc((nb + 2) / 3 * 4 + 1), *w = out;
    if (!b || !out) {
        free(b), free(out);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int k = 0; k < 4; k++) b[4 * i + k] = (unsigned char)(u >> (8 * k));
    }
    for (size_t i = 0; i < nb; i += 3) {
        uint32_t x = (uint32_t)b[i] << 16 | (i + 1 < nb ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < nb ? b[i + 2] : 0);
        *w++ = A[x >> 18 & 63], *w++ = A[x >> 12 & 63];
        *w++ = i + 1 < nb ? A[x >> 6 & 63] : '=';
        *w++ = i + 2 < nb ? A[x & 63] : '=';
    }
    *w = 0;
    free(b);
    return out;
}

char *api_embed_response(const struct server *s, const struct serve_embed_req *r, const float *vecs) {
    size_t E = (size_t)s->n_embd;
    cJSON *root = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(root, "data");
    cJSON_AddStringToObject(root, "object", "list");
    bool ok = root && data;
    for (size_t i = 0; ok && i < r->n; i++) {
        cJSON *d = cJSON_CreateObject();
        ok = d && cJSON_AddItemToArray(data, d);
        if (!ok) break;
        cJSON_AddStringToObject(d, "object", "embedding");
        cJSON_AddNumberToObject(d, "index", (double)i);
        if (r->base64) {
            char *b = base64_f32(vecs + i * E, E);
            ok = b && cJSON_AddStringToObject(d, "embedding", b);
            free(b);
        } else {
            cJSON *e = cJSON_AddArrayToObject(d, "embedding");
            for (size_t k = 0; e && k < E; k++) cJSON_AddItemToArray(e, cJSON_CreateNumber((double)vecs[i * E + k]));
            ok = e != NULL;
        }
    }
    cJSON_AddStringToObject(root, "model", s->model_id);
    cJSON *u = cJSON_AddObjectToObject(root, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)r->n_tokens);
    cJSON_AddNumberToObject(u, "total_tokens", (double)r->n_tokens);
    char *out = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return out;
}
