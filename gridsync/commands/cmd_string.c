/*
 * String commands, following Redis's t_string.c: the same options, the
 * same precedence of checks and the same error texts (clients switch on
 * them).
 *
 * Lookups made to write use GS_LOOKUP_NOTOUCH, as Redis's lookupKeyWrite
 * does not count keyspace hits or misses; reads count them.
 */
#include "gridsync/client/client.h"
#include "gridsync/commands/commands.h"
#include "gridsync/types/value.h"

#include "core/error.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LONG_DOUBLE_CHARS (5 * 1024) /* Redis's util.h */

enum {
    SET_NX = 1 << 0,
    SET_XX = 1 << 1,
    SET_GET = 1 << 2,
    SET_KEEPTTL = 1 << 3,
    SET_PERSIST = 1 << 4,
    SET_EX = 1 << 5,
    SET_PX = 1 << 6,
    SET_EXAT = 1 << 7,
    SET_PXAT = 1 << 8,
};
#define ANY_EXPIRE (SET_EX | SET_PX | SET_EXAT | SET_PXAT)

enum { FOR_SET, FOR_GETEX };

static bool is2(const struct gs_arg *a, char x, char y)
{
    return a->len == 2 && (a->p[0] | 0x20) == x && (a->p[1] | 0x20) == y;
}

/* Redis's parseExtendedStringArgumentsOrReply. */
static bool parse_set_options(struct gs_client *c, size_t argc, struct gs_arg *argv, size_t j,
                              int kind, unsigned *flags, const struct gs_arg **expire)
{
    for (; j < argc; j++) {
        const struct gs_arg *o = &argv[j];
        bool has_next = j + 1 < argc;
        unsigned f = *flags;
        if (is2(o, 'n', 'x') && !(f & SET_XX) && kind == FOR_SET) {
            *flags |= SET_NX;
        } else if (is2(o, 'x', 'x') && !(f & SET_NX) && kind == FOR_SET) {
            *flags |= SET_XX;
        } else if (gs_arg_is(o, "GET") && kind == FOR_SET) {
            *flags |= SET_GET;
        } else if (gs_arg_is(o, "KEEPTTL") && !(f & (SET_PERSIST | ANY_EXPIRE)) &&
                   kind == FOR_SET) {
            *flags |= SET_KEEPTTL;
        } else if (gs_arg_is(o, "PERSIST") && kind == FOR_GETEX &&
                   !(f & (ANY_EXPIRE | SET_KEEPTTL))) {
            *flags |= SET_PERSIST;
        } else if (is2(o, 'e', 'x') &&
                   !(f & (SET_KEEPTTL | SET_PERSIST | SET_EXAT | SET_PX | SET_PXAT)) && has_next) {
            *flags |= SET_EX;
            *expire = &argv[++j];
        } else if (is2(o, 'p', 'x') &&
                   !(f & (SET_KEEPTTL | SET_PERSIST | SET_EX | SET_EXAT | SET_PXAT)) && has_next) {
            *flags |= SET_PX;
            *expire = &argv[++j];
        } else if (gs_arg_is(o, "EXAT") &&
                   !(f & (SET_KEEPTTL | SET_PERSIST | SET_EX | SET_PX | SET_PXAT)) && has_next) {
            *flags |= SET_EXAT;
            *expire = &argv[++j];
        } else if (gs_arg_is(o, "PXAT") &&
                   !(f & (SET_KEEPTTL | SET_PERSIST | SET_EX | SET_EXAT | SET_PX)) && has_next) {
            *flags |= SET_PXAT;
            *expire = &argv[++j];
        } else {
            gs_error_syntax(c);
            return false;
        }
    }
    return true;
}

