/*
 * edumatcher-engine: the matching engine as a process.
 *
 *   gateways --order link [gw][frames]--> engine --order link [gw][events]-->
 *                         (bus/order_link.h: Unix-domain or TCP stream,
 *                          authenticated; replies go back on the link the
 *                          gateway id last sent on, all of one batch in
 *                          one record per trader)
 *   engine PUB (bind) -->
 *       trade.executed  "TRADE ..."  one text line per trade, as it happens
 *       md.<SYM>        "MD ..."     throttled per-symbol market data
 *   health.engine --> the monitor (PUB connect)
 *
 * Order acknowledgements never go on the PUB: what a trader's orders did
 * is seen by that trader's gateway only.
 *
 * With --alf-port the engine also hosts ALF trader sessions on its own
 * loop (engine_gateway.h): one process fewer on the order path, the same
 * sessions and rules as edumatcher-gateway; separate gateways keep working
 * beside them on the order link.
 *
 *   trader --ALF/TCP--> engine (hosted session) --ALF/TCP--> trader
 *
 * This file only wires: options, the sockets, the timers and health
 * beacons around an engine host (engine_host.h: inbound -> journal ->
 * engine -> publish, the clock, the schedule, snapshots, market data,
 * the trade log), and the query socket (REP: `trades <from>`, `book <SYM>`,
 * answered by em_host_query).
 * A journal failure stops the process (exit 1): effects a restart would
 * lose are never published.
 */
