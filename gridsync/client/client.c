/*
 * Argument and error helpers shared by every command (client.h).
 */
#include "gridsync/client/client.h"

#include "gridsync/client/cmd_stats.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

bool gs_arg_is(const struct gs_arg *a, const char *lit)
{
    size_t n = strlen(lit);
    return a->len == n && strncasecmp(a->p, lit, n) == 0;
}

bool gs_arg_int(struct gs_client *c, const struct gs_arg *a, int64_t *out, const char *msg)
{
    if (gs_string2ll(a->p, a->len, out))
        return true;
    gs_error(c, msg ? msg : "ERR value is not an integer or out of range");
    return false;
}

void gs_error(struct gs_client *c, const char *msg)
{
    size_t len = strlen(msg);
    c->shared->stats.error_replies++;
    if (c->shared->stats.detail)
        gs_cmd_stats_error(c->shared->stats.detail, msg, len);
    gs_reply_error(&c->w, msg, len);
}

void gs_errorf(struct gs_client *c, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    gs_error(c, msg);
}

void gs_error_syntax(struct gs_client *c)
{
    gs_error(c, "ERR syntax error");
}

void gs_error_arity(struct gs_client *c, const char *name)
{
    gs_errorf(c, "ERR wrong number of arguments for '%s' command", name);
}

void gs_error_oom(struct gs_client *c)
{
    gs_error(c, "OOM command not allowed when used memory > 'maxmemory'.");
}

void gs_error_wrongtype(struct gs_client *c)
{
    gs_error(c, "WRONGTYPE Operation against a key holding the wrong kind of value");
}

struct gs_entry *gs_lookup_typed(struct gs_client *c, const struct gs_arg *key, int type,
                                 unsigned flags, bool *wrong)
{
    struct gs_entry *e = gs_store_lookup(c->db->store, key->p, key->len, c->db->now_ms, flags);
    *wrong = e && gs_entry_type(e) != type;
    if (*wrong) {
        gs_error_wrongtype(c);
        return NULL;
    }
    return e;
}

uint64_t gs_client_random(struct gs_client *c)
{
    uint64_t x = c->shared->rng ? c->shared->rng : 0x9e3779b97f4a7c15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    c->shared->rng = x;
    return x * 0x2545f4914f6cdd1dull;
}
