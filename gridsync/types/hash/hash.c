/*
 * The hash type over its two encodings: see hash.h.
 */
#include "gridsync/types/hash/hash.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "gridsync/types/htab/htab.h"

int gs_hash_init(struct gs_obj *o)
{
    unsigned char *lp = gs_lp_new();
    if (!lp)
        return CORE_ENOMEM;
    memset(o, 0, sizeof(*o));
    o->type = GS_TYPE_HASH;
    o->enc = GS_ENC_LISTPACK;
    o->ptr = lp;
    return 0;
}

void gs_hash_free(struct gs_obj *o)
{
    if (o->enc == GS_ENC_LISTPACK)
        gs_lp_free(o->ptr);
    else
        gs_htab_free(o->ptr);
    o->ptr = NULL;
}

size_t gs_hash_mem(const struct gs_obj *o)
{
    if (o->enc == GS_ENC_LISTPACK)
        return gs_alloc_cost(o->ptr);
    return ((const struct gs_htab *)o->ptr)->mem;
}

size_t gs_hash_recount(const struct gs_obj *o)
{
    if (o->enc == GS_ENC_LISTPACK)
        return gs_alloc_cost(o->ptr);
    return gs_htab_recount(o->ptr);
}

size_t gs_hash_len(const struct gs_obj *o)
{
    if (o->enc == GS_ENC_LISTPACK)
        return gs_lp_count(o->ptr) / 2;
    return ((const struct gs_htab *)o->ptr)->used;
}

int gs_hash_dup(struct gs_obj *dst, const struct gs_obj *src)
{
    struct gs_obj n = *src;
    n.counted = 0;
    if (src->enc == GS_ENC_LISTPACK) {
        size_t len = gs_lp_bytes(src->ptr);
        unsigned char *lp = malloc(len);
        if (!lp)
            return CORE_ENOMEM;
        memcpy(lp, src->ptr, len);
        n.ptr = lp;
    } else {
        struct gs_htab *t = gs_htab_new();
        if (!t)
            return CORE_ENOMEM;
        struct gs_htab *s = src->ptr;
        for (uint64_t i = 0; s->bucket && i <= s->mask; i++) {
            for (struct gs_helem *e = s->bucket[i]; e; e = e->next) {
                if (gs_htab_set(t, gs_helem_key(e), e->klen, gs_helem_val(e), e->vlen, NULL)) {
                    gs_htab_free(t);
                    return CORE_ENOMEM;
                }
            }
        }
        n.ptr = t;
    }
    *dst = n;
    return 0;
}

bool gs_hash_get(const struct gs_obj *o, const char *f, size_t flen, char *buf, const char **v,
                 size_t *vlen)
{
    if (o->enc == GS_ENC_LISTPACK) {
        const unsigned char *lp = o->ptr;
        size_t off = gs_lp_find(lp, 0, f, flen, 1);
        if (!off)
            return false;
        *v = gs_lp_get(lp, gs_lp_next(lp, off), buf, vlen);
        return true;
    }
    struct gs_helem *e = gs_htab_find(o->ptr, f, flen);
    if (!e)
        return false;
    *v = gs_helem_val(e);
    *vlen = e->vlen;
    return true;
}

int gs_hash_convert(struct gs_obj *o)
{
    if (o->enc != GS_ENC_LISTPACK)
        return 0;
    struct gs_htab *t = gs_htab_new();
    if (!t)
        return CORE_ENOMEM;
    const unsigned char *lp = o->ptr;
    char fb[GS_LP_INTBUF], vb[GS_LP_INTBUF];
    for (size_t off = gs_lp_first(lp); off; off = gs_lp_next(lp, gs_lp_next(lp, off))) {
        size_t flen, vlen;
        const char *f = gs_lp_get(lp, off, fb, &flen);
        const char *v = gs_lp_get(lp, gs_lp_next(lp, off), vb, &vlen);
        if (gs_htab_set(t, f, flen, v, vlen, NULL)) {
            gs_htab_free(t);
            return CORE_ENOMEM;
        }
    }
    gs_lp_free(o->ptr);
    o->ptr = t;
    o->enc = GS_ENC_HASHTABLE;
    return 0;
}

