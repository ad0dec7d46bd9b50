/*
 * Blocking commands and shard channels in cluster mode
 * (docs/gridsync-cluster.md, "Blocking commands" and "Pub/sub").
 *
 * A blocking command whose keys are all missing at the slot's leader
 * blocks there, in the group's database (cluster.c's routing runs it
 * with client/blocking.h as on a single node: same timeout, arrival order
 * and CLIENT UNBLOCK). What makes a key ready is an applied entry (a push
 * from any client, forwarded or not, or a transaction): its context
 * reports the key in the group's database (gs_db.ready_db), and the
 * cluster's prepare handle serves the ready keys each loop iteration.
 * Serving does not pop here: relay_pop proposes the blocked command,
 * restricted to the ready key, as an entry of the group's log; the
 * client's reply is the one computed when that entry is applied, so it
 * gets a value only once its removal has committed, and followers and
 * snapshots agree. At apply the entry's client may not block: when the
 * value has gone meanwhile the command answers as on a timeout (a null),
 * and the client simply stays blocked, in its place (blocking.h,
 * invariant 5: one such pop per key at a time).
 *
 * Invariants:
 *  1. A client waiting for its pop's entry has c->wait set (cluster.c's
 *     invariant 1): it is pending in blocking.h's sense until on_pop_done.
 *  2. A client is never answered with a value whose entry did not commit:
 *     an entry that failed (leadership lost before commit) answers the
 *     error Redis gives a client blocked on a master that turned replica.
 *  3. Clients blocked where they can no longer be served are answered:
 *     in the loop iteration this node notices it lost a group's leadership
 *     (gs_cl_block_leadership, from cluster.c's prepare handle: before it
 *     could lead again, which takes a round trip), "-UNBLOCKED force
 *     unblock from blocking operation, instance state changed (master ->
 *     replica?)", Redis 7.0's text when a master turns replica
 *     (replicationSetMaster -> disconnectAllBlockedClients); on a cron
 *     tick (Redis's clientsCron calls clusterRedirectBlockedClientIf-
 *     Needed), a slot now served by another group gets "-MOVED <slot>
 *     <host:port>" (its leader), and a group not led here -UNBLOCKED.
 */
#include "gridsync/cluster/cluster_internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "gridsync/client/blocking.h"
#include "gridsync/client/node_ctx.h"
#include "gridsync/cluster/raft_glue.h"
#include "gridsync/commands/pubsub.h"

#define UNBLOCKED_REPLICA                                                                          \
    "UNBLOCKED force unblock from blocking operation, instance state changed (master -> "          \
    "replica?)"

static struct cgroup *group_of(struct gs_db *db)
{
    return (struct cgroup *)(void *)((char *)db - offsetof(struct cgroup, db));
}

/* Did the entry pop nothing? A blocked command applied from the log may
 * not block: it then answers a null (array, or bulk for BLMOVE). */
static bool popped_nothing(const char *reply, size_t len)
{
    return (len == 5 && (memcmp(reply, "*-1\r\n", 5) == 0 || memcmp(reply, "$-1\r\n", 5) == 0)) ||
           (len == 3 && memcmp(reply, "_\r\n", 3) == 0);
}

static void on_pop_done(void *data, int status, const char *reply, size_t len)
{
    struct gs_cluster_wait *w = data;
    struct gs_cluster *cl = w->cl;
    struct gs_client *c = w->c;
    gs_cl_wait_put(cl, w);
    if (!c)
        return; /* the client left (and was forgotten by blocking.c) */
    c->wait = NULL;
    if (status == 0 && popped_nothing(reply, len)) {
        gs_block_pending_done(c, false); /* another client took it first */
        return;
    }
    if (status == 0)
        gs_reply_raw(&c->w, reply, len);
    else if (status == CORE_ESTATE)
        gs_error(c, UNBLOCKED_REPLICA); /* not applied, never will be */
    else if (status == CORE_ETIMEOUT)
        gs_error(c,
                 "ERR write outcome unknown: proposed, but its leader changed or its group closed "
                 "before this node learnt whether it committed");
    else if (status == CORE_ECLOSED)
        gs_error(c, "TRYAGAIN the group closed here before the write was proposed; it was "
                    "not applied");
    else
        gs_error_oom(c);
    gs_block_pending_done(c, true);
}

/* gs_db.block_relay of a group's database: propose c's command, its keys
 * replaced by the one that is ready (as Redis serves a client from the
 * key that became ready), BLMPOP / BZMPOP's numkeys by 1. */
