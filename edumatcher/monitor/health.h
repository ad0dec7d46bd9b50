/*
 * Health beacon publishing, shared by every EduMatcher process.
 *
 * Each process owns a core_metrics registry and a PUB socket that connects
 * to the monitor's health endpoint (many publishers, one bound SUB: the
 * usual zmq fan-in). A libuv timer publishes `health.<proc>` every
 * interval, between messages, never inside one.
 */
#ifndef EM_HEALTH_H
#define EM_HEALTH_H

#include <uv.h>

#include "core/metrics.h"
#include "edumatcher/bus/zmq_bus.h"

struct em_health;

/* Called just before each beacon is built: refresh gauges here. */
typedef void (*em_health_hook)(struct em_health *h, void *data);

struct em_health {
    struct core_metrics metrics;
    struct em_bus_sock pub;
    struct em_bus_topic topic;
    uv_timer_t timer;
    em_health_hook hook;
    void *hook_data;
    bool has_pub;
    /* CURVE for the PUB (bus/curve.h): set before em_health_start; NULL
     * (em_health_init's default) for none. Not owned. */
    const struct em_curve_pair *curve;
    uint64_t sent; /* beacons published */
    char line[CORE_BEACON_MAX];
};

struct em_curve_pair;

/* Initialise the registry for process `proc` (register metrics next with
 * core_metrics_counter/gauge on h->metrics). Returns 0 or CORE_EINVAL. */
int em_health_init(struct em_health *h, const char *proc);

/*
 * Start publishing every interval_ms to `endpoint` (connect; "" or NULL:
 * build beacons but publish nothing, for a process that consumes its own).
 * hook may be NULL. Returns 0 or a CORE_E* code from the bus.
 */
int em_health_start(struct em_health *h, uv_loop_t *loop, void *zctx, const char *endpoint,
                    uint64_t interval_ms, em_health_hook hook, void *data);

/*
 * em_health_start, with the warning "<name>: no health beacons (<error>)"
 * when it fails: a process runs on without beacons. Returns what
 * em_health_start returned.
 */
int em_health_start_or_warn(const char *name, struct em_health *h, uv_loop_t *loop, void *zctx,
                            const char *endpoint, uint64_t interval_ms, em_health_hook hook,
                            void *data);

/* Build (and publish, if started with an endpoint) one beacon now; returns
 * the line (owned by h, valid until the next call) or NULL. */
const char *em_health_beacon(struct em_health *h, int *len);

/* Stop the timer and close the socket (run the loop once more after). */
void em_health_stop(struct em_health *h);

#endif
