/* Allocation count: once warmed up, the engine allocates nothing per
 * message (issue #3). malloc, calloc and realloc are wrapped at link time
 * (tests/unit/support/alloc_count.h) and counted; a calloc can be made to
 * fail, to check what the engine promises when memory runs out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/error.h"

#include "edumatcher/engine/engine.h"

#include "alloc_count.h"
#include "em_drive.h"
#include "em_gen.h"

static uint64_t events;

static void sink(void *ctx, uint16_t gw, const struct em_msg *ev)
{
    events++;
}

static void test_no_allocation_per_message_when_warm(void **state)
{
    struct em_engine_config cfg = {.sink = sink};
    struct em_engine *e = em_engine_new(&cfg);
    assert_non_null(e);
    char setup[8][128];
    int ns = em_gen_setup(setup, 8);
    for (int i = 0; i < ns; i++)
        em_drive_line(e, setup[i], strlen(setup[i]));
    struct em_gen g;
    em_gen_init(&g, 7);
    char buf[256];
    for (int i = 0; i < 100000; i++) /* warm up: gateways, pools at their high-water mark */
        em_drive_line(e, buf, em_gen_line(&g, buf));
    unsigned long before = test_allocations();
    uint64_t ev0 = events;
    for (int i = 0; i < 400000; i++)
        em_drive_line(e, buf, em_gen_line(&g, buf));
    assert_true(events - ev0 > 400000); /* it did work */
    assert_int_equal(test_allocations() - before, 0);
    em_engine_free(e);
}

static void test_the_counter_counts(void **state)
{
    /* guard against the wrapper silently not being linked in */
    unsigned long before = test_allocations();
    struct em_engine_config cfg = {.sink = sink};
    struct em_engine *e = em_engine_new(&cfg);
    assert_true(test_allocations() > before);
    em_engine_free(e);
}

/* engine.h: "a NEW that cannot get a record is dropped before its ACK
 * with no effect". The order pool grows, then the index that must follow
 * it cannot: the record goes back to the pool. */
static void test_new_dropped_when_out_of_memory(void **state)
{
    struct em_engine_config cfg = {.sink = sink, .orders_hint = 16};
    struct em_engine *e = em_engine_new(&cfg);
    assert_non_null(e);
    char line[128];
    strcpy(line, "OPS SYMBOL sym=ABC tick=1");
    em_drive_line(e, line, strlen(line));
    for (int i = 0; i < 16; i++) { /* fill the pool */
        sprintf(line, "G NEW cl=c%d sym=ABC side=B qty=1 px=%d", i, 10 + i);
        assert_int_equal(em_drive_line(e, line, strlen(line)), 0);
    }
    uint64_t ev0 = events;
    test_alloc_fail_next_calloc(); /* the (gw, cl) index of the grown pool */
    strcpy(line, "G NEW cl=x sym=ABC side=B qty=1 px=5");
    assert_int_equal(em_drive_line(e, line, strlen(line)), CORE_ENOMEM);
    assert_int_equal(events, ev0);
    const char *what = "";
    assert_int_equal(em_engine_check(e, &what), 0);
    struct em_engine_stats st;
    em_engine_stats(e, &st);
    assert_int_equal(st.open_orders, 16);
    em_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_counter_counts),
        cmocka_unit_test(test_no_allocation_per_message_when_warm),
        cmocka_unit_test(test_new_dropped_when_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
