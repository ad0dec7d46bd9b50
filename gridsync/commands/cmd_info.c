/*
 * INFO: the sections Redis clients read (server, clients, memory, stats,
 * replication, cpu, commandstats, errorstats, latencystats, the features'
 * own, cluster, keyspace per database).
 */
#include "gridsync/client/blocking.h"
#include "gridsync/commands/cmd_server.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/log.h"
#include "gridsync/commands/glob.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- INFO */

static void human_bytes(char *out, size_t len, uint64_t n)
{
    /* Redis's bytesToHuman */
    double d = (double)n;
    if (n < 1024)
        snprintf(out, len, "%" PRIu64 "B", n);
    else if (n < 1024ULL * 1024)
        snprintf(out, len, "%.2fK", d / 1024);
    else if (n < 1024ULL * 1024 * 1024)
        snprintf(out, len, "%.2fM", d / (1024 * 1024));
    else
        snprintf(out, len, "%.2fG", d / (1024.0 * 1024 * 1024));
}

static bool want(size_t argc, struct gs_arg *argv, const char *section, bool dflt)
{
    if (argc < 2)
        return dflt;
    for (size_t i = 1; i < argc; i++) {
        if (gs_arg_is(&argv[i], section) || gs_arg_is(&argv[i], "all") ||
            gs_arg_is(&argv[i], "everything") || (dflt && gs_arg_is(&argv[i], "default")))
            return true;
    }
    return false;
}

struct buffer_max {
    size_t in, out;
};

static void buffer_max_of(struct core_conn *conn, void *arg)
{
    struct buffer_max *m = arg;
    size_t in = core_conn_input_capacity(conn), out = core_conn_output_pending(conn);
    if (in > m->in)
        m->in = in;
    if (out > m->out)
        m->out = out;
}

static int64_t clients_budget(const struct gs_node *n)
{
    int64_t b = 0;
    (void)gs_clients_budget_parse(n->cfg.maxmemory_clients, n->cfg.maxmemory, &b);
    return b;
}

