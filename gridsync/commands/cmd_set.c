/*
 * Set commands, following Redis 7.0's t_set.c: checks in Redis's order,
 * its error texts, sets as RESP3 set replies where Redis sends them. The
 * data structure is gridsync/types/set/. Results of SINTER/SUNION/SDIFF
 * are built as a set with the same encoding rules, so an all-integer
 * result comes out sorted as Redis's intset does.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/hash.h"
#include "gridsync/commands/cmd_set.h"
#include "gridsync/commands/scan.h"
#include "gridsync/client/client.h"
#include "gridsync/commands/commands.h"
#include "gridsync/types/set/set.h"

static bool set_read(struct gs_client *c, const struct gs_arg *key, struct gs_obj *o, bool *found)
{
    bool wrong;
    struct gs_entry *e = gs_lookup_typed(c, key, GS_TYPE_SET, 0, &wrong);
    *found = e != NULL;
    if (e)
        gs_entry_obj(e, o);
    return !wrong;
}

static struct gs_entry *set_write(struct gs_client *c, const struct gs_arg *key, struct gs_obj *o,
                                  bool *wrong)
{
    struct gs_entry *e = gs_lookup_typed(c, key, GS_TYPE_SET, GS_LOOKUP_WRITE, wrong);
    if (e)
        gs_entry_obj(e, o);
    return e;
}

static void set_done(struct gs_client *c, struct gs_entry *e, struct gs_obj *o)
{
    gs_store_obj_update(c->db->store, e, o);
    if (gs_set_len(o) == 0)
        gs_store_delete_entry(c->db->store, e);
}

/* Store a set built aside at key (replacing what it held), or delete key
 * when the set is empty; takes ownership of o. False after OOM. */
static bool store_set(struct gs_client *c, const struct gs_arg *key, struct gs_obj *o)
{
    if (gs_set_len(o) == 0) {
        gs_set_free(o);
        gs_store_delete(c->db->store, key->p, key->len, c->db->now_ms);
        return true;
    }
    if (gs_store_set_obj(c->db->store, key->p, key->len, o, -1, NULL)) {
        gs_set_free(o);
        gs_error_oom(c);
        return false;
    }
    return true;
}

void gs_cmd_sadd(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_obj o;
    bool wrong;
    struct gs_entry *e = set_write(c, &argv[1], &o, &wrong);
    if (wrong)
        return;
    if (!e) {
        if (gs_set_init(&o) || gs_store_set_obj(c->db->store, argv[1].p, argv[1].len, &o, -1, &e)) {
            if (o.ptr)
                gs_set_free(&o);
            gs_error_oom(c);
            return;
        }
    }
    struct gs_type_limits lim = c->shared->limits;
    int64_t n = 0;
    int rc = 0;
    for (size_t i = 2; i < argc && rc == 0; i++) {
        bool added;
        rc = gs_set_add(&o, argv[i].p, argv[i].len, &lim, &added);
        n += rc == 0 && added;
    }
    set_done(c, e, &o);
    if (rc)
        gs_error_oom(c);
    else
        gs_reply_int(&c->w, n);
}

void gs_cmd_srem(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_obj o;
    bool wrong;
    struct gs_entry *e = set_write(c, &argv[1], &o, &wrong);
    if (wrong)
        return;
    if (!e) {
        gs_reply_int(&c->w, 0);
        return;
    }
    int64_t n = 0;
    for (size_t i = 2; i < argc && gs_set_len(&o) > 0; i++)
        n += gs_set_remove(&o, argv[i].p, argv[i].len);
    if (n)
        set_done(c, e, &o);
    gs_reply_int(&c->w, n);
}

/* Every member, as a RESP3 set (SMEMBERS, SINTER...) or an array
 * (SRANDMEMBER's whole-set case). */
static void reply_members_as(struct gs_client *c, const struct gs_obj *o, bool as_set)
{
    if (as_set)
        gs_reply_set(&c->w, gs_set_len(o));
    else
        gs_reply_array(&c->w, gs_set_len(o));
    struct gs_set_iter it;
    const char *s;
    size_t len;
    gs_set_iter_init(&it, o);
    while (gs_set_iter_next(&it, &s, &len))
        gs_reply_bulk(&c->w, s, len);
}

