/*
 * Sorted set commands, following Redis 7.0's t_zset.c: its checks in its
 * order (arguments, then the key's type), its error texts, its reply
 * shapes in RESP2 and RESP3 (scores as doubles; WITHSCORES as a flat
 * array in RESP2 and as [member, score] pairs in RESP3). The data
 * structure is gridsync/types/zset/.
 *
 * Every range command reduces its range to ascending ranks
 * [lo, hi) with gs_zset_count_below*: a score or lex range is the ranks
 * between the elements below its min and those not above its max. A
 * result that is stored (ZRANGESTORE, Z*STORE) gets the encoding it would
 * have if built member by member, as Redis's store paths give.
 */
#include "gridsync/client/client.h"
#include "gridsync/client/blocking.h"
#include "gridsync/commands/commands.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "gridsync/commands/scan.h"
#include "gridsync/types/set/set.h"
#include "gridsync/types/zset/zset.h"

static const struct gs_type_limits UNLIMITED = {0, 0, 0, 0, INT64_MAX, INT64_MAX, 0};

/* The sorted set at key for reading: false after replying WRONGTYPE. */
static bool zset_read(struct gs_client *c, const struct gs_arg *key, struct gs_obj *o, bool *found)
{
    bool wrong;
    struct gs_entry *e = gs_lookup_typed(c, key, GS_TYPE_ZSET, 0, &wrong);
    *found = e != NULL;
    if (e)
        gs_entry_obj(e, o);
    return !wrong;
}

static struct gs_entry *zset_write(struct gs_client *c, const struct gs_arg *key, struct gs_obj *o,
                                   bool *wrong)
{
    struct gs_entry *e = gs_lookup_typed(c, key, GS_TYPE_ZSET, GS_LOOKUP_WRITE, wrong);
    if (e)
        gs_entry_obj(e, o);
    return e;
}

/* Hand a changed set back to its entry, or delete the key when empty. */
static void zset_done(struct gs_client *c, struct gs_entry *e, struct gs_obj *o)
{
    gs_store_obj_update(c->db->store, e, o);
    if (gs_zset_len(o) == 0)
        gs_store_delete_entry(c->db->store, e);
}

/* Store a set built aside at dst (replacing what it held, TTL included),
 * or delete dst when empty; takes ownership of o. Replies the length (or
 * OOM). */
static void store_result(struct gs_client *c, const struct gs_arg *dst, struct gs_obj *o)
{
    size_t n = gs_zset_len(o);
    if (n == 0) {
        gs_zset_free(o);
        gs_store_delete(c->db->store, dst->p, dst->len, c->db->now_ms);
        gs_reply_int(&c->w, 0);
        return;
    }
    struct gs_type_limits lim = c->shared->limits;
    gs_zset_fit(o, &lim);
    if (gs_store_set_obj(c->db->store, dst->p, dst->len, o, -1, NULL)) {
        gs_zset_free(o);
        gs_error_oom(c);
        return;
    }
    gs_key_ready(c, c->db, dst->p, dst->len);
    gs_reply_int(&c->w, (int64_t)n);
}

/* An element of a reply: [member, score] in RESP3 with scores, member and
 * score in RESP2 (the caller sized the array). */
static void reply_elem(struct gs_client *c, const char *m, size_t mlen, double score,
                       bool withscores)
{
    if (withscores && c->w.proto == 3)
        gs_reply_array(&c->w, 2);
    gs_reply_bulk(&c->w, m, mlen);
    if (withscores)
        gs_reply_double(&c->w, score);
}

static void reply_header(struct gs_client *c, size_t n, bool withscores)
{
    gs_reply_array(&c->w, withscores && c->w.proto == 2 ? n * 2 : n);
}

/* n elements from ascending rank `rank`, going down when rev. */
static void reply_ranks(struct gs_client *c, const struct gs_obj *o, size_t rank, size_t n,
                        bool rev, bool withscores)
{
    reply_header(c, n, withscores);
    struct gs_zset_iter it;
    const char *m;
    size_t mlen;
    double score;
    gs_zset_iter_init(&it, o, rank, rev);
    for (size_t i = 0; i < n && gs_zset_iter_next(&it, &m, &mlen, &score); i++)
        reply_elem(c, m, mlen, score, withscores);
}

/* ----------------------------------------------------------- parsing */

static bool parse_score(struct gs_client *c, const struct gs_arg *a, double *out, const char *msg)
{
    if (gs_zset_parse_score(a->p, a->len, out))
        return true;
    gs_error(c, msg ? msg : "ERR value is not a valid float");
    return false;
}

/* strtod over the argument as a C string, as Redis's zslParseRange reads
 * it: the number ends at the end or at a NUL byte. */
static bool range_strtod(const char *p, size_t len, double *out)
{
    char stack[128];
    char *buf = len < sizeof(stack) ? stack : malloc(len + 1);
    if (!buf)
        return false;
    memcpy(buf, p, len);
    buf[len] = '\0';
    char *end;
    *out = strtod(buf, &end);
    bool ok = *end == '\0' && !isnan(*out);
    if (buf != stack)
        free(buf);
    return ok;
}

struct score_range {
    double min, max;
    bool minex, maxex;
};

/* Redis's zslParseRange: "(" makes an end exclusive. */
static bool parse_range(const struct gs_arg *a, const struct gs_arg *b, struct score_range *r)
{
    r->minex = a->len > 0 && a->p[0] == '(';
    r->maxex = b->len > 0 && b->p[0] == '(';
    return range_strtod(a->p + r->minex, a->len - r->minex, &r->min) &&
           range_strtod(b->p + r->maxex, b->len - r->maxex, &r->max);
}

