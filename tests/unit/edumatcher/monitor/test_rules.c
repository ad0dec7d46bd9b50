/* rules: each health rule driven by a synthetic beacon series: stale
 * against the process's own interval, memory growth (a steady leak warns;
 * a step at the open, recent or old, does not), queue depth, dropped
 * messages within the window, and the renderings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/error.h"
#include "edumatcher/monitor/rules.h"

#define MIB    (1024ull * 1024ull)
#define MINUTE (60 * 1000ull)

static struct em_mon *m;
static struct em_rules_config cfg;

static int setup(void **state)
{
    m = malloc(sizeof *m);
    em_mon_init(m);
    em_rules_default(&cfg);
    return m ? 0 : -1;
}

static int teardown(void **state)
{
    free(m);
    return 0;
}

struct sample {
    uint64_t up_ms, rss;
    int64_t depth;     /* < 0: no queue_depth gauge */
    uint64_t bus_full; /* a drop counter */
};

static void feed(const char *proc, uint64_t pid, struct sample s, uint64_t now_ms)
{
    struct core_beacon b;
    memset(&b, 0, sizeof b);
    strcpy(b.proc, proc);
    b.pid = pid;
    b.up_ms = s.up_ms;
    b.rss = s.rss;
    strcpy(b.m[0].name, "bus_full");
    b.m[0].kind = CORE_METRIC_COUNTER;
    b.m[0].value = (int64_t)s.bus_full;
    b.n = 1;
    if (s.depth >= 0) {
        strcpy(b.m[1].name, "queue_depth");
        b.m[1].kind = CORE_METRIC_GAUGE;
        b.m[1].value = s.depth;
        b.n = 2;
    }
    assert_int_equal(em_mon_ingest(m, &b, now_ms), 0);
}

static struct em_rule_result eval(unsigned proc, enum em_rule r, uint64_t now_ms)
{
    struct em_rule_result res[EM_RULE_COUNT];
    em_rules_eval(&cfg, &m->p[proc], now_ms, res);
    return res[r];
}

static void test_stale_uses_the_process_interval(void **state)
{
    for (uint64_t t = 1; t <= 5; t++)
        feed("engine", 1, (struct sample){t * 1000, MIB, -1, 0}, 10000 + t * 1000);
    /* last beacon at 15000, interval 1000, 3 intervals */
    assert_int_equal(eval(0, EM_RULE_STALE, 18000).level, EM_RULE_OK);
    struct em_rule_result r = eval(0, EM_RULE_STALE, 18001);
    assert_int_equal(r.level, EM_RULE_ALARM);
    assert_true(r.value > 3.0 && r.value < 3.01);
    /* A process beaconing every 5 s is stale only after 15 s. */
    feed("slow", 2, (struct sample){5000, MIB, -1, 0}, 20000);
    feed("slow", 2, (struct sample){10000, MIB, -1, 0}, 25000);
    assert_int_equal(eval(1, EM_RULE_STALE, 39000).level, EM_RULE_OK);
    assert_int_equal(eval(1, EM_RULE_STALE, 40001).level, EM_RULE_ALARM);
}

/* One beacon a minute for `minutes`, RSS given by f(minute). */
static void series(const char *proc, uint64_t pid, unsigned minutes, uint64_t (*f)(unsigned))
{
    for (unsigned i = 0; i <= minutes; i++)
        feed(proc, pid, (struct sample){i * MINUTE + 1, f(i), -1, 0}, i * MINUTE + 1);
}

static uint64_t leak(unsigned i)
{
    return 100 * MIB + i * MIB / 2; /* 30 MiB an hour */
}

static uint64_t open_step_recent(unsigned i)
{
    return i < 170 ? 100 * MIB : 900 * MIB; /* the last 10 min of 3 h */
}

static uint64_t open_step_old(unsigned i)
{
    return i < 60 ? 100 * MIB : 900 * MIB; /* one step, 2 h ago */
}

static uint64_t small_leak(unsigned i)
{
    return 100 * MIB + i * MIB / 8;
}

static uint64_t leak_then_step(unsigned i)
{
    return leak(i) + (i >= 175 ? 500 * MIB : 0);
}

static void test_memory_steady_growth_warns(void **state)
{
    series("engine", 1, 180, leak);
    struct em_rule_result r = eval(0, EM_RULE_MEMORY_GROWTH, 180 * MINUTE);
    assert_int_equal(r.level, EM_RULE_WARNING);
    assert_true(r.value > 29.9 * MIB && r.value < 30.1 * MIB); /* bytes per hour */
    assert_non_null(strstr(r.reason, "steadily"));
}

static void test_memory_step_at_the_open_is_ignored(void **state)
{
    series("recent", 1, 180, open_step_recent);
    assert_int_equal(eval(0, EM_RULE_MEMORY_GROWTH, 180 * MINUTE).level, EM_RULE_OK);
    series("old", 2, 180, open_step_old);
    struct em_rule_result r = eval(1, EM_RULE_MEMORY_GROWTH, 180 * MINUTE);
    assert_int_equal(r.level, EM_RULE_OK);
    assert_non_null(strstr(r.reason, "steps"));
    /* A recent step on top of a steady leak does not hide the leak. */
    series("both", 3, 180, leak_then_step);
    assert_int_equal(eval(2, EM_RULE_MEMORY_GROWTH, 180 * MINUTE).level, EM_RULE_WARNING);
}

