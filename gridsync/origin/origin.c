/*
 * Read-through origin: libcurl's multi interface on a libuv loop, the table
 * of fetches in flight, waiter lists, the bounded queue and the negative
 * cache. The life cycle and invariants are in origin.h.
 *
 * How curl and libuv meet is core/curl_uv.h's: after each socket action it
 * calls on_activity, which collects finished transfers (collect_done). Waiter callbacks therefore
 * always run from a loop callback, never from inside a libcurl callback and never from inside
 * gs_origin_fetch.
 */
#include "gridsync/origin/origin.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "core/clock.h"
#include "core/curl_uv.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/list.h"
#include "core/log.h"

#define DEFAULT_NEGATIVE_MAX    4096u
#define DEFAULT_MAX_VALUE_BYTES (512ull * 1024 * 1024)
/* A slot keeps a body buffer up to this size for the next fetch; a larger
 * one is released so that one huge value does not pin memory. */
#define BODY_KEEP_BYTES (1u << 20)

enum fetch_state { FETCH_FREE, FETCH_QUEUED, FETCH_ACTIVE, FETCH_DELIVERING };

struct gs_origin_fetch {
    struct gs_origin *o;
    enum fetch_state state;
    bool in_table;
    bool too_big;
    bool nomem;
    char *key;
    size_t klen, kcap;
    uint64_t hash;
    struct gs_origin_fetch *hnext; /* in-flight table chain */
    struct gs_origin_fetch *qnext; /* queue or free list */
    struct core_list waiters;      /* gs_origin_waiter.link, in arrival order */
    uint64_t deadline_ms;          /* uv_now() scale */
    uint64_t started_ns;
    CURL *easy; /* created on first use, reused */
    char *url;
    size_t urlcap;
    char *body;
    size_t blen, bcap;
    struct gs_origin_headers hdr;
};

/* One entry of the negative cache ring. */
struct neg_entry {
    char *key;
    size_t klen, kcap;
    bool live;
    uint64_t hash;
    uint64_t expire_ms;
    int32_t next; /* chain, -1 ends */
};

/* One socket curl asked us to watch. */
struct gs_origin {
    uv_loop_t *loop;
    struct core_curl_uv *cu;
    CURLM *multi; /* cu's */
    struct gs_origin_config cfg;
    char *url_template;
    uint64_t seed;

    struct gs_origin_fetch *slots;
    uint32_t nslots;
    struct gs_origin_fetch *free_list;
    struct gs_origin_fetch **table; /* in flight, by key */
    uint32_t table_mask;
    struct gs_origin_fetch *qhead, *qtail;
    uint32_t active, queued;

    /* Negative cache: a FIFO ring. Every entry gets the same TTL, so the
     * ring's order is also expiry order: expired entries are always at
     * the head, and when full the head is the one to drop. */
    struct neg_entry *neg;
    uint32_t neg_cap, neg_head, neg_count, neg_live;
    int32_t *neg_buckets;
    uint32_t neg_mask;

    struct gs_origin_stats stats;
    struct core_hist latency;

    bool closing;
};

/* ---------------------------------------------------------------- utils */

static uint32_t pow2_at_least(uint32_t n)
{
    uint32_t p = 16;
    while (p < n && p < (1u << 30))
        p <<= 1;
    return p;
}

/* Make *buf hold at least need bytes. */
static int reserve(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 64;
    while (ncap < need)
        ncap *= 2;
    char *p = realloc(*buf, ncap);
    if (p == NULL)
        return CORE_ENOMEM;
    *buf = p;
    *cap = ncap;
    return 0;
}

static uint64_t key_hash(const struct gs_origin *o, const void *key, size_t klen)
{
    return core_hash64(key, klen, o->seed);
}

/* ------------------------------------------------------- negative cache */

static void neg_unlink(struct gs_origin *o, int32_t idx)
{
    struct neg_entry *e = &o->neg[idx];
    int32_t *pp = &o->neg_buckets[e->hash & o->neg_mask];
    while (*pp != idx)
        pp = &o->neg[*pp].next;
    *pp = e->next;
    e->live = false;
    o->neg_live--;
}

static void neg_pop_head(struct gs_origin *o)
{
    if (o->neg[o->neg_head].live)
        neg_unlink(o, (int32_t)o->neg_head);
    o->neg_head = (o->neg_head + 1) % o->neg_cap;
    o->neg_count--;
}

