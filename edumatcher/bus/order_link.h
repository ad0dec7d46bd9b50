/*
 * The order link: a direct stream socket between each gateway and the
 * engine, for orders and their replies (docs/edumatcher-exchange.md, "the
 * order link"). ZeroMQ (zmq_bus.h) stays for fan-out only: market data,
 * trades, health. The link exists because each order used to cross two
 * ZeroMQ hops, and each hop is a hand-off to and from a ZeroMQ I/O thread
 * (four thread wake-ups per hop); on a stream socket driven by the
 * process's own libuv loop an order costs one wake-up per process.
 *
 *   gateway (em_link_client) --[record gw | order frames]----> engine
 *   gateway <----------------[record gw | event frames]------- (em_link_server)
 *
 * Endpoints: "unix:<path>" (the default for a local deployment: the
 * socket file is created with a mode such as 0600 or 0660 and the peer's
 * uid is checked with SO_PEERCRED) or "tcp://<host>:<port>" (every
 * connection must present the engine's link key first).
 *
 * Record (little-endian, no padding):
 *   u32 length of what follows | u8 gwlen | gw[gwlen] | payload
 * The payload is one or more binary frames of edumatcher/engine/msg.h
 * (each length-prefixed, so they are concatenated), all of one session
 * gw, at most EM_LINK_PAYLOAD_MAX bytes. The first record on every
 * connection, from the gateway, is the hello: gwlen 0, payload the link
 * key (empty on a Unix-domain link). The engine closes a connection whose
 * hello is missing or wrong, whose peer uid is not allowed, or that sends
 * a record that does not decode; it answers nothing to it.
 *
 * Routing back: the engine side remembers, per gateway id, the connection
 * that last sent a record for it that the engine took (on_record returned
 * 0; a LOGIN comes first, so the route is set before any reply), and
 * em_link_reply writes there. A record the engine refuses (the gw is held
 * by another door, docs/alf.md C.9) leaves the route where it was; its
 * answer goes to its own connection (em_link_reply_conn). Replies for a gw
 * whose connection has gone are dropped and counted (`unrouted`), as a
 * PUB drops what no subscriber asked for.
 *
 * A gateway gone: when a connection ends while the server runs (its peer
 * closed it or died, a write to it failed, a record did not decode), the
 * server calls on_gone for every gw whose route was that connection and
 * that no connection sent for within gone_grace_ms (its traders'
 * connections went with their gateway: the engine cancels their orders as
 * for a DISCONNECT, docs/alf.md C.3), then on_batch in that loop turn. A
 * gateway that only lost its link reconnects and sends for its sessions
 * (docs/alf.md I.6, RESYNC) within the grace, and nothing is called.
 * em_link_server_stop calls no on_gone: an engine that stops keeps the
 * books for the sessions it comes back to.
 *
 * Batching: what every connection brought during one loop turn is handed
 * to on_record, then on_batch runs once (where the engine flushes its
 * journal and stages its replies), then every connection written to is
 * flushed with one write. The gateway side writes what its sessions sent
 * in one turn with one write (em_link_client_flush).
 *
 * Single-threaded (the loop's thread); no allocation per record: buffers
 * belong to connections and are reused.
 */
#ifndef EM_ORDER_LINK_H
#define EM_ORDER_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define EM_LINK_HDR         5    /* u32 length + u8 gwlen */
#define EM_LINK_GW_MAX      16   /* as a gateway id (msg.h EM_GW_MAX) */
#define EM_LINK_PAYLOAD_MAX 4096 /* as a bus message (zmq_bus.h) */
#define EM_LINK_KEY_MAX     64
#define EM_LINK_ALLOW_MAX   8 /* uids a Unix-domain link accepts */

/* One decoded record; pointers into the buffer decoded. */
struct em_link_rec {
    const char *gw;
    size_t gwlen;
    const uint8_t *payload;
    size_t len;
};

/* Decode one record from buf[0..len). Returns the bytes it takes (> 0),
 * CORE_EINCOMPLETE when buf holds less than a record, or CORE_EPROTO for
 * one that breaks the limits above (the stream cannot be resynchronised:
 * close it). */
int em_link_decode(const uint8_t *buf, size_t len, struct em_link_rec *out);

/* Write a record's header for gw and a payload of len bytes into
 * out[EM_LINK_HDR + gwlen]; returns the header's length. gwlen and len
 * must be within the limits above. */
size_t em_link_encode_header(uint8_t *out, const char *gw, size_t gwlen, size_t len);

/* Called for every record but the hello, in arrival order. */
typedef void (*em_link_record_cb)(void *ctx, const char *gw, size_t gwlen, const void *payload,
                                  size_t len);
/* The engine side's: a record that came on connection `conn` (its
 * core_conn_id, never reused). Returns 0 when the record is gw's there
 * (gw's replies go to conn from now on), nonzero when the engine refused
 * it (the route stays where it was). */
typedef int (*em_link_server_record_cb)(void *ctx, uint64_t conn, const char *gw, size_t gwlen,
                                        const void *payload, size_t len);
