/*
 * The store: set/get/overwrite/delete of binary keys, values resized both
 * ways, exact memory accounting, stats, maxmemory with eviction, SCAN's
 * contract across resizes, random, clear, and a randomized run checked
 * against a simple model and gs_store_check after every step.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/error.h"
#include "gridsync/store/entry.h"
#include "gridsync/store/store.h"

#include "alloc_count.h"

#define NOW 1000000

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

static struct gs_store *new_store(uint64_t maxmemory, enum gs_evict_policy policy)
{
    struct gs_store *s;
    struct gs_store_config cfg = {.maxmemory = maxmemory, .policy = policy, .hash_seed = 42};
    assert_int_equal(gs_store_new(&s, &cfg), 0);
    return s;
}

static struct gs_store_stats stats_of(struct gs_store *s)
{
    struct gs_store_stats st;
    gs_store_stats(s, &st);
    return st;
}

static void assert_value(struct gs_store *s, const void *key, size_t klen, const void *val,
                         size_t vlen)
{
    struct gs_entry *e = gs_store_lookup(s, key, klen, NOW, GS_LOOKUP_NOTOUCH);
    assert_non_null(e);
    size_t len;
    char *v = gs_entry_value(e, &len);
    assert_int_equal(len, vlen);
    assert_memory_equal(v, val, vlen);
    assert_int_equal(v[len], '\0');
}

static void key_of(char *buf, size_t cap, unsigned i, size_t *len)
{
    *len = (size_t)snprintf(buf, cap, "key:%09u", i);
}

static void test_header_is_compact(void **state)
{
    assert_int_equal(sizeof(struct gs_entry), 32);
    /* The benchmark's shape: 13-byte key, 128-byte value, one 192-byte
     * glibc chunk. */
    assert_int_equal(gs_store_entry_cost(13, 128), 192);
    assert_int_equal(gs_store_entry_cost(0, 0), 48);
}

static void test_set_get_overwrite_delete_binary(void **state)
{
    struct gs_store *s = new_store(0, GS_EVICT_SLRU);
    const char k1[] = {'a', '\0', 'b'};
    const char k2[] = {'a', '\0', 'c'};
    const char v1[] = {'x', '\0', 'y', '\0'};
    struct gs_entry *e;

    assert_int_equal(gs_store_set(s, k1, sizeof(k1), v1, sizeof(v1), -1, &e), 0);
    size_t kl;
    assert_memory_equal(gs_entry_key(e, &kl), k1, sizeof(k1));
    assert_int_equal(kl, sizeof(k1));
    assert_int_equal(gs_entry_expire_ms(e), -1);
    assert_value(s, k1, sizeof(k1), v1, sizeof(v1));
    assert_null(gs_store_lookup(s, k2, sizeof(k2), NOW, 0)); /* differs after the NUL */
    assert_null(gs_store_lookup(s, k1, 2, NOW, 0));          /* a prefix is another key */

    /* Overwrite with shorter, then much longer values. */
    assert_int_equal(gs_store_set(s, k1, sizeof(k1), "z", 1, -1, NULL), 0);
    assert_value(s, k1, sizeof(k1), "z", 1);
    char big[5000];
    memset(big, 'q', sizeof(big));
    assert_int_equal(gs_store_set(s, k1, sizeof(k1), big, sizeof(big), -1, NULL), 0);
    assert_value(s, k1, sizeof(k1), big, sizeof(big));
    assert_int_equal(gs_store_set(s, k2, sizeof(k2), "", 0, -1, NULL), 0);
    assert_value(s, k2, sizeof(k2), "", 0);
    assert_int_equal(stats_of(s).keys, 2);
    assert_int_equal(gs_store_check(s), 0);

    assert_int_equal(gs_store_delete(s, k1, sizeof(k1), NOW), 1);
    assert_int_equal(gs_store_delete(s, k1, sizeof(k1), NOW), 0);
    assert_null(gs_store_lookup(s, k1, sizeof(k1), NOW, 0));
    assert_value(s, k2, sizeof(k2), "", 0);
    e = gs_store_lookup(s, k2, sizeof(k2), NOW, 0);
    gs_store_delete_entry(s, e);
    assert_int_equal(stats_of(s).keys, 0);
    assert_int_equal(gs_store_check(s), 0);
    gs_store_free(s);
}

static void test_empty_key_and_value(void **state)
{
    struct gs_store *s = new_store(0, GS_EVICT_SLRU);
    assert_int_equal(gs_store_set(s, "", 0, "", 0, -1, NULL), 0);
    assert_value(s, "", 0, "", 0);
    assert_int_equal(gs_store_set(s, "x", 1, "", 0, -1, NULL), 0);
    assert_int_equal(gs_store_delete(s, "", 0, NOW), 1);
    assert_value(s, "x", 1, "", 0);
    assert_int_equal(gs_store_check(s), 0);
    gs_store_free(s);
}

