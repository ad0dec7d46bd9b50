/*
 * Connection and server commands: PING, ECHO, AUTH, HELLO, QUIT, SELECT is
 * in cmd_keys.c; INFO, CONFIG, COMMAND, SHUTDOWN; CLIENT. Replies and
 * errors as Redis 7.0's server.c, config.c, networking.c and acl.c.
 *
 * None of these is on the hot path: they may format into the node's
 * scratch buffer and take O(clients) or O(options) time.
 */
#include "gridsync/commands/pubsub.h"
#include "gridsync/node/node.h"
#include "gridsync/origin/origin_node.h"

#include "core/error.h"
#include "core/log.h"
#include "gridsync/commands/glob.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static void sbprintf(struct core_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void sbprintf(struct core_buf *b, const char *fmt, ...)
{
    /* Formats straight into the buffer, however long the result: a line
     * cut short (a long client name in CLIENT LIST) would lose its '\n'
     * and run into the next client's line. */
    va_list ap;
    va_start(ap, fmt);
    char *dst = core_buf_reserve(b, 256);
    int n = dst ? vsnprintf(dst, b->cap - b->len, fmt, ap) : -1;
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= b->cap - b->len) {
        dst = core_buf_reserve(b, (size_t)n + 1);
        if (!dst)
            return;
        va_start(ap, fmt);
        vsnprintf(dst, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

/* The node's scratch buffer serves every client; one KEYS over a big key
 * space or a RENAME of a big value would otherwise keep it at that size
 * for good, outside used_memory and maxmemory. */
#define SCRATCH_KEEP (256 * 1024)

static void scratch_done(struct gs_node *n)
{
    if (n->scratch.cap > SCRATCH_KEEP)
        core_buf_free(&n->scratch);
}

static void unknown_subcommand(struct gs_client *c, const struct gs_arg *sub, const char *cmd)
{
    gs_errorf(c, "ERR unknown subcommand '%.*s'. Try %s HELP.",
              (int)(sub->len < 128 ? sub->len : 128), sub->p, cmd);
}

/* A container command's subcommand, with Redis 7.0's arity for it (its
 * commands.def): the same convention as the command table, counting the
 * container's name. */
struct subcommand {
    const char *name;
    int arity;
    const char *fullname; /* "client|list": arity errors and CLIENT LIST's cmd= */
};

/* Redis 7's processCommand for container commands: an unknown subcommand
 * is "unknown subcommand", a known one with the wrong argument count is
 * "wrong number of arguments for 'client|getname' command". Returns false
 * after replying with the error. */
static bool subcommand_ok(struct gs_client *c, size_t argc, struct gs_arg *argv,
                          const struct subcommand *table, const char *container)
{
    for (const struct subcommand *s = table; s->name; s++) {
        if (!gs_arg_is(&argv[1], s->name))
            continue;
        if ((s->arity > 0 && argc != (size_t)s->arity) ||
            (s->arity < 0 && argc < (size_t)-s->arity)) {
            gs_error_arity(c, s->fullname);
            return false;
        }
        c->last_cmd = s->fullname;
        return true;
    }
    unknown_subcommand(c, &argv[1], container);
    return false;
}

static void reply_help(struct gs_client *c, const char *cmd, const char *const *lines)
{
    size_t n = 0;
    while (lines[n])
        n++;
    gs_reply_array(&c->w, n + 1);
    char head[128];
    snprintf(head, sizeof(head),
             "%s <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", cmd);
    gs_reply_simple(&c->w, head, strlen(head));
    for (size_t i = 0; i < n; i++)
        gs_reply_simple(&c->w, lines[i], strlen(lines[i]));
}

/* ------------------------------------------------------------ PING .. */

void gs_cmd_ping(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (argc > 2) {
        gs_error_arity(c, "ping");
        return;
    }
    if (gs_pubsub_resp2_subscribed(c)) { /* Redis's pingCommand in subscribed mode */
        gs_reply_array(&c->w, 2);
        gs_reply_bulk(&c->w, "pong", 4);
        gs_reply_bulk(&c->w, argc == 1 ? "" : argv[1].p, argc == 1 ? 0 : argv[1].len);
    } else if (argc == 1)
        gs_reply_raw(&c->w, "+PONG\r\n", 7);
    else
        gs_reply_bulk(&c->w, argv[1].p, argv[1].len);
}

void gs_cmd_echo(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    gs_reply_bulk(&c->w, argv[1].p, argv[1].len);
}

/* TIME: the wall clock read now (not the loop's cached time), as two bulk
 * strings, seconds and microseconds. */
void gs_cmd_time(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    gs_reply_array(&c->w, 2);
    gs_reply_bulk_int(&c->w, (int64_t)ts.tv_sec);
    gs_reply_bulk_int(&c->w, (int64_t)(ts.tv_nsec / 1000));
}

void gs_cmd_quit(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    gs_reply_ok(&c->w);
    core_conn_close_after_reply(c->conn);
}

void gs_cmd_shutdown(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    for (size_t i = 1; i < argc; i++) {
        if (gs_arg_is(&argv[i], "abort")) {
            gs_error(c, "ERR No shutdown in progress.");
            return;
        }
        if (!gs_arg_is(&argv[i], "nosave") && !gs_arg_is(&argv[i], "save") &&
            !gs_arg_is(&argv[i], "now") && !gs_arg_is(&argv[i], "force")) {
            gs_error_syntax(c);
            return;
        }
    }
    /* As Redis: no reply on success; the connection closes with the rest. */
    CORE_WARN("User requested shutdown...");
    gs_node_stop(c->node);
}

/* ------------------------------------------------------- AUTH, HELLO */

/* Redis's validateClientName: printable ASCII without spaces. */
static bool valid_name(const struct gs_arg *a)
{
    for (size_t i = 0; i < a->len; i++)
        if (a->p[i] < '!' || a->p[i] > '~')
            return false;
    return true;
}

static char *dup_arg(const struct gs_arg *a)
{
    char *s = malloc(a->len + 1);
    if (s) {
        memcpy(s, a->p, a->len);
        s[a->len] = 0;
    }
    return s;
}

static void set_name(struct gs_client *c, const struct gs_arg *a)
{
    free(c->name);
    c->name = a->len ? dup_arg(a) : NULL;
}

/* The default user's credentials: with requirepass set, the password must
 * match; without, the default user has no password and any is accepted
 * (as Redis's "nopass"). Only the user "default" exists. */
static bool check_credentials(struct gs_client *c, const struct gs_arg *user,
                              const struct gs_arg *pass)
{
    const char *req = c->node->cfg.requirepass;
    if (user && !gs_arg_is(user, "default"))
        return false;
    if (!req[0])
        return true;
    size_t n = strlen(req);
    /* constant-time comparison, as Redis's time_independent_strcmp */
    unsigned diff = (unsigned)(n ^ pass->len);
    for (size_t i = 0; i < pass->len; i++)
        diff |= (unsigned char)pass->p[i] ^ (unsigned char)req[i % n];
    return diff == 0;
}

void gs_cmd_auth(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (argc > 3) {
        gs_error_syntax(c);
        return;
    }
    if (argc == 2 && !c->node->cfg.requirepass[0]) {
        gs_error(c, "ERR AUTH <password> called without any password configured for the "
                    "default user. Are you sure your configuration is correct?");
        return;
    }
    const struct gs_arg *user = argc == 3 ? &argv[1] : NULL;
    const struct gs_arg *pass = argc == 3 ? &argv[2] : &argv[1];
    if (!check_credentials(c, user, pass)) {
        gs_error(c, "WRONGPASS invalid username-password pair or user is disabled.");
        return;
    }
    c->authenticated = true;
    gs_reply_ok(&c->w);
}

void gs_cmd_hello(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t ver = 0;
    size_t j = 1;
    if (argc >= 2) {
        if (!gs_arg_int(c, &argv[1], &ver,
                        "ERR Protocol version is not an integer or out of range"))
            return;
        j = 2;
        if (ver < 2 || ver > 3) {
            gs_error(c, "NOPROTO unsupported protocol version");
            return;
        }
    }
    const struct gs_arg *user = NULL, *pass = NULL, *name = NULL;
    for (; j < argc; j++) {
        size_t more = argc - 1 - j;
        if (gs_arg_is(&argv[j], "auth") && more >= 2) {
            user = &argv[j + 1];
            pass = &argv[j + 2];
            j += 2;
        } else if (gs_arg_is(&argv[j], "setname") && more) {
            name = &argv[j + 1];
            if (!valid_name(name)) {
                gs_error(c, "ERR Client names cannot contain spaces, newlines or special "
                            "characters.");
                return;
            }
            j++;
        } else {
            gs_errorf(c, "ERR Syntax error in HELLO option '%.*s'", (int)argv[j].len, argv[j].p);
            return;
        }
    }
    if (user) {
        if (!check_credentials(c, user, pass)) {
            gs_error(c, "WRONGPASS invalid username-password pair or user is disabled.");
            return;
        }
        c->authenticated = true;
    }
    if (!c->authenticated && c->node->cfg.requirepass[0]) {
        gs_error(c, "NOAUTH HELLO must be called with the client already authenticated, "
                    "otherwise the HELLO AUTH <user> <pass> option can be used to "
                    "authenticate the client and select the RESP protocol version at the same "
                    "time");
        return;
    }
    if (name)
        set_name(c, name);
    if (ver)
        c->w.proto = (int)ver;
    struct gs_writer *w = &c->w;
    gs_reply_map(w, 7);
    gs_reply_bulk_cstr(w, "server");
    gs_reply_bulk_cstr(w, "redis");
    gs_reply_bulk_cstr(w, "version");
    gs_reply_bulk_cstr(w, GS_REDIS_VERSION);
    gs_reply_bulk_cstr(w, "proto");
    gs_reply_int(w, w->proto);
    gs_reply_bulk_cstr(w, "id");
    gs_reply_int(w, (int64_t)core_conn_id(c->conn));
    gs_reply_bulk_cstr(w, "mode");
    gs_reply_bulk_cstr(w, "standalone");
    gs_reply_bulk_cstr(w, "role");
    gs_reply_bulk_cstr(w, "master");
    gs_reply_bulk_cstr(w, "modules");
    gs_reply_array(w, 0);
}

/* ---------------------------------------------------------------- INFO */

static void human_bytes(char *out, size_t len, uint64_t n)
{
    /* Redis's bytesToHuman */
    double d = (double)n;
    if (n < 1024)
        snprintf(out, len, "%" PRIu64 "B", n);
    else if (n < 1024ULL * 1024)
        snprintf(out, len, "%.2fK", d / 1024);
    else if (n < 1024ULL * 1024 * 1024)
        snprintf(out, len, "%.2fM", d / (1024 * 1024));
    else
        snprintf(out, len, "%.2fG", d / (1024.0 * 1024 * 1024));
}

static bool want(size_t argc, struct gs_arg *argv, const char *section, bool dflt)
{
    if (argc < 2)
        return dflt;
    for (size_t i = 1; i < argc; i++) {
        if (gs_arg_is(&argv[i], section) || gs_arg_is(&argv[i], "all") ||
            gs_arg_is(&argv[i], "everything") || (dflt && gs_arg_is(&argv[i], "default")))
            return true;
    }
    return false;
}

struct buffer_max {
    size_t in, out;
};

static void buffer_max_of(struct core_conn *conn, void *arg)
{
    struct buffer_max *m = arg;
    size_t in = core_conn_input_capacity(conn), out = core_conn_output_pending(conn);
    if (in > m->in)
        m->in = in;
    if (out > m->out)
        m->out = out;
}

static int64_t clients_budget(const struct gs_node *n)
{
    int64_t b = 0;
    (void)gs_clients_budget_parse(n->cfg.maxmemory_clients, n->cfg.maxmemory, &b);
    return b;
}

static void info_text(struct gs_node *n, struct core_buf *b, size_t argc, struct gs_arg *argv)
{
    /* The node's figures: every database's together. */
    struct gs_store_stats st = {0};
    for (unsigned d = 0; d < n->n_dbs; d++) {
        struct gs_store_stats ds;
        gs_store_stats(n->dbs[d].store, &ds);
        st.used_memory += ds.used_memory;
        st.expired_keys += ds.expired_keys;
        st.evicted_keys += ds.evicted_keys;
        st.hits += ds.hits;
        st.misses += ds.misses;
    }
    struct core_server_stats ss;
    core_server_get_stats(n->srv, &ss);
    int64_t now = gs_node_now_ms(n);
    int64_t uptime = (now - n->start_wall_ms) / 1000;
    bool first = true;
#define SECTION(name)                                                                              \
    do {                                                                                           \
        sbprintf(b, "%s# %s\r\n", first ? "" : "\r\n", name);                                      \
        first = false;                                                                             \
    } while (0)
    if (want(argc, argv, "server", true)) {
        struct utsname u;
        uname(&u);
        SECTION("Server");
        sbprintf(b,
                 "redis_version:%s\r\ngridsync_version:%s\r\nredis_mode:%s\r\n"
                 "os:%s %s %s\r\narch_bits:%d\r\nmultiplexing_api:libuv\r\nprocess_id:%d\r\n"
                 "tcp_port:%lld\r\nuptime_in_seconds:%lld\r\nuptime_in_days:%lld\r\nhz:%lld\r\n"
                 "config_file:%s\r\n",
                 GS_REDIS_VERSION, GS_VERSION, n->cluster ? "cluster" : "standalone", u.sysname,
                 u.release, u.machine, (int)(sizeof(void *) * 8), (int)getpid(),
                 (long long)n->cfg.port, (long long)uptime, (long long)(uptime / 86400),
                 (long long)n->cfg.hz, n->config_file);
    }
    if (want(argc, argv, "clients", true)) {
        SECTION("Clients");
        struct buffer_max mx = {0, 0};
        core_server_foreach(n->srv, buffer_max_of, &mx);
        sbprintf(b,
                 "connected_clients:%" PRIu64 "\r\nmaxclients:%lld\r\n"
                 "client_recent_max_input_buffer:%zu\r\nclient_recent_max_output_buffer:%zu\r\n"
                 "blocked_clients:0\r\n",
                 ss.connected, (long long)n->cfg.maxclients, mx.in, mx.out);
    }
    if (want(argc, argv, "memory", true)) {
        char used[32], maxm[32];
        human_bytes(used, sizeof(used), st.used_memory);
        human_bytes(maxm, sizeof(maxm), (uint64_t)n->cfg.maxmemory);
        static const char *const pol[] = {"noeviction", "slru", "allkeys-lru"};
        SECTION("Memory");
        sbprintf(b,
                 "used_memory:%" PRIu64 "\r\nused_memory_human:%s\r\nmaxmemory:%lld\r\n"
                 "maxmemory_human:%s\r\nmaxmemory_policy:%s\r\nmem_clients_normal:%zu\r\n"
                 "maxmemory_clients:%lld\r\n",
                 st.used_memory, used, (long long)n->cfg.maxmemory, maxm,
                 pol[n->cfg.maxmemory_policy], core_server_clients_memory(n->srv),
                 (long long)clients_budget(n));
    }
    if (want(argc, argv, "persistence", true)) {
        SECTION("Persistence");
        sbprintf(b, "loading:0\r\nrdb_changes_since_last_save:0\r\naof_enabled:0\r\n");
    }
    if (want(argc, argv, "stats", true)) {
        SECTION("Stats");
        sbprintf(b,
                 "total_connections_received:%" PRIu64 "\r\ntotal_commands_processed:%" PRIu64
                 "\r\ntotal_net_input_bytes:%" PRIu64 "\r\ntotal_net_output_bytes:%" PRIu64
                 "\r\nrejected_connections:%" PRIu64 "\r\nexpired_keys:%" PRIu64
                 "\r\nevicted_keys:%" PRIu64 "\r\nkeyspace_hits:%" PRIu64
                 "\r\nkeyspace_misses:%" PRIu64 "\r\ntotal_error_replies:%" PRIu64
                 "\r\nclient_query_buffer_limit_disconnections:%" PRIu64
                 "\r\nclient_output_buffer_limit_disconnections:%" PRIu64
                 "\r\nevicted_clients:%" PRIu64 "\r\n",
                 ss.total_connections, n->stats.commands, ss.total_net_input_bytes,
                 ss.total_net_output_bytes, ss.rejected_connections, st.expired_keys,
                 st.evicted_keys, st.hits, st.misses, n->stats.error_replies,
                 ss.closed_by_query_limit, ss.closed_by_output_limit, ss.evicted_clients);
    }
    if (want(argc, argv, "replication", true)) {
        SECTION("Replication");
        sbprintf(b, "role:master\r\nconnected_slaves:0\r\n");
    }
    if (want(argc, argv, "cpu", true)) {
        /* Redis's "%ld.%06ld" of getrusage's times. */
        struct rusage self, children, thread;
        getrusage(RUSAGE_SELF, &self);
        getrusage(RUSAGE_CHILDREN, &children);
        getrusage(RUSAGE_THREAD, &thread);
        SECTION("CPU");
        sbprintf(b,
                 "used_cpu_sys:%ld.%06ld\r\nused_cpu_user:%ld.%06ld\r\n"
                 "used_cpu_sys_children:%ld.%06ld\r\nused_cpu_user_children:%ld.%06ld\r\n"
                 "used_cpu_sys_main_thread:%ld.%06ld\r\nused_cpu_user_main_thread:%ld.%06ld\r\n",
                 (long)self.ru_stime.tv_sec, (long)self.ru_stime.tv_usec,
                 (long)self.ru_utime.tv_sec, (long)self.ru_utime.tv_usec,
                 (long)children.ru_stime.tv_sec, (long)children.ru_stime.tv_usec,
                 (long)children.ru_utime.tv_sec, (long)children.ru_utime.tv_usec,
                 (long)thread.ru_stime.tv_sec, (long)thread.ru_stime.tv_usec,
                 (long)thread.ru_utime.tv_sec, (long)thread.ru_utime.tv_usec);
    }
    /* Redis 7.0's order: commandstats and latencystats only on request
     * (or "all"), errorstats by default. */
    if (want(argc, argv, "commandstats", false)) {
        SECTION("Commandstats");
        gs_cmd_stats_info_commands(&n->cmdstats, n->cmd_names, b);
    }
    if (want(argc, argv, "errorstats", true)) {
        SECTION("Errorstats");
        gs_cmd_stats_info_errors(&n->cmdstats, b);
    }
    if (want(argc, argv, "latencystats", false)) {
        SECTION("Latencystats");
        gs_cmd_stats_info_latency(&n->cmdstats, n->cmd_names, b);
    }
    if (want(argc, argv, "origin", true)) { /* gs-origin: the section writes its own header */
        sbprintf(b, "%s", first ? "" : "\r\n");
        first = false;
        gs_origin_node_info(n, b);
    }
    if (want(argc, argv, "cluster", true)) {
        /* Cluster clients (redis-py's RedisCluster) check this first. */
        SECTION("Cluster");
        sbprintf(b, "cluster_enabled:%d\r\n", n->cluster ? 1 : 0);
    }
    if (want(argc, argv, "keyspace", true)) {
        SECTION("Keyspace");
        for (unsigned d = 0; d < n->n_dbs; d++) {
            struct gs_store_stats ds;
            gs_store_stats(n->dbs[d].store, &ds);
            if (ds.keys)
                sbprintf(b, "db%u:keys=%" PRIu64 ",expires=%" PRIu64 ",avg_ttl=0\r\n", d, ds.keys,
                         ds.keys_with_expire);
        }
    }
#undef SECTION
}

void gs_cmd_info(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_node *n = c->node;
    n->scratch.len = 0;
    info_text(n, &n->scratch, argc, argv);
    if (n->scratch.oom) {
        core_buf_free(&n->scratch);
        gs_error_oom(c);
        return;
    }
    gs_reply_verbatim(&c->w, n->scratch.data ? n->scratch.data : "", n->scratch.len, "txt");
    scratch_done(n);
}

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
    const struct gs_arg *as_given[GS_NODE_NOPTS] = {NULL};
    bool match[GS_NODE_NOPTS] = {false};
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
    struct core_option dopts[GS_NODE_NOPTS];
    gs_config_defaults(&dflt);
    gs_config_bind(&dflt, dopts);
    char why[512];
    if (core_config_rewrite(n->opts, dopts, n->config_file, why, sizeof(why))) {
        CORE_WARN("CONFIG REWRITE failed: %s", why);
        gs_errorf(c, "ERR %s", why);
        return;
    }
    CORE_INFO("CONFIG REWRITE executed with success.");
    gs_reply_ok(&c->w);
}

static const struct subcommand config_subs[] = {
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
    if (!subcommand_ok(c, argc, argv, config_subs, "CONFIG"))
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
        c->node->stats.commands = c->node->stats.error_replies = 0;
        gs_cmd_stats_reset(&c->node->cmdstats);
        gs_origin_node_reset_stats(c->node); /* gs-origin */
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
        reply_help(c, "CONFIG", lines);
    } else {
        unknown_subcommand(c, sub, "CONFIG");
    }
}

