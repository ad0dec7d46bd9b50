/*
 * The node: ties the TCP scaffold, the RESP parser, the command table and
 * the store together (see node.h). The option table, the defaults and the
 * parsers of options with a syntax of their own are in node_config.c.
 *
 * Request path, per read of a connection (on_data):
 *   parse as many complete requests as the input holds -> gs_execute each
 *   (lookup, arity, auth, maxmemory, handler) -> replies accumulate in the
 *   connection's output buffer -> the scaffold writes them all at once.
 * Nothing on this path allocates once the connection's buffers have grown
 * to their working size, and the clock is not read (gs_node_now_ms uses
 * the loop's time, updated once per iteration).
 *
 * Between requests, a timer (hz times per second) runs bounded active
 * expiry and resynchronises the wall clock.
 */
#include "gridsync/node/node.h"

#include "core/clock.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/log.h"
#include "gridsync/client/blocking.h"
#include "gridsync/commands/cmd_server.h"
#include "gridsync/commands/monitor.h"
#include "gridsync/commands/pubsub.h"
#include "gridsync/commands/slowlog.h"
#include "gridsync/node/metrics.h"
#include "gridsync/scripting/scripting.h"
#include "gridsync/store/store.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Flush mid-batch once this much output is pending, so a long pipeline
 * of large replies streams instead of piling up. */
#define FLUSH_EARLY (64 * 1024)
/* Active expiry: work per store call, and the time budget per tick. */
#define EXPIRE_WORK      200
#define EXPIRE_BUDGET_NS (2 * 1000 * 1000)

/* ------------------------------------------------------- command index */

/* The value types' thresholds from the configuration (gs_shared.limits). */
static struct gs_type_limits node_type_limits(const struct gs_config *cfg)
{
    struct gs_type_limits l = {cfg->hash_max_listpack_entries, cfg->hash_max_listpack_value,
                               cfg->list_max_listpack_size,    cfg->set_max_intset_entries,
                               cfg->zset_max_listpack_entries, cfg->zset_max_listpack_value,
                               cfg->hll_sparse_max_bytes};
    return l;
}

static uint32_t name_hash(const char *name, size_t len)
{
    char low[32];
    for (size_t i = 0; i < len; i++)
        low[i] = (char)tolower((unsigned char)name[i]);
    return core_fnv1a32(low, len);
}

int gs_command_index_build(struct gs_node *n)
{
    size_t ncmd = 0;
    while (gs_commands[ncmd].name)
        ncmd++;
    n->cmd_names = calloc(ncmd + 1, sizeof(*n->cmd_names));
    if (!n->cmd_names || gs_cmd_stats_init(&n->cmdstats, ncmd)) {
        free(n->cmd_names);
        n->cmd_names = NULL;
        return CORE_ENOMEM;
    }
    for (size_t i = 0; i < ncmd; i++)
        n->cmd_names[i] = gs_commands[i].name;
    memset(n->cmd_index, 0, sizeof(n->cmd_index));
    for (const struct gs_command *cmd = gs_commands; cmd->name; cmd++) {
        uint32_t h = name_hash(cmd->name, strlen(cmd->name)) & 255;
        while (n->cmd_index[h])
            h = (h + 1) & 255;
        n->cmd_index[h] = cmd;
    }
    return 0;
}

const struct gs_command *gs_command_lookup(const struct gs_node *n, const char *name, size_t len)
{
    if (len == 0 || len >= 32)
        return NULL;
    uint32_t h = name_hash(name, len) & 255;
    while (n->cmd_index[h]) {
        const struct gs_command *cmd = n->cmd_index[h];
        if (strlen(cmd->name) == len && strncasecmp(cmd->name, name, len) == 0)
            return cmd;
        h = (h + 1) & 255;
    }
    return NULL;
}

/* Redis's processCommand: "unknown command '%.128s', with args beginning
 * with: " followed by up to 128 characters of quoted arguments. */
