/*
 * The origin wired into the node: held replies for GET/MGET misses,
 * storing filled values, INFO. The design and invariants are in
 * origin_node.h; the fetcher itself in origin.h.
 *
 * A held reply is allocated per command that waits on the origin (one
 * block with its per-key slots). That is a miss on its way to an HTTP
 * round trip, never the hit path: GETs that hit the store go through the
 * node's code untouched.
 */
#include "gridsync/origin/origin_node.h"
#include "gridsync/types/value.h"

#include "core/error.h"
#include "core/log.h"
#include "gridsync/client/node_ctx.h"
#include "gridsync/origin/origin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum slot_state { SLOT_WAITING, SLOT_VALUE, SLOT_NIL };

struct gs_held;

/* One key of a held command. */
struct slot {
    struct gs_origin_waiter w; /* first: the callback casts back */
    struct gs_held *h;
    enum slot_state state;
    size_t off, len; /* SLOT_VALUE: the value's bytes in h->values */
};

/* One command waiting on the origin, and the replies queued behind it. */
struct gs_held {
    struct gs_held *next;
    struct gs_client *c;
    bool mget;              /* array reply (MGET) rather than one bulk (GET) */
    size_t nkeys, left;     /* slots, and slots still waiting */
    int error;              /* first error of a slot, 0 if none */
    int http_status;        /* with error == CORE_EPROTO */
    struct core_buf values; /* slot values, copied when known */
    struct core_buf after;  /* replies of the commands after this one */
    /* Output-limit accounting (gs_origin_node_over_output_limit): size is
     * this held's bytes when it stopped being the tail (its `after` grows
     * no more); the head's queued is the sum of size over every held but
     * the tail. */
    size_t size, queued;
    struct slot slots[];
};

/* ------------------------------------------------------ reply release */

static void held_free(struct gs_held *h)
{
    for (size_t i = 0; i < h->nkeys; i++)
        gs_origin_cancel(&h->slots[i].w);
    core_buf_free(&h->values);
    core_buf_free(&h->after);
    free(h);
}

static const char *error_text(int err, int http, char *buf, size_t len)
{
    switch (err) {
    case CORE_ETIMEOUT:
        return "ERR origin timeout";
    case CORE_EBUSY:
        return "ERR origin busy: too many fetches waiting";
    case CORE_ETOOBIG:
        return "ERR origin value too large";
    case CORE_EIO:
        return "ERR origin unreachable";
    case CORE_ECLOSED:
        return "ERR origin closed: server shutting down";
    case CORE_EPROTO:
        snprintf(buf, len, "ERR origin error: HTTP %d", http);
        return buf;
    default:
        snprintf(buf, len, "ERR origin error: %s", core_strerror(err));
        return buf;
    }
}

/* The held command's own reply, in the client's protocol. */
static void write_reply(struct gs_held *h, struct core_buf *out)
{
    struct gs_writer w = {.buf = out, .proto = h->c->w.proto};
    if (h->error) {
        char tmp[64];
        const char *msg = error_text(h->error, h->http_status, tmp, sizeof(tmp));
        h->c->shared->stats.error_replies++;
        gs_reply_error(&w, msg, strlen(msg));
        return;
    }
    if (h->mget)
        gs_reply_array(&w, h->nkeys);
    for (size_t i = 0; i < h->nkeys; i++) {
        struct slot *s = &h->slots[i];
        if (s->state == SLOT_VALUE)
            gs_reply_bulk(&w, s->len ? h->values.data + s->off : "", s->len);
        else
            gs_reply_null(&w);
    }
}

/* Move every answered reply at the head of the client's queue (and what
 * was held behind it) to the connection, in order (invariant 1). */
static size_t held_bytes(const struct gs_held *h)
{
    return sizeof(*h) + h->nkeys * sizeof(struct slot) + h->after.len + h->values.len;
}

static void release_ready(struct gs_client *c)
{
    struct core_buf *out = core_conn_out(c->conn);
    bool moved = false;
    while (c->held_head && c->held_head->left == 0) {
        struct gs_held *h = c->held_head;
        write_reply(h, out);
        if (h->after.len > 0) /* an empty buffer has no data pointer */
            core_buf_append(out, h->after.data, h->after.len);
        c->held_head = h->next;
        if (c->held_head == NULL)
            c->held_tail = NULL;
        else /* h was not the tail: its size is in queued */
            c->held_head->queued = h->queued - h->size;
        held_free(h);
        moved = true;
    }
    c->w.buf = c->held_tail ? &c->held_tail->after : out;
    if (moved)
        core_conn_flush(c->conn);
}

/* ----------------------------------------------------------- waiters */

