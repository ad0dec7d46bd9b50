/*
 * The key space of one shard: a chained hash table with incremental
 * rehashing (as Redis's dict.c), one allocation per entry (entry.h), a
 * binary min-heap of expiry times, exact memory accounting and eviction
 * through a policy (evict.h). The contract is in store.h; the design, with
 * the reasons for each choice, in docs/gridsync-store.md.
 *
 * Why one file of over 1,000 lines: the table, the entries, the expiry
 * heap and the memory accounting share invariants T1-T4 below (an entry's
 * heap index, its table chain and its bytes change together), and an
 * entry holding a typed value (obj_*) changes its bytes under the same
 * invariants; split, each part would have to expose the others'
 * internals. What needs none of them, UNLINK's free thread, is
 * lazyfree.c.
 *
 * Hash table. Two tables, ht[0] and ht[1]; ht[1] exists only while
 * rehashing, when entries move from ht[0] bucket by bucket (rehash_idx is
 * the next bucket of ht[0] to move). Every lookup, insert and delete moves
 * one bucket, and each expire cycle moves more, so growing to millions of
 * keys never stops the loop for a whole-table rehash. New keys go to ht[1]
 * while rehashing. Sizes are powers of two; a table grows when it holds as
 * many entries as buckets and shrinks (from the expire cycle, never from a
 * delete, so that eviction never allocates) below one entry per 8 buckets.
 *
 * Expiry. An entry with a TTL has a 12-byte expire field holding the time
 * and its index in the heap; the heap holds (time, entry) pairs so that
 * sifting compares without touching entries. The expire cycle pops the
 * root while it is due: each expired entry costs O(log n), and finding it
 * costs nothing.
 *
 * Memory. used_memory counts, for every block the store owns (entries, the
 * bucket arrays, the heap array), malloc_usable_size + one word of glibc
 * chunk header: what the allocator really holds for it. Each block's cost
 * is taken from the same pointer when it is allocated and when it is
 * freed, so the sum is exact by construction and returns to 0 when the
 * store is empty (tables and heap are released then).
 *
 * Invariants (besides those of store.h):
 *  T1. ht[1].bucket != NULL exactly when rehash_idx >= 0; buckets of ht[0]
 *      below rehash_idx are empty.
 *  T2. ht[0].used + ht[1].used is the number of entries.
 *  T3. heap[i].e has an expire field with heap_idx == i and expire_ms ==
 *      heap[i].when; heap[parent(i)].when <= heap[i].when.
 *  T4. When the store is empty, it owns no table and no heap array.
 */
#include "gridsync/store/store.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "core/hash.h"
#include "gridsync/store/entry.h"
#include "gridsync/store/evict.h"
#include "gridsync/store/lazyfree.h"
#include "gridsync/types/value.h"

#define TABLE_MIN_SIZE 4
/* With maxmemory set, a table may hold this many entries per bucket
 * before it grows even if the bigger bucket array would exceed the limit
 * (Redis's dict_force_resize_ratio). */
#define TABLE_FORCE_GROW_RATIO 5
/* Shrink when fewer than one entry per this many buckets. */
#define TABLE_SHRINK_RATIO 8
/* Rehashing visits at most this many empty buckets per bucket it is asked
 * to move, otherwise a sparse table would make one step unbounded. */
#define REHASH_EMPTY_VISITS 10
#define HEAP_MIN_CAP        16
/* An overwrite with a value no longer than the current one reuses the
 * entry's block in place unless that leaves more than this many bytes
 * unused. */
#define INPLACE_SLACK 64
#define RANDOM_TRIES  100

struct table {
    struct gs_entry **bucket; /* NULL when the table has no array */
    uint64_t mask;            /* size - 1 */
    uint64_t used;
};

struct expiry_node {
    int64_t when;
    struct gs_entry *e;
};

struct gs_store {
    struct table ht[2];
    int64_t rehash_idx; /* -1 when not rehashing */
    struct expiry_node *heap;
    uint32_t heap_len;
    uint32_t heap_cap;
    struct gs_evict evict;
    uint64_t maxmemory;
    uint64_t seed;
    uint64_t rng;
    uint64_t used_memory;
    uint64_t hits, misses, expired, evicted;
    /* The access clock written into entries (entry.h E5): Redis's LRU
     * clock of clock_ms, the latest time gs_store_tick or a touching
     * lookup gave. */
    int64_t clock_ms;
    uint32_t clock;
    /* UNLINK's background freeing (gs_store_unlink): collections handed
     * to one thread, created on first use, that frees them. The thread
     * touches nothing of the store but this queue. */
    struct gs_lazyfree *lazy; /* NULL until the first lazy UNLINK (lazyfree.h) */
    /* Told of every change to a key (gs_store_on_modified); NULL for a
     * node with no WATCHed keys, so the write path pays one branch. */
    gs_store_modified_fn *on_modified;
    void *on_modified_arg;
};

static void signal_modified(struct gs_store *s, struct gs_entry *e)
{
    if (s->on_modified)
        s->on_modified(s->on_modified_arg, gs_entry_keyp(e), e->klen);
}

/* ---- typed values (entry.h E4) ----
 * The value bytes of an object entry sit at any alignment (after the
 * key), so the struct is copied in and out rather than cast. */

static void obj_load(const struct gs_entry *e, struct gs_obj *o)
{
    memcpy(o, gs_entry_valp((struct gs_entry *)e), sizeof(*o));
}

static void obj_store(struct gs_entry *e, const struct gs_obj *o)
{
    memcpy(gs_entry_valp(e), o, sizeof(*o));
}

/* Free an object entry's collection and take its memory off the count;
 * the entry becomes a (garbage) string entry. */
