/* fix_session: the session layer driven as the gateway drives it (bytes
 * in, ticks), with a peer built from the codec. Logon and its refusals,
 * in-sequence delivery, gaps (ResendRequest), too-low numbers, resends
 * with gap-fill of admin messages, both SequenceReset forms, Reject with
 * RefSeqNum/SessionRejectReason, Logout both ways, heartbeats and the
 * unanswered TestRequest, and a restart that resumes from the store (and
 * ResetSeqNumFlag that does not). Time is given, never read. */
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
#include "edumatcher/gateway/fix/fix_session.h"

#define S_NS     1000000000ull
#define T0       (1764590400ull * S_NS)
#define MAX_SENT 64

struct peer {
    char sent[MAX_SENT][EM_FIX_MSG_MAX]; /* what the session sent, one message each */
    size_t sent_len[MAX_SENT];
    int nsent;
    int napp;
    char app_types[MAX_SENT][3];
    uint64_t app_seqs[MAX_SENT];
    bool closed;
    char close_why[128];
    bool refuse_logon;
    bool wait_logon;   /* answer EM_FIX_LOGON_WAIT */
    uint64_t next_seq; /* the peer's own MsgSeqNum */
};

static char store_dir[64];
static struct em_fix_session_config cfg = {
    .comp_id = "EDUMATCHER",
    .store_dir = store_dir,
    .logon_timeout_ns = 10 * S_NS,
    .logout_timeout_ns = 2 * S_NS,
    .max_heartbtint = 3600,
};

static void p_send(void *ctx, const char *buf, size_t len)
{
    struct peer *p = ctx;
    assert_false(p->closed); /* invariant 3: nothing after close */
    assert_true(p->nsent < MAX_SENT);
    /* every message the session writes is a valid FIX message */
    size_t n;
    assert_int_equal(em_fix_frame(buf, len, &n), 0);
    assert_int_equal(n, len);
    memcpy(p->sent[p->nsent], buf, len);
    p->sent_len[p->nsent++] = len;
}

static int p_logon(void *ctx, const struct em_fix_msg *m, const char **why)
{
    struct peer *p = ctx;
    (void)m;
    if (p->refuse_logon) {
        *why = "bad password";
        return -1;
    }
    return p->wait_logon ? EM_FIX_LOGON_WAIT : 0;
}

static void p_app(void *ctx, const struct em_fix_msg *m)
{
    struct peer *p = ctx;
    strcpy(p->app_types[p->napp], m->type);
    p->app_seqs[p->napp++] = m->seq;
}

static void p_close(void *ctx, const char *why)
{
    struct peer *p = ctx;
    assert_false(p->closed);
    p->closed = true;
    snprintf(p->close_why, sizeof p->close_why, "%s", why);
}

static const struct em_fix_session_ops ops = {p_send, p_logon, p_app, p_close};

/* The i-th message the session sent, decoded. */
static struct em_fix_msg sent(struct peer *p, int i)
{
    struct em_fix_msg m;
    assert_true(i < p->nsent);
    assert_int_equal(em_fix_decode(p->sent[i], p->sent_len[i], &m), 0);
    return m;
}

static bool field_is(const struct em_fix_msg *m, uint32_t tag, const char *want)
{
    const char *v;
    size_t n;
    return em_fix_get(m, tag, &v, &n) && n == strlen(want) && !memcmp(v, want, n);
}

static uint64_t uint_of(const struct em_fix_msg *m, uint32_t tag)
{
    uint64_t v = 0;
    assert_int_equal(em_fix_get_uint(m, tag, &v), 0);
    return v;
}

/* Build a peer message: header (seq = p->next_seq++ unless seq != 0),
 * then "tag=value|..." extra fields. */
static size_t peer_msg(struct peer *p, char *buf, const char *type, uint64_t seq, const char *extra)
{
    struct em_fix_out o;
    em_fix_begin(&o, buf, EM_FIX_MSG_MAX, type);
    em_fix_add_cstr(&o, EM_FIX_TAG_SENDERCOMPID, "T1");
    em_fix_add_cstr(&o, EM_FIX_TAG_TARGETCOMPID, "EDUMATCHER");
    em_fix_add_uint(&o, EM_FIX_TAG_MSGSEQNUM, seq ? seq : p->next_seq++);
    em_fix_add_cstr(&o, EM_FIX_TAG_SENDINGTIME, "20261201-12:00:00.000");
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", extra ? extra : "");
    for (char *f = strtok(tmp, "|"); f; f = strtok(NULL, "|")) {
        char *eq = strchr(f, '=');
        *eq = '\0';
        em_fix_add_cstr(&o, (uint32_t)atoi(f), eq + 1);
    }
    size_t n = em_fix_finish(&o);
    assert_true(n > 0);
    return n;
}

