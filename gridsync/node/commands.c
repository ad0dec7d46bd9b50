/*
 * The command table: name, arity, flags, handler, key positions and the
 * documentation COMMAND INFO/DOCS report. Arity and flags follow Redis
 * 7.0's commands.def, so clients that read COMMAND see the same shapes.
 */
#include "gridsync/commands/commands.h"
#include "gridsync/commands/monitor.h"

#define R  GS_CMD_READONLY
#define W  GS_CMD_WRITE
#define M  GS_CMD_DENYOOM
#define F  GS_CMD_FAST
#define NA GS_CMD_NOAUTH
#define A  GS_CMD_ADMIN
#define L  GS_CMD_LOADING
#define S  GS_CMD_STALE
#define NS GS_CMD_NOSCRIPT
#define B  GS_CMD_BLOCKING
#define MK GS_CMD_MOVABLEKEYS
#define SM GS_CMD_SKIP_MONITOR
#define NK GS_CMD_NO_MANDATORY_KEYS

/* clang-format off */
const struct gs_command gs_commands[] = {
    /* strings */
    {"get", 2, R | F, gs_cmd_get, 1, 1, 1, "string", "Get the value of a key", "1.0.0"},
    {"set", -3, W | M, gs_cmd_set, 1, 1, 1, "string", "Set the string value of a key", "1.0.0"},
    {"setnx", 3, W | M | F, gs_cmd_setnx, 1, 1, 1, "string", "Set the value of a key, only if the key does not exist", "1.0.0"},
    {"setex", 4, W | M, gs_cmd_setex, 1, 1, 1, "string", "Set the value and expiration of a key", "2.0.0"},
    {"psetex", 4, W | M, gs_cmd_psetex, 1, 1, 1, "string", "Set the value and expiration in milliseconds of a key", "2.6.0"},
    {"getset", 3, W | M | F, gs_cmd_getset, 1, 1, 1, "string", "Set the string value of a key and return its old value", "1.0.0"},
    {"getdel", 2, W | F, gs_cmd_getdel, 1, 1, 1, "string", "Get the value of a key and delete the key", "6.2.0"},
    {"getex", -2, W | F, gs_cmd_getex, 1, 1, 1, "string", "Get the value of a key and optionally set its expiration", "6.2.0"},
    {"mget", -2, R | F, gs_cmd_mget, 1, -1, 1, "string", "Get the values of all the given keys", "1.0.0"},
    {"mset", -3, W | M, gs_cmd_mset, 1, -1, 2, "string", "Set multiple keys to multiple values", "1.0.1"},
    {"msetnx", -3, W | M, gs_cmd_msetnx, 1, -1, 2, "string", "Set multiple keys to multiple values, only if none of the keys exist", "1.0.1"},
    {"incr", 2, W | M | F, gs_cmd_incr, 1, 1, 1, "string", "Increment the integer value of a key by one", "1.0.0"},
    {"decr", 2, W | M | F, gs_cmd_decr, 1, 1, 1, "string", "Decrement the integer value of a key by one", "1.0.0"},
    {"incrby", 3, W | M | F, gs_cmd_incrby, 1, 1, 1, "string", "Increment the integer value of a key by the given amount", "1.0.0"},
    {"decrby", 3, W | M | F, gs_cmd_decrby, 1, 1, 1, "string", "Decrement the integer value of a key by the given number", "1.0.0"},
    {"incrbyfloat", 3, W | M | F, gs_cmd_incrbyfloat, 1, 1, 1, "string", "Increment the float value of a key by the given amount", "2.6.0"},
    {"append", 3, W | M | F, gs_cmd_append, 1, 1, 1, "string", "Append a value to a key", "2.0.0"},
    {"strlen", 2, R | F, gs_cmd_strlen, 1, 1, 1, "string", "Get the length of the value stored in a key", "2.2.0"},
    {"getrange", 4, R, gs_cmd_getrange, 1, 1, 1, "string", "Get a substring of the string stored at a key", "2.4.0"},
    {"lcs", -3, R, gs_cmd_lcs, 1, 2, 1, "string", "Find longest common substring", "7.0.0"},
    {"substr", 4, R, gs_cmd_getrange, 1, 1, 1, "string", "Get a substring of the string stored at a key", "1.0.0"},
    {"setrange", 4, W | M, gs_cmd_setrange, 1, 1, 1, "string", "Overwrite part of a string at key starting at the specified offset", "2.2.0"},
    /* bitmaps (cmd_bits.c) */
    {"getbit", 3, R | F, gs_cmd_getbit, 1, 1, 1, "bitmap", "Returns the bit value at offset in the string value stored at key", "2.2.0"},
    {"setbit", 4, W | M, gs_cmd_setbit, 1, 1, 1, "bitmap", "Sets or clears the bit at offset in the string value stored at key", "2.2.0"},
    {"bitcount", -2, R, gs_cmd_bitcount, 1, 1, 1, "bitmap", "Count set bits in a string", "2.6.0"},
    {"bitpos", -3, R, gs_cmd_bitpos, 1, 1, 1, "bitmap", "Find first bit set or clear in a string", "2.8.7"},
    {"bitop", -4, W | M, gs_cmd_bitop, 2, -1, 1, "bitmap", "Perform bitwise operations between strings", "2.6.0"},
    {"bitfield", -2, W | M, gs_cmd_bitfield, 1, 1, 1, "bitmap", "Perform arbitrary bitfield integer operations on strings", "3.2.0"},
    {"bitfield_ro", -2, R | F, gs_cmd_bitfield_ro, 1, 1, 1, "bitmap", "Perform arbitrary bitfield integer operations on strings. Read-only variant of BITFIELD", "6.0.0"},
    /* expiry */
    {"expire", -3, W | F, gs_cmd_expire, 1, 1, 1, "generic", "Set a key's time to live in seconds", "1.0.0"},
    {"pexpire", -3, W | F, gs_cmd_pexpire, 1, 1, 1, "generic", "Set a key's time to live in milliseconds", "2.6.0"},
    {"expireat", -3, W | F, gs_cmd_expireat, 1, 1, 1, "generic", "Set the expiration for a key as a UNIX timestamp", "1.2.0"},
    {"pexpireat", -3, W | F, gs_cmd_pexpireat, 1, 1, 1, "generic", "Set the expiration for a key as a UNIX timestamp specified in milliseconds", "2.6.0"},
    {"ttl", 2, R | F, gs_cmd_ttl, 1, 1, 1, "generic", "Get the time to live for a key in seconds", "1.0.0"},
    {"pttl", 2, R | F, gs_cmd_pttl, 1, 1, 1, "generic", "Get the time to live for a key in milliseconds", "2.6.0"},
    {"persist", 2, W | F, gs_cmd_persist, 1, 1, 1, "generic", "Remove the expiration from a key", "2.2.0"},
    {"expiretime", 2, R | F, gs_cmd_expiretime, 1, 1, 1, "generic", "Get the expiration Unix timestamp for a key", "7.0.0"},
    {"pexpiretime", 2, R | F, gs_cmd_pexpiretime, 1, 1, 1, "generic", "Get the expiration Unix timestamp for a key in milliseconds", "7.0.0"},
    /* key space */
    {"del", -2, W, gs_cmd_del, 1, -1, 1, "generic", "Delete a key", "1.0.0"},
    {"unlink", -2, W | F, gs_cmd_unlink, 1, -1, 1, "generic", "Delete a key asynchronously in another thread. Otherwise it is just as DEL, but non blocking.", "4.0.0"},
    {"exists", -2, R | F, gs_cmd_exists, 1, -1, 1, "generic", "Determine if a key exists", "1.0.0"},
    {"touch", -2, R | F, gs_cmd_touch, 1, -1, 1, "generic", "Alters the last access time of a key(s). Returns the number of existing keys specified.", "3.2.1"},
    {"type", 2, R | F, gs_cmd_type, 1, 1, 1, "generic", "Determine the type stored at key", "1.0.0"},
    {"rename", 3, W, gs_cmd_rename, 1, 2, 1, "generic", "Rename a key", "1.0.0"},
    {"renamenx", 3, W | F, gs_cmd_renamenx, 1, 2, 1, "generic", "Rename a key, only if the new key does not exist", "1.0.0"},
    {"copy", -3, W | M, gs_cmd_copy, 1, 2, 1, "generic", "Copy a key", "6.2.0"},
    {"keys", 2, R, gs_cmd_keys, 0, 0, 0, "generic", "Find all keys matching the given pattern", "1.0.0"},
    {"scan", -2, R, gs_cmd_scan, 0, 0, 0, "generic", "Incrementally iterate the keys space", "2.8.0"},
    {"randomkey", 1, R, gs_cmd_randomkey, 0, 0, 0, "generic", "Return a random key from the keyspace", "1.0.0"},
    {"dump", 2, R, gs_cmd_dump, 1, 1, 1, "generic", "Return a serialized version of the value stored at the specified key.", "2.6.0"},
    {"restore", -4, W | M, gs_cmd_restore, 1, 1, 1, "generic", "Create a key using the provided serialized value, previously obtained using DUMP.", "2.6.0"},
    {"restore-asking", -4, W | M, gs_cmd_restore, 1, 1, 1, "server", "An internal command for migrating keys in a cluster", "3.0.0"},
    {"sort", -2, W | M | MK, gs_cmd_sort, 1, 1, 1, "generic", "Sort the elements in a list, set or sorted set", "1.0.0"},
    {"sort_ro", -2, R, gs_cmd_sort_ro, 1, 1, 1, "generic", "Sort the elements in a list, set or sorted set. Read-only variant of SORT.", "7.0.0"},
    {"dbsize", 1, R | F, gs_cmd_dbsize, 0, 0, 0, "server", "Return the number of keys in the selected database", "1.0.0"},
    {"flushdb", -1, W, gs_cmd_flushdb, 0, 0, 0, "server", "Remove all keys from the current database", "1.0.0"},
    {"flushall", -1, W, gs_cmd_flushall, 0, 0, 0, "server", "Remove all keys from all databases", "1.0.0"},
    {"move", 3, W | F, gs_cmd_move, 1, 1, 1, "generic", "Move a key to another database", "1.0.0"},
    {"swapdb", 3, W | F, gs_cmd_swapdb, 0, 0, 0, "server", "Swaps two Redis databases", "4.0.0"},
    {"select", 2, L | S | F, gs_cmd_select, 0, 0, 0, "connection", "Change the selected database for the current connection", "1.0.0"},
    /* hashes (cmd_hash.c) */
    {"hset", -4, W | M | F, gs_cmd_hset, 1, 1, 1, "hash", "Set the string value of a hash field", "2.0.0"},
    {"hmset", -4, W | M | F, gs_cmd_hmset, 1, 1, 1, "hash", "Set multiple hash fields to multiple values", "2.0.0"},
    {"hsetnx", 4, W | M | F, gs_cmd_hsetnx, 1, 1, 1, "hash", "Set the value of a hash field, only if the field does not exist", "2.0.0"},
    {"hget", 3, R | F, gs_cmd_hget, 1, 1, 1, "hash", "Get the value of a hash field", "2.0.0"},
    {"hmget", -3, R | F, gs_cmd_hmget, 1, 1, 1, "hash", "Get the values of all the given hash fields", "2.0.0"},
    {"hdel", -3, W | F, gs_cmd_hdel, 1, 1, 1, "hash", "Delete one or more hash fields", "2.0.0"},
    {"hlen", 2, R | F, gs_cmd_hlen, 1, 1, 1, "hash", "Get the number of fields in a hash", "2.0.0"},
    {"hstrlen", 3, R | F, gs_cmd_hstrlen, 1, 1, 1, "hash", "Get the length of the value of a hash field", "3.2.0"},
    {"hexists", 3, R | F, gs_cmd_hexists, 1, 1, 1, "hash", "Determine if a hash field exists", "2.0.0"},
    {"hgetall", 2, R, gs_cmd_hgetall, 1, 1, 1, "hash", "Get all the fields and values in a hash", "2.0.0"},
    {"hkeys", 2, R, gs_cmd_hkeys, 1, 1, 1, "hash", "Get all the fields in a hash", "2.0.0"},
    {"hvals", 2, R, gs_cmd_hvals, 1, 1, 1, "hash", "Get all the values in a hash", "2.0.0"},
    {"hincrby", 4, W | M | F, gs_cmd_hincrby, 1, 1, 1, "hash", "Increment the integer value of a hash field by the given number", "2.0.0"},
    {"hincrbyfloat", 4, W | M | F, gs_cmd_hincrbyfloat, 1, 1, 1, "hash", "Increment the float value of a hash field by the given amount", "2.6.0"},
    {"hrandfield", -2, R, gs_cmd_hrandfield, 1, 1, 1, "hash", "Get one or multiple random fields from a hash", "6.2.0"},
    {"hscan", -3, R, gs_cmd_hscan, 1, 1, 1, "hash", "Incrementally iterate hash fields and associated values", "2.8.0"},
    /* lists (cmd_list.c) */
    {"lpush", -3, W | M | F, gs_cmd_lpush, 1, 1, 1, "list", "Prepend one or multiple elements to a list", "1.0.0"},
    {"rpush", -3, W | M | F, gs_cmd_rpush, 1, 1, 1, "list", "Append one or multiple elements to a list", "1.0.0"},
    {"lpushx", -3, W | M | F, gs_cmd_lpushx, 1, 1, 1, "list", "Prepend an element to a list, only if the list exists", "2.2.0"},
    {"rpushx", -3, W | M | F, gs_cmd_rpushx, 1, 1, 1, "list", "Append an element to a list, only if the list exists", "2.2.0"},
    {"linsert", 5, W | M, gs_cmd_linsert, 1, 1, 1, "list", "Insert an element before or after another element in a list", "2.2.0"},
    {"llen", 2, R | F, gs_cmd_llen, 1, 1, 1, "list", "Get the length of a list", "1.0.0"},
    {"lindex", 3, R, gs_cmd_lindex, 1, 1, 1, "list", "Get an element from a list by its index", "1.0.0"},
    {"lset", 4, W | M, gs_cmd_lset, 1, 1, 1, "list", "Set the value of an element in a list by its index", "1.0.0"},
    {"lrange", 4, R, gs_cmd_lrange, 1, 1, 1, "list", "Get a range of elements from a list", "1.0.0"},
    {"ltrim", 4, W, gs_cmd_ltrim, 1, 1, 1, "list", "Trim a list to the specified range", "1.0.0"},
    {"lrem", 4, W, gs_cmd_lrem, 1, 1, 1, "list", "Remove elements from a list", "1.0.0"},
    {"lpos", -3, R, gs_cmd_lpos, 1, 1, 1, "list", "Return the index of matching elements on a list", "6.0.6"},
    {"lpop", -2, W | F, gs_cmd_lpop, 1, 1, 1, "list", "Remove and get the first elements in a list", "1.0.0"},
    {"rpop", -2, W | F, gs_cmd_rpop, 1, 1, 1, "list", "Remove and get the last elements in a list", "1.0.0"},
    {"lmove", 5, W | M, gs_cmd_lmove, 1, 2, 1, "list", "Pop an element from a list, push it to another list and return it", "6.2.0"},
    {"rpoplpush", 3, W | M, gs_cmd_rpoplpush, 1, 2, 1, "list", "Remove the last element in a list, prepend it to another list and return it", "1.2.0"},
    {"lmpop", -4, W | MK, gs_cmd_lmpop, 0, 0, 0, "list", "Pop elements from a list", "7.0.0"},
    /* blocking lists (cmd_list_block.c) */
    {"blpop", -3, W | NS | B, gs_cmd_blpop, 1, -2, 1, "list", "Remove and get the first element in a list, or block until one is available", "2.0.0"},
    {"brpop", -3, W | NS | B, gs_cmd_brpop, 1, -2, 1, "list", "Remove and get the last element in a list, or block until one is available", "2.0.0"},
    {"brpoplpush", 4, W | M | NS | B, gs_cmd_brpoplpush, 1, 2, 1, "list", "Pop an element from a list, push it to another list and return it; or block until one is available", "2.2.0"},
    {"blmove", 6, W | M | NS | B, gs_cmd_blmove, 1, 2, 1, "list", "Pop an element from a list, push it to another list and return it; or block until one is available", "6.2.0"},
    {"blmpop", -5, W | NS | B | MK, gs_cmd_blmpop, 0, 0, 0, "list", "Pop elements from a list, or block until one is available", "7.0.0"},
    /* sets (cmd_set.c) */
    {"sadd", -3, W | M | F, gs_cmd_sadd, 1, 1, 1, "set", "Add one or more members to a set", "1.0.0"},
    {"srem", -3, W | F, gs_cmd_srem, 1, 1, 1, "set", "Remove one or more members from a set", "1.0.0"},
    {"smembers", 2, R, gs_cmd_smembers, 1, 1, 1, "set", "Get all the members in a set", "1.0.0"},
    {"sismember", 3, R | F, gs_cmd_sismember, 1, 1, 1, "set", "Determine if a given value is a member of a set", "1.0.0"},
    {"smismember", -3, R | F, gs_cmd_smismember, 1, 1, 1, "set", "Returns the membership associated with the given elements for a set", "6.2.0"},
    {"scard", 2, R | F, gs_cmd_scard, 1, 1, 1, "set", "Get the number of members in a set", "1.0.0"},
    {"spop", -2, W | F, gs_cmd_spop, 1, 1, 1, "set", "Remove and return one or multiple random members from a set", "1.0.0"},
    {"srandmember", -2, R, gs_cmd_srandmember, 1, 1, 1, "set", "Get one or multiple random members from a set", "1.0.0"},
    {"smove", 4, W | F, gs_cmd_smove, 1, 2, 1, "set", "Move a member from one set to another", "1.0.0"},
    {"sinter", -2, R, gs_cmd_sinter, 1, -1, 1, "set", "Intersect multiple sets", "1.0.0"},
    {"sunion", -2, R, gs_cmd_sunion, 1, -1, 1, "set", "Add multiple sets", "1.0.0"},
    {"sdiff", -2, R, gs_cmd_sdiff, 1, -1, 1, "set", "Subtract multiple sets", "1.0.0"},
    {"sinterstore", -3, W | M, gs_cmd_sinterstore, 1, -1, 1, "set", "Intersect multiple sets and store the resulting set in a key", "1.0.0"},
    {"sunionstore", -3, W | M, gs_cmd_sunionstore, 1, -1, 1, "set", "Add multiple sets and store the resulting set in a key", "1.0.0"},
    {"sdiffstore", -3, W | M, gs_cmd_sdiffstore, 1, -1, 1, "set", "Subtract multiple sets and store the resulting set in a key", "1.0.0"},
    {"sintercard", -3, R | MK, gs_cmd_sintercard, 0, 0, 0, "set", "Intersect multiple sets and return the cardinality of the result", "7.0.0"},
    {"sscan", -3, R, gs_cmd_sscan, 1, 1, 1, "set", "Incrementally iterate Set elements", "2.6.0"},
    /* sorted sets (cmd_zset.c) */
    {"zadd", -4, W | M | F, gs_cmd_zadd, 1, 1, 1, "sorted-set", "Add one or more members to a sorted set, or update its score if it already exists", "1.2.0"},
    {"zincrby", 4, W | M | F, gs_cmd_zincrby, 1, 1, 1, "sorted-set", "Increment the score of a member in a sorted set", "1.2.0"},
    {"zrem", -3, W | F, gs_cmd_zrem, 1, 1, 1, "sorted-set", "Remove one or more members from a sorted set", "1.2.0"},
    {"zcard", 2, R | F, gs_cmd_zcard, 1, 1, 1, "sorted-set", "Get the number of members in a sorted set", "1.2.0"},
    {"zscore", 3, R | F, gs_cmd_zscore, 1, 1, 1, "sorted-set", "Get the score associated with the given member in a sorted set", "1.2.0"},
    {"zmscore", -3, R | F, gs_cmd_zmscore, 1, 1, 1, "sorted-set", "Get the score associated with the given members in a sorted set", "6.2.0"},
    {"zrank", 3, R | F, gs_cmd_zrank, 1, 1, 1, "sorted-set", "Determine the index of a member in a sorted set", "2.0.0"},
    {"zrevrank", 3, R | F, gs_cmd_zrevrank, 1, 1, 1, "sorted-set", "Determine the index of a member in a sorted set, with scores ordered from high to low", "2.0.0"},
    {"zcount", 4, R | F, gs_cmd_zcount, 1, 1, 1, "sorted-set", "Count the members in a sorted set with scores within the given values", "2.0.0"},
    {"zlexcount", 4, R | F, gs_cmd_zlexcount, 1, 1, 1, "sorted-set", "Count the number of members in a sorted set between a given lexicographical range", "2.8.9"},
    {"zrange", -4, R, gs_cmd_zrange, 1, 1, 1, "sorted-set", "Return a range of members in a sorted set", "1.2.0"},
    {"zrangestore", -5, W | M, gs_cmd_zrangestore, 1, 2, 1, "sorted-set", "Store a range of members from sorted set into another key", "6.2.0"},
    {"zrevrange", -4, R, gs_cmd_zrevrange, 1, 1, 1, "sorted-set", "Return a range of members in a sorted set, by index, with scores ordered from high to low", "1.2.0"},
    {"zrangebyscore", -4, R, gs_cmd_zrangebyscore, 1, 1, 1, "sorted-set", "Return a range of members in a sorted set, by score", "1.0.5"},
    {"zrevrangebyscore", -4, R, gs_cmd_zrevrangebyscore, 1, 1, 1, "sorted-set", "Return a range of members in a sorted set, by score, with scores ordered from high to low", "2.2.0"},
    {"zrangebylex", -4, R, gs_cmd_zrangebylex, 1, 1, 1, "sorted-set", "Return a range of members in a sorted set, by lexicographical range", "2.8.9"},
    {"zrevrangebylex", -4, R, gs_cmd_zrevrangebylex, 1, 1, 1, "sorted-set", "Return a range of members in a sorted set, by lexicographical range, ordered from higher to lower strings.", "2.8.9"},
    {"zremrangebyrank", 4, W, gs_cmd_zremrangebyrank, 1, 1, 1, "sorted-set", "Remove all members in a sorted set within the given indexes", "2.0.0"},
    {"zremrangebyscore", 4, W, gs_cmd_zremrangebyscore, 1, 1, 1, "sorted-set", "Remove all members in a sorted set within the given scores", "1.2.0"},
    {"zremrangebylex", 4, W, gs_cmd_zremrangebylex, 1, 1, 1, "sorted-set", "Remove all members in a sorted set between the given lexicographical range", "2.8.9"},
    {"zpopmin", -2, W | F, gs_cmd_zpopmin, 1, 1, 1, "sorted-set", "Remove and return members with the lowest scores in a sorted set", "5.0.0"},
    {"zpopmax", -2, W | F, gs_cmd_zpopmax, 1, 1, 1, "sorted-set", "Remove and return members with the highest scores in a sorted set", "5.0.0"},
    {"zmpop", -4, W | MK, gs_cmd_zmpop, 0, 0, 0, "sorted-set", "Remove and return members with scores in a sorted set", "7.0.0"},
    {"bzpopmin", -3, W | NS | F | B, gs_cmd_bzpopmin, 1, -2, 1, "sorted-set", "Remove and return the member with the lowest score from one or more sorted sets, or block until one is available", "5.0.0"},
    {"bzpopmax", -3, W | NS | F | B, gs_cmd_bzpopmax, 1, -2, 1, "sorted-set", "Remove and return the member with the highest score from one or more sorted sets, or block until one is available", "5.0.0"},
    {"bzmpop", -5, W | NS | B | MK, gs_cmd_bzmpop, 0, 0, 0, "sorted-set", "Remove and return members with scores in a sorted set or block until one is available", "7.0.0"},
    {"zrandmember", -2, R, gs_cmd_zrandmember, 1, 1, 1, "sorted-set", "Get one or multiple random elements from a sorted set", "6.2.0"},
    {"zunion", -3, R | MK, gs_cmd_zunion, 0, 0, 0, "sorted-set", "Add multiple sorted sets", "6.2.0"},
    {"zinter", -3, R | MK, gs_cmd_zinter, 0, 0, 0, "sorted-set", "Intersect multiple sorted sets", "6.2.0"},
    {"zdiff", -3, R | MK, gs_cmd_zdiff, 0, 0, 0, "sorted-set", "Subtract multiple sorted sets", "6.2.0"},
    {"zunionstore", -4, W | M | MK, gs_cmd_zunionstore, 1, 1, 1, "sorted-set", "Add multiple sorted sets and store the resulting sorted set in a new key", "2.0.0"},
    {"zinterstore", -4, W | M | MK, gs_cmd_zinterstore, 1, 1, 1, "sorted-set", "Intersect multiple sorted sets and store the resulting sorted set in a new key", "2.0.0"},
    {"zdiffstore", -4, W | M | MK, gs_cmd_zdiffstore, 1, 1, 1, "sorted-set", "Subtract multiple sorted sets and store the resulting sorted set in a new key", "6.2.0"},
    {"zintercard", -3, R | MK, gs_cmd_zintercard, 0, 0, 0, "sorted-set", "Intersect multiple sorted sets and return the cardinality of the result", "7.0.0"},
    {"zscan", -3, R, gs_cmd_zscan, 1, 1, 1, "sorted-set", "Incrementally iterate sorted sets elements and associated scores", "2.8.0"},
    /* HyperLogLog (cmd_hll.c) */
    {"pfadd", -2, W | M | F, gs_cmd_pfadd, 1, 1, 1, "hyperloglog", "Adds the specified elements to the specified HyperLogLog.", "2.8.9"},
    {"pfcount", -2, R, gs_cmd_pfcount, 1, -1, 1, "hyperloglog", "Return the approximated cardinality of the set(s) observed by the HyperLogLog at key(s).", "2.8.9"},
    {"pfmerge", -2, W | M, gs_cmd_pfmerge, 1, -1, 1, "hyperloglog", "Merge N different HyperLogLogs into a single one.", "2.8.9"},
    {"pfdebug", 3, W | M | A, gs_cmd_pfdebug, 2, 2, 1, "hyperloglog", "Internal commands for debugging HyperLogLog values", "2.8.9"},
    /* introspection of values (cmd_server.c) */
    {"object", -2, R, gs_cmd_object, 2, 2, 1, "generic", "A container for object introspection commands", "2.2.3"},
    {"memory", -2, R, gs_cmd_memory, 2, 2, 1, "server", "A container for memory diagnostics commands", "4.0.0"},
    /* connection and server */
    {"ping", -1, F | S, gs_cmd_ping, 0, 0, 0, "connection", "Ping the server", "1.0.0"},
    {"echo", 2, F, gs_cmd_echo, 0, 0, 0, "connection", "Echo the given string", "1.0.0"},
    {"wait", 3, NS, gs_cmd_wait, 0, 0, 0, "generic", "Wait for the synchronous replication of all the write commands sent in the context of the current connection", "3.0.0"},
    {"time", 1, L | S | F, gs_cmd_time, 0, 0, 0, "server", "Return the current server time", "2.6.0"},
    {"auth", -2, NS | L | S | F | NA, gs_cmd_auth, 0, 0, 0, "connection", "Authenticate to the server", "1.0.0"},
    {"hello", -1, NS | L | S | F | NA, gs_cmd_hello, 0, 0, 0, "connection", "Handshake with Redis", "6.0.0"},
    {"quit", -1, NS | L | S | F | NA, gs_cmd_quit, 0, 0, 0, "connection", "Close the connection", "1.0.0"},
    {"reset", 1, NS | L | S | F | NA, gs_cmd_reset, 0, 0, 0, "connection", "Reset the connection", "6.2.0"},
    {"client", -2, NS | L | S, gs_cmd_client, 0, 0, 0, "connection", "A container for client connection commands", "2.4.0"},
    {"info", -1, L | S, gs_cmd_info, 0, 0, 0, "server", "Get information and statistics about the server", "1.0.0"},
    {"config", -2, A | NS | L | S, gs_cmd_config, 0, 0, 0, "server", "A container for server configuration commands", "2.0.0"},
    {"command", -1, L | S, gs_cmd_command, 0, 0, 0, "server", "Get array of Redis command details", "2.8.13"},
    /* transactions (multi.c) */
    {"multi", 1, NS | L | S | F, gs_cmd_multi, 0, 0, 0, "transactions", "Mark the start of a transaction block", "1.2.0"},
    {"exec", 1, NS | L | S, gs_cmd_exec, 0, 0, 0, "transactions", "Execute all commands issued after MULTI", "1.2.0"},
    {"discard", 1, NS | L | S | F, gs_cmd_discard, 0, 0, 0, "transactions", "Discard all commands issued after MULTI", "2.0.0"},
    {"watch", -2, NS | L | S | F, gs_cmd_watch, 1, -1, 1, "transactions", "Watch the given keys to determine execution of the MULTI/EXEC block", "2.2.0"},
    {"unwatch", 1, NS | L | S | F, gs_cmd_unwatch, 0, 0, 0, "transactions", "Forget about all watched keys", "2.2.0"},
    /* pub/sub (commands/cmd_pubsub.c); shard channels are keys for routing */
    {"subscribe", -2, NS | L | S, gs_cmd_subscribe, 0, 0, 0, "pubsub", "Listen for messages published to the given channels", "2.0.0"},
    {"unsubscribe", -1, NS | L | S, gs_cmd_unsubscribe, 0, 0, 0, "pubsub", "Stop listening for messages posted to the given channels", "2.0.0"},
    {"psubscribe", -2, NS | L | S, gs_cmd_psubscribe, 0, 0, 0, "pubsub", "Listen for messages published to channels matching the given patterns", "2.0.0"},
    {"punsubscribe", -1, NS | L | S, gs_cmd_punsubscribe, 0, 0, 0, "pubsub", "Stop listening for messages posted to channels matching the given patterns", "2.0.0"},
    {"publish", 3, L | S | F, gs_cmd_publish, 0, 0, 0, "pubsub", "Post a message to a channel", "2.0.0"},
    {"pubsub", -2, L | S, gs_cmd_pubsub, 0, 0, 0, "pubsub", "A container for Pub/Sub commands", "2.8.0"},
    {"ssubscribe", -2, NS | L | S, gs_cmd_ssubscribe, 1, -1, 1, "pubsub", "Listen for messages published to the given shard channels", "7.0.0"},
    {"sunsubscribe", -1, NS | L | S, gs_cmd_sunsubscribe, 1, -1, 1, "pubsub", "Stop listening for messages posted to the given shard channels", "7.0.0"},
    {"spublish", 3, L | S | F, gs_cmd_spublish, 1, 1, 1, "pubsub", "Post a message to a shard channel", "7.0.0"},
    {"monitor", 1, A | NS | L | S, gs_cmd_monitor, 0, 0, 0, "server", "Listen for all requests received by the server in real time", "1.0.0"},
    {"slowlog", -2, A | L | S, gs_cmd_slowlog, 0, 0, 0, "server", "A container for slow log commands", "2.2.12"},
    {"latency", -2, A | NS | L | S, gs_cmd_latency, 0, 0, 0, "server", "A container for latency diagnostics commands", "2.8.13"},
    /* cluster (cmd_cluster.c) */
    {"gridsync", -2, L | S, gs_cmd_gridsync, 0, 0, 0, "cluster", "GridSync's own: GRIDSYNC GROUPS lists this node's Raft groups", "0.1.0"},
    {"cluster", -2, NS | L | S, gs_cmd_cluster, 0, 0, 0, "cluster", "A container for Redis Cluster commands", "3.0.0"},
    {"readonly", 1, L | S | F, gs_cmd_readonly, 0, 0, 0, "cluster", "Enables read queries for a connection to a cluster replica node", "3.0.0"},
    {"readwrite", 1, L | S | F, gs_cmd_readwrite, 0, 0, 0, "cluster", "Disables read queries for a connection to a cluster replica node", "3.0.0"},
    {"asking", 1, F, gs_cmd_asking, 0, 0, 0, "cluster", "Sent by cluster clients after an -ASK redirect", "3.0.0"},
    /* scripting (scripting/scripting.c) */
    {"eval", -3, NS | S | SM | NK | MK, gs_cmd_eval, 0, 0, 0, "scripting", "Execute a Lua script server side", "2.6.0"},
    {"evalsha", -3, NS | S | SM | NK | MK, gs_cmd_evalsha, 0, 0, 0, "scripting", "Execute a Lua script server side", "2.6.0"},
    {"eval_ro", -3, R | NS | S | SM | NK | MK, gs_cmd_eval_ro, 0, 0, 0, "scripting", "Execute a read-only Lua script server side", "7.0.0"},
    {"evalsha_ro", -3, R | NS | S | SM | NK | MK, gs_cmd_evalsha_ro, 0, 0, 0, "scripting", "Execute a read-only Lua script server side", "7.0.0"},
    {"script", -2, 0, gs_cmd_script, 0, 0, 0, "scripting", "A container for Lua scripts management commands", "2.6.0"},
    {"shutdown", -1, A | NS | L | S, gs_cmd_shutdown, 0, 0, 0, "server", "Synchronously save the dataset to disk and then shut down the server", "1.0.0"},
    {NULL, 0, 0, NULL, 0, 0, 0, NULL, NULL, NULL},
};
/* clang-format on */

