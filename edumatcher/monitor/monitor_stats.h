/*
 * The monitor's state: the recent health beacons of every process, turned
 * into rates over rolling windows and rendered as JSON or Prometheus text.
 *
 * Invariants:
 *  1. Bounded memory: at most EM_MON_PROCS processes, each with a ring of
 *     its last EM_MON_HISTORY beacons (about a minute at one a second);
 *     older beacons are overwritten, a process beyond the limit is ignored.
 *  2. Rates are differences of totals (metrics.h): (latest - oldest within
 *     the window) / (their sender uptimes' difference). A restarted
 *     process (new pid, or uptime or a counter going backwards) starts a
 *     new history, so a rate never spans a restart.
 *  3. Processes are kept in first-seen order, so output is stable.
 *  4. Besides the beacon ring, each process keeps a memory series: the
 *     RSS of its first beacon and then of the first beacon at least
 *     EM_MON_MEM_STEP_MS of its uptime after the previous point (about
 *     four hours); a restart empties it too.
 */
#ifndef EM_MONITOR_STATS_H
#define EM_MONITOR_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/metrics.h"
#include "core/http.h"

#define EM_MON_PROCS       32
#define EM_MON_HISTORY     64
#define EM_MON_MEM_HISTORY 256   /* memory points kept per process */
#define EM_MON_MEM_STEP_MS 60000 /* sender uptime between memory points */

/* One point of a process's memory series (for the memory-growth rule,
 * which looks hours back, further than the beacon history). */
struct em_mon_mem {
    uint64_t up_ms, rss;
};

struct em_mon_proc {
    char proc[CORE_METRICS_NAME];
    uint64_t last_recv_ms; /* monitor clock */
    uint64_t restarts;
    unsigned head;  /* index of the next write */
    unsigned count; /* valid entries, <= EM_MON_HISTORY */
    struct core_beacon hist[EM_MON_HISTORY];
    unsigned mem_head, mem_count; /* ring of the memory series */
    struct em_mon_mem mem[EM_MON_MEM_HISTORY];
};

struct em_mon {
    unsigned n;
    uint64_t beacons, rejected; /* totals */
    struct em_mon_proc p[EM_MON_PROCS];
};

/* Empty the state. The struct is large (a few MB): allocate it once. */
void em_mon_init(struct em_mon *m);

/* Add a parsed beacon received at now_ms. Returns 0, or CORE_ETOOBIG when
 * the process is new and EM_MON_PROCS are already tracked. */
int em_mon_ingest(struct em_mon *m, const struct core_beacon *b, uint64_t now_ms);

/* The latest beacon of p (p must have count > 0). */
const struct core_beacon *em_mon_latest(const struct em_mon_proc *p);

/* The beacon `back` places before the latest (0: the latest); back must be
 * below p->count. */
const struct core_beacon *em_mon_back(const struct em_mon_proc *p, unsigned back);

/* Copy p's memory series, oldest first, into out (EM_MON_MEM_HISTORY
 * entries); returns how many. */
unsigned em_mon_mem_series(const struct em_mon_proc *p, struct em_mon_mem *out);

/* Growth of counter `name` over the last window_ms of p's history: latest
 * total minus the total in the oldest beacon within the window (at least
 * the previous beacon). Returns 0, or CORE_ENOTFOUND (no such counter, or
 * fewer than two beacons). */
int em_mon_delta(const struct em_mon_proc *p, const char *name, uint64_t window_ms, uint64_t *out);

/* Rate per second of counter `name` over the last window_ms of p's history
 * (window_ms 0: between the last two beacons). Returns 0, or
 * CORE_ENOTFOUND (no such counter, or fewer than two beacons in it). */
int em_mon_rate(const struct em_mon_proc *p, const char *name, uint64_t window_ms, double *out);

/* Value of metric `name` in p's latest beacon; false if absent. */
bool em_mon_value(const struct em_mon_proc *p, const char *name, int64_t *out);

/* Render the whole state as JSON. A process silent for more than stale_ms
 * is marked stale. */
void em_mon_json(const struct em_mon *m, uint64_t now_ms, uint64_t stale_ms,
                 struct core_http_response *res);

/* Append the state to out in the Prometheus text format (core/prom.h):
 * edumatcher_up (0 once silent for more than stale_ms), beacon age,
 * restarts, memory and uptime per process; the handle latency histogram
 * (edumatcher_handle_latency_seconds) of every process that sends one;
 * then one family per counter name (edumatcher_<name>_total) and per
 * gauge name (edumatcher_<name>), labelled by proc. Values are totals and
 * current values only: rates are the reader's job. Allocation failure
 * leaves out->oom set. */
void em_mon_prometheus(const struct em_mon *m, uint64_t now_ms, uint64_t stale_ms,
                       struct core_buf *out);

#endif
