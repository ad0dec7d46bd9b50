/*
 * CONFIG GET, SET, RESETSTAT, REWRITE and HELP over the node's option
 * table.
 */
#include "gridsync/commands/cmd_server.h"

#include "core/error.h"
#include "core/log.h"
#include "core/proc.h"
#include "gridsync/commands/glob.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* -------------------------------------------------------------- CONFIG */

static bool has_glob(const struct gs_arg *a)
{
    for (size_t i = 0; i < a->len; i++)
        if (a->p[i] == '*' || a->p[i] == '?' || a->p[i] == '[')
            return true;
    return false;
}

/* Redis 7.0's configGetCommand: each option once, however many patterns
 * match it; a name given without glob characters is echoed as the client
 * spelt it (CONFIG GET MAXMEMORY answers "MAXMEMORY"), a glob match with
 * the option's own name. */
static void config_get(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_node *n = c->node;
    const struct gs_arg *as_given[GS_NODE_MAX_OPTS] = {NULL};
    bool match[GS_NODE_MAX_OPTS] = {false};
    size_t count = 0;
    for (size_t i = 2; i < argc; i++) {
        bool glob = has_glob(&argv[i]);
        for (size_t k = 0; n->opts[k].name; k++) {
            const char *name = n->opts[k].name;
            if (!match[k] && gs_glob_match(argv[i].p, argv[i].len, name, strlen(name), true)) {
                match[k] = true;
                as_given[k] = glob ? NULL : &argv[i];
                count++;
            }
        }
    }
    gs_reply_map(&c->w, count);
    for (size_t k = 0; n->opts[k].name; k++) {
        if (!match[k])
            continue;
        char val[CORE_OPT_STRLEN + 32];
        core_config_format(&n->opts[k], val, sizeof(val));
        if (as_given[k])
            gs_reply_bulk(&c->w, as_given[k]->p, as_given[k]->len);
        else
            gs_reply_bulk_cstr(&c->w, n->opts[k].name);
        gs_reply_bulk_cstr(&c->w, val);
    }
}

/* Check one CONFIG SET value as Redis 7.0's config.c does, with its error
 * texts (core_config_set's are written for the command line); `hz` is
 * clamped into [1, 500] as Redis's updateHz does. Returns false after
 * writing the reason into why. */
static bool config_value_ok(const struct core_option *o, char *value, char *why, size_t len)
{
    int64_t v;
    int rc;
    switch (o->type) {
    case CORE_OPT_INT:
        if (core_parse_int64(value, strlen(value), &v)) {
            snprintf(why, len, "argument couldn't be parsed into an integer");
            return false;
        }
        if (strcmp(o->name, "hz") == 0) {
            if (v < 0 || v > INT32_MAX) {
                snprintf(why, len, "argument must be between 0 and 2147483647 inclusive");
                return false;
            }
            snprintf(value, CORE_OPT_STRLEN, "%lld",
                     (long long)(v < o->min   ? o->min
                                 : v > o->max ? o->max
                                              : v));
            return true;
        }
        rc = 0;
        break;
    case CORE_OPT_MEMORY:
        rc = core_parse_memory(value, &v);
        if (rc) { /* Redis's memtoull: also for negative and overflowing values */
            snprintf(why, len, "argument must be a memory value");
            return false;
        }
        break;
    case CORE_OPT_BOOL:
        if (strcasecmp(value, "yes") && strcasecmp(value, "no")) {
            snprintf(why, len, "argument must be 'yes' or 'no'");
            return false;
        }
        return true;
    case CORE_OPT_ENUM: {
        for (size_t i = 0; o->choices[i]; i++)
            if (strcasecmp(o->choices[i], value) == 0)
                return true;
        size_t used = (size_t)snprintf(why, len, "argument(s) must be one of the following: ");
        for (size_t i = 0; o->choices[i] && used < len; i++)
            used += (size_t)snprintf(why + used, len - used, "%s%s", i ? ", " : "", o->choices[i]);
        return false;
    }
    default:
        if (strcmp(o->name, "maxmemory-clients") == 0) {
            int64_t b;
            if (gs_clients_budget_parse(value, 0, &b) == 0)
                return true;
            size_t vl = strlen(value);
            int64_t pct;
            if (vl > 1 && value[vl - 1] == '%' && core_parse_int64(value, vl - 1, &pct) == 0 &&
                pct > 100)
                snprintf(why, len, "percentage argument must be less or equal to 100");
            else
                snprintf(why, len, "argument must be a memory or percent value");
            return false;
        }
        if (strcmp(o->name, "client-output-buffer-limit") == 0) {
            struct gs_obuf_limit scratch[GS_CLASS_COUNT] = {{0, 0, 0}};
            return gs_obuf_limits_parse(value, scratch, why, len) == 0;
        }
        return true;
    }
    if (rc || v < o->min || v > o->max) {
        snprintf(why, len, "argument must be between %lld and %lld inclusive", (long long)o->min,
                 (long long)o->max);
        return false;
    }
    return true;
}

