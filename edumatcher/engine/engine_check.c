/*
 * The engine's invariants (em_engine_check, engine.h), checked after each
 * message when built with EM_CHECK_INVARIANTS.
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
#include "edumatcher/engine/engine_internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"

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
            if (me->buckets && em_eng_idx_find(me, r->gw, r->cl, r->cllen) != o) {
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

void em_eng_check_or_die(const struct em_engine *e)
{
    const char *what = "";
    if (em_engine_check(e, &what)) {
        fprintf(stderr, "edumatcher: invariant broken after message %llu: %s\n",
                (unsigned long long)e->stats.messages, what);
        abort();
    }
}
