/*
 * List commands, following Redis 7.0's t_list.c: arguments are checked
 * in Redis's order (some commands parse numbers before looking the key
 * up, some after), with its error texts and reply shapes. The data
 * structure is gridsync/types/quicklist/.
 *
 * Blocking commands live with their owner (they call gs_list_pop and the
 * key-ready hook of the node, see cmd_list.h); every push here reports
 * the key through gs_list_signal_ready.
 */
#include "gridsync/commands/cmd_list.h"

#include <string.h>

#include "core/error.h"
#include "gridsync/client/client.h"
#include "gridsync/commands/commands.h"
#include "gridsync/types/listpack/listpack.h"
#include "gridsync/types/quicklist/quicklist.h"
#include "gridsync/types/value.h"

static struct gs_quicklist *ql_of(struct gs_obj *o)
{
    return o->ptr;
}

void gs_list_signal_ready(struct gs_client *c, const struct gs_arg *key)
{
    gs_key_ready(c, c->db, key->p, key->len);
}

/* The list at key for reading; false after WRONGTYPE. */
static bool list_read(struct gs_client *c, const struct gs_arg *key, struct gs_obj *o, bool *found)
{
    bool wrong;
    struct gs_entry *e = gs_lookup_typed(c, key, GS_TYPE_LIST, 0, &wrong);
    *found = e != NULL;
    if (e)
        gs_entry_obj(e, o);
    return !wrong;
}

/* The list at key for writing, NULL when missing (*wrong after WRONGTYPE). */
static struct gs_entry *list_write(struct gs_client *c, const struct gs_arg *key, struct gs_obj *o,
                                   bool *wrong)
{
    struct gs_entry *e = gs_lookup_typed(c, key, GS_TYPE_LIST, GS_LOOKUP_WRITE, wrong);
    if (e)
        gs_entry_obj(e, o);
    return e;
}

/* A new empty list stored at key. NULL after replying OOM. */
static struct gs_entry *list_create(struct gs_client *c, const struct gs_arg *key, struct gs_obj *o)
{
    struct gs_quicklist *ql = gs_ql_new((int)c->shared->limits.list_max_listpack_size);
    if (!ql) {
        gs_error_oom(c);
        return NULL;
    }
    memset(o, 0, sizeof(*o));
    o->type = GS_TYPE_LIST;
    o->enc = GS_ENC_QUICKLIST;
    o->ptr = ql;
    struct gs_entry *e;
    if (gs_store_set_obj(c->db->store, key->p, key->len, o, -1, &e) != 0) {
        gs_ql_free(ql);
        gs_error_oom(c);
        return NULL;
    }
    return e;
}

/* Hand a changed list back, or delete the key when it is empty. */
static void list_done(struct gs_client *c, struct gs_entry *e, struct gs_obj *o)
{
    gs_store_obj_update(c->db->store, e, o);
    if (ql_of(o)->count == 0)
        gs_store_delete_entry(c->db->store, e);
}

/* LPUSH/RPUSH/LPUSHX/RPUSHX (Redis's pushGenericCommand). */
static void push_generic(struct gs_client *c, size_t argc, struct gs_arg *argv, bool head, bool xx)
{
    struct gs_obj o;
    bool wrong;
    struct gs_entry *e = list_write(c, &argv[1], &o, &wrong);
    if (wrong)
        return;
    if (!e) {
        if (xx) {
            gs_reply_int(&c->w, 0);
            return;
        }
        if (!(e = list_create(c, &argv[1], &o)))
            return;
    }
    int rc = 0;
    for (size_t i = 2; i < argc && rc == 0; i++)
        rc = gs_ql_push(ql_of(&o), head, argv[i].p, argv[i].len);
    list_done(c, e, &o);
    if (rc) {
        gs_error_oom(c);
        return;
    }
    gs_reply_int(&c->w, (int64_t)ql_of(&o)->count);
    gs_list_signal_ready(c, &argv[1]);
}

void gs_cmd_lpush(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    push_generic(c, argc, argv, true, false);
}

void gs_cmd_rpush(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    push_generic(c, argc, argv, false, false);
}

