/*
 * The sorted set type over its two encodings: see zset.h.
 *
 * Skiplist invariants (checked by gs_zset_recount's walk in tests):
 *  1. Level-0 forward links visit every node once, in (score, member)
 *     order; backward links are their reverse; tail is the last node.
 *  2. A link's span is the number of level-0 steps it jumps (Redis's
 *     zskiplist spans), so a descent summing spans gives ranks.
 *  3. Every node is in exactly one hash chain, that of its member's hash.
 *  4. mem is the cost of the struct, the header node, the bucket array
 *     and every node.
 */
#include "gridsync/types/zset/zset.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/hash.h"
#include "gridsync/protocol/resp.h"
#include "gridsync/types/htab/htab.h"

#define ZSL_MAXLEVEL 32

/* A node: this struct, then forward links [level], spans [level], then
 * the member bytes. */
struct zsl_node {
    double score;
    struct zsl_node *backward;
    struct zsl_node *hnext; /* the member hash chain */
    uint32_t len;
    uint8_t level;
};

struct zsl {
    struct zsl_node *header, *tail;
    uint64_t length;
    int level;
    struct zsl_node **bucket;
    uint64_t mask; /* buckets - 1 */
    uint64_t seed, rng;
    size_t mem;
};

static inline struct zsl_node **fwd(const struct zsl_node *n)
{
    return (struct zsl_node **)((char *)n + sizeof(struct zsl_node));
}

static inline uint32_t *span(const struct zsl_node *n)
{
    return (uint32_t *)(fwd(n) + n->level);
}

static inline char *member(const struct zsl_node *n)
{
    return (char *)(span(n) + n->level);
}

/* Redis's sdscmp: memcmp over the shorter, then the shorter first. */
static int cmp_member(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t l = alen < blen ? alen : blen;
    int c = l ? memcmp(a, b, l) : 0;
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen;
}

/* (score, member) of n before (s, m)? */
static bool node_before(const struct zsl_node *n, double s, const char *m, size_t mlen)
{
    return n->score < s || (n->score == s && cmp_member(member(n), n->len, m, mlen) < 0);
}

/* ------------------------------------------------------------ skiplist */

static struct zsl_node *node_new(int level, double score, const char *m, size_t mlen)
{
    struct zsl_node *n =
        malloc(sizeof(*n) + (size_t)level * (sizeof(void *) + sizeof(uint32_t)) + mlen);
    if (!n)
        return NULL;
    n->score = score;
    n->backward = NULL;
    n->hnext = NULL;
    n->len = (uint32_t)mlen;
    n->level = (uint8_t)level;
    if (mlen)
        memcpy(member(n), m, mlen);
    return n;
}

static struct zsl *zsl_new(void)
{
    static uint64_t counter;
    struct zsl *z = calloc(1, sizeof(*z));
    if (!z)
        return NULL;
    z->header = node_new(ZSL_MAXLEVEL, 0, NULL, 0);
    if (!z->header) {
        free(z);
        return NULL;
    }
    for (int i = 0; i < ZSL_MAXLEVEL; i++) {
        fwd(z->header)[i] = NULL;
        span(z->header)[i] = 0;
    }
    z->level = 1;
    z->seed = core_hash64(&z, sizeof(z), ++counter);
    z->rng = z->seed | 1;
    z->mem = gs_alloc_cost(z) + gs_alloc_cost(z->header);
    return z;
}

static void zsl_free(struct zsl *z)
{
    struct zsl_node *n = fwd(z->header)[0];
    while (n) {
        struct zsl_node *next = fwd(n)[0];
        free(n);
        n = next;
    }
    free(z->header);
    free(z->bucket);
    free(z);
}

/* Redis's zslRandomLevel: p = 1/4. */
static int random_level(struct zsl *z)
{
    int level = 1;
    for (;;) {
        z->rng ^= z->rng >> 12;
        z->rng ^= z->rng << 25;
        z->rng ^= z->rng >> 27;
        uint64_t r = z->rng * 0x2545F4914F6CDD1DULL;
        for (int k = 0; k < 32; k++, r >>= 2) {
            if ((r & 3) != 0 || level >= ZSL_MAXLEVEL)
                return level;
            level++;
        }
    }
}