static int32_t neg_find(struct gs_origin *o, const void *key, size_t klen, uint64_t h)
{
    for (int32_t i = o->neg_buckets[h & o->neg_mask]; i >= 0; i = o->neg[i].next) {
        struct neg_entry *e = &o->neg[i];
        if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0)
            return i;
    }
    return -1;
}

static bool neg_lookup(struct gs_origin *o, const void *key, size_t klen, uint64_t h, uint64_t now)
{
    while (o->neg_count > 0 && o->neg[o->neg_head].expire_ms <= now)
        neg_pop_head(o);
    return neg_find(o, key, klen, h) >= 0;
}

static void neg_insert(struct gs_origin *o, const void *key, size_t klen, uint64_t h, uint64_t now)
{
    int32_t old = neg_find(o, key, klen, h);
    if (old >= 0)
        neg_unlink(o, old);
    if (o->neg_count == o->neg_cap)
        neg_pop_head(o);
    uint32_t idx = (o->neg_head + o->neg_count) % o->neg_cap;
    struct neg_entry *e = &o->neg[idx];
    if (reserve(&e->key, &e->kcap, klen ? klen : 1) < 0)
        return; /* not remembering a miss is always safe */
    memcpy(e->key, key, klen);
    e->klen = klen;
    e->hash = h;
    e->expire_ms = now + (uint64_t)o->cfg.negative_ttl_ms;
    e->live = true;
    e->next = o->neg_buckets[h & o->neg_mask];
    o->neg_buckets[h & o->neg_mask] = (int32_t)idx;
    o->neg_count++;
    o->neg_live++;
}

/* ------------------------------------------------------ in-flight table */

static struct gs_origin_fetch *table_find(struct gs_origin *o, const void *key, size_t klen,
                                          uint64_t h)
{
    for (struct gs_origin_fetch *f = o->table[h & o->table_mask]; f; f = f->hnext)
        if (f->hash == h && f->klen == klen && memcmp(f->key, key, klen) == 0)
            return f;
    return NULL;
}

static void table_insert(struct gs_origin *o, struct gs_origin_fetch *f)
{
    struct gs_origin_fetch **b = &o->table[f->hash & o->table_mask];
    f->hnext = *b;
    *b = f;
    f->in_table = true;
}

static void table_remove(struct gs_origin *o, struct gs_origin_fetch *f)
{
    if (!f->in_table)
        return;
    struct gs_origin_fetch **pp = &o->table[f->hash & o->table_mask];
    while (*pp != f)
        pp = &(*pp)->hnext;
    *pp = f->hnext;
    f->hnext = NULL;
    f->in_table = false;
}

/* -------------------------------------------------------------- waiters */

static void waiter_attach(struct gs_origin_fetch *f, struct gs_origin_waiter *w)
{
    w->fetch = f;
    core_list_push_back(&f->waiters, &w->link);
}

static void waiter_detach(struct gs_origin_waiter *w)
{
    core_list_remove(&w->link);
    w->fetch = NULL;
}

void gs_origin_cancel(struct gs_origin_waiter *w)
{
    if (w == NULL || w->fetch == NULL)
        return;
    w->fetch->o->stats.cancelled++;
    waiter_detach(w);
}

/* --------------------------------------------------------- fetch slots */

static void release(struct gs_origin *o, struct gs_origin_fetch *f)
{
    f->state = FETCH_FREE;
    if (f->bcap > BODY_KEEP_BYTES) {
        free(f->body);
        f->body = NULL;
        f->bcap = 0;
    }
    f->blen = 0;
    f->qnext = o->free_list;
    o->free_list = f;
}

/* Hand the outcome to on_fill and then to every waiter, and free the
 * slot. The slot leaves the table first (invariant 1) and waiters are
 * popped one at a time, so callbacks may start fetches or cancel waiters. */
static void finish(struct gs_origin *o, struct gs_origin_fetch *f, const struct gs_origin_result *r)
{
    table_remove(o, f);
    f->state = FETCH_DELIVERING;
    if (o->cfg.on_fill && r->error != CORE_ECLOSED)
        o->cfg.on_fill(o->cfg.fill_arg, f->key, f->klen, r);
    struct core_list *l;
    while ((l = core_list_first(&f->waiters)) != NULL) {
        struct gs_origin_waiter *w = CORE_CONTAINER_OF(l, struct gs_origin_waiter, link);
        waiter_detach(w);
        w->cb(w, r);
    }
    release(o, f);
}