static void config_set(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_node *n = c->node;
    if (argc % 2 != 0) { /* Redis 7.0's configSetCommand */
        gs_error_syntax(c);
        return;
    }
    /* All or nothing, as Redis 7: restore the old values on any failure. */
    struct gs_config saved = n->cfg;
    for (size_t i = 2; i < argc; i += 2) {
        char name[128], value[CORE_OPT_STRLEN + 1], why[512];
        if (argv[i].len >= sizeof(name) || argv[i + 1].len >= sizeof(value)) {
            n->cfg = saved;
            gs_errorf(c,
                      "ERR CONFIG SET failed (possibly related to argument '%.*s') - "
                      "argument too long",
                      (int)(argv[i].len < 64 ? argv[i].len : 64), argv[i].p);
            return;
        }
        memcpy(name, argv[i].p, argv[i].len);
        name[argv[i].len] = 0;
        memcpy(value, argv[i + 1].p, argv[i + 1].len);
        value[argv[i + 1].len] = 0;
        const struct core_option *o = core_config_find(n->opts, name);
        bool dup = false;
        for (size_t j = 2; j < i && o; j += 2)
            dup |= argv[j].len == argv[i].len && strncasecmp(argv[j].p, name, argv[i].len) == 0;
        int rc = 0;
        if (dup) {
            snprintf(why, sizeof(why), "duplicate parameter");
            rc = CORE_EINVAL;
        } else if (o && !(o->flags & CORE_OPT_IMMUTABLE) &&
                   !config_value_ok(o, value, why, sizeof(why))) {
            rc = CORE_EINVAL;
        } else {
            rc = core_config_set(n->opts, name, value, false, why, sizeof(why));
            if (rc == CORE_EINVAL && o && (o->flags & CORE_OPT_IMMUTABLE))
                snprintf(why, sizeof(why), "can't set immutable config");
        }
        if (rc == 0 && strcasecmp(name, "maxclients") == 0) {
            /* Redis's updateMaxclients: the descriptors must be there */
            int64_t want = n->cfg.maxclients;
            if (core_proc_adjust_open_files(&n->cfg.maxclients) == 0 && n->cfg.maxclients != want) {
                rc = CORE_ERANGE;
                CORE_WARN("Failed applying new configuration. Possibly related to new maxclients "
                          "setting. Restoring previous settings.");
                snprintf(why, sizeof(why),
                         "The operating system is not able to handle the specified number of "
                         "clients, try with %lld",
                         (long long)n->cfg.maxclients);
            }
        }
        if (rc) {
            n->cfg = saved;
            if (rc == CORE_ENOTFOUND)
                gs_errorf(c, "ERR %s", why);
            else
                gs_errorf(c, "ERR CONFIG SET failed (possibly related to argument '%s') - %s", name,
                          why);
            return;
        }
    }
    gs_node_apply_config(n);
    gs_reply_ok(&c->w);
}

/* Redis's configRewriteCommand: the file the server started from gets
 * every option's current value (core_config_rewrite keeps its other
 * lines). */
static void config_rewrite(struct gs_client *c)
{
    struct gs_node *n = c->node;
    if (!n->config_file[0]) {
        gs_error(c, "ERR The server is running without a config file");
        return;
    }
    struct gs_config dflt;
    struct core_option dopts[GS_NODE_MAX_OPTS];
    gs_config_defaults(&dflt);
    gs_config_bind(&dflt, dopts, n->feature_list);
    char why[512];
    if (core_config_rewrite(n->opts, dopts, n->config_file, why, sizeof(why))) {
        CORE_WARN("CONFIG REWRITE failed: %s", why);
        gs_errorf(c, "ERR %s", why);
        return;
    }
    CORE_INFO("CONFIG REWRITE executed with success.");
    gs_reply_ok(&c->w);
}

static const struct gs_subcommand config_subs[] = {
    {"get", -3, "config|get"},
    {"set", -4, "config|set"},
    {"resetstat", 2, "config|resetstat"},
    {"rewrite", 2, "config|rewrite"},
    {"help", 2, "config|help"},
    {NULL, 0, NULL},
};

void gs_cmd_config(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_arg *sub = &argv[1];
    if (!gs_subcommand_ok(c, argc, argv, config_subs, "CONFIG"))
        return;
    if (gs_arg_is(sub, "get")) {
        if (argc < 3)
            gs_error_arity(c, "config|get");
        else
            config_get(c, argc, argv);
    } else if (gs_arg_is(sub, "set")) {
        config_set(c, argc, argv);
    } else if (gs_arg_is(sub, "resetstat")) {
        if (argc != 2) {
            gs_error_arity(c, "config|resetstat");
            return;
        }
        for (unsigned d = 0; d < c->node->n_dbs; d++)
            gs_store_reset_stats(c->node->dbs[d].store);
        c->node->shared.stats.commands = c->node->shared.stats.error_replies = 0;
        gs_cmd_stats_reset(&c->node->cmdstats);
        for (unsigned i = 0; i < c->node->n_features; i++)
            if (c->node->features[i].ops->reset_stats)
                c->node->features[i].ops->reset_stats(c->node->features[i].self);
        gs_reply_ok(&c->w);
    } else if (gs_arg_is(sub, "rewrite")) {
        config_rewrite(c);
    } else if (gs_arg_is(sub, "help")) {
        static const char *const lines[] = {
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "HELP",
            "    Print this help.",
            NULL};
        gs_reply_help(c, "CONFIG", lines);
    } else {
        gs_unknown_subcommand(c, sub, "CONFIG");
    }
}
