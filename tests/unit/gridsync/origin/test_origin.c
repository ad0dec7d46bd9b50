/*
 * The origin fetcher against a real HTTP server: a tiny responder on a
 * libuv TCP listener in the same loop (no mock of libcurl). The responder
 * answers by the key in the path ("/items/<key>"): the key's first word
 * picks the behaviour (see route()). It counts requests per path and the
 * most requests it ever had open at once.
 *
 * Every wait is bounded (run_until gives up after a few seconds) and the
 * assertions are on counts and contents, never on elapsed time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "core/error.h"
#include "gridsync/origin/origin.h"

/* ------------------------------------------------------------ responder */

#define MAX_PATHS 64

struct responder {
    uv_tcp_t server;
    int port;
    int requests;
    int open_now, max_open;
    int delay_ms;
    struct {
        char path[256];
        int count;
    } paths[MAX_PATHS];
    int npaths;
};

struct rconn {
    uv_tcp_t tcp;
    uv_timer_t delay;
    uv_write_t wr;
    struct responder *r;
    char in[8192];
    size_t inlen;
    char path[256];
    bool got_request, answered;
    char *out;
    int handles;
};

static uv_loop_t loop;
static struct responder resp;

static void count_path(struct responder *r, const char *path)
{
    for (int i = 0; i < r->npaths; i++) {
        if (strcmp(r->paths[i].path, path) == 0) {
            r->paths[i].count++;
            return;
        }
    }
    if (r->npaths < MAX_PATHS) {
        snprintf(r->paths[r->npaths].path, sizeof(r->paths[0].path), "%s", path);
        r->paths[r->npaths++].count = 1;
    }
}

static int path_count(const char *path)
{
    for (int i = 0; i < resp.npaths; i++)
        if (strcmp(resp.paths[i].path, path) == 0)
            return resp.paths[i].count;
    return 0;
}

static void rconn_closed(uv_handle_t *h)
{
    struct rconn *c = h->data;
    if (--c->handles == 0) {
        free(c->out);
        free(c);
    }
}

static void rconn_close(struct rconn *c)
{
    if (c->got_request && !c->answered) {
        c->answered = true;
        c->r->open_now--;
    }
    if (!uv_is_closing((uv_handle_t *)&c->tcp))
        uv_close((uv_handle_t *)&c->tcp, rconn_closed);
    if (!uv_is_closing((uv_handle_t *)&c->delay))
        uv_close((uv_handle_t *)&c->delay, rconn_closed);
}

static void on_written(uv_write_t *w, int status)
{
    rconn_close(w->data);
}

/* What to answer for a path: the key's first word picks it. */
static void answer(struct rconn *c)
{
    const char *key = c->path + strlen("/items/");
    int status = 200;
    const char *extra = "";
    char body[2048];
    snprintf(body, sizeof(body), "value-of-%s", key);
    if (strncmp(key, "hang", 4) == 0)
        return; /* never answer: the client's deadline must fire */
    if (strncmp(key, "missing", 7) == 0) {
        status = 404;
        snprintf(body, sizeof(body), "no such item");
    } else if (strncmp(key, "boom", 4) == 0) {
        status = 500;
        snprintf(body, sizeof(body), "internal error");
    } else if (strncmp(key, "maxage", 6) == 0) {
        extra = "Cache-Control: public, max-age=60\r\nAge: 10\r\n";
    } else if (strncmp(key, "nostore", 7) == 0) {
        extra = "Cache-Control: no-store\r\n";
    } else if (strncmp(key, "big", 3) == 0) {
        memset(body, 'x', 1500);
        body[1500] = '\0';
    }
    const char *reason = status == 200 ? "OK" : status == 404 ? "Not Found" : "Error";
    size_t blen = strlen(body);
    c->out = malloc(blen + 512);
    assert_non_null(c->out);
    int n = snprintf(c->out, blen + 512,
                     "HTTP/1.1 %d %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n%s",
                     status, reason, blen, extra, body);
    c->answered = true;
    c->r->open_now--;
    uv_buf_t b = uv_buf_init(c->out, (unsigned)n);
    c->wr.data = c;
    if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, on_written) < 0)
        rconn_close(c);
}

