/*
 * MULTI/EXEC/DISCARD/WATCH/UNWATCH (see multi.h for the state machine
 * and the invariants). Error texts and order of checks follow Redis 7.0's
 * src/multi.c and processCommand.
 *
 * The queue is one growable buffer per client; each command is packed as
 *   struct qhead { cmd, argc } then, per argument, size_t len, the bytes
 *   and a NUL
 * so queueing costs no allocation once the buffer has grown, and EXEC
 * rebuilds an argument array pointing into it.
 */
#include "gridsync/commands/multi.h"

#include "core/error.h"
#include "core/hash.h"
#include "core/log.h"
#include "gridsync/client/node_ctx.h"
#include "gridsync/commands/commands.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A queue buffer bigger than this is freed after EXEC/DISCARD rather than
 * kept for the client's next transaction. */
#define QUEUE_KEEP (64 * 1024)

struct qhead {
    const struct gs_command *cmd;
    size_t argc;
};

struct gs_watch {
    struct gs_watch *bnext, **bprev; /* bucket chain; *bprev == this */
    struct gs_watch *cnext;          /* the client's list */
    struct gs_client *c;
    uint64_t h;
    unsigned db; /* the database of the key (Redis's db->watched_keys) */
    size_t klen;
    char key[];
};

/* ------------------------------------------------------- watch table */

static uint64_t key_hash(const struct gs_node *n, const char *key, size_t klen)
{
    return core_hash64(key, klen, (uint64_t)(uintptr_t)n);
}

static void bucket_insert(struct gs_watch **b, struct gs_watch *w)
{
    w->bnext = *b;
    if (*b)
        (*b)->bprev = &w->bnext;
    *b = w;
    w->bprev = b;
}

static void bucket_remove(struct gs_watch *w)
{
    *w->bprev = w->bnext;
    if (w->bnext)
        w->bnext->bprev = w->bprev;
}

static int table_grow(struct gs_watch_table *t)
{
    size_t nb = t->bucket ? (t->mask + 1) * 2 : 16;
    struct gs_watch **b = calloc(nb, sizeof(*b));
    if (!b)
        return CORE_ENOMEM;
    for (size_t i = 0; t->bucket && i <= t->mask; i++) {
        struct gs_watch *w = t->bucket[i];
        while (w) {
            struct gs_watch *next = w->bnext;
            bucket_insert(&b[w->h & (nb - 1)], w);
            w = next;
        }
    }
    free(t->bucket);
    t->bucket = b;
    t->mask = nb - 1;
    return 0;
}

/* Redis's touchAllWatchedKeysInDb: a flush dirties the watchers of the
 * keys that exist in db (watching a missing key survives FLUSHALL); with
 * also, SWAPDB's other database, keys that exist in either. */
static void touch_existing(struct gs_node *n, const struct gs_db *db, const struct gs_db *also)
{
    struct gs_watch_table *t = &n->watches;
    for (size_t i = 0; i <= t->mask; i++)
        for (struct gs_watch *w = t->bucket[i]; w; w = w->bnext) {
            if (w->c->multi.watch_dirty || (w->db != db->id && (!also || w->db != also->id)))
                continue;
            if (gs_store_lookup(db->store, w->key, w->klen, db->now_ms, GS_LOOKUP_NOTOUCH) ||
                (also &&
                 gs_store_lookup(also->store, w->key, w->klen, also->now_ms, GS_LOOKUP_NOTOUCH)))
                w->c->multi.watch_dirty = true;
        }
}

/* The stores' hook (installed only while the table is non-empty); arg is
 * the database whose store changed. */
static void on_key_modified(void *arg, const char *key, size_t klen)
{
    struct gs_db *db = arg;
    struct gs_node *n = db->node;
    struct gs_watch_table *t = &n->watches;
    if (!key) {
        touch_existing(n, db, NULL);
        return;
    }
    uint64_t h = key_hash(n, key, klen);
    for (struct gs_watch *w = t->bucket[h & t->mask]; w; w = w->bnext)
        if (w->h == h && w->db == db->id && w->klen == klen && memcmp(w->key, key, klen) == 0)
            w->c->multi.watch_dirty = true;
}

