/*
 * The metadata Raft group ("meta"): the queue of requested membership
 * changes, and the membership they apply to, as replicated state
 * (docs/gridsync-cluster.md, "Membership").
 *
 * The group is an ordinary gs_group (raft_glue.h) on the node's Raft port,
 * under the reserved number META_MUX_GROUP (no node's group has it: see
 * gs_cl_clashes) and in DIR/meta. Its voters are the first
 * min(META_VOTERS, N) nodes of the membership in name order. Its state
 * machine is a gs_fsm over a small store of its own, so the state is
 * snapshotted, kept on disk and replayed like a shard's:
 *
 *   m:membership   the membership the queue applies to (membership.h's
 *                  text, no change, no self)
 *   m:head         the position of the queue's head (the next change to
 *                  run); every position below it is done
 *   m:next         the position the next request gets
 *   m:q:POS        "add NAME" / "remove NAME", for head <= POS < next
 *
 * Entries (argv, no protocol prefix), applied deterministically from the
 * entry and the state alone:
 *
 *   init TEXT      the membership, if the state has none (first start of
 *                  the group, or a cluster that ran without it)
 *   sync TEXT      the membership, if its version is newer and the queue
 *                  is empty (a change run by scripts/gridsync-reshard)
 *   add NAME / remove NAME
 *                  a request, validated against the membership as it will
 *                  be once the queued changes are done; replies its POS
 *   done POS VERSION
 *                  the head's change is complete everywhere (repeatable)
 *
 * Invariants:
 *  1. Only the meta leader runs a coordinator (cluster_meta_coord.c), and
 *     only for the head; it is told to stop as soon as this node is not
 *     the leader. Every step it sends is repeatable, so a new leader
 *     simply runs the head again from the start.
 *  2. The head is popped only through the log ("done"), after FINISH has
 *     been answered by every node of the change.
 *  3. The leader never coordinates the removal of its own node, nor leads
 *     while not a voter of the recorded membership: it hands leadership
 *     to another voter first (a Raft leader never removes itself here).
 */
#include "gridsync/cluster/cluster_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/addr.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/log.h"
#include "gridsync/client/node_ctx.h"
#include "gridsync/cluster/cluster.h"
#include "gridsync/cluster/membership.h"
#include "gridsync/cluster/raft_glue.h"
#include "gridsync/cluster/raft_store_dynamo.h"
#include "gridsync/store/store.h"

#define KEY_MEMBERSHIP "m:membership"
#define KEY_HEAD       "m:head"
#define KEY_NEXT       "m:next"

struct gs_meta {
    struct gs_cluster *cl;
    struct gs_group *raft; /* NULL: this node holds no replica */
    struct gs_store *store;
    struct gs_meta_job *job; /* the running coordinator (leader only) */
    uint64_t job_seq;
    bool proposing; /* an init/sync/done entry of ours is in flight */
};

/* ---------------------------------------------------------------- state */

static bool get_text(struct gs_store *s, const char *key, const char **val, size_t *len)
{
    struct gs_entry *e = gs_store_lookup(s, key, strlen(key), 0, GS_LOOKUP_NOTOUCH);
    if (!e)
        return false;
    *val = gs_entry_value(e, len);
    return *val != NULL;
}

static uint64_t get_pos(struct gs_store *s, const char *key)
{
    const char *v;
    size_t len;
    char tmp[24];
    if (!get_text(s, key, &v, &len) || len == 0 || len >= sizeof(tmp))
        return 1; /* positions start at 1: 0 means "none" in QUEUE */
    memcpy(tmp, v, len);
    tmp[len] = '\0';
    return strtoull(tmp, NULL, 10);
}

static void set_pos(struct gs_store *s, const char *key, uint64_t v)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)v);
    (void)gs_store_set(s, key, strlen(key), tmp, (size_t)n, -1, NULL);
}

static int queue_key(char *out, size_t cap, uint64_t pos)
{
    return snprintf(out, cap, "m:q:%020llu", (unsigned long long)pos);
}

