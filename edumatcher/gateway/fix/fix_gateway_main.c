/*
 * edumatcher-fix: the FIX 4.4 front door (docs/fix.md). A thin translator
 * from FIX application messages to the same engine messages (and trader
 * ids) the ALF gateway sends, and from the engine's events back to FIX.
 *
 *   trader --FIX/TCP--> fix_session --NewOrderSingle...--> NEW/CANCEL/... --order link--> engine
 *   trader <--FIX------ fix_session <--ExecutionReport... <--order link [gw][events]-- engine
 *
 * Two shared modules do the sessions' work: the FIX session layer
 * (fix_session.h: sequence numbers, heartbeats, resends, logout) and the
 * gateway session (gateway/gateway_session.h: the engine login, AUTH
 * against the tokens file, the rate limit, batching towards the engine,
 * cancel-on-disconnect), the same one the ALF gateway uses. This file owns
 * the connection, the order table that gives each ExecutionReport the
 * fields FIX wants and the engine events do not carry (Symbol, Side,
 * OrderQty, AvgPx, the FIX ClOrdID chain of cancels and replaces), and the
 * mapping itself.
 *
 * Connection states (functions making each transition):
 *
 *   FIX AWAIT_LOGON --Logon accepted by the gateway session: on_fix_logon--> LOGIN to the
 *                     engine; the Logon unanswered, what follows it unread (LOGON_PENDING)
 *   pending --LOGGEDIN from the engine: front_live--> Logon answered, LIVE (input read on)
 *   pending --REJECT LOGGED_IN_ELSEWHERE (the trader is logged in through another door,
 *             docs/alf.md C.9): front_live--> Logout with Text, no session
 *   LIVE --Logout / TestRequest timeout / error: on_fix_close--> connection closed
 *   any state after Logon --connection drops: on_close--> DISCONNECT to the engine
 *                                                        (cancel-on-disconnect, as ALF)
 *
 * Order table invariants:
 *  1. An entry exists for every order the engine may still report on for
 *     this session: from the NEW being forwarded until its last event
 *     (filled, canceled, rejected). It is keyed by the ALF cl, which is
 *     the order's first ClOrdID; later ClOrdIDs (OrderCancelReplaceRequest)
 *     are aliases to it.
 *  2. cum and notional (sum of px × qty of its fills, in the symbol's
 *     price units) give CumQty and AvgPx.
 *
 * Why one file of over 1,000 lines: the mapping in both directions
 * (on_new_order, on_cancel_or_replace, on_mass_cancel one way,
 * handle_event the other) reads and writes the same connection (struct
 * fconn: its FIX session, gateway session and order table) and the same
 * order entries under invariants 1-2; split, each half would need an
 * internal header exposing struct fconn and struct ford to the other. The
 * part that needs neither, the order table's hash map (omap_*), is the
 * clean first cut into its own file when this file grows again.
 */
#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/proc.h"
#include "core/uv_server.h"
#include "edumatcher/bus/curve.h"
#include "edumatcher/bus/zmq_bus.h"
#include "edumatcher/engine/engine.h" /* EM_OPS_GW */
#include "edumatcher/engine/msg.h"
#include "edumatcher/gateway/engine_link.h"
#include "edumatcher/gateway/fix/fix_session.h"
#include "edumatcher/gateway/gateway_session.h"
#include "edumatcher/monitor/health.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Custom tag: self-trade prevention of a NewOrderSingle (docs/fix.md). */
#define TAG_STP 7928

