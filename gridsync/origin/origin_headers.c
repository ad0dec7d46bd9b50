/*
 * The parsing half of the origin: URL building and what an HTTP response's
 * headers say about caching. Pure functions with no I/O, so the fuzzer
 * (fuzz/fuzz_origin_headers.c) and the unit tests reach them directly.
 *
 * Input is untrusted (an origin is another service, maybe misbehaving):
 * every function reads only within the given length, never needs a NUL,
 * and ignores what it cannot parse rather than failing.
 */
#include "gridsync/origin/origin.h"

#include <string.h>
#include <strings.h>

/* RFC 9111 1.2.2: a delta-seconds too large to hold is taken as 2^31. */
#define DELTA_SECONDS_MAX 2147483648LL

static bool is_unreserved(unsigned char c)
{
    /* RFC 3986 2.3 */
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

size_t gs_origin_build_url(const char *tmpl, const void *key, size_t klen, char *out, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *k = key;
    size_t n = 0;
#define EMIT(ch)                                                                                   \
    do {                                                                                           \
        if (n + 1 < len)                                                                           \
            out[n] = (ch);                                                                         \
        n++;                                                                                       \
    } while (0)
    for (const char *p = tmpl; *p;) {
        if (strncmp(p, "{key}", 5) == 0) {
            for (size_t i = 0; i < klen; i++) {
                if (is_unreserved(k[i])) {
                    EMIT((char)k[i]);
                } else {
                    EMIT('%');
                    EMIT(hex[k[i] >> 4]);
                    EMIT(hex[k[i] & 15]);
                }
            }
            p += 5;
        } else {
            EMIT(*p);
            p++;
        }
    }
#undef EMIT
    if (len > 0)
        out[n < len ? n : len - 1] = '\0';
    return n;
}

void gs_origin_headers_init(struct gs_origin_headers *h)
{
    h->status = 0;
    h->max_age_s = -1;
    h->s_maxage_s = -1;
    h->age_s = 0;
    h->no_store = false;
    h->content_length = -1;
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* RFC 9110 5.6.2 tchar */
static bool is_tchar(unsigned char c)
{
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
        return true;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* delta-seconds (RFC 9111 1.2.2): 1*DIGIT, capped at 2^31. -1 if invalid. */
static int64_t parse_delta_seconds(const char *s, size_t len)
{
    if (len == 0)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        if (v < DELTA_SECONDS_MAX)
            v = v * 10 + (s[i] - '0');
    }
    return v > DELTA_SECONDS_MAX ? DELTA_SECONDS_MAX : v;
}

static bool name_is(const char *name, size_t nlen, const char *want)
{
    return nlen == strlen(want) && strncasecmp(name, want, nlen) == 0;
}

void gs_origin_parse_cache_control(struct gs_origin_headers *h, const char *v, size_t len)
{
    size_t i = 0;
    while (i < len) {
        while (i < len && (is_ows(v[i]) || v[i] == ','))
            i++;
        size_t name = i;
        while (i < len && is_tchar((unsigned char)v[i]))
            i++;
        size_t nlen = i - name;
        const char *arg = NULL;
        size_t alen = 0;
        while (i < len && is_ows(v[i]))
            i++;
        if (i < len && v[i] == '=') {
            i++;
            while (i < len && is_ows(v[i]))
                i++;
            if (i < len && v[i] == '"') {
                /* quoted-string (RFC 9110 5.6.4); an escaped character
                 * makes a number invalid, which is what we want. */
                arg = v + ++i;
                while (i < len && v[i] != '"')
                    i += (v[i] == '\\' && i + 1 < len) ? 2 : 1;
                alen = (size_t)(v + (i < len ? i : len) - arg);
                if (i < len)
                    i++;
            } else {
                arg = v + i;
                while (i < len && is_tchar((unsigned char)v[i]))
                    i++;
                alen = (size_t)(v + i - arg);
            }
        }
        /* Anything up to the next comma is junk: skip it, keep going. */
        bool junk = false;
        while (i < len && v[i] != ',') {
            if (!is_ows(v[i]))
                junk = true;
            i++;
        }
        if (nlen == 0 || junk)
            continue;
        const char *n = v + name;
        if (name_is(n, nlen, "max-age")) {
            int64_t s = arg ? parse_delta_seconds(arg, alen) : -1;
            if (s >= 0 && h->max_age_s < 0)
                h->max_age_s = s;
        } else if (name_is(n, nlen, "s-maxage")) {
            int64_t s = arg ? parse_delta_seconds(arg, alen) : -1;
            if (s >= 0 && h->s_maxage_s < 0)
                h->s_maxage_s = s;
        } else if (name_is(n, nlen, "no-store") || name_is(n, nlen, "no-cache") ||
                   name_is(n, nlen, "private")) {
            /* no-cache would allow storing with revalidation on every use,
             * and private="field" only some fields; a cache that cannot
             * revalidate treats all three as "do not store". */
            h->no_store = true;
        }
    }
}

void gs_origin_header_line(struct gs_origin_headers *h, const char *line, size_t len)
{
    /* Trim the line ending and trailing whitespace. */
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' || is_ows(line[len - 1])))
        len--;
    if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        /* A status line starts a new header block (RFC 9112 4). */
        gs_origin_headers_init(h);
        size_t i = 5;
        while (i < len && line[i] != ' ')
            i++;
        while (i < len && line[i] == ' ')
            i++;
        if (i + 3 <= len && line[i] >= '1' && line[i] <= '5' && line[i + 1] >= '0' &&
            line[i + 1] <= '9' && line[i + 2] >= '0' && line[i + 2] <= '9' &&
            (i + 3 == len || line[i + 3] == ' '))
            h->status = (line[i] - '0') * 100 + (line[i + 1] - '0') * 10 + (line[i + 2] - '0');
        return;
    }
    const char *colon = memchr(line, ':', len);
    if (colon == NULL)
        return;
    size_t nlen = (size_t)(colon - line);
    const char *val = colon + 1;
    size_t vlen = len - nlen - 1;
    while (vlen > 0 && is_ows(*val)) {
        val++;
        vlen--;
    }
    if (name_is(line, nlen, "cache-control")) {
        gs_origin_parse_cache_control(h, val, vlen);
    } else if (name_is(line, nlen, "age")) {
        int64_t s = parse_delta_seconds(val, vlen);
        if (s >= 0)
            h->age_s = s;
    } else if (name_is(line, nlen, "content-length")) {
        int64_t n = parse_delta_seconds(val, vlen);
        /* Past 2^31 bytes the cap hides the real size; any body that large
         * is over every limit anyway. */
        h->content_length = n;
    }
}

int64_t gs_origin_headers_ttl_ms(const struct gs_origin_headers *h)
{
    if (h->no_store)
        return 0;
    /* RFC 9111 4.2.1: a shared cache prefers s-maxage over max-age. */
    int64_t life = h->s_maxage_s >= 0 ? h->s_maxage_s : h->max_age_s;
    if (life < 0)
        return -1;
    /* RFC 9111 4.2.3: what is left is the lifetime minus the age. */
    int64_t left = life - h->age_s;
    return left > 0 ? left * 1000 : 0;
}
