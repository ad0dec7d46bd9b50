/*
 * Lua scripting, as Redis 7.0's eval.c, script.c and script_lua.c: EVAL,
 * EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT run Lua 5.1 scripts against
 * the node's databases, each script's redis.call going through the
 * node's gs_call like any command (statistics, SLOWLOG, MONITOR, WATCH,
 * blocked clients all see it). The handlers are declared with the other
 * families' in commands/commands.h; docs/gridsync.md "Scripting" says
 * what a script may do and what differs from Redis.
 *
 * Life cycle and ownership (one engine per node, n->scripting):
 *
 *            first EVAL / EVALSHA / SCRIPT LOAD           SCRIPT FLUSH
 *   (none) ----------------------------------> READY --------------> (none)
 *                 engine_get: lua_newstate,     |  ^
 *                 libraries, redis.*, globals   |  | the script returns
 *                 made read-only                v  | or raises
 *                                            RUNNING (one script; the loop
 *                                              waits for it: see below)
 *
 *   - The node owns the engine (gs_scripting_free at the node's end);
 *     the engine owns its lua_State, its script client (Redis's
 *     lua_client: no connection, the caller's database at each run) and
 *     that client's output buffer. Cached scripts live in the Lua
 *     registry as f_<sha> (the compiled chunk) and s_<sha> (its flags).
 *   - Every byte the Lua heap holds goes through the engine's allocator,
 *     which refuses to grow it past lua-memory-limit: a script that
 *     allocates without end fails with "not enough memory" and the heap
 *     is collected again.
 *   - A script runs to its end inside the command that started it: the
 *     event loop is not re-entered, so other clients wait (no -BUSY) and
 *     SCRIPT KILL cannot arrive while a script runs. Past
 *     busy-reply-threshold a warning is logged once per run.
 *
 * Invariants:
 *  1. Between runs the engine's caller is NULL and its Lua stack is
 *     empty; a Lua error never leaves the engine's C code half done
 *     (every call into Lua is protected: lua_cpcall / lua_pcall).
 *  2. The globals a script sees are read-only proxies; only KEYS and ARGV
 *     are (re)set, by the engine, before each run.
 *  3. n->script_info mirrors the engine's heap and cache after every
 *     command that changed them.
 */
#ifndef GS_SCRIPTING_H
#define GS_SCRIPTING_H

struct gs_node;

/* Free node n's engine (the Lua state, cached scripts, the script
 * client), if it has one. Safe to call when it has none. */
void gs_scripting_free(struct gs_node *n);

#endif