/* A limit below even the bucket array evicts everything; the empty store
 * then owns nothing, so it is within any limit. */
static void test_make_room_to_empty(void **state)
{
    struct gs_store *s = new_store(0, GS_EVICT_SLRU);
    char k[32];
    size_t kl;
    for (unsigned i = 0; i < 1000; i++) {
        key_of(k, sizeof(k), i, &kl);
        assert_int_equal(gs_store_set(s, k, kl, "v", 1, i % 2 ? NOW + 5 : -1, NULL), 0);
    }
    gs_store_configure(s, 1, GS_EVICT_SLRU);
    assert_int_equal(gs_store_make_room(s), 0);
    struct gs_store_stats st = stats_of(s);
    assert_int_equal(st.keys, 0);
    assert_int_equal(st.evicted_keys, 1000);
    assert_int_equal(st.used_memory, 0);
    assert_int_equal(gs_store_check(s), 0);
    gs_store_free(s);
}

static void test_too_big(void **state)
{
    struct gs_store *s = new_store(0, GS_EVICT_SLRU);
    /* Lengths are checked before the bytes are read. */
    assert_int_equal(gs_store_set(s, "k", GS_KEY_MAX + 1, "v", 1, -1, NULL), CORE_ETOOBIG);
    assert_int_equal(gs_store_set(s, "k", 1, "v", GS_VALUE_MAX + 1, -1, NULL), CORE_ETOOBIG);
    assert_int_equal(stats_of(s).keys, 0);
    gs_store_free(s);
}

static void test_stats_hits_misses(void **state)
{
    struct gs_store *s = new_store(0, GS_EVICT_SLRU);
    assert_int_equal(gs_store_set(s, "a", 1, "1", 1, -1, NULL), 0);
    assert_non_null(gs_store_lookup(s, "a", 1, NOW, 0));
    assert_non_null(gs_store_lookup(s, "a", 1, NOW, 0));
    assert_null(gs_store_lookup(s, "b", 1, NOW, 0));
    assert_non_null(gs_store_lookup(s, "a", 1, NOW, GS_LOOKUP_NOTOUCH));
    assert_null(gs_store_lookup(s, "b", 1, NOW, GS_LOOKUP_NOTOUCH));
    struct gs_store_stats st = stats_of(s);
    assert_int_equal(st.hits, 2);
    assert_int_equal(st.misses, 1);
    assert_int_equal(st.keys, 1);
    assert_int_equal(st.keys_with_expire, 0);
    gs_store_reset_stats(s);
    st = stats_of(s);
    assert_int_equal(st.hits + st.misses + st.expired_keys + st.evicted_keys, 0);
    assert_int_equal(st.keys, 1);
    gs_store_free(s);
}

static void test_resize_value(void **state)
{
    struct gs_store *s = new_store(0, GS_EVICT_SLRU);
    struct gs_entry *e;
    assert_int_equal(gs_store_set(s, "k", 1, "hello", 5, NOW + 5000, &e), 0);

    /* Grow: old bytes kept, new bytes zero, NUL after. */
    char *v = gs_store_resize_value(s, &e, 10000);
    assert_non_null(v);
    assert_memory_equal(v, "hello", 5);
    for (size_t i = 5; i < 10000; i++)
        assert_int_equal(v[i], 0);
    assert_int_equal(v[10000], '\0');
    memcpy(v + 9995, "world", 5);
    assert_int_equal(gs_entry_expire_ms(e), NOW + 5000); /* TTL survives the move */
    assert_int_equal(gs_store_check(s), 0);

    /* Shrink: a prefix kept, NUL-terminated. */
    v = gs_store_resize_value(s, &e, 3);
    assert_non_null(v);
    assert_value(s, "k", 1, "hel", 3);
    assert_ptr_equal(gs_store_lookup(s, "k", 1, NOW, GS_LOOKUP_NOTOUCH), e);
    assert_int_equal(gs_store_check(s), 0);

    v = gs_store_resize_value(s, &e, 0);
    assert_non_null(v);
    assert_value(s, "k", 1, "", 0);
    assert_int_equal(gs_store_check(s), 0);
    gs_store_free(s);
}

