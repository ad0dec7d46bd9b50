/*
 * Hash commands, following Redis 7.0's t_hash.c: the same checks in the
 * same order (arguments, then the key's type, then the field's value),
 * the same error texts and reply shapes in RESP2 and RESP3. The data
 * structure is gridsync/types/hash/.
 *
 * A hash reached for writing is copied out of its entry (gs_entry_obj),
 * changed, and handed back with gs_store_obj_update, which recounts its
 * memory; a hash left empty is deleted, as Redis never keeps an empty
 * collection.
 */
#include "gridsync/client/client.h"
#include "gridsync/commands/commands.h"

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "gridsync/commands/scan.h"
#include "gridsync/types/hash/hash.h"

/* The hash at key for reading: false after replying WRONGTYPE (or when
 * missing: *found false). */
static bool hash_read(struct gs_client *c, const struct gs_arg *key, struct gs_obj *o, bool *found)
{
    bool wrong;
    struct gs_entry *e = gs_lookup_typed(c, key, GS_TYPE_HASH, 0, &wrong);
    *found = e != NULL;
    if (e)
        gs_entry_obj(e, o);
    return !wrong;
}

/* The hash at key for writing, created empty when missing (Redis's
 * hashTypeLookupWriteOrCreate). NULL after replying WRONGTYPE or OOM. */
static struct gs_entry *hash_write(struct gs_client *c, const struct gs_arg *key, struct gs_obj *o)
{
    bool wrong;
    struct gs_entry *e = gs_lookup_typed(c, key, GS_TYPE_HASH, GS_LOOKUP_WRITE, &wrong);
    if (wrong)
        return NULL;
    if (e) {
        gs_entry_obj(e, o);
        return e;
    }
    if (gs_hash_init(o) != 0) {
        gs_error_oom(c);
        return NULL;
    }
    if (gs_store_set_obj(c->db->store, key->p, key->len, o, -1, &e) != 0) {
        gs_hash_free(o);
        gs_error_oom(c);
        return NULL;
    }
    return e;
}

/* Hand a changed hash back to its entry, or delete the key when empty. */
static void hash_done(struct gs_client *c, struct gs_entry *e, struct gs_obj *o)
{
    if (gs_hash_len(o) == 0) {
        gs_store_obj_update(c->db->store, e, o);
        gs_store_delete_entry(c->db->store, e);
    } else {
        gs_store_obj_update(c->db->store, e, o);
    }
}

/* HSET / HMSET: the pairs are set in order; a failure midway keeps what
 * was set (Redis cannot fail there; we can only run out of memory). */
static bool set_pairs(struct gs_client *c, size_t argc, struct gs_arg *argv, int64_t *created)
{
    struct gs_obj o;
    struct gs_entry *e = hash_write(c, &argv[1], &o);
    if (!e)
        return false;
    struct gs_type_limits lim = c->shared->limits;
    *created = 0;
    int rc = 0;
    for (size_t i = 2; i < argc && rc == 0; i += 2) {
        bool fresh;
        rc = gs_hash_set(&o, argv[i].p, argv[i].len, argv[i + 1].p, argv[i + 1].len, &lim, &fresh);
        if (rc == 0 && fresh)
            (*created)++;
    }
    hash_done(c, e, &o);
    if (rc) {
        gs_error_oom(c);
        return false;
    }
    return true;
}

void gs_cmd_hset(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (argc % 2 == 1) {
        gs_error_arity(c, "hset");
        return;
    }
    int64_t n;
    if (set_pairs(c, argc, argv, &n))
        gs_reply_int(&c->w, n);
}

void gs_cmd_hmset(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (argc % 2 == 1) {
        gs_error_arity(c, "hmset");
        return;
    }
    int64_t n;
    if (set_pairs(c, argc, argv, &n))
        gs_reply_ok(&c->w);
}

void gs_cmd_hsetnx(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_obj o;
    struct gs_entry *e = hash_write(c, &argv[1], &o);
    if (!e)
        return;
    char buf[GS_LP_INTBUF];
    const char *v;
    size_t vlen;
    if (gs_hash_get(&o, argv[2].p, argv[2].len, buf, &v, &vlen)) {
        gs_reply_int(&c->w, 0);
        return;
    }
    struct gs_type_limits lim = c->shared->limits;
    int rc = gs_hash_set(&o, argv[2].p, argv[2].len, argv[3].p, argv[3].len, &lim, NULL);
    hash_done(c, e, &o);
    if (rc)
        gs_error_oom(c);
    else
        gs_reply_int(&c->w, 1);
}

void gs_cmd_hget(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_obj o;
    bool found;
    if (!hash_read(c, &argv[1], &o, &found))
        return;
    char buf[GS_LP_INTBUF];
    const char *v;
    size_t vlen;
    if (found && gs_hash_get(&o, argv[2].p, argv[2].len, buf, &v, &vlen))
        gs_reply_bulk(&c->w, v, vlen);
    else
        gs_reply_null(&c->w);
}