static int relay_pop(struct gs_db *db, struct gs_client *c, size_t argc, const struct gs_arg *argv,
                     size_t first_key, size_t n_keys, const char *key, size_t klen)
{
    struct cgroup *grp = group_of(db);
    struct gs_cluster *cl = grp->cl;
    unsigned slot = gs_key_slot(key, klen);
    if (!grp->raft || !gs_group_is_leader(grp->raft)) {
        gs_error(c, UNBLOCKED_REPLICA);
        return GS_BLOCK_SERVED;
    }
    if (grp->slot_state && grp->slot_state[slot] != GS_SLOT_SERVING)
        return GS_BLOCK_KEEP; /* moving out: the cron redirects it once gone */
    if (c->wait)
        return GS_BLOCK_KEEP; /* not while another write is in flight (invariant 1) */
    bool numkeys =
        first_key >= 2 && (gs_arg_is(&argv[0], "blmpop") || gs_arg_is(&argv[0], "bzmpop"));
    size_t n = 1 + first_key + 1 + (argc - first_key - n_keys);
    const char *stack_v[16];
    size_t stack_l[16];
    const char **v = n <= 16 ? stack_v : malloc(n * sizeof(*v));
    size_t *l = n <= 16 ? stack_l : malloc(n * sizeof(*l));
    struct gs_cluster_wait *w = v && l ? gs_cl_wait_get(cl) : NULL;
    int rc = CORE_ENOMEM;
    if (w) {
        size_t k = 0;
        v[k] = c->w.proto == 3 ? "3" : "2";
        l[k++] = 1;
        for (size_t i = 0; i < first_key; i++, k++) {
            v[k] = numkeys && i == first_key - 1 ? "1" : argv[i].p;
            l[k] = numkeys && i == first_key - 1 ? 1 : argv[i].len;
        }
        v[k] = key;
        l[k++] = klen;
        for (size_t i = first_key + n_keys; i < argc; i++, k++) {
            v[k] = argv[i].p;
            l[k] = argv[i].len;
        }
        *w = (struct gs_cluster_wait){NULL, cl, c, slot, grp->g, 0, 0};
        rc = gs_fsm_submit(gs_group_fsm(grp->raft), (unsigned)n, v, l, on_pop_done, w);
        if (rc)
            gs_cl_wait_put(cl, w);
    }
    if (v != stack_v)
        free(v);
    if (l != stack_l)
        free(l);
    if (rc == CORE_ESTATE) {
        gs_error(c, UNBLOCKED_REPLICA);
        return GS_BLOCK_SERVED;
    }
    if (rc) {
        gs_error_oom(c);
        return GS_BLOCK_SERVED;
    }
    c->wait = w;
    return GS_BLOCK_PENDING;
}

void gs_cl_block_init(struct cgroup *grp)
{
    grp->db.block_relay = relay_pop;
}

/* -MOVED to the leader of group to for slot; false if it is not known. */
static bool moved_to(struct gs_cluster *cl, struct gs_client *c, unsigned slot, unsigned to)
{
    struct cgroup *tg = &cl->groups[to];
    int l = gs_cl_leader_of(cl, tg);
    if (l < 0 && tg->raft)
        return false; /* electing: asked again at the next tick */
    gs_cl_reply_moved(c, slot, &cl->nodes[l >= 0 ? (unsigned)l : gs_cl_redirect_node(cl, tg)]);
    return true;
}

/* Invariant 3 for one blocked client of grp (key: one of its keys; they
 * all hash to one slot). */
static bool redirect_blocked(void *arg, struct gs_client *c, const char *key, size_t klen)
{
    struct cgroup *grp = arg;
    struct gs_cluster *cl = grp->cl;
    unsigned slot = gs_key_slot(key, klen);
    unsigned to = cl->serve[slot];
    if (grp->slot_state && grp->slot_state[slot] == GS_SLOT_GONE) {
        if (grp->dest[slot] == NO_GROUP)
            return false; /* the new owner is not known yet */
        to = grp->dest[slot];
    }
    if (to != grp->g && cl->target && cl->tmap[gs_ring_owner_of_slot(cl->target, slot)] == grp->g)
        to = grp->g; /* blocked through ASKING where the slot is coming */
    if (to != grp->g || !grp->raft)
        return moved_to(cl, c, slot, to);
    if (!gs_group_is_leader(grp->raft)) {
        gs_error(c, UNBLOCKED_REPLICA);
        return true;
    }
    return false;
}

/* This node has left grp: wherever the slot is served now. */
static bool leave_blocked(void *arg, struct gs_client *c, const char *key, size_t klen)
{
    struct cgroup *grp = arg;
    struct gs_cluster *cl = grp->cl;
    unsigned slot = gs_key_slot(key, klen);
    struct cgroup *tg = &cl->groups[cl->serve[slot]];
    int l = gs_cl_leader_of(cl, tg);
    unsigned to = l >= 0 && (unsigned)l != cl->self ? (unsigned)l : gs_cl_redirect_node(cl, tg);
    gs_cl_reply_moved(c, slot, &cl->nodes[to]);
    return true;
}

