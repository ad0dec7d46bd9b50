/*
 * Blocking commands' framework (see blocking.h for the contract and the
 * life cycle of a blocked client).
 *
 * Data structures:
 *   - a chained hash table of waiter queues, one per (database, key) that
 *     some client waits on: a doubly linked FIFO of links, one link per
 *     (client, key) pair, so a client leaves every queue in O(keys);
 *   - the ready list: the queues whose key was signalled during the
 *     running command, in signal order, each at most once (queue->ready);
 *   - a binary min-heap of the blocked clients that have a deadline,
 *     ordered by (deadline, blocking order); one uv timer for its top;
 *   - the resume list: clients served, timed out or unblocked, whose
 *     pipelined input is parsed again from a zero timer, outside the
 *     command that served them (no re-entry into the dispatcher).
 *
 * A queue is freed when its last link goes, unless it is on the ready
 * list or being served: then whoever holds it frees it when done.
 */
#include "gridsync/client/blocking.h"

#include "core/error.h"
#include "core/hash.h"
#include "core/uv_server.h"
#include "gridsync/client/node_ctx.h"
#include "gridsync/store/store.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct waiters;

/* One (blocked client, key) pair in that key's queue. */
struct link {
    struct gs_blocked *owner;
    struct waiters *q;
    struct link *prev, *next;
};

/* The clients waiting on one key of one database, oldest first. */
struct waiters {
    struct waiters *hnext; /* hash chain */
    struct waiters *rnext; /* ready list */
    struct gs_db *db;
    uint64_t hash;
    struct link *head, *tail;
    bool ready;   /* on the ready list */
    bool serving; /* gs_blocking_serve_ready is walking it */
    bool pending; /* one of its clients is pending (blocking.h, invariant 5) */
    size_t klen;
    char key[];
};

enum { ST_BLOCKED, ST_RESUMING };

struct gs_blocked {
    struct gs_blocking *b;
    struct gs_client *c;
    struct gs_db *db;
    int state;
    int type;
    gs_block_serve_fn *serve;
    size_t first_key, n_keys; /* the spec's keys, for a relay */
    /* Invariant 5: a relayed pop is in flight for the key of pending_q;
     * what came meanwhile: the timeout passed, CLIENT UNBLOCK (1: as a
     * timeout, 2: with an error). */
    bool pending, expired;
    bool reply_zero; /* the spec's: a timeout answers :0 (WAIT) */
    int unblock_req;
    struct waiters *pending_q;
    int64_t deadline_ms;              /* 0: none */
    uint64_t seq;                     /* blocking order, for equal deadlines */
    size_t heap_idx;                  /* SIZE_MAX: not in the heap */
    struct gs_blocked *rprev, *rnext; /* resume list */
    size_t argc;
    struct gs_arg *argv; /* in this allocation, after links[] */
    size_t n_links;
    struct link links[];
};

struct gs_blocking {
    struct gs_node *node;
    uv_timer_t timer;  /* the heap's top deadline */
    uv_timer_t resume; /* zero timer: parse resumed clients' input */
    struct waiters **bucket;
    size_t mask;     /* buckets - 1 */
    size_t n_queues; /* distinct (database, key) waited on */
    size_t n_blocked;
    uint64_t seq;
    uint64_t seed;
    struct waiters *ready_head, *ready_tail;
    struct gs_blocked **heap;
    size_t heap_len, heap_cap;
    struct gs_blocked *resume_head, *resume_tail;
};

/* ------------------------------------------------------------ timeouts */

