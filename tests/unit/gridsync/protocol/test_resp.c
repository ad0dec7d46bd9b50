/*
 * RESP parser and writer: every request split at every byte, inline
 * commands with quotes, Redis's protocol error texts, the limits, and the
 * writer's RESP2/RESP3 forms.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/error.h"
#include "gridsync/protocol/resp.h"

struct parsed {
    int rc;
    size_t consumed, argc;
    struct gs_arg *argv;
    const char *err;
};

static struct parsed parse(struct gs_resp_parser *p, char *buf, size_t len)
{
    struct parsed r = {0};
    r.rc = gs_resp_parse(p, buf, len, &r.consumed, &r.argc, &r.argv, &r.err);
    return r;
}

static void assert_arg(const struct gs_arg *a, const char *want, size_t wlen)
{
    assert_int_equal(a->len, wlen);
    assert_memory_equal(a->p, want, wlen);
}

static struct gs_resp_parser new_parser(void)
{
    struct gs_resp_parser p;
    gs_resp_parser_init(&p, GS_RESP_MAX_BULK_DEFLT);
    p.authenticated = true;
    return p;
}

/* Feed `req` one more byte at a time (the bytes copied to a fresh buffer
 * each time, as if the connection's buffer had moved), expecting NEED_MORE
 * until the whole request is there. */
static struct parsed parse_bytewise(struct gs_resp_parser *p, const char *req, size_t n)
{
    char *buf = malloc(n + 1);
    struct parsed r = {0};
    for (size_t have = 1; have <= n; have++) {
        memcpy(buf, req, have);
        r = parse(p, buf, have);
        if (have < n)
            assert_int_equal(r.rc, GS_RESP_NEED_MORE);
    }
    /* Copy the args out before freeing: callers check them against req. */
    static char keep[4096];
    memcpy(keep, buf, n);
    for (size_t i = 0; i < r.argc; i++)
        r.argv[i].p = keep + (r.argv[i].p - buf);
    free(buf);
    return r;
}

static void test_multibulk_whole(void **state)
{
    struct gs_resp_parser p = new_parser();
    char req[] = "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n";
    struct parsed r = parse(&p, req, strlen(req));
    assert_int_equal(r.rc, GS_RESP_REQUEST);
    assert_int_equal(r.consumed, strlen(req));
    assert_int_equal(r.argc, 3);
    assert_arg(&r.argv[0], "SET", 3);
    assert_arg(&r.argv[1], "key", 3);
    assert_arg(&r.argv[2], "value", 5);
    gs_resp_parser_free(&p);
}

static void test_multibulk_every_split(void **state)
{
    const char req[] = "*4\r\n$3\r\nSET\r\n$0\r\n\r\n$10\r\nab\r\ncd\0efg\r\n$2\r\nPX\r\n";
    size_t n = sizeof(req) - 1;
    struct gs_resp_parser p = new_parser();
    struct parsed r = parse_bytewise(&p, req, n);
    assert_int_equal(r.rc, GS_RESP_REQUEST);
    assert_int_equal(r.consumed, n);
    assert_int_equal(r.argc, 4);
    assert_arg(&r.argv[0], "SET", 3);
    assert_arg(&r.argv[1], "", 0);
    assert_arg(&r.argv[2], "ab\r\ncd\0efg", 10); /* binary safe */
    assert_arg(&r.argv[3], "PX", 2);
    gs_resp_parser_free(&p);
}

static void test_inline_every_split(void **state)
{
    const char req[] = "set  \"a b\\x41\\n\" 'it\\'s'  plain\r\n";
    size_t n = sizeof(req) - 1;
    struct gs_resp_parser p = new_parser();
    struct parsed r = parse_bytewise(&p, req, n);
    assert_int_equal(r.rc, GS_RESP_REQUEST);
    assert_int_equal(r.consumed, n);
    assert_int_equal(r.argc, 4);
    assert_arg(&r.argv[0], "set", 3);
    assert_arg(&r.argv[1], "a bA\n", 5);
    assert_arg(&r.argv[2], "it's", 4);
    assert_arg(&r.argv[3], "plain", 5);
    gs_resp_parser_free(&p);
}

static void test_pipeline(void **state)
{
    char req[] = "*1\r\n$4\r\nPING\r\nPING\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
    size_t len = strlen(req), off = 0;
    struct gs_resp_parser p = new_parser();
    const char *names[] = {"PING", "PING", "GET"};
    for (int i = 0; i < 3; i++) {
        struct parsed r = parse(&p, req + off, len - off);
        assert_int_equal(r.rc, GS_RESP_REQUEST);
        assert_arg(&r.argv[0], names[i], strlen(names[i]));
        off += r.consumed;
    }
    assert_int_equal(off, len);
    assert_int_equal(parse(&p, req + off, 0).rc, GS_RESP_NEED_MORE);
    gs_resp_parser_free(&p);
}

