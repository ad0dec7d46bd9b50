/*
 * FIX 4.4 session layer (fix_session.h; the state machine and the
 * sequence-number rules are drawn there).
 *
 * Invariants:
 *  1. store.next_in is the MsgSeqNum expected from the peer, store.next_out
 *     the one of our next message; both are in the store before the
 *     effects of a message leave (a restarted gateway never reuses a
 *     number it sent, nor handles an inbound message twice): next_out with
 *     each stored message, next_in once per em_fix_session_input, before it
 *     returns (the caller sends nothing of that input before).
 *  2. Every outbound message with a sequence number is in the store, so a
 *     ResendRequest can be answered; admin messages are gap-filled on
 *     resend, application messages and Rejects resent with PossDupFlag=Y.
 *  3. ops.close is called at most once, and nothing is sent after it.
 */
#include "edumatcher/gateway/fix/fix_session.h"

#include "core/error.h"

#include <stdio.h>
#include <string.h>

#define NS_PER_S 1000000000ull

/* Write next_in if it changed, and close the store. */
static void close_store(struct em_fix_session *s)
{
    if (!s->store_open)
        return;
    if (s->in_dirty)
        em_fix_store_set_seqs(&s->store, s->store.next_in, s->store.next_out);
    s->in_dirty = false;
    em_fix_store_close(&s->store);
    s->store_open = false;
}

static void do_close(struct em_fix_session *s, const char *why)
{
    if (s->state == EM_FIX_CLOSED)
        return;
    s->state = EM_FIX_CLOSED;
    close_store(s);
    s->ops->close(s->ctx, why);
}

static void header(struct em_fix_session *s, struct em_fix_out *o, char *buf, size_t cap,
                   const char *type, uint64_t seq)
{
    em_fix_begin(o, buf, cap, type);
    em_fix_add_cstr(o, EM_FIX_TAG_SENDERCOMPID, s->cfg->comp_id);
    em_fix_add_cstr(o, EM_FIX_TAG_TARGETCOMPID, s->their_id);
    em_fix_add_uint(o, EM_FIX_TAG_MSGSEQNUM, seq);
    em_fix_add_time(o, EM_FIX_TAG_SENDINGTIME, s->now_ns);
}

struct em_fix_out *em_fix_session_begin(struct em_fix_session *s, const char *msgtype)
{
    header(s, &s->out, s->out_buf, sizeof s->out_buf, msgtype,
           s->store_open ? s->store.next_out : 1);
    return &s->out;
}

/* Finish, store (when the store is open) and send s->out. */
static int send_out(struct em_fix_session *s)
{
    size_t n = em_fix_finish(&s->out);
    if (n == 0)
        return CORE_ETOOBIG;
    if (s->store_open) {
        uint64_t seq = s->store.next_out;
        int rc = em_fix_store_append(&s->store, seq, s->out_buf, n);
        if (rc)
            return rc;
    }
    s->ops->send(s->ctx, s->out_buf, n);
    s->last_tx_ns = s->now_ns;
    return 0;
}

int em_fix_session_send(struct em_fix_session *s)
{
    if (s->state != EM_FIX_ACTIVE)
        return CORE_ESTATE;
    return send_out(s);
}

/* Logout before the session has a store (refused Logon, a message before
 * Logon): sequence number 1, nothing kept. */
static void refuse(struct em_fix_session *s, const char *text)
{
    if (s->state == EM_FIX_CLOSED)
        return;
    if (s->their_id[0]) {
        em_fix_session_begin(s, "5");
        em_fix_add_cstr(&s->out, EM_FIX_TAG_TEXT, text);
        send_out(s);
    }
    do_close(s, text);
}

void em_fix_session_logout(struct em_fix_session *s, const char *text)
{
    if (s->state != EM_FIX_ACTIVE) {
        if (s->state == EM_FIX_AWAIT_LOGON || s->state == EM_FIX_LOGON_PENDING)
            refuse(s, text);
        return;
    }
    em_fix_session_begin(s, "5");
    if (text)
        em_fix_add_cstr(&s->out, EM_FIX_TAG_TEXT, text);
    if (send_out(s)) {
        do_close(s, "store failed");
        return;
    }
    s->state = EM_FIX_LOGOUT_SENT;
    s->logout_ns = s->now_ns;
}

