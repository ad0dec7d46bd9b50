/*
 * em-refmodel: a deliberately simple reference model of the ALF protocol
 * (docs/alf.md: part 1 §3–8 and the choices A–H of part 2), the second
 * implementation of the differential test. It reads the replay format of
 * §8 (`<gw> <message>` per line, from a file argument or stdin) and writes
 * every event as `<gw> <event>` to stdout, as edumatcher-replay does.
 *
 * It is written to be checked against the spec line by line, not to be
 * fast: every live order sits in one array in oid order, and every
 * question ("best sell of this symbol", "order with this cl") is a linear
 * scan. The section that a rule comes from is cited next to the code
 * (§n = docs/alf.md part 1; A.n … H.n = its part 2).
 *
 * Invariants:
 *  1. `live` holds every order that is not finished, in oid order; finished
 *     orders are marked ST_DONE during a message and removed after it, so
 *     pointers stay valid for the whole message.
 *  2. An open order has qty = cum + leaves (§4); an iceberg shows `display`
 *     (1 ≤ display ≤ min(peak, leaves)) while resting.
 *  3. In CONTINUOUS, after every message, the book is not crossed and no
 *     pending stop is reached by a price the message printed, nor by the
 *     last trade price (the stop loop ran to completion, D.6), unless a
 *     circuit breaker moved the symbol to AUCTION.
 *
 * Order life cycle (the `state` field):
 *
 *   NEW ─ACK─┬─► PENDING_STOP ──TRIGGERED──┐               (§5.5, D.6)
 *            │                             ▼
 *            └────────────────────────► INFLIGHT ── match() ──► RESTING
 *                                          ▲                      │
 *                                          └── REPLACE with new ──┘ (D.3)
 *                                              priority, CONTINUOUS
 *   (in PREOPEN and AUCTION a NEW goes straight to RESTING, no match())
 *   any open state ──► DONE: filled, canceled, expired, STP, FOK, …
 *
 * Phases of a symbol (§6, F.1–F.8):
 *
 *   SYMBOL ──► CONTINUOUS ──breaker (match)──► AUCTION
 *   AUCTION ──TICK past the deadline (on_tick)──► uncross ──► CONTINUOUS
 *   PHASE (set_phase): any ──► CONTINUOUS (uncross, then the stop loop)
 *                          | PREOPEN | CLOSED (uncross first when leaving
 *                            PREOPEN, AUCTION or HALTED, H.13; CLOSED then
 *                            expires all but GTC limits and GTC stops)
 *   HALT: any but HALTED ──► HALTED (remembers the phase it left)
 *   RESUME (on_halt_resume): ──► CLOSED, or uncross ──► CONTINUOUS
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/proc.h"

#define MAX_MSG_LEN 1024 /* §1, applied to the message part (C.7) */
#define MAX_TOKENS  1024
#define MAX_SYMBOLS 256
#define MAX_GWS     1024
#define QTY_MAX     1000000000LL /* §2 */

enum side { BUY, SELL };
enum otype { T_LMT, T_MKT, T_STP, T_STL };
enum tif { TIF_DAY, TIF_GTC, TIF_IOC, TIF_FOK };
enum stp { STP_NONE, STP_CN, STP_CO, STP_CB, STP_DC };
enum phase { PH_CLOSED, PH_PREOPEN, PH_CONTINUOUS, PH_AUCTION, PH_HALTED };
enum state { ST_PENDING_STOP, ST_RESTING, ST_INFLIGHT, ST_DONE };

struct symbol {
    char name[16];
    int decimals;       /* A.3: digits after the point in `tick` */
    int64_t tick_units; /* the tick in units of 10^-decimals */
    int64_t lot;
    bool has_ref; /* configured reference price, in ticks */
    int64_t ref;
    int64_t band_bp; /* collar band in basis points, 0: no collar (F.2) */
    int64_t cb_bp;   /* breaker band, 0: no breaker */
    int64_t cb_ms;
    int phase;
    int halted_from; /* F.4: the phase HALT left */
    bool has_last;   /* last trade price, in ticks */
    int64_t last;
    bool resume_pending; /* F.7: breaker resume deadline */
    uint64_t resume_at;
    bool has_cb_ref; /* F.7: breaker reference, fixed per message */
    int64_t cb_ref;
    /* D.6: the lowest and highest price printed in this message so far,
     * starting at the last trade price before it (has_range: there is
     * one); the stops that these prices reach trigger. */
    bool has_range;
    int64_t range_lo, range_hi;
};

struct order {
    uint64_t oid;
    char gw[17];
    char cl[33];
    int sym;
    int side;
    int type; /* a triggered STP becomes T_MKT, a triggered STL T_LMT (§5.5) */
    int tif;
    int stp;
    int64_t qty, cum, leaves;
    int64_t px, stop; /* in ticks */
    int64_t peak;     /* 0: not an iceberg */
    int64_t display;  /* icebergs only: what can trade now (§5.4) */
    uint64_t seq;     /* arrival sequence (§5.1) */
    uint64_t queued;  /* D.6: place in the stop trigger queue, 0: not waiting */
    int state;
};

static struct symbol symbols[MAX_SYMBOLS];
static int nsymbols;
static char disabled_gws[MAX_GWS][17];
static int ndisabled;
static struct order **live;
static size_t nlive, live_cap;
static uint64_t next_oid = 1, next_tid = 1, next_seq = 1; /* D.1 */
static uint64_t next_queue_pos = 1;                       /* D.6: the stop trigger queue */
static uint64_t now_ms;                                   /* §7 TICK: the replay clock, from 0 */

/* ---------------------------------------------------------------- output */

static void emit(const char *gw, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void emit(const char *gw, const char *fmt, ...)
{
    va_list ap;
    fputs(gw, stdout);
    fputc(' ', stdout);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
}

/* §2: prices are printed with exactly the symbol's decimals (A.3). */
static const char *fmt_px(const struct symbol *s, int64_t ticks, char *buf, size_t len)
{
    int64_t units = ticks * s->tick_units;
    if (s->decimals == 0) {
        snprintf(buf, len, "%lld", (long long)units);
        return buf;
    }
    int64_t scale = 1;
    for (int i = 0; i < s->decimals; i++)
        scale *= 10;
    snprintf(buf, len, "%lld.%0*lld", (long long)(units / scale), s->decimals,
             (long long)(units % scale));
    return buf;
}

/* ------------------------------------------------------- value syntax §2 */

static bool all_of(const char *v, size_t min, size_t max, const char *extra, bool lower)
{
    size_t n = strlen(v);
    if (n < min || n > max)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = v[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  (lower && c >= 'a' && c <= 'z') || (c != 0 && strchr(extra, c));
        if (!ok)
            return false;
    }
    return true;
}

static bool valid_gw(const char *v)
{
    return all_of(v, 1, 16, "_", false);
}

static bool valid_cl(const char *v)
{
    return all_of(v, 1, 32, "_-.", true);
}

static bool valid_sym(const char *v)
{
    return all_of(v, 1, 12, ".", false);
}

/* H.1: a token is 1–64 printable ASCII characters other than space. */
static bool valid_token(const char *v)
{
    size_t n = strlen(v);
    if (n < 1 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (v[i] <= ' ' || v[i] > '~')
            return false;
    return true;
}

/* A.1: one or more digits, no sign, at most 18 digits. */
static bool parse_int(const char *v, int64_t *out)
{
    size_t n = strlen(v);
    if (n < 1 || n > 18)
        return false;
    int64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return false;
        x = x * 10 + (v[i] - '0');
    }
    *out = x;
    return true;
}

/* A.1: qty, peak, lot are 1 … 1 000 000 000. */
static bool parse_qty(const char *v, int64_t *out)
{
    return parse_int(v, out) && *out >= 1 && *out <= QTY_MAX;
}

/* A.2: `D+` or `D+.D+`, at most 18 digits, value > 0. The price is returned
 * as a mantissa and its number of decimals (`12.50` → 1250, 2). */
struct decimal {
    int64_t mant;
    int ndec;
};

static bool parse_price(const char *v, struct decimal *out)
{
    const char *dot = strchr(v, '.');
    size_t n = strlen(v);
    size_t int_len = dot ? (size_t)(dot - v) : n;
    size_t frac_len = dot ? n - int_len - 1 : 0;
    if (int_len < 1 || (dot && frac_len < 1) || int_len + frac_len > 18)
        return false;
    int64_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (v + i == dot)
            continue;
        if (v[i] < '0' || v[i] > '9')
            return false;
        m = m * 10 + (v[i] - '0');
    }
    if (m <= 0)
        return false;
    out->mant = m;
    out->ndec = (int)frac_len;
    return true;
}

