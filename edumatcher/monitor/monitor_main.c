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
#include "core/http.h"
#include "edumatcher/monitor/monitor_stats.h"
#include "edumatcher/monitor/market.h"
#include "edumatcher/monitor/rules.h"
#include "core/proc.h"
#include "edumatcher/bus/curve.h"
#include "edumatcher/bus/zmq_bus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char health_ep[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9102";
static char connect_eps[CORE_OPT_STRLEN] = "";
static char http_host[CORE_OPT_STRLEN] = "127.0.0.1";
static int64_t http_port = 9180;
static int64_t beacon_ms = 1000;
static int64_t stale_ms = 3500;
static char loglevel[CORE_OPT_STRLEN] = "notice";
static char engine_pub[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9101";
static char curve_key[CORE_OPT_STRLEN] = "";
static char engine_key[CORE_OPT_STRLEN] = "";
static char curve_clients[CORE_OPT_STRLEN] = "";
static char connect_key[CORE_OPT_STRLEN] = "";
static int64_t chart_bucket_ms = 1000;
static int64_t stale_intervals = 3;
static int64_t queue_depth_max = 10000;
static int64_t mem_min_growth = 64ll << 20;
static char drop_counters[CORE_OPT_STRLEN] = "bus_full,bad_frames,bad_events,bad_msgs,dropped";

static const struct core_option options[] = {
    {"health", CORE_OPT_STRING, health_ep, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "zmq endpoint to bind for health beacons (processes connect to it)"},
    {"connect", CORE_OPT_STRING, connect_eps, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "comma-separated PUB endpoints to subscribe to as well (their beacons); CURVE with "
     "--connect-key"},
    {"connect-key", CORE_OPT_STRING, connect_key, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the CURVE public key (Z85, or a file such as <keyfile>.pub) of the publishers on "
     "--connect; with --curve-key (\"\": no CURVE)"},
    {"http-host", CORE_OPT_STRING, http_host, 0, 0, NULL, CORE_OPT_IMMUTABLE, "HTTP address"},
    {"http-port", CORE_OPT_INT, &http_port, 0, 65535, NULL, CORE_OPT_IMMUTABLE,
     "HTTP port (0: any free port, printed at start)"},
    {"beacon-ms", CORE_OPT_INT, &beacon_ms, 10, 60000, NULL, 0, "own beacon interval"},
    {"stale-ms", CORE_OPT_INT, &stale_ms, 100, 600000, NULL, 0,
     "a process silent this long is shown stale"},
    {"loglevel", CORE_OPT_STRING, loglevel, 0, 0, NULL, 0, "debug|verbose|notice|warning"},
    {"engine-pub", CORE_OPT_STRING, engine_pub, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the engine's PUB endpoint: market data and trades for the market view (\"\": none)"},
    {"curve-key", CORE_OPT_STRING, curve_key, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the monitor's CURVE secret key file, made at first start (mode 0600; public key in "
     "FILE.pub): its server key with --curve-clients, its client key with --engine-key"},
    {"curve-clients", CORE_OPT_STRING, curve_clients, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "CURVE allow-list for --health: Z85 public keys of the processes whose beacons are "
     "taken, one per line; with --curve-key (\"\": no CURVE, open to anyone on tcp://)"},
    {"engine-key", CORE_OPT_STRING, engine_key, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the engine's CURVE public key (Z85, or a file such as <journal-dir>/curve.key.pub) for "
     "--engine-pub (\"\": no CURVE)"},
    {"chart-bucket-ms", CORE_OPT_INT, &chart_bucket_ms, 10, 3600000, NULL, CORE_OPT_IMMUTABLE,
     "market view: one price/volume point per this much time"},
    {"stale-intervals", CORE_OPT_INT, &stale_intervals, 1, 1000, NULL, 0,
     "health rule: alarm after this many of a process's beacon intervals without one"},
    {"queue-depth-max", CORE_OPT_INT, &queue_depth_max, 0, INT64_MAX, NULL, 0,
     "health rule: alarm when a process's queue_depth gauge exceeds this"},
    {"mem-min-growth", CORE_OPT_MEMORY, &mem_min_growth, 1, INT64_MAX, NULL, 0,
     "health rule: warn on steady RSS growth of at least this over hours"},
    {"drop-counters", CORE_OPT_STRING, drop_counters, 0, 0, NULL, 0,
     "health rule: comma-separated counters that count dropped messages"},
    {NULL, 0, NULL, 0, 0, NULL, 0, NULL},
};

struct monitor {
    uv_loop_t *loop;
    void *zctx;
    struct em_curve_zap *zap; /* with --curve-clients */
    /* --curve-clients: a key removed closes the beacon connections to
     * --health (rebind), so each sender goes through ZAP again */
    struct em_curve_guard guard;
    uv_timer_t revoke_timer;
    bool revoke_on;
    struct em_bus_sock sub;
    struct core_http_server *http;
    struct em_health health;
    struct core_proc proc; /* signals */
    struct em_mon state;
    struct em_rules_config rules;
    struct em_bus_sock market_sub;
    bool has_market;
    /* --connect: a SUB of its own, a CURVE client of those publishers
     * (the bound --health SUB is a CURVE server: one role per socket) */
    struct em_bus_sock connect_sub;
    bool has_connect;
    struct em_mkt market;
    struct core_buf prom; /* /metrics text, reused between requests */
    uint64_t start_ms;
    uint64_t msgs_in, bad_beacons, http_requests;
};

static uint64_t now_ms(void)
{
    return core_now_ns() / 1000000u;
}

/* The market view's times are shown to people (the tape's clock, the
 * chart's axis): wall-clock ms since 1970, not the monotonic clock. */
static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
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

static void on_market(struct em_bus_sock *s, const char *topic, size_t tl, const void *payload,
                      size_t len, void *data)
{
    struct monitor *m = data;
    m->msgs_in++;
    if (tl > 3 && memcmp(topic, "md.", 3) == 0)
        em_mkt_book(&m->market, payload, len, wall_ms());
    else if (tl == 14 && memcmp(topic, "trade.executed", 14) == 0)
        em_mkt_trade(&m->market, payload, len, wall_ms());
}

/* page.html, compiled in by cmake/embed.cmake (monitor_page.c). */
extern const char em_monitor_page[];
extern const unsigned long em_monitor_page_len;

/* One handler per path (core_http_route); every request is counted. */
static void serve_page(const struct core_http_request *req, struct core_http_response *res,
                       void *data)
{
    struct monitor *m = data;
    m->http_requests++;
    core_http_reply(res, 200, "text/html; charset=utf-8", em_monitor_page, em_monitor_page_len);
}

static void serve_json(const struct core_http_request *req, struct core_http_response *res,
                       void *data)
{
    struct monitor *m = data;
    m->http_requests++;
    res->content_type = "application/json";
    em_mon_json(&m->state, now_ms(), (uint64_t)stale_ms, res);
}

/* Copy what was built in m->prom into the body, or answer 500 if building
 * it ran out of memory. */
static void reply_built(struct monitor *m, struct core_http_response *res)
{
    if (m->prom.oom) {
        core_buf_free(&m->prom);
        core_http_reply(res, 500, "text/plain", "out of memory\n", 14);
    } else {
        core_http_write(res, m->prom.data, m->prom.len);
    }
}

static void serve_prometheus(const struct core_http_request *req, struct core_http_response *res,
                             void *data)
{
    struct monitor *m = data;
    m->http_requests++;
    res->content_type = "text/plain; version=0.0.4; charset=utf-8";
    struct core_prom_process self;
    core_buf_reset(&m->prom);
    em_mon_prometheus(&m->state, now_ms(), (uint64_t)stale_ms, &m->prom);
    em_rules_prometheus(&m->rules, &m->state, now_ms(), &m->prom);
    if (core_prom_process_read(&self) == 0)
        core_prom_process(&m->prom, &self);
    reply_built(m, res);
}

static void serve_rules(const struct core_http_request *req, struct core_http_response *res,
                        void *data)
{
    struct monitor *m = data;
    m->http_requests++;
    res->content_type = "application/json";
    core_buf_reset(&m->prom);
    em_rules_json(&m->rules, &m->state, now_ms(), &m->prom);
    core_buf_append(&m->prom, "\n", 1);
    reply_built(m, res);
}

static void serve_market(const struct core_http_request *req, struct core_http_response *res,
                         void *data)
{
    struct monitor *m = data;
    m->http_requests++;
    res->content_type = "application/json";
    core_buf_reset(&m->prom);
    em_mkt_json(&m->market, &m->prom);
    core_buf_append(&m->prom, "\n", 1);
    reply_built(m, res);
}

static void serve_healthz(const struct core_http_request *req, struct core_http_response *res,
                          void *data)
{
    struct monitor *m = data;
    m->http_requests++;
    core_http_printf(res, "ok\n");
}

static void serve_other(const struct core_http_request *req, struct core_http_response *res,
                        void *data)
{
    struct monitor *m = data;
    m->http_requests++;
    core_http_reply(res, 404, "text/plain", "not found\n", 10);
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

/* A key left --curve-clients: its sender's beacons stop, so it goes
 * stale (rules.h) while the allowed senders reconnect by themselves. */
static void on_revoke_timer(uv_timer_t *t)
{
    struct monitor *m = t->data;
    if (em_curve_guard_step(&m->guard) != 0)
        exit(1);
}

static void on_stop(struct core_proc *p, void *data)
{
    struct monitor *m = data;
    core_http_stop(m->http);
    em_bus_close(&m->sub);
    if (m->revoke_on)
        uv_close((uv_handle_t *)&m->revoke_timer, NULL);
    if (m->has_market)
        em_bus_close(&m->market_sub);
    if (m->has_connect)
        em_bus_close(&m->connect_sub);
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
    em_rules_default(&m->rules);
    m->rules.interval_ms = (uint64_t)beacon_ms;
    m->rules.stale_intervals = (unsigned)stale_intervals;
    m->rules.queue_depth_max = queue_depth_max;
    m->rules.mem_min_growth_bytes = (uint64_t)mem_min_growth;
    if (em_rules_set_drop_counters(&m->rules, drop_counters) != 0) {
        fprintf(stderr, "edumatcher-monitor: --drop-counters: not a list of counter names\n");
        return 2;
    }
    static struct em_curve_pair curve_pair;
    int crc = em_curve_client_config("monitor", "curve-key", curve_key, "engine-key", engine_key,
                                     &curve_pair);
    if (crc && crc != CORE_ENOTFOUND)
        return crc == CORE_EINVAL ? 2 : 1;
    const struct em_curve_pair *curve = crc ? NULL : &curve_pair;
    static struct em_curve_pair connect_pair;
    crc = em_curve_client_config("monitor", "curve-key", curve_key, "connect-key", connect_key,
                                 &connect_pair);
    if (crc && crc != CORE_ENOTFOUND)
        return crc == CORE_EINVAL ? 2 : 1;
    const struct em_curve_pair *connect_curve = crc ? NULL : &connect_pair;
    if (em_bus_ctx_new(&m->zctx) != 0)
        return 1;
    const struct em_curve_pair *server = NULL;
    static struct em_curve_pair server_pair;
    if (curve_clients[0]) {
        static struct em_curve_allow allow; /* large: not on the stack */
        int line;
        rc = em_curve_allow_load(curve_clients, &allow, &line);
        if (rc == 0 && !curve_key[0])
            rc = CORE_EINVAL;
        if (rc) {
            CORE_WARN("monitor: --curve-clients %s: %s", curve_clients,
                      line           ? "a line is not a Z85 public key"
                      : curve_key[0] ? core_strerror(rc)
                                     : "needs --curve-key");
            return 2;
        }
        rc = em_curve_key_load(curve_key, true, &server_pair);
        if (rc) {
            CORE_WARN("monitor: --curve-key %s: %s", curve_key, core_strerror(rc));
            return 1;
        }
        rc = em_curve_zap_start(&m->zap, m->zctx, &allow, curve_clients);
        if (rc) {
            CORE_WARN("monitor: cannot start the ZAP handler: %s", core_strerror(rc));
            return 1;
        }
        server = &server_pair;
        em_curve_guard_init(&m->guard, "monitor", curve_clients, &allow);
        m->revoke_on = true;
    } else {
        em_curve_warn_open("monitor", "--health", health_ep);
    }
    rc = em_bus_open_curve(&m->sub, m->zctx, EM_BUS_SUB, health_ep, true, server);
    if (rc) {
        CORE_WARN("monitor: cannot bind %s: %s", health_ep, core_strerror(rc));
        return 1;
    }
    em_bus_subscribe(&m->sub, "health.");
    em_bus_watch(&m->sub, m->loop, 0, on_beacon, m);
    if (m->revoke_on) {
        em_curve_guard_add(&m->guard, &m->sub, "--health");
        uv_timer_init(m->loop, &m->revoke_timer);
        m->revoke_timer.data = m;
        uv_timer_start(&m->revoke_timer, on_revoke_timer, 200, 200);
    }
    for (char *save = NULL, *ep = strtok_r(connect_eps, ",", &save); ep;
         ep = strtok_r(NULL, ",", &save)) {
        rc = m->has_connect ? em_bus_connect(&m->connect_sub, ep)
                            : em_bus_open_curve(&m->connect_sub, m->zctx, EM_BUS_SUB, ep, false,
                                                connect_curve);
        if (rc) {
            CORE_WARN("monitor: cannot connect %s: %s", ep, core_strerror(rc));
            continue;
        }
        if (!m->has_connect) {
            m->has_connect = true;
            em_bus_subscribe(&m->connect_sub, "health.");
            em_bus_watch(&m->connect_sub, m->loop, 0, on_beacon, m);
        }
    }
    em_mkt_init(&m->market, (uint64_t)chart_bucket_ms);
    if (engine_pub[0]) {
        rc = em_bus_open_curve(&m->market_sub, m->zctx, EM_BUS_SUB, engine_pub, false, curve);
        if (rc) {
            CORE_WARN("monitor: cannot connect %s: %s", engine_pub, core_strerror(rc));
            return 1;
        }
        em_bus_subscribe(&m->market_sub, "md.");
        em_bus_subscribe(&m->market_sub, "trade.executed");
        em_bus_watch(&m->market_sub, m->loop, 0, on_market, m);
        m->has_market = true;
    }

    rc = core_http_new(&m->http, m->loop, 64, 0);
    if (rc == 0)
        rc = core_http_route(m->http, "/", serve_page, m);
    if (rc == 0)
        rc = core_http_route(m->http, "/metrics.json", serve_json, m);
    if (rc == 0)
        rc = core_http_route(m->http, "/metrics", serve_prometheus, m);
    if (rc == 0)
        rc = core_http_route(m->http, "/rules.json", serve_rules, m);
    if (rc == 0)
        rc = core_http_route(m->http, "/market.json", serve_market, m);
    if (rc == 0)
        rc = core_http_route(m->http, "/healthz", serve_healthz, m);
    if (rc == 0)
        rc = core_http_route(m->http, NULL, serve_other, m);
    if (rc == 0)
        rc = core_http_listen(m->http, http_host, (int)http_port);
    if (rc) {
        CORE_WARN("monitor: cannot listen on %s:%d: %s", http_host, (int)http_port,
                  core_strerror(rc));
        return 1;
    }
    em_health_init(&m->health, "monitor");
    core_metrics_counter(&m->health.metrics, "msgs_in", &m->msgs_in);
    core_metrics_counter(&m->health.metrics, "bad_beacons", &m->bad_beacons);
    core_metrics_counter(&m->health.metrics, "http_requests", &m->http_requests);
    if (m->zap)
        em_curve_zap_metrics(m->zap, &m->health.metrics);
    em_health_start(&m->health, m->loop, m->zctx, NULL, (uint64_t)beacon_ms, NULL, NULL);
    m->health.timer.data = m;
    uv_timer_start(&m->health.timer, on_own_beacon, 0, (uint64_t)beacon_ms);

    core_proc_signals_start(&m->proc, m->loop, "monitor", on_stop, m);

    /* Tests and scripts read this line to find the port. */
    printf("edumatcher-monitor http://%s:%d/ health %s\n", http_host, core_http_port(m->http),
           health_ep);
    fflush(stdout);
    uv_run(m->loop, UV_RUN_DEFAULT);
    core_proc_signals_close(&m->proc, m->loop);
    uv_loop_close(m->loop);
    core_http_free(m->http);
    em_bus_ctx_term(m->zctx);
    em_curve_zap_free(m->zap); /* its thread ends with the context */
    core_buf_free(&m->prom);
    free(m);
    return 0;
}