void em_fix_session_reject(struct em_fix_session *s, const struct em_fix_msg *m, int reason,
                           uint32_t tag, const char *text)
{
    if (s->state != EM_FIX_ACTIVE && s->state != EM_FIX_LOGOUT_SENT)
        return;
    em_fix_session_begin(s, "3");
    if (m->seq)
        em_fix_add_uint(&s->out, EM_FIX_TAG_REFSEQNUM, m->seq);
    else
        em_fix_add_uint(&s->out, EM_FIX_TAG_REFSEQNUM, 0);
    if (tag)
        em_fix_add_uint(&s->out, EM_FIX_TAG_REFTAGID, tag);
    if (m->type[0])
        em_fix_add_cstr(&s->out, EM_FIX_TAG_REFMSGTYPE, m->type);
    em_fix_add_uint(&s->out, EM_FIX_TAG_SESSIONREJECTREASON, (uint64_t)reason);
    if (text)
        em_fix_add_cstr(&s->out, EM_FIX_TAG_TEXT, text);
    if (send_out(s))
        do_close(s, "store failed");
}

static void send_admin(struct em_fix_session *s)
{
    if (send_out(s))
        do_close(s, "store failed");
}

/* Ask for everything from `from` on, having seen `seen` (> from). */
static void send_resend_request(struct em_fix_session *s, uint64_t from, uint64_t seen)
{
    em_fix_session_begin(s, "2");
    em_fix_add_uint(&s->out, EM_FIX_TAG_BEGINSEQNO, from);
    em_fix_add_uint(&s->out, EM_FIX_TAG_ENDSEQNO, 0);
    s->resend_asked = seen;
    send_admin(s);
}

/* The next expected inbound number; written once per input (invariant 1). */
static int advance_in(struct em_fix_session *s, uint64_t next_in)
{
    s->store.next_in = next_in;
    s->in_dirty = true;
    return 0;
}

void em_fix_session_init(struct em_fix_session *s, const struct em_fix_session_config *cfg,
                         const struct em_fix_session_ops *ops, void *ctx, uint64_t now_ns)
{
    memset(s, 0, sizeof *s);
    s->state = EM_FIX_AWAIT_LOGON;
    s->cfg = cfg;
    s->ops = ops;
    s->ctx = ctx;
    s->started_ns = s->last_rx_ns = s->last_tx_ns = s->now_ns = now_ns;
}

void em_fix_session_end(struct em_fix_session *s)
{
    close_store(s);
    s->state = EM_FIX_CLOSED;
}

static bool value_is(const struct em_fix_msg *m, uint32_t tag, const char *want)
{
    const char *v;
    size_t n;
    return em_fix_get(m, tag, &v, &n) && n == strlen(want) && memcmp(v, want, n) == 0;
}

static bool has(const struct em_fix_msg *m, uint32_t tag)
{
    const char *v;
    size_t n;
    return em_fix_get(m, tag, &v, &n);
}

/* Time since then; 0 when the wall clock stepped back. */
static uint64_t elapsed(uint64_t now, uint64_t then)
{
    return now > then ? now - then : 0;
}

static bool is_admin(const char *type)
{
    return type[1] == '\0' && strchr("012345A", type[0]) != NULL;
}

/* ---- resend (FIX session protocol: ResendRequest) ---- */

static void gap_fill(struct em_fix_session *s, uint64_t seq, uint64_t new_seq)
{
    /* not stored: it takes the number of what it replaces */
    em_fix_begin(&s->out, s->out_buf, sizeof s->out_buf, "4");
    em_fix_add_cstr(&s->out, EM_FIX_TAG_SENDERCOMPID, s->cfg->comp_id);
    em_fix_add_cstr(&s->out, EM_FIX_TAG_TARGETCOMPID, s->their_id);
    em_fix_add_uint(&s->out, EM_FIX_TAG_MSGSEQNUM, seq);
    em_fix_add_char(&s->out, EM_FIX_TAG_POSSDUPFLAG, 'Y');
    em_fix_add_time(&s->out, EM_FIX_TAG_SENDINGTIME, s->now_ns);
    em_fix_add_time(&s->out, EM_FIX_TAG_ORIGSENDINGTIME, s->now_ns);
    em_fix_add_char(&s->out, EM_FIX_TAG_GAPFILLFLAG, 'Y');
    em_fix_add_uint(&s->out, EM_FIX_TAG_NEWSEQNO, new_seq);
    size_t n = em_fix_finish(&s->out);
    if (n)
        s->ops->send(s->ctx, s->out_buf, n);
}

