/* monitor_stats: rates over windows from totals, restarts, the bounded
 * number of processes and history, and the renderings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/error.h"
#include "edumatcher/monitor/monitor_stats.h"

static struct core_beacon beacon(const char *proc, uint64_t pid, uint64_t up_ms, int64_t msgs)
{
    struct core_beacon b;
    memset(&b, 0, sizeof b);
    strcpy(b.proc, proc);
    b.pid = pid;
    b.up_ms = up_ms;
    b.lat_n = 10;
    b.lat_p50 = 1500;
    b.lat_p99 = 9000;
    b.n = 2;
    strcpy(b.m[0].name, "msgs_in");
    b.m[0].kind = CORE_METRIC_COUNTER;
    b.m[0].value = msgs;
    strcpy(b.m[1].name, "queue_depth");
    b.m[1].kind = CORE_METRIC_GAUGE;
    b.m[1].value = 4;
    return b;
}

static void test_rates(void **state)
{
    struct em_mon *m = malloc(sizeof *m);
    em_mon_init(m);
    /* 1000 msgs/s for 20 s, then 5000 msgs/s for 5 s, a beacon a second. */
    int64_t total = 0;
    for (uint64_t t = 0; t <= 25; t++) {
        struct core_beacon b = beacon("engine", 7, t * 1000, total);
        assert_int_equal(em_mon_ingest(m, &b, t * 1000), 0);
        total += t < 20 ? 1000 : 5000;
    }
    assert_int_equal(m->n, 1);
    const struct em_mon_proc *p = &m->p[0];
    double r;
    assert_int_equal(em_mon_rate(p, "msgs_in", 0, &r), 0);
    assert_true(r > 4999 && r < 5001);
    assert_int_equal(em_mon_rate(p, "msgs_in", 1000, &r), 0);
    assert_true(r > 4999 && r < 5001);
    assert_int_equal(em_mon_rate(p, "msgs_in", 10000, &r), 0);
    /* last 10 s: 5 s at 1000 and 5 s at 5000 */
    assert_true(r > 2999 && r < 3001);
    assert_int_equal(em_mon_rate(p, "nope", 1000, &r), CORE_ENOTFOUND);
    assert_int_equal(em_mon_rate(p, "queue_depth", 1000, &r), CORE_ENOTFOUND);
    int64_t v;
    assert_true(em_mon_value(p, "queue_depth", &v));
    assert_int_equal(v, 4);
    free(m);
}

static void test_restart_starts_new_history(void **state)
{
    struct em_mon *m = malloc(sizeof *m);
    em_mon_init(m);
    struct core_beacon b = beacon("gw", 1, 1000, 500);
    em_mon_ingest(m, &b, 0);
    b = beacon("gw", 1, 2000, 1500);
    em_mon_ingest(m, &b, 0);
    b = beacon("gw", 2, 500, 10); /* new pid */
    em_mon_ingest(m, &b, 0);
    double r;
    assert_int_equal(em_mon_rate(&m->p[0], "msgs_in", 60000, &r), CORE_ENOTFOUND);
    assert_int_equal(m->p[0].restarts, 1);
    b = beacon("gw", 2, 1500, 110);
    em_mon_ingest(m, &b, 0);
    assert_int_equal(em_mon_rate(&m->p[0], "msgs_in", 60000, &r), 0);
    assert_true(r > 99 && r < 101);
    /* a counter going backwards with the same pid is a restart too */
    b = beacon("gw", 2, 2500, 50);
    em_mon_ingest(m, &b, 0);
    assert_int_equal(m->p[0].restarts, 2);
    free(m);
}

static void test_bounds(void **state)
{
    struct em_mon *m = malloc(sizeof *m);
    em_mon_init(m);
    char name[16];
    for (int i = 0; i < EM_MON_PROCS; i++) {
        snprintf(name, sizeof name, "p%d", i);
        struct core_beacon b = beacon(name, 1, 0, 0);
        assert_int_equal(em_mon_ingest(m, &b, 0), 0);
    }
    struct core_beacon b = beacon("extra", 1, 0, 0);
    assert_int_equal(em_mon_ingest(m, &b, 0), CORE_ETOOBIG);
    /* History wraps: the oldest beacons are dropped, rates still work. */
    for (uint64_t t = 1; t < 3 * EM_MON_HISTORY; t++) {
        b = beacon("p0", 1, t * 1000, (int64_t)t * 10);
        em_mon_ingest(m, &b, 0);
    }
    assert_int_equal(m->p[0].count, EM_MON_HISTORY);
    double r;
    assert_int_equal(em_mon_rate(&m->p[0], "msgs_in", 3600 * 1000, &r), 0);
    assert_true(r > 9.99 && r < 10.01);
    free(m);
}

