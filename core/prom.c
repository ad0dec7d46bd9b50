/*
 * Prometheus text exposition writer (conventions in prom.h).
 *
 * Everything is appended to the caller's core_buf; nothing is kept between
 * calls. Names are validated before anything of a line is written, so a
 * refused call leaves the buffer as it was.
 */
#include "core/prom.h"

#include "core/error.h"

#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static bool name_char(char c, bool first, bool colon)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')
        return true;
    if (colon && c == ':')
        return true;
    return !first && c >= '0' && c <= '9';
}

bool core_prom_valid_name(const char *s)
{
    if (!s || !*s)
        return false;
    for (size_t i = 0; s[i]; i++)
        if (!name_char(s[i], i == 0, true))
            return false;
    return true;
}

bool core_prom_valid_label(const char *s)
{
    if (!s || !*s || (s[0] == '_' && s[1] == '_'))
        return false;
    for (size_t i = 0; s[i]; i++)
        if (!name_char(s[i], i == 0, false))
            return false;
    return true;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int status(const struct core_buf *out)
{
    return out->oom ? CORE_ENOMEM : 0;
}

static void puts_buf(struct core_buf *out, const char *s)
{
    core_buf_append(out, s, strlen(s));
}

/* Escape for HELP text (backslash, newline) or, with quote, for a label
 * value (also the double quote). */
static void escaped(struct core_buf *out, const char *s, bool quote)
{
    const char *run = s;
    for (; *s; s++) {
        const char *rep = NULL;
        if (*s == '\\')
            rep = "\\\\";
        else if (*s == '\n')
            rep = "\\n";
        else if (quote && *s == '"')
            rep = "\\\"";
        if (!rep)
            continue;
        core_buf_append(out, run, (size_t)(s - run));
        puts_buf(out, rep);
        run = s + 1;
    }
    core_buf_append(out, run, (size_t)(s - run));
}

int core_prom_family(struct core_buf *out, const char *name, enum core_prom_type type,
                     const char *help)
{
    static const char *const types[] = {"counter", "gauge", "histogram"};
    if (!core_prom_valid_name(name) || !help || (unsigned)type > CORE_PROM_HISTOGRAM)
        return CORE_EINVAL;
    if (type == CORE_PROM_COUNTER && !ends_with(name, "_total"))
        return CORE_EINVAL;
    if (type == CORE_PROM_HISTOGRAM &&
        (ends_with(name, "_bucket") || ends_with(name, "_sum") || ends_with(name, "_count")))
        return CORE_EINVAL;
    puts_buf(out, "# HELP ");
    puts_buf(out, name);
    core_buf_append(out, " ", 1);
    escaped(out, help, false);
    puts_buf(out, "\n# TYPE ");
    puts_buf(out, name);
    core_buf_append(out, " ", 1);
    puts_buf(out, types[type]);
    core_buf_append(out, "\n", 1);
    return status(out);
}

static bool labels_valid(const struct core_prom_label *l, size_t n)
{
    if (n && !l)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!core_prom_valid_label(l[i].name) || !l[i].value)
            return false;
    return true;
}

/* `name[suffix]{labels[,le="le"]} ` up to the value. */
static void series(struct core_buf *out, const char *name, const char *suffix,
                   const struct core_prom_label *l, size_t n, const char *le)
{
    puts_buf(out, name);
    if (suffix)
        puts_buf(out, suffix);
    if (n || le) {
        core_buf_append(out, "{", 1);
        for (size_t i = 0; i < n; i++) {
            if (i)
                core_buf_append(out, ",", 1);
            puts_buf(out, l[i].name);
            puts_buf(out, "=\"");
            escaped(out, l[i].value, true);
            core_buf_append(out, "\"", 1);
        }
        if (le) {
            puts_buf(out, n ? ",le=\"" : "le=\"");
            puts_buf(out, le);
            core_buf_append(out, "\"", 1);
        }
        core_buf_append(out, "}", 1);
    }
    core_buf_append(out, " ", 1);
}

/* Shortest text that reads back as the same double (Go's and Python's
 * parsers accept %g forms); the special values as the format spells them. */
static void format_double(char *s, size_t cap, double v)
{
    if (isnan(v)) {
        snprintf(s, cap, "NaN");
    } else if (isinf(v)) {
        snprintf(s, cap, v > 0 ? "+Inf" : "-Inf");
    } else if (v == (double)(int64_t)v && fabs(v) < 9007199254740992.0) {
        snprintf(s, cap, "%" PRId64, (int64_t)v); /* whole numbers as integers, never 2e+04 */
    } else {
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(s, cap, "%.*g", prec, v);
            if (strtod(s, NULL) == v)
                return;
        }
    }
}

static int line_with(struct core_buf *out, const char *name, const struct core_prom_label *l,
                     size_t n, const char *value)
{
    if (!core_prom_valid_name(name) || !labels_valid(l, n))
        return CORE_EINVAL;
    series(out, name, NULL, l, n, NULL);
    puts_buf(out, value);
    core_buf_append(out, "\n", 1);
    return status(out);
}

int core_prom_u64(struct core_buf *out, const char *name, const struct core_prom_label *labels,
                  size_t nlabels, uint64_t value)
{
    char v[24];
    snprintf(v, sizeof v, "%" PRIu64, value);
    return line_with(out, name, labels, nlabels, v);
}

