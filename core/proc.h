/*
 * The process scaffold every binary of the project shares (servers,
 * tools, load generators), so that they all behave alike:
 *
 *   - `--help` (or `-h`) prints the usage on stdout and exits 0, doing
 *     nothing else; `--version` prints "<prog> <version>" (the VERSION
 *     file at the top of the repository) and exits 0;
 *   - a bad option or value prints one line "<prog>: <reason>" on stderr
 *     and exits 2 (as getopt-based tools and Python's argparse do);
 *   - the log level is one of core_log_level_names; any other name is a
 *     bad value (exit 2), never silently "notice";
 *   - SIGINT and SIGTERM are handled once per process: the first logs
 *     "<name>: signal <n>, stopping" and calls the process's stop
 *     function, later ones are ignored until the process has exited; the
 *     handles never keep the loop alive by themselves.
 *
 * Two entry points for options: core_proc_options for programs driven by
 * a core_option table (core/config.h), core_proc_early for tools that
 * parse their own arguments (they call it first, then core_proc_bad_usage
 * for whatever they refuse).
 */
#ifndef CORE_PROC_H
#define CORE_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#include "core/config.h"

/*
 * Apply argv to `opts` (core_config_parse_args; a first argument that is
 * not an option is a config file) and start the log with role letter
 * `role` at the level named by the string option `loglevel` (its buffer,
 * read after parsing), or at notice when `loglevel` is NULL. `prog` names
 * the binary in the usage line and in messages.
 * Returns true when main must return *exit_code now: 0 after --help or
 * --version, 2 after a bad option or an unknown log level (the reason on
 * stderr). Returns false, with the log started and the crash report
 * (core_proc_crash_report, below) installed, when the process runs.
 */
bool core_proc_options(const char *prog, char role, const struct core_option *opts,
                       const char *loglevel, int argc, char **argv, int *exit_code);

/* core_proc_options for a program whose config file may be written for
 * another one (core_config_compat: gridsync-server reads redis.conf). */
bool core_proc_options_compat(const char *prog, char role, const struct core_option *opts,
                              const struct core_config_compat *compat, const char *loglevel,
                              int argc, char **argv, int *exit_code);

/*
 * For tools with their own argument parsing: if argv holds --help or -h,
 * print `usage` (a complete text, ending in a newline) on stdout and
 * return 0; if it holds --version, print the version and return 0;
 * otherwise return -1 and the tool goes on to parse its arguments.
 * "--" ends the scan (what follows is operands).
 */
int core_proc_early(const char *prog, const char *usage, int argc, char **argv);

/* If argv holds --version (before any "--"), print the version and return
 * true: for tools that handle --help themselves (getopt). */
bool core_proc_version(const char *prog, int argc, char **argv);

/*
 * Print "<prog>: <reason> (see --help)" on stderr and return 2, the exit
 * code of a bad option or value: `return core_proc_bad_usage(...)`.
 */
int core_proc_bad_usage(const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Parse the value v of option opt as a whole decimal integer in
 * [min, max] into *out. Returns 0, or 2 after printing the reason
 * (core_proc_bad_usage), so a tool writes
 * `if ((code = core_proc_int_arg(...)) != 0) return code;`.
 */
int core_proc_int_arg(const char *prog, const char *opt, const char *v, int64_t min, int64_t max,
                      int64_t *out);

/* The same for a finite decimal number in [min, max]. */
int core_proc_double_arg(const char *prog, const char *opt, const char *v, double min, double max,
                         double *out);

struct core_proc;

/* Called once, from the first SIGINT or SIGTERM: close the process's own
 * handles (sockets, timers, servers) so that the loop can end. */
typedef void (*core_proc_stop_fn)(struct core_proc *p, void *data);

struct core_proc {
    const char *name; /* log prefix, e.g. "engine" (not copied) */
    uv_signal_t sigint, sigterm;
    core_proc_stop_fn stop;
    void *data;
    bool stopped, closed;
};

/*
 * Install the SIGINT and SIGTERM handlers on `loop`. The handles are
 * unreferenced: the loop ends when the process's own handles are closed,
 * whether a signal or something else (a SHUTDOWN command) closed them.
 * On the first signal: log, call stop(p, data) once; a later one (an
 * impatient supervisor, a second Ctrl-C) is logged and ignored while the
 * process stops, as redis-server ignores a SIGTERM during its shutdown,
 * so the stop always runs to its end (the pidfile removed, files closed).
 * SIGKILL is what ends a stop that hangs. SIGPIPE is ignored from here on: a
 * write to a peer that has gone fails with EPIPE (that connection is
 * closed) instead of killing the process. Call it before the loop runs.
 * `p` is owned by the caller and must stay valid until
 * core_proc_signals_close has returned.
 */
void core_proc_signals_start(struct core_proc *p, uv_loop_t *loop, const char *name,
                             core_proc_stop_fn stop, void *data);

/* After uv_run returned: close the signal handles, run the loop until
 * they are closed, so that uv_loop_close succeeds, and ignore SIGINT and
 * SIGTERM from then on: what follows in main is the end of the stop. */
void core_proc_signals_close(struct core_proc *p, uv_loop_t *loop);

/*
 * A crash report on stderr, as redis-server writes its bug report: on
 * SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT the process writes
 *   === <PROG> BUG REPORT START ===
 *   <prog> crashed by signal: <n>, si_code: <c>, accessing address: <p>
 *   ------ STACK TRACE ------
 *   <one line per frame>
 *   === <PROG> BUG REPORT END ===
 * and then dies of the same signal (default action: exit status, core
 * file), so supervisors and tests see what they would without it. The
 * handler runs on an alternate stack, so a stack overflow is reported
 * too. core_proc_options installs it for `prog`; a program that does not
 * use it calls this once, early in main. A no-op in AddressSanitizer
 * builds, whose own report is better.
 */
void core_proc_crash_report(const char *prog);

/* Descriptors a server keeps beside its clients' (Redis's
 * CONFIG_MIN_RESERVED_FDS): listeners, logs, files, peers. */
#define CORE_PROC_RESERVED_FDS 32

/*
 * Redis's adjustOpenFilesLimit: make RLIMIT_NOFILE hold *maxclients +
 * CORE_PROC_RESERVED_FDS descriptors. When the soft limit is lower, it
 * is raised (to the hard limit's value at most unless the process may
 * raise that too, trying 16 fewer at a time, as Redis); when the best
 * limit it gets is still too low, *maxclients is reduced to fit. Logs
 * Redis's lines for each case ("Increased maximum number of open files
 * to N (it was originally set to M).", or the three warnings ending in
 * "maxclients has been reduced to N to compensate for low ulimit.").
 * Returns 0, or CORE_ERANGE when the limit leaves no descriptor for a
 * client (logged as Redis's "Your current 'ulimit -n' of N is not enough
 * for the server to start..."; the server then exits 1).
 */
int core_proc_adjust_open_files(int64_t *maxclients);

#endif
