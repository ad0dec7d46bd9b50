/*
 * Monitor state: beacon history per process, rolling-window rates, and the
 * JSON / Prometheus renderings (invariants in monitor_stats.h).
 */
#include "edumatcher/monitor/monitor_stats.h"

#include "core/error.h"

#include <inttypes.h>
#include <string.h>

/* The rate windows every rendering reports, in milliseconds. */
static const struct {
    const char *label;
    uint64_t ms;
} windows[] = {{"1s", 1000}, {"10s", 10000}, {"60s", 60000}};
#define NWINDOWS (sizeof windows / sizeof windows[0])

void em_mon_init(struct em_mon *m)
{
    memset(m, 0, sizeof *m);
}

static const struct core_beacon *entry(const struct em_mon_proc *p, unsigned back)
{
    /* back = 0 is the latest */
    return &p->hist[(p->head + EM_MON_HISTORY - 1 - back) % EM_MON_HISTORY];
}

const struct core_beacon *em_mon_latest(const struct em_mon_proc *p)
{
    return entry(p, 0);
}

static bool find_metric(const struct core_beacon *b, const char *name, int64_t *v,
                        enum core_metric_kind *kind)
{
    for (unsigned i = 0; i < b->n; i++) {
        if (strcmp(b->m[i].name, name) == 0) {
            *v = b->m[i].value;
            if (kind)
                *kind = b->m[i].kind;
            return true;
        }
    }
    return false;
}

/* A beacon that cannot follow the previous one of the same process. */
static bool is_restart(const struct core_beacon *prev, const struct core_beacon *b)
{
    if (prev->pid != b->pid || b->up_ms < prev->up_ms)
        return true;
    for (unsigned i = 0; i < b->n; i++) {
        int64_t old;
        enum core_metric_kind k;
        if (b->m[i].kind == CORE_METRIC_COUNTER && find_metric(prev, b->m[i].name, &old, &k) &&
            k == CORE_METRIC_COUNTER && b->m[i].value < old)
            return true;
    }
    return false;
}

int em_mon_ingest(struct em_mon *m, const struct core_beacon *b, uint64_t now_ms)
{
    struct em_mon_proc *p = NULL;
    for (unsigned i = 0; i < m->n; i++)
        if (strcmp(m->p[i].proc, b->proc) == 0)
            p = &m->p[i];
    if (!p) {
        if (m->n == EM_MON_PROCS) {
            m->rejected++;
            return CORE_ETOOBIG;
        }
        p = &m->p[m->n++];
        memset(p, 0, sizeof *p);
        strcpy(p->proc, b->proc);
    } else if (p->count && is_restart(em_mon_latest(p), b)) {
        p->count = 0;
        p->restarts++;
    }
    p->hist[p->head] = *b;
    p->head = (p->head + 1) % EM_MON_HISTORY;
    if (p->count < EM_MON_HISTORY)
        p->count++;
    p->last_recv_ms = now_ms;
    m->beacons++;
    return 0;
}

int em_mon_rate(const struct em_mon_proc *p, const char *name, uint64_t window_ms, double *out)
{
    if (p->count < 2)
        return CORE_ENOTFOUND;
    const struct core_beacon *last = entry(p, 0);
    int64_t v1, v0;
    enum core_metric_kind k;
    if (!find_metric(last, name, &v1, &k) || k != CORE_METRIC_COUNTER)
        return CORE_ENOTFOUND;
    /* The oldest beacon still inside the window (at least the previous). */
    const struct core_beacon *first = entry(p, 1);
    for (unsigned back = 2; back < p->count; back++) {
        const struct core_beacon *b = entry(p, back);
        if (last->up_ms - b->up_ms > window_ms)
            break;
        first = b;
    }
    if (!find_metric(first, name, &v0, NULL) || last->up_ms <= first->up_ms)
        return CORE_ENOTFOUND;
    *out = (double)(v1 - v0) * 1000.0 / (double)(last->up_ms - first->up_ms);
    return 0;
}

bool em_mon_value(const struct em_mon_proc *p, const char *name, int64_t *out)
{
    return p->count > 0 && find_metric(em_mon_latest(p), name, out, NULL);
}

