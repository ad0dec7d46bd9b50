/*
 * Cluster mode as a node feature (client/node_ctx.h, struct gs_feature): its
 * options, the hooks the node calls (start, route, cron, client closed,
 * read-through fill, CONFIG SET, stop, free). The node includes nothing of
 * cluster/; gridsync-server's main hands it gs_cluster_feature.
 */
#include "gridsync/cluster/cluster.h"
#include "gridsync/cluster/cluster_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "gridsync/cluster/membership.h"
#include "gridsync/cluster/raft_glue.h"
#include "gridsync/cluster/registry.h"
#include "gridsync/cluster/slot.h"
#include "gridsync/client/node_ctx.h"
#include "gridsync/commands/commands.h"

bool gs_cl_raft_store_dynamo(const struct gs_config *cfg)
{
    return strncmp(cfg->raft_store, "dynamodb://", 11) == 0;
}

int gs_cl_dynamo_config(const struct gs_config *cfg, const char *url, struct gs_registry_config *rc)
{
    char err[GS_REGISTRY_STRLEN + 96];
    memset(rc, 0, sizeof(*rc));
    if (gs_registry_parse_url(url, rc, err, sizeof(err)) < 0) {
        CORE_WARN("%s", err);
        return CORE_EINVAL;
    }
    const char *ak =
        cfg->registry_access_key[0] ? cfg->registry_access_key : getenv("AWS_ACCESS_KEY_ID");
    const char *sk =
        cfg->registry_secret_key[0] ? cfg->registry_secret_key : getenv("AWS_SECRET_ACCESS_KEY");
    if (!ak || !*ak || !sk || !*sk) {
        CORE_WARN("registry: no credentials (--registry-access-key/--registry-secret-key or "
                  "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)");
        return CORE_EINVAL;
    }
    snprintf(rc->access_key, sizeof(rc->access_key), "%s", ak);
    snprintf(rc->secret_key, sizeof(rc->secret_key), "%s", sk);
    snprintf(rc->region, sizeof(rc->region), "%s", cfg->registry_region);
    return 0;
}

/* With --registry: register, and learn cluster-peers from the registry
 * when none were given, before the groups start (docs/gridsync-cluster.md,
 * "Registry"). The node is listening but its loop does not run yet, so the
 * start-up requests run on a private loop of their own. */
static int registry_start(struct gs_node *n, struct gs_registry_config *rc, char *self,
                          size_t selflen)
{
    int err = gs_cl_dynamo_config(&n->cfg, n->cfg.registry, rc);
    if (err < 0)
        return err;
    snprintf(self, selflen, "%s:%lld", n->cfg.bind, (long long)n->cfg.port);
    /* A node that has a membership (it started before) or a seed to ask
     * only registers. */
    bool discover = n->cfg.cluster_peers[0] == '\0' && n->cfg.cluster_seed[0] == '\0' &&
                    !gs_membership_exists(n->cfg.dir);
    if (discover && n->cfg.cluster_size < 1) {
        CORE_WARN("registry: without cluster-peers, cluster-size says how many nodes to wait for");
        return CORE_EINVAL;
    }
    char peers[CORE_OPT_STRLEN], msg[GS_REGISTRY_STRLEN * 2 + 96];
    err = gs_registry_startup(rc, self, discover ? n->cfg.cluster_size : 0, n->cfg.registry_ttl,
                              peers, sizeof(peers), msg, sizeof(msg));
    if (err < 0) {
        CORE_WARN("%s", msg);
        return err;
    }
    if (discover) {
        CORE_INFO("registry: cluster-peers %s", peers);
        snprintf(n->cfg.cluster_peers, sizeof(n->cfg.cluster_peers), "%s", peers);
    }
    return 0;
}

