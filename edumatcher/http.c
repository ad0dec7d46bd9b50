/*
 * Tiny HTTP/1.x server (see http.h for the scope and the connection state
 * machine). RFC 9112 is the reference for the request line and header
 * syntax; everything this server does not need is refused rather than
 * half-supported.
 */
#include "edumatcher/http.h"

#include "core/error.h"
#include "core/log.h"

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

int em_http_parse_request(const char *buf, size_t len, struct em_http_request *req)
{
    memset(req, 0, sizeof *req);
    size_t scan = len < EM_HTTP_REQUEST_MAX ? len : EM_HTTP_REQUEST_MAX;
    /* RFC 9112 2.2: ignore at least one empty line before the request. */
    size_t pos = 0;
    while (pos < scan && (buf[pos] == '\r' || buf[pos] == '\n') && pos < 4)
        pos++;
    size_t end = head_end(buf + pos, scan - pos);
    if (end == 0)
        return len >= EM_HTTP_REQUEST_MAX ? CORE_ETOOBIG : CORE_EINCOMPLETE;
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
        req->method = EM_HTTP_GET;
    else if (i == 4 && memcmp(line, "HEAD", 4) == 0)
        req->method = EM_HTTP_HEAD;
    else
        req->method = EM_HTTP_OTHER;
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

int em_http_query_get(const struct em_http_request *req, const char *key, char *out, size_t outlen)
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

bool em_http_path_is(const struct em_http_request *req, const char *p)
{
    size_t n = strlen(p);
    return req->path_len == n && memcmp(req->path, p, n) == 0;
}

/* ---- response body ---- */

static bool reserve(struct em_http_response *res, size_t n)
{
    if (res->oom)
        return false;
    if (res->cap - res->len > n)
        return true;
    size_t cap = res->cap ? res->cap : 1024;
    while (cap - res->len <= n)
        cap *= 2;
    char *b = realloc(res->body, cap);
    if (!b) {
        res->oom = true;
        return false;
    }
    res->body = b;
    res->cap = cap;
    return true;
}

void em_http_write(struct em_http_response *res, const void *data, size_t len)
{
    if (!reserve(res, len))
        return;
    memcpy(res->body + res->len, data, len);
    res->len += len;
}

void em_http_printf(struct em_http_response *res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(res, (size_t)n + 1))
        return;
    va_start(ap, fmt);
    vsnprintf(res->body + res->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    res->len += (size_t)n;
}

void em_http_json_escape(struct em_http_response *res, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            em_http_printf(res, "\\%c", c);
        else if (c < 0x20)
            em_http_printf(res, "\\u%04x", c);
        else
            em_http_write(res, &s[i], 1);
    }
}

/* ---- server ---- */

struct em_http_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wr;
    uv_shutdown_t sd;
    struct em_http_server *srv;
    struct em_http_conn *next, *prev;
    struct em_http_response res;
    char head[256];
    bool writing;
    bool close_after;
    bool lingering; /* response sent, reading and discarding until EOF */
    bool closing;
    int open_handles;
    size_t in_len;
    char in[EM_HTTP_REQUEST_MAX];
};

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
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

static void on_handle_closed(uv_handle_t *h)
{
    struct em_http_conn *c = h->data;
    if (--c->open_handles == 0) {
        free(c->res.body);
        free(c);
    }
}

static void conn_close(struct em_http_conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    struct em_http_server *srv = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    srv->nconns--;
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

static void process(struct em_http_conn *c);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
static void on_timeout(uv_timer_t *t);

static void on_written(uv_write_t *w, int status)
{
    struct em_http_conn *c = w->data;
    c->writing = false;
    c->res.len = 0;
    c->res.oom = false;
    if (c->closing)
        return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    if (c->close_after) {
        /* Lingering close: closing with unread input would make the kernel
         * send a reset, which can destroy the response before the client
         * reads it. Shut down our side and discard input until EOF or a
         * short timeout. */
        c->lingering = true;
        c->in_len = 0;
        if (uv_shutdown(&c->sd, (uv_stream_t *)&c->tcp, NULL) != 0) {
            conn_close(c);
            return;
        }
        uv_timer_start(&c->timer, on_timeout, 2000, 0);
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
        return;
    }
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    process(c);
}

static void respond(struct em_http_conn *c, bool head_only)
{
    struct em_http_response *r = &c->res;
    if (r->oom) {
        r->status = 500;
        r->len = 0;
        r->oom = false;
        r->content_type = "text/plain";
        em_http_printf(r, "out of memory\n");
    }
    if (r->status != 200)
        c->srv->errors++;
    int n = snprintf(c->head, sizeof c->head,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Cache-Control: no-store\r\nConnection: %s\r\n\r\n",
                     r->status, reason(r->status), r->content_type ? r->content_type : "text/plain",
                     r->len, c->close_after ? "close" : "keep-alive");
    uv_buf_t bufs[2] = {uv_buf_init(c->head, (unsigned)n), uv_buf_init(r->body, (unsigned)r->len)};
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->writing = true;
    c->wr.data = c;
    if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, bufs, head_only || r->len == 0 ? 1 : 2,
                 on_written) != 0) {
        c->writing = false;
        conn_close(c);
    }
}

