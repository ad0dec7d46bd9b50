/*
 * em-gen: a seeded generator of random ALF replay streams (docs/alf.md §8)
 * for the differential test. Same seed and options → same stream, byte for
 * byte (the only randomness is the splitmix64 generator below).
 *
 * The stream exercises everything the replay tool can see: several symbols
 * with different ticks, lots, decimals, collars and breakers; several
 * gateways; every order type, TIF, iceberg, stop and STP mode; replaces
 * (up, down, to or below the filled quantity, prices that cross); cancels
 * of known and unknown orders; mass cancels, disconnects, logouts; phase
 * changes, halts, gateway switches, clock ticks; and a small rate of faulty
 * lines that reaches every REJECT code the replay tool can produce
 * (NOT_LOGGED_IN and RATE_LIMIT cannot happen in replay, C.1), event
 * types sent as input (A.7) included.
 *
 * Invariants that keep the test fast and the trades frequent:
 *  1. Prices cluster around a per-symbol mid that walks slowly and reverts
 *     to the symbol's reference, so that most orders cross or rest near the
 *     touch.
 *  2. Each gateway remembers its last RING_CAP client order ids; before it
 *     forgets one it sends a CANCEL for it, so at most GATEWAYS × RING_CAP
 *     orders are ever live.
 *
 * Usage: em-gen --seed N --messages M [--without FEATURE]...
 * FEATURE is one of: stops icebergs stp breaker malformed phases replace
 * (documented in tests/differential/README.md).
 */
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/proc.h"

#define RING_CAP 60

/* ------------------------------------------------------------ randomness */

static uint64_t rng_state;

