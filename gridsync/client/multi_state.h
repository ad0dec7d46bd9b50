/*
 * The state of transactions that the client and the node embed: a
 * client's MULTI queue and WATCH list, the node's watch table. Only the
 * types live here, below the client, so that client.h need not include
 * the transaction commands (commands/multi.h), which own and change them.
 */
#ifndef GS_MULTI_STATE_H
#define GS_MULTI_STATE_H

#include "core/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gs_arg;
struct gs_db;
struct gs_watch; /* one (key, client) pair, commands/multi.c */

/* Per-client transaction state (inside struct gs_client; zero = idle). */
struct gs_multi {
    bool active;           /* between MULTI and EXEC/DISCARD */
    bool aborted;          /* a command failed to queue: EXEC answers EXECABORT */
    bool watch_dirty;      /* a watched key was modified since WATCH */
    unsigned flags;        /* union of the queued commands' GS_CMD_* flags */
    size_t count;          /* commands queued */
    struct core_buf queue; /* the queued commands, packed (multi.c) */
    struct gs_arg *argv;   /* EXEC's argument array, reused */
    size_t argv_cap;
    struct gs_watch *watched; /* this client's watches */
    /* Cluster mode (cluster/cluster.c, "Transactions"): the slot of the
     * queued commands' keys (has_slot: some command had keys; cross_slot:
     * they hash to several slots), where the watches were taken (the
     * group and its Raft term then; watch_mixed: in several groups), and
     * how many times EXEC waited for its group to be idle. */
    bool has_slot, cross_slot, watch_set, watch_mixed;
    unsigned slot, watch_group, exec_waits;
    uint64_t watch_term;
};

/* The node's watched keys: a chained hash table of (key, client) pairs. */
struct gs_watch_table {
    struct gs_watch **bucket; /* NULL until the first WATCH */
    size_t mask;              /* buckets - 1 */
    size_t count;             /* pairs */
    /* Databases outside the node's array whose keys may be watched (the
     * cluster's Raft groups: gs_multi_watch_db). */
    struct gs_db **extra;
    size_t n_extra, cap_extra;
};

/* A command was refused while the client is inside MULTI (unknown,
 * arity, NOAUTH): EXEC will answer EXECABORT. No-op outside MULTI. */
static inline void gs_multi_flag_error(struct gs_multi *m)
{
    if (m->active)
        m->aborted = true;
}

#endif
