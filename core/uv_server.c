/*
 * libuv TCP server scaffold (see uv_server.h for the connection life cycle
 * and the limits).
 *
 * Invariants:
 *  1. A connection is in the server's list iff it is OPEN or DRAINING
 *     (its `link` is linked), except the one whose on_data is running when the server
 *     stops, which leaves the list at once. on_close is called exactly
 *     once for every connection on_open accepted, when it goes LINGERING
 *     or CLOSING, and never while its on_data runs.
 *  2. At most one uv_write is in flight per connection (`writing`); its
 *     bytes live in `wbuf`, which nothing touches until write_cb. New
 *     replies go to `out` meanwhile, so reply order is preserved.
 *  3. Unconsumed input is in[in_start .. in.len); the protocol sees it as
 *     one contiguous block starting at offset 0, so its parser may keep
 *     offsets across reads while the scaffold compacts the buffer.
 *  4. clients_mem is the sum of every open connection's `accounted`, the
 *     capacity of its three buffers when last counted: at every flush
 *     (after each batch of requests, each write, each pushed message) and
 *     at close. When it passes clients_mem_limit, the biggest connections
 *     are evicted until it is under: their memory leaves the sum at once,
 *     the connections close when no callback can be using them.
 *  5. A LINGERING connection has left the application (on_close called,
 *     out of `conns`, of the budget and of the stats) and holds no buffer;
 *     it is in `lingering`, oldest first, until its handle is closed.
 */
#include "core/uv_server.h"

#include "core/error.h"
#include "core/list.h"
#include "core/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Input is read into at least this much free space (libuv suggests 64 KB;
 * smaller keeps many idle connections cheap, and the buffer grows for
 * clients that pipeline). */
#define IN_INITIAL  (16 * 1024)
#define IN_MIN_FREE (4 * 1024)
/* Buffers that grew beyond this are given back once empty, as Redis's
 * clientsCronResizeQueryBuffer does, so one big request does not pin
 * memory for the connection's lifetime. */
#define SHRINK_ABOVE (256 * 1024)
/* A lingering close (CONN_LINGERING, see uv_server.h) ends at the peer's
 * EOF, or after this long (checked by the once-a-second cron, so 2-3 s),
 * or once this much input has been discarded. Beyond LINGER_MAX_CONNS at
 * once a connection closes at once, as Redis's do: a lingering one has
 * left maxclients' count but still holds a descriptor, and those must
 * fit in the few a server keeps beside its clients' (core/proc.h,
 * CORE_PROC_RESERVED_FDS). */
#define LINGER_MS        2000
#define LINGER_MAX_BYTES (1024 * 1024)
#define LINGER_MAX_CONNS 16

enum conn_state { CONN_OPEN, CONN_DRAINING, CONN_LINGERING, CONN_CLOSING };

/* A listener's or connection's stream: TCP, or a Unix-domain socket
 * (core_server_listen_unix). */
union stream {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
};

struct core_conn {
    union stream tcp; /* first: handle pointers cast back to the conn */
    bool unix_sock;   /* accepted on a Unix-domain listener */
    struct core_server *srv;
    struct core_list link; /* in the server's `conns`, or `lingering` (invariant 5) */
    uint64_t id;
    void *data;
    enum conn_state state;
    bool in_callback;   /* inside on_data */
    bool close_pending; /* core_conn_close called inside on_data */
    bool writing;       /* a uv_write is in flight (invariant 2) */
    bool accepted;      /* on_open accepted it: on_close is owed */
    struct core_buf in;
    size_t in_start;
    struct core_buf out;
    struct core_buf wbuf;
    size_t woff;
    union {
        uv_write_t wreq;    /* OPEN, DRAINING */
        uv_shutdown_t sreq; /* LINGERING: nothing is written any more */
    };
    uint64_t linger_until_ms; /* LINGERING: loop time when it closes anyway */
    size_t lingered;          /* LINGERING: input bytes discarded */
    uint64_t created_ms, last_active_ms;
    char peer[64], local[64];
    /* core_conn_set_output_limit: this connection's own limit. */
    bool own_limit;
    int64_t out_hard, out_soft, out_soft_s;
    uint64_t soft_since_ms; /* when output went above out_soft; 0 = below */
    /* The clients' memory budget (invariant 4): what this connection's
     * buffers held when last counted into the server's clients_mem. */
    size_t accounted;
    bool no_evict;               /* core_conn_set_no_evict */
    bool evicting;               /* chosen for eviction; closed from the evict handle */
    struct core_list flush_link; /* in the server's flush queue */
};