static void on_delay(uv_timer_t *t)
{
    answer(t->data);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct rconn *c = h->data;
    buf->base = c->in + c->inlen;
    buf->len = sizeof(c->in) - c->inlen - 1;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct rconn *c = s->data;
    if (n < 0) {
        rconn_close(c);
        return;
    }
    c->inlen += (size_t)n;
    c->in[c->inlen] = '\0';
    if (c->got_request || strstr(c->in, "\r\n\r\n") == NULL)
        return;
    c->got_request = true;
    /* "GET <path> HTTP/1.1" */
    assert_int_equal(strncmp(c->in, "GET ", 4), 0);
    const char *p = c->in + 4, *e = strchr(p, ' ');
    assert_non_null(e);
    snprintf(c->path, sizeof(c->path), "%.*s", (int)(e - p), p);
    c->r->requests++;
    count_path(c->r, c->path);
    if (++c->r->open_now > c->r->max_open)
        c->r->max_open = c->r->open_now;
    if (c->r->delay_ms > 0)
        uv_timer_start(&c->delay, on_delay, (uint64_t)c->r->delay_ms, 0);
    else
        answer(c);
}

static void on_connection(uv_stream_t *server, int status)
{
    assert_int_equal(status, 0);
    struct rconn *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    c->r = server->data;
    uv_tcp_init(&loop, &c->tcp);
    uv_timer_init(&loop, &c->delay);
    c->tcp.data = c->delay.data = c;
    c->handles = 2;
    assert_int_equal(uv_accept(server, (uv_stream_t *)&c->tcp), 0);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void responder_start(int delay_ms)
{
    memset(&resp, 0, sizeof(resp));
    resp.delay_ms = delay_ms;
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", 0, &addr);
    assert_int_equal(uv_tcp_init(&loop, &resp.server), 0);
    resp.server.data = &resp;
    assert_int_equal(uv_tcp_bind(&resp.server, (const struct sockaddr *)&addr, 0), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&resp.server, 256, on_connection), 0);
    struct sockaddr_in bound;
    int len = sizeof(bound);
    uv_tcp_getsockname(&resp.server, (struct sockaddr *)&bound, &len);
    resp.port = ntohs(bound.sin_port);
}

/* Close the listener and any connection still open (a hanging one). */
static void close_any(uv_handle_t *h, void *arg)
{
    if (uv_is_closing(h))
        return;
    if (h == (uv_handle_t *)&resp.server) {
        uv_close(h, NULL);
    } else if (h->type == UV_TCP || h->type == UV_TIMER) {
        struct rconn *c = h->data;
        rconn_close(c);
    }
}

/* ---------------------------------------------------------- test setup */

struct tw {
    struct gs_origin_waiter w;
    bool called;
    struct gs_origin_result r;
    char value[2048];
};

static int delivered;
static int fills;
static struct gs_origin_result last_fill;

static void on_answer(struct gs_origin_waiter *w, const struct gs_origin_result *r)
{
    struct tw *t = (struct tw *)w;
    assert_false(t->called);
    t->called = true;
    t->r = *r;
    if (r->status == GS_ORIGIN_FOUND) {
        assert_true(r->vlen < sizeof(t->value));
        memcpy(t->value, r->value, r->vlen);
        t->value[r->vlen] = '\0';
    }
    t->r.value = NULL;
    delivered++;
}

static void on_fill(void *arg, const char *key, size_t klen, const struct gs_origin_result *r)
{
    fills++;
    last_fill = *r;
    last_fill.value = NULL;
}

static void tick(uv_timer_t *t)
{
}

