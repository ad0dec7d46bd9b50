/*
 * zmq-hop: what one ZeroMQ hop of the exchange costs, through the same
 * adapter (edumatcher/zmq_bus.h) and the same socket pattern:
 *
 *   client PUSH --tcp loopback--> echo PULL
 *   client SUB  <--tcp loopback-- echo PUB
 *
 * The echo side runs in a second thread and republishes each message;
 * the client sends one message, waits for its echo, and records the round
 * trip into a core_hist. One hop is about half a round trip. The payload
 * is the size of an order frame.
 *
 *   zmq-hop [--messages N] [--warmup N] [--size BYTES]
 */
#include "core/clock.h"
#include "core/config.h"
#include "core/histogram.h"
#include "edumatcher/zmq_bus.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t messages = 200000;
static int64_t warmup = 20000;
static int64_t size = 48;
static char ep_in[CORE_OPT_STRLEN] = "tcp://127.0.0.1:19950";
static char ep_out[CORE_OPT_STRLEN] = "tcp://127.0.0.1:19951";

static const struct core_option options[] = {
    {"messages", CORE_OPT_INT, &messages, 1, 100000000, NULL, 0, "measured round trips"},
    {"warmup", CORE_OPT_INT, &warmup, 0, 100000000, NULL, 0, "round trips before measuring"},
    {"size", CORE_OPT_INT, &size, 1, EM_BUS_PAYLOAD_MAX, NULL, 0, "payload bytes"},
    {"in", CORE_OPT_STRING, ep_in, 0, 0, NULL, 0, "PUSH/PULL endpoint"},
    {"out", CORE_OPT_STRING, ep_out, 0, 0, NULL, 0, "PUB/SUB endpoint"},
    {NULL, 0, NULL, 0, 0, NULL, 0, NULL},
};

static void *ctx;

static void *echo_main(void *arg)
{
    struct em_bus_sock *pull = malloc(sizeof *pull), *pub = malloc(sizeof *pub);
    if (em_bus_open(pull, ctx, EM_BUS_PULL, ep_in, true) ||
        em_bus_open(pub, ctx, EM_BUS_PUB, ep_out, true)) {
        fprintf(stderr, "zmq-hop: cannot bind\n");
        exit(1);
    }
    struct em_bus_topic t;
    em_bus_topic_set(&t, "order.ack.", "BENCH", 5);
    for (int64_t i = 0; i < messages + warmup + 1000000; i++) {
        if (em_bus_recv_wait(pull, -1) != 0)
            continue;
        if (pull->payload_len == 1 && pull->payload[0] == 'Q')
            break;
        em_bus_send(pub, &t, pull->payload, pull->payload_len);
    }
    em_bus_close(pull);
    em_bus_close(pub);
    free(pull);
    free(pub);
    return NULL;
}

int main(int argc, char **argv)
{
    char err[256];
    int rc = core_config_parse_args(options, argc, argv, "zmq-hop [--opt val]", err, sizeof err);
    if (rc)
        return rc == 1 ? 0 : 2;
    em_bus_ctx_new(&ctx);
    pthread_t th;
    pthread_create(&th, NULL, echo_main, NULL);
    struct em_bus_sock *push = malloc(sizeof *push), *sub = malloc(sizeof *sub);
    em_bus_open(push, ctx, EM_BUS_PUSH, ep_in, false);
    em_bus_open(sub, ctx, EM_BUS_SUB, ep_out, false);
    em_bus_subscribe(sub, "order.ack.");
    struct em_bus_topic t;
    em_bus_topic_set(&t, "", "BENCH", 5);
    unsigned char payload[EM_BUS_PAYLOAD_MAX];
    memset(payload, 'x', sizeof payload);
    /* wait until the subscription has reached the publisher */
    for (;;) {
        em_bus_send(push, &t, payload, (size_t)size);
        if (em_bus_recv_wait(sub, 100) == 0)
            break;
    }
    while (em_bus_recv_wait(sub, 50) == 0)
        ;
    static struct core_hist h;
    core_hist_reset(&h);
    for (int64_t i = 0; i < warmup + messages; i++) {
        uint64_t t0 = core_now_ns();
        em_bus_send(push, &t, payload, (size_t)size);
        if (em_bus_recv_wait(sub, 5000) != 0) {
            fprintf(stderr, "zmq-hop: lost a message\n");
            return 1;
        }
        if (i >= warmup)
            core_hist_record(&h, core_now_ns() - t0);
    }
    em_bus_send(push, &t, "Q", 1);
    pthread_join(th, NULL);
    printf("zmq-hop: %lld round trips of %lld bytes (PUSH->PULL, PUB->SUB, tcp loopback)\n",
           (long long)messages, (long long)size);
    printf("RESULT rtt_p50_us=%.2f rtt_p99_us=%.2f rtt_mean_us=%.2f hop_p50_us=%.2f\n",
           core_hist_percentile(&h, 50) / 1e3, core_hist_percentile(&h, 99) / 1e3,
           core_hist_mean(&h) / 1e3, core_hist_percentile(&h, 50) / 2e3);
    em_bus_close(push);
    em_bus_close(sub);
    em_bus_ctx_term(ctx);
    return 0;
}
