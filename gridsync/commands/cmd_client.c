/*
 * CLIENT: ID, SETNAME, GETNAME, SETINFO, LIST, INFO, KILL, NO-EVICT and
 * HELP, over the node's connections.
 */
#include "gridsync/client/blocking.h"
#include "gridsync/commands/cmd_server.h"

#include "gridsync/commands/pubsub.h"

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

/* -------------------------------------------------------------- CLIENT */

static void client_line(struct gs_node *n, struct core_conn *conn, struct core_buf *b)
{
    struct gs_client *c = core_conn_data(conn);
    uint64_t now = uv_now(n->loop);
    size_t qbuf = core_conn_input_pending(conn), qcap = core_conn_input_capacity(conn);
    size_t omem = core_conn_output_pending(conn);
    /* Redis's getClientInfoString: x = in MULTI, d = a watched key changed. */
    char flags[8], *f = flags;
    long long multi = -1;
    size_t multi_mem = 0;
    if (c && c->multi.active) {
        *f++ = 'x';
        multi = (long long)c->multi.count;
        multi_mem = c->multi.queue.cap;
    }
    size_t nsub = 0, npsub = 0, nssub = 0;
    if (c)
        gs_pubsub_counts(c, &nsub, &npsub, &nssub);
    if (nsub + npsub + nssub)
        *f++ = 'P';
    if (c && gs_block_is_blocked(c))
        *f++ = 'b';
    if (c && c->multi.watch_dirty)
        *f++ = 'd';
    if (c && c->monitor)
        *f++ = 'O';
    if (f == flags)
        *f++ = 'N';
    *f = 0;
    gs_sbprintf(
        b,
        "id=%llu addr=%s laddr=%s fd=%d name=%s age=%llu idle=%llu flags=%s db=%u sub=%zu "
        "psub=%zu ssub=%zu multi=%lld qbuf=%zu qbuf-free=%zu argv-mem=0 multi-mem=%zu rbs=%zu "
        "rbp=%zu obl=0 oll=0 omem=%zu tot-mem=%zu events=r cmd=%s user=default redir=-1 "
        "resp=%d lib-name=%s lib-ver=%s\n",
        (unsigned long long)core_conn_id(conn), core_conn_peer(conn), core_conn_local(conn),
        core_conn_fd(conn), c && c->name ? c->name : "",
        (unsigned long long)((now - core_conn_created_ms(conn)) / 1000),
        (unsigned long long)((now - core_conn_last_active_ms(conn)) / 1000), flags,
        c && c->db ? c->db->id : 0u, nsub, npsub, nssub, multi, qbuf, qcap - qbuf, multi_mem, qcap,
        qcap, omem, qcap + omem + multi_mem + sizeof(*c), c ? c->last_cmd : "NULL",
        c ? c->w.proto : 2, c && c->lib_name ? c->lib_name : "", c && c->lib_ver ? c->lib_ver : "");
}

struct list_ctx {
    struct gs_node *node;
    struct core_buf *buf;
};

static void list_one(struct core_conn *conn, void *arg)
{
    struct list_ctx *ctx = arg;
    client_line(ctx->node, conn, ctx->buf);
}

/* Redis's getClientTypeByName: every client here is a normal one, the
 * other types are valid names that match nobody. Returns false for an
 * unknown name. */
static bool client_type(const struct gs_arg *a, bool *normal)
{
    *normal = gs_arg_is(a, "normal");
    return *normal || gs_arg_is(a, "slave") || gs_arg_is(a, "replica") || gs_arg_is(a, "pubsub") ||
           gs_arg_is(a, "master");
}

/* Redis 7.0's CLIENT LIST [TYPE t | ID id ...]: IDs are listed in the
 * order given (an unknown ID is skipped). */
static void client_list(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_node *n = c->node;
    struct list_ctx ctx = {n, &n->shared.scratch};
    bool normal = true;
    n->shared.scratch.len = 0;
    if (argc == 4 && gs_arg_is(&argv[2], "type")) {
        if (!client_type(&argv[3], &normal)) {
            gs_errorf(c, "ERR Unknown client type '%.*s'", (int)argv[3].len, argv[3].p);
            return;
        }
        if (normal)
            core_server_foreach(n->srv, list_one, &ctx);
    } else if (argc > 3 && gs_arg_is(&argv[2], "id")) {
        for (size_t i = 3; i < argc; i++) {
            int64_t id;
            if (!gs_arg_int(c, &argv[i], &id, "ERR Invalid client ID"))
                return;
        }
        for (size_t i = 3; i < argc; i++) {
            int64_t id;
            gs_string2ll(argv[i].p, argv[i].len, &id);
            struct core_conn *conn = id > 0 ? core_server_find(n->srv, (uint64_t)id) : NULL;
            if (conn)
                client_line(n, conn, &n->shared.scratch);
        }
    } else if (argc != 2) {
        gs_error_syntax(c);
        return;
    } else {
        core_server_foreach(n->srv, list_one, &ctx);
    }
    if (n->shared.scratch.oom) {
        core_buf_free(&n->shared.scratch);
        gs_error_oom(c);
        return;
    }
    gs_reply_verbatim(&c->w, n->shared.scratch.data ? n->shared.scratch.data : "",
                      n->shared.scratch.len, "txt");
    gs_scratch_done(n);
}