/* Redis's getExpireMillisecondsOrReply: an absolute Unix time in ms. */
static bool expire_ms(struct gs_client *c, const struct gs_arg *a, unsigned flags,
                      const char *cmdname, int64_t *out)
{
    int64_t v;
    if (!gs_arg_int(c, a, &v, NULL))
        return false;
    bool seconds = flags & (SET_EX | SET_EXAT);
    if (v <= 0 || (seconds && v > INT64_MAX / 1000)) {
        gs_errorf(c, "ERR invalid expire time in '%s' command", cmdname);
        return false;
    }
    if (seconds)
        v *= 1000;
    if (flags & (SET_EX | SET_PX)) {
        int64_t now = c->db->now_ms;
        if (v > INT64_MAX - now) {
            gs_errorf(c, "ERR invalid expire time in '%s' command", cmdname);
            return false;
        }
        v += now;
    }
    *out = v;
    return true;
}

/* A missing key, or one of another type (MGET answers nil for it), is nil. */
static void reply_value(struct gs_client *c, struct gs_entry *e)
{
    if (!e || gs_entry_type(e) != GS_TYPE_STRING) {
        gs_reply_null(&c->w);
        return;
    }
    size_t len;
    const char *v = gs_entry_value(e, &len);
    gs_reply_bulk(&c->w, v, len);
}

void gs_cmd_get(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    bool wrong;
    struct gs_entry *e = gs_lookup_typed(c, &argv[1], GS_TYPE_STRING, 0, &wrong);
    if (wrong)
        return;
    if (!e && c->db->miss && c->db->miss->get(c->db->miss_ctx, c, &argv[1]))
        return; /* a miss read through (origin/origin_node.h) */
    reply_value(c, e);
}

/* The common part of SET, SETNX, SETEX, PSETEX, GETSET (Redis's
 * setGenericCommand). */
static void set_generic(struct gs_client *c, const struct gs_arg *key, const struct gs_arg *val,
                        unsigned flags, int64_t expire, const char *okreply, const char *abortreply)
{
    struct gs_store *s = c->db->store;
    int64_t now = c->db->now_ms;
    size_t mark = c->w.buf->len;
    struct gs_entry *old = NULL;
    bool looked_up = false;
    if (flags & SET_GET) {
        bool wrong;
        old = gs_lookup_typed(c, key, GS_TYPE_STRING, 0, &wrong);
        if (wrong)
            return;
        looked_up = true;
        reply_value(c, old);
    }
    if (flags & (SET_NX | SET_XX | SET_KEEPTTL)) {
        if (!looked_up)
            old = gs_store_lookup(s, key->p, key->len, now, GS_LOOKUP_WRITE);
        if (((flags & SET_NX) && old) || ((flags & SET_XX) && !old)) {
            if (!(flags & SET_GET)) {
                if (abortreply)
                    gs_reply_raw(&c->w, abortreply, strlen(abortreply));
                else
                    gs_reply_null(&c->w);
            }
            return;
        }
        if ((flags & SET_KEEPTTL) && old)
            expire = gs_entry_expire_ms(old);
    }
    if (gs_store_set(s, key->p, key->len, val->p, val->len, expire, NULL)) {
        c->w.buf->len = mark; /* drop the GET part: one reply per command */
        gs_error_oom(c);
        return;
    }
    if (!(flags & SET_GET)) {
        if (okreply)
            gs_reply_raw(&c->w, okreply, strlen(okreply));
        else
            gs_reply_ok(&c->w);
    }
}

void gs_cmd_set(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (argc == 3) { /* the hot path: no options */
        if (gs_store_set(c->db->store, argv[1].p, argv[1].len, argv[2].p, argv[2].len, -1, NULL))
            gs_error_oom(c);
        else
            gs_reply_ok(&c->w);
        return;
    }
    unsigned flags = 0;
    const struct gs_arg *ex = NULL;
    if (!parse_set_options(c, argc, argv, 3, FOR_SET, &flags, &ex))
        return;
    int64_t expire = -1;
    if (ex && !expire_ms(c, ex, flags, "set", &expire))
        return;
    set_generic(c, &argv[1], &argv[2], flags, expire, NULL, NULL);
}

