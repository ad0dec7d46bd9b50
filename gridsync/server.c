/*
 * gridsync-server: a GridSync node in the style of redis-server.
 *
 *   gridsync-server [config-file] [--name value ...]
 *
 * Reads the configuration (file, then flags), starts the node on one libuv
 * loop and runs until SHUTDOWN, SIGINT or SIGTERM; then every handle is
 * closed and every allocation freed, so leak checkers see a clean exit.
 */
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/proc.h"
#include "gridsync/cluster/cluster.h"
#include "gridsync/node/node.h"
#include "gridsync/origin/origin_node.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

static void on_stop(struct core_proc *p, void *data)
{
    gs_node_stop(data);
}

int main(int argc, char **argv)
{
    struct gs_config cfg;
    /* The node's features, in the order their hooks run: read-through
     * first, so that cluster mode's groups copy its miss hook. */
    static const struct gs_feature *const features[] = {&gs_origin_feature, &gs_cluster_feature,
                                                        NULL};
    struct core_option opts[GS_NODE_MAX_OPTS];
    gs_config_defaults(&cfg);
    gs_config_bind(&cfg, opts, features);
    int code;
    /* loglevel is an enum option (core_log_level_names): the table refuses
     * an unknown name like any bad value. */
    if (core_proc_options("gridsync-server", 'M', opts, NULL, argc, argv, &code))
        return code;
    core_log_init('M', (enum core_log_level)cfg.loglevel);
    /* A peer that closes while we write must not kill the process. */
    signal(SIGPIPE, SIG_IGN);

    uv_loop_t loop;
    uv_loop_init(&loop);
    struct gs_node *node;
    int rc = gs_node_new(&node, &loop, &cfg, features);
    if (rc) {
        uv_loop_close(&loop);
        return 1;
    }
    if (argc > 1 && strncmp(argv[1], "--", 2) != 0)
        snprintf(node->config_file, sizeof(node->config_file), "%s", argv[1]);
    CORE_INFO("GridSync %s (Redis %s protocol) ready to accept connections on %s:%lld", GS_VERSION,
              GS_REDIS_VERSION, cfg.bind, (long long)cfg.port);
    /* One signal handler per process, whatever the node runs inside. */
    struct core_proc proc;
    core_proc_signals_start(&proc, &loop, "gridsync-server", on_stop, node);
    uv_run(&loop, UV_RUN_DEFAULT);
    core_proc_signals_close(&proc, &loop);
    gs_node_free(node);
    uv_loop_close(&loop);
    CORE_INFO("GridSync is now ready to exit, bye bye...");
    return 0;
}
