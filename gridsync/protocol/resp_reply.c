/* A bounded RESP2 reply reader (resp_reply.h). */
#include "gridsync/protocol/resp_reply.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void gs_resp_reply_free(struct gs_resp_reply *r)
{
    if (r && r->type == '*' && r->el) {
        for (long long i = 0; i < r->len; i++)
            gs_resp_reply_free(&r->el[i]);
        free(r->el);
        r->el = NULL;
    }
}

/* The line at buf[at..len): its end (the '\r' of CRLF) in *eol. 1, 0
 * (no CRLF yet), -1 (a '\r' not followed by '\n'). */
static int line_end(const char *buf, size_t len, size_t at, size_t *eol)
{
    const char *cr = memchr(buf + at, '\r', len - at);
    if (!cr)
        return 0;
    size_t e = (size_t)(cr - buf);
    if (e + 1 >= len)
        return 0;
    if (buf[e + 1] != '\n')
        return -1;
    *eol = e;
    return 1;
}

/* Decimal digits in buf[from..to), or exactly "-1" when allow_nil. */
static bool parse_len(const char *buf, size_t from, size_t to, bool allow_nil, long long max,
                      long long *out)
{
    if (allow_nil && to - from == 2 && buf[from] == '-' && buf[from + 1] == '1') {
        *out = -1;
        return true;
    }
    if (from == to || to - from > 19)
        return false;
    long long v = 0;
    for (size_t i = from; i < to; i++) {
        if (buf[i] < '0' || buf[i] > '9')
            return false;
        int d = buf[i] - '0';
        if (v > (max - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

static bool parse_int(const char *buf, size_t from, size_t to, long long *out)
{
    bool neg = from < to && buf[from] == '-';
    long long v;
    if (!parse_len(buf, from + (neg ? 1 : 0), to, false, INT64_MAX, &v))
        return false;
    *out = neg ? -v : v;
    return true;
}

static int parse_at(const char *buf, size_t len, size_t *pos, struct gs_resp_reply *out,
                    unsigned depth)
{
    memset(out, 0, sizeof(*out));
    size_t at = *pos, eol;
    if (at >= len)
        return 0;
    if (depth > GS_RESP_REPLY_MAX_DEPTH)
        return -1;
    int le = line_end(buf, len, at, &eol);
    if (le <= 0)
        return le;
    char type = buf[at];
    size_t next = eol + 2;
    switch (type) {
    case '+':
    case '-':
        out->type = type;
        out->p = buf + at + 1;
        out->len = (long long)(eol - at - 1);
        *pos = next;
        return 1;
    case ':':
        if (!parse_int(buf, at + 1, eol, &out->len))
            return -1;
        out->type = type;
        *pos = next;
        return 1;
    case '$': {
        long long n;
        if (!parse_len(buf, at + 1, eol, true, GS_RESP_REPLY_MAX_BULK, &n))
            return -1;
        out->type = type;
        out->len = n;
        if (n < 0) {
            *pos = next;
            return 1;
        }
        if (len - next < (size_t)n + 2)
            return 0;
        if (buf[next + (size_t)n] != '\r' || buf[next + (size_t)n + 1] != '\n')
            return -1;
        out->p = buf + next;
        *pos = next + (size_t)n + 2;
        return 1;
    }
    case '*': {
        long long n;
        if (!parse_len(buf, at + 1, eol, true, GS_RESP_REPLY_MAX_ELEMS, &n))
            return -1;
        out->type = type;
        out->len = n;
        if (n <= 0) {
            *pos = next;
            return 1;
        }
        /* Each element takes 3 bytes at least: more than what is left
         * can hold means "read more", and bounds the vector by the input. */
        if ((size_t)n > (len - next) / 3) {
            out->len = 0;
            return 0;
        }
        struct gs_resp_reply *el = calloc((size_t)n, sizeof(*el));
        if (!el)
            return -1;
        size_t p = next;
        for (long long i = 0; i < n; i++) {
            int r = parse_at(buf, len, &p, &el[i], depth + 1);
            if (r <= 0) {
                for (long long k = 0; k < i; k++)
                    gs_resp_reply_free(&el[k]);
                free(el);
                memset(out, 0, sizeof(*out));
                return r;
            }
        }
        out->el = el;
        *pos = p;
        return 1;
    }
    default:
        return -1;
    }
}

int gs_resp_reply_parse(const char *buf, size_t len, size_t *pos, struct gs_resp_reply *out)
{
    size_t p = *pos;
    int r = parse_at(buf, len, &p, out, 1);
    if (r == 1)
        *pos = p;
    return r;
}

bool gs_resp_reply_starts(const struct gs_resp_reply *r, const char *prefix)
{
    size_t n = strlen(prefix);
    return (r->type == '+' || r->type == '$' || r->type == '-') && r->len >= (long long)n &&
           memcmp(r->p, prefix, n) == 0;
}
