/*
 * The scaffolding every EduMatcher process main shares: options and
 * --help, the log, the SIGINT/SIGTERM handlers that stop the process, and
 * the health-beacon start with its warning. What each process does on
 * start and stop stays in its own main; this module only removes the
 * copies of what is the same, so the four processes keep one behaviour:
 *
 *   - exit 0 after --help, exit 2 (message on stderr) on a bad option;
 *   - the log level from --loglevel, "notice" when it is unknown;
 *   - on SIGINT or SIGTERM: log "<name>: signal <n>, stopping", call the
 *     process's stop function (it closes the process's own handles), then
 *     close both signal handles, so uv_run returns once the rest is closed.
 */
#ifndef EM_PROC_H
#define EM_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "core/config.h"
#include "edumatcher/monitor/health.h"

struct em_proc;

/* Called once, from the first SIGINT or SIGTERM: close the process's own
 * handles (sockets, timers, servers); the signal handles are closed after. */
typedef void (*em_proc_stop_fn)(struct em_proc *p, void *data);

struct em_proc {
    const char *name; /* log prefix, e.g. "engine" (not copied) */
    uv_signal_t sigint, sigterm;
    em_proc_stop_fn stop;
    void *data;
};

/*
 * Apply argv to `opts` (core_config_parse_args) and start the log with
 * role letter `role` at the level named in `loglevel` (the option's buffer,
 * read after parsing; unknown names mean notice). `prog` is the binary's
 * name, used in the usage line and in error messages.
 * Returns true when main must return *exit_code now: 0 after --help (usage
 * printed), 2 after a bad option (the error printed on stderr). Returns
 * false, with the log started, when the process should run.
 */
bool em_proc_options(const char *prog, char role, const struct core_option *opts,
                     const char *loglevel, int argc, char **argv, int *exit_code);

/*
 * Install the SIGINT and SIGTERM handlers on `loop`: on either signal,
 * log "<name>: signal <n>, stopping", call stop(p, data), then close both
 * signal handles. `p` is owned by the caller and must stay valid until the
 * loop has run its close callbacks; `name` is not copied.
 */
void em_proc_signals_start(struct em_proc *p, uv_loop_t *loop, const char *name,
                           em_proc_stop_fn stop, void *data);

/*
 * em_health_start, with the warning "<name>: no health beacons (<error>)"
 * when it fails: a process runs on without beacons. Returns what
 * em_health_start returned (0 or a CORE_E* code from the bus).
 */
int em_proc_health_start(const char *name, struct em_health *h, uv_loop_t *loop, void *zctx,
                         const char *endpoint, uint64_t interval_ms, em_health_hook hook,
                         void *data);

#endif
