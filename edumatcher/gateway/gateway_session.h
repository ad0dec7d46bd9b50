/*
 * Gateway sessions: what every trader front end (ALF lines, FIX) shares
 * between its connections and the engine.
 *
 *   front end --parsed em_msg--> session --frames, batched--> bus (send)
 *   front end <--events (em_msg)-- session <--order.ack.<gw>-- bus
 *
 * A struct em_gw is one gateway process's sessions; a struct
 * em_gw_session is one trader connection. The module owns the login state
 * machine, AUTH (operator tokens), the per-session rate limit, batching of
 * frames towards the engine and routing of the engine's events back to
 * the session. It does no I/O itself: the bus is behind struct em_gw_bus
 * and the connection behind struct em_gw_front, so a unit test can drive
 * it with fakes and a FIX front end can reuse it unchanged.
 *
 * Session states (functions making each transition):
 *
 *   NEW --LOGIN ok: begin_login--> LOGGING_IN --LOGGEDIN from engine--> LIVE
 *    |  ^                               |          (em_gw_bus_message)   |
 *    |  '--REJECT LOGGED_IN_ELSEWHERE---'--(the front end holds input    |
 *    |     from the engine: front->live     until front->live)           |
 *    '--anything else: REJECT NOT_LOGGED_IN                              |
 *   LIVE --LOGOUT: forwarded, front->close(after_reply)--> DONE          |
 *   LOGGING_IN / LIVE --em_gw_session_close--> DISCONNECT to the engine  |
 *                                              (cancel-on-disconnect)    |
 *
 * The engine is also the authority on where a gw is logged in (docs/alf.md
 * C.9): it refuses the LOGIN of a gw that another door (gateway process,
 * or its hosted port) holds, REJECT reason=LOGGED_IN_ELSEWHERE, and this
 * gateway's own check (one session per gw here, AUTH) comes first.
 *
 * Why LOGIN goes through the engine: the bus subscription to
 * `order.ack.<gw>` (bus->subscribe at LOGIN) takes effect asynchronously.
 * The engine answers LOGIN with LOGGEDIN on that very topic; the session
 * tells the trader LOGGEDIN only when that answer arrives (re-sending
 * LOGIN every login_retry_ms, em_gw_tick), so the path for every later
 * ACK and FILL is proven before the trader can send an order.
 *
 * What the session refuses alone, without the engine: NOT_LOGGED_IN,
 * AUTH (operator messages only from OPS, client ones only from others;
 * tokens from em_gw_add_token), event kinds a trader may not send
 * (SYNTAX), and the rate limit (RATE_LIMIT, a token bucket per session).
 * These local REJECTs can overtake replies the engine has not sent yet;
 * PING goes through the engine, so its PONG is a barrier.
 *
 * Batching: the frames of one session go to the engine as one bus message
 * when the session changes, the message is full (EM_BUS_PAYLOAD_MAX), or
 * em_gw_flush is called (once per loop turn). When bus->send fails (the
 * engine's queue is full) each order of the batch is answered RATE_LIMIT.
 *
 * No order without an answer (docs/alf.md I): a trader's NEW, CANCEL,
 * REPLACE and PING are numbered per session (field seq, from 1 at LOGIN)
 * and kept, at most EM_RESEND_WINDOW of them (one more is refused
 * RATE_LIMIT), until their first reply comes back with that seq. The
 * engine asks for a resend (REJECT reason=RESEND) when a number arrives
 * after a gap, and em_gw_tick resends what waited resend_ms: so after an
 * engine restart every message is either answered from what the engine
 * kept or handled then. Answers that come twice are dropped; the trader
 * never sees seq or RESEND.
 *
 * No event lost (docs/alf.md I.6): the engine numbers the events it sends
 * a gw (field eseq, from 1 at LOGIN); the session delivers each number
 * once and in order, and remembers the last. When the way to the engine
 * is lost (em_gw_engine_lost) or comes back (em_gw_engine_restarted), or
 * a number arrives after a gap, it sends RESYNC eseq=<last> (before its
 * resends) and drops what comes
 * out of order until the answer, RESYNC next=<f>, followed by the events
 * from f that the engine kept: the FILLs and CANCELEDs that were in
 * flight, or published while the link was down, reach the trader once.
 * When f is not last + 1 the engine no longer has every event the trader
 * missed: the session delivers what came, then ends as on a disconnect
 * (its orders are canceled, ALF §8), so that no order of the trader
 * rests in a state it does not know; it counts events_lost. The trader
 * never sees eseq or RESYNC.
 *
 * Market data: bus messages on `md.<SYM>` (the front end's main subscribes
 * to "md.") go to a table of the latest MD line per symbol (em_mkt, at most
 * EM_MKT_SYMS symbols), which the front ends read to answer SYMBOLS
 * locally: that query never reaches the engine or the order path.
 *
 * Single-threaded; no allocation per message (the dirty list grows by
 * doubling).
 */