static void test_empty_requests(void **state)
{
    struct gs_resp_parser p = new_parser();
    char a[] = "\r\n";
    struct parsed r = parse(&p, a, 2);
    assert_int_equal(r.rc, GS_RESP_REQUEST);
    assert_int_equal(r.argc, 0);
    assert_int_equal(r.consumed, 2);
    char b[] = "*-10\r\n"; /* Redis: a negative count is an empty request */
    r = parse(&p, b, strlen(b));
    assert_int_equal(r.rc, GS_RESP_REQUEST);
    assert_int_equal(r.argc, 0);
    assert_int_equal(r.consumed, strlen(b));
    char c[] = "*0\r\n";
    r = parse(&p, c, strlen(c));
    assert_int_equal(r.rc, GS_RESP_REQUEST);
    assert_int_equal(r.argc, 0);
    gs_resp_parser_free(&p);
}

static void expect_error(const char *input, size_t n, const char *msg, bool auth)
{
    struct gs_resp_parser p = new_parser();
    p.authenticated = auth;
    char *buf = malloc(n + 1);
    memcpy(buf, input, n);
    struct parsed r = parse(&p, buf, n);
    assert_int_equal(r.rc, CORE_EPROTO);
    assert_string_equal(r.err, msg);
    free(buf);
    gs_resp_parser_free(&p);
}

static void test_errors(void **state)
{
    expect_error("*abc\r\n", 6, "Protocol error: invalid multibulk length", true);
    expect_error("*3000000000\r\n", 13, "Protocol error: invalid multibulk length", true);
    expect_error("*+1\r\n", 5, "Protocol error: invalid multibulk length", true);
    expect_error("*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n", 26,
                 "Protocol error: expected '$', got 'f'", true);
    expect_error("*1\r\n$-1\r\n", 9, "Protocol error: invalid bulk length", true);
    expect_error("*1\r\n$x\r\n", 8, "Protocol error: invalid bulk length", true);
    expect_error("*1\r\n$2000000000\r\n", 17, "Protocol error: invalid bulk length", true);
    expect_error("*11\r\n", 5, "Protocol error: unauthenticated multibulk length", false);
    expect_error("*1\r\n$16385\r\n", 12, "Protocol error: unauthenticated bulk length", false);
    expect_error("set \"a\"b\r\n", 10, "Protocol error: unbalanced quotes in request", true);
    expect_error("set \"ab\r\n", 9, "Protocol error: unbalanced quotes in request", true);
}

static void test_too_big_lines(void **state)
{
    size_t n = GS_RESP_INLINE_MAX + 10;
    char *buf = malloc(n);
    memset(buf, 'a', n);
    expect_error(buf, n, "Protocol error: too big inline request", true);
    buf[0] = '*';
    expect_error(buf, n, "Protocol error: too big mbulk count string", true);
    memcpy(buf, "*1\r\n$", 5);
    expect_error(buf, n, "Protocol error: too big bulk count string", true);
    free(buf);
}

static void test_large_declared_bulk_waits(void **state)
{
    /* A 100 MB bulk announced: the parser waits for the bytes and only
     * remembers where it is. */
    struct gs_resp_parser p = new_parser();
    char req[] = "*2\r\n$3\r\nSET\r\n$100000000\r\nabc";
    struct parsed r = parse(&p, req, strlen(req));
    assert_int_equal(r.rc, GS_RESP_NEED_MORE);
    assert_int_equal(p.argc, 1);
    assert_int_equal(p.bulk_len, 100000000);
    assert_true(p.cap <= 1024);
    gs_resp_parser_free(&p);
}

static void test_many_args(void **state)
{
    /* More than the initial 1024 argument slots. */
    size_t nargs = 3000;
    size_t cap = 16 + nargs * 16;
    char *buf = malloc(cap);
    size_t len = (size_t)sprintf(buf, "*%zu\r\n", nargs);
    for (size_t i = 0; i < nargs; i++)
        len += (size_t)sprintf(buf + len, "$%zu\r\n%zu\r\n",
                               i < 10     ? (size_t)1
                               : i < 100  ? 2
                               : i < 1000 ? 3
                                          : 4,
                               i);
    struct gs_resp_parser p = new_parser();
    struct parsed r = parse(&p, buf, len);
    assert_int_equal(r.rc, GS_RESP_REQUEST);
    assert_int_equal(r.argc, nargs);
    assert_arg(&r.argv[2999], "2999", 4);
    /* The next request gives the grown arrays back: one huge request must
     * not pin them for the connection's lifetime. */
    char ping[] = "*1\r\n$4\r\nPING\r\n";
    r = parse(&p, ping, sizeof(ping) - 1);
    assert_int_equal(r.rc, GS_RESP_REQUEST);
    assert_int_equal(r.argc, 1);
    assert_arg(&r.argv[0], "PING", 4);
    assert_true(p.cap <= 1024);
    assert_true(p.argv_cap <= 1024);
    free(buf);
    gs_resp_parser_free(&p);
}

