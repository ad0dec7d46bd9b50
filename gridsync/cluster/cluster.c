/*
 * Cluster mode: placement, the node's Raft groups, routing and replicated
 * writes (the model is in cluster.h and docs/gridsync-cluster.md). Adding
 * and removing nodes is in cluster_migrate.c, active expiry in
 * cluster_expire.c, the node feature (hooks, options, read-through fills)
 * in cluster_feature.c, the node table (peer addresses, ids, accessors) in
 * cluster_peers.c; the state they share is in cluster_internal.h.
 *
 * Invariants:
 *  1. A client has at most one replicated write in flight (c->wait), and
 *     none of its later requests is parsed before that write's reply is
 *     in its output buffer (node.c's on_data stops while c->wait is set;
 *     the completion calls core_conn_redeliver).
 *  2. A wait record outlives its client: the client detaches it on close
 *     (wait->c = NULL) and the completion returns it to the free list.
 *  3. Entries are applied through the same command handlers as direct
 *     execution, with a database context built for the entry: the group's
 *     store at the entry's time (now_ms carried in the entry), so every
 *     replica computes the same state; the proposer's reply is the one it
 *     computed while applying. Nothing here changes the node's fields.
 *
 * Entry arguments: [protocol version "2"/"3", command name, args...], so
 * that the reply computed at apply time is in the client's protocol.
 */
#include "gridsync/cluster/cluster.h"
#include "gridsync/cluster/cluster_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/addr.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/log.h"
#include "gridsync/client/blocking.h"
#include "gridsync/client/node_ctx.h"
#include "gridsync/commands/cmd_set.h"
#include "gridsync/commands/commands.h"
#include "gridsync/commands/monitor.h"
#include "gridsync/commands/multi.h"
#include "gridsync/cluster/membership.h"
#include "gridsync/cluster/raft_glue.h"
#include "gridsync/cluster/raft_store_dynamo.h"
#include "gridsync/cluster/ring.h"
#include "gridsync/cluster/slot.h"
#include "gridsync/store/store.h"

/* ---------------------------------------------------------------- setup */

static void cluster_exec(void *ctx, struct gs_store *store, int64_t now_ms, unsigned argc,
                         const char *const *argv, const size_t *argvlen, struct core_buf *out);
static void on_barrier_prepare(uv_prepare_t *h);

int gs_cl_start_group(struct gs_cluster *cl, struct cgroup *grp, bool join)
{
    struct gs_node *n = cl->node;
    char addrs[GS_RING_MAX_REPLICAS][GS_RING_NAME_MAX + 16];
    struct gs_raft_peer peers[GS_RING_MAX_REPLICAS];
    for (unsigned r = 0; r < grp->n_members; r++) {
        const struct cnode *m = &cl->nodes[grp->members[r]];
        core_addr_format(addrs[r], sizeof(addrs[r]), m->host, m->port + RAFT_PORT_OFFSET);
        peers[r] = (struct gs_raft_peer){m->raft_id, addrs[r]};
    }
    if (grp->g == cl->self) {
        grp->db.store = n->dbs[0].store;
    } else {
        struct gs_store_config scfg = {
            .maxmemory = (uint64_t)n->cfg.maxmemory,
            .policy = (enum gs_evict_policy)n->cfg.maxmemory_policy,
            .hash_seed = core_hash64(&grp, sizeof(grp), (uint64_t)n->start_wall_ms),
        };
        int rc = gs_store_new(&grp->db.store, &scfg);
        if (rc)
            return rc;
        grp->own_store = true;
        /* Its keys may be WATCHed (cluster_txn.c) as database 0's are. */
        grp->db.node = n;
        if ((rc = gs_multi_watch_db(n, &grp->db)) != 0) {
            gs_store_free(grp->db.store);
            grp->db.store = NULL;
            grp->own_store = false;
            return rc;
        }
    }
    gs_cl_block_init(grp); /* its blocked clients are served through its log */
    /* The group's reads miss as the node's database 0 does (read-through). */
    grp->db.miss = n->dbs[0].miss;
    grp->db.miss_ctx = n->dbs[0].miss_ctx;
    char dir[CORE_OPT_STRLEN + GS_RING_NAME_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/group-%s", n->cfg.dir[0] ? n->cfg.dir : ".",
             cl->nodes[grp->g].name);
    for (char *p = dir + strlen(n->cfg.dir); *p; p++)
        if (*p == ':')
            *p = '_';
    struct gs_raft_store_config store;
    if (gs_cl_raft_store_dynamo(&n->cfg)) {
        memset(&store, 0, sizeof(store));
        int rc = gs_cl_dynamo_config(&n->cfg, n->cfg.raft_store, &store.ddb);
        if (rc)
            return rc;
    }
    struct gs_group_config gcfg = {
        .id = cl->nodes[cl->self].raft_id,
        .dir = dir,
        .peers = peers,
        .n_peers = grp->n_members,
        .preferred_leader = cl->nodes[grp->g].raft_id,
        /* A snapshot encodes the whole shard (in a fork()ed child unless
         * cluster-snapshot-fork is off), so it stays rare: every
         * cluster-snapshot-entries entries (each entry is a loop
         * iteration's batch), keeping an eighth of that in the log so
         * that a briefly absent follower catches up without one. */
        .snapshot_threshold = (unsigned)n->cfg.cluster_snapshot_entries,
        .snapshot_trailing = (unsigned)(n->cfg.cluster_snapshot_entries / 8),
        .mux = cl->mux,
        .mux_group = cl->nodes[grp->g].mux_group,
        .join = join,
        .store = gs_cl_raft_store_dynamo(&n->cfg) ? &store : NULL,
        .fsm = {.store = grp->db.store,
                .exec = cluster_exec,
                .exec_ctx = grp,
                .state_encode = gs_cl_migration_encode,
                .state_restore = gs_cl_migration_restore,
                .state_valid = gs_slot_state_valid,
                .state_ctx = grp,
                .max_inflight = (unsigned)n->cfg.cluster_inflight_entries,
                .snapshot_fork = n->cfg.cluster_snapshot_fork},
    };
    int rc = gs_group_start(&grp->raft, n->loop, &gcfg);
    if (rc) {
        CORE_WARN("cluster: cannot start the Raft group of %s in %s", cl->nodes[grp->g].name, dir);
        if (grp->own_store) {
            gs_multi_unwatch_db(n, &grp->db);
            gs_store_free(grp->db.store); /* a later attempt makes a new one */
        }
        grp->db.store = NULL;
        grp->own_store = false;
        grp->raft = NULL;
    } else
        CORE_INFO("cluster: member %d of the group of %s (raft %s, data %s%s)", grp->role,
                  cl->nodes[grp->g].name, addrs[grp->role], dir, join ? ", joining" : "");
    return rc;
}

