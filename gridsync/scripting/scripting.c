/*
 * The scripting engine (see scripting.h for its life cycle and
 * invariants): the Lua state and its sandbox, the redis.* library, and
 * the EVAL family's and SCRIPT's handlers. Texts, checks and their order
 * follow Redis 7.0.15's eval.c (evalGenericCommand, evalGetCommandFlags,
 * luaCreateFunction), script.c (scriptPrepareForRun, scriptCall) and
 * script_lua.c (luaRedisGenericCommand, luaCallFunction, luaPushError).
 *
 * Where Redis patches its Lua (read-only tables), this engine uses the
 * stock Lua 5.1 and proxies: every table reachable from the globals is
 * replaced by an empty table whose metatable reads through to it and
 * refuses writes; rawset, rawget, setmetatable, next and pairs see
 * through the proxies so that scripts observe what Redis's do.
 */
#include "gridsync/scripting/scripting.h"

#include "core/buf.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "gridsync/client/cmd_stats.h"
#include "gridsync/client/node_ctx.h"
#include "gridsync/commands/cmd_server.h"
#include "gridsync/commands/commands.h"
#include "gridsync/commands/monitor.h"
#include "gridsync/scripting/lua_conv.h"
#include "gridsync/scripting/sha1.h"

#include <ctype.h>
#include <lauxlib.h>
#include <lua-bitop.h>
#include <lua-cjson.h>
#include <lua.h>
#include <lualib.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Redis calls a Lua GC step every this many scripts (LUA_GC_CYCLE_PERIOD)
 * rather than letting a full cycle land inside one script. */
#define GC_PERIOD 50
/* Instructions between two looks at the clock while a script runs
 * (Redis's luaMaskCountHook runs every 100000). */
#define HOOK_COUNT 100000

struct gs_scripting {
    struct gs_node *node;
    lua_State *L;
    uint64_t mem; /* bytes the Lua heap holds (the allocator's count) */
    bool refused; /* the allocator refused to grow the heap since the last run */
    /* Redis's lua_client: runs the commands of redis.call. */
    struct gs_client client;
    struct core_buf out;
    struct gs_arg *argv;
    size_t argv_cap;
    struct gs_rand48 rand;
    uint64_t bodies; /* bytes of the cached scripts' bodies */
    uint64_t n_scripts;
    unsigned gc_count;
    /* The run (invariant 1: caller NULL between runs). */
    struct gs_client *caller;
    char sha[GS_SHA1_HEX_LEN + 1];
    bool readonly, allow_oom, oom, write_dirty;
    int64_t start_ms;
    bool slow_logged;
};

static struct gs_scripting *engine_of(lua_State *L)
{
    void *ud;
    lua_getallocf(L, &ud);
    return ud;
}

static void update_info(struct gs_scripting *s)
{
    struct gs_node *n = s->node;
    n->script_info.lua_memory = s->mem;
    n->script_info.scripts = s->n_scripts;
    /* Redis's used_memory_scripts_eval: the bodies and an entry each. */
    n->script_info.scripts_memory = s->bodies + s->n_scripts * 64;
}

/* ------------------------------------------------------- allocator */

/* Lua's allocator contract (lua_Alloc): nsize 0 frees; a shrink never
 * fails. Growth past the limit is refused, which Lua raises as a memory
 * error inside the script. */
static void *lua_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct gs_scripting *s = ud;
    if (nsize == 0) {
        free(ptr);
        s->mem -= osize;
        return NULL;
    }
    uint64_t limit = (uint64_t)s->node->cfg.lua_memory_limit;
    if (nsize > osize && limit > 0 && s->mem + (nsize - osize) > limit) {
        s->refused = true;
        return NULL;
    }
    void *p = realloc(ptr, nsize);
    if (!p)
        return NULL;
    s->mem = s->mem - osize + nsize;
    return p;
}

/* ----------------------------------------------------- error helpers */

/* Count an error reply as gs_error does (total_error_replies, errorstats)
 * without writing it. */
static void count_error(struct gs_shared *sh, const char *msg, size_t len)
{
    sh->stats.error_replies++;
    if (sh->stats.detail)
        gs_cmd_stats_error(sh->stats.detail, msg, len);
}

static void caller_error(void *arg, const char *msg, size_t len, int count)
{
    struct gs_client *c = arg;
    if (count)
        count_error(c->shared, msg, len);
    gs_reply_error(&c->w, msg, len);
}

/* gs_errorf without its 512-byte bound (a compile error quotes the
 * script). */
static void reply_errorf(struct gs_client *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void reply_errorf(struct gs_client *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *msg = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!msg) {
        gs_error(c, "ERR out of memory");
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, (size_t)n + 1, fmt, ap);
    va_end(ap);
    /* Redis's addReplyErrorFormat trims the newlines at the end. */
    size_t len = (size_t)n;
    while (len && (msg[len - 1] == '\r' || msg[len - 1] == '\n'))
        len--;
    caller_error(c, msg, len, 1);
    free(msg);
}

/* Redis's luaPushError: push {err=<code> <message>}; "-CODE msg" keeps
 * its code, anything else gets ERR. */
static void push_error(lua_State *L, const char *error)
{
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    if (error[0] == '-') {
        const char *sp = strchr(error, ' ');
        if (!sp) {
            luaL_addstring(&b, "ERR ");
            luaL_addstring(&b, error + 1);
        } else {
            luaL_addlstring(&b, error + 1, (size_t)(sp - error - 1));
            luaL_addchar(&b, ' ');
            luaL_addstring(&b, sp + 1);
        }
    } else {
        luaL_addstring(&b, "ERR ");
        luaL_addstring(&b, error);
    }
    luaL_pushresult(&b);
    size_t len;
    const char *msg = lua_tolstring(L, -1, &len);
    while (len && (msg[len - 1] == '\r' || msg[len - 1] == '\n'))
        len--;
    lua_pushlstring(L, msg, len);
    lua_remove(L, -2);
    lua_newtable(L);
    lua_pushstring(L, "err");
    lua_pushvalue(L, -3);
    lua_settable(L, -3);
    lua_remove(L, -2);
}

