/*
 * Pub/Sub commands and the node's subscription registry (see pubsub.h),
 * following Redis 7.0's pubsub.c: the same replies (RESP2 arrays, RESP3
 * push messages), counts and error texts.
 *
 * Three namespaces share one structure (enum kind): channels (SUBSCRIBE,
 * PUBLISH), patterns (PSUBSCRIBE, matched against every PUBLISH with
 * gs_glob_match) and shard channels (SSUBSCRIBE, SPUBLISH: in cluster mode
 * routed to the node that serves the channel's slot, as keys are). Each is
 * a chained hash table of `struct chan`, each chan holding its
 * subscribers in subscription order; each subscribed client holds the
 * chans it is on, in order, so unsubscribing everything and closing are
 * O(subscriptions).
 */
#include "gridsync/commands/pubsub.h"

#include "core/error.h"
#include "core/hash.h"
#include "gridsync/commands/glob.h"
#include "gridsync/client/node_ctx.h"
#include "gridsync/commands/cmd_server.h"
#include "gridsync/commands/commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kind { CHANNEL, PATTERN, SHARD, NKINDS };

struct chan {
    struct chan *next; /* bucket chain */
    uint64_t hash;
    struct gs_client **subs;
    size_t nsubs, cap;
    size_t len;
    char name[];
};

struct table {
    struct chan **buckets;
    size_t nbuckets; /* a power of two, or 0 before the first insert */
    size_t count;
};

struct sublist {
    struct chan **v;
    size_t n, cap;
};

struct gs_subscriber {
    struct sublist kind[NKINDS];
    uint64_t mark; /* the delivery this client was last queued for a flush in */
};

struct gs_pubsub {
    struct table t[NKINDS];
    uint64_t seed;
    uint64_t epoch;           /* one per delivery (invariant 3) */
    struct gs_client **flush; /* clients that got a message in this delivery */
    size_t nflush, flush_cap;
};

int gs_pubsub_new(struct gs_pubsub **out)
{
    struct gs_pubsub *ps = calloc(1, sizeof(*ps));
    if (!ps)
        return CORE_ENOMEM;
    ps->seed = 0x9e3779b97f4a7c15ULL ^ (uint64_t)(uintptr_t)ps;
    *out = ps;
    return 0;
}

static void chan_free(struct chan *ch)
{
    free(ch->subs);
    free(ch);
}

void gs_pubsub_free(struct gs_pubsub *ps)
{
    if (!ps)
        return;
    for (int k = 0; k < NKINDS; k++) {
        struct table *t = &ps->t[k];
        for (size_t i = 0; i < t->nbuckets; i++) {
            for (struct chan *ch = t->buckets[i], *next; ch; ch = next) {
                next = ch->next;
                chan_free(ch);
            }
        }
        free(t->buckets);
    }
    free(ps->flush);
    free(ps);
}

/* ------------------------------------------------------------- tables */

static struct chan *table_find(struct gs_pubsub *ps, struct table *t, const char *name, size_t len,
                               uint64_t *hash)
{
    *hash = core_hash64(name, len, ps->seed);
    if (!t->nbuckets)
        return NULL;
    for (struct chan *ch = t->buckets[*hash & (t->nbuckets - 1)]; ch; ch = ch->next)
        if (ch->hash == *hash && ch->len == len && memcmp(ch->name, name, len) == 0)
            return ch;
    return NULL;
}

