/*
 * The node's options: the table binding each redis.conf / CONFIG option to
 * its field of struct gs_config, the defaults, the names of Redis options
 * accepted and ignored, and the parsers of the options with a syntax of
 * their own (client-output-buffer-limit, maxmemory-clients). The contract
 * is in gridsync/client/node_ctx.h; node.c applies the result.
 */
#include "gridsync/node/node.h"

#include "core/error.h"
#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const char *const policy_names[] = {"noeviction", "slru", "allkeys-lru", NULL};
static const char *const appendfsync_names[] = {"always", "everysec", "no", NULL};

const char *const gs_redis_conf_ignored[] = {"tcp-backlog",
                                             "always-show-logo",
                                             "set-proc-title",
                                             "proc-title-template",
                                             "supervised",
                                             "syslog-enabled",
                                             "syslog-ident",
                                             "syslog-facility",
                                             "crash-log-enabled",
                                             "crash-memcheck-enabled",
                                             "unixsocket",
                                             "unixsocketperm",
                                             "socket-mark-id",
                                             "stop-writes-on-bgsave-error",
                                             "rdbcompression",
                                             "rdbchecksum",
                                             "dbfilename",
                                             "rdb-del-sync-files",
                                             "sanitize-dump-payload",
                                             "replica-serve-stale-data",
                                             "replica-read-only",
                                             "repl-diskless-sync",
                                             "repl-diskless-sync-delay",
                                             "repl-diskless-sync-max-replicas",
                                             "repl-diskless-load",
                                             "repl-disable-tcp-nodelay",
                                             "repl-ping-replica-period",
                                             "repl-timeout",
                                             "repl-backlog-size",
                                             "repl-backlog-ttl",
                                             "replica-priority",
                                             "min-replicas-to-write",
                                             "min-replicas-max-lag",
                                             "acllog-max-len",
                                             "lazyfree-lazy-eviction",
                                             "lazyfree-lazy-expire",
                                             "lazyfree-lazy-server-del",
                                             "replica-lazy-flush",
                                             "lazyfree-lazy-user-del",
                                             "lazyfree-lazy-user-flush",
                                             "oom-score-adj",
                                             "oom-score-adj-values",
                                             "disable-thp",
                                             "appendfilename",
                                             "appenddirname",
                                             "no-appendfsync-on-rewrite",
                                             "auto-aof-rewrite-percentage",
                                             "auto-aof-rewrite-min-size",
                                             "aof-load-truncated",
                                             "aof-use-rdb-preamble",
                                             "aof-timestamp-enabled",
                                             "aof-rewrite-incremental-fsync",
                                             "rdb-save-incremental-fsync",
                                             "notify-keyspace-events",
                                             "hash-max-listpack-entries",
                                             "hash-max-listpack-value",
                                             "list-max-listpack-size",
                                             "list-compress-depth",
                                             "set-max-intset-entries",
                                             "set-max-listpack-entries",
                                             "stream-node-max-bytes",
                                             "stream-node-max-entries",
                                             "activerehashing",
                                             "dynamic-hz",
                                             "jemalloc-bg-thread",
                                             "io-threads",
                                             "io-threads-do-reads",
                                             "maxmemory-samples",
                                             "maxmemory-eviction-tenacity",
                                             "replica-ignore-maxmemory",
                                             "active-expire-effort",
                                             "lfu-log-factor",
                                             "lfu-decay-time",
                                             "activedefrag",
                                             "active-defrag-ignore-bytes",
                                             "active-defrag-threshold-lower",
                                             "active-defrag-threshold-upper",
                                             "active-defrag-cycle-min",
                                             "active-defrag-cycle-max",
                                             "active-defrag-max-scan-fields",
                                             "cluster-config-file",
                                             "cluster-node-timeout",
                                             "latency-tracking",
                                             "latency-tracking-info-percentiles",
                                             "tracking-table-max-keys",
                                             "shutdown-timeout",
                                             "shutdown-on-sigint",
                                             "shutdown-on-sigterm",
                                             "enable-protected-configs",
                                             "enable-debug-command",
                                             "enable-module-command",
                                             NULL};

static const char *const class_names[GS_CLASS_COUNT] = {"normal", "replica", "pubsub"};

/* Redis's CONFIG GET form: every class, sizes in bytes. */
static void format_obuf(const struct gs_obuf_limit *l, char *out, size_t len)
{
    size_t used = 0;
    for (int i = 0; i < GS_CLASS_COUNT && used < len; i++)
        used +=
            (size_t)snprintf(out + used, len - used, "%s%s %lld %lld %lld", i ? " " : "",
                             i == GS_CLASS_REPLICA ? "slave" : class_names[i], (long long)l[i].hard,
                             (long long)l[i].soft, (long long)l[i].soft_seconds);
}

