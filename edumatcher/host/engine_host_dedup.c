/*
 * Answers to resent messages (engine_host.h, docs/alf.md I): the engine
 * side of "no order without an answer".
 *
 * A gateway numbers the NEW, CANCEL, REPLACE and PING messages of a
 * session (field seq: 1, 2, ... from its LOGIN) and keeps each until its
 * first reply (ACK, REJECT, REPLACED, CANCELED or PONG, with the same seq)
 * has come back. After an engine restart it sends the unanswered ones
 * again, with their numbers. Per gateway id the host keeps
 *   last   the highest seq it handled (0 after a LOGIN), and
 *   slots  the first reply of each of the last EM_RESEND_WINDOW messages,
 *          as published (a frame with seq), by seq modulo the window;
 * so a message with seq
 *   <= last      was handled before: its first reply is published again
 *                from its slot (REJECT DUPLICATE_ID when it is no longer
 *                there), and nothing else happens - not journaled;
 *   == last + 1  is new: journaled and handled, its first reply kept;
 *   >  last + 1  comes after messages the engine never received (they
 *                were in flight at a crash): refused with REJECT
 *                reason=RESEND seq=<n>, not journaled, so that the gateway
 *                sends again from its oldest unanswered one, in order.
 * Only journaled messages change this state, and a replay hands the same
 * records to the same code (the sink sees the replies with publishing
 * off), so it is rebuilt after a restart; the snapshot carries it (a
 * section before the engine's bytes, dedup_snapshot below).
 *
 * Events (docs/alf.md I.6): every event the engine's sink gives a gateway
 * id (not the answers made here) is numbered, eseq 1, 2, ... from its
 * LOGIN, appended to the frame, and the last EM_EVENT_WINDOW are kept by
 * eseq modulo the window. The sink runs on replay too, so a restart
 * rebuilds the same numbers and the events that were journaled but never
 * published (a crash between the journal's flush and the publish). A
 * RESYNC eseq=<n> (a gateway after its link came back) is answered, not
 * journaled, with RESYNC eseq=<n> next=<f> last=<l> followed by the kept
 * events f..l, in order: f = n + 1 when the engine holds them all,
 * else the oldest it holds (more than the window came after n), or the
 * last + 1 when n is beyond the last (the engine's history is shorter
 * than the gateway's, e.g. a journal lost): the gateway then knows what
 * it missed is gone (gateway_session.c).
 *
 * Memory: one window per gateway id that sent a numbered message, and
 * one per gateway id that got an event, allocated then (not per message).
 */
#include <stdlib.h>
#include <string.h>

#include "core/byte.h"
#include "core/error.h"
#include "core/log.h"
#include "edumatcher/host/engine_host_internal.h"

struct dd_slot {
    uint64_t seq;
    uint8_t len; /* 0: no reply kept */
    uint8_t frame[DD_FRAME];
};

struct em_host_dedup {
    uint64_t last;
    struct dd_slot slots[EM_RESEND_WINDOW];
};

static void stage_reply(struct em_host *h, uint16_t gw, const struct em_msg *r);

struct ev_slot {
    uint64_t eseq;
    uint8_t len; /* 0: not kept (cannot happen: EV_FRAME holds the longest) */
    uint8_t frame[EV_FRAME];
};

struct em_host_events {
    uint64_t last; /* the last event number given (0 after a LOGIN) */
    struct ev_slot slots[EM_EVENT_WINDOW];
};

static struct em_host_events *ev_of(struct em_host *h, uint16_t gw, bool create)
{
    if (!h->events[gw] && create)
        h->events[gw] = calloc(1, sizeof *h->events[gw]);
    return h->events[gw];
}

static struct em_host_dedup *dd_of(struct em_host *h, uint16_t gw, bool create)
{
    if (!h->dedup[gw] && create)
        h->dedup[gw] = calloc(1, sizeof *h->dedup[gw]);
    return h->dedup[gw];
}

