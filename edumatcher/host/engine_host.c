/*
 * The engine host (engine_host.h): the matching engine as a process.
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
 * deleted). The blob is em_engine_snapshot's: the engine holds the clock
 * and each symbol's market-data totals. On start the journal hands over the
 * latest valid snapshot, which is restored, and only the records after it
 * are replayed. Snapshots of earlier versions, which put the clock and the
 * totals in a section of their own before the engine's bytes, are still
 * read.
 *
 * Schedules: `AT <ms> <operator line>` in the symbols file fires that
 * message (journaled, as a message from OPS) when the engine clock
 * reaches <ms>, e.g. `AT 3600000 PHASE sym=ABC phase=CLOSED`.
 *
 * Market data and queries: engine_host_md.c.
 *
 * Trades by id: every TRADE line also goes to the trade log beside the
 * journal (bus/trade_log.h), flushed after the journal and before
 * publishing, so the query `trades <from>` can give any published trade
 * again (clearing's recovery).
 */
#include "edumatcher/host/engine_host_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

#include "core/clock.h"
#include "core/buf.h"
#include "core/byte.h"
#include "core/child.h"
#include "core/error.h"
#include "core/log.h"
#include "edumatcher/engine/msg.h"
#include "edumatcher/gateway/alf/alf.h"

/* ---- staging and publishing ---- */

static void publish_staged(struct em_host *h);

/* Journal first, then publish: the rule of the file's header. */
static void flush_and_publish(struct em_host *h)
{
    if (!h->failed && em_journal_flush(&h->journal) != 0) {
        /* Without the journal the rule cannot be kept: publish nothing
         * more (effects a restart would lose); the caller stops. */
        h->st.journal_errors++;
        h->failed = CORE_EIO;
        CORE_WARN("engine: journal write failed; stopping");
    }
    /* After the journal (a torn trade log is refilled by replay), before
     * publishing (a published trade can always be recovered by id). */
    if (!h->failed && em_trade_log_flush(&h->tlog) != 0) {
        h->st.journal_errors++;
        h->failed = CORE_EIO;
        CORE_WARN("engine: trade log write failed; stopping");
    }
    publish_staged(h);
}

/* Stage one event for publishing at the end of the batch. gw >= 0 chains
 * it to that gateway id's other binary events of the batch; -1 (text
 * lines) stands alone. */
void emh_stage(struct em_host *h, const struct em_bus_topic *topic, int gw, const void *data,
               size_t len)
{
    size_t need = sizeof(struct staged) + len;
    need = (need + 7) & ~(size_t)7;
    if (h->arena_len + need > ARENA)
        flush_and_publish(h); /* journal first, then publish: rule kept */
    uint32_t off = (uint32_t)h->arena_len;
    struct staged *s = (struct staged *)(h->arena + off);
    s->topic = topic;
    s->next = 0;
    s->len = (uint16_t)len;
    s->chained = false;
    memcpy(s->data, data, len);
    if (gw >= 0) {
        if (h->chain_gen[gw] == h->batch_gen && h->chain_tail[gw]) {
            ((struct staged *)(h->arena + h->chain_tail[gw] - 1))->next = off + 1;
            s->chained = true;
        }
        h->chain_gen[gw] = h->batch_gen;
        h->chain_tail[gw] = off + 1;
    }
    h->arena_len += need;
    h->staged++;
}

static void send_staged(struct em_host *h, const struct em_bus_topic *topic, const void *data,
                        size_t len)
{
    h->cfg.bus->publish(h->cfg.bus_ctx, topic, data, len);
    h->st.bus_msgs_out++;
}

/* Publish the staged events in order; a chain goes out at its head as
 * few messages of concatenated frames (each at most EM_BUS_PAYLOAD_MAX,
 * what a receiver accepts). */
static void publish_staged(struct em_host *h)
{
    size_t off = 0;
    if (h->failed)
        h->arena_len = 0; /* not journaled: never published */
    while (off < h->arena_len) {
        struct staged *s = (struct staged *)(h->arena + off);
        off += (sizeof *s + s->len + 7) & ~(size_t)7;
        if (s->chained)
            continue;
        if (!s->next) {
            send_staged(h, s->topic, s->data, s->len);
            continue;
        }
        size_t n = 0;
        for (struct staged *e = s;; e = (struct staged *)(h->arena + e->next - 1)) {
            if (n + e->len > sizeof h->sendbuf) {
                send_staged(h, s->topic, h->sendbuf, n);
                n = 0;
            }
            memcpy(h->sendbuf + n, e->data, e->len);
            n += e->len;
            if (!e->next)
                break;
        }
        send_staged(h, s->topic, h->sendbuf, n);
    }
    h->st.events_out += h->staged;
    h->arena_len = 0;
    h->staged = 0;
    if (++h->batch_gen == 0) /* wrapped: no stale tail may look current */
        memset(h->chain_tail, 0, MAX_GW * sizeof *h->chain_tail);
}