int gs_obuf_limits_parse(const char *value, struct gs_obuf_limit *limits, char *why, size_t len)
{
    char buf[CORE_OPT_STRLEN];
    snprintf(buf, sizeof(buf), "%s", value);
    char *tok[64];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, " ", &save); t && n < 64;
         t = strtok_r(NULL, " ", &save))
        tok[n++] = t;
    struct gs_obuf_limit out[GS_CLASS_COUNT];
    memcpy(out, limits, sizeof(out));
    int64_t v;
    if (n == 1 && core_parse_memory(tok[0], &v) == 0) { /* GridSync's older form */
        out[GS_CLASS_NORMAL].hard = v;
        memcpy(limits, out, sizeof(out));
        return 0;
    }
    /* Redis's config.c: "Wrong number of arguments in buffer limit
     * configuration." / "Invalid client class specified in buffer limit
     * configuration." / "Error in hard, soft or soft_seconds setting in
     * buffer limit configuration." */
    if (n == 0 || n % 4) {
        snprintf(why, len, "Wrong number of arguments in buffer limit configuration.");
        return CORE_EINVAL;
    }
    for (int i = 0; i < n; i += 4) {
        int cls = -1;
        if (!strcasecmp(tok[i], "normal"))
            cls = GS_CLASS_NORMAL;
        else if (!strcasecmp(tok[i], "replica") || !strcasecmp(tok[i], "slave"))
            cls = GS_CLASS_REPLICA;
        else if (!strcasecmp(tok[i], "pubsub"))
            cls = GS_CLASS_PUBSUB;
        if (cls < 0) {
            snprintf(why, len, "Invalid client class specified in buffer limit configuration.");
            return CORE_EINVAL;
        }
        int64_t h, so, sec;
        if (core_parse_memory(tok[i + 1], &h) || core_parse_memory(tok[i + 2], &so) ||
            core_parse_int64(tok[i + 3], strlen(tok[i + 3]), &sec) || sec < 0) {
            snprintf(why, len,
                     "Error in hard, soft or soft_seconds setting in buffer limit "
                     "configuration.");
            return CORE_EINVAL;
        }
        out[cls] = (struct gs_obuf_limit){h, so, sec};
    }
    memcpy(limits, out, sizeof(out));
    return 0;
}

void gs_config_defaults(struct gs_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->port = 6379;
    strcpy(cfg->bind, "127.0.0.1");
    cfg->maxmemory = 0;
    cfg->maxmemory_policy = GS_EVICT_SLRU;
    cfg->maxclients = 10000;
    cfg->query_buf_limit = 1024LL * 1024 * 1024; /* Redis's default, 1gb */
    /* Redis's defaults, except normal clients: a 256mb hard limit (Redis
     * has none) so that one client that stops reading cannot take the
     * node's memory (docs/gridsync.md). */
    cfg->obuf[GS_CLASS_NORMAL] = (struct gs_obuf_limit){256LL << 20, 0, 0};
    cfg->obuf[GS_CLASS_REPLICA] = (struct gs_obuf_limit){256LL << 20, 64LL << 20, 60};
    cfg->obuf[GS_CLASS_PUBSUB] = (struct gs_obuf_limit){32LL << 20, 8LL << 20, 60};
    format_obuf(cfg->obuf, cfg->output_buf_limit, sizeof(cfg->output_buf_limit));
    cfg->proto_max_bulk_len = GS_RESP_MAX_BULK_DEFLT;
    cfg->timeout = 0;
    cfg->hz = 10;
    cfg->loglevel = CORE_LOG_NOTICE;
    cfg->appendonly = false;
    cfg->databases = 16;
    cfg->tcp_keepalive = 300;
    cfg->busy_poll_us = 0;
    cfg->metrics_port = 0;
    snprintf(cfg->metrics_bind, sizeof(cfg->metrics_bind), "127.0.0.1");
    cfg->slowlog_slower_than = 10000; /* Redis's defaults */
    cfg->slowlog_max_len = 128;
    /* Redis's default is 0 (no budget). Here a tenth of the machine's
     * memory, in bytes: a crowd of clients that pipeline without reading
     * cannot take the node's memory, and a small maxmemory (which bounds
     * the data; client buffers come on top of it) does not shrink it. */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    snprintf(cfg->maxmemory_clients, sizeof(cfg->maxmemory_clients), "%lld",
             pages > 0 && page > 0 ? (long long)pages * page / 10 : 0LL);
    cfg->appendfsync = 1; /* everysec */
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
    cfg->cluster_snapshot_fork = true;
    cfg->cluster_inflight_entries = 64;
    strcpy(cfg->registry_region, "us-east-1");
    cfg->registry_heartbeat = 1000;
    cfg->registry_ttl = 5000;
    cfg->hash_max_listpack_entries = 512; /* Redis 7.0's default */
    cfg->hash_max_listpack_value = 64;
    cfg->list_max_listpack_size = -2;
    cfg->set_max_intset_entries = 512;
    cfg->zset_max_listpack_entries = 128;
    cfg->zset_max_listpack_value = 64;
    cfg->hll_sparse_max_bytes = 3000;
    cfg->busy_reply_threshold = 5000; /* Redis's default */
    cfg->lua_memory_limit = 256LL * 1024 * 1024;
}

