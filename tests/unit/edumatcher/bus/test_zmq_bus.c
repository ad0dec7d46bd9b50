/* zmq_bus: topics, the topic cache, PUSH/PULL and PUB/SUB over inproc,
 * malformed messages, and draining from a libuv loop past the budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <zmq.h>

#include "core/error.h"
#include "edumatcher/bus/zmq_bus.h"

#include "alloc_count.h"

/* Allocations are counted (alloc_count.h) in the adapter's own code;
 * libzmq's internal allocations happen inside the shared library and are
 * its business. */

static void test_topic_set(void **state)
{
    struct em_bus_topic t;
    assert_int_equal(em_bus_topic_set(&t, "order.ack.", "GW1", 3), 0);
    assert_string_equal(t.s, "order.ack.GW1");
    assert_int_equal(t.len, 13);
    char big[64];
    memset(big, 'A', sizeof big);
    assert_int_equal(em_bus_topic_set(&t, "md.", big, sizeof big), CORE_ETOOBIG);
}

static void test_topic_cache(void **state)
{
    static struct em_topic_cache c;
    em_topic_cache_init(&c, "order.ack.");
    const struct em_bus_topic *a = em_topic_cache_get(&c, "GW1", 3);
    const struct em_bus_topic *b = em_topic_cache_get(&c, "GW2", 3);
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    assert_ptr_equal(em_topic_cache_get(&c, "GW1", 3), a); /* built once */
    assert_string_equal(a->s, "order.ack.GW1");
    assert_null(em_topic_cache_get(&c, "", 0));
    /* Fill to the limit: later names are refused, earlier ones still found. */
    char name[16];
    unsigned ok = 0;
    for (int i = 0; i < EM_TOPIC_CACHE_CAP; i++) {
        int n = snprintf(name, sizeof name, "G%d", i);
        if (em_topic_cache_get(&c, name, (size_t)n))
            ok++;
    }
    assert_true(ok < EM_TOPIC_CACHE_CAP);
    assert_ptr_equal(em_topic_cache_get(&c, "GW2", 3), b);
}

static void test_error_map(void **state)
{
    assert_int_equal(em_bus_error(EAGAIN), CORE_EAGAIN);
    assert_int_equal(em_bus_error(ETERM), CORE_ECLOSED);
    assert_int_equal(em_bus_error(EADDRINUSE), CORE_EBUSY);
    assert_int_equal(em_bus_error(EPROTONOSUPPORT), CORE_EINVAL);
    assert_int_equal(em_bus_error(0), 0);
}

static void test_push_pull(void **state)
{
    void *ctx;
    assert_int_equal(em_bus_ctx_new(&ctx), 0);
    struct em_bus_sock *pull = malloc(sizeof *pull), *push = malloc(sizeof *push);
    assert_int_equal(em_bus_open(pull, ctx, EM_BUS_PULL, "inproc://engine", true), 0);
    assert_int_equal(em_bus_open(push, ctx, EM_BUS_PUSH, "inproc://engine", false), 0);
    assert_int_equal(em_bus_recv(pull), CORE_EAGAIN);

    struct em_bus_topic t;
    em_bus_topic_set(&t, "in.", "GW1", 3);
    assert_int_equal(em_bus_send(push, &t, "hello", 5), 0);
    assert_int_equal(em_bus_send(push, NULL, "x", 1), 0);
    assert_int_equal(em_bus_recv_wait(pull, 1000), 0);
    assert_int_equal(pull->topic_len, 6);
    assert_string_equal(pull->topic, "in.GW1");
    assert_int_equal(pull->payload_len, 5);
    assert_memory_equal(pull->payload, "hello", 5);
    assert_int_equal(em_bus_recv_wait(pull, 1000), 0);
    assert_int_equal(pull->topic_len, 0);
    assert_int_equal(pull->payload_len, 1);
    assert_int_equal(em_bus_recv_wait(pull, 0), CORE_ETIMEOUT);

    /* A payload larger than the buffer is consumed and reported. */
    static unsigned char big[EM_BUS_PAYLOAD_MAX + 1];
    assert_int_equal(em_bus_send(push, &t, big, sizeof big), 0);
    assert_int_equal(em_bus_recv_wait(pull, 1000), CORE_ETOOBIG);
    assert_int_equal(pull->dropped, 1);

    /* A single-frame message (not our format) is consumed and reported. */
    assert_true(zmq_send(push->zsock, "solo", 4, 0) == 4);
    assert_int_equal(em_bus_recv_wait(pull, 1000), CORE_EPROTO);
    /* Three frames: also refused, and the next message is intact. */
    zmq_send(push->zsock, "a", 1, ZMQ_SNDMORE);
    zmq_send(push->zsock, "b", 1, ZMQ_SNDMORE);
    zmq_send(push->zsock, "c", 1, 0);
    assert_int_equal(em_bus_recv_wait(pull, 1000), CORE_EPROTO);
    assert_int_equal(em_bus_send(push, &t, "ok", 2), 0);
    assert_int_equal(em_bus_recv_wait(pull, 1000), 0);
    assert_memory_equal(pull->payload, "ok", 2);
    assert_int_equal(pull->dropped, 3);

    em_bus_close(push);
    em_bus_close(pull);
    em_bus_ctx_term(ctx);
    free(push);
    free(pull);
}

