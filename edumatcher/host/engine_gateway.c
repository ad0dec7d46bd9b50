/* Hosted gateway sessions (engine_gateway.h): the sessions' bus on the
 * engine host. */
#include "edumatcher/host/engine_gateway.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/log.h"
#include "core/uv_server.h"
#include "edumatcher/gateway/alf/alf_front.h"

struct em_hosted {
    struct em_hosted_config cfg;
    uv_loop_t *loop;
    struct em_host *h;
    struct em_gw *g;
    struct core_server *srv;
    uv_check_t check; /* hands the turn's frames over, ends the host's batch */
    uv_idle_t idle;   /* keeps the loop from sleeping while frames wait */
    uv_timer_t timer; /* em_gw_tick: LOGIN retries, resends */
    bool delivering;  /* inside em_gw_bus_message: frames wait in `queue` */
    bool handing;     /* inside em_host_inbound: replies wait in `replies` */
    bool in_check;
    bool stopped;
    unsigned handed; /* bus messages handed over since the last batch end */
    /* [u8 gwlen][gw][u32 len][frames], in order */
    struct core_buf queue, replies, spare;
};

static void fail(struct em_hosted *x, int rc)
{
    if (rc && x->cfg.fatal)
        x->cfg.fatal(rc);
}

static void push(struct core_buf *b, const char *name, size_t nl, const void *data, size_t len)
{
    uint8_t n = (uint8_t)nl;
    uint32_t l = (uint32_t)len;
    core_buf_append(b, &n, 1);
    core_buf_append(b, name, nl);
    core_buf_append(b, &l, sizeof l);
    core_buf_append(b, data, len);
}

/* The idle handle only keeps the loop's poll from blocking until the check. */
static void idle_stop(uv_idle_t *i)
{
    uv_idle_stop(i);
}

static void hand_over(struct em_hosted *x, const char *gw, size_t gwlen, const void *frames,
                      size_t len)
{
    x->handing = true;
    int rc = em_host_inbound_at(x->h, EM_HOST_DOOR_HOSTED, gw, gwlen, frames, len);
    x->handing = false;
    x->handed++;
    if (rc == CORE_EBUSY) {
        /* gw is logged in through another door: the refusal goes to this
         * session alone, after the check's hand-overs (never from here:
         * the sessions may be on the stack) */
        char topic[EM_BUS_TOPIC_MAX];
        uint8_t frame[EM_FRAME_MAX];
        int tl = snprintf(topic, sizeof topic, "order.ack.%.*s", (int)gwlen, gw);
        int n = em_host_refusal(frame, sizeof frame);
        if (n > 0 && tl > 0 && (size_t)tl < sizeof topic)
            push(&x->replies, topic, (size_t)tl, frame, (size_t)n);
        if (!x->in_check)
            uv_idle_start(&x->idle, idle_stop);
        return;
    }
    fail(x, rc);
}

/* ---- the sessions' bus ---- */

static int bus_send(void *ctx, const char *gw, size_t gwlen, const void *frames, size_t len)
{
    struct em_hosted *x = ctx;
    if (x->delivering || x->handing) {
        /* a session is being answered: hand it over after (the queue) */
        push(&x->queue, gw, gwlen, frames, len);
        if (x->queue.oom)
            return CORE_ENOMEM; /* the session answers RATE_LIMIT */
    } else {
        hand_over(x, gw, gwlen, frames, len);
    }
    if (!x->in_check)
        uv_idle_start(&x->idle, idle_stop); /* the check comes this turn */
    return 0;
}

/* Replies are routed by the session table (em_gw_has_session): nothing to
 * subscribe to. */
static void bus_subscribe(void *ctx, const char *topic)
{
    (void)ctx;
    (void)topic;
}

static const struct em_gw_bus hosted_bus = {
    .send = bus_send, .subscribe = bus_subscribe, .unsubscribe = bus_subscribe};

/* ---- replies ---- */

static void deliver(struct em_hosted *x, const char *topic, size_t tl, const void *data, size_t len)
{
    x->delivering = true;
    em_gw_bus_message(x->g, topic, tl, data, len);
    em_gw_bus_batch_end(x->g); /* one write per session and publish */
    x->delivering = false;
}

bool em_hosted_publish(struct em_hosted *x, const struct em_bus_topic *topic, const void *data,
                       size_t len)
{
    static const char ack[] = "order.ack.";
    const size_t al = sizeof ack - 1;
    if (topic->len > 3 && memcmp(topic->s, "md.", 3) == 0) {
        em_gw_bus_message(x->g, topic->s, topic->len, data, len); /* SYMBOLS */
        return false;
    }
    if (topic->len <= al || memcmp(topic->s, ack, al) != 0)
        return false;
    /* a hosted session waiting for its LOGIN's answer may be for a gw
     * another door holds (engine_host.h, "Doors"): that door's replies are
     * not its own */
    const char *gw = topic->s + al;
    size_t gwlen = topic->len - al;
    enum em_gw_presence here = em_gw_presence(x->g, gw, gwlen);
    if (here == EM_GW_ABSENT ||
        (here == EM_GW_LOGGING_IN && !em_host_door_holds(x->h, EM_HOST_DOOR_HOSTED, gw, gwlen)))
        return false;
    if (x->handing || x->replies.len) {
        /* published inside a hand-over (the host's arena or trade log
         * filled up): the sessions may be on the stack; and once one reply
         * waits, every later one waits behind it (order per trader) */
        push(&x->replies, topic->s, topic->len, data, len);
        if (!x->in_check)
            uv_idle_start(&x->idle, idle_stop); /* the check comes this turn */
    } else {
        deliver(x, topic->s, topic->len, data, len);
    }
    return true;
}

/* ---- the loop turn ---- */

