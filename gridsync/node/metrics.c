/*
 * The Prometheus endpoint (metrics.h): one route, /metrics, on core/http.
 * A scrape formats what the node already counts for INFO; the families and
 * their names are listed in docs/gridsync.md ("Metrics").
 */
#include "gridsync/node/metrics.h"

#include "core/error.h"
#include "core/histogram.h"
#include "core/http.h"
#include "core/log.h"
#include "core/prom.h"
#include "gridsync/client/node_ctx.h"
#include "gridsync/store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gs_metrics {
    struct gs_node *node;
    struct core_http_server *http;
    struct core_buf page; /* built per scrape, reused */
};

/* Upper bounds of the command latency histogram, in seconds: from a cheap
 * GET to a slow KEYS. */
static const double latency_le[] = {1e-6,   2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4,
                                    2.5e-4, 5e-4,   1e-3, 0.01, 0.1,    1.0};
#define LATENCY_NB (sizeof(latency_le) / sizeof(latency_le[0]))

/* Counts of h per bucket of latency_le (the last one above every bound).
 * h's buckets are log-linear, each within 1/128 of its value, so a value is
 * placed by its bucket's upper end: a bound is exact to that precision. */
static void latency_counts(const struct core_hist *h, uint64_t counts[LATENCY_NB + 1])
{
    memset(counts, 0, sizeof(uint64_t) * (LATENCY_NB + 1));
    if (!h || h->count == 0)
        return;
    unsigned b = 0;
    unsigned lo = core_hist_index(h->min), hi = core_hist_index(h->max);
    for (unsigned i = lo; i <= hi && i < CORE_HIST_BUCKETS; i++) {
        if (!h->buckets[i])
            continue;
        double v = (double)core_hist_bucket_high(i) / 1e9;
        while (b < LATENCY_NB && v > latency_le[b])
            b++;
        counts[b] += h->buckets[i];
    }
}

static void family(struct core_buf *b, const char *name, enum core_prom_type t, const char *help)
{
    (void)core_prom_family(b, name, t, help);
}

static void one_u64(struct core_buf *b, const char *name, enum core_prom_type t, const char *help,
                    uint64_t v)
{
    family(b, name, t, help);
    (void)core_prom_u64(b, name, NULL, 0, v);
}

/* Command statistics i of the node: the commands' (gs_commands order),
 * then the subcommands' (`config|get`), with their names. */
static size_t nstats(const struct gs_node *n)
{
    return n->cmdstats.ncommands + n->cmdstats.nsub;
}

static const struct gs_cmd_stat *stat_at(const struct gs_node *n, size_t i, const char **name)
{
    const struct gs_cmd_stats *s = &n->cmdstats;
    if (i < s->ncommands) {
        *name = n->cmd_names[i];
        return &s->cmd[i];
    }
    *name = s->sub[i - s->ncommands].fullname;
    return &s->sub[i - s->ncommands].st;
}

static void write_commands(struct gs_node *n, struct core_buf *b)
{
    const struct gs_cmd_stats *s = &n->cmdstats;
    one_u64(b, "gridsync_commands_processed_total", CORE_PROM_COUNTER,
            "Commands run, every command counted (INFO total_commands_processed).",
            n->shared.stats.commands);
    static const struct {
        const char *name, *help;
        size_t off;
    } per_cmd[] = {
        {"gridsync_command_calls_total", "Calls of a command that ran, by command.",
         offsetof(struct gs_cmd_stat, calls)},
        {"gridsync_command_rejected_calls_total",
         "Calls refused before they ran (arity, authentication, memory), by command.",
         offsetof(struct gs_cmd_stat, rejected)},
        {"gridsync_command_failed_calls_total", "Calls that ran and replied an error, by command.",
         offsetof(struct gs_cmd_stat, failed)},
    };
    for (size_t f = 0; f < sizeof(per_cmd) / sizeof(per_cmd[0]); f++) {
        family(b, per_cmd[f].name, CORE_PROM_COUNTER, per_cmd[f].help);
        for (size_t i = 0; i < nstats(n); i++) {
            const char *name;
            const struct gs_cmd_stat *cs = stat_at(n, i, &name);
            if (!cs->calls && !cs->rejected && !cs->failed)
                continue; /* as INFO commandstats: only commands that were called */
            uint64_t v;
            memcpy(&v, (const char *)cs + per_cmd[f].off, sizeof(v));
            struct core_prom_label l = {"cmd", name};
            (void)core_prom_u64(b, per_cmd[f].name, &l, 1, v);
        }
    }
    family(b, "gridsync_command_duration_seconds", CORE_PROM_HISTOGRAM,
           "Time a command's handler ran, by command.");
    for (size_t i = 0; i < nstats(n); i++) {
        const char *name;
        const struct core_hist *h = stat_at(n, i, &name)->latency;
        if (!h || !h->count)
            continue;
        uint64_t counts[LATENCY_NB + 1];
        latency_counts(h, counts);
        struct core_prom_label l = {"cmd", name};
        (void)core_prom_histogram(b, "gridsync_command_duration_seconds", &l, 1, latency_le, counts,
                                  LATENCY_NB, (double)h->sum / 1e9);
    }
    family(b, "gridsync_error_replies_total", CORE_PROM_COUNTER,
           "Error replies sent, by error code (INFO errorstats).");
    for (size_t i = 0; i < s->nerrors; i++) {
        struct core_prom_label l = {"code", s->errors[i].code};
        (void)core_prom_u64(b, "gridsync_error_replies_total", &l, 1, s->errors[i].count);
    }
}