/* A.2 second class: no more decimals than the symbol's, a multiple of its
 * tick, at most 18 digits (H.3). Converts to ticks. */
static bool price_to_ticks(const struct symbol *s, struct decimal d, int64_t *ticks)
{
    if (d.ndec > s->decimals)
        return false;
    __int128 units = d.mant;
    for (int i = d.ndec; i < s->decimals; i++)
        units *= 10;
    /* H.3: more than 18 digits at the symbol's decimals is BAD_VALUE. */
    if (units >= (__int128)1000000000000000000LL || units % s->tick_units != 0)
        return false;
    *ticks = (int64_t)(units / s->tick_units);
    return true;
}

/* A.4: `D+` or `D+.D+`, at most two decimals, 0 < value < 100, in bp. */
static bool parse_pct(const char *v, int64_t *bp)
{
    struct decimal d;
    if (!parse_price(v, &d) || d.ndec > 2)
        return false;
    int64_t x = d.mant;
    for (int i = d.ndec; i < 2; i++)
        x *= 10;
    if (x <= 0 || x >= 10000)
        return false;
    *bp = x;
    return true;
}

/* ------------------------------------------------------- message syntax */

struct field {
    const char *key; /* NULL for a token without '=' */
    const char *val;
};

struct msg {
    const char *type;
    struct field f[MAX_TOKENS];
    int n;
};

enum mclass { M_CLIENT, M_OPERATOR, M_DISCONNECT };

struct msgdef {
    const char *type;
    enum mclass cls;
    const char *keys[12]; /* §3 and §7: the fields each message may carry */
};

static const struct msgdef msgdefs[] = {
    {"LOGIN", M_CLIENT, {"gw", "token"}},
    {"NEW", M_CLIENT, {"cl", "sym", "side", "qty", "px", "type", "stop", "tif", "peak", "stp"}},
    {"CANCEL", M_CLIENT, {"cl"}},
    {"REPLACE", M_CLIENT, {"cl", "qty", "px"}},
    {"MASSCANCEL", M_CLIENT, {"sym"}},
    {"PING", M_CLIENT, {0}},
    {"LOGOUT", M_CLIENT, {0}},
    {"DISCONNECT", M_DISCONNECT, {0}}, /* §8 */
    {"SYMBOL", M_OPERATOR, {"sym", "tick", "lot", "ref", "band", "cb_band", "cb_ms"}},
    {"PHASE", M_OPERATOR, {"sym", "phase"}},
    {"HALT", M_OPERATOR, {"sym"}},
    {"RESUME", M_OPERATOR, {"sym"}},
    {"GATEWAY", M_OPERATOR, {"gw", "enabled"}},
    {"TICK", M_OPERATOR, {"ms"}},
};

static const struct msgdef *find_msgdef(const char *type)
{
    for (size_t i = 0; i < sizeof msgdefs / sizeof msgdefs[0]; i++)
        if (strcmp(msgdefs[i].type, type) == 0)
            return &msgdefs[i];
    return NULL;
}

static bool key_allowed(const struct msgdef *d, const char *key)
{
    for (int i = 0; i < 12 && d->keys[i]; i++)
        if (strcmp(d->keys[i], key) == 0)
            return true;
    return false;
}

/* Splits the message part in place on runs of spaces (§1). */
static void tokenize(char *s, struct msg *m)
{
    m->type = NULL;
    m->n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(s, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        if (!m->type) {
            m->type = tok;
            continue;
        }
        if (m->n == MAX_TOKENS)
            break; /* cannot happen within 1024 bytes */
        char *eq = strchr(tok, '=');
        if (eq) {
            *eq = 0;
            m->f[m->n].key = tok;
            m->f[m->n].val = eq + 1;
        } else {
            m->f[m->n].key = NULL;
            m->f[m->n].val = tok;
        }
        m->n++;
    }
}

static const char *get(const struct msg *m, const char *key)
{
    for (int i = 0; i < m->n; i++)
        if (m->f[i].key && strcmp(m->f[i].key, key) == 0)
            return m->f[i].val;
    return NULL;
}

/* §1, A.6, A.7: unknown type, token without '=', unknown or duplicate key.
 * An exchange → client type (§4: ACK, FILL, PONG, …) is not in msgdefs, so
 * it is SYNTAX like any unknown type, before any other fault and before the
 * AUTH check of C.4, from OPS too (A.7). */
static bool syntax_ok(const struct msg *m, const struct msgdef *d)
{
    if (!d)
        return false;
    for (int i = 0; i < m->n; i++) {
        if (!m->f[i].key || !key_allowed(d, m->f[i].key))
            return false;
        for (int j = 0; j < i; j++)
            if (strcmp(m->f[j].key, m->f[i].key) == 0)
                return false;
    }
    return true;
}

/* A.8, A.9, H.4: a REJECT carries the first well-formed cl= of the
 * message, whatever the message and the fault. */
static void reject(const char *gw, const struct msg *m, const char *code)
{
    for (int i = 0; i < m->n; i++) {
        if (m->f[i].key && strcmp(m->f[i].key, "cl") == 0 && valid_cl(m->f[i].val)) {
            emit(gw, "REJECT cl=%s reason=%s", m->f[i].val, code);
            return;
        }
    }
    emit(gw, "REJECT reason=%s", code);
}

/* ------------------------------------------------------ lookups (linear) */

static int find_symbol(const char *name)
{
    for (int i = 0; i < nsymbols; i++)
        if (strcmp(symbols[i].name, name) == 0)
            return i;
    return -1;
}

static bool gw_disabled(const char *gw)
{
    for (int i = 0; i < ndisabled; i++)
        if (strcmp(disabled_gws[i], gw) == 0)
            return true;
    return false;
}

