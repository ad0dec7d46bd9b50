/*
 * RESP request parser and reply writer (see resp.h).
 *
 * Parser invariants, between calls on one request:
 *  1. mode == 0 iff no byte of the current request has been examined;
 *     then argc == 0, multibulk_left == 0, pos == 0.
 *  2. In multibulk mode, off[0..argc) and len[0..argc) are the arguments
 *     complete so far (offsets from the request start), pos is the first
 *     byte not yet parsed, and bulk_len is the length announced by the
 *     header just parsed (or -1 when the next thing is a header).
 *  3. In inline mode, pos is how far the search for '\n' got.
 * The parser never allocates in proportion to a declared length: the
 * argument arrays grow with the arguments that have actually arrived.
 */
#include "gridsync/protocol/resp.h"

#include "core/error.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARGS_INITIAL 1024 /* as Redis: min(multibulk length, 1024) */
/* Argument arrays that grew beyond this for one request are freed before
 * the next one (Redis frees argv after every command), so a single huge
 * MSET does not pin them for the connection's lifetime. */
#define ARGS_KEEP ARGS_INITIAL

bool gs_string2ll(const char *s, size_t slen, int64_t *out)
{
    /* Redis util.c string2ll: the accepted forms, exactly. */
    if (slen == 0 || slen > 20)
        return false;
    if (slen == 1 && s[0] == '0') {
        *out = 0;
        return true;
    }
    size_t i = 0;
    bool neg = false;
    if (s[0] == '-') {
        neg = true;
        i = 1;
        if (slen == 1)
            return false;
    }
    if (s[i] < '1' || s[i] > '9')
        return false;
    uint64_t v = (uint64_t)(s[i++] - '0');
    for (; i < slen; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        if (v > UINT64_MAX / 10)
            return false;
        v *= 10;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > UINT64_MAX - d)
            return false;
        v += d;
    }
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1)
            return false;
        *out = (int64_t)(0 - v);
    } else {
        if (v > (uint64_t)INT64_MAX)
            return false;
        *out = (int64_t)v;
    }
    return true;
}

void gs_resp_parser_init(struct gs_resp_parser *p, int64_t max_bulk)
{
    memset(p, 0, sizeof(*p));
    p->bulk_len = -1;
    p->max_bulk = max_bulk;
}

void gs_resp_parser_free(struct gs_resp_parser *p)
{
    free(p->off);
    free(p->len);
    free(p->argv);
    p->off = p->len = NULL;
    p->argv = NULL;
    p->cap = p->argv_cap = 0;
}

static void reset(struct gs_resp_parser *p)
{
    p->mode = 0;
    p->multibulk_left = 0;
    p->bulk_len = -1;
    p->pos = 0;
    p->argc = 0;
}

static int reserve_args(struct gs_resp_parser *p, size_t n)
{
    if (n <= p->cap)
        return 0;
    size_t cap = p->cap ? p->cap : 16;
    while (cap < n)
        cap *= 2;
    size_t *off = realloc(p->off, cap * sizeof(*off));
    if (!off)
        return CORE_ENOMEM;
    p->off = off;
    size_t *len = realloc(p->len, cap * sizeof(*len));
    if (!len)
        return CORE_ENOMEM;
    p->len = len;
    p->cap = cap;
    return 0;
}

static int push_arg(struct gs_resp_parser *p, size_t off, size_t len)
{
    if (p->argc == p->cap && reserve_args(p, p->argc + 1))
        return CORE_ENOMEM;
    p->off[p->argc] = off;
    p->len[p->argc] = len;
    p->argc++;
    return 0;
}

/* Turn the offsets into pointers for the handler. */
static int finish(struct gs_resp_parser *p, char *buf, size_t end, size_t *consumed, size_t *argc,
                  struct gs_arg **argv)
{
    if (p->argc > p->argv_cap) {
        size_t cap = p->cap;
        struct gs_arg *a = realloc(p->argv, cap * sizeof(*a));
        if (!a) {
            reset(p);
            return CORE_ENOMEM;
        }
        p->argv = a;
        p->argv_cap = cap;
    }
    for (size_t i = 0; i < p->argc; i++) {
        p->argv[i].p = buf + p->off[i];
        p->argv[i].len = p->len[i];
    }
    *argc = p->argc;
    *argv = p->argv;
    *consumed = end;
    reset(p);
    return GS_RESP_REQUEST;
}