/* Redis's zslParseLexRangeItem: "[x", "(x", "-" or "+". */
static bool parse_lex_item(const struct gs_arg *a, struct gs_zlex *out)
{
    memset(out, 0, sizeof(*out));
    if (a->len == 0)
        return false;
    switch (a->p[0]) {
    case '+':
    case '-':
        if (a->len > 1 && a->p[1] != '\0')
            return false;
        out->inf = a->p[0] == '+' ? 1 : -1;
        out->ex = true;
        return true;
    case '(':
    case '[':
        out->ex = a->p[0] == '(';
        out->p = a->p + 1;
        out->len = a->len - 1;
        return true;
    default:
        return false;
    }
}

static bool parse_lex(const struct gs_arg *a, const struct gs_arg *b, struct gs_zlex *min,
                      struct gs_zlex *max)
{
    return parse_lex_item(a, min) && parse_lex_item(b, max);
}

/* The ascending ranks [*lo, *hi) of the elements in a range. */
static void score_ranks(const struct gs_obj *o, const struct score_range *r, size_t *lo, size_t *hi)
{
    *lo = gs_zset_count_below(o, r->min, r->minex);
    *hi = gs_zset_count_below(o, r->max, !r->maxex);
    if (*hi < *lo)
        *hi = *lo;
}

static void lex_ranks(const struct gs_obj *o, const struct gs_zlex *min, const struct gs_zlex *max,
                      size_t *lo, size_t *hi)
{
    *lo = gs_zset_count_below_lex(o, min, min->ex);
    *hi = gs_zset_count_below_lex(o, max, !max->ex);
    if (*hi < *lo)
        *hi = *lo;
}

/* Redis's rank sanitizing (genericZrangebyrankCommand): false when empty. */
static bool clamp_ranks(int64_t start, int64_t end, size_t len, size_t *first, size_t *n)
{
    int64_t llen = (int64_t)len;
    if (start < 0)
        start = llen + start;
    if (end < 0)
        end = llen + end;
    if (start < 0)
        start = 0;
    if (start > end || start >= llen)
        return false;
    if (end >= llen)
        end = llen - 1;
    *first = (size_t)start;
    *n = (size_t)(end - start + 1);
    return true;
}

/* --------------------------------------------------------- ZADD family */

/* Redis's zaddGenericCommand (ZADD, and ZINCRBY with GS_ZADD_INCR). */
static void zadd_generic(struct gs_client *c, size_t argc, struct gs_arg *argv, int flags)
{
    bool ch = false;
    size_t idx = 2;
    for (; idx < argc; idx++) {
        if (gs_arg_is(&argv[idx], "nx"))
            flags |= GS_ZADD_NX;
        else if (gs_arg_is(&argv[idx], "xx"))
            flags |= GS_ZADD_XX;
        else if (gs_arg_is(&argv[idx], "ch"))
            ch = true;
        else if (gs_arg_is(&argv[idx], "incr"))
            flags |= GS_ZADD_INCR;
        else if (gs_arg_is(&argv[idx], "gt"))
            flags |= GS_ZADD_GT;
        else if (gs_arg_is(&argv[idx], "lt"))
            flags |= GS_ZADD_LT;
        else
            break;
    }
    bool nx = flags & GS_ZADD_NX, xx = flags & GS_ZADD_XX, gt = flags & GS_ZADD_GT,
         lt = flags & GS_ZADD_LT, incr = flags & GS_ZADD_INCR;
    size_t elements = argc - idx;
    if (elements % 2 || elements == 0) {
        gs_error_syntax(c);
        return;
    }
    elements /= 2;
    if (nx && xx) {
        gs_error(c, "ERR XX and NX options at the same time are not compatible");
        return;
    }
    if ((gt && nx) || (lt && nx) || (gt && lt)) {
        gs_error(c, "ERR GT, LT, and/or NX options at the same time are not compatible");
        return;
    }
    if (incr && elements > 1) {
        gs_error(c, "ERR INCR option supports a single increment-element pair");
        return;
    }
    /* every score first: the command runs whole or not at all */
    for (size_t j = 0; j < elements; j++) {
        double s;
        if (!parse_score(c, &argv[idx + j * 2], &s, NULL))
            return;
    }
    struct gs_obj o;
    bool wrong;
    struct gs_entry *e = zset_write(c, &argv[1], &o, &wrong);
    if (wrong)
        return;
    int64_t added = 0, updated = 0, processed = 0;
    double score = 0;
    if (!e) {
        if (xx)
            goto reply;
        struct gs_type_limits *l = &c->shared->limits;
        bool big = l->zset_max_listpack_entries == 0 ||
                   (int64_t)argv[idx + 1].len > l->zset_max_listpack_value;
        if (gs_zset_init(&o, big) ||
            gs_store_set_obj(c->db->store, argv[1].p, argv[1].len, &o, -1, &e)) {
            if (o.ptr)
                gs_zset_free(&o);
            gs_error_oom(c);
            return;
        }
    }
    struct gs_type_limits lim = c->shared->limits;
    int rc = 0;
    for (size_t j = 0; j < elements && rc == 0; j++) {
        double s, newscore = 0;
        gs_zset_parse_score(argv[idx + j * 2].p, argv[idx + j * 2].len, &s);
        const struct gs_arg *m = &argv[idx + j * 2 + 1];
        int out;
        rc = gs_zset_add(&o, s, m->p, m->len, flags, &out, &newscore, &lim);
        if (rc)
            break;
        added += (out & GS_ZADD_ADDED) != 0;
        updated += (out & GS_ZADD_UPDATED) != 0;
        processed += !(out & GS_ZADD_NOP);
        score = newscore;
    }
    zset_done(c, e, &o);
    if (added)
        gs_key_ready(c, c->db, argv[1].p, argv[1].len); /* clients in BZPOPMIN & co. */
    if (rc == CORE_EINVAL) {
        gs_error(c, "ERR resulting score is not a number (NaN)");
        return;
    }
    if (rc) {
        gs_error_oom(c);
        return;
    }
reply:
    if (incr) {
        if (processed)
            gs_reply_double(&c->w, score);
        else
            gs_reply_null(&c->w);
    } else {
        gs_reply_int(&c->w, ch ? added + updated : added);
    }
}

