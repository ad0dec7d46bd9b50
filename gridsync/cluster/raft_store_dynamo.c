/*
 * Raft's persistent state in DynamoDB (contract and item layout in
 * raft_store_dynamo.h).
 *
 * Pieces: a request window over the registry's client (client_call), a
 * paginated Query (struct query), a batch deleter (struct deleter); the
 * attach-time reader (open_*), run on a private loop; and the running
 * store: one meta writer (meta_kick), a FIFO of log operations (struct op:
 * appends pipelined, truncate and snapshot_put as barriers), messages held
 * back while the meta item is not durable (struct held), the incarnation
 * fence timer and the garbage collector run after each snapshot.
 */
#include "gridsync/cluster/raft_store_dynamo.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base64.h"
#include "core/error.h"
#include "core/list.h"
#include "core/log.h"

#define ENTRY_CHUNKS   4096u  /* sk = index * ENTRY_CHUNKS + chunk */
#define SNAP_CHUNKS    65536u /* sk = index * SNAP_CHUNKS + chunk (snapshot partition) */
#define CHUNK_BYTES    (256u * 1024u)
#define WINDOW         32   /* requests of one store in flight, beyond: queued */
#define FENCE_MS       1000 /* re-read of the incarnation */
#define STORE_ATTEMPTS 24   /* about 40 s of backoff before giving up */
#define BATCH_DELETES  25   /* BatchWriteItem's limit */
#define COND_NOT_NEWER "attribute_not_exists(#i) OR #i <= :i"
#define COND_MINE      "#i = :i"

/* ------------------------------------------------------------ attributes */

static json_t *attr_n(uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "%" PRIu64, v);
    return json_pack("{s:s}", "N", buf);
}

static json_t *attr_s(const char *s)
{
    return json_pack("{s:s}", "S", s);
}

static bool get_n(json_t *item, const char *name, uint64_t *out)
{
    const char *v = json_string_value(json_object_get(json_object_get(item, name), "N"));
    if (v == NULL)
        return false;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (end == v || *end != '\0')
        return false;
    *out = (uint64_t)x;
    return true;
}

static uint64_t get_n_or(json_t *item, const char *name, uint64_t dflt)
{
    uint64_t v;
    return get_n(item, name, &v) ? v : dflt;
}

static const char *get_s(json_t *item, const char *name)
{
    return json_string_value(json_object_get(json_object_get(item, name), "S"));
}

/* The binary attribute name of item decoded into out (room for its
 * decoded maximum), or CORE_EPROTO; a missing attribute is 0 bytes. */
static ssize_t get_b(json_t *item, const char *name, uint8_t *out, size_t room)
{
    json_t *v = json_object_get(json_object_get(item, name), "B");
    if (v == NULL)
        return 0;
    size_t len = json_string_length(v);
    if (!json_is_string(v) || CORE_BASE64_DECODED_MAX(len) > room + 2)
        return CORE_EPROTO;
    /* Decode into a scratch buffer when the padding would overrun room. */
    if (CORE_BASE64_DECODED_MAX(len) > room) {
        uint8_t *tmp = malloc(CORE_BASE64_DECODED_MAX(len));
        if (tmp == NULL)
            return CORE_ENOMEM;
        ssize_t n = core_base64_decode(json_string_value(v), len, tmp);
        if (n >= 0 && (size_t)n > room)
            n = CORE_EPROTO;
        if (n > 0)
            memcpy(out, tmp, (size_t)n);
        free(tmp);
        return n;
    }
    return core_base64_decode(json_string_value(v), len, out);
}

static json_t *attr_b(const uint8_t *data, size_t len)
{
    char *text = malloc(CORE_BASE64_ENCODED_LEN(len) + 1);
    if (text == NULL)
        return NULL;
    core_base64_encode(data, len, text);
    json_t *v = json_pack("{s:s}", "B", text);
    free(text);
    return v;
}

/* ------------------------------------------------ a window of requests */

struct call;

struct client {
    struct gs_registry *ddb;
    unsigned inflight;
    struct core_list queue; /* struct call, not yet sent */
    struct core_list sent;  /* struct call, in flight */
};

struct call {
    struct core_list link;
    struct client *c;
    char op[20];
    json_t *body;
    gs_registry_cb cb;
    void *arg;
};

static void client_dispatch(struct client *c);

static void on_call_done(void *arg, int err, json_t *reply, const char *msg)
{
    struct call *k = arg;
    struct client *c = k->c;
    gs_registry_cb cb = k->cb;
    void *cbarg = k->arg;
    core_list_remove(&k->link);
    free(k);
    c->inflight--;
    cb(cbarg, err, reply, msg);
    /* cb may have freed the client (a fatal error exits instead). */
    if (c->ddb)
        client_dispatch(c);
}

static void client_dispatch(struct client *c)
{
    struct core_list *l;
    while (c->inflight < WINDOW && (l = core_list_first(&c->queue)) != NULL) {
        struct call *k = CORE_CONTAINER_OF(l, struct call, link);
        core_list_remove(l);
        core_list_push_back(&c->sent, &k->link);
        c->inflight++;
        json_t *body = k->body;
        k->body = NULL;
        int rc = gs_registry_call(c->ddb, k->op, body, on_call_done, k);
        if (rc < 0) {
            gs_registry_cb cb = k->cb;
            void *cbarg = k->arg;
            c->inflight--;
            core_list_remove(&k->link);
            free(k);
            cb(cbarg, rc, NULL, "cannot start a DynamoDB request");
            if (!c->ddb)
                return;
        }
    }
}

/* Queue op (body stolen); cb runs later, once. */
static void client_call(struct client *c, const char *op, json_t *body, gs_registry_cb cb,
                        void *arg)
{
    struct call *k = calloc(1, sizeof(*k));
    if (k == NULL || body == NULL) {
        free(k);
        json_decref(body);
        CORE_WARN("raft-store: out of memory building a %s", op);
        exit(EXIT_FAILURE);
    }
    k->c = c;
    snprintf(k->op, sizeof(k->op), "%s", op);
    k->body = body;
    k->cb = cb;
    k->arg = arg;
    core_list_push_back(&c->queue, &k->link);
    client_dispatch(c);
}

static int client_init(struct client *c, uv_loop_t *loop, const struct gs_registry_config *cfg)
{
    struct gs_registry_config rc = *cfg;
    if (rc.max_attempts == 0)
        rc.max_attempts = STORE_ATTEMPTS;
    c->inflight = 0;
    core_list_init(&c->queue);
    core_list_init(&c->sent);
    return gs_registry_new(&c->ddb, loop, &rc);
}

static void client_free(struct client *c)
{
    struct core_list *l;
    while ((l = core_list_first(&c->queue)) != NULL) {
        struct call *k = CORE_CONTAINER_OF(l, struct call, link);
        core_list_remove(l);
        json_decref(k->body);
        free(k);
    }
    /* Their callbacks will not run. */
    while ((l = core_list_first(&c->sent)) != NULL) {
        core_list_remove(l);
        free(CORE_CONTAINER_OF(l, struct call, link));
    }
    gs_registry_free(c->ddb);
    c->ddb = NULL;
}

/* ------------------------------------------------- Query, every page */

struct query {
    struct client *c;
    json_t *body;  /* the request, reused for every page */
    json_t *items; /* every page's items */
    void (*done)(struct query *q, int err, const char *msg);
};

