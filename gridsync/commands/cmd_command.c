/*
 * COMMAND: COUNT, INFO, DOCS, LIST, GETKEYS and HELP, from the command
 * table (node/commands.c).
 */
#include "gridsync/commands/cmd_server.h"

#include "core/error.h"
#include "core/log.h"
#include "gridsync/commands/glob.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------- COMMAND */

static size_t count_flags(unsigned f)
{
    return (size_t)__builtin_popcount(f);
}

static void reply_command_info(struct gs_client *c, const struct gs_command *cmd)
{
    struct gs_writer *w = &c->w;
    static const struct {
        unsigned flag;
        const char *name;
    } names[] = {{GS_CMD_WRITE, "write"},
                 {GS_CMD_READONLY, "readonly"},
                 {GS_CMD_DENYOOM, "denyoom"},
                 {GS_CMD_ADMIN, "admin"},
                 {GS_CMD_NOSCRIPT, "noscript"},
                 {GS_CMD_BLOCKING, "blocking"},
                 {GS_CMD_LOADING, "loading"},
                 {GS_CMD_STALE, "stale"},
                 {GS_CMD_SKIP_MONITOR, "skip_monitor"},
                 {GS_CMD_FAST, "fast"},
                 {GS_CMD_NOAUTH, "no_auth"},
                 {GS_CMD_NO_MANDATORY_KEYS, "no_mandatory_keys"},
                 {GS_CMD_MOVABLEKEYS, "movablekeys"}};
    gs_reply_array(w, 10);
    gs_reply_bulk_cstr(w, cmd->name);
    gs_reply_int(w, cmd->arity);
    gs_reply_set(w, count_flags(cmd->flags));
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (cmd->flags & names[i].flag)
            gs_reply_simple(w, names[i].name, strlen(names[i].name));
    gs_reply_int(w, cmd->first_key);
    gs_reply_int(w, cmd->last_key);
    gs_reply_int(w, cmd->key_step);
    gs_reply_set(w, 0);   /* ACL categories */
    gs_reply_array(w, 0); /* tips */
    gs_reply_array(w, 0); /* key specs */
    gs_reply_array(w, 0); /* subcommands */
}

static void reply_command_docs(struct gs_client *c, const struct gs_command *cmd)
{
    struct gs_writer *w = &c->w;
    gs_reply_bulk_cstr(w, cmd->name);
    gs_reply_map(w, 3);
    gs_reply_bulk_cstr(w, "summary");
    gs_reply_bulk_cstr(w, cmd->summary);
    gs_reply_bulk_cstr(w, "since");
    gs_reply_bulk_cstr(w, cmd->since);
    gs_reply_bulk_cstr(w, "group");
    gs_reply_bulk_cstr(w, cmd->group);
}

static size_t command_count(void)
{
    size_t n = 0;
    while (gs_commands[n].name)
        n++;
    return n;
}

/* The ACL categories COMMAND LIST FILTERBY ACLCAT knows, derived from a
 * command's flags and group (there are no ACLs here; COMMAND INFO leaves
 * categories empty). */
static bool in_aclcat(const struct gs_command *cmd, const struct gs_arg *cat)
{
    return (gs_arg_is(cat, "read") && (cmd->flags & GS_CMD_READONLY)) ||
           (gs_arg_is(cat, "write") && (cmd->flags & GS_CMD_WRITE)) ||
           (gs_arg_is(cat, "fast") && (cmd->flags & GS_CMD_FAST)) ||
           (gs_arg_is(cat, "slow") && !(cmd->flags & GS_CMD_FAST)) ||
           (gs_arg_is(cat, "admin") && (cmd->flags & GS_CMD_ADMIN)) ||
           (gs_arg_is(cat, "dangerous") && (cmd->flags & GS_CMD_ADMIN)) ||
           (gs_arg_is(cat, "string") && strcmp(cmd->group, "string") == 0) ||
           (gs_arg_is(cat, "keyspace") && strcmp(cmd->group, "generic") == 0) ||
           (gs_arg_is(cat, "connection") && strcmp(cmd->group, "connection") == 0);
}

/* Redis 7.0's commandListCommand: COMMAND LIST [FILTERBY MODULE m |
 * ACLCAT c | PATTERN p]; any other shape is a syntax error. */
static void command_list(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    const struct gs_arg *module = NULL, *aclcat = NULL, *pattern = NULL;
    for (size_t i = 2; i < argc; i++) {
        if (gs_arg_is(&argv[i], "filterby") && argc - 1 - i == 2) {
            if (gs_arg_is(&argv[i + 1], "module"))
                module = &argv[i + 2];
            else if (gs_arg_is(&argv[i + 1], "aclcat"))
                aclcat = &argv[i + 2];
            else if (gs_arg_is(&argv[i + 1], "pattern"))
                pattern = &argv[i + 2];
            else {
                gs_error_syntax(c);
                return;
            }
            i += 2;
        } else {
            gs_error_syntax(c);
            return;
        }
    }
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            gs_reply_array(&c->w, n);
        for (const struct gs_command *cmd = gs_commands; cmd->name; cmd++) {
            if (module || (aclcat && !in_aclcat(cmd, aclcat)) ||
                (pattern &&
                 !gs_glob_match(pattern->p, pattern->len, cmd->name, strlen(cmd->name), true)))
                continue; /* no command comes from a module */
            if (pass == 0)
                n++;
            else
                gs_reply_bulk_cstr(&c->w, cmd->name);
        }
    }
}

