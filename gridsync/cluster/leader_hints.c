/*
 * Leadership hints: how a node outside a group learns who leads it.
 *
 * A node is a member of only RF of the cluster's groups; for the others it
 * knows the replica set but not the leader, and used to redirect clients
 * to the preferred leader, which after a failover may be dead for as long
 * as the outage lasts. So every node sends, every HINT_INTERVAL_MS, one UDP
 * datagram from its Raft port to every other node's Raft port naming the
 * groups it leads and their terms (gs_hint_*, raft_batch.h). A receiver
 * that is not a member of such a group records the sender as its leader,
 * unless it already knows a leader of a higher term. Datagrams may be lost
 * or late; nothing depends on them for safety, only where a client is sent.
 *
 * The same socket carries forwarded PUBLISH messages (gs_pub_*,
 * raft_batch.h): a PUBLISH on any node is sent as one datagram to every
 * other node, whose subscribers get it (gs_cl_forward_publish), at most
 * once, as Redis Cluster's bus carries PUBLISH to every node; a message
 * too big for one datagram reaches this node's subscribers only.
 *
 * Invariants:
 *  1. Hints are used only for groups this node is not a member of (a
 *     member asks its own Raft instance).
 *  2. A datagram (hint or PUBLISH) is believed only when it comes from the
 *     Raft address of a live node of the cluster and names that node as
 *     the sender; a node announces only itself.
 *  3. A hint or a node not heard from for HINT_TTL_MS is not used: the
 *     client then goes to a member heard from recently (preferred first),
 *     which redirects it in turn; if no member was, to the member heard
 *     from last; only if none ever was, to the preferred leader.
 */
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "core/addr.h"
#include "core/error.h"
#include "core/log.h"
#include "gridsync/cluster/cluster_internal.h"
#include "gridsync/cluster/raft_glue.h"
#include "gridsync/client/node_ctx.h"
#include "gridsync/commands/pubsub.h"

#define HINT_INTERVAL_MS 50
/* Four intervals: one or two lost datagrams do not drop a hint. */
#define HINT_TTL_MS (4 * HINT_INTERVAL_MS)

struct gs_cl_hints {
    struct gs_cluster *cl;
    uv_udp_t udp;
    uv_timer_t timer;
    unsigned open; /* handles not yet closed */
    char out[GS_HINT_BYTES];
    struct gs_hint h;
    char pub[GS_PUB_BYTES]; /* a PUBLISH being sent */
    /* One more than the longest datagram: a longer one is truncated, then
     * refused. */
    char in[GS_PUB_BYTES + 1];
};

static uint64_t now_ms(const struct gs_cluster *cl)
{
    return uv_now(cl->node->loop);
}

static bool raft_addr_of(const struct cnode *nd, struct sockaddr_storage *sa)
{
    return core_addr_ip(nd->host, nd->port + RAFT_PORT_OFFSET, sa) == 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct gs_cl_hints *hs = h->data;
    (void)suggested;
    *buf = uv_buf_init(hs->in, sizeof(hs->in));
}

static int node_of_raft_id(const struct gs_cluster *cl, uint64_t id)
{
    for (unsigned i = 0; i < cl->n; i++)
        if (!cl->nodes[i].removed && cl->nodes[i].raft_id == id)
            return (int)i;
    return -1;
}

/* The node that sent a datagram naming sender from addr, or -1
 * (invariant 2). */
static int from_peer(const struct gs_cluster *cl, uint64_t sender, const struct sockaddr *addr)
{
    int from = node_of_raft_id(cl, sender);
    struct sockaddr_storage want;
    if (from < 0 || (unsigned)from == cl->self || !raft_addr_of(&cl->nodes[from], &want) ||
        !core_addr_equal((const struct sockaddr *)&want, addr))
        return -1;
    return from;
}

static void on_recv(uv_udp_t *u, ssize_t nread, const uv_buf_t *buf, const struct sockaddr *addr,
                    unsigned flags)
{
    struct gs_cl_hints *hs = u->data;
    struct gs_cluster *cl = hs->cl;
    (void)buf;
    if (nread <= 0 || !addr || (flags & UV_UDP_PARTIAL))
        return;
    struct gs_pub pub;
    if (gs_pub_parse(hs->in, (size_t)nread, &pub) == 0) {
        if (from_peer(cl, pub.sender, addr) >= 0)
            (void)gs_pubsub_publish(cl->node, pub.channel, pub.chlen, pub.message, pub.msglen,
                                    false);
        return;
    }
    if (gs_hint_parse(hs->in, (size_t)nread, &hs->h) != 0)
        return;
    int from = from_peer(cl, hs->h.sender, addr);
    if (from < 0)
        return;
    uint64_t now = now_ms(cl);
    cl->nodes[from].heard_ms = now;
    for (uint32_t k = 0; k < hs->h.n; k++) {
        for (unsigned g = 0; g < cl->n; g++) {
            struct cgroup *grp = &cl->groups[g];
            if (cl->nodes[g].removed || cl->nodes[g].mux_group != hs->h.group[k])
                continue;
            if (grp->raft)
                break; /* invariant 1 */
            bool stale = !grp->hinted || now - grp->hint_ms > HINT_TTL_MS;
            if (stale || hs->h.term[k] >= grp->hint_term) {
                grp->hinted = true;
                grp->hint_node = (unsigned)from;
                grp->hint_term = hs->h.term[k];
                grp->hint_ms = now;
            }
            break;
        }
    }
}

