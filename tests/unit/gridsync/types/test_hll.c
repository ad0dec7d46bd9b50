/*
 * HyperLogLog values (gridsync/types/hll/hll.h): Redis 7.0's bytes for a
 * new HLL and after known adds, dense registers that keep their
 * neighbours, sparse and dense forms that agree register for register
 * and in the count, the two ways to turn dense (a value above 32, a form
 * past hll-sparse-max-bytes: at the limit it stays sparse), corrupted
 * forms refused everywhere, and the estimate within Redis's own bound.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gridsync/types/hll/hll.h"

static int encoding(const struct core_buf *b)
{
    return (unsigned char)b->data[4];
}

static void test_new_and_known_bytes(void **state)
{
    (void)state;
    struct core_buf b = {0};
    assert_int_equal(gs_hll_init(&b), 0);
    static const char empty[] = "HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff";
    assert_int_equal(b.len, GS_HLL_SPARSE_NEW);
    assert_memory_equal(b.data, empty, GS_HLL_SPARSE_NEW);
    assert_true(gs_hll_is_hll(b.data, b.len));
    bool inv = false;
    assert_int_equal(gs_hll_count(b.data, b.len, &inv), 0);
    assert_false(inv);
    /* What redis-server 7.0.15 holds after PFADD u a b c (GET u). */
    static const char abc[] = "HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80"
                              "`\xf3\x80P\xb1\x84K\xfb\x80"
                              "BZ";
    for (const char *e = "a\0b\0c\0"; *e; e += 2)
        assert_int_equal(gs_hll_add(&b, e, 1, GS_HLL_SPARSE_MAX), 1);
    assert_int_equal(gs_hll_add(&b, "a", 1, GS_HLL_SPARSE_MAX), 0); /* seen */
    assert_int_equal(b.len, sizeof(abc) - 1);
    assert_memory_equal(b.data, abc, b.len);
    assert_false(gs_hll_cache_valid(b.data));
    assert_int_equal(gs_hll_count(b.data, b.len, &inv), 3);
    gs_hll_cache_put(b.data, 3);
    assert_true(gs_hll_cache_valid(b.data));
    assert_int_equal(gs_hll_cache_get(b.data), 3);
    core_buf_free(&b);
}

static void test_dense_registers_keep_neighbours(void **state)
{
    (void)state;
    srand(7);
    struct core_buf b = {0};
    assert_int_equal(gs_hll_init(&b), 0);
    assert_int_equal(gs_hll_to_dense(&b), 0);
    assert_int_equal(b.len, GS_HLL_DENSE_SIZE);
    assert_int_equal(encoding(&b), GS_HLL_DENSE);
    static uint8_t want[GS_HLL_REGISTERS];
    memset(want, 0, sizeof(want));
    for (int round = 0; round < 4; round++) {
        for (unsigned i = 0; i < GS_HLL_REGISTERS; i++) {
            unsigned i2 = (unsigned)rand() % GS_HLL_REGISTERS;
            uint8_t v = (uint8_t)(rand() % 64);
            int rc = gs_hll_set(&b, i2, v, GS_HLL_SPARSE_MAX);
            assert_int_equal(rc, v > want[i2]);
            if (v > want[i2])
                want[i2] = v;
        }
        for (unsigned i = 0; i < GS_HLL_REGISTERS; i++)
            assert_int_equal(gs_hll_dense_get(b.data, i), want[i]);
    }
    core_buf_free(&b);
}

static void test_sparse_and_dense_agree(void **state)
{
    (void)state;
    static uint8_t rs[GS_HLL_REGISTERS], rd[GS_HLL_REGISTERS];
    for (unsigned n = 1; n <= 30000; n *= 5) {
        struct core_buf s = {0}, d = {0};
        assert_int_equal(gs_hll_init(&s), 0);
        assert_int_equal(gs_hll_init(&d), 0);
        assert_int_equal(gs_hll_to_dense(&d), 0);
        for (unsigned j = 0; j < n; j++) {
            char e[16];
            int len = snprintf(e, sizeof(e), "el%u", j * 2654435761u);
            int a = gs_hll_add(&s, e, (size_t)len, 1u << 30);
            int b = gs_hll_add(&d, e, (size_t)len, 1u << 30);
            assert_int_equal(a, b);
        }
        memset(rs, 0, sizeof(rs));
        memset(rd, 0, sizeof(rd));
        assert_int_equal(gs_hll_merge(rs, s.data, s.len), 0);
        assert_int_equal(gs_hll_merge(rd, d.data, d.len), 0);
        assert_memory_equal(rs, rd, sizeof(rs));
        bool inv = false;
        uint64_t cs = gs_hll_count(s.data, s.len, &inv), cd = gs_hll_count(d.data, d.len, &inv);
        assert_false(inv);
        assert_int_equal(cs, cd);
        assert_int_equal(gs_hll_count_registers(rs), cs);
        core_buf_free(&s);
        core_buf_free(&d);
    }
}

