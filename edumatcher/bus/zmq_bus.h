/*
 * The one adapter over libzmq: EduMatcher's message bus.
 *
 * Topology (docs/edumatcher-exchange.md):
 *
 *   gateways --PUSH--> engine PULL            (binary inbound frames)
 *   engine PUB --> SUB gateways, clearing, monitor, market data readers
 *   every process PUB  health.<name>         (metrics beacons)
 *
 * A message on the bus is two frames: a topic (`order.ack.<GW>`,
 * `trade.executed`, `md.<SYM>`, `health.<process>`) and a payload. PUSH
 * messages carry a topic too, so one receive path serves every socket.
 *
 * Invariants:
 *  1. No allocation per message: topics are built once (struct
 *     em_bus_topic, cached per gateway in em_topic_cache), sends use
 *     zmq_send on caller memory, receives use zmq_recv into the socket's
 *     preallocated buffers.
 *  2. zmq errors never escape: every function returns 0 or a CORE_E* code.
 *  4. REQ/REP carry the same two frames (a query topic and its
 *     argument). A REP socket answers a malformed request itself with
 *     topic "error", so its strict receive/send alternation never stalls.
 *  3. ZMQ_FD is edge-triggered. When a socket is watched from a libuv loop,
 *     a readable notification drains with ZMQ_DONTWAIT until EAGAIN (or a
 *     budget, after which an idle handle continues next loop iteration), and
 *     every send on a watched socket re-checks ZMQ_EVENTS, since zmq may
 *     have consumed the edge while processing the send.
 */
#ifndef EM_ZMQ_BUS_H
#define EM_ZMQ_BUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define EM_BUS_TOPIC_MAX   48   /* "order.ack." + a 16-char gw fits easily */
#define EM_BUS_PAYLOAD_MAX 4096 /* largest payload a socket receives */

enum em_bus_kind {
    EM_BUS_PUSH,
    EM_BUS_PULL,
    EM_BUS_PUB,
    EM_BUS_SUB,
    EM_BUS_REQ, /* queries (relaxed: a request may be re-sent after a lost reply) */
    EM_BUS_REP, /* answers queries: each received message must get one send */
};

/* A topic string built once and reused for every send. */
struct em_bus_topic {
    uint8_t len;
    char s[EM_BUS_TOPIC_MAX];
};

/* Build `prefix` + `name` into t. Returns 0 or CORE_ETOOBIG. */
int em_bus_topic_set(struct em_bus_topic *t, const char *prefix, const char *name, size_t name_len);

/*
 * A fixed-capacity cache of topics `prefix<name>`, e.g. one ack topic per
 * gateway id. Lookups after the first for a name do no formatting. The
 * cache owns its slots (inline, no allocation); `cap` must be a power of
 * two.
 */
#define EM_TOPIC_CACHE_CAP 256
struct em_topic_cache {
    char prefix[24];
    uint32_t count;
    struct {
        char name[24];
        uint8_t name_len;
        struct em_bus_topic topic;
    } slot[EM_TOPIC_CACHE_CAP];
};

/* Empty the cache and set the prefix (e.g. "order.ack."). */
void em_topic_cache_init(struct em_topic_cache *c, const char *prefix);

/* Return the cached topic for name, building it on first use. The pointer
 * is owned by the cache and stays valid until it is re-initialised. Returns
 * NULL if name is longer than 23 bytes or the cache is full. */
const struct em_bus_topic *em_topic_cache_get(struct em_topic_cache *c, const char *name,
                                              size_t name_len);

struct em_bus_sock;

/* Called once per received message. topic and payload point into the
 * socket's buffers and are valid only during the call. */
typedef void (*em_bus_msg_cb)(struct em_bus_sock *s, const char *topic, size_t topic_len,
                              const void *payload, size_t len, void *data);

/* Called after a drain that handled at least one message (the end of a
 * batch): where a process does per-batch work such as flushing its
 * journal and then publishing. */
typedef void (*em_bus_batch_cb)(struct em_bus_sock *s, unsigned handled, void *data);

struct em_bus_sock {
    void *zsock;
    enum em_bus_kind kind;
    /* libuv watching (em_bus_watch) */
    uv_loop_t *loop;
    uv_poll_t poll;
    uv_idle_t idle;
    bool watching;
    bool idle_active;
    unsigned budget;
    em_bus_msg_cb cb;
    em_bus_batch_cb on_batch; /* optional; set after em_bus_watch */
    void *cb_data;
    /* counters, totals since open */
    uint64_t sent, received, dropped;
    /* receive buffers */
    size_t topic_len, payload_len;
    char topic[EM_BUS_TOPIC_MAX];
    unsigned char payload[EM_BUS_PAYLOAD_MAX];
};

/* Create the process's zmq context. *out is owned by the caller and freed
 * with em_bus_ctx_term. Returns 0 or CORE_ENOMEM / CORE_EIO. */