void emh_dedup_login(struct em_host *h, uint16_t gw)
{
    struct em_host_dedup *d = dd_of(h, gw, false);
    if (d)
        d->last = 0; /* a new session numbers from 1; slots are rewritten */
    struct em_host_events *v = ev_of(h, gw, false);
    if (v)
        v->last = 0; /* its events too; a slot is read only for its eseq */
}

size_t emh_events_number(struct em_host *h, uint16_t gw, uint8_t *frame, size_t n)
{
    struct em_host_events *v = ev_of(h, gw, true);
    if (!v)
        return n; /* out of memory: sent without a number (delivered as is) */
    size_t m = em_frame_append_id(frame, n, EM_F_eseq, v->last + 1);
    if (m == 0)
        return n; /* a kind without eseq */
    struct ev_slot *s = &v->slots[++v->last % EM_EVENT_WINDOW];
    s->eseq = v->last;
    s->len = 0;
    if (m <= sizeof s->frame) {
        memcpy(s->frame, frame, m);
        s->len = (uint8_t)m;
    }
    return m;
}

void emh_events_resync(struct em_host *h, uint16_t gw, uint64_t eseq)
{
    const struct em_host_events *v = ev_of(h, gw, false);
    uint64_t last = v ? v->last : 0;
    uint64_t oldest = last > EM_EVENT_WINDOW ? last - EM_EVENT_WINDOW + 1 : 1;
    uint64_t next = eseq + 1;
    if (eseq > last)
        next = last + 1; /* the gateway saw more than this engine has */
    else if (next < oldest)
        next = oldest; /* (eseq, oldest) are no longer kept */
    for (uint64_t q = next; q <= last; q++) {
        const struct ev_slot *s = &v->slots[q % EM_EVENT_WINDOW];
        if (s->eseq != q || !s->len)
            next = q + 1; /* not kept: cannot happen (EV_FRAME) */
    }
    h->st.resyncs++;
    h->st.resyncs_short += next != eseq + 1;
    struct em_msg r = {.kind = EM_MSG_RESYNC,
                       .present = EM_BIT(eseq) | EM_BIT(next) | EM_BIT(last)};
    r.eseq = eseq;
    r.next = next;
    r.last = last;
    stage_reply(h, gw, &r);
    const struct em_bus_topic *t = emh_ack_topic(h, gw);
    for (uint64_t q = next; t && q <= last; q++) {
        const struct ev_slot *s = &v->slots[q % EM_EVENT_WINDOW];
        emh_stage(h, t, gw, s->frame, s->len);
        h->st.events_resent++;
    }
}

/* A reply staged now for gw, made outside the engine (the engine's own
 * replies go through the sink). */
static void stage_reply(struct em_host *h, uint16_t gw, const struct em_msg *r)
{
    uint8_t frame[EM_FRAME_MAX];
    int n = em_frame_encode(r, frame, sizeof frame);
    const struct em_bus_topic *t = emh_ack_topic(h, gw);
    if (n > 0 && t)
        emh_stage(h, t, gw, frame, (size_t)n);
}

static void reject(struct em_host *h, uint16_t gw, const struct em_msg *m, int code)
{
    struct em_msg r = {.kind = EM_MSG_REJECT, .present = EM_BIT(rej) | EM_BIT(seq)};
    r.rej = (uint8_t)code;
    r.seq = m->seq;
    if (m->present & EM_BIT(cl)) {
        r.present |= EM_BIT(cl);
        memcpy(r.cl, m->cl, sizeof r.cl);
    }
    stage_reply(h, gw, &r);
}

