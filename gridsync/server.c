/*
 * gridsync-server: a GridSync node in the style of redis-server.
 *
 *   gridsync-server [config-file] [--name value ...]
 *
 * Reads the configuration (file, then flags), starts the node on one libuv
 * loop and runs until SHUTDOWN, SIGINT or SIGTERM; then every handle is
 * closed and every allocation freed, so leak checkers see a clean exit.
 *
 * The file may be a redis.conf copied from a Redis install: Redis's
 * directives that mean nothing here are logged and skipped (node.h,
 * gs_redis_conf), and the process-level ones are honoured as redis-server
 * does: logfile, daemonize (fork, new session, standard streams to
 * /dev/null) and pidfile (written once started, removed at exit).
 */
#include "core/buf.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/proc.h"
#include "gridsync/cluster/cluster.h"
#include "gridsync/node/node.h"
#include "gridsync/origin/origin_node.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

/* Ignored directives are logged once the log goes where it is configured
 * to (the log file's own directive may come later in the file). */
static void note_ignored(void *arg, const char *path, int line, const char *name)
{
    char msg[CORE_OPT_STRLEN + 128];
    int n =
        snprintf(msg, sizeof(msg), "%s:%d: '%s' does not apply here; ignored", path, line, name);
    if (n > 0)
        core_buf_append(arg, msg, (size_t)n + 1);
}

#define DEFAULT_PIDFILE "/var/run/gridsync.pid"

/* Redis's daemonize(): the parent exits at once; the child leaves the
 * terminal's session; its standard streams go to /dev/null (the log stays
 * on the log file if there is one). */
static int daemonize(bool keep_stderr)
{
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "gridsync-server: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid > 0)
        _exit(0);
    setsid();
    int fd = open("/dev/null", O_RDWR);
    if (fd >= 0) {
        dup2(fd, STDIN_FILENO);
        dup2(fd, STDOUT_FILENO);
        if (!keep_stderr)
            dup2(fd, STDERR_FILENO);
        if (fd > STDERR_FILENO)
            close(fd);
    }
    return 0;
}

static void write_pidfile(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        CORE_WARN("Failed to write PID file %s: %s", path, strerror(errno));
        return;
    }
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
}

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
    struct core_buf ignored = {0};
    struct core_config_compat compat = {gs_redis_conf_ignored, note_ignored, &ignored};
    int code;
    /* loglevel is an enum option (core_log_level_names): the table refuses
     * an unknown name like any bad value. */
    if (core_proc_options_compat("gridsync-server", 'M', opts, &compat, NULL, argc, argv, &code)) {
        core_buf_free(&ignored);
        return code;
    }
    if (cfg.logfile[0] && !freopen(cfg.logfile, "a", stderr)) {
        fprintf(stdout, "gridsync-server: can't open the log file '%s': %s\n", cfg.logfile,
                strerror(errno));
        core_buf_free(&ignored);
        return 1;
    }
    setvbuf(stderr, NULL, _IOLBF, 0);
    if (cfg.daemonize && daemonize(cfg.logfile[0] != 0) != 0) {
        core_buf_free(&ignored);
        return 1;
    }
    core_log_init('M', (enum core_log_level)cfg.loglevel);
    for (size_t off = 0; off < ignored.len; off += strlen(ignored.data + off) + 1)
        CORE_WARN("%s", ignored.data + off);
    core_buf_free(&ignored);
    if (core_proc_adjust_open_files(&cfg.maxclients))
        return 1;
    /* Redis writes a pidfile when daemonized even if none is configured. */
    const char *pidfile = cfg.pidfile[0] ? cfg.pidfile : cfg.daemonize ? DEFAULT_PIDFILE : NULL;
    /* A peer that closes while we write must not kill the process (also
     * done by core_proc_signals_start; here already for what gs_node_new
     * starts before it). */
    signal(SIGPIPE, SIG_IGN);

    uv_loop_t loop;
    uv_loop_init(&loop);
    struct gs_node *node;
    int rc = gs_node_new(&node, &loop, &cfg, features);
    if (rc) {
        uv_loop_close(&loop);
        return 1;
    }
    if (argc > 1 && strncmp(argv[1], "--", 2) != 0) {
        /* Absolute, as Redis keeps it: CONFIG REWRITE finds it whatever
         * the working directory is by then. */
        char *abs = realpath(argv[1], NULL);
        snprintf(node->config_file, sizeof(node->config_file), "%s", abs ? abs : argv[1]);
        free(abs);
    }
    if (pidfile)
        write_pidfile(pidfile);
    CORE_INFO("GridSync %s (Redis %s protocol) ready to accept connections on %s:%lld", GS_VERSION,
              GS_REDIS_VERSION, cfg.bind, (long long)cfg.port);
    /* One signal handler per process, whatever the node runs inside. */
    struct core_proc proc;
    core_proc_signals_start(&proc, &loop, "gridsync-server", on_stop, node);
    uv_run(&loop, UV_RUN_DEFAULT);
    core_proc_signals_close(&proc, &loop);
    gs_node_free(node);
    uv_loop_close(&loop);
    if (pidfile)
        unlink(pidfile);
    CORE_INFO("GridSync is now ready to exit, bye bye...");
    return 0;
}
