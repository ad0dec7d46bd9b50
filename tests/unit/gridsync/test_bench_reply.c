/* gs-bench's streaming reply parser (bench/gridsync/reply.c): kinds,
 * pipelined replies, any split of the stream, and rejection of bad bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "bench/gridsync/reply.h"
#include "core/error.h"

#define MAX_REPLIES 32

struct parsed {
    int n;
    int rc; /* last return code: 0 (incomplete at the end) or CORE_EPROTO */
    struct gsb_reply r[MAX_REPLIES];
};

/* Feed s in chunks of `chunk` bytes (0: whole) and collect the replies. */
static struct parsed feed(enum gsb_protocol proto, const char *s, size_t len, size_t chunk)
{
    struct gsb_reply_parser p;
    struct parsed out = {0};
    gsb_reply_parser_init(&p, proto);
    size_t off = 0;
    if (chunk == 0)
        chunk = len ? len : 1;
    while (off < len) {
        size_t end = off + chunk < len ? off + chunk : len;
        while (off < end) {
            size_t used = 0;
            struct gsb_reply r;
            int rc = gsb_reply_parse(&p, s + off, end - off, &used, &r);
            if (rc < 0) {
                out.rc = rc;
                return out;
            }
            off += used;
            if (rc == 1 && out.n < MAX_REPLIES)
                out.r[out.n++] = r;
        }
    }
    return out;
}

static struct parsed feed_str(enum gsb_protocol proto, const char *s)
{
    return feed(proto, s, strlen(s), 0);
}

static void test_resp_scalar_kinds(void **state)
{
    const char *s = "+OK\r\n-ERR no\r\n:42\r\n$3\r\nfoo\r\n$-1\r\n$0\r\n\r\n_\r\n,1.5\r\n#t\r\n";
    struct parsed p = feed_str(GSB_PROTO_RESP, s);
    assert_int_equal(p.rc, 0);
    assert_int_equal(p.n, 9);
    assert_int_equal(p.r[0].kind, GSB_REPLY_STATUS);
    assert_int_equal(p.r[1].kind, GSB_REPLY_ERROR);
    assert_int_equal(p.r[2].kind, GSB_REPLY_INT);
    assert_int_equal(p.r[3].kind, GSB_REPLY_BULK);
    assert_int_equal(p.r[3].len, 3);
    assert_int_equal(p.r[4].kind, GSB_REPLY_NULL);
    assert_int_equal(p.r[5].kind, GSB_REPLY_BULK);
    assert_int_equal(p.r[5].len, 0);
    assert_int_equal(p.r[6].kind, GSB_REPLY_NULL);
    assert_int_equal(p.r[7].kind, GSB_REPLY_OTHER);
    assert_int_equal(p.r[8].kind, GSB_REPLY_OTHER);
}

static void test_resp_aggregates_are_one_reply(void **state)
{
    const char *s = "*3\r\n$1\r\na\r\n*2\r\n:1\r\n:2\r\n+x\r\n"
                    "*0\r\n*-1\r\n%1\r\n+k\r\n$1\r\nv\r\n:7\r\n";
    struct parsed p = feed_str(GSB_PROTO_RESP, s);
    assert_int_equal(p.rc, 0);
    assert_int_equal(p.n, 5);
    assert_int_equal(p.r[0].kind, GSB_REPLY_ARRAY);
    assert_int_equal(p.r[0].len, 3);
    assert_int_equal(p.r[1].kind, GSB_REPLY_ARRAY);
    assert_int_equal(p.r[1].len, 0);
    assert_int_equal(p.r[2].kind, GSB_REPLY_NULL);
    assert_int_equal(p.r[3].kind, GSB_REPLY_ARRAY); /* the map */
    assert_int_equal(p.r[4].kind, GSB_REPLY_INT);
}

