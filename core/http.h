/*
 * A small HTTP/1.x server on the core TCP server (core/uv_server.h), for
 * the project's read-only endpoints: the EduMatcher monitor's page and
 * /metrics, the clearing's positions, a Prometheus endpoint. One TCP
 * server in the project: this module is only the HTTP protocol on top of
 * core_server's accept, read, write, limits and idle timeout, and it
 * listens on IPv4 or IPv6 alike.
 *
 * Deliberately small: GET and HEAD only (anything else: 405), no request
 * bodies (400), a request head of at most CORE_HTTP_REQUEST_MAX bytes
 * (431), keep-alive as HTTP/1.1 defines it, pipelined requests answered in
 * order. Handlers are registered per exact path; a path without one gets
 * 404 (or the fallback handler). Not on a hot path, but once warm a
 * request allocates nothing: the response body is one buffer the server
 * reuses.
 *
 * Request flow on a connection (core_server's on_data):
 *
 *   input --(core_http_parse_request: head complete)--> route --> handler
 *         --> status line + headers + body appended to the output
 *   input --(incomplete)--> wait for more
 *   input --(malformed 400 / too big 431 / not GET|HEAD 405 / body 400)
 *         --> error reply, close after it is written
 *   "Connection: close" or HTTP/1.0 without keep-alive --> close after reply
 */
#ifndef CORE_HTTP_H
#define CORE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/buf.h"

#define CORE_HTTP_REQUEST_MAX 8192
#define CORE_HTTP_MAX_ROUTES  32

enum core_http_method {
    CORE_HTTP_GET,
    CORE_HTTP_HEAD,
    CORE_HTTP_OTHER, /* parsed, answered 405 */
};

/* A parsed request head. Pointers point into the caller's input buffer. */
struct core_http_request {
    enum core_http_method method;
    const char *path; /* from '/' up to '?' or the end of the target */
    size_t path_len;
    const char *query; /* after '?', may be empty */
    size_t query_len;
    int minor;       /* HTTP/1.<minor> */
    bool keep_alive; /* after the Connection header and version */
    bool has_body;   /* Content-Length > 0 or Transfer-Encoding present */
};

/*
 * Parse one request head from buf[0..len) (RFC 9112 syntax). Returns the
 * head's length (through the blank line) when complete, CORE_EINCOMPLETE
 * if more input is needed, CORE_ETOOBIG if no head ends within
 * CORE_HTTP_REQUEST_MAX bytes, or CORE_EPROTO if malformed. Never reads
 * past len.
 */
int core_http_parse_request(const char *buf, size_t len, struct core_http_request *req);

/* Copy the decoded value (%XX and '+') of query parameter `key` into out,
 * NUL-terminated. Returns its length, CORE_ENOTFOUND, or CORE_ETOOBIG. */
int core_http_query_get(const struct core_http_request *req, const char *key, char *out,
                        size_t outlen);

/* True if the request path equals p. */
bool core_http_path_is(const struct core_http_request *req, const char *p);

/* The response a handler fills: status (default 200), content type (a
 * string that outlives the call, e.g. a literal; default text/plain) and
 * the body, a buffer owned by the server and reused for every response. */
struct core_http_response {
    int status;
    const char *content_type;
    struct core_buf body;
};

/* Set status and content type and make `body` (copied) the whole body. */
void core_http_reply(struct core_http_response *res, int status, const char *content_type,
                     const void *body, size_t len);

/* Append to the body, raw or formatted. A failed allocation marks the
 * body (res->body.oom): the server then answers 500 instead. */
void core_http_write(struct core_http_response *res, const void *data, size_t len);
void core_http_printf(struct core_http_response *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Append s as the contents of a JSON string (without quotes), escaped. */
void core_http_json_escape(struct core_http_response *res, const char *s, size_t len);

/* Called for each GET/HEAD request on its path; fills res. May not keep
 * req or res. For HEAD the server sends the headers only. */
typedef void (*core_http_handler)(const struct core_http_request *req,
                                  struct core_http_response *res, void *data);

struct core_http_server;

struct core_http_stats {
    uint64_t requests; /* answered by a handler (any status) */
    uint64_t errors;   /* answers with a status other than 200 */
    uint64_t connected;
};

/*
 * Create a server on loop, not yet listening, for at most max_conns
 * connections (0: 64) that are closed after idle_timeout_s without input
 * (0: 30 s). Returns 0 or CORE_ENOMEM; *out is freed with core_http_free.
 */
int core_http_new(struct core_http_server **out, uv_loop_t *loop, unsigned max_conns,
                  int64_t idle_timeout_s);

/*
 * Serve `path` (exact match, starting with '/'; copied) with fn(data). With
 * path NULL, fn becomes the fallback for paths without a handler (instead
 * of 404 "not found"). Returns 0, CORE_EINVAL (path not starting with '/'),
 * CORE_EEXISTS (already routed) or CORE_ETOOBIG (CORE_HTTP_MAX_ROUTES).
 */
int core_http_route(struct core_http_server *s, const char *path, core_http_handler fn, void *data);

/* Listen on host:port, an IPv4 or IPv6 literal ("::1"); port 0 picks a
 * free one (core_http_port tells which). Returns 0, CORE_EINVAL (bad
 * address), CORE_EBUSY (in use) or another code from core_from_uv. */
int core_http_listen(struct core_http_server *s, const char *host, int port);

/* The port actually bound, or a negative code if not listening. */
int core_http_port(const struct core_http_server *s);

void core_http_get_stats(const struct core_http_server *s, struct core_http_stats *out);

/* Stop listening and close every connection; the loop ends once the
 * application's other handles are closed. Safe twice. */
void core_http_stop(struct core_http_server *s);

/* Free (after core_http_stop, once uv_run has returned). NULL is fine. */
void core_http_free(struct core_http_server *s);

#endif
