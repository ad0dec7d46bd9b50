/*
 * Listpack: the entry encodings and the splice that every edit reduces
 * to. See listpack.h for the format.
 */
#include "gridsync/types/listpack/listpack.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "gridsync/protocol/resp.h"

static uint32_t rd32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static void wr32(unsigned char *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

size_t gs_lp_bytes(const unsigned char *lp)
{
    return rd32(lp);
}

uint32_t gs_lp_count(const unsigned char *lp)
{
    return rd32(lp + 4);
}

unsigned char *gs_lp_new(void)
{
    unsigned char *lp = malloc(GS_LP_HDR);
    if (lp) {
        wr32(lp, GS_LP_HDR);
        wr32(lp + 4, 0);
    }
    return lp;
}

void gs_lp_free(unsigned char *lp)
{
    free(lp);
}

/* Size of an entry from its first bytes; avail bounds the read (for
 * validation); returns 0 when the entry does not fit in avail. */
static size_t entry_size_bounded(const unsigned char *p, size_t avail)
{
    if (avail < 1)
        return 0;
    unsigned char b = p[0];
    size_t n;
    if (b < 0x80)
        n = 1;
    else if ((b & 0xC0) == 0x80)
        n = 1 + (b & 0x3F);
    else if ((b & 0xE0) == 0xC0)
        n = 2;
    else if ((b & 0xF0) == 0xE0) {
        if (avail < 2)
            return 0;
        n = 2 + (((size_t)(b & 0x0F) << 8) | p[1]);
    } else if (b == 0xF0) {
        if (avail < 5)
            return 0;
        n = 5 + (size_t)rd32(p + 1);
    } else if (b == 0xF1)
        n = 3;
    else if (b == 0xF2)
        n = 4;
    else if (b == 0xF3)
        n = 5;
    else if (b == 0xF4)
        n = 9;
    else
        return 0;
    return n <= avail ? n : 0;
}

size_t gs_lp_entry_size(const unsigned char *lp, size_t off)
{
    return entry_size_bounded(lp + off, SIZE_MAX);
}

size_t gs_lp_first(const unsigned char *lp)
{
    return gs_lp_count(lp) ? GS_LP_HDR : 0;
}

size_t gs_lp_next(const unsigned char *lp, size_t off)
{
    size_t n = off + gs_lp_entry_size(lp, off);
    return n < gs_lp_bytes(lp) ? n : 0;
}

size_t gs_lp_last(const unsigned char *lp)
{
    size_t off = gs_lp_first(lp), n;
    if (!off)
        return 0;
    while ((n = gs_lp_next(lp, off)) != 0)
        off = n;
    return off;
}

size_t gs_lp_seek(const unsigned char *lp, uint32_t i)
{
    if (i >= gs_lp_count(lp))
        return 0;
    size_t off = GS_LP_HDR;
    while (i--)
        off += gs_lp_entry_size(lp, off);
    return off;
}

/* Decode the entry at p: either an integer (returns true, *iv) or a
 * string (returns false, *s, *slen). */
static bool decode(const unsigned char *p, int64_t *iv, const char **s, size_t *slen)
{
    unsigned char b = p[0];
    if (b < 0x80) {
        *iv = b;
        return true;
    }
    if ((b & 0xC0) == 0x80) {
        *s = (const char *)p + 1;
        *slen = b & 0x3F;
        return false;
    }
    if ((b & 0xE0) == 0xC0) {
        uint16_t u = (uint16_t)(((b & 0x1F) << 8) | p[1]);
        /* sign-extend 13 bits */
        *iv = (u & 0x1000) ? (int64_t)u - 0x2000 : (int64_t)u;
        return true;
    }
    if ((b & 0xF0) == 0xE0) {
        *s = (const char *)p + 2;
        *slen = ((size_t)(b & 0x0F) << 8) | p[1];
        return false;
    }
    if (b == 0xF0) {
        *s = (const char *)p + 5;
        *slen = rd32(p + 1);
        return false;
    }
    if (b == 0xF1) {
        int16_t v;
        memcpy(&v, p + 1, 2);
        *iv = v;
    } else if (b == 0xF2) {
        uint32_t u = (uint32_t)p[1] | (uint32_t)p[2] << 8 | (uint32_t)p[3] << 16;
        *iv = (u & 0x800000u) ? (int64_t)u - 0x1000000 : (int64_t)u;
    } else if (b == 0xF3) {
        int32_t v;
        memcpy(&v, p + 1, 4);
        *iv = v;
    } else {
        int64_t v;
        memcpy(&v, p + 1, 8);
        *iv = v;
    }
    return true;
}

static size_t fmt_int(char *buf, int64_t v)
{
    return (size_t)snprintf(buf, GS_LP_INTBUF, "%" PRId64, v);
}

const char *gs_lp_get(const unsigned char *lp, size_t off, char *buf, size_t *len)
{
    int64_t iv;
    const char *s;
    if (decode(lp + off, &iv, &s, len)) {
        *len = fmt_int(buf, iv);
        return buf;
    }
    return s;
}

bool gs_lp_get_int(const unsigned char *lp, size_t off, int64_t *ival)
{
    const char *s;
    size_t slen;
    if (decode(lp + off, ival, &s, &slen))
        return true;
    return gs_string2ll(s, slen, ival);
}

bool gs_lp_eq(const unsigned char *lp, size_t off, const char *s, size_t slen)
{
    char buf[GS_LP_INTBUF];
    size_t len;
    const char *e = gs_lp_get(lp, off, buf, &len);
    return len == slen && memcmp(e, s, slen) == 0;
}

size_t gs_lp_find(const unsigned char *lp, size_t off, const char *s, size_t slen, unsigned skip)
{
    if (off == 0)
        off = gs_lp_first(lp);
    /* An integer search key compares as an integer, without formatting
     * every integer entry. */
    int64_t want;
    bool want_int = gs_string2ll(s, slen, &want);
    while (off) {
        int64_t iv;
        const char *es;
        size_t elen;
        if (decode(lp + off, &iv, &es, &elen)) {
            if (want_int && iv == want)
                return off;
        } else if (!want_int && elen == slen && memcmp(es, s, slen) == 0) {
            return off;
        }
        for (unsigned i = 0; i <= skip && off; i++)
            off = gs_lp_next(lp, off);
    }
    return 0;
}

/* Encode s into out (at most 9 + slen bytes); returns the size. With out
 * NULL only computes it. */
static size_t encode(unsigned char *out, const char *s, size_t slen)
{
    int64_t v;
    if (gs_string2ll(s, slen, &v)) {
        if (v >= 0 && v < 128) {
            if (out)
                out[0] = (unsigned char)v;
            return 1;
        }
        if (v >= -4096 && v < 4096) {
            uint16_t u = (uint16_t)(v & 0x1FFF);
            if (out) {
                out[0] = (unsigned char)(0xC0 | (u >> 8));
                out[1] = (unsigned char)(u & 0xFF);
            }
            return 2;
        }
        if (v >= INT16_MIN && v <= INT16_MAX) {
            if (out) {
                int16_t w = (int16_t)v;
                out[0] = 0xF1;
                memcpy(out + 1, &w, 2);
            }
            return 3;
        }
        if (v >= -(1 << 23) && v < (1 << 23)) {
            if (out) {
                uint32_t u = (uint32_t)v & 0xFFFFFFu;
                out[0] = 0xF2;
                out[1] = (unsigned char)(u & 0xFF);
                out[2] = (unsigned char)((u >> 8) & 0xFF);
                out[3] = (unsigned char)(u >> 16);
            }
            return 4;
        }
        if (v >= INT32_MIN && v <= INT32_MAX) {
            if (out) {
                int32_t w = (int32_t)v;
                out[0] = 0xF3;
                memcpy(out + 1, &w, 4);
            }
            return 5;
        }
        if (out) {
            out[0] = 0xF4;
            memcpy(out + 1, &v, 8);
        }
        return 9;
    }
    size_t hdr;
    if (slen < 64) {
        hdr = 1;
        if (out)
            out[0] = (unsigned char)(0x80 | slen);
    } else if (slen < 4096) {
        hdr = 2;
        if (out) {
            out[0] = (unsigned char)(0xE0 | (slen >> 8));
            out[1] = (unsigned char)(slen & 0xFF);
        }
    } else {
        hdr = 5;
        if (out) {
            out[0] = 0xF0;
            wr32(out + 1, (uint32_t)slen);
        }
    }
    if (out)
        memcpy(out + hdr, s, slen);
    return hdr + slen;
}

size_t gs_lp_encoded_size(const char *s, size_t slen)
{
    return encode(NULL, s, slen);
}

/* Replace del bytes at off with the encoding of s (s NULL: nothing),
 * adjusting the count by dcount. */
static int splice(unsigned char **plp, size_t off, size_t del, const char *s, size_t slen,
                  int dcount)
{
    unsigned char *lp = *plp;
    size_t total = gs_lp_bytes(lp);
    size_t ins = s ? encode(NULL, s, slen) : 0;
    if (slen > UINT32_MAX - 16 || total - del + ins > UINT32_MAX)
        return CORE_ETOOBIG;
    size_t ntotal = total - del + ins;
    if (ntotal > total) {
        unsigned char *n = realloc(lp, ntotal);
        if (!n)
            return CORE_ENOMEM;
        lp = n;
    }
    memmove(lp + off + ins, lp + off + del, total - off - del);
    if (s)
        encode(lp + off, s, slen);
    if (ntotal < total) {
        unsigned char *n = realloc(lp, ntotal);
        if (n)
            lp = n;
    }
    wr32(lp, (uint32_t)ntotal);
    wr32(lp + 4, (uint32_t)((int64_t)gs_lp_count(lp) + dcount));
    *plp = lp;
    return 0;
}

int gs_lp_insert(unsigned char **lp, size_t off, const char *s, size_t slen)
{
    if (off == 0)
        off = gs_lp_bytes(*lp);
    return splice(lp, off, 0, s, slen, 1);
}

int gs_lp_append(unsigned char **lp, const char *s, size_t slen)
{
    return splice(lp, gs_lp_bytes(*lp), 0, s, slen, 1);
}

int gs_lp_replace(unsigned char **lp, size_t off, const char *s, size_t slen)
{
    return splice(lp, off, gs_lp_entry_size(*lp, off), s, slen, 0);
}

void gs_lp_delete(unsigned char **lp, size_t off, uint32_t n)
{
    size_t end = off;
    for (uint32_t i = 0; i < n; i++)
        end += gs_lp_entry_size(*lp, end);
    (void)splice(lp, off, end - off, NULL, 0, -(int)n);
}

int gs_lp_split(unsigned char **plp, size_t off, unsigned char **tail)
{
    unsigned char *lp = *plp;
    size_t total = gs_lp_bytes(lp), moved = total - off;
    uint32_t n = 0;
    for (size_t o = off; o < total; o += gs_lp_entry_size(lp, o))
        n++;
    unsigned char *t = malloc(GS_LP_HDR + moved);
    if (!t)
        return CORE_ENOMEM;
    wr32(t, (uint32_t)(GS_LP_HDR + moved));
    wr32(t + 4, n);
    memcpy(t + GS_LP_HDR, lp + off, moved);
    wr32(lp, (uint32_t)off);
    wr32(lp + 4, gs_lp_count(lp) - n);
    unsigned char *shrunk = realloc(lp, off);
    if (shrunk)
        lp = shrunk;
    *plp = lp;
    *tail = t;
    return 0;
}

bool gs_lp_validate(const unsigned char *lp, size_t len)
{
    if (len < GS_LP_HDR || gs_lp_bytes(lp) != len)
        return false;
    size_t off = GS_LP_HDR;
    uint32_t n = 0;
    while (off < len) {
        size_t sz = entry_size_bounded(lp + off, len - off);
        if (sz == 0)
            return false;
        off += sz;
        n++;
    }
    return n == gs_lp_count(lp);
}
