/*
 * DUMP payloads (gridsync/types/rdb/rdb.h): Redis's CRC64 check value,
 * Redis's own bytes for strings (integer, LZF, plain) and for a small
 * hash, every type and encoding read back as it was written (with the
 * encodings the thresholds give), and payloads refused: a changed byte,
 * a newer version, a truncated value, an unknown type, bytes left over,
 * an empty collection, a length past the end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gridsync/types/hash/hash.h"
#include "gridsync/types/quicklist/quicklist.h"
#include "gridsync/types/rdb/rdb.h"
#include "gridsync/types/set/set.h"
#include "gridsync/types/zset/zset.h"

static const struct gs_type_limits LIM = GS_TYPE_LIMITS_DEFAULT;

static void test_crc64_check_value(void **state)
{
    (void)state;
    assert_true(gs_crc64(0, "123456789", 9) == 0xe9c6d914c4b8d9caull);
}

static void check_string(const char *v, size_t len, const char *want, size_t wlen)
{
    struct core_buf out = {0};
    assert_int_equal(gs_rdb_dump_string(v, len, &out), 0);
    if (want) {
        assert_int_equal(out.len, wlen);
        assert_memory_equal(out.data, want, wlen);
    }
    assert_true(gs_rdb_verify(out.data, out.len));
    struct gs_rdb_value got;
    assert_int_equal(gs_rdb_load(out.data, out.len, &LIM, 1 << 30, &got), 0);
    assert_true(got.is_string);
    assert_int_equal(got.str.len, len);
    if (len)
        assert_memory_equal(got.str.data, v, len);
    core_buf_free(&got.str);
    core_buf_free(&out);
}

static void test_strings_as_redis_writes_them(void **state)
{
    (void)state;
    /* redis-server 7.0.15: DUMP of SET s hello / "a" x 40 / 12345. */
    check_string("hello", 5,
                 "\x00\x05hello\x0a\x00"
                 "cr\xdf"
                 "ve4 \x0a",
                 17);
    char a40[40];
    memset(a40, 'a', sizeof(a40));
    check_string(a40, 40,
                 "\x00\xc3\t(\x01"
                 "aa\xe0\x1b\x00\x01"
                 "aa\n\x00\xcf\t/\xaa\xae%\x83\x1d",
                 23);
    check_string("12345", 5, NULL, 0);
    check_string("-129", 4, NULL, 0);
    check_string("2147483648", 10, NULL, 0);
    check_string("007", 3, NULL, 0);
    check_string("", 0, NULL, 0);
    char big[70000];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (char)(i * 7 % 251);
    check_string(big, sizeof(big), NULL, 0);
}

static void test_small_hash_as_redis_writes_it(void **state)
{
    (void)state;
    struct gs_obj o;
    assert_int_equal(gs_hash_init(&o), 0);
    assert_int_equal(gs_hash_set(&o, "a", 1, "1", 1, &LIM, NULL), 0);
    assert_int_equal(gs_hash_set(&o, "b", 1, "xyz", 3, &LIM, NULL), 0);
    struct core_buf out = {0};
    assert_int_equal(gs_rdb_dump_obj(&o, &out), 0);
    /* redis-server 7.0.15: HSET h a 1 b xyz; DUMP h */
    static const char want[] = "\x10\x14\x14\x00\x00\x00\x04\x00\x81"
                               "a\x02\x01\x01\x81"
                               "b\x02\x83xyz\x04\xff\n\x00.,\"ne=\x1f\xc4";
    assert_int_equal(out.len, sizeof(want) - 1);
    assert_memory_equal(out.data, want, out.len);
    core_buf_free(&out);
    gs_hash_free(&o);
}

/* Dump o, load it back, and return the copy (the caller frees it). */
static struct gs_obj round_trip(const struct gs_obj *o)
{
    struct core_buf out = {0};
    assert_int_equal(gs_rdb_dump_obj(o, &out), 0);
    assert_true(gs_rdb_verify(out.data, out.len));
    struct gs_rdb_value got;
    assert_int_equal(gs_rdb_load(out.data, out.len, &LIM, 1 << 30, &got), 0);
    assert_false(got.is_string);
    assert_int_equal(got.obj.type, o->type);
    assert_int_equal(got.obj.enc, o->enc);
    assert_int_equal(gs_obj_len(&got.obj), gs_obj_len(o));
    core_buf_free(&out);
    return got.obj;
}