const struct em_bus_topic *emh_ack_topic(struct em_host *h, uint16_t gw)
{
    if (!h->gw_topic[gw]) {
        const char *name = em_engine_gateway_name(h->e, gw);
        h->gw_topic[gw] = em_topic_cache_get(h->ack_topics, name, strlen(name));
        if (!h->gw_topic[gw]) {
            /* The cache is full: build a dedicated topic (once per gw). */
            struct em_bus_topic *t = malloc(sizeof *t);
            if (t && em_bus_topic_set(t, "order.ack.", name, strlen(name)) == 0)
                h->gw_topic[gw] = t;
        }
    }
    return h->gw_topic[gw];
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

/* The engine's trade callback: one TRADE line per trade, after its FILLs. */
static void on_trade(void *ctx, const struct em_trade *t)
{
    struct em_host *h = ctx;
    /* On replay only a trade the log lacks (the crash came between the
     * journal's flush and the log's) is formatted, to be logged again. */
    if ((h->replaying && t->tid < em_trade_log_next(&h->tlog)) || h->failed)
        return;
    /* TRADE tid=<n> sym=<s> px=<p> qty=<n> buy=<gw> sell=<gw> buy_oid=<n>
     * sell_oid=<n>, formatted by hand: one per trade, inside the message,
     * where snprintf cost more than the match. Every part is bounded
     * (symbols and gw ids are short), so 256 bytes always suffice. */
    char line[256], *p = line;
    p = put_str(p, "TRADE tid=");
    p = put_u64(p, t->tid);
    p = put_str(p, " sym=");
    p = put_str(p, t->sym);
    p = put_str(p, " px=");
    p += em_alf_format_price(t->px, p);
    p = put_str(p, " qty=");
    p = put_u64(p, t->qty);
    p = put_str(p, " buy=");
    p = put_str(p, em_engine_gateway_name(h->e, t->buy_gw));
    p = put_str(p, " sell=");
    p = put_str(p, em_engine_gateway_name(h->e, t->sell_gw));
    p = put_str(p, " buy_oid=");
    p = put_u64(p, t->buy_oid);
    p = put_str(p, " sell_oid=");
    p = put_u64(p, t->sell_oid);
    if (em_trade_log_full(&h->tlog)) {
        /* On replay the journal is on disk already; live, it goes first
         * (trade_log.h invariant 3), as when the arena fills. */
        if (h->replaying ? em_trade_log_flush(&h->tlog) != 0 : (flush_and_publish(h), h->failed)) {
            CORE_WARN("engine: trade log write failed; stopping");
            h->failed = CORE_EIO;
            return;
        }
    }
    int rc = em_trade_log_append(&h->tlog, t->tid, line, (size_t)(p - line));
    if (rc != 0) {
        /* A gap means the log and the journal disagree: not recoverable
         * by this process, and clearing would miss trades. */
        CORE_WARN("engine: trade log refused trade %" PRIu64 ": %s; stopping", t->tid,
                  core_strerror(rc));
        h->failed = CORE_EIO;
        return;
    }
    if (h->replaying)
        return;
    emh_stage(h, &h->trade_topic, -1, line, (size_t)(p - line));
    h->st.trades_out++;
}

/* The engine's sink: called for each event, inside em_engine_submit. */
static void sink(void *ctx, uint16_t gw, const struct em_msg *ev)
{
    struct em_host *h = ctx;
    /* On replay too: the first reply is kept (resends) and the event
     * numbered and kept (RESYNC), as they were live. */
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
    if (n > 0 && h->cur_dd)
        n = (int)emh_dedup_first_reply(h, gw, ev->kind, frame, (size_t)n);
    if (n > 0)
        n = (int)emh_events_number(h, gw, frame, (size_t)n);
    if (h->replaying)
        return;
    const struct em_bus_topic *t = emh_ack_topic(h, gw);
    if (n > 0 && t)
        emh_stage(h, t, gw, frame, (size_t)n);
}

/* ---- the inbound path ---- */

/* Handle one decoded message m of gateway id gw whose journal form is
 * rec[0..len): [u8 gwlen][gw][frame]. Journals it first when `append`. */
static int handle_msg_of(struct em_host *h, int gw, const uint8_t *rec, size_t len,
                         struct em_msg *m, bool append)
{
    if (h->failed)
        return h->failed;
    /* a gateway asking for the events it missed: answered from what is
     * kept, never journaled (engine_host_dedup.c) */
    if (m->kind == EM_MSG_RESYNC) {
        if (!h->replaying)
            emh_events_resync(h, (uint16_t)gw, m->eseq);
        return 0;
    }
    /* a resent message handled before, or one after a gap: answered,
     * neither journaled nor handled (engine_host_dedup.c) */
    bool numbered = m->present & EM_BIT(seq);
    if (numbered && emh_dedup_answered(h, (uint16_t)gw, m))
        return 0;
    if (append && em_journal_append(&h->journal, rec, len, NULL) != 0) {
        h->st.journal_errors++;
        h->failed = CORE_EIO;
        CORE_WARN("engine: journal append failed; stopping");
        return h->failed;
    }
    if (m->kind == EM_MSG_LOGIN)
        emh_dedup_login(h, (uint16_t)gw);
    if (numbered)
        emh_dedup_begin(h, (uint16_t)gw, m->seq);
    int rc, refused = em_engine_authorize(h->e, (uint16_t)gw, m->kind);
    if (refused) /* its code: SYNTAX for an event kind (A.7), else AUTH (C.4) */
        em_engine_reject(h->e, (uint16_t)gw, m, refused), rc = 0;
    else
        rc = em_engine_submit(h->e, (uint16_t)gw, m);
    emh_dedup_end(h);
    h->engine_ms = em_engine_now(h->e);
    return rc;
}

static int handle_msg(struct em_host *h, const uint8_t *rec, size_t len, struct em_msg *m,
                      bool append)
{
    int gw = em_engine_gateway(h->e, (const char *)rec + 1, rec[0]);
    if (gw < 0)
        return CORE_EPROTO;
    return handle_msg_of(h, gw, rec, len, m, append);
}

/* Handle one journaled-form record: [u8 gwlen][gw][frame]. */
static int handle_record(struct em_host *h, const uint8_t *rec, size_t len, bool append)
{
    if (len < 2 || rec[0] == 0 || rec[0] > EM_GW_MAX || len < 1u + rec[0])
        return CORE_EPROTO;
    size_t gl = rec[0];
    const uint8_t *frame = rec + 1 + gl;
    size_t flen = len - 1 - gl;
    struct em_msg m;
    if (em_frame_decode(frame, flen, &m) != (int)flen)
        return CORE_EPROTO;
    return handle_msg(h, rec, len, &m, append);
}

/* Submit an operator message as if it had arrived from gw OPS. */
static int submit_ops(struct em_host *h, const struct em_msg *m)
{
    uint8_t rec[JREC_MAX];
    rec[0] = 3;
    memcpy(rec + 1, EM_OPS_GW, 3);
    int n = em_frame_encode(m, rec + 4, sizeof rec - 4);
    if (n < 0)
        return n;
    return handle_record(h, rec, 4 + (size_t)n, true);
}

/* Journal the time that has passed as a TICK (between messages only). */
static void advance_clock(struct em_host *h)
{
    uint64_t now = h->base_engine_ms + (now_ns(h) - h->base_ns) / 1000000u;
    if (now <= h->engine_ms)
        return;
    struct em_msg m = {.kind = EM_MSG_TICK, .present = EM_BIT(ms)};
    m.ms = now - h->engine_ms;
    submit_ops(h, &m);
    /* Scheduled operator messages that are due, in file order. They are
     * journaled as they fire, so a replay repeats them at the same point
     * of the stream; after a restart, entries at or before the replayed
     * clock have fired already. */
    while (h->next_sched < h->nsched && h->sched[h->next_sched].at_ms <= h->engine_ms) {
        submit_ops(h, &h->sched[h->next_sched].m);
        h->next_sched++;
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
/* ---- doors (engine_host.h, "Doors") ---- */

static bool door_open(struct em_host *h, uint64_t door)
{
    if (door == EM_HOST_DOOR_HOSTED)
        return true; /* a hosted session that ends says so (DISCONNECT) */
    return h->cfg.bus->door_open && h->cfg.bus->door_open(h->cfg.bus_ctx, door);
}

enum door_verdict { DOOR_PASS, DOOR_DROP, DOOR_REFUSE };

/* Handle a DISCONNECT of gw as if its session had sent it (journaled):
 * its orders are canceled (docs/alf.md C.3). */
static int disconnect_gw(struct em_host *h, int gw, uint8_t *rec, size_t gl)
{
    struct em_msg d = {.kind = EM_MSG_DISCONNECT};
    int n = em_frame_encode(&d, rec + 1 + gl, EM_FRAME_MAX);
    if (n <= 0)
        return 0;
    h->st.msgs_in++;
    int rc = handle_msg_of(h, gw, rec, 1 + gl + (size_t)n, &d, true);
    return rc == CORE_EPROTO ? 0 : rc;
}

/*
 * May message m of gw come through door? The rules (docs/alf.md C.9):
 *  1. LOGIN: taken when no door holds gw or this one does; when the door
 *     that holds it is open, refused (LOGGED_IN_ELSEWHERE); when that
 *     door is gone (a gateway died, within --gateway-grace-ms), the old
 *     session is disconnected first (journaled, its orders canceled), then
 *     the LOGIN is taken. Either way that door holds gw from now on.
 *  2. Anything else from the holding door is taken; DISCONNECT and LOGOUT
 *     end the hold.
 *  3. Anything else from another door, when the holding door is open, is
 *     dropped (DISCONNECT and LOGOUT silently, the rest refused
 *     LOGGED_IN_ELSEWHERE: that session is not gw's any more).
 *  4. Anything but DISCONNECT and LOGOUT from a door, when no door holds
 *     gw or the one that did is gone, is taken, and that door holds gw:
 *     a gateway back on a new link (its RESYNC first), or any gateway
 *     after an engine restart, which forgets every door.
 * OPS is exempt: the operator has no orders, and may be logged in on
 * several doors (the latest LOGIN's door holds it, for the replies).
 */
static enum door_verdict door_check(struct em_host *h, uint64_t door, int gw, uint8_t *rec,
                                    size_t gl, const struct em_msg *m)
{
    uint64_t *held = &h->holder[gw];
    bool ends = m->kind == EM_MSG_DISCONNECT || m->kind == EM_MSG_LOGOUT;
    if (*held == door) { /* the order path: one load, one compare */
        if (ends)
            *held = 0;
        return DOOR_PASS;
    }
    if (door == EM_HOST_DOOR_ANY) { /* the process itself (a link gone) */
        if (ends && !door_open(h, *held))
            *held = 0;
        return ends && *held ? DOOR_DROP : DOOR_PASS;
    }
    if (gl == 3 && memcmp(rec + 1, EM_OPS_GW, 3) == 0) {
        if (m->kind == EM_MSG_LOGIN)
            *held = door; /* where its replies go, as before: the latest */
        return DOOR_PASS;
    }
    bool open = *held && door_open(h, *held);
    if (open) {
        h->st.door_refused += !ends;
        return ends ? DOOR_DROP : DOOR_REFUSE;
    }
    if (ends)
        return *held ? DOOR_DROP : DOOR_PASS; /* rule 4: ends no one else's session */
    if (*held && m->kind == EM_MSG_LOGIN) {
        *held = 0;
        h->st.door_takeovers++;
        CORE_INFO("engine: %.*s logs in through another door while its gateway is gone: "
                  "its session there is disconnected first",
                  (int)gl, (const char *)rec + 1);
        if (disconnect_gw(h, gw, rec, gl) != 0)
            return DOOR_DROP; /* h->failed: the caller stops */
    }
    *held = door;
    return DOOR_PASS;
}

int em_host_inbound_at(struct em_host *h, uint64_t door, const char *topic, size_t tl,
                       const void *payload, size_t len)
{
    struct core_metrics *mt = h->cfg.metrics;
    bool sample = mt && core_metrics_sample_due(mt);
    uint64_t t0 = sample ? core_now_ns() : 0;
    h->st.bus_msgs_in++;
    if (tl == 0 || tl > EM_GW_MAX) {
        h->st.bad_frames++;
        return h->failed;
    }
    int gw = em_engine_gateway(h->e, topic, tl);
    if (gw < 0) {
        h->st.bad_frames++;
        return h->failed;
    }
    uint8_t rec[JREC_MAX];
    rec[0] = (uint8_t)tl;
    memcpy(rec + 1, topic, tl);
    bool refused = false;
    const uint8_t *p = payload, *end = p + len;
    while (p < end) {
        struct em_msg m;
        int n = em_frame_decode(p, (size_t)(end - p), &m);
        if (n <= 0) {
            h->st.bad_frames++;
            break;
        }
        h->st.msgs_in++;
        enum door_verdict v = door_check(h, door, gw, rec, tl, &m);
        if (h->failed)
            return h->failed;
        if (v != DOOR_PASS) {
            refused |= v == DOOR_REFUSE;
            p += n;
            continue;
        }
        memcpy(rec + 1 + tl, p, (size_t)n);
        int rc = handle_msg_of(h, gw, rec, 1 + tl + (size_t)n, &m, true);
        if (rc == CORE_EPROTO)
            h->st.bad_frames++;
        else if (h->failed)
            return h->failed;
        p += n;
    }
    if (sample)
        core_metrics_record(mt, core_now_ns() - t0);
    return refused ? CORE_EBUSY : h->failed;
}

int em_host_inbound(struct em_host *h, const char *gw, size_t gwlen, const void *frames, size_t len)
{
    return em_host_inbound_at(h, EM_HOST_DOOR_ANY, gw, gwlen, frames, len);
}

bool em_host_door_holds(struct em_host *h, uint64_t door, const char *gw, size_t gwlen)
{
    int id = em_engine_gateway(h->e, gw, gwlen);
    return id > 0 && h->holder[id] == door;
}

int em_host_refusal(uint8_t *frame, size_t cap)
{
    struct em_msg r = {.kind = EM_MSG_REJECT, .present = EM_BIT(rej)};
    r.rej = EM_REJ_LOGGED_IN_ELSEWHERE;
    return em_frame_encode(&r, frame, cap);
}

static void maybe_snapshot(struct em_host *h);

int em_host_batch_end(struct em_host *h, unsigned handled)
{
    h->st.last_batch = handled;
    flush_and_publish(h);
    maybe_snapshot(h);
    return h->failed;
}

int em_host_tick(struct em_host *h)
{
    advance_clock(h);
    flush_and_publish(h);
    maybe_snapshot(h);
    return h->failed;
}

int em_host_flush(struct em_host *h)
{
    flush_and_publish(h);
    return h->failed;
}

/* ---- snapshots ----
 *
 * The blob is the engine's snapshot (engine.h). Before the engine kept the
 * market-data totals, the process wrote a section of its own first:
 * "EMENGPRC" u32 version(1) u64 engine_ms u32 nsyms, per symbol u8 len
 * name[len] i64 last.mant u8 last.dec u32 last_qty u64 volume u64 trades;
 * then the engine's snapshot to the end (integers little-endian). Such
 * snapshots are still restored (restore_legacy). */

static const char PROC_MAGIC[8] = {'E', 'M', 'E', 'N', 'G', 'P', 'R', 'C'};

static int snap_add(void *ctx, const void *data, size_t len)
{
    struct em_host *h = ctx;
    return core_buf_append(&h->snap, data, len);
}

/* Serialize the engine and write the snapshot of the state after record
 * seq (the journal's begin step is done). Returns 0 or an error; the blob
 * is freed either way. */
static int write_snapshot(struct em_host *h, uint64_t seq, size_t *bytes)
{
    core_buf_reset(&h->snap);
    core_buf_reserve(&h->snap, 1u << 20);        /* books are large: skip the small steps */
    int rc = emh_dedup_snapshot(h, snap_add, h); /* then the engine's bytes */
    if (rc == 0)
        rc = em_engine_snapshot(h->e, snap_add, h);
    if (rc == 0 && h->snap.oom)
        rc = CORE_ENOMEM;
    if (rc == 0)
        rc = em_journal_snapshot_write(&h->journal, seq, h->snap.data, h->snap.len);
    *bytes = h->snap.len;
    /* the blob is as large as the books: do not hold it between snapshots */
    core_buf_free(&h->snap);
    return rc;
}

static void snapshot_finished(struct em_host *h, uint64_t seq, int rc, uint64_t t0)
{
    if (rc) {
        h->st.snapshot_failures++;
        CORE_WARN("engine: snapshot failed: %s", core_strerror(rc));
        return;
    }
    em_journal_snapshot_done(&h->journal, seq);
    h->st.snapshots++;
    h->st.snapshot_seq = (int64_t)h->journal.snapshot_seq;
    CORE_INFO("engine: snapshot after record %" PRIu64 " (%s, %.1f ms)", seq,
              h->snap_child > 0 ? "written by a child" : "on the loop",
              (double)(now_ns(h) - t0) / 1e6);
}

/* The child writing a snapshot: done yet? `block` waits for it (close). */
static void reap_snapshot(struct em_host *h, bool block)
{
    if (h->snap_child <= 0)
        return;
    int status;
    pid_t r;
    do
        r = waitpid(h->snap_child, &status, block ? 0 : WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r == 0)
        return;
    int rc = r == h->snap_child && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : CORE_EIO;
    snapshot_finished(h, h->snap_child_seq, rc, h->snap_child_ns);
    h->snap_child = 0;
}

/*
 * The snapshot step: between messages only, when enough records or time
 * have gone by. The journal is synced and a new segment started (so the
 * snapshot is of the state after a known record), then a forked child
 * serializes its copy-on-write image of the engine and writes it while
 * this process goes on matching and journaling; the next steps after the
 * child exits remove what the snapshot supersedes. Without fork (config,
 * or fork failing) the snapshot is taken on the loop, O(open orders). A
 * failure is logged and the journal simply keeps growing.
 */
static void maybe_snapshot(struct em_host *h)
{
    reap_snapshot(h, false);
    uint64_t last_rec = h->journal.next_seq - 1, since = last_rec - h->journal.snapshot_seq;
    uint64_t now = now_ns(h);
    uint64_t recs = h->cfg.snapshot_records, every = h->cfg.snapshot_interval_ms;
    bool by_count = recs > 0 && since >= recs;
    bool by_time = every > 0 && since > 0 && now - h->snap_ns >= every * 1000000u;
    if (h->replaying || h->failed || h->snap_child > 0 || !(by_count || by_time))
        return;
    h->snap_ns = now;
    uint64_t seq;
    if (em_journal_snapshot_begin(&h->journal, &seq) != 0) {
        h->st.journal_errors++;
        h->failed = CORE_EIO;
        CORE_WARN("engine: journal write failed; stopping");
        return;
    }
    size_t bytes = 0;
    if (h->cfg.snapshot_fork) {
        pid_t pid = fork();
        if (pid == 0) {
            /* The child: only its copy of the engine and the journal's
             * directory; no socket (closed: a restarted engine binds the
             * ports while this child may still write), no exit handler. */
            core_child_close_fds(h->journal.dir_fd);
            _exit(write_snapshot(h, seq, &bytes) == 0 ? 0 : 1);
        }
        if (pid > 0) {
            h->snap_child = pid;
            h->snap_child_seq = seq;
            h->snap_child_ns = now;
            return;
        }
        CORE_WARN("engine: fork for a snapshot failed (%s); taking it on the loop",
                  strerror(errno));
    }
    int rc = write_snapshot(h, seq, &bytes);
    snapshot_finished(h, seq, rc, now);
}

/* A snapshot with the process's own section (see above): the engine's
 * bytes follow it; the totals are set on the restored engine. */
static int restore_legacy(struct em_host *h, const unsigned char *data, size_t len)
{
    struct core_reader r = core_reader_init(data + sizeof PROC_MAGIC, len - sizeof PROC_MAGIC);
    if (core_read_u32(&r) != 1)
        return CORE_EPROTO;
    core_read_u64(&r); /* the clock: the engine's own is the same */
    uint64_t nsyms = core_read_u32(&r);
    struct core_reader totals = r;
    for (uint64_t i = 0; core_reader_ok(&r) && i < nsyms; i++) { /* find the engine's bytes */
        size_t n = core_read_u8(&r);
        if (n == 0 || n > EM_SYM_MAX)
            return CORE_EPROTO;
        core_read_bytes(&r, n + 29); /* name, last (mant, dec), last_qty, volume, trades */
    }
    if (!core_reader_ok(&r))
        return CORE_EPROTO;
    int rc = em_engine_restore(h->e, r.p, r.left);
    for (uint64_t i = 0; rc == 0 && i < nsyms; i++) {
        char name[EM_SYM_MAX + 1];
        size_t n = core_read_u8(&totals);
        memcpy(name, core_read_bytes(&totals, n), n); /* checked by the walk above */
        name[n] = 0;
        core_read_bytes(&totals, 9); /* last (mant, dec): the engine keeps its own */
        uint32_t last_qty = core_read_u32(&totals);
        uint64_t volume = core_read_u64(&totals);
        uint64_t trades = core_read_u64(&totals);
        if (em_engine_set_symbol_totals(h->e, name, last_qty, volume, trades) != 0)
            rc = CORE_EPROTO; /* a symbol the engine does not have */
    }
    return rc;
}

/* The restore step: the journal's latest valid snapshot, before replay. */
static int restore_snapshot(const void *data, size_t len, uint64_t seq, void *ud)
{
    struct em_host *h = ud;
    int rc;
    if (emh_dedup_is_snapshot(data, len))
        rc = emh_dedup_restore(h, data, len);
    else if (len >= sizeof PROC_MAGIC && memcmp(data, PROC_MAGIC, sizeof PROC_MAGIC) == 0)
        rc = restore_legacy(h, data, len);
    else
        rc = em_engine_restore(h->e, data, len);
    if (rc) {
        CORE_WARN("engine: snapshot after record %" PRIu64 " cannot be restored: %s", seq,
                  core_strerror(rc));
        return CORE_EIO;
    }
    h->engine_ms = em_engine_now(h->e);
    h->st.restored_seq = (int64_t)seq;
    return 0;
}

static int replay_record(const void *data, size_t len, uint64_t seq, void *ud)
{
    int rc = handle_record(ud, data, len, false);
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
int em_host_load_symbols(struct em_host *h, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        CORE_WARN("engine: cannot open %s", path);
        return CORE_ENOTFOUND;
    }
    char line[EM_ALF_LINE_MAX + 2];
    int lineno = 0, bad = 0;
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
            if (em_host_fresh(h))
                submit_ops(h, &m);
            continue;
        }
        if (h->nsched == h->sched_cap) {
            size_t cap = h->sched_cap ? h->sched_cap * 2 : 16;
            struct sched *p = realloc(h->sched, cap * sizeof *p);
            if (!p) {
                fclose(f);
                return CORE_ENOMEM;
            }
            h->sched = p;
            h->sched_cap = cap;
        }
        h->sched[h->nsched].at_ms = at;
        h->sched[h->nsched].m = m;
        h->nsched++;
    }
    fclose(f);
    /* insertion sort: stable, so equal times keep file order (few lines) */
    for (size_t i = 1; i < h->nsched; i++)
        for (size_t j = i; j > 0 && cmp_sched(&h->sched[j - 1], &h->sched[j]) > 0; j--) {
            struct sched t = h->sched[j];
            h->sched[j] = h->sched[j - 1];
            h->sched[j - 1] = t;
        }
    /* what the replayed clock has passed has fired already */
    while (h->next_sched < h->nsched && h->sched[h->next_sched].at_ms <= h->engine_ms)
        h->next_sched++;
    flush_and_publish(h);
    if (h->failed)
        return h->failed;
    return bad ? CORE_EINVAL : 0;
}

/* ---- lifetime ---- */

static void host_free(struct em_host *h)
{
    if (h->tlog_open)
        em_trade_log_close(&h->tlog);
    if (h->gw_topic)
        for (uint32_t gw = 0; gw < MAX_GW; gw++) {
            const char *t = (const char *)h->gw_topic[gw];
            const char *c = (const char *)h->ack_topics;
            if (t && !(t >= c && t < c + sizeof *h->ack_topics))
                free((void *)h->gw_topic[gw]); /* built when the cache was full */
        }
    em_engine_free(h->e);
    free(h->arena);
    free(h->gw_topic);
    free(h->ack_topics);
    free(h->chain_gen);
    free(h->chain_tail);
    free(h->holder);
    free(h->syms);
    free(h->sched);
    emh_dedup_free(h);
    core_buf_free(&h->snap);
    free(h);
}

int em_host_open(struct em_host **out, const struct em_host_config *cfg)
{
    struct em_host *h = calloc(1, sizeof *h);
    if (!h)
        return CORE_ENOMEM;
    h->cfg = *cfg;
    if (h->cfg.md_depth < 1) /* the sessions' SYMBOLS reads the best level */
        h->cfg.md_depth = 1;
    if (h->cfg.md_depth > 50)
        h->cfg.md_depth = 50;
    h->arena = malloc(ARENA);
    h->gw_topic = calloc(MAX_GW, sizeof *h->gw_topic);
    h->ack_topics = malloc(sizeof *h->ack_topics);
    h->chain_gen = calloc(MAX_GW, sizeof *h->chain_gen);
    h->chain_tail = calloc(MAX_GW, sizeof *h->chain_tail);
    h->dedup = calloc(MAX_GW, sizeof *h->dedup);
    h->events = calloc(MAX_GW, sizeof *h->events);
    h->holder = calloc(MAX_GW, sizeof *h->holder);
    struct em_engine_config ec = {.sink = sink, .sink_ctx = h, .on_trade = on_trade};
    if (h->arena && h->ack_topics)
        h->e = em_engine_new(&ec);
    if (!h->arena || !h->gw_topic || !h->ack_topics || !h->chain_gen || !h->chain_tail ||
        !h->dedup || !h->events || !h->holder || !h->e)
        goto fail_mem;
    em_topic_cache_init(h->ack_topics, "order.ack.");
    em_bus_topic_set(&h->trade_topic, "trade.executed", "", 0);

    /* The trade log lives beside the journal; replay appends to it. */
    int rc;
    if (mkdir(h->cfg.journal.dir, 0755) != 0 && errno != EEXIST) {
        CORE_WARN("engine: cannot create %s: %s", h->cfg.journal.dir, strerror(errno));
        rc = CORE_EIO;
        goto fail;
    }
    rc = em_trade_log_open(&h->tlog, h->cfg.journal.dir,
                           h->cfg.journal.fsync == EM_FSYNC_ALWAYS ||
                               h->cfg.journal.fsync == EM_FSYNC_BATCH);
    if (rc) {
        CORE_WARN("engine: cannot open the trade log in %s: %s", h->cfg.journal.dir,
                  core_strerror(rc));
        goto fail;
    }
    h->tlog_open = true;

    /* Replay before anything can arrive or be published. */
    h->replaying = true;
    struct em_journal_replay_stats st;
    rc = em_journal_open(&h->journal, &h->cfg.journal, restore_snapshot, replay_record, h, &st);
    if (rc == 0 && h->failed)
        em_journal_close(&h->journal);
    if (rc == 0)
        rc = h->failed;
    if (rc)
        goto fail;
    h->replaying = false;
    if (em_trade_log_flush(&h->tlog) != 0) {
        CORE_WARN("engine: cannot write the trade log");
        em_journal_close(&h->journal);
        rc = CORE_EIO;
        goto fail;
    }
    h->st.replayed = st.records;
    h->st.torn_bytes = st.torn_bytes;
    h->st.snapshot_seq = (int64_t)st.snapshot_seq;
    h->fresh = st.records == 0 && st.snapshot_seq == 0;
    h->engine_ms = em_engine_now(h->e);
    h->snap_ns = now_ns(h);
    h->base_ns = now_ns(h);
    h->base_engine_ms = h->engine_ms;
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    h->md_epoch = (uint64_t)wall.tv_sec * 1000000000u + (uint64_t)wall.tv_nsec;
    *out = h;
    return 0;
fail_mem:
    rc = CORE_ENOMEM;
fail:
    h->replaying = false;
    host_free(h);
    return rc;
}

void em_host_close(struct em_host *h)
{
    if (!h)
        return;
    reap_snapshot(h, true); /* its files belong to this journal */
    em_journal_close(&h->journal);
    host_free(h);
}

bool em_host_fresh(const struct em_host *h)
{
    return h->fresh;
}

struct em_host_stats *em_host_stats(struct em_host *h)
{
    struct em_engine_stats st;
    em_engine_stats(h->e, &st);
    h->st.open_orders = (int64_t)st.open_orders;
    return &h->st;
}

struct em_trade_log *em_host_trade_log(struct em_host *h)
{
    return &h->tlog;
}

struct em_journal *em_host_journal(struct em_host *h)
{
    return &h->journal;
}

const struct em_engine *em_host_engine(const struct em_host *h)
{
    return h->e;
}

uint64_t em_host_clock_ms(const struct em_host *h)
{
    return h->engine_ms;
}