static int table_grow(struct table *t)
{
    size_t nb = t->nbuckets ? t->nbuckets * 2 : 16;
    struct chan **b = calloc(nb, sizeof(*b));
    if (!b)
        return CORE_ENOMEM;
    for (size_t i = 0; i < t->nbuckets; i++) {
        for (struct chan *ch = t->buckets[i], *next; ch; ch = next) {
            next = ch->next;
            ch->next = b[ch->hash & (nb - 1)];
            b[ch->hash & (nb - 1)] = ch;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = nb;
    return 0;
}

static struct chan *table_add(struct table *t, const char *name, size_t len, uint64_t hash)
{
    if (t->count >= t->nbuckets && table_grow(t))
        return NULL;
    struct chan *ch = calloc(1, sizeof(*ch) + len + 1);
    if (!ch)
        return NULL;
    ch->hash = hash;
    ch->len = len;
    memcpy(ch->name, name, len);
    size_t i = hash & (t->nbuckets - 1);
    ch->next = t->buckets[i];
    t->buckets[i] = ch;
    t->count++;
    return ch;
}

static void table_remove(struct table *t, struct chan *ch)
{
    struct chan **pp = &t->buckets[ch->hash & (t->nbuckets - 1)];
    while (*pp != ch)
        pp = &(*pp)->next;
    *pp = ch->next;
    t->count--;
    chan_free(ch);
}

static int grow(void **v, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 4;
    while (nc < need)
        nc *= 2;
    void *p = realloc(*v, nc * size);
    if (!p)
        return CORE_ENOMEM;
    *v = p;
    *cap = nc;
    return 0;
}

/* -------------------------------------------------------- subscribers */

static size_t count_of(const struct gs_client *c, enum kind k)
{
    return c->sub ? c->sub->kind[k].n : 0;
}

static size_t total(const struct gs_client *c)
{
    return count_of(c, CHANNEL) + count_of(c, PATTERN) + count_of(c, SHARD);
}

/* What SUBSCRIBE/PSUBSCRIBE replies count (Redis's
 * clientSubscriptionsCount), and SSUBSCRIBE's (shard channels only). */
static size_t reply_count(const struct gs_client *c, enum kind k)
{
    return k == SHARD ? count_of(c, SHARD) : count_of(c, CHANNEL) + count_of(c, PATTERN);
}

static void apply_limit(struct gs_client *c)
{
    if (total(c)) {
        const struct gs_obuf_limit *l = &c->node->cfg.obuf[GS_CLASS_PUBSUB];
        core_conn_set_output_limit(c->conn, l->hard, l->soft, l->soft_seconds);
    } else {
        core_conn_set_output_limit(c->conn, -1, 0, 0); /* the server's again */
    }
}

/* Subscribe c to name; false if it already was (or out of memory: then
 * *oom is set). */
static bool subscribe(struct gs_client *c, enum kind k, const char *name, size_t len, bool *oom)
{
    struct gs_pubsub *ps = c->node->pubsub;
    if (!c->sub && !(c->sub = calloc(1, sizeof(*c->sub)))) {
        *oom = true;
        return false;
    }
    uint64_t h;
    struct chan *ch = table_find(ps, &ps->t[k], name, len, &h);
    if (ch) {
        for (size_t i = 0; i < ch->nsubs; i++)
            if (ch->subs[i] == c)
                return false;
    } else if (!(ch = table_add(&ps->t[k], name, len, h))) {
        *oom = true;
        return false;
    }
    struct sublist *l = &c->sub->kind[k];
    if (grow((void **)&ch->subs, &ch->cap, ch->nsubs + 1, sizeof(*ch->subs)) ||
        grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v))) {
        if (!ch->nsubs)
            table_remove(&ps->t[k], ch);
        *oom = true;
        return false;
    }
    ch->subs[ch->nsubs++] = c;
    l->v[l->n++] = ch;
    if (total(c) == 1)
        apply_limit(c);
    return true;
}

/* Take c off ch (the i-th entry of its list of kind k). */
static void unsubscribe_at(struct gs_client *c, enum kind k, size_t i)
{
    struct sublist *l = &c->sub->kind[k];
    struct chan *ch = l->v[i];
    memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof(*l->v));
    l->n--;
    for (size_t j = 0; j < ch->nsubs; j++) {
        if (ch->subs[j] == c) {
            /* Keeps arrival order: delivery follows subscription order. */
            memmove(&ch->subs[j], &ch->subs[j + 1], (ch->nsubs - j - 1) * sizeof(*ch->subs));
            ch->nsubs--;
            break;
        }
    }
    if (!ch->nsubs)
        table_remove(&c->node->pubsub->t[k], ch);
}

static bool unsubscribe(struct gs_client *c, enum kind k, const char *name, size_t len)
{
    if (!c->sub)
        return false;
    struct sublist *l = &c->sub->kind[k];
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i]->len == len && memcmp(l->v[i]->name, name, len) == 0) {
            unsubscribe_at(c, k, i);
            if (total(c) == 0)
                apply_limit(c);
            return true;
        }
    }
    return false;
}

void gs_pubsub_client_closed(struct gs_client *c)
{
    if (!c->sub)
        return;
    for (int k = 0; k < NKINDS; k++) {
        while (c->sub->kind[k].n)
            unsubscribe_at(c, (enum kind)k, c->sub->kind[k].n - 1);
        free(c->sub->kind[k].v);
    }
    /* A delivery in progress may have queued c for a flush. */
    struct gs_pubsub *ps = c->node->pubsub;
    for (size_t i = 0; i < ps->nflush; i++)
        if (ps->flush[i] == c)
            ps->flush[i] = NULL;
    free(c->sub);
    c->sub = NULL;
}

void gs_pubsub_counts(const struct gs_client *c, size_t *channels, size_t *patterns, size_t *shard)
{
    *channels = count_of(c, CHANNEL);
    *patterns = count_of(c, PATTERN);
    *shard = count_of(c, SHARD);
}

