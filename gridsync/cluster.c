/*
 * Cluster mode: placement, the node's Raft groups, routing and replicated
 * writes (the model is in cluster.h and docs/gridsync-cluster.md).
 *
 * Invariants:
 *  1. A client has at most one replicated write in flight (c->wait), and
 *     none of its later requests is parsed before that write's reply is
 *     in its output buffer (node.c's on_data stops while c->wait is set;
 *     the completion calls core_conn_redeliver).
 *  2. A wait record outlives its client: the client detaches it on close
 *     (wait->c = NULL) and the completion returns it to the free list.
 *  3. Entries are applied through the same command handlers as direct
 *     execution, against the group's store and at the entry's time
 *     (now_ms carried in the entry), so every replica computes the same
 *     state; the proposer's reply is the one it computed while applying.
 *
 * Entry arguments: [protocol version "2"/"3", command name, args...], so
 * that the reply computed at apply time is in the client's protocol.
 */
#include "gridsync/cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/hash.h"
#include "core/log.h"
#include "gridsync/node.h"
#include "gridsync/raft_glue.h"
#include "gridsync/ring.h"
#include "gridsync/slot.h"

/* A node's Raft port (shared by all its groups: gs_raft_mux), as Redis
 * Cluster's bus port is the client port + 10000. */
#define RAFT_PORT_OFFSET 10000

/* The command name of migration entries in a group's log (not a client
 * command: only this file proposes it). */
#define MIGRATE_ENTRY "gs.migrate"

struct cnode {
    char name[GS_RING_NAME_MAX]; /* host:port, as in cluster-peers */
    char host[GS_RING_NAME_MAX];
    int port;
    char id[41];
    uint64_t raft_id;   /* from the name: the same on every node, whatever
                         * the order of the peer list */
    uint32_t mux_group; /* the number of this node's group on Raft ports */
    bool removed;       /* left the cluster (indexes are never reused) */
};

/* Per-slot migration state inside a group, changed only by entries of
 * that group's log (so every member agrees; see "Join and leave"). */
enum { SLOT_SERVING = 0, SLOT_BLOCKED = 1, SLOT_GONE = 2 };
#define NO_GROUP 0xffffu /* a destination this node does not know */

struct cgroup {
    struct gs_cluster *cl;
    unsigned g;
    unsigned members[GS_RING_MAX_REPLICAS];
    unsigned n_members;
    int role;                      /* this node's position in members, -1 if not a member */
    struct gs_cluster_wait *reads; /* waiting for the next read barrier */
    int64_t last_entry_ms;         /* time of the last entry applied here */
    struct gs_store *store;
    bool own_store; /* created here (not the node's) */
    struct gs_group *raft;
    uint8_t *slot_state; /* GS_SLOTS entries while migrating out, else NULL */
    uint16_t *dest;      /* the group a blocked slot moves to */
    bool holding;        /* snapshots held for a migration (until FINISH) */
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
    struct gs_ring *ring;   /* the placement being served */
    struct gs_ring *target; /* the placement being moved to, or NULL */
    unsigned rmap[GS_RING_MAX_NODES], tmap[GS_RING_MAX_NODES]; /* ring index -> node */
    int leaving;                                               /* node being removed, or -1 */
    uint16_t serve[GS_SLOTS];                                  /* slot -> group serving it here */
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
    struct gs_raft_mux *mux; /* this node's Raft port */
    unsigned closing;
    uv_prepare_t barrier_prep; /* one read barrier per group per iteration */
    bool prep_started;
};

/* ---------------------------------------------------------------- setup */

/* MurmurHash3's 64-bit finaliser: every input bit reaches every output
 * bit. */
static uint64_t mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

static int parse_peer(struct cnode *nd, const char *s, size_t len)
{
    if (len == 0 || len >= sizeof(nd->name))
        return CORE_EINVAL;
    memcpy(nd->name, s, len);
    nd->name[len] = '\0';
    char *colon = strrchr(nd->name, ':');
    if (!colon || colon == nd->name)
        return CORE_EINVAL;
    size_t hlen = (size_t)(colon - nd->name);
    memcpy(nd->host, nd->name, hlen);
    nd->host[hlen] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port <= 0 || port + RAFT_PORT_OFFSET > 65535)
        return CORE_EINVAL;
    nd->port = (int)port;
    /* A stable 40-hex id (Redis's node id shape) from the address, so
     * every node derives the same id for every other; mixed so that
     * addresses that differ in one digit do not share a long prefix. */
    uint64_t h[3];
    h[0] = mix64(core_fnv1a64(nd->name, strlen(nd->name)));
    h[1] = mix64(h[0] ^ 0x9e3779b97f4a7c15ull);
    h[2] = mix64(h[1] ^ 0x9e3779b97f4a7c15ull);
    snprintf(nd->id, sizeof(nd->id), "%016llx%016llx%08llx", (unsigned long long)h[0],
             (unsigned long long)h[1], (unsigned long long)(h[2] >> 32));
    /* Raft ids and group numbers derive from the name too, not from the
     * position in the peer list: a node restarted with the list as it is
     * after a join or a leave finds its groups' members unchanged. */
    nd->raft_id = h[0] ? h[0] : 1;
    nd->mux_group = (uint32_t)h[1];
    return 0;
}

/* Does node i share a name, raft id or group number with an earlier
 * node? (Derived from names by a 64-bit hash: a clash is astronomically
 * rare, but would silently merge two nodes' traffic.) */
static bool clashes(const struct gs_cluster *cl, unsigned i)
{
    for (unsigned k = 0; k < i; k++)
        if (!cl->nodes[k].removed && (strcmp(cl->nodes[k].name, cl->nodes[i].name) == 0 ||
                                      cl->nodes[k].raft_id == cl->nodes[i].raft_id ||
                                      cl->nodes[k].mux_group == cl->nodes[i].mux_group))
            return true;
    return false;
}

