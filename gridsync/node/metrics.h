/*
 * gridsync-server's Prometheus endpoint: `--metrics-port N` (and
 * `metrics-bind`, default 127.0.0.1) serves GET /metrics in the text
 * exposition format (core/prom.h) on the node's own loop, beside the RESP
 * listener. Nothing is computed for it on the request path: a scrape reads
 * the counters INFO reads (the stores' statistics, the server's, the
 * command table's calls and latency histograms) and formats them then.
 *
 * What it serves (docs/gridsync.md, "Metrics"): commands by name, keyspace
 * hits and misses, expirations and evictions, memory, clients and their
 * buffers, errors by code, keys per database, command latency as a
 * histogram in seconds, what each feature adds through its metrics hook
 * (cluster mode: Raft state per group), and the standard process_*
 * families.
 *
 * Life cycle (the node calls these; see node/node.c):
 *
 *   gs_metrics_start (port 0: *out = NULL, nothing listens)
 *        | scrapes served by the loop
 *   gs_metrics_stop  (with gs_node_stop: stop listening, close connections)
 *        | loop returns
 *   gs_metrics_free
 */
#ifndef GS_METRICS_H
#define GS_METRICS_H

#include "core/buf.h"

struct gs_node;
struct gs_metrics;

/* Listen on n->cfg.metrics_bind:metrics_port. Returns 0 (with *out NULL
 * when the port is 0), CORE_EBUSY (port in use), CORE_EINVAL (bad address)
 * or CORE_ENOMEM. */
int gs_metrics_start(struct gs_metrics **out, struct gs_node *n);

/* The port actually bound (metrics-port 0 is "off", so this is the
 * configured one), or a negative code. */
int gs_metrics_port(const struct gs_metrics *m);

/* Stop listening and close every connection. Safe twice; NULL is fine. */
void gs_metrics_stop(struct gs_metrics *m);

/* Release (after gs_metrics_stop, once the loop has returned). NULL is fine. */
void gs_metrics_free(struct gs_metrics *m);

/* Write the whole page for node n into out (appended). On allocation
 * failure out->oom is set (core/buf.h). */
void gs_metrics_write(struct gs_node *n, struct core_buf *out);

#endif
