/*
 * The order link (order_link.h): records over a stream socket, the engine
 * side on core/uv_server.h, the gateway side a reconnecting client.
 *
 * Engine-side connection states:
 *
 *   accepted --(Unix: peer uid not allowed)--> closed (refused)
 *   accepted --hello ok--> open --record--> on_record (route gw -> conn)
 *   accepted --hello bad / record first--> closed (refused)
 *   open --bad record--> closed (bad_records)
 *
 * Gateway-side states:
 *
 *   down --timer--> connecting --ok: hello queued--> up --EOF/error--> down
 *                        '--failure--> down (timer restarted)
 */
#include "edumatcher/bus/order_link.h"

#include "core/buf.h"
#include "core/byte.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/uv_server.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define ROUTES       65536 /* gateway ids routed at most (a power of two) */
#define OUT_LIMIT    (64u << 20)
#define CLIENT_LIMIT (16u << 20) /* queued towards the engine at most */
#define READ_CHUNK   (64u * 1024)

/* ---- records ---- */

int em_link_decode(const uint8_t *buf, size_t len, struct em_link_rec *out)
{
    if (len < EM_LINK_HDR)
        return CORE_EINCOMPLETE;
    uint32_t n = (uint32_t)core_get_le(buf, 4);
    size_t gl = buf[4];
    if (n < 1 || gl > EM_LINK_GW_MAX || n - 1 < gl || n - 1 - gl > EM_LINK_PAYLOAD_MAX)
        return CORE_EPROTO;
    if (len - 4 < n)
        return CORE_EINCOMPLETE;
    out->gw = (const char *)buf + EM_LINK_HDR;
    out->gwlen = gl;
    out->payload = buf + EM_LINK_HDR + gl;
    out->len = n - 1 - gl;
    return (int)(4 + n);
}

size_t em_link_encode_header(uint8_t *out, const char *gw, size_t gwlen, size_t len)
{
    core_put_le(out, 1 + gwlen + len, 4);
    out[4] = (uint8_t)gwlen;
    memcpy(out + EM_LINK_HDR, gw, gwlen);
    return EM_LINK_HDR + gwlen;
}

static int append_record(struct core_buf *b, const char *gw, size_t gwlen, const void *payload,
                         size_t len)
{
    if (gwlen > EM_LINK_GW_MAX || len > EM_LINK_PAYLOAD_MAX)
        return CORE_EINVAL;
    char *p = core_buf_reserve(b, EM_LINK_HDR + gwlen + len);
    if (!p)
        return CORE_ENOMEM;
    size_t h = em_link_encode_header((uint8_t *)p, gw, gwlen, len);
    if (len)
        memcpy(p + h, payload, len);
    b->len += h + len;
    return 0;
}

/* Endpoints: "unix:<path>", "tcp://<host>:<port>" ("[v6]" in brackets). */
static int parse_endpoint(const char *ep, bool *is_unix, char *path, size_t pathcap,
                          struct sockaddr_storage *ss)
{
    if (strncmp(ep, "unix:", 5) == 0) {
        *is_unix = true;
        const char *p = ep + 5;
        if (!*p)
            return CORE_EINVAL;
        if (strlen(p) >= pathcap || strlen(p) >= sizeof(((struct sockaddr_un *)0)->sun_path))
            return CORE_ETOOBIG;
        strcpy(path, p);
        return 0;
    }
    if (strncmp(ep, "tcp://", 6) != 0)
        return CORE_EINVAL;
    *is_unix = false;
    const char *h = ep + 6, *colon = strrchr(h, ':');
    if (!colon || colon == h)
        return CORE_EINVAL;
    char host[64];
    size_t hl = (size_t)(colon - h);
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']')
        h++, hl -= 2;
    if (hl >= sizeof host)
        return CORE_EINVAL;
    memcpy(host, h, hl);
    host[hl] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || end == colon + 1 || port < 0 || port > 65535)
        return CORE_EINVAL;
    snprintf(path, pathcap, "%s", host);
    if (strchr(host, ':'))
        return uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss) ? CORE_EINVAL : 0;
    return uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss) ? CORE_EINVAL : 0;
}

