/*
 * Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH, with Redis 7.0's
 * semantics (src/multi.c) on a single node.
 *
 * A client's connection state (transitions by the function behind each):
 *
 *            gs_cmd_multi              gs_multi_queue (+QUEUED)
 *   NORMAL ───────────────────► MULTI ◄────────────┐
 *     ▲                           │ │ └────────────┘
 *     │  gs_cmd_exec/discard      │ │ queueing error (unknown command,
 *     └───────────────────────────┘ │ arity, NOAUTH, OOM):
 *                                   ▼ gs_multi_flag_error
 *                          MULTI + aborted ── EXEC ──► -EXECABORT, NORMAL
 *
 * WATCH (in NORMAL only) adds (key, client) pairs to the node's watch
 * table; the store's "key modified" hook (gs_store_on_modified) marks
 * every client watching a changed key dirty, whoever changed it (the
 * client itself outside its transaction included). The hook is installed
 * only while the table is non-empty, so a node where nobody WATCHes pays
 * one branch per write.
 *
 * Invariants:
 *  1. A client's watches are all in the node's table and in its own list;
 *     the table's count is the number of pairs of every client.
 *  2. The store's hook is set iff the table's count is not 0.
 *  3. multi.queue holds exactly `count` commands, each already checked
 *     (known, arity, authenticated); its size never exceeds the node's
 *     client-query-buffer-limit (beyond, the client is closed, as a
 *     client whose unprocessed input grows over that limit is).
 *  4. EXEC runs the queued commands back to back inside one call of the
 *     node's on_data: no other client's command runs in between.
 */
#ifndef GS_MULTI_H
#define GS_MULTI_H

#include "gridsync/client/multi_state.h"

#include <stdbool.h>
#include <stddef.h>

struct gs_node;
struct gs_client;
struct gs_command;
struct gs_arg;

/* Called by gs_execute for a command that passed its checks: when the
 * client is inside MULTI and cmd is not one that runs at once (EXEC,
 * DISCARD, MULTI, WATCH, QUIT), queue it and reply +QUEUED (or OOM when
 * maxmemory is reached and nothing can be evicted, which aborts the
 * transaction; or close the client when its queue would exceed
 * client-query-buffer-limit) and return true. Otherwise return false and
 * do nothing. The arguments are copied. */
bool gs_multi_queue(struct gs_client *c, const struct gs_command *cmd, size_t argc,
                    struct gs_arg *argv);

/* EXEC itself refused before it runs (arity, NOAUTH), inside MULTI or
 * not: Redis's rejectCommand -> execCommandAbort replies "EXECABORT
 * Transaction discarded because of: <why>" and discards any transaction.
 * Returns true when it did so; false (nothing done) when cmd is not EXEC,
 * and the caller replies the plain error. */
bool gs_multi_exec_refused(struct gs_client *c, const struct gs_command *cmd, const char *why);

/* The client is going away: drop its queue and its watches. */
void gs_multi_client_closed(struct gs_client *c);

/* Free the node's watch table (after every client has closed) and
 * remove the store's hook; before the store is freed. */
void gs_multi_node_free(struct gs_node *n);

/* SWAPDB a b has swapped the two databases' stores: the watchers of keys
 * that exist in either are dirtied (Redis's touchAllWatchedKeysInDb). */
void gs_multi_swapped(struct gs_node *n, unsigned a, unsigned b);

#endif
