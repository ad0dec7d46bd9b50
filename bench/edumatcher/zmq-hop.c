/*
 * zmq-hop: what one ZeroMQ hop of the exchange costs, through the same
 * adapter (edumatcher/bus/zmq_bus.h) and the same socket pattern:
 *
 *   client PUSH --tcp loopback--> echo PULL
 *   client SUB  <--tcp loopback-- echo PUB
 *
 * The echo side runs in a second thread and republishes each message;
 * the client sends one message, waits for its echo, and records the round
 * trip into a core_hist. One hop is about half a round trip. The payload
 * is the size of an order frame.
 *
 * --raw yes measures the floor under it: the same echo over one plain TCP
 * loopback connection (blocking read/write, TCP_NODELAY). A zmq hop wakes
 * three threads (sender, sender's I/O thread, receiver's I/O thread, then
 * the receiver); a plain socket hop wakes only the receiver, so the
 * difference is what libzmq's threads cost per hop on this machine.
 *
 * --curve yes puts both hops under CURVE (edumatcher/bus/curve.h: the
 * engine's PUB and query with --curve-clients), with a ZAP handler that
 * lets the client's key in: the difference is what encryption and the
 * authenticated bus cost per hop.
 *
 *   zmq-hop [--messages N] [--warmup N] [--size BYTES] [--raw yes] [--curve yes]
 */
#include "core/proc.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/histogram.h"
#include "edumatcher/bus/curve.h"
#include "edumatcher/bus/zmq_bus.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int64_t messages = 200000;
static int64_t warmup = 20000;
static int64_t size = 48;
static char ep_in[CORE_OPT_STRLEN] = "tcp://127.0.0.1:19950";
static char ep_out[CORE_OPT_STRLEN] = "tcp://127.0.0.1:19951";
static bool raw;
static bool curve;
static struct em_curve_pair server_pair, client_pair;

static const struct core_option options[] = {
    {"messages", CORE_OPT_INT, &messages, 1, 100000000, NULL, 0, "measured round trips"},
    {"warmup", CORE_OPT_INT, &warmup, 0, 100000000, NULL, 0, "round trips before measuring"},
    {"size", CORE_OPT_INT, &size, 1, EM_BUS_PAYLOAD_MAX, NULL, 0, "payload bytes"},
    {"in", CORE_OPT_STRING, ep_in, 0, 0, NULL, 0, "PUSH/PULL endpoint"},
    {"out", CORE_OPT_STRING, ep_out, 0, 0, NULL, 0, "PUB/SUB endpoint"},
    {"raw", CORE_OPT_BOOL, &raw, 0, 0, NULL, 0, "plain TCP loopback echo instead of zmq"},
    {"curve", CORE_OPT_BOOL, &curve, 0, 0, NULL, 0, "both hops under CURVE, as a keyed bus"},
    {NULL, 0, NULL, 0, 0, NULL, 0, NULL},
};

static void *ctx;

static void *echo_main(void *arg)
{
    struct em_bus_sock *pull = malloc(sizeof *pull), *pub = malloc(sizeof *pub);
    const struct em_curve_pair *c = curve ? &server_pair : NULL;
    if (em_bus_open_curve(pull, ctx, EM_BUS_PULL, ep_in, true, c) ||
        em_bus_open_curve(pub, ctx, EM_BUS_PUB, ep_out, true, c)) {
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

/* ---- --raw: the same round trip over one plain TCP connection ---- */

static bool full_io(int fd, void *buf, size_t n, bool wr)
{
    for (size_t off = 0; off < n;) {
        ssize_t k =
            wr ? write(fd, (char *)buf + off, n - off) : read(fd, (char *)buf + off, n - off);
        if (k <= 0)
            return false;
        off += (size_t)k;
    }
    return true;
}

static void *raw_echo_main(void *arg)
{
    int fd = *(int *)arg;
    unsigned char buf[EM_BUS_PAYLOAD_MAX];
    while (full_io(fd, buf, (size_t)size, false) && full_io(fd, buf, (size_t)size, true))
        ;
    close(fd);
    return NULL;
}

static int raw_main(void)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1) ||
        getsockname(ls, (struct sockaddr *)&a, &al)) {
        perror("zmq-hop: listen");
        return 1;
    }
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a)) {
        perror("zmq-hop: connect");
        return 1;
    }
    int s = accept(ls, NULL, NULL);
    close(ls);
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    pthread_t th;
    pthread_create(&th, NULL, raw_echo_main, &s);
    unsigned char payload[EM_BUS_PAYLOAD_MAX];
    memset(payload, 'x', sizeof payload);
    static struct core_hist h;
    core_hist_reset(&h);
    for (int64_t i = 0; i < warmup + messages; i++) {
        uint64_t t0 = core_now_ns();
        if (!full_io(c, payload, (size_t)size, true) || !full_io(c, payload, (size_t)size, false)) {
            fprintf(stderr, "zmq-hop: echo connection lost\n");
            return 1;
        }
        if (i >= warmup)
            core_hist_record(&h, core_now_ns() - t0);
    }
    close(c);
    pthread_join(th, NULL);
    printf("zmq-hop: %lld round trips of %lld bytes (plain TCP loopback, no zmq)\n",
           (long long)messages, (long long)size);
    printf("RESULT rtt_p50_us=%.2f rtt_p99_us=%.2f rtt_mean_us=%.2f hop_p50_us=%.2f\n",
           core_hist_percentile(&h, 50) / 1e3, core_hist_percentile(&h, 99) / 1e3,
           core_hist_mean(&h) / 1e3, core_hist_percentile(&h, 50) / 2e3);
    return 0;
}

int main(int argc, char **argv)
{
    int code;
    if (core_proc_options("zmq-hop", 'Z', options, NULL, argc, argv, &code))
        return code;
    if (raw)
        return raw_main();
    em_bus_ctx_new(&ctx);
    struct em_curve_zap *zap = NULL;
    if (curve) {
        static struct em_curve_allow allow;
        int line;
        if (em_curve_pair_new(&server_pair) || em_curve_pair_new(&client_pair) ||
            em_curve_allow_parse(client_pair.public_key, EM_CURVE_Z85_LEN, &allow, &line) ||
            em_curve_zap_start(&zap, ctx, &allow, NULL)) {
            fprintf(stderr, "zmq-hop: no CURVE in this libzmq\n");
            return 1;
        }
        memcpy(client_pair.server_key, server_pair.public_key, sizeof client_pair.server_key);
    }
    pthread_t th;
    pthread_create(&th, NULL, echo_main, NULL);
    struct em_bus_sock *push = malloc(sizeof *push), *sub = malloc(sizeof *sub);
    const struct em_curve_pair *cc = curve ? &client_pair : NULL;
    em_bus_open_curve(push, ctx, EM_BUS_PUSH, ep_in, false, cc);
    em_bus_open_curve(sub, ctx, EM_BUS_SUB, ep_out, false, cc);
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
    printf("zmq-hop: %lld round trips of %lld bytes (PUSH->PULL, PUB->SUB, tcp loopback%s)\n",
           (long long)messages, (long long)size, curve ? ", CURVE" : "");
    printf("RESULT rtt_p50_us=%.2f rtt_p99_us=%.2f rtt_mean_us=%.2f hop_p50_us=%.2f\n",
           core_hist_percentile(&h, 50) / 1e3, core_hist_percentile(&h, 99) / 1e3,
           core_hist_mean(&h) / 1e3, core_hist_percentile(&h, 50) / 2e3);
    em_bus_close(push);
    em_bus_close(sub);
    em_bus_ctx_term(ctx);
    em_curve_zap_free(zap);
    return 0;
}
