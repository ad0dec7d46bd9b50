/*
 * The key space of one shard: a hash table keyed by the key bytes (binary
 * safe), string values, optional expiry, exact memory accounting and
 * eviction under a memory limit through a pluggable policy (evict.h).
 *
 * A store is one object with no globals, so that a node can hold several
 * (one per shard or per core) later without change. It is not
 * thread-safe: one event loop owns it.
 *
 * Time is passed in (now_ms, Unix milliseconds) rather than read inside, so
 * tests drive expiry deterministically and the server reads the clock once
 * per event-loop iteration.
 *
 * Invariants:
 *  1. Every entry is in the hash table exactly once, and in exactly one
 *     eviction-policy list.
 *  2. An entry with expire_ms >= 0 is in the expiry index; one with -1 is
 *     not.
 *  3. used_memory equals, over every block the store owns (entries, the
 *     table's bucket arrays, the expiry index, the collections' blocks), what the allocator holds
 *     for it: malloc_usable_size + its 8-byte chunk header (see
 *     gs_store_entry_cost). It is 0 for an empty store.
 *  4. No lookup returns an entry whose expire_ms <= now_ms: such an entry
 *     is deleted on access (lazy expiry) and counted in expired_keys.
 */
#ifndef GS_STORE_H
#define GS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gs_store;
struct gs_entry;

/* The eviction policies; GS_EVICT_NOEVICTION refuses writes over the limit
 * (Redis's "noeviction"). Names as accepted by CONFIG SET
 * maxmemory-policy: "noeviction", "slru" (the default), "allkeys-lru"
 * (plain LRU, for comparison). */
enum gs_evict_policy {
    GS_EVICT_NOEVICTION = 0,
    GS_EVICT_SLRU = 1,
    GS_EVICT_LRU = 2,
};

struct gs_store_config {
    uint64_t maxmemory;          /* bytes; 0 = no limit */
    enum gs_evict_policy policy; /* applies when maxmemory > 0 */
    uint64_t hash_seed;          /* per process, for core_hash64 */
};

struct gs_store_stats {
    uint64_t keys;             /* live entries */
    uint64_t keys_with_expire; /* entries with a TTL */
    uint64_t used_memory;      /* invariant 3 */
    uint64_t hits;             /* lookups that found a live key */
    uint64_t misses;           /* lookups that found none (or an expired one) */
    uint64_t expired_keys;     /* removed because their TTL passed */
    uint64_t evicted_keys;     /* removed by the eviction policy */
};

/* Lookup flags. */
enum {
    GS_LOOKUP_NOTOUCH = 1 << 0, /* do not count a hit/miss or promote (TYPE, TTL, SCAN) */
    GS_LOOKUP_STAMP = 1 << 1,   /* with NOTOUCH: stamp the access clock all the same */
    /* Redis's lookupKeyWrite: no hit/miss, no promotion, but the key's
     * access clock is stamped (OBJECT IDLETIME is 0 after a write command
     * that found the key, even one that changed nothing). */
    GS_LOOKUP_WRITE = GS_LOOKUP_NOTOUCH | GS_LOOKUP_STAMP,
};

/* Create an empty store. Returns 0 or CORE_ENOMEM; *out is owned by the
 * caller and released with gs_store_free. */
int gs_store_new(struct gs_store **out, const struct gs_store_config *cfg);
void gs_store_free(struct gs_store *s);

/* Change the limit or policy at run time (CONFIG SET). Entries keep their
 * data; a change of policy rebuilds the policy's lists. */
void gs_store_configure(struct gs_store *s, uint64_t maxmemory, enum gs_evict_policy policy);

/* Find a live entry. An expired one is deleted and NULL returned. Unless
 * GS_LOOKUP_NOTOUCH, counts a hit or a miss and tells the eviction policy
 * of the hit (SLRU promotes); unless NOTOUCH without STAMP, stamps the
 * entry's access clock (gs_store_tick). The entry stays owned by the store and is
 * valid until the next call that modifies the store. */
struct gs_entry *gs_store_lookup(struct gs_store *s, const void *key, size_t klen, int64_t now_ms,
                                 unsigned flags);

/* The access clock (OBJECT IDLETIME): the store keeps Redis's 24-bit LRU
 * clock, seconds of now_ms mod 2^24, of the latest time given here or to
 * a touching lookup. An insert or overwrite (gs_store_set and the calls
 * built on it) and a lookup without GS_LOOKUP_NOTOUCH stamp the entry
 * with it; nothing else does (resizing and a new TTL keep the stamp).
 * The server ticks once per command, so that a write that looks nothing
 * up is stamped with its own time. */
void gs_store_tick(struct gs_store *s, int64_t now_ms);

/* Seconds since e was last stamped, as of the latest tick, with Redis's
 * wrap-around rule (estimateObjectIdleTime): stamps older than 2^24 s
 * (194 days) alias. */
uint64_t gs_store_idle_seconds(const struct gs_store *s, struct gs_entry *e);