static void drain_replies(struct em_hosted *x)
{
    for (size_t off = 0; off < x->replies.len;) {
        const uint8_t *p = (const uint8_t *)x->replies.data + off;
        uint32_t l;
        memcpy(&l, p + 1 + p[0], sizeof l);
        deliver(x, (const char *)p + 1, p[0], p + 1 + p[0] + sizeof l, l);
        off += 1 + p[0] + sizeof l + l;
    }
    core_buf_reset(&x->replies);
}

/* Once per loop turn, after the reads: what the sessions batched goes to
 * the host, the host's batch ends (journal, then the replies), and what
 * the replies set off (held input of a session gone live) goes the same
 * way, until nothing is left. */
static void on_check(uv_check_t *c)
{
    struct em_hosted *x = c->data;
    x->in_check = true;
    for (int round = 0; round < 64; round++) {
        em_gw_flush(x->g);
        /* handing over may queue more (a reply delivered from the host's
         * arena filling up): take the queue, walk it, repeat */
        while (x->queue.len) {
            struct core_buf q = x->queue;
            x->queue = x->spare;
            for (size_t off = 0; off < q.len;) {
                const uint8_t *p = (const uint8_t *)q.data + off;
                uint32_t l;
                memcpy(&l, p + 1 + p[0], sizeof l);
                hand_over(x, (const char *)p + 1, p[0], p + 1 + p[0] + sizeof l, l);
                drain_replies(x);
                off += 1 + p[0] + sizeof l + l;
            }
            core_buf_reset(&q);
            x->spare = q;
        }
        drain_replies(x);
        if (!x->handed)
            break;
        unsigned handed = x->handed;
        x->handed = 0;
        fail(x, em_host_batch_end(x->h, handed));
    }
    x->in_check = false;
    if (x->queue.len || x->handed)
        uv_idle_start(&x->idle, idle_stop);
}

static void on_timer(uv_timer_t *t)
{
    struct em_hosted *x = t->data;
    em_gw_tick(x->g);
}

/* ---- lifetime ---- */

/* SYMBOLS for every symbol from the start: the host's own answer to the
 * query a separate gateway makes (`symbol <n>`). */
static void load_symbols(struct em_hosted *x)
{
    static char out[EM_BUS_PAYLOAD_MAX];
    for (unsigned nth = 1; nth <= EM_MKT_SYMS; nth++) {
        char arg[16];
        int al = snprintf(arg, sizeof arg, "%u", nth);
        const struct em_bus_topic *reply;
        size_t n = em_host_query(x->h, "symbol", 6, arg, (size_t)al, &reply, out, sizeof out);
        if (reply->len != 4 || memcmp(reply->s, "book", 4) != 0)
            break; /* past the last symbol */
        em_gw_bus_message(x->g, "md.", 3, out, n);
    }
}

int em_hosted_open(struct em_hosted **out, uv_loop_t *loop, struct em_host *h,
                   const struct em_hosted_config *cfg)
{
    struct em_hosted *x = calloc(1, sizeof *x);
    if (!x)
        return CORE_ENOMEM;
    x->cfg = *cfg;
    x->loop = loop;
    x->h = h;
    struct em_gw_config gc = {.bus = &hosted_bus,
                              .bus_ctx = x,
                              .rate_limit = cfg->rate_limit,
                              .rate_burst = cfg->rate_burst,
                              .login_retry_ms = cfg->login_retry_ms,
                              .resend_ms = cfg->resend_ms};
    x->g = em_gw_new(&gc);
    if (!x->g) {
        free(x);
        return CORE_ENOMEM;
    }
    int rc = 0;
    if (cfg->tokens_file && cfg->tokens_file[0])
        rc = em_gw_load_tokens(x->g, cfg->tokens_file);
    struct core_server_limits lim = {
        .maxclients = cfg->maxclients, .query_buf_limit = 1 << 20, .output_buf_limit = 64 << 20};
    if (rc == 0 &&
        core_server_new(&x->srv, loop, &em_alf_front_ops, x->g, &lim, "REJECT reason=AUTH\n") != 0)
        rc = CORE_ENOMEM;
    if (rc) {
        em_gw_free(x->g);
        free(x);
        return rc;
    }
    load_symbols(x);
    uv_check_init(loop, &x->check);
    x->check.data = x;
    uv_check_start(&x->check, on_check);
    uv_idle_init(loop, &x->idle);
    uv_timer_init(loop, &x->timer);
    x->timer.data = x;
    uint64_t every = cfg->login_retry_ms > 0 ? (uint64_t)cfg->login_retry_ms : 100;
    uv_timer_start(&x->timer, on_timer, every, every);
    *out = x;
    return 0;
}

int em_hosted_listen(struct em_hosted *x)
{
    return core_server_listen(x->srv, x->cfg.bind, x->cfg.port);
}

int em_hosted_port(const struct em_hosted *x)
{
    return core_server_port(x->srv);
}

void em_hosted_stop(struct em_hosted *x)
{
    if (!x || x->stopped)
        return;
    x->stopped = true;
    core_server_stop(x->srv); /* each session's DISCONNECT goes to the host */
    on_check(&x->check);      /* and what waits */
    uv_close((uv_handle_t *)&x->check, NULL);
    uv_close((uv_handle_t *)&x->idle, NULL);
    uv_close((uv_handle_t *)&x->timer, NULL);
}

void em_hosted_free(struct em_hosted *x)
{
    if (!x)
        return;
    core_server_free(x->srv);
    em_gw_free(x->g);
    core_buf_free(&x->queue);
    core_buf_free(&x->replies);
    core_buf_free(&x->spare);
    free(x);
}

struct em_gw_stats *em_hosted_stats(struct em_hosted *x)
{
    return em_gw_stats(x->g);
}