static void on_origin_answer(struct gs_origin_waiter *w, const struct gs_origin_result *r)
{
    struct slot *s = (struct slot *)w;
    struct gs_held *h = s->h;
    if (r->status == GS_ORIGIN_FOUND) {
        s->off = h->values.len;
        s->len = r->vlen;
        core_buf_append(&h->values, r->value, r->vlen);
        s->state = SLOT_VALUE;
        if (h->values.oom && !h->error)
            h->error = CORE_ENOMEM;
    } else if (r->status == GS_ORIGIN_NOT_FOUND) {
        s->state = SLOT_NIL;
    } else {
        s->state = SLOT_NIL;
        if (!h->error) {
            h->error = r->error;
            h->http_status = r->http_status;
        }
    }
    if (--h->left == 0)
        release_ready(h->c);
}

/* Store a value the origin sent (invariant 3: never over a present key). */
static void on_fill(void *arg, const char *key, size_t klen, const struct gs_origin_result *r)
{
    struct gs_node *n = arg;
    if (r->status != GS_ORIGIN_FOUND || !r->cacheable)
        return;
    int64_t now = gs_node_now_ms(n);
    int64_t expire = r->ttl_ms > 0 ? now + r->ttl_ms : -1;
    /* A replicated keyspace (cluster mode) writes it through its log. */
    for (unsigned i = 0; i < n->n_features; i++)
        if (n->features[i].ops->fill &&
            n->features[i].ops->fill(n->features[i].self, key, klen, r->value, r->vlen, expire))
            return;
    struct gs_store *store = n->dbs[0].store;
    if (gs_store_lookup(store, key, klen, now, GS_LOOKUP_NOTOUCH) != NULL)
        return;
    if (n->cfg.maxmemory > 0 && gs_store_make_room(store) == CORE_ENOMEM)
        return; /* full under noeviction: serve it, do not keep it */
    if (gs_store_set(store, key, klen, r->value, r->vlen, expire, NULL) < 0)
        CORE_DEBUG("origin: could not store a filled value (out of memory)");
}

/* --------------------------------------------------------- commands */

static struct gs_held *held_new(struct gs_client *c, size_t nkeys, bool mget)
{
    struct gs_held *h = calloc(1, sizeof(*h) + nkeys * sizeof(struct slot));
    if (h == NULL)
        return NULL;
    h->c = c;
    h->mget = mget;
    h->nkeys = nkeys;
    for (size_t i = 0; i < nkeys; i++) {
        h->slots[i].h = h;
        h->slots[i].w.cb = on_origin_answer;
        h->slots[i].state = SLOT_NIL;
    }
    return h;
}

/* Queue h behind the client's other held replies and point the writer at
 * it: what the next commands reply waits behind it (invariant 1). */
static void held_enqueue(struct gs_client *c, struct gs_held *h)
{
    if (c->held_tail) {
        struct gs_held *t = c->held_tail;
        t->size = held_bytes(t);
        c->held_head->queued += t->size;
        t->next = h;
    } else {
        c->held_head = h;
    }
    c->held_tail = h;
    c->w.buf = &h->after;
    gs_origin_node_over_output_limit(c); /* many held misses in one pipeline */
}

bool gs_origin_node_over_output_limit(struct gs_client *c)
{
    const struct gs_held *t = c->held_tail;
    int64_t lim = c->node->cfg.obuf[GS_CLASS_NORMAL].hard;
    if (t == NULL || lim <= 0 || core_conn_closing(c->conn))
        return false;
    size_t total = c->held_head->queued + held_bytes(t) + core_conn_output_pending(c->conn);
    if (total <= (size_t)lim)
        return false;
    CORE_DEBUG("closing client id=%llu addr=%s: output buffer limit reached (replies held "
               "behind origin fetches)",
               (unsigned long long)core_conn_id(c->conn), core_conn_peer(c->conn));
    core_conn_close(c->conn);
    return true;
}

/* Start slot i's fetch. Returns 1 when it waits, 0 when it is answered
 * already (negative cache: nil), or a negative code. */
static int slot_fetch(struct gs_node *n, struct gs_held *h, size_t i, const struct gs_arg *key)
{
    struct slot *s = &h->slots[i];
    int rc = gs_origin_fetch(n->origin, key->p, key->len, &s->w);
    if (rc == 0) {
        s->state = SLOT_WAITING;
        h->left++;
        return 1;
    }
    if (rc == GS_ORIGIN_NEGATIVE) {
        s->state = SLOT_NIL;
        return 0;
    }
    return rc;
}

/* An error from gs_origin_fetch itself: nothing was fetched. */
static void reply_origin_error(struct gs_client *c, int err)
{
    char tmp[64];
    if (err == CORE_ETOOBIG) /* from gs_origin_fetch it is the key, not a value */
        gs_error(c, "ERR origin: key too long for the origin URL");
    else
        gs_error(c, error_text(err, 0, tmp, sizeof(tmp)));
}

