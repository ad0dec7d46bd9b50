/*
 * edumatcher-monitor: collects the health beacons of every EduMatcher
 * process and serves them over HTTP.
 *
 *   processes --PUB health.<name>--> (bind) SUB  monitor  HTTP GET
 *                                                 /              live HTML page
 *                                                 /metrics       Prometheus text
 *                                                 /metrics.json  JSON
 *                                                 /healthz       "ok"
 *
 * Beacons are parsed (untrusted input: fuzz_beacon) and kept in bounded
 * per-process histories (monitor_stats.h); rates come from differences of
 * totals over rolling windows. The monitor's own beacon is ingested
 * directly, so it lists itself too.
 */
#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/prom.h"
#include "edumatcher/monitor/health.h"
#include "edumatcher/http.h"
#include "edumatcher/monitor/monitor_stats.h"
#include "core/proc.h"
#include "edumatcher/bus/zmq_bus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char health_ep[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9102";
static char connect_eps[CORE_OPT_STRLEN] = "";
static char http_host[CORE_OPT_STRLEN] = "127.0.0.1";
static int64_t http_port = 9180;
static int64_t beacon_ms = 1000;
static int64_t stale_ms = 3500;
static char loglevel[CORE_OPT_STRLEN] = "notice";

static const struct core_option options[] = {
    {"health", CORE_OPT_STRING, health_ep, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "zmq endpoint to bind for health beacons (processes connect to it)"},
    {"connect", CORE_OPT_STRING, connect_eps, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "comma-separated PUB endpoints to subscribe to as well"},
    {"http-host", CORE_OPT_STRING, http_host, 0, 0, NULL, CORE_OPT_IMMUTABLE, "HTTP address"},
    {"http-port", CORE_OPT_INT, &http_port, 0, 65535, NULL, CORE_OPT_IMMUTABLE,
     "HTTP port (0: any free port, printed at start)"},
    {"beacon-ms", CORE_OPT_INT, &beacon_ms, 10, 60000, NULL, 0, "own beacon interval"},
    {"stale-ms", CORE_OPT_INT, &stale_ms, 100, 600000, NULL, 0,
     "a process silent this long is shown stale"},
    {"loglevel", CORE_OPT_STRING, loglevel, 0, 0, NULL, 0, "debug|verbose|notice|warning"},
    {NULL, 0, NULL, 0, 0, NULL, 0, NULL},
};

struct monitor {
    uv_loop_t *loop;
    void *zctx;
    struct em_bus_sock sub;
    struct em_http_server http;
    struct em_health health;
    struct core_proc proc; /* signals */
    struct em_mon state;
    struct core_buf prom; /* /metrics text, reused between requests */
    uint64_t start_ms;
    uint64_t msgs_in, bad_beacons, http_requests;
};

static uint64_t now_ms(void)
{
    return core_now_ns() / 1000000u;
}

static void on_beacon(struct em_bus_sock *s, const char *topic, size_t tl, const void *payload,
                      size_t len, void *data)
{
    struct monitor *m = data;
    struct core_beacon b;
    m->msgs_in++;
    if (core_beacon_parse(payload, len, &b) != 0) {
        m->bad_beacons++;
        return;
    }
    em_mon_ingest(&m->state, &b, now_ms());
}

/* The page polls /metrics.json and redraws a table; no external assets. */
static const char page[] =
    "<!doctype html><html><head><meta charset=utf-8><title>EduMatcher monitor</title>"
    "<style>body{font:14px monospace;margin:2em}table{border-collapse:collapse}"
    "td,th{border:1px solid #999;padding:4px 8px;text-align:right}th{background:#eee}"
    "td:first-child{text-align:left}.stale{color:#b00}</style></head><body>"
    "<h1>EduMatcher monitor</h1><p id=s>loading…</p><table><thead><tr><th>process</th>"
    "<th>pid</th><th>msgs/s 1s</th><th>msgs/s 10s</th><th>msgs/s 60s</th>"
    "<th>p50 µs</th><th>p99 µs</th><th>queue</th><th>RSS MB</th><th>up s</th>"
    "</tr></thead><tbody id=t></tbody></table><h2>counters</h2><pre id=c></pre><script>"
    "function f(x){return x==null?'–':x.toFixed(0)}"
    "async function tick(){try{const r=await fetch('/metrics.json');const d=await r.json();"
    "let h='',c='';for(const p of d.processes){"
    "h+=`<tr class=${p.stale?'stale':''}><td>${p.proc}${p.stale?' (stale)':''}</td>"
    "<td>${p.pid}</td><td>${f(p.msgs_per_s['1s'])}</td><td>${f(p.msgs_per_s['10s'])}</td>"
    "<td>${f(p.msgs_per_s['60s'])}</td><td>${(p.lat_p50_ns/1000).toFixed(1)}</td>"
    "<td>${(p.lat_p99_ns/1000).toFixed(1)}</td><td>${p.queue_depth==null?'–':p.queue_depth}</td>"
    "<td>${(p.rss/1048576).toFixed(1)}</td><td>${(p.up_ms/1000).toFixed(0)}</td></tr>`;"
    "for(const [k,v] of Object.entries(p.counters))c+=`${p.proc}.${k} = ${v.total}"
    "${v.rate_10s!=null?'  ('+v.rate_10s.toFixed(1)+'/s)':''}\\n`;}"
    "document.getElementById('t').innerHTML=h;document.getElementById('c').textContent=c;"
    "document.getElementById('s').textContent='beacons received: '+d.beacons+' · '"
    "+new Date().toLocaleTimeString();}catch(e){document.getElementById('s').textContent="
    "'monitor unreachable'}}tick();setInterval(tick,1000);</script></body></html>\n";

