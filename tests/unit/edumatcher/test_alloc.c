/* Allocation count: once warmed up, the engine allocates nothing per
 * message (issue #3). malloc, calloc and realloc are wrapped at link time
 * (ld --wrap, see CMakeLists.txt) and counted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "edumatcher/engine.h"
#include "em_drive.h"
#include "em_gen.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t k);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t k);
void *__wrap_realloc(void *p, size_t n);

static unsigned long allocs;

void *__wrap_malloc(size_t n)
{
    allocs++;
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t k)
{
    allocs++;
    return __real_calloc(n, k);
}

void *__wrap_realloc(void *p, size_t n)
{
    allocs++;
    return __real_realloc(p, n);
}

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
    allocs = 0;
    uint64_t ev0 = events;
    for (int i = 0; i < 400000; i++)
        em_drive_line(e, buf, em_gen_line(&g, buf));
    assert_true(events - ev0 > 400000); /* it did work */
    assert_int_equal(allocs, 0);
    em_engine_free(e);
}

static void test_the_counter_counts(void **state)
{
    /* guard against the wrapper silently not being linked in */
    unsigned long before = allocs;
    struct em_engine_config cfg = {.sink = sink};
    struct em_engine *e = em_engine_new(&cfg);
    assert_true(allocs > before);
    em_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_counter_counts),
        cmocka_unit_test(test_no_allocation_per_message_when_warm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
