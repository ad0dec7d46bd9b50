/*
 * The monitor's view of the market: per symbol the latest book (from the
 * engine's `md.<SYM>` lines or a `book` query), the trade tape and a
 * price/volume series over the session (from `trade.executed`), rendered
 * as JSON for the monitor's page.
 *
 * Invariants:
 *  1. Bounded memory: at most EM_MKT_SYMS symbols; per symbol the last
 *     EM_MKT_TAPE trades and EM_MKT_POINTS chart points (a point per
 *     bucket_ms of the monitor's clock, holding the bucket's last price,
 *     its low and high, and the quantity traded in it); older ones are
 *     overwritten, a symbol beyond the limit is counted and ignored.
 *  2. Input is untrusted text (fuzz_market): a line that does not parse
 *     changes nothing and returns CORE_EPROTO. Strings are kept only if
 *     they fit and contain no character that would need escaping in JSON.
 *  3. A book is replaced only by a newer one: a higher seq in the same
 *     epoch, or another epoch (the engine restarted).
 *
 * The ALF gateway keeps one too, without tape or chart use, to answer
 * `SYMBOLS` (docs/alf.md §9) from the symbol rules the MD lines carry.
 */
#ifndef EM_MONITOR_MARKET_H
#define EM_MONITOR_MARKET_H

#include <stdint.h>

#include "core/buf.h"

#define EM_MKT_SYMS   64
#define EM_MKT_TAPE   50
#define EM_MKT_POINTS 720
#define EM_MKT_STR    24  /* a symbol, phase, price or gateway id */
#define EM_MKT_LEVELS 512 /* a side's levels as sent: px:qty:orders,... */

struct em_mkt_trade {
    uint64_t tid, at_ms, qty;
    char px[EM_MKT_STR], buy[EM_MKT_STR], sell[EM_MKT_STR];
};

struct em_mkt_point {
    uint64_t t_ms; /* bucket start */
    double last, low, high;
    uint64_t volume;
};

struct em_mkt_sym {
    char sym[EM_MKT_STR];
    /* the latest book */
    uint64_t seq, epoch, volume, trades, lastqty, book_ms;
    char phase[EM_MKT_STR], last[EM_MKT_STR];
    char bids[EM_MKT_LEVELS], asks[EM_MKT_LEVELS];
    /* the symbol's rules as the MD line gives them ("-" when the line has
     * none): tick and bands as printed (bands in percent, "-": none) */
    char tick[EM_MKT_STR], lot[EM_MKT_STR], decimals[EM_MKT_STR];
    char band[EM_MKT_STR], cb_band[EM_MKT_STR];
    /* tape and chart rings */
    unsigned tape_head, tape_n, pt_head, pt_n;
    struct em_mkt_trade tape[EM_MKT_TAPE];
    struct em_mkt_point pts[EM_MKT_POINTS];
};

struct em_mkt {
    uint64_t bucket_ms;
    unsigned n;
    uint64_t books, trades, rejected; /* totals: applied, applied, refused */
    struct em_mkt_sym s[EM_MKT_SYMS];
};

/* Empty state with chart buckets of bucket_ms (> 0). The struct is large:
 * allocate it once. */
void em_mkt_init(struct em_mkt *m, uint64_t bucket_ms);

/* Apply one `MD sym=... seq=... epoch=... phase=... last=... lastqty=...
 * volume=... trades=... [tick=... lot=... decimals=... band=... cb_band=...]
 * bids=... asks=...` line (len bytes); a rule left out reads "-". Returns 0,
 * CORE_EEXISTS (not newer than the book held: ignored), CORE_EPROTO or
 * CORE_ETOOBIG (no room for a new symbol). */
int em_mkt_book(struct em_mkt *m, const char *line, size_t len, uint64_t now_ms);

/* Apply one `TRADE tid=... sym=... px=... qty=... buy=... sell=...` line
 * at now_ms: onto the tape and into the current chart bucket. Returns 0,
 * CORE_EEXISTS (a tid at or below the symbol's last: ignored),
 * CORE_EPROTO or CORE_ETOOBIG. */
int em_mkt_trade(struct em_mkt *m, const char *line, size_t len, uint64_t now_ms);

/* Append {"symbols":[{"sym":..,"phase":..,"seq":..,"last":..,"volume":..,
 * "bids":[[px,qty,orders],..],"asks":[..],"tape":[newest first],
 * "chart":[[t_ms,last,low,high,volume],..]},..]} to out. */
void em_mkt_json(const struct em_mkt *m, struct core_buf *out);

/* The symbol named sym (NUL-terminated) or NULL. */
const struct em_mkt_sym *em_mkt_find(const struct em_mkt *m, const char *sym);

#endif