static void on_query_page(void *arg, int err, json_t *reply, const char *msg)
{
    struct query *q = arg;
    if (err < 0) {
        q->done(q, err, msg);
        return;
    }
    json_array_extend(q->items, json_object_get(reply, "Items"));
    json_t *last = json_object_get(reply, "LastEvaluatedKey");
    if (last == NULL) {
        q->done(q, 0, NULL);
        return;
    }
    json_object_set(q->body, "ExclusiveStartKey", last);
    client_call(q->c, "Query", json_deep_copy(q->body), on_query_page, q);
}

/* Query pk between sk lo and hi (inclusive), consistent; projection may
 * be NULL (every attribute). */
static void query_start(struct query *q, struct client *c, const char *pk, uint64_t lo, uint64_t hi,
                        const char *projection,
                        void (*done)(struct query *q, int err, const char *msg))
{
    q->c = c;
    q->done = done;
    json_decref(q->items);
    json_decref(q->body);
    q->items = json_array();
    q->body = json_pack("{s:s,s:{s:s,s:s},s:{s:o,s:o,s:o},s:b}", "KeyConditionExpression",
                        "#p = :p AND #k BETWEEN :lo AND :hi", "ExpressionAttributeNames", "#p",
                        "pk", "#k", "sk", "ExpressionAttributeValues", ":p", attr_s(pk), ":lo",
                        attr_n(lo), ":hi", attr_n(hi), "ConsistentRead", 1);
    if (projection && q->body) {
        json_object_set_new(q->body, "ProjectionExpression", json_string(projection));
        /* DynamoDB refuses a name the expressions do not use. */
        if (strstr(projection, "#e"))
            json_object_set_new(json_object_get(q->body, "ExpressionAttributeNames"), "#e",
                                json_string("ep"));
    }
    client_call(c, "Query", json_deep_copy(q->body), on_query_page, q);
}

static void query_clear(struct query *q)
{
    json_decref(q->items);
    json_decref(q->body);
    q->items = q->body = NULL;
}

/* ------------------------------------------ BatchWriteItem deletions */

struct deleter {
    struct client *c;
    const char *table;
    json_t *reqs; /* DeleteRequest objects still to send */
    unsigned inflight;
    int err;
    char msg[200];
    void (*done)(struct deleter *d);
};

static void deleter_next(struct deleter *d);

static void on_deleted(void *arg, int err, json_t *reply, const char *msg)
{
    struct deleter *d = arg;
    d->inflight--;
    if (err < 0) {
        d->err = err;
        snprintf(d->msg, sizeof(d->msg), "%s", msg ? msg : core_strerror(err));
    } else {
        /* Items DynamoDB did not get to: sent again. */
        json_t *un = json_object_get(json_object_get(reply, "UnprocessedItems"), d->table);
        json_array_extend(d->reqs, un);
    }
    deleter_next(d);
}

static void deleter_next(struct deleter *d)
{
    while (d->err == 0 && json_array_size(d->reqs) > 0 && d->inflight < 4) {
        json_t *batch = json_array();
        while (json_array_size(batch) < BATCH_DELETES && json_array_size(d->reqs) > 0) {
            size_t last = json_array_size(d->reqs) - 1;
            json_array_append(batch, json_array_get(d->reqs, last));
            json_array_remove(d->reqs, last);
        }
        json_t *body = json_pack("{s:{s:o}}", "RequestItems", d->table, batch);
        d->inflight++;
        client_call(d->c, "BatchWriteItem", body, on_deleted, d);
    }
    if (d->inflight == 0 && (d->err != 0 || json_array_size(d->reqs) == 0))
        d->done(d);
}

static void deleter_add(struct deleter *d, const char *pk, uint64_t sk)
{
    json_array_append_new(d->reqs, json_pack("{s:{s:{s:o,s:o}}}", "DeleteRequest", "Key", "pk",
                                             attr_s(pk), "sk", attr_n(sk)));
}

/* --------------------------------------------------------- the store */

struct meta {
    uint64_t term, vote, inc, ep, start;
    uint64_t snap_index, snap_term, snap_conf_index, snap_size, snap_chunks;
    char *snap_conf; /* the configuration as JSON text, or NULL */
};

enum op_kind { OP_APPEND, OP_TRUNCATE, OP_SNAPSHOT };

struct store;

struct op {
    struct core_list link;
    struct store *s;
    enum op_kind kind;
    bool started, written;
    unsigned inflight;
    uint64_t meta_need; /* meta version that must be durable first */
    /* append */
    struct raft_io_append *areq;
    raft_io_append_cb acb;
    const struct raft_entry *entries;
    unsigned n;
    raft_index first;
    /* truncate */
    raft_index index;
    struct query q;
    /* snapshot */
    struct raft_io_snapshot_put *sreq;
    raft_io_snapshot_put_cb scb;
    const struct raft_snapshot *snap;
    unsigned trailing;
};

/* A message held back until the meta item is durable. */
struct held {
    struct core_list link;
    struct raft_io_send *req;
    struct raft_message msg;
    raft_io_send_cb cb;
    uint64_t need;
    char address[];
};

struct sget {
    struct core_list link;
    struct store *s;
    struct raft_io_snapshot_get *req;
    raft_io_snapshot_get_cb cb;
    uint64_t index, term, conf_index, size, chunks;
    char *conf;
    struct query q;
};

struct store {
    struct core_list link; /* in stores */
    struct raft_io *io;
    uv_loop_t *loop;
    struct gs_raft_store_config cfg;
    char pk[GS_RAFT_STORE_KEYLEN + 8];
    char snap_pk[GS_RAFT_STORE_KEYLEN + 16];
    struct client c;
    /* the uv io's own methods, kept */
    int (*send)(struct raft_io *, struct raft_io_send *, const struct raft_message *,
                raft_io_send_cb);
    void (*close)(struct raft_io *, raft_io_close_cb);
    /* loaded at attach, handed over by load */
    struct raft_entry *entries;
    size_t n_entries, cap_entries;
    raft_index start_index;
    struct raft_snapshot *snapshot;
    bool loaded;
    /* running state */
    struct meta meta;
    uint64_t meta_ver, meta_done, meta_sent;
    bool meta_inflight;
    raft_index next_index;
    struct core_list ops, held, sgets;
    bool in_progress, again;
    uv_timer_t fence;
    bool fence_inflight, fence_open;
    bool gc_running, gc_again;
    struct query gc_q;
    struct deleter gc_del;
    bool closing;
};

static struct core_list stores = {&stores, &stores};

static struct store *find(struct raft_io *io)
{
    for (struct core_list *l = stores.next; l != &stores; l = l->next) {
        struct store *s = CORE_CONTAINER_OF(l, struct store, link);
        if (s->io == io)
            return s;
    }
    return NULL;
}

static void fatal(struct store *s, const char *what, int err, const char *msg)
{
    if (err == CORE_ESTATE)
        CORE_WARN("raft-store: %s: %s refused: a newer incarnation of this node owns the "
                  "group's state (%s); stopping",
                  s->cfg.key, what, msg ? msg : "condition failed");
    else
        CORE_WARN("raft-store: %s: %s failed, not retried further (%s); stopping rather than "
                  "acknowledging a write that is not durable",
                  s->cfg.key, what, msg ? msg : core_strerror(err));
    fflush(NULL);
    exit(EXIT_FAILURE);
}

/* ------------------------------------------------------ item bodies */

static json_t *expr_values(uint64_t inc)
{
    return json_pack("{s:o}", ":i", attr_n(inc));
}

static json_t *conditioned(json_t *body, const char *cond, uint64_t inc)
{
    if (body == NULL)
        return NULL;
    json_object_set_new(body, "ConditionExpression", json_string(cond));
    json_object_set_new(body, "ExpressionAttributeNames", json_pack("{s:s}", "#i", "inc"));
    json_object_set_new(body, "ExpressionAttributeValues", expr_values(inc));
    return body;
}