bool gs_pubsub_resp2_subscribed(const struct gs_client *c)
{
    return c->w.proto == 2 && total(c) > 0;
}

bool gs_pubsub_refuses(struct gs_client *c, const struct gs_command *cmd)
{
    if (!gs_pubsub_resp2_subscribed(c))
        return false;
    static const char *const allowed[] = {"ping",         "subscribe",    "ssubscribe",
                                          "unsubscribe",  "sunsubscribe", "psubscribe",
                                          "punsubscribe", "quit",         "reset"};
    for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
        if (strcmp(cmd->name, allowed[i]) == 0)
            return false;
    gs_errorf(c,
              "ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
              "RESET are allowed in this context",
              cmd->name);
    return true;
}

void gs_pubsub_apply_limits(struct gs_node *n)
{
    struct gs_pubsub *ps = n->pubsub;
    for (int k = 0; k < NKINDS; k++)
        for (size_t i = 0; i < ps->t[k].nbuckets; i++)
            for (struct chan *ch = ps->t[k].buckets[i]; ch; ch = ch->next)
                for (size_t j = 0; j < ch->nsubs; j++)
                    apply_limit(ch->subs[j]);
}

/* ----------------------------------------------------------- delivery */

static void queue_flush(struct gs_pubsub *ps, struct gs_client *s)
{
    if (s->sub->mark == ps->epoch)
        return;
    if (grow((void **)&ps->flush, &ps->flush_cap, ps->nflush + 1, sizeof(*ps->flush))) {
        core_conn_flush(s->conn); /* no room to defer: this one may close now */
        return;
    }
    s->sub->mark = ps->epoch;
    ps->flush[ps->nflush++] = s;
}

size_t gs_pubsub_publish(struct gs_node *n, const char *chname, size_t chlen, const char *msg,
                         size_t msglen, bool shard)
{
    struct gs_pubsub *ps = n->pubsub;
    size_t receivers = 0;
    ps->epoch++;
    ps->nflush = 0;
    uint64_t h;
    struct chan *ch = table_find(ps, &ps->t[shard ? SHARD : CHANNEL], chname, chlen, &h);
    for (size_t i = 0; ch && i < ch->nsubs; i++) {
        struct gs_client *s = ch->subs[i];
        receivers++;
        if (s->reply_off) /* CLIENT REPLY OFF silences messages too (Redis 7.0) */
            continue;
        gs_reply_push(&s->w, 3);
        gs_reply_bulk_cstr(&s->w, shard ? "smessage" : "message");
        gs_reply_bulk(&s->w, chname, chlen);
        gs_reply_bulk(&s->w, msg, msglen);
        queue_flush(ps, s);
    }
    struct table *pt = &ps->t[PATTERN];
    for (size_t b = 0; !shard && b < pt->nbuckets; b++) {
        for (struct chan *p = pt->buckets[b]; p; p = p->next) {
            if (!gs_glob_match(p->name, p->len, chname, chlen, false))
                continue;
            for (size_t i = 0; i < p->nsubs; i++) {
                struct gs_client *s = p->subs[i];
                receivers++;
                if (s->reply_off)
                    continue;
                gs_reply_push(&s->w, 4);
                gs_reply_bulk_cstr(&s->w, "pmessage");
                gs_reply_bulk(&s->w, p->name, p->len);
                gs_reply_bulk(&s->w, chname, chlen);
                gs_reply_bulk(&s->w, msg, msglen);
                queue_flush(ps, s);
            }
        }
    }
    /* Invariant 3: only now may a flush close a subscriber (its on_close
     * clears its slot in ps->flush). */
    for (size_t i = 0; i < ps->nflush; i++)
        if (ps->flush[i])
            core_conn_flush(ps->flush[i]->conn);
    ps->nflush = 0;
    return receivers;
}

/* ----------------------------------------------------------- commands */

static const char *const kind_sub[] = {"subscribe", "psubscribe", "ssubscribe"};
static const char *const kind_unsub[] = {"unsubscribe", "punsubscribe", "sunsubscribe"};

static void reply_event(struct gs_client *c, const char *event, const char *name, size_t len,
                        size_t count)
{
    gs_reply_push(&c->w, 3);
    gs_reply_bulk_cstr(&c->w, event);
    if (name)
        gs_reply_bulk(&c->w, name, len);
    else
        gs_reply_null(&c->w);
    gs_reply_int(&c->w, (int64_t)count);
}

