/*
 * The cluster's state shared by cluster.c (setup, applying entries,
 * routing) and cluster_migrate.c (join and leave). Not a public header:
 * only those two files include it; the rest of GridSync uses cluster.h.
 *
 * Node indexes (cl->nodes) are local to a node: the order of its peer
 * list, then nodes added later. Nothing that crosses the network or the
 * log uses them: Raft ids and group numbers derive from names, and
 * migration entries name groups.
 */
#ifndef GS_CLUSTER_INTERNAL_H
#define GS_CLUSTER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "core/buf.h"
#include "gridsync/client/client.h"
#include "gridsync/cluster/raft_batch.h"
#include "gridsync/cluster/ring.h"
#include "gridsync/cluster/slot.h"

struct gs_client;
struct gs_arg;
struct gs_store;

/* A node's Raft port (shared by all its groups: gs_raft_mux), as Redis
 * Cluster's bus port is the client port + 10000. */
#define RAFT_PORT_OFFSET 10000

/* The command name of migration entries in a group's log (not a client
 * command: only this file proposes it). */
#define MIGRATE_ENTRY "gs.migrate"
/* The command name of active-expiry entries: [EXPIRE_ENTRY, key...], the
 * keys a leader found expired (cluster.c, "Active expiry"). */
#define EXPIRE_ENTRY "gs.expire"
/* The command name of a transaction's entry: [TXN_ENTRY, batch], the
 * batch (raft_batch.h's encoding, header fields zero) holding the queued
 * commands of one EXEC (cluster_txn.c). */
#define TXN_ENTRY "gs.exec"
/* The command name of a SPOP's entry: [SPOP_ENTRY, key, count ("" when
 * none), member...], the members the leader picked (cmd_set.h). */
#define SPOP_ENTRY "gs.spop"

struct cnode {
    char name[GS_RING_NAME_MAX]; /* host:port, as in cluster-peers */
    char host[GS_RING_NAME_MAX];
    int port;
    char id[41];
    uint64_t raft_id;   /* from the name: the same on every node, whatever
                         * the order of the peer list */
    uint32_t mux_group; /* the number of this node's group on Raft ports */
    bool removed;       /* left the cluster (indexes are never reused) */
    uint64_t heard_ms;  /* uv_now of its last leadership hint, 0 = never */
};

/* Per-slot migration state inside a group (GS_SLOT_SERVING, _BLOCKED,
 * _GONE: slot.h), changed only by entries of that group's log (so every
 * member agrees; see "Join and leave"). */
#define NO_GROUP 0xffffu /* a destination this node does not know */

struct cgroup {
    struct gs_cluster *cl;
    unsigned g;
    unsigned members[GS_RING_MAX_REPLICAS];
    unsigned n_members;
    int role;                      /* this node's position in members, -1 if not a member */
    struct gs_cluster_wait *reads; /* waiting for the next read barrier */
    int64_t last_entry_ms;         /* time of the last entry applied here */
    /* The group's database: its store (the node's database 0 for the
     * group this node prefers to lead, else one of its own) and the clock
     * of a read run against it (run_on). */
    struct gs_db db;
    bool own_store; /* db.store created here (not the node's) */
    struct gs_group *raft;
    uint8_t *slot_state; /* GS_SLOTS entries while migrating out, else NULL */
    uint16_t *dest;      /* the group a blocked slot moves to */
    bool holding;        /* snapshots held for a migration (until FINISH) */
    bool expiring;       /* an EXPIRE_ENTRY of this group is in flight */
    /* Not a member: the leader as last announced (leader_hints.c). */
    bool hinted;
    unsigned hint_node;
    uint64_t hint_term, hint_ms;
    /* cluster_block.c: the term this node led the group in when last
     * looked (0: not leading), and the leader seen then (raft id, 0:
     * none yet), to notice leadership moving. */
    uint64_t led_term, seen_leader;
    bool leader_moved; /* noticed in this loop iteration */
};

