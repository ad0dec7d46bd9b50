/*
 * The libuv TCP server scaffold, driven over loopback: the server's loop
 * runs in a thread, the test talks to it with blocking sockets. The test
 * protocol is line based: "x\n" echoes "x\n"; "BIG n\n" replies n bytes;
 * "QUIT\n" replies "BYE\n" and closes after the reply; "ID\n" replies the
 * connection's id, "KILL n\n" closes connection n and replies "OK\n".
 *
 * Every test runs twice: with replies written after each read, and with
 * them deferred to the end of the loop iteration and the loop spinning
 * after input (defer_flush, busy_poll_us).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/uv_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

struct fixture {
    uv_loop_t loop;
    uv_async_t stop;
    struct core_server *srv;
    pthread_t thread;
    int port;
    /* counted on the loop thread, read after it has joined */
    int opens, closes, data_calls;
    uint64_t last_id;
};

/* The group's server mode (set by the group setup). */
static bool g_defer;
static int64_t g_busy_poll_us;

static int on_open(struct core_conn *c, void *app)
{
    struct fixture *f = app;
    f->opens++;
    assert_true(core_conn_id(c) > f->last_id); /* ids increase, never reused */
    f->last_id = core_conn_id(c);
    core_conn_set_data(c, f);
    return 0;
}

static void on_close(struct core_conn *c)
{
    struct fixture *f = core_conn_data(c);
    f->closes++;
}

static size_t on_data(struct core_conn *c, char *data, size_t len)
{
    struct fixture *f = core_conn_data(c);
    f->data_calls++;
    size_t off = 0;
    while (off < len && !core_conn_closing(c)) {
        char *nl = memchr(data + off, '\n', len - off);
        if (!nl)
            break;
        size_t n = (size_t)(nl - (data + off));
        struct core_buf *out = core_conn_out(c);
        if (n == 4 && memcmp(data + off, "QUIT", 4) == 0) {
            core_buf_append(out, "BYE\n", 4);
            core_conn_close_after_reply(c);
        } else if (n == 2 && memcmp(data + off, "ID", 2) == 0) {
            char id[32];
            int k = snprintf(id, sizeof(id), "%llu\n", (unsigned long long)core_conn_id(c));
            core_buf_append(out, id, (size_t)k);
        } else if (n > 5 && memcmp(data + off, "KILL ", 5) == 0) {
            struct core_conn *victim =
                core_server_find(core_conn_server(c), strtoull(data + off + 5, NULL, 10));
            if (victim && victim != c)
                core_conn_close(victim);
            core_buf_append(out, "OK\n", 3);
        } else if (n > 4 && memcmp(data + off, "BIG ", 4) == 0) {
            size_t big = strtoul(data + off + 4, NULL, 10);
            char *p = core_buf_reserve(out, big);
            if (p) {
                memset(p, 'x', big);
                out->len += big;
            }
            if (core_conn_flush(c))
                break;
        } else {
            core_buf_append(out, data + off, n + 1);
        }
        off += n + 1;
    }
    return off;
}

static const struct core_server_ops ops = {on_open, on_data, on_close};

static void stop_cb(uv_async_t *a)
{
    struct fixture *f = a->data;
    core_server_stop(f->srv);
    uv_close((uv_handle_t *)&f->stop, NULL);
}

static void *loop_thread(void *arg)
{
    struct fixture *f = arg;
    uv_run(&f->loop, UV_RUN_DEFAULT);
    return NULL;
}

static struct fixture *start(int64_t maxclients, int64_t qlimit, int64_t olimit)
{
    struct fixture *f = calloc(1, sizeof(*f));
    uv_loop_init(&f->loop);
    uv_async_init(&f->loop, &f->stop, stop_cb);
    f->stop.data = f;
    struct core_server_limits l = {.maxclients = maxclients,
                                   .query_buf_limit = qlimit,
                                   .output_buf_limit = olimit,
                                   .defer_flush = g_defer,
                                   .busy_poll_us = g_busy_poll_us};
    assert_int_equal(core_server_new(&f->srv, &f->loop, &ops, f, &l, "FULL\n"), 0);
    assert_int_equal(core_server_listen(f->srv, "127.0.0.1", 0), 0);
    f->port = core_server_port(f->srv);
    assert_true(f->port > 0);
    pthread_create(&f->thread, NULL, loop_thread, f);
    return f;
}