static void feed(struct em_fix_session *s, struct peer *p, const char *type, uint64_t seq,
                 const char *extra, uint64_t now)
{
    char b[EM_FIX_MSG_MAX];
    size_t n = peer_msg(p, b, type, seq, extra);
    assert_int_equal(em_fix_session_input(s, b, n, now), n);
}

static void fresh_store(void)
{
    snprintf(store_dir, sizeof store_dir, "/tmp/test_fix_session.XXXXXX");
    assert_non_null(mkdtemp(store_dir));
}

static void wipe_store(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", store_dir);
    assert_int_equal(system(cmd), 0);
}

/* A session logged on with HeartBtInt 30. */
static void logon(struct em_fix_session *s, struct peer *p, const char *extra)
{
    memset(p, 0, sizeof *p);
    p->next_seq = 1;
    em_fix_session_init(s, &cfg, &ops, p, T0);
    char e[256];
    snprintf(e, sizeof e, "98=0|108=30|554=secret%s%s", extra ? "|" : "", extra ? extra : "");
    feed(s, p, "A", 0, e, T0);
}

static void test_logon_and_app(void **state)
{
    (void)state;
    fresh_store();
    static struct em_fix_session s;
    static struct peer p;
    logon(&s, &p, NULL);
    assert_int_equal(s.state, EM_FIX_ACTIVE);
    struct em_fix_msg m = sent(&p, 0);
    assert_string_equal(m.type, "A");
    assert_int_equal(m.seq, 1);
    assert_int_equal(uint_of(&m, EM_FIX_TAG_HEARTBTINT), 30);
    assert_true(field_is(&m, EM_FIX_TAG_SENDERCOMPID, "EDUMATCHER"));
    assert_true(field_is(&m, EM_FIX_TAG_TARGETCOMPID, "T1"));
    feed(&s, &p, "D", 0, "11=c1", T0);
    assert_int_equal(p.napp, 1);
    assert_string_equal(p.app_types[0], "D");
    /* TestRequest is answered with its id */
    feed(&s, &p, "1", 0, "112=ping7", T0);
    m = sent(&p, 1);
    assert_string_equal(m.type, "0");
    assert_true(field_is(&m, EM_FIX_TAG_TESTREQID, "ping7"));
    assert_int_equal(m.seq, 2);
    /* the peer logs out: answered, then closed */
    feed(&s, &p, "5", 0, NULL, T0);
    m = sent(&p, 2);
    assert_string_equal(m.type, "5");
    assert_true(p.closed);
    assert_int_equal(s.state, EM_FIX_CLOSED);
    wipe_store();
}

/* A Logon the caller answers later (the exchange confirms the trader):
 * nothing is answered and nothing after the Logon is read until then;
 * accepted, the Logon goes out and the kept input is read; refused, a
 * Logout with the reason and the end. */
