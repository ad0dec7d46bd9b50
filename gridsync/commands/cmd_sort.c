/*
 * SORT and SORT_RO, following Redis 7.0's sort.c: options parsed in
 * Redis's order with its errors, a list, set or sorted set sorted
 * numerically (strtod, with Redis's rule for what is not a number) or
 * with ALPHA by strcoll, BY a pattern (key or hash field, "*" replaced
 * by the element) or BY a constant (no sorting: the value's own order),
 * LIMIT with Redis's clamping, GET patterns ("#" the element), and STORE
 * into a list. The sort is glibc's qsort, as Redis's, so equal elements
 * come out in the same order for the same input order.
 *
 * Where the output can differ from Redis's: elements that compare equal
 * (ALPHA BY equal or missing values) keep the order they were read in,
 * which for a set or a sorted set is the hash table's order in Redis and
 * the encoding's here, and Redis sorts a BY + LIMIT request with its own
 * partial quicksort; BY a constant on a set without STORE replies in the
 * set's order (Redis: its hash table's). Redis also converts a small
 * sorted set to a skiplist when it sorts it; this SORT only reads.
 *
 * Cost: O(n log n) for n elements plus one key lookup per element for
 * BY and per element and GET pattern on output; n copies of the
 * elements (and of BY values for ALPHA) in memory while it runs.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gridsync/client/client.h"
#include "gridsync/commands/cmd_list.h"
#include "gridsync/commands/commands.h"
#include "gridsync/store/store.h"
#include "gridsync/types/hash/hash.h"
#include "gridsync/types/quicklist/quicklist.h"
#include "gridsync/types/set/set.h"
#include "gridsync/types/zset/zset.h"

struct sort_item {
    char *s; /* the element, NUL-terminated (Redis compares C strings) */
    size_t len;
    double score;
    char *by; /* ALPHA BY: the pattern's value, NUL-terminated; NULL if none */
    size_t bylen;
};

/* qsort has no argument: the comparison's options, as Redis's globals. */
static struct {
    bool desc, alpha, bypattern, store;
} sort_opts;

/* Redis's compareStringObjects (binary). */
static int binary_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int cmp = memcmp(a, b, alen < blen ? alen : blen);
    if (cmp)
        return cmp;
    return alen < blen ? -1 : alen > blen ? 1 : 0;
}

static int sort_cmp(const void *x, const void *y)
{
    const struct sort_item *a = x, *b = y;
    int cmp;
    if (!sort_opts.alpha) {
        if (a->score > b->score)
            cmp = 1;
        else if (a->score < b->score)
            cmp = -1;
        else
            cmp = binary_cmp(a->s, a->len, b->s, b->len);
    } else if (sort_opts.bypattern) {
        if (!a->by || !b->by)
            cmp = a->by == b->by ? 0 : !a->by ? -1 : 1;
        else if (sort_opts.store)
            cmp = binary_cmp(a->by, a->bylen, b->by, b->bylen);
        else
            cmp = strcoll(a->by, b->by);
    } else {
        cmp = sort_opts.store ? binary_cmp(a->s, a->len, b->s, b->len) : strcoll(a->s, b->s);
    }
    return sort_opts.desc ? -cmp : cmp;
}

/* A NUL-terminated copy (NULL when out of memory). */
static char *dup_bytes(const char *p, size_t len)
{
    char *d = malloc(len + 1);
    if (d) {
        if (len)
            memcpy(d, p, len);
        d[len] = '\0';
    }
    return d;
}

/* Redis's lookupKeyByPattern: "#" is the element itself; otherwise the
 * first "*" (in the pattern read as a C string) is replaced by the
 * element, and "->field" after it names a hash field; the key must hold
 * a string (or, with a field, a hash). *v is valid until the store
 * changes; ibuf holds an integer field. False: no value. */
