/*
 * Listpack: the entry encodings and the splice that every edit reduces
 * to. See listpack.h for the format.
 */
#include "gridsync/types/listpack/listpack.h"

#include <inttypes.h>
#include <stddef.h>
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

/* The count word's top bit: the entries carry back-lengths. */
#define BL_FLAG 0x80000000u

size_t gs_lp_bytes(const unsigned char *lp)
{
    return rd32(lp);
}

uint32_t gs_lp_count(const unsigned char *lp)
{
    return rd32(lp + 4) & ~BL_FLAG;
}

bool gs_lp_has_backlen(const unsigned char *lp)
{
    return (rd32(lp + 4) & BL_FLAG) != 0;
}

static void set_count(unsigned char *lp, uint32_t n)
{
    wr32(lp + 4, n | (rd32(lp + 4) & BL_FLAG));
}

static unsigned char *lp_new(uint32_t flags)
{
    unsigned char *lp = malloc(GS_LP_HDR);
    if (lp) {
        wr32(lp, GS_LP_HDR);
        wr32(lp + 4, flags);
    }
    return lp;
}

unsigned char *gs_lp_new(void)
{
    return lp_new(0);
}

unsigned char *gs_lp_new_backlen(void)
{
    return lp_new(BL_FLAG);
}

/* ---- back-lengths (Redis's lpEncodeBacklen / lpDecodeBacklen) ----
 * The size l of an entry's encoding (first byte to last data byte), in
 * 7-bit groups written so that they read from the right: the rightmost
 * byte holds the low 7 bits, and a byte's top bit says that more bytes
 * follow to its left. */

static size_t backlen_size(size_t l)
{
    return l < (1u << 7) ? 1 : l < (1u << 14) ? 2 : l < (1u << 21) ? 3 : l < (1u << 28) ? 4 : 5;
}

static void backlen_write(unsigned char *p, size_t l)
{
    size_t n = backlen_size(l);
    for (size_t i = 0; i < n; i++)
        p[n - 1 - i] = (unsigned char)(((l >> (7 * i)) & 127) | (i + 1 < n ? 128 : 0));
}

/* Decode the back-length whose rightmost byte is p[-1], reading no byte
 * before lo; *nbytes gets its size. Returns false when it runs past lo
 * or over 5 bytes. */
static bool backlen_read(const unsigned char *p, const unsigned char *lo, size_t *l, size_t *nbytes)
{
    size_t v = 0, n = 0;
    for (;;) {
        if (p - n <= lo || n == 5)
            return false;
        unsigned char b = p[-1 - (ptrdiff_t)n];
        v |= (size_t)(b & 127) << (7 * n);
        n++;
        if (!(b & 128))
            break;
    }
    *l = v;
    *nbytes = n;
    return true;
}

/* Offset of the entry that ends just before end (a back-length list). */
static size_t entry_before(const unsigned char *lp, size_t end)
{
    size_t l = 0, nb = 0;
    (void)backlen_read(lp + end, lp + GS_LP_HDR, &l, &nb);
    return end - nb - l;
}

void gs_lp_free(unsigned char *lp)
{
    free(lp);
}

/* Size of an entry's encoding from its first bytes, without any
 * back-length; avail bounds the read (for validation); returns 0 when
 * the entry does not fit in avail. */
static size_t enc_size_bounded(const unsigned char *p, size_t avail)
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
    size_t n = enc_size_bounded(lp + off, SIZE_MAX);
    return gs_lp_has_backlen(lp) ? n + backlen_size(n) : n;
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

size_t gs_lp_prev(const unsigned char *lp, size_t off)
{
    if (off <= GS_LP_HDR)
        return 0;
    if (gs_lp_has_backlen(lp))
        return entry_before(lp, off);
    size_t o = GS_LP_HDR, n;
    while ((n = o + gs_lp_entry_size(lp, o)) < off)
        o = n;
    return o;
}

size_t gs_lp_last(const unsigned char *lp)
{
    if (!gs_lp_count(lp))
        return 0;
    if (gs_lp_has_backlen(lp))
        return entry_before(lp, gs_lp_bytes(lp));
    size_t off = GS_LP_HDR, n;
    while ((n = gs_lp_next(lp, off)) != 0)
        off = n;
    return off;
}

size_t gs_lp_seek(const unsigned char *lp, uint32_t i)
{
    uint32_t count = gs_lp_count(lp);
    if (i >= count)
        return 0;
    if (gs_lp_has_backlen(lp) && i >= count / 2) { /* nearer the tail */
        size_t off = gs_lp_bytes(lp);
        for (uint32_t back = count - i; back > 0; back--)
            off = entry_before(lp, off);
        return off;
    }
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

size_t gs_lp_entry_bytes(const unsigned char *lp, const char *s, size_t slen)
{
    size_t n = encode(NULL, s, slen);
    return gs_lp_has_backlen(lp) ? n + backlen_size(n) : n;
}

/* Replace del bytes at off with the encoding of s (s NULL: nothing),
 * adjusting the count by dcount. */
static int splice(unsigned char **plp, size_t off, size_t del, const char *s, size_t slen,
                  int dcount)
{
    unsigned char *lp = *plp;
    size_t total = gs_lp_bytes(lp);
    size_t enc = s ? encode(NULL, s, slen) : 0;
    size_t ins = enc && gs_lp_has_backlen(lp) ? enc + backlen_size(enc) : enc;
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
    if (s) {
        encode(lp + off, s, slen);
        if (ins > enc)
            backlen_write(lp + off + enc, enc);
    }
    if (ntotal < total) {
        unsigned char *n = realloc(lp, ntotal);
        if (n)
            lp = n;
    }
    wr32(lp, (uint32_t)ntotal);
    set_count(lp, (uint32_t)((int64_t)gs_lp_count(lp) + dcount));
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
    wr32(t + 4, n | (rd32(lp + 4) & BL_FLAG)); /* the same form as lp */
    memcpy(t + GS_LP_HDR, lp + off, moved);
    wr32(lp, (uint32_t)off);
    set_count(lp, gs_lp_count(lp) - n);
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
    bool bl = gs_lp_has_backlen(lp);
    size_t off = GS_LP_HDR;
    uint32_t n = 0;
    while (off < len) {
        size_t sz = enc_size_bounded(lp + off, len - off);
        if (sz == 0)
            return false;
        if (bl) { /* the back-length must follow and name exactly sz */
            size_t want = backlen_size(sz), l, nb;
            if (len - off - sz < want ||
                !backlen_read(lp + off + sz + want, lp + off + sz, &l, &nb) || nb != want ||
                l != sz)
                return false;
            sz += want;
        }
        off += sz;
        n++;
    }
    return n == gs_lp_count(lp);
}