static void test_logon_waits_for_its_answer(void **state)
{
    (void)state;
    fresh_store();
    static struct em_fix_session s;
    static struct peer p;
    memset(&p, 0, sizeof p);
    p.next_seq = 1;
    p.wait_logon = true;
    em_fix_session_init(&s, &cfg, &ops, &p, T0);
    char b[2 * EM_FIX_MSG_MAX];
    size_t n = peer_msg(&p, b, "A", 0, "98=0|108=30|554=secret");
    size_t n2 = peer_msg(&p, b + n, "D", 0, "11=c1");
    assert_int_equal(em_fix_session_input(&s, b, n + n2, T0), n); /* the D stays unread */
    assert_int_equal(s.state, EM_FIX_LOGON_PENDING);
    assert_int_equal(p.nsent, 0);
    em_fix_session_logon_done(&s, NULL, T0);
    assert_int_equal(s.state, EM_FIX_ACTIVE);
    struct em_fix_msg m = sent(&p, 0);
    assert_string_equal(m.type, "A");
    assert_int_equal(em_fix_session_input(&s, b + n, n2, T0), n2);
    assert_int_equal(p.napp, 1);
    assert_string_equal(p.app_types[0], "D");
    em_fix_session_end(&s);
    wipe_store();

    fresh_store();
    memset(&p, 0, sizeof p);
    p.next_seq = 1;
    p.wait_logon = true;
    em_fix_session_init(&s, &cfg, &ops, &p, T0);
    feed(&s, &p, "A", 0, "98=0|108=30|554=secret", T0);
    em_fix_session_logon_done(&s, "LOGGED_IN_ELSEWHERE: elsewhere", T0);
    m = sent(&p, 0);
    assert_string_equal(m.type, "5");
    assert_true(field_is(&m, EM_FIX_TAG_TEXT, "LOGGED_IN_ELSEWHERE: elsewhere"));
    assert_true(p.closed);
    assert_int_equal(s.state, EM_FIX_CLOSED);
    wipe_store();
}

static void test_logon_refusals(void **state)
{
    (void)state;
    fresh_store();
    static struct em_fix_session s;
    static struct peer p;
    /* a message before Logon */
    memset(&p, 0, sizeof p);
    p.next_seq = 1;
    em_fix_session_init(&s, &cfg, &ops, &p, T0);
    feed(&s, &p, "D", 0, "11=x", T0);
    assert_true(p.closed);
    struct em_fix_msg m = sent(&p, 0);
    assert_string_equal(m.type, "5");
    assert_true(field_is(&m, EM_FIX_TAG_TEXT, "first message must be Logon(A)"));
    assert_int_equal(p.napp, 0);
    /* a wrong TargetCompID */
    memset(&p, 0, sizeof p);
    em_fix_session_init(&s, &cfg, &ops, &p, T0);
    char b[EM_FIX_MSG_MAX];
    struct em_fix_out o;
    em_fix_begin(&o, b, sizeof b, "A");
    em_fix_add_cstr(&o, EM_FIX_TAG_SENDERCOMPID, "T1");
    em_fix_add_cstr(&o, EM_FIX_TAG_TARGETCOMPID, "ELSEWHERE");
    em_fix_add_uint(&o, EM_FIX_TAG_MSGSEQNUM, 1);
    em_fix_add_cstr(&o, EM_FIX_TAG_SENDINGTIME, "20261201-12:00:00.000");
    em_fix_add_uint(&o, EM_FIX_TAG_HEARTBTINT, 30);
    size_t n = em_fix_finish(&o);
    em_fix_session_input(&s, b, n, T0);
    assert_true(p.closed);
    m = sent(&p, 0);
    assert_true(field_is(&m, EM_FIX_TAG_TEXT, "wrong TargetCompID(56)"));
    /* a refused password */
    memset(&p, 0, sizeof p);
    p.next_seq = 1;
    p.refuse_logon = true;
    em_fix_session_init(&s, &cfg, &ops, &p, T0);
    feed(&s, &p, "A", 0, "98=0|108=30|554=wrong", T0);
    assert_true(p.closed);
    m = sent(&p, 0);
    assert_true(field_is(&m, EM_FIX_TAG_TEXT, "bad password"));
    /* no HeartBtInt */
    memset(&p, 0, sizeof p);
    p.next_seq = 1;
    em_fix_session_init(&s, &cfg, &ops, &p, T0);
    feed(&s, &p, "A", 0, "98=0", T0);
    assert_true(p.closed);
    /* no Logon at all within the logon timeout */
    memset(&p, 0, sizeof p);
    em_fix_session_init(&s, &cfg, &ops, &p, T0);
    em_fix_session_tick(&s, T0 + 9 * S_NS);
    assert_false(p.closed);
    em_fix_session_tick(&s, T0 + 10 * S_NS);
    assert_true(p.closed);
    wipe_store();
}