/* Insert or overwrite key with a copy of val. expire_ms is an absolute Unix
 * time in ms, or -1 for none. Overwriting keeps the entry's place in the
 * eviction policy as a hit would. Does not evict (see gs_store_make_room).
 * Returns 0, CORE_ENOMEM, or CORE_ETOOBIG (key over 512 MB - 1 or value
 * over 2 GB - 1), with nothing changed on failure; on success *out (if not
 * NULL) is the entry. Entries found earlier may have moved: look them up
 * again. set takes no clock, so a key whose TTL has passed but which is
 * still stored is overwritten like a live one; a caller that looks the key
 * up first (as SET's NX/XX/GET need anyway) gets it removed and counted in
 * expired_keys instead. val must not point into the store. */
int gs_store_set(struct gs_store *s, const void *key, size_t klen, const void *val, size_t vlen,
                 int64_t expire_ms, struct gs_entry **out);

/* Resize a string entry's value to newlen bytes (NULL for a collection), keeping the first
 * min(old, new) bytes; new bytes are zero, and value[newlen] is a NUL (not
 * counted in the length), so INCR may parse it as a C string. The entry
 * may move: *e is updated. Returns a pointer to the (writable) value, or
 * NULL (out of memory, or newlen over 2 GB - 1) with *e unchanged. Used by
 * APPEND, SETRANGE, INCR. Does not evict. */
char *gs_store_resize_value(struct gs_store *s, struct gs_entry **e, size_t newlen);

/* Delete key. Returns 1 if it existed (and was live), else 0. */
int gs_store_delete(struct gs_store *s, const void *key, size_t klen, int64_t now_ms);

/* UNLINK: delete key like gs_store_delete, but a collection of more than
 * 64 elements (Redis's lazyfree threshold) is freed by a background
 * thread of the store, off the request path. Its memory leaves
 * used_memory at once (the store no longer owns it); the thread is
 * started on first use and stopped, after freeing what is queued, by
 * gs_store_free. Returns 1 if the key existed (and was live), else 0. */
int gs_store_unlink(struct gs_store *s, const void *key, size_t klen, int64_t now_ms);

/* Collections queued by gs_store_unlink and not yet freed (INFO's
 * lazyfree_pending_objects). */
uint64_t gs_store_lazyfree_pending(const struct gs_store *s);

/* Delete an entry found by lookup (it is freed; e is invalid after). */
void gs_store_delete_entry(struct gs_store *s, struct gs_entry *e);

/* Set or clear (-1) an entry's absolute expiry time in Unix ms. An entry
 * that never had a TTL grows by a small expire field when it gets one, so
 * it may move: *e is updated (like gs_store_resize_value). Returns 0, or
 * CORE_ENOMEM with nothing changed (the entry or the expiry index could
 * not grow). Clearing never fails. */
int gs_store_set_expire(struct gs_store *s, struct gs_entry **e, int64_t expire_ms);

/* ---- typed values (gridsync/types/value.h) ----
 * An entry holds either a string (the value bytes) or a collection (a
 * struct gs_obj whose blocks the entry owns). The store frees a
 * collection with its entry (DEL, overwrite by gs_store_set, expiry,
 * eviction, clear), and used_memory includes the collection's blocks
 * (invariant 3), kept exact by gs_store_obj_update after every change. */
struct gs_obj;

/* Insert or overwrite key with the collection o (ownership of o's blocks
 * passes to the store on success; o->counted is set). As gs_store_set
 * otherwise, including freeing whatever the key held. */
int gs_store_set_obj(struct gs_store *s, const void *key, size_t klen, struct gs_obj *o,
                     int64_t expire_ms, struct gs_entry **out);

/* RENAME of a collection: move src's collection (not a copy) to key dst
 * with this expiry, replacing whatever dst held, and delete src. dst must
 * differ from src's key. Returns 0, or CORE_ENOMEM with nothing changed. */
int gs_store_move_obj(struct gs_store *s, struct gs_entry *src, const void *dst, size_t dlen,
                      int64_t expire_ms);

/* What the entry costs in used_memory: its block and, for a collection,
 * every block of the collection (MEMORY USAGE). */
size_t gs_store_entry_mem(const struct gs_entry *e);

/* The entry's enum gs_type (GS_TYPE_STRING for a string). */
int gs_entry_type(const struct gs_entry *e);

/* Copy out an entry's collection; false for a string entry. The copy's
 * pointers belong to the store: change the collection through them, then
 * hand the copy back with gs_store_obj_update before anything else
 * touches the store. */
bool gs_entry_obj(const struct gs_entry *e, struct gs_obj *out);

/* Store a changed collection back into its entry (the encoding or its
 * pointer may have changed), recount its memory and report the change
 * to the modified hook. A collection that became empty must be deleted
 * instead (gs_store_delete_entry). */
void gs_store_obj_update(struct gs_store *s, struct gs_entry *e, struct gs_obj *o);

/* Entry accessors. Pointers stay valid until the store is modified. The
 * value is followed by a NUL byte that its length does not count.
 * gs_entry_value is for string entries (see gs_entry_type). */
