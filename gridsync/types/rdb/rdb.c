/*
 * Values in Redis 7.0's DUMP format (rdb.h).
 */
#include "gridsync/types/rdb/rdb.h"

#include <lzf.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "gridsync/protocol/resp.h"
#include "gridsync/types/hash/hash.h"
#include "gridsync/types/intset/intset.h"
#include "gridsync/types/listpack/listpack.h"
#include "gridsync/types/quicklist/quicklist.h"
#include "gridsync/types/set/set.h"
#include "gridsync/types/zset/zset.h"

/* Object types (Redis's rdb.h). */
enum {
    T_STRING = 0,
    T_SET = 2,
    T_ZSET_2 = 5,
    T_HASH = 4,
    T_SET_INTSET = 11,
    T_HASH_LISTPACK = 16,
    T_ZSET_LISTPACK = 17,
    T_LIST_QUICKLIST_2 = 18,
};
#define ENC_INT8    0
#define ENC_INT16   1
#define ENC_INT32   2
#define ENC_LZF     3
#define NODE_PACKED 2
#define NODE_PLAIN  1

/* ------------------------------------------------------------- CRC64 */

static uint64_t crc_table[256];

static void crc_init(void)
{
    for (unsigned i = 0; i < 256; i++) {
        uint64_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x95ac9329ac4bc9b5ull : c >> 1; /* reflected Jones */
        crc_table[i] = c;
    }
}

uint64_t gs_crc64(uint64_t crc, const void *p, size_t len)
{
    if (!crc_table[1])
        crc_init();
    const unsigned char *b = p;
    for (size_t i = 0; i < len; i++)
        crc = crc_table[(crc ^ b[i]) & 0xff] ^ (crc >> 8);
    return crc;
}

/* ------------------------------------------------------------ writing */

static void put_len(struct core_buf *out, uint64_t len)
{
    unsigned char b[9];
    size_t n;
    if (len < 64) {
        b[0] = (unsigned char)len;
        n = 1;
    } else if (len < 16384) {
        b[0] = (unsigned char)(0x40 | (len >> 8));
        b[1] = (unsigned char)(len & 0xff);
        n = 2;
    } else if (len <= UINT32_MAX) {
        b[0] = 0x80;
        for (int i = 0; i < 4; i++)
            b[1 + i] = (unsigned char)(len >> (24 - 8 * i));
        n = 5;
    } else {
        b[0] = 0x81;
        for (int i = 0; i < 8; i++)
            b[1 + i] = (unsigned char)(len >> (56 - 8 * i));
        n = 9;
    }
    core_buf_append(out, b, n);
}

/* Redis's rdbSaveRawString. */
static void put_string(struct core_buf *out, const void *s, size_t len)
{
    int64_t v;
    if (len <= 11 && gs_string2ll(s, len, &v) && v >= INT32_MIN && v <= INT32_MAX) {
        unsigned char b[5];
        size_t n;
        if (v >= -128 && v <= 127) {
            b[0] = 0xc0 | ENC_INT8;
            b[1] = (unsigned char)(v & 0xff);
            n = 2;
        } else if (v >= INT16_MIN && v <= INT16_MAX) {
            b[0] = 0xc0 | ENC_INT16;
            b[1] = (unsigned char)(v & 0xff);
            b[2] = (unsigned char)((v >> 8) & 0xff);
            n = 3;
        } else {
            b[0] = 0xc0 | ENC_INT32;
            for (int i = 0; i < 4; i++)
                b[1 + i] = (unsigned char)(((uint64_t)v >> (8 * i)) & 0xff);
            n = 5;
        }
        core_buf_append(out, b, n);
        return;
    }
    if (len > 20) {
        /* Redis's rdbSaveLzfStringObject: kept when it saves 4 bytes. */
        unsigned char *z = malloc(len - 4 + 1);
        unsigned clen = z ? lzf_compress(s, (unsigned)len, z, (unsigned)(len - 4)) : 0;
        if (clen > 0) {
            unsigned char tag = 0xc0 | ENC_LZF;
            core_buf_append(out, &tag, 1);
            put_len(out, clen);
            put_len(out, len);
            core_buf_append(out, z, clen);
            free(z);
            return;
        }
        free(z);
    }
    put_len(out, len);
    core_buf_append(out, s, len);
}