static void reply_unknown(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    char args[512];
    size_t used = 0;
    args[0] = 0;
    for (size_t i = 1; i < argc && used < 128; i++) {
        int room = 128 - (int)used;
        size_t alen = strnlen(argv[i].p, argv[i].len); /* Redis prints with %s */
        int n = snprintf(args + used, sizeof(args) - used, "'%.*s' ",
                         (int)(alen < (size_t)room ? alen : (size_t)room), argv[i].p);
        if (n < 0)
            break;
        used += (size_t)n;
        if (used >= sizeof(args))
            used = sizeof(args) - 1;
    }
    size_t nlen = strnlen(argv[0].p, argv[0].len);
    gs_errorf(c, "ERR unknown command '%.*s', with args beginning with: %s",
              (int)(nlen < 128 ? nlen : 128), argv[0].p, args);
}

/* Out of line: its buffer would otherwise give gs_execute a stack
 * canary to check on every request. */
static __attribute__((noinline)) void reply_arity(struct gs_client *c, const struct gs_command *cmd)
{
    char why[64];
    snprintf(why, sizeof(why), "wrong number of arguments for '%s' command", cmd->name);
    if (!gs_multi_exec_refused(c, cmd, why)) {
        gs_errorf(c, "ERR %s", why);
        gs_multi_flag_error(&c->multi);
    }
}

static void execute(struct gs_client *c, size_t argc, struct gs_arg *argv);

/* maxmemory holds for the node, across its databases, as in Redis: while
 * they hold more together, the database that holds most gives up the
 * excess, by its store's policy (each store evicts down to a limit set
 * for the occasion, then gets the node's limit back). O(databases). */
static int make_room(struct gs_node *n)
{
    uint64_t max = (uint64_t)n->cfg.maxmemory, total = 0;
    if (n->n_dbs == 1)
        return gs_store_make_room(n->dbs[0].store);
    struct gs_store_stats st;
    for (unsigned d = 0; d < n->n_dbs; d++) {
        gs_store_stats(n->dbs[d].store, &st);
        total += st.used_memory;
    }
    /* Databases in decreasing order of memory (ties by number), each once. */
    uint64_t prev_used = UINT64_MAX;
    unsigned prev = 0;
    bool first = true;
    while (total > max) {
        unsigned big = n->n_dbs;
        uint64_t big_used = 0;
        for (unsigned d = 0; d < n->n_dbs; d++) {
            gs_store_stats(n->dbs[d].store, &st);
            uint64_t u = st.used_memory;
            bool after_prev = first || u < prev_used || (u == prev_used && d > prev);
            if (after_prev && (big == n->n_dbs || u > big_used))
                big = d, big_used = u;
        }
        if (big == n->n_dbs || big_used == 0)
            return CORE_ENOMEM; /* nothing left to evict anywhere */
        first = false;
        prev = big;
        prev_used = big_used;
        struct gs_store *s = n->dbs[big].store;
        uint64_t excess = total - max;
        gs_store_configure(s, big_used > excess ? big_used - excess : 1,
                           (enum gs_evict_policy)n->cfg.maxmemory_policy);
        (void)gs_store_make_room(s);
        gs_store_configure(s, max, (enum gs_evict_policy)n->cfg.maxmemory_policy);
        gs_store_stats(s, &st);
        total -= big_used - st.used_memory;
    }
    return 0;
}

/* Redis's handleClientsBlockedOnKeys after each command: keys the
 * command made ready serve their blocked clients (client/blocking.h). */
static inline void serve_ready(struct gs_node *n)
{
    if (n->blocking)
        gs_blocking_serve_ready(n->blocking);
}

void gs_execute(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (!(c->reply_off | c->reply_skip | c->reply_skip_next)) {
        execute(c, argc, argv);
        if (c->reply_skip_next) { /* this was CLIENT REPLY SKIP */
            c->reply_skip = true;
            c->reply_skip_next = false;
        }
        serve_ready(c->node);
        return;
    }
    /* CLIENT REPLY OFF / SKIP: what this request wrote is dropped (if a
     * flush took it meanwhile, it has gone out). */
    size_t mark = c->w.buf->len;
    execute(c, argc, argv);
    if ((c->reply_off || c->reply_skip) && c->w.buf->len >= mark)
        c->w.buf->len = mark;
    c->reply_skip = false;
    if (c->reply_skip_next) {
        c->reply_skip = true;
        c->reply_skip_next = false;
    }
    serve_ready(c->node);
}