void gs_cmd_setnx(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    set_generic(c, &argv[1], &argv[2], SET_NX, -1, ":1\r\n", ":0\r\n");
}

void gs_cmd_setex(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t expire;
    if (!expire_ms(c, &argv[2], SET_EX, "setex", &expire))
        return;
    set_generic(c, &argv[1], &argv[3], 0, expire, NULL, NULL);
}

void gs_cmd_psetex(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t expire;
    if (!expire_ms(c, &argv[2], SET_PX, "psetex", &expire))
        return;
    set_generic(c, &argv[1], &argv[3], 0, expire, NULL, NULL);
}

void gs_cmd_getset(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    set_generic(c, &argv[1], &argv[2], SET_GET, -1, NULL, NULL);
}

void gs_cmd_getdel(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    bool wrong;
    struct gs_entry *e = gs_lookup_typed(c, &argv[1], GS_TYPE_STRING, 0, &wrong);
    if (wrong)
        return;
    reply_value(c, e);
    if (e)
        gs_store_delete_entry(c->db->store, e);
}

void gs_cmd_getex(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    unsigned flags = 0;
    const struct gs_arg *ex = NULL;
    if (!parse_set_options(c, argc, argv, 2, FOR_GETEX, &flags, &ex))
        return;
    int64_t now = c->db->now_ms;
    bool wrong;
    struct gs_entry *e = gs_lookup_typed(c, &argv[1], GS_TYPE_STRING, 0, &wrong);
    if (wrong)
        return;
    /* Redis's getexCommand: a missing key is nil before the expire time
     * is validated; a bad time on an existing key is an error. */
    int64_t expire = -1;
    if (e && ex && !expire_ms(c, ex, flags, "getex", &expire))
        return;
    reply_value(c, e);
    if (!e)
        return;
    /* The reply is already written; a TTL that cannot be stored (out of
     * memory) leaves the key as it was, which is what a client that saw
     * the value can tolerate. */
    if (ex && expire <= now) /* Redis: an expire in the past deletes the key */
        gs_store_delete_entry(c->db->store, e);
    else if (ex)
        (void)gs_store_set_expire(c->db->store, &e, expire);
    else if (flags & SET_PERSIST)
        (void)gs_store_set_expire(c->db->store, &e, -1);
}

void gs_cmd_mget(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (c->db->miss && c->db->miss->mget(c->db->miss_ctx, c, argc, argv))
        return; /* misses read through (origin/origin_node.h) */
    int64_t now = c->db->now_ms;
    gs_reply_array(&c->w, argc - 1);
    for (size_t i = 1; i < argc; i++)
        reply_value(c, gs_store_lookup(c->db->store, argv[i].p, argv[i].len, now, 0));
}

static bool mset_all(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    for (size_t i = 1; i < argc; i += 2) {
        if (gs_store_set(c->db->store, argv[i].p, argv[i].len, argv[i + 1].p, argv[i + 1].len, -1,
                         NULL)) {
            gs_error_oom(c);
            return false;
        }
    }
    return true;
}

void gs_cmd_mset(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (argc % 2 == 0) {
        gs_error_arity(c, "mset");
        return;
    }
    if (mset_all(c, argc, argv))
        gs_reply_ok(&c->w);
}

void gs_cmd_msetnx(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (argc % 2 == 0) {
        gs_error_arity(c, "msetnx");
        return;
    }
    int64_t now = c->db->now_ms;
    for (size_t i = 1; i < argc; i += 2) {
        if (gs_store_lookup(c->db->store, argv[i].p, argv[i].len, now, GS_LOOKUP_WRITE)) {
            gs_reply_int(&c->w, 0);
            return;
        }
    }
    if (mset_all(c, argc, argv))
        gs_reply_int(&c->w, 1);
}

/* Replace an existing entry's value, or create the key (no TTL). Returns
 * false after replying OOM. */