static int proto_error(struct gs_resp_parser *p, const char **errmsg, const char *msg)
{
    *errmsg = msg;
    reset(p);
    return CORE_EPROTO;
}

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int hex_val(char c)
{
    if (c <= '9')
        return c - '0';
    return (c | 0x20) - 'a' + 10;
}

static int is_space(char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f';
}

/* Split line[0..n) into arguments as Redis's sdssplitargs does (spaces
 * separate; "..." with \n \r \t \b \a \\ \" \xHH escapes; '...' with \'),
 * unescaping in place. Returns 0 or -1 for unbalanced quotes. */
static int split_inline(struct gs_resp_parser *p, char *line, size_t n)
{
    size_t i = 0;
    for (;;) {
        while (i < n && is_space(line[i]))
            i++;
        if (i == n)
            return 0;
        size_t start = i, w = i; /* write position <= read position */
        bool inq = false, insq = false, done = false;
        while (!done) {
            if (inq) {
                if (i == n)
                    return -1;
                if (line[i] == '\\' && i + 3 < n && line[i + 1] == 'x' && is_hex(line[i + 2]) &&
                    is_hex(line[i + 3])) {
                    line[w++] = (char)(hex_val(line[i + 2]) * 16 + hex_val(line[i + 3]));
                    i += 4;
                } else if (line[i] == '\\' && i + 1 < n) {
                    char c;
                    switch (line[i + 1]) {
                    case 'n':
                        c = '\n';
                        break;
                    case 'r':
                        c = '\r';
                        break;
                    case 't':
                        c = '\t';
                        break;
                    case 'b':
                        c = '\b';
                        break;
                    case 'a':
                        c = '\a';
                        break;
                    default:
                        c = line[i + 1];
                        break;
                    }
                    line[w++] = c;
                    i += 2;
                } else if (line[i] == '"') {
                    /* closing quote must be followed by a space or the end */
                    if (i + 1 < n && !is_space(line[i + 1]))
                        return -1;
                    i++;
                    done = true;
                } else {
                    line[w++] = line[i++];
                }
            } else if (insq) {
                if (i == n)
                    return -1;
                if (line[i] == '\\' && i + 1 < n && line[i + 1] == '\'') {
                    line[w++] = '\'';
                    i += 2;
                } else if (line[i] == '\'') {
                    if (i + 1 < n && !is_space(line[i + 1]))
                        return -1;
                    i++;
                    done = true;
                } else {
                    line[w++] = line[i++];
                }
            } else {
                if (i == n || is_space(line[i])) {
                    done = true;
                } else if (line[i] == '"') {
                    inq = true;
                    i++;
                } else if (line[i] == '\'') {
                    insq = true;
                    i++;
                } else {
                    line[w++] = line[i++];
                }
            }
        }
        if (push_arg(p, start, w - start))
            return -2;
    }
}

/* Redis's processInlineBuffer. */
static int parse_inline(struct gs_resp_parser *p, char *buf, size_t len, size_t *consumed,
                        size_t *argc, struct gs_arg **argv, const char **errmsg)
{
    char *nl = memchr(buf + p->pos, '\n', len - p->pos);
    if (!nl) {
        if (len > GS_RESP_INLINE_MAX)
            return proto_error(p, errmsg, "Protocol error: too big inline request");
        p->pos = len;
        return GS_RESP_NEED_MORE;
    }
    size_t end = (size_t)(nl - buf) + 1;
    size_t n = end - 1;
    if (n > 0 && buf[n - 1] == '\r')
        n--;
    p->argc = 0;
    int rc = split_inline(p, buf, n);
    if (rc == -1)
        return proto_error(p, errmsg, "Protocol error: unbalanced quotes in request");
    if (rc) {
        reset(p);
        return CORE_ENOMEM;
    }
    return finish(p, buf, end, consumed, argc, argv);
}