static void stop(struct fixture *f)
{
    uv_async_send(&f->stop);
    pthread_join(f->thread, NULL);
    assert_int_equal(f->opens, f->closes); /* on_close once per accepted connection */
    core_server_free(f->srv);
    assert_int_equal(uv_loop_close(&f->loop), 0); /* every handle closed */
    free(f);
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        assert_true(w > 0);
        p += w;
        n -= (size_t)w;
    }
}

/* Read exactly n bytes (or fail). */
static void recv_exact(int fd, char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, buf + got, n - got, 0);
        assert_true(r > 0);
        got += (size_t)r;
    }
}

/* Read until EOF (or error); returns the bytes read. */
static size_t recv_to_eof(int fd, char *buf, size_t cap)
{
    size_t got = 0;
    for (;;) {
        char tmp[65536];
        ssize_t r = recv(fd, tmp, sizeof(tmp), 0);
        if (r <= 0)
            return got;
        size_t k = (size_t)r < cap - got ? (size_t)r : cap - got;
        memcpy(buf + got, tmp, k);
        got += k;
    }
}

static void test_echo_pipeline_and_partial(void **state)
{
    struct fixture *f = start(10, 1 << 20, 0);
    int fd = connect_to(f->port);
    send_all(fd, "a\nbb\nccc\n", 9);
    char buf[64];
    recv_exact(fd, buf, 9);
    assert_memory_equal(buf, "a\nbb\nccc\n", 9);
    /* a request split over two sends is answered once complete */
    send_all(fd, "hel", 3);
    usleep(20000);
    send_all(fd, "lo\n", 3);
    recv_exact(fd, buf, 6);
    assert_memory_equal(buf, "hello\n", 6);
    close(fd);
    stop(f);
}

static void test_large_request_grows_buffer(void **state)
{
    struct fixture *f = start(10, 1 << 22, 0);
    int fd = connect_to(f->port);
    size_t n = 300000;
    char *req = malloc(n + 1);
    memset(req, 'q', n);
    req[n] = '\n';
    send_all(fd, req, n + 1);
    char *back = malloc(n + 1);
    recv_exact(fd, back, n + 1);
    assert_memory_equal(back, req, n + 1);
    free(req);
    free(back);
    close(fd);
    stop(f);
}

static void test_close_after_reply(void **state)
{
    struct fixture *f = start(10, 1 << 20, 0);
    int fd = connect_to(f->port);
    send_all(fd, "x\nQUIT\nnot answered\n", 20);
    char buf[64];
    size_t n = recv_to_eof(fd, buf, sizeof(buf));
    assert_int_equal(n, 6);
    assert_memory_equal(buf, "x\nBYE\n", 6);
    close(fd);
    stop(f);
}