static void test_gap_and_too_low(void **state)
{
    (void)state;
    fresh_store();
    static struct em_fix_session s;
    static struct peer p;
    logon(&s, &p, NULL);
    /* 2 is lost: 3 arrives, a ResendRequest from 2 goes out, 3 is dropped */
    feed(&s, &p, "D", 3, "11=c3", T0);
    assert_int_equal(p.napp, 0);
    struct em_fix_msg m = sent(&p, 1);
    assert_string_equal(m.type, "2");
    assert_int_equal(uint_of(&m, EM_FIX_TAG_BEGINSEQNO), 2);
    assert_int_equal(uint_of(&m, EM_FIX_TAG_ENDSEQNO), 0);
    /* 4 too: no second request while the first is outstanding */
    feed(&s, &p, "D", 4, "11=c4", T0);
    assert_int_equal(p.nsent, 2);
    /* the peer resends 2..4 (PossDupFlag=Y) */
    for (uint64_t q = 2; q <= 4; q++)
        feed(&s, &p, "D", q, "43=Y|122=20261201-11:59:59.000|11=r", T0);
    assert_int_equal(p.napp, 3);
    assert_int_equal(p.app_seqs[2], 4);
    /* a duplicate (PossDupFlag=Y, already seen) is ignored */
    feed(&s, &p, "D", 3, "43=Y|122=20261201-11:59:59.000|11=r", T0);
    assert_int_equal(p.napp, 3);
    assert_false(p.closed);
    /* PossDupFlag=Y without OrigSendingTime: Reject, number consumed */
    feed(&s, &p, "D", 5, "43=Y|11=r", T0);
    m = sent(&p, p.nsent - 1);
    assert_string_equal(m.type, "3");
    assert_int_equal(uint_of(&m, EM_FIX_TAG_REFSEQNUM), 5);
    assert_int_equal(uint_of(&m, EM_FIX_TAG_REFTAGID), EM_FIX_TAG_ORIGSENDINGTIME);
    assert_int_equal(uint_of(&m, EM_FIX_TAG_SESSIONREJECTREASON), EM_FIX_RR_REQUIRED_TAG_MISSING);
    /* too low without PossDupFlag: Logout with the reason, closed */
    feed(&s, &p, "D", 2, "11=late", T0);
    m = sent(&p, p.nsent - 1);
    assert_string_equal(m.type, "5");
    assert_true(field_is(&m, EM_FIX_TAG_TEXT, "MsgSeqNum too low, expecting 6 but received 2"));
    assert_true(p.closed);
    wipe_store();
}

static void send_app(struct em_fix_session *s, const char *clordid)
{
    struct em_fix_out *o = em_fix_session_begin(s, "8");
    em_fix_add_cstr(o, EM_FIX_TAG_CLORDID, clordid);
    assert_int_equal(em_fix_session_send(s), 0);
}

static void test_resend_gap_fills_admin(void **state)
{
    (void)state;
    fresh_store();
    static struct em_fix_session s;
    static struct peer p;
    logon(&s, &p, NULL);                     /* our 1: Logon */
    send_app(&s, "a");                       /* 2 */
    send_app(&s, "b");                       /* 3 */
    em_fix_session_tick(&s, T0 + 30 * S_NS); /* 4: Heartbeat */
    assert_string_equal(sent(&p, 3).type, "0");
    send_app(&s, "c"); /* 5 */
    int before = p.nsent;
    feed(&s, &p, "2", 0, "7=1|16=0", T0 + 31 * S_NS);
    /* 1 (Logon) gap-filled to 2; 2, 3 resent; 4 gap-filled to 5; 5 resent */
    assert_int_equal(p.nsent - before, 5);
    struct em_fix_msg m = sent(&p, before);
    assert_string_equal(m.type, "4");
    assert_int_equal(m.seq, 1);
    assert_true(field_is(&m, EM_FIX_TAG_GAPFILLFLAG, "Y"));
    assert_int_equal(uint_of(&m, EM_FIX_TAG_NEWSEQNO), 2);
    m = sent(&p, before + 1);
    assert_string_equal(m.type, "8");
    assert_int_equal(m.seq, 2);
    assert_true(m.poss_dup);
    assert_true(field_is(&m, EM_FIX_TAG_CLORDID, "a"));
    assert_true(field_is(&m, EM_FIX_TAG_ORIGSENDINGTIME, "20251201-12:00:00.000"));
    m = sent(&p, before + 2);
    assert_true(field_is(&m, EM_FIX_TAG_CLORDID, "b"));
    m = sent(&p, before + 3);
    assert_string_equal(m.type, "4");
    assert_int_equal(m.seq, 4);
    assert_int_equal(uint_of(&m, EM_FIX_TAG_NEWSEQNO), 5);
    m = sent(&p, before + 4);
    assert_int_equal(m.seq, 5);
    assert_true(field_is(&m, EM_FIX_TAG_CLORDID, "c"));
    /* a bounded range */
    before = p.nsent;
    feed(&s, &p, "2", 0, "7=3|16=3", T0 + 32 * S_NS);
    assert_int_equal(p.nsent - before, 1);
    m = sent(&p, before);
    assert_true(field_is(&m, EM_FIX_TAG_CLORDID, "b"));
    em_fix_session_end(&s);
    wipe_store();
}

