/*
 * Matching in CONTINUOUS (spec §5, docs/alf.md D, E, F.7): the order
 * records (finish, rest, cancel, stop lists), aggress() and the stop loop,
 * and the oid sort the phase changes and the uncross share.
 */
#include "edumatcher/engine/engine_internal.h"

#include "core/error.h"

/* ---- order records ---- */

/* Release a finished order: out of the index, its gateway's list, the
 * pool. It must already be out of the book / stop list. */
void em_eng_finish(struct em_engine *e, uint32_t o)
{
    struct em_order *r = ORD(e, o);
    struct gateway *g = &e->gws[r->gw];
    em_eng_idx_del(e, o);
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

void em_eng_stop_insert(struct symbol *s, struct em_engine *e, uint32_t o)
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
void em_eng_cancel_order(struct em_engine *e, uint32_t o, int why)
{
    struct em_order *r = ORD(e, o);
    struct symbol *s = e->syms[r->sym];
    if (r->state == EM_OS_RESTING)
        em_book_remove(&s->book, &e->pool, o);
    else if (r->state == EM_OS_STOP)
        stop_remove(s, e, o);
    emit_canceled(e, r, r->leaves, why);
    em_eng_finish(e, o);
}

static uint32_t fresh_shown(const struct em_order *r)
{
    return r->peak && r->peak < r->leaves ? r->peak : r->leaves;
}

/* Put an order's remainder on the book. */
int em_eng_rest(struct em_engine *e, struct symbol *s, uint32_t o)
{
    struct em_order *r = ORD(e, o);
    r->state = EM_OS_RESTING;
    r->shown = fresh_shown(r);
    return em_book_insert(&s->book, &e->pool, o);
}

/* ---- matching ---- */

int em_eng_crosses(const struct em_order *a, int64_t px)
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
        if (!em_eng_crosses(a, v->px))
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

void em_eng_trip_breaker(struct em_engine *e, struct symbol *s)
{
    s->phase = EM_PHASE_AUCTION;
    s->has_resume = 1;
    /* saturate: a deadline that wrapped round would be due at once */
    s->resume_at = e->now + s->cb_ms < e->now ? UINT64_MAX : e->now + s->cb_ms;
}

/* Fill q of resting order r (head of its level) at its price. */
void em_eng_fill_resting(struct em_engine *e, struct symbol *s, uint32_t ro, uint32_t q)
{
    struct em_order *r = ORD(e, ro);
    r->cum += q;
    r->leaves -= q;
    r->shown -= q;
    em_book_reduced(&e->pool, ro, q);
}

/* After a fill: a resting order that is done leaves; an iceberg whose
 * peak is used up shows a new one at the back of its level (§5.4). */
void em_eng_settle_resting(struct em_engine *e, struct symbol *s, uint32_t ro)
{
    struct em_order *r = ORD(e, ro);
    if (r->leaves == 0) {
        em_book_remove(&s->book, &e->pool, ro);
        em_eng_finish(e, ro);
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
void em_eng_print_trade(struct symbol *s, int64_t px)
{
    if (!s->has_last || px < s->trig_lo)
        s->trig_lo = px;
    if (!s->has_last || px > s->trig_hi)
        s->trig_hi = px;
    s->last = px;
    s->has_last = 1;
}

/* After the FILLs of a trade: the symbol's totals, and the trade callback
 * (engine.h, struct em_trade). */
void em_eng_trade(struct em_engine *e, struct symbol *s, uint64_t tid, int64_t px, uint32_t q,
                  const struct em_order *buy, const struct em_order *sell)
{
    s->last_qty = q;
    s->volume += q;
    s->trades++;
    if (!e->on_trade)
        return;
    struct em_trade t = {.tid = tid,
                         .sym = s->name,
                         .sym_id = s->id,
                         .px = to_price(s, px),
                         .qty = q,
                         .buy_gw = buy->gw,
                         .sell_gw = sell->gw,
                         .buy_oid = buy->oid,
                         .sell_oid = sell->oid};
    e->on_trade(e->sink_ctx, &t);
}

/* Match an incoming (ACTIVE) order against the book in CONTINUOUS (§5,
 * docs/alf.md D, E, F.7), then cancel or rest its remainder. */
int em_eng_aggress(struct em_engine *e, struct symbol *s, uint32_t ao)
{
    struct em_order *a = ORD(e, ao);
    int opp = side_ix(a) ^ 1;
    if (a->tif == EM_TIF_FOK && !fok_feasible(e, s, a)) {
        emit_canceled(e, a, a->leaves, EM_WHY_FOK);
        em_eng_finish(e, ao);
        return 0;
    }
    int stopped = 0, tripped = 0;
    while (a->leaves > 0) {
        uint32_t l = em_book_best(&s->book, &e->pool, opp);
        if (!l)
            break;
        int64_t px = em_lvl(&e->pool, l)->px;
        if (!em_eng_crosses(a, px))
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
                em_eng_cancel_order(e, ro, EM_WHY_STP);
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
                em_eng_finish(e, ro);
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
        em_eng_fill_resting(e, s, ro, q);
        a->cum += q;
        a->leaves -= q;
        em_eng_print_trade(s, px);
        emit_fill(e, s, r, tid, px, q); /* passive side first, §5.2 */
        emit_fill(e, s, a, tid, px, q);
        if (a->side == EM_SIDE_BUY)
            em_eng_trade(e, s, tid, px, q, a, r);
        else
            em_eng_trade(e, s, tid, px, q, r, a);
        em_eng_settle_resting(e, s, ro);
    }
    if (tripped)
        em_eng_trip_breaker(e, s);
    if (a->leaves == 0) {
        em_eng_finish(e, ao);
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
        em_eng_finish(e, ao);
        return 0;
    }
    return em_eng_rest(e, s, ao);
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
int em_eng_stop_loop(struct em_engine *e, struct symbol *s)
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
        rc = em_eng_aggress(e, s, o);
        if (rc)
            break;
    }
    for (uint32_t o; (o = dequeue_triggered(e, s));)
        em_eng_stop_insert(s, e, o);
    return rc;
}

/* ---- sorting ---- */

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

void em_eng_sort_by_oid(struct em_engine *e, uint32_t *a, uint32_t n)
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
