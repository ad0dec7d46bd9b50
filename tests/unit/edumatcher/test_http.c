/* http: the request parser's accepts and refusals, query decoding, and a
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
#include "edumatcher/http.h"

static int parse(const char *s, struct em_http_request *r)
{
    return em_http_parse_request(s, strlen(s), r);
}

static void test_parse_simple(void **state)
{
    struct em_http_request r;
    const char *s = "GET /metrics?fmt=json&x=1 HTTP/1.1\r\nHost: a\r\n\r\n";
    assert_int_equal(parse(s, &r), (int)strlen(s));
    assert_int_equal(r.method, EM_HTTP_GET);
    assert_true(em_http_path_is(&r, "/metrics"));
    assert_int_equal(r.query_len, 12);
    assert_true(r.keep_alive);
    assert_false(r.has_body);
    char v[16];
    assert_int_equal(em_http_query_get(&r, "fmt", v, sizeof v), 4);
    assert_string_equal(v, "json");
    assert_int_equal(em_http_query_get(&r, "x", v, sizeof v), 1);
    assert_int_equal(em_http_query_get(&r, "y", v, sizeof v), CORE_ENOTFOUND);
    assert_int_equal(em_http_query_get(&r, "fmt", v, 3), CORE_ETOOBIG);
}

static void test_parse_variants(void **state)
{
    struct em_http_request r;
    assert_true(parse("HEAD / HTTP/1.0\n\n", &r) > 0);
    assert_int_equal(r.method, EM_HTTP_HEAD);
    assert_false(r.keep_alive); /* 1.0 default */
    assert_true(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", &r) > 0);
    assert_true(r.keep_alive);
    assert_true(parse("GET / HTTP/1.1\r\nconnection: foo, close\r\n\r\n", &r) > 0);
    assert_false(r.keep_alive);
    assert_true(parse("POST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\n", &r) > 0);
    assert_int_equal(r.method, EM_HTTP_OTHER);
    assert_true(r.has_body);
    assert_true(parse("GET / HTTP/1.1\r\nContent-Length: 000\r\n\r\n", &r) > 0);
    assert_false(r.has_body);
    assert_true(parse("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &r) > 0);
    assert_true(r.has_body);
    assert_true(parse("\r\nGET /a%20b?q=a%2Fb+c HTTP/1.1\r\n\r\n", &r) > 0);
    char v[16];
    assert_int_equal(em_http_query_get(&r, "q", v, sizeof v), 5);
    assert_string_equal(v, "a/b c");
}

static void test_parse_refusals(void **state)
{
    struct em_http_request r;
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
    static char big[EM_HTTP_REQUEST_MAX + 10];
    memset(big, 'a', sizeof big - 1);
    memcpy(big, "GET /", 5);
    assert_int_equal(parse(big, &r), CORE_ETOOBIG);
}

/* ---- live server ---- */

static void handler(const struct em_http_request *req, struct em_http_response *res, void *data)
{
    if (em_http_path_is(req, "/hello")) {
        res->content_type = "application/json";
        em_http_printf(res, "{\"hello\":\"");
        em_http_json_escape(res, "w\"o", 3);
        em_http_printf(res, "\"}");
    } else {
        res->status = 404;
        em_http_printf(res, "no\n");
    }
}

struct client {
    int port;
    char out[4096];
    size_t len;
    uv_async_t *done;
};

static void *client_main(void *arg)
{
    struct client *c = arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c->port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        /* two pipelined requests, the second asks to close */
        const char *req =
            "GET /hello HTTP/1.1\r\n\r\nGET /nope HTTP/1.1\r\nConnection: close\r\n\r\n"
            "DELETE / HTTP/1.1\r\n\r\n";
        if (write(fd, req, strlen(req)) > 0) {
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
    struct em_http_server *srv = a->data;
    em_http_close(srv);
    uv_close((uv_handle_t *)a, NULL);
}

static void test_server(void **state)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct em_http_server srv;
    assert_int_equal(em_http_listen(&srv, &loop, "127.0.0.1", 0, 4, handler, NULL), 0);
    int port = em_http_port(&srv);
    assert_true(port > 0);
    struct em_http_server other;
    assert_int_equal(em_http_listen(&other, &loop, "127.0.0.1", port, 4, handler, NULL),
                     CORE_EBUSY);
    uv_async_t done;
    uv_async_init(&loop, &done, on_done);
    done.data = &srv;
    struct client c = {.port = port, .done = &done};
    pthread_t t;
    pthread_create(&t, NULL, client_main, &c);
    uv_run(&loop, UV_RUN_DEFAULT);
    pthread_join(t, NULL);
    assert_int_equal(uv_loop_close(&loop), 0);
    c.out[c.len] = '\0';
    const char *first = strstr(c.out, "HTTP/1.1 200 OK");
    assert_non_null(first);
    assert_non_null(strstr(c.out, "{\"hello\":\"w\\\"o\"}"));
    const char *second = strstr(c.out, "HTTP/1.1 404");
    assert_non_null(second);
    assert_true(second > first);
    assert_non_null(strstr(second, "Connection: close"));
    /* the connection closed after the second: the DELETE was never answered */
    assert_null(strstr(c.out, "405"));
    assert_int_equal(srv.requests, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_simple),
        cmocka_unit_test(test_parse_variants),
        cmocka_unit_test(test_parse_refusals),
        cmocka_unit_test(test_server),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