/* IPv6 works wherever IPv4 does: the bus binds and connects on ::1. */
static void test_push_pull_over_ipv6_loopback(void **state)
{
    void *ctx;
    assert_int_equal(em_bus_ctx_new(&ctx), 0);
    struct em_bus_sock *pull = malloc(sizeof *pull), *push = malloc(sizeof *push);
    assert_int_equal(em_bus_open(pull, ctx, EM_BUS_PULL, "tcp://[::1]:*", true), 0);
    char ep[128];
    size_t len = sizeof ep;
    assert_int_equal(zmq_getsockopt(pull->zsock, ZMQ_LAST_ENDPOINT, ep, &len), 0);
    assert_non_null(strstr(ep, "[::1]"));
    assert_int_equal(em_bus_open(push, ctx, EM_BUS_PUSH, ep, false), 0);
    struct em_bus_topic t;
    em_bus_topic_set(&t, "in.", "GW6", 3);
    assert_int_equal(em_bus_send(push, &t, "six", 3), 0);
    assert_int_equal(em_bus_recv_wait(pull, 10000), 0);
    assert_string_equal(pull->topic, "in.GW6");
    assert_memory_equal(pull->payload, "six", 3);
    em_bus_close(push);
    em_bus_close(pull);
    em_bus_ctx_term(ctx);
    free(push);
    free(pull);
}

static void test_pub_sub_prefix(void **state)
{
    void *ctx;
    assert_int_equal(em_bus_ctx_new(&ctx), 0);
    struct em_bus_sock *pub = malloc(sizeof *pub), *sub = malloc(sizeof *sub);
    assert_int_equal(em_bus_open(pub, ctx, EM_BUS_PUB, "inproc://out", true), 0);
    assert_int_equal(em_bus_open(sub, ctx, EM_BUS_SUB, "inproc://out", false), 0);
    assert_int_equal(em_bus_subscribe(pub, "x"), CORE_EINVAL);
    assert_int_equal(em_bus_subscribe(sub, "order.ack.GW1"), 0);
    assert_int_equal(em_bus_subscribe(sub, "trade."), 0);

    struct em_bus_topic a1, a2, tr;
    em_bus_topic_set(&a1, "order.ack.", "GW1", 3);
    em_bus_topic_set(&a2, "order.ack.", "GW2", 3);
    em_bus_topic_set(&tr, "trade.executed", "", 0);
    /* The subscription reaches the publisher asynchronously even inproc:
     * send until the first one arrives (bounded). */
    int rc = CORE_ETIMEOUT;
    for (int i = 0; i < 200 && rc != 0; i++) {
        em_bus_send(pub, &a1, "probe", 5);
        rc = em_bus_recv_wait(sub, 10);
    }
    assert_int_equal(rc, 0);
    while (em_bus_recv(sub) == 0)
        ;
    em_bus_send(pub, &a2, "not mine", 8);
    em_bus_send(pub, &tr, "T", 1);
    em_bus_send(pub, &a1, "mine", 4);
    assert_int_equal(em_bus_recv_wait(sub, 1000), 0);
    assert_string_equal(sub->topic, "trade.executed");
    assert_int_equal(em_bus_recv_wait(sub, 1000), 0);
    assert_string_equal(sub->topic, "order.ack.GW1");
    assert_memory_equal(sub->payload, "mine", 4);
    assert_int_equal(em_bus_recv_wait(sub, 20), CORE_ETIMEOUT);

    em_bus_close(pub);
    em_bus_close(sub);
    em_bus_ctx_term(ctx);
    free(pub);
    free(sub);
}

