/*
 * What every command handler uses: the client it runs for, the client's
 * database context (the keyspace and the command's clock), and the
 * argument and error helpers.
 *
 * The database context is Redis's c->db: a handler reaches data only
 * through c->db, never through the node. Whoever runs a command decides
 * which database and which "now" it runs against:
 *   - the node (gs_execute): the client's selected database, at the
 *     node's clock (read once per loop iteration);
 *   - cluster mode: the database of the Raft group that owns the key's
 *     slot; for an entry applied from the log, a context built for that
 *     entry, at the time the leader stamped into it, so that every replica
 *     computes the same state.
 * Nothing swaps the node's fields to redirect a handler.
 *
 * Invariants:
 *  1. While a handler runs, c->db is not NULL and c->db->store is the only
 *     store it may read or write.
 *  2. c->db->now_ms does not change during one command: every expiry and
 *     TTL decision of the command uses the same instant.
 */
#ifndef GS_CLIENT_H
#define GS_CLIENT_H

#include "gridsync/client/multi_state.h"
#include "gridsync/protocol/resp.h"
#include "gridsync/store/store.h"
#include "gridsync/types/value.h"

#include "core/buf.h"

#include <stdbool.h>
#include <stdint.h>

struct gs_client;

/* The node keeps its databases (the `databases` option, 16 by default; one
 * in cluster mode) in an array indexed by database number (gs_node's dbs). */

/* A database context: one keyspace and the clock of the command running
 * against it. Not owned by the client: the node owns its databases, the
 * cluster those of its Raft groups (and one per applied entry, on the
 * stack, for the duration of the entry). */
struct gs_db {
    struct gs_store *store;         /* the keyspace (never NULL) */
    int64_t now_ms;                 /* "now" of the running command, Unix ms */
    unsigned id;                    /* database number (SELECT's index) */
    const struct gs_miss_ops *miss; /* NULL: no read-through */
    void *miss_ctx;
    struct gs_node *node; /* the node whose database this is; NULL in cluster groups */
    /* Blocking commands (client/blocking.h). A key made ready in this
     * context wakes the clients blocked in ready_db (NULL: in this one):
     * an applied entry's context names its Raft group's database. */
    struct gs_db *ready_db;
    /* Set: the clients blocked in this database are not served by popping
     * here and now, but through block_relay (cluster mode: the pop is an
     * entry of the group's log). It returns GS_BLOCK_PENDING (c stays in
     * its queues until gs_block_pending_done) or GS_BLOCK_SERVED (it
     * replied, e.g. an error). argv[first_key .. + n_keys) are the keys
     * c waits on; key is the one that holds a value now. */
    int (*block_relay)(struct gs_db *db, struct gs_client *c, size_t argc,
                       const struct gs_arg *argv, size_t first_key, size_t n_keys, const char *key,
                       size_t klen);
};

/* Counters every command updates (INFO's total_commands_processed and
 * total_error_replies). */
struct gs_stats {
    uint64_t commands;
    uint64_t error_replies;
    /* Per command and per error code (INFO commandstats, errorstats);
     * NULL where nothing is counted in such detail. */
    struct gs_cmd_stats *detail;
};

/* Node-wide state a command may use beside its database. The node owns
 * it (and keeps it in step with its configuration); every client, and in
 * cluster mode the client of each applied entry, points at it. */
struct gs_shared {
    struct gs_stats stats;
    /* Reusable between commands (KEYS, RENAME, BITOP, INFO text): a
     * command may use it from start to end, never across a wait. A command
     * that grew it far should free it (core_buf_free) when done. */
    struct core_buf scratch;
    int64_t proto_max_bulk_len;   /* the largest string a command may build */
    struct gs_type_limits limits; /* the value types' conversion thresholds (CONFIG) */
    uint64_t rng;                 /* gs_client_random's state; never 0 */
    /* Called after a key of db may have received a value a blocked client
     * waits for: a push made a list longer (LPUSH, LINSERT, the
     * destination of LMOVE...), or a collection arrived under that name
     * (RENAME, MOVE, COPY); key NULL: any key of db may have (SWAPDB).
     * The blocking commands' framework (client/blocking.h) sets it, and
     * serves the clients waiting there once the command has finished.
     * NULL: nobody waits. Call it through gs_key_ready. */
    void (*key_ready)(void *arg, const struct gs_db *db, const char *key, size_t klen);
    void *key_ready_arg;
    /* The node's databases (SELECT, MOVE, SWAPDB, COPY ... DB, FLUSHALL):
     * dbs[0 .. n_dbs). Cluster mode has one and keeps `databases`, the
     * configured count, for Redis Cluster's errors. */
    struct gs_db *dbs;
    unsigned n_dbs;
    int64_t databases;
    bool cluster_mode;
};