static bool same_key(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    /* constant time in the key's length: no byte-by-byte timing oracle */
    unsigned diff = al != bl;
    for (size_t i = 0; i < al && i < bl; i++)
        diff |= (unsigned)(a[i] ^ b[i]);
    return diff == 0;
}

/* ---- the engine side ---- */

struct lconn {
    struct core_conn *c;
    uint64_t id; /* core_conn_id: the door the engine knows this gateway by */
    struct em_link_server *s;
    bool hello;
    bool dirty; /* in s->dirty */
};

struct route {
    struct lconn *lc;
    uint64_t gone_ns; /* its connection ended: on_gone at this time, unless it is back (0: none) */
    uint8_t len;
    char name[EM_LINK_GW_MAX];
};

struct em_link_server {
    struct em_link_server_config cfg;
    uint8_t key[EM_LINK_KEY_MAX];
    size_t keylen;
    bool is_unix;
    char path[256];
    struct core_server *srv;
    uv_check_t check;
    unsigned handled; /* records since the last on_batch */
    bool stopping;    /* em_link_server_stop: no on_gone */
    uv_timer_t gone_timer;
    uint32_t *pending; /* route indexes with gone_ns set (maybe stale) */
    size_t npending, pending_cap;
    struct route *routes;
    unsigned nroutes;
    struct lconn **dirty;
    size_t ndirty, dirty_cap;
    struct em_link_stats st;
};

/* The route slot of gw: its own, or the empty one where it belongs
 * (NULL: the table is full). Entries are never removed, only emptied of
 * their connection, so probing stops at the first never-used slot. */
static struct route *route_slot(struct em_link_server *s, const char *gw, size_t gl)
{
    uint32_t i = core_fnv1a32(gw, gl) & (ROUTES - 1);
    for (unsigned n = 0; n < ROUTES; n++, i = (i + 1) & (ROUTES - 1)) {
        struct route *r = &s->routes[i];
        if (r->len == 0)
            return r;
        if (r->len == gl && memcmp(r->name, gw, gl) == 0)
            return r;
    }
    return NULL;
}

static int peer_allowed(struct em_link_server *s, struct core_conn *c)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(core_conn_fd(c), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return 0;
    for (unsigned i = 0; i < s->cfg.nallow; i++)
        if (s->cfg.allow_uid[i] == (uint32_t)cred.uid)
            return 1;
    CORE_WARN("order link: refused a connection from uid %u (pid %d)", (unsigned)cred.uid,
              (int)cred.pid);
    return 0;
}

static int srv_on_open(struct core_conn *c, void *app)
{
    struct em_link_server *s = app;
    if (s->is_unix && !peer_allowed(s, c)) {
        s->st.refused++;
        return CORE_ESTATE;
    }
    struct lconn *lc = calloc(1, sizeof *lc);
    if (!lc)
        return CORE_ENOMEM;
    lc->c = c;
    lc->id = core_conn_id(c);
    lc->s = s;
    core_conn_set_data(c, lc);
    s->st.accepted++;
    s->st.connections++;
    return 0;
}

