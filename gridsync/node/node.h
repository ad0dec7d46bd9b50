/*
 * A GridSync node: one event loop, one TCP server (core/uv_server), one
 * store, the configuration and the per-client state. Everything lives in
 * struct gs_node (no globals), so a node with one loop per core is later a
 * matter of creating several.
 *
 * Command handlers (commands/cmd_*.c) get their keyspace and clock from
 * their client's database context (gridsync/client/client.h), reply
 * through c->w and never block.
 */
#ifndef GS_NODE_H
#define GS_NODE_H

#include "gridsync/client/node_ctx.h"
#include "gridsync/commands/commands.h"
#include "gridsync/commands/multi.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* Create a node from a filled configuration (see gs_node_options for the
 * defaults), bind and listen, then start each feature of the
 * NULL-terminated list (may be NULL: none). Returns 0 or a CORE_E* code
 * (with a log line). *out is freed by gs_node_free after the loop has
 * returned. */
int gs_node_new(struct gs_node **out, uv_loop_t *loop, const struct gs_config *cfg,
                const struct gs_feature *const *features);

void gs_node_free(struct gs_node *n);

/* Directives of Redis 7.0's redis.conf that mean nothing to GridSync
 * (persistence, replication, encodings tuning ...): a config file may hold
 * them; gridsync-server logs a warning for each and goes on. Directives
 * that would change security or data (rename-command, user, replicaof)
 * are not in the list: a file that has them is refused. */
extern const char *const gs_redis_conf_ignored[];

/* ------------------------------------------------------- command table */

/* Build the node's command index and its command statistics (at start;
 * gs_node_free frees them). Returns 0 or CORE_ENOMEM. */
int gs_command_index_build(struct gs_node *n);

#endif
