/*
 * HTTP/1.x on the core TCP server (see http.h for the scope and the
 * request flow). RFC 9112 is the reference for the request line and
 * header syntax; everything this server does not need is refused rather
 * than half-supported.
 */
#include "core/http.h"

#include "core/error.h"
#include "core/uv_server.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parser ---- */

static bool is_tchar(unsigned char c)
{
    /* RFC 9110 5.6.2 token characters */
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool ieq(const char *a, size_t alen, const char *b)
{
    size_t bl = strlen(b);
    if (alen != bl)
        return false;
    for (size_t i = 0; i < alen; i++) {
        char c = a[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != b[i])
            return false;
    }
    return true;
}

/* Does the comma-separated header value contain token t (any case)? */
static bool has_token(const char *v, size_t len, const char *t)
{
    size_t i = 0;
    while (i < len) {
        while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < len && v[i] != ',' && v[i] != ' ' && v[i] != '\t')
            i++;
        if (i > s && ieq(v + s, i - s, t))
            return true;
    }
    return false;
}

/* Find the end of the head: the index just past the blank line, or 0. */
static size_t head_end(const char *buf, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != '\n')
            continue;
        if (i + 1 < len && buf[i + 1] == '\n')
            return i + 2;
        if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
            return i + 3;
    }
    return 0;
}

/* Next line in [*pos, end): returns its length without the line end, and
 * advances *pos past it. */
static size_t next_line(const char *buf, size_t end, size_t *pos, const char **line)
{
    size_t s = *pos, i = s;
    while (i < end && buf[i] != '\n')
        i++;
    *line = buf + s;
    size_t len = i - s;
    if (len && buf[i - 1] == '\r')
        len--;
    *pos = i < end ? i + 1 : end;
    return len;
}

int core_http_parse_request(const char *buf, size_t len, struct core_http_request *req)
{
    memset(req, 0, sizeof *req);
    size_t scan = len < CORE_HTTP_REQUEST_MAX ? len : CORE_HTTP_REQUEST_MAX;
    /* RFC 9112 2.2: ignore at least one empty line before the request. */
    size_t pos = 0;
    while (pos < scan && (buf[pos] == '\r' || buf[pos] == '\n') && pos < 4)
        pos++;
    size_t end = head_end(buf + pos, scan - pos);
    if (end == 0)
        return len >= CORE_HTTP_REQUEST_MAX ? CORE_ETOOBIG : CORE_EINCOMPLETE;
    end += pos;

    const char *line;
    size_t ll = next_line(buf, end, &pos, &line);
    /* request-line = method SP request-target SP HTTP-version */
    size_t i = 0;
    while (i < ll && is_tchar((unsigned char)line[i]))
        i++;
    if (i == 0 || i > 16 || i >= ll || line[i] != ' ')
        return CORE_EPROTO;
    if (i == 3 && memcmp(line, "GET", 3) == 0)
        req->method = CORE_HTTP_GET;
    else if (i == 4 && memcmp(line, "HEAD", 4) == 0)
        req->method = CORE_HTTP_HEAD;
    else
        req->method = CORE_HTTP_OTHER;
    size_t t = ++i;
    while (i < ll && line[i] > ' ' && line[i] < 0x7f)
        i++;
    if (i == t || i >= ll || line[i] != ' ' || line[t] != '/')
        return CORE_EPROTO;
    const char *target = line + t;
    size_t target_len = i - t;
    i++;
    if (ll - i != 8 || memcmp(line + i, "HTTP/1.", 7) != 0 || line[i + 7] < '0' ||
        line[i + 7] > '9')
        return CORE_EPROTO;
    req->minor = line[i + 7] - '0';
    const char *q = memchr(target, '?', target_len);
    req->path = target;
    req->path_len = q ? (size_t)(q - target) : target_len;
    req->query = q ? q + 1 : target + target_len;
    req->query_len = q ? target_len - req->path_len - 1 : 0;
    req->keep_alive = req->minor >= 1;

    /* header-field = field-name ":" OWS field-value OWS */
    for (;;) {
        ll = next_line(buf, end, &pos, &line);
        if (ll == 0)
            break;
        size_t n = 0;
        while (n < ll && is_tchar((unsigned char)line[n]))
            n++;
        if (n == 0 || n >= ll || line[n] != ':')
            return CORE_EPROTO; /* includes obsolete line folding */
        const char *v = line + n + 1;
        size_t vl = ll - n - 1;
        for (size_t k = 0; k < vl; k++)
            if ((unsigned char)v[k] < ' ' && v[k] != '\t')
                return CORE_EPROTO;
        while (vl && (*v == ' ' || *v == '\t'))
            v++, vl--;
        while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
            vl--;
        if (ieq(line, n, "connection")) {
            if (has_token(v, vl, "close"))
                req->keep_alive = false;
            else if (has_token(v, vl, "keep-alive"))
                req->keep_alive = true;
        } else if (ieq(line, n, "transfer-encoding")) {
            req->has_body = true;
        } else if (ieq(line, n, "content-length")) {
            if (vl == 0)
                return CORE_EPROTO;
            bool nonzero = false;
            for (size_t k = 0; k < vl; k++) {
                if (v[k] < '0' || v[k] > '9')
                    return CORE_EPROTO;
                nonzero |= v[k] != '0';
            }
            req->has_body |= nonzero;
        }
    }
    return (int)end;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int core_http_query_get(const struct core_http_request *req, const char *key, char *out,
                        size_t outlen)
{
    size_t kl = strlen(key);
    const char *q = req->query, *end = req->query + req->query_len;
    while (q < end) {
        const char *amp = memchr(q, '&', (size_t)(end - q));
        const char *pe = amp ? amp : end;
        const char *eq = memchr(q, '=', (size_t)(pe - q));
        const char *ke = eq ? eq : pe;
        if ((size_t)(ke - q) == kl && memcmp(q, key, kl) == 0) {
            const char *v = eq ? eq + 1 : pe;
            size_t n = 0;
            while (v < pe) {
                char c = *v++;
                if (c == '+') {
                    c = ' ';
                } else if (c == '%' && pe - v >= 2 && hexval(v[0]) >= 0 && hexval(v[1]) >= 0) {
                    c = (char)(hexval(v[0]) * 16 + hexval(v[1]));
                    v += 2;
                }
                if (n + 1 >= outlen)
                    return CORE_ETOOBIG;
                out[n++] = c;
            }
            if (outlen == 0)
                return CORE_ETOOBIG;
            out[n] = '\0';
            return (int)n;
        }
        q = pe + (pe < end);
    }
    return CORE_ENOTFOUND;
}

bool core_http_path_is(const struct core_http_request *req, const char *p)
{
    size_t n = strlen(p);
    return req->path_len == n && memcmp(req->path, p, n) == 0;
}

/* ---- response body ---- */

void core_http_write(struct core_http_response *res, const void *data, size_t len)
{
    core_buf_append(&res->body, data, len);
}

void core_http_printf(struct core_http_response *res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    char *p = core_buf_reserve(&res->body, (size_t)n + 1);
    if (!p)
        return;
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    res->body.len += (size_t)n;
}

void core_http_json_escape(struct core_http_response *res, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            core_http_printf(res, "\\%c", c);
        else if (c < 0x20)
            core_http_printf(res, "\\u%04x", c);
        else
            core_http_write(res, &s[i], 1);
    }
}

