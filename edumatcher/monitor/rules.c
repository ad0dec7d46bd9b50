/*
 * Health rules over beacon histories (definitions in rules.h).
 *
 * Times: the stale rule compares the monitor's clock with when the
 * monitor last heard the process; the other rules use the sender's uptime
 * in its beacons, so a delayed delivery does not distort a window.
 */
#include "edumatcher/monitor/rules.h"

#include "core/error.h"
#include "core/prom.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const rule_names[EM_RULE_COUNT] = {"stale", "memory_growth", "queue_depth",
                                                      "dropped"};
static const char *const level_names[] = {"ok", "warning", "alarm"};

const char *em_rule_name(enum em_rule r)
{
    return (unsigned)r < EM_RULE_COUNT ? rule_names[r] : "unknown";
}

const char *em_rule_level_name(enum em_rule_level l)
{
    return (unsigned)l <= EM_RULE_ALARM ? level_names[l] : "unknown";
}

void em_rules_default(struct em_rules_config *c)
{
    memset(c, 0, sizeof *c);
    c->interval_ms = 1000;
    c->stale_intervals = 3;
    c->mem_window_ms = 3 * 3600 * 1000ull;
    c->mem_recent_ms = 15 * 60 * 1000ull;
    c->mem_min_span_ms = 3600 * 1000ull;
    c->mem_min_growth_bytes = 64ull << 20;
    c->queue_depth_max = 10000;
    c->drop_window_ms = 60 * 1000;
    em_rules_set_drop_counters(c, "bus_full,bad_frames,bad_events,bad_msgs,dropped");
}

int em_rules_set_drop_counters(struct em_rules_config *c, const char *list)
{
    char names[EM_RULES_DROP_MAX][CORE_METRICS_NAME];
    unsigned n = 0;
    const char *s = list;
    while (*s) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len == 0 || len >= CORE_METRICS_NAME || n == EM_RULES_DROP_MAX)
            return CORE_EINVAL;
        for (size_t i = 0; i < len; i++)
            if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
                return CORE_EINVAL;
        memcpy(names[n], s, len);
        names[n][len] = '\0';
        n++;
        s += len;
        if (*s == ',' && !*++s)
            return CORE_EINVAL; /* a trailing comma */
    }
    memcpy(c->drop_counters, names, sizeof names);
    c->ndrop = n;
    return 0;
}

static void set(struct em_rule_result *r, enum em_rule_level level, double value, const char *fmt,
                ...) __attribute__((format(printf, 4, 5)));

static void set(struct em_rule_result *r, enum em_rule_level level, double value, const char *fmt,
                ...)
{
    va_list ap;
    r->level = level;
    r->value = value;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof r->reason, fmt, ap);
    va_end(ap);
}

static void rule_stale(const struct em_rules_config *c, const struct em_mon_proc *p,
                       uint64_t now_ms, struct em_rule_result *r)
{
    uint64_t interval = c->interval_ms;
    if (p->count >= 2) {
        const struct core_beacon *a = em_mon_back(p, 1), *b = em_mon_back(p, 0);
        if (b->up_ms > a->up_ms)
            interval = b->up_ms - a->up_ms;
    }
    uint64_t age = now_ms > p->last_recv_ms ? now_ms - p->last_recv_ms : 0;
    uint64_t limit = interval * c->stale_intervals;
    if (age > limit)
        set(r, EM_RULE_ALARM, (double)age / 1000.0,
            "no beacon for %" PRIu64 " ms (limit %" PRIu64 ")", age, limit);
    else
        set(r, EM_RULE_OK, (double)age / 1000.0, "last beacon %" PRIu64 " ms ago", age);
}

/* RSS at time t: the last point at or before t (the series is a step
 * function between points). pts is oldest first. */
static uint64_t rss_at(const struct em_mon_mem *pts, unsigned n, uint64_t t)
{
    uint64_t v = pts[0].rss;
    for (unsigned i = 0; i < n && pts[i].up_ms <= t; i++)
        v = pts[i].rss;
    return v;
}

