/*
 * Blocking commands (Redis 7.0's blocked.c and timeout.c), generic over
 * the value types: a command that finds nothing to pop blocks its client
 * on one or more keys of its database until a key receives a value of the
 * command's type, the timeout passes, CLIENT UNBLOCK or the client goes.
 * The list commands (commands/cmd_list_block.c) are built on it; a sorted
 * set command uses it the same way with GS_TYPE_ZSET and its own serve
 * function.
 *
 * How a command uses it:
 *
 *   if (!gs_block_parse_timeout(c, &argv[argc - 1], &deadline)) return;
 *   ...try the non-blocking form on each key; return if it replied...
 *   if (gs_block_denied(c)) { reply as on a timeout; return; }
 *   struct gs_block_spec s = {GS_TYPE_LIST, 1, argc - 2, deadline, serve, false};
 *   if (gs_block(c, argc, argv, &s)) gs_error_oom(c);
 *
 * Life of a blocked client (state of c->blocked):
 *
 *        gs_block                serve() == SERVED, timeout,
 *   NULL ---------> BLOCKED ----- CLIENT UNBLOCK ------> RESUMING
 *    ^                 |                                    |
 *    |  client closed  |        next loop iteration:        |
 *    +-----------------+---- c->blocked = NULL, its input --+
 *                             is parsed again (redeliver)
 *
 * Invariants:
 *  1. A client is BLOCKED iff each of its (database, key) pairs has it in
 *     that key's queue, in the order clients blocked there; it is then
 *     counted in gs_blocking_count and, with a deadline, in the timer heap.
 *  2. While c->blocked is not NULL the node parses no request of c: its
 *     later requests wait unread in its input, so a pipeline keeps its
 *     order (Redis's CLIENT_BLOCKED stops processInputBuffer).
 *  3. Keys are served as Redis's handleClientsBlockedOnKeys does: a key
 *     signalled during a command (gs_shared.key_ready) is served once
 *     that command has finished (after EXEC for a transaction), in the
 *     order keys were signalled, each key's clients oldest first while
 *     the key holds a value of their type; what serving pushes (BLMOVE's
 *     destination) is served in the same pass.
 *  4. The timer is armed for the earliest deadline only (a heap), so the
 *     cost of timeouts does not grow with the number of blocked clients
 *     per tick.
 *  5. Relayed serving (a database with block_relay, client/client.h: in
 *     cluster mode the pop must be an entry of the group's log). Serving
 *     c then only starts the pop: c stays BLOCKED, in its place in every
 *     queue, but "pending": it is not served again, and a timeout or
 *     CLIENT UNBLOCK that comes meanwhile is answered only once the pop
 *     has failed (gs_block_pending_done), never beside a value it took.
 *     At most one client of a queue is pending at a time, so one push
 *     starts one pop, not one per waiter; the next waiter's turn comes
 *     when that pop has finished.
 */
#ifndef GS_BLOCKING_H
#define GS_BLOCKING_H

#include "gridsync/client/client.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct gs_node;
struct gs_blocked; /* one blocked client's record (blocking.c) */

/* serve() answers: */
enum {
    GS_BLOCK_KEEP = 0,    /* nothing replied; c stays blocked */
    GS_BLOCK_SERVED = 1,  /* c got its reply (or an error): unblock it */
    GS_BLOCK_PENDING = 2, /* a relay (gs_db.block_relay) began serving c */
};

/* Serve c, blocked by gs_block, now that key (klen bytes) of its database
 * holds a value of the spec's type. argc/argv are the blocked command's
 * arguments as they were (the framework's copy, valid during the call).
 * c->db is the database c blocked in, with now_ms set. Runs once the
 * command that made the key ready has finished, never inside a handler. */
typedef int gs_block_serve_fn(struct gs_client *c, size_t argc, struct gs_arg *argv,
                              const char *key, size_t klen);

struct gs_block_spec {
    int type;            /* enum gs_type a key must hold to serve c */
    size_t first_key;    /* the keys waited on: argv[first_key ...] */
    size_t n_keys;       /*   ... n_keys of them (repeats count once) */
    int64_t deadline_ms; /* Unix ms (gs_block_parse_timeout); 0 = none */
    gs_block_serve_fn *serve;
    /* A timeout (and CLIENT UNBLOCK) answers :0 instead of a null array:
     * WAIT, which blocks on no key (n_keys 0) until its deadline. */
    bool reply_zero;
};

