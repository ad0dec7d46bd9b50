/*
 * Raft transports: libraft's TCP transport with TCP_NODELAY, and one Raft
 * port per node shared by all its groups (gs_raft_mux). See
 * raft_transport.h for what each is and raft_glue.h for the mux's public
 * side.
 *
 * Ownership follows libraft's contract (raft/uv.h): a stream handed to
 * libraft (accepted, or connected and handshaken) is raft_malloc'd and
 * becomes libraft's, which closes and raft_frees it; until then it is
 * ours, and closed with free_raft_handle on every failure path.
 */
#include "gridsync/cluster/raft_transport.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/addr.h"
#include "core/error.h"
#include "core/log.h"

struct nodelay_connect {
    struct raft_uv_connect inner;
    struct raft_uv_connect *outer;
};

/* ---- One Raft port per node: a multiplexing transport -------------------
 *
 * Every group of a node shares one listening socket (gs_raft_mux). Each
 * group's transport (a mux channel, given to raft_uv_init) connects to a
 * peer's node port and opens with its own handshake, which names the
 * group; the node's listener reads exactly that handshake (never a byte
 * more: the buffers it hands libuv are sized to what is left of it), then
 * gives the stream to the channel registered for that group, as libraft's
 * own TCP transport does after its handshake. So a member's Raft address
 * is its node's, whatever its position in a group, and a node uses one
 * Raft port however many groups it belongs to.
 *
 * The handshake's format is in raft_batch.h (gs_mux_handshake_*).
 */

#define MUX_MAX_GROUPS 1024u /* groups per node at once */

struct gs_raft_mux {
    uv_loop_t *loop;
    uv_tcp_t listener;
    bool listening;
    struct gs_mux_channel *chans[MUX_MAX_GROUPS];
    struct mux_incoming *incoming; /* handshakes being read */
    void (*close_cb)(void *);
    void *close_data;
    unsigned closing;
};

/* The channel of a group number (any u32: numbers come from node names,
 * so they are sparse), or NULL. A node has a handful of groups. */
static struct gs_mux_channel *find_chan(struct gs_raft_mux *m, uint32_t group)
{
    for (unsigned i = 0; i < MUX_MAX_GROUPS; i++)
        if (m->chans[i] && m->chans[i]->group == group)
            return m->chans[i];
    return NULL;
}

struct mux_incoming {
    struct mux_incoming *next;
    struct gs_raft_mux *mux;
    uv_tcp_t *tcp; /* raft_malloc'd: libraft frees it once it owns it */
    char buf[GS_MUX_MAX];
    size_t got, need;
};

struct gs_mux_connect {
    struct gs_mux_connect *next;
    struct gs_mux_channel *chan;
    struct raft_uv_connect *req;
    uv_tcp_t *tcp; /* raft_malloc'd, handed to libraft on success */
    uv_connect_t connect;
    uv_write_t write;
    char hs[GS_MUX_MAX];
    int status;
};

/* A Raft address ("host:port" or "[v6]:port", core/addr.h) as a socket
 * address. */
static int parse_addr(const char *address, struct sockaddr_storage *sa)
{
    char host[64];
    int port;
    if (core_addr_split(address, strlen(address), host, sizeof(host), &port) != 0 ||
        core_addr_ip(host, port, sa) != 0)
        return RAFT_INVALID;
    return 0;
}

static void free_raft_handle(uv_handle_t *h)
{
    raft_free(h);
}

/* -- accepting side -- */

static void incoming_remove(struct mux_incoming *in)
{
    struct mux_incoming **pp = &in->mux->incoming;
    while (*pp && *pp != in)
        pp = &(*pp)->next;
    if (*pp)
        *pp = in->next;
}

static void incoming_drop(struct mux_incoming *in)
{
    incoming_remove(in);
    uv_close((uv_handle_t *)in->tcp, free_raft_handle);
    free(in);
}

static void incoming_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct mux_incoming *in = h->data;
    (void)suggested;
    *buf = uv_buf_init(in->buf + in->got, (unsigned)(in->need - in->got));
}