static char host[CORE_OPT_STRLEN] = "127.0.0.1";
static int64_t port = 9002;
static char comp_id[CORE_OPT_STRLEN] = "EDUMATCHER";
static char store_dir[CORE_OPT_STRLEN] = "fix-sessions";
static char engine_orders[CORE_OPT_STRLEN] = "unix:em-journal/orders.sock";
static char link_key[CORE_OPT_STRLEN] = "";
static char engine_pub[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9101";
static char curve_key[CORE_OPT_STRLEN] = "";
static char engine_key[CORE_OPT_STRLEN] = "";
static char monitor_key[CORE_OPT_STRLEN] = "";
static char health_ep[CORE_OPT_STRLEN] = "tcp://127.0.0.1:9102";
static char tokens_file[CORE_OPT_STRLEN] = "";
static char name_opt[CORE_OPT_STRLEN] = "fix";
static int64_t rate_limit = 10000;
static int64_t rate_burst = 1000;
static int64_t maxclients = 1000;
static int64_t max_heartbtint = 3600;
static int64_t logon_timeout_ms = 10000;
static int64_t logout_timeout_ms = 2000;
static int64_t output_limit = 16 << 20;
static int64_t beacon_ms = 1000;
static int64_t login_retry_ms = 100;
static int64_t resend_ms = 1000;
static char loglevel[CORE_OPT_STRLEN] = "notice";

static const struct core_option options[] = {
    {"host", CORE_OPT_STRING, host, 0, 0, NULL, CORE_OPT_IMMUTABLE, "address to listen on"},
    {"port", CORE_OPT_INT, &port, 0, 65535, NULL, CORE_OPT_IMMUTABLE,
     "FIX port (0: any free port, printed at start)"},
    {"comp-id", CORE_OPT_STRING, comp_id, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "our CompID: the traders' TargetCompID(56)"},
    {"store-dir", CORE_OPT_STRING, store_dir, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "directory of the sessions' sequence numbers and sent messages (created)"},
    {"engine-orders", CORE_OPT_STRING, engine_orders, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the engine's order link: unix:<path> or tcp://<host>:<port>"},
    {"link-key", CORE_OPT_STRING, link_key, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "a TCP order link's key file (the engine's <journal-dir>/link.key)"},
    {"engine-pub", CORE_OPT_STRING, engine_pub, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the engine's PUB endpoint"},
    EM_CURVE_CLIENT_OPTIONS(curve_key, engine_key, monitor_key, "--engine-pub"),
    {"health", CORE_OPT_STRING, health_ep, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "the monitor's health endpoint (\"\": no beacons)"},
    {"tokens-file", CORE_OPT_STRING, tokens_file, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "lines `<gw> <token>`: a gw listed must log on with Password(554) = its token"},
    {"name", CORE_OPT_STRING, name_opt, 0, 0, NULL, CORE_OPT_IMMUTABLE,
     "process name in health beacons"},
    {"rate-limit", CORE_OPT_INT, &rate_limit, 0, 100000000, NULL, 0,
     "application messages per second per session (0: no limit)"},
    {"rate-burst", CORE_OPT_INT, &rate_burst, 1, 100000000, NULL, 0, "token bucket size"},
    {"maxclients", CORE_OPT_INT, &maxclients, 1, 100000, NULL, 0, "connections at most"},
    {"max-heartbtint", CORE_OPT_INT, &max_heartbtint, 1, 86400, NULL, 0,
     "largest HeartBtInt(108) a Logon may ask for, seconds"},
    {"logon-timeout-ms", CORE_OPT_INT, &logon_timeout_ms, 10, 600000, NULL, 0,
     "close a connection that sends no Logon in time"},
    {"logout-timeout-ms", CORE_OPT_INT, &logout_timeout_ms, 10, 600000, NULL, 0,
     "close after our Logout when the peer does not answer"},
    {"output-limit", CORE_OPT_INT, &output_limit, 65536, 1 << 30, NULL, 0,
     "bytes queued for a trader that does not read before its session is closed"},
    {"beacon-ms", CORE_OPT_INT, &beacon_ms, 10, 60000, NULL, 0, "health beacon interval"},
    {"login-retry-ms", CORE_OPT_INT, &login_retry_ms, 10, 10000, NULL, 0,
     "re-send LOGIN to the engine until it answers"},
    {"resend-ms", CORE_OPT_INT, &resend_ms, 10, 600000, NULL, 0,
     "send orders again that the engine has not answered this long (an engine restart)"},
    {"loglevel", CORE_OPT_STRING, loglevel, 0, 0, NULL, 0, "debug|verbose|notice|warning"},
    {NULL, 0, NULL, 0, 0, NULL, 0, NULL},
};

/* ---- the order table of one session ---- */

struct ford {
    char key[EM_CL_MAX + 1];    /* "" free; ALF cl, or an alias (a later ClOrdID) */
    bool alias, dead;           /* dead: a tombstone */
    char target[EM_CL_MAX + 1]; /* alias: the ALF cl it stands for */
    /* an order (alias false) */
    char clordid[EM_CL_MAX + 1]; /* its current FIX ClOrdID */
    char pending[EM_CL_MAX + 1]; /* ClOrdID of a cancel/replace in flight */
    char pending_type;           /* 'F', 'G', 0 */
    uint32_t pending_qty;        /* G: the new OrderQty */
    struct em_price pending_px;
    char sym[EM_SYM_MAX + 1];
    char side, ordtype, tif;
    bool acked;
    uint64_t oid;
    uint32_t qty;
    uint64_t cum;
    struct em_price px;
    unsigned __int128 notional; /* sum of fill mant × qty */
    uint8_t fill_dec;
};

struct omap {
    struct ford *slots;
    uint32_t cap, used; /* used counts tombstones too */
    uint32_t live;      /* entries that are not tombstones */
};

static uint32_t str_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static struct ford *omap_find(struct omap *m, const char *key)
{
    if (!m->cap)
        return NULL;
    for (uint32_t i = str_hash(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        struct ford *f = &m->slots[i];
        if (!f->key[0] && !f->dead)
            return NULL;
        if (!f->dead && strcmp(f->key, key) == 0)
            return f;
    }
}

/* Rehash into a table twice as large, or as large when tombstones (not
 * live entries) filled it, so a session's table stays proportional to
 * its open orders, not to every order it ever sent. */
static int omap_grow(struct omap *m)
{
    uint32_t cap = !m->cap ? 256 : m->live * 4 < m->cap ? m->cap : m->cap * 2;
    struct ford *n = calloc(cap, sizeof *n);
    if (!n)
        return CORE_ENOMEM;
    struct omap old = *m;
    m->slots = n;
    m->cap = cap;
    m->used = 0;
    for (uint32_t i = 0; i < old.cap; i++) {
        struct ford *f = &old.slots[i];
        if (!f->key[0] || f->dead)
            continue;
        uint32_t j = str_hash(f->key) & (cap - 1);
        while (n[j].key[0])
            j = (j + 1) & (cap - 1);
        n[j] = *f;
        m->used++;
    }
    free(old.slots);
    return 0;
}

/* A new entry for key (not present). Returns NULL when out of memory. The
 * table doubles when half full, so inserting allocates only then. */
static struct ford *omap_add(struct omap *m, const char *key)
{
    if ((m->used + 1) * 2 > m->cap && omap_grow(m) != 0)
        return NULL;
    uint32_t i = str_hash(key) & (m->cap - 1);
    while (m->slots[i].key[0] && !m->slots[i].dead)
        i = (i + 1) & (m->cap - 1);
    struct ford *f = &m->slots[i];
    if (!f->dead)
        m->used++;
    m->live++;
    memset(f, 0, sizeof *f);
    snprintf(f->key, sizeof f->key, "%s", key);
    return f;
}

static void omap_del(struct omap *m, struct ford *f)
{
    f->key[0] = '\0';
    f->dead = true;
    m->live--;
}

/* ---- connections ---- */

struct fconn {
    struct core_conn *conn;
    struct em_fix_session fs;
    struct em_gw_session *gs;
    char gw[EM_GW_MAX + 1];
    bool logged_on;     /* FIX Logon accepted: the engine knows of us */
    bool login_refused; /* the gateway session answered LOGIN with REJECT */
    struct omap orders;
    /* OrderMassCancelRequest in flight: answered at the engine's PONG */
    int mass_pending;
    char mass_clordid[EM_CL_MAX + 1];
    char mass_type;
    char mass_sym[EM_SYM_MAX + 1];
    uint64_t mass_count;
    int mass_rej; /* the REJECT the mass cancel got (EM_REJ_NONE: none) */
};

static struct {
    uv_loop_t *loop;
    void *zctx;
    struct core_server *srv;
    struct em_gw_link link;
    struct em_health health;
    uv_timer_t timer;
    uv_check_t flush_check;
    struct core_proc proc;
    struct em_fix_session_config cfg;
    struct em_gw *gw;
    uint64_t reports_out, fix_rejects;
} G;

static uint64_t wall_ns(void)
{
    return (uint64_t)core_wall_ms() * 1000000u;
}

/* A translated message to the engine through the gateway session, which
 * may answer it at once with a REJECT (RATE_LIMIT, ...). Only an ACTIVE
 * FIX session translates messages, and it is ACTIVE only once the engine
 * took the LOGIN (front_live): nothing waits here for the login. */
static void to_engine(struct fconn *f, const struct em_msg *m)
{
    em_gw_session_input(f->gs, m, 0);
}

/* ---- FIX output helpers ---- */

static void add_price(struct em_fix_out *o, uint32_t tag, struct em_price p)
{
    em_fix_add_price(o, tag, p.mant, p.dec);
}

static void send_report(struct fconn *f)
{
    if (em_fix_session_send(&f->fs) == 0)
        G.reports_out++;
}

/* ALF reject codes in words, for Text(58) (docs/fix.md). */
static const char *rej_words(int code)
{
    switch (code) {
    case EM_REJ_SYNTAX:
        return "SYNTAX: the order does not translate to a valid ALF message";
    case EM_REJ_MISSING_FIELD:
        return "MISSING_FIELD: a field the order type needs is missing";
    case EM_REJ_BAD_VALUE:
        return "BAD_VALUE: a value is malformed, not allowed for the order type, or off the "
               "symbol's tick or lot";
    case EM_REJ_UNKNOWN_SYMBOL:
        return "UNKNOWN_SYMBOL: the symbol is not listed";
    case EM_REJ_DUPLICATE_ID:
        return "DUPLICATE_ID: a live order already has this ClOrdID";
    case EM_REJ_UNKNOWN_ORDER:
        return "UNKNOWN_ORDER: no live order with this ClOrdID";
    case EM_REJ_PHASE:
        return "PHASE: not allowed in the symbol's trading phase";
    case EM_REJ_HALTED:
        return "HALTED: the symbol is halted";
    case EM_REJ_COLLAR:
        return "COLLAR: the price is outside the symbol's price band";
    case EM_REJ_AUTH:
        return "AUTH: not allowed for this session";
    case EM_REJ_RATE_LIMIT:
        return "RATE_LIMIT: too many messages per second";
    case EM_REJ_GATEWAY_DISABLED:
        return "GATEWAY_DISABLED: the operator disabled this trader";
    case EM_REJ_LOGGED_IN_ELSEWHERE:
        return "LOGGED_IN_ELSEWHERE: this trader has a session on another gateway of the exchange";
    default:
        return "rejected";
    }
}

static const char *why_words(int why)
{
    switch (why) {
    case EM_WHY_USER:
        return "canceled on request";
    case EM_WHY_IOC:
        return "IOC: the remainder after immediate matching";
    case EM_WHY_FOK:
        return "FOK: the whole quantity could not trade at once";
    case EM_WHY_MKT:
        return "market order remainder: nothing left to match";
    case EM_WHY_STP:
        return "self-trade prevention";
    case EM_WHY_MASS:
        return "mass cancel";
    case EM_WHY_DISCONNECT:
        return "cancel on disconnect";
    case EM_WHY_EXPIRED:
        return "day order expired at the close";
    case EM_WHY_REPLACE:
        return "replaced to a quantity at or below the filled quantity";
    default:
        return "canceled";
    }
}

static char ord_status(const struct ford *o, uint64_t leaves)
{
    if (leaves == 0)
        return o->cum >= o->qty ? '2' : '4';
    return o->cum ? '1' : '0';
}

/* The common part of an ExecutionReport about order o. */
static struct em_fix_out *er_begin(struct fconn *f, const struct ford *o, const char *clordid,
                                   const char *execid, char exec_type, char status, uint64_t leaves)
{
    struct em_fix_out *out = em_fix_session_begin(&f->fs, "8");
    char oid[24];
    snprintf(oid, sizeof oid, "%" PRIu64, o->oid);
    em_fix_add_cstr(out, EM_FIX_TAG_ORDERID, o->oid ? oid : "NONE");
    em_fix_add_cstr(out, EM_FIX_TAG_CLORDID, clordid);
    em_fix_add_cstr(out, EM_FIX_TAG_EXECID, execid);
    em_fix_add_char(out, EM_FIX_TAG_EXECTYPE, exec_type);
    em_fix_add_char(out, EM_FIX_TAG_ORDSTATUS, status);
    em_fix_add_cstr(out, EM_FIX_TAG_SYMBOL, o->sym);
    em_fix_add_char(out, EM_FIX_TAG_SIDE, o->side);
    em_fix_add_uint(out, EM_FIX_TAG_ORDERQTY, o->qty);
    em_fix_add_char(out, EM_FIX_TAG_ORDTYPE, o->ordtype);
    if (o->px.mant)
        add_price(out, EM_FIX_TAG_PRICE, o->px);
    em_fix_add_char(out, EM_FIX_TAG_TIMEINFORCE, o->tif);
    em_fix_add_uint(out, EM_FIX_TAG_LEAVESQTY, leaves);
    em_fix_add_uint(out, EM_FIX_TAG_CUMQTY, o->cum);
    if (o->cum) {
        /* AvgPx with four more decimals than the fills, rounded */
        int dec = o->fill_dec + 4;
        unsigned __int128 scaled = o->notional * 10000u;
        uint64_t avg = (uint64_t)((scaled + o->cum / 2) / o->cum);
        em_fix_add_price(out, EM_FIX_TAG_AVGPX, (int64_t)avg, dec);
    } else {
        em_fix_add_uint(out, EM_FIX_TAG_AVGPX, 0);
    }
    em_fix_add_time(out, EM_FIX_TAG_TRANSACTTIME, wall_ns());
    return out;
}

/* Reject of a NewOrderSingle (ExecType 8) before an entry exists or when
 * the engine refused it. */
static void reject_order(struct fconn *f, const struct ford *o, int code)
{
    char execid[40];
    snprintf(execid, sizeof execid, "J%" PRIu64, f->fs.store_open ? f->fs.store.next_out : 0);
    struct em_fix_out *out = er_begin(f, o, o->clordid, execid, '8', '8', 0);
    em_fix_add_uint(out, EM_FIX_TAG_ORDREJREASON,
                    code == EM_REJ_UNKNOWN_SYMBOL ? 1
                    : code == EM_REJ_DUPLICATE_ID ? 6
                                                  : 99);
    em_fix_add_cstr(out, EM_FIX_TAG_TEXT, rej_words(code));
    send_report(f);
    G.fix_rejects++;
}

static void cancel_reject(struct fconn *f, const char *clordid, const char *orig, char to,
                          const struct ford *o, int code)
{
    struct em_fix_out *out = em_fix_session_begin(&f->fs, "9");
    char oid[24] = "NONE";
    if (o && o->oid)
        snprintf(oid, sizeof oid, "%" PRIu64, o->oid);
    em_fix_add_cstr(out, EM_FIX_TAG_ORDERID, oid);
    em_fix_add_cstr(out, EM_FIX_TAG_CLORDID, clordid);
    em_fix_add_cstr(out, EM_FIX_TAG_ORIGCLORDID, orig);
    /* an unknown or finished order: Rejected; else its current status */
    em_fix_add_char(out, EM_FIX_TAG_ORDSTATUS, o ? ord_status(o, o->qty - o->cum) : '8');
    em_fix_add_char(out, EM_FIX_TAG_CXLREJRESPONSETO, to);
    em_fix_add_uint(out, EM_FIX_TAG_CXLREJREASON, code == EM_REJ_UNKNOWN_ORDER ? 1 : 99);
    em_fix_add_cstr(out, EM_FIX_TAG_TEXT, rej_words(code));
    send_report(f);
    G.fix_rejects++;
}

static void business_reject(struct fconn *f, const struct em_fix_msg *m, int reason,
                            const char *text)
{
    struct em_fix_out *out = em_fix_session_begin(&f->fs, "j");
    em_fix_add_uint(out, EM_FIX_TAG_REFSEQNUM, m->seq);
    em_fix_add_cstr(out, EM_FIX_TAG_REFMSGTYPE, m->type);
    em_fix_add_uint(out, EM_FIX_TAG_BUSINESSREJECTREASON, (uint64_t)reason);
    em_fix_add_cstr(out, EM_FIX_TAG_TEXT, text);
    send_report(f);
    G.fix_rejects++;
}

/* ---- FIX application messages -> engine ---- */

/* A ClOrdID usable as an ALF cl (1–32 of A-Z a-z 0-9 _ - .). */
static bool get_clordid(struct fconn *f, const struct em_fix_msg *m, uint32_t tag, char *out)
{
    const char *v;
    size_t n;
    if (!em_fix_get(m, tag, &v, &n)) {
        em_fix_session_reject(&f->fs, m, EM_FIX_RR_REQUIRED_TAG_MISSING, tag,
                              "required tag missing");
        return false;
    }
    if (!em_valid_cl(v, n)) {
        em_fix_session_reject(&f->fs, m, EM_FIX_RR_VALUE_OUT_OF_RANGE, tag,
                              "ClOrdID must be 1-32 of A-Z a-z 0-9 _ - .");
        return false;
    }
    memcpy(out, v, n);
    out[n] = '\0';
    return true;
}

/* FIX prices are numbers: "10.50" and "10.5" are the same, so trailing
 * zeros after the point are dropped before the engine checks the
 * symbol's decimals (docs/fix.md). */
static int get_price(const struct em_fix_msg *m, uint32_t tag, struct em_price *p)
{
    int64_t mant;
    int dec;
    int rc = em_fix_get_price(m, tag, &mant, &dec);
    if (rc)
        return rc;
    while (dec > 0 && mant % 10 == 0) {
        mant /= 10;
        dec--;
    }
    if (mant <= 0)
        return CORE_EINVAL;
    p->mant = mant;
    p->dec = (uint8_t)dec;
    return 0;
}

static bool get_qty(struct fconn *f, const struct em_fix_msg *m, uint32_t tag, bool required,
                    uint32_t *out)
{
    const char *v;
    size_t n;
    if (!em_fix_get(m, tag, &v, &n)) {
        if (required)
            em_fix_session_reject(&f->fs, m, EM_FIX_RR_REQUIRED_TAG_MISSING, tag,
                                  "required tag missing");
        return false;
    }
    /* a FIX Qty may be written "100" or "100.0": whole numbers only */
    struct em_price p;
    if (get_price(m, tag, &p) != 0 || p.dec != 0 || p.mant > EM_QTY_MAX) {
        em_fix_session_reject(&f->fs, m, EM_FIX_RR_INCORRECT_DATA_FORMAT, tag,
                              "quantity must be a whole number 1 to 1000000000");
        return false;
    }
    *out = (uint32_t)p.mant;
    return true;
}

static void on_new_order(struct fconn *f, const struct em_fix_msg *m)
{
    struct em_msg e = {.kind = EM_MSG_NEW};
    char clordid[EM_CL_MAX + 1];
    if (!get_clordid(f, m, EM_FIX_TAG_CLORDID, clordid))
        return;
    const char *v;
    size_t n;
    if (!em_fix_get(m, EM_FIX_TAG_SYMBOL, &v, &n)) {
        em_fix_session_reject(&f->fs, m, EM_FIX_RR_REQUIRED_TAG_MISSING, EM_FIX_TAG_SYMBOL,
                              "required tag missing");
        return;
    }
    char side = 0, ordtype = 0, tif = '0';
    int side_rc = em_fix_get_char(m, EM_FIX_TAG_SIDE, &side);
    int type_rc = em_fix_get_char(m, EM_FIX_TAG_ORDTYPE, &ordtype);
    if (side_rc == CORE_ENOTFOUND || type_rc == CORE_ENOTFOUND) {
        em_fix_session_reject(&f->fs, m, EM_FIX_RR_REQUIRED_TAG_MISSING,
                              side_rc ? EM_FIX_TAG_SIDE : EM_FIX_TAG_ORDTYPE,
                              "required tag missing");
        return;
    }
    uint32_t qty;
    if (!get_qty(f, m, EM_FIX_TAG_ORDERQTY, true, &qty))
        return;
    if (side_rc || (side != '1' && side != '2')) {
        em_fix_session_reject(&f->fs, m, EM_FIX_RR_VALUE_OUT_OF_RANGE, EM_FIX_TAG_SIDE,
                              "Side must be 1 (buy) or 2 (sell)");
        return;
    }
    if (type_rc || ordtype < '1' || ordtype > '4') {
        em_fix_session_reject(&f->fs, m, EM_FIX_RR_VALUE_OUT_OF_RANGE, EM_FIX_TAG_ORDTYPE,
                              "OrdType must be 1, 2, 3 or 4");
        return;
    }
    int rc = em_fix_get_char(m, EM_FIX_TAG_TIMEINFORCE, &tif);
    if ((rc && rc != CORE_ENOTFOUND) || !strchr("0134", tif)) {
        em_fix_session_reject(&f->fs, m, EM_FIX_RR_VALUE_OUT_OF_RANGE, EM_FIX_TAG_TIMEINFORCE,
                              "TimeInForce must be 0, 1, 3 or 4");
        return;
    }
    static const uint32_t price_tags[2] = {EM_FIX_TAG_PRICE, EM_FIX_TAG_STOPPX};
    struct em_price px[2] = {{0, 0}, {0, 0}};
    bool has[2] = {false, false};
    for (int i = 0; i < 2; i++) {
        rc = get_price(m, price_tags[i], &px[i]);
        if (rc == CORE_EINVAL) {
            em_fix_session_reject(&f->fs, m, EM_FIX_RR_INCORRECT_DATA_FORMAT, price_tags[i],
                                  "price must be a positive decimal number");
            return;
        }
        has[i] = rc == 0;
    }
    bool needs_px = ordtype == '2' || ordtype == '4', needs_stop = ordtype == '3' || ordtype == '4';
    if ((needs_px && !has[0]) || (needs_stop && !has[1])) {
        em_fix_session_reject(&f->fs, m, EM_FIX_RR_REQUIRED_TAG_MISSING,
                              needs_px && !has[0] ? EM_FIX_TAG_PRICE : EM_FIX_TAG_STOPPX,
                              "Price(44) or StopPx(99) required for this OrdType");
        return;
    }
    uint32_t peak = 0;
    bool has_peak = em_fix_get(m, EM_FIX_TAG_MAXFLOOR, &v, &n);
    if (has_peak && !get_qty(f, m, EM_FIX_TAG_MAXFLOOR, false, &peak))
        return;
    int stp = EM_STP_NONE;
    if (em_fix_get(m, TAG_STP, &v, &n)) {
        static const char *const names[] = {"CN", "CO", "CB", "DC"};
        for (int i = 0; i < 4; i++)
            if (n == 2 && memcmp(v, names[i], 2) == 0)
                stp = EM_STP_CN + i;
        if (stp == EM_STP_NONE) {
            em_fix_session_reject(&f->fs, m, EM_FIX_RR_VALUE_OUT_OF_RANGE, TAG_STP,
                                  "SelfTradePrevention(7928) must be CN, CO, CB or DC");
            return;
        }
    }
    struct ford tmp = {0};
    snprintf(tmp.clordid, sizeof tmp.clordid, "%s", clordid);
    em_fix_get(m, EM_FIX_TAG_SYMBOL, &v, &n);
    if (!em_valid_sym(v, n)) {
        snprintf(tmp.sym, sizeof tmp.sym, "%.*s", (int)(n > EM_SYM_MAX ? EM_SYM_MAX : n), v);
        tmp.side = side;
        tmp.ordtype = ordtype;
        tmp.tif = tif;
        tmp.qty = qty;
        reject_order(f, &tmp, EM_REJ_UNKNOWN_SYMBOL);
        return;
    }
    memcpy(e.sym, v, n);
    e.sym[n] = '\0';
    if (omap_find(&f->orders, clordid)) {
        tmp = *omap_find(&f->orders, clordid);
        tmp.oid = 0;
        snprintf(tmp.clordid, sizeof tmp.clordid, "%s", clordid);
        reject_order(f, &tmp, EM_REJ_DUPLICATE_ID);
        return;
    }
    strcpy(e.cl, clordid);
    e.side = side == '1' ? EM_SIDE_BUY : EM_SIDE_SELL;
    e.qty = qty;
    static const uint8_t otypes[4] = {EM_OTYPE_MKT, EM_OTYPE_LMT, EM_OTYPE_STP, EM_OTYPE_STL};
    e.ord_type = otypes[ordtype - '1'];
    static const uint8_t tifs[5] = {EM_TIF_DAY, EM_TIF_GTC, 0, EM_TIF_IOC, EM_TIF_FOK};
    e.tif = tifs[tif - '0'];
    e.present =
        EM_BIT(cl) | EM_BIT(sym) | EM_BIT(side) | EM_BIT(qty) | EM_BIT(ord_type) | EM_BIT(tif);
    if (has[0]) {
        e.px = px[0];
        e.present |= EM_BIT(px);
    }
    if (has[1]) {
        e.stop = px[1];
        e.present |= EM_BIT(stop);
    }
    if (has_peak) {
        e.peak = peak;
        e.present |= EM_BIT(peak);
    }
    if (stp) {
        e.stp = (uint8_t)stp;
        e.present |= EM_BIT(stp);
    }
    tmp.side = side;
    tmp.ordtype = ordtype;
    tmp.tif = tif;
    tmp.qty = qty;
    snprintf(tmp.sym, sizeof tmp.sym, "%s", e.sym);
    if (has[0])
        tmp.px = px[0];
    int code = em_msg_check(&e);
    if (code) {
        /* a field not allowed for the order type (Price with a market
         * order, MaxFloor with IOC, ...): the engine's own reason */
        reject_order(f, &tmp, code);
        return;
    }
    /* the entry first: the gateway session may answer at once */
    struct ford *o = omap_add(&f->orders, clordid);
    if (!o) {
        reject_order(f, &tmp, EM_REJ_RATE_LIMIT);
        return;
    }
    snprintf(tmp.key, sizeof tmp.key, "%s", clordid);
    *o = tmp;
    to_engine(f, &e);
}

/* The order a FIX OrigClOrdID names: its first ClOrdID or a later one. */
static struct ford *lookup(struct fconn *f, const char *clordid)
{
    struct ford *o = omap_find(&f->orders, clordid);
    if (o && o->alias)
        o = omap_find(&f->orders, o->target);
    return o;
}

static void on_cancel_or_replace(struct fconn *f, const struct em_fix_msg *m, bool replace)
{
    char clordid[EM_CL_MAX + 1], orig[EM_CL_MAX + 1];
    if (!get_clordid(f, m, EM_FIX_TAG_CLORDID, clordid) ||
        !get_clordid(f, m, EM_FIX_TAG_ORIGCLORDID, orig))
        return;
    char to = replace ? '2' : '1';
    struct ford *o = lookup(f, orig);
    if (!o) {
        cancel_reject(f, clordid, orig, to, NULL, EM_REJ_UNKNOWN_ORDER);
        return;
    }
    if (o->pending_type || strcmp(o->clordid, orig) != 0 ||
        (strcmp(clordid, o->key) != 0 && omap_find(&f->orders, clordid))) {
        /* one request at a time, against the current ClOrdID, with a new
         * ClOrdID */
        cancel_reject(f, clordid, orig, to, o, EM_REJ_DUPLICATE_ID);
        return;
    }
    struct em_msg e = {.kind = replace ? EM_MSG_REPLACE : EM_MSG_CANCEL, .present = EM_BIT(cl)};
    strcpy(e.cl, o->key);
    uint32_t qty = o->qty;
    struct em_price px = o->px;
    if (replace) {
        if (!get_qty(f, m, EM_FIX_TAG_ORDERQTY, true, &qty))
            return;
        int rc = get_price(m, EM_FIX_TAG_PRICE, &px);
        if (rc == CORE_EINVAL) {
            em_fix_session_reject(&f->fs, m, EM_FIX_RR_INCORRECT_DATA_FORMAT, EM_FIX_TAG_PRICE,
                                  "price must be a positive decimal number");
            return;
        }
        if (qty != o->qty) {
            e.qty = qty;
            e.present |= EM_BIT(qty);
        }
        if (rc == 0 && (px.mant != o->px.mant || px.dec != o->px.dec)) {
            e.px = px;
            e.present |= EM_BIT(px);
        }
        if (!(e.present & (EM_BIT(qty) | EM_BIT(px)))) {
            e.qty = qty; /* nothing changes: ALF still needs one of them */
            e.present |= EM_BIT(qty);
        }
    }
    /* pending first: the gateway session may refuse it at once */
    o->pending_type = replace ? 'G' : 'F';
    snprintf(o->pending, sizeof o->pending, "%s", clordid);
    o->pending_qty = qty;
    o->pending_px = px;
    to_engine(f, &e);
}

static void on_mass_cancel(struct fconn *f, const struct em_fix_msg *m)
{
    char clordid[EM_CL_MAX + 1];
    if (!get_clordid(f, m, EM_FIX_TAG_CLORDID, clordid))
        return;
    char type;
    if (em_fix_get_char(m, EM_FIX_TAG_MASSCANCELREQUESTTYPE, &type) != 0) {
        em_fix_session_reject(&f->fs, m, EM_FIX_RR_REQUIRED_TAG_MISSING,
                              EM_FIX_TAG_MASSCANCELREQUESTTYPE, "required tag missing");
        return;
    }
    struct em_msg e = {.kind = EM_MSG_MASSCANCEL};
    const char *v;
    size_t n = 0;
    bool ok = type == '7';
    if (type == '1' && em_fix_get(m, EM_FIX_TAG_SYMBOL, &v, &n) && em_valid_sym(v, n)) {
        memcpy(e.sym, v, n);
        e.sym[n] = '\0';
        e.present = EM_BIT(sym);
        ok = true;
    }
    if (!ok || f->mass_pending) {
        struct em_fix_out *out = em_fix_session_begin(&f->fs, "r");
        em_fix_add_cstr(out, EM_FIX_TAG_ORDERID, "NONE");
        em_fix_add_cstr(out, EM_FIX_TAG_CLORDID, clordid);
        em_fix_add_char(out, EM_FIX_TAG_MASSCANCELREQUESTTYPE, type);
        em_fix_add_char(out, EM_FIX_TAG_MASSCANCELRESPONSE, '0');
        /* 1: unknown security; 0: not supported (types other than 1, 7, or
         * one already in flight) */
        em_fix_add_char(out, EM_FIX_TAG_MASSCANCELREJECTREASON, type == '1' ? '1' : '0');
        em_fix_add_cstr(out, EM_FIX_TAG_TEXT,
                        type == '1'       ? "Symbol(55) missing or malformed"
                        : f->mass_pending ? "a mass cancel is already in flight"
                                          : "MassCancelRequestType must be 1 or 7");
        send_report(f);
        return;
    }
    /* the engine cancels in oid order and says nothing at the end: a PING
     * after it is answered once every CANCELED is out (docs/alf.md C.4).
     * Pending first: the session may refuse the request at once (its rate
     * limit), inside to_engine. */
    f->mass_pending = 1;
    f->mass_count = 0;
    f->mass_rej = EM_REJ_NONE;
    f->mass_type = type;
    snprintf(f->mass_clordid, sizeof f->mass_clordid, "%s", clordid);
    snprintf(f->mass_sym, sizeof f->mass_sym, "%s", e.sym);
    struct em_msg ping = {.kind = EM_MSG_PING};
    to_engine(f, &e);
    to_engine(f, &ping);
}

static void on_fix_app(void *ctx, const struct em_fix_msg *m)
{
    struct fconn *f = ctx;
    if (!strcmp(m->type, "D"))
        on_new_order(f, m);
    else if (!strcmp(m->type, "F"))
        on_cancel_or_replace(f, m, false);
    else if (!strcmp(m->type, "G"))
        on_cancel_or_replace(f, m, true);
    else if (!strcmp(m->type, "q"))
        on_mass_cancel(f, m);
    else
        business_reject(f, m, 3, "unsupported message type");
}

/* ---- engine events -> FIX ---- */

static void on_mass_done(struct fconn *f)
{
    struct em_fix_out *out = em_fix_session_begin(&f->fs, "r");
    em_fix_add_cstr(out, EM_FIX_TAG_ORDERID, "NONE");
    em_fix_add_cstr(out, EM_FIX_TAG_CLORDID, f->mass_clordid);
    em_fix_add_char(out, EM_FIX_TAG_MASSCANCELREQUESTTYPE, f->mass_type);
    if (f->mass_rej) {
        /* 1: unknown security; 99: other (such as the rate limit), named
         * in Text(58) */
        em_fix_add_char(out, EM_FIX_TAG_MASSCANCELRESPONSE, '0');
        em_fix_add_cstr(out, EM_FIX_TAG_MASSCANCELREJECTREASON,
                        f->mass_rej == EM_REJ_UNKNOWN_SYMBOL ? "1" : "99");
        em_fix_add_cstr(out, EM_FIX_TAG_TEXT, rej_words(f->mass_rej));
    } else {
        em_fix_add_char(out, EM_FIX_TAG_MASSCANCELRESPONSE, f->mass_type);
        em_fix_add_uint(out, EM_FIX_TAG_TOTALAFFECTEDORDERS, f->mass_count);
    }
    if (f->mass_type == '1')
        em_fix_add_cstr(out, EM_FIX_TAG_SYMBOL, f->mass_sym);
    send_report(f);
    f->mass_pending = 0;
}

static void finish_order(struct fconn *f, struct ford *o)
{
    if (strcmp(o->clordid, o->key) != 0) {
        struct ford *a = omap_find(&f->orders, o->clordid);
        if (a && a->alias)
            omap_del(&f->orders, a);
    }
    omap_del(&f->orders, o);
}

static void handle_event(struct fconn *f, const struct em_msg *ev)
{
    if (ev->kind == EM_MSG_LOGGEDIN)
        return; /* front_live */
    if (!f->logged_on) {
        if (ev->kind == EM_MSG_REJECT)
            f->login_refused = true; /* the answer to our LOGIN */
        return;
    }
    if (f->fs.state != EM_FIX_ACTIVE)
        return;
    if (ev->kind == EM_MSG_PONG) {
        if (f->mass_pending)
            on_mass_done(f);
        return;
    }
    struct ford *o = (ev->present & EM_BIT(cl)) ? omap_find(&f->orders, ev->cl) : NULL;
    if (o && o->alias)
        o = NULL;
    if (ev->kind == EM_MSG_REJECT) {
        if (!(ev->present & EM_BIT(cl))) {
            if (ev->rej == EM_REJ_LOGGED_IN_ELSEWHERE) {
                /* another door took the trader (after an engine restart):
                 * the gateway session closes the connection after this */
                em_fix_session_logout(&f->fs, rej_words(ev->rej));
                return;
            }
            /* the only request without cl the gateway sends is the mass
             * cancel (its PING is never refused) */
            if (f->mass_pending && !f->mass_rej)
                f->mass_rej = ev->rej;
            return;
        }
        if (!o)
            return;
        if (o->pending_type) {
            /* the engine refused the cancel or replace */
            char to = o->pending_type == 'G' ? '2' : '1';
            char pending[EM_CL_MAX + 1];
            strcpy(pending, o->pending);
            o->pending_type = 0;
            cancel_reject(f, pending, o->clordid, to, o, ev->rej);
        } else if (!o->acked) {
            reject_order(f, o, ev->rej);
            finish_order(f, o);
        }
        return;
    }
    if (!o)
        return;
    char execid[64];
    switch (ev->kind) {
    case EM_MSG_ACK:
        o->acked = true;
        o->oid = ev->oid;
        snprintf(execid, sizeof execid, "%" PRIu64 ".N", ev->oid);
        er_begin(f, o, o->clordid, execid, '0', '0', o->qty);
        send_report(f);
        return;
    case EM_MSG_TRIGGERED:
        snprintf(execid, sizeof execid, "%" PRIu64 ".T", ev->oid);
        er_begin(f, o, o->clordid, execid, 'L', ord_status(o, o->qty - o->cum), o->qty - o->cum);
        send_report(f);
        return;
    case EM_MSG_FILL: {
        o->cum = ev->cum;
        /* prices of one symbol always come with its decimals */
        o->fill_dec = ev->px.dec;
        o->notional += (unsigned __int128)(uint64_t)ev->px.mant * ev->qty;
        /* a DC self-trade cancel may have cut qty: qty = cum + leaves */
        o->qty = (uint32_t)(ev->cum + ev->leaves);
        snprintf(execid, sizeof execid, "%" PRIu64 ".F%" PRIu64, ev->oid, ev->tid);
        struct em_fix_out *out =
            er_begin(f, o, o->clordid, execid, 'F', ord_status(o, ev->leaves), ev->leaves);
        add_price(out, EM_FIX_TAG_LASTPX, ev->px);
        em_fix_add_uint(out, EM_FIX_TAG_LASTQTY, ev->qty);
        send_report(f);
        if (ev->leaves == 0)
            finish_order(f, o);
        return;
    }
    case EM_MSG_REPLACED: {
        if (o->pending_type != 'G')
            return;
        if (strcmp(o->clordid, o->key) != 0) {
            struct ford *a = omap_find(&f->orders, o->clordid);
            if (a && a->alias)
                omap_del(&f->orders, a);
        }
        char orig[EM_CL_MAX + 1];
        strcpy(orig, o->clordid);
        strcpy(o->clordid, o->pending);
        o->pending_type = 0;
        o->qty = (uint32_t)ev->qty;
        o->px = ev->px;
        char key[EM_CL_MAX + 1];
        strcpy(key, o->key);
        if (strcmp(o->clordid, key) != 0) {
            char newid[EM_CL_MAX + 1];
            strcpy(newid, o->clordid);
            struct ford *a = omap_add(&f->orders, newid);
            o = omap_find(&f->orders, key); /* the table may have grown */
            if (a) {
                a->alias = true;
                snprintf(a->target, sizeof a->target, "%s", key);
            }
        }
        snprintf(execid, sizeof execid, "%" PRIu64 ".R%" PRIu64, ev->oid,
                 f->fs.store_open ? f->fs.store.next_out : 0);
        struct em_fix_out *out =
            er_begin(f, o, o->clordid, execid, '5', ord_status(o, ev->leaves), ev->leaves);
        em_fix_add_cstr(out, EM_FIX_TAG_ORIGCLORDID, orig);
        send_report(f);
        return;
    }
    case EM_MSG_CANCELED: {
        /* a DC self-trade cancel takes part of the order only */
        bool whole = ev->qty == (uint64_t)(o->qty - o->cum);
        char clordid[EM_CL_MAX + 1], orig[EM_CL_MAX + 1] = "";
        strcpy(clordid, o->clordid);
        if (whole && o->pending_type &&
            (ev->why == EM_WHY_USER || (ev->why == EM_WHY_REPLACE && o->pending_type == 'G'))) {
            strcpy(orig, o->clordid);
            strcpy(clordid, o->pending);
            o->pending_type = 0;
        }
        if (f->mass_pending && ev->why == EM_WHY_MASS)
            f->mass_count++;
        uint64_t leaves = whole ? 0 : o->qty - o->cum - ev->qty;
        if (!whole)
            o->qty -= (uint32_t)ev->qty;
        if (whole)
            snprintf(execid, sizeof execid, "%" PRIu64 ".C", ev->oid);
        else
            snprintf(execid, sizeof execid, "%" PRIu64 ".D%" PRIu64, ev->oid,
                     f->fs.store_open ? f->fs.store.next_out : 0);
        /* canceled (4) or expired (C); a partial self-trade cut restates
         * the order (D) */
        char type = ev->why == EM_WHY_EXPIRED ? 'C' : '4';
        struct em_fix_out *out = er_begin(f, o, clordid, execid, whole ? type : 'D',
                                          whole ? type : ord_status(o, leaves), leaves);
        if (orig[0])
            em_fix_add_cstr(out, EM_FIX_TAG_ORIGCLORDID, orig);
        em_fix_add_cstr(out, EM_FIX_TAG_TEXT, why_words(ev->why));
        send_report(f);
        if (whole)
            finish_order(f, o);
        return;
    }
    default:
        return;
    }
}

/* ---- the gateway session's front end ---- */

static void front_deliver(void *ctx, const struct em_msg *ev)
{
    handle_event(ctx, ev);
}

static void front_flush(void *ctx)
{
    struct fconn *f = ctx;
    core_conn_flush(f->conn);
}

/* The engine answered the LOGIN: the FIX Logon waiting for it is
 * answered now (docs/fix.md: Logon only once the exchange took the
 * trader) and the input after it read on, or Logout with the reason. */
static void front_live(void *ctx)
{
    struct fconn *f = ctx;
    /* The Logon's answer may close the connection, and closing frees f
     * (on_close) at once when nothing is left to write; the connection
     * itself lives until libuv's close callback, and a closing one
     * ignores flush and redeliver (core/uv_server.h). */
    struct core_conn *conn = f->conn;
    if (!em_gw_session_live(f->gs)) {
        f->logged_on = false;
        em_fix_session_logon_done(&f->fs, rej_words(EM_REJ_LOGGED_IN_ELSEWHERE), wall_ns());
        core_conn_flush(conn);
        return;
    }
    em_fix_session_logon_done(&f->fs, NULL, wall_ns());
    core_conn_flush(conn);
    core_conn_redeliver(conn); /* what came after the Logon, unread until now */
}

static void front_close(void *ctx, bool after_reply)
{
    struct fconn *f = ctx;
    if (after_reply)
        core_conn_close_after_reply(f->conn);
    else
        core_conn_close(f->conn);
}

static bool front_closing(void *ctx)
{
    struct fconn *f = ctx;
    return core_conn_closing(f->conn);
}

static const struct em_gw_front front = {front_deliver, front_flush, front_live, front_close,
                                         front_closing};

static void on_flush_check(uv_check_t *h)
{
    (void)h;
    em_gw_link_flush(&G.link);
}

/* ---- the session layer's callbacks ---- */

static void on_fix_send(void *ctx, const char *buf, size_t len)
{
    struct fconn *f = ctx;
    core_buf_append(core_conn_out(f->conn), buf, len);
}

static int on_fix_logon(void *ctx, const struct em_fix_msg *m, const char **why)
{
    struct fconn *f = ctx;
    const char *v;
    size_t n;
    em_fix_get(m, EM_FIX_TAG_SENDERCOMPID, &v, &n);
    if (!em_valid_gw(v, n) || (n == strlen(EM_OPS_GW) && !memcmp(v, EM_OPS_GW, n))) {
        *why = "SenderCompID(49) must be a trader id: 1-16 of A-Z 0-9 _";
        return -1;
    }
    char gw[EM_GW_MAX + 1];
    memcpy(gw, v, n);
    gw[n] = '\0';
    const char *u;
    size_t un;
    if (em_fix_get(m, EM_FIX_TAG_USERNAME, &u, &un) && (un != n || memcmp(u, v, n) != 0)) {
        *why = "Username(553) must be the SenderCompID";
        return -1;
    }
    /* the gateway session checks the token (Password) and that the trader
     * has no other session here, as for an ALF LOGIN */
    struct em_msg login = {.kind = EM_MSG_LOGIN, .present = EM_BIT(gw)};
    memcpy(login.gw, gw, n + 1);
    if (em_fix_get(m, EM_FIX_TAG_PASSWORD, &u, &un)) {
        if (un > EM_TOKEN_MAX || !em_valid_token(u, un)) {
            *why = "wrong Password(554)";
            return -1;
        }
        memcpy(login.token, u, un);
        login.token[un] = '\0';
        login.present |= EM_BIT(token);
    }
    f->login_refused = false;
    em_gw_session_input(f->gs, &login, 0);
    if (f->login_refused || !em_gw_session_logging_in(f->gs)) {
        *why = "wrong Password(554), or this trader has a session on this gateway already";
        return -1;
    }
    memcpy(f->gw, gw, n + 1);
    f->logged_on = true;
    /* answered when the engine takes the LOGIN (front_live): it may refuse
     * a trader logged in through another door */
    return EM_FIX_LOGON_WAIT;
}

static void on_fix_close(void *ctx, const char *why)
{
    struct fconn *f = ctx;
    CORE_INFO("fix: session %s closed: %s", f->gw[0] ? f->gw : "(no logon)", why);
    core_conn_close_after_reply(f->conn);
}

static const struct em_fix_session_ops fix_ops = {on_fix_send, on_fix_logon, on_fix_app,
                                                  on_fix_close};

/* ---- core_server callbacks ---- */

static int on_open(struct core_conn *c, void *app)
{
    (void)app;
    struct fconn *f = calloc(1, sizeof *f);
    if (!f)
        return CORE_ENOMEM;
    f->conn = c;
    f->gs = em_gw_session_open(G.gw, &front, f);
    if (!f->gs) {
        free(f);
        return CORE_ENOMEM;
    }
    em_fix_session_init(&f->fs, &G.cfg, &fix_ops, f, wall_ns());
    core_conn_set_data(c, f);
    return 0;
}

static size_t on_data(struct core_conn *c, char *data, size_t len)
{
    struct fconn *f = core_conn_data(c);
    size_t used = em_fix_session_input(&f->fs, data, len, wall_ns());
    core_conn_flush(c);
    return used;
}

static void on_close(struct core_conn *c)
{
    struct fconn *f = core_conn_data(c);
    /* cancel-on-disconnect, as ALF (docs/alf.md C.3): the gateway
     * session sends DISCONNECT for a logged-in trader */
    em_gw_session_close(f->gs);
    em_fix_session_end(&f->fs);
    free(f->orders.slots);
    free(f);
}

/* The server keeps the list of connections (core_server_foreach): a tick
 * may close the connection it is given, nothing else. */
static void tick_conn(struct core_conn *c, void *arg)
{
    struct fconn *f = core_conn_data(c);
    if (!f || core_conn_closing(c))
        return;
    em_fix_session_tick(&f->fs, *(const uint64_t *)arg);
    core_conn_flush(c);
}

static void on_timer(uv_timer_t *t)
{
    (void)t;
    uint64_t now = wall_ns();
    core_server_foreach(G.srv, tick_conn, &now);
    em_gw_tick(G.gw); /* LOGIN re-sent until the engine answers */
}

/* ---- start-up ---- */

static void on_stop(struct core_proc *p, void *data)
{
    (void)p;
    (void)data;
    core_server_stop(G.srv); /* on_close sends each session's DISCONNECT */
    em_gw_link_close(&G.link);
    em_health_stop(&G.health);
    uv_close((uv_handle_t *)&G.timer, NULL);
    uv_close((uv_handle_t *)&G.flush_check, NULL);
}

int main(int argc, char **argv)
{
    int rc, code;
    if (core_proc_options("edumatcher-fix", 'F', options, loglevel, argc, argv, &code))
        return code;
    if (core_proc_adjust_open_files(&maxclients)) /* room for maxclients, as Redis */
        return 1;
    if (!em_valid_gw(comp_id, strlen(comp_id))) {
        fprintf(stderr, "edumatcher-fix: --comp-id must be 1-16 of A-Z 0-9 _\n");
        return 2;
    }
    struct em_gw_config gcfg = {.bus = &em_gw_link_bus,
                                .bus_ctx = &G.link,
                                .rate_limit = rate_limit,
                                .rate_burst = rate_burst,
                                .login_retry_ms = login_retry_ms,
                                .resend_ms = resend_ms};
    G.gw = em_gw_new(&gcfg);
    if (!G.gw)
        return 1;
    if (tokens_file[0]) {
        rc = em_gw_load_tokens(G.gw, tokens_file);
        if (rc) {
            CORE_WARN("fix: cannot load %s: %s", tokens_file, core_strerror(rc));
            return 1;
        }
    }
    if (mkdir(store_dir, 0700) != 0 && errno != EEXIST) {
        CORE_WARN("fix: cannot create %s", store_dir);
        return 1;
    }
    G.cfg.comp_id = comp_id;
    G.cfg.store_dir = store_dir;
    G.cfg.logon_timeout_ns = (uint64_t)logon_timeout_ms * 1000000u;
    G.cfg.logout_timeout_ns = (uint64_t)logout_timeout_ms * 1000000u;
    G.cfg.max_heartbtint = (uint32_t)max_heartbtint;

    G.loop = uv_default_loop();
    static struct em_curve_client keys;
    int crc = em_curve_client_setup("fix", curve_key, engine_key, monitor_key, &keys);
    if (crc)
        return crc == CORE_EINVAL ? 2 : 1;
    const struct em_curve_pair *curve = keys.engine, *health_curve = keys.monitor;
    if (em_bus_ctx_new(&G.zctx) != 0)
        return 1;
    struct em_gw_link_opts lo = {
        .orders = engine_orders, .key_file = link_key, .pub = engine_pub, .curve = curve};
    if (em_gw_link_open(&G.link, G.gw, G.loop, G.zctx, &lo) != 0)
        return 1;

    static const struct core_server_ops ops = {
        .on_open = on_open, .on_data = on_data, .on_close = on_close};
    /* a message is at most EM_FIX_MSG_MAX bytes: more unconsumed input is
     * a peer that does not speak FIX */
    struct core_server_limits lim = {.maxclients = maxclients,
                                     .query_buf_limit = 4 * EM_FIX_MSG_MAX,
                                     .output_buf_limit = output_limit,
                                     .idle_timeout_s = 0};
    if (core_server_new(&G.srv, G.loop, &ops, NULL, &lim, NULL) != 0)
        return 1;
    rc = core_server_listen(G.srv, host, (int)port);
    if (rc) {
        CORE_WARN("fix: cannot listen on %s:%d: %s", host, (int)port, core_strerror(rc));
        return 1;
    }

    em_health_init(&G.health, name_opt);
    struct core_metrics *mt = &G.health.metrics;
    struct em_gw_stats *st = em_gw_stats(G.gw);
    core_metrics_counter(mt, "msgs_in", &st->msgs_in);
    core_metrics_counter(mt, "forwarded", &st->forwarded);
    core_metrics_counter(mt, "events_in", &st->events_out);
    core_metrics_counter(mt, "reports_out", &G.reports_out);
    core_metrics_counter(mt, "rejects", &G.fix_rejects);
    core_metrics_counter(mt, "rate_limited", &st->rate_limited);
    core_metrics_counter(mt, "bus_full", &st->bus_full);
    /* the engine link's recovery (docs/alf.md I), as the ALF gateway's */
    core_metrics_counter(mt, "resent", &st->resent);
    core_metrics_counter(mt, "resend_requests", &st->resend_requests);
    core_metrics_counter(mt, "duplicates", &st->duplicates);
    core_metrics_counter(mt, "resyncs", &st->resyncs);
    core_metrics_counter(mt, "event_duplicates", &st->event_duplicates);
    core_metrics_counter(mt, "events_lost", &st->events_lost);
    core_metrics_counter(mt, "logins_refused", &st->logins_refused);
    core_metrics_gauge(mt, "sessions", &st->sessions);
    G.health.curve = health_curve;
    em_health_start_or_warn("fix", &G.health, G.loop, G.zctx, health_ep, (uint64_t)beacon_ms, NULL,
                            NULL);

    uv_timer_init(G.loop, &G.timer);
    uv_timer_start(&G.timer, on_timer, 100, 100);
    uv_check_init(G.loop, &G.flush_check);
    uv_check_start(&G.flush_check, on_flush_check);
    core_proc_signals_start(&G.proc, G.loop, "fix", on_stop, NULL);

    printf("edumatcher-fix %s:%d comp-id %s engine %s %s\n", host, core_server_port(G.srv), comp_id,
           engine_orders, engine_pub);
    fflush(stdout);
    uv_run(G.loop, UV_RUN_DEFAULT);
    em_bus_ctx_term(G.zctx);
    em_gw_link_free(&G.link);
    core_server_free(G.srv);
    uv_loop_close(G.loop);
    em_gw_free(G.gw);
    return 0;
}