static uint64_t hash_of(const struct zsl *z, const char *m, size_t mlen)
{
    return core_hash64(m, mlen, z->seed);
}

static struct zsl_node *zsl_find(const struct zsl *z, const char *m, size_t mlen)
{
    if (!z->bucket)
        return NULL;
    for (struct zsl_node *n = z->bucket[hash_of(z, m, mlen) & z->mask]; n; n = n->hnext)
        if (n->len == mlen && memcmp(member(n), m, mlen) == 0)
            return n;
    return NULL;
}

/* Rebuild the bucket array with `buckets` (a power of two) chains. */
static int rehash(struct zsl *z, uint64_t buckets)
{
    struct zsl_node **b = calloc(buckets, sizeof(*b));
    if (!b)
        return CORE_ENOMEM;
    for (struct zsl_node *n = fwd(z->header)[0]; n; n = fwd(n)[0]) {
        uint64_t h = hash_of(z, member(n), n->len) & (buckets - 1);
        n->hnext = b[h];
        b[h] = n;
    }
    if (z->bucket)
        z->mem -= gs_alloc_cost(z->bucket);
    free(z->bucket);
    z->bucket = b;
    z->mask = buckets - 1;
    z->mem += gs_alloc_cost(b);
    return 0;
}

static void hash_unlink(struct zsl *z, struct zsl_node *x)
{
    struct zsl_node **pp = &z->bucket[hash_of(z, member(x), x->len) & z->mask];
    while (*pp != x)
        pp = &(*pp)->hnext;
    *pp = x->hnext;
}

/* Link node x (score and member set, not in the list) in its place. */
static void list_link(struct zsl *z, struct zsl_node *x)
{
    struct zsl_node *update[ZSL_MAXLEVEL];
    uint64_t rank[ZSL_MAXLEVEL];
    struct zsl_node *p = z->header;
    for (int i = z->level - 1; i >= 0; i--) {
        rank[i] = i == z->level - 1 ? 0 : rank[i + 1];
        while (fwd(p)[i] && node_before(fwd(p)[i], x->score, member(x), x->len)) {
            rank[i] += span(p)[i];
            p = fwd(p)[i];
        }
        update[i] = p;
    }
    int level = x->level;
    if (level > z->level) {
        for (int i = z->level; i < level; i++) {
            rank[i] = 0;
            update[i] = z->header;
            span(z->header)[i] = (uint32_t)z->length;
        }
        z->level = level;
    }
    for (int i = 0; i < level; i++) {
        fwd(x)[i] = fwd(update[i])[i];
        fwd(update[i])[i] = x;
        span(x)[i] = span(update[i])[i] - (uint32_t)(rank[0] - rank[i]);
        span(update[i])[i] = (uint32_t)(rank[0] - rank[i]) + 1;
    }
    for (int i = level; i < z->level; i++)
        span(update[i])[i]++;
    x->backward = update[0] == z->header ? NULL : update[0];
    if (fwd(x)[0])
        fwd(x)[0]->backward = x;
    else
        z->tail = x;
    z->length++;
}

/* Unlink x from the list (Redis's zslDeleteNode), given update[]. */
static void list_unlink_at(struct zsl *z, struct zsl_node *x, struct zsl_node **update)
{
    for (int i = 0; i < z->level; i++) {
        if (fwd(update[i])[i] == x) {
            span(update[i])[i] += span(x)[i] - 1;
            fwd(update[i])[i] = fwd(x)[i];
        } else {
            span(update[i])[i] -= 1;
        }
    }
    if (fwd(x)[0])
        fwd(x)[0]->backward = x->backward;
    else
        z->tail = x->backward;
    while (z->level > 1 && fwd(z->header)[z->level - 1] == NULL)
        z->level--;
    z->length--;
}

static void list_unlink(struct zsl *z, struct zsl_node *x)
{
    struct zsl_node *update[ZSL_MAXLEVEL];
    struct zsl_node *p = z->header;
    for (int i = z->level - 1; i >= 0; i--) {
        while (fwd(p)[i] && fwd(p)[i] != x && node_before(fwd(p)[i], x->score, member(x), x->len))
            p = fwd(p)[i];
        update[i] = p;
    }
    list_unlink_at(z, x, update);
}

