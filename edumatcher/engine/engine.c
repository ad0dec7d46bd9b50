/*
 * EduMatcher matching engine (docs/alf.md §3–7 and B–G).
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
 * The functions named above live in engine.c and in the files listed in
 * engine_internal.h; those shared between the files carry the em_eng_
 * prefix there. The invariants are in engine_check.c.
 */
#include "edumatcher/engine/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/hash.h"
#include "edumatcher/engine/engine_internal.h"

/* FNV-1a (core/hash.h) of the name, seeded by xor for the (gw, cl) index,
 * with the high bits folded in since the maps take the low bits. */
static uint32_t hash_bytes(const char *s, size_t n, uint32_t seed)
{
    uint32_t h = core_fnv1a32(s, n) ^ seed;
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

struct symbol *em_eng_sym_find(const struct em_engine *e, const char *name)
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

/* ---- the (gw, cl) index ---- */

static uint32_t idx_hash(uint16_t gw, const char *cl, size_t n)
{
    return hash_bytes(cl, n, (uint32_t)gw * 0x9e3779b1u);
}

uint32_t em_eng_idx_find(struct em_engine *e, uint16_t gw, const char *cl, size_t n)
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

void em_eng_idx_put(struct em_engine *e, uint32_t o)
{
    struct em_order *r = ORD(e, o);
    uint32_t *b = &e->buckets[idx_hash(r->gw, r->cl, r->cllen) & e->bucket_mask];
    r->hnext = *b;
    *b = o;
}

void em_eng_idx_del(struct em_engine *e, uint32_t o)
{
    struct em_order *r = ORD(e, o);
    uint32_t *b = &e->buckets[idx_hash(r->gw, r->cl, r->cllen) & e->bucket_mask];
    while (*b != o)
        b = &ORD(e, *b)->hnext;
    *b = r->hnext;
}

/* Keep one bucket per pool record and the scratch arrays as large as the
 * pools; this allocates only when the pools reach a new size. */
int em_eng_fit_to_pools(struct em_engine *e)
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
                em_eng_idx_put(e, o);
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

/* ---- message handlers ---- */

static int on_new(struct em_engine *e, uint16_t gw, const struct em_msg *m)
{
    struct symbol *s = em_eng_sym_find(e, m->sym);
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
    if (em_eng_idx_find(e, gw, m->cl, cllen))
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
    if (em_eng_fit_to_pools(e)) {
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
    em_eng_idx_put(e, o);
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
        em_eng_stop_insert(s, e, o);
        if (s->phase == EM_PHASE_CONTINUOUS) {
            em_eng_set_message_refs(s);
            return em_eng_stop_loop(e, s);
        }
        return 0;
    }
    if (s->phase != EM_PHASE_CONTINUOUS)
        return em_eng_rest(e, s, o); /* PREOPEN / AUCTION: no matching (§6) */
    r->state = EM_OS_ACTIVE;
    em_eng_set_message_refs(s);
    int rc = em_eng_aggress(e, s, o);
    if (rc)
        return rc;
    return em_eng_stop_loop(e, s);
}

static int on_cancel(struct em_engine *e, uint16_t gw, const struct em_msg *m)
{
    uint32_t o = em_eng_idx_find(e, gw, m->cl, strlen(m->cl));
    if (!o)
        return EM_REJ_UNKNOWN_ORDER;
    em_eng_cancel_order(e, o, EM_WHY_USER);
    return 0;
}

static int on_replace(struct em_engine *e, uint16_t gw, const struct em_msg *m)
{
    uint32_t o = em_eng_idx_find(e, gw, m->cl, strlen(m->cl));
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
        em_eng_cancel_order(e, o, EM_WHY_REPLACE);
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
    if (s->phase == EM_PHASE_CONTINUOUS && l && em_eng_crosses(r, em_lvl(&e->pool, l)->px)) {
        em_eng_set_message_refs(s);
        int rc = em_eng_aggress(e, s, o);
        if (rc)
            return rc;
        return em_eng_stop_loop(e, s);
    }
    return em_eng_rest(e, s, o);
}

/* Cancel the open orders of gw (of symbol sym when not 0), oid order. */
static void cancel_gateway(struct em_engine *e, uint16_t gw, uint16_t sym, int why)
{
    uint32_t o = e->gws[gw].head;
    while (o) {
        uint32_t next = ORD(e, o)->gnext;
        if (!sym || ORD(e, o)->sym == sym)
            em_eng_cancel_order(e, o, why);
        o = next;
    }
}

int em_eng_on_symbol(struct em_engine *e, const struct em_msg *m)
{
    struct symbol tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.dec = m->tick.dec;
    tmp.tick_mant = m->tick.mant;
    tmp.lot = (m->present & EM_BIT(lot)) ? m->lot : 1;
    struct symbol *s = em_eng_sym_find(e, m->sym);
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
        if (em_book_init(&s->book, &e->pool) || em_eng_fit_to_pools(e)) {
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
    s->md_version++;
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
    return em_eng_enter_continuous(e, s);
}

static int on_oper(struct em_engine *e, const struct em_msg *m)
{
    if (m->kind == EM_MSG_SYMBOL)
        return em_eng_on_symbol(e, m);
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
        return em_eng_fire_timers(e);
    }
    struct symbol *s = em_eng_sym_find(e, m->sym);
    if (!s)
        return EM_REJ_UNKNOWN_SYMBOL;
    s->md_version++; /* phase, halt or resume */
    switch (m->kind) {
    case EM_MSG_PHASE:
        return em_eng_set_phase(e, s, m->phase);
    case EM_MSG_HALT:
        return on_halt(s);
    case EM_MSG_RESUME:
        return on_resume(e, s);
    }
    return 0;
}

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
                struct symbol *s = em_eng_sym_find(e, m->sym);
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
        em_eng_check_or_die(e);
    return rc;
}