/* The node index of ring index i. */
static unsigned map_ring(struct gs_cluster *cl, const struct gs_ring *r, unsigned i)
{
    const char *name = gs_ring_node_name(r, i);
    for (unsigned k = 0; k < cl->n; k++)
        if (!cl->nodes[k].removed && strcmp(cl->nodes[k].name, name) == 0)
            return k;
    return 0; /* unreachable: every ring name is a node */
}

void gs_cl_build_map(struct gs_cluster *cl, const struct gs_ring *r, unsigned *map)
{
    for (unsigned i = 0; i < gs_ring_nodes(r); i++)
        map[i] = map_ring(cl, r, i);
}

/* Group g's replica set (node indexes) in ring r, or 0 if g is not in r. */
unsigned gs_cl_ring_members(struct gs_cluster *cl, const struct gs_ring *r, const unsigned *map,
                            unsigned g, unsigned *out)
{
    for (unsigned i = 0; i < gs_ring_nodes(r); i++) {
        if (map[i] != g)
            continue;
        unsigned m = gs_ring_group_replicas(r, i, out);
        for (unsigned k = 0; k < m; k++)
            out[k] = map[out[k]];
        return m;
    }
    return 0;
}

void gs_cl_set_members(struct cgroup *grp, const unsigned *m, unsigned n, unsigned self)
{
    memcpy(grp->members, m, n * sizeof(*m));
    grp->n_members = n;
    grp->role = -1;
    for (unsigned r = 0; r < n; r++)
        if (m[r] == self)
            grp->role = (int)r;
}

void gs_cl_serve_ring(struct gs_cluster *cl)
{
    for (unsigned s = 0; s < GS_SLOTS; s++)
        cl->serve[s] = (uint16_t)cl->rmap[gs_ring_owner_of_slot(cl->ring, s)];
}

int gs_cluster_new(struct gs_cluster **out, struct gs_node *n)
{
    struct gs_cluster *cl = calloc(1, sizeof(*cl));
    struct gs_membership *ms = malloc(sizeof(*ms));
    if (!cl || !ms) {
        free(cl);
        free(ms);
        return CORE_ENOMEM;
    }
    cl->node = n;
    cl->leaving = -1;
    char self[CORE_OPT_STRLEN + 24];
    /* As cluster-peers spells it: an IPv6 bind address in brackets. */
    core_addr_format(self, sizeof(self), n->cfg.bind, (int)n->cfg.port);
    int rc = gs_cl_learn_membership(&n->cfg, self, ms);
    if (rc == 0)
        rc = gs_cl_nodes_from(cl, ms);
    if (rc)
        goto fail;
    cl->self = cl->n;
    for (unsigned i = 0; i < cl->n; i++)
        if (strcmp(cl->nodes[i].name, self) == 0)
            cl->self = i;
    if (ms->replicas != (unsigned)n->cfg.cluster_replicas)
        CORE_INFO("cluster: %u replicas, as the membership says (not cluster-replicas %lld)",
                  ms->replicas, (long long)n->cfg.cluster_replicas);
    cl->version = ms->version;
    cl->replicas = ms->replicas;
    const char *names[GS_RING_MAX_NODES];
    for (unsigned i = 0; i < ms->n; i++)
        names[i] = ms->nodes[i];
    struct gs_ring_config rcfg = {0, ms->replicas};
    rc = gs_ring_new(&cl->ring, names, ms->n, &rcfg);
    /* A change in progress (a restart in the middle of one, or a node
     * started to be added) resumes: the same target as before. */
    if (rc == 0 && ms->change == GS_CHANGE_ADD)
        rc = gs_ring_with_node(cl->ring, ms->change_node, &cl->target);
    if (rc == 0 && ms->change == GS_CHANGE_REMOVE) {
        rc = gs_ring_without_node(cl->ring, ms->change_node, &cl->target);
        cl->leaving = gs_cl_find_node(cl, ms->change_node, strlen(ms->change_node));
    }
    if (rc) {
        CORE_WARN("cluster: cannot place %u nodes: %s", cl->n, core_strerror(rc));
        goto fail;
    }
    if ((rc = gs_cl_save_membership(cl)) != 0)
        goto fail;
    free(ms);
    ms = NULL;
    gs_cl_build_map(cl, cl->ring, cl->rmap);
    if (cl->target)
        gs_cl_build_map(cl, cl->target, cl->tmap);
    gs_cl_serve_ring(cl);
    cl->groups = calloc(GS_RING_MAX_NODES, sizeof(*cl->groups));
    if (!cl->groups) {
        rc = CORE_ENOMEM;
        goto fail;
    }
    for (unsigned g = 0; g < cl->n; g++) {
        struct cgroup *grp = &cl->groups[g];
        grp->cl = cl;
        grp->g = g;
        unsigned m[GS_RING_MAX_REPLICAS];
        unsigned nm = gs_cl_ring_members(cl, cl->ring, cl->rmap, g, m);
        gs_cl_set_members(grp, m, nm, cl->self);
    }
    char raft_addr[GS_RING_NAME_MAX + 16];
    core_addr_format(raft_addr, sizeof(raft_addr), cl->nodes[cl->self].host,
                     cl->nodes[cl->self].port + RAFT_PORT_OFFSET);
    rc = gs_raft_mux_start(&cl->mux, n->loop, raft_addr);
    if (rc) {
        CORE_WARN("cluster: cannot listen for Raft on %s", raft_addr);
        goto fail;
    }
    for (unsigned g = 0; g < cl->n; g++) {
        if (cl->groups[g].role >= 0 && (rc = gs_cl_start_group(cl, &cl->groups[g], false)) != 0)
            goto fail_started;
    }
    if (cl->target && (rc = gs_cl_apply_target(cl)) != 0)
        goto fail_started;
    if ((rc = gs_cl_meta_start(cl)) != 0)
        goto fail_started;
    /* Every read mode may park reads for a barrier (a new leader's first,
     * an expired lease's, or all of them). */
    uv_prepare_init(n->loop, &cl->barrier_prep);
    cl->barrier_prep.data = cl;
    uv_prepare_start(&cl->barrier_prep, on_barrier_prepare);
    cl->prep_started = true;
    if ((rc = gs_cl_hints_start(cl)) != 0)
        goto fail_started;
    CORE_INFO("cluster: node %u of %u (%s), replication factor %u", cl->self, cl->n,
              cl->nodes[cl->self].name, gs_ring_rf(cl->ring));
    *out = cl;
    return 0;

fail_started:
    /* Groups that did start close as the loop runs, then the Raft port:
     * the caller runs the loop, then frees *out (see cluster.h). */
    gs_cluster_stop(cl);
    *out = cl;
    return rc;
fail:
    free(ms);
    gs_ring_free(cl->ring);
    gs_ring_free(cl->target);
    free(cl->nodes);
    free(cl->groups);
    free(cl);
    return rc;
}