static int zsl_insert(struct zsl *z, double score, const char *m, size_t mlen)
{
    if (z->length >= UINT32_MAX - 1)
        return CORE_ENOMEM; /* spans are 32-bit */
    if (!z->bucket || z->length + 1 > z->mask + 1) {
        if (rehash(z, z->bucket ? (z->mask + 1) * 2 : 4))
            return CORE_ENOMEM;
    }
    struct zsl_node *x = node_new(random_level(z), score, m, mlen);
    if (!x)
        return CORE_ENOMEM;
    z->mem += gs_alloc_cost(x);
    list_link(z, x);
    uint64_t h = hash_of(z, m, mlen) & z->mask;
    x->hnext = z->bucket[h];
    z->bucket[h] = x;
    return 0;
}

/* Shrink the bucket array when sparse (one per 8 elements); best effort. */
static void maybe_shrink(struct zsl *z)
{
    uint64_t buckets = z->mask + 1;
    if (buckets > 4 && z->length < buckets / 8) {
        uint64_t want = 4;
        while (want < z->length)
            want *= 2;
        rehash(z, want);
    }
}

static void zsl_delete_node(struct zsl *z, struct zsl_node *x)
{
    list_unlink(z, x);
    hash_unlink(z, x);
    z->mem -= gs_alloc_cost(x);
    free(x);
}

static void zsl_update_score(struct zsl *z, struct zsl_node *x, double score)
{
    /* In place when the order stays (Redis's zslUpdateScore shortcut). */
    struct zsl_node *next = fwd(x)[0];
    if ((x->backward == NULL || x->backward->score < score ||
         (x->backward->score == score &&
          cmp_member(member(x->backward), x->backward->len, member(x), x->len) < 0)) &&
        (next == NULL || score < next->score ||
         (score == next->score && cmp_member(member(x), x->len, member(next), next->len) < 0))) {
        x->score = score;
        return;
    }
    list_unlink(z, x);
    x->score = score;
    list_link(z, x);
}

/* 1-based rank r. */
static struct zsl_node *zsl_by_rank(const struct zsl *z, uint64_t r)
{
    uint64_t traversed = 0;
    struct zsl_node *p = z->header;
    for (int i = z->level - 1; i >= 0; i--) {
        while (fwd(p)[i] && traversed + span(p)[i] <= r) {
            traversed += span(p)[i];
            p = fwd(p)[i];
        }
        if (traversed == r)
            return p;
    }
    return NULL;
}

static uint64_t zsl_rank(const struct zsl *z, const struct zsl_node *x)
{
    uint64_t rank = 0;
    struct zsl_node *p = z->header;
    for (int i = z->level - 1; i >= 0; i--) {
        while (fwd(p)[i] &&
               (fwd(p)[i] == x || node_before(fwd(p)[i], x->score, member(x), x->len))) {
            rank += span(p)[i];
            p = fwd(p)[i];
            if (p == x)
                return rank;
        }
    }
    return rank;
}

/* A monotone predicate over the order: true for a prefix of the elements. */
typedef bool zpred(const void *arg, double score, const char *m, size_t mlen);

static size_t zsl_count_prefix(const struct zsl *z, zpred *pred, const void *arg)
{
    uint64_t rank = 0;
    struct zsl_node *p = z->header;
    for (int i = z->level - 1; i >= 0; i--) {
        while (fwd(p)[i] && pred(arg, fwd(p)[i]->score, member(fwd(p)[i]), fwd(p)[i]->len)) {
            rank += span(p)[i];
            p = fwd(p)[i];
        }
    }
    return rank;
}

/* Delete ranks [start, end], 1-based (Redis's zslDeleteRangeByRank). */
static void zsl_delete_ranks(struct zsl *z, uint64_t start, uint64_t end)
{
    struct zsl_node *update[ZSL_MAXLEVEL];
    uint64_t traversed = 0;
    struct zsl_node *p = z->header;
    for (int i = z->level - 1; i >= 0; i--) {
        while (fwd(p)[i] && traversed + span(p)[i] < start) {
            traversed += span(p)[i];
            p = fwd(p)[i];
        }
        update[i] = p;
    }
    traversed++;
    p = fwd(p)[0];
    while (p && traversed <= end) {
        struct zsl_node *next = fwd(p)[0];
        list_unlink_at(z, p, update);
        hash_unlink(z, p);
        z->mem -= gs_alloc_cost(p);
        free(p);
        traversed++;
        p = next;
    }
}