static bool miss_get(void *ctx, struct gs_client *c, const struct gs_arg *key)
{
    struct gs_node *n = ctx;
    /* A client without a connection (a script's commands) cannot wait
     * for a held reply: its miss is a plain miss. */
    if (n->origin == NULL || !c->conn)
        return false;
    struct gs_held *h = held_new(c, 1, false);
    if (h == NULL) {
        gs_error_oom(c);
        return true;
    }
    int rc = slot_fetch(n, h, 0, key);
    if (rc <= 0) {
        held_free(h);
        if (rc == 0)
            gs_reply_null(&c->w);
        else
            reply_origin_error(c, rc);
        return true;
    }
    held_enqueue(c, h);
    return true;
}

/* Copy a present value into slot i. */
static void slot_value(struct gs_held *h, size_t i, struct gs_entry *e)
{
    if (gs_entry_type(e) != GS_TYPE_STRING) { /* present, but not a string: nil */
        h->slots[i].state = SLOT_NIL;
        return;
    }
    size_t len;
    const char *v = gs_entry_value(e, &len);
    struct slot *s = &h->slots[i];
    s->off = h->values.len;
    s->len = len;
    if (len > 0)
        core_buf_append(&h->values, v, len);
    s->state = SLOT_VALUE;
}

static bool miss_mget(void *ctx, struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_node *n = ctx;
    /* A client without a connection (a script's commands) cannot wait
     * for a held reply: its miss is a plain miss. */
    if (n->origin == NULL || !c->conn)
        return false;
    size_t nkeys = argc - 1;
    struct gs_store *store = c->db->store;
    int64_t now = c->db->now_ms;
    /* While every key hits, reply as the plain MGET does: no allocation
     * on the hit path. */
    size_t mark = c->w.buf->len;
    size_t miss = 0;
    gs_reply_array(&c->w, nkeys);
    for (; miss < nkeys; miss++) {
        struct gs_entry *e = gs_store_lookup(store, argv[miss + 1].p, argv[miss + 1].len, now, 0);
        if (e == NULL)
            break;
        if (gs_entry_type(e) != GS_TYPE_STRING) { /* MGET answers nil for another type */
            gs_reply_null(&c->w);
            continue;
        }
        size_t len;
        const char *v = gs_entry_value(e, &len);
        gs_reply_bulk(&c->w, v, len);
    }
    if (miss == nkeys)
        return true;
    /* A miss: take back the partial reply; the whole MGET waits. Present
     * keys are copied now, as MGET reads them all at one instant; missing
     * ones are fetched (a key named twice joins its own fetch). */
    c->w.buf->len = mark;
    struct gs_held *h = held_new(c, nkeys, true);
    if (h == NULL) {
        gs_error_oom(c);
        return true;
    }
    for (size_t i = 0; i < nkeys; i++) {
        /* Keys before the first miss were counted as hits already. */
        unsigned flags = i < miss ? GS_LOOKUP_NOTOUCH : 0;
        struct gs_entry *e =
            i == miss ? NULL : gs_store_lookup(store, argv[i + 1].p, argv[i + 1].len, now, flags);
        if (e) {
            slot_value(h, i, e);
            continue;
        }
        int rc = slot_fetch(n, h, i, &argv[i + 1]);
        if (rc < 0) {
            held_free(h); /* cancels the fetches already joined */
            reply_origin_error(c, rc);
            return true;
        }
    }
    if (h->values.oom) {
        held_free(h);
        gs_error_oom(c);
        return true;
    }
    if (h->left == 0) {
        write_reply(h, c->w.buf); /* every missing key was a known 404 */
        held_free(h);
        return true;
    }
    held_enqueue(c, h);
    return true;
}

static const struct gs_miss_ops miss_ops = {.get = miss_get, .mget = miss_mget};

void gs_origin_node_client_closed(struct gs_client *c)
{
    while (c->held_head) {
        struct gs_held *h = c->held_head;
        c->held_head = h->next;
        held_free(h); /* cancels its waiters: the fetches go on for others */
    }
    c->held_tail = NULL;
    c->w.buf = core_conn_out(c->conn);
}

/* ---------------------------------------------------------- lifecycle */