void core_http_reply(struct core_http_response *res, int status, const char *content_type,
                     const void *body, size_t len)
{
    res->status = status;
    res->content_type = content_type;
    core_buf_reset(&res->body);
    core_http_write(res, body, len);
}

/* ---- server ---- */

struct route {
    char *path;
    size_t len;
    core_http_handler fn;
    void *data;
};

struct core_http_server {
    struct core_server *srv;
    struct route routes[CORE_HTTP_MAX_ROUTES];
    unsigned nroutes;
    struct route fallback;         /* fn NULL: 404 */
    struct core_http_response res; /* reused for every response */
    bool stopping;
    struct core_http_stats stats;
};

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 204:
        return "No Content";
    case 400:
        return "Bad Request";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    default:
        return "Unknown";
    }
}

/* Append the response in s->res to the connection's output. */
static void respond(struct core_http_server *s, struct core_conn *c, bool head_only, bool close)
{
    struct core_http_response *r = &s->res;
    if (r->body.oom) {
        core_http_reply(r, 500, "text/plain", "out of memory\n", 14);
        if (r->body.oom) /* not even that fits */
            core_buf_reset(&r->body);
    }
    if (r->status != 200)
        s->stats.errors++;
    char head[320];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Cache-Control: no-store\r\nConnection: %s\r\n\r\n",
                     r->status, reason(r->status), r->content_type ? r->content_type : "text/plain",
                     r->body.len, close ? "close" : "keep-alive");
    struct core_buf *out = core_conn_out(c);
    core_buf_append(out, head, (size_t)n);
    if (!head_only)
        core_buf_append(out, r->body.data, r->body.len);
}

static void error_reply(struct core_http_server *s, struct core_conn *c, int status,
                        const char *msg)
{
    core_http_reply(&s->res, status, "text/plain", msg, strlen(msg));
    respond(s, c, false, true);
    core_conn_close_after_reply(c);
}

