/*
 * Key space and expiry commands, following Redis's db.c and expire.c
 * (same checks in the same order, same error texts).
 *
 * One database: SELECT 0 (and COPY ... DB 0) work; any other index is
 * "ERR DB index is out of range", as a Redis with `databases 1`.
 */
#include "gridsync/client/client.h"
#include "gridsync/commands/commands.h"

#include "gridsync/commands/glob.h"
#include "gridsync/commands/multi.h"
#include "gridsync/types/value.h"

#include <stdlib.h>
#include <string.h>

/* The node's scratch buffer serves every client; one KEYS over a big key
 * space or a RENAME of a big value would otherwise keep it at that size
 * for good, outside used_memory and maxmemory. */
#define SCRATCH_KEEP (256 * 1024)

static void scratch_done(struct gs_shared *sh)
{
    if (sh->scratch.cap > SCRATCH_KEEP)
        core_buf_free(&sh->scratch);
}

void gs_cmd_del(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t now = c->db->now_ms, n = 0;
    for (size_t i = 1; i < argc; i++)
        n += gs_store_delete(c->db->store, argv[i].p, argv[i].len, now);
    gs_reply_int(&c->w, n);
}

/* UNLINK: as DEL, but big collections are freed off the request path. */
void gs_cmd_unlink(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t now = c->db->now_ms, n = 0;
    for (size_t i = 1; i < argc; i++)
        n += gs_store_unlink(c->db->store, argv[i].p, argv[i].len, now);
    gs_reply_int(&c->w, n);
}

void gs_cmd_exists(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t now = c->db->now_ms, n = 0;
    for (size_t i = 1; i < argc; i++) /* a key named twice counts twice, as Redis */
        n += gs_store_lookup(c->db->store, argv[i].p, argv[i].len, now, GS_LOOKUP_NOTOUCH) != NULL;
    gs_reply_int(&c->w, n);
}

/* TOUCH: a read of each key (LRU and hit/miss counters), counting the
 * keys that exist; a key named twice counts twice, as Redis. */
void gs_cmd_touch(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t now = c->db->now_ms, n = 0;
    for (size_t i = 1; i < argc; i++)
        n += gs_store_lookup(c->db->store, argv[i].p, argv[i].len, now, 0) != NULL;
    gs_reply_int(&c->w, n);
}

void gs_cmd_type(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_entry *e =
        gs_store_lookup(c->db->store, argv[1].p, argv[1].len, c->db->now_ms, GS_LOOKUP_NOTOUCH);
    const char *name = e ? gs_type_name(gs_entry_type(e)) : "none";
    gs_reply_simple(&c->w, name, strlen(name));
}

/* Store a copy of e's value and expiry under dst (RENAME, COPY). The value
 * is copied aside first: setting the destination may move entries. On
 * failure replies OOM and returns false. */
static bool copy_entry(struct gs_client *c, struct gs_entry *e, struct gs_db *db,
                       const struct gs_arg *dst)
{
    struct gs_obj o;
    if (gs_entry_obj(e, &o)) { /* a collection: a deep copy */
        struct gs_obj copy;
        if (gs_obj_dup(&copy, &o) != 0) {
            gs_error_oom(c);
            return false;
        }
        if (gs_store_set_obj(db->store, dst->p, dst->len, &copy, gs_entry_expire_ms(e), NULL)) {
            gs_obj_free(&copy);
            gs_error_oom(c);
            return false;
        }
        gs_key_ready(c, db, dst->p, dst->len); /* COPY, MOVE: Redis's dbAdd */
        return true;
    }
    size_t vlen;
    const char *v = gs_entry_value(e, &vlen);
    int64_t expire = gs_entry_expire_ms(e);
    c->shared->scratch.len = 0;
    core_buf_append(&c->shared->scratch, v, vlen);
    if (c->shared->scratch.oom) {
        core_buf_free(&c->shared->scratch);
        gs_error_oom(c);
        return false;
    }
    int rc = gs_store_set(db->store, dst->p, dst->len, c->shared->scratch.data, vlen, expire, NULL);
    scratch_done(c->shared);
    if (rc) {
        gs_error_oom(c);
        return false;
    }
    return true;
}