static void execute(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_node *n = c->node;
    c->db->now_ms = gs_node_now_ms(n); /* the command's instant (client.h) */
    const struct gs_command *cmd = gs_command_lookup(n, argv[0].p, argv[0].len);
    /* Refusals before queueing abort an open transaction (Redis's
     * rejectCommand -> flagTransaction). */
    if (!cmd) {
        reply_unknown(c, argc, argv);
        gs_multi_flag_error(&c->multi);
        return;
    }
    if ((cmd->arity > 0 && argc != (size_t)cmd->arity) ||
        (cmd->arity < 0 && argc < (size_t)-cmd->arity)) {
        gs_command_rejected(n, cmd);
        reply_arity(c, cmd);
        return;
    }
    if (!c->authenticated && !(cmd->flags & GS_CMD_NOAUTH)) {
        if (n->cfg.requirepass[0]) {
            gs_command_rejected(n, cmd);
            if (!gs_multi_exec_refused(c, cmd, "NOAUTH Authentication required.")) {
                gs_error(c, "NOAUTH Authentication required.");
                gs_multi_flag_error(&c->multi);
            }
            return;
        }
        c->authenticated = true; /* the password was removed meanwhile */
    }
    if (__builtin_expect(c->monitor, 0) && gs_monitor_refuses(c, cmd)) {
        gs_command_rejected(n, cmd);
        gs_multi_flag_error(&c->multi);
        return;
    }
    /* RESP2 subscribed mode allows only the subscription commands (before
     * the features: cluster mode would otherwise run a keyed command). */
    if (c->sub && gs_pubsub_refuses(c, cmd)) {
        gs_command_rejected(n, cmd);
        gs_multi_flag_error(&c->multi);
        return;
    }
    /* Features may take the command (cluster mode routes commands with
     * keys by slot). */
    for (unsigned i = 0; i < n->n_features; i++)
        if (n->features[i].ops->route &&
            n->features[i].ops->route(n->features[i].self, c, cmd, argc, argv))
            return;
    /* Inside MULTI: queued, +QUEUED (gridsync/commands/multi.h). */
    if (c->multi.active && gs_multi_queue(c, cmd, argc, argv))
        return;
    /* Redis's processCommand: evict before a command that may add memory,
     * and refuse it when nothing more can go. */
    if ((cmd->flags & GS_CMD_DENYOOM) && n->cfg.maxmemory > 0 && make_room(n) == CORE_ENOMEM) {
        gs_command_rejected(n, cmd);
        gs_error_oom(c);
        return;
    }
    gs_call(c, cmd, argc, argv);
}

void gs_command_rejected(struct gs_node *n, const struct gs_command *cmd)
{
    gs_cmd_stats_reject(&n->cmdstats, (size_t)(cmd - gs_commands));
}

/* Out of the hot path: Redis's slowlogPushCurrentCommand (EXEC is
 * skipped there too: CMD_SKIP_SLOWLOG; its commands are logged). */
static __attribute__((noinline)) void slow_command(struct gs_client *c, uint64_t usec, size_t argc,
                                                   const struct gs_arg *argv)
{
    struct gs_node *n = c->node;
    /* AUTH's and HELLO's secrets never reach the log. */
    struct gs_arg shown[8];
    argv = gs_redact_secrets(argc, argv, shown);
    gs_slowlog_push(n->slowlog, (size_t)n->cfg.slowlog_max_len, gs_node_now_ms(n) / 1000, usec,
                    argc, argv, c->conn ? core_conn_peer(c->conn) : "", c->name);
}