/* luaPushError then raise it (Redis's luaError). */
static int raise_error(lua_State *L, const char *error)
{
    push_error(L, error);
    return lua_error(L);
}

/* ------------------------------------------------------ redis.call */

/* Redis's luaArgsToRedisArgv: every argument a string, numbers as
 * "%.17g" (replaced on the stack, so that the pointers stay valid while
 * the command runs). Returns false with the error pushed. */
static bool args_to_argv(lua_State *L, struct gs_scripting *s, int argc)
{
    if (argc == 0) {
        push_error(L, "Please specify at least one argument for this redis lib call");
        return false;
    }
    if ((size_t)argc > s->argv_cap) {
        size_t cap = (size_t)argc * 2;
        struct gs_arg *a = realloc(s->argv, cap * sizeof(*a));
        if (!a) {
            push_error(L, "-OOM out of memory");
            return false;
        }
        s->argv = a;
        s->argv_cap = cap;
    }
    for (int j = 1; j <= argc; j++) {
        if (lua_type(L, j) == LUA_TNUMBER) {
            char dbuf[64];
            int len = snprintf(dbuf, sizeof(dbuf), "%.17g", (double)lua_tonumber(L, j));
            lua_pushlstring(L, dbuf, (size_t)len);
            lua_replace(L, j);
        } else if (lua_type(L, j) != LUA_TSTRING) {
            push_error(L, "Lua redis lib command arguments must be strings or integers");
            return false;
        }
        s->argv[j - 1].p = lua_tolstring(L, j, &s->argv[j - 1].len);
    }
    return true;
}

/* The checks of Redis's scriptCall, in its order; NULL when cmd may run. */
static const char *refusal(struct gs_scripting *s, const struct gs_command *cmd, size_t argc,
                           const struct gs_arg *argv)
{
    struct gs_node *n = s->node;
    if (!cmd)
        return "Unknown Redis command called from script";
    if ((cmd->arity > 0 && (size_t)cmd->arity != argc) ||
        (cmd->arity < 0 && argc < (size_t)-cmd->arity))
        return "Wrong number of args calling Redis command from script";
    /* SCRIPT's subcommands are noscript in Redis but its HELP. */
    if ((cmd->flags & GS_CMD_NOSCRIPT) ||
        (cmd->fn == gs_cmd_script && !(argc == 2 && gs_arg_is(&argv[1], "help"))))
        return "This Redis command is not allowed from script";
    if (s->readonly && (cmd->flags & GS_CMD_WRITE))
        return "Write commands are not allowed from read-only scripts.";
    /* scriptVerifyOOM: only before the script's first write, which
     * cannot be undone once done. */
    if (!s->allow_oom && n->cfg.maxmemory > 0 && !s->write_dirty && s->oom &&
        (cmd->flags & GS_CMD_DENYOOM))
        return "-OOM command not allowed when used memory > 'maxmemory'.";
    return NULL;
}

/* Redis's luaRedisGenericCommand: redis.call (raise) and redis.pcall. */
static int redis_generic(lua_State *L, bool raise)
{
    struct gs_scripting *s = engine_of(L);
    int argc = lua_gettop(L);
    if (!s->caller) {
        push_error(L, "redis.call/pcall can only be called inside a script invocation");
        return raise ? lua_error(L) : 1;
    }
    if (!args_to_argv(L, s, argc))
        return raise ? lua_error(L) : 1;
    struct gs_node *n = s->node;
    const struct gs_command *cmd = gs_command_lookup(n, s->argv[0].p, s->argv[0].len);
    const char *why = refusal(s, cmd, (size_t)argc, s->argv);
    if (why) {
        /* Rejected, as Redis's afterErrorReply + incrCommandStatsOnError:
         * counted here once, not again in the script's error reply. */
        push_error(L, why);
        lua_getfield(L, -1, "err");
        size_t len;
        const char *msg = lua_tolstring(L, -1, &len);
        count_error(&n->shared, msg, len);
        lua_pop(L, 1);
        if (cmd)
            gs_command_rejected(n, cmd);
        lua_pushstring(L, "ignore_error_stats_update");
        lua_pushboolean(L, 1);
        lua_settable(L, -3);
        return raise ? lua_error(L) : 1;
    }
    if (cmd->flags & GS_CMD_WRITE)
        s->write_dirty = true;
    s->out.len = 0;
    gs_call(&s->client, cmd, (size_t)argc, s->argv);
    if (s->out.oom) { /* the reply could not be kept */
        s->out.oom = false;
        s->out.len = 0;
        push_error(L, "-OOM out of memory keeping the command's reply");
        return raise ? lua_error(L) : 1;
    }
    if (s->out.len == 0) {
        lua_pushboolean(L, 0);
        return 1;
    }
    bool failed = s->out.data[0] == '-';
    gs_lua_push_reply(L, s->out.data, s->out.data + s->out.len);
    return raise && failed ? lua_error(L) : 1;
}

static int lua_redis_call(lua_State *L)
{
    return redis_generic(L, true);
}

static int lua_redis_pcall(lua_State *L)
{
    return redis_generic(L, false);
}

/* ------------------------------------------------- the redis library */

static int lua_sha1hex(lua_State *L)
{
    if (lua_gettop(L) != 1)
        return raise_error(L, "wrong number of arguments");
    size_t len = 0;
    const char *p = lua_tolstring(L, 1, &len);
    char hex[GS_SHA1_HEX_LEN + 1];
    gs_sha1hex(p, p ? len : 0, hex);
    lua_pushstring(L, hex);
    return 1;
}