/* Redis's lpEncodeBacklen: an entry's size l, in 1..5 bytes that read
 * from the right (the last byte holds the low 7 bits, and every byte but
 * the first has its top bit set). Returns the bytes written. */
static size_t backlen(size_t l, unsigned char *b)
{
    size_t n = l <= 127 ? 1 : l < 16383 ? 2 : l < 2097151 ? 3 : l < 268435455 ? 4 : 5;
    for (size_t i = 0; i < n; i++) {
        b[i] = (unsigned char)((l >> (7 * (n - 1 - i))) & 127);
        if (i > 0)
            b[i] |= 128;
    }
    return n;
}

/* A Redis listpack, built entry by entry (rdb.h). */
struct rlp {
    struct core_buf b;
    size_t count;
};

static void rlp_start(struct rlp *l)
{
    memset(l, 0, sizeof(*l));
    core_buf_append(&l->b, "\0\0\0\0\0\0", 6);
}

static void rlp_add(struct rlp *l, const char *s, size_t len)
{
    unsigned char e[16];
    size_t n = 0, total;
    int64_t v;
    bool num = gs_string2ll(s, len, &v);
    if (num && v >= 0 && v <= 127) {
        e[n++] = (unsigned char)v;
    } else if (num && v >= -4096 && v <= 4095) {
        uint64_t u = v < 0 ? (uint64_t)((1 << 13) + v) : (uint64_t)v;
        e[n++] = (unsigned char)(0xc0 | (u >> 8));
        e[n++] = (unsigned char)(u & 0xff);
    } else if (num) {
        int bytes = v >= -32768 && v <= 32767          ? 2
                    : v >= -8388608 && v <= 8388607    ? 3
                    : v >= INT32_MIN && v <= INT32_MAX ? 4
                                                       : 8;
        e[n++] = bytes == 2 ? 0xf1 : bytes == 3 ? 0xf2 : bytes == 4 ? 0xf3 : 0xf4;
        for (int i = 0; i < bytes; i++)
            e[n++] = (unsigned char)(((uint64_t)v >> (8 * i)) & 0xff);
    }
    if (num) {
        total = n;
        core_buf_append(&l->b, e, n);
    } else {
        if (len < 64) {
            e[n++] = (unsigned char)(0x80 | len);
        } else if (len < 4096) {
            e[n++] = (unsigned char)(0xe0 | (len >> 8));
            e[n++] = (unsigned char)(len & 0xff);
        } else {
            e[n++] = 0xf0;
            for (int i = 0; i < 4; i++)
                e[n++] = (unsigned char)(((uint64_t)len >> (8 * i)) & 0xff);
        }
        core_buf_append(&l->b, e, n);
        core_buf_append(&l->b, s, len);
        total = n + len;
    }
    unsigned char bl[5];
    size_t bn = backlen(total, bl);
    core_buf_append(&l->b, bl, bn);
    l->count++;
}

/* Finish the listpack and write it as an RDB string. */
static void rlp_put(struct rlp *l, struct core_buf *out)
{
    unsigned char end = 0xff;
    core_buf_append(&l->b, &end, 1);
    if (!l->b.oom) {
        unsigned char *h = (unsigned char *)l->b.data;
        uint64_t total = l->b.len;
        uint16_t cnt = l->count < 65535 ? (uint16_t)l->count : 65535;
        for (int i = 0; i < 4; i++)
            h[i] = (unsigned char)(total >> (8 * i));
        h[4] = (unsigned char)(cnt & 0xff);
        h[5] = (unsigned char)(cnt >> 8);
        put_string(out, l->b.data, l->b.len);
    } else {
        out->oom = true;
    }
    core_buf_free(&l->b);
}