struct gs_cluster_wait {
    struct gs_cluster_wait *next_free; /* free list, or a barrier's list */
    struct gs_cluster *cl;
    struct gs_client *c;
    unsigned slot, group;
    unsigned pending; /* FLUSHALL: groups still to answer */
    int status;       /* FLUSHALL: first failure */
};

struct gs_cluster {
    struct gs_node *node;
    struct gs_registry_heartbeat *registry; /* NULL without --registry */
    struct gs_ring *ring;                   /* the placement being served */
    struct gs_ring *target;                 /* the placement being moved to, or NULL */
    unsigned rmap[GS_RING_MAX_NODES], tmap[GS_RING_MAX_NODES]; /* ring index -> node */
    int leaving;                                               /* node being removed, or -1 */
    /* The membership's version (membership.h): +1 at each FINISH. */
    uint64_t version;
    unsigned replicas;        /* the ring's parameter, as configured or persisted */
    uint16_t serve[GS_SLOTS]; /* slot -> group serving it here */
    uint16_t *seen_serve;     /* serve as cluster_block.c last saw it (or NULL) */
    unsigned n, self;
    struct cnode *nodes;
    struct cgroup *groups;
    struct gs_cluster_wait *free_waits;
    /* scratch for building proposals and for applying entries */
    const char **pargv;
    size_t *plen;
    size_t pcap;
    struct gs_arg *xargv;
    size_t xcap;
    struct core_buf xout;
    struct core_buf txn;           /* an EXEC's batch being built (cluster_txn.c) */
    struct gs_batch_reader txn_rd; /* reading a transaction's batch at apply */
    struct gs_raft_mux *mux;       /* this node's Raft port */
    unsigned closing;
    /* Closed groups, freed in gs_cluster_free, after the loop ran dry
     * (gs_group_close). */
    struct gs_group **closed;
    unsigned n_closed, cap_closed;
    uv_prepare_t barrier_prep; /* one read barrier per group per iteration */
    bool prep_started;
    struct gs_cl_hints *hints; /* leader_hints.c, NULL when off */
    struct gs_meta *meta;      /* cluster_meta.c */
};

/* ---- cluster_peers.c ---- */

/* Parse "host:port" into nd (name, host, port, ids). 0 or CORE_EINVAL. */
int gs_cl_parse_peer(struct cnode *nd, const char *s, size_t len);
/* Does node i share a name, raft id or group number with an earlier one? */
bool gs_cl_clashes(const struct gs_cluster *cl, unsigned i);
struct gs_membership;
struct gs_config;
/* Where a starting node learns the membership (docs/gridsync-cluster.md,
 * "Membership"): its file in dir; else cluster-peers (with cluster-join:
 * the last is being added); else the seed. With a file and a seed, the
 * seed's answer wins when it is newer and names this node. self is this
 * node's host:port. 0, or CORE_EINVAL / CORE_EIO / CORE_ETIMEOUT (logged:
 * the node does not start). */
int gs_cl_learn_membership(const struct gs_config *cfg, const char *self, struct gs_membership *m);
/* Fill cl->nodes from a membership: its nodes, then the node being added
 * (room for GS_RING_MAX_NODES). 0, CORE_ENOMEM or CORE_EINVAL (logged). */
int gs_cl_nodes_from(struct gs_cluster *cl, const struct gs_membership *m);
/* This node's membership now: the ring served, the change in progress;
 * with_self names this node (the file) or not (CLUSTER MEMBERSHIP). */
void gs_cl_membership(const struct gs_cluster *cl, struct gs_membership *m, bool with_self);
/* Persist it in the node's data directory (membership.h). 0 or a CORE_E*
 * code (logged; the previous file stays). */
int gs_cl_save_membership(const struct gs_cluster *cl);

/* ---- cluster.c ---- */