static void finish_error(struct gs_origin *o, struct gs_origin_fetch *f, int err)
{
    struct gs_origin_result r = {.status = GS_ORIGIN_ERROR, .error = err, .ttl_ms = 0};
    o->stats.errors++;
    if (err == CORE_ETIMEOUT)
        o->stats.timeouts++;
    finish(o, f, &r);
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    struct gs_origin_fetch *f = arg;
    size_t n = size * nmemb;
    /* Only a 200's body is a value; an error page is read and dropped so
     * the connection stays reusable. */
    if (f->hdr.status != 200)
        return n;
    if (f->blen + n > f->o->cfg.max_value_bytes) {
        f->too_big = true;
        return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
    }
    if (reserve(&f->body, &f->bcap, f->blen + n) < 0) {
        f->nomem = true;
        return 0;
    }
    memcpy(f->body + f->blen, data, n);
    f->blen += n;
    return n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
    struct gs_origin_fetch *f = arg;
    size_t n = size * nmemb;
    gs_origin_header_line(&f->hdr, data, n);
    if (f->hdr.status == 200 && f->hdr.content_length >= 0) {
        if ((uint64_t)f->hdr.content_length > f->o->cfg.max_value_bytes) {
            f->too_big = true;
            return 0;
        }
        /* Size the buffer once rather than doubling through the body (up
         * to what a slot keeps anyway: a claimed length is not trusted
         * with a large allocation before the bytes arrive). */
        size_t want = (size_t)f->hdr.content_length;
        if (want > BODY_KEEP_BYTES)
            want = BODY_KEEP_BYTES;
        if (reserve(&f->body, &f->bcap, want) < 0) {
            f->nomem = true;
            return 0;
        }
    }
    return n;
}

static int easy_setup(struct gs_origin *o, struct gs_origin_fetch *f)
{
    if (f->easy == NULL) {
        CURL *e = curl_easy_init();
        if (e == NULL)
            return CORE_ENOMEM;
        curl_easy_setopt(e, CURLOPT_PRIVATE, f);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, f);
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, f);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
        f->easy = e;
    }
    size_t need = gs_origin_build_url(o->url_template, f->key, f->klen, NULL, 0) + 1;
    if (reserve(&f->url, &f->urlcap, need) < 0)
        return CORE_ENOMEM;
    gs_origin_build_url(o->url_template, f->key, f->klen, f->url, f->urlcap);
    if (curl_easy_setopt(f->easy, CURLOPT_URL, f->url) != CURLE_OK)
        return CORE_ENOMEM;
    return 0;
}

/* QUEUED/new -> ACTIVE. On failure the slot is untouched (still owned by
 * the caller) and nothing was started. */
static int start_transfer(struct gs_origin *o, struct gs_origin_fetch *f)
{
    int rc = easy_setup(o, f);
    if (rc < 0)
        return rc;
    uint64_t now = uv_now(o->loop);
    long left = f->deadline_ms > now ? (long)(f->deadline_ms - now) : 1;
    curl_easy_setopt(f->easy, CURLOPT_TIMEOUT_MS, left);
    gs_origin_headers_init(&f->hdr);
    f->blen = 0;
    f->too_big = f->nomem = false;
    if (curl_multi_add_handle(o->multi, f->easy) != CURLM_OK)
        return CORE_EIO;
    f->state = FETCH_ACTIVE;
    f->started_ns = core_now_ns();
    o->active++;
    o->stats.fetches++;
    return 0;
}

/* Start queued fetches while there is room (FIFO). A queued fetch whose
 * deadline has passed fails with CORE_ETIMEOUT instead of starting. */
static void pump(struct gs_origin *o)
{
    while (!o->closing && o->active < o->cfg.max_concurrent && o->qhead) {
        struct gs_origin_fetch *f = o->qhead;
        o->qhead = f->qnext;
        if (o->qhead == NULL)
            o->qtail = NULL;
        f->qnext = NULL;
        o->queued--;
        if (f->deadline_ms <= uv_now(o->loop)) {
            finish_error(o, f, CORE_ETIMEOUT);
            continue;
        }
        int rc = start_transfer(o, f);
        if (rc < 0)
            finish_error(o, f, rc);
    }
}

