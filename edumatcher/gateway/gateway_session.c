/*
 * Gateway sessions (gateway_session.h): login, AUTH, rate limit, batching
 * towards the engine, routing of its events back.
 */
#include "edumatcher/gateway/gateway_session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/list.h"
#include "core/hash.h"
#include "edumatcher/bus/zmq_bus.h"   /* EM_BUS_PAYLOAD_MAX, EM_BUS_TOPIC_MAX */
#include "edumatcher/engine/engine.h" /* EM_OPS_GW */

#define HASH_BUCKETS 4096 /* sessions by gw; a power of two */
#define PEND_FRAME   128  /* a numbered message's frame (NEW, the longest, < 100) */
#define PEND_MIN     64   /* first size of a session's window; doubles up to the max */
#define RESEND_MS    1000 /* default of em_gw_config.resend_ms */

/* A numbered message sent to the engine, kept until its first reply. */
struct pend {
    uint64_t seq; /* 0: free */
    uint64_t sent_ns;
    bool answered;
    uint8_t len;
    uint8_t frame[PEND_FRAME];
};

enum sess_state { S_NEW, S_LOGGING_IN, S_LIVE, S_DONE };

struct em_gw_session {
    struct em_gw *g;
    const struct em_gw_front *front;
    void *fctx;
    enum sess_state state;
    char gw[EM_GW_MAX + 1];
    size_t gwlen;
    bool ops;        /* logged in as the operator */
    bool dirty;      /* has output to flush after a bus batch */
    uint64_t tokens; /* rate limit bucket, in 1e-6 messages */
    uint64_t refill_ns;
    uint64_t login_sent_ns;
    char sub_topic[EM_BUS_TOPIC_MAX];
    /* PINGs in flight, oldest in bit 0: 1 = the barrier after an operator
     * message (its PONG becomes OK), 0 = the trader's own PING */
    uint64_t pings;
    unsigned npings;
    bool op_rejected; /* a REJECT came for the operator message in flight */
    /* Numbered messages not answered yet (docs/alf.md I): seqs head..next-1
     * by seq modulo pend_cap (a power of two, grown up to EM_RESEND_WINDOW);
     * RESEND requests for seqs below resent_to came before the last resend. */
    struct pend *pend;
    uint32_t pend_cap;
    uint64_t next_seq, head_seq, resent_to;
    /* Events (docs/alf.md I.6): the last number delivered; a RESYNC
     * asking for what follows resync_from is unanswered; events were lost
     * (the session ends once lost_until, the engine's last then, is
     * delivered) */
    uint64_t ev_last, resync_from, lost_until;
    bool resync_pending, ev_lost;
    struct em_gw_session *hnext; /* hash chain */
    struct core_list login;      /* in em_gw.logging_in while S_LOGGING_IN */
};

struct em_gw {
    struct em_gw_config cfg;
    /* frames for the engine not sent yet: all of one session (batch_sess),
     * sent as one bus message when the session changes, the batch is full,
     * or em_gw_flush is called */
    struct em_gw_session *batch_sess;
    size_t batch_len;
    unsigned batch_frames;
    uint8_t batch[EM_BUS_PAYLOAD_MAX];
    struct em_gw_session *by_gw[HASH_BUCKETS];
    struct core_list logging_in; /* em_gw_session.login */
    struct em_gw_session **dirty;
    size_t ndirty, dirty_cap;
    struct {
        char gw[EM_GW_MAX + 1];
        char token[EM_TOKEN_MAX + 1];
    } * tokens;
    size_t ntokens, tokens_cap;
    struct em_gw_stats st;
    struct em_mkt *mkt; /* the latest MD line per symbol (SYMBOLS) */
};

static uint64_t now_ns(const struct em_gw *g)
{
    return g->cfg.bus->now_ns ? g->cfg.bus->now_ns(g->cfg.bus_ctx) : core_now_ns();
}

static bool closing(const struct em_gw_session *s)
{
    return s->front->closing(s->fctx);
}

/* ---- sessions by gw ---- */

static uint32_t gw_hash(const char *gw, size_t n)
{
    return core_fnv1a32(gw, n) & (HASH_BUCKETS - 1);
}

static struct em_gw_session *find_gw(struct em_gw *g, const char *gw, size_t n)
{
    for (struct em_gw_session *s = g->by_gw[gw_hash(gw, n)]; s; s = s->hnext)
        if (s->gwlen == n && memcmp(s->gw, gw, n) == 0)
            return s;
    return NULL;
}