static json_t *meta_body(const char *pk, const struct meta *m, const char *cond)
{
    json_t *it = json_object();
    json_object_set_new(it, "pk", attr_s(pk));
    json_object_set_new(it, "sk", attr_n(0));
    json_object_set_new(it, "term", attr_n(m->term));
    json_object_set_new(it, "vote", attr_n(m->vote));
    json_object_set_new(it, "inc", attr_n(m->inc));
    json_object_set_new(it, "ep", attr_n(m->ep));
    json_object_set_new(it, "start", attr_n(m->start));
    json_object_set_new(it, "si", attr_n(m->snap_index));
    json_object_set_new(it, "st", attr_n(m->snap_term));
    json_object_set_new(it, "sci", attr_n(m->snap_conf_index));
    json_object_set_new(it, "ssz", attr_n(m->snap_size));
    json_object_set_new(it, "sn", attr_n(m->snap_chunks));
    if (m->snap_conf)
        json_object_set_new(it, "sconf", attr_s(m->snap_conf));
    return conditioned(json_pack("{s:o}", "Item", it), cond, m->inc);
}

static void meta_from_item(json_t *it, struct meta *m)
{
    m->term = get_n_or(it, "term", 0);
    m->vote = get_n_or(it, "vote", 0);
    m->inc = get_n_or(it, "inc", 0);
    m->ep = get_n_or(it, "ep", 0);
    m->start = get_n_or(it, "start", 1);
    m->snap_index = get_n_or(it, "si", 0);
    m->snap_term = get_n_or(it, "st", 0);
    m->snap_conf_index = get_n_or(it, "sci", 0);
    m->snap_size = get_n_or(it, "ssz", 0);
    m->snap_chunks = get_n_or(it, "sn", 0);
    const char *conf = get_s(it, "sconf");
    free(m->snap_conf);
    m->snap_conf = conf ? strdup(conf) : NULL;
    if (m->start == 0)
        m->start = 1;
}

/* Chunk c of an entry's data (c 0 also carries the entry's fields). */
static json_t *entry_chunk_body(const struct store *s, raft_index index, const struct raft_entry *e,
                                unsigned c, unsigned chunks)
{
    const uint8_t *data = e->buf.base;
    size_t off = (size_t)c * CHUNK_BYTES;
    size_t len = e->buf.len - off < CHUNK_BYTES ? e->buf.len - off : CHUNK_BYTES;
    json_t *it = json_object();
    json_object_set_new(it, "pk", attr_s(s->pk));
    json_object_set_new(it, "sk", attr_n(index * ENTRY_CHUNKS + c));
    json_object_set_new(it, "ep", attr_n(s->meta.ep));
    json_object_set_new(it, "inc", attr_n(s->meta.inc));
    if (c == 0) {
        json_object_set_new(it, "t", attr_n(e->term));
        json_object_set_new(it, "y", attr_n(e->type));
        json_object_set_new(it, "n", attr_n(chunks));
        json_object_set_new(it, "z", attr_n(e->buf.len));
    }
    if (len > 0)
        json_object_set_new(it, "d", attr_b(data + off, len));
    return conditioned(json_pack("{s:o}", "Item", it), COND_NOT_NEWER, s->meta.inc);
}

static unsigned chunks_of(size_t len)
{
    return len == 0 ? 1 : (unsigned)((len + CHUNK_BYTES - 1) / CHUNK_BYTES);
}

static char *conf_to_json(const struct raft_configuration *conf)
{
    json_t *a = json_array();
    /* Ids are 64-bit hashes: as text, JSON integers are signed. */
    for (unsigned i = 0; i < conf->n; i++) {
        char id[24];
        snprintf(id, sizeof(id), "%llu", (unsigned long long)conf->servers[i].id);
        json_array_append_new(a, json_pack("{s:s,s:s,s:i}", "id", id, "a", conf->servers[i].address,
                                           "r", conf->servers[i].role));
    }
    char *text = json_dumps(a, JSON_COMPACT);
    json_decref(a);
    return text;
}

static int conf_from_json(const char *text, struct raft_configuration *conf)
{
    raft_configuration_init(conf);
    json_t *a = text ? json_loads(text, 0, NULL) : NULL;
    if (!json_is_array(a)) {
        json_decref(a);
        return RAFT_CORRUPT;
    }
    size_t i;
    json_t *v;
    int rv = 0;
    json_array_foreach(a, i, v)
    {
        const char *addr = json_string_value(json_object_get(v, "a"));
        const char *ids = json_string_value(json_object_get(v, "id"));
        unsigned long long id = ids ? strtoull(ids, NULL, 10) : 0;
        if (!addr || id == 0) {
            rv = RAFT_CORRUPT;
            break;
        }
        rv = raft_configuration_add(conf, (raft_id)id, addr,
                                    (int)json_integer_value(json_object_get(v, "r")));
        if (rv)
            break;
    }
    json_decref(a);
    if (rv)
        raft_configuration_close(conf);
    return rv;
}

/* Chunks of a snapshot as bodies, written in order. */
static json_t *snap_chunk_body(const struct store *s, const struct raft_snapshot *snap, uint64_t c,
                               size_t total)
{
    size_t off = (size_t)c * CHUNK_BYTES;
    size_t len = total - off < CHUNK_BYTES ? total - off : CHUNK_BYTES;
    uint8_t *buf = malloc(len ? len : 1);
    if (buf == NULL)
        return NULL;
    /* Gather [off, off + len) from the snapshot's buffers. */
    size_t pos = 0, got = 0;
    for (unsigned i = 0; i < snap->n_bufs && got < len; i++) {
        size_t bl = snap->bufs[i].len;
        if (off + got < pos + bl) {
            size_t from = off + got - pos;
            size_t take = bl - from < len - got ? bl - from : len - got;
            memcpy(buf + got, (const uint8_t *)snap->bufs[i].base + from, take);
            got += take;
        }
        pos += bl;
    }
    json_t *it = json_object();
    json_object_set_new(it, "pk", attr_s(s->snap_pk));
    json_object_set_new(it, "sk", attr_n(snap->index * SNAP_CHUNKS + c));
    json_object_set_new(it, "inc", attr_n(s->meta.inc));
    json_object_set_new(it, "d", attr_b(buf, len));
    free(buf);
    return conditioned(json_pack("{s:o}", "Item", it), COND_NOT_NEWER, s->meta.inc);
}

/* Assemble a snapshot from its chunk items (sorted by sk). */
static int snap_assemble(json_t *items, uint64_t index, uint64_t term, uint64_t conf_index,
                         const char *conf, uint64_t size, uint64_t chunks,
                         struct raft_snapshot **out)
{
    if (json_array_size(items) != chunks)
        return RAFT_CORRUPT;
    struct raft_snapshot *sn = raft_calloc(1, sizeof(*sn));
    uint8_t *data = raft_malloc(size ? size : 1);
    struct raft_buffer *bufs = raft_calloc(1, sizeof(*bufs));
    if (!sn || !data || !bufs) {
        raft_free(sn);
        raft_free(data);
        raft_free(bufs);
        return RAFT_NOMEM;
    }
    size_t got = 0;
    size_t i;
    json_t *it;
    int rv = 0;
    json_array_foreach(items, i, it)
    {
        uint64_t sk;
        if (!get_n(it, "sk", &sk) || sk != index * SNAP_CHUNKS + i) {
            rv = RAFT_CORRUPT;
            break;
        }
        ssize_t n = get_b(it, "d", data + got, size - got);
        if (n < 0) {
            rv = RAFT_CORRUPT;
            break;
        }
        got += (size_t)n;
    }
    if (rv == 0 && got != size)
        rv = RAFT_CORRUPT;
    if (rv == 0)
        rv = conf_from_json(conf, &sn->configuration);
    if (rv) {
        raft_free(sn);
        raft_free(data);
        raft_free(bufs);
        return rv;
    }
    sn->index = index;
    sn->term = term;
    sn->configuration_index = conf_index;
    bufs[0].base = data;
    bufs[0].len = size;
    sn->bufs = bufs;
    sn->n_bufs = 1;
    *out = sn;
    return 0;
}