static void test_used_memory_exact(void **state)
{
    struct gs_store *s = new_store(0, GS_EVICT_SLRU);
    uint64_t empty = stats_of(s).used_memory;
    assert_int_equal(empty, 0);
    char k[32], v[128];
    size_t kl;
    memset(v, 'v', sizeof(v));
    for (unsigned i = 0; i < 20000; i++) {
        key_of(k, sizeof(k), i, &kl);
        assert_int_equal(
            gs_store_set(s, k, kl, v, sizeof(v), i % 3 ? -1 : NOW + 1000 + (int64_t)i, NULL), 0);
    }
    assert_int_equal(gs_store_check(s), 0);
    struct gs_store_stats st = stats_of(s);
    assert_int_equal(st.keys, 20000);
    assert_true(st.used_memory > 20000ull * gs_store_entry_cost(kl, sizeof(v)) - 1);
    /* Overwrites of every shape, then delete everything. */
    for (unsigned i = 0; i < 20000; i += 7) {
        key_of(k, sizeof(k), i, &kl);
        assert_int_equal(gs_store_set(s, k, kl, v, i % 128, i % 2 ? -1 : NOW + 5, NULL), 0);
    }
    assert_int_equal(gs_store_check(s), 0);
    for (unsigned i = 0; i < 20000; i++) {
        key_of(k, sizeof(k), i, &kl);
        assert_int_equal(gs_store_delete(s, k, kl, NOW), 1);
        if (i % 1000 == 0)
            assert_int_equal(gs_store_check(s), 0);
    }
    st = stats_of(s);
    assert_int_equal(st.keys, 0);
    assert_int_equal(st.keys_with_expire, 0);
    assert_int_equal(st.used_memory, empty);
    assert_int_equal(gs_store_check(s), 0);
    gs_store_free(s);
}

/* Accounting matches the allocator: without sanitizers, glibc's chunk
 * model is what malloc_usable_size reports. */
static void test_entry_cost_matches_allocator(void **state)
{
#if UNDER_ASAN
    skip(); /* ASan's allocator reports the requested size */
#else
    struct gs_store *s = new_store(0, GS_EVICT_SLRU);
    char v[3000];
    memset(v, 1, sizeof(v));
    for (size_t vlen = 0; vlen < sizeof(v); vlen += 37) {
        assert_int_equal(gs_store_set(s, "key", 3, v, vlen, -1, NULL), 0);
        /* glibc may hand out a free chunk up to 16 bytes bigger than the
         * request's size class (a remainder too small to split), which the
         * store counts and the model cannot know. */
        struct gs_entry *e = gs_store_lookup(s, "key", 3, NOW, GS_LOOKUP_NOTOUCH);
        size_t real = malloc_usable_size(e) + sizeof(size_t), model = gs_store_entry_cost(3, vlen);
        assert_true(real >= model && real <= model + 16);
        assert_int_equal(gs_store_delete(s, "key", 3, NOW), 1);
    }
    gs_store_free(s);
#endif
}

static void test_maxmemory_evicts(void **state)
{
    struct gs_store *s = new_store(0, GS_EVICT_SLRU);
    char k[32], v[100];
    size_t kl;
    memset(v, 'v', sizeof(v));
    uint64_t limit = 200 * 1024;
    gs_store_configure(s, limit, GS_EVICT_SLRU);
    for (unsigned i = 0; i < 10000; i++) {
        assert_int_equal(gs_store_make_room(s), 0);
        assert_true(stats_of(s).used_memory <= limit);
        key_of(k, sizeof(k), i, &kl);
        assert_int_equal(gs_store_set(s, k, kl, v, sizeof(v), -1, NULL), 0);
    }
    assert_int_equal(gs_store_make_room(s), 0);
    struct gs_store_stats st = stats_of(s);
    assert_true(st.used_memory <= limit);
    assert_true(st.evicted_keys > 0);
    assert_int_equal(st.keys + st.evicted_keys, 10000);
    /* The last key written survives; the first went first. */
    key_of(k, sizeof(k), 9999, &kl);
    assert_non_null(gs_store_lookup(s, k, kl, NOW, 0));
    key_of(k, sizeof(k), 0, &kl);
    assert_null(gs_store_lookup(s, k, kl, NOW, 0));
    assert_int_equal(gs_store_check(s), 0);

    /* noeviction refuses instead. */
    gs_store_configure(s, limit / 2, GS_EVICT_NOEVICTION);
    uint64_t keys = stats_of(s).keys;
    assert_int_equal(gs_store_make_room(s), CORE_ENOMEM);
    assert_int_equal(stats_of(s).keys, keys);
    assert_int_equal(gs_store_check(s), 0);

    /* Back to LRU: the order survives the switch, eviction resumes. */
    gs_store_configure(s, limit / 2, GS_EVICT_LRU);
    assert_int_equal(gs_store_check(s), 0);
    assert_int_equal(gs_store_make_room(s), 0);
    assert_true(stats_of(s).used_memory <= limit / 2);
    key_of(k, sizeof(k), 9999, &kl);
    assert_non_null(gs_store_lookup(s, k, kl, NOW, 0));
    assert_int_equal(gs_store_check(s), 0);

    /* No limit: nothing to do. */
    gs_store_configure(s, 0, GS_EVICT_NOEVICTION);
    assert_int_equal(gs_store_make_room(s), 0);
    gs_store_free(s);
}

/* ---- SCAN ---- */