void gs_call(struct gs_client *c, const struct gs_command *cmd, size_t argc, struct gs_arg *argv)
{
    struct gs_node *n = c->node;
    uint64_t errors = n->shared.stats.error_replies;
    c->last_cmd = cmd->name;
    c->sub_verdict = GS_SUB_NONE;
    n->shared.stats.commands++;
    /* The store's access clock (OBJECT IDLETIME) at the command's instant,
     * for the entries it writes without looking them up. */
    gs_store_tick(c->db->store, c->db->now_ms);
    /* Redis's call() times every command the same way (ustime around
     * the handler); two vDSO clock reads per command. */
    uint64_t t0 = core_now_ns();
    cmd->fn(c, argc, argv);
    uint64_t ns = core_now_ns() - t0;
    bool failed = n->shared.stats.error_replies != errors;
    /* Redis's call() feeds the monitors once the command has run (not
     * for a subcommand refused by its arity or unknown). */
    if (__builtin_expect(n->nmonitors != 0, 0) && !(cmd->flags & GS_CMD_SKIP_MONITOR) &&
        (c->sub_verdict == GS_SUB_NONE || c->sub_verdict == GS_SUB_RAN))
        gs_monitor_feed(c, cmd, c->sub_verdict == GS_SUB_RAN ? c->sub_stat : NULL, argc, argv);
    switch (c->sub_verdict) {
    case GS_SUB_NONE:
        gs_cmd_stats_call(&n->cmdstats, (size_t)(cmd - gs_commands), ns, failed);
        break;
    case GS_SUB_RAN:
        gs_cmd_stats_sub_call(&n->cmdstats, c->sub_stat, ns, failed);
        break;
    case GS_SUB_ARITY:
        gs_cmd_stats_sub_reject(&n->cmdstats, c->sub_stat);
        break;
    case GS_SUB_UNKNOWN: /* Redis finds no command to charge */
        break;
    }
    c->sub_verdict = GS_SUB_NONE; /* EXEC's own call comes after its commands' */
    uint64_t usec = ns / 1000;
    if (!n->slowlog) /* a node built by hand (tests) may have none */
        return;
    if (n->cfg.slowlog_slower_than >= 0 && usec >= (uint64_t)n->cfg.slowlog_slower_than &&
        cmd->fn != gs_cmd_exec)
        slow_command(c, usec, argc, argv);
    if (n->cfg.latency_threshold_ms > 0 && usec / 1000 >= (uint64_t)n->cfg.latency_threshold_ms)
        gs_latency_add(n->slowlog, cmd->flags & GS_CMD_FAST ? "fast-command" : "command",
                       gs_node_now_ms(n) / 1000, usec / 1000);
}

/* ------------------------------------------------------- connections */

static bool is_loopback(const struct core_conn *conn)
{
    const char *p = core_conn_peer(conn);
    return strncmp(p, "127.", 4) == 0 || strncmp(p, "::1:", 4) == 0 ||
           strncmp(p, "::ffff:127.", 11) == 0;
}

/* Redis 7.0's text (networking.c, clientAcceptHandler). */
static const char denied_msg[] =
    "DENIED Redis is running in protected mode because protected mode is enabled and no "
    "password is set for the default user. In this mode connections are only accepted from the "
    "loopback interface. If you want to connect from external computers to Redis you may adopt "
    "one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG "
    "SET protected-mode no' from the loopback interface by connecting to Redis from the same "
    "host the server is running, however MAKE SURE Redis is not publicly accessible from "
    "internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively "
    "you can just disable the protected mode by editing the Redis configuration file, and "
    "setting the protected mode option to 'no', and then restarting the server. 3) If you "
    "started the server manually just for testing, restart it with the '--protected-mode no' "
    "option. 4) Set up an authentication password for the default user. NOTE: You only need to "
    "do one of the above things in order for the server to start accepting connections from "
    "the outside.";