/* ------------------------------------------------------------- COMMAND */

static size_t count_flags(unsigned f)
{
    return (size_t)__builtin_popcount(f);
}

static void reply_command_info(struct gs_client *c, const struct gs_command *cmd)
{
    struct gs_writer *w = &c->w;
    static const struct {
        unsigned flag;
        const char *name;
    } names[] = {
        {GS_CMD_WRITE, "write"}, {GS_CMD_READONLY, "readonly"}, {GS_CMD_DENYOOM, "denyoom"},
        {GS_CMD_ADMIN, "admin"}, {GS_CMD_NOSCRIPT, "noscript"}, {GS_CMD_LOADING, "loading"},
        {GS_CMD_STALE, "stale"}, {GS_CMD_FAST, "fast"},         {GS_CMD_NOAUTH, "no_auth"}};
    gs_reply_array(w, 10);
    gs_reply_bulk_cstr(w, cmd->name);
    gs_reply_int(w, cmd->arity);
    gs_reply_set(w, count_flags(cmd->flags));
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (cmd->flags & names[i].flag)
            gs_reply_simple(w, names[i].name, strlen(names[i].name));
    gs_reply_int(w, cmd->first_key);
    gs_reply_int(w, cmd->last_key);
    gs_reply_int(w, cmd->key_step);
    gs_reply_set(w, 0);   /* ACL categories */
    gs_reply_array(w, 0); /* tips */
    gs_reply_array(w, 0); /* key specs */
    gs_reply_array(w, 0); /* subcommands */
}

