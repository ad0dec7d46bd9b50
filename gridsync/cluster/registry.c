/*
 * DynamoDB registry client and the node's use of it (contract in
 * registry.h). One struct req per request in flight; a retry re-adds the
 * same easy handle after a backoff timer.
 */
#include "gridsync/cluster/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/curl_uv.h"
#include "core/error.h"
#include "core/list.h"
#include "core/log.h"

#define BACKOFF_FIRST_MS 50
#define BACKOFF_MAX_MS   2000

struct req {
    struct gs_registry *r;
    struct core_list link; /* in r->reqs */
    CURL *easy;
    struct curl_slist *hdrs;
    char *body;
    char *resp;
    size_t rlen, rcap;
    unsigned attempt;
    uv_timer_t backoff;
    gs_registry_cb cb;
    void *arg;
    char op[40];
};

struct gs_registry {
    uv_loop_t *loop;
    struct core_curl_uv *cu;
    struct gs_registry_config cfg;
    char userpwd[2 * GS_REGISTRY_STRLEN + 2];
    char sigv4[GS_REGISTRY_STRLEN + 32];
    struct core_list reqs;
    uint64_t retries;
};

int gs_registry_parse_url(const char *url, struct gs_registry_config *cfg, char *err, size_t errlen)
{
    static const char scheme[] = "dynamodb://";
    if (strncmp(url, scheme, sizeof(scheme) - 1) != 0) {
        snprintf(err, errlen, "registry '%s': expected dynamodb://HOST:PORT/TABLE", url);
        return CORE_EINVAL;
    }
    const char *host = url + sizeof(scheme) - 1;
    const char *slash = strchr(host, '/');
    const char *colon = slash ? memchr(host, ':', (size_t)(slash - host)) : NULL;
    if (!slash || !colon || colon == host || slash == colon + 1 || slash[1] == '\0' ||
        strchr(slash + 1, '/') != NULL) {
        snprintf(err, errlen, "registry '%s': expected dynamodb://HOST:PORT/TABLE", url);
        return CORE_EINVAL;
    }
    for (const char *p = colon + 1; p < slash; p++) {
        if (*p < '0' || *p > '9') {
            snprintf(err, errlen, "registry '%s': port is not a number", url);
            return CORE_EINVAL;
        }
    }
    /* DynamoDB table names: 3-255 of [A-Za-z0-9_.-]. */
    size_t tl = strlen(slash + 1);
    if (tl < 3 || tl >= sizeof(cfg->table) ||
        strspn(slash + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                          "abcdefghijklmnopqrstuvwxyz0123456789_.-") != tl) {
        snprintf(err, errlen, "registry '%s': table name must be 3-255 of A-Za-z0-9_.-", url);
        return CORE_EINVAL;
    }
    int n =
        snprintf(cfg->endpoint, sizeof(cfg->endpoint), "http://%.*s/", (int)(slash - host), host);
    if (n < 0 || (size_t)n >= sizeof(cfg->endpoint)) {
        snprintf(err, errlen, "registry '%s': host too long", url);
        return CORE_EINVAL;
    }
    memcpy(cfg->table, slash + 1, tl + 1);
    return 0;
}

/* ------------------------------------------------------------ requests */

static void req_closed(uv_handle_t *h)
{
    struct req *q = h->data;
    if (q->easy)
        curl_easy_cleanup(q->easy);
    curl_slist_free_all(q->hdrs);
    free(q->body);
    free(q->resp);
    free(q);
}

static void req_release(struct req *q)
{
    core_list_remove(&q->link);
    uv_close((uv_handle_t *)&q->backoff, req_closed);
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    struct req *q = arg;
    size_t n = size * nmemb;
    if (q->rlen + n + 1 > q->rcap) {
        size_t cap = q->rcap ? q->rcap : 1024;
        while (cap < q->rlen + n + 1)
            cap *= 2;
        char *p = realloc(q->resp, cap);
        if (p == NULL)
            return 0; /* curl fails the transfer */
        q->resp = p;
        q->rcap = cap;
    }
    memcpy(q->resp + q->rlen, data, n);
    q->rlen += n;
    q->resp[q->rlen] = '\0';
    return n;
}

