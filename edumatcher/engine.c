/*
 * EduMatcher matching engine (spec/ALF.md §3–7, docs/alf.md B–G).
 *
 * Life cycle of an order (the function behind each transition; events in
 * brackets):
 *
 *          on_new() [ACK]
 *   NEW ───────┬─────────────────────────────────┐
 *              │ LMT, MKT                        │ STP, STL
 *              v                                 v
 *        ┌──────────┐   stop_loop() [TRIGGERED] ┌──────────┐
 *        │ ACTIVE   │<──────────────────────────│ STOP     │ stop_insert():
 *        │ matching │                           │ pending  │ off the book
 *        └──────────┘                           └──────────┘
 *   aggress() [FILL…]│ rest(): the remainder of       │
 *   in CONTINUOUS    │ a DAY/GTC limit order, or      │
 *                    │ any order in PREOPEN/AUCTION   │
 *                    v                                │
 *        ┌──────────┐  on_replace() [REPLACED]:       │
 *        │ RESTING  │  new price or more qty and it   │
 *        │ in book  │  crosses ─────────────> ACTIVE  │
 *        └──────────┘  fill_resting() [FILL], then    │
 *              │       settle_resting(): an iceberg   │
 *              │       shows a new peak at the back   │
 *              v                                      v
 *   finish() (record back to the pool): filled by fill_resting() or
 *   aggress(); or cancel_order() [CANCELED: USER, MASS, DISCONNECT,
 *   EXPIRED, REPLACE, STP, MKT]; or aggress()'s end [CANCELED: IOC, FOK,
 *   MKT, STP].
 *
 * Trading phases of a symbol (docs/alf.md F.3–F.8):
 *
 *              set_phase(PREOPEN)        set_phase(CONTINUOUS):
 *   CLOSED ───────────────────> PREOPEN ───────────────────────┐
 *     ^                                   enter_continuous():   │
 *     │ set_phase(CLOSED) from            uncross(), stop_loop()v
 *     │ any phase: [uncross()], expire_day()              CONTINUOUS
 *     │                                                     │   ^
 *     │              trip_breaker() in aggress()            │   │
 *     │   AUCTION <─────────────────────────────────────────┘   │
 *     │      └── fire_timers() (TICK, em_engine_set_time) ──────┘
 *     │          at the resume deadline: enter_continuous()
 *     │
 *   on_halt(): any phase -> HALTED, remembering it and dropping a pending
 *   resume. on_resume(): back to CLOSED if it was, else
 *   enter_continuous(). set_phase() leaves HALTED too.
 *   [uncross()]: set_phase() out of PREOPEN, AUCTION or HALTED uncrosses
 *   the book whatever the new phase (§6, H.13), so a CLOSED book is never
 *   crossed.
 *
 * Invariants (em_engine_check, after each message with
 * EM_CHECK_INVARIANTS):
 *   1. every book satisfies book.h's invariants;
 *   2. a CONTINUOUS book is not crossed (best bid < best ask) and holds
 *      no market order;
 *   3. stop lists are in trigger order (buys: stop ascending, sells:
 *      descending, then arrival) and hold STOP orders only; in CONTINUOUS
 *      no pending stop is reached by the last trade price (the stop loop
 *      has run);
 *   4. each open order is in the (gw, cl) index once and in its gateway's
 *      list, which is in oid order; the pool holds no other order.
 */
#include "edumatcher/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "edumatcher/book.h"

#ifndef EM_CHECK_INVARIANTS
#define EM_CHECK_INVARIANTS 0
#endif

struct gateway {
    char name[EM_GW_MAX + 1];
    uint8_t len;
    uint8_t enabled;
    uint32_t head, tail; /* open orders in oid order */
};

struct symbol {
    char name[EM_SYM_MAX + 1];
    uint8_t dec;       /* decimals (docs/alf.md A.3) */
    int64_t tick_mant; /* the tick in units of 10^-dec */
    uint32_t lot;
    int has_ref, has_last, has_resume, has_cb_ref;
    int64_t ref, last, cb_ref; /* ticks */
    /* lowest and highest price printed since the current message began
     * (the last trade before it included): the stops to trigger (D.6) */
    int64_t trig_lo, trig_hi;
    uint32_t band, cb_band; /* basis points, 0: none */
    uint64_t cb_ms, resume_at;
    uint8_t phase, halted_from;
    uint16_t id;
    uint32_t stops[2]; /* pending stops: [0] buys ascending, [1] sells descending */
    /* stops triggered and waiting their turn (D.6), linked by next/prev;
     * empty between messages */
    uint32_t trig_head, trig_tail;
    struct em_book book;
};

struct name_map {
    uint16_t *slots; /* id or 0 */
    uint32_t mask;
};

struct em_engine {
    struct em_pool pool;
    em_sink_fn sink;
    void *sink_ctx;
    uint64_t now;
    uint64_t next_oid, next_tid, next_seq;

    struct gateway *gws; /* [0] unused */
    uint32_t ngws, gws_cap;
    struct name_map gw_map;
    uint16_t ops;

    struct symbol **syms; /* [0] unused */
    uint32_t nsyms, syms_cap;
    struct name_map sym_map;

    uint32_t *buckets; /* (gw, cl) index, chained through em_order.hnext */
    uint32_t bucket_mask;

    /* scratch for rare multi-order work (close, uncross), sized to the pools */
    uint32_t *scratch;
    uint32_t scratch_cap;
    struct cand *cands;
    uint32_t cands_cap;

    struct em_msg ev;
    struct em_engine_stats stats;
};

struct cand {
    int64_t px;
    uint64_t bvol, svol; /* at this price exactly, then cumulated */
};

/* ---- small helpers ---- */

static inline struct em_order *ORD(struct em_engine *e, uint32_t o)
{
    return &e->pool.orders[o];
}

static inline int side_ix(const struct em_order *r)
{
    return r->side == EM_SIDE_SELL ? EM_SELL : EM_BUY;
}

static uint32_t hash_bytes(const char *s, size_t n, uint32_t seed)
{
    uint32_t h = 2166136261u ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 16777619u;
    }
    return h ^ (h >> 15);
}

static int map_grow(struct name_map *m, uint32_t want)
{
    uint32_t n = 64;
    while (n < want * 2)
        n *= 2;
    if (m->slots && m->mask + 1 >= n)
        return 0;
    uint16_t *s = calloc(n, sizeof *s);
    if (!s)
        return CORE_ENOMEM;
    free(m->slots);
    m->slots = s;
    m->mask = n - 1;
    return 1; /* caller re-inserts */
}

/* ---- gateways ---- */

static uint16_t gw_find(const struct em_engine *e, const char *name, size_t n)
{
    uint32_t i = hash_bytes(name, n, 0) & e->gw_map.mask;
    for (;; i = (i + 1) & e->gw_map.mask) {
        uint16_t id = e->gw_map.slots[i];
        if (!id)
            return 0;
        const struct gateway *g = &e->gws[id];
        if (g->len == n && memcmp(g->name, name, n) == 0)
            return id;
    }
}

static void gw_map_put(struct em_engine *e, uint16_t id)
{
    const struct gateway *g = &e->gws[id];
    uint32_t i = hash_bytes(g->name, g->len, 0) & e->gw_map.mask;
    while (e->gw_map.slots[i])
        i = (i + 1) & e->gw_map.mask;
    e->gw_map.slots[i] = id;
}

int em_engine_gateway(struct em_engine *e, const char *name, size_t n)
{
    if (!em_valid_gw(name, n))
        return CORE_EINVAL;
    uint16_t id = gw_find(e, name, n);
    if (id)
        return id;
    if (e->ngws >= 65535)
        return CORE_ETOOBIG;
    if (e->ngws + 1 >= e->gws_cap) {
        uint32_t cap = e->gws_cap * 2;
        struct gateway *g = realloc(e->gws, cap * sizeof *g);
        if (!g)
            return CORE_ENOMEM;
        e->gws = g;
        e->gws_cap = cap;
    }
    int r = map_grow(&e->gw_map, e->ngws + 1);
    if (r < 0)
        return r;
    id = (uint16_t)++e->ngws;
    struct gateway *g = &e->gws[id];
    memset(g, 0, sizeof *g);
    memcpy(g->name, name, n);
    g->len = (uint8_t)n;
    g->enabled = 1; /* docs/alf.md C.8 */
    if (r == 1)
        for (uint16_t k = 1; k <= e->ngws; k++)
            gw_map_put(e, k);
    else
        gw_map_put(e, id);
    return id;
}

const char *em_engine_gateway_name(const struct em_engine *e, uint16_t gw)
{
    return gw >= 1 && gw <= e->ngws ? e->gws[gw].name : "";
}

int em_engine_authorize(const struct em_engine *e, uint16_t gw, unsigned kind)
{
    if (kind == EM_MSG__NONE || kind >= EM_MSG__COUNT)
        return 0;
    if (em_msgs[kind].cls == EM_CLASS_EVENT)
        return EM_REJ_SYNTAX; /* A.7: known, but not a message one sends */
    if (kind == EM_MSG_PING)
        return 0; /* C.4: a heartbeat, answered on every session, OPS too */
    int oper = em_msgs[kind].cls == EM_CLASS_OPER;
    return oper != (gw == e->ops) ? EM_REJ_AUTH : 0;
}

/* ---- symbols ---- */

static struct symbol *sym_find(const struct em_engine *e, const char *name)
{
    size_t n = strlen(name);
    uint32_t i = hash_bytes(name, n, 1) & e->sym_map.mask;
    for (;; i = (i + 1) & e->sym_map.mask) {
        uint16_t id = e->sym_map.slots[i];
        if (!id)
            return NULL;
        if (strcmp(e->syms[id]->name, name) == 0)
            return e->syms[id];
    }
}

static void sym_map_put(struct em_engine *e, uint16_t id)
{
    const char *name = e->syms[id]->name;
    uint32_t i = hash_bytes(name, strlen(name), 1) & e->sym_map.mask;
    while (e->sym_map.slots[i])
        i = (i + 1) & e->sym_map.mask;
    e->sym_map.slots[i] = id;
}

/* A price written (mant, dec) in ticks of sym: 0 and *out, or BAD_VALUE
 * (docs/alf.md A.2: too many decimals, off the tick, or more than 18
 * digits once written with the symbol's decimals, H.3). */