static void handle(const struct em_http_request *req, struct em_http_response *res, void *data)
{
    struct monitor *m = data;
    m->http_requests++;
    if (em_http_path_is(req, "/")) {
        res->content_type = "text/html; charset=utf-8";
        em_http_write(res, page, sizeof page - 1);
    } else if (em_http_path_is(req, "/metrics.json")) {
        res->content_type = "application/json";
        em_mon_json(&m->state, now_ms(), (uint64_t)stale_ms, res);
    } else if (em_http_path_is(req, "/metrics")) {
        res->content_type = "text/plain; version=0.0.4; charset=utf-8";
        struct core_prom_process self;
        m->prom.len = 0;
        em_mon_prometheus(&m->state, now_ms(), (uint64_t)stale_ms, &m->prom);
        if (core_prom_process_read(&self) == 0)
            core_prom_process(&m->prom, &self);
        if (m->prom.oom) {
            res->status = 500;
            core_buf_free(&m->prom);
            em_http_printf(res, "out of memory\n");
        } else {
            em_http_write(res, m->prom.data, m->prom.len);
        }
    } else if (em_http_path_is(req, "/healthz")) {
        em_http_printf(res, "ok\n");
    } else {
        res->status = 404;
        em_http_printf(res, "not found\n");
    }
}

/* The monitor lists itself: ingest its own beacon without the bus. */
static void on_own_beacon(uv_timer_t *t)
{
    struct monitor *m = t->data;
    int len;
    const char *line = em_health_beacon(&m->health, &len);
    struct core_beacon b;
    if (line && core_beacon_parse(line, (size_t)len, &b) == 0)
        em_mon_ingest(&m->state, &b, now_ms());
}

static void on_stop(struct core_proc *p, void *data)
{
    struct monitor *m = data;
    em_http_close(&m->http);
    em_bus_close(&m->sub);
    em_health_stop(&m->health);
}

int main(int argc, char **argv)
{
    int rc, code;
    if (core_proc_options("edumatcher-monitor", 'O', options, loglevel, argc, argv, &code))
        return code;

    struct monitor *m = calloc(1, sizeof *m);
    if (!m)
        return 1;
    m->loop = uv_default_loop();
    em_mon_init(&m->state);
    if (em_bus_ctx_new(&m->zctx) != 0)
        return 1;
    rc = em_bus_open(&m->sub, m->zctx, EM_BUS_SUB, health_ep, true);
    if (rc) {
        CORE_WARN("monitor: cannot bind %s: %s", health_ep, core_strerror(rc));
        return 1;
    }
    em_bus_subscribe(&m->sub, "health.");
    for (char *save = NULL, *ep = strtok_r(connect_eps, ",", &save); ep;
         ep = strtok_r(NULL, ",", &save)) {
        rc = em_bus_connect(&m->sub, ep);
        if (rc)
            CORE_WARN("monitor: cannot connect %s: %s", ep, core_strerror(rc));
    }
    em_bus_watch(&m->sub, m->loop, 0, on_beacon, m);

    rc = em_http_listen(&m->http, m->loop, http_host, (int)http_port, 64, handle, m);
    if (rc) {
        CORE_WARN("monitor: cannot listen on %s:%d: %s", http_host, (int)http_port,
                  core_strerror(rc));
        return 1;
    }
    em_health_init(&m->health, "monitor");
    core_metrics_counter(&m->health.metrics, "msgs_in", &m->msgs_in);
    core_metrics_counter(&m->health.metrics, "bad_beacons", &m->bad_beacons);
    core_metrics_counter(&m->health.metrics, "http_requests", &m->http_requests);
    em_health_start(&m->health, m->loop, m->zctx, NULL, (uint64_t)beacon_ms, NULL, NULL);
    m->health.timer.data = m;
    uv_timer_start(&m->health.timer, on_own_beacon, 0, (uint64_t)beacon_ms);

    core_proc_signals_start(&m->proc, m->loop, "monitor", on_stop, m);

    /* Tests and scripts read this line to find the port. */
    printf("edumatcher-monitor http://%s:%d/ health %s\n", http_host, em_http_port(&m->http),
           health_ep);
    fflush(stdout);
    uv_run(m->loop, UV_RUN_DEFAULT);
    core_proc_signals_close(&m->proc, m->loop);
    uv_loop_close(m->loop);
    em_bus_ctx_term(m->zctx);
    core_buf_free(&m->prom);
    free(m);
    return 0;
}
