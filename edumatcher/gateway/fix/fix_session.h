/*
 * The FIX 4.4 session layer of one connection (docs/fix.md, "Session"):
 * Logon, sequence numbers, heartbeats and test requests, resends,
 * sequence resets, session-level rejects and logout. It knows no socket
 * and no clock but the times it is given; the caller feeds it bytes and
 * timer ticks and it answers through callbacks, so the unit tests drive
 * it exactly as the gateway does.
 *
 * States (functions making each transition):
 *
 *   AWAIT_LOGON --valid Logon(A), accepted by ops.logon: on_logon--> ACTIVE
 *        |  anything else, wrong TargetCompID, bad password:
 *        |--> Logout(5) with the reason, ops.close -----------------> CLOSED
 *        '--ops.logon answers EM_FIX_LOGON_WAIT--> LOGON_PENDING (input after
 *           the Logon stays unread) --em_fix_session_logon_done: accepted--> ACTIVE
 *                                                      refused: Logout --> CLOSED
 *   ACTIVE --peer's Logout: answered, ops.close-----------------------> CLOSED
 *   ACTIVE --em_fix_session_logout / TestRequest unanswered /
 *            MsgSeqNum too low / wrong CompID: Logout sent ---------> LOGOUT_SENT
 *   LOGOUT_SENT --peer's Logout, or logout timeout: ops.close--------> CLOSED
 *
 * Sequence numbers (FIX session protocol):
 *  1. An inbound message whose MsgSeqNum is the expected one is handled
 *     and the expected number advances (a rejected one advances it too).
 *  2. A higher number means messages were lost: one ResendRequest(2) from
 *     the expected number to infinity (0) is sent and the message is
 *     dropped; the peer resends (PossDupFlag=Y) or gap-fills.
 *  3. A lower number without PossDupFlag=Y ends the session (Logout with
 *     "MsgSeqNum too low"); with PossDupFlag=Y it is a duplicate, ignored.
 *  4. Both numbers and every outbound message are kept in the session's
 *     store (fix_store.h) from Logon on, so a restarted gateway resumes;
 *     a Logon with ResetSeqNumFlag(141)=Y starts both at 1 again.
 */
#ifndef EM_FIX_SESSION_H
#define EM_FIX_SESSION_H

#include "edumatcher/gateway/fix/fix_codec.h"
#include "edumatcher/gateway/fix/fix_store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EM_FIX_COMPID_MAX 16

enum em_fix_state {
    EM_FIX_AWAIT_LOGON,
    EM_FIX_LOGON_PENDING, /* the Logon waits for the exchange's answer */
    EM_FIX_ACTIVE,
    EM_FIX_LOGOUT_SENT,
    EM_FIX_CLOSED,
};

struct em_fix_session;

#define EM_FIX_LOGON_WAIT 1 /* ops.logon: the answer comes later */

struct em_fix_session_ops {
    /* Write len bytes to the peer (copied before returning). */
    void (*send)(void *ctx, const char *buf, size_t len);
    /* A Logon from m's SenderCompID: return 0 to accept, EM_FIX_LOGON_WAIT
     * to answer later (em_fix_session_logon_done), or another nonzero and
     * set *why (a static string) to refuse it with a Logout. */
    int (*logon)(void *ctx, const struct em_fix_msg *m, const char **why);
    /* An application message, in sequence (admin messages never come
     * here). m and its buffer are valid only during the call. */
    void (*app)(void *ctx, const struct em_fix_msg *m);
    /* The session is over: close the connection once what was sent is
     * written. Called once; nothing is sent afterwards. */
    void (*close)(void *ctx, const char *why);
};

struct em_fix_session_config {
    const char *comp_id;   /* our CompID: the peer's TargetCompID */
    const char *store_dir; /* where fix_store.h keeps each session */
    uint64_t logon_timeout_ns;
    uint64_t logout_timeout_ns;
    uint32_t max_heartbtint; /* seconds; a Logon above it is refused */
};

