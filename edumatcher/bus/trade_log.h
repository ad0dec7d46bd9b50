/*
 * The trade log: every trade the engine has made, by trade id, kept on
 * disk beside the journal so that clearing (or anyone) can recover trades
 * it did not see on `trade.executed` (it was down, its subscription
 * dropped them, or the engine died between journaling a batch and
 * publishing it).
 *
 * File `trades.log` in the state directory: fixed-size records of
 * EM_TRADE_LOG_REC bytes; record i holds the TRADE line of trade id i + 1
 * (trade ids start at 1 and increase by one, engine.h), padded with spaces
 * and ending in '\n', so the file reads as text and a trade is found by
 * seeking, without an index.
 *
 * Invariants:
 *  1. The file holds trades 1..count with no gap; an append for a tid at
 *     or below count is a trade already logged (the engine regenerating it
 *     on replay) and is ignored; a tid above count + 1 is refused.
 *  2. A record cut by a crash (a short tail, or one that is not a TRADE
 *     line of the expected tid) is truncated on open; the engine's replay
 *     then logs those trades again, because replay regenerates every trade
 *     after the last snapshot and the snapshot is taken only after the log
 *     was flushed.
 *  3. Appends are buffered and written only by em_trade_log_flush, which
 *     the engine calls after its journal flush and before it publishes, so
 *     a published trade is always readable from the log, and the log never
 *     holds a trade whose cause the journal could still lose (a restarted
 *     engine would make another trade under that id). A full buffer is
 *     refused (CORE_EAGAIN) rather than written early.
 */
#ifndef EM_TRADE_LOG_H
#define EM_TRADE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EM_TRADE_LOG_REC 256 /* a TRADE line is bounded well below (engine_main.c) */
#define EM_TRADE_LOG_BUF 64  /* records buffered between flushes before a write */

struct em_trade_log {
    int fd;
    bool sync;        /* fdatasync on each flush */
    uint64_t count;   /* trades on disk */
    uint64_t pending; /* trades buffered, not yet written */
    uint64_t ignored; /* appends of trades already logged (replay) */
    char buf[EM_TRADE_LOG_BUF * EM_TRADE_LOG_REC];
};

/* Open (create) dir/trades.log, truncating a torn tail. sync: fdatasync at
 * each flush. Returns 0, CORE_EIO, or CORE_EPROTO (a record in the middle
 * that is not the expected trade: the file is not a trade log). */
int em_trade_log_open(struct em_trade_log *l, const char *dir, bool sync);

/* The id the next new trade must have (count + pending + 1). */
uint64_t em_trade_log_next(const struct em_trade_log *l);

/* True when the buffer is full: flush (journal first) before appending. */
bool em_trade_log_full(const struct em_trade_log *l);

/* Log trade `tid` whose TRADE line is line[0..len) (no newline). Returns
 * 0 (buffered, or ignored as already logged), CORE_ESTATE (tid leaves a
 * gap), CORE_ETOOBIG (line longer than a record allows) or CORE_EAGAIN
 * (the buffer is full: nothing was done). */
int em_trade_log_append(struct em_trade_log *l, uint64_t tid, const char *line, size_t len);

/* Write what is buffered (and sync if asked). Returns 0 or CORE_EIO. */
int em_trade_log_flush(struct em_trade_log *l);

/*
 * Copy the TRADE lines of trades from_tid, from_tid + 1, ... (those on
 * disk only), each ending in '\n', into out while they fit in cap and at
 * most max of them. Returns the number of bytes written (0: none from
 * there yet) or CORE_EIO. *ntrades gets how many lines.
 */
long em_trade_log_read(const struct em_trade_log *l, uint64_t from_tid, unsigned max, char *out,
                       size_t cap, unsigned *ntrades);

void em_trade_log_close(struct em_trade_log *l);

#endif