/* Send the datagram in out (len bytes) to every other live node. Best
 * effort: a full socket buffer or an unreachable peer drops it. */
static void send_all(struct gs_cl_hints *hs, char *out, size_t len)
{
    struct gs_cluster *cl = hs->cl;
    uv_buf_t b = uv_buf_init(out, (unsigned)len);
    for (unsigned i = 0; i < cl->n; i++) {
        struct sockaddr_storage sa;
        if (i == cl->self || cl->nodes[i].removed || !raft_addr_of(&cl->nodes[i], &sa))
            continue;
        (void)uv_udp_try_send(&hs->udp, &b, 1, (const struct sockaddr *)&sa);
    }
}

static void on_tick(uv_timer_t *t)
{
    struct gs_cl_hints *hs = t->data;
    struct gs_cluster *cl = hs->cl;
    struct gs_hint *h = &hs->h;
    h->sender = cl->nodes[cl->self].raft_id;
    h->n = 0;
    for (unsigned g = 0; g < cl->n && h->n < GS_HINT_MAX; g++) {
        struct cgroup *grp = &cl->groups[g];
        if (cl->nodes[g].removed || !grp->raft || !gs_group_is_leader(grp->raft))
            continue;
        uint64_t term, commit, applied;
        gs_group_raft_info(grp->raft, &term, &commit, &applied);
        h->group[h->n] = cl->nodes[g].mux_group;
        h->term[h->n] = term;
        h->n++;
    }
    /* A lost hint only waits for the next tick. */
    send_all(hs, hs->out, gs_hint_encode(hs->out, h));
}

void gs_cl_forward_publish(struct gs_cluster *cl, const char *ch, size_t chlen, const char *msg,
                           size_t msglen)
{
    struct gs_cl_hints *hs = cl->hints;
    if (!hs)
        return;
    size_t len = gs_pub_encode(hs->pub, cl->nodes[cl->self].raft_id, ch, chlen, msg, msglen);
    if (len == 0) {
        CORE_DEBUG("cluster: a PUBLISH of %zu bytes is too big to forward to other nodes",
                   chlen + msglen);
        return;
    }
    send_all(hs, hs->pub, len);
}

static void on_closed(uv_handle_t *h)
{
    struct gs_cl_hints *hs = h->data;
    if (--hs->open == 0)
        free(hs);
}

int gs_cl_hints_start(struct gs_cluster *cl)
{
    struct gs_cl_hints *hs = calloc(1, sizeof(*hs));
    if (!hs)
        return CORE_ENOMEM;
    hs->cl = cl;
    uv_loop_t *loop = cl->node->loop;
    uv_udp_init(loop, &hs->udp);
    uv_timer_init(loop, &hs->timer);
    hs->udp.data = hs;
    hs->timer.data = hs;
    hs->open = 2;
    struct sockaddr_storage sa;
    int rc = raft_addr_of(&cl->nodes[cl->self], &sa) ? 0 : UV_EINVAL;
    if (rc == 0)
        rc = uv_udp_bind(&hs->udp, (const struct sockaddr *)&sa, 0);
    if (rc == 0)
        rc = uv_udp_recv_start(&hs->udp, on_alloc, on_recv);
    if (rc != 0) {
        CORE_WARN("cluster: no leadership hints (UDP on the Raft port: %s); nodes outside a "
                  "group redirect to its preferred leader",
                  uv_strerror(rc));
        uv_close((uv_handle_t *)&hs->udp, on_closed);
        uv_close((uv_handle_t *)&hs->timer, on_closed);
        return 0; /* not fatal: routing falls back */
    }
    uv_timer_start(&hs->timer, on_tick, HINT_INTERVAL_MS, HINT_INTERVAL_MS);
    cl->hints = hs;
    return 0;
}

void gs_cl_hints_stop(struct gs_cluster *cl)
{
    struct gs_cl_hints *hs = cl->hints;
    if (!hs)
        return;
    cl->hints = NULL;
    uv_close((uv_handle_t *)&hs->udp, on_closed);
    uv_close((uv_handle_t *)&hs->timer, on_closed);
}

int gs_cl_hinted_leader(const struct gs_cluster *cl, const struct cgroup *grp)
{
    if (!cl->hints || !grp->hinted || grp->raft)
        return -1;
    if (now_ms(cl) - grp->hint_ms > HINT_TTL_MS || cl->nodes[grp->hint_node].removed)
        return -1; /* invariant 3 */
    return (int)grp->hint_node;
}

unsigned gs_cl_redirect_node(const struct gs_cluster *cl, const struct cgroup *grp)
{
    int l = gs_cl_hinted_leader(cl, grp);
    if (l >= 0)
        return (unsigned)l;
    if (cl->hints) {
        uint64_t now = now_ms(cl);
        int last = -1; /* the member heard from last */
        for (unsigned k = 0; k < grp->n_members; k++) {
            const struct cnode *nd = &cl->nodes[grp->members[k]];
            if (nd->removed || !nd->heard_ms)
                continue;
            if (now - nd->heard_ms <= HINT_TTL_MS)
                return grp->members[k];
            if (last < 0 || nd->heard_ms > cl->nodes[grp->members[last]].heard_ms)
                last = (int)k;
        }
        /* Every member silent for a while: their processes stalled (a
         * loaded machine starves them of CPU) or their datagrams late.
         * The preferred leader may be the member that died long before
         * the others went quiet (invariant 3). */
        if (last >= 0)
            return grp->members[last];
    }
    return grp->g;
}
