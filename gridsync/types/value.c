/*
 * Per-type dispatch for the store: see value.h.
 */
#include "gridsync/types/value.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "gridsync/types/hash/hash.h"
#include "gridsync/types/listpack/listpack.h"
#include "gridsync/types/quicklist/quicklist.h"
#include "gridsync/types/set/set.h"
#include "gridsync/types/zset/zset.h"

size_t gs_obj_mem(const struct gs_obj *o)
{
    switch (o->type) {
    case GS_TYPE_SET:
        return gs_set_mem(o);
    case GS_TYPE_ZSET:
        return gs_zset_mem(o);
    case GS_TYPE_HASH:
        return gs_hash_mem(o);
    case GS_TYPE_LIST:
        return ((const struct gs_quicklist *)o->ptr)->mem;
    default:
        return 0;
    }
}

size_t gs_obj_recount(const struct gs_obj *o)
{
    switch (o->type) {
    case GS_TYPE_SET:
        return gs_set_recount(o);
    case GS_TYPE_ZSET:
        return gs_zset_recount(o);
    case GS_TYPE_HASH:
        return gs_hash_recount(o);
    case GS_TYPE_LIST:
        return gs_ql_recount(o->ptr);
    default:
        return 0;
    }
}

void gs_obj_free(struct gs_obj *o)
{
    switch (o->type) {
    case GS_TYPE_SET:
        gs_set_free(o);
        break;
    case GS_TYPE_ZSET:
        gs_zset_free(o);
        break;
    case GS_TYPE_HASH:
        gs_hash_free(o);
        break;
    case GS_TYPE_LIST:
        gs_ql_free(o->ptr);
        break;
    default:
        break;
    }
    o->ptr = NULL;
}

int gs_obj_dup(struct gs_obj *dst, const struct gs_obj *src)
{
    switch (src->type) {
    case GS_TYPE_SET:
        return gs_set_dup(dst, src);
    case GS_TYPE_ZSET:
        return gs_zset_dup(dst, src);
    case GS_TYPE_HASH:
        return gs_hash_dup(dst, src);
    case GS_TYPE_LIST: {
        struct gs_quicklist *ql = gs_ql_dup(src->ptr);
        if (!ql)
            return CORE_ENOMEM;
        *dst = *src;
        dst->counted = 0;
        dst->ptr = ql;
        return 0;
    }
    default:
        return CORE_ESTATE;
    }
}

size_t gs_obj_len(const struct gs_obj *o)
{
    switch (o->type) {
    case GS_TYPE_SET:
        return gs_set_len(o);
    case GS_TYPE_ZSET:
        return gs_zset_len(o);
    case GS_TYPE_HASH:
        return gs_hash_len(o);
    case GS_TYPE_LIST:
        return ((const struct gs_quicklist *)o->ptr)->count;
    default:
        return 0;
    }
}

const char *gs_type_name(int type)
{
    switch (type) {
    case GS_TYPE_STRING:
        return "string";
    case GS_TYPE_LIST:
        return "list";
    case GS_TYPE_SET:
        return "set";
    case GS_TYPE_ZSET:
        return "zset";
    case GS_TYPE_HASH:
        return "hash";
    default:
        return "none";
    }
}

const char *gs_encoding_name(int enc)
{
    switch (enc) {
    case GS_ENC_LISTPACK:
        return "listpack";
    case GS_ENC_HASHTABLE:
        return "hashtable";
    case GS_ENC_QUICKLIST:
        return "quicklist";
    case GS_ENC_INTSET:
        return "intset";
    case GS_ENC_SKIPLIST:
        return "skiplist";
    default:
        return "raw";
    }
}

static int list_encode(const struct gs_quicklist *ql, unsigned char **out, size_t *len)
{
    unsigned char *lp = gs_lp_new();
    if (!lp)
        return CORE_ENOMEM;
    char buf[GS_LP_INTBUF];
    for (struct gs_ql_pos p = gs_ql_index(ql, 0); p.node; p = gs_ql_next(ql, p)) {
        size_t l;
        const char *v = gs_ql_get(p, buf, &l);
        if (gs_lp_append(&lp, v, l)) {
            gs_lp_free(lp);
            return CORE_ENOMEM;
        }
    }
    *out = lp;
    *len = gs_lp_bytes(lp);
    return 0;
}

static int set_encode(const struct gs_obj *o, unsigned char **out, size_t *len)
{
    unsigned char *lp = gs_lp_new();
    if (!lp)
        return CORE_ENOMEM;
    struct gs_set_iter it;
    const char *s;
    size_t l;
    gs_set_iter_init(&it, o);
    while (gs_set_iter_next(&it, &s, &l)) {
        if (gs_lp_append(&lp, s, l)) {
            gs_lp_free(lp);
            return CORE_ENOMEM;
        }
    }
    *out = lp;
    *len = gs_lp_bytes(lp);
    return 0;
}