void gs_cmd_zadd(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    zadd_generic(c, argc, argv, 0);
}

void gs_cmd_zincrby(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    zadd_generic(c, argc, argv, GS_ZADD_INCR);
}

void gs_cmd_zrem(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_obj o;
    bool wrong;
    struct gs_entry *e = zset_write(c, &argv[1], &o, &wrong);
    if (wrong)
        return;
    if (!e) {
        gs_reply_int(&c->w, 0);
        return;
    }
    int64_t n = 0;
    for (size_t i = 2; i < argc && gs_zset_len(&o) > 0; i++)
        n += gs_zset_remove(&o, argv[i].p, argv[i].len);
    if (n)
        zset_done(c, e, &o);
    gs_reply_int(&c->w, n);
}

void gs_cmd_zcard(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    (void)argc;
    struct gs_obj o;
    bool found;
    if (!zset_read(c, &argv[1], &o, &found))
        return;
    gs_reply_int(&c->w, found ? (int64_t)gs_zset_len(&o) : 0);
}

void gs_cmd_zscore(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    (void)argc;
    struct gs_obj o;
    bool found;
    double s;
    if (!zset_read(c, &argv[1], &o, &found))
        return;
    if (found && gs_zset_score(&o, argv[2].p, argv[2].len, &s))
        gs_reply_double(&c->w, s);
    else
        gs_reply_null(&c->w);
}

void gs_cmd_zmscore(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_obj o;
    bool found;
    if (!zset_read(c, &argv[1], &o, &found))
        return;
    gs_reply_array(&c->w, argc - 2);
    for (size_t i = 2; i < argc; i++) {
        double s;
        if (found && gs_zset_score(&o, argv[i].p, argv[i].len, &s))
            gs_reply_double(&c->w, s);
        else
            gs_reply_null(&c->w);
    }
}

static void zrank_generic(struct gs_client *c, struct gs_arg *argv, bool rev)
{
    struct gs_obj o;
    bool found;
    size_t r;
    if (!zset_read(c, &argv[1], &o, &found))
        return;
    if (found && gs_zset_rank(&o, argv[2].p, argv[2].len, &r))
        gs_reply_int(&c->w, (int64_t)(rev ? gs_zset_len(&o) - 1 - r : r));
    else
        gs_reply_null(&c->w);
}

void gs_cmd_zrank(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    (void)argc;
    zrank_generic(c, argv, false);
}

void gs_cmd_zrevrank(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    (void)argc;
    zrank_generic(c, argv, true);
}

void gs_cmd_zcount(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    (void)argc;
    struct score_range r;
    if (!parse_range(&argv[2], &argv[3], &r)) {
        gs_error(c, "ERR min or max is not a float");
        return;
    }
    struct gs_obj o;
    bool found;
    if (!zset_read(c, &argv[1], &o, &found))
        return;
    size_t lo = 0, hi = 0;
    if (found)
        score_ranks(&o, &r, &lo, &hi);
    gs_reply_int(&c->w, (int64_t)(hi - lo));
}

void gs_cmd_zlexcount(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    (void)argc;
    struct gs_zlex min, max;
    if (!parse_lex(&argv[2], &argv[3], &min, &max)) {
        gs_error(c, "ERR min or max not valid string range item");
        return;
    }
    struct gs_obj o;
    bool found;
    if (!zset_read(c, &argv[1], &o, &found))
        return;
    size_t lo = 0, hi = 0;
    if (found)
        lex_ranks(&o, &min, &max, &lo, &hi);
    gs_reply_int(&c->w, (int64_t)(hi - lo));
}

/* ------------------------------------------------------ ZRANGE family */

enum range_type { BY_AUTO, BY_RANK, BY_SCORE, BY_LEX };
enum range_dir { DIR_AUTO, DIR_FWD, DIR_REV };

/* Build a new set from n elements at rank, for ZRANGESTORE. */
static int copy_ranks(const struct gs_obj *o, size_t rank, size_t n, bool rev, struct gs_obj *out)
{
    if (gs_zset_init(out, true))
        return CORE_ENOMEM;
    if (n == 0)
        return 0; /* o may be unset (no such key) */
    struct gs_zset_iter it;
    const char *m;
    size_t mlen;
    double score;
    gs_zset_iter_init(&it, o, rank, rev);
    for (size_t i = 0; i < n && gs_zset_iter_next(&it, &m, &mlen, &score); i++) {
        int flags;
        if (gs_zset_add(out, score, m, mlen, 0, &flags, NULL, &UNLIMITED))
            return CORE_ENOMEM;
    }
    return 0;
}

/* Redis's zrangeGenericCommand: argv[start] is the source key, then min
 * and max; dst is ZRANGESTORE's destination (NULL: reply). */
