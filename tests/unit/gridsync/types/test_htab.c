/*
 * The collections' hash table: set/find/overwrite/delete, growth and
 * shrinking, mem equal to a recount after every step, the scan contract
 * (every element present throughout is visited) while the table grows and
 * shrinks between calls, and random picks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gridsync/types/htab/htab.h"

static void key_of(char *buf, int i, size_t *len)
{
    *len = (size_t)snprintf(buf, 32, "key:%d", i);
}

static void test_basic_and_mem(void **state)
{
    (void)state;
    struct gs_htab *t = gs_htab_new();
    assert_non_null(t);
    char k[32];
    size_t kl;
    for (int i = 0; i < 1000; i++) {
        key_of(k, i, &kl);
        bool created;
        assert_int_equal(gs_htab_set(t, k, kl, "v", 1, &created), 0);
        assert_true(created);
        assert_int_equal(t->mem, gs_htab_recount(t));
    }
    assert_int_equal(t->used, 1000);
    key_of(k, 7, &kl);
    bool created;
    assert_int_equal(gs_htab_set(t, k, kl, "a longer value", 14, &created), 0);
    assert_false(created);
    struct gs_helem *e = gs_htab_find(t, k, kl);
    assert_non_null(e);
    assert_int_equal(e->vlen, 14);
    assert_memory_equal(gs_helem_val(e), "a longer value", 14);
    assert_int_equal(t->mem, gs_htab_recount(t));
    uint64_t grown = t->mask + 1;
    for (int i = 0; i < 1000; i++) {
        key_of(k, i, &kl);
        assert_true(gs_htab_delete(t, k, kl));
        assert_false(gs_htab_delete(t, k, kl));
        assert_int_equal(t->mem, gs_htab_recount(t));
    }
    assert_true(grown >= 1000);
    assert_int_equal(t->used, 0);
    assert_null(t->bucket); /* an empty table keeps no array */
    assert_int_equal(t->mem, gs_htab_recount(t));
    gs_htab_free(t);
}

struct seen {
    unsigned char *hit;
};

static void mark(void *arg, struct gs_helem *e)
{
    struct seen *s = arg;
    int i = atoi(gs_helem_key(e) + 4);
    s->hit[i] = 1;
}

static void test_scan_across_resizes(void **state)
{
    (void)state;
    struct gs_htab *t = gs_htab_new();
    char k[32];
    size_t kl;
    enum { N = 2000 };
    for (int i = 0; i < N; i++) {
        key_of(k, i, &kl);
        assert_int_equal(gs_htab_set(t, k, kl, "", 0, NULL), 0);
    }
    struct seen s = {calloc(N * 4, 1)};
    uint64_t cursor = 0;
    int step = 0, next = N;
    do {
        cursor = gs_htab_scan(t, cursor, 50, mark, &s);
        /* between calls: grow (new keys) and later shrink (delete keys
         * N/2.. that are not part of the contract) */
        if (step < 10) {
            for (int j = 0; j < 300; j++) {
                key_of(k, next++, &kl);
                gs_htab_set(t, k, kl, "", 0, NULL);
            }
        } else if (step == 10) {
            for (int j = N; j < next; j++) {
                key_of(k, j, &kl);
                gs_htab_delete(t, k, kl);
            }
        }
        step++;
    } while (cursor != 0);
    for (int i = 0; i < N; i++)
        assert_true(s.hit[i]);
    free(s.hit);
    gs_htab_free(t);
}

static void test_random(void **state)
{
    (void)state;
    struct gs_htab *t = gs_htab_new();
    assert_null(gs_htab_random(t));
    char k[32];
    size_t kl;
    for (int i = 0; i < 20; i++) {
        key_of(k, i, &kl);
        gs_htab_set(t, k, kl, "", 0, NULL);
    }
    unsigned char hit[20] = {0};
    for (int i = 0; i < 2000; i++) {
        struct gs_helem *e = gs_htab_random(t);
        assert_non_null(e);
        hit[atoi(gs_helem_key(e) + 4)] = 1;
    }
    for (int i = 0; i < 20; i++)
        assert_true(hit[i]); /* 2000 draws over 20 elements reach each one */
    gs_htab_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_and_mem),
        cmocka_unit_test(test_scan_across_resizes),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
