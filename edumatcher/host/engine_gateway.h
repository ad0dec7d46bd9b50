/*
 * Hosted gateway sessions: ALF trader sessions on the engine's own loop,
 * one process fewer on the order path (docs/edumatcher-exchange.md,
 * "Hosted sessions"; docs/perf.md, the order path).
 *
 *   trader --ALF/TCP--> alf_front --> em_gw session --bus.send-->
 *          em_host_inbound (journal append, submit; events staged)
 *   end of the loop turn: em_host_batch_end (journal flush, then publish)
 *   publish order.ack.<gw> of a hosted session --> em_gw_bus_message -->
 *          alf_front --ALF/TCP--> trader
 *
 * The same front end (gateway/alf/alf_front.h) and the same sessions
 * (gateway/gateway_session.h: LOGIN, tokens, AUTH, rate limit, resends,
 * cancel-on-disconnect) as edumatcher-gateway; only the bus under the
 * sessions differs: instead of the order link, frames go straight to the
 * engine host and the host's replies for a hosted session's gw id come
 * straight back (no socket, no link record). Separate gateways on the
 * order link keep working beside them: the engine's publish callback
 * hands every message to em_hosted_publish first, which takes the replies
 * of the gw ids that have a hosted session and leaves the rest (acks of
 * other gateways' traders, trades, market data) to the caller.
 *
 * Invariants:
 * - journal before ACK: replies reach a hosted session only through the
 *   host's publish, which comes after the journal flush (engine_host.h);
 *   the batch of a loop turn ends (em_host_batch_end) in this module's
 *   check handle, after the sessions' pending frames were handed over.
 * - the host and the sessions are never on the stack inside each other:
 *   a frame sent while a reply is being delivered (a LOGIN's held input
 *   going out as the session goes live) waits in a queue, and a reply
 *   published while frames are being handed over (the host's staging
 *   arena or its trade log filled up: a sweep of more than 64 trades)
 *   waits in another, with every reply published after it until the
 *   check; both are drained in order in that check, so no trader's
 *   events change order.
 * - SYMBOLS is answered by the sessions from their market table, filled
 *   at open from em_host_query and kept current from the md.<SYM> lines
 *   the host publishes.
 *
 * Single-threaded (the engine's loop); no allocation per message once the
 * queues have grown.
 */
#ifndef EM_ENGINE_GATEWAY_H
#define EM_ENGINE_GATEWAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "edumatcher/bus/zmq_bus.h" /* struct em_bus_topic */
#include "edumatcher/gateway/gateway_session.h"
#include "edumatcher/host/engine_host.h"

struct em_hosted;

struct em_hosted_config {
    const char *bind; /* address to listen on */
    int port;         /* 0: any free port (em_hosted_port) */
    int64_t maxclients;
    const char *tokens_file; /* "" or NULL: no tokens (OPS cannot log in) */
    /* sessions: as edumatcher-gateway's options of the same names */
    int64_t rate_limit, rate_burst, login_retry_ms, resend_ms;
    /* The host failed (its journal): the process must stop. */
    void (*fatal)(int rc);
};

/* Sessions on h, fed from the host's symbol table; not yet listening.
 * Returns 0, CORE_ENOTFOUND (tokens file), CORE_ENOMEM. */
int em_hosted_open(struct em_hosted **out, uv_loop_t *loop, struct em_host *h,
                   const struct em_hosted_config *cfg);
/* Listen (when input starts). Returns 0 or the listener's error. */
int em_hosted_listen(struct em_hosted *x);
/* The port listened on (after em_hosted_listen). */
int em_hosted_port(const struct em_hosted *x);
/* Every message the host publishes, first: true when it was a reply for
 * a hosted session (delivered, the caller sends it nowhere else); false
 * otherwise (an md.<SYM> line is also kept for SYMBOLS). */
bool em_hosted_publish(struct em_hosted *x, const struct em_bus_topic *topic, const void *data,
                       size_t len);
/* Stop listening and close every session (their DISCONNECTs are handed to
 * the host now: the caller flushes the host after). */
void em_hosted_stop(struct em_hosted *x);
/* Free after the loop ran (NULL: nothing). */
void em_hosted_free(struct em_hosted *x);
struct em_gw_stats *em_hosted_stats(struct em_hosted *x);

#endif