void gs_cmd_hmget(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_obj o;
    bool found;
    if (!hash_read(c, &argv[1], &o, &found))
        return;
    gs_reply_array(&c->w, argc - 2);
    for (size_t i = 2; i < argc; i++) {
        char buf[GS_LP_INTBUF];
        const char *v;
        size_t vlen;
        if (found && gs_hash_get(&o, argv[i].p, argv[i].len, buf, &v, &vlen))
            gs_reply_bulk(&c->w, v, vlen);
        else
            gs_reply_null(&c->w);
    }
}

void gs_cmd_hdel(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    bool wrong;
    struct gs_entry *e = gs_lookup_typed(c, &argv[1], GS_TYPE_HASH, GS_LOOKUP_WRITE, &wrong);
    if (wrong)
        return;
    if (!e) {
        gs_reply_int(&c->w, 0);
        return;
    }
    struct gs_obj o;
    gs_entry_obj(e, &o);
    int64_t n = 0;
    for (size_t i = 2; i < argc && gs_hash_len(&o) > 0; i++)
        n += gs_hash_delete(&o, argv[i].p, argv[i].len);
    if (n > 0)
        hash_done(c, e, &o);
    gs_reply_int(&c->w, n);
}

void gs_cmd_hlen(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_obj o;
    bool found;
    if (!hash_read(c, &argv[1], &o, &found))
        return;
    gs_reply_int(&c->w, found ? (int64_t)gs_hash_len(&o) : 0);
}

void gs_cmd_hstrlen(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_obj o;
    bool found;
    if (!hash_read(c, &argv[1], &o, &found))
        return;
    char buf[GS_LP_INTBUF];
    const char *v;
    size_t vlen = 0;
    if (!found || !gs_hash_get(&o, argv[2].p, argv[2].len, buf, &v, &vlen))
        vlen = 0;
    gs_reply_int(&c->w, (int64_t)vlen);
}

void gs_cmd_hexists(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_obj o;
    bool found;
    if (!hash_read(c, &argv[1], &o, &found))
        return;
    char buf[GS_LP_INTBUF];
    const char *v;
    size_t vlen;
    gs_reply_int(&c->w, found && gs_hash_get(&o, argv[2].p, argv[2].len, buf, &v, &vlen));
}

enum { WANT_KEYS = 1, WANT_VALS = 2 };

/* HGETALL (a map in RESP3), HKEYS, HVALS (Redis's genericHgetallCommand). */
static void getall(struct gs_client *c, const struct gs_arg *key, unsigned want)
{
    struct gs_obj o;
    bool found;
    if (!hash_read(c, key, &o, &found))
        return;
    size_t n = found ? gs_hash_len(&o) : 0;
    if (want == (WANT_KEYS | WANT_VALS))
        gs_reply_map(&c->w, n);
    else
        gs_reply_array(&c->w, n);
    if (!found)
        return;
    struct gs_hash_iter it;
    const char *f, *v;
    size_t flen, vlen;
    gs_hash_iter_init(&it, &o);
    while (gs_hash_iter_next(&it, &f, &flen, &v, &vlen)) {
        if (want & WANT_KEYS)
            gs_reply_bulk(&c->w, f, flen);
        if (want & WANT_VALS)
            gs_reply_bulk(&c->w, v, vlen);
    }
}

void gs_cmd_hgetall(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    getall(c, &argv[1], WANT_KEYS | WANT_VALS);
}

void gs_cmd_hkeys(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    getall(c, &argv[1], WANT_KEYS);
}

void gs_cmd_hvals(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    getall(c, &argv[1], WANT_VALS);
}

void gs_cmd_hincrby(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t incr, v = 0;
    if (!gs_arg_int(c, &argv[3], &incr, NULL))
        return;
    struct gs_obj o;
    struct gs_entry *e = hash_write(c, &argv[1], &o);
    if (!e)
        return;
    char buf[GS_LP_INTBUF];
    const char *cur;
    size_t curlen;
    if (gs_hash_get(&o, argv[2].p, argv[2].len, buf, &cur, &curlen) &&
        !gs_string2ll(cur, curlen, &v)) {
        hash_done(c, e, &o);
        gs_error(c, "ERR hash value is not an integer");
        return;
    }
    if ((incr < 0 && v < 0 && incr < INT64_MIN - v) ||
        (incr > 0 && v > 0 && incr > INT64_MAX - v)) {
        hash_done(c, e, &o);
        gs_error(c, "ERR increment or decrement would overflow");
        return;
    }
    v += incr;
    char out[GS_LP_INTBUF];
    size_t n = gs_fmt_int(out, v);
    struct gs_type_limits lim = c->shared->limits;
    int rc = gs_hash_set(&o, argv[2].p, argv[2].len, out, n, &lim, NULL);
    hash_done(c, e, &o);
    if (rc)
        gs_error_oom(c);
    else
        gs_reply_int(&c->w, v);
}