static void reply_command_docs(struct gs_client *c, const struct gs_command *cmd)
{
    struct gs_writer *w = &c->w;
    gs_reply_bulk_cstr(w, cmd->name);
    gs_reply_map(w, 3);
    gs_reply_bulk_cstr(w, "summary");
    gs_reply_bulk_cstr(w, cmd->summary);
    gs_reply_bulk_cstr(w, "since");
    gs_reply_bulk_cstr(w, cmd->since);
    gs_reply_bulk_cstr(w, "group");
    gs_reply_bulk_cstr(w, cmd->group);
}

static size_t command_count(void)
{
    size_t n = 0;
    while (gs_commands[n].name)
        n++;
    return n;
}

/* The ACL categories COMMAND LIST FILTERBY ACLCAT knows, derived from a
 * command's flags and group (there are no ACLs here; COMMAND INFO leaves
 * categories empty). */
static bool in_aclcat(const struct gs_command *cmd, const struct gs_arg *cat)
{
    return (gs_arg_is(cat, "read") && (cmd->flags & GS_CMD_READONLY)) ||
           (gs_arg_is(cat, "write") && (cmd->flags & GS_CMD_WRITE)) ||
           (gs_arg_is(cat, "fast") && (cmd->flags & GS_CMD_FAST)) ||
           (gs_arg_is(cat, "slow") && !(cmd->flags & GS_CMD_FAST)) ||
           (gs_arg_is(cat, "admin") && (cmd->flags & GS_CMD_ADMIN)) ||
           (gs_arg_is(cat, "dangerous") && (cmd->flags & GS_CMD_ADMIN)) ||
           (gs_arg_is(cat, "string") && strcmp(cmd->group, "string") == 0) ||
           (gs_arg_is(cat, "keyspace") && strcmp(cmd->group, "generic") == 0) ||
           (gs_arg_is(cat, "connection") && strcmp(cmd->group, "connection") == 0);
}