static void hash_remove(struct em_gw_session *s)
{
    struct em_gw_session **p = &s->g->by_gw[gw_hash(s->gw, s->gwlen)];
    while (*p && *p != s)
        p = &(*p)->hnext;
    if (*p)
        *p = s->hnext;
}

static void login_list_remove(struct em_gw_session *s)
{
    core_list_remove(&s->login);
}

/* ---- output ---- */

static void reply_reject(struct em_gw_session *s, const struct em_msg *m, int code)
{
    struct em_msg r = {.kind = EM_MSG_REJECT, .present = EM_BIT(rej)};
    r.rej = (uint8_t)code;
    if (m && (m->present & EM_BIT(cl))) { /* docs/alf.md A.8: echo cl */
        r.present |= EM_BIT(cl);
        strcpy(r.cl, m->cl);
    }
    s->front->deliver(s->fctx, &r);
    s->g->st.rejects++;
    if ((unsigned)code <= EM_REJ_LOGGED_IN_ELSEWHERE)
        s->g->st.rejects_by[code]++;
}

static void mark_dirty(struct em_gw_session *s)
{
    struct em_gw *g = s->g;
    if (s->dirty)
        return;
    if (g->ndirty == g->dirty_cap) {
        size_t cap = g->dirty_cap ? g->dirty_cap * 2 : 256;
        struct em_gw_session **d = realloc(g->dirty, cap * sizeof *d);
        if (!d)
            return;
        g->dirty = d;
        g->dirty_cap = cap;
    }
    g->dirty[g->ndirty++] = s;
    s->dirty = true;
}

/* ---- to the engine ---- */

static void answered(struct em_gw_session *s, uint64_t seq);

/*
 * Send the pending batch: one bus message [gw][frame frame ...]. When the
 * engine's queue is full nothing of it was sent, and each frame's order is
 * answered RATE_LIMIT, as one refused alone would be: back off.
 */
void em_gw_flush(struct em_gw *g)
{
    struct em_gw_session *s = g->batch_sess;
    if (!s || g->batch_len == 0)
        return;
    size_t len = g->batch_len;
    unsigned frames = g->batch_frames;
    g->batch_len = 0;
    g->batch_frames = 0;
    g->batch_sess = NULL;
    if (g->cfg.bus->send(g->cfg.bus_ctx, s->gw, s->gwlen, g->batch, len) == 0) {
        g->st.forwarded += frames;
        g->st.bus_msgs_out++;
        return;
    }
    g->st.bus_full += frames;
    if (closing(s))
        return;
    for (size_t off = 0; off < len;) {
        struct em_msg m;
        int n = em_frame_decode(g->batch + off, len - off, &m);
        if (n <= 0)
            break;
        if (m.kind == EM_MSG_RESYNC) { /* not sent: the next gap or link loss asks */
            s->resync_pending = false;
            off += (size_t)n;
            continue;
        }
        if (m.present & EM_BIT(seq))
            answered(s, m.seq); /* here, at once: nothing to resend */
        if (m.kind != EM_MSG_LOGIN && m.kind != EM_MSG_DISCONNECT && m.kind != EM_MSG_LOGOUT)
            reply_reject(s, &m, EM_REJ_RATE_LIMIT);
        off += (size_t)n;
    }
    s->front->flush(s->fctx);
}

/* Queue m for the engine in s's batch (docs/perf.md: one bus message per
 * read rather than per line). Returns 0 or CORE_ETOOBIG (not encodable). */
static void batch_add(struct em_gw_session *s, const uint8_t *frame, size_t n)
{
    struct em_gw *g = s->g;
    if (g->batch_sess != s || g->batch_len + n > sizeof g->batch)
        em_gw_flush(g);
    g->batch_sess = s;
    memcpy(g->batch + g->batch_len, frame, n);
    g->batch_len += n;
    g->batch_frames++;
}

static int forward(struct em_gw_session *s, const struct em_msg *m)
{
    uint8_t frame[EM_FRAME_MAX];
    int n = em_frame_encode(m, frame, sizeof frame);
    if (n < 0)
        return n;
    batch_add(s, frame, (size_t)n);
    return 0;
}

/* ---- numbered messages: kept until answered, resent (docs/alf.md I) ---- */

static bool numbered(const struct em_gw_session *s, uint8_t kind)
{
    return !s->ops && (kind == EM_MSG_NEW || kind == EM_MSG_CANCEL || kind == EM_MSG_REPLACE ||
                       kind == EM_MSG_PING);
}