void gs_cl_block_leave(struct gs_cluster *cl, struct cgroup *grp)
{
    struct gs_blocking *b = cl->node->blocking;
    if (b)
        gs_blocking_abort(b, &grp->db, leave_blocked, grp);
}

struct drop_ctx {
    struct gs_cluster *cl;
    bool moved[GS_RING_MAX_NODES]; /* the group's leadership moved this tick */
    bool reassigned[GS_SLOTS];     /* the slot's serving group changed this tick */
};

/* Whether a shard channel's slot left this node's hands: its group's
 * leadership moved (Redis 7.0 removes a slot's channels on every node of
 * the shard when the slot is reassigned, failover included), the slot is
 * now served by another group (migrated: even if this node is a member
 * of that one too), or this node no longer holds the slot (not a member
 * of its group, or the slot went). */
static bool drop_channel(void *arg, const char *ch, size_t len)
{
    struct drop_ctx *x = arg;
    struct gs_cluster *cl = x->cl;
    unsigned slot = gs_key_slot(ch, len);
    if (cl->target) {
        /* Subscribed through ASKING at the group the slot comes to. */
        unsigned to = cl->tmap[gs_ring_owner_of_slot(cl->target, slot)];
        if (to != cl->serve[slot] && cl->groups[to].raft && !x->moved[to])
            return false;
    }
    unsigned g = cl->serve[slot];
    const struct cgroup *grp = &cl->groups[g];
    return x->moved[g] || x->reassigned[slot] || !grp->raft ||
           (grp->slot_state && grp->slot_state[slot] == GS_SLOT_GONE);
}

/* A client blocked in a group whose leadership this node just lost. */
static bool unblock_replica(void *arg, struct gs_client *c, const char *key, size_t klen)
{
    (void)arg;
    (void)key;
    (void)klen;
    gs_error(c, UNBLOCKED_REPLICA);
    return true;
}

void gs_cl_block_leadership(struct gs_cluster *cl)
{
    struct gs_node *n = cl->node;
    bool any = false;
    for (unsigned g = 0; g < cl->n; g++) {
        struct cgroup *grp = &cl->groups[g];
        grp->leader_moved = false;
        if (!grp->raft) {
            grp->led_term = grp->seen_leader = 0;
            continue;
        }
        uint64_t term, commit, applied, id;
        gs_group_raft_info(grp->raft, &term, &commit, &applied);
        bool lead = gs_group_is_leader(grp->raft);
        bool lost = grp->led_term && (!lead || term != grp->led_term);
        bool moved = lost;
        grp->led_term = lead ? term : 0;
        if (gs_group_leader(grp->raft, &id, NULL, 0) == 0) {
            moved = moved || (grp->seen_leader && id != grp->seen_leader);
            grp->seen_leader = id;
        }
        if (lost && n->blocking)
            gs_blocking_abort(n->blocking, &grp->db, unblock_replica, grp);
        grp->leader_moved = moved;
        any = any || moved;
    }
    if (!any)
        return;
    struct drop_ctx *x = calloc(1, sizeof(*x));
    if (!x)
        return; /* the channels stay: a small loss, logged nowhere */
    x->cl = cl;
    for (unsigned g = 0; g < cl->n; g++)
        x->moved[g] = cl->groups[g].leader_moved;
    (void)gs_pubsub_shard_drop(n, drop_channel, x);
    free(x);
}

void gs_cl_block_cron(struct gs_cluster *cl)
{
    struct gs_node *n = cl->node;
    for (unsigned g = 0; g < cl->n; g++)
        if (n->blocking && cl->groups[g].raft)
            gs_blocking_abort(n->blocking, &cl->groups[g].db, redirect_blocked, &cl->groups[g]);
    struct drop_ctx *x = calloc(1, sizeof(*x));
    if (!x)
        return;
    x->cl = cl;
    if (!cl->seen_serve && (cl->seen_serve = malloc(sizeof(cl->serve))) != NULL)
        memcpy(cl->seen_serve, cl->serve, sizeof(cl->serve));
    for (unsigned s = 0; cl->seen_serve && s < GS_SLOTS; s++) {
        x->reassigned[s] = cl->seen_serve[s] != cl->serve[s];
        cl->seen_serve[s] = cl->serve[s];
    }
    (void)gs_pubsub_shard_drop(n, drop_channel, x);
    free(x);
}
