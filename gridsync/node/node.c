/*
 * The node: ties the TCP scaffold, the RESP parser, the command table and
 * the store together (see node.h).
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

static const char *const policy_names[] = {"noeviction", "slru", "allkeys-lru", NULL};

void gs_config_defaults(struct gs_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->port = 6379;
    strcpy(cfg->bind, "127.0.0.1");
    cfg->maxmemory = 0;
    cfg->maxmemory_policy = GS_EVICT_SLRU;
    cfg->maxclients = 10000;
    cfg->query_buf_limit = 1024LL * 1024 * 1024; /* Redis's default, 1gb */
    cfg->output_buf_limit = 256LL * 1024 * 1024;
    cfg->proto_max_bulk_len = GS_RESP_MAX_BULK_DEFLT;
    cfg->timeout = 0;
    cfg->hz = 10;
    cfg->loglevel = CORE_LOG_NOTICE;
    cfg->appendonly = false;
    /* gs-origin */
    cfg->origin_timeout = 1000;
    cfg->origin_ttl = 0;
    cfg->origin_negative_ttl = 0;
    cfg->origin_max_fetches = 64;
    cfg->origin_queue = 1024;
    cfg->origin_coalesce = true;
    strcpy(cfg->dir, "./gridsync-data");
    cfg->cluster_replicas = 3;
    cfg->cluster_snapshot_entries = 16384;
    cfg->hash_max_listpack_entries = 512; /* Redis 7.0's default */
    cfg->hash_max_listpack_value = 64;
    cfg->list_max_listpack_size = -2;
    cfg->set_max_intset_entries = 512;
}

/* The node's own options; read-through and cluster mode bring theirs
 * (struct gs_feature's options). */
static const struct gs_option node_options[] = {
    GS_OPTION(port, "port", CORE_OPT_INT, 0, 65535, NULL, CORE_OPT_IMMUTABLE,
              "TCP port (0 = any free)"),
    GS_OPTION(bind, "bind", CORE_OPT_STRING, 0, 0, NULL, CORE_OPT_IMMUTABLE,
              "address to listen on"),
    GS_OPTION(maxmemory, "maxmemory", CORE_OPT_MEMORY, 0, INT64_MAX, NULL, 0,
              "memory limit for data (0 = none), e.g. 100mb"),
    GS_OPTION(maxmemory_policy, "maxmemory-policy", CORE_OPT_ENUM, 0, 0, policy_names, 0,
              "what to do at maxmemory"),
    GS_OPTION(maxclients, "maxclients", CORE_OPT_INT, 1, 1000000, NULL, 0,
              "most simultaneous clients"),
    GS_OPTION(requirepass, "requirepass", CORE_OPT_STRING, 0, 0, NULL, CORE_OPT_SECRET,
              "password clients must AUTH with (empty = none)"),
    GS_OPTION(query_buf_limit, "client-query-buffer-limit", CORE_OPT_MEMORY, 1024 * 1024, INT64_MAX,
              NULL, 0, "most unprocessed input per client"),
    GS_OPTION(output_buf_limit, "client-output-buffer-limit", CORE_OPT_MEMORY, 0, INT64_MAX, NULL,
              0, "most unsent output per client before it is dropped (0 = none)"),
    GS_OPTION(proto_max_bulk_len, "proto-max-bulk-len", CORE_OPT_MEMORY, 1024 * 1024, INT64_MAX,
              NULL, 0, "largest bulk string in a request"),
    GS_OPTION(timeout, "timeout", CORE_OPT_INT, 0, INT32_MAX, NULL, 0,
              "close clients idle for this many seconds (0 = never)"),
    GS_OPTION(hz, "hz", CORE_OPT_INT, 1, 500, NULL, 0, "active expiry cycles per second"),
    GS_OPTION(loglevel, "loglevel", CORE_OPT_ENUM, 0, 0, core_log_level_names, 0, "log verbosity"),
    GS_OPTION(save, "save", CORE_OPT_STRING, 0, 0, NULL, 0,
              "accepted for compatibility; no persistence"),
    GS_OPTION(appendonly, "appendonly", CORE_OPT_BOOL, 0, 0, NULL, 0,
              "accepted for compatibility; no persistence"),
    GS_OPTION(hash_max_listpack_entries, "hash-max-listpack-entries", CORE_OPT_INT, 0, INT64_MAX,
              NULL, 0, "most fields of a hash kept as a listpack"),
    GS_OPTION(hash_max_listpack_value, "hash-max-listpack-value", CORE_OPT_INT, 0, INT64_MAX, NULL,
              0, "longest field or value of a hash kept as a listpack"),
    GS_OPTION(list_max_listpack_size, "list-max-listpack-size", CORE_OPT_INT, INT32_MIN, INT32_MAX,
              NULL, 0, "list node size: -1..-5 = 4..64 KB, positive = elements per node"),
    GS_OPTION(set_max_intset_entries, "set-max-intset-entries", CORE_OPT_INT, 0, INT64_MAX, NULL, 0,
              "most members of a set of integers kept as an intset"),
    {{NULL, 0, NULL, 0, 0, NULL, 0, NULL}, 0},
};

