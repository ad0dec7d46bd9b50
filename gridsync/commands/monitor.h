/*
 * MONITOR (Redis 7.0's monitorCommand and replicationFeedMonitors): a
 * client that sent MONITOR receives, for every command another client
 * (or itself) runs, one line
 *
 *   +<unix seconds>.<microseconds> [<db> <ip:port>] "<arg>" "<arg>" ...
 *
 * with each argument quoted and escaped as Redis's sdscatrepr.
 *
 * Which commands are shown, as Redis's call(): a command is fed once it
 * has run (its error reply included), never when it was refused before
 * running (unknown, wrong arity, NOAUTH, queued by MULTI: queued
 * commands appear when EXEC runs them, before EXEC itself). Admin
 * commands (CONFIG, SLOWLOG, LATENCY, SHUTDOWN, MONITOR, and CLIENT's
 * admin subcommands) are never shown; AUTH's and HELLO's secrets are
 * "(redacted)". In cluster mode a write is shown when this node
 * proposes it to its group's Raft log (the node that took it from the
 * client), not where the log is applied.
 *
 * A monitoring client keeps the normal class's output limit (Redis too),
 * so one that does not read is cut off like any other; it may still run
 * commands, except those that touch the keyspace ("Replica can't
 * interact with the keyspace"). A second MONITOR gets no reply at all.
 *
 * Cost when nobody monitors: one test of a counter per command.
 */
#ifndef GS_MONITOR_H
#define GS_MONITOR_H

#include <stdbool.h>
#include <stddef.h>

struct gs_arg;
struct gs_client;
struct gs_command;
struct gs_node;

void gs_cmd_monitor(struct gs_client *c, size_t argc, struct gs_arg *argv);

/* Feed the command c ran (sub: the "container|sub" that ran, or NULL) to
 * every monitor, unless it is one that Redis never shows. Callers test
 * node->nmonitors first (the only cost when nobody monitors). */
void gs_monitor_feed(struct gs_client *c, const struct gs_command *cmd, const char *sub,
                     size_t argc, const struct gs_arg *argv);

/* Refuse cmd for a monitoring client (error replied): true when it
 * touches the keyspace. */
bool gs_monitor_refuses(struct gs_client *c, const struct gs_command *cmd);

/* The client is going away; and the node's monitor list is freed. */
void gs_monitor_client_closed(struct gs_client *c);
void gs_monitor_free(struct gs_node *n);

#endif
