/*
 * Order book: price levels in a tick-indexed window with a two-level
 * occupancy bitmap, outlier levels in a sorted list, FIFOs of orders.
 * Layout and invariants: book.h.
 */
#include "edumatcher/engine/book.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "edumatcher/engine/msg.h"

_Static_assert(sizeof(struct em_order) <= 124, "a resting order must stay within 128 bytes");

/* ---- pools ---- */

/* Records are named by uint32_t ids and a pool doubles: stay where
 * doubling cannot wrap round. */
#define POOL_MAX (1u << 31)

/* Grow the order pool to ncap records (> the current capacity). */
static int grow_orders_to(struct em_pool *p, uint32_t ncap)
{
    struct em_order *n = realloc(p->orders, (size_t)ncap * sizeof *n);
    if (!n)
        return CORE_ENOMEM;
    /* index 0 is "none"; new records go onto the free list, lowest first */
    uint32_t first = p->norders_cap ? p->norders_cap : 1;
    for (uint32_t i = ncap - 1; i >= first; i--) {
        memset(&n[i], 0, sizeof n[i]);
        n[i].next = p->order_free;
        p->order_free = i;
    }
    if (!p->norders_cap)
        memset(&n[0], 0, sizeof n[0]);
    p->orders = n;
    p->norders_cap = ncap;
    return 0;
}

static int grow_orders(struct em_pool *p)
{
    if (p->norders_cap > POOL_MAX / 2)
        return CORE_ENOMEM;
    return grow_orders_to(p, p->norders_cap * 2);
}

static int grow_levels(struct em_pool *p)
{
    if (p->nlevels_cap > POOL_MAX / 2)
        return CORE_ENOMEM;
    uint32_t ncap = p->nlevels_cap ? p->nlevels_cap * 2 : 64;
    struct em_level *n = realloc(p->levels, (size_t)ncap * sizeof *n);
    if (!n)
        return CORE_ENOMEM;
    for (uint32_t i = ncap - 1; i >= (p->nlevels_cap ? p->nlevels_cap : 1); i--) {
        memset(&n[i], 0, sizeof n[i]);
        n[i].next = p->level_free;
        p->level_free = i;
    }
    if (!p->nlevels_cap)
        memset(&n[0], 0, sizeof n[0]);
    p->levels = n;
    p->nlevels_cap = ncap;
    return 0;
}

int em_pool_init(struct em_pool *p, uint32_t orders, uint32_t levels)
{
    memset(p, 0, sizeof *p);
    if (orders >= POOL_MAX || levels > POOL_MAX)
        return CORE_ENOMEM;
    /* exactly the size asked (a server sizes its pools at start), at least
     * a few records; they double later only if they must */
    p->norders_cap = 0;
    if (grow_orders_to(p, (orders > 16 ? orders : 16) + 1) || grow_levels(p)) /* + record 0 */
        return CORE_ENOMEM;
    while (p->nlevels_cap < levels)
        if (grow_levels(p))
            return CORE_ENOMEM;
    return 0;
}

void em_pool_free(struct em_pool *p)
{
    free(p->orders);
    free(p->levels);
    memset(p, 0, sizeof *p);
}

uint32_t em_pool_order_get(struct em_pool *p)
{
    if (!p->order_free && grow_orders(p))
        return 0;
    uint32_t o = p->order_free;
    struct em_order *r = &p->orders[o];
    p->order_free = r->next;
    memset(r, 0, sizeof *r);
    p->orders_used++;
    return o;
}

void em_pool_order_put(struct em_pool *p, uint32_t o)
{
    struct em_order *r = &p->orders[o];
    r->state = EM_OS_FREE;
    r->next = p->order_free;
    p->order_free = o;
    p->orders_used--;
}

static uint32_t level_get(struct em_pool *p, int64_t px)
{
    if (!p->level_free && grow_levels(p))
        return 0;
    uint32_t l = p->level_free;
    struct em_level *v = &p->levels[l];
    p->level_free = v->next;
    memset(v, 0, sizeof *v);
    v->px = px;
    return l;
}

static void level_put(struct em_pool *p, uint32_t l)
{
    p->levels[l].next = p->level_free;
    p->level_free = l;
}

/* ---- bitmap: highest set index <= i, lowest set index >= i; -1: none ---- */