static void snapshot_destroy(struct raft_snapshot *sn)
{
    if (!sn)
        return;
    raft_configuration_close(&sn->configuration);
    for (unsigned i = 0; i < sn->n_bufs; i++)
        raft_free(sn->bufs[i].base);
    raft_free(sn->bufs);
    raft_free(sn);
}

/* ------------------------------------------- synchronous, at attach */

struct sync {
    uv_loop_t loop;
    struct client c;
    bool done;
    int err;
    json_t *reply;
    char msg[320];
};

static int sync_open(struct sync *y, const struct gs_registry_config *cfg)
{
    memset(y, 0, sizeof(*y));
    if (uv_loop_init(&y->loop) < 0)
        return CORE_EIO;
    int rc = client_init(&y->c, &y->loop, cfg);
    if (rc < 0)
        uv_loop_close(&y->loop);
    return rc;
}

static void sync_close(struct sync *y)
{
    client_free(&y->c);
    uv_run(&y->loop, UV_RUN_DEFAULT);
    uv_loop_close(&y->loop);
    json_decref(y->reply);
}

static void on_sync(void *arg, int err, json_t *reply, const char *msg)
{
    struct sync *y = arg;
    y->done = true;
    y->err = err;
    json_decref(y->reply);
    y->reply = json_incref(reply);
    snprintf(y->msg, sizeof(y->msg), "%s", msg ? msg : "");
}

/* One request, waited for on the private loop; its reply in y->reply. */
static int sync_call(struct sync *y, const char *op, json_t *body)
{
    y->done = false;
    client_call(&y->c, op, body, on_sync, y);
    while (!y->done && uv_run(&y->loop, UV_RUN_ONCE) != 0) {
    }
    if (!y->done) {
        snprintf(y->msg, sizeof(y->msg), "%s: no reply", op);
        return CORE_EIO;
    }
    return y->err;
}

/* Set by the completions the private loop waits for (one at a time). */
static bool sync_flag;

static void on_sync_query(struct query *q, int err, const char *msg)
{
    (void)msg;
    sync_flag = true;
    if (err < 0) {
        json_decref(q->items);
        q->items = NULL;
    }
}

static int sync_query(struct sync *y, struct query *q, const char *pk, uint64_t lo, uint64_t hi,
                      const char *projection)
{
    sync_flag = false;
    query_start(q, &y->c, pk, lo, hi, projection, on_sync_query);
    while (!sync_flag && uv_run(&y->loop, UV_RUN_ONCE) != 0) {
    }
    return sync_flag && q->items ? 0 : CORE_EIO;
}

static void on_sync_deleted(struct deleter *d)
{
    (void)d;
    sync_flag = true;
}

static int sync_delete(struct sync *y, struct deleter *d)
{
    sync_flag = false;
    d->c = &y->c;
    d->done = on_sync_deleted;
    deleter_next(d);
    while (!sync_flag && uv_run(&y->loop, UV_RUN_ONCE) != 0) {
    }
    return sync_flag ? d->err : CORE_EIO;
}

static int ensure_table(struct store *s, struct sync *y)
{
    bool created = false;
    for (int tries = 0; tries < 600; tries++) {
        int rc = sync_call(y, "DescribeTable", json_object());
        if (rc == CORE_ENOTFOUND && !created) {
            created = true;
            rc = sync_call(y, "CreateTable",
                           json_pack("{s:[{s:s,s:s},{s:s,s:s}],s:[{s:s,s:s},{s:s,s:s}],s:s}",
                                     "AttributeDefinitions", "AttributeName", "pk", "AttributeType",
                                     "S", "AttributeName", "sk", "AttributeType", "N", "KeySchema",
                                     "AttributeName", "pk", "KeyType", "HASH", "AttributeName",
                                     "sk", "KeyType", "RANGE", "BillingMode", "PAY_PER_REQUEST"));
            if (rc < 0 && rc != CORE_EEXISTS) {
                CORE_WARN("raft-store: %s%s: %s", s->cfg.ddb.endpoint, s->cfg.ddb.table, y->msg);
                return rc;
            }
            continue;
        }
        if (rc < 0) {
            CORE_WARN("raft-store: %s%s: %s", s->cfg.ddb.endpoint, s->cfg.ddb.table, y->msg);
            return rc;
        }
        json_t *t = json_object_get(y->reply, "Table");
        json_t *ks = json_object_get(t, "KeySchema");
        bool hash = false, range = false;
        size_t i;
        json_t *k;
        json_array_foreach(ks, i, k)
        {
            const char *name = json_string_value(json_object_get(k, "AttributeName"));
            const char *type = json_string_value(json_object_get(k, "KeyType"));
            if (name && type && strcmp(name, "pk") == 0 && strcmp(type, "HASH") == 0)
                hash = true;
            if (name && type && strcmp(name, "sk") == 0 && strcmp(type, "RANGE") == 0)
                range = true;
        }
        if (!hash || !range) {
            CORE_WARN("raft-store: table %s has not the key (pk string HASH, sk number RANGE) "
                      "the Raft state needs: give --raft-store a table of its own",
                      s->cfg.ddb.table);
            return CORE_EINVAL;
        }
        const char *st = json_string_value(json_object_get(t, "TableStatus"));
        if (!st || strcmp(st, "ACTIVE") == 0)
            return 0;
        nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL); /* CREATING */
    }
    CORE_WARN("raft-store: table %s never became ACTIVE", s->cfg.ddb.table);
    return CORE_ETIMEOUT;
}

static int push_entry(struct store *s, raft_term term, unsigned short type, void *data, size_t len)
{
    if (s->n_entries == s->cap_entries) {
        size_t cap = s->cap_entries ? 2 * s->cap_entries : 64;
        struct raft_entry *e = realloc(s->entries, cap * sizeof(*e));
        if (e == NULL)
            return CORE_ENOMEM;
        s->entries = e;
        s->cap_entries = cap;
    }
    struct raft_entry *e = &s->entries[s->n_entries++];
    e->term = term;
    e->type = type;
    e->buf.base = data;
    e->buf.len = len;
    e->batch = data; /* one batch per entry: freed by raft with the entry */
    return 0;
}

/* The log from the items of one Query: the contiguous run from meta.start
 * of the current epoch whose incarnations do not decrease, complete in
 * its chunks. Anything else (below the start, an older epoch, past a gap
 * or a stale writer's entry) is added to del. */