bool emh_dedup_answered(struct em_host *h, uint16_t gw, const struct em_msg *m)
{
    struct em_host_dedup *d = dd_of(h, gw, true);
    if (!d) {
        /* out of memory: handled as before numbers existed */
        CORE_WARN("engine: no memory for the resend window of gateway %u", gw);
        return false;
    }
    /* on replay every record was new when it was journaled */
    if (m->seq == d->last + 1 || h->replaying)
        return false;
    if (m->seq > d->last) {
        h->st.resend_requests++;
        reject(h, gw, m, EM_REJ_RESEND);
        return true;
    }
    h->st.duplicates++;
    const struct dd_slot *s = &d->slots[m->seq % EM_RESEND_WINDOW];
    const struct em_bus_topic *t = emh_ack_topic(h, gw);
    if (s->seq == m->seq && s->len && t)
        emh_stage(h, t, gw, s->frame, s->len); /* the original first reply */
    else
        reject(h, gw, m, EM_REJ_DUPLICATE_ID); /* aged out of the window */
    return true;
}

void emh_dedup_begin(struct em_host *h, uint16_t gw, uint64_t seq)
{
    struct em_host_dedup *d = dd_of(h, gw, false);
    if (!d)
        return;
    d->last = seq;
    struct dd_slot *s = &d->slots[seq % EM_RESEND_WINDOW];
    s->seq = seq;
    s->len = 0;
    h->cur_dd = d;
    h->cur_gw = gw;
    h->cur_seq = seq;
}

void emh_dedup_end(struct em_host *h)
{
    h->cur_dd = NULL;
    h->cur_seq = 0;
}

size_t emh_dedup_first_reply(struct em_host *h, uint16_t gw, uint8_t kind, uint8_t *frame, size_t n)
{
    if (!h->cur_dd || gw != h->cur_gw)
        return n;
    if (kind != EM_MSG_ACK && kind != EM_MSG_REJECT && kind != EM_MSG_REPLACED &&
        kind != EM_MSG_CANCELED && kind != EM_MSG_PONG)
        return n;
    size_t m = em_frame_append_seq(frame, n, h->cur_seq);
    if (m == 0)
        return n;
    struct dd_slot *s = &h->cur_dd->slots[h->cur_seq % EM_RESEND_WINDOW];
    if (m <= sizeof s->frame) {
        memcpy(s->frame, frame, m);
        s->len = (uint8_t)m;
    }
    h->cur_dd = NULL; /* one first reply per message */
    return m;
}

/* ---- in the snapshot ----
 *
 * "EMHOSTRS" u32 version(2) u32 ngateways, per gateway: u8 len name[len]
 * u64 last u32 nslots, per slot: u64 seq u8 len frame[len]; then (from
 * version 2) u32 ngateways, per gateway: u8 len name[len] u64 last u32
 * nevents, per event (oldest first, each frame with its eseq): u8 len
 * frame[len]; then the engine's snapshot to the end (little-endian).
 * Version 1 (no events) is still read. */

static const char DD_MAGIC[8] = {'E', 'M', 'H', 'O', 'S', 'T', 'R', 'S'};

/* The events part (version 2). */
static int events_snapshot(struct em_host *h, int (*add)(void *ctx, const void *data, size_t len),
                           void *ctx)
{
    uint8_t b[12];
    uint32_t n = 0;
    for (uint32_t gw = 0; gw < MAX_GW; gw++)
        n += h->events[gw] != NULL;
    core_put_le32(b, n);
    int rc = add(ctx, b, 4);
    for (uint32_t gw = 0; rc == 0 && gw < MAX_GW; gw++) {
        const struct em_host_events *v = h->events[gw];
        if (!v)
            continue;
        const char *name = em_engine_gateway_name(h->e, (uint16_t)gw);
        uint8_t nl = (uint8_t)strlen(name);
        uint64_t from = v->last > EM_EVENT_WINDOW ? v->last - EM_EVENT_WINDOW + 1 : 1;
        uint32_t kept = 0;
        for (uint64_t q = from; q <= v->last; q++)
            kept += v->slots[q % EM_EVENT_WINDOW].eseq == q && v->slots[q % EM_EVENT_WINDOW].len;
        rc = add(ctx, &nl, 1);
        if (rc == 0)
            rc = add(ctx, name, nl);
        core_put_le64(b, v->last);
        core_put_le32(b + 8, kept);
        if (rc == 0)
            rc = add(ctx, b, 12);
        for (uint64_t q = from; rc == 0 && q <= v->last; q++) {
            const struct ev_slot *s = &v->slots[q % EM_EVENT_WINDOW];
            if (s->eseq != q || !s->len)
                continue;
            rc = add(ctx, &s->len, 1);
            if (rc == 0)
                rc = add(ctx, s->frame, s->len);
        }
    }
    return rc;
}