struct kill_ctx {
    struct gs_client *self;
    int64_t id; /* 0 = any */
    const struct gs_arg *addr, *laddr;
    bool skipme;
    bool nobody; /* a filter no client here can match */
    int64_t killed;
};

static bool arg_equals_str(const struct gs_arg *a, const char *s)
{
    return a->len == strlen(s) && memcmp(a->p, s, a->len) == 0;
}

static void kill_one(struct core_conn *conn, void *arg)
{
    struct kill_ctx *k = arg;
    if (k->nobody)
        return;
    if (k->id && (uint64_t)k->id != core_conn_id(conn))
        return;
    if (k->addr && !arg_equals_str(k->addr, core_conn_peer(conn)))
        return;
    if (k->laddr && !arg_equals_str(k->laddr, core_conn_local(conn)))
        return;
    if (conn == k->self->conn) {
        if (k->skipme)
            return;
        core_conn_close_after_reply(conn); /* after this command's reply */
    } else {
        core_conn_close(conn);
    }
    k->killed++;
}

static void client_kill(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct kill_ctx k = {.self = c, .skipme = true};
    if (argc == 3) { /* the old form: CLIENT KILL addr:port */
        k.addr = &argv[2];
        k.skipme = false;
        core_server_foreach(c->node->srv, kill_one, &k);
        if (k.killed)
            gs_reply_ok(&c->w);
        else
            gs_error(c, "ERR No such client");
        return;
    }
    if (argc % 2 != 0) {
        gs_error_syntax(c);
        return;
    }
    for (size_t i = 2; i < argc; i += 2) {
        struct gs_arg *v = &argv[i + 1];
        if (gs_arg_is(&argv[i], "id")) {
            if (!gs_string2ll(v->p, v->len, &k.id) || k.id <= 0) {
                gs_error(c, "ERR client-id should be greater than 0");
                return;
            }
        } else if (gs_arg_is(&argv[i], "addr")) {
            k.addr = v;
        } else if (gs_arg_is(&argv[i], "laddr")) {
            k.laddr = v;
        } else if (gs_arg_is(&argv[i], "skipme")) {
            if (gs_arg_is(v, "yes"))
                k.skipme = true;
            else if (gs_arg_is(v, "no"))
                k.skipme = false;
            else {
                gs_error_syntax(c);
                return;
            }
        } else if (gs_arg_is(&argv[i], "user")) {
            if (!gs_arg_is(v, "default")) {
                gs_errorf(c, "ERR No such user '%.*s'", (int)v->len, v->p);
                return;
            }
        } else if (gs_arg_is(&argv[i], "type")) {
            bool normal;
            if (!client_type(v, &normal)) {
                gs_errorf(c, "ERR Unknown client type '%.*s'", (int)v->len, v->p);
                return;
            }
            if (!normal)
                k.nobody = true; /* no replica or pubsub clients here */
        } else {
            gs_error_syntax(c);
            return;
        }
    }
    core_server_foreach(c->node->srv, kill_one, &k);
    gs_reply_int(&c->w, k.killed);
}

/* Redis 7.0's CLIENT UNBLOCK id [TIMEOUT|ERROR]: 1 if that client was
 * blocked (it gets its timeout reply, or -UNBLOCKED), 0 otherwise. */