struct seen {
    uint8_t *count; /* per key index */
    unsigned n;
};

static void on_scan(void *arg, const struct gs_entry *e)
{
    struct seen *sn = arg;
    size_t kl;
    const char *k = gs_entry_key(e, &kl);
    char buf[32];
    assert_true(kl < sizeof(buf));
    memcpy(buf, k, kl);
    buf[kl] = '\0';
    unsigned i = (unsigned)strtoul(buf + 4, NULL, 10);
    assert_true(i < sn->n);
    if (sn->count[i] < 255)
        sn->count[i]++;
}

/* Keys 0..base-1 exist for the whole scan; keys added during it (which
 * grow the table several times) may or may not be seen. */
static void test_scan_across_growth(void **state)
{
    struct gs_store *s = new_store(0, GS_EVICT_SLRU);
    const unsigned base = 1000, total = 60000;
    char k[32];
    size_t kl;
    for (unsigned i = 0; i < base; i++) {
        key_of(k, sizeof(k), i, &kl);
        assert_int_equal(gs_store_set(s, k, kl, "v", 1, -1, NULL), 0);
    }
    struct seen sn = {.count = calloc(total, 1), .n = total};
    uint64_t cursor = 0;
    unsigned next = base, calls = 0;
    do {
        cursor = gs_store_scan(s, cursor, 10, NOW, on_scan, &sn);
        /* Grow between calls: a few hundred inserts per call walk the
         * table through several doublings while the scan runs. */
        for (unsigned j = 0; j < 300 && next < total; j++, next++) {
            key_of(k, sizeof(k), next, &kl);
            assert_int_equal(gs_store_set(s, k, kl, "v", 1, -1, NULL), 0);
        }
        assert_true(++calls < 1000000);
    } while (cursor != 0);
    assert_true(next > base * 8); /* the table did grow during the scan */
    for (unsigned i = 0; i < base; i++)
        assert_true(sn.count[i] >= 1);
    free(sn.count);
    gs_store_free(s);
}

/* Shrinking during a scan (deletes, then expire cycles shrink the table). */
static void test_scan_across_shrink(void **state)
{
    struct gs_store *s = new_store(0, GS_EVICT_SLRU);
    const unsigned total = 40000, keep = 500;
    char k[32];
    size_t kl;
    for (unsigned i = 0; i < total; i++) {
        key_of(k, sizeof(k), i, &kl);
        assert_int_equal(gs_store_set(s, k, kl, "v", 1, -1, NULL), 0);
    }
    struct seen sn = {.count = calloc(total, 1), .n = total};
    uint64_t cursor = 0;
    unsigned next_del = keep, calls = 0;
    do {
        cursor = gs_store_scan(s, cursor, 20, NOW, on_scan, &sn);
        for (unsigned j = 0; j < 2000 && next_del < total; j++, next_del++) {
            key_of(k, sizeof(k), next_del, &kl);
            assert_int_equal(gs_store_delete(s, k, kl, NOW), 1);
        }
        gs_store_expire_cycle(s, NOW, 1000); /* shrinks and rehashes */
        assert_true(++calls < 1000000);
    } while (cursor != 0);
    for (unsigned i = 0; i < keep; i++)
        assert_true(sn.count[i] >= 1);
    assert_int_equal(gs_store_check(s), 0);
    free(sn.count);
    gs_store_free(s);
}

static void test_scan_skips_expired_and_empty(void **state)
{
    struct gs_store *s = new_store(0, GS_EVICT_SLRU);
    struct seen sn = {.count = calloc(10, 1), .n = 10};
    assert_int_equal(gs_store_scan(s, 0, 10, NOW, on_scan, &sn), 0);
    assert_int_equal(gs_store_set(s, "key:1", 5, "v", 1, NOW - 1, NULL), 0);
    assert_int_equal(gs_store_set(s, "key:2", 5, "v", 1, NOW + 1, NULL), 0);
    uint64_t c = 0;
    do
        c = gs_store_scan(s, c, 10, NOW, on_scan, &sn);
    while (c != 0);
    assert_int_equal(sn.count[1], 0);
    assert_int_equal(sn.count[2], 1);
    assert_int_equal(stats_of(s).keys, 2); /* skipped, not deleted */
    free(sn.count);
    gs_store_free(s);
}

static void test_random(void **state)
{
    struct gs_store *s = new_store(0, GS_EVICT_SLRU);
    assert_null(gs_store_random(s, NOW));
    char k[32];
    size_t kl;
    unsigned hits[100] = {0};
    for (unsigned i = 0; i < 100; i++) {
        key_of(k, sizeof(k), i, &kl);
        /* Every other key already expired. */
        assert_int_equal(gs_store_set(s, k, kl, "v", 1, i % 2 ? NOW - 1 : -1, NULL), 0);
    }
    for (int r = 0; r < 5000; r++) {
        struct gs_entry *e = gs_store_random(s, NOW);
        assert_non_null(e);
        assert_int_equal(gs_entry_expire_ms(e), -1);
        char buf[32];
        const char *kp = gs_entry_key(e, &kl);
        memcpy(buf, kp, kl);
        buf[kl] = 0;
        hits[strtoul(buf + 4, NULL, 10)]++;
    }
    for (unsigned i = 0; i < 100; i += 2)
        assert_true(hits[i] > 0); /* every live key comes up */
    assert_int_equal(gs_store_check(s), 0);
    gs_store_free(s);
}

