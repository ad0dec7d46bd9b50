/* Engine: long random streams with every invariant checked after each
 * message (the checked build aborts on a violation), determinism, the
 * binary-frame path, the injected clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "edumatcher/gateway/alf/alf.h"
#include "edumatcher/engine/engine.h"
#include "em_drive.h"
#include "em_gen.h"

struct capture {
    uint64_t hash, events;
    char last[EM_ALF_FORMAT_MAX + 1];
    uint16_t last_gw;
};

static void sink(void *ctx, uint16_t gw, const struct em_msg *ev)
{
    struct capture *c = ctx;
    size_t n = em_alf_format(ev, c->last);
    c->last[n] = 0;
    c->last_gw = gw;
    for (size_t i = 0; i < n; i++)
        c->hash = (c->hash ^ (uint8_t)c->last[i]) * 1099511628211ull;
    c->hash = (c->hash ^ gw) * 1099511628211ull;
    c->events++;
}

static uint64_t run_random(uint64_t seed, int lines, uint64_t *events)
{
    struct capture c = {.hash = 1469598103934665603ull};
    struct em_engine_config cfg = {.sink = sink, .sink_ctx = &c};
    struct em_engine *e = em_engine_new(&cfg);
    assert_non_null(e);
    char setup[8][128];
    int ns = em_gen_setup(setup, 8);
    for (int i = 0; i < ns; i++)
        assert_int_equal(em_drive_line(e, setup[i], strlen(setup[i])), 0);
    struct em_gen g;
    em_gen_init(&g, seed);
    char buf[256];
    for (int i = 0; i < lines; i++) {
        size_t n = em_gen_line(&g, buf);
        assert_int_equal(em_drive_line(e, buf, n), 0);
    }
    const char *what = "";
    assert_int_equal(em_engine_check(e, &what), 0);
    struct em_engine_stats st;
    em_engine_stats(e, &st);
    assert_int_equal(st.events, c.events);
    em_engine_free(e);
    *events = c.events;
    return c.hash;
}

static void test_random_streams_keep_invariants(void **state)
{
    for (uint64_t seed = 1; seed <= 4; seed++) {
        uint64_t ev;
        run_random(seed, 30000, &ev);
        assert_true(ev > 30000); /* the mix really trades */
    }
}

static void test_deterministic(void **state)
{
    uint64_t e1, e2;
    uint64_t h1 = run_random(42, 20000, &e1), h2 = run_random(42, 20000, &e2);
    assert_int_equal(e1, e2);
    assert_true(h1 == h2);
    uint64_t h3 = run_random(43, 20000, &e2);
    assert_true(h1 != h3);
}

static void feed(struct em_engine *e, const char *line)
{
    assert_int_equal(em_drive_line(e, line, strlen(line)), 0);
}

static void test_binary_frames_drive_the_engine(void **state)
{
    struct capture c = {0};
    struct em_engine_config cfg = {.sink = sink, .sink_ctx = &c};
    struct em_engine *e = em_engine_new(&cfg);
    feed(e, "OPS SYMBOL sym=ABC tick=0.01");
    int gw = em_engine_gateway(e, "GW1", 3);
    assert_true(gw > 0);
    assert_int_equal(em_engine_gateway(e, "GW1", 3), gw);
    assert_string_equal(em_engine_gateway_name(e, (uint16_t)gw), "GW1");
    assert_true(em_engine_gateway(e, "bad id", 6) < 0);
    /* a gateway would parse ALF, send a frame; the engine decodes it */
    const char *line = "NEW cl=x1 sym=ABC side=B qty=5 px=10.00";
    struct em_msg m, d;
    assert_int_equal(em_alf_parse(line, strlen(line), &m), 0);
    uint8_t f[EM_FRAME_MAX];
    int n = em_frame_encode(&m, f, sizeof f);
    assert_int_equal(em_frame_decode(f, (size_t)n, &d), n);
    assert_int_equal(em_engine_submit(e, (uint16_t)gw, &d), 0);
    assert_string_equal(c.last, "ACK cl=x1 oid=1");
    assert_int_equal(c.last_gw, gw);
    /* operator messages from a client are refused */
    assert_int_equal(em_engine_authorize(e, (uint16_t)gw, EM_MSG_TICK), EM_REJ_AUTH);
    em_engine_free(e);
}