void em_mon_json(const struct em_mon *m, uint64_t now_ms, uint64_t stale_ms,
                 struct core_http_response *res)
{
    core_http_printf(res, "{\"beacons\":%" PRIu64 ",\"processes\":[", m->beacons);
    for (unsigned i = 0; i < m->n; i++) {
        const struct em_mon_proc *p = &m->p[i];
        if (p->count == 0)
            continue;
        const struct core_beacon *b = em_mon_latest(p);
        uint64_t age = now_ms > p->last_recv_ms ? now_ms - p->last_recv_ms : 0;
        core_http_printf(
            res,
            "%s{\"proc\":\"%s\",\"pid\":%" PRIu64 ",\"up_ms\":%" PRIu64 ",\"age_ms\":%" PRIu64
            ",\"stale\":%s,\"restarts\":%" PRIu64 ",\"rss\":%" PRIu64 ",\"lat_n\":%" PRIu64
            ",\"lat_p50_ns\":%" PRIu64 ",\"lat_p99_ns\":%" PRIu64 ",\"lat_max_ns\":%" PRIu64,
            i ? "," : "", p->proc, b->pid, b->up_ms, age, age > stale_ms ? "true" : "false",
            p->restarts, b->rss, b->lat_n, b->lat_p50, b->lat_p99, b->lat_max);
        int64_t qd;
        if (find_metric(b, "queue_depth", &qd, NULL))
            core_http_printf(res, ",\"queue_depth\":%" PRId64, qd);
        core_http_printf(res, ",\"msgs_per_s\":{");
        for (size_t w = 0; w < NWINDOWS; w++) {
            double r;
            if (em_mon_rate(p, "msgs_in", windows[w].ms, &r) == 0)
                core_http_printf(res, "%s\"%s\":%.1f", w ? "," : "", windows[w].label, r);
            else
                core_http_printf(res, "%s\"%s\":null", w ? "," : "", windows[w].label);
        }
        core_http_printf(res, "},\"counters\":{");
        bool first = true;
        for (unsigned k = 0; k < b->n; k++) {
            if (b->m[k].kind != CORE_METRIC_COUNTER)
                continue;
            double r;
            core_http_printf(res, "%s\"%s\":{\"total\":%" PRId64, first ? "" : ",", b->m[k].name,
                             b->m[k].value);
            if (em_mon_rate(p, b->m[k].name, 10000, &r) == 0)
                core_http_printf(res, ",\"rate_10s\":%.1f", r);
            core_http_printf(res, "}");
            first = false;
        }
        core_http_printf(res, "},\"gauges\":{");
        first = true;
        for (unsigned k = 0; k < b->n; k++) {
            if (b->m[k].kind != CORE_METRIC_GAUGE)
                continue;
            core_http_printf(res, "%s\"%s\":%" PRId64, first ? "" : ",", b->m[k].name,
                             b->m[k].value);
            first = false;
        }
        core_http_printf(res, "}}");
    }
    core_http_printf(res, "]}\n");
}

void em_mon_prometheus(const struct em_mon *m, uint64_t now_ms, struct core_http_response *res)
{
    /* Text exposition format 0.0.4: one family per metric name, labels
     * carry the process. Names are [a-z0-9_] already (metrics.h). */
    core_http_printf(res, "# TYPE edumatcher_up gauge\n");
    for (unsigned i = 0; i < m->n; i++)
        core_http_printf(res, "edumatcher_up{proc=\"%s\"} 1\n", m->p[i].proc);
    core_http_printf(res, "# TYPE edumatcher_rss_bytes gauge\n");
    for (unsigned i = 0; i < m->n; i++)
        if (m->p[i].count)
            core_http_printf(res, "edumatcher_rss_bytes{proc=\"%s\"} %" PRIu64 "\n", m->p[i].proc,
                             em_mon_latest(&m->p[i])->rss);
    core_http_printf(res, "# TYPE edumatcher_handle_latency_ns gauge\n");
    for (unsigned i = 0; i < m->n; i++) {
        if (!m->p[i].count)
            continue;
        const struct core_beacon *b = em_mon_latest(&m->p[i]);
        core_http_printf(res,
                         "edumatcher_handle_latency_ns{proc=\"%s\",quantile=\"0.5\"} %" PRIu64 "\n"
                         "edumatcher_handle_latency_ns{proc=\"%s\",quantile=\"0.99\"} %" PRIu64
                         "\n",
                         m->p[i].proc, b->lat_p50, m->p[i].proc, b->lat_p99);
    }
    core_http_printf(res, "# TYPE edumatcher_counter_total counter\n");
    for (unsigned i = 0; i < m->n; i++) {
        if (!m->p[i].count)
            continue;
        const struct core_beacon *b = em_mon_latest(&m->p[i]);
        for (unsigned k = 0; k < b->n; k++)
            if (b->m[k].kind == CORE_METRIC_COUNTER)
                core_http_printf(res,
                                 "edumatcher_counter_total{proc=\"%s\",name=\"%s\"} %" PRId64 "\n",
                                 m->p[i].proc, b->m[k].name, b->m[k].value);
    }
    core_http_printf(res, "# TYPE edumatcher_gauge gauge\n");
    for (unsigned i = 0; i < m->n; i++) {
        if (!m->p[i].count)
            continue;
        const struct core_beacon *b = em_mon_latest(&m->p[i]);
        for (unsigned k = 0; k < b->n; k++)
            if (b->m[k].kind == CORE_METRIC_GAUGE)
                core_http_printf(res, "edumatcher_gauge{proc=\"%s\",name=\"%s\"} %" PRId64 "\n",
                                 m->p[i].proc, b->m[k].name, b->m[k].value);
    }
    core_http_printf(res, "# TYPE edumatcher_rate_per_second gauge\n");
    for (unsigned i = 0; i < m->n; i++) {
        if (m->p[i].count < 2)
            continue;
        const struct core_beacon *b = em_mon_latest(&m->p[i]);
        for (unsigned k = 0; k < b->n; k++) {
            if (b->m[k].kind != CORE_METRIC_COUNTER)
                continue;
            for (size_t w = 0; w < NWINDOWS; w++) {
                double r;
                if (em_mon_rate(&m->p[i], b->m[k].name, windows[w].ms, &r) == 0)
                    core_http_printf(res,
                                     "edumatcher_rate_per_second{proc=\"%s\",name=\"%s\","
                                     "window=\"%s\"} %.3f\n",
                                     m->p[i].proc, b->m[k].name, windows[w].label, r);
            }
        }
    }
    (void)now_ms;
}
