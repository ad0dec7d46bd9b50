/*
 * The listpack: every entry encoding round-trips (each integer width at
 * its bounds, strings at each length class), integers are stored only
 * for canonical decimal strings, insert/replace/delete keep the header
 * right, find with skip, and validation rejects truncated or corrupt
 * buffers. With back-lengths: every back-length size boundary, walks
 * backwards and seeks from the tail agreeing with a forward walk, split
 * keeping the form, corrupt back-lengths rejected, random edits against
 * a model.
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

/* A back-length listpack walked every way agrees with a forward walk:
 * gs_lp_prev from the end, gs_lp_last, gs_lp_seek at every index (the
 * second half reached from the tail), and gs_lp_validate accepts it. */
static void check_walks(const unsigned char *lp)
{
    uint32_t n = gs_lp_count(lp);
    size_t *fwd = malloc((n + 1) * sizeof(*fwd));
    assert_non_null(fwd);
    uint32_t i = 0;
    for (size_t off = gs_lp_first(lp); off; off = gs_lp_next(lp, off))
        fwd[i++] = off;
    assert_int_equal(i, n);
    assert_int_equal(gs_lp_last(lp), n ? fwd[n - 1] : 0);
    size_t off = gs_lp_last(lp);
    for (i = n; i > 0; i--) {
        assert_int_equal(off, fwd[i - 1]);
        assert_int_equal(gs_lp_seek(lp, i - 1), fwd[i - 1]);
        off = gs_lp_prev(lp, off);
    }
    assert_int_equal(off, 0);
    assert_int_equal(gs_lp_seek(lp, n), 0);
    assert_true(gs_lp_validate(lp, gs_lp_bytes(lp)));
    free(fwd);
}

/* Back-lengths take 1 byte below an encoding of 128 bytes, 2 below
 * 16384, 3 below 2 MB, 4 from there: entries on each side of every
 * boundary, their sizes, what gs_lp_entry_bytes predicts, and walks. */
static void test_backlen_boundaries(void **state)
{
    (void)state;
    struct {
        size_t slen; /* a string of 'x's this long */
        size_t enc;  /* its encoding */
        size_t bl;   /* its back-length */
    } cases[] = {
        {0, 1, 1},         {63, 64, 1},           {64, 66, 1},           {125, 127, 1},
        {126, 128, 2},     {4095, 4097, 2},       {4096, 4101, 2},       {16378, 16383, 2},
        {16379, 16384, 3}, {2097146, 2097151, 3}, {2097147, 2097152, 4},
    };
    char *big = malloc(2097147);
    assert_non_null(big);
    memset(big, 'x', 2097147);
    unsigned char *lp = gs_lp_new_backlen();
    assert_non_null(lp);
    assert_true(gs_lp_has_backlen(lp));
    assert_int_equal(gs_lp_last(lp), 0);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t before = gs_lp_bytes(lp);
        assert_int_equal(gs_lp_encoded_size(big, cases[i].slen), cases[i].enc);
        assert_int_equal(gs_lp_entry_bytes(lp, big, cases[i].slen), cases[i].enc + cases[i].bl);
        /* alternate ends, so prev crosses every size from both sides */
        size_t at = i % 2 ? GS_LP_HDR : 0;
        assert_int_equal(gs_lp_insert(&lp, at, big, cases[i].slen), 0);
        assert_int_equal(gs_lp_bytes(lp), before + cases[i].enc + cases[i].bl);
        size_t off = i % 2 ? GS_LP_HDR : gs_lp_last(lp);
        assert_int_equal(gs_lp_entry_size(lp, off), cases[i].enc + cases[i].bl);
        assert_entry(lp, off, big, cases[i].slen);
        check_walks(lp);
    }
    /* integers of every width, at the tail */
    const char *ints[] = {"0",
                          "127",
                          "-1",
                          "4095",
                          "-4096",
                          "32767",
                          "-32768",
                          "8388607",
                          "-8388608",
                          "2147483647",
                          "-2147483648",
                          "9223372036854775807",
                          "-9223372036854775808"};
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
        assert_int_equal(gs_lp_append(&lp, ints[i], strlen(ints[i])), 0);
        assert_entry(lp, gs_lp_last(lp), ints[i], strlen(ints[i]));
        assert_int_equal(gs_lp_entry_size(lp, gs_lp_last(lp)),
                         gs_lp_encoded_size(ints[i], strlen(ints[i])) + 1);
    }
    check_walks(lp);
    /* split keeps the form in both halves */
    unsigned char *tail;
    assert_int_equal(gs_lp_split(&lp, gs_lp_seek(lp, 5), &tail), 0);
    assert_true(gs_lp_has_backlen(lp) && gs_lp_has_backlen(tail));
    assert_int_equal(gs_lp_count(lp), 5);
    check_walks(lp);
    check_walks(tail);
    /* delete down to empty from the tail, as RPOP does */
    while (gs_lp_count(tail)) {
        gs_lp_delete(&tail, gs_lp_last(tail), 1);
        check_walks(tail);
    }
    assert_int_equal(gs_lp_bytes(tail), GS_LP_HDR);
    assert_true(gs_lp_has_backlen(tail));
    gs_lp_free(tail);
    gs_lp_free(lp);
    free(big);
}

