/*
 * Expiry: lazy on lookup and delete, TTL set/update/clear and how an
 * overwrite treats it, the expire cycle removing exactly the due keys in
 * bounded steps, and a million keys expiring at once.
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

#define T0 1700000000000LL /* a Unix time in ms */

static struct gs_store *new_store(void)
{
    struct gs_store *s;
    struct gs_store_config cfg = {.maxmemory = 0, .policy = GS_EVICT_SLRU, .hash_seed = 9};
    assert_int_equal(gs_store_new(&s, &cfg), 0);
    return s;
}

static struct gs_store_stats stats_of(struct gs_store *s)
{
    struct gs_store_stats st;
    gs_store_stats(s, &st);
    return st;
}

static void test_lazy_on_lookup(void **state)
{
    struct gs_store *s = new_store();
    struct gs_entry *e;
    assert_int_equal(gs_store_set(s, "k", 1, "v", 1, T0 + 100, &e), 0);
    assert_int_equal(gs_entry_expire_ms(e), T0 + 100);
    assert_int_equal(stats_of(s).keys_with_expire, 1);
    assert_non_null(gs_store_lookup(s, "k", 1, T0 + 99, 0));
    /* Due at exactly its expire time (store.h invariant 4). */
    assert_null(gs_store_lookup(s, "k", 1, T0 + 100, 0));
    struct gs_store_stats st = stats_of(s);
    assert_int_equal(st.keys, 0);
    assert_int_equal(st.keys_with_expire, 0);
    assert_int_equal(st.expired_keys, 1);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.misses, 1);
    assert_int_equal(st.used_memory, 0);

    /* NOTOUCH still deletes an expired key, but counts no miss. */
    assert_int_equal(gs_store_set(s, "k", 1, "v", 1, T0, NULL), 0);
    assert_null(gs_store_lookup(s, "k", 1, T0, GS_LOOKUP_NOTOUCH));
    st = stats_of(s);
    assert_int_equal(st.expired_keys, 2);
    assert_int_equal(st.misses, 1);
    assert_int_equal(st.keys, 0);
    gs_store_free(s);
}

static void test_lazy_on_delete(void **state)
{
    struct gs_store *s = new_store();
    assert_int_equal(gs_store_set(s, "k", 1, "v", 1, T0, NULL), 0);
    assert_int_equal(gs_store_delete(s, "k", 1, T0 + 1), 0); /* was not live */
    assert_int_equal(stats_of(s).expired_keys, 1);
    assert_int_equal(stats_of(s).keys, 0);
    gs_store_free(s);
}

static void test_set_update_clear_ttl(void **state)
{
    struct gs_store *s = new_store();
    struct gs_entry *e;
    assert_int_equal(gs_store_set(s, "key", 3, "value", 5, -1, &e), 0);
    assert_int_equal(gs_entry_expire_ms(e), -1);

    /* First TTL: the entry grows an expire field and may move. */
    assert_int_equal(gs_store_set_expire(s, &e, T0 + 50), 0);
    assert_int_equal(gs_entry_expire_ms(e), T0 + 50);
    assert_ptr_equal(gs_store_lookup(s, "key", 3, T0, GS_LOOKUP_NOTOUCH), e);
    size_t len;
    assert_memory_equal(gs_entry_value(e, &len), "value", 5);
    assert_int_equal(len, 5);
    assert_int_equal(stats_of(s).keys_with_expire, 1);
    assert_int_equal(gs_store_check(s), 0);

    /* Update, later and earlier. */
    assert_int_equal(gs_store_set_expire(s, &e, T0 + 500), 0);
    assert_int_equal(gs_store_set_expire(s, &e, T0 + 20), 0);
    assert_int_equal(gs_entry_expire_ms(e), T0 + 20);
    assert_int_equal(stats_of(s).keys_with_expire, 1);

    /* PERSIST. */
    assert_int_equal(gs_store_set_expire(s, &e, -1), 0);
    assert_int_equal(gs_entry_expire_ms(e), -1);
    assert_int_equal(stats_of(s).keys_with_expire, 0);
    assert_non_null(gs_store_lookup(s, "key", 3, T0 + 1000000, 0));
    assert_int_equal(gs_store_check(s), 0);

    /* SET with a TTL, then a plain SET clears it (as Redis without
     * KEEPTTL). */
    assert_int_equal(gs_store_set(s, "key", 3, "v2", 2, T0 + 10, &e), 0);
    assert_int_equal(gs_entry_expire_ms(e), T0 + 10);
    assert_int_equal(gs_store_set(s, "key", 3, "v3", 2, -1, &e), 0);
    assert_int_equal(gs_entry_expire_ms(e), -1);
    assert_int_equal(stats_of(s).keys_with_expire, 0);
    assert_int_equal(gs_store_expire_cycle(s, T0 + 100, 100), 0);
    assert_non_null(gs_store_lookup(s, "key", 3, T0 + 100, 0));
    assert_int_equal(gs_store_check(s), 0);
    gs_store_free(s);
}