int em_bus_ctx_new(void **out);

/* Terminate the context; every socket must be closed first. */
void em_bus_ctx_term(void *ctx);

/*
 * Open a socket of `kind` on `endpoint` (a zmq endpoint such as
 * "tcp://127.0.0.1:9100" or "inproc://engine"), binding if `bind` is true,
 * else connecting. Linger is 0 for PUB/SUB and a short bound for PUSH, so a
 * stopping process never hangs. s is caller-owned storage (it is large:
 * allocate it once). Returns 0, CORE_EINVAL (bad endpoint), CORE_EBUSY
 * (address in use) or CORE_EIO.
 */
int em_bus_open(struct em_bus_sock *s, void *ctx, enum em_bus_kind kind, const char *endpoint,
                bool bind);

struct em_curve_pair; /* edumatcher/bus/curve.h */

/*
 * em_bus_open with CURVE (bus/curve.h) when curve is not NULL: a bound
 * socket is a CURVE server with curve's pair (ZAP domain "edumatcher":
 * the process must run a ZAP handler, em_curve_zap_start, before this),
 * a connecting one a CURVE client with its pair and curve->server_key.
 * NULL: as em_bus_open. Returns as em_bus_open (CORE_EINVAL also when
 * a client has no server key or CURVE is unavailable).
 */
int em_bus_open_curve(struct em_bus_sock *s, void *ctx, enum em_bus_kind kind, const char *endpoint,
                      bool bind, const struct em_curve_pair *curve);

/* Connect an already open socket to one more endpoint (a SUB that listens
 * to several publishers). Returns 0 or CORE_EINVAL / CORE_EIO. */
int em_bus_connect(struct em_bus_sock *s, const char *endpoint);

/* Stop listening on the endpoint the socket bound (its last endpoint):
 * libzmq closes the connections accepted there too, so every peer
 * reconnects and goes through its handshake again (for a CURVE server:
 * ZAP, with the allow-list as it is now). The listener closes in a ZeroMQ
 * I/O thread, so the port may stay taken a moment: bind again with
 * em_bus_bind_again until it returns 0. Returns 0 or a CORE_E* code. */
int em_bus_unbind(struct em_bus_sock *s, char *endpoint, size_t cap);
/* Bind endpoint (from em_bus_unbind) again. Returns 0, CORE_EBUSY (the
 * port is still being released: try again later) or a CORE_E* code. */
int em_bus_bind_again(struct em_bus_sock *s, const char *endpoint);

/* For a bound tcp socket with port 0 (tcp://127.0.0.1:*): the endpoint
 * chosen, into out. Returns 0 or a CORE_E* code. */
int em_bus_last_endpoint(struct em_bus_sock *s, char *out, size_t outlen);

/* SUB only: receive messages whose topic starts with prefix ("" for all).
 * Returns 0 or CORE_EINVAL. */
int em_bus_subscribe(struct em_bus_sock *s, const char *prefix);

/* SUB only: undo one em_bus_subscribe of the same prefix. */
int em_bus_unsubscribe(struct em_bus_sock *s, const char *prefix);

/*
 * Send topic + payload as one two-frame message without blocking. topic
 * may be NULL (an empty topic frame). The memory is copied by zmq before
 * return. Returns 0, CORE_EAGAIN (PUSH with no peer or at its high-water
 * mark: the message was not sent) or CORE_EIO. A PUB socket drops at its
 * high-water mark without error, as zmq does.
 */
int em_bus_send(struct em_bus_sock *s, const struct em_bus_topic *topic, const void *payload,
                size_t len);

/*
 * Receive one message without blocking into the socket's buffers
 * (s->topic, s->payload, their lengths). Returns 0, CORE_EAGAIN when none
 * is waiting, CORE_ETOOBIG when a frame did not fit (the message is
 * consumed and counted in s->dropped) or CORE_EPROTO for a message that is
 * not two frames (consumed, dropped).
 */
int em_bus_recv(struct em_bus_sock *s);

/* Like em_bus_recv but waits at most timeout_ms (-1: forever). */
int em_bus_recv_wait(struct em_bus_sock *s, int timeout_ms);

/*
 * Watch a receiving socket from a libuv loop: cb runs once per message.
 * At most `budget` messages (0: 256) are handled per loop iteration so that
 * timers and other sockets get their turn; the rest are drained on the
 * next iteration. Returns 0 or a CORE_E* code; cb is never called if it
 * fails.
 */
int em_bus_watch(struct em_bus_sock *s, uv_loop_t *loop, unsigned budget, em_bus_msg_cb cb,
                 void *data);

/* Close the socket; a watched socket's libuv handles are closed too (the
 * caller must run the loop once more before freeing s). */
void em_bus_close(struct em_bus_sock *s);

/* Map a zmq errno to a CORE_E* code (exposed for tests). */
int em_bus_error(int zmq_errno);

#endif