/* Redis 7.0's commandListCommand: COMMAND LIST [FILTERBY MODULE m |
 * ACLCAT c | PATTERN p]; any other shape is a syntax error. */
static void command_list(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    const struct gs_arg *module = NULL, *aclcat = NULL, *pattern = NULL;
    for (size_t i = 2; i < argc; i++) {
        if (gs_arg_is(&argv[i], "filterby") && argc - 1 - i == 2) {
            if (gs_arg_is(&argv[i + 1], "module"))
                module = &argv[i + 2];
            else if (gs_arg_is(&argv[i + 1], "aclcat"))
                aclcat = &argv[i + 2];
            else if (gs_arg_is(&argv[i + 1], "pattern"))
                pattern = &argv[i + 2];
            else {
                gs_error_syntax(c);
                return;
            }
            i += 2;
        } else {
            gs_error_syntax(c);
            return;
        }
    }
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            gs_reply_array(&c->w, n);
        for (const struct gs_command *cmd = gs_commands; cmd->name; cmd++) {
            if (module || (aclcat && !in_aclcat(cmd, aclcat)) ||
                (pattern &&
                 !gs_glob_match(pattern->p, pattern->len, cmd->name, strlen(cmd->name), true)))
                continue; /* no command comes from a module */
            if (pass == 0)
                n++;
            else
                gs_reply_bulk_cstr(&c->w, cmd->name);
        }
    }
}