static bool by_pattern(struct gs_client *c, const struct gs_arg *pat, const char *el, size_t ellen,
                       struct core_buf *key, char *ibuf, const char **v, size_t *vlen)
{
    size_t clen = strnlen(pat->p, pat->len);
    if (clen == 1 && pat->p[0] == '#') {
        *v = el;
        *vlen = ellen;
        return true;
    }
    const char *star = memchr(pat->p, '*', clen);
    if (!star)
        return false;
    const char *cend = pat->p + clen, *f = NULL;
    for (const char *q = star + 1; q + 1 < cend; q++)
        if (q[0] == '-' && q[1] == '>') {
            f = q;
            break;
        }
    if (f && f + 2 >= cend)
        f = NULL; /* "->" with nothing after it: no field */
    size_t fieldlen = f ? pat->len - (size_t)(f - pat->p) - 2 : 0;
    size_t prefixlen = (size_t)(star - pat->p);
    size_t postfixlen = pat->len - (prefixlen + 1) - (fieldlen ? fieldlen + 2 : 0);
    key->len = 0;
    core_buf_append(key, pat->p, prefixlen);
    core_buf_append(key, el, ellen);
    core_buf_append(key, star + 1, postfixlen);
    if (key->oom)
        return false;
    const char *k = key->len ? key->data : ""; /* "*" and an empty element: the key "" */
    struct gs_entry *e = gs_store_lookup(c->db->store, k, key->len, c->db->now_ms, 0);
    if (!e)
        return false;
    if (fieldlen) {
        if (gs_entry_type(e) != GS_TYPE_HASH)
            return false;
        struct gs_obj o;
        gs_entry_obj(e, &o);
        return gs_hash_get(&o, f + 2, fieldlen, ibuf, v, vlen);
    }
    if (gs_entry_type(e) != GS_TYPE_STRING)
        return false;
    *v = gs_entry_value(e, vlen);
    return true;
}

/* Read the value's elements [from, from + n) in its order (a list or a
 * sorted set; rev: from the end) or all of a set, into items. False when
 * out of memory. */
static bool load(struct gs_obj *o, int type, bool rev, size_t from, size_t n,
                 struct sort_item *items)
{
    char buf[GS_LP_INTBUF];
    const char *s;
    size_t len, i = 0;
    if (n == 0)
        return true; /* also when there is no value at all */
    if (type == GS_TYPE_LIST) {
        struct gs_quicklist *ql = o->ptr;
        int64_t at = rev ? (int64_t)(ql->count - from - 1) : (int64_t)from;
        struct gs_ql_pos p = gs_ql_index(ql, at);
        for (; i < n && p.node; i++) {
            s = gs_ql_get(p, buf, &len);
            if (!(items[i].s = dup_bytes(s, len)))
                return false;
            items[i].len = len;
            p = rev ? gs_ql_prev(ql, p) : gs_ql_next(ql, p);
        }
    } else if (type == GS_TYPE_SET) {
        struct gs_set_iter it;
        gs_set_iter_init(&it, o);
        for (; i < n && gs_set_iter_next(&it, &s, &len); i++) {
            if (!(items[i].s = dup_bytes(s, len)))
                return false;
            items[i].len = len;
        }
    } else {
        size_t zlen = gs_zset_len(o);
        struct gs_zset_iter it;
        gs_zset_iter_init(&it, o, rev ? zlen - 1 - from : from, rev);
        double score;
        for (; i < n && gs_zset_iter_next(&it, &s, &len, &score); i++) {
            if (!(items[i].s = dup_bytes(s, len)))
                return false;
            items[i].len = len;
        }
    }
    return true;
}

static void free_items(struct sort_item *items, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(items[i].s);
        free(items[i].by);
    }
    free(items);
}

/* SORT's STORE: the result as a list at dst (replacing what it held,
 * without a TTL), or dst deleted when the result is empty. */
static bool store_result(struct gs_client *c, const struct gs_arg *dst, struct sort_item *items,
                         long start, long end, const struct gs_arg *gets, size_t ngets,
                         struct core_buf *key)
{
    struct gs_quicklist *ql = gs_ql_new((int)c->shared->limits.list_max_listpack_size);
    if (!ql)
        return false;
    int rc = 0;
    char ibuf[GS_LP_INTBUF];
    for (long j = start; j <= end && rc == 0; j++) {
        if (!ngets)
            rc = gs_ql_push(ql, false, items[j].s, items[j].len);
        for (size_t g = 0; g < ngets && rc == 0; g++) {
            const char *v;
            size_t vlen;
            if (!by_pattern(c, &gets[g], items[j].s, items[j].len, key, ibuf, &v, &vlen)) {
                v = "";
                vlen = 0;
            }
            /* v may be in the store: pushing into the new list does not
             * change the store. */
            rc = gs_ql_push(ql, false, v, vlen);
        }
    }
    if (rc) {
        gs_ql_free(ql);
        return false;
    }
    if (ql->count == 0) {
        gs_ql_free(ql);
        gs_store_delete(c->db->store, dst->p, dst->len, c->db->now_ms);
        return true;
    }
    struct gs_obj o = {0};
    o.type = GS_TYPE_LIST;
    o.enc = GS_ENC_QUICKLIST;
    o.ptr = ql;
    if (gs_store_set_obj(c->db->store, dst->p, dst->len, &o, -1, NULL)) {
        gs_ql_free(ql);
        return false;
    }
    gs_list_signal_ready(c, dst);
    return true;
}