static void incoming_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct mux_incoming *in = s->data;
    (void)buf;
    if (nread < 0) {
        incoming_drop(in);
        return;
    }
    in->got += (size_t)nread;
    if (in->got < in->need)
        return;
    uint32_t group;
    uint64_t id;
    const char *addr;
    size_t alen;
    int rc = gs_mux_handshake_parse(in->buf, in->got, &group, &id, &addr, &alen, &in->need);
    if (rc == CORE_EINCOMPLETE)
        return; /* in->need grew: the address is still to come */
    if (rc != 0) {
        incoming_drop(in);
        return;
    }
    uv_read_stop(s);
    struct gs_mux_channel *ch = find_chan(in->mux, group);
    if (!ch || !ch->accept_cb || uv_now(in->mux->loop) < ch->deaf_until) {
        incoming_drop(in); /* that group is not (or no longer, or not yet) here */
        return;
    }
    incoming_remove(in);
    uv_tcp_t *tcp = in->tcp;
    char address[GS_MUX_ADDR_MAX + 1];
    memcpy(address, addr, alen);
    address[alen] = '\0';
    free(in);
    tcp->data = NULL;
    ch->accept_cb(&ch->t, id, address, (struct uv_stream_s *)tcp);
}

static void mux_on_connection(uv_stream_t *listener, int status)
{
    struct gs_raft_mux *m = listener->data;
    if (status < 0)
        return;
    uv_tcp_t *tcp = raft_malloc(sizeof(*tcp));
    struct mux_incoming *in = calloc(1, sizeof(*in));
    if (!tcp || !in) {
        raft_free(tcp);
        free(in);
        return;
    }
    uv_tcp_init(m->loop, tcp);
    if (uv_accept(listener, (uv_stream_t *)tcp) != 0) {
        uv_close((uv_handle_t *)tcp, free_raft_handle);
        free(in);
        return;
    }
    uv_tcp_nodelay(tcp, 1);
    in->mux = m;
    in->tcp = tcp;
    in->need = GS_MUX_HEADER;
    tcp->data = in;
    in->next = m->incoming;
    m->incoming = in;
    if (uv_read_start((uv_stream_t *)tcp, incoming_alloc, incoming_read) != 0)
        incoming_drop(in);
}