static int parse_log(struct store *s, json_t *items, struct deleter *del)
{
    raft_index expect = s->meta.start;
    uint64_t prev_inc = 0;
    bool cut = false;
    /* the entry being assembled */
    bool open = false;
    uint64_t e_term = 0, e_type = 0, e_n = 0, e_got = 0, e_size = 0, e_fill = 0, e_inc = 0;
    uint64_t e_first_sk = 0;
    uint8_t *e_data = NULL;
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        uint64_t sk, ep = get_n_or(it, "ep", UINT64_MAX);
        if (!get_n(it, "sk", &sk))
            continue;
        uint64_t idx = sk / ENTRY_CHUNKS, c = sk % ENTRY_CHUNKS;
        if (idx < s->meta.start || ep != s->meta.ep || cut) {
            deleter_add(del, s->pk, sk);
            continue;
        }
        bool bad = false;
        if (c == 0) {
            if (open || idx != expect) {
                bad = true;
            } else {
                e_inc = get_n_or(it, "inc", 0);
                e_term = get_n_or(it, "t", 0);
                e_type = get_n_or(it, "y", 0);
                e_n = get_n_or(it, "n", 0);
                e_size = get_n_or(it, "z", 0);
                if (e_inc < prev_inc || e_term == 0 || e_n == 0 || e_n >= ENTRY_CHUNKS ||
                    e_size > (uint64_t)e_n * CHUNK_BYTES)
                    bad = true;
                else if ((e_data = raft_malloc(e_size ? e_size : 8)) == NULL)
                    return CORE_ENOMEM;
                open = !bad;
                e_got = 0;
                e_fill = 0;
                e_first_sk = sk;
            }
        } else if (!open || idx != expect || c != e_got) {
            bad = true;
        }
        if (!bad) {
            ssize_t n = get_b(it, "d", e_data + e_fill, e_size - e_fill);
            if (n < 0)
                bad = true;
            else {
                e_fill += (uint64_t)n;
                e_got++;
            }
        }
        if (bad) {
            /* Cut here: this item, the entry it belongs to, everything after. */
            cut = true;
            if (open) {
                for (uint64_t k = e_first_sk; k < sk; k++)
                    deleter_add(del, s->pk, k);
                raft_free(e_data);
                e_data = NULL;
                open = false;
            }
            deleter_add(del, s->pk, sk);
            continue;
        }
        if (e_got == e_n) {
            if (e_fill != e_size) {
                cut = true;
                for (uint64_t k = e_first_sk; k <= sk; k++)
                    deleter_add(del, s->pk, k);
                raft_free(e_data);
                e_data = NULL;
                open = false;
                continue;
            }
            int rc = push_entry(s, e_term, (unsigned short)e_type, e_data, e_size);
            if (rc < 0) {
                raft_free(e_data);
                return rc;
            }
            e_data = NULL;
            open = false;
            prev_inc = e_inc;
            expect++;
        }
    }
    if (open) { /* its last chunks are missing */
        for (uint64_t k = e_first_sk; k < e_first_sk + e_got; k++)
            deleter_add(del, s->pk, k);
        raft_free(e_data);
    }
    return 0;
}

static int open_state(struct store *s)
{
    struct sync y;
    int rc = sync_open(&y, &s->cfg.ddb);
    if (rc < 0)
        return rc;
    struct query q = {0};
    struct deleter del = {.table = s->cfg.ddb.table, .reqs = json_array()};
    rc = ensure_table(s, &y);
    if (rc < 0)
        goto out;
    /* The meta item, then this process's incarnation. */
    rc = sync_call(&y, "GetItem",
                   json_pack("{s:{s:o,s:o},s:b}", "Key", "pk", attr_s(s->pk), "sk", attr_n(0),
                             "ConsistentRead", 1));
    if (rc < 0)
        goto fail;
    json_t *item = json_object_get(y.reply, "Item");
    if (item)
        meta_from_item(item, &s->meta);
    else
        s->meta.start = 1;
    s->meta.inc++;
    rc = sync_call(&y, "PutItem", meta_body(s->pk, &s->meta, COND_NOT_NEWER));
    if (rc < 0)
        goto fail;
    /* The log. */
    rc = sync_query(&y, &q, s->pk, ENTRY_CHUNKS, UINT64_MAX / 2, NULL);
    if (rc < 0) {
        snprintf(y.msg, sizeof(y.msg), "Query of the log failed");
        goto fail;
    }
    rc = parse_log(s, q.items, &del);
    if (rc < 0)
        goto out;
    if (json_array_size(del.reqs) > 0) {
        CORE_INFO("raft-store: %s: deleting %zu items that are not part of the log", s->cfg.key,
                  json_array_size(del.reqs));
        rc = sync_delete(&y, &del);
        if (rc < 0) {
            snprintf(y.msg, sizeof(y.msg), "%s", del.msg);
            goto fail;
        }
    }
    s->start_index = s->meta.start;
    if (s->meta.snap_index > 0) {
        rc = sync_query(&y, &q, s->snap_pk, s->meta.snap_index * SNAP_CHUNKS,
                        s->meta.snap_index * SNAP_CHUNKS + SNAP_CHUNKS - 1, NULL);
        if (rc == 0)
            rc = snap_assemble(q.items, s->meta.snap_index, s->meta.snap_term,
                               s->meta.snap_conf_index, s->meta.snap_conf, s->meta.snap_size,
                               s->meta.snap_chunks, &s->snapshot);
        if (rc != 0) {
            CORE_WARN("raft-store: %s: the snapshot at %" PRIu64 " cannot be read (%d)", s->cfg.key,
                      s->meta.snap_index, rc);
            rc = CORE_EPROTO;
            goto out;
        }
        raft_index last = s->start_index + s->n_entries - 1;
        if (s->n_entries == 0 || last < s->snapshot->index) {
            for (size_t i = 0; i < s->n_entries; i++)
                raft_free(s->entries[i].batch);
            s->n_entries = 0;
            s->start_index = s->snapshot->index + 1;
        }
    }
    s->next_index = s->start_index + s->n_entries;
    CORE_INFO("raft-store: %s: term %" PRIu64 ", %zu entries from %" PRIu64 "%s, incarnation "
              "%" PRIu64,
              s->cfg.key, s->meta.term, s->n_entries, (uint64_t)s->start_index,
              s->snapshot ? ", a snapshot" : "", s->meta.inc);
    rc = 0;
    goto out;
fail:
    CORE_WARN("raft-store: %s%s (%s): %s", s->cfg.ddb.endpoint, s->cfg.ddb.table, s->cfg.key,
              y.msg);
out:
    query_clear(&q);
    json_decref(del.reqs);
    sync_close(&y);
    return rc;
}

/* Write entry (index) and then the meta item, waited for: bootstrap and
 * recover, before the group runs. */
static int sync_entry_then_meta(struct store *s, raft_index index, const struct raft_entry *e)
{
    struct sync y;
    int rc = sync_open(&y, &s->cfg.ddb);
    if (rc < 0)
        return RAFT_IOERR;
    unsigned chunks = chunks_of(e->buf.len);
    for (unsigned c = 0; c < chunks && rc == 0; c++)
        rc = sync_call(&y, "PutItem", entry_chunk_body(s, index, e, c, chunks));
    if (rc == 0)
        rc = sync_call(&y, "PutItem", meta_body(s->pk, &s->meta, COND_MINE));
    if (rc < 0)
        CORE_WARN("raft-store: %s: %s", s->cfg.key, y.msg);
    sync_close(&y);
    return rc < 0 ? RAFT_IOERR : 0;
}

/* --------------------------------------------------- the running store */

static void progress(struct store *s);

static void on_meta_done(void *arg, int err, json_t *reply, const char *msg)
{
    (void)reply;
    struct store *s = arg;
    if (err < 0)
        fatal(s, "writing term/vote/snapshot (meta item)", err, msg);
    s->meta_inflight = false;
    s->meta_done = s->meta_sent;
    progress(s);
}

static void meta_kick(struct store *s)
{
    if (s->meta_inflight || s->meta_done >= s->meta_ver || s->closing)
        return;
    s->meta_inflight = true;
    s->meta_sent = s->meta_ver;
    /* Not through the window: a term or vote must not wait behind entries. */
    int rc = gs_registry_call(s->c.ddb, "PutItem", meta_body(s->pk, &s->meta, COND_MINE),
                              on_meta_done, s);
    if (rc < 0)
        fatal(s, "writing the meta item", rc, NULL);
}