void em_engine_set_time(struct em_engine *e, uint64_t now_ms)
{
    if (now_ms <= e->now)
        return;
    e->now = now_ms;
    em_eng_fire_timers(e);
    if (EM_CHECK_INVARIANTS)
        em_eng_check_or_die(e);
}

int em_engine_depth(const struct em_engine *e, const char *sym, int side,
                    struct em_depth_level *out, int max)
{
    const struct symbol *s = em_eng_sym_find(e, sym);
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
    const struct symbol *s = em_eng_sym_find(e, sym);
    if (!s)
        return CORE_ENOTFOUND;
    *phase = s->phase;
    *has_last = s->has_last;
    *last = s->has_last ? to_price(s, s->last) : (struct em_price){0, s->dec};
    return 0;
}

uint64_t em_engine_now(const struct em_engine *e)
{
    return e->now;
}

uint32_t em_engine_nsymbols(const struct em_engine *e)
{
    return e->nsyms;
}

uint16_t em_engine_symbol_id(const struct em_engine *e, const char *sym)
{
    const struct symbol *s = em_eng_sym_find(e, sym);
    return s ? s->id : 0;
}

int em_engine_symbol_md(const struct em_engine *e, uint16_t id, struct em_symbol_md *out)
{
    if (id < 1 || id > e->nsyms)
        return CORE_ENOTFOUND;
    const struct symbol *s = e->syms[id];
    out->name = s->name;
    out->phase = s->phase;
    out->has_last = s->has_last;
    out->last = s->has_last ? to_price(s, s->last) : (struct em_price){0, s->dec};
    out->last_qty = s->last_qty;
    out->volume = s->volume;
    out->trades = s->trades;
    out->version = s->md_version;
    out->decimals = s->dec;
    out->tick = (struct em_price){s->tick_mant, s->dec};
    out->lot = s->lot;
    out->band = s->band;
    out->cb_band = s->cb_band;
    return 0;
}

int em_engine_set_symbol_totals(struct em_engine *e, const char *sym, uint32_t last_qty,
                                uint64_t volume, uint64_t trades)
{
    struct symbol *s = em_eng_sym_find(e, sym);
    if (!s)
        return CORE_ENOTFOUND;
    s->last_qty = last_qty;
    s->volume = volume;
    s->trades = trades;
    s->md_version++;
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
    e->on_trade = cfg->on_trade;
    e->now = cfg->start_ms;
    e->gws_cap = 64;
    e->gws = calloc(e->gws_cap, sizeof *e->gws);
    e->syms_cap = 16;
    e->syms = calloc(e->syms_cap, sizeof *e->syms);
    if (!e->gws || !e->syms || map_grow(&e->gw_map, 1) < 0 || map_grow(&e->sym_map, 1) < 0 ||
        em_pool_init(&e->pool, cfg->orders_hint ? cfg->orders_hint : 1024,
                     cfg->levels_hint ? cfg->levels_hint : 256) ||
        em_eng_fit_to_pools(e)) {
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