struct core_server {
    uv_loop_t *loop;
    union stream listeners[CORE_SERVER_MAX_LISTENERS];
    bool listener_unix[CORE_SERVER_MAX_LISTENERS];
    int nlisteners; /* initialised handles in listeners[] */
    uv_timer_t cron;
    bool listening, stopped;
    int first_listening; /* index of the first listener that listens, or -1 */
    const struct core_server_ops *ops;
    void *app;
    struct core_server_limits limits;
    char *reject_msg;
    size_t reject_len;
    struct core_list conns;     /* OPEN and DRAINING connections, oldest first */
    struct core_list lingering; /* LINGERING connections, oldest first (invariant 5) */
    size_t nlingering;
    uint64_t next_id;
    struct core_server_stats stats;
    size_t clients_mem;   /* sum of every connection's accounted bytes */
    uv_idle_t evict_idle; /* closes evicted connections outside callbacks */
    bool evict_scheduled;
    /* limits.defer_flush: connections with replies to write once the
     * loop has handled this iteration's input (flush_check). */
    struct core_list flush_queue;
    uv_check_t flush_check;
    /* limits.busy_poll_us: while spin_idle is active the loop polls
     * without sleeping; it stops busy_poll_us after the last input. */
    uv_idle_t spin_idle;
    uint64_t spin_since; /* uv_hrtime of the last input seen by spin_cb */
    bool spinning, input_seen;
};

static void format_addr(const struct sockaddr_storage *ss, char *out, size_t outlen)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        uv_ip4_name(a, ip, sizeof(ip));
        port = ntohs(a->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        uv_ip6_name(a, ip, sizeof(ip));
        port = ntohs(a->sin6_port);
    }
    snprintf(out, outlen, "%s:%d", ip, port);
}

static struct core_conn *conn_of(struct core_list *l)
{
    return CORE_CONTAINER_OF(l, struct core_conn, link);
}

static void conn_free_cb(uv_handle_t *h)
{
    struct core_conn *c = (struct core_conn *)h;
    core_buf_free(&c->in);
    core_buf_free(&c->out);
    core_buf_free(&c->wbuf);
    free(c);
}

/* The connection leaves the application: out of the list, the budget and
 * the stats, and on_close is called (once: `accepted` is cleared). */
static void conn_leave(struct core_conn *c)
{
    struct core_server *s = c->srv;
    s->clients_mem -= c->accounted;
    c->accounted = 0;
    if (core_list_linked(&c->link)) {
        core_list_remove(&c->link);
        s->stats.connected--;
    }
    core_list_remove(&c->flush_link);
    if (c->accepted && s->ops->on_close) {
        c->accepted = false;
        s->ops->on_close(c);
    }
}

/* Any state -> CLOSING: the handle is closed, the struct freed in its
 * close callback. */
static void conn_release(struct core_conn *c)
{
    if (c->state == CONN_LINGERING) {
        core_list_remove(&c->link);
        c->srv->nlingering--;
    }
    c->state = CONN_CLOSING;
    uv_read_stop((uv_stream_t *)&c->tcp);
    /* An in-flight write or shutdown is cancelled by uv_close; its
     * callback runs first and sees CONN_CLOSING. */
    uv_close((uv_handle_t *)&c->tcp, conn_free_cb);
}

/* OPEN/DRAINING -> CLOSING (a LINGERING connection is released). */
static void conn_do_close(struct core_conn *c)
{
    if (c->state == CONN_CLOSING)
        return;
    if (c->state != CONN_LINGERING)
        conn_leave(c);
    conn_release(c);
}

/* LINGERING: what the peer still sends is read and thrown away. One
 * buffer serves every connection of the thread's loop: the bytes are
 * never looked at. */
static void linger_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    static _Thread_local char discard[16 * 1024];
    (void)h;
    (void)suggested;
    *buf = uv_buf_init(discard, sizeof discard);
}