static uint64_t rev64(uint64_t v)
{
    v = ((v >> 1) & 0x5555555555555555ull) | ((v & 0x5555555555555555ull) << 1);
    v = ((v >> 2) & 0x3333333333333333ull) | ((v & 0x3333333333333333ull) << 2);
    v = ((v >> 4) & 0x0f0f0f0f0f0f0f0full) | ((v & 0x0f0f0f0f0f0f0f0full) << 4);
    v = ((v >> 8) & 0x00ff00ff00ff00ffull) | ((v & 0x00ff00ff00ff00ffull) << 8);
    v = ((v >> 16) & 0x0000ffff0000ffffull) | ((v & 0x0000ffff0000ffffull) << 16);
    return (v >> 32) | (v << 32);
}

/* ------------------------------------------------------------ listpack */

static bool score_is_int(double s)
{
    /* -0 is stored as 0: Redis's listpack loses the sign of zero too */
    return s > -9007199254740992.0 && s < 9007199254740992.0 && s == (double)(int64_t)s;
}

static double lp_score(const unsigned char *lp, size_t off)
{
    int64_t iv;
    if (gs_lp_get_int(lp, off, &iv))
        return (double)iv;
    char b[GS_LP_INTBUF];
    size_t len;
    const char *s = gs_lp_get(lp, off, b, &len);
    double d;
    memcpy(&d, s + 1, sizeof(d));
    return d;
}

/* The listpack entry for a score, into buf (at least 21 bytes). */
static size_t score_entry(double s, char *buf)
{
    if (score_is_int(s))
        return gs_fmt_int(buf, (int64_t)s);
    buf[0] = GS_ZSET_SCORE_TAG;
    memcpy(buf + 1, &s, sizeof(s));
    return 1 + sizeof(s);
}

static size_t lp_len(const unsigned char *lp)
{
    return gs_lp_count(lp) / 2;
}

/* Offset of the first pair not before (s, m), or 0 at the end. */
static size_t lp_insert_pos(const unsigned char *lp, double s, const char *m, size_t mlen)
{
    char b[GS_LP_INTBUF];
    for (size_t off = gs_lp_first(lp); off; off = gs_lp_next(lp, gs_lp_next(lp, off))) {
        double es = lp_score(lp, gs_lp_next(lp, off));
        if (es < s)
            continue;
        if (es > s)
            return off;
        size_t elen;
        const char *e = gs_lp_get(lp, off, b, &elen);
        if (cmp_member(e, elen, m, mlen) >= 0)
            return off;
    }
    return 0;
}

static int lp_insert(struct gs_obj *o, double s, const char *m, size_t mlen)
{
    unsigned char *lp = o->ptr;
    size_t off = lp_insert_pos(lp, s, m, mlen);
    if (!off)
        off = gs_lp_bytes(lp);
    char sb[24];
    size_t sl = score_entry(s, sb);
    int rc = gs_lp_insert(&lp, off, m, mlen);
    o->ptr = lp;
    if (rc)
        return rc;
    rc = gs_lp_insert(&lp, gs_lp_next(lp, off) ? gs_lp_next(lp, off) : gs_lp_bytes(lp), sb, sl);
    o->ptr = lp;
    if (rc) {
        gs_lp_delete(&lp, off, 1);
        o->ptr = lp;
    }
    return rc;
}

static int to_skiplist(struct gs_obj *o)
{
    struct zsl *z = zsl_new();
    if (!z)
        return CORE_ENOMEM;
    const unsigned char *lp = o->ptr;
    char b[GS_LP_INTBUF];
    for (size_t off = gs_lp_first(lp); off; off = gs_lp_next(lp, gs_lp_next(lp, off))) {
        size_t len;
        const char *m = gs_lp_get(lp, off, b, &len);
        if (zsl_insert(z, lp_score(lp, gs_lp_next(lp, off)), m, len)) {
            zsl_free(z);
            return CORE_ENOMEM;
        }
    }
    gs_lp_free(o->ptr);
    o->ptr = z;
    o->enc = GS_ENC_SKIPLIST;
    return 0;
}