/* Redis 7.0's getKeysSubcommandImpl: the keys of a full command line,
 * from the table's first/last/step positions. */
static void command_getkeys(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    const struct gs_command *cmd = gs_command_lookup(c->node, argv[2].p, argv[2].len);
    size_t n = argc - 2; /* the inner command's argc */
    if (!cmd) {
        gs_error(c, "ERR Invalid command specified");
        return;
    }
    if (cmd->first_key == 0) {
        gs_error(c, "ERR The command has no key arguments");
        return;
    }
    if ((cmd->arity > 0 && n != (size_t)cmd->arity) ||
        (cmd->arity < 0 && n < (size_t)-cmd->arity)) {
        gs_error(c, "ERR Invalid number of arguments specified for command");
        return;
    }
    size_t first = (size_t)cmd->first_key, step = (size_t)cmd->key_step;
    size_t last = cmd->last_key < 0 ? n - (size_t)-cmd->last_key : (size_t)cmd->last_key;
    if (last >= n) /* MSET a: a key without its value */
        last = n - 1;
    gs_reply_array(&c->w, (last - first) / step + 1);
    for (size_t i = first; i <= last; i += step)
        gs_reply_bulk(&c->w, argv[2 + i].p, argv[2 + i].len);
}

static const struct subcommand command_subs[] = {
    {"count", 2, "command|count"},
    {"list", -2, "command|list"},
    {"info", -2, "command|info"},
    {"docs", -2, "command|docs"},
    {"getkeys", -4, "command|getkeys"},
    {"help", 2, "command|help"},
    {NULL, 0, NULL},
};