static struct pend *pend_of(struct em_gw_session *s, uint64_t seq)
{
    return &s->pend[seq & (s->pend_cap - 1)];
}

/* Room for one more: false when EM_RESEND_WINDOW wait for an answer (or
 * no memory), and the message is refused (RATE_LIMIT). The window grows
 * by doubling: once per size, never per message. */
static bool pend_room(struct em_gw_session *s)
{
    uint64_t n = s->next_seq - s->head_seq;
    if (n < s->pend_cap)
        return true;
    if (s->pend_cap >= EM_RESEND_WINDOW)
        return false;
    uint32_t cap = s->pend_cap ? s->pend_cap * 2 : PEND_MIN;
    struct pend *p = calloc(cap, sizeof *p);
    if (!p)
        return false;
    for (uint64_t q = s->head_seq; q < s->next_seq; q++)
        p[q & (cap - 1)] = *pend_of(s, q);
    free(s->pend);
    s->pend = p;
    s->pend_cap = cap;
    return true;
}

/* The first reply of numbered message seq came (or was written here). */
static void answered(struct em_gw_session *s, uint64_t seq)
{
    if (seq < s->head_seq || seq >= s->next_seq)
        return;
    pend_of(s, seq)->answered = true;
    while (s->head_seq < s->next_seq && pend_of(s, s->head_seq)->answered)
        s->head_seq++;
}

/* Number m, keep it and queue it for the engine. Returns 0, CORE_EBUSY
 * (the window is full) or the encoder's error. */
static int forward_numbered(struct em_gw_session *s, const struct em_msg *m)
{
    if (!pend_room(s))
        return CORE_EBUSY;
    struct em_msg c = *m;
    c.present |= EM_BIT(seq);
    c.seq = s->next_seq;
    uint8_t frame[EM_FRAME_MAX];
    int n = em_frame_encode(&c, frame, sizeof frame);
    if (n < 0 || n > PEND_FRAME)
        return n < 0 ? n : CORE_ETOOBIG;
    struct pend *p = pend_of(s, c.seq);
    p->seq = c.seq;
    p->sent_ns = now_ns(s->g);
    p->answered = false;
    p->len = (uint8_t)n;
    memcpy(p->frame, frame, (size_t)n);
    s->next_seq++;
    batch_add(s, frame, (size_t)n);
    return 0;
}

/* Send every unanswered numbered message again, oldest first, after what
 * is batched: the engine answers those it handled from what it kept and
 * handles the others (an engine restart lost them). A bus that refuses
 * leaves them for the next resend. */
static void resend(struct em_gw_session *s)
{
    struct em_gw *g = s->g;
    em_gw_flush(g);
    uint64_t now = now_ns(g);
    size_t len = 0;
    unsigned frames = 0;
    for (uint64_t q = s->head_seq; q < s->next_seq; q++) {
        struct pend *p = pend_of(s, q);
        if (p->answered)
            continue;
        if (len + p->len > sizeof g->batch) {
            if (g->cfg.bus->send(g->cfg.bus_ctx, s->gw, s->gwlen, g->batch, len) != 0)
                return;
            g->st.bus_msgs_out++;
            len = 0;
        }
        memcpy(g->batch + len, p->frame, p->len);
        len += p->len;
        p->sent_ns = now;
        frames++;
    }
    if (len && g->cfg.bus->send(g->cfg.bus_ctx, s->gw, s->gwlen, g->batch, len) != 0)
        return;
    if (len)
        g->st.bus_msgs_out++;
    g->st.resent += frames;
    s->resent_to = s->next_seq;
}

/* An event with seq: the first reply of numbered message seq (true: give
 * it to the trader), an answer to it that came before (false: dropped),
 * or the engine's request to send again from the oldest unanswered one
 * (REJECT RESEND; false). */
static bool first_reply(struct em_gw_session *s, const struct em_msg *ev)
{
    if (ev->kind == EM_MSG_REJECT && ev->rej == EM_REJ_RESEND) {
        s->g->st.resend_requests++;
        if (ev->seq >= s->resent_to) /* else: sent before the last resend */
            resend(s);
        return false;
    }
    if (ev->seq < s->head_seq || ev->seq >= s->next_seq || pend_of(s, ev->seq)->answered ||
        pend_of(s, ev->seq)->seq != ev->seq) {
        s->g->st.duplicates++;
        return false;
    }
    answered(s, ev->seq);
    return true;
}