/* Invariant 2, for every database: the hook is there iff someone watches. */
static void set_hooks(struct gs_node *n, bool on)
{
    for (unsigned d = 0; d < n->n_dbs; d++)
        gs_store_on_modified(n->dbs[d].store, on ? on_key_modified : NULL, on ? &n->dbs[d] : NULL);
    for (size_t i = 0; i < n->watches.n_extra; i++) {
        struct gs_db *db = n->watches.extra[i];
        gs_store_on_modified(db->store, on ? on_key_modified : NULL, on ? db : NULL);
    }
}

int gs_multi_watch_db(struct gs_node *n, struct gs_db *db)
{
    struct gs_watch_table *t = &n->watches;
    for (size_t i = 0; i < t->n_extra; i++)
        if (t->extra[i] == db)
            return 0;
    if (t->n_extra == t->cap_extra) {
        size_t cap = t->cap_extra ? 2 * t->cap_extra : 8;
        struct gs_db **p = realloc(t->extra, cap * sizeof(*p));
        if (!p)
            return CORE_ENOMEM;
        t->extra = p;
        t->cap_extra = cap;
    }
    t->extra[t->n_extra++] = db;
    if (t->count)
        gs_store_on_modified(db->store, on_key_modified, db); /* invariant 2 */
    return 0;
}

void gs_multi_unwatch_db(struct gs_node *n, struct gs_db *db)
{
    struct gs_watch_table *t = &n->watches;
    for (size_t i = 0; i < t->n_extra; i++)
        if (t->extra[i] == db) {
            gs_store_on_modified(db->store, NULL, NULL);
            t->extra[i] = t->extra[--t->n_extra];
            return;
        }
}

void gs_multi_swapped(struct gs_node *n, unsigned a, unsigned b)
{
    if (!n->watches.count)
        return;
    set_hooks(n, true); /* each store's hook names the database it is in now */
    touch_existing(n, &n->dbs[a], &n->dbs[b]);
}

static int watch_key(struct gs_client *c, const struct gs_arg *key)
{
    struct gs_node *n = c->node;
    struct gs_watch_table *t = &n->watches;
    uint64_t h = key_hash(n, key->p, key->len);
    for (struct gs_watch *w = c->multi.watched; w; w = w->cnext)
        if (w->h == h && w->db == c->db->id && w->klen == key->len &&
            memcmp(w->key, key->p, key->len) == 0)
            return 0; /* already watched (Redis's watchForKey) */
    /* A key whose TTL has already passed is removed now, before the watch
     * exists: as Redis 7.0 (which remembers it as expired at WATCH time),
     * its later lazy deletion does not fail EXEC. */
    gs_store_lookup(c->db->store, key->p, key->len, c->db->now_ms, GS_LOOKUP_NOTOUCH);
    if ((!t->bucket || t->count > t->mask) && table_grow(t) != 0)
        return CORE_ENOMEM;
    struct gs_watch *w = malloc(sizeof(*w) + key->len);
    if (!w)
        return CORE_ENOMEM;
    w->c = c;
    w->h = h;
    w->db = c->db->id;
    w->klen = key->len;
    memcpy(w->key, key->p, key->len);
    bucket_insert(&t->bucket[h & t->mask], w);
    w->cnext = c->multi.watched;
    c->multi.watched = w;
    if (t->count++ == 0)
        set_hooks(n, true); /* invariant 2 */
    return 0;
}

static void unwatch_all(struct gs_client *c)
{
    struct gs_node *n = c->node;
    struct gs_watch_table *t = &n->watches;
    struct gs_watch *w = c->multi.watched;
    while (w) {
        struct gs_watch *next = w->cnext;
        bucket_remove(w);
        free(w);
        if (--t->count == 0)
            set_hooks(n, false); /* invariant 2 */
        w = next;
    }
    c->multi.watched = NULL;
    c->multi.watch_dirty = false;
    c->multi.watch_set = false;
    c->multi.watch_mixed = false;
}

/* Redis's isWatchedKeyExpired: a watched key whose TTL passed since WATCH
 * counts as modified even if nothing has removed it yet. Looking it up
 * removes it, and the hook marks its watchers. */
static void expire_watched(struct gs_client *c)
{
    for (struct gs_watch *w = c->multi.watched; w && !c->multi.watch_dirty; w = w->cnext)
        gs_store_lookup(c->db->store, w->key, w->klen, c->db->now_ms, GS_LOOKUP_NOTOUCH);
}

bool gs_multi_watches_hold(struct gs_client *c)
{
    expire_watched(c);
    return !c->multi.watch_dirty;
}