/* Redis's luaRedisReturnSingleFieldTable. */
static int single_field(lua_State *L, const char *field)
{
    if (lua_gettop(L) != 1 || lua_type(L, -1) != LUA_TSTRING) {
        push_error(L, "wrong number or type of arguments");
        return 1;
    }
    lua_newtable(L);
    lua_pushstring(L, field);
    lua_pushvalue(L, -3);
    lua_settable(L, -3);
    return 1;
}

static int lua_error_reply(lua_State *L)
{
    if (lua_gettop(L) != 1 || lua_type(L, -1) != LUA_TSTRING) {
        push_error(L, "wrong number or type of arguments");
        return 1;
    }
    const char *err = lua_tostring(L, -1);
    if (err[0] != '-') {
        lua_pushfstring(L, "-%s", err);
        err = lua_tostring(L, -1);
    }
    push_error(L, err);
    return 1;
}

static int lua_status_reply(lua_State *L)
{
    return single_field(L, "ok");
}

static int lua_log(lua_State *L)
{
    int argc = lua_gettop(L);
    if (argc < 2)
        return raise_error(L, "redis.log() requires two arguments or more.");
    if (!lua_isnumber(L, 1))
        return raise_error(L, "First argument must be a number (log level).");
    int level = (int)lua_tonumber(L, 1);
    if (level < CORE_LOG_DEBUG || level > CORE_LOG_WARNING)
        return raise_error(L, "Invalid debug level.");
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int j = 2; j <= argc; j++) {
        size_t len;
        const char *p = lua_tolstring(L, j, &len);
        if (!p)
            continue;
        if (j != 2)
            luaL_addchar(&b, ' ');
        luaL_addlstring(&b, p, len);
    }
    luaL_pushresult(&b);
    core_log((enum core_log_level)level, "%s", lua_tostring(L, -1));
    return 0;
}

static int lua_setresp(lua_State *L)
{
    struct gs_scripting *s = engine_of(L);
    if (lua_gettop(L) != 1)
        return raise_error(L, "redis.setresp() requires one argument.");
    int resp = (int)lua_tonumber(L, 1);
    if (resp != 2 && resp != 3)
        return raise_error(L, "RESP version must be 2 or 3.");
    s->client.w.proto = resp;
    return 0;
}

/* Redis's PROPAGATE_AOF | PROPAGATE_REPL: accepted and checked; a node
 * has nothing to propagate to. */
#define REPL_AOF  1
#define REPL_REPL 2

static int lua_set_repl(lua_State *L)
{
    struct gs_scripting *s = engine_of(L);
    if (!s->caller)
        return raise_error(L, "redis.set_repl() can only be called inside a script invocation");
    if (lua_gettop(L) != 1)
        return raise_error(L, "redis.set_repl() requires two arguments.");
    int flags = (int)lua_tonumber(L, 1);
    if ((flags & ~(REPL_AOF | REPL_REPL)) != 0)
        return raise_error(
            L, "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.");
    return 0;
}

static int lua_replicate_commands(lua_State *L)
{
    lua_pushboolean(L, 1); /* Redis 7.0: always effects replication */
    return 1;
}

static int lua_breakpoint(lua_State *L)
{
    lua_pushboolean(L, 0); /* no debugger session */
    return 1;
}

static int lua_debug(lua_State *L)
{
    (void)L;
    return 0;
}

static int lua_acl_check_cmd(lua_State *L)
{
    struct gs_scripting *s = engine_of(L);
    int argc = lua_gettop(L);
    if (!args_to_argv(L, s, argc))
        return lua_error(L);
    if (!gs_command_lookup(s->node, s->argv[0].p, s->argv[0].len))
        return raise_error(L, "Invalid command passed to redis.acl_check_cmd()");
    lua_pushboolean(L, 1); /* no ACLs: the default user may run anything */
    return 1;
}

/* Redis's redis_math_random / redis_math_randomseed, on rand48 (see
 * lua_conv.h for when Redis 7.0 seeds it). */
static int lua_math_random(lua_State *L)
{
    struct gs_scripting *s = engine_of(L);
    lua_Number r = (lua_Number)(gs_rand48_next(&s->rand) % INT32_MAX) / (lua_Number)INT32_MAX;
    switch (lua_gettop(L)) {
    case 0:
        lua_pushnumber(L, r);
        break;
    case 1: {
        int u = luaL_checkint(L, 1);
        luaL_argcheck(L, 1 <= u, 1, "interval is empty");
        lua_pushnumber(L, floor(r * u) + 1);
        break;
    }
    case 2: {
        int l = luaL_checkint(L, 1);
        int u = luaL_checkint(L, 2);
        luaL_argcheck(L, l <= u, 2, "interval is empty");
        lua_pushnumber(L, floor(r * (u - l + 1)) + l);
        break;
    }
    default:
        return luaL_error(L, "wrong number of arguments");
    }
    return 1;
}

static int lua_math_randomseed(lua_State *L)
{
    gs_rand48_seed(&engine_of(L)->rand, (int32_t)luaL_checkint(L, 1));
    return 0;
}

/* Redis 7.0's luaRedisPcall: a caught error table comes back as its err
 * string, so that scripts see what 6.x scripts saw. */
static int lua_pcall_override(lua_State *L)
{
    int argc = lua_gettop(L);
    lua_pushboolean(L, 1);
    lua_insert(L, 1);
    if (lua_pcall(L, argc - 1, LUA_MULTRET, 0)) {
        lua_remove(L, 1);
        if (lua_istable(L, -1)) {
            lua_getfield(L, -1, "err");
            if (lua_isstring(L, -1))
                lua_replace(L, -2);
            else
                lua_pop(L, 1);
        }
        lua_pushboolean(L, 0);
        lua_insert(L, 1);
    }
    return lua_gettop(L);
}

/* ------------------------------------------------------------ sandbox */

