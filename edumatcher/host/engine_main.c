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
#include "edumatcher/bus/journal.h"
#include "edumatcher/bus/order_link.h"
#include "edumatcher/bus/zmq_bus.h"
#include "edumatcher/host/engine_host.h"
#include "edumatcher/monitor/health.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char orders_ep[CORE_OPT_STRLEN] = "";
static char orders_mode[CORE_OPT_STRLEN] = "0600";
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

static const struct core_option options[] = {
    {"orders", CORE_OPT_STRING, orders_ep, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the order link to listen on: unix:<path> or tcp://<host>:<port> (\"\": "
     "unix:<journal-dir>/orders.sock)"},
    {"orders-mode", CORE_OPT_STRING, orders_mode, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "permissions of the order link's socket file (octal: 0600 owner, 0660 owner and group)"},
    {"orders-uid", CORE_OPT_STRING, orders_uids, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "uids allowed on a Unix-domain order link, comma-separated (\"\": the engine's own)"},
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
    {"md-depth", CORE_OPT_INT, &md_depth, 0, 50, NULL, 0,
     "market data: price levels per side in each snapshot"},
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
    struct core_proc proc; /* signals */
    struct em_host *host;
} P;

/* Order acks (topic order.ack.<gw>) go back on the order link; the rest
 * is fan-out on the PUB. */
static int publish(void *ctx, const struct em_bus_topic *topic, const void *data, size_t len)
{
    static const char ack[] = "order.ack.";
    if (topic->len > sizeof ack - 1 && memcmp(topic->s, ack, sizeof ack - 1) == 0) {
        if (!P.link)
            return CORE_ENOTFOUND;
        return em_link_reply(P.link, topic->s + sizeof ack - 1, topic->len - (sizeof ack - 1), data,
                             len);
    }
    return em_bus_send(&P.pub, topic, data, len);
}

static const struct em_host_bus bus = {.publish = publish};

/* The host refuses to go on without its journal: neither may the process. */
static void check(int rc)
{
    if (rc) {
        CORE_WARN("engine: stopping: %s", core_strerror(rc));
        exit(1);
    }
}

static void on_inbound(void *ctx, const char *gw, size_t gwlen, const void *payload, size_t len)
{
    check(em_host_inbound(P.host, gw, gwlen, payload, len));
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
    struct em_link_server_config lc = {
        .endpoint = P.orders, .on_record = on_inbound, .on_batch = on_batch};
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

static void on_grace_over(uv_timer_t *t)
{
    open_link();
    uv_close((uv_handle_t *)t, NULL);
    struct em_host_stats *st = em_host_stats(P.host);
    /* the ready line: tests and scripts wait for it */
    printf("edumatcher-engine orders %s pub %s journal %s replayed %" PRIu64 " snapshot %" PRId64
           "\n",
           P.orders, pub_ep, journal_dir, st->replayed, st->restored_seq);
    fflush(stdout);
}

static void on_health(struct em_health *h, void *data)
{
    em_host_stats(P.host); /* refreshes the open_orders gauge */
}

static void on_stop(struct core_proc *p, void *data)
{
    check(em_host_flush(P.host));
    em_link_server_stop(P.link);
    em_bus_close(&P.pub);
    if (P.has_query)
        em_bus_close(&P.query);
    em_health_stop(&P.health);
    uv_close((uv_handle_t *)&P.tick_timer, NULL);
    uv_close((uv_handle_t *)&P.md_timer, NULL);
    if (!uv_is_closing((uv_handle_t *)&P.grace_timer))
        uv_close((uv_handle_t *)&P.grace_timer, NULL);
}

int main(int argc, char **argv)
{
    int rc, code;
    if (core_proc_options("edumatcher-engine", 'E', options, loglevel, argc, argv, &code))
        return code;

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
    rc = em_bus_open(&P.pub, P.zctx, EM_BUS_PUB, pub_ep, true);
    if (rc) {
        CORE_WARN("engine: cannot bind %s: %s", pub_ep, core_strerror(rc));
        return 1;
    }
    if (query_ep[0]) {
        rc = em_bus_open(&P.query, P.zctx, EM_BUS_REP, query_ep, true);
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
    core_metrics_counter(mt, "events_resent", &st->events_resent);
    core_metrics_counter(mt, "snapshot_failures", &st->snapshot_failures);
    core_metrics_gauge(mt, "snapshot_seq", &st->snapshot_seq);
    core_metrics_gauge(mt, "restored_seq", &st->restored_seq);
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
    core_proc_signals_start(&P.proc, P.loop, "engine", on_stop, NULL);

    uv_run(P.loop, UV_RUN_DEFAULT);
    em_host_close(P.host);
    em_link_server_free(P.link);
    core_proc_signals_close(&P.proc, P.loop);
    uv_loop_close(P.loop);
    em_bus_ctx_term(P.zctx);
    return 0;
}
