/*
 * The engine host: the matching engine as a process, without the process.
 *
 *   inbound frames --> journal --> em_engine_submit --> staged events
 *   end of batch   --> journal flush --> publish (acks, trades), snapshot
 *   timers         --> TICKs (the clock), schedule, market data
 *
 * One struct em_host owns an engine and its journal. It knows no socket:
 * what it publishes goes through struct em_host_bus (the main sends it on
 * the engine's PUB socket; a unit test records it), inbound bus messages
 * are handed to em_host_inbound, and the main's timers call em_host_tick
 * and em_host_publish_md. Single-threaded; no allocation per message.
 *
 * The rules it keeps (docs/edumatcher-exchange.md):
 * - every accepted message is journaled before any of its effects is
 *   published: events are staged during a batch and published at
 *   em_host_batch_end after em_journal_flush;
 * - the engine's clock is the sum of journaled TICKs (em_host_tick turns
 *   elapsed monotonic time into TICKs between messages), so a replay fires
 *   timers at the same point of the stream;
 * - on open, the latest snapshot is restored and the journal replayed
 *   through the same submit path with publishing off;
 * - every TRADE line goes to the trade log beside the journal (by id, for
 *   recovery; em_host_query), flushed after the journal, before publishing.
 *
 * A journal write failure is fatal: from then on nothing is published or
 * submitted, and the calls below return CORE_EIO; the process must stop.
 */
#ifndef EM_ENGINE_HOST_H
#define EM_ENGINE_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/metrics.h"
#include "edumatcher/bus/journal.h"
#include "edumatcher/bus/trade_log.h"
#include "edumatcher/bus/zmq_bus.h" /* struct em_bus_topic */
#include "edumatcher/engine/engine.h"

struct em_host;

struct em_host_bus {
    /* Publish one message: topic `order.ack.<gw>` (binary event frames of
     * one trader, concatenated), `trade.executed` or `md.<SYM>` (one text
     * line). data is valid only during the call. */
    int (*publish)(void *ctx, const struct em_bus_topic *topic, const void *data, size_t len);
    /* Monotonic nanoseconds (clock, snapshot interval); NULL: core_now_ns. */
    uint64_t (*now_ns)(void *ctx);
    /* True while door (an order-link connection's id, see "Doors") is
     * open; NULL: only EM_HOST_DOOR_HOSTED is. */
    bool (*door_open)(void *ctx, uint64_t door);
};

struct em_host_config {
    const struct em_host_bus *bus;
    void *bus_ctx;
    struct em_journal_opts journal;
    int md_depth;                  /* price levels per side in MD lines (1..50) */
    uint64_t snapshot_records;     /* snapshot after this many records (0: never) */
    uint64_t snapshot_interval_ms; /* or this often when records came in (0: never) */
    bool snapshot_fork;            /* write snapshots from a forked child (off the loop) */
    struct core_metrics *metrics;  /* optional: latency samples of inbound messages */
};

/* Totals and gauges, updated in place: register them with core/metrics. */
struct em_host_stats {
    uint64_t msgs_in, bus_msgs_in, bad_frames, events_out, bus_msgs_out, trades_out, md_out;
    uint64_t journal_errors, snapshots, snapshot_failures, queries;
    uint64_t duplicates;      /* resent messages answered from the kept first reply */
    uint64_t resend_requests; /* numbered messages after a gap: REJECT RESEND */
    uint64_t resyncs;         /* RESYNC requests answered */
    uint64_t events_resent;   /* events sent again for them */
    uint64_t resyncs_short;   /* of which some asked for were no longer kept */
    uint64_t door_refused;    /* messages of a gw held by another door: refused */
    uint64_t door_takeovers;  /* LOGINs that ended a session whose door was gone */
    int64_t open_orders;      /* as of the last em_host_stats call */
    int64_t last_batch;       /* messages in the last batch */
    int64_t snapshot_seq, restored_seq;
    uint64_t replayed;   /* journal records replayed at open */
    uint64_t torn_bytes; /* cut from the journal's torn tail at open */
};

/* Create the engine, open the journal in cfg->journal.dir (created if
 * missing), restore its latest snapshot and replay the records after it.
 * Returns 0 and *out, or the journal's error (CORE_EIO for a snapshot that
 * does not restore or a record that is not a message), CORE_ENOMEM. */
int em_host_open(struct em_host **out, const struct em_host_config *cfg);
/* Close the journal, free the engine and the host. */
void em_host_close(struct em_host *h);

/* True when the journal was empty at open (no record, no snapshot). */
bool em_host_fresh(const struct em_host *h);
/* The symbols file: ALF §7 operator lines, submitted as from OPS (and
 * journaled) only when the host is fresh, and `AT <ms> <operator line>`
 * schedule lines, fired by em_host_tick when the engine clock reaches <ms>
 * (always loaded; those the replayed clock passed have fired already).
 * Returns 0, CORE_ENOTFOUND, CORE_EINVAL (a bad line, the others used),
 * CORE_ENOMEM or CORE_EIO. */
int em_host_load_symbols(struct em_host *h, const char *path);

