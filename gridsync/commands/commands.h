/*
 * The command table's types and every handler, by family. A handler runs
 * for a client (gridsync/client/client.h): it reads and writes data only
 * through c->db, replies through c->w and never blocks. The table itself
 * is node/commands.c; the dispatcher (gs_execute) is the node's.
 *
 * A new family adds its cmd_<family>.c here, declares its handlers below
 * and adds its rows to the table.
 */
#ifndef GS_COMMANDS_H
#define GS_COMMANDS_H

#include "gridsync/client/client.h"

#include <stddef.h>

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
    /* Keys after a count (Redis's "keynum" key spec; gs_command_keys): the
     * first/last/step triple gives only the keys before the count. */
    GS_CMD_MOVABLEKEYS = 1 << 9,
    GS_CMD_BLOCKING = 1 << 10, /* may block its client (client/blocking.h) */
    /* Not fed to MONITOR by gs_call: the handler feeds it itself, before
     * the commands it runs (EVAL and its script's commands). */
    GS_CMD_SKIP_MONITOR = 1 << 11,
    /* Its keys may be none (COMMAND GETKEYS answers an empty array). */
    GS_CMD_NO_MANDATORY_KEYS = 1 << 12,
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

/* The argv positions of a command line's keys, as Redis's key specs give
 * them (COMMAND GETKEYS, cluster routing): the first/last/step range,
 * then for a GS_CMD_MOVABLEKEYS command the keys its count announces.
 * Up to cap positions go to pos. Returns the number of keys, or -1 when
 * the count is not a number or announces more keys than there are
 * arguments (Redis's "Invalid arguments specified for command"). */
long gs_command_keys(const struct gs_command *cmd, size_t argc, const struct gs_arg *argv,
                     size_t *pos, size_t cap);

/* Handlers, by family. */
gs_cmd_fn gs_cmd_get, gs_cmd_set, gs_cmd_setnx, gs_cmd_setex, gs_cmd_psetex, gs_cmd_getset,
    gs_cmd_getdel, gs_cmd_getex, gs_cmd_mget, gs_cmd_mset, gs_cmd_msetnx, gs_cmd_incr, gs_cmd_decr,
    gs_cmd_incrby, gs_cmd_decrby, gs_cmd_incrbyfloat, gs_cmd_append, gs_cmd_strlen, gs_cmd_getrange,
    gs_cmd_lcs, gs_cmd_setrange;
gs_cmd_fn gs_cmd_expire, gs_cmd_pexpire, gs_cmd_expireat, gs_cmd_pexpireat, gs_cmd_ttl, gs_cmd_pttl,
    gs_cmd_persist;
gs_cmd_fn gs_cmd_expiretime, gs_cmd_pexpiretime, gs_cmd_touch, gs_cmd_time;
gs_cmd_fn gs_cmd_getbit, gs_cmd_setbit, gs_cmd_bitcount, gs_cmd_bitpos, gs_cmd_bitop,
    gs_cmd_bitfield, gs_cmd_bitfield_ro;
gs_cmd_fn gs_cmd_del, gs_cmd_unlink, gs_cmd_exists, gs_cmd_type, gs_cmd_rename, gs_cmd_renamenx,
    gs_cmd_copy, gs_cmd_keys, gs_cmd_scan, gs_cmd_randomkey, gs_cmd_dbsize, gs_cmd_flushdb,
    gs_cmd_select;
gs_cmd_fn gs_cmd_cluster, gs_cmd_readonly, gs_cmd_readwrite, gs_cmd_asking;
gs_cmd_fn gs_cmd_wait;
gs_cmd_fn gs_cmd_ping, gs_cmd_echo, gs_cmd_info, gs_cmd_config, gs_cmd_command, gs_cmd_auth,
    gs_cmd_hello, gs_cmd_quit, gs_cmd_reset, gs_cmd_shutdown, gs_cmd_client;
gs_cmd_fn gs_cmd_hset, gs_cmd_hmset, gs_cmd_hsetnx, gs_cmd_hget, gs_cmd_hmget, gs_cmd_hdel,
    gs_cmd_hlen, gs_cmd_hstrlen, gs_cmd_hexists, gs_cmd_hgetall, gs_cmd_hkeys, gs_cmd_hvals,
    gs_cmd_hincrby, gs_cmd_hincrbyfloat, gs_cmd_hrandfield, gs_cmd_hscan; /* cmd_hash.c */
