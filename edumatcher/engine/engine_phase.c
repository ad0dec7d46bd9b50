/*
 * Trading phases and breaker timers (docs/alf.md F.3-F.8): entering
 * CONTINUOUS, closing (expiry of day orders), phase changes, resumes.
 */
#include "edumatcher/engine/engine_internal.h"

#include "core/error.h"

/* ---- phases ---- */

/* A message that may trade begins (or an uncross into CONTINUOUS has
 * just printed): fix the breaker's reference for it (F.7, H.11), and start
 * the range of prices that trigger stops at the last trade price (§5.5:
 * a stop whose condition holds on entry triggers at once). */
void em_eng_set_message_refs(struct symbol *s)
{
    s->has_cb_ref = s->has_last || s->has_ref;
    s->cb_ref = s->has_last ? s->last : s->ref;
    s->trig_lo = s->trig_hi = s->last;
}

int em_eng_enter_continuous(struct em_engine *e, struct symbol *s)
{
    s->has_resume = 0;
    s->md_version++;
    em_eng_uncross(e, s);
    em_eng_cancel_market_orders(e, s);
    s->phase = EM_PHASE_CONTINUOUS;
    em_eng_set_message_refs(s); /* docs/alf.md H.11 */
    return em_eng_stop_loop(e, s);
}

/* Entering CLOSED (F.3): every order but GTC limit orders and GTC
 * pending stops expires, in oid order (resting limit orders are DAY or
 * GTC; IOC and FOK ones never rest). */
void em_eng_expire_day(struct em_engine *e, struct symbol *s)
{
    uint32_t n = 0;
    if (em_eng_fit_to_pools(e))
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
    em_eng_sort_by_oid(e, e->scratch, n);
    for (uint32_t i = 0; i < n; i++)
        em_eng_cancel_order(e, e->scratch[i], EM_WHY_EXPIRED);
}

int em_eng_set_phase(struct em_engine *e, struct symbol *s, uint8_t to)
{
    if (s->phase == to)
        return 0;
    s->md_version++;
    s->has_resume = 0;
    if (to == EM_PHASE_CONTINUOUS)
        return em_eng_enter_continuous(e, s);
    /* §6: leaving PREOPEN or AUCTION uncrosses the book, and so does
     * leaving a halt (H.13): PREOPEN -> CLOSED is a closing auction */
    if ((s->phase == EM_PHASE_PREOPEN || s->phase == EM_PHASE_AUCTION ||
         s->phase == EM_PHASE_HALTED) &&
        em_eng_uncross(e, s))
        em_eng_cancel_market_orders(e, s);
    s->phase = to;
    if (to == EM_PHASE_CLOSED)
        em_eng_expire_day(e, s);
    return 0;
}

/* Fire every breaker resume due at e->now: earliest deadline first, ties
 * in symbol definition order (F.8). */
int em_eng_fire_timers(struct em_engine *e)
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
        int rc = em_eng_enter_continuous(e, due);
        if (rc)
            return rc;
    }
}