static bool store_value(struct gs_client *c, const struct gs_arg *key, struct gs_entry *e,
                        const char *val, size_t len)
{
    if (e) {
        char *dst = gs_store_resize_value(c->db->store, &e, len);
        if (!dst) {
            gs_error_oom(c);
            return false;
        }
        memcpy(dst, val, len);
        return true;
    }
    if (gs_store_set(c->db->store, key->p, key->len, val, len, -1, NULL)) {
        gs_error_oom(c);
        return false;
    }
    return true;
}

/* Redis's incrDecrCommand. */
static void incr_by(struct gs_client *c, const struct gs_arg *key, int64_t incr)
{
    bool wrong;
    struct gs_entry *e = gs_lookup_typed(c, key, GS_TYPE_STRING, GS_LOOKUP_WRITE, &wrong);
    if (wrong)
        return;
    int64_t v = 0;
    if (e) {
        size_t len;
        const char *p = gs_entry_value(e, &len);
        if (!gs_string2ll(p, len, &v)) {
            gs_error(c, "ERR value is not an integer or out of range");
            return;
        }
    }
    if ((incr < 0 && v < 0 && incr < INT64_MIN - v) ||
        (incr > 0 && v > 0 && incr > INT64_MAX - v)) {
        gs_error(c, "ERR increment or decrement would overflow");
        return;
    }
    v += incr;
    char buf[24];
    size_t n = gs_fmt_int(buf, v);
    if (store_value(c, key, e, buf, n))
        gs_reply_int(&c->w, v);
}

void gs_cmd_incr(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    incr_by(c, &argv[1], 1);
}

void gs_cmd_decr(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    incr_by(c, &argv[1], -1);
}

void gs_cmd_incrby(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t by;
    if (gs_arg_int(c, &argv[2], &by, NULL))
        incr_by(c, &argv[1], by);
}

void gs_cmd_decrby(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t by;
    if (!gs_arg_int(c, &argv[2], &by, NULL))
        return;
    if (by == INT64_MIN) {
        gs_error(c, "ERR decrement would overflow");
        return;
    }
    incr_by(c, &argv[1], -by);
}

/* Redis's string2ld. strtold stops at a NUL byte inside the argument,
 * so the whole length must have been read ("42\0abc" is not a float). */
bool gs_parse_long_double(const char *p, size_t len, long double *out)
{
    char buf[MAX_LONG_DOUBLE_CHARS];
    /* A NUL inside would end strtold's string early and let "42\0abc"
     * pass as 42; Redis refuses it. */
    if (len == 0 || len >= sizeof(buf) || memchr(p, '\0', len))
        return false;
    memcpy(buf, p, len);
    buf[len] = 0;
    if (buf[0] == ' ' || buf[0] == '\t' || buf[0] == '\n' || buf[0] == '\r' || buf[0] == '\v' ||
        buf[0] == '\f')
        return false;
    char *end;
    errno = 0;
    long double v = strtold(buf, &end);
    if ((size_t)(end - buf) != len ||
        (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || fpclassify(v) == FP_ZERO)) ||
        isnan(v))
        return false;
    *out = v;
    return true;
}

/* Redis's ld2string in LD_STR_HUMAN mode: 17 decimals, trailing zeros
 * dropped, "-0" shown as "0". */
size_t gs_format_long_double(char *buf, size_t cap, long double v)
{
    int l = snprintf(buf, cap, "%.17Lf", v);
    if (l < 0 || (size_t)l + 1 > cap)
        return 0;
    if (memchr(buf, '.', (size_t)l)) {
        while (buf[l - 1] == '0')
            l--;
        if (buf[l - 1] == '.')
            l--;
    }
    if (l == 2 && buf[0] == '-' && buf[1] == '0') {
        buf[0] = '0';
        l = 1;
    }
    return (size_t)l;
}