/* Redis's processMultibulkBuffer. */
static int parse_multibulk(struct gs_resp_parser *p, char *buf, size_t len, size_t *consumed,
                           size_t *argc, struct gs_arg **argv, const char **errmsg)
{
    if (p->multibulk_left == 0) {
        char *nl = memchr(buf, '\r', len);
        if (!nl) {
            if (len > GS_RESP_INLINE_MAX)
                return proto_error(p, errmsg, "Protocol error: too big mbulk count string");
            return GS_RESP_NEED_MORE;
        }
        size_t hdr = (size_t)(nl - buf);
        if (hdr + 2 > len) /* the \n too */
            return GS_RESP_NEED_MORE;
        int64_t ll;
        if (!gs_string2ll(buf + 1, hdr - 1, &ll) || ll > INT_MAX)
            return proto_error(p, errmsg, "Protocol error: invalid multibulk length");
        if (ll > GS_RESP_UNAUTH_MAX_ARGS && !p->authenticated)
            return proto_error(p, errmsg, "Protocol error: unauthenticated multibulk length");
        p->pos = hdr + 2;
        if (ll <= 0) /* "*0" or "*-1": an empty request, skipped */
            return finish(p, buf, p->pos, consumed, argc, argv);
        if (reserve_args(p, ll < ARGS_INITIAL ? (size_t)ll : ARGS_INITIAL)) {
            reset(p);
            return CORE_ENOMEM;
        }
        p->multibulk_left = ll;
        p->bulk_len = -1;
        p->argc = 0;
    }
    size_t pos = p->pos;
    while (p->multibulk_left) {
        if (p->bulk_len == -1) {
            char *nl = memchr(buf + pos, '\r', len - pos);
            if (!nl) {
                if (len - pos > GS_RESP_INLINE_MAX)
                    return proto_error(p, errmsg, "Protocol error: too big bulk count string");
                break;
            }
            size_t hdr = (size_t)(nl - buf);
            if (hdr + 2 > len)
                break;
            if (buf[pos] != '$') {
                snprintf(p->errbuf, sizeof(p->errbuf), "Protocol error: expected '$', got '%c'",
                         buf[pos]);
                return proto_error(p, errmsg, p->errbuf);
            }
            int64_t ll;
            if (!gs_string2ll(buf + pos + 1, hdr - pos - 1, &ll) || ll < 0 || ll > p->max_bulk)
                return proto_error(p, errmsg, "Protocol error: invalid bulk length");
            if (ll > GS_RESP_UNAUTH_MAX_BULK && !p->authenticated)
                return proto_error(p, errmsg, "Protocol error: unauthenticated bulk length");
            pos = hdr + 2;
            p->bulk_len = ll;
        }
        /* As Redis, the two bytes after the bulk are taken to be \r\n. */
        if (len - pos < (size_t)p->bulk_len + 2)
            break;
        if (push_arg(p, pos, (size_t)p->bulk_len)) {
            reset(p);
            return CORE_ENOMEM;
        }
        pos += (size_t)p->bulk_len + 2;
        p->bulk_len = -1;
        p->multibulk_left--;
    }
    p->pos = pos;
    if (p->multibulk_left)
        return GS_RESP_NEED_MORE;
    return finish(p, buf, pos, consumed, argc, argv);
}

int gs_resp_parse(struct gs_resp_parser *p, char *buf, size_t len, size_t *consumed, size_t *argc,
                  struct gs_arg **argv, const char **errmsg)
{
    if (len == 0)
        return GS_RESP_NEED_MORE;
    if (p->mode == 0 && (p->cap > ARGS_KEEP || p->argv_cap > ARGS_KEEP))
        gs_resp_parser_free(p); /* the previous request's argv is done with */
    if (p->mode == 0)
        p->mode = buf[0] == '*' ? '*' : 'i';
    if (p->mode == '*')
        return parse_multibulk(p, buf, len, consumed, argc, argv, errmsg);
    return parse_inline(p, buf, len, consumed, argc, argv, errmsg);
}

/* ---------------------------------------------------------------- writer */

size_t gs_fmt_int(char *out, int64_t v)
{
    char tmp[24];
    size_t n = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    size_t k = 0;
    if (v < 0)
        out[k++] = '-';
    while (n)
        out[k++] = tmp[--n];
    return k;
}

/* <type><n>\r\n */
static void header(struct gs_writer *w, char type, int64_t n)
{
    char *p = core_buf_reserve(w->buf, 24);
    if (!p)
        return;
    p[0] = type;
    size_t k = 1 + gs_fmt_int(p + 1, n);
    p[k++] = '\r';
    p[k++] = '\n';
    w->buf->len += k;
}

void gs_reply_raw(struct gs_writer *w, const char *p, size_t len)
{
    core_buf_append(w->buf, p, len);
}