int emh_dedup_snapshot(struct em_host *h, int (*add)(void *ctx, const void *data, size_t len),
                       void *ctx)
{
    uint8_t b[16];
    uint32_t n = 0;
    for (uint32_t gw = 0; gw < MAX_GW; gw++)
        n += h->dedup[gw] != NULL;
    memcpy(b, DD_MAGIC, 8);
    core_put_le32(b + 8, 2);
    core_put_le32(b + 12, n);
    int rc = add(ctx, b, 16);
    for (uint32_t gw = 0; rc == 0 && gw < MAX_GW; gw++) {
        const struct em_host_dedup *d = h->dedup[gw];
        if (!d)
            continue;
        const char *name = em_engine_gateway_name(h->e, (uint16_t)gw);
        uint8_t nl = (uint8_t)strlen(name);
        uint32_t slots = 0;
        for (unsigned i = 0; i < EM_RESEND_WINDOW; i++)
            slots += d->slots[i].len != 0;
        rc = add(ctx, &nl, 1);
        if (rc == 0)
            rc = add(ctx, name, nl);
        core_put_le64(b, d->last);
        core_put_le32(b + 8, slots);
        if (rc == 0)
            rc = add(ctx, b, 12);
        for (unsigned i = 0; rc == 0 && i < EM_RESEND_WINDOW; i++) {
            const struct dd_slot *s = &d->slots[i];
            if (!s->len)
                continue;
            core_put_le64(b, s->seq);
            b[8] = s->len;
            rc = add(ctx, b, 9);
            if (rc == 0)
                rc = add(ctx, s->frame, s->len);
        }
    }
    return rc == 0 ? events_snapshot(h, add, ctx) : rc;
}

bool emh_dedup_is_snapshot(const void *data, size_t len)
{
    return len >= sizeof DD_MAGIC && memcmp(data, DD_MAGIC, sizeof DD_MAGIC) == 0;
}

/* The events part of the section (version 2); with apply, set on h. */
static int walk_events(struct em_host *h, struct core_reader *r, bool apply)
{
    uint32_t n = core_read_u32(r);
    for (uint32_t i = 0; core_reader_ok(r) && i < n; i++) {
        size_t nl = core_read_u8(r);
        const uint8_t *name = core_read_bytes(r, nl);
        uint64_t last = core_read_u64(r);
        uint32_t kept = core_read_u32(r);
        if (!core_reader_ok(r) || nl == 0 || nl > EM_GW_MAX || kept > EM_EVENT_WINDOW ||
            kept > last)
            return CORE_EPROTO;
        struct em_host_events *v = NULL;
        if (apply) {
            int gw = em_engine_gateway(h->e, (const char *)name, nl);
            if (gw < 0 || !(v = ev_of(h, (uint16_t)gw, true)))
                return gw < 0 ? CORE_EPROTO : CORE_ENOMEM;
            v->last = last;
        }
        uint64_t prev = 0;
        for (uint32_t k = 0; core_reader_ok(r) && k < kept; k++) {
            size_t fl = core_read_u8(r);
            const uint8_t *f = core_read_bytes(r, fl);
            struct em_msg m;
            /* each frame as published, with its number: increasing, within
             * the window below last */
            if (!f || fl == 0 || fl > EV_FRAME || em_frame_decode(f, fl, &m) != (int)fl ||
                !(m.present & EM_BIT(eseq)) || m.eseq <= prev || m.eseq > last ||
                last - m.eseq >= EM_EVENT_WINDOW)
                return CORE_EPROTO;
            prev = m.eseq;
            if (v) {
                struct ev_slot *s = &v->slots[m.eseq % EM_EVENT_WINDOW];
                s->eseq = m.eseq;
                s->len = (uint8_t)fl;
                memcpy(s->frame, f, fl);
            }
        }
    }
    return core_reader_ok(r) ? 0 : CORE_EPROTO;
}