static int on_open(struct core_conn *conn, void *app)
{
    struct gs_node *n = app;
    struct gs_client *c = calloc(1, sizeof(*c));
    if (!c)
        return CORE_ENOMEM;
    c->node = n;
    c->db = &n->dbs[0];
    c->shared = &n->shared;
    c->conn = conn;
    c->w.buf = core_conn_out(conn);
    c->w.proto = 2;
    c->authenticated = n->cfg.requirepass[0] == 0;
    c->last_cmd = "NULL";
    /* Redis's protected mode: no password, so only loopback may talk. */
    c->denied = n->cfg.protected_mode && !n->cfg.requirepass[0] && !is_loopback(conn);
    gs_resp_parser_init(&c->parser, n->cfg.proto_max_bulk_len);
    core_conn_set_data(conn, c);
    return 0;
}

static void on_close(struct core_conn *conn)
{
    struct gs_client *c = core_conn_data(conn);
    if (!c)
        return;
    struct gs_node *n = c->node;
    for (unsigned i = 0; i < n->n_features; i++)
        if (n->features[i].ops->client_closed)
            n->features[i].ops->client_closed(n->features[i].self, c);
    gs_multi_client_closed(c);
    gs_pubsub_client_closed(c);
    gs_monitor_client_closed(c);
    gs_blocking_client_closed(c);
    gs_resp_parser_free(&c->parser);
    free(c->name);
    free(c->lib_name);
    free(c->lib_ver);
    free(c);
    core_conn_set_data(conn, NULL);
}

static bool over_output_limit(struct gs_node *n, struct gs_client *c)
{
    for (unsigned i = 0; i < n->n_features; i++)
        if (n->features[i].ops->over_output_limit &&
            n->features[i].ops->over_output_limit(n->features[i].self, c))
            return true;
    return false;
}

static size_t on_data(struct core_conn *conn, char *data, size_t len)
{
    struct gs_client *c = core_conn_data(conn);
    struct gs_node *n = c->node;
    size_t off = 0;
    if (c->denied) {
        gs_reply_error(&c->w, denied_msg, sizeof(denied_msg) - 1);
        core_conn_close_after_reply(conn);
        return len;
    }
    /* c->wait: a replicated write is pending; c->blocked: a blocking
     * command waits for a key. The rest waits (cluster.h, blocking.h). */
    while (off < len && !core_conn_closing(conn) && !c->wait && !c->blocked) {
        size_t used, argc;
        struct gs_arg *argv;
        const char *err;
        c->parser.authenticated = c->authenticated || !n->cfg.requirepass[0];
        c->parser.max_bulk = n->cfg.proto_max_bulk_len;
        int rc = gs_resp_parse(&c->parser, data + off, len - off, &used, &argc, &argv, &err);
        if (rc == GS_RESP_NEED_MORE)
            break;
        if (rc < 0) {
            /* Redis's setProtocolError: reply, then close after the reply. */
            if (rc == CORE_EPROTO) {
                gs_errorf(c, "ERR %s", err);
                CORE_DEBUG("Protocol error (%s) from client id=%llu addr=%s", err,
                           (unsigned long long)core_conn_id(conn), core_conn_peer(conn));
                core_conn_close_after_reply(conn);
            } else {
                core_conn_close(conn);
            }
            return len;
        }
        off += used;
        if (argc == 0)
            continue;
        gs_execute(c, argc, argv);
        if (c->replay) {
            /* A linearizable read waits unconsumed; it runs when the
             * cluster hands the input back (cluster.h). */
            c->replay = false;
            off -= used;
            break;
        }
        /* Output a feature holds (replies behind an origin fetch) counts
         * toward the limit. */
        if (c->w.buf->len > FLUSH_EARLY && (core_conn_flush(conn) || over_output_limit(n, c)))
            break;
    }
    return off;
}

static const struct core_server_ops server_ops = {
    .on_open = on_open,
    .on_data = on_data,
    .on_close = on_close,
};

/* ---------------------------------------------------------------- cron */

static void resync_clock(struct gs_node *n)
{
    uv_update_time(n->loop);
    n->wall_base_ms = core_wall_ms();
    n->loop_base_ms = uv_now(n->loop);
}

