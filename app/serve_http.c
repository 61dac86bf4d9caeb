/* llmk serve: HTTP with libmicrohttpd (docs/serve.md). One thread per
 * connection (MHD_USE_THREAD_PER_CONNECTION): a handler may block while its
 * job generates, and a streaming response's reader may block until the next
 * token, without holding up any other connection; the connection limit bounds
 * the threads. Every wait is a bounded one (100 ms) that also looks for a
 * client that has gone, the request's deadline and shutdown, so a job is
 * cancelled within a step of any of them. */
#include "serve.h"

#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

enum { CONN_LIMIT = 512, WAIT_MS = 100 };
static const char JSON[] = "application/json";

/* One request on a connection, from its first header to its completion. */
struct conn {
    struct server *s;
    struct MHD_Connection *c;
    char *body;
    size_t len, cap;
    bool too_big;
    struct serve_job *job; /* a reference */
    int fd;
};

/* A streaming response's reader state; holds its own job reference. */
struct stream {
    struct server *s;
    struct serve_job *job;
    int fd;
    char *buf;
    size_t len, cap, pos;
    bool first, finished, cancelled;
};

/* ---- answers -------------------------------------------------------------------- */

/* Queues body (malloc'd, taken) with the status; counts it for /metrics. */
static enum MHD_Result respond(struct conn *k, int code, char *body, const char *ctype, const char *hname,
                               const char *hval) {
    if (!body) return MHD_NO; /* out of memory: close the connection */
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (hname) MHD_add_response_header(r, hname, hval);
    enum MHD_Result ret = MHD_queue_response(k->c, (unsigned)code, r);
    MHD_destroy_response(r);
    metrics_count(k->s, code);
    return ret;
}