int gs_hash_set(struct gs_obj *o, const char *f, size_t flen, const char *v, size_t vlen,
                const struct gs_type_limits *lim, bool *created)
{
    if (o->enc == GS_ENC_LISTPACK) {
        if ((int64_t)flen > lim->hash_max_listpack_value ||
            (int64_t)vlen > lim->hash_max_listpack_value) {
            if (gs_hash_convert(o))
                return CORE_ENOMEM;
        }
    }
    if (o->enc == GS_ENC_LISTPACK) {
        unsigned char *lp = o->ptr;
        size_t off = gs_lp_find(lp, 0, f, flen, 1);
        if (off) {
            int rc = gs_lp_replace(&lp, gs_lp_next(lp, off), v, vlen);
            o->ptr = lp;
            if (rc)
                return rc;
            if (created)
                *created = false;
            return 0;
        }
        if ((int64_t)gs_hash_len(o) + 1 > lim->hash_max_listpack_entries) {
            if (gs_hash_convert(o))
                return CORE_ENOMEM;
        } else {
            int rc = gs_lp_append(&lp, f, flen);
            o->ptr = lp;
            if (rc)
                return rc;
            rc = gs_lp_append(&lp, v, vlen);
            o->ptr = lp;
            if (rc) {
                /* keep the pair whole: drop the field just added */
                size_t last = gs_lp_first(lp), n;
                while ((n = gs_lp_next(lp, last)) != 0)
                    last = n;
                gs_lp_delete(&lp, last, 1);
                o->ptr = lp;
                return rc;
            }
            if (created)
                *created = true;
            return 0;
        }
    }
    return gs_htab_set(o->ptr, f, flen, v, vlen, created);
}

bool gs_hash_delete(struct gs_obj *o, const char *f, size_t flen)
{
    if (o->enc == GS_ENC_LISTPACK) {
        unsigned char *lp = o->ptr;
        size_t off = gs_lp_find(lp, 0, f, flen, 1);
        if (!off)
            return false;
        gs_lp_delete(&lp, off, 2);
        o->ptr = lp;
        return true;
    }
    return gs_htab_delete(o->ptr, f, flen);
}

void gs_hash_iter_init(struct gs_hash_iter *it, const struct gs_obj *o)
{
    it->o = o;
    it->bucket = 0;
    it->elem = NULL;
    it->off = o->enc == GS_ENC_LISTPACK ? gs_lp_first(o->ptr) : 0;
}

bool gs_hash_iter_next(struct gs_hash_iter *it, const char **f, size_t *flen, const char **v,
                       size_t *vlen)
{
    if (it->o->enc == GS_ENC_LISTPACK) {
        const unsigned char *lp = it->o->ptr;
        if (!it->off)
            return false;
        size_t voff = gs_lp_next(lp, it->off);
        *f = gs_lp_get(lp, it->off, it->fbuf, flen);
        *v = gs_lp_get(lp, voff, it->vbuf, vlen);
        it->off = gs_lp_next(lp, voff);
        return true;
    }
    const struct gs_htab *t = it->o->ptr;
    struct gs_helem *e = (struct gs_helem *)it->elem;
    while (!e) {
        if (!t->bucket || it->bucket > t->mask)
            return false;
        e = t->bucket[it->bucket++];
    }
    *f = gs_helem_key(e);
    *flen = e->klen;
    *v = gs_helem_val(e);
    *vlen = e->vlen;
    it->elem = e->next;
    return true;
}

struct scan_ctx {
    gs_hash_scan_fn *fn;
    void *arg;
};

static void scan_elem(void *arg, struct gs_helem *e)
{
    struct scan_ctx *c = arg;
    c->fn(c->arg, gs_helem_key(e), e->klen, gs_helem_val(e), e->vlen);
}

uint64_t gs_hash_scan(const struct gs_obj *o, uint64_t cursor, size_t count, gs_hash_scan_fn *fn,
                      void *arg)
{
    if (o->enc == GS_ENC_LISTPACK) {
        struct gs_hash_iter it;
        const char *f, *v;
        size_t flen, vlen;
        gs_hash_iter_init(&it, o);
        while (gs_hash_iter_next(&it, &f, &flen, &v, &vlen))
            fn(arg, f, flen, v, vlen);
        return 0;
    }
    struct scan_ctx c = {fn, arg};
    return gs_htab_scan(o->ptr, cursor, count, scan_elem, &c);
}

void gs_hash_random(const struct gs_obj *o, uint64_t rnd, char *fbuf, char *vbuf, const char **f,
                    size_t *flen, const char **v, size_t *vlen)
{
    if (o->enc == GS_ENC_LISTPACK) {
        const unsigned char *lp = o->ptr;
        size_t idx = rnd % gs_hash_len(o), off = gs_lp_first(lp);
        for (size_t i = 0; i < idx * 2; i++)
            off = gs_lp_next(lp, off);
        *f = gs_lp_get(lp, off, fbuf, flen);
        *v = gs_lp_get(lp, gs_lp_next(lp, off), vbuf, vlen);
        return;
    }
    struct gs_helem *e = gs_htab_random(o->ptr);
    *f = gs_helem_key(e);
    *flen = e->klen;
    *v = gs_helem_val(e);
    *vlen = e->vlen;
}