/* Resend a stored application message (or Reject) with PossDupFlag=Y,
 * OrigSendingTime = its SendingTime, the body unchanged. */
static bool resend_one(struct em_fix_session *s, const struct em_fix_msg *m)
{
    const char *orig;
    size_t olen;
    if (!em_fix_get(m, EM_FIX_TAG_SENDINGTIME, &orig, &olen))
        return false;
    em_fix_begin(&s->out, s->out_buf, sizeof s->out_buf, m->type);
    em_fix_add_cstr(&s->out, EM_FIX_TAG_SENDERCOMPID, s->cfg->comp_id);
    em_fix_add_cstr(&s->out, EM_FIX_TAG_TARGETCOMPID, s->their_id);
    em_fix_add_uint(&s->out, EM_FIX_TAG_MSGSEQNUM, m->seq);
    em_fix_add_char(&s->out, EM_FIX_TAG_POSSDUPFLAG, 'Y');
    em_fix_add_time(&s->out, EM_FIX_TAG_SENDINGTIME, s->now_ns);
    em_fix_add_str(&s->out, EM_FIX_TAG_ORIGSENDINGTIME, orig, olen);
    for (unsigned i = 0; i < m->nfields; i++) {
        uint32_t t = m->fields[i].tag;
        if (t == EM_FIX_TAG_MSGTYPE || t == EM_FIX_TAG_SENDERCOMPID ||
            t == EM_FIX_TAG_TARGETCOMPID || t == EM_FIX_TAG_MSGSEQNUM ||
            t == EM_FIX_TAG_SENDINGTIME || t == EM_FIX_TAG_POSSDUPFLAG ||
            t == EM_FIX_TAG_ORIGSENDINGTIME || t == EM_FIX_TAG_POSSRESEND)
            continue;
        em_fix_add_str(&s->out, t, m->buf + m->fields[i].off, m->fields[i].len);
    }
    size_t n = em_fix_finish(&s->out);
    if (!n)
        return false;
    s->ops->send(s->ctx, s->out_buf, n);
    return true;
}

static void answer_resend(struct em_fix_session *s, uint64_t begin, uint64_t end)
{
    uint64_t last = s->store.next_out - 1;
    if (end == 0 || end > last)
        end = last;
    uint64_t gap = 0; /* first seq of a run to gap-fill, 0: none */
    for (uint64_t seq = begin; seq <= end; seq++) {
        size_t n;
        struct em_fix_msg m;
        bool sent = false;
        if (em_fix_store_get(&s->store, seq, s->resend_buf, sizeof s->resend_buf, &n) == 0 &&
            em_fix_frame(s->resend_buf, n, &n) == 0 && em_fix_decode(s->resend_buf, n, &m) == 0 &&
            !is_admin(m.type)) {
            if (gap) {
                gap_fill(s, gap, seq);
                gap = 0;
            }
            sent = resend_one(s, &m);
        }
        if (!sent && !gap)
            gap = seq;
    }
    if (gap)
        gap_fill(s, gap, end + 1);
    s->last_tx_ns = s->now_ns;
}

/* ---- inbound ---- */

static void accept_logon(struct em_fix_session *s);

