/*
 * A gateway process's way to the engine, for every front end (ALF, FIX):
 * the order link (bus/order_link.h) for orders and their replies, and a
 * SUB on the engine's PUB for market data (`md.`).
 *
 *   sessions --em_gw_link_bus.send--> order link --> engine
 *   sessions <--em_gw_bus_message(order.ack.<gw>)-- order link <-- engine
 *   SYMBOLS table <--em_gw_bus_message(md.<SYM>)-- SUB <-- engine PUB
 *
 * The sessions (gateway_session.h) see only struct em_gw_bus: the
 * transport can change behind it. Subscribing to `order.ack.<gw>` is a
 * no-op here: the engine sends a gw's replies on the link that gw's
 * messages came on (the LOGIN first), which the session's LOGIN proof
 * (LOGGEDIN only when the engine's answer came back) covers unchanged.
 * While the link is down, what the sessions send waits in the link's
 * queue (bounded; over it a send fails and the session answers the orders
 * RATE_LIMIT itself, as when the engine's queue was full).
 *
 * Single-threaded; the struct is caller-owned storage (large: static).
 */
#ifndef EM_GATEWAY_ENGINE_LINK_H
#define EM_GATEWAY_ENGINE_LINK_H

#include <stdbool.h>
#include <uv.h>

#include "edumatcher/bus/order_link.h"
#include "edumatcher/bus/zmq_bus.h"
#include "edumatcher/gateway/gateway_session.h"

struct em_gw_link {
    struct em_gw *gw;
    struct em_link_client *link;
    struct em_bus_sock sub;
    bool sub_open;
    bool was_down; /* the link went down: the next up resends (docs/alf.md I) */
};

/* The sessions' bus; em_gw_config.bus_ctx must be the struct em_gw_link. */
extern const struct em_gw_bus em_gw_link_bus;

struct em_gw_link_opts {
    const char *orders;                /* the engine's order link: unix:<path> or tcp://host:port */
    const char *key_file;              /* a TCP link's key (the engine's link.key); "" for unix */
    const char *pub;                   /* the engine's PUB endpoint, for md. */
    const struct em_curve_pair *curve; /* CURVE for pub (bus/curve.h); NULL: none */
};

/* Connect (the link reconnects by itself while the engine is away).
 * Returns 0, CORE_EINVAL (bad endpoint; TCP without a key), or the key
 * file's / the bus's error. */
int em_gw_link_open(struct em_gw_link *l, struct em_gw *gw, uv_loop_t *loop, void *zctx,
                    const struct em_gw_link_opts *o);
/* Once per loop turn: the sessions' pending batch, then one write. */
void em_gw_link_flush(struct em_gw_link *l);
/* Write what is queued (DISCONNECTs on stop) and close; free after the
 * loop ran. */
void em_gw_link_close(struct em_gw_link *l);
void em_gw_link_free(struct em_gw_link *l);

#endif
