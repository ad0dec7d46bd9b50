/*
 * Typed values in the store: a hash entry counts its collection's memory
 * in used_memory (checked by gs_store_check's recount after every step),
 * and every way a key goes away or changes frees the collection exactly
 * once and returns used_memory to 0: overwrite by a string, DEL, lazy
 * and active expiry, eviction, clear, RENAME's move. Under ASan a double
 * free or a leak of the collection's blocks fails the run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/error.h"
#include "gridsync/store/store.h"
#include "gridsync/types/hash/hash.h"
#include "gridsync/types/zset/zset.h"

#define NOW 1000000

static const struct gs_type_limits LIM = GS_TYPE_LIMITS_DEFAULT;

static struct gs_store *new_store(uint64_t maxmemory)
{
    struct gs_store *s;
    struct gs_store_config cfg = {.maxmemory = maxmemory, .policy = GS_EVICT_SLRU, .hash_seed = 7};
    assert_int_equal(gs_store_new(&s, &cfg), 0);
    return s;
}

static uint64_t used(struct gs_store *s)
{
    struct gs_store_stats st;
    gs_store_stats(s, &st);
    return st.used_memory;
}

/* A hash under key with n fields, through the same steps a command takes. */
static struct gs_entry *make_hash(struct gs_store *s, const char *key, int n, int64_t expire)
{
    struct gs_obj o;
    struct gs_entry *e;
    assert_int_equal(gs_hash_init(&o), 0);
    /* (an empty hash exists only inside a command: no check here) */
    assert_int_equal(gs_store_set_obj(s, key, strlen(key), &o, expire, &e), 0);
    assert_true(gs_entry_obj(e, &o));
    for (int i = 0; i < n; i++) {
        char f[32], v[32];
        snprintf(f, sizeof(f), "field%d", i);
        snprintf(v, sizeof(v), "value%d", i);
        assert_int_equal(gs_hash_set(&o, f, strlen(f), v, strlen(v), &LIM, NULL), 0);
    }
    gs_store_obj_update(s, e, &o);
    assert_int_equal(gs_store_check(s), 0);
    return e;
}

static void test_accounting_and_overwrite(void **state)
{
    (void)state;
    struct gs_store *s = new_store(0);
    struct gs_entry *e = make_hash(s, "h", 10, -1);
    assert_int_equal(gs_entry_type(e), GS_TYPE_HASH);
    uint64_t small = used(s);
    /* the key's cost: its entry plus the listpack, within used_memory
     * (which also holds the key table) */
    struct gs_obj lp;
    assert_true(gs_entry_obj(e, &lp));
    assert_true(gs_store_entry_mem(e) <= small);
    /* (the entry's own block is compared with glibc's rule only outside
     * ASan, whose allocator rounds differently) */
    assert_true(gs_store_entry_mem(e) > gs_hash_mem(&lp) + sizeof(lp));
#if !defined(__SANITIZE_ADDRESS__)
    assert_int_equal(gs_store_entry_mem(e), gs_store_entry_cost(1, sizeof(lp)) + gs_hash_mem(&lp));
#endif
    /* growing past the listpack limit converts and costs more */
    e = make_hash(s, "big", 600, -1);
    struct gs_obj o;
    assert_true(gs_entry_obj(e, &o));
    assert_int_equal(o.enc, GS_ENC_HASHTABLE);
    assert_true(used(s) > small + 600 * 16);
    /* SET over a hash frees the hash */
    assert_int_equal(gs_store_set(s, "big", 3, "str", 3, -1, &e), 0);
    assert_int_equal(gs_entry_type(e), GS_TYPE_STRING);
    assert_int_equal(gs_store_check(s), 0);
    /* a hash over a string, then over a hash */
    make_hash(s, "big", 3, -1);
    make_hash(s, "big", 200, -1);
    assert_int_equal(gs_store_check(s), 0);
    assert_int_equal(gs_store_delete(s, "big", 3, NOW), 1);
    assert_int_equal(gs_store_delete(s, "h", 1, NOW), 1);
    assert_int_equal(used(s), 0);
    assert_int_equal(gs_store_check(s), 0);
    gs_store_free(s);
}

static void test_expiry_and_clear(void **state)
{
    (void)state;
    struct gs_store *s = new_store(0);
    make_hash(s, "lazy", 300, NOW + 10);
    make_hash(s, "active", 300, NOW + 10);
    make_hash(s, "stays", 5, -1);
    assert_null(gs_store_lookup(s, "lazy", 4, NOW + 10, 0)); /* lazy expiry frees it */
    assert_int_equal(gs_store_check(s), 0);
    assert_int_equal(gs_store_expire_cycle(s, NOW + 10, 100), 1);
    assert_int_equal(gs_store_check(s), 0);
    struct gs_entry *e = gs_store_lookup(s, "stays", 5, NOW + 10, 0);
    assert_non_null(e);
    assert_true(used(s) >= gs_store_entry_mem(e));
    gs_store_clear(s);
    assert_int_equal(used(s), 0);
    assert_int_equal(gs_store_check(s), 0);
    gs_store_free(s);
}

static void test_eviction_counts_collections(void **state)
{
    (void)state;
    /* a limit a few big hashes exceed: eviction must remove whole keys
     * and bring used_memory, collections included, under it */
    struct gs_store *s = new_store(64 * 1024);
    char key[32];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof(key), "h%d", i);
        make_hash(s, key, 200, -1);
        assert_int_equal(gs_store_make_room(s), 0);
        assert_true(used(s) <= 64 * 1024);
        assert_int_equal(gs_store_check(s), 0);
    }
    struct gs_store_stats st;
    gs_store_stats(s, &st);
    assert_true(st.evicted_keys > 0);
    gs_store_free(s);
}

