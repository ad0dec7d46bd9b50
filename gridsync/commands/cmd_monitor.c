/*
 * MONITOR (see monitor.h).
 *
 * Invariant: n->monitors holds exactly the open clients with c->monitor
 * set, in the order they sent MONITOR (Redis feeds them in that order).
 */
#include "gridsync/commands/monitor.h"

#include "core/buf.h"
#include "gridsync/client/node_ctx.h"
#include "gridsync/commands/cmd_server.h"
#include "gridsync/commands/commands.h"
#include "gridsync/protocol/resp_reply.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

/* Subcommands flagged "admin" in Redis 7.0 under containers that are not
 * (CONFIG, SLOWLOG and LATENCY are admin as a whole). */
static const char *const admin_subs[] = {
    "client|kill",
    "client|list",
    "client|no-evict",
    "client|pause",
    "client|unpause",
    "client|unblock",
    "cluster|addslots",
    "cluster|addslotsrange",
    "cluster|delslots",
    "cluster|delslotsrange",
    "cluster|failover",
    "cluster|forget",
    "cluster|meet",
    "cluster|reset",
    "cluster|setslot",
    "cluster|replicate",
    "cluster|saveconfig",
    "cluster|flushslots",
    "cluster|bumpepoch",
    "cluster|set-config-epoch",
    "cluster|count-failure-reports",
    NULL,
};

static bool shown(const struct gs_command *cmd, const char *sub)
{
    if (cmd->flags & GS_CMD_ADMIN)
        return false;
    for (size_t i = 0; sub && admin_subs[i]; i++)
        if (strcmp(sub, admin_subs[i]) == 0)
            return false;
    return true;
}

void gs_cmd_monitor(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    (void)argc;
    (void)argv;
    struct gs_node *n = c->node;
    if (c->multi.active || !c->conn) { /* Redis's CLIENT_DENY_BLOCKING: inside EXEC */
        gs_error(c, "ERR MONITOR isn't allowed for DENY BLOCKING client");
        return;
    }
    if (c->monitor) /* Redis ignores it, without a reply */
        return;
    if (n->nmonitors == n->monitors_cap) {
        size_t cap = n->monitors_cap ? n->monitors_cap * 2 : 4;
        struct gs_client **m = realloc(n->monitors, cap * sizeof(*m));
        if (!m) {
            gs_error_oom(c);
            return;
        }
        n->monitors = m;
        n->monitors_cap = cap;
    }
    n->monitors[n->nmonitors++] = c;
    c->monitor = true;
    gs_reply_ok(&c->w);
}

bool gs_monitor_refuses(struct gs_client *c, const struct gs_command *cmd)
{
    /* Redis: read, write and may-replicate commands (PUBLISH) */
    if (!(cmd->flags & (GS_CMD_READONLY | GS_CMD_WRITE)) && cmd->fn != gs_cmd_publish &&
        cmd->fn != gs_cmd_spublish)
        return false;
    gs_error(c, "ERR Replica can't interact with the keyspace");
    return true;
}

/* Redis's sdscatrepr. */
static void append_repr(struct core_buf *b, const char *p, size_t len)
{
    char *o = core_buf_reserve(b, len * 4 + 2);
    if (!o)
        return;
    char *start = o;
    *o++ = '"';
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)p[i];
        switch (ch) {
        case '\\':
        case '"':
            *o++ = '\\';
            *o++ = (char)ch;
            break;
        case '\n':
            *o++ = '\\', *o++ = 'n';
            break;
        case '\r':
            *o++ = '\\', *o++ = 'r';
            break;
        case '\t':
            *o++ = '\\', *o++ = 't';
            break;
        case '\a':
            *o++ = '\\', *o++ = 'a';
            break;
        case '\b':
            *o++ = '\\', *o++ = 'b';
            break;
        default:
            if (isprint(ch)) {
                *o++ = (char)ch;
            } else {
                static const char hex[] = "0123456789abcdef";
                *o++ = '\\', *o++ = 'x', *o++ = hex[ch >> 4], *o++ = hex[ch & 15];
            }
        }
    }
    *o++ = '"';
    b->len += (size_t)(o - start);
}

void gs_monitor_feed(struct gs_client *c, const struct gs_command *cmd, const char *sub,
                     size_t argc, const struct gs_arg *argv)
{
    struct gs_node *n = c->node;
    if (!shown(cmd, sub))
        return;
    struct gs_arg hidden[8];
    const struct gs_arg *args = gs_redact_secrets(argc, argv, hidden);
    struct core_buf *line = &n->monitor_line;
    line->len = 0;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    char head[96];
    int k = snprintf(head, sizeof head, "+%ld.%06ld [%u %s] ", (long)tv.tv_sec, (long)tv.tv_usec,
                     c->db->id, c->conn ? core_conn_peer(c->conn) : "lua");
    core_buf_append(line, head, (size_t)k);
    for (size_t i = 0; i < argc; i++) {
        if (i)
            core_buf_append(line, " ", 1);
        append_repr(line, args[i].p, args[i].len);
    }
    core_buf_append(line, "\r\n", 2);
    if (line->oom) {
        line->oom = false;
        return;
    }
    /* Appended to all first, then flushed: a flush may close a monitor
     * over its output limit, which takes it out of the array (backwards,
     * so that the entries still to be flushed do not move). */
    for (size_t i = 0; i < n->nmonitors; i++)
        core_buf_append(n->monitors[i]->w.buf, line->data, line->len);
    for (size_t i = n->nmonitors; i-- > 0;)
        if (n->monitors[i] != c)
            core_conn_flush(n->monitors[i]->conn);
}

void gs_monitor_client_closed(struct gs_client *c)
{
    if (!c->monitor)
        return;
    struct gs_node *n = c->node;
    for (size_t i = 0; i < n->nmonitors; i++) {
        if (n->monitors[i] == c) {
            memmove(&n->monitors[i], &n->monitors[i + 1],
                    (n->nmonitors - i - 1) * sizeof(*n->monitors));
            n->nmonitors--;
            break;
        }
    }
    c->monitor = false;
}

void gs_monitor_free(struct gs_node *n)
{
    free(n->monitors);
    n->monitors = NULL;
    n->nmonitors = n->monitors_cap = 0;
    core_buf_free(&n->monitor_line);
}