static void test_renderings(void **state)
{
    struct em_mon *m = malloc(sizeof *m);
    em_mon_init(m);
    struct core_beacon b = beacon("engine", 9, 1000, 100);
    em_mon_ingest(m, &b, 1000);
    b = beacon("engine", 9, 2000, 300);
    em_mon_ingest(m, &b, 2000);
    struct core_http_response res = {0};
    em_mon_json(m, 2500, 3000, &res);
    core_http_write(&res, "", 1);
    assert_non_null(strstr(res.body.data, "\"proc\":\"engine\""));
    assert_non_null(strstr(res.body.data, "\"stale\":false"));
    assert_non_null(strstr(res.body.data, "\"1s\":200.0"));
    assert_non_null(strstr(res.body.data, "\"queue_depth\":4"));
    assert_non_null(strstr(res.body.data, "\"lat_p99_ns\":9000"));
    /* A beacon without samples has no percentiles (not 0). */
    b = beacon("idle", 5, 1000, 0);
    b.lat_n = 0;
    em_mon_ingest(m, &b, 2000);
    core_buf_reset(&res.body);
    em_mon_json(m, 2500, 3000, &res);
    core_http_write(&res, "", 1);
    assert_non_null(strstr(res.body.data, "\"proc\":\"idle\""));
    assert_non_null(strstr(res.body.data, "\"lat_n\":0,\"lat_p50_ns\":null,\"lat_p99_ns\":null"));
    core_buf_reset(&res.body);
    em_mon_json(m, 9000, 3000, &res);
    core_http_write(&res, "", 1);
    assert_non_null(strstr(res.body.data, "\"stale\":true"));
    struct core_buf out = {0};
    em_mon_prometheus(m, 2500, 3000, &out);
    core_buf_append(&out, "", 1);
    const char *t = out.data;
    assert_non_null(strstr(t, "# TYPE edumatcher_msgs_in_total counter\n"
                              "edumatcher_msgs_in_total{proc=\"engine\"} 300\n"));
    assert_non_null(strstr(t, "# TYPE edumatcher_queue_depth gauge\n"
                              "edumatcher_queue_depth{proc=\"engine\"} 4\n"));
    assert_non_null(strstr(t, "edumatcher_up{proc=\"engine\"} 1\n"));
    /* The beacon has no histogram: none is invented. */
    assert_null(strstr(t, "edumatcher_handle_latency_seconds_bucket"));
    assert_null(strstr(t, "name=")); /* one metric name per counter */
    assert_null(strstr(t, "rate"));  /* no precomputed rates */
    free(out.data);

    /* A beacon with a histogram: cumulative buckets in seconds. */
    b = beacon("engine", 9, 3000, 400);
    b.has_hist = true;
    b.lat_h[0] = 2;
    b.lat_h[6] = 3;
    b.lat_h[CORE_METRICS_LAT_BOUNDS] = 1;
    b.lat_cnt = 6;
    b.lat_sum = 1500000000;
    em_mon_ingest(m, &b, 3000);
    out = (struct core_buf){0};
    em_mon_prometheus(m, 9000, 3000, &out);
    core_buf_append(&out, "", 1);
    t = out.data;
    assert_non_null(
        strstr(t, "edumatcher_handle_latency_seconds_bucket{proc=\"engine\",le=\"1e-06\"} 2\n"));
    assert_non_null(
        strstr(t, "edumatcher_handle_latency_seconds_bucket{proc=\"engine\",le=\"5e-05\"} 2\n"));
    assert_non_null(
        strstr(t, "edumatcher_handle_latency_seconds_bucket{proc=\"engine\",le=\"0.0001\"} 5\n"));
    assert_non_null(
        strstr(t, "edumatcher_handle_latency_seconds_bucket{proc=\"engine\",le=\"+Inf\"} 6\n"));
    assert_non_null(strstr(t, "edumatcher_handle_latency_seconds_sum{proc=\"engine\"} 1.5\n"));
    assert_non_null(strstr(t, "edumatcher_handle_latency_seconds_count{proc=\"engine\"} 6\n"));
    /* silent for 6 s with a 3 s limit */
    assert_non_null(strstr(t, "edumatcher_up{proc=\"engine\"} 0\n"));
    free(out.data);
    core_buf_free(&res.body);
    free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rates),
        cmocka_unit_test(test_restart_starts_new_history),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_renderings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