static void linger_read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    struct core_conn *c = (struct core_conn *)stream;
    (void)buf;
    if (c->state != CONN_LINGERING)
        return;
    if (nread < 0) { /* the peer's EOF (it has read everything), or a reset */
        conn_release(c);
        return;
    }
    c->lingered += (size_t)nread;
    if (c->lingered > LINGER_MAX_BYTES)
        conn_release(c);
}

static void linger_shutdown_cb(uv_shutdown_t *req, int status)
{
    struct core_conn *c = (struct core_conn *)req->handle;
    if (c->state == CONN_LINGERING && status < 0)
        conn_release(c);
}

/* DRAINING with everything written -> LINGERING (or CLOSING when it
 * cannot linger). Closing a TCP socket whose receive queue still holds
 * input makes the kernel send a reset instead of a FIN, and a reset
 * makes the peer's kernel drop what it had received but not yet read:
 * the very reply the connection was drained for (an error, a FIX
 * Logout). So the write side is shut (FIN after the reply) and the input
 * read and discarded until the peer closes, as Apache's lingering close. */
static void conn_linger(struct core_conn *c)
{
    struct core_server *s = c->srv;
    conn_leave(c);
    core_buf_free(&c->in);
    core_buf_free(&c->out);
    core_buf_free(&c->wbuf);
    c->in_start = 0;
    if (s->stopped || s->nlingering >= LINGER_MAX_CONNS ||
        uv_shutdown(&c->sreq, (uv_stream_t *)&c->tcp, linger_shutdown_cb) != 0) {
        conn_release(c);
        return;
    }
    c->state = CONN_LINGERING;
    c->linger_until_ms = uv_now(s->loop) + LINGER_MS;
    c->lingered = 0;
    core_list_push_back(&s->lingering, &c->link);
    s->nlingering++;
    if (uv_read_start((uv_stream_t *)&c->tcp, linger_alloc_cb, linger_read_cb))
        conn_release(c);
}

void core_conn_close(struct core_conn *c)
{
    if (c->in_callback) {
        c->close_pending = true;
        if (c->state == CONN_OPEN)
            c->state = CONN_DRAINING; /* stops the protocol's loop */
        return;
    }
    conn_do_close(c);
}

static size_t pending_output(const struct core_conn *c)
{
    return (c->writing ? c->wbuf.len - c->woff : 0) + c->out.len;
}

static void write_cb(uv_write_t *req, int status);

/* Start writing `out`. Returns 0 or CORE_ECLOSED if the connection must
 * go (the caller closes it). */
static int conn_start_write(struct core_conn *c)
{
    struct core_server *s = c->srv;
    if (c->writing || c->out.len == 0)
        return 0;
    uv_buf_t b = uv_buf_init(c->out.data, (unsigned)c->out.len);
    int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    if (n == UV_EAGAIN || n == UV_ENOSYS)
        n = 0;
    if (n < 0)
        return CORE_ECLOSED;
    s->stats.total_net_output_bytes += (uint64_t)n;
    if ((size_t)n == c->out.len) {
        c->out.len = 0;
        if (c->out.cap > SHRINK_ABOVE)
            core_buf_free(&c->out);
        return 0;
    }
    /* The socket is full: hand the rest to libuv, and collect new replies
     * in the other buffer meanwhile (invariant 2). */
    struct core_buf t = c->wbuf;
    c->wbuf = c->out;
    c->out = t;
    c->out.len = 0;
    c->woff = (size_t)n;
    uv_buf_t rest = uv_buf_init(c->wbuf.data + n, (unsigned)(c->wbuf.len - (size_t)n));
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &rest, 1, write_cb))
        return CORE_ECLOSED;
    c->writing = true;
    return 0;
}

/* Redis's checkClientOutputBufferLimits: over the hard limit, or over the
 * soft limit for longer than soft_s seconds (checked as output is added). */
static bool over_output_limit(struct core_conn *c)
{
    const struct core_server_limits *l = &c->srv->limits;
    int64_t hard = c->own_limit ? c->out_hard : l->output_buf_limit;
    int64_t soft = c->own_limit ? c->out_soft : l->output_soft_limit;
    int64_t soft_s = c->own_limit ? c->out_soft_s : l->output_soft_seconds;
    size_t pending = pending_output(c);
    if (hard > 0 && pending > (size_t)hard)
        return true;
    if (soft <= 0 || pending <= (size_t)soft) {
        c->soft_since_ms = 0;
        return false;
    }
    uint64_t now = uv_now(c->srv->loop);
    if (!c->soft_since_ms) { /* first seen above: the clock starts */
        c->soft_since_ms = now ? now : 1;
        return false;
    }
    return now - c->soft_since_ms > (uint64_t)soft_s * 1000;
}

