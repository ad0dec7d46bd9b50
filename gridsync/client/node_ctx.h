/*
 * The node as features and server-level commands see it: its
 * configuration and option rows, its loop, databases, shared state and
 * clients, the feature interface (struct gs_feature), and the services it
 * offers them (the clock, running and finding commands, stopping,
 * applying a changed configuration). Declared here, below the node, so
 * that cluster/, origin/ and commands/ need not include node/node.h: they
 * depend on this contract, and the node (node/node.c) implements it.
 *
 * Only the node writes struct gs_node's fields, except where a field says
 * otherwise; the others read them. Creating and freeing a node, and the
 * command index, are node/node.h's.
 */
#ifndef GS_NODE_CTX_H
#define GS_NODE_CTX_H

#include "core/config.h"
#include "core/uv_server.h"
#include "gridsync/client/client.h"
#include "gridsync/client/cmd_stats.h"
#include "gridsync/client/multi_state.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define GS_VERSION       "0.1.0"
#define GS_REDIS_VERSION "7.0.0" /* the Redis version whose commands we follow */

/* Options; CONFIG GET/SET and the command line use the same table. */
struct gs_command;
struct gs_origin;
struct gs_held;
struct gs_feature;
struct gs_pubsub;
struct gs_subscriber;
struct gs_slowlog;
struct gs_blocking;
struct gs_metrics;
struct gs_store_stats;
struct gs_scripting;

#define GS_NODE_MAX_FEATURES 4  /* struct gs_feature, below */
#define GS_NODE_MAX_OPTS     96 /* rows of the bound option table, terminator included */

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
    /* Microseconds the event loop polls on after the last input before it
     * sleeps (core_server_limits.busy_poll_us); 0 = sleep at once. */
    int64_t busy_poll_us;
    /* The Prometheus endpoint (node/metrics.h): port 0 = off. */
    int64_t metrics_port;
    char metrics_bind[CORE_OPT_STRLEN];
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
    char cluster_seed[CORE_OPT_STRLEN];  /* host:port of a member to learn from */
    char dir[CORE_OPT_STRLEN];           /* Raft logs and snapshots */
    int64_t cluster_replicas;            /* replication factor */
    int cluster_read_mode;               /* enum gs_read_mode (raft_glue.h) */
    bool cluster_join;                   /* this node is being added (docs) */
    int64_t cluster_snapshot_entries;    /* Raft log entries between snapshots */
    bool cluster_snapshot_fork;          /* build them in a fork()ed child */
    int64_t cluster_inflight_entries;    /* a group's entries in flight at once */
    int64_t cluster_size;                /* nodes to wait for in the registry; 0 = peers given */
    /* DynamoDB registry (gridsync/cluster/registry.h); empty = none. */
    char registry[CORE_OPT_STRLEN]; /* dynamodb://HOST:PORT/TABLE */
    char registry_region[CORE_OPT_STRLEN];
    char registry_access_key[CORE_OPT_STRLEN];
    char registry_secret_key[CORE_OPT_STRLEN];
    int64_t registry_heartbeat; /* ms between two PutItems of this node */
    int64_t registry_ttl;       /* ms a registration lives without a heartbeat */
    /* Where Raft's state is kept: "dir" (under dir) or dynamodb://HOST:PORT/TABLE
     * (gridsync/cluster/raft_store_dynamo.h; the registry's region and
     * credentials). */
    char raft_store[CORE_OPT_STRLEN];
    /* Conversion thresholds of the value types (gridsync/types/value.h). */
    int64_t hash_max_listpack_entries;
    int64_t hash_max_listpack_value;
    int64_t list_max_listpack_size;
    int64_t set_max_intset_entries;
    int64_t zset_max_listpack_entries;
    int64_t zset_max_listpack_value;
    int64_t hll_sparse_max_bytes;
    /* Lua scripting (gridsync/scripting/scripting.h). */
    int64_t busy_reply_threshold; /* ms; a script past it is logged (lua-time-limit) */
    int64_t lua_memory_limit;     /* bytes the Lua heap may hold; 0 = no bound */
};

/* The scripting engine's figures for INFO memory, written by
 * gridsync/scripting after each command that changes them. */
