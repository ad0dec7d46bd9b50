/*
 * Engine snapshots: em_engine_snapshot and em_engine_restore (engine.h).
 */
#include "edumatcher/engine/engine_internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/byte.h"
#include "core/error.h"

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
 *     (version 2 on) u32 last_qty, u64 volume, trades,
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
    core_put_le(w->buf + w->len, v, width);
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
        out_u(&w, s->last_qty, 4);
        out_u(&w, s->volume, 8);
        out_u(&w, s->trades, 8);
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

/* Whether ticks t of symbol s can be printed: |t × tick| < 10^18, the
 * bound to_ticks() puts on every price the engine accepts. */
static int ticks_ok(const struct symbol *s, int64_t t)
{
    __int128 v = (__int128)t * s->tick_mant;
    return v < (__int128)1000000000000000000ll && v > -(__int128)1000000000000000000ll;
}

/* Read one order of symbol s into a new pool record (sym, state set; not
 * linked anywhere). 0 and *out, or CORE_EPROTO / CORE_ENOMEM. */
static int in_order(struct em_engine *e, struct core_reader *in, const struct symbol *s, int side,
                    uint8_t state, uint32_t *out)
{
    struct em_order t;
    memset(&t, 0, sizeof t);
    t.oid = core_read_le(in, 8);
    t.seq = core_read_le(in, 8);
    t.px = (int64_t)core_read_le(in, 8);
    t.stop = (int64_t)core_read_le(in, 8);
    t.qty = (uint32_t)core_read_le(in, 4);
    t.cum = (uint32_t)core_read_le(in, 4);
    t.leaves = (uint32_t)core_read_le(in, 4);
    t.shown = (uint32_t)core_read_le(in, 4);
    t.peak = (uint32_t)core_read_le(in, 4);
    t.gw = (uint16_t)core_read_le(in, 2);
    t.side = (uint8_t)core_read_le(in, 1);
    t.type = (uint8_t)core_read_le(in, 1);
    t.tif = (uint8_t)core_read_le(in, 1);
    t.stp = (uint8_t)core_read_le(in, 1);
    t.cllen = (uint8_t)core_read_le(in, 1);
    const uint8_t *cl = core_read_bytes(in, t.cllen);
    if (!core_reader_ok(in) || !cl || t.cllen == 0 || t.cllen > EM_CL_MAX ||
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
static int in_fifo(struct em_engine *e, struct core_reader *in, struct symbol *s, int side, int mkt,
                   int *have_prev, int64_t *prev_px)
{
    uint32_t n = (uint32_t)core_read_le(in, 4);
    if (!core_reader_ok(in) || (!mkt && n == 0))
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

static int in_symbol(struct em_engine *e, struct core_reader *in, uint32_t id, uint32_t version)
{
    uint8_t n = (uint8_t)core_read_le(in, 1);
    const uint8_t *name = core_read_bytes(in, n);
    struct em_msg m;
    memset(&m, 0, sizeof m);
    m.kind = EM_MSG_SYMBOL;
    m.tick.dec = (uint8_t)core_read_le(in, 1);
    m.tick.mant = (int64_t)core_read_le(in, 8);
    m.lot = (uint32_t)core_read_le(in, 4);
    m.present = EM_BIT(sym) | EM_BIT(tick) | EM_BIT(lot);
    if (!core_reader_ok(in) || !name || n == 0 || n > EM_SYM_MAX ||
        !em_valid_sym((const char *)name, n) || m.tick.dec >= EM_DIGITS_MAX || m.tick.mant <= 0 ||
        m.tick.mant >= 1000000000000000000ll || m.lot == 0)
        return CORE_EPROTO;
    memcpy(m.sym, name, n);
    m.sym[n] = 0;
    if (em_eng_sym_find(e, m.sym))
        return CORE_EPROTO; /* each symbol once */
    int rc = em_eng_on_symbol(e, &m);
    if (rc)
        return rc < 0 ? rc : CORE_EPROTO;
    struct symbol *s = e->syms[e->nsyms];
    if (s->id != id)
        return CORE_EPROTO;
    unsigned flags = (unsigned)core_read_le(in, 1);
    s->has_ref = (flags & 1) != 0;
    s->has_last = (flags & 2) != 0;
    s->has_resume = (flags & 4) != 0;
    s->has_cb_ref = (flags & 8) != 0;
    s->ref = (int64_t)core_read_le(in, 8);
    s->last = (int64_t)core_read_le(in, 8);
    s->cb_ref = (int64_t)core_read_le(in, 8);
    s->trig_lo = (int64_t)core_read_le(in, 8);
    s->trig_hi = (int64_t)core_read_le(in, 8);
    s->band = (uint32_t)core_read_le(in, 4);
    s->cb_band = (uint32_t)core_read_le(in, 4);
    s->cb_ms = core_read_le(in, 8);
    s->resume_at = core_read_le(in, 8);
    s->phase = (uint8_t)core_read_le(in, 1);
    s->halted_from = (uint8_t)core_read_le(in, 1);
    if (version >= 2) {
        s->last_qty = (uint32_t)core_read_le(in, 4);
        s->volume = core_read_le(in, 8);
        s->trades = core_read_le(in, 8);
    }
    if (!core_reader_ok(in) || flags > 15 || !ticks_ok(s, s->ref) || !ticks_ok(s, s->last) ||
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
        uint32_t nlevels = (uint32_t)core_read_le(in, 4);
        if (!core_reader_ok(in))
            return CORE_EPROTO;
        for (uint32_t l = 0; l < nlevels; l++) {
            rc = in_fifo(e, in, s, side, 0, &have_prev, &prev_px);
            if (rc)
                return rc;
        }
    }
    for (int side = 0; side < 2; side++) {
        uint32_t nstops = (uint32_t)core_read_le(in, 4), prev = 0;
        if (!core_reader_ok(in))
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
    struct core_reader in = core_reader_init(blob, len);
    const uint8_t *magic = core_read_bytes(&in, sizeof SNAP_MAGIC);
    if (!magic || memcmp(magic, SNAP_MAGIC, sizeof SNAP_MAGIC) != 0)
        return CORE_EPROTO;
    uint32_t version = (uint32_t)core_read_le(&in, 4);
    if (version < 1 || version > EM_SNAPSHOT_VERSION)
        return CORE_EPROTO;
    e->now = core_read_le(&in, 8);
    e->next_oid = core_read_le(&in, 8);
    e->next_tid = core_read_le(&in, 8);
    e->next_seq = core_read_le(&in, 8);
    e->stats.messages = core_read_le(&in, 8);
    e->stats.events = core_read_le(&in, 8);
    e->stats.trades = core_read_le(&in, 8);
    uint32_t ngws = (uint32_t)core_read_le(&in, 4);
    if (!core_reader_ok(&in) || ngws < 1 || ngws > 65535)
        return CORE_EPROTO;
    for (uint32_t g = 1; g <= ngws; g++) {
        uint8_t n = (uint8_t)core_read_le(&in, 1);
        const uint8_t *name = core_read_bytes(&in, n);
        uint64_t enabled = core_read_le(&in, 1);
        if (!core_reader_ok(&in) || !name || enabled > 1)
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
    uint32_t nsyms = (uint32_t)core_read_le(&in, 4);
    if (!core_reader_ok(&in) || nsyms > 65535)
        return CORE_EPROTO;
    for (uint32_t i = 1; i <= nsyms; i++) {
        int rc = in_symbol(e, &in, i, version);
        if (rc)
            return rc;
    }
    if (in.left != 0)
        return CORE_EPROTO; /* trailing bytes */

    /* Index and gateway lists (oid order), rebuilt from the pool. A
     * (gw, cl) given twice leaves one of the two unreachable in the index,
     * which em_engine_check reports below. */
    if (em_eng_fit_to_pools(e))
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
        em_eng_idx_put(e, o);
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