static void test_parse_stops_after_each_reply(void **state)
{
    struct gsb_reply_parser p;
    struct gsb_reply r;
    size_t used;
    const char *s = "+OK\r\n$2\r\nhi\r\n";
    gsb_reply_parser_init(&p, GSB_PROTO_RESP);
    assert_int_equal(gsb_reply_parse(&p, s, strlen(s), &used, &r), 1);
    assert_int_equal(used, 5);
    assert_int_equal(gsb_reply_parse(&p, s + 5, strlen(s) - 5, &used, &r), 1);
    assert_int_equal(used, strlen(s) - 5);
    assert_int_equal(r.kind, GSB_REPLY_BULK);
    /* an incomplete reply consumes everything and waits */
    assert_int_equal(gsb_reply_parse(&p, "$10\r\nabc", 8, &used, &r), 0);
    assert_int_equal(used, 8);
}

static void test_every_split_gives_the_same_replies(void **state)
{
    static const char resp[] = "+OK\r\n$5\r\nhello\r\n*2\r\n$1\r\na\r\n$-1\r\n-ERR x\r\n:12\r\n";
    static const char mc[] = "VALUE key:000000000001 0 5\r\nhello\r\nEND\r\nEND\r\nSTORED\r\n"
                             "SERVER_ERROR out of memory\r\n";
    struct parsed whole = feed(GSB_PROTO_RESP, resp, strlen(resp), 0);
    assert_int_equal(whole.n, 5);
    for (size_t chunk = 1; chunk < sizeof(resp); chunk++) {
        struct parsed p = feed(GSB_PROTO_RESP, resp, strlen(resp), chunk);
        assert_int_equal(p.rc, 0);
        assert_int_equal(p.n, whole.n);
        assert_memory_equal(p.r, whole.r, sizeof(p.r[0]) * (size_t)p.n);
    }
    whole = feed(GSB_PROTO_MEMCACHE, mc, strlen(mc), 0);
    assert_int_equal(whole.n, 4);
    for (size_t chunk = 1; chunk < sizeof(mc); chunk++) {
        struct parsed p = feed(GSB_PROTO_MEMCACHE, mc, strlen(mc), chunk);
        assert_int_equal(p.rc, 0);
        assert_int_equal(p.n, whole.n);
        assert_memory_equal(p.r, whole.r, sizeof(p.r[0]) * (size_t)p.n);
    }
}

static void test_resp_rejects_malformed(void **state)
{
    const char *bad[] = {
        "?x\r\n",           /* unknown type */
        "$abc\r\n",         /* length not a number */
        "$\r\n",            /* no length */
        "$-2\r\n",          /* negative length other than -1 */
        "$3\r\nfoobar\r\n", /* payload longer than announced */
        "+OK\rX",           /* CR without LF */
        "+OK\n",            /* bare LF */
        "*1-\r\n",          /* sign after digits */
        "$99999999999999999999\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct parsed p = feed_str(GSB_PROTO_RESP, bad[i]);
        assert_int_equal(p.rc, CORE_EPROTO);
    }
    /* nesting deeper than the parser's stack */
    char deep[GSB_REPLY_MAX_DEPTH * 4 + 8];
    size_t n = 0;
    for (int i = 0; i <= GSB_REPLY_MAX_DEPTH; i++) {
        memcpy(deep + n, "*1\r\n", 4);
        n += 4;
    }
    assert_int_equal(feed(GSB_PROTO_RESP, deep, n, 0).rc, CORE_EPROTO);
}

static void test_failed_parser_stays_failed(void **state)
{
    struct gsb_reply_parser p;
    struct gsb_reply r;
    size_t used;
    gsb_reply_parser_init(&p, GSB_PROTO_RESP);
    assert_int_equal(gsb_reply_parse(&p, "!!", 2, &used, &r), CORE_EPROTO);
    assert_int_equal(gsb_reply_parse(&p, "+OK\r\n", 5, &used, &r), CORE_EPROTO);
    gsb_reply_parser_init(&p, GSB_PROTO_RESP);
    assert_int_equal(gsb_reply_parse(&p, "+OK\r\n", 5, &used, &r), 1);
}