/* ---------------------------------------------------------------- type */

int gs_zset_init(struct gs_obj *o, bool big)
{
    memset(o, 0, sizeof(*o));
    o->type = GS_TYPE_ZSET;
    if (big) {
        o->ptr = zsl_new();
        o->enc = GS_ENC_SKIPLIST;
    } else {
        o->ptr = gs_lp_new();
        o->enc = GS_ENC_LISTPACK;
    }
    return o->ptr ? 0 : CORE_ENOMEM;
}

void gs_zset_free(struct gs_obj *o)
{
    if (o->enc == GS_ENC_LISTPACK)
        gs_lp_free(o->ptr);
    else if (o->ptr)
        zsl_free(o->ptr);
    o->ptr = NULL;
}

int gs_zset_dup(struct gs_obj *dst, const struct gs_obj *src)
{
    struct gs_obj n = *src;
    n.counted = 0;
    if (src->enc == GS_ENC_LISTPACK) {
        size_t len = gs_lp_bytes(src->ptr);
        unsigned char *lp = malloc(len);
        if (!lp)
            return CORE_ENOMEM;
        memcpy(lp, src->ptr, len);
        n.ptr = lp;
    } else {
        const struct zsl *s = src->ptr;
        struct zsl *z = zsl_new();
        if (!z)
            return CORE_ENOMEM;
        for (struct zsl_node *x = fwd(s->header)[0]; x; x = fwd(x)[0]) {
            if (zsl_insert(z, x->score, member(x), x->len)) {
                zsl_free(z);
                return CORE_ENOMEM;
            }
        }
        n.ptr = z;
    }
    *dst = n;
    return 0;
}

size_t gs_zset_mem(const struct gs_obj *o)
{
    if (o->enc == GS_ENC_LISTPACK)
        return gs_alloc_cost(o->ptr);
    return ((const struct zsl *)o->ptr)->mem;
}

size_t gs_zset_recount(const struct gs_obj *o)
{
    if (o->enc == GS_ENC_LISTPACK)
        return gs_alloc_cost(o->ptr);
    const struct zsl *z = o->ptr;
    size_t mem = gs_alloc_cost((void *)z) + gs_alloc_cost(z->header);
    if (z->bucket)
        mem += gs_alloc_cost(z->bucket);
    uint64_t n = 0;
    const struct zsl_node *prev = NULL;
    for (struct zsl_node *x = fwd(z->header)[0]; x; x = fwd(x)[0]) {
        mem += gs_alloc_cost(x);
        n++;
        /* invariants 1 and 3: a broken structure shows as a wrong count */
        if (x->backward != prev || zsl_find(z, member(x), x->len) != x ||
            (prev && !node_before(prev, x->score, member(x), x->len)))
            return 0;
        prev = x;
    }
    if (n != z->length || z->tail != prev)
        return 0;
    return mem;
}

size_t gs_zset_len(const struct gs_obj *o)
{
    if (o->enc == GS_ENC_LISTPACK)
        return lp_len(o->ptr);
    return ((const struct zsl *)o->ptr)->length;
}

bool gs_zset_score(const struct gs_obj *o, const char *m, size_t mlen, double *score)
{
    if (o->enc == GS_ENC_LISTPACK) {
        const unsigned char *lp = o->ptr;
        size_t off = gs_lp_find(lp, 0, m, mlen, 1);
        if (!off)
            return false;
        *score = lp_score(lp, gs_lp_next(lp, off));
        return true;
    }
    struct zsl_node *x = zsl_find(o->ptr, m, mlen);
    if (!x)
        return false;
    *score = x->score;
    return true;
}

