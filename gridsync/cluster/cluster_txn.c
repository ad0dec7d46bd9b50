/*
 * Transactions in cluster mode: MULTI/EXEC/WATCH on one slot, as Redis
 * Cluster allows them (docs/gridsync-cluster.md, "Transactions").
 *
 * Queueing (gs_cl_txn_queue) routes each command as Redis 7.0's
 * processCommand does inside MULTI: getNodeByQuery looks at that one
 * command's keys, so keys of one command in several slots answer
 * -CROSSSLOT, a slot this node does not lead answers -MOVED (-TRYAGAIN
 * while it migrates), and each of those flags the transaction (EXEC then
 * answers -EXECABORT). Commands of one transaction in different slots are
 * each queued, and EXEC answers -CROSSSLOT and discards the transaction,
 * as getNodeByQuery does for EXEC over the whole queue. Inside a cluster
 * transaction only commands with keys, PING, ECHO and UNWATCH are accepted: the
 * queue runs on every replica when its entry is applied, where a keyless
 * command (CONFIG SET, CLIENT KILL...) must not.
 *
 * EXEC (gs_cl_txn_exec) proposes ONE entry: [TXN_ENTRY, a raft_batch.h
 * batch of the queued commands]. Every replica applies an entry whole, so
 * the transaction is applied entirely or not at all, and nothing of
 * another client's runs in between (gs_cl_apply_txn). The client's reply
 * (*N, then each command's) is computed at apply, as every write's is.
 *
 * WATCH runs against the key's group at its leader (a keyed read, with
 * the read rules of cluster-read-mode) and is remembered with the group
 * and its Raft term. Its keys are then marked by every change applied to
 * that group's store on this node, from any client or leader (the watch
 * table's store hook covers every group's store: gs_multi_watch_db). EXEC
 * with watches goes ahead only when it is exact to decide here:
 *
 *  1. the node still leads the group in the term of the WATCH: it led
 *     without interruption (a leader changes term to lead again), and
 *     since it served the WATCH as a read it had applied everything
 *     committed before its term;
 *  2. no watched key was modified or expired since;
 *  3. the group is idle: nothing proposed here waits to be applied, so
 *     every entry before the transaction's own has been applied here and
 *     seen by the hook (the entry joins the log right after them, or is
 *     dropped with this leader's log and never applied).
 *
 * A changed term answers nil (the abort is safe: nothing was written); a
 * busy group makes EXEC wait for a barrier and check again, up to
 * EXEC_WAITS times, then answer nil. Watches in a group other than the
 * transaction's answer -CROSSSLOT: the check and the writes must be in one
 * log.
 */
#include "gridsync/cluster/cluster.h"
#include "gridsync/cluster/cluster_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "gridsync/client/node_ctx.h"
#include "gridsync/commands/commands.h"
#include "gridsync/commands/multi.h"
#include "gridsync/cluster/raft_glue.h"
#include "gridsync/store/store.h"

/* Barriers an EXEC with watches waits for its group to become idle. */
#define EXEC_WAITS 32

static const char CROSSSLOT[] = "CROSSSLOT Keys in request don't hash to the same slot";

/* May a keyless command be queued in a cluster transaction? */
static bool keyless_allowed(const struct gs_command *cmd)
{
    return cmd->fn == gs_cmd_ping || cmd->fn == gs_cmd_echo || cmd->fn == gs_cmd_unwatch;
}

/* Reply an error that flags the open transaction (Redis's rejectCommand
 * -> flagTransaction). */
static bool refuse(struct gs_cluster *cl, struct gs_client *c, const struct gs_command *cmd)
{
    gs_command_rejected(cl->node, cmd);
    gs_multi_flag_error(&c->multi);
    return true;
}

/* Redirect for slot of group grp, which this node does not lead. */
static void redirect(struct gs_cluster *cl, struct cgroup *grp, struct gs_client *c, unsigned slot)
{
    if (!grp->raft) {
        gs_cl_reply_moved(c, slot, &cl->nodes[gs_cl_redirect_node(cl, grp)]);
        return;
    }
    int l = gs_cl_leader_of(cl, grp);
    if (l >= 0 && (unsigned)l != cl->self)
        gs_cl_reply_moved(c, slot, &cl->nodes[l]);
    else
        gs_error(c, "CLUSTERDOWN The cluster is down: no leader for this slot yet");
}

/* The group serving slot, when this node leads it and the slot is not
 * moving; else replies (MOVED, CLUSTERDOWN, TRYAGAIN) and NULL. */
static struct cgroup *led_group(struct gs_cluster *cl, struct gs_client *c, unsigned slot)
{
    struct cgroup *grp = &cl->groups[cl->serve[slot]];
    if (!grp->raft || !gs_group_is_leader(grp->raft)) {
        redirect(cl, grp, c, slot);
        return NULL;
    }
    if (grp->slot_state && grp->slot_state[slot] != GS_SLOT_SERVING) {
        gs_error(c, "TRYAGAIN the slot is moving to another node");
        return NULL;
    }
    return grp;
}

