/*
 * The uncross of a call auction (§6, docs/alf.md F.5): choosing the
 * price, executing at it, cancelling what is left of market orders.
 */
#include "edumatcher/engine/engine_internal.h"

#include "core/error.h"

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

/* Uncross the book at the price uncross_price() chooses (F.5; no
 * self-trade prevention). Returns 1 when it traded, 0 when nothing was
 * executable. */
int em_eng_uncross(struct em_engine *e, struct symbol *s)
{
    int64_t P;
    uint64_t vol;
    if (em_eng_fit_to_pools(e))
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
        em_eng_fill_resting(e, s, bo, q);
        em_eng_fill_resting(e, s, so, q);
        emit_fill(e, s, br, tid, P, q); /* buy side first, §5.2 */
        emit_fill(e, s, sr, tid, P, q);
        em_eng_trade(e, s, tid, P, q, br, sr);
        em_eng_settle_resting(e, s, bo);
        em_eng_settle_resting(e, s, so);
    }
    em_eng_print_trade(s, P);
    return 1;
}

/* Cancel the symbol's resting market orders (MKT, oid order): what is
 * left of them after an uncross (F.5), or all of them on entering
 * CONTINUOUS, where a market order never rests (H.12). */
void em_eng_cancel_market_orders(struct em_engine *e, struct symbol *s)
{
    uint32_t n = 0;
    if (em_eng_fit_to_pools(e))
        return; /* out of memory: no room to sort them */
    for (int side = 0; side < 2; side++)
        for (uint32_t o = em_lvl(&e->pool, s->book.side[side].mkt)->head; o; o = ORD(e, o)->next)
            e->scratch[n++] = o;
    em_eng_sort_by_oid(e, e->scratch, n);
    for (uint32_t i = 0; i < n; i++)
        em_eng_cancel_order(e, e->scratch[i], EM_WHY_MKT);
}