static void zrange_generic(struct gs_client *c, size_t argc, struct gs_arg *argv, size_t start,
                           const struct gs_arg *dst, enum range_type type, enum range_dir dir)
{
    size_t minidx = start + 1, maxidx = start + 2;
    bool withscores = false;
    int64_t offset = 0, limit = -1;
    bool has_limit = false;
    for (size_t j = start + 3; j < argc; j++) {
        size_t left = argc - j - 1;
        if (!dst && gs_arg_is(&argv[j], "withscores")) {
            withscores = true;
        } else if (gs_arg_is(&argv[j], "limit") && left >= 2) {
            if (!gs_arg_int(c, &argv[j + 1], &offset, NULL) ||
                !gs_arg_int(c, &argv[j + 2], &limit, NULL))
                return;
            has_limit = true;
            j += 2;
        } else if (dir == DIR_AUTO && gs_arg_is(&argv[j], "rev")) {
            dir = DIR_REV;
        } else if (type == BY_AUTO && gs_arg_is(&argv[j], "bylex")) {
            type = BY_LEX;
        } else if (type == BY_AUTO && gs_arg_is(&argv[j], "byscore")) {
            type = BY_SCORE;
        } else {
            gs_error_syntax(c);
            return;
        }
    }
    if (dir == DIR_AUTO)
        dir = DIR_FWD;
    if (type == BY_AUTO)
        type = BY_RANK;
    /* Redis tests opt_limit != -1: "LIMIT 0 -1" passes as no limit */
    if (has_limit && limit != -1 && type == BY_RANK) {
        gs_error(c, "ERR syntax error, LIMIT is only supported in combination with either BYSCORE "
                    "or BYLEX");
        return;
    }
    if (withscores && type == BY_LEX) {
        gs_error(c, "ERR syntax error, WITHSCORES not supported in combination with BYLEX");
        return;
    }
    bool rev = dir == DIR_REV;
    if (rev && type != BY_RANK) { /* given as max, min */
        size_t t = minidx;
        minidx = maxidx;
        maxidx = t;
    }
    int64_t rstart = 0, rend = 0;
    struct score_range sr;
    struct gs_zlex lmin, lmax;
    if (type == BY_RANK) {
        if (!gs_arg_int(c, &argv[minidx], &rstart, NULL) ||
            !gs_arg_int(c, &argv[maxidx], &rend, NULL))
            return;
    } else if (type == BY_SCORE) {
        if (!parse_range(&argv[minidx], &argv[maxidx], &sr)) {
            gs_error(c, "ERR min or max is not a float");
            return;
        }
    } else if (!parse_lex(&argv[minidx], &argv[maxidx], &lmin, &lmax)) {
        gs_error(c, "ERR min or max not valid string range item");
        return;
    }
    struct gs_obj o = {0};
    bool found;
    if (!zset_read(c, &argv[start], &o, &found))
        return;
    size_t first = 0, n = 0;
    if (found && type == BY_RANK) {
        if (clamp_ranks(rstart, rend, gs_zset_len(&o), &first, &n) && rev)
            first = gs_zset_len(&o) - 1 - first;
    } else if (found) {
        size_t lo, hi;
        if (type == BY_SCORE)
            score_ranks(&o, &sr, &lo, &hi);
        else
            lex_ranks(&o, &lmin, &lmax, &lo, &hi);
        /* a negative offset skips everything (Redis's `while (offset--)`) */
        size_t count = hi - lo;
        if (offset >= 0 && (uint64_t)offset < count) {
            n = count - (size_t)offset;
            if (limit >= 0 && (uint64_t)limit < n)
                n = (size_t)limit;
            first = rev ? hi - 1 - (size_t)offset : lo + (size_t)offset;
        }
    }
    if (!dst) {
        if (!found)
            gs_reply_array(&c->w, 0);
        else
            reply_ranks(c, &o, first, n, rev, withscores);
        return;
    }
    struct gs_obj out;
    if (copy_ranks(&o, first, found ? n : 0, rev, &out)) {
        gs_zset_free(&out);
        gs_error_oom(c);
        return;
    }
    store_result(c, dst, &out);
}

void gs_cmd_zrange(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    zrange_generic(c, argc, argv, 1, NULL, BY_AUTO, DIR_AUTO);
}

void gs_cmd_zrangestore(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    zrange_generic(c, argc, argv, 2, &argv[1], BY_AUTO, DIR_AUTO);
}

void gs_cmd_zrevrange(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    zrange_generic(c, argc, argv, 1, NULL, BY_RANK, DIR_REV);
}

void gs_cmd_zrangebyscore(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    zrange_generic(c, argc, argv, 1, NULL, BY_SCORE, DIR_FWD);
}

void gs_cmd_zrevrangebyscore(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    zrange_generic(c, argc, argv, 1, NULL, BY_SCORE, DIR_REV);
}

void gs_cmd_zrangebylex(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    zrange_generic(c, argc, argv, 1, NULL, BY_LEX, DIR_FWD);
}

void gs_cmd_zrevrangebylex(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    zrange_generic(c, argc, argv, 1, NULL, BY_LEX, DIR_REV);
}