static void test_clear(void **state)
{
    struct gs_store *s = new_store(0, GS_EVICT_SLRU);
    char k[32];
    size_t kl;
    for (unsigned i = 0; i < 5000; i++) {
        key_of(k, sizeof(k), i, &kl);
        assert_int_equal(gs_store_set(s, k, kl, "v", 1, i % 2 ? NOW + 10 : -1, NULL), 0);
    }
    assert_non_null(gs_store_lookup(s, "key:000000002", 13, NOW, 0));
    gs_store_clear(s);
    struct gs_store_stats st = stats_of(s);
    assert_int_equal(st.keys, 0);
    assert_int_equal(st.used_memory, 0);
    assert_int_equal(st.hits, 1); /* FLUSHALL keeps the counters, as Redis */
    assert_int_equal(gs_store_check(s), 0);
    assert_int_equal(gs_store_set(s, "a", 1, "b", 1, -1, NULL), 0);
    assert_int_equal(gs_store_check(s), 0);
    gs_store_free(s);
}

/* ---- allocations on the request path ----
 *
 * The test binary counts its allocations (alloc_count.h), so every
 * malloc/calloc/realloc the store makes is seen. */

static void test_no_allocation_on_get(void **state)
{
    struct gs_store *s = new_store(0, GS_EVICT_SLRU);
    char k[32], v[128];
    size_t kl;
    memset(v, 'v', sizeof(v));
    /* 5000 keys: the table is mid-rehash at the end, so lookups below
     * also move buckets. */
    for (unsigned i = 0; i < 5000; i++) {
        key_of(k, sizeof(k), i, &kl);
        assert_int_equal(gs_store_set(s, k, kl, v, sizeof(v), i % 2 ? NOW + 10 : -1, NULL), 0);
    }
    unsigned long before = test_allocations();
    for (unsigned i = 0; i < 20000; i++) {
        key_of(k, sizeof(k), i % 6000, &kl); /* hits and misses */
        struct gs_entry *e = gs_store_lookup(s, k, kl, NOW, 0);
        assert_int_equal(e != NULL, i % 6000 < 5000);
    }
    /* An overwrite with a value of the same size reuses the block. */
    for (unsigned i = 0; i < 5000; i++) {
        key_of(k, sizeof(k), i, &kl);
        assert_int_equal(gs_store_set(s, k, kl, v, sizeof(v), i % 2 ? NOW + 20 : -1, NULL), 0);
    }
    assert_int_equal(test_allocations() - before, 0);
    /* The counter does see the store's allocations: a new key is one. */
    assert_int_equal(gs_store_set(s, "new", 3, v, sizeof(v), -1, NULL), 0);
    assert_true(test_allocations() - before >= 1);
    assert_int_equal(gs_store_check(s), 0);
    gs_store_free(s);
}

/* ---- randomized against a model ---- */

#define MODEL_KEYS 512

struct model_key {
    bool present;
    int64_t expire;
    size_t vlen;
    unsigned char fill;
};

