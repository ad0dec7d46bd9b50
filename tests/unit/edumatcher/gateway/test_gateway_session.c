/* gateway_session: the login state machine, AUTH, the rate limit, batching
 * towards the engine and routing of its events, driven through fake bus
 * and connection callbacks (the processes are tested end to end in
 * tests/integration/edumatcher). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/error.h"
#include "edumatcher/gateway/alf/alf.h"
#include "edumatcher/gateway/gateway_session.h"

/* ---- a fake bus: records what was sent, answers send with send_rc ---- */

struct fake_bus {
    uint64_t now;
    int send_rc;
    unsigned sends;
    char last_topic[64];
    char sent[64][256]; /* every frame sent, as ALF text */
    unsigned nsent;
    char subs[8][64];
    unsigned nsubs;
    unsigned unsubs;
};

static struct fake_bus B;

static int bus_send(void *ctx, const char *gw, size_t gwlen, const void *frames, size_t len)
{
    B.sends++;
    if (B.send_rc)
        return B.send_rc;
    memcpy(B.last_topic, gw, gwlen);
    B.last_topic[gwlen] = 0;
    const uint8_t *p = frames;
    for (size_t off = 0; off < len;) {
        struct em_msg m;
        int n = em_frame_decode(p + off, len - off, &m);
        assert_true(n > 0);
        assert_true(B.nsent < 64);
        B.sent[B.nsent][em_alf_format(&m, B.sent[B.nsent])] = 0;
        B.nsent++;
        off += (size_t)n;
    }
    return 0;
}

static void bus_subscribe(void *ctx, const char *topic)
{
    assert_true(B.nsubs < 8);
    strcpy(B.subs[B.nsubs++], topic);
}

static void bus_unsubscribe(void *ctx, const char *topic)
{
    B.unsubs++;
}

static uint64_t bus_now(void *ctx)
{
    return B.now;
}

static const struct em_gw_bus bus = {.send = bus_send,
                                     .subscribe = bus_subscribe,
                                     .unsubscribe = bus_unsubscribe,
                                     .now_ns = bus_now};

/* ---- a fake connection: the lines delivered, flushes, closes ---- */

struct fake_conn {
    char out[32][256];
    unsigned nout, flushes, lives;
    int closed; /* 0, 1 now, 2 after reply */
};

static void deliver(void *ctx, const struct em_msg *ev)
{
    struct fake_conn *c = ctx;
    assert_true(c->nout < 32);
    c->out[c->nout][em_alf_format(ev, c->out[c->nout])] = 0;
    c->nout++;
}

static void flush(void *ctx)
{
    ((struct fake_conn *)ctx)->flushes++;
}

static void live(void *ctx)
{
    ((struct fake_conn *)ctx)->lives++;
}

static void conn_close(void *ctx, bool after_reply)
{
    ((struct fake_conn *)ctx)->closed = after_reply ? 2 : 1;
}

static bool closing(void *ctx)
{
    return ((struct fake_conn *)ctx)->closed != 0;
}

static const struct em_gw_front front = {
    .deliver = deliver, .flush = flush, .live = live, .close = conn_close, .closing = closing};

/* ---- helpers ---- */

static struct em_gw *new_gw(int64_t rate, int64_t burst)
{
    memset(&B, 0, sizeof B);
    B.now = 1000000000u;
    struct em_gw_config cfg = {
        .bus = &bus, .rate_limit = rate, .rate_burst = burst, .login_retry_ms = 100};
    struct em_gw *g = em_gw_new(&cfg);
    assert_non_null(g);
    return g;
}

static void input(struct em_gw_session *s, const char *line)
{
    struct em_msg m;
    int code = em_alf_parse(line, strlen(line), &m);
    em_gw_session_input(s, &m, code);
}

/* The engine sends `line` (an event) to gw. */
static void engine_says(struct em_gw *g, const char *gw, const char *line)
{
    struct em_msg m;
    assert_int_equal(em_alf_parse(line, strlen(line), &m), 0);
    uint8_t frame[EM_FRAME_MAX];
    int n = em_frame_encode(&m, frame, sizeof frame);
    assert_true(n > 0);
    char topic[64];
    int tl = snprintf(topic, sizeof topic, "order.ack.%s", gw);
    em_gw_bus_message(g, topic, (size_t)tl, frame, (size_t)n);
    em_gw_bus_batch_end(g);
}

