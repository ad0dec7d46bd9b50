/*
 * edumatcher-engine: the matching engine as a process.
 *
 *   gateways --PUSH [gw][frames]--> (bind) PULL  engine  PUB (bind) -->
 *       order.ack.<gw>  [frames]     events for one trader, binary frames
 *                                    (all of one batch in one message)
 *       trade.executed  "TRADE ..."  one text line per trade, as it happens
 *       md.<SYM>        "MD ..."     throttled per-symbol market data
 *   health.engine --> the monitor (PUB connect)
 *
 * A bus message from a gateway carries one or more frames of one session;
 * each is a message of its own below.
 *
 * Message life (one inbound message, to completion, in this order):
 *   1. decode the binary frame (em_frame_decode validates it completely);
 *   2. append [gw][frame] to the journal;
 *   3. em_engine_submit: events are staged (encoded into a preallocated
 *      arena), nothing is published yet;
 * and at the end of each batch (em_bus on_batch, or when the arena fills):
 *   4. em_journal_flush (write + fsync per policy), then
 *   5. publish the staged events, each trader's events of the batch in
 *      one bus message (fewer sends and wake-ups per order; docs/perf.md).
 * So every accepted message is in the journal before any of its effects is
 * visible (docs/edumatcher-exchange.md, the journal): a trader never holds an ACK for an
 * order that a restart could lose.
 *
 * Determinism of restarts: the engine's clock is injected. The process
 * turns elapsed monotonic time into journaled `TICK ms=<n>` operator
 * messages (between messages, never inside one), so timers fire at the
 * same point of the message stream on replay. On start the journal is
 * replayed through the same submit path with publishing off, which
 * rebuilds the same books, the same next order and trade ids. The symbol
 * file is applied (and journaled) only when the journal is empty; after
 * that the journal is the source of truth.
 *
 * Snapshots bound the replay: between messages (after a batch is published,
 * or on the clock timer), every --snapshot-records journal records or
 * --snapshot-interval-ms, the process writes its state through
 * em_journal_snapshot (temp file, fsync, rename; older segments are then
 * deleted). The blob is the process's own part (the engine clock and each
 * symbol's market-data totals) followed by em_engine_snapshot's bytes. On
 * start the journal hands over the latest valid snapshot, which is restored
 * (the per-order notes rebuilt from the engine's open orders), and only the
 * records after it are replayed.
 *
 * Schedules: `AT <ms> <operator line>` in the symbols file fires that
 * message (journaled, as a message from OPS) when the engine clock
 * reaches <ms>, e.g. `AT 3600000 PHASE sym=ABC phase=CLOSED`.
 *
 * Market data is between messages: a timer publishes, at most once per
 * symbol per --md-interval-ms and only when its book changed, a snapshot:
 *   MD sym=<s> seq=<n> epoch=<n> phase=<p> last=<px|-> lastqty=<n> volume=<n>
 *      trades=<n> bids=<px>:<shown>:<orders>,... asks=...  (best --md-depth levels)
 * seq counts the messages of one symbol's stream from 1, without gaps, in
 * one run of the process (epoch, its start time in ns since the epoch,
 * changes when the engine restarts): a subscriber that sees seq skip, or
 * the epoch change, has lost messages. A late joiner asks the query socket
 * for `book <SYM>`: the same line for the book now, with the seq of the
 * stream's last message, then applies the stream's messages above it.
 */
#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "edumatcher/gateway/alf/alf.h"
#include "edumatcher/engine/engine.h"
#include "edumatcher/monitor/health.h"
#include "edumatcher/bus/journal.h"
#include "edumatcher/bus/trade_log.h"
#include "edumatcher/engine/msg.h"
#include "core/proc.h"
#include "edumatcher/bus/zmq_bus.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