/* Start grp's Raft group on this node (join: without bootstrapping).
 * Returns 0 or a CORE_E* code (logged; grp->raft stays NULL). */
int gs_cl_start_group(struct gs_cluster *cl, struct cgroup *grp, bool join);

/* ---- cluster_feature.c ---- */

struct gs_registry_config;
struct gs_config;
/* The DynamoDB client's configuration for url (the registry's or the Raft
 * store's), with the registry's region and credentials (options, else
 * AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY). CORE_EINVAL (logged) if the
 * URL is malformed or there are no credentials. */
int gs_cl_dynamo_config(const struct gs_config *cfg, const char *url,
                        struct gs_registry_config *rc);

/* Whether --raft-store names DynamoDB (else the directory). */
bool gs_cl_raft_store_dynamo(const struct gs_config *cfg);
/* map[i] = the node index of ring index i. */
void gs_cl_build_map(struct gs_cluster *cl, const struct gs_ring *r, unsigned *map);
/* Group g's replica set (node indexes) in ring r, or 0 if g is not in r. */
unsigned gs_cl_ring_members(struct gs_cluster *cl, const struct gs_ring *r, const unsigned *map,
                            unsigned g, unsigned *out);
void gs_cl_set_members(struct cgroup *grp, const unsigned *m, unsigned n, unsigned self);
/* cl->serve from cl->ring. */
void gs_cl_serve_ring(struct gs_cluster *cl);

/* Keep a group whose close has begun until gs_cluster_free. Returns 0 or
 * CORE_ENOMEM (the group is then never freed: a small leak, not a crash). */
int gs_cl_keep_closed(struct gs_cluster *cl, struct gs_group *g);
/* The node index of grp's Raft leader as known here, or -1. */
int gs_cl_leader_of(const struct gs_cluster *cl, const struct cgroup *grp);
void gs_cl_reply_moved(struct gs_client *c, unsigned slot, const struct cnode *to);
/* Propose argv (prefixed with the client's protocol) into grp's log; the
 * client is answered after commit. Always returns true (replied or
 * waiting). */
bool gs_cl_propose(struct gs_cluster *cl, struct cgroup *grp, struct gs_client *c, unsigned slot,
                   size_t argc, struct gs_arg *argv);

struct gs_command;
/* The slot of cmd's keys (gs_command_keys: the command table's key
 * specs, counted keys included): 1 with *slot set when it has keys and
 * they all hash to one slot, 0 when it has none (or a malformed count:
 * its handler then only replies an error), -1 when they hash to several
 * slots (CROSSSLOT; also when out of memory). */
int gs_cl_command_keys(const struct gs_command *cmd, size_t argc, const struct gs_arg *argv,
                       unsigned *slot);

/* Run one command of an applied entry through its handler, against store
 * at now_ms, for a client of protocol proto that has no connection;
 * appends its reply to out. */
void gs_cl_apply_command(struct cgroup *grp, struct gs_store *store, int64_t now_ms, int proto,
                         const struct gs_command *cmd, unsigned argc, const char *const *argv,
                         const size_t *argvlen, struct core_buf *out);

/* Propose the entry argv[0..argc) (cl->pargv-like: the protocol first)
 * into grp's log for client c; c is answered with the reply computed at
 * apply (as gs_cl_propose). Always returns true (replied or waiting). */
bool gs_cl_propose_entry(struct gs_cluster *cl, struct cgroup *grp, struct gs_client *c,
                         unsigned slot, unsigned argc, const char *const *argv,
                         const size_t *argvlen);

/* A wait record from the free list (or new; NULL when out of memory),
 * and its return. */
struct gs_cluster_wait *gs_cl_wait_get(struct gs_cluster *cl);
void gs_cl_wait_put(struct gs_cluster *cl, struct gs_cluster_wait *w);

/* Park c's request (left unconsumed) until the next barrier of grp; it is
 * parsed again after it (c->read_barrier then says how it went). Always
 * returns true. */
