/*
 * Monitor state: beacon history per process, rolling-window rates, and the
 * JSON / Prometheus renderings (invariants in monitor_stats.h).
 */
#include "edumatcher/monitor/monitor_stats.h"

#include "core/error.h"
#include "core/prom.h"

#include <stdio.h>

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

const struct core_beacon *em_mon_back(const struct em_mon_proc *p, unsigned back)
{
    return entry(p, back);
}

unsigned em_mon_mem_series(const struct em_mon_proc *p, struct em_mon_mem *out)
{
    for (unsigned i = 0; i < p->mem_count; i++)
        out[i] = p->mem[(p->mem_head + EM_MON_MEM_HISTORY - p->mem_count + i) % EM_MON_MEM_HISTORY];
    return p->mem_count;
}

static void mem_add(struct em_mon_proc *p, const struct core_beacon *b)
{
    if (p->mem_count) {
        const struct em_mon_mem *last =
            &p->mem[(p->mem_head + EM_MON_MEM_HISTORY - 1) % EM_MON_MEM_HISTORY];
        if (b->up_ms < last->up_ms + EM_MON_MEM_STEP_MS)
            return;
    }
    p->mem[p->mem_head] = (struct em_mon_mem){b->up_ms, b->rss};
    p->mem_head = (p->mem_head + 1) % EM_MON_MEM_HISTORY;
    if (p->mem_count < EM_MON_MEM_HISTORY)
        p->mem_count++;
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
        p->mem_count = 0;
        p->restarts++;
    }
    mem_add(p, b);
    p->hist[p->head] = *b;
    p->head = (p->head + 1) % EM_MON_HISTORY;
    if (p->count < EM_MON_HISTORY)
        p->count++;
    p->last_recv_ms = now_ms;
    m->beacons++;
    return 0;
}

/* The oldest beacon still inside the window ending at the latest (at least
 * the previous one). p->count >= 2. */
static const struct core_beacon *window_start(const struct em_mon_proc *p, uint64_t window_ms)
{
    const struct core_beacon *last = entry(p, 0), *first = entry(p, 1);
    for (unsigned back = 2; back < p->count; back++) {
        const struct core_beacon *b = entry(p, back);
        if (last->up_ms - b->up_ms > window_ms)
            break;
        first = b;
    }
    return first;
}