bool gs_cl_txn_queue(struct gs_cluster *cl, struct gs_client *c, const struct gs_command *cmd,
                     size_t argc, struct gs_arg *argv)
{
    struct gs_multi *m = &c->multi;
    unsigned slot;
    int k = gs_cl_command_keys(cmd, argc, argv, &slot);
    if (strcmp(cmd->group, "pubsub") == 0) {
        /* A subscription would be taken by every replica's apply. */
        gs_errorf(c, "ERR '%s' inside MULTI is not supported in cluster mode", cmd->name);
        return refuse(cl, c, cmd);
    }
    if (k == 0) {
        if (keyless_allowed(cmd))
            return false;
        gs_errorf(c, "ERR '%s' inside MULTI is not supported in cluster mode", cmd->name);
        return refuse(cl, c, cmd);
    }
    if (k < 0) {
        gs_error(c, CROSSSLOT);
        return refuse(cl, c, cmd);
    }
    if (!led_group(cl, c, slot))
        return refuse(cl, c, cmd);
    if (!m->has_slot) {
        m->has_slot = true;
        m->slot = slot;
    } else if (m->slot != slot) {
        m->cross_slot = true; /* EXEC answers CROSSSLOT */
    }
    return false;
}

void gs_cl_txn_watched(struct gs_cluster *cl, struct cgroup *grp, struct gs_client *c)
{
    (void)cl;
    struct gs_multi *m = &c->multi;
    uint64_t term, commit, applied;
    gs_group_raft_info(grp->raft, &term, &commit, &applied);
    if (!m->watch_set) {
        m->watch_set = true;
        m->watch_group = grp->g;
        m->watch_term = term;
    } else if (m->watch_group != grp->g) {
        m->watch_mixed = true;
    }
}

static bool group_idle(struct cgroup *grp)
{
    struct gs_fsm_stats st;
    gs_fsm_stats(gs_group_fsm(grp->raft), &st);
    return st.inflight == 0 && st.queued == 0;
}

static void abort_nil(struct gs_client *c)
{
    gs_reply_null_array(&c->w);
    gs_multi_discard(c);
}

static int add_queued(void *arg, const struct gs_command *cmd, size_t argc, struct gs_arg *argv)
{
    (void)cmd;
    struct gs_cluster *cl = arg;
    if (cl->pcap < argc) {
        const char **a = realloc(cl->pargv, argc * sizeof(*a));
        if (!a)
            return CORE_ENOMEM;
        cl->pargv = a;
        size_t *l = realloc(cl->plen, argc * sizeof(*l));
        if (!l)
            return CORE_ENOMEM;
        cl->plen = l;
        cl->pcap = argc;
    }
    for (size_t i = 0; i < argc; i++) {
        cl->pargv[i] = argv[i].p;
        cl->plen[i] = argv[i].len;
    }
    return gs_batch_add(&cl->txn, (unsigned)argc, cl->pargv, cl->plen);
}

bool gs_cl_txn_exec(struct gs_cluster *cl, struct gs_client *c)
{
    struct gs_multi *m = &c->multi;
    c->read_barrier = 0; /* a wait below has ended; everything is checked again */
    if (m->cross_slot) {
        gs_error(c, CROSSSLOT);
        gs_multi_discard(c);
        return true;
    }
    unsigned slot = m->slot;
    struct cgroup *grp = led_group(cl, c, slot);
    if (!grp) {
        gs_multi_discard(c); /* as Redis's processCommand for a redirected EXEC */
        return true;
    }
    if (m->watched) {
        if (m->watch_mixed || m->watch_group != grp->g) {
            gs_error(c, CROSSSLOT);
            gs_multi_discard(c);
            return true;
        }
        uint64_t term, commit, applied;
        gs_group_raft_info(grp->raft, &term, &commit, &applied);
        if (term != m->watch_term) {
            abort_nil(c); /* rule 1 */
            return true;
        }
        struct gs_db *selected = c->db;
        grp->db.now_ms = selected->now_ms;
        c->db = &grp->db;
        bool hold = gs_multi_watches_hold(c);
        c->db = selected;
        if (!hold) {
            abort_nil(c); /* rule 2 */
            return true;
        }
        if (!group_idle(grp)) {
            if (m->exec_waits++ < EXEC_WAITS)
                return gs_cl_defer(cl, grp, c, slot); /* rule 3: check again after */
            abort_nil(c);
            return true;
        }
    }
    /* The entry: [protocol, TXN_ENTRY, batch of the queued commands]. */
    struct gs_batch_header h = {0};
    int rc = gs_batch_begin(&cl->txn, &h);
    if (rc == 0)
        rc = gs_multi_walk(c, add_queued, cl);
    if (rc) {
        gs_error(c, "EXECABORT Transaction discarded because of: out of memory");
        gs_multi_discard(c);
        return true;
    }
    const char *argv[3] = {c->w.proto == 3 ? "3" : "2", TXN_ENTRY, cl->txn.data};
    size_t argvlen[3] = {1, sizeof(TXN_ENTRY) - 1, cl->txn.len};
    /* The entry is copied: the transaction can go now (its watches too, as
     * Redis unwatches before running the queue). */
    gs_multi_discard(c);
    return gs_cl_propose_entry(cl, grp, c, slot, 3, argv, argvlen);
}