static void obj_release(struct gs_store *s, struct gs_entry *e)
{
    struct gs_obj o;
    obj_load(e, &o);
    s->used_memory -= o.counted;
    gs_obj_free(&o);
    e->is_obj = 0;
}

/* ---- lazy free (UNLINK): lazyfree.h ---- */

#define LAZYFREE_MIN_ELEMENTS 64 /* Redis's LAZYFREE_THRESHOLD */

/* ---- memory accounting ---- */

/* What a live block really costs, and what a request would: the
 * allocator's own figures (core/alloc.h; docs/gridsync-store.md, "Memory
 * accounting"). */
static size_t alloc_cost(void *p)
{
    return core_alloc_cost(p);
}

static size_t request_cost(size_t request)
{
    return core_alloc_request_cost(request);
}

size_t gs_store_entry_cost(size_t klen, size_t vlen)
{
    return request_cost(gs_entry_alloc_size(0, klen, vlen));
}

/* ---- helpers ---- */

static bool rehashing(const struct gs_store *s)
{
    return s->rehash_idx >= 0;
}

static uint64_t table_size(const struct table *t)
{
    return t->bucket ? t->mask + 1 : 0;
}

static uint64_t key_count(const struct gs_store *s)
{
    return s->ht[0].used + s->ht[1].used;
}

static uint64_t hash_key(const struct gs_store *s, const void *key, size_t klen)
{
    return core_hash64(key, klen, s->seed);
}

static uint64_t hash_entry(const struct gs_store *s, struct gs_entry *e)
{
    return hash_key(s, gs_entry_keyp(e), e->klen);
}

static bool is_expired(struct gs_entry *e, int64_t now_ms)
{
    struct gs_expire_field *f = gs_entry_expire_field(e);
    return f && f->expire_ms >= 0 && f->expire_ms <= now_ms;
}

/* xorshift64*: cheap, good enough to pick a random bucket. */
static uint64_t next_random(struct gs_store *s)
{
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return s->rng * 0x2545f4914f6cdd1dull;
}

/* ---- hash table ---- */

static void table_release(struct gs_store *s, struct table *t)
{
    if (t->bucket) {
        s->used_memory -= alloc_cost(t->bucket);
        free(t->bucket);
    }
    memset(t, 0, sizeof(*t));
}

/* Give ht[0] its first array, or start rehashing into a new array of
 * `size` buckets (a power of two). Entries are not touched here. */
static int table_resize(struct gs_store *s, uint64_t size)
{
    struct gs_entry **b = calloc(size, sizeof(*b));
    if (!b)
        return CORE_ENOMEM;
    s->used_memory += alloc_cost(b);
    struct table t = {.bucket = b, .mask = size - 1, .used = 0};
    if (!s->ht[0].bucket) {
        s->ht[0] = t;
    } else {
        s->ht[1] = t;
        s->rehash_idx = 0;
    }
    return 0;
}

static uint64_t next_power(uint64_t n)
{
    uint64_t size = TABLE_MIN_SIZE;
    while (size < n)
        size <<= 1;
    return size;
}

/* Move up to n buckets from ht[0] to ht[1]; finish the rehash when ht[0]
 * is empty. Returns the units of work done (buckets moved or skipped). */
static size_t rehash(struct gs_store *s, size_t n)
{
    struct table *t0 = &s->ht[0], *t1 = &s->ht[1];
    size_t empty_visits = n > SIZE_MAX / REHASH_EMPTY_VISITS ? SIZE_MAX : n * REHASH_EMPTY_VISITS;
    size_t done = 0;
    if (!rehashing(s))
        return 0;
    while (n-- > 0 && t0->used > 0) {
        /* t0->used > 0 guarantees a non-empty bucket at or after
         * rehash_idx, so this loop ends inside the array. */
        while (t0->bucket[s->rehash_idx] == NULL) {
            s->rehash_idx++;
            done++;
            if (--empty_visits == 0)
                return done;
        }
        struct gs_entry *e = t0->bucket[s->rehash_idx];
        while (e) {
            struct gs_entry *next = e->hnext;
            uint64_t idx = hash_entry(s, e) & t1->mask;
            e->hnext = t1->bucket[idx];
            t1->bucket[idx] = e;
            t0->used--;
            t1->used++;
            e = next;
        }
        t0->bucket[s->rehash_idx++] = NULL;
        done++;
    }
    if (t0->used == 0) {
        table_release(s, t0);
        *t0 = *t1;
        memset(t1, 0, sizeof(*t1));
        s->rehash_idx = -1;
    }
    return done;
}

static void rehash_step(struct gs_store *s)
{
    if (rehashing(s))
        rehash(s, 1);
}

/* Called before inserting a new key. Fails only when the store has no
 * table at all and cannot get one; a failed growth just leaves chains
 * longer. */
static int table_expand_if_needed(struct gs_store *s)
{
    if (rehashing(s))
        return 0;
    if (!s->ht[0].bucket)
        return table_resize(s, TABLE_MIN_SIZE);
    uint64_t size = table_size(&s->ht[0]), used = s->ht[0].used;
    if (used < size)
        return 0;
    uint64_t grown = next_power(used + 1);
    /* As Redis does: under a memory limit, do not let a bigger bucket
     * array push the store over it (which would evict keys to pay for
     * buckets) unless chains grow long. */
    if (s->maxmemory && used / size < TABLE_FORCE_GROW_RATIO &&
        s->used_memory + request_cost(grown * sizeof(struct gs_entry *)) > s->maxmemory)
        return 0;
    (void)table_resize(s, grown);
    return 0;
}