static void on_logon(struct em_fix_session *s, const struct em_fix_msg *m, int decoded)
{
    const char *v;
    size_t n;
    if (!em_fix_get(m, EM_FIX_TAG_SENDERCOMPID, &v, &n) || n == 0 || n > EM_FIX_COMPID_MAX) {
        do_close(s, "Logon without a usable SenderCompID(49)");
        return;
    }
    memcpy(s->their_id, v, n);
    s->their_id[n] = '\0';
    if (strcmp(m->type, "A") != 0) {
        refuse(s, "first message must be Logon(A)");
        return;
    }
    if (decoded != 0 || m->seq == 0) {
        refuse(s, "malformed Logon");
        return;
    }
    if (!value_is(m, EM_FIX_TAG_TARGETCOMPID, s->cfg->comp_id)) {
        refuse(s, "wrong TargetCompID(56)");
        return;
    }
    uint64_t hb;
    if (em_fix_get_uint(m, EM_FIX_TAG_HEARTBTINT, &hb) != 0 || hb > s->cfg->max_heartbtint) {
        refuse(s, "HeartBtInt(108) missing or out of range");
        return;
    }
    if (em_fix_get(m, EM_FIX_TAG_ENCRYPTMETHOD, &v, &n) && !(n == 1 && v[0] == '0')) {
        refuse(s, "EncryptMethod(98) must be 0");
        return;
    }
    const char *why = "logon refused";
    s->logon_hb = hb;
    s->logon_reset = value_is(m, EM_FIX_TAG_RESETSEQNUMFLAG, "Y");
    s->logon_seq = m->seq;
    int verdict = s->ops->logon(s->ctx, m, &why);
    if (verdict == EM_FIX_LOGON_WAIT) {
        s->state = EM_FIX_LOGON_PENDING; /* em_fix_session_logon_done goes on */
        return;
    }
    if (verdict != 0) {
        refuse(s, why);
        return;
    }
    accept_logon(s);
}

/* The Logon was accepted (at once, or by em_fix_session_logon_done): open
 * the store, check the sequence, answer Logon. */
static void accept_logon(struct em_fix_session *s)
{
    uint64_t hb = s->logon_hb;
    if (em_fix_store_open(&s->store, s->cfg->store_dir, s->their_id, s->cfg->comp_id) != 0) {
        refuse(s, "session store unavailable");
        return;
    }
    s->store_open = true;
    bool reset = s->logon_reset;
    if (reset && em_fix_store_reset(&s->store) != 0) {
        refuse(s, "session store unavailable");
        return;
    }
    uint64_t expected = s->store.next_in;
    uint64_t seq = s->logon_seq;
    if (seq < expected) {
        char text[96];
        snprintf(text, sizeof text, "MsgSeqNum too low, expecting %llu but received %llu",
                 (unsigned long long)expected, (unsigned long long)seq);
        s->state = EM_FIX_ACTIVE; /* the Logout is a sequenced message */
        em_fix_session_logout(s, text);
        do_close(s, text);
        return;
    }
    s->hb_ns = hb * NS_PER_S;
    s->state = EM_FIX_ACTIVE;
    em_fix_session_begin(s, "A");
    em_fix_add_uint(&s->out, EM_FIX_TAG_ENCRYPTMETHOD, 0);
    em_fix_add_uint(&s->out, EM_FIX_TAG_HEARTBTINT, hb);
    if (reset)
        em_fix_add_char(&s->out, EM_FIX_TAG_RESETSEQNUMFLAG, 'Y');
    send_admin(s);
    if (s->state != EM_FIX_ACTIVE)
        return;
    if (seq > expected)
        send_resend_request(s, expected, seq);
    else
        advance_in(s, seq + 1);
}

static void too_low(struct em_fix_session *s, const struct em_fix_msg *m)
{
    char text[96];
    snprintf(text, sizeof text, "MsgSeqNum too low, expecting %llu but received %llu",
             (unsigned long long)s->store.next_in, (unsigned long long)m->seq);
    em_fix_session_logout(s, text);
    do_close(s, text);
}

static void on_sequence_reset(struct em_fix_session *s, const struct em_fix_msg *m, bool gap_fill)
{
    uint64_t new_seq;
    if (em_fix_get_uint(m, EM_FIX_TAG_NEWSEQNO, &new_seq) != 0) {
        em_fix_session_reject(s, m, EM_FIX_RR_REQUIRED_TAG_MISSING, EM_FIX_TAG_NEWSEQNO,
                              "NewSeqNo(36) missing or malformed");
        if (gap_fill)
            advance_in(s, s->store.next_in + 1);
        return;
    }
    uint64_t floor = gap_fill ? s->store.next_in + 1 : s->store.next_in;
    if (new_seq < floor) {
        em_fix_session_reject(s, m, EM_FIX_RR_VALUE_OUT_OF_RANGE, EM_FIX_TAG_NEWSEQNO,
                              "NewSeqNo(36) would move the sequence back");
        if (gap_fill)
            advance_in(s, s->store.next_in + 1);
        return;
    }
    advance_in(s, new_seq);
}