void gs_cmd_command(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_node *n = c->node;
    if (argc == 1) {
        gs_reply_array(&c->w, command_count());
        for (const struct gs_command *cmd = gs_commands; cmd->name; cmd++)
            reply_command_info(c, cmd);
        return;
    }
    struct gs_arg *sub = &argv[1];
    if (!subcommand_ok(c, argc, argv, command_subs, "COMMAND"))
        return;
    if (gs_arg_is(sub, "count") && argc == 2) {
        gs_reply_int(&c->w, (int64_t)command_count());
    } else if (gs_arg_is(sub, "list")) {
        command_list(c, argc, argv);
    } else if (gs_arg_is(sub, "getkeys")) {
        command_getkeys(c, argc, argv);
    } else if (gs_arg_is(sub, "info")) {
        if (argc == 2) {
            gs_reply_array(&c->w, command_count());
            for (const struct gs_command *cmd = gs_commands; cmd->name; cmd++)
                reply_command_info(c, cmd);
            return;
        }
        gs_reply_array(&c->w, argc - 2);
        for (size_t i = 2; i < argc; i++) {
            const struct gs_command *cmd = gs_command_lookup(n, argv[i].p, argv[i].len);
            if (cmd)
                reply_command_info(c, cmd);
            else
                gs_reply_null(&c->w); /* Redis's addReplyNull: $-1 in RESP2 */
        }
    } else if (gs_arg_is(sub, "docs")) {
        if (argc == 2) {
            gs_reply_map(&c->w, command_count());
            for (const struct gs_command *cmd = gs_commands; cmd->name; cmd++)
                reply_command_docs(c, cmd);
            return;
        }
        size_t found = 0;
        for (size_t i = 2; i < argc; i++)
            found += gs_command_lookup(n, argv[i].p, argv[i].len) != NULL;
        gs_reply_map(&c->w, found);
        for (size_t i = 2; i < argc; i++) {
            const struct gs_command *cmd = gs_command_lookup(n, argv[i].p, argv[i].len);
            if (cmd)
                reply_command_docs(c, cmd);
        }
    } else if (gs_arg_is(sub, "help")) {
        static const char *const lines[] = {
            "(no subcommand)",
            "    Return details about all commands.",
            "COUNT",
            "    Return the total number of commands.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about commands.",
            "INFO [<command-name> ...]",
            "    Return details about the given commands.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]",
            "    Return a list of all commands in this Redis server.",
            NULL};
        reply_help(c, "COMMAND", lines);
    } else {
        unknown_subcommand(c, sub, "COMMAND");
    }
}

/* -------------------------------------------------------------- CLIENT */

static void client_line(struct gs_node *n, struct core_conn *conn, struct core_buf *b)
{
    struct gs_client *c = core_conn_data(conn);
    uint64_t now = uv_now(n->loop);
    size_t qbuf = core_conn_input_pending(conn), qcap = core_conn_input_capacity(conn);
    size_t omem = core_conn_output_pending(conn);
    /* Redis's getClientInfoString: x = in MULTI, d = a watched key changed. */
    char flags[4], *f = flags;
    long long multi = -1;
    size_t multi_mem = 0;
    if (c && c->multi.active) {
        *f++ = 'x';
        multi = (long long)c->multi.count;
        multi_mem = c->multi.queue.cap;
    }
    size_t nsub = 0, npsub = 0, nssub = 0;
    if (c)
        gs_pubsub_counts(c, &nsub, &npsub, &nssub);
    if (nsub + npsub + nssub)
        *f++ = 'P';
    if (c && c->multi.watch_dirty)
        *f++ = 'd';
    if (f == flags)
        *f++ = 'N';
    *f = 0;
    sbprintf(b,
             "id=%llu addr=%s laddr=%s fd=%d name=%s age=%llu idle=%llu flags=%s db=%u sub=%zu "
             "psub=%zu ssub=%zu multi=%lld qbuf=%zu qbuf-free=%zu argv-mem=0 multi-mem=%zu rbs=%zu "
             "rbp=%zu obl=0 oll=0 omem=%zu tot-mem=%zu events=r cmd=%s user=default redir=-1 "
             "resp=%d lib-name=%s lib-ver=%s\n",
             (unsigned long long)core_conn_id(conn), core_conn_peer(conn), core_conn_local(conn),
             core_conn_fd(conn), c && c->name ? c->name : "",
             (unsigned long long)((now - core_conn_created_ms(conn)) / 1000),
             (unsigned long long)((now - core_conn_last_active_ms(conn)) / 1000), flags,
             c && c->db ? c->db->id : 0u, nsub, npsub, nssub, multi, qbuf, qcap - qbuf, multi_mem,
             qcap, qcap, omem, qcap + omem + multi_mem + sizeof(*c), c ? c->last_cmd : "NULL",
             c ? c->w.proto : 2, c && c->lib_name ? c->lib_name : "",
             c && c->lib_ver ? c->lib_ver : "");
}