static void on_entry_put(void *arg, int err, json_t *reply, const char *msg)
{
    (void)reply;
    struct op *o = arg;
    if (err < 0)
        fatal(o->s, "appending log entries", err, msg);
    if (--o->inflight == 0) {
        o->written = true;
        progress(o->s);
    }
}

static void start_append(struct op *o)
{
    struct store *s = o->s;
    o->started = true;
    o->inflight = 1; /* held while the requests are queued */
    for (unsigned i = 0; i < o->n; i++) {
        const struct raft_entry *e = &o->entries[i];
        unsigned chunks = chunks_of(e->buf.len);
        for (unsigned c = 0; c < chunks; c++) {
            o->inflight++;
            client_call(&s->c, "PutItem", entry_chunk_body(s, o->first + i, e, c, chunks),
                        on_entry_put, o);
        }
    }
    on_entry_put(o, 0, NULL, NULL);
}

static void on_truncated_item(void *arg, int err, json_t *reply, const char *msg)
{
    (void)reply;
    struct op *o = arg;
    /* Already gone (a retry of a delete that went through) is fine. */
    if (err < 0)
        fatal(o->s, "truncating the log", err, msg);
    if (--o->inflight == 0) {
        o->written = true;
        progress(o->s);
    }
}

static void on_truncate_query(struct query *q, int err, const char *msg)
{
    struct op *o = CORE_CONTAINER_OF(q, struct op, q);
    struct store *s = o->s;
    if (err < 0)
        fatal(s, "listing the log to truncate", err, msg);
    o->inflight = 1;
    size_t i;
    json_t *it;
    json_array_foreach(q->items, i, it)
    {
        uint64_t sk;
        if (!get_n(it, "sk", &sk))
            continue;
        o->inflight++;
        json_t *body = json_pack("{s:{s:o,s:o}}", "Key", "pk", attr_s(s->pk), "sk", attr_n(sk));
        client_call(&s->c, "DeleteItem",
                    conditioned(body, "attribute_not_exists(#i) OR #i <= :i", s->meta.inc),
                    on_truncated_item, o);
    }
    query_clear(q);
    on_truncated_item(o, 0, NULL, NULL);
}

static void on_snap_chunk(void *arg, int err, json_t *reply, const char *msg)
{
    (void)reply;
    struct op *o = arg;
    struct store *s = o->s;
    if (err < 0)
        fatal(s, "writing a snapshot", err, msg);
    if (--o->inflight > 0)
        return;
    /* Every chunk is durable: point the meta item at the snapshot. */
    const struct raft_snapshot *sn = o->snap;
    size_t total = 0;
    for (unsigned i = 0; i < sn->n_bufs; i++)
        total += sn->bufs[i].len;
    char *conf = conf_to_json(&sn->configuration);
    if (conf == NULL)
        fatal(s, "encoding a snapshot's configuration", CORE_ENOMEM, NULL);
    free(s->meta.snap_conf);
    s->meta.snap_conf = conf;
    s->meta.snap_index = sn->index;
    s->meta.snap_term = sn->term;
    s->meta.snap_conf_index = sn->configuration_index;
    s->meta.snap_size = total;
    s->meta.snap_chunks = total ? (total + CHUNK_BYTES - 1) / CHUNK_BYTES : 0;
    if (o->trailing == 0) {
        /* Installed from the leader: the whole log goes, in a new epoch. */
        s->meta.ep++;
        s->meta.start = sn->index + 1;
    } else if (sn->index > o->trailing && sn->index - o->trailing + 1 > s->meta.start) {
        s->meta.start = sn->index - o->trailing + 1;
    }
    o->meta_need = ++s->meta_ver;
    o->written = true;
    meta_kick(s);
}

static void start_barrier(struct op *o)
{
    struct store *s = o->s;
    o->started = true;
    if (o->kind == OP_TRUNCATE) {
        query_start(&o->q, &s->c, s->pk, o->index * ENTRY_CHUNKS, UINT64_MAX / 2, "#p, #k",
                    on_truncate_query);
        return;
    }
    size_t total = 0;
    for (unsigned i = 0; i < o->snap->n_bufs; i++)
        total += o->snap->bufs[i].len;
    uint64_t chunks = total ? (total + CHUNK_BYTES - 1) / CHUNK_BYTES : 0;
    if (chunks >= SNAP_CHUNKS)
        fatal(s, "writing a snapshot", CORE_ETOOBIG, "snapshot too large");
    o->inflight = 1;
    for (uint64_t c = 0; c < chunks; c++) {
        o->inflight++;
        client_call(&s->c, "PutItem", snap_chunk_body(s, o->snap, c, total), on_snap_chunk, o);
    }
    on_snap_chunk(o, 0, NULL, NULL);
}

/* ---- garbage: entries below the log's start or of an older epoch, older
 * snapshots. Best effort: what is left is ignored by load and collected
 * by the next pass. */

static void gc_start(struct store *s);

static void on_gc_deleted(struct deleter *d)
{
    struct store *s = CORE_CONTAINER_OF(d, struct store, gc_del);
    if (d->err < 0)
        CORE_WARN("raft-store: %s: garbage left for later: %s", s->cfg.key, d->msg);
    json_decref(d->reqs);
    d->reqs = NULL;
    s->gc_running = false;
    if (s->gc_again)
        gc_start(s);
}

static void on_gc_snaps(struct query *q, int err, const char *msg)
{
    struct store *s = CORE_CONTAINER_OF(q, struct store, gc_q);
    if (err < 0) {
        CORE_WARN("raft-store: %s: garbage left for later: %s", s->cfg.key, msg);
    } else {
        size_t i;
        json_t *it;
        json_array_foreach(q->items, i, it)
        {
            uint64_t sk;
            if (get_n(it, "sk", &sk))
                deleter_add(&s->gc_del, s->snap_pk, sk);
        }
    }
    query_clear(q);
    s->gc_del.err = 0;
    deleter_next(&s->gc_del);
}

static void on_gc_log(struct query *q, int err, const char *msg)
{
    struct store *s = CORE_CONTAINER_OF(q, struct store, gc_q);
    if (err >= 0) {
        size_t i;
        json_t *it;
        json_array_foreach(q->items, i, it)
        {
            uint64_t sk, ep = get_n_or(it, "ep", UINT64_MAX);
            if (get_n(it, "sk", &sk) && (sk / ENTRY_CHUNKS < s->meta.start || ep < s->meta.ep))
                deleter_add(&s->gc_del, s->pk, sk);
        }
    } else {
        CORE_WARN("raft-store: %s: garbage left for later: %s", s->cfg.key, msg);
    }
    uint64_t below = s->meta.snap_index * SNAP_CHUNKS;
    if (below == 0) {
        query_clear(q);
        deleter_next(&s->gc_del);
        return;
    }
    query_start(q, &s->c, s->snap_pk, 0, below - 1, "#p, #k", on_gc_snaps);
}

static void gc_start(struct store *s)
{
    if (s->gc_running || s->closing) {
        s->gc_again = true;
        return;
    }
    s->gc_running = true;
    s->gc_again = false;
    s->gc_del.c = &s->c;
    s->gc_del.table = s->cfg.ddb.table;
    s->gc_del.reqs = json_array();
    s->gc_del.err = 0;
    s->gc_del.inflight = 0;
    s->gc_del.done = on_gc_deleted;
    query_start(&s->gc_q, &s->c, s->pk, ENTRY_CHUNKS, UINT64_MAX / 2, "#p, #k, #e", on_gc_log);
}