static void test_string2ll(void **state)
{
    int64_t v;
    assert_true(gs_string2ll("0", 1, &v) && v == 0);
    assert_true(gs_string2ll("-1", 2, &v) && v == -1);
    assert_true(gs_string2ll("9223372036854775807", 19, &v) && v == INT64_MAX);
    assert_true(gs_string2ll("-9223372036854775808", 20, &v) && v == INT64_MIN);
    assert_false(gs_string2ll("9223372036854775808", 19, &v));
    assert_false(gs_string2ll("01", 2, &v));
    assert_false(gs_string2ll("+1", 2, &v));
    assert_false(gs_string2ll("-0", 2, &v));
    assert_false(gs_string2ll(" 1", 2, &v));
    assert_false(gs_string2ll("1a", 2, &v));
    assert_false(gs_string2ll("", 0, &v));
    assert_false(gs_string2ll("-", 1, &v));
}

/* ---------------------------------------------------------------- writer */

static void assert_out(struct core_buf *b, const char *want)
{
    assert_int_equal(b->len, strlen(want));
    assert_memory_equal(b->data, want, b->len);
    b->len = 0;
}

static void test_writer_resp2(void **state)
{
    struct core_buf b = {0};
    struct gs_writer w = {&b, 2};
    gs_reply_ok(&w);
    assert_out(&b, "+OK\r\n");
    gs_reply_error(&w, "ERR bad\r\nthing", 14);
    assert_out(&b, "-ERR bad  thing\r\n");
    gs_reply_int(&w, INT64_MIN);
    assert_out(&b, ":-9223372036854775808\r\n");
    gs_reply_bulk(&w, "a\0b", 3);
    assert_int_equal(b.len, 9);
    assert_memory_equal(b.data, "$3\r\na\0b\r\n", 9);
    b.len = 0;
    gs_reply_null(&w);
    assert_out(&b, "$-1\r\n");
    gs_reply_null_array(&w);
    assert_out(&b, "*-1\r\n");
    gs_reply_map(&w, 2);
    assert_out(&b, "*4\r\n");
    gs_reply_set(&w, 2);
    assert_out(&b, "*2\r\n");
    gs_reply_double(&w, 1.5);
    assert_out(&b, "$3\r\n1.5\r\n");
    gs_reply_double(&w, -1.0 / 0.0);
    assert_out(&b, "$4\r\n-inf\r\n");
    gs_reply_bool(&w, true);
    assert_out(&b, ":1\r\n");
    gs_reply_verbatim(&w, "hi", 2, "txt");
    assert_out(&b, "$2\r\nhi\r\n");
    gs_reply_errorf(&w, "ERR %d", 42);
    assert_out(&b, "-ERR 42\r\n");
    core_buf_free(&b);
}

static void test_writer_resp3(void **state)
{
    struct core_buf b = {0};
    struct gs_writer w = {&b, 3};
    gs_reply_null(&w);
    assert_out(&b, "_\r\n");
    gs_reply_null_array(&w);
    assert_out(&b, "_\r\n");
    gs_reply_map(&w, 2);
    assert_out(&b, "%2\r\n");
    gs_reply_set(&w, 1);
    assert_out(&b, "~1\r\n");
    gs_reply_double(&w, 1.5);
    assert_out(&b, ",1.5\r\n");
    gs_reply_double(&w, 1.0 / 0.0);
    assert_out(&b, ",inf\r\n");
    gs_reply_bool(&w, false);
    assert_out(&b, "#f\r\n");
    gs_reply_verbatim(&w, "hi", 2, "txt");
    assert_out(&b, "=6\r\ntxt:hi\r\n");
    core_buf_free(&b);
}

static void test_writer_grows(void **state)
{
    struct core_buf b = {0};
    struct gs_writer w = {&b, 2};
    char big[100000];
    memset(big, 'x', sizeof(big));
    for (int i = 0; i < 10; i++)
        gs_reply_bulk(&w, big, sizeof(big));
    assert_false(b.oom);
    assert_int_equal(b.len, 10 * (sizeof(big) + strlen("$100000\r\n\r\n")));
    core_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_multibulk_whole),    cmocka_unit_test(test_multibulk_every_split),
        cmocka_unit_test(test_inline_every_split), cmocka_unit_test(test_pipeline),
        cmocka_unit_test(test_empty_requests),     cmocka_unit_test(test_errors),
        cmocka_unit_test(test_too_big_lines),      cmocka_unit_test(test_large_declared_bulk_waits),
        cmocka_unit_test(test_many_args),          cmocka_unit_test(test_string2ll),
        cmocka_unit_test(test_writer_resp2),       cmocka_unit_test(test_writer_resp3),
        cmocka_unit_test(test_writer_grows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