static int to_ticks(const struct symbol *s, struct em_price p, int64_t *out)
{
    if (p.dec > s->dec)
        return EM_REJ_BAD_VALUE;
    __int128 v = p.mant;
    for (unsigned i = p.dec; i < s->dec; i++)
        v *= 10;
    if (v >= (__int128)1000000000000000000ll)
        return EM_REJ_BAD_VALUE;
    if ((int64_t)v % s->tick_mant)
        return EM_REJ_BAD_VALUE;
    *out = (int64_t)v / s->tick_mant;
    return 0;
}

static struct em_price to_price(const struct symbol *s, int64_t ticks)
{
    struct em_price p = {ticks * s->tick_mant, s->dec};
    return p;
}

/* docs/alf.md F.6: p inside r × (1 ± b), exact integer arithmetic. */
static int in_band(int64_t p, int64_t r, uint32_t b)
{
    __int128 pp = (__int128)p * 10000, lo = (__int128)r * (10000 - b),
             hi = (__int128)r * (10000 + b);
    return pp >= lo && pp <= hi;
}

/* ---- the (gw, cl) index ---- */

static uint32_t idx_hash(uint16_t gw, const char *cl, size_t n)
{
    return hash_bytes(cl, n, (uint32_t)gw * 0x9e3779b1u);
}

static uint32_t idx_find(struct em_engine *e, uint16_t gw, const char *cl, size_t n)
{
    uint32_t o = e->buckets[idx_hash(gw, cl, n) & e->bucket_mask];
    while (o) {
        const struct em_order *r = ORD(e, o);
        if (r->gw == gw && r->cllen == n && memcmp(r->cl, cl, n) == 0)
            return o;
        o = r->hnext;
    }
    return 0;
}

static void idx_put(struct em_engine *e, uint32_t o)
{
    struct em_order *r = ORD(e, o);
    uint32_t *b = &e->buckets[idx_hash(r->gw, r->cl, r->cllen) & e->bucket_mask];
    r->hnext = *b;
    *b = o;
}

static void idx_del(struct em_engine *e, uint32_t o)
{
    struct em_order *r = ORD(e, o);
    uint32_t *b = &e->buckets[idx_hash(r->gw, r->cl, r->cllen) & e->bucket_mask];
    while (*b != o)
        b = &ORD(e, *b)->hnext;
    *b = r->hnext;
}

/* Keep one bucket per pool record and the scratch arrays as large as the
 * pools; this allocates only when the pools reach a new size. */
static int fit_to_pools(struct em_engine *e)
{
    uint32_t want = e->pool.norders_cap;
    /* one bucket per two records at most: chains stay short, and a
     * resting order costs 2-4 bytes of index (docs/perf.md) */
    uint32_t nb_want = 16;
    while (nb_want < want / 2)
        nb_want *= 2;
    if (!e->buckets || e->bucket_mask + 1 < nb_want) {
        uint32_t *nb = calloc(nb_want, sizeof *nb);
        if (!nb)
            return CORE_ENOMEM;
        free(e->buckets);
        e->buckets = nb;
        e->bucket_mask = nb_want - 1;
        for (uint32_t o = 1; o < e->pool.norders_cap; o++)
            if (ORD(e, o)->state != EM_OS_FREE)
                idx_put(e, o);
    }
    if (e->scratch_cap < want) {
        uint32_t *s = realloc(e->scratch, want * sizeof *s);
        if (!s)
            return CORE_ENOMEM;
        e->scratch = s;
        e->scratch_cap = want;
    }
    uint32_t lw = e->pool.nlevels_cap;
    if (e->cands_cap < lw) {
        struct cand *c = realloc(e->cands, lw * sizeof *c);
        if (!c)
            return CORE_ENOMEM;
        e->cands = c;
        e->cands_cap = lw;
    }
    return 0;
}

/* ---- events ---- */

static void emit(struct em_engine *e, uint16_t gw)
{
    e->stats.events++;
    e->sink(e->sink_ctx, gw, &e->ev);
}

static void set_cl(struct em_engine *e, const struct em_order *r)
{
    memcpy(e->ev.cl, r->cl, r->cllen);
    e->ev.cl[r->cllen] = 0;
}

static void emit_ack(struct em_engine *e, const struct em_order *r)
{
    e->ev.kind = EM_MSG_ACK;
    e->ev.present = EM_BIT(cl) | EM_BIT(oid);
    set_cl(e, r);
    e->ev.oid = r->oid;
    emit(e, r->gw);
}

static void emit_fill(struct em_engine *e, const struct symbol *s, const struct em_order *r,
                      uint64_t tid, int64_t px, uint32_t q)
{
    e->ev.kind = EM_MSG_FILL;
    e->ev.present = EM_BIT(cl) | EM_BIT(oid) | EM_BIT(tid) | EM_BIT(px) | EM_BIT(qty) |
                    EM_BIT(leaves) | EM_BIT(cum);
    set_cl(e, r);
    e->ev.oid = r->oid;
    e->ev.tid = tid;
    e->ev.px = to_price(s, px);
    e->ev.qty = q;
    e->ev.leaves = r->leaves;
    e->ev.cum = r->cum;
    emit(e, r->gw);
}

static void emit_canceled(struct em_engine *e, const struct em_order *r, uint32_t q, int why)
{
    e->ev.kind = EM_MSG_CANCELED;
    e->ev.present = EM_BIT(cl) | EM_BIT(oid) | EM_BIT(qty) | EM_BIT(cum) | EM_BIT(why);
    set_cl(e, r);
    e->ev.oid = r->oid;
    e->ev.qty = q;
    e->ev.cum = r->cum;
    e->ev.why = (uint8_t)why;
    emit(e, r->gw);
}

static void emit_simple(struct em_engine *e, uint16_t gw, unsigned kind, const struct em_order *r)
{
    e->ev.kind = (uint8_t)kind;
    e->ev.present = 0;
    if (r) {
        e->ev.present = EM_BIT(cl) | EM_BIT(oid);
        set_cl(e, r);
        e->ev.oid = r->oid;
    }
    emit(e, gw);
}

void em_engine_reject(struct em_engine *e, uint16_t gw, const struct em_msg *m, int code)
{
    e->ev.kind = EM_MSG_REJECT;
    e->ev.present = EM_BIT(rej);
    e->ev.rej = (uint8_t)code;
    if (m && (m->present & EM_BIT(cl))) {
        e->ev.present |= EM_BIT(cl);
        memcpy(e->ev.cl, m->cl, sizeof e->ev.cl);
    }
    emit(e, gw);
}

/* ---- order records ---- */

/* Release a finished order: out of the index, its gateway's list, the
 * pool. It must already be out of the book / stop list. */
static void finish(struct em_engine *e, uint32_t o)
{
    struct em_order *r = ORD(e, o);
    struct gateway *g = &e->gws[r->gw];
    idx_del(e, o);
    if (r->gprev)
        ORD(e, r->gprev)->gnext = r->gnext;
    else
        g->head = r->gnext;
    if (r->gnext)
        ORD(e, r->gnext)->gprev = r->gprev;
    else
        g->tail = r->gprev;
    em_pool_order_put(&e->pool, o);
    e->stats.open_orders--;
}

static void stop_insert(struct symbol *s, struct em_engine *e, uint32_t o)
{
    struct em_order *r = ORD(e, o);
    int si = side_ix(r);
    uint32_t prev = 0, at = s->stops[si];
    /* buys: lowest stop first; sells: highest first; ties by arrival (D.6);
     * a stop that waited for its turn comes back here by its arrival */
    while (at) {
        const struct em_order *a = ORD(e, at);
        int before = si == EM_BUY ? a->stop > r->stop : a->stop < r->stop;
        before = before || (a->stop == r->stop && a->seq > r->seq);
        if (before)
            break;
        prev = at;
        at = a->next;
    }
    r->prev = prev;
    r->next = at;
    if (prev)
        ORD(e, prev)->next = o;
    else
        s->stops[si] = o;
    if (at)
        ORD(e, at)->prev = o;
}

static void stop_remove(struct symbol *s, struct em_engine *e, uint32_t o)
{
    struct em_order *r = ORD(e, o);
    if (r->prev)
        ORD(e, r->prev)->next = r->next;
    else
        s->stops[side_ix(r)] = r->next;
    if (r->next)
        ORD(e, r->next)->prev = r->prev;
    r->prev = r->next = 0;
}

/* Take an open order off the book or its stop list, emit CANCELED for all
 * it has open, and finish it. */
static void cancel_order(struct em_engine *e, uint32_t o, int why)
{
    struct em_order *r = ORD(e, o);
    struct symbol *s = e->syms[r->sym];
    if (r->state == EM_OS_RESTING)
        em_book_remove(&s->book, &e->pool, o);
    else if (r->state == EM_OS_STOP)
        stop_remove(s, e, o);
    emit_canceled(e, r, r->leaves, why);
    finish(e, o);
}

static uint32_t fresh_shown(const struct em_order *r)
{
    return r->peak && r->peak < r->leaves ? r->peak : r->leaves;
}

/* Put an order's remainder on the book. */
static int rest(struct em_engine *e, struct symbol *s, uint32_t o)
{
    struct em_order *r = ORD(e, o);
    r->state = EM_OS_RESTING;
    r->shown = fresh_shown(r);
    return em_book_insert(&s->book, &e->pool, o);
}

/* ---- matching ---- */

static int crosses(const struct em_order *a, int64_t px)
{
    if (a->type == EM_OTYPE_MKT)
        return 1;
    return a->side == EM_SIDE_BUY ? px <= a->px : px >= a->px;
}

static int breaker_blocks(const struct symbol *s, int64_t px)
{
    return s->cb_band && s->has_cb_ref && !in_band(px, s->cb_ref, s->cb_band);
}

