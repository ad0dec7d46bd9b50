/*
 * libzmq adapter (see zmq_bus.h for the topology and invariants).
 *
 * Receiving state machine of a watched socket:
 *
 *   idle-wait --(uv_poll readable: on_poll)--> draining
 *   draining  --(zmq_recv EAGAIN)-----------> idle-wait   (edge re-armed)
 *   draining  --(budget used up)------------> pending     (uv_idle started)
 *   pending   --(next loop turn: on_idle)---> draining
 *   any       --(send sees ZMQ_POLLIN)------> pending     (after_send)
 *
 * ZMQ_FD only signals a change of ZMQ_EVENTS; if we stop reading before
 * zmq_recv says EAGAIN, no new edge arrives for the messages left queued.
 * That is why "pending" exists instead of simply returning.
 */
#include "edumatcher/bus/zmq_bus.h"

#include "edumatcher/bus/curve.h"

#include "core/error.h"
#include "core/hash.h"

#include <errno.h>
#include <string.h>
#include <zmq.h>

int em_bus_error(int e)
{
    switch (e) {
    case 0:
        return 0;
    case EAGAIN:
    case EINTR:
        return CORE_EAGAIN;
    case ETERM:
    case ENOTSOCK:
        return CORE_ECLOSED;
    case EFSM:
        return CORE_ESTATE;
    case EINVAL:
    case EPROTONOSUPPORT:
    case ENOCOMPATPROTO:
    case ENOTSUP:
        return CORE_EINVAL;
    case EADDRINUSE:
        return CORE_EBUSY;
    case EADDRNOTAVAIL:
    case ENODEV:
    case EHOSTUNREACH:
        return CORE_ENOTFOUND;
    case EMSGSIZE:
        return CORE_ETOOBIG;
    case ENOMEM:
        return CORE_ENOMEM;
    default:
        return CORE_EIO;
    }
}

int em_bus_topic_set(struct em_bus_topic *t, const char *prefix, const char *name, size_t name_len)
{
    size_t pl = strlen(prefix);
    if (pl + name_len >= sizeof t->s)
        return CORE_ETOOBIG;
    memcpy(t->s, prefix, pl);
    memcpy(t->s + pl, name, name_len);
    t->s[pl + name_len] = '\0';
    t->len = (uint8_t)(pl + name_len);
    return 0;
}

void em_topic_cache_init(struct em_topic_cache *c, const char *prefix)
{
    memset(c, 0, sizeof *c);
    strncpy(c->prefix, prefix, sizeof c->prefix - 1);
}

const struct em_bus_topic *em_topic_cache_get(struct em_topic_cache *c, const char *name,
                                              size_t name_len)
{
    if (name_len == 0 || name_len >= sizeof c->slot[0].name)
        return NULL;
    /* Open addressing, linear probing; a slot with name_len 0 is empty.
     * Entries are never removed, so probing stops at the first empty. */
    uint32_t mask = EM_TOPIC_CACHE_CAP - 1;
    uint32_t i = core_fnv1a32(name, name_len) & mask;
    for (uint32_t n = 0; n < EM_TOPIC_CACHE_CAP; n++, i = (i + 1) & mask) {
        if (c->slot[i].name_len == 0) {
            /* Keep a quarter free so probes stay short. */
            if (c->count >= EM_TOPIC_CACHE_CAP * 3 / 4)
                return NULL;
            if (em_bus_topic_set(&c->slot[i].topic, c->prefix, name, name_len))
                return NULL;
            memcpy(c->slot[i].name, name, name_len);
            c->slot[i].name_len = (uint8_t)name_len;
            c->count++;
            return &c->slot[i].topic;
        }
        if (c->slot[i].name_len == name_len && memcmp(c->slot[i].name, name, name_len) == 0)
            return &c->slot[i].topic;
    }
    return NULL;
}

int em_bus_ctx_new(void **out)
{
    void *ctx = zmq_ctx_new();
    if (!ctx)
        return em_bus_error(errno);
    *out = ctx;
    return 0;
}

