/*
 * Join and leave: adding a node to a running cluster and removing one
 * (docs/gridsync-cluster.md, "Join and leave"). A change of membership is a
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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/addr.h"
#include "core/buf.h"
#include "core/byte.h"
#include "core/error.h"
#include "core/log.h"
#include "gridsync/cluster/cluster.h"
#include "gridsync/cluster/cluster_internal.h"
#include "gridsync/commands/multi.h"
#include "gridsync/client/node_ctx.h"
#include "gridsync/cluster/membership.h"
#include "gridsync/cluster/raft_glue.h"
#include "gridsync/cluster/registry.h"
#include "gridsync/cluster/ring.h"
#include "gridsync/cluster/slot.h"
#include "gridsync/store/store.h"

/* Start the groups of the target placement this node belongs to and is
 * not running yet (a brand-new group is bootstrapped by its members, an
 * existing one is joined), and give every running group of the target its
 * desired replica set, which its leader converges to (raft_glue.h). */
int gs_cl_apply_target(struct gs_cluster *cl)
{
    int rc = 0;
    for (unsigned i = 0; i < gs_ring_nodes(cl->target); i++) {
        unsigned g = cl->tmap[i];
        struct cgroup *grp = &cl->groups[g];
        unsigned m[GS_RING_MAX_REPLICAS];
        unsigned nm = gs_cl_ring_members(cl, cl->target, cl->tmap, g, m);
        unsigned old[GS_RING_MAX_REPLICAS];
        bool exists = gs_cl_ring_members(cl, cl->ring, cl->rmap, g, old) > 0;
        if (!grp->raft) {
            bool member = false;
            for (unsigned k = 0; k < nm; k++)
                member |= m[k] == cl->self;
            if (!member)
                continue;
            grp->cl = cl;
            grp->g = g;
            gs_cl_set_members(grp, m, nm, cl->self);
            int src = gs_cl_start_group(cl, grp, exists);
            if (src) {
                rc = src;
                continue;
            }
        }
        char addrs[GS_RING_MAX_REPLICAS][GS_RING_NAME_MAX + 16];
        struct gs_raft_peer peers[GS_RING_MAX_REPLICAS];
        for (unsigned k = 0; k < nm; k++) {
            core_addr_format(addrs[k], sizeof(addrs[k]), cl->nodes[m[k]].host,
                             cl->nodes[m[k]].port + RAFT_PORT_OFFSET);
            peers[k] = (struct gs_raft_peer){cl->nodes[m[k]].raft_id, addrs[k]};
        }
        gs_group_set_desired(grp->raft, peers, nm);
    }
    return rc;
}

static bool parse_num(const char *p, size_t len, long long *out)
{
    if (len == 0 || len > 20)
        return false;
    char tmp[24];
    memcpy(tmp, p, len);
    tmp[len] = '\0';
    char *end;
    *out = strtoll(tmp, &end, 10);
    return end == tmp + len; /* a NUL inside the field is not a number */
}

struct key_list {
    struct core_buf b; /* u32 klen, key, repeated */
    const unsigned char *state;
};

static void collect_key(void *arg, const struct gs_entry *e)
{
    struct key_list *kl = arg;
    size_t klen;
    const char *key = gs_entry_key(e, &klen);
    if (kl->state[gs_key_slot(key, klen)] != GS_SLOT_BLOCKED)
        return;
    uint32_t l = (uint32_t)klen;
    if (core_buf_append(&kl->b, &l, sizeof(l)) == 0)
        core_buf_append(&kl->b, key, klen);
}

/* Apply a migration entry of group grp (deterministic: only the entry and
 * this group's earlier entries decide the outcome). */