void gs_cmd_lpushx(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    push_generic(c, argc, argv, true, true);
}

void gs_cmd_rpushx(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    push_generic(c, argc, argv, false, true);
}

void gs_cmd_linsert(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    bool after;
    if (gs_arg_is(&argv[2], "after")) {
        after = true;
    } else if (gs_arg_is(&argv[2], "before")) {
        after = false;
    } else {
        gs_error_syntax(c);
        return;
    }
    struct gs_obj o;
    bool wrong;
    struct gs_entry *e = list_write(c, &argv[1], &o, &wrong);
    if (wrong)
        return;
    if (!e) {
        gs_reply_int(&c->w, 0);
        return;
    }
    struct gs_quicklist *ql = ql_of(&o);
    struct gs_ql_pos p = gs_ql_index(ql, 0);
    while (p.node && !gs_ql_eq(p, argv[3].p, argv[3].len))
        p = gs_ql_next(ql, p);
    if (!p.node) {
        gs_reply_int(&c->w, -1);
        return;
    }
    int rc = gs_ql_insert(ql, p, after, argv[4].p, argv[4].len);
    list_done(c, e, &o);
    if (rc) {
        gs_error_oom(c);
        return;
    }
    gs_reply_int(&c->w, (int64_t)ql->count);
    gs_list_signal_ready(c, &argv[1]);
}

void gs_cmd_llen(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_obj o;
    bool found;
    if (!list_read(c, &argv[1], &o, &found))
        return;
    gs_reply_int(&c->w, found ? (int64_t)ql_of(&o)->count : 0);
}

static void reply_pos(struct gs_client *c, struct gs_ql_pos p)
{
    char buf[GS_LP_INTBUF];
    size_t len;
    const char *v = gs_ql_get(p, buf, &len);
    gs_reply_bulk(&c->w, v, len);
}

void gs_cmd_lindex(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_obj o;
    bool found;
    if (!list_read(c, &argv[1], &o, &found))
        return;
    if (!found) {
        gs_reply_null(&c->w);
        return;
    }
    int64_t idx;
    if (!gs_arg_int(c, &argv[2], &idx, NULL))
        return;
    struct gs_ql_pos p = gs_ql_index(ql_of(&o), idx);
    if (p.node)
        reply_pos(c, p);
    else
        gs_reply_null(&c->w);
}

void gs_cmd_lset(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_obj o;
    bool wrong;
    struct gs_entry *e = list_write(c, &argv[1], &o, &wrong);
    if (wrong)
        return;
    if (!e) {
        gs_error(c, "ERR no such key");
        return;
    }
    int64_t idx;
    if (!gs_arg_int(c, &argv[2], &idx, NULL))
        return;
    struct gs_ql_pos p = gs_ql_index(ql_of(&o), idx);
    if (!p.node) {
        gs_error(c, "ERR index out of range");
        return;
    }
    int rc = gs_ql_replace(ql_of(&o), p, argv[3].p, argv[3].len);
    list_done(c, e, &o);
    if (rc)
        gs_error_oom(c);
    else
        gs_reply_ok(&c->w);
}

/* Redis's start/end normalisation for LRANGE and LTRIM: *n elements from
 * *start, 0 when the range is empty. */
static void range_of(int64_t start, int64_t end, int64_t len, int64_t *from, int64_t *n)
{
    if (start < 0)
        start += len;
    if (end < 0)
        end += len;
    if (start < 0)
        start = 0;
    if (start > end || start >= len) {
        *from = 0;
        *n = 0;
        return;
    }
    if (end >= len)
        end = len - 1;
    *from = start;
    *n = end - start + 1;
}

void gs_cmd_lrange(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t start, end;
    if (!gs_arg_int(c, &argv[2], &start, NULL) || !gs_arg_int(c, &argv[3], &end, NULL))
        return;
    struct gs_obj o;
    bool found;
    if (!list_read(c, &argv[1], &o, &found))
        return;
    if (!found) {
        gs_reply_array(&c->w, 0);
        return;
    }
    struct gs_quicklist *ql = ql_of(&o);
    int64_t from, n;
    range_of(start, end, (int64_t)ql->count, &from, &n);
    gs_reply_array(&c->w, (size_t)n);
    struct gs_ql_pos p = gs_ql_index(ql, from);
    for (int64_t i = 0; i < n; i++, p = gs_ql_next(ql, p))
        reply_pos(c, p);
}