static bool is_open(const struct order *o)
{
    return o->state == ST_RESTING || o->state == ST_PENDING_STOP || o->state == ST_INFLIGHT;
}

/* D.2: the live order (resting or pending stop) of gw with that cl. */
static struct order *find_live(const char *gw, const char *cl)
{
    for (size_t i = 0; i < nlive; i++) {
        struct order *o = live[i];
        if (is_open(o) && strcmp(o->gw, gw) == 0 && strcmp(o->cl, cl) == 0)
            return o;
    }
    return NULL;
}

static int64_t displayed(const struct order *o)
{
    return o->peak ? o->display : o->leaves;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Continuous priority (§5.1): better price, then earlier arrival. Returns
 * true when a ranks before b on the same side. */
static bool ranks_before(const struct order *a, const struct order *b)
{
    if (a->px != b->px)
        return a->side == BUY ? a->px > b->px : a->px < b->px;
    return a->seq < b->seq;
}

/* The best resting limit order of a symbol's side. */
static struct order *best_resting(int sym, int side)
{
    struct order *best = NULL;
    for (size_t i = 0; i < nlive; i++) {
        struct order *o = live[i];
        if (o->state != ST_RESTING || o->sym != sym || o->side != side || o->type != T_LMT)
            continue;
        if (!best || ranks_before(o, best))
            best = o;
    }
    return best;
}

static void add_live(struct order *o)
{
    if (nlive == live_cap) {
        live_cap = live_cap ? 2 * live_cap : 256;
        live = realloc(live, live_cap * sizeof *live);
        if (!live) {
            perror("realloc");
            exit(2);
        }
    }
    live[nlive++] = o;
}

/* Invariant 1: drop finished orders between messages, keeping oid order. */
static void compact_live(void)
{
    size_t j = 0;
    for (size_t i = 0; i < nlive; i++) {
        if (live[i]->state == ST_DONE)
            free(live[i]);
        else
            live[j++] = live[i];
    }
    nlive = j;
}

/* ------------------------------------------------------- events on orders */

/* §4: CANCELED qty = what was open and is now canceled, cum = filled. */
static void cancel_order(struct order *o, const char *why)
{
    emit(o->gw, "CANCELED cl=%s oid=%llu qty=%lld cum=%lld reason=%s", o->cl,
         (unsigned long long)o->oid, (long long)o->leaves, (long long)o->cum, why);
    o->leaves = 0;
    o->state = ST_DONE;
}

static void rest(struct order *o)
{
    o->state = ST_RESTING;
    if (o->peak)
        o->display = min64(o->peak, o->leaves); /* D.5 */
}

/* Applies q to one side of a trade and prints its FILL (§4). */
static void fill(struct order *o, uint64_t tid, int64_t px, int64_t q)
{
    char buf[48];
    o->cum += q;
    o->leaves -= q;
    if (o->peak && o->state == ST_RESTING)
        o->display -= q;
    emit(o->gw, "FILL cl=%s oid=%llu tid=%llu px=%s qty=%lld leaves=%lld cum=%lld", o->cl,
         (unsigned long long)o->oid, (unsigned long long)tid,
         fmt_px(&symbols[o->sym], px, buf, sizeof buf), (long long)q, (long long)o->leaves,
         (long long)o->cum);
}

/* After a trade: a resting order that is used up is finished; an iceberg
 * whose shown part is used up shows a new peak at the back of its level
 * (§5.4). */
static void after_trade(struct order *o)
{
    if (o->leaves == 0) {
        o->state = ST_DONE;
    } else if (o->peak && o->state == ST_RESTING && o->display == 0) {
        o->display = min64(o->peak, o->leaves);
        o->seq = next_seq++;
    }
}

/* D.6: the range of prices that trigger stops starts at the last trade
 * price when a message begins, and again after an uncross into CONTINUOUS
 * (F.7: the stops a message reached before its breaker tripped trigger
 * only on the prices printed after the resume). */
static void start_range(struct symbol *s)
{
    s->has_range = s->has_last;
    s->range_lo = s->range_hi = s->last;
}

/* A trade printed at px: it is the last trade price (§5.5), and every
 * trade triggers the stops it reaches, even when a later trade of the same
 * message moves the price back (§5.2, D.6), so the range widens. */
static void print_trade(struct symbol *s, int64_t px)
{
    s->last = px;
    s->has_last = true;
    if (!s->has_range || px < s->range_lo)
        s->range_lo = px;
    if (!s->has_range || px > s->range_hi)
        s->range_hi = px;
    s->has_range = true;
}

/* ------------------------------------------------------ collar / breaker */

/* The clock and the breaker deadlines stop at the top of their range
 * instead of wrapping round (a wrapped deadline would be due at once). */
static uint64_t add_saturating(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

static bool has_reference(const struct symbol *s, int64_t *r)
{
    if (s->has_last) {
        *r = s->last;
        return true;
    }
    if (s->has_ref) {
        *r = s->ref;
        return true;
    }
    return false;
}

/* F.6: p × 10000 within r × (10000 ± b), inclusive, exact integers. */
static bool inside_band(int64_t p, int64_t r, int64_t b)
{
    __int128 pp = (__int128)p * 10000;
    return pp >= (__int128)r * (10000 - b) && pp <= (__int128)r * (10000 + b);
}

/* §6 collar, F.6: reference = last trade, else configured ref, else none. */
static bool collar_ok(const struct symbol *s, int64_t px)
{
    int64_t r;
    if (s->band_bp == 0 || !has_reference(s, &r))
        return true;
    return inside_band(px, r, s->band_bp);
}

/* F.7: the breaker reference is fixed for the whole message. */
static bool breaker_outside(const struct symbol *s, int64_t px)
{
    if (s->cb_bp == 0 || !s->has_cb_ref)
        return false;
    return !inside_band(px, s->cb_ref, s->cb_bp);
}

/* ------------------------------------------------------ continuous match */

static bool crosses(const struct order *a, const struct order *r)
{
    if (a->type == T_MKT) /* §5.3: market orders match at any price */
        return true;
    return a->side == BUY ? r->px <= a->px : r->px >= a->px;
}

/* What happens to an aggressor's remainder (§5.3, D.4, F.7). */
static void finish_aggressor(struct order *a)
{
    if (a->state == ST_DONE || a->leaves == 0) {
        a->state = ST_DONE;
        return;
    }
    if (a->type == T_MKT && a->tif != TIF_FOK)
        cancel_order(a, "MKT");
    else if (a->tif == TIF_IOC)
        cancel_order(a, "IOC");
    else if (a->tif == TIF_FOK)
        cancel_order(a, "FOK"); /* not reached: FOK is checked first */
    else
        rest(a);
}

/* Matches an incoming order (state INFLIGHT) against the book in CONTINUOUS
 * (§5.1–5.6, E, F.7), then handles its remainder. */
static void match(struct order *a)
{
    struct symbol *s = &symbols[a->sym];
    int opp = a->side == BUY ? SELL : BUY;
    while (a->leaves > 0) {
        struct order *r = best_resting(a->sym, opp);
        if (!r || !crosses(a, r))
            break;
        /* E: self-trade prevention, continuous matching only. §6, H.10:
         * it comes before the circuit breaker, since a meeting of two
         * orders of one gateway under stp prints no trade. */
        if (a->stp != STP_NONE && strcmp(a->gw, r->gw) == 0) {
            if (a->stp == STP_CN) {
                cancel_order(a, "STP");
                return;
            }
            if (a->stp == STP_CO) {
                cancel_order(r, "STP");
                continue;
            }
            if (a->stp == STP_CB) {
                cancel_order(r, "STP");
                cancel_order(a, "STP");
                return;
            }
            /* DC: both reduced by the smaller open quantity d; resting
             * order's CANCELED first, then the aggressor's. */
            int64_t d = min64(a->leaves, r->leaves);
            struct order *both[2] = {r, a};
            for (int i = 0; i < 2; i++) {
                struct order *o = both[i];
                emit(o->gw, "CANCELED cl=%s oid=%llu qty=%lld cum=%lld reason=STP", o->cl,
                     (unsigned long long)o->oid, (long long)d, (long long)o->cum);
                o->leaves -= d;
                o->qty -= d;
                if (o->leaves == 0)
                    o->state = ST_DONE;
                else if (o->peak && o->display > o->leaves)
                    o->display = o->leaves; /* H.9: hidden part first */
            }
            if (a->leaves == 0)
                return;
            continue;
        }
        /* F.7: a trade outside the breaker band is not printed. */
        if (breaker_outside(s, r->px)) {
            s->phase = PH_AUCTION;
            s->resume_pending = true;
            s->resume_at = add_saturating(now_ms, (uint64_t)s->cb_ms);
            break;
        }
        /* §5.1: the trade prints at the resting order's price; §5.2: the
         * passive side's FILL first, then the aggressor's. */
        int64_t q = min64(a->leaves, displayed(r));
        uint64_t tid = next_tid++;
        fill(r, tid, r->px, q);
        fill(a, tid, r->px, q);
        print_trade(s, r->px);
        after_trade(r);
    }
    finish_aggressor(a);
}

/* D.7: can a FOK order fill completely against the orders it would meet in
 * priority order, within its limit and the breaker band, before meeting an
 * order of its own gateway (CN, CB, DC) or skipping them (CO)? Simulated on
 * a copy of the opposite side, iceberg replenishment included. */
static bool fok_fillable(const struct order *a)
{
    const struct symbol *s = &symbols[a->sym];
    int opp = a->side == BUY ? SELL : BUY;
    size_t n = 0;
    struct order *copy = calloc(nlive ? nlive : 1, sizeof *copy);
    if (!copy) {
        perror("calloc");
        exit(2);
    }
    for (size_t i = 0; i < nlive; i++) {
        const struct order *o = live[i];
        if (o->state == ST_RESTING && o->sym == a->sym && o->side == opp && o->type == T_LMT)
            copy[n++] = *o;
    }
    uint64_t seq = next_seq;
    int64_t need = a->leaves;
    while (need > 0) {
        struct order *r = NULL;
        for (size_t i = 0; i < n; i++)
            if (copy[i].leaves > 0 && (!r || ranks_before(&copy[i], r)))
                r = &copy[i];
        if (!r || !crosses(a, r))
            break;
        if (a->stp != STP_NONE && strcmp(a->gw, r->gw) == 0) { /* H.10: STP first */
            if (a->stp != STP_CO)
                break;
            r->leaves = 0; /* CO: skipped, canceled during the execution */
            continue;
        }
        if (breaker_outside(s, r->px))
            break;
        int64_t q = min64(need, displayed(r));
        need -= q;
        r->leaves -= q;
        if (r->peak) {
            r->display -= q;
            if (r->display == 0 && r->leaves > 0) {
                r->display = min64(r->peak, r->leaves);
                r->seq = seq++;
            }
        }
    }
    free(copy);
    return need == 0;
}

/* An order arriving at the book in CONTINUOUS: new, triggered (§5.3). */
static void execute_incoming(struct order *a)
{
    a->state = ST_INFLIGHT;
    if (a->tif == TIF_FOK && !fok_fillable(a)) {
        cancel_order(a, "FOK"); /* D.7: right after the ACK, no trade */
        return;
    }
    match(a);
}

/* D.6: the pending stops of sym that the prices printed so far reach and
 * that are not waiting yet join the trigger queue together: buy stops
 * first (lowest stop, then arrival), then sell stops (highest stop, then
 * arrival). Called after each matching step, so a step's stops join behind
 * those already waiting. */
static void enqueue_reached(int sym)
{
    struct symbol *s = &symbols[sym];
    for (;;) {
        struct order *pick = NULL;
        for (size_t i = 0; i < nlive; i++) {
            struct order *o = live[i];
            if (o->state != ST_PENDING_STOP || o->queued || o->sym != sym || o->side != BUY ||
                s->range_hi < o->stop)
                continue;
            if (!pick || o->stop < pick->stop || (o->stop == pick->stop && o->seq < pick->seq))
                pick = o;
        }
        if (!pick) {
            for (size_t i = 0; i < nlive; i++) {
                struct order *o = live[i];
                if (o->state != ST_PENDING_STOP || o->queued || o->sym != sym || o->side != SELL ||
                    s->range_lo > o->stop)
                    continue;
                if (!pick || o->stop > pick->stop || (o->stop == pick->stop && o->seq < pick->seq))
                    pick = o;
            }
        }
        if (!pick)
            return;
        pick->queued = next_queue_pos++;
    }
}

/* D.6: after a message's own matching (or an uncross into CONTINUOUS),
 * trigger the stops it reached in queue order, one at a time while the
 * symbol is CONTINUOUS: each TRIGGERED is followed by the stop's own
 * matching, whose trades may reach more stops, which join the back of the
 * queue. A breaker trip ends the loop; what still waits stays pending and
 * leaves the queue (F.7). */
static void run_stops(int sym)
{
    struct symbol *s = &symbols[sym];
    while (s->phase == PH_CONTINUOUS && s->has_range) {
        enqueue_reached(sym);
        struct order *pick = NULL;
        for (size_t i = 0; i < nlive; i++) {
            struct order *o = live[i];
            if (o->state == ST_PENDING_STOP && o->sym == sym && o->queued &&
                (!pick || o->queued < pick->queued))
                pick = o;
        }
        if (!pick)
            break;
        pick->queued = 0;
        emit(pick->gw, "TRIGGERED cl=%s oid=%llu", pick->cl, (unsigned long long)pick->oid);
        /* §5.5: a market (STP) or limit (STL, at px) order with a new
         * arrival sequence; it keeps its TIF and stp (D.6). */
        pick->type = pick->type == T_STP ? T_MKT : T_LMT;
        pick->seq = next_seq++;
        execute_incoming(pick);
    }
    for (size_t i = 0; i < nlive; i++)
        if (live[i]->sym == sym)
            live[i]->queued = 0;
}

/* --------------------------------------------------------------- uncross */

/* F.5 allocation order: market first, then better price, then arrival. */
static bool uncross_before(const struct order *a, const struct order *b)
{
    bool am = a->type == T_MKT, bm = b->type == T_MKT;
    if (am != bm)
        return am;
    if (!am && a->px != b->px)
        return a->side == BUY ? a->px > b->px : a->px < b->px;
    return a->seq < b->seq;
}

static bool executable_at(const struct order *o, int64_t p)
{
    if (o->type == T_MKT)
        return true;
    return o->side == BUY ? o->px >= p : o->px <= p;
}

static struct order *best_executable(int sym, int side, int64_t p)
{
    struct order *best = NULL;
    for (size_t i = 0; i < nlive; i++) {
        struct order *o = live[i];
        if (o->state != ST_RESTING || o->sym != sym || o->side != side || !executable_at(o, p))
            continue;
        if (!best || uncross_before(o, best))
            best = o;
    }
    return best;
}

static void volumes_at(int sym, int64_t p, int64_t *buy, int64_t *sell)
{
    *buy = *sell = 0;
    for (size_t i = 0; i < nlive; i++) {
        const struct order *o = live[i];
        if (o->state != ST_RESTING || o->sym != sym || !executable_at(o, p))
            continue;
        if (o->side == BUY)
            *buy += o->leaves; /* icebergs: whole leaves (F.5) */
        else
            *sell += o->leaves;
    }
}

static int64_t abs64(int64_t x)
{
    return x < 0 ? -x : x;
}

/* §6, F.5: the single-price auction that ends PREOPEN, AUCTION and HALTED.
 * Returns whether it traded. The caller cancels what is left of market
 * orders (cancel_markets) and sets the phase afterwards. */
static bool uncross(int sym)
{
    struct symbol *s = &symbols[sym];
    int64_t *cand = malloc((nlive + 1) * sizeof *cand);
    if (!cand) {
        perror("malloc");
        exit(2);
    }
    size_t nc = 0;
    bool mkt_buy = false, mkt_sell = false;
    for (size_t i = 0; i < nlive; i++) {
        const struct order *o = live[i];
        if (o->state != ST_RESTING || o->sym != sym)
            continue;
        if (o->type == T_MKT) {
            if (o->side == BUY)
                mkt_buy = true;
            else
                mkt_sell = true;
            continue;
        }
        bool seen = false;
        for (size_t j = 0; j < nc; j++)
            seen = seen || cand[j] == o->px;
        if (!seen)
            cand[nc++] = o->px;
    }
    int64_t refpx = 0;
    bool has_refpx = has_reference(s, &refpx);
    if (nc == 0 && mkt_buy && mkt_sell && has_refpx)
        cand[nc++] = refpx;

    /* Keep the candidates with the largest executable volume (> 0), then
     * the smallest |surplus|. */
    int64_t best_vol = 0, best_abs = 0;
    for (size_t i = 0; i < nc; i++) {
        int64_t b, sl;
        volumes_at(sym, cand[i], &b, &sl);
        int64_t vol = min64(b, sl), sur = abs64(b - sl);
        if (vol > best_vol || (vol == best_vol && vol > 0 && sur < best_abs)) {
            best_vol = vol;
            best_abs = sur;
        }
    }
    size_t nk = 0;
    bool all_buy = true, all_sell = true;
    for (size_t i = 0; i < nc && best_vol > 0; i++) {
        int64_t b, sl;
        volumes_at(sym, cand[i], &b, &sl);
        if (min64(b, sl) != best_vol || abs64(b - sl) != best_abs)
            continue;
        cand[nk++] = cand[i];
        all_buy = all_buy && b - sl > 0;
        all_sell = all_sell && b - sl < 0;
    }
    int64_t p = 0;
    for (size_t i = 0; i < nk; i++) {
        int64_t c = cand[i];
        bool better;
        if (i == 0)
            better = true;
        else if (all_buy) /* buy surplus everywhere: the highest */
            better = c > p;
        else if (all_sell) /* sell surplus everywhere: the lowest */
            better = c < p;
        else if (has_refpx && abs64(c - refpx) != abs64(p - refpx))
            better = abs64(c - refpx) < abs64(p - refpx); /* closest to ref */
        else
            better = c < p; /* then the lowest */
        if (better)
            p = c;
    }
    free(cand);

    if (nk > 0) {
        int64_t remaining = best_vol;
        while (remaining > 0) {
            struct order *b = best_executable(sym, BUY, p);
            struct order *sl = best_executable(sym, SELL, p);
            if (!b || !sl)
                break; /* not reached: both sides hold best_vol at p */
            int64_t q = min64(min64(displayed(b), displayed(sl)), remaining);
            uint64_t tid = next_tid++;
            fill(b, tid, p, q); /* an uncross has no aggressor: buy first */
            fill(sl, tid, p, q);
            after_trade(b);
            after_trade(sl);
            remaining -= q;
        }
        print_trade(s, p);
    }
    return nk > 0;
}

/* D.4, F.5: what is left of the symbol's market orders after an uncross
 * is canceled (MKT), in oid order. */
static void cancel_markets(int sym)
{
    for (size_t i = 0; i < nlive; i++) {
        struct order *o = live[i];
        if (o->state == ST_RESTING && o->sym == sym && o->type == T_MKT)
            cancel_order(o, "MKT");
    }
}

/* Entering CONTINUOUS from another phase (F.3, F.4, F.8). */
static void open_continuous(int sym)
{
    struct symbol *s = &symbols[sym];
    s->resume_pending = false;
    uncross(sym);
    cancel_markets(sym); /* H.12: whether or not the uncross traded */
    s->phase = PH_CONTINUOUS;
    /* H.11: the stop loop after an uncross takes the breaker reference
     * from the last trade after that uncross; D.6, F.7: its range of
     * trigger prices starts there too. */
    s->has_cb_ref = has_reference(s, &s->cb_ref);
    start_range(s);
    run_stops(sym);
}

/* G: one CANCELED per open order matching the filter, in oid order. */
static void cancel_where(const char *gw, int sym, bool close_expiry, const char *why)
{
    for (size_t i = 0; i < nlive; i++) {
        struct order *o = live[i];
        if (!is_open(o))
            continue;
        if (gw && strcmp(o->gw, gw) != 0)
            continue;
        if (sym >= 0 && o->sym != sym)
            continue;
        if (close_expiry) {
            /* F.3: only GTC limit orders and GTC pending stops survive the
             * close: every DAY order, resting or pending stop, every
             * resting market order, every pending IOC or FOK stop. */
            bool resting_mkt = o->state == ST_RESTING && o->type == T_MKT;
            if (o->tif == TIF_GTC && !resting_mkt)
                continue;
        }
        cancel_order(o, why);
    }
}

/* Any change of phase (F.3); the caller checked it is a change. */
static void set_phase(int sym, int to)
{
    struct symbol *s = &symbols[sym];
    /* H.14: any phase change drops a pending breaker resume. */
    s->resume_pending = false;
    if (to == PH_CONTINUOUS) {
        open_continuous(sym);
        return;
    }
    /* §6, H.13, F.3: leaving PREOPEN, AUCTION or HALTED for CLOSED or
     * PREOPEN uncrosses first (a closing auction from PREOPEN); market
     * remainders are canceled only when it traded; no stop loop outside
     * CONTINUOUS (D.6). */
    if (s->phase == PH_PREOPEN || s->phase == PH_AUCTION || s->phase == PH_HALTED) {
        if (uncross(sym))
            cancel_markets(sym);
    }
    s->phase = to;
    if (to == PH_CLOSED) /* §5.7, F.3: then the expiry */
        cancel_where(NULL, sym, true, "EXPIRED");
}

/* ------------------------------------------------------ client messages */

static int parse_enum(const char *v, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v, names[i]) == 0)
            return i;
    return -1;
}