/* Open a session and log it in as gw (the engine answering LOGGEDIN). */
static struct em_gw_session *logged_in(struct em_gw *g, struct fake_conn *c, const char *gw)
{
    struct em_gw_session *s = em_gw_session_open(g, &front, c);
    assert_non_null(s);
    char line[64];
    snprintf(line, sizeof line, "LOGIN gw=%s", gw);
    input(s, line);
    assert_true(em_gw_session_logging_in(s));
    em_gw_flush(g);
    snprintf(line, sizeof line, "LOGGEDIN gw=%s", gw);
    engine_says(g, gw, line);
    assert_false(em_gw_session_logging_in(s));
    return s;
}

/* ---- tests ---- */

static void test_not_logged_in(void **state)
{
    struct em_gw *g = new_gw(0, 1);
    struct fake_conn c = {0};
    struct em_gw_session *s = em_gw_session_open(g, &front, &c);
    input(s, "NEW cl=a sym=ABC side=B qty=1 px=1");
    assert_int_equal(c.nout, 1);
    assert_string_equal(c.out[0], "REJECT cl=a reason=NOT_LOGGED_IN");
    em_gw_flush(g);
    assert_int_equal(B.sends, 0);
    em_gw_session_close(s);
    assert_int_equal(B.sends, 0); /* never logged in: no DISCONNECT */
    assert_int_equal(em_gw_stats(g)->sessions, 0);
    em_gw_free(g);
}

static void test_login_goes_through_the_engine(void **state)
{
    struct em_gw *g = new_gw(0, 1);
    struct fake_conn c = {0};
    struct em_gw_session *s = em_gw_session_open(g, &front, &c);
    input(s, "LOGIN gw=GW1");
    assert_int_equal(B.nsubs, 1);
    assert_string_equal(B.subs[0], "order.ack.GW1");
    assert_int_equal(c.nout, 0); /* not before the engine answers */
    em_gw_flush(g);
    assert_int_equal(B.nsent, 1);
    assert_string_equal(B.last_topic, "GW1");
    assert_string_equal(B.sent[0], "LOGIN gw=GW1");
    /* no answer yet: the LOGIN is re-sent after login_retry_ms */
    em_gw_tick(g);
    em_gw_flush(g);
    assert_int_equal(B.nsent, 1);
    B.now += 100 * 1000000u;
    em_gw_tick(g);
    em_gw_flush(g);
    assert_int_equal(B.nsent, 2);
    engine_says(g, "GW1", "LOGGEDIN gw=GW1");
    assert_int_equal(c.nout, 1);
    assert_string_equal(c.out[0], "LOGGEDIN gw=GW1");
    assert_int_equal(c.lives, 1);
    assert_int_equal(c.flushes, 1);
    /* the second LOGIN's answer is dropped */
    engine_says(g, "GW1", "LOGGEDIN gw=GW1");
    assert_int_equal(c.nout, 1);
    /* once live, no more retries */
    B.now += 1000 * 1000000u;
    em_gw_tick(g);
    em_gw_flush(g);
    assert_int_equal(B.nsent, 2);
    em_gw_session_close(s);
    em_gw_free(g);
}

/* docs/alf.md C.9: the engine refuses a gw logged in through another
 * door. A session logging in tells the trader, is not logged in any more
 * (no DISCONNECT when it closes, no more LOGIN retries) and may LOGIN
 * again; a live one that hears it (after an engine restart) ends. */
