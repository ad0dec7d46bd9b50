/*
 * origin-storm-stub: a slow HTTP origin for the hot-key expiry storm
 * benchmark (bench/gridsync/origin-storm). Every `GET /items/<key>` is
 * answered 200 with a value of --value-size bytes after --delay-ms, over
 * keep-alive HTTP/1.1 connections; `GET /stats` answers the number of item
 * requests served so far (so the benchmark can take differences).
 *
 * Written in C on libuv rather than in Python so that the origin itself is
 * never what limits the request rate being measured: each connection
 * costs one timer, a request costs no allocation.
 *
 * Invariant: one request in service per connection (HTTP/1.1 clients such
 * as libcurl do not pipeline); bytes of a next request wait in the
 * connection's buffer until the current one is answered.
 *
 *   origin-storm-stub --port N [--delay-ms 5] [--value-size 128]
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "core/proc.h"
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#define IN_CAP 16384

struct conn {
    uv_tcp_t tcp;
    uv_timer_t delay;
    uv_write_t wr;
    char in[IN_CAP];
    size_t inlen;
    size_t reqlen; /* bytes of the request in service, 0 when idle */
    bool stats;    /* the request in service is GET /stats */
    char head[256];
    uv_buf_t out[2];
    int handles;
    bool closing;
};

static uv_loop_t *loop;
static int delay_ms = 5;
static size_t value_size = 128;
static char *value;
static unsigned long long served;
static char stats_body[64];

static void conn_closed(uv_handle_t *h)
{
    struct conn *c = h->data;
    if (--c->handles == 0)
        free(c);
}

static void conn_close(struct conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    uv_close((uv_handle_t *)&c->tcp, conn_closed);
    uv_close((uv_handle_t *)&c->delay, conn_closed);
}

static void serve_next(struct conn *c);

static void on_written(uv_write_t *w, int status)
{
    struct conn *c = w->data;
    if (status < 0) {
        conn_close(c);
        return;
    }
    memmove(c->in, c->in + c->reqlen, c->inlen - c->reqlen);
    c->inlen -= c->reqlen;
    c->reqlen = 0;
    serve_next(c);
}

static void respond(struct conn *c)
{
    const char *body = value;
    size_t blen = value_size;
    if (c->stats) {
        blen = (size_t)snprintf(stats_body, sizeof(stats_body), "%llu", served);
        body = stats_body;
    } else {
        served++;
    }
    int n = snprintf(c->head, sizeof(c->head),
                     "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nContent-Type: "
                     "application/octet-stream\r\n\r\n",
                     blen);
    c->out[0] = uv_buf_init(c->head, (unsigned)n);
    c->out[1] = uv_buf_init((char *)body, (unsigned)blen);
    c->wr.data = c;
    if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, c->out, 2, on_written) < 0)
        conn_close(c);
}

static void on_delay(uv_timer_t *t)
{
    respond(t->data);
}

/* Start serving the next complete request in the buffer, if any. */
static void serve_next(struct conn *c)
{
    if (c->reqlen != 0 || c->closing)
        return;
    c->in[c->inlen] = '\0';
    char *end = strstr(c->in, "\r\n\r\n");
    if (end == NULL) {
        if (c->inlen >= IN_CAP - 1)
            conn_close(c); /* a header block larger than we accept */
        return;
    }
    c->reqlen = (size_t)(end + 4 - c->in);
    c->stats = strncmp(c->in, "GET /stats ", 11) == 0;
    if (c->stats || delay_ms == 0)
        respond(c);
    else
        uv_timer_start(&c->delay, on_delay, (uint64_t)delay_ms, 0);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct conn *c = h->data;
    buf->base = c->in + c->inlen;
    buf->len = IN_CAP - 1 - c->inlen;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct conn *c = s->data;
    if (n < 0) {
        conn_close(c);
        return;
    }
    c->inlen += (size_t)n;
    serve_next(c);
}

static void on_connection(uv_stream_t *server, int status)
{
    if (status < 0)
        return;
    struct conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return;
    uv_tcp_init(loop, &c->tcp);
    uv_timer_init(loop, &c->delay);
    c->tcp.data = c->delay.data = c;
    c->handles = 2;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_signal(uv_signal_t *s, int signum)
{
    fprintf(stderr, "origin-storm-stub: served %llu item requests\n", served);
    exit(0);
}

int main(int argc, char **argv)
{
    static const char usage[] =
        "Usage: origin-storm-stub --port N [--delay-ms MS] [--value-size BYTES]\n"
        "\n"
        "A minimal HTTP origin for bench/gridsync/origin-storm: answers every GET\n"
        "/item/<key> after MS milliseconds (default 0) with a BYTES-long value\n"
        "(default 128), counting the requests it served.\n"
        "\n"
        "  -h, --help   print this and exit\n"
        "  --version    print the version and exit\n";
    int port = 0, code = core_proc_early("origin-storm-stub", usage, argc, argv);
    if (code >= 0)
        return code;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i];
        int64_t v;
        if (strcmp(a, "--port") && strcmp(a, "--delay-ms") && strcmp(a, "--value-size"))
            return core_proc_bad_usage("origin-storm-stub", "unknown option '%s'", a);
        if (i + 1 >= argc)
            return core_proc_bad_usage("origin-storm-stub", "%s needs a value", a);
        int64_t max = !strcmp(a, "--port") ? 65535 : 1 << 30;
        if ((code = core_proc_int_arg("origin-storm-stub", a, argv[i + 1], !strcmp(a, "--port"),
                                      max, &v)) != 0)
            return code;
        if (!strcmp(a, "--port"))
            port = (int)v;
        else if (!strcmp(a, "--delay-ms"))
            delay_ms = (int)v;
        else
            value_size = (size_t)v;
    }
    if (port == 0)
        return core_proc_bad_usage("origin-storm-stub", "--port is required");
    value = malloc(value_size ? value_size : 1);
    if (value == NULL)
        return 1;
    memset(value, 'v', value_size);
    loop = uv_default_loop();
    uv_tcp_t server;
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", port, &addr);
    uv_tcp_init(loop, &server);
    int rc = uv_tcp_bind(&server, (const struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&server, 1024, on_connection);
    if (rc < 0) {
        fprintf(stderr, "origin-storm-stub: listen on %d: %s\n", port, uv_strerror(rc));
        return 1;
    }
    uv_signal_t sigterm, sigint;
    uv_signal_init(loop, &sigterm);
    uv_signal_start(&sigterm, on_signal, SIGTERM);
    uv_signal_init(loop, &sigint);
    uv_signal_start(&sigint, on_signal, SIGINT);
    return uv_run(loop, UV_RUN_DEFAULT);
}