static void cron_cb(uv_timer_t *t)
{
    struct gs_node *n = t->data;
    resync_clock(n);
    int64_t now = gs_node_now_ms(n);
    uint64_t t0 = core_now_ns();
    /* A feature may expire the keyspaces itself (cluster mode: through
     * each group's log). */
    bool expired = false;
    for (unsigned i = 0; i < n->n_features; i++)
        if (n->features[i].ops->cron && n->features[i].ops->cron(n->features[i].self, now))
            expired = true;
    if (expired)
        return;
    /* Bounded active expiry (the idea of Redis's activeExpireCycle):
     * slices of EXPIRE_WORK while slices come back full (more keys are
     * due), but never past the time budget, so clients never wait long
     * behind it; the rest waits for the next tick. */
    for (unsigned d = 0; d < n->n_dbs; d++) {
        for (;;) {
            size_t removed = gs_store_expire_cycle(n->dbs[d].store, now, EXPIRE_WORK);
            if (removed < EXPIRE_WORK)
                break;
            if (core_now_ns() - t0 > EXPIRE_BUDGET_NS)
                return;
        }
    }
}

static void limits_from_config(const struct gs_config *cfg, struct core_server_limits *l)
{
    l->maxclients = cfg->maxclients;
    l->query_buf_limit = cfg->query_buf_limit;
    l->output_buf_limit = cfg->obuf[GS_CLASS_NORMAL].hard;
    l->output_soft_limit = cfg->obuf[GS_CLASS_NORMAL].soft;
    l->output_soft_seconds = cfg->obuf[GS_CLASS_NORMAL].soft_seconds;
    l->idle_timeout_s = cfg->timeout;
    l->tcp_keepalive_s = cfg->tcp_keepalive;
    l->busy_poll_us = cfg->busy_poll_us;
    l->defer_flush = true; /* one write per client per loop iteration, as Redis */
    int64_t budget = 0;
    (void)gs_clients_budget_parse(cfg->maxmemory_clients, cfg->maxmemory, &budget); /* checked */
    l->clients_mem_limit = budget;
}

void gs_node_apply_config(struct gs_node *n)
{
    (void)gs_config_apply_obuf(&n->cfg);
    struct core_server_limits l;
    limits_from_config(&n->cfg, &l);
    core_server_set_limits(n->srv, &l);
    n->shared.proto_max_bulk_len = n->cfg.proto_max_bulk_len;
    n->shared.limits = node_type_limits(&n->cfg);
    for (unsigned d = 0; d < n->n_dbs; d++)
        gs_store_configure(n->dbs[d].store, (uint64_t)n->cfg.maxmemory,
                           (enum gs_evict_policy)n->cfg.maxmemory_policy);
    core_log_init('M', (enum core_log_level)n->cfg.loglevel);
    uint64_t period = (uint64_t)(1000 / n->cfg.hz);
    uv_timer_set_repeat(&n->cron, period ? period : 1);
    for (unsigned i = 0; i < n->n_features; i++)
        if (n->features[i].ops->apply_config)
            n->features[i].ops->apply_config(n->features[i].self);
    gs_pubsub_apply_limits(n);
}

/* Redis's bind: several addresses; "*" is every IPv4 address, "::*" every
 * IPv6 one; a leading '-' lets an address be missing on this host. With
 * port 0 the first listener picks the port and the others take the same. */
static int listen_all(struct core_server *srv, const char *bind, int port)
{
    char list[CORE_OPT_STRLEN];
    snprintf(list, sizeof(list), "%s", bind);
    int bound = 0, rc = 0;
    for (char *save = NULL, *a = strtok_r(list, " ", &save); a; a = strtok_r(NULL, " ", &save)) {
        bool optional = a[0] == '-';
        const char *addr = a + optional;
        if (strcmp(addr, "*") == 0)
            addr = "0.0.0.0";
        else if (strcmp(addr, "::*") == 0)
            addr = "::";
        rc = core_server_listen(srv, addr, bound && port == 0 ? core_server_port(srv) : port);
        if (rc == 0) {
            bound++;
            continue;
        }
        CORE_WARN("Could not create server TCP listening socket %s:%d: %s", addr, port,
                  core_strerror(rc));
        if (!optional || rc == CORE_EBUSY) /* '-' forgives a missing address only */
            return rc;
    }
    return bound ? 0 : (rc ? rc : CORE_EINVAL);
}