int gs_zset_add(struct gs_obj *o, double score, const char *m, size_t mlen, int flags, int *out,
                double *newscore, const struct gs_type_limits *lim)
{
    bool nx = flags & GS_ZADD_NX, xx = flags & GS_ZADD_XX, gt = flags & GS_ZADD_GT,
         lt = flags & GS_ZADD_LT, incr = flags & GS_ZADD_INCR;
    *out = 0;
    if (isnan(score))
        return CORE_EINVAL;
    double cur;
    if (gs_zset_score(o, m, mlen, &cur)) {
        if (nx) {
            *out = GS_ZADD_NOP;
            return 0;
        }
        if (incr) {
            score += cur;
            if (isnan(score))
                return CORE_EINVAL;
        }
        /* GT/LT: the update is a no-op unless the score moves that way */
        if ((lt && score >= cur) || (gt && score <= cur)) {
            *out = GS_ZADD_NOP;
            if (newscore)
                *newscore = cur;
            return 0;
        }
        if (newscore)
            *newscore = score;
        if (score != cur) {
            if (o->enc == GS_ENC_LISTPACK) {
                /* remove and insert again in its new place */
                unsigned char *lp = o->ptr;
                gs_lp_delete(&lp, gs_lp_find(lp, 0, m, mlen, 1), 2);
                o->ptr = lp;
                if (lp_insert(o, score, m, mlen)) {
                    lp_insert(o, cur, m, mlen); /* back where it was */
                    return CORE_ENOMEM;
                }
            } else {
                struct zsl *z = o->ptr;
                zsl_update_score(z, zsl_find(z, m, mlen), score);
            }
            *out = GS_ZADD_UPDATED;
        }
        return 0;
    }
    if (xx) {
        *out = GS_ZADD_NOP;
        return 0;
    }
    if (o->enc == GS_ENC_LISTPACK &&
        ((int64_t)lp_len(o->ptr) + 1 > lim->zset_max_listpack_entries ||
         (int64_t)mlen > lim->zset_max_listpack_value)) {
        if (to_skiplist(o))
            return CORE_ENOMEM;
    }
    int rc = o->enc == GS_ENC_LISTPACK ? lp_insert(o, score, m, mlen)
                                       : zsl_insert(o->ptr, score, m, mlen);
    if (rc)
        return rc;
    if (newscore)
        *newscore = score;
    *out = GS_ZADD_ADDED;
    return 0;
}

bool gs_zset_remove(struct gs_obj *o, const char *m, size_t mlen)
{
    if (o->enc == GS_ENC_LISTPACK) {
        unsigned char *lp = o->ptr;
        size_t off = gs_lp_find(lp, 0, m, mlen, 1);
        if (!off)
            return false;
        gs_lp_delete(&lp, off, 2);
        o->ptr = lp;
        return true;
    }
    struct zsl *z = o->ptr;
    struct zsl_node *x = zsl_find(z, m, mlen);
    if (!x)
        return false;
    zsl_delete_node(z, x);
    maybe_shrink(z);
    return true;
}

bool gs_zset_rank(const struct gs_obj *o, const char *m, size_t mlen, size_t *rank)
{
    if (o->enc == GS_ENC_LISTPACK) {
        const unsigned char *lp = o->ptr;
        size_t r = 0;
        for (size_t off = gs_lp_first(lp); off; off = gs_lp_next(lp, gs_lp_next(lp, off)), r++) {
            if (gs_lp_eq(lp, off, m, mlen)) {
                *rank = r;
                return true;
            }
        }
        return false;
    }
    const struct zsl *z = o->ptr;
    struct zsl_node *x = zsl_find(z, m, mlen);
    if (!x)
        return false;
    *rank = zsl_rank(z, x) - 1;
    return true;
}

struct score_bound {
    double x;
    bool inclusive;
};

static bool below_score(const void *arg, double s, const char *m, size_t mlen)
{
    const struct score_bound *b = arg;
    (void)m;
    (void)mlen;
    return b->inclusive ? s <= b->x : s < b->x;
}

struct lex_bound {
    const struct gs_zlex *b;
    bool inclusive;
};

static bool below_lex(const void *arg, double s, const char *m, size_t mlen)
{
    const struct lex_bound *lb = arg;
    (void)s;
    if (lb->b->inf)
        return lb->b->inf > 0;
    int c = cmp_member(m, mlen, lb->b->p, lb->b->len);
    return lb->inclusive ? c <= 0 : c < 0;
}