static void table_shrink_if_sparse(struct gs_store *s)
{
    if (rehashing(s) || !s->ht[0].bucket)
        return;
    uint64_t size = table_size(&s->ht[0]), used = s->ht[0].used;
    if (size > TABLE_MIN_SIZE && used < size / TABLE_SHRINK_RATIO)
        (void)table_resize(s, next_power(used));
}

/* The slot that points at the entry with this key, or NULL; *which is
 * the table it is in. */
static struct gs_entry **find_ref(struct gs_store *s, const void *key, size_t klen, uint64_t h,
                                  int *which)
{
    for (int t = 0; t < 2; t++) {
        struct table *tb = &s->ht[t];
        if (!tb->bucket)
            break;
        struct gs_entry **ref = &tb->bucket[h & tb->mask];
        for (; *ref; ref = &(*ref)->hnext) {
            struct gs_entry *e = *ref;
            if (e->klen == klen && memcmp(gs_entry_keyp(e), key, klen) == 0) {
                *which = t;
                return ref;
            }
        }
    }
    return NULL;
}

/* The slot that points at e itself (e is in the store). */
static struct gs_entry **ref_of_entry(struct gs_store *s, struct gs_entry *e, int *which)
{
    uint64_t h = hash_entry(s, e);
    for (int t = 0; t < 2; t++) {
        struct table *tb = &s->ht[t];
        if (!tb->bucket)
            break;
        for (struct gs_entry **ref = &tb->bucket[h & tb->mask]; *ref; ref = &(*ref)->hnext) {
            if (*ref == e) {
                *which = t;
                return ref;
            }
        }
    }
    return NULL; /* not reached for an entry of this store */
}

/* ---- expiry heap ---- */

static void heap_place(struct gs_store *s, uint32_t i, struct expiry_node n)
{
    s->heap[i] = n;
    gs_entry_expire_field(n.e)->heap_idx = i;
}

static void heap_sift_up(struct gs_store *s, uint32_t i)
{
    struct expiry_node n = s->heap[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (s->heap[parent].when <= n.when)
            break;
        heap_place(s, i, s->heap[parent]);
        i = parent;
    }
    heap_place(s, i, n);
}

static void heap_sift_down(struct gs_store *s, uint32_t i)
{
    struct expiry_node n = s->heap[i];
    for (;;) {
        uint64_t c = 2 * (uint64_t)i + 1;
        if (c >= s->heap_len)
            break;
        if (c + 1 < s->heap_len && s->heap[c + 1].when < s->heap[c].when)
            c++;
        if (s->heap[c].when >= n.when)
            break;
        heap_place(s, i, s->heap[c]);
        i = (uint32_t)c;
    }
    heap_place(s, i, n);
}

static int heap_set_capacity(struct gs_store *s, uint32_t cap)
{
    size_t old_cost = s->heap ? alloc_cost(s->heap) : 0;
    struct expiry_node *h = realloc(s->heap, (size_t)cap * sizeof(*h));
    if (!h)
        return CORE_ENOMEM;
    s->used_memory = s->used_memory - old_cost + alloc_cost(h);
    s->heap = h;
    s->heap_cap = cap;
    return 0;
}

/* Make room for one more node, so that the push after it cannot fail. */
static int heap_reserve_one(struct gs_store *s)
{
    if (s->heap_len < s->heap_cap)
        return 0;
    if (s->heap_cap >= GS_NO_HEAP_IDX / 2)
        return CORE_ENOMEM;
    return heap_set_capacity(s, s->heap_cap ? s->heap_cap * 2 : HEAP_MIN_CAP);
}

static void heap_push(struct gs_store *s, struct gs_entry *e, int64_t when)
{
    uint32_t i = s->heap_len++;
    s->heap[i] = (struct expiry_node){.when = when, .e = e};
    heap_sift_up(s, i);
}

static void heap_remove(struct gs_store *s, uint32_t i)
{
    gs_entry_expire_field(s->heap[i].e)->heap_idx = GS_NO_HEAP_IDX;
    uint32_t last = --s->heap_len;
    if (i != last) {
        int64_t old = s->heap[i].when;
        heap_place(s, i, s->heap[last]);
        if (s->heap[i].when < old)
            heap_sift_up(s, i);
        else
            heap_sift_down(s, i);
    }
    if (s->heap_len == 0) {
        s->used_memory -= alloc_cost(s->heap);
        free(s->heap);
        s->heap = NULL;
        s->heap_cap = 0;
    } else if (s->heap_cap > HEAP_MIN_CAP && s->heap_len < s->heap_cap / 4) {
        (void)heap_set_capacity(s, s->heap_cap / 2); /* failing to shrink is harmless */
    }
}

static void heap_update(struct gs_store *s, uint32_t i, int64_t when)
{
    int64_t old = s->heap[i].when;
    s->heap[i].when = when;
    if (when < old)
        heap_sift_up(s, i);
    else
        heap_sift_down(s, i);
}

/* Set e's expiry; the caller has made sure e has an expire field and, if
 * e is not in the heap yet, that the heap has room. */
static void expire_set_prepared(struct gs_store *s, struct gs_entry *e, int64_t expire_ms)
{
    struct gs_expire_field *f = gs_entry_expire_field(e);
    if (expire_ms < 0) {
        if (f->heap_idx != GS_NO_HEAP_IDX)
            heap_remove(s, f->heap_idx);
        f->expire_ms = -1;
        return;
    }
    f->expire_ms = expire_ms;
    if (f->heap_idx == GS_NO_HEAP_IDX)
        heap_push(s, e, expire_ms);
    else
        heap_update(s, f->heap_idx, expire_ms);
}

/* ---- entries ---- */