/* Send as much of p as the peer takes; false once it refuses (reset). */
static bool send_what_it_takes(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* The reply a connection was drained for reaches a client that sent more
 * than the server read: closing with that input unread would reset the
 * connection, and the reset makes the client's kernel drop "BYE" before
 * the client reads it (every time, on Linux). */
static void test_close_after_reply_with_input_unread(void **state)
{
    struct fixture *f = start(10, 1 << 20, 0);
    for (int round = 0; round < 5; round++) {
        int fd = connect_to(f->port);
        size_t n = 300 * 1024;
        char *req = malloc(n);
        memset(req, 'j', n);
        memcpy(req, "QUIT\n", 5);
        assert_true(send_what_it_takes(fd, req, n)); /* read and discarded */
        free(req);
        char buf[64];
        errno = 0;
        size_t got = recv_to_eof(fd, buf, sizeof(buf));
        assert_int_equal(errno, 0); /* EOF, not ECONNRESET */
        assert_int_equal(got, 4);
        assert_memory_equal(buf, "BYE\n", 4);
        close(fd);
    }
    stop(f);
}

/* A client that reads the reply and its EOF but never closes is let go
 * after the linger time (the server's close then resets it: its next send
 * fails), and a stop does not wait for lingering connections. */
static void test_lingering_is_bounded(void **state)
{
    struct fixture *f = start(10, 1 << 20, 0);
    int fd = connect_to(f->port);
    send_all(fd, "QUIT\n", 5);
    char buf[16];
    assert_int_equal(recv_to_eof(fd, buf, sizeof(buf)), 4);
    bool released = false;
    for (int i = 0; i < 600 && !released; i++) { /* the linger time is 2-3 s */
        released = !send_what_it_takes(fd, "j", 1);
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_true(released);
    close(fd);
    int again = connect_to(f->port);
    send_all(again, "QUIT\n", 5);
    assert_int_equal(recv_to_eof(again, buf, sizeof(buf)), 4);
    stop(f); /* returns although `again` still lingers */
    close(again);
}

static void test_maxclients(void **state)
{
    struct fixture *f = start(2, 1 << 20, 0);
    int a = connect_to(f->port), b = connect_to(f->port);
    char buf[16];
    send_all(a, "1\n", 2);
    recv_exact(a, buf, 2);
    send_all(b, "2\n", 2);
    recv_exact(b, buf, 2);
    int c = connect_to(f->port);
    send_what_it_takes(c, "3\n", 2); /* sent before it learns it is refused */
    size_t n = recv_to_eof(c, buf, sizeof(buf));
    assert_int_equal(n, 5);
    assert_memory_equal(buf, "FULL\n", 5);
    close(a);
    close(b);
    close(c);
    stop(f);
}

static void test_query_buffer_limit(void **state)
{
    struct fixture *f = start(10, 4096, 0);
    int fd = connect_to(f->port);
    char junk[10000];
    memset(junk, 'j', sizeof(junk)); /* no newline: never consumed */
    send(fd, junk, sizeof(junk), MSG_NOSIGNAL);
    char buf[16];
    assert_int_equal(recv_to_eof(fd, buf, sizeof(buf)), 0);
    close(fd);
    uv_async_send(&f->stop);
    pthread_join(f->thread, NULL);
    struct core_server_stats st;
    core_server_get_stats(f->srv, &st);
    assert_int_equal(st.closed_by_query_limit, 1);
    assert_int_equal(f->opens, f->closes);
    core_server_free(f->srv);
    uv_loop_close(&f->loop);
    free(f);
}

static void test_output_limit_for_client_that_does_not_read(void **state)
{
    struct fixture *f = start(10, 1 << 20, 256 * 1024);
    int fd = connect_to(f->port);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    const char *req = "BIG 100000\n";
    /* Ask for ever more output and read nothing, until the server hangs
     * up (our send then fails); bounded. */
    time_t deadline = time(NULL) + 30;
    for (int i = 0; i < 100000 && time(NULL) < deadline; i++) {
        ssize_t w = send(fd, req, strlen(req), MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            break;
        if (i % 100 == 99)
            usleep(1000);
    }
    close(fd);
    uv_async_send(&f->stop);
    pthread_join(f->thread, NULL);
    struct core_server_stats st;
    core_server_get_stats(f->srv, &st);
    assert_int_equal(st.closed_by_output_limit, 1);
    assert_int_equal(f->opens, f->closes);
    core_server_free(f->srv);
    uv_loop_close(&f->loop);
    free(f);
}

static void test_stop_with_open_connections(void **state)
{
    struct fixture *f = start(10, 1 << 20, 0);
    int fds[5];
    char buf[4];
    for (int i = 0; i < 5; i++) {
        fds[i] = connect_to(f->port);
        send_all(fds[i], "p\n", 2);
        recv_exact(fds[i], buf, 2);
    }
    stop(f); /* closes all five: opens == closes is checked there */
    for (int i = 0; i < 5; i++) {
        assert_int_equal(recv_to_eof(fds[i], buf, sizeof(buf)), 0);
        close(fds[i]);
    }
}

/* Connections closed by another client's request while their own replies
 * may wait in the flush queue (both requests usually arrive in one poll):
 * each is freed once (ASan), and the killer is answered. */
static void test_close_of_a_connection_with_a_reply_pending(void **state)
{
    (void)state;
    struct fixture *f = start(10, 1 << 20, 0);
    int killer = connect_to(f->port);
    char buf[64];
    for (int i = 0; i < 50; i++) {
        int victim = connect_to(f->port);
        send_all(victim, "ID\n", 3);
        ssize_t n = recv(victim, buf, sizeof(buf) - 1, 0);
        assert_true(n > 1);
        buf[n] = '\0';
        char cmd[48];
        int k = snprintf(cmd, sizeof(cmd), "KILL %s", buf);
        send_all(victim, "x\n", 2);
        send_all(killer, cmd, (size_t)k);
        recv_exact(killer, buf, 3);
        assert_memory_equal(buf, "OK\n", 3);
        /* Closed: at most its echo (if written before the KILL), then EOF. */
        size_t got = recv_to_eof(victim, buf, sizeof(buf));
        assert_true(got == 0 || (got == 2 && memcmp(buf, "x\n", 2) == 0));
        close(victim);
    }
    close(killer);
    stop(f);
}

/* The loop's own CPU time (the thread that runs it), in milliseconds. */
static double loop_cpu_ms(struct fixture *f)
{
    clockid_t id;
    struct timespec ts;
    assert_int_equal(pthread_getcpuclockid(f->thread, &id), 0);
    assert_int_equal(clock_gettime(id, &ts), 0);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* After input stops, the loop sleeps (in the spinning mode, once
 * busy_poll_us has passed): over 300 ms of quiet it uses far less than
 * 300 ms of CPU. A loop that kept spinning would use nearly all of it
 * whenever it is scheduled; a slow machine only lowers the figure. */
static void test_loop_sleeps_when_input_stops(void **state)
{
    (void)state;
    struct fixture *f = start(10, 1 << 20, 0);
    int fd = connect_to(f->port);
    char buf[4];
    for (int i = 0; i < 100; i++) {
        send_all(fd, "p\n", 2);
        recv_exact(fd, buf, 2);
    }
    struct timespec quiet = {0, 300 * 1000 * 1000};
    double before = loop_cpu_ms(f);
    nanosleep(&quiet, NULL);
    assert_true(loop_cpu_ms(f) - before < 100);
    close(fd);
    stop(f);
}

static int plain_mode(void **state)
{
    (void)state;
    g_defer = false;
    g_busy_poll_us = 0;
    return 0;
}

static int deferred_mode(void **state)
{
    (void)state;
    g_defer = true;
    g_busy_poll_us = 20;
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_close_of_a_connection_with_a_reply_pending),
        cmocka_unit_test(test_loop_sleeps_when_input_stops),
        cmocka_unit_test(test_echo_pipeline_and_partial),
        cmocka_unit_test(test_large_request_grows_buffer),
        cmocka_unit_test(test_close_after_reply),
        cmocka_unit_test(test_close_after_reply_with_input_unread),
        cmocka_unit_test(test_lingering_is_bounded),
        cmocka_unit_test(test_maxclients),
        cmocka_unit_test(test_query_buffer_limit),
        cmocka_unit_test(test_output_limit_for_client_that_does_not_read),
        cmocka_unit_test(test_stop_with_open_connections),
    };
    int failed = cmocka_run_group_tests_name("replies after each read", tests, plain_mode, NULL);
    failed +=
        cmocka_run_group_tests_name("replies deferred, loop spinning", tests, deferred_mode, NULL);
    return failed;
}