static void test_logged_in_elsewhere(void **state)
{
    struct em_gw *g = new_gw(0, 1);
    struct fake_conn c = {0};
    struct em_gw_session *s = em_gw_session_open(g, &front, &c);
    input(s, "LOGIN gw=GW1");
    em_gw_flush(g);
    assert_int_equal(B.nsent, 1);
    engine_says(g, "GW1", "REJECT reason=LOGGED_IN_ELSEWHERE");
    assert_int_equal(c.nout, 1);
    assert_string_equal(c.out[0], "REJECT reason=LOGGED_IN_ELSEWHERE");
    assert_int_equal(c.lives, 1); /* held input goes on, as before a LOGIN */
    assert_false(em_gw_session_logging_in(s));
    assert_false(em_gw_session_live(s));
    assert_false(em_gw_has_session(g, "GW1", 3));
    assert_int_equal(B.unsubs, 1);
    assert_int_equal(em_gw_stats(g)->logins_refused, 1);
    assert_int_equal(em_gw_stats(g)->rejects_by[EM_REJ_LOGGED_IN_ELSEWHERE], 1);
    B.now += 1000 * 1000000u;
    em_gw_tick(g); /* no LOGIN retry for a refused session */
    em_gw_flush(g);
    assert_int_equal(B.nsent, 1);
    input(s, "PING");
    assert_string_equal(c.out[1], "REJECT reason=NOT_LOGGED_IN");
    /* it may log in again, and the engine may take it this time */
    input(s, "LOGIN gw=GW1");
    em_gw_flush(g);
    assert_int_equal(B.nsent, 2);
    engine_says(g, "GW1", "LOGGEDIN gw=GW1");
    assert_true(em_gw_session_live(s));
    /* live, then refused (another door holds GW1 now): the session ends */
    engine_says(g, "GW1", "REJECT reason=LOGGED_IN_ELSEWHERE");
    assert_string_equal(c.out[c.nout - 1], "REJECT reason=LOGGED_IN_ELSEWHERE");
    assert_int_equal(c.closed, 2);
    em_gw_session_close(s);
    em_gw_free(g);
}

static void test_batching_and_events(void **state)
{
    struct em_gw *g = new_gw(0, 1);
    struct fake_conn c1 = {0}, c2 = {0};
    struct em_gw_session *s1 = logged_in(g, &c1, "GW1");
    struct em_gw_session *s2 = logged_in(g, &c2, "GW2");
    unsigned sends = B.sends, sent = B.nsent;
    input(s1, "NEW cl=a sym=ABC side=B qty=1 px=1");
    input(s1, "NEW cl=b sym=ABC side=B qty=1 px=1");
    assert_int_equal(B.sends, sends); /* held in the batch */
    input(s2, "PING");                /* another session: GW1's batch goes */
    assert_int_equal(B.sends, sends + 1);
    assert_string_equal(B.last_topic, "GW1");
    assert_string_equal(B.sent[sent], "NEW cl=a sym=ABC side=B qty=1 px=1 seq=1");
    em_gw_flush(g);
    assert_int_equal(B.sends, sends + 2);
    assert_string_equal(B.last_topic, "GW2");
    assert_int_equal(em_gw_stats(g)->forwarded, 2 + 2 + 1); /* the LOGINs, NEWs, PING */
    /* events are routed by exact gw: GW1's do not reach GW10 or GW2 */
    unsigned n1 = c1.nout, n2 = c2.nout;
    engine_says(g, "GW1", "ACK cl=a oid=1 seq=1");
    assert_int_equal(c1.nout, n1 + 1);
    assert_string_equal(c1.out[n1], "ACK cl=a oid=1");
    assert_int_equal(c2.nout, n2);
    engine_says(g, "GW10", "ACK cl=a oid=2");
    assert_int_equal(em_gw_stats(g)->unrouted, 1);
    em_gw_session_close(s1);
    em_gw_session_close(s2);
    em_gw_free(g);
}

/* docs/alf.md I: numbered messages are kept until their first reply, sent
 * again when the engine asks (RESEND) or when they waited resend_ms, and
 * an answer that comes twice reaches the trader once, without seq. */