/* What a database does on a read miss: read-through (origin/origin_node.h)
 * installs these. Each returns true when it answered the command (now, or
 * later through a held reply) and false when the miss is a plain miss. */
struct gs_miss_ops {
    bool (*get)(void *ctx, struct gs_client *c, const struct gs_arg *key);
    bool (*mget)(void *ctx, struct gs_client *c, size_t argc, struct gs_arg *argv);
};

struct gs_node;
struct gs_client;
struct gs_cmd_stats;
struct gs_subscriber;
struct gs_held;
struct gs_cluster_wait;
struct gs_blocked;
struct core_conn;

/* One connection's state. Created and freed by the node; the fields marked
 * with a feature are owned by that feature (origin/origin_node.h,
 * cluster/cluster.h, commands/multi.h). */
struct gs_client {
    struct gs_node *node;     /* server-wide commands (CONFIG, INFO, CLIENT) */
    struct gs_db *db;         /* the database context (invariant 1) */
    struct gs_shared *shared; /* the node's counters, scratch and limits */
    struct core_conn *conn;   /* NULL for a client that runs a log entry */
    struct gs_writer w;
    struct gs_resp_parser parser;
    bool authenticated;
    char *name; /* CLIENT SETNAME; NULL when unset */
    char *lib_name, *lib_ver;
    const char *last_cmd;
    /* What gs_subcommand_ok found, for gs_call's statistics (Redis 7
     * counts `config|get`, not `config`): the subcommand (a static
     * "container|sub" name) and whether it ran, was refused for its
     * argument count, or was unknown (then nothing is charged). gs_call
     * clears it after each command. */
    const char *sub_stat;
    enum { GS_SUB_NONE, GS_SUB_RAN, GS_SUB_ARITY, GS_SUB_UNKNOWN } sub_verdict;
    /* gs-origin: replies waiting on the origin, oldest first (origin_node.h) */
    struct gs_held *held_head, *held_tail;
    /* Cluster mode: READONLY, and the replicated write this client waits
     * for; its next requests are not parsed until it completes. */
    bool readonly;
    bool asking; /* ASKING: the next keyed command may use a slot being imported */
    struct gs_cluster_wait *wait;
    /* Linearizable reads: the read waits unconsumed for a barrier
     * (replay: on_data leaves it in the input), then runs when parsed
     * again (read_barrier 1 passed, -1 failed). */
    bool replay;
    signed char read_barrier;
    struct gs_multi multi; /* MULTI/EXEC and WATCH state (client/multi_state.h, commands/multi.h) */
    bool denied;           /* protected-mode: answered DENIED at its first request (node.c) */
    struct gs_subscriber *sub; /* Pub/Sub subscriptions; NULL if none ever (commands/pubsub.h) */
    bool no_evict;             /* CLIENT NO-EVICT ON */
    bool monitor;              /* sent MONITOR (commands/monitor.h) */
    /* CLIENT REPLY OFF / SKIP: gs_execute drops the replies of the
     * commands concerned (Redis's CLIENT_REPLY_OFF / _SKIP / _SKIP_NEXT). */
    bool reply_off, reply_skip, reply_skip_next;
    /* Blocked by BLPOP & co., or being resumed after it; NULL otherwise.
     * Owned by client/blocking.h; the node parses no request of the
     * client while it is set. */
    struct gs_blocked *blocked;
    /* Cluster mode: this client runs a log entry on a replica
     * (cluster.c's gs_cl_apply_command), where a command must compute
     * the same effect on every replica: SPOP then picks by the members'
     * contents, not at random (cmd_set.h). */
    bool replica_apply;
};

/* Report to the key_ready hook (struct gs_shared) that key (NULL: any
 * key) of db may now serve a blocked client. */
static inline void gs_key_ready(struct gs_client *c, const struct gs_db *db, const char *key,
                                size_t klen)
{
    if (c->shared->key_ready)
        c->shared->key_ready(c->shared->key_ready_arg, db->ready_db ? db->ready_db : db, key, klen);
}

/* Case-insensitive comparison of an argument with a literal. */
bool gs_arg_is(const struct gs_arg *a, const char *lit);

