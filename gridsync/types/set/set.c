/*
 * The set type over its two encodings: see set.h.
 */
#include "gridsync/types/set/set.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "gridsync/protocol/resp.h"
#include "gridsync/types/htab/htab.h"
#include "gridsync/types/intset/intset.h"

int gs_set_init(struct gs_obj *o)
{
    unsigned char *is = gs_is_new();
    if (!is)
        return CORE_ENOMEM;
    memset(o, 0, sizeof(*o));
    o->type = GS_TYPE_SET;
    o->enc = GS_ENC_INTSET;
    o->ptr = is;
    return 0;
}

void gs_set_free(struct gs_obj *o)
{
    if (o->enc == GS_ENC_INTSET)
        free(o->ptr);
    else
        gs_htab_free(o->ptr);
    o->ptr = NULL;
}

size_t gs_set_mem(const struct gs_obj *o)
{
    if (o->enc == GS_ENC_INTSET)
        return gs_alloc_cost(o->ptr);
    return ((const struct gs_htab *)o->ptr)->mem;
}

size_t gs_set_recount(const struct gs_obj *o)
{
    if (o->enc == GS_ENC_INTSET)
        return gs_alloc_cost(o->ptr);
    return gs_htab_recount(o->ptr);
}

size_t gs_set_len(const struct gs_obj *o)
{
    if (o->enc == GS_ENC_INTSET)
        return gs_is_len(o->ptr);
    return ((const struct gs_htab *)o->ptr)->used;
}

int gs_set_dup(struct gs_obj *dst, const struct gs_obj *src)
{
    struct gs_obj n = *src;
    n.counted = 0;
    if (src->enc == GS_ENC_INTSET) {
        size_t len = gs_is_bytes(src->ptr);
        unsigned char *is = malloc(len);
        if (!is)
            return CORE_ENOMEM;
        memcpy(is, src->ptr, len);
        n.ptr = is;
    } else {
        struct gs_htab *t = gs_htab_new(), *s = src->ptr;
        if (!t)
            return CORE_ENOMEM;
        for (uint64_t i = 0; s->bucket && i <= s->mask; i++) {
            for (struct gs_helem *e = s->bucket[i]; e; e = e->next) {
                if (gs_htab_set(t, gs_helem_key(e), e->klen, "", 0, NULL)) {
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

static size_t fmt(char *buf, int64_t v)
{
    return (size_t)snprintf(buf, GS_LP_INTBUF, "%" PRId64, v);
}

int gs_set_convert(struct gs_obj *o)
{
    if (o->enc != GS_ENC_INTSET)
        return 0;
    struct gs_htab *t = gs_htab_new();
    if (!t)
        return CORE_ENOMEM;
    const unsigned char *is = o->ptr;
    char buf[GS_LP_INTBUF];
    for (uint32_t i = 0; i < gs_is_len(is); i++) {
        size_t l = fmt(buf, gs_is_get(is, i));
        if (gs_htab_set(t, buf, l, "", 0, NULL)) {
            gs_htab_free(t);
            return CORE_ENOMEM;
        }
    }
    free(o->ptr);
    o->ptr = t;
    o->enc = GS_ENC_HASHTABLE;
    return 0;
}

int gs_set_add(struct gs_obj *o, const char *s, size_t len, const struct gs_type_limits *lim,
               bool *added)
{
    int64_t v;
    if (o->enc == GS_ENC_INTSET) {
        if (gs_string2ll(s, len, &v)) {
            unsigned char *is = o->ptr;
            bool fresh;
            int rc = gs_is_add(&is, v, &fresh);
            o->ptr = is;
            if (rc)
                return rc;
            *added = fresh;
            /* Redis converts once the intset holds more than the limit. */
            if (fresh && (int64_t)gs_is_len(is) > lim->set_max_intset_entries)
                (void)gs_set_convert(o); /* an intset that cannot grow stays valid */
            return 0;
        }
        if (gs_set_convert(o))
            return CORE_ENOMEM;
    }
    struct gs_htab *t = o->ptr;
    if (gs_htab_find(t, s, len)) {
        *added = false;
        return 0;
    }
    *added = true;
    return gs_htab_set(t, s, len, "", 0, NULL);
}

bool gs_set_remove(struct gs_obj *o, const char *s, size_t len)
{
    if (o->enc == GS_ENC_INTSET) {
        int64_t v;
        unsigned char *is = o->ptr;
        if (!gs_string2ll(s, len, &v))
            return false;
        bool had = gs_is_remove(&is, v);
        o->ptr = is;
        return had;
    }
    return gs_htab_delete(o->ptr, s, len);
}

bool gs_set_contains(const struct gs_obj *o, const char *s, size_t len)
{
    if (o->enc == GS_ENC_INTSET) {
        int64_t v;
        return gs_string2ll(s, len, &v) && gs_is_find(o->ptr, v);
    }
    return gs_htab_find(o->ptr, s, len) != NULL;
}

void gs_set_iter_init(struct gs_set_iter *it, const struct gs_obj *o)
{
    it->o = o;
    it->i = 0;
    it->elem = NULL;
}

bool gs_set_iter_next(struct gs_set_iter *it, const char **s, size_t *len)
{
    if (it->o->enc == GS_ENC_INTSET) {
        const unsigned char *is = it->o->ptr;
        if (it->i >= gs_is_len(is))
            return false;
        *len = fmt(it->buf, gs_is_get(is, (uint32_t)it->i++));
        *s = it->buf;
        return true;
    }
    const struct gs_htab *t = it->o->ptr;
    struct gs_helem *e = (struct gs_helem *)it->elem;
    while (!e) {
        if (!t->bucket || it->i > t->mask)
            return false;
        e = t->bucket[it->i++];
    }
    *s = gs_helem_key(e);
    *len = e->klen;
    it->elem = e->next;
    return true;
}

const char *gs_set_random(const struct gs_obj *o, uint64_t rnd, char *buf, size_t *len)
{
    if (o->enc == GS_ENC_INTSET) {
        const unsigned char *is = o->ptr;
        *len = fmt(buf, gs_is_get(is, (uint32_t)(rnd % gs_is_len(is))));
        return buf;
    }
    struct gs_helem *e = gs_htab_random(o->ptr);
    *len = e->klen;
    return gs_helem_key(e);
}

struct scan_ctx {
    gs_set_scan_fn *fn;
    void *arg;
};

static void scan_elem(void *arg, struct gs_helem *e)
{
    struct scan_ctx *c = arg;
    c->fn(c->arg, gs_helem_key(e), e->klen);
}

uint64_t gs_set_scan(const struct gs_obj *o, uint64_t cursor, size_t count, gs_set_scan_fn *fn,
                     void *arg)
{
    if (o->enc == GS_ENC_INTSET) {
        struct gs_set_iter it;
        const char *s;
        size_t len;
        gs_set_iter_init(&it, o);
        while (gs_set_iter_next(&it, &s, &len))
            fn(arg, s, len);
        return 0;
    }
    struct scan_ctx c = {fn, arg};
    return gs_htab_scan(o->ptr, cursor, count, scan_elem, &c);
}