static void test_random_ops_against_model(void **state)
{
    enum gs_evict_policy policies[] = {GS_EVICT_SLRU, GS_EVICT_LRU, GS_EVICT_NOEVICTION};
    for (int pi = 0; pi < 3; pi++) {
        struct gs_store *s = new_store(0, policies[pi]);
        struct model_key m[MODEL_KEYS] = {0};
        uint64_t rng = 12345 + pi;
        int64_t now = NOW;
        char v[600];
        for (int step = 0; step < 60000; step++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            unsigned r = (unsigned)(rng >> 33);
            unsigned i = r % MODEL_KEYS, op = (r >> 10) % 10;
            char k[16] = {'k', '\0'}; /* binary: a NUL inside every key */
            int kl = 2 + snprintf(k + 2, sizeof(k) - 2, "%u", i);
            struct model_key *mk = &m[i];
            if (mk->present && mk->expire >= 0 && mk->expire <= now)
                mk->present = false; /* model of expiry */
            switch (op) {
            case 0:
            case 1:
            case 2: { /* set */
                size_t vlen = (r >> 14) % sizeof(v);
                int64_t exp = (r >> 24) % 3 == 0 ? now + (r >> 26) % 50 : -1;
                memset(v, (int)(r & 0xff), vlen);
                assert_int_equal(gs_store_set(s, k, (size_t)kl, v, vlen, exp, NULL), 0);
                *mk = (struct model_key){true, exp, vlen, (unsigned char)(r & 0xff)};
                break;
            }
            case 3: { /* get */
                struct gs_entry *e = gs_store_lookup(s, k, (size_t)kl, now, 0);
                assert_int_equal(e != NULL, mk->present);
                if (e) {
                    size_t len;
                    const unsigned char *val = (const unsigned char *)gs_entry_value(e, &len);
                    assert_int_equal(len, mk->vlen);
                    for (size_t j = 0; j < len; j++)
                        assert_int_equal(val[j], mk->fill);
                    assert_int_equal(gs_entry_expire_ms(e), mk->expire);
                }
                break;
            }
            case 4: /* delete */
                assert_int_equal(gs_store_delete(s, k, (size_t)kl, now), mk->present);
                mk->present = false;
                break;
            case 5: { /* expire / persist */
                struct gs_entry *e = gs_store_lookup(s, k, (size_t)kl, now, GS_LOOKUP_NOTOUCH);
                assert_int_equal(e != NULL, mk->present);
                if (e) {
                    int64_t exp = (r >> 20) % 2 ? now + (r >> 21) % 40 : -1;
                    assert_int_equal(gs_store_set_expire(s, &e, exp), 0);
                    mk->expire = exp;
                    assert_int_equal(gs_entry_expire_ms(e), exp);
                }
                break;
            }
            case 6: { /* resize, with a byte pattern that stays uniform */
                struct gs_entry *e = gs_store_lookup(s, k, (size_t)kl, now, GS_LOOKUP_NOTOUCH);
                if (e) {
                    size_t nl = (r >> 14) % 700;
                    char *val = gs_store_resize_value(s, &e, nl);
                    assert_non_null(val);
                    memset(val, mk->fill, nl);
                    mk->vlen = nl;
                }
                break;
            }
            case 7:
                now += (r >> 14) % 5;
                break;
            case 8:
                gs_store_expire_cycle(s, now, (r >> 14) % 20);
                break;
            case 9:
                if ((r >> 14) % 200 == 0) {
                    gs_store_clear(s);
                    memset(m, 0, sizeof(m));
                }
                break;
            }
            if (step % 97 == 0)
                assert_int_equal(gs_store_check(s), 0);
        }
        /* Final accounting. */
        gs_store_expire_cycle(s, now, SIZE_MAX);
        uint64_t live = 0, with_ttl = 0;
        for (unsigned i = 0; i < MODEL_KEYS; i++) {
            if (m[i].present && m[i].expire >= 0 && m[i].expire <= now)
                m[i].present = false;
            live += m[i].present;
            with_ttl += m[i].present && m[i].expire >= 0;
        }
        struct gs_store_stats st = stats_of(s);
        assert_int_equal(st.keys, live);
        assert_int_equal(st.keys_with_expire, with_ttl);
        assert_int_equal(gs_store_check(s), 0);
        gs_store_free(s);
    }
}

/* Under a memory limit the model cannot know which keys were evicted, so
 * it checks what it can: make_room meets the limit, a key the store
 * returns is one the model has with the model's value (nothing evicted or
 * deleted comes back), and the invariants hold. */
static void test_random_ops_with_eviction(void **state)
{
    enum gs_evict_policy policies[] = {GS_EVICT_SLRU, GS_EVICT_LRU};
    const uint64_t limit = 64 * 1024;
    for (int pi = 0; pi < 2; pi++) {
        struct gs_store *s = new_store(limit, policies[pi]);
        struct model_key m[MODEL_KEYS] = {0};
        uint64_t rng = 777 + pi;
        int64_t now = NOW;
        char v[300];
        for (int step = 0; step < 40000; step++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            unsigned r = (unsigned)(rng >> 33);
            unsigned i = r % MODEL_KEYS, op = (r >> 10) % 6;
            char k[16] = {'k', '\0'};
            int kl = 2 + snprintf(k + 2, sizeof(k) - 2, "%u", i);
            struct model_key *mk = &m[i];
            if (mk->present && mk->expire >= 0 && mk->expire <= now)
                mk->present = false;
            if (op <= 2) {
                assert_int_equal(gs_store_make_room(s), 0);
                struct gs_store_stats st;
                gs_store_stats(s, &st);
                assert_true(st.used_memory <= limit);
                size_t vlen = (r >> 14) % sizeof(v);
                int64_t exp = (r >> 24) % 4 == 0 ? now + (r >> 26) % 30 : -1;
                memset(v, (int)(r & 0xff), vlen);
                assert_int_equal(gs_store_set(s, k, (size_t)kl, v, vlen, exp, NULL), 0);
                *mk = (struct model_key){true, exp, vlen, (unsigned char)(r & 0xff)};
            } else if (op == 3) {
                struct gs_entry *e = gs_store_lookup(s, k, (size_t)kl, now, 0);
                if (e) {
                    assert_true(mk->present);
                    size_t len;
                    const unsigned char *val = (const unsigned char *)gs_entry_value(e, &len);
                    assert_int_equal(len, mk->vlen);
                    for (size_t j = 0; j < len; j++)
                        assert_int_equal(val[j], mk->fill);
                } else {
                    mk->present = false; /* evicted, or expired */
                }
            } else if (op == 4) {
                int d = gs_store_delete(s, k, (size_t)kl, now);
                assert_true(d == 0 || mk->present);
                mk->present = false;
            } else {
                now += (r >> 14) % 3;
                gs_store_expire_cycle(s, now, (r >> 16) % 16);
            }
            if (step % 101 == 0)
                assert_int_equal(gs_store_check(s), 0);
        }
        struct gs_store_stats st;
        gs_store_stats(s, &st);
        assert_true(st.evicted_keys > 0);
        assert_int_equal(gs_store_check(s), 0);
        gs_store_free(s);
    }
}