static void send_login(struct em_gw_session *s)
{
    struct em_msg m = {.kind = EM_MSG_LOGIN, .present = EM_BIT(gw)};
    memcpy(m.gw, s->gw, s->gwlen + 1);
    forward(s, &m);
    s->login_sent_ns = now_ns(s->g);
}

/* Ask the engine for the events after the last delivered (queued: it goes
 * before a resend, which flushes first). */
static void request_resync(struct em_gw_session *s)
{
    struct em_msg m = {.kind = EM_MSG_RESYNC, .present = EM_BIT(eseq)};
    m.eseq = s->ev_last;
    forward(s, &m);
    s->resync_from = s->ev_last;
    s->resync_pending = true;
    s->g->st.resyncs++;
}

void em_gw_engine_lost(struct em_gw *g)
{
    for (unsigned b = 0; b < HASH_BUCKETS; b++)
        for (struct em_gw_session *s = g->by_gw[b]; s; s = s->hnext)
            if (s->state == S_LIVE && !closing(s))
                request_resync(s);
    em_gw_flush(g);
}

void em_gw_engine_restarted(struct em_gw *g)
{
    for (unsigned b = 0; b < HASH_BUCKETS; b++)
        for (struct em_gw_session *s = g->by_gw[b]; s; s = s->hnext) {
            if (s->state != S_LIVE || closing(s))
                continue;
            if (!s->resync_pending)
                request_resync(s); /* em_gw_engine_lost queued none */
            if (s->head_seq < s->next_seq)
                resend(s);
        }
}

void em_gw_tick(struct em_gw *g)
{
    uint64_t now = now_ns(g);
    struct core_list *l, *next;
    core_list_foreach_safe(l, next, &g->logging_in)
    {
        struct em_gw_session *s = CORE_CONTAINER_OF(l, struct em_gw_session, login);
        if (now - s->login_sent_ns >= (uint64_t)g->cfg.login_retry_ms * 1000000u)
            send_login(s);
    }
    /* Numbered messages unanswered for resend_ms: the engine may have
     * restarted without them (an idle session hears no RESEND request). */
    uint64_t wait = (uint64_t)g->cfg.resend_ms * 1000000u;
    for (unsigned b = 0; b < HASH_BUCKETS; b++)
        for (struct em_gw_session *s = g->by_gw[b]; s; s = s->hnext)
            if (s->state == S_LIVE && s->head_seq < s->next_seq &&
                now - pend_of(s, s->head_seq)->sent_ns >= wait && !closing(s))
                resend(s);
}

/* ---- rate limit: token bucket per session ---- */

static bool rate_ok(struct em_gw_session *s)
{
    const struct em_gw_config *c = &s->g->cfg;
    if (c->rate_limit <= 0)
        return true;
    uint64_t now = now_ns(s->g);
    uint64_t cap = (uint64_t)c->rate_burst * 1000000u;
    /* rate msgs/s = rate * 1e6 micro-messages per 1e9 ns */
    uint64_t add = (now - s->refill_ns) * (uint64_t)c->rate_limit / 1000u;
    s->refill_ns = now;
    s->tokens = s->tokens + add > cap ? cap : s->tokens + add;
    if (s->tokens < 1000000u)
        return false;
    s->tokens -= 1000000u;
    return true;
}

/* ---- tokens ---- */

int em_gw_add_token(struct em_gw *g, const char *gw, const char *token)
{
    if ((!em_valid_gw(gw, strlen(gw)) && strcmp(gw, EM_OPS_GW) != 0) ||
        strlen(token) > EM_TOKEN_MAX || !em_valid_token(token, strlen(token)))
        return CORE_EINVAL;
    if (g->ntokens == g->tokens_cap) {
        size_t cap = g->tokens_cap ? g->tokens_cap * 2 : 16;
        void *p = realloc(g->tokens, cap * sizeof *g->tokens);
        if (!p)
            return CORE_ENOMEM;
        g->tokens = p;
        g->tokens_cap = cap;
    }
    strcpy(g->tokens[g->ntokens].gw, gw);
    strcpy(g->tokens[g->ntokens].token, token);
    g->ntokens++;
    return 0;
}