static int req_start(struct req *q)
{
    q->rlen = 0;
    q->attempt++;
    return curl_multi_add_handle(core_curl_uv_multi(q->r->cu), q->easy) == CURLM_OK ? 0 : CORE_EIO;
}

static void finish(struct req *q, int err, json_t *reply, const char *msg)
{
    gs_registry_cb cb = q->cb;
    void *arg = q->arg;
    req_release(q);
    cb(arg, err, reply, msg);
}

static void on_backoff(uv_timer_t *t)
{
    struct req *q = t->data;
    if (req_start(q) < 0)
        finish(q, CORE_EIO, NULL, "cannot start a registry request");
}

static bool throttled(const char *type)
{
    return type && (strstr(type, "ProvisionedThroughputExceededException") ||
                    strstr(type, "ThrottlingException") || strstr(type, "RequestLimitExceeded"));
}

static void transfer_done(struct gs_registry *r, CURL *easy, CURLcode code)
{
    char *priv = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, &priv);
    struct req *q = (struct req *)(void *)priv;
    curl_multi_remove_handle(core_curl_uv_multi(r->cu), easy);
    long http = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &http);

    json_t *doc = NULL;
    const char *type = NULL, *message = NULL;
    if (code == CURLE_OK && q->resp) {
        doc = json_loadb(q->resp, q->rlen, 0, NULL);
        if (json_is_object(doc)) {
            type = json_string_value(json_object_get(doc, "__type"));
            message = json_string_value(json_object_get(doc, "message"));
            if (message == NULL)
                message = json_string_value(json_object_get(doc, "Message"));
        }
    }
    bool retry = code == CURLE_OPERATION_TIMEDOUT ||
                 (code == CURLE_OK && (http >= 500 || (http == 400 && throttled(type))));
    if (retry && q->attempt < r->cfg.max_attempts) {
        uint64_t delay = BACKOFF_FIRST_MS;
        for (unsigned i = 1; i < q->attempt && delay < BACKOFF_MAX_MS; i++)
            delay *= 2;
        if (delay > BACKOFF_MAX_MS)
            delay = BACKOFF_MAX_MS;
        r->retries++;
        CORE_DEBUG("registry: %s: retry %u in %llu ms (http %ld, %s)", q->op, q->attempt,
                   (unsigned long long)delay, http, type ? type : curl_easy_strerror(code));
        json_decref(doc);
        uv_timer_start(&q->backoff, on_backoff, delay, 0);
        return;
    }
    char msg[320];
    if (code != CURLE_OK) {
        snprintf(msg, sizeof(msg), "%s: %s", q->op, curl_easy_strerror(code));
        finish(q, code == CURLE_OPERATION_TIMEDOUT ? CORE_ETIMEOUT : CORE_EIO, NULL, msg);
    } else if (http != 200 || !json_is_object(doc)) {
        snprintf(msg, sizeof(msg), "%s: HTTP %ld %s%s%s", q->op, http, type ? type : "",
                 message ? ": " : "", message ? message : "");
        finish(q,
               http == 400 && type && strstr(type, "ResourceNotFoundException") ? CORE_ENOTFOUND
               : http == 400 && type && strstr(type, "ResourceInUseException")  ? CORE_EEXISTS
               : http == 400 && type && strstr(type, "ConditionalCheckFailed")  ? CORE_ESTATE
                                                                                : CORE_EPROTO,
               NULL, msg);
    } else {
        finish(q, 0, doc, NULL);
    }
    json_decref(doc);
}

static void on_activity(void *arg)
{
    struct gs_registry *r = arg;
    CURLMsg *m;
    int pending;
    /* A callback may free the registry (r->cu NULL; r itself lives until
     * its handles are closed). */
    while (r->cu && (m = curl_multi_info_read(core_curl_uv_multi(r->cu), &pending)) != NULL) {
        if (m->msg == CURLMSG_DONE) {
            CURL *e = m->easy_handle;
            CURLcode code = m->data.result;
            transfer_done(r, e, code);
        }
    }
}

