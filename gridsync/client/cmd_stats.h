/*
 * What INFO commandstats, errorstats and latencystats report: per command
 * the calls, the time spent, the calls refused before they ran (rejected)
 * and those that replied an error (failed), a latency histogram; per error
 * code (the first word of an error reply) how often it was sent.
 *
 * Owned by the node, one per node; the dispatcher records into it around
 * every handler. Recording never allocates except the first time a
 * command runs (its histogram is allocated then, so commands never called
 * cost nothing) and the first time an error code is seen.
 */
#ifndef GS_CMD_STATS_H
#define GS_CMD_STATS_H

#include "core/buf.h"
#include "core/histogram.h"

#include <stddef.h>
#include <stdint.h>

/* Redis keeps at most this many distinct error codes in errorstats; more
 * are counted in total_error_replies only (server.c, ERRORSTATS_LIMIT). */
#define GS_ERRORSTATS_LIMIT 128

struct gs_cmd_stat {
    uint64_t calls, usec_ns, rejected, failed;
    struct core_hist *latency; /* NULL until the first call */
};

/* Redis 7 counts a container command's calls per subcommand
 * (`cmdstat_config|get`), never under the container itself. */
#define GS_SUBSTATS_MAX 128

struct gs_sub_stat {
    const char *fullname; /* "config|get": a static string (not copied) */
    struct gs_cmd_stat st;
};

struct gs_error_stat {
    char code[32];
    uint64_t count;
};

struct gs_cmd_stats {
    size_t ncommands;
    struct gs_cmd_stat *cmd; /* indexed like gs_commands[] */
    struct gs_error_stat errors[GS_ERRORSTATS_LIMIT];
    size_t nerrors;
    uint64_t errors_untracked; /* codes beyond the limit */
    struct gs_sub_stat sub[GS_SUBSTATS_MAX];
    size_t nsub;
};

/* Size the table for ncommands commands. Returns 0 or CORE_ENOMEM. */
int gs_cmd_stats_init(struct gs_cmd_stats *s, size_t ncommands);
void gs_cmd_stats_free(struct gs_cmd_stats *s);

/* Forget every count (CONFIG RESETSTAT). Histograms stay allocated. */
void gs_cmd_stats_reset(struct gs_cmd_stats *s);

/* One call of command idx that took ns nanoseconds; failed if it replied
 * with an error. */
void gs_cmd_stats_call(struct gs_cmd_stats *s, size_t idx, uint64_t ns, bool failed);

/* One call that ran as subcommand `fullname` (a static string such as
 * "config|get", see struct gs_subcommand); counted under it instead of its
 * container. Subcommands beyond GS_SUBSTATS_MAX are not counted. */
void gs_cmd_stats_sub_call(struct gs_cmd_stats *s, const char *fullname, uint64_t ns, bool failed);

/* Subcommand fullname was refused for its argument count (Redis counts it
 * in the subcommand's rejected_calls). */
void gs_cmd_stats_sub_reject(struct gs_cmd_stats *s, const char *fullname);

/* Command idx was refused before it ran (arity, NOAUTH, OOM ...). */
static inline void gs_cmd_stats_reject(struct gs_cmd_stats *s, size_t idx)
{
    s->cmd[idx].rejected++;
}

/* An error reply msg ("ERR ...", "WRONGTYPE ..."): counted under its code. */
void gs_cmd_stats_error(struct gs_cmd_stats *s, const char *msg, size_t len);

/* Append INFO's "# Commandstats" / "# Errorstats" / "# Latencystats"
 * bodies (without the headers) in Redis 7.0's formats, commands named as
 * in names[] (same indexing as the table). On allocation failure the
 * buffer's oom flag is set (core/buf.h). */
void gs_cmd_stats_info_commands(const struct gs_cmd_stats *s, const char *const *names,
                                struct core_buf *b);
void gs_cmd_stats_info_errors(const struct gs_cmd_stats *s, struct core_buf *b);
void gs_cmd_stats_info_latency(const struct gs_cmd_stats *s, const char *const *names,
                               struct core_buf *b);

#endif
