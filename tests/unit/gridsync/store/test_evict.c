/*
 * Eviction policies, exactly as evict.h specifies them: SLRU's probation
 * and protected movements and victim order, its 80 % bound, plain LRU,
 * noeviction; then the same order seen through the store's make_room.
 *
 * The policy tests drive the ops table directly with bare entry headers,
 * and read the lists back head to tail.
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
#include "gridsync/store/entry.h"
#include "gridsync/store/evict.h"
#include "gridsync/store/store.h"

#define N 20

static struct gs_entry ents[N];

static int id_of(struct gs_entry *e)
{
    return (int)(e - ents);
}

/* The list from head (most recent) to tail, as ids in a string like
 * "3 2 1" (empty list: ""). */
static const char *order(struct gs_evict *p, int seg)
{
    static char buf[256];
    size_t n = 0;
    buf[0] = '\0';
    for (struct core_list *l = p->list[seg].next; l != &p->list[seg]; l = l->next)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, n ? " %d" : "%d",
                              id_of(gs_evict_entry_of(l)));
    return buf;
}

static void insert(struct gs_evict *p, int id)
{
    p->ops->on_insert(p, &ents[id]);
}

static void hit(struct gs_evict *p, int id)
{
    p->ops->on_hit(p, &ents[id]);
}

static void test_slru_movements(void **state)
{
    struct gs_evict p;
    gs_evict_init(&p, GS_EVICT_SLRU);
    assert_null(p.ops->victim(&p));

    /* New keys enter probation at its head. */
    for (int i = 0; i < 10; i++)
        insert(&p, i);
    assert_string_equal(order(&p, GS_SEG_PROBATION), "9 8 7 6 5 4 3 2 1 0");
    assert_string_equal(order(&p, GS_SEG_PROTECTED), "");
    /* Victim: probation's tail. */
    assert_int_equal(id_of(p.ops->victim(&p)), 0);

    /* A hit in probation promotes to protected's head. */
    hit(&p, 3);
    hit(&p, 5);
    assert_string_equal(order(&p, GS_SEG_PROBATION), "9 8 7 6 4 2 1 0");
    assert_string_equal(order(&p, GS_SEG_PROTECTED), "5 3");

    /* A hit in protected moves it to protected's head. */
    hit(&p, 3);
    assert_string_equal(order(&p, GS_SEG_PROTECTED), "3 5");
    hit(&p, 3); /* already head: no change */
    assert_string_equal(order(&p, GS_SEG_PROTECTED), "3 5");

    /* Protected may hold 10 - 10/5 = 8 of 10. Promote 6 more: the 9th
     * promotion overflows and demotes protected's tail (5, the least
     * recent) to probation's head. */
    int more[] = {0, 1, 2, 4, 6, 7};
    for (int i = 0; i < 6; i++)
        hit(&p, more[i]);
    assert_int_equal(p.count[GS_SEG_PROTECTED], 8);
    assert_string_equal(order(&p, GS_SEG_PROTECTED), "7 6 4 2 1 0 3 5");
    assert_string_equal(order(&p, GS_SEG_PROBATION), "9 8");
    hit(&p, 8);
    assert_string_equal(order(&p, GS_SEG_PROTECTED), "8 7 6 4 2 1 0 3");
    assert_string_equal(order(&p, GS_SEG_PROBATION), "5 9");
    assert_int_equal(p.count[GS_SEG_PROTECTED], 8);
    assert_int_equal(p.count[GS_SEG_PROBATION], 2);

    /* Victim order: probation's tail first... */
    assert_int_equal(id_of(p.ops->victim(&p)), 9);
    p.ops->on_remove(&p, &ents[9]);
    /* ...9 entries now, protected may hold 9 - 1 = 8: no demotion. */
    assert_string_equal(order(&p, GS_SEG_PROBATION), "5");
    assert_int_equal(id_of(p.ops->victim(&p)), 5);
    p.ops->on_remove(&p, &ents[5]);
    /* 8 entries, protected may hold 8 - 1 = 7: its tail (3) is demoted. */
    assert_string_equal(order(&p, GS_SEG_PROBATION), "3");
    assert_string_equal(order(&p, GS_SEG_PROTECTED), "8 7 6 4 2 1 0");
    gs_evict_init(&p, GS_EVICT_SLRU);
}

static void test_slru_victim_from_protected_when_probation_empty(void **state)
{
    struct gs_evict p;
    gs_evict_init(&p, GS_EVICT_SLRU);
    insert(&p, 1);
    hit(&p, 1); /* one entry: protected may hold 1 - 0 = 1 */
    assert_string_equal(order(&p, GS_SEG_PROTECTED), "1");
    assert_string_equal(order(&p, GS_SEG_PROBATION), "");
    assert_int_equal(id_of(p.ops->victim(&p)), 1);
    p.ops->on_remove(&p, &ents[1]);
    assert_null(p.ops->victim(&p));
    assert_int_equal(gs_evict_count(&p), 0);
}

/* Removing protected entries never demotes; removing from anywhere keeps
 * protected <= total - total/5 after every call (invariant S1). */
static void test_slru_bound_holds(void **state)
{
    struct gs_evict p;
    gs_evict_init(&p, GS_EVICT_SLRU);
    uint64_t rng = 7;
    bool in[N] = {false};
    for (int step = 0; step < 20000; step++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        int id = (int)((rng >> 33) % N), op = (int)((rng >> 40) % 3);
        if (!in[id]) {
            insert(&p, id);
            in[id] = true;
        } else if (op == 0) {
            p.ops->on_remove(&p, &ents[id]);
            in[id] = false;
        } else {
            hit(&p, id);
        }
        size_t total = gs_evict_count(&p);
        assert_true(p.count[GS_SEG_PROTECTED] <= total - total / 5);
    }
}