static void test_memory_needs_growth_and_history(void **state)
{
    series("small", 1, 180, small_leak); /* ~21 MiB over the span: below 64 */
    assert_int_equal(eval(0, EM_RULE_MEMORY_GROWTH, 180 * MINUTE).level, EM_RULE_OK);
    series("young", 2, 70, leak); /* 55 settled minutes < 1 h */
    struct em_rule_result r = eval(1, EM_RULE_MEMORY_GROWTH, 70 * MINUTE);
    assert_int_equal(r.level, EM_RULE_OK);
    assert_non_null(strstr(r.reason, "settled"));
    /* A lower threshold makes the same young-but-long-enough series warn. */
    cfg.mem_min_growth_bytes = 10 * MIB;
    cfg.mem_min_span_ms = 30 * MINUTE;
    assert_int_equal(eval(1, EM_RULE_MEMORY_GROWTH, 70 * MINUTE).level, EM_RULE_WARNING);
}

static void test_memory_history_restarts_with_the_process(void **state)
{
    series("engine", 1, 180, leak);
    assert_int_equal(eval(0, EM_RULE_MEMORY_GROWTH, 180 * MINUTE).level, EM_RULE_WARNING);
    feed("engine", 99, (struct sample){1000, 50 * MIB, -1, 0}, 181 * MINUTE);
    assert_int_equal(m->p[0].restarts, 1);
    assert_int_equal(eval(0, EM_RULE_MEMORY_GROWTH, 181 * MINUTE).level, EM_RULE_OK);
}

static void test_queue_depth(void **state)
{
    feed("nogauge", 1, (struct sample){1000, MIB, -1, 0}, 1000);
    assert_int_equal(eval(0, EM_RULE_QUEUE_DEPTH, 1000).level, EM_RULE_OK);
    feed("engine", 2, (struct sample){1000, MIB, 10000, 0}, 1000);
    assert_int_equal(eval(1, EM_RULE_QUEUE_DEPTH, 1000).level, EM_RULE_OK);
    feed("engine", 2, (struct sample){2000, MIB, 10001, 0}, 2000);
    struct em_rule_result r = eval(1, EM_RULE_QUEUE_DEPTH, 2000);
    assert_int_equal(r.level, EM_RULE_ALARM);
    assert_true(r.value == 10001.0);
}

static void test_dropped_within_the_window(void **state)
{
    /* 3 drops long ago, none since: a beacon a second for 2 minutes. */
    for (uint64_t t = 1; t <= 120; t++)
        feed("gateway", 1, (struct sample){t * 1000, MIB, -1, t < 30 ? t / 10 : 3}, t * 1000);
    assert_int_equal(eval(0, EM_RULE_DROPPED, 120000).level, EM_RULE_OK);
    feed("gateway", 1, (struct sample){121000, MIB, -1, 5}, 121000);
    struct em_rule_result r = eval(0, EM_RULE_DROPPED, 121000);
    assert_int_equal(r.level, EM_RULE_ALARM);
    assert_true(r.value == 2.0);
    assert_non_null(strstr(r.reason, "bus_full"));
    /* Not a configured drop counter: not an alarm. */
    assert_int_equal(em_rules_set_drop_counters(&cfg, "bad_frames"), 0);
    assert_int_equal(eval(0, EM_RULE_DROPPED, 121000).level, EM_RULE_OK);
}

static void test_drop_counter_list(void **state)
{
    assert_int_equal(em_rules_set_drop_counters(&cfg, "a,b_2"), 0);
    assert_int_equal(cfg.ndrop, 2);
    assert_string_equal(cfg.drop_counters[1], "b_2");
    assert_int_equal(em_rules_set_drop_counters(&cfg, "a,,b"), CORE_EINVAL);
    assert_int_equal(em_rules_set_drop_counters(&cfg, "a,"), CORE_EINVAL);
    assert_int_equal(em_rules_set_drop_counters(&cfg, "Bad"), CORE_EINVAL);
    assert_int_equal(em_rules_set_drop_counters(&cfg, "a,b,c,d,e,f,g,h,i"), CORE_EINVAL);
    assert_int_equal(cfg.ndrop, 2); /* unchanged by the refusals */
    assert_int_equal(em_rules_set_drop_counters(&cfg, ""), 0);
    assert_int_equal(cfg.ndrop, 0);
}

static void test_renderings(void **state)
{
    feed("engine", 1, (struct sample){1000, MIB, 20000, 0}, 1000);
    struct core_buf out = {0};
    em_rules_prometheus(&cfg, m, 1000, &out);
    core_buf_append(&out, "", 1);
    assert_non_null(strstr(out.data, "# TYPE edumatcher_health_rule_level gauge\n"));
    assert_non_null(
        strstr(out.data, "edumatcher_health_rule_level{proc=\"engine\",rule=\"queue_depth\"} 2\n"));
    assert_non_null(
        strstr(out.data, "edumatcher_health_rule_level{proc=\"engine\",rule=\"stale\"} 0\n"));
    assert_non_null(strstr(out.data,
                           "edumatcher_health_rule_value{proc=\"engine\",rule=\"queue_depth\"} "
                           "20000\n"));
    out.len = 0;
    em_rules_json(&cfg, m, 1000, &out);
    core_buf_append(&out, "", 1);
    assert_non_null(strstr(out.data, "{\"engine\":{\"stale\":{\"level\":\"ok\""));
    assert_non_null(strstr(out.data, "\"queue_depth\":{\"level\":\"alarm\",\"value\":20000,"));
    core_buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_stale_uses_the_process_interval, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_steady_growth_warns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_step_at_the_open_is_ignored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_needs_growth_and_history, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_history_restarts_with_the_process, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_queue_depth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dropped_within_the_window, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drop_counter_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_renderings, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