void gs_cl_group_closed(void *data)
{
    struct gs_cluster *cl = data;
    if (--cl->closing == 0 && cl->mux) {
        gs_raft_mux_close(cl->mux, NULL, NULL);
        cl->mux = NULL;
    }
}

int gs_cl_keep_closed(struct gs_cluster *cl, struct gs_group *g)
{
    if (cl->n_closed == cl->cap_closed) {
        unsigned cap = cl->cap_closed ? 2 * cl->cap_closed : 8;
        struct gs_group **p = realloc(cl->closed, cap * sizeof(*p));
        if (!p)
            return CORE_ENOMEM;
        cl->closed = p;
        cl->cap_closed = cap;
    }
    cl->closed[cl->n_closed++] = g;
    return 0;
}

void gs_cluster_stop(struct gs_cluster *cl)
{
    if (cl->prep_started) {
        uv_close((uv_handle_t *)&cl->barrier_prep, NULL);
        cl->prep_started = false;
    }
    gs_cl_hints_stop(cl);
    gs_cl_meta_stop(cl);
    for (unsigned g = 0; g < cl->n; g++) {
        if (cl->groups[g].raft) {
            cl->closing++;
            (void)gs_cl_keep_closed(cl, cl->groups[g].raft);
            gs_group_close(cl->groups[g].raft, gs_cl_group_closed, cl);
            cl->groups[g].raft = NULL;
        }
    }
    /* The Raft port closes after the last group (on_group_closed). */
    if (cl->closing == 0 && cl->mux) {
        gs_raft_mux_close(cl->mux, NULL, NULL);
        cl->mux = NULL;
    }
}

void gs_cluster_free(struct gs_cluster *cl)
{
    if (!cl)
        return;
    for (unsigned g = 0; g < cl->n; g++) {
        if (cl->groups[g].own_store) {
            gs_multi_unwatch_db(cl->node, &cl->groups[g].db);
            gs_store_free(cl->groups[g].db.store);
        }
        free(cl->groups[g].slot_state);
        free(cl->groups[g].dest);
    }
    while (cl->free_waits) {
        struct gs_cluster_wait *w = cl->free_waits;
        cl->free_waits = w->next_free;
        free(w);
    }
    gs_cl_meta_free(cl);
    for (unsigned i = 0; i < cl->n_closed; i++)
        gs_group_free(cl->closed[i]);
    free(cl->closed);
    gs_ring_free(cl->ring);
    gs_ring_free(cl->target);
    free(cl->nodes);
    free(cl->groups);
    free(cl->seen_serve);
    free(cl->pargv);
    free(cl->plen);
    free(cl->xargv);
    core_buf_free(&cl->xout);
    core_buf_free(&cl->txn);
    gs_batch_reader_free(&cl->txn_rd);
    free(cl);
}

/* -------------------------------------------------------------- applying */

/* raft_glue's executor: run the entry's command through its ordinary
 * handler, against the group's store and at the entry's time (invariant
 * 3). The handler writes into a client that has no connection. */