bool gs_block_parse_timeout(struct gs_client *c, const struct gs_arg *a, int64_t *deadline_ms)
{
    long double ft;
    if (!gs_parse_long_double(a->p, a->len, &ft)) {
        gs_error(c, "ERR timeout is not a float or out of range");
        return false;
    }
    /* Redis: tval = (long long)ceill(ftval * 1000.0): a fraction of a
     * millisecond is one millisecond ("-0.0001" is 0, forever). Out of
     * range (inf, 1e30) that conversion gives LLONG_MIN on x86-64, hence
     * "negative". */
    long double ms = ceill(ft * 1000.0L);
    int64_t tval =
        ms > -9223372036854775808.0L && ms < 9223372036854775807.0L ? (int64_t)ms : INT64_MIN;
    if (tval < 0) {
        gs_error(c, "ERR timeout is negative");
        return false;
    }
    int64_t now = c->db->now_ms;
    if (tval > 0) {
        /* Redis 7.0 adds mstime() and lets the sum wrap; its timeout
         * table orders deadlines as unsigned, so a wrapped one never comes
         * due: the client waits forever. */
        tval = tval > INT64_MAX - now ? 0 : tval + now;
    }
    *deadline_ms = tval;
    return true;
}

bool gs_block_denied(const struct gs_client *c)
{
    return c->multi.active || !c->conn;
}

static bool heap_less(const struct gs_blocked *x, const struct gs_blocked *y)
{
    return x->deadline_ms < y->deadline_ms || (x->deadline_ms == y->deadline_ms && x->seq < y->seq);
}

static void heap_set(struct gs_blocking *b, size_t i, struct gs_blocked *r)
{
    b->heap[i] = r;
    r->heap_idx = i;
}

static void heap_up(struct gs_blocking *b, size_t i)
{
    struct gs_blocked *r = b->heap[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(r, b->heap[p]))
            break;
        heap_set(b, i, b->heap[p]);
        i = p;
    }
    heap_set(b, i, r);
}

static void heap_down(struct gs_blocking *b, size_t i)
{
    struct gs_blocked *r = b->heap[i];
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        struct gs_blocked *best = r;
        if (l < b->heap_len && heap_less(b->heap[l], best))
            m = l, best = b->heap[l];
        if (l + 1 < b->heap_len && heap_less(b->heap[l + 1], best))
            m = l + 1, best = b->heap[l + 1];
        if (m == i)
            break;
        heap_set(b, i, best);
        i = m;
    }
    heap_set(b, i, r);
}

static void heap_remove(struct gs_blocking *b, struct gs_blocked *r)
{
    size_t i = r->heap_idx;
    if (i == SIZE_MAX)
        return;
    r->heap_idx = SIZE_MAX;
    struct gs_blocked *last = b->heap[--b->heap_len];
    if (i == b->heap_len)
        return;
    heap_set(b, i, last);
    heap_up(b, i);
    heap_down(b, last->heap_idx);
}

static void on_timer(uv_timer_t *t);

/* Arm the timer for the heap's top, or stop it (invariant 4). */
static void rearm(struct gs_blocking *b)
{
    if (b->heap_len == 0) {
        uv_timer_stop(&b->timer);
        return;
    }
    int64_t wait = b->heap[0]->deadline_ms - gs_node_now_ms(b->node);
    uv_timer_start(&b->timer, on_timer, wait > 0 ? (uint64_t)wait : 0, 0);
}

/* ------------------------------------------------------------- queues */

static uint64_t key_hash(const struct gs_blocking *b, const struct gs_db *db, const char *key,
                         size_t klen)
{
    return core_hash64(key, klen, b->seed ^ (uint64_t)(uintptr_t)db);
}

static struct waiters *queue_find(const struct gs_blocking *b, const struct gs_db *db,
                                  const char *key, size_t klen, uint64_t h)
{
    if (!b->bucket)
        return NULL;
    for (struct waiters *q = b->bucket[h & b->mask]; q; q = q->hnext)
        if (q->hash == h && q->db == db && q->klen == klen && memcmp(q->key, key, klen) == 0)
            return q;
    return NULL;
}