void gs_cmd_incrbyfloat(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    bool wrong;
    struct gs_entry *e = gs_lookup_typed(c, &argv[1], GS_TYPE_STRING, GS_LOOKUP_WRITE, &wrong);
    if (wrong)
        return;
    long double v = 0, incr;
    if (e) {
        size_t len;
        const char *p = gs_entry_value(e, &len);
        if (!gs_parse_long_double(p, len, &v)) {
            gs_error(c, "ERR value is not a valid float");
            return;
        }
    }
    if (!gs_parse_long_double(argv[2].p, argv[2].len, &incr)) {
        gs_error(c, "ERR value is not a valid float");
        return;
    }
    v += incr;
    if (isnan(v) || isinf(v)) {
        gs_error(c, "ERR increment would produce NaN or Infinity");
        return;
    }
    char buf[MAX_LONG_DOUBLE_CHARS];
    size_t n = gs_format_long_double(buf, sizeof(buf), v);
    if (n == 0) {
        gs_error(c, "ERR value is not a valid float");
        return;
    }
    if (store_value(c, &argv[1], e, buf, n))
        gs_reply_bulk(&c->w, buf, n);
}

static bool check_string_length(struct gs_client *c, uint64_t len)
{
    if (len > (uint64_t)c->shared->proto_max_bulk_len) {
        gs_error(c, "ERR string exceeds maximum allowed size (proto-max-bulk-len)");
        return false;
    }
    return true;
}

void gs_cmd_append(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_store *s = c->db->store;
    bool wrong;
    struct gs_entry *e = gs_lookup_typed(c, &argv[1], GS_TYPE_STRING, GS_LOOKUP_WRITE, &wrong);
    if (wrong)
        return;
    if (!e) {
        if (gs_store_set(s, argv[1].p, argv[1].len, argv[2].p, argv[2].len, -1, NULL))
            gs_error_oom(c);
        else
            gs_reply_int(&c->w, (int64_t)argv[2].len);
        return;
    }
    size_t old;
    gs_entry_value(e, &old);
    if (!check_string_length(c, (uint64_t)old + argv[2].len))
        return;
    char *dst = gs_store_resize_value(s, &e, old + argv[2].len);
    if (!dst) {
        gs_error_oom(c);
        return;
    }
    memcpy(dst + old, argv[2].p, argv[2].len);
    gs_reply_int(&c->w, (int64_t)(old + argv[2].len));
}

void gs_cmd_strlen(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    bool wrong;
    struct gs_entry *e = gs_lookup_typed(c, &argv[1], GS_TYPE_STRING, 0, &wrong);
    if (wrong)
        return;
    size_t len = 0;
    if (e)
        gs_entry_value(e, &len);
    gs_reply_int(&c->w, (int64_t)len);
}

void gs_cmd_getrange(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t start, end;
    if (!gs_arg_int(c, &argv[2], &start, NULL) || !gs_arg_int(c, &argv[3], &end, NULL))
        return;
    bool wrong;
    struct gs_entry *e = gs_lookup_typed(c, &argv[1], GS_TYPE_STRING, 0, &wrong);
    if (wrong)
        return;
    if (!e) {
        gs_reply_bulk(&c->w, "", 0);
        return;
    }
    size_t slen;
    const char *v = gs_entry_value(e, &slen);
    int64_t len = (int64_t)slen;
    /* Redis 7's getrangeCommand, including its negative-range rule. */
    if (start < 0 && end < 0 && start > end) {
        gs_reply_bulk(&c->w, "", 0);
        return;
    }
    if (start < 0)
        start = len + start;
    if (end < 0)
        end = len + end;
    if (start < 0)
        start = 0;
    if (end < 0)
        end = 0;
    if (end >= len)
        end = len - 1;
    if (start > end || len == 0) {
        gs_reply_bulk(&c->w, "", 0);
        return;
    }
    gs_reply_bulk(&c->w, v + start, (size_t)(end - start + 1));
}