static void info_text(struct gs_node *n, struct core_buf *b, size_t argc, struct gs_arg *argv)
{
    /* The node's figures: every database's together. */
    struct gs_store_stats st;
    gs_node_store_stats(n, &st);
    struct core_server_stats ss;
    core_server_get_stats(n->srv, &ss);
    int64_t now = gs_node_now_ms(n);
    int64_t uptime = (now - n->start_wall_ms) / 1000;
    bool first = true;
#define SECTION(name)                                                                              \
    do {                                                                                           \
        gs_sbprintf(b, "%s# %s\r\n", first ? "" : "\r\n", name);                                   \
        first = false;                                                                             \
    } while (0)
    if (want(argc, argv, "server", true)) {
        struct utsname u;
        uname(&u);
        SECTION("Server");
        gs_sbprintf(b,
                    "redis_version:%s\r\ngridsync_version:%s\r\nredis_mode:%s\r\n"
                    "os:%s %s %s\r\narch_bits:%d\r\nmultiplexing_api:libuv\r\nprocess_id:%d\r\n"
                    "tcp_port:%lld\r\nuptime_in_seconds:%lld\r\nuptime_in_days:%lld\r\nhz:%lld\r\n"
                    "config_file:%s\r\n",
                    GS_REDIS_VERSION, GS_VERSION, n->cluster ? "cluster" : "standalone", u.sysname,
                    u.release, u.machine, (int)(sizeof(void *) * 8), (int)getpid(),
                    (long long)n->cfg.port, (long long)uptime, (long long)(uptime / 86400),
                    (long long)n->cfg.hz, n->config_file);
    }
    if (want(argc, argv, "clients", true)) {
        SECTION("Clients");
        struct buffer_max mx = {0, 0};
        core_server_foreach(n->srv, buffer_max_of, &mx);
        gs_sbprintf(b,
                    "connected_clients:%" PRIu64 "\r\nmaxclients:%lld\r\n"
                    "client_recent_max_input_buffer:%zu\r\nclient_recent_max_output_buffer:%zu\r\n"
                    "blocked_clients:%zu\r\n",
                    ss.connected, (long long)n->cfg.maxclients, mx.in, mx.out,
                    gs_blocking_count(n->blocking));
    }
    if (want(argc, argv, "memory", true)) {
        char used[32], maxm[32], lua[32], scripts[32];
        /* As Redis, used_memory includes the Lua heap. */
        const struct gs_script_info *si = &n->script_info;
        human_bytes(used, sizeof(used), st.used_memory + si->lua_memory);
        human_bytes(lua, sizeof(lua), si->lua_memory);
        human_bytes(scripts, sizeof(scripts), si->scripts_memory);
        human_bytes(maxm, sizeof(maxm), (uint64_t)n->cfg.maxmemory);
        static const char *const pol[] = {"noeviction", "slru", "allkeys-lru"};
        SECTION("Memory");
        gs_sbprintf(b,
                    "used_memory:%" PRIu64 "\r\nused_memory_human:%s\r\n"
                    "used_memory_lua:%" PRIu64 "\r\nused_memory_vm_eval:%" PRIu64
                    "\r\nused_memory_lua_human:%s\r\nused_memory_scripts_eval:%" PRIu64
                    "\r\nnumber_of_cached_scripts:%" PRIu64 "\r\nused_memory_scripts:%" PRIu64
                    "\r\nused_memory_scripts_human:%s\r\nmaxmemory:%lld\r\n"
                    "maxmemory_human:%s\r\nmaxmemory_policy:%s\r\nmem_clients_normal:%zu\r\n"
                    "maxmemory_clients:%lld\r\nlazyfree_pending_objects:%" PRIu64 "\r\n"
                    "mem_allocator:%s\r\n",
                    st.used_memory + si->lua_memory, used, si->lua_memory, si->lua_memory, lua,
                    si->scripts_memory, si->scripts, si->scripts_memory, scripts,
                    (long long)n->cfg.maxmemory, maxm, pol[n->cfg.maxmemory_policy],
                    core_server_clients_memory(n->srv), (long long)clients_budget(n),
                    gs_store_lazyfree_pending(n->dbs[0].store), core_allocator_name());
    }
    if (want(argc, argv, "persistence", true)) {
        SECTION("Persistence");
        gs_sbprintf(b, "loading:0\r\nrdb_changes_since_last_save:0\r\naof_enabled:0\r\n");
    }
    if (want(argc, argv, "stats", true)) {
        SECTION("Stats");
        gs_sbprintf(b,
                    "total_connections_received:%" PRIu64 "\r\ntotal_commands_processed:%" PRIu64
                    "\r\ntotal_net_input_bytes:%" PRIu64 "\r\ntotal_net_output_bytes:%" PRIu64
                    "\r\nrejected_connections:%" PRIu64 "\r\nexpired_keys:%" PRIu64
                    "\r\nevicted_keys:%" PRIu64 "\r\nkeyspace_hits:%" PRIu64
                    "\r\nkeyspace_misses:%" PRIu64 "\r\ntotal_error_replies:%" PRIu64
                    "\r\nclient_query_buffer_limit_disconnections:%" PRIu64
                    "\r\nclient_output_buffer_limit_disconnections:%" PRIu64
                    "\r\nevicted_clients:%" PRIu64 "\r\n",
                    ss.total_connections, n->shared.stats.commands, ss.total_net_input_bytes,
                    ss.total_net_output_bytes, ss.rejected_connections, st.expired_keys,
                    st.evicted_keys, st.hits, st.misses, n->shared.stats.error_replies,
                    ss.closed_by_query_limit, ss.closed_by_output_limit, ss.evicted_clients);
    }
    if (want(argc, argv, "replication", true)) {
        SECTION("Replication");
        gs_sbprintf(b, "role:master\r\nconnected_slaves:0\r\n");
    }
    if (want(argc, argv, "cpu", true)) {
        /* Redis's "%ld.%06ld" of getrusage's times. */
        struct rusage self, children, thread;
        getrusage(RUSAGE_SELF, &self);
        getrusage(RUSAGE_CHILDREN, &children);
        getrusage(RUSAGE_THREAD, &thread);
        SECTION("CPU");
        gs_sbprintf(b,
                    "used_cpu_sys:%ld.%06ld\r\nused_cpu_user:%ld.%06ld\r\n"
                    "used_cpu_sys_children:%ld.%06ld\r\nused_cpu_user_children:%ld.%06ld\r\n"
                    "used_cpu_sys_main_thread:%ld.%06ld\r\nused_cpu_user_main_thread:%ld.%06ld\r\n",
                    (long)self.ru_stime.tv_sec, (long)self.ru_stime.tv_usec,
                    (long)self.ru_utime.tv_sec, (long)self.ru_utime.tv_usec,
                    (long)children.ru_stime.tv_sec, (long)children.ru_stime.tv_usec,
                    (long)children.ru_utime.tv_sec, (long)children.ru_utime.tv_usec,
                    (long)thread.ru_stime.tv_sec, (long)thread.ru_stime.tv_usec,
                    (long)thread.ru_utime.tv_sec, (long)thread.ru_utime.tv_usec);
    }
    /* Redis 7.0's order: commandstats and latencystats only on request
     * (or "all"), errorstats by default. */
    if (want(argc, argv, "commandstats", false)) {
        SECTION("Commandstats");
        gs_cmd_stats_info_commands(&n->cmdstats, n->cmd_names, b);
    }
    if (want(argc, argv, "errorstats", true)) {
        SECTION("Errorstats");
        gs_cmd_stats_info_errors(&n->cmdstats, b);
    }
    if (want(argc, argv, "latencystats", false)) {
        SECTION("Latencystats");
        gs_cmd_stats_info_latency(&n->cmdstats, n->cmd_names, b);
    }
    for (unsigned i = 0; i < n->n_features; i++) { /* each writes its own header */
        const struct gs_feature *f = n->features[i].ops;
        if (f->info && want(argc, argv, f->name, true)) {
            gs_sbprintf(b, "%s", first ? "" : "\r\n");
            first = false;
            f->info(n->features[i].self, b);
        }
    }
    if (want(argc, argv, "cluster", true)) {
        /* Cluster clients (redis-py's RedisCluster) check this first. */
        SECTION("Cluster");
        gs_sbprintf(b, "cluster_enabled:%d\r\n", n->cluster ? 1 : 0);
    }
    if (want(argc, argv, "keyspace", true)) {
        SECTION("Keyspace");
        for (unsigned d = 0; d < n->n_dbs; d++) {
            struct gs_store_stats ds;
            gs_store_stats(n->dbs[d].store, &ds);
            if (ds.keys)
                gs_sbprintf(b, "db%u:keys=%" PRIu64 ",expires=%" PRIu64 ",avg_ttl=0\r\n", d,
                            ds.keys, ds.keys_with_expire);
        }
    }
#undef SECTION
}

void gs_cmd_info(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_node *n = c->node;
    n->shared.scratch.len = 0;
    info_text(n, &n->shared.scratch, argc, argv);
    if (n->shared.scratch.oom) {
        core_buf_free(&n->shared.scratch);
        gs_error_oom(c);
        return;
    }
    gs_reply_verbatim(&c->w, n->shared.scratch.data ? n->shared.scratch.data : "",
                      n->shared.scratch.len, "txt");
    gs_scratch_done(n);
}