static int table_grow(struct gs_blocking *b)
{
    size_t n = b->bucket ? (b->mask + 1) * 2 : 16;
    struct waiters **nb = calloc(n, sizeof(*nb));
    if (!nb)
        return CORE_ENOMEM;
    for (size_t i = 0; b->bucket && i <= b->mask; i++) {
        for (struct waiters *q = b->bucket[i], *next; q; q = next) {
            next = q->hnext;
            q->hnext = nb[q->hash & (n - 1)];
            nb[q->hash & (n - 1)] = q;
        }
    }
    free(b->bucket);
    b->bucket = nb;
    b->mask = n - 1;
    return 0;
}

static struct waiters *queue_get(struct gs_blocking *b, struct gs_db *db, const char *key,
                                 size_t klen)
{
    uint64_t h = key_hash(b, db, key, klen);
    struct waiters *q = queue_find(b, db, key, klen, h);
    if (q)
        return q;
    if ((!b->bucket || b->n_queues >= b->mask + 1) && table_grow(b))
        return NULL;
    q = calloc(1, sizeof(*q) + klen);
    if (!q)
        return NULL;
    q->db = db;
    q->hash = h;
    q->klen = klen;
    memcpy(q->key, key, klen);
    q->hnext = b->bucket[h & b->mask];
    b->bucket[h & b->mask] = q;
    b->n_queues++;
    return q;
}

static void queue_free_if_idle(struct gs_blocking *b, struct waiters *q)
{
    if (q->head || q->ready || q->serving)
        return;
    struct waiters **pp = &b->bucket[q->hash & b->mask];
    while (*pp != q)
        pp = &(*pp)->hnext;
    *pp = q->hnext;
    b->n_queues--;
    free(q);
}

static void link_remove(struct gs_blocking *b, struct link *l)
{
    struct waiters *q = l->q;
    if (!q)
        return;
    if (l->prev)
        l->prev->next = l->next;
    else
        q->head = l->next;
    if (l->next)
        l->next->prev = l->prev;
    else
        q->tail = l->prev;
    l->q = NULL;
    l->prev = l->next = NULL;
    queue_free_if_idle(b, q);
}

/* ------------------------------------------------------ blocking a client */

int gs_block(struct gs_client *c, size_t argc, const struct gs_arg *argv,
             const struct gs_block_spec *spec)
{
    struct gs_blocking *b = c->shared->key_ready_arg;
    if (!b || c->blocked)
        return CORE_EINVAL;
    size_t bytes = 0;
    for (size_t i = 0; i < argc; i++)
        bytes += argv[i].len + 1;
    size_t head = sizeof(struct gs_blocked) + spec->n_keys * sizeof(struct link);
    struct gs_blocked *r = calloc(1, head + argc * sizeof(struct gs_arg) + bytes);
    if (!r)
        return CORE_ENOMEM;
    r->b = b;
    r->c = c;
    r->db = c->db;
    r->state = ST_BLOCKED;
    r->type = spec->type;
    r->serve = spec->serve;
    r->deadline_ms = spec->deadline_ms;
    r->first_key = spec->first_key;
    r->n_keys = spec->n_keys;
    r->reply_zero = spec->reply_zero;
    r->seq = ++b->seq;
    r->heap_idx = SIZE_MAX;
    r->argc = argc;
    r->argv = (struct gs_arg *)((char *)r + head);
    char *p = (char *)(r->argv + argc);
    for (size_t i = 0; i < argc; i++) {
        memcpy(p, argv[i].p, argv[i].len);
        p[argv[i].len] = 0;
        r->argv[i].p = p;
        r->argv[i].len = argv[i].len;
        p += argv[i].len + 1;
    }
    if (r->deadline_ms > 0 && b->heap_len == b->heap_cap) {
        size_t cap = b->heap_cap ? b->heap_cap * 2 : 16;
        struct gs_blocked **nh = realloc(b->heap, cap * sizeof(*nh));
        if (!nh) {
            free(r);
            return CORE_ENOMEM;
        }
        b->heap = nh;
        b->heap_cap = cap;
    }
    /* Each distinct key once (Redis's blockForKeys skips repeats). */
    for (size_t k = 0; k < spec->n_keys; k++) {
        const struct gs_arg *key = &r->argv[spec->first_key + k];
        bool seen = false;
        for (size_t j = 0; j < r->n_links && !seen; j++)
            seen = r->links[j].q->klen == key->len &&
                   memcmp(r->links[j].q->key, key->p, key->len) == 0;
        if (seen)
            continue;
        struct waiters *q = queue_get(b, r->db, key->p, key->len);
        if (!q) {
            for (size_t j = 0; j < r->n_links; j++)
                link_remove(b, &r->links[j]);
            free(r);
            return CORE_ENOMEM;
        }
        struct link *l = &r->links[r->n_links++];
        l->owner = r;
        l->q = q;
        l->prev = q->tail;
        if (q->tail)
            q->tail->next = l;
        else
            q->head = l;
        q->tail = l;
    }
    if (r->deadline_ms > 0) {
        b->heap[b->heap_len] = r;
        r->heap_idx = b->heap_len++;
        heap_up(b, r->heap_idx);
        if (b->heap[0] == r)
            rearm(b);
    }
    b->n_blocked++;
    c->blocked = r;
    return 0;
}