void gs_cmd_setrange(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_store *s = c->db->store;
    int64_t offset;
    if (!gs_arg_int(c, &argv[2], &offset, NULL))
        return;
    if (offset < 0) {
        gs_error(c, "ERR offset is out of range");
        return;
    }
    const struct gs_arg *val = &argv[3];
    bool wrong;
    struct gs_entry *e = gs_lookup_typed(c, &argv[1], GS_TYPE_STRING, GS_LOOKUP_WRITE, &wrong);
    if (wrong)
        return;
    size_t old = 0;
    if (e)
        gs_entry_value(e, &old);
    if (val->len == 0) { /* nothing to write: report the length as is */
        gs_reply_int(&c->w, (int64_t)old);
        return;
    }
    if (!check_string_length(c, (uint64_t)offset + val->len))
        return;
    size_t need = (size_t)offset + val->len;
    if (!e) {
        if (gs_store_set(s, argv[1].p, argv[1].len, "", 0, -1, &e)) {
            gs_error_oom(c);
            return;
        }
    }
    char *dst;
    if (need > old) {
        dst = gs_store_resize_value(s, &e, need);
    } else {
        size_t l;
        dst = gs_entry_value(e, &l);
    }
    if (!dst) {
        gs_error_oom(c);
        return;
    }
    memcpy(dst + offset, val->p, val->len);
    gs_store_signal_modified(s, e); /* written in place: WATCH must see it */
    gs_reply_int(&c->w, (int64_t)(need > old ? need : old));
}

/* Redis 7.0's lcsCommand: the longest common subsequence of two strings,
 * by the dynamic-programming table of LCS lengths (O(|a|·|b|) time and
 * 4·(|a|+1)·(|b|+1) bytes of transient memory, refused above
 * proto-max-bulk-len as Redis refuses it), walked back from the end for
 * the string and the matching ranges. Replies as Redis's, range order
 * (last first) included. */
struct lcs_range {
    uint32_t a0, a1, b0, b1;
};