static size_t srv_on_data(struct core_conn *c, char *data, size_t len)
{
    struct lconn *lc = core_conn_data(c);
    struct em_link_server *s = lc->s;
    size_t off = 0;
    while (off < len && !core_conn_closing(c)) {
        struct em_link_rec r;
        int n = em_link_decode((const uint8_t *)data + off, len - off, &r);
        if (n == CORE_EINCOMPLETE)
            break;
        if (n < 0) {
            s->st.bad_records++;
            core_conn_close(c);
            return len;
        }
        off += (size_t)n;
        if (!lc->hello) {
            /* the hello: gw empty, the key on TCP */
            if (r.gwlen != 0 || (!s->is_unix && !same_key(r.payload, r.len, s->key, s->keylen))) {
                s->st.refused++;
                CORE_WARN("order link: %s: no valid hello; closed", core_conn_peer(c));
                core_conn_close(c);
                return len;
            }
            lc->hello = true;
            continue;
        }
        if (r.gwlen == 0) {
            s->st.bad_records++;
            core_conn_close(c);
            return len;
        }
        /* routed here while on_record runs (a reply the engine publishes
         * inside it comes here), kept only when the engine takes the
         * record as gw's: one that another door holds leaves the route */
        struct route *rt = route_slot(s, r.gw, r.gwlen);
        struct lconn *was_lc = NULL;
        uint64_t was_gone = 0;
        if (rt) {
            if (rt->len == 0) {
                memcpy(rt->name, r.gw, r.gwlen);
                rt->len = (uint8_t)r.gwlen;
                s->nroutes++;
            }
            was_lc = rt->lc;
            was_gone = rt->gone_ns;
            rt->lc = lc;
            rt->gone_ns = 0; /* back within the grace: not gone */
        }
        s->st.records_in++;
        s->handled++;
        if (s->cfg.on_record(s->cfg.ctx, lc->id, r.gw, r.gwlen, r.payload, r.len) != 0 && rt) {
            rt->lc = was_lc;
            rt->gone_ns = was_gone;
        }
    }
    return off;
}

static bool gone_push(struct em_link_server *s, uint32_t i)
{
    if (s->npending == s->pending_cap) {
        size_t cap = s->pending_cap ? s->pending_cap * 2 : 16;
        uint32_t *p = realloc(s->pending, cap * sizeof *p);
        if (!p)
            return false; /* that gw is never reported gone (logged) */
        s->pending = p;
        s->pending_cap = cap;
    }
    s->pending[s->npending++] = i;
    return true;
}

/* The routes whose grace ended without their gw coming back: on_gone for
 * each (then on_batch, at the loop turn's check). */
static void on_gone_timer(uv_timer_t *t)
{
    struct em_link_server *s = t->data;
    uint64_t now = core_now_ns();
    size_t keep = 0;
    for (size_t k = 0; k < s->npending; k++) {
        struct route *r = &s->routes[s->pending[k]];
        if (!r->gone_ns || r->lc) { /* it came back */
            r->gone_ns = 0;
            continue;
        }
        if (now < r->gone_ns) {
            s->pending[keep++] = s->pending[k];
            continue;
        }
        r->gone_ns = 0;
        s->cfg.on_gone(s->cfg.ctx, r->name, r->len);
        s->handled++;
    }
    s->npending = keep;
    if (!keep)
        uv_timer_stop(t);
}

static void srv_on_close(struct core_conn *c)
{
    struct lconn *lc = core_conn_data(c);
    struct em_link_server *s = lc->s;
    /* the connection's routes are emptied, and on_gone is due for each
     * after the grace (gone_due): a gateway that only lost its link comes
     * back by then and sends for its gws again, which cancels it */
    bool notify = !s->stopping && s->cfg.on_gone;
    uint64_t due = core_now_ns() + s->cfg.gone_grace_ms * 1000000u;
    for (unsigned i = 0; i < ROUTES; i++) {
        struct route *r = &s->routes[i];
        if (r->lc != lc)
            continue;
        r->lc = NULL;
        if (notify && !r->gone_ns && gone_push(s, i))
            r->gone_ns = due;
    }
    if (s->npending && !uv_is_active((uv_handle_t *)&s->gone_timer))
        uv_timer_start(&s->gone_timer, on_gone_timer, s->cfg.gone_grace_ms, 50);
    if (lc->dirty)
        for (size_t i = 0; i < s->ndirty; i++)
            if (s->dirty[i] == lc) {
                s->dirty[i] = s->dirty[--s->ndirty];
                break;
            }
    s->st.connections--;
    free(lc);
}

static const struct core_server_ops srv_ops = {
    .on_open = srv_on_open, .on_data = srv_on_data, .on_close = srv_on_close};

void em_link_server_flush(struct em_link_server *s)
{
    /* taken off the list before the flush: a flush that fails closes the
     * connection, whose on_close must not find it listed */
    while (s->ndirty) {
        struct lconn *lc = s->dirty[--s->ndirty];
        lc->dirty = false;
        core_conn_flush(lc->c);
    }
}