static void test_sequence_reset_and_reject(void **state)
{
    (void)state;
    fresh_store();
    static struct em_fix_session s;
    static struct peer p;
    logon(&s, &p, NULL);
    /* reset mode: MsgSeqNum ignored, the expected number jumps */
    feed(&s, &p, "4", 99, "36=10", T0);
    p.next_seq = 10;
    feed(&s, &p, "D", 0, "11=x", T0);
    assert_int_equal(p.napp, 1);
    assert_int_equal(p.app_seqs[0], 10);
    /* reset mode backwards: Reject, value out of range */
    feed(&s, &p, "4", 1, "36=5", T0);
    struct em_fix_msg m = sent(&p, p.nsent - 1);
    assert_string_equal(m.type, "3");
    assert_int_equal(uint_of(&m, EM_FIX_TAG_SESSIONREJECTREASON), EM_FIX_RR_VALUE_OUT_OF_RANGE);
    /* gap fill in sequence: 11 says the next is 15 */
    feed(&s, &p, "4", 11, "123=Y|36=15", T0);
    p.next_seq = 15;
    feed(&s, &p, "D", 0, "11=y", T0);
    assert_int_equal(p.napp, 2);
    assert_int_equal(p.app_seqs[1], 15);
    /* a repeated tag: Reject with RefSeqNum, RefTagID, reason 13; the
     * number is consumed */
    char b[EM_FIX_MSG_MAX];
    struct em_fix_out o;
    em_fix_begin(&o, b, sizeof b, "D");
    em_fix_add_cstr(&o, EM_FIX_TAG_SENDERCOMPID, "T1");
    em_fix_add_cstr(&o, EM_FIX_TAG_TARGETCOMPID, "EDUMATCHER");
    em_fix_add_uint(&o, EM_FIX_TAG_MSGSEQNUM, 16);
    em_fix_add_cstr(&o, EM_FIX_TAG_SENDINGTIME, "20261201-12:00:00.000");
    em_fix_add_cstr(&o, EM_FIX_TAG_CLORDID, "a");
    em_fix_add_cstr(&o, EM_FIX_TAG_CLORDID, "b");
    size_t n = em_fix_finish(&o);
    em_fix_session_input(&s, b, n, T0);
    m = sent(&p, p.nsent - 1);
    assert_string_equal(m.type, "3");
    assert_int_equal(uint_of(&m, EM_FIX_TAG_REFSEQNUM), 16);
    assert_int_equal(uint_of(&m, EM_FIX_TAG_REFTAGID), EM_FIX_TAG_CLORDID);
    assert_true(field_is(&m, EM_FIX_TAG_REFMSGTYPE, "D"));
    assert_int_equal(uint_of(&m, EM_FIX_TAG_SESSIONREJECTREASON), EM_FIX_RR_TAG_APPEARS_TWICE);
    assert_int_equal(p.napp, 2);
    /* a garbled message (checksum) is dropped: no reply, number not used */
    int before = p.nsent;
    p.next_seq = 17;
    n = peer_msg(&p, b, "D", 0, "11=g");
    b[n - 2] ^= 1;
    em_fix_session_input(&s, b, n, T0);
    assert_int_equal(p.nsent, before);
    p.next_seq = 17;
    feed(&s, &p, "D", 0, "11=ok", T0);
    assert_int_equal(p.napp, 3);
    /* a wrong SenderCompID after Logon: Reject, Logout, closed */
    em_fix_begin(&o, b, sizeof b, "D");
    em_fix_add_cstr(&o, EM_FIX_TAG_SENDERCOMPID, "T2");
    em_fix_add_cstr(&o, EM_FIX_TAG_TARGETCOMPID, "EDUMATCHER");
    em_fix_add_uint(&o, EM_FIX_TAG_MSGSEQNUM, 18);
    em_fix_add_cstr(&o, EM_FIX_TAG_SENDINGTIME, "20261201-12:00:00.000");
    n = em_fix_finish(&o);
    em_fix_session_input(&s, b, n, T0);
    m = sent(&p, p.nsent - 2);
    assert_string_equal(m.type, "3");
    assert_int_equal(uint_of(&m, EM_FIX_TAG_SESSIONREJECTREASON), EM_FIX_RR_COMPID_PROBLEM);
    assert_string_equal(sent(&p, p.nsent - 1).type, "5");
    assert_true(p.closed);
    wipe_store();
}