/* The cycle removes exactly the due keys, earliest first, within its
 * budget; keys without a TTL are never touched. */
static void test_cycle_removes_due_keys_in_order(void **state)
{
    struct gs_store *s = new_store();
    char k[32];
    for (int i = 0; i < 1000; i++) {
        int kl = snprintf(k, sizeof(k), "k%d", i);
        /* Times in a scrambled order; every 4th key has no TTL. */
        int64_t when = i % 4 == 3 ? -1 : T0 + (i * 7919) % 1000;
        assert_int_equal(gs_store_set(s, k, (size_t)kl, "v", 1, when, NULL), 0);
    }
    assert_int_equal(stats_of(s).keys_with_expire, 750);
    assert_int_equal(gs_store_expire_cycle(s, T0 - 1, 1000), 0);
    assert_int_equal(gs_store_expire_cycle(s, T0 + 500, 0), 0); /* no budget */

    /* Due at T0+499: keys whose time is < T0+500. */
    size_t due = 0;
    for (int i = 0; i < 1000; i++)
        due += i % 4 != 3 && (i * 7919) % 1000 < 500;
    size_t removed = 0;
    for (int c = 0; c < 1000; c++) {
        size_t r = gs_store_expire_cycle(s, T0 + 499, 10);
        assert_true(r <= 10);
        removed += r;
        if (r == 0)
            break;
    }
    assert_int_equal(removed, due);
    for (int i = 0; i < 1000; i++) {
        int kl = snprintf(k, sizeof(k), "k%d", i);
        bool live = i % 4 == 3 || (i * 7919) % 1000 >= 500;
        assert_int_equal(gs_store_lookup(s, k, (size_t)kl, T0 + 499, GS_LOOKUP_NOTOUCH) != NULL,
                         live);
    }
    assert_int_equal(stats_of(s).expired_keys, due);
    assert_int_equal(gs_store_check(s), 0);
    gs_store_free(s);
}

struct due_seen {
    int64_t now;
    size_t n;
    bool all_due;
    unsigned char seen[1000];
};

static void on_due(void *arg, const struct gs_entry *e)
{
    struct due_seen *d = arg;
    size_t kl;
    const char *k = gs_entry_key(e, &kl);
    int i = atoi(k + 1);
    if (gs_entry_expire_ms(e) > d->now || d->seen[i])
        d->all_due = false; /* not due, or reported twice */
    d->seen[i] = 1;
    d->n++;
}

/* gs_store_due reports exactly the due keys (in bounded calls), once each,
 * and removes nothing: in cluster mode the leader proposes their deletion
 * through the log instead. */
