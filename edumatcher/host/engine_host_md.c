/*
 * The engine host's market data and queries (engine_host.h).
 *
 * Market data is between messages: a timer publishes, at most once per
 * symbol per --md-interval-ms and only when its book changed, a snapshot:
 *   MD sym=<s> seq=<n> epoch=<n> phase=<p> last=<px|-> lastqty=<n> volume=<n>
 *      trades=<n> tick=<px> lot=<n> decimals=<n> band=<pct|-> cb_band=<pct|->
 *      bids=<px>:<shown>:<orders>,... asks=...  (best --md-depth levels)
 * The symbol's rules ride along so a gateway can answer SYMBOLS (docs/alf.md)
 * from the stream alone; a rule change (SYMBOL restated) shows in the next
 * line published for the symbol.
 * seq counts the messages of one symbol's stream from 1, without gaps, in
 * one run of the process (epoch, its start time in ns since the epoch,
 * changes when the engine restarts): a subscriber that sees seq skip, or
 * the epoch change, has lost messages. A late joiner asks the query socket
 * for `book <SYM>`: the same line for the book now, with the seq of the
 * stream's last message, then applies the stream's messages above it
 * (em_host_query; the `trades <from>` query reads the trade log).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edumatcher/gateway/alf/alf.h"
#include "edumatcher/host/engine_host_internal.h"

/* Append `key=px:shown:orders,...` for one side's best levels. */
static int format_side(struct em_host *h, char *out, size_t cap, const char *key, const char *sym,
                       int side)
{
    struct em_depth_level lv[50];
    int n = em_engine_depth(h->e, sym, side, lv, h->cfg.md_depth);
    int len = snprintf(out, cap, " %s=", key);
    for (int i = 0; i < n && len > 0 && (size_t)len < cap; i++) {
        char px[32];
        px[em_alf_format_price(lv[i].px, px)] = '\0';
        len += snprintf(out + len, cap - (size_t)len, "%s%s:%" PRIu64 ":%u", i ? "," : "", px,
                        lv[i].shown, lv[i].orders);
    }
    return len;
}

/* Room for the publishing state of symbols 1..n. */
static bool syms_fit(struct em_host *h, uint32_t n)
{
    if (n < h->syms_cap)
        return true;
    uint32_t cap = h->syms_cap ? h->syms_cap : 64;
    while (cap <= n)
        cap *= 2;
    struct sym_pub *p = realloc(h->syms, cap * sizeof *p);
    if (!p)
        return false;
    memset(p + h->syms_cap, 0, (cap - h->syms_cap) * sizeof *p);
    h->syms = p;
    h->syms_cap = cap;
    return true;
}

/* Market data between messages: one snapshot per changed symbol per
 * interval (the engine's depth read costs O(orders in the levels read));
 * a symbol changed when the engine's md version moved. */
/* The MD line of symbol id with sequence number seq into line; returns
 * its length, or -1 if it does not fit or there is no such symbol. */
static int format_md(struct em_host *h, uint16_t id, uint64_t seq, char *line, size_t cap)
{
    struct em_symbol_md md;
    if (em_engine_symbol_md(h->e, id, &md) != 0)
        return -1;
    char px[32] = "";
    if (md.has_last)
        px[em_alf_format_price(md.last, px)] = '\0';
    char tick[32], band[32] = "-", cb_band[32] = "-";
    tick[em_alf_format_price(md.tick, tick)] = '\0';
    /* bands in percent with two decimals, as SYMBOL takes them (basis
     * points are hundredths of a percent) */
    if (md.band)
        band[em_alf_format_price((struct em_price){md.band, 2}, band)] = '\0';
    if (md.cb_band)
        cb_band[em_alf_format_price((struct em_price){md.cb_band, 2}, cb_band)] = '\0';
    int len = snprintf(line, cap,
                       "MD sym=%s seq=%" PRIu64 " epoch=%" PRIu64
                       " phase=%s last=%s lastqty=%u volume=%" PRIu64 " trades=%" PRIu64
                       " tick=%s lot=%u decimals=%u band=%s cb_band=%s",
                       md.name, seq, h->md_epoch, em_phase_name(md.phase), md.has_last ? px : "-",
                       md.last_qty, md.volume, md.trades, tick, md.lot, md.decimals, band, cb_band);
    if (len > 0 && (size_t)len < cap) {
        len += format_side(h, line + len, cap - (size_t)len, "bids", md.name, EM_SIDE_BUY);
        if ((size_t)len < cap)
            len += format_side(h, line + len, cap - (size_t)len, "asks", md.name, EM_SIDE_SELL);
    }
    return len > 0 && (size_t)len < cap ? len : -1;
}