/* Redis's zremrangeGenericCommand. */
static void zremrange_generic(struct gs_client *c, struct gs_arg *argv, enum range_type type)
{
    int64_t start = 0, end = 0;
    struct score_range sr;
    struct gs_zlex lmin, lmax;
    if (type == BY_RANK) {
        if (!gs_arg_int(c, &argv[2], &start, NULL) || !gs_arg_int(c, &argv[3], &end, NULL))
            return;
    } else if (type == BY_SCORE) {
        if (!parse_range(&argv[2], &argv[3], &sr)) {
            gs_error(c, "ERR min or max is not a float");
            return;
        }
    } else if (!parse_lex(&argv[2], &argv[3], &lmin, &lmax)) {
        gs_error(c, "ERR min or max not valid string range item");
        return;
    }
    struct gs_obj o;
    bool wrong;
    struct gs_entry *e = zset_write(c, &argv[1], &o, &wrong);
    if (wrong)
        return;
    if (!e) {
        gs_reply_int(&c->w, 0);
        return;
    }
    size_t first = 0, n = 0;
    if (type == BY_RANK) {
        if (!clamp_ranks(start, end, gs_zset_len(&o), &first, &n))
            n = 0;
    } else {
        size_t lo, hi;
        if (type == BY_SCORE)
            score_ranks(&o, &sr, &lo, &hi);
        else
            lex_ranks(&o, &lmin, &lmax, &lo, &hi);
        first = lo;
        n = hi - lo;
    }
    if (n) {
        gs_zset_delete_range(&o, first, n);
        zset_done(c, e, &o);
    }
    gs_reply_int(&c->w, (int64_t)n);
}

void gs_cmd_zremrangebyrank(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    (void)argc;
    zremrange_generic(c, argv, BY_RANK);
}

void gs_cmd_zremrangebyscore(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    (void)argc;
    zremrange_generic(c, argv, BY_SCORE);
}

void gs_cmd_zremrangebylex(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    (void)argc;
    zremrange_generic(c, argv, BY_LEX);
}

/* ----------------------------------------------------------- popping */

/* What zpop_generic answers when no key holds a sorted set. */
enum zpop_empty {
    EMPTY_ARRAY,  /* ZPOPMIN/ZPOPMAX: an empty array */
    EMPTY_NULL,   /* ZMPOP: a null array */
    EMPTY_SILENT, /* the blocking forms: nothing (the caller blocks) */
};

/* Redis's genericZpopCommand over keys[0..nkeys): the first non-empty
 * key. emitkey: the key first (BZPOPMIN's flat [key, m, s], ZMPOP's
 * [key, [[m, s]...]]); nested: pairs as arrays. Returns false when it
 * replied nothing (EMPTY_SILENT and no key). */
static bool zpop_generic(struct gs_client *c, struct gs_arg *keys, size_t nkeys, bool max,
                         bool emitkey, int64_t count, bool nested, enum zpop_empty empty)
{
    struct gs_obj o;
    struct gs_entry *e = NULL;
    const struct gs_arg *key = NULL;
    for (size_t i = 0; i < nkeys && !e; i++) {
        bool wrong;
        e = zset_write(c, &keys[i], &o, &wrong);
        if (wrong)
            return true;
        key = &keys[i];
    }
    if (!e) {
        if (empty == EMPTY_SILENT)
            return false;
        if (empty == EMPTY_NULL)
            gs_reply_null_array(&c->w);
        else
            gs_reply_array(&c->w, 0);
        return true;
    }
    if (count == 0) {
        gs_reply_array(&c->w, 0);
        return true;
    }
    if (count == -1)
        count = 1;
    size_t len = gs_zset_len(&o);
    size_t n = (uint64_t)count > len ? len : (size_t)count;
    if (!nested && !emitkey) {
        gs_reply_array(&c->w, n * 2);
    } else if (nested && !emitkey) {
        gs_reply_array(&c->w, n);
    } else if (!nested) {
        gs_reply_array(&c->w, n * 2 + 1);
        gs_reply_bulk(&c->w, key->p, key->len);
    } else {
        gs_reply_array(&c->w, 2);
        gs_reply_bulk(&c->w, key->p, key->len);
        gs_reply_array(&c->w, n);
    }
    struct gs_zset_iter it;
    const char *m;
    size_t mlen;
    double score;
    gs_zset_iter_init(&it, &o, max ? len - 1 : 0, max);
    for (size_t i = 0; i < n && gs_zset_iter_next(&it, &m, &mlen, &score); i++) {
        if (nested)
            gs_reply_array(&c->w, 2);
        gs_reply_bulk(&c->w, m, mlen);
        gs_reply_double(&c->w, score);
    }
    gs_zset_delete_range(&o, max ? len - n : 0, n);
    zset_done(c, e, &o);
    return true;
}

static void zpop_minmax(struct gs_client *c, size_t argc, struct gs_arg *argv, bool max)
{
    if (argc > 3) {
        gs_error_syntax(c);
        return;
    }
    int64_t count = -1;
    if (argc == 3) {
        if (!gs_arg_int(c, &argv[2], &count, "ERR value is out of range, must be positive"))
            return;
        if (count < 0) {
            gs_error(c, "ERR value is out of range, must be positive");
            return;
        }
    }
    (void)zpop_generic(c, &argv[1], 1, max, false, count, c->w.proto > 2 && count != -1,
                       EMPTY_ARRAY);
}

void gs_cmd_zpopmin(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    zpop_minmax(c, argc, argv, false);
}

void gs_cmd_zpopmax(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    zpop_minmax(c, argc, argv, true);
}

/* Redis's zmpopGenericCommand's arguments: numkeys at argv[at], then the
 * keys, MIN|MAX, [COUNT count]. False after replying the error. */