/* Run the loop until *counter reaches want, or about 5 s pass. */
static bool run_until(const int *counter, int want)
{
    uv_timer_t guard;
    uv_timer_init(&loop, &guard);
    uv_timer_start(&guard, tick, 5, 5);
    uv_update_time(&loop);
    uint64_t end = uv_now(&loop) + 5000;
    while (*counter < want && uv_now(&loop) < end)
        uv_run(&loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&guard, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
    return *counter >= want;
}

/* Let the loop run for about ms milliseconds. */
static void run_for(int ms)
{
    int never = 0;
    uv_timer_t guard;
    uv_timer_init(&loop, &guard);
    uv_timer_start(&guard, tick, 5, 5);
    uv_update_time(&loop);
    uint64_t end = uv_now(&loop) + (uint64_t)ms;
    while (never == 0 && uv_now(&loop) < end)
        uv_run(&loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&guard, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
}

static struct gs_origin_config base_config(char *tmpl, size_t len)
{
    snprintf(tmpl, len, "http://127.0.0.1:%d/items/{key}", resp.port);
    struct gs_origin_config cfg = {
        .url_template = tmpl,
        .timeout_ms = 2000,
        .default_ttl_ms = 30000,
        .negative_ttl_ms = 60000,
        .max_concurrent = 16,
        .max_queued = 64,
        .coalesce = true,
        .on_fill = on_fill,
    };
    return cfg;
}

static int setup(void **state)
{
    assert_int_equal(uv_loop_init(&loop), 0);
    delivered = 0;
    fills = 0;
    memset(&last_fill, 0, sizeof(last_fill));
    return 0;
}

static int teardown(void **state)
{
    uv_walk(&loop, close_any, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    /* Fails if any handle (a curl socket poll, a timer) was left open. */
    assert_int_equal(uv_loop_close(&loop), 0);
    return 0;
}

static struct gs_origin *origin_new(const struct gs_origin_config *cfg)
{
    struct gs_origin *o = NULL;
    assert_int_equal(gs_origin_new(&o, &loop, cfg), 0);
    return o;
}

static void fetch_ok(struct gs_origin *o, const char *key, struct tw *t)
{
    memset(t, 0, sizeof(*t));
    t->w.cb = on_answer;
    assert_int_equal(gs_origin_fetch(o, key, strlen(key), &t->w), 0);
}

/* --------------------------------------------------------- pure parts */

static void test_url_percent_encodes_the_key(void **state)
{
    char out[256];
    const char key[] = "a b/\xc3\xbc?&=%~._-Z9";
    size_t n =
        gs_origin_build_url("http://h/items/{key}?k={key}", key, strlen(key), out, sizeof(out));
    const char *want = "http://h/items/a%20b%2F%C3%BC%3F%26%3D%25~._-Z9"
                       "?k=a%20b%2F%C3%BC%3F%26%3D%25~._-Z9";
    assert_string_equal(out, want);
    assert_int_equal(n, strlen(want));
    /* Binary keys: NUL and high bytes. */
    n = gs_origin_build_url("x/{key}", "\x00\xff", 2, out, sizeof(out));
    assert_string_equal(out, "x/%00%FF");
    /* Truncation behaves as snprintf: the full length, a terminated prefix. */
    n = gs_origin_build_url("http://h/{key}", "abc", 3, out, 5);
    assert_int_equal(n, strlen("http://h/abc"));
    assert_string_equal(out, "http");
}

static int64_t ttl_of(const char *cc, const char *age)
{
    struct gs_origin_headers h;
    gs_origin_headers_init(&h);
    char line[512];
    gs_origin_header_line(&h, "HTTP/1.1 200 OK\r\n", 17);
    if (cc) {
        snprintf(line, sizeof(line), "Cache-Control: %s\r\n", cc);
        gs_origin_header_line(&h, line, strlen(line));
    }
    if (age) {
        snprintf(line, sizeof(line), "age: %s\r\n", age);
        gs_origin_header_line(&h, line, strlen(line));
    }
    assert_int_equal(h.status, 200);
    return gs_origin_headers_ttl_ms(&h);
}

static void test_cache_control(void **state)
{
    assert_int_equal(ttl_of(NULL, NULL), -1);
    assert_int_equal(ttl_of("max-age=60", NULL), 60000);
    assert_int_equal(ttl_of("public, MAX-AGE=60", NULL), 60000);
    assert_int_equal(ttl_of("max-age=\"60\"", NULL), 60000);
    assert_int_equal(ttl_of("max-age = 60", NULL), 60000);
    assert_int_equal(ttl_of("max-age=60", "15"), 45000);
    assert_int_equal(ttl_of("max-age=60", "60"), 0);
    assert_int_equal(ttl_of("max-age=60", "x"), 60000);             /* bad Age ignored */
    assert_int_equal(ttl_of("max-age=60, s-maxage=5", NULL), 5000); /* shared cache */
    assert_int_equal(ttl_of("max-age=0", NULL), 0);
    assert_int_equal(ttl_of("max-age=10, no-store", NULL), 0);
    assert_int_equal(ttl_of("no-cache", NULL), 0);
    assert_int_equal(ttl_of("private=\"set-cookie\", max-age=9", NULL), 0);
    assert_int_equal(ttl_of("max-age=-5", NULL), -1);             /* invalid: ignored */
    assert_int_equal(ttl_of("max-age=5x", NULL), -1);             /* invalid: ignored */
    assert_int_equal(ttl_of("max-age", NULL), -1);                /* no argument */
    assert_int_equal(ttl_of("max-age=7, max-age=9", NULL), 7000); /* first wins */
    assert_int_equal(ttl_of("max-age=99999999999999999999", NULL), 2147483648LL * 1000);
    assert_int_equal(ttl_of("x-ext=\"a,b\", max-age=3", NULL), 3000); /* comma in quotes */
    assert_int_equal(ttl_of(",,, ,max-age=4,", NULL), 4000);
    assert_int_equal(ttl_of("no-storex, max-age=4", NULL), 4000); /* not no-store */
}

static void test_header_lines(void **state)
{
    struct gs_origin_headers h;
    gs_origin_headers_init(&h);
    const char *lines[] = {"HTTP/1.1 100 Continue\r\n",
                           "Cache-Control: no-store\r\n",
                           "\r\n",
                           "HTTP/1.1 404 Not Found\r\n",
                           "Content-Length:  12 \r\n",
                           "X-Cache-Control: no-store\r\n",
                           "garbage line\r\n"};
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        gs_origin_header_line(&h, lines[i], strlen(lines[i]));
    /* The 100 block's no-store does not leak into the final block. */
    assert_int_equal(h.status, 404);
    assert_false(h.no_store);
    assert_int_equal(h.content_length, 12);
    gs_origin_header_line(&h, "HTTP/2 200\r\n", 12);
    assert_int_equal(h.status, 200);
    assert_int_equal(h.content_length, -1);
    gs_origin_header_line(&h, "HTTP/1.1 2000 x\r\n", 17);
    assert_int_equal(h.status, 0);
}

static void test_config_is_validated(void **state)
{
    struct gs_origin *o = NULL;
    char tmpl[128];
    struct gs_origin_config cfg = base_config(tmpl, sizeof(tmpl));
    cfg.url_template = "http://127.0.0.1:1/items/";
    assert_int_equal(gs_origin_new(&o, &loop, &cfg), CORE_EINVAL);
    cfg.url_template = "ftp://127.0.0.1:1/{key}";
    assert_int_equal(gs_origin_new(&o, &loop, &cfg), CORE_EINVAL);
    cfg.url_template = tmpl;
    cfg.timeout_ms = 0;
    assert_int_equal(gs_origin_new(&o, &loop, &cfg), CORE_EINVAL);
    cfg.timeout_ms = 10;
    cfg.max_concurrent = 0;
    assert_int_equal(gs_origin_new(&o, &loop, &cfg), CORE_EINVAL);
    assert_null(o);
}

/* --------------------------------------------------------- against HTTP */

#define N_WAITERS 100

static void test_hundred_waiters_one_fetch(void **state)
{
    responder_start(50);
    char tmpl[128];
    struct gs_origin_config cfg = base_config(tmpl, sizeof(tmpl));
    struct gs_origin *o = origin_new(&cfg);
    static struct tw t[N_WAITERS];
    for (int i = 0; i < N_WAITERS; i++)
        fetch_ok(o, "maxage-hot", &t[i]);
    assert_true(run_until(&delivered, N_WAITERS));
    assert_int_equal(resp.requests, 1);
    assert_int_equal(path_count("/items/maxage-hot"), 1);
    for (int i = 0; i < N_WAITERS; i++) {
        assert_true(t[i].called);
        assert_int_equal(t[i].r.status, GS_ORIGIN_FOUND);
        assert_string_equal(t[i].value, "value-of-maxage-hot");
        assert_true(t[i].r.cacheable);
        assert_int_equal(t[i].r.ttl_ms, 50000); /* max-age=60 minus Age: 10 */
        assert_int_equal(t[i].r.http_status, 200);
    }
    assert_int_equal(fills, 1);
    assert_int_equal(last_fill.status, GS_ORIGIN_FOUND);
    struct gs_origin_stats s;
    gs_origin_stats(o, &s);
    assert_int_equal(s.fetches, 1);
    assert_int_equal(s.requests, N_WAITERS);
    assert_int_equal(s.coalesced, N_WAITERS - 1);
    assert_int_equal(s.found, 1);
    assert_int_equal(s.in_flight, 0);
    assert_int_equal(gs_origin_latency(o)->count, 1);
    char info[2048];
    size_t n = gs_origin_info(o, info, sizeof(info));
    assert_true(n < sizeof(info));
    assert_non_null(strstr(info, "origin_fetches:1\r\n"));
    assert_non_null(strstr(info, "origin_coalesced_waiters:99\r\n"));
    gs_origin_free(o);
}

static void test_default_ttl_and_no_store(void **state)
{
    responder_start(0);
    char tmpl[128];
    struct gs_origin_config cfg = base_config(tmpl, sizeof(tmpl));
    struct gs_origin *o = origin_new(&cfg);
    struct tw a, b;
    fetch_ok(o, "plain", &a);
    fetch_ok(o, "nostore", &b);
    assert_true(run_until(&delivered, 2));
    assert_int_equal(a.r.status, GS_ORIGIN_FOUND);
    assert_true(a.r.cacheable);
    assert_int_equal(a.r.ttl_ms, 30000);
    assert_int_equal(b.r.status, GS_ORIGIN_FOUND);
    assert_string_equal(b.value, "value-of-nostore");
    assert_false(b.r.cacheable);
    gs_origin_free(o);
}

static void test_not_found_is_negatively_cached(void **state)
{
    responder_start(20);
    char tmpl[128];
    struct gs_origin_config cfg = base_config(tmpl, sizeof(tmpl));
    cfg.negative_ttl_ms = 200;
    struct gs_origin *o = origin_new(&cfg);
    struct tw t[5];
    for (int i = 0; i < 5; i++)
        fetch_ok(o, "missing-1", &t[i]);
    assert_true(run_until(&delivered, 5));
    for (int i = 0; i < 5; i++) {
        assert_int_equal(t[i].r.status, GS_ORIGIN_NOT_FOUND);
        assert_int_equal(t[i].r.ttl_ms, 200);
        assert_int_equal(t[i].r.http_status, 404);
    }
    assert_int_equal(resp.requests, 1);
    assert_int_equal(fills, 1);
    assert_int_equal(last_fill.status, GS_ORIGIN_NOT_FOUND);

    /* Remembered: answered at once, no callback, no request. */
    struct tw again = {.w.cb = on_answer};
    assert_int_equal(gs_origin_fetch(o, "missing-1", 9, &again.w), GS_ORIGIN_NEGATIVE);
    assert_false(gs_origin_waiting(&again.w));
    struct gs_origin_stats s;
    gs_origin_stats(o, &s);
    assert_int_equal(s.negative_hits, 1);
    assert_int_equal(s.negative_keys, 1);

    /* Forgotten on request (a SET of the key). */
    gs_origin_forget(o, "missing-1", 9);
    fetch_ok(o, "missing-1", &again);
    assert_true(run_until(&delivered, 6));
    assert_int_equal(resp.requests, 2);

    /* After the negative TTL the origin is asked again. */
    run_for(300);
    fetch_ok(o, "missing-1", &again);
    assert_true(run_until(&delivered, 7));
    assert_int_equal(resp.requests, 3);
    assert_int_equal(path_count("/items/missing-1"), 3);
    gs_origin_free(o);
}

static void test_errors_reach_all_and_are_not_cached(void **state)
{
    responder_start(20);
    char tmpl[128];
    struct gs_origin_config cfg = base_config(tmpl, sizeof(tmpl));
    struct gs_origin *o = origin_new(&cfg);
    struct tw t[10];
    for (int i = 0; i < 10; i++)
        fetch_ok(o, "boom", &t[i]);
    assert_true(run_until(&delivered, 10));
    for (int i = 0; i < 10; i++) {
        assert_int_equal(t[i].r.status, GS_ORIGIN_ERROR);
        assert_int_equal(t[i].r.error, CORE_EPROTO);
        assert_int_equal(t[i].r.http_status, 500);
    }
    assert_int_equal(resp.requests, 1);
    assert_int_equal(fills, 1);
    assert_int_equal(last_fill.status, GS_ORIGIN_ERROR);
    /* Not cached: the next request goes to the origin again. */
    fetch_ok(o, "boom", &t[0]);
    assert_true(run_until(&delivered, 11));
    assert_int_equal(resp.requests, 2);
    struct gs_origin_stats s;
    gs_origin_stats(o, &s);
    assert_int_equal(s.errors, 2);
    assert_int_equal(s.negative_keys, 0);
    gs_origin_free(o);
}

static void test_timeout_reaches_all_and_is_not_cached(void **state)
{
    responder_start(0);
    char tmpl[128];
    struct gs_origin_config cfg = base_config(tmpl, sizeof(tmpl));
    cfg.timeout_ms = 100;
    struct gs_origin *o = origin_new(&cfg);
    struct tw t[10];
    for (int i = 0; i < 10; i++)
        fetch_ok(o, "hang", &t[i]);
    assert_true(run_until(&delivered, 10));
    for (int i = 0; i < 10; i++) {
        assert_int_equal(t[i].r.status, GS_ORIGIN_ERROR);
        assert_int_equal(t[i].r.error, CORE_ETIMEOUT);
    }
    assert_int_equal(resp.requests, 1);
    fetch_ok(o, "hang", &t[0]);
    assert_true(run_until(&delivered, 11));
    assert_int_equal(t[0].r.error, CORE_ETIMEOUT);
    assert_int_equal(resp.requests, 2);
    struct gs_origin_stats s;
    gs_origin_stats(o, &s);
    assert_int_equal(s.timeouts, 2);
    gs_origin_free(o);
}

static void test_connection_refused_is_an_io_error(void **state)
{
    /* Take a free port, then stop listening on it. */
    responder_start(0);
    char tmpl[128];
    struct gs_origin_config cfg = base_config(tmpl, sizeof(tmpl));
    uv_close((uv_handle_t *)&resp.server, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
    struct gs_origin *o = origin_new(&cfg);
    struct tw t;
    fetch_ok(o, "anything", &t);
    assert_true(run_until(&delivered, 1));
    assert_int_equal(t.r.status, GS_ORIGIN_ERROR);
    assert_int_equal(t.r.error, CORE_EIO);
    gs_origin_free(o);
}

static void test_body_over_limit_is_an_error(void **state)
{
    responder_start(0);
    char tmpl[128];
    struct gs_origin_config cfg = base_config(tmpl, sizeof(tmpl));
    cfg.max_value_bytes = 1000;
    struct gs_origin *o = origin_new(&cfg);
    struct tw t;
    fetch_ok(o, "big", &t);
    assert_true(run_until(&delivered, 1));
    assert_int_equal(t.r.status, GS_ORIGIN_ERROR);
    assert_int_equal(t.r.error, CORE_ETOOBIG);
    gs_origin_free(o);
}

static void test_cancelled_waiter_is_dropped(void **state)
{
    responder_start(30);
    char tmpl[128];
    struct gs_origin_config cfg = base_config(tmpl, sizeof(tmpl));
    struct gs_origin *o = origin_new(&cfg);
    struct tw t[3];
    for (int i = 0; i < 3; i++)
        fetch_ok(o, "k", &t[i]);
    gs_origin_cancel(&t[0].w);
    gs_origin_cancel(&t[0].w); /* twice is harmless */
    assert_false(gs_origin_waiting(&t[0].w));
    assert_true(gs_origin_waiting(&t[1].w));
    assert_true(run_until(&delivered, 2));
    run_for(20);
    assert_false(t[0].called);
    assert_true(t[1].called && t[2].called);
    assert_string_equal(t[2].value, "value-of-k");
    assert_int_equal(delivered, 2);
    /* Everyone cancelled: the fetch still completes and fills. */
    fetch_ok(o, "k2", &t[0]);
    gs_origin_cancel(&t[0].w);
    assert_true(run_until(&fills, 2));
    assert_false(t[0].called);
    struct gs_origin_stats s;
    gs_origin_stats(o, &s);
    assert_int_equal(s.cancelled, 2);
    gs_origin_free(o);
}

static void test_queue_and_limit(void **state)
{
    responder_start(30);
    char tmpl[128];
    struct gs_origin_config cfg = base_config(tmpl, sizeof(tmpl));
    cfg.max_concurrent = 2;
    cfg.max_queued = 2;
    struct gs_origin *o = origin_new(&cfg);
    struct tw t[5];
    char key[16];
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof(key), "q%d", i);
        fetch_ok(o, key, &t[i]);
    }
    /* A queued key still coalesces. */
    struct tw extra;
    fetch_ok(o, "q3", &extra);
    memset(&t[4], 0, sizeof(t[4]));
    t[4].w.cb = on_answer;
    assert_int_equal(gs_origin_fetch(o, "q4", 2, &t[4].w), CORE_EBUSY);
    struct gs_origin_stats s;
    gs_origin_stats(o, &s);
    assert_int_equal(s.in_flight, 2);
    assert_int_equal(s.queue_len, 2);
    assert_int_equal(s.rejected, 1);
    assert_true(run_until(&delivered, 5));
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof(key), "value-of-q%d", i);
        assert_string_equal(t[i].value, key);
    }
    assert_string_equal(extra.value, "value-of-q3");
    assert_false(t[4].called);
    assert_int_equal(resp.requests, 4);
    assert_true(resp.max_open <= 2);
    gs_origin_stats(o, &s);
    assert_int_equal(s.queued_total, 2);
    assert_int_equal(s.in_flight + s.queue_len, 0);
    gs_origin_free(o);
}