static void test_resend(void **state)
{
    struct em_gw *g = new_gw(0, 1);
    struct fake_conn c = {0};
    struct em_gw_session *s = logged_in(g, &c, "GW1");
    unsigned sent = B.nsent, nout = c.nout;
    input(s, "NEW cl=a sym=ABC side=B qty=1 px=1");
    input(s, "NEW cl=b sym=ABC side=B qty=1 px=1");
    input(s, "PING");
    em_gw_flush(g);
    assert_int_equal(B.nsent, sent + 3);
    assert_string_equal(B.sent[sent + 2], "PING seq=3");
    engine_says(g, "GW1", "ACK cl=a oid=1 seq=1");
    engine_says(g, "GW1", "ACK cl=a oid=1 seq=1"); /* a duplicate's answer */
    engine_says(g, "GW1", "FILL cl=a oid=1 tid=1 px=1 qty=1 leaves=0 cum=1");
    assert_int_equal(c.nout, nout + 2);
    assert_string_equal(c.out[nout], "ACK cl=a oid=1");
    assert_string_equal(c.out[nout + 1], "FILL cl=a oid=1 tid=1 px=1 qty=1 leaves=0 cum=1");
    assert_int_equal(em_gw_stats(g)->duplicates, 1);

    /* the engine restarted without 2 and 3: 4 comes after a gap */
    input(s, "CANCEL cl=b");
    em_gw_flush(g);
    sent = B.nsent;
    engine_says(g, "GW1", "REJECT cl=b reason=RESEND seq=4");
    assert_int_equal(c.nout, nout + 2); /* the trader sees nothing of it */
    assert_int_equal(B.nsent, sent + 3);
    assert_string_equal(B.sent[sent], "NEW cl=b sym=ABC side=B qty=1 px=1 seq=2");
    assert_string_equal(B.sent[sent + 1], "PING seq=3");
    assert_string_equal(B.sent[sent + 2], "CANCEL cl=b seq=4");
    engine_says(g, "GW1", "REJECT cl=b reason=RESEND seq=4"); /* before the resend: stale */
    assert_int_equal(B.nsent, sent + 3);
    engine_says(g, "GW1", "ACK cl=b oid=2 seq=2");
    engine_says(g, "GW1", "PONG seq=3");
    engine_says(g, "GW1", "CANCELED cl=b oid=2 qty=1 cum=0 reason=USER seq=4");
    assert_int_equal(c.nout, nout + 5);
    assert_string_equal(c.out[nout + 3], "PONG");
    assert_string_equal(c.out[nout + 4], "CANCELED cl=b oid=2 qty=1 cum=0 reason=USER");

    /* an idle session: what waited resend_ms goes again at the tick */
    input(s, "NEW cl=d sym=ABC side=S qty=1 px=1");
    em_gw_flush(g);
    sent = B.nsent;
    em_gw_tick(g);
    assert_int_equal(B.nsent, sent); /* not yet */
    B.now += 1000 * 1000000u;
    em_gw_tick(g);
    assert_int_equal(B.nsent, sent + 1);
    assert_string_equal(B.sent[sent], "NEW cl=d sym=ABC side=S qty=1 px=1 seq=5");
    engine_says(g, "GW1", "REJECT cl=d reason=COLLAR seq=5");
    engine_says(g, "GW1", "REJECT cl=d reason=COLLAR seq=5");
    assert_int_equal(c.nout, nout + 6);
    assert_string_equal(c.out[nout + 5], "REJECT cl=d reason=COLLAR");
    B.now += 1000 * 1000000u;
    em_gw_tick(g);
    assert_int_equal(B.nsent, sent + 1); /* nothing waits */

    /* seq is the gateway's: a trader's is a key ALF does not have */
    input(s, "CANCEL cl=x seq=9");
    assert_int_equal(c.nout, nout + 7);
    assert_string_equal(c.out[nout + 6], "REJECT cl=x reason=SYNTAX");
    em_gw_session_close(s);
    em_gw_free(g);
}

/* The engine sends lines[] ('|'-separated events) to gw in one bus message. */
static void engine_sends(struct em_gw *g, const char *gw, const char *lines)
{
    uint8_t buf[4096];
    size_t len = 0;
    for (const char *p = lines; *p;) {
        const char *end = strchr(p, '|');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        struct em_msg m;
        assert_int_equal(em_alf_parse(p, n, &m), 0);
        int k = em_frame_encode(&m, buf + len, sizeof buf - len);
        assert_true(k > 0);
        len += (size_t)k;
        p += n + (end ? 1 : 0);
    }
    char topic[64];
    int tl = snprintf(topic, sizeof topic, "order.ack.%s", gw);
    em_gw_bus_message(g, topic, (size_t)tl, buf, len);
    em_gw_bus_batch_end(g);
}

/* Events (docs/alf.md I.6): each number delivered once and in order;
 * after the link comes back RESYNC goes first, what comes out of order
 * waits for its answer; the events the engine no longer holds end the
 * session once what it still had is delivered. */