int gs_registry_new(struct gs_registry **out, uv_loop_t *loop, const struct gs_registry_config *cfg)
{
    struct gs_registry *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return CORE_ENOMEM;
    r->loop = loop;
    r->cfg = *cfg;
    if (r->cfg.max_attempts == 0)
        r->cfg.max_attempts = 8;
    if (r->cfg.timeout_ms <= 0)
        r->cfg.timeout_ms = 2000;
    if (r->cfg.region[0] == '\0')
        snprintf(r->cfg.region, sizeof(r->cfg.region), "us-east-1");
    snprintf(r->userpwd, sizeof(r->userpwd), "%s:%s", r->cfg.access_key, r->cfg.secret_key);
    snprintf(r->sigv4, sizeof(r->sigv4), "aws:amz:%s:dynamodb", r->cfg.region);
    core_list_init(&r->reqs);
    int rc = core_curl_uv_new(&r->cu, loop, on_activity, r);
    if (rc < 0) {
        free(r);
        return rc;
    }
    *out = r;
    return 0;
}

int gs_registry_call(struct gs_registry *r, const char *op, json_t *body, gs_registry_cb cb,
                     void *arg)
{
    struct req *q = calloc(1, sizeof(*q));
    char target[80];
    if (q == NULL) {
        json_decref(body);
        return CORE_ENOMEM;
    }
    q->r = r;
    q->cb = cb;
    q->arg = arg;
    snprintf(q->op, sizeof(q->op), "%s", op);
    /* BatchWriteItem names its tables in RequestItems and has no TableName. */
    if (json_object_get(body, "RequestItems") == NULL)
        json_object_set_new(body, "TableName", json_string(r->cfg.table));
    q->body = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    snprintf(target, sizeof(target), "X-Amz-Target: DynamoDB_20120810.%s", op);
    q->hdrs = curl_slist_append(NULL, "Content-Type: application/x-amz-json-1.0");
    struct curl_slist *h2 = q->hdrs ? curl_slist_append(q->hdrs, target) : NULL;
    q->easy = curl_easy_init();
    uv_timer_init(r->loop, &q->backoff);
    q->backoff.data = q;
    core_list_push_back(&r->reqs, &q->link);
    if (!q->body || !h2 || !q->easy) {
        req_release(q);
        return CORE_ENOMEM;
    }
    q->hdrs = h2;
    CURL *e = q->easy;
    curl_easy_setopt(e, CURLOPT_URL, r->cfg.endpoint);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, q->body);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, q->hdrs);
    curl_easy_setopt(e, CURLOPT_AWS_SIGV4, r->sigv4);
    curl_easy_setopt(e, CURLOPT_USERPWD, r->userpwd);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, q);
    curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)q);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)r->cfg.timeout_ms);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    if (req_start(q) < 0) {
        req_release(q);
        return CORE_EIO;
    }
    return 0;
}

uint64_t gs_registry_retries(const struct gs_registry *r)
{
    return r->retries;
}

static void registry_closed(void *arg)
{
    free(arg);
}

void gs_registry_free(struct gs_registry *r)
{
    if (r == NULL)
        return;
    struct core_list *l;
    while ((l = core_list_first(&r->reqs)) != NULL) {
        struct req *q = CORE_CONTAINER_OF(l, struct req, link);
        curl_multi_remove_handle(core_curl_uv_multi(r->cu), q->easy);
        req_release(q);
    }
    core_curl_uv_close(r->cu, registry_closed);
    r->cu = NULL;
}

/* ---------------------------------------------------------- node items */

static json_t *str_attr(const char *s)
{
    return json_pack("{s:s}", "S", s);
}

static json_t *num_attr(int64_t v)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "%lld", (long long)v);
    return json_pack("{s:s}", "N", buf);
}

static json_t *node_item(const char *self, int64_t now, int64_t ttl_ms)
{
    char pk[GS_REGISTRY_STRLEN + 8];
    snprintf(pk, sizeof(pk), "node#%s", self);
    return json_pack("{s:{s:o,s:o,s:o,s:o}}", "Item", "pk", str_attr(pk), "addr", str_attr(self),
                     "heartbeat_ms", num_attr(now), "expires_ms", num_attr(now + ttl_ms));
}