static void dbs_free(struct gs_node *n)
{
    for (unsigned d = 0; n->dbs && d < n->n_dbs; d++)
        gs_store_free(n->dbs[d].store);
    free(n->dbs);
    n->dbs = NULL;
    n->n_dbs = 0;
}

/* The node's databases, each with its own store (client.h). */
static int dbs_new(struct gs_node *n, unsigned count)
{
    n->dbs = calloc(count, sizeof(*n->dbs));
    if (!n->dbs)
        return CORE_ENOMEM;
    n->n_dbs = count;
    for (unsigned d = 0; d < count; d++) {
        struct gs_db *db = &n->dbs[d];
        struct gs_store_config scfg = {
            .maxmemory = (uint64_t)n->cfg.maxmemory,
            .policy = (enum gs_evict_policy)n->cfg.maxmemory_policy,
            .hash_seed = core_hash64(&db, sizeof(db), (uint64_t)core_now_ns() ^ (uint64_t)getpid()),
        };
        db->id = d;
        db->node = n;
        int rc = gs_store_new(&db->store, &scfg);
        if (rc) {
            dbs_free(n);
            return rc;
        }
    }
    return 0;
}

static void features_free(struct gs_node *n);

static void features_stop(struct gs_node *n)
{
    for (unsigned i = 0; i < n->n_features; i++)
        if (n->features[i].ops->stop)
            n->features[i].ops->stop(n->features[i].self);
}

/* Start each feature in order; a started one (self set) joins the node,
 * even when its start failed, so that stop and free undo it. */
static int features_start(struct gs_node *n, const struct gs_feature *const *features)
{
    for (unsigned i = 0; features && features[i]; i++) {
        if (n->n_features == GS_NODE_MAX_FEATURES)
            return CORE_EINVAL;
        void *self = NULL;
        int rc = features[i]->start(n, &self);
        if (self) {
            n->features[n->n_features].ops = features[i];
            n->features[n->n_features].self = self;
            n->n_features++;
        }
        if (rc)
            return rc;
    }
    return 0;
}