static void cluster_exec(void *ctx, struct gs_store *store, int64_t now_ms, unsigned argc,
                         const char *const *argv, const size_t *argvlen, struct core_buf *out)
{
    struct cgroup *grp = ctx;
    struct gs_cluster *cl = grp->cl;
    struct gs_node *n = cl->node;
    if (argc >= 2 && argvlen[1] == sizeof(EXPIRE_ENTRY) - 1 &&
        memcmp(argv[1], EXPIRE_ENTRY, argvlen[1]) == 0) {
        gs_cl_apply_expire(grp, store, now_ms, argc - 2, argv + 2, argvlen + 2, out);
        return;
    }
    if (argc >= 3 && argvlen[1] == sizeof(MIGRATE_ENTRY) - 1 &&
        memcmp(argv[1], MIGRATE_ENTRY, argvlen[1]) == 0) {
        gs_cl_migrate_exec(grp, store, now_ms, argc - 2, argv + 2, argvlen + 2, out);
        return;
    }
    if (argc == 3 && argvlen[1] == sizeof(TXN_ENTRY) - 1 &&
        memcmp(argv[1], TXN_ENTRY, argvlen[1]) == 0) {
        gs_cl_apply_txn(grp, store, now_ms, argv[0][0] == '3' ? 3 : 2, argv[2], argvlen[2], out);
        return;
    }
    /* A SPOP with the leader's picks (cmd_set.h): the key is argv[2]. */
    static const struct gs_command spop_entry = {
        "spop", -4, GS_CMD_WRITE | GS_CMD_FAST, gs_spop_apply, 1, 1, 1, "set", "", ""};
    const struct gs_command *cmd = NULL;
    if (argc >= 4 && argvlen[1] == sizeof(SPOP_ENTRY) - 1 &&
        memcmp(argv[1], SPOP_ENTRY, argvlen[1]) == 0)
        cmd = &spop_entry;
    else if (argc >= 2)
        cmd = gs_command_lookup(n, argv[1], argvlen[1]);
    if (cmd && grp->slot_state && cmd->first_key > 0 && (size_t)cmd->first_key + 1 < argc) {
        /* Checked again at apply time, against this group's log only: a
         * write proposed before the slot was blocked but ordered after the
         * block must not change a slot whose keys were already copied. */
        unsigned slot = gs_key_slot(argv[cmd->first_key + 1], argvlen[cmd->first_key + 1]);
        if (grp->slot_state[slot] != GS_SLOT_SERVING) {
            static const char err[] = "-TRYAGAIN the slot is moving to another node\r\n";
            core_buf_append(out, err, sizeof(err) - 1);
            return;
        }
    }
    if (!cmd || !(cmd->flags & GS_CMD_WRITE)) {
        static const char err[] = "-ERR not a replicated command\r\n";
        core_buf_append(out, err, sizeof(err) - 1);
        return;
    }
    /* Redis's processCommand: evict before a command that may add memory,
     * and refuse it when nothing can go (maxmemory applies to each shard's
     * store on each replica; see docs/gridsync-cluster.md). */
    if ((cmd->flags & GS_CMD_DENYOOM) && n->cfg.maxmemory > 0 &&
        gs_store_make_room(store) == CORE_ENOMEM) {
        static const char err[] = "-OOM command not allowed when used memory > 'maxmemory'.\r\n";
        core_buf_append(out, err, sizeof(err) - 1);
        return;
    }
    grp->last_entry_ms = now_ms;
    gs_cl_apply_command(grp, store, now_ms, argvlen[0] == 1 && argv[0][0] == '3' ? 3 : 2, cmd,
                        argc - 1, argv + 1, argvlen + 1, out);
}

void gs_cl_apply_command(struct cgroup *grp, struct gs_store *store, int64_t now_ms, int proto,
                         const struct gs_command *cmd, unsigned argc, const char *const *argv,
                         const size_t *argvlen, struct core_buf *out)
{
    struct gs_cluster *cl = grp->cl;
    struct gs_node *n = cl->node;
    if (cl->xcap < argc) {
        struct gs_arg *a = realloc(cl->xargv, argc * sizeof(*a));
        if (!a) {
            static const char err[] = "-OOM out of memory applying a replicated command\r\n";
            core_buf_append(out, err, sizeof(err) - 1);
            return;
        }
        cl->xargv = a;
        cl->xcap = argc;
    }
    for (unsigned i = 0; i < argc; i++)
        cl->xargv[i] = (struct gs_arg){argv[i], argvlen[i]};

    /* The entry's own database context: the group's store at the entry's
     * time (client.h). */
    struct gs_db edb = {.store = store, .now_ms = now_ms, .id = grp->db.id, .ready_db = &grp->db};
    struct gs_client fc = {0};
    fc.node = n;
    fc.db = &edb;
    fc.shared = &n->shared;
    cl->xout.len = 0;
    fc.w.buf = &cl->xout;
    fc.w.proto = proto;
    fc.authenticated = true;
    fc.replica_apply = true;
    fc.last_cmd = cmd->name;
    cmd->fn(&fc, argc, cl->xargv);
    core_buf_append(out, cl->xout.data, cl->xout.len);
}

/* --------------------------------------------------------------- routing */

void gs_cl_reply_moved(struct gs_client *c, unsigned slot, const struct cnode *to)
{
    gs_errorf(c, "MOVED %u %s:%d", slot, to->host, to->port);
}

int gs_cl_leader_of(const struct gs_cluster *cl, const struct cgroup *grp)
{
    uint64_t id;
    if (!grp->raft)
        return gs_cl_hinted_leader(cl, grp);
    if (gs_group_leader(grp->raft, &id, NULL, 0) == 0)
        for (unsigned i = 0; i < cl->n; i++)
            if (cl->nodes[i].raft_id == id && !cl->nodes[i].removed)
                return (int)i;
    return -1;
}

struct gs_cluster_wait *gs_cl_wait_get(struct gs_cluster *cl)
{
    struct gs_cluster_wait *w = cl->free_waits;
    if (w) {
        cl->free_waits = w->next_free;
        return w;
    }
    return calloc(1, sizeof(*w));
}