struct gs_script_info {
    uint64_t lua_memory;     /* bytes the Lua heap holds */
    uint64_t scripts_memory; /* the cached scripts' bodies and entries */
    uint64_t scripts;        /* cached scripts */
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
    struct core_option opts[GS_NODE_MAX_OPTS]; /* the option table, bound to cfg */
    uv_timer_t cron;                           /* active expiry, clock resync */
    bool stopping;
    /* Wall clock: read once per cron tick; between ticks derived from the
     * loop's own time, which libuv updates once per iteration. */
    int64_t wall_base_ms;
    uint64_t loop_base_ms;
    int64_t start_wall_ms;
    struct gs_shared shared; /* counters, scratch, limits: what clients share (client.h) */
    const struct gs_command *cmd_index[256]; /* open addressing by name hash */
    char config_file[CORE_OPT_STRLEN];
    struct gs_origin *origin;   /* gs-origin: NULL unless configured */
    struct gs_cluster *cluster; /* NULL unless cluster-enabled */
    struct {
        const struct gs_feature *ops;
        void *self;
    } features[GS_NODE_MAX_FEATURES];
    unsigned n_features;
    const struct gs_feature *const *feature_list; /* as given to gs_node_new (CONFIG REWRITE) */
    struct gs_watch_table watches;                /* WATCHed keys (gridsync/commands/multi.h) */
    struct gs_cmd_stats cmdstats;                 /* INFO commandstats/errorstats/latencystats */
    struct gs_pubsub *pubsub;                     /* channels and subscribers (commands/pubsub.h) */
    /* MONITOR's clients, in arrival order, and the line fed to them
     * (commands/monitor.h) */
    struct gs_client **monitors;
    size_t nmonitors, monitors_cap;
    struct core_buf monitor_line;
    struct gs_slowlog *slowlog;   /* SLOWLOG and LATENCY records (commands/slowlog.h) */
    const char **cmd_names;       /* gs_commands[i].name, for cmdstats' INFO */
    struct gs_metrics *metrics;   /* --metrics-port's endpoint; NULL when off */
    struct gs_blocking *blocking; /* blocked clients and ready keys (client/blocking.h) */
    /* Lua scripting: the engine (NULL until the first script) and its
     * figures; both written by gridsync/scripting. */
    struct gs_scripting *scripting;
    struct gs_script_info script_info;
};

/* ------------------------------------------------------------ features
 *
 * A feature (read-through, cluster mode) is wired into the node by these
 * hooks, as the store's modified-key hook wires transactions into the
 * store: the node calls them at its life-cycle points and names nothing
 * else of the feature. gridsync-server's main decides which features a
 * node has; each one decides from the configuration whether it is on.
 *
 * Every hook but start may be NULL. Hooks run in the order the features
 * were given, and only for a feature whose start set *self. */
struct gs_feature {
    const char *name; /* also the INFO section its info hook writes */
    /* Its options (NULL-name terminated; may be NULL), bound into the
     * node's table by gs_config_bind. */
    const struct gs_option *options;
    /* Start on node n (bound and listening, loop not yet running). Sets
     * *self to the feature's state, or NULL when the configuration leaves
     * it off. Returns 0 or a CORE_E* code (logged); on a failure with
     * *self set, stop and free are still called. */
    int (*start)(struct gs_node *n, void **self);
    /* A command about to run (known, arity and authentication checked):
     * true if the feature took it (replied, or will reply later). */
    bool (*route)(void *self, struct gs_client *c, const struct gs_command *cmd, size_t argc,
                  struct gs_arg *argv);
    /* Each cron tick, at the node's clock. Returns true when the feature
     * expires the node's keyspaces itself (the node then does not). */
    bool (*cron)(void *self, int64_t now_ms);
    void (*client_closed)(void *self, struct gs_client *c);
    /* After a large batch of output: true if the client was closed for
     * output the feature holds for it beyond client-output-buffer-limit. */
    bool (*over_output_limit)(void *self, struct gs_client *c);
    /* A value read through from outside (the origin) for key, to keep with
     * an absolute expiry (-1: none) unless the key is present by then.
     * True if the feature took it (cluster mode proposes it through the
     * key's group, or drops it on a node that does not lead the group);
     * when none does, the node's database 0 keeps it. */
    bool (*fill)(void *self, const char *key, size_t klen, const char *val, size_t vlen,
                 int64_t expire_ms);
    void (*apply_config)(void *self);             /* after CONFIG SET */
    void (*info)(void *self, struct core_buf *b); /* its INFO section, header included */
    /* Its families on the metrics page (node/metrics.h, core/prom.h),
     * each written once, names starting "gridsync_". */
    void (*metrics)(void *self, struct core_buf *b);
    void (*reset_stats)(void *self); /* CONFIG RESETSTAT */
    void (*stop)(void *self);        /* the node is stopping: close handles (the loop still runs) */
    void (*free)(void *self);        /* after the loop has returned */
};