/* After the loop turn's I/O: the batch end, then one write per peer. */
static void on_check(uv_check_t *h)
{
    struct em_link_server *s = h->data;
    if (s->handled) {
        unsigned n = s->handled;
        s->handled = 0;
        if (s->cfg.on_batch)
            s->cfg.on_batch(s->cfg.ctx, n);
    }
    em_link_server_flush(s);
}

/* Queue one record on lc's output (written at the loop turn's end). */
static int queue_reply(struct em_link_server *s, struct lconn *lc, const char *gw, size_t gwlen,
                       const void *payload, size_t len)
{
    if (!lc->dirty) {
        if (s->ndirty == s->dirty_cap) {
            size_t cap = s->dirty_cap ? s->dirty_cap * 2 : 16;
            struct lconn **d = realloc(s->dirty, cap * sizeof *d);
            if (!d) {
                s->st.dropped++;
                return CORE_ENOMEM;
            }
            s->dirty = d;
            s->dirty_cap = cap;
        }
        s->dirty[s->ndirty++] = lc;
        lc->dirty = true;
    }
    if (append_record(core_conn_out(lc->c), gw, gwlen, payload, len) != 0) {
        s->st.dropped++;
        return CORE_ENOMEM;
    }
    s->st.records_out++;
    return 0;
}

int em_link_reply(struct em_link_server *s, const char *gw, size_t gwlen, const void *payload,
                  size_t len)
{
    if (gwlen == 0 || gwlen > EM_LINK_GW_MAX || len > EM_LINK_PAYLOAD_MAX)
        return CORE_EINVAL;
    struct route *rt = route_slot(s, gw, gwlen);
    struct lconn *lc = rt && rt->len ? rt->lc : NULL;
    if (!lc || core_conn_closing(lc->c)) {
        s->st.unrouted++;
        return CORE_ENOTFOUND;
    }
    return queue_reply(s, lc, gw, gwlen, payload, len);
}

/* The open connection with that id (hello done), or NULL. */
static struct lconn *conn_by_id(struct em_link_server *s, uint64_t conn)
{
    struct core_conn *c = s->srv && !s->stopping ? core_server_find(s->srv, conn) : NULL;
    struct lconn *lc = c && !core_conn_closing(c) ? core_conn_data(c) : NULL;
    return lc && lc->hello ? lc : NULL;
}

int em_link_reply_conn(struct em_link_server *s, uint64_t conn, const char *gw, size_t gwlen,
                       const void *payload, size_t len)
{
    if (gwlen == 0 || gwlen > EM_LINK_GW_MAX || len > EM_LINK_PAYLOAD_MAX)
        return CORE_EINVAL;
    struct lconn *lc = conn_by_id(s, conn);
    if (!lc) {
        s->st.unrouted++;
        return CORE_ENOTFOUND;
    }
    return queue_reply(s, lc, gw, gwlen, payload, len);
}

bool em_link_server_conn_open(struct em_link_server *s, uint64_t conn)
{
    return conn_by_id(s, conn) != NULL;
}