#define REG_PROXIES "gs_proxies" /* weak-keyed: proxy -> the table behind it */
#define REG_GLOBALS "gs_globals" /* the real globals (KEYS and ARGV go there) */

/* Push the table behind the proxy at idx, or nothing and 0. */
static int proxy_target(lua_State *L, int idx)
{
    if (lua_type(L, idx) != LUA_TTABLE)
        return 0;
    lua_pushvalue(L, idx);
    lua_getfield(L, LUA_REGISTRYINDEX, REG_PROXIES);
    lua_insert(L, -2);
    lua_rawget(L, -2);
    lua_remove(L, -2);
    if (lua_istable(L, -1))
        return 1;
    lua_pop(L, 1);
    return 0;
}

/* __newindex of every proxy: the position is the script's (level 1). */
static int ro_newindex(lua_State *L)
{
    return luaL_error(L, "Attempt to modify a readonly table");
}

/* Raised from a builtin (rawset, setmetatable): no position, as Redis's
 * patched VM raises it there. */
static int ro_builtin(lua_State *L)
{
    lua_pushstring(L, "Attempt to modify a readonly table");
    return lua_error(L);
}

/* Redis's luaProtectedTableError, __index of the real globals. */
static int missing_global(lua_State *L)
{
    if (lua_gettop(L) != 2)
        return luaL_error(L, "Wrong number of arguments to luaProtectedTableError");
    if (!lua_isstring(L, -1) && !lua_isnumber(L, -1))
        return luaL_error(L,
                          "Second argument to luaProtectedTableError must be a string or number");
    return luaL_error(L, "Script attempted to access nonexistent global variable '%s'",
                      lua_tostring(L, -1));
}

static int safe_rawset(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checkany(L, 2);
    luaL_checkany(L, 3);
    if (proxy_target(L, 1))
        return ro_builtin(L);
    lua_settop(L, 3);
    lua_rawset(L, 1);
    return 1;
}

static int safe_rawget(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checkany(L, 2);
    if (proxy_target(L, 1))
        lua_replace(L, 1);
    lua_settop(L, 2);
    lua_rawget(L, 1);
    return 1;
}