static int find_le(const struct em_book_side *s, int i)
{
    if (i < 0)
        return -1;
    int w = i >> 6;
    uint64_t m = s->bits[w] & (~0ull >> (63 - (i & 63)));
    if (m)
        return (w << 6) + 63 - __builtin_clzll(m);
    uint64_t sm = w ? s->summary & (~0ull >> (64 - w)) : 0;
    if (!sm)
        return -1;
    w = 63 - __builtin_clzll(sm);
    return (w << 6) + 63 - __builtin_clzll(s->bits[w]);
}

static int find_ge(const struct em_book_side *s, int i)
{
    if (i >= (int)EM_BOOK_WIN)
        return -1;
    int w = i >> 6;
    uint64_t m = s->bits[w] & (~0ull << (i & 63));
    if (m)
        return (w << 6) + __builtin_ctzll(m);
    uint64_t sm = w < 63 ? s->summary & (~0ull << (w + 1)) : 0;
    if (!sm)
        return -1;
    w = __builtin_ctzll(sm);
    return (w << 6) + __builtin_ctzll(s->bits[w]);
}

static void bit_set(struct em_book_side *s, unsigned i)
{
    s->bits[i >> 6] |= 1ull << (i & 63);
    s->summary |= 1ull << (i >> 6);
}

static void bit_clear(struct em_book_side *s, unsigned i)
{
    s->bits[i >> 6] &= ~(1ull << (i & 63));
    if (!s->bits[i >> 6])
        s->summary &= ~(1ull << (i >> 6));
}

/* ---- book ---- */

int em_book_init(struct em_book *b, struct em_pool *p)
{
    memset(b, 0, sizeof *b);
    for (int s = 0; s < 2; s++) {
        uint32_t l = level_get(p, 0);
        if (!l)
            return CORE_ENOMEM;
        b->side[s].mkt = l;
    }
    return 0;
}

int em_book_empty(const struct em_book *b, const struct em_pool *p)
{
    return b->side[0].nlevels == 0 && b->side[1].nlevels == 0 &&
           em_lvl(p, b->side[0].mkt)->count == 0 && em_lvl(p, b->side[1].mkt)->count == 0;
}

static int in_window(const struct em_book *b, int64_t px)
{
    return px >= b->base && px - b->base < (int64_t)EM_BOOK_WIN;
}

void em_book_free(struct em_book *b)
{
    for (int s = 0; s < 2; s++) {
        free(b->side[s].out);
        b->side[s].out = NULL;
        b->side[s].nout = b->side[s].outcap = 0;
    }
}

