/*
 * The bounded reply reader (gridsync/protocol/resp_reply.h): every type,
 * every split point of a reply is "incomplete", the bounds of invariant 2
 * (depth, lengths, element counts, strict digits, CRLF), and *pos moved
 * past exactly one reply.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gridsync/protocol/resp_reply.h"

static int parse(const char *s, size_t len, size_t *pos, struct gs_resp_reply *r)
{
    *pos = 0;
    return gs_resp_reply_parse(s, len, pos, r);
}

static void test_types(void **state)
{
    (void)state;
    struct gs_resp_reply r;
    size_t pos;
    assert_int_equal(parse("+OK\r\n", 5, &pos, &r), 1);
    assert_int_equal(r.type, '+');
    assert_int_equal(r.len, 2);
    assert_true(gs_resp_reply_starts(&r, "OK"));
    assert_int_equal(pos, 5);

    const char *e = "-TRYAGAIN meta leader 127.0.0.1:7001\r\n";
    assert_int_equal(parse(e, strlen(e), &pos, &r), 1);
    assert_true(gs_resp_reply_starts(&r, "TRYAGAIN"));
    assert_false(gs_resp_reply_starts(&r, "MOVED"));

    assert_int_equal(parse(":-12\r\n", 6, &pos, &r), 1);
    assert_int_equal(r.len, -12);
    assert_int_equal(parse("$-1\r\n", 5, &pos, &r), 1);
    assert_int_equal(r.len, -1);
    assert_int_equal(parse("$5\r\nhe\r\no\r\n", 11, &pos, &r), 1);
    assert_memory_equal(r.p, "he\r\no", 5);

    const char *a = "*3\r\n$1\r\n0\r\n*1\r\n:7\r\n*-1\r\n+next\r\n";
    assert_int_equal(parse(a, strlen(a), &pos, &r), 1);
    assert_int_equal(r.len, 3);
    assert_int_equal(r.el[1].type, '*');
    assert_int_equal(r.el[1].el[0].len, 7);
    assert_int_equal(r.el[2].len, -1);
    assert_int_equal(pos, strlen(a) - strlen("+next\r\n")); /* exactly one reply */
    gs_resp_reply_free(&r);
}

static void test_every_prefix_is_incomplete(void **state)
{
    (void)state;
    const char *a = "*2\r\n$3\r\nabc\r\n*2\r\n:1\r\n-ERR x\r\n";
    size_t len = strlen(a), pos;
    struct gs_resp_reply r;
    for (size_t cut = 0; cut < len; cut++) {
        assert_int_equal(parse(a, cut, &pos, &r), 0);
        assert_int_equal(pos, 0);
    }
    assert_int_equal(parse(a, len, &pos, &r), 1);
    gs_resp_reply_free(&r);
}

static void test_malformed(void **state)
{
    (void)state;
    const char *bad[] = {
        "?x\r\n",                    /* unknown type */
        ":\r\n",                     /* no digits */
        ":1x\r\n",                   /* not a number */
        "$+3\r\nabc\r\n",            /* sign */
        "$-2\r\n",                   /* only -1 means nil */
        "$3\r\nabcd\r\n",            /* no CRLF after the body */
        "+OK\rX\r\n",                /* CR without LF */
        "$99999999999999999999\r\n", /* overflow */
        "$536870913\r\n",            /* over the bulk bound */
        "*1048577\r\n",              /* over the element bound */
        ":9223372036854775808\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t pos;
        struct gs_resp_reply r;
        assert_int_equal(parse(bad[i], strlen(bad[i]), &pos, &r), -1);
        assert_int_equal(pos, 0);
    }
}

static void test_depth_and_counts(void **state)
{
    (void)state;
    char deep[256] = "";
    for (int i = 0; i < GS_RESP_REPLY_MAX_DEPTH - 1; i++)
        strcat(deep, "*1\r\n");
    strcat(deep, ":1\r\n");
    size_t pos;
    struct gs_resp_reply r;
    assert_int_equal(parse(deep, strlen(deep), &pos, &r), 1);
    gs_resp_reply_free(&r);
    char deeper[256] = "*1\r\n";
    strcat(deeper, deep);
    assert_int_equal(parse(deeper, strlen(deeper), &pos, &r), -1);

    /* A count the bytes left cannot hold waits for them, allocating
     * nothing (a peer cannot make us allocate more than it sent). */
    assert_int_equal(parse("*1000000\r\n+a\r\n", 14, &pos, &r), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_every_prefix_is_incomplete),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_depth_and_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
