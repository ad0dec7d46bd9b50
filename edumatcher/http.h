/*
 * A tiny HTTP/1.x server on libuv, for the monitor's and the clearing
 * process's read-only pages (JSON, Prometheus text, a live HTML page).
 *
 * Deliberately small: GET and HEAD only (anything else: 405), no request
 * bodies (400), a request head of at most EM_HTTP_REQUEST_MAX bytes (431),
 * keep-alive as HTTP/1.1 defines it, one request at a time per connection,
 * a bounded number of connections, and an idle timeout. Not on a hot path:
 * a response body is built in a growable buffer per response.
 *
 * Connection states:
 *
 *   reading --(head complete: em_http_parse_request)--> writing
 *   reading --(malformed / too big)--> writing error --> closing
 *   writing --(write done, keep-alive)--> reading (parse leftover input)
 *   writing --(write done, close)--> closing
 *   any     --(EOF, error, idle timeout, server close)--> closing
 */
#ifndef EM_HTTP_H
#define EM_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define EM_HTTP_REQUEST_MAX 8192

enum em_http_method {
    EM_HTTP_GET,
    EM_HTTP_HEAD,
    EM_HTTP_OTHER, /* parsed, answered 405 */
};

/* A parsed request head. Pointers point into the caller's input buffer. */
struct em_http_request {
    enum em_http_method method;
    const char *path; /* from '/' up to '?' or the end of the target */
    size_t path_len;
    const char *query; /* after '?', may be empty */
    size_t query_len;
    int minor;       /* HTTP/1.<minor> */
    bool keep_alive; /* after the Connection header and version */
    bool has_body;   /* Content-Length > 0 or Transfer-Encoding present */
};

/*
 * Parse one request head from buf[0..len). Returns the head's length
 * (through the blank line) when complete, CORE_EINCOMPLETE if more input
 * is needed, CORE_ETOOBIG if no head ends within EM_HTTP_REQUEST_MAX bytes,
 * or CORE_EPROTO if malformed. Never reads past len.
 */
int em_http_parse_request(const char *buf, size_t len, struct em_http_request *req);

/* Copy the decoded value of query parameter `key` into out (NUL-
 * terminated). Returns its length, CORE_ENOTFOUND, or CORE_ETOOBIG. */
int em_http_query_get(const struct em_http_request *req, const char *key, char *out, size_t outlen);

/* True if the request path equals p. */
bool em_http_path_is(const struct em_http_request *req, const char *p);

/* The response a handler fills. The body buffer is owned by the server. */
struct em_http_response {
    int status;               /* default 200 */
    const char *content_type; /* static string; default text/plain */
    char *body;
    size_t len, cap;
    bool oom;
};

/* Append to the body (formatted / raw). Failures set res->oom; the server
 * then answers 500. */
void em_http_printf(struct em_http_response *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void em_http_write(struct em_http_response *res, const void *data, size_t len);
/* Append s as the contents of a JSON string (without quotes), escaped. */
void em_http_json_escape(struct em_http_response *res, const char *s, size_t len);

/* Called for each GET/HEAD request; fills res. May not keep req or res. */
typedef void (*em_http_handler)(const struct em_http_request *req, struct em_http_response *res,
                                void *data);

struct em_http_conn;

struct em_http_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    em_http_handler handler;
    void *data;
    unsigned max_conns;
    unsigned nconns;
    uint64_t idle_ms;
    struct em_http_conn *conns; /* list of open connections */
    bool closing;
    uint64_t requests; /* totals */
    uint64_t errors;
};

/*
 * Listen on host:port (port 0 picks a free one; em_http_port tells which)
 * and serve with handler. srv is caller storage that must stay valid
 * until em_http_close's callbacks have run. Returns 0, CORE_EINVAL (bad
 * address), CORE_EBUSY (in use) or CORE_EIO.
 */
int em_http_listen(struct em_http_server *srv, uv_loop_t *loop, const char *host, int port,
                   unsigned max_conns, em_http_handler handler, void *data);

/* The port actually bound. */
int em_http_port(const struct em_http_server *srv);

/* Stop listening and close every connection (asynchronously: run the loop
 * once more before freeing srv). */
void em_http_close(struct em_http_server *srv);

#endif