void core_conn_set_output_limit(struct core_conn *c, int64_t hard, int64_t soft, int64_t soft_s)
{
    c->own_limit = hard >= 0;
    c->out_hard = hard;
    c->out_soft = soft;
    c->out_soft_s = soft_s;
    c->soft_since_ms = 0;
}

/* ------------------------------------------------- the clients' budget */

static size_t conn_mem(const struct core_conn *c)
{
    return c->in.cap + c->out.cap + c->wbuf.cap;
}

static void account(struct core_conn *c)
{
    size_t m = conn_mem(c);
    c->srv->clients_mem = c->srv->clients_mem - c->accounted + m;
    c->accounted = m;
}

static void evict_cb(uv_idle_t *h)
{
    struct core_server *s = h->data;
    uv_idle_stop(h);
    s->evict_scheduled = false;
    struct core_list *l, *tmp;
    core_list_foreach_safe(l, tmp, &s->conns)
    {
        struct core_conn *c = conn_of(l);
        if (c->evicting)
            core_conn_close(c);
    }
}

/* Take x out of the budget now (invariant 4). A connection inside its
 * on_data closes when on_data returns; another one stops reading, drops
 * its unsent output and unread input at once and is closed from the
 * evict handle, outside any callback, so that no caller up the stack
 * finds its application state freed under it. */
static void evict(struct core_server *s, struct core_conn *x)
{
    s->stats.evicted_clients++;
    CORE_WARN("Evicting client id=%llu addr=%s: clients use %zu bytes, more than "
              "maxmemory-clients (%lld); this one %zu",
              (unsigned long long)x->id, x->peer, s->clients_mem,
              (long long)s->limits.clients_mem_limit, x->accounted);
    x->evicting = true;
    if (x->in_callback) {
        core_conn_close(x);
    } else {
        uv_read_stop((uv_stream_t *)&x->tcp);
        core_buf_free(&x->out);
        core_buf_free(&x->in);
        x->in_start = 0;
        if (!s->evict_scheduled) {
            s->evict_scheduled = true;
            uv_idle_start(&s->evict_idle, evict_cb);
        }
    }
    s->clients_mem -= x->accounted;
    x->accounted = 0;
}

/* Redis 7's maxmemory-clients: while the clients' buffers together are
 * over the budget, the biggest client goes first. O(connections) per
 * eviction; evictions are rare. */
static void enforce_budget(struct core_server *s)
{
    int64_t lim = s->limits.clients_mem_limit;
    while (lim > 0 && s->clients_mem > (size_t)lim) {
        struct core_conn *big = NULL;
        struct core_list *l;
        core_list_foreach(l, &s->conns)
        {
            struct core_conn *x = conn_of(l);
            if (!x->no_evict && !x->evicting && x->state != CONN_CLOSING &&
                (!big || x->accounted > big->accounted))
                big = x;
        }
        if (!big || big->accounted == 0)
            return;
        evict(s, big);
    }
}

void core_conn_set_no_evict(struct core_conn *c, bool on)
{
    c->no_evict = on;
}

size_t core_server_clients_memory(const struct core_server *s)
{
    return s->clients_mem;
}

int core_conn_flush(struct core_conn *c)
{
    if (c->state == CONN_CLOSING || c->state == CONN_LINGERING || c->close_pending)
        return CORE_ECLOSED;
    if (c->out.oom || conn_start_write(c)) {
        core_conn_close(c);
        return CORE_ECLOSED;
    }
    if (over_output_limit(c)) {
        c->srv->stats.closed_by_output_limit++;
        CORE_DEBUG("closing client id=%llu addr=%s: output buffer limit reached",
                   (unsigned long long)c->id, c->peer);
        core_conn_close(c);
        return CORE_ECLOSED;
    }
    if (c->state == CONN_DRAINING && !c->writing && c->out.len == 0 && !c->in_callback) {
        conn_linger(c);
        return 0;
    }
    if (!c->evicting) {
        account(c);
        enforce_budget(c->srv);
        if (c->evicting)
            return CORE_ECLOSED;
    }
    return 0;
}

