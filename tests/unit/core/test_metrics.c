/* metrics: registry rules, 1-in-16 sampling, latency windows, beacon round
 * trip through the parser, and the parser's refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/error.h"
#include "core/metrics.h"

static struct core_metrics m;

static void test_registry(void **state)
{
    static uint64_t a;
    static int64_t g;
    assert_int_equal(core_metrics_init(&m, "Engine"), CORE_EINVAL);
    assert_int_equal(core_metrics_init(&m, "engine"), 0);
    assert_int_equal(core_metrics_counter(&m, "msgs_in", &a), 0);
    assert_int_equal(core_metrics_counter(&m, "msgs_in", &a), CORE_EEXISTS);
    assert_int_equal(core_metrics_gauge(&m, "bad name", &g), CORE_EINVAL);
    assert_int_equal(core_metrics_gauge(&m, "queue", &g), 0);
    char name[16];
    int rc = 0;
    for (int i = 0; rc == 0; i++) {
        snprintf(name, sizeof name, "x%d", i);
        rc = core_metrics_counter(&m, name, &a);
    }
    assert_int_equal(rc, CORE_ETOOBIG);
    assert_int_equal(m.n, CORE_METRICS_MAX);
}

static void test_sampling_one_in_16(void **state)
{
    core_metrics_init(&m, "engine");
    unsigned due = 0;
    for (int i = 0; i < 1600; i++)
        due += core_metrics_sample_due(&m);
    assert_int_equal(due, 100);
}

static void test_beacon_round_trip(void **state)
{
    static uint64_t msgs = 12345;
    static int64_t depth = -3;
    core_metrics_init(&m, "gateway");
    core_metrics_counter(&m, "msgs_in", &msgs);
    core_metrics_gauge(&m, "queue_depth", &depth);
    for (uint32_t i = 1; i <= 100; i++)
        core_metrics_record(&m, i * 1000);
    char line[CORE_BEACON_MAX];
    int n = core_metrics_beacon(&m, line, sizeof line);
    assert_true(n > 0);
    assert_int_equal(strlen(line), (size_t)n);

    struct core_beacon b;
    assert_int_equal(core_beacon_parse(line, (size_t)n, &b), 0);
    assert_string_equal(b.proc, "gateway");
    assert_int_equal(b.seq, 1);
    assert_int_equal(b.lat_n, 100);
    assert_int_equal(b.lat_p50, 50000);
    assert_int_equal(b.lat_p99, 99000);
    assert_int_equal(b.lat_max, 100000);
    assert_true(b.rss > 0);
    assert_int_equal(b.n, 2);
    assert_string_equal(b.m[0].name, "msgs_in");
    assert_int_equal(b.m[0].kind, CORE_METRIC_COUNTER);
    assert_int_equal(b.m[0].value, 12345);
    assert_string_equal(b.m[1].name, "queue_depth");
    assert_int_equal(b.m[1].kind, CORE_METRIC_GAUGE);
    assert_int_equal(b.m[1].value, -3);

    /* The next beacon's window holds only what came after. */
    core_metrics_record(&m, 7);
    n = core_metrics_beacon(&m, line, sizeof line);
    assert_int_equal(core_beacon_parse(line, (size_t)n, &b), 0);
    assert_int_equal(b.seq, 2);
    assert_int_equal(b.lat_n, 1);
    assert_int_equal(b.lat_p99, 7);
    n = core_metrics_beacon(&m, line, sizeof line);
    assert_int_equal(core_beacon_parse(line, (size_t)n, &b), 0);
    assert_int_equal(b.lat_n, 0);
    assert_int_equal(b.lat_p50, 0);

    /* More samples than the ring: only the newest RING are summarised. */
    for (uint32_t i = 0; i < 3 * CORE_METRICS_RING; i++)
        core_metrics_record(&m, i < 2 * CORE_METRICS_RING ? 1000000 : 5);
    n = core_metrics_beacon(&m, line, sizeof line);
    assert_int_equal(core_beacon_parse(line, (size_t)n, &b), 0);
    assert_int_equal(b.lat_n, CORE_METRICS_RING);
    assert_int_equal(b.lat_max, 5);

    /* Too small a buffer: refused, and the window is kept. */
    core_metrics_record(&m, 9);
    assert_int_equal(core_metrics_beacon(&m, line, 20), CORE_ETOOBIG);
    n = core_metrics_beacon(&m, line, sizeof line);
    assert_int_equal(core_beacon_parse(line, (size_t)n, &b), 0);
    assert_int_equal(b.lat_n, 1);
}