static char pull_ep[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9100";
static char pub_ep[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9101";
static char health_ep[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9102";
static char journal_dir[CORE_OPT_STRLEN] = "em-journal";
static int fsync_policy = EM_FSYNC_BATCH;
static int64_t fsync_interval_ms = 10;
static char symbols_file[CORE_OPT_STRLEN] = "";
static int64_t md_interval_ms = 100;
static int64_t md_depth = 5;
static int64_t tick_ms = 100;
static int64_t beacon_ms = 1000;
static int64_t grace_ms = 300;
static char loglevel[CORE_OPT_STRLEN] = "notice";
static int64_t snapshot_records = 1000000;
static int64_t snapshot_interval_ms = 600000;
static char query_ep[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9103";

static const struct core_option options[] = {
    {"pull", CORE_OPT_STRING, pull_ep, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "endpoint to bind for inbound frames from gateways"},
    {"pub", CORE_OPT_STRING, pub_ep, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "endpoint to bind for events, trades and market data"},
    {"health", CORE_OPT_STRING, health_ep, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the monitor's health endpoint (\"\": no beacons)"},
    {"journal-dir", CORE_OPT_STRING, journal_dir, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "journal directory (created if missing)"},
    {"fsync", CORE_OPT_ENUM, &fsync_policy, 0, 0, em_fsync_policy_names, CORE_OPT_IMMUTABLE,
     "journal fsync policy"},
    {"fsync-interval-ms", CORE_OPT_INT, &fsync_interval_ms, 0, 60000, NULL, CORE_OPT_IMMUTABLE,
     "with --fsync interval"},
    {"symbols-file", CORE_OPT_STRING, symbols_file, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "operator lines (SYMBOL, PHASE, ...) applied when the journal is empty, and "
     "`AT <ms> <line>` schedule lines fired at that engine time"},
    {"md-interval-ms", CORE_OPT_INT, &md_interval_ms, 1, 60000, NULL, 0,
     "market data: at most one update per symbol per interval"},
    {"md-depth", CORE_OPT_INT, &md_depth, 0, 50, NULL, 0,
     "market data: price levels per side in each snapshot"},
    {"tick-ms", CORE_OPT_INT, &tick_ms, 1, 60000, NULL, CORE_OPT_IMMUTABLE,
     "clock resolution: elapsed time is journaled as TICKs this often"},
    {"beacon-ms", CORE_OPT_INT, &beacon_ms, 10, 60000, NULL, 0, "health beacon interval"},
    {"startup-grace-ms", CORE_OPT_INT, &grace_ms, 0, 60000, NULL, CORE_OPT_IMMUTABLE,
     "after binding PUB, wait this long for subscribers before taking input"},
    {"loglevel", CORE_OPT_STRING, loglevel, 0, 0, NULL, 0, "debug|verbose|notice|warning"},
    {"snapshot-records", CORE_OPT_INT, &snapshot_records, 0, INT64_MAX, NULL, 0,
     "snapshot the state after this many journal records (0: not by count)"},
    {"snapshot-interval-ms", CORE_OPT_INT, &snapshot_interval_ms, 0, 604800000, NULL, 0,
     "snapshot the state this often when records came in (0: not by time)"},
    {"query", CORE_OPT_STRING, query_ep, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "endpoint to bind for queries (REP): trades by id for recovery (\"\": none)"},
    {NULL, 0, NULL, 0, 0, NULL, 0, NULL},
};

#define ARENA    (4u << 20) /* staged event bytes per batch */
#define MAX_SYMS 1024
#define MAX_GW   65536
#define JREC_MAX (1 + EM_GW_MAX + EM_FRAME_MAX)

/*
 * A staged event: [topic pointer][u16 len][chain][bytes], packed in the
 * arena. The binary events of one gateway id in one batch are chained
 * (`next`: arena offset + 1 of its next event for the same gw, 0 at the
 * end) and published as one message of concatenated frames at the place
 * of the first, so a batch costs one bus message per trader rather than
 * one per event; each trader's events keep their order. Text lines
 * (trades) are never chained: a subscriber gets one line per message.
 */
struct staged {
    const struct em_bus_topic *topic;
    uint32_t next; /* offset + 1 of the next event of the same chain */
    uint16_t len;
    bool chained; /* a later link of a chain: sent with its head */
    uint8_t data[];
};

struct sym_md {
    char name[EM_SYM_MAX + 1];
    struct em_bus_topic topic;
    struct em_price last;
    uint32_t last_qty;
    uint64_t volume, trades;
    uint64_t md_seq; /* md messages published in this run */
    bool changed;
};

/* What the process remembers of each order id (ids are dense from 1). */
struct oinfo {
    uint16_t sym; /* index into syms + 1; 0: unknown */
    uint8_t side;
};

struct engine_proc {
    uv_loop_t *loop;
    void *zctx;
    struct em_bus_sock pull, pub, query;
    bool has_query;
    struct em_health health;
    struct em_journal journal;
    struct em_trade_log tlog; /* every trade by id, for recovery (trade_log.h) */
    struct em_engine *e;
    uv_timer_t tick_timer, md_timer, grace_timer;
    struct core_proc proc; /* signals */
    bool replaying;
    uint64_t base_ns;   /* monotonic time at which engine time was now_ms */
    uint64_t engine_ms; /* the engine's clock: sum of journaled TICKs */
    uint64_t base_engine_ms;
    /* the message being handled */
    const struct em_msg *cur;
    /* topics per gateway id, built on first use */
    const struct em_bus_topic **gw_topic;
    struct em_topic_cache *ack_topics;
    struct em_bus_topic trade_topic;
    /* symbols seen in SYMBOL messages */
    struct sym_md syms[MAX_SYMS];
    unsigned nsyms;
    struct oinfo *orders;
    size_t orders_cap;
    /* first FILL of a trade, waiting for its other side */
    bool have_pending;
    uint16_t pend_gw;
    uint64_t pend_oid, pend_tid;
    /* staging */
    uint8_t *arena;
    size_t arena_len;
    unsigned staged;
    uint32_t batch_gen;   /* bumped at each publish: invalidates chain_tail */
    uint32_t *chain_gen;  /* per gw: the batch its chain_tail belongs to */
    uint32_t *chain_tail; /* per gw: offset + 1 of its last staged event */
    uint8_t sendbuf[EM_BUS_PAYLOAD_MAX];
    uint64_t bus_msgs_out;
    /* metrics */
    uint64_t msgs_in, bus_msgs_in, bad_frames, events_out, trades_out, md_out, journal_errors;
    uint64_t queries;
    uint64_t md_epoch; /* this run's start (ns, wall clock): resets md seq */
    int64_t open_orders, last_batch;
    uint64_t replayed;
    /* schedule: operator messages due at an engine time (AT lines) */
    struct sched {
        uint64_t at_ms;
        struct em_msg m;
    } * sched;
    size_t nsched, next_sched;
    /* snapshots: the blob being built, when the last one was taken */
    unsigned char *snap;
    size_t snap_len, snap_cap;
    bool snap_oom;
    uint64_t snap_ns;
    uint64_t snapshots, snapshot_failures;
    int64_t snapshot_seq, restored_seq;
};

static struct engine_proc P;

/* ---- symbols and orders ---- */

static int sym_index(const char *name)
{
    for (unsigned i = 0; i < P.nsyms; i++)
        if (strcmp(P.syms[i].name, name) == 0)
            return (int)i;
    return -1;
}

static void sym_add(const char *name)
{
    if (sym_index(name) >= 0 || P.nsyms == MAX_SYMS)
        return;
    struct sym_md *s = &P.syms[P.nsyms++];
    memset(s, 0, sizeof *s);
    strcpy(s->name, name);
    em_bus_topic_set(&s->topic, "md.", name, strlen(name));
}

static void order_note(uint64_t oid, int sym, uint8_t side)
{
    if (oid >= P.orders_cap) {
        /* Doubling: amortised, not an allocation per message. */
        size_t cap = P.orders_cap ? P.orders_cap : 1u << 16;
        while (cap <= oid)
            cap *= 2;
        struct oinfo *o = realloc(P.orders, cap * sizeof *o);
        if (!o)
            return;
        memset(o + P.orders_cap, 0, (cap - P.orders_cap) * sizeof *o);
        P.orders = o;
        P.orders_cap = cap;
    }
    P.orders[oid].sym = (uint16_t)(sym + 1);
    P.orders[oid].side = side;
}

static const struct oinfo *order_info(uint64_t oid)
{
    static const struct oinfo none;
    return oid < P.orders_cap ? &P.orders[oid] : &none;
}

/* ---- staging and publishing ---- */

static void publish_staged(void);
static void maybe_snapshot(void);

static void flush_and_publish(void)
{
    if (em_journal_flush(&P.journal) != 0) {
        /* Without the journal the rule cannot be kept: stop rather than
         * publish effects a restart would lose. */
        P.journal_errors++;
        CORE_WARN("engine: journal write failed; stopping");
        exit(1);
    }
    /* After the journal (a torn trade log is refilled by replay), before
     * publishing (a published trade can always be recovered by id). */
    if (em_trade_log_flush(&P.tlog) != 0) {
        P.journal_errors++;
        CORE_WARN("engine: trade log write failed; stopping");
        exit(1);
    }
    publish_staged();
}

/* Stage one event for publishing at the end of the batch. gw >= 0 chains
 * it to that gateway id's other binary events of the batch; -1 (text
 * lines) stands alone. */
static void stage(const struct em_bus_topic *topic, int gw, const void *data, size_t len)
{
    size_t need = sizeof(struct staged) + len;
    need = (need + 7) & ~(size_t)7;
    if (P.arena_len + need > ARENA)
        flush_and_publish(); /* journal first, then publish: rule kept */
    uint32_t off = (uint32_t)P.arena_len;
    struct staged *s = (struct staged *)(P.arena + off);
    s->topic = topic;
    s->next = 0;
    s->len = (uint16_t)len;
    s->chained = false;
    memcpy(s->data, data, len);
    if (gw >= 0) {
        if (P.chain_gen[gw] == P.batch_gen && P.chain_tail[gw]) {
            ((struct staged *)(P.arena + P.chain_tail[gw] - 1))->next = off + 1;
            s->chained = true;
        }
        P.chain_gen[gw] = P.batch_gen;
        P.chain_tail[gw] = off + 1;
    }
    P.arena_len += need;
    P.staged++;
}

static void send_staged(const struct em_bus_topic *topic, const void *data, size_t len)
{
    em_bus_send(&P.pub, topic, data, len);
    P.bus_msgs_out++;
}

/* Publish the staged events in order; a chain goes out at its head as
 * few messages of concatenated frames (each at most EM_BUS_PAYLOAD_MAX,
 * what a receiver accepts). */
static void publish_staged(void)
{
    size_t off = 0;
    while (off < P.arena_len) {
        struct staged *s = (struct staged *)(P.arena + off);
        off += (sizeof *s + s->len + 7) & ~(size_t)7;
        if (s->chained)
            continue;
        if (!s->next) {
            send_staged(s->topic, s->data, s->len);
            continue;
        }
        size_t n = 0;
        for (struct staged *e = s;; e = (struct staged *)(P.arena + e->next - 1)) {
            if (n + e->len > sizeof P.sendbuf) {
                send_staged(s->topic, P.sendbuf, n);
                n = 0;
            }
            memcpy(P.sendbuf + n, e->data, e->len);
            n += e->len;
            if (!e->next)
                break;
        }
        send_staged(s->topic, P.sendbuf, n);
    }
    P.events_out += P.staged;
    P.arena_len = 0;
    P.staged = 0;
    if (++P.batch_gen == 0) /* wrapped: no stale tail may look current */
        memset(P.chain_tail, 0, MAX_GW * sizeof *P.chain_tail);
}

static const struct em_bus_topic *ack_topic(uint16_t gw)
{
    if (!P.gw_topic[gw]) {
        const char *name = em_engine_gateway_name(P.e, gw);
        P.gw_topic[gw] = em_topic_cache_get(P.ack_topics, name, strlen(name));
        if (!P.gw_topic[gw]) {
            /* The cache is full: build a dedicated topic (once per gw). */
            struct em_bus_topic *t = malloc(sizeof *t);
            if (t && em_bus_topic_set(t, "order.ack.", name, strlen(name)) == 0)
                P.gw_topic[gw] = t;
        }
    }
    return P.gw_topic[gw];
}

static char *put_str(char *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

static char *put_u64(char *p, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    while (n)
        *p++ = tmp[--n];
    return p;
}

static void on_trade(uint16_t gw_a, const struct em_msg *fill_a, uint16_t gw_b,
                     const struct em_msg *fill_b)
{
    const struct oinfo *a = order_info(fill_a->oid);
    const struct oinfo *b = order_info(fill_b->oid);
    int sym = a->sym ? a->sym - 1 : b->sym ? b->sym - 1 : -1;
    bool a_buys = a->side == EM_SIDE_BUY || (a->side == 0 && b->side == EM_SIDE_SELL);
    uint16_t buy_gw = a_buys ? gw_a : gw_b, sell_gw = a_buys ? gw_b : gw_a;
    uint64_t buy_oid = a_buys ? fill_a->oid : fill_b->oid;
    uint64_t sell_oid = a_buys ? fill_b->oid : fill_a->oid;
    if (sym >= 0) {
        struct sym_md *s = &P.syms[sym];
        s->last = fill_b->px;
        s->last_qty = fill_b->qty;
        s->volume += fill_b->qty;
        s->trades++;
        s->changed = true;
    }
    /* On replay only a trade the log lacks (the crash came between the
     * journal's flush and the log's) is formatted, to be logged again. */
    if (P.replaying && fill_b->tid < em_trade_log_next(&P.tlog))
        return;
    /* TRADE tid=<n> sym=<s> px=<p> qty=<n> buy=<gw> sell=<gw> buy_oid=<n>
     * sell_oid=<n>, formatted by hand: one per trade, inside the message,
     * where snprintf cost more than the match. Every part is bounded
     * (symbols and gw ids are short), so 256 bytes always suffice. */
    char line[256], *p = line;
    p = put_str(p, "TRADE tid=");
    p = put_u64(p, fill_b->tid);
    p = put_str(p, " sym=");
    p = put_str(p, sym >= 0 ? P.syms[sym].name : "UNKNOWN");
    p = put_str(p, " px=");
    p += em_alf_format_price(fill_b->px, p);
    p = put_str(p, " qty=");
    p = put_u64(p, fill_b->qty);
    p = put_str(p, " buy=");
    p = put_str(p, em_engine_gateway_name(P.e, buy_gw));
    p = put_str(p, " sell=");
    p = put_str(p, em_engine_gateway_name(P.e, sell_gw));
    p = put_str(p, " buy_oid=");
    p = put_u64(p, buy_oid);
    p = put_str(p, " sell_oid=");
    p = put_u64(p, sell_oid);
    if (em_trade_log_full(&P.tlog)) {
        /* On replay the journal is on disk already; live, it goes first
         * (trade_log.h invariant 3), as when the arena fills. */
        if (P.replaying ? em_trade_log_flush(&P.tlog) != 0 : (flush_and_publish(), false)) {
            CORE_WARN("engine: trade log write failed; stopping");
            exit(1);
        }
    }
    int rc = em_trade_log_append(&P.tlog, fill_b->tid, line, (size_t)(p - line));
    if (rc != 0) {
        /* A gap means the log and the journal disagree: not recoverable
         * by this process, and clearing would miss trades. */
        CORE_WARN("engine: trade log refused trade %" PRIu64 ": %s; stopping", fill_b->tid,
                  core_strerror(rc));
        exit(1);
    }
    if (P.replaying)
        return;
    stage(&P.trade_topic, -1, line, (size_t)(p - line));
    P.trades_out++;
}

static struct em_msg pend_fill;

/* The engine's sink: called for each event, inside em_engine_submit. */
static void sink(void *ctx, uint16_t gw, const struct em_msg *ev)
{
    const struct em_msg *cur = P.cur;
    if (ev->kind == EM_MSG_ACK && cur && cur->kind == EM_MSG_NEW)
        order_note(ev->oid, sym_index(cur->sym), cur->side);
    if (ev->kind == EM_MSG_FILL) {
        /* The two FILLs of a trade come one after the other (ALF §5.2). */
        if (P.have_pending && P.pend_tid == ev->tid) {
            on_trade(P.pend_gw, &pend_fill, gw, ev);
            P.have_pending = false;
        } else {
            pend_fill = *ev;
            P.pend_gw = gw;
            P.pend_tid = ev->tid;
            P.have_pending = true;
        }
    }
    if (ev->present & EM_BIT(oid)) {
        const struct oinfo *o = order_info(ev->oid);
        if (o->sym)
            P.syms[o->sym - 1].changed = true; /* its book changed */
    }
    if (P.replaying)
        return;
    /* ACK and FILL are most events: the unchecked builders write the same
     * bytes as em_frame_encode for exactly these fields (test_msg pins it),
     * at a fraction of its cost. */
    static const uint32_t ack_fields = EM_BIT(cl) | EM_BIT(oid);
    static const uint32_t fill_fields = EM_BIT(cl) | EM_BIT(oid) | EM_BIT(tid) | EM_BIT(px) |
                                        EM_BIT(qty) | EM_BIT(leaves) | EM_BIT(cum);
    uint8_t frame[EM_FRAME_MAX];
    int n;
    if (ev->kind == EM_MSG_ACK && ev->present == ack_fields)
        n = (int)em_frame_build_ack(frame, ev->cl, ev->oid);
    else if (ev->kind == EM_MSG_FILL && ev->present == fill_fields)
        n = (int)em_frame_build_fill(frame, ev->cl, ev->oid, ev->tid, ev->px, ev->qty, ev->leaves,
                                     ev->cum);
    else
        n = em_frame_encode(ev, frame, sizeof frame);
    const struct em_bus_topic *t = ack_topic(gw);
    if (n > 0 && t)
        stage(t, gw, frame, (size_t)n);
}

/* ---- the inbound path ---- */

/* Handle one decoded message m whose journal form is rec[0..len):
 * [u8 gwlen][gw][frame]. Journals it first when `append`. */
static int handle_msg(const uint8_t *rec, size_t len, struct em_msg *m, bool append)
{
    int gw = em_engine_gateway(P.e, (const char *)rec + 1, rec[0]);
    if (gw < 0)
        return CORE_EPROTO;
    if (append) {
        if (em_journal_append(&P.journal, rec, len, NULL) != 0) {
            P.journal_errors++;
            CORE_WARN("engine: journal append failed; stopping");
            exit(1);
        }
    }
    if (m->kind == EM_MSG_SYMBOL)
        sym_add(m->sym);
    if (m->kind == EM_MSG_TICK)
        P.engine_ms += m->ms;
    if (m->present & EM_BIT(sym)) {
        int si = sym_index(m->sym);
        if (si >= 0)
            P.syms[si].changed = true; /* phase, halt, mass cancel, ... */
    }
    P.cur = m;
    int rc, refused = em_engine_authorize(P.e, (uint16_t)gw, m->kind);
    if (refused) /* its code: SYNTAX for an event kind (A.7), else AUTH (C.4) */
        em_engine_reject(P.e, (uint16_t)gw, m, refused), rc = 0;
    else
        rc = em_engine_submit(P.e, (uint16_t)gw, m);
    P.cur = NULL;
    return rc;
}

/* Handle one journaled-form record: [u8 gwlen][gw][frame]. */
static int handle_record(const uint8_t *rec, size_t len, bool append)
{
    if (len < 2 || rec[0] == 0 || rec[0] > EM_GW_MAX || len < 1u + rec[0])
        return CORE_EPROTO;
    size_t gl = rec[0];
    const uint8_t *frame = rec + 1 + gl;
    size_t flen = len - 1 - gl;
    struct em_msg m;
    if (em_frame_decode(frame, flen, &m) != (int)flen)
        return CORE_EPROTO;
    return handle_msg(rec, len, &m, append);
}

/* Submit an operator message as if it had arrived from gw OPS. */
static int submit_ops(const struct em_msg *m)
{
    uint8_t rec[JREC_MAX];
    rec[0] = 3;
    memcpy(rec + 1, EM_OPS_GW, 3);
    int n = em_frame_encode(m, rec + 4, sizeof rec - 4);
    if (n < 0)
        return n;
    return handle_record(rec, 4 + (size_t)n, true);
}

/* Journal the time that has passed as a TICK (between messages only). */
static void advance_clock(void)
{
    uint64_t now = P.base_engine_ms + (core_now_ns() - P.base_ns) / 1000000u;
    if (now <= P.engine_ms)
        return;
    struct em_msg m = {.kind = EM_MSG_TICK, .present = EM_BIT(ms)};
    m.ms = now - P.engine_ms;
    submit_ops(&m);
    /* Scheduled operator messages that are due, in file order. They are
     * journaled as they fire, so a replay repeats them at the same point
     * of the stream; after a restart, entries at or before the replayed
     * clock have fired already. */
    while (P.next_sched < P.nsched && P.sched[P.next_sched].at_ms <= P.engine_ms) {
        submit_ops(&P.sched[P.next_sched].m);
        P.next_sched++;
    }
}

/*
 * One bus message from a gateway: the topic frame is the sender's gateway
 * id, the payload one or more binary frames of that session, in the order
 * it sent them (the gateway packs what one read brought). Each frame is
 * handled to completion, journal form [u8 gwlen][gw][frame] first; a frame
 * that does not decode ends the message (what follows it cannot be
 * delimited safely).
 */
static void on_inbound(struct em_bus_sock *s, const char *topic, size_t tl, const void *payload,
                       size_t len, void *data)
{
    bool sample = core_metrics_sample_due(&P.health.metrics);
    uint64_t t0 = sample ? core_now_ns() : 0;
    P.bus_msgs_in++;
    if (tl == 0 || tl > EM_GW_MAX) {
        P.bad_frames++;
        return;
    }
    uint8_t rec[JREC_MAX];
    rec[0] = (uint8_t)tl;
    memcpy(rec + 1, topic, tl);
    const uint8_t *p = payload, *end = p + len;
    while (p < end) {
        struct em_msg m;
        int n = em_frame_decode(p, (size_t)(end - p), &m);
        if (n <= 0) {
            P.bad_frames++;
            break;
        }
        P.msgs_in++;
        memcpy(rec + 1 + tl, p, (size_t)n);
        if (handle_msg(rec, 1 + tl + (size_t)n, &m, true) == CORE_EPROTO)
            P.bad_frames++;
        p += n;
    }
    if (sample)
        core_metrics_record(&P.health.metrics, core_now_ns() - t0);
}

static void on_batch(struct em_bus_sock *s, unsigned handled, void *data)
{
    P.last_batch = handled;
    flush_and_publish();
    maybe_snapshot();
}

static void on_tick_timer(uv_timer_t *t)
{
    advance_clock();
    flush_and_publish();
    maybe_snapshot();
}

/* Append `key=px:shown:orders,...` for one side's best levels. */
static int format_side(char *out, size_t cap, const char *key, const char *sym, int side)
{
    struct em_depth_level lv[50];
    int n = em_engine_depth(P.e, sym, side, lv, (int)md_depth);
    int len = snprintf(out, cap, " %s=", key);
    for (int i = 0; i < n && len > 0 && (size_t)len < cap; i++) {
        char px[32];
        px[em_alf_format_price(lv[i].px, px)] = '\0';
        len += snprintf(out + len, cap - (size_t)len, "%s%s:%" PRIu64 ":%u", i ? "," : "", px,
                        lv[i].shown, lv[i].orders);
    }
    return len;
}

/* Market data between messages: one snapshot per changed symbol per
 * interval (the engine's depth read costs O(orders in the levels read)). */
/* The MD line of symbol s with sequence number seq into line; returns its
 * length, or -1 if it does not fit. */
static int format_md(const struct sym_md *s, uint64_t seq, char *line, size_t cap)
{
    char px[32] = "";
    uint8_t phase = 0;
    struct em_price last;
    int has_last = 0;
    em_engine_symbol_state(P.e, s->name, &phase, &last, &has_last);
    if (has_last)
        px[em_alf_format_price(last, px)] = '\0';
    int n = snprintf(line, cap,
                     "MD sym=%s seq=%" PRIu64 " epoch=%" PRIu64
                     " phase=%s last=%s lastqty=%u volume=%" PRIu64 " trades=%" PRIu64,
                     s->name, seq, P.md_epoch, em_phase_name(phase), has_last ? px : "-",
                     s->last_qty, s->volume, s->trades);
    if (md_depth > 0 && n > 0 && (size_t)n < cap) {
        n += format_side(line + n, cap - (size_t)n, "bids", s->name, EM_SIDE_BUY);
        if ((size_t)n < cap)
            n += format_side(line + n, cap - (size_t)n, "asks", s->name, EM_SIDE_SELL);
    }
    return n > 0 && (size_t)n < cap ? n : -1;
}

static void on_md_timer(uv_timer_t *t)
{
    for (unsigned i = 0; i < P.nsyms; i++) {
        struct sym_md *s = &P.syms[i];
        if (!s->changed)
            continue;
        char line[4096];
        int n = format_md(s, s->md_seq + 1, line, sizeof line);
        if (n < 0)
            continue;
        em_bus_send(&P.pub, &s->topic, line, (size_t)n);
        s->md_seq++;
        s->changed = false;
        P.md_out++;
    }
}

/* ---- snapshots ----
 *
 * Blob: "EMENGPRC" u32 version(1) u64 engine_ms u32 nsyms, per symbol
 * u8 len name[len] i64 last.mant u8 last.dec u32 last_qty u64 volume
 * u64 trades; then the engine's snapshot (engine.h) to the end. Integers
 * little-endian. */

static const char PROC_MAGIC[8] = {'E', 'M', 'E', 'N', 'G', 'P', 'R', 'C'};

static int snap_add(void *ctx, const void *data, size_t len)
{
    if (P.snap_len + len > P.snap_cap) {
        size_t cap = P.snap_cap ? P.snap_cap : 1u << 20;
        while (cap < P.snap_len + len)
            cap *= 2;
        unsigned char *n = realloc(P.snap, cap);
        if (!n) {
            P.snap_oom = true; /* sticky: a blob with a hole is never written */
            return CORE_ENOMEM;
        }
        P.snap = n;
        P.snap_cap = cap;
    }
    memcpy(P.snap + P.snap_len, data, len);
    P.snap_len += len;
    return 0;
}

static void snap_u(uint64_t v, unsigned width)
{
    unsigned char b[8];
    for (unsigned i = 0; i < width; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    snap_add(NULL, b, width);
}

/* The snapshot step: between messages only, when enough records or time
 * have gone by. Rare slow work (O(open orders)); a failure is logged and
 * the journal simply keeps growing. */
static void maybe_snapshot(void)
{
    uint64_t last_rec = P.journal.next_seq - 1, since = last_rec - P.journal.snapshot_seq;
    uint64_t now = core_now_ns();
    bool by_count = snapshot_records > 0 && since >= (uint64_t)snapshot_records;
    bool by_time = snapshot_interval_ms > 0 && since > 0 &&
                   now - P.snap_ns >= (uint64_t)snapshot_interval_ms * 1000000u;
    if (P.replaying || !(by_count || by_time))
        return;
    P.snap_ns = now;
    P.snap_len = 0;
    P.snap_oom = false;
    snap_add(NULL, PROC_MAGIC, sizeof PROC_MAGIC);
    snap_u(1, 4);
    snap_u(P.engine_ms, 8);
    snap_u(P.nsyms, 4);
    for (unsigned i = 0; i < P.nsyms; i++) {
        const struct sym_md *s = &P.syms[i];
        size_t n = strlen(s->name);
        snap_u(n, 1);
        snap_add(NULL, s->name, n);
        snap_u((uint64_t)s->last.mant, 8);
        snap_u(s->last.dec, 1);
        snap_u(s->last_qty, 4);
        snap_u(s->volume, 8);
        snap_u(s->trades, 8);
    }
    int rc = em_engine_snapshot(P.e, snap_add, NULL);
    if (rc == 0 && P.snap_oom)
        rc = CORE_ENOMEM;
    if (rc == 0)
        rc = em_journal_snapshot(&P.journal, P.snap, P.snap_len);
    /* the blob is as large as the books: do not hold it between snapshots */
    free(P.snap);
    P.snap = NULL;
    P.snap_cap = 0;
    if (rc) {
        P.snapshot_failures++;
        CORE_WARN("engine: snapshot failed: %s", core_strerror(rc));
        return;
    }
    P.snapshots++;
    P.snapshot_seq = (int64_t)P.journal.snapshot_seq;
    CORE_INFO("engine: snapshot after record %" PRIu64 " (%zu bytes, %.1f ms)",
              P.journal.snapshot_seq, P.snap_len, (double)(core_now_ns() - now) / 1e6);
}

static uint64_t get_u(const unsigned char **p, size_t *left, unsigned width, bool *bad)
{
    if (*bad || *left < width) {
        *bad = true;
        return 0;
    }
    uint64_t v = 0;
    for (unsigned i = 0; i < width; i++)
        v |= (uint64_t)(*p)[i] << (8 * i);
    *p += width;
    *left -= width;
    return v;
}

static void note_open_order(void *ctx, uint64_t oid, const char *sym, uint8_t side)
{
    order_note(oid, sym_index(sym), side);
}

/* The restore step: the journal's latest valid snapshot, before replay. */
static int restore_snapshot(const void *data, size_t len, uint64_t seq, void *ud)
{
    const unsigned char *p = data;
    size_t left = len;
    bool bad = len < sizeof PROC_MAGIC || memcmp(p, PROC_MAGIC, sizeof PROC_MAGIC) != 0;
    if (!bad) {
        p += sizeof PROC_MAGIC;
        left -= sizeof PROC_MAGIC;
    }
    if (get_u(&p, &left, 4, &bad) != 1)
        bad = true;
    P.engine_ms = get_u(&p, &left, 8, &bad);
    uint64_t nsyms = get_u(&p, &left, 4, &bad);
    for (uint64_t i = 0; !bad && i < nsyms; i++) {
        size_t n = (size_t)get_u(&p, &left, 1, &bad);
        if (bad || n == 0 || n > EM_SYM_MAX || left < n || P.nsyms == MAX_SYMS) {
            bad = true;
            break;
        }
        char name[EM_SYM_MAX + 1];
        memcpy(name, p, n);
        name[n] = 0;
        p += n;
        left -= n;
        if (sym_index(name) >= 0) {
            bad = true; /* each symbol once */
            break;
        }
        sym_add(name);
        struct sym_md *s = &P.syms[P.nsyms - 1];
        s->last.mant = (int64_t)get_u(&p, &left, 8, &bad);
        s->last.dec = (uint8_t)get_u(&p, &left, 1, &bad);
        s->last_qty = (uint32_t)get_u(&p, &left, 4, &bad);
        s->volume = get_u(&p, &left, 8, &bad);
        s->trades = get_u(&p, &left, 8, &bad);
        s->changed = true;
    }
    int rc = bad ? CORE_EPROTO : em_engine_restore(P.e, p, left);
    if (rc) {
        CORE_WARN("engine: snapshot after record %" PRIu64 " cannot be restored: %s", seq,
                  core_strerror(rc));
        return CORE_EIO;
    }
    em_engine_for_each_order(P.e, note_open_order, NULL);
    P.restored_seq = (int64_t)seq;
    return 0;
}

/* ---- queries (REP, between messages) ---- */

/* One query. Topic "trades", payload "<from tid> [<max>]": the TRADE lines
 * of trades from that id on that are in the trade log (so already
 * published or about to be), one per line, as many as fit one bus
 * message; an empty answer means none yet. Topic "book", payload "<SYM>":
 * the symbol's MD line now (see the top of this file). Anything else:
 * topic "error". */
static void on_query(struct em_bus_sock *s, const char *topic, size_t tl, const void *payload,
                     size_t len, void *data)
{
    static const struct em_bus_topic trades_t = {6, "trades"}, error_t = {5, "error"};
    P.queries++;
    char arg[64];
    size_t n = len < sizeof arg - 1 ? len : sizeof arg - 1;
    memcpy(arg, payload, n);
    arg[n] = '\0';
    unsigned long long from = 0;
    unsigned max = 1000;
    if (tl == 6 && memcmp(topic, "trades", 6) == 0 && sscanf(arg, "%llu %u", &from, &max) >= 1) {
        char out[EM_BUS_PAYLOAD_MAX];
        unsigned got;
        long w = em_trade_log_read(&P.tlog, from, max, out, sizeof out, &got);
        if (w >= 0) {
            em_bus_send(s, &trades_t, out, (size_t)w);
            return;
        }
        em_bus_send(s, &error_t, "trade log unreadable", 20);
        return;
    }
    if (tl == 4 && memcmp(topic, "book", 4) == 0) {
        /* The book now, numbered as the stream's last message: every
         * message above it is newer (each is a whole snapshot). */
        static const struct em_bus_topic book_t = {4, "book"};
        int si = sym_index(arg);
        char line[EM_BUS_PAYLOAD_MAX];
        int w = si >= 0 ? format_md(&P.syms[si], P.syms[si].md_seq, line, sizeof line) : -1;
        if (w >= 0)
            em_bus_send(s, &book_t, line, (size_t)w);
        else
            em_bus_send(s, &error_t, "unknown symbol", 14);
        return;
    }
    em_bus_send(s, &error_t, "unknown query", 13);
}

/* ---- start-up ---- */

static void on_grace_over(uv_timer_t *t)
{
    int rc = em_bus_open(&P.pull, P.zctx, EM_BUS_PULL, pull_ep, true);
    if (rc) {
        CORE_WARN("engine: cannot bind %s: %s", pull_ep, core_strerror(rc));
        exit(1);
    }
    em_bus_watch(&P.pull, P.loop, 1024, on_inbound, NULL);
    P.pull.on_batch = on_batch;
    uv_close((uv_handle_t *)t, NULL);
    /* the ready line: tests and scripts wait for it */
    printf("edumatcher-engine pull %s pub %s journal %s replayed %" PRIu64 " snapshot %" PRId64
           "\n",
           pull_ep, pub_ep, journal_dir, P.replayed, P.restored_seq);
    fflush(stdout);
}

static int replay_record(const void *data, size_t len, uint64_t seq, void *ud)
{
    int rc = handle_record(data, len, false);
    if (rc == CORE_EPROTO) {
        CORE_WARN("engine: journal record %" PRIu64 " is not a message", seq);
        return CORE_EIO;
    }
    return rc < 0 ? rc : 0;
}

static int cmp_sched(const void *a, const void *b)
{
    const struct sched *x = a, *y = b;
    return x->at_ms < y->at_ms ? -1 : x->at_ms > y->at_ms;
}

/*
 * The symbols file: ALF §7 operator lines, applied now when `apply` (an
 * empty journal), and `AT <ms> <operator line>` schedule lines, fired when
 * the engine clock reaches <ms> (always loaded; see advance_clock).
 */
static int load_symbols_file(const char *path, bool apply)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        CORE_WARN("engine: cannot open %s", path);
        return CORE_ENOTFOUND;
    }
    char line[EM_ALF_LINE_MAX + 2];
    int lineno = 0, bad = 0;
    size_t cap = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t n = strcspn(line, "\r\n#");
        while (n && line[n - 1] == ' ')
            n--;
        if (n == 0)
            continue;
        char *msg = line;
        uint64_t at = 0;
        bool scheduled = n > 3 && memcmp(line, "AT ", 3) == 0;
        if (scheduled) {
            char *end;
            at = strtoull(line + 3, &end, 10);
            if (end == line + 3 || *end != ' ') {
                CORE_WARN("engine: %s:%d: AT needs a time in ms", path, lineno);
                bad++;
                continue;
            }
            msg = end + 1;
            n -= (size_t)(msg - line);
        }
        struct em_msg m;
        int code = em_alf_parse(msg, n, &m);
        if (code || em_msgs[m.kind].cls != EM_CLASS_OPER) {
            CORE_WARN("engine: %s:%d: not an operator message", path, lineno);
            bad++;
            continue;
        }
        if (!scheduled) {
            if (apply)
                submit_ops(&m);
            continue;
        }
        if (P.nsched == cap) {
            cap = cap ? cap * 2 : 16;
            struct sched *p = realloc(P.sched, cap * sizeof *p);
            if (!p) {
                fclose(f);
                return CORE_ENOMEM;
            }
            P.sched = p;
        }
        P.sched[P.nsched].at_ms = at;
        P.sched[P.nsched].m = m;
        P.nsched++;
    }
    fclose(f);
    /* insertion sort: stable, so equal times keep file order (few lines) */
    for (size_t i = 1; i < P.nsched; i++)
        for (size_t j = i; j > 0 && cmp_sched(&P.sched[j - 1], &P.sched[j]) > 0; j--) {
            struct sched t = P.sched[j];
            P.sched[j] = P.sched[j - 1];
            P.sched[j - 1] = t;
        }
    /* what the replayed clock has passed has fired already */
    while (P.next_sched < P.nsched && P.sched[P.next_sched].at_ms <= P.engine_ms)
        P.next_sched++;
    return bad ? CORE_EINVAL : 0;
}

static void on_health(struct em_health *h, void *data)
{
    struct em_engine_stats st;
    em_engine_stats(P.e, &st);
    P.open_orders = (int64_t)st.open_orders;
}

static void on_stop(struct core_proc *p, void *data)
{
    flush_and_publish();
    em_bus_close(&P.pull);
    em_bus_close(&P.pub);
    if (P.has_query)
        em_bus_close(&P.query);
    em_health_stop(&P.health);
    uv_close((uv_handle_t *)&P.tick_timer, NULL);
    uv_close((uv_handle_t *)&P.md_timer, NULL);
    if (!uv_is_closing((uv_handle_t *)&P.grace_timer))
        uv_close((uv_handle_t *)&P.grace_timer, NULL);
}

/* Events during replay go nowhere; the sink checks P.replaying. */
int main(int argc, char **argv)
{
    int rc, code;
    if (core_proc_options("edumatcher-engine", 'E', options, loglevel, argc, argv, &code))
        return code;

    P.loop = uv_default_loop();
    P.arena = malloc(ARENA);
    P.gw_topic = calloc(MAX_GW, sizeof *P.gw_topic);
    P.ack_topics = malloc(sizeof *P.ack_topics);
    P.chain_gen = calloc(MAX_GW, sizeof *P.chain_gen);
    P.chain_tail = calloc(MAX_GW, sizeof *P.chain_tail);
    if (!P.arena || !P.gw_topic || !P.ack_topics || !P.chain_gen || !P.chain_tail)
        return 1;
    em_topic_cache_init(P.ack_topics, "order.ack.");
    em_bus_topic_set(&P.trade_topic, "trade.executed", "", 0);
    struct em_engine_config cfg = {.sink = sink, .sink_ctx = NULL};
    P.e = em_engine_new(&cfg);
    if (!P.e)
        return 1;

    /* The trade log lives beside the journal; replay appends to it. */
    if (mkdir(journal_dir, 0755) != 0 && errno != EEXIST) {
        CORE_WARN("engine: cannot create %s: %s", journal_dir, strerror(errno));
        return 1;
    }
    rc = em_trade_log_open(&P.tlog, journal_dir,
                           fsync_policy == EM_FSYNC_ALWAYS || fsync_policy == EM_FSYNC_BATCH);
    if (rc) {
        CORE_WARN("engine: cannot open the trade log in %s: %s", journal_dir, core_strerror(rc));
        return 1;
    }

    /* Replay before anything can arrive or be published. */
    P.replaying = true;
    struct em_journal_opts jo = {.dir = journal_dir,
                                 .fsync = (enum em_fsync_policy)fsync_policy,
                                 .fsync_interval_ms = (uint64_t)fsync_interval_ms};
    struct em_journal_replay_stats st;
    uint64_t t0 = core_now_ns();
    rc = em_journal_open(&P.journal, &jo, restore_snapshot, replay_record, NULL, &st);
    if (rc) {
        CORE_WARN("engine: cannot open the journal in %s: %s", journal_dir, core_strerror(rc));
        return 1;
    }
    P.replaying = false;
    P.have_pending = false;
    if (em_trade_log_flush(&P.tlog) != 0) {
        CORE_WARN("engine: cannot write the trade log");
        return 1;
    }
    P.replayed = st.records;
    CORE_INFO("engine: restored the snapshot after record %" PRIu64 " and replayed %" PRIu64
              " journal records in %.1f ms (torn bytes %" PRIu64 ", engine clock %" PRIu64 " ms)",
              st.snapshot_seq, st.records, (double)(core_now_ns() - t0) / 1e6, st.torn_bytes,
              P.engine_ms);
    P.snap_ns = core_now_ns();
    P.snapshot_seq = (int64_t)st.snapshot_seq;
    P.base_ns = core_now_ns();
    P.base_engine_ms = P.engine_ms;
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    P.md_epoch = (uint64_t)wall.tv_sec * 1000000000u + (uint64_t)wall.tv_nsec;

    if (em_bus_ctx_new(&P.zctx) != 0)
        return 1;
    rc = em_bus_open(&P.pub, P.zctx, EM_BUS_PUB, pub_ep, true);
    if (rc) {
        CORE_WARN("engine: cannot bind %s: %s", pub_ep, core_strerror(rc));
        return 1;
    }
    if (query_ep[0]) {
        rc = em_bus_open(&P.query, P.zctx, EM_BUS_REP, query_ep, true);
        if (rc) {
            CORE_WARN("engine: cannot bind %s: %s", query_ep, core_strerror(rc));
            return 1;
        }
        em_bus_watch(&P.query, P.loop, 16, on_query, NULL);
        P.has_query = true;
    }
    if (symbols_file[0]) {
        bool fresh = st.records == 0 && st.snapshot_seq == 0;
        if (load_symbols_file(symbols_file, fresh) != 0)
            return 1;
        flush_and_publish();
        if (!fresh)
            CORE_INFO("engine: journal not empty; only the AT lines of %s are used (the "
                      "journal rules)",
                      symbols_file);
    }

    em_health_init(&P.health, "engine");
    struct core_metrics *mt = &P.health.metrics;
    core_metrics_counter(mt, "msgs_in", &P.msgs_in);
    core_metrics_counter(mt, "bad_frames", &P.bad_frames);
    core_metrics_counter(mt, "bus_msgs_in", &P.bus_msgs_in);
    core_metrics_counter(mt, "events_out", &P.events_out);
    core_metrics_counter(mt, "bus_msgs_out", &P.bus_msgs_out);
    core_metrics_counter(mt, "trades_out", &P.trades_out);
    core_metrics_counter(mt, "md_out", &P.md_out);
    core_metrics_counter(mt, "queries", &P.queries);
    core_metrics_counter(mt, "trades_logged", &P.tlog.count);
    core_metrics_counter(mt, "journal_records", &P.journal.records);
    core_metrics_counter(mt, "journal_syncs", &P.journal.syncs);
    core_metrics_gauge(mt, "open_orders", &P.open_orders);
    core_metrics_gauge(mt, "queue_depth", &P.last_batch);
    core_metrics_counter(mt, "snapshots", &P.snapshots);
    core_metrics_counter(mt, "snapshot_failures", &P.snapshot_failures);
    core_metrics_gauge(mt, "snapshot_seq", &P.snapshot_seq);
    core_metrics_gauge(mt, "restored_seq", &P.restored_seq);
    em_health_start_or_warn("engine", &P.health, P.loop, P.zctx, health_ep, (uint64_t)beacon_ms,
                            on_health, NULL);

    /* Input starts after a grace period: a PUB drops what it publishes
     * before a subscriber's subscription arrives, and after a restart the
     * gateways' SUB sockets need a moment to reconnect and subscribe
     * again. Meanwhile their messages wait in their PUSH queues. */
    uv_timer_init(P.loop, &P.grace_timer);
    uv_timer_start(&P.grace_timer, on_grace_over, (uint64_t)grace_ms, 0);
    uv_timer_init(P.loop, &P.tick_timer);
    uv_timer_start(&P.tick_timer, on_tick_timer, (uint64_t)tick_ms, (uint64_t)tick_ms);
    uv_timer_init(P.loop, &P.md_timer);
    uv_timer_start(&P.md_timer, on_md_timer, (uint64_t)md_interval_ms, (uint64_t)md_interval_ms);
    core_proc_signals_start(&P.proc, P.loop, "engine", on_stop, NULL);

    uv_run(P.loop, UV_RUN_DEFAULT);
    em_journal_close(&P.journal);
    em_trade_log_close(&P.tlog);
    core_proc_signals_close(&P.proc, P.loop);
    uv_loop_close(P.loop);
    em_bus_ctx_term(P.zctx);
    em_engine_free(P.e);
    return 0;
}
