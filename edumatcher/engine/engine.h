/*
 * EduMatcher matching engine: every symbol's book, stops, phases, timers,
 * and the rules of docs/alf.md (§3–7 and the choices B–G).
 *
 * Single-threaded and deterministic: em_engine_submit() takes one message
 * and runs it to completion, emitting its events, in the spec's order,
 * through the sink given at creation; the same messages in the same order
 * give the same events byte for byte. Time comes only from the injected
 * clock (TICK messages, or em_engine_set_time() in a server); order ids,
 * trade ids and arrival sequences are counters of the engine.
 *
 * No allocation per message once warmed up: orders and levels come from
 * pools that grow by doubling only when a new high-water mark is reached;
 * events are built in a struct owned by the engine and handed to the sink
 * by pointer (valid only during the call).
 *
 * Compile with EM_CHECK_INVARIANTS=1 to check after every message (abort
 * with a message on the first violation): the book's invariants
 * (book.h), a CONTINUOUS book never crossed, stop lists in trigger order,
 * the (gw, cl) index and the gateways' order lists agreeing with the
 * pools, qty = cum + leaves for every open order.
 */
#ifndef EM_ENGINE_H
#define EM_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "edumatcher/engine/msg.h"

struct em_engine;

/* Receives each event for gateway `gw` (an id from em_engine_gateway).
 * `ev` is owned by the engine and valid only during the call; the sink
 * must not call back into the engine. */
typedef void (*em_sink_fn)(void *ctx, uint16_t gw, const struct em_msg *ev);

/* One trade, reported after both its FILL events went to the sink: the
 * market-data view of it (who bought from whom, at what), so that a
 * process need not pair FILLs or remember orders. Same rules as the sink:
 * t is valid only during the call, no call back into the engine. */
struct em_trade {
    uint64_t tid;
    const char *sym; /* the symbol's name */
    uint16_t sym_id; /* em_engine_symbol_md's id */
    struct em_price px;
    uint32_t qty;
    uint16_t buy_gw, sell_gw;
    uint64_t buy_oid, sell_oid;
};
typedef void (*em_trade_fn)(void *ctx, const struct em_trade *t);

struct em_engine_config {
    em_sink_fn sink;
    void *sink_ctx;
    em_trade_fn on_trade; /* optional; called with sink_ctx */
    uint32_t orders_hint; /* pool sizes to start with (0: 1024 orders, 256 levels) */
    uint32_t levels_hint;
    uint64_t start_ms; /* the injected clock's initial value */
};

/* The operator's gateway id (docs/alf.md C.4). */
#define EM_OPS_GW "OPS"

/* Create an engine. Returns NULL when out of memory. The caller owns it
 * and frees it with em_engine_free. */
struct em_engine *em_engine_new(const struct em_engine_config *cfg);
void em_engine_free(struct em_engine *e);

/* Intern gateway id name[0..n) (must be a valid gw, or "OPS"). Returns its
 * id (>= 1), CORE_EINVAL for a malformed name, CORE_ENOMEM, or
 * CORE_ETOOBIG when 65535 gateways exist. The same name always gets the
 * same id. */
int em_engine_gateway(struct em_engine *e, const char *name, size_t n);

/* Name of gateway id gw (NUL-terminated, owned by the engine). */
const char *em_engine_gateway_name(const struct em_engine *e, uint16_t gw);

/* Whether gateway gw may send messages of this kind: 0, EM_REJ_SYNTAX for
 * an event (ACK, FILL, ...: not an input message, docs/alf.md A.7), or
 * EM_REJ_AUTH (operator messages only from OPS, client messages only from
 * others; C.4). A front end checks this after a parse that found no
 * SYNTAX fault and answers with the code it returns, before the other
 * parse faults. */
int em_engine_authorize(const struct em_engine *e, uint16_t gw, unsigned kind);

/* Process one message from gateway gw. m must have passed em_alf_parse or
 * em_frame_decode (context-free checks); everything else is checked here
 * and answered with a REJECT event when it fails. The engine does not keep
 * m. Returns 0; CORE_EINVAL for a bad gw id; CORE_ENOMEM when a pool could
 * not grow: a NEW that cannot get a record is dropped before its ACK with
 * no effect, but a failure later in a message (a new price level) leaves
 * that message half done, so a server treats CORE_ENOMEM as fatal (size
 * the pools with orders_hint / levels_hint). */
int em_engine_submit(struct em_engine *e, uint16_t gw, const struct em_msg *m);

/* Emit `REJECT [cl=] reason=code` to gw, echoing m->cl when m has it
 * (m may be NULL). For faults found before the engine (parse, framing). */
void em_engine_reject(struct em_engine *e, uint16_t gw, const struct em_msg *m, int code);

/* Set the injected clock to now_ms (never backwards; an earlier value is
 * ignored) and fire every timer due (ALF §7 TICK does this relatively). */
void em_engine_set_time(struct em_engine *e, uint64_t now_ms);

/* One price level of a market-data snapshot. */
struct em_depth_level {
    struct em_price px; /* printed with the symbol's decimals */
    uint64_t shown;     /* displayed quantity (icebergs: their current peak) */
    uint32_t orders;
};