static const char *const type_names[] = {"LMT", "MKT", "STP", "STL"};
static const char *const tif_names[] = {"DAY", "GTC", "IOC", "FOK"};
static const char *const stp_names[] = {"", "CN", "CO", "CB", "DC"};

static void on_new(const char *gw, const struct msg *m)
{
    const char *cl = get(m, "cl"), *sym = get(m, "sym"), *side = get(m, "side");
    const char *qty = get(m, "qty"), *px = get(m, "px"), *type = get(m, "type");
    const char *stop = get(m, "stop"), *tif = get(m, "tif"), *peak = get(m, "peak");
    const char *stp = get(m, "stp");

    /* A.10: MISSING_FIELD. */
    if (!cl || !sym || !side || !qty)
        return reject(gw, m, "MISSING_FIELD");
    int t = type ? parse_enum(type, type_names, 4) : T_LMT;
    if (t >= 0) {
        if ((t == T_LMT || t == T_STL) && !px)
            return reject(gw, m, "MISSING_FIELD");
        if ((t == T_STP || t == T_STL) && !stop)
            return reject(gw, m, "MISSING_FIELD");
    }

    /* A.6, B: BAD_VALUE, first class (malformed or not allowed). */
    struct decimal dpx = {0}, dstop = {0};
    int64_t q = 0, pk = 0;
    int ti = tif ? parse_enum(tif, tif_names, 4) : TIF_DAY;
    int si = stp ? parse_enum(stp, stp_names, 5) : STP_NONE;
    if (!valid_cl(cl) || !valid_sym(sym) || (strcmp(side, "B") != 0 && strcmp(side, "S") != 0) ||
        !parse_qty(qty, &q) || t < 0 || (px && !parse_price(px, &dpx)) ||
        (stop && !parse_price(stop, &dstop)) || ti < 0 || (peak && !parse_qty(peak, &pk)) ||
        (stp && si <= STP_NONE))
        return reject(gw, m, "BAD_VALUE");
    if ((px && (t == T_MKT || t == T_STP)) || (stop && (t == T_LMT || t == T_MKT)) ||
        (peak && (t != T_LMT || ti == TIF_IOC || ti == TIF_FOK)) || (peak && pk >= q))
        return reject(gw, m, "BAD_VALUE");

    int sx = find_symbol(sym);
    if (sx < 0)
        return reject(gw, m, "UNKNOWN_SYMBOL");
    struct symbol *s = &symbols[sx];

    /* B: BAD_VALUE, second class (tick, decimals, lot). */
    int64_t tpx = 0, tstop = 0;
    if ((px && !price_to_ticks(s, dpx, &tpx)) || (stop && !price_to_ticks(s, dstop, &tstop)) ||
        q % s->lot != 0 || (peak && pk % s->lot != 0))
        return reject(gw, m, "BAD_VALUE");
    if (gw_disabled(gw))
        return reject(gw, m, "GATEWAY_DISABLED");
    if (find_live(gw, cl))
        return reject(gw, m, "DUPLICATE_ID");
    if (s->phase == PH_HALTED)
        return reject(gw, m, "HALTED");
    if (s->phase == PH_CLOSED)
        return reject(gw, m, "PHASE");
    if ((s->phase == PH_PREOPEN || s->phase == PH_AUCTION) && (ti == TIF_IOC || ti == TIF_FOK))
        return reject(gw, m, "PHASE");
    if ((t == T_LMT || t == T_STL) && !collar_ok(s, tpx))
        return reject(gw, m, "COLLAR");

    struct order *o = calloc(1, sizeof *o);
    if (!o) {
        perror("calloc");
        exit(2);
    }
    o->oid = next_oid++;
    snprintf(o->gw, sizeof o->gw, "%s", gw);
    snprintf(o->cl, sizeof o->cl, "%s", cl);
    o->sym = sx;
    o->side = side[0] == 'B' ? BUY : SELL;
    o->type = t;
    o->tif = ti;
    o->stp = si;
    o->qty = o->leaves = q;
    o->px = tpx;
    o->stop = tstop;
    o->peak = pk;
    o->seq = next_seq++;
    add_live(o);
    emit(gw, "ACK cl=%s oid=%llu", o->cl, (unsigned long long)o->oid);

    if (t == T_STP || t == T_STL) {
        o->state = ST_PENDING_STOP; /* §5.5: stops rest off the book */
    } else if (s->phase == PH_CONTINUOUS) {
        execute_incoming(o);
    } else {
        rest(o); /* §6: PREOPEN and AUCTION: rest without matching */
    }
    run_stops(sx); /* D.6: a stop whose condition holds triggers after its ACK */
}