struct list_ctx {
    struct gs_node *node;
    struct core_buf *buf;
};

static void list_one(struct core_conn *conn, void *arg)
{
    struct list_ctx *ctx = arg;
    client_line(ctx->node, conn, ctx->buf);
}

/* Redis's getClientTypeByName: every client here is a normal one, the
 * other types are valid names that match nobody. Returns false for an
 * unknown name. */
static bool client_type(const struct gs_arg *a, bool *normal)
{
    *normal = gs_arg_is(a, "normal");
    return *normal || gs_arg_is(a, "slave") || gs_arg_is(a, "replica") || gs_arg_is(a, "pubsub") ||
           gs_arg_is(a, "master");
}

/* Redis 7.0's CLIENT LIST [TYPE t | ID id ...]: IDs are listed in the
 * order given (an unknown ID is skipped). */
static void client_list(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_node *n = c->node;
    struct list_ctx ctx = {n, &n->scratch};
    bool normal = true;
    n->scratch.len = 0;
    if (argc == 4 && gs_arg_is(&argv[2], "type")) {
        if (!client_type(&argv[3], &normal)) {
            gs_errorf(c, "ERR Unknown client type '%.*s'", (int)argv[3].len, argv[3].p);
            return;
        }
        if (normal)
            core_server_foreach(n->srv, list_one, &ctx);
    } else if (argc > 3 && gs_arg_is(&argv[2], "id")) {
        for (size_t i = 3; i < argc; i++) {
            int64_t id;
            if (!gs_arg_int(c, &argv[i], &id, "ERR Invalid client ID"))
                return;
        }
        for (size_t i = 3; i < argc; i++) {
            int64_t id;
            gs_string2ll(argv[i].p, argv[i].len, &id);
            struct core_conn *conn = id > 0 ? core_server_find(n->srv, (uint64_t)id) : NULL;
            if (conn)
                client_line(n, conn, &n->scratch);
        }
    } else if (argc != 2) {
        gs_error_syntax(c);
        return;
    } else {
        core_server_foreach(n->srv, list_one, &ctx);
    }
    if (n->scratch.oom) {
        core_buf_free(&n->scratch);
        gs_error_oom(c);
        return;
    }
    gs_reply_verbatim(&c->w, n->scratch.data ? n->scratch.data : "", n->scratch.len, "txt");
    scratch_done(n);
}

struct kill_ctx {
    struct gs_client *self;
    int64_t id; /* 0 = any */
    const struct gs_arg *addr, *laddr;
    bool skipme;
    bool nobody; /* a filter no client here can match */
    int64_t killed;
};

static bool arg_equals_str(const struct gs_arg *a, const char *s)
{
    return a->len == strlen(s) && memcmp(a->p, s, a->len) == 0;
}

static void kill_one(struct core_conn *conn, void *arg)
{
    struct kill_ctx *k = arg;
    if (k->nobody)
        return;
    if (k->id && (uint64_t)k->id != core_conn_id(conn))
        return;
    if (k->addr && !arg_equals_str(k->addr, core_conn_peer(conn)))
        return;
    if (k->laddr && !arg_equals_str(k->laddr, core_conn_local(conn)))
        return;
    if (conn == k->self->conn) {
        if (k->skipme)
            return;
        core_conn_close_after_reply(conn); /* after this command's reply */
    } else {
        core_conn_close(conn);
    }
    k->killed++;
}

static void client_kill(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct kill_ctx k = {.self = c, .skipme = true};
    if (argc == 3) { /* the old form: CLIENT KILL addr:port */
        k.addr = &argv[2];
        k.skipme = false;
        core_server_foreach(c->node->srv, kill_one, &k);
        if (k.killed)
            gs_reply_ok(&c->w);
        else
            gs_error(c, "ERR No such client");
        return;
    }
    if (argc % 2 != 0) {
        gs_error_syntax(c);
        return;
    }
    for (size_t i = 2; i < argc; i += 2) {
        struct gs_arg *v = &argv[i + 1];
        if (gs_arg_is(&argv[i], "id")) {
            if (!gs_string2ll(v->p, v->len, &k.id) || k.id <= 0) {
                gs_error(c, "ERR client-id should be greater than 0");
                return;
            }
        } else if (gs_arg_is(&argv[i], "addr")) {
            k.addr = v;
        } else if (gs_arg_is(&argv[i], "laddr")) {
            k.laddr = v;
        } else if (gs_arg_is(&argv[i], "skipme")) {
            if (gs_arg_is(v, "yes"))
                k.skipme = true;
            else if (gs_arg_is(v, "no"))
                k.skipme = false;
            else {
                gs_error_syntax(c);
                return;
            }
        } else if (gs_arg_is(&argv[i], "user")) {
            if (!gs_arg_is(v, "default")) {
                gs_errorf(c, "ERR No such user '%.*s'", (int)v->len, v->p);
                return;
            }
        } else if (gs_arg_is(&argv[i], "type")) {
            bool normal;
            if (!client_type(v, &normal)) {
                gs_errorf(c, "ERR Unknown client type '%.*s'", (int)v->len, v->p);
                return;
            }
            if (!normal)
                k.nobody = true; /* no replica or pubsub clients here */
        } else {
            gs_error_syntax(c);
            return;
        }
    }
    core_server_foreach(c->node->srv, kill_one, &k);
    gs_reply_int(&c->w, k.killed);
}