static void test_move_and_free_with_store(void **state)
{
    (void)state;
    struct gs_store *s = new_store(0);
    struct gs_entry *src = make_hash(s, "a", 50, NOW + 1000);
    make_hash(s, "b", 7, -1); /* replaced by the move */
    uint64_t before = used(s);
    src = gs_store_lookup(s, "a", 1, NOW, 0);
    assert_int_equal(gs_store_move_obj(s, src, "b", 1, gs_entry_expire_ms(src)), 0);
    assert_int_equal(gs_store_check(s), 0);
    assert_null(gs_store_lookup(s, "a", 1, NOW, 0));
    struct gs_entry *e = gs_store_lookup(s, "b", 1, NOW, 0);
    assert_non_null(e);
    assert_int_equal(gs_entry_expire_ms(e), NOW + 1000);
    struct gs_obj o;
    assert_true(gs_entry_obj(e, &o));
    assert_int_equal(gs_hash_len(&o), 50);
    assert_true(used(s) < before);
    /* the copy COPY makes is independent of its source */
    struct gs_obj copy;
    assert_int_equal(gs_obj_dup(&copy, &o), 0);
    assert_int_equal(gs_store_set_obj(s, "c", 1, &copy, -1, NULL), 0);
    assert_int_equal(gs_store_check(s), 0);
    e = gs_store_lookup(s, "b", 1, NOW, 0);
    gs_entry_obj(e, &o);
    assert_true(gs_hash_delete(&o, "field0", 6));
    gs_store_obj_update(s, e, &o);
    e = gs_store_lookup(s, "c", 1, NOW, 0);
    gs_entry_obj(e, &o);
    assert_int_equal(gs_hash_len(&o), 50);
    assert_int_equal(gs_store_check(s), 0);
    gs_store_free(s); /* frees both collections (ASan: no leak) */
}

/* UNLINK of a big collection: the key is gone and its memory off the
 * count at once; the thread frees the blocks (ASan: no leak, no double
 * free) by gs_store_free at the latest. A small one is freed in place. */
static void test_unlink_frees_in_the_background(void **state)
{
    (void)state;
    struct gs_store *s = new_store(0);
    make_hash(s, "big", 1000, -1);
    make_hash(s, "small", 3, -1);
    assert_int_equal(gs_store_unlink(s, "big", 3, NOW), 1);
    assert_int_equal(gs_store_unlink(s, "big", 3, NOW), 0);
    assert_null(gs_store_lookup(s, "big", 3, NOW, 0));
    assert_int_equal(gs_store_check(s), 0);
    assert_int_equal(gs_store_unlink(s, "small", 5, NOW), 1);
    assert_int_equal(used(s), 0);
    assert_int_equal(gs_store_check(s), 0);
    for (int i = 0; i < 20; i++) { /* many in a row: the queue, not one slot */
        char key[16];
        snprintf(key, sizeof(key), "h%d", i);
        make_hash(s, key, 100, -1);
        assert_int_equal(gs_store_unlink(s, key, strlen(key), NOW), 1);
    }
    assert_int_equal(used(s), 0);
    gs_store_free(s); /* joins the thread after it freed everything */
}

/* A sorted set in both encodings under the store: exact accounting after
 * every change (gs_store_check), COPY's deep copy, a big one UNLINKed in
 * the background, eviction freeing it whole. */
static void test_sorted_sets_in_the_store(void **state)
{
    (void)state;
    struct gs_store *s = new_store(0);
    struct gs_obj o;
    struct gs_entry *e;
    assert_int_equal(gs_zset_init(&o, false), 0);
    assert_int_equal(gs_store_set_obj(s, "z", 1, &o, -1, &e), 0);
    for (int i = 0; i < 300; i++) {
        char m[32];
        int out;
        snprintf(m, sizeof(m), "member%d", i);
        assert_true(gs_entry_obj(e, &o));
        assert_int_equal(gs_zset_add(&o, i * 0.5, m, strlen(m), 0, &out, NULL, &LIM), 0);
        gs_store_obj_update(s, e, &o);
        if (i == 127 || i == 128) {
            assert_int_equal(o.enc, i == 127 ? GS_ENC_LISTPACK : GS_ENC_SKIPLIST);
            assert_int_equal(gs_store_check(s), 0);
        }
    }
    assert_int_equal(gs_store_check(s), 0);
    assert_int_equal(gs_store_entry_mem(e) > gs_obj_mem(&o), 1);
    struct gs_obj copy;
    assert_int_equal(gs_obj_dup(&copy, &o), 0);
    assert_int_equal(gs_store_set_obj(s, "z2", 2, &copy, -1, NULL), 0);
    e = gs_store_lookup(s, "z", 1, NOW, 0);
    gs_entry_obj(e, &o);
    gs_zset_delete_range(&o, 0, 100);
    gs_store_obj_update(s, e, &o);
    assert_int_equal(gs_store_check(s), 0);
    e = gs_store_lookup(s, "z2", 2, NOW, 0);
    gs_entry_obj(e, &o);
    assert_int_equal(gs_zset_len(&o), 300);
    assert_int_equal(gs_store_unlink(s, "z2", 2, NOW), 1); /* over 64: the thread frees it */
    assert_int_equal(gs_store_check(s), 0);
    assert_int_equal(gs_store_delete(s, "z", 1, NOW), 1);
    assert_int_equal(used(s), 0);
    gs_store_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accounting_and_overwrite),
        cmocka_unit_test(test_expiry_and_clear),
        cmocka_unit_test(test_eviction_counts_collections),
        cmocka_unit_test(test_move_and_free_with_store),
        cmocka_unit_test(test_unlink_frees_in_the_background),
        cmocka_unit_test(test_sorted_sets_in_the_store),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