static void subscribe_cmd(struct gs_client *c, size_t argc, struct gs_arg *argv, enum kind k)
{
    for (size_t i = 1; i < argc; i++) {
        bool oom = false;
        subscribe(c, k, argv[i].p, argv[i].len, &oom);
        if (oom) {
            gs_error_oom(c);
            return;
        }
        reply_event(c, kind_sub[k], argv[i].p, argv[i].len, reply_count(c, k));
    }
}

static void unsubscribe_cmd(struct gs_client *c, size_t argc, struct gs_arg *argv, enum kind k)
{
    if (argc > 1) {
        for (size_t i = 1; i < argc; i++) {
            unsubscribe(c, k, argv[i].p, argv[i].len);
            reply_event(c, kind_unsub[k], argv[i].p, argv[i].len, reply_count(c, k));
        }
        return;
    }
    /* Every subscription of this kind, oldest first; with none, one reply
     * with a null name (Redis's pubsubUnsubscribeAll*). */
    if (count_of(c, k) == 0) {
        reply_event(c, kind_unsub[k], NULL, 0, reply_count(c, k));
        return;
    }
    while (count_of(c, k)) {
        struct chan *ch = c->sub->kind[k].v[0];
        /* The name outlives unsubscribe_at only if copied: the chan may go. */
        char small[256];
        char *name = ch->len < sizeof(small) ? small : malloc(ch->len);
        if (!name) {
            gs_error_oom(c);
            return;
        }
        size_t len = ch->len;
        memcpy(name, ch->name, len);
        unsubscribe_at(c, k, 0);
        if (total(c) == 0)
            apply_limit(c);
        reply_event(c, kind_unsub[k], name, len, reply_count(c, k));
        if (name != small)
            free(name);
    }
}

size_t gs_pubsub_shard_drop(struct gs_node *n, bool (*drop)(void *arg, const char *ch, size_t len),
                            void *arg)
{
    struct gs_pubsub *ps = n->pubsub;
    struct table *t = &ps->t[SHARD];
    size_t removed = 0;
    ps->epoch++;
    ps->nflush = 0;
    for (size_t b = 0; b < t->nbuckets; b++) {
        for (struct chan *ch = t->buckets[b], *next; ch; ch = next) {
            next = ch->next;
            if (!drop(arg, ch->name, ch->len))
                continue;
            removed++;
            /* The last unsubscribe frees ch: its name is copied first
             * (ch->name is NUL-terminated, table_add). */
            size_t len = ch->len;
            char small[256];
            char *name = len < sizeof(small) ? small : malloc(len + 1);
            if (!name)
                continue; /* out of memory: kept, tried again next time */
            memcpy(name, ch->name, len);
            while (ch) {
                struct gs_client *s = ch->subs[0];
                bool last = ch->nsubs == 1;
                struct sublist *l = &s->sub->kind[SHARD];
                size_t i = 0;
                while (l->v[i] != ch)
                    i++;
                unsubscribe_at(s, SHARD, i);
                if (total(s) == 0)
                    apply_limit(s);
                if (!s->reply_off) {
                    reply_event(s, kind_unsub[SHARD], name, len, reply_count(s, SHARD));
                    queue_flush(ps, s);
                }
                if (last)
                    ch = NULL;
            }
            if (name != small)
                free(name);
        }
    }
    /* Invariant 3: flushes (which may close a client) after the walk. */
    for (size_t i = 0; i < ps->nflush; i++)
        if (ps->flush[i])
            core_conn_flush(ps->flush[i]->conn);
    ps->nflush = 0;
    return removed;
}

void gs_cmd_subscribe(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    subscribe_cmd(c, argc, argv, CHANNEL);
}

void gs_cmd_psubscribe(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    subscribe_cmd(c, argc, argv, PATTERN);
}

void gs_cmd_ssubscribe(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    subscribe_cmd(c, argc, argv, SHARD);
}

void gs_cmd_unsubscribe(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    unsubscribe_cmd(c, argc, argv, CHANNEL);
}

void gs_cmd_punsubscribe(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    unsubscribe_cmd(c, argc, argv, PATTERN);
}

void gs_cmd_sunsubscribe(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    unsubscribe_cmd(c, argc, argv, SHARD);
}

void gs_cmd_publish(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    size_t n = gs_pubsub_publish(c->node, argv[1].p, argv[1].len, argv[2].p, argv[2].len, false);
    gs_reply_int(&c->w, (int64_t)n);
}

void gs_cmd_spublish(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    gs_reply_int(&c->w, (int64_t)gs_pubsub_publish(c->node, argv[1].p, argv[1].len, argv[2].p,
                                                   argv[2].len, true));
}