static void sort_generic(struct gs_client *c, size_t argc, struct gs_arg *argv, bool ro)
{
    bool desc = false, alpha = false, dontsort = false;
    int64_t limit_start = 0, limit_count = -1;
    const struct gs_arg *sortby = NULL, *storekey = NULL;
    /* GET patterns: at most one per two arguments. */
    struct gs_arg *gets = malloc((argc / 2 + 1) * sizeof(*gets));
    size_t ngets = 0;
    if (!gets) {
        gs_error_oom(c);
        return;
    }
    for (size_t j = 2; j < argc; j++) {
        size_t left = argc - j - 1;
        const struct gs_arg *a = &argv[j];
        if (gs_arg_is(a, "asc")) {
            desc = false;
        } else if (gs_arg_is(a, "desc")) {
            desc = true;
        } else if (gs_arg_is(a, "alpha")) {
            alpha = true;
        } else if (gs_arg_is(a, "limit") && left >= 2) {
            if (!gs_arg_int(c, &argv[j + 1], &limit_start, NULL) ||
                !gs_arg_int(c, &argv[j + 2], &limit_count, NULL)) {
                free(gets);
                return;
            }
            j += 2;
        } else if (!ro && gs_arg_is(a, "store") && left >= 1) {
            storekey = &argv[++j];
        } else if (gs_arg_is(a, "by") && left >= 1) {
            sortby = &argv[++j];
            if (!memchr(sortby->p, '*', strnlen(sortby->p, sortby->len))) {
                dontsort = true;
            } else if (c->shared->cluster_mode) {
                gs_error(c, "ERR BY option of SORT denied in Cluster mode.");
                free(gets);
                return;
            }
        } else if (gs_arg_is(a, "get") && left >= 1) {
            if (c->shared->cluster_mode) {
                gs_error(c, "ERR GET option of SORT denied in Cluster mode.");
                free(gets);
                return;
            }
            gets[ngets++] = argv[++j];
        } else {
            gs_error_syntax(c);
            free(gets);
            return;
        }
    }

    struct gs_entry *e = gs_store_lookup(c->db->store, argv[1].p, argv[1].len, c->db->now_ms, 0);
    int type = e ? gs_entry_type(e) : GS_TYPE_LIST;
    if (type != GS_TYPE_LIST && type != GS_TYPE_SET && type != GS_TYPE_ZSET) {
        free(gets);
        gs_error_wrongtype(c);
        return;
    }
    struct gs_obj o = {0};
    size_t size = 0;
    if (e) {
        gs_entry_obj(e, &o);
        size = type == GS_TYPE_LIST  ? ((struct gs_quicklist *)o.ptr)->count
               : type == GS_TYPE_SET ? gs_set_len(&o)
                                     : gs_zset_len(&o);
    }
    /* A set's order is its hash table's: a stored result is sorted, and
     * so is one for a client without a connection (a script, as Redis's
     * CLIENT_SCRIPT, or a replica applying a log entry: every copy must
     * compute the same). */
    if (dontsort && type == GS_TYPE_SET && (storekey || !c->conn)) {
        dontsort = false;
        alpha = true;
        sortby = NULL;
    }
    /* Redis's LIMIT clamping. */
    long vlen = (long)size;
    long start = (long)(limit_start < 0 ? 0 : limit_start > vlen ? vlen : limit_start);
    long count = (long)(limit_count < -1 ? -1 : limit_count > vlen ? vlen : limit_count);
    long end = count < 0 ? vlen - 1 : start + count - 1;
    if (start >= vlen) {
        start = vlen - 1;
        end = vlen - 2;
    }
    if (end >= vlen)
        end = vlen - 1;
    /* A list or sorted set in its own order: only the range is read. */
    bool ranged = (type == GS_TYPE_LIST || type == GS_TYPE_ZSET) && dontsort;
    size_t from = 0, n = size;
    if (ranged) {
        if (start != 0 || end != vlen - 1) {
            n = end >= start ? (size_t)(end - start + 1) : 0;
            from = n ? (size_t)start : 0;
        }
        end -= start;
        start = 0;
    }
    struct sort_item *items = calloc(n ? n : 1, sizeof(*items));
    if (!items || !load(&o, type, ranged && desc, from, n, items)) {
        if (items)
            free_items(items, n);
        free(gets);
        gs_error_oom(c);
        return;
    }

    struct core_buf key = {0};
    char ibuf[GS_LP_INTBUF];
    bool not_number = false, oom = false;
    if (!dontsort) {
        for (size_t j = 0; j < n && !oom; j++) {
            const char *v = items[j].s;
            size_t len = items[j].len;
            if (sortby && !by_pattern(c, sortby, items[j].s, items[j].len, &key, ibuf, &v, &len))
                continue; /* no such key: score 0, or none for ALPHA */
            if (alpha) {
                if (sortby) {
                    items[j].by = dup_bytes(v, len);
                    items[j].bylen = len;
                    oom = !items[j].by;
                }
                continue;
            }
            /* Redis parses the value as a C string with strtod. */
            char *num = dup_bytes(v, len), *eptr;
            if (!num) {
                oom = true;
                break;
            }
            errno = 0;
            items[j].score = strtod(num, &eptr);
            if (eptr[0] != '\0' || errno == ERANGE || isnan(items[j].score))
                not_number = true;
            free(num);
        }
        sort_opts.desc = desc;
        sort_opts.alpha = alpha;
        sort_opts.bypattern = sortby != NULL;
        sort_opts.store = storekey != NULL;
        if (!oom)
            qsort(items, n, sizeof(*items), sort_cmp);
    }

    long outputlen = ngets ? (long)ngets * (end - start + 1) : end - start + 1;
    if (oom) {
        gs_error_oom(c);
    } else if (not_number) {
        gs_error(c, "ERR One or more scores can't be converted into double");
    } else if (!storekey) {
        gs_reply_array(&c->w, outputlen > 0 ? (size_t)outputlen : 0);
        for (long j = start; j <= end; j++) {
            if (!ngets)
                gs_reply_bulk(&c->w, items[j].s, items[j].len);
            for (size_t g = 0; g < ngets; g++) {
                const char *v;
                size_t len;
                if (by_pattern(c, &gets[g], items[j].s, items[j].len, &key, ibuf, &v, &len))
                    gs_reply_bulk(&c->w, v, len);
                else
                    gs_reply_null(&c->w);
            }
        }
    } else if (store_result(c, storekey, items, start, end, gets, ngets, &key)) {
        gs_reply_int(&c->w, outputlen > 0 ? outputlen : 0);
    } else {
        gs_error_oom(c);
    }
    core_buf_free(&key);
    free_items(items, n);
    free(gets);
}

void gs_cmd_sort(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    sort_generic(c, argc, argv, false);
}

void gs_cmd_sort_ro(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    sort_generic(c, argc, argv, true);
}

long gs_sort_keys(size_t argc, const struct gs_arg *argv, size_t *pos, size_t cap)
{
    /* Redis's sortGetKeys: the key, and the last STORE's argument, options
     * with arguments skipped as Redis skips them. */
    static const struct {
        const char *name;
        size_t skip;
    } skip[] = {{"limit", 2}, {"get", 1}, {"by", 1}};
    size_t n = 0, store = 0;
    if (argc > 1 && cap > 0)
        pos[n] = 1;
    n = argc > 1;
    for (size_t i = 2; i < argc; i++) {
        for (size_t j = 0; j < sizeof(skip) / sizeof(skip[0]); j++) {
            if (gs_arg_is(&argv[i], skip[j].name)) {
                i += skip[j].skip;
                break;
            }
            if (gs_arg_is(&argv[i], "store") && i + 1 < argc) {
                store = i + 1;
                i++;
                break;
            }
        }
    }
    if (store) {
        if (n < cap)
            pos[n] = store;
        n++;
    }
    return (long)n;
}