/* Redis's renameGenericCommand. */
static void rename_generic(struct gs_client *c, struct gs_arg *argv, bool nx)
{
    int64_t now = c->db->now_ms;
    struct gs_entry *e =
        gs_store_lookup(c->db->store, argv[1].p, argv[1].len, now, GS_LOOKUP_WRITE);
    if (!e) {
        gs_error(c, "ERR no such key");
        return;
    }
    if (argv[1].len == argv[2].len && memcmp(argv[1].p, argv[2].p, argv[1].len) == 0) {
        if (nx)
            gs_reply_int(&c->w, 0);
        else
            gs_reply_ok(&c->w);
        return;
    }
    if (nx && gs_store_lookup(c->db->store, argv[2].p, argv[2].len, now, GS_LOOKUP_WRITE)) {
        gs_reply_int(&c->w, 0);
        return;
    }
    if (gs_entry_type(e) != GS_TYPE_STRING) {
        /* A collection moves to the new name; nothing is copied. */
        if (gs_store_move_obj(c->db->store, e, argv[2].p, argv[2].len, gs_entry_expire_ms(e))) {
            gs_error_oom(c);
            return;
        }
        gs_key_ready(c, c->db, argv[2].p, argv[2].len);
    } else {
        if (!copy_entry(c, e, c->db, &argv[2]))
            return;
        gs_store_delete(c->db->store, argv[1].p, argv[1].len, now);
    }
    if (nx)
        gs_reply_int(&c->w, 1);
    else
        gs_reply_ok(&c->w);
}

void gs_cmd_rename(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    rename_generic(c, argv, false);
}

void gs_cmd_renamenx(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    rename_generic(c, argv, true);
}

/* A DB index argument (SELECT, MOVE, SWAPDB, COPY ... DB): Redis's
 * getIntFromObjectOrReply (msg replaces its texts when not NULL). Returns
 * false after replying. */
static bool db_index(struct gs_client *c, const struct gs_arg *a, const char *msg, int64_t *id)
{
    if (!gs_arg_int(c, a, id, msg))
        return false;
    if (*id < INT32_MIN || *id > INT32_MAX) {
        gs_error(c, msg ? msg
                        : "ERR value is out of range, value must between -2147483648 and "
                          "2147483647");
        return false;
    }
    return true;
}

/* Redis's selectDb: the database with that index, or NULL (out of range;
 * cluster mode has database 0 only). */
static struct gs_db *db_of(struct gs_client *c, int64_t id)
{
    return id >= 0 && id < (int64_t)c->shared->n_dbs ? &c->shared->dbs[id] : NULL;
}

/* Redis's copyCommand. */
void gs_cmd_copy(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    bool replace = false;
    struct gs_db *dst = c->db;
    for (size_t j = 3; j < argc; j++) {
        if (gs_arg_is(&argv[j], "replace")) {
            replace = true;
        } else if (gs_arg_is(&argv[j], "db") && j + 1 < argc) {
            int64_t id;
            if (!db_index(c, &argv[j + 1], NULL, &id))
                return;
            /* Redis Cluster has the databases but refuses to use them. */
            if (c->shared->cluster_mode && id > 0 && id < c->shared->databases) {
                gs_error(c, "ERR Copying to another database is not allowed in cluster mode");
                return;
            }
            if (!(dst = db_of(c, id))) {
                gs_error(c, "ERR DB index is out of range");
                return;
            }
            j++;
        } else {
            gs_error_syntax(c);
            return;
        }
    }
    if (dst == c->db && argv[1].len == argv[2].len &&
        memcmp(argv[1].p, argv[2].p, argv[1].len) == 0) {
        gs_error(c, "ERR source and destination objects are the same");
        return;
    }
    int64_t now = c->db->now_ms;
    struct gs_entry *e = gs_store_lookup(c->db->store, argv[1].p, argv[1].len, now, 0);
    if (!e) {
        gs_reply_int(&c->w, 0);
        return;
    }
    if (!replace && gs_store_lookup(dst->store, argv[2].p, argv[2].len, now, GS_LOOKUP_WRITE)) {
        gs_reply_int(&c->w, 0);
        return;
    }
    if (!copy_entry(c, e, dst, &argv[2]))
        return;
    gs_reply_int(&c->w, 1);
}

/* Keys collected by a scan, pointing into the store (valid while it is not
 * modified), stored in the node's scratch buffer. */
