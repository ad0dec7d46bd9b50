/*
 * libFuzzer target for what scripting parses: a script's shebang line
 * (gs_script_shebang, gridsync/scripting/lua_conv.h), from client input,
 * and the replies a script's commands write, read back into Lua
 * (gs_lua_push_reply). The input's first byte chooses: even, the rest is
 * a script body; odd, the rest drives the node's reply writer (gs_reply_*)
 * to build one reply of every shape, which must be consumed exactly, as
 * one Lua value, then converted back with gs_lua_write_reply.
 * Checked: a shebang's length points at its '\n', flags are known bits,
 * the Lua stack is balanced.
 */
#include <lauxlib.h>
#include <lualib.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gridsync/scripting/lua_conv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct input {
    const uint8_t *p;
    size_t left;
};

static unsigned take(struct input *in)
{
    if (!in->left)
        return 0;
    in->left--;
    return *in->p++;
}

/* One reply, nested at most depth more levels. */
static void write_reply(struct gs_writer *w, struct input *in, int depth)
{
    unsigned op = take(in), n = take(in) % 5;
    static const char text[] = "ab\r\ncd ef";
    switch (depth > 0 ? op % 13 : op % 9) {
    case 0:
        gs_reply_bulk(w, text, n);
        break;
    case 1:
        gs_reply_int(w, (int64_t)op * 1000003 - 77);
        break;
    case 2:
        gs_reply_null(w);
        break;
    case 3:
        gs_reply_simple(w, "OK", 2);
        break;
    case 4:
        gs_reply_error(w, text, n + 3);
        break;
    case 5:
        gs_reply_double(w, (double)op / 3.0);
        break;
    case 6:
        gs_reply_bool(w, op & 1);
        break;
    case 7:
        gs_reply_verbatim(w, text, n, "txt");
        break;
    case 8:
        gs_reply_null_array(w);
        break;
    case 9:
    case 10:
        (op % 13 == 9 ? gs_reply_array : gs_reply_set)(w, n);
        for (unsigned i = 0; i < n; i++)
            write_reply(w, in, depth - 1);
        break;
    default:
        gs_reply_map(w, n);
        for (unsigned i = 0; i < 2 * n; i++)
            write_reply(w, in, depth - 1);
    }
}

static void on_error(void *arg, const char *msg, size_t len, int count)
{
    (void)count;
    gs_reply_error(arg, msg, len);
}

struct round {
    struct core_buf *buf;
    struct gs_writer *w;
    const char *end;
    struct core_buf back;
};

/* Reply -> Lua -> reply, by lua_cpcall. */
static int round_trip(lua_State *L)
{
    struct round *r = lua_touserdata(L, 1);
    lua_pop(L, 1);
    r->end = gs_lua_push_reply(L, r->buf->data, r->buf->data + r->buf->len);
    if (lua_gettop(L) != 1)
        abort();
    struct gs_writer bw = {&r->back, r->w->proto};
    struct gs_lua_out out = {&bw, r->w->proto, on_error, &bw};
    gs_lua_write_reply(L, &out);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (!(data[0] & 1)) {
        unsigned flags;
        size_t len;
        char err[128];
        const char *body = (const char *)data + 1;
        if (gs_script_shebang(body, size - 1, &flags, &len, err, sizeof(err)) == 0) {
            if (len && (len >= size - 1 || body[len] != '\n'))
                abort();
            if (flags & ~(unsigned)(GS_SCRIPT_COMPAT | GS_SCRIPT_NO_WRITES | GS_SCRIPT_ALLOW_OOM |
                                    GS_SCRIPT_ALLOW_STALE | GS_SCRIPT_NO_CLUSTER |
                                    GS_SCRIPT_ALLOW_CROSS_SLOT))
                abort();
        } else if (!memchr(err, '\0', sizeof(err))) {
            abort();
        }
        return 0;
    }
    static lua_State *L;
    if (!L)
        L = luaL_newstate();
    struct core_buf buf = {0};
    struct gs_writer w = {&buf, (data[0] & 2) ? 3 : 2};
    struct input in = {data + 1, size - 1};
    write_reply(&w, &in, 4);
    if (buf.oom || buf.len == 0)
        abort();
    /* Protected, as redis.call runs it: a reply Lua cannot hold (a null
     * set member, a map key that is nil) raises a Lua error. */
    struct round r = {&buf, &w, NULL, {0}};
    if (lua_cpcall(L, round_trip, &r) != 0) {
        lua_settop(L, 0);
    } else if (r.end != buf.data + buf.len || lua_gettop(L) != 0 || r.back.len == 0) {
        abort();
    }
    core_buf_free(&r.back);
    core_buf_free(&buf);
    return 0;
}