bool gs_cl_defer(struct gs_cluster *cl, struct cgroup *grp, struct gs_client *c, unsigned slot);

/* ---- cluster_txn.c ---- */

/* A command inside MULTI (not one that runs at once): Redis Cluster's
 * routing at queue time. Returns true when it replied an error (and
 * flagged the transaction: EXEC will answer EXECABORT), false when the
 * node should queue it. */
bool gs_cl_txn_queue(struct gs_cluster *cl, struct gs_client *c, const struct gs_command *cmd,
                     size_t argc, struct gs_arg *argv);
/* EXEC of a transaction that queued keyed commands. Always true. */
bool gs_cl_txn_exec(struct gs_cluster *cl, struct gs_client *c);
/* WATCH has just run against grp's store for c: remember where. */
void gs_cl_txn_watched(struct gs_cluster *cl, struct cgroup *grp, struct gs_client *c);
/* Apply a TXN_ENTRY: batch[0..len) holds the commands. */
void gs_cl_apply_txn(struct cgroup *grp, struct gs_store *store, int64_t now_ms, int proto,
                     const char *batch, size_t len, struct core_buf *out);

/* ---- leader_hints.c ---- */

/* Send this node's leaderships to every node and learn theirs, on the
 * node's Raft address over UDP. Returns 0 (also when the socket cannot be
 * bound: logged, routing then falls back) or CORE_ENOMEM. */
int gs_cl_hints_start(struct gs_cluster *cl);
/* Close the socket and timer (asynchronously). */
void gs_cl_hints_stop(struct gs_cluster *cl);
/* For a group this node is not a member of: its leader as announced
 * recently, or -1. */
int gs_cl_hinted_leader(const struct gs_cluster *cl, const struct cgroup *grp);
/* Where to send a client for a group this node is not a member of: the
 * announced leader, else a member heard from recently (preferred first),
 * else the preferred leader. */
unsigned gs_cl_redirect_node(const struct gs_cluster *cl, const struct cgroup *grp);

/* A PUBLISH ran here: send it to every other node's subscribers (one
 * datagram each, at most once; nothing when the hints socket is off or
 * the message does not fit in a datagram). */
void gs_cl_forward_publish(struct gs_cluster *cl, const char *ch, size_t chlen, const char *msg,
                           size_t msglen);

/* ---- cluster_block.c ---- */

/* Blocking commands in cluster mode: make grp's database serve its
 * blocked clients through the group's log (gs_db.block_relay). */
void gs_cl_block_init(struct cgroup *grp);
/* Each loop iteration: when this node has lost a group's leadership,
 * unblock the clients blocked in it (-UNBLOCKED); when a group's leader
 * changed, remove the shard channels of its slots (sunsubscribe), as
 * Redis 7.0 does. */
void gs_cl_block_leadership(struct gs_cluster *cl);
/* Each cron tick: unblock the clients blocked on a slot that has moved
 * (-MOVED) or in a group not led here (-UNBLOCKED), and remove the shard
 * channels of slots reassigned or no longer held here (sunsubscribe). */
void gs_cl_block_cron(struct gs_cluster *cl);
/* This node leaves grp (its store goes): every client blocked in it is
 * sent where the slot is served (-MOVED). */
void gs_cl_block_leave(struct gs_cluster *cl, struct cgroup *grp);

/* ---- cluster_expire.c ---- */

/* Each cron tick: propose the expiry of every led group's due keys, and
 * give every group's store its upkeep. */
void gs_cl_cron(struct gs_cluster *cl, int64_t now_ms);
/* Apply an EXPIRE_ENTRY of group grp: delete each key expired at now_ms. */
void gs_cl_apply_expire(struct cgroup *grp, struct gs_store *store, int64_t now_ms, unsigned nkeys,
                        const char *const *keys, const size_t *klen, struct core_buf *out);

