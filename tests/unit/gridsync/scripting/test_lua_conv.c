/*
 * The pure pieces of scripting: SHA-1 against FIPS 180 vectors, rand48
 * against the numbers redis-server 7.0 gives a fresh server's first
 * script, the shebang's accepted and refused lines with Redis's texts,
 * and the RESP <-> Lua conversions rule by rule in RESP2 and RESP3.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <lauxlib.h>
#include <lualib.h>

#include "gridsync/scripting/lua_conv.h"
#include "gridsync/scripting/sha1.h"

/* ------------------------------------------------------------ SHA-1 */

static void test_sha1_vectors(void **state)
{
    (void)state;
    char hex[GS_SHA1_HEX_LEN + 1];
    gs_sha1hex(NULL, 0, hex);
    assert_string_equal(hex, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    gs_sha1hex("abc", 3, hex);
    assert_string_equal(hex, "a9993e364706816aba3e25717850c26c9cd0d89d");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    gs_sha1hex(two, strlen(two), hex);
    assert_string_equal(hex, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
    /* A million 'a's: many blocks, and the length's high bytes. */
    char *a = malloc(1000000);
    assert_non_null(a);
    memset(a, 'a', 1000000);
    gs_sha1hex(a, 1000000, hex);
    free(a);
    assert_string_equal(hex, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
    /* The name redis-server gives EVAL "return 1". */
    gs_sha1hex("return 1", 8, hex);
    assert_string_equal(hex, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
    /* 55, 56 and 64 bytes: the padding's edge cases. */
    char buf[64];
    memset(buf, 'x', sizeof buf);
    gs_sha1hex(buf, 55, hex);
    assert_int_equal(strlen(hex), 40);
    char h56[41], h64[41];
    gs_sha1hex(buf, 56, h56);
    gs_sha1hex(buf, 64, h64);
    assert_string_not_equal(hex, h56);
    assert_string_not_equal(h56, h64);
}

/* ----------------------------------------------------------- rand48 */

/* What redis-server 7.0.15 returns to a fresh server's first
 * "return {math.random(1000000), math.random(1000000), ...}". */
static void test_rand48_matches_redis(void **state)
{
    (void)state;
    struct gs_rand48 r;
    gs_rand48_init(&r);
    const int want[] = {396465, 840486, 353337, 446584};
    for (int i = 0; i < 4; i++) {
        double x = (double)(gs_rand48_next(&r) % INT32_MAX) / (double)INT32_MAX;
        assert_int_equal((int)(x * 1000000) + 1, want[i]);
    }
    /* math.randomseed(7); math.random(100) is 27 in Redis. */
    gs_rand48_seed(&r, 7);
    double x = (double)(gs_rand48_next(&r) % INT32_MAX) / (double)INT32_MAX;
    assert_int_equal((int)(x * 100) + 1, 27);
}

/* ---------------------------------------------------------- shebang */

static int shebang(const char *body, unsigned *flags, size_t *len, char *err)
{
    return gs_script_shebang(body, strlen(body), flags, len, err, 128);
}

static void test_shebang(void **state)
{
    (void)state;
    unsigned f;
    size_t len;
    char err[128];
    assert_int_equal(shebang("return 1", &f, &len, err), 0);
    assert_int_equal(f, GS_SCRIPT_COMPAT);
    assert_int_equal(len, 0);
    assert_int_equal(shebang("#!lua\nreturn 1", &f, &len, err), 0);
    assert_int_equal(f, 0);
    assert_int_equal(len, 5);
    assert_int_equal(shebang("#!lua flags=no-writes,allow-oom\nreturn 1", &f, &len, err), 0);
    assert_int_equal(f, GS_SCRIPT_NO_WRITES | GS_SCRIPT_ALLOW_OOM);
    assert_int_equal(shebang("#!lua flags=\nreturn 1", &f, &len, err), 0);
    assert_int_equal(f, 0);
    assert_int_equal(
        shebang("#!lua flags=allow-stale,no-cluster,allow-cross-slot-keys\n", &f, &len, err), 0);
    assert_int_equal(f, GS_SCRIPT_ALLOW_STALE | GS_SCRIPT_NO_CLUSTER | GS_SCRIPT_ALLOW_CROSS_SLOT);
    assert_int_equal(shebang("#!lua", &f, &len, err), -1);
    assert_string_equal(err, "Invalid script shebang");
    assert_int_equal(shebang("#!luax\n", &f, &len, err), -1);
    assert_string_equal(err, "Unexpected engine in script shebang: #!luax");
    assert_int_equal(shebang("#! \n", &f, &len, err), -1);
    assert_string_equal(err, "Unexpected engine in script shebang: #!");
    assert_int_equal(shebang("#!lua flags=bogus\n", &f, &len, err), -1);
    assert_string_equal(err, "Unexpected flag in script shebang: bogus");
    assert_int_equal(shebang("#!lua x=1\n", &f, &len, err), -1);
    assert_string_equal(err, "Unknown lua shebang option: x=1");
}

/* ------------------------------------------------------ conversions */

struct out_state {
    struct core_buf buf;
    struct gs_writer w;
    int errors_counted;
};

static void on_error(void *arg, const char *msg, size_t len, int count)
{
    struct out_state *o = arg;
    o->errors_counted += count;
    gs_reply_error(&o->w, msg, len);
}

/* Run chunk (which returns one value), convert its result; returns the
 * reply (NUL-terminated, in o). */
static const char *reply_of(lua_State *L, struct out_state *o, int client_proto, int script_proto,
                            const char *chunk)
{
    o->buf.len = 0;
    o->w.buf = &o->buf;
    o->w.proto = client_proto;
    assert_int_equal(luaL_loadstring(L, chunk), 0);
    assert_int_equal(lua_pcall(L, 0, 1, 0), 0);
    struct gs_lua_out out = {&o->w, script_proto, on_error, o};
    gs_lua_write_reply(L, &out);
    assert_int_equal(lua_gettop(L), 0);
    core_buf_append(&o->buf, "", 1);
    return o->buf.data;
}

static void test_lua_to_resp(void **state)
{
    (void)state;
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    struct out_state o = {0};
    assert_string_equal(reply_of(L, &o, 2, 2, "return 'hi'"), "$2\r\nhi\r\n");
    assert_string_equal(reply_of(L, &o, 2, 2, "return 3.99"), ":3\r\n");
    assert_string_equal(reply_of(L, &o, 2, 2, "return -3.5"), ":-3\r\n");
    assert_string_equal(reply_of(L, &o, 2, 2, "return 1e20"), ":-9223372036854775808\r\n");
    assert_string_equal(reply_of(L, &o, 2, 2, "return 0/0"), ":-9223372036854775808\r\n");
    assert_string_equal(reply_of(L, &o, 2, 2, "return true"), ":1\r\n");
    assert_string_equal(reply_of(L, &o, 2, 2, "return false"), "$-1\r\n");
    assert_string_equal(reply_of(L, &o, 3, 2, "return false"), "_\r\n");
    assert_string_equal(reply_of(L, &o, 2, 3, "return false"), ":0\r\n");
    assert_string_equal(reply_of(L, &o, 3, 3, "return {true,false}"), "*2\r\n#t\r\n#f\r\n");
    assert_string_equal(reply_of(L, &o, 2, 2, "return nil"), "$-1\r\n");
    assert_string_equal(reply_of(L, &o, 2, 2, "return {1,2,'a',nil,5}"),
                        "*3\r\n:1\r\n:2\r\n$1\r\na\r\n");
    assert_string_equal(reply_of(L, &o, 2, 2, "return {{1,{2}},{}}"),
                        "*2\r\n*2\r\n:1\r\n*1\r\n:2\r\n*0\r\n");
    assert_string_equal(reply_of(L, &o, 2, 2, "return {ok='x\\r\\ny'}"), "+x  y\r\n");
    o.errors_counted = 0;
    assert_string_equal(reply_of(L, &o, 2, 2, "return {err='My Error'}"), "-My Error\r\n");
    assert_int_equal(o.errors_counted, 1);
    assert_string_equal(reply_of(L, &o, 2, 2, "return {err='E x', ignore_error_stats_update=true}"),
                        "-E x\r\n");
    assert_int_equal(o.errors_counted, 1); /* not counted again */
    assert_string_equal(reply_of(L, &o, 2, 2, "return {err=1}"), "*0\r\n");
    assert_string_equal(reply_of(L, &o, 2, 2, "return {1, {err='inner'}}"),
                        "*2\r\n:1\r\n-inner\r\n");
    /* RESP3 types, and how a RESP2 client sees them. */
    assert_string_equal(reply_of(L, &o, 3, 2, "return {map={a=1}}"), "%1\r\n$1\r\na\r\n:1\r\n");
    assert_string_equal(reply_of(L, &o, 2, 2, "return {map={a=1}}"), "*2\r\n$1\r\na\r\n:1\r\n");
    assert_string_equal(reply_of(L, &o, 3, 2, "return {set={a=true}}"), "~1\r\n$1\r\na\r\n");
    assert_string_equal(reply_of(L, &o, 3, 2, "return {double=3.5}"), ",3.5\r\n");
    assert_string_equal(reply_of(L, &o, 2, 2, "return {double=3.5}"), "$3\r\n3.5\r\n");
    assert_string_equal(reply_of(L, &o, 3, 2, "return {double=1/0}"), ",inf\r\n");
    assert_string_equal(reply_of(L, &o, 3, 2, "return {double='x'}"), "*0\r\n");
    assert_string_equal(reply_of(L, &o, 3, 2, "return {big_number='12a\\r\\nb'}"), "(12a  b\r\n");
    assert_string_equal(reply_of(L, &o, 2, 2, "return {big_number='12\\n'}"), "$3\r\n12 \r\n");
    assert_string_equal(
        reply_of(L, &o, 3, 2, "return {verbatim_string={format='markdown',string='hi'}}"),
        "=6\r\nmar:hi\r\n");
    assert_string_equal(reply_of(L, &o, 3, 2, "return {verbatim_string={format='t',string='hi'}}"),
                        "=6\r\ntxx:hi\r\n");
    assert_string_equal(
        reply_of(L, &o, 2, 2, "return {verbatim_string={format='txt',string='hi'}}"),
        "$2\r\nhi\r\n");
    assert_string_equal(reply_of(L, &o, 3, 2, "return {verbatim_string={format='txt'}}"), "*0\r\n");
    /* A table that holds itself ends in Redis's stack error. */
    const char *deep = reply_of(L, &o, 2, 2, "local t = {}; t[1] = t; return t");
    assert_non_null(strstr(deep, "-ERR reached lua stack limit\r\n"));
    assert_int_equal(strncmp(deep, "*1\r\n*1\r\n", 8), 0);
    core_buf_free(&o.buf);
    lua_close(L);
}

/* Push the reply, then describe the value in Lua (a checker chunk that
 * takes it as its argument and returns a string). */
static const char *lua_view(lua_State *L, const char *resp, const char *checker)
{
    size_t len = strlen(resp);
    assert_int_equal(luaL_loadstring(L, checker), 0);
    const char *end = gs_lua_push_reply(L, resp, resp + len);
    assert_ptr_equal(end, resp + len);
    assert_int_equal(lua_pcall(L, 1, 1, 0), 0);
    const char *s = lua_tostring(L, -1);
    lua_pop(L, 1);
    return s; /* interned; still referenced by nothing: compared at once */
}

static void test_resp_to_lua(void **state)
{
    (void)state;
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    const char *ty = "local v = ...; return type(v) .. ':' .. tostring(v)";
    assert_string_equal(lua_view(L, ":42\r\n", ty), "number:42");
    assert_string_equal(lua_view(L, "$3\r\na\r\n\r\n", "local v = ...; return #v"), "3");
    assert_string_equal(lua_view(L, "$-1\r\n", ty), "boolean:false");
    assert_string_equal(lua_view(L, "*-1\r\n", ty), "boolean:false");
    assert_string_equal(lua_view(L, "_\r\n", ty), "nil:nil");
    assert_string_equal(lua_view(L, "#t\r\n", ty), "boolean:true");
    assert_string_equal(lua_view(L, "+OK\r\n", "return (...).ok"), "OK");
    assert_string_equal(
        lua_view(L, "-ERR bad\r\n",
                 "local v = ...; return v.err .. tostring(v.ignore_error_stats_update)"),
        "ERR badtrue");
    assert_string_equal(lua_view(L, "*3\r\n:1\r\n$-1\r\n$1\r\nx\r\n",
                                 "local v = ...; return #v .. tostring(v[2]) .. v[3]"),
                        "3falsex");
    assert_string_equal(lua_view(L, "%2\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n*0\r\n",
                                 "local m = (...).map; return m.a .. type(m.b)"),
                        "1table");
    assert_string_equal(lua_view(L, "~1\r\n$1\r\nm\r\n", "return tostring((...).set.m)"), "true");
    assert_string_equal(lua_view(L, ",1.5\r\n", "return tostring((...).double)"), "1.5");
    assert_string_equal(lua_view(L, ",inf\r\n", "return tostring((...).double)"), "inf");
    assert_string_equal(lua_view(L, "(123\r\n", "return (...).big_number"), "123");
    assert_string_equal(lua_view(L, "=8\r\ntxt:abcd\r\n",
                                 "local v = (...).verbatim_string; return v.format .. v.string"),
                        "txtabcd");
    assert_string_equal(lua_view(L, "|1\r\n$1\r\nk\r\n$1\r\nv\r\n:7\r\n", ty), "number:7");
    lua_close(L);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha1_vectors), cmocka_unit_test(test_rand48_matches_redis),
        cmocka_unit_test(test_shebang),      cmocka_unit_test(test_lua_to_resp),
        cmocka_unit_test(test_resp_to_lua),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