int em_gw_load_tokens(struct em_gw *g, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return CORE_ENOTFOUND;
    char line[256];
    int rc = 0;
    while (rc != CORE_ENOMEM && fgets(line, sizeof line, f)) {
        char gw[64], tok[128];
        if (line[0] == '#' || sscanf(line, "%63s %127s", gw, tok) != 2)
            continue;
        rc = em_gw_add_token(g, gw, tok);
    }
    fclose(f);
    return rc == CORE_ENOMEM ? rc : 0;
}

static const char *token_of(const struct em_gw *g, const char *gw)
{
    for (size_t i = 0; i < g->ntokens; i++)
        if (strcmp(g->tokens[i].gw, gw) == 0)
            return g->tokens[i].token;
    return NULL;
}

/* ---- messages from the trader ---- */

static void begin_login(struct em_gw_session *s, const struct em_msg *m)
{
    struct em_gw *g = s->g;
    const char *want = token_of(g, m->gw);
    bool is_ops = strcmp(m->gw, EM_OPS_GW) == 0;
    bool token_ok = want ? (m->present & EM_BIT(token)) && strcmp(want, m->token) == 0 : !is_ops;
    if (!token_ok || find_gw(g, m->gw, strlen(m->gw))) {
        /* wrong or missing token; OPS without a configured token; or the
         * gw already has a session on this gateway */
        reply_reject(s, m, EM_REJ_AUTH);
        return;
    }
    s->gwlen = strlen(m->gw);
    memcpy(s->gw, m->gw, s->gwlen + 1);
    s->ops = is_ops;
    snprintf(s->sub_topic, sizeof s->sub_topic, "order.ack.%s", s->gw);
    uint32_t h = gw_hash(s->gw, s->gwlen);
    s->hnext = g->by_gw[h];
    g->by_gw[h] = s;
    s->state = S_LOGGING_IN;
    core_list_push_front(&g->logging_in, &s->login);
    s->tokens = (uint64_t)g->cfg.rate_burst * 1000000u;
    s->refill_ns = now_ns(g);
    s->next_seq = s->head_seq = s->resent_to = 1; /* the engine's count restarts at LOGIN */
    g->cfg.bus->subscribe(g->cfg.bus_ctx, s->sub_topic);
    send_login(s);
}

void em_gw_session_refuse(struct em_gw_session *s, int code)
{
    s->g->st.msgs_in++;
    reply_reject(s, NULL, code);
}

bool em_gw_session_logging_in(const struct em_gw_session *s)
{
    return s->state == S_LOGGING_IN;
}

bool em_gw_session_live(const struct em_gw_session *s)
{
    return s->state == S_LIVE;
}

const struct em_mkt *em_gw_market(const struct em_gw *g)
{
    return g->mkt;
}

void em_gw_session_answered(struct em_gw_session *s)
{
    s->g->st.msgs_in++;
}