/* Redis 7.0's d2string, for a sorted set listpack's scores. */
static size_t d2string(char *buf, size_t size, double v)
{
    int n;
    if (isnan(v))
        n = snprintf(buf, size, "nan");
    else if (isinf(v))
        n = snprintf(buf, size, v < 0 ? "-inf" : "inf");
    else if (v == 0)
        n = snprintf(buf, size, 1.0 / v < 0 ? "-0" : "0");
    else if (v > -4503599627370495.0 && v < 4503599627370496.0 && v == (double)(long long)v)
        n = snprintf(buf, size, "%lld", (long long)v);
    else
        n = snprintf(buf, size, "%.17g", v);
    return (size_t)n;
}

static void put_footer(struct core_buf *out, size_t start)
{
    unsigned char f[10] = {GS_RDB_VERSION & 0xff, GS_RDB_VERSION >> 8};
    core_buf_append(out, f, 2);
    if (out->oom)
        return;
    uint64_t crc = gs_crc64(0, out->data + start, out->len - start);
    for (int i = 0; i < 8; i++)
        f[2 + i] = (unsigned char)(crc >> (8 * i));
    core_buf_append(out, f + 2, 8);
}

int gs_rdb_dump_string(const void *v, size_t len, struct core_buf *out)
{
    size_t start = out->len;
    unsigned char t = T_STRING;
    core_buf_append(out, &t, 1);
    put_string(out, v, len);
    put_footer(out, start);
    return out->oom ? CORE_ENOMEM : 0;
}

int gs_rdb_dump_obj(const struct gs_obj *o, struct core_buf *out)
{
    size_t start = out->len;
    unsigned char t;
    char buf[GS_LP_INTBUF];
    const char *s, *v;
    size_t len, vlen;
    switch (o->type) {
    case GS_TYPE_LIST: {
        const struct gs_quicklist *ql = o->ptr;
        t = T_LIST_QUICKLIST_2;
        core_buf_append(out, &t, 1);
        put_len(out, ql->nodes);
        for (const struct gs_qnode *nd = ql->head; nd; nd = nd->next) {
            put_len(out, NODE_PACKED);
            struct rlp l;
            rlp_start(&l);
            for (size_t off = gs_lp_first(nd->lp); off; off = gs_lp_next(nd->lp, off)) {
                s = gs_lp_get(nd->lp, off, buf, &len);
                rlp_add(&l, s, len);
            }
            rlp_put(&l, out);
        }
        break;
    }
    case GS_TYPE_SET:
        if (o->enc == GS_ENC_INTSET) {
            t = T_SET_INTSET;
            core_buf_append(out, &t, 1);
            put_string(out, o->ptr, gs_is_bytes(o->ptr));
        } else {
            t = T_SET;
            core_buf_append(out, &t, 1);
            put_len(out, gs_set_len(o));
            struct gs_set_iter it;
            gs_set_iter_init(&it, o);
            while (gs_set_iter_next(&it, &s, &len))
                put_string(out, s, len);
        }
        break;
    case GS_TYPE_ZSET: {
        size_t n = gs_zset_len(o);
        struct gs_zset_iter it;
        double score;
        if (o->enc == GS_ENC_LISTPACK) {
            t = T_ZSET_LISTPACK;
            core_buf_append(out, &t, 1);
            struct rlp l;
            rlp_start(&l);
            gs_zset_iter_init(&it, o, 0, false);
            while (gs_zset_iter_next(&it, &s, &len, &score)) {
                char sb[64];
                rlp_add(&l, s, len);
                rlp_add(&l, sb, d2string(sb, sizeof(sb), score));
            }
            rlp_put(&l, out);
        } else {
            t = T_ZSET_2;
            core_buf_append(out, &t, 1);
            put_len(out, n);
            /* Redis saves from the greatest to the smallest. */
            gs_zset_iter_init(&it, o, n ? n - 1 : 0, true);
            while (n && gs_zset_iter_next(&it, &s, &len, &score)) {
                put_string(out, s, len);
                uint64_t bits;
                memcpy(&bits, &score, 8);
                unsigned char d[8];
                for (int i = 0; i < 8; i++)
                    d[i] = (unsigned char)(bits >> (8 * i));
                core_buf_append(out, d, 8);
            }
        }
        break;
    }
    case GS_TYPE_HASH: {
        struct gs_hash_iter it;
        if (o->enc == GS_ENC_LISTPACK) {
            t = T_HASH_LISTPACK;
            core_buf_append(out, &t, 1);
            struct rlp l;
            rlp_start(&l);
            gs_hash_iter_init(&it, o);
            while (gs_hash_iter_next(&it, &s, &len, &v, &vlen)) {
                rlp_add(&l, s, len);
                rlp_add(&l, v, vlen);
            }
            rlp_put(&l, out);
        } else {
            t = T_HASH;
            core_buf_append(out, &t, 1);
            put_len(out, gs_hash_len(o));
            gs_hash_iter_init(&it, o);
            while (gs_hash_iter_next(&it, &s, &len, &v, &vlen)) {
                put_string(out, s, len);
                put_string(out, v, vlen);
            }
        }
        break;
    }
    default:
        return CORE_EINVAL;
    }
    put_footer(out, start);
    return out->oom ? CORE_ENOMEM : 0;
}