static void transfer_done(struct gs_origin *o, CURL *easy, CURLcode code)
{
    char *priv = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, &priv);
    struct gs_origin_fetch *f = (struct gs_origin_fetch *)(void *)priv;
    curl_multi_remove_handle(o->multi, easy);
    o->active--;
    core_hist_record(&o->latency, core_now_ns() - f->started_ns);

    long http = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &http);
    struct gs_origin_result r = {.status = GS_ORIGIN_ERROR, .http_status = (int)http};
    if (code == CURLE_OK && http == 200) {
        r.status = GS_ORIGIN_FOUND;
        r.value = f->body ? f->body : "";
        r.vlen = f->blen;
        int64_t ttl = gs_origin_headers_ttl_ms(&f->hdr);
        if (ttl < 0) {
            r.cacheable = true;
            r.ttl_ms = o->cfg.default_ttl_ms > 0 ? o->cfg.default_ttl_ms : -1;
        } else {
            r.cacheable = ttl > 0;
            r.ttl_ms = ttl;
        }
        o->stats.found++;
        finish(o, f, &r);
    } else if (code == CURLE_OK && (http == 404 || http == 410)) {
        r.status = GS_ORIGIN_NOT_FOUND;
        r.ttl_ms = o->cfg.negative_ttl_ms;
        /* Before the waiters, so that one asking again sees the miss. */
        if (o->cfg.negative_ttl_ms > 0)
            neg_insert(o, f->key, f->klen, f->hash, uv_now(o->loop));
        o->stats.not_found++;
        finish(o, f, &r);
    } else {
        int err = CORE_EPROTO;
        if (code == CURLE_OPERATION_TIMEDOUT)
            err = CORE_ETIMEOUT;
        else if (f->too_big)
            err = CORE_ETOOBIG;
        else if (f->nomem)
            err = CORE_ENOMEM;
        else if (code != CURLE_OK)
            err = CORE_EIO;
        if (code != CURLE_OK)
            CORE_DEBUG("origin: %s: %s", f->url, curl_easy_strerror(code));
        r.error = err;
        o->stats.errors++;
        if (err == CORE_ETIMEOUT)
            o->stats.timeouts++;
        finish(o, f, &r);
    }
}

/* Deliver every transfer curl has finished, then fill free slots from
 * the queue. */
static void collect_done(struct gs_origin *o)
{
    CURLMsg *m;
    int pending;
    while (!o->closing && (m = curl_multi_info_read(o->multi, &pending)) != NULL) {
        if (m->msg == CURLMSG_DONE) {
            CURL *e = m->easy_handle;
            CURLcode code = m->data.result;
            transfer_done(o, e, code);
        }
    }
    pump(o);
}

/* ------------------------------------------------------ curl <-> libuv */

static void on_activity(void *arg)
{
    collect_done(arg);
}

static void on_closed(void *arg)
{
    free(arg);
}

/* ----------------------------------------------------------- lifecycle */

static int validate(const struct gs_origin_config *cfg)
{
    const char *t = cfg->url_template;
    if (t == NULL || strstr(t, "{key}") == NULL)
        return CORE_EINVAL;
    if (strncmp(t, "http://", 7) != 0 && strncmp(t, "https://", 8) != 0)
        return CORE_EINVAL;
    if (cfg->timeout_ms == 0 || cfg->max_concurrent == 0)
        return CORE_EINVAL;
    if (cfg->default_ttl_ms < 0 || cfg->negative_ttl_ms < 0)
        return CORE_EINVAL;
    if (cfg->max_concurrent > (1u << 20) || cfg->max_queued > (1u << 20))
        return CORE_EINVAL;
    return 0;
}

static void free_buffers(struct gs_origin *o)
{
    if (o->slots) {
        for (uint32_t i = 0; i < o->nslots; i++) {
            struct gs_origin_fetch *f = &o->slots[i];
            if (f->easy)
                curl_easy_cleanup(f->easy);
            free(f->key);
            free(f->url);
            free(f->body);
        }
    }
    if (o->neg) {
        for (uint32_t i = 0; i < o->neg_cap; i++)
            free(o->neg[i].key);
    }
    free(o->slots);
    free(o->table);
    free(o->neg);
    free(o->neg_buckets);
    free(o->url_template);
    o->slots = NULL;
    o->table = NULL;
    o->neg = NULL;
    o->neg_buckets = NULL;
    o->url_template = NULL;
}