void gs_cl_wait_put(struct gs_cluster *cl, struct gs_cluster_wait *w)
{
    w->c = NULL;
    w->next_free = cl->free_waits;
    cl->free_waits = w;
}

static void on_write_done(void *data, int status, const char *reply, size_t len)
{
    struct gs_cluster_wait *w = data;
    struct gs_cluster *cl = w->cl;
    struct gs_client *c = w->c;
    unsigned slot = w->slot, g = w->group;
    gs_cl_wait_put(cl, w);
    if (!c)
        return; /* the client left meanwhile */
    c->wait = NULL;
    if (status == 0) {
        gs_reply_raw(&c->w, reply, len);
    } else if (status == CORE_ESTATE) {
        /* Not applied: the client may safely retry where we send it. */
        int l = gs_cl_leader_of(cl, &cl->groups[g]);
        if (l >= 0 && (unsigned)l != cl->self)
            gs_cl_reply_moved(c, slot, &cl->nodes[l]);
        else
            gs_error(c, "TRYAGAIN leadership is changing, the write was not applied");
    } else if (status == CORE_ETIMEOUT) {
        gs_error(c,
                 "ERR write outcome unknown: proposed, but its leader changed or its group closed "
                 "before this node learnt whether it committed");
    } else if (status == CORE_ECLOSED) {
        gs_error(c, "TRYAGAIN the group closed here before the write was proposed; it was "
                    "not applied");
    } else {
        gs_error_oom(c);
    }
    core_conn_redeliver(c->conn);
}

/* ---- linearizable reads ------------------------------------------------
 *
 * A read at a leader that may not answer from its store at once
 * (gs_fsm_read_now: always in cluster-read-mode barrier; in lease mode
 * when the lease has run out; in every mode before the leader has applied
 * an entry of its term) waits, its request left unconsumed, for a Raft
 * barrier issued after it arrived. A committed barrier proves that this
 * node was still the leader after the read arrived and has applied every
 * entry committed before, so the store then holds every write acknowledged
 * before it (Raft thesis 6.4); it also renews the lease. One barrier per
 * group per loop iteration serves all the reads that arrived in it. */

static void on_barrier_done(void *data, int status)
{
    struct gs_cluster_wait *w = data;
    while (w) {
        struct gs_cluster_wait *next = w->next_free;
        struct gs_cluster *cl = w->cl;
        struct gs_client *c = w->c;
        gs_cl_wait_put(cl, w);
        if (c) {
            c->wait = NULL;
            c->read_barrier = status == 0 ? 1 : -1;
            core_conn_redeliver(c->conn);
        }
        w = next;
    }
}

static void on_barrier_prepare(uv_prepare_t *h)
{
    struct gs_cluster *cl = h->data;
    /* Clients blocked on keys that applied entries made ready start their
     * pops now, before the groups' prepare handles flush this iteration's
     * batches (cluster_block.c). */
    gs_cl_block_leadership(cl); /* before serving: a lost group's clients go */
    if (cl->node->blocking)
        gs_blocking_serve_ready(cl->node->blocking);
    for (unsigned g = 0; g < cl->n; g++) {
        struct cgroup *grp = &cl->groups[g];
        struct gs_cluster_wait *list = grp->reads;
        if (!list)
            continue;
        grp->reads = NULL;
        if (!grp->raft || gs_group_barrier(grp->raft, on_barrier_done, list) != 0)
            on_barrier_done(list, CORE_ESTATE);
    }
}

bool gs_cl_defer(struct gs_cluster *cl, struct cgroup *grp, struct gs_client *c, unsigned slot)
{
    struct gs_cluster_wait *w = gs_cl_wait_get(cl);
    if (!w) {
        gs_error_oom(c);
        return true;
    }
    *w = (struct gs_cluster_wait){grp->reads, cl, c, slot, grp->g, 0, 0};
    grp->reads = w;
    c->wait = w;
    c->replay = true;
    return true;
}

/* Fill cl->pargv/plen with an entry's arguments: [protocol, argv...].
 * Returns false when out of memory. */
static bool propose_args(struct gs_cluster *cl, struct gs_client *c, size_t argc,
                         struct gs_arg *argv)
{
    size_t need = argc + 1;
    if (cl->pcap < need) {
        const char **a = realloc(cl->pargv, need * sizeof(*a));
        if (!a)
            return false;
        cl->pargv = a;
        size_t *l = realloc(cl->plen, need * sizeof(*l));
        if (!l)
            return false;
        cl->plen = l;
        cl->pcap = need;
    }
    cl->pargv[0] = c->w.proto == 3 ? "3" : "2";
    cl->plen[0] = 1;
    for (size_t i = 0; i < argc; i++) {
        cl->pargv[i + 1] = argv[i].p;
        cl->plen[i + 1] = argv[i].len;
    }
    return true;
}

bool gs_cl_propose_entry(struct gs_cluster *cl, struct cgroup *grp, struct gs_client *c,
                         unsigned slot, unsigned argc, const char *const *argv,
                         const size_t *argvlen)
{
    struct gs_cluster_wait *w = gs_cl_wait_get(cl);
    if (!w) {
        gs_error_oom(c);
        return true;
    }
    *w = (struct gs_cluster_wait){NULL, cl, c, slot, grp->g, 0, 0};
    int rc = gs_fsm_submit(gs_group_fsm(grp->raft), argc, argv, argvlen, on_write_done, w);
    if (rc) {
        gs_cl_wait_put(cl, w);
        if (rc == CORE_ESTATE)
            gs_error(c, "TRYAGAIN leadership is changing");
        else
            gs_error_oom(c);
        return true;
    }
    c->wait = w;
    cl->node->shared.stats.commands++; /* counted on the node the client sent it to */
    return true;
}