void gs_cmd_ltrim(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t start, end;
    if (!gs_arg_int(c, &argv[2], &start, NULL) || !gs_arg_int(c, &argv[3], &end, NULL))
        return;
    struct gs_obj o;
    bool wrong;
    struct gs_entry *e = list_write(c, &argv[1], &o, &wrong);
    if (wrong)
        return;
    if (!e) {
        gs_reply_ok(&c->w);
        return;
    }
    struct gs_quicklist *ql = ql_of(&o);
    int64_t len = (int64_t)ql->count, from, n;
    range_of(start, end, len, &from, &n);
    /* keep [from, from + n): drop the tail first, then the head */
    if (n == 0) {
        gs_ql_delete_range(ql, 0, (size_t)len);
    } else {
        gs_ql_delete_range(ql, (size_t)(from + n), (size_t)(len - from - n));
        gs_ql_delete_range(ql, 0, (size_t)from);
    }
    list_done(c, e, &o);
    gs_reply_ok(&c->w);
}

void gs_cmd_lrem(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t count;
    if (!gs_arg_int(c, &argv[2], &count, NULL))
        return;
    struct gs_obj o;
    bool wrong;
    struct gs_entry *e = list_write(c, &argv[1], &o, &wrong);
    if (wrong)
        return;
    if (!e) {
        gs_reply_int(&c->w, 0);
        return;
    }
    struct gs_quicklist *ql = ql_of(&o);
    const struct gs_arg *el = &argv[3];
    int64_t removed = 0;
    if (count >= 0) {
        struct gs_ql_pos p = gs_ql_index(ql, 0);
        while (p.node && (count == 0 || removed < count)) {
            if (gs_ql_eq(p, el->p, el->len)) {
                p = gs_ql_delete(ql, p);
                removed++;
            } else {
                p = gs_ql_next(ql, p);
            }
        }
    } else {
        struct gs_ql_pos p = gs_ql_index(ql, -1);
        while (p.node && removed < -count) {
            struct gs_ql_pos prev = gs_ql_prev(ql, p);
            /* prev is before p: deleting p moves no byte before it, and
             * frees at most p's own node, so prev stays valid */
            if (gs_ql_eq(p, el->p, el->len)) {
                gs_ql_delete(ql, p);
                removed++;
            }
            p = prev;
        }
    }
    if (removed)
        list_done(c, e, &o);
    gs_reply_int(&c->w, removed);
}