static void reply_members(struct gs_client *c, const struct gs_obj *o)
{
    reply_members_as(c, o, true);
}

void gs_cmd_smembers(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_obj o;
    bool found;
    if (!set_read(c, &argv[1], &o, &found))
        return;
    if (!found)
        gs_reply_set(&c->w, 0);
    else
        reply_members(c, &o);
}

void gs_cmd_sismember(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_obj o;
    bool found;
    if (!set_read(c, &argv[1], &o, &found))
        return;
    gs_reply_int(&c->w, found && gs_set_contains(&o, argv[2].p, argv[2].len));
}

void gs_cmd_smismember(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_obj o;
    bool found;
    if (!set_read(c, &argv[1], &o, &found))
        return;
    gs_reply_array(&c->w, argc - 2);
    for (size_t i = 2; i < argc; i++)
        gs_reply_int(&c->w, found && gs_set_contains(&o, argv[i].p, argv[i].len));
}

void gs_cmd_scard(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_obj o;
    bool found;
    if (!set_read(c, &argv[1], &o, &found))
        return;
    gs_reply_int(&c->w, found ? (int64_t)gs_set_len(&o) : 0);
}

/* SPOP's count: -1 for the form without one. False after replying the
 * error (Redis's order: the count is checked before the key). */
static bool spop_count(struct gs_client *c, size_t argc, const struct gs_arg *argv, int64_t *count)
{
    *count = -1;
    if (argc == 3) {
        if (!gs_string2ll(argv[2].p, argv[2].len, count) || *count < 0) {
            gs_error(c, "ERR value is out of range, must be positive");
            return false;
        }
    } else if (argc > 3) {
        gs_error_syntax(c);
        return false;
    }
    return true;
}

/* The key of a SPOP: set_write's answer, with the replies for no key and
 * count 0 given; returns e only when members are to be popped. */
static struct gs_entry *spop_key(struct gs_client *c, const struct gs_arg *key, int64_t count,
                                 struct gs_obj *o)
{
    bool wrong;
    struct gs_entry *e = set_write(c, key, o, &wrong);
    if (wrong)
        return NULL;
    if (!e || count == 0) {
        if (count >= 0)
            gs_reply_set(&c->w, 0);
        else
            gs_reply_null(&c->w);
        return NULL;
    }
    return e;
}

/* The canonical pick's order (cmd_set.h): a member's rank. */
static uint64_t spop_rank(const char *s, size_t len, uint64_t seed)
{
    return core_hash64(s, len, seed);
}

/* The k-th smallest of h[0..n) (1 <= k <= n), reordering h (quickselect). */
static uint64_t kth_smallest(uint64_t *h, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        uint64_t pivot = h[lo + (hi - lo) / 2];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (h[i] < pivot)
                i++;
            while (h[j] > pivot)
                j--;
            if (i <= j) {
                uint64_t t = h[i];
                h[i] = h[j];
                h[j] = t;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            break;
    }
    return h[want];
}

/* Reply one popped member and remove it (s may be in the set: copied
 * first). */
static void pop_member(struct gs_client *c, struct gs_obj *o, const char *s, size_t len)
{
    gs_reply_bulk(&c->w, s, len);
    struct core_buf *tmp = &c->shared->scratch;
    tmp->len = 0;
    core_buf_append(tmp, s, len);
    if (!tmp->oom)
        gs_set_remove(o, tmp->data, len);
    else
        core_buf_free(tmp);
}