static void test_deadline_counts_time_in_queue(void **state)
{
    responder_start(0);
    char tmpl[128];
    struct gs_origin_config cfg = base_config(tmpl, sizeof(tmpl));
    cfg.max_concurrent = 1;
    cfg.max_queued = 1;
    cfg.timeout_ms = 100;
    struct gs_origin *o = origin_new(&cfg);
    struct tw a, b;
    fetch_ok(o, "hang-a", &a);
    fetch_ok(o, "q-b", &b);
    assert_true(run_until(&delivered, 2));
    assert_int_equal(a.r.error, CORE_ETIMEOUT);
    assert_int_equal(b.r.error, CORE_ETIMEOUT);
    /* b's deadline passed while it waited, so it never reached the origin. */
    assert_int_equal(resp.requests, 1);
    gs_origin_free(o);
}

static void test_coalesce_off_fetches_per_request(void **state)
{
    responder_start(20);
    char tmpl[128];
    struct gs_origin_config cfg = base_config(tmpl, sizeof(tmpl));
    cfg.coalesce = false;
    struct gs_origin *o = origin_new(&cfg);
    struct tw t[10];
    for (int i = 0; i < 10; i++)
        fetch_ok(o, "hot", &t[i]);
    assert_true(run_until(&delivered, 10));
    assert_int_equal(resp.requests, 10);
    assert_int_equal(fills, 10);
    /* Switched on at run time: the next burst coalesces. */
    gs_origin_set_coalesce(o, true);
    for (int i = 0; i < 10; i++)
        fetch_ok(o, "hot", &t[i]);
    assert_true(run_until(&delivered, 20));
    assert_int_equal(resp.requests, 11);
    gs_origin_free(o);
}