int em_mon_delta(const struct em_mon_proc *p, const char *name, uint64_t window_ms, uint64_t *out)
{
    int64_t v1, v0;
    enum core_metric_kind k;
    if (p->count < 2 || !find_metric(entry(p, 0), name, &v1, &k) || k != CORE_METRIC_COUNTER ||
        !find_metric(window_start(p, window_ms), name, &v0, NULL))
        return CORE_ENOTFOUND;
    *out = v1 > v0 ? (uint64_t)(v1 - v0) : 0;
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
        core_http_printf(res,
                         "%s{\"proc\":\"%s\",\"pid\":%" PRIu64 ",\"up_ms\":%" PRIu64
                         ",\"age_ms\":%" PRIu64 ",\"stale\":%s,\"restarts\":%" PRIu64
                         ",\"rss\":%" PRIu64 ",\"lat_n\":%" PRIu64,
                         i ? "," : "", p->proc, b->pid, b->up_ms, age,
                         age > stale_ms ? "true" : "false", p->restarts, b->rss, b->lat_n);
        /* No sample in the window is no figure, not a latency of 0. */
        if (b->lat_n)
            core_http_printf(res,
                             ",\"lat_p50_ns\":%" PRIu64 ",\"lat_p99_ns\":%" PRIu64
                             ",\"lat_max_ns\":%" PRIu64,
                             b->lat_p50, b->lat_p99, b->lat_max);
        else
            core_http_printf(res, ",\"lat_p50_ns\":null,\"lat_p99_ns\":null,\"lat_max_ns\":null");
        int64_t qd;
        if (find_metric(b, "queue_depth", &qd, NULL))
            core_http_printf(res, ",\"queue_depth\":%" PRId64, qd);
        /* Handle latency over the history: [up_ms, p50, p99], null where
         * a beacon had no sample. */
        core_http_printf(res, ",\"lat\":[");
        for (unsigned k = 0; k < p->count; k++) {
            const struct core_beacon *h = entry(p, p->count - 1 - k);
            if (h->lat_n)
                core_http_printf(res, "%s[%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]", k ? "," : "",
                                 h->up_ms, h->lat_p50, h->lat_p99);
            else
                core_http_printf(res, "%s[%" PRIu64 ",null,null]", k ? "," : "", h->up_ms);
        }
        core_http_printf(res, "]");
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

/* One family per distinct metric name among the latest beacons, in first
 * seen order (invariant 3), so each name gets its # HELP/# TYPE once. */
struct family {
    const char *name;
    enum core_metric_kind kind;
};

static size_t collect_families(const struct em_mon *m, struct family *f, size_t cap)
{
    size_t n = 0;
    for (unsigned i = 0; i < m->n; i++) {
        if (!m->p[i].count)
            continue;
        const struct core_beacon *b = em_mon_latest(&m->p[i]);
        for (unsigned k = 0; k < b->n; k++) {
            size_t j = 0;
            while (j < n && !(f[j].kind == b->m[k].kind && strcmp(f[j].name, b->m[k].name) == 0))
                j++;
            if (j == n && n < cap)
                f[n++] = (struct family){b->m[k].name, b->m[k].kind};
        }
    }
    return n;
}

/* A process's own metric, found by name and kind in its latest beacon. */
static bool own_metric(const struct core_beacon *b, const struct family *f, int64_t *v)
{
    for (unsigned k = 0; k < b->n; k++)
        if (b->m[k].kind == f->kind && strcmp(b->m[k].name, f->name) == 0) {
            *v = b->m[k].value;
            return true;
        }
    return false;
}

void em_mon_prometheus(const struct em_mon *m, uint64_t now_ms, uint64_t stale_ms,
                       struct core_buf *out)
{
    char name[CORE_METRICS_NAME + 32];
    struct core_prom_label l[1] = {{"proc", NULL}};

    core_prom_family(out, "edumatcher_up", CORE_PROM_GAUGE,
                     "1 if the process's last beacon is younger than the stale limit, else 0.");
    for (unsigned i = 0; i < m->n; i++) {
        l[0].value = m->p[i].proc;
        uint64_t age = now_ms > m->p[i].last_recv_ms ? now_ms - m->p[i].last_recv_ms : 0;
        core_prom_u64(out, "edumatcher_up", l, 1, m->p[i].count && age <= stale_ms);
    }
    core_prom_family(out, "edumatcher_beacon_age_seconds", CORE_PROM_GAUGE,
                     "Time since the monitor received the process's last beacon.");
    for (unsigned i = 0; i < m->n; i++) {
        l[0].value = m->p[i].proc;
        uint64_t age = now_ms > m->p[i].last_recv_ms ? now_ms - m->p[i].last_recv_ms : 0;
        core_prom_double(out, "edumatcher_beacon_age_seconds", l, 1, (double)age / 1000.0);
    }
    core_prom_family(out, "edumatcher_process_restarts_total", CORE_PROM_COUNTER,
                     "Restarts of the process seen by this monitor (new pid, or a total going "
                     "back).");
    for (unsigned i = 0; i < m->n; i++) {
        l[0].value = m->p[i].proc;
        core_prom_u64(out, "edumatcher_process_restarts_total", l, 1, m->p[i].restarts);
    }
    core_prom_family(out, "edumatcher_process_resident_memory_bytes", CORE_PROM_GAUGE,
                     "Resident memory of the process, from its last beacon.");
    for (unsigned i = 0; i < m->n; i++)
        if (m->p[i].count) {
            l[0].value = m->p[i].proc;
            core_prom_u64(out, "edumatcher_process_resident_memory_bytes", l, 1,
                          em_mon_latest(&m->p[i])->rss);
        }
    core_prom_family(out, "edumatcher_process_uptime_seconds", CORE_PROM_GAUGE,
                     "Time since the process started, from its last beacon.");
    for (unsigned i = 0; i < m->n; i++)
        if (m->p[i].count) {
            l[0].value = m->p[i].proc;
            core_prom_double(out, "edumatcher_process_uptime_seconds", l, 1,
                             (double)em_mon_latest(&m->p[i])->up_ms / 1000.0);
        }

    /* The latency histogram: the process's own bucket totals, bounds in
     * seconds. Observations are the sampled messages (metrics.h). */
    double le[CORE_METRICS_LAT_BOUNDS];
    for (unsigned k = 0; k < CORE_METRICS_LAT_BOUNDS; k++)
        le[k] = (double)core_metrics_lat_bounds_ns[k] / 1e9;
    core_prom_family(out, "edumatcher_handle_latency_seconds", CORE_PROM_HISTOGRAM,
                     "Time to handle one message, over a sample of one message in 16.");
    for (unsigned i = 0; i < m->n; i++) {
        if (!m->p[i].count || !em_mon_latest(&m->p[i])->has_hist)
            continue;
        const struct core_beacon *b = em_mon_latest(&m->p[i]);
        l[0].value = m->p[i].proc;
        core_prom_histogram(out, "edumatcher_handle_latency_seconds", l, 1, le, b->lat_h,
                            CORE_METRICS_LAT_BOUNDS, (double)b->lat_sum / 1e9);
    }

    /* Every counter and gauge of the beacons under its own name. */
    struct family f[EM_MON_PROCS * 2];
    size_t nf = collect_families(m, f, sizeof f / sizeof f[0]);
    for (size_t j = 0; j < nf; j++) {
        bool counter = f[j].kind == CORE_METRIC_COUNTER;
        size_t len = strlen(f[j].name);
        /* A gauge spelled like a counter would claim a counter's name. */
        if (!counter && len >= 6 && strcmp(f[j].name + len - 6, "_total") == 0)
            continue;
        char help[96];
        snprintf(name, sizeof name, "edumatcher_%s%s", f[j].name, counter ? "_total" : "");
        snprintf(help, sizeof help, "%s %s of the process (beacon %c.%s).",
                 counter ? "Total" : "Current", f[j].name, counter ? 'c' : 'g', f[j].name);
        core_prom_family(out, name, counter ? CORE_PROM_COUNTER : CORE_PROM_GAUGE, help);
        for (unsigned i = 0; i < m->n; i++) {
            int64_t v;
            if (!m->p[i].count || !own_metric(em_mon_latest(&m->p[i]), &f[j], &v))
                continue;
            l[0].value = m->p[i].proc;
            core_prom_i64(out, name, l, 1, v);
        }
    }

    core_prom_family(out, "edumatcher_monitor_beacons_total", CORE_PROM_COUNTER,
                     "Beacons this monitor accepted.");
    core_prom_u64(out, "edumatcher_monitor_beacons_total", NULL, 0, m->beacons);
    core_prom_family(out, "edumatcher_monitor_untracked_beacons_total", CORE_PROM_COUNTER,
                     "Beacons refused because the process table was full.");
    core_prom_u64(out, "edumatcher_monitor_untracked_beacons_total", NULL, 0, m->rejected);
}
