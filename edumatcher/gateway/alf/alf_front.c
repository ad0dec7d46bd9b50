/* The ALF front end (alf_front.h). */
#include "edumatcher/gateway/alf/alf_front.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/error.h"
#include "edumatcher/gateway/alf/alf.h"
#include "edumatcher/gateway/gateway_session.h"

struct alf_conn {
    struct core_conn *conn;
    struct em_gw *g;
    struct em_gw_session *s;
    bool discarding;      /* inside an overlong line (ALF §1) */
    struct core_buf held; /* lines received while logging in */
};

/* ---- the session's view of the connection ---- */

static void deliver(void *ctx, const struct em_msg *ev)
{
    struct alf_conn *a = ctx;
    char line[EM_ALF_FORMAT_MAX + 1];
    size_t n = em_alf_format(ev, line);
    line[n++] = '\n';
    core_buf_append(core_conn_out(a->conn), line, n);
}

static void flush(void *ctx)
{
    struct alf_conn *a = ctx;
    core_conn_flush(a->conn);
}

static void conn_close(void *ctx, bool after_reply)
{
    struct alf_conn *a = ctx;
    if (after_reply)
        core_conn_close_after_reply(a->conn);
    else
        core_conn_close(a->conn);
}

static bool closing(void *ctx)
{
    struct alf_conn *a = ctx;
    return core_conn_closing(a->conn);
}

static void live(void *ctx);

static const struct em_gw_front alf_front = {
    .deliver = deliver, .flush = flush, .live = live, .close = conn_close, .closing = closing};

/* ---- lines from the trader ---- */

/* ---- SYMBOLS, answered here from the gateway's market table ---- */

/* The best level of a side `px:shown:orders,...` as px and shown ("-", "0"
 * when the side is empty). */
static void best_level(const char *levels, char *px, char *qty)
{
    const char *c1 = strchr(levels, ':');
    if (!c1 || c1 == levels || (size_t)(c1 - levels) >= EM_MKT_STR) {
        strcpy(px, "-");
        strcpy(qty, "0");
        return;
    }
    memcpy(px, levels, (size_t)(c1 - levels));
    px[c1 - levels] = '\0';
    const char *c2 = strchr(c1 + 1, ':');
    size_t ql = c2 ? (size_t)(c2 - (c1 + 1)) : 0;
    if (!ql || ql >= EM_MKT_STR)
        ql = 0;
    memcpy(qty, c1 + 1, ql);
    qty[ql] = '\0';
    if (!ql)
        strcpy(qty, "0");
}

static void write_symbol(struct alf_conn *a, const struct em_mkt_sym *m)
{
    char bid[EM_MKT_STR], bidqty[EM_MKT_STR], ask[EM_MKT_STR], askqty[EM_MKT_STR];
    best_level(m->bids, bid, bidqty);
    best_level(m->asks, ask, askqty);
    char line[EM_ALF_FORMAT_MAX];
    int n = snprintf(line, sizeof line,
                     "SYMBOL sym=%s tick=%s lot=%s decimals=%s band=%s cb_band=%s phase=%s "
                     "bid=%s bidqty=%s ask=%s askqty=%s last=%s\n",
                     m->sym, m->tick, m->lot, m->decimals, m->band, m->cb_band, m->phase, bid,
                     bidqty, ask, askqty, m->last);
    if (n > 0 && (size_t)n < sizeof line)
        core_buf_append(core_conn_out(a->conn), line, (size_t)n);
}

/* docs/alf.md §9: one SYMBOL line per symbol asked for, then ENDSYMBOLS;
 * an unknown symbol is a REJECT. Local: the engine is not asked. */
static void answer_symbols(struct alf_conn *a, int code, const char *sym)
{
    if (!em_gw_session_live(a->s))
        code = EM_REJ_NOT_LOGGED_IN;
    const struct em_mkt *mkt = em_gw_market(a->g);
    if (!code && sym[0] && !em_mkt_find(mkt, sym))
        code = EM_REJ_UNKNOWN_SYMBOL;
    if (code) {
        em_gw_session_refuse(a->s, code);
        return;
    }
    em_gw_session_answered(a->s);
    unsigned count = 0;
    for (unsigned i = 0; i < mkt->n; i++) {
        if (sym[0] && strcmp(mkt->s[i].sym, sym) != 0)
            continue;
        write_symbol(a, &mkt->s[i]);
        count++;
    }
    char end[32];
    int n = snprintf(end, sizeof end, "ENDSYMBOLS n=%u\n", count);
    core_buf_append(core_conn_out(a->conn), end, (size_t)n);
    core_conn_flush(a->conn);
}