#ifndef EM_GATEWAY_SESSION_H
#define EM_GATEWAY_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "edumatcher/engine/msg.h"
#include "edumatcher/monitor/market.h"

struct em_gw;
struct em_gw_session;

/* The bus, as the gateway uses it. ctx is em_gw_config.bus_ctx. */
struct em_gw_bus {
    /* One bus message to the engine: topic gw, payload frames[0..len) (one
     * or more binary frames). 0, or an error when it was not sent (the
     * engine's queue is full): the session then answers RATE_LIMIT. */
    int (*send)(void *ctx, const char *gw, size_t gwlen, const void *frames, size_t len);
    /* Start / stop receiving `order.ack.<gw>` (topic: that string). */
    void (*subscribe)(void *ctx, const char *topic);
    void (*unsubscribe)(void *ctx, const char *topic);
    /* Monotonic nanoseconds (rate limit, login retries); NULL: core_now_ns. */
    uint64_t (*now_ns)(void *ctx);
};

/* One session's connection, as its front end sees it. ctx is the
 * front_ctx given to em_gw_session_open. */
struct em_gw_front {
    /* Write one message to the trader: an engine event, a local REJECT,
     * LOGGEDIN. Buffered: write out on flush. */
    void (*deliver)(void *ctx, const struct em_msg *ev);
    /* Write what deliver buffered (after a batch of events). */
    void (*flush)(void *ctx);
    /* The session left LOGGING_IN: LIVE, or NEW again when the engine
     * refused the LOGIN (em_gw_session_live tells): handle input held
     * while logging in (the front end may call em_gw_session_input, or
     * close, from here). */
    void (*live)(void *ctx);
    /* Close the connection: after the pending output (LOGOUT) or now. */
    void (*close)(void *ctx, bool after_reply);
    /* True when the connection is closing: nothing more is delivered. */
    bool (*closing)(void *ctx);
};

struct em_gw_config {
    const struct em_gw_bus *bus;
    void *bus_ctx;
    int64_t rate_limit;     /* messages per second per session, 0: no limit */
    int64_t rate_burst;     /* token bucket size (>= 1) */
    int64_t login_retry_ms; /* re-send LOGIN this often until answered */
    int64_t resend_ms;      /* resend numbered messages unanswered this long (0: 1000) */
};

/* Totals, updated in place: register them with core/metrics. */
struct em_gw_stats {
    uint64_t msgs_in, forwarded, events_out, rejects, rate_limited, bus_full, bad_events, unrouted;
    uint64_t bus_msgs_out, bus_msgs_in;
    /* numbered messages sent again; the engine's RESEND requests; answers
     * dropped because the message had been answered already */
    uint64_t resent, resend_requests, duplicates;
    /* RESYNC requests sent; events dropped as delivered before; sessions
     * ended because events were no longer held by the engine */
    uint64_t resyncs, event_duplicates, events_lost;
    /* LOGINs the engine refused: the trader is logged in on another door */
    uint64_t logins_refused;
    int64_t sessions;
    /* REJECTs written to traders by reason (enum em_rejcode): the
     * gateway's own and the engine's */
    uint64_t rejects_by[EM_REJ_LOGGED_IN_ELSEWHERE + 1];
};