void gs_cmd_hincrbyfloat(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    long double incr, v = 0;
    if (!gs_parse_long_double(argv[3].p, argv[3].len, &incr)) {
        gs_error(c, "ERR value is not a valid float");
        return;
    }
    if (isnan(incr) || isinf(incr)) {
        gs_error(c, "ERR value is NaN or Infinity");
        return;
    }
    struct gs_obj o;
    struct gs_entry *e = hash_write(c, &argv[1], &o);
    if (!e)
        return;
    char buf[GS_LP_INTBUF];
    const char *cur;
    size_t curlen;
    if (gs_hash_get(&o, argv[2].p, argv[2].len, buf, &cur, &curlen) &&
        !gs_parse_long_double(cur, curlen, &v)) {
        hash_done(c, e, &o);
        gs_error(c, "ERR hash value is not a float");
        return;
    }
    v += incr;
    if (isnan(v) || isinf(v)) {
        hash_done(c, e, &o);
        gs_error(c, "ERR increment would produce NaN or Infinity");
        return;
    }
    char out[GS_MAX_LONG_DOUBLE_CHARS];
    size_t n = gs_format_long_double(out, sizeof(out), v);
    struct gs_type_limits lim = c->shared->limits;
    int rc = gs_hash_set(&o, argv[2].p, argv[2].len, out, n, &lim, NULL);
    hash_done(c, e, &o);
    if (rc)
        gs_error_oom(c);
    else
        gs_reply_bulk(&c->w, out, n);
}

static void reply_pair(struct gs_client *c, bool withvalues, const char *f, size_t flen,
                       const char *v, size_t vlen)
{
    if (withvalues && c->w.proto > 2)
        gs_reply_array(&c->w, 2);
    gs_reply_bulk(&c->w, f, flen);
    if (withvalues)
        gs_reply_bulk(&c->w, v, vlen);
}

/* Redis's hrandfieldWithCountCommand. */
static void hrandfield_count(struct gs_client *c, const struct gs_arg *key, int64_t l,
                             bool withvalues)
{
    struct gs_obj o;
    bool found;
    if (!hash_read(c, key, &o, &found))
        return;
    if (!found) {
        gs_reply_array(&c->w, 0);
        return;
    }
    size_t size = gs_hash_len(&o);
    bool uniq = l >= 0;
    uint64_t count = l >= 0 ? (uint64_t)l : (uint64_t)(-l);
    if (count == 0) {
        gs_reply_array(&c->w, 0);
        return;
    }
    char fb[GS_LP_INTBUF], vb[GS_LP_INTBUF];
    const char *f, *v;
    size_t flen, vlen;
    if (!uniq || count == 1) { /* repeats allowed */
        gs_reply_array(&c->w, withvalues && c->w.proto == 2 ? count * 2 : count);
        while (count--) {
            gs_hash_random(&o, gs_client_random(c), fb, vb, &f, &flen, &v, &vlen);
            reply_pair(c, withvalues, f, flen, v, vlen);
        }
        return;
    }
    if (count >= size) { /* the whole hash */
        gs_reply_array(&c->w, withvalues && c->w.proto == 2 ? size * 2 : size);
        struct gs_hash_iter it;
        gs_hash_iter_init(&it, &o);
        while (gs_hash_iter_next(&it, &f, &flen, &v, &vlen))
            reply_pair(c, withvalues, f, flen, v, vlen);
        return;
    }
    /* Distinct fields (count < size here): choose positions, which needs
     * no copy of the fields, then walk once in the encoding's order. */
    unsigned char *chosen = gs_random_positions(c, size, (size_t)count);
    if (!chosen) {
        gs_error_oom(c);
        return;
    }
    gs_reply_array(&c->w, withvalues && c->w.proto == 2 ? count * 2 : count);
    struct gs_hash_iter it;
    gs_hash_iter_init(&it, &o);
    for (size_t i = 0; gs_hash_iter_next(&it, &f, &flen, &v, &vlen); i++)
        if (chosen[i])
            reply_pair(c, withvalues, f, flen, v, vlen);
    free(chosen);
}

void gs_cmd_hrandfield(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (argc >= 3) {
        int64_t l;
        bool withvalues;
        if (gs_parse_random_count(c, argc, argv, "withvalues", &l, &withvalues))
            hrandfield_count(c, &argv[1], l, withvalues);
        return;
    }
    struct gs_obj o;
    bool found;
    if (!hash_read(c, &argv[1], &o, &found))
        return;
    if (!found) {
        gs_reply_null(&c->w);
        return;
    }
    char fb[GS_LP_INTBUF], vb[GS_LP_INTBUF];
    const char *f, *v;
    size_t flen, vlen;
    gs_hash_random(&o, gs_client_random(c), fb, vb, &f, &flen, &v, &vlen);
    gs_reply_bulk(&c->w, f, flen);
}

static void hscan_pair(void *arg, const char *f, size_t flen, const char *v, size_t vlen)
{
    gs_scan_collect(arg, f, flen, v, vlen);
}

static uint64_t hscan_visit(const struct gs_obj *o, uint64_t cursor, size_t count,
                            struct gs_scan_collect *sc)
{
    return gs_hash_scan(o, cursor, count, hscan_pair, sc);
}

void gs_cmd_hscan(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    gs_scan_value(c, argc, argv, GS_TYPE_HASH, hscan_visit);
}