static int feature_start(struct gs_node *n, void **self)
{
    if (!n->cfg.cluster_enabled)
        return 0;
    struct gs_registry_config rc;
    char addr[CORE_OPT_STRLEN + 24];
    if (gs_cl_raft_store_dynamo(&n->cfg)) {
        /* Checked before anything starts: a bad URL or missing credentials
         * stop the node at once. */
        int err = gs_cl_dynamo_config(&n->cfg, n->cfg.raft_store, &rc);
        if (err < 0)
            return err;
    } else if (n->cfg.raft_store[0] != '\0' && strcmp(n->cfg.raft_store, "dir") != 0) {
        CORE_WARN("raft-store '%s': expected dir or dynamodb://HOST:PORT/TABLE", n->cfg.raft_store);
        return CORE_EINVAL;
    }
    if (n->cfg.registry[0] != '\0') {
        int err = registry_start(n, &rc, addr, sizeof(addr));
        if (err < 0)
            return err;
    }
    int rc_new = gs_cluster_new(&n->cluster, n);
    *self = n->cluster; /* set on a failure after some groups started */
    if (rc_new < 0 || n->cfg.registry[0] == '\0')
        return rc_new;
    return gs_registry_heartbeat_start(&n->cluster->registry, n->loop, &rc, addr,
                                       n->cfg.registry_heartbeat, n->cfg.registry_ttl);
}

static bool feature_route(void *self, struct gs_client *c, const struct gs_command *cmd,
                          size_t argc, struct gs_arg *argv)
{
    return gs_cluster_route(self, c, cmd, argc, argv);
}

static bool feature_cron(void *self, int64_t now_ms)
{
    gs_cl_cron(self, now_ms);
    return true; /* the node's own expiry would bypass the logs */
}

static void on_fill_done(void *data, int status, const char *reply, size_t len)
{
    (void)data;
    (void)status; /* a fill that did not commit is only a later miss */
    (void)reply;
    (void)len;
}

/* A read-through fill (origin/origin_node.h, invariant 3): proposed like a
 * client's SET NX through the key's group on its leader, never written into
 * a store directly, so replicas cannot diverge. */
static bool feature_fill(void *self, const char *key, size_t klen, const char *val, size_t vlen,
                         int64_t expire_ms)
{
    struct gs_cluster *cl = self;
    struct cgroup *grp = &cl->groups[cl->serve[gs_key_slot(key, klen)]];
    if (!grp->raft || !gs_group_is_leader(grp->raft))
        return true; /* not this node's to write: served, not kept */
    char when[24];
    int wl = snprintf(when, sizeof(when), "%lld", (long long)expire_ms);
    const char *argv[] = {"2", "SET", key, val, "NX", "PXAT", when};
    size_t len[] = {1, 3, klen, vlen, 2, 4, (size_t)wl};
    unsigned argc = expire_ms >= 0 ? 7 : 5;
    (void)gs_fsm_submit(gs_group_fsm(grp->raft), argc, argv, len, on_fill_done, NULL);
    return true;
}

static void feature_client_closed(void *self, struct gs_client *c)
{
    (void)self;
    gs_cluster_client_closed(c);
}

static void feature_apply_config(void *self)
{
    gs_cluster_apply_config(self);
}

static void feature_stop(void *self)
{
    struct gs_cluster *cl = self;
    if (cl) {
        gs_registry_heartbeat_stop(cl->registry);
        cl->registry = NULL;
    }
    gs_cluster_stop(cl);
}

static void feature_free(void *self)
{
    struct gs_cluster *cl = self;
    cl->node->cluster = NULL;
    gs_cluster_free(cl);
}

/* In the order of enum gs_read_mode (raft_glue.h). */
static const char *const read_mode_names[] = {"lease", "barrier", "any", NULL};