static void write_keyspace(struct gs_node *n, struct core_buf *b)
{
    struct gs_store_stats st;
    gs_node_store_stats(n, &st);
    one_u64(b, "gridsync_keyspace_hits_total", CORE_PROM_COUNTER,
            "Key lookups that found a live key.", st.hits);
    one_u64(b, "gridsync_keyspace_misses_total", CORE_PROM_COUNTER,
            "Key lookups that found no live key.", st.misses);
    one_u64(b, "gridsync_expired_keys_total", CORE_PROM_COUNTER,
            "Keys removed because their time to live passed.", st.expired_keys);
    one_u64(b, "gridsync_evicted_keys_total", CORE_PROM_COUNTER,
            "Keys removed by the maxmemory policy.", st.evicted_keys);
    one_u64(b, "gridsync_memory_used_bytes", CORE_PROM_GAUGE,
            "Memory the keyspaces use, as maxmemory counts it (INFO used_memory).", st.used_memory);
    one_u64(b, "gridsync_memory_max_bytes", CORE_PROM_GAUGE,
            "The maxmemory limit; 0 means no limit.", (uint64_t)n->cfg.maxmemory);
    one_u64(b, "gridsync_lazyfree_pending_objects", CORE_PROM_GAUGE,
            "Values unlinked and not yet freed.", gs_store_lazyfree_pending(n->dbs[0].store));
    family(b, "gridsync_db_keys", CORE_PROM_GAUGE, "Keys per database.");
    for (unsigned d = 0; d < n->n_dbs; d++) {
        struct gs_store_stats ds;
        gs_store_stats(n->dbs[d].store, &ds);
        char id[16];
        snprintf(id, sizeof(id), "%u", d);
        struct core_prom_label l = {"db", id};
        (void)core_prom_u64(b, "gridsync_db_keys", &l, 1, ds.keys);
    }
    family(b, "gridsync_db_expiring_keys", CORE_PROM_GAUGE,
           "Keys with a time to live, per database.");
    for (unsigned d = 0; d < n->n_dbs; d++) {
        struct gs_store_stats ds;
        gs_store_stats(n->dbs[d].store, &ds);
        char id[16];
        snprintf(id, sizeof(id), "%u", d);
        struct core_prom_label l = {"db", id};
        (void)core_prom_u64(b, "gridsync_db_expiring_keys", &l, 1, ds.keys_with_expire);
    }
}