/* The queued change at pos: add (true) or remove, and its node. */
static bool get_change(struct gs_store *s, uint64_t pos, bool *add, char *node, size_t cap)
{
    char key[40];
    queue_key(key, sizeof(key), pos);
    const char *v;
    size_t len;
    if (!get_text(s, key, &v, &len))
        return false;
    size_t skip = len > 4 && memcmp(v, "add ", 4) == 0      ? 4
                  : len > 7 && memcmp(v, "remove ", 7) == 0 ? 7
                                                            : 0;
    if (skip == 0 || len - skip >= cap)
        return false;
    *add = skip == 4;
    memcpy(node, v + skip, len - skip);
    node[len - skip] = '\0';
    return true;
}

/* The recorded membership into m (allocated by the caller). */
static bool get_membership(struct gs_store *s, struct gs_membership *m)
{
    const char *v;
    size_t len;
    return get_text(s, KEY_MEMBERSHIP, &v, &len) && gs_membership_parse(m, v, len) == 0;
}

static void put_membership(struct gs_store *s, const struct gs_membership *m)
{
    struct core_buf b = {0};
    if (gs_membership_format(m, &b) == 0)
        (void)gs_store_set(s, KEY_MEMBERSHIP, strlen(KEY_MEMBERSHIP), b.data, b.len, -1, NULL);
    core_buf_free(&b);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* The meta group's voters for membership m: its first min(META_VOTERS, n)
 * names in sorted order (out: GS_RING_MAX_NODES names). */
static unsigned voters_of(const struct gs_membership *m, char (*out)[GS_RING_NAME_MAX])
{
    memcpy(out, m->nodes, m->n * sizeof(m->nodes[0]));
    qsort(out, m->n, sizeof(out[0]), cmp_names);
    return m->n < META_VOTERS ? m->n : META_VOTERS;
}

static bool is_voter(const struct gs_membership *m, const char *name,
                     char (*scratch)[GS_RING_NAME_MAX])
{
    unsigned k = voters_of(m, scratch);
    for (unsigned i = 0; i < k; i++)
        if (strcmp(scratch[i], name) == 0)
            return true;
    return false;
}

/* A node's Raft peer (id, address) from its name, as cluster_peers.c
 * derives them. */
static int peer_of(const char *name, struct cnode *nd, char *addr, size_t cap)
{
    if (gs_cl_parse_peer(nd, name, strlen(name)))
        return CORE_EINVAL;
    core_addr_format(addr, cap, nd->host, nd->port + RAFT_PORT_OFFSET);
    return 0;
}

/* Give the group the voters of m as its desired configuration (acted on
 * by its leader only). */
static void desire_voters(struct gs_meta *mt, const struct gs_membership *m)
{
    if (!mt->raft)
        return;
    char(*names)[GS_RING_NAME_MAX] = malloc(GS_RING_MAX_NODES * sizeof(*names));
    if (!names)
        return;
    unsigned k = voters_of(m, names);
    struct gs_raft_peer peers[META_VOTERS];
    char addrs[META_VOTERS][GS_RING_NAME_MAX + 16];
    unsigned n = 0;
    for (unsigned i = 0; i < k; i++) {
        struct cnode nd;
        if (peer_of(names[i], &nd, addrs[n], sizeof(addrs[n])) == 0) {
            peers[n] = (struct gs_raft_peer){nd.raft_id, addrs[n]};
            n++;
        }
    }
    (void)gs_group_set_desired(mt->raft, peers, n);
    free(names);
}

static void reply_err(struct core_buf *out, const char *msg)
{
    core_buf_append(out, "-", 1);
    core_buf_append(out, msg, strlen(msg));
    core_buf_append(out, "\r\n", 2);
}

static void reply_ok(struct core_buf *out)
{
    core_buf_append(out, "+OK\r\n", 5);
}

static int find_in(const struct gs_membership *m, const char *name)
{
    for (unsigned i = 0; i < m->n; i++)
        if (strcmp(m->nodes[i], name) == 0)
            return (int)i;
    return -1;
}

/* m with one change applied (validated by the caller). */
static void apply_change(struct gs_membership *m, bool add, const char *node)
{
    int i = find_in(m, node);
    if (add && i < 0 && m->n < GS_RING_MAX_NODES)
        snprintf(m->nodes[m->n++], sizeof(m->nodes[0]), "%s", node);
    else if (!add && i >= 0) {
        memmove(m->nodes[i], m->nodes[i + 1], (m->n - (unsigned)i - 1) * sizeof(m->nodes[0]));
        m->n--;
    }
}

static void exec_request(struct gs_meta *mt, struct gs_store *s, bool add, const char *node,
                         struct core_buf *out)
{
    struct gs_membership *m = malloc(sizeof(*m));
    if (!m) {
        reply_err(out, "OOM");
        return;
    }
    uint64_t head = get_pos(s, KEY_HEAD), next = get_pos(s, KEY_NEXT);
    struct cnode nd;
    char addr[GS_RING_NAME_MAX + 16], qnode[GS_RING_NAME_MAX];
    bool qadd;
    if (!get_membership(s, m)) {
        reply_err(out, "TRYAGAIN the meta group has no membership recorded yet");
    } else if (peer_of(node, &nd, addr, sizeof(addr)) != 0) {
        reply_err(out, "ERR bad address (want host:port)");
    } else {
        /* Judged against the membership as it will be once every queued
         * change is done: the queue is applied in order. */
        for (uint64_t p = head; p < next; p++)
            if (get_change(s, p, &qadd, qnode, sizeof(qnode)))
                apply_change(m, qadd, qnode);
        int at = find_in(m, node);
        if (add && at >= 0) {
            reply_err(out, "ERR already a member (or its addition is queued)");
        } else if (!add && at < 0) {
            reply_err(out, "ERR not a member (or its removal is queued)");
        } else if (!add && m->n == 1) {
            reply_err(out, "ERR cannot remove the last node");
        } else if (add && m->n >= GS_RING_MAX_NODES) {
            reply_err(out, "ERR the cluster has the most nodes it can");
        } else if (next - head >= META_QUEUE_MAX) {
            reply_err(out, "ERR membership queue is full; retry once a change is done");
        } else {
            char key[40], val[GS_RING_NAME_MAX + 8];
            queue_key(key, sizeof(key), next);
            int vl = snprintf(val, sizeof(val), "%s %s", add ? "add" : "remove", node);
            if (gs_store_set(s, key, strlen(key), val, (size_t)vl, -1, NULL) != 0) {
                reply_err(out, "OOM");
            } else {
                set_pos(s, KEY_NEXT, next + 1);
                char r[32];
                int rl = snprintf(r, sizeof(r), ":%llu\r\n", (unsigned long long)next);
                core_buf_append(out, r, (size_t)rl);
            }
        }
    }
    (void)mt;
    free(m);
}

static void exec_done(struct gs_meta *mt, struct gs_store *s, uint64_t pos, uint64_t version,
                      struct core_buf *out)
{
    uint64_t head = get_pos(s, KEY_HEAD);
    struct gs_membership *m = malloc(sizeof(*m));
    bool add;
    char node[GS_RING_NAME_MAX];
    if (!m) {
        reply_err(out, "OOM");
        return;
    }
    if (pos == head && get_membership(s, m) && get_change(s, pos, &add, node, sizeof(node))) {
        apply_change(m, add, node);
        m->version = version > m->version ? version : m->version + 1;
        put_membership(s, m);
        char key[40];
        queue_key(key, sizeof(key), pos);
        gs_store_delete(s, key, strlen(key), 0);
        set_pos(s, KEY_HEAD, head + 1);
        desire_voters(mt, m);
        CORE_INFO("cluster: meta: change %llu done (%s %s), membership version %llu",
                  (unsigned long long)pos, add ? "add" : "remove", node,
                  (unsigned long long)m->version);
    }
    free(m);
    reply_ok(out); /* a repeat is harmless: the position has passed */
}

static void exec_membership(struct gs_meta *mt, struct gs_store *s, bool sync, const char *text,
                            size_t len, struct core_buf *out)
{
    struct gs_membership *m = malloc(sizeof(*m)), *have = malloc(sizeof(*have));
    if (!m || !have) {
        reply_err(out, "OOM");
    } else if (gs_membership_parse(m, text, len) != 0 || m->change != GS_CHANGE_NONE) {
        reply_err(out, "ERR malformed membership");
    } else {
        bool known = get_membership(s, have);
        bool take = sync ? known && m->version > have->version &&
                               get_pos(s, KEY_HEAD) == get_pos(s, KEY_NEXT)
                         : !known;
        if (take) {
            put_membership(s, m);
            desire_voters(mt, m);
        }
        reply_ok(out);
    }
    free(m);
    free(have);
}

static bool is_word(const char *p, size_t len, const char *w)
{
    return len == strlen(w) && memcmp(p, w, len) == 0;
}

static bool parse_u64(const char *p, size_t len, uint64_t *out)
{
    char tmp[24];
    if (len == 0 || len >= sizeof(tmp))
        return false;
    memcpy(tmp, p, len);
    tmp[len] = '\0';
    char *end;
    *out = strtoull(tmp, &end, 10);
    return *end == '\0' && tmp[0] >= '0' && tmp[0] <= '9';
}

/* raft_glue's executor for the meta group (see the entries above). */
static void meta_exec(void *ctx, struct gs_store *s, int64_t now_ms, unsigned argc,
                      const char *const *argv, const size_t *argvlen, struct core_buf *out)
{
    struct gs_meta *mt = ctx;
    (void)now_ms;
    uint64_t a, b;
    char node[GS_RING_NAME_MAX];
    if (argc == 2 &&
        (is_word(argv[0], argvlen[0], "add") || is_word(argv[0], argvlen[0], "remove"))) {
        if (argvlen[1] == 0 || argvlen[1] >= sizeof(node)) {
            reply_err(out, "ERR bad address (want host:port)");
            return;
        }
        memcpy(node, argv[1], argvlen[1]);
        node[argvlen[1]] = '\0';
        exec_request(mt, s, argvlen[0] == 3, node, out);
    } else if (argc == 3 && is_word(argv[0], argvlen[0], "done") &&
               parse_u64(argv[1], argvlen[1], &a) && parse_u64(argv[2], argvlen[2], &b)) {
        exec_done(mt, s, a, b, out);
    } else if (argc == 2 &&
               (is_word(argv[0], argvlen[0], "init") || is_word(argv[0], argvlen[0], "sync"))) {
        exec_membership(mt, s, argvlen[0] == 4 && argv[0][0] == 's', argv[1], argvlen[1], out);
    } else {
        reply_err(out, "ERR malformed meta entry");
    }
}

/* ---------------------------------------------------------------- group */

static int start_meta(struct gs_cluster *cl, struct gs_meta *mt, const struct gs_membership *m,
                      bool join)
{
    struct gs_node *n = cl->node;
    char(*names)[GS_RING_NAME_MAX] = malloc(GS_RING_MAX_NODES * sizeof(*names));
    if (!names)
        return CORE_ENOMEM;
    unsigned k = voters_of(m, names);
    struct gs_raft_peer peers[META_VOTERS];
    char addrs[META_VOTERS][GS_RING_NAME_MAX + 16];
    unsigned np = 0;
    for (unsigned i = 0; i < k; i++) {
        struct cnode nd;
        if (peer_of(names[i], &nd, addrs[np], sizeof(addrs[np])) == 0) {
            peers[np] = (struct gs_raft_peer){nd.raft_id, addrs[np]};
            np++;
        }
    }
    free(names);
    if (join) {
        /* Only this node: the leader adds it (gs_group_set_desired). */
        char addr[GS_RING_NAME_MAX + 16];
        struct cnode nd;
        peer_of(cl->nodes[cl->self].name, &nd, addr, sizeof(addr));
        snprintf(addrs[0], sizeof(addrs[0]), "%s", addr);
        peers[0] = (struct gs_raft_peer){nd.raft_id, addrs[0]};
        np = 1;
    }
    if (!mt->store) {
        struct gs_store_config scfg = {.hash_seed = core_hash64(&mt, sizeof(mt), 7)};
        int rc = gs_store_new(&mt->store, &scfg);
        if (rc)
            return rc;
    }
    char dir[CORE_OPT_STRLEN + 16];
    snprintf(dir, sizeof(dir), "%s/meta", n->cfg.dir[0] ? n->cfg.dir : ".");
    /* Its Raft state is kept where the shards' is: with --raft-store
     * dynamodb, in the table (under this node's id and "meta"), so a
     * whole-cluster restart with no local disk keeps the queue too. */
    struct gs_raft_store_config store;
    bool dynamo = gs_cl_raft_store_dynamo(&n->cfg);
    if (dynamo) {
        memset(&store, 0, sizeof(store));
        int rc = gs_cl_dynamo_config(&n->cfg, n->cfg.raft_store, &store.ddb);
        if (rc)
            return rc;
    }
    struct gs_group_config gcfg = {
        .id = cl->nodes[cl->self].raft_id,
        .dir = dir,
        .peers = peers,
        .n_peers = np,
        /* Small state: snapshots are cheap, keep the log short. */
        .snapshot_threshold = 256,
        .snapshot_trailing = 64,
        .mux = cl->mux,
        .mux_group = META_MUX_GROUP,
        .join = join,
        .store = dynamo ? &store : NULL,
        .fsm = {.store = mt->store, .exec = meta_exec, .exec_ctx = mt, .max_inflight = 4},
    };
    int rc = gs_group_start(&mt->raft, n->loop, &gcfg);
    if (rc) {
        CORE_WARN("cluster: cannot start the meta group in %s", dir);
        mt->raft = NULL;
        return rc;
    }
    CORE_INFO("cluster: meta group member (data %s%s)", dir, join ? ", joining" : "");
    return 0;
}

/* The membership this node serves (no change), for voters and init. */
static struct gs_membership *served(struct gs_cluster *cl)
{
    struct gs_membership *m = malloc(sizeof(*m));
    if (!m)
        return NULL;
    gs_cl_membership(cl, m, false);
    m->change = GS_CHANGE_NONE;
    m->change_node[0] = '\0';
    return m;
}

int gs_cl_meta_start(struct gs_cluster *cl)
{
    struct gs_meta *mt = calloc(1, sizeof(*mt));
    struct gs_membership *m = served(cl);
    char(*scratch)[GS_RING_NAME_MAX] = malloc(GS_RING_MAX_NODES * sizeof(*scratch));
    int rc = 0;
    if (!mt || !m || !scratch) {
        rc = CORE_ENOMEM;
        free(mt);
    } else {
        mt->cl = cl;
        cl->meta = mt;
        /* A voter of the served membership holds a replica from the start
         * (bootstrapped at a first start, or when an older data directory
         * has none); others join once a change makes them voters. */
        if (is_voter(m, cl->nodes[cl->self].name, scratch))
            rc = start_meta(cl, mt, m, false);
    }
    free(m);
    free(scratch);
    return rc;
}

static void on_meta_closed(void *data)
{
    struct gs_cluster *cl = data;
    gs_cl_group_closed(cl);
}

void gs_cl_meta_stop(struct gs_cluster *cl)
{
    struct gs_meta *mt = cl->meta;
    if (!mt)
        return;
    if (mt->job)
        gs_meta_job_stop(mt->job);
    if (mt->raft) {
        cl->closing++;
        (void)gs_cl_keep_closed(cl, mt->raft);
        gs_group_close(mt->raft, on_meta_closed, cl);
        mt->raft = NULL;
    }
}

void gs_cl_meta_free(struct gs_cluster *cl)
{
    struct gs_meta *mt = cl->meta;
    if (!mt)
        return;
    gs_meta_job_free(mt->job); /* joins the thread: stopped in gs_cl_meta_stop */
    if (mt->store)
        gs_store_free(mt->store);
    free(mt);
    cl->meta = NULL;
}

/* --------------------------------------------------------------- leader */

static void on_own_entry(void *data, int status, const char *reply, size_t len)
{
    struct gs_meta *mt = data;
    (void)reply;
    (void)len;
    mt->proposing = false;
    if (status != 0)
        CORE_DEBUG("cluster: meta entry not applied (%s): retried", core_strerror(status));
}

static void propose(struct gs_meta *mt, unsigned argc, const char *const *argv, const size_t *len)
{
    if (gs_fsm_submit(gs_group_fsm(mt->raft), argc, argv, len, on_own_entry, mt) == 0)
        mt->proposing = true;
}

static void propose_membership(struct gs_meta *mt, const char *op, const struct gs_membership *m)
{
    struct core_buf b = {0};
    if (gs_membership_format(m, &b) == 0) {
        const char *argv[] = {op, b.data};
        size_t len[] = {strlen(op), b.len};
        propose(mt, 2, argv, len);
    }
    core_buf_free(&b);
}

/* The coordinator finished the head: pop it through the log. */
static void finish_job(struct gs_meta *mt)
{
    uint64_t version;
    bool ok = gs_meta_job_result(mt->job, &version);
    gs_meta_job_free(mt->job);
    mt->job = NULL;
    if (!ok)
        return; /* stopped: a later tick starts it again */
    char p[24], v[24];
    int pl = snprintf(p, sizeof(p), "%llu", (unsigned long long)mt->job_seq);
    int vl = snprintf(v, sizeof(v), "%llu", (unsigned long long)version);
    const char *argv[] = {"done", p, v};
    size_t len[] = {4, (size_t)pl, (size_t)vl};
    propose(mt, 3, argv, len);
}

void gs_cl_meta_cron(struct gs_cluster *cl)
{
    struct gs_meta *mt = cl->meta;
    if (!mt)
        return;
    char(*scratch)[GS_RING_NAME_MAX] = NULL;
    struct gs_membership *m = NULL;
    if (!mt->raft) {
        /* Made a voter by a finished change (a node added, or a voter
         * removed): join; the leader adds this node. */
        if (cl->target || !(m = served(cl)) ||
            !(scratch = malloc(GS_RING_MAX_NODES * sizeof(*scratch))))
            goto out;
        if (is_voter(m, cl->nodes[cl->self].name, scratch))
            (void)start_meta(cl, mt, m, true);
        goto out;
    }
    if (mt->job && gs_meta_job_done(mt->job) && !mt->proposing) {
        finish_job(mt);
        goto out;
    }
    if (!gs_group_is_leader(mt->raft)) {
        if (mt->job)
            gs_meta_job_stop(mt->job); /* invariant 1; freed once it returns */
        goto out;
    }
    if (mt->job || mt->proposing)
        goto out;
    m = malloc(sizeof(*m));
    scratch = malloc(GS_RING_MAX_NODES * sizeof(*scratch));
    if (!m || !scratch)
        goto out;
    if (!get_membership(mt->store, m)) {
        struct gs_membership *own = served(cl);
        if (own)
            propose_membership(mt, "init", own);
        free(own);
        goto out;
    }
    const char *self = cl->nodes[cl->self].name;
    uint64_t head = get_pos(mt->store, KEY_HEAD), next = get_pos(mt->store, KEY_NEXT);
    bool add = false;
    char node[GS_RING_NAME_MAX] = "";
    bool queued = head < next && get_change(mt->store, head, &add, node, sizeof(node));
    if (!is_voter(m, self, scratch) || (queued && !add && strcmp(node, self) == 0)) {
        /* Invariant 3: another voter leads (and coordinates) instead. */
        (void)gs_group_transfer(mt->raft, 0);
        goto out;
    }
    if (!queued) {
        if (head == next && !cl->target && cl->version > m->version) {
            struct gs_membership *own = served(cl);
            if (own)
                propose_membership(mt, "sync", own);
            free(own);
        }
        goto out;
    }
    if (gs_meta_job_start(&mt->job, head, add, node, m) == 0) {
        mt->job_seq = head;
        CORE_INFO("cluster: meta: running change %llu (%s %s)", (unsigned long long)head,
                  add ? "add" : "remove", node);
    }
out:
    free(m);
    free(scratch);
}

/* ------------------------------------------------------------- commands */

/* -TRYAGAIN naming where the meta leader is (or a voter to ask). */
static void reply_redirect(struct gs_cluster *cl, struct gs_client *c)
{
    struct gs_meta *mt = cl->meta;
    uint64_t id;
    char addr[GS_RING_NAME_MAX + 16];
    if (mt->raft && gs_group_leader(mt->raft, &id, addr, sizeof(addr)) == 0) {
        for (unsigned i = 0; i < cl->n; i++)
            if (!cl->nodes[i].removed && cl->nodes[i].raft_id == id) {
                gs_errorf(c, "TRYAGAIN meta leader %s", cl->nodes[i].name);
                return;
            }
    }
    if (!mt->raft) {
        /* Not a voter: send the client to one, which knows the leader. */
        struct gs_membership *m = served(cl);
        char(*v)[GS_RING_NAME_MAX] = malloc(GS_RING_MAX_NODES * sizeof(*v));
        if (m && v && voters_of(m, v) > 0) {
            gs_errorf(c, "TRYAGAIN meta leader %s", v[0]);
            free(m);
            free(v);
            return;
        }
        free(m);
        free(v);
    }
    gs_error(c, "TRYAGAIN meta leader unknown (an election is running)");
}

static void on_request_done(void *data, int status, const char *reply, size_t len)
{
    struct gs_cluster_wait *w = data;
    struct gs_client *c = w->c;
    struct gs_cluster *cl = w->cl;
    gs_cl_wait_put(cl, w);
    if (!c)
        return;
    c->wait = NULL;
    if (status == 0)
        gs_reply_raw(&c->w, reply, len);
    else if (status == CORE_ESTATE)
        reply_redirect(cl, c); /* not applied: safe to send again */
    else if (status == CORE_ETIMEOUT)
        gs_error(c, "ERR request outcome unknown: the meta leader changed; see CLUSTER "
                    "MEMBERSHIP QUEUE");
    else if (status == CORE_ECLOSED)
        gs_error(c, "ERR server is shutting down");
    else
        gs_error_oom(c);
    core_conn_redeliver(c->conn);
}

static void reply_queue(struct gs_cluster *cl, struct gs_client *c)
{
    struct gs_meta *mt = cl->meta;
    struct gs_store *s = mt->store;
    uint64_t head = get_pos(s, KEY_HEAD), next = get_pos(s, KEY_NEXT);
    gs_reply_array(&c->w, 1 + (size_t)(next - head));
    char line[GS_RING_NAME_MAX + 64];
    snprintf(line, sizeof(line), "done %llu", (unsigned long long)(head - 1));
    gs_reply_bulk_cstr(&c->w, line);
    for (uint64_t p = head; p < next; p++) {
        bool add = false;
        char node[GS_RING_NAME_MAX] = "?";
        get_change(s, p, &add, node, sizeof(node));
        snprintf(line, sizeof(line), "%llu %s %s%s", (unsigned long long)p, add ? "add" : "remove",
                 node, p == head && mt->job ? " running" : "");
        gs_reply_bulk_cstr(&c->w, line);
    }
}

bool gs_cl_meta_command(struct gs_cluster *cl, struct gs_client *c, size_t argc,
                        struct gs_arg *argv)
{
    struct gs_meta *mt = cl->meta;
    bool queue = argc == 3 && gs_arg_is(&argv[2], "queue");
    bool add = argc == 4 && gs_arg_is(&argv[2], "add");
    bool remove = argc == 4 && gs_arg_is(&argv[2], "remove");
    if (!queue && !add && !remove)
        return false;
    if (!mt || !mt->raft) {
        reply_redirect(cl, c);
        return true;
    }
    if (queue) {
        /* This replica's view (a follower's may lag the leader's). */
        reply_queue(cl, c);
        return true;
    }
    struct cnode nd;
    if (gs_cl_parse_peer(&nd, argv[3].p, argv[3].len) != 0) {
        gs_error(c, "ERR bad address (want host:port)");
        return true;
    }
    if (!gs_group_is_leader(mt->raft)) {
        reply_redirect(cl, c);
        return true;
    }
    struct gs_cluster_wait *w = gs_cl_wait_get(cl);
    if (!w) {
        gs_error_oom(c);
        return true;
    }
    *w = (struct gs_cluster_wait){NULL, cl, c, 0, 0, 0, 0};
    const char *av[] = {add ? "add" : "remove", argv[3].p};
    size_t al[] = {add ? 3u : 6u, argv[3].len};
    if (gs_fsm_submit(gs_group_fsm(mt->raft), 2, av, al, on_request_done, w) != 0) {
        gs_cl_wait_put(cl, w);
        reply_redirect(cl, c);
        return true;
    }
    c->wait = w;
    return true;
}

void gs_cl_meta_info(struct gs_cluster *cl, char *out, size_t outlen)
{
    struct gs_meta *mt = cl->meta;
    if (!mt || !mt->raft)
        return;
    size_t used = strlen(out);
    uint64_t term, commit, applied;
    gs_group_raft_info(mt->raft, &term, &commit, &applied);
    /* members=0: no membership recorded yet (requests get -TRYAGAIN). */
    struct gs_membership *m = malloc(sizeof(*m));
    unsigned members = m && get_membership(mt->store, m) ? m->n : 0;
    free(m);
    snprintf(out + used, outlen > used ? outlen - used : 0,
             "meta:role=%s,term=%llu,commit=%llu,applied=%llu,members=%u,queued=%llu,"
             "done=%llu\r\n",
             gs_group_is_leader(mt->raft) ? "leader" : "follower", (unsigned long long)term,
             (unsigned long long)commit, (unsigned long long)applied, members,
             (unsigned long long)(get_pos(mt->store, KEY_NEXT) - get_pos(mt->store, KEY_HEAD)),
             (unsigned long long)(get_pos(mt->store, KEY_HEAD) - 1));
}
