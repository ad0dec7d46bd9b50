/*
 * A chained hash table of (key, value) byte strings, the big form of a
 * hash (field -> value) and, with empty values, of a set. One allocation
 * per element holding both strings, like the store's entries (entry.h),
 * and a power-of-two bucket array.
 *
 * Unlike the store it resizes in one step (a collection is one key; the
 * thresholds that make a collection big keep resizes rare, and Redis's
 * incremental rehash would double every lookup while it runs). It grows
 * when it holds as many elements as buckets and shrinks below one per 8.
 *
 * Memory: `mem` is, at all times, the sum over the blocks the table owns
 * (the struct, the bucket array, each element) of malloc_usable_size + 8,
 * the same rule as the store's used_memory (store.h invariant 3), so the
 * store can add it to its own count. gs_htab_recount recomputes it.
 *
 * Keys are binary safe; values too. Functions that can fail return 0 or
 * CORE_ENOMEM with the table unchanged.
 */
#ifndef GS_HTAB_H
#define GS_HTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gs_helem {
    struct gs_helem *next;
    uint32_t klen;
    uint32_t vlen;
    char data[]; /* key bytes, value bytes, '\0' */
};

struct gs_htab {
    struct gs_helem **bucket; /* NULL when empty */
    uint64_t mask;
    uint64_t used;
    uint64_t seed;
    uint64_t rng;
    size_t mem;
};

static inline const char *gs_helem_key(const struct gs_helem *e)
{
    return e->data;
}

static inline char *gs_helem_val(struct gs_helem *e)
{
    return e->data + e->klen;
}

/* What a block costs under the running allocator (core/alloc.h). */
size_t gs_alloc_cost(void *p);

struct gs_htab *gs_htab_new(void);
void gs_htab_free(struct gs_htab *t);

struct gs_helem *gs_htab_find(struct gs_htab *t, const char *k, size_t klen);

/* Insert or overwrite k with v. *created (if not NULL) says whether k is
 * new. An overwrite may move the element. */
int gs_htab_set(struct gs_htab *t, const char *k, size_t klen, const char *v, size_t vlen,
                bool *created);

/* Delete k; returns whether it was there. */
bool gs_htab_delete(struct gs_htab *t, const char *k, size_t klen);

/* Redis's dictScan contract on one table: every element present for the
 * whole iteration is visited at least once across resizes. Visits about
 * `count` elements; returns the next cursor, 0 when done. */
typedef void gs_htab_fn(void *arg, struct gs_helem *e);
uint64_t gs_htab_scan(struct gs_htab *t, uint64_t cursor, size_t count, gs_htab_fn *fn, void *arg);

/* Visit every element (fn must not modify the table). */
void gs_htab_each(struct gs_htab *t, gs_htab_fn *fn, void *arg);

/* A random element (a random non-empty bucket, then a random element of
 * its chain), NULL when empty. */
struct gs_helem *gs_htab_random(struct gs_htab *t);

/* Recompute mem from the blocks; for tests and the store's check. */
size_t gs_htab_recount(const struct gs_htab *t);

#endif
