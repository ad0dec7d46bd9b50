/*
 * What the server command files (cmd_server.c: PING, ECHO, TIME, QUIT,
 * SHUTDOWN, AUTH, HELLO and these helpers; cmd_info.c; cmd_config.c;
 * cmd_command.c; cmd_client.c) share. Internal to commands/: not for other
 * modules.
 */
#ifndef GS_CMD_SERVER_H
#define GS_CMD_SERVER_H

#include "core/buf.h"
#include "gridsync/client/node_ctx.h"
#include "gridsync/commands/commands.h"

#include <stdbool.h>
#include <stddef.h>

/* The node's scratch buffer serves every client; one KEYS over a big key
 * space or a RENAME of a big value would otherwise keep it at that size
 * for good, outside used_memory and maxmemory. */
#define GS_SCRATCH_KEEP (256 * 1024)

/* Give the node's scratch buffer back when a command grew it past
 * GS_SCRATCH_KEEP. */
void gs_scratch_done(struct gs_node *n);

/* printf onto the end of b, however long the result (nothing on OOM:
 * b->oom tells). */
void gs_sbprintf(struct core_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A container command's subcommand, with Redis 7.0's arity for it (its
 * commands.def): the same convention as the command table, counting the
 * container's name. */
struct gs_subcommand {
    const char *name;
    int arity;
    const char *fullname; /* "client|list": arity errors and CLIENT LIST's cmd= */
};

/* Redis's redactClientCommandArgument, for what SLOWLOG and MONITOR
 * show: AUTH's arguments and HELLO's AUTH user and password become
 * "(redacted)". Returns argv, or `shown` (8 entries) holding the copy. */
const struct gs_arg *gs_redact_secrets(size_t argc, const struct gs_arg *argv,
                                       struct gs_arg shown[8]);

/* "ERR unknown subcommand '<sub>'. Try <cmd> HELP." */
void gs_unknown_subcommand(struct gs_client *c, const struct gs_arg *sub, const char *cmd);

/* For a container that dispatches by itself (PUBSUB, SLOWLOG, LATENCY):
 * tell gs_call's statistics which subcommand ran (fullname "slowlog|get",
 * verdict GS_SUB_RAN), was refused for its argument count (GS_SUB_ARITY)
 * or was unknown (GS_SUB_UNKNOWN), as gs_subcommand_ok does. */
void gs_subcommand_stat(struct gs_client *c, const char *fullname, int verdict);

/* Redis 7's processCommand for container commands: an unknown subcommand
 * is "unknown subcommand", a known one with the wrong argument count is
 * "wrong number of arguments for 'client|getname' command". Returns false
 * after replying with the error. */
bool gs_subcommand_ok(struct gs_client *c, size_t argc, struct gs_arg *argv,
                      const struct gs_subcommand *table, const char *container);

/* The HELP reply of container command cmd: a head line, then lines
 * (NULL-terminated). */
void gs_reply_help(struct gs_client *c, const char *cmd, const char *const *lines);

/* Redis's validateClientName: printable ASCII without spaces. */
bool gs_client_name_valid(const struct gs_arg *a);

/* A NUL-terminated malloc'd copy of a (the caller frees it); NULL on OOM. */
char *gs_arg_dup(const struct gs_arg *a);

/* CLIENT SETNAME / HELLO SETNAME: an empty name clears it. */
void gs_client_set_name(struct gs_client *c, const struct gs_arg *a);

#endif
