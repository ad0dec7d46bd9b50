/*
 * A protocol-agnostic TCP server on libuv: the connection plumbing that the
 * GridSync node and the EduMatcher gateway share.
 *
 * The server accepts connections up to a limit, reads into a per-connection
 * input buffer and hands the protocol every unconsumed byte at once; the
 * protocol consumes as many complete requests as it finds and appends the
 * replies to the connection's output buffer. After each read (or, with
 * defer_flush, once the loop iteration's input has all been handled) the
 * server flushes all pending output in one write (uv_try_write first, an
 * asynchronous uv_write for what the socket did not take), so a pipelined
 * batch costs one read and one write system call. Buffers belong to the
 * connection and are reused for every request: no allocation per request.
 *
 * Connection life cycle (functions that make each transition):
 *
 *   accept ──on_connection──> OPEN ──core_conn_close_after_reply──> DRAINING
 *                              │  \                                    │
 *                              │   \                    output written  │
 *                              │    \                                  v
 *                              │     \                             LINGERING
 *                              │      \        peer's EOF, 2-3 s, 1 MB │
 *                              │       `──core_conn_close / error / limit──┐ │
 *                              v                                         v v
 *                           (read EOF) ──────────────────────────────> CLOSING ──close_cb──> freed
 *
 *  - OPEN: reading; on_data is called with new input.
 *  - DRAINING: no more reading; the connection closes once its output has
 *    been written (a protocol error or QUIT: the client sees the reply).
 *  - LINGERING: on_close has been called and the connection is gone for
 *    the application (not in core_server_foreach, find or the stats); the
 *    write side is shut (FIN after the reply) and whatever the peer still
 *    sends is read and discarded until its EOF, for at most 2-3 s or 1 MB.
 *    Closing with unread input would make the kernel answer with a reset,
 *    which makes the peer's kernel drop the reply it has not read yet.
 *    (Redis closes at once and its clients can lose that reply.) A
 *    connection refused by maxclients lingers too. At most 16 linger at
 *    once (they hold descriptors outside maxclients); beyond, they close
 *    at once.
 *  - CLOSING: on_close has been called, the handle is being closed; the
 *    struct is freed in libuv's close callback, never earlier.
 *
 * Limits (core_server_set_limits, may change at run time):
 *  - maxclients: a connection over the limit gets `reject_msg` and is closed.
 *  - query_buf_limit: unconsumed input above it closes the connection (a
 *    declared huge request never makes the server allocate more than what
 *    has actually arrived, plus its doubling slack).
 *  - output_buf_limit: pending output (not yet taken by the socket) above
 *    it closes the connection: a client that sends but does not read cannot
 *    make the server buffer without bound. 0 means no limit.
 *  - idle_timeout_s: a connection without input for that long is closed
 *    (0 = never); checked once per second.
 *  - defer_flush, busy_poll_us: when replies are written and whether the
 *    loop sleeps at once when input stops (see the struct).
 *
 * Not thread-safe: one loop owns the server and all its connections.
 */
#ifndef CORE_UV_SERVER_H
#define CORE_UV_SERVER_H

#include "core/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct core_server;
struct core_conn;

struct core_server_limits {
    int64_t maxclients;
    int64_t query_buf_limit;  /* bytes */
    int64_t output_buf_limit; /* bytes; 0 = no limit */
    /* Redis's soft limit: closed after output stayed above output_soft_limit
     * for more than output_soft_seconds (0 bytes = none). */
    int64_t output_soft_limit, output_soft_seconds;
    int64_t idle_timeout_s;  /* 0 = off */
    int64_t tcp_keepalive_s; /* TCP keepalive probes after this idle time; 0 = off */
    /* Budget for every connection's buffers together (Redis 7's
     * maxmemory-clients); over it, the biggest connections are closed
     * first. 0 = none. */
    int64_t clients_mem_limit;
    /* Write the replies of one loop iteration's input after all of it has
     * been handled (the check phase), as Redis writes in beforeSleep,
     * instead of after each read: the replies to many clients leave
     * together, which a single-threaded client takes in fewer wake-ups
     * (docs/perf.md, "sleeps"). Replies made outside on_data (core_conn_flush)
     * are written at once either way. */
    bool defer_flush;
    /* Microseconds the loop goes on polling without sleeping after the
     * last input (0 = sleep at once). A server that sleeps between
     * requests is woken by its clients' writes, which on a VM costs the
     * client more than the short spin costs the server (docs/perf.md). */
    int64_t busy_poll_us;
};

/* Most addresses one server listens on (Redis's CONFIG_BINDADDR_MAX). */
#define CORE_SERVER_MAX_LISTENERS 16

struct core_server_ops {
    /* A connection was accepted. Set its user data here. Return 0 to keep
     * it, or a negative code to close it at once (on_close is then not
     * called). */
    int (*on_open)(struct core_conn *c, void *app);
    /* New input: data[0..len) is everything received and not yet consumed
     * (the buffer is writable, so a parser may unescape in place). Consume
     * complete requests, append replies with core_conn_out, and return the
     * number of bytes consumed; the rest is handed back, after the next
     * read, at the start of data. Data pointers are invalid after return. */
    size_t (*on_data)(struct core_conn *c, char *data, size_t len);
    /* The connection is going away (peer closed, error, limit, kill, stop).
     * Release the user data here. Not called inside on_data for the same
     * connection: a close requested there takes effect after it returns. */
    void (*on_close)(struct core_conn *c);
};