/* ---- cluster_meta.c: the metadata Raft group ---- */

/* The meta group's number on Raft ports: no node's group has it
 * (gs_cl_clashes). */
#define META_MUX_GROUP 0x6d657461u /* "meta" */
/* Voters: the first min(META_VOTERS, N) nodes of the membership by name. */
#define META_VOTERS 3
/* Requested changes waiting at once (CLUSTER MEMBERSHIP ADD refuses more). */
#define META_QUEUE_MAX 16

/* Start this node's replica of the meta group when it is a voter of the
 * membership it serves (bootstrapped when DIR/meta holds no state). 0 or
 * a CORE_E* code (logged). */
int gs_cl_meta_start(struct gs_cluster *cl);
/* Each cron tick: join the group when made a voter; at the leader, record
 * the membership, run the queue's head (a coordinator thread), pop it
 * once done; elsewhere stop a coordinator. */
void gs_cl_meta_cron(struct gs_cluster *cl);
/* Close the group (asynchronously, counted in cl->closing) and stop the
 * coordinator. */
void gs_cl_meta_stop(struct gs_cluster *cl);
/* After the loop ran dry: join the coordinator, release. */
void gs_cl_meta_free(struct gs_cluster *cl);
/* CLUSTER MEMBERSHIP ADD|REMOVE NAME and QUEUE. False when argv is not
 * one of them. */
bool gs_cl_meta_command(struct gs_cluster *cl, struct gs_client *c, size_t argc,
                        struct gs_arg *argv);
/* A "meta:..." line for GRIDSYNC GROUPS, appended to out. */
void gs_cl_meta_info(struct gs_cluster *cl, char *out, size_t outlen);

/* ---- cluster_meta_coord.c: one change, on a thread of its own ---- */

struct gs_meta_job;
/* Run the change (add or remove node) from the membership current on a
 * new thread. 0 (the caller owns *out: gs_meta_job_free) or CORE_ENOMEM. */
int gs_meta_job_start(struct gs_meta_job **out, uint64_t seq, bool add, const char *node,
                      const struct gs_membership *current);
/* Has the thread returned (done, or stopped)? */
bool gs_meta_job_done(struct gs_meta_job *j);
/* Once done: true when the change completed; *version is the one FINISH
 * gave. */
bool gs_meta_job_result(struct gs_meta_job *j, uint64_t *version);
/* Ask the thread to stop at its next step (it returns within one I/O
 * timeout). */
void gs_meta_job_stop(struct gs_meta_job *j);
/* Stop, join and release; NULL is ignored. */
void gs_meta_job_free(struct gs_meta_job *j);

/* ---- cluster.c: a closed group's completion ---- */
void gs_cl_group_closed(void *cl);

/* ---- cluster_migrate.c ---- */

/* Start the target's groups this node is missing and give every group of
 * the target its desired replica set. 0 or the first start error. */
int gs_cl_apply_target(struct gs_cluster *cl);
/* Apply a MIGRATE_ENTRY entry (argv[0] is its operation) of group grp. */
void gs_cl_migrate_exec(struct cgroup *grp, struct gs_store *store, int64_t now_ms, unsigned argc,
                        const char *const *argv, const size_t *argvlen, struct core_buf *out);
/* gs_fsm_config.state_encode / state_restore of a group (ctx: its
 * cgroup): the slot migration state its log built (blocked and gone slots,
 * with their destinations by name), carried in its snapshots. Routing
 * (cl->serve) is not: during a change the group takes no snapshot
 * (gs_group_hold_snapshots), so its switch and own entries stay in the
 * log. */
int gs_cl_migration_encode(void *ctx, struct core_buf *b);
int gs_cl_migration_restore(void *ctx, const char *p, size_t len);
/* The index of the live node named p[0..len), or -1. */
int gs_cl_find_node(const struct gs_cluster *cl, const char *p, size_t len);

#endif