static json_t *event_item(const char *self, const char *kind, int64_t now)
{
    char pk[GS_REGISTRY_STRLEN + 48];
    snprintf(pk, sizeof(pk), "event#%lld#%s", (long long)now, self);
    return json_pack("{s:{s:o,s:o,s:o,s:o}}", "Item", "pk", str_attr(pk), "kind", str_attr(kind),
                     "addr", str_attr(self), "at_ms", num_attr(now));
}

/* ------------------------------------------------------------ start-up */

enum step { STEP_DESCRIBE, STEP_CREATE, STEP_PUT, STEP_EVENT, STEP_SCAN, STEP_DONE };

struct startup {
    uv_loop_t loop;
    struct gs_registry *r;
    uv_timer_t wait;
    enum step step;
    const char *self;
    int64_t size, ttl_ms;
    json_t *live;      /* addresses of live nodes, over the pages of one Scan */
    json_t *start_key; /* the next page's ExclusiveStartKey, or NULL */
    bool joined;       /* the join event is recorded */
    char *peers;
    size_t peerslen;
    char *err;
    size_t errlen;
    int rc;
};

static void startup_next(struct startup *s);

static void startup_fail(struct startup *s, int rc, const char *msg)
{
    s->rc = rc;
    snprintf(s->err, s->errlen, "registry %s%s: %s", s->r->cfg.endpoint, s->r->cfg.table, msg);
    s->step = STEP_DONE;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Add the live nodes of one Scan page to s->live. */
static void collect_live(struct startup *s, json_t *reply)
{
    json_t *items = json_object_get(reply, "Items");
    int64_t now = core_wall_ms();
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        const char *pk = json_string_value(json_object_get(json_object_get(it, "pk"), "S"));
        json_t *addr = json_object_get(json_object_get(it, "addr"), "S");
        const char *exp =
            json_string_value(json_object_get(json_object_get(it, "expires_ms"), "N"));
        if (!pk || strncmp(pk, "node#", 5) != 0 || !json_is_string(addr) || !exp ||
            strtoll(exp, NULL, 10) <= now)
            continue;
        json_array_append(s->live, addr);
    }
}

/* After the last page: 1 if enough nodes are live (s->peers filled), 0 if
 * not yet, CORE_ETOOBIG if their list does not fit cluster-peers. */
static int peers_from_live(struct startup *s)
{
    size_t live = json_array_size(s->live);
    if ((int64_t)live < s->size)
        return 0;
    const char **addrs = calloc(live ? live : 1, sizeof(*addrs));
    if (addrs == NULL)
        return CORE_ENOMEM;
    for (size_t i = 0; i < live; i++)
        addrs[i] = json_string_value(json_array_get(s->live, i));
    qsort(addrs, live, sizeof(*addrs), cmp_str);
    size_t used = 0;
    int rc = 1;
    s->peers[0] = '\0';
    for (size_t i = 0; i < live; i++) {
        int w = snprintf(s->peers + used, s->peerslen - used, "%s%s", i ? "," : "", addrs[i]);
        if (w < 0 || (size_t)w >= s->peerslen - used) {
            rc = CORE_ETOOBIG;
            break;
        }
        used += (size_t)w;
    }
    free(addrs);
    return rc;
}

static void on_wait(uv_timer_t *t)
{
    startup_next(t->data);
}

