/* core/http: the request parser's accepts and refusals, query decoding, and a
 * live server answering a blocking client thread over loopback. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/error.h"
#include "core/http.h"

static int parse(const char *s, struct core_http_request *r)
{
    return core_http_parse_request(s, strlen(s), r);
}

static void test_parse_simple(void **state)
{
    struct core_http_request r;
    const char *s = "GET /metrics?fmt=json&x=1 HTTP/1.1\r\nHost: a\r\n\r\n";
    assert_int_equal(parse(s, &r), (int)strlen(s));
    assert_int_equal(r.method, CORE_HTTP_GET);
    assert_true(core_http_path_is(&r, "/metrics"));
    assert_int_equal(r.query_len, 12);
    assert_true(r.keep_alive);
    assert_false(r.has_body);
    char v[16];
    assert_int_equal(core_http_query_get(&r, "fmt", v, sizeof v), 4);
    assert_string_equal(v, "json");
    assert_int_equal(core_http_query_get(&r, "x", v, sizeof v), 1);
    assert_int_equal(core_http_query_get(&r, "y", v, sizeof v), CORE_ENOTFOUND);
    assert_int_equal(core_http_query_get(&r, "fmt", v, 3), CORE_ETOOBIG);
}

static void test_parse_variants(void **state)
{
    struct core_http_request r;
    assert_true(parse("HEAD / HTTP/1.0\n\n", &r) > 0);
    assert_int_equal(r.method, CORE_HTTP_HEAD);
    assert_false(r.keep_alive); /* 1.0 default */
    assert_true(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", &r) > 0);
    assert_true(r.keep_alive);
    assert_true(parse("GET / HTTP/1.1\r\nconnection: foo, close\r\n\r\n", &r) > 0);
    assert_false(r.keep_alive);
    assert_true(parse("POST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\n", &r) > 0);
    assert_int_equal(r.method, CORE_HTTP_OTHER);
    assert_true(r.has_body);
    assert_true(parse("GET / HTTP/1.1\r\nContent-Length: 000\r\n\r\n", &r) > 0);
    assert_false(r.has_body);
    assert_true(parse("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &r) > 0);
    assert_true(r.has_body);
    assert_true(parse("\r\nGET /a%20b?q=a%2Fb+c HTTP/1.1\r\n\r\n", &r) > 0);
    char v[16];
    assert_int_equal(core_http_query_get(&r, "q", v, sizeof v), 5);
    assert_string_equal(v, "a/b c");
}

static void test_parse_refusals(void **state)
{
    struct core_http_request r;
    const char *bad[] = {
        "GET\r\n\r\n",
        "GET / HTTP/2.0\r\n\r\n",
        "GET /  HTTP/1.1\r\n\r\n",
        "GET x HTTP/1.1\r\n\r\n",
        " GET / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
        "GET / HTTP/1.1\r\n folded: x\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "GET / HTTP/1.1\r\nX: a\x01b\r\n\r\n",
        "GET / HTTP/1.1x\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (parse(bad[i], &r) != CORE_EPROTO)
            fail_msg("accepted #%zu", i);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\n", &r), CORE_EINCOMPLETE);
    assert_int_equal(parse("", &r), CORE_EINCOMPLETE);
    static char big[CORE_HTTP_REQUEST_MAX + 10];
    memset(big, 'a', sizeof big - 1);
    memcpy(big, "GET /", 5);
    assert_int_equal(parse(big, &r), CORE_ETOOBIG);
}

/* ---- live server ---- */

static void hello(const struct core_http_request *req, struct core_http_response *res, void *data)
{
    int *calls = data;
    (*calls)++;
    res->content_type = "application/json";
    core_http_printf(res, "{\"hello\":\"");
    core_http_json_escape(res, "w\"o", 3);
    core_http_printf(res, "\"}");
}

static void teapot(const struct core_http_request *req, struct core_http_response *res, void *data)
{
    core_http_reply(res, 418, "text/plain", "short and stout\n", 16);
}

struct client {
    int family;
    const char *addr;
    int port;
    const char *req;
    char out[4096];
    size_t len;
    uv_async_t *done;
};

static void *client_main(void *arg)
{
    struct client *c = arg;
    int fd = socket(c->family, SOCK_STREAM, 0);
    struct sockaddr_storage ss = {0};
    socklen_t sl;
    if (c->family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)c->port);
        inet_pton(AF_INET6, c->addr, &a->sin6_addr);
        sl = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)c->port);
        inet_pton(AF_INET, c->addr, &a->sin_addr);
        sl = sizeof *a;
    }
    if (connect(fd, (struct sockaddr *)&ss, sl) == 0) {
        if (write(fd, c->req, strlen(c->req)) > 0) {
            ssize_t n;
            while (c->len < sizeof c->out - 1 &&
                   (n = read(fd, c->out + c->len, sizeof c->out - 1 - c->len)) > 0)
                c->len += (size_t)n;
        }
    }
    close(fd);
    uv_async_send(c->done);
    return NULL;
}