static void not_found(const struct core_http_request *req, struct core_http_response *res,
                      void *data)
{
    core_http_reply(res, 404, "text/plain", "not found\n", 10);
}

static const struct route *route_of(const struct core_http_server *s,
                                    const struct core_http_request *req)
{
    for (unsigned i = 0; i < s->nroutes; i++) {
        const struct route *r = &s->routes[i];
        if (r->len == req->path_len && memcmp(r->path, req->path, r->len) == 0)
            return r;
    }
    return s->fallback.fn ? &s->fallback : NULL;
}

static int on_open(struct core_conn *c, void *app)
{
    core_conn_set_data(c, app);
    return 0;
}

static size_t on_data(struct core_conn *c, char *data, size_t len)
{
    struct core_http_server *s = core_conn_data(c);
    size_t used = 0;
    while (used < len) {
        struct core_http_request req;
        int n = core_http_parse_request(data + used, len - used, &req);
        if (n == CORE_EINCOMPLETE)
            break;
        if (n == CORE_ETOOBIG) {
            error_reply(s, c, 431, "request head too large\n");
            return len;
        }
        if (n < 0) {
            error_reply(s, c, 400, "malformed request\n");
            return len;
        }
        if (req.method == CORE_HTTP_OTHER) {
            error_reply(s, c, 405, "only GET and HEAD\n");
            return len;
        }
        if (req.has_body) {
            error_reply(s, c, 400, "request bodies are not accepted\n");
            return len;
        }
        s->stats.requests++;
        bool close = !req.keep_alive || s->stopping;
        s->res.status = 200;
        s->res.content_type = "text/plain";
        core_buf_reset(&s->res.body);
        const struct route *r = route_of(s, &req);
        if (r)
            r->fn(&req, &s->res, r->data);
        else
            not_found(&req, &s->res, NULL);
        respond(s, c, req.method == CORE_HTTP_HEAD, close);
        used += (size_t)n;
        if (close) {
            core_conn_close_after_reply(c);
            return len;
        }
    }
    return used;
}

static void on_close(struct core_conn *c)
{
}

static const struct core_server_ops http_ops = {
    .on_open = on_open,
    .on_data = on_data,
    .on_close = on_close,
};

int core_http_new(struct core_http_server **out, uv_loop_t *loop, unsigned max_conns,
                  int64_t idle_timeout_s)
{
    struct core_http_server *s = calloc(1, sizeof *s);
    if (!s)
        return CORE_ENOMEM;
    struct core_server_limits lim = {
        .maxclients = max_conns ? max_conns : 64,
        /* A head that does not end within the maximum is answered 431 by
         * the parser first; this only bounds what a connection holds. */
        .query_buf_limit = 4 * CORE_HTTP_REQUEST_MAX,
        .output_buf_limit = 0,
        .idle_timeout_s = idle_timeout_s > 0 ? idle_timeout_s : 30,
    };
    int rc = core_server_new(&s->srv, loop, &http_ops, s, &lim,
                             "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                             "Connection: close\r\n\r\n");
    if (rc) {
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

int core_http_route(struct core_http_server *s, const char *path, core_http_handler fn, void *data)
{
    if (!path) {
        s->fallback = (struct route){NULL, 0, fn, data};
        return 0;
    }
    if (path[0] != '/' || !fn)
        return CORE_EINVAL;
    size_t len = strlen(path);
    for (unsigned i = 0; i < s->nroutes; i++)
        if (s->routes[i].len == len && memcmp(s->routes[i].path, path, len) == 0)
            return CORE_EEXISTS;
    if (s->nroutes == CORE_HTTP_MAX_ROUTES)
        return CORE_ETOOBIG;
    char *copy = strdup(path);
    if (!copy)
        return CORE_ENOMEM;
    s->routes[s->nroutes++] = (struct route){copy, len, fn, data};
    return 0;
}

int core_http_listen(struct core_http_server *s, const char *host, int port)
{
    return core_server_listen(s->srv, host, port);
}

int core_http_port(const struct core_http_server *s)
{
    return core_server_port(s->srv);
}

void core_http_get_stats(const struct core_http_server *s, struct core_http_stats *out)
{
    struct core_server_stats st;
    core_server_get_stats(s->srv, &st);
    *out = s->stats;
    out->connected = st.connected;
}

void core_http_stop(struct core_http_server *s)
{
    s->stopping = true;
    core_server_stop(s->srv);
}

void core_http_free(struct core_http_server *s)
{
    if (!s)
        return;
    core_server_free(s->srv);
    for (unsigned i = 0; i < s->nroutes; i++)
        free(s->routes[i].path);
    core_buf_free(&s->res.body);
    free(s);
}
