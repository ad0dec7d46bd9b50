/*
 * The engine host's state, shared by engine_host.c (inbound, journal,
 * publishing, snapshots, lifetime) and engine_host_md.c (market data and
 * queries). Not a public header: only those two files include it; the
 * rest uses engine_host.h.
 */
#ifndef EM_ENGINE_HOST_INTERNAL_H
#define EM_ENGINE_HOST_INTERNAL_H

#include <sys/types.h>

#include "core/buf.h"
#include "core/clock.h"
#include "edumatcher/host/engine_host.h"

#define ARENA    (4u << 20) /* staged event bytes per batch */
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

/* What the process keeps per symbol id: its market-data topic and the
 * engine's md version last published. */
struct sym_pub {
    struct em_bus_topic topic;
    uint64_t version;
    uint64_t md_seq; /* md messages published in this run */
};

#define DD_FRAME 80 /* a first reply with seq (REPLACED, the longest, is 77 bytes) */
#define EV_FRAME 96 /* an event with eseq (FILL, the longest, is 93 bytes) */
struct em_host_dedup;
struct em_host_events;

struct em_host {
    struct em_host_config cfg;
    struct em_journal journal;
    struct em_trade_log tlog; /* every trade by id, for recovery (trade_log.h) */
    bool tlog_open;
    uint64_t md_epoch; /* this run's start (ns, wall clock): resets md seq */
    struct em_engine *e;
    bool replaying;
    bool fresh;         /* the journal was empty at open */
    int failed;         /* CORE_EIO once the journal failed: nothing more is published */
    uint64_t base_ns;   /* monotonic time at which engine time was now_ms */
    uint64_t engine_ms; /* the engine's clock: sum of journaled TICKs */
    uint64_t base_engine_ms;
    /* topics per gateway id, built on first use */
    const struct em_bus_topic **gw_topic;
    struct em_topic_cache *ack_topics;
    struct em_bus_topic trade_topic;
    /* per symbol id (1..), grown by the market-data timer */
    struct sym_pub *syms;
    uint32_t syms_cap;
    /* staging */
    uint8_t *arena;
    size_t arena_len;
    unsigned staged;
    uint32_t batch_gen;   /* bumped at each publish: invalidates chain_tail */
    uint32_t *chain_gen;  /* per gw: the batch its chain_tail belongs to */
    uint32_t *chain_tail; /* per gw: offset + 1 of its last staged event */
    uint8_t sendbuf[EM_BUS_PAYLOAD_MAX];
    struct em_host_stats st;
    /* schedule: operator messages due at an engine time (AT lines) */
    struct sched {
        uint64_t at_ms;
        struct em_msg m;
    } * sched;
    size_t nsched, sched_cap, next_sched;
    /* snapshots: the blob being built, when the last one was taken */
    struct core_buf snap; /* oom is sticky: a blob with a hole is never written */
    uint64_t snap_ns;
    /* resent messages (engine_host_dedup.c): per gateway id, NULL until it
     * sends a numbered message; the message being handled */
    struct em_host_dedup **dedup;
    struct em_host_dedup *cur_dd; /* until its first reply is kept */
    /* events sent per gateway id, numbered (eseq) and the last
     * EM_EVENT_WINDOW kept: NULL until it gets its first event */
    struct em_host_events **events;
    uint16_t cur_gw;
    uint64_t cur_seq;
    /* per gw id: the door that holds its session (engine_host.h, "Doors";
     * 0: none), not journaled: a run's doors end with it */
    uint64_t *holder;
    pid_t snap_child;        /* > 0: a child is writing the snapshot of snap_child_seq */
    uint64_t snap_child_seq; /* its last record */
    uint64_t snap_child_ns;  /* when it was forked */
};

/* engine_host.c, for engine_host_dedup.c: stage one event for publishing
 * at the end of the batch (gw >= 0: with that trader's others); the
 * topic order.ack.<gw>. */
void emh_stage(struct em_host *h, const struct em_bus_topic *topic, int gw, const void *data,
               size_t len);
const struct em_bus_topic *emh_ack_topic(struct em_host *h, uint16_t gw);

/* engine_host_dedup.c (its header comment has the rules). */
/* A numbered message m of gw: true when it was answered here (a duplicate
 * or a gap) and must be neither journaled nor handled. */
bool emh_dedup_answered(struct em_host *h, uint16_t gw, const struct em_msg *m);
/* Around handling a new numbered message: keep its first reply. */
void emh_dedup_begin(struct em_host *h, uint16_t gw, uint64_t seq);
void emh_dedup_end(struct em_host *h);
/* From the sink: when frame[0..n) (of kind) is the first reply of the
 * message being handled, add its seq and keep it; returns the length. */
size_t emh_dedup_first_reply(struct em_host *h, uint16_t gw, uint8_t kind, uint8_t *frame,
                             size_t n);
/* A LOGIN of gw: its next session numbers from 1 (messages and events). */
void emh_dedup_login(struct em_host *h, uint16_t gw);
/* From the sink, live and on replay: number the event frame[0..n) of gw
 * (append eseq; frame holds EM_FRAME_MAX bytes) and keep it; returns the
 * new length (n unchanged when it cannot be numbered). */
size_t emh_events_number(struct em_host *h, uint16_t gw, uint8_t *frame, size_t n);
/* A RESYNC of gw asking for the events after eseq: its answer and the
 * events kept, staged. */
void emh_events_resync(struct em_host *h, uint16_t gw, uint64_t eseq);
/* The snapshot section before the engine's bytes, and its restore (which
 * restores the engine's bytes after it too). */
int emh_dedup_snapshot(struct em_host *h, int (*add)(void *ctx, const void *data, size_t len),
                       void *ctx);
bool emh_dedup_is_snapshot(const void *data, size_t len);
int emh_dedup_restore(struct em_host *h, const void *data, size_t len);
void emh_dedup_free(struct em_host *h);

static inline uint64_t now_ns(const struct em_host *h)
{
    return h->cfg.bus->now_ns ? h->cfg.bus->now_ns(h->cfg.bus_ctx) : core_now_ns();
}

#endif