static void on_done(uv_async_t *a)
{
    core_http_stop(a->data);
    uv_close((uv_handle_t *)a, NULL);
}

/* Serve one client connection that sends c->req and reads until the
 * server closes; returns the server's stats. */
static void serve_one(const char *host, struct client *c, int *calls, struct core_http_stats *st)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct core_http_server *srv;
    assert_int_equal(core_http_new(&srv, &loop, 4, 0), 0);
    assert_int_equal(core_http_route(srv, "/hello", hello, calls), 0);
    assert_int_equal(core_http_route(srv, "/hello", hello, calls), CORE_EEXISTS);
    assert_int_equal(core_http_route(srv, "nope", hello, calls), CORE_EINVAL);
    assert_int_equal(core_http_route(srv, "/tea", teapot, NULL), 0);
    assert_int_equal(core_http_listen(srv, host, 0), 0);
    int port = core_http_port(srv);
    assert_true(port > 0);
    /* The same port twice: the second listen is refused as busy. */
    struct core_http_server *other;
    assert_int_equal(core_http_new(&other, &loop, 4, 0), 0);
    assert_int_equal(core_http_listen(other, host, port), CORE_EBUSY);
    core_http_stop(other);
    uv_async_t done;
    uv_async_init(&loop, &done, on_done);
    done.data = srv;
    c->port = port;
    c->done = &done;
    pthread_t t;
    pthread_create(&t, NULL, client_main, c);
    uv_run(&loop, UV_RUN_DEFAULT);
    pthread_join(t, NULL);
    assert_int_equal(uv_loop_close(&loop), 0);
    c->out[c->len] = '\0';
    core_http_get_stats(srv, st);
    core_http_free(srv);
    core_http_free(other);
}

static void test_server_pipelined_keepalive_and_close(void **state)
{
    /* Three pipelined requests, the third asks to close; the DELETE after
     * it is never answered. */
    struct client c = {
        .family = AF_INET,
        .addr = "127.0.0.1",
        .req = "GET /hello HTTP/1.1\r\n\r\nHEAD /tea HTTP/1.1\r\n\r\n"
               "GET /nope HTTP/1.1\r\nConnection: close\r\n\r\nDELETE / HTTP/1.1\r\n\r\n",
    };
    int calls = 0;
    struct core_http_stats st;
    serve_one("127.0.0.1", &c, &calls, &st);
    const char *first = strstr(c.out, "HTTP/1.1 200 OK");
    assert_non_null(first);
    assert_non_null(strstr(c.out, "{\"hello\":\"w\\\"o\"}"));
    const char *second = strstr(c.out, "HTTP/1.1 418");
    assert_non_null(second);
    assert_true(second > first);
    /* HEAD: the length of the body, but no body. */
    assert_non_null(strstr(second, "Content-Length: 16\r\n"));
    assert_null(strstr(c.out, "short and stout"));
    const char *third = strstr(c.out, "HTTP/1.1 404");
    assert_non_null(third);
    assert_true(third > second);
    assert_non_null(strstr(third, "Connection: close"));
    assert_null(strstr(c.out, "405"));
    assert_int_equal(calls, 1);
    assert_int_equal(st.requests, 3);
    assert_int_equal(st.errors, 2);
}

static void test_server_refuses_methods_and_bodies(void **state)
{
    struct client c = {
        .family = AF_INET,
        .addr = "127.0.0.1",
        .req = "POST /hello HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi",
    };
    int calls = 0;
    struct core_http_stats st;
    serve_one("127.0.0.1", &c, &calls, &st);
    assert_non_null(strstr(c.out, "HTTP/1.1 405 Method Not Allowed"));
    assert_non_null(strstr(c.out, "Connection: close"));
    assert_int_equal(calls, 0);
}

static void test_server_on_ipv6_loopback(void **state)
{
    /* IPv6 works wherever IPv4 does: listen on ::1 and answer over it. */
    struct client c = {
        .family = AF_INET6,
        .addr = "::1",
        .req = "GET /hello HTTP/1.0\r\n\r\n",
    };
    int calls = 0;
    struct core_http_stats st;
    serve_one("::1", &c, &calls, &st);
    assert_non_null(strstr(c.out, "HTTP/1.1 200 OK"));
    assert_non_null(strstr(c.out, "Connection: close")); /* HTTP/1.0 default */
    assert_int_equal(calls, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_simple),
        cmocka_unit_test(test_parse_variants),
        cmocka_unit_test(test_parse_refusals),
        cmocka_unit_test(test_server_pipelined_keepalive_and_close),
        cmocka_unit_test(test_server_refuses_methods_and_bodies),
        cmocka_unit_test(test_server_on_ipv6_loopback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