static void test_event_resync(void **state)
{
    struct em_gw *g = new_gw(0, 1);
    struct fake_conn c = {0};
    struct em_gw_session *s = em_gw_session_open(g, &front, &c);
    input(s, "LOGIN gw=GW1");
    em_gw_flush(g);
    engine_says(g, "GW1", "LOGGEDIN gw=GW1 eseq=1");
    assert_true(em_gw_session_live(s));
    assert_int_equal(c.nout, 1);
    assert_string_equal(c.out[0], "LOGGEDIN gw=GW1");
    input(s, "NEW cl=a sym=ABC side=B qty=2 px=1");
    engine_sends(g, "GW1",
                 "ACK cl=a oid=1 seq=1 eseq=2|FILL cl=a oid=1 tid=1 px=1 qty=1 "
                 "leaves=1 cum=1 eseq=3");
    engine_says(g, "GW1", "FILL cl=a oid=1 tid=1 px=1 qty=1 leaves=1 cum=1 eseq=3");
    assert_int_equal(c.nout, 3);
    assert_string_equal(c.out[1], "ACK cl=a oid=1");
    assert_string_equal(c.out[2], "FILL cl=a oid=1 tid=1 px=1 qty=1 leaves=1 cum=1");
    assert_int_equal(em_gw_stats(g)->event_duplicates, 1);
    /* a trader may not ask */
    input(s, "RESYNC eseq=1");
    assert_string_equal(c.out[3], "REJECT reason=SYNTAX");

    /* the link came back: RESYNC, then the unanswered message */
    input(s, "NEW cl=b sym=ABC side=B qty=1 px=1");
    em_gw_flush(g);
    unsigned sent = B.nsent;
    em_gw_engine_restarted(g);
    assert_int_equal(B.nsent, sent + 2);
    assert_string_equal(B.sent[sent], "RESYNC eseq=3");
    assert_string_equal(B.sent[sent + 1], "NEW cl=b sym=ABC side=B qty=1 px=1 seq=2");
    /* an event after a gap before the answer: dropped, asked already */
    engine_says(g, "GW1", "FILL cl=a oid=1 tid=3 px=1 qty=1 leaves=0 cum=2 eseq=6");
    em_gw_flush(g);
    assert_int_equal(B.nsent, sent + 2);
    assert_int_equal(c.nout, 4);
    /* an earlier request's answer is not this one's */
    engine_sends(g, "GW1", "RESYNC eseq=1 next=2 last=6");
    /* the answer and what was missed, in order; the duplicate answer of
     * the resent NEW (no number) and the crossing FILL are dropped */
    engine_sends(g, "GW1",
                 "RESYNC eseq=3 next=4 last=6|CANCELED cl=z oid=9 qty=1 cum=0 reason=IOC "
                 "eseq=4|ACK cl=b oid=2 seq=2 eseq=5|FILL cl=a oid=1 tid=3 px=1 qty=1 leaves=0 "
                 "cum=2 eseq=6");
    engine_sends(g, "GW1",
                 "ACK cl=b oid=2 seq=2|FILL cl=a oid=1 tid=3 px=1 qty=1 leaves=0 "
                 "cum=2 eseq=6");
    assert_int_equal(c.nout, 7);
    assert_string_equal(c.out[4], "CANCELED cl=z oid=9 qty=1 cum=0 reason=IOC");
    assert_string_equal(c.out[5], "ACK cl=b oid=2");
    assert_string_equal(c.out[6], "FILL cl=a oid=1 tid=3 px=1 qty=1 leaves=0 cum=2");
    assert_int_equal(c.closed, 0);

    /* a gap with no request out: asked now */
    sent = B.nsent;
    engine_says(g, "GW1", "PONG eseq=9");
    em_gw_flush(g);
    assert_int_equal(B.nsent, sent + 1);
    assert_string_equal(B.sent[sent], "RESYNC eseq=6");
    assert_int_equal(em_gw_stats(g)->resyncs, 2);
    /* the engine no longer holds 7: what it has is delivered, then the
     * session ends (its orders are canceled, as on a disconnect) */
    engine_sends(g, "GW1", "RESYNC eseq=6 next=8 last=9|TRIGGERED cl=t oid=4 eseq=8");
    assert_int_equal(c.nout, 8);
    assert_string_equal(c.out[7], "TRIGGERED cl=t oid=4");
    assert_int_equal(c.closed, 0); /* 9 is still to come */
    engine_sends(g, "GW1", "PONG eseq=9");
    assert_int_equal(c.closed, 2);
    assert_int_equal(c.nout, 9);
    assert_string_equal(c.out[8], "PONG");
    assert_int_equal(em_gw_stats(g)->events_lost, 1);
    sent = B.nsent;
    em_gw_session_close(s);
    assert_string_equal(B.sent[sent], "DISCONNECT");

    /* an engine with fewer events than delivered (its journal lost): the
     * session ends at once */
    struct fake_conn c2 = {0};
    s = em_gw_session_open(g, &front, &c2);
    input(s, "LOGIN gw=GW2");
    em_gw_flush(g);
    engine_says(g, "GW2", "LOGGEDIN gw=GW2 eseq=1");
    engine_says(g, "GW2", "PONG eseq=2");
    em_gw_engine_restarted(g);
    engine_sends(g, "GW2", "RESYNC eseq=2 next=2 last=1");
    assert_int_equal(c2.closed, 2);
    em_gw_session_close(s);

    /* the link lost: RESYNC is queued at once, ahead of what the trader
     * sends meanwhile; when it is back only the resend goes */
    struct fake_conn c3 = {0};
    s = em_gw_session_open(g, &front, &c3);
    input(s, "LOGIN gw=GW3");
    em_gw_flush(g);
    engine_says(g, "GW3", "LOGGEDIN gw=GW3 eseq=1");
    sent = B.nsent;
    em_gw_engine_lost(g);
    input(s, "NEW cl=c sym=ABC side=B qty=1 px=1");
    em_gw_flush(g);
    em_gw_engine_restarted(g);
    assert_int_equal(B.nsent, sent + 3);
    assert_string_equal(B.sent[sent], "RESYNC eseq=1");
    assert_string_equal(B.sent[sent + 1], "NEW cl=c sym=ABC side=B qty=1 px=1 seq=1");
    assert_string_equal(B.sent[sent + 2], "NEW cl=c sym=ABC side=B qty=1 px=1 seq=1");
    /* a RESYNC the bus refused is not waited for: the next gap asks again */
    B.send_rc = CORE_EAGAIN;
    engine_sends(g, "GW3", "RESYNC eseq=1 next=2 last=1|ACK cl=c oid=5 seq=1 eseq=2");
    unsigned nout = c3.nout;
    engine_says(g, "GW3", "PONG eseq=4");
    em_gw_flush(g);
    B.send_rc = 0;
    engine_says(g, "GW3", "PONG eseq=4");
    em_gw_flush(g);
    assert_string_equal(B.sent[B.nsent - 1], "RESYNC eseq=2");
    assert_int_equal(c3.nout, nout); /* no RATE_LIMIT for it: the trader sent none */
    em_gw_session_close(s);
    em_gw_free(g);
}