/* docs/alf.md D.7: can the whole quantity trade now? */
static int fok_feasible(struct em_engine *e, struct symbol *s, const struct em_order *a)
{
    int opp = side_ix(a) ^ 1;
    uint64_t need = a->leaves, avail = 0;
    for (uint32_t l = em_book_best(&s->book, &e->pool, opp); l;
         l = em_book_next(&s->book, &e->pool, opp, l)) {
        const struct em_level *v = em_lvl(&e->pool, l);
        if (!crosses(a, v->px))
            break;
        /* H.10: own orders under stp are met before the breaker's band is
         * checked, so a level outside it only lets CO skip its head */
        int outside = breaker_blocks(s, v->px);
        uint64_t shown_before = 0, whole = 0;
        for (uint32_t o = v->head; o; o = ORD(e, o)->next) {
            const struct em_order *r = ORD(e, o);
            if (a->stp && r->gw == a->gw) {
                if (a->stp == EM_STP_CO)
                    continue;
                /* the aggressor stops here: what precedes it, once each */
                return avail + shown_before >= need;
            }
            if (outside)
                return avail >= need; /* the breaker trips here */
            shown_before += r->shown;
            whole += r->leaves;
        }
        if (outside)
            continue; /* only own orders, skipped (CO) */
        /* no stop in this level: icebergs come back until done (§5.4) */
        avail += whole;
        if (avail >= need)
            return 1;
    }
    return avail >= need;
}

static void trip_breaker(struct em_engine *e, struct symbol *s)
{
    s->phase = EM_PHASE_AUCTION;
    s->has_resume = 1;
    /* saturate: a deadline that wrapped round would be due at once */
    s->resume_at = e->now + s->cb_ms < e->now ? UINT64_MAX : e->now + s->cb_ms;
}

/* Fill q of resting order r (head of its level) at its price. */
static void fill_resting(struct em_engine *e, struct symbol *s, uint32_t ro, uint32_t q)
{
    struct em_order *r = ORD(e, ro);
    r->cum += q;
    r->leaves -= q;
    r->shown -= q;
    em_book_reduced(&e->pool, ro, q);
}

/* After a fill: a resting order that is done leaves; an iceberg whose
 * peak is used up shows a new one at the back of its level (§5.4). */
static void settle_resting(struct em_engine *e, struct symbol *s, uint32_t ro)
{
    struct em_order *r = ORD(e, ro);
    if (r->leaves == 0) {
        em_book_remove(&s->book, &e->pool, ro);
        finish(e, ro);
    } else if (r->shown == 0) {
        r->shown = fresh_shown(r);
        r->seq = ++e->next_seq;
        em_book_requeue(&s->book, &e->pool, ro);
    }
}

/* A trade printed at px: it is now the last trade price, and it triggers
 * every stop it reaches (§5.2, §5.5: "stop orders that the trades
 * triggered"), even when later trades of the same message move the price
 * back, so the range of printed prices is kept. */
static void print_trade(struct symbol *s, int64_t px)
{
    if (!s->has_last || px < s->trig_lo)
        s->trig_lo = px;
    if (!s->has_last || px > s->trig_hi)
        s->trig_hi = px;
    s->last = px;
    s->has_last = 1;
}

/* Match an incoming (ACTIVE) order against the book in CONTINUOUS (§5,
 * docs/alf.md D, E, F.7), then cancel or rest its remainder. */
static int aggress(struct em_engine *e, struct symbol *s, uint32_t ao)
{
    struct em_order *a = ORD(e, ao);
    int opp = side_ix(a) ^ 1;
    if (a->tif == EM_TIF_FOK && !fok_feasible(e, s, a)) {
        emit_canceled(e, a, a->leaves, EM_WHY_FOK);
        finish(e, ao);
        return 0;
    }
    int stopped = 0, tripped = 0;
    while (a->leaves > 0) {
        uint32_t l = em_book_best(&s->book, &e->pool, opp);
        if (!l)
            break;
        int64_t px = em_lvl(&e->pool, l)->px;
        if (!crosses(a, px))
            break;
        uint32_t ro = em_lvl(&e->pool, l)->head;
        struct em_order *r = ORD(e, ro);
        if (a->stp && r->gw == a->gw) {
            /* self-trade prevention, docs/alf.md E; before the breaker
             * (§6, H.10): a meeting under stp prints no trade */
            if (a->stp == EM_STP_CN) {
                stopped = 1;
                break;
            }
            if (a->stp == EM_STP_CO || a->stp == EM_STP_CB) {
                cancel_order(e, ro, EM_WHY_STP);
                if (a->stp == EM_STP_CB) {
                    stopped = 1;
                    break;
                }
                continue;
            }
            /* DC: both lose the smaller open quantity */
            uint32_t d = a->leaves < r->leaves ? a->leaves : r->leaves;
            emit_canceled(e, r, d, EM_WHY_STP);
            r->leaves -= d;
            r->qty -= d;
            em_book_reduced(&e->pool, ro, d);
            if (r->shown > r->leaves)
                r->shown = r->leaves;
            if (r->leaves == 0) {
                em_book_remove(&s->book, &e->pool, ro);
                finish(e, ro);
            }
            emit_canceled(e, a, d, EM_WHY_STP);
            a->leaves -= d;
            a->qty -= d;
            continue;
        }
        if (breaker_blocks(s, px)) {
            tripped = 1;
            break;
        }
        uint32_t q = a->leaves < r->shown ? a->leaves : r->shown;
        uint64_t tid = ++e->next_tid;
        e->stats.trades++;
        fill_resting(e, s, ro, q);
        a->cum += q;
        a->leaves -= q;
        print_trade(s, px);
        emit_fill(e, s, r, tid, px, q); /* passive side first, §5.2 */
        emit_fill(e, s, a, tid, px, q);
        settle_resting(e, s, ro);
    }
    if (tripped)
        trip_breaker(e, s);
    if (a->leaves == 0) {
        finish(e, ao);
        return 0;
    }
    int why = 0;
    if (stopped)
        why = EM_WHY_STP;
    else if (a->tif == EM_TIF_FOK)
        why = EM_WHY_FOK;
    else if (a->type == EM_OTYPE_MKT)
        why = EM_WHY_MKT;
    else if (a->tif == EM_TIF_IOC)
        why = EM_WHY_IOC;
    if (why) {
        emit_canceled(e, a, a->leaves, why);
        finish(e, ao);
        return 0;
    }
    return rest(e, s, ao);
}

/* docs/alf.md D.6: the pending stops that the prices printed so far
 * reach join the back of the trigger queue together, buys (lowest stop
 * first) before sells (highest first); each stop list is in that order, so
 * the reached stops are a prefix of it. */
static void enqueue_reached(struct em_engine *e, struct symbol *s)
{
    for (int si = 0; si < 2; si++) {
        for (;;) {
            uint32_t o = s->stops[si];
            if (!o || (si == 0 ? ORD(e, o)->stop > s->trig_hi : ORD(e, o)->stop < s->trig_lo))
                break;
            stop_remove(s, e, o);
            struct em_order *r = ORD(e, o);
            r->prev = s->trig_tail;
            if (s->trig_tail)
                ORD(e, s->trig_tail)->next = o;
            else
                s->trig_head = o;
            s->trig_tail = o;
        }
    }
}

static uint32_t dequeue_triggered(struct em_engine *e, struct symbol *s)
{
    uint32_t o = s->trig_head;
    if (!o)
        return 0;
    struct em_order *r = ORD(e, o);
    s->trig_head = r->next;
    if (s->trig_head)
        ORD(e, s->trig_head)->prev = 0;
    else
        s->trig_tail = 0;
    r->prev = r->next = 0;
    return o;
}

/* docs/alf.md D.6: after a matching step, trigger the stops it reached in
 * queue order, one at a time while the symbol is CONTINUOUS; the stops a
 * triggered stop's own trades reach join behind those already waiting. A
 * breaker trip ends the loop: the stops still waiting go back to their
 * lists, pending (F.7). */
static int stop_loop(struct em_engine *e, struct symbol *s)
{
    int rc = 0;
    while (s->phase == EM_PHASE_CONTINUOUS && s->has_last) {
        enqueue_reached(e, s);
        uint32_t o = dequeue_triggered(e, s);
        if (!o)
            break;
        struct em_order *r = ORD(e, o);
        emit_simple(e, r->gw, EM_MSG_TRIGGERED, r);
        r->type = r->type == EM_OTYPE_STP ? EM_OTYPE_MKT : EM_OTYPE_LMT;
        r->seq = ++e->next_seq;
        r->state = EM_OS_ACTIVE;
        rc = aggress(e, s, o);
        if (rc)
            break;
    }
    for (uint32_t o; (o = dequeue_triggered(e, s));)
        stop_insert(s, e, o);
    return rc;
}

/* ---- uncross (§6, docs/alf.md F.5) ---- */

static int64_t absdiff(int64_t a, int64_t b)
{
    return a > b ? a - b : b - a;
}