static void on_resume(uv_timer_t *t);

/* BLOCKED -> RESUMING: out of every queue and the heap; its input is
 * parsed again from the resume timer. */
static void unblock(struct gs_blocked *r)
{
    struct gs_blocking *b = r->b;
    for (size_t j = 0; j < r->n_links; j++)
        link_remove(b, &r->links[j]);
    bool top = r->heap_idx == 0;
    heap_remove(b, r);
    if (top)
        rearm(b);
    b->n_blocked--;
    r->state = ST_RESUMING;
    r->rprev = b->resume_tail;
    r->rnext = NULL;
    if (b->resume_tail)
        b->resume_tail->rnext = r;
    else
        b->resume_head = r;
    b->resume_tail = r;
    if (!uv_is_active((uv_handle_t *)&b->resume))
        uv_timer_start(&b->resume, on_resume, 0, 0);
}

static void resume_remove(struct gs_blocking *b, struct gs_blocked *r)
{
    if (r->rprev)
        r->rprev->rnext = r->rnext;
    else
        b->resume_head = r->rnext;
    if (r->rnext)
        r->rnext->rprev = r->rprev;
    else
        b->resume_tail = r->rprev;
}

static void on_resume(uv_timer_t *t)
{
    struct gs_blocking *b = t->data;
    /* Only those queued now: a resumed client that blocks and is served
     * again waits for the next round. */
    struct gs_blocked *last = b->resume_tail;
    while (b->resume_head) {
        struct gs_blocked *r = b->resume_head;
        bool end = r == last;
        resume_remove(b, r);
        struct gs_client *c = r->c;
        c->blocked = NULL;
        free(r);
        /* Writes the reply, then parses what the client sent meanwhile
         * (invariant 2); the client may close or block again. */
        core_conn_redeliver(c->conn);
        if (end)
            break;
    }
}

static void reply_timeout(struct gs_client *c)
{
    /* Redis 7.0's replyToBlockedClientTimedOut: a null array for every
     * list and sorted set command, BLMOVE included; WAIT's count of
     * replicas (none acknowledged: 0). */
    if (c->blocked && c->blocked->reply_zero)
        gs_reply_int(&c->w, 0);
    else
        gs_reply_null_array(&c->w);
}

static void on_timer(uv_timer_t *t)
{
    struct gs_blocking *b = t->data;
    int64_t now = gs_node_now_ms(b->node);
    while (b->heap_len && b->heap[0]->deadline_ms <= now) {
        struct gs_blocked *r = b->heap[0];
        if (r->pending) {
            /* Answered when its pop has failed (invariant 5). */
            r->expired = true;
            heap_remove(b, r);
            continue;
        }
        reply_timeout(r->c);
        unblock(r);
    }
    rearm(b);
}