struct collect {
    struct core_buf *buf;
    const struct gs_arg *pattern; /* NULL: every key */
    int type;                     /* SCAN TYPE: enum gs_type, or -1 for any */
};

static void collect_key(void *arg, const struct gs_entry *e)
{
    struct collect *col = arg;
    struct gs_arg k;
    k.p = gs_entry_key(e, &k.len);
    if (col->pattern && !gs_glob_match(col->pattern->p, col->pattern->len, k.p, k.len, false))
        return;
    if (col->type >= 0 && gs_entry_type(e) != col->type)
        return;
    core_buf_append(col->buf, &k, sizeof(k));
}

static void reply_collected(struct gs_client *c, struct core_buf *buf)
{
    size_t n = buf->len / sizeof(struct gs_arg);
    const struct gs_arg *keys = (const struct gs_arg *)buf->data;
    gs_reply_array(&c->w, n);
    for (size_t i = 0; i < n; i++)
        gs_reply_bulk(&c->w, keys[i].p, keys[i].len);
}

static bool is_star(const struct gs_arg *a)
{
    return a->len == 1 && a->p[0] == '*';
}

void gs_cmd_keys(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    c->shared->scratch.len = 0;
    struct collect col = {&c->shared->scratch, is_star(&argv[1]) ? NULL : &argv[1], -1};
    uint64_t cursor = 0;
    int64_t now = c->db->now_ms;
    do
        cursor = gs_store_scan(c->db->store, cursor, 1024, now, collect_key, &col);
    while (cursor != 0);
    if (c->shared->scratch.oom) {
        core_buf_free(&c->shared->scratch);
        gs_error_oom(c);
        return;
    }
    reply_collected(c, &c->shared->scratch);
    scratch_done(c->shared);
}

/* Redis's scanGenericCommand for the key space. */
void gs_cmd_scan(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    uint64_t cursor;
    struct gs_scan_opts opts;
    if (!gs_parse_scan_cursor(c, &argv[1], &cursor) ||
        !gs_parse_scan_opts(c, argc, argv, 2, true, &opts))
        return;
    c->shared->scratch.len = 0;
    struct collect col = {&c->shared->scratch, opts.pattern, opts.type};
    cursor =
        gs_store_scan(c->db->store, cursor, (size_t)opts.count, c->db->now_ms, collect_key, &col);
    if (c->shared->scratch.oom) {
        core_buf_free(&c->shared->scratch);
        gs_error_oom(c);
        return;
    }
    if (opts.type_none)
        c->shared->scratch.len = 0;
    gs_reply_array(&c->w, 2);
    gs_reply_bulk_int(&c->w, (int64_t)cursor); /* Redis sends it as a string */
    reply_collected(c, &c->shared->scratch);
    scratch_done(c->shared);
}

void gs_cmd_randomkey(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_entry *e = gs_store_random(c->db->store, c->db->now_ms);
    if (!e) {
        gs_reply_null(&c->w);
        return;
    }
    size_t len;
    const char *k = gs_entry_key(e, &len);
    gs_reply_bulk(&c->w, k, len);
}

void gs_cmd_dbsize(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_store_stats st;
    gs_store_stats(c->db->store, &st);
    gs_reply_int(&c->w, (int64_t)st.keys);
}

/* FLUSHDB and FLUSHALL [ASYNC|SYNC]: both clear the one database. */
static bool flush_args_ok(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (argc > 2 || (argc == 2 && !gs_arg_is(&argv[1], "async") && !gs_arg_is(&argv[1], "sync"))) {
        gs_error_syntax(c);
        return false;
    }
    return true;
}

void gs_cmd_flushdb(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (!flush_args_ok(c, argc, argv))
        return;
    gs_store_clear(c->db->store);
    gs_reply_ok(&c->w);
}

void gs_cmd_flushall(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (!flush_args_ok(c, argc, argv))
        return;
    if (c->shared->cluster_mode) {
        /* Database 0 only; each Raft group's entry empties its own store
         * (the context the cluster gives the command, client.h). */
        gs_store_clear(c->db->store);
    } else {
        for (unsigned d = 0; d < c->shared->n_dbs; d++)
            gs_store_clear(c->shared->dbs[d].store);
    }
    gs_reply_ok(&c->w);
}