/* Choose the uncross price; 0 when nothing is executable. */
static int uncross_price(struct em_engine *e, struct symbol *s, int64_t *price, uint64_t *volume)
{
    struct em_pool *p = &e->pool;
    struct em_book *b = &s->book;
    uint64_t mb = em_lvl(p, b->side[EM_BUY].mkt)->vol, ms = em_lvl(p, b->side[EM_SELL].mkt)->vol;
    /* merge both sides' levels into ascending distinct prices */
    uint32_t n = 0;
    uint32_t bl = em_book_best(b, p, EM_BUY), nb = 0;
    for (uint32_t l = bl; l; l = em_book_next(b, p, EM_BUY, l))
        nb++;
    /* buys come best (highest) first: place them reversed in scratch */
    uint32_t *buys = e->scratch;
    {
        uint32_t i = nb;
        for (uint32_t l = bl; l; l = em_book_next(b, p, EM_BUY, l))
            buys[--i] = l;
    }
    uint32_t bi = 0, sl = em_book_best(b, p, EM_SELL);
    while (bi < nb || sl) {
        int64_t bpx = bi < nb ? em_lvl(p, buys[bi])->px : 0;
        int64_t spx = sl ? em_lvl(p, sl)->px : 0;
        struct cand *c = &e->cands[n++];
        if (bi < nb && (!sl || bpx <= spx)) {
            c->px = bpx;
            c->bvol = em_lvl(p, buys[bi])->vol;
            c->svol = 0;
            bi++;
            if (sl && spx == bpx) {
                c->svol = em_lvl(p, sl)->vol;
                sl = em_book_next(b, p, EM_SELL, sl);
            }
        } else {
            c->px = spx;
            c->bvol = 0;
            c->svol = em_lvl(p, sl)->vol;
            sl = em_book_next(b, p, EM_SELL, sl);
        }
    }
    int has_ref = s->has_last || s->has_ref;
    int64_t ref = s->has_last ? s->last : s->ref;
    if (n == 0) {
        if (!(mb && ms && has_ref))
            return 0;
        e->cands[0] = (struct cand){ref, 0, 0};
        n = 1;
    }
    /* cumulate: sells at <= P from below, buys at >= P from above */
    uint64_t acc = ms;
    for (uint32_t i = 0; i < n; i++) {
        acc += e->cands[i].svol;
        e->cands[i].svol = acc;
    }
    acc = mb;
    for (uint32_t i = n; i-- > 0;) {
        acc += e->cands[i].bvol;
        e->cands[i].bvol = acc;
    }
    /* pass 1: the largest executable volume, then the smallest surplus */
    uint64_t best_vol = 0, best_abs = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct cand *c = &e->cands[i];
        uint64_t v = c->bvol < c->svol ? c->bvol : c->svol;
        uint64_t sur = c->bvol > c->svol ? c->bvol - c->svol : c->svol - c->bvol;
        if (v > best_vol || (v == best_vol && v > 0 && sur < best_abs)) {
            best_vol = v;
            best_abs = sur;
        }
    }
    if (best_vol == 0)
        return 0;
    /* pass 2: among the tied candidates, market pressure, then reference */
    int all_buy = 1, all_sell = 1;
    for (uint32_t i = 0; i < n; i++) {
        struct cand *c = &e->cands[i];
        uint64_t v = c->bvol < c->svol ? c->bvol : c->svol;
        uint64_t sur = c->bvol > c->svol ? c->bvol - c->svol : c->svol - c->bvol;
        if (v != best_vol || sur != best_abs)
            continue;
        if (!(c->bvol > c->svol))
            all_buy = 0;
        if (!(c->bvol < c->svol))
            all_sell = 0;
    }
    int found = 0;
    int64_t chosen = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct cand *c = &e->cands[i];
        uint64_t v = c->bvol < c->svol ? c->bvol : c->svol;
        uint64_t sur = c->bvol > c->svol ? c->bvol - c->svol : c->svol - c->bvol;
        if (v != best_vol || sur != best_abs)
            continue;
        if (!found) {
            chosen = c->px;
            found = 1;
            continue;
        }
        /* candidates are ascending: decide whether c beats chosen */
        if (all_buy)
            chosen = c->px; /* highest */
        else if (all_sell)
            ; /* lowest: keep the first */
        else if (has_ref && absdiff(c->px, ref) < absdiff(chosen, ref))
            chosen = c->px; /* closest to the reference; ties: the lower */
    }
    *price = chosen;
    *volume = best_vol;
    return 1;
}

/* The best order of a side executable at P: market first, then by price
 * and arrival. */
static uint32_t uncross_head(struct em_engine *e, struct symbol *s, int side, int64_t P)
{
    const struct em_level *m = em_lvl(&e->pool, s->book.side[side].mkt);
    if (m->head)
        return m->head;
    uint32_t l = em_book_best(&s->book, &e->pool, side);
    if (!l)
        return 0;
    int64_t px = em_lvl(&e->pool, l)->px;
    if (side == EM_BUY ? px < P : px > P)
        return 0;
    return em_lvl(&e->pool, l)->head;
}

static void sort_by_oid(struct em_engine *e, uint32_t *a, uint32_t n);

/* Uncross the book at the price uncross_price() chooses (F.5; no
 * self-trade prevention). Returns 1 when it traded, 0 when nothing was
 * executable. */
static int uncross(struct em_engine *e, struct symbol *s)
{
    int64_t P;
    uint64_t vol;
    if (fit_to_pools(e))
        return 0; /* out of memory: leave the book as it is */
    if (!uncross_price(e, s, &P, &vol))
        return 0;
    for (;;) {
        uint32_t bo = uncross_head(e, s, EM_BUY, P), so = uncross_head(e, s, EM_SELL, P);
        if (!bo || !so)
            break;
        struct em_order *br = ORD(e, bo), *sr = ORD(e, so);
        uint32_t q = br->shown < sr->shown ? br->shown : sr->shown;
        uint64_t tid = ++e->next_tid;
        e->stats.trades++;
        fill_resting(e, s, bo, q);
        fill_resting(e, s, so, q);
        emit_fill(e, s, br, tid, P, q); /* buy side first, §5.2 */
        emit_fill(e, s, sr, tid, P, q);
        settle_resting(e, s, bo);
        settle_resting(e, s, so);
    }
    print_trade(s, P);
    return 1;
}

/* Cancel the symbol's resting market orders (MKT, oid order): what is
 * left of them after an uncross (F.5), or all of them on entering
 * CONTINUOUS, where a market order never rests (H.12). */
static void cancel_market_orders(struct em_engine *e, struct symbol *s)
{
    uint32_t n = 0;
    if (fit_to_pools(e))
        return; /* out of memory: no room to sort them */
    for (int side = 0; side < 2; side++)
        for (uint32_t o = em_lvl(&e->pool, s->book.side[side].mkt)->head; o; o = ORD(e, o)->next)
            e->scratch[n++] = o;
    sort_by_oid(e, e->scratch, n);
    for (uint32_t i = 0; i < n; i++)
        cancel_order(e, e->scratch[i], EM_WHY_MKT);
}

/* ---- phases ---- */

/* A message that may trade begins (or an uncross into CONTINUOUS has
 * just printed): fix the breaker's reference for it (F.7, H.11), and start
 * the range of prices that trigger stops at the last trade price (§5.5:
 * a stop whose condition holds on entry triggers at once). */
static void set_message_refs(struct symbol *s)
{
    s->has_cb_ref = s->has_last || s->has_ref;
    s->cb_ref = s->has_last ? s->last : s->ref;
    s->trig_lo = s->trig_hi = s->last;
}

static int enter_continuous(struct em_engine *e, struct symbol *s)
{
    s->has_resume = 0;
    uncross(e, s);
    cancel_market_orders(e, s);
    s->phase = EM_PHASE_CONTINUOUS;
    set_message_refs(s); /* docs/alf.md H.11 */
    return stop_loop(e, s);
}

/* Heap sort (no allocation, unlike qsort) of order indices by oid. */
static void sift(struct em_engine *e, uint32_t *a, uint32_t i, uint32_t n)
{
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && ORD(e, a[c + 1])->oid > ORD(e, a[c])->oid)
            c++;
        if (ORD(e, a[i])->oid >= ORD(e, a[c])->oid)
            return;
        uint32_t t = a[i];
        a[i] = a[c];
        a[c] = t;
        i = c;
    }
}

static void sort_by_oid(struct em_engine *e, uint32_t *a, uint32_t n)
{
    for (uint32_t i = n / 2; i-- > 0;)
        sift(e, a, i, n);
    for (uint32_t i = n; i-- > 1;) {
        uint32_t t = a[0];
        a[0] = a[i];
        a[i] = t;
        sift(e, a, 0, i);
    }
}

/* Entering CLOSED (F.3): every order but GTC limit orders and GTC
 * pending stops expires, in oid order (resting limit orders are DAY or
 * GTC; IOC and FOK ones never rest). */
static void expire_day(struct em_engine *e, struct symbol *s)
{
    uint32_t n = 0;
    if (fit_to_pools(e))
        return;
    struct em_pool *p = &e->pool;
    for (int side = 0; side < 2; side++) {
        for (uint32_t o = em_lvl(p, s->book.side[side].mkt)->head; o; o = ORD(e, o)->next)
            e->scratch[n++] = o;
        for (uint32_t l = em_book_best(&s->book, p, side); l;
             l = em_book_next(&s->book, p, side, l))
            for (uint32_t o = em_lvl(p, l)->head; o; o = ORD(e, o)->next)
                if (ORD(e, o)->tif == EM_TIF_DAY)
                    e->scratch[n++] = o;
        /* only GTC outlives the close: a pending IOC or FOK stop is not
         * GTC either (F.3) */
        for (uint32_t o = s->stops[side]; o; o = ORD(e, o)->next)
            if (ORD(e, o)->tif != EM_TIF_GTC)
                e->scratch[n++] = o;
    }
    sort_by_oid(e, e->scratch, n);
    for (uint32_t i = 0; i < n; i++)
        cancel_order(e, e->scratch[i], EM_WHY_EXPIRED);
}

static int set_phase(struct em_engine *e, struct symbol *s, uint8_t to)
{
    if (s->phase == to)
        return 0;
    s->has_resume = 0;
    if (to == EM_PHASE_CONTINUOUS)
        return enter_continuous(e, s);
    /* §6: leaving PREOPEN or AUCTION uncrosses the book, and so does
     * leaving a halt (H.13): PREOPEN -> CLOSED is a closing auction */
    if ((s->phase == EM_PHASE_PREOPEN || s->phase == EM_PHASE_AUCTION ||
         s->phase == EM_PHASE_HALTED) &&
        uncross(e, s))
        cancel_market_orders(e, s);
    s->phase = to;
    if (to == EM_PHASE_CLOSED)
        expire_day(e, s);
    return 0;
}

/* Fire every breaker resume due at e->now: earliest deadline first, ties
 * in symbol definition order (F.8). */
static int fire_timers(struct em_engine *e)
{
    for (;;) {
        struct symbol *due = NULL;
        for (uint32_t i = 1; i <= e->nsyms; i++) {
            struct symbol *s = e->syms[i];
            if (s->has_resume && s->resume_at <= e->now && (!due || s->resume_at < due->resume_at))
                due = s;
        }
        if (!due)
            return 0;
        int rc = enter_continuous(e, due);
        if (rc)
            return rc;
    }
}

/* ---- message handlers ---- */