/*
 * Doors (docs/alf.md C.9): a trader's messages reach the engine through a
 * door, the hosted sessions (EM_HOST_DOOR_HOSTED) or one order-link
 * connection (its id, em_link_server_record_cb). The engine is the one
 * place that sees every door, so it decides where each gw is logged in:
 * the door whose LOGIN it took holds gw until that session's DISCONNECT
 * or LOGOUT. A LOGIN through another door while the holding door is open
 * is refused (LOGGED_IN_ELSEWHERE); while it is gone (the gateway died
 * and --gateway-grace-ms has not passed) the old session is disconnected
 * first (journaled: its orders are canceled) and the LOGIN taken. A
 * gateway back on a new link within the grace sends for its sessions
 * (RESYNC) without a LOGIN, and its new link holds them. The doors are
 * not journaled: after a restart the first door to send for a gw holds
 * it. The rules in full: door_check in engine_host.c.
 */
#define EM_HOST_DOOR_ANY    0          /* no door: the process itself (a link gone) */
#define EM_HOST_DOOR_HOSTED UINT64_MAX /* the engine's hosted sessions */

/* One bus message from a gateway through door: topic = its gw id, payload
 * one or more binary frames of that session, each handled to completion
 * (journaled, submitted; events staged) unless the door rules drop it. A
 * frame that does not decode ends the message. Returns 0, CORE_EBUSY when
 * a frame was refused because another door holds gw (the caller answers
 * that door: em_host_refusal) or CORE_EIO. */
int em_host_inbound_at(struct em_host *h, uint64_t door, const char *gw, size_t gwlen,
                       const void *frames, size_t len);
/* As em_host_inbound_at from EM_HOST_DOOR_ANY: its DISCONNECT ends gw's
 * session unless an open door holds gw (another door took it over). */
int em_host_inbound(struct em_host *h, const char *gw, size_t gwlen, const void *frames,
                    size_t len);
/* True when door holds gw (replies for gw belong there). */
bool em_host_door_holds(struct em_host *h, uint64_t door, const char *gw, size_t gwlen);
/* The answer to a refused message, REJECT reason=LOGGED_IN_ELSEWHERE, into
 * frame[0..cap); returns its length (cap >= EM_FRAME_MAX). */
int em_host_refusal(uint8_t *frame, size_t cap);
/* After a batch of inbound messages: flush the journal, publish what was
 * staged, snapshot when due. Returns 0 or CORE_EIO. */
int em_host_batch_end(struct em_host *h, unsigned handled);
/* The clock timer: journal the elapsed time as a TICK, fire due schedule
 * lines, then as em_host_batch_end. Returns 0 or CORE_EIO. */
int em_host_tick(struct em_host *h);
/* Flush and publish what is staged (on stop). Returns 0 or CORE_EIO. */
int em_host_flush(struct em_host *h);
/* The market-data timer: one MD line per symbol changed since its last:
 *   MD sym=<s> seq=<n> epoch=<n> phase=<p> last=<px|-> lastqty=<n>
 *      volume=<n> trades=<n> tick=<px> lot=<n> decimals=<n> band=<pct|->
 *      cb_band=<pct|-> bids=<px>:<shown>:<orders>,... asks=...
 * (md_depth levels; seq numbers each symbol's stream from 1 in this run,
 * epoch is the run's start in ns of wall time). */
void em_host_publish_md(struct em_host *h);

/* One query (a REP request, between messages), answered into out[0..cap)
 * with *reply its topic; returns the answer's length. Topic "trades",
 * payload "<from tid> [<max>]": the TRADE lines from that id on that are
 * in the trade log, one per line, as many as fit (empty: none yet).
 * Topic "book", payload "<SYM>": the symbol's MD line now, numbered as its
 * stream's last message. Topic "symbol", payload "<n>": the same for the
 * nth symbol in definition order (from 1), "unknown symbol" past the last.
 * Anything else, or a failure: topic "error". */
size_t em_host_query(struct em_host *h, const char *topic, size_t tl, const void *payload,
                     size_t len, const struct em_bus_topic **reply, char *out, size_t cap);

/* A snapshot blob starts with the host's section (the resend state of
 * docs/alf.md I: per gateway id the highest message number handled and
 * the first replies kept; the last event number and the events kept),
 * then the engine's bytes (em_engine_restore).
 * Checks the section of data[0..len): 0 and *engine_off (where the
 * engine's bytes start), or CORE_EPROTO. For tools and the fuzzer;
 * em_host_open reads it itself. */
int em_host_snapshot_section(const void *data, size_t len, size_t *engine_off);

struct em_host_stats *em_host_stats(struct em_host *h);
/* The journal and the trade log (their counters for metrics), the engine
 * (read only). */
struct em_trade_log *em_host_trade_log(struct em_host *h);
struct em_journal *em_host_journal(struct em_host *h);
const struct em_engine *em_host_engine(const struct em_host *h);
/* The engine clock in ms (sum of the journaled TICKs). */
uint64_t em_host_clock_ms(const struct em_host *h);

#endif
