/*
 * The Raft transports (libraft's raft_uv_transport) the glue uses; private
 * to gridsync/cluster/raft_glue.c, which embeds them in its groups. The public
 * side (gs_raft_mux_start/close) is declared in raft_glue.h.
 *
 *  - gs_nodelay_transport: libraft's own TCP transport with TCP_NODELAY
 *    set on every connection, for a group with a port of its own.
 *  - gs_mux_channel: a group's channel of the node's shared Raft port
 *    (gs_raft_mux): one listener per node, connections opened with a
 *    handshake naming the group (gs_mux_handshake_*, raft_batch.h).
 */
#ifndef GS_RAFT_TRANSPORT_H
#define GS_RAFT_TRANSPORT_H

#include <stdint.h>

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

#include "gridsync/cluster/raft_batch.h"
#include "gridsync/cluster/raft_glue.h"

/* libraft's TCP transport leaves Nagle's algorithm on, so a small
 * AppendEntries (or its result) can sit in the kernel until the peer's
 * delayed ACK, a delay added to every commit (docs/perf.md). This transport
 * wraps libraft's own and sets TCP_NODELAY on every connection it makes
 * or accepts; everything else is passed through. */
struct gs_nodelay_transport {
    struct raft_uv_transport outer; /* given to raft_uv_init */
    struct raft_uv_transport inner; /* libraft's TCP transport */
    raft_uv_accept_cb accept_cb;
    raft_uv_transport_close_cb close_cb;
    uv_loop_t *loop;
    uint64_t deaf_until; /* uv_now: refuse peers' connections before (gs_transport_deaf) */
};

/* Set up t over libraft's TCP transport on loop. Returns 0 or a RAFT_*
 * code. Release its inner transport with raft_uv_tcp_close once the raft
 * instance using it has closed. */
int gs_nodelay_transport_init(struct gs_nodelay_transport *t, uv_loop_t *loop);

struct gs_mux_connect;

/* A group's channel of a node's shared Raft port. */
struct gs_mux_channel {
    struct raft_uv_transport t; /* first: libraft's pointer is ours */
    struct gs_raft_mux *mux;
    uint32_t group;
    raft_id id;
    char address[GS_MUX_ADDR_MAX + 1];
    raft_uv_accept_cb accept_cb;
    struct gs_mux_connect *connects;
    uv_timer_t defer; /* closes after the connects, so close_cb comes last */
    raft_uv_transport_close_cb close_cb;
    uint64_t deaf_until; /* uv_now: refuse peers' connections before */
};

/* Set up ch as group `group` (any number, the same on every member) of
 * mux. Returns 0. A mux holds up to 1024 groups at once (listening on
 * more returns RAFT_TOOMANY). libraft closes it through the transport
 * interface when the raft instance closes; the struct must stay until
 * then. */
int gs_mux_channel_init(struct gs_mux_channel *ch, struct gs_raft_mux *m, uint32_t group);

/* A node that has just (re)started may have heard from a leader an instant
 * before it went down, and has forgotten it: libraft would grant a vote at
 * once. A leader's lease (raft_glue.h, "Reads") counts on every member of
 * its majority refusing votes for an election timeout after hearing from
 * it, so a starting group accepts no connection from its peers (hence no
 * RequestVote) for ms milliseconds; peers retry their connections. */
void gs_transport_deaf(struct raft_uv_transport *t, bool mux, unsigned ms);

/*
 * Whether a message libraft 0.15 asks r's io to send names a receiver
 * that can be read: false for one the uv send would crash on.
 *  - server id 0 or address NULL: a follower's AppendEntries result after
 *    the leader it answered was forgotten (canonical/raft issues 339 and
 *    350, fixed after the Debian version).
 *  - an AppendEntries result whose receiver is the bytes of
 *    r->follower_state.current_leader while r is no longer a follower:
 *    a snapshot install or an append that completes after r became a
 *    candidate or leader makes libraft read the follower state through
 *    the union that now holds the candidate's or leader's (a candidate in
 *    pre-vote reads address 0x100). A result that answers a request names
 *    that request's sender and passes.
 * libraft handles a refused send (RAFT_NOCONNECTION) as any failed send:
 * the leader asks again.
 */
bool gs_raft_send_addressable(const struct raft *r, const struct raft_message *m);

#endif