static bool zmpop_parse(struct gs_client *c, size_t argc, struct gs_arg *argv, size_t at,
                        int64_t *numkeys, bool *max, int64_t *count)
{
    *count = -1;
    if (!gs_arg_int(c, &argv[at], numkeys, "ERR numkeys should be greater than 0"))
        return false;
    if (*numkeys < 1) {
        gs_error(c, "ERR numkeys should be greater than 0");
        return false;
    }
    if ((uint64_t)*numkeys >= argc - at - 1) {
        gs_error_syntax(c);
        return false;
    }
    size_t where = at + 1 + (size_t)*numkeys;
    if (gs_arg_is(&argv[where], "min")) {
        *max = false;
    } else if (gs_arg_is(&argv[where], "max")) {
        *max = true;
    } else {
        gs_error_syntax(c);
        return false;
    }
    for (size_t j = where + 1; j < argc; j++) {
        if (*count == -1 && gs_arg_is(&argv[j], "count") && j + 1 < argc) {
            j++;
            if (!gs_arg_int(c, &argv[j], count, "ERR count should be greater than 0"))
                return false;
            if (*count < 1) {
                gs_error(c, "ERR count should be greater than 0");
                return false;
            }
        } else {
            gs_error_syntax(c);
            return false;
        }
    }
    if (*count == -1)
        *count = 1;
    return true;
}

/* ZMPOP numkeys key [key ...] MIN|MAX [COUNT count] (zmpopGenericCommand). */
void gs_cmd_zmpop(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t numkeys, count;
    bool max;
    if (!zmpop_parse(c, argc, argv, 1, &numkeys, &max, &count))
        return;
    (void)zpop_generic(c, &argv[2], (size_t)numkeys, max, true, count, true, EMPTY_NULL);
}

/* ------------------------------------------------- BZPOPMIN BZPOPMAX BZMPOP
 *
 * Redis 7.0's blockingGenericZpopCommand and serveClientBlockedOnSortedSet:
 * pop at once from the first key that holds a sorted set, else block
 * (client/blocking.h) until one of the keys gets one. BZPOPMIN/BZPOPMAX
 * answer [key, member, score]; BZMPOP as ZMPOP. A timeout, or a client
 * that may not block (inside MULTI), gets a null array. */

static int serve_bzpop(struct gs_client *c, size_t argc, struct gs_arg *argv, const char *key,
                       size_t klen)
{
    (void)argc;
    struct gs_arg k = {key, klen};
    bool max = gs_arg_is(&argv[0], "bzpopmax");
    return zpop_generic(c, &k, 1, max, true, -1, false, EMPTY_SILENT) ? GS_BLOCK_SERVED
                                                                      : GS_BLOCK_KEEP;
}

static void block_zset(struct gs_client *c, size_t argc, struct gs_arg *argv, size_t first,
                       size_t n, int64_t deadline, gs_block_serve_fn *serve)
{
    if (gs_block_denied(c)) {
        gs_reply_null_array(&c->w);
        return;
    }
    struct gs_block_spec spec = {GS_TYPE_ZSET, first, n, deadline, serve};
    if (gs_block(c, argc, argv, &spec) != 0)
        gs_error_oom(c);
}

static void bzpop(struct gs_client *c, size_t argc, struct gs_arg *argv, bool max)
{
    int64_t deadline;
    if (!gs_block_parse_timeout(c, &argv[argc - 1], &deadline))
        return;
    if (zpop_generic(c, &argv[1], argc - 2, max, true, -1, false, EMPTY_SILENT))
        return; /* popped, or WRONGTYPE */
    block_zset(c, argc, argv, 1, argc - 2, deadline, serve_bzpop);
}

void gs_cmd_bzpopmin(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    bzpop(c, argc, argv, false);
}

void gs_cmd_bzpopmax(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    bzpop(c, argc, argv, true);
}

/* BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count] */
static int serve_bzmpop(struct gs_client *c, size_t argc, struct gs_arg *argv, const char *key,
                        size_t klen)
{
    int64_t numkeys, count;
    bool max;
    /* Checked when the command blocked: this cannot fail (or reply). */
    if (!zmpop_parse(c, argc, argv, 2, &numkeys, &max, &count))
        return GS_BLOCK_SERVED;
    struct gs_arg k = {key, klen};
    return zpop_generic(c, &k, 1, max, true, count, true, EMPTY_SILENT) ? GS_BLOCK_SERVED
                                                                        : GS_BLOCK_KEEP;
}

void gs_cmd_bzmpop(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t numkeys, count, deadline;
    bool max;
    if (!zmpop_parse(c, argc, argv, 2, &numkeys, &max, &count) ||
        !gs_block_parse_timeout(c, &argv[1], &deadline))
        return;
    if (zpop_generic(c, &argv[3], (size_t)numkeys, max, true, count, true, EMPTY_SILENT))
        return;
    block_zset(c, argc, argv, 3, (size_t)numkeys, deadline, serve_bzmpop);
}

void gs_cmd_zrandmember(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_obj o;
    bool found;
    char buf[GS_LP_INTBUF];
    const char *m;
    size_t mlen;
    double score;
    if (argc == 2) {
        if (!zset_read(c, &argv[1], &o, &found))
            return;
        if (!found) {
            gs_reply_null(&c->w);
            return;
        }
        gs_zset_at(&o, gs_client_random(c) % gs_zset_len(&o), buf, &m, &mlen, &score);
        gs_reply_bulk(&c->w, m, mlen);
        return;
    }
    int64_t l;
    bool withscores;
    if (!gs_parse_random_count(c, argc, argv, "withscores", &l, &withscores))
        return;
    if (!zset_read(c, &argv[1], &o, &found))
        return;
    if (!found || l == 0) {
        gs_reply_array(&c->w, 0);
        return;
    }
    size_t size = gs_zset_len(&o);
    if (l < 0 || l == 1) { /* repeats allowed (or just one) */
        size_t n = l < 0 ? (size_t)-l : 1;
        reply_header(c, n, withscores);
        for (size_t i = 0; i < n; i++) {
            gs_zset_at(&o, gs_client_random(c) % size, buf, &m, &mlen, &score);
            reply_elem(c, m, mlen, score, withscores);
        }
        return;
    }
    size_t count = (size_t)l;
    if (count >= size) {
        reply_ranks(c, &o, 0, size, false, withscores);
        return;
    }
    unsigned char *chosen = gs_random_positions(c, size, count); /* distinct ranks */
    if (!chosen) {
        gs_error_oom(c);
        return;
    }
    reply_header(c, count, withscores);
    struct gs_zset_iter it;
    gs_zset_iter_init(&it, &o, 0, false);
    for (size_t i = 0; gs_zset_iter_next(&it, &m, &mlen, &score); i++)
        if (chosen[i])
            reply_elem(c, m, mlen, score, withscores);
    free(chosen);
}