int em_link_server_open(struct em_link_server **out, uv_loop_t *loop,
                        const struct em_link_server_config *cfg)
{
    struct em_link_server *s = calloc(1, sizeof *s);
    if (!s)
        return CORE_ENOMEM;
    s->cfg = *cfg;
    struct sockaddr_storage ss;
    int rc = parse_endpoint(cfg->endpoint, &s->is_unix, s->path, sizeof s->path, &ss);
    if (rc == 0 && !s->is_unix && (cfg->keylen == 0 || cfg->keylen > EM_LINK_KEY_MAX))
        rc = CORE_EINVAL; /* a TCP link is authenticated by its key only */
    if (rc) {
        free(s);
        return rc;
    }
    if (cfg->keylen)
        memcpy(s->key, cfg->key, cfg->keylen);
    s->keylen = cfg->keylen;
    s->cfg.key = NULL;
    if (s->cfg.nallow == 0) {
        s->cfg.allow_uid[0] = (uint32_t)getuid();
        s->cfg.nallow = 1;
    }
    s->routes = calloc(ROUTES, sizeof *s->routes);
    struct core_server_limits lim = {
        .maxclients = 1024, .query_buf_limit = 4 << 20, .output_buf_limit = OUT_LIMIT};
    if (!s->routes || core_server_new(&s->srv, loop, &srv_ops, s, &lim, NULL) != 0) {
        free(s->routes);
        free(s);
        return CORE_ENOMEM;
    }
    if (s->is_unix) {
        rc = core_server_listen_unix(s->srv, s->path, cfg->mode ? cfg->mode : 0600);
    } else {
        const char *host = s->path; /* parse_endpoint left the host there */
        int port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                            : ntohs(((struct sockaddr_in *)&ss)->sin_port);
        rc = core_server_listen(s->srv, host, port);
    }
    uv_check_init(loop, &s->check);
    s->check.data = s;
    uv_check_start(&s->check, on_check);
    uv_timer_init(loop, &s->gone_timer);
    s->gone_timer.data = s;
    if (rc) {
        em_link_server_stop(s);
        *out = s; /* freed by the caller after the loop ran the closes */
        return rc;
    }
    *out = s;
    return 0;
}

struct em_link_stats *em_link_server_stats(struct em_link_server *s)
{
    return &s->st;
}

void em_link_server_stop(struct em_link_server *s)
{
    if (!s || !s->srv || uv_is_closing((uv_handle_t *)&s->check))
        return;
    s->stopping = true; /* before the flush: a write failing now is no gateway gone */
    em_link_server_flush(s);
    core_server_stop(s->srv);
    uv_close((uv_handle_t *)&s->check, NULL);
    uv_close((uv_handle_t *)&s->gone_timer, NULL); /* what was due is not: we stop */
    if (s->is_unix)
        unlink(s->path);
}

void em_link_server_free(struct em_link_server *s)
{
    if (!s)
        return;
    core_server_free(s->srv);
    free(s->routes);
    free(s->dirty);
    free(s->pending);
    free(s);
}

/* ---- the gateway side ---- */

struct em_link_client {
    struct em_link_client_config cfg;
    uint8_t key[EM_LINK_KEY_MAX];
    uv_loop_t *loop;
    bool is_unix;
    char path[256];
    struct sockaddr_storage addr;
    union {
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } h;
    bool handle_open; /* h is initialised and not yet closed */
    bool up, closing, writing;
    uv_connect_t creq;
    uv_timer_t timer;
    uv_write_t wreq;
    struct core_buf in, out, wbuf;
    size_t woff;
    struct em_link_stats st;
};

static void cl_connect(struct em_link_client *c);

static void on_reconnect(uv_timer_t *t)
{
    cl_connect(t->data);
}

static void cl_handle_closed(uv_handle_t *h)
{
    struct em_link_client *c = h->data;
    c->handle_open = false;
    if (!c->closing)
        uv_timer_start(&c->timer, on_reconnect, c->cfg.reconnect_ms, 0);
}

/* The link is gone (or never came up): what was queued is lost. */
static void cl_down(struct em_link_client *c)
{
    bool was_up = c->up;
    c->up = false;
    c->writing = false;
    c->in.len = 0; /* what was being written (wbuf) is lost; out waits for the next link */
    if (c->handle_open && !uv_is_closing((uv_handle_t *)&c->h))
        uv_close((uv_handle_t *)&c->h, cl_handle_closed);
    if (was_up) {
        c->st.connections = 0;
        CORE_WARN("order link: lost %s; reconnecting", c->cfg.endpoint);
        if (c->cfg.on_state)
            c->cfg.on_state(c->cfg.ctx, false);
    }
}

static void cl_write_cb(uv_write_t *req, int status)
{
    struct em_link_client *c = req->data;
    c->writing = false;
    c->wbuf.len = 0;
    if (status < 0) {
        if (!c->closing)
            cl_down(c);
        return;
    }
    if (c->out.len && c->up)
        em_link_client_flush(c);
}

