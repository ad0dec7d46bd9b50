/*
 * Clearing: positions and cash per gateway and symbol, built from the
 * engine's `trade.executed` messages.
 *
 * The trade message (published by the engine process, one per trade; text
 * so that any language can subscribe):
 *
 *   TRADE tid=<n> sym=<sym> px=<price> qty=<n> buy=<gw> sell=<gw>
 *         [buy_oid=<n>] [sell_oid=<n>]
 *
 * px is printed with exactly the symbol's decimals (ALF §2), so every trade
 * of a symbol has the same number of decimals; cash is kept exactly as an
 * integer count of 10^-decimals units (128-bit: px × qty may exceed 64).
 *
 * Invariants:
 *  1. For every symbol, the positions over all gateways sum to zero, and
 *     so does the cash (every trade moves qty and px × qty from one
 *     account to another; a self-trade moves them within one).
 *  2. A trade is applied at most once: trade ids increase strictly, a tid
 *     at or below the last applied one is ignored (a re-sent message).
 *  3. Bounded memory: at most EM_CLR_ACCOUNTS (gateway, symbol) accounts;
 *     a trade that would need more is refused and counted.
 */
#ifndef EM_CLEARING_BOOK_H
#define EM_CLEARING_BOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/http.h"

#define EM_CLR_ACCOUNTS 4096 /* a power of two */
#define EM_CLR_NAME     17   /* gw 16, sym 12, + NUL */

struct em_trade {
    uint64_t tid;
    char sym[EM_CLR_NAME];
    char buy[EM_CLR_NAME], sell[EM_CLR_NAME];
    int64_t px;   /* mantissa */
    unsigned dec; /* decimals of px */
    int64_t qty;
    uint64_t buy_oid, sell_oid;
};

/* Parse one TRADE message (len bytes, need not be NUL-terminated).
 * Returns 0 or CORE_EPROTO. */
int em_trade_parse(const char *s, size_t len, struct em_trade *t);

struct em_clr_account {
    char gw[EM_CLR_NAME];
    char sym[EM_CLR_NAME];
    bool used;
    unsigned dec;
    int64_t position; /* bought - sold */
    int64_t bought, sold;
    __int128 cash; /* received - paid, in 10^-dec units */
    uint64_t trades;
};

struct em_clearing {
    uint64_t trades, duplicates, refused; /* totals */
    uint64_t last_tid;
    unsigned naccounts;
    struct em_clr_account acct[EM_CLR_ACCOUNTS];
};

/* Empty state (the struct is large: allocate it once). */
void em_clearing_init(struct em_clearing *c);

/* Apply one trade. Returns 0, CORE_EEXISTS (tid already applied: ignored),
 * CORE_EINVAL (px decimals differ from the symbol's earlier trades) or
 * CORE_ETOOBIG (no room for a new account). Nothing changes on failure. */
int em_clearing_apply(struct em_clearing *c, const struct em_trade *t);

/* The account of (gw, sym), or NULL. */
const struct em_clr_account *em_clearing_find(const struct em_clearing *c, const char *gw,
                                              const char *sym);

/* Format a decimal amount (mantissa, decimals) into out. */
void em_clr_format_amount(__int128 v, unsigned dec, char *out, size_t outlen);

/* Render accounts as JSON, filtered by gw and/or sym when not NULL/empty,
 * in (gw, sym) order. */
void em_clearing_json(const struct em_clearing *c, const char *gw, const char *sym,
                      struct core_http_response *res);

#endif