/* Index of the first outlier whose price is >= px. */
static uint32_t out_lb(const struct em_book_side *sd, const struct em_pool *p, int64_t px)
{
    uint32_t lo = 0, hi = sd->nout;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (p->levels[sd->out[mid]].px < px)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void slot_put(struct em_book *b, struct em_pool *p, int s, uint32_t l)
{
    unsigned i = (unsigned)(p->levels[l].px - b->base);
    p->levels[l].in_window = 1;
    b->side[s].slot[i] = l;
    bit_set(&b->side[s], i);
}

/* The window holds no level: centre it on px and move in the outliers it
 * now covers (rare: only when the market has moved away from it). */
static void recentre(struct em_book *b, struct em_pool *p, int64_t px)
{
    b->base = px - (int64_t)(EM_BOOK_WIN / 2);
    for (int s = 0; s < 2; s++) {
        struct em_book_side *sd = &b->side[s];
        uint32_t k = 0;
        for (uint32_t i = 0; i < sd->nout; i++) {
            uint32_t l = sd->out[i];
            if (in_window(b, p->levels[l].px))
                slot_put(b, p, s, l);
            else
                sd->out[k++] = l;
        }
        sd->nout = k;
    }
}

static uint32_t window_levels(const struct em_book *b)
{
    return b->side[0].nlevels - b->side[0].nout + b->side[1].nlevels - b->side[1].nout;
}

/* Find or create the level of price px on side s; 0 when out of memory. */
static uint32_t level_for(struct em_book *b, struct em_pool *p, int s, int64_t px)
{
    struct em_book_side *sd = &b->side[s];
    if (!in_window(b, px) && window_levels(b) == 0)
        recentre(b, p, px);
    if (in_window(b, px)) {
        unsigned i = (unsigned)(px - b->base);
        if (sd->slot[i])
            return sd->slot[i];
        uint32_t l = level_get(p, px);
        if (!l)
            return 0;
        slot_put(b, p, s, l);
        sd->nlevels++;
        return l;
    }
    uint32_t at = out_lb(sd, p, px);
    if (at < sd->nout && p->levels[sd->out[at]].px == px)
        return sd->out[at];
    if (sd->nout == sd->outcap) {
        uint32_t cap = sd->outcap ? sd->outcap * 2 : 16;
        uint32_t *n = realloc(sd->out, cap * sizeof *n);
        if (!n)
            return 0;
        sd->out = n;
        sd->outcap = cap;
    }
    uint32_t l = level_get(p, px);
    if (!l)
        return 0;
    memmove(sd->out + at + 1, sd->out + at, (sd->nout - at) * sizeof *sd->out);
    sd->out[at] = l;
    sd->nout++;
    sd->nlevels++;
    return l;
}

static void level_drop(struct em_book *b, struct em_pool *p, int s, uint32_t l)
{
    struct em_book_side *sd = &b->side[s];
    struct em_level *v = &p->levels[l];
    if (l == sd->mkt)
        return;
    if (v->in_window) {
        unsigned i = (unsigned)(v->px - b->base);
        sd->slot[i] = 0;
        bit_clear(sd, i);
    } else {
        uint32_t at = out_lb(sd, p, v->px);
        memmove(sd->out + at, sd->out + at + 1, (sd->nout - at - 1) * sizeof *sd->out);
        sd->nout--;
    }
    sd->nlevels--;
    level_put(p, l);
}

static void fifo_append(struct em_pool *p, uint32_t l, uint32_t o)
{
    struct em_level *v = &p->levels[l];
    struct em_order *r = &p->orders[o];
    r->level = l;
    r->next = 0;
    r->prev = v->tail;
    if (v->tail)
        p->orders[v->tail].next = o;
    else
        v->head = o;
    v->tail = o;
}

static void fifo_unlink(struct em_pool *p, uint32_t l, uint32_t o)
{
    struct em_level *v = &p->levels[l];
    struct em_order *r = &p->orders[o];
    if (r->prev)
        p->orders[r->prev].next = r->next;
    else
        v->head = r->next;
    if (r->next)
        p->orders[r->next].prev = r->prev;
    else
        v->tail = r->prev;
    r->prev = r->next = 0;
}

int em_book_insert(struct em_book *b, struct em_pool *p, uint32_t o)
{
    struct em_order *r = &p->orders[o];
    int s = r->side == EM_SIDE_SELL ? EM_SELL : EM_BUY;
    uint32_t l = r->type == EM_OTYPE_MKT ? b->side[s].mkt : level_for(b, p, s, r->px);
    if (!l)
        return CORE_ENOMEM;
    fifo_append(p, l, o);
    p->levels[l].vol += p->orders[o].leaves;
    p->levels[l].count++;
    return 0;
}

void em_book_remove(struct em_book *b, struct em_pool *p, uint32_t o)
{
    struct em_order *r = &p->orders[o];
    uint32_t l = r->level;
    int s = r->side == EM_SIDE_SELL ? EM_SELL : EM_BUY;
    fifo_unlink(p, l, o);
    struct em_level *v = &p->levels[l];
    v->vol -= r->leaves;
    v->count--;
    r->level = 0;
    if (v->count == 0)
        level_drop(b, p, s, l);
}

void em_book_requeue(struct em_book *b, struct em_pool *p, uint32_t o)
{
    uint32_t l = p->orders[o].level;
    if (p->levels[l].tail == o)
        return;
    fifo_unlink(p, l, o);
    fifo_append(p, l, o);
}

uint32_t em_book_best(const struct em_book *b, const struct em_pool *p, int side)
{
    const struct em_book_side *sd = &b->side[side];
    if (!sd->nlevels)
        return 0;
    if (side == EM_BUY) {
        int i = find_le(sd, EM_BOOK_WIN - 1);
        uint32_t w = i >= 0 ? sd->slot[i] : 0, o = sd->nout ? sd->out[sd->nout - 1] : 0;
        if (!w)
            return o;
        if (!o)
            return w;
        return p->levels[o].px > p->levels[w].px ? o : w;
    }
    int i = find_ge(sd, 0);
    uint32_t w = i >= 0 ? sd->slot[i] : 0, o = sd->nout ? sd->out[0] : 0;
    if (!w)
        return o;
    if (!o)
        return w;
    return p->levels[o].px < p->levels[w].px ? o : w;
}

uint32_t em_book_next(const struct em_book *b, const struct em_pool *p, int side, uint32_t l)
{
    const struct em_book_side *sd = &b->side[side];
    const struct em_level *v = &p->levels[l];
    int64_t px = v->px;
    uint32_t w = 0, o = 0;
    if (side == EM_BUY) {
        /* highest price below px */
        int i = -1;
        if (px >= b->base + (int64_t)EM_BOOK_WIN)
            i = find_le(sd, EM_BOOK_WIN - 1);
        else if (px > b->base)
            i = find_le(sd, (int)(px - b->base) - 1);
        w = i >= 0 ? sd->slot[i] : 0;
        uint32_t at = out_lb(sd, p, px); /* the highest outlier below px */
        o = at ? sd->out[at - 1] : 0;
        if (!w)
            return o;
        if (!o)
            return w;
        return p->levels[o].px > p->levels[w].px ? o : w;
    }
    int i = -1;
    if (px < b->base)
        i = find_ge(sd, 0);
    else if (px - b->base < (int64_t)EM_BOOK_WIN - 1)
        i = find_ge(sd, (int)(px - b->base) + 1);
    w = i >= 0 ? sd->slot[i] : 0;
    uint32_t at = out_lb(sd, p, px + 1); /* the lowest outlier above px */
    o = at < sd->nout ? sd->out[at] : 0;
    if (!w)
        return o;
    if (!o)
        return w;
    return p->levels[o].px < p->levels[w].px ? o : w;
}

static int check_level(const struct em_pool *p, uint32_t l, int is_mkt)
{
    const struct em_level *v = &p->levels[l];
    uint64_t vol = 0, seq = 0;
    uint32_t n = 0, prev = 0;
    for (uint32_t o = v->head; o; o = p->orders[o].next) {
        const struct em_order *r = &p->orders[o];
        if (r->level != l || r->prev != prev || r->state != EM_OS_RESTING)
            return 1;
        if (n && r->seq <= seq)
            return 1;
        if (!is_mkt && r->px != v->px)
            return 1;
        if (r->qty != r->cum + r->leaves || r->shown == 0 || r->shown > r->leaves)
            return 5;
        seq = r->seq;
        vol += r->leaves;
        n++;
        prev = o;
    }
    if (v->tail != prev)
        return 1;
    if (vol != v->vol || n != v->count)
        return 2;
    if (!is_mkt && n == 0)
        return 3;
    return 0;
}

int em_book_check(const struct em_book *b, const struct em_pool *p)
{
    for (int s = 0; s < 2; s++) {
        const struct em_book_side *sd = &b->side[s];
        uint32_t n = 0, nonzero = 0, bits = 0;
        /* slot[i] != 0 exactly where bit i is set: count both (a tight,
         * vectorisable loop), then visit the set bits only */
        for (unsigned i = 0; i < EM_BOOK_WIN; i++)
            nonzero += sd->slot[i] != 0;
        for (unsigned w = 0; w < EM_BOOK_WIN / 64; w++) {
            if (!!sd->bits[w] != !!(sd->summary & (1ull << w)))
                return 3;
            bits += (uint32_t)__builtin_popcountll(sd->bits[w]);
            for (uint64_t m = sd->bits[w]; m; m &= m - 1) {
                unsigned i = w * 64 + (unsigned)__builtin_ctzll(m);
                if (!sd->slot[i] || p->levels[sd->slot[i]].px != b->base + (int64_t)i)
                    return 3;
                int r = check_level(p, sd->slot[i], 0);
                if (r)
                    return r;
                n++;
            }
        }
        if (nonzero != bits)
            return 3;
        for (uint32_t k = 0; k < sd->nout; k++) {
            const struct em_level *v = &p->levels[sd->out[k]];
            if (in_window(b, v->px) || v->in_window)
                return 4;
            if (k && v->px <= p->levels[sd->out[k - 1]].px)
                return 4;
            int r = check_level(p, sd->out[k], 0);
            if (r)
                return r;
            n++;
        }
        if (n != sd->nlevels)
            return 4;
        int r = check_level(p, sd->mkt, 1);
        if (r)
            return r;
    }
    return 0;
}
