/*
 * edumatcher-clearing: subscribes to the engine's `trade.executed`, keeps
 * positions and cash per gateway and symbol (clearing_book.h), and answers
 * queries over HTTP with JSON:
 *
 *   GET /positions[?gw=<gw>][&sym=<sym>]   accounts, sorted by (gw, sym)
 *   GET /healthz                           "ok"
 *
 * State is in memory only: a restarted clearing process starts empty (the
 * engine's journal is the durable record; docs/edumatcher-exchange.md).
 */
#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "edumatcher/clearing/clearing_book.h"
#include "edumatcher/monitor/health.h"
#include "edumatcher/http.h"
#include "core/proc.h"
#include "edumatcher/bus/zmq_bus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char engine_pub[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9101";
static char health_ep[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9102";
static char http_host[CORE_OPT_STRLEN] = "127.0.0.1";
static int64_t http_port = 9181;
static int64_t beacon_ms = 1000;
static char loglevel[CORE_OPT_STRLEN] = "notice";

static const struct core_option options[] = {
    {"engine-pub", CORE_OPT_STRING, engine_pub, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the engine's PUB endpoint to subscribe to"},
    {"health", CORE_OPT_STRING, health_ep, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the monitor's health endpoint (\"\": publish no beacons)"},
    {"http-host", CORE_OPT_STRING, http_host, 0, 0, NULL, CORE_OPT_IMMUTABLE, "HTTP address"},
    {"http-port", CORE_OPT_INT, &http_port, 0, 65535, NULL, CORE_OPT_IMMUTABLE,
     "HTTP port (0: any free port, printed at start)"},
    {"beacon-ms", CORE_OPT_INT, &beacon_ms, 10, 60000, NULL, 0, "health beacon interval"},
    {"loglevel", CORE_OPT_STRING, loglevel, 0, 0, NULL, 0, "debug|verbose|notice|warning"},
    {NULL, 0, NULL, 0, 0, NULL, 0, NULL},
};

struct clearing {
    uv_loop_t *loop;
    void *zctx;
    struct em_bus_sock sub;
    struct em_http_server http;
    struct em_health health;
    struct core_proc proc; /* signals */
    struct em_clearing book;
    uint64_t msgs_in, bad_msgs, http_requests;
    int64_t accounts;
};

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
    em_clearing_apply(&c->book, &t);
    if (sample)
        core_metrics_record(&c->health.metrics, core_now_ns() - t0);
}

static void handle(const struct em_http_request *req, struct em_http_response *res, void *data)
{
    struct clearing *c = data;
    c->http_requests++;
    if (em_http_path_is(req, "/positions")) {
        char gw[32] = "", sym[32] = "";
        if (em_http_query_get(req, "gw", gw, sizeof gw) == CORE_ETOOBIG ||
            em_http_query_get(req, "sym", sym, sizeof sym) == CORE_ETOOBIG) {
            res->status = 400;
            em_http_printf(res, "bad query\n");
            return;
        }
        res->content_type = "application/json";
        em_clearing_json(&c->book, gw, sym, res);
    } else if (em_http_path_is(req, "/healthz")) {
        em_http_printf(res, "ok\n");
    } else {
        res->status = 404;
        em_http_printf(res, "not found\n");
    }
}

static void on_health(struct em_health *h, void *data)
{
    struct clearing *c = data;
    c->accounts = c->book.naccounts;
}

static void on_stop(struct core_proc *p, void *data)
{
    struct clearing *c = data;
    em_http_close(&c->http);
    em_bus_close(&c->sub);
    em_health_stop(&c->health);
}

int main(int argc, char **argv)
{
    int rc, code;
    if (core_proc_options("edumatcher-clearing", 'C', options, loglevel, argc, argv, &code))
        return code;

    struct clearing *c = calloc(1, sizeof *c);
    if (!c)
        return 1;
    c->loop = uv_default_loop();
    em_clearing_init(&c->book);
    if (em_bus_ctx_new(&c->zctx) != 0)
        return 1;
    rc = em_bus_open(&c->sub, c->zctx, EM_BUS_SUB, engine_pub, false);
    if (rc) {
        CORE_WARN("clearing: cannot connect %s: %s", engine_pub, core_strerror(rc));
        return 1;
    }
    em_bus_subscribe(&c->sub, "trade.executed");
    em_bus_watch(&c->sub, c->loop, 0, on_trade, c);
    rc = em_http_listen(&c->http, c->loop, http_host, (int)http_port, 64, handle, c);
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
    em_health_start_or_warn("clearing", &c->health, c->loop, c->zctx, health_ep,
                            (uint64_t)beacon_ms, on_health, c);

    core_proc_signals_start(&c->proc, c->loop, "clearing", on_stop, c);

    printf("edumatcher-clearing http://%s:%d/positions engine %s\n", http_host,
           em_http_port(&c->http), engine_pub);
    fflush(stdout);
    uv_run(c->loop, UV_RUN_DEFAULT);
    core_proc_signals_close(&c->proc, c->loop);
    uv_loop_close(c->loop);
    em_bus_ctx_term(c->zctx);
    free(c);
    return 0;
}