void em_link_client_flush(struct em_link_client *c)
{
    if (!c->up || c->writing || c->out.len == 0)
        return;
    uv_buf_t b = uv_buf_init(c->out.data, (unsigned)c->out.len);
    int n = uv_try_write((uv_stream_t *)&c->h, &b, 1);
    if (n == UV_EAGAIN)
        n = 0;
    if (n < 0) {
        cl_down(c);
        return;
    }
    if ((size_t)n == c->out.len) {
        c->out.len = 0;
        return;
    }
    /* the socket is full: libuv writes the rest, new records collect in
     * the other buffer meanwhile */
    struct core_buf t = c->wbuf;
    c->wbuf = c->out;
    c->out = t;
    c->out.len = 0;
    uv_buf_t rest = uv_buf_init(c->wbuf.data + n, (unsigned)(c->wbuf.len - (size_t)n));
    c->wreq.data = c;
    if (uv_write(&c->wreq, (uv_stream_t *)&c->h, &rest, 1, cl_write_cb) != 0) {
        cl_down(c);
        return;
    }
    c->writing = true;
}

static void cl_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct em_link_client *c = h->data;
    char *p = core_buf_reserve(&c->in, READ_CHUNK);
    *buf = uv_buf_init(p, p ? READ_CHUNK : 0);
}

static void cl_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    struct em_link_client *c = st->data;
    if (nread == 0)
        return;
    if (nread < 0) {
        cl_down(c);
        return;
    }
    c->in.len += (size_t)nread;
    size_t off = 0;
    unsigned handled = 0;
    while (c->up) {
        struct em_link_rec r;
        int n = em_link_decode((const uint8_t *)c->in.data + off, c->in.len - off, &r);
        if (n == CORE_EINCOMPLETE)
            break;
        if (n < 0) {
            c->st.bad_records++;
            CORE_WARN("order link: bad record from %s; reconnecting", c->cfg.endpoint);
            cl_down(c);
            return;
        }
        off += (size_t)n;
        c->st.records_in++;
        handled++;
        c->cfg.on_record(c->cfg.ctx, r.gw, r.gwlen, r.payload, r.len);
    }
    if (!c->up)
        return;
    memmove(c->in.data, c->in.data + off, c->in.len - off);
    c->in.len -= off;
    if (handled && c->cfg.on_batch)
        c->cfg.on_batch(c->cfg.ctx, handled);
}

static void cl_connected(uv_connect_t *req, int status)
{
    struct em_link_client *c = req->data;
    if (c->closing)
        return;
    if (status < 0) {
        cl_down(c);
        return;
    }
    if (c->is_unix == false)
        uv_tcp_nodelay(&c->h.tcp, 1);
    c->up = true;
    c->st.accepted++;
    c->st.connections = 1;
    /* the hello first, then what was queued while the link was down */
    c->wbuf.len = 0;
    append_record(&c->wbuf, "", 0, c->key, c->cfg.keylen);
    core_buf_append(&c->wbuf, c->out.data, c->out.len);
    struct core_buf t = c->out;
    c->out = c->wbuf;
    c->wbuf = t;
    c->wbuf.len = 0;
    if (c->out.oom) {
        cl_down(c);
        return;
    }
    if (uv_read_start((uv_stream_t *)&c->h, cl_alloc, cl_read) != 0) {
        cl_down(c);
        return;
    }
    em_link_client_flush(c);
    CORE_INFO("order link: connected to %s", c->cfg.endpoint);
    if (c->cfg.on_state && c->up)
        c->cfg.on_state(c->cfg.ctx, true);
}

static void cl_connect(struct em_link_client *c)
{
    if (c->closing || c->handle_open)
        return;
    c->creq.data = c;
    int rc;
    if (c->is_unix) {
        rc = uv_pipe_init(c->loop, &c->h.pipe, 0);
        c->h.pipe.data = c;
        c->handle_open = rc == 0;
        if (rc == 0)
            uv_pipe_connect(&c->creq, &c->h.pipe, c->path, cl_connected);
    } else {
        rc = uv_tcp_init(c->loop, &c->h.tcp);
        c->h.tcp.data = c;
        c->handle_open = rc == 0;
        if (rc == 0)
            rc = uv_tcp_connect(&c->creq, &c->h.tcp, (struct sockaddr *)&c->addr, cl_connected);
        if (rc && c->handle_open)
            uv_close((uv_handle_t *)&c->h, cl_handle_closed);
    }
    if (rc && !c->handle_open)
        uv_timer_start(&c->timer, on_reconnect, c->cfg.reconnect_ms, 0);
}

