/*
 * Placement: which nodes hold which slots.
 *
 * A consistent-hash ring (Karger et al.; Dynamo's preference lists) over
 * the cluster's nodes. Each node owns `vnodes` points on a 64-bit ring at
 * FNV-1a("<name>#<i>"); slot s sits at s/16384 of the way round (slots in
 * order, so that a point's arc is a run of consecutive slots and CLUSTER
 * SLOTS stays short), and its owner (primary) is the node of the first
 * point clockwise from it. Adding a node
 * therefore only moves slots *to* the new node (about 1/(N+1) of them), and
 * removing one only moves *its* slots away.
 *
 * Shards and Raft groups (see docs/gridsync-cluster.md): there is one
 * group per node, named after the node that is its preferred leader, and
 * a slot belongs to the group of its owner. A group's replica set is its
 * node followed by the next RF-1 distinct nodes in "node order" (nodes
 * sorted by their own hash, one point each), so every slot of a group has
 * the same replica set, every node is a member of exactly RF groups, and a
 * node needs at most RF Raft ports. With fewer than RF nodes, every group
 * spans all nodes.
 *
 * Invariants:
 *  1. The ring depends only on the set of node names and the
 *     configuration, never on the order in which names are given nor on
 *     the process (FNV-1a is fixed, unlike core_hash64).
 *  2. owner[s] < n for every slot; replicas(g)[0] == g.
 *  3. Names are unique within a ring.
 */
#ifndef GS_RING_H
#define GS_RING_H

#include <stddef.h>
#include <stdint.h>

#define GS_RING_MAX_NODES    1024
#define GS_RING_MAX_REPLICAS 7
#define GS_RING_NAME_MAX     64

struct gs_ring_config {
    unsigned vnodes;   /* points per node; 0 = default (256) */
    unsigned replicas; /* replication factor; 0 = default (3) */
};

struct gs_ring;

/* Build a ring over n nodes named by `names` (e.g. "127.0.0.1:7000";
 * copied, each shorter than GS_RING_NAME_MAX). cfg may be NULL for the
 * defaults. Node i of the ring is names[i]. Returns 0, CORE_EINVAL (no
 * nodes, too many, a name empty, too long or repeated, replicas above
 * GS_RING_MAX_REPLICAS) or CORE_ENOMEM. *out is owned by the caller. */
int gs_ring_new(struct gs_ring **out, const char *const *names, unsigned n,
                const struct gs_ring_config *cfg);
void gs_ring_free(struct gs_ring *r);

/* The same ring with one node added (appended as the last index) or
 * removed (later indexes shift down by one). For "what if" questions and
 * for join/leave. Same errors as gs_ring_new; CORE_ENOTFOUND if the node to
 * remove is not there. */
int gs_ring_with_node(const struct gs_ring *r, const char *name, struct gs_ring **out);
int gs_ring_without_node(const struct gs_ring *r, const char *name, struct gs_ring **out);

unsigned gs_ring_nodes(const struct gs_ring *r);
const char *gs_ring_node_name(const struct gs_ring *r, unsigned node);
/* The node index of a name, or -1. */
int gs_ring_find(const struct gs_ring *r, const char *name);
/* Effective replication factor: min(configured RF, number of nodes). */
unsigned gs_ring_rf(const struct gs_ring *r);

/* The owner (primary node, hence group) of a slot < GS_SLOTS. */
unsigned gs_ring_owner_of_slot(const struct gs_ring *r, unsigned slot);

/* Write the replica set of the group led by `group` (a node index) into
 * out[0..rf-1], the preferred leader first; returns rf. */
unsigned gs_ring_group_replicas(const struct gs_ring *r, unsigned group, unsigned *out);

/* Slot counts per node as owner: out[node] for node < gs_ring_nodes. */
void gs_ring_slot_counts(const struct gs_ring *r, unsigned *out);

/* For a change from ring a to ring b (matched by node name): the number of
 * slots whose owner changes, and (if not NULL) the number whose replica set
 * changes as a set. */
unsigned gs_ring_count_moved(const struct gs_ring *a, const struct gs_ring *b,
                             unsigned *replica_set_changed);

#endif