static int on_new(struct em_engine *e, uint16_t gw, const struct em_msg *m)
{
    struct symbol *s = sym_find(e, m->sym);
    if (!s)
        return EM_REJ_UNKNOWN_SYMBOL;
    uint8_t type = (m->present & EM_BIT(ord_type)) ? m->ord_type : EM_OTYPE_LMT;
    uint8_t tif = (m->present & EM_BIT(tif)) ? m->tif : EM_TIF_DAY;
    int64_t px = 0, stop = 0;
    if ((m->present & EM_BIT(px)) && to_ticks(s, m->px, &px))
        return EM_REJ_BAD_VALUE;
    if ((m->present & EM_BIT(stop)) && to_ticks(s, m->stop, &stop))
        return EM_REJ_BAD_VALUE;
    if (m->qty % s->lot || ((m->present & EM_BIT(peak)) && m->peak % s->lot))
        return EM_REJ_BAD_VALUE;
    if (!e->gws[gw].enabled)
        return EM_REJ_GATEWAY_DISABLED;
    size_t cllen = strlen(m->cl);
    if (idx_find(e, gw, m->cl, cllen))
        return EM_REJ_DUPLICATE_ID;
    if (s->phase == EM_PHASE_CLOSED)
        return EM_REJ_PHASE;
    if (s->phase == EM_PHASE_HALTED)
        return EM_REJ_HALTED;
    if ((s->phase == EM_PHASE_PREOPEN || s->phase == EM_PHASE_AUCTION) &&
        (tif == EM_TIF_IOC || tif == EM_TIF_FOK))
        return EM_REJ_PHASE;
    if ((type == EM_OTYPE_LMT || type == EM_OTYPE_STL) && s->band && (s->has_last || s->has_ref) &&
        !in_band(px, s->has_last ? s->last : s->ref, s->band))
        return EM_REJ_COLLAR;

    uint32_t o = em_pool_order_get(&e->pool);
    if (!o)
        return CORE_ENOMEM;
    if (fit_to_pools(e)) {
        em_pool_order_put(&e->pool, o); /* dropped before its ACK (engine.h) */
        return CORE_ENOMEM;
    }
    struct em_order *r = ORD(e, o);
    r->oid = ++e->next_oid;
    r->seq = ++e->next_seq;
    r->px = px;
    r->stop = stop;
    r->qty = r->leaves = m->qty;
    r->peak = (m->present & EM_BIT(peak)) ? m->peak : 0;
    r->gw = gw;
    r->sym = s->id;
    r->side = m->side;
    r->type = type;
    r->tif = tif;
    r->stp = (m->present & EM_BIT(stp)) ? m->stp : 0;
    r->cllen = (uint8_t)cllen;
    memcpy(r->cl, m->cl, cllen);
    idx_put(e, o);
    struct gateway *g = &e->gws[gw];
    r->gprev = g->tail;
    if (g->tail)
        ORD(e, g->tail)->gnext = o;
    else
        g->head = o;
    g->tail = o;
    e->stats.open_orders++;
    emit_ack(e, r);

    if (type == EM_OTYPE_STP || type == EM_OTYPE_STL) {
        r->state = EM_OS_STOP;
        stop_insert(s, e, o);
        if (s->phase == EM_PHASE_CONTINUOUS) {
            set_message_refs(s);
            return stop_loop(e, s);
        }
        return 0;
    }
    if (s->phase != EM_PHASE_CONTINUOUS)
        return rest(e, s, o); /* PREOPEN / AUCTION: no matching (§6) */
    r->state = EM_OS_ACTIVE;
    set_message_refs(s);
    int rc = aggress(e, s, o);
    if (rc)
        return rc;
    return stop_loop(e, s);
}

static int on_cancel(struct em_engine *e, uint16_t gw, const struct em_msg *m)
{
    uint32_t o = idx_find(e, gw, m->cl, strlen(m->cl));
    if (!o)
        return EM_REJ_UNKNOWN_ORDER;
    cancel_order(e, o, EM_WHY_USER);
    return 0;
}

static int on_replace(struct em_engine *e, uint16_t gw, const struct em_msg *m)
{
    uint32_t o = idx_find(e, gw, m->cl, strlen(m->cl));
    if (!o)
        return EM_REJ_UNKNOWN_ORDER;
    struct em_order *r = ORD(e, o);
    struct symbol *s = e->syms[r->sym];
    int64_t px = r->px;
    if ((m->present & EM_BIT(px)) && to_ticks(s, m->px, &px))
        return EM_REJ_BAD_VALUE;
    if ((m->present & EM_BIT(qty)) && m->qty % s->lot)
        return EM_REJ_BAD_VALUE;
    if (r->state != EM_OS_RESTING || r->type != EM_OTYPE_LMT) /* D.3: limit orders only */
        return EM_REJ_BAD_VALUE;
    if (!e->gws[gw].enabled)
        return EM_REJ_GATEWAY_DISABLED;
    if (s->phase == EM_PHASE_CLOSED)
        return EM_REJ_PHASE;
    if (s->phase == EM_PHASE_HALTED)
        return EM_REJ_HALTED;
    if ((m->present & EM_BIT(px)) && s->band && (s->has_last || s->has_ref) &&
        !in_band(px, s->has_last ? s->last : s->ref, s->band))
        return EM_REJ_COLLAR;

    uint32_t nq = (m->present & EM_BIT(qty)) ? m->qty : r->qty;
    if (nq <= r->cum) {
        cancel_order(e, o, EM_WHY_REPLACE);
        return 0;
    }
    int lose = px != r->px || nq > r->qty;
    uint32_t nleaves = nq - r->cum;
    if (!lose) {
        /* a decrease alone keeps priority (§3) */
        em_book_reduced(&e->pool, o, r->leaves - nleaves);
        r->qty = nq;
        r->leaves = nleaves;
        if (r->shown > nleaves)
            r->shown = nleaves;
    } else {
        em_book_remove(&s->book, &e->pool, o);
        r->qty = nq;
        r->leaves = nleaves;
        r->px = px;
        r->seq = ++e->next_seq;
        r->state = EM_OS_ACTIVE;
    }
    e->ev.kind = EM_MSG_REPLACED;
    e->ev.present = EM_BIT(cl) | EM_BIT(oid) | EM_BIT(qty) | EM_BIT(px) | EM_BIT(leaves);
    set_cl(e, r);
    e->ev.oid = r->oid;
    e->ev.qty = r->qty;
    e->ev.px = to_price(s, r->px);
    e->ev.leaves = r->leaves;
    emit(e, gw);
    if (!lose)
        return 0;
    int opp = side_ix(r) ^ 1;
    uint32_t l = em_book_best(&s->book, &e->pool, opp);
    if (s->phase == EM_PHASE_CONTINUOUS && l && crosses(r, em_lvl(&e->pool, l)->px)) {
        set_message_refs(s);
        int rc = aggress(e, s, o);
        if (rc)
            return rc;
        return stop_loop(e, s);
    }
    return rest(e, s, o);
}

/* Cancel the open orders of gw (of symbol sym when not 0), oid order. */
static void cancel_gateway(struct em_engine *e, uint16_t gw, uint16_t sym, int why)
{
    uint32_t o = e->gws[gw].head;
    while (o) {
        uint32_t next = ORD(e, o)->gnext;
        if (!sym || ORD(e, o)->sym == sym)
            cancel_order(e, o, why);
        o = next;
    }
}

static int on_symbol(struct em_engine *e, const struct em_msg *m)
{
    struct symbol tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.dec = m->tick.dec;
    tmp.tick_mant = m->tick.mant;
    tmp.lot = (m->present & EM_BIT(lot)) ? m->lot : 1;
    struct symbol *s = sym_find(e, m->sym);
    if (s && (s->dec != tmp.dec || s->tick_mant != tmp.tick_mant || s->lot != tmp.lot))
        return EM_REJ_BAD_VALUE; /* F.2 */
    int64_t ref = 0;
    if ((m->present & EM_BIT(ref)) && to_ticks(&tmp, m->ref, &ref))
        return EM_REJ_BAD_VALUE;
    if (!s) {
        if (e->nsyms >= 65535)
            return EM_REJ_BAD_VALUE;
        if (e->nsyms + 1 >= e->syms_cap) {
            uint32_t cap = e->syms_cap * 2;
            struct symbol **n = realloc(e->syms, cap * sizeof *n);
            if (!n)
                return CORE_ENOMEM;
            e->syms = n;
            e->syms_cap = cap;
        }
        s = calloc(1, sizeof *s);
        if (!s)
            return CORE_ENOMEM;
        if (em_book_init(&s->book, &e->pool) || fit_to_pools(e)) {
            free(s);
            return CORE_ENOMEM;
        }
        int r = map_grow(&e->sym_map, e->nsyms + 1);
        if (r < 0) {
            free(s);
            return CORE_ENOMEM;
        }
        strcpy(s->name, m->sym);
        s->dec = tmp.dec;
        s->tick_mant = tmp.tick_mant;
        s->lot = tmp.lot;
        s->phase = EM_PHASE_CONTINUOUS; /* F.1 */
        s->id = (uint16_t)++e->nsyms;
        e->syms[s->id] = s;
        if (r == 1)
            for (uint16_t k = 1; k <= e->nsyms; k++)
                sym_map_put(e, k);
        else
            sym_map_put(e, s->id);
    }
    s->has_ref = (m->present & EM_BIT(ref)) != 0;
    s->ref = ref;
    s->band = (m->present & EM_BIT(band)) ? m->band : 0;
    s->cb_band = (m->present & EM_BIT(cb_band)) ? m->cb_band : 0;
    s->cb_ms = (m->present & EM_BIT(cb_ms)) ? m->cb_ms : 5000;
    return 0;
}

/* F.4: HALT in any phase but HALTED remembers the phase and drops a
 * pending breaker resume; while HALTED it does nothing (H.7). */
static int on_halt(struct symbol *s)
{
    if (s->phase != EM_PHASE_HALTED) {
        s->halted_from = s->phase;
        s->has_resume = 0;
        s->phase = EM_PHASE_HALTED;
    }
    return 0;
}

/* F.4: back to CLOSED, or through an uncross to CONTINUOUS. */
static int on_resume(struct em_engine *e, struct symbol *s)
{
    if (s->phase != EM_PHASE_HALTED)
        return EM_REJ_PHASE;
    if (s->halted_from == EM_PHASE_CLOSED) {
        s->phase = EM_PHASE_CLOSED;
        return 0;
    }
    return enter_continuous(e, s);
}