void gs_cl_migrate_exec(struct cgroup *grp, struct gs_store *store, int64_t now_ms, unsigned argc,
                        const char *const *argv, const size_t *argvlen, struct core_buf *out)
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
                core_buf_append(out, "-OOM\r\n", 6);
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
            int to = gs_cl_find_node(cl, argv[i + 2], argvlen[i + 2]);
            for (long long s = a; s <= b; s++) {
                grp->slot_state[s] = GS_SLOT_BLOCKED;
                grp->dest[s] = to < 0 ? NO_GROUP : (uint16_t)to;
            }
        }
        core_buf_append(out, ok, sizeof(ok) - 1);
    } else if (oplen == 6 && memcmp(op, "import", 6) == 0 && (argc - 1) % 3 == 0) {
        for (unsigned i = 1; i + 2 < argc; i += 3) {
            if (!parse_num(argv[i + 2], argvlen[i + 2], &d))
                continue;
            if (d >= 0 && d <= now_ms)
                continue; /* expired on the way */
            /* A live key here was written by a client sent with -ASK, for
             * a key the source no longer held (it expired there after it
             * was exported): that write is newer than this copy. */
            if (gs_store_lookup(store, argv[i], argvlen[i], now_ms, GS_LOOKUP_NOTOUCH))
                continue;
            gs_store_set(store, argv[i], argvlen[i], argv[i + 1], argvlen[i + 1], d < 0 ? -1 : d,
                         NULL);
        }
        core_buf_append(out, ok, sizeof(ok) - 1);
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
            core_buf_free(&kl.b);
            for (unsigned s = 0; s < GS_SLOTS; s++) {
                if (grp->slot_state[s] != GS_SLOT_BLOCKED)
                    continue;
                grp->slot_state[s] = GS_SLOT_GONE;
                /* Routing follows only during a live change, and only a
                 * switch of this change: a node restarted in the middle
                 * of one replays the switches of earlier changes too. */
                if (cl->target && grp->dest[s] != NO_GROUP &&
                    grp->dest[s] == cl->tmap[gs_ring_owner_of_slot(cl->target, s)])
                    cl->serve[s] = grp->dest[s];
            }
        }
        core_buf_append(out, ok, sizeof(ok) - 1);
    } else if (oplen == 3 && memcmp(op, "own", 3) == 0 && (argc - 1) % 2 == 0) {
        for (unsigned i = 1; i + 1 < argc; i += 2) {
            if (!parse_num(argv[i], argvlen[i], &a) ||
                !parse_num(argv[i + 1], argvlen[i + 1], &b) || a < 0 || b >= GS_SLOTS || a > b)
                continue;
            for (long long s = a; s <= b; s++) {
                if (grp->slot_state)
                    grp->slot_state[s] = GS_SLOT_SERVING; /* it may have left earlier */
                if (!cl->target)
                    continue;
                if (cl->tmap[gs_ring_owner_of_slot(cl->target, (unsigned)s)] == grp->g)
                    cl->serve[s] = (uint16_t)grp->g;
                else if (cl->rmap[gs_ring_owner_of_slot(cl->ring, (unsigned)s)] == grp->g)
                    /* An earlier change's OWN, replayed (a restart, or a
                     * new member catching up): the slot came back to this
                     * group then, so a SWITCH replayed before it no longer
                     * routes it away. That switch may name the group this
                     * change gives the slot to (an address added again),
                     * whose node would otherwise serve the slot, empty,
                     * before this change has moved its keys. */
                    cl->serve[s] = (uint16_t)grp->g;
            }
        }
        core_buf_append(out, ok, sizeof(ok) - 1);
    } else {
        core_buf_append(out, bad, sizeof(bad) - 1);
    }
}

/* One record per slot that is not served: u16 slot, u8 state, u8 name
 * length, the destination's name (empty if this node did not know it). */
int gs_cl_migration_encode(void *ctx, struct core_buf *b)
{
    const struct cgroup *grp = ctx;
    const struct gs_cluster *cl = grp->cl;
    if (!grp->slot_state)
        return 0;
    for (unsigned s = 0; s < GS_SLOTS; s++) {
        if (grp->slot_state[s] == GS_SLOT_SERVING)
            continue;
        const char *to = grp->dest[s] == NO_GROUP ? "" : cl->nodes[grp->dest[s]].name;
        size_t len = strlen(to);
        core_buf_put_le(b, s, 2);
        core_buf_put_le(b, grp->slot_state[s], 1);
        core_buf_put_le(b, len, 1);
        core_buf_append(b, to, len);
    }
    return b->oom ? CORE_ENOMEM : 0;
}