static void test_rate_limit(void **state)
{
    struct em_gw *g = new_gw(1, 2); /* 1 message a second, burst 2 */
    struct fake_conn c = {0};
    struct em_gw_session *s = logged_in(g, &c, "GW1");
    unsigned nout = c.nout;
    input(s, "CANCEL cl=a");
    input(s, "CANCEL cl=b");
    input(s, "CANCEL cl=c");
    assert_int_equal(c.nout, nout + 1);
    assert_string_equal(c.out[nout], "REJECT cl=c reason=RATE_LIMIT");
    input(s, "PING"); /* a barrier is never refused for the rate */
    assert_int_equal(c.nout, nout + 1);
    B.now += 1000 * 1000000u; /* one more token */
    input(s, "CANCEL cl=d");
    assert_int_equal(c.nout, nout + 1);
    input(s, "CANCEL cl=e");
    assert_int_equal(c.nout, nout + 2);
    assert_int_equal(em_gw_stats(g)->rate_limited, 2);
    em_gw_session_close(s);
    em_gw_free(g);
}

static void test_full_engine_queue(void **state)
{
    struct em_gw *g = new_gw(0, 1);
    struct fake_conn c = {0};
    struct em_gw_session *s = logged_in(g, &c, "GW1");
    unsigned nout = c.nout, flushes = c.flushes;
    B.send_rc = CORE_EAGAIN;
    input(s, "CANCEL cl=a");
    input(s, "CANCEL cl=b");
    em_gw_flush(g);
    assert_int_equal(c.nout, nout + 2);
    assert_string_equal(c.out[nout], "REJECT cl=a reason=RATE_LIMIT");
    assert_string_equal(c.out[nout + 1], "REJECT cl=b reason=RATE_LIMIT");
    assert_int_equal(c.flushes, flushes + 1);
    assert_int_equal(em_gw_stats(g)->bus_full, 2);
    B.send_rc = 0;
    em_gw_session_close(s);
    em_gw_free(g);
}

