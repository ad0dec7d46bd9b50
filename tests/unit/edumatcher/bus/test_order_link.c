/* order_link: the record codec, and a server and clients on one libuv loop
 * over a Unix-domain socket and over TCP: records both ways, routing by
 * gw, batching per loop turn, the key, the socket file's mode, records
 * queued while the engine is away. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <uv.h>

#include "core/error.h"
#include "edumatcher/bus/order_link.h"

static void test_codec(void **state)
{
    uint8_t buf[64];
    size_t h = em_link_encode_header(buf, "GW1", 3, 4);
    assert_int_equal(h, EM_LINK_HDR + 3);
    memcpy(buf + h, "abcd", 4);
    struct em_link_rec r;
    assert_int_equal(em_link_decode(buf, h + 4, &r), (int)(h + 4));
    assert_int_equal(r.gwlen, 3);
    assert_memory_equal(r.gw, "GW1", 3);
    assert_int_equal(r.len, 4);
    assert_memory_equal(r.payload, "abcd", 4);
    for (size_t n = 0; n < h + 4; n++) /* every prefix is incomplete */
        assert_int_equal(em_link_decode(buf, n, &r), CORE_EINCOMPLETE);
    uint8_t bad[EM_LINK_HDR] = {0, 0, 0, 0, 0}; /* length 0 */
    assert_int_equal(em_link_decode(bad, sizeof bad, &r), CORE_EPROTO);
    bad[0] = 5, bad[4] = EM_LINK_GW_MAX + 1; /* gw too long */
    assert_int_equal(em_link_decode(bad, sizeof bad, &r), CORE_EPROTO);
    bad[0] = 3, bad[4] = 3; /* gw longer than the record */
    assert_int_equal(em_link_decode(bad, sizeof bad, &r), CORE_EPROTO);
    uint32_t big = 1 + EM_LINK_PAYLOAD_MAX + 1; /* payload over the limit */
    memcpy(bad, &big, 4);
    bad[4] = 0;
    assert_int_equal(em_link_decode(bad, sizeof bad, &r), CORE_EPROTO);
}

/* ---- a server and clients on one loop ---- */

struct seen {
    char gw[32][EM_LINK_GW_MAX + 1];
    char payload[32][64];
    unsigned n, batches, last_batch;
};

static struct {
    uv_loop_t loop;
    struct em_link_server *srv;
    struct seen at_srv, at_cl[2];
    bool up[2];
    char dir[64];
} T;

static void record(struct seen *s, const char *gw, size_t gl, const void *p, size_t len)
{
    if (s->n == 32)
        return;
    memcpy(s->gw[s->n], gw, gl);
    s->gw[s->n][gl] = 0;
    size_t l = len < 63 ? len : 63;
    memcpy(s->payload[s->n], p, l);
    s->payload[s->n][l] = 0;
    s->n++;
}

static int srv_record(void *ctx, uint64_t conn, const char *gw, size_t gl, const void *p,
                      size_t len)
{
    record(&T.at_srv, gw, gl, p, len);
    assert_true(em_link_server_conn_open(T.srv, conn));
    /* answer at once, as the engine stages its replies */
    char reply[80];
    int n = snprintf(reply, sizeof reply, "re:%.*s", (int)len, (const char *)p);
    assert_int_equal(em_link_reply(T.srv, gw, gl, reply, (size_t)n), 0);
    return 0;
}

static void srv_batch(void *ctx, unsigned handled)
{
    T.at_srv.batches++;
    T.at_srv.last_batch = handled;
}

static void cl_record(void *ctx, const char *gw, size_t gl, const void *p, size_t len)
{
    record(&T.at_cl[(intptr_t)ctx], gw, gl, p, len);
}

static void cl_batch(void *ctx, unsigned handled)
{
    T.at_cl[(intptr_t)ctx].batches++;
}

static void cl_state(void *ctx, bool up)
{
    T.up[(intptr_t)ctx] = up;
}

/* Run the loop until cond holds (a generous bound: never a timing margin). */
#define RUN_UNTIL(cond)                                                                            \
    do {                                                                                           \
        for (int i_ = 0; i_ < 200000 && !(cond); i_++)                                             \
            uv_run(&T.loop, UV_RUN_NOWAIT);                                                        \
        assert_true(cond);                                                                         \
    } while (0)

static int setup(void **state)
{
    memset(&T, 0, sizeof T);
    uv_loop_init(&T.loop);
    strcpy(T.dir, "/tmp/test_order_link.XXXXXX");
    assert_non_null(mkdtemp(T.dir));
    return 0;
}

static int teardown(void **state)
{
    uv_run(&T.loop, UV_RUN_NOWAIT);
    uv_loop_close(&T.loop);
    char path[128];
    snprintf(path, sizeof path, "%s/orders.sock", T.dir);
    unlink(path);
    rmdir(T.dir);
    return 0;
}

static struct em_link_client *client(const char *ep, intptr_t i, const char *key)
{
    struct em_link_client_config cc = {.endpoint = ep,
                                       .key = (const uint8_t *)key,
                                       .keylen = key ? strlen(key) : 0,
                                       .reconnect_ms = 10,
                                       .on_record = cl_record,
                                       .on_batch = cl_batch,
                                       .on_state = cl_state,
                                       .ctx = (void *)i};
    struct em_link_client *c;
    assert_int_equal(em_link_client_open(&c, &T.loop, &cc), 0);
    return c;
}