int gs_cl_migration_restore(void *ctx, const char *p, size_t len)
{
    struct cgroup *grp = ctx;
    uint8_t *state = NULL;
    uint16_t *dest = NULL;
    if (p) {
        state = calloc(GS_SLOTS, sizeof(*state));
        dest = calloc(GS_SLOTS, sizeof(*dest));
        if (!state || !dest) {
            free(state);
            free(dest);
            return CORE_ENOMEM;
        }
        size_t off = 0;
        unsigned s, st;
        const char *name;
        size_t nlen;
        int r;
        while ((r = gs_slot_state_next(p, len, &off, &s, &st, &name, &nlen)) == 1) {
            int to = nlen ? gs_cl_find_node(grp->cl, name, nlen) : -1;
            state[s] = (uint8_t)st;
            dest[s] = to < 0 ? NO_GROUP : (uint16_t)to;
        }
        if (r != 0) {
            free(state);
            free(dest);
            return CORE_EPROTO;
        }
    }
    free(grp->slot_state);
    free(grp->dest);
    grp->slot_state = state;
    grp->dest = dest;
    /* As when the block is applied: the entries after it must stay in
     * this node's log until the change is finished. */
    bool blocked = false;
    for (unsigned s = 0; state && s < GS_SLOTS && !blocked; s++)
        blocked = state[s] == GS_SLOT_BLOCKED;
    if (blocked && grp->raft && grp->cl->target && !grp->holding) {
        gs_group_hold_snapshots(grp->raft, true);
        grp->holding = true;
    }
    return 0;
}

int gs_cl_find_node(const struct gs_cluster *cl, const char *p, size_t len)
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
    int g = gs_cl_find_node(cl, a->p, a->len);
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
                              const char *op, const struct core_buf *words, size_t nwords,
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
    gs_cl_propose(cl, grp, c, 0, argc, argv);
    free(argv);
}

static void add_word(struct core_buf *b, size_t *n, long long v)
{
    char tmp[24];
    int len = snprintf(tmp, sizeof(tmp), "%lld", v);
    core_buf_append(b, tmp, (size_t)len + 1);
    (*n)++;
}

/* Ranges of slots s with pick(s) true, as words (start end [extra]). */
static size_t slot_ranges(struct gs_cluster *cl, unsigned src, int dst, bool with_dest,
                          struct core_buf *b)
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
                core_buf_append(b, cl->nodes[cur].name, strlen(cl->nodes[cur].name) + 1);
                n++;
            }
        }
        cur = d;
        start = s;
    }
    return n;
}

/* Is this change's BEGIN of grp applied here: is every slot still served
 * by grp that the target gives another group blocked? A state left by an
 * earlier change (its slots gone, or blocked by a replay) does not count:
 * only this change's slots decide. */