static void client_unblock(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t id;
    if (!gs_arg_int(c, &argv[2], &id, NULL))
        return;
    bool error = false;
    if (argc == 4) {
        if (gs_arg_is(&argv[3], "error")) {
            error = true;
        } else if (!gs_arg_is(&argv[3], "timeout")) {
            gs_error(c, "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
            return;
        }
    }
    struct core_conn *conn = core_server_find(c->node->srv, (uint64_t)id);
    struct gs_client *target = conn ? core_conn_data(conn) : NULL;
    gs_reply_int(&c->w, target && gs_block_unblock(target, error) ? 1 : 0);
}

static const struct gs_subcommand client_subs[] = {
    {"id", 2, "client|id"},
    {"setname", 3, "client|setname"},
    {"getname", 2, "client|getname"},
    {"setinfo", 4, "client|setinfo"},
    {"list", -2, "client|list"},
    {"info", 2, "client|info"},
    {"kill", -3, "client|kill"},
    {"help", 2, "client|help"},
    {"no-evict", 3, "client|no-evict"},
    {"reply", 3, "client|reply"},
    {"unblock", -3, "client|unblock"},
    {NULL, 0, NULL},
};

void gs_cmd_client(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_node *n = c->node;
    struct gs_arg *sub = &argv[1];
    if (!gs_subcommand_ok(c, argc, argv, client_subs, "CLIENT"))
        return;
    if (gs_arg_is(sub, "id") && argc == 2) {
        gs_reply_int(&c->w, (int64_t)core_conn_id(c->conn));
    } else if (gs_arg_is(sub, "setname")) {
        if (argc != 3) {
            gs_error_arity(c, "client|setname");
            return;
        }
        if (!gs_client_name_valid(&argv[2])) {
            gs_error(c, "ERR Client names cannot contain spaces, newlines or special characters.");
            return;
        }
        gs_client_set_name(c, &argv[2]);
        gs_reply_ok(&c->w);
    } else if (gs_arg_is(sub, "getname") && argc == 2) {
        if (c->name)
            gs_reply_bulk_cstr(&c->w, c->name);
        else
            gs_reply_null(&c->w);
    } else if (gs_arg_is(sub, "setinfo")) {
        if (argc != 4) {
            gs_error_arity(c, "client|setinfo");
            return;
        }
        char **slot;
        if (gs_arg_is(&argv[2], "lib-name"))
            slot = &c->lib_name;
        else if (gs_arg_is(&argv[2], "lib-ver"))
            slot = &c->lib_ver;
        else {
            gs_errorf(c, "ERR Unrecognized option '%.*s'", (int)argv[2].len, argv[2].p);
            return;
        }
        if (!gs_client_name_valid(&argv[3])) {
            gs_errorf(c, "ERR %.*s cannot contain spaces, newlines or special characters.",
                      (int)argv[2].len, argv[2].p);
            return;
        }
        free(*slot);
        *slot = argv[3].len ? gs_arg_dup(&argv[3]) : NULL;
        gs_reply_ok(&c->w);
    } else if (gs_arg_is(sub, "list")) {
        client_list(c, argc, argv);
    } else if (gs_arg_is(sub, "info") && argc == 2) {
        n->shared.scratch.len = 0;
        client_line(n, c->conn, &n->shared.scratch);
        gs_reply_verbatim(&c->w, n->shared.scratch.data ? n->shared.scratch.data : "",
                          n->shared.scratch.len, "txt");
        gs_scratch_done(n);
    } else if (gs_arg_is(sub, "kill")) {
        if (argc < 3) {
            gs_error_arity(c, "client|kill");
            return;
        }
        client_kill(c, argc, argv);
    } else if (gs_arg_is(sub, "no-evict") && argc == 3) {
        /* Redis 7's CLIENT NO-EVICT: maxmemory-clients never picks it. */
        if (!gs_arg_is(&argv[2], "on") && !gs_arg_is(&argv[2], "off")) {
            gs_error_syntax(c);
            return;
        }
        c->no_evict = gs_arg_is(&argv[2], "on");
        core_conn_set_no_evict(c->conn, c->no_evict);
        gs_reply_ok(&c->w);
    } else if (gs_arg_is(sub, "reply") && argc == 3) {
        /* Redis's CLIENT REPLY: OFF and SKIP answer nothing; gs_execute
         * drops the replies (node.h). */
        if (gs_arg_is(&argv[2], "on")) {
            c->reply_off = c->reply_skip = c->reply_skip_next = false;
            gs_reply_ok(&c->w);
        } else if (gs_arg_is(&argv[2], "off")) {
            c->reply_off = true;
        } else if (gs_arg_is(&argv[2], "skip")) {
            if (!c->reply_off)
                c->reply_skip_next = true;
        } else {
            gs_error_syntax(c);
        }
    } else if (gs_arg_is(sub, "unblock")) {
        if (argc > 4) /* Redis's addReplySubcommandSyntaxError */
            gs_errorf(c,
                      "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try "
                      "CLIENT HELP.",
                      (int)(sub->len < 128 ? sub->len : 128), sub->p);
        else
            client_unblock(c, argc, argv);
    } else if (gs_arg_is(sub, "help") && argc == 2) {
        static const char *const lines[] = {
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port> | <option> <value> [...]",
            "    Kill connections (ID, ADDR, LADDR, SKIPME, USER).",
            "LIST [ID <id> ...]",
            "    Return information about client connections.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETINFO <LIB-NAME|LIB-VER> <value>",
            "    Set client library information.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            NULL};
        gs_reply_help(c, "CLIENT", lines);
    } else {
        gs_unknown_subcommand(c, sub, "CLIENT");
    }
}
