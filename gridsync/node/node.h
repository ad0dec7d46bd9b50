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
#include "gridsync/protocol/resp.h"
#include "gridsync/store/store.h"
#include "gridsync/types/value.h"

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define GS_VERSION       "0.1.0"
#define GS_REDIS_VERSION "7.0.0" /* the Redis version whose commands we follow */

/* Options; CONFIG GET/SET and the command line use the same table. */
struct gs_command;
struct gs_origin;
struct gs_held;

#define GS_NODE_NOPTS 33 /* options + terminator (7 gs-origin's, 7 cluster's, 4 types') */

struct gs_config {
    int64_t port;
    char bind[CORE_OPT_STRLEN];
    int64_t maxmemory;
    int maxmemory_policy; /* enum gs_evict_policy */
    int64_t maxclients;
    char requirepass[CORE_OPT_STRLEN];
    int64_t query_buf_limit;
    int64_t output_buf_limit;
    int64_t proto_max_bulk_len;
    int64_t timeout;
    int64_t hz;
    int loglevel; /* enum core_log_level */
    char save[CORE_OPT_STRLEN];
    bool appendonly;
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
    /* Conversion thresholds of the value types (gridsync/types/value.h). */
    int64_t hash_max_listpack_entries;
    int64_t hash_max_listpack_value;
    int64_t list_max_listpack_size;
    int64_t set_max_intset_entries;
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
    uint64_t rng;                  /* HRANDFIELD & co.; seeded on first use */
    /* Called after a push made key's list non-empty or longer (LPUSH,
     * LINSERT, LMOVE's destination...): the blocking commands' owner sets
     * it to serve clients waiting on that key. NULL: nobody waits. */
    void (*key_ready)(void *arg, const char *key, size_t klen);
    void *key_ready_arg;
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

/* Write the option table (GS_NODE_NOPTS entries including the terminator)
 * into opts, each option pointing into *cfg. */
void gs_config_bind(struct gs_config *cfg, struct core_option *opts);

/* The node's view of "now" in Unix ms, refreshed once per loop iteration.
 * For the node's own work (expiry, fills); a command uses c->db->now_ms,
 * which gs_execute sets from this. */
/* The value types' conversion thresholds as configured (CONFIG SET
 * changes them for collections created or grown afterwards). */
static inline struct gs_type_limits gs_node_type_limits(const struct gs_node *n)
{
    struct gs_type_limits l = {n->cfg.hash_max_listpack_entries, n->cfg.hash_max_listpack_value,
                               n->cfg.list_max_listpack_size, n->cfg.set_max_intset_entries};
    return l;
}

/* xorshift64* on the node's state, for the random picks of HRANDFIELD,
 * SPOP, SRANDMEMBER (their replies cannot match Redis's byte for byte). */
static inline uint64_t gs_node_random(struct gs_node *n)
{
    if (n->rng == 0)
        n->rng = (uint64_t)(uintptr_t)n * 0x9e3779b97f4a7c15ull | 1;
    n->rng ^= n->rng >> 12;
    n->rng ^= n->rng << 25;
    n->rng ^= n->rng >> 27;
    return n->rng * 0x2545f4914f6cdd1dull;
}

static inline int64_t gs_node_now_ms(const struct gs_node *n)
{
    return n->wall_base_ms + (int64_t)(uv_now(n->loop) - n->loop_base_ms);
}

/* Apply changed options to the running node (after CONFIG SET). */
void gs_node_apply_config(struct gs_node *n);

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

/* Build the node's command index (at start). */
void gs_command_index_build(struct gs_node *n);

/* Find a command by name, case-insensitively; NULL if unknown. O(1). */
const struct gs_command *gs_command_lookup(const struct gs_node *n, const char *name, size_t len);

/* Run one request (argv[0] is the command name). */
void gs_execute(struct gs_client *c, size_t argc, struct gs_arg *argv);

/* Handlers, by family. */
gs_cmd_fn gs_cmd_get, gs_cmd_set, gs_cmd_setnx, gs_cmd_setex, gs_cmd_psetex, gs_cmd_getset,
    gs_cmd_getdel, gs_cmd_getex, gs_cmd_mget, gs_cmd_mset, gs_cmd_msetnx, gs_cmd_incr, gs_cmd_decr,
    gs_cmd_incrby, gs_cmd_decrby, gs_cmd_incrbyfloat, gs_cmd_append, gs_cmd_strlen, gs_cmd_getrange,
    gs_cmd_setrange;
gs_cmd_fn gs_cmd_expire, gs_cmd_pexpire, gs_cmd_expireat, gs_cmd_pexpireat, gs_cmd_ttl, gs_cmd_pttl,
    gs_cmd_persist;
gs_cmd_fn gs_cmd_expiretime, gs_cmd_pexpiretime, gs_cmd_touch, gs_cmd_time;
gs_cmd_fn gs_cmd_getbit, gs_cmd_setbit, gs_cmd_bitcount, gs_cmd_bitpos, gs_cmd_bitop;
gs_cmd_fn gs_cmd_del, gs_cmd_unlink, gs_cmd_exists, gs_cmd_type, gs_cmd_rename, gs_cmd_renamenx,
    gs_cmd_copy, gs_cmd_keys, gs_cmd_scan, gs_cmd_randomkey, gs_cmd_dbsize, gs_cmd_flushdb,
    gs_cmd_select;
gs_cmd_fn gs_cmd_cluster, gs_cmd_readonly, gs_cmd_readwrite, gs_cmd_asking;
gs_cmd_fn gs_cmd_ping, gs_cmd_echo, gs_cmd_info, gs_cmd_config, gs_cmd_command, gs_cmd_auth,
    gs_cmd_hello, gs_cmd_quit, gs_cmd_shutdown, gs_cmd_client;
gs_cmd_fn gs_cmd_hset, gs_cmd_hmset, gs_cmd_hsetnx, gs_cmd_hget, gs_cmd_hmget, gs_cmd_hdel,
    gs_cmd_hlen, gs_cmd_hstrlen, gs_cmd_hexists, gs_cmd_hgetall, gs_cmd_hkeys, gs_cmd_hvals,
    gs_cmd_hincrby, gs_cmd_hincrbyfloat, gs_cmd_hrandfield, gs_cmd_hscan; /* cmd_hash.c */
gs_cmd_fn gs_cmd_lpush, gs_cmd_rpush, gs_cmd_lpushx, gs_cmd_rpushx, gs_cmd_linsert, gs_cmd_llen,
    gs_cmd_lindex, gs_cmd_lset, gs_cmd_lrange, gs_cmd_ltrim, gs_cmd_lrem, gs_cmd_lpos, gs_cmd_lpop,
    gs_cmd_rpop, gs_cmd_lmove, gs_cmd_rpoplpush, gs_cmd_lmpop; /* cmd_list.c */
gs_cmd_fn gs_cmd_sadd, gs_cmd_srem, gs_cmd_smembers, gs_cmd_sismember, gs_cmd_smismember,
    gs_cmd_scard, gs_cmd_spop, gs_cmd_srandmember, gs_cmd_smove, gs_cmd_sinter, gs_cmd_sunion,
    gs_cmd_sdiff, gs_cmd_sinterstore, gs_cmd_sunionstore, gs_cmd_sdiffstore, gs_cmd_sintercard,
    gs_cmd_sscan;                       /* cmd_set.c */
gs_cmd_fn gs_cmd_object, gs_cmd_memory; /* cmd_server.c */
gs_cmd_fn gs_cmd_multi, gs_cmd_exec, gs_cmd_discard, gs_cmd_watch, gs_cmd_unwatch; /* multi.c */

#endif
