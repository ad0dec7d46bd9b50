/*
 * edumatcher-gateway: the ALF front door (spec/ALF.md §1–4).
 *
 *   trader --ALF lines/TCP--> gateway --PUSH [gw][binary frames]--> engine
 *   trader <--ALF lines------ gateway <--SUB order.ack.<gw> [frames]-- engine
 *
 * The TCP side is the shared libuv scaffold (core/uv_server.h): one read,
 * every complete line handled, one write per batch. The frames one read
 * forwards go to the engine as one bus message (batch_flush: when the
 * session changes, the message is full, or the loop turn ends). Each
 * connection is one
 * trader session with its own gateway id (`gw`, ALF §2); many gateway
 * processes can run at once, each with its own sessions.
 *
 * Session states (functions making each transition):
 *
 *   NEW --LOGIN ok: begin_login--> LOGGING_IN --LOGGEDIN from engine: on_event--> LIVE
 *    |                                  |                                          |
 *    '--anything else: REJECT           '--(lines are held, handled once LIVE)     |
 *       NOT_LOGGED_IN                                                              |
 *   LIVE --LOGOUT: forwarded, close after reply--> DONE                            |
 *   LOGGING_IN / LIVE --connection drops: on_close--> DISCONNECT to the engine     |
 *                                                     (cancel-on-disconnect)       |
 *
 * Why LOGIN goes through the engine: the gateway subscribes to
 * `order.ack.<gw>` at LOGIN, and a zmq subscription takes effect
 * asynchronously. The engine answers LOGIN with LOGGEDIN on that very
 * topic; the gateway tells the trader LOGGEDIN only when that answer
 * arrives (re-sending LOGIN until it does), so the path for every later
 * ACK and FILL is proven before the trader can send an order.
 *
 * What the gateway checks alone, answering REJECT without the engine:
 * line length (LINE_TOO_LONG; the session stays open), the ALF form
 * (SYNTAX, MISSING_FIELD, BAD_VALUE first class, via em_alf_parse), AUTH
 * (operator messages only from OPS, client ones only from others; tokens
 * from --tokens-file), NOT_LOGGED_IN, and the per-session rate limit
 * (RATE_LIMIT, a token bucket). These local REJECTs can overtake replies
 * the engine has not sent yet; PING goes through the engine, so its PONG
 * is a barrier: everything sent before it has been answered.
 */