int gs_raft_mux_start(struct gs_raft_mux **out, struct uv_loop_s *loop, const char *address)
{
    struct sockaddr_storage sa;
    if (parse_addr(address, &sa) != 0)
        return CORE_EINVAL;
    struct gs_raft_mux *m = calloc(1, sizeof(*m));
    if (!m)
        return CORE_ENOMEM;
    m->loop = loop;
    uv_tcp_init(loop, &m->listener);
    m->listener.data = m;
    int rc = uv_tcp_bind(&m->listener, (struct sockaddr *)&sa, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&m->listener, 128, mux_on_connection);
    if (rc != 0) {
        CORE_WARN("raft: cannot listen on %s: %s", address, uv_strerror(rc));
        uv_close((uv_handle_t *)&m->listener, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
        free(m);
        return core_from_uv(rc);
    }
    m->listening = true;
    *out = m;
    return 0;
}

static void mux_closed(uv_handle_t *h)
{
    struct gs_raft_mux *m = h->data;
    void (*cb)(void *) = m->close_cb;
    void *data = m->close_data;
    free(m);
    if (cb)
        cb(data);
}

void gs_raft_mux_close(struct gs_raft_mux *m, void (*cb)(void *), void *data)
{
    m->close_cb = cb;
    m->close_data = data;
    while (m->incoming)
        incoming_drop(m->incoming);
    /* Its close callback runs after those of the handles closed above. */
    uv_close((uv_handle_t *)&m->listener, mux_closed);
}

/* -- a group's channel (the raft_uv_transport libraft sees) -- */

static int chan_init(struct raft_uv_transport *t, raft_id id, const char *address)
{
    struct gs_mux_channel *ch = (struct gs_mux_channel *)t;
    if (strlen(address) > GS_MUX_ADDR_MAX)
        return RAFT_NAMETOOLONG;
    ch->id = id;
    snprintf(ch->address, sizeof(ch->address), "%s", address);
    return 0;
}

static int chan_listen(struct raft_uv_transport *t, raft_uv_accept_cb cb)
{
    struct gs_mux_channel *ch = (struct gs_mux_channel *)t;
    if (find_chan(ch->mux, ch->group))
        return RAFT_DUPLICATEID;
    for (unsigned i = 0; i < MUX_MAX_GROUPS; i++) {
        if (!ch->mux->chans[i]) {
            ch->accept_cb = cb;
            ch->mux->chans[i] = ch;
            return 0;
        }
    }
    return RAFT_TOOMANY;
}

static void connect_remove(struct gs_mux_connect *c)
{
    struct gs_mux_connect **pp = &c->chan->connects;
    while (*pp && *pp != c)
        pp = &(*pp)->next;
    if (*pp)
        *pp = c->next;
}

/* The handle of a failed or cancelled connect is closed: report it. */
static void connect_closed(uv_handle_t *h)
{
    struct gs_mux_connect *c = h->data;
    c->req->cb(c->req, NULL, c->status);
    raft_free(h);
    free(c);
}

static void connect_fail(struct gs_mux_connect *c, int status)
{
    connect_remove(c);
    c->status = status;
    uv_close((uv_handle_t *)c->tcp, connect_closed);
}

static void connect_written(uv_write_t *w, int status)
{
    struct gs_mux_connect *c = w->data;
    if (c->status == RAFT_CANCELED)
        return; /* being closed: connect_closed reports it */
    if (status != 0) {
        connect_fail(c, RAFT_NOCONNECTION);
        return;
    }
    connect_remove(c);
    uv_tcp_t *tcp = c->tcp;
    struct raft_uv_connect *req = c->req;
    free(c);
    tcp->data = NULL;
    req->cb(req, (struct uv_stream_s *)tcp, 0);
}

static void connect_done(uv_connect_t *cr, int status)
{
    struct gs_mux_connect *c = cr->data;
    if (c->status == RAFT_CANCELED)
        return;
    if (status != 0) {
        connect_fail(c, RAFT_NOCONNECTION);
        return;
    }
    uv_tcp_nodelay(c->tcp, 1);
    struct gs_mux_channel *ch = c->chan;
    size_t n = gs_mux_handshake_encode(c->hs, ch->group, ch->id, ch->address);
    uv_buf_t b = uv_buf_init(c->hs, (unsigned)n);
    c->write.data = c;
    if (uv_write(&c->write, (uv_stream_t *)c->tcp, &b, 1, connect_written) != 0)
        connect_fail(c, RAFT_NOCONNECTION);
}

static int chan_connect(struct raft_uv_transport *t, struct raft_uv_connect *req, raft_id id,
                        const char *address, raft_uv_connect_cb cb)
{
    struct gs_mux_channel *ch = (struct gs_mux_channel *)t;
    struct sockaddr_storage sa;
    (void)id;
    if (parse_addr(address, &sa) != 0)
        return RAFT_NOCONNECTION;
    struct gs_mux_connect *c = calloc(1, sizeof(*c));
    uv_tcp_t *tcp = raft_malloc(sizeof(*tcp));
    if (!c || !tcp) {
        free(c);
        raft_free(tcp);
        return RAFT_NOMEM;
    }
    req->cb = cb;
    c->chan = ch;
    c->req = req;
    c->tcp = tcp;
    uv_tcp_init(ch->mux->loop, tcp);
    tcp->data = c;
    c->connect.data = c;
    if (uv_tcp_connect(&c->connect, tcp, (struct sockaddr *)&sa, connect_done) != 0) {
        uv_close((uv_handle_t *)tcp, free_raft_handle);
        free(c);
        return RAFT_NOCONNECTION;
    }
    c->next = ch->connects;
    ch->connects = c;
    return 0;
}

static void chan_deferred_close(uv_handle_t *h)
{
    struct gs_mux_channel *ch = h->data;
    if (ch->close_cb)
        ch->close_cb(&ch->t);
}

static void chan_close(struct raft_uv_transport *t, raft_uv_transport_close_cb cb)
{
    struct gs_mux_channel *ch = (struct gs_mux_channel *)t;
    ch->close_cb = cb;
    for (unsigned i = 0; i < MUX_MAX_GROUPS; i++)
        if (ch->mux->chans[i] == ch)
            ch->mux->chans[i] = NULL;
    ch->accept_cb = NULL;
    while (ch->connects) {
        struct gs_mux_connect *c = ch->connects;
        ch->connects = c->next;
        c->status = RAFT_CANCELED;
        uv_close((uv_handle_t *)c->tcp, connect_closed);
    }
    /* Close callbacks run in order: this one after the connects'. */
    uv_close((uv_handle_t *)&ch->defer, chan_deferred_close);
}

int gs_mux_channel_init(struct gs_mux_channel *ch, struct gs_raft_mux *m, uint32_t group)
{
    ch->mux = m;
    ch->group = group;
    ch->t.data = ch;
    ch->t.init = chan_init;
    ch->t.listen = chan_listen;
    ch->t.connect = chan_connect;
    ch->t.close = chan_close;
    uv_timer_init(m->loop, &ch->defer);
    ch->defer.data = ch;
    return 0;
}

static struct gs_nodelay_transport *nodelay_of(struct raft_uv_transport *t)
{
    return (struct gs_nodelay_transport *)((char *)t -
                                           offsetof(struct gs_nodelay_transport, outer));
}

static struct gs_nodelay_transport *nodelay_of_inner(struct raft_uv_transport *t)
{
    return (struct gs_nodelay_transport *)((char *)t -
                                           offsetof(struct gs_nodelay_transport, inner));
}

static void set_nodelay(struct uv_stream_s *stream)
{
    if (stream && stream->type == UV_TCP)
        uv_tcp_nodelay((uv_tcp_t *)stream, 1);
}

static int nd_init(struct raft_uv_transport *t, raft_id id, const char *address)
{
    struct gs_nodelay_transport *nt = nodelay_of(t);
    int rv = nt->inner.init(&nt->inner, id, address);
    memcpy(t->errmsg, nt->inner.errmsg, sizeof(t->errmsg));
    return rv;
}

static void nd_accepted(struct raft_uv_transport *inner, raft_id id, const char *address,
                        struct uv_stream_s *stream)
{
    struct gs_nodelay_transport *nt = nodelay_of_inner(inner);
    if (uv_now(nt->loop) < nt->deaf_until) {
        uv_close((uv_handle_t *)stream, free_raft_handle); /* ours until handed on */
        return;
    }
    set_nodelay(stream);
    nt->accept_cb(&nt->outer, id, address, stream);
}

static int nd_listen(struct raft_uv_transport *t, raft_uv_accept_cb cb)
{
    struct gs_nodelay_transport *nt = nodelay_of(t);
    nt->accept_cb = cb;
    int rv = nt->inner.listen(&nt->inner, nd_accepted);
    memcpy(t->errmsg, nt->inner.errmsg, sizeof(t->errmsg));
    return rv;
}

static void nd_connected(struct raft_uv_connect *req, struct uv_stream_s *stream, int status)
{
    struct nodelay_connect *c = req->data;
    struct raft_uv_connect *outer = c->outer;
    raft_free(c);
    if (status == 0)
        set_nodelay(stream);
    outer->cb(outer, stream, status);
}

static int nd_connect(struct raft_uv_transport *t, struct raft_uv_connect *req, raft_id id,
                      const char *address, raft_uv_connect_cb cb)
{
    struct gs_nodelay_transport *nt = nodelay_of(t);
    struct nodelay_connect *c = raft_malloc(sizeof(*c));
    if (!c)
        return RAFT_NOMEM;
    c->inner.data = c;
    c->outer = req;
    req->cb = cb;
    int rv = nt->inner.connect(&nt->inner, &c->inner, id, address, nd_connected);
    if (rv != 0) {
        memcpy(t->errmsg, nt->inner.errmsg, sizeof(t->errmsg));
        raft_free(c);
    }
    return rv;
}

static void nd_closed(struct raft_uv_transport *inner)
{
    struct gs_nodelay_transport *nt = nodelay_of_inner(inner);
    if (nt->close_cb)
        nt->close_cb(&nt->outer);
}

static void nd_close(struct raft_uv_transport *t, raft_uv_transport_close_cb cb)
{
    struct gs_nodelay_transport *nt = nodelay_of(t);
    nt->close_cb = cb;
    nt->inner.close(&nt->inner, nd_closed);
}

int gs_nodelay_transport_init(struct gs_nodelay_transport *nt, uv_loop_t *loop)
{
    int rv = raft_uv_tcp_init(&nt->inner, loop);
    if (rv != 0)
        return rv;
    nt->outer.data = nt;
    nt->outer.init = nd_init;
    nt->outer.listen = nd_listen;
    nt->outer.connect = nd_connect;
    nt->outer.close = nd_close;
    nt->loop = loop;
    nt->deaf_until = 0;
    return 0;
}

void gs_transport_deaf(struct raft_uv_transport *t, bool mux, unsigned ms)
{
    if (mux) {
        struct gs_mux_channel *ch = (struct gs_mux_channel *)t;
        ch->deaf_until = uv_now(ch->mux->loop) + ms;
    } else {
        struct gs_nodelay_transport *nt = nodelay_of(t);
        nt->deaf_until = uv_now(nt->loop) + ms;
    }
}

bool gs_raft_send_addressable(const struct raft *r, const struct raft_message *m)
{
    if (m->server_id == 0 || m->server_address == NULL)
        return false;
    if (m->type == RAFT_IO_APPEND_ENTRIES_RESULT && r->state != RAFT_FOLLOWER &&
        m->server_id == r->follower_state.current_leader.id &&
        m->server_address == r->follower_state.current_leader.address)
        return false;
    return true;
}