/* Invariant T4: an empty store owns no table and no heap array, so that
 * used_memory returns to exactly its initial value. */
static void release_if_empty(struct gs_store *s)
{
    if (key_count(s) != 0)
        return;
    table_release(s, &s->ht[0]);
    table_release(s, &s->ht[1]);
    s->rehash_idx = -1;
    if (s->heap) {
        s->used_memory -= alloc_cost(s->heap);
        free(s->heap);
        s->heap = NULL;
        s->heap_cap = 0;
    }
}

/* Unlink e (found at *ref in ht[which]) from everything and free it. */
static void remove_entry(struct gs_store *s, struct gs_entry *e, struct gs_entry **ref, int which)
{
    /* Every removal (DEL, lazy and active expiry, eviction) passes here. */
    signal_modified(s, e);
    if (e->is_obj)
        obj_release(s, e);
    *ref = e->hnext;
    s->ht[which].used--;
    s->evict.ops->on_remove(&s->evict, e);
    struct gs_expire_field *f = gs_entry_expire_field(e);
    if (f && f->heap_idx != GS_NO_HEAP_IDX)
        heap_remove(s, f->heap_idx);
    s->used_memory -= alloc_cost(e);
    free(e);
    release_if_empty(s);
}

/* Give *pe the shape (expire field or not, vlen), keeping the key and the
 * first min(old, new) value bytes; new value bytes are zero. *ref is the
 * slot pointing at *pe. The entry may move; every pointer to it (chain,
 * policy list, heap) is updated and *pe set. An expire field is only ever
 * added (invariant E3). Returns 0 or CORE_ENOMEM with nothing changed. */
static int entry_reshape(struct gs_store *s, struct gs_entry **pe, struct gs_entry **ref,
                         bool want_field, size_t vlen)
{
    struct gs_entry *e = *pe;
    bool add_field = want_field && !e->has_expire_field;
    size_t need = gs_entry_alloc_size(e->has_expire_field || want_field, e->klen, vlen);
    size_t have = gs_entry_alloc_size(e->has_expire_field, e->klen, e->vlen);
    size_t keep = vlen < e->vlen ? vlen : e->vlen;
    uint32_t clock = gs_entry_clock(e); /* moves with the value's end */

    /* Only ever write within the bytes requested (not the allocator's
     * slack past them); growing goes through realloc, which extends in
     * place when glibc can. */
    if (add_field || need > have || have - need > INPLACE_SLACK) {
        size_t old_cost = alloc_cost(e);
        struct gs_entry *ne = realloc(e, need);
        if (!ne)
            return CORE_ENOMEM;
        /* ne may equal the old address; the fix-ups below are then
         * no-ops. The old address is never read again. */
        e = ne;
        s->used_memory = s->used_memory - old_cost + alloc_cost(e);
        if (add_field) {
            memmove(e->data + sizeof(struct gs_expire_field), e->data, e->klen + keep);
            struct gs_expire_field *f = (struct gs_expire_field *)e->data;
            f->expire_ms = -1;
            f->heap_idx = GS_NO_HEAP_IDX;
            e->has_expire_field = 1;
        }
        *ref = e;
        s->evict.ops->on_move(&s->evict, e);
        struct gs_expire_field *f = gs_entry_expire_field(e);
        if (f && f->heap_idx != GS_NO_HEAP_IDX)
            s->heap[f->heap_idx].e = e;
    }
    char *v = gs_entry_valp(e);
    if (vlen > keep)
        memset(v + keep, 0, vlen - keep);
    v[vlen] = '\0';
    e->vlen = (uint32_t)vlen;
    gs_entry_set_clock(e, clock);
    *pe = e;
    return 0;
}

/* ---- public API ---- */

int gs_store_new(struct gs_store **out, const struct gs_store_config *cfg)
{
    struct gs_store *s = calloc(1, sizeof(*s));
    if (!s)
        return CORE_ENOMEM;
    s->rehash_idx = -1;
    s->maxmemory = cfg->maxmemory;
    s->seed = cfg->hash_seed;
    s->rng = cfg->hash_seed ^ 0x9e3779b97f4a7c15ull;
    if (s->rng == 0)
        s->rng = 1;
    gs_evict_init(&s->evict, cfg->policy);
    *out = s;
    return 0;
}

void gs_store_free(struct gs_store *s)
{
    if (!s)
        return;
    gs_lazyfree_stop(&s->lazy);
    gs_store_clear(s);
    free(s);
}

void gs_store_configure(struct gs_store *s, uint64_t maxmemory, enum gs_evict_policy policy)
{
    s->maxmemory = maxmemory;
    if (policy == s->evict.policy)
        return;
    /* Drain the old policy in eviction order into a side list, then feed
     * the new policy from the least to the most valuable, so that the
     * recency order survives the switch. O(keys), but this is an
     * administrative command, not a request. */
    struct core_list side, *l;
    core_list_init(&side);
    struct gs_entry *e;
    while ((e = s->evict.ops->victim(&s->evict)) != NULL) {
        s->evict.ops->on_remove(&s->evict, e);
        core_list_push_back(&side, &e->link);
    }
    gs_evict_init(&s->evict, policy);
    while ((l = core_list_first(&side)) != NULL) {
        core_list_remove(l);
        s->evict.ops->on_insert(&s->evict, gs_evict_entry_of(l));
    }
}