static int on_oper(struct em_engine *e, const struct em_msg *m)
{
    if (m->kind == EM_MSG_SYMBOL)
        return on_symbol(e, m);
    if (m->kind == EM_MSG_GATEWAY) {
        int id = em_engine_gateway(e, m->gw, strlen(m->gw));
        if (id < 0)
            return id == CORE_ENOMEM ? id : EM_REJ_BAD_VALUE;
        e->gws[id].enabled = m->enabled;
        return 0;
    }
    if (m->kind == EM_MSG_TICK) {
        uint64_t t = e->now + m->ms;
        e->now = t < e->now ? UINT64_MAX : t;
        return fire_timers(e);
    }
    struct symbol *s = sym_find(e, m->sym);
    if (!s)
        return EM_REJ_UNKNOWN_SYMBOL;
    switch (m->kind) {
    case EM_MSG_PHASE:
        return set_phase(e, s, m->phase);
    case EM_MSG_HALT:
        return on_halt(s);
    case EM_MSG_RESUME:
        return on_resume(e, s);
    }
    return 0;
}

static void check_or_die(const struct em_engine *e);

int em_engine_submit(struct em_engine *e, uint16_t gw, const struct em_msg *m)
{
    if (gw < 1 || gw > e->ngws)
        return CORE_EINVAL;
    e->stats.messages++;
    int rc = em_engine_authorize(e, gw, m->kind);
    if (!rc) {
        switch (m->kind) {
        case EM_MSG_NEW:
            rc = on_new(e, gw, m);
            break;
        case EM_MSG_CANCEL:
            rc = on_cancel(e, gw, m);
            break;
        case EM_MSG_REPLACE:
            rc = on_replace(e, gw, m);
            break;
        case EM_MSG_MASSCANCEL: {
            uint16_t sym = 0;
            if (m->present & EM_BIT(sym)) {
                struct symbol *s = sym_find(e, m->sym);
                if (!s) {
                    rc = EM_REJ_UNKNOWN_SYMBOL;
                    break;
                }
                sym = s->id;
            }
            cancel_gateway(e, gw, sym, EM_WHY_MASS);
            break;
        }
        case EM_MSG_LOGOUT:
        case EM_MSG_DISCONNECT:
            cancel_gateway(e, gw, 0, EM_WHY_DISCONNECT); /* C.2, C.3 */
            break;
        case EM_MSG_LOGIN:
            /* docs/alf.md H.2: a session logs in as itself only */
            if (strcmp(m->gw, e->gws[gw].name) != 0) {
                rc = EM_REJ_AUTH;
                break;
            }
            e->ev.kind = EM_MSG_LOGGEDIN;
            e->ev.present = EM_BIT(gw);
            strcpy(e->ev.gw, m->gw);
            emit(e, gw);
            break;
        case EM_MSG_PING:
            emit_simple(e, gw, EM_MSG_PONG, NULL);
            break;
        default:
            if (em_msgs[m->kind].cls == EM_CLASS_OPER)
                rc = on_oper(e, m);
            else
                rc = EM_REJ_SYNTAX; /* events are not input */
            break;
        }
    }
    if (rc > 0) {
        em_engine_reject(e, gw, m, rc);
        rc = 0;
    }
    if (EM_CHECK_INVARIANTS)
        check_or_die(e);
    return rc;
}

void em_engine_set_time(struct em_engine *e, uint64_t now_ms)
{
    if (now_ms <= e->now)
        return;
    e->now = now_ms;
    fire_timers(e);
    if (EM_CHECK_INVARIANTS)
        check_or_die(e);
}

int em_engine_depth(const struct em_engine *e, const char *sym, int side,
                    struct em_depth_level *out, int max)
{
    const struct symbol *s = sym_find(e, sym);
    if (!s)
        return CORE_ENOTFOUND;
    if (side != EM_SIDE_BUY && side != EM_SIDE_SELL)
        return CORE_EINVAL;
    int si = side == EM_SIDE_SELL ? EM_SELL : EM_BUY, n = 0;
    for (uint32_t l = em_book_best(&s->book, &e->pool, si); l && n < max;
         l = em_book_next(&s->book, &e->pool, si, l)) {
        const struct em_level *v = em_lvl(&e->pool, l);
        uint64_t shown = 0;
        for (uint32_t o = v->head; o; o = e->pool.orders[o].next)
            shown += e->pool.orders[o].shown;
        out[n++] = (struct em_depth_level){to_price(s, v->px), shown, v->count};
    }
    return n;
}

int em_engine_symbol_state(const struct em_engine *e, const char *sym, uint8_t *phase,
                           struct em_price *last, int *has_last)
{
    const struct symbol *s = sym_find(e, sym);
    if (!s)
        return CORE_ENOTFOUND;
    *phase = s->phase;
    *has_last = s->has_last;
    *last = s->has_last ? to_price(s, s->last) : (struct em_price){0, s->dec};
    return 0;
}

void em_engine_stats(const struct em_engine *e, struct em_engine_stats *out)
{
    *out = e->stats;
}

/* ---- lifetime ---- */

struct em_engine *em_engine_new(const struct em_engine_config *cfg)
{
    struct em_engine *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->sink = cfg->sink;
    e->sink_ctx = cfg->sink_ctx;
    e->now = cfg->start_ms;
    e->gws_cap = 64;
    e->gws = calloc(e->gws_cap, sizeof *e->gws);
    e->syms_cap = 16;
    e->syms = calloc(e->syms_cap, sizeof *e->syms);
    if (!e->gws || !e->syms || map_grow(&e->gw_map, 1) < 0 || map_grow(&e->sym_map, 1) < 0 ||
        em_pool_init(&e->pool, cfg->orders_hint ? cfg->orders_hint : 1024,
                     cfg->levels_hint ? cfg->levels_hint : 256) ||
        fit_to_pools(e)) {
        em_engine_free(e);
        return NULL;
    }
    int ops = em_engine_gateway(e, EM_OPS_GW, strlen(EM_OPS_GW));
    if (ops < 0) {
        em_engine_free(e);
        return NULL;
    }
    e->ops = (uint16_t)ops;
    return e;
}

void em_engine_free(struct em_engine *e)
{
    if (!e)
        return;
    for (uint32_t i = 1; i <= e->nsyms; i++) {
        em_book_free(&e->syms[i]->book);
        free(e->syms[i]);
    }
    free(e->syms);
    free(e->gws);
    free(e->gw_map.slots);
    free(e->sym_map.slots);
    free(e->buckets);
    free(e->scratch);
    free(e->cands);
    em_pool_free(&e->pool);
    free(e);
}

/* ---- invariants ---- */

int em_engine_check(const struct em_engine *e, const char **what)
{
    struct em_engine *me = (struct em_engine *)e;
    const struct em_pool *p = &e->pool;
    uint64_t open = 0;
    for (uint32_t i = 1; i <= e->nsyms; i++) {
        const struct symbol *s = e->syms[i];
        if (em_book_check(&s->book, p)) {
            *what = "1: book invariant";
            return 1;
        }
        for (int side = 0; side < 2; side++) {
            for (uint32_t l = em_book_best(&s->book, p, side); l;
                 l = em_book_next(&s->book, p, side, l))
                open += em_lvl(p, l)->count;
            open += em_lvl(p, s->book.side[side].mkt)->count;
        }
        if (s->phase == EM_PHASE_CONTINUOUS) {
            uint32_t b = em_book_best(&s->book, p, EM_BUY), a = em_book_best(&s->book, p, EM_SELL);
            if (b && a && em_lvl(p, b)->px >= em_lvl(p, a)->px) {
                *what = "2: continuous book crossed";
                return 2;
            }
            if (em_lvl(p, s->book.side[0].mkt)->count || em_lvl(p, s->book.side[1].mkt)->count) {
                *what = "2: market order resting in continuous";
                return 2;
            }
        }
        for (int side = 0; side < 2; side++) {
            uint32_t prev = 0;
            for (uint32_t o = s->stops[side]; o; o = p->orders[o].next) {
                const struct em_order *r = &p->orders[o];
                if (r->state != EM_OS_STOP || r->prev != prev || side_ix(r) != side ||
                    r->qty != r->cum + r->leaves) {
                    *what = "3: stop list links";
                    return 3;
                }
                if (prev) {
                    const struct em_order *q = &p->orders[prev];
                    int ok = side == EM_BUY
                                 ? (q->stop < r->stop || (q->stop == r->stop && q->seq < r->seq))
                                 : (q->stop > r->stop || (q->stop == r->stop && q->seq < r->seq));
                    if (!ok) {
                        *what = "3: stop list order";
                        return 3;
                    }
                }
                open++;
                prev = o;
            }
        }
        if (s->phase == EM_PHASE_CONTINUOUS && s->has_last &&
            ((s->stops[0] && p->orders[s->stops[0]].stop <= s->last) ||
             (s->stops[1] && p->orders[s->stops[1]].stop >= s->last))) {
            *what = "3: a stop reached in CONTINUOUS is still pending";
            return 3;
        }
    }
    uint64_t listed = 0;
    for (uint32_t g = 1; g <= e->ngws; g++) {
        uint64_t last = 0;
        uint32_t prev = 0;
        for (uint32_t o = e->gws[g].head; o; o = p->orders[o].gnext) {
            const struct em_order *r = &p->orders[o];
            if (r->gw != g || r->gprev != prev || r->oid <= last || r->state == EM_OS_FREE ||
                r->state == EM_OS_ACTIVE) {
                *what = "4: gateway list";
                return 4;
            }
            if (me->buckets && idx_find(me, r->gw, r->cl, r->cllen) != o) {
                *what = "4: index";
                return 4;
            }
            last = r->oid;
            prev = o;
            listed++;
        }
        if (e->gws[g].tail != prev) {
            *what = "4: gateway list tail";
            return 4;
        }
    }
    if (listed != open || open != p->orders_used || open != e->stats.open_orders) {
        *what = "4: open orders disagree (book, lists, pool)";
        return 4;
    }
    return 0;
}

static void check_or_die(const struct em_engine *e)
{
    const char *what = "";
    if (em_engine_check(e, &what)) {
        fprintf(stderr, "edumatcher: invariant broken after message %llu: %s\n",
                (unsigned long long)e->stats.messages, what);
        abort();
    }
}