/* Append rows to opts at *n, each bound to its field of cfg. */
static void bind_rows(struct gs_config *cfg, struct core_option *opts, size_t *n,
                      const struct gs_option *rows)
{
    for (; rows && rows->opt.name; rows++) {
        if (*n + 1 >= GS_NODE_MAX_OPTS) {
            CORE_WARN("option table full: '%s' and later options are ignored", rows->opt.name);
            return;
        }
        opts[*n] = rows->opt;
        opts[*n].ptr = (char *)cfg + rows->off;
        (*n)++;
    }
}

void gs_config_bind(struct gs_config *cfg, struct core_option *opts,
                    const struct gs_feature *const *features)
{
    size_t n = 0;
    bind_rows(cfg, opts, &n, node_options);
    for (unsigned i = 0; features && features[i]; i++)
        bind_rows(cfg, opts, &n, features[i]->options);
    opts[n] = (struct core_option){0};
}

/* ------------------------------------------------------- command index */

/* The value types' thresholds from the configuration (gs_shared.limits). */
static struct gs_type_limits node_type_limits(const struct gs_config *cfg)
{
    struct gs_type_limits l = {cfg->hash_max_listpack_entries, cfg->hash_max_listpack_value,
                               cfg->list_max_listpack_size, cfg->set_max_intset_entries};
    return l;
}

static uint32_t name_hash(const char *name, size_t len)
{
    char low[32];
    for (size_t i = 0; i < len; i++)
        low[i] = (char)tolower((unsigned char)name[i]);
    return core_fnv1a32(low, len);
}

void gs_command_index_build(struct gs_node *n)
{
    memset(n->cmd_index, 0, sizeof(n->cmd_index));
    for (const struct gs_command *cmd = gs_commands; cmd->name; cmd++) {
        uint32_t h = name_hash(cmd->name, strlen(cmd->name)) & 255;
        while (n->cmd_index[h])
            h = (h + 1) & 255;
        n->cmd_index[h] = cmd;
    }
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

void gs_execute(struct gs_client *c, size_t argc, struct gs_arg *argv)
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
        reply_arity(c, cmd);
        return;
    }
    if (!c->authenticated && !(cmd->flags & GS_CMD_NOAUTH)) {
        if (n->cfg.requirepass[0]) {
            if (!gs_multi_exec_refused(c, cmd, "NOAUTH Authentication required.")) {
                gs_error(c, "NOAUTH Authentication required.");
                gs_multi_flag_error(&c->multi);
            }
            return;
        }
        c->authenticated = true; /* the password was removed meanwhile */
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
    if ((cmd->flags & GS_CMD_DENYOOM) && n->cfg.maxmemory > 0 &&
        gs_store_make_room(c->db->store) == CORE_ENOMEM) {
        gs_error_oom(c);
        return;
    }
    c->last_cmd = cmd->name;
    n->shared.stats.commands++;
    cmd->fn(c, argc, argv);
}

/* ------------------------------------------------------- connections */

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
    /* c->wait: a replicated write is pending; the rest waits (cluster.h). */
    while (off < len && !core_conn_closing(conn) && !c->wait) {
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
    l->output_buf_limit = cfg->output_buf_limit;
    l->idle_timeout_s = cfg->timeout;
}

void gs_node_apply_config(struct gs_node *n)
{
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
    gs_command_index_build(n);
    n->shared.proto_max_bulk_len = cfg->proto_max_bulk_len;
    n->shared.limits = node_type_limits(cfg);
    n->shared.rng = (uint64_t)(uintptr_t)n * 0x9e3779b97f4a7c15ull | 1;
    int rc = dbs_new(n, GS_DBS_DEFAULT);
    if (rc)
        goto fail_dbs;
    struct core_server_limits l;
    limits_from_config(cfg, &l);
    rc = core_server_new(&n->srv, loop, &server_ops, n, &l,
                         "-ERR max number of clients reached\r\n");
    if (rc)
        goto fail_server;
    rc = core_server_listen(n->srv, cfg->bind, (int)cfg->port);
    if (rc) {
        CORE_WARN("Could not create server TCP listening socket %s:%lld: %s", cfg->bind,
                  (long long)cfg->port, core_strerror(rc));
        goto fail_listen;
    }
    uv_timer_init(loop, &n->cron);
    n->cron.data = n;
    resync_clock(n);
    n->start_wall_ms = n->wall_base_ms;
    rc = features_start(n, features); /* a bad feature option fails the start */
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
    uv_run(loop, UV_RUN_DEFAULT); /* let the handles (and Raft groups) close */
    features_free(n);
    goto fail_closed;
fail_listen:
    core_server_stop(n->srv);
    uv_run(loop, UV_RUN_NOWAIT); /* let the handles close */
fail_closed:
    core_server_free(n->srv);
fail_server:
    dbs_free(n);
fail_dbs:
    free(n);
    return rc;
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
    features_stop(n); /* after the clients have gone */
    uv_close((uv_handle_t *)&n->cron, NULL);
}

void gs_node_free(struct gs_node *n)
{
    if (!n)
        return;
    core_server_free(n->srv);
    features_free(n);
    gs_multi_node_free(n); /* before the stores: their hook points here */
    dbs_free(n);
    core_buf_free(&n->shared.scratch);
    free(n);
}