/* ------------------------------------------------------------- queue */

/* Redis's discardTransaction: leave MULTI, forget the queue and the
 * watches. */
static void discard_transaction(struct gs_client *c)
{
    struct gs_multi *m = &c->multi;
    m->active = false;
    m->aborted = false;
    m->flags = 0;
    m->count = 0;
    m->has_slot = false;
    m->cross_slot = false;
    m->exec_waits = 0;
    if (m->queue.cap > QUEUE_KEEP)
        core_buf_free(&m->queue);
    m->queue.len = 0;
    m->queue.oom = false;
    unwatch_all(c);
}

void gs_multi_discard(struct gs_client *c)
{
    discard_transaction(c);
}

/* Commands that run at once inside MULTI (Redis's processCommand lets
 * EXEC, DISCARD, MULTI, WATCH, QUIT and RESET through). */
bool gs_multi_runs_now(const struct gs_command *cmd)
{
    return cmd->fn == gs_cmd_exec || cmd->fn == gs_cmd_discard || cmd->fn == gs_cmd_multi ||
           cmd->fn == gs_cmd_watch || cmd->fn == gs_cmd_quit || cmd->fn == gs_cmd_reset;
}

bool gs_multi_queue(struct gs_client *c, const struct gs_command *cmd, size_t argc,
                    struct gs_arg *argv)
{
    struct gs_multi *m = &c->multi;
    if (!m->active || gs_multi_runs_now(cmd))
        return false;
    struct gs_node *n = c->node;
    /* Redis's processCommand: inside MULTI any queued command is refused
     * when memory cannot be made, since queueing itself takes memory. */
    if (n->cfg.maxmemory > 0 && gs_store_make_room(c->db->store) == CORE_ENOMEM) {
        gs_error_oom(c);
        m->aborted = true;
        return true;
    }
    size_t bytes = sizeof(struct qhead);
    for (size_t i = 0; i < argc; i++)
        bytes += sizeof(size_t) + argv[i].len + 1;
    if (m->queue.len + bytes > (uint64_t)n->cfg.query_buf_limit) {
        /* Invariant 3: the queue is input the client has not had run yet,
         * so it is bounded like unprocessed input. */
        CORE_WARN("Closing client id=%llu addr=%s: its transaction queue exceeds "
                  "client-query-buffer-limit",
                  (unsigned long long)core_conn_id(c->conn), core_conn_peer(c->conn));
        core_conn_close(c->conn);
        return true;
    }
    char *p = core_buf_reserve(&m->queue, bytes);
    if (!p) {
        m->queue.oom = false;
        gs_error(c, "ERR out of memory queueing the command");
        m->aborted = true;
        return true;
    }
    struct qhead h = {cmd, argc};
    memcpy(p, &h, sizeof(h));
    p += sizeof(h);
    for (size_t i = 0; i < argc; i++) {
        memcpy(p, &argv[i].len, sizeof(size_t));
        p += sizeof(size_t);
        memcpy(p, argv[i].p, argv[i].len);
        p += argv[i].len;
        *p++ = '\0';
    }
    m->queue.len += bytes;
    m->count++;
    m->flags |= cmd->flags;
    gs_reply_simple(&c->w, "QUEUED", 6);
    return true;
}

int gs_multi_walk(struct gs_client *c,
                  int (*fn)(void *arg, const struct gs_command *cmd, size_t argc,
                            struct gs_arg *argv),
                  void *arg)
{
    struct gs_multi *m = &c->multi;
    const char *p = m->queue.data, *end = m->queue.data + m->queue.len;
    while (p < end) {
        struct qhead h;
        memcpy(&h, p, sizeof(h));
        p += sizeof(h);
        if (h.argc > m->argv_cap) {
            struct gs_arg *a = realloc(m->argv, h.argc * sizeof(*a));
            if (!a)
                return CORE_ENOMEM;
            m->argv = a;
            m->argv_cap = h.argc;
        }
        for (size_t i = 0; i < h.argc; i++) {
            memcpy(&m->argv[i].len, p, sizeof(size_t));
            p += sizeof(size_t);
            m->argv[i].p = p;
            p += m->argv[i].len + 1;
        }
        int rc = fn(arg, h.cmd, h.argc, m->argv);
        if (rc)
            return rc;
    }
    return 0;
}

struct run_state {
    struct gs_client *c;
    size_t done;
};