void em_gw_session_input(struct em_gw_session *s, const struct em_msg *m, int code)
{
    struct em_gw *g = s->g;
    g->st.msgs_in++;
    switch (s->state) {
    case S_NEW:
        if (m->kind != EM_MSG_LOGIN) {
            reply_reject(s, m, EM_REJ_NOT_LOGGED_IN); /* ALF §3 */
            return;
        }
        if (code) {
            reply_reject(s, m, code);
            return;
        }
        begin_login(s, m);
        return;
    case S_LOGGING_IN: /* not reached: the front end holds input meanwhile */
    case S_DONE:
        return;
    case S_LIVE:
        break;
    }
    if (!code && (m->present & EM_BIT(seq)))
        code = EM_REJ_SYNTAX; /* not a key of ALF §3: the gateway numbers */
    if (code != EM_REJ_SYNTAX && m->kind != EM_MSG__NONE) {
        /* docs/alf.md C.4: AUTH right after SYNTAX */
        bool oper = em_msgs[m->kind].cls == EM_CLASS_OPER;
        bool client = em_msgs[m->kind].cls == EM_CLASS_CLIENT;
        if ((oper && !s->ops) || (client && s->ops && m->kind != EM_MSG_PING &&
                                  m->kind != EM_MSG_LOGOUT && m->kind != EM_MSG_LOGIN))
            code = EM_REJ_AUTH;
        if (em_msgs[m->kind].cls == EM_CLASS_EVENT || m->kind == EM_MSG_DISCONNECT ||
            m->kind == EM_MSG_RESYNC)
            code = EM_REJ_SYNTAX; /* not something a trader sends */
    }
    if (code) {
        reply_reject(s, m, code);
        return;
    }
    switch (m->kind) {
    case EM_MSG_PING:
        /* Through the engine, so PONG comes after the replies to what was
         * sent before it (a trader, or the operator, may use PING as a
         * barrier; docs/alf.md C.4). */
        break;
    case EM_MSG_LOGIN:
        reply_reject(s, m, EM_REJ_AUTH); /* one login per session */
        return;
    case EM_MSG_LOGOUT:
        /* docs/alf.md C.2: cancels like a disconnect; no event */
        forward(s, m);
        s->state = S_DONE;
        hash_remove(s);
        g->cfg.bus->unsubscribe(g->cfg.bus_ctx, s->sub_topic);
        s->front->close(s->fctx, true);
        return;
    default:
        break;
    }
    /* PING is a heartbeat and a barrier: never refused for the rate. */
    if (m->kind != EM_MSG_PING && !rate_ok(s)) {
        g->st.rate_limited++;
        reply_reject(s, m, EM_REJ_RATE_LIMIT);
        return;
    }
    if (!numbered(s, m->kind)) {
        forward(s, m); /* a full engine queue is answered at em_gw_flush */
    } else if (forward_numbered(s, m) != 0) {
        g->st.rate_limited++; /* EM_RESEND_WINDOW messages wait for an answer */
        reply_reject(s, m, EM_REJ_RATE_LIMIT);
        return;
    }
    if (s->npings == 64)
        return; /* 64 in flight: this one goes unanswered (no barrier) */
    if (m->kind == EM_MSG_PING) {
        s->npings++;
    } else if (em_msgs[m->kind].cls == EM_CLASS_OPER) {
        /* docs/alf.md C.5: the engine says nothing when it takes an
         * operator message; a PING after it tells the gateway it did (no
         * REJECT before the PONG), which it answers OK */
        struct em_msg ping = {.kind = EM_MSG_PING};
        forward(s, &ping);
        s->pings |= 1ull << s->npings++;
    }
}

/* ---- sessions ---- */

struct em_gw_session *em_gw_session_open(struct em_gw *g, const struct em_gw_front *front,
                                         void *front_ctx)
{
    struct em_gw_session *s = calloc(1, sizeof *s);
    if (s)
        core_list_init(&s->login);
    if (!s)
        return NULL;
    s->g = g;
    s->front = front;
    s->fctx = front_ctx;
    g->st.sessions++;
    return s;
}

void em_gw_session_close(struct em_gw_session *s)
{
    struct em_gw *g = s->g;
    if (s->state == S_LOGGING_IN || s->state == S_LIVE) {
        /* cancel-on-disconnect (ALF §8) */
        struct em_msg m = {.kind = EM_MSG_DISCONNECT};
        forward(s, &m);
        em_gw_flush(g); /* the batch refers to s, which goes now */
        hash_remove(s);
        g->cfg.bus->unsubscribe(g->cfg.bus_ctx, s->sub_topic);
    }
    if (s->state == S_LOGGING_IN)
        login_list_remove(s);
    for (size_t i = 0; i < g->ndirty; i++)
        if (g->dirty[i] == s)
            g->dirty[i] = NULL;
    if (g->batch_sess == s) /* NEW/DONE sessions: nothing of theirs may wait */
        em_gw_flush(g);
    free(s->pend);
    free(s);
    g->st.sessions--;
}

/* ---- events from the engine ---- */

static void go_live(struct em_gw_session *s)
{
    login_list_remove(s);
    s->state = S_LIVE;
    struct em_msg m = {.kind = EM_MSG_LOGGEDIN, .present = EM_BIT(gw)};
    memcpy(m.gw, s->gw, s->gwlen + 1);
    s->front->deliver(s->fctx, &m);
    s->front->live(s->fctx); /* input held while logging in, in order */
}

/* An event with eseq: the next number (true: deliver it), one delivered
 * before (a RESYNC's answer crossing the original) or one after a gap
 * (false: dropped; the events between come again after a RESYNC). */
static bool event_in_order(struct em_gw_session *s, const struct em_msg *ev)
{
    if (ev->eseq <= s->ev_last) {
        s->g->st.event_duplicates++;
        return false;
    }
    if (ev->eseq > s->ev_last + 1) {
        if (!s->resync_pending)
            request_resync(s); /* sent at the next em_gw_flush */
        return false;
    }
    s->ev_last = ev->eseq;
    if (s->ev_lost)
        mark_dirty(s); /* the batch's end may end the session (resync_answer) */
    return true;
}