static void rule_memory(const struct em_rules_config *c, const struct em_mon_proc *p,
                        struct em_rule_result *r)
{
    struct em_mon_mem pts[EM_MON_MEM_HISTORY];
    unsigned n = em_mon_mem_series(p, pts);
    if (n < 2) {
        set(r, EM_RULE_OK, 0, "not enough memory history");
        return;
    }
    uint64_t last = pts[n - 1].up_ms;
    uint64_t from = last > c->mem_window_ms ? last - c->mem_window_ms : 0;
    uint64_t to = last > c->mem_recent_ms ? last - c->mem_recent_ms : 0;
    /* The settled points: inside the window, before the recent part. */
    unsigned lo = 0, hi = 0;
    while (lo < n && pts[lo].up_ms < from)
        lo++;
    hi = lo;
    while (hi < n && pts[hi].up_ms <= to)
        hi++;
    if (hi - lo < 2 || pts[hi - 1].up_ms - pts[lo].up_ms < c->mem_min_span_ms) {
        set(r, EM_RULE_OK, 0, "less than %" PRIu64 " min of settled history",
            c->mem_min_span_ms / 60000);
        return;
    }
    const struct em_mon_mem *s = pts + lo;
    unsigned sn = hi - lo;
    uint64_t t0 = s[0].up_ms, span = s[sn - 1].up_ms - t0;
    uint64_t start = s[0].rss, end = s[sn - 1].rss;
    double total = (double)end - (double)start;
    double per_hour = total * 3600000.0 / (double)span;
    if (end <= start || end - start < c->mem_min_growth_bytes) {
        set(r, EM_RULE_OK, per_hour, "grew %.1f MiB over %" PRIu64 " min", total / 1048576.0,
            span / 60000);
        return;
    }
    double min_part = total / (2.0 * EM_RULES_MEM_PARTS);
    for (unsigned k = 0; k < EM_RULES_MEM_PARTS; k++) {
        uint64_t a = rss_at(s, sn, t0 + span * k / EM_RULES_MEM_PARTS);
        uint64_t b = rss_at(s, sn, t0 + span * (k + 1) / EM_RULES_MEM_PARTS);
        if ((double)b - (double)a < min_part) {
            set(r, EM_RULE_OK, per_hour, "grew %.1f MiB in steps, not steadily", total / 1048576.0);
            return;
        }
    }
    set(r, EM_RULE_WARNING, per_hour, "RSS grew steadily %.1f MiB over %" PRIu64 " min",
        total / 1048576.0, span / 60000);
}

static void rule_queue(const struct em_rules_config *c, const struct em_mon_proc *p,
                       struct em_rule_result *r)
{
    int64_t depth;
    if (!em_mon_value(p, "queue_depth", &depth)) {
        set(r, EM_RULE_OK, 0, "no queue_depth gauge");
        return;
    }
    if (depth > c->queue_depth_max)
        set(r, EM_RULE_ALARM, (double)depth, "queue depth %" PRId64 " > %" PRId64, depth,
            c->queue_depth_max);
    else
        set(r, EM_RULE_OK, (double)depth, "queue depth %" PRId64, depth);
}

static void rule_dropped(const struct em_rules_config *c, const struct em_mon_proc *p,
                         struct em_rule_result *r)
{
    uint64_t sum = 0;
    const char *which = NULL;
    for (unsigned i = 0; i < c->ndrop; i++) {
        uint64_t d;
        if (em_mon_delta(p, c->drop_counters[i], c->drop_window_ms, &d) == 0 && d) {
            sum += d;
            which = which ? which : c->drop_counters[i];
        }
    }
    if (sum)
        set(r, EM_RULE_ALARM, (double)sum, "%" PRIu64 " dropped in %" PRIu64 " s (%s)", sum,
            c->drop_window_ms / 1000, which);
    else
        set(r, EM_RULE_OK, 0, "none dropped in %" PRIu64 " s", c->drop_window_ms / 1000);
}