bool gs_cl_propose(struct gs_cluster *cl, struct cgroup *grp, struct gs_client *c, unsigned slot,
                   size_t argc, struct gs_arg *argv)
{
    if (!propose_args(cl, c, argc, argv)) {
        gs_error_oom(c);
        return true;
    }
    return gs_cl_propose_entry(cl, grp, c, slot, (unsigned)argc + 1, cl->pargv, cl->plen);
}

/* SPOP: proposed with the members this leader picks from the state it
 * has applied, so that every replica pops the same ones (cmd_set.h). */
static bool propose_spop(struct gs_cluster *cl, struct cgroup *grp, struct gs_client *c,
                         unsigned slot, size_t argc, struct gs_arg *argv)
{
    struct gs_db *selected = c->db;
    grp->db.now_ms = c->db->now_ms;
    c->db = &grp->db;
    struct core_buf bytes = {0};
    struct gs_arg *hints;
    long k = gs_spop_hints(c, argc, argv, &bytes, &hints);
    c->db = selected;
    if (k <= 0) { /* no pick needed, or no memory for one: replicas pick */
        core_buf_free(&bytes);
        return gs_cl_propose(cl, grp, c, slot, argc, argv);
    }
    struct gs_arg *a = malloc(((size_t)k + 3) * sizeof(*a));
    bool done;
    if (!a) {
        done = gs_cl_propose(cl, grp, c, slot, argc, argv);
    } else {
        a[0] = (struct gs_arg){SPOP_ENTRY, sizeof(SPOP_ENTRY) - 1};
        a[1] = argv[1];
        a[2] = argc == 3 ? argv[2] : (struct gs_arg){"", 0};
        memcpy(a + 3, hints, (size_t)k * sizeof(*a));
        done = gs_cl_propose(cl, grp, c, slot, (size_t)k + 3, a);
        free(a);
    }
    free(hints);
    core_buf_free(&bytes);
    return done;
}

/* The positions of cmd's keys (gs_command_keys) in *pos: stack (cap
 * entries) or, beyond, an array to free when it is not stack. Returns
 * their number (0: none or a malformed count), or -1 out of memory. */
static long key_positions(const struct gs_command *cmd, size_t argc, const struct gs_arg *argv,
                          size_t *stack, size_t cap, size_t **pos)
{
    long n = gs_command_keys(cmd, argc, argv, stack, cap);
    *pos = stack;
    if (n <= 0)
        return 0;
    if ((size_t)n > cap) {
        *pos = malloc((size_t)n * sizeof(**pos));
        if (!*pos)
            return -1;
        gs_command_keys(cmd, argc, argv, *pos, (size_t)n);
    }
    return n;
}

/* Does any of the command's keys exist in grp's store (live now)? */
static bool any_key_here(struct cgroup *grp, int64_t now, const struct gs_command *cmd, size_t argc,
                         struct gs_arg *argv)
{
    size_t stack[64], *pos;
    long n = key_positions(cmd, argc, argv, stack, 64, &pos);
    bool found = n < 0; /* out of memory: as if present (writes then wait) */
    for (long i = 0; i < n && !found; i++)
        found = gs_store_lookup(grp->db.store, argv[pos[i]].p, argv[pos[i]].len, now,
                                GS_LOOKUP_NOTOUCH) != NULL;
    if (pos != stack)
        free(pos);
    return found;
}

int gs_cl_command_keys(const struct gs_command *cmd, size_t argc, const struct gs_arg *argv,
                       unsigned *slot)
{
    size_t stack[64], *pos;
    long n = key_positions(cmd, argc, argv, stack, 64, &pos);
    if (n <= 0)
        return n < 0 ? -1 : 0; /* out of memory: refused as CROSSSLOT */
    int rc = 1;
    *slot = gs_key_slot(argv[pos[0]].p, argv[pos[0]].len);
    for (long i = 1; i < n && rc == 1; i++)
        if (gs_key_slot(argv[pos[i]].p, argv[pos[i]].len) != *slot)
            rc = -1;
    if (pos != stack)
        free(pos);
    return rc;
}

/* Whether a blocking command finds a key to pop from: BLMOVE and
 * BRPOPLPUSH pop from their first key only (the second receives). */
static bool source_key_here(struct cgroup *grp, int64_t now, const struct gs_command *cmd,
                            size_t argc, struct gs_arg *argv)
{
    if (cmd->first_key == 1 && cmd->last_key == 2)
        return gs_store_lookup(grp->db.store, argv[1].p, argv[1].len, now, GS_LOOKUP_NOTOUCH);
    return any_key_here(grp, now, cmd, argc, argv);
}

static void run_on(struct gs_cluster *cl, struct cgroup *grp, struct gs_client *c,
                   const struct gs_command *cmd, size_t argc, struct gs_arg *argv);

/* A keyed command at grp's leader: a write is proposed, a read served
 * now or parked for a barrier (gs_fsm_read_now). barrier is the outcome
 * of the read's barrier when it is parsed again (1 passed, -1 failed).
 * Returns false when this node is no longer the leader (the caller
 * redirects). */