static void on_cancel(const char *gw, const struct msg *m)
{
    const char *cl = get(m, "cl");
    if (!cl)
        return reject(gw, m, "MISSING_FIELD");
    if (!valid_cl(cl))
        return reject(gw, m, "BAD_VALUE");
    struct order *o = find_live(gw, cl);
    if (!o)
        return reject(gw, m, "UNKNOWN_ORDER");
    cancel_order(o, "USER"); /* B: accepted in every phase, even disabled */
}

static void on_replace(const char *gw, const struct msg *m)
{
    const char *cl = get(m, "cl"), *qty = get(m, "qty"), *px = get(m, "px");
    if (!cl || (!qty && !px))
        return reject(gw, m, "MISSING_FIELD"); /* A.10 */
    int64_t q = 0;
    struct decimal dpx = {0};
    if (!valid_cl(cl) || (qty && !parse_qty(qty, &q)) || (px && !parse_price(px, &dpx)))
        return reject(gw, m, "BAD_VALUE");
    struct order *o = find_live(gw, cl);
    if (!o)
        return reject(gw, m, "UNKNOWN_ORDER");
    struct symbol *s = &symbols[o->sym];
    int64_t tpx = 0;
    if ((px && !price_to_ticks(s, dpx, &tpx)) || (qty && q % s->lot != 0))
        return reject(gw, m, "BAD_VALUE");
    if (o->state != ST_RESTING || o->type != T_LMT)
        return reject(gw, m, "BAD_VALUE"); /* D.3: limit orders only */
    if (gw_disabled(gw))
        return reject(gw, m, "GATEWAY_DISABLED");
    if (s->phase == PH_HALTED)
        return reject(gw, m, "HALTED");
    if (s->phase == PH_CLOSED)
        return reject(gw, m, "PHASE");
    if (px && !collar_ok(s, tpx))
        return reject(gw, m, "COLLAR");

    int64_t new_qty = qty ? q : o->qty;
    int64_t new_px = px ? tpx : o->px;
    if (new_qty <= o->cum) /* §3, D.3: a total at or below cum cancels */
        return cancel_order(o, "REPLACE");
    /* §3: a price change or quantity increase loses time priority. */
    bool loses = new_px != o->px || new_qty > o->qty;
    o->qty = new_qty;
    o->leaves = new_qty - o->cum;
    o->px = new_px;
    if (o->peak)
        o->display = loses ? min64(o->peak, o->leaves) : min64(o->display, o->leaves);
    if (loses)
        o->seq = next_seq++;
    char buf[48];
    emit(gw, "REPLACED cl=%s oid=%llu qty=%lld px=%s leaves=%lld", o->cl,
         (unsigned long long)o->oid, (long long)o->qty, fmt_px(s, o->px, buf, sizeof buf),
         (long long)o->leaves);
    if (loses && s->phase == PH_CONTINUOUS) {
        /* D.3: matches as an aggressor right after REPLACED. */
        o->state = ST_INFLIGHT;
        match(o);
        run_stops(o->sym);
    }
}