#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/proc.h"
#include "edumatcher/bus/curve.h"
#include "edumatcher/bus/journal.h"
#include "edumatcher/bus/order_link.h"
#include "edumatcher/bus/zmq_bus.h"
#include "edumatcher/host/engine_gateway.h"
#include "edumatcher/host/engine_host.h"
#include "edumatcher/monitor/health.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char orders_ep[CORE_OPT_STRLEN] = "";
static char orders_mode[CORE_OPT_STRLEN] = "0600";
static int64_t gateway_grace_ms = 2000;
static char orders_uids[CORE_OPT_STRLEN] = "";
static char link_key_file[CORE_OPT_STRLEN] = "";
static char pub_ep[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9101";
static char health_ep[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9102";
static char journal_dir[CORE_OPT_STRLEN] = "em-journal";
static int fsync_policy = EM_FSYNC_BATCH;
static int64_t fsync_interval_ms = 10;
static char symbols_file[CORE_OPT_STRLEN] = "";
static int64_t md_interval_ms = 100;
static int64_t md_depth = 5;
static int64_t tick_ms = 100;
static int64_t beacon_ms = 1000;
static int64_t grace_ms = 300;
static char loglevel[CORE_OPT_STRLEN] = "notice";
static int64_t snapshot_records = 1000000;
static int64_t snapshot_interval_ms = 600000;
static bool snapshot_fork = true;
static char query_ep[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9103";
static char curve_clients[CORE_OPT_STRLEN] = "";
static char curve_key_file[CORE_OPT_STRLEN] = "";
static char monitor_key[CORE_OPT_STRLEN] = "";
/* hosted ALF sessions: edumatcher-gateway's options of the same names */
static int64_t alf_port = -1;
static char alf_bind[CORE_OPT_STRLEN] = "127.0.0.1";
static char tokens_file[CORE_OPT_STRLEN] = "";
static int64_t rate_limit = 10000;
static int64_t rate_burst = 1000;
static int64_t maxclients = 1000;
static int64_t login_retry_ms = 100;
static int64_t resend_ms = 1000;

static const struct core_option options[] = {
    {"orders", CORE_OPT_STRING, orders_ep, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the order link to listen on: unix:<path> or tcp://<host>:<port> (\"\": "
     "unix:<journal-dir>/orders.sock)"},
    {"orders-mode", CORE_OPT_STRING, orders_mode, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "permissions of the order link's socket file (octal: 0600 owner, 0660 owner and group)"},
    {"orders-uid", CORE_OPT_STRING, orders_uids, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "uids allowed on a Unix-domain order link, comma-separated (\"\": the engine's own)"},
    {"gateway-grace-ms", CORE_OPT_INT, &gateway_grace_ms, 0, 600000, NULL, CORE_OPT_IMMUTABLE,
     "a gateway's link that ends and is not back within this time: its traders are "
     "disconnected (their orders canceled)"},
    {"link-key", CORE_OPT_STRING, link_key_file, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "a TCP order link's key file, made at first start (\"\": <journal-dir>/link.key)"},
    {"pub", CORE_OPT_STRING, pub_ep, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "endpoint to bind for events, trades and market data"},
    {"health", CORE_OPT_STRING, health_ep, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the monitor's health endpoint (\"\": no beacons)"},
    {"journal-dir", CORE_OPT_STRING, journal_dir, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "journal directory (created if missing)"},
    {"fsync", CORE_OPT_ENUM, &fsync_policy, 0, 0, em_fsync_policy_names, CORE_OPT_IMMUTABLE,
     "journal fsync policy"},
    {"fsync-interval-ms", CORE_OPT_INT, &fsync_interval_ms, 0, 60000, NULL, CORE_OPT_IMMUTABLE,
     "with --fsync interval"},
    {"symbols-file", CORE_OPT_STRING, symbols_file, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "operator lines (SYMBOL, PHASE, ...) applied when the journal is empty, and "
     "`AT <ms> <line>` schedule lines fired at that engine time"},
    {"md-interval-ms", CORE_OPT_INT, &md_interval_ms, 1, 60000, NULL, 0,
     "market data: at most one update per symbol per interval"},
    {"md-depth", CORE_OPT_INT, &md_depth, 1, 50, NULL, 0,
     "market data: price levels per side in each snapshot (at least 1: SYMBOLS answers "
     "the best bid and offer from it)"},
    {"tick-ms", CORE_OPT_INT, &tick_ms, 1, 60000, NULL, CORE_OPT_IMMUTABLE,
     "clock resolution: elapsed time is journaled as TICKs this often"},
    {"beacon-ms", CORE_OPT_INT, &beacon_ms, 10, 60000, NULL, 0, "health beacon interval"},
    {"startup-grace-ms", CORE_OPT_INT, &grace_ms, 0, 60000, NULL, CORE_OPT_IMMUTABLE,
     "after binding PUB, wait this long for subscribers before taking input"},
    {"loglevel", CORE_OPT_STRING, loglevel, 0, 0, NULL, 0, "debug|verbose|notice|warning"},
    {"snapshot-records", CORE_OPT_INT, &snapshot_records, 0, INT64_MAX, NULL, 0,
     "snapshot the state after this many journal records (0: not by count)"},
    {"snapshot-interval-ms", CORE_OPT_INT, &snapshot_interval_ms, 0, 604800000, NULL, 0,
     "snapshot the state this often when records came in (0: not by time)"},
    {"snapshot-fork", CORE_OPT_BOOL, &snapshot_fork, 0, 0, NULL, 0,
     "write snapshots from a forked child while the loop goes on (no: on the loop)"},
    {"query", CORE_OPT_STRING, query_ep, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "endpoint to bind for queries (REP): trades by id for recovery (\"\": none)"},
    {"curve-clients", CORE_OPT_STRING, curve_clients, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "CURVE allow-list: Z85 public keys of the processes that may connect to --pub and "
     "--query, one per line (\"\": no CURVE, open to anyone on tcp://)"},
    {"curve-key", CORE_OPT_STRING, curve_key_file, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "with --curve-clients or --monitor-key: the engine's CURVE secret key, made at first start "
     "(mode 0600; "
     "public key in FILE.pub) (\"\": <journal-dir>/curve.key)"},
    {"monitor-key", CORE_OPT_STRING, monitor_key, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the monitor's CURVE public key (Z85 or a file) for --health, with the engine's "
     "--curve-key (\"\": no CURVE)"},
    {"alf-port", CORE_OPT_INT, &alf_port, -1, 65535, NULL, CORE_OPT_IMMUTABLE,
     "host ALF trader sessions on this port, on the engine's loop (-1: none; 0: any free "
     "port, printed in the ready line); edumatcher-gateway processes work beside them"},
    {"alf-bind", CORE_OPT_STRING, alf_bind, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "address the hosted ALF sessions listen on"},
    {"tokens-file", CORE_OPT_STRING, tokens_file, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "hosted sessions: lines `<gw> <token>`: a gw listed must LOGIN with its token; OPS must "
     "be listed"},
    {"rate-limit", CORE_OPT_INT, &rate_limit, 0, 100000000, NULL, 0,
     "hosted sessions: messages per second per session (0: no limit)"},
    {"rate-burst", CORE_OPT_INT, &rate_burst, 1, 100000000, NULL, 0,
     "hosted sessions: token bucket size"},
    {"maxclients", CORE_OPT_INT, &maxclients, 1, 100000, NULL, 0,
     "hosted sessions: connections at most"},
    {"login-retry-ms", CORE_OPT_INT, &login_retry_ms, 10, 10000, NULL, 0,
     "hosted sessions: re-send LOGIN until the engine answers"},
    {"resend-ms", CORE_OPT_INT, &resend_ms, 10, 600000, NULL, 0,
     "hosted sessions: send orders again that have not been answered this long"},
    {NULL, 0, NULL, 0, 0, NULL, 0, NULL},
};

static struct {
    uv_loop_t *loop;
    void *zctx;
    struct em_bus_sock pub, query;
    struct em_link_server *link;
    char orders[CORE_OPT_STRLEN + 32];
    bool has_query;
    struct em_health health;
    uv_timer_t tick_timer, md_timer, grace_timer;
    /* --curve-clients: a key removed closes every connection to --pub and
     * --query (rebind), so each client goes through ZAP again */
    uv_timer_t revoke_timer;
    bool revoke_on;
    struct em_curve_guard *guard;
    struct core_proc proc; /* signals */
    struct em_host *host;
    struct em_curve_pair curve;        /* with --curve-clients */
    struct em_curve_pair health_curve; /* with --monitor-key */
    struct em_curve_zap *zap;
    struct em_hosted *hosted; /* --alf-port: ALF sessions on this loop */
} P;

/* Order acks (topic order.ack.<gw>) go to the gw's hosted session, else
 * back on the order link; the rest is fan-out on the PUB (md.<SYM> lines
 * also to the hosted sessions' SYMBOLS table). */
static int publish(void *ctx, const struct em_bus_topic *topic, const void *data, size_t len)
{
    static const char ack[] = "order.ack.";
    if (P.hosted && em_hosted_publish(P.hosted, topic, data, len))
        return 0;
    if (topic->len > sizeof ack - 1 && memcmp(topic->s, ack, sizeof ack - 1) == 0) {
        if (!P.link)
            return CORE_ENOTFOUND;
        return em_link_reply(P.link, topic->s + sizeof ack - 1, topic->len - (sizeof ack - 1), data,
                             len);
    }
    return em_bus_send(&P.pub, topic, data, len);
}

/* A door of the order link is open while its connection is. */
static bool door_open(void *ctx, uint64_t door)
{
    return P.link && em_link_server_conn_open(P.link, door);
}

static const struct em_host_bus bus = {.publish = publish, .door_open = door_open};

/* The host refuses to go on without its journal: neither may the process. */
static void check(int rc)
{
    if (rc) {
        CORE_WARN("engine: stopping: %s", core_strerror(rc));
        exit(1);
    }
}

/* A record through link connection `conn` (a door, engine_host.h). One
 * the door rules refused is answered on that connection only: gw's route
 * stays with the door that holds it. */
static int on_inbound(void *ctx, uint64_t conn, const char *gw, size_t gwlen, const void *payload,
                      size_t len)
{
    int rc = em_host_inbound_at(P.host, conn, gw, gwlen, payload, len);
    if (rc != CORE_EBUSY) {
        check(rc);
        return 0;
    }
    uint8_t frame[EM_FRAME_MAX];
    int n = em_host_refusal(frame, sizeof frame);
    if (n > 0)
        em_link_reply_conn(P.link, conn, gw, gwlen, frame, (size_t)n);
    return rc;
}

/* A gateway's link ended while we run and did not come back within
 * --gateway-grace-ms (it stopped or died): its traders' connections are
 * gone with it, so each gw it carried is disconnected as its own
 * DISCONNECT would (cancel-on-disconnect, docs/alf.md C.3), journaled like
 * any message. A gateway that stopped cleanly sent those DISCONNECTs
 * itself: the second finds nothing to cancel. */
static void on_link_gone(void *ctx, const char *gw, size_t gwlen)
{
    struct em_msg m = {.kind = EM_MSG_DISCONNECT};
    uint8_t frame[EM_FRAME_MAX];
    int n = em_frame_encode(&m, frame, sizeof frame);
    if (n > 0)
        check(em_host_inbound(P.host, gw, gwlen, frame, (size_t)n));
    CORE_INFO("engine: the link of %.*s ended: its orders are canceled", (int)gwlen, gw);
}

/* Once per loop turn after the link's reads: journal, then the replies
 * (written by the link right after). */
static void on_batch(void *ctx, unsigned handled)
{
    check(em_host_batch_end(P.host, handled));
}

static void on_tick_timer(uv_timer_t *t)
{
    check(em_host_tick(P.host));
    if (P.link)
        em_link_server_flush(P.link);
}

/* --orders-uid: "1000,1001" */
static int parse_uids(const char *list, uint32_t *uids, unsigned *n)
{
    *n = 0;
    for (const char *p = list; *p;) {
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || v > UINT32_MAX || *n == EM_LINK_ALLOW_MAX || (*end && *end != ','))
            return CORE_EINVAL;
        uids[(*n)++] = (uint32_t)v;
        p = *end ? end + 1 : end;
    }
    return 0;
}

static void open_link(void)
{
    struct em_link_server_config lc = {.endpoint = P.orders,
                                       .on_record = on_inbound,
                                       .on_batch = on_batch,
                                       .on_gone = on_link_gone,
                                       .gone_grace_ms = (uint64_t)gateway_grace_ms};
    char *end;
    long mode = strtol(orders_mode, &end, 8);
    if (*end || end == orders_mode || mode <= 0 || mode > 0777 || (mode & 0007)) {
        CORE_WARN("engine: --orders-mode %s: an octal mode without rights for others", orders_mode);
        exit(2);
    }
    lc.mode = (unsigned)mode;
    if (parse_uids(orders_uids, lc.allow_uid, &lc.nallow) != 0) {
        CORE_WARN("engine: --orders-uid %s: a comma-separated list of uids", orders_uids);
        exit(2);
    }
    uint8_t key[EM_LINK_KEY_MAX];
    if (strncmp(P.orders, "tcp://", 6) == 0) {
        char path[CORE_OPT_STRLEN + 16];
        if (link_key_file[0])
            snprintf(path, sizeof path, "%s", link_key_file);
        else
            snprintf(path, sizeof path, "%s/link.key", journal_dir);
        int n = em_link_key_load(path, true, key, sizeof key);
        if (n < 0) {
            CORE_WARN("engine: cannot read or make the link key %s: %s", path, core_strerror(n));
            exit(1);
        }
        lc.key = key;
        lc.keylen = (size_t)n;
    }
    int rc = em_link_server_open(&P.link, P.loop, &lc);
    if (rc) {
        CORE_WARN("engine: cannot listen on %s: %s", P.orders, core_strerror(rc));
        exit(1);
    }
    struct em_link_stats *ls = em_link_server_stats(P.link);
    struct core_metrics *mt = &P.health.metrics;
    core_metrics_gauge(mt, "link_connections", &ls->connections);
    core_metrics_counter(mt, "link_refused", &ls->refused);
    core_metrics_counter(mt, "link_bad_records", &ls->bad_records);
    core_metrics_counter(mt, "link_unrouted", &ls->unrouted);
}

static void curve_key_path(char *path, size_t cap)
{
    if (curve_key_file[0])
        snprintf(path, cap, "%s", curve_key_file);
    else
        snprintf(path, cap, "%s/curve.key", journal_dir);
}

/* --curve-clients: the ZAP handler and the engine's key pair, or the
 * warning that PUB and query are open; returns the pair or NULL. */
static const struct em_curve_pair *open_curve(void)
{
    if (!curve_clients[0]) {
        em_curve_warn_open("engine", "--pub", pub_ep);
        em_curve_warn_open("engine", "--query", query_ep);
        return NULL;
    }
    if (!em_curve_available()) {
        CORE_WARN("engine: --curve-clients: this libzmq has no CURVE support");
        exit(2);
    }
    static struct em_curve_allow allow; /* large: not on the stack */
    int line;
    int rc = em_curve_allow_load(curve_clients, &allow, &line);
    if (rc) {
        if (line)
            CORE_WARN("engine: --curve-clients %s line %d: not a Z85 public key", curve_clients,
                      line);
        else
            CORE_WARN("engine: --curve-clients %s: %s", curve_clients, core_strerror(rc));
        exit(2);
    }
    char path[CORE_OPT_STRLEN + 16];
    curve_key_path(path, sizeof path);
    rc = em_curve_key_load(path, true, &P.curve);
    if (rc) {
        CORE_WARN("engine: cannot read or make the CURVE key %s: %s", path,
                  rc == CORE_EPROTO ? "readable by others (chmod 600 it)" : core_strerror(rc));
        exit(1);
    }
    rc = em_curve_zap_start(&P.zap, P.zctx, &allow, curve_clients);
    if (rc) {
        CORE_WARN("engine: cannot start the ZAP handler: %s", core_strerror(rc));
        exit(1);
    }
    CORE_INFO("engine: CURVE on --pub and --query: %u allowed client keys, server key %s",
              allow.count, P.curve.public_key);
    P.guard = malloc(sizeof *P.guard);
    if (P.guard) {
        em_curve_guard_init(P.guard, "engine", curve_clients, &allow);
        P.revoke_on = true;
    }
    return &P.curve;
}

/* A key left --curve-clients (curve.h em_curve_guard): an allowed
 * subscriber misses what was published meanwhile: market data shows the
 * gap in its per-symbol seq (the query `book <SYM>` gives the state),
 * clearing asks `trades <from>`. */
static void on_revoke_timer(uv_timer_t *t)
{
    (void)t;
    if (em_curve_guard_step(P.guard) != 0)
        exit(1);
}

static void on_md_timer(uv_timer_t *t)
{
    em_host_publish_md(P.host);
}

static void on_query(struct em_bus_sock *s, const char *topic, size_t tl, const void *payload,
                     size_t len, void *data)
{
    static char out[EM_BUS_PAYLOAD_MAX];
    const struct em_bus_topic *reply;
    size_t n = em_host_query(P.host, topic, tl, payload, len, &reply, out, sizeof out);
    em_bus_send(s, reply, out, n);
}

static void check_void(int rc)
{
    check(rc);
}

/* --alf-port: the hosted sessions (listening when input starts). */
static void open_hosted(void)
{
    struct em_hosted_config hc = {.bind = alf_bind,
                                  .port = (int)alf_port,
                                  .maxclients = maxclients,
                                  .tokens_file = tokens_file,
                                  .rate_limit = rate_limit,
                                  .rate_burst = rate_burst,
                                  .login_retry_ms = login_retry_ms,
                                  .resend_ms = resend_ms,
                                  .fatal = check_void};
    int rc = em_hosted_open(&P.hosted, P.loop, P.host, &hc);
    if (rc) {
        CORE_WARN("engine: hosted sessions: %s%s%s", core_strerror(rc),
                  rc == CORE_ENOTFOUND ? ": cannot open " : "",
                  rc == CORE_ENOTFOUND ? tokens_file : "");
        exit(1);
    }
    /* a few of the sessions' counters (the beacon has room for 32) */
    struct em_gw_stats *gs = em_hosted_stats(P.hosted);
    struct core_metrics *mt = &P.health.metrics;
    core_metrics_gauge(mt, "gw_sessions", &gs->sessions);
    core_metrics_counter(mt, "gw_msgs_in", &gs->msgs_in);
    core_metrics_counter(mt, "gw_events_out", &gs->events_out);
    core_metrics_counter(mt, "gw_rejects", &gs->rejects);
    core_metrics_counter(mt, "gw_rate_limited", &gs->rate_limited);
    core_metrics_counter(mt, "gw_resent", &gs->resent);
}

static void on_grace_over(uv_timer_t *t)
{
    open_link();
    uv_close((uv_handle_t *)t, NULL);
    char alf[CORE_OPT_STRLEN + 32] = "";
    if (P.hosted) {
        int rc = em_hosted_listen(P.hosted);
        if (rc) {
            CORE_WARN("engine: cannot listen on %s:%d: %s", alf_bind, (int)alf_port,
                      core_strerror(rc));
            exit(1);
        }
        snprintf(alf, sizeof alf, " alf %s:%d", alf_bind, em_hosted_port(P.hosted));
    }
    struct em_host_stats *st = em_host_stats(P.host);
    /* the ready line: tests and scripts wait for it */
    printf("edumatcher-engine orders %s pub %s journal %s replayed %" PRIu64 " snapshot %" PRId64
           "%s\n",
           P.orders, pub_ep, journal_dir, st->replayed, st->restored_seq, alf);
    fflush(stdout);
}

static void on_health(struct em_health *h, void *data)
{
    em_host_stats(P.host); /* refreshes the open_orders gauge */
}

static void on_stop(struct core_proc *p, void *data)
{
    em_hosted_stop(P.hosted); /* the sessions' DISCONNECTs, then the flush */
    check(em_host_flush(P.host));
    em_link_server_stop(P.link);
    em_bus_close(&P.pub);
    if (P.has_query)
        em_bus_close(&P.query);
    em_health_stop(&P.health);
    uv_close((uv_handle_t *)&P.tick_timer, NULL);
    uv_close((uv_handle_t *)&P.md_timer, NULL);
    if (P.revoke_on)
        uv_close((uv_handle_t *)&P.revoke_timer, NULL);
    if (!uv_is_closing((uv_handle_t *)&P.grace_timer))
        uv_close((uv_handle_t *)&P.grace_timer, NULL);
}

int main(int argc, char **argv)
{
    int rc, code;
    if (core_proc_options("edumatcher-engine", 'E', options, loglevel, argc, argv, &code))
        return code;
    if (core_proc_adjust_open_files(&maxclients)) /* room for maxclients, as Redis */
        return 1;

    if (orders_ep[0])
        snprintf(P.orders, sizeof P.orders, "%s", orders_ep);
    else
        snprintf(P.orders, sizeof P.orders, "unix:%s/orders.sock", journal_dir);
    P.loop = uv_default_loop();
    em_health_init(&P.health, "engine");
    struct em_host_config cfg = {
        .bus = &bus,
        .journal = {.dir = journal_dir,
                    .fsync = (enum em_fsync_policy)fsync_policy,
                    .fsync_interval_ms = (uint64_t)fsync_interval_ms},
        .md_depth = (int)md_depth,
        .snapshot_records = (uint64_t)snapshot_records,
        .snapshot_interval_ms = (uint64_t)snapshot_interval_ms,
        .snapshot_fork = snapshot_fork,
        .metrics = &P.health.metrics,
    };
    /* Replay before anything can arrive or be published. */
    uint64_t t0 = core_now_ns();
    rc = em_host_open(&P.host, &cfg);
    if (rc) {
        CORE_WARN("engine: cannot open the journal in %s: %s", journal_dir, core_strerror(rc));
        return 1;
    }
    struct em_host_stats *st = em_host_stats(P.host);
    CORE_INFO("engine: restored the snapshot after record %" PRId64 " and replayed %" PRIu64
              " journal records in %.1f ms (torn bytes %" PRIu64 ", engine clock %" PRIu64 " ms)",
              st->snapshot_seq, st->replayed, (double)(core_now_ns() - t0) / 1e6, st->torn_bytes,
              em_host_clock_ms(P.host));

    if (em_bus_ctx_new(&P.zctx) != 0)
        return 1;
    const struct em_curve_pair *curve = open_curve();
    rc = em_bus_open_curve(&P.pub, P.zctx, EM_BUS_PUB, pub_ep, true, curve);
    if (rc) {
        CORE_WARN("engine: cannot bind %s: %s", pub_ep, core_strerror(rc));
        return 1;
    }
    if (query_ep[0]) {
        rc = em_bus_open_curve(&P.query, P.zctx, EM_BUS_REP, query_ep, true, curve);
        if (rc) {
            CORE_WARN("engine: cannot bind %s: %s", query_ep, core_strerror(rc));
            return 1;
        }
        em_bus_watch(&P.query, P.loop, 16, on_query, NULL);
        P.has_query = true;
    }
    if (symbols_file[0]) {
        rc = em_host_load_symbols(P.host, symbols_file);
        if (rc) {
            CORE_WARN("engine: %s: %s", symbols_file, core_strerror(rc));
            return 1;
        }
        if (!em_host_fresh(P.host))
            CORE_INFO("engine: journal not empty; only the AT lines of %s are used (the "
                      "journal rules)",
                      symbols_file);
    }

    struct core_metrics *mt = &P.health.metrics;
    struct em_journal *j = em_host_journal(P.host);
    core_metrics_counter(mt, "msgs_in", &st->msgs_in);
    core_metrics_counter(mt, "bad_frames", &st->bad_frames);
    core_metrics_counter(mt, "bus_msgs_in", &st->bus_msgs_in);
    core_metrics_counter(mt, "events_out", &st->events_out);
    core_metrics_counter(mt, "bus_msgs_out", &st->bus_msgs_out);
    core_metrics_counter(mt, "trades_out", &st->trades_out);
    core_metrics_counter(mt, "md_out", &st->md_out);
    core_metrics_counter(mt, "queries", &st->queries);
    core_metrics_counter(mt, "trades_logged", &em_host_trade_log(P.host)->count);
    core_metrics_counter(mt, "journal_records", &j->records);
    core_metrics_counter(mt, "journal_syncs", &j->syncs);
    core_metrics_gauge(mt, "open_orders", &st->open_orders);
    core_metrics_gauge(mt, "queue_depth", &st->last_batch);
    core_metrics_counter(mt, "snapshots", &st->snapshots);
    core_metrics_counter(mt, "duplicates", &st->duplicates);
    core_metrics_counter(mt, "resend_requests", &st->resend_requests);
    core_metrics_counter(mt, "resyncs", &st->resyncs);
    core_metrics_counter(mt, "resyncs_short", &st->resyncs_short);
    core_metrics_counter(mt, "door_refused", &st->door_refused);
    core_metrics_counter(mt, "door_takeovers", &st->door_takeovers);
    if (P.zap)
        em_curve_zap_metrics(P.zap, mt);
    core_metrics_counter(mt, "events_resent", &st->events_resent);
    core_metrics_counter(mt, "snapshot_failures", &st->snapshot_failures);
    core_metrics_gauge(mt, "snapshot_seq", &st->snapshot_seq);
    core_metrics_gauge(mt, "restored_seq", &st->restored_seq);
    if (monitor_key[0]) {
        char path[CORE_OPT_STRLEN + 16];
        curve_key_path(path, sizeof path);
        rc = em_curve_client_config("engine", "curve-key", path, "monitor-key", monitor_key,
                                    &P.health_curve);
        if (rc)
            return rc == CORE_EINVAL ? 2 : 1;
        P.health.curve = &P.health_curve;
    }
    if (alf_port >= 0)
        open_hosted();
    em_health_start_or_warn("engine", &P.health, P.loop, P.zctx, health_ep, (uint64_t)beacon_ms,
                            on_health, NULL);

    /* Input starts after a grace period: a PUB drops what it publishes
     * before a subscriber's subscription arrives, and after a restart the
     * gateways' SUB sockets need a moment to reconnect and subscribe
     * again. Meanwhile their messages wait in their PUSH queues. */
    uv_timer_init(P.loop, &P.grace_timer);
    uv_timer_start(&P.grace_timer, on_grace_over, (uint64_t)grace_ms, 0);
    uv_timer_init(P.loop, &P.tick_timer);
    uv_timer_start(&P.tick_timer, on_tick_timer, (uint64_t)tick_ms, (uint64_t)tick_ms);
    uv_timer_init(P.loop, &P.md_timer);
    uv_timer_start(&P.md_timer, on_md_timer, (uint64_t)md_interval_ms, (uint64_t)md_interval_ms);
    if (P.revoke_on) {
        em_curve_guard_add(P.guard, &P.pub, "--pub");
        if (P.has_query)
            em_curve_guard_add(P.guard, &P.query, "--query");
        uv_timer_init(P.loop, &P.revoke_timer);
        uv_timer_start(&P.revoke_timer, on_revoke_timer, 200, 200);
    }
    core_proc_signals_start(&P.proc, P.loop, "engine", on_stop, NULL);

    uv_run(P.loop, UV_RUN_DEFAULT);
    em_host_close(P.host);
    em_hosted_free(P.hosted);
    em_link_server_free(P.link);
    core_proc_signals_close(&P.proc, P.loop);
    uv_loop_close(P.loop);
    em_bus_ctx_term(P.zctx);
    em_curve_zap_free(P.zap); /* its thread ends with the context */
    free(P.guard);
    return 0;
}