/* Market-data snapshot of symbol sym (NUL-terminated): up to max levels of
 * side (EM_SIDE_BUY or EM_SIDE_SELL), best first, into out (owned by the
 * caller). Resting market orders (auction phases) are not levels and are
 * left out. Returns the number of levels, or CORE_ENOTFOUND for an unknown
 * symbol, CORE_EINVAL for a bad side. Costs O(orders in those levels):
 * call it between messages, throttled (docs/edumatcher.md). */
int em_engine_depth(const struct em_engine *e, const char *sym, int side,
                    struct em_depth_level *out, int max);

/* Phase (enum em_phase) and last trade price of symbol sym. *has_last is 0
 * when it has not traded. Returns 0 or CORE_ENOTFOUND. */
int em_engine_symbol_state(const struct em_engine *e, const char *sym, uint8_t *phase,
                           struct em_price *last, int *has_last);

/* Counters, for benchmarks and the monitor. */
/* A symbol's market data as the engine keeps it next to its book: the
 * totals of its trades (kept in snapshots) and a version that changes
 * whenever its book or state may have changed (an event for one of its
 * orders, a phase change), so a publisher can skip unchanged symbols. */
struct em_symbol_md {
    const char *name; /* valid while the engine lives */
    uint8_t phase;    /* enum em_phase */
    int has_last;
    struct em_price last; /* the last trade price (when has_last) */
    uint32_t last_qty;    /* the last trade's quantity */
    uint64_t volume, trades;
    uint64_t version;
    /* the symbol's rules (docs/alf.md §7 SYMBOL): a price's decimals, the
     * tick (a price), the lot, the collar and circuit-breaker bands in
     * basis points (0: none) */
    uint8_t decimals;
    struct em_price tick;
    uint32_t lot, band, cb_band;
};

/* Symbols are numbered 1..em_engine_nsymbols in definition order. */
uint32_t em_engine_nsymbols(const struct em_engine *e);
/* The id of the symbol named sym (O(1), hashed), or 0 when unknown. */
uint16_t em_engine_symbol_id(const struct em_engine *e, const char *sym);
/* The market data of symbol id. Returns 0 or CORE_ENOTFOUND. */
int em_engine_symbol_md(const struct em_engine *e, uint16_t id, struct em_symbol_md *out);
/* Set a symbol's trade totals: only for loading state saved before the
 * engine kept them (older snapshots). Returns 0 or CORE_ENOTFOUND. */
int em_engine_set_symbol_totals(struct em_engine *e, const char *sym, uint32_t last_qty,
                                uint64_t volume, uint64_t trades);

struct em_engine_stats {
    uint64_t messages, events, trades, open_orders;
};
void em_engine_stats(const struct em_engine *e, struct em_engine_stats *out);

/* Check every invariant now (also done after each message when compiled
 * with EM_CHECK_INVARIANTS). Returns 0 or a positive code; *what gets a
 * static description of the first violation. */
int em_engine_check(const struct em_engine *e, const char **what);

/* The engine's clock: start_ms plus the TICKs submitted (or the last
 * em_engine_set_time). */
uint64_t em_engine_now(const struct em_engine *e);

/* ---- snapshots (bounded journal replay; docs/edumatcher-exchange.md) ---- */

/* Receives the bytes of a snapshot in order, in pieces of any size. data
 * is valid only during the call. Returns 0, or a negative code that stops
 * the snapshot (em_engine_snapshot returns it). */
typedef int (*em_snapshot_write_fn)(void *ctx, const void *data, size_t len);

/* 2 adds each symbol's trade totals (em_symbol_md); 1 is still read. */
#define EM_SNAPSHOT_VERSION 2

/* Serialise the engine's complete state between messages (never from a
 * sink) as a versioned little-endian blob, handed to write in pieces:
 * counters and clock, gateways (name, enabled), then every symbol with its
 * configuration, phase, prices, breaker and its orders (resting market
 * orders, price levels best first, each in time priority, then pending
 * stops in trigger order) with every field. The same state gives the same
 * bytes. The (gw, cl) index, pool layout and book window are not saved:
 * em_engine_restore rebuilds them. Does not allocate; O(open orders).
 * Returns 0 or write's negative code. */
int em_engine_snapshot(const struct em_engine *e, em_snapshot_write_fn write, void *ctx);

/* Load a snapshot blob[0..len) (owned by the caller, not kept) into e, an
 * engine fresh from em_engine_new (no message submitted, no gateway
 * interned but OPS). Every field read is validated and the result must
 * pass em_engine_check. Returns 0; CORE_EINVAL when e is not fresh;
 * CORE_EPROTO for a corrupt, truncated or unknown-version blob;
 * CORE_ENOMEM. After a failure e holds a partial state: free it. No event
 * is emitted. */
int em_engine_restore(struct em_engine *e, const void *blob, size_t len);

/* Call fn for every open order (resting or pending stop), in no defined
 * order: its oid, symbol name and side (enum em_side). For a process that
 * keeps its own per-order notes and rebuilds them after a restore. */
void em_engine_for_each_order(const struct em_engine *e,
                              void (*fn)(void *ctx, uint64_t oid, const char *sym, uint8_t side),
                              void *ctx);

#endif