static bool serve_at_leader(struct gs_cluster *cl, struct cgroup *grp, struct gs_client *c,
                            const struct gs_command *cmd, unsigned slot, bool write, int barrier,
                            bool asking, size_t argc, struct gs_arg *argv)
{
    if (barrier) {
        if (barrier > 0 && gs_group_is_leader(grp->raft)) {
            run_on(cl, grp, c, cmd, argc, argv);
            return true;
        }
        if (!asking)
            return false;
        gs_error(c, "TRYAGAIN leadership is changing");
        return true;
    }
    if (!gs_group_is_leader(grp->raft))
        return false;
    if (write) {
        /* shown where the client sent it (commands/monitor.h) */
        if (cl->node->nmonitors)
            gs_monitor_feed(c, cmd, NULL, argc, argv);
        if (cmd->fn == gs_cmd_spop)
            return propose_spop(cl, grp, c, slot, argc, argv);
        return gs_cl_propose(cl, grp, c, slot, argc, argv);
    }
    if (!gs_fsm_read_now(gs_group_fsm(grp->raft),
                         (enum gs_read_mode)cl->node->cfg.cluster_read_mode)) {
        c->asking = asking; /* for the replay */
        return gs_cl_defer(cl, grp, c, slot);
    }
    run_on(cl, grp, c, cmd, argc, argv);
    return true;
}

/* Run a read command against a group's store. */
static void run_on(struct gs_cluster *cl, struct cgroup *grp, struct gs_client *c,
                   const struct gs_command *cmd, size_t argc, struct gs_arg *argv)
{
    grp->db.now_ms = c->db->now_ms; /* the node's clock, set by gs_execute */
    if (!gs_group_is_leader(grp->raft) && grp->last_entry_ms > 0) {
        /* A replica read (READONLY) deletes expired keys it meets, so it
         * must judge expiry on the leader's clock, as of the last entry,
         * not on this node's: a later entry, stamped by the leader, must
         * find the same keys here as everywhere (invariant 3). */
        grp->db.now_ms = grp->last_entry_ms;
    }
    /* The command runs against the group's database, whatever the client
     * has selected; the selection is back once it returns. */
    struct gs_db *selected = c->db;
    c->db = &grp->db;
    gs_call(c, cmd, argc, argv);
    c->db = selected;
    if (cmd->fn == gs_cmd_watch && c->multi.watched)
        gs_cl_txn_watched(cl, grp, c);
}

/* FLUSHALL / FLUSHDB in cluster mode: as in Redis Cluster, a node empties
 * the slots it serves, i.e. every group it leads; each through its log. */
static void on_flush_part(void *data, int status, const char *reply, size_t len)
{
    struct gs_cluster_wait *w = data;
    if (status != 0 && w->status == 0)
        w->status = status;
    if (--w->pending > 0)
        return;
    struct gs_client *c = w->c;
    int st = w->status;
    gs_cl_wait_put(w->cl, w);
    if (!c)
        return;
    c->wait = NULL;
    if (st == 0)
        gs_reply_ok(&c->w);
    else
        gs_error(c, "TRYAGAIN leadership changed during FLUSHALL; some shards may be flushed");
    core_conn_redeliver(c->conn);
}

static bool flush_led_groups(struct gs_cluster *cl, struct gs_client *c, size_t argc,
                             struct gs_arg *argv)
{
    if (argc > 2 || (argc == 2 && !gs_arg_is(&argv[1], "async") && !gs_arg_is(&argv[1], "sync"))) {
        gs_error_syntax(c);
        return true;
    }
    struct gs_cluster_wait *w = gs_cl_wait_get(cl);
    if (!w || !propose_args(cl, c, argc, argv)) {
        if (w)
            gs_cl_wait_put(cl, w);
        gs_error_oom(c);
        return true;
    }
    *w = (struct gs_cluster_wait){NULL, cl, c, 0, 0, 1, 0};
    for (unsigned g = 0; g < cl->n; g++) {
        struct cgroup *grp = &cl->groups[g];
        if (!grp->raft || !gs_group_is_leader(grp->raft))
            continue;
        w->pending++;
        if (gs_fsm_submit(gs_group_fsm(grp->raft), (unsigned)argc + 1, cl->pargv, cl->plen,
                          on_flush_part, w) != 0) {
            w->pending--;
            w->status = CORE_ESTATE;
        }
    }
    /* The extra count taken above keeps w alive while submitting. */
    c->wait = w;
    on_flush_part(w, 0, NULL, 0);
    return true;
}

/* DBSIZE: the keys of every group this node leads (its share of the
 * cluster, as a Redis Cluster master reports its slots' keys). */
static void dbsize_led_groups(struct gs_cluster *cl, struct gs_client *c)
{
    uint64_t keys = 0;
    for (unsigned g = 0; g < cl->n; g++) {
        struct cgroup *grp = &cl->groups[g];
        if (grp->raft && gs_group_is_leader(grp->raft)) {
            struct gs_store_stats st;
            gs_store_stats(grp->db.store, &st);
            keys += st.keys;
        }
    }
    gs_reply_int(&c->w, (int64_t)keys);
}

/* Whether every key of a GS_CMD_MOVABLEKEYS command line is in slot;
 * *last gets the last key's position. */