int gs_obj_encode(const struct gs_obj *o, unsigned char **out, size_t *len)
{
    if (o->type == GS_TYPE_LIST)
        return list_encode(o->ptr, out, len);
    if (o->type == GS_TYPE_SET)
        return set_encode(o, out, len);
    if (o->type != GS_TYPE_HASH && o->type != GS_TYPE_ZSET)
        return CORE_ESTATE;
    if (o->type == GS_TYPE_ZSET && o->enc != GS_ENC_LISTPACK)
        return gs_zset_encode(o, out, len);
    if (o->enc == GS_ENC_LISTPACK) {
        size_t n = gs_lp_bytes(o->ptr);
        unsigned char *copy = malloc(n);
        if (!copy)
            return CORE_ENOMEM;
        memcpy(copy, o->ptr, n);
        *out = copy;
        *len = n;
        return 0;
    }
    unsigned char *lp = gs_lp_new();
    if (!lp)
        return CORE_ENOMEM;
    struct gs_hash_iter it;
    const char *f, *v;
    size_t flen, vlen;
    gs_hash_iter_init(&it, o);
    while (gs_hash_iter_next(&it, &f, &flen, &v, &vlen)) {
        if (gs_lp_append(&lp, f, flen) || gs_lp_append(&lp, v, vlen)) {
            gs_lp_free(lp);
            return CORE_ENOMEM;
        }
    }
    *out = lp;
    *len = gs_lp_bytes(lp);
    return 0;
}

bool gs_obj_validate(int type, const void *buf, size_t len)
{
    const unsigned char *lp = buf;
    /* Serialized listpacks are written without back-lengths (a list is
     * re-encoded entry by entry), so that form is refused here. */
    if (len >= GS_LP_HDR && gs_lp_has_backlen(lp))
        return false;
    if (type == GS_TYPE_LIST || type == GS_TYPE_SET)
        return gs_lp_validate(lp, len) && gs_lp_count(lp) > 0;
    if (type == GS_TYPE_ZSET)
        return gs_zset_validate(lp, len);
    return type == GS_TYPE_HASH && gs_lp_validate(lp, len) && gs_lp_count(lp) % 2 == 0 &&
           gs_lp_count(lp) > 0;
}

int gs_obj_decode(int type, const void *buf, size_t len, const struct gs_type_limits *lim,
                  struct gs_obj *out)
{
    const unsigned char *lp = buf;
    if (!gs_obj_validate(type, buf, len))
        return CORE_EPROTO;
    /* gs_lp_* read entries in place; the buffer need not be aligned. */
    if (type == GS_TYPE_LIST) {
        struct gs_quicklist *ql = gs_ql_new((int)lim->list_max_listpack_size);
        if (!ql)
            return CORE_ENOMEM;
        char b[GS_LP_INTBUF];
        for (size_t off = gs_lp_first(lp); off; off = gs_lp_next(lp, off)) {
            size_t l;
            const char *v = gs_lp_get(lp, off, b, &l);
            if (gs_ql_push(ql, false, v, l)) {
                gs_ql_free(ql);
                return CORE_ENOMEM;
            }
        }
        memset(out, 0, sizeof(*out));
        out->type = GS_TYPE_LIST;
        out->enc = GS_ENC_QUICKLIST;
        out->ptr = ql;
        return 0;
    }
    struct gs_obj o;
    if (type == GS_TYPE_SET) {
        if (gs_set_init(&o))
            return CORE_ENOMEM;
        char b[GS_LP_INTBUF];
        for (size_t off = gs_lp_first(lp); off; off = gs_lp_next(lp, off)) {
            size_t l;
            bool added;
            const char *v = gs_lp_get(lp, off, b, &l);
            if (gs_set_add(&o, v, l, lim, &added)) {
                gs_set_free(&o);
                return CORE_ENOMEM;
            }
        }
        *out = o;
        return 0;
    }
    if (type == GS_TYPE_ZSET) {
        /* Added one by one (a repeated member keeps its last score), then
         * back to a listpack when it fits, as Redis's RDB load does. */
        if (gs_zset_init(&o, false))
            return CORE_ENOMEM;
        struct gs_zset_iter it;
        struct gs_obj src = {.type = GS_TYPE_ZSET, .enc = GS_ENC_LISTPACK, .ptr = (void *)lp};
        const char *m;
        size_t mlen;
        double score;
        gs_zset_iter_init(&it, &src, 0, false);
        while (gs_zset_iter_next(&it, &m, &mlen, &score)) {
            int flags;
            if (gs_zset_add(&o, score, m, mlen, 0, &flags, NULL, lim)) {
                gs_zset_free(&o);
                return CORE_ENOMEM;
            }
        }
        gs_zset_fit(&o, lim);
        *out = o;
        return 0;
    }
    if (gs_hash_init(&o))
        return CORE_ENOMEM;
    char fb[GS_LP_INTBUF], vb[GS_LP_INTBUF];
    for (size_t off = gs_lp_first(lp); off; off = gs_lp_next(lp, gs_lp_next(lp, off))) {
        size_t flen, vlen;
        const char *f = gs_lp_get(lp, off, fb, &flen);
        const char *v = gs_lp_get(lp, gs_lp_next(lp, off), vb, &vlen);
        if (gs_hash_set(&o, f, flen, v, vlen, lim, NULL)) {
            gs_hash_free(&o);
            return CORE_ENOMEM;
        }
    }
    *out = o;
    return 0;
}