/* Redis's getTimeoutFromObjectOrReply in seconds: a float ("0.5", "1e3");
 * 0 blocks forever. Sets *deadline_ms to c->db->now_ms + the timeout (0
 * for forever, also when the deadline would overflow). False after
 * replying "ERR timeout is not a float or out of range" or "ERR timeout
 * is negative". */
bool gs_block_parse_timeout(struct gs_client *c, const struct gs_arg *a, int64_t *deadline_ms);

/* True when c may not block (inside MULTI/EXEC, or a client that runs a
 * replicated log entry): the command then answers as on a timeout, as
 * Redis does for CLIENT_DENY_BLOCKING. */
bool gs_block_denied(const struct gs_client *c);

/* Block c on the spec's keys of c->db. Nothing is replied now; the reply
 * comes from spec->serve, or the timeout's null array. argv is copied (the
 * caller keeps its own). Returns 0, or CORE_ENOMEM with nothing changed
 * (the caller replies OOM). c must not be blocked already and must not be
 * denied (gs_block_denied). */
int gs_block(struct gs_client *c, size_t argc, const struct gs_arg *argv,
             const struct gs_block_spec *spec);

/* CLIENT UNBLOCK: if c is blocked, answer it as on a timeout (error
 * false) or with "-UNBLOCKED client unblocked via CLIENT UNBLOCK" (error
 * true) and unblock it. Returns whether c was blocked. */
bool gs_block_unblock(struct gs_client *c, bool error);

/* True while c is blocked (CLIENT LIST's flag b); false once served. */
bool gs_block_is_blocked(const struct gs_client *c);

/* The relayed pop that serving c started (GS_BLOCK_PENDING) is over.
 * served: c got its reply (the value, or an error the caller wrote):
 * unblock it. Not served (nothing was popped: another client took the
 * value first): c stays blocked where it was, unless its timeout passed
 * or CLIENT UNBLOCK came meanwhile, which is answered now. Either way the
 * queue's next waiter gets its turn if the key still holds a value (at
 * the next gs_blocking_serve_ready). */
void gs_block_pending_done(struct gs_client *c, bool served);

/* ---------------------------------------------------- the node's side */

/* The node's blocking state: blocked clients by (database, key), the keys
 * made ready by the running command, the timer. */
struct gs_blocking;

/* Create the state for node n on its loop and install it as the key_ready
 * hook of n->shared. Returns 0 or CORE_ENOMEM. */
int gs_blocking_new(struct gs_blocking **out, struct gs_node *n);

/* Close the timers (the loop still runs); every client must have gone
 * (gs_blocking_client_closed). */
void gs_blocking_stop(struct gs_blocking *b);

/* Free after the loop has returned (NULL is fine). */
void gs_blocking_free(struct gs_blocking *b);

/* c is going away: forget it, blocked or resuming, without replying. */
void gs_blocking_client_closed(struct gs_client *c);

/* Serve the clients blocked on the keys signalled since the last call
 * (invariant 3). The node calls it after each command it ran for a
 * client, and whoever else runs commands (a replicated entry's apply)
 * may too. Cheap when nothing was signalled. */
void gs_blocking_serve_ready(struct gs_blocking *b);

/* Unblock clients blocked in db whose keys this node no longer serves
 * (cluster mode: Redis's clusterRedirectBlockedClientIfNeeded). For each
 * blocked client that is not pending (invariant 5), fn is called with
 * one of its keys; when it returns true it has written c's reply (an
 * error) and c is unblocked. */
typedef bool gs_block_abort_fn(void *arg, struct gs_client *c, const char *key, size_t klen);
void gs_blocking_abort(struct gs_blocking *b, const struct gs_db *db, gs_block_abort_fn *fn,
                       void *arg);

/* Clients blocked now (INFO's blocked_clients), and the distinct keys
 * they wait on (total_blocking_keys). */
size_t gs_blocking_count(const struct gs_blocking *b);
size_t gs_blocking_keys(const struct gs_blocking *b);

#endif
