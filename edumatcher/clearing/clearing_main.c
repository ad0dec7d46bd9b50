/*
 * edumatcher-clearing: subscribes to the engine's `trade.executed`, keeps
 * positions and cash per gateway and symbol (clearing_book.h), and answers
 * queries over HTTP with JSON:
 *
 *   GET /positions[?gw=<gw>][&sym=<sym>]   accounts, sorted by (gw, sym)
 *   GET /healthz                           "ok"
 *
 * Durability: the engine keeps every trade by id in its trade log
 * (bus/trade_log.h) and answers `trades <from>` on its query socket. Trades
 * are applied strictly in id order: a live trade that leaves a gap (this
 * process was down, its subscription dropped messages, or the engine
 * restarted after journaling trades it never published) is not applied;
 * the missing ids are fetched from the engine instead, and the query is
 * also repeated every --recover-ms. So a restarted clearing process
 * rebuilds every position from trade 1, and after any kill the positions
 * converge to the sum of all trades the engine made (docs/edumatcher-
 * exchange.md, "Clearing"). With --engine-query "" there is no recovery
 * and live trades are applied as they come, gaps and all.
 *
 * Recovery states: IDLE --(gap, or the timer)--> ASKING (a request in
 * flight) --(a reply with trades: apply, ask again at once)--> ASKING;
 * --(an empty reply)--> IDLE; --(no reply within --recover-ms)--> ask
 * again (the REQ socket is relaxed, so a lost reply cannot wedge it).
 */