/* Pop the k members of the canonical pick (cmd_set.h), 1 <= k < size. */
static void pop_canonical(struct gs_client *c, struct gs_obj *o, const struct gs_arg *key, size_t k)
{
    uint64_t seed = core_hash64(key->p, key->len, (uint64_t)c->db->now_ms) ^ 0x5350u;
    size_t size = gs_set_len(o);
    struct gs_set_iter it;
    const char *s;
    size_t len;
    /* The k-th smallest rank: from every rank when 8n bytes are there,
     * else by k passes, each finding the next rank above the last. */
    uint64_t bound = 0;
    uint64_t *h = k > 1 ? malloc(size * sizeof(*h)) : NULL;
    if (h) {
        size_t i = 0;
        gs_set_iter_init(&it, o);
        while (gs_set_iter_next(&it, &s, &len))
            h[i++] = spop_rank(s, len, seed);
        bound = kth_smallest(h, size, k);
        free(h);
    } else {
        for (size_t round = 0; round < k; round++) {
            uint64_t next = UINT64_MAX;
            gs_set_iter_init(&it, o);
            while (gs_set_iter_next(&it, &s, &len)) {
                uint64_t r = spop_rank(s, len, seed);
                if ((round == 0 || r > bound) && r <= next)
                    next = r;
            }
            bound = next;
        }
    }
    /* Collect (the set must not change while iterated), then pop. */
    struct core_buf *tmp = &c->shared->scratch;
    tmp->len = 0;
    size_t got = 0;
    gs_set_iter_init(&it, o);
    while (got < k && gs_set_iter_next(&it, &s, &len)) {
        if (spop_rank(s, len, seed) > bound)
            continue;
        uint32_t l32 = (uint32_t)len;
        core_buf_append(tmp, &l32, sizeof(l32));
        core_buf_append(tmp, s, len);
        got++;
    }
    if (tmp->oom) {
        core_buf_free(tmp);
        return;
    }
    /* Removing does not touch the scratch buffer, pop_member would. */
    for (size_t off = 0; off < tmp->len;) {
        uint32_t l32;
        memcpy(&l32, tmp->data + off, sizeof(l32));
        off += sizeof(l32);
        gs_reply_bulk(&c->w, tmp->data + off, l32);
        gs_set_remove(o, tmp->data + off, l32);
        off += l32;
    }
}

/* Pop as on a replica (cmd_set.h): the hinted members when the set still
 * holds them all and more, else the canonical pick; every member when the
 * count covers the set. e is the set's entry, count != 0. */
static void spop_replicated(struct gs_client *c, struct gs_entry *e, struct gs_obj *o,
                            const struct gs_arg *key, int64_t count, const struct gs_arg *hints,
                            size_t nhints)
{
    size_t size = gs_set_len(o);
    size_t k = count < 0 ? 1 : (size_t)count;
    if (k > size)
        k = size;
    if (count >= 0)
        gs_reply_set(&c->w, k);
    if (k == size) { /* all of them: the same on every replica in any order */
        char buf[GS_LP_INTBUF];
        while (gs_set_len(o) > 0) {
            size_t len;
            const char *s = gs_set_random(o, gs_client_random(c), buf, &len);
            pop_member(c, o, s, len);
        }
        set_done(c, e, o);
        return;
    }
    bool hinted = nhints == k;
    for (size_t i = 0; i < nhints && hinted; i++)
        hinted = gs_set_contains(o, hints[i].p, hints[i].len);
    size_t popped = 0;
    for (size_t i = 0; i < nhints && hinted; i++)
        if (gs_set_remove(o, hints[i].p, hints[i].len)) {
            gs_reply_bulk(&c->w, hints[i].p, hints[i].len);
            popped++;
        }
    if (popped < k) /* not all there (or one repeated): the canonical rest */
        pop_canonical(c, o, key, k - popped);
    set_done(c, e, o);
}

void gs_spop_apply(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t count = -1;
    if (argv[2].len > 0 && (!gs_string2ll(argv[2].p, argv[2].len, &count) || count < 0)) {
        gs_error(c, "ERR value is out of range, must be positive");
        return;
    }
    struct gs_obj o;
    struct gs_entry *e = spop_key(c, &argv[1], count, &o);
    if (e)
        spop_replicated(c, e, &o, &argv[1], count, argv + 3, argc - 3);
}