/* Where the count of a GS_CMD_MOVABLEKEYS command is (Redis's keynum
 * specs: the keys follow it). */
static size_t keynum_index(const struct gs_command *cmd)
{
    if (cmd->fn == gs_cmd_zunionstore || cmd->fn == gs_cmd_zinterstore ||
        cmd->fn == gs_cmd_zdiffstore || cmd->fn == gs_cmd_blmpop || cmd->fn == gs_cmd_bzmpop ||
        cmd->fn == gs_cmd_eval || cmd->fn == gs_cmd_evalsha || cmd->fn == gs_cmd_eval_ro ||
        cmd->fn == gs_cmd_evalsha_ro)
        return 2; /* after the destination, BLMPOP's/BZMPOP's timeout, or the script */
    return 1;
}

long gs_command_keys(const struct gs_command *cmd, size_t argc, const struct gs_arg *argv,
                     size_t *pos, size_t cap)
{
    size_t n = 0;
    if (cmd->fn == gs_cmd_sort)
        return gs_sort_keys(argc, argv, pos, cap);
    if (cmd->first_key > 0 && (size_t)cmd->first_key < argc) {
        long lk = cmd->last_key < 0 ? (long)argc + cmd->last_key : cmd->last_key;
        size_t last = lk < 0 ? 0 : (size_t)lk;
        if (last >= argc)
            last = argc - 1;
        size_t step = cmd->key_step > 0 ? (size_t)cmd->key_step : 1;
        for (size_t i = (size_t)cmd->first_key; i <= last; i += step, n++)
            if (n < cap)
                pos[n] = i;
    }
    if (!(cmd->flags & GS_CMD_MOVABLEKEYS))
        return (long)n;
    size_t at = keynum_index(cmd);
    int64_t count;
    if (at >= argc || !gs_string2ll(argv[at].p, argv[at].len, &count) || count < 0 ||
        (uint64_t)count > argc - at - 1)
        return -1;
    for (size_t i = 0; i < (size_t)count; i++, n++)
        if (n < cap)
            pos[n] = at + 1 + i;
    return (long)n;
}