/* ---- snapshots ----
 *
 * Layout (engine.h; all integers little-endian, fixed width):
 *
 *   "EMENGSNP" u32 version
 *   u64 now, next_oid, next_tid, next_seq, messages, events, trades
 *   u32 ngws, then per gateway id 1..ngws: u8 len, name[len], u8 enabled
 *   u32 nsyms, then per symbol id 1..nsyms:
 *     u8 len, name[len], u8 dec, i64 tick_mant, u32 lot,
 *     u8 flags (1 has_ref, 2 has_last, 4 has_resume, 8 has_cb_ref),
 *     i64 ref, last, cb_ref, trig_lo, trig_hi, u32 band, cb_band,
 *     u64 cb_ms, resume_at, u8 phase, halted_from,
 *     per side (buy, sell): u32 n, n resting market orders (FIFO);
 *                           u32 nlevels, per level best first: u32 n, n orders (FIFO)
 *     per side (buy, sell): u32 n, n pending stops (trigger order)
 *   order = u64 oid, seq, i64 px, stop, u32 qty, cum, leaves, shown, peak,
 *           u16 gw, u8 side, type, tif, stp, cllen, cl[cllen]
 *
 * Written by walking the structures in their defined orders (never pool
 * or hash order), so the same state gives the same bytes; restored by
 * re-inserting in that order, which gives the same priorities. */

static const char SNAP_MAGIC[8] = {'E', 'M', 'E', 'N', 'G', 'S', 'N', 'P'};

struct snap_out {
    em_snapshot_write_fn write;
    void *ctx;
    int err;
    size_t len;
    unsigned char buf[4096];
};

static void out_flush(struct snap_out *w)
{
    if (!w->err && w->len)
        w->err = w->write(w->ctx, w->buf, w->len);
    w->len = 0;
}

static void out_bytes(struct snap_out *w, const void *p, size_t n)
{
    const unsigned char *b = p;
    while (n) {
        if (w->len == sizeof w->buf)
            out_flush(w);
        size_t k = sizeof w->buf - w->len < n ? sizeof w->buf - w->len : n;
        memcpy(w->buf + w->len, b, k);
        w->len += k;
        b += k;
        n -= k;
    }
}

static void out_u(struct snap_out *w, uint64_t v, unsigned width)
{
    if (w->len + width > sizeof w->buf)
        out_flush(w);
    for (unsigned i = 0; i < width; i++)
        w->buf[w->len + i] = (unsigned char)(v >> (8 * i));
    w->len += width;
}

static void out_order(struct snap_out *w, const struct em_order *r)
{
    out_u(w, r->oid, 8);
    out_u(w, r->seq, 8);
    out_u(w, (uint64_t)r->px, 8);
    out_u(w, (uint64_t)r->stop, 8);
    out_u(w, r->qty, 4);
    out_u(w, r->cum, 4);
    out_u(w, r->leaves, 4);
    out_u(w, r->shown, 4);
    out_u(w, r->peak, 4);
    out_u(w, r->gw, 2);
    out_u(w, r->side, 1);
    out_u(w, r->type, 1);
    out_u(w, r->tif, 1);
    out_u(w, r->stp, 1);
    out_u(w, r->cllen, 1);
    out_bytes(w, r->cl, r->cllen);
}

static void out_fifo(struct snap_out *w, const struct em_pool *p, uint32_t l)
{
    out_u(w, em_lvl(p, l)->count, 4);
    for (uint32_t o = em_lvl(p, l)->head; o; o = p->orders[o].next)
        out_order(w, &p->orders[o]);
}

int em_engine_snapshot(const struct em_engine *e, em_snapshot_write_fn write, void *ctx)
{
    struct snap_out w = {.write = write, .ctx = ctx};
    const struct em_pool *p = &e->pool;
    out_bytes(&w, SNAP_MAGIC, sizeof SNAP_MAGIC);
    out_u(&w, EM_SNAPSHOT_VERSION, 4);
    out_u(&w, e->now, 8);
    out_u(&w, e->next_oid, 8);
    out_u(&w, e->next_tid, 8);
    out_u(&w, e->next_seq, 8);
    out_u(&w, e->stats.messages, 8);
    out_u(&w, e->stats.events, 8);
    out_u(&w, e->stats.trades, 8);
    out_u(&w, e->ngws, 4);
    for (uint32_t g = 1; g <= e->ngws; g++) {
        out_u(&w, e->gws[g].len, 1);
        out_bytes(&w, e->gws[g].name, e->gws[g].len);
        out_u(&w, e->gws[g].enabled, 1);
    }
    out_u(&w, e->nsyms, 4);
    for (uint32_t i = 1; i <= e->nsyms; i++) {
        const struct symbol *s = e->syms[i];
        size_t n = strlen(s->name);
        out_u(&w, n, 1);
        out_bytes(&w, s->name, n);
        out_u(&w, s->dec, 1);
        out_u(&w, (uint64_t)s->tick_mant, 8);
        out_u(&w, s->lot, 4);
        out_u(&w,
              (s->has_ref ? 1u : 0) | (s->has_last ? 2u : 0) | (s->has_resume ? 4u : 0) |
                  (s->has_cb_ref ? 8u : 0),
              1);
        out_u(&w, (uint64_t)s->ref, 8);
        out_u(&w, (uint64_t)s->last, 8);
        out_u(&w, (uint64_t)s->cb_ref, 8);
        out_u(&w, (uint64_t)s->trig_lo, 8);
        out_u(&w, (uint64_t)s->trig_hi, 8);
        out_u(&w, s->band, 4);
        out_u(&w, s->cb_band, 4);
        out_u(&w, s->cb_ms, 8);
        out_u(&w, s->resume_at, 8);
        out_u(&w, s->phase, 1);
        out_u(&w, s->halted_from, 1);
        for (int side = 0; side < 2; side++) {
            out_fifo(&w, p, s->book.side[side].mkt);
            out_u(&w, s->book.side[side].nlevels, 4);
            for (uint32_t l = em_book_best(&s->book, p, side); l;
                 l = em_book_next(&s->book, p, side, l))
                out_fifo(&w, p, l);
        }
        for (int side = 0; side < 2; side++) {
            uint32_t n_stops = 0;
            for (uint32_t o = s->stops[side]; o; o = p->orders[o].next)
                n_stops++;
            out_u(&w, n_stops, 4);
            for (uint32_t o = s->stops[side]; o; o = p->orders[o].next)
                out_order(&w, &p->orders[o]);
        }
    }
    out_flush(&w);
    return w.err;
}

struct snap_in {
    const unsigned char *p;
    size_t left;
    int bad;
};

static uint64_t in_u(struct snap_in *r, unsigned width)
{
    if (r->bad || r->left < width) {
        r->bad = 1;
        return 0;
    }
    uint64_t v = 0;
    for (unsigned i = 0; i < width; i++)
        v |= (uint64_t)r->p[i] << (8 * i);
    r->p += width;
    r->left -= width;
    return v;
}

static const unsigned char *in_bytes(struct snap_in *r, size_t n)
{
    if (r->bad || r->left < n) {
        r->bad = 1;
        return NULL;
    }
    const unsigned char *b = r->p;
    r->p += n;
    r->left -= n;
    return b;
}

/* Whether ticks t of symbol s can be printed: |t × tick| < 10^18, the
 * bound to_ticks() puts on every price the engine accepts. */
static int ticks_ok(const struct symbol *s, int64_t t)
{
    __int128 v = (__int128)t * s->tick_mant;
    return v < (__int128)1000000000000000000ll && v > -(__int128)1000000000000000000ll;
}

/* Read one order of symbol s into a new pool record (sym, state set; not
 * linked anywhere). 0 and *out, or CORE_EPROTO / CORE_ENOMEM. */
static int in_order(struct em_engine *e, struct snap_in *in, const struct symbol *s, int side,
                    uint8_t state, uint32_t *out)
{
    struct em_order t;
    memset(&t, 0, sizeof t);
    t.oid = in_u(in, 8);
    t.seq = in_u(in, 8);
    t.px = (int64_t)in_u(in, 8);
    t.stop = (int64_t)in_u(in, 8);
    t.qty = (uint32_t)in_u(in, 4);
    t.cum = (uint32_t)in_u(in, 4);
    t.leaves = (uint32_t)in_u(in, 4);
    t.shown = (uint32_t)in_u(in, 4);
    t.peak = (uint32_t)in_u(in, 4);
    t.gw = (uint16_t)in_u(in, 2);
    t.side = (uint8_t)in_u(in, 1);
    t.type = (uint8_t)in_u(in, 1);
    t.tif = (uint8_t)in_u(in, 1);
    t.stp = (uint8_t)in_u(in, 1);
    t.cllen = (uint8_t)in_u(in, 1);
    const unsigned char *cl = in_bytes(in, t.cllen);
    if (in->bad || !cl || t.cllen == 0 || t.cllen > EM_CL_MAX ||
        !em_valid_cl((const char *)cl, t.cllen))
        return CORE_EPROTO;
    memcpy(t.cl, cl, t.cllen);
    int want_side = side == EM_BUY ? EM_SIDE_BUY : EM_SIDE_SELL;
    if (t.oid == 0 || t.oid > e->next_oid || t.seq == 0 || t.seq > e->next_seq || t.gw < 1 ||
        t.gw > e->ngws || t.gw == e->ops || t.side != want_side || t.type < EM_OTYPE_LMT ||
        t.type > EM_OTYPE_STL || t.tif < EM_TIF_DAY || t.tif > EM_TIF_FOK || t.stp > EM_STP_DC ||
        t.leaves == 0 || (uint64_t)t.cum + t.leaves != t.qty || t.shown > t.leaves ||
        !ticks_ok(s, t.px) || !ticks_ok(s, t.stop))
        return CORE_EPROTO;
    if (state == EM_OS_RESTING && t.shown == 0)
        return CORE_EPROTO;
    if (state == EM_OS_STOP && t.type != EM_OTYPE_STP && t.type != EM_OTYPE_STL)
        return CORE_EPROTO;
    uint32_t o = em_pool_order_get(&e->pool);
    if (!o)
        return CORE_ENOMEM;
    struct em_order *r = ORD(e, o);
    *r = t;
    r->sym = s->id;
    r->state = state;
    e->stats.open_orders++;
    *out = o;
    return 0;
}

/* Read n orders into one FIFO of s's book: the market orders of a side
 * (mkt) or one price level, which must be worse than *prev_px. */
