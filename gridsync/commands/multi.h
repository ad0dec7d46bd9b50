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

/* ---- For cluster mode (gridsync/cluster/cluster.c, "Transactions") ----
 *
 * There EXEC does not run the queue here: it checks the watches, turns the
 * queue into one Raft log entry and answers with the replies computed when
 * the entry is applied. These are the pieces it needs. */

/* Does cmd run at once inside MULTI rather than being queued (EXEC,
 * DISCARD, MULTI, WATCH, QUIT)? */
bool gs_multi_runs_now(const struct gs_command *cmd);

/* Call fn for each queued command in order (argv valid during the call,
 * pointing into the queue; fn must not change the queue). Stops at fn's first non-zero return and
 * returns it; 0 when every command was visited; CORE_ENOMEM when the
 * argument array cannot grow (the walk then stops). */
int gs_multi_walk(struct gs_client *c,
                  int (*fn)(void *arg, const struct gs_command *cmd, size_t argc,
                            struct gs_arg *argv),
                  void *arg);

/* May EXEC go ahead as far as the watches go: false when a watched key
 * was modified since WATCH or has expired since (looked up in c->db, the
 * database the watched keys live in). */
bool gs_multi_watches_hold(struct gs_client *c);

/* Redis's discardTransaction: leave MULTI, forget the queue and the
 * watches. */
void gs_multi_discard(struct gs_client *c);

/* A database outside the node's array whose keys clients may WATCH
 * (cluster mode: a Raft group's store; db->node must be n). Its store's
 * modified hook then belongs to the watch table, as the node's do. Returns
 * 0 or CORE_ENOMEM. gs_multi_unwatch_db removes it (before its store is
 * freed); a database given twice is kept once. */
int gs_multi_watch_db(struct gs_node *n, struct gs_db *db);
void gs_multi_unwatch_db(struct gs_node *n, struct gs_db *db);

#endif