struct gs_entry *gs_store_lookup(struct gs_store *s, const void *key, size_t klen, int64_t now_ms,
                                 unsigned flags)
{
    bool touch = !(flags & GS_LOOKUP_NOTOUCH);
    struct gs_entry **ref = NULL;
    int which = 0;
    if (key_count(s) > 0) {
        rehash_step(s);
        ref = find_ref(s, key, klen, hash_key(s, key, klen), &which);
    }
    if (ref && is_expired(*ref, now_ms)) {
        remove_entry(s, *ref, ref, which); /* lazy expiry, invariant 4 */
        s->expired++;
        ref = NULL;
    }
    if (!ref) {
        if (touch)
            s->misses++;
        return NULL;
    }
    if (touch) {
        s->hits++;
        s->evict.ops->on_hit(&s->evict, *ref);
    }
    if (touch || (flags & GS_LOOKUP_STAMP)) {
        gs_store_tick(s, now_ms);
        gs_entry_set_clock(*ref, s->clock);
    }
    return *ref;
}

void gs_store_tick(struct gs_store *s, int64_t now_ms)
{
    if (now_ms == s->clock_ms)
        return;
    s->clock_ms = now_ms;
    s->clock = (uint32_t)((uint64_t)(now_ms / 1000) & GS_ENTRY_CLOCK_MAX);
}

uint64_t gs_store_idle_seconds(const struct gs_store *s, struct gs_entry *e)
{
    /* Redis's estimateObjectIdleTime, wrap-around rule included. */
    uint32_t lru = gs_entry_clock(e);
    return s->clock >= lru ? s->clock - lru : s->clock + (GS_ENTRY_CLOCK_MAX - lru);
}

int gs_store_set(struct gs_store *s, const void *key, size_t klen, const void *val, size_t vlen,
                 int64_t expire_ms, struct gs_entry **out)
{
    if (klen > GS_KEY_MAX || vlen > GS_VALUE_MAX)
        return CORE_ETOOBIG;
    int which = 0;
    struct gs_entry **ref = NULL;
    uint64_t h = hash_key(s, key, klen);
    if (key_count(s) > 0) {
        rehash_step(s);
        ref = find_ref(s, key, klen, h, &which);
    }
    bool want_field = expire_ms >= 0;

    if (ref) { /* overwrite: same entry, reshaped */
        struct gs_entry *e = *ref;
        struct gs_expire_field *f = gs_entry_expire_field(e);
        if (want_field && (!f || f->heap_idx == GS_NO_HEAP_IDX) && heap_reserve_one(s) != 0)
            return CORE_ENOMEM;
        /* A collection being replaced: keep it until the reshape has
         * succeeded (which overwrites the value bytes), then free it. */
        struct gs_obj old;
        bool had_obj = e->is_obj;
        if (had_obj)
            obj_load(e, &old);
        if (entry_reshape(s, &e, ref, want_field, vlen) != 0)
            return CORE_ENOMEM;
        if (had_obj) {
            s->used_memory -= old.counted;
            gs_obj_free(&old);
            e->is_obj = 0;
        }
        memcpy(gs_entry_valp(e), val, vlen);
        if (e->has_expire_field)
            expire_set_prepared(s, e, expire_ms);
        s->evict.ops->on_hit(&s->evict, e);
        gs_entry_set_clock(e, s->clock);
        signal_modified(s, e);
        if (out)
            *out = e;
        return 0;
    }

    struct gs_entry *e = NULL;
    if (table_expand_if_needed(s) != 0 || (want_field && heap_reserve_one(s) != 0) ||
        (e = malloc(gs_entry_alloc_size(want_field, klen, vlen))) == NULL) {
        release_if_empty(s);
        return CORE_ENOMEM;
    }
    e->klen = (uint32_t)klen;
    e->vlen = (uint32_t)vlen;
    e->evict_bits = 0;
    e->is_obj = 0;
    e->has_expire_field = want_field;
    if (want_field) {
        struct gs_expire_field *f = (struct gs_expire_field *)e->data;
        f->expire_ms = -1;
        f->heap_idx = GS_NO_HEAP_IDX;
    }
    memcpy(gs_entry_keyp(e), key, klen);
    memcpy(gs_entry_valp(e), val, vlen);
    gs_entry_valp(e)[vlen] = '\0';
    gs_entry_set_clock(e, s->clock);
    s->used_memory += alloc_cost(e);

    struct table *t = rehashing(s) ? &s->ht[1] : &s->ht[0];
    uint64_t idx = h & t->mask;
    e->hnext = t->bucket[idx];
    t->bucket[idx] = e;
    t->used++;
    s->evict.ops->on_insert(&s->evict, e);
    if (want_field)
        expire_set_prepared(s, e, expire_ms);
    signal_modified(s, e);
    if (out)
        *out = e;
    return 0;
}

char *gs_store_resize_value(struct gs_store *s, struct gs_entry **e, size_t newlen)
{
    if (newlen > GS_VALUE_MAX || (*e)->is_obj)
        return NULL;
    int which;
    struct gs_entry **ref = ref_of_entry(s, *e, &which);
    struct gs_entry *ne = *e;
    if (entry_reshape(s, &ne, ref, false, newlen) != 0)
        return NULL;
    *e = ne;
    signal_modified(s, ne);
    return gs_entry_valp(ne);
}

int gs_store_delete(struct gs_store *s, const void *key, size_t klen, int64_t now_ms)
{
    if (key_count(s) == 0)
        return 0;
    rehash_step(s);
    int which = 0;
    struct gs_entry **ref = find_ref(s, key, klen, hash_key(s, key, klen), &which);
    if (!ref)
        return 0;
    bool expired = is_expired(*ref, now_ms);
    remove_entry(s, *ref, ref, which);
    if (expired) {
        s->expired++;
        return 0;
    }
    return 1;
}