/* -------------------------------------------- ZUNION / ZINTER / ZDIFF */

enum zop { ZOP_UNION, ZOP_INTER, ZOP_DIFF };
enum aggr { AGGR_SUM, AGGR_MIN, AGGR_MAX };

/* An input: a sorted set, a set (every member scores 1) or missing. */
struct zsrc {
    struct gs_obj o;
    bool found;
    double weight;
};

static size_t src_len(const struct zsrc *s)
{
    if (!s->found)
        return 0;
    return s->o.type == GS_TYPE_ZSET ? gs_zset_len(&s->o) : gs_set_len(&s->o);
}

static bool src_find(const struct zsrc *s, const char *m, size_t mlen, double *score)
{
    if (!s->found)
        return false;
    if (s->o.type == GS_TYPE_ZSET)
        return gs_zset_score(&s->o, m, mlen, score);
    *score = 1.0;
    return gs_set_contains(&s->o, m, mlen);
}

/* Iterate one input: zset or set. */
struct src_iter {
    const struct zsrc *s;
    struct gs_zset_iter zi;
    struct gs_set_iter si;
};

static void src_iter_init(struct src_iter *it, const struct zsrc *s)
{
    it->s = s;
    if (s->o.type == GS_TYPE_ZSET)
        gs_zset_iter_init(&it->zi, &s->o, 0, false);
    else
        gs_set_iter_init(&it->si, &s->o);
}

static bool src_iter_next(struct src_iter *it, const char **m, size_t *mlen, double *score)
{
    if (it->s->o.type == GS_TYPE_ZSET)
        return gs_zset_iter_next(&it->zi, m, mlen, score);
    *score = 1.0;
    return gs_set_iter_next(&it->si, m, mlen);
}

static void aggregate(double *target, double v, enum aggr a)
{
    if (a == AGGR_SUM) {
        *target = *target + v;
        if (isnan(*target)) /* +inf + -inf */
            *target = 0.0;
    } else if (a == AGGR_MIN) {
        *target = v < *target ? v : *target;
    } else {
        *target = v > *target ? v : *target;
    }
}

/* Compute op into out (a new skiplist set); limit: ZINTERCARD's (0 none),
 * *card its count. */
static int zop_compute(struct zsrc *src, size_t n, enum zop op, enum aggr ag, struct gs_obj *out,
                       bool card_only, size_t limit, size_t *card)
{
    if (gs_zset_init(out, true))
        return CORE_ENOMEM;
    struct src_iter it;
    const char *m;
    size_t mlen;
    double score, v;
    int flags;
    *card = 0;
    if (op == ZOP_INTER) {
        if (src_len(&src[0]) == 0)
            return 0;
        src_iter_init(&it, &src[0]);
        while (src_iter_next(&it, &m, &mlen, &score)) {
            double s = src[0].weight * score;
            if (isnan(s))
                s = 0;
            size_t j = 1;
            for (; j < n; j++) {
                if (!src_find(&src[j], m, mlen, &v))
                    break;
                aggregate(&s, v * src[j].weight, ag);
            }
            if (j < n)
                continue;
            if (card_only) {
                if (limit && ++*card >= limit)
                    break;
                if (!limit)
                    ++*card;
                continue;
            }
            if (gs_zset_add(out, s, m, mlen, 0, &flags, NULL, &UNLIMITED))
                return CORE_ENOMEM;
        }
        return 0;
    }
    if (op == ZOP_UNION) {
        for (size_t i = 0; i < n; i++) {
            if (src_len(&src[i]) == 0)
                continue;
            src_iter_init(&it, &src[i]);
            while (src_iter_next(&it, &m, &mlen, &score)) {
                double s = src[i].weight * score;
                if (isnan(s))
                    s = 0;
                if (gs_zset_score(out, m, mlen, &v)) {
                    aggregate(&v, s, ag);
                    s = v;
                }
                if (gs_zset_add(out, s, m, mlen, 0, &flags, NULL, &UNLIMITED))
                    return CORE_ENOMEM;
            }
        }
        return 0;
    }
    if (src_len(&src[0]) == 0)
        return 0;
    src_iter_init(&it, &src[0]);
    while (src_iter_next(&it, &m, &mlen, &score)) {
        bool other = false;
        for (size_t j = 1; j < n && !other; j++)
            other = src_find(&src[j], m, mlen, &v);
        if (!other && gs_zset_add(out, score, m, mlen, 0, &flags, NULL, &UNLIMITED))
            return CORE_ENOMEM;
    }
    return 0;
}