void em_rules_eval(const struct em_rules_config *c, const struct em_mon_proc *p, uint64_t now_ms,
                   struct em_rule_result out[EM_RULE_COUNT])
{
    memset(out, 0, sizeof *out * EM_RULE_COUNT);
    if (p->count == 0) {
        for (unsigned k = 0; k < EM_RULE_COUNT; k++)
            set(&out[k], EM_RULE_OK, 0, "no beacon yet");
        rule_stale(c, p, now_ms, &out[EM_RULE_STALE]);
        return;
    }
    rule_stale(c, p, now_ms, &out[EM_RULE_STALE]);
    rule_memory(c, p, &out[EM_RULE_MEMORY_GROWTH]);
    rule_queue(c, p, &out[EM_RULE_QUEUE_DEPTH]);
    rule_dropped(c, p, &out[EM_RULE_DROPPED]);
}

void em_rules_prometheus(const struct em_rules_config *c, const struct em_mon *m, uint64_t now_ms,
                         struct core_buf *out)
{
    struct em_rule_result res[EM_MON_PROCS][EM_RULE_COUNT];
    for (unsigned i = 0; i < m->n; i++)
        em_rules_eval(c, &m->p[i], now_ms, res[i]);
    core_prom_family(out, "edumatcher_health_rule_level", CORE_PROM_GAUGE,
                     "Health rule outcome per process: 0 ok, 1 warning, 2 alarm.");
    for (unsigned i = 0; i < m->n; i++)
        for (unsigned k = 0; k < EM_RULE_COUNT; k++) {
            struct core_prom_label l[] = {{"proc", m->p[i].proc}, {"rule", rule_names[k]}};
            core_prom_u64(out, "edumatcher_health_rule_level", l, 2, res[i][k].level);
        }
    core_prom_family(out, "edumatcher_health_rule_value", CORE_PROM_GAUGE,
                     "The figure each health rule judged (stale: seconds since the last beacon; "
                     "memory_growth: bytes per hour; queue_depth: messages; dropped: messages in "
                     "the window).");
    for (unsigned i = 0; i < m->n; i++)
        for (unsigned k = 0; k < EM_RULE_COUNT; k++) {
            struct core_prom_label l[] = {{"proc", m->p[i].proc}, {"rule", rule_names[k]}};
            core_prom_double(out, "edumatcher_health_rule_value", l, 2, res[i][k].value);
        }
}

static void json_str(struct core_buf *out, const char *s)
{
    core_buf_append(out, "\"", 1);
    for (; *s; s++) {
        char esc[8];
        if (*s == '"' || *s == '\\') {
            esc[0] = '\\';
            esc[1] = *s;
            core_buf_append(out, esc, 2);
        } else if ((unsigned char)*s < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", (unsigned char)*s);
            core_buf_append(out, esc, 6);
        } else {
            core_buf_append(out, s, 1);
        }
    }
    core_buf_append(out, "\"", 1);
}

void em_rules_json(const struct em_rules_config *c, const struct em_mon *m, uint64_t now_ms,
                   struct core_buf *out)
{
    char num[64];
    core_buf_append(out, "{", 1);
    for (unsigned i = 0; i < m->n; i++) {
        struct em_rule_result res[EM_RULE_COUNT];
        em_rules_eval(c, &m->p[i], now_ms, res);
        if (i)
            core_buf_append(out, ",", 1);
        json_str(out, m->p[i].proc);
        core_buf_append(out, ":{", 2);
        for (unsigned k = 0; k < EM_RULE_COUNT; k++) {
            if (k)
                core_buf_append(out, ",", 1);
            json_str(out, rule_names[k]);
            core_buf_append(out, ":{\"level\":", 10);
            json_str(out, level_names[res[k].level]);
            int w = snprintf(num, sizeof num, ",\"value\":%.6g,\"reason\":", res[k].value);
            core_buf_append(out, num, (size_t)w);
            json_str(out, res[k].reason);
            core_buf_append(out, "}", 1);
        }
        core_buf_append(out, "}", 1);
    }
    core_buf_append(out, "}", 1);
}