/* A gateway with no session; NULL when out of memory. cfg is copied. */
struct em_gw *em_gw_new(const struct em_gw_config *cfg);
/* Frees the gateway; every session must have been closed. */
void em_gw_free(struct em_gw *g);
struct em_gw_stats *em_gw_stats(struct em_gw *g);

/* Require `token` at LOGIN of gw (OPS can log in only when listed).
 * Returns 0, CORE_EINVAL (not a valid gw or token) or CORE_ENOMEM. */
int em_gw_add_token(struct em_gw *g, const char *gw, const char *token);
/* Lines `<gw> <token>` of path ('#' lines and invalid ones skipped).
 * Returns 0, CORE_ENOTFOUND (cannot open) or CORE_ENOMEM. */
int em_gw_load_tokens(struct em_gw *g, const char *path);

/* A new session (state NEW) for one connection; NULL when out of memory.
 * front and front_ctx must outlive the session. */
struct em_gw_session *em_gw_session_open(struct em_gw *g, const struct em_gw_front *front,
                                         void *front_ctx);
/* The connection is gone: a logged-in session's orders are cancelled
 * (DISCONNECT to the engine, sent now); s is freed. */
void em_gw_session_close(struct em_gw_session *s);

/* One message from the trader, parsed by the front end; code is the
 * parser's REJECT code (0: m is valid). Answers or forwards it. */
void em_gw_session_input(struct em_gw_session *s, const struct em_msg *m, int code);
/* One message the front end refused before parsing (code, e.g.
 * LINE_TOO_LONG): counted and answered REJECT. */
void em_gw_session_refuse(struct em_gw_session *s, int code);
/* True while LOGIN waits for the engine: the front end holds its input
 * until front->live. */
bool em_gw_session_logging_in(const struct em_gw_session *s);

/* True once LOGGEDIN was sent and until LOGOUT. */
bool em_gw_session_live(const struct em_gw_session *s);
/* A message the front end answered itself (SYMBOLS): counted in msgs_in. */
void em_gw_session_answered(struct em_gw_session *s);
/* The latest book and rules per symbol, from `md.<SYM>` messages and
 * em_gw_bus_message calls with a query's answer (owned by g). */
const struct em_mkt *em_gw_market(const struct em_gw *g);

/* True while gw[0..gwlen) has a session here (from LOGIN until LOGOUT or
 * close): where the engine's replies for that gw id belong. */
bool em_gw_has_session(struct em_gw *g, const char *gw, size_t gwlen);
/* As em_gw_has_session, telling a session that waits for the engine's
 * answer to its LOGIN (EM_GW_LOGGING_IN) from one the engine took. */
enum em_gw_presence { EM_GW_ABSENT, EM_GW_LOGGING_IN, EM_GW_PRESENT };
enum em_gw_presence em_gw_presence(struct em_gw *g, const char *gw, size_t gwlen);
/* One bus message from the engine: topic `order.ack.<gw>`, payload one or
 * more event frames, delivered to that session in order; or topic
 * `md.<SYM>`, payload an MD line, kept in the market table (a line older
 * than the one held is ignored, an unparsable one counted in bad_events). */
void em_gw_bus_message(struct em_gw *g, const char *topic, size_t tl, const void *payload,
                       size_t len);
/* After a batch of bus messages: front->flush of every session written to. */
void em_gw_bus_batch_end(struct em_gw *g);
/* Send the pending batch to the engine (call once per loop turn). */
void em_gw_flush(struct em_gw *g);
/* The way to the engine is lost: every live session queues its RESYNC
 * now, so that it reaches the engine before what is sent while the way is
 * down (a bus that queues then, as the order link does): the events the
 * engine makes for those messages come after the ones missed, and the
 * RESYNC asks for few. */
void em_gw_engine_lost(struct em_gw *g);
/* The way to the engine came back after it was lost (a new connection):
 * every live session asks for the events it missed (RESYNC, unless one is
 * queued already) and resends its unanswered numbered messages, now. */
void em_gw_engine_restarted(struct em_gw *g);
/* Re-send LOGIN for the sessions whose login_retry_ms has passed, and the
 * numbered messages of sessions whose oldest unanswered one has waited
 * resend_ms (call every login_retry_ms or so). */
void em_gw_tick(struct em_gw *g);

#endif
