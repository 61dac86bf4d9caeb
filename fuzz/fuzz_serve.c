/* libFuzzer target for llmk serve's request parser: a fuzzed HTTP body
 * through api_parse (app/serve_api.c), the path every /v1/completions and
 * /v1/chat/completions body takes before anything reaches the engine:
 * cJSON, field checks, the sampler chain's own check, prompt building.
 *
 * No model is loaded: the server has no tokenizer, which api_parse takes to
 * mean one token per byte (so prompt lengths still meet the context) and
 * ChatML for messages; the vocabulary (FSERVE_VOCAB) and context
 * (FSERVE_CTX) are small so their bounds are reached.
 *
 * Input: one flags byte, then the body (not NUL-terminated: the parser must
 * keep to its length). Flags: bit 1 /v1/embeddings (api_parse_embed, in
 * app/serve_embed.c); else bit 0 chat (/v1/chat/completions), otherwise
 * /v1/completions.
 *
 * Checked beyond "no crash, leak or UB": a 200 has no error and a request
 * within every documented bound (a prompt of 1 .. ctx-1 tokens in the
 * vocabulary, 1 .. ctx-prompt tokens to generate, 1..16 choices, <= 16
 * non-empty stop strings, logprobs -1..20, logit_bias ids in the
 * vocabulary); any other answer is 400 or 404 with an OpenAI error object
 * (error.message a non-empty string, error.type a string).
 *
 * Built by scripts/fuzz.sh (with app/serve_api.c, gen_opts.c and cli.c);
 * replayed by tests/test_fuzz_corpus.c. With -DLLMK_FUZZ_REPLAY it gets a
 * main() that runs the target over files. */
#include "fuzz_common.h"
#include "../app/serve.h"

#include <cjson/cJSON.h>

enum { FSERVE_VOCAB = 300, FSERVE_CTX = 256 };

static void fserve_check_error(int code, const char *err) {
    FUZZ_REQUIRE(code == 400 || code == 404);
    FUZZ_REQUIRE(err != NULL);
    cJSON *root = cJSON_Parse(err);
    FUZZ_REQUIRE(root != NULL);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "error");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(e, "message");
    FUZZ_REQUIRE(cJSON_IsString(msg) && *msg->valuestring);
    FUZZ_REQUIRE(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "type")));
    cJSON_Delete(root);
}

static void fserve_check_request(const struct serve_req *r, bool chat) {
    FUZZ_REQUIRE(r->chat == chat);
    FUZZ_REQUIRE(r->prompt != NULL && r->n_prompt >= 1 && r->n_prompt < FSERVE_CTX);
    for (size_t i = 0; i < r->n_prompt; i++) FUZZ_REQUIRE(r->prompt[i] >= 0 && r->prompt[i] < FSERVE_VOCAB);
    FUZZ_REQUIRE(r->max_tokens >= 1 && (size_t)r->max_tokens <= FSERVE_CTX - r->n_prompt);
    FUZZ_REQUIRE(r->n >= 1 && r->n <= SERVE_MAX_N);
    FUZZ_REQUIRE(r->n_stops <= SERVE_MAX_STOPS);
    for (size_t i = 0; i < r->n_stops; i++) FUZZ_REQUIRE(r->stops[i] && *r->stops[i]);
    FUZZ_REQUIRE(r->logprobs >= -1 && r->logprobs <= SERVE_MAX_TOP_LOGPROBS);
    FUZZ_REQUIRE(r->sp.n_bias == 0 || r->sp.bias == r->bias);
    for (size_t i = 0; i < r->sp.n_bias; i++)
        FUZZ_REQUIRE(r->bias[i].id >= 0 && r->bias[i].id < FSERVE_VOCAB);
    FUZZ_REQUIRE(r->sp.temperature >= 0 && r->sp.temperature <= 2);
    FUZZ_REQUIRE(r->sp.top_p >= 0 && r->sp.top_p <= 1);
}

static void fserve_check_embed(const struct serve_embed_req *r) {
    FUZZ_REQUIRE(r->n >= 1 && r->n <= SERVE_MAX_EMBED_INPUTS);
    size_t total = 0;
    for (size_t i = 0; i < r->n; i++) {
        FUZZ_REQUIRE(r->n_ids[i] >= 1 && r->n_ids[i] <= FSERVE_CTX);
        for (size_t k = 0; k < r->n_ids[i]; k++) FUZZ_REQUIRE(r->ids[i][k] >= 0 && r->ids[i][k] < FSERVE_VOCAB);
        total += r->n_ids[i];
    }
    FUZZ_REQUIRE(total == r->n_tokens);
}

/* A /v1/embeddings body (flags bit 1): 1 when accepted. */
static int fuzz_serve_embed(const struct server *s, const char *body, size_t len) {
    struct serve_embed_req r;
    char *err = NULL;
    int code = api_parse_embed(s, body, len, &r, &err);
    if (code == 200) {
        FUZZ_REQUIRE(err == NULL);
        fserve_check_embed(&r);
        serve_embed_req_free(&r);
    } else {
        fserve_check_error(code, err);
        free(err);
    }
    return code == 200;
}

/* 1 when the body is accepted as a request. */
static int fuzz_serve_one(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    bool chat = data[0] & 1, embed = data[0] & 2;
    /* the body in its own exactly-sized allocation: a read past it is ASan's */
    size_t len = size - 1;
    char *body = malloc(len ? len : 1);
    if (!body) return 0;
    if (len) memcpy(body, data + 1, len);
    static struct server s; /* only what api_parse reads: no model, no tokenizer, no engine */
    s.n_vocab = FSERVE_VOCAB;
    s.n_ctx = FSERVE_CTX;
    s.n_embd = 64;
    snprintf(s.model_id, sizeof s.model_id, "fuzz.gguf");
    if (embed) {
        int ok = fuzz_serve_embed(&s, body, len);
        free(body);
        return ok;
    }
    struct serve_req r;
    char *err = NULL;
    int code = api_parse(&s, chat, body, len, &r, &err);
    free(body);
    if (code == 200) {
        FUZZ_REQUIRE(err == NULL);
        fserve_check_request(&r, chat);
        serve_req_free(&r);
    } else {
        fserve_check_error(code, err);
        free(err);
    }
    return code == 200;
}

#ifndef LLMK_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_serve_one(data, size);
    return 0;
}
#ifdef LLMK_FUZZ_REPLAY
int main(int argc, char **argv) { return fuzz_replay_main(argc, argv, fuzz_serve_one); }
#endif
#endif