/* ------------------------------------------------------------ reading */

bool gs_rdb_verify(const void *v, size_t len)
{
    const unsigned char *p = v;
    if (len < 10)
        return false;
    const unsigned char *footer = p + len - 10;
    unsigned ver = (unsigned)footer[1] << 8 | footer[0];
    if (ver > GS_RDB_VERSION)
        return false;
    uint64_t crc = gs_crc64(0, p, len - 8), want = 0;
    for (int i = 7; i >= 0; i--)
        want = want << 8 | footer[2 + i];
    return crc == want;
}

struct rd {
    const unsigned char *p, *end;
    size_t max_len;
};

static bool get_byte(struct rd *r, unsigned char *b)
{
    if (r->p >= r->end)
        return false;
    *b = *r->p++;
    return true;
}

/* Redis's rdbLoadLenByRef: a length, or (*enc set) a special encoding. */
static bool get_len(struct rd *r, uint64_t *len, int *enc)
{
    unsigned char b;
    if (enc)
        *enc = -1;
    if (!get_byte(r, &b))
        return false;
    switch (b >> 6) {
    case 0:
        *len = b & 0x3f;
        return true;
    case 1: {
        unsigned char b2;
        if (!get_byte(r, &b2))
            return false;
        *len = (uint64_t)(b & 0x3f) << 8 | b2;
        return true;
    }
    case 2: {
        int n = b == 0x80 ? 4 : b == 0x81 ? 8 : 0;
        if (!n || r->end - r->p < n)
            return false;
        uint64_t x = 0;
        for (int i = 0; i < n; i++)
            x = x << 8 | r->p[i];
        r->p += n;
        *len = x;
        return true;
    }
    default:
        if (!enc)
            return false;
        *enc = b & 0x3f;
        *len = 0;
        return true;
    }
}

/* An RDB string into out (replacing its contents). */
static int get_string(struct rd *r, struct core_buf *out)
{
    uint64_t len;
    int enc;
    out->len = 0;
    if (!get_len(r, &len, &enc))
        return GS_RDB_BAD;
    if (enc >= 0) {
        if (enc <= ENC_INT32) {
            int n = enc == ENC_INT8 ? 1 : enc == ENC_INT16 ? 2 : 4;
            if (r->end - r->p < n)
                return GS_RDB_BAD;
            uint64_t u = 0;
            for (int i = n - 1; i >= 0; i--)
                u = u << 8 | r->p[i];
            r->p += n;
            int64_t v = n == 1 ? (int8_t)u : n == 2 ? (int16_t)u : (int32_t)u;
            char tmp[24];
            int k = snprintf(tmp, sizeof(tmp), "%lld", (long long)v);
            return core_buf_append(out, tmp, (size_t)k) ? CORE_ENOMEM : 0;
        }
        if (enc != ENC_LZF)
            return GS_RDB_BAD;
        uint64_t clen, ulen;
        if (!get_len(r, &clen, NULL) || !get_len(r, &ulen, NULL) ||
            clen > (uint64_t)(r->end - r->p) || ulen > r->max_len || ulen == 0 ||
            ulen > clen * 128 + 64) /* more than LZF can expand to */
            return GS_RDB_BAD;
        char *dst = core_buf_reserve(out, (size_t)ulen);
        if (!dst)
            return CORE_ENOMEM;
        if (lzf_decompress(r->p, (unsigned)clen, dst, (unsigned)ulen) != ulen)
            return GS_RDB_BAD;
        r->p += clen;
        out->len = (size_t)ulen;
        return 0;
    }
    if (len > (uint64_t)(r->end - r->p) || len > r->max_len)
        return GS_RDB_BAD;
    if (len && core_buf_append(out, r->p, (size_t)len))
        return CORE_ENOMEM;
    r->p += len;
    return 0;
}