/* One line, without its terminator (ALF §1). */
static void handle_line(struct alf_conn *a, const char *line, size_t n)
{
    if (n && line[n - 1] == '\r')
        n--;
    size_t i = 0;
    while (i < n && line[i] == ' ')
        i++;
    if (i == n)
        return; /* empty lines are ignored */
    if (n > EM_ALF_LINE_MAX) {
        em_gw_session_refuse(a->s, EM_REJ_LINE_TOO_LONG);
        return;
    }
    char sym[EM_SYM_MAX + 1];
    int q = em_alf_parse_symbols(line, n, sym);
    if (q >= 0) {
        answer_symbols(a, q, sym);
        return;
    }
    struct em_msg m;
    int code = em_alf_parse(line, n, &m);
    em_gw_session_input(a->s, &m, code);
}

/* Split data into lines and handle them, stopping when a LOGIN starts
 * (what follows is held until the engine answers). Returns what was
 * consumed. */
static size_t handle_lines(struct alf_conn *a, char *data, size_t len)
{
    size_t pos = 0;
    while (pos < len && !core_conn_closing(a->conn) && !em_gw_session_logging_in(a->s)) {
        char *nl = memchr(data + pos, '\n', len - pos);
        if (!nl) {
            /* ALF §1: a line over the limit is discarded up to its \n. */
            if (a->discarding || len - pos > EM_ALF_LINE_MAX + 1) {
                a->discarding = true;
                return len;
            }
            return pos;
        }
        size_t n = (size_t)(nl - (data + pos));
        if (a->discarding) {
            a->discarding = false;
            em_gw_session_refuse(a->s, EM_REJ_LINE_TOO_LONG);
        } else {
            handle_line(a, data + pos, n);
        }
        pos += n + 1;
    }
    return pos;
}

/* Handle what was held while logging in (and any input after it, until
 * the held buffer is empty again). */
static void process_held(struct alf_conn *a)
{
    size_t used = handle_lines(a, a->held.data, a->held.len);
    memmove(a->held.data, a->held.data + used, a->held.len - used);
    a->held.len -= used;
}

static void live(void *ctx)
{
    struct alf_conn *a = ctx;
    if (a->held.len)
        process_held(a);
}

static bool hold(struct alf_conn *a, const char *data, size_t len)
{
    if (a->held.len + len > EM_ALF_HELD_MAX) {
        core_conn_close(a->conn);
        return false;
    }
    core_buf_append(&a->held, data, len);
    return true;
}

/* ---- core_server callbacks ---- */

static int on_open(struct core_conn *c, void *app)
{
    struct alf_conn *a = calloc(1, sizeof *a);
    if (!a)
        return CORE_ENOMEM;
    a->conn = c;
    a->g = app;
    a->s = em_gw_session_open(app, &alf_front, a);
    if (!a->s) {
        free(a);
        return CORE_ENOMEM;
    }
    core_conn_set_data(c, a);
    return 0;
}

static size_t on_data(struct core_conn *c, char *data, size_t len)
{
    struct alf_conn *a = core_conn_data(c);
    bool logging_in = em_gw_session_logging_in(a->s);
    if (logging_in || a->held.len) {
        if (hold(a, data, len) && !logging_in)
            process_held(a);
        return len;
    }
    size_t used = handle_lines(a, data, len);
    if (em_gw_session_logging_in(a->s) && used < len) {
        hold(a, data + used, len - used);
        return len;
    }
    return used;
}

static void on_close(struct core_conn *c)
{
    struct alf_conn *a = core_conn_data(c);
    em_gw_session_close(a->s);
    core_buf_free(&a->held);
    free(a);
}

const struct core_server_ops em_alf_front_ops = {
    .on_open = on_open, .on_data = on_data, .on_close = on_close};