static const struct subcommand client_subs[] = {
    {"id", 2, "client|id"},
    {"setname", 3, "client|setname"},
    {"getname", 2, "client|getname"},
    {"setinfo", 4, "client|setinfo"},
    {"list", -2, "client|list"},
    {"info", 2, "client|info"},
    {"kill", -3, "client|kill"},
    {"help", 2, "client|help"},
    {"no-evict", 3, "client|no-evict"},
    {"reply", 3, "client|reply"},
    {NULL, 0, NULL},
};

void gs_cmd_client(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_node *n = c->node;
    struct gs_arg *sub = &argv[1];
    if (!subcommand_ok(c, argc, argv, client_subs, "CLIENT"))
        return;
    if (gs_arg_is(sub, "id") && argc == 2) {
        gs_reply_int(&c->w, (int64_t)core_conn_id(c->conn));
    } else if (gs_arg_is(sub, "setname")) {
        if (argc != 3) {
            gs_error_arity(c, "client|setname");
            return;
        }
        if (!valid_name(&argv[2])) {
            gs_error(c, "ERR Client names cannot contain spaces, newlines or special characters.");
            return;
        }
        set_name(c, &argv[2]);
        gs_reply_ok(&c->w);
    } else if (gs_arg_is(sub, "getname") && argc == 2) {
        if (c->name)
            gs_reply_bulk_cstr(&c->w, c->name);
        else
            gs_reply_null(&c->w);
    } else if (gs_arg_is(sub, "setinfo")) {
        if (argc != 4) {
            gs_error_arity(c, "client|setinfo");
            return;
        }
        char **slot;
        if (gs_arg_is(&argv[2], "lib-name"))
            slot = &c->lib_name;
        else if (gs_arg_is(&argv[2], "lib-ver"))
            slot = &c->lib_ver;
        else {
            gs_errorf(c, "ERR Unrecognized option '%.*s'", (int)argv[2].len, argv[2].p);
            return;
        }
        if (!valid_name(&argv[3])) {
            gs_errorf(c, "ERR %.*s cannot contain spaces, newlines or special characters.",
                      (int)argv[2].len, argv[2].p);
            return;
        }
        free(*slot);
        *slot = argv[3].len ? dup_arg(&argv[3]) : NULL;
        gs_reply_ok(&c->w);
    } else if (gs_arg_is(sub, "list")) {
        client_list(c, argc, argv);
    } else if (gs_arg_is(sub, "info") && argc == 2) {
        n->scratch.len = 0;
        client_line(n, c->conn, &n->scratch);
        gs_reply_verbatim(&c->w, n->scratch.data ? n->scratch.data : "", n->scratch.len, "txt");
        scratch_done(n);
    } else if (gs_arg_is(sub, "kill")) {
        if (argc < 3) {
            gs_error_arity(c, "client|kill");
            return;
        }
        client_kill(c, argc, argv);
    } else if (gs_arg_is(sub, "no-evict") && argc == 3) {
        /* Redis 7's CLIENT NO-EVICT: maxmemory-clients never picks it. */
        if (!gs_arg_is(&argv[2], "on") && !gs_arg_is(&argv[2], "off")) {
            gs_error_syntax(c);
            return;
        }
        c->no_evict = gs_arg_is(&argv[2], "on");
        core_conn_set_no_evict(c->conn, c->no_evict);
        gs_reply_ok(&c->w);
    } else if (gs_arg_is(sub, "reply") && argc == 3) {
        /* Redis's CLIENT REPLY: OFF and SKIP answer nothing; gs_execute
         * drops the replies (node.h). */
        if (gs_arg_is(&argv[2], "on")) {
            c->reply_off = c->reply_skip = c->reply_skip_next = false;
            gs_reply_ok(&c->w);
        } else if (gs_arg_is(&argv[2], "off")) {
            c->reply_off = true;
        } else if (gs_arg_is(&argv[2], "skip")) {
            if (!c->reply_off)
                c->reply_skip_next = true;
        } else {
            gs_error_syntax(c);
        }
    } else if (gs_arg_is(sub, "help") && argc == 2) {
        static const char *const lines[] = {
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port> | <option> <value> [...]",
            "    Kill connections (ID, ADDR, LADDR, SKIPME, USER).",
            "LIST [ID <id> ...]",
            "    Return information about client connections.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETINFO <LIB-NAME|LIB-VER> <value>",
            "    Set client library information.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            NULL};
        reply_help(c, "CLIENT", lines);
    } else {
        unknown_subcommand(c, sub, "CLIENT");
    }
}