void gs_cmd_lcs(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_entry *ea = gs_store_lookup(c->db->store, argv[1].p, argv[1].len, c->db->now_ms, 0);
    struct gs_entry *eb = gs_store_lookup(c->db->store, argv[2].p, argv[2].len, c->db->now_ms, 0);
    if ((ea && gs_entry_type(ea) != GS_TYPE_STRING) ||
        (eb && gs_entry_type(eb) != GS_TYPE_STRING)) {
        gs_error(c, "ERR The specified keys must contain string values");
        return;
    }
    bool getlen = false, getidx = false, withmatchlen = false;
    int64_t minmatchlen = 0;
    for (size_t j = 3; j < argc; j++) {
        size_t more = argc - 1 - j;
        if (gs_arg_is(&argv[j], "idx")) {
            getidx = true;
        } else if (gs_arg_is(&argv[j], "len")) {
            getlen = true;
        } else if (gs_arg_is(&argv[j], "withmatchlen")) {
            withmatchlen = true;
        } else if (gs_arg_is(&argv[j], "minmatchlen") && more) {
            if (!gs_arg_int(c, &argv[j + 1], &minmatchlen, NULL))
                return;
            if (minmatchlen < 0)
                minmatchlen = 0;
            j++;
        } else {
            gs_error_syntax(c);
            return;
        }
    }
    if (getidx && getlen) {
        gs_error(c, "ERR If you want both the length and indexes, please just use IDX.");
        return;
    }
    size_t la = 0, lb = 0;
    const char *a = ea ? gs_entry_value(ea, &la) : "";
    const char *b = eb ? gs_entry_value(eb, &lb) : "";
    if (la >= UINT32_MAX - 1 || lb >= UINT32_MAX - 1) {
        gs_error(c, "ERR String too long for LCS");
        return;
    }
    uint32_t alen = (uint32_t)la, blen = (uint32_t)lb;
    unsigned long long cells = (unsigned long long)(alen + 1) * (blen + 1);
    unsigned long long bytes = cells * sizeof(uint32_t);
    uint32_t *lcs = NULL;
    if (bytes < SIZE_MAX && bytes / cells == sizeof(uint32_t)) {
        if (bytes > (unsigned long long)c->shared->proto_max_bulk_len) {
            gs_error(c, "ERR Insufficient memory, transient memory for LCS exceeds "
                        "proto-max-bulk-len");
            return;
        }
        lcs = malloc((size_t)bytes);
    }
    if (!lcs) {
        gs_error(c, "ERR Insufficient memory, failed allocating transient memory for LCS");
        return;
    }
#define LCS(A, B) lcs[(size_t)(B) + (size_t)(A) * (blen + 1)]
    for (uint32_t i = 0; i <= alen; i++) {
        for (uint32_t j = 0; j <= blen; j++) {
            if (i == 0 || j == 0)
                LCS(i, j) = 0;
            else if (a[i - 1] == b[j - 1])
                LCS(i, j) = LCS(i - 1, j - 1) + 1;
            else
                LCS(i, j) = LCS(i - 1, j) > LCS(i, j - 1) ? LCS(i - 1, j) : LCS(i, j - 1);
        }
    }
    uint32_t total = LCS(alen, blen), idx = total;
    bool computelcs = getidx || !getlen;
    char *result = computelcs ? malloc(total ? total : 1) : NULL;
    struct lcs_range *ranges = NULL;
    size_t nranges = 0, cap = 0;
    if (computelcs && !result) {
        free(lcs);
        gs_error_oom(c);
        return;
    }
    uint32_t as = alen, ae = 0, bs = 0, be = 0; /* as == alen: no range open */
    uint32_t i = alen, j = blen;
    while (computelcs && i > 0 && j > 0) {
        bool emit = false;
        if (a[i - 1] == b[j - 1]) {
            result[idx - 1] = a[i - 1];
            if (as == alen) {
                as = ae = i - 1;
                bs = be = j - 1;
            } else if (as == i && bs == j) { /* contiguous: extend backwards */
                as--;
                bs--;
            } else {
                emit = true;
            }
            if (as == 0 || bs == 0)
                emit = true;
            idx--;
            i--;
            j--;
        } else {
            if (LCS(i - 1, j) > LCS(i, j - 1))
                i--;
            else
                j--;
            if (as != alen)
                emit = true;
        }
        uint32_t match_len = ae - as + 1;
        if (emit) {
            if (getidx && (minmatchlen == 0 || match_len >= (uint64_t)minmatchlen)) {
                if (nranges == cap) {
                    size_t ncap = cap ? cap * 2 : 16;
                    struct lcs_range *r = realloc(ranges, ncap * sizeof(*r));
                    if (!r) {
                        free(ranges);
                        free(result);
                        free(lcs);
                        gs_error_oom(c);
                        return;
                    }
                    ranges = r;
                    cap = ncap;
                }
                ranges[nranges++] = (struct lcs_range){as, ae, bs, be};
            }
            as = alen;
        }
    }
#undef LCS
    free(lcs);
    if (getidx) {
        gs_reply_map(&c->w, 2);
        gs_reply_bulk_cstr(&c->w, "matches");
        gs_reply_array(&c->w, nranges);
        for (size_t k = 0; k < nranges; k++) {
            gs_reply_array(&c->w, withmatchlen ? 3 : 2);
            gs_reply_array(&c->w, 2);
            gs_reply_int(&c->w, ranges[k].a0);
            gs_reply_int(&c->w, ranges[k].a1);
            gs_reply_array(&c->w, 2);
            gs_reply_int(&c->w, ranges[k].b0);
            gs_reply_int(&c->w, ranges[k].b1);
            if (withmatchlen)
                gs_reply_int(&c->w, (int64_t)ranges[k].a1 - ranges[k].a0 + 1);
        }
        gs_reply_bulk_cstr(&c->w, "len");
        gs_reply_int(&c->w, total);
    } else if (getlen) {
        gs_reply_int(&c->w, idx);
    } else {
        gs_reply_bulk(&c->w, result, total);
    }
    free(ranges);
    free(result);
}