struct core_server_stats {
    uint64_t connected;              /* open connections now */
    uint64_t total_connections;      /* accepted since start */
    uint64_t rejected_connections;   /* refused by maxclients */
    uint64_t total_net_input_bytes;  /* read from sockets */
    uint64_t total_net_output_bytes; /* written to sockets */
    uint64_t closed_by_query_limit;  /* client-query-buffer-limit hits */
    uint64_t closed_by_output_limit; /* output-buffer-limit hits */
    uint64_t closed_by_timeout;      /* idle timeouts */
    uint64_t evicted_clients;        /* closed by clients_mem_limit */
};

/* Create a server on `loop` (not yet listening). `reject_msg` (copied; may
 * be NULL) is written to connections refused by maxclients; `app` is passed
 * to on_open. Returns 0 or CORE_ENOMEM; *out is freed with
 * core_server_free after the loop has stopped. */
int core_server_new(struct core_server **out, uv_loop_t *loop, const struct core_server_ops *ops,
                    void *app, const struct core_server_limits *limits, const char *reject_msg);

/* Bind and listen on host:port (IPv4 or IPv6 literal; IPv6 sockets take
 * IPv6 only). May be called for up to CORE_SERVER_MAX_LISTENERS addresses;
 * every listener feeds the same connections. Returns 0, or a CORE_E* code
 * converted from libuv's (CORE_EBUSY: address in use; CORE_ERANGE: too
 * many addresses). */
int core_server_listen(struct core_server *s, const char *host, int port);

/* Listen on a Unix-domain socket at path, created with permissions `mode`
 * (e.g. 0600: only the owner can connect; the socket never has wider
 * permissions, not even while it is being created). A socket file left by
 * a process that died is replaced; one a live process accepts on is not
 * (CORE_EBUSY). Connections from it have peer "unix:<id>" and
 * core_conn_fd gives the socket for SO_PEERCRED. Returns 0, CORE_ETOOBIG
 * (path longer than a socket address holds), CORE_ERANGE or a CORE_E*
 * code converted from libuv's. */
int core_server_listen_unix(struct core_server *s, const char *path, unsigned mode);

/* The port actually bound (useful after listening on port 0), or a
 * negative code if not listening on TCP. */
int core_server_port(const struct core_server *s);

/* Replace the limits (takes effect for the next check). */
void core_server_set_limits(struct core_server *s, const struct core_server_limits *limits);

/* Stop: close the listener, every connection (on_close is called for each)
 * and the server's timer. The loop then ends once the application has
 * closed its own handles. Safe to call from inside a callback, and twice. */
void core_server_stop(struct core_server *s);

/* Free the server. Only after core_server_stop and after the loop has run
 * the close callbacks (uv_run returned). */
void core_server_free(struct core_server *s);

void core_server_get_stats(const struct core_server *s, struct core_server_stats *out);

/* Call fn for each open connection (in accept order). fn must not close
 * connections other than the one it is given. */
void core_server_foreach(struct core_server *s, void (*fn)(struct core_conn *c, void *arg),
                         void *arg);

/* The open connection with this id, or NULL. O(connections). */
struct core_conn *core_server_find(struct core_server *s, uint64_t id);

/* --- connections --- */

/* The connection's output buffer: append replies to it. Owned by the
 * connection; valid until the connection is closed. */
struct core_buf *core_conn_out(struct core_conn *c);

/* Write what the socket takes now. Use between requests of a large batch
 * to bound memory. Returns 0, or CORE_ECLOSED when the connection has been
 * condemned (write error, or output over the limit): stop producing
 * output for it. */
int core_conn_flush(struct core_conn *c);

/* Close: now, or (inside on_data) as soon as on_data returns. Pending
 * output is dropped. */
void core_conn_close(struct core_conn *c);

/* Call on_data again with the input it left unconsumed (after flushing
 * what is pending; with defer_flush, the flush after it is queued), for a
 * protocol that stopped consuming while it waited on something outside
 * the connection and can now go on (GridSync's cluster mode holds a
 * client's next request until its replicated write is committed, so that
 * pipelined requests keep their order). No-op when not open or from
 * inside on_data. */
void core_conn_redeliver(struct core_conn *c);

/* Give c its own output limits instead of the server's (as the limits
 * struct's output fields; Redis's per-class client-output-buffer-limit,
 * e.g. for a client that subscribed). A negative hard limit gives the
 * connection the server's limits again. */
void core_conn_set_output_limit(struct core_conn *c, int64_t hard, int64_t soft, int64_t soft_s);

/* CLIENT NO-EVICT: never chosen by the clients' memory budget. */
void core_conn_set_no_evict(struct core_conn *c, bool on);

/* Bytes the connections' buffers (input, output, in-flight write) hold
 * together, as last counted (at every flush and close). */
size_t core_server_clients_memory(const struct core_server *s);

/* Stop reading and close once all pending output has been written. */
void core_conn_close_after_reply(struct core_conn *c);

/* True once the connection is draining or closing: stop processing its
 * requests. */
bool core_conn_closing(const struct core_conn *c);

void core_conn_set_data(struct core_conn *c, void *data);
void *core_conn_data(const struct core_conn *c);
uint64_t core_conn_id(const struct core_conn *c); /* unique, from 1, never reused */
struct core_server *core_conn_server(const struct core_conn *c);
const char *core_conn_peer(const struct core_conn *c);  /* "ip:port" */
const char *core_conn_local(const struct core_conn *c); /* "ip:port" */
int core_conn_fd(const struct core_conn *c);
uint64_t core_conn_created_ms(const struct core_conn *c);     /* loop time (uv_now) */
uint64_t core_conn_last_active_ms(const struct core_conn *c); /* loop time of last input */
size_t core_conn_input_pending(const struct core_conn *c);    /* unconsumed bytes */
size_t core_conn_input_capacity(const struct core_conn *c);
size_t core_conn_output_pending(const struct core_conn *c); /* not yet written */

#endif
