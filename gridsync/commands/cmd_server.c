/*
 * Connection and server commands: PING, ECHO, TIME, QUIT, SHUTDOWN, AUTH,
 * HELLO, and the helpers the other server command files share
 * (cmd_server.h). INFO, CONFIG, COMMAND and CLIENT have a file each;
 * SELECT is in cmd_keys.c. Replies and errors as Redis 7.0's server.c,
 * config.c, networking.c and acl.c.
 *
 * None of these is on the hot path: they may format into the node's
 * scratch buffer and take O(clients) or O(options) time.
 */
#include "gridsync/commands/cmd_server.h"

#include "gridsync/commands/monitor.h"
#include "gridsync/commands/multi.h"
#include "gridsync/commands/pubsub.h"

#include "core/error.h"
#include "core/log.h"
#include "gridsync/client/blocking.h"
#include "gridsync/commands/glob.h"
#include "gridsync/types/value.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

void gs_sbprintf(struct core_buf *b, const char *fmt, ...)
{
    /* Formats straight into the buffer, however long the result: a line
     * cut short (a long client name in CLIENT LIST) would lose its '\n'
     * and run into the next client's line. */
    va_list ap;
    va_start(ap, fmt);
    char *dst = core_buf_reserve(b, 256);
    int n = dst ? vsnprintf(dst, b->cap - b->len, fmt, ap) : -1;
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= b->cap - b->len) {
        dst = core_buf_reserve(b, (size_t)n + 1);
        if (!dst)
            return;
        va_start(ap, fmt);
        vsnprintf(dst, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

void gs_scratch_done(struct gs_node *n)
{
    if (n->shared.scratch.cap > GS_SCRATCH_KEEP)
        core_buf_free(&n->shared.scratch);
}

void gs_unknown_subcommand(struct gs_client *c, const struct gs_arg *sub, const char *cmd)
{
    gs_errorf(c, "ERR unknown subcommand '%.*s'. Try %s HELP.",
              (int)(sub->len < 128 ? sub->len : 128), sub->p, cmd);
}

/* Redis 7's processCommand for container commands: an unknown subcommand
 * is "unknown subcommand", a known one with the wrong argument count is
 * "wrong number of arguments for 'client|getname' command". Returns false
 * after replying with the error. */
void gs_subcommand_stat(struct gs_client *c, const char *fullname, int verdict)
{
    c->sub_stat = fullname;
    c->sub_verdict = verdict;
    if (verdict == GS_SUB_RAN)
        c->last_cmd = fullname;
}

bool gs_subcommand_ok(struct gs_client *c, size_t argc, struct gs_arg *argv,
                      const struct gs_subcommand *table, const char *container)
{
    for (const struct gs_subcommand *s = table; s->name; s++) {
        if (!gs_arg_is(&argv[1], s->name))
            continue;
        c->sub_stat = s->fullname;
        if ((s->arity > 0 && argc != (size_t)s->arity) ||
            (s->arity < 0 && argc < (size_t)-s->arity)) {
            c->sub_verdict = GS_SUB_ARITY;
            gs_error_arity(c, s->fullname);
            return false;
        }
        c->sub_verdict = GS_SUB_RAN;
        c->last_cmd = s->fullname;
        return true;
    }
    c->sub_verdict = GS_SUB_UNKNOWN;
    gs_unknown_subcommand(c, &argv[1], container);
    return false;
}

void gs_reply_help(struct gs_client *c, const char *cmd, const char *const *lines)
{
    size_t n = 0;
    while (lines[n])
        n++;
    gs_reply_array(&c->w, n + 1);
    char head[128];
    snprintf(head, sizeof(head),
             "%s <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", cmd);
    gs_reply_simple(&c->w, head, strlen(head));
    for (size_t i = 0; i < n; i++)
        gs_reply_simple(&c->w, lines[i], strlen(lines[i]));
}

/* Redis's validateClientName: printable ASCII without spaces. */
bool gs_client_name_valid(const struct gs_arg *a)
{
    for (size_t i = 0; i < a->len; i++)
        if (a->p[i] < '!' || a->p[i] > '~')
            return false;
    return true;
}

char *gs_arg_dup(const struct gs_arg *a)
{
    char *s = malloc(a->len + 1);
    if (s) {
        memcpy(s, a->p, a->len);
        s[a->len] = 0;
    }
    return s;
}

void gs_client_set_name(struct gs_client *c, const struct gs_arg *a)
{
    free(c->name);
    c->name = a->len ? gs_arg_dup(a) : NULL;
}

/* ------------------------------------------------------------ PING .. */

void gs_cmd_ping(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (argc > 2) {
        gs_error_arity(c, "ping");
        return;
    }
    if (gs_pubsub_resp2_subscribed(c)) { /* Redis's pingCommand in subscribed mode */
        gs_reply_array(&c->w, 2);
        gs_reply_bulk(&c->w, "pong", 4);
        gs_reply_bulk(&c->w, argc == 1 ? "" : argv[1].p, argc == 1 ? 0 : argv[1].len);
    } else if (argc == 1)
        gs_reply_raw(&c->w, "+PONG\r\n", 7);
    else
        gs_reply_bulk(&c->w, argv[1].p, argv[1].len);
}

void gs_cmd_echo(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    gs_reply_bulk(&c->w, argv[1].p, argv[1].len);
}

/* TIME: the wall clock read now (not the loop's cached time), as two bulk
 * strings, seconds and microseconds. */
void gs_cmd_time(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    gs_reply_array(&c->w, 2);
    gs_reply_bulk_int(&c->w, (int64_t)ts.tv_sec);
    gs_reply_bulk_int(&c->w, (int64_t)(ts.tv_nsec / 1000));
}

/* WAIT numreplicas timeout (Redis 7.0's waitCommand). A single node has
 * no replicas: 0 at once when that is enough (or the client may not
 * block), else after the timeout in milliseconds (0: never), or at
 * CLIENT UNBLOCK. In cluster mode a write was acknowledged only once a
 * majority of its group held it, so the other members that hold every
 * write the client was answered number at least half the replication
 * factor, rounded down: WAIT answers that count at once. */
void gs_cmd_wait(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t want, timeout;
    if (!gs_arg_int(c, &argv[1], &want, NULL) ||
        !gs_arg_int(c, &argv[2], &timeout, "ERR timeout is not an integer or out of range"))
        return;
    if (timeout < 0) {
        gs_error(c, "ERR timeout is negative");
        return;
    }
    int64_t acked = c->shared->cluster_mode ? (int64_t)(c->shared->replication_factor / 2) : 0;
    if (acked >= want || c->shared->cluster_mode || gs_block_denied(c)) {
        gs_reply_int(&c->w, acked);
        return;
    }
    /* A deadline past INT64_MAX is no deadline: Redis 7.0's sum wraps and
     * the client waits for good too. */
    int64_t deadline =
        timeout && timeout <= INT64_MAX - c->db->now_ms ? c->db->now_ms + timeout : 0;
    struct gs_block_spec s = {0, 0, 0, deadline, NULL, true};
    if (gs_block(c, argc, argv, &s))
        gs_error_oom(c);
}

void gs_cmd_quit(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    gs_reply_ok(&c->w);
    core_conn_close_after_reply(c->conn);
}

/* Redis 7.0's resetCommand (clearClientConnectionState): the connection
 * as it was when it opened, without closing it. */
void gs_cmd_reset(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    (void)argc;
    (void)argv;
    struct gs_node *n = c->node;
    gs_monitor_client_closed(c);
    gs_multi_discard(c); /* the transaction and the watches */
    gs_pubsub_client_closed(c);
    if (c->conn) {
        core_conn_set_output_limit(c->conn, -1, 0, 0); /* the normal class's again */
        core_conn_set_no_evict(c->conn, false);
    }
    struct gs_db *db0 = &n->dbs[0];
    db0->now_ms = c->db->now_ms;
    c->db = db0;
    c->w.proto = 2;
    c->authenticated = !n->cfg.requirepass[0]; /* the default user again */
    free(c->name);
    c->name = NULL;
    c->asking = c->readonly = c->no_evict = false;
    /* CLIENT REPLY OFF and SKIP's next are cleared; a SKIP for this very
     * command still drops its reply, as in Redis */
    c->reply_off = c->reply_skip_next = false;
    gs_reply_simple(&c->w, "RESET", 5);
}

void gs_cmd_shutdown(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    for (size_t i = 1; i < argc; i++) {
        if (gs_arg_is(&argv[i], "abort")) {
            gs_error(c, "ERR No shutdown in progress.");
            return;
        }
        if (!gs_arg_is(&argv[i], "nosave") && !gs_arg_is(&argv[i], "save") &&
            !gs_arg_is(&argv[i], "now") && !gs_arg_is(&argv[i], "force")) {
            gs_error_syntax(c);
            return;
        }
    }
    /* As Redis: no reply on success; the connection closes with the rest. */
    CORE_WARN("User requested shutdown...");
    gs_node_stop(c->node);
}

/* ------------------------------------------------------- AUTH, HELLO */

/* The default user's credentials: with requirepass set, the password must
 * match; without, the default user has no password and any is accepted
 * (as Redis's "nopass"). Only the user "default" exists. */
static bool check_credentials(struct gs_client *c, const struct gs_arg *user,
                              const struct gs_arg *pass)
{
    const char *req = c->node->cfg.requirepass;
    if (user && !gs_arg_is(user, "default"))
        return false;
    if (!req[0])
        return true;
    size_t n = strlen(req);
    /* constant-time comparison, as Redis's time_independent_strcmp */
    unsigned diff = (unsigned)(n ^ pass->len);
    for (size_t i = 0; i < pass->len; i++)
        diff |= (unsigned char)pass->p[i] ^ (unsigned char)req[i % n];
    return diff == 0;
}

void gs_cmd_auth(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (argc > 3) {
        gs_error_syntax(c);
        return;
    }
    if (argc == 2 && !c->node->cfg.requirepass[0]) {
        gs_error(c, "ERR AUTH <password> called without any password configured for the "
                    "default user. Are you sure your configuration is correct?");
        return;
    }
    const struct gs_arg *user = argc == 3 ? &argv[1] : NULL;
    const struct gs_arg *pass = argc == 3 ? &argv[2] : &argv[1];
    if (!check_credentials(c, user, pass)) {
        gs_error(c, "WRONGPASS invalid username-password pair or user is disabled.");
        return;
    }
    c->authenticated = true;
    gs_reply_ok(&c->w);
}

void gs_cmd_hello(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t ver = 0;
    size_t j = 1;
    if (argc >= 2) {
        if (!gs_arg_int(c, &argv[1], &ver,
                        "ERR Protocol version is not an integer or out of range"))
            return;
        j = 2;
        if (ver < 2 || ver > 3) {
            gs_error(c, "NOPROTO unsupported protocol version");
            return;
        }
    }
    const struct gs_arg *user = NULL, *pass = NULL, *name = NULL;
    for (; j < argc; j++) {
        size_t more = argc - 1 - j;
        if (gs_arg_is(&argv[j], "auth") && more >= 2) {
            user = &argv[j + 1];
            pass = &argv[j + 2];
            j += 2;
        } else if (gs_arg_is(&argv[j], "setname") && more) {
            name = &argv[j + 1];
            if (!gs_client_name_valid(name)) {
                gs_error(c, "ERR Client names cannot contain spaces, newlines or special "
                            "characters.");
                return;
            }
            j++;
        } else {
            gs_errorf(c, "ERR Syntax error in HELLO option '%.*s'", (int)argv[j].len, argv[j].p);
            return;
        }
    }
    if (user) {
        if (!check_credentials(c, user, pass)) {
            gs_error(c, "WRONGPASS invalid username-password pair or user is disabled.");
            return;
        }
        c->authenticated = true;
    }
    if (!c->authenticated && c->node->cfg.requirepass[0]) {
        gs_error(c, "NOAUTH HELLO must be called with the client already authenticated, "
                    "otherwise the HELLO AUTH <user> <pass> option can be used to "
                    "authenticate the client and select the RESP protocol version at the same "
                    "time");
        return;
    }
    if (name)
        gs_client_set_name(c, name);
    if (ver)
        c->w.proto = (int)ver;
    struct gs_writer *w = &c->w;
    gs_reply_map(w, 7);
    gs_reply_bulk_cstr(w, "server");
    gs_reply_bulk_cstr(w, "redis");
    gs_reply_bulk_cstr(w, "version");
    gs_reply_bulk_cstr(w, GS_REDIS_VERSION);
    gs_reply_bulk_cstr(w, "proto");
    gs_reply_int(w, w->proto);
    gs_reply_bulk_cstr(w, "id");
    gs_reply_int(w, (int64_t)core_conn_id(c->conn));
    gs_reply_bulk_cstr(w, "mode");
    gs_reply_bulk_cstr(w, c->node->cluster ? "cluster" : "standalone");
    gs_reply_bulk_cstr(w, "role");
    gs_reply_bulk_cstr(w, "master");
    gs_reply_bulk_cstr(w, "modules");
    gs_reply_array(w, 0);
}

const struct gs_arg *gs_redact_secrets(size_t argc, const struct gs_arg *argv,
                                       struct gs_arg shown[8])
{
    static const struct gs_arg redacted = {"(redacted)", 10};
    if (argc > 8 || !(gs_arg_is(&argv[0], "auth") || gs_arg_is(&argv[0], "hello")))
        return argv;
    bool auth = gs_arg_is(&argv[0], "auth");
    for (size_t i = 0; i < argc; i++) {
        bool secret = auth ? i > 0
                           : (i >= 2 && gs_arg_is(&argv[i - 1], "auth")) ||
                                 (i >= 3 && gs_arg_is(&argv[i - 2], "auth"));
        shown[i] = secret ? redacted : argv[i];
    }
    return shown;
}
