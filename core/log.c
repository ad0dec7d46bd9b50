/* stderr logger; see log.h for the line format. */
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static char log_role = 'M';
static enum core_log_level log_min = CORE_LOG_NOTICE;

void core_log_init(char role, enum core_log_level min_level)
{
    log_role = role;
    log_min = min_level;
}

const char *const core_log_level_names[] = {"debug", "verbose", "notice", "warning", NULL};

int core_log_level_parse(const char *name)
{
    for (int i = 0; core_log_level_names[i]; i++)
        if (strcmp(name, core_log_level_names[i]) == 0)
            return i;
    return -1;
}

void core_log(enum core_log_level level, const char *fmt, ...)
{
    if (level < log_min)
        return;
    static const char marks[] = ".-*#";
    char line[1024];
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    int n = snprintf(line, sizeof(line), "%d:%c ", (int)getpid(), log_role);
    n += (int)strftime(line + n, sizeof(line) - (size_t)n, "%d %b %Y %H:%M:%S", &tm);
    n += snprintf(line + n, sizeof(line) - (size_t)n, ".%03d %c ", (int)(tv.tv_usec / 1000),
                  marks[level & 3]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    n += m;
    if (n > (int)sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    /* One write per line so lines from several processes do not interleave. */
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}