static void write_clients(struct gs_node *n, struct core_buf *b)
{
    struct core_server_stats ss;
    core_server_get_stats(n->srv, &ss);
    int64_t budget = 0;
    (void)gs_clients_budget_parse(n->cfg.maxmemory_clients, n->cfg.maxmemory, &budget);
    one_u64(b, "gridsync_connected_clients", CORE_PROM_GAUGE, "Client connections open now.",
            ss.connected);
    one_u64(b, "gridsync_max_clients", CORE_PROM_GAUGE, "The maxclients limit.",
            (uint64_t)n->cfg.maxclients);
    one_u64(b, "gridsync_connections_received_total", CORE_PROM_COUNTER,
            "Client connections accepted.", ss.total_connections);
    one_u64(b, "gridsync_rejected_connections_total", CORE_PROM_COUNTER,
            "Connections refused by maxclients.", ss.rejected_connections);
    family(b, "gridsync_client_disconnections_total", CORE_PROM_COUNTER,
           "Clients the server closed, by reason.");
    static const char *const reasons[] = {"query_buffer_limit", "output_buffer_limit",
                                          "maxmemory_clients", "timeout"};
    const uint64_t counts[] = {ss.closed_by_query_limit, ss.closed_by_output_limit,
                               ss.evicted_clients, ss.closed_by_timeout};
    for (size_t i = 0; i < 4; i++) {
        struct core_prom_label l = {"reason", reasons[i]};
        (void)core_prom_u64(b, "gridsync_client_disconnections_total", &l, 1, counts[i]);
    }
    one_u64(b, "gridsync_client_buffers_bytes", CORE_PROM_GAUGE,
            "Memory of every client's query and output buffers together.",
            core_server_clients_memory(n->srv));
    one_u64(b, "gridsync_client_buffers_max_bytes", CORE_PROM_GAUGE,
            "The maxmemory-clients budget for all client buffers; 0 means none.", (uint64_t)budget);
    one_u64(b, "gridsync_net_input_bytes_total", CORE_PROM_COUNTER, "Bytes read from clients.",
            ss.total_net_input_bytes);
    one_u64(b, "gridsync_net_output_bytes_total", CORE_PROM_COUNTER, "Bytes written to clients.",
            ss.total_net_output_bytes);
}

void gs_metrics_write(struct gs_node *n, struct core_buf *b)
{
    family(b, "gridsync_build_info", CORE_PROM_GAUGE,
           "Always 1; the labels say which GridSync and which Redis it follows.");
    struct core_prom_label info[] = {{"version", GS_VERSION},
                                     {"redis_version", GS_REDIS_VERSION},
                                     {"mode", n->cluster ? "cluster" : "standalone"}};
    (void)core_prom_u64(b, "gridsync_build_info", info, 3, 1);
    write_commands(n, b);
    write_keyspace(n, b);
    write_clients(n, b);
    for (unsigned i = 0; i < n->n_features; i++)
        if (n->features[i].ops->metrics)
            n->features[i].ops->metrics(n->features[i].self, b);
    struct core_prom_process self;
    if (core_prom_process_read(&self) == 0)
        (void)core_prom_process(b, &self);
}

static void serve_metrics(const struct core_http_request *req, struct core_http_response *res,
                          void *data)
{
    (void)req;
    struct gs_metrics *m = data;
    core_buf_reset(&m->page);
    gs_metrics_write(m->node, &m->page);
    if (m->page.oom) {
        core_buf_free(&m->page);
        core_http_reply(res, 500, "text/plain", "out of memory\n", 14);
        return;
    }
    res->content_type = "text/plain; version=0.0.4; charset=utf-8";
    core_http_write(res, m->page.data, m->page.len);
}

int gs_metrics_start(struct gs_metrics **out, struct gs_node *n)
{
    *out = NULL;
    if (n->cfg.metrics_port == 0)
        return 0;
    struct gs_metrics *m = calloc(1, sizeof(*m));
    if (!m)
        return CORE_ENOMEM;
    m->node = n;
    int rc = core_http_new(&m->http, n->loop, 16, 0);
    if (!rc)
        rc = core_http_route(m->http, "/metrics", serve_metrics, m);
    if (!rc)
        rc = core_http_listen(m->http, n->cfg.metrics_bind, (int)n->cfg.metrics_port);
    if (rc) {
        CORE_WARN("metrics: cannot listen on %s:%lld: %s", n->cfg.metrics_bind,
                  (long long)n->cfg.metrics_port, core_strerror(rc));
        if (m->http) {
            core_http_stop(m->http);
            uv_run(n->loop, UV_RUN_NOWAIT); /* let the listener close */
        }
        core_http_free(m->http);
        free(m);
        return rc;
    }
    CORE_INFO("metrics on http://%s:%d/metrics", n->cfg.metrics_bind, core_http_port(m->http));
    *out = m;
    return 0;
}

int gs_metrics_port(const struct gs_metrics *m)
{
    return m ? core_http_port(m->http) : CORE_ENOTFOUND;
}

void gs_metrics_stop(struct gs_metrics *m)
{
    if (m)
        core_http_stop(m->http);
}

void gs_metrics_free(struct gs_metrics *m)
{
    if (!m)
        return;
    core_http_free(m->http);
    core_buf_free(&m->page);
    free(m);
}