static size_t count_prefix(const struct gs_obj *o, zpred *pred, const void *arg)
{
    if (o->enc == GS_ENC_SKIPLIST)
        return zsl_count_prefix(o->ptr, pred, arg);
    const unsigned char *lp = o->ptr;
    char b[GS_LP_INTBUF];
    size_t n = 0;
    for (size_t off = gs_lp_first(lp); off; off = gs_lp_next(lp, gs_lp_next(lp, off)), n++) {
        size_t len;
        const char *m = gs_lp_get(lp, off, b, &len);
        if (!pred(arg, lp_score(lp, gs_lp_next(lp, off)), m, len))
            break;
    }
    return n;
}

size_t gs_zset_count_below(const struct gs_obj *o, double x, bool inclusive)
{
    struct score_bound b = {x, inclusive};
    return count_prefix(o, below_score, &b);
}

size_t gs_zset_count_below_lex(const struct gs_obj *o, const struct gs_zlex *bound, bool inclusive)
{
    struct lex_bound b = {bound, inclusive};
    return count_prefix(o, below_lex, &b);
}

void gs_zset_iter_init(struct gs_zset_iter *it, const struct gs_obj *o, size_t rank, bool rev)
{
    size_t len = gs_zset_len(o);
    it->o = o;
    it->rev = rev;
    it->rank = rank;
    it->left = rank >= len ? 0 : rev ? rank + 1 : len - rank;
    it->off = 0;
    it->node = NULL;
    if (!it->left)
        return;
    if (o->enc == GS_ENC_LISTPACK)
        it->off = gs_lp_seek(o->ptr, (uint32_t)(rank * 2));
    else
        it->node = zsl_by_rank(o->ptr, rank + 1);
}

bool gs_zset_iter_next(struct gs_zset_iter *it, const char **m, size_t *mlen, double *score)
{
    if (!it->left)
        return false;
    it->left--;
    if (it->o->enc == GS_ENC_LISTPACK) {
        const unsigned char *lp = it->o->ptr;
        size_t soff = gs_lp_next(lp, it->off);
        *m = gs_lp_get(lp, it->off, it->buf, mlen);
        *score = lp_score(lp, soff);
        if (it->left) {
            /* no back-lengths: going down seeks from the start, which the
             * listpack's small size keeps cheap */
            it->off =
                it->rev ? gs_lp_seek(lp, (uint32_t)((it->rank - 1) * 2)) : gs_lp_next(lp, soff);
        }
    } else {
        struct zsl_node *x = it->node;
        *m = member(x);
        *mlen = x->len;
        *score = x->score;
        it->node = it->rev ? x->backward : fwd(x)[0];
    }
    it->rank = it->rev ? it->rank - 1 : it->rank + 1;
    return true;
}

void gs_zset_at(const struct gs_obj *o, size_t r, char *buf, const char **m, size_t *mlen,
                double *score)
{
    if (o->enc == GS_ENC_LISTPACK) {
        const unsigned char *lp = o->ptr;
        size_t off = gs_lp_seek(lp, (uint32_t)(r * 2));
        *m = gs_lp_get(lp, off, buf, mlen);
        *score = lp_score(lp, gs_lp_next(lp, off));
        return;
    }
    struct zsl_node *x = zsl_by_rank(o->ptr, r + 1);
    *m = member(x);
    *mlen = x->len;
    *score = x->score;
}

void gs_zset_delete_range(struct gs_obj *o, size_t start, size_t n)
{
    if (!n)
        return;
    if (o->enc == GS_ENC_LISTPACK) {
        unsigned char *lp = o->ptr;
        gs_lp_delete(&lp, gs_lp_seek(lp, (uint32_t)(start * 2)), (uint32_t)(n * 2));
        o->ptr = lp;
        return;
    }
    zsl_delete_ranks(o->ptr, start + 1, start + n);
    maybe_shrink(o->ptr);
}

/* The skiplist's elements as a listpack (ascending, appended). */
static unsigned char *zsl_to_listpack(const struct zsl *z)
{
    unsigned char *lp = gs_lp_new();
    if (!lp)
        return NULL;
    for (struct zsl_node *x = fwd(z->header)[0]; x; x = fwd(x)[0]) {
        char sb[24];
        size_t sl = score_entry(x->score, sb);
        if (gs_lp_append(&lp, member(x), x->len) || gs_lp_append(&lp, sb, sl)) {
            gs_lp_free(lp);
            return NULL;
        }
    }
    return lp;
}