static void test_heartbeat_and_test_request(void **state)
{
    (void)state;
    fresh_store();
    static struct em_fix_session s;
    static struct peer p;
    logon(&s, &p, NULL);
    em_fix_session_tick(&s, T0 + 29 * S_NS);
    assert_int_equal(p.nsent, 1);
    em_fix_session_tick(&s, T0 + 30 * S_NS); /* nothing sent for 30 s */
    assert_string_equal(sent(&p, 1).type, "0");
    em_fix_session_tick(&s, T0 + 36 * S_NS); /* nothing received for 36 s */
    struct em_fix_msg m = sent(&p, 2);
    assert_string_equal(m.type, "1");
    assert_true(field_is(&m, EM_FIX_TAG_TESTREQID, "TEST1"));
    em_fix_session_tick(&s, T0 + 65 * S_NS);
    assert_false(p.closed);
    em_fix_session_tick(&s, T0 + 66 * S_NS); /* unanswered for 30 s */
    m = sent(&p, p.nsent - 1);
    assert_string_equal(m.type, "5");
    assert_true(field_is(&m, EM_FIX_TAG_TEXT, "TestRequest not answered"));
    assert_true(p.closed);
    /* answered in time: the session lives on */
    logon(&s, &p, "141=Y");
    em_fix_session_tick(&s, T0 + 36 * S_NS);
    assert_string_equal(sent(&p, p.nsent - 1).type, "1");
    feed(&s, &p, "0", 0, "112=TEST1", T0 + 40 * S_NS);
    em_fix_session_tick(&s, T0 + 70 * S_NS);
    assert_false(p.closed);
    /* our own Logout is answered: closed */
    em_fix_session_logout(&s, "bye");
    assert_int_equal(s.state, EM_FIX_LOGOUT_SENT);
    feed(&s, &p, "5", 0, NULL, T0 + 71 * S_NS);
    assert_true(p.closed);
    /* or not answered: closed at the logout timeout */
    logon(&s, &p, "141=Y");
    em_fix_session_logout(&s, "bye");
    em_fix_session_tick(&s, T0 + 1 * S_NS);
    assert_false(p.closed);
    em_fix_session_tick(&s, T0 + 2 * S_NS);
    assert_true(p.closed);
    wipe_store();
}

