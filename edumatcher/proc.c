/*
 * The scaffolding shared by the EduMatcher process mains (proc.h).
 *
 * Invariant: a process stops only through its signal handles; stop runs
 * once, because the handles are closed in the same callback and a closing
 * handle delivers no more signals.
 */
#include "edumatcher/proc.h"

#include "core/error.h"
#include "core/log.h"

#include <signal.h>
#include <stdio.h>

bool em_proc_options(const char *prog, char role, const struct core_option *opts,
                     const char *loglevel, int argc, char **argv, int *exit_code)
{
    char usage[128], err[256];
    snprintf(usage, sizeof usage, "%s [config] [--opt val]", prog);
    int rc = core_config_parse_args(opts, argc, argv, usage, err, sizeof err);
    if (rc == 1) {
        *exit_code = 0;
        return true;
    }
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        *exit_code = 2;
        return true;
    }
    int lvl = core_log_level_parse(loglevel);
    core_log_init(role, lvl < 0 ? CORE_LOG_NOTICE : (enum core_log_level)lvl);
    return false;
}

static void on_signal(uv_signal_t *s, int signum)
{
    struct em_proc *p = s->data;
    CORE_INFO("%s: signal %d, stopping", p->name, signum);
    p->stop(p, p->data);
    uv_close((uv_handle_t *)&p->sigint, NULL);
    uv_close((uv_handle_t *)&p->sigterm, NULL);
}

void em_proc_signals_start(struct em_proc *p, uv_loop_t *loop, const char *name,
                           em_proc_stop_fn stop, void *data)
{
    p->name = name;
    p->stop = stop;
    p->data = data;
    uv_signal_init(loop, &p->sigint);
    uv_signal_init(loop, &p->sigterm);
    p->sigint.data = p->sigterm.data = p;
    uv_signal_start(&p->sigint, on_signal, SIGINT);
    uv_signal_start(&p->sigterm, on_signal, SIGTERM);
}

int em_proc_health_start(const char *name, struct em_health *h, uv_loop_t *loop, void *zctx,
                         const char *endpoint, uint64_t interval_ms, em_health_hook hook,
                         void *data)
{
    int rc = em_health_start(h, loop, zctx, endpoint, interval_ms, hook, data);
    if (rc)
        CORE_WARN("%s: no health beacons (%s)", name, core_strerror(rc));
    return rc;
}
