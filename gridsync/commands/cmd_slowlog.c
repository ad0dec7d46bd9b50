/*
 * SLOWLOG GET|LEN|RESET|HELP and LATENCY LATEST|RESET|HELP, with Redis
 * 7.0's replies and errors; the records are kept by commands/slowlog.h, filled
 * by gs_call (node.h).
 */
#include "gridsync/client/node_ctx.h"
#include "gridsync/commands/cmd_server.h"
#include "gridsync/commands/commands.h"
#include "gridsync/commands/slowlog.h"

#include <string.h>

static void reply_lines(struct gs_client *c, const char *const *lines, size_t n)
{
    gs_reply_array(&c->w, n);
    for (size_t i = 0; i < n; i++)
        gs_reply_simple(&c->w, lines[i], strlen(lines[i]));
}

static void arity_error(struct gs_client *c, const char *container, const struct gs_arg *sub)
{
    static const char *const names[] = {"slowlog|len", "slowlog|reset", "slowlog|help",
                                        "latency|latest", "latency|help"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        size_t cl = strlen(container);
        if (strncmp(names[i], container, cl) == 0 && gs_arg_is(sub, names[i] + cl + 1))
            gs_subcommand_stat(c, names[i], GS_SUB_ARITY);
    }
    char lower[32];
    size_t n = sub->len < sizeof(lower) - 1 ? sub->len : sizeof(lower) - 1;
    for (size_t i = 0; i < n; i++)
        lower[i] = (char)(sub->p[i] | 0x20);
    lower[n] = 0;
    gs_errorf(c, "ERR wrong number of arguments for '%s|%s' command", container, lower);
}

static void unknown_sub(struct gs_client *c, const char *upper, const struct gs_arg *sub)
{
    gs_subcommand_stat(c, NULL, GS_SUB_UNKNOWN);
    gs_errorf(c, "ERR unknown subcommand '%.*s'. Try %s HELP.",
              (int)(sub->len < 128 ? sub->len : 128), sub->p, upper);
}

void gs_cmd_slowlog(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_slowlog *sl = c->node->slowlog;
    const struct gs_arg *sub = &argv[1];
    if (gs_arg_is(sub, "get")) {
        gs_subcommand_stat(c, "slowlog|get", GS_SUB_RAN);
        if (argc > 3) { /* variable arity: slowlogCommand's own error */
            gs_errorf(c,
                      "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try "
                      "SLOWLOG HELP.",
                      (int)sub->len, sub->p);
            return;
        }
        int64_t count = 10;
        if (argc == 3 && (!gs_string2ll(argv[2].p, argv[2].len, &count) || count < -1)) {
            gs_error(c, "ERR count should be greater than or equal to -1");
            return;
        }
        gs_slowlog_reply(sl, &c->w, count);
    } else if (gs_arg_is(sub, "len") || gs_arg_is(sub, "reset") || gs_arg_is(sub, "help")) {
        if (argc != 2) {
            arity_error(c, "slowlog", sub);
        } else if (gs_arg_is(sub, "len")) {
            gs_subcommand_stat(c, "slowlog|len", GS_SUB_RAN);
            gs_reply_int(&c->w, (int64_t)gs_slowlog_len(sl));
        } else if (gs_arg_is(sub, "reset")) {
            gs_subcommand_stat(c, "slowlog|reset", GS_SUB_RAN);
            gs_slowlog_reset(sl);
            gs_reply_ok(&c->w);
        } else {
            gs_subcommand_stat(c, "slowlog|help", GS_SUB_RAN);
            static const char *const lines[] = {
                "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GET [<count>]",
                "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
                "    Entries are made of:",
                "    id, timestamp, time in microseconds, arguments array, client IP and port,",
                "    client name",
                "LEN",
                "    Return the length of the slowlog.",
                "RESET",
                "    Reset the slowlog.",
                "HELP",
                "    Prints this help.",
            };
            reply_lines(c, lines, sizeof(lines) / sizeof(lines[0]));
        }
    } else {
        unknown_sub(c, "SLOWLOG", sub);
    }
}

void gs_cmd_latency(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_slowlog *sl = c->node->slowlog;
    const struct gs_arg *sub = &argv[1];
    if (gs_arg_is(sub, "latest")) {
        if (argc != 2)
            arity_error(c, "latency", sub);
        else {
            gs_subcommand_stat(c, "latency|latest", GS_SUB_RAN);
            gs_latency_latest(sl, &c->w);
        }
    } else if (gs_arg_is(sub, "reset")) {
        gs_subcommand_stat(c, "latency|reset", GS_SUB_RAN);
        gs_reply_int(&c->w, (int64_t)gs_latency_reset(sl, argc - 2, argv + 2));
    } else if (gs_arg_is(sub, "help")) {
        if (argc != 2) {
            arity_error(c, "latency", sub);
            return;
        }
        gs_subcommand_stat(c, "latency|help", GS_SUB_RAN);
        static const char *const lines[] = {
            "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HELP",
            "    Prints this help.",
        };
        reply_lines(c, lines, sizeof(lines) / sizeof(lines[0]));
    } else {
        unknown_sub(c, "LATENCY", sub);
    }
}