void em_bus_ctx_term(void *ctx)
{
    if (ctx)
        zmq_ctx_term(ctx);
}

static const int zmq_types[] = {
    [EM_BUS_PUSH] = ZMQ_PUSH, [EM_BUS_PULL] = ZMQ_PULL, [EM_BUS_PUB] = ZMQ_PUB,
    [EM_BUS_SUB] = ZMQ_SUB,   [EM_BUS_REQ] = ZMQ_REQ,   [EM_BUS_REP] = ZMQ_REP,
};

int em_bus_open(struct em_bus_sock *s, void *ctx, enum em_bus_kind kind, const char *endpoint,
                bool bind)
{
    return em_bus_open_curve(s, ctx, kind, endpoint, bind, NULL);
}

/* Before bind/connect: CURVE options take effect on the connections made
 * after them. */
static int set_curve(void *z, bool server, const struct em_curve_pair *c)
{
    if (!em_curve_available())
        return CORE_EINVAL;
    int on = 1;
    if (server) {
        static const char domain[] = "edumatcher";
        if (zmq_setsockopt(z, ZMQ_CURVE_SERVER, &on, sizeof on) != 0 ||
            zmq_setsockopt(z, ZMQ_ZAP_DOMAIN, domain, sizeof domain - 1) != 0 ||
            zmq_setsockopt(z, ZMQ_CURVE_SECRETKEY, c->secret_key, EM_CURVE_Z85_LEN + 1) != 0)
            return em_bus_error(errno);
        return 0;
    }
    if (!em_curve_z85_valid(c->server_key, strlen(c->server_key)))
        return CORE_EINVAL;
    if (zmq_setsockopt(z, ZMQ_CURVE_SERVERKEY, c->server_key, EM_CURVE_Z85_LEN + 1) != 0 ||
        zmq_setsockopt(z, ZMQ_CURVE_PUBLICKEY, c->public_key, EM_CURVE_Z85_LEN + 1) != 0 ||
        zmq_setsockopt(z, ZMQ_CURVE_SECRETKEY, c->secret_key, EM_CURVE_Z85_LEN + 1) != 0)
        return em_bus_error(errno);
    return 0;
}