static void test_lru(void **state)
{
    struct gs_evict p;
    gs_evict_init(&p, GS_EVICT_LRU);
    assert_true(p.ops->evicts);
    for (int i = 0; i < 5; i++)
        insert(&p, i);
    hit(&p, 0);
    hit(&p, 2);
    assert_string_equal(order(&p, 0), "2 0 4 3 1");
    assert_int_equal(id_of(p.ops->victim(&p)), 1);
    p.ops->on_remove(&p, &ents[1]);
    assert_int_equal(id_of(p.ops->victim(&p)), 3);
}

static void test_noeviction(void **state)
{
    struct gs_evict p;
    gs_evict_init(&p, GS_EVICT_NOEVICTION);
    assert_false(p.ops->evicts);
    insert(&p, 0);
    insert(&p, 1);
    hit(&p, 0); /* ignored */
    assert_string_equal(order(&p, 0), "1 0");
}

static void test_policy_names(void **state)
{
    enum gs_evict_policy pol;
    assert_int_equal(gs_evict_policy_parse("slru", &pol), 0);
    assert_int_equal(pol, GS_EVICT_SLRU);
    assert_int_equal(gs_evict_policy_parse("allkeys-lru", &pol), 0);
    assert_int_equal(pol, GS_EVICT_LRU);
    assert_int_equal(gs_evict_policy_parse("noeviction", &pol), 0);
    assert_int_equal(pol, GS_EVICT_NOEVICTION);
    assert_int_equal(gs_evict_policy_parse("lfu", &pol), CORE_EINVAL);
    assert_string_equal(gs_evict_policy_name(GS_EVICT_SLRU), "slru");
}

/* A moved entry (after realloc) is relinked by on_move. */
static void test_on_move(void **state)
{
    struct gs_evict p;
    gs_evict_init(&p, GS_EVICT_SLRU);
    insert(&p, 0);
    insert(&p, 1);
    insert(&p, 2);
    ents[N - 1] = ents[1]; /* "realloc" entry 1 to slot N-1 */
    p.ops->on_move(&p, &ents[N - 1]);
    assert_string_equal(order(&p, GS_SEG_PROBATION), "2 19 0");
}

/* ---- through the store ---- */

static struct gs_store *store_with(enum gs_evict_policy pol)
{
    struct gs_store *s;
    struct gs_store_config cfg = {.maxmemory = 0, .policy = pol, .hash_seed = 1};
    assert_int_equal(gs_store_new(&s, &cfg), 0);
    return s;
}

static bool has(struct gs_store *s, const char *k)
{
    return gs_store_lookup(s, k, strlen(k), 0, GS_LOOKUP_NOTOUCH) != NULL;
}

/* Evict exactly one entry by lowering maxmemory just below used_memory. */
static void evict_one(struct gs_store *s, enum gs_evict_policy pol)
{
    struct gs_store_stats st;
    gs_store_stats(s, &st);
    uint64_t before = st.evicted_keys;
    gs_store_configure(s, st.used_memory - 1, pol);
    assert_int_equal(gs_store_make_room(s), 0);
    gs_store_stats(s, &st);
    assert_int_equal(st.evicted_keys, before + 1);
    gs_store_configure(s, 0, pol);
}

static void test_store_evicts_in_slru_order(void **state)
{
    struct gs_store *s = store_with(GS_EVICT_SLRU);
    const char *keys[] = {"a", "b", "c", "d", "e"};
    for (int i = 0; i < 5; i++)
        assert_int_equal(gs_store_set(s, keys[i], 1, "v", 1, -1, NULL), 0);
    assert_non_null(gs_store_lookup(s, "a", 1, 0, 0));                 /* a: protected */
    assert_non_null(gs_store_lookup(s, "c", 1, 0, GS_LOOKUP_NOTOUCH)); /* no promotion */
    assert_int_equal(gs_store_set(s, "b", 1, "w", 1, -1, NULL), 0);    /* overwrite = hit */
    /* probation (head..tail): e d c; protected: b a */
    evict_one(s, GS_EVICT_SLRU);
    assert_false(has(s, "c"));
    evict_one(s, GS_EVICT_SLRU);
    assert_false(has(s, "d"));
    evict_one(s, GS_EVICT_SLRU);
    assert_false(has(s, "e"));
    /* probation empty: protected's tail (a) goes before b. */
    evict_one(s, GS_EVICT_SLRU);
    assert_false(has(s, "a"));
    assert_true(has(s, "b"));
    assert_int_equal(gs_store_check(s), 0);
    gs_store_free(s);
}

static void test_store_evicts_in_lru_order(void **state)
{
    struct gs_store *s = store_with(GS_EVICT_LRU);
    const char *keys[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++)
        assert_int_equal(gs_store_set(s, keys[i], 1, "v", 1, -1, NULL), 0);
    assert_non_null(gs_store_lookup(s, "a", 1, 0, 0));
    evict_one(s, GS_EVICT_LRU);
    assert_false(has(s, "b"));
    evict_one(s, GS_EVICT_LRU);
    assert_false(has(s, "c"));
    assert_true(has(s, "a"));
    gs_store_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slru_movements),
        cmocka_unit_test(test_slru_victim_from_protected_when_probation_empty),
        cmocka_unit_test(test_slru_bound_holds),
        cmocka_unit_test(test_lru),
        cmocka_unit_test(test_noeviction),
        cmocka_unit_test(test_policy_names),
        cmocka_unit_test(test_on_move),
        cmocka_unit_test(test_store_evicts_in_slru_order),
        cmocka_unit_test(test_store_evicts_in_lru_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