static void complete(struct op *o)
{
    struct store *s = o->s;
    core_list_remove(&o->link);
    if (o->kind == OP_APPEND)
        o->acb(o->areq, 0);
    else if (o->kind == OP_SNAPSHOT) {
        o->scb(o->sreq, 0);
        gc_start(s);
    }
    query_clear(&o->q);
    free(o);
}

static void flush_held(struct store *s)
{
    struct core_list *l;
    while ((l = core_list_first(&s->held)) != NULL) {
        struct held *h = CORE_CONTAINER_OF(l, struct held, link);
        if (s->meta_done < h->need)
            break;
        core_list_remove(l);
        h->msg.server_address = h->address;
        int rv = s->send(s->io, h->req, &h->msg, h->cb);
        if (rv != 0)
            h->cb(h->req, rv);
        free(h);
    }
}

static void progress(struct store *s)
{
    if (s->in_progress) {
        s->again = true;
        return;
    }
    s->in_progress = true;
    do {
        s->again = false;
        meta_kick(s);
        struct core_list *l;
        while (!s->closing && (l = core_list_first(&s->ops)) != NULL) {
            struct op *o = CORE_CONTAINER_OF(l, struct op, link);
            if (!o->written || s->meta_done < o->meta_need)
                break;
            complete(o);
        }
        bool first = true, barrier = false;
        for (l = s->ops.next; !s->closing && l != &s->ops; l = l->next) {
            struct op *o = CORE_CONTAINER_OF(l, struct op, link);
            if (!o->started) {
                if (o->kind == OP_APPEND && barrier)
                    break;
                if (o->kind != OP_APPEND && !first)
                    break;
                if (o->kind == OP_APPEND)
                    start_append(o);
                else
                    start_barrier(o);
            }
            if (o->kind != OP_APPEND)
                barrier = true;
            first = false;
        }
        if (!s->closing)
            flush_held(s);
    } while (s->again);
    s->in_progress = false;
}

static struct op *op_new(struct store *s, enum op_kind kind)
{
    struct op *o = calloc(1, sizeof(*o));
    if (o == NULL)
        return NULL;
    o->s = s;
    o->kind = kind;
    core_list_push_back(&s->ops, &o->link);
    return o;
}

static void on_fence(void *arg, int err, json_t *reply, const char *msg)
{
    struct store *s = arg;
    s->fence_inflight = false;
    if (err < 0) {
        CORE_DEBUG("raft-store: %s: incarnation check: %s", s->cfg.key, msg);
        return;
    }
    uint64_t inc = get_n_or(json_object_get(reply, "Item"), "inc", 0);
    if (inc != s->meta.inc)
        fatal(s, "the incarnation check", CORE_ESTATE, "the meta item names another incarnation");
}

static void on_fence_timer(uv_timer_t *t)
{
    struct store *s = t->data;
    if (s->fence_inflight || s->closing)
        return;
    json_t *body = json_pack("{s:{s:o,s:o},s:b,s:s,s:{s:s}}", "Key", "pk", attr_s(s->pk), "sk",
                             attr_n(0), "ConsistentRead", 1, "ProjectionExpression", "#i",
                             "ExpressionAttributeNames", "#i", "inc");
    if (gs_registry_call(s->c.ddb, "GetItem", body, on_fence, s) == 0)
        s->fence_inflight = true;
}

/* ------------------------------------------------- raft_io methods */

static int m_load(struct raft_io *io, raft_term *term, raft_id *voted_for,
                  struct raft_snapshot **snapshot, raft_index *start_index,
                  struct raft_entry *entries[], size_t *n_entries)
{
    struct store *s = find(io);
    if (s->loaded)
        return RAFT_INVALID;
    s->loaded = true;
    *term = s->meta.term;
    *voted_for = s->meta.vote;
    *snapshot = s->snapshot;
    s->snapshot = NULL;
    *start_index = s->start_index;
    *n_entries = s->n_entries;
    *entries = NULL;
    if (s->n_entries > 0) {
        *entries = raft_malloc(s->n_entries * sizeof(**entries));
        if (*entries == NULL)
            return RAFT_NOMEM;
        memcpy(*entries, s->entries, s->n_entries * sizeof(**entries));
    }
    free(s->entries);
    s->entries = NULL;
    s->n_entries = s->cap_entries = 0;
    return 0;
}

static int m_bootstrap(struct raft_io *io, const struct raft_configuration *conf)
{
    struct store *s = find(io);
    if (s->meta.term != 0 || s->n_entries > 0 || s->snapshot)
        return RAFT_CANTBOOTSTRAP;
    struct raft_buffer buf;
    int rv = raft_configuration_encode(conf, &buf);
    if (rv != 0)
        return rv;
    struct raft_entry e = {.term = 1, .type = RAFT_CHANGE, .buf = buf, .batch = buf.base};
    s->meta.term = 1;
    s->meta.vote = 0;
    rv = sync_entry_then_meta(s, 1, &e);
    if (rv == 0 && push_entry(s, 1, RAFT_CHANGE, buf.base, buf.len) == 0) {
        s->start_index = 1;
        s->next_index = 2;
        return 0;
    }
    s->meta.term = 0;
    raft_free(buf.base);
    return rv ? rv : RAFT_NOMEM;
}

static int m_recover(struct raft_io *io, const struct raft_configuration *conf)
{
    struct store *s = find(io);
    struct raft_buffer buf;
    int rv = raft_configuration_encode(conf, &buf);
    if (rv != 0)
        return rv;
    raft_term term = s->meta.term ? s->meta.term : 1;
    struct raft_entry e = {.term = term, .type = RAFT_CHANGE, .buf = buf, .batch = buf.base};
    s->meta.term = term;
    rv = sync_entry_then_meta(s, s->next_index, &e);
    if (rv == 0 && push_entry(s, term, RAFT_CHANGE, buf.base, buf.len) == 0) {
        s->next_index++;
        return 0;
    }
    raft_free(buf.base);
    return rv ? rv : RAFT_NOMEM;
}

static int m_set_term(struct raft_io *io, raft_term term)
{
    struct store *s = find(io);
    s->meta.term = term;
    s->meta.vote = 0;
    s->meta_ver++;
    meta_kick(s);
    return 0;
}

static int m_set_vote(struct raft_io *io, raft_id id)
{
    struct store *s = find(io);
    s->meta.vote = id;
    s->meta_ver++;
    meta_kick(s);
    return 0;
}

static int m_send(struct raft_io *io, struct raft_io_send *req, const struct raft_message *msg,
                  raft_io_send_cb cb)
{
    struct store *s = find(io);
    if (core_list_empty(&s->held) && s->meta_done >= s->meta_ver)
        return s->send(io, req, msg, cb);
    size_t alen = msg->server_address ? strlen(msg->server_address) : 0;
    struct held *h = malloc(sizeof(*h) + alen + 1);
    if (h == NULL)
        return RAFT_NOMEM;
    h->req = req;
    h->msg = *msg;
    h->cb = cb;
    h->need = s->meta_ver;
    memcpy(h->address, alen ? msg->server_address : "", alen + 1);
    core_list_push_back(&s->held, &h->link);
    return 0;
}

static int m_append(struct raft_io *io, struct raft_io_append *req,
                    const struct raft_entry entries[], unsigned n, raft_io_append_cb cb)
{
    struct store *s = find(io);
    if (s->closing)
        return RAFT_CANCELED;
    struct op *o = op_new(s, OP_APPEND);
    if (o == NULL)
        return RAFT_NOMEM;
    o->areq = req;
    o->acb = cb;
    o->entries = entries;
    o->n = n;
    o->first = s->next_index;
    o->meta_need = s->meta_ver;
    s->next_index += n;
    progress(s);
    return 0;
}