#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "edumatcher/clearing/clearing_book.h"
#include "edumatcher/monitor/health.h"
#include "core/http.h"
#include "core/proc.h"
#include "edumatcher/bus/curve.h"
#include "edumatcher/bus/zmq_bus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char engine_pub[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9101";
static char curve_key[CORE_OPT_STRLEN] = "";
static char engine_key[CORE_OPT_STRLEN] = "";
static char monitor_key[CORE_OPT_STRLEN] = "";
static char health_ep[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9102";
static char http_host[CORE_OPT_STRLEN] = "127.0.0.1";
static int64_t http_port = 9181;
static int64_t beacon_ms = 1000;
static char loglevel[CORE_OPT_STRLEN] = "notice";
static char engine_query[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9103";
static int64_t recover_ms = 1000;

static const struct core_option options[] = {
    {"engine-pub", CORE_OPT_STRING, engine_pub, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the engine's PUB endpoint to subscribe to"},
    EM_CURVE_CLIENT_OPTIONS(curve_key, engine_key, monitor_key, "--engine-pub and --engine-query"),
    {"health", CORE_OPT_STRING, health_ep, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the monitor's health endpoint (\"\": publish no beacons)"},
    {"http-host", CORE_OPT_STRING, http_host, 0, 0, NULL, CORE_OPT_IMMUTABLE, "HTTP address"},
    {"http-port", CORE_OPT_INT, &http_port, 0, 65535, NULL, CORE_OPT_IMMUTABLE,
     "HTTP port (0: any free port, printed at start)"},
    {"beacon-ms", CORE_OPT_INT, &beacon_ms, 10, 60000, NULL, 0, "health beacon interval"},
    {"loglevel", CORE_OPT_STRING, loglevel, 0, 0, NULL, 0, "debug|verbose|notice|warning"},
    {"engine-query", CORE_OPT_STRING, engine_query, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the engine's query endpoint, to recover missed trades by id (\"\": no recovery)"},
    {"recover-ms", CORE_OPT_INT, &recover_ms, 10, 600000, NULL, 0,
     "ask the engine for trades after the last applied one this often"},
    {NULL, 0, NULL, 0, 0, NULL, 0, NULL},
};

struct clearing {
    uv_loop_t *loop;
    void *zctx;
    struct em_bus_sock sub, req;
    bool recovering; /* a query socket is configured */
    bool asking;     /* a request is in flight */
    uint64_t asked_ns;
    uv_timer_t recover_timer;
    struct core_http_server *http;
    struct em_health health;
    struct core_proc proc; /* signals */
    struct em_clearing book;
    uint64_t msgs_in, bad_msgs, http_requests;
    uint64_t gaps, recovered, recover_requests;
    int64_t accounts;
};

/* Ask the engine for the trades after the last one applied. */
static void ask(struct clearing *c)
{
    static const struct em_bus_topic topic = {6, "trades"};
    char arg[32];
    int n = snprintf(arg, sizeof arg, "%llu", (unsigned long long)c->book.last_tid + 1);
    if (em_bus_send(&c->req, &topic, arg, (size_t)n) == 0) {
        c->asking = true;
        c->asked_ns = core_now_ns();
        c->recover_requests++;
    }
}

static void on_reply(struct em_bus_sock *s, const char *topic, size_t tl, const void *payload,
                     size_t len, void *data)
{
    struct clearing *c = data;
    c->asking = false;
    if (tl != 6 || memcmp(topic, "trades", 6) != 0) {
        c->bad_msgs++;
        return;
    }
    const char *p = payload, *end = p + len;
    unsigned applied = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        struct em_trade t;
        if (em_trade_parse(p, n, &t) != 0) {
            c->bad_msgs++;
            break;
        }
        if (t.tid != c->book.last_tid + 1)
            break; /* not the one asked for: ask again */
        if (em_clearing_apply(&c->book, &t) == 0) {
            c->recovered++;
            applied++;
        }
        p += n + (nl != NULL);
    }
    if (applied)
        ask(c); /* maybe more */
}

static void on_recover_timer(uv_timer_t *t)
{
    struct clearing *c = t->data;
    if (!c->asking || core_now_ns() - c->asked_ns >= (uint64_t)recover_ms * 1000000u)
        ask(c);
}

static void on_trade(struct em_bus_sock *s, const char *topic, size_t tl, const void *payload,
                     size_t len, void *data)
{
    struct clearing *c = data;
    bool sample = core_metrics_sample_due(&c->health.metrics);
    uint64_t t0 = sample ? core_now_ns() : 0;
    c->msgs_in++;
    struct em_trade t;
    if (em_trade_parse(payload, len, &t) != 0) {
        c->bad_msgs++;
        return;
    }
    if (c->recovering && t.tid > c->book.last_tid + 1) {
        /* A gap: the trades between come from the engine's log, in order;
         * this one with them. */
        c->gaps++;
        if (!c->asking)
            ask(c);
        return;
    }
    em_clearing_apply(&c->book, &t);
    if (sample)
        core_metrics_record(&c->health.metrics, core_now_ns() - t0);
}

static void serve_positions(const struct core_http_request *req, struct core_http_response *res,
                            void *data)
{
    struct clearing *c = data;
    c->http_requests++;
    char gw[32] = "", sym[32] = "";
    if (core_http_query_get(req, "gw", gw, sizeof gw) == CORE_ETOOBIG ||
        core_http_query_get(req, "sym", sym, sizeof sym) == CORE_ETOOBIG) {
        core_http_reply(res, 400, "text/plain", "bad query\n", 10);
        return;
    }
    res->content_type = "application/json";
    em_clearing_json(&c->book, gw, sym, res);
}

static void serve_healthz(const struct core_http_request *req, struct core_http_response *res,
                          void *data)
{
    struct clearing *c = data;
    c->http_requests++;
    core_http_printf(res, "ok\n");
}

static void serve_other(const struct core_http_request *req, struct core_http_response *res,
                        void *data)
{
    struct clearing *c = data;
    c->http_requests++;
    core_http_reply(res, 404, "text/plain", "not found\n", 10);
}

static void on_health(struct em_health *h, void *data)
{
    struct clearing *c = data;
    c->accounts = c->book.naccounts;
}

static void on_stop(struct core_proc *p, void *data)
{
    struct clearing *c = data;
    core_http_stop(c->http);
    em_bus_close(&c->sub);
    if (c->recovering) {
        em_bus_close(&c->req);
        uv_close((uv_handle_t *)&c->recover_timer, NULL);
    }
    em_health_stop(&c->health);
}

int main(int argc, char **argv)
{
    int rc, code;
    if (core_proc_options("edumatcher-clearing", 'C', options, loglevel, argc, argv, &code))
        return code;

    /* Static, as the other processes' state: a return on a bad option or
     * an unreachable endpoint leaves nothing behind (the book is large). */
    static struct clearing clearing;
    struct clearing *c = &clearing;
    c->loop = uv_default_loop();
    em_clearing_init(&c->book);
    static struct em_curve_client keys;
    int crc = em_curve_client_setup("clearing", curve_key, engine_key, monitor_key, &keys);
    if (crc)
        return crc == CORE_EINVAL ? 2 : 1;
    const struct em_curve_pair *curve = keys.engine, *health_curve = keys.monitor;
    if (em_bus_ctx_new(&c->zctx) != 0)
        return 1;
    rc = em_bus_open_curve(&c->sub, c->zctx, EM_BUS_SUB, engine_pub, false, curve);
    if (rc) {
        CORE_WARN("clearing: cannot connect %s: %s", engine_pub, core_strerror(rc));
        return 1;
    }
    em_bus_subscribe(&c->sub, "trade.executed");
    em_bus_watch(&c->sub, c->loop, 0, on_trade, c);
    if (engine_query[0]) {
        rc = em_bus_open_curve(&c->req, c->zctx, EM_BUS_REQ, engine_query, false, curve);
        if (rc) {
            CORE_WARN("clearing: cannot connect %s: %s", engine_query, core_strerror(rc));
            return 1;
        }
        em_bus_watch(&c->req, c->loop, 16, on_reply, c);
        c->recovering = true;
        uv_timer_init(c->loop, &c->recover_timer);
        c->recover_timer.data = c;
        /* at once: a fresh process rebuilds everything from trade 1 */
        uv_timer_start(&c->recover_timer, on_recover_timer, 0, (uint64_t)recover_ms);
    }
    rc = core_http_new(&c->http, c->loop, 64, 0);
    if (rc == 0)
        rc = core_http_route(c->http, "/positions", serve_positions, c);
    if (rc == 0)
        rc = core_http_route(c->http, "/healthz", serve_healthz, c);
    if (rc == 0)
        rc = core_http_route(c->http, NULL, serve_other, c);
    if (rc == 0)
        rc = core_http_listen(c->http, http_host, (int)http_port);
    if (rc) {
        CORE_WARN("clearing: cannot listen on %s:%d: %s", http_host, (int)http_port,
                  core_strerror(rc));
        return 1;
    }
    em_health_init(&c->health, "clearing");
    core_metrics_counter(&c->health.metrics, "msgs_in", &c->msgs_in);
    core_metrics_counter(&c->health.metrics, "bad_msgs", &c->bad_msgs);
    core_metrics_counter(&c->health.metrics, "trades", &c->book.trades);
    core_metrics_counter(&c->health.metrics, "duplicates", &c->book.duplicates);
    core_metrics_counter(&c->health.metrics, "refused", &c->book.refused);
    core_metrics_counter(&c->health.metrics, "http_requests", &c->http_requests);
    core_metrics_gauge(&c->health.metrics, "accounts", &c->accounts);
    core_metrics_counter(&c->health.metrics, "gaps", &c->gaps);
    core_metrics_counter(&c->health.metrics, "recovered", &c->recovered);
    core_metrics_counter(&c->health.metrics, "recover_requests", &c->recover_requests);
    c->health.curve = health_curve;
    em_health_start_or_warn("clearing", &c->health, c->loop, c->zctx, health_ep,
                            (uint64_t)beacon_ms, on_health, c);

    core_proc_signals_start(&c->proc, c->loop, "clearing", on_stop, c);

    printf("edumatcher-clearing http://%s:%d/positions engine %s\n", http_host,
           core_http_port(c->http), engine_pub);
    fflush(stdout);
    uv_run(c->loop, UV_RUN_DEFAULT);
    core_proc_signals_close(&c->proc, c->loop);
    uv_loop_close(c->loop);
    core_http_free(c->http);
    em_bus_ctx_term(c->zctx);
    return 0;
}
