/*
 * The engine's state shared by the files that implement engine.h. Not a
 * public header: only edumatcher/engine/engine*.c include it; everything
 * else uses engine.h.
 *
 *   engine.c           gateways, symbols, the (gw, cl) index, message
 *                      handlers (gates), submit, queries, lifetime
 *   engine_match.c     order records, continuous matching, stops
 *   engine_auction.c   the uncross (call auctions)
 *   engine_phase.c     trading phases and breaker timers
 *   engine_check.c     the invariants (em_engine_check)
 *   engine_snapshot.c  snapshot and restore
 *
 * The small helpers every file uses on the hot path (ticks, prices,
 * events) are static inline here so the split costs no call.
 */
#ifndef EM_ENGINE_INTERNAL_H
#define EM_ENGINE_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "edumatcher/engine/book.h"
#include "edumatcher/engine/engine.h"

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
    /* market data (em_symbol_md): trade totals, and the version */
    uint32_t last_qty;
    uint64_t volume, trades;
    uint64_t md_version;
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
    em_trade_fn on_trade;
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

/* A price written (mant, dec) in ticks of sym: 0 and *out, or BAD_VALUE
 * (docs/alf.md A.2: too many decimals, off the tick, or more than 18
 * digits once written with the symbol's decimals, H.3). */
static inline int to_ticks(const struct symbol *s, struct em_price p, int64_t *out)
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

static inline struct em_price to_price(const struct symbol *s, int64_t ticks)
{
    struct em_price p = {ticks * s->tick_mant, s->dec};
    return p;
}

/* docs/alf.md F.6: p inside r × (1 ± b), exact integer arithmetic. */
static inline int in_band(int64_t p, int64_t r, uint32_t b)
{
    __int128 pp = (__int128)p * 10000, lo = (__int128)r * (10000 - b),
             hi = (__int128)r * (10000 + b);
    return pp >= lo && pp <= hi;
}

/* ---- events ---- */

static inline void emit(struct em_engine *e, uint16_t gw)
{
    e->stats.events++;
    e->sink(e->sink_ctx, gw, &e->ev);
}

/* An event for order r: its symbol's market data may have changed. */
static inline void set_cl(struct em_engine *e, const struct em_order *r)
{
    e->syms[r->sym]->md_version++;
    memcpy(e->ev.cl, r->cl, r->cllen);
    e->ev.cl[r->cllen] = 0;
}

static inline void emit_ack(struct em_engine *e, const struct em_order *r)
{
    e->ev.kind = EM_MSG_ACK;
    e->ev.present = EM_BIT(cl) | EM_BIT(oid);
    set_cl(e, r);
    e->ev.oid = r->oid;
    emit(e, r->gw);
}

static inline void emit_fill(struct em_engine *e, const struct symbol *s, const struct em_order *r,
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

static inline void emit_canceled(struct em_engine *e, const struct em_order *r, uint32_t q, int why)
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

static inline void emit_simple(struct em_engine *e, uint16_t gw, unsigned kind,
                               const struct em_order *r)
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

/* ---- shared between the engine's files (definitions say more) ---- */

/* engine.c: the symbol named name or NULL; the (gw, cl) index of open
 * orders (0: none); growing the index and scratch arrays to the pools
 * (0 or CORE_ENOMEM); defining a symbol from a SYMBOL message. */
struct symbol *em_eng_sym_find(const struct em_engine *e, const char *name);
uint32_t em_eng_idx_find(struct em_engine *e, uint16_t gw, const char *cl, size_t n);
void em_eng_idx_put(struct em_engine *e, uint32_t o);
void em_eng_idx_del(struct em_engine *e, uint32_t o);
int em_eng_fit_to_pools(struct em_engine *e);
int em_eng_on_symbol(struct em_engine *e, const struct em_msg *m);

/* engine_match.c: release an order (out of the index, its gateway's list
 * and the pool), put a stop on its symbol's stop list, cancel an open
 * order [CANCELED], rest an order's remainder, match an ACTIVE order
 * (aggress) and run the stop loop: the int ones return 0 or CORE_ENOMEM
 * from the pools. */
void em_eng_finish(struct em_engine *e, uint32_t o);
void em_eng_stop_insert(struct symbol *s, struct em_engine *e, uint32_t o);
void em_eng_cancel_order(struct em_engine *e, uint32_t o, int why);
int em_eng_rest(struct em_engine *e, struct symbol *s, uint32_t o);
int em_eng_crosses(const struct em_order *a, int64_t px);
void em_eng_trip_breaker(struct em_engine *e, struct symbol *s);
void em_eng_fill_resting(struct em_engine *e, struct symbol *s, uint32_t ro, uint32_t q);
void em_eng_settle_resting(struct em_engine *e, struct symbol *s, uint32_t ro);
void em_eng_print_trade(struct symbol *s, int64_t px);
void em_eng_trade(struct em_engine *e, struct symbol *s, uint64_t tid, int64_t px, uint32_t q,
                  const struct em_order *buy, const struct em_order *sell);
int em_eng_aggress(struct em_engine *e, struct symbol *s, uint32_t ao);
int em_eng_stop_loop(struct em_engine *e, struct symbol *s);
void em_eng_sort_by_oid(struct em_engine *e, uint32_t *a, uint32_t n);

/* engine_auction.c: uncross the book (1: it traded, 0: nothing was
 * executable), cancel the resting market orders left after it. */
int em_eng_uncross(struct em_engine *e, struct symbol *s);
void em_eng_cancel_market_orders(struct em_engine *e, struct symbol *s);

/* engine_phase.c: phase changes and breaker resumes due at e->now. */
void em_eng_set_message_refs(struct symbol *s);
int em_eng_enter_continuous(struct em_engine *e, struct symbol *s);
void em_eng_expire_day(struct em_engine *e, struct symbol *s);
int em_eng_set_phase(struct em_engine *e, struct symbol *s, uint8_t to);
int em_eng_fire_timers(struct em_engine *e);

/* engine_check.c: abort with the broken invariant's name when
 * em_engine_check fails (EM_CHECK_INVARIANTS builds only call it). */
void em_eng_check_or_die(const struct em_engine *e);

#endif