static void on_startup_reply(void *arg, int err, json_t *reply, const char *msg)
{
    struct startup *s = arg;
    switch (s->step) {
    case STEP_DESCRIBE:
        if (err == CORE_ENOTFOUND) {
            s->step = STEP_CREATE;
        } else if (err < 0) {
            startup_fail(s, err, msg);
        } else {
            const char *st =
                json_string_value(json_object_get(json_object_get(reply, "Table"), "TableStatus"));
            if (st && strcmp(st, "ACTIVE") != 0) {
                uv_timer_start(&s->wait, on_wait, 100, 0); /* CREATING: ask again */
                return;
            }
            s->step = STEP_PUT;
        }
        break;
    case STEP_CREATE:
        /* Another node created it meanwhile: the same table. */
        if (err < 0 && err != CORE_EEXISTS)
            startup_fail(s, err, msg);
        else
            s->step = STEP_DESCRIBE;
        break;
    case STEP_PUT:
        if (err < 0)
            startup_fail(s, err, msg);
        else /* the join event once; later puts only refresh the item */
            s->step = s->joined ? STEP_SCAN : STEP_EVENT;
        break;
    case STEP_EVENT:
        if (err < 0)
            startup_fail(s, err, msg);
        s->joined = true;
        s->step = err < 0 ? STEP_DONE : STEP_SCAN;
        break;
    case STEP_SCAN:
        if (err < 0) {
            startup_fail(s, err, msg);
            break;
        }
        collect_live(s, reply);
        s->start_key = json_incref(json_object_get(reply, "LastEvaluatedKey"));
        if (s->start_key) {
            /* another page of the same Scan */
        } else if ((err = peers_from_live(s)) < 0) {
            startup_fail(s, err,
                         err == CORE_ETOOBIG ? "the live nodes' addresses do not fit cluster-peers"
                                             : core_strerror(err));
        } else if (err == 1) {
            s->step = STEP_DONE;
        } else {
            json_array_clear(s->live);
            /* Not enough nodes yet: keep our registration fresh, look again. */
            s->step = STEP_PUT;
            uv_timer_start(&s->wait, on_wait, 200, 0);
            return;
        }
        break;
    case STEP_DONE:
        break;
    }
    startup_next(s);
}

static void startup_next(struct startup *s)
{
    json_t *body = NULL;
    const char *op = NULL;
    switch (s->step) {
    case STEP_DESCRIBE:
        op = "DescribeTable";
        body = json_object();
        break;
    case STEP_CREATE:
        op = "CreateTable";
        body = json_pack("{s:[{s:s,s:s}],s:[{s:s,s:s}],s:s}", "AttributeDefinitions",
                         "AttributeName", "pk", "AttributeType", "S", "KeySchema", "AttributeName",
                         "pk", "KeyType", "HASH", "BillingMode", "PAY_PER_REQUEST");
        break;
    case STEP_PUT:
        op = "PutItem";
        body = node_item(s->self, core_wall_ms(), s->ttl_ms);
        break;
    case STEP_EVENT:
        op = "PutItem";
        body = event_item(s->self, "join", core_wall_ms());
        break;
    case STEP_SCAN:
        op = "Scan";
        body = json_pack("{s:b}", "ConsistentRead", 1);
        if (body && s->start_key)
            json_object_set_new(body, "ExclusiveStartKey", s->start_key);
        s->start_key = NULL;
        break;
    case STEP_DONE:
        return;
    }
    int rc = body ? gs_registry_call(s->r, op, body, on_startup_reply, s) : CORE_ENOMEM;
    if (rc < 0)
        startup_fail(s, rc, core_strerror(rc));
}

static void wait_closed(uv_handle_t *h)
{
    (void)h;
}

int gs_registry_startup(const struct gs_registry_config *cfg, const char *self, int64_t size,
                        int64_t ttl_ms, char *peers, size_t peerslen, char *err, size_t errlen)
{
    struct startup s = {.self = self,
                        .size = size,
                        .ttl_ms = ttl_ms,
                        .peers = peers,
                        .peerslen = peerslen,
                        .err = err,
                        .errlen = errlen,
                        .live = json_array()};
    if (s.live == NULL)
        return CORE_ENOMEM;
    if (uv_loop_init(&s.loop) < 0) {
        json_decref(s.live);
        snprintf(err, errlen, "registry: cannot make a loop");
        return CORE_EIO;
    }
    int rc = gs_registry_new(&s.r, &s.loop, cfg);
    if (rc < 0) {
        snprintf(err, errlen, "registry: %s", core_strerror(rc));
        uv_loop_close(&s.loop);
        json_decref(s.live);
        return rc;
    }
    uv_timer_init(&s.loop, &s.wait);
    s.wait.data = &s;
    startup_next(&s);
    while (s.step != STEP_DONE && uv_run(&s.loop, UV_RUN_ONCE) != 0) {
    }
    if (s.step != STEP_DONE)
        startup_fail(&s, CORE_ESTATE, "nothing left to wait for");
    gs_registry_free(s.r);
    uv_close((uv_handle_t *)&s.wait, wait_closed);
    uv_run(&s.loop, UV_RUN_DEFAULT);
    uv_loop_close(&s.loop);
    json_decref(s.live);
    json_decref(s.start_key);
    return s.rc;
}

