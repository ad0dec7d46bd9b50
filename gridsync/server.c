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
#include "gridsync/node/node.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

int main(int argc, char **argv)
{
    struct gs_config cfg;
    struct core_option opts[GS_NODE_NOPTS];
    gs_config_defaults(&cfg);
    gs_config_bind(&cfg, opts);
    char err[512];
    int rc = core_config_parse_args(opts, argc, argv,
                                    "Usage: gridsync-server [config-file] [--option value ...]",
                                    err, sizeof(err));
    if (rc == 1)
        return 0;
    if (rc) {
        fprintf(stderr, "gridsync-server: %s\n", err);
        return 1;
    }
    core_log_init('M', (enum core_log_level)cfg.loglevel);
    /* A peer that closes while we write must not kill the process. */
    signal(SIGPIPE, SIG_IGN);

    uv_loop_t loop;
    uv_loop_init(&loop);
    struct gs_node *node;
    rc = gs_node_new(&node, &loop, &cfg);
    if (rc) {
        uv_loop_close(&loop);
        return 1;
    }
    if (argc > 1 && strncmp(argv[1], "--", 2) != 0)
        snprintf(node->config_file, sizeof(node->config_file), "%s", argv[1]);
    CORE_INFO("GridSync %s (Redis %s protocol) ready to accept connections on %s:%lld", GS_VERSION,
              GS_REDIS_VERSION, cfg.bind, (long long)cfg.port);
    uv_run(&loop, UV_RUN_DEFAULT);
    gs_node_free(node);
    uv_loop_close(&loop);
    CORE_INFO("GridSync is now ready to exit, bye bye...");
    return 0;
}