static uint64_t next_u64(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static int64_t rnd(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(next_u64() % (uint64_t)(hi - lo + 1));
}

/* True with probability per_mille / 1000. */
static bool chance(int per_mille)
{
    return rnd(0, 999) < per_mille;
}

/* ---------------------------------------------------------------- model */

struct gsym {
    const char *name;
    const char *tick;   /* as sent; decimals = digits after the point */
    int decimals;       /* must match `tick` */
    int64_t tick_units; /* tick in units of 10^-decimals */
    int64_t lot;
    int64_t ref;         /* in ticks, 0: none */
    const char *band;    /* NULL: no collar */
    const char *cb_band; /* NULL: no breaker */
    int64_t cb_ms;
    int64_t spread; /* typical distance from the mid, in ticks */
    int64_t mid;    /* in ticks */
    int phase;      /* what the generator last set: 0 CLOSED 1 PREOPEN 2 CONTINUOUS */
    bool halted;
    long since_change;
};

static struct gsym syms[] = {
    {"AAA", "0.01", 2, 1, 1, 10000, "10", "5", 1000, 15, 0, 2, false, 0},
    {"BB.X", "0.5", 1, 5, 10, 100, "20", NULL, 0, 2, 0, 2, false, 0},
    {"C9", "5", 0, 5, 100, 200, NULL, "2.5", 300, 2, 0, 2, false, 0},
    {"DDD", "0.001", 3, 1, 1, 0, NULL, NULL, 0, 25, 25000, 2, false, 0},
    {"E.1", "0.25", 2, 25, 5, 80, "15", "7.5", 2000, 2, 0, 2, false, 0},
};
#define NSYMS ((int)(sizeof syms / sizeof syms[0]))

static const char *const gws[] = {"G1", "G2", "G3", "GW_4", "T5"};
#define NGWS ((int)(sizeof gws / sizeof gws[0]))

struct ring_entry {
    char cl[33];
    int sym;
    bool stop; /* a stop order: a REPLACE of it is BAD_VALUE while pending */
};

struct gwstate {
    struct ring_entry ring[RING_CAP];
    int n; /* oldest first */
    bool disabled;
    unsigned long next_cl;
};

static struct gwstate gwst[NGWS];

/* A profile, chosen by the seed, shifts the mix so that different seeds
 * stress different rules: few gateways make self-trades frequent, more
 * stops make longer cascades, more phase changes more auctions. */
static struct {
    int gateways;     /* how many of gws[] trade */
    int stop_pct;     /* share of NEW that are stops */
    int iceberg_pm;   /* per mille of eligible limit orders with a peak */
    int stp_pm;       /* per mille of NEW with stp= */
    int extra_phases; /* per mille of extra phase changes */
} prof;

static void choose_profile(unsigned long long seed)
{
    switch (seed % 4) {
    case 0:
        prof.gateways = 5, prof.stop_pct = 17, prof.iceberg_pm = 180, prof.stp_pm = 250;
        prof.extra_phases = 0;
        break;
    case 1:
        prof.gateways = 2, prof.stop_pct = 12, prof.iceberg_pm = 300, prof.stp_pm = 600;
        prof.extra_phases = 0;
        break;
    case 2:
        prof.gateways = 4, prof.stop_pct = 30, prof.iceberg_pm = 150, prof.stp_pm = 200;
        prof.extra_phases = 25;
        break;
    default:
        prof.gateways = 3, prof.stop_pct = 35, prof.iceberg_pm = 400, prof.stp_pm = 350;
        prof.extra_phases = 5;
        break;
    }
}

static int pick_gw(void)
{
    return (int)rnd(0, prof.gateways - 1);
}

static bool without_stops, without_icebergs, without_stp, without_breaker, without_malformed,
    without_phases, without_replace;

static long remaining; /* lines still to write */

static void line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void line(const char *fmt, ...)
{
    va_list ap;
    if (remaining <= 0)
        return; /* exactly --messages lines */
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    remaining--;
}

/* A price in ticks printed with the symbol's decimals (sometimes with
 * fewer trailing zeros or a leading zero, which are both valid, A.2). */
static const char *price(const struct gsym *s, int64_t ticks, char *buf, size_t len)
{
    if (ticks < 1)
        ticks = 1;
    int64_t units = ticks * s->tick_units;
    int64_t scale = 1;
    for (int i = 0; i < s->decimals; i++)
        scale *= 10;
    const char *lead = chance(10) ? "0" : "";
    if (s->decimals == 0) {
        snprintf(buf, len, "%s%lld", lead, (long long)units);
        return buf;
    }
    int64_t ip = units / scale, fp = units % scale;
    int dec = s->decimals;
    if (chance(200))
        while (dec > 1 && fp % 10 == 0) { /* `100.5` for `100.50` */
            fp /= 10;
            dec--;
        }
    if (chance(100) && fp == 0) {
        snprintf(buf, len, "%s%lld", lead, (long long)ip);
        return buf;
    }
    snprintf(buf, len, "%s%lld.%0*lld", lead, (long long)ip, dec, (long long)fp);
    return buf;
}

static int64_t lots(const struct gsym *s, int64_t lo, int64_t hi)
{
    return s->lot * rnd(lo, hi);
}

/* Invariant 1: a slow random walk that reverts to the reference. */
static void walk_mids(void)
{
    for (int i = 0; i < NSYMS; i++) {
        struct gsym *s = &syms[i];
        int64_t center = s->ref ? s->ref : 25000;
        if (!chance(30))
            continue;
        int64_t step = rnd(1, s->spread > 4 ? s->spread / 3 : 1);
        int64_t dev = s->mid - center;
        int64_t limit = center * 6 / 100 + 1;
        if (dev > limit || (dev > 0 && chance(550)))
            s->mid -= step;
        else if (dev < -limit || chance(500))
            s->mid += step;
        else
            s->mid -= step;
        if (s->mid < 2 * s->spread + 2)
            s->mid = 2 * s->spread + 2;
    }
}

/* A limit price near the mid: a buy reaches up to one spread past the mid
 * (so it often crosses), a sell likewise down; now and then a price far
 * away, to reach the collar and the breaker. */
static int64_t limit_ticks(const struct gsym *s, bool buy)
{
    int64_t off;
    if (chance(25))
        off = rnd(-s->mid * 15 / 100, s->mid * 15 / 100);
    else
        off = rnd(-2 * s->spread, s->spread);
    return buy ? s->mid + off : s->mid - off;
}

static void new_cl(int g, char *cl, size_t len)
{
    /* Every character class of a cl (§2) appears. */
    static const char *const prefixes[] = {"c", "o-", "x.b_", "Zq"};
    snprintf(cl, len, "%s%lu", prefixes[rnd(0, 3)], gwst[g].next_cl++);
}

/* Invariant 2: remember a cl, canceling the oldest when the ring is full. */
static void remember(int g, const char *cl, int sym, bool stop)
{
    struct gwstate *w = &gwst[g];
    if (w->n == RING_CAP) {
        line("%s CANCEL cl=%s", gws[g], w->ring[0].cl);
        memmove(&w->ring[0], &w->ring[1], (RING_CAP - 1) * sizeof w->ring[0]);
        w->n--;
    }
    snprintf(w->ring[w->n].cl, sizeof w->ring[0].cl, "%s", cl);
    w->ring[w->n].sym = sym;
    w->ring[w->n].stop = stop;
    w->n++;
}

static void forget(int g, int at)
{
    struct gwstate *w = &gwst[g];
    memmove(&w->ring[at], &w->ring[at + 1], (size_t)(w->n - at - 1) * sizeof w->ring[0]);
    w->n--;
}

/* ---------------------------------------------------------- valid lines */

static void gen_new(void)
{
    int g = pick_gw(), si = (int)rnd(0, NSYMS - 1);
    struct gsym *s = &syms[si];
    bool buy = chance(500);
    char cl[33], f[512], buf[48];
    int type_roll = (int)rnd(0, 99);
    int stops = prof.stop_pct;
    int type = type_roll < 92 - stops        ? 0
               : type_roll < 100 - stops     ? 1
               : type_roll < 100 - stops / 2 ? 2
                                             : 3;
    if (without_stops && type >= 2)
        type = 0;
    static const char *const tn[] = {"LMT", "MKT", "STP", "STL"};
    int tif_roll = (int)rnd(0, 99);
    int tif = tif_roll < 55 ? 0 : tif_roll < 80 ? 1 : tif_roll < 92 ? 2 : 3;
    static const char *const tifn[] = {"DAY", "GTC", "IOC", "FOK"};
    /* Most orders are small so that books stay a few orders deep. */
    int64_t qty = chance(100) ? lots(s, 1, 200) : lots(s, 1, 20);

    new_cl(g, cl, sizeof cl);
    if (chance(15) && gwst[g].n > 0) /* DUPLICATE_ID when still live */
        snprintf(cl, sizeof cl, "%s", gwst[g].ring[rnd(0, gwst[g].n - 1)].cl);

    int n = snprintf(f, sizeof f, "%s NEW cl=%s sym=%s side=%s qty=%s%lld", gws[g], cl, s->name,
                     buy ? "B" : "S", chance(10) ? "00" : "", (long long)qty);
    if (type != 0 || chance(500))
        n += snprintf(f + n, sizeof f - n, " type=%s", tn[type]);
    if (type == 0 || type == 3) {
        int64_t px = limit_ticks(s, buy);
        if (type == 3) /* stop-limit: a limit a little beyond the stop */
            px = s->mid + (buy ? 1 : -1) * rnd(0, 2 * s->spread);
        n += snprintf(f + n, sizeof f - n, " px=%s", price(s, px, buf, sizeof buf));
    }
    if (type >= 2) {
        /* Stops around the mid: some hold on entry and trigger at once. */
        int64_t off = rnd(-s->spread, 3 * s->spread);
        int64_t stop = buy ? s->mid + off : s->mid - off;
        n += snprintf(f + n, sizeof f - n, " stop=%s", price(s, stop, buf, sizeof buf));
    }
    if (tif != 0 || chance(300))
        n += snprintf(f + n, sizeof f - n, " tif=%s", tifn[tif]);
    if (!without_icebergs && type == 0 && tif < 2 && qty / s->lot >= 2 && chance(prof.iceberg_pm))
        n += snprintf(f + n, sizeof f - n, " peak=%lld", (long long)lots(s, 1, qty / s->lot - 1));
    if (!without_stp && chance(prof.stp_pm)) {
        static const char *const stpn[] = {"CN", "CO", "CB", "DC"};
        n += snprintf(f + n, sizeof f - n, " stp=%s", stpn[rnd(0, 3)]);
    }
    (void)n;
    line("%s", f);
    if (tif < 2 && type != 1)
        remember(g, cl, si, type >= 2);
}

/* Recent orders are the ones most likely still open. */
static int pick_recent(const struct gwstate *w)
{
    if (chance(700))
        return w->n - 1 - (int)rnd(0, w->n - 1 < 5 ? w->n - 1 : 5);
    return (int)rnd(0, w->n - 1);
}

static void gen_cancel(void)
{
    int g = pick_gw();
    struct gwstate *w = &gwst[g];
    if (w->n == 0 || chance(80)) {
        line("%s CANCEL cl=nope%lld", gws[g], (long long)rnd(0, 999));
        return;
    }
    int at = pick_recent(w);
    line("%s CANCEL cl=%s", gws[g], w->ring[at].cl);
    forget(g, at);
}

static void gen_replace(void)
{
    int g = pick_gw();
    struct gwstate *w = &gwst[g];
    if (w->n == 0)
        return gen_cancel();
    int at = pick_recent(w);
    struct gsym *s = &syms[w->ring[at].sym];
    char buf[48], f[256];
    int n = snprintf(f, sizeof f, "%s REPLACE cl=%s", gws[g], w->ring[at].cl);
    int what = (int)rnd(0, 2); /* qty, px, both */
    if (what != 1) {
        /* Small totals reach "at or below the filled quantity" too. */
        int64_t q = chance(200) ? lots(s, 1, 3) : lots(s, 1, 25);
        n += snprintf(f + n, sizeof f - n, " qty=%lld", (long long)q);
    }
    if (what != 0) {
        bool buy = chance(500); /* the side is unknown here: any near price */
        n +=
            snprintf(f + n, sizeof f - n, " px=%s", price(s, limit_ticks(s, buy), buf, sizeof buf));
    }
    (void)n;
    line("%s", f);
}

static void gen_phase_op(void)
{
    int si = (int)rnd(0, NSYMS - 1);
    struct gsym *s = &syms[si];
    static const char *const pn[] = {"CLOSED", "PREOPEN", "CONTINUOUS"};
    if (s->halted) {
        if (chance(800)) {
            line("OPS RESUME sym=%s", s->name);
            if (s->phase != 0)
                s->phase = 2;
        } else {
            s->phase = (int)rnd(0, 2);
            line("OPS PHASE sym=%s phase=%s", s->name, pn[s->phase]);
        }
        s->halted = false;
        s->since_change = 0;
        return;
    }
    int to;
    if (s->phase == 2) {
        if (chance(250)) {
            line("OPS HALT sym=%s", s->name);
            s->halted = true;
            s->since_change = 0;
            return;
        }
        to = chance(600) ? 1 : chance(100) ? 2 : 0;
    } else if (s->phase == 1) {
        to = chance(750) ? 2 : 0;
    } else {
        to = chance(550) ? 1 : 2;
    }
    line("OPS PHASE sym=%s phase=%s", s->name, pn[to]);
    s->phase = to;
    s->since_change = 0;
}

static void gen_symbol_redefinition(void)
{
    struct gsym *s = &syms[rnd(0, NSYMS - 1)];
    char buf[48], f[256];
    int n = snprintf(f, sizeof f, "OPS SYMBOL sym=%s tick=%s lot=%lld", s->name, s->tick,
                     (long long)s->lot);
    /* F.2 leaves open whether absent fields keep their value: a
     * redefinition always sends every field. */
    n += snprintf(f + n, sizeof f - n, " ref=%s band=%lld cb_band=%lld.5 cb_ms=%lld",
                  price(s, s->mid, buf, sizeof buf), (long long)rnd(5, 30), (long long)rnd(2, 9),
                  (long long)rnd(100, 3000));
    (void)n;
    line("%s", f);
}

static void define_symbols(void)
{
    for (int i = 0; i < NSYMS; i++) {
        struct gsym *s = &syms[i];
        char buf[48], f[256];
        if (s->ref)
            s->mid = s->ref;
        int n = snprintf(f, sizeof f, "OPS SYMBOL sym=%s tick=%s", s->name, s->tick);
        if (s->lot != 1 || chance(500))
            n += snprintf(f + n, sizeof f - n, " lot=%lld", (long long)s->lot);
        if (s->ref)
            n += snprintf(f + n, sizeof f - n, " ref=%s", price(s, s->ref, buf, sizeof buf));
        if (s->band)
            n += snprintf(f + n, sizeof f - n, " band=%s", s->band);
        if (s->cb_band && !without_breaker)
            n += snprintf(f + n, sizeof f - n, " cb_band=%s cb_ms=%lld", s->cb_band,
                          (long long)s->cb_ms);
        (void)n;
        line("%s", f);
    }
}

/* ------------------------------------------------------- faulty lines */

/* A NEW with two or three faults of different classes, so that the order
 * in which faults are reported (§4, B) is exercised, not just each fault. */
static void gen_multi_fault(int g)
{
    struct gsym *s = &syms[rnd(0, NSYMS - 1)];
    char cl[33], qty[32], px[64], buf[48], sym[16], extra[64] = "", peak[48] = "";
    const char *side = chance(500) ? " side=B" : " side=S", *type = "";
    new_cl(g, cl, sizeof cl);
    snprintf(sym, sizeof sym, "%s", s->name);
    snprintf(qty, sizeof qty, "%lld", (long long)lots(s, 1, 9));
    snprintf(px, sizeof px, " px=%s", price(s, s->mid, buf, sizeof buf));
    for (int i = 0, n = (int)rnd(2, 3); i < n; i++) {
        switch (rnd(0, 9)) {
        case 0:
            snprintf(extra, sizeof extra, " foo=1"); /* SYNTAX */
            break;
        case 1:
            side = ""; /* MISSING_FIELD */
            break;
        case 2:
            snprintf(qty, sizeof qty, "abc"); /* BAD_VALUE, first class */
            break;
        case 3:
            snprintf(sym, sizeof sym, "ZZZ"); /* UNKNOWN_SYMBOL */
            break;
        case 4: /* BAD_VALUE, second class: one decimal too many */
            snprintf(px, sizeof px, " px=%s%s", price(s, s->mid, buf, sizeof buf),
                     s->decimals ? "1" : ".5");
            break;
        case 5: /* BAD_VALUE, second class (lot), or first class (zero) */
            snprintf(qty, sizeof qty, "%lld", s->lot > 1 ? (long long)s->lot + 1 : 0LL);
            break;
        case 6: /* DUPLICATE_ID when that order is still live */
            if (gwst[g].n > 0)
                snprintf(cl, sizeof cl, "%s", gwst[g].ring[gwst[g].n - 1].cl);
            break;
        case 7: /* COLLAR, where the symbol has one */
            snprintf(px, sizeof px, " px=%s", price(s, s->mid * 2, buf, sizeof buf));
            break;
        case 8: /* a malformed type: no MISSING_FIELD for the price (A.10) */
            type = " type=LIMIT";
            px[0] = 0;
            break;
        default: /* peak >= qty: BAD_VALUE of the first class (H.5) */
            snprintf(peak, sizeof peak, " peak=%s", qty);
            break;
        }
    }
    line("%s NEW cl=%s sym=%s%s qty=%s%s%s%s%s", gws[g], cl, sym, side, qty, type, px, peak, extra);
}

static void gen_faulty(void)
{
    int g = pick_gw();
    const char *gw = gws[g];
    struct gsym *s = &syms[rnd(0, NSYMS - 1)];
    char buf[48];
    const char *p = price(s, s->mid, buf, sizeof buf);
    long c = (long)rnd(0, 99999);
    switch (rnd(0, 62)) {
    case 0: /* SYNTAX: unknown or lower-case type */
        line("%s %s cl=f%ld", gw, chance(500) ? "FOO" : "new", c);
        break;
    case 1: /* SYNTAX: token without '=' */
        line("%s NEW cl=f%ld sym=%s side=B qty=%lld px=%s oops", gw, c, s->name, (long long)s->lot,
             p);
        break;
    case 2: /* SYNTAX: duplicate key */
        line("%s NEW cl=f%ld sym=%s side=B qty=%lld qty=%lld px=%s", gw, c, s->name,
             (long long)s->lot, (long long)s->lot, p);
        break;
    case 3: /* SYNTAX: unknown key, or a key allowed elsewhere only */
        line("%s %s cl=f%ld %s=1", gw, chance(500) ? "NEW" : "CANCEL", c,
             chance(500) ? "foo" : "sym");
        break;
    case 4: /* MISSING_FIELD */
    {
        int v = (int)rnd(0, 6);
        long long l = (long long)s->lot;
        if (v == 0)
            line("%s NEW sym=%s side=B qty=%lld px=%s", gw, s->name, l, p);
        else if (v == 1)
            line("%s NEW cl=f%ld side=S qty=1 px=1", gw, c);
        else if (v == 2)
            line("%s NEW cl=f%ld sym=%s qty=%lld px=%s", gw, c, s->name, l, p);
        else if (v == 3)
            line("%s NEW cl=f%ld sym=%s side=B px=%s", gw, c, s->name, p);
        else if (v == 4)
            line("%s NEW cl=f%ld sym=%s side=B qty=%lld", gw, c, s->name, l);
        else if (v == 5)
            line("%s NEW cl=f%ld sym=%s side=B qty=%lld type=STP", gw, c, s->name, l);
        else
            line("%s NEW cl=f%ld sym=%s side=S qty=%lld type=STL stop=%s", gw, c, s->name, l, p);
        break;
    }
    case 5: /* BAD_VALUE, malformed quantities */
    {
        static const char *const bad[] = {"0",   "-5", "1000000001", "0000000000000000001",
                                          "abc", "",   "1.0"};
        line("%s NEW cl=f%ld sym=%s side=B qty=%s px=%s", gw, c, s->name, bad[rnd(0, 6)], p);
        break;
    }
    case 6: /* BAD_VALUE, malformed prices */
    {
        static const char *const bad[] = {
            ".5", "5.", "-1", "0", "0.00", "1e3", "", "1..2", "1234567890123456789"};
        line("%s NEW cl=f%ld sym=%s side=S qty=%lld px=%s", gw, c, s->name, (long long)s->lot,
             bad[rnd(0, 8)]);
        break;
    }
    case 7: /* BAD_VALUE, malformed enums */
    {
        static const char *const bad[] = {
            "side=X",        "side=b",      "side=B tif=DAY2", "side=B type=LIMIT",
            "side=B stp=XX", "side=B stp=", "side=B tif="};
        line("%s NEW cl=f%ld sym=%s %s qty=%lld px=%s", gw, c, s->name, bad[rnd(0, 6)],
             (long long)s->lot, p);
        break;
    }
    case 8: /* BAD_VALUE, malformed cl or symbol */
    {
        static const char *const bad[] = {"cl=", "cl=abcdefghijklmnopqrstuvwxyz0123456", "cl=a!b",
                                          "sym=aaa", "sym=TOOLONGSYMBOL1"};
        int v = (int)rnd(0, 4);
        if (v < 3)
            line("%s NEW %s sym=%s side=B qty=%lld px=%s", gw, bad[v], s->name, (long long)s->lot,
                 p);
        else
            line("%s NEW cl=f%ld %s side=B qty=1 px=1", gw, c, bad[v]);
        break;
    }
    case 9: /* BAD_VALUE: a field not allowed for the order type (A.6) */
    {
        int v = (int)rnd(0, 4);
        long long l = (long long)s->lot;
        if (v == 0)
            line("%s NEW cl=f%ld sym=%s side=B qty=%lld type=MKT px=%s", gw, c, s->name, l, p);
        else if (v == 1)
            line("%s NEW cl=f%ld sym=%s side=B qty=%lld px=%s stop=%s", gw, c, s->name, l, p, p);
        else if (v == 2)
            line("%s NEW cl=f%ld sym=%s side=B qty=%lld type=MKT peak=%lld", gw, c, s->name, 3 * l,
                 l);
        else if (v == 3)
            line("%s NEW cl=f%ld sym=%s side=B qty=%lld px=%s tif=IOC peak=%lld", gw, c, s->name,
                 3 * l, p, l);
        else
            line("%s NEW cl=f%ld sym=%s side=S qty=%lld px=%s peak=%lld", gw, c, s->name, 2 * l, p,
                 2 * l);
        break;
    }
    case 10: /* UNKNOWN_SYMBOL */
        line("%s NEW cl=f%ld sym=ZZZ side=B qty=1 px=1.00", gw, c);
        break;
    case 11: /* BAD_VALUE, second class: decimals, tick, lot */
    {
        int v = (int)rnd(0, 3);
        if (v == 0)
            line("%s NEW cl=f%ld sym=%s side=B qty=%lld px=%s1", gw, c, s->name, (long long)s->lot,
                 s->decimals ? p : "10.");
        else if (v == 1)
            line("%s NEW cl=f%ld sym=BB.X side=S qty=10 px=50.3", gw, c);
        else if (v == 2)
            line("%s NEW cl=f%ld sym=BB.X side=S qty=15 px=50.5", gw, c);
        else
            line("%s NEW cl=f%ld sym=C9 side=S qty=500 px=1003", gw, c);
        break;
    }
    case 12: /* AUTH: client message from OPS, operator message from a client */
    {
        int v = (int)rnd(0, 3);
        if (v == 0)
            line("OPS NEW cl=f%ld sym=%s side=B qty=%lld px=%s", c, s->name, (long long)s->lot, p);
        else if (v == 1)
            line("OPS PING");
        else if (v == 2)
            line("%s TICK ms=5", gw);
        else
            line("%s HALT sym=%s", gw, s->name);
        break;
    }
    case 13: /* LINE_TOO_LONG */
    {
        char pad[1400];
        size_t n = (size_t)rnd(1030, 1300);
        memset(pad, 'x', n);
        pad[n] = 0;
        line("%s NEW cl=f%ld sym=%s note=%s", gw, c, s->name, pad);
        break;
    }
    case 14: /* faulty operator messages */
    {
        int v = (int)rnd(0, 9);
        if (v == 0)
            line("OPS SYMBOL sym=%s", s->name);
        else if (v == 1)
            line("OPS SYMBOL sym=%s tick=1000", s->name);
        else if (v == 2)
            line("OPS PHASE sym=%s phase=AUCTION", s->name);
        else if (v == 3)
            line("OPS PHASE sym=ZZZ phase=CLOSED");
        else if (v == 4)
            line("OPS TICK ms=%s", chance(500) ? "-1" : "");
        else if (v == 5)
            line("OPS GATEWAY gw=%s enabled=2", gw);
        else if (v == 6)
            line("OPS GATEWAY gw=bad! enabled=1");
        else if (v == 7)
            line("OPS HALT sym=ZZZ");
        else if (v == 8)
            line("OPS SYMBOL sym=NEWSYM tick=0.01 band=%s",
                 chance(500) ? "100" : (chance(500) ? "0" : "1.234"));
        else
            line("OPS TICK");
        break;
    }
    case 15: /* PHASE: RESUME when not halted */
    {
        for (int i = 0; i < NSYMS; i++)
            if (!syms[i].halted) {
                line("OPS RESUME sym=%s", syms[i].name);
                return;
            }
        line("OPS RESUME sym=ZZZ");
        break;
    }
    case 16: /* faulty CANCEL / REPLACE */
    {
        struct gwstate *w = &gwst[g];
        const char *known = w->n ? w->ring[rnd(0, w->n - 1)].cl : "none";
        int v = (int)rnd(0, 5);
        if (v == 0)
            line("%s CANCEL", gw);
        else if (v == 1)
            line("%s REPLACE cl=%s", gw, known);
        else if (v == 2)
            line("%s REPLACE cl=%s qty=0", gw, known);
        else if (v == 3)
            line("%s REPLACE cl=%s px=0.0001", gw, known);
        else if (v == 4)
            line("%s REPLACE cl=unknown%ld qty=5", gw, c);
        else
            line("%s CANCEL cl=a!b", gw);
        break;
    }
    case 17: /* faulty MASSCANCEL */
        line("%s MASSCANCEL sym=%s", gw, chance(500) ? "zzz" : "ZZZ");
        break;
    case 18: /* faulty LOGIN */
        line("%s LOGIN %s", gw, chance(500) ? "gw=bad!" : "token=x");
        break;
    case 19: /* replay lines that are skipped or ignored (C.6) */
    {
        int v = (int)rnd(0, 3);
        if (v == 0)
            line("g1 PING");
        else if (v == 1)
            line("%s", gw);
        else if (v == 2)
            line("%s", "");
        else
            line("TOOLONGGATEWAYID17 PING");
        break;
    }
    case 20: /* valid oddities: \r before \n, runs of spaces between tokens (§1) */
        line("%s LOGIN   gw=%s\r", gw, gw);
        break;
    case 21: /* COLLAR (or, without a collar, a far price) */
        line("%s NEW cl=f%ld sym=%s side=%s qty=%lld px=%s tif=IOC", gw, c, s->name,
             chance(500) ? "B" : "S", (long long)s->lot,
             price(s, chance(500) ? s->mid * 3 / 2 : s->mid / 2 + 1, buf, sizeof buf));
        break;
    case 22: /* H.7: HALT while halted does nothing */
        for (int i = 0; i < NSYMS; i++)
            if (syms[i].halted) {
                line("OPS HALT sym=%s", syms[i].name);
                return;
            }
        line("OPS HALT sym=%s", s->name);
        s->halted = true;
        s->since_change = 0;
        break;
    case 23: /* H.8: a redefinition with fields left out takes the defaults */
        line("OPS SYMBOL sym=%s tick=%s%s%s", s->name, s->tick, s->lot != 1 ? " lot=" : "",
             s->lot != 1 ? (s->lot == 10  ? "10"
                            : s->lot == 5 ? "5"
                                          : "100")
                         : "");
        break;
    case 24: /* H.2: LOGIN naming another gateway */
        line("%s LOGIN gw=%s", gw, gws[(g + 1) % NGWS]);
        break;
    case 25: /* H.1: tokens */
        line("%s LOGIN gw=%s token=%s", gw, gw,
             chance(500) ? "Ab!#~x"
                         : "T123456789012345678901234567890123456789012345678901234567890123");
        break;
    case 26: /* H.4: the first well-formed cl is echoed */
        line("%s CANCEL cl=a!b cl=f%ld", gw, c);
        break;
    case 27: /* A.2, H.3: prices at the edge of 18 digits */
    {
        int v = (int)rnd(0, 3);
        if (v == 0) /* 18 digits at 3 decimals: valid, no collar on DDD */
            line("%s NEW cl=f%ld sym=DDD side=B qty=1 px=999999999999999 tif=IOC", gw, c);
        else if (v == 1) /* 19 digits at 3 decimals: BAD_VALUE, second class */
            line("%s NEW cl=f%ld sym=DDD side=S qty=1 px=9999999999999999", gw, c);
        else if (v == 2) /* the same on an unknown symbol: UNKNOWN_SYMBOL first */
            line("%s NEW cl=f%ld sym=ZZZ side=S qty=1 px=9999999999999999", gw, c);
        else /* the largest quantity */
            line("%s NEW cl=f%ld sym=AAA side=%s qty=1000000000 type=MKT", gw, c,
                 chance(500) ? "B" : "S");
        break;
    }
    case 28: /* H.6: the message part at exactly 1024 and 1025 bytes */
    {
        char pad[1100];
        size_t n = (size_t)(chance(500) ? 1024 : 1025) - 4;
        memset(pad, ' ', n);
        pad[n] = 0;
        line("%s PING%s", gw, pad);
        break;
    }
    case 29: /* H.6: a message part of spaces only is skipped */
        line("%s    ", gw);
        break;
    case 30: /* TICK of nothing, and a breaker that resumes at once */
        if (chance(500))
            line("OPS TICK ms=0");
        else
            line("OPS SYMBOL sym=%s tick=%s lot=%lld cb_band=1 cb_ms=0", s->name, s->tick,
                 (long long)s->lot);
        break;
    case 31:
    case 32:
    case 33:
    case 34:
        gen_multi_fault(g);
        break;
    case 35: /* A.7: an event type (§4) as input is SYNTAX first, from OPS too */
    {
        static const char *const ev[] = {"ACK",    "FILL",     "PONG",     "CANCELED",
                                         "REJECT", "LOGGEDIN", "REPLACED", "TRIGGERED"};
        const char *t = ev[rnd(0, 7)], *from = chance(300) ? "OPS" : gw;
        int v = (int)rnd(0, 3);
        if (v == 0)
            line("%s %s", from, t);
        else if (v == 1)
            line("%s %s cl=f%ld oid=%ld", from, t, c, c);
        else if (v == 2) /* faults that would be MISSING_FIELD or BAD_VALUE */
            line("%s %s cl=f%ld qty=abc px=", from, t, c);
        else
            line("%s %s sym=%s gw=%s reason=AUTH", from, t, s->name, gw);
        break;
    }
    default: /* more of the common kinds */
        line("%s NEW cl=f%ld sym=%s side=B qty=%lld px=%s%s", gw, c, s->name, (long long)s->lot, p,
             chance(500) ? " tif=FOK peak=1" : " type=STP stop=1");
        break;
    }
}

/* ------------------------------------------------------ short scripts */

/* A NEW of a remembered DAY/GTC order: side, price in ticks (0: market),
 * quantity in lots, peak in lots (0: none), extra tokens. */
static void script_order(int g, int si, bool buy, int64_t px, int64_t q, int64_t peak,
                         const char *extra)
{
    struct gsym *s = &syms[si];
    char cl[33], buf[48], pxs[64] = "";
    new_cl(g, cl, sizeof cl);
    if (px > 0)
        snprintf(pxs, sizeof pxs, " px=%s", price(s, px, buf, sizeof buf));
    else
        snprintf(pxs, sizeof pxs, " type=MKT");
    char pk[32] = "";
    if (peak > 0 && peak < q)
        snprintf(pk, sizeof pk, " peak=%lld", (long long)(peak * s->lot));
    line("%s NEW cl=%s sym=%s side=%s qty=%lld%s%s%s", gws[g], cl, s->name, buy ? "B" : "S",
         (long long)(q * s->lot), pxs, pk, extra);
    if (px > 0)
        remember(g, cl, si, false);
}

/* Short sequences that random lines reach too rarely: an auction with
 * market orders and icebergs (F.5), a ladder of stops set off by one order
 * (D.6), a FOK meeting its own gateway's orders (D.7), icebergs at one
 * level swept by a large order (§5.4). */
static void gen_script(void)
{
    int si = (int)rnd(0, NSYMS - 1);
    struct gsym *s = &syms[si];
    if (s->halted || s->phase == 0)
        return gen_new();
    int64_t m = s->mid, w = s->spread;
    switch (rnd(0, 3)) {
    case 0:
        if (s->phase == 2 && !without_phases)
            line("OPS PHASE sym=%s phase=PREOPEN", s->name);
        for (int i = 0, n = (int)rnd(2, 6); i < n; i++) {
            bool buy = chance(500);
            int64_t px = chance(300) ? 0 : m + (buy ? 1 : -1) * rnd(-w, w);
            script_order(pick_gw(), si, buy, px, rnd(1, 8),
                         without_icebergs || px == 0 ? 0 : rnd(0, 3),
                         chance(300) ? " tif=GTC" : "");
        }
        if (!without_phases) {
            line("OPS PHASE sym=%s phase=CONTINUOUS", s->name);
            s->phase = 2;
        }
        break;
    case 1:
        if (without_stops)
            return gen_new();
        for (int i = 0, n = (int)rnd(2, 6); i < n; i++) {
            bool buy = chance(500);
            char cl[33], b1[48], b2[48];
            int g = pick_gw();
            int64_t stop = m + (buy ? 1 : -1) * rnd(0, w);
            new_cl(g, cl, sizeof cl);
            if (chance(500))
                line("%s NEW cl=%s sym=%s side=%s qty=%lld type=STP stop=%s%s", gws[g], cl, s->name,
                     buy ? "B" : "S", (long long)lots(s, 1, 5), price(s, stop, b1, sizeof b1),
                     chance(200) ? " tif=FOK" : "");
            else
                line("%s NEW cl=%s sym=%s side=%s qty=%lld type=STL stop=%s px=%s%s", gws[g], cl,
                     s->name, buy ? "B" : "S", (long long)lots(s, 1, 5),
                     price(s, stop, b1, sizeof b1),
                     price(s, stop + (buy ? 1 : -1) * rnd(0, w), b2, sizeof b2),
                     chance(200) ? " tif=IOC" : "");
            remember(g, cl, si, true);
        }
        script_order(pick_gw(), si, chance(500), 0, rnd(3, 15), 0, "");
        break;
    case 2: {
        int g = pick_gw(), other = (g + 1) % prof.gateways;
        bool buy = chance(500);
        int64_t px = m + (buy ? 1 : -1) * rnd(0, w);
        script_order(g, si, !buy, px, rnd(1, 4), 0, "");
        script_order(other, si, !buy, px, rnd(1, 4), 0, "");
        script_order(g, si, !buy, px, rnd(1, 4), 0, "");
        static const char *const fok[] = {" tif=FOK stp=CO", " tif=FOK stp=DC", " tif=FOK stp=CN",
                                          " tif=FOK",        " stp=DC",         " stp=CB"};
        char cl[33], b1[48];
        new_cl(g, cl, sizeof cl);
        line("%s NEW cl=%s sym=%s side=%s qty=%lld px=%s%s", gws[g], cl, s->name, buy ? "B" : "S",
             (long long)lots(s, 1, 10), price(s, px, b1, sizeof b1),
             without_stp ? "" : fok[rnd(0, 5)]);
        remember(g, cl, si, false);
        break;
    }
    default: {
        bool buy = chance(500);
        int64_t px = m + (buy ? 1 : -1) * rnd(0, w);
        for (int i = 0, n = (int)rnd(2, 4); i < n; i++)
            script_order(pick_gw(), si, !buy, px, rnd(2, 9), without_icebergs ? 0 : rnd(0, 3), "");
        script_order(pick_gw(), si, buy, chance(500) ? 0 : px + (buy ? w : -w), rnd(5, 40), 0,
                     chance(300) ? " tif=IOC" : "");
        break;
    }
    }
}

/* -------------------------------------------------------------- driver */

static void gen_one(void)
{
    int r = (int)rnd(0, 999);
    walk_mids();
    /* Symbols left out of CONTINUOUS come back fairly soon. */
    for (int i = 0; i < NSYMS; i++) {
        struct gsym *s = &syms[i];
        if ((s->phase != 2 || s->halted) && ++s->since_change > 120 && chance(50)) {
            if (s->halted) {
                line("OPS RESUME sym=%s", s->name);
                s->halted = false;
                if (s->phase != 0)
                    s->phase = 2;
            } else {
                line("OPS PHASE sym=%s phase=CONTINUOUS", s->name);
                s->phase = 2;
            }
            s->since_change = 0;
            return;
        }
    }
    if (prof.extra_phases && !without_phases && chance(prof.extra_phases))
        return gen_phase_op();
    if (r < 25)
        return gen_script();
    if (r < 560)
        return gen_new();
    if (r < 660)
        return gen_cancel();
    if (r < 770)
        return without_replace ? gen_new() : gen_replace();
    if (r < 830) {
        line("OPS TICK ms=%lld", (long long)rnd(0, 400));
        return;
    }
    if (r < 838) {
        int g = pick_gw();
        if (chance(600)) {
            int si = (int)rnd(0, NSYMS - 1);
            line("%s MASSCANCEL sym=%s", gws[g], syms[si].name);
            for (int i = gwst[g].n - 1; i >= 0; i--)
                if (gwst[g].ring[i].sym == si)
                    forget(g, i);
        } else {
            line("%s MASSCANCEL", gws[g]);
            gwst[g].n = 0;
        }
        return;
    }
    if (r < 844) {
        int g = pick_gw();
        line("%s %s", gws[g], chance(600) ? "DISCONNECT" : "LOGOUT");
        gwst[g].n = 0;
        return;
    }
    if (r < 850) {
        int g = pick_gw();
        if (chance(500))
            line("%s LOGIN gw=%s%s", gws[g], gws[g], chance(300) ? " token=s3cr3t" : "");
        else
            line("%s PING", gws[g]);
        return;
    }
    if (r < 855) {
        if (!without_phases)
            gen_phase_op();
        return;
    }
    if (r < 858) {
        int g = pick_gw();
        gwst[g].disabled = !gwst[g].disabled;
        line("OPS GATEWAY gw=%s enabled=%d", gws[g], gwst[g].disabled ? 0 : 1);
        return;
    }
    if (r < 860) {
        if (chance(500))
            gen_symbol_redefinition();
        return;
    }
    if (r < 900 && !without_malformed)
        return gen_faulty();
    /* Re-enable disabled gateways quickly so that they keep trading. */
    for (int g = 0; g < NGWS; g++)
        if (gwst[g].disabled && chance(300)) {
            gwst[g].disabled = false;
            line("OPS GATEWAY gw=%s enabled=1", gws[g]);
            return;
        }
    gen_new();
}

static const char usage_text[] =
    "Usage: em-gen --seed N --messages M [--without WHAT]...\n"
    "\n"
    "Write a random replay stream of M messages from seed N on stdout, for the\n"
    "differential test (tests/differential/README.md). WHAT is one of stops,\n"
    "icebergs, stp, breaker, malformed, phases, replace.\n"
    "\n"
    "  -h, --help   print this and exit\n"
    "  --version    print the version and exit\n";

static int usage(const char *why, const char *what)
{
    return core_proc_bad_usage("em-gen", "%s%s%s", why, what ? " " : "", what ? what : "");
}

int main(int argc, char **argv)
{
    unsigned long long seed = 1;
    long messages = 1000;
    int code = core_proc_early("em-gen", usage_text, argc, argv);
    if (code >= 0)
        return code;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            return usage("a value is missing after", argv[i]);
        const char *a = argv[i], *v = argv[++i];
        int64_t x;
        if (!strcmp(a, "--seed")) {
            if ((code = core_proc_int_arg("em-gen", a, v, 0, INT64_MAX, &x)) != 0)
                return code;
            seed = (unsigned long long)x;
        } else if (!strcmp(a, "--messages")) {
            if ((code = core_proc_int_arg("em-gen", a, v, 0, LONG_MAX, &x)) != 0)
                return code;
            messages = (long)x;
        } else if (!strcmp(a, "--without")) {
            if (!strcmp(v, "stops"))
                without_stops = true;
            else if (!strcmp(v, "icebergs"))
                without_icebergs = true;
            else if (!strcmp(v, "stp"))
                without_stp = true;
            else if (!strcmp(v, "breaker"))
                without_breaker = true;
            else if (!strcmp(v, "malformed"))
                without_malformed = true;
            else if (!strcmp(v, "phases"))
                without_phases = true;
            else if (!strcmp(v, "replace"))
                without_replace = true;
            else
                return usage("--without does not know", v);
        } else {
            return usage("unknown option", a);
        }
    }
    rng_state = seed;
    choose_profile(seed);
    static char outbuf[1 << 16];
    setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
    remaining = messages;
    define_symbols();
    while (remaining > 0)
        gen_one();
    return fflush(stdout) == 0 ? 0 : 1;
}