struct em_fix_session {
    enum em_fix_state state;
    const struct em_fix_session_config *cfg;
    const struct em_fix_session_ops *ops;
    void *ctx;
    char their_id[EM_FIX_COMPID_MAX + 1];
    struct em_fix_store store;
    bool store_open;
    bool in_dirty;  /* next_in changed, not yet written */
    uint64_t hb_ns; /* HeartBtInt, 0: none */
    uint64_t last_rx_ns, last_tx_ns, started_ns, logout_ns;
    uint64_t testreq_ns; /* 0: no TestRequest outstanding */
    uint64_t testreq_count;
    uint64_t resend_asked; /* a ResendRequest is outstanding up to here */
    uint64_t now_ns;       /* time of the input or tick being handled */
    /* the Logon being answered: HeartBtInt, ResetSeqNumFlag, MsgSeqNum */
    uint64_t logon_hb, logon_seq;
    bool logon_reset;
    /* the message being built by em_fix_session_begin */
    struct em_fix_out out;
    char out_buf[EM_FIX_MSG_MAX];
    char resend_buf[EM_FIX_MSG_MAX];
};

/* Start a session in AWAIT_LOGON at now_ns (wall clock, ns since the
 * epoch: it is also the SendingTime). cfg, ops and ctx must outlive the
 * session. Never fails. */
void em_fix_session_init(struct em_fix_session *s, const struct em_fix_session_config *cfg,
                         const struct em_fix_session_ops *ops, void *ctx, uint64_t now_ns);

/* Handle the bytes buf[0, len) received at now_ns: every whole message
 * is handled in order; garbled ones are dropped (fix_codec.h). Returns
 * the number of bytes consumed; the caller keeps the rest and passes it
 * again with more. A caller whose unconsumed rest reaches EM_FIX_MSG_MAX
 * never happens (framing drops such bytes as garbled). */
size_t em_fix_session_input(struct em_fix_session *s, const char *buf, size_t len, uint64_t now_ns);

/* The answer to a Logon left waiting (EM_FIX_LOGON_WAIT): refused NULL
 * accepts it (Logon sent, ACTIVE: the caller then hands the input it kept
 * to em_fix_session_input again), else Logout(5) with Text(58) = refused
 * (a static string) and ops.close. No-op in any other state. */
void em_fix_session_logon_done(struct em_fix_session *s, const char *refused, uint64_t now_ns);

/* Timers: Heartbeat when nothing was sent for HeartBtInt, TestRequest
 * when nothing was received for HeartBtInt plus a fifth, Logout and close
 * when that TestRequest is unanswered for another HeartBtInt; the logon
 * and logout timeouts. Call it at least every few hundred milliseconds. */
void em_fix_session_tick(struct em_fix_session *s, uint64_t now_ns);

/* Build an outbound application message: em_fix_session_begin writes the
 * header (MsgType, CompIDs, the next MsgSeqNum, SendingTime) and returns
 * the builder to add body fields to; em_fix_session_send finishes, stores
 * and sends it. Only in ACTIVE; one message at a time. Returns 0,
 * CORE_ESTATE (not ACTIVE), CORE_ETOOBIG (did not fit), CORE_EIO (store). */
struct em_fix_out *em_fix_session_begin(struct em_fix_session *s, const char *msgtype);
int em_fix_session_send(struct em_fix_session *s);

/* Session-level Reject(3) of the inbound message m: RefSeqNum(45) from
 * m, RefTagID(371) = tag when nonzero, RefMsgType(372), the
 * SessionRejectReason(373) and Text(58). */
void em_fix_session_reject(struct em_fix_session *s, const struct em_fix_msg *m, int reason,
                           uint32_t tag, const char *text);

/* Send Logout(5) with Text(58) = text and wait for the peer's (or the
 * logout timeout) before closing. */
void em_fix_session_logout(struct em_fix_session *s, const char *text);

/* The connection is gone (or the gateway stops): close the store. The
 * session is CLOSED; ops.close is not called. */
void em_fix_session_end(struct em_fix_session *s);

#endif
