/*
 * SLOWLOG and the latency monitor (Redis 7.0's slowlog.c and latency.c):
 * commands that took at least slowlog-log-slower-than microseconds are
 * kept, newest first, in a list of at most slowlog-max-len entries; events
 * that took at least latency-monitor-threshold milliseconds ("command",
 * "fast-command", "expire-cycle") keep their latest and their largest
 * sample for LATENCY LATEST.
 *
 * Owned by the node. Recording a slow command copies its arguments (at
 * most 32, each cut at 128 bytes, as Redis does), so it allocates; only
 * commands over the threshold get there.
 */
#ifndef GS_SLOWLOG_H
#define GS_SLOWLOG_H

#include <stddef.h>
#include <stdint.h>

#include "gridsync/protocol/resp.h"

struct gs_slowlog;

int gs_slowlog_new(struct gs_slowlog **out);
void gs_slowlog_free(struct gs_slowlog *sl);

/* Record a command that took usec microseconds (the caller checked the
 * threshold); max_len bounds the list. peer and name (may be NULL) are
 * copied. */
void gs_slowlog_push(struct gs_slowlog *sl, size_t max_len, int64_t now_s, uint64_t usec,
                     size_t argc, const struct gs_arg *argv, const char *peer, const char *name);

size_t gs_slowlog_len(const struct gs_slowlog *sl);
void gs_slowlog_reset(struct gs_slowlog *sl);

/* SLOWLOG GET's reply for the newest count entries (count < 0: all). */
void gs_slowlog_reply(const struct gs_slowlog *sl, struct gs_writer *w, int64_t count);

/* A sample of event (a static name) of ms milliseconds at now_s (the
 * caller checked latency-monitor-threshold). */
void gs_latency_add(struct gs_slowlog *sl, const char *event, int64_t now_s, uint64_t ms);

/* LATENCY LATEST's reply; LATENCY RESET [event ...]: how many were reset. */
void gs_latency_latest(const struct gs_slowlog *sl, struct gs_writer *w);
size_t gs_latency_reset(struct gs_slowlog *sl, size_t argc, const struct gs_arg *events);

#endif