bool gs_cluster_route(struct gs_cluster *cl, struct gs_client *c, const struct gs_command *cmd,
                      size_t argc, struct gs_arg *argv)
{
    bool write = (cmd->flags & GS_CMD_WRITE) != 0;
    /* Transactions (cluster_txn.c): a command queued inside MULTI is
     * routed as Redis Cluster does at queue time; EXEC of queued keyed
     * commands becomes one log entry. */
    if (c->multi.active && !gs_multi_runs_now(cmd))
        return gs_cl_txn_queue(cl, c, cmd, argc, argv);
    if (cmd->fn == gs_cmd_exec && c->multi.active && !c->multi.aborted && c->multi.has_slot)
        return gs_cl_txn_exec(cl, c);
    unsigned slot;
    int nkeys = gs_cl_command_keys(cmd, argc, argv, &slot);
    if (nkeys == 0) {
        if (cmd->fn == gs_cmd_flushdb || cmd->fn == gs_cmd_flushall)
            return flush_led_groups(cl, c, argc, argv);
        if (cmd->fn == gs_cmd_dbsize) {
            dbsize_led_groups(cl, c);
            return true;
        }
        if (cmd->fn == gs_cmd_publish) {
            /* Redis Cluster: the subscribers of every node get it; the
             * reply counts this node's. */
            gs_call(c, cmd, argc, argv);
            gs_cl_forward_publish(cl, argv[1].p, argv[1].len, argv[2].p, argv[2].len);
            return true;
        }
        if (write && !(cmd->flags & GS_CMD_MOVABLEKEYS)) {
            /* Any other keyless write would bypass the Raft logs and let
             * replicas diverge. (A command with a key count and none
             * found only replies its error.) */
            gs_errorf(c, "ERR '%s' is not supported in cluster mode", cmd->name);
            return true;
        }
        return false;
    }
    if (nkeys < 0) {
        gs_command_rejected(cl->node, cmd);
        gs_error(c, "CROSSSLOT Keys in request don't hash to the same slot");
        return true;
    }
    unsigned g = cl->serve[slot];
    struct cgroup *grp = &cl->groups[g];
    /* Set when this request is parsed again after its read barrier
     * (linearizable reads); it concerns this request only. */
    int barrier = c->read_barrier;
    c->read_barrier = 0;
    /* ASKING concerns the one command after it (kept for a read parked
     * for a barrier, which runs when parsed again). */
    bool asking = c->asking;
    c->asking = false;
    if (cl->target) {
        /* A slot coming to a group this node leads, before the group has
         * taken it over. A client sent by the old owner's -ASK (ASKING) is
         * served by that group: the old owner answers -ASK only for keys
         * it no longer holds and will never write again (see "Join and
         * leave"). Others get "retry" rather than MOVED back there. */
        unsigned to = cl->tmap[gs_ring_owner_of_slot(cl->target, slot)];
        struct cgroup *tg = &cl->groups[to];
        if (to != g && tg->raft && gs_group_is_leader(tg->raft)) {
            if (asking && (cmd->flags & GS_CMD_BLOCKING) && !c->multi.active &&
                !source_key_here(tg, c->db->now_ms, cmd, argc, argv)) {
                run_on(cl, tg, c, cmd, argc, argv); /* blocks there (cluster_block.c) */
                return true;
            }
            if (asking && serve_at_leader(cl, tg, c, cmd, slot, write, barrier, true, argc, argv))
                return true;
            if (!grp->raft || (grp->slot_state && grp->slot_state[slot] == GS_SLOT_GONE)) {
                gs_error(c, "TRYAGAIN the slot is moving to this node");
                return true;
            }
        }
    }
    if (!grp->raft) {
        gs_cl_reply_moved(c, slot, &cl->nodes[gs_cl_redirect_node(cl, grp)]);
        return true;
    }
    if (grp->slot_state && grp->slot_state[slot] != GS_SLOT_SERVING) {
        /* Migrating out (see "Join and leave"). After the switch every key
         * is at the new owner; before, the keys still here are served for
         * reads (writes wait: they would miss the copy), and a key not
         * here is the new owner's already (this group writes none in a
         * blocked slot): -ASK there, as Redis Cluster's source does. */
        bool gone = grp->slot_state[slot] == GS_SLOT_GONE;
        if (gone ||
            (gs_group_is_leader(grp->raft) && !any_key_here(grp, c->db->now_ms, cmd, argc, argv))) {
            unsigned to = grp->dest[slot];
            if (to == NO_GROUP) {
                gs_error(c, "TRYAGAIN the slot has moved to another node");
                return true;
            }
            int l = gs_cl_leader_of(cl, &cl->groups[to]);
            const struct cnode *nd = &cl->nodes[l >= 0 ? (unsigned)l : to];
            gs_errorf(c, "ASK %u %s:%d", slot, nd->host, nd->port);
            return true;
        }
        if (write) {
            gs_error(c, "TRYAGAIN the slot is moving to another node");
            return true;
        }
    }
    if ((cmd->flags & GS_CMD_BLOCKING) && !c->multi.active && gs_group_is_leader(grp->raft) &&
        !source_key_here(grp, c->db->now_ms, cmd, argc, argv)) {
        /* Nothing to pop: the client blocks here, at the slot's leader, in
         * the group's database; the pop that serves it is an entry of the
         * group's log (cluster_block.c). With a key to pop the command
         * goes through the log now, as its non-blocking form (the apply's
         * client may not block, blocking.h). */
        run_on(cl, grp, c, cmd, argc, argv);
        return true;
    }
    if (barrier || gs_group_is_leader(grp->raft)) {
        if (serve_at_leader(cl, grp, c, cmd, slot, write, barrier, false, argc, argv))
            return true;
    }
    if (!write && c->readonly) {
        run_on(cl, grp, c, cmd, argc, argv); /* a replica read: may be stale */
        return true;
    }
    int l = gs_cl_leader_of(cl, grp);
    if (l >= 0)
        gs_cl_reply_moved(c, slot, &cl->nodes[l]);
    else
        gs_error(c, "CLUSTERDOWN The cluster is down: no leader for this slot yet");
    return true;
}

void gs_cluster_apply_config(struct gs_cluster *cl)
{
    const struct gs_config *cfg = &cl->node->cfg;
    for (unsigned g = 0; g < cl->n; g++)
        if (cl->groups[g].own_store)
            gs_store_configure(cl->groups[g].db.store, (uint64_t)cfg->maxmemory,
                               (enum gs_evict_policy)cfg->maxmemory_policy);
}

void gs_cluster_client_closed(struct gs_client *c)
{
    if (c->wait) {
        c->wait->c = NULL;
        c->wait = NULL;
    }
}
