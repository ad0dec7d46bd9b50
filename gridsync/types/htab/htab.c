/*
 * The collections' hash table: see htab.h.
 */
#include "gridsync/types/htab/htab.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "core/hash.h"

#define MIN_SIZE     4
#define SHRINK_RATIO 8

size_t gs_alloc_cost(void *p)
{
    return core_alloc_cost(p);
}

static uint64_t next_random(struct gs_htab *t)
{
    t->rng ^= t->rng >> 12;
    t->rng ^= t->rng << 25;
    t->rng ^= t->rng >> 27;
    return t->rng * 0x2545f4914f6cdd1dull;
}

struct gs_htab *gs_htab_new(void)
{
    struct gs_htab *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    /* A seed per table from its address and a counter: no global state
     * beyond the counter, and tables do not share a collision pattern. */
    static uint64_t counter;
    t->seed = core_hash64(&t, sizeof(t), ++counter);
    t->rng = t->seed | 1;
    t->mem = gs_alloc_cost(t);
    return t;
}

void gs_htab_free(struct gs_htab *t)
{
    if (!t)
        return;
    for (uint64_t i = 0; t->bucket && i <= t->mask; i++) {
        struct gs_helem *e = t->bucket[i];
        while (e) {
            struct gs_helem *n = e->next;
            free(e);
            e = n;
        }
    }
    free(t->bucket);
    free(t);
}

static uint64_t hash(const struct gs_htab *t, const char *k, size_t klen)
{
    return core_hash64(k, klen, t->seed);
}

static int resize(struct gs_htab *t, uint64_t size)
{
    struct gs_helem **b = calloc(size, sizeof(*b));
    if (!b)
        return CORE_ENOMEM;
    for (uint64_t i = 0; t->bucket && i <= t->mask; i++) {
        struct gs_helem *e = t->bucket[i];
        while (e) {
            struct gs_helem *n = e->next;
            uint64_t idx = hash(t, gs_helem_key(e), e->klen) & (size - 1);
            e->next = b[idx];
            b[idx] = e;
            e = n;
        }
    }
    if (t->bucket) {
        t->mem -= gs_alloc_cost(t->bucket);
        free(t->bucket);
    }
    t->bucket = b;
    t->mask = size - 1;
    t->mem += gs_alloc_cost(b);
    return 0;
}

static struct gs_helem **find_ref(struct gs_htab *t, const char *k, size_t klen)
{
    if (!t->bucket)
        return NULL;
    struct gs_helem **ref = &t->bucket[hash(t, k, klen) & t->mask];
    for (; *ref; ref = &(*ref)->next)
        if ((*ref)->klen == klen && memcmp(gs_helem_key(*ref), k, klen) == 0)
            return ref;
    return NULL;
}

struct gs_helem *gs_htab_find(struct gs_htab *t, const char *k, size_t klen)
{
    struct gs_helem **ref = find_ref(t, k, klen);
    return ref ? *ref : NULL;
}

static struct gs_helem *elem_new(const char *k, size_t klen, const char *v, size_t vlen)
{
    struct gs_helem *e = malloc(sizeof(*e) + klen + vlen + 1);
    if (!e)
        return NULL;
    e->klen = (uint32_t)klen;
    e->vlen = (uint32_t)vlen;
    memcpy(e->data, k, klen);
    if (vlen)
        memcpy(e->data + klen, v, vlen);
    e->data[klen + vlen] = '\0';
    return e;
}

int gs_htab_set(struct gs_htab *t, const char *k, size_t klen, const char *v, size_t vlen,
                bool *created)
{
    if (klen > UINT32_MAX || vlen > UINT32_MAX)
        return CORE_ETOOBIG;
    struct gs_helem **ref = find_ref(t, k, klen);
    struct gs_helem *e = elem_new(k, klen, v, vlen);
    if (!e)
        return CORE_ENOMEM;
    if (ref) {
        struct gs_helem *old = *ref;
        e->next = old->next;
        *ref = e;
        t->mem -= gs_alloc_cost(old);
        free(old);
        t->mem += gs_alloc_cost(e);
        if (created)
            *created = false;
        return 0;
    }
    if (!t->bucket || t->used >= t->mask + 1) {
        uint64_t size = t->bucket ? (t->mask + 1) * 2 : MIN_SIZE;
        if (resize(t, size) != 0 && !t->bucket) {
            free(e);
            return CORE_ENOMEM;
        }
    }
    uint64_t idx = hash(t, k, klen) & t->mask;
    e->next = t->bucket[idx];
    t->bucket[idx] = e;
    t->used++;
    t->mem += gs_alloc_cost(e);
    if (created)
        *created = true;
    return 0;
}

