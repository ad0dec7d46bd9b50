/*
 * Health rules: what the monitor concludes from a process's beacons.
 *
 * Each rule looks at one process's history (monitor_stats.h) and gives a
 * level (OK, WARNING, ALARM), the figure it judged, and a short reason.
 * Rules are pure functions of the history, the monitor clock and the
 * configuration: the unit tests drive them with synthetic beacon series.
 *
 *   stale          ALARM when no beacon came for stale_intervals times the
 *                  process's own beacon interval (the difference of its
 *                  last two up_ms; interval_ms until two have come).
 *                  Figure: seconds since the last beacon.
 *   memory_growth  WARNING when RSS grew steadily over hours: look at the
 *                  memory series (one point per EM_MON_MEM_STEP_MS of the
 *                  sender's uptime) in the last mem_window_ms, leave out
 *                  the last mem_recent_ms, and require at least
 *                  mem_min_span_ms of it; cut that span into
 *                  EM_RULES_MEM_PARTS equal parts; warn if the total growth
 *                  is at least mem_min_growth_bytes and every part grew by
 *                  at least 1/(2 * EM_RULES_MEM_PARTS) of it. A step (the
 *                  book filling at the open) is ignored: while it is recent
 *                  it is left out, and later it lies in one part only.
 *                  Figure: growth in bytes per hour over the span.
 *   queue_depth    ALARM when the gauge queue_depth exceeds queue_depth_max.
 *                  Figure: the gauge.
 *   dropped        ALARM when any counter named in drop_counters grew within
 *                  the last drop_window_ms of the history. Figure: the sum
 *                  of their growth in that window.
 *
 * A rule that has nothing to judge (no such gauge, too little history) is
 * OK, with a reason that says so.
 */
#ifndef EM_MONITOR_RULES_H
#define EM_MONITOR_RULES_H

#include <stdint.h>

#include "core/buf.h"
#include "edumatcher/monitor/monitor_stats.h"

enum em_rule {
    EM_RULE_STALE,
    EM_RULE_MEMORY_GROWTH,
    EM_RULE_QUEUE_DEPTH,
    EM_RULE_DROPPED,
    EM_RULE_COUNT,
};

enum em_rule_level {
    EM_RULE_OK = 0,
    EM_RULE_WARNING = 1,
    EM_RULE_ALARM = 2,
};

#define EM_RULES_MEM_PARTS 4
#define EM_RULES_DROP_MAX  8 /* counter names in drop_counters */

struct em_rules_config {
    uint64_t interval_ms; /* expected beacon interval before two are seen */
    unsigned stale_intervals;
    uint64_t mem_window_ms; /* how far back the memory rule looks */
    uint64_t mem_recent_ms; /* the recent part it leaves out */
    uint64_t mem_min_span_ms;
    uint64_t mem_min_growth_bytes;
    int64_t queue_depth_max;
    uint64_t drop_window_ms;
    unsigned ndrop;
    char drop_counters[EM_RULES_DROP_MAX][CORE_METRICS_NAME];
};

struct em_rule_result {
    enum em_rule_level level;
    double value;
    char reason[96];
};

/* The defaults: 1 s beacons, stale after 3, memory over 3 h leaving out
 * 15 min with 1 h at least and 64 MiB growth, queue depth 10000, drops in
 * the last 60 s of bus_full, bad_frames, bad_events, bad_msgs, dropped. */
void em_rules_default(struct em_rules_config *c);

/* Set drop_counters from a comma-separated list of counter names. Returns
 * 0, or CORE_EINVAL (a bad name, more than EM_RULES_DROP_MAX); c is
 * unchanged then. */
int em_rules_set_drop_counters(struct em_rules_config *c, const char *list);

/* Rule name as shown on the page and in /metrics ("stale", ...). */
const char *em_rule_name(enum em_rule r);
const char *em_rule_level_name(enum em_rule_level l);

/* Evaluate every rule for process p at monitor time now_ms into
 * out[EM_RULE_COUNT]. */
void em_rules_eval(const struct em_rules_config *c, const struct em_mon_proc *p, uint64_t now_ms,
                   struct em_rule_result out[EM_RULE_COUNT]);

/* Append every process's results to out in the Prometheus text format:
 * edumatcher_health_rule_level{proc,rule} (0 ok, 1 warning, 2 alarm) and
 * edumatcher_health_rule_value{proc,rule} (the figure). */
void em_rules_prometheus(const struct em_rules_config *c, const struct em_mon *m, uint64_t now_ms,
                         struct core_buf *out);

/* Append {"<proc>":{"<rule>":{"level":"...","value":v,"reason":"..."},..},..}
 * to out. */
void em_rules_json(const struct em_rules_config *c, const struct em_mon *m, uint64_t now_ms,
                   struct core_buf *out);

#endif
