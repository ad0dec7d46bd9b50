/*
 * The origin inside a GridSync node: GET and MGET misses are fetched from
 * the origin (gridsync/origin/origin.h) and their replies held back in order.
 *
 * It is wired in as a node feature (gs_origin_feature, client/node_ctx.h: start
 * and stop, a client closing, the output limit, CONFIG SET, INFO and
 * RESETSTAT) and as the databases' read-miss hook (struct gs_miss_ops,
 * client/client.h: GET and MGET misses); the node names none of this.
 * Everything else (the per-client queue of replies waiting on the origin,
 * storing filled values, the error texts) is here.
 *
 * Reply order with pipelining: a GET that waits on the origin becomes a
 * "held reply" at the tail of its client's queue, and the client's writer
 * is pointed at that held reply's `after` buffer, so the replies of the
 * commands that follow (executed at once, as usual) collect behind it.
 * When the head of the queue is answered, its reply and everything held
 * after it go to the connection's output, then the next head if it is
 * answered too, and so on; when the queue empties the writer points at
 * the connection's output again.
 *
 *   writer -> conn out                 (no held reply: the usual path)
 *   writer -> tail->after              (queue: head ... tail)
 *   head answered -> out += head->reply + head->after; pop; repeat
 *
 * Invariants:
 *  1. A client's writer points at its last held reply's `after` buffer
 *     iff its queue is not empty, else at the connection's output.
 *  2. A held reply is freed only after each of its waiters has been
 *     answered or cancelled; a closing client cancels all of them.
 *  3. A filled value never overwrites a key that is present when the fetch
 *     completes (a SET that came meanwhile wins). In cluster mode the
 *     fill is a SET NX proposed through the key's Raft group by its
 *     leader (the cluster feature's fill hook), so every replica keeps the
 *     same value and "present" is decided at the entry's place in the
 *     log; a node that does not lead the key's group serves the value
 *     without keeping it.
 */
#ifndef GS_ORIGIN_NODE_H
#define GS_ORIGIN_NODE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"

struct gs_node;
struct gs_client;
struct gs_arg;
struct gs_feature;

/* Read-through as a node feature (always on; idle without `origin`). */
extern const struct gs_feature gs_origin_feature;

/* Create the node's origin if the `origin` option is set (n->origin stays
 * NULL otherwise) and install read-through on the node's databases
 * (struct gs_miss_ops, gridsync/client/client.h): a GET miss is answered
 * now or later through a held reply; an MGET with any miss waits as a
 * whole, each missing key fetched once. Returns 0 or a CORE_E* code (with
 * a log line). */
int gs_origin_node_start(struct gs_node *n);

/* Free the origin: waiting clients get an error reply. */
void gs_origin_node_stop(struct gs_node *n);

/* Apply run-time changes (CONFIG SET origin-coalesce). */
void gs_origin_node_apply_config(struct gs_node *n);

/* client-output-buffer-limit for a client with held replies: the replies
 * queued behind origin fetches (and the values already fetched for them)
 * count with its unsent output, since they are output it will be sent.
 * Over the limit, the client is closed (as core_conn_flush closes a client
 * over the limit) and true is returned. O(1). */
bool gs_origin_node_over_output_limit(struct gs_client *c);

/* The client is going away: cancel its waiters, drop its held replies. */
void gs_origin_node_client_closed(struct gs_client *c);

/* CONFIG RESETSTAT: zero the origin's counters and latency histogram. */
void gs_origin_node_reset_stats(struct gs_node *n);

/* Append the "# Origin" INFO section. */
void gs_origin_node_info(struct gs_node *n, struct core_buf *b);

#endif