/* Redis's zunionInterDiffGenericCommand: argv[numkeys_idx] is numkeys. */
static void zop_generic(struct gs_client *c, size_t argc, struct gs_arg *argv, size_t numkeys_idx,
                        const struct gs_arg *dst, enum zop op, bool card_only, const char *name)
{
    int64_t setnum;
    if (!gs_arg_int(c, &argv[numkeys_idx], &setnum, NULL))
        return;
    if (setnum < 1) {
        gs_errorf(c, "ERR at least 1 input key is needed for '%s' command", name);
        return;
    }
    if ((uint64_t)setnum > argc - (numkeys_idx + 1)) {
        gs_error_syntax(c);
        return;
    }
    size_t n = (size_t)setnum;
    struct zsrc *src = calloc(n, sizeof(*src));
    if (!src) {
        gs_error_oom(c);
        return;
    }
    size_t j = numkeys_idx + 1;
    for (size_t i = 0; i < n; i++, j++) {
        struct gs_entry *e =
            gs_store_lookup(c->db->store, argv[j].p, argv[j].len, c->db->now_ms, 0);
        src[i].weight = 1.0;
        if (!e)
            continue;
        int t = gs_entry_type(e);
        if (t != GS_TYPE_ZSET && t != GS_TYPE_SET) {
            free(src);
            gs_error_wrongtype(c);
            return;
        }
        gs_entry_obj(e, &src[i].o);
        src[i].found = true;
    }
    enum aggr ag = AGGR_SUM;
    bool withscores = false;
    int64_t limit = 0;
    while (j < argc) {
        size_t remaining = argc - j;
        if (op != ZOP_DIFF && !card_only && remaining >= n + 1 && gs_arg_is(&argv[j], "weights")) {
            j++;
            for (size_t i = 0; i < n; i++, j++) {
                if (!parse_score(c, &argv[j], &src[i].weight, "ERR weight value is not a float")) {
                    free(src);
                    return;
                }
            }
        } else if (op != ZOP_DIFF && !card_only && remaining >= 2 &&
                   gs_arg_is(&argv[j], "aggregate")) {
            j++;
            if (gs_arg_is(&argv[j], "sum")) {
                ag = AGGR_SUM;
            } else if (gs_arg_is(&argv[j], "min")) {
                ag = AGGR_MIN;
            } else if (gs_arg_is(&argv[j], "max")) {
                ag = AGGR_MAX;
            } else {
                free(src);
                gs_error_syntax(c);
                return;
            }
            j++;
        } else if (!dst && !card_only && gs_arg_is(&argv[j], "withscores")) {
            j++;
            withscores = true;
        } else if (card_only && remaining >= 2 && gs_arg_is(&argv[j], "limit")) {
            j++;
            if (!gs_arg_int(c, &argv[j], &limit, "ERR LIMIT can't be negative")) {
                free(src);
                return;
            }
            if (limit < 0) {
                free(src);
                gs_error(c, "ERR LIMIT can't be negative");
                return;
            }
            j++;
        } else {
            free(src);
            gs_error_syntax(c);
            return;
        }
    }
    if (op != ZOP_DIFF) {
        /* smallest first (a stable sort, as glibc's qsort is a merge
         * sort): weights travel with their input */
        for (size_t a = 1; a < n; a++) {
            struct zsrc t = src[a];
            size_t b = a;
            for (; b > 0 && src_len(&src[b - 1]) > src_len(&t); b--)
                src[b] = src[b - 1];
            src[b] = t;
        }
    }
    struct gs_obj out;
    size_t card;
    int rc = zop_compute(src, n, op, ag, &out, card_only, (size_t)limit, &card);
    free(src);
    if (rc) {
        gs_zset_free(&out);
        gs_error_oom(c);
        return;
    }
    if (dst) {
        store_result(c, dst, &out);
        return;
    }
    if (card_only)
        gs_reply_int(&c->w, (int64_t)card);
    else
        reply_ranks(c, &out, 0, gs_zset_len(&out), false, withscores);
    gs_zset_free(&out);
}

void gs_cmd_zunion(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    zop_generic(c, argc, argv, 1, NULL, ZOP_UNION, false, "zunion");
}

void gs_cmd_zinter(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    zop_generic(c, argc, argv, 1, NULL, ZOP_INTER, false, "zinter");
}

void gs_cmd_zdiff(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    zop_generic(c, argc, argv, 1, NULL, ZOP_DIFF, false, "zdiff");
}

void gs_cmd_zunionstore(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    zop_generic(c, argc, argv, 2, &argv[1], ZOP_UNION, false, "zunionstore");
}

void gs_cmd_zinterstore(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    zop_generic(c, argc, argv, 2, &argv[1], ZOP_INTER, false, "zinterstore");
}

void gs_cmd_zdiffstore(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    zop_generic(c, argc, argv, 2, &argv[1], ZOP_DIFF, false, "zdiffstore");
}

void gs_cmd_zintercard(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    zop_generic(c, argc, argv, 1, NULL, ZOP_INTER, true, "zintercard");
}

/* -------------------------------------------------------------- ZSCAN */

static void zscan_member(void *arg, const char *m, size_t mlen, double score)
{
    /* a string in both protocols (Redis's scan replies strings) */
    char tmp[40];
    int tl = isinf(score) ? snprintf(tmp, sizeof(tmp), "%s", score > 0 ? "inf" : "-inf")
                          : snprintf(tmp, sizeof(tmp), "%.17g", score);
    gs_scan_collect(arg, m, mlen, tmp, (size_t)tl);
}

static uint64_t zscan_visit(const struct gs_obj *o, uint64_t cursor, size_t count,
                            struct gs_scan_collect *sc)
{
    return gs_zset_scan(o, cursor, count, zscan_member, sc);
}

void gs_cmd_zscan(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    gs_scan_value(c, argc, argv, GS_TYPE_ZSET, zscan_visit);
}