/* Parse an integer argument as Redis's getLongLongFromObjectOrReply: on
 * failure reply "ERR value is not an integer or out of range" (or msg if
 * not NULL) and return false. */
bool gs_arg_int(struct gs_client *c, const struct gs_arg *a, int64_t *out, const char *msg);

/* Error replies; counted in c->shared->stats.error_replies. msg starts with the
 * error class ("ERR ...", "WRONGTYPE ..."). */
void gs_error(struct gs_client *c, const char *msg);
void gs_errorf(struct gs_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gs_error_syntax(struct gs_client *c);
void gs_error_arity(struct gs_client *c, const char *name);
void gs_error_oom(struct gs_client *c);
void gs_error_wrongtype(struct gs_client *c);

/* A random number (xorshift64* on c->shared->rng) for the random picks of
 * HRANDFIELD, SPOP, SRANDMEMBER, whose replies cannot match Redis's byte
 * for byte anyway. */
uint64_t gs_client_random(struct gs_client *c);

/* The count and the optional word of SRANDMEMBER, HRANDFIELD and
 * ZRANDMEMBER key count [word] (Redis 7.0's srandmemberWithCountCommand,
 * hrandfieldCommand, zrandmemberCommand, same checks in the same order):
 * argv[2] is an integer other than INT64_MIN (Redis's
 * getRangeLongFromObjectOrReply(-LONG_MAX, LONG_MAX)); then argv[3], if
 * any, must be word (WITHVALUES, WITHSCORES; NULL: the command takes none)
 * and, since each pick is then two strings, bounds count to +-INT64_MAX/2.
 * Needs argc >= 3. Sets *count and *with; false after replying the error. */
bool gs_parse_random_count(struct gs_client *c, size_t argc, const struct gs_arg *argv,
                           const char *word, int64_t *count, bool *with);

/* count distinct positions out of [0, size), count < size, every subset
 * as likely (a partial Fisher-Yates shuffle drawing gs_client_random), for
 * the distinct picks of SRANDMEMBER, HRANDFIELD and ZRANDMEMBER: a command
 * then walks its value once in the encoding's order and replies the marked
 * positions. Returns size flags, 1 at the chosen positions, which the
 * caller frees; NULL when out of memory (nothing is replied). */
unsigned char *gs_random_positions(struct gs_client *c, size_t size, size_t count);

/* Look key up in the client's database (flags as gs_store_lookup) and
 * check its type (enum gs_type, gridsync/types/value.h). A key of another
 * type is answered with WRONGTYPE: NULL is returned and *wrong set; NULL
 * with *wrong false means no such key. */
struct gs_entry *gs_lookup_typed(struct gs_client *c, const struct gs_arg *key, int type,
                                 unsigned flags, bool *wrong);

/* Redis's string2ld and ld2string(LD_STR_HUMAN) (commands/cmd_string.c),
 * shared by INCRBYFLOAT and HINCRBYFLOAT. buf/cap:
 * GS_MAX_LONG_DOUBLE_CHARS. */
#define GS_MAX_LONG_DOUBLE_CHARS 5120
bool gs_parse_long_double(const char *p, size_t len, long double *out);
size_t gs_format_long_double(char *buf, size_t cap, long double v);

/* SCAN's cursor argument (Redis's parseScanCursorOrReply); false after
 * replying "ERR invalid cursor". */
bool gs_parse_scan_cursor(struct gs_client *c, const struct gs_arg *a, uint64_t *out);

/* The options after the cursor of SCAN, HSCAN, SSCAN and ZSCAN (Redis
 * 7.0's scanGenericCommand, step 1, left to right): COUNT n with n >= 1,
 * MATCH pattern, and for the key space's SCAN only TYPE name. Anything
 * else, or an option without its value, is "ERR syntax error". */
struct gs_scan_opts {
    int64_t count;                /* COUNT; 10 without */
    const struct gs_arg *pattern; /* MATCH (into argv); NULL without, or for "*" */
    int type;                     /* TYPE: a GS_TYPE_*; -1: any type */
    bool type_none;               /* TYPE names no type of ours: nothing matches (as Redis) */
};

/* Parse argv[first .. argc) into *opts; with_type: TYPE is an option (the
 * key space's SCAN). opts->pattern points into argv. False after replying
 * the error. */
bool gs_parse_scan_opts(struct gs_client *c, size_t argc, const struct gs_arg *argv, size_t first,
                        bool with_type, struct gs_scan_opts *opts);

#endif
