/*
 * The pure pieces of scripting, each a rule of Redis 7.0 (script_lua.c,
 * eval.c, rand.c) that needs nothing but a Lua state and the RESP writer:
 *
 *   RESP reply (what a command wrote) -> Lua value   gs_lua_push_reply
 *   Lua value (a script's result)     -> RESP reply  gs_lua_write_reply
 *   "#!lua flags=..." first line      -> flags        gs_script_shebang
 *   math.random's generator (lrand48 with Redis's seeding)  gs_rand48_*
 *
 * Conversion rules, Redis -> Lua: integer -> number; bulk -> string;
 * RESP2 null bulk / null array -> false; RESP3 null -> nil; status ->
 * {ok=s}; error -> {err=s, ignore_error_stats_update=true}; array ->
 * table 1..n; RESP3 map -> {map={k=v}}; set -> {set={m=true}}; boolean ->
 * boolean; double -> {double=n}; big number -> {big_number=s}; verbatim
 * -> {verbatim_string={format=f, string=s}}; attributes are dropped.
 *
 * Lua -> Redis: string -> bulk; number -> integer (truncated); boolean ->
 * :1 / null (script in RESP2) or #t/#f (script in RESP3); table with a
 * string err -> error, ok -> status, number double -> double, string
 * big_number, table verbatim_string {format, string}, table map, table
 * set; any other table -> array of t[1], t[2]... up to the first nil;
 * anything else -> null. Strings of status, error and big number replies
 * have \r and \n turned into spaces.
 *
 * Ownership: the functions push onto or pop from the given Lua stack
 * only as each says; the writer's buffer is the caller's.
 */
#ifndef GS_LUA_CONV_H
#define GS_LUA_CONV_H

#include "gridsync/protocol/resp.h"

#include <lua.h>
#include <stddef.h>
#include <stdint.h>

/* Push the Lua value of the one RESP2/RESP3 reply at p (well formed, as
 * the node's writer writes them; end bounds it). Returns the byte after
 * the reply. Raises a Lua error on a reply nested deeper than the Lua
 * stack allows, one Lua cannot hold (a set member or map key that is
 * null), or when Lua's memory runs out: call it where Lua errors are
 * caught (redis.call runs inside the script's lua_pcall). */
const char *gs_lua_push_reply(lua_State *L, const char *p, const char *end);

/* Errors found in a script's result are written through this, so that
 * the caller can count them as its own errors. msg is the text after the
 * '-', len bytes; counted false when Redis would not count it again (the
 * error came from a command the script called, already counted). */
struct gs_lua_out {
    struct gs_writer *w; /* the caller's writer (its protocol decides maps, doubles) */
    int script_proto;    /* 2 or 3: redis.setresp, decides booleans */
    void (*error)(void *arg, const char *msg, size_t len, int count);
    void *arg;
};

/* Write the value on top of L as a reply and pop it (Redis's
 * luaReplyToRedisReply). */
void gs_lua_write_reply(lua_State *L, const struct gs_lua_out *out);

/* Script flags (Redis 7.0's scripts_flags_def), and COMPAT: the script
 * has no shebang (EVAL's backwards-compatible mode: flags from the
 * commands it calls). */
enum {
    GS_SCRIPT_COMPAT = 1 << 0,
    GS_SCRIPT_NO_WRITES = 1 << 1,
    GS_SCRIPT_ALLOW_OOM = 1 << 2,
    GS_SCRIPT_ALLOW_STALE = 1 << 3,
    GS_SCRIPT_NO_CLUSTER = 1 << 4,
    GS_SCRIPT_ALLOW_CROSS_SLOT = 1 << 5,
};

/* Redis's evalExtractShebangFlags: the flags of body[0..len) and the
 * length of its shebang line (0 without one; the '\n' is not counted, so
 * that the body keeps its line numbers). Returns 0, or -1 with Redis's
 * error text (without "ERR ") written into err (errlen bytes). */
int gs_script_shebang(const char *body, size_t len, unsigned *flags, size_t *shebang_len, char *err,
                      size_t errlen);

/* Redis's rand.c: lrand48's generator. Its state starts as rand.c's
 * static one (gs_rand48_init) and is reseeded only by math.randomseed
 * (redisSrand48: the high 32 bits of the state from seed, the low 16 bits
 * 0x330E): Redis 7.0 does not reseed it per script, so a script's
 * numbers depend on the math.random calls made since the server started
 * or since the last math.randomseed. */
struct gs_rand48 {
    uint64_t x;
};
void gs_rand48_init(struct gs_rand48 *r);
void gs_rand48_seed(struct gs_rand48 *r, int32_t seed);
int32_t gs_rand48_next(struct gs_rand48 *r); /* in [0, 2^31) */

#endif
