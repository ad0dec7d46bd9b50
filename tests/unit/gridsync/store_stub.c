/*
 * A deliberately simple stand-in for gridsync/store.h, for the Raft glue's
 * tests until the real store (branch gs-store) is merged: an unsorted
 * array searched linearly, no eviction. Only what the glue and the test
 * executor call is implemented; SCAN returns everything in one call.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "gridsync/store.h"

struct gs_entry {
    char *key, *val;
    size_t klen, vlen;
    int64_t expire_ms;
};

struct gs_store {
    struct gs_entry **e;
    size_t n, cap;
    struct gs_store_stats st;
};

int gs_store_new(struct gs_store **out, const struct gs_store_config *cfg)
{
    (void)cfg;
    *out = calloc(1, sizeof(**out));
    return *out ? 0 : CORE_ENOMEM;
}

static void entry_free(struct gs_entry *e)
{
    free(e->key);
    free(e->val);
    free(e);
}

void gs_store_clear(struct gs_store *s)
{
    for (size_t i = 0; i < s->n; i++)
        entry_free(s->e[i]);
    s->n = 0;
}

void gs_store_free(struct gs_store *s)
{
    if (!s)
        return;
    gs_store_clear(s);
    free(s->e);
    free(s);
}

static size_t find(struct gs_store *s, const void *key, size_t klen)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->e[i]->klen == klen && memcmp(s->e[i]->key, key, klen) == 0)
            return i;
    return SIZE_MAX;
}

static void remove_at(struct gs_store *s, size_t i)
{
    entry_free(s->e[i]);
    s->e[i] = s->e[--s->n];
}

struct gs_entry *gs_store_lookup(struct gs_store *s, const void *key, size_t klen, int64_t now_ms,
                                 unsigned flags)
{
    size_t i = find(s, key, klen);
    if (i != SIZE_MAX && s->e[i]->expire_ms >= 0 && s->e[i]->expire_ms <= now_ms) {
        remove_at(s, i);
        s->st.expired_keys++;
        i = SIZE_MAX;
    }
    return i == SIZE_MAX ? NULL : s->e[i];
}

int gs_store_set(struct gs_store *s, const void *key, size_t klen, const void *val, size_t vlen,
                 int64_t expire_ms, struct gs_entry **out)
{
    size_t i = find(s, key, klen);
    struct gs_entry *e;
    if (i == SIZE_MAX) {
        if (s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 16;
            struct gs_entry **a = realloc(s->e, cap * sizeof(*a));
            if (!a)
                return CORE_ENOMEM;
            s->e = a;
            s->cap = cap;
        }
        e = calloc(1, sizeof(*e));
        if (!e || !(e->key = malloc(klen ? klen : 1))) {
            free(e);
            return CORE_ENOMEM;
        }
        memcpy(e->key, key, klen);
        e->klen = klen;
        s->e[s->n++] = e;
    } else {
        e = s->e[i];
    }
    char *v = malloc(vlen ? vlen : 1);
    if (!v)
        return CORE_ENOMEM;
    memcpy(v, val, vlen);
    free(e->val);
    e->val = v;
    e->vlen = vlen;
    e->expire_ms = expire_ms;
    if (out)
        *out = e;
    return 0;
}

char *gs_store_resize_value(struct gs_store *s, struct gs_entry **e, size_t newlen)
{
    char *v = realloc((*e)->val, newlen ? newlen : 1);
    if (!v)
        return NULL;
    if (newlen > (*e)->vlen)
        memset(v + (*e)->vlen, 0, newlen - (*e)->vlen);
    (*e)->val = v;
    (*e)->vlen = newlen;
    return v;
}

int gs_store_delete(struct gs_store *s, const void *key, size_t klen, int64_t now_ms)
{
    if (!gs_store_lookup(s, key, klen, now_ms, GS_LOOKUP_NOTOUCH))
        return 0;
    remove_at(s, find(s, key, klen));
    return 1;
}

const char *gs_entry_key(const struct gs_entry *e, size_t *len)
{
    *len = e->klen;
    return e->key;
}

char *gs_entry_value(struct gs_entry *e, size_t *len)
{
    *len = e->vlen;
    return e->val;
}

int64_t gs_entry_expire_ms(const struct gs_entry *e)
{
    return e->expire_ms;
}

uint64_t gs_store_scan(struct gs_store *s, uint64_t cursor, size_t count, int64_t now_ms,
                       gs_scan_fn fn, void *arg)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->e[i]->expire_ms < 0 || s->e[i]->expire_ms > now_ms)
            fn(arg, s->e[i]);
    return 0;
}

void gs_store_stats(const struct gs_store *s, struct gs_store_stats *out)
{
    *out = s->st;
    out->keys = s->n;
}