static void error_response(struct em_http_conn *c, int status, const char *msg)
{
    c->res.status = status;
    c->res.content_type = "text/plain";
    c->res.len = 0;
    em_http_printf(&c->res, "%s\n", msg);
    c->close_after = true;
    c->in_len = 0;
    respond(c, false);
}

static void process(struct em_http_conn *c)
{
    if (c->writing || c->closing || c->in_len == 0)
        return;
    struct em_http_request req;
    int n = em_http_parse_request(c->in, c->in_len, &req);
    if (n == CORE_EINCOMPLETE)
        return;
    if (n == CORE_ETOOBIG) {
        error_response(c, 431, "request head too large");
        return;
    }
    if (n < 0) {
        error_response(c, 400, "malformed request");
        return;
    }
    if (req.method == EM_HTTP_OTHER) {
        error_response(c, 405, "only GET and HEAD");
        return;
    }
    if (req.has_body) {
        error_response(c, 400, "request bodies are not accepted");
        return;
    }
    c->srv->requests++;
    c->close_after = !req.keep_alive || c->srv->closing;
    c->res.status = 200;
    c->res.content_type = "text/plain";
    c->res.len = 0;
    c->srv->handler(&req, &c->res, c->srv->data);
    /* The handler is done with req (which points into c->in): drop the
     * head, keep any pipelined bytes after it. */
    memmove(c->in, c->in + n, c->in_len - (size_t)n);
    c->in_len -= (size_t)n;
    respond(c, req.method == EM_HTTP_HEAD);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct em_http_conn *c = h->data;
    buf->base = c->in + c->in_len;
    buf->len = sizeof c->in - c->in_len;
}

static void on_timeout(uv_timer_t *t)
{
    conn_close(t->data);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct em_http_conn *c = s->data;
    if (nread < 0) {
        conn_close(c);
        return;
    }
    if (c->lingering) {
        c->in_len = 0;
        return;
    }
    c->in_len += (size_t)nread;
    uv_timer_again(&c->timer);
    process(c);
}

static void on_connection(uv_stream_t *l, int status)
{
    struct em_http_server *srv = l->data;
    if (status < 0)
        return;
    struct em_http_conn *c = calloc(1, sizeof *c);
    if (!c)
        return; /* the pending connection stays in the backlog */
    c->srv = srv;
    uv_tcp_init(srv->loop, &c->tcp);
    uv_timer_init(srv->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->open_handles = 2;
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    srv->nconns++;
    if (uv_accept(l, (uv_stream_t *)&c->tcp) != 0) {
        conn_close(c);
        return;
    }
    if (srv->nconns > srv->max_conns) {
        srv->errors++;
        conn_close(c);
        return;
    }
    uv_timer_start(&c->timer, on_timeout, srv->idle_ms, srv->idle_ms);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

int em_http_listen(struct em_http_server *srv, uv_loop_t *loop, const char *host, int port,
                   unsigned max_conns, em_http_handler handler, void *data)
{
    memset(srv, 0, sizeof *srv);
    srv->loop = loop;
    srv->handler = handler;
    srv->data = data;
    srv->max_conns = max_conns ? max_conns : 64;
    srv->idle_ms = 30000;
    struct sockaddr_in addr;
    if (uv_ip4_addr(host, port, &addr) != 0)
        return CORE_EINVAL;
    uv_tcp_init(loop, &srv->listener);
    srv->listener.data = srv;
    int rc = uv_tcp_bind(&srv->listener, (const struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&srv->listener, 128, on_connection);
    if (rc != 0) {
        uv_close((uv_handle_t *)&srv->listener, NULL);
        return rc == UV_EADDRINUSE ? CORE_EBUSY : CORE_EIO;
    }
    return 0;
}

int em_http_port(const struct em_http_server *srv)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&ss, &len) != 0)
        return -1;
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

void em_http_close(struct em_http_server *srv)
{
    if (srv->closing)
        return;
    srv->closing = true;
    uv_close((uv_handle_t *)&srv->listener, NULL);
    while (srv->conns)
        conn_close(srv->conns);
}