/* A Redis listpack's entries: fn(arg, bytes, len) for each; false when
 * it is malformed (header, an entry or back-length out of place, no
 * terminator, a count that disagrees). */
typedef int entry_fn(void *arg, const char *s, size_t len);

static int rlp_walk(const unsigned char *lp, size_t size, entry_fn *fn, void *arg, size_t *count)
{
    if (size < 7 || lp[size - 1] != 0xff)
        return GS_RDB_BAD;
    uint32_t total =
        (uint32_t)lp[0] | (uint32_t)lp[1] << 8 | (uint32_t)lp[2] << 16 | (uint32_t)lp[3] << 24;
    unsigned numele = (unsigned)lp[4] | (unsigned)lp[5] << 8;
    if (total != size)
        return GS_RDB_BAD;
    const unsigned char *p = lp + 6, *end = lp + size - 1;
    size_t n = 0;
    while (p < end) {
        const unsigned char *start = p;
        char tmp[24];
        const char *s;
        size_t len;
        unsigned char b = *p;
        size_t avail = (size_t)(end - p);
        if (b < 0x80) {
            len = (size_t)snprintf(tmp, sizeof(tmp), "%u", b);
            s = tmp;
            p += 1;
        } else if ((b & 0xc0) == 0x80) {
            len = b & 0x3f;
            if (avail < 1 + len)
                return GS_RDB_BAD;
            s = (const char *)p + 1;
            p += 1 + len;
        } else if ((b & 0xe0) == 0xc0) {
            if (avail < 2)
                return GS_RDB_BAD;
            uint64_t u = (uint64_t)(b & 0x1f) << 8 | p[1];
            int64_t v = u >= (1u << 12) ? (int64_t)u - (1 << 13) : (int64_t)u;
            len = (size_t)snprintf(tmp, sizeof(tmp), "%lld", (long long)v);
            s = tmp;
            p += 2;
        } else if ((b & 0xf0) == 0xe0) {
            if (avail < 2)
                return GS_RDB_BAD;
            len = (size_t)(b & 0x0f) << 8 | p[1];
            if (avail < 2 + len)
                return GS_RDB_BAD;
            s = (const char *)p + 2;
            p += 2 + len;
        } else if (b >= 0xf1 && b <= 0xf4) {
            int bytes = b == 0xf1 ? 2 : b == 0xf2 ? 3 : b == 0xf3 ? 4 : 8;
            if (avail < 1 + (size_t)bytes)
                return GS_RDB_BAD;
            uint64_t u = 0;
            for (int i = bytes - 1; i >= 0; i--)
                u = u << 8 | p[1 + i];
            int64_t v;
            if (bytes == 8)
                v = (int64_t)u;
            else if (u & ((uint64_t)1 << (8 * bytes - 1)))
                v = (int64_t)(u | (UINT64_MAX << (8 * bytes)));
            else
                v = (int64_t)u;
            len = (size_t)snprintf(tmp, sizeof(tmp), "%lld", (long long)v);
            s = tmp;
            p += 1 + bytes;
        } else if (b == 0xf0) {
            if (avail < 5)
                return GS_RDB_BAD;
            len = (size_t)p[1] | (size_t)p[2] << 8 | (size_t)p[3] << 16 | (size_t)p[4] << 24;
            if (avail - 5 < len)
                return GS_RDB_BAD;
            s = (const char *)p + 5;
            p += 5 + len;
        } else {
            return GS_RDB_BAD;
        }
        /* The back-length: the entry's size, as Redis writes it. */
        unsigned char bl[5];
        size_t bn = backlen((size_t)(p - start), bl);
        if ((size_t)(end - p) < bn || memcmp(p, bl, bn) != 0)
            return GS_RDB_BAD;
        p += bn;
        int rc = fn(arg, s, len);
        if (rc)
            return rc;
        n++;
    }
    if (numele != 65535 && numele != n)
        return GS_RDB_BAD;
    *count = n;
    return 0;
}