static void test_auth(void **state)
{
    struct em_gw *g = new_gw(0, 1);
    struct fake_conn c1 = {0}, c2 = {0}, c3 = {0}, c4 = {0};
    /* OPS may log in only with a configured token */
    struct em_gw_session *s1 = em_gw_session_open(g, &front, &c1);
    input(s1, "LOGIN gw=OPS");
    assert_string_equal(c1.out[0], "REJECT reason=AUTH");
    assert_int_equal(em_gw_add_token(g, "OPS", "sekrit"), 0);
    assert_int_equal(em_gw_add_token(g, "G W", "x"), CORE_EINVAL);
    input(s1, "LOGIN gw=OPS token=wrong");
    assert_string_equal(c1.out[1], "REJECT reason=AUTH");
    input(s1, "LOGIN gw=OPS token=sekrit");
    assert_true(em_gw_session_logging_in(s1));
    em_gw_flush(g);
    /* the engine refuses the operator's LOGIN (a client message): that
     * proves the path as well as LOGGEDIN */
    engine_says(g, "OPS", "REJECT reason=AUTH");
    assert_false(em_gw_session_logging_in(s1));
    assert_string_equal(c1.out[2], "LOGGEDIN gw=OPS");
    /* the operator may not send client messages, a trader no operator ones */
    input(s1, "NEW cl=a sym=ABC side=B qty=1 px=1");
    assert_string_equal(c1.out[3], "REJECT cl=a reason=AUTH");
    struct em_gw_session *s2 = logged_in(g, &c2, "GW1");
    input(s2, "HALT sym=ABC");
    assert_string_equal(c2.out[c2.nout - 1], "REJECT reason=AUTH");
    /* a trader may not send events, nor log in twice */
    input(s2, "ACK cl=a oid=1");
    assert_string_equal(c2.out[c2.nout - 1], "REJECT cl=a reason=SYNTAX");
    input(s2, "LOGIN gw=GW1");
    assert_string_equal(c2.out[c2.nout - 1], "REJECT reason=AUTH");
    /* one session per gw on a gateway */
    struct em_gw_session *s3 = em_gw_session_open(g, &front, &c3);
    input(s3, "LOGIN gw=GW1");
    assert_string_equal(c3.out[0], "REJECT reason=AUTH");
    assert_false(em_gw_session_logging_in(s3));
    /* a listed gw needs its token */
    assert_int_equal(em_gw_add_token(g, "GW7", "t7"), 0);
    struct em_gw_session *s4 = em_gw_session_open(g, &front, &c4);
    input(s4, "LOGIN gw=GW7");
    assert_string_equal(c4.out[0], "REJECT reason=AUTH");
    input(s4, "LOGIN gw=GW7 token=t7");
    assert_true(em_gw_session_logging_in(s4));
    em_gw_session_close(s1);
    em_gw_session_close(s2);
    em_gw_session_close(s3);
    em_gw_session_close(s4);
    em_gw_free(g);
}

/* docs/alf.md C.5: an operator message the engine took is answered OK
 * (a PING goes after it; no REJECT before its PONG), one it refused gets
 * only the REJECT; the operator's own PING still gets PONG. */