int gs_node_new(struct gs_node **out, uv_loop_t *loop, const struct gs_config *cfg,
                const struct gs_feature *const *features)
{
    struct gs_node *n = calloc(1, sizeof(*n));
    if (!n)
        return CORE_ENOMEM;
    n->loop = loop;
    n->cfg = *cfg;
    gs_config_bind(&n->cfg, n->opts, features);
    n->feature_list = features;
    int rc = CORE_ENOMEM;
    if (gs_command_index_build(n) || gs_pubsub_new(&n->pubsub) || gs_slowlog_new(&n->slowlog))
        goto fail_stats;
    n->shared.stats.detail = &n->cmdstats;
    n->shared.proto_max_bulk_len = cfg->proto_max_bulk_len;
    n->shared.limits = node_type_limits(cfg);
    n->shared.rng = (uint64_t)(uintptr_t)n * 0x9e3779b97f4a7c15ull | 1;
    /* Redis Cluster keeps database 0 only. */
    rc = dbs_new(n, cfg->cluster_enabled ? 1 : (unsigned)cfg->databases);
    n->shared.dbs = n->dbs;
    n->shared.n_dbs = n->n_dbs;
    n->shared.databases = cfg->databases;
    n->shared.cluster_mode = cfg->cluster_enabled;
    if (rc)
        goto fail_dbs;
    int64_t budget;
    rc = CORE_EINVAL;
    if (gs_config_apply_obuf(&n->cfg))
        goto fail_server;
    if (gs_clients_budget_parse(n->cfg.maxmemory_clients, 0, &budget)) {
        CORE_WARN("maxmemory-clients: '%s' is not a size or a percentage",
                  n->cfg.maxmemory_clients);
        goto fail_server;
    }
    struct core_server_limits l;
    limits_from_config(&n->cfg, &l);
    rc = core_server_new(&n->srv, loop, &server_ops, n, &l,
                         "-ERR max number of clients reached\r\n");
    if (rc)
        goto fail_server;
    rc = listen_all(n->srv, cfg->bind, (int)cfg->port);
    if (rc)
        goto fail_listen;
    uv_timer_init(loop, &n->cron);
    n->cron.data = n;
    rc = gs_blocking_new(&n->blocking, n);
    if (rc)
        goto fail_features;
    resync_clock(n);
    n->start_wall_ms = n->wall_base_ms;
    rc = features_start(n, features); /* a bad feature option fails the start */
    if (rc)
        goto fail_features;
    rc = gs_metrics_start(&n->metrics, n);
    if (rc)
        goto fail_features;
    uint64_t period = (uint64_t)(1000 / cfg->hz);
    uv_timer_start(&n->cron, cron_cb, period, period ? period : 1);
    *out = n;
    return 0;

fail_features:
    core_server_stop(n->srv);
    features_stop(n);
    uv_close((uv_handle_t *)&n->cron, NULL);
    gs_blocking_stop(n->blocking);
    uv_run(loop, UV_RUN_DEFAULT); /* let the handles (and Raft groups) close */
    features_free(n);
    gs_blocking_free(n->blocking);
    goto fail_closed;
fail_listen:
    core_server_stop(n->srv);
    uv_run(loop, UV_RUN_NOWAIT); /* let the handles close */
fail_closed:
    core_server_free(n->srv);
fail_server:
    dbs_free(n);
fail_dbs:
fail_stats:
    gs_cmd_stats_free(&n->cmdstats);
    free(n->cmd_names);
    gs_pubsub_free(n->pubsub);
    gs_monitor_free(n);
    gs_slowlog_free(n->slowlog);
    free(n);
    return rc;
}

void gs_node_store_stats(const struct gs_node *n, struct gs_store_stats *out)
{
    memset(out, 0, sizeof(*out));
    for (unsigned d = 0; d < n->n_dbs; d++) {
        struct gs_store_stats ds;
        gs_store_stats(n->dbs[d].store, &ds);
        out->keys += ds.keys;
        out->keys_with_expire += ds.keys_with_expire;
        out->used_memory += ds.used_memory;
        out->expired_keys += ds.expired_keys;
        out->evicted_keys += ds.evicted_keys;
        out->hits += ds.hits;
        out->misses += ds.misses;
    }
}

static void features_free(struct gs_node *n)
{
    for (unsigned i = 0; i < n->n_features; i++)
        if (n->features[i].ops->free)
            n->features[i].ops->free(n->features[i].self);
    n->n_features = 0;
}

void gs_node_stop(struct gs_node *n)
{
    if (n->stopping)
        return;
    n->stopping = true;
    core_server_stop(n->srv);
    gs_metrics_stop(n->metrics);
    features_stop(n); /* after the clients have gone */
    uv_close((uv_handle_t *)&n->cron, NULL);
    gs_blocking_stop(n->blocking);
}

void gs_node_free(struct gs_node *n)
{
    if (!n)
        return;
    core_server_free(n->srv);
    gs_metrics_free(n->metrics);
    features_free(n);
    gs_multi_node_free(n); /* before the stores: their hook points here */
    gs_scripting_free(n);
    gs_blocking_free(n->blocking);
    dbs_free(n);
    core_buf_free(&n->shared.scratch);
    gs_cmd_stats_free(&n->cmdstats);
    free(n->cmd_names);
    gs_pubsub_free(n->pubsub);
    gs_monitor_free(n);
    gs_slowlog_free(n->slowlog);
    free(n);
}
