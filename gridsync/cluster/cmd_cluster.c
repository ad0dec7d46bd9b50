/*
 * CLUSTER, READONLY, READWRITE and ASKING: the Redis Cluster dialect that
 * cluster-aware clients (redis-cli -c, redis-py RedisCluster,
 * redis-benchmark --cluster) use to learn where slots live.
 *
 * Every node is a master (the leader of its own group, when leadership is
 * where it is preferred); CLUSTER SLOTS and NODES show no replicas (see
 * slots_range), CLUSTER SHARDS shows each group's members. A node reports
 * the leader it knows for groups it belongs to and the preferred leader
 * for the others; a client that lands on a non-leader gets -MOVED and
 * refreshes.
 */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "gridsync/cluster/cluster.h"
#include "gridsync/client/node_ctx.h"
#include "gridsync/commands/commands.h"
#include "gridsync/cluster/ring.h"
#include "gridsync/cluster/slot.h"

static bool require_cluster(struct gs_client *c)
{
    if (c->node->cluster)
        return true;
    gs_error(c, "ERR This instance has cluster support disabled");
    return false;
}

void gs_cmd_readonly(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (!require_cluster(c))
        return;
    c->readonly = true;
    gs_reply_ok(&c->w);
}

void gs_cmd_readwrite(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (!require_cluster(c))
        return;
    c->readonly = false;
    gs_reply_ok(&c->w);
}

/* After -ASK (a slot moving out answers it for keys it no longer holds),
 * lets the next keyed command run on the group importing the slot
 * (gs_cluster_route). */
void gs_cmd_asking(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (!require_cluster(c))
        return;
    c->asking = true;
    gs_reply_ok(&c->w);
}

/* Slot ranges in order, each with its group: calls fn(start, end, g). */
static unsigned for_each_range(struct gs_cluster *cl,
                               void (*fn)(struct gs_client *, unsigned, unsigned, unsigned),
                               struct gs_client *c)
{
    unsigned ranges = 0, start = 0;
    for (unsigned s = 1; s <= GS_SLOTS; s++) {
        if (s < GS_SLOTS && gs_cluster_slot_group(cl, s) == gs_cluster_slot_group(cl, start))
            continue;
        if (fn)
            fn(c, start, s - 1, gs_cluster_slot_group(cl, start));
        ranges++;
        start = s;
    }
    return ranges;
}

static void reply_node_triple(struct gs_client *c, struct gs_cluster *cl, unsigned i)
{
    gs_reply_array(&c->w, 3);
    gs_reply_bulk_cstr(&c->w, gs_cluster_node_host(cl, i));
    gs_reply_int(&c->w, gs_cluster_node_port(cl, i));
    gs_reply_bulk_cstr(&c->w, gs_cluster_node_id(cl, i));
}

/* Nodes that lead some range, for the CLUSTER SLOTS being written. */
static bool slots_primary[GS_RING_MAX_NODES];

/* One CLUSTER SLOTS range: [start, end, leader, importers...]. The group's
 * other members are not listed as replicas: in Redis Cluster a node is
 * either a master or a replica, and clients rely on it (redis-py types a
 * node by its last appearance, so a node that leads one range and follows
 * in another would drop out of the "primaries" that DBSIZE, FLUSHALL and
 * SCAN across the cluster visit). CLUSTER SHARDS shows the members.
 * During a join, though, the node that slots of the range are moving to
 * and that leads no range yet is listed after the leader: a client that
 * gets -ASK to it must know it (redis-py 4.3 looks the -ASK address up in
 * the nodes it learnt from CLUSTER SLOTS), and a node listed only there
 * cannot hide a primary. */
static void slots_range(struct gs_client *c, unsigned start, unsigned end, unsigned g)
{
    struct gs_cluster *cl = c->node->cluster;
    int extra = -1;
    for (unsigned s = start; s <= end && extra < 0; s++) {
        int to = gs_cluster_slot_importer(cl, s);
        if (to >= 0 && !slots_primary[to])
            extra = to;
    }
    gs_reply_array(&c->w, extra >= 0 ? 4 : 3);
    gs_reply_int(&c->w, start);
    gs_reply_int(&c->w, end);
    reply_node_triple(c, cl, gs_cluster_group_leader(cl, g));
    if (extra >= 0)
        reply_node_triple(c, cl, (unsigned)extra);
}

static void mark_primary(struct gs_client *c, unsigned start, unsigned end, unsigned g)
{
    (void)start;
    (void)end;
    slots_primary[gs_cluster_group_leader(c->node->cluster, g)] = true;
}