/* ----------------------------------------------------------- heartbeat */

struct gs_registry_heartbeat {
    struct gs_registry *r;
    uv_timer_t timer;
    char self[GS_REGISTRY_STRLEN];
    int64_t period_ms, ttl_ms;
    uint64_t count;
    bool in_flight, stopping;
};

static void hb_closed(uv_handle_t *h)
{
    struct gs_registry_heartbeat *hb = h->data;
    free(hb);
}

static void hb_finish_stop(struct gs_registry_heartbeat *hb)
{
    gs_registry_free(hb->r);
    uv_close((uv_handle_t *)&hb->timer, hb_closed);
}

static void on_leave_done(void *arg, int err, json_t *reply, const char *msg)
{
    (void)reply;
    if (err < 0)
        CORE_WARN("registry: leave not recorded: %s", msg);
    hb_finish_stop(arg);
}

static void on_put_done(void *arg, int err, json_t *reply, const char *msg)
{
    (void)reply;
    struct gs_registry_heartbeat *hb = arg;
    hb->in_flight = false;
    if (err < 0)
        CORE_WARN("registry: heartbeat failed (serving on): %s", msg);
    else
        hb->count++;
}

static void on_beat(uv_timer_t *t)
{
    struct gs_registry_heartbeat *hb = t->data;
    if (hb->in_flight) /* retrying the last one: its item is as good */
        return;
    if (gs_registry_call(hb->r, "PutItem", node_item(hb->self, core_wall_ms(), hb->ttl_ms),
                         on_put_done, hb) == 0)
        hb->in_flight = true;
}

int gs_registry_heartbeat_start(struct gs_registry_heartbeat **out, uv_loop_t *loop,
                                const struct gs_registry_config *cfg, const char *self,
                                int64_t period_ms, int64_t ttl_ms)
{
    struct gs_registry_heartbeat *hb = calloc(1, sizeof(*hb));
    if (hb == NULL)
        return CORE_ENOMEM;
    struct gs_registry_config c = *cfg;
    /* A beat keeps retrying until shortly before the next one is due. */
    c.timeout_ms = period_ms;
    int rc = gs_registry_new(&hb->r, loop, &c);
    if (rc < 0) {
        free(hb);
        return rc;
    }
    snprintf(hb->self, sizeof(hb->self), "%s", self);
    hb->period_ms = period_ms;
    hb->ttl_ms = ttl_ms;
    uv_timer_init(loop, &hb->timer);
    hb->timer.data = hb;
    uv_timer_start(&hb->timer, on_beat, 0, (uint64_t)period_ms);
    *out = hb;
    return 0;
}

void gs_registry_heartbeat_stop(struct gs_registry_heartbeat *hb)
{
    if (hb == NULL || hb->stopping)
        return;
    hb->stopping = true;
    uv_timer_stop(&hb->timer);
    /* Drop a beat in flight; record the leave, then close. */
    struct gs_registry *r = hb->r;
    struct core_list *l;
    while ((l = core_list_first(&r->reqs)) != NULL) {
        struct req *q = CORE_CONTAINER_OF(l, struct req, link);
        curl_multi_remove_handle(core_curl_uv_multi(r->cu), q->easy);
        req_release(q);
    }
    hb->in_flight = false;
    r->cfg.max_attempts = 1;
    if (gs_registry_call(r, "PutItem", event_item(hb->self, "leave", core_wall_ms()), on_leave_done,
                         hb) < 0)
        hb_finish_stop(hb);
}

uint64_t gs_registry_heartbeat_count(const struct gs_registry_heartbeat *hb)
{
    return hb->count;
}