bool gs_block_unblock(struct gs_client *c, bool error)
{
    struct gs_blocked *r = c->blocked;
    if (!r || r->state != ST_BLOCKED)
        return false;
    if (r->pending) {
        r->unblock_req = error ? 2 : 1; /* answered if its pop fails (invariant 5) */
        return true;
    }
    if (error)
        gs_error(c, "UNBLOCKED client unblocked via CLIENT UNBLOCK");
    else
        reply_timeout(c);
    unblock(r);
    return true;
}

bool gs_block_is_blocked(const struct gs_client *c)
{
    return c->blocked && c->blocked->state == ST_BLOCKED;
}

/* ------------------------------------------------------- ready keys */

static void mark_ready(struct gs_blocking *b, struct waiters *q)
{
    if (q->ready)
        return;
    q->ready = true;
    q->rnext = NULL;
    if (b->ready_tail)
        b->ready_tail->rnext = q;
    else
        b->ready_head = q;
    b->ready_tail = q;
}

/* gs_shared's key_ready hook: key NULL means every key of db (SWAPDB). */
static void key_ready(void *arg, const struct gs_db *db, const char *key, size_t klen)
{
    struct gs_blocking *b = arg;
    if (b->n_blocked == 0)
        return;
    if (key) {
        struct waiters *q = queue_find(b, db, key, klen, key_hash(b, db, key, klen));
        if (q && q->head)
            mark_ready(b, q);
        return;
    }
    for (size_t i = 0; i <= b->mask; i++)
        for (struct waiters *q = b->bucket[i]; q; q = q->hnext)
            if (q->db == db && q->head &&
                gs_store_lookup(q->db->store, q->key, q->klen, q->db->now_ms, GS_LOOKUP_NOTOUCH))
                mark_ready(b, q);
}

/* Serve q's clients oldest first while its key holds a value (Redis's
 * serveClientsBlockedOnListKey: the walk stops once the key is gone). */
static void serve_queue(struct gs_blocking *b, struct waiters *q)
{
    struct gs_db *db = q->db;
    if (q->pending)
        return; /* its turn comes when that pop is over (invariant 5) */
    int64_t now = gs_node_now_ms(b->node);
    for (struct link *l = q->head, *next; l; l = next) {
        next = l->next;
        db->now_ms = now;
        struct gs_entry *e = gs_store_lookup(db->store, q->key, q->klen, now, GS_LOOKUP_NOTOUCH);
        if (!e)
            break;
        struct gs_blocked *r = l->owner;
        if (gs_entry_type(e) != r->type)
            continue;
        if (r->pending)
            continue; /* pending on another of its keys */
        struct gs_client *c = r->c;
        struct gs_db *selected = c->db;
        c->db = r->db;
        int rc = db->block_relay ? db->block_relay(db, c, r->argc, r->argv, r->first_key, r->n_keys,
                                                   q->key, q->klen)
                                 : r->serve(c, r->argc, r->argv, q->key, q->klen);
        c->db = selected;
        if (rc == GS_BLOCK_PENDING) {
            r->pending = true;
            r->pending_q = q;
            q->pending = true;
            break;
        }
        if (rc == GS_BLOCK_SERVED)
            unblock(r); /* removes l only from q: next stays valid */
    }
}

void gs_block_pending_done(struct gs_client *c, bool served)
{
    struct gs_blocked *r = c->blocked;
    if (!r || r->state != ST_BLOCKED || !r->pending)
        return;
    struct gs_blocking *b = r->b;
    struct waiters *q = r->pending_q;
    r->pending = false;
    r->pending_q = NULL;
    q->pending = false;
    mark_ready(b, q); /* the next waiter's turn, if the key holds a value */
    if (!served && r->expired) {
        reply_timeout(c);
        served = true;
    } else if (!served && r->unblock_req) {
        if (r->unblock_req == 2)
            gs_error(c, "UNBLOCKED client unblocked via CLIENT UNBLOCK");
        else
            reply_timeout(c);
        served = true;
    }
    if (served) {
        unblock(r);
        return;
    }
    /* Still blocked: its other keys may have received values meanwhile. */
    for (size_t j = 0; j < r->n_links; j++)
        mark_ready(b, r->links[j].q);
}