static void write_cb(uv_write_t *req, int status)
{
    struct core_conn *c = (struct core_conn *)req->handle;
    c->writing = false;
    if (c->state == CONN_CLOSING)
        return;
    if (status < 0) {
        conn_do_close(c);
        return;
    }
    c->srv->stats.total_net_output_bytes += c->wbuf.len - c->woff;
    c->wbuf.len = 0;
    c->woff = 0;
    if (c->wbuf.cap > SHRINK_ABOVE)
        core_buf_free(&c->wbuf);
    core_conn_flush(c);
}

void core_conn_close_after_reply(struct core_conn *c)
{
    if (c->state != CONN_OPEN)
        return;
    c->state = CONN_DRAINING;
    uv_read_stop((uv_stream_t *)&c->tcp);
    if (!c->in_callback)
        core_conn_flush(c);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct core_conn *c = (struct core_conn *)h;
    struct core_buf *in = &c->in;
    (void)suggested;
    if (in->cap - in->len < IN_MIN_FREE && c->in_start > 0) {
        /* Compact: move the unconsumed tail to the front (invariant 3). */
        memmove(in->data, in->data + c->in_start, in->len - c->in_start);
        in->len -= c->in_start;
        c->in_start = 0;
    }
    if (in->cap - in->len < IN_MIN_FREE) {
        size_t need = in->cap ? in->cap : IN_INITIAL; /* doubles the buffer */
        if (!core_buf_reserve(in, need)) {
            in->oom = false; /* a read of 0 bytes: libuv reports UV_ENOBUFS */
            *buf = uv_buf_init(NULL, 0);
            return;
        }
    }
    *buf = uv_buf_init(in->data + in->len, (unsigned)(in->cap - in->len));
}

static void deliver_input(struct core_conn *c);

/* Once per loop iteration while spinning (an active idle handle makes
 * libuv poll with a zero timeout): one clock read. */
static void spin_cb(uv_idle_t *h)
{
    struct core_server *s = h->data;
    uint64_t now = uv_hrtime();
    if (s->input_seen) {
        s->input_seen = false;
        s->spin_since = now;
    } else if (now - s->spin_since > (uint64_t)s->limits.busy_poll_us * 1000) {
        uv_idle_stop(h);
        s->spinning = false;
    }
}

static void read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    struct core_conn *c = (struct core_conn *)stream;
    struct core_server *s = c->srv;
    (void)buf;
    if (nread <= 0) {
        if (nread < 0) /* EOF, reset or ENOBUFS */
            conn_do_close(c);
        return;
    }
    if (c->state != CONN_OPEN)
        return;
    s->stats.total_net_input_bytes += (uint64_t)nread;
    c->in.len += (size_t)nread;
    c->last_active_ms = uv_now(s->loop);
    if (s->limits.busy_poll_us > 0) {
        s->input_seen = true;
        if (!s->spinning) {
            s->spinning = true;
            s->spin_since = uv_hrtime();
            uv_idle_start(&s->spin_idle, spin_cb);
        }
    }
    deliver_input(c);
}

/* Hand the unconsumed input to on_data, then apply the limits and flush
 * (with defer_flush: queue the flush for flush_check). */
static void deliver_input(struct core_conn *c)
{
    struct core_server *s = c->srv;
    c->in_callback = true;
    size_t avail = c->in.len - c->in_start;
    size_t used = s->ops->on_data(c, c->in.data + c->in_start, avail);
    c->in_callback = false;
    if (used > avail)
        used = avail;
    c->in_start += used;
    if (c->in_start == c->in.len) {
        c->in_start = c->in.len = 0;
        if (c->in.cap > SHRINK_ABOVE)
            core_buf_free(&c->in);
    }
    if (c->close_pending) {
        conn_do_close(c);
        return;
    }
    size_t left = c->in.len - c->in_start;
    if (c->state == CONN_OPEN && left > (size_t)s->limits.query_buf_limit) {
        s->stats.closed_by_query_limit++;
        CORE_WARN("Closing client id=%llu addr=%s that reached max query buffer length (%zu)",
                  (unsigned long long)c->id, c->peer, left);
        conn_do_close(c);
        return;
    }
    if (s->limits.defer_flush) {
        if (!core_list_linked(&c->flush_link))
            core_list_push_back(&s->flush_queue, &c->flush_link);
        return;
    }
    core_conn_flush(c);
}