long gs_spop_hints(struct gs_client *c, size_t argc, const struct gs_arg *argv,
                   struct core_buf *bytes, struct gs_arg **hints)
{
    *hints = NULL;
    int64_t count = -1;
    if (argc > 3 || (argc == 3 && (!gs_string2ll(argv[2].p, argv[2].len, &count) || count < 0)))
        return 0;
    struct gs_entry *e =
        gs_store_lookup(c->db->store, argv[1].p, argv[1].len, c->db->now_ms, GS_LOOKUP_NOTOUCH);
    if (!e || gs_entry_type(e) != GS_TYPE_SET || count == 0)
        return 0;
    struct gs_obj o;
    gs_entry_obj(e, &o);
    size_t size = gs_set_len(&o);
    size_t k = count < 0 ? 1 : (size_t)count;
    if (k >= size)
        return 0;
    struct gs_arg *h = malloc(k * sizeof(*h));
    unsigned char *chosen = k > 1 ? gs_random_positions(c, size, k) : NULL;
    if (!h || (k > 1 && !chosen)) {
        free(h);
        free(chosen);
        return -1;
    }
    bytes->len = 0;
    char buf[GS_LP_INTBUF];
    size_t len;
    const char *s;
    if (k == 1) {
        s = gs_set_random(&o, gs_client_random(c), buf, &len);
        core_buf_append(bytes, s, len);
        h[0].len = len;
    } else {
        struct gs_set_iter it;
        gs_set_iter_init(&it, &o);
        size_t n = 0;
        for (size_t i = 0; gs_set_iter_next(&it, &s, &len); i++)
            if (chosen[i]) {
                core_buf_append(bytes, s, len);
                h[n++].len = len;
            }
        free(chosen);
    }
    if (bytes->oom) {
        free(h);
        return -1;
    }
    size_t off = 0;
    for (size_t i = 0; i < k; i++) {
        h[i].p = bytes->data + off;
        off += h[i].len;
    }
    *hints = h;
    return (long)k;
}

/* SPOP key [count] (Redis's spopCommand / spopWithCountCommand). */
void gs_cmd_spop(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t count;
    if (!spop_count(c, argc, argv, &count))
        return;
    struct gs_obj o;
    struct gs_entry *e = spop_key(c, &argv[1], count, &o);
    if (!e)
        return;
    if (c->replica_apply) {
        spop_replicated(c, e, &o, &argv[1], count, NULL, 0);
        return;
    }
    size_t n = count < 0 ? 1 : (size_t)count;
    if (n > gs_set_len(&o))
        n = gs_set_len(&o);
    if (count >= 0)
        gs_reply_set(&c->w, n);
    char buf[GS_LP_INTBUF];
    struct core_buf *tmp = &c->shared->scratch;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *s = gs_set_random(&o, gs_client_random(c), buf, &len);
        gs_reply_bulk(&c->w, s, len);
        /* copy: removing frees the element the pointer is in */
        tmp->len = 0;
        core_buf_append(tmp, s, len);
        if (tmp->oom) {
            core_buf_free(tmp);
            break;
        }
        gs_set_remove(&o, tmp->data, len);
    }
    set_done(c, e, &o);
}

/* SRANDMEMBER key [count] (Redis's srandmemberWithCountCommand). */
void gs_cmd_srandmember(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (argc > 3) {
        gs_error_syntax(c);
        return;
    }
    struct gs_obj o;
    bool found;
    char buf[GS_LP_INTBUF];
    size_t len;
    if (argc == 2) {
        if (!set_read(c, &argv[1], &o, &found))
            return;
        if (!found) {
            gs_reply_null(&c->w);
            return;
        }
        const char *s = gs_set_random(&o, gs_client_random(c), buf, &len);
        gs_reply_bulk(&c->w, s, len);
        return;
    }
    int64_t l;
    bool with;
    if (!gs_parse_random_count(c, argc, argv, NULL, &l, &with))
        return;
    if (!set_read(c, &argv[1], &o, &found))
        return;
    if (!found || l == 0) {
        gs_reply_array(&c->w, 0);
        return;
    }
    size_t size = gs_set_len(&o);
    if (l < 0) { /* repeats allowed */
        gs_reply_array(&c->w, (size_t)-l);
        for (int64_t i = 0; i < -l; i++) {
            const char *s = gs_set_random(&o, gs_client_random(c), buf, &len);
            gs_reply_bulk(&c->w, s, len);
        }
        return;
    }
    size_t count = (size_t)l;
    struct gs_set_iter it;
    const char *s;
    if (count >= size) {
        reply_members_as(c, &o, false);
        return;
    }
    unsigned char *chosen = gs_random_positions(c, size, count); /* distinct members */
    if (!chosen) {
        gs_error_oom(c);
        return;
    }
    gs_reply_array(&c->w, count);
    gs_set_iter_init(&it, &o);
    for (size_t i = 0; gs_set_iter_next(&it, &s, &len); i++)
        if (chosen[i])
            gs_reply_bulk(&c->w, s, len);
    free(chosen);
}

