/*
 * A GridSync node: one event loop, one TCP server (core/uv_server), one
 * store, the configuration and the per-client state. Everything lives in
 * struct gs_node (no globals), so a node with one loop per core is later a
 * matter of creating several.
 *
 * Command handlers (commands/cmd_*.c) get their keyspace and clock from
 * their client's database context (gridsync/client/client.h), reply
 * through c->w and never block.
 */
#ifndef GS_NODE_H
#define GS_NODE_H

#include "core/config.h"
#include "core/uv_server.h"
#include "gridsync/client/client.h"
#include "gridsync/commands/multi.h"
#include "gridsync/client/cmd_stats.h"
#include "gridsync/protocol/resp.h"
#include "gridsync/store/store.h"

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define GS_VERSION       "0.1.0"
#define GS_REDIS_VERSION "7.0.0" /* the Redis version whose commands we follow */

/* Options; CONFIG GET/SET and the command line use the same table. */
struct gs_command;
struct gs_origin;
struct gs_held;
struct gs_pubsub;
struct gs_subscriber;
struct gs_slowlog;

#define GS_NODE_NOPTS 40 /* options + terminator (7 gs-origin's, 7 cluster's) */

/* Redis's client-output-buffer-limit classes (networking.c). */
enum gs_client_class { GS_CLASS_NORMAL, GS_CLASS_REPLICA, GS_CLASS_PUBSUB, GS_CLASS_COUNT };

struct gs_obuf_limit {
    int64_t hard, soft, soft_seconds; /* bytes, bytes, seconds; 0 = none */
};

struct gs_config {
    int64_t port;
    char bind[CORE_OPT_STRLEN];
    int64_t maxmemory;
    int maxmemory_policy; /* enum gs_evict_policy */
    int64_t maxclients;
    char requirepass[CORE_OPT_STRLEN];
    int64_t query_buf_limit;
    /* client-output-buffer-limit as Redis writes it ("normal 0 0 0 replica
     * ... pubsub 32mb 8mb 60"); a single size is normal's hard limit. Parsed
     * into obuf[] by gs_node_apply_config, classes not named keep theirs. */
    char output_buf_limit[CORE_OPT_STRLEN];
    struct gs_obuf_limit obuf[GS_CLASS_COUNT];
    int64_t proto_max_bulk_len;
    int64_t timeout;
    int64_t hz;
    int loglevel; /* enum core_log_level */
    char save[CORE_OPT_STRLEN];
    bool appendonly;
    /* What a redis.conf sets about the process (gridsync-server honours
     * them; docs/gridsync.md "Running from a redis.conf"). */
    bool daemonize;
    char pidfile[CORE_OPT_STRLEN];
    char logfile[CORE_OPT_STRLEN];
    int64_t databases;
    bool protected_mode;
    int64_t tcp_keepalive; /* seconds; 0 = off */
    /* Redis 7's maxmemory-clients: a size, or "N%" of maxmemory (of the
     * machine's memory when maxmemory is 0); "0" = no budget. */
    char maxmemory_clients[CORE_OPT_STRLEN];
    int64_t slowlog_slower_than;  /* microseconds; negative = off */
    int64_t slowlog_max_len;      /* entries */
    int64_t latency_threshold_ms; /* latency-monitor-threshold; 0 = off */
    int appendfsync;              /* accepted: there is no append-only file */
    /* gs-origin: read-through origin (issue #6, docs/gridsync-origin.md) */
    char origin[CORE_OPT_STRLEN]; /* URL template with {key}; empty = off */
    int64_t origin_timeout;       /* ms */
    int64_t origin_ttl;           /* ms; 0 = no expiry */
    int64_t origin_negative_ttl;  /* ms; 0 = 404s not remembered */
    int64_t origin_max_fetches;
    int64_t origin_queue;
    bool origin_coalesce;
    /* Cluster mode (gridsync/cluster/cluster.h). */
    bool cluster_enabled;
    char cluster_peers[CORE_OPT_STRLEN]; /* host:port,host:port,... (all nodes) */
    char dir[CORE_OPT_STRLEN];           /* Raft logs and snapshots */
    int64_t cluster_replicas;            /* replication factor */
    int cluster_read_mode;               /* enum gs_read_mode (raft_glue.h) */
    bool cluster_join;                   /* this node is being added (docs) */
    int64_t cluster_snapshot_entries;    /* Raft log entries between snapshots */
};