/* A plain listpack has no back-lengths: same walks, entry sizes without
 * them; a back-length that does not match its entry fails validation. */
static void test_backlen_plain_and_corrupt(void **state)
{
    (void)state;
    unsigned char *plain = gs_lp_new(), *bl = gs_lp_new_backlen();
    assert_false(gs_lp_has_backlen(plain));
    const char *v[] = {"a", "12", "hello world", "-300", "x"};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(gs_lp_append(&plain, v[i], strlen(v[i])), 0);
        assert_int_equal(gs_lp_append(&bl, v[i], strlen(v[i])), 0);
    }
    check_walks(plain);
    check_walks(bl);
    assert_int_equal(gs_lp_bytes(bl), gs_lp_bytes(plain) + 5);
    assert_int_equal(gs_lp_count(bl), 5);
    assert_int_equal(gs_lp_entry_bytes(plain, "abc", 3), 4);
    assert_int_equal(gs_lp_entry_bytes(bl, "abc", 3), 5);
    /* corrupt each byte of the back-length area in turn */
    size_t len = gs_lp_bytes(bl);
    for (size_t off = gs_lp_first(bl); off; off = gs_lp_next(bl, off)) {
        size_t at = off + gs_lp_entry_size(bl, off) - 1; /* the back-length byte */
        unsigned char save = bl[at];
        bl[at] = (unsigned char)(save + 1);
        assert_false(gs_lp_validate(bl, len));
        bl[at] = (unsigned char)(save | 0x80); /* "more bytes to the left" */
        assert_false(gs_lp_validate(bl, len));
        bl[at] = save;
    }
    assert_true(gs_lp_validate(bl, len));
    assert_false(gs_lp_validate(bl, len - 1));
    gs_lp_free(plain);
    gs_lp_free(bl);
}

/* Random inserts, replaces and deletes anywhere in a back-length
 * listpack, checked against a model array and every walk after each. */
static void test_backlen_random_ops(void **state)
{
    (void)state;
    enum { MAX = 300 };
    static char model[MAX][200];
    static size_t mlen[MAX];
    uint32_t n = 0;
    unsigned char *lp = gs_lp_new_backlen();
    srand(7);
    for (int step = 0; step < 3000; step++) {
        char s[200];
        size_t slen;
        int kind = rand() % 3;
        if (kind == 0) {
            slen = (size_t)snprintf(s, sizeof(s), "%d", rand() % 100000 - 50000);
        } else {
            /* lengths around the 1- and 2-byte back-length boundary */
            slen = (size_t)(kind == 1 ? rand() % 8 : 120 + rand() % 16);
            memset(s, 'a' + rand() % 26, slen);
        }
        int op = rand() % 4;
        if (n == 0 || (op <= 1 && n < MAX)) {
            uint32_t at = (uint32_t)rand() % (n + 1);
            assert_int_equal(gs_lp_insert(&lp, at == n ? 0 : gs_lp_seek(lp, at), s, slen), 0);
            memmove(&model[at + 1], &model[at], (n - at) * sizeof(model[0]));
            memmove(&mlen[at + 1], &mlen[at], (n - at) * sizeof(mlen[0]));
            memcpy(model[at], s, slen);
            mlen[at] = slen;
            n++;
        } else if (op == 2) {
            uint32_t at = (uint32_t)rand() % n;
            assert_int_equal(gs_lp_replace(&lp, gs_lp_seek(lp, at), s, slen), 0);
            memcpy(model[at], s, slen);
            mlen[at] = slen;
        } else {
            uint32_t at = (uint32_t)rand() % n, k = 1 + (uint32_t)rand() % 3;
            if (k > n - at)
                k = n - at;
            gs_lp_delete(&lp, gs_lp_seek(lp, at), k);
            memmove(&model[at], &model[at + k], (n - at - k) * sizeof(model[0]));
            memmove(&mlen[at], &mlen[at + k], (n - at - k) * sizeof(mlen[0]));
            n -= k;
        }
        assert_int_equal(gs_lp_count(lp), n);
        uint32_t i = n;
        for (size_t off = gs_lp_last(lp); off; off = gs_lp_prev(lp, off)) {
            i--;
            assert_entry(lp, off, model[i], mlen[i]);
        }
        assert_int_equal(i, 0);
        if (step % 50 == 0)
            check_walks(lp);
    }
    gs_lp_free(lp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_and_sizes),
        cmocka_unit_test(test_string_length_classes),
        cmocka_unit_test(test_edit_and_find),
        cmocka_unit_test(test_validate_rejects),
        cmocka_unit_test(test_backlen_boundaries),
        cmocka_unit_test(test_backlen_plain_and_corrupt),
        cmocka_unit_test(test_backlen_random_ops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