int gs_store_unlink(struct gs_store *s, const void *key, size_t klen, int64_t now_ms)
{
    struct gs_entry *e = gs_store_lookup(s, key, klen, now_ms, GS_LOOKUP_NOTOUCH);
    if (!e)
        return 0;
    struct gs_obj o;
    if (e->is_obj) {
        obj_load(e, &o);
        if (gs_obj_len(&o) > LAZYFREE_MIN_ELEMENTS && gs_lazyfree_push(&s->lazy, &o)) {
            /* The blocks now belong to the thread: off the count, and the
             * entry no longer frees them. */
            s->used_memory -= o.counted;
            e->is_obj = 0;
        }
    }
    gs_store_delete_entry(s, e);
    return 1;
}

uint64_t gs_store_lazyfree_pending(const struct gs_store *s)
{
    return gs_lazyfree_pending(s->lazy);
}

void gs_store_delete_entry(struct gs_store *s, struct gs_entry *e)
{
    int which = 0;
    struct gs_entry **ref = ref_of_entry(s, e, &which);
    remove_entry(s, e, ref, which);
}

int gs_store_set_expire(struct gs_store *s, struct gs_entry **e, int64_t expire_ms)
{
    struct gs_expire_field *f = gs_entry_expire_field(*e);
    if (expire_ms < 0) {
        if (f && f->expire_ms >= 0) { /* PERSIST of a key without TTL changes nothing */
            expire_set_prepared(s, *e, -1);
            signal_modified(s, *e);
        }
        return 0;
    }
    if ((!f || f->heap_idx == GS_NO_HEAP_IDX) && heap_reserve_one(s) != 0)
        return CORE_ENOMEM;
    if (!f) {
        int which;
        struct gs_entry **ref = ref_of_entry(s, *e, &which);
        if (entry_reshape(s, e, ref, true, (*e)->vlen) != 0)
            return CORE_ENOMEM;
    }
    expire_set_prepared(s, *e, expire_ms);
    signal_modified(s, *e);
    return 0;
}

void gs_store_signal_modified(struct gs_store *s, struct gs_entry *e)
{
    signal_modified(s, e);
}

void gs_store_on_modified(struct gs_store *s, gs_store_modified_fn *fn, void *arg)
{
    s->on_modified = fn;
    s->on_modified_arg = arg;
}

const char *gs_entry_key(const struct gs_entry *e, size_t *len)
{
    *len = e->klen;
    return gs_entry_keyp((struct gs_entry *)e);
}

char *gs_entry_value(struct gs_entry *e, size_t *len)
{
    *len = e->vlen;
    return gs_entry_valp(e);
}

int gs_store_set_obj(struct gs_store *s, const void *key, size_t klen, struct gs_obj *o,
                     int64_t expire_ms, struct gs_entry **out)
{
    struct gs_entry *e;
    int rc = gs_store_set(s, key, klen, (const char *)o, sizeof(*o), expire_ms, &e);
    if (rc)
        return rc;
    o->counted = gs_obj_mem(o);
    s->used_memory += o->counted;
    obj_store(e, o);
    e->is_obj = 1;
    if (out)
        *out = e;
    return 0;
}

int gs_store_move_obj(struct gs_store *s, struct gs_entry *src, const void *dst, size_t dlen,
                      int64_t expire_ms)
{
    struct gs_obj o;
    obj_load(src, &o);
    struct gs_entry *e;
    /* Setting dst does not move src (another key's entry), but it may
     * free what dst held. */
    int rc = gs_store_set(s, dst, dlen, (const char *)&o, sizeof(o), expire_ms, &e);
    if (rc)
        return rc;
    e->is_obj = 1; /* o.counted moves with the blocks: used_memory is unchanged */
    src->is_obj = 0;
    gs_store_delete_entry(s, src);
    return 0;
}

size_t gs_store_entry_mem(const struct gs_entry *e)
{
    size_t mem = alloc_cost((void *)e);
    if (e->is_obj) {
        struct gs_obj o;
        obj_load(e, &o);
        mem += o.counted;
    }
    return mem;
}

int gs_entry_type(const struct gs_entry *e)
{
    if (!e->is_obj)
        return GS_TYPE_STRING;
    struct gs_obj o;
    obj_load(e, &o);
    return o.type;
}

bool gs_entry_obj(const struct gs_entry *e, struct gs_obj *out)
{
    if (!e->is_obj)
        return false;
    obj_load(e, out);
    return true;
}

void gs_store_obj_update(struct gs_store *s, struct gs_entry *e, struct gs_obj *o)
{
    size_t mem = gs_obj_mem(o);
    s->used_memory = s->used_memory - o->counted + mem;
    o->counted = mem;
    obj_store(e, o);
    gs_entry_set_clock(e, s->clock); /* a write, as Redis's lookupKeyWrite */
    signal_modified(s, e);
}

int64_t gs_entry_expire_ms(const struct gs_entry *e)
{
    const struct gs_expire_field *f = gs_entry_expire_field((struct gs_entry *)e);
    return f ? f->expire_ms : -1;
}

int gs_store_make_room(struct gs_store *s)
{
    if (s->maxmemory == 0)
        return 0;
    while (s->used_memory > s->maxmemory) {
        if (!s->evict.ops->evicts)
            return CORE_ENOMEM;
        struct gs_entry *v = s->evict.ops->victim(&s->evict);
        if (!v)
            return CORE_ENOMEM;
        gs_store_delete_entry(s, v);
        s->evicted++;
    }
    return 0;
}