static void test_due_reports_without_removing(void **state)
{
    struct gs_store *s = new_store();
    char k[32];
    size_t due = 0;
    for (int i = 0; i < 1000; i++) {
        int kl = snprintf(k, sizeof(k), "k%d", i);
        int64_t when = i % 4 == 3 ? -1 : T0 + (i * 7919) % 1000;
        due += i % 4 != 3 && (i * 7919) % 1000 <= 499;
        assert_int_equal(gs_store_set(s, k, (size_t)kl, "v", 1, when, NULL), 0);
    }
    struct due_seen d = {.now = T0 + 499, .all_due = true};
    assert_int_equal(gs_store_due(s, T0 - 1, 100, on_due, &d), 0);
    /* One call reports at most GS_STORE_DUE_MAX; ask for all of them. */
    assert_int_equal(gs_store_due(s, T0 + 499, 100000, on_due, &d), GS_STORE_DUE_MAX);
    assert_true(d.all_due);
    memset(&d, 0, sizeof(d));
    d.now = T0 + 499;
    d.all_due = true;
    assert_true(due > GS_STORE_DUE_MAX);
    size_t small = gs_store_due(s, T0 + 499, 10, on_due, &d);
    assert_int_equal(small, 10);
    assert_true(d.all_due);
    assert_int_equal(stats_of(s).keys, 1000); /* nothing removed */
    assert_int_equal(stats_of(s).expired_keys, 0);
    /* Remove them as the log would (one delete each), a batch at a time. */
    size_t removed = 0;
    for (int round = 0; round < 100; round++) {
        memset(&d, 0, sizeof(d));
        d.now = T0 + 499;
        d.all_due = true;
        size_t n = gs_store_due(s, T0 + 499, 50, on_due, &d);
        assert_true(d.all_due);
        if (n == 0)
            break;
        for (int i = 0; i < 1000; i++) {
            if (!d.seen[i])
                continue;
            int kl = snprintf(k, sizeof(k), "k%d", i);
            assert_null(gs_store_lookup(s, k, (size_t)kl, T0 + 499, GS_LOOKUP_NOTOUCH));
            removed++;
        }
    }
    assert_int_equal(removed, due);
    assert_int_equal(stats_of(s).keys, 1000 - due);
    assert_int_equal(gs_store_check(s), 0);
    gs_store_free(s);
}

/* 1,000,000 keys expiring at the same ms are removed by repeated cycles,
 * each doing at most max_work; the keys without a TTL remain. */
static void test_million_expire_at_once(void **state)
{
    struct gs_store *s = new_store();
    const unsigned n = 1000000, keep = 1000;
    const size_t max_work = 2000;
    char k[32];
    for (unsigned i = 0; i < n + keep; i++) {
        int kl = snprintf(k, sizeof(k), "key:%09u", i);
        assert_int_equal(gs_store_set(s, k, (size_t)kl, "v", 1, i < n ? T0 + 1000 : -1, NULL), 0);
    }
    assert_int_equal(stats_of(s).keys_with_expire, n);
    assert_int_equal(gs_store_expire_cycle(s, T0 + 999, max_work), 0);

    size_t removed = 0, cycles = 0;
    for (;;) {
        size_t r = gs_store_expire_cycle(s, T0 + 1000, max_work);
        assert_true(r <= max_work);
        if (r == 0)
            break;
        removed += r;
        cycles++;
        assert_true(cycles <= n); /* bounded loop */
    }
    assert_int_equal(removed, n);
    assert_int_equal(cycles, (n + max_work - 1) / max_work);
    struct gs_store_stats st = stats_of(s);
    assert_int_equal(st.keys, keep);
    assert_int_equal(st.keys_with_expire, 0);
    assert_int_equal(st.expired_keys, n);
    /* Later cycles shrink the table back to the survivors' size. */
    for (int c = 0; c < 2000; c++)
        gs_store_expire_cycle(s, T0 + 1000, max_work);
    assert_int_equal(gs_store_check(s), 0);
    assert_true(stats_of(s).used_memory < (keep + 1) * 1024);
    gs_store_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lazy_on_lookup),
        cmocka_unit_test(test_lazy_on_delete),
        cmocka_unit_test(test_set_update_clear_ttl),
        cmocka_unit_test(test_cycle_removes_due_keys_in_order),
        cmocka_unit_test(test_due_reports_without_removing),
        cmocka_unit_test(test_million_expire_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