/* docs/gridsync-cluster.md */
static const struct gs_option options[] = {
    GS_OPTION(cluster_enabled, "cluster-enabled", CORE_OPT_BOOL, 0, 0, NULL, CORE_OPT_IMMUTABLE,
              "run as a cluster node (needs cluster-peers, cluster-seed, registry or a "
              "membership in dir)"),
    GS_OPTION(cluster_peers, "cluster-peers", CORE_OPT_STRING, 0, 0, NULL, CORE_OPT_IMMUTABLE,
              "every node's host:port, comma-separated, the same list on every node"),
    GS_OPTION(cluster_seed, "cluster-seed", CORE_OPT_STRING, 0, 0, NULL, CORE_OPT_IMMUTABLE,
              "IP:port of a member: at a first start without cluster-peers, learn the "
              "membership from it (later starts read it from dir, and from the seed when newer)"),
    GS_OPTION(dir, "dir", CORE_OPT_STRING, 0, 0, NULL, CORE_OPT_IMMUTABLE,
              "directory for the cluster's Raft logs and snapshots (relative: to the working "
              "directory at start)"),
    GS_OPTION(cluster_replicas, "cluster-replicas", CORE_OPT_INT, 1, 7, NULL, CORE_OPT_IMMUTABLE,
              "copies of each slot (Raft group size)"),
    GS_OPTION(cluster_read_mode, "cluster-read-mode", CORE_OPT_ENUM, 0, 0, read_mode_names, 0,
              "how a leader makes reads linearizable: lease (a majority heard from it within "
              "the election timeout less a drift bound), barrier (a Raft barrier per batch of "
              "reads) or any (no check: stale while a deposed leader has not noticed)"),
    GS_OPTION(cluster_snapshot_entries, "cluster-snapshot-entries", CORE_OPT_INT, 16, INT32_MAX,
              NULL, CORE_OPT_IMMUTABLE, "Raft log entries between two snapshots of a shard"),
    GS_OPTION(cluster_snapshot_fork, "cluster-snapshot-fork", CORE_OPT_BOOL, 0, 0, NULL,
              CORE_OPT_IMMUTABLE,
              "build snapshots in a fork()ed child (the loop pauses only for the fork); no: "
              "encode them on the loop thread"),
    GS_OPTION(cluster_inflight_entries, "cluster-inflight-entries", CORE_OPT_INT, 1, 4096, NULL,
              CORE_OPT_IMMUTABLE,
              "a group's Raft entries proposed and not yet committed at once; writes arriving "
              "meanwhile join the next entry (group commit)"),
    GS_OPTION(cluster_join, "cluster-join", CORE_OPT_BOOL, 0, 0, NULL, CORE_OPT_IMMUTABLE,
              "this node is the last of cluster-peers, being added to a running cluster"),
    GS_OPTION(cluster_size, "cluster-size", CORE_OPT_INT, 0, 64, NULL, CORE_OPT_IMMUTABLE,
              "with registry and no cluster-peers: live registered nodes to wait for at start"),
    GS_OPTION(registry, "registry", CORE_OPT_STRING, 0, 0, NULL, CORE_OPT_IMMUTABLE,
              "dynamodb://HOST:PORT/TABLE: register this node there, learn peers from it"),
    GS_OPTION(registry_region, "registry-region", CORE_OPT_STRING, 0, 0, NULL, CORE_OPT_IMMUTABLE,
              "AWS region the registry's requests are signed for"),
    GS_OPTION(registry_access_key, "registry-access-key", CORE_OPT_STRING, 0, 0, NULL,
              CORE_OPT_IMMUTABLE | CORE_OPT_SECRET,
              "registry access key (default: AWS_ACCESS_KEY_ID)"),
    GS_OPTION(registry_secret_key, "registry-secret-key", CORE_OPT_STRING, 0, 0, NULL,
              CORE_OPT_IMMUTABLE | CORE_OPT_SECRET,
              "registry secret key (default: AWS_SECRET_ACCESS_KEY)"),
    GS_OPTION(raft_store, "raft-store", CORE_OPT_STRING, 0, 0, NULL, CORE_OPT_IMMUTABLE,
              "where Raft's state is kept: dir (under dir, the default) or "
              "dynamodb://HOST:PORT/TABLE (with the registry's region and credentials)"),
    GS_OPTION(registry_heartbeat, "registry-heartbeat", CORE_OPT_INT, 50, 600000, NULL,
              CORE_OPT_IMMUTABLE, "ms between two registrations of this node"),
    GS_OPTION(registry_ttl, "registry-ttl", CORE_OPT_INT, 100, 3600000, NULL, CORE_OPT_IMMUTABLE,
              "ms a registration lives without a heartbeat"),
    {{NULL, 0, NULL, 0, 0, NULL, 0, NULL}, 0},
};

static void feature_metrics(void *self, struct core_buf *b)
{
    gs_cluster_metrics(self, b);
}

const struct gs_feature gs_cluster_feature = {
    .name = "cluster",
    .options = options,
    .start = feature_start,
    .route = feature_route,
    .cron = feature_cron,
    .client_closed = feature_client_closed,
    .fill = feature_fill,
    .apply_config = feature_apply_config,
    .metrics = feature_metrics,
    .stop = feature_stop,
    .free = feature_free,
};