/* Called once after the records of one loop turn (handled: how many). */
typedef void (*em_link_batch_cb)(void *ctx, unsigned handled);
/* The connection gw's records came on has ended (see "A gateway gone"). */
typedef void (*em_link_gone_cb)(void *ctx, const char *gw, size_t gwlen);

struct em_link_stats {
    uint64_t accepted, refused; /* connections: kept, closed for auth */
    uint64_t records_in, records_out, bad_records, unrouted, dropped;
    int64_t connections;
};

/* ---- the engine side ---- */

struct em_link_server_config {
    const char *endpoint; /* "unix:<path>" or "tcp://<host>:<port>" */
    unsigned mode;        /* Unix-domain socket file permissions (0: 0600) */
    /* uids allowed on a Unix-domain link (0 entries: the process's own) */
    uint32_t allow_uid[EM_LINK_ALLOW_MAX];
    unsigned nallow;
    /* the key a TCP link's hello must carry (required for TCP) */
    const uint8_t *key;
    size_t keylen;
    em_link_server_record_cb on_record;
    em_link_batch_cb on_batch;
    em_link_gone_cb on_gone; /* optional */
    uint64_t gone_grace_ms;  /* see "A gateway gone" (0: at the next timer turn) */
    void *ctx;
};

struct em_link_server;

/* Listen on cfg->endpoint from loop. cfg and the key are copied. Returns 0
 * and *out, CORE_EINVAL (bad endpoint; TCP without a key), CORE_EBUSY (in
 * use), CORE_ETOOBIG (socket path too long) or another CORE_E* code. */
int em_link_server_open(struct em_link_server **out, uv_loop_t *loop,
                        const struct em_link_server_config *cfg);
/* Queue one reply record for gw on the connection that last sent for it.
 * Returns 0, CORE_ENOTFOUND (no connection for gw: dropped, counted) or
 * CORE_EINVAL (over the limits). Written at the end of the loop turn, or
 * by em_link_server_flush. */
int em_link_reply(struct em_link_server *s, const char *gw, size_t gwlen, const void *payload,
                  size_t len);
/* As em_link_reply, to connection conn rather than gw's route (the answer
 * to a record the engine refused). CORE_ENOTFOUND: conn is not open. */
int em_link_reply_conn(struct em_link_server *s, uint64_t conn, const char *gw, size_t gwlen,
                       const void *payload, size_t len);
/* True while connection conn is open (its peer has not gone). */
bool em_link_server_conn_open(struct em_link_server *s, uint64_t conn);
/* Write what em_link_reply queued (outside a batch: timers). */
void em_link_server_flush(struct em_link_server *s);
struct em_link_stats *em_link_server_stats(struct em_link_server *s);
/* Stop listening and close every connection (the loop must run once more
 * to close the handles); then free with em_link_server_free. */
void em_link_server_stop(struct em_link_server *s);
void em_link_server_free(struct em_link_server *s);

/* ---- the gateway side ---- */

struct em_link_client_config {
    const char *endpoint; /* as the server's */
    const uint8_t *key;   /* sent in the hello (TCP) */
    size_t keylen;
    uint64_t reconnect_ms; /* retry this often while not connected (0: 100) */
    em_link_record_cb on_record;
    em_link_batch_cb on_batch;
    /* the link came up (true) or went down (false); optional */
    void (*on_state)(void *ctx, bool up);
    void *ctx;
};

struct em_link_client;

/* Start connecting to cfg->endpoint (and reconnecting whenever the link
 * drops). Returns 0 and *out, CORE_EINVAL (bad endpoint) or CORE_ENOMEM. */
int em_link_client_open(struct em_link_client **out, uv_loop_t *loop,
                        const struct em_link_client_config *cfg);
/* Queue one record to the engine; while the link is down records wait
 * (as in a ZeroMQ PUSH queue) and go out, after the hello, when it is up
 * again. Returns 0, or CORE_EAGAIN when more than the client's limit
 * (16 MiB) is waiting (nothing was queued: the caller answers the orders
 * itself), CORE_EINVAL over the record limits. Records handed to the
 * socket but not yet read by an engine that dies are lost (the caller's
 * resend, if any, covers them). */
int em_link_client_send(struct em_link_client *c, const char *gw, size_t gwlen, const void *payload,
                        size_t len);
/* Write what was queued (once per loop turn). */
void em_link_client_flush(struct em_link_client *c);
bool em_link_client_up(const struct em_link_client *c);
struct em_link_stats *em_link_client_stats(struct em_link_client *c);
/* Write what is queued if the socket takes it now, then close (run the
 * loop once more); free with em_link_client_free after the loop. */
void em_link_client_close(struct em_link_client *c);
void em_link_client_free(struct em_link_client *c);

/* Read the link key from path, creating it (random, mode 0600) when
 * `create` and it does not exist. Returns its length (> 0) or a CORE_E*
 * code (CORE_ENOTFOUND: missing and not created). */
int em_link_key_load(const char *path, bool create, uint8_t *key, size_t cap);

#endif
