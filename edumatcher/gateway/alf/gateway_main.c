/*
 * edumatcher-gateway: the ALF front door (docs/alf.md §1–4).
 *
 *   trader --ALF lines/TCP--> gateway --order link [gw][binary frames]--> engine
 *   trader <--ALF lines------ gateway <--order link [gw][event frames]--- engine
 *                             gateway <--SUB md.<SYM>------------------- engine PUB
 *
 * This file only wires: options, the engine link behind the sessions'
 * bus callbacks (gateway/engine_link.h; gateway/gateway_session.h: login,
 * AUTH, rate limit, batching), the TCP side on core/uv_server.h with the ALF front end
 * (alf_front.h: lines in, lines out), timers and health beacons. Each
 * connection is one trader session with its own gateway id (`gw`, ALF §2);
 * many gateway processes can run at once, each with its own sessions.
 */
#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/uv_server.h"
#include "edumatcher/bus/curve.h"
#include "edumatcher/bus/zmq_bus.h"
#include "edumatcher/gateway/alf/alf_front.h"
#include "edumatcher/gateway/engine_link.h"
#include "edumatcher/gateway/gateway_session.h"
#include "edumatcher/monitor/health.h"
#include "core/proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char host[CORE_OPT_STRLEN] = "127.0.0.1";
static int64_t port = 9001;
static char engine_orders[CORE_OPT_STRLEN] = "unix:em-journal/orders.sock";
static char link_key[CORE_OPT_STRLEN] = "";
static char engine_pub[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9101";
static char curve_key[CORE_OPT_STRLEN] = "";
static char engine_key[CORE_OPT_STRLEN] = "";
static char monitor_key[CORE_OPT_STRLEN] = "";
static char health_ep[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9102";
static char engine_query[CORE_OPT_STRLEN] = "";
static char tokens_file[CORE_OPT_STRLEN] = "";
static char name_opt[CORE_OPT_STRLEN] = "gateway";
static int64_t rate_limit = 10000;
static int64_t rate_burst = 1000;
static int64_t maxclients = 1000;
static int64_t beacon_ms = 1000;
static int64_t login_retry_ms = 100;
static int64_t resend_ms = 1000;
static char loglevel[CORE_OPT_STRLEN] = "notice";

static const struct core_option options[] = {
    {"host", CORE_OPT_STRING, host, 0, 0, NULL, CORE_OPT_IMMUTABLE, "address to listen on"},
    {"port", CORE_OPT_INT, &port, 0, 65535, NULL, CORE_OPT_IMMUTABLE,
     "ALF port (0: any free port, printed at start)"},
    {"engine-orders", CORE_OPT_STRING, engine_orders, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the engine's order link: unix:<path> or tcp://<host>:<port>"},
    {"link-key", CORE_OPT_STRING, link_key, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "a TCP order link's key file (the engine's <journal-dir>/link.key)"},
    {"engine-pub", CORE_OPT_STRING, engine_pub, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the engine's PUB endpoint"},
    EM_CURVE_CLIENT_OPTIONS(curve_key, engine_key, monitor_key, "--engine-pub and --engine-query"),
    {"engine-query", CORE_OPT_STRING, engine_query, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the engine's query endpoint: every symbol's book and rules at start, for SYMBOLS (\"\": "
     "only what the market data brings)"},
    {"health", CORE_OPT_STRING, health_ep, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the monitor's health endpoint (\"\": no beacons)"},
    {"tokens-file", CORE_OPT_STRING, tokens_file, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "lines `<gw> <token>`: a gw listed must LOGIN with its token; OPS must be listed"},
    {"name", CORE_OPT_STRING, name_opt, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "process name in health beacons (several gateways: gateway1, gateway2, ...)"},
    {"rate-limit", CORE_OPT_INT, &rate_limit, 0, 100000000, NULL, 0,
     "messages per second per session (0: no limit)"},
    {"rate-burst", CORE_OPT_INT, &rate_burst, 1, 100000000, NULL, 0, "token bucket size"},
    {"maxclients", CORE_OPT_INT, &maxclients, 1, 100000, NULL, 0, "connections at most"},
    {"beacon-ms", CORE_OPT_INT, &beacon_ms, 10, 60000, NULL, 0, "health beacon interval"},
    {"login-retry-ms", CORE_OPT_INT, &login_retry_ms, 10, 10000, NULL, 0,
     "re-send LOGIN to the engine until it answers"},
    {"resend-ms", CORE_OPT_INT, &resend_ms, 10, 600000, NULL, 0,
     "send orders again that the engine has not answered this long (an engine restart)"},
    {"loglevel", CORE_OPT_STRING, loglevel, 0, 0, NULL, 0, "debug|verbose|notice|warning"},
    {NULL, 0, NULL, 0, 0, NULL, 0, NULL},
};

static struct {
    uv_loop_t *loop;
    void *zctx;
    struct core_server *srv;
    struct em_gw_link link;
    struct em_health health;
    uv_timer_t login_timer;
    uv_check_t flush_check; /* sends the pending bus batch once per loop turn */
    struct core_proc proc;  /* signals */
    struct em_gw *gw;
} G;

static void on_flush_check(uv_check_t *h)
{
    em_gw_link_flush(&G.link);
}

static void on_login_timer(uv_timer_t *t)
{
    em_gw_tick(G.gw);
}

/* ---- start-up ---- */

/* SYMBOLS for symbols whose book does not change after this start: ask
 * the engine for the 1st, 2nd, ... symbol's MD line until it has no more.
 * Called after subscribing to md., so a line published meanwhile is not
 * lost (the table keeps the newer of the two). Each answer is bounded by
 * a wait: an engine that does not answer leaves the table to the stream. */
static void load_symbols(const struct em_curve_pair *curve)
{
    static struct em_bus_sock req; /* large: not on the stack */
    if (em_bus_open_curve(&req, G.zctx, EM_BUS_REQ, engine_query, false, curve) != 0) {
        CORE_WARN("gateway: cannot connect to %s", engine_query);
        return;
    }
    static const struct em_bus_topic topic = {6, "symbol"};
    unsigned loaded = 0;
    for (unsigned nth = 1; nth <= EM_MKT_SYMS; nth++) {
        char arg[16];
        int al = snprintf(arg, sizeof arg, "%u", nth);
        if (em_bus_send(&req, &topic, arg, (size_t)al) != 0 || em_bus_recv_wait(&req, 5000) != 0) {
            CORE_WARN("gateway: no answer from %s: SYMBOLS knows what market data brings",
                      engine_query);
            break;
        }
        if (req.topic_len != 4 || memcmp(req.topic, "book", 4) != 0)
            break; /* past the last symbol */
        /* the answer is an MD line: handled as one from the stream */
        em_gw_bus_message(G.gw, "md.", 3, req.payload, req.payload_len);
        loaded++;
    }
    em_bus_close(&req);
    CORE_INFO("gateway: %u symbols from %s", loaded, engine_query);
}

static void on_stop(struct core_proc *p, void *data)
{
    core_server_stop(G.srv); /* closing each session sends its DISCONNECT */
    em_gw_link_close(&G.link);
    em_health_stop(&G.health);
    uv_close((uv_handle_t *)&G.login_timer, NULL);
    uv_close((uv_handle_t *)&G.flush_check, NULL);
}

int main(int argc, char **argv)
{
    int rc, code;
    if (core_proc_options("edumatcher-gateway", 'G', options, loglevel, argc, argv, &code))
        return code;
    if (core_proc_adjust_open_files(&maxclients)) /* room for maxclients, as Redis */
        return 1;
    struct em_gw_config cfg = {.bus = &em_gw_link_bus,
                               .bus_ctx = &G.link,
                               .rate_limit = rate_limit,
                               .rate_burst = rate_burst,
                               .login_retry_ms = login_retry_ms,
                               .resend_ms = resend_ms};
    G.gw = em_gw_new(&cfg);
    if (!G.gw)
        return 1;
    if (tokens_file[0]) {
        rc = em_gw_load_tokens(G.gw, tokens_file);
        if (rc) {
            CORE_WARN("gateway: cannot load %s: %s", tokens_file, core_strerror(rc));
            return 1;
        }
    }

    G.loop = uv_default_loop();
    static struct em_curve_client keys;
    int crc = em_curve_client_setup("gateway", curve_key, engine_key, monitor_key, &keys);
    if (crc)
        return crc == CORE_EINVAL ? 2 : 1;
    const struct em_curve_pair *curve = keys.engine, *health_curve = keys.monitor;
    if (em_bus_ctx_new(&G.zctx) != 0)
        return 1;
    struct em_gw_link_opts lo = {
        .orders = engine_orders, .key_file = link_key, .pub = engine_pub, .curve = curve};
    if (em_gw_link_open(&G.link, G.gw, G.loop, G.zctx, &lo) != 0)
        return 1;
    if (engine_query[0])
        load_symbols(curve);

    struct core_server_limits lim = {.maxclients = maxclients,
                                     .query_buf_limit = 1 << 20,
                                     .output_buf_limit = 64 << 20,
                                     .idle_timeout_s = 0};
    if (core_server_new(&G.srv, G.loop, &em_alf_front_ops, G.gw, &lim, "REJECT reason=AUTH\n") != 0)
        return 1;
    rc = core_server_listen(G.srv, host, (int)port);
    if (rc) {
        CORE_WARN("gateway: cannot listen on %s:%d: %s", host, (int)port, core_strerror(rc));
        return 1;
    }

    em_health_init(&G.health, name_opt);
    struct core_metrics *mt = &G.health.metrics;
    struct em_gw_stats *st = em_gw_stats(G.gw);
    core_metrics_counter(mt, "msgs_in", &st->msgs_in);
    core_metrics_counter(mt, "forwarded", &st->forwarded);
    core_metrics_counter(mt, "bus_msgs_out", &st->bus_msgs_out);
    core_metrics_counter(mt, "bus_msgs_in", &st->bus_msgs_in);
    core_metrics_counter(mt, "resent", &st->resent);
    core_metrics_counter(mt, "resend_requests", &st->resend_requests);
    core_metrics_counter(mt, "duplicates", &st->duplicates);
    core_metrics_counter(mt, "resyncs", &st->resyncs);
    core_metrics_counter(mt, "event_duplicates", &st->event_duplicates);
    core_metrics_counter(mt, "events_lost", &st->events_lost);
    core_metrics_counter(mt, "logins_refused", &st->logins_refused);
    core_metrics_counter(mt, "events_out", &st->events_out);
    core_metrics_counter(mt, "rejects", &st->rejects);
    core_metrics_counter(mt, "rate_limited", &st->rate_limited);
    core_metrics_counter(mt, "bus_full", &st->bus_full);
    core_metrics_counter(mt, "bad_events", &st->bad_events);
    core_metrics_gauge(mt, "sessions", &st->sessions);
    /* rej_<reason>: what the monitor shows as rejects by reason */
    for (unsigned r = 1; r <= EM_REJ_LOGGED_IN_ELSEWHERE; r++) {
        if (r == EM_REJ_RESEND)
            continue; /* between gateway and engine only: never a trader's */
        char name[CORE_METRICS_NAME] = "rej_";
        const char *reason = em_rejcode_name(r);
        for (size_t i = 0; reason[i] && i + 5 < sizeof name; i++)
            name[4 + i] = (char)(reason[i] >= 'A' && reason[i] <= 'Z' ? reason[i] + 32 : reason[i]);
        core_metrics_counter(mt, name, &st->rejects_by[r]);
    }
    G.health.curve = health_curve;
    em_health_start_or_warn("gateway", &G.health, G.loop, G.zctx, health_ep, (uint64_t)beacon_ms,
                            NULL, NULL);

    uv_timer_init(G.loop, &G.login_timer);
    uv_timer_start(&G.login_timer, on_login_timer, (uint64_t)login_retry_ms,
                   (uint64_t)login_retry_ms);
    /* Runs after each loop turn's I/O callbacks: what every read of the
     * turn forwarded leaves before the loop sleeps again. */
    uv_check_init(G.loop, &G.flush_check);
    uv_check_start(&G.flush_check, on_flush_check);
    core_proc_signals_start(&G.proc, G.loop, "gateway", on_stop, NULL);

    /* the ready line: tests and scripts wait for it */
    printf("edumatcher-gateway %s:%d engine %s %s\n", host, (int)port, engine_orders, engine_pub);
    fflush(stdout);
    uv_run(G.loop, UV_RUN_DEFAULT);
    /* let the DISCONNECTs go out (PUSH linger) before the context ends */
    em_bus_ctx_term(G.zctx);
    em_gw_link_free(&G.link);
    core_server_free(G.srv);
    uv_loop_close(G.loop);
    em_gw_free(G.gw);
    return 0;
}
