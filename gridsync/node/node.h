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

/* Fill cfg with the defaults. */
void gs_config_defaults(struct gs_config *cfg);

/* Write the option table into opts (GS_NODE_MAX_OPTS rows, terminator
 * included): the node's rows, then each feature's (NULL-terminated list,
 * may be NULL), each option pointing at its field of *cfg. */
void gs_config_bind(struct gs_config *cfg, struct core_option *opts,
                    const struct gs_feature *const *features);

/* ------------------------------------------------------- command table */

/* Build the node's command index (at start). */
void gs_command_index_build(struct gs_node *n);

#endif