/* One row of an option table, bound by name to its field of struct
 * gs_config: rows may come in any order and from several tables (the
 * node's and each feature's), and a row cannot bind another row's field. */
struct gs_option {
    struct core_option opt; /* opt.ptr stays NULL; gs_config_bind sets it */
    size_t off;             /* offsetof(struct gs_config, field) */
};
#define GS_OPTION(field, name, type, min, max, choices, flags, help)                               \
    {                                                                                              \
        {name, type, NULL, min, max, choices, flags, help}, offsetof(struct gs_config, field)      \
    }

/* The node's view of "now" in Unix ms, refreshed once per loop iteration.
 * For the node's own work (expiry, fills); a command uses c->db->now_ms,
 * which gs_execute sets from this. */
static inline int64_t gs_node_now_ms(const struct gs_node *n)
{
    return n->wall_base_ms + (int64_t)(uv_now(n->loop) - n->loop_base_ms);
}

/* The statistics of every database's store added up (INFO, /metrics). */
void gs_node_store_stats(const struct gs_node *n, struct gs_store_stats *out);

/* Fill cfg with the defaults. */
void gs_config_defaults(struct gs_config *cfg);

/* Write the option table into opts (GS_NODE_MAX_OPTS rows, terminator
 * included): the node's rows, then each feature's (NULL-terminated list,
 * may be NULL), each option pointing at its field of *cfg. */
void gs_config_bind(struct gs_config *cfg, struct core_option *opts,
                    const struct gs_feature *const *features);

/* Apply changed options to the running node (after CONFIG SET). */
void gs_node_apply_config(struct gs_node *n);

/* Parse a maxmemory-clients value into bytes for this maxmemory (see
 * struct gs_config). Returns 0 or CORE_EINVAL. */
int gs_clients_budget_parse(const char *value, int64_t maxmemory, int64_t *bytes);

/* Parse a client-output-buffer-limit value onto *limits (the classes it
 * names change; the others keep their values). Returns 0, or CORE_EINVAL
 * with why written. */
int gs_obuf_limits_parse(const char *value, struct gs_obuf_limit *limits, char *why, size_t len);

/* Parse cfg->output_buf_limit onto cfg->obuf, then rewrite the text in
 * Redis's CONFIG GET form. Returns 0, or CORE_EINVAL (logged; the classes
 * parsed before the error keep their new values). */
int gs_config_apply_obuf(struct gs_config *cfg);

/* Stop accepting, close every client and the node's handles; the loop
 * then returns. Safe from inside a command (SHUTDOWN) and from a signal
 * callback. */
void gs_node_stop(struct gs_node *n);

/* Find a command by name, case-insensitively; NULL if unknown. O(1). */
const struct gs_command *gs_command_lookup(const struct gs_node *n, const char *name, size_t len);

/* Run one request (argv[0] is the command name). */
void gs_execute(struct gs_client *c, size_t argc, struct gs_arg *argv);

/* Call cmd's handler for c once its checks have passed: the one place
 * handlers run from (gs_execute, EXEC, cluster reads), so every call is
 * counted in total_commands_processed and INFO commandstats, timed for
 * latencystats and SLOWLOG, and marked failed when it replied an error. */
void gs_call(struct gs_client *c, const struct gs_command *cmd, size_t argc, struct gs_arg *argv);

/* Command cmd was refused before it ran (rejected_calls in commandstats). */
void gs_command_rejected(struct gs_node *n, const struct gs_command *cmd);

#endif
