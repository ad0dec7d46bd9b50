/* Per-command and per-error-code statistics (see cmd_stats.h). */
#include "gridsync/client/cmd_stats.h"

#include "core/error.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gs_cmd_stats_init(struct gs_cmd_stats *s, size_t ncommands)
{
    memset(s, 0, sizeof(*s));
    s->cmd = calloc(ncommands ? ncommands : 1, sizeof(*s->cmd));
    if (!s->cmd)
        return CORE_ENOMEM;
    s->ncommands = ncommands;
    return 0;
}

void gs_cmd_stats_free(struct gs_cmd_stats *s)
{
    for (size_t i = 0; i < s->nsub; i++)
        free(s->sub[i].st.latency);
    s->nsub = 0;
    if (!s->cmd)
        return;
    for (size_t i = 0; i < s->ncommands; i++)
        free(s->cmd[i].latency);
    free(s->cmd);
    s->cmd = NULL;
}

static void stat_reset(struct gs_cmd_stat *st)
{
    struct core_hist *h = st->latency;
    memset(st, 0, sizeof(*st));
    if (h)
        core_hist_reset(h);
    st->latency = h;
}

void gs_cmd_stats_reset(struct gs_cmd_stats *s)
{
    for (size_t i = 0; i < s->ncommands; i++)
        stat_reset(&s->cmd[i]);
    for (size_t i = 0; i < s->nsub; i++)
        stat_reset(&s->sub[i].st);
    s->nerrors = 0;
    s->errors_untracked = 0;
}

static void stat_call(struct gs_cmd_stat *st, uint64_t ns, bool failed)
{
    st->calls++;
    st->usec_ns += ns;
    st->failed += failed;
    if (!st->latency) {
        st->latency = malloc(sizeof(*st->latency));
        if (!st->latency)
            return; /* the counts above still hold; percentiles are skipped */
        core_hist_reset(st->latency);
    }
    core_hist_record(st->latency, ns);
}

void gs_cmd_stats_call(struct gs_cmd_stats *s, size_t idx, uint64_t ns, bool failed)
{
    stat_call(&s->cmd[idx], ns, failed);
}

/* The slot of subcommand fullname, taken on first use; NULL when full. A
 * linear search by name (one subcommand may be named from two files):
 * subcommands are administrative, never a hot path. */
static struct gs_cmd_stat *sub_stat(struct gs_cmd_stats *s, const char *fullname)
{
    if (!fullname)
        return NULL;
    for (size_t i = 0; i < s->nsub; i++)
        if (strcmp(s->sub[i].fullname, fullname) == 0)
            return &s->sub[i].st;
    if (s->nsub == GS_SUBSTATS_MAX)
        return NULL;
    struct gs_sub_stat *n = &s->sub[s->nsub++];
    memset(n, 0, sizeof(*n));
    n->fullname = fullname;
    return &n->st;
}

void gs_cmd_stats_sub_call(struct gs_cmd_stats *s, const char *fullname, uint64_t ns, bool failed)
{
    struct gs_cmd_stat *st = sub_stat(s, fullname);
    if (st)
        stat_call(st, ns, failed);
}

void gs_cmd_stats_sub_reject(struct gs_cmd_stats *s, const char *fullname)
{
    struct gs_cmd_stat *st = sub_stat(s, fullname);
    if (st)
        st->rejected++;
}

void gs_cmd_stats_error(struct gs_cmd_stats *s, const char *msg, size_t len)
{
    /* Redis's afterErrorReply: the code is the text up to the first space. */
    size_t n = 0;
    while (n < len && msg[n] != ' ')
        n++;
    if (n >= sizeof(s->errors[0].code))
        n = sizeof(s->errors[0].code) - 1;
    for (size_t i = 0; i < s->nerrors; i++) {
        if (strlen(s->errors[i].code) == n && memcmp(s->errors[i].code, msg, n) == 0) {
            s->errors[i].count++;
            return;
        }
    }
    if (s->nerrors == GS_ERRORSTATS_LIMIT) {
        s->errors_untracked++;
        return;
    }
    struct gs_error_stat *e = &s->errors[s->nerrors++];
    memcpy(e->code, msg, n);
    e->code[n] = 0;
    e->count = 1;
}

static void append_line(struct core_buf *b, const char *line, int n)
{
    if (n > 0)
        core_buf_append(b, line, (size_t)n);
}

static void command_line(const struct gs_cmd_stat *st, const char *name, struct core_buf *b)
{
    if (!st->calls && !st->rejected && !st->failed)
        return;
    double usec = (double)st->usec_ns / 1000.0;
    char line[256];
    int n = snprintf(line, sizeof(line),
                     "cmdstat_%s:calls=%" PRIu64 ",usec=%" PRIu64
                     ",usec_per_call=%.2f,rejected_calls=%" PRIu64 ",failed_calls=%" PRIu64 "\r\n",
                     name, st->calls, st->usec_ns / 1000,
                     st->calls ? usec / (double)st->calls : 0.0, st->rejected, st->failed);
    append_line(b, line, n);
}

void gs_cmd_stats_info_commands(const struct gs_cmd_stats *s, const char *const *names,
                                struct core_buf *b)
{
    for (size_t i = 0; i < s->ncommands; i++)
        command_line(&s->cmd[i], names[i], b);
    for (size_t i = 0; i < s->nsub; i++)
        command_line(&s->sub[i].st, s->sub[i].fullname, b);
}

void gs_cmd_stats_info_errors(const struct gs_cmd_stats *s, struct core_buf *b)
{
    for (size_t i = 0; i < s->nerrors; i++) {
        char line[96];
        int n = snprintf(line, sizeof(line), "errorstat_%s:count=%" PRIu64 "\r\n",
                         s->errors[i].code, s->errors[i].count);
        append_line(b, line, n);
    }
}

static void latency_line(const struct core_hist *h, const char *name, struct core_buf *b)
{
    /* Redis's default latency-tracking-info-percentiles "50 99 99.9". */
    if (!h || !h->count)
        return;
    char line[256];
    int n = snprintf(
        line, sizeof(line), "latency_percentiles_usec_%s:p50=%.3f,p99=%.3f,p99.9=%.3f\r\n", name,
        (double)core_hist_percentile(h, 50) / 1000.0, (double)core_hist_percentile(h, 99) / 1000.0,
        (double)core_hist_percentile(h, 99.9) / 1000.0);
    append_line(b, line, n);
}

void gs_cmd_stats_info_latency(const struct gs_cmd_stats *s, const char *const *names,
                               struct core_buf *b)
{
    for (size_t i = 0; i < s->ncommands; i++)
        latency_line(s->cmd[i].latency, names[i], b);
    for (size_t i = 0; i < s->nsub; i++)
        latency_line(s->sub[i].st.latency, s->sub[i].fullname, b);
}