/* One whole, framed message. */
static void on_message(struct em_fix_session *s, const char *buf, size_t len)
{
    struct em_fix_msg m;
    int decoded = em_fix_decode(buf, len, &m);
    s->last_rx_ns = s->now_ns;
    if (s->state == EM_FIX_AWAIT_LOGON) {
        on_logon(s, &m, decoded);
        return;
    }
    s->testreq_ns = 0; /* the peer is alive */
    uint64_t expected = s->store.next_in;
    if (decoded != 0) {
        /* a rejected message consumes its number (rule 1); one whose
         * number is not the expected one cannot be placed */
        if (m.seq == expected) {
            em_fix_session_reject(s, &m, m.fault_reason, m.fault_tag, "malformed field");
            advance_in(s, expected + 1);
        } else if (m.seq > expected && s->resend_asked == 0) {
            send_resend_request(s, expected, m.seq);
        }
        return;
    }
    if (!value_is(&m, EM_FIX_TAG_SENDERCOMPID, s->their_id) ||
        !value_is(&m, EM_FIX_TAG_TARGETCOMPID, s->cfg->comp_id)) {
        em_fix_session_reject(s, &m, EM_FIX_RR_COMPID_PROBLEM, EM_FIX_TAG_SENDERCOMPID,
                              "wrong CompID");
        em_fix_session_logout(s, "wrong CompID");
        do_close(s, "wrong CompID");
        return;
    }
    bool gap_fill_flag = value_is(&m, EM_FIX_TAG_GAPFILLFLAG, "Y");
    if (!strcmp(m.type, "4") && !gap_fill_flag) {
        on_sequence_reset(s, &m, false); /* reset mode: MsgSeqNum ignored */
        return;
    }
    if (m.seq > expected) {
        if (!strcmp(m.type, "2")) { /* answer it first, then ask ours */
            uint64_t b, e = 0;
            if (em_fix_get_uint(&m, EM_FIX_TAG_BEGINSEQNO, &b) == 0 &&
                em_fix_get_uint(&m, EM_FIX_TAG_ENDSEQNO, &e) == 0)
                answer_resend(s, b, e);
        }
        if (!strcmp(m.type, "5")) {
            do_close(s, "peer logged out");
            return;
        }
        if (s->resend_asked == 0)
            send_resend_request(s, expected, m.seq);
        return;
    }
    if (m.seq < expected) {
        if (!m.poss_dup)
            too_low(s, &m);
        return;
    }
    /* m.seq == expected */
    if (m.poss_dup && !has(&m, EM_FIX_TAG_ORIGSENDINGTIME)) {
        em_fix_session_reject(s, &m, EM_FIX_RR_REQUIRED_TAG_MISSING, EM_FIX_TAG_ORIGSENDINGTIME,
                              "PossDupFlag=Y needs OrigSendingTime(122)");
        advance_in(s, expected + 1);
        return;
    }
    if (!has(&m, EM_FIX_TAG_SENDINGTIME)) {
        em_fix_session_reject(s, &m, EM_FIX_RR_REQUIRED_TAG_MISSING, EM_FIX_TAG_SENDINGTIME,
                              "SendingTime(52) missing");
        advance_in(s, expected + 1);
        return;
    }
    if (s->resend_asked && expected >= s->resend_asked)
        s->resend_asked = 0; /* the gap is filled */
    if (!strcmp(m.type, "4")) {
        on_sequence_reset(s, &m, true);
        return;
    }
    if (advance_in(s, expected + 1))
        return;
    switch (m.type[1] ? '\0' : m.type[0]) {
    case '0':
        return;
    case '1': {
        const char *id;
        size_t n;
        if (!em_fix_get(&m, EM_FIX_TAG_TESTREQID, &id, &n)) {
            em_fix_session_reject(s, &m, EM_FIX_RR_REQUIRED_TAG_MISSING, EM_FIX_TAG_TESTREQID,
                                  "TestReqID(112) missing");
            return;
        }
        em_fix_session_begin(s, "0");
        em_fix_add_str(&s->out, EM_FIX_TAG_TESTREQID, id, n);
        send_admin(s);
        return;
    }
    case '2': {
        uint64_t b, e;
        if (em_fix_get_uint(&m, EM_FIX_TAG_BEGINSEQNO, &b) != 0 || b == 0 ||
            em_fix_get_uint(&m, EM_FIX_TAG_ENDSEQNO, &e) != 0) {
            em_fix_session_reject(s, &m, EM_FIX_RR_REQUIRED_TAG_MISSING, EM_FIX_TAG_BEGINSEQNO,
                                  "BeginSeqNo(7) and EndSeqNo(16) required");
            return;
        }
        answer_resend(s, b, e);
        return;
    }
    case '3':
        return; /* the peer rejected one of ours: nothing to undo */
    case '5':
        if (s->state == EM_FIX_ACTIVE) {
            em_fix_session_begin(s, "5");
            send_admin(s);
        }
        do_close(s, "peer logged out");
        return;
    case 'A':
        em_fix_session_reject(s, &m, EM_FIX_RR_OTHER, 0, "already logged on");
        return;
    default:
        if (s->state == EM_FIX_ACTIVE)
            s->ops->app(s->ctx, &m);
        return;
    }
}