struct drain_state {
    unsigned got;
    unsigned want;
    uint32_t last;
    bool in_order;
    struct em_bus_sock *pull;
};

static void on_msg(struct em_bus_sock *s, const char *topic, size_t tl, const void *p, size_t len,
                   void *data)
{
    struct drain_state *d = data;
    uint32_t v;
    memcpy(&v, p, sizeof v);
    if (v != d->last + 1)
        d->in_order = false;
    d->last = v;
    if (++d->got == d->want)
        em_bus_close(s); /* closing from the callback must be safe */
}

static void on_timeout(uv_timer_t *t)
{
    uv_stop(t->loop);
}

/* More messages than one budget: they all arrive although ZMQ_FD gives a
 * single edge for the lot (invariant 3 of zmq_bus.h). */
static void test_watch_drains_past_budget(void **state)
{
    void *ctx;
    assert_int_equal(em_bus_ctx_new(&ctx), 0);
    struct em_bus_sock *pull = malloc(sizeof *pull), *push = malloc(sizeof *push);
    assert_int_equal(em_bus_open(pull, ctx, EM_BUS_PULL, "inproc://w", true), 0);
    assert_int_equal(em_bus_open(push, ctx, EM_BUS_PUSH, "inproc://w", false), 0);
    struct em_bus_topic t;
    em_bus_topic_set(&t, "in", "", 0);
    for (uint32_t i = 1; i <= 1000; i++)
        assert_int_equal(em_bus_send(push, &t, &i, sizeof i), 0);

    uv_loop_t loop;
    uv_loop_init(&loop);
    struct drain_state d = {.want = 1000, .in_order = true, .pull = pull};
    assert_int_equal(em_bus_watch(pull, &loop, 7, on_msg, &d), 0);
    uv_timer_t timer;
    uv_timer_init(&loop, &timer);
    uv_timer_start(&timer, on_timeout, 5000, 0);
    uv_unref((uv_handle_t *)&timer);
    uv_run(&loop, UV_RUN_DEFAULT); /* ends when the callback closes pull */
    assert_int_equal(d.got, 1000);
    assert_true(d.in_order);
    uv_close((uv_handle_t *)&timer, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    em_bus_close(push);
    em_bus_ctx_term(ctx);
    free(push);
    free(pull);
}

/* Invariant 1 of zmq_bus.h: sending, receiving and topic lookups do not
 * allocate in the adapter. */
static void test_no_allocation_per_message(void **state)
{
    void *ctx;
    assert_int_equal(em_bus_ctx_new(&ctx), 0);
    unsigned long at_start = test_allocations();
    struct em_bus_sock *pull = malloc(sizeof *pull), *push = malloc(sizeof *push);
    assert_int_equal(test_allocations() - at_start, 2); /* the counting works */
    static struct em_topic_cache c;
    em_topic_cache_init(&c, "order.ack.");
    assert_int_equal(em_bus_open(pull, ctx, EM_BUS_PULL, "inproc://alloc", true), 0);
    assert_int_equal(em_bus_open(push, ctx, EM_BUS_PUSH, "inproc://alloc", false), 0);
    em_topic_cache_get(&c, "GW1", 3);
    unsigned long before = test_allocations();
    for (int i = 0; i < 1000; i++) {
        const struct em_bus_topic *t = em_topic_cache_get(&c, "GW1", 3);
        assert_int_equal(em_bus_send(push, t, "0123456789012345678901234567890123456789", 40), 0);
        assert_int_equal(em_bus_recv_wait(pull, 1000), 0);
    }
    assert_int_equal(test_allocations() - before, 0);
    em_bus_close(push);
    em_bus_close(pull);
    em_bus_ctx_term(ctx);
    free(push);
    free(pull);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topic_set),
        cmocka_unit_test(test_topic_cache),
        cmocka_unit_test(test_error_map),
        cmocka_unit_test(test_push_pull),
        cmocka_unit_test(test_push_pull_over_ipv6_loopback),
        cmocka_unit_test(test_pub_sub_prefix),
        cmocka_unit_test(test_watch_drains_past_budget),
        cmocka_unit_test(test_no_allocation_per_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