int em_link_client_open(struct em_link_client **out, uv_loop_t *loop,
                        const struct em_link_client_config *cfg)
{
    struct em_link_client *c = calloc(1, sizeof *c);
    if (!c)
        return CORE_ENOMEM;
    c->cfg = *cfg;
    c->loop = loop;
    int rc = parse_endpoint(cfg->endpoint, &c->is_unix, c->path, sizeof c->path, &c->addr);
    if (rc == 0 && cfg->keylen > EM_LINK_KEY_MAX)
        rc = CORE_EINVAL;
    if (rc) {
        free(c);
        return rc;
    }
    if (cfg->keylen)
        memcpy(c->key, cfg->key, cfg->keylen);
    c->cfg.key = NULL;
    if (!c->cfg.reconnect_ms)
        c->cfg.reconnect_ms = 100;
    uv_timer_init(loop, &c->timer);
    c->timer.data = c;
    cl_connect(c);
    *out = c;
    return 0;
}

int em_link_client_send(struct em_link_client *c, const char *gw, size_t gwlen, const void *payload,
                        size_t len)
{
    if (gwlen == 0 || gwlen > EM_LINK_GW_MAX || len > EM_LINK_PAYLOAD_MAX)
        return CORE_EINVAL;
    if (c->closing || c->out.len + (c->writing ? c->wbuf.len : 0) > CLIENT_LIMIT) {
        c->st.dropped++;
        return CORE_EAGAIN;
    }
    if (append_record(&c->out, gw, gwlen, payload, len) != 0) {
        c->st.dropped++;
        return CORE_EAGAIN;
    }
    c->st.records_out++;
    return 0;
}

bool em_link_client_up(const struct em_link_client *c)
{
    return c->up;
}

struct em_link_stats *em_link_client_stats(struct em_link_client *c)
{
    return &c->st;
}

void em_link_client_close(struct em_link_client *c)
{
    if (!c || c->closing)
        return;
    em_link_client_flush(c);
    c->closing = true;
    c->up = false;
    uv_close((uv_handle_t *)&c->timer, NULL);
    if (c->handle_open && !uv_is_closing((uv_handle_t *)&c->h))
        uv_close((uv_handle_t *)&c->h, cl_handle_closed);
}

void em_link_client_free(struct em_link_client *c)
{
    if (!c)
        return;
    core_buf_free(&c->in);
    core_buf_free(&c->out);
    core_buf_free(&c->wbuf);
    free(c);
}

/* ---- the key ---- */

int em_link_key_load(const char *path, bool create, uint8_t *key, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
        /* 32 random bytes as hex: printable, so an operator can copy it */
        uint8_t raw[32];
        int r = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        if (r < 0 || read(r, raw, sizeof raw) != (ssize_t)sizeof raw) {
            if (r >= 0)
                close(r);
            return CORE_EIO;
        }
        close(r);
        char hex[65];
        for (int i = 0; i < 32; i++)
            snprintf(hex + 2 * i, 3, "%02x", raw[i]);
        int w = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (w < 0)
            return core_from_errno(errno);
        bool ok = write(w, hex, 64) == 64 && fsync(w) == 0;
        close(w);
        if (!ok)
            return CORE_EIO;
        fd = open(path, O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0)
        return errno == ENOENT ? CORE_ENOTFOUND : core_from_errno(errno);
    ssize_t n = read(fd, key, cap);
    close(fd);
    if (n < 0)
        return CORE_EIO;
    while (n > 0 && (key[n - 1] == '\n' || key[n - 1] == '\r' || key[n - 1] == ' '))
        n--;
    return n > 0 ? (int)n : CORE_EINVAL;
}