/* PUBSUB CHANNELS / SHARDCHANNELS [pattern] */
static void list_channels(struct gs_client *c, enum kind k, const struct gs_arg *pattern)
{
    struct table *t = &c->node->pubsub->t[k];
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            gs_reply_array(&c->w, n);
        for (size_t b = 0; b < t->nbuckets; b++) {
            for (struct chan *ch = t->buckets[b]; ch; ch = ch->next) {
                if (pattern && !gs_glob_match(pattern->p, pattern->len, ch->name, ch->len, false))
                    continue;
                if (pass == 0)
                    n++;
                else
                    gs_reply_bulk(&c->w, ch->name, ch->len);
            }
        }
    }
}

static void numsub(struct gs_client *c, size_t argc, struct gs_arg *argv, enum kind k)
{
    struct gs_pubsub *ps = c->node->pubsub;
    /* Redis 7.0: a flat array [channel, count, ...], in RESP3 too. */
    gs_reply_array(&c->w, 2 * (argc - 2));
    for (size_t i = 2; i < argc; i++) {
        uint64_t h;
        struct chan *ch = table_find(ps, &ps->t[k], argv[i].p, argv[i].len, &h);
        gs_reply_bulk(&c->w, argv[i].p, argv[i].len);
        gs_reply_int(&c->w, ch ? (int64_t)ch->nsubs : 0);
    }
}

void gs_cmd_pubsub(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    const struct gs_arg *sub = &argv[1];
    if (gs_arg_is(sub, "help") && argc == 2) {
        gs_subcommand_stat(c, "pubsub|help", GS_SUB_RAN);
        static const char *const lines[] = {
            "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            ("    Return the currently active shard level channels matching a <pattern> (default: "
             "'*')."),
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
            "HELP",
            "    Prints this help.",
        };
        gs_reply_array(&c->w, sizeof(lines) / sizeof(lines[0]));
        for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
            gs_reply_simple(&c->w, lines[i], strlen(lines[i]));
    } else if (gs_arg_is(sub, "channels") && argc <= 3) {
        gs_subcommand_stat(c, "pubsub|channels", GS_SUB_RAN);
        list_channels(c, CHANNEL, argc == 3 ? &argv[2] : NULL);
    } else if (gs_arg_is(sub, "shardchannels") && argc <= 3) {
        gs_subcommand_stat(c, "pubsub|shardchannels", GS_SUB_RAN);
        list_channels(c, SHARD, argc == 3 ? &argv[2] : NULL);
    } else if (gs_arg_is(sub, "numsub")) {
        gs_subcommand_stat(c, "pubsub|numsub", GS_SUB_RAN);
        numsub(c, argc, argv, CHANNEL);
    } else if (gs_arg_is(sub, "shardnumsub")) {
        gs_subcommand_stat(c, "pubsub|shardnumsub", GS_SUB_RAN);
        numsub(c, argc, argv, SHARD);
    } else if (gs_arg_is(sub, "numpat") && argc == 2) {
        gs_subcommand_stat(c, "pubsub|numpat", GS_SUB_RAN);
        gs_reply_int(&c->w, (int64_t)c->node->pubsub->t[PATTERN].count);
    } else if (gs_arg_is(sub, "help") || gs_arg_is(sub, "numpat")) {
        /* Fixed arity in Redis's command table: the table's error. */
        gs_subcommand_stat(c, gs_arg_is(sub, "help") ? "pubsub|help" : "pubsub|numpat",
                           GS_SUB_ARITY);
        char lower[32];
        size_t n = sub->len < sizeof(lower) - 1 ? sub->len : sizeof(lower) - 1;
        for (size_t i = 0; i < n; i++)
            lower[i] = (char)(sub->p[i] | 0x20);
        lower[n] = 0;
        gs_errorf(c, "ERR wrong number of arguments for 'pubsub|%s' command", lower);
    } else if (gs_arg_is(sub, "channels") || gs_arg_is(sub, "shardchannels")) {
        /* Variable arity: pubsubCommand's own addReplySubcommandSyntaxError. */
        gs_subcommand_stat(
            c, gs_arg_is(sub, "channels") ? "pubsub|channels" : "pubsub|shardchannels", GS_SUB_RAN);
        gs_errorf(c,
                  "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try PUBSUB "
                  "HELP.",
                  (int)(sub->len < 128 ? sub->len : 128), sub->p);
    } else {
        gs_subcommand_stat(c, NULL, GS_SUB_UNKNOWN);
        gs_errorf(c, "ERR unknown subcommand '%.*s'. Try PUBSUB HELP.",
                  (int)(sub->len < 128 ? sub->len : 128), sub->p);
    }
}
