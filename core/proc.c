/*
 * The process scaffold (proc.h).
 *
 * Invariant: stop runs at most once per process, because the first signal
 * closes both signal handles in the same callback and a closing handle
 * delivers no more signals.
 */
#include "core/proc.h"

#include "core/error.h"
#include "core/log.h"

#include <ctype.h>
#include <errno.h>
#include <execinfo.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static void print_version(const char *prog)
{
    printf("%s %s\n", prog, CORE_VERSION);
}

int core_proc_early(const char *prog, const char *usage, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            break;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            return 0;
        }
        if (strcmp(a, "--version") == 0) {
            print_version(prog);
            return 0;
        }
    }
    return -1;
}

bool core_proc_version(const char *prog, int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "--version") == 0) {
            print_version(prog);
            return true;
        }
    }
    return false;
}

int core_proc_bad_usage(const char *prog, const char *fmt, ...)
{
    char reason[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s (see --help)\n", prog, reason);
    return 2;
}

int core_proc_int_arg(const char *prog, const char *opt, const char *v, int64_t min, int64_t max,
                      int64_t *out)
{
    int64_t x;
    if (!v || core_parse_int64(v, strlen(v), &x) != 0 || x < min || x > max)
        return core_proc_bad_usage(prog, "%s wants a whole number from %lld to %lld, not '%s'", opt,
                                   (long long)min, (long long)max, v ? v : "");
    *out = x;
    return 0;
}

int core_proc_double_arg(const char *prog, const char *opt, const char *v, double min, double max,
                         double *out)
{
    char *end = NULL;
    double x = v && *v ? strtod(v, &end) : 0;
    if (!v || !*v || *end || !(x >= min && x <= max))
        return core_proc_bad_usage(prog, "%s wants a number from %g to %g, not '%s'", opt, min, max,
                                   v ? v : "");
    *out = x;
    return 0;
}

bool core_proc_options(const char *prog, char role, const struct core_option *opts,
                       const char *loglevel, int argc, char **argv, int *exit_code)
{
    return core_proc_options_compat(prog, role, opts, NULL, loglevel, argc, argv, exit_code);
}

bool core_proc_options_compat(const char *prog, char role, const struct core_option *opts,
                              const struct core_config_compat *compat, const char *loglevel,
                              int argc, char **argv, int *exit_code)
{
    if (core_proc_version(prog, argc, argv)) {
        *exit_code = 0;
        return true;
    }
    char usage[160], err[256];
    snprintf(usage, sizeof usage, "Usage: %s [config-file] [--option value ...]", prog);
    int rc = core_config_parse_args_compat(opts, compat, argc, argv, usage, err, sizeof err);
    if (rc == 1) {
        *exit_code = 0;
        return true;
    }
    if (rc < 0) {
        *exit_code = core_proc_bad_usage(prog, "%s", err);
        return true;
    }
    int lvl = CORE_LOG_NOTICE;
    if (loglevel && (lvl = core_log_level_parse(loglevel)) < 0) {
        *exit_code = core_proc_bad_usage(prog,
                                         "unknown log level '%s' (debug, verbose, notice or "
                                         "warning)",
                                         loglevel);
        return true;
    }
    core_log_init(role, (enum core_log_level)lvl);
    core_proc_crash_report(prog);
    return false;
}

static void on_signal(uv_signal_t *s, int signum)
{
    struct core_proc *p = s->data;
    if (p->stopped) {
        CORE_INFO("%s: signal %d while stopping, ignored", p->name, signum);
        return;
    }
    p->stopped = true;
    CORE_INFO("%s: signal %d, stopping", p->name, signum);
    p->stop(p, p->data);
}

void core_proc_signals_start(struct core_proc *p, uv_loop_t *loop, const char *name,
                             core_proc_stop_fn stop, void *data)
{
    p->name = name;
    p->stop = stop;
    p->data = data;
    p->stopped = p->closed = false;
    /* A peer that closes while we write to it (a gateway that vanishes
     * with replies on their way) makes that write fail with EPIPE, which
     * closes that one connection; SIGPIPE's default would kill us. */
    signal(SIGPIPE, SIG_IGN);
    uv_signal_init(loop, &p->sigint);
    uv_signal_init(loop, &p->sigterm);
    p->sigint.data = p->sigterm.data = p;
    uv_signal_start(&p->sigint, on_signal, SIGINT);
    uv_signal_start(&p->sigterm, on_signal, SIGTERM);
    uv_unref((uv_handle_t *)&p->sigint);
    uv_unref((uv_handle_t *)&p->sigterm);
}

void core_proc_signals_close(struct core_proc *p, uv_loop_t *loop)
{
    if (!p->closed) {
        p->closed = true;
        uv_close((uv_handle_t *)&p->sigint, NULL);
        uv_close((uv_handle_t *)&p->sigterm, NULL);
    }
    uv_run(loop, UV_RUN_DEFAULT);
    /* Closing the handles gave both signals their default action back: the
     * rest of main (freeing, removing the pidfile) runs to its end. */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
}

/* ---- crash report ---- */

#if defined(__SANITIZE_ADDRESS__)
#define CORE_PROC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CORE_PROC_ASAN 1
#endif
#endif

#ifndef CORE_PROC_ASAN
static char crash_prog[64];
static char crash_title[64]; /* crash_prog in capitals, for the report's frame */
static char crash_stack[64 * 1024];

static void crash_write(const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

/* Only write(2), backtrace (loaded at install, so it does not allocate
 * here) and snprintf of integers and a pointer run in the handler. */
static void crash_handler(int sig, siginfo_t *info, void *uc)
{
    (void)uc;
    char line[256];
    int n = snprintf(line, sizeof line, "\n=== %s BUG REPORT START ===\n", crash_title);
    crash_write(line, (size_t)n);
    n = snprintf(line, sizeof line,
                 "%s crashed by signal: %d, si_code: %d, accessing address: %p\n", crash_prog, sig,
                 info ? info->si_code : 0, info ? info->si_addr : NULL);
    crash_write(line, (size_t)n);
    static const char head[] = "------ STACK TRACE ------\n";
    crash_write(head, sizeof head - 1);
    void *frames[64];
    int k = backtrace(frames, 64);
    backtrace_symbols_fd(frames, k, STDERR_FILENO);
    n = snprintf(line, sizeof line, "=== %s BUG REPORT END ===\n", crash_title);
    crash_write(line, (size_t)n);
    /* Die of the same signal: SA_RESETHAND restored the default action
     * and SA_NODEFER leaves the signal unblocked, so this raise ends the
     * process whether the signal was a fault or was sent. */
    raise(sig);
}
#endif

void core_proc_crash_report(const char *prog)
{
#ifdef CORE_PROC_ASAN
    (void)prog;
#else
    snprintf(crash_prog, sizeof crash_prog, "%s", prog);
    for (size_t i = 0; crash_prog[i]; i++)
        crash_title[i] = (char)toupper((unsigned char)crash_prog[i]);
    void *warm[1];
    (void)backtrace(warm, 1); /* loads libgcc now, not in the handler */
    stack_t ss = {.ss_sp = crash_stack, .ss_size = sizeof crash_stack, .ss_flags = 0};
    (void)sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_sigaction = crash_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND | SA_NODEFER;
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        (void)sigaction(sigs[i], &sa, NULL);
#endif
}

int core_proc_adjust_open_files(int64_t *maxclients)
{
    rlim_t maxfiles = (rlim_t)*maxclients + CORE_PROC_RESERVED_FDS;
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) == -1) {
        CORE_WARN("Unable to obtain the current NOFILE limit (%s), assuming 1024 and setting "
                  "the max clients configuration accordingly.",
                  strerror(errno));
        *maxclients = 1024 - CORE_PROC_RESERVED_FDS;
        return 0;
    }
    rlim_t oldlimit = limit.rlim_cur;
    if (oldlimit >= maxfiles)
        return 0;
    /* The best limit at most maxfiles, 16 fewer per try (Redis's loop).
     * Unlike Redis, a hard limit above it is kept: lowering it could not
     * be undone by a later CONFIG SET maxclients. */
    rlim_t hard = limit.rlim_max, bestlimit = maxfiles;
    int setrlimit_error = 0;
    while (bestlimit > oldlimit) {
        limit.rlim_cur = bestlimit;
        limit.rlim_max = hard != RLIM_INFINITY && hard >= bestlimit ? hard : bestlimit;
        if (setrlimit(RLIMIT_NOFILE, &limit) != -1)
            break;
        setrlimit_error = errno;
        if (bestlimit < 16) {
            bestlimit = oldlimit;
            break;
        }
        bestlimit -= 16;
    }
    if (bestlimit < oldlimit)
        bestlimit = oldlimit;
    if (bestlimit >= maxfiles) {
        CORE_INFO("Increased maximum number of open files to %llu (it was originally set to "
                  "%llu).",
                  (unsigned long long)maxfiles, (unsigned long long)oldlimit);
        return 0;
    }
    if (bestlimit <= CORE_PROC_RESERVED_FDS) {
        CORE_WARN("Your current 'ulimit -n' of %llu is not enough for the server to start. "
                  "Please increase your open file limit to at least %llu. Exiting.",
                  (unsigned long long)oldlimit, (unsigned long long)maxfiles);
        return CORE_ERANGE;
    }
    int64_t old_maxclients = *maxclients;
    *maxclients = (int64_t)bestlimit - CORE_PROC_RESERVED_FDS;
    CORE_WARN("You requested maxclients of %lld requiring at least %llu max file descriptors.",
              (long long)old_maxclients, (unsigned long long)maxfiles);
    CORE_WARN("Server can't set maximum open files to %llu because of OS error: %s.",
              (unsigned long long)maxfiles, strerror(setrlimit_error));
    CORE_WARN("Current maximum open files is %llu. maxclients has been reduced to %lld to "
              "compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'.",
              (unsigned long long)bestlimit, (long long)*maxclients);
    return 0;
}