static int in_fifo(struct em_engine *e, struct snap_in *in, struct symbol *s, int side, int mkt,
                   int *have_prev, int64_t *prev_px)
{
    uint32_t n = (uint32_t)in_u(in, 4);
    if (in->bad || (!mkt && n == 0))
        return CORE_EPROTO;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t o;
        int rc = in_order(e, in, s, side, EM_OS_RESTING, &o);
        if (rc)
            return rc;
        struct em_order *r = ORD(e, o);
        if (mkt != (r->type == EM_OTYPE_MKT))
            return CORE_EPROTO;
        if (!mkt && k == 0) {
            /* levels best first, each price once (buys down, sells up) */
            if (*have_prev && (side == EM_BUY ? r->px >= *prev_px : r->px <= *prev_px))
                return CORE_EPROTO;
            *have_prev = 1;
            *prev_px = r->px;
        } else if (!mkt && r->px != *prev_px) {
            return CORE_EPROTO;
        }
        if (em_book_insert(&s->book, &e->pool, o))
            return CORE_ENOMEM;
    }
    return 0;
}

static int in_symbol(struct em_engine *e, struct snap_in *in, uint32_t id)
{
    uint8_t n = (uint8_t)in_u(in, 1);
    const unsigned char *name = in_bytes(in, n);
    struct em_msg m;
    memset(&m, 0, sizeof m);
    m.kind = EM_MSG_SYMBOL;
    m.tick.dec = (uint8_t)in_u(in, 1);
    m.tick.mant = (int64_t)in_u(in, 8);
    m.lot = (uint32_t)in_u(in, 4);
    m.present = EM_BIT(sym) | EM_BIT(tick) | EM_BIT(lot);
    if (in->bad || !name || n == 0 || n > EM_SYM_MAX || !em_valid_sym((const char *)name, n) ||
        m.tick.dec >= EM_DIGITS_MAX || m.tick.mant <= 0 || m.tick.mant >= 1000000000000000000ll ||
        m.lot == 0)
        return CORE_EPROTO;
    memcpy(m.sym, name, n);
    m.sym[n] = 0;
    if (sym_find(e, m.sym))
        return CORE_EPROTO; /* each symbol once */
    int rc = on_symbol(e, &m);
    if (rc)
        return rc < 0 ? rc : CORE_EPROTO;
    struct symbol *s = e->syms[e->nsyms];
    if (s->id != id)
        return CORE_EPROTO;
    unsigned flags = (unsigned)in_u(in, 1);
    s->has_ref = (flags & 1) != 0;
    s->has_last = (flags & 2) != 0;
    s->has_resume = (flags & 4) != 0;
    s->has_cb_ref = (flags & 8) != 0;
    s->ref = (int64_t)in_u(in, 8);
    s->last = (int64_t)in_u(in, 8);
    s->cb_ref = (int64_t)in_u(in, 8);
    s->trig_lo = (int64_t)in_u(in, 8);
    s->trig_hi = (int64_t)in_u(in, 8);
    s->band = (uint32_t)in_u(in, 4);
    s->cb_band = (uint32_t)in_u(in, 4);
    s->cb_ms = in_u(in, 8);
    s->resume_at = in_u(in, 8);
    s->phase = (uint8_t)in_u(in, 1);
    s->halted_from = (uint8_t)in_u(in, 1);
    if (in->bad || flags > 15 || !ticks_ok(s, s->ref) || !ticks_ok(s, s->last) ||
        !ticks_ok(s, s->cb_ref) || !ticks_ok(s, s->trig_lo) || !ticks_ok(s, s->trig_hi) ||
        s->phase < EM_PHASE_CLOSED || s->phase > EM_PHASE_HALTED ||
        s->halted_from > EM_PHASE_HALTED)
        return CORE_EPROTO;
    for (int side = 0; side < 2; side++) {
        int have_prev = 0;
        int64_t prev_px = 0;
        rc = in_fifo(e, in, s, side, 1, &have_prev, &prev_px);
        if (rc)
            return rc;
        uint32_t nlevels = (uint32_t)in_u(in, 4);
        if (in->bad)
            return CORE_EPROTO;
        for (uint32_t l = 0; l < nlevels; l++) {
            rc = in_fifo(e, in, s, side, 0, &have_prev, &prev_px);
            if (rc)
                return rc;
        }
    }
    for (int side = 0; side < 2; side++) {
        uint32_t nstops = (uint32_t)in_u(in, 4), prev = 0;
        if (in->bad)
            return CORE_EPROTO;
        for (uint32_t k = 0; k < nstops; k++) {
            uint32_t o;
            rc = in_order(e, in, s, side, EM_OS_STOP, &o);
            if (rc)
                return rc;
            /* appended as written; em_engine_check verifies the order */
            ORD(e, o)->prev = prev;
            if (prev)
                ORD(e, prev)->next = o;
            else
                s->stops[side] = o;
            prev = o;
        }
    }
    return 0;
}

struct oid_ix {
    uint64_t oid;
    uint32_t o;
};

/* Sort a[0..n) by oid (all <= max), tmp[0..n) and count[2^16] as room:
 * LSD radix sort on 16-bit digits, O(n) per digit in sequential passes (a
 * comparison sort that reads the oids through the pool misses the cache
 * on every step). */
static void sort_oid_ix(struct oid_ix *a, struct oid_ix *tmp, uint32_t *count, uint32_t n,
                        uint64_t max)
{
    for (unsigned shift = 0; shift < 64 && (max >> shift); shift += 16) {
        memset(count, 0, (1u << 16) * sizeof *count);
        for (uint32_t i = 0; i < n; i++)
            count[(a[i].oid >> shift) & 0xffff]++;
        uint32_t sum = 0;
        for (uint32_t d = 0; d < (1u << 16); d++) {
            uint32_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (uint32_t i = 0; i < n; i++)
            tmp[count[(a[i].oid >> shift) & 0xffff]++] = a[i];
        memcpy(a, tmp, (size_t)n * sizeof *a);
    }
}

int em_engine_restore(struct em_engine *e, const void *blob, size_t len)
{
    if (e->ngws != 1 || e->nsyms != 0 || e->pool.orders_used != 0 || e->next_oid || e->next_seq ||
        e->next_tid || e->stats.messages)
        return CORE_EINVAL;
    struct snap_in in = {.p = blob, .left = len};
    const unsigned char *magic = in_bytes(&in, sizeof SNAP_MAGIC);
    if (!magic || memcmp(magic, SNAP_MAGIC, sizeof SNAP_MAGIC) != 0 ||
        in_u(&in, 4) != EM_SNAPSHOT_VERSION)
        return CORE_EPROTO;
    e->now = in_u(&in, 8);
    e->next_oid = in_u(&in, 8);
    e->next_tid = in_u(&in, 8);
    e->next_seq = in_u(&in, 8);
    e->stats.messages = in_u(&in, 8);
    e->stats.events = in_u(&in, 8);
    e->stats.trades = in_u(&in, 8);
    uint32_t ngws = (uint32_t)in_u(&in, 4);
    if (in.bad || ngws < 1 || ngws > 65535)
        return CORE_EPROTO;
    for (uint32_t g = 1; g <= ngws; g++) {
        uint8_t n = (uint8_t)in_u(&in, 1);
        const unsigned char *name = in_bytes(&in, n);
        uint64_t enabled = in_u(&in, 1);
        if (in.bad || !name || enabled > 1)
            return CORE_EPROTO;
        /* ids are given in interning order, so the names come back with
         * the same ids (OPS is always 1); a duplicate gets an old id */
        int id = em_engine_gateway(e, (const char *)name, n);
        if (id == CORE_ENOMEM)
            return id;
        if (id != (int)g)
            return CORE_EPROTO;
        e->gws[g].enabled = (uint8_t)enabled;
    }
    uint32_t nsyms = (uint32_t)in_u(&in, 4);
    if (in.bad || nsyms > 65535)
        return CORE_EPROTO;
    for (uint32_t i = 1; i <= nsyms; i++) {
        int rc = in_symbol(e, &in, i);
        if (rc)
            return rc;
    }
    if (in.left)
        return CORE_EPROTO; /* trailing bytes */

    /* Index and gateway lists (oid order), rebuilt from the pool. A
     * (gw, cl) given twice leaves one of the two unreachable in the index,
     * which em_engine_check reports below. */
    if (fit_to_pools(e))
        return CORE_ENOMEM;
    memset(e->buckets, 0, ((size_t)e->bucket_mask + 1) * sizeof *e->buckets);
    uint32_t n = 0;
    struct oid_ix *byoid = malloc(2 * (size_t)(e->stats.open_orders + 1) * sizeof *byoid);
    uint32_t *count = malloc((1u << 16) * sizeof *count);
    if (!byoid || !count) {
        free(byoid);
        free(count);
        return CORE_ENOMEM;
    }
    for (uint32_t o = 1; o < e->pool.norders_cap; o++) {
        struct em_order *r = ORD(e, o);
        if (r->state == EM_OS_FREE)
            continue;
        idx_put(e, o);
        byoid[n++] = (struct oid_ix){r->oid, o};
    }
    sort_oid_ix(byoid, byoid + n, count, n, e->next_oid);
    free(count);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t o = byoid[k].o;
        struct em_order *r = ORD(e, o);
        if (k && byoid[k - 1].oid == r->oid) {
            free(byoid);
            return CORE_EPROTO; /* oid twice */
        }
        struct gateway *g = &e->gws[r->gw];
        r->gprev = g->tail;
        r->gnext = 0;
        if (g->tail)
            ORD(e, g->tail)->gnext = o;
        else
            g->head = o;
        g->tail = o;
    }
    free(byoid);
    const char *what = "";
    return em_engine_check(e, &what) ? CORE_EPROTO : 0;
}

void em_engine_for_each_order(const struct em_engine *e,
                              void (*fn)(void *ctx, uint64_t oid, const char *sym, uint8_t side),
                              void *ctx)
{
    for (uint32_t o = 1; o < e->pool.norders_cap; o++) {
        const struct em_order *r = &e->pool.orders[o];
        if (r->state != EM_OS_FREE)
            fn(ctx, r->oid, e->syms[r->sym]->name, r->side);
    }
}