size_t gs_store_expire_cycle(struct gs_store *s, int64_t now_ms, size_t max_work)
{
    size_t removed = 0, work = 0;
    while (work < max_work && s->heap_len > 0 && s->heap[0].when <= now_ms) {
        gs_store_delete_entry(s, s->heap[0].e);
        s->expired++;
        removed++;
        work++;
    }
    /* The timer is also where the table catches up on rehashing and
     * shrinks, as Redis's serverCron does, within the same budget. */
    if (work < max_work)
        work += rehash(s, max_work - work);
    table_shrink_if_sparse(s);
    return removed;
}

size_t gs_store_due(const struct gs_store *s, int64_t now_ms, size_t max, gs_scan_fn fn, void *arg)
{
    /* Depth first over the subtree of due entries at the root (T3): each
     * report pops one index and pushes at most two, so the stack never
     * holds more than max + 1. */
    uint32_t stack[GS_STORE_DUE_MAX + 2];
    size_t top = 0, n = 0;
    if (max > GS_STORE_DUE_MAX)
        max = GS_STORE_DUE_MAX;
    if (s->heap_len > 0 && s->heap[0].when <= now_ms)
        stack[top++] = 0;
    while (top > 0 && n < max) {
        uint32_t i = stack[--top];
        fn(arg, s->heap[i].e);
        n++;
        for (uint32_t c = 2 * i + 1; c <= 2 * i + 2; c++)
            if (c < s->heap_len && s->heap[c].when <= now_ms)
                stack[top++] = c;
    }
    return n;
}

/* Reverse the bits of v: SCAN's cursor counts in reverse binary. */
static uint64_t rev64(uint64_t v)
{
    v = ((v >> 1) & 0x5555555555555555ull) | ((v & 0x5555555555555555ull) << 1);
    v = ((v >> 2) & 0x3333333333333333ull) | ((v & 0x3333333333333333ull) << 2);
    v = ((v >> 4) & 0x0f0f0f0f0f0f0f0full) | ((v & 0x0f0f0f0f0f0f0f0full) << 4);
    v = ((v >> 8) & 0x00ff00ff00ff00ffull) | ((v & 0x00ff00ff00ff00ffull) << 8);
    v = ((v >> 16) & 0x0000ffff0000ffffull) | ((v & 0x0000ffff0000ffffull) << 16);
    return (v >> 32) | (v << 32);
}

static size_t scan_bucket(struct gs_entry *e, int64_t now_ms, gs_scan_fn fn, void *arg)
{
    size_t n = 0;
    for (; e; e = e->hnext) {
        if (!is_expired(e, now_ms)) {
            fn(arg, e);
            n++;
        }
    }
    return n;
}

/* One step of Redis's dictScan: emit the bucket(s) under the cursor and
 * return the next cursor. Incrementing the cursor's reversed bits visits
 * a bucket's expansions in a bigger table right after each other, so a
 * resize between calls neither skips a bucket's keys nor starts over. */
static uint64_t scan_step(struct gs_store *s, uint64_t v, int64_t now_ms, gs_scan_fn fn, void *arg,
                          size_t *emitted)
{
    if (!rehashing(s)) {
        uint64_t m0 = s->ht[0].mask;
        *emitted += scan_bucket(s->ht[0].bucket[v & m0], now_ms, fn, arg);
        v |= ~m0;
        v = rev64(v);
        v++;
        return rev64(v);
    }
    struct table *t0 = &s->ht[0], *t1 = &s->ht[1];
    if (table_size(t0) > table_size(t1)) {
        struct table *tmp = t0;
        t0 = t1;
        t1 = tmp;
    }
    uint64_t m0 = t0->mask, m1 = t1->mask;
    *emitted += scan_bucket(t0->bucket[v & m0], now_ms, fn, arg);
    /* Emit the expansions of that bucket in the larger table. */
    do {
        *emitted += scan_bucket(t1->bucket[v & m1], now_ms, fn, arg);
        v |= ~m1;
        v = rev64(v);
        v++;
        v = rev64(v);
    } while (v & (m0 ^ m1));
    return v;
}

uint64_t gs_store_scan(struct gs_store *s, uint64_t cursor, size_t count, int64_t now_ms,
                       gs_scan_fn fn, void *arg)
{
    if (key_count(s) == 0)
        return 0;
    if (count == 0)
        count = 1;
    /* As Redis's SCAN: stop after `count` entries or 10 * count buckets,
     * whichever first, so a sparse table cannot make one call long. */
    size_t emitted = 0, steps = 0, max_steps = count > SIZE_MAX / 10 ? SIZE_MAX : count * 10;
    do {
        cursor = scan_step(s, cursor, now_ms, fn, arg, &emitted);
    } while (cursor != 0 && emitted < count && ++steps < max_steps);
    return cursor;
}

/* A random entry, live or not: a random non-empty bucket (over both
 * tables while rehashing, skipping ht[0]'s emptied prefix), then a random
 * entry of its chain. Buckets are probed at random a bounded number of
 * times, then walked from a random start, so that a nearly empty table
 * the expire cycle has not shrunk yet cannot make it loop for long. */
static struct gs_entry *random_entry(struct gs_store *s)
{
    struct gs_entry *head = NULL;
    uint64_t s0 = table_size(&s->ht[0]), s1 = table_size(&s->ht[1]);
    uint64_t lo = rehashing(s) ? (uint64_t)s->rehash_idx : 0, span = s0 + s1 - lo;
    uint64_t i = lo + next_random(s) % span;
    for (int tries = 0; !head; tries++) {
        if (tries >= 64)
            i = lo + (i + 1 - lo) % span;
        else if (tries > 0)
            i = lo + next_random(s) % span;
        head = i < s0 ? s->ht[0].bucket[i] : s->ht[1].bucket[i - s0];
    }
    size_t len = 0;
    for (struct gs_entry *e = head; e; e = e->hnext)
        len++;
    size_t pick = next_random(s) % len;
    while (pick--)
        head = head->hnext;
    return head;
}