struct gs_node {
    uv_loop_t *loop;
    struct core_server *srv;
    /* The databases, indexed by number; a client's c->db points at one.
     * In cluster mode database 0's store is the one of the Raft group this
     * node prefers to lead (the other groups have their own, cluster.c). */
    struct gs_db *dbs;
    unsigned n_dbs;
    struct gs_config cfg;
    struct core_option opts[GS_NODE_NOPTS]; /* the option table, bound to cfg */
    uv_timer_t cron;                        /* active expiry, clock resync */
    bool stopping;
    /* Wall clock: read once per cron tick; between ticks derived from the
     * loop's own time, which libuv updates once per iteration. */
    int64_t wall_base_ms;
    uint64_t loop_base_ms;
    int64_t start_wall_ms;
    struct gs_stats stats;                   /* total_commands_processed, total_error_replies */
    struct core_buf scratch;                 /* reusable: KEYS, RENAME, INFO text */
    const struct gs_command *cmd_index[256]; /* open addressing by name hash */
    char config_file[CORE_OPT_STRLEN];
    struct gs_origin *origin;      /* gs-origin: NULL unless configured */
    struct gs_cluster *cluster;    /* NULL unless cluster-enabled */
    struct gs_watch_table watches; /* WATCHed keys (gridsync/commands/multi.h) */
    struct gs_cmd_stats cmdstats;  /* INFO commandstats/errorstats/latencystats */
    struct gs_pubsub *pubsub;      /* channels and subscribers (commands/pubsub.h) */
    struct gs_slowlog *slowlog;    /* SLOWLOG and LATENCY records (node/slowlog.h) */
    const char **cmd_names;        /* gs_commands[i].name, for cmdstats' INFO */
};

/* Create a node from a filled configuration (see gs_node_options for the
 * defaults), bind and listen. Returns 0 or a CORE_E* code (with a log
 * line). *out is freed by gs_node_free after the loop has returned. */
int gs_node_new(struct gs_node **out, uv_loop_t *loop, const struct gs_config *cfg);

/* Stop accepting, close every client and the node's handles; the loop
 * then returns. Safe from inside a command (SHUTDOWN) and from a signal
 * callback. */
void gs_node_stop(struct gs_node *n);

void gs_node_free(struct gs_node *n);

/* Fill cfg with the defaults. */
void gs_config_defaults(struct gs_config *cfg);

/* Directives of Redis 7.0's redis.conf that mean nothing to GridSync
 * (persistence, replication, encodings tuning ...): a config file may hold
 * them; gridsync-server logs a warning for each and goes on. Directives
 * that would change security or data (rename-command, user, replicaof)
 * are not in the list: a file that has them is refused. */
extern const char *const gs_redis_conf_ignored[];

/* Write the option table (GS_NODE_NOPTS entries including the terminator)
 * into opts, each option pointing into *cfg. */
void gs_config_bind(struct gs_config *cfg, struct core_option *opts);

/* The node's view of "now" in Unix ms, refreshed once per loop iteration.
 * For the node's own work (expiry, fills); a command uses c->db->now_ms,
 * which gs_execute sets from this. */
static inline int64_t gs_node_now_ms(const struct gs_node *n)
{
    return n->wall_base_ms + (int64_t)(uv_now(n->loop) - n->loop_base_ms);
}

/* Apply changed options to the running node (after CONFIG SET). */
void gs_node_apply_config(struct gs_node *n);

/* Parse a maxmemory-clients value into bytes for this maxmemory (see
 * struct gs_config). Returns 0 or CORE_EINVAL. */
int gs_clients_budget_parse(const char *value, int64_t maxmemory, int64_t *bytes);

/* Parse a client-output-buffer-limit value onto *limits (the classes it
 * names change; the others keep their values). Returns 0, or CORE_EINVAL
 * with why written. */
int gs_obuf_limits_parse(const char *value, struct gs_obuf_limit *limits, char *why, size_t len);

/* ------------------------------------------------------- command table */

enum {
    GS_CMD_WRITE = 1 << 0,
    GS_CMD_READONLY = 1 << 1,
    GS_CMD_DENYOOM = 1 << 2, /* may grow memory: make room first */
    GS_CMD_FAST = 1 << 3,
    GS_CMD_NOAUTH = 1 << 4, /* allowed before AUTH */
    GS_CMD_ADMIN = 1 << 5,
    GS_CMD_LOADING = 1 << 6,
    GS_CMD_STALE = 1 << 7,
    GS_CMD_NOSCRIPT = 1 << 8,
};