static void test_injected_clock_fires_breaker_resume(void **state)
{
    struct capture c = {0};
    struct em_engine_config cfg = {.sink = sink, .sink_ctx = &c, .start_ms = 1000};
    struct em_engine *e = em_engine_new(&cfg);
    feed(e, "OPS SYMBOL sym=ABC tick=1 ref=100 cb_band=1 cb_ms=500");
    feed(e, "S NEW cl=s1 sym=ABC side=S qty=1 px=110");
    feed(e, "B NEW cl=b1 sym=ABC side=B qty=1 px=110"); /* outside the band: auction */
    assert_string_equal(c.last, "ACK cl=b1 oid=2");
    uint64_t before = c.events;
    em_engine_set_time(e, 1499);
    assert_int_equal(c.events, before);
    em_engine_set_time(e, 1500); /* resume: the uncross trades */
    assert_int_equal(c.events, before + 2);
    assert_string_equal(c.last, "FILL cl=s1 oid=1 tid=1 px=110 qty=1 leaves=0 cum=1");
    em_engine_set_time(e, 10); /* never backwards */
    em_engine_free(e);
}

/* A breaker resume due beyond the clock's range never fires: the deadline
 * saturates instead of wrapping round to a time already past. */
static void test_breaker_resume_near_the_end_of_time(void **state)
{
    struct capture c = {0};
    struct em_engine_config cfg = {.sink = sink, .sink_ctx = &c, .start_ms = UINT64_MAX - 100};
    struct em_engine *e = em_engine_new(&cfg);
    feed(e, "OPS SYMBOL sym=ABC tick=1 ref=100 cb_band=1 cb_ms=500");
    feed(e, "S NEW cl=s1 sym=ABC side=S qty=1 px=110");
    feed(e, "B NEW cl=b1 sym=ABC side=B qty=1 px=110"); /* outside the band: auction */
    assert_string_equal(c.last, "ACK cl=b1 oid=2");
    uint64_t before = c.events;
    feed(e, "OPS TICK ms=0");
    em_engine_set_time(e, UINT64_MAX - 1);
    assert_int_equal(c.events, before); /* still in AUCTION */
    feed(e, "B NEW cl=b2 sym=ABC side=B qty=1 px=110 tif=IOC");
    assert_string_equal(c.last, "REJECT cl=b2 reason=PHASE");
    em_engine_free(e);
}

static void test_depth_snapshot(void **state)
{
    struct capture c = {0};
    struct em_engine_config cfg = {.sink = sink, .sink_ctx = &c};
    struct em_engine *e = em_engine_new(&cfg);
    feed(e, "OPS SYMBOL sym=ABC tick=0.05");
    feed(e, "A NEW cl=a1 sym=ABC side=B qty=10 px=9.95 peak=2");
    feed(e, "A NEW cl=a2 sym=ABC side=B qty=3 px=9.95");
    feed(e, "A NEW cl=a3 sym=ABC side=B qty=4 px=10.00");
    feed(e, "B NEW cl=b1 sym=ABC side=S qty=1 px=10.50");
    struct em_depth_level d[4];
    assert_int_equal(em_engine_depth(e, "ABC", EM_SIDE_BUY, d, 4), 2);
    assert_int_equal(d[0].px.mant, 1000); /* 10.00, best first */
    assert_int_equal(d[0].px.dec, 2);
    assert_int_equal(d[0].shown, 4);
    assert_int_equal(d[1].px.mant, 995);
    assert_int_equal(d[1].shown, 5); /* the iceberg shows its peak only */
    assert_int_equal(d[1].orders, 2);
    assert_int_equal(em_engine_depth(e, "ABC", EM_SIDE_BUY, d, 1), 1);
    assert_int_equal(em_engine_depth(e, "ABC", EM_SIDE_SELL, d, 4), 1);
    assert_int_equal(d[0].px.mant, 1050);
    assert_int_equal(em_engine_depth(e, "NOPE", EM_SIDE_SELL, d, 4), CORE_ENOTFOUND);
    uint8_t phase;
    struct em_price last;
    int has_last;
    assert_int_equal(em_engine_symbol_state(e, "ABC", &phase, &last, &has_last), 0);
    assert_int_equal(phase, EM_PHASE_CONTINUOUS);
    assert_int_equal(has_last, 0);
    feed(e, "B NEW cl=b2 sym=ABC side=S qty=1 px=10.00");
    assert_int_equal(em_engine_symbol_state(e, "ABC", &phase, &last, &has_last), 0);
    assert_int_equal(has_last, 1);
    assert_int_equal(last.mant, 1000);
    em_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_streams_keep_invariants),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_binary_frames_drive_the_engine),
        cmocka_unit_test(test_injected_clock_fires_breaker_resume),
        cmocka_unit_test(test_breaker_resume_near_the_end_of_time),
        cmocka_unit_test(test_depth_snapshot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