static void on_masscancel(const char *gw, const struct msg *m)
{
    const char *sym = get(m, "sym");
    int sx = -1;
    if (sym && !valid_sym(sym))
        return reject(gw, m, "BAD_VALUE");
    if (sym && (sx = find_symbol(sym)) < 0)
        return reject(gw, m, "UNKNOWN_SYMBOL");
    cancel_where(gw, sx, false, "MASS"); /* G */
}

static void on_login(const char *gw, const struct msg *m)
{
    const char *g = get(m, "gw"), *token = get(m, "token");
    if (!g)
        return reject(gw, m, "MISSING_FIELD");
    if (!valid_gw(g) || (token && !valid_token(token)))
        return reject(gw, m, "BAD_VALUE");
    if (strcmp(g, gw) != 0)
        return reject(gw, m, "AUTH"); /* H.2: only the session's own id */
    emit(gw, "LOGGEDIN gw=%s", gw);   /* C.1 */
}

/* ---------------------------------------------------- operator messages */

static void on_symbol(const struct msg *m)
{
    const char *sym = get(m, "sym"), *tick = get(m, "tick"), *lot = get(m, "lot");
    const char *ref = get(m, "ref"), *band = get(m, "band"), *cbb = get(m, "cb_band");
    const char *cbms = get(m, "cb_ms");
    if (!sym || !tick)
        return reject("OPS", m, "MISSING_FIELD");
    struct decimal dt, dref = {0};
    int64_t l = 1, b = 0, cb = 0, ms = 5000; /* F.2 defaults */
    if (!valid_sym(sym) || !parse_price(tick, &dt) || (lot && !parse_qty(lot, &l)) ||
        (ref && !parse_price(ref, &dref)) || (band && !parse_pct(band, &b)) ||
        (cbb && !parse_pct(cbb, &cb)) || (cbms && !parse_int(cbms, &ms)))
        return reject("OPS", m, "BAD_VALUE");
    struct symbol probe = {.decimals = dt.ndec, .tick_units = dt.mant};
    int64_t tref = 0;
    if (ref && !price_to_ticks(&probe, dref, &tref))
        return reject("OPS", m, "BAD_VALUE");
    int sx = find_symbol(sym);
    if (sx >= 0) {
        struct symbol *s = &symbols[sx];
        /* F.2: tick and lot cannot change. */
        if (s->decimals != dt.ndec || s->tick_units != dt.mant || s->lot != l)
            return reject("OPS", m, "BAD_VALUE");
    } else {
        if (nsymbols == MAX_SYMBOLS)
            return reject("OPS", m, "BAD_VALUE");
        sx = nsymbols++;
        struct symbol *s = &symbols[sx];
        memset(s, 0, sizeof *s);
        snprintf(s->name, sizeof s->name, "%s", sym);
        s->decimals = dt.ndec;
        s->tick_units = dt.mant;
        s->lot = l;
        s->phase = PH_CONTINUOUS; /* F.1 */
    }
    struct symbol *s = &symbols[sx];
    s->has_ref = ref != NULL;
    s->ref = tref;
    s->band_bp = b;
    s->cb_bp = cb;
    s->cb_ms = ms;
}