/* ---- the "key modified" hook (WATCH) ---- */

struct hook_log {
    unsigned calls, clears;
    char last[32];
};

static void record_modified(void *arg, const char *key, size_t klen)
{
    struct hook_log *h = arg;
    h->calls++;
    if (!key) {
        h->clears++;
        h->last[0] = 0;
        return;
    }
    snprintf(h->last, sizeof(h->last), "%.*s", (int)klen, key);
}

/* Every path that changes or removes a key reaches the hook exactly
 * once; reads and no-ops do not; no hook costs nothing and is safe. */
static void test_modified_hook(void **state)
{
    (void)state;
    struct gs_store *s = new_store(0, GS_EVICT_SLRU);
    struct hook_log h = {0};
    struct gs_entry *e;
    assert_int_equal(gs_store_set(s, "a", 1, "1", 1, -1, NULL), 0); /* no hook yet */
    gs_store_on_modified(s, record_modified, &h);
#define EXPECT(n, key)                                                                             \
    do {                                                                                           \
        assert_int_equal(h.calls, (n));                                                            \
        assert_string_equal(h.last, (key));                                                        \
    } while (0)
    assert_int_equal(gs_store_set(s, "a", 1, "2", 1, -1, NULL), 0); /* overwrite */
    EXPECT(1, "a");
    assert_int_equal(gs_store_set(s, "b", 1, "2", 1, -1, NULL), 0); /* insert */
    EXPECT(2, "b");
    e = gs_store_lookup(s, "a", 1, NOW, 0); /* a read */
    EXPECT(2, "b");
    assert_non_null(gs_store_resize_value(s, &e, 10));
    EXPECT(3, "a");
    assert_int_equal(gs_store_set_expire(s, &e, NOW + 10), 0);
    EXPECT(4, "a");
    assert_int_equal(gs_store_set_expire(s, &e, -1), 0); /* persist */
    EXPECT(5, "a");
    assert_int_equal(gs_store_set_expire(s, &e, -1), 0); /* no TTL to clear: no change */
    EXPECT(5, "a");
    gs_store_signal_modified(s, e); /* an in-place write */
    EXPECT(6, "a");
    assert_int_equal(gs_store_delete(s, "nokey", 5, NOW), 0);
    EXPECT(6, "a");
    assert_int_equal(gs_store_delete(s, "b", 1, NOW), 1);
    EXPECT(7, "b");
    /* lazy expiry */
    assert_int_equal(gs_store_set(s, "x", 1, "v", 1, NOW + 5, NULL), 0);
    EXPECT(8, "x");
    assert_null(gs_store_lookup(s, "x", 1, NOW + 5, GS_LOOKUP_NOTOUCH));
    EXPECT(9, "x");
    /* active expiry */
    assert_int_equal(gs_store_set(s, "y", 1, "v", 1, NOW + 5, NULL), 0);
    assert_int_equal(gs_store_expire_cycle(s, NOW + 5, 100), 1);
    EXPECT(11, "y");
    /* eviction */
    gs_store_configure(s, 1, GS_EVICT_LRU);
    assert_int_equal(gs_store_make_room(s), 0); /* evicts "a", the only key */
    EXPECT(12, "a");
    gs_store_configure(s, 0, GS_EVICT_SLRU);
    /* clear: one call with no key, before anything is removed */
    assert_int_equal(gs_store_set(s, "c", 1, "v", 1, -1, NULL), 0);
    gs_store_clear(s);
    assert_int_equal(h.calls, 14);
    assert_int_equal(h.clears, 1);
    /* removed */
    gs_store_on_modified(s, NULL, NULL);
    assert_int_equal(gs_store_set(s, "c", 1, "v", 1, -1, NULL), 0);
    assert_int_equal(gs_store_delete(s, "c", 1, NOW), 1);
    assert_int_equal(h.calls, 14);
#undef EXPECT
    assert_int_equal(gs_store_check(s), 0);
    gs_store_free(s);
}