static int safe_setmetatable(lua_State *L)
{
    if (proxy_target(L, 1))
        return ro_builtin(L);
    lua_pushvalue(L, lua_upvalueindex(1)); /* the original setmetatable */
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

static int safe_next(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    if (proxy_target(L, 1))
        lua_replace(L, 1);
    lua_settop(L, 2);
    if (lua_next(L, 1))
        return 2;
    lua_pushnil(L);
    return 1;
}

static int safe_pairs(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_pushvalue(L, lua_upvalueindex(1)); /* safe_next */
    lua_pushvalue(L, 1);
    lua_pushnil(L);
    return 3;
}

/* Replace the table on top by a read-only proxy of it. */
static void make_proxy(lua_State *L)
{
    lua_newtable(L);                    /* target proxy */
    lua_newtable(L);                    /* target proxy mt */
    lua_pushvalue(L, -3);               /* ... mt target */
    lua_setfield(L, -2, "__index");     /* mt.__index = target */
    lua_pushcfunction(L, ro_newindex);  /* */
    lua_setfield(L, -2, "__newindex");  /* */
    lua_pushboolean(L, 0);              /* getmetatable(proxy) gives false */
    lua_setfield(L, -2, "__metatable"); /* */
    lua_setmetatable(L, -2);            /* target proxy */
    lua_getfield(L, LUA_REGISTRYINDEX, REG_PROXIES);
    lua_pushvalue(L, -2);
    lua_pushvalue(L, -4);
    lua_rawset(L, -3); /* proxies[proxy] = target */
    lua_pop(L, 1);
    lua_remove(L, -2); /* proxy */
}

/* Redis's luaSetErrorMetatable + luaSetTableProtectionRecursively, by
 * proxies (see the file's head). */
static void protect_globals(lua_State *L)
{
    lua_newtable(L);
    lua_newtable(L);
    lua_pushstring(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_setfield(L, LUA_REGISTRYINDEX, REG_PROXIES);

    static const char *const libs[] = {"redis",     "string", "math",  "table",
                                       "coroutine", "bit",    "cjson", NULL};
    for (int i = 0; libs[i]; i++) {
        lua_getglobal(L, libs[i]);
        make_proxy(L);
        lua_setglobal(L, libs[i]);
    }
    /* The strings' metatable: methods through the proxy, and
     * getmetatable("") hands out a proxy of it. */
    lua_pushstring(L, "");
    if (lua_getmetatable(L, -1)) {
        lua_getglobal(L, "string");
        lua_setfield(L, -2, "__index");
        lua_newtable(L);
        lua_getglobal(L, "string");
        lua_setfield(L, -2, "__index");
        make_proxy(L);
        lua_setfield(L, -2, "__metatable");
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    /* Builtins that would reach behind a proxy. */
    lua_pushcfunction(L, safe_rawset);
    lua_setglobal(L, "rawset");
    lua_pushcfunction(L, safe_rawget);
    lua_setglobal(L, "rawget");
    lua_getglobal(L, "setmetatable");
    lua_pushcclosure(L, safe_setmetatable, 1);
    lua_setglobal(L, "setmetatable");
    lua_pushcfunction(L, safe_next);
    lua_pushvalue(L, -1);
    lua_setglobal(L, "next");
    lua_pushcclosure(L, safe_pairs, 1);
    lua_setglobal(L, "pairs");
    /* The real globals: a missing name is an error; then the proxy of
     * them becomes the globals every chunk loaded from now on sees. */
    lua_pushvalue(L, LUA_GLOBALSINDEX);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, REG_GLOBALS);
    lua_newtable(L);
    lua_pushcfunction(L, missing_global);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
    make_proxy(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_GLOBALSINDEX, "_G"); /* _G is the proxy too */
    lua_replace(L, LUA_GLOBALSINDEX);
}

/* Redis's error handler, verbatim: the error as a table with the
 * position of the script's line (the caller's, when a C function such
 * as redis.call raised it). */
static const char err_handler[] = "local dbg = debug\n"
                                  "debug = nil\n"
                                  "function __redis__err__handler(err)\n"
                                  "  local i = dbg.getinfo(2,'nSl')\n"
                                  "  if i and i.what == 'C' then\n"
                                  "    i = dbg.getinfo(3,'nSl')\n"
                                  "  end\n"
                                  "  if type(err) ~= 'table' then\n"
                                  "    err = {err='ERR ' .. tostring(err)}"
                                  "  end"
                                  "  if i then\n"
                                  "    err['source'] = i.source\n"
                                  "    err['line'] = i.currentline\n"
                                  "  end"
                                  "  return err\n"
                                  "end\n";

static void open_lib(lua_State *L, const char *name, lua_CFunction open)
{
    lua_pushcfunction(L, open);
    lua_pushstring(L, name);
    lua_call(L, 1, 0);
}

static void set_fn(lua_State *L, const char *name, lua_CFunction fn)
{
    lua_pushcfunction(L, fn);
    lua_setfield(L, -2, name);
}

static void set_num(lua_State *L, const char *name, lua_Number v)
{
    lua_pushnumber(L, v);
    lua_setfield(L, -2, name);
}

/* Redis's scriptingInit: libraries, redis.*, the sandbox. Run by
 * lua_cpcall, so that running out of memory is an error, not a panic. */
static int engine_setup(lua_State *L)
{
    open_lib(L, "", luaopen_base);
    open_lib(L, LUA_TABLIBNAME, luaopen_table);
    open_lib(L, LUA_STRLIBNAME, luaopen_string);
    open_lib(L, LUA_MATHLIBNAME, luaopen_math);
    open_lib(L, LUA_DBLIBNAME, luaopen_debug);
    /* cjson and bit from Debian's lua-cjson and lua-bitop (Redis embeds
     * the same libraries; struct and cmsgpack have no Debian package). */
    lua_pushcfunction(L, luaopen_cjson);
    lua_call(L, 0, 1);
    lua_setglobal(L, "cjson");
    lua_pushcfunction(L, luaopen_bit);
    lua_call(L, 0, 1);
    lua_setglobal(L, "bit");
    /* What Redis 7.0 leaves out of a script's reach. */
    static const char *const removed[] = {"print",   "dofile",   "loadfile", "getfenv",
                                          "setfenv", "newproxy", NULL};
    for (int i = 0; removed[i]; i++) {
        lua_pushnil(L);
        lua_setglobal(L, removed[i]);
    }
    lua_pushcfunction(L, lua_pcall_override);
    lua_setglobal(L, "pcall");

    lua_newtable(L);
    set_fn(L, "call", lua_redis_call);
    set_fn(L, "pcall", lua_redis_pcall);
    set_fn(L, "log", lua_log);
    set_fn(L, "setresp", lua_setresp);
    set_fn(L, "set_repl", lua_set_repl);
    set_fn(L, "replicate_commands", lua_replicate_commands);
    set_fn(L, "breakpoint", lua_breakpoint);
    set_fn(L, "debug", lua_debug);
    set_fn(L, "acl_check_cmd", lua_acl_check_cmd);
    set_fn(L, "sha1hex", lua_sha1hex);
    set_fn(L, "error_reply", lua_error_reply);
    set_fn(L, "status_reply", lua_status_reply);
    set_num(L, "LOG_DEBUG", CORE_LOG_DEBUG);
    set_num(L, "LOG_VERBOSE", CORE_LOG_VERBOSE);
    set_num(L, "LOG_NOTICE", CORE_LOG_NOTICE);
    set_num(L, "LOG_WARNING", CORE_LOG_WARNING);
    set_num(L, "REPL_NONE", 0);
    set_num(L, "REPL_AOF", REPL_AOF);
    set_num(L, "REPL_SLAVE", REPL_REPL);
    set_num(L, "REPL_REPLICA", REPL_REPL);
    set_num(L, "REPL_ALL", REPL_AOF | REPL_REPL);
    /* The version INFO reports, and its number as Redis's 0x00MMmmpp. */
    lua_pushstring(L, GS_REDIS_VERSION);
    lua_setfield(L, -2, "REDIS_VERSION");
    unsigned major = 0, minor = 0, patch = 0;
    sscanf(GS_REDIS_VERSION, "%u.%u.%u", &major, &minor, &patch);
    set_num(L, "REDIS_VERSION_NUM", (lua_Number)((major << 16) | (minor << 8) | patch));
    lua_setglobal(L, "redis");

    lua_getglobal(L, "math");
    set_fn(L, "random", lua_math_random);
    set_fn(L, "randomseed", lua_math_randomseed);
    lua_pop(L, 1);

    if (luaL_loadbuffer(L, err_handler, sizeof(err_handler) - 1, "@err_handler"))
        return lua_error(L);
    lua_call(L, 0, 0);
    protect_globals(L);
    return 0;
}

static void engine_close(struct gs_scripting *s)
{
    if (s->L)
        lua_close(s->L);
    s->L = NULL;
    s->bodies = 0;
    s->n_scripts = 0;
    s->gc_count = 0;
}

/* The node's engine with its Lua state, created on first use; NULL
 * (error replied to c) when memory is short. */
static struct gs_scripting *engine_get(struct gs_client *c)
{
    struct gs_node *n = c->node;
    struct gs_scripting *s = n->scripting;
    if (!s) {
        s = calloc(1, sizeof(*s));
        if (!s) {
            gs_error(c, "ERR out of memory starting the Lua engine");
            return NULL;
        }
        s->node = n;
        s->client.node = n;
        s->client.shared = &n->shared;
        s->client.authenticated = true;
        s->client.w.buf = &s->out;
        s->client.w.proto = 2;
        gs_rand48_init(&s->rand); /* once per process, as rand.c's static state */
        n->scripting = s;
    }
    if (!s->L) {
        s->mem = 0;
        s->L = lua_newstate(lua_alloc, s);
        if (!s->L || lua_cpcall(s->L, engine_setup, NULL) != 0) {
            CORE_WARN("Lua engine: %s",
                      s->L ? lua_tostring(s->L, -1) : "cannot allocate the state");
            engine_close(s);
            gs_error(c, "ERR out of memory starting the Lua engine");
            update_info(s);
            return NULL;
        }
        update_info(s);
    }
    return s;
}

/* ------------------------------------------------------------ scripts */

static void fname_of(char out[2 + GS_SHA1_HEX_LEN + 1], char kind, const char *sha)
{
    out[0] = kind;
    out[1] = '_';
    memcpy(out + 2, sha, GS_SHA1_HEX_LEN + 1);
}

/* Lower-case sha's 40 characters into out (the cache is keyed so, as
 * Redis's case-insensitive dict). */
static void sha_lower(const struct gs_arg *a, char out[GS_SHA1_HEX_LEN + 1])
{
    for (size_t i = 0; i < GS_SHA1_HEX_LEN; i++)
        out[i] = (char)tolower((unsigned char)a->p[i]);
    out[GS_SHA1_HEX_LEN] = '\0';
}

struct lookup_ctx {
    const char *sha;
    bool found;
    unsigned flags;
};

static int lookup_protected(lua_State *L)
{
    struct lookup_ctx *x = lua_touserdata(L, 1);
    char name[2 + GS_SHA1_HEX_LEN + 1];
    fname_of(name, 's', x->sha);
    lua_getfield(L, LUA_REGISTRYINDEX, name);
    x->found = lua_isnumber(L, -1);
    x->flags = x->found ? (unsigned)lua_tonumber(L, -1) : 0;
    return 0;
}

/* Is sha cached? (its flags into *flags). */
static bool script_lookup(struct gs_scripting *s, const char *sha, unsigned *flags)
{
    struct lookup_ctx x = {sha, false, 0};
    if (lua_cpcall(s->L, lookup_protected, &x) != 0) {
        lua_pop(s->L, 1);
        return false;
    }
    *flags = x.flags;
    return x.found;
}

struct create_ctx {
    const char *sha, *body;
    size_t len, shebang_len;
    unsigned flags;
    const char *error; /* the compile error (on the Lua stack) */
};

static int create_protected(lua_State *L)
{
    struct create_ctx *x = lua_touserdata(L, 1);
    /* The shebang line is skipped, its '\n' kept: line numbers are the
     * user's. */
    if (luaL_loadbuffer(L, x->body + x->shebang_len, x->len - x->shebang_len, "@user_script")) {
        x->error = lua_tostring(L, -1);
        return 0;
    }
    char name[2 + GS_SHA1_HEX_LEN + 1];
    fname_of(name, 'f', x->sha);
    lua_setfield(L, LUA_REGISTRYINDEX, name);
    fname_of(name, 's', x->sha);
    lua_pushnumber(L, x->flags);
    lua_setfield(L, LUA_REGISTRYINDEX, name);
    return 0;
}

/* Redis's luaCreateFunction: compile body and cache it under sha.
 * Returns its flags, or -1 after replying the error to c. */
static long script_create(struct gs_scripting *s, struct gs_client *c, const char *sha,
                          const struct gs_arg *body)
{
    char why[256];
    struct create_ctx x = {sha, body->p, body->len, 0, 0, NULL};
    if (gs_script_shebang(body->p, body->len, &x.flags, &x.shebang_len, why, sizeof(why)) != 0) {
        reply_errorf(c, "ERR %s", why);
        return -1;
    }
    lua_State *L = s->L;
    int top = lua_gettop(L);
    if (lua_cpcall(L, create_protected, &x) != 0) {
        reply_errorf(c, "ERR Error compiling script (new function): %s", lua_tostring(L, -1));
        lua_settop(L, top);
        update_info(s);
        return -1;
    }
    if (x.error) {
        reply_errorf(c, "ERR Error compiling script (new function): %s", x.error);
        lua_settop(L, top);
        update_info(s);
        return -1;
    }
    lua_settop(L, top);
    s->n_scripts++;
    s->bodies += body->len;
    update_info(s);
    return (long)x.flags;
}

/* ---------------------------------------------------------------- run */

/* Redis's luaMaskCountHook, without the event loop: the loop is not
 * re-entered (scripting.h), so past the threshold the run is only
 * reported. */
static void time_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    struct gs_scripting *s = engine_of(L);
    int64_t limit = s->node->cfg.busy_reply_threshold;
    if (s->slow_logged || limit <= 0)
        return;
    int64_t elapsed = core_wall_ms() - s->start_ms;
    if (elapsed >= limit) {
        s->slow_logged = true;
        CORE_WARN("Slow script detected: still in execution after %lld milliseconds. "
                  "GridSync runs it to its end (no BUSY, no SCRIPT KILL). Script name is: %s.",
                  (long long)elapsed, s->sha);
    }
}

struct run_ctx {
    struct gs_scripting *s;
    const struct gs_arg *keys, *args;
    size_t nkeys, nargs;
};

static void push_array(lua_State *L, const struct gs_arg *a, size_t n)
{
    lua_createtable(L, (int)n, 0);
    for (size_t j = 0; j < n; j++) {
        lua_pushlstring(L, a[j].p, a[j].len);
        lua_rawseti(L, -2, (int)j + 1);
    }
}

/* Redis's luaCallFunction, the error's and the result's replies. */
static int run_protected(lua_State *L)
{
    struct run_ctx *r = lua_touserdata(L, 1);
    struct gs_scripting *s = r->s;
    struct gs_client *c = s->caller;
    lua_getglobal(L, "__redis__err__handler");
    char name[2 + GS_SHA1_HEX_LEN + 1];
    fname_of(name, 'f', s->sha);
    lua_getfield(L, LUA_REGISTRYINDEX, name);
    lua_getfield(L, LUA_REGISTRYINDEX, REG_GLOBALS);
    push_array(L, r->keys, r->nkeys);
    lua_setfield(L, -2, "KEYS");
    push_array(L, r->args, r->nargs);
    lua_setfield(L, -2, "ARGV");
    lua_pop(L, 1);
    lua_sethook(L, time_hook, LUA_MASKCOUNT, HOOK_COUNT);
    int err = lua_pcall(L, 0, 1, -2);
    lua_sethook(L, NULL, 0, 0);
    if (++s->gc_count == GC_PERIOD) {
        lua_gc(L, LUA_GCSTEP, GC_PERIOD);
        s->gc_count = 0;
    }
    if (err) {
        if (!lua_istable(L, -1)) { /* a memory error: no handler ran */
            const char *msg = lua_isstring(L, -1) ? lua_tostring(L, -1) : "execution failure";
            reply_errorf(c, "ERR Error running script %s, %.100s", s->sha, msg);
        } else {
            lua_getfield(L, -1, "err");
            lua_getfield(L, -2, "source");
            lua_getfield(L, -3, "line");
            lua_getfield(L, -4, "ignore_error_stats_update");
            const char *msg = lua_isstring(L, -4) ? lua_tostring(L, -4) : NULL;
            const char *source = lua_isstring(L, -3) ? lua_tostring(L, -3) : NULL;
            const char *line = lua_isstring(L, -2) ? lua_tostring(L, -2) : NULL;
            bool ignore = lua_isboolean(L, -1) && lua_toboolean(L, -1);
            if (!msg)
                msg = "ERR unknown error";
            if (source && line)
                lua_pushfstring(L, "%s script: %s, on %s:%s.", msg, s->sha, source, line);
            else
                lua_pushstring(L, msg);
            size_t len;
            const char *full = lua_tolstring(L, -1, &len);
            caller_error(c, full, len, !ignore);
            lua_pop(L, 5);
        }
        lua_pop(L, 1);
    } else {
        struct gs_lua_out out = {&c->w, s->client.w.proto, caller_error, c};
        gs_lua_write_reply(L, &out);
    }
    lua_pop(L, 1); /* the handler */
    return 0;
}

static void script_run(struct gs_scripting *s, struct gs_client *c, unsigned flags, bool ro,
                       bool oom, size_t argc, struct gs_arg *argv, size_t nkeys)
{
    /* scriptPrepareForRun: the script client starts in the caller's
     * database and RESP2 each time. */
    s->caller = c;
    s->client.db = c->db;
    s->client.w.proto = 2;
    s->readonly = ro || (!(flags & GS_SCRIPT_COMPAT) && (flags & GS_SCRIPT_NO_WRITES));
    s->allow_oom = (flags & GS_SCRIPT_ALLOW_OOM) != 0;
    s->oom = oom;
    s->write_dirty = false;
    s->start_ms = core_wall_ms();
    s->slow_logged = false;
    struct run_ctx r = {s, argv + 3, argv + 3 + nkeys, nkeys, argc - 3 - nkeys};
    size_t mark = c->w.buf->len;
    lua_State *L = s->L;
    if (lua_cpcall(L, run_protected, &r) != 0) {
        /* Out of Lua memory outside the script itself (setting KEYS, or
         * converting its result): whatever was written is dropped. */
        c->w.buf->len = mark;
        reply_errorf(c, "ERR Error running script %s, %.100s", s->sha,
                     lua_isstring(L, -1) ? lua_tostring(L, -1) : "execution failure");
        lua_pop(L, 1);
    }
    lua_settop(L, 0);
    if (s->refused) { /* what the failed script held is garbage now: free it */
        lua_gc(L, LUA_GCCOLLECT, 0);
        s->refused = false;
    }
    s->caller = NULL;
    s->client.db = NULL;
    s->out.len = 0;
    if (s->out.cap > 64 * 1024)
        core_buf_free(&s->out);
    update_info(s);
}

/* ----------------------------------------------------------- commands */

static const char noscript_err[] = "NOSCRIPT No matching script. Please use EVAL.";

/* Redis's evalCommand / evalShaCommand / evalGenericCommand, and what
 * processCommand does first with the script's flags (evalGetCommandFlags). */
static void eval_generic(struct gs_client *c, size_t argc, struct gs_arg *argv, bool by_sha,
                         bool ro)
{
    struct gs_node *n = c->node;
    if (c->shared->cluster_mode) {
        gs_error(c, "ERR scripts are not supported in GridSync cluster mode");
        return;
    }
    struct gs_scripting *s = engine_get(c);
    if (!s)
        return;
    char sha[GS_SHA1_HEX_LEN + 1] = "";
    unsigned flags = GS_SCRIPT_COMPAT;
    bool known = false;
    if (by_sha) {
        if (argv[1].len == GS_SHA1_HEX_LEN) {
            sha_lower(&argv[1], sha);
            known = script_lookup(s, sha, &flags);
        }
    } else {
        gs_sha1hex(argv[1].p, argv[1].len, sha);
        known = script_lookup(s, sha, &flags);
        if (!known) {
            size_t sl;
            char why[256];
            if (gs_script_shebang(argv[1].p, argv[1].len, &flags, &sl, why, sizeof(why)) != 0)
                flags = GS_SCRIPT_COMPAT; /* the error is replied when it is compiled */
        }
    }
    /* processCommand: a script that declared flags and may write is a
     * denyoom command (scriptFlagsToCmdFlags); Redis also notes whether
     * memory is short for the checks inside the script (script_oom). */
    bool oom = n->cfg.maxmemory > 0 && gs_store_make_room(c->db->store) == CORE_ENOMEM;
    if (oom && !(flags & GS_SCRIPT_COMPAT) &&
        !(flags & (GS_SCRIPT_ALLOW_OOM | GS_SCRIPT_NO_WRITES))) {
        gs_error_oom(c);
        return;
    }
    /* The script's line comes before its commands' (Redis feeds the
     * monitors here, and skips EVAL in call()). */
    if (n->nmonitors) {
        const struct gs_command *self = gs_command_lookup(n, argv[0].p, argv[0].len);
        if (self)
            gs_monitor_feed(c, self, NULL, argc, argv);
    }
    if (by_sha && argv[1].len != GS_SHA1_HEX_LEN) {
        gs_error(c, noscript_err);
        return;
    }
    int64_t numkeys;
    if (!gs_arg_int(c, &argv[2], &numkeys, NULL))
        return;
    if (numkeys > (int64_t)argc - 3) {
        gs_error(c, "ERR Number of keys can't be greater than number of args");
        return;
    }
    if (numkeys < 0) {
        gs_error(c, "ERR Number of keys can't be negative");
        return;
    }
    if (!known) {
        if (by_sha) {
            gs_error(c, noscript_err);
            return;
        }
        long f = script_create(s, c, sha, &argv[1]);
        if (f < 0)
            return;
        flags = (unsigned)f;
    }
    /* scriptPrepareForRun */
    if (ro && !(flags & GS_SCRIPT_COMPAT) && !(flags & GS_SCRIPT_NO_WRITES)) {
        gs_error(c, "ERR Can not execute a script with write flag using *_ro command.");
        return;
    }
    memcpy(s->sha, sha, sizeof(sha));
    script_run(s, c, flags, ro, oom, argc, argv, (size_t)numkeys);
}

void gs_cmd_eval(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    eval_generic(c, argc, argv, false, false);
}

void gs_cmd_evalsha(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    eval_generic(c, argc, argv, true, false);
}

void gs_cmd_eval_ro(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    eval_generic(c, argc, argv, false, true);
}

void gs_cmd_evalsha_ro(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    eval_generic(c, argc, argv, true, true);
}

static const struct gs_subcommand script_subs[] = {
    {"load", 3, "script|load"},
    {"exists", -3, "script|exists"},
    {"flush", -2, "script|flush"},
    {"kill", 2, "script|kill"},
    {"debug", 3, "script|debug"},
    {"help", 2, "script|help"},
    {NULL, 0, NULL},
};

static const char *const script_help[] = {
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
    "HELP",
    "    Prints this help.",
    NULL,
};

void gs_cmd_script(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_node *n = c->node;
    if (!gs_subcommand_ok(c, argc, argv, script_subs, "SCRIPT"))
        return;
    const struct gs_arg *sub = &argv[1];
    if (gs_arg_is(sub, "help")) {
        gs_reply_help(c, "SCRIPT", script_help);
    } else if (gs_arg_is(sub, "flush")) {
        if (!(argc == 2 ||
              (argc == 3 && (gs_arg_is(&argv[2], "sync") || gs_arg_is(&argv[2], "async"))))) {
            gs_error(c, "ERR SCRIPT FLUSH only support SYNC|ASYNC option");
            return;
        }
        /* Both modes free at once: a Lua heap is freed in one pass. */
        if (n->scripting) {
            engine_close(n->scripting);
            n->scripting->mem = 0;
            update_info(n->scripting);
        }
        gs_reply_ok(&c->w);
    } else if (gs_arg_is(sub, "exists")) {
        struct gs_scripting *s = engine_get(c);
        if (!s)
            return;
        gs_reply_array(&c->w, argc - 2);
        for (size_t i = 2; i < argc; i++) {
            unsigned flags;
            char sha[GS_SHA1_HEX_LEN + 1];
            bool found = false;
            if (argv[i].len == GS_SHA1_HEX_LEN) {
                sha_lower(&argv[i], sha);
                found = script_lookup(s, sha, &flags);
            }
            gs_reply_int(&c->w, found);
        }
    } else if (gs_arg_is(sub, "load")) {
        struct gs_scripting *s = engine_get(c);
        if (!s)
            return;
        char sha[GS_SHA1_HEX_LEN + 1];
        unsigned flags;
        gs_sha1hex(argv[2].p, argv[2].len, sha);
        if (!script_lookup(s, sha, &flags) && script_create(s, c, sha, &argv[2]) < 0)
            return;
        gs_reply_bulk(&c->w, sha, GS_SHA1_HEX_LEN);
    } else if (gs_arg_is(sub, "kill")) {
        /* A script runs inside its command (scripting.h): when another
         * client's command is read, none is running. */
        gs_error(c, "NOTBUSY No scripts in execution right now.");
    } else if (gs_arg_is(sub, "debug")) {
        if (c->multi.active) {
            gs_error(c, "ERR SCRIPT DEBUG must be called outside MULTI");
        } else if (gs_arg_is(&argv[2], "no")) {
            gs_reply_ok(&c->w);
        } else if (gs_arg_is(&argv[2], "yes") || gs_arg_is(&argv[2], "sync")) {
            gs_error(c, "ERR GridSync has no Lua debugger (SCRIPT DEBUG NO only)");
        } else {
            gs_error(c, "ERR Use SCRIPT DEBUG YES/SYNC/NO");
        }
    }
}

/* --------------------------------------------------------- life cycle */

void gs_scripting_free(struct gs_node *n)
{
    struct gs_scripting *s = n->scripting;
    if (!s)
        return;
    engine_close(s);
    core_buf_free(&s->out);
    free(s->argv);
    free(s);
    n->scripting = NULL;
}
