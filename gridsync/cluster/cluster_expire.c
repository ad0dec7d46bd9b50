/*
 * Active expiry in cluster mode, through each group's log (the design is
 * in the comment below and docs/gridsync-cluster.md, "Expiry").
 */
#include "gridsync/cluster/cluster.h"
#include "gridsync/cluster/cluster_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gridsync/cluster/raft_glue.h"

/* ---- active expiry ------------------------------------------------------
 *
 * Only a group's leader decides that keys have expired: on each cron tick
 * it looks up the due keys of every group it leads (gs_store_due, which
 * removes nothing) and proposes one EXPIRE_ENTRY naming them. Every member
 * applying the entry deletes each key that is expired at the entry's time
 * (a lookup at that time, the same on every replica), so a write ordered
 * before the entry (a SET that cleared the TTL) wins. Followers never
 * expire on their own clock: their deletions come through the log, as
 * Redis replicas wait for the master's DEL. At most one entry per group is
 * in flight, so a slow commit does not propose the same keys again. */

#define EXPIRE_BATCH 128 /* keys per entry (one entry per group per tick) */

void gs_cl_apply_expire(struct cgroup *grp, struct gs_store *store, int64_t now_ms, unsigned nkeys,
                        const char *const *keys, const size_t *klen, struct core_buf *out)
{
    grp->last_entry_ms = now_ms;
    struct gs_store_stats before, after;
    gs_store_stats(store, &before);
    for (unsigned i = 0; i < nkeys; i++)
        (void)gs_store_lookup(store, keys[i], klen[i], now_ms, GS_LOOKUP_NOTOUCH);
    gs_store_stats(store, &after);
    char reply[32];
    int len =
        snprintf(reply, sizeof(reply), ":%llu\r\n", (unsigned long long)(before.keys - after.keys));
    core_buf_append(out, reply, (size_t)len);
}

struct due_keys {
    const char *argv[EXPIRE_BATCH + 2];
    size_t len[EXPIRE_BATCH + 2];
    unsigned n;
};

static void collect_due(void *arg, const struct gs_entry *e)
{
    struct due_keys *d = arg;
    d->argv[d->n] = gs_entry_key(e, &d->len[d->n]);
    d->n++;
}

static void on_expire_done(void *data, int status, const char *reply, size_t len)
{
    struct cgroup *grp = data;
    (void)status;
    (void)reply;
    (void)len;
    grp->expiring = false; /* failed or not, the next tick looks again */
}

/* The cluster's cron: propose the expiry of each led group's due keys, and
 * give every group's store its periodic upkeep (rehash steps, shrinking;
 * gs_store_expire_cycle at a time before any TTL expires nothing). */
void gs_cl_cron(struct gs_cluster *cl, int64_t now_ms)
{
    gs_cl_block_cron(cl);
    gs_cl_meta_cron(cl);
    for (unsigned g = 0; g < cl->n; g++) {
        struct cgroup *grp = &cl->groups[g];
        if (!grp->raft)
            continue;
        if (!gs_group_is_leader(grp->raft)) {
            /* Only what is expired at the log's own time (the last applied
             * entry, stamped by the leader), as a READONLY read judges it:
             * this removes keys a leader's read deleted without an entry
             * once the group's next entry has passed their TTL. */
            (void)gs_store_expire_cycle(
                grp->db.store, grp->last_entry_ms > 0 ? grp->last_entry_ms : INT64_MIN, 200);
            continue;
        }
        (void)gs_store_expire_cycle(grp->db.store, INT64_MIN, 200);
        if (grp->expiring)
            continue;
        struct due_keys d;
        d.argv[0] = "2";
        d.len[0] = 1;
        d.argv[1] = EXPIRE_ENTRY;
        d.len[1] = sizeof(EXPIRE_ENTRY) - 1;
        d.n = 2;
        gs_store_due(grp->db.store, now_ms, EXPIRE_BATCH, collect_due, &d);
        if (d.n == 2)
            continue;
        /* The keys point into the store: gs_fsm_submit copies them. */
        if (gs_fsm_submit(gs_group_fsm(grp->raft), d.n, d.argv, d.len, on_expire_done, grp) == 0)
            grp->expiring = true;
    }
}