/* The engine's answer to the session's latest RESYNC: the events
 * next..last follow. next == eseq + 1: none missing. Otherwise the engine
 * no longer holds some the trader missed (or holds fewer than it
 * delivered): take its numbers from here, deliver what follows and end
 * the session once `last` is delivered (em_gw_bus_batch_end). */
static void resync_answer(struct em_gw_session *s, const struct em_msg *ev)
{
    uint32_t both = EM_BIT(next) | EM_BIT(last);
    if (!s->resync_pending || ev->eseq != s->resync_from || (ev->present & both) != both)
        return; /* the answer to an earlier request: the latest's follows */
    s->resync_pending = false;
    if (ev->next == ev->eseq + 1)
        return;
    s->ev_last = ev->next - 1;
    s->lost_until = ev->last;
    if (!s->ev_lost) {
        s->ev_lost = true;
        s->g->st.events_lost++;
        CORE_WARN("gateway: %s: events %llu..%llu are no longer held by the engine; "
                  "ending the session",
                  s->gw, (unsigned long long)ev->eseq + 1, (unsigned long long)ev->next - 1);
    }
    mark_dirty(s);
}

/* The engine refused s's gw: it is logged in through another door
 * (docs/alf.md C.9). Logging in: the trader gets the REJECT and the
 * session is NEW again (it may LOGIN later; the front end's held input is
 * answered as before a LOGIN). Live (only after an engine restart, when
 * another door sent for gw first): the session ends after the REJECT. */
static void logged_in_elsewhere(struct em_gw_session *s, const struct em_msg *ev)
{
    struct em_gw *g = s->g;
    struct em_msg r = {.kind = EM_MSG_REJECT, .present = EM_BIT(rej)};
    r.rej = ev->rej;
    mark_dirty(s);
    if (s->state == S_LIVE) {
        s->front->deliver(s->fctx, &r);
        g->st.rejects_by[r.rej]++;
        s->front->close(s->fctx, true);
        return;
    }
    login_list_remove(s);
    hash_remove(s);
    g->cfg.bus->unsubscribe(g->cfg.bus_ctx, s->sub_topic);
    s->state = S_NEW;
    s->gwlen = 0;
    s->gw[0] = '\0';
    g->st.logins_refused++;
    s->front->deliver(s->fctx, &r);
    g->st.rejects_by[r.rej]++;
    s->front->live(s->fctx); /* last: the front end may close and free s */
}

/* One event for session s. */
static void handle_event(struct em_gw_session *s, const struct em_msg *ev)
{
    if (ev->kind == EM_MSG_REJECT && ev->rej == EM_REJ_LOGGED_IN_ELSEWHERE && !s->ops &&
        !(ev->present & (EM_BIT(seq) | EM_BIT(cl)))) {
        if (!closing(s))
            logged_in_elsewhere(s, ev);
        return;
    }
    if (ev->kind == EM_MSG_LOGGEDIN || (s->ops && s->state == S_LOGGING_IN)) {
        /* The engine answers a trader's LOGIN with LOGGEDIN, and the
         * operator's with REJECT AUTH (LOGIN is a client message, docs/alf.md
         * C.4): either proves the path. */
        mark_dirty(s); /* first: go_live may end the session (a held LOGOUT) */
        if (s->state == S_LOGGING_IN) {
            s->ev_last = ev->present & EM_BIT(eseq) ? ev->eseq : 0; /* the first: 1 */
            go_live(s);
        }
        return; /* a re-sent LOGIN's extra answers are dropped */
    }
    if (s->state != S_LIVE)
        return;
    if (ev->kind == EM_MSG_RESYNC) {
        resync_answer(s, ev);
        return;
    }
    if ((ev->present & EM_BIT(eseq)) && !event_in_order(s, ev))
        return;
    if (s->ops && ev->kind == EM_MSG_REJECT && ev->rej == EM_REJ_AUTH &&
        !(ev->present & EM_BIT(cl)))
        return; /* a re-sent LOGIN's late answer: the session refuses the
                   operator's client messages itself, so nothing else is */
    struct em_msg plain;
    if (ev->present & EM_BIT(seq)) {
        if (!first_reply(s, ev))
            return;
        plain = *ev; /* the trader's line has no seq (ALF §4) */
        plain.present &= ~EM_BIT(seq);
        ev = &plain;
    }
    if (ev->present & EM_BIT(eseq)) {
        plain = *ev; /* nor eseq */
        plain.present &= ~EM_BIT(eseq);
        ev = &plain;
    }
    if (ev->kind == EM_MSG_REJECT && (s->pings & 1))
        s->op_rejected = true; /* the operator message before the barrier */
    if (ev->kind == EM_MSG_PONG && s->npings) {
        bool barrier = s->pings & 1;
        s->pings >>= 1;
        s->npings--;
        if (barrier) {
            bool ok = !s->op_rejected;
            s->op_rejected = false;
            if (!ok)
                return;
            struct em_msg okm = {.kind = EM_MSG_OK};
            s->front->deliver(s->fctx, &okm);
            s->g->st.events_out++;
            mark_dirty(s);
            return;
        }
    }
    s->front->deliver(s->fctx, ev);
    s->g->st.events_out++;
    if (ev->kind == EM_MSG_REJECT && ev->rej <= EM_REJ_LOGGED_IN_ELSEWHERE)
        s->g->st.rejects_by[ev->rej]++;
    mark_dirty(s);
}

