/*
 * Conversions between RESP replies and Lua values, the shebang line and
 * math.random's generator (see lua_conv.h for the rules). Each function
 * follows the Redis 7.0 function named beside it, step by step, because
 * the order of its checks is what scripts observe: which field of a
 * table wins, where an array stops, which flag text is an error.
 */
#include "gridsync/scripting/lua_conv.h"

#include <lauxlib.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------ RESP -> Lua */

static const char *line_end(const char *p, const char *end)
{
    const char *q = memchr(p, '\r', (size_t)(end - p));
    return q ? q : end;
}

static void set_field_lstring(lua_State *L, const char *field, const char *p, size_t len)
{
    lua_pushstring(L, field);
    lua_pushlstring(L, p, len);
    lua_settable(L, -3);
}

/* Redis's redisProtocolToLuaType and its per-type callbacks. */
const char *gs_lua_push_reply(lua_State *L, const char *p, const char *end)
{
    if (!lua_checkstack(L, 5))
        luaL_error(L, "reached lua stack limit");
    const char *q = line_end(p + 1, end);
    const char *next = q + 2 <= end ? q + 2 : end;
    long long n;
    switch (*p) {
    case ':':
        lua_pushnumber(L, (lua_Number)strtoll(p + 1, NULL, 10));
        return next;
    case '$':
        n = strtoll(p + 1, NULL, 10);
        if (n < 0) {
            lua_pushboolean(L, 0);
            return next;
        }
        lua_pushlstring(L, next, (size_t)n);
        return next + n + 2;
    case '+':
        lua_newtable(L);
        set_field_lstring(L, "ok", p + 1, (size_t)(q - p - 1));
        return next;
    case '-':
        lua_newtable(L);
        set_field_lstring(L, "err", p + 1, (size_t)(q - p - 1));
        /* The command counted it already: the script's own error reply
         * made of it is not counted again. */
        lua_pushstring(L, "ignore_error_stats_update");
        lua_pushboolean(L, 1);
        lua_settable(L, -3);
        return next;
    case '*':
    case '>':
        n = strtoll(p + 1, NULL, 10);
        if (n < 0) {
            lua_pushboolean(L, 0);
            return next;
        }
        lua_newtable(L);
        for (long long j = 0; j < n; j++) {
            lua_pushnumber(L, (lua_Number)(j + 1));
            next = gs_lua_push_reply(L, next, end);
            lua_settable(L, -3);
        }
        return next;
    case '%':
    case '~': {
        bool map = *p == '%';
        n = strtoll(p + 1, NULL, 10);
        lua_newtable(L);
        lua_pushstring(L, map ? "map" : "set");
        lua_newtable(L);
        for (long long j = 0; j < n; j++) {
            next = gs_lua_push_reply(L, next, end);
            if (map)
                next = gs_lua_push_reply(L, next, end);
            else
                lua_pushboolean(L, 1);
            lua_settable(L, -3);
        }
        lua_settable(L, -3);
        return next;
    }
    case '|': /* attributes: read and dropped, the reply follows */
        n = strtoll(p + 1, NULL, 10);
        for (long long j = 0; j < 2 * n; j++) {
            next = gs_lua_push_reply(L, next, end);
            lua_pop(L, 1);
        }
        return gs_lua_push_reply(L, next, end);
    case '_':
        lua_pushnil(L);
        return next;
    case '#':
        lua_pushboolean(L, p[1] == 't');
        return next;
    case ',':
        lua_newtable(L);
        lua_pushstring(L, "double");
        lua_pushnumber(L, strtod(p + 1, NULL));
        lua_settable(L, -3);
        return next;
    case '(':
        lua_newtable(L);
        set_field_lstring(L, "big_number", p + 1, (size_t)(q - p - 1));
        return next;
    case '=':
        n = strtoll(p + 1, NULL, 10);
        lua_newtable(L);
        lua_pushstring(L, "verbatim_string");
        lua_newtable(L);
        set_field_lstring(L, "string", next + 4, n >= 4 ? (size_t)n - 4 : 0);
        set_field_lstring(L, "format", next, 3);
        lua_settable(L, -3);
        return next + n + 2;
    default: /* not written by the node's writer */
        lua_pushnil(L);
        return end;
    }
}

/* ------------------------------------------------------ Lua -> RESP */

/* '+' or '(' and s with \r and \n as spaces (Redis's sdsmapchars). */
static void write_line(struct gs_writer *w, char type, const char *s, size_t len)
{
    char *p = core_buf_reserve(w->buf, len + 3);
    if (!p)
        return;
    p[0] = type;
    for (size_t i = 0; i < len; i++)
        p[i + 1] = (s[i] == '\r' || s[i] == '\n') ? ' ' : s[i];
    p[len + 1] = '\r';
    p[len + 2] = '\n';
    w->buf->len += len + 3;
}

/* Push t[field] (raw) for the table at idx (negative: from the top
 * before the push); returns its type. */
