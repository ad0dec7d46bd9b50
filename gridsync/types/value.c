/*
 * Per-type dispatch for the store: see value.h.
 */
#include "gridsync/types/value.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "gridsync/types/hash/hash.h"
#include "gridsync/types/listpack/listpack.h"

size_t gs_obj_mem(const struct gs_obj *o)
{
    switch (o->type) {
    case GS_TYPE_HASH:
        return gs_hash_mem(o);
    default:
        return 0;
    }
}

size_t gs_obj_recount(const struct gs_obj *o)
{
    switch (o->type) {
    case GS_TYPE_HASH:
        return gs_hash_recount(o);
    default:
        return 0;
    }
}

void gs_obj_free(struct gs_obj *o)
{
    switch (o->type) {
    case GS_TYPE_HASH:
        gs_hash_free(o);
        break;
    default:
        break;
    }
    o->ptr = NULL;
}

int gs_obj_dup(struct gs_obj *dst, const struct gs_obj *src)
{
    switch (src->type) {
    case GS_TYPE_HASH:
        return gs_hash_dup(dst, src);
    default:
        return CORE_ESTATE;
    }
}

size_t gs_obj_len(const struct gs_obj *o)
{
    switch (o->type) {
    case GS_TYPE_HASH:
        return gs_hash_len(o);
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
    default:
        return "raw";
    }
}

int gs_obj_encode(const struct gs_obj *o, unsigned char **out, size_t *len)
{
    if (o->type != GS_TYPE_HASH)
        return CORE_ESTATE;
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
    struct gs_obj o;
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
