/* Hosted gateway sessions (engine_gateway.h): a real engine host and real
 * TCP connections on 127.0.0.1 (port 0), the loop turned by the test. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/clock.h"
#include "core/error.h"
#include "edumatcher/host/engine_gateway.h"
#include "edumatcher/host/engine_host.h"

static struct {
    struct em_host *h;
    struct em_hosted *x;
    uv_loop_t loop;
    char dir[64];
    unsigned hosted_acks, other_acks, unflushed;
    char other[256]; /* the last order.ack.<gw> left to the caller: its topic */
} T;

/* The engine's publish, as engine_main.c wires it: the hosted sessions
 * first; what they leave is counted here. Every ack must come after the
 * journal's flush (journal before ACK). */
static int publish(void *ctx, const struct em_bus_topic *topic, const void *data, size_t len)
{
    (void)ctx;
    bool ack = topic->len > 10 && memcmp(topic->s, "order.ack.", 10) == 0;
    if (ack) {
        struct em_journal *j = em_host_journal(T.h);
        if (j->len != 0 || j->synced_seq + 1 != j->next_seq)
            T.unflushed++;
    }
    if (em_hosted_publish(T.x, topic, data, len)) {
        T.hosted_acks++;
        return 0;
    }
    if (ack) {
        T.other_acks++;
        snprintf(T.other, sizeof T.other, "%.*s", (int)topic->len, topic->s);
    }
    return 0;
}

static const struct em_host_bus bus = {.publish = publish};

static void fatal(int rc)
{
    fail_msg("host failed: %s", core_strerror(rc));
}