int gs_origin_new(struct gs_origin **out, uv_loop_t *loop, const struct gs_origin_config *cfg)
{
    int rc = validate(cfg);
    if (rc < 0)
        return rc;
    struct gs_origin *o = calloc(1, sizeof(*o));
    if (o == NULL)
        return CORE_ENOMEM;
    o->loop = loop;
    o->cfg = *cfg;
    if (o->cfg.negative_max == 0)
        o->cfg.negative_max = DEFAULT_NEGATIVE_MAX;
    if (o->cfg.max_value_bytes == 0)
        o->cfg.max_value_bytes = DEFAULT_MAX_VALUE_BYTES;
    o->seed = core_now_ns() ^ (uint64_t)(uintptr_t)o;
    core_hist_reset(&o->latency);

    /* One slot more than can be queued or active: the one being delivered
     * (at most one at a time, as delivery never nests). */
    o->nslots = o->cfg.max_concurrent + o->cfg.max_queued + 1;
    o->url_template = strdup(cfg->url_template);
    o->slots = calloc(o->nslots, sizeof(*o->slots));
    o->table_mask = pow2_at_least(2 * o->nslots) - 1;
    o->table = calloc((size_t)o->table_mask + 1, sizeof(*o->table));
    o->neg_cap = o->cfg.negative_max;
    o->neg = calloc(o->neg_cap, sizeof(*o->neg));
    o->neg_mask = pow2_at_least(o->neg_cap) - 1;
    o->neg_buckets = malloc(((size_t)o->neg_mask + 1) * sizeof(*o->neg_buckets));
    rc = CORE_ENOMEM;
    if (!o->url_template || !o->slots || !o->table || !o->neg || !o->neg_buckets ||
        (rc = core_curl_uv_new(&o->cu, loop, on_activity, o)) < 0) {
        free_buffers(o);
        free(o);
        return rc;
    }
    o->multi = core_curl_uv_multi(o->cu);
    for (uint32_t i = 0; i <= o->neg_mask; i++)
        o->neg_buckets[i] = -1;
    for (uint32_t i = o->nslots; i-- > 0;) {
        o->slots[i].o = o;
        core_list_init(&o->slots[i].waiters);
        o->slots[i].qnext = o->free_list;
        o->free_list = &o->slots[i];
    }
    /* Keep one idle connection per possible fetch, so that a busy origin
     * is talked to over warm keep-alive connections. */
    curl_multi_setopt(o->multi, CURLMOPT_MAXCONNECTS, (long)o->cfg.max_concurrent);
    *out = o;
    return 0;
}

void gs_origin_free(struct gs_origin *o)
{
    if (o == NULL)
        return;
    o->closing = true;
    /* Every pending waiter hears CORE_ECLOSED (invariant 2). */
    for (uint32_t i = 0; i < o->nslots; i++) {
        struct gs_origin_fetch *f = &o->slots[i];
        if (f->state == FETCH_ACTIVE) {
            curl_multi_remove_handle(o->multi, f->easy);
            o->active--;
        }
        if (f->state == FETCH_ACTIVE || f->state == FETCH_QUEUED) {
            struct gs_origin_result r = {.status = GS_ORIGIN_ERROR, .error = CORE_ECLOSED};
            finish(o, f, &r);
        }
    }
    o->qhead = o->qtail = NULL;
    o->queued = 0;
    /* The easy handles go after the multi handle (curl's documented
     * order); o itself once the loop has closed cu's handles. */
    core_curl_uv_close(o->cu, on_closed);
    o->multi = NULL;
    free_buffers(o);
}

/* ---------------------------------------------------------------- API */

int gs_origin_fetch(struct gs_origin *o, const void *key, size_t klen, struct gs_origin_waiter *w)
{
    if (o->closing)
        return CORE_ECLOSED;
    if (klen > GS_ORIGIN_MAX_KEY)
        return CORE_ETOOBIG;
    if (w->fetch != NULL)
        return CORE_ESTATE;
    uint64_t now = uv_now(o->loop);
    uint64_t h = key_hash(o, key, klen);
    if (o->cfg.negative_ttl_ms > 0 && neg_lookup(o, key, klen, h, now)) {
        o->stats.negative_hits++;
        return GS_ORIGIN_NEGATIVE;
    }
    if (o->cfg.coalesce) {
        struct gs_origin_fetch *f = table_find(o, key, klen, h);
        if (f) {
            waiter_attach(f, w);
            o->stats.requests++;
            o->stats.coalesced++;
            return 0;
        }
    }
    /* FIFO: a new key starts only when nobody is queued ahead of it. */
    bool start_now = o->active < o->cfg.max_concurrent && o->qhead == NULL;
    if (!start_now && o->queued >= o->cfg.max_queued) {
        o->stats.rejected++;
        return CORE_EBUSY;
    }
    struct gs_origin_fetch *f = o->free_list;
    if (f == NULL) {
        o->stats.rejected++;
        return CORE_EBUSY;
    }
    if (reserve(&f->key, &f->kcap, klen ? klen : 1) < 0)
        return CORE_ENOMEM;
    o->free_list = f->qnext;
    f->qnext = NULL;
    memcpy(f->key, key, klen);
    f->klen = klen;
    f->hash = h;
    f->deadline_ms = now + o->cfg.timeout_ms;
    core_list_init(&f->waiters);
    if (start_now) {
        int rc = start_transfer(o, f);
        if (rc < 0) {
            release(o, f);
            return rc;
        }
    } else {
        f->state = FETCH_QUEUED;
        if (o->qtail)
            o->qtail->qnext = f;
        else
            o->qhead = f;
        o->qtail = f;
        o->queued++;
        o->stats.queued_total++;
    }
    if (o->cfg.coalesce)
        table_insert(o, f);
    waiter_attach(f, w);
    o->stats.requests++;
    return 0;
}