static void test_operator_ok(void **state)
{
    struct em_gw *g = new_gw(0, 1);
    assert_int_equal(em_gw_add_token(g, "OPS", "sekrit"), 0);
    struct fake_conn c = {0};
    struct em_gw_session *s = em_gw_session_open(g, &front, &c);
    input(s, "LOGIN gw=OPS token=sekrit");
    em_gw_flush(g);
    engine_says(g, "OPS", "REJECT reason=AUTH"); /* the path is proven */
    unsigned sent = B.nsent, out = c.nout;
    input(s, "HALT sym=ABC");
    input(s, "HALT sym=NOPE");
    input(s, "PING");
    em_gw_flush(g);
    assert_int_equal(B.nsent, sent + 5);
    assert_string_equal(B.sent[sent], "HALT sym=ABC");
    assert_string_equal(B.sent[sent + 1], "PING");
    assert_string_equal(B.sent[sent + 2], "HALT sym=NOPE");
    assert_string_equal(B.sent[sent + 3], "PING");
    assert_string_equal(B.sent[sent + 4], "PING");
    /* the engine: nothing for the first, a REJECT for the second */
    engine_says(g, "OPS", "PONG");
    engine_says(g, "OPS", "REJECT reason=UNKNOWN_SYMBOL");
    engine_says(g, "OPS", "PONG");
    engine_says(g, "OPS", "PONG");
    assert_int_equal(c.nout, out + 3);
    assert_string_equal(c.out[out], "OK");
    assert_string_equal(c.out[out + 1], "REJECT reason=UNKNOWN_SYMBOL");
    assert_string_equal(c.out[out + 2], "PONG");
    em_gw_session_close(s);
    em_gw_free(g);
}

static void test_logout_and_disconnect(void **state)
{
    struct em_gw *g = new_gw(0, 1);
    struct fake_conn c1 = {0}, c2 = {0};
    struct em_gw_session *s1 = logged_in(g, &c1, "GW1");
    struct em_gw_session *s2 = logged_in(g, &c2, "GW2");
    unsigned sent = B.nsent;
    input(s1, "LOGOUT");
    assert_int_equal(c1.closed, 2); /* after the reply */
    assert_int_equal(B.unsubs, 1);
    em_gw_flush(g);
    assert_string_equal(B.sent[sent], "LOGOUT");
    em_gw_session_close(s1); /* after LOGOUT: no DISCONNECT */
    em_gw_flush(g);
    assert_int_equal(B.nsent, sent + 1);
    /* a dropped connection cancels: DISCONNECT goes at once */
    em_gw_session_close(s2);
    assert_int_equal(B.nsent, sent + 2);
    assert_string_equal(B.last_topic, "GW2");
    assert_string_equal(B.sent[sent + 1], "DISCONNECT");
    assert_int_equal(B.unsubs, 2);
    /* the gw is free again, and nothing is routed to the old session */
    engine_says(g, "GW2", "ACK cl=a oid=1");
    assert_int_equal(em_gw_stats(g)->unrouted, 1);
    assert_int_equal(em_gw_stats(g)->sessions, 0);
    em_gw_free(g);
}

static void test_refuse_and_tokens_file(void **state)
{
    struct em_gw *g = new_gw(0, 1);
    struct fake_conn c = {0};
    struct em_gw_session *s = logged_in(g, &c, "GW1");
    uint64_t in = em_gw_stats(g)->msgs_in;
    em_gw_session_refuse(s, EM_REJ_LINE_TOO_LONG);
    assert_string_equal(c.out[c.nout - 1], "REJECT reason=LINE_TOO_LONG");
    assert_int_equal(em_gw_stats(g)->msgs_in, in + 1);
    em_gw_session_close(s);

    char path[] = "/tmp/test_gw_tokensXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("# comment\nOPS ops-token\nbad gw line with spaces\nGW9 t9\n", f);
    fclose(f);
    assert_int_equal(em_gw_load_tokens(g, path), 0);
    unlink(path);
    assert_int_equal(em_gw_load_tokens(g, path), CORE_ENOTFOUND);
    struct fake_conn c2 = {0};
    s = em_gw_session_open(g, &front, &c2);
    input(s, "LOGIN gw=GW9");
    assert_string_equal(c2.out[0], "REJECT reason=AUTH");
    input(s, "LOGIN gw=GW9 token=t9");
    assert_true(em_gw_session_logging_in(s));
    em_gw_session_close(s);
    em_gw_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not_logged_in),
        cmocka_unit_test(test_operator_ok),
        cmocka_unit_test(test_login_goes_through_the_engine),
        cmocka_unit_test(test_logged_in_elsewhere),
        cmocka_unit_test(test_batching_and_events),
        cmocka_unit_test(test_rate_limit),
        cmocka_unit_test(test_full_engine_queue),
        cmocka_unit_test(test_auth),
        cmocka_unit_test(test_logout_and_disconnect),
        cmocka_unit_test(test_refuse_and_tokens_file),
        cmocka_unit_test(test_resend),
        cmocka_unit_test(test_event_resync),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