int core_prom_i64(struct core_buf *out, const char *name, const struct core_prom_label *labels,
                  size_t nlabels, int64_t value)
{
    char v[24];
    snprintf(v, sizeof v, "%" PRId64, value);
    return line_with(out, name, labels, nlabels, v);
}

int core_prom_double(struct core_buf *out, const char *name, const struct core_prom_label *labels,
                     size_t nlabels, double value)
{
    char v[40];
    format_double(v, sizeof v, value);
    return line_with(out, name, labels, nlabels, v);
}

int core_prom_histogram(struct core_buf *out, const char *name,
                        const struct core_prom_label *labels, size_t nlabels, const double *le,
                        const uint64_t *counts, size_t nbounds, double sum)
{
    if (!core_prom_valid_name(name) || !labels_valid(labels, nlabels) || !counts ||
        (nbounds && !le))
        return CORE_EINVAL;
    for (size_t i = 0; i < nlabels; i++)
        if (strcmp(labels[i].name, "le") == 0)
            return CORE_EINVAL;
    for (size_t i = 0; i < nbounds; i++)
        if (isnan(le[i]) || (i && !(le[i] > le[i - 1])))
            return CORE_EINVAL;
    uint64_t cum = 0;
    char v[40], bound[40];
    for (size_t i = 0; i < nbounds; i++) {
        cum += counts[i];
        format_double(bound, sizeof bound, le[i]);
        series(out, name, "_bucket", labels, nlabels, bound);
        snprintf(v, sizeof v, "%" PRIu64 "\n", cum);
        puts_buf(out, v);
    }
    cum += counts[nbounds];
    series(out, name, "_bucket", labels, nlabels, "+Inf");
    snprintf(v, sizeof v, "%" PRIu64 "\n", cum);
    puts_buf(out, v);
    series(out, name, "_sum", labels, nlabels, NULL);
    format_double(v, sizeof v, sum);
    puts_buf(out, v);
    core_buf_append(out, "\n", 1);
    series(out, name, "_count", labels, nlabels, NULL);
    snprintf(v, sizeof v, "%" PRIu64 "\n", cum);
    puts_buf(out, v);
    return status(out);
}

/* Fields of /proc/self/stat after the command (which may hold spaces and
 * parentheses, so parsing starts after the last ')'): field 3 is the state. */
static int read_stat(struct core_prom_process *p)
{
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f)
        return CORE_EIO;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *s = strrchr(buf, ')');
    if (!s)
        return CORE_EIO;
    unsigned long long utime, stime, start, vsize;
    long long rss;
    /* 3 state ... 14 utime 15 stime ... 22 starttime 23 vsize 24 rss */
    int got = sscanf(s + 2,
                     "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d "
                     "%*d %llu %llu %lld",
                     &utime, &stime, &start, &vsize, &rss);
    if (got != 5)
        return CORE_EIO;
    long tick = sysconf(_SC_CLK_TCK);
    if (tick <= 0)
        return CORE_EIO;

    unsigned long long btime = 0;
    f = fopen("/proc/stat", "r");
    if (!f)
        return CORE_EIO;
    char line[256];
    bool found = false;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "btime %llu", &btime) == 1) {
            found = true;
            break;
        }
    fclose(f);
    if (!found)
        return CORE_EIO;
    p->cpu_seconds = (double)(utime + stime) / (double)tick;
    p->start_seconds = (double)btime + (double)start / (double)tick;
    p->virtual_bytes = vsize;
    p->resident_bytes = rss > 0 ? (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
    return 0;
}

int core_prom_process_read(struct core_prom_process *p)
{
    memset(p, 0, sizeof *p);
    if (read_stat(p) != 0) {
        memset(p, 0, sizeof *p);
        return CORE_EIO;
    }
    DIR *d = opendir("/proc/self/fd");
    if (!d) {
        memset(p, 0, sizeof *p);
        return CORE_EIO;
    }
    const struct dirent *e;
    uint64_t fds = 0;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            fds++;
    closedir(d);
    p->open_fds = fds ? fds - 1 : 0; /* not counting the directory's own fd */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        p->max_fds = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
    return 0;
}

int core_prom_process(struct core_buf *out, const struct core_prom_process *p)
{
    core_prom_family(out, "process_cpu_seconds_total", CORE_PROM_COUNTER,
                     "Total user and system CPU time spent in seconds.");
    core_prom_double(out, "process_cpu_seconds_total", NULL, 0, p->cpu_seconds);
    core_prom_family(out, "process_start_time_seconds", CORE_PROM_GAUGE,
                     "Start time of the process since unix epoch in seconds.");
    core_prom_double(out, "process_start_time_seconds", NULL, 0, p->start_seconds);
    core_prom_family(out, "process_resident_memory_bytes", CORE_PROM_GAUGE,
                     "Resident memory size in bytes.");
    core_prom_u64(out, "process_resident_memory_bytes", NULL, 0, p->resident_bytes);
    core_prom_family(out, "process_virtual_memory_bytes", CORE_PROM_GAUGE,
                     "Virtual memory size in bytes.");
    core_prom_u64(out, "process_virtual_memory_bytes", NULL, 0, p->virtual_bytes);
    core_prom_family(out, "process_open_fds", CORE_PROM_GAUGE, "Number of open file descriptors.");
    core_prom_u64(out, "process_open_fds", NULL, 0, p->open_fds);
    core_prom_family(out, "process_max_fds", CORE_PROM_GAUGE,
                     "Maximum number of open file descriptors.");
    core_prom_u64(out, "process_max_fds", NULL, 0, p->max_fds);
    return status(out);
}