/* Walk the section; with apply, set it on the host (the engine restored). */
static int walk(struct em_host *h, struct core_reader *r, bool apply)
{
    core_read_bytes(r, sizeof DD_MAGIC);
    uint32_t version = core_read_u32(r);
    if (version != 1 && version != 2)
        return CORE_EPROTO;
    uint32_t n = core_read_u32(r);
    for (uint32_t i = 0; core_reader_ok(r) && i < n; i++) {
        size_t nl = core_read_u8(r);
        const uint8_t *name = core_read_bytes(r, nl);
        uint64_t last = core_read_u64(r);
        uint32_t slots = core_read_u32(r);
        if (!core_reader_ok(r) || nl == 0 || nl > EM_GW_MAX || slots > EM_RESEND_WINDOW)
            return CORE_EPROTO;
        struct em_host_dedup *d = NULL;
        if (apply) {
            int gw = em_engine_gateway(h->e, (const char *)name, nl);
            if (gw < 0 || !(d = dd_of(h, (uint16_t)gw, true)))
                return gw < 0 ? CORE_EPROTO : CORE_ENOMEM;
            d->last = last;
        }
        for (uint32_t k = 0; core_reader_ok(r) && k < slots; k++) {
            uint64_t seq = core_read_u64(r);
            size_t fl = core_read_u8(r);
            const uint8_t *f = core_read_bytes(r, fl);
            struct em_msg m;
            if (!f || fl == 0 || fl > DD_FRAME || em_frame_decode(f, fl, &m) != (int)fl ||
                !(m.present & EM_BIT(seq)) || m.seq != seq)
                return CORE_EPROTO; /* published as it is: a frame with its number */
            if (d) {
                struct dd_slot *s = &d->slots[seq % EM_RESEND_WINDOW];
                s->seq = seq;
                s->len = (uint8_t)fl;
                memcpy(s->frame, f, fl);
            }
        }
    }
    if (version == 2 && core_reader_ok(r))
        return walk_events(h, r, apply);
    return core_reader_ok(r) ? 0 : CORE_EPROTO;
}

int em_host_snapshot_section(const void *data, size_t len, size_t *engine_off)
{
    if (!emh_dedup_is_snapshot(data, len))
        return CORE_EPROTO;
    struct core_reader r = core_reader_init(data, len);
    int rc = walk(NULL, &r, false);
    if (rc == 0)
        *engine_off = len - r.left;
    return rc;
}

int emh_dedup_restore(struct em_host *h, const void *data, size_t len)
{
    struct core_reader r = core_reader_init(data, len);
    int rc = walk(h, &r, false);
    if (rc)
        return rc;
    rc = em_engine_restore(h->e, r.p, r.left);
    if (rc)
        return rc;
    r = core_reader_init(data, len);
    return walk(h, &r, true);
}

void emh_dedup_free(struct em_host *h)
{
    if (h->dedup)
        for (uint32_t gw = 0; gw < MAX_GW; gw++)
            free(h->dedup[gw]);
    free(h->dedup);
    if (h->events)
        for (uint32_t gw = 0; gw < MAX_GW; gw++)
            free(h->events[gw]);
    free(h->events);
}
