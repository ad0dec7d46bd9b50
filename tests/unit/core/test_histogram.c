/* Histogram: exact below 256, bounded relative error above, percentiles. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/histogram.h"

static struct core_hist h;

static void test_small_values_exact(void **state)
{
    core_hist_reset(&h);
    for (uint64_t v = 1; v <= 100; v++)
        core_hist_record(&h, v);
    assert_int_equal(h.count, 100);
    assert_int_equal(core_hist_percentile(&h, 50), 50);
    assert_int_equal(core_hist_percentile(&h, 99), 99);
    assert_int_equal(core_hist_percentile(&h, 100), 100);
    assert_int_equal(h.min, 1);
    assert_true(core_hist_mean(&h) > 50.4 && core_hist_mean(&h) < 50.6);
}

static void test_bucket_bounds_cover_every_value(void **state)
{
    /* Every value lies within its bucket's bounds, and the bounds are
     * within 1/128 of each other. */
    uint64_t v = 1;
    for (int i = 0; i < 2000; i++) {
        unsigned idx = core_hist_index(v);
        assert_true(idx < CORE_HIST_BUCKETS);
        uint64_t lo = core_hist_bucket_low(idx), hi = core_hist_bucket_high(idx);
        assert_true(lo <= v && v <= hi);
        assert_true(hi - lo <= lo / 128 + 1);
        v = v + v / 37 + 1;
        if (v > (UINT64_MAX >> 2))
            break;
    }
    unsigned last = core_hist_index(UINT64_MAX);
    assert_int_equal(last, CORE_HIST_BUCKETS - 1);
    assert_true(core_hist_bucket_high(last) == UINT64_MAX);
}

static void test_percentile_relative_error(void **state)
{
    core_hist_reset(&h);
    for (uint64_t v = 1000; v < 1001000; v += 1000)
        core_hist_record(&h, v);
    uint64_t p50 = core_hist_percentile(&h, 50);
    assert_true(p50 >= 500000 && p50 <= 500000 + 500000 / 128 + 1);
    uint64_t p99 = core_hist_percentile(&h, 99);
    assert_true(p99 >= 990000 && p99 <= 990000 + 990000 / 128 + 1);
}

static void test_merge(void **state)
{
    static struct core_hist a, b;
    core_hist_reset(&a);
    core_hist_reset(&b);
    core_hist_record(&a, 10);
    core_hist_record(&b, 1000000);
    core_hist_merge(&a, &b);
    assert_int_equal(a.count, 2);
    assert_int_equal(a.min, 10);
    assert_int_equal(a.max, 1000000);
    assert_int_equal(core_hist_percentile(&a, 50), 10);
}

static void test_empty(void **state)
{
    core_hist_reset(&h);
    assert_int_equal(core_hist_percentile(&h, 99), 0);
    assert_true(core_hist_mean(&h) == 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_values_exact),
        cmocka_unit_test(test_bucket_bounds_cover_every_value),
        cmocka_unit_test(test_percentile_relative_error),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