int gs_origin_node_start(struct gs_node *n)
{
    if (n->cfg.origin[0] == '\0')
        return 0;
    struct gs_origin_config oc = {
        .url_template = n->cfg.origin,
        .timeout_ms = (uint32_t)n->cfg.origin_timeout,
        .default_ttl_ms = n->cfg.origin_ttl,
        .negative_ttl_ms = n->cfg.origin_negative_ttl,
        .max_concurrent = (uint32_t)n->cfg.origin_max_fetches,
        .max_queued = (uint32_t)n->cfg.origin_queue,
        .max_value_bytes = (uint64_t)n->cfg.proto_max_bulk_len,
        .coalesce = n->cfg.origin_coalesce,
        .on_fill = on_fill,
        .fill_arg = n,
    };
    int rc = gs_origin_new(&n->origin, n->loop, &oc);
    if (rc < 0) {
        CORE_WARN("origin: cannot use '%s': %s (want http:// or https:// with {key})",
                  n->cfg.origin, core_strerror(rc));
        return rc;
    }
    /* Misses of every database are read through; cluster mode copies the
     * ops into each group's database when it starts the group. */
    for (unsigned d = 0; d < n->n_dbs; d++) {
        n->dbs[d].miss = &miss_ops;
        n->dbs[d].miss_ctx = n;
    }
    CORE_INFO("origin: read-through from %s (coalescing %s)", n->cfg.origin,
              n->cfg.origin_coalesce ? "on" : "off");
    return 0;
}

void gs_origin_node_stop(struct gs_node *n)
{
    for (unsigned d = 0; d < n->n_dbs; d++)
        n->dbs[d].miss = NULL;
    gs_origin_free(n->origin);
    n->origin = NULL;
}

void gs_origin_node_apply_config(struct gs_node *n)
{
    if (n->origin)
        gs_origin_set_coalesce(n->origin, n->cfg.origin_coalesce);
}

void gs_origin_node_reset_stats(struct gs_node *n)
{
    if (n->origin)
        gs_origin_reset_stats(n->origin);
}

void gs_origin_node_info(struct gs_node *n, struct core_buf *b)
{
    size_t need = gs_origin_info(n->origin, NULL, 0);
    char *p = core_buf_reserve(b, need + 1);
    if (p == NULL)
        return;
    gs_origin_info(n->origin, p, need + 1);
    b->len += need;
}

/* ------------------------------------------------------------- the feature */

static int feature_start(struct gs_node *n, void **self)
{
    *self = n; /* always on: INFO shows origin_enabled:0 when unconfigured */
    return gs_origin_node_start(n);
}

static void feature_client_closed(void *self, struct gs_client *c)
{
    (void)self;
    gs_origin_node_client_closed(c);
}

static bool feature_over_output_limit(void *self, struct gs_client *c)
{
    (void)self;
    return gs_origin_node_over_output_limit(c);
}

static void feature_apply_config(void *self)
{
    gs_origin_node_apply_config(self);
}

static void feature_info(void *self, struct core_buf *b)
{
    gs_origin_node_info(self, b);
}

static void feature_reset_stats(void *self)
{
    gs_origin_node_reset_stats(self);
}

static void feature_stop(void *self)
{
    gs_origin_node_stop(self);
}

/* docs/gridsync-origin.md, "Configuration" */
static const struct gs_option options[] = {
    GS_OPTION(origin, "origin", CORE_OPT_STRING, 0, 0, NULL, CORE_OPT_IMMUTABLE,
              "read-through origin URL template, e.g. http://host:port/items/{key} (empty = off)"),
    GS_OPTION(origin_timeout, "origin-timeout", CORE_OPT_INT, 1, 3600000, NULL, CORE_OPT_IMMUTABLE,
              "ms one origin fetch may take, queueing included"),
    GS_OPTION(origin_ttl, "origin-ttl", CORE_OPT_INT, 0, INT64_MAX / 2, NULL, CORE_OPT_IMMUTABLE,
              "ms TTL of a filled value without Cache-Control max-age (0 = none)"),
    GS_OPTION(origin_negative_ttl, "origin-negative-ttl", CORE_OPT_INT, 0, INT64_MAX / 2, NULL,
              CORE_OPT_IMMUTABLE, "ms a 404 from the origin is remembered (0 = not at all)"),
    GS_OPTION(origin_max_fetches, "origin-max-fetches", CORE_OPT_INT, 1, 65536, NULL,
              CORE_OPT_IMMUTABLE, "origin fetches in flight at once"),
    GS_OPTION(origin_queue, "origin-queue", CORE_OPT_INT, 0, 1000000, NULL, CORE_OPT_IMMUTABLE,
              "keys that may wait for a fetch slot; beyond, GET gets an error"),
    GS_OPTION(origin_coalesce, "origin-coalesce", CORE_OPT_BOOL, 0, 0, NULL, 0,
              "one origin fetch for concurrent misses of a key (no: one per request)"),
    {{NULL, 0, NULL, 0, 0, NULL, 0, NULL}, 0},
};

const struct gs_feature gs_origin_feature = {
    .name = "origin",
    .options = options,
    .start = feature_start,
    .client_closed = feature_client_closed,
    .over_output_limit = feature_over_output_limit,
    .apply_config = feature_apply_config,
    .info = feature_info,
    .reset_stats = feature_reset_stats,
    .stop = feature_stop,
};