bool gs_htab_delete(struct gs_htab *t, const char *k, size_t klen)
{
    struct gs_helem **ref = find_ref(t, k, klen);
    if (!ref)
        return false;
    struct gs_helem *e = *ref;
    *ref = e->next;
    t->mem -= gs_alloc_cost(e);
    free(e);
    t->used--;
    if (t->used == 0) {
        t->mem -= gs_alloc_cost(t->bucket);
        free(t->bucket);
        t->bucket = NULL;
        t->mask = 0;
    } else if (t->mask + 1 > MIN_SIZE && t->used < (t->mask + 1) / SHRINK_RATIO) {
        uint64_t size = MIN_SIZE;
        while (size < t->used)
            size <<= 1;
        (void)resize(t, size); /* failing to shrink is harmless */
    }
    return true;
}

static uint64_t rev64(uint64_t v)
{
    v = ((v >> 1) & 0x5555555555555555ull) | ((v & 0x5555555555555555ull) << 1);
    v = ((v >> 2) & 0x3333333333333333ull) | ((v & 0x3333333333333333ull) << 2);
    v = ((v >> 4) & 0x0f0f0f0f0f0f0f0full) | ((v & 0x0f0f0f0f0f0f0f0full) << 4);
    v = ((v >> 8) & 0x00ff00ff00ff00ffull) | ((v & 0x00ff00ff00ff00ffull) << 8);
    v = ((v >> 16) & 0x0000ffff0000ffffull) | ((v & 0x0000ffff0000ffffull) << 16);
    return (v >> 32) | (v << 32);
}

uint64_t gs_htab_scan(struct gs_htab *t, uint64_t v, size_t count, gs_htab_fn *fn, void *arg)
{
    if (!t->bucket)
        return 0;
    size_t emitted = 0, steps = 0, max_steps = count * 10 + 10;
    do {
        for (struct gs_helem *e = t->bucket[v & t->mask]; e; e = e->next) {
            fn(arg, e);
            emitted++;
        }
        /* Increment the reversed cursor: a bucket's expansions in a
         * bigger table follow it, so a resize skips nothing. */
        v |= ~t->mask;
        v = rev64(v);
        v++;
        v = rev64(v);
    } while (v != 0 && emitted < count && ++steps < max_steps);
    return v;
}

void gs_htab_each(struct gs_htab *t, gs_htab_fn *fn, void *arg)
{
    for (uint64_t i = 0; t->bucket && i <= t->mask; i++)
        for (struct gs_helem *e = t->bucket[i]; e; e = e->next)
            fn(arg, e);
}

struct gs_helem *gs_htab_random(struct gs_htab *t)
{
    if (t->used == 0)
        return NULL;
    struct gs_helem *head = NULL;
    uint64_t i = next_random(t) & t->mask;
    for (int tries = 0; !head; tries++) {
        /* After many misses walk linearly so a sparse table ends fast. */
        i = tries < 64 ? next_random(t) & t->mask : (i + 1) & t->mask;
        head = t->bucket[i];
    }
    size_t len = 0;
    for (struct gs_helem *e = head; e; e = e->next)
        len++;
    size_t pick = next_random(t) % len;
    while (pick--)
        head = head->next;
    return head;
}

size_t gs_htab_recount(const struct gs_htab *t)
{
    size_t mem = gs_alloc_cost((void *)t);
    if (t->bucket)
        mem += gs_alloc_cost(t->bucket);
    for (uint64_t i = 0; t->bucket && i <= t->mask; i++)
        for (struct gs_helem *e = t->bucket[i]; e; e = e->next)
            mem += gs_alloc_cost(e);
    return mem;
}