void gs_cmd_smove(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_store *st = c->db->store;
    struct gs_entry *se =
        gs_store_lookup(st, argv[1].p, argv[1].len, c->db->now_ms, GS_LOOKUP_WRITE);
    struct gs_entry *de =
        gs_store_lookup(st, argv[2].p, argv[2].len, c->db->now_ms, GS_LOOKUP_WRITE);
    if (!se) {
        gs_reply_int(&c->w, 0);
        return;
    }
    if (gs_entry_type(se) != GS_TYPE_SET || (de && gs_entry_type(de) != GS_TYPE_SET)) {
        gs_error_wrongtype(c);
        return;
    }
    struct gs_obj so;
    gs_entry_obj(se, &so);
    if (se == de) {
        gs_reply_int(&c->w, gs_set_contains(&so, argv[3].p, argv[3].len));
        return;
    }
    if (!gs_set_remove(&so, argv[3].p, argv[3].len)) {
        gs_reply_int(&c->w, 0);
        return;
    }
    set_done(c, se, &so); /* may delete the source */
    struct gs_obj dobj;
    bool wrong;
    de = set_write(c, &argv[2], &dobj, &wrong);
    if (!de &&
        (gs_set_init(&dobj) || gs_store_set_obj(st, argv[2].p, argv[2].len, &dobj, -1, &de))) {
        if (dobj.ptr)
            gs_set_free(&dobj);
        gs_error_oom(c);
        return;
    }
    struct gs_type_limits lim = c->shared->limits;
    bool added;
    int rc = gs_set_add(&dobj, argv[3].p, argv[3].len, &lim, &added);
    set_done(c, de, &dobj);
    if (rc)
        gs_error_oom(c);
    else
        gs_reply_int(&c->w, 1);
}

/* The sets named by keys, for SINTER/SUNION/SDIFF and their STORE and
 * CARD forms: every key is type-checked first (Redis's order); a missing
 * key is an empty set (found[i] false). False after WRONGTYPE. */
static bool load_sets(struct gs_client *c, struct gs_arg *keys, size_t n, struct gs_obj *sets,
                      bool *found)
{
    for (size_t i = 0; i < n; i++) {
        bool wrong;
        struct gs_entry *e = gs_lookup_typed(c, &keys[i], GS_TYPE_SET, 0, &wrong);
        if (wrong)
            return false;
        found[i] = e != NULL;
        if (e)
            gs_entry_obj(e, &sets[i]);
    }
    return true;
}

enum set_op { OP_INTER, OP_UNION, OP_DIFF };

/* Compute op over the n sets into *out (a new set). limit caps an
 * intersection's size (SINTERCARD; 0 = none). */
static int compute(struct gs_client *c, enum set_op op, struct gs_obj *sets, bool *found, size_t n,
                   struct gs_obj *out, size_t limit)
{
    struct gs_type_limits lim = c->shared->limits;
    if (gs_set_init(out))
        return CORE_ENOMEM;
    struct gs_set_iter it;
    const char *s;
    size_t len;
    bool added;
    if (op == OP_INTER) {
        size_t smallest = 0;
        for (size_t i = 0; i < n; i++) {
            if (!found[i])
                return 0; /* with an empty set: empty */
            if (gs_set_len(&sets[i]) < gs_set_len(&sets[smallest]))
                smallest = i;
        }
        gs_set_iter_init(&it, &sets[smallest]);
        while (gs_set_iter_next(&it, &s, &len)) {
            bool all = true;
            for (size_t j = 0; j < n && all; j++)
                all = j == smallest || gs_set_contains(&sets[j], s, len);
            if (all && gs_set_add(out, s, len, &lim, &added))
                return CORE_ENOMEM;
            if (limit && gs_set_len(out) >= limit)
                break;
        }
        return 0;
    }
    if (op == OP_UNION) {
        for (size_t i = 0; i < n; i++) {
            if (!found[i])
                continue;
            gs_set_iter_init(&it, &sets[i]);
            while (gs_set_iter_next(&it, &s, &len))
                if (gs_set_add(out, s, len, &lim, &added))
                    return CORE_ENOMEM;
        }
        return 0;
    }
    if (!found[0])
        return 0;
    gs_set_iter_init(&it, &sets[0]);
    while (gs_set_iter_next(&it, &s, &len)) {
        bool in_other = false;
        for (size_t j = 1; j < n && !in_other; j++)
            in_other = found[j] && gs_set_contains(&sets[j], s, len);
        if (!in_other && gs_set_add(out, s, len, &lim, &added))
            return CORE_ENOMEM;
    }
    return 0;
}