/* After the loop has handled every event of this poll, write the replies
 * they produced (Redis's beforeSleep does the same), one write each. */
static void flush_check_cb(uv_check_t *h)
{
    struct core_server *s = h->data;
    while (!core_list_empty(&s->flush_queue)) {
        struct core_list *l = core_list_first(&s->flush_queue);
        core_list_remove(l);
        core_conn_flush(CORE_CONTAINER_OF(l, struct core_conn, flush_link));
    }
}

void core_conn_redeliver(struct core_conn *c)
{
    if (c->state != CONN_OPEN || c->in_callback)
        return;
    if (c->in.len > c->in_start)
        deliver_input(c);
    else
        core_conn_flush(c);
}

static void reject_close_cb(uv_handle_t *h)
{
    free(h);
}

static void on_connection(uv_stream_t *listener, int status)
{
    struct core_server *s = listener->data;
    if (status < 0 || s->stopped)
        return;
    struct core_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return;
    core_list_init(&c->link);
    int li = (int)((union stream *)listener - s->listeners);
    c->unix_sock = s->listener_unix[li];
    if (c->unix_sock ? uv_pipe_init(s->loop, &c->tcp.pipe, 0) : uv_tcp_init(s->loop, &c->tcp.tcp)) {
        free(c);
        return;
    }
    if (uv_accept(listener, (uv_stream_t *)&c->tcp)) {
        uv_close((uv_handle_t *)&c->tcp, reject_close_cb);
        return;
    }
    s->stats.total_connections++;
    c->srv = s;
    core_list_init(&c->flush_link);
    if ((int64_t)s->stats.connected >= s->limits.maxclients) {
        /* As Redis's acceptCommonHandler: tell the client, then close
         * (lingering, so that a client that sent its first request at
         * once still reads why). */
        s->stats.rejected_connections++;
        if (s->reject_len) {
            uv_buf_t b = uv_buf_init(s->reject_msg, (unsigned)s->reject_len);
            uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
        }
        conn_linger(c);
        return;
    }
    c->id = s->next_id++;
    c->created_ms = c->last_active_ms = uv_now(s->loop);
    if (c->unix_sock) {
        size_t n = sizeof(c->local) - 5;
        memcpy(c->local, "unix:", 5);
        if (uv_pipe_getsockname(&c->tcp.pipe, c->local + 5, &n) != 0)
            c->local[5] = '\0';
        snprintf(c->peer, sizeof(c->peer), "unix:%llu", (unsigned long long)c->id);
    } else {
        uv_tcp_nodelay(&c->tcp.tcp, 1);
        if (s->limits.tcp_keepalive_s > 0) /* Redis's tcp-keepalive */
            uv_tcp_keepalive(&c->tcp.tcp, 1, (unsigned)s->limits.tcp_keepalive_s);
        struct sockaddr_storage ss;
        int len = sizeof(ss);
        if (uv_tcp_getpeername(&c->tcp.tcp, (struct sockaddr *)&ss, &len) == 0)
            format_addr(&ss, c->peer, sizeof(c->peer));
        len = sizeof(ss);
        if (uv_tcp_getsockname(&c->tcp.tcp, (struct sockaddr *)&ss, &len) == 0)
            format_addr(&ss, c->local, sizeof(c->local));
    }
    if (s->ops->on_open && s->ops->on_open(c, s->app)) {
        c->state = CONN_CLOSING;
        uv_close((uv_handle_t *)&c->tcp, conn_free_cb);
        return;
    }
    c->accepted = true;
    core_list_push_back(&s->conns, &c->link);
    s->stats.connected++;
    if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb))
        conn_do_close(c);
}

