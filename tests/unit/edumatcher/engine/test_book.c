/* Book: levels in and out of the tick window, best/next in price order,
 * FIFO, aggregates, re-centring, against a simple model under random
 * inserts and removals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "edumatcher/engine/book.h"
#include "edumatcher/engine/msg.h"

static struct em_pool pool;
static struct em_book book;
static uint64_t seq;

static uint32_t add(int side, int64_t px, uint32_t qty)
{
    uint32_t o = em_pool_order_get(&pool);
    assert_true(o != 0);
    struct em_order *r = em_ord(&pool, o);
    r->side = side == EM_BUY ? EM_SIDE_BUY : EM_SIDE_SELL;
    r->type = EM_OTYPE_LMT;
    r->px = px;
    r->qty = r->leaves = r->shown = qty;
    r->seq = ++seq;
    r->state = EM_OS_RESTING;
    assert_int_equal(em_book_insert(&book, &pool, o), 0);
    return o;
}

static void del(uint32_t o)
{
    em_book_remove(&book, &pool, o);
    em_pool_order_put(&pool, o);
}

static int setup(void **state)
{
    assert_int_equal(em_pool_init(&pool, 0, 0), 0);
    assert_int_equal(em_book_init(&book, &pool), 0);
    seq = 0;
    return 0;
}

static int teardown(void **state)
{
    em_book_free(&book);
    em_pool_free(&pool);
    return 0;
}

static void test_fifo_and_aggregates(void **state)
{
    uint32_t a = add(EM_SELL, 1000, 5), b = add(EM_SELL, 1000, 7), c = add(EM_SELL, 999, 1);
    uint32_t l = em_book_best(&book, &pool, EM_SELL);
    assert_int_equal(em_lvl(&pool, l)->px, 999);
    assert_int_equal(em_lvl(&pool, l)->head, c);
    l = em_book_next(&book, &pool, EM_SELL, l);
    assert_int_equal(em_lvl(&pool, l)->px, 1000);
    assert_int_equal(em_lvl(&pool, l)->head, a);
    assert_int_equal(em_lvl(&pool, l)->vol, 12);
    assert_int_equal(em_lvl(&pool, l)->count, 2);
    em_ord(&pool, a)->seq = ++seq; /* replenishment takes a new arrival sequence */
    em_book_requeue(&book, &pool, a);
    assert_int_equal(em_lvl(&pool, l)->head, b);
    assert_int_equal(em_lvl(&pool, l)->tail, a);
    assert_int_equal(em_book_next(&book, &pool, EM_SELL, l), 0);
    del(c);
    assert_int_equal(em_book_best(&book, &pool, EM_SELL), l);
    assert_int_equal(em_book_check(&book, &pool), 0);
    del(a);
    del(b);
    assert_true(em_book_empty(&book, &pool));
}

static void test_prices_far_outside_the_window(void **state)
{
    /* the window is centred on the first price; the others are outliers */
    add(EM_BUY, 100000, 1);
    add(EM_BUY, 1, 1);
    add(EM_BUY, 100000 + 10 * EM_BOOK_WIN, 1);
    add(EM_BUY, 100001, 1);
    add(EM_BUY, 50, 1);
    int64_t want[] = {100000 + 10 * EM_BOOK_WIN, 100001, 100000, 50, 1};
    uint32_t l = em_book_best(&book, &pool, EM_BUY);
    for (int i = 0; i < 5; i++) {
        assert_true(l != 0);
        assert_int_equal(em_lvl(&pool, l)->px, want[i]);
        l = em_book_next(&book, &pool, EM_BUY, l);
    }
    assert_int_equal(l, 0);
    assert_int_equal(em_book_check(&book, &pool), 0);
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_random_against_model(void **state)
{
    enum { N = 3000 };
    static uint32_t live[N];
    static int64_t pxs[N];
    static int sides[N];
    uint32_t n = 0;
    uint64_t x = 12345;
    for (int step = 0; step < 60000; step++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if (n < N && (n == 0 || x % 100 < 52)) {
            int side = (int)((x >> 8) % 2);
            /* mostly near 10000, some far away on either side */
            int64_t px = 10000 + (int64_t)((x >> 16) % 600) - 300;
            if ((x >> 40) % 20 == 0)
                px = (x >> 44) % 2 ? 1 + (int64_t)((x >> 20) % 3000)
                                   : 20000 + (int64_t)((x >> 20) % 100000);
            live[n] = add(side, px, 1 + (uint32_t)((x >> 24) % 50));
            pxs[n] = px;
            sides[n] = side;
            n++;
        } else {
            uint32_t i = (uint32_t)((x >> 12) % n);
            del(live[i]);
            live[i] = live[n - 1];
            pxs[i] = pxs[n - 1];
            sides[i] = sides[n - 1];
            n--;
        }
        if (step % 97 != 0)
            continue;
        assert_int_equal(em_book_check(&book, &pool), 0);
        for (int side = 0; side < 2; side++) {
            static int64_t want[N];
            uint32_t k = 0;
            for (uint32_t i = 0; i < n; i++)
                if (sides[i] == side)
                    want[k++] = pxs[i];
            qsort(want, k, sizeof want[0], cmp64);
            /* distinct prices, best first */
            uint32_t d = 0;
            for (uint32_t i = 0; i < k; i++)
                if (i == 0 || want[i] != want[i - 1])
                    want[d++] = want[i];
            uint32_t l = em_book_best(&book, &pool, side);
            for (uint32_t i = 0; i < d; i++) {
                int64_t expect = side == EM_BUY ? want[d - 1 - i] : want[i];
                assert_true(l != 0);
                assert_int_equal(em_lvl(&pool, l)->px, expect);
                l = em_book_next(&book, &pool, side, l);
            }
            assert_int_equal(l, 0);
        }
    }
    while (n)
        del(live[--n]);
    assert_true(em_book_empty(&book, &pool));
    /* an empty book re-centres on the next price */
    add(EM_SELL, 5000000, 1);
    uint32_t l = em_book_best(&book, &pool, EM_SELL);
    assert_true(em_lvl(&pool, l)->in_window);
    assert_int_equal(em_book_check(&book, &pool), 0);
}

/* Pool sizes beyond 32-bit ids are refused, not wrapped round (a server
 * takes orders_hint from its configuration). */
static void test_pool_size_limits(void **state)
{
    struct em_pool p;
    assert_int_equal(em_pool_init(&p, UINT32_MAX, 0), CORE_ENOMEM);
    em_pool_free(&p);
    assert_int_equal(em_pool_init(&p, 16, UINT32_MAX), CORE_ENOMEM);
    em_pool_free(&p);
}

static void test_order_record_size(void **state)
{
    /* a resting order with its index bucket within 128 bytes (issue #3) */
    assert_true(sizeof(struct em_order) + sizeof(uint32_t) <= 128);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fifo_and_aggregates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prices_far_outside_the_window, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_against_model, setup, teardown),
        cmocka_unit_test(test_order_record_size),
        cmocka_unit_test(test_pool_size_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