static int m_truncate(struct raft_io *io, raft_index index)
{
    struct store *s = find(io);
    if (s->closing)
        return RAFT_CANCELED;
    struct op *o = op_new(s, OP_TRUNCATE);
    if (o == NULL)
        return RAFT_NOMEM;
    o->index = index;
    s->next_index = index;
    progress(s);
    return 0;
}

static int m_snapshot_put(struct raft_io *io, unsigned trailing, struct raft_io_snapshot_put *req,
                          const struct raft_snapshot *snapshot, raft_io_snapshot_put_cb cb)
{
    struct store *s = find(io);
    if (s->closing)
        return RAFT_CANCELED;
    struct op *o = op_new(s, OP_SNAPSHOT);
    if (o == NULL)
        return RAFT_NOMEM;
    o->sreq = req;
    o->scb = cb;
    o->snap = snapshot;
    o->trailing = trailing;
    if (trailing == 0)
        s->next_index = snapshot->index + 1;
    progress(s);
    return 0;
}

static void on_sget_query(struct query *q, int err, const char *msg)
{
    struct sget *g = CORE_CONTAINER_OF(q, struct sget, q);
    struct store *s = g->s;
    if (err < 0)
        fatal(s, "reading the snapshot", err, msg);
    struct raft_snapshot *sn = NULL;
    int rv =
        snap_assemble(q->items, g->index, g->term, g->conf_index, g->conf, g->size, g->chunks, &sn);
    core_list_remove(&g->link);
    query_clear(q);
    free(g->conf);
    raft_io_snapshot_get_cb cb = g->cb;
    struct raft_io_snapshot_get *req = g->req;
    free(g);
    cb(req, sn, rv);
}

static int m_snapshot_get(struct raft_io *io, struct raft_io_snapshot_get *req,
                          raft_io_snapshot_get_cb cb)
{
    struct store *s = find(io);
    if (s->meta.snap_index == 0 || s->closing)
        return RAFT_NOTFOUND;
    struct sget *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return RAFT_NOMEM;
    g->s = s;
    g->req = req;
    g->cb = cb;
    g->index = s->meta.snap_index;
    g->term = s->meta.snap_term;
    g->conf_index = s->meta.snap_conf_index;
    g->size = s->meta.snap_size;
    g->chunks = s->meta.snap_chunks;
    g->conf = s->meta.snap_conf ? strdup(s->meta.snap_conf) : NULL;
    core_list_push_back(&s->sgets, &g->link);
    query_start(&g->q, &s->c, s->snap_pk, g->index * SNAP_CHUNKS,
                g->index * SNAP_CHUNKS + SNAP_CHUNKS - 1, NULL, on_sget_query);
    return 0;
}

static void fence_closed(uv_handle_t *h)
{
    (void)h;
}

static void m_close(struct raft_io *io, raft_io_close_cb cb)
{
    struct store *s = find(io);
    s->closing = true;
    if (s->fence_open) {
        uv_close((uv_handle_t *)&s->fence, fence_closed);
        s->fence_open = false;
    }
    /* Requests in flight are dropped (no callback); what raft waits for
     * is failed, as libraft's uv io does on close. */
    client_free(&s->c);
    struct core_list *l;
    while ((l = core_list_first(&s->ops)) != NULL) {
        struct op *o = CORE_CONTAINER_OF(l, struct op, link);
        core_list_remove(l);
        if (o->kind == OP_APPEND)
            o->acb(o->areq, RAFT_CANCELED);
        else if (o->kind == OP_SNAPSHOT)
            o->scb(o->sreq, RAFT_CANCELED);
        query_clear(&o->q);
        free(o);
    }
    while ((l = core_list_first(&s->held)) != NULL) {
        struct held *h = CORE_CONTAINER_OF(l, struct held, link);
        core_list_remove(l);
        h->cb(h->req, RAFT_CANCELED);
        free(h);
    }
    while ((l = core_list_first(&s->sgets)) != NULL) {
        struct sget *g = CORE_CONTAINER_OF(l, struct sget, link);
        core_list_remove(l);
        query_clear(&g->q);
        free(g->conf);
        g->cb(g->req, NULL, RAFT_CANCELED);
        free(g);
    }
    query_clear(&s->gc_q);
    json_decref(s->gc_del.reqs);
    s->gc_del.reqs = NULL;
    s->close(io, cb);
}

/* ------------------------------------------------------------ public */

int gs_raft_store_dynamo_attach(struct raft_io *io, uv_loop_t *loop,
                                const struct gs_raft_store_config *cfg)
{
    struct store *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return CORE_ENOMEM;
    s->io = io;
    s->loop = loop;
    s->cfg = *cfg;
    snprintf(s->pk, sizeof(s->pk), "raft#%s", cfg->key);
    snprintf(s->snap_pk, sizeof(s->snap_pk), "raft#%s#snap", cfg->key);
    core_list_init(&s->ops);
    core_list_init(&s->held);
    core_list_init(&s->sgets);
    int rc = open_state(s);
    if (rc == 0)
        rc = client_init(&s->c, loop, &cfg->ddb);
    if (rc < 0) {
        for (size_t i = 0; i < s->n_entries; i++)
            raft_free(s->entries[i].batch);
        free(s->entries);
        snapshot_destroy(s->snapshot);
        free(s->meta.snap_conf);
        free(s);
        return rc;
    }
    s->send = io->send;
    s->close = io->close;
    io->load = m_load;
    io->bootstrap = m_bootstrap;
    io->recover = m_recover;
    io->set_term = m_set_term;
    io->set_vote = m_set_vote;
    io->send = m_send;
    io->append = m_append;
    io->truncate = m_truncate;
    io->snapshot_put = m_snapshot_put;
    io->snapshot_get = m_snapshot_get;
    io->close = m_close;
    uv_timer_init(loop, &s->fence);
    s->fence.data = s;
    s->fence_open = true;
    uv_timer_start(&s->fence, on_fence_timer, FENCE_MS, FENCE_MS);
    core_list_push_back(&stores, &s->link);
    return 0;
}

int gs_raft_store_dynamo_erase(struct raft_io *io)
{
    struct store *s = find(io);
    if (s == NULL)
        return 0;
    struct sync y;
    int rc = sync_open(&y, &s->cfg.ddb);
    if (rc < 0)
        return rc;
    struct meta m = {.inc = s->meta.inc, .ep = s->meta.ep + 1, .start = 1};
    rc = sync_call(&y, "PutItem", meta_body(s->pk, &m, COND_MINE));
    if (rc < 0)
        CORE_WARN("raft-store: %s: erase: %s", s->cfg.key, y.msg);
    sync_close(&y);
    return rc;
}

static void free_store(struct store *s)
{
    for (size_t i = 0; i < s->n_entries; i++)
        raft_free(s->entries[i].batch);
    free(s->entries);
    snapshot_destroy(s->snapshot);
    free(s->meta.snap_conf);
    json_decref(s->gc_del.reqs);
    query_clear(&s->gc_q);
    free(s);
}

static void fence_closed_free(uv_handle_t *h)
{
    free_store(h->data);
}

void gs_raft_store_dynamo_release(struct raft_io *io)
{
    struct store *s = find(io);
    if (s == NULL)
        return;
    core_list_remove(&s->link);
    if (s->c.ddb)
        client_free(&s->c);
    /* Never closed (raft did not start): the timer goes first. */
    if (s->fence_open)
        uv_close((uv_handle_t *)&s->fence, fence_closed_free);
    else
        free_store(s);
}