static const char *const phase_names[] = {"CLOSED", "PREOPEN", "CONTINUOUS"};

static void on_phase(const struct msg *m)
{
    const char *sym = get(m, "sym"), *ph = get(m, "phase");
    if (!sym || !ph)
        return reject("OPS", m, "MISSING_FIELD");
    int to = parse_enum(ph, phase_names, 3);
    if (!valid_sym(sym) || to < 0)
        return reject("OPS", m, "BAD_VALUE");
    int sx = find_symbol(sym);
    if (sx < 0)
        return reject("OPS", m, "UNKNOWN_SYMBOL");
    if (symbols[sx].phase != to) /* F.3: to the current phase, nothing */
        set_phase(sx, to);
}

static void on_halt_resume(const struct msg *m, bool halt)
{
    const char *sym = get(m, "sym");
    if (!sym)
        return reject("OPS", m, "MISSING_FIELD");
    if (!valid_sym(sym))
        return reject("OPS", m, "BAD_VALUE");
    int sx = find_symbol(sym);
    if (sx < 0)
        return reject("OPS", m, "UNKNOWN_SYMBOL");
    struct symbol *s = &symbols[sx];
    if (halt) {
        if (s->phase == PH_HALTED)
            return; /* H.7: HALT while HALTED does nothing */
        s->halted_from = s->phase;
        s->phase = PH_HALTED;
        s->resume_pending = false;
        return;
    }
    if (s->phase != PH_HALTED)
        return reject("OPS", m, "PHASE");
    if (s->halted_from == PH_CLOSED)
        s->phase = PH_CLOSED;
    else
        open_continuous(sx); /* F.4: uncross, then CONTINUOUS */
}

static void on_gateway(const struct msg *m)
{
    const char *g = get(m, "gw"), *en = get(m, "enabled");
    int64_t e = 0;
    if (!g || !en)
        return reject("OPS", m, "MISSING_FIELD");
    if (!valid_gw(g) || !parse_int(en, &e) || e > 1)
        return reject("OPS", m, "BAD_VALUE");
    int at = -1;
    for (int i = 0; i < ndisabled; i++)
        if (strcmp(disabled_gws[i], g) == 0)
            at = i;
    if (e == 0 && at < 0) {
        if (ndisabled == MAX_GWS)
            return reject("OPS", m, "BAD_VALUE");
        snprintf(disabled_gws[ndisabled++], sizeof disabled_gws[0], "%s", g);
    } else if (e == 1 && at >= 0) {
        memcpy(disabled_gws[at], disabled_gws[--ndisabled], sizeof disabled_gws[0]);
    }
}

/* F.8: every due breaker resume fires, earliest deadline first, ties in the
 * order the symbols were defined. */