static int setup(void **state)
{
    (void)state;
    memset(&T, 0, sizeof T);
    strcpy(T.dir, "/tmp/test_em_hostedXXXXXX");
    assert_non_null(mkdtemp(T.dir));
    struct em_host_config cfg = {.bus = &bus,
                                 .journal = {.dir = T.dir, .fsync = EM_FSYNC_BATCH},
                                 .md_depth = 2}; /* SYMBOLS takes lines with levels */
    assert_int_equal(em_host_open(&T.h, &cfg), 0);
    char path[128];
    snprintf(path, sizeof path, "%s/symbols.alf", T.dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("SYMBOL sym=ABC tick=0.01\n", f);
    fclose(f);
    assert_int_equal(em_host_load_symbols(T.h, path), 0);
    snprintf(path, sizeof path, "%s/tokens", T.dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("OPS s3cret\n", f);
    fclose(f);
    assert_int_equal(uv_loop_init(&T.loop), 0);
    struct em_hosted_config hc = {.bind = "127.0.0.1",
                                  .port = 0,
                                  .maxclients = 16,
                                  .tokens_file = path,
                                  .rate_limit = 0,
                                  .rate_burst = 1,
                                  .login_retry_ms = 100,
                                  .resend_ms = 1000,
                                  .fatal = fatal};
    assert_int_equal(em_hosted_open(&T.x, &T.loop, T.h, &hc), 0);
    assert_int_equal(em_hosted_listen(T.x), 0);
    assert_true(em_hosted_port(T.x) > 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    em_hosted_stop(T.x);
    assert_int_equal(em_host_flush(T.h), 0);
    uv_run(&T.loop, UV_RUN_DEFAULT); /* the handles close */
    em_hosted_free(T.x);
    em_host_close(T.h);
    assert_int_equal(uv_loop_close(&T.loop), 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", T.dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

/* ---- a trader: a non-blocking socket, the loop turned while waiting ---- */

struct trader {
    int fd;
    char buf[65536];
    size_t len;
};

static void connect_trader(struct trader *t)
{
    t->len = 0;
    t->fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(t->fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)em_hosted_port(T.x))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fcntl(t->fd, F_SETFL, O_NONBLOCK);
    int rc = connect(t->fd, (struct sockaddr *)&a, sizeof a);
    assert_true(rc == 0 || errno == EINPROGRESS);
    for (int i = 0; i < 1000; i++) { /* the accept happens on the loop */
        uv_run(&T.loop, UV_RUN_NOWAIT);
        if (connect(t->fd, (struct sockaddr *)&a, sizeof a) != 0 && errno == EISCONN)
            return;
        usleep(1000);
    }
    fail_msg("no connection");
}

static void say(struct trader *t, const char *text)
{
    size_t n = strlen(text), off = 0;
    while (off < n) {
        ssize_t w = write(t->fd, text + off, n - off);
        if (w > 0)
            off += (size_t)w;
        else
            uv_run(&T.loop, UV_RUN_NOWAIT);
    }
}

/* Turn the loop until the trader has received `want` (a prefix of what is
 * there is compared and consumed) or 10 s passed. */
static void expect(struct trader *t, const char *want)
{
    size_t n = strlen(want);
    uint64_t end = core_now_ns() + 10000000000u;
    while (t->len < n && core_now_ns() < end) {
        uv_run(&T.loop, UV_RUN_NOWAIT);
        ssize_t r = read(t->fd, t->buf + t->len, sizeof t->buf - t->len);
        if (r > 0)
            t->len += (size_t)r;
        else
            usleep(200);
    }
    t->buf[t->len] = 0;
    assert_true(t->len >= n);
    if (memcmp(t->buf, want, n) != 0)
        fail_msg("want\n%s\ngot\n%s", want, t->buf);
    memmove(t->buf, t->buf + n, t->len - n);
    t->len -= n;
}

/* ---- tests ---- */

/* LOGIN, orders, fills between two hosted traders; the ACKs leave after
 * the journal flush; the orders sent with the LOGIN (held while it is
 * answered) come in order. */
static void test_order_path(void **state)
{
    (void)state;
    struct trader a, b;
    connect_trader(&a);
    connect_trader(&b);
    say(&a, "LOGIN gw=GW1\nNEW cl=a1 sym=ABC side=S qty=2 px=10.00\n"
            "NEW cl=a2 sym=ABC side=S qty=3 px=10.01\nPING\n");
    expect(&a, "LOGGEDIN gw=GW1\nACK cl=a1 oid=1\nACK cl=a2 oid=2\nPONG\n");
    say(&b, "LOGIN gw=GW2\n");
    expect(&b, "LOGGEDIN gw=GW2\n");
    say(&b, "NEW cl=b1 sym=ABC side=B qty=5 px=10.01\nPING\n");
    expect(&b, "ACK cl=b1 oid=3\nFILL cl=b1 oid=3 tid=1 px=10.00 qty=2 leaves=3 cum=2\n"
               "FILL cl=b1 oid=3 tid=2 px=10.01 qty=3 leaves=0 cum=5\nPONG\n");
    expect(&a, "FILL cl=a1 oid=1 tid=1 px=10.00 qty=2 leaves=0 cum=2\n"
               "FILL cl=a2 oid=2 tid=2 px=10.01 qty=3 leaves=0 cum=3\n");
    assert_int_equal(T.unflushed, 0);
    assert_true(T.hosted_acks >= 4);
    assert_int_equal(T.other_acks, 0);
    /* SYMBOLS is answered by the session, from the host's market data */
    say(&a, "SYMBOLS sym=ABC\n");
    expect(&a, "SYMBOL sym=ABC tick=0.01 ");
    close(a.fd);
    close(b.fd);
}

/* A gw without a hosted session (one on the order link) is left to the
 * caller, beside hosted ones; a hosted trader's disconnect cancels its
 * orders (the DISCONNECT goes to the host as the session closes). */
static void test_link_traders_and_cancel_on_disconnect(void **state)
{
    (void)state;
    struct trader a;
    connect_trader(&a);
    say(&a, "LOGIN gw=GW1\nNEW cl=r1 sym=ABC side=S qty=5 px=10.00\nPING\n");
    expect(&a, "LOGGEDIN gw=GW1\nACK cl=r1 oid=1\nPONG\n");
    /* a trader of a separate gateway, as the order link hands it over */
    uint8_t fr[256];
    struct em_msg m = {.kind = EM_MSG_LOGIN, .present = EM_BIT(gw)};
    strcpy(m.gw, "GW9");
    int n = em_frame_encode(&m, fr, sizeof fr);
    assert_true(n > 0);
    assert_int_equal(em_host_inbound(T.h, "GW9", 3, fr, (size_t)n), 0);
    assert_int_equal(em_host_batch_end(T.h, 1), 0);
    assert_int_equal(T.other_acks, 1);
    assert_string_equal(T.other, "order.ack.GW9");
    struct em_host_stats *st = em_host_stats(T.h);
    assert_int_equal(st->open_orders, 1);
    close(a.fd);
    uint64_t end = core_now_ns() + 10000000000u;
    while (em_host_stats(T.h)->open_orders != 0 && core_now_ns() < end) {
        uv_run(&T.loop, UV_RUN_NOWAIT);
        usleep(200);
    }
    assert_int_equal(em_host_stats(T.h)->open_orders, 0);
    assert_int_equal(em_hosted_stats(T.x)->sessions, 0);
    assert_int_equal(T.unflushed, 0);
}

/* OPS needs its token; a trader may not send operator messages. */
static void test_tokens_and_auth(void **state)
{
    (void)state;
    struct trader o, t;
    connect_trader(&o);
    say(&o, "LOGIN gw=OPS token=wrong\n");
    expect(&o, "REJECT reason=AUTH\n");
    say(&o, "LOGIN gw=OPS token=s3cret\nHALT sym=ABC\nPING\n");
    expect(&o, "LOGGEDIN gw=OPS\nOK\n");
    connect_trader(&t);
    say(&t, "LOGIN gw=GW1\nHALT sym=ABC\n");
    expect(&t, "LOGGEDIN gw=GW1\nREJECT reason=AUTH\n");
    close(o.fd);
    close(t.fd);
}

/* A sweep of more than the trade log's 64 buffered records flushes and
 * publishes inside the aggressor's hand-over: those replies wait until
 * the hand-over is done, the rest of the batch behind them, so each
 * trader still sees its events whole and in order, all after the flush. */
static void test_sweep_inside_a_hand_over(void **state)
{
    (void)state;
    enum { N = 150 };
    struct trader a, b;
    connect_trader(&a);
    connect_trader(&b);
    say(&a, "LOGIN gw=GW1\n");
    expect(&a, "LOGGEDIN gw=GW1\n");
    say(&b, "LOGIN gw=GW2\n");
    expect(&b, "LOGGEDIN gw=GW2\n");
    static char text[N * 64], want[N * 96];
    size_t tl = 0, wl = 0;
    for (int i = 0; i < N; i++) {
        tl += (size_t)snprintf(text + tl, sizeof text - tl,
                               "NEW cl=p%d sym=ABC side=S qty=1 px=10.00\n", i);
        wl += (size_t)snprintf(want + wl, sizeof want - wl, "ACK cl=p%d oid=%d\n", i, i + 1);
    }
    say(&a, text);
    say(&a, "PING\n");
    strcat(want, "PONG\n");
    expect(&a, want);
    say(&b, "NEW cl=big sym=ABC side=B qty=150 px=10.00\nPING\n");
    wl = (size_t)snprintf(want, sizeof want, "ACK cl=big oid=%d\n", N + 1);
    for (int i = 0; i < N; i++)
        wl += (size_t)snprintf(want + wl, sizeof want - wl,
                               "FILL cl=big oid=%d tid=%d px=10.00 qty=1 leaves=%d cum=%d\n", N + 1,
                               i + 1, N - 1 - i, i + 1);
    strcat(want, "PONG\n");
    expect(&b, want);
    wl = 0;
    for (int i = 0; i < N; i++)
        wl += (size_t)snprintf(want + wl, sizeof want - wl,
                               "FILL cl=p%d oid=%d tid=%d px=10.00 qty=1 leaves=0 cum=1\n", i,
                               i + 1, i + 1);
    expect(&a, want);
    assert_int_equal(T.unflushed, 0);
    close(a.fd);
    close(b.fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_order_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_link_traders_and_cancel_on_disconnect, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_tokens_and_auth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_inside_a_hand_over, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
