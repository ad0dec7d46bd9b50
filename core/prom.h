/*
 * A writer for the Prometheus text exposition format (version 0.0.4), the
 * format every /metrics endpoint of the project serves.
 *
 *   # HELP edumatcher_orders_total Orders received.
 *   # TYPE edumatcher_orders_total counter
 *   edumatcher_orders_total{proc="engine"} 1027
 *
 * The conventions it enforces (prometheus.io, "Metric and label naming"):
 *  1. Every family starts with `# HELP` and `# TYPE`, and its samples follow
 *     it directly; a family is written once (the caller groups by name).
 *  2. A counter's name ends in `_total`; values are totals, never rates
 *     (the reader takes differences).
 *  3. Base units in the name: `_seconds`, `_bytes`. A histogram is written
 *     as cumulative `_bucket{le="..."}` samples ending with `le="+Inf"`,
 *     then `_sum` and `_count`.
 *  4. Label values are escaped (backslash, double quote, newline), so any
 *     byte string is a valid value; metric and label names are checked
 *     instead (CORE_EINVAL), because an escaped name would be another name.
 *
 * Output goes to a core_buf owned by the caller. A failed allocation sets
 * out->oom and is returned as CORE_ENOMEM; once oom is set every call does
 * nothing, so a caller may write a whole page and check the flag once.
 * No call keeps a pointer to its arguments.
 */
#ifndef CORE_PROM_H
#define CORE_PROM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

enum core_prom_type {
    CORE_PROM_COUNTER,
    CORE_PROM_GAUGE,
    CORE_PROM_HISTOGRAM,
};

/* One label: both strings are read during the call only. */
struct core_prom_label {
    const char *name;
    const char *value;
};

/* True if s is a metric name: [a-zA-Z_:][a-zA-Z0-9_:]*. */
bool core_prom_valid_name(const char *s);

/* True if s is a label name: [a-zA-Z_][a-zA-Z0-9_]*, not starting "__"
 * (reserved for Prometheus itself). */
bool core_prom_valid_label(const char *s);

/*
 * Start a family: write `# HELP name help` and `# TYPE name type`. help may
 * contain anything (backslash and newline are escaped). Returns 0,
 * CORE_EINVAL (bad name, a counter not ending in `_total`, a histogram
 * name ending in `_bucket`/`_sum`/`_count`, help NULL) or CORE_ENOMEM.
 */
int core_prom_family(struct core_buf *out, const char *name, enum core_prom_type type,
                     const char *help);

/*
 * Write one sample `name{labels} value`: an exact integer, or a double
 * (NaN and infinities as Prometheus spells them). labels may be NULL when
 * nlabels is 0. Returns 0, CORE_EINVAL (bad metric or label name) or
 * CORE_ENOMEM.
 */
int core_prom_u64(struct core_buf *out, const char *name, const struct core_prom_label *labels,
                  size_t nlabels, uint64_t value);
int core_prom_i64(struct core_buf *out, const char *name, const struct core_prom_label *labels,
                  size_t nlabels, int64_t value);
int core_prom_double(struct core_buf *out, const char *name, const struct core_prom_label *labels,
                     size_t nlabels, double value);

/*
 * Write the samples of one histogram series (after core_prom_family with
 * CORE_PROM_HISTOGRAM): for i < nbounds, `name_bucket{labels,le="le[i]"}`
 * with the cumulative count of counts[0..i]; then `le="+Inf"` with the sum
 * of counts[0..nbounds] (counts has nbounds + 1 entries, the last for
 * values above every bound); then `name_sum` (sum, in the unit of le) and
 * `name_count`. le must be strictly increasing. labels must not contain
 * `le`. Returns 0, CORE_EINVAL or CORE_ENOMEM.
 */
int core_prom_histogram(struct core_buf *out, const char *name,
                        const struct core_prom_label *labels, size_t nlabels, const double *le,
                        const uint64_t *counts, size_t nbounds, double sum);

/* What the standard process_* metrics report, read from /proc. */
struct core_prom_process {
    double cpu_seconds;   /* user + system */
    double start_seconds; /* since the Unix epoch */
    uint64_t resident_bytes;
    uint64_t virtual_bytes;
    uint64_t open_fds;
    uint64_t max_fds;
};

/* Read the calling process's figures from /proc/self/stat, /proc/stat
 * (boot time), /proc/self/fd and its RLIMIT_NOFILE. Returns 0 or CORE_EIO
 * (a file missing or not in the expected form; *p is then zeroed). */
int core_prom_process_read(struct core_prom_process *p);

/* Write the families process_cpu_seconds_total, process_start_time_seconds,
 * process_resident_memory_bytes, process_virtual_memory_bytes,
 * process_open_fds and process_max_fds (the names every Prometheus client
 * library uses) from p, with no labels. Returns 0 or CORE_ENOMEM. */
int core_prom_process(struct core_buf *out, const struct core_prom_process *p);

#endif