static void set_op_generic(struct gs_client *c, struct gs_arg *keys, size_t n,
                           const struct gs_arg *dst, enum set_op op)
{
    struct gs_obj *sets = calloc(n, sizeof(*sets));
    bool *found = calloc(n, sizeof(*found));
    if (!sets || !found) {
        free(sets);
        free(found);
        gs_error_oom(c);
        return;
    }
    struct gs_obj out = {0};
    if (!load_sets(c, keys, n, sets, found))
        goto done;
    if (compute(c, op, sets, found, n, &out, 0)) {
        gs_set_free(&out);
        gs_error_oom(c);
        goto done;
    }
    if (dst) {
        size_t card = gs_set_len(&out);
        if (store_set(c, dst, &out))
            gs_reply_int(&c->w, (int64_t)card);
    } else {
        reply_members(c, &out);
        gs_set_free(&out);
    }
done:
    free(sets);
    free(found);
}

void gs_cmd_sinter(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    set_op_generic(c, argv + 1, argc - 1, NULL, OP_INTER);
}

void gs_cmd_sunion(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    set_op_generic(c, argv + 1, argc - 1, NULL, OP_UNION);
}

void gs_cmd_sdiff(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    set_op_generic(c, argv + 1, argc - 1, NULL, OP_DIFF);
}

void gs_cmd_sinterstore(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    set_op_generic(c, argv + 2, argc - 2, &argv[1], OP_INTER);
}

void gs_cmd_sunionstore(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    set_op_generic(c, argv + 2, argc - 2, &argv[1], OP_UNION);
}

void gs_cmd_sdiffstore(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    set_op_generic(c, argv + 2, argc - 2, &argv[1], OP_DIFF);
}

/* SINTERCARD numkeys key [key ...] [LIMIT limit]. */
void gs_cmd_sintercard(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t numkeys, limit = 0;
    if (!gs_string2ll(argv[1].p, argv[1].len, &numkeys) || numkeys < 1) {
        gs_error(c, "ERR numkeys should be greater than 0");
        return;
    }
    if ((uint64_t)numkeys > argc - 2) {
        gs_error(c, "ERR Number of keys can't be greater than number of args");
        return;
    }
    for (size_t j = 2 + (size_t)numkeys; j < argc; j++) {
        if (gs_arg_is(&argv[j], "limit") && j + 1 < argc) {
            j++;
            if (!gs_string2ll(argv[j].p, argv[j].len, &limit) || limit < 0) {
                gs_error(c, "ERR LIMIT can't be negative");
                return;
            }
        } else {
            gs_error_syntax(c);
            return;
        }
    }
    size_t n = (size_t)numkeys;
    struct gs_obj *sets = calloc(n, sizeof(*sets));
    bool *found = calloc(n, sizeof(*found));
    struct gs_obj out = {0};
    if (!sets || !found) {
        gs_error_oom(c);
    } else if (load_sets(c, argv + 2, n, sets, found)) {
        if (compute(c, OP_INTER, sets, found, n, &out, (size_t)limit))
            gs_error_oom(c);
        else
            gs_reply_int(&c->w, (int64_t)gs_set_len(&out));
        gs_set_free(&out);
    }
    free(sets);
    free(found);
}

static void sscan_member(void *arg, const char *s, size_t len)
{
    gs_scan_collect(arg, s, len, NULL, 0);
}

static uint64_t sscan_visit(const struct gs_obj *o, uint64_t cursor, size_t count,
                            struct gs_scan_collect *sc)
{
    return gs_set_scan(o, cursor, count, sscan_member, sc);
}

void gs_cmd_sscan(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    gs_scan_value(c, argc, argv, GS_TYPE_SET, sscan_visit);
}