bool em_gw_has_session(struct em_gw *g, const char *gw, size_t gwlen)
{
    return find_gw(g, gw, gwlen) != NULL;
}

enum em_gw_presence em_gw_presence(struct em_gw *g, const char *gw, size_t gwlen)
{
    struct em_gw_session *s = find_gw(g, gw, gwlen);
    return !s ? EM_GW_ABSENT : s->state == S_LOGGING_IN ? EM_GW_LOGGING_IN : EM_GW_PRESENT;
}

void em_gw_bus_message(struct em_gw *g, const char *topic, size_t tl, const void *payload,
                       size_t len)
{
    static const char prefix[] = "order.ack.";
    g->st.bus_msgs_in++;
    if (tl >= 3 && memcmp(topic, "md.", 3) == 0) {
        /* market data: kept for SYMBOLS, never routed to a session */
        if (em_mkt_book(g->mkt, payload, len, now_ns(g) / 1000000u + 1) == CORE_EPROTO)
            g->st.bad_events++;
        return;
    }
    if (tl <= sizeof prefix - 1 || memcmp(topic, prefix, sizeof prefix - 1) != 0) {
        g->st.unrouted++;
        return;
    }
    const char *gw = topic + sizeof prefix - 1;
    size_t gwlen = tl - (sizeof prefix - 1);
    const uint8_t *p = payload, *end = p + len;
    while (p < end) {
        /* Looked up per event: an event can end the session (go_live
         * handles held lines, a LOGOUT among them). Exact match:
         * order.ack.GW1 is also a prefix of order.ack.GW10. */
        struct em_gw_session *s = find_gw(g, gw, gwlen);
        if (!s || closing(s)) {
            g->st.unrouted++;
            return;
        }
        struct em_msg ev;
        int n = em_frame_decode(p, (size_t)(end - p), &ev);
        if (n <= 0) {
            g->st.bad_events++;
            return;
        }
        handle_event(s, &ev);
        p += n;
    }
}

void em_gw_bus_batch_end(struct em_gw *g)
{
    for (size_t i = 0; i < g->ndirty; i++) {
        struct em_gw_session *s = g->dirty[i];
        if (!s)
            continue;
        s->dirty = false;
        s->front->flush(s->fctx);
        if (s->ev_lost && s->ev_last >= s->lost_until && s->state == S_LIVE && !closing(s))
            s->front->close(s->fctx, true); /* after what was delivered */
    }
    g->ndirty = 0;
}

/* ---- lifetime ---- */

struct em_gw *em_gw_new(const struct em_gw_config *cfg)
{
    struct em_gw *g = calloc(1, sizeof *g);
    if (g)
        core_list_init(&g->logging_in);
    if (!g)
        return NULL;
    g->mkt = malloc(sizeof *g->mkt);
    if (!g->mkt) {
        free(g);
        return NULL;
    }
    em_mkt_init(g->mkt, 1000);
    g->cfg = *cfg;
    if (g->cfg.resend_ms <= 0)
        g->cfg.resend_ms = RESEND_MS;
    if (g->cfg.rate_burst < 1)
        g->cfg.rate_burst = 1;
    return g;
}

void em_gw_free(struct em_gw *g)
{
    if (!g)
        return;
    free(g->dirty);
    free(g->tokens);
    free(g->mkt);
    free(g);
}

struct em_gw_stats *em_gw_stats(struct em_gw *g)
{
    return &g->st;
}