static void cron_cb(uv_timer_t *t)
{
    struct core_server *s = t->data;
    uint64_t now = uv_now(s->loop);
    while (!core_list_empty(&s->lingering)) { /* oldest first: deadlines in order */
        struct core_conn *c = conn_of(core_list_first(&s->lingering));
        if (c->linger_until_ms > now)
            break;
        conn_release(c);
    }
    int64_t timeout = s->limits.idle_timeout_s;
    if (timeout <= 0)
        return;
    struct core_list *l, *tmp;
    core_list_foreach_safe(l, tmp, &s->conns)
    {
        struct core_conn *c = conn_of(l);
        if (c->state == CONN_OPEN && now - c->last_active_ms > (uint64_t)timeout * 1000) {
            s->stats.closed_by_timeout++;
            conn_do_close(c);
        }
    }
}

int core_server_new(struct core_server **out, uv_loop_t *loop, const struct core_server_ops *ops,
                    void *app, const struct core_server_limits *limits, const char *reject_msg)
{
    struct core_server *s = calloc(1, sizeof(*s));
    if (!s)
        return CORE_ENOMEM;
    s->loop = loop;
    s->ops = ops;
    s->app = app;
    s->limits = *limits;
    s->next_id = 1;
    s->first_listening = -1;
    core_list_init(&s->conns);
    core_list_init(&s->lingering);
    if (reject_msg) {
        s->reject_msg = strdup(reject_msg);
        if (!s->reject_msg) {
            free(s);
            return CORE_ENOMEM;
        }
        s->reject_len = strlen(reject_msg);
    }
    uv_idle_init(loop, &s->evict_idle);
    s->evict_idle.data = s;
    core_list_init(&s->flush_queue);
    uv_check_init(loop, &s->flush_check);
    s->flush_check.data = s;
    uv_check_start(&s->flush_check, flush_check_cb);
    uv_unref((uv_handle_t *)&s->flush_check); /* it alone does not keep the loop alive */
    uv_idle_init(loop, &s->spin_idle);
    s->spin_idle.data = s;
    uv_timer_init(loop, &s->cron);
    s->cron.data = s;
    uv_timer_start(&s->cron, cron_cb, 1000, 1000);
    uv_unref((uv_handle_t *)&s->cron); /* the cron alone does not keep the loop alive */
    *out = s;
    return 0;
}

int core_server_listen(struct core_server *s, const char *host, int port)
{
    struct sockaddr_storage ss;
    int rc;
    if (strchr(host, ':'))
        rc = uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss);
    else
        rc = uv_ip4_addr(host, port, (struct sockaddr_in *)&ss);
    if (rc)
        return CORE_EINVAL;
    if (s->nlisteners == CORE_SERVER_MAX_LISTENERS || s->stopped)
        return CORE_ERANGE;
    uv_tcp_t *l = &s->listeners[s->nlisteners].tcp;
    s->listener_unix[s->nlisteners] = false;
    if (uv_tcp_init(s->loop, l))
        return CORE_ENOMEM;
    s->nlisteners++;
    l->data = s;
    /* IPv6 listeners take IPv6 only, as Redis's: an IPv4 address of the
     * same port may be another listener. */
    rc = uv_tcp_bind(l, (struct sockaddr *)&ss, ss.ss_family == AF_INET6 ? UV_TCP_IPV6ONLY : 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)l, 511, on_connection);
    if (rc) {
        /* The handle stays in listeners[] (closed by core_server_stop)
         * but is never counted as listening. */
        return core_from_uv(rc);
    }
    s->listening = true;
    if (s->first_listening < 0)
        s->first_listening = s->nlisteners - 1;
    return 0;
}

/* A socket file left by a process that died: nobody accepts on it. */
static bool stale_socket(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISSOCK(st.st_mode))
        return false;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool stale = connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && errno == ECONNREFUSED;
    close(fd);
    return stale;
}

int core_server_listen_unix(struct core_server *s, const char *path, unsigned mode)
{
    if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return CORE_ETOOBIG;
    if (s->nlisteners == CORE_SERVER_MAX_LISTENERS || s->stopped)
        return CORE_ERANGE;
    uv_pipe_t *l = &s->listeners[s->nlisteners].pipe;
    s->listener_unix[s->nlisteners] = true;
    if (uv_pipe_init(s->loop, l, 0))
        return CORE_ENOMEM;
    s->nlisteners++;
    l->data = s;
    if (stale_socket(path))
        unlink(path);
    /* Created without any permission for others, then given `mode`: no
     * moment in which a foreign user could connect. The process is
     * single-threaded where files are made, so the umask swap is safe. */
    mode_t old = umask(0177);
    int rc = uv_pipe_bind(l, path);
    umask(old);
    if (rc == 0 && chmod(path, (mode_t)mode) != 0)
        rc = UV_EACCES;
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)l, 511, on_connection);
    if (rc)
        return core_from_uv(rc);
    s->listening = true;
    return 0;
}