/* Building collections from the elements. */
struct build {
    struct gs_obj *o;
    const struct gs_type_limits *lim;
    struct core_buf pend; /* a hash's field or a sorted set's member, waiting for its pair */
    bool have;
};

static int add_list(void *arg, const char *s, size_t len)
{
    struct build *b = arg;
    return gs_ql_push(b->o->ptr, false, s, len) ? CORE_ENOMEM : 0;
}

static int add_set(void *arg, const char *s, size_t len)
{
    struct build *b = arg;
    bool added;
    if (gs_set_add(b->o, s, len, b->lim, &added))
        return CORE_ENOMEM;
    return added ? 0 : GS_RDB_BAD; /* a member twice */
}

static int add_pair(struct build *b, const char *s, size_t len, bool zset)
{
    if (!b->have) {
        b->pend.len = 0;
        if (len && core_buf_append(&b->pend, s, len))
            return CORE_ENOMEM;
        b->have = true;
        return 0;
    }
    b->have = false;
    if (zset) {
        char tmp[64];
        if (len >= sizeof(tmp))
            return GS_RDB_BAD;
        memcpy(tmp, s, len);
        tmp[len] = '\0';
        char *e;
        double score = strtod(tmp, &e);
        if (e != tmp + len || isnan(score))
            return GS_RDB_BAD;
        int out;
        if (gs_zset_add(b->o, score, b->pend.len ? b->pend.data : "", b->pend.len, 0, &out, NULL,
                        b->lim))
            return CORE_ENOMEM;
        return out & GS_ZADD_ADDED ? 0 : GS_RDB_BAD;
    }
    bool created;
    if (gs_hash_set(b->o, b->pend.len ? b->pend.data : "", b->pend.len, s, len, b->lim, &created))
        return CORE_ENOMEM;
    return created ? 0 : GS_RDB_BAD;
}

static int add_hash(void *arg, const char *s, size_t len)
{
    return add_pair(arg, s, len, false);
}

static int add_zset(void *arg, const char *s, size_t len)
{
    return add_pair(arg, s, len, true);
}