void em_host_publish_md(struct em_host *h)
{
    uint32_t n = em_engine_nsymbols(h->e);
    if (h->failed || !syms_fit(h, n))
        return;
    for (uint32_t id = 1; id <= n; id++) {
        struct sym_pub *sp = &h->syms[id];
        struct em_symbol_md md;
        if (em_engine_symbol_md(h->e, (uint16_t)id, &md) != 0 || md.version == sp->version)
            continue;
        if (!sp->topic.len)
            em_bus_topic_set(&sp->topic, "md.", md.name, strlen(md.name));
        char line[4096];
        int len = format_md(h, (uint16_t)id, sp->md_seq + 1, line, sizeof line);
        if (len < 0)
            continue;
        h->cfg.bus->publish(h->cfg.bus_ctx, &sp->topic, line, (size_t)len);
        sp->md_seq++;
        sp->version = md.version;
        h->st.md_out++;
    }
}

/* ---- queries (REP, between messages) ---- */

size_t em_host_query(struct em_host *h, const char *topic, size_t tl, const void *payload,
                     size_t len, const struct em_bus_topic **reply, char *out, size_t cap)
{
    static const struct em_bus_topic trades_t = {6, "trades"}, book_t = {4, "book"},
                                     error_t = {5, "error"};
    unsigned long long nth = 0;
    h->st.queries++;
    char arg[64];
    size_t n = len < sizeof arg - 1 ? len : sizeof arg - 1;
    memcpy(arg, payload, n);
    arg[n] = '\0';
    unsigned long long from = 0;
    unsigned max = 1000;
    *reply = &error_t;
    if (tl == 6 && memcmp(topic, "trades", 6) == 0 && sscanf(arg, "%llu %u", &from, &max) >= 1) {
        unsigned got;
        long w = em_trade_log_read(&h->tlog, from, max, out, cap, &got);
        if (w >= 0) {
            *reply = &trades_t;
            return (size_t)w;
        }
        return (size_t)snprintf(out, cap, "trade log unreadable");
    }
    if (tl == 4 && memcmp(topic, "book", 4) == 0) {
        /* The book now, numbered as the stream's last message: every
         * message above it is newer (each is a whole snapshot). */
        uint16_t id = em_engine_symbol_id(h->e, arg);
        uint64_t seq = id && id < h->syms_cap ? h->syms[id].md_seq : 0;
        int w = id ? format_md(h, id, seq, out, cap) : -1;
        if (w >= 0) {
            *reply = &book_t;
            return (size_t)w;
        }
        return (size_t)snprintf(out, cap, "unknown symbol");
    }
    if (tl == 6 && memcmp(topic, "symbol", 6) == 0 && sscanf(arg, "%llu", &nth) == 1) {
        /* The nth symbol's book (definition order from 1): a gateway that
         * starts late walks 1, 2, ... until "unknown symbol" to learn every
         * symbol without knowing their names. */
        uint16_t id = nth >= 1 && nth <= em_engine_nsymbols(h->e) ? (uint16_t)nth : 0;
        uint64_t seq = id && id < h->syms_cap ? h->syms[id].md_seq : 0;
        int w = id ? format_md(h, id, seq, out, cap) : -1;
        if (w >= 0) {
            *reply = &book_t;
            return (size_t)w;
        }
        return (size_t)snprintf(out, cap, "unknown symbol");
    }
    return (size_t)snprintf(out, cap, "unknown query");
}