void gs_reply_simple(struct gs_writer *w, const char *s, size_t len)
{
    char *p = core_buf_reserve(w->buf, len + 3);
    if (!p)
        return;
    p[0] = '+';
    memcpy(p + 1, s, len);
    p[len + 1] = '\r';
    p[len + 2] = '\n';
    w->buf->len += len + 3;
}

void gs_reply_ok(struct gs_writer *w)
{
    gs_reply_raw(w, "+OK\r\n", 5);
}

void gs_reply_error(struct gs_writer *w, const char *msg, size_t len)
{
    char *p = core_buf_reserve(w->buf, len + 3);
    if (!p)
        return;
    p[0] = '-';
    for (size_t i = 0; i < len; i++) {
        char c = msg[i];
        p[i + 1] = (c == '\r' || c == '\n') ? ' ' : c;
    }
    p[len + 1] = '\r';
    p[len + 2] = '\n';
    w->buf->len += len + 3;
}

void gs_reply_errorf(struct gs_writer *w, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof(msg))
        n = sizeof(msg) - 1;
    gs_reply_error(w, msg, (size_t)n);
}

void gs_reply_int(struct gs_writer *w, int64_t v)
{
    header(w, ':', v);
}

void gs_reply_bulk(struct gs_writer *w, const void *data, size_t len)
{
    char *p = core_buf_reserve(w->buf, len + 32);
    if (!p)
        return;
    p[0] = '$';
    size_t k = 1 + gs_fmt_int(p + 1, (int64_t)len);
    p[k++] = '\r';
    p[k++] = '\n';
    memcpy(p + k, data, len);
    k += len;
    p[k++] = '\r';
    p[k++] = '\n';
    w->buf->len += k;
}

void gs_reply_bulk_cstr(struct gs_writer *w, const char *s)
{
    gs_reply_bulk(w, s, strlen(s));
}

void gs_reply_bulk_int(struct gs_writer *w, int64_t v)
{
    char tmp[24];
    gs_reply_bulk(w, tmp, gs_fmt_int(tmp, v));
}

void gs_reply_null(struct gs_writer *w)
{
    if (w->proto == 3)
        gs_reply_raw(w, "_\r\n", 3);
    else
        gs_reply_raw(w, "$-1\r\n", 5);
}

void gs_reply_null_array(struct gs_writer *w)
{
    if (w->proto == 3)
        gs_reply_raw(w, "_\r\n", 3);
    else
        gs_reply_raw(w, "*-1\r\n", 5);
}

void gs_reply_array(struct gs_writer *w, size_t n)
{
    header(w, '*', (int64_t)n);
}

void gs_reply_set(struct gs_writer *w, size_t n)
{
    header(w, w->proto == 3 ? '~' : '*', (int64_t)n);
}

void gs_reply_push(struct gs_writer *w, size_t n)
{
    header(w, w->proto == 3 ? '>' : '*', (int64_t)n);
}

void gs_reply_map(struct gs_writer *w, size_t n)
{
    if (w->proto == 3)
        header(w, '%', (int64_t)n);
    else
        header(w, '*', (int64_t)(2 * n));
}

void gs_reply_double(struct gs_writer *w, double v)
{
    char tmp[64];
    int n;
    /* Redis's addReplyDouble spells infinities itself rather than trust
     * libc's spelling. */
    if (isinf(v))
        n = snprintf(tmp, sizeof(tmp), "%s", v > 0 ? "inf" : "-inf");
    else
        n = snprintf(tmp, sizeof(tmp), "%.17g", v);
    if (w->proto == 3) {
        core_buf_append(w->buf, ",", 1);
        core_buf_append(w->buf, tmp, (size_t)n);
        core_buf_append(w->buf, "\r\n", 2);
    } else {
        gs_reply_bulk(w, tmp, (size_t)n);
    }
}

void gs_reply_bool(struct gs_writer *w, bool v)
{
    if (w->proto == 3)
        gs_reply_raw(w, v ? "#t\r\n" : "#f\r\n", 4);
    else
        gs_reply_raw(w, v ? ":1\r\n" : ":0\r\n", 4);
}

void gs_reply_verbatim(struct gs_writer *w, const char *p, size_t len, const char *ext)
{
    if (w->proto != 3) {
        gs_reply_bulk(w, p, len);
        return;
    }
    header(w, '=', (int64_t)len + 4);
    core_buf_append(w->buf, ext, 3);
    core_buf_append(w->buf, ":", 1);
    core_buf_append(w->buf, p, len);
    core_buf_append(w->buf, "\r\n", 2);
}