static int load_obj(struct rd *r, int type, const struct gs_type_limits *lim, struct gs_obj *o,
                    struct core_buf *tmp)
{
    struct build b = {o, lim, {0}, false};
    uint64_t n;
    int rc = 0;
    size_t count;
    switch (type) {
    case T_LIST_QUICKLIST_2: {
        struct gs_quicklist *ql = gs_ql_new((int)lim->list_max_listpack_size);
        if (!ql)
            return CORE_ENOMEM;
        o->type = GS_TYPE_LIST;
        o->enc = GS_ENC_QUICKLIST;
        o->ptr = ql;
        if (!get_len(r, &n, NULL) || n == 0 || n > (uint64_t)(r->end - r->p))
            return GS_RDB_BAD;
        for (uint64_t i = 0; i < n && rc == 0; i++) {
            uint64_t container;
            if (!get_len(r, &container, NULL) ||
                (container != NODE_PACKED && container != NODE_PLAIN))
                return GS_RDB_BAD;
            if ((rc = get_string(r, tmp)))
                break;
            if (container == NODE_PLAIN)
                rc = add_list(&b, tmp->len ? tmp->data : "", tmp->len);
            else if ((rc = rlp_walk((unsigned char *)tmp->data, tmp->len, add_list, &b, &count)) ==
                         0 &&
                     count == 0)
                rc = GS_RDB_BAD; /* Redis refuses an empty node */
        }
        break;
    }
    case T_SET:
    case T_HASH:
    case T_ZSET_2: {
        if (type == T_SET)
            rc = gs_set_init(o);
        else if (type == T_HASH)
            rc = gs_hash_init(o);
        else
            rc = gs_zset_init(o, false);
        if (rc)
            return CORE_ENOMEM;
        if (!get_len(r, &n, NULL) || n == 0 || n > (uint64_t)(r->end - r->p))
            return GS_RDB_BAD;
        for (uint64_t i = 0; i < n && rc == 0; i++) {
            if ((rc = get_string(r, tmp)))
                break;
            const char *d = tmp->len ? tmp->data : "";
            if (type == T_SET) {
                rc = add_set(&b, d, tmp->len);
            } else if (type == T_HASH) {
                if ((rc = add_hash(&b, tmp->data, tmp->len)) == 0 && (rc = get_string(r, tmp)) == 0)
                    rc = add_hash(&b, tmp->data, tmp->len);
            } else {
                if (r->end - r->p < 8) {
                    rc = GS_RDB_BAD;
                    break;
                }
                uint64_t bits = 0;
                for (int k = 7; k >= 0; k--)
                    bits = bits << 8 | r->p[k];
                r->p += 8;
                double score;
                memcpy(&score, &bits, 8);
                int out;
                if (isnan(score))
                    rc = GS_RDB_BAD;
                else if (gs_zset_add(o, score, d, tmp->len, 0, &out, NULL, lim))
                    rc = CORE_ENOMEM;
                else if (!(out & GS_ZADD_ADDED))
                    rc = GS_RDB_BAD;
            }
        }
        break;
    }
    case T_SET_INTSET: {
        if ((rc = get_string(r, tmp)))
            break;
        const unsigned char *is = (const unsigned char *)tmp->data;
        if (!gs_is_validate(is, tmp->len) || gs_is_len(is) == 0)
            return GS_RDB_BAD;
        if (gs_set_init(o))
            return CORE_ENOMEM;
        for (uint32_t i = 0; i < gs_is_len(is) && rc == 0; i++) {
            char num[24];
            int k = snprintf(num, sizeof(num), "%lld", (long long)gs_is_get(is, i));
            rc = add_set(&b, num, (size_t)k);
        }
        break;
    }
    case T_HASH_LISTPACK:
    case T_ZSET_LISTPACK: {
        if ((rc = get_string(r, tmp)))
            break;
        if (type == T_HASH_LISTPACK ? gs_hash_init(o) : gs_zset_init(o, false))
            return CORE_ENOMEM;
        rc = rlp_walk((unsigned char *)tmp->data, tmp->len,
                      type == T_HASH_LISTPACK ? add_hash : add_zset, &b, &count);
        if (rc == 0 && (count == 0 || b.have))
            rc = GS_RDB_BAD; /* empty, or a field without its value */
        break;
    }
    default:
        return GS_RDB_BAD;
    }
    core_buf_free(&b.pend);
    return rc;
}

int gs_rdb_load(const void *p, size_t len, const struct gs_type_limits *lim, size_t max_len,
                struct gs_rdb_value *out)
{
    memset(out, 0, sizeof(*out));
    if (len < 10)
        return GS_RDB_BAD;
    struct rd r = {p, (const unsigned char *)p + len - 10, max_len};
    unsigned char type;
    if (!get_byte(&r, &type))
        return GS_RDB_BAD;
    int rc;
    if (type == T_STRING) {
        out->is_string = true;
        rc = get_string(&r, &out->str);
    } else {
        struct core_buf tmp = {0};
        rc = load_obj(&r, type, lim, &out->obj, &tmp);
        core_buf_free(&tmp);
    }
    if (rc == 0 && r.p != r.end)
        rc = GS_RDB_BAD; /* bytes left over */
    if (rc) {
        core_buf_free(&out->str);
        if (out->obj.ptr)
            gs_obj_free(&out->obj);
        memset(out, 0, sizeof(*out));
    }
    return rc;
}