static int raw_field_at(lua_State *L, int idx, const char *field)
{
    lua_pushstring(L, field);
    lua_rawget(L, idx < 0 ? idx - 1 : idx);
    return lua_type(L, -1);
}

static int raw_field(lua_State *L, const char *field)
{
    return raw_field_at(L, -1, field);
}

static int64_t number_to_int(lua_Number d)
{
    /* C leaves the conversion of a double out of range undefined; x86,
     * where Redis is compared, gives INT64_MIN, so that is written. */
    if (isnan(d) || d >= 9223372036854775808.0 || d < -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)d;
}

/* The error table on top (err is a string): Redis's
 * luaExtractErrorInformation, then "-%s" of its message. */
static void write_error_table(lua_State *L, const struct gs_lua_out *out)
{
    lua_getfield(L, -1, "err");
    size_t len;
    const char *msg = lua_tolstring(L, -1, &len);
    lua_getfield(L, -2, "ignore_error_stats_update");
    int ignore = lua_toboolean(L, -1);
    out->error(out->arg, msg, len, !ignore);
    lua_pop(L, 2);
}

static bool write_table_special(lua_State *L, const struct gs_lua_out *out)
{
    struct gs_writer *w = out->w;
    int t = raw_field(L, "err");
    lua_pop(L, 1);
    if (t == LUA_TSTRING) {
        write_error_table(L, out);
        return true;
    }
    if (raw_field(L, "ok") == LUA_TSTRING) {
        size_t len;
        const char *s = lua_tolstring(L, -1, &len);
        write_line(w, '+', s, len);
        lua_pop(L, 1);
        return true;
    }
    lua_pop(L, 1);
    if (raw_field(L, "double") == LUA_TNUMBER) {
        gs_reply_double(w, lua_tonumber(L, -1));
        lua_pop(L, 1);
        return true;
    }
    lua_pop(L, 1);
    if (raw_field(L, "big_number") == LUA_TSTRING) {
        size_t len;
        const char *s = lua_tolstring(L, -1, &len);
        if (w->proto == 3) {
            write_line(w, '(', s, len);
        } else { /* Redis's addReplyBigNum in RESP2: the same bytes, mapped, as a bulk */
            size_t before = w->buf->len;
            gs_reply_bulk(w, s, len);
            if (w->buf->len >= before + len + 2) {
                char *d = w->buf->data + w->buf->len - 2 - len;
                for (size_t i = 0; i < len; i++)
                    if (d[i] == '\r' || d[i] == '\n')
                        d[i] = ' ';
            }
        }
        lua_pop(L, 1);
        return true;
    }
    lua_pop(L, 1);
    if (raw_field(L, "verbatim_string") == LUA_TTABLE) {
        if (raw_field(L, "format") == LUA_TSTRING) {
            const char *format = lua_tostring(L, -1);
            if (raw_field_at(L, -2, "string") == LUA_TSTRING) {
                size_t len;
                const char *s = lua_tolstring(L, -1, &len);
                char ext[4] = "xxx"; /* Redis's addReplyVerbatim pads a short format */
                for (int i = 0; i < 3 && format[i]; i++)
                    ext[i] = format[i];
                gs_reply_verbatim(w, s, len, ext);
                lua_pop(L, 3);
                return true;
            }
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return false;
}

/* Redis's luaReplyToRedisReply; consumes the value on top. */
void gs_lua_write_reply(lua_State *L, const struct gs_lua_out *out)
{
    struct gs_writer *w = out->w;
    if (!lua_checkstack(L, 4)) {
        /* Redis replies this error where the stack ends (a table that
         * contains itself, or one nested too deep). */
        static const char msg[] = "ERR reached lua stack limit";
        out->error(out->arg, msg, sizeof(msg) - 1, 1);
        lua_pop(L, 1);
        return;
    }
    switch (lua_type(L, -1)) {
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, -1, &len);
        gs_reply_bulk(w, s, len);
        break;
    }
    case LUA_TBOOLEAN:
        if (out->script_proto == 2) {
            if (lua_toboolean(L, -1))
                gs_reply_int(w, 1);
            else
                gs_reply_null(w);
        } else {
            gs_reply_bool(w, lua_toboolean(L, -1));
        }
        break;
    case LUA_TNUMBER:
        gs_reply_int(w, number_to_int(lua_tonumber(L, -1)));
        break;
    case LUA_TTABLE: {
        if (write_table_special(L, out))
            break;
        int t = raw_field(L, "map");
        if (t == LUA_TTABLE || (lua_pop(L, 1), raw_field(L, "set")) == LUA_TTABLE) {
            bool map = t == LUA_TTABLE;
            size_t n = 0;
            lua_pushnil(L);
            while (lua_next(L, -2)) {
                lua_pop(L, 1);
                n++;
            }
            if (map)
                gs_reply_map(w, n);
            else
                gs_reply_set(w, n);
            lua_pushnil(L);
            while (lua_next(L, -2)) { /* table, key, value */
                if (map) {
                    lua_pushvalue(L, -2);
                    gs_lua_write_reply(L, out); /* the key */
                    gs_lua_write_reply(L, out); /* the value */
                } else {
                    lua_pop(L, 1);
                    lua_pushvalue(L, -1);
                    gs_lua_write_reply(L, out);
                }
            }
            lua_pop(L, 1); /* the map or set table */
            break;
        }
        lua_pop(L, 1);
        /* An array: t[1], t[2]... up to the first nil. */
        size_t n = 0;
        for (;;) {
            lua_pushnumber(L, (lua_Number)(n + 1));
            lua_rawget(L, -2);
            bool nil = lua_isnil(L, -1);
            lua_pop(L, 1);
            if (nil)
                break;
            n++;
        }
        gs_reply_array(w, n);
        for (size_t j = 1; j <= n; j++) {
            lua_pushnumber(L, (lua_Number)j);
            lua_rawget(L, -2);
            gs_lua_write_reply(L, out);
        }
        break;
    }
    default:
        gs_reply_null(w);
    }
    lua_pop(L, 1);
}