void gs_blocking_abort(struct gs_blocking *b, const struct gs_db *db, gs_block_abort_fn *fn,
                       void *arg)
{
    if (!b || b->n_blocked == 0 || !b->bucket)
        return;
    for (size_t i = 0; i <= b->mask; i++) {
        for (struct waiters *q = b->bucket[i], *next; q; q = next) {
            if (q->db != db) {
                next = q->hnext;
                continue;
            }
            q->serving = true; /* kept while its clients leave */
            for (struct link *l = q->head, *ln; l; l = ln) {
                ln = l->next;
                struct gs_blocked *r = l->owner;
                if (!r->pending && fn(arg, r->c, q->key, q->klen))
                    unblock(r); /* removes l only from q: ln stays valid */
            }
            q->serving = false;
            /* Read after the walk: a queue freed meanwhile is unlinked. */
            next = q->hnext;
            queue_free_if_idle(b, q);
        }
    }
}

void gs_blocking_serve_ready(struct gs_blocking *b)
{
    struct waiters *q;
    while ((q = b->ready_head)) {
        b->ready_head = q->rnext;
        if (!b->ready_head)
            b->ready_tail = NULL;
        q->ready = false;
        q->serving = true;
        serve_queue(b, q);
        q->serving = false;
        queue_free_if_idle(b, q);
    }
}

/* ---------------------------------------------------------- the node */

int gs_blocking_new(struct gs_blocking **out, struct gs_node *n)
{
    struct gs_blocking *b = calloc(1, sizeof(*b));
    if (!b)
        return CORE_ENOMEM;
    b->node = n;
    b->seed = core_hash64(&b, sizeof(b), (uint64_t)(uintptr_t)n);
    uv_timer_init(n->loop, &b->timer);
    uv_timer_init(n->loop, &b->resume);
    b->timer.data = b->resume.data = b;
    n->shared.key_ready = key_ready;
    n->shared.key_ready_arg = b;
    *out = b;
    return 0;
}

void gs_blocking_stop(struct gs_blocking *b)
{
    if (!b)
        return;
    uv_close((uv_handle_t *)&b->timer, NULL);
    uv_close((uv_handle_t *)&b->resume, NULL);
}

void gs_blocking_free(struct gs_blocking *b)
{
    if (!b)
        return;
    for (size_t i = 0; b->bucket && i <= b->mask; i++) {
        for (struct waiters *q = b->bucket[i], *next; q; q = next) {
            next = q->hnext;
            free(q);
        }
    }
    free(b->bucket);
    free(b->heap);
    free(b);
}

void gs_blocking_client_closed(struct gs_client *c)
{
    struct gs_blocked *r = c->blocked;
    if (!r)
        return;
    struct gs_blocking *b = r->b;
    if (r->state == ST_BLOCKED) {
        if (r->pending) {
            /* Its pop's outcome has nobody to tell: the next waiter's turn. */
            r->pending_q->pending = false;
            mark_ready(b, r->pending_q);
        }
        for (size_t j = 0; j < r->n_links; j++)
            link_remove(b, &r->links[j]);
        bool top = r->heap_idx == 0;
        heap_remove(b, r);
        if (top && !uv_is_closing((uv_handle_t *)&b->timer))
            rearm(b);
        b->n_blocked--;
    } else {
        resume_remove(b, r);
    }
    c->blocked = NULL;
    free(r);
}

size_t gs_blocking_count(const struct gs_blocking *b)
{
    return b ? b->n_blocked : 0;
}

size_t gs_blocking_keys(const struct gs_blocking *b)
{
    return b ? b->n_queues : 0;
}