static void on_tick(const struct msg *m)
{
    const char *ms = get(m, "ms");
    int64_t d = 0;
    if (!ms)
        return reject("OPS", m, "MISSING_FIELD");
    if (!parse_int(ms, &d))
        return reject("OPS", m, "BAD_VALUE");
    now_ms = add_saturating(now_ms, (uint64_t)d);
    for (;;) {
        int due = -1;
        for (int i = 0; i < nsymbols; i++) {
            struct symbol *s = &symbols[i];
            if (s->resume_pending && s->resume_at <= now_ms &&
                (due < 0 || s->resume_at < symbols[due].resume_at))
                due = i;
        }
        if (due < 0)
            break;
        open_continuous(due);
    }
}

/* -------------------------------------------------------------- dispatch */

static void handle_message(const char *gw, char *text)
{
    struct msg m;
    tokenize(text, &m);
    if (!m.type)
        return; /* only spaces: no message */
    const struct msgdef *d = find_msgdef(m.type);
    if (!syntax_ok(&m, d))
        return reject(gw, &m, "SYNTAX");
    /* C.4: operator messages only from OPS, client messages never,
     * except PING, which every session may send. */
    bool from_ops = strcmp(gw, "OPS") == 0;
    if ((d->cls == M_OPERATOR) != from_ops && strcmp(d->type, "PING") != 0)
        return reject(gw, &m, "AUTH");

    /* F.7: the breaker reference of every symbol, fixed for this message;
     * D.6: the range of stop trigger prices starts at the last trade. */
    for (int i = 0; i < nsymbols; i++) {
        symbols[i].has_cb_ref = has_reference(&symbols[i], &symbols[i].cb_ref);
        start_range(&symbols[i]);
    }

    const char *t = m.type;
    if (!strcmp(t, "NEW"))
        on_new(gw, &m);
    else if (!strcmp(t, "CANCEL"))
        on_cancel(gw, &m);
    else if (!strcmp(t, "REPLACE"))
        on_replace(gw, &m);
    else if (!strcmp(t, "MASSCANCEL"))
        on_masscancel(gw, &m);
    else if (!strcmp(t, "LOGIN"))
        on_login(gw, &m);
    else if (!strcmp(t, "PING"))
        emit(gw, "PONG");
    else if (!strcmp(t, "LOGOUT") || !strcmp(t, "DISCONNECT"))
        cancel_where(gw, -1, false, "DISCONNECT"); /* C.2, C.3 */
    else if (!strcmp(t, "SYMBOL"))
        on_symbol(&m);
    else if (!strcmp(t, "PHASE"))
        on_phase(&m);
    else if (!strcmp(t, "HALT"))
        on_halt_resume(&m, true);
    else if (!strcmp(t, "RESUME"))
        on_halt_resume(&m, false);
    else if (!strcmp(t, "GATEWAY"))
        on_gateway(&m);
    else if (!strcmp(t, "TICK"))
        on_tick(&m);
}

/* `--check`: verifies invariants 2 and 3 after every message, so the model
 * can be exercised on generated streams without an engine. */
static bool check_invariants;

static void verify_invariants(unsigned long lineno)
{
    const char *broken = NULL;
    for (size_t i = 0; i < nlive && !broken; i++) {
        const struct order *o = live[i];
        const struct symbol *s = &symbols[o->sym];
        if (o->qty != o->cum + o->leaves || o->leaves <= 0)
            broken = "qty = cum + leaves, leaves > 0";
        else if (o->state == ST_INFLIGHT)
            broken = "no order in flight between messages";
        else if (o->peak && o->state == ST_RESTING &&
                 (o->display < 1 || o->display > min64(o->peak, o->leaves)))
            broken = "1 <= display <= min(peak, leaves)";
        else if (i > 0 && live[i - 1]->oid >= o->oid)
            broken = "live orders in oid order";
        else if (s->phase == PH_CONTINUOUS && o->state == ST_RESTING && o->type == T_MKT)
            broken = "no resting market order in CONTINUOUS";
        else if (s->phase == PH_CONTINUOUS && s->has_range && o->state == ST_PENDING_STOP &&
                 (o->side == BUY ? s->range_hi >= o->stop : s->range_lo <= o->stop))
            broken = "no pending stop reached in CONTINUOUS";
    }
    for (int i = 0; i < nsymbols && !broken; i++) {
        struct order *b = best_resting(i, BUY), *a = best_resting(i, SELL);
        if (symbols[i].phase == PH_CONTINUOUS && a && b && b->px >= a->px)
            broken = "book not crossed in CONTINUOUS";
    }
    if (broken) {
        fprintf(stderr, "em-refmodel: invariant broken after line %lu: %s\n", lineno, broken);
        exit(3);
    }
}

/* §8, C.6, C.7: `<gw> <message>`; a bad gateway id or no message → stderr. */
static void handle_line(char *line, size_t len, unsigned long lineno)
{
    if (len > 0 && line[len - 1] == '\n')
        line[--len] = 0;
    if (len > 0 && line[len - 1] == '\r') /* §1 */
        line[--len] = 0;
    if (len == 0)
        return; /* §1: empty lines are ignored */
    char *sp = memchr(line, ' ', len);
    if (sp)
        *sp = 0;
    if (!valid_gw(line) || !sp || sp[1] == 0) {
        fprintf(stderr, "em-refmodel: line %lu skipped: no valid gateway id and message\n", lineno);
        return;
    }
    char *text = sp + 1;
    if (strlen(text) != len - (size_t)(text - line)) {
        fprintf(stderr, "em-refmodel: line %lu skipped: NUL byte\n", lineno);
        return;
    }
    if (len - (size_t)(text - line) > MAX_MSG_LEN) {
        emit(line, "REJECT reason=LINE_TOO_LONG");
        return;
    }
    handle_message(line, text);
    compact_live();
    if (check_invariants)
        verify_invariants(lineno);
}

int main(int argc, char **argv)
{
    static const char usage[] =
        "Usage: em-refmodel [--check] [FILE | -]\n"
        "\n"
        "The reference model of the matching rules (docs/alf.md), written apart from\n"
        "the engine: replay FILE (stdin when - or absent) and print the events, in\n"
        "edumatcher-replay's format; --check verifies the model's invariants after\n"
        "every line.\n"
        "\n"
        "  -h, --help   print this and exit\n"
        "  --version    print the version and exit\n";
    FILE *in = stdin;
    int code = core_proc_early("em-refmodel", usage, argc, argv);
    if (code >= 0)
        return code;
    if (argc > 1 && strcmp(argv[1], "--check") == 0) {
        check_invariants = true;
        argc--;
        argv++;
    }
    if (argc > 2)
        return core_proc_bad_usage("em-refmodel", "at most one FILE");
    if (argc == 2 && argv[1][0] == '-' && argv[1][1])
        return core_proc_bad_usage("em-refmodel", "unknown option '%s'", argv[1]);
    if (argc == 2 && strcmp(argv[1], "-") != 0) {
        in = fopen(argv[1], "r");
        if (!in) {
            perror(argv[1]);
            return 1;
        }
    }
    static char outbuf[1 << 16];
    setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    unsigned long lineno = 0;
    while ((n = getline(&line, &cap, in)) >= 0)
        handle_line(line, (size_t)n, ++lineno);
    free(line);
    for (size_t i = 0; i < nlive; i++)
        free(live[i]);
    free(live);
    if (in != stdin)
        fclose(in);
    return fflush(stdout) == 0 ? 0 : 1;
}