/* ---------------------------------------------------------- shebang */

static const struct {
    const char *name;
    unsigned flag;
} script_flag_names[] = {
    {"no-writes", GS_SCRIPT_NO_WRITES},
    {"allow-oom", GS_SCRIPT_ALLOW_OOM},
    {"allow-stale", GS_SCRIPT_ALLOW_STALE},
    {"no-cluster", GS_SCRIPT_NO_CLUSTER},
    {"allow-cross-slot-keys", GS_SCRIPT_ALLOW_CROSS_SLOT},
};

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

int gs_script_shebang(const char *body, size_t len, unsigned *flags, size_t *shebang_len, char *err,
                      size_t errlen)
{
    *flags = GS_SCRIPT_COMPAT;
    *shebang_len = 0;
    if (len < 2 || body[0] != '#' || body[1] != '!')
        return 0;
    const char *nl = memchr(body, '\n', len);
    if (!nl) {
        snprintf(err, errlen, "Invalid script shebang");
        return -1;
    }
    *shebang_len = (size_t)(nl - body);
    /* The line's words (Redis's sdssplitargs; quotes are not expected in
     * a shebang and are kept as they are). */
    const char *p = body, *end = nl;
    bool first = true;
    *flags &= ~(unsigned)GS_SCRIPT_COMPAT;
    while (p < end) {
        while (p < end && is_space(*p))
            p++;
        if (p == end)
            break;
        const char *w = p;
        while (p < end && !is_space(*p))
            p++;
        size_t wlen = (size_t)(p - w);
        if (first) {
            first = false;
            if (wlen != 5 || memcmp(w, "#!lua", 5) != 0) {
                snprintf(err, errlen, "Unexpected engine in script shebang: %.*s", (int)wlen, w);
                return -1;
            }
            continue;
        }
        if (wlen < 6 || memcmp(w, "flags=", 6) != 0) {
            snprintf(err, errlen, "Unknown lua shebang option: %.*s", (int)wlen, w);
            return -1;
        }
        /* Comma-separated names; "flags=" alone names none. */
        const char *f = w + 6, *fend = p;
        while (f < fend) {
            const char *comma = memchr(f, ',', (size_t)(fend - f));
            const char *e = comma ? comma : fend;
            size_t flen = (size_t)(e - f);
            size_t i, nnames = sizeof(script_flag_names) / sizeof(script_flag_names[0]);
            for (i = 0; i < nnames; i++)
                if (strlen(script_flag_names[i].name) == flen &&
                    memcmp(script_flag_names[i].name, f, flen) == 0)
                    break;
            if (i == nnames) {
                snprintf(err, errlen, "Unexpected flag in script shebang: %.*s", (int)flen, f);
                return -1;
            }
            *flags |= script_flag_names[i].flag;
            if (!comma)
                break;
            f = comma + 1;
            if (f == fend) { /* a trailing comma: an empty name */
                snprintf(err, errlen, "Unexpected flag in script shebang: ");
                return -1;
            }
        }
    }
    if (first) { /* "#!" then only spaces cannot happen: "#!" is a word */
        snprintf(err, errlen, "Invalid engine in script shebang");
        return -1;
    }
    return 0;
}

/* ----------------------------------------------------------- rand48 */

/* Redis's rand.c is lrand48's linear congruence, x = a*x + c mod 2^48,
 * returning the top 31 bits. */
#define RAND48_A    0x5DEECE66DULL
#define RAND48_C    0xBULL
#define RAND48_MASK ((1ULL << 48) - 1)

void gs_rand48_init(struct gs_rand48 *r)
{
    r->x = 0x1234ABCD330EULL; /* rand.c's X2, X1, X0 */
}

void gs_rand48_seed(struct gs_rand48 *r, int32_t seed)
{
    r->x = ((uint64_t)(uint32_t)seed << 16 | 0x330E) & RAND48_MASK;
}

int32_t gs_rand48_next(struct gs_rand48 *r)
{
    r->x = (RAND48_A * r->x + RAND48_C) & RAND48_MASK;
    return (int32_t)(r->x >> 17);
}