static void test_restart_resumes(void **state)
{
    (void)state;
    fresh_store();
    static struct em_fix_session s;
    static struct peer p;
    logon(&s, &p, NULL);              /* in 1, out 1 */
    feed(&s, &p, "D", 0, "11=a", T0); /* in 2 */
    send_app(&s, "r1");               /* out 2 */
    send_app(&s, "r2");               /* out 3 */
    em_fix_session_end(&s);           /* the gateway stops */
    /* a new gateway process: same store; the peer logs on with 3 */
    memset(&p, 0, sizeof p);
    p.next_seq = 3;
    em_fix_session_init(&s, &cfg, &ops, &p, T0 + 5 * S_NS);
    feed(&s, &p, "A", 0, "98=0|108=30|554=secret", T0 + 5 * S_NS);
    struct em_fix_msg m = sent(&p, 0);
    assert_string_equal(m.type, "A");
    assert_int_equal(m.seq, 4); /* our numbers go on */
    /* what was sent before the restart can be resent */
    feed(&s, &p, "2", 0, "7=2|16=3", T0 + 5 * S_NS);
    m = sent(&p, 1);
    assert_true(field_is(&m, EM_FIX_TAG_CLORDID, "r1"));
    m = sent(&p, 2);
    assert_true(field_is(&m, EM_FIX_TAG_CLORDID, "r2"));
    em_fix_session_end(&s);
    /* a peer that restarted from 1 without ResetSeqNumFlag is too low */
    memset(&p, 0, sizeof p);
    p.next_seq = 1;
    em_fix_session_init(&s, &cfg, &ops, &p, T0 + 6 * S_NS);
    feed(&s, &p, "A", 0, "98=0|108=30|554=secret", T0 + 6 * S_NS);
    assert_true(p.closed);
    m = sent(&p, p.nsent - 1);
    assert_true(field_is(&m, EM_FIX_TAG_TEXT, "MsgSeqNum too low, expecting 5 but received 1"));
    /* with ResetSeqNumFlag=Y both sides start at 1 again */
    memset(&p, 0, sizeof p);
    p.next_seq = 1;
    em_fix_session_init(&s, &cfg, &ops, &p, T0 + 7 * S_NS);
    feed(&s, &p, "A", 0, "98=0|108=30|554=secret|141=Y", T0 + 7 * S_NS);
    m = sent(&p, 0);
    assert_int_equal(m.seq, 1);
    assert_true(field_is(&m, EM_FIX_TAG_RESETSEQNUMFLAG, "Y"));
    feed(&s, &p, "D", 0, "11=after", T0 + 7 * S_NS);
    assert_int_equal(p.napp, 1);
    assert_int_equal(p.app_seqs[0], 2);
    em_fix_session_end(&s);
    wipe_store();
}

static void test_store_torn_record(void **state)
{
    (void)state;
    fresh_store();
    struct em_fix_store st;
    assert_int_equal(em_fix_store_open(&st, store_dir, "T1", "EDUMATCHER"), 0);
    assert_int_equal(em_fix_store_append(&st, 1, "one", 3), 0);
    assert_int_equal(em_fix_store_append(&st, 3, "three", 5), 0);
    assert_int_equal(em_fix_store_append(&st, 2, "x", 1), CORE_EINVAL);
    assert_int_equal(em_fix_store_set_seqs(&st, 7, 4), 0);
    em_fix_store_close(&st);
    /* a crash in the middle of an append leaves a torn record at the end */
    char path[128];
    snprintf(path, sizeof path, "%s/T1-EDUMATCHER.msgs", store_dir);
    FILE *f = fopen(path, "ab");
    assert_non_null(f);
    fwrite("\x04\0\0\0\0\0\0\0\x09\0\0\0ab", 1, 14, f);
    fclose(f);
    assert_int_equal(em_fix_store_open(&st, store_dir, "T1", "EDUMATCHER"), 0);
    assert_int_equal(st.next_in, 7);
    assert_int_equal(st.next_out, 4);
    char b[16];
    size_t n;
    assert_int_equal(em_fix_store_get(&st, 3, b, sizeof b, &n), 0);
    assert_memory_equal(b, "three", 5);
    assert_int_equal(em_fix_store_get(&st, 2, b, sizeof b, &n), CORE_ENOTFOUND);
    assert_int_equal(em_fix_store_get(&st, 4, b, sizeof b, &n), CORE_ENOTFOUND);
    assert_int_equal(em_fix_store_append(&st, 4, "four", 4), 0);
    assert_int_equal(em_fix_store_get(&st, 4, b, sizeof b, &n), 0);
    assert_memory_equal(b, "four", 4);
    assert_int_equal(em_fix_store_get(&st, 1, b, 2, &n), CORE_ETOOBIG);
    struct em_fix_store bad;
    assert_int_equal(em_fix_store_open(&bad, store_dir, "../x", "E"), CORE_EINVAL);
    em_fix_store_close(&st);
    wipe_store();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logon_and_app),
        cmocka_unit_test(test_logon_refusals),
        cmocka_unit_test(test_logon_waits_for_its_answer),
        cmocka_unit_test(test_gap_and_too_low),
        cmocka_unit_test(test_resend_gap_fills_admin),
        cmocka_unit_test(test_sequence_reset_and_reject),
        cmocka_unit_test(test_heartbeat_and_test_request),
        cmocka_unit_test(test_restart_resumes),
        cmocka_unit_test(test_store_torn_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