static void cluster_slots(struct gs_client *c)
{
    struct gs_cluster *cl = c->node->cluster;
    memset(slots_primary, 0, sizeof(slots_primary));
    gs_reply_array(&c->w, for_each_range(cl, mark_primary, c));
    for_each_range(cl, slots_range, c);
}

/* Append node i's slot ranges as " a-b" tokens (for NODES). */
static void node_slot_text(struct gs_cluster *cl, unsigned i, struct core_buf *out)
{
    unsigned start = 0;
    for (unsigned s = 1; s <= GS_SLOTS; s++) {
        if (s < GS_SLOTS && gs_cluster_slot_group(cl, s) == gs_cluster_slot_group(cl, start))
            continue;
        if (gs_cluster_group_leader(cl, gs_cluster_slot_group(cl, start)) == i) {
            char tok[24];
            int n = start == s - 1 ? snprintf(tok, sizeof(tok), " %u", start)
                                   : snprintf(tok, sizeof(tok), " %u-%u", start, s - 1);
            core_buf_append(out, tok, (size_t)n);
        }
        start = s;
    }
}

static void cluster_nodes(struct gs_client *c)
{
    struct gs_cluster *cl = c->node->cluster;
    struct gs_node *n = c->node;
    n->shared.scratch.len = 0;
    for (unsigned i = 0; i < gs_cluster_nodes(cl); i++) {
        if (!gs_cluster_node_live(cl, i))
            continue;
        char line[512];
        int len = snprintf(line, sizeof(line), "%s %s:%d@%d %s - 0 0 %u connected",
                           gs_cluster_node_id(cl, i), gs_cluster_node_host(cl, i),
                           gs_cluster_node_port(cl, i), gs_cluster_node_port(cl, i) + 10000,
                           i == gs_cluster_self(cl) ? "myself,master" : "master", i + 1);
        core_buf_append(&n->shared.scratch, line, (size_t)len);
        node_slot_text(cl, i, &n->shared.scratch);
        core_buf_append(&n->shared.scratch, "\n", 1);
    }
    if (n->shared.scratch.oom) {
        gs_error_oom(c);
        return;
    }
    gs_reply_verbatim(&c->w, n->shared.scratch.data, n->shared.scratch.len, "txt");
}

static void shards_node(struct gs_client *c, struct gs_cluster *cl, unsigned i, bool master)
{
    gs_reply_map(&c->w, 7);
    gs_reply_bulk_cstr(&c->w, "id");
    gs_reply_bulk_cstr(&c->w, gs_cluster_node_id(cl, i));
    gs_reply_bulk_cstr(&c->w, "port");
    gs_reply_int(&c->w, gs_cluster_node_port(cl, i));
    gs_reply_bulk_cstr(&c->w, "ip");
    gs_reply_bulk_cstr(&c->w, gs_cluster_node_host(cl, i));
    gs_reply_bulk_cstr(&c->w, "endpoint");
    gs_reply_bulk_cstr(&c->w, gs_cluster_node_host(cl, i));
    gs_reply_bulk_cstr(&c->w, "role");
    gs_reply_bulk_cstr(&c->w, master ? "master" : "replica");
    gs_reply_bulk_cstr(&c->w, "replication-offset");
    gs_reply_int(&c->w, 0);
    gs_reply_bulk_cstr(&c->w, "health");
    gs_reply_bulk_cstr(&c->w, "online");
}

/* One shard per group: its slot ranges and its members. */
static void cluster_shards(struct gs_client *c)
{
    struct gs_cluster *cl = c->node->cluster;
    unsigned n = gs_cluster_nodes(cl), live = 0;
    for (unsigned g = 0; g < n; g++)
        live += gs_cluster_node_live(cl, g);
    gs_reply_array(&c->w, live);
    for (unsigned g = 0; g < n; g++) {
        if (!gs_cluster_node_live(cl, g))
            continue;
        unsigned ranges = 0, start = 0;
        for (unsigned s = 1; s <= GS_SLOTS; s++) {
            if (s < GS_SLOTS && gs_cluster_slot_group(cl, s) == gs_cluster_slot_group(cl, start))
                continue;
            ranges += gs_cluster_slot_group(cl, start) == g;
            start = s;
        }
        gs_reply_map(&c->w, 2);
        gs_reply_bulk_cstr(&c->w, "slots");
        gs_reply_array(&c->w, 2 * ranges);
        start = 0;
        for (unsigned s = 1; s <= GS_SLOTS; s++) {
            if (s < GS_SLOTS && gs_cluster_slot_group(cl, s) == gs_cluster_slot_group(cl, start))
                continue;
            if (gs_cluster_slot_group(cl, start) == g) {
                gs_reply_int(&c->w, start);
                gs_reply_int(&c->w, s - 1);
            }
            start = s;
        }
        unsigned members[GS_RING_MAX_REPLICAS];
        unsigned m = gs_cluster_group_members(cl, g, members);
        unsigned leader = gs_cluster_group_leader(cl, g);
        gs_reply_bulk_cstr(&c->w, "nodes");
        gs_reply_array(&c->w, m);
        for (unsigned i = 0; i < m; i++)
            shards_node(c, cl, members[i], members[i] == leader);
    }
}

