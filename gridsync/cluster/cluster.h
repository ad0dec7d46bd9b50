/*
 * Cluster mode of a GridSync node (docs/gridsync-cluster.md).
 *
 * The node learns the whole cluster from one list of peers (every node is
 * given the same list, in the same order): the placement ring (ring.h)
 * decides, for every slot, the group that holds it; this node joins the
 * Raft group (raft_glue.h) of every group whose replica set contains it,
 * with one store per group.
 *
 * Routing of a command with keys (all its keys must share a slot):
 *   - not a member of the slot's group    -> -MOVED to the group's
 *                                            preferred leader
 *   - member, not leader                  -> -MOVED to the leader (or, for
 *                                            a READONLY client's read,
 *                                            served from the local replica)
 *   - leader, read                        -> served from the group's store
 *   - leader, write                       -> proposed through Raft, batched
 *                                            per loop iteration; the reply
 *                                            is the result of applying it,
 *                                            sent after commit
 * While a client waits for a write, its later requests wait unread in its
 * input buffer, so pipelined requests keep their order and a read after a
 * write sees it.
 *
 * Ports: the client port P, and P + 10000 for Raft, shared by every group
 * of the node (gs_raft_mux), as Redis Cluster's bus port.
 */
#ifndef GS_CLUSTER_H
#define GS_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>

struct gs_node;
struct gs_client;
struct gs_command;
struct gs_arg;
struct gs_cluster;
struct gs_cluster_wait;
struct core_buf;

/* Cluster mode as a node feature (client/node_ctx.h): on when cluster-enabled;
 * it starts the groups (gs_cluster_new), routes commands with keys
 * (gs_cluster_route), expires the keys of the groups this node leads
 * through their logs (followers never expire on their own clock; see
 * cluster.c, "Active expiry"), applies CONFIG SET to the groups' stores, and
 * stops and frees the groups with the node. */
struct gs_feature;
extern const struct gs_feature gs_cluster_feature;

/* Create the cluster state of node n from its membership (the file in
 * n->cfg.dir, else cluster-peers and cluster-replicas, else what
 * cluster-seed answers; gs_cl_learn_membership) and n->cfg's port and
 * bind, and start this node's Raft groups; the
 * group this node prefers to lead uses the node's database 0. Returns 0 or
 * CORE_EINVAL / CORE_EIO / CORE_ENOMEM (logged). On a failure after some
 * groups started, *out is set and already stopping: run the loop until it
 * returns, then gs_cluster_free it; on other failures *out is untouched. */
int gs_cluster_new(struct gs_cluster **out, struct gs_node *n);

/* Close every Raft group (asynchronously; the loop ends once they are). */
void gs_cluster_stop(struct gs_cluster *cl);

/* Release after the loop has returned. Frees the stores it created (not
 * the node's database 0). */
void gs_cluster_free(struct gs_cluster *cl);

/* Route one command (see above). Returns true if it was handled here
 * (replied, or proposed with the reply to follow), false if the node
 * should run it as usual (commands without keys). */
bool gs_cluster_route(struct gs_cluster *cl, struct gs_client *c, const struct gs_command *cmd,
                      size_t argc, struct gs_arg *argv);

/* Apply the node's maxmemory and policy (after CONFIG SET) to the stores
 * of the other groups this node is a member of (the node's own store is
 * the node's to configure). */
void gs_cluster_apply_config(struct gs_cluster *cl);

/* The client is going away: a write it waits for will find nobody to
 * answer. */
void gs_cluster_client_closed(struct gs_client *c);

/* ---- join and leave (docs/gridsync-cluster.md, "Join and leave") ----
 *
 * CLUSTER ADDNODE host:port | DELNODE host:port   (sent to every node)
 * CLUSTER MIGRATE STATUS                  target groups led here, converged
 * CLUSTER MIGRATE BEGIN  <src>            at src's leader: block moving slots
 * CLUSTER MIGRATE EXPORT <src> <cursor>   at src's leader: [cursor, dst k v exp...]
 * CLUSTER MIGRATE IMPORT <dst> k v exp... at dst's leader: copy through its log
 * CLUSTER MIGRATE SWITCH <src>            at src's leader: drop, redirect
 * CLUSTER MIGRATE OWN    <dst> <src>      at dst's leader: serve src's slots
 * CLUSTER MIGRATE FINISH [version]        (every node) serve the new placement;
 *                                         membership version max(own + 1, version)
 * CLUSTER MEMBERSHIP                      this node's membership (membership.h text)
 *
 * ADDNODE/DELNODE and FINISH persist the membership in the data
 * directory before answering, so a node restarted in the middle of a
 * change comes back with it and every step can be sent again.
 * Groups are named by their node's host:port. Replies come after the
 * entry is committed (BEGIN, IMPORT, SWITCH, OWN); -NOTLEADER when this
 * node does not lead the group named. Returns false if argv is none of
 * these (the caller answers "unknown subcommand"). scripts/gridsync-reshard
 * drives the sequence. */
bool gs_cluster_admin(struct gs_cluster *cl, struct gs_client *c, size_t argc, struct gs_arg *argv);

/* ---- the cluster as CLUSTER SLOTS / SHARDS / NODES show it ---- */

unsigned gs_cluster_nodes(const struct gs_cluster *cl);
unsigned gs_cluster_self(const struct gs_cluster *cl);
/* False for a node that has left (indexes of nodes are never reused). */
bool gs_cluster_node_live(const struct gs_cluster *cl, unsigned i);
/* Node i's client address parts and its 40-hex node id. */
const char *gs_cluster_node_host(const struct gs_cluster *cl, unsigned i);
int gs_cluster_node_port(const struct gs_cluster *cl, unsigned i);
const char *gs_cluster_node_id(const struct gs_cluster *cl, unsigned i);
/* The group (= its preferred leader's node index) that holds slot. */
unsigned gs_cluster_slot_group(const struct gs_cluster *cl, unsigned slot);
/* During a membership change, the node a client following -ASK for slot
 * goes to (the leader of the group the slot moves to), else -1. */
int gs_cluster_slot_importer(const struct gs_cluster *cl, unsigned slot);
/* The node that leads group g as far as this node knows: the Raft leader
 * when this node is a member and one is known, else the preferred one. */
unsigned gs_cluster_group_leader(const struct gs_cluster *cl, unsigned g);
/* Group g's replica set (preferred leader first); returns its size. */
unsigned gs_cluster_group_members(const struct gs_cluster *cl, unsigned g, unsigned *out);
/* Append this node's view of its groups (role, term, indexes) as
 * "name:value\r\n" lines for CLUSTER INFO. */
void gs_cluster_info_groups(struct gs_cluster *cl, char *out, size_t outlen);

/* The Raft families of the metrics page (node/metrics.h), one series per
 * group this node is a member of: its role, term, commit and applied
 * index, keys, and whether it knows a leader. */
void gs_cluster_metrics(struct gs_cluster *cl, struct core_buf *b);

#endif