gs_cmd_fn gs_cmd_lpush, gs_cmd_rpush, gs_cmd_lpushx, gs_cmd_rpushx, gs_cmd_linsert, gs_cmd_llen,
    gs_cmd_lindex, gs_cmd_lset, gs_cmd_lrange, gs_cmd_ltrim, gs_cmd_lrem, gs_cmd_lpos, gs_cmd_lpop,
    gs_cmd_rpop, gs_cmd_lmove, gs_cmd_rpoplpush, gs_cmd_lmpop; /* cmd_list.c */
gs_cmd_fn gs_cmd_blpop, gs_cmd_brpop, gs_cmd_blmpop, gs_cmd_blmove,
    gs_cmd_brpoplpush; /* cmd_list_block.c */
gs_cmd_fn gs_cmd_sadd, gs_cmd_srem, gs_cmd_smembers, gs_cmd_sismember, gs_cmd_smismember,
    gs_cmd_scard, gs_cmd_spop, gs_cmd_srandmember, gs_cmd_smove, gs_cmd_sinter, gs_cmd_sunion,
    gs_cmd_sdiff, gs_cmd_sinterstore, gs_cmd_sunionstore, gs_cmd_sdiffstore, gs_cmd_sintercard,
    gs_cmd_sscan; /* cmd_set.c */
gs_cmd_fn gs_cmd_zadd, gs_cmd_zincrby, gs_cmd_zrem, gs_cmd_zcard, gs_cmd_zscore, gs_cmd_zmscore,
    gs_cmd_zrank, gs_cmd_zrevrank, gs_cmd_zcount, gs_cmd_zlexcount, gs_cmd_zrange,
    gs_cmd_zrangestore, gs_cmd_zrevrange, gs_cmd_zrangebyscore, gs_cmd_zrevrangebyscore,
    gs_cmd_zrangebylex, gs_cmd_zrevrangebylex, gs_cmd_zremrangebyrank, gs_cmd_zremrangebyscore,
    gs_cmd_zremrangebylex, gs_cmd_zpopmin, gs_cmd_zpopmax, gs_cmd_zmpop, gs_cmd_zrandmember,
    gs_cmd_zunion, gs_cmd_zinter, gs_cmd_zdiff, gs_cmd_zunionstore, gs_cmd_zinterstore,
    gs_cmd_zdiffstore, gs_cmd_zintercard, gs_cmd_zscan, gs_cmd_bzpopmin, gs_cmd_bzpopmax,
    gs_cmd_bzmpop;                                                      /* cmd_zset.c */
gs_cmd_fn gs_cmd_pfadd, gs_cmd_pfcount, gs_cmd_pfmerge, gs_cmd_pfdebug; /* cmd_hll.c */
gs_cmd_fn gs_cmd_sort, gs_cmd_sort_ro;                                  /* cmd_sort.c */
gs_cmd_fn gs_cmd_dump, gs_cmd_restore;                                  /* cmd_dump.c */

/* SORT's keys (Redis's sortGetKeys): argv[1] and the last STORE's
 * destination; as gs_command_keys. */
long gs_sort_keys(size_t argc, const struct gs_arg *argv, size_t *pos, size_t cap);
gs_cmd_fn gs_cmd_object, gs_cmd_memory; /* cmd_object.c */
gs_cmd_fn gs_cmd_multi, gs_cmd_exec, gs_cmd_discard, gs_cmd_watch, gs_cmd_unwatch; /* multi.c */
gs_cmd_fn gs_cmd_flushall, gs_cmd_move, gs_cmd_swapdb;                             /* cmd_keys.c */
gs_cmd_fn gs_cmd_subscribe, gs_cmd_unsubscribe, gs_cmd_psubscribe, gs_cmd_punsubscribe,
    gs_cmd_ssubscribe, gs_cmd_sunsubscribe, gs_cmd_publish, gs_cmd_spublish,
    gs_cmd_pubsub;                        /* cmd_pubsub.c */
gs_cmd_fn gs_cmd_slowlog, gs_cmd_latency; /* cmd_slowlog.c */
gs_cmd_fn gs_cmd_gridsync;                /* cluster/cmd_cluster.c */
gs_cmd_fn gs_cmd_eval, gs_cmd_evalsha, gs_cmd_eval_ro, gs_cmd_evalsha_ro,
    gs_cmd_script; /* scripting/scripting.c */

#endif