static void test_turns_dense_at_the_limits(void **state)
{
    (void)state;
    struct core_buf b = {0};
    /* A value of 32 fits a VAL opcode; 33 does not. */
    assert_int_equal(gs_hll_init(&b), 0);
    assert_int_equal(gs_hll_set(&b, 100, 32, GS_HLL_SPARSE_MAX), 1);
    assert_int_equal(encoding(&b), GS_HLL_SPARSE);
    assert_int_equal(gs_hll_set(&b, 200, 33, GS_HLL_SPARSE_MAX), 1);
    assert_int_equal(encoding(&b), GS_HLL_DENSE);
    assert_int_equal(gs_hll_dense_get(b.data, 100), 32);
    assert_int_equal(gs_hll_dense_get(b.data, 200), 33);
    /* Growth: sparse while the form fits in max bytes, dense after. */
    const size_t max = 60;
    assert_int_equal(gs_hll_init(&b), 0);
    unsigned i = 0;
    size_t last = b.len;
    while (encoding(&b) == GS_HLL_SPARSE) {
        assert_true(b.len <= max);
        last = b.len;
        assert_int_equal(gs_hll_set(&b, i, 1 + (uint8_t)(i % 3), max), 1);
        i += 97;
    }
    assert_true(last + 3 > max); /* it turned only when the edit did not fit */
    assert_int_equal(b.len, GS_HLL_DENSE_SIZE);
    for (unsigned j = 0; j < i; j += 97)
        assert_int_equal(gs_hll_dense_get(b.data, j), 1 + j % 3);
    core_buf_free(&b);
}

static void test_corrupted_forms(void **state)
{
    (void)state;
    struct core_buf b = {0};
    assert_int_equal(gs_hll_init(&b), 0);
    assert_false(gs_hll_is_hll(b.data, 15));
    b.data[0] = 'h';
    assert_false(gs_hll_is_hll(b.data, b.len));
    b.data[0] = 'H';
    b.data[4] = 2;
    assert_false(gs_hll_is_hll(b.data, b.len));
    b.data[4] = GS_HLL_DENSE; /* dense of the wrong size */
    assert_false(gs_hll_is_hll(b.data, b.len));
    b.data[4] = GS_HLL_SPARSE;
    /* XZERO:16383: one register short. */
    b.data[17] = (char)0xfe;
    static uint8_t max[GS_HLL_REGISTERS];
    bool inv = false;
    gs_hll_count(b.data, b.len, &inv);
    assert_true(inv);
    assert_int_equal(gs_hll_merge(max, b.data, b.len), GS_HLL_INVALID);
    assert_int_equal(gs_hll_set(&b, 16383, 1, GS_HLL_SPARSE_MAX), GS_HLL_INVALID);
    assert_int_equal(gs_hll_to_dense(&b), GS_HLL_INVALID);
    assert_int_equal(b.len, GS_HLL_SPARSE_NEW); /* unchanged */
    b.len = GS_HLL_HDR_SIZE;                    /* no opcode at all */
    assert_int_equal(gs_hll_add(&b, "x", 1, GS_HLL_SPARSE_MAX), GS_HLL_INVALID);
    core_buf_free(&b);
}

static void test_estimate_within_redis_bound(void **state)
{
    (void)state;
    struct core_buf b = {0};
    assert_int_equal(gs_hll_init(&b), 0);
    double relerr = 1.04 / 128; /* 1.04 / sqrt(16384) */
    uint64_t checkpoint = 1;
    for (uint64_t j = 1; j <= 200000; j++) {
        uint64_t ele = j ^ 0x5deece66dull;
        assert_true(gs_hll_add(&b, &ele, sizeof(ele), GS_HLL_SPARSE_MAX) >= 0);
        if (j == checkpoint) {
            bool inv = false;
            int64_t err = (int64_t)checkpoint - (int64_t)gs_hll_count(b.data, b.len, &inv);
            double maxerr = j == 10 ? 1 : relerr * 6 * (double)checkpoint;
            assert_true((double)(err < 0 ? -err : err) <= maxerr + 0.999);
            checkpoint *= 10;
        }
    }
    core_buf_free(&b);
}

static void test_decode_as_pfdebug(void **state)
{
    (void)state;
    struct core_buf b = {0}, out = {0};
    assert_int_equal(gs_hll_init(&b), 0);
    gs_hll_decode(b.data, b.len, &out);
    assert_int_equal(out.len, 7);
    assert_memory_equal(out.data, "Z:16384", 7);
    assert_int_equal(gs_hll_set(&b, 1000, 2, GS_HLL_SPARSE_MAX), 1);
    assert_int_equal(gs_hll_set(&b, 1020, 3, GS_HLL_SPARSE_MAX), 1);
    assert_int_equal(gs_hll_set(&b, 1021, 3, GS_HLL_SPARSE_MAX), 1);
    out.len = 0;
    gs_hll_decode(b.data, b.len, &out);
    static const char want[] = "Z:1000 v:2,1 z:19 v:3,2 Z:15362"; /* the example in Redis's notes */
    assert_int_equal(out.len, sizeof(want) - 1);
    assert_memory_equal(out.data, want, out.len);
    core_buf_free(&b);
    core_buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_and_known_bytes),
        cmocka_unit_test(test_dense_registers_keep_neighbours),
        cmocka_unit_test(test_sparse_and_dense_agree),
        cmocka_unit_test(test_turns_dense_at_the_limits),
        cmocka_unit_test(test_corrupted_forms),
        cmocka_unit_test(test_estimate_within_redis_bound),
        cmocka_unit_test(test_decode_as_pfdebug),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