/* LPOS key element [RANK r] [COUNT n] [MAXLEN m] (Redis's lposCommand). */
void gs_cmd_lpos(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t rank = 1, count = -1, maxlen = 0;
    for (size_t j = 3; j < argc; j++) {
        bool more = j + 1 < argc;
        if (gs_arg_is(&argv[j], "rank") && more) {
            if (!gs_arg_int(c, &argv[++j], &rank, NULL))
                return;
            if (rank == 0) {
                gs_error(c, "ERR RANK can't be zero: use 1 to start from the first match, 2 "
                            "from the second ... or use negative to start from the end of the "
                            "list");
                return;
            }
        } else if (gs_arg_is(&argv[j], "count") && more) {
            if (!gs_string2ll(argv[j + 1].p, argv[j + 1].len, &count) || count < 0) {
                gs_error(c, "ERR COUNT can't be negative");
                return;
            }
            j++;
        } else if (gs_arg_is(&argv[j], "maxlen") && more) {
            if (!gs_string2ll(argv[j + 1].p, argv[j + 1].len, &maxlen) || maxlen < 0) {
                gs_error(c, "ERR MAXLEN can't be negative");
                return;
            }
            j++;
        } else {
            gs_error_syntax(c);
            return;
        }
    }
    bool from_tail = rank < 0;
    /* Redis negates LONG_MIN into itself, a rank every match passes:
     * the first match from the tail, as rank -1. */
    if (rank == INT64_MIN)
        rank = 1;
    else if (from_tail)
        rank = -rank;
    struct gs_obj o;
    bool found;
    if (!list_read(c, &argv[1], &o, &found))
        return;
    if (!found) {
        if (count != -1)
            gs_reply_array(&c->w, 0);
        else
            gs_reply_null(&c->w);
        return;
    }
    struct gs_quicklist *ql = ql_of(&o);
    int64_t llen = (int64_t)ql->count, index = 0, matches = 0;
    /* Collect the matching indexes first: the array's length goes first. */
    struct core_buf *buf = &c->shared->scratch;
    buf->len = 0;
    struct gs_ql_pos p = gs_ql_index(ql, from_tail ? -1 : 0);
    bool hit = false;
    int64_t at = -1;
    while (p.node && (maxlen == 0 || index < maxlen)) {
        if (gs_ql_eq(p, argv[2].p, argv[2].len)) {
            matches++;
            if (matches >= rank) {
                int64_t pos = from_tail ? llen - index - 1 : index;
                if (count == -1) {
                    hit = true;
                    at = pos;
                    break;
                }
                core_buf_append(buf, &pos, sizeof(pos));
                if (count && matches - rank + 1 >= count)
                    break;
            }
        }
        index++;
        p = from_tail ? gs_ql_prev(ql, p) : gs_ql_next(ql, p);
    }
    if (count == -1) {
        if (hit)
            gs_reply_int(&c->w, at);
        else
            gs_reply_null(&c->w);
        return;
    }
    if (buf->oom) {
        core_buf_free(buf);
        gs_error_oom(c);
        return;
    }
    size_t n = buf->len / sizeof(int64_t);
    gs_reply_array(&c->w, n);
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        memcpy(&v, buf->data + i * sizeof(v), sizeof(v));
        gs_reply_int(&c->w, v);
    }
    if (buf->cap > 256 * 1024)
        core_buf_free(buf);
}