/* The node's own options; read-through and cluster mode bring theirs
 * (struct gs_feature's options). */
static const struct gs_option node_options[] = {
    GS_OPTION(port, "port", CORE_OPT_INT, 0, 65535, NULL, CORE_OPT_IMMUTABLE,
              "TCP port (0 = any free)"),
    GS_OPTION(bind, "bind", CORE_OPT_STRING, 0, 0, NULL, CORE_OPT_IMMUTABLE,
              "addresses to listen on, space-separated; a leading - marks one that may be "
              "missing"),
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
    GS_OPTION(output_buf_limit, "client-output-buffer-limit", CORE_OPT_STRING, 0, 0, NULL,
              CORE_OPT_APPEND,
              "per class (normal, replica, pubsub): <class> <hard> <soft> <soft-seconds>; unsent "
              "output above which a client is dropped (0 = none); a single size sets normal's "
              "hard limit"),
    GS_OPTION(proto_max_bulk_len, "proto-max-bulk-len", CORE_OPT_MEMORY, 1024 * 1024, INT64_MAX,
              NULL, 0, "largest bulk string in a request"),
    GS_OPTION(timeout, "timeout", CORE_OPT_INT, 0, INT32_MAX, NULL, 0,
              "close clients idle for this many seconds (0 = never)"),
    GS_OPTION(hz, "hz", CORE_OPT_INT, 1, 500, NULL, 0, "active expiry cycles per second"),
    GS_OPTION(loglevel, "loglevel", CORE_OPT_ENUM, 0, 0, core_log_level_names, 0, "log verbosity"),
    GS_OPTION(save, "save", CORE_OPT_STRING, 0, 0, NULL, CORE_OPT_APPEND,
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
    GS_OPTION(zset_max_listpack_entries, "zset-max-listpack-entries", CORE_OPT_INT, 0, INT64_MAX,
              NULL, 0, "most members of a sorted set kept as a listpack"),
    GS_OPTION(zset_max_listpack_value, "zset-max-listpack-value", CORE_OPT_INT, 0, INT64_MAX, NULL,
              0, "longest member of a sorted set kept as a listpack"),
    GS_OPTION(hll_sparse_max_bytes, "hll-sparse-max-bytes", CORE_OPT_MEMORY, 0, INT64_MAX, NULL, 0,
              "longest sparse HyperLogLog before it turns dense"),
    /* Redis 7.0's aliases (the names before listpacks): the same settings */
    GS_OPTION(zset_max_listpack_entries, "zset-max-ziplist-entries", CORE_OPT_INT, 0, INT64_MAX,
              NULL, CORE_OPT_ALIAS, "alias of zset-max-listpack-entries"),
    GS_OPTION(zset_max_listpack_value, "zset-max-ziplist-value", CORE_OPT_INT, 0, INT64_MAX, NULL,
              CORE_OPT_ALIAS, "alias of zset-max-listpack-value"),
    GS_OPTION(hash_max_listpack_entries, "hash-max-ziplist-entries", CORE_OPT_INT, 0, INT64_MAX,
              NULL, CORE_OPT_ALIAS, "alias of hash-max-listpack-entries"),
    GS_OPTION(hash_max_listpack_value, "hash-max-ziplist-value", CORE_OPT_INT, 0, INT64_MAX, NULL,
              CORE_OPT_ALIAS, "alias of hash-max-listpack-value"),
    GS_OPTION(list_max_listpack_size, "list-max-ziplist-size", CORE_OPT_INT, INT32_MIN, INT32_MAX,
              NULL, CORE_OPT_ALIAS, "alias of list-max-listpack-size"),
    GS_OPTION(daemonize, "daemonize", CORE_OPT_BOOL, 0, 0, NULL, CORE_OPT_IMMUTABLE,
              "run in the background (writes pidfile)"),
    GS_OPTION(pidfile, "pidfile", CORE_OPT_STRING, 0, 0, NULL, CORE_OPT_IMMUTABLE,
              "file to write the process id to (empty = none unless daemonized)"),
    GS_OPTION(logfile, "logfile", CORE_OPT_STRING, 0, 0, NULL, CORE_OPT_IMMUTABLE,
              "file to append the log to (empty = standard error)"),
    GS_OPTION(databases, "databases", CORE_OPT_INT, 1, 16384, NULL, CORE_OPT_IMMUTABLE,
              "number of databases (SELECT 0 .. n-1)"),
    GS_OPTION(protected_mode, "protected-mode", CORE_OPT_BOOL, 0, 0, NULL, 0,
              "without requirepass, refuse clients that are not on loopback"),
    GS_OPTION(tcp_keepalive, "tcp-keepalive", CORE_OPT_INT, 0, INT32_MAX, NULL, 0,
              "seconds of idleness before TCP keepalive probes (0 = off)"),
    GS_OPTION(busy_poll_us, "busy-poll-us", CORE_OPT_INT, 0, 1000000, NULL, 0,
              "microseconds the event loop keeps polling after the last input before it "
              "sleeps (0 = sleep at once; see docs/perf.md)"),
    GS_OPTION(metrics_port, "metrics-port", CORE_OPT_INT, 0, 65535, NULL, CORE_OPT_IMMUTABLE,
              "port of the Prometheus endpoint, GET /metrics (0 = off)"),
    GS_OPTION(metrics_bind, "metrics-bind", CORE_OPT_STRING, 0, 0, NULL, CORE_OPT_IMMUTABLE,
              "address the Prometheus endpoint listens on (IPv4 or IPv6 literal)"),
    GS_OPTION(maxmemory_clients, "maxmemory-clients", CORE_OPT_STRING, 0, 0, NULL, 0,
              "budget for all clients' buffers together, a size or N% of maxmemory (of the "
              "machine's memory without maxmemory); over it the biggest clients are "
              "disconnected (0 = none)"),
    GS_OPTION(slowlog_slower_than, "slowlog-log-slower-than", CORE_OPT_INT, -1, INT64_MAX, NULL, 0,
              "commands taking at least this many microseconds go to SLOWLOG (-1 = none)"),
    GS_OPTION(slowlog_max_len, "slowlog-max-len", CORE_OPT_INT, 0, INT32_MAX, NULL, 0,
              "SLOWLOG entries kept"),
    GS_OPTION(latency_threshold_ms, "latency-monitor-threshold", CORE_OPT_INT, 0, INT64_MAX, NULL,
              0, "events of at least this many milliseconds go to LATENCY (0 = off)"),
    GS_OPTION(busy_reply_threshold, "busy-reply-threshold", CORE_OPT_INT, 0, INT64_MAX, NULL, 0,
              "ms after which a running script is logged as slow (it is not interrupted)"),
    GS_OPTION(busy_reply_threshold, "lua-time-limit", CORE_OPT_INT, 0, INT64_MAX, NULL,
              CORE_OPT_ALIAS, "alias of busy-reply-threshold"),
    GS_OPTION(lua_memory_limit, "lua-memory-limit", CORE_OPT_MEMORY, 0, INT64_MAX, NULL, 0,
              "bytes the Lua scripts' heap may hold (0 = no bound)"),
    GS_OPTION(appendfsync, "appendfsync", CORE_OPT_ENUM, 0, 0, appendfsync_names, 0,
              "accepted for compatibility; no append-only file"),
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

int gs_clients_budget_parse(const char *value, int64_t maxmemory, int64_t *bytes)
{
    size_t len = strlen(value);
    if (len > 1 && value[len - 1] == '%') {
        int64_t pct;
        if (core_parse_int64(value, len - 1, &pct) || pct < 0 || pct > 100)
            return CORE_EINVAL;
        int64_t base = maxmemory;
        if (base == 0) {
            long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
            base = pages > 0 && page > 0 ? (int64_t)pages * page : 0;
        }
        *bytes = base / 100 * pct;
        return 0;
    }
    return core_parse_memory(value, bytes);
}

/* The option's text onto the parsed limits, then back in Redis's form.
 * CONFIG SET checks the text first; at start a bad one fails the start. */
int gs_config_apply_obuf(struct gs_config *cfg)
{
    char why[128];
    int rc = gs_obuf_limits_parse(cfg->output_buf_limit, cfg->obuf, why, sizeof(why));
    if (rc)
        CORE_WARN("client-output-buffer-limit: %s", why);
    format_obuf(cfg->obuf, cfg->output_buf_limit, sizeof(cfg->output_buf_limit));
    return rc;
}