struct gs_entry *gs_store_random(struct gs_store *s, int64_t now_ms)
{
    for (int tries = 0; tries < RANDOM_TRIES && key_count(s) > 0; tries++) {
        rehash_step(s);
        struct gs_entry *e = random_entry(s);
        if (!is_expired(e, now_ms))
            return e;
        gs_store_delete_entry(s, e);
        s->expired++;
    }
    return NULL;
}

void gs_store_clear(struct gs_store *s)
{
    /* Before anything is freed, so the hook may still look keys up. */
    if (s->on_modified)
        s->on_modified(s->on_modified_arg, NULL, 0);
    for (int t = 0; t < 2; t++) {
        struct table *tb = &s->ht[t];
        for (uint64_t i = 0; i < table_size(tb); i++) {
            struct gs_entry *e = tb->bucket[i];
            while (e) {
                struct gs_entry *next = e->hnext;
                if (e->is_obj)
                    obj_release(s, e);
                s->used_memory -= alloc_cost(e);
                free(e);
                e = next;
            }
        }
        table_release(s, tb);
    }
    s->rehash_idx = -1;
    if (s->heap) {
        s->used_memory -= alloc_cost(s->heap);
        free(s->heap);
    }
    s->heap = NULL;
    s->heap_len = s->heap_cap = 0;
    gs_evict_init(&s->evict, s->evict.policy);
}

void gs_store_stats(const struct gs_store *s, struct gs_store_stats *out)
{
    out->keys = key_count(s);
    out->keys_with_expire = s->heap_len;
    out->used_memory = s->used_memory;
    out->hits = s->hits;
    out->misses = s->misses;
    out->expired_keys = s->expired;
    out->evicted_keys = s->evicted;
}

void gs_store_reset_stats(struct gs_store *s)
{
    s->hits = s->misses = s->expired = s->evicted = 0;
}

/* ---- invariant check (tests) ---- */

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return CORE_ESTATE;                                                                    \
    } while (0)

int gs_store_check(const struct gs_store *cs)
{
    struct gs_store *s = (struct gs_store *)cs; /* read only; helpers take non-const */
    uint64_t mem = 0, n = 0, with_ttl = 0;

    CHECK(rehashing(s) == (s->ht[1].bucket != NULL)); /* T1 */
    for (int t = 0; t < 2; t++) {
        struct table *tb = &s->ht[t];
        uint64_t used = 0;
        if (tb->bucket)
            mem += alloc_cost(tb->bucket);
        for (uint64_t i = 0; i < table_size(tb); i++) {
            if (t == 0 && rehashing(s) && (int64_t)i < s->rehash_idx)
                CHECK(tb->bucket[i] == NULL);
            for (struct gs_entry *e = tb->bucket[i]; e; e = e->hnext) {
                CHECK((hash_entry(s, e) & tb->mask) == i);
                CHECK(gs_entry_valp(e)[e->vlen] == '\0'); /* E2 */
                mem += alloc_cost(e);
                if (e->is_obj) { /* E4: the collection's count is exact */
                    struct gs_obj o;
                    CHECK(e->vlen == sizeof(o));
                    obj_load(e, &o);
                    CHECK(o.type != GS_TYPE_STRING && o.ptr != NULL);
                    CHECK(o.counted == gs_obj_mem(&o) && o.counted == gs_obj_recount(&o));
                    CHECK(gs_obj_len(&o) > 0); /* empty collections are deleted */
                    mem += o.counted;
                }
                used++;
                struct gs_expire_field *f = gs_entry_expire_field(e);
                if (f && f->expire_ms >= 0) { /* store.h invariant 2, T3 */
                    with_ttl++;
                    CHECK(f->heap_idx < s->heap_len && s->heap[f->heap_idx].e == e &&
                          s->heap[f->heap_idx].when == f->expire_ms);
                } else if (f) {
                    CHECK(f->heap_idx == GS_NO_HEAP_IDX);
                }
                /* Each entry is on one of the policy's lists: its
                 * neighbours point back at it. */
                CHECK(e->link.prev->next == &e->link && e->link.next->prev == &e->link);
            }
        }
        CHECK(used == tb->used);
        n += used;
    }
    CHECK(n == key_count(s));
    CHECK(with_ttl == s->heap_len);
    for (uint32_t i = 1; i < s->heap_len; i++)
        CHECK(s->heap[(i - 1) / 2].when <= s->heap[i].when);
    if (s->heap)
        mem += alloc_cost(s->heap);
    CHECK(mem == s->used_memory); /* invariant 3 */
    if (n == 0)                   /* T4 */
        CHECK(!s->ht[0].bucket && !s->heap && s->used_memory == 0);

    /* S2: the lists hold exactly the store's entries. */
    uint64_t listed = 0;
    for (int l = 0; l < GS_SEG_COUNT; l++) {
        uint64_t len = 0;
        for (struct core_list *p = s->evict.list[l].next; p != &s->evict.list[l]; p = p->next) {
            CHECK(p->next->prev == p);
            if (s->evict.policy == GS_EVICT_SLRU)
                CHECK((gs_evict_entry_of(p)->evict_bits & 1u) == (unsigned)l);
            if (++len > n)
                return CORE_ESTATE;
        }
        CHECK(len == s->evict.count[l]);
        listed += len;
    }
    CHECK(listed == n);
    if (s->evict.policy == GS_EVICT_SLRU) /* S1 */
        CHECK(s->evict.count[GS_SEG_PROTECTED] <= n - n / 5);
    return 0;
}