static void test_memcache_replies(void **state)
{
    const char *s = "VALUE key:000000000007 0 3\r\nabc\r\nEND\r\n"
                    "END\r\nSTORED\r\nNOT_STORED\r\nERROR\r\nCLIENT_ERROR bad\r\n42\r\n";
    struct parsed p = feed_str(GSB_PROTO_MEMCACHE, s);
    assert_int_equal(p.rc, 0);
    assert_int_equal(p.n, 7);
    assert_int_equal(p.r[0].kind, GSB_REPLY_BULK);
    assert_int_equal(p.r[0].len, 3);
    assert_int_equal(p.r[1].kind, GSB_REPLY_NULL);
    assert_int_equal(p.r[2].kind, GSB_REPLY_STATUS);
    assert_int_equal(p.r[3].kind, GSB_REPLY_STATUS);
    assert_int_equal(p.r[4].kind, GSB_REPLY_ERROR);
    assert_int_equal(p.r[5].kind, GSB_REPLY_ERROR);
    assert_int_equal(p.r[6].kind, GSB_REPLY_INT);
}

static void test_memcache_rejects_malformed(void **state)
{
    const char *bad[] = {
        "HELLO\r\n",                      /* not a reply */
        "VALUE k 0\r\n",                  /* no length */
        "VALUE k 0 x\r\n",                /* length not a number */
        "VALUE k 0 1\r\nab\r\nEND\r\n",   /* payload longer than announced */
        "VALUE k 0 1\r\na\r\nSTORED\r\n", /* only END may follow a value */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(feed_str(GSB_PROTO_MEMCACHE, bad[i]).rc, CORE_EPROTO);
    /* a line longer than any reply line */
    char line[GSB_REPLY_MAX_LINE + 8];
    memset(line, 'A', sizeof(line));
    assert_int_equal(feed(GSB_PROTO_MEMCACHE, line, sizeof(line), 0).rc, CORE_EPROTO);
}

/* A simple error's line is kept, across any split, for -MOVED / -ASK;
 * an error inside an array and every other kind have no text. */
static void test_resp_error_text(void **state)
{
    const char *s = "-MOVED 3999 127.0.0.1:6381\r\n*1\r\n-ERR in\r\n+OK\r\n";
    size_t len = strlen(s);
    for (size_t chunk = 1; chunk <= len; chunk++) {
        struct gsb_reply_parser p;
        gsb_reply_parser_init(&p, GSB_PROTO_RESP);
        int n = 0;
        for (size_t off = 0; off < len;) {
            size_t end = off + chunk < len ? off + chunk : len, used = 0;
            struct gsb_reply r;
            int rc = gsb_reply_parse(&p, s + off, end - off, &used, &r);
            assert_true(rc >= 0);
            off += used;
            if (rc != 1)
                continue;
            if (n == 0) {
                assert_int_equal(r.kind, GSB_REPLY_ERROR);
                assert_non_null(r.text);
                assert_int_equal(r.text_len, strlen("MOVED 3999 127.0.0.1:6381"));
                assert_string_equal(r.text, "MOVED 3999 127.0.0.1:6381");
            } else {
                assert_null(r.text);
            }
            n++;
        }
        assert_int_equal(n, 3);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resp_scalar_kinds),
        cmocka_unit_test(test_resp_aggregates_are_one_reply),
        cmocka_unit_test(test_parse_stops_after_each_reply),
        cmocka_unit_test(test_every_split_gives_the_same_replies),
        cmocka_unit_test(test_resp_rejects_malformed),
        cmocka_unit_test(test_failed_parser_stays_failed),
        cmocka_unit_test(test_memcache_replies),
        cmocka_unit_test(test_memcache_rejects_malformed),
        cmocka_unit_test(test_resp_error_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
