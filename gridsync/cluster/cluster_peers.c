/*
 * The cluster's node table: parsing the peer list (cluster-peers and
 * CLUSTER ADDNODE's address), the ids every node derives from a name, and
 * the read-only accessors the CLUSTER commands use. State and contracts:
 * cluster_internal.h, cluster.h.
 */
#include "gridsync/cluster/cluster.h"
#include "gridsync/cluster/cluster_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/addr.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/prom.h"
#include "gridsync/client/node_ctx.h"
#include "gridsync/cluster/membership.h"
#include "gridsync/cluster/raft_glue.h"
#include "gridsync/cluster/ring.h"

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

int gs_cl_parse_peer(struct cnode *nd, const char *s, size_t len)
{
    if (len == 0 || len >= sizeof(nd->name))
        return CORE_EINVAL;
    memcpy(nd->name, s, len);
    nd->name[len] = '\0';
    /* "host:port" or "[v6]:port"; host is kept without the brackets, as
     * Redis shows it (CLUSTER NODES, MOVED). */
    int port;
    if (core_addr_split(s, len, nd->host, sizeof(nd->host), &port) != 0 || port <= 0 ||
        port + RAFT_PORT_OFFSET > 65535)
        return CORE_EINVAL;
    nd->port = port;
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
bool gs_cl_clashes(const struct gs_cluster *cl, unsigned i)
{
    if (cl->nodes[i].mux_group == META_MUX_GROUP)
        return true; /* the meta group's number (cluster_meta.c) */
    for (unsigned k = 0; k < i; k++)
        if (!cl->nodes[k].removed && (strcmp(cl->nodes[k].name, cl->nodes[i].name) == 0 ||
                                      cl->nodes[k].raft_id == cl->nodes[i].raft_id ||
                                      cl->nodes[k].mux_group == cl->nodes[i].mux_group))
            return true;
    return false;
}

static int add_node(struct gs_cluster *cl, const char *name)
{
    if (cl->n >= GS_RING_MAX_NODES || gs_cl_parse_peer(&cl->nodes[cl->n], name, strlen(name))) {
        CORE_WARN("cluster: bad node address '%s' (want host:port)", name);
        return CORE_EINVAL;
    }
    if (gs_cl_clashes(cl, cl->n)) {
        CORE_WARN("cluster: '%s' is listed twice (or its id clashes)", name);
        return CORE_EINVAL;
    }
    cl->n++;
    return 0;
}

/* cluster-peers into m->nodes (names checked later, by gs_cl_nodes_from). */
static int split_peers(struct gs_membership *m, const char *list)
{
    m->n = 0;
    for (const char *p = list; *p;) {
        while (*p == ' ')
            p++;
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        while (len && p[len - 1] == ' ')
            len--;
        if (len) {
            if (m->n == GS_RING_MAX_NODES || len >= GS_RING_NAME_MAX) {
                CORE_WARN("cluster-peers: too many nodes, or '%.*s' too long", (int)len, p);
                return CORE_EINVAL;
            }
            memcpy(m->nodes[m->n], p, len);
            m->nodes[m->n++][len] = '\0';
        }
        p = comma ? comma + 1 : p + strlen(p);
    }
    return m->n ? 0 : CORE_EINVAL;
}

static int find_name(const struct gs_membership *m, const char *name)
{
    for (unsigned i = 0; i < m->n; i++)
        if (strcmp(m->nodes[i], name) == 0)
            return (int)i;
    return -1;
}

/* The seed's membership, retried until the deadline (the seed may be
 * starting too). */
static int fetch_seed(const char *seed, struct gs_membership *m, int total_ms)
{
    char err[256];
    int rc;
    for (int waited = 0;; waited += 200) {
        rc = gs_membership_fetch(m, seed, 2000, err, sizeof(err));
        if (rc == 0 || rc == CORE_EINVAL || waited >= total_ms)
            break;
        struct timespec ts = {0, 200 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (rc)
        CORE_WARN("%s", err);
    return rc;
}

int gs_cl_learn_membership(const struct gs_config *cfg, const char *self, struct gs_membership *m)
{
    int rc = gs_membership_load(m, cfg->dir);
    if (rc == 0) {
        if (strcmp(m->self, self) != 0) {
            CORE_WARN("cluster: %s/%s belongs to node %s, not %s", cfg->dir, GS_MEMBERSHIP_FILE,
                      m->self, self);
            return CORE_EINVAL;
        }
        if (cfg->cluster_seed[0]) {
            /* Missed a change while down? A seed that is newer and still
             * has this node wins; an unreachable one does not matter. */
            struct gs_membership *s = malloc(sizeof(*s));
            char err[256];
            if (s && gs_membership_fetch(s, cfg->cluster_seed, 2000, err, sizeof(err)) == 0 &&
                s->version > m->version &&
                (find_name(s, self) >= 0 ||
                 (s->change == GS_CHANGE_ADD && strcmp(s->change_node, self) == 0))) {
                CORE_INFO("cluster: membership version %llu from %s replaces %llu",
                          (unsigned long long)s->version, cfg->cluster_seed,
                          (unsigned long long)m->version);
                memcpy(m, s, sizeof(*m));
                snprintf(m->self, sizeof(m->self), "%s", self);
            }
            free(s);
        }
    } else if (rc != CORE_ENOTFOUND) {
        CORE_WARN("cluster: cannot read %s/%s: %s", cfg->dir[0] ? cfg->dir : ".",
                  GS_MEMBERSHIP_FILE, core_strerror(rc));
        return rc;
    } else if (cfg->cluster_peers[0]) {
        /* First start from the full list: version 0 on every node. */
        memset(m, 0, sizeof(*m));
        if ((rc = split_peers(m, cfg->cluster_peers)) != 0) {
            CORE_WARN("cluster: cluster-peers must list host:port of every node, this one "
                      "included");
            return rc;
        }
        m->replicas = (unsigned)cfg->cluster_replicas;
        int me = find_name(m, self);
        if (me < 0) {
            CORE_WARN("cluster: this node (%s) is not in cluster-peers", self);
            return CORE_EINVAL;
        }
        /* A joining node (cluster-join) is the one being added: the
         * cluster serves the placement without it and moves to the one
         * with it. */
        if (cfg->cluster_join && m->n > 1) {
            memmove(m->nodes[me], m->nodes[me + 1],
                    (m->n - (unsigned)me - 1) * sizeof(m->nodes[0]));
            m->n--;
            m->change = GS_CHANGE_ADD;
            snprintf(m->change_node, sizeof(m->change_node), "%s", self);
        }
    } else if (cfg->cluster_seed[0]) {
        if ((rc = fetch_seed(cfg->cluster_seed, m, 10000)) != 0)
            return rc;
        bool member = find_name(m, self) >= 0;
        bool added = m->change == GS_CHANGE_ADD && strcmp(m->change_node, self) == 0;
        if (!member && !added) {
            if (!cfg->cluster_join || m->change != GS_CHANGE_NONE) {
                CORE_WARN("cluster: %s is not a member of the cluster %s knows (%s)", self,
                          cfg->cluster_seed,
                          cfg->cluster_join ? "another change is running"
                                            : "start it with --cluster-join yes to add it");
                return CORE_EINVAL;
            }
            m->change = GS_CHANGE_ADD;
            snprintf(m->change_node, sizeof(m->change_node), "%s", self);
        }
    } else {
        CORE_WARN("cluster: no membership in %s and neither cluster-peers nor cluster-seed",
                  cfg->dir[0] ? cfg->dir : ".");
        return CORE_EINVAL;
    }
    snprintf(m->self, sizeof(m->self), "%s", self);
    if (find_name(m, self) < 0 &&
        !(m->change == GS_CHANGE_ADD && strcmp(m->change_node, self) == 0)) {
        CORE_WARN("cluster: this node (%s) has been removed from the cluster", self);
        return CORE_EINVAL;
    }
    return 0;
}

int gs_cl_nodes_from(struct gs_cluster *cl, const struct gs_membership *m)
{
    cl->nodes = calloc(GS_RING_MAX_NODES, sizeof(*cl->nodes));
    if (!cl->nodes)
        return CORE_ENOMEM;
    cl->n = 0;
    for (unsigned i = 0; i < m->n; i++) {
        int rc = add_node(cl, m->nodes[i]);
        if (rc)
            return rc;
    }
    return m->change == GS_CHANGE_ADD ? add_node(cl, m->change_node) : 0;
}

void gs_cl_membership(const struct gs_cluster *cl, struct gs_membership *m, bool with_self)
{
    memset(m, 0, sizeof(*m));
    m->version = cl->version;
    m->replicas = cl->replicas;
    m->n = gs_ring_nodes(cl->ring);
    for (unsigned i = 0; i < m->n; i++)
        snprintf(m->nodes[i], sizeof(m->nodes[i]), "%s", gs_ring_node_name(cl->ring, i));
    if (cl->target && cl->leaving >= 0) {
        m->change = GS_CHANGE_REMOVE;
        snprintf(m->change_node, sizeof(m->change_node), "%s", cl->nodes[cl->leaving].name);
    } else if (cl->target) {
        for (unsigned i = 0; i < gs_ring_nodes(cl->target); i++) {
            const char *name = gs_ring_node_name(cl->target, i);
            if (gs_ring_find(cl->ring, name) < 0) {
                m->change = GS_CHANGE_ADD;
                snprintf(m->change_node, sizeof(m->change_node), "%s", name);
            }
        }
    }
    if (with_self)
        snprintf(m->self, sizeof(m->self), "%s", cl->nodes[cl->self].name);
}

int gs_cl_save_membership(const struct gs_cluster *cl)
{
    struct gs_membership *m = malloc(sizeof(*m));
    if (!m)
        return CORE_ENOMEM;
    gs_cl_membership(cl, m, true);
    int rc = gs_membership_save(m, cl->node->cfg.dir);
    if (rc)
        CORE_WARN("cluster: cannot write %s/%s: %s", cl->node->cfg.dir[0] ? cl->node->cfg.dir : ".",
                  GS_MEMBERSHIP_FILE, core_strerror(rc));
    free(m);
    return rc;
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

int gs_cluster_slot_importer(const struct gs_cluster *cl, unsigned slot)
{
    if (!cl->target)
        return -1;
    unsigned to = cl->tmap[gs_ring_owner_of_slot(cl->target, slot)];
    if (to == cl->serve[slot])
        return -1;
    return (int)gs_cluster_group_leader(cl, to);
}

bool gs_cluster_node_live(const struct gs_cluster *cl, unsigned i)
{
    return !cl->nodes[i].removed;
}

unsigned gs_cluster_group_leader(const struct gs_cluster *cl, unsigned g)
{
    const struct cgroup *grp = &cl->groups[g];
    if (!grp->raft)
        return gs_cl_redirect_node(cl, grp);
    int l = gs_cl_leader_of(cl, grp);
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
    gs_cl_meta_info(cl, out, outlen);
    size_t used = strlen(out);
    for (unsigned g = 0; g < cl->n && used < outlen; g++) {
        struct cgroup *grp = &cl->groups[g];
        if (!grp->raft)
            continue;
        uint64_t term, commit, applied;
        gs_group_raft_info(grp->raft, &term, &commit, &applied);
        struct gs_store_stats keys;
        gs_store_stats(grp->db.store, &keys);
        struct gs_fsm_stats st;
        gs_fsm_stats(gs_group_fsm(grp->raft), &st);
        /* The group's slot migration state, as its log (or a snapshot of
         * it) built it: the same on every member that applied as far. */
        unsigned blocked = 0, gone = 0;
        for (unsigned s = 0; grp->slot_state && s < GS_SLOTS; s++) {
            blocked += grp->slot_state[s] == GS_SLOT_BLOCKED;
            gone += grp->slot_state[s] == GS_SLOT_GONE;
        }
        int n = snprintf(
            out + used, outlen - used,
            "group_%s:role=%s,member=%d,term=%llu,commit=%llu,applied=%llu,keys=%llu,"
            "entries_proposed=%llu,commands_proposed=%llu,inflight_max=%u,"
            "snapshots=%llu,snapshots_failed=%llu,snapshot_pause_max_us=%llu,"
            "slots_blocked=%u,slots_gone=%u\r\n",
            cl->nodes[g].name, gs_group_is_leader(grp->raft) ? "leader" : "follower", grp->role,
            (unsigned long long)term, (unsigned long long)commit, (unsigned long long)applied,
            (unsigned long long)keys.keys, (unsigned long long)st.entries_proposed,
            (unsigned long long)st.commands_proposed, st.inflight_max,
            (unsigned long long)st.snapshots_taken, (unsigned long long)st.snapshots_failed,
            (unsigned long long)st.snapshot_pause_max_us, blocked, gone);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

/* One gauge family over the groups, value per group from get(). */
static void group_family(struct gs_cluster *cl, struct core_buf *b, const char *name,
                         const char *help, uint64_t (*get)(struct cgroup *grp))
{
    (void)core_prom_family(b, name, CORE_PROM_GAUGE, help);
    for (unsigned g = 0; g < cl->n; g++) {
        struct cgroup *grp = &cl->groups[g];
        if (!grp->raft)
            continue;
        struct core_prom_label l = {"group", cl->nodes[g].name};
        (void)core_prom_u64(b, name, &l, 1, get(grp));
    }
}

static uint64_t g_term(struct cgroup *grp)
{
    uint64_t term, commit, applied;
    gs_group_raft_info(grp->raft, &term, &commit, &applied);
    return term;
}

static uint64_t g_commit(struct cgroup *grp)
{
    uint64_t term, commit, applied;
    gs_group_raft_info(grp->raft, &term, &commit, &applied);
    return commit;
}

static uint64_t g_applied(struct cgroup *grp)
{
    uint64_t term, commit, applied;
    gs_group_raft_info(grp->raft, &term, &commit, &applied);
    return applied;
}

static uint64_t g_keys(struct cgroup *grp)
{
    struct gs_store_stats st;
    gs_store_stats(grp->db.store, &st);
    return st.keys;
}

static uint64_t g_leader_known(struct cgroup *grp)
{
    uint64_t id;
    char addr[GS_RING_NAME_MAX];
    return gs_group_leader(grp->raft, &id, addr, sizeof(addr)) == 0;
}

void gs_cluster_metrics(struct gs_cluster *cl, struct core_buf *b)
{
    static const char *const roles[] = {"leader", "follower"};
    (void)core_prom_family(b, "gridsync_raft_role", CORE_PROM_GAUGE,
                           "1 for this node's role in the group, 0 for the other role.");
    for (unsigned g = 0; g < cl->n; g++) {
        struct cgroup *grp = &cl->groups[g];
        if (!grp->raft)
            continue;
        bool leader = gs_group_is_leader(grp->raft);
        for (unsigned r = 0; r < 2; r++) {
            struct core_prom_label l[] = {{"group", cl->nodes[g].name}, {"role", roles[r]}};
            (void)core_prom_u64(b, "gridsync_raft_role", l, 2, (r == 0) == leader);
        }
    }
    group_family(cl, b, "gridsync_raft_term", "The group's current Raft term here.", g_term);
    group_family(cl, b, "gridsync_raft_commit_index", "The highest log index known committed.",
                 g_commit);
    group_family(cl, b, "gridsync_raft_applied_index",
                 "The highest log index applied to this replica.", g_applied);
    group_family(cl, b, "gridsync_raft_leader_known", "1 if this node knows the group's leader.",
                 g_leader_known);
    group_family(cl, b, "gridsync_raft_group_keys", "Keys in this replica of the group.", g_keys);
}