int gs_list_pop(struct gs_client *c, const struct gs_arg *key, bool head, int64_t count,
                bool with_key)
{
    struct gs_obj o;
    bool wrong;
    struct gs_entry *e = list_write(c, key, &o, &wrong);
    if (wrong)
        return -1;
    if (!e)
        return 0;
    struct gs_quicklist *ql = ql_of(&o);
    int64_t n = count < 0 ? 1 : count;
    if ((uint64_t)n > ql->count)
        n = (int64_t)ql->count;
    if (with_key) {
        gs_reply_array(&c->w, 2);
        gs_reply_bulk(&c->w, key->p, key->len);
    }
    if (count >= 0)
        gs_reply_array(&c->w, (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        struct gs_ql_pos p = gs_ql_index(ql, head ? 0 : -1);
        reply_pos(c, p);
        gs_ql_delete(ql, p);
    }
    list_done(c, e, &o);
    return 1;
}

/* LPOP/RPOP key [count] (Redis 7.0's popGenericCommand). */
static void pop_generic(struct gs_client *c, size_t argc, struct gs_arg *argv, bool head)
{
    if (argc > 3) {
        gs_error_arity(c, head ? "lpop" : "rpop");
        return;
    }
    int64_t count = -1;
    if (argc == 3 && (!gs_string2ll(argv[2].p, argv[2].len, &count) || count < 0)) {
        gs_error(c, "ERR value is out of range, must be positive");
        return;
    }
    bool wrong;
    struct gs_obj o;
    struct gs_entry *e = list_write(c, &argv[1], &o, &wrong);
    if (wrong)
        return;
    if (!e) {
        if (count >= 0)
            gs_reply_null_array(&c->w);
        else
            gs_reply_null(&c->w);
        return;
    }
    if (count == 0) {
        gs_reply_array(&c->w, 0);
        return;
    }
    gs_list_pop(c, &argv[1], head, count, false);
}

void gs_cmd_lpop(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    pop_generic(c, argc, argv, true);
}

void gs_cmd_rpop(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    pop_generic(c, argc, argv, false);
}

static bool parse_side(struct gs_client *c, const struct gs_arg *a, bool *head)
{
    if (gs_arg_is(a, "left"))
        *head = true;
    else if (gs_arg_is(a, "right"))
        *head = false;
    else {
        gs_error_syntax(c);
        return false;
    }
    return true;
}

int gs_list_move(struct gs_client *c, const struct gs_arg *src, const struct gs_arg *dst,
                 bool from_head, bool to_head)
{
    struct gs_shared *n = c->shared;
    struct gs_obj so;
    bool wrong;
    struct gs_entry *se = list_write(c, src, &so, &wrong);
    if (wrong)
        return -1;
    if (!se)
        return 0;
    bool same = src->len == dst->len && memcmp(src->p, dst->p, src->len) == 0;
    if (!same) {
        struct gs_entry *de = gs_lookup_typed(c, dst, GS_TYPE_LIST, GS_LOOKUP_WRITE, &wrong);
        (void)de;
        if (wrong)
            return -1;
    }
    /* Copy the element out before the source may be deleted. */
    struct gs_ql_pos p = gs_ql_index(ql_of(&so), from_head ? 0 : -1);
    char buf[GS_LP_INTBUF];
    size_t len;
    const char *v = gs_ql_get(p, buf, &len);
    n->scratch.len = 0;
    core_buf_append(&n->scratch, v, len);
    if (n->scratch.oom) {
        core_buf_free(&n->scratch);
        gs_error_oom(c);
        return -1;
    }
    gs_ql_delete(ql_of(&so), p);
    list_done(c, se, &so); /* may delete the source */
    struct gs_obj dobj;
    struct gs_entry *de = list_write(c, dst, &dobj, &wrong);
    if (!de && !(de = list_create(c, dst, &dobj)))
        return -1;
    int rc = gs_ql_push(ql_of(&dobj), to_head, n->scratch.data, len);
    list_done(c, de, &dobj);
    if (rc) {
        gs_error_oom(c);
        return -1;
    }
    gs_reply_bulk(&c->w, n->scratch.data, len);
    if (n->scratch.cap > 256 * 1024)
        core_buf_free(&n->scratch);
    gs_list_signal_ready(c, dst);
    return 1;
}

void gs_cmd_lmove(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    bool from, to;
    if (!parse_side(c, &argv[3], &from) || !parse_side(c, &argv[4], &to))
        return;
    if (gs_list_move(c, &argv[1], &argv[2], from, to) == 0)
        gs_reply_null(&c->w);
}

void gs_cmd_rpoplpush(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (gs_list_move(c, &argv[1], &argv[2], false, true) == 0)
        gs_reply_null(&c->w);
}

bool gs_list_parse_mpop(struct gs_client *c, size_t argc, struct gs_arg *argv, size_t numkeys_idx,
                        int64_t *numkeys, bool *head, int64_t *count)
{
    if (!gs_string2ll(argv[numkeys_idx].p, argv[numkeys_idx].len, numkeys) || *numkeys < 1) {
        gs_error(c, "ERR numkeys should be greater than 0");
        return false;
    }
    if (*numkeys > (int64_t)argc || numkeys_idx + (size_t)*numkeys + 1 >= argc) {
        gs_error_syntax(c);
        return false;
    }
    size_t where = numkeys_idx + (size_t)*numkeys + 1;
    if (!parse_side(c, &argv[where], head))
        return false;
    *count = -1;
    for (size_t j = where + 1; j < argc; j++) {
        if (*count == -1 && gs_arg_is(&argv[j], "count") && j + 1 < argc) {
            j++;
            if (!gs_string2ll(argv[j].p, argv[j].len, count) || *count < 1) {
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

void gs_cmd_lmpop(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t numkeys, count;
    bool head;
    if (!gs_list_parse_mpop(c, argc, argv, 1, &numkeys, &head, &count))
        return;
    for (int64_t i = 0; i < numkeys; i++) {
        int rc = gs_list_pop(c, &argv[2 + i], head, count, true);
        if (rc != 0)
            return; /* replied: popped, or WRONGTYPE */
    }
    gs_reply_null_array(&c->w);
}