static int parse_peers(struct gs_cluster *cl, const char *list)
{
    unsigned cap = 1;
    for (const char *p = list; *p; p++)
        cap += *p == ',';
    if (cap > GS_RING_MAX_NODES)
        return CORE_EINVAL;
    /* Room for nodes added later (CLUSTER ADDNODE): groups point into
     * these arrays, so they never move. */
    cl->nodes = calloc(GS_RING_MAX_NODES, sizeof(*cl->nodes));
    if (!cl->nodes)
        return CORE_ENOMEM;
    cl->n = 0;
    const char *p = list;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        while (len && (*p == ' ')) {
            p++;
            len--;
        }
        if (len) {
            if (parse_peer(&cl->nodes[cl->n], p, len)) {
                CORE_WARN("cluster-peers: bad address '%.*s' (want host:port)", (int)len, p);
                return CORE_EINVAL;
            }
            if (clashes(cl, cl->n)) {
                CORE_WARN("cluster-peers: '%.*s' is listed twice (or its id clashes)", (int)len, p);
                return CORE_EINVAL;
            }
            cl->n++;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return cl->n ? 0 : CORE_EINVAL;
}

static void cluster_exec(void *ctx, struct gs_store *store, int64_t now_ms, unsigned argc,
                         const char *const *argv, const size_t *argvlen, struct gs_buf *out);
static void on_barrier_prepare(uv_prepare_t *h);

static int start_group(struct gs_cluster *cl, struct cgroup *grp, bool join)
{
    struct gs_node *n = cl->node;
    char addrs[GS_RING_MAX_REPLICAS][GS_RING_NAME_MAX + 16];
    struct gs_raft_peer peers[GS_RING_MAX_REPLICAS];
    for (unsigned r = 0; r < grp->n_members; r++) {
        const struct cnode *m = &cl->nodes[grp->members[r]];
        snprintf(addrs[r], sizeof(addrs[r]), "%s:%d", m->host, m->port + RAFT_PORT_OFFSET);
        peers[r] = (struct gs_raft_peer){m->raft_id, addrs[r]};
    }
    if (grp->g == cl->self) {
        grp->store = n->store;
    } else {
        struct gs_store_config scfg = {
            .maxmemory = (uint64_t)n->cfg.maxmemory,
            .policy = (enum gs_evict_policy)n->cfg.maxmemory_policy,
            .hash_seed = core_hash64(&grp, sizeof(grp), (uint64_t)n->start_wall_ms),
        };
        int rc = gs_store_new(&grp->store, &scfg);
        if (rc)
            return rc;
        grp->own_store = true;
    }
    char dir[CORE_OPT_STRLEN + GS_RING_NAME_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/group-%s", n->cfg.dir[0] ? n->cfg.dir : ".",
             cl->nodes[grp->g].name);
    for (char *p = dir + strlen(n->cfg.dir); *p; p++)
        if (*p == ':')
            *p = '_';
    struct gs_group_config gcfg = {
        .id = cl->nodes[cl->self].raft_id,
        .dir = dir,
        .peers = peers,
        .n_peers = grp->n_members,
        .preferred_leader = cl->nodes[grp->g].raft_id,
        /* A snapshot copies the whole shard on the loop thread, so it must
         * be rare: every cluster-snapshot-entries entries (each entry is a
         * loop iteration's batch), keeping an eighth of that in the log so
         * that a briefly absent follower catches up without one. */
        .snapshot_threshold = (unsigned)n->cfg.cluster_snapshot_entries,
        .snapshot_trailing = (unsigned)(n->cfg.cluster_snapshot_entries / 8),
        .mux = cl->mux,
        .mux_group = cl->nodes[grp->g].mux_group,
        .join = join,
        .fsm = {.store = grp->store, .exec = cluster_exec, .exec_ctx = grp},
    };
    int rc = gs_group_start(&grp->raft, n->loop, &gcfg);
    if (rc) {
        CORE_WARN("cluster: cannot start the Raft group of %s in %s", cl->nodes[grp->g].name, dir);
        if (grp->own_store)
            gs_store_free(grp->store); /* a later attempt makes a new one */
        grp->store = NULL;
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

static void build_map(struct gs_cluster *cl, const struct gs_ring *r, unsigned *map)
{
    for (unsigned i = 0; i < gs_ring_nodes(r); i++)
        map[i] = map_ring(cl, r, i);
}

/* Group g's replica set (node indexes) in ring r, or 0 if g is not in r. */
static unsigned ring_members(struct gs_cluster *cl, const struct gs_ring *r, const unsigned *map,
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

static void set_members(struct cgroup *grp, const unsigned *m, unsigned n, unsigned self)
{
    memcpy(grp->members, m, n * sizeof(*m));
    grp->n_members = n;
    grp->role = -1;
    for (unsigned r = 0; r < n; r++)
        if (m[r] == self)
            grp->role = (int)r;
}

static void serve_ring(struct gs_cluster *cl)
{
    for (unsigned s = 0; s < GS_SLOTS; s++)
        cl->serve[s] = (uint16_t)cl->rmap[gs_ring_owner_of_slot(cl->ring, s)];
}

/* Start the groups of the target placement this node belongs to and is
 * not running yet (a brand-new group is bootstrapped by its members, an
 * existing one is joined), and give every running group of the target its
 * desired replica set, which its leader converges to (raft_glue.h). */
static int apply_target(struct gs_cluster *cl)
{
    int rc = 0;
    for (unsigned i = 0; i < gs_ring_nodes(cl->target); i++) {
        unsigned g = cl->tmap[i];
        struct cgroup *grp = &cl->groups[g];
        unsigned m[GS_RING_MAX_REPLICAS];
        unsigned nm = ring_members(cl, cl->target, cl->tmap, g, m);
        unsigned old[GS_RING_MAX_REPLICAS];
        bool exists = ring_members(cl, cl->ring, cl->rmap, g, old) > 0;
        if (!grp->raft) {
            bool member = false;
            for (unsigned k = 0; k < nm; k++)
                member |= m[k] == cl->self;
            if (!member)
                continue;
            grp->cl = cl;
            grp->g = g;
            set_members(grp, m, nm, cl->self);
            int src = start_group(cl, grp, exists);
            if (src) {
                rc = src;
                continue;
            }
        }
        char addrs[GS_RING_MAX_REPLICAS][GS_RING_NAME_MAX + 16];
        struct gs_raft_peer peers[GS_RING_MAX_REPLICAS];
        for (unsigned k = 0; k < nm; k++) {
            snprintf(addrs[k], sizeof(addrs[k]), "%s:%d", cl->nodes[m[k]].host,
                     cl->nodes[m[k]].port + RAFT_PORT_OFFSET);
            peers[k] = (struct gs_raft_peer){cl->nodes[m[k]].raft_id, addrs[k]};
        }
        gs_group_set_desired(grp->raft, peers, nm);
    }
    return rc;
}

int gs_cluster_new(struct gs_cluster **out, struct gs_node *n)
{
    struct gs_cluster *cl = calloc(1, sizeof(*cl));
    if (!cl)
        return CORE_ENOMEM;
    cl->node = n;
    int rc = parse_peers(cl, n->cfg.cluster_peers);
    if (rc) {
        CORE_WARN("cluster: cluster-peers must list host:port of every node, this one included");
        goto fail;
    }
    char self[CORE_OPT_STRLEN + 24];
    snprintf(self, sizeof(self), "%s:%lld", n->cfg.bind, (long long)n->cfg.port);
    cl->self = cl->n;
    for (unsigned i = 0; i < cl->n; i++)
        if (strcmp(cl->nodes[i].name, self) == 0)
            cl->self = i;
    if (cl->self == cl->n) {
        CORE_WARN("cluster: this node (%s) is not in cluster-peers", self);
        rc = CORE_EINVAL;
        goto fail;
    }
    const char *names[GS_RING_MAX_NODES];
    /* A joining node (cluster-join) is the one being added: the cluster
     * serves the placement without it and moves to the one with it. */
    bool join = n->cfg.cluster_join && cl->n > 1;
    unsigned nn = 0;
    for (unsigned i = 0; i < cl->n; i++)
        if (!join || i != cl->self)
            names[nn++] = cl->nodes[i].name;
    struct gs_ring_config rcfg = {0, (unsigned)n->cfg.cluster_replicas};
    cl->leaving = -1;
    rc = gs_ring_new(&cl->ring, names, nn, &rcfg);
    if (rc == 0 && join)
        rc = gs_ring_with_node(cl->ring, cl->nodes[cl->self].name, &cl->target);
    if (rc) {
        CORE_WARN("cluster: cannot place %u nodes: %s", cl->n, core_strerror(rc));
        goto fail;
    }
    build_map(cl, cl->ring, cl->rmap);
    if (cl->target)
        build_map(cl, cl->target, cl->tmap);
    serve_ring(cl);
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
        unsigned nm = ring_members(cl, cl->ring, cl->rmap, g, m);
        set_members(grp, m, nm, cl->self);
    }
    char raft_addr[GS_RING_NAME_MAX + 16];
    snprintf(raft_addr, sizeof(raft_addr), "%s:%d", cl->nodes[cl->self].host,
             cl->nodes[cl->self].port + RAFT_PORT_OFFSET);
    rc = gs_raft_mux_start(&cl->mux, n->loop, raft_addr);
    if (rc) {
        CORE_WARN("cluster: cannot listen for Raft on %s", raft_addr);
        goto fail;
    }
    for (unsigned g = 0; g < cl->n; g++) {
        if (cl->groups[g].role >= 0 && (rc = start_group(cl, &cl->groups[g], false)) != 0)
            goto fail_started;
    }
    if (cl->target && (rc = apply_target(cl)) != 0)
        goto fail_started;
    if (n->cfg.cluster_linearizable_reads) {
        uv_prepare_init(n->loop, &cl->barrier_prep);
        cl->barrier_prep.data = cl;
        uv_prepare_start(&cl->barrier_prep, on_barrier_prepare);
        cl->prep_started = true;
    }
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
    gs_ring_free(cl->ring);
    gs_ring_free(cl->target);
    free(cl->nodes);
    free(cl->groups);
    free(cl);
    return rc;
}

static void on_group_closed(void *data)
{
    struct gs_cluster *cl = data;
    if (--cl->closing == 0 && cl->mux) {
        gs_raft_mux_close(cl->mux, NULL, NULL);
        cl->mux = NULL;
    }
}

void gs_cluster_stop(struct gs_cluster *cl)
{
    if (cl->prep_started) {
        uv_close((uv_handle_t *)&cl->barrier_prep, NULL);
        cl->prep_started = false;
    }
    for (unsigned g = 0; g < cl->n; g++) {
        if (cl->groups[g].raft) {
            cl->closing++;
            gs_group_close(cl->groups[g].raft, on_group_closed, cl);
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
        if (cl->groups[g].own_store)
            gs_store_free(cl->groups[g].store);
        free(cl->groups[g].slot_state);
        free(cl->groups[g].dest);
    }
    while (cl->free_waits) {
        struct gs_cluster_wait *w = cl->free_waits;
        cl->free_waits = w->next_free;
        free(w);
    }
    gs_ring_free(cl->ring);
    gs_ring_free(cl->target);
    free(cl->nodes);
    free(cl->groups);
    free(cl->pargv);
    free(cl->plen);
    free(cl->xargv);
    core_buf_free(&cl->xout);
    free(cl);
}

/* -------------------------------------------------------------- applying */

/* raft_glue's executor: run the entry's command through its ordinary
 * handler, against the group's store and at the entry's time (invariant
 * 3). The handler writes into a client that has no connection. */
static void migrate_exec(struct cgroup *grp, struct gs_store *store, int64_t now_ms, unsigned argc,
                         const char *const *argv, const size_t *argvlen, struct gs_buf *out);
static int find_node(const struct gs_cluster *cl, const char *p, size_t len);

static void cluster_exec(void *ctx, struct gs_store *store, int64_t now_ms, unsigned argc,
                         const char *const *argv, const size_t *argvlen, struct gs_buf *out)
{
    struct cgroup *grp = ctx;
    struct gs_cluster *cl = grp->cl;
    struct gs_node *n = cl->node;
    if (argc >= 3 && argvlen[1] == sizeof(MIGRATE_ENTRY) - 1 &&
        memcmp(argv[1], MIGRATE_ENTRY, argvlen[1]) == 0) {
        migrate_exec(grp, store, now_ms, argc - 2, argv + 2, argvlen + 2, out);
        return;
    }
    const struct gs_command *cmd = argc >= 2 ? gs_command_lookup(n, argv[1], argvlen[1]) : NULL;
    if (cmd && grp->slot_state && cmd->first_key > 0 && (size_t)cmd->first_key + 1 < argc) {
        /* Checked again at apply time, against this group's log only: a
         * write proposed before the slot was blocked but ordered after the
         * block must not change a slot whose keys were already copied. */
        unsigned slot = gs_key_slot(argv[cmd->first_key + 1], argvlen[cmd->first_key + 1]);
        if (grp->slot_state[slot] != SLOT_SERVING) {
            static const char err[] = "-TRYAGAIN the slot is moving to another node\r\n";
            gs_buf_append(out, err, sizeof(err) - 1);
            return;
        }
    }
    if (!cmd || !(cmd->flags & GS_CMD_WRITE)) {
        static const char err[] = "-ERR not a replicated command\r\n";
        gs_buf_append(out, err, sizeof(err) - 1);
        return;
    }
    if (cl->xcap < argc) {
        struct gs_arg *a = realloc(cl->xargv, argc * sizeof(*a));
        if (!a) {
            static const char err[] = "-OOM out of memory applying a replicated command\r\n";
            gs_buf_append(out, err, sizeof(err) - 1);
            return;
        }
        cl->xargv = a;
        cl->xcap = argc;
    }
    for (unsigned i = 1; i < argc; i++)
        cl->xargv[i - 1] = (struct gs_arg){argv[i], argvlen[i]};

    struct gs_client fc = {0};
    fc.node = n;
    cl->xout.len = 0;
    fc.w.buf = &cl->xout;
    fc.w.proto = argvlen[0] == 1 && argv[0][0] == '3' ? 3 : 2;
    fc.authenticated = true;
    fc.last_cmd = cmd->name;

    /* Redis's processCommand: evict before a command that may add memory,
     * and refuse it when nothing can go (maxmemory applies to each shard's
     * store on each replica; see docs/gridsync-cluster.md). */
    if ((cmd->flags & GS_CMD_DENYOOM) && n->cfg.maxmemory > 0 &&
        gs_store_make_room(store) == CORE_ENOMEM) {
        static const char err[] = "-OOM command not allowed when used memory > 'maxmemory'.\r\n";
        gs_buf_append(out, err, sizeof(err) - 1);
        return;
    }
    /* gs_node_now_ms reads wall_base_ms: shift it so that "now" is the
     * entry's time for the duration of the handler. */
    struct gs_store *saved_store = n->store;
    int64_t saved_base = n->wall_base_ms;
    grp->last_entry_ms = now_ms;
    n->store = store;
    n->wall_base_ms = now_ms - (int64_t)(uv_now(n->loop) - n->loop_base_ms);
    cmd->fn(&fc, argc - 1, cl->xargv);
    n->store = saved_store;
    n->wall_base_ms = saved_base;
    gs_buf_append(out, cl->xout.data, cl->xout.len);
}

/* --------------------------------------------------------------- routing */

static void reply_moved(struct gs_client *c, unsigned slot, const struct cnode *to)
{
    gs_errorf(c, "MOVED %u %s:%d", slot, to->host, to->port);
}

static int leader_of(const struct gs_cluster *cl, const struct cgroup *grp)
{
    uint64_t id;
    if (grp->raft && gs_group_leader(grp->raft, &id, NULL, 0) == 0)
        for (unsigned i = 0; i < cl->n; i++)
            if (cl->nodes[i].raft_id == id && !cl->nodes[i].removed)
                return (int)i;
    return -1;
}

static struct gs_cluster_wait *wait_get(struct gs_cluster *cl)
{
    struct gs_cluster_wait *w = cl->free_waits;
    if (w) {
        cl->free_waits = w->next_free;
        return w;
    }
    return calloc(1, sizeof(*w));
}

static void wait_put(struct gs_cluster *cl, struct gs_cluster_wait *w)
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
    wait_put(cl, w);
    if (!c)
        return; /* the client left meanwhile */
    c->wait = NULL;
    if (status == 0) {
        gs_reply_raw(&c->w, reply, len);
    } else if (status == CORE_ESTATE) {
        /* Not applied: the client may safely retry where we send it. */
        int l = leader_of(cl, &cl->groups[g]);
        if (l >= 0 && (unsigned)l != cl->self)
            reply_moved(c, slot, &cl->nodes[l]);
        else
            gs_error(c, "TRYAGAIN leadership is changing, the write was not applied");
    } else if (status == CORE_ETIMEOUT) {
        gs_error(c, "ERR write outcome unknown: the leader changed before it committed");
    } else if (status == CORE_ECLOSED) {
        gs_error(c, "ERR server is shutting down");
    } else {
        gs_error_oom(c);
    }
    core_conn_redeliver(c->conn);
}

/* ---- linearizable reads ------------------------------------------------
 *
 * With cluster-linearizable-reads, a read at a leader is not answered from
 * the store at once: the client waits (its request left unconsumed) for a
 * Raft barrier issued after it arrived. A committed barrier proves that
 * this node was still the leader after the read arrived, so the store then
 * holds every write acknowledged before it (Raft thesis 6.4). One barrier
 * per group per loop iteration serves all the reads that arrived in it. */

static void on_barrier_done(void *data, int status)
{
    struct gs_cluster_wait *w = data;
    while (w) {
        struct gs_cluster_wait *next = w->next_free;
        struct gs_cluster *cl = w->cl;
        struct gs_client *c = w->c;
        wait_put(cl, w);
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

/* Park a read until the next barrier of its group. */
static bool defer_read(struct gs_cluster *cl, struct cgroup *grp, struct gs_client *c,
                       unsigned slot)
{
    struct gs_cluster_wait *w = wait_get(cl);
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

static bool propose(struct gs_cluster *cl, struct cgroup *grp, struct gs_client *c, unsigned slot,
                    size_t argc, struct gs_arg *argv)
{
    size_t need = argc + 1;
    if (!propose_args(cl, c, argc, argv)) {
        gs_error_oom(c);
        return true;
    }
    struct gs_cluster_wait *w = wait_get(cl);
    if (!w) {
        gs_error_oom(c);
        return true;
    }
    *w = (struct gs_cluster_wait){NULL, cl, c, slot, grp->g, 0, 0};
    int rc = gs_fsm_submit(gs_group_fsm(grp->raft), (unsigned)need, cl->pargv, cl->plen,
                           on_write_done, w);
    if (rc) {
        wait_put(cl, w);
        if (rc == CORE_ESTATE)
            gs_error(c, "TRYAGAIN leadership is changing");
        else
            gs_error_oom(c);
        return true;
    }
    c->wait = w;
    cl->node->stats.commands++; /* counted on the node the client sent it to */
    return true;
}

/* Run a read command against a group's store. */
static void run_on(struct gs_cluster *cl, struct cgroup *grp, struct gs_client *c,
                   const struct gs_command *cmd, size_t argc, struct gs_arg *argv)
{
    struct gs_node *n = cl->node;
    struct gs_store *saved = n->store;
    int64_t saved_base = n->wall_base_ms;
    n->store = grp->store;
    if (!gs_group_is_leader(grp->raft) && grp->last_entry_ms > 0) {
        /* A replica read (READONLY) deletes expired keys it meets, so it
         * must judge expiry on the leader's clock, as of the last entry,
         * not on this node's: a later entry, stamped by the leader, must
         * find the same keys here as everywhere (invariant 3). */
        n->wall_base_ms = grp->last_entry_ms - (int64_t)(uv_now(n->loop) - n->loop_base_ms);
    }
    n->stats.commands++;
    c->last_cmd = cmd->name;
    cmd->fn(c, argc, argv);
    n->store = saved;
    n->wall_base_ms = saved_base;
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
    wait_put(w->cl, w);
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
    struct gs_cluster_wait *w = wait_get(cl);
    if (!w || !propose_args(cl, c, argc, argv)) {
        if (w)
            wait_put(cl, w);
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
            gs_store_stats(grp->store, &st);
            keys += st.keys;
        }
    }
    gs_reply_int(&c->w, (int64_t)keys);
}

bool gs_cluster_route(struct gs_cluster *cl, struct gs_client *c, const struct gs_command *cmd,
                      size_t argc, struct gs_arg *argv)
{
    bool write = (cmd->flags & GS_CMD_WRITE) != 0;
    if (cmd->first_key <= 0) {
        if (cmd->fn == gs_cmd_flushdb)
            return flush_led_groups(cl, c, argc, argv);
        if (cmd->fn == gs_cmd_dbsize) {
            dbsize_led_groups(cl, c);
            return true;
        }
        if (write) {
            /* Any other keyless write would bypass the Raft logs and let
             * replicas diverge. */
            gs_errorf(c, "ERR '%s' is not supported in cluster mode", cmd->name);
            return true;
        }
        return false;
    }
    /* Redis's key specs: a negative last_key counts from the end (-1 is the
     * last argument). */
    long lk = cmd->last_key < 0 ? (long)argc + cmd->last_key : cmd->last_key;
    size_t last = lk < 0 ? 0 : (size_t)lk;
    if (last >= argc)
        last = argc - 1;
    size_t step = cmd->key_step > 0 ? (size_t)cmd->key_step : 1;
    size_t first = (size_t)cmd->first_key;
    if (first >= argc)
        return false;
    unsigned slot = gs_key_slot(argv[first].p, argv[first].len);
    for (size_t i = first + step; i <= last; i += step) {
        if (gs_key_slot(argv[i].p, argv[i].len) != slot) {
            gs_error(c, "CROSSSLOT Keys in request don't hash to the same slot");
            return true;
        }
    }
    unsigned g = cl->serve[slot];
    struct cgroup *grp = &cl->groups[g];
    /* Set when this request is parsed again after its read barrier
     * (linearizable reads); it concerns this request only. */
    int barrier = c->read_barrier;
    c->read_barrier = 0;
    if (cl->target) {
        /* A slot coming to a group this node leads, before the group has
         * taken it over: the old owner sends clients here already, so
         * answer "retry" rather than MOVED back there. */
        unsigned to = cl->tmap[gs_ring_owner_of_slot(cl->target, slot)];
        struct cgroup *tg = &cl->groups[to];
        if (to != g && tg->raft && gs_group_is_leader(tg->raft) &&
            (!grp->raft || (grp->slot_state && grp->slot_state[slot] == SLOT_GONE))) {
            gs_error(c, "TRYAGAIN the slot is moving to this node");
            return true;
        }
    }
    if (!grp->raft) {
        reply_moved(c, slot, &cl->nodes[g]);
        return true;
    }
    if (grp->slot_state && grp->slot_state[slot] != SLOT_SERVING) {
        /* Migrating out (see "Join and leave"): reads are still served
         * here until the switch, writes wait for the new owner. */
        if (grp->slot_state[slot] == SLOT_GONE) {
            unsigned to = grp->dest[slot];
            if (to == NO_GROUP) {
                gs_error(c, "TRYAGAIN the slot has moved to another node");
                return true;
            }
            int l = leader_of(cl, &cl->groups[to]);
            reply_moved(c, slot, &cl->nodes[l >= 0 ? (unsigned)l : to]);
            return true;
        }
        if (write) {
            gs_error(c, "TRYAGAIN the slot is moving to another node");
            return true;
        }
    }
    if (barrier) {
        bool passed = barrier > 0;
        if (passed && gs_group_is_leader(grp->raft)) {
            run_on(cl, grp, c, cmd, argc, argv);
            return true;
        }
    } else if (gs_group_is_leader(grp->raft)) {
        if (write)
            return propose(cl, grp, c, slot, argc, argv);
        if (cl->node->cfg.cluster_linearizable_reads)
            return defer_read(cl, grp, c, slot);
        run_on(cl, grp, c, cmd, argc, argv);
        return true;
    }
    if (!write && c->readonly) {
        run_on(cl, grp, c, cmd, argc, argv); /* a replica read: may be stale */
        return true;
    }
    int l = leader_of(cl, grp);
    if (l >= 0)
        reply_moved(c, slot, &cl->nodes[l]);
    else
        gs_error(c, "CLUSTERDOWN The cluster is down: no leader for this slot yet");
    return true;
}

void gs_cluster_apply_config(struct gs_cluster *cl)
{
    const struct gs_config *cfg = &cl->node->cfg;
    for (unsigned g = 0; g < cl->n; g++)
        if (cl->groups[g].own_store)
            gs_store_configure(cl->groups[g].store, (uint64_t)cfg->maxmemory,
                               (enum gs_evict_policy)cfg->maxmemory_policy);
}

bool gs_cluster_may_expire(struct gs_cluster *cl)
{
    struct cgroup *own = &cl->groups[cl->self];
    return own->raft && gs_group_is_leader(own->raft);
}

void gs_cluster_client_closed(struct gs_client *c)
{
    if (c->wait) {
        c->wait->c = NULL;
        c->wait = NULL;
    }
}

/* ------------------------------------------------------------ accessors */

unsigned gs_cluster_nodes(const struct gs_cluster *cl)
{
    return cl->n;
}

unsigned gs_cluster_self(const struct gs_cluster *cl)
{
    return cl->self;
}

const char *gs_cluster_node_host(const struct gs_cluster *cl, unsigned i)
{
    return cl->nodes[i].host;
}

int gs_cluster_node_port(const struct gs_cluster *cl, unsigned i)
{
    return cl->nodes[i].port;
}

const char *gs_cluster_node_id(const struct gs_cluster *cl, unsigned i)
{
    return cl->nodes[i].id;
}

unsigned gs_cluster_slot_group(const struct gs_cluster *cl, unsigned slot)
{
    return cl->serve[slot];
}

bool gs_cluster_node_live(const struct gs_cluster *cl, unsigned i)
{
    return !cl->nodes[i].removed;
}

unsigned gs_cluster_group_leader(const struct gs_cluster *cl, unsigned g)
{
    int l = leader_of(cl, &cl->groups[g]);
    return l >= 0 ? (unsigned)l : g;
}

unsigned gs_cluster_group_members(const struct gs_cluster *cl, unsigned g, unsigned *out)
{
    const struct cgroup *grp = &cl->groups[g];
    memcpy(out, grp->members, grp->n_members * sizeof(*out));
    return grp->n_members;
}

void gs_cluster_info_groups(struct gs_cluster *cl, char *out, size_t outlen)
{
    size_t used = strlen(out);
    for (unsigned g = 0; g < cl->n && used < outlen; g++) {
        struct cgroup *grp = &cl->groups[g];
        if (!grp->raft)
            continue;
        uint64_t term, commit, applied;
        gs_group_raft_info(grp->raft, &term, &commit, &applied);
        int n = snprintf(out + used, outlen - used,
                         "group_%s:role=%s,member=%d,term=%llu,commit=%llu,applied=%llu\r\n",
                         cl->nodes[g].name, gs_group_is_leader(grp->raft) ? "leader" : "follower",
                         grp->role, (unsigned long long)term, (unsigned long long)commit,
                         (unsigned long long)applied);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

/* ---------------------------------------------------- join and leave
 *
 * docs/gridsync-cluster.md, "Join and leave". A change of membership is a
 * move from the served placement (cl->ring) to a target one (cl->target):
 *
 *   ADDNODE/DELNODE  every node computes the target; groups of the
 *                    target start where they are missing (new group:
 *                    bootstrapped; existing: joined) and their leaders
 *                    converge each Raft configuration (raft_glue.h)
 *   MIGRATE BEGIN    in the old owner A's log: its moving slots blocked
 *                    (writes -TRYAGAIN, checked again at apply time)
 *   MIGRATE EXPORT   A's leader lists the blocked slots' keys
 *   MIGRATE IMPORT   the keys, as entries of the new owner B's log
 *   MIGRATE SWITCH   in A's log: A deletes the slots' keys and answers
 *                    -MOVED to B from now on
 *   MIGRATE OWN      in B's log: B serves the slots
 *   MIGRATE FINISH   every node serves the target placement and leaves
 *                    the groups it is no longer a member of
 *
 * No acknowledged write is lost: a write to a moving slot is either
 * applied in A's log before the block (so exported and imported into B's
 * log before the switch) or refused; B takes writes only after the copy
 * is committed in its log. */

static bool parse_num(const char *p, size_t len, long long *out)
{
    if (len == 0 || len > 20)
        return false;
    char tmp[24];
    memcpy(tmp, p, len);
    tmp[len] = '\0';
    char *end;
    *out = strtoll(tmp, &end, 10);
    return *end == '\0';
}

struct key_list {
    struct gs_buf b; /* u32 klen, key, repeated */
    const unsigned char *state;
};

static void collect_key(void *arg, const struct gs_entry *e)
{
    struct key_list *kl = arg;
    size_t klen;
    const char *key = gs_entry_key(e, &klen);
    if (kl->state[gs_key_slot(key, klen)] != SLOT_BLOCKED)
        return;
    uint32_t l = (uint32_t)klen;
    if (gs_buf_append(&kl->b, &l, sizeof(l)) == 0)
        gs_buf_append(&kl->b, key, klen);
}

/* Apply a migration entry of group grp (deterministic: only the entry and
 * this group's earlier entries decide the outcome). */
static void migrate_exec(struct cgroup *grp, struct gs_store *store, int64_t now_ms, unsigned argc,
                         const char *const *argv, const size_t *argvlen, struct gs_buf *out)
{
    struct gs_cluster *cl = grp->cl;
    static const char ok[] = "+OK\r\n";
    static const char bad[] = "-ERR malformed migration entry\r\n";
    const char *op = argv[0];
    size_t oplen = argvlen[0];
    long long a, b, d;
    if (oplen == 5 && memcmp(op, "block", 5) == 0 && (argc - 1) % 3 == 0) {
        if (!grp->slot_state) {
            grp->slot_state = calloc(GS_SLOTS, sizeof(*grp->slot_state));
            grp->dest = calloc(GS_SLOTS, sizeof(*grp->dest));
            if (!grp->slot_state || !grp->dest) {
                free(grp->slot_state);
                free(grp->dest);
                grp->slot_state = NULL;
                grp->dest = NULL;
                gs_buf_append(out, "-OOM\r\n", 6);
                return;
            }
        }
        /* During a live change the block and what follows must stay in the
         * log until it is finished (gs_group_hold_snapshots). A replay
         * after a restart (no change in progress) must not hold them. */
        if (grp->raft && cl->target && !grp->holding) {
            gs_group_hold_snapshots(grp->raft, true);
            grp->holding = true;
        }
        for (unsigned i = 1; i + 2 < argc; i += 3) {
            if (!parse_num(argv[i], argvlen[i], &a) ||
                !parse_num(argv[i + 1], argvlen[i + 1], &b) || a < 0 || b >= GS_SLOTS || a > b)
                continue;
            /* The destination is named (positions differ between nodes);
             * one this node no longer knows only matters for redirects. */
            int to = find_node(cl, argv[i + 2], argvlen[i + 2]);
            for (long long s = a; s <= b; s++) {
                grp->slot_state[s] = SLOT_BLOCKED;
                grp->dest[s] = to < 0 ? NO_GROUP : (uint16_t)to;
            }
        }
        gs_buf_append(out, ok, sizeof(ok) - 1);
    } else if (oplen == 6 && memcmp(op, "import", 6) == 0 && (argc - 1) % 3 == 0) {
        for (unsigned i = 1; i + 2 < argc; i += 3) {
            if (!parse_num(argv[i + 2], argvlen[i + 2], &d))
                continue;
            if (d >= 0 && d <= now_ms)
                continue; /* expired on the way */
            gs_store_set(store, argv[i], argvlen[i], argv[i + 1], argvlen[i + 1], d < 0 ? -1 : d,
                         NULL);
        }
        gs_buf_append(out, ok, sizeof(ok) - 1);
    } else if (oplen == 6 && memcmp(op, "switch", 6) == 0) {
        if (grp->slot_state) {
            struct key_list kl = {{0}, grp->slot_state};
            uint64_t cursor = 0;
            do {
                /* now 0: expired keys of the slot are collected too */
                cursor = gs_store_scan(store, cursor, 1024, 0, collect_key, &kl);
            } while (cursor != 0);
            for (size_t off = 0; off + sizeof(uint32_t) <= kl.b.len;) {
                uint32_t l;
                memcpy(&l, kl.b.data + off, sizeof(l));
                off += sizeof(l);
                gs_store_delete(store, kl.b.data + off, l, 0);
                off += l;
            }
            gs_buf_free(&kl.b);
            for (unsigned s = 0; s < GS_SLOTS; s++) {
                if (grp->slot_state[s] != SLOT_BLOCKED)
                    continue;
                grp->slot_state[s] = SLOT_GONE;
                /* Routing follows only during a live change; a restarted
                 * node routes by the ring of its (final) peer list. */
                if (cl->target && grp->dest[s] != NO_GROUP)
                    cl->serve[s] = grp->dest[s];
            }
        }
        gs_buf_append(out, ok, sizeof(ok) - 1);
    } else if (oplen == 3 && memcmp(op, "own", 3) == 0 && (argc - 1) % 2 == 0) {
        for (unsigned i = 1; i + 1 < argc; i += 2) {
            if (!parse_num(argv[i], argvlen[i], &a) ||
                !parse_num(argv[i + 1], argvlen[i + 1], &b) || a < 0 || b >= GS_SLOTS || a > b)
                continue;
            for (long long s = a; s <= b; s++) {
                if (grp->slot_state)
                    grp->slot_state[s] = SLOT_SERVING; /* it may have left earlier */
                if (cl->target &&
                    cl->tmap[gs_ring_owner_of_slot(cl->target, (unsigned)s)] == grp->g)
                    cl->serve[s] = (uint16_t)grp->g;
            }
        }
        gs_buf_append(out, ok, sizeof(ok) - 1);
    } else {
        gs_buf_append(out, bad, sizeof(bad) - 1);
    }
}

static int find_node(const struct gs_cluster *cl, const char *p, size_t len)
{
    for (unsigned i = 0; i < cl->n; i++)
        if (!cl->nodes[i].removed && strlen(cl->nodes[i].name) == len &&
            memcmp(cl->nodes[i].name, p, len) == 0)
            return (int)i;
    return -1;
}

/* The group named by arg if this node leads it; else replies an error. */
static struct cgroup *led_group(struct gs_cluster *cl, struct gs_client *c, const struct gs_arg *a)
{
    int g = find_node(cl, a->p, a->len);
    if (g < 0) {
        gs_error(c, "ERR no such node");
        return NULL;
    }
    struct cgroup *grp = &cl->groups[g];
    if (!grp->raft || !gs_group_is_leader(grp->raft)) {
        gs_error(c, "NOTLEADER this node does not lead that group");
        return NULL;
    }
    return grp;
}

/* Propose [MIGRATE_ENTRY, op, words...] into grp's log; the client is
 * answered after commit (as a write). words are NUL-separated in buf. */
static void propose_migration(struct gs_cluster *cl, struct cgroup *grp, struct gs_client *c,
                              const char *op, const struct gs_buf *words, size_t nwords,
                              struct gs_arg *extra, size_t nextra)
{
    size_t argc = 2 + nwords + nextra;
    struct gs_arg *argv = calloc(argc, sizeof(*argv));
    if (!argv) {
        gs_error_oom(c);
        return;
    }
    argv[0] = (struct gs_arg){MIGRATE_ENTRY, sizeof(MIGRATE_ENTRY) - 1};
    argv[1] = (struct gs_arg){op, strlen(op)};
    size_t k = 2;
    for (size_t off = 0; words && off < words->len; k++) {
        size_t l = strlen(words->data + off);
        argv[k] = (struct gs_arg){words->data + off, l};
        off += l + 1;
    }
    for (size_t i = 0; i < nextra; i++)
        argv[k++] = extra[i];
    propose(cl, grp, c, 0, argc, argv);
    free(argv);
}

static void add_word(struct gs_buf *b, size_t *n, long long v)
{
    char tmp[24];
    int len = snprintf(tmp, sizeof(tmp), "%lld", v);
    gs_buf_append(b, tmp, (size_t)len + 1);
    (*n)++;
}

/* Ranges of slots s with pick(s) true, as words (start end [extra]). */
static size_t slot_ranges(struct gs_cluster *cl, unsigned src, int dst, bool with_dest,
                          struct gs_buf *b)
{
    size_t n = 0;
    unsigned start = 0;
    int cur = -1;
    for (unsigned s = 0; s <= GS_SLOTS; s++) {
        int d = -1;
        if (s < GS_SLOTS) {
            unsigned to = cl->tmap[gs_ring_owner_of_slot(cl->target, s)];
            bool from =
                dst < 0 ? cl->serve[s] == src : cl->rmap[gs_ring_owner_of_slot(cl->ring, s)] == src;
            if (from && to != src && (dst < 0 || to == (unsigned)dst))
                d = (int)to;
        }
        if (d == cur && s < GS_SLOTS)
            continue;
        if (cur >= 0) {
            add_word(b, &n, start);
            add_word(b, &n, s - 1);
            if (with_dest) {
                /* by name: indexes differ between nodes' lists */
                gs_buf_append(b, cl->nodes[cur].name, strlen(cl->nodes[cur].name) + 1);
                n++;
            }
        }
        cur = d;
        start = s;
    }
    return n;
}

struct export_ctx {
    const struct gs_entry **e;
    size_t n, cap;
    bool oom;
    const unsigned char *state;
};

static void export_key(void *arg, const struct gs_entry *e)
{
    struct export_ctx *x = arg;
    size_t klen;
    const char *key = gs_entry_key(e, &klen);
    if (x->state[gs_key_slot(key, klen)] != SLOT_BLOCKED)
        return;
    if (x->n == x->cap) {
        /* A scan step visits whole buckets, so it may emit more than the
         * count asked for: grow rather than drop a key. */
        size_t cap = x->cap ? 2 * x->cap : 256;
        const struct gs_entry **grown = realloc(x->e, cap * sizeof(*grown));
        if (!grown) {
            x->oom = true;
            return;
        }
        x->e = grown;
        x->cap = cap;
    }
    x->e[x->n++] = e;
}

/* data: the store the group used if it was its own, else NULL. The
 * cgroup itself may already be in use again (the node rejoined). */
static void on_left_group(void *data)
{
    if (data)
        gs_store_free(data);
}

/* Serve the target placement; leave the groups this node is no longer in. */
static void finish_change(struct gs_cluster *cl)
{
    if (cl->leaving >= 0)
        cl->nodes[cl->leaving].removed = true;
    cl->leaving = -1;
    gs_ring_free(cl->ring);
    cl->ring = cl->target;
    cl->target = NULL;
    memcpy(cl->rmap, cl->tmap, sizeof(cl->rmap));
    serve_ring(cl);
    for (unsigned g = 0; g < cl->n; g++) {
        struct cgroup *grp = &cl->groups[g];
        /* The slot states stay: they are applied state of the group's log
         * (a replica replaying the log after a restart rebuilds the same),
         * and GONE keeps refusing stray writes to slots that left. */
        if (grp->holding && grp->raft)
            gs_group_hold_snapshots(grp->raft, false);
        grp->holding = false;
        unsigned m[GS_RING_MAX_REPLICAS];
        unsigned nm = cl->nodes[g].removed ? 0 : ring_members(cl, cl->ring, cl->rmap, g, m);
        set_members(grp, m, nm, cl->self);
        if (grp->raft && grp->role < 0) {
            CORE_INFO("cluster: leaving the group of %s", cl->nodes[g].name);
            gs_group_close_erase(grp->raft, on_left_group, grp->own_store ? grp->store : NULL);
            grp->raft = NULL;
            grp->store = NULL;
            grp->own_store = false;
            /* Its log's state goes with it (a later rejoin starts empty). */
            free(grp->slot_state);
            free(grp->dest);
            grp->slot_state = NULL;
            grp->dest = NULL;
        }
    }
}

bool gs_cluster_admin(struct gs_cluster *cl, struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if ((gs_arg_is(&argv[1], "addnode") || gs_arg_is(&argv[1], "delnode")) && argc == 3) {
        bool add = gs_arg_is(&argv[1], "addnode");
        int idx = find_node(cl, argv[2].p, argv[2].len);
        char name[GS_RING_NAME_MAX];
        if (argv[2].len >= sizeof(name)) {
            gs_error(c, "ERR bad address");
            return true;
        }
        memcpy(name, argv[2].p, argv[2].len);
        name[argv[2].len] = '\0';
        if (cl->target) {
            /* Repeating the running change is harmless (the coordinator
             * may retry); another change must wait for FINISH. */
            bool same =
                add ? gs_ring_find(cl->target, name) >= 0 && gs_ring_find(cl->ring, name) < 0
                    : gs_ring_find(cl->target, name) < 0 && gs_ring_find(cl->ring, name) >= 0;
            if (!same) {
                gs_error(c, "ERR another membership change is running");
                return true;
            }
            /* Start what may have failed the first time (e.g. the Raft
             * channel of a group this node was leaving was still open). */
            int rc = apply_target(cl);
            if (rc)
                gs_errorf(c, "TRYAGAIN cannot start a group yet: %s", core_strerror(rc));
            else
                gs_reply_ok(&c->w);
            return true;
        }
        if (add ? idx >= 0 : idx < 0) {
            gs_error(c, add ? "ERR already a member" : "ERR no such node");
            return true;
        }
        int rc;
        if (add) {
            if (cl->n >= GS_RING_MAX_NODES || parse_peer(&cl->nodes[cl->n], name, strlen(name))) {
                gs_error(c, "ERR bad address (want host:port)");
                return true;
            }
            if (clashes(cl, cl->n)) {
                memset(&cl->nodes[cl->n], 0, sizeof(cl->nodes[0]));
                gs_error(c, "ERR the node's id clashes with a member's");
                return true;
            }
            cl->n++;
            rc = gs_ring_with_node(cl->ring, name, &cl->target);
            if (rc)
                memset(&cl->nodes[--cl->n], 0, sizeof(cl->nodes[0]));
        } else {
            rc = gs_ring_without_node(cl->ring, name, &cl->target);
            if (rc == 0)
                cl->leaving = idx;
        }
        if (rc) {
            gs_errorf(c, "ERR cannot place: %s", core_strerror(rc));
            return true;
        }
        build_map(cl, cl->target, cl->tmap);
        CORE_INFO("cluster: %s %s: moving to %u nodes", add ? "adding" : "removing", name,
                  gs_ring_nodes(cl->target));
        rc = apply_target(cl);
        if (rc)
            gs_errorf(c, "TRYAGAIN cannot start a group yet: %s", core_strerror(rc));
        else
            gs_reply_ok(&c->w);
        return true;
    }
    if (!gs_arg_is(&argv[1], "migrate") || argc < 3)
        return false;
    struct gs_arg *op = &argv[2];
    if (gs_arg_is(op, "finish") && argc == 3) {
        if (cl->target)
            finish_change(cl);
        gs_reply_ok(&c->w);
        return true;
    }
    if (!cl->target) {
        gs_error(c, "ERR no membership change is running");
        return true;
    }
    if (gs_arg_is(op, "status") && argc == 3) {
        /* The target groups this node leads whose Raft configuration is
         * the target replica set. */
        unsigned list[GS_RING_MAX_NODES], k = 0;
        for (unsigned i = 0; i < gs_ring_nodes(cl->target); i++) {
            struct cgroup *grp = &cl->groups[cl->tmap[i]];
            if (grp->raft && gs_group_converged(grp->raft))
                list[k++] = cl->tmap[i];
        }
        gs_reply_array(&c->w, k);
        for (unsigned i = 0; i < k; i++)
            gs_reply_bulk_cstr(&c->w, cl->nodes[list[i]].name);
        return true;
    }
    if (argc < 4)
        return false;
    struct cgroup *grp = led_group(cl, c, &argv[3]);
    if (!grp)
        return true;
    struct gs_buf words = {0};
    size_t n;
    if (gs_arg_is(op, "begin") && argc == 4) {
        n = slot_ranges(cl, grp->g, -1, true, &words);
        if (n == 0)
            gs_reply_ok(&c->w);
        else
            propose_migration(cl, grp, c, "block", &words, n, NULL, 0);
    } else if (gs_arg_is(op, "export") && argc == 5) {
        long long cur;
        if (!parse_num(argv[4].p, argv[4].len, &cur) || cur < 0) {
            gs_error(c, "ERR invalid cursor");
            return true;
        }
        if (!grp->slot_state) {
            /* Nothing leaves this group, or BEGIN is not applied here yet
             * (then an empty answer would lose keys). */
            if (slot_ranges(cl, grp->g, -1, true, &words) != 0) {
                gs_buf_free(&words);
                gs_error(c, "TRYAGAIN no slot of this group is blocked here yet");
                return true;
            }
            gs_reply_array(&c->w, 2);
            gs_reply_bulk_cstr(&c->w, "0");
            gs_reply_array(&c->w, 0);
            return true;
        }
        struct export_ctx x = {.state = grp->slot_state};
        int64_t now = gs_node_now_ms(cl->node);
        uint64_t next = gs_store_scan(grp->store, (uint64_t)cur, 256, now, export_key, &x);
        if (x.oom) {
            free(x.e);
            gs_error_oom(c);
            return true;
        }
        const struct gs_entry **found = x.e;
        char nc[24];
        snprintf(nc, sizeof(nc), "%llu", (unsigned long long)next);
        gs_reply_array(&c->w, 2);
        gs_reply_bulk_cstr(&c->w, nc);
        gs_reply_array(&c->w, 4 * x.n);
        for (size_t i = 0; i < x.n; i++) {
            size_t klen, vlen;
            const char *key = gs_entry_key(found[i], &klen);
            gs_reply_bulk_cstr(&c->w, cl->nodes[grp->dest[gs_key_slot(key, klen)]].name);
            const char *val = gs_entry_value((struct gs_entry *)found[i], &vlen);
            char ex[24];
            snprintf(ex, sizeof(ex), "%lld", (long long)gs_entry_expire_ms(found[i]));
            gs_reply_bulk(&c->w, key, klen);
            gs_reply_bulk(&c->w, val, vlen);
            gs_reply_bulk_cstr(&c->w, ex);
        }
        free(x.e);
    } else if (gs_arg_is(op, "import") && argc >= 7 && (argc - 4) % 3 == 0) {
        propose_migration(cl, grp, c, "import", NULL, 0, argv + 4, argc - 4);
    } else if (gs_arg_is(op, "switch") && argc == 4) {
        if (!grp->slot_state)
            gs_reply_ok(&c->w);
        else
            propose_migration(cl, grp, c, "switch", NULL, 0, NULL, 0);
    } else if (gs_arg_is(op, "own") && argc == 5) {
        int src = find_node(cl, argv[4].p, argv[4].len);
        if (src < 0) {
            gs_error(c, "ERR no such node");
            return true;
        }
        n = slot_ranges(cl, (unsigned)src, (int)grp->g, false, &words);
        if (n == 0)
            gs_reply_ok(&c->w);
        else
            propose_migration(cl, grp, c, "own", &words, n, NULL, 0);
    } else {
        gs_buf_free(&words);
        return false;
    }
    gs_buf_free(&words);
    return true;
}
