/*
 * Argument and error helpers shared by every command (client.h).
 */
#include "gridsync/client/client.h"

#include "gridsync/client/cmd_stats.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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

bool gs_parse_random_count(struct gs_client *c, size_t argc, const struct gs_arg *argv,
                           const char *word, int64_t *count, bool *with)
{
    if (!gs_arg_int(c, &argv[2], count, NULL))
        return false;
    if (*count == INT64_MIN) {
        gs_error(c, "ERR value is out of range, value must between -9223372036854775807 and "
                    "9223372036854775807");
        return false;
    }
    *with = argc == 4;
    if (argc > 4 || (argc == 4 && (!word || !gs_arg_is(&argv[3], word)))) {
        gs_error_syntax(c);
        return false;
    }
    if (*with && (*count < -INT64_MAX / 2 || *count > INT64_MAX / 2)) {
        gs_error(c, "ERR value is out of range");
        return false;
    }
    return true;
}

unsigned char *gs_random_positions(struct gs_client *c, size_t size, size_t count)
{
    uint32_t *pos = malloc(size * sizeof(*pos));
    unsigned char *chosen = calloc(size, 1);
    if (!pos || !chosen) {
        free(pos);
        free(chosen);
        return NULL;
    }
    for (size_t i = 0; i < size; i++)
        pos[i] = (uint32_t)i;
    for (size_t i = 0; i < count; i++) {
        size_t j = i + gs_client_random(c) % (size - i);
        uint32_t t = pos[i];
        pos[i] = pos[j];
        pos[j] = t;
        chosen[pos[i]] = 1;
    }
    free(pos);
    return chosen;
}

bool gs_parse_scan_cursor(struct gs_client *c, const struct gs_arg *a, uint64_t *out)
{
    /* parseScanCursorOrReply: strtoul semantics, no leading space; an
     * empty cursor is 0, as strtoul reads it. */
    char tmp[32];
    if (a->len >= sizeof(tmp) || (a->len && isspace((unsigned char)a->p[0]))) {
        gs_error(c, "ERR invalid cursor");
        return false;
    }
    memcpy(tmp, a->p, a->len);
    tmp[a->len] = 0;
    char *end;
    errno = 0;
    *out = strtoull(tmp, &end, 10);
    if (*end != 0 || errno == ERANGE) {
        gs_error(c, "ERR invalid cursor");
        return false;
    }
    return true;
}

/* SCAN TYPE: Redis compares the name with each key's getObjectTypeName,
 * so any name is accepted and one that is no type matches nothing. */
static void scan_type(const struct gs_arg *name, struct gs_scan_opts *opts)
{
    static const int types[] = {GS_TYPE_STRING, GS_TYPE_LIST, GS_TYPE_SET, GS_TYPE_ZSET,
                                GS_TYPE_HASH};
    opts->type = -1;
    opts->type_none = true;
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        if (gs_arg_is(name, gs_type_name(types[t]))) {
            opts->type = types[t];
            opts->type_none = false;
        }
    }
}

bool gs_parse_scan_opts(struct gs_client *c, size_t argc, const struct gs_arg *argv, size_t first,
                        bool with_type, struct gs_scan_opts *opts)
{
    *opts = (struct gs_scan_opts){.count = 10, .pattern = NULL, .type = -1, .type_none = false};
    for (size_t i = first; i < argc; i += 2) {
        bool has_value = i + 1 < argc;
        if (gs_arg_is(&argv[i], "count") && has_value) {
            if (!gs_arg_int(c, &argv[i + 1], &opts->count, NULL))
                return false;
            if (opts->count < 1) {
                gs_error_syntax(c);
                return false;
            }
        } else if (gs_arg_is(&argv[i], "match") && has_value) {
            bool star = argv[i + 1].len == 1 && argv[i + 1].p[0] == '*';
            opts->pattern = star ? NULL : &argv[i + 1];
        } else if (with_type && gs_arg_is(&argv[i], "type") && has_value) {
            scan_type(&argv[i + 1], opts);
        } else {
            gs_error_syntax(c);
            return false;
        }
    }
    return true;
}
