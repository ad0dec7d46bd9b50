/*
 * Process metrics: a small registry of counters and gauges, sampled
 * handle latencies, and the health beacon that carries them.
 *
 * Counters are totals since the process started (never reset); the reader
 * takes differences into rates, so a lost beacon loses no information
 * (the monitor takes the rates). Gauges are instantaneous values (queue
 * depth, open connections). The registry holds pointers to the program's
 * own uint64_t / int64_t cells, so the hot path increments a plain field
 * and pays nothing for being exported.
 *
 * Latency: one handled message in CORE_METRICS_SAMPLE_EVERY is timed
 * (a mask test on a counter, not a modulo) and its duration stored in a
 * preallocated ring. A beacon summarises the samples recorded since the
 * previous beacon (p50, p99, max). The same samples are also counted, since
 * the process started, into fixed buckets (core_metrics_lat_bounds_ns), so
 * a reader can export a histogram that aggregates over time and processes
 * (Prometheus `_bucket`), which percentiles of windows cannot do.
 *
 * Beacon: one line of text, `key=value` tokens separated by single spaces:
 *
 *   health v=1 proc=<name> pid=<n> seq=<n> up_ms=<n> rss=<bytes>
 *     lat_n=<n> lat_p50=<ns> lat_p99=<ns> lat_max=<ns>
 *     lat_cnt=<samples ever> lat_sum=<ns ever> lat_h=<n0>,<n1>,...,<n16>
 *     c.<counter>=<total> ... g.<gauge>=<value> ...
 *
 * Names are 1-31 of [a-z0-9_]. Processes publish it on `health.<proc>`.
 */
#ifndef CORE_METRICS_H
#define CORE_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CORE_METRICS_MAX          48  /* counters + gauges per process */
#define CORE_METRICS_NAME         32  /* including the NUL */
#define CORE_METRICS_SAMPLE_MASK  15u /* time one in 16 */
#define CORE_METRICS_SAMPLE_EVERY (CORE_METRICS_SAMPLE_MASK + 1)
#define CORE_METRICS_RING         4096 /* samples kept; a power of two */
#define CORE_BEACON_MAX           4096 /* longest beacon line: 48 metrics of 31-character names */
#define CORE_METRICS_LAT_BOUNDS   16   /* histogram bucket upper bounds */

/* Upper bounds (ns, inclusive, increasing) of the latency histogram's
 * buckets; a last, implicit bucket holds what is above the last bound. */
extern const uint64_t core_metrics_lat_bounds_ns[CORE_METRICS_LAT_BOUNDS];

enum core_metric_kind {
    CORE_METRIC_COUNTER,
    CORE_METRIC_GAUGE,
};

struct core_metric {
    char name[CORE_METRICS_NAME];
    enum core_metric_kind kind;
    const void *cell; /* uint64_t (counter) or int64_t (gauge), owned by the program */
};

struct core_metrics {
    char proc[CORE_METRICS_NAME];
    unsigned n;
    struct core_metric m[CORE_METRICS_MAX];
    uint64_t start_ns;
    uint64_t seq;       /* beacons produced */
    uint64_t handled;   /* sampling clock: messages offered to sample_due */
    uint64_t ring_head; /* samples ever recorded */
    uint64_t ring_read; /* ring_head at the previous beacon */
    uint64_t lat_cnt;   /* samples counted into lat_h, ever */
    uint64_t lat_sum;   /* their sum in ns (saturating) */
    uint64_t lat_h[CORE_METRICS_LAT_BOUNDS + 1];
    uint32_t ring[CORE_METRICS_RING];
    uint32_t scratch[CORE_METRICS_RING]; /* sorted copy for percentiles */
};

/* Initialise for process `proc` (a valid name). The struct is large
 * (~33 KB): allocate it once. Returns 0 or CORE_EINVAL. */
int core_metrics_init(struct core_metrics *m, const char *proc);

/* Export a counter / gauge under `name`. The cell stays owned by the
 * caller and must outlive m. Returns 0, CORE_EINVAL (bad name), CORE_EEXISTS
 * or CORE_ETOOBIG (registry full). */
int core_metrics_counter(struct core_metrics *m, const char *name, const uint64_t *cell);
int core_metrics_gauge(struct core_metrics *m, const char *name, const int64_t *cell);

/* True for one call in CORE_METRICS_SAMPLE_EVERY: time this message. */
static inline bool core_metrics_sample_due(struct core_metrics *m)
{
    return (m->handled++ & CORE_METRICS_SAMPLE_MASK) == 0;
}

/* Store one sampled latency (ns; clipped to 2^32-1). O(1), no allocation;
 * the oldest sample is overwritten when the ring is full. */
static inline void core_metrics_record(struct core_metrics *m, uint64_t ns)
{
    m->ring[m->ring_head++ & (CORE_METRICS_RING - 1)] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
}

/*
 * Write the beacon line (no newline, NUL-terminated) into out and start a
 * new latency window. Not for a hot path: it sorts the window's samples
 * and reads /proc/self/statm. Returns the length, or CORE_ETOOBIG if cap
 * is too small (the window is not consumed then).
 */
int core_metrics_beacon(struct core_metrics *m, char *out, size_t cap);

/* A beacon parsed back (by the monitor). */
struct core_beacon {
    char proc[CORE_METRICS_NAME];
    uint64_t pid, seq, up_ms, rss;
    uint64_t lat_n, lat_p50, lat_p99, lat_max;
    bool has_hist; /* lat_h was present (older writers do not send it) */
    uint64_t lat_cnt, lat_sum;
    uint64_t lat_h[CORE_METRICS_LAT_BOUNDS + 1];
    unsigned n;
    struct {
        char name[CORE_METRICS_NAME];
        enum core_metric_kind kind;
        int64_t value; /* counters are reported as non-negative */
    } m[CORE_METRICS_MAX];
};

/* Parse a beacon line (len bytes, need not be NUL-terminated). Unknown
 * plain keys are ignored (newer writers); a malformed token, a missing
 * proc, a lat_h without exactly CORE_METRICS_LAT_BOUNDS + 1 counts, or
 * more than CORE_METRICS_MAX metrics is CORE_EPROTO. */
int core_beacon_parse(const char *line, size_t len, struct core_beacon *out);

/* Resident set size of this process in bytes (0 if unknown). */
uint64_t core_rss_bytes(void);

#endif