void gs_cmd_select(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t id;
    if (!db_index(c, &argv[1], NULL, &id))
        return;
    if (c->shared->cluster_mode && id != 0) {
        gs_error(c, "ERR SELECT is not allowed in cluster mode");
        return;
    }
    struct gs_db *db = db_of(c, id);
    if (!db) {
        gs_error(c, "ERR DB index is out of range");
        return;
    }
    db->now_ms = c->db->now_ms;
    c->db = db;
    gs_reply_ok(&c->w);
}

/* Redis 7.0's moveCommand: the key, its value and TTL go to database db
 * if it is not there already. */
void gs_cmd_move(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (c->shared->cluster_mode) {
        gs_error(c, "ERR MOVE is not allowed in cluster mode");
        return;
    }
    int64_t id;
    if (!db_index(c, &argv[2], NULL, &id))
        return;
    struct gs_db *dst = db_of(c, id);
    if (!dst) {
        gs_error(c, "ERR DB index is out of range");
        return;
    }
    if (dst == c->db) {
        gs_error(c, "ERR source and destination objects are the same");
        return;
    }
    int64_t now = c->db->now_ms;
    dst->now_ms = now;
    struct gs_entry *e =
        gs_store_lookup(c->db->store, argv[1].p, argv[1].len, now, GS_LOOKUP_WRITE);
    if (!e || gs_store_lookup(dst->store, argv[1].p, argv[1].len, now, GS_LOOKUP_WRITE)) {
        gs_reply_int(&c->w, 0);
        return;
    }
    if (!copy_entry(c, e, dst, &argv[1]))
        return;
    gs_store_delete(c->db->store, argv[1].p, argv[1].len, now);
    gs_reply_int(&c->w, 1);
}

/* Redis 7.0's swapdbCommand: clients keep their database numbers and see
 * each other's data. */
void gs_cmd_swapdb(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (c->shared->cluster_mode) {
        gs_error(c, "ERR SWAPDB is not allowed in cluster mode");
        return;
    }
    int64_t a, b;
    if (!db_index(c, &argv[1], "ERR invalid first DB index", &a) ||
        !db_index(c, &argv[2], "ERR invalid second DB index", &b))
        return;
    struct gs_db *da = db_of(c, a), *db = db_of(c, b);
    if (!da || !db) {
        gs_error(c, "ERR DB index is out of range");
        return;
    }
    struct gs_store *t = da->store;
    da->store = db->store;
    db->store = t;
    da->now_ms = db->now_ms = c->db->now_ms;
    gs_multi_swapped(c->node, (unsigned)a, (unsigned)b);
    /* Redis's scanDatabaseForReadyKeys: clients blocked in either
     * database may find their keys there now. */
    gs_key_ready(c, da, NULL, 0);
    gs_key_ready(c, db, NULL, 0);
    gs_reply_ok(&c->w);
}

/* ------------------------------------------------------------- expiry */

enum { EXP_NX = 1, EXP_XX = 2, EXP_GT = 4, EXP_LT = 8 };

/* Redis's parseExtendedExpireArgumentsOrReply. */
static bool parse_expire_flags(struct gs_client *c, size_t argc, struct gs_arg *argv, int *flags)
{
    int nx = 0, xx = 0, gt = 0, lt = 0;
    for (size_t j = 3; j < argc; j++) {
        if (gs_arg_is(&argv[j], "nx"))
            nx = 1;
        else if (gs_arg_is(&argv[j], "xx"))
            xx = 1;
        else if (gs_arg_is(&argv[j], "gt"))
            gt = 1;
        else if (gs_arg_is(&argv[j], "lt"))
            lt = 1;
        else {
            gs_errorf(c, "ERR Unsupported option %.*s", (int)argv[j].len, argv[j].p);
            return false;
        }
    }
    if (nx && (xx || gt || lt)) {
        gs_error(c, "ERR NX and XX, GT or LT options at the same time are not compatible");
        return false;
    }
    if (gt && lt) {
        gs_error(c, "ERR GT and LT options at the same time are not compatible");
        return false;
    }
    *flags = (nx ? EXP_NX : 0) | (xx ? EXP_XX : 0) | (gt ? EXP_GT : 0) | (lt ? EXP_LT : 0);
    return true;
}

/* Redis's expireGenericCommand. basetime: now for relative commands, 0
 * for the *AT ones; seconds: the unit of the argument. */
