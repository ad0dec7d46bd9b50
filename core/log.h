/*
 * Logging to stderr, one line per call, in redis-server's shape:
 *   <pid>:<role> 29 Nov 2026 23:40:01.123 * message
 * where the mark is . debug, - verbose, * notice, # warning.
 *
 * Not for hot paths: a call formats and writes synchronously.
 */
#ifndef CORE_LOG_H
#define CORE_LOG_H

enum core_log_level {
    CORE_LOG_DEBUG = 0,
    CORE_LOG_VERBOSE = 1,
    CORE_LOG_NOTICE = 2,
    CORE_LOG_WARNING = 3,
};

/* Set the process role letter (Redis uses M for master, C for child) and
 * the lowest level written. Defaults: 'M', CORE_LOG_NOTICE. */
void core_log_init(char role, enum core_log_level min_level);

/* The level names, indexed by enum core_log_level, NULL-terminated: the
 * choices of every loglevel option (CORE_OPT_ENUM) in the project. */
extern const char *const core_log_level_names[];

/* Parse "debug", "verbose", "notice" or "warning" (exactly, as Redis's
 * loglevel); returns -1 for any other name. */
int core_log_level_parse(const char *name);

void core_log(enum core_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define CORE_DEBUG(...) core_log(CORE_LOG_DEBUG, __VA_ARGS__)
#define CORE_INFO(...)  core_log(CORE_LOG_NOTICE, __VA_ARGS__)
#define CORE_WARN(...)  core_log(CORE_LOG_WARNING, __VA_ARGS__)

#endif