static void close_all(struct em_link_client *a, struct em_link_client *b)
{
    em_link_client_close(a);
    if (b)
        em_link_client_close(b);
    em_link_server_stop(T.srv);
    uv_run(&T.loop, UV_RUN_DEFAULT);
    em_link_client_free(a);
    em_link_client_free(b);
    em_link_server_free(T.srv);
}

static void test_unix_both_ways(void **state)
{
    char ep[128];
    snprintf(ep, sizeof ep, "unix:%s/orders.sock", T.dir);
    struct em_link_server_config sc = {
        .endpoint = ep, .mode = 0600, .on_record = srv_record, .on_batch = srv_batch};
    /* a client started before the engine: its records wait for the link */
    struct em_link_client *a = client(ep, 0, NULL);
    assert_int_equal(em_link_client_send(a, "GW1", 3, "early", 5), 0);
    assert_int_equal(em_link_server_open(&T.srv, &T.loop, &sc), 0);
    struct stat st;
    assert_int_equal(stat(ep + 5, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);
    struct em_link_client *b = client(ep, 1, NULL);
    RUN_UNTIL(T.up[0] && T.up[1]);
    em_link_client_flush(a);
    RUN_UNTIL(T.at_cl[0].n == 1);
    assert_string_equal(T.at_cl[0].gw[0], "GW1");
    assert_string_equal(T.at_cl[0].payload[0], "re:early");

    /* two records of one turn: one batch at the server, replies routed
     * by gw to the connection each gw came on */
    assert_int_equal(em_link_client_send(a, "GW1", 3, "one", 3), 0);
    assert_int_equal(em_link_client_send(a, "GW3", 3, "two", 3), 0);
    em_link_client_flush(a);
    assert_int_equal(em_link_client_send(b, "GW2", 3, "three", 5), 0);
    em_link_client_flush(b);
    RUN_UNTIL(T.at_cl[0].n == 3 && T.at_cl[1].n == 1);
    assert_string_equal(T.at_cl[0].payload[1], "re:one");
    assert_string_equal(T.at_cl[0].gw[2], "GW3");
    assert_string_equal(T.at_cl[1].gw[0], "GW2");
    assert_string_equal(T.at_cl[1].payload[0], "re:three");
    assert_int_equal(T.at_srv.n, 4);
    struct em_link_stats *ss = em_link_server_stats(T.srv);
    assert_int_equal(ss->accepted, 2);
    assert_int_equal(ss->records_in, 4);

    /* GW1 moves to b: its replies follow it */
    assert_int_equal(em_link_client_send(b, "GW1", 3, "moved", 5), 0);
    em_link_client_flush(b);
    RUN_UNTIL(T.at_cl[1].n == 2);
    assert_string_equal(T.at_cl[1].gw[1], "GW1");
    /* a gw nobody sent for has no route */
    assert_int_equal(em_link_reply(T.srv, "NOPE", 4, "x", 1), CORE_ENOTFOUND);
    assert_int_equal(ss->unrouted, 1);
    /* limits */
    assert_int_equal(em_link_client_send(a, "", 0, "x", 1), CORE_EINVAL);
    close_all(a, b);
}

static void test_tcp_key(void **state)
{
    /* port 0 is not offered by the endpoint syntax's users; take a free one */
    uv_tcp_t probe;
    uv_tcp_init(&T.loop, &probe);
    struct sockaddr_in a4;
    uv_ip4_addr("127.0.0.1", 0, &a4);
    assert_int_equal(uv_tcp_bind(&probe, (struct sockaddr *)&a4, 0), 0);
    struct sockaddr_storage ss;
    int len = sizeof ss;
    uv_tcp_getsockname(&probe, (struct sockaddr *)&ss, &len);
    int port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    uv_close((uv_handle_t *)&probe, NULL);
    uv_run(&T.loop, UV_RUN_NOWAIT);

    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    struct em_link_server_config sc = {.endpoint = ep, .on_record = srv_record};
    assert_int_equal(em_link_server_open(&T.srv, &T.loop, &sc), CORE_EINVAL); /* no key */
    em_link_server_free(T.srv);
    sc.key = (const uint8_t *)"sekrit";
    sc.keylen = 6;
    assert_int_equal(em_link_server_open(&T.srv, &T.loop, &sc), 0);
    struct em_link_client *bad = client(ep, 1, "wrong!");
    struct em_link_client *good = client(ep, 0, "sekrit");
    assert_int_equal(em_link_client_send(bad, "GW9", 3, "evil", 4), 0);
    em_link_client_flush(bad);
    assert_int_equal(em_link_client_send(good, "GW1", 3, "fine", 4), 0);
    em_link_client_flush(good);
    RUN_UNTIL(T.at_cl[0].n == 1 && em_link_server_stats(T.srv)->refused >= 1);
    assert_string_equal(T.at_cl[0].payload[0], "re:fine");
    /* the wrong key's record never reached the engine */
    for (unsigned i = 0; i < T.at_srv.n; i++)
        assert_string_not_equal(T.at_srv.gw[i], "GW9");
    close_all(good, bad);
}

static void test_key_file(void **state)
{
    char path[128];
    snprintf(path, sizeof path, "%s/link.key", T.dir);
    uint8_t k1[EM_LINK_KEY_MAX], k2[EM_LINK_KEY_MAX];
    assert_int_equal(em_link_key_load(path, false, k1, sizeof k1), CORE_ENOTFOUND);
    int n = em_link_key_load(path, true, k1, sizeof k1);
    assert_int_equal(n, 64);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(em_link_key_load(path, true, k2, sizeof k2), 64); /* kept */
    assert_memory_equal(k1, k2, 64);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec),
        cmocka_unit_test_setup_teardown(test_unix_both_ways, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tcp_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key_file, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