static void expire_generic(struct gs_client *c, size_t argc, struct gs_arg *argv, bool relative,
                           bool seconds, const char *name)
{
    int flags;
    if (!parse_expire_flags(c, argc, argv, &flags))
        return;
    int64_t when;
    if (!gs_arg_int(c, &argv[2], &when, NULL))
        return;
    int64_t now = c->db->now_ms;
    if (seconds) {
        if (when > INT64_MAX / 1000 || when < INT64_MIN / 1000) {
            gs_errorf(c, "ERR invalid expire time in '%s' command", name);
            return;
        }
        when *= 1000;
    }
    if (relative) {
        if ((when > 0 && now > INT64_MAX - when) || (when < 0 && now < INT64_MIN - when)) {
            gs_errorf(c, "ERR invalid expire time in '%s' command", name);
            return;
        }
        when += now;
    }
    struct gs_entry *e =
        gs_store_lookup(c->db->store, argv[1].p, argv[1].len, now, GS_LOOKUP_WRITE);
    if (!e) {
        gs_reply_int(&c->w, 0);
        return;
    }
    if (flags) {
        int64_t cur = gs_entry_expire_ms(e); /* -1: none, i.e. infinite */
        if ((flags & EXP_NX) && cur != -1) {
            gs_reply_int(&c->w, 0);
            return;
        }
        if ((flags & EXP_XX) && cur == -1) {
            gs_reply_int(&c->w, 0);
            return;
        }
        if ((flags & EXP_GT) && (cur == -1 || when <= cur)) {
            gs_reply_int(&c->w, 0);
            return;
        }
        if ((flags & EXP_LT) && cur != -1 && when >= cur) {
            gs_reply_int(&c->w, 0);
            return;
        }
    }
    if (when <= now) { /* checkAlreadyExpired: the key goes now */
        gs_store_delete_entry(c->db->store, e);
    } else if (gs_store_set_expire(c->db->store, &e, when)) {
        gs_error_oom(c);
        return;
    }
    gs_reply_int(&c->w, 1);
}

void gs_cmd_expire(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    expire_generic(c, argc, argv, true, true, "expire");
}

void gs_cmd_pexpire(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    expire_generic(c, argc, argv, true, false, "pexpire");
}

void gs_cmd_expireat(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    expire_generic(c, argc, argv, false, true, "expireat");
}

void gs_cmd_pexpireat(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    expire_generic(c, argc, argv, false, false, "pexpireat");
}

/* Redis's ttlGenericCommand: TTL/PTTL (relative) and EXPIRETIME/
 * PEXPIRETIME (absolute, Redis 7.0); -2 no key, -1 no expiry; seconds are
 * rounded to the nearest. */
static void ttl_generic(struct gs_client *c, struct gs_arg *key, bool ms, bool absolute)
{
    int64_t now = c->db->now_ms;
    struct gs_entry *e = gs_store_lookup(c->db->store, key->p, key->len, now, GS_LOOKUP_NOTOUCH);
    if (!e) {
        gs_reply_int(&c->w, -2);
        return;
    }
    int64_t exp = gs_entry_expire_ms(e);
    if (exp == -1) {
        gs_reply_int(&c->w, -1);
        return;
    }
    int64_t ttl = absolute ? exp : exp - now;
    if (ttl < 0)
        ttl = 0;
    /* ttl >= 0 here; unsigned, as the sum overflows for an expiry near
     * INT64_MAX (PEXPIREAT k 9223372036854775807 is allowed). */
    gs_reply_int(&c->w, ms ? ttl : (int64_t)(((uint64_t)ttl + 500) / 1000));
}

void gs_cmd_ttl(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    ttl_generic(c, &argv[1], false, false);
}

void gs_cmd_pttl(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    ttl_generic(c, &argv[1], true, false);
}

void gs_cmd_expiretime(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    ttl_generic(c, &argv[1], false, true);
}

void gs_cmd_pexpiretime(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    ttl_generic(c, &argv[1], true, true);
}

void gs_cmd_persist(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_entry *e =
        gs_store_lookup(c->db->store, argv[1].p, argv[1].len, c->db->now_ms, GS_LOOKUP_WRITE);
    if (e && gs_entry_expire_ms(e) != -1) {
        gs_store_set_expire(c->db->store, &e, -1); /* clearing never fails */
        gs_reply_int(&c->w, 1);
    } else {
        gs_reply_int(&c->w, 0);
    }
}