#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/uv_server.h"
#include "edumatcher/gateway/alf/alf.h"
#include "edumatcher/engine/engine.h" /* EM_OPS_GW */
#include "edumatcher/monitor/health.h"
#include "edumatcher/engine/msg.h"
#include "core/proc.h"
#include "edumatcher/bus/zmq_bus.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char host[CORE_OPT_STRLEN] = "127.0.0.1";
static int64_t port = 9001;
static char engine_pull[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9100";
static char engine_pub[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9101";
static char health_ep[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9102";
static char tokens_file[CORE_OPT_STRLEN] = "";
static char name_opt[CORE_OPT_STRLEN] = "gateway";
static int64_t rate_limit = 10000;
static int64_t rate_burst = 1000;
static int64_t maxclients = 1000;
static int64_t beacon_ms = 1000;
static int64_t login_retry_ms = 100;
static char loglevel[CORE_OPT_STRLEN] = "notice";

static const struct core_option options[] = {
    {"host", CORE_OPT_STRING, host, 0, 0, NULL, CORE_OPT_IMMUTABLE, "address to listen on"},
    {"port", CORE_OPT_INT, &port, 0, 65535, NULL, CORE_OPT_IMMUTABLE,
     "ALF port (0: any free port, printed at start)"},
    {"engine-pull", CORE_OPT_STRING, engine_pull, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the engine's PULL endpoint"},
    {"engine-pub", CORE_OPT_STRING, engine_pub, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the engine's PUB endpoint"},
    {"health", CORE_OPT_STRING, health_ep, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the monitor's health endpoint (\"\": no beacons)"},
    {"tokens-file", CORE_OPT_STRING, tokens_file, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "lines `<gw> <token>`: a gw listed must LOGIN with its token; OPS must be listed"},
    {"name", CORE_OPT_STRING, name_opt, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "process name in health beacons (several gateways: gateway1, gateway2, ...)"},
    {"rate-limit", CORE_OPT_INT, &rate_limit, 0, 100000000, NULL, 0,
     "messages per second per session (0: no limit)"},
    {"rate-burst", CORE_OPT_INT, &rate_burst, 1, 100000000, NULL, 0, "token bucket size"},
    {"maxclients", CORE_OPT_INT, &maxclients, 1, 100000, NULL, 0, "connections at most"},
    {"beacon-ms", CORE_OPT_INT, &beacon_ms, 10, 60000, NULL, 0, "health beacon interval"},
    {"login-retry-ms", CORE_OPT_INT, &login_retry_ms, 10, 10000, NULL, 0,
     "re-send LOGIN to the engine until it answers"},
    {"loglevel", CORE_OPT_STRING, loglevel, 0, 0, NULL, 0, "debug|verbose|notice|warning"},
    {NULL, 0, NULL, 0, 0, NULL, 0, NULL},
};

#define HASH_BUCKETS 4096         /* sessions by gw; a power of two */
#define HELD_MAX     (64u * 1024) /* input held while logging in */

enum sess_state { S_NEW, S_LOGGING_IN, S_LIVE, S_DONE };

struct session {
    struct core_conn *conn;
    enum sess_state state;
    char gw[EM_GW_MAX + 1];
    size_t gwlen;
    bool ops;        /* logged in as the operator */
    bool discarding; /* inside an overlong line (ALF §1) */
    bool dirty;      /* has output to flush after a bus batch */
    uint64_t tokens; /* rate limit bucket, in 1e-6 messages */
    uint64_t refill_ns;
    uint64_t login_sent_ns;
    struct em_bus_topic in_topic; /* the gw, as the PUSH topic frame */
    char sub_prefix[EM_BUS_TOPIC_MAX];
    struct core_buf held;          /* lines received while logging in */
    struct session *hnext;         /* hash chain */
    struct session *lnext, *lprev; /* sessions logging in */
};

static struct {
    uv_loop_t *loop;
    void *zctx;
    struct core_server *srv;
    struct em_bus_sock push, sub;
    struct em_health health;
    uv_timer_t login_timer;
    uv_check_t flush_check; /* sends the pending bus batch once per loop turn */
    struct core_proc proc;  /* signals */
    /* frames for the engine not sent yet: all of one session (batch_sess),
     * sent as one bus message when the session changes, the batch is full,
     * or the loop turn ends (flush_check) */
    struct session *batch_sess;
    size_t batch_len;
    unsigned batch_frames;
    uint8_t batch[EM_BUS_PAYLOAD_MAX];
    struct session *by_gw[HASH_BUCKETS];
    struct session *logging_in;
    struct session **dirty;
    size_t ndirty, dirty_cap;
    /* tokens */
    struct {
        char gw[EM_GW_MAX + 1];
        char token[EM_TOKEN_MAX + 1];
    } * tokens;
    size_t ntokens;
    /* metrics (totals) */
    uint64_t msgs_in, forwarded, events_out, rejects, rate_limited, bus_full, bad_events, unrouted;
    uint64_t bus_msgs_out, bus_msgs_in;
    int64_t sessions;
} G;

/* ---- sessions by gw ---- */

static uint32_t gw_hash(const char *gw, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)gw[i]) * 16777619u;
    return h & (HASH_BUCKETS - 1);
}

static struct session *find_gw(const char *gw, size_t n)
{
    for (struct session *s = G.by_gw[gw_hash(gw, n)]; s; s = s->hnext)
        if (s->gwlen == n && memcmp(s->gw, gw, n) == 0)
            return s;
    return NULL;
}

static void hash_remove(struct session *s)
{
    struct session **p = &G.by_gw[gw_hash(s->gw, s->gwlen)];
    while (*p && *p != s)
        p = &(*p)->hnext;
    if (*p)
        *p = s->hnext;
}

static void login_list_remove(struct session *s)
{
    if (s->lprev)
        s->lprev->lnext = s->lnext;
    else if (G.logging_in == s)
        G.logging_in = s->lnext;
    if (s->lnext)
        s->lnext->lprev = s->lprev;
    s->lnext = s->lprev = NULL;
}

/* ---- output ---- */

static void out(struct session *s, const char *p, size_t n)
{
    struct core_buf *b = core_conn_out(s->conn);
    core_buf_append(b, p, n);
}

static void reply_reject(struct session *s, const struct em_msg *m, int code)
{
    char line[EM_ALF_FORMAT_MAX + 1];
    struct em_msg r = {.kind = EM_MSG_REJECT, .present = EM_BIT(rej)};
    r.rej = (uint8_t)code;
    if (m && (m->present & EM_BIT(cl))) { /* docs/alf.md A.8: echo cl */
        r.present |= EM_BIT(cl);
        strcpy(r.cl, m->cl);
    }
    size_t n = em_alf_format(&r, line);
    line[n++] = '\n';
    out(s, line, n);
    G.rejects++;
}

static void mark_dirty(struct session *s)
{
    if (s->dirty)
        return;
    if (G.ndirty == G.dirty_cap) {
        size_t cap = G.dirty_cap ? G.dirty_cap * 2 : 256;
        struct session **d = realloc(G.dirty, cap * sizeof *d);
        if (!d)
            return;
        G.dirty = d;
        G.dirty_cap = cap;
    }
    G.dirty[G.ndirty++] = s;
    s->dirty = true;
}

/* ---- to the engine ---- */

/*
 * Send the pending batch: one bus message [gw][frame frame ...]. When the
 * engine's queue is full (PUSH at its high-water mark) nothing of it was
 * sent, and each frame's order is answered RATE_LIMIT, as one refused
 * alone would be: back off.
 */
static void batch_flush(void)
{
    struct session *s = G.batch_sess;
    if (!s || G.batch_len == 0)
        return;
    size_t len = G.batch_len;
    unsigned frames = G.batch_frames;
    G.batch_len = 0;
    G.batch_frames = 0;
    G.batch_sess = NULL;
    if (em_bus_send(&G.push, &s->in_topic, G.batch, len) == 0) {
        G.forwarded += frames;
        G.bus_msgs_out++;
        return;
    }
    G.bus_full += frames;
    if (core_conn_closing(s->conn))
        return;
    for (size_t off = 0; off < len;) {
        struct em_msg m;
        int n = em_frame_decode(G.batch + off, len - off, &m);
        if (n <= 0)
            break;
        if (m.kind != EM_MSG_LOGIN && m.kind != EM_MSG_DISCONNECT && m.kind != EM_MSG_LOGOUT)
            reply_reject(s, &m, EM_REJ_RATE_LIMIT);
        off += (size_t)n;
    }
    core_conn_flush(s->conn);
}

/* Queue m for the engine in s's batch (docs/perf.md: one bus message per
 * read rather than per line). Returns 0 or CORE_ETOOBIG (not encodable). */
static int forward(struct session *s, const struct em_msg *m)
{
    uint8_t frame[EM_FRAME_MAX];
    int n = em_frame_encode(m, frame, sizeof frame);
    if (n < 0)
        return n;
    if (G.batch_sess != s || G.batch_len + (size_t)n > sizeof G.batch)
        batch_flush();
    G.batch_sess = s;
    memcpy(G.batch + G.batch_len, frame, (size_t)n);
    G.batch_len += (size_t)n;
    G.batch_frames++;
    return 0;
}

static void on_flush_check(uv_check_t *h)
{
    batch_flush();
}

static void send_login(struct session *s)
{
    struct em_msg m = {.kind = EM_MSG_LOGIN, .present = EM_BIT(gw)};
    memcpy(m.gw, s->gw, s->gwlen + 1);
    forward(s, &m);
    s->login_sent_ns = core_now_ns();
}

/* ---- rate limit: token bucket per session ---- */

static bool rate_ok(struct session *s)
{
    if (rate_limit <= 0)
        return true;
    uint64_t now = core_now_ns();
    uint64_t cap = (uint64_t)rate_burst * 1000000u;
    /* rate msgs/s = rate * 1e6 micro-messages per 1e9 ns */
    uint64_t add = (now - s->refill_ns) * (uint64_t)rate_limit / 1000u;
    s->refill_ns = now;
    s->tokens = s->tokens + add > cap ? cap : s->tokens + add;
    if (s->tokens < 1000000u)
        return false;
    s->tokens -= 1000000u;
    return true;
}

/* ---- lines from the trader ---- */

static const char *token_of(const char *gw)
{
    for (size_t i = 0; i < G.ntokens; i++)
        if (strcmp(G.tokens[i].gw, gw) == 0)
            return G.tokens[i].token;
    return NULL;
}

static void begin_login(struct session *s, const struct em_msg *m)
{
    const char *want = token_of(m->gw);
    bool is_ops = strcmp(m->gw, EM_OPS_GW) == 0;
    bool token_ok = want ? (m->present & EM_BIT(token)) && strcmp(want, m->token) == 0 : !is_ops;
    if (!token_ok || find_gw(m->gw, strlen(m->gw))) {
        /* wrong or missing token; OPS without a configured token; or the
         * gw already has a session on this gateway */
        reply_reject(s, m, EM_REJ_AUTH);
        return;
    }
    s->gwlen = strlen(m->gw);
    memcpy(s->gw, m->gw, s->gwlen + 1);
    s->ops = is_ops;
    em_bus_topic_set(&s->in_topic, "", s->gw, s->gwlen);
    snprintf(s->sub_prefix, sizeof s->sub_prefix, "order.ack.%s", s->gw);
    uint32_t h = gw_hash(s->gw, s->gwlen);
    s->hnext = G.by_gw[h];
    G.by_gw[h] = s;
    s->state = S_LOGGING_IN;
    s->lnext = G.logging_in;
    if (G.logging_in)
        G.logging_in->lprev = s;
    G.logging_in = s;
    s->tokens = (uint64_t)rate_burst * 1000000u;
    s->refill_ns = core_now_ns();
    em_bus_subscribe(&G.sub, s->sub_prefix);
    send_login(s);
}

/* One line, without its terminator (ALF §1). */
static void handle_line(struct session *s, const char *line, size_t n)
{
    if (n && line[n - 1] == '\r')
        n--;
    size_t i = 0;
    while (i < n && line[i] == ' ')
        i++;
    if (i == n)
        return; /* empty lines are ignored */
    G.msgs_in++;
    if (n > EM_ALF_LINE_MAX) {
        reply_reject(s, NULL, EM_REJ_LINE_TOO_LONG);
        return;
    }
    struct em_msg m;
    int code = em_alf_parse(line, n, &m);
    switch (s->state) {
    case S_NEW:
        if (m.kind != EM_MSG_LOGIN) {
            reply_reject(s, &m, EM_REJ_NOT_LOGGED_IN); /* ALF §3 */
            return;
        }
        if (code) {
            reply_reject(s, &m, code);
            return;
        }
        begin_login(s, &m);
        return;
    case S_LOGGING_IN: /* not reached: input is held while logging in */
    case S_DONE:
        return;
    case S_LIVE:
        break;
    }
    if (code != EM_REJ_SYNTAX && m.kind != EM_MSG__NONE) {
        /* docs/alf.md C.4: AUTH right after SYNTAX */
        bool oper = em_msgs[m.kind].cls == EM_CLASS_OPER;
        bool client = em_msgs[m.kind].cls == EM_CLASS_CLIENT;
        if ((oper && !s->ops) || (client && s->ops && m.kind != EM_MSG_PING &&
                                  m.kind != EM_MSG_LOGOUT && m.kind != EM_MSG_LOGIN))
            code = EM_REJ_AUTH;
        if (em_msgs[m.kind].cls == EM_CLASS_EVENT || m.kind == EM_MSG_DISCONNECT)
            code = EM_REJ_SYNTAX; /* not something a trader sends */
    }
    if (code) {
        reply_reject(s, &m, code);
        return;
    }
    switch (m.kind) {
    case EM_MSG_PING:
        /* Through the engine, so PONG comes after the replies to what was
         * sent before it (a trader, or the operator, may use PING as a
         * barrier; docs/alf.md C.4). */
        break;
    case EM_MSG_LOGIN:
        reply_reject(s, &m, EM_REJ_AUTH); /* one login per session */
        return;
    case EM_MSG_LOGOUT:
        /* docs/alf.md C.2: cancels like a disconnect; no event */
        forward(s, &m);
        s->state = S_DONE;
        hash_remove(s);
        em_bus_unsubscribe(&G.sub, s->sub_prefix);
        core_conn_close_after_reply(s->conn);
        return;
    default:
        break;
    }
    /* PING is a heartbeat and a barrier: never refused for the rate. */
    if (m.kind != EM_MSG_PING && !rate_ok(s)) {
        G.rate_limited++;
        reply_reject(s, &m, EM_REJ_RATE_LIMIT);
        return;
    }
    forward(s, &m); /* a full engine queue is answered at batch_flush */
}

/* Split data into lines and handle them, stopping when a LOGIN starts
 * (what follows is held until the engine answers). Returns what was
 * consumed. */
static size_t handle_lines(struct session *s, char *data, size_t len)
{
    size_t pos = 0;
    while (pos < len && !core_conn_closing(s->conn) && s->state != S_LOGGING_IN) {
        char *nl = memchr(data + pos, '\n', len - pos);
        if (!nl) {
            /* ALF §1: a line over the limit is discarded up to its \n. */
            if (s->discarding || len - pos > EM_ALF_LINE_MAX + 1) {
                s->discarding = true;
                return len;
            }
            return pos;
        }
        size_t n = (size_t)(nl - (data + pos));
        if (s->discarding) {
            s->discarding = false;
            G.msgs_in++;
            reply_reject(s, NULL, EM_REJ_LINE_TOO_LONG);
        } else {
            handle_line(s, data + pos, n);
        }
        pos += n + 1;
    }
    return pos;
}

/* Handle what was held while logging in (and any input after it, until
 * the held buffer is empty again). */
static void process_held(struct session *s)
{
    size_t used = handle_lines(s, s->held.data, s->held.len);
    memmove(s->held.data, s->held.data + used, s->held.len - used);
    s->held.len -= used;
}

static bool hold(struct session *s, const char *data, size_t len)
{
    if (s->held.len + len > HELD_MAX) {
        core_conn_close(s->conn);
        return false;
    }
    core_buf_append(&s->held, data, len);
    return true;
}

/* ---- core_server callbacks ---- */

static int on_open(struct core_conn *c, void *app)
{
    struct session *s = calloc(1, sizeof *s);
    if (!s)
        return CORE_ENOMEM;
    s->conn = c;
    core_conn_set_data(c, s);
    G.sessions++;
    return 0;
}

static size_t on_data(struct core_conn *c, char *data, size_t len)
{
    struct session *s = core_conn_data(c);
    if (s->state == S_LOGGING_IN || s->held.len) {
        if (hold(s, data, len) && s->state != S_LOGGING_IN)
            process_held(s);
        return len;
    }
    size_t used = handle_lines(s, data, len);
    if (s->state == S_LOGGING_IN && used < len) {
        hold(s, data + used, len - used);
        return len;
    }
    return used;
}

static void on_close(struct core_conn *c)
{
    struct session *s = core_conn_data(c);
    if (s->state == S_LOGGING_IN || s->state == S_LIVE) {
        /* cancel-on-disconnect (ALF §8) */
        struct em_msg m = {.kind = EM_MSG_DISCONNECT};
        forward(s, &m);
        batch_flush(); /* the batch refers to s, which goes now */
        hash_remove(s);
        em_bus_unsubscribe(&G.sub, s->sub_prefix);
    }
    if (s->state == S_LOGGING_IN)
        login_list_remove(s);
    for (size_t i = 0; i < G.ndirty; i++)
        if (G.dirty[i] == s)
            G.dirty[i] = NULL;
    if (G.batch_sess == s) /* NEW/DONE sessions: nothing of theirs may wait */
        batch_flush();
    core_buf_free(&s->held);
    free(s);
    G.sessions--;
}

/* ---- events from the engine ---- */

static void go_live(struct session *s)
{
    login_list_remove(s);
    s->state = S_LIVE;
    char line[64];
    int n = snprintf(line, sizeof line, "LOGGEDIN gw=%s\n", s->gw);
    out(s, line, (size_t)n);
    if (s->held.len)
        process_held(s); /* lines that arrived while logging in, in order */
}

/* One event for session s. */
static void handle_event(struct session *s, const struct em_msg *ev)
{
    if (ev->kind == EM_MSG_LOGGEDIN || (s->ops && s->state == S_LOGGING_IN)) {
        /* The engine answers a trader's LOGIN with LOGGEDIN, and the
         * operator's with REJECT AUTH (LOGIN is a client message, docs/alf.md
         * C.4): either proves the path. */
        mark_dirty(s); /* first: go_live may end the session (a held LOGOUT) */
        if (s->state == S_LOGGING_IN)
            go_live(s);
        return; /* a re-sent LOGIN's extra answers are dropped */
    }
    if (s->state != S_LIVE)
        return;
    if (s->ops && ev->kind == EM_MSG_REJECT && ev->rej == EM_REJ_AUTH &&
        !(ev->present & EM_BIT(cl)))
        return; /* a re-sent LOGIN's late answer: the gateway refuses the
                   operator's client messages itself, so nothing else is */
    char line[EM_ALF_FORMAT_MAX + 1];
    size_t n = em_alf_format(ev, line);
    line[n++] = '\n';
    out(s, line, n);
    G.events_out++;
    mark_dirty(s);
}

/* One bus message: `order.ack.<gw>` and one or more event frames for that
 * session, in the engine's order. */
static void on_event(struct em_bus_sock *b, const char *topic, size_t tl, const void *payload,
                     size_t len, void *data)
{
    static const char prefix[] = "order.ack.";
    G.bus_msgs_in++;
    if (tl <= sizeof prefix - 1 || memcmp(topic, prefix, sizeof prefix - 1) != 0) {
        G.unrouted++;
        return;
    }
    const char *gw = topic + sizeof prefix - 1;
    size_t gwlen = tl - (sizeof prefix - 1);
    const uint8_t *p = payload, *end = p + len;
    while (p < end) {
        /* Looked up per event: an event can end the session (go_live
         * handles held lines, a LOGOUT among them). Exact match:
         * order.ack.GW1 is also a prefix of order.ack.GW10. */
        struct session *s = find_gw(gw, gwlen);
        if (!s || core_conn_closing(s->conn)) {
            G.unrouted++;
            return;
        }
        struct em_msg ev;
        int n = em_frame_decode(p, (size_t)(end - p), &ev);
        if (n <= 0) {
            G.bad_events++;
            return;
        }
        handle_event(s, &ev);
        p += n;
    }
}

/* After a batch of events: one write per touched connection. */
static void on_event_batch(struct em_bus_sock *b, unsigned handled, void *data)
{
    for (size_t i = 0; i < G.ndirty; i++) {
        struct session *s = G.dirty[i];
        if (!s)
            continue;
        s->dirty = false;
        core_conn_flush(s->conn);
    }
    G.ndirty = 0;
}

static void on_login_timer(uv_timer_t *t)
{
    uint64_t now = core_now_ns();
    for (struct session *s = G.logging_in; s; s = s->lnext)
        if (now - s->login_sent_ns >= (uint64_t)login_retry_ms * 1000000u)
            send_login(s);
}

/* ---- start-up ---- */

static int load_tokens(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        CORE_WARN("gateway: cannot open %s", path);
        return CORE_ENOTFOUND;
    }
    char line[256];
    size_t cap = 0;
    while (fgets(line, sizeof line, f)) {
        char gw[64], tok[128];
        if (line[0] == '#' || sscanf(line, "%63s %127s", gw, tok) != 2)
            continue;
        if (!em_valid_gw(gw, strlen(gw)) && strcmp(gw, EM_OPS_GW) != 0)
            continue;
        if (strlen(tok) > EM_TOKEN_MAX || !em_valid_token(tok, strlen(tok)))
            continue;
        if (G.ntokens == cap) {
            cap = cap ? cap * 2 : 16;
            void *p = realloc(G.tokens, cap * sizeof *G.tokens);
            if (!p) {
                fclose(f);
                return CORE_ENOMEM;
            }
            G.tokens = p;
        }
        strcpy(G.tokens[G.ntokens].gw, gw);
        strcpy(G.tokens[G.ntokens].token, tok);
        G.ntokens++;
    }
    fclose(f);
    return 0;
}

static void on_stop(struct core_proc *p, void *data)
{
    core_server_stop(G.srv); /* on_close sends each session's DISCONNECT */
    em_bus_close(&G.sub);
    em_bus_close(&G.push);
    em_health_stop(&G.health);
    uv_close((uv_handle_t *)&G.login_timer, NULL);
    uv_close((uv_handle_t *)&G.flush_check, NULL);
}

int main(int argc, char **argv)
{
    int rc, code;
    if (core_proc_options("edumatcher-gateway", 'G', options, loglevel, argc, argv, &code))
        return code;
    if (tokens_file[0] && load_tokens(tokens_file) != 0)
        return 1;

    G.loop = uv_default_loop();
    if (em_bus_ctx_new(&G.zctx) != 0)
        return 1;
    rc = em_bus_open(&G.push, G.zctx, EM_BUS_PUSH, engine_pull, false);
    if (rc == 0)
        rc = em_bus_open(&G.sub, G.zctx, EM_BUS_SUB, engine_pub, false);
    if (rc) {
        CORE_WARN("gateway: cannot connect to the engine: %s", core_strerror(rc));
        return 1;
    }
    em_bus_watch(&G.sub, G.loop, 1024, on_event, NULL);
    G.sub.on_batch = on_event_batch;

    static const struct core_server_ops ops = {
        .on_open = on_open, .on_data = on_data, .on_close = on_close};
    struct core_server_limits lim = {.maxclients = maxclients,
                                     .query_buf_limit = 1 << 20,
                                     .output_buf_limit = 64 << 20,
                                     .idle_timeout_s = 0};
    if (core_server_new(&G.srv, G.loop, &ops, NULL, &lim, "REJECT reason=AUTH\n") != 0)
        return 1;
    rc = core_server_listen(G.srv, host, (int)port);
    if (rc) {
        CORE_WARN("gateway: cannot listen on %s:%d: %s", host, (int)port, core_strerror(rc));
        return 1;
    }

    em_health_init(&G.health, name_opt);
    struct core_metrics *mt = &G.health.metrics;
    core_metrics_counter(mt, "msgs_in", &G.msgs_in);
    core_metrics_counter(mt, "forwarded", &G.forwarded);
    core_metrics_counter(mt, "bus_msgs_out", &G.bus_msgs_out);
    core_metrics_counter(mt, "bus_msgs_in", &G.bus_msgs_in);
    core_metrics_counter(mt, "events_out", &G.events_out);
    core_metrics_counter(mt, "rejects", &G.rejects);
    core_metrics_counter(mt, "rate_limited", &G.rate_limited);
    core_metrics_counter(mt, "bus_full", &G.bus_full);
    core_metrics_counter(mt, "bad_events", &G.bad_events);
    core_metrics_gauge(mt, "sessions", &G.sessions);
    em_health_start_or_warn("gateway", &G.health, G.loop, G.zctx, health_ep, (uint64_t)beacon_ms,
                            NULL, NULL);

    uv_timer_init(G.loop, &G.login_timer);
    uv_timer_start(&G.login_timer, on_login_timer, (uint64_t)login_retry_ms,
                   (uint64_t)login_retry_ms);
    /* Runs after each loop turn's I/O callbacks: what every read of the
     * turn forwarded leaves before the loop sleeps again. */
    uv_check_init(G.loop, &G.flush_check);
    uv_check_start(&G.flush_check, on_flush_check);
    core_proc_signals_start(&G.proc, G.loop, "gateway", on_stop, NULL);

    /* the ready line: tests and scripts wait for it */
    printf("edumatcher-gateway %s:%d engine %s %s\n", host, (int)port, engine_pull, engine_pub);
    fflush(stdout);
    uv_run(G.loop, UV_RUN_DEFAULT);
    /* let the DISCONNECTs go out (PUSH linger) before the context ends */
    em_bus_ctx_term(G.zctx);
    core_server_free(G.srv);
    core_proc_signals_close(&G.proc, G.loop);
    uv_loop_close(G.loop);
    return 0;
}