static int call_queued(void *arg, const struct gs_command *cmd, size_t argc, struct gs_arg *argv)
{
    struct run_state *st = arg;
    /* Redis's execCommand calls each command without processCommand's
     * checks (they ran at queueing time). */
    gs_call(st->c, cmd, argc, argv);
    st->done++;
    return 0;
}

/* Run the queued commands back to back (invariant 4). The queue is not
 * touched meanwhile: the handlers are called directly, never through
 * gs_execute, so nothing is queued and MULTI/WATCH cannot run. */
static void run_queue(struct gs_client *c)
{
    struct run_state st = {c, 0};
    gs_reply_array(&c->w, c->multi.count);
    if (gs_multi_walk(c, call_queued, &st) != 0)
        for (; st.done < c->multi.count; st.done++) /* one element per command */
            gs_error(c, "ERR out of memory");
}

/* ---------------------------------------------------------- commands */

void gs_cmd_multi(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    (void)argc;
    (void)argv;
    if (c->multi.active) {
        /* Redis 7.0: an error, but the transaction stays open and valid. */
        gs_error(c, "ERR MULTI calls can not be nested");
        return;
    }
    c->multi.active = true;
    gs_reply_ok(&c->w);
}

void gs_cmd_discard(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    (void)argc;
    (void)argv;
    if (!c->multi.active) {
        gs_error(c, "ERR DISCARD without MULTI");
        return;
    }
    discard_transaction(c);
    gs_reply_ok(&c->w);
}

bool gs_multi_exec_refused(struct gs_client *c, const struct gs_command *cmd, const char *why)
{
    if (cmd->fn != gs_cmd_exec)
        return false; /* (Redis's rejectCommand does this with or without MULTI) */
    gs_errorf(c, "EXECABORT Transaction discarded because of: %s", why);
    discard_transaction(c);
    return true;
}

void gs_cmd_exec(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    (void)argc;
    (void)argv;
    struct gs_multi *m = &c->multi;
    struct gs_node *n = c->node;
    if (!m->active) {
        gs_error(c, "ERR EXEC without MULTI");
        return;
    }
    if (m->aborted) {
        gs_error(c, "EXECABORT Transaction discarded because of previous errors.");
        discard_transaction(c);
        return;
    }
    if (!gs_multi_watches_hold(c)) {
        gs_reply_null_array(&c->w); /* WATCH: some watched key changed */
        discard_transaction(c);
        return;
    }
    /* Redis's processCommand rejects EXEC of a transaction that holds a
     * denyoom command when memory cannot be made (execCommandAbort). */
    if ((m->flags & GS_CMD_DENYOOM) && n->cfg.maxmemory > 0 &&
        gs_store_make_room(c->db->store) == CORE_ENOMEM) {
        gs_error(c, "EXECABORT Transaction discarded because of: OOM command not allowed when "
                    "used memory > 'maxmemory'.");
        discard_transaction(c);
        return;
    }
    /* Unwatch first (as Redis): the transaction's own writes must not
     * mark it, and nothing is left to check. */
    unwatch_all(c);
    run_queue(c); /* still "in MULTI" meanwhile, as CLIENT LIST shows in Redis */
    discard_transaction(c);
}

void gs_cmd_watch(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (c->multi.active) {
        gs_error(c, "ERR WATCH inside MULTI is not allowed");
        return;
    }
    for (size_t i = 1; i < argc; i++) {
        if (watch_key(c, &argv[i]) != 0) {
            gs_error(c, "ERR out of memory");
            return;
        }
    }
    gs_reply_ok(&c->w);
}

void gs_cmd_unwatch(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    (void)argc;
    (void)argv;
    unwatch_all(c);
    gs_reply_ok(&c->w);
}

/* ------------------------------------------------------- life cycle */

void gs_multi_client_closed(struct gs_client *c)
{
    discard_transaction(c);
    core_buf_free(&c->multi.queue);
    free(c->multi.argv);
    c->multi.argv = NULL;
    c->multi.argv_cap = 0;
}

void gs_multi_node_free(struct gs_node *n)
{
    set_hooks(n, false);
    free(n->watches.bucket);
    n->watches.bucket = NULL;
    n->watches.count = 0;
    free(n->watches.extra);
    n->watches.extra = NULL;
    n->watches.n_extra = n->watches.cap_extra = 0;
}