static enum MHD_Result fail(struct conn *k, int code, const char *msg, const char *type, const char *ecode) {
    return respond(k, code, api_error(msg, type, NULL, ecode), JSON, NULL, NULL);
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

/* ---- waiting on a job ----------------------------------------------------------------- */

/* The peer closed its end (POLLRDHUP) or the socket failed. */
static bool client_gone(int fd) {
    if (fd < 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* Past the request's --timeout, or the drain deadline passed: end its
 * generation; its choices finish with what they have ("length"). */
static void check_deadline(struct serve_job *j, bool *cancelled) {
    if (*cancelled) return;
    struct server *s = j->srv;
    pthread_mutex_lock(&s->mu);
    bool stopping = s->state == SERVE_STOPPING;
    pthread_mutex_unlock(&s->mu);
    if (stopping || (j->deadline > 0 && serve_now() > j->deadline)) {
        job_cancel(j);
        *cancelled = true;
    }
}

/* Non-streaming: waits until every choice has ended; false when the client went away. */
static bool wait_job(struct conn *k) {
    bool cancelled = false;
    while (!job_pull(k->job)) {
        if (client_gone(k->fd)) {
            job_cancel(k->job);
            return false;
        }
        check_deadline(k->job, &cancelled);
        job_wait(k->job, WAIT_MS);
    }
    return true;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max) {
    (void)pos;
    struct stream *st = cls;
    while (st->pos == st->len) {
        if (st->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        st->pos = st->len = 0;
        bool all = job_pull(st->job);
        int rc = api_stream_events(st->job, all, &st->first, &st->buf, &st->len, &st->cap);
        if (rc < 0) return MHD_CONTENT_READER_END_WITH_ERROR;
        st->finished = rc == 1;
        if (st->len) break;
        if (client_gone(st->fd)) return MHD_CONTENT_READER_END_WITH_ERROR; /* stream_free cancels */
        check_deadline(st->job, &st->cancelled);
        job_wait(st->job, WAIT_MS);
    }
    size_t n = st->len - st->pos < max ? st->len - st->pos : max;
    memcpy(out, st->buf + st->pos, n);
    st->pos += n;
    return (ssize_t)n;
}

/* The response is done with (sent, or the client went away mid-stream). */
static void stream_free(void *cls) {
    struct stream *st = cls;
    if (!st->finished) job_cancel(st->job);
    job_release(st->job);
    free(st->buf);
    free(st);
}

static enum MHD_Result start_stream(struct conn *k) {
    struct stream *st = calloc(1, sizeof *st);
    if (!st) return fail(k, 500, "out of memory", "server_error", NULL);
    st->s = k->s, st->job = k->job, st->fd = k->fd, st->first = true;
    job_retain(k->job);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, st,
                                                               stream_free);
    if (!r) {
        stream_free(st);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, "X-Accel-Buffering", "no"); /* a proxy (nginx) passes events on at once */
    enum MHD_Result ret = MHD_queue_response(k->c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    metrics_count(k->s, 200);
    return ret;
}

/* ---- endpoints --------------------------------------------------------------------- */

/* A body over --max-body was read and dropped (memory stays bounded): 413. */
static enum MHD_Result too_large(struct conn *k) {
    char msg[128];
    snprintf(msg, sizeof msg, "the request body is larger than %ld bytes (--max-body)", k->s->o.max_body);
    return fail(k, 413, msg, "invalid_request_error", "request_too_large");
}

static enum MHD_Result generate(struct conn *k, bool chat) {
    struct server *s = k->s;
    if (k->too_big) return too_large(k);
    struct serve_req r;
    char *err = NULL;
    int code = api_parse(s, chat, k->body ? k->body : "", k->len, &r, &err);
    if (code != 200) return respond(k, code, err, JSON, NULL, NULL);
    if (!(k->job = job_new(s, &r))) return fail(k, 500, "out of memory", "server_error", NULL);
    if (!job_enqueue(k->job)) return fail(k, 503, "the server is shutting down", "server_error", "draining");
    if (job_wait_accept(k->job) == JOB_REFUSED) {
        code = k->job->refuse_http;
        return respond(k, code,
                       api_error(k->job->refuse_msg, code == 429 ? "rate_limit_error" : code == 400
                                 ? "invalid_request_error" : "server_error", NULL,
                                 code == 429 ? "queue_full" : NULL),
                       JSON, code == 429 ? MHD_HTTP_HEADER_RETRY_AFTER : NULL, "1");
    }
    if (k->job->req.stream) return start_stream(k);
    if (!wait_job(k)) return MHD_NO; /* nobody to answer */
    for (int i = 0; i < k->job->req.n; i++)
        if (k->job->ch[i].failed)
            return fail(k, 500, k->job->ch[i].message[0] ? k->job->ch[i].message : "generation failed",
                        "server_error", NULL);
    return respond(k, 200, api_response(k->job), JSON, NULL, NULL);
}

/* /v1/embeddings: answered on this connection's thread, on the server's
 * embedding session (generation's engine goes on meanwhile). */
static enum MHD_Result ep_embeddings(struct conn *k) {
    struct server *s = k->s;
    if (!s->emb)
        return fail(k, 501, "this server does not compute embeddings; start it with --embeddings",
                    "invalid_request_error", "embeddings_disabled");
    if (k->too_big) return too_large(k);
    struct serve_embed_req r;
    char *err = NULL;
    int code = api_parse_embed(s, k->body ? k->body : "", k->len, &r, &err);
    if (code != 200) return respond(k, code, err, JSON, NULL, NULL);
    float *vecs = malloc(r.n * (size_t)s->n_embd * sizeof *vecs);
    int st = vecs ? serve_embed_run(s, &r, vecs) : LLMK_OUT_OF_MEMORY;
    char *body = st == LLMK_OK ? api_embed_response(s, &r, vecs) : NULL;
    free(vecs);
    serve_embed_req_free(&r);
    if (!body) return fail(k, 500, st == LLMK_OK ? "out of memory" : llmk_last_error(), "server_error", NULL);
    return respond(k, 200, body, JSON, NULL, NULL);
}

static enum MHD_Result ep_chat(struct conn *k) { return generate(k, true); }
static enum MHD_Result ep_completions(struct conn *k) { return generate(k, false); }
static enum MHD_Result ep_models(struct conn *k) { return respond(k, 200, api_models(k->s), JSON, NULL, NULL); }

static enum MHD_Result ep_metrics(struct conn *k) {
    return respond(k, 200, metrics_text(k->s), "text/plain; version=0.0.4", NULL, NULL);
}

static enum MHD_Result ep_health(struct conn *k) {
    pthread_mutex_lock(&k->s->mu);
    enum serve_state st = k->s->state;
    pthread_mutex_unlock(&k->s->mu);
    const char *body = st == SERVE_READY ? "{\"status\":\"ok\"}" : st == SERVE_LOADING ? "{\"status\":\"loading\"}"
                                                                                      : "{\"status\":\"draining\"}";
    return respond(k, st == SERVE_READY ? 200 : 503, dup_str(body), JSON, NULL, NULL);
}

struct endpoint {
    const char *path, *method;
    enum MHD_Result (*fn)(struct conn *k);
    bool open;  /* answered without the API key */
    bool ready; /* needs the model (503 while loading or draining) */
};

/* The /v1 paths, and the same without /v1 as llama-server also accepts. */
static const struct endpoint ENDPOINTS[] = {
    {"/health", "GET", ep_health, true, false},
    {"/metrics", "GET", ep_metrics, false, false},
    {"/v1/models", "GET", ep_models, false, false},
    {"/v1/chat/completions", "POST", ep_chat, false, true},
    {"/v1/completions", "POST", ep_completions, false, true},
    {"/models", "GET", ep_models, false, false},
    {"/chat/completions", "POST", ep_chat, false, true},
    {"/completions", "POST", ep_completions, false, true},
    {"/v1/embeddings", "POST", ep_embeddings, false, true},
    {"/embeddings", "POST", ep_embeddings, false, true},
};

/* "Authorization: Bearer KEY", compared in time independent of where it differs. */
static bool authorized(struct conn *k) {
    const char *key = k->s->o.api_key;
    if (!key) return true;
    const char *h = MHD_lookup_connection_value(k->c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7)) return false;
    h += 7;
    size_t n = strlen(key), m = strlen(h);
    unsigned diff = n != m;
    for (size_t i = 0; i < n; i++) diff |= (unsigned)(key[i] ^ h[i < m ? i : 0]);
    return diff == 0;
}

static enum MHD_Result route(struct conn *k, const char *url, const char *method) {
    const struct endpoint *ep = NULL;
    bool path_known = false;
    for (size_t i = 0; i < sizeof ENDPOINTS / sizeof *ENDPOINTS; i++) {
        if (strcmp(url, ENDPOINTS[i].path)) continue;
        path_known = true;
        if (!strcmp(method, ENDPOINTS[i].method)) ep = &ENDPOINTS[i];
    }
    char msg[300];
    if (!path_known) {
        snprintf(msg, sizeof msg, "no such endpoint: %.200s", url);
        return fail(k, 404, msg, "invalid_request_error", "not_found");
    }
    if (!ep) {
        const char *allow = !strcmp(method, "GET") ? "POST" : "GET";
        snprintf(msg, sizeof msg, "%.20s is not allowed on %.200s (use %s)", method, url, allow);
        return respond(k, 405, api_error(msg, "invalid_request_error", NULL, "method_not_allowed"), JSON,
                       MHD_HTTP_HEADER_ALLOW, allow);
    }
    if (!ep->open && !authorized(k))
        return fail(k, 401, "missing or wrong API key (Authorization: Bearer KEY)", "invalid_request_error",
                    "invalid_api_key");
    if (ep->ready) {
        pthread_mutex_lock(&k->s->mu);
        enum serve_state st = k->s->state;
        pthread_mutex_unlock(&k->s->mu);
        if (st == SERVE_LOADING) return fail(k, 503, "the model is loading", "server_error", "loading");
        if (st != SERVE_READY) return fail(k, 503, "the server is shutting down", "server_error", "draining");
    }
    return ep->fn(k);
}

/* Called for the headers, once per piece of body, then once more to answer. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *data, size_t *size, void **ptr) {
    (void)version;
    struct server *s = cls;
    struct conn *k = *ptr;
    if (!k) {
        if (!(k = calloc(1, sizeof *k))) return MHD_NO;
        *ptr = k;
        k->s = s, k->c = c;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        k->fd = ci ? ci->connect_fd : -1;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > (unsigned long long)s->o.max_body) k->too_big = true;
        return MHD_YES; /* a too-large body is answered (413) after it is skipped */
    }
    if (*size) {
        if (!k->too_big && k->len + *size > (size_t)s->o.max_body) {
            k->too_big = true; /* the rest is read and dropped: memory stays bounded */
            free(k->body);
            k->body = NULL, k->len = k->cap = 0;
        }
        if (!k->too_big) {
            if (k->len + *size + 1 > k->cap) {
                size_t cap = (k->len + *size + 1) * 2;
                if (cap > (size_t)s->o.max_body + 1) cap = (size_t)s->o.max_body + 1;
                char *b = realloc(k->body, cap);
                if (!b) return MHD_NO;
                k->body = b, k->cap = cap;
            }
            memcpy(k->body + k->len, data, *size);
            k->len += *size;
            k->body[k->len] = 0;
        }
        *size = 0;
        return MHD_YES;
    }
    return route(k, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **ptr, enum MHD_RequestTerminationCode why) {
    (void)cls, (void)c;
    struct conn *k = *ptr;
    if (!k) return;
    if (k->job) {
        if (why != MHD_REQUEST_TERMINATED_COMPLETED_OK) job_cancel(k->job);
        job_release(k->job);
    }
    free(k->body);
    free(k);
    *ptr = NULL;
}

/* Counts open connections for /metrics: a client that hangs up, or a
 * stream that ends, must leave no connection (and no thread) behind. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode toe) {
    (void)c, (void)socket_ctx;
    struct server *s = cls;
    pthread_mutex_lock(&s->mu);
    s->n_conns += toe == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1;
    pthread_mutex_unlock(&s->mu);
}

/* ---- the daemon ----------------------------------------------------------------------- */

int http_start(struct server *s, struct MHD_Daemon **d, int *port, char *why, size_t why_cap) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
    char ps[16];
    snprintf(ps, sizeof ps, "%ld", s->o.port);
    int rc = getaddrinfo(s->o.host, ps, &hints, &ai);
    if (rc) {
        snprintf(why, why_cap, "--host %s: %s", s->o.host, gai_strerror(rc));
        return LLMK_INVALID_ARGUMENT;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    /* a connection idle this long is closed (slow clients); a request's own
     * limit is --timeout, checked while it generates */
    unsigned idle = (unsigned)(s->o.timeout_s > 0 ? s->o.timeout_s + 30 : 0);
    *d = MHD_start_daemon(flags, (uint16_t)s->o.port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                          MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                          MHD_OPTION_CONNECTION_LIMIT,
                          (unsigned)CONN_LIMIT, MHD_OPTION_CONNECTION_TIMEOUT, idle, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!*d) {
        snprintf(why, why_cap, "cannot listen on %s port %ld (in use, or not an address of this machine)",
                 s->o.host, s->o.port);
        return LLMK_IO_ERROR;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(*d, MHD_DAEMON_INFO_BIND_PORT);
    *port = di && di->port ? di->port : (int)s->o.port;
    return LLMK_OK;
}

void http_stop(struct MHD_Daemon *d) {
    if (d) MHD_stop_daemon(d);
}