int em_bus_open_curve(struct em_bus_sock *s, void *ctx, enum em_bus_kind kind, const char *endpoint,
                      bool bind, const struct em_curve_pair *curve)
{
    memset(s, 0, offsetof(struct em_bus_sock, topic));
    s->kind = kind;
    s->zsock = zmq_socket(ctx, zmq_types[kind]);
    if (!s->zsock)
        return em_bus_error(errno);
    /* A stopping process must not wait for peers: PUB/SUB lose nothing that
     * matters (market data is re-sent, beacons are periodic); PUSH gets a
     * short grace so a gateway's last frames reach the engine. */
    int linger = kind == EM_BUS_PUSH ? 200 : 0;
    zmq_setsockopt(s->zsock, ZMQ_LINGER, &linger, sizeof linger);
    /* Deep queues: a burst must not be dropped at the default 1000. */
    int hwm = 100000;
    zmq_setsockopt(s->zsock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s->zsock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    /* IPv6 wherever IPv4 works: libzmq takes tcp://[::1]:port only with
     * this set (IPv4 endpoints keep working). */
    int ipv6 = 1;
    zmq_setsockopt(s->zsock, ZMQ_IPV6, &ipv6, sizeof ipv6);
    if (kind == EM_BUS_REQ) {
        /* A peer that died with our request must not wedge the socket:
         * allow a new request, and drop a late reply to an old one. */
        int on = 1;
        zmq_setsockopt(s->zsock, ZMQ_REQ_RELAXED, &on, sizeof on);
        zmq_setsockopt(s->zsock, ZMQ_REQ_CORRELATE, &on, sizeof on);
    }
    int rc = curve ? set_curve(s->zsock, bind, curve) : 0;
    if (rc != 0) {
        zmq_close(s->zsock);
        s->zsock = NULL;
        return rc;
    }
    rc = bind ? zmq_bind(s->zsock, endpoint) : zmq_connect(s->zsock, endpoint);
    if (rc != 0) {
        int err = em_bus_error(errno);
        zmq_close(s->zsock);
        s->zsock = NULL;
        return err;
    }
    return 0;
}

int em_bus_connect(struct em_bus_sock *s, const char *endpoint)
{
    if (zmq_connect(s->zsock, endpoint) != 0)
        return em_bus_error(errno);
    return 0;
}

int em_bus_unbind(struct em_bus_sock *s, char *endpoint, size_t cap)
{
    int rc = em_bus_last_endpoint(s, endpoint, cap);
    if (rc)
        return rc;
    if (zmq_unbind(s->zsock, endpoint) != 0)
        return em_bus_error(errno);
    return 0;
}

int em_bus_bind_again(struct em_bus_sock *s, const char *endpoint)
{
    if (zmq_bind(s->zsock, endpoint) == 0)
        return 0;
    return errno == EADDRINUSE ? CORE_EBUSY : em_bus_error(errno);
}

int em_bus_last_endpoint(struct em_bus_sock *s, char *out, size_t outlen)
{
    size_t len = outlen;
    if (zmq_getsockopt(s->zsock, ZMQ_LAST_ENDPOINT, out, &len) != 0)
        return em_bus_error(errno);
    return 0;
}

int em_bus_subscribe(struct em_bus_sock *s, const char *prefix)
{
    if (s->kind != EM_BUS_SUB)
        return CORE_EINVAL;
    if (zmq_setsockopt(s->zsock, ZMQ_SUBSCRIBE, prefix, strlen(prefix)) != 0)
        return em_bus_error(errno);
    return 0;
}

int em_bus_unsubscribe(struct em_bus_sock *s, const char *prefix)
{
    if (s->kind != EM_BUS_SUB)
        return CORE_EINVAL;
    if (zmq_setsockopt(s->zsock, ZMQ_UNSUBSCRIBE, prefix, strlen(prefix)) != 0)
        return em_bus_error(errno);
    return 0;
}

static void start_pending(struct em_bus_sock *s);

/* zmq may have consumed the FD edge while processing a send: if a message
 * is waiting now, drain it from the idle handle (invariant 3). */
static void after_send(struct em_bus_sock *s)
{
    if (!s->watching)
        return;
    int events = 0;
    size_t len = sizeof events;
    if (zmq_getsockopt(s->zsock, ZMQ_EVENTS, &events, &len) == 0 && (events & ZMQ_POLLIN))
        start_pending(s);
}

int em_bus_send(struct em_bus_sock *s, const struct em_bus_topic *topic, const void *payload,
                size_t len)
{
    const char *t = topic ? topic->s : "";
    size_t tl = topic ? topic->len : 0;
    if (zmq_send(s->zsock, t, tl, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return em_bus_error(errno);
    /* Once the first frame is queued the rest of a multipart message is
     * accepted atomically; ZMQ_DONTWAIT cannot split it. */
    if (zmq_send(s->zsock, payload, len, ZMQ_DONTWAIT) < 0)
        return em_bus_error(errno);
    s->sent++;
    after_send(s);
    return 0;
}

static bool has_more(void *z)
{
    int more = 0;
    size_t len = sizeof more;
    return zmq_getsockopt(z, ZMQ_RCVMORE, &more, &len) == 0 && more;
}

/* Discard the remaining frames of a message. */
static void skip_rest(void *z)
{
    char sink[64];
    while (has_more(z))
        if (zmq_recv(z, sink, sizeof sink, 0) < 0)
            break;
}

static int recv_message(struct em_bus_sock *s, int flags);

static int recv_flags(struct em_bus_sock *s, int flags)
{
    int rc = recv_message(s, flags);
    if (s->kind == EM_BUS_REP && (rc == CORE_EPROTO || rc == CORE_ETOOBIG)) {
        /* invariant 4: answer what we cannot read */
        zmq_send(s->zsock, "error", 5, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        zmq_send(s->zsock, "", 0, ZMQ_DONTWAIT);
    }
    return rc;
}

static int recv_message(struct em_bus_sock *s, int flags)
{
    int n = zmq_recv(s->zsock, s->topic, sizeof s->topic - 1, flags);
    if (n < 0)
        return em_bus_error(errno);
    if (!has_more(s->zsock)) {
        s->dropped++;
        return CORE_EPROTO;
    }
    bool topic_fits = (size_t)n < sizeof s->topic;
    s->topic_len = topic_fits ? (size_t)n : 0;
    s->topic[s->topic_len] = '\0';
    int m = zmq_recv(s->zsock, s->payload, sizeof s->payload, 0);
    if (m < 0)
        return em_bus_error(errno);
    if (has_more(s->zsock)) {
        skip_rest(s->zsock);
        s->dropped++;
        return CORE_EPROTO;
    }
    if (!topic_fits || (size_t)m > sizeof s->payload) {
        s->dropped++;
        return CORE_ETOOBIG;
    }
    s->payload_len = (size_t)m;
    s->received++;
    return 0;
}

int em_bus_recv(struct em_bus_sock *s)
{
    return recv_flags(s, ZMQ_DONTWAIT);
}

int em_bus_recv_wait(struct em_bus_sock *s, int timeout_ms)
{
    zmq_pollitem_t item = {.socket = s->zsock, .events = ZMQ_POLLIN};
    int n = zmq_poll(&item, 1, timeout_ms);
    if (n < 0)
        return em_bus_error(errno);
    if (n == 0)
        return CORE_ETIMEOUT;
    return recv_flags(s, ZMQ_DONTWAIT);
}

static void drain(struct em_bus_sock *s)
{
    unsigned handled = 0;
    for (unsigned n = 0; n < s->budget; n++) {
        int rc = em_bus_recv(s);
        if (rc == CORE_EAGAIN || rc == CORE_ECLOSED) {
            if (s->idle_active) {
                uv_idle_stop(&s->idle);
                s->idle_active = false;
            }
            if (handled && s->on_batch)
                s->on_batch(s, handled, s->cb_data);
            return;
        }
        if (rc == 0) {
            handled++;
            s->cb(s, s->topic, s->topic_len, s->payload, s->payload_len, s->cb_data);
        }
        if (!s->watching)
            return; /* the callback closed the socket */
    }
    if (s->on_batch)
        s->on_batch(s, handled, s->cb_data);
    if (s->watching)
        start_pending(s);
}

static void on_idle(uv_idle_t *h)
{
    drain(h->data);
}

static void start_pending(struct em_bus_sock *s)
{
    if (!s->idle_active) {
        uv_idle_start(&s->idle, on_idle);
        s->idle_active = true;
    }
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    drain(h->data);
}

int em_bus_watch(struct em_bus_sock *s, uv_loop_t *loop, unsigned budget, em_bus_msg_cb cb,
                 void *data)
{
    int fd;
    size_t len = sizeof fd;
    if (zmq_getsockopt(s->zsock, ZMQ_FD, &fd, &len) != 0)
        return em_bus_error(errno);
    s->loop = loop;
    s->cb = cb;
    s->cb_data = data;
    s->budget = budget ? budget : 256;
    if (uv_poll_init(loop, &s->poll, fd) != 0)
        return CORE_EIO;
    uv_idle_init(loop, &s->idle);
    s->poll.data = s;
    s->idle.data = s;
    s->watching = true;
    if (uv_poll_start(&s->poll, UV_READABLE, on_poll) != 0) {
        s->watching = false;
        uv_close((uv_handle_t *)&s->poll, NULL);
        uv_close((uv_handle_t *)&s->idle, NULL);
        return CORE_EIO;
    }
    /* Messages may already be queued, and their edge is gone. */
    start_pending(s);
    return 0;
}

void em_bus_close(struct em_bus_sock *s)
{
    if (s->watching) {
        s->watching = false;
        uv_close((uv_handle_t *)&s->poll, NULL);
        uv_close((uv_handle_t *)&s->idle, NULL);
    }
    if (s->zsock) {
        zmq_close(s->zsock);
        s->zsock = NULL;
    }
}