static void test_latency_histogram_accumulates(void **state)
{
    core_metrics_init(&m, "engine");
    for (uint32_t i = 1; i <= 100; i++)
        core_metrics_record(&m, i * 1000);
    char line[CORE_BEACON_MAX];
    struct core_beacon b;
    int n = core_metrics_beacon(&m, line, sizeof line);
    assert_int_equal(core_beacon_parse(line, (size_t)n, &b), 0);
    assert_true(b.has_hist);
    assert_int_equal(b.lat_cnt, 100);
    assert_int_equal(b.lat_sum, 5050 * 1000);
    /* bounds 1, 2, 5, 10, 20, 50, 100 us: inclusive upper ends */
    const uint64_t want[] = {1, 1, 3, 5, 10, 30, 50};
    for (unsigned k = 0; k < 7; k++)
        assert_int_equal(b.lat_h[k], want[k]);
    for (unsigned k = 7; k <= CORE_METRICS_LAT_BOUNDS; k++)
        assert_int_equal(b.lat_h[k], 0);

    /* Totals since the start: the next beacon adds to them; a refused
     * beacon (buffer too small) counts nothing twice. */
    core_metrics_record(&m, 2000000000u);
    assert_int_equal(core_metrics_beacon(&m, line, 150), CORE_ETOOBIG);
    n = core_metrics_beacon(&m, line, sizeof line);
    assert_int_equal(core_beacon_parse(line, (size_t)n, &b), 0);
    assert_int_equal(b.lat_n, 1);
    assert_int_equal(b.lat_cnt, 101);
    assert_int_equal(b.lat_h[CORE_METRICS_LAT_BOUNDS], 1);
    assert_int_equal(b.lat_h[6], 50);
    assert_int_equal(b.lat_sum, 5050 * 1000 + 2000000000ull);

    /* An older writer's beacon has no histogram. */
    const char *old = "health v=1 proc=x lat_n=1";
    assert_int_equal(core_beacon_parse(old, strlen(old), &b), 0);
    assert_false(b.has_hist);
}

static void test_parse_refusals(void **state)
{
    struct core_beacon b;
    const char *bad[] = {
        "",
        "health",
        "health v=1",                                 /* no proc */
        "health proc=x",                              /* no version */
        "health v=2 proc=x",                          /* unknown version */
        "health v=1 proc=X",                          /* bad name */
        "health v=1 proc=x  pid=1",                   /* empty token */
        "health v=1 proc=x pid",                      /* no = */
        "health v=1 proc=x pid=-1",                   /* not unsigned */
        "health v=1 proc=x c.a=1x",                   /* bad counter */
        "health v=1 proc=x c.a=-1",                   /* negative counter */
        "health v=1 proc=x g.=1",                     /* empty name */
        "health v=1 proc=x seq=99999999999999999999", /* too long */
        "status v=1 proc=x",
        "health v=1 proc=x lat_h=1,2,3",                               /* too few */
        "health v=1 proc=x lat_h=0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,",    /* empty last */
        "health v=1 proc=x lat_h=0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0", /* too many */
        "health v=1 proc=x lat_h=0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,x,0",   /* not a number */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (core_beacon_parse(bad[i], strlen(bad[i]), &b) != CORE_EPROTO)
            fail_msg("accepted: %s", bad[i]);
    const char *ok = "health v=1 proc=x newkey=whatever g.a=-5";
    assert_int_equal(core_beacon_parse(ok, strlen(ok), &b), 0);
    assert_int_equal(b.m[0].value, -5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_sampling_one_in_16),
        cmocka_unit_test(test_beacon_round_trip),
        cmocka_unit_test(test_latency_histogram_accumulates),
        cmocka_unit_test(test_parse_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