void gs_zset_fit(struct gs_obj *o, const struct gs_type_limits *lim)
{
    if (o->enc != GS_ENC_SKIPLIST)
        return;
    const struct zsl *z = o->ptr;
    if ((int64_t)z->length > lim->zset_max_listpack_entries)
        return;
    for (struct zsl_node *x = fwd(z->header)[0]; x; x = fwd(x)[0])
        if ((int64_t)x->len > lim->zset_max_listpack_value)
            return;
    unsigned char *lp = zsl_to_listpack(z);
    if (!lp)
        return;
    zsl_free(o->ptr);
    o->ptr = lp;
    o->enc = GS_ENC_LISTPACK;
}

int gs_zset_encode(const struct gs_obj *o, unsigned char **out, size_t *len)
{
    unsigned char *lp;
    if (o->enc == GS_ENC_LISTPACK) {
        size_t n = gs_lp_bytes(o->ptr);
        lp = malloc(n);
        if (lp)
            memcpy(lp, o->ptr, n);
    } else {
        lp = zsl_to_listpack(o->ptr);
    }
    if (!lp)
        return CORE_ENOMEM;
    *out = lp;
    *len = gs_lp_bytes(lp);
    return 0;
}

uint64_t gs_zset_scan(const struct gs_obj *o, uint64_t cursor, size_t count, gs_zset_scan_fn *fn,
                      void *arg)
{
    if (o->enc == GS_ENC_LISTPACK) {
        const unsigned char *lp = o->ptr;
        char b[GS_LP_INTBUF];
        for (size_t off = gs_lp_first(lp); off; off = gs_lp_next(lp, gs_lp_next(lp, off))) {
            size_t len;
            const char *m = gs_lp_get(lp, off, b, &len);
            fn(arg, m, len, lp_score(lp, gs_lp_next(lp, off)));
        }
        return 0;
    }
    const struct zsl *z = o->ptr;
    if (!z->bucket)
        return 0;
    /* Redis's dictScan on one table: increment the reversed cursor, so a
     * resize between calls skips nothing (a bucket's expansions in a
     * bigger table follow it). */
    size_t emitted = 0, steps = 0, max_steps = count * 10 + 10;
    do {
        for (struct zsl_node *x = z->bucket[cursor & z->mask]; x; x = x->hnext, emitted++)
            fn(arg, member(x), x->len, x->score);
        cursor |= ~z->mask;
        cursor = rev64(cursor);
        cursor++;
        cursor = rev64(cursor);
    } while (cursor != 0 && emitted < count && ++steps < max_steps);
    return cursor;
}

bool gs_zset_validate(const unsigned char *lp, size_t len)
{
    if (!gs_lp_validate(lp, len) || gs_lp_count(lp) == 0 || gs_lp_count(lp) % 2)
        return false;
    for (size_t off = gs_lp_first(lp); off; off = gs_lp_next(lp, gs_lp_next(lp, off))) {
        size_t soff = gs_lp_next(lp, off);
        int64_t iv;
        if (gs_lp_get_int(lp, soff, &iv)) {
            if (iv <= -9007199254740992LL || iv >= 9007199254740992LL)
                return false;
            continue;
        }
        char b[GS_LP_INTBUF];
        size_t l;
        const char *s = gs_lp_get(lp, soff, b, &l);
        double d;
        if (l != 1 + sizeof(d) || s[0] != GS_ZSET_SCORE_TAG)
            return false;
        memcpy(&d, s + 1, sizeof(d));
        if (isnan(d))
            return false;
    }
    return true;
}

bool gs_zset_parse_score(const char *p, size_t len, double *out)
{
    char stack[128];
    char *buf = len < sizeof(stack) ? stack : malloc(len + 1);
    if (!buf || len == 0 || p[0] == ' ' || (p[0] >= '\t' && p[0] <= '\r')) {
        if (buf && buf != stack)
            free(buf);
        return false;
    }
    memcpy(buf, p, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    bool ok = (size_t)(end - buf) == len && !isnan(v) &&
              !(errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL || fpclassify(v) == FP_ZERO));
    if (buf != stack)
        free(buf);
    if (ok)
        *out = v;
    return ok;
}