void em_fix_session_logon_done(struct em_fix_session *s, const char *refused, uint64_t now_ns)
{
    if (s->state != EM_FIX_LOGON_PENDING)
        return;
    s->now_ns = now_ns;
    s->state = EM_FIX_AWAIT_LOGON;
    if (refused) {
        refuse(s, refused);
        return;
    }
    accept_logon(s);
    if (s->in_dirty && s->store_open) {
        s->in_dirty = false;
        if (em_fix_store_set_seqs(&s->store, s->store.next_in, s->store.next_out))
            do_close(s, "store failed");
    }
}

size_t em_fix_session_input(struct em_fix_session *s, const char *buf, size_t len, uint64_t now_ns)
{
    size_t used = 0;
    s->now_ns = now_ns;
    /* LOGON_PENDING: what follows the Logon stays with the caller until
     * the answer (em_fix_session_logon_done), as a FIX engine reads
     * nothing of a session before its Logon is accepted */
    while (used < len && s->state != EM_FIX_CLOSED && s->state != EM_FIX_LOGON_PENDING) {
        size_t n = 0;
        int rc = em_fix_frame(buf + used, len - used, &n);
        if (rc == EM_FIX_FRAME_MORE)
            break;
        if (rc == 0)
            on_message(s, buf + used, n);
        used += n; /* a garbled message is dropped (n bytes) */
    }
    if (s->in_dirty && s->store_open) {
        s->in_dirty = false;
        if (em_fix_store_set_seqs(&s->store, s->store.next_in, s->store.next_out))
            do_close(s, "store failed");
    }
    if (s->state == EM_FIX_CLOSED)
        return len;
    return used;
}

void em_fix_session_tick(struct em_fix_session *s, uint64_t now_ns)
{
    s->now_ns = now_ns;
    switch (s->state) {
    case EM_FIX_AWAIT_LOGON:
        if (elapsed(now_ns, s->started_ns) >= s->cfg->logon_timeout_ns)
            do_close(s, "no Logon");
        return;
    case EM_FIX_LOGON_PENDING:
        if (elapsed(now_ns, s->started_ns) >= 2 * s->cfg->logon_timeout_ns) {
            s->state = EM_FIX_AWAIT_LOGON;
            refuse(s, "the exchange did not confirm the Logon in time");
        }
        return;
    case EM_FIX_LOGOUT_SENT:
        if (elapsed(now_ns, s->logout_ns) >= s->cfg->logout_timeout_ns)
            do_close(s, "logout not answered");
        return;
    case EM_FIX_CLOSED:
        return;
    case EM_FIX_ACTIVE:
        break;
    }
    if (s->hb_ns == 0)
        return;
    if (s->testreq_ns && elapsed(now_ns, s->testreq_ns) >= s->hb_ns) {
        em_fix_session_logout(s, "TestRequest not answered");
        do_close(s, "TestRequest not answered");
        return;
    }
    if (!s->testreq_ns && elapsed(now_ns, s->last_rx_ns) >= s->hb_ns + s->hb_ns / 5) {
        char id[32];
        int n = snprintf(id, sizeof id, "TEST%llu", (unsigned long long)++s->testreq_count);
        em_fix_session_begin(s, "1");
        em_fix_add_str(&s->out, EM_FIX_TAG_TESTREQID, id, (size_t)n);
        send_admin(s);
        s->testreq_ns = now_ns;
        return;
    }
    if (elapsed(now_ns, s->last_tx_ns) >= s->hb_ns) {
        em_fix_session_begin(s, "0");
        send_admin(s);
    }
}