void gs_origin_forget(struct gs_origin *o, const void *key, size_t klen)
{
    int32_t i = neg_find(o, key, klen, key_hash(o, key, klen));
    if (i >= 0)
        neg_unlink(o, i);
}

void gs_origin_set_coalesce(struct gs_origin *o, bool on)
{
    o->cfg.coalesce = on;
}

void gs_origin_stats(const struct gs_origin *o, struct gs_origin_stats *out)
{
    *out = o->stats;
    out->in_flight = o->active;
    out->queue_len = o->queued;
    out->negative_keys = o->neg_live;
}

const struct core_hist *gs_origin_latency(const struct gs_origin *o)
{
    return &o->latency;
}

void gs_origin_reset_stats(struct gs_origin *o)
{
    memset(&o->stats, 0, sizeof(o->stats));
    core_hist_reset(&o->latency);
}

/* snprintf that appends and keeps counting past the end. */
static void appendf(char *buf, size_t len, size_t *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void appendf(char *buf, size_t len, size_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(*n < len ? buf + *n : NULL, *n < len ? len - *n : 0, fmt, ap);
    va_end(ap);
    if (w > 0)
        *n += (size_t)w;
}

size_t gs_origin_info(const struct gs_origin *o, char *buf, size_t len)
{
    size_t n = 0;
    if (len > 0)
        buf[0] = '\0';
    appendf(buf, len, &n, "# Origin\r\norigin_enabled:%d\r\n", o != NULL);
    if (o == NULL)
        return n;
    struct gs_origin_stats s;
    gs_origin_stats(o, &s);
    const struct core_hist *h = &o->latency;
    appendf(buf, len, &n,
            "origin_coalesce:%s\r\n"
            "origin_requests:%" PRIu64 "\r\n"
            "origin_fetches:%" PRIu64 "\r\n"
            "origin_coalesced_waiters:%" PRIu64 "\r\n"
            "origin_found:%" PRIu64 "\r\n"
            "origin_not_found:%" PRIu64 "\r\n"
            "origin_errors:%" PRIu64 "\r\n"
            "origin_timeouts:%" PRIu64 "\r\n"
            "origin_rejected:%" PRIu64 "\r\n"
            "origin_queued_total:%" PRIu64 "\r\n"
            "origin_negative_hits:%" PRIu64 "\r\n"
            "origin_cancelled_waiters:%" PRIu64 "\r\n"
            "origin_in_flight:%" PRIu64 "\r\n"
            "origin_queue_len:%" PRIu64 "\r\n"
            "origin_negative_keys:%" PRIu64 "\r\n"
            "origin_latency_p50_usec:%" PRIu64 "\r\n"
            "origin_latency_p99_usec:%" PRIu64 "\r\n"
            "origin_latency_p999_usec:%" PRIu64 "\r\n"
            "origin_latency_max_usec:%" PRIu64 "\r\n",
            o->cfg.coalesce ? "yes" : "no", s.requests, s.fetches, s.coalesced, s.found,
            s.not_found, s.errors, s.timeouts, s.rejected, s.queued_total, s.negative_hits,
            s.cancelled, s.in_flight, s.queue_len, s.negative_keys,
            core_hist_percentile(h, 50) / 1000, core_hist_percentile(h, 99) / 1000,
            core_hist_percentile(h, 99.9) / 1000, h->count ? h->max / 1000 : 0);
    return n;
}