/* A waiter whose callback asks for the same key again gets a new fetch:
 * the finished one left the table before its waiters were called. */
static struct gs_origin *reentry_origin;
static struct tw reentry_second;
static void on_answer_then_refetch(struct gs_origin_waiter *w, const struct gs_origin_result *r)
{
    on_answer(w, r);
    reentry_second.w.cb = on_answer;
    assert_int_equal(gs_origin_fetch(reentry_origin, "again", 5, &reentry_second.w), 0);
}

static void test_callback_may_fetch_again(void **state)
{
    responder_start(10);
    char tmpl[128];
    struct gs_origin_config cfg = base_config(tmpl, sizeof(tmpl));
    reentry_origin = origin_new(&cfg);
    struct tw first = {.w.cb = on_answer_then_refetch};
    memset(&reentry_second, 0, sizeof(reentry_second));
    assert_int_equal(gs_origin_fetch(reentry_origin, "again", 5, &first.w), 0);
    assert_true(run_until(&delivered, 2));
    assert_string_equal(reentry_second.value, "value-of-again");
    assert_int_equal(resp.requests, 2);
    gs_origin_free(reentry_origin);
}

static void test_free_fails_pending_waiters(void **state)
{
    responder_start(0);
    char tmpl[128];
    struct gs_origin_config cfg = base_config(tmpl, sizeof(tmpl));
    cfg.max_concurrent = 1;
    struct gs_origin *o = origin_new(&cfg);
    struct tw a, b, c;
    fetch_ok(o, "hang-1", &a);
    fetch_ok(o, "hang-1", &b);
    fetch_ok(o, "queued", &c);
    assert_true(run_until(&resp.requests, 1)); /* the request reached the responder */
    gs_origin_free(o);
    assert_int_equal(delivered, 3);
    assert_int_equal(a.r.error, CORE_ECLOSED);
    assert_int_equal(b.r.error, CORE_ECLOSED);
    assert_int_equal(c.r.error, CORE_ECLOSED);
    assert_int_equal(fills, 0);
}

static void test_key_too_long(void **state)
{
    responder_start(0);
    char tmpl[128];
    struct gs_origin_config cfg = base_config(tmpl, sizeof(tmpl));
    struct gs_origin *o = origin_new(&cfg);
    static char key[GS_ORIGIN_MAX_KEY + 1];
    memset(key, 'a', sizeof(key));
    struct tw t = {.w.cb = on_answer};
    assert_int_equal(gs_origin_fetch(o, key, sizeof(key), &t.w), CORE_ETOOBIG);
    gs_origin_free(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_percent_encodes_the_key),
        cmocka_unit_test(test_cache_control),
        cmocka_unit_test(test_header_lines),
        cmocka_unit_test_setup_teardown(test_config_is_validated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hundred_waiters_one_fetch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_default_ttl_and_no_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_found_is_negatively_cached, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors_reach_all_and_are_not_cached, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_reaches_all_and_is_not_cached, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_connection_refused_is_an_io_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_body_over_limit_is_an_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancelled_waiter_is_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_and_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadline_counts_time_in_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_coalesce_off_fetches_per_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callback_may_fetch_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_fails_pending_waiters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key_too_long, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