/* The access clock (entry.h E5, OBJECT IDLETIME): stamped by a write, a
 * touching lookup and a GS_LOOKUP_WRITE one; kept by NOTOUCH lookups, a
 * resize (both ways, in place and moving) and a new TTL; Redis's
 * wrap-around rule past 2^24 seconds. */
static void test_access_clock(void **state)
{
    struct gs_store *s = new_store(0, GS_EVICT_SLRU);
    const int64_t t0 = 1700000000000;
    gs_store_tick(s, t0);
    struct gs_entry *e;
    assert_int_equal(gs_store_set(s, "k", 1, "v", 1, -1, &e), 0);
    assert_int_equal(gs_store_idle_seconds(s, e), 0);
    gs_store_tick(s, t0 + 5999); /* 5.999 s later: 5 whole clock seconds */
    e = gs_store_lookup(s, "k", 1, t0 + 5999, GS_LOOKUP_NOTOUCH);
    assert_int_equal(gs_store_idle_seconds(s, e), 5);
    /* A resize and a TTL keep the stamp, even when the entry moves. */
    assert_non_null(gs_store_resize_value(s, &e, 4000));
    assert_int_equal(gs_store_idle_seconds(s, e), 5);
    assert_non_null(gs_store_resize_value(s, &e, 2));
    assert_int_equal(gs_store_idle_seconds(s, e), 5);
    assert_int_equal(gs_store_set_expire(s, &e, t0 + 100000), 0);
    assert_int_equal(gs_store_idle_seconds(s, e), 5);
    assert_int_equal(gs_store_set_expire(s, &e, -1), 0);
    assert_int_equal(gs_store_idle_seconds(s, e), 5);
    /* A lookup stamps the time it is given. */
    e = gs_store_lookup(s, "k", 1, t0 + 7000, GS_LOOKUP_WRITE);
    assert_int_equal(gs_store_idle_seconds(s, e), 0);
    gs_store_tick(s, t0 + 9000);
    assert_int_equal(gs_store_idle_seconds(s, e), 2);
    e = gs_store_lookup(s, "k", 1, t0 + 9000, 0);
    assert_int_equal(gs_store_idle_seconds(s, e), 0);
    /* An overwrite stamps the clock; other keys keep theirs. */
    assert_int_equal(gs_store_set(s, "o", 1, "v", 1, -1, NULL), 0);
    gs_store_tick(s, t0 + 12000);
    assert_int_equal(gs_store_set(s, "k", 1, "longer value", 12, -1, &e), 0);
    assert_int_equal(gs_store_idle_seconds(s, e), 0);
    e = gs_store_lookup(s, "o", 1, t0 + 12000, GS_LOOKUP_NOTOUCH);
    assert_int_equal(gs_store_idle_seconds(s, e), 3);
    /* Wrap-around: stamped at clock 2^24 - 2, read 3 s later at clock 1.
     * Redis's estimateObjectIdleTime says 1 + (2^24 - 1 - (2^24 - 2)) = 2. */
    const int64_t wrap = ((int64_t)1 << 24) * 1000 * 101; /* clock 0 */
    gs_store_tick(s, wrap - 2000);
    assert_int_equal(gs_store_set(s, "w", 1, "v", 1, -1, &e), 0);
    assert_int_equal(gs_store_idle_seconds(s, e), 0);
    gs_store_tick(s, wrap + 1000);
    e = gs_store_lookup(s, "w", 1, wrap + 1000, GS_LOOKUP_NOTOUCH);
    assert_int_equal(gs_store_idle_seconds(s, e), 2);
    assert_int_equal(gs_store_check(s), 0);
    gs_store_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_is_compact),
        cmocka_unit_test(test_set_get_overwrite_delete_binary),
        cmocka_unit_test(test_empty_key_and_value),
        cmocka_unit_test(test_make_room_to_empty),
        cmocka_unit_test(test_too_big),
        cmocka_unit_test(test_stats_hits_misses),
        cmocka_unit_test(test_resize_value),
        cmocka_unit_test(test_used_memory_exact),
        cmocka_unit_test(test_entry_cost_matches_allocator),
        cmocka_unit_test(test_maxmemory_evicts),
        cmocka_unit_test(test_scan_across_growth),
        cmocka_unit_test(test_scan_across_shrink),
        cmocka_unit_test(test_scan_skips_expired_and_empty),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_clear),
        cmocka_unit_test(test_no_allocation_on_get),
        cmocka_unit_test(test_random_ops_against_model),
        cmocka_unit_test(test_random_ops_with_eviction),
        cmocka_unit_test(test_modified_hook),
        cmocka_unit_test(test_access_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