/* ---------------------------------------------------------------- apply */

static const char ERR_ENTRY[] = "-ERR malformed transaction entry\r\n";

/* As a single write's apply-time check (cluster.c): a slot blocked for
 * migration since the proposal takes no write. argv[0] is the name. */
static bool slot_serving(struct cgroup *grp, const struct gs_command *cmd, unsigned argc,
                         const char *const *argv, const size_t *argvlen)
{
    struct gs_cluster *cl = grp->cl;
    if (cl->xcap < argc) {
        struct gs_arg *a = realloc(cl->xargv, argc * sizeof(*a));
        if (!a)
            return false; /* out of memory here: as any apply that cannot allocate */
        cl->xargv = a;
        cl->xcap = argc;
    }
    for (unsigned i = 0; i < argc; i++)
        cl->xargv[i] = (struct gs_arg){argv[i], argvlen[i]};
    unsigned slot;
    return gs_cl_command_keys(cmd, argc, cl->xargv, &slot) != 1 ||
           grp->slot_state[slot] == GS_SLOT_SERVING;
}

void gs_cl_apply_txn(struct cgroup *grp, struct gs_store *store, int64_t now_ms, int proto,
                     const char *batch, size_t len, struct core_buf *out)
{
    struct gs_cluster *cl = grp->cl;
    struct gs_node *n = cl->node;
    struct gs_batch_header h;
    struct gs_batch_reader *rd = &cl->txn_rd;
    unsigned argc;
    const char *const *argv;
    const size_t *argvlen;
    /* First pass: every command is one EXEC may run (the proposer checked
     * it; a replica must not trust the bytes), and the slot is served. The
     * entry is applied whole or not at all. */
    if (gs_batch_parse(batch, len, &h, rd) != 0 || h.ncmds == 0) {
        core_buf_append(out, ERR_ENTRY, sizeof(ERR_ENTRY) - 1);
        return;
    }
    unsigned flags = 0;
    int more;
    while ((more = gs_batch_next(rd, &argc, &argv, &argvlen)) == 1) {
        const struct gs_command *cmd = gs_command_lookup(n, argv[0], argvlen[0]);
        if (!cmd || gs_multi_runs_now(cmd) || (cmd->arity > 0 && argc != (unsigned)cmd->arity) ||
            (cmd->arity < 0 && argc < (unsigned)-cmd->arity)) {
            core_buf_append(out, ERR_ENTRY, sizeof(ERR_ENTRY) - 1);
            return;
        }
        flags |= cmd->flags;
        if (grp->slot_state && !slot_serving(grp, cmd, argc, argv, argvlen)) {
            static const char err[] = "-TRYAGAIN the slot is moving to another node\r\n";
            core_buf_append(out, err, sizeof(err) - 1);
            return;
        }
    }
    if (more < 0) {
        static const char err[] = "-OOM out of memory applying a replicated command\r\n";
        core_buf_append(out, err, sizeof(err) - 1);
        return;
    }
    /* Redis's processCommand refuses EXEC of a transaction holding a
     * denyoom command when memory cannot be made (execCommandAbort). */
    if ((flags & GS_CMD_DENYOOM) && n->cfg.maxmemory > 0 &&
        gs_store_make_room(store) == CORE_ENOMEM) {
        static const char err[] = "-EXECABORT Transaction discarded because of: OOM command not "
                                  "allowed when used memory > 'maxmemory'.\r\n";
        core_buf_append(out, err, sizeof(err) - 1);
        return;
    }
    grp->last_entry_ms = now_ms;
    char head[32];
    int hl = snprintf(head, sizeof(head), "*%u\r\n", h.ncmds);
    core_buf_append(out, head, (size_t)hl);
    (void)gs_batch_parse(batch, len, &h, rd); /* passed above */
    while (gs_batch_next(rd, &argc, &argv, &argvlen) == 1) {
        const struct gs_command *cmd = gs_command_lookup(n, argv[0], argvlen[0]);
        gs_cl_apply_command(grp, store, now_ms, proto, cmd, argc, argv, argvlen, out);
    }
}