static bool begin_applied(const struct gs_cluster *cl, const struct cgroup *grp)
{
    for (unsigned s = 0; s < GS_SLOTS; s++) {
        if (cl->serve[s] != grp->g || cl->tmap[gs_ring_owner_of_slot(cl->target, s)] == grp->g)
            continue;
        if (!grp->slot_state || grp->slot_state[s] != GS_SLOT_BLOCKED)
            return false;
    }
    return true;
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
    if (x->state[gs_key_slot(key, klen)] != GS_SLOT_BLOCKED)
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
/* With --registry: record the change that just finished here. */
static void record_change(struct gs_cluster *cl, const char *kind, const char *node)
{
    if (!cl->registry)
        return;
    struct core_buf nodes = {0};
    for (unsigned i = 0; i < gs_ring_nodes(cl->ring); i++) {
        if (i)
            core_buf_append(&nodes, ",", 1);
        const char *nm = gs_ring_node_name(cl->ring, i);
        core_buf_append(&nodes, nm, strlen(nm));
    }
    core_buf_append(&nodes, "", 1);
    if (nodes.oom ||
        gs_registry_heartbeat_membership(cl->registry, kind, node, cl->version, nodes.data))
        CORE_WARN("registry: cannot record the membership change (out of memory)");
    core_buf_free(&nodes);
}

static void finish_change(struct gs_cluster *cl, uint64_t version)
{
    char node[GS_RING_NAME_MAX] = "";
    const char *kind = cl->leaving >= 0 ? "remove" : "add";
    if (cl->leaving >= 0)
        snprintf(node, sizeof(node), "%s", cl->nodes[cl->leaving].name);
    else
        for (unsigned i = 0; i < gs_ring_nodes(cl->target); i++)
            if (gs_ring_find(cl->ring, gs_ring_node_name(cl->target, i)) < 0)
                snprintf(node, sizeof(node), "%s", gs_ring_node_name(cl->target, i));
    if (cl->leaving >= 0)
        cl->nodes[cl->leaving].removed = true;
    cl->leaving = -1;
    gs_ring_free(cl->ring);
    cl->ring = cl->target;
    cl->target = NULL;
    memcpy(cl->rmap, cl->tmap, sizeof(cl->rmap));
    gs_cl_serve_ring(cl);
    /* The coordinator names the cluster's new version: a node that joined
     * from cluster-peers started at 0 and takes the cluster's. */
    cl->version = version > cl->version + 1 ? version : cl->version + 1;
    /* If this fails, a restart resumes the change and FINISH repeats it. */
    (void)gs_cl_save_membership(cl);
    record_change(cl, kind, node);
    for (unsigned g = 0; g < cl->n; g++) {
        struct cgroup *grp = &cl->groups[g];
        /* The slot states stay: they are applied state of the group's log
         * (a replica replaying the log after a restart rebuilds the same),
         * and GONE keeps refusing stray writes to slots that left. */
        if (grp->holding && grp->raft)
            gs_group_hold_snapshots(grp->raft, false);
        grp->holding = false;
        unsigned m[GS_RING_MAX_REPLICAS];
        unsigned nm = cl->nodes[g].removed ? 0 : gs_cl_ring_members(cl, cl->ring, cl->rmap, g, m);
        gs_cl_set_members(grp, m, nm, cl->self);
        if (grp->raft && grp->role < 0) {
            CORE_INFO("cluster: leaving the group of %s", cl->nodes[g].name);
            gs_cl_block_leave(cl, grp); /* before its store goes */
            (void)gs_cl_keep_closed(cl, grp->raft);
            if (grp->own_store)
                gs_multi_unwatch_db(cl->node, &grp->db); /* before its store goes */
            gs_group_close_erase(grp->raft, on_left_group, grp->own_store ? grp->db.store : NULL);
            grp->raft = NULL;
            grp->db.store = NULL;
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
    if ((gs_arg_is(&argv[1], "addnode") || gs_arg_is(&argv[1], "delnode")) &&
        (argc == 3 || argc == 4)) {
        bool add = gs_arg_is(&argv[1], "addnode");
        long long want = -1;
        if (argc == 4 && (!parse_num(argv[3].p, argv[3].len, &want) || want < 0)) {
            gs_error(c, "ERR invalid version");
            return true;
        }
        int idx = gs_cl_find_node(cl, argv[2].p, argv[2].len);
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
            int rc = gs_cl_apply_target(cl);
            if (rc)
                gs_errorf(c, "TRYAGAIN cannot start a group yet: %s", core_strerror(rc));
            else
                gs_reply_ok(&c->w);
            return true;
        }
        /* The change was asked for against that membership: against
         * another (a change requested meanwhile has not reached this node
         * yet, or has not finished here) it waits, so that every node
         * applies the same changes in the same order. */
        if (want >= 0 && (uint64_t)want != cl->version) {
            gs_errorf(c, "TRYAGAIN membership version is %llu here, not %lld",
                      (unsigned long long)cl->version, want);
            return true;
        }
        if (add ? idx >= 0 : idx < 0) {
            gs_error(c, add ? "ERR already a member" : "ERR no such node");
            return true;
        }
        int rc;
        if (add) {
            if (cl->n >= GS_RING_MAX_NODES ||
                gs_cl_parse_peer(&cl->nodes[cl->n], name, strlen(name))) {
                gs_error(c, "ERR bad address (want host:port)");
                return true;
            }
            if (gs_cl_clashes(cl, cl->n)) {
                memset(&cl->nodes[cl->n], 0, sizeof(cl->nodes[0]));
                gs_error(c, "ERR the node's id gs_cl_clashes with a member's");
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
        gs_cl_build_map(cl, cl->target, cl->tmap);
        /* Persisted before anything acts on it: a node restarted from here
         * on resumes the change (docs/gridsync-cluster.md, "Membership"). */
        if ((rc = gs_cl_save_membership(cl)) != 0) {
            gs_ring_free(cl->target);
            cl->target = NULL;
            cl->leaving = -1;
            if (add)
                memset(&cl->nodes[--cl->n], 0, sizeof(cl->nodes[0]));
            gs_errorf(c, "ERR cannot persist the membership: %s", core_strerror(rc));
            return true;
        }
        CORE_INFO("cluster: %s %s: moving to %u nodes", add ? "adding" : "removing", name,
                  gs_ring_nodes(cl->target));
        rc = gs_cl_apply_target(cl);
        if (rc)
            gs_errorf(c, "TRYAGAIN cannot start a group yet: %s", core_strerror(rc));
        else
            gs_reply_ok(&c->w);
        return true;
    }
    if (gs_arg_is(&argv[1], "membership") && argc > 2)
        return gs_cl_meta_command(cl, c, argc, argv); /* the queue (cluster_meta.c) */
    if (gs_arg_is(&argv[1], "membership") && argc == 2) {
        /* What a node started with cluster-seed learns the cluster from. */
        struct gs_membership *m = malloc(sizeof(*m));
        struct core_buf b = {0};
        if (m)
            gs_cl_membership(cl, m, false);
        if (!m || gs_membership_format(m, &b))
            gs_error_oom(c);
        else
            gs_reply_bulk(&c->w, b.data, b.len);
        free(m);
        core_buf_free(&b);
        return true;
    }
    if (!gs_arg_is(&argv[1], "migrate") || argc < 3)
        return false;
    struct gs_arg *op = &argv[2];
    if (gs_arg_is(op, "finish") && (argc == 3 || argc == 4)) {
        long long v = 0;
        if (argc == 4 && (!parse_num(argv[3].p, argv[3].len, &v) || v < 0)) {
            gs_error(c, "ERR invalid version");
            return true;
        }
        if (cl->target)
            finish_change(cl, (uint64_t)v);
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
    struct core_buf words = {0};
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
        if (!begin_applied(cl, grp)) {
            /* BEGIN is not applied here yet (a leader elected since may
             * not have applied it): an answer now would miss the keys,
             * and SWITCH would then delete them. */
            gs_error(c, "TRYAGAIN no slot of this group is blocked here yet");
            return true;
        }
        if (!grp->slot_state) {
            /* Nothing leaves this group. */
            gs_reply_array(&c->w, 2);
            gs_reply_bulk_cstr(&c->w, "0");
            gs_reply_array(&c->w, 0);
            return true;
        }
        struct export_ctx x = {.state = grp->slot_state};
        int64_t now = gs_node_now_ms(cl->node);
        uint64_t next = gs_store_scan(grp->db.store, (uint64_t)cur, 256, now, export_key, &x);
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
        int src = gs_cl_find_node(cl, argv[4].p, argv[4].len);
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
        core_buf_free(&words);
        return false;
    }
    core_buf_free(&words);
    return true;
}