/* Redis 7.0's getKeysSubcommandImpl: the keys of a full command line,
 * from the table's key positions (gs_command_keys). */
static void command_getkeys(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    const struct gs_command *cmd = gs_command_lookup(c->node, argv[2].p, argv[2].len);
    size_t n = argc - 2; /* the inner command's argc */
    if (!cmd) {
        gs_error(c, "ERR Invalid command specified");
        return;
    }
    if (cmd->first_key == 0 && !(cmd->flags & GS_CMD_MOVABLEKEYS)) {
        gs_error(c, "ERR The command has no key arguments");
        return;
    }
    if ((cmd->arity > 0 && n != (size_t)cmd->arity) ||
        (cmd->arity < 0 && n < (size_t)-cmd->arity)) {
        gs_error(c, "ERR Invalid number of arguments specified for command");
        return;
    }
    size_t stack[64];
    long k = gs_command_keys(cmd, n, argv + 2, stack, 64);
    if (k <= 0 && (cmd->flags & GS_CMD_NO_MANDATORY_KEYS)) {
        gs_reply_array(&c->w, 0); /* EVAL with no keys, or a count it cannot have */
        return;
    }
    size_t *pos = k > 64 ? malloc((size_t)k * sizeof(*pos)) : stack;
    if (k <= 0 || !pos) {
        gs_error(c, k <= 0 ? "ERR Invalid arguments specified for command" : "OOM out of memory");
        return;
    }
    if (pos != stack)
        gs_command_keys(cmd, n, argv + 2, pos, (size_t)k);
    gs_reply_array(&c->w, (size_t)k);
    for (long i = 0; i < k; i++)
        gs_reply_bulk(&c->w, argv[2 + pos[i]].p, argv[2 + pos[i]].len);
    if (pos != stack)
        free(pos);
}

static const struct gs_subcommand command_subs[] = {
    {"count", 2, "command|count"},
    {"list", -2, "command|list"},
    {"info", -2, "command|info"},
    {"docs", -2, "command|docs"},
    {"getkeys", -4, "command|getkeys"},
    {"help", 2, "command|help"},
    {NULL, 0, NULL},
};

void gs_cmd_command(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_node *n = c->node;
    if (argc == 1) {
        gs_reply_array(&c->w, command_count());
        for (const struct gs_command *cmd = gs_commands; cmd->name; cmd++)
            reply_command_info(c, cmd);
        return;
    }
    struct gs_arg *sub = &argv[1];
    if (!gs_subcommand_ok(c, argc, argv, command_subs, "COMMAND"))
        return;
    if (gs_arg_is(sub, "count") && argc == 2) {
        gs_reply_int(&c->w, (int64_t)command_count());
    } else if (gs_arg_is(sub, "list")) {
        command_list(c, argc, argv);
    } else if (gs_arg_is(sub, "getkeys")) {
        command_getkeys(c, argc, argv);
    } else if (gs_arg_is(sub, "info")) {
        if (argc == 2) {
            gs_reply_array(&c->w, command_count());
            for (const struct gs_command *cmd = gs_commands; cmd->name; cmd++)
                reply_command_info(c, cmd);
            return;
        }
        gs_reply_array(&c->w, argc - 2);
        for (size_t i = 2; i < argc; i++) {
            const struct gs_command *cmd = gs_command_lookup(n, argv[i].p, argv[i].len);
            if (cmd)
                reply_command_info(c, cmd);
            else
                gs_reply_null(&c->w); /* Redis's addReplyNull: $-1 in RESP2 */
        }
    } else if (gs_arg_is(sub, "docs")) {
        if (argc == 2) {
            gs_reply_map(&c->w, command_count());
            for (const struct gs_command *cmd = gs_commands; cmd->name; cmd++)
                reply_command_docs(c, cmd);
            return;
        }
        size_t found = 0;
        for (size_t i = 2; i < argc; i++)
            found += gs_command_lookup(n, argv[i].p, argv[i].len) != NULL;
        gs_reply_map(&c->w, found);
        for (size_t i = 2; i < argc; i++) {
            const struct gs_command *cmd = gs_command_lookup(n, argv[i].p, argv[i].len);
            if (cmd)
                reply_command_docs(c, cmd);
        }
    } else if (gs_arg_is(sub, "help")) {
        static const char *const lines[] = {
            "(no subcommand)",
            "    Return details about all commands.",
            "COUNT",
            "    Return the total number of commands.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about commands.",
            "INFO [<command-name> ...]",
            "    Return details about the given commands.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]",
            "    Return a list of all commands in this Redis server.",
            NULL};
        gs_reply_help(c, "COMMAND", lines);
    } else {
        gs_unknown_subcommand(c, sub, "COMMAND");
    }
}
