/* prom: family headers, counter naming, label escaping, number forms,
 * cumulative histograms, refusals that leave the buffer untouched, and the
 * process_* figures read from /proc. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/error.h"
#include "core/prom.h"

static char *text(struct core_buf *b)
{
    core_buf_append(b, "", 1);
    b->len--;
    return b->data;
}

static void test_names(void **state)
{
    assert_true(core_prom_valid_name("edumatcher_orders_total"));
    assert_true(core_prom_valid_name("a:b_c9"));
    assert_false(core_prom_valid_name("9a"));
    assert_false(core_prom_valid_name("a-b"));
    assert_false(core_prom_valid_name(""));
    assert_true(core_prom_valid_label("proc"));
    assert_false(core_prom_valid_label("__name__"));
    assert_false(core_prom_valid_label("a:b"));
}

static void test_family_and_samples(void **state)
{
    struct core_buf b = {0};
    assert_int_equal(core_prom_family(&b, "orders_total", CORE_PROM_COUNTER, "Orders\nin \\ all."),
                     0);
    struct core_prom_label l[] = {{"proc", "eng\"ine\\\n2"}, {"sym", "ABC"}};
    assert_int_equal(core_prom_u64(&b, "orders_total", l, 2, UINT64_MAX), 0);
    assert_int_equal(core_prom_family(&b, "depth", CORE_PROM_GAUGE, "Depth."), 0);
    assert_int_equal(core_prom_i64(&b, "depth", NULL, 0, -3), 0);
    assert_int_equal(core_prom_double(&b, "depth", l + 1, 1, 0.1), 0);
    assert_int_equal(core_prom_double(&b, "depth", l + 1, 1, 20000), 0);
    assert_int_equal(core_prom_double(&b, "depth", l + 1, 1, INFINITY), 0);
    assert_int_equal(core_prom_double(&b, "depth", l + 1, 1, NAN), 0);
    assert_string_equal(text(&b), "# HELP orders_total Orders\\nin \\\\ all.\n"
                                  "# TYPE orders_total counter\n"
                                  "orders_total{proc=\"eng\\\"ine\\\\\\n2\",sym=\"ABC\"} "
                                  "18446744073709551615\n"
                                  "# HELP depth Depth.\n"
                                  "# TYPE depth gauge\n"
                                  "depth -3\n"
                                  "depth{sym=\"ABC\"} 0.1\n"
                                  "depth{sym=\"ABC\"} 20000\n"
                                  "depth{sym=\"ABC\"} +Inf\n"
                                  "depth{sym=\"ABC\"} NaN\n");
    core_buf_free(&b);
}

static void test_refusals_leave_buffer(void **state)
{
    struct core_buf b = {0};
    struct core_prom_label bad[] = {{"__x", "v"}};
    struct core_prom_label le[] = {{"le", "1"}};
    assert_int_equal(core_prom_family(&b, "orders", CORE_PROM_COUNTER, "no _total"), CORE_EINVAL);
    assert_int_equal(core_prom_family(&b, "lat_count", CORE_PROM_HISTOGRAM, "x"), CORE_EINVAL);
    assert_int_equal(core_prom_family(&b, "x", CORE_PROM_GAUGE, NULL), CORE_EINVAL);
    assert_int_equal(core_prom_u64(&b, "a-b", NULL, 0, 1), CORE_EINVAL);
    assert_int_equal(core_prom_u64(&b, "a", bad, 1, 1), CORE_EINVAL);
    double bounds[] = {2, 1};
    uint64_t counts[] = {1, 1, 1};
    assert_int_equal(core_prom_histogram(&b, "h", NULL, 0, bounds, counts, 2, 0), CORE_EINVAL);
    assert_int_equal(core_prom_histogram(&b, "h", le, 1, bounds, counts, 0, 0), CORE_EINVAL);
    assert_int_equal(b.len, 0);
    core_buf_free(&b);
}

static void test_histogram_cumulative(void **state)
{
    struct core_buf b = {0};
    double bounds[] = {0.000001, 0.0005, 1};
    uint64_t counts[] = {2, 0, 5, 1};
    struct core_prom_label l[] = {{"proc", "gw"}};
    assert_int_equal(core_prom_family(&b, "lat_seconds", CORE_PROM_HISTOGRAM, "Latency."), 0);
    assert_int_equal(core_prom_histogram(&b, "lat_seconds", l, 1, bounds, counts, 3, 1.25), 0);
    assert_string_equal(text(&b), "# HELP lat_seconds Latency.\n"
                                  "# TYPE lat_seconds histogram\n"
                                  "lat_seconds_bucket{proc=\"gw\",le=\"1e-06\"} 2\n"
                                  "lat_seconds_bucket{proc=\"gw\",le=\"0.0005\"} 2\n"
                                  "lat_seconds_bucket{proc=\"gw\",le=\"1\"} 7\n"
                                  "lat_seconds_bucket{proc=\"gw\",le=\"+Inf\"} 8\n"
                                  "lat_seconds_sum{proc=\"gw\"} 1.25\n"
                                  "lat_seconds_count{proc=\"gw\"} 8\n");
    b.len = 0;
    assert_int_equal(core_prom_histogram(&b, "h", NULL, 0, NULL, counts, 0, 0), 0);
    assert_string_equal(text(&b), "h_bucket{le=\"+Inf\"} 2\nh_sum 0\nh_count 2\n");
    core_buf_free(&b);
}

static void test_oom_is_sticky(void **state)
{
    struct core_buf b = {0};
    b.oom = true;
    assert_int_equal(core_prom_family(&b, "x", CORE_PROM_GAUGE, "x"), CORE_ENOMEM);
    assert_int_equal(core_prom_u64(&b, "x", NULL, 0, 1), CORE_ENOMEM);
    assert_int_equal(b.len, 0);
}

static void test_process(void **state)
{
    struct core_prom_process p;
    assert_int_equal(core_prom_process_read(&p), 0);
    assert_true(p.resident_bytes > 0);
    assert_true(p.virtual_bytes >= p.resident_bytes);
    assert_true(p.open_fds >= 3); /* stdin, stdout, stderr */
    assert_true(p.max_fds >= p.open_fds);
    assert_true(p.start_seconds > 1.5e9);
    assert_true(p.cpu_seconds >= 0);
    /* An extra descriptor is seen. */
    int fd = dup(0);
    struct core_prom_process q;
    assert_int_equal(core_prom_process_read(&q), 0);
    close(fd);
    assert_int_equal(q.open_fds, p.open_fds + 1);

    struct core_buf b = {0};
    assert_int_equal(core_prom_process(&b, &p), 0);
    const char *t = text(&b);
    assert_non_null(strstr(t, "# TYPE process_cpu_seconds_total counter\n"));
    char want[64];
    snprintf(want, sizeof want, "\nprocess_open_fds %llu\n", (unsigned long long)p.open_fds);
    assert_non_null(strstr(t, want));
    core_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_family_and_samples),
        cmocka_unit_test(test_refusals_leave_buffer),
        cmocka_unit_test(test_histogram_cumulative),
        cmocka_unit_test(test_oom_is_sticky),
        cmocka_unit_test(test_process),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