static void cluster_info(struct gs_client *c)
{
    struct gs_cluster *cl = c->node->cluster;
    unsigned live = 0; /* nodes that have left are not known any more */
    for (unsigned i = 0; i < gs_cluster_nodes(cl); i++)
        live += gs_cluster_node_live(cl, i);
    char text[1024];
    /* Only lines Redis 7.0 prints (redis-py's cluster_info() parses each
     * as key:value); the Raft groups are under GRIDSYNC GROUPS. */
    snprintf(text, sizeof(text),
             "cluster_state:ok\r\n"
             "cluster_slots_assigned:%u\r\n"
             "cluster_slots_ok:%u\r\n"
             "cluster_slots_pfail:0\r\n"
             "cluster_slots_fail:0\r\n"
             "cluster_known_nodes:%u\r\n"
             "cluster_size:%u\r\n"
             "cluster_current_epoch:%u\r\n"
             "cluster_my_epoch:%u\r\n",
             GS_SLOTS, GS_SLOTS, live, live, gs_cluster_nodes(cl), gs_cluster_self(cl) + 1);
    gs_reply_verbatim(&c->w, text, strlen(text), "txt");
}

/* GRIDSYNC GROUPS: GridSync's own, one line per Raft group this node is a
 * member of: group_<name>:role=leader|follower,member=<i>,term=..,
 * commit=..,applied=..,keys=.. (docs/gridsync-cluster.md). */
void gs_cmd_gridsync(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (gs_arg_is(&argv[1], "help") && argc == 2) {
        static const char *const lines[] = {
            "GRIDSYNC <subcommand>. Subcommands are:",
            "GROUPS",
            "    The Raft groups this node is a member of: role, term, commit, applied, keys.",
            "HELP",
            "    Prints this help.",
        };
        gs_reply_array(&c->w, sizeof(lines) / sizeof(lines[0]));
        for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
            gs_reply_simple(&c->w, lines[i], strlen(lines[i]));
        return;
    }
    if (!gs_arg_is(&argv[1], "groups") || argc != 2) {
        gs_errorf(c,
                  "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try "
                  "GRIDSYNC HELP.",
                  (int)(argv[1].len < 64 ? argv[1].len : 64), argv[1].p);
        return;
    }
    if (!require_cluster(c))
        return;
    char text[8192];
    text[0] = 0;
    gs_cluster_info_groups(c->node->cluster, text, sizeof(text));
    gs_reply_verbatim(&c->w, text, strlen(text), "txt");
}

void gs_cmd_cluster(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (gs_arg_is(&argv[1], "keyslot")) {
        /* Answered with or without cluster mode: it is pure arithmetic. */
        if (argc != 3) {
            gs_error_arity(c, "cluster|keyslot");
            return;
        }
        gs_reply_int(&c->w, gs_key_slot(argv[2].p, argv[2].len));
        return;
    }
    if (!require_cluster(c))
        return;
    struct gs_cluster *cl = c->node->cluster;
    if (gs_arg_is(&argv[1], "slots") && argc == 2) {
        cluster_slots(c);
    } else if (gs_arg_is(&argv[1], "shards") && argc == 2) {
        cluster_shards(c);
    } else if (gs_arg_is(&argv[1], "nodes") && argc == 2) {
        cluster_nodes(c);
    } else if (gs_arg_is(&argv[1], "myid") && argc == 2) {
        gs_reply_bulk_cstr(&c->w, gs_cluster_node_id(cl, gs_cluster_self(cl)));
    } else if (gs_arg_is(&argv[1], "info") && argc == 2) {
        cluster_info(c);
    } else if (gs_cluster_admin(cl, c, argc, argv)) {
        /* join/leave: answered (or proposed) there */
    } else {
        gs_errorf(c,
                  "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try "
                  "CLUSTER HELP.",
                  (int)(argv[1].len < 64 ? argv[1].len : 64), argv[1].p);
    }
}
