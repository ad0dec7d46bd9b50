/*
 * The intset and the set type: intset widths and upgrades at each
 * boundary, sorted order, validation; the set's intset -> hashtable
 * conversion at set-max-intset-entries (512 stays, 513 converts) and on
 * the first non-integer member, no conversion back; and a seeded random
 * run against a model checking membership and memory against a recount.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gridsync/types/intset/intset.h"
#include "gridsync/types/set/set.h"

static const struct gs_type_limits LIM = GS_TYPE_LIMITS_DEFAULT;

static void test_intset_widths(void **state)
{
    (void)state;
    unsigned char *is = gs_is_new();
    bool added;
    int64_t vals[] = {5, -3, 32767, -32768};
    for (int i = 0; i < 4; i++)
        assert_int_equal(gs_is_add(&is, vals[i], &added), 0);
    assert_int_equal(gs_is_width(is), 2);
    assert_int_equal(gs_is_add(&is, 32768, &added), 0); /* needs 32 bits */
    assert_true(added);
    assert_int_equal(gs_is_width(is), 4);
    assert_int_equal(gs_is_add(&is, INT64_MIN, &added), 0); /* below all: 64 bits */
    assert_int_equal(gs_is_width(is), 8);
    assert_int_equal(gs_is_add(&is, 5, &added), 0);
    assert_false(added);
    int64_t want[] = {INT64_MIN, -32768, -3, 5, 32767, 32768};
    assert_int_equal(gs_is_len(is), 6);
    for (uint32_t i = 0; i < 6; i++)
        assert_true(gs_is_get(is, i) == want[i]);
    assert_true(gs_is_find(is, 32768) && !gs_is_find(is, 4) && !gs_is_find(is, INT64_MAX));
    assert_true(gs_is_validate(is, gs_is_bytes(is)));
    assert_true(gs_is_remove(&is, -3));
    assert_false(gs_is_remove(&is, -3));
    assert_int_equal(gs_is_len(is), 5);
    assert_false(gs_is_validate(is, gs_is_bytes(is) - 1));
    free(is);
}

static void test_set_thresholds(void **state)
{
    (void)state;
    struct gs_obj o;
    bool added;
    char m[32];
    assert_int_equal(gs_set_init(&o), 0);
    for (int i = 0; i < 512; i++) {
        int len = snprintf(m, sizeof(m), "%d", i * 7 - 1000);
        assert_int_equal(gs_set_add(&o, m, (size_t)len, &LIM, &added), 0);
    }
    assert_int_equal(o.enc, GS_ENC_INTSET); /* exactly at the limit */
    assert_int_equal(gs_set_add(&o, "9999999", 7, &LIM, &added), 0);
    assert_int_equal(o.enc, GS_ENC_HASHTABLE);
    assert_int_equal(gs_set_len(&o), 513);
    assert_true(gs_set_contains(&o, "-1000", 5));
    for (int i = 0; i < 510; i++) {
        int len = snprintf(m, sizeof(m), "%d", i * 7 - 1000);
        assert_true(gs_set_remove(&o, m, (size_t)len));
    }
    assert_int_equal(o.enc, GS_ENC_HASHTABLE); /* no conversion back */
    assert_int_equal(gs_set_mem(&o), gs_set_recount(&o));
    gs_set_free(&o);

    assert_int_equal(gs_set_init(&o), 0);
    assert_int_equal(gs_set_add(&o, "1", 1, &LIM, &added), 0);
    assert_int_equal(gs_set_add(&o, "01", 2, &LIM, &added), 0); /* not canonical */
    assert_int_equal(o.enc, GS_ENC_HASHTABLE);
    assert_true(gs_set_contains(&o, "1", 1) && gs_set_contains(&o, "01", 2));
    gs_set_free(&o);
}

static void test_random_against_model(void **state)
{
    (void)state;
    srand(777);
    struct gs_type_limits lim = LIM;
    lim.set_max_intset_entries = 40;
    for (int round = 0; round < 10; round++) {
        unsigned char in[200] = {0};
        size_t n = 0;
        struct gs_obj o;
        assert_int_equal(gs_set_init(&o), 0);
        for (int step = 0; step < 600; step++) {
            int i = rand() % (round < 5 ? 60 : 200);
            char m[16];
            /* members 0..99 are integers, 100.. are "m<i>" */
            int len =
                i < 100 ? snprintf(m, sizeof(m), "%d", i - 50) : snprintf(m, sizeof(m), "m%d", i);
            if (rand() % 3) {
                bool added;
                assert_int_equal(gs_set_add(&o, m, (size_t)len, &lim, &added), 0);
                assert_int_equal(added, !in[i]);
                n += !in[i];
                in[i] = 1;
            } else {
                bool had = gs_set_remove(&o, m, (size_t)len);
                assert_int_equal(had, in[i]);
                n -= in[i];
                in[i] = 0;
            }
            assert_int_equal(gs_set_len(&o), n);
            assert_int_equal(gs_set_mem(&o), gs_set_recount(&o));
        }
        size_t seen = 0;
        struct gs_set_iter it;
        const char *s;
        size_t len;
        int64_t prev = INT64_MIN;
        gs_set_iter_init(&it, &o);
        while (gs_set_iter_next(&it, &s, &len)) {
            seen++;
            if (o.enc == GS_ENC_INTSET) { /* ascending */
                int64_t v = strtoll(s, NULL, 10);
                assert_true(v > prev || seen == 1);
                prev = v;
            }
        }
        assert_int_equal(seen, n);
        gs_set_free(&o);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_intset_widths),
        cmocka_unit_test(test_set_thresholds),
        cmocka_unit_test(test_random_against_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