static void test_every_type_reads_back(void **state)
{
    (void)state;
    char k[32], v[32];
    for (int n = 1; n <= 1500; n = n * 3 + 1) {
        struct gs_obj h, s, si, z, l = {0};
        assert_int_equal(gs_hash_init(&h), 0);
        assert_int_equal(gs_set_init(&s), 0);
        assert_int_equal(gs_set_init(&si), 0);
        assert_int_equal(gs_zset_init(&z, false), 0);
        l.type = GS_TYPE_LIST;
        l.enc = GS_ENC_QUICKLIST;
        l.ptr = gs_ql_new(-2);
        for (int i = 0; i < n; i++) {
            int kl = snprintf(k, sizeof(k), "f%d", i), vl = snprintf(v, sizeof(v), "%d", i * 37);
            assert_int_equal(gs_hash_set(&h, k, (size_t)kl, v, (size_t)vl, &LIM, NULL), 0);
            bool added;
            assert_int_equal(gs_set_add(&s, k, (size_t)kl, &LIM, &added), 0);
            assert_int_equal(gs_set_add(&si, v, (size_t)vl, &LIM, &added), 0);
            int out;
            assert_int_equal(gs_zset_add(&z, i * 0.5 - 3, k, (size_t)kl, 0, &out, NULL, &LIM), 0);
            assert_int_equal(gs_ql_push(l.ptr, false, i % 2 ? k : v, (size_t)(i % 2 ? kl : vl)), 0);
        }
        struct gs_obj *all[] = {&h, &s, &si, &z, &l};
        for (int t = 0; t < 5; t++) {
            struct gs_obj back = round_trip(all[t]);
            if (t == 3) { /* scores and order survive */
                for (size_t r = 0; r < gs_zset_len(&z); r += 7) {
                    char b1[GS_LP_INTBUF], b2[GS_LP_INTBUF];
                    const char *m1, *m2;
                    size_t l1, l2;
                    double s1, s2;
                    gs_zset_at(&z, r, b1, &m1, &l1, &s1);
                    gs_zset_at(&back, r, b2, &m2, &l2, &s2);
                    assert_int_equal(l1, l2);
                    assert_memory_equal(m1, m2, l1);
                    assert_true(s1 == s2);
                }
            }
            gs_obj_free(&back);
            gs_obj_free(all[t]);
        }
    }
}

static void test_refused_payloads(void **state)
{
    (void)state;
    struct core_buf out = {0};
    assert_int_equal(gs_rdb_dump_string("hello world", 11, &out), 0);
    struct gs_rdb_value got;
    for (size_t i = 0; i < out.len; i++) { /* any changed byte fails the check */
        out.data[i] ^= 0x20;
        assert_false(gs_rdb_verify(out.data, out.len));
        out.data[i] ^= 0x20;
    }
    assert_false(gs_rdb_verify(out.data, 9));
    /* A truncated value, an unknown type, bytes left over: bad format
     * (load does not look at the checksum; verify does). */
    static const char *bad[] = {
        "\x00\x0bhello\x0a\x00\x00\x00\x00\x00\x00\x00\x00",      /* length past the end */
        "\x07\x01x\x0a\x00\x00\x00\x00\x00\x00\x00\x00",          /* a module type */
        "\x00\x01xy\x0a\x00\x00\x00\x00\x00\x00\x00\x00",         /* one byte left over */
        "\x02\x00\x0a\x00\x00\x00\x00\x00\x00\x00\x00",           /* an empty set */
        "\x02\x02\x01x\x01x\x0a\x00\x00\x00\x00\x00\x00\x00\x00", /* a member twice */
        "\x10\x07\x07\x00\x00\x00\x00\x00\xff\x0a\x00\x00\x00\x00\x00\x00\x00\x00", /* empty lp */
        "\x00\xc3\x05\x40\x00\x01\x61\x61\x0a\x00\x00\x00\x00\x00\x00\x00\x00",     /* bad LZF */
    };
    static const size_t badlen[] = {15, 13, 14, 12, 16, 18, 17};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(gs_rdb_load(bad[i], badlen[i], &LIM, 1 << 30, &got), GS_RDB_BAD);
    core_buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc64_check_value),
        cmocka_unit_test(test_strings_as_redis_writes_them),
        cmocka_unit_test(test_small_hash_as_redis_writes_it),
        cmocka_unit_test(test_every_type_reads_back),
        cmocka_unit_test(test_refused_payloads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
