/*
 * The listpack: every entry encoding round-trips (each integer width at
 * its bounds, strings at each length class), integers are stored only
 * for canonical decimal strings, insert/replace/delete keep the header
 * right, find with skip, and validation rejects truncated or corrupt
 * buffers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gridsync/types/listpack/listpack.h"

static void assert_entry(const unsigned char *lp, size_t off, const char *s, size_t slen)
{
    char buf[GS_LP_INTBUF];
    size_t len;
    const char *v = gs_lp_get(lp, off, buf, &len);
    assert_int_equal(len, slen);
    assert_memory_equal(v, s, slen);
    assert_true(gs_lp_eq(lp, off, s, slen));
}

static void test_roundtrip_and_sizes(void **state)
{
    (void)state;
    struct {
        const char *s;
        size_t size; /* encoded bytes */
    } cases[] = {
        {"0", 1},
        {"127", 1},
        {"128", 2},
        {"-1", 2},
        {"4095", 2},
        {"-4096", 2},
        {"4096", 3},
        {"32767", 3},
        {"-32768", 3},
        {"32768", 4},
        {"8388607", 4},
        {"-8388608", 4},
        {"8388608", 5},
        {"2147483647", 5},
        {"-2147483648", 5},
        {"2147483648", 9},
        {"9223372036854775807", 9},
        {"-9223372036854775808", 9},
        /* not canonical: stored as strings */
        {"007", 4},
        {"+1", 3},
        {"-0", 3},
        {" 1", 3},
        {"9223372036854775808", 20},
        {"", 1},
        {"abc", 4},
    };
    unsigned char *lp = gs_lp_new();
    assert_non_null(lp);
    size_t expect = GS_LP_HDR;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t sl = strlen(cases[i].s);
        assert_int_equal(gs_lp_encoded_size(cases[i].s, sl), cases[i].size);
        assert_int_equal(gs_lp_append(&lp, cases[i].s, sl), 0);
        expect += cases[i].size;
        assert_int_equal(gs_lp_bytes(lp), expect);
    }
    size_t off = gs_lp_first(lp);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_true(off != 0);
        assert_entry(lp, off, cases[i].s, strlen(cases[i].s));
        off = gs_lp_next(lp, off);
    }
    assert_int_equal(off, 0);
    assert_true(gs_lp_validate(lp, gs_lp_bytes(lp)));
    gs_lp_free(lp);
}

static void test_string_length_classes(void **state)
{
    (void)state;
    size_t lens[] = {0, 1, 63, 64, 4095, 4096, 70000};
    unsigned char *lp = gs_lp_new();
    char *big = malloc(70000);
    for (size_t i = 0; i < 70000; i++)
        big[i] = (char)('a' + i % 26);
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
        assert_int_equal(gs_lp_append(&lp, big, lens[i]), 0);
    size_t off = gs_lp_first(lp);
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        assert_entry(lp, off, big, lens[i]);
        off = gs_lp_next(lp, off);
    }
    assert_int_equal(gs_lp_count(lp), 7);
    assert_true(gs_lp_validate(lp, gs_lp_bytes(lp)));
    free(big);
    gs_lp_free(lp);
}

static void test_edit_and_find(void **state)
{
    (void)state;
    unsigned char *lp = gs_lp_new();
    const char *kv[] = {"f1", "v1", "10", "20", "f3", "v3"};
    for (int i = 0; i < 6; i++)
        assert_int_equal(gs_lp_append(&lp, kv[i], strlen(kv[i])), 0);
    /* skip 1 looks at fields only: "v1" and "20" are values */
    assert_int_equal(gs_lp_find(lp, 0, "v1", 2, 1), 0);
    assert_int_equal(gs_lp_find(lp, 0, "20", 2, 1), 0);
    size_t f = gs_lp_find(lp, 0, "10", 2, 1);
    assert_true(f != 0);
    assert_entry(lp, gs_lp_next(lp, f), "20", 2);
    /* replace with a longer string, then a shorter one */
    assert_int_equal(gs_lp_replace(&lp, gs_lp_next(lp, f), "a much longer value", 19), 0);
    f = gs_lp_find(lp, 0, "10", 2, 1);
    assert_entry(lp, gs_lp_next(lp, f), "a much longer value", 19);
    assert_int_equal(gs_lp_replace(&lp, gs_lp_next(lp, f), "7", 1), 0);
    f = gs_lp_find(lp, 0, "10", 2, 1);
    assert_entry(lp, gs_lp_next(lp, f), "7", 1);
    assert_int_equal(gs_lp_count(lp), 6);
    /* insert before the first entry, delete a pair in the middle */
    assert_int_equal(gs_lp_insert(&lp, gs_lp_first(lp), "head", 4), 0);
    assert_entry(lp, gs_lp_first(lp), "head", 4);
    f = gs_lp_find(lp, 0, "10", 2, 0);
    gs_lp_delete(&lp, f, 2);
    assert_int_equal(gs_lp_count(lp), 5);
    assert_int_equal(gs_lp_find(lp, 0, "10", 2, 0), 0);
    assert_true(gs_lp_validate(lp, gs_lp_bytes(lp)));
    gs_lp_delete(&lp, gs_lp_first(lp), 5);
    assert_int_equal(gs_lp_count(lp), 0);
    assert_int_equal(gs_lp_bytes(lp), GS_LP_HDR);
    assert_int_equal(gs_lp_first(lp), 0);
    gs_lp_free(lp);
}

static void test_validate_rejects(void **state)
{
    (void)state;
    unsigned char *lp = gs_lp_new();
    assert_int_equal(gs_lp_append(&lp, "hello world", 11), 0);
    assert_int_equal(gs_lp_append(&lp, "12345678901", 11), 0);
    size_t n = gs_lp_bytes(lp);
    for (size_t cut = 0; cut < n; cut++) {
        unsigned char *copy = malloc(n);
        memcpy(copy, lp, n);
        uint32_t t = (uint32_t)cut;
        memcpy(copy, &t, 4); /* header says the truncated length */
        assert_false(gs_lp_validate(copy, cut));
        free(copy);
    }
    unsigned char *bad = malloc(n);
    memcpy(bad, lp, n);
    bad[4] = 3; /* count disagrees with the entries */
    assert_false(gs_lp_validate(bad, n));
    memcpy(bad, lp, n);
    bad[GS_LP_HDR] = 0xFF; /* no such encoding */
    assert_false(gs_lp_validate(bad, n));
    free(bad);
    gs_lp_free(lp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_and_sizes),
        cmocka_unit_test(test_string_length_classes),
        cmocka_unit_test(test_edit_and_find),
        cmocka_unit_test(test_validate_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