const char *gs_entry_key(const struct gs_entry *e, size_t *len);
char *gs_entry_value(struct gs_entry *e, size_t *len);
int64_t gs_entry_expire_ms(const struct gs_entry *e); /* -1 when none */

/* Evict entries (per the policy) until used_memory <= maxmemory. Call
 * before a command that may add memory, as Redis does. Returns 0, or
 * CORE_ENOMEM when over the limit and nothing can be evicted (policy
 * noeviction, or the store is empty). */
int gs_store_make_room(struct gs_store *s);

/* Active expiry: remove expired entries, doing at most max_work units of
 * work (an entry examined or removed is one unit; only due entries are
 * examined, earliest first). Budget left over moves hash-table buckets of
 * an unfinished rehash (one unit each), and a sparse table starts
 * shrinking here (never on delete). Returns the number removed: fewer
 * than max_work means no more entries are due. Called from a timer;
 * bounded so that a million keys expiring at once cost many short cycles,
 * not one long pause. */
size_t gs_store_expire_cycle(struct gs_store *s, int64_t now_ms, size_t max_work);

/* Incremental iteration in Redis's SCAN contract: start with cursor 0; the
 * returned cursor is 0 when the iteration is complete. Every key present
 * for the whole iteration is visited at least once, even across table
 * resizes; a key may be visited more than once. fn is called for each
 * live entry visited; a call stops once it has emitted `count` entries or
 * visited 10 * count buckets (as Redis's SCAN). fn must not modify the
 * store. Expired entries are skipped, not deleted. */
typedef void (*gs_scan_fn)(void *arg, const struct gs_entry *e);
uint64_t gs_store_scan(struct gs_store *s, uint64_t cursor, size_t count, int64_t now_ms,
                       gs_scan_fn fn, void *arg);

/* Due entries, without removing them: call fn for up to max entries whose
 * TTL has passed at now_ms (expire_ms <= now_ms), each once, in no set
 * order (it walks the due top of the expiry heap). For a replicated store,
 * where only the leader decides that a key has expired and its deletion
 * goes through the log (cluster mode). The store must not change during
 * the call. Returns how many were reported (max is capped at
 * GS_STORE_DUE_MAX); fewer than max means no more are due. */
#define GS_STORE_DUE_MAX 256
size_t gs_store_due(const struct gs_store *s, int64_t now_ms, size_t max, gs_scan_fn fn, void *arg);

/* A uniformly-ish random live entry (a random bucket, then a random entry
 * of its chain), or NULL if the store is empty. Expired entries it picks
 * are deleted (lazy expiry) and it picks again, up to 100 times: it may
 * also return NULL when nearly every key has expired and the expire cycle
 * has not caught up yet. */
struct gs_entry *gs_store_random(struct gs_store *s, int64_t now_ms);

/* Remove every entry; the counters (hits, ...) are kept, as Redis's
 * FLUSHALL keeps them. */
void gs_store_clear(struct gs_store *s);

/* The "key modified" hook (WATCH, gridsync/commands/multi.h): fn(arg, key, klen)
 * is called for every change to a key: gs_store_set, resize_value,
 * set_expire, and every removal (delete, lazy and active expiry,
 * eviction), before the entry is freed. gs_store_clear calls it once with
 * key NULL before it removes anything. fn may look keys up but must not
 * otherwise modify the store. fn NULL removes the hook (the default); the
 * owner installs it only while someone watches, so the write path pays a
 * single branch otherwise. */
typedef void gs_store_modified_fn(void *arg, const char *key, size_t klen);
void gs_store_on_modified(struct gs_store *s, gs_store_modified_fn *fn, void *arg);

/* For a caller that wrote into gs_entry_value in place (SETBIT,
 * SETRANGE): report the change to the hook above. */
void gs_store_signal_modified(struct gs_store *s, struct gs_entry *e);

void gs_store_stats(const struct gs_store *s, struct gs_store_stats *out);

/* Reset hits, misses, expired_keys and evicted_keys (CONFIG RESETSTAT). */
void gs_store_reset_stats(struct gs_store *s);

/* Verify every invariant above and the internal ones of store.c (chains,
 * rehash state, expiry heap order, policy lists and counts, used_memory
 * recomputed from scratch). O(keys): for tests and debugging, never on a
 * request path. Returns 0 or CORE_ESTATE. */
int gs_store_check(const struct gs_store *s);

/* Bytes one entry with these key and value lengths (and no TTL) costs in
 * used_memory, predicted with glibc's rule for blocks below its mmap
 * threshold (128 KB by default): max(32, round_up(request + 8, 16)), the
 * usable size plus the 8-byte chunk header. The store itself counts each
 * block with malloc_usable_size + 8 from the block's own pointer, which is
 * the truth; it can exceed this prediction by 16 bytes when glibc reuses
 * a free chunk too big to split, and differs above the threshold or under
 * another allocator (ASan's). */
size_t gs_store_entry_cost(size_t klen, size_t vlen);

#endif