typedef void gs_cmd_fn(struct gs_client *c, size_t argc, struct gs_arg *argv);

struct gs_command {
    const char *name; /* lower case */
    int arity;        /* Redis's convention: n exact, -n at least n */
    unsigned flags;
    gs_cmd_fn *fn;
    int first_key, last_key, key_step;
    const char *group;
    const char *summary;
    const char *since;
};

/* Every command, in one table (commands.c); NULL-name terminated. */
extern const struct gs_command gs_commands[];

/* Build the node's command index and its command statistics (at start;
 * gs_node_free frees them). Returns 0 or CORE_ENOMEM. */
int gs_command_index_build(struct gs_node *n);

/* Find a command by name, case-insensitively; NULL if unknown. O(1). */
const struct gs_command *gs_command_lookup(const struct gs_node *n, const char *name, size_t len);

/* Run one request (argv[0] is the command name). */
void gs_execute(struct gs_client *c, size_t argc, struct gs_arg *argv);

/* Call cmd's handler for c once its checks have passed: the one place
 * handlers run from (gs_execute, EXEC, cluster reads), so every call is
 * counted in total_commands_processed and INFO commandstats, timed for
 * latencystats, and marked failed when it replied an error. */
void gs_call(struct gs_client *c, const struct gs_command *cmd, size_t argc, struct gs_arg *argv);

/* Command cmd was refused before it ran (rejected_calls in commandstats). */
void gs_command_rejected(struct gs_node *n, const struct gs_command *cmd);

/* Handlers, by family. */
gs_cmd_fn gs_cmd_get, gs_cmd_set, gs_cmd_setnx, gs_cmd_setex, gs_cmd_psetex, gs_cmd_getset,
    gs_cmd_getdel, gs_cmd_getex, gs_cmd_mget, gs_cmd_mset, gs_cmd_msetnx, gs_cmd_incr, gs_cmd_decr,
    gs_cmd_incrby, gs_cmd_decrby, gs_cmd_incrbyfloat, gs_cmd_append, gs_cmd_strlen, gs_cmd_getrange,
    gs_cmd_setrange;
gs_cmd_fn gs_cmd_expire, gs_cmd_pexpire, gs_cmd_expireat, gs_cmd_pexpireat, gs_cmd_ttl, gs_cmd_pttl,
    gs_cmd_persist;
gs_cmd_fn gs_cmd_expiretime, gs_cmd_pexpiretime, gs_cmd_touch, gs_cmd_time;
gs_cmd_fn gs_cmd_getbit, gs_cmd_setbit, gs_cmd_bitcount, gs_cmd_bitpos, gs_cmd_bitop;
gs_cmd_fn gs_cmd_del, gs_cmd_exists, gs_cmd_type, gs_cmd_rename, gs_cmd_renamenx, gs_cmd_copy,
    gs_cmd_keys, gs_cmd_scan, gs_cmd_randomkey, gs_cmd_dbsize, gs_cmd_flushdb, gs_cmd_select,
    gs_cmd_flushall, gs_cmd_move, gs_cmd_swapdb;
gs_cmd_fn gs_cmd_cluster, gs_cmd_readonly, gs_cmd_readwrite, gs_cmd_asking;
gs_cmd_fn gs_cmd_ping, gs_cmd_echo, gs_cmd_info, gs_cmd_config, gs_cmd_command, gs_cmd_auth,
    gs_cmd_hello, gs_cmd_quit, gs_cmd_shutdown, gs_cmd_client;
gs_cmd_fn gs_cmd_multi, gs_cmd_exec, gs_cmd_discard, gs_cmd_watch, gs_cmd_unwatch; /* multi.c */
gs_cmd_fn gs_cmd_subscribe, gs_cmd_unsubscribe, gs_cmd_psubscribe, gs_cmd_punsubscribe,
    gs_cmd_ssubscribe, gs_cmd_sunsubscribe, gs_cmd_publish, gs_cmd_spublish,
    gs_cmd_pubsub;                        /* commands/cmd_pubsub.c */
gs_cmd_fn gs_cmd_slowlog, gs_cmd_latency; /* commands/cmd_slowlog.c */

#endif