int core_server_port(const struct core_server *s)
{
    if (!s->listening || s->first_listening < 0)
        return CORE_ESTATE;
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    if (uv_tcp_getsockname(&s->listeners[s->first_listening].tcp, (struct sockaddr *)&ss, &len))
        return CORE_EIO;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

void core_server_set_limits(struct core_server *s, const struct core_server_limits *limits)
{
    s->limits = *limits; /* connections already queued are flushed by flush_check either way */
}

static void handle_closed_cb(uv_handle_t *h)
{
    (void)h;
}

void core_server_stop(struct core_server *s)
{
    if (s->stopped)
        return;
    s->stopped = true;
    for (int i = 0; i < s->nlisteners; i++)
        uv_close((uv_handle_t *)&s->listeners[i], handle_closed_cb);
    uv_close((uv_handle_t *)&s->cron, handle_closed_cb);
    uv_close((uv_handle_t *)&s->evict_idle, handle_closed_cb);
    uv_close((uv_handle_t *)&s->flush_check, handle_closed_cb);
    uv_close((uv_handle_t *)&s->spin_idle, handle_closed_cb);
    while (!core_list_empty(&s->conns)) {
        struct core_conn *c = conn_of(core_list_first(&s->conns));
        if (c->in_callback) {
            /* The connection whose request stopped us: it is still in use
             * by on_data, so it closes (and gets on_close) when on_data
             * returns; take it off the list now. */
            core_list_remove(&c->link);
            s->stats.connected--;
            c->close_pending = true;
            continue;
        }
        conn_do_close(c);
    }
    while (!core_list_empty(&s->lingering))
        conn_release(conn_of(core_list_first(&s->lingering)));
}

void core_server_free(struct core_server *s)
{
    if (!s)
        return;
    free(s->reject_msg);
    free(s);
}

void core_server_get_stats(const struct core_server *s, struct core_server_stats *out)
{
    *out = s->stats;
}

void core_server_foreach(struct core_server *s, void (*fn)(struct core_conn *c, void *arg),
                         void *arg)
{
    struct core_list *l, *tmp;
    core_list_foreach_safe(l, tmp, &s->conns)
    {
        fn(conn_of(l), arg);
    }
}

struct core_conn *core_server_find(struct core_server *s, uint64_t id)
{
    struct core_list *l;
    core_list_foreach(l, &s->conns)
    {
        if (conn_of(l)->id == id)
            return conn_of(l);
    }
    return NULL;
}

struct core_buf *core_conn_out(struct core_conn *c)
{
    return &c->out;
}

bool core_conn_closing(const struct core_conn *c)
{
    return c->state != CONN_OPEN || c->close_pending;
}

void core_conn_set_data(struct core_conn *c, void *data)
{
    c->data = data;
}

void *core_conn_data(const struct core_conn *c)
{
    return c->data;
}

uint64_t core_conn_id(const struct core_conn *c)
{
    return c->id;
}

struct core_server *core_conn_server(const struct core_conn *c)
{
    return c->srv;
}

const char *core_conn_peer(const struct core_conn *c)
{
    return c->peer;
}

const char *core_conn_local(const struct core_conn *c)
{
    return c->local;
}

int core_conn_fd(const struct core_conn *c)
{
    uv_os_fd_t fd = -1;
    uv_fileno((const uv_handle_t *)&c->tcp, &fd);
    return fd;
}

uint64_t core_conn_created_ms(const struct core_conn *c)
{
    return c->created_ms;
}

uint64_t core_conn_last_active_ms(const struct core_conn *c)
{
    return c->last_active_ms;
}

size_t core_conn_input_pending(const struct core_conn *c)
{
    return c->in.len - c->in_start;
}

size_t core_conn_input_capacity(const struct core_conn *c)
{
    return c->in.cap;
}

size_t core_conn_output_pending(const struct core_conn *c)
{
    return pending_output(c);
}
