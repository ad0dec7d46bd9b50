/*
 * The monitor's market view (invariants in market.h).
 */
#include "edumatcher/monitor/market.h"

#include "core/error.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void em_mkt_init(struct em_mkt *m, uint64_t bucket_ms)
{
    memset(m, 0, sizeof *m);
    m->bucket_ms = bucket_ms ? bucket_ms : 1000;
}

/* A price, symbol, phase or gateway id: nothing JSON or HTML would have
 * to escape. */
static bool safe_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-' || c == '_' || c == '+';
}

/* Copy value v[0..n) into out[cap] if it fits and is safe; empty allowed
 * only if allow_empty. */
static bool take_str(char *out, size_t cap, const char *v, size_t n, bool allow_empty)
{
    if (n >= cap || (n == 0 && !allow_empty))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!safe_char(v[i]))
            return false;
    memcpy(out, v, n);
    out[n] = '\0';
    return true;
}

static bool take_u64(uint64_t *out, const char *v, size_t n)
{
    if (n == 0 || n > 19)
        return false;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return false;
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    *out = x;
    return true;
}

/* `px:qty:orders,...` (possibly empty). */
static bool take_levels(char *out, size_t cap, const char *v, size_t n)
{
    if (n >= cap)
        return false;
    size_t i = 0;
    while (i < n) {
        size_t start = i;
        while (i < n && safe_char(v[i]) && v[i] != '+')
            i++;
        if (i == start || i == n || v[i] != ':')
            return false;
        for (int part = 0; part < 2; part++) {
            start = ++i;
            while (i < n && v[i] >= '0' && v[i] <= '9')
                i++;
            if (i == start || i - start > 19)
                return false;
            if (part == 0 && (i == n || v[i] != ':'))
                return false;
        }
        if (i < n && (v[i] != ',' || i + 1 == n))
            return false;
        if (i < n)
            i++;
    }
    memcpy(out, v, n);
    out[n] = '\0';
    return true;
}

/* Walk `WORD k=v k=v ...`: calls field(key, klen, val, vlen) for each
 * token; false on a token without '=' or an empty one. */
struct token {
    const char *k, *v;
    size_t kl, vl;
};

static int tokens(const char *line, size_t len, const char *word, struct token *t, int cap)
{
    size_t wl = strlen(word);
    if (len <= wl || memcmp(line, word, wl) != 0 || line[wl] != ' ')
        return -1;
    int n = 0;
    size_t i = wl + 1;
    while (i < len) {
        size_t start = i;
        while (i < len && line[i] != ' ')
            i++;
        const char *eq = memchr(line + start, '=', i - start);
        if (i == start || !eq || eq == line + start || n == cap)
            return -1;
        t[n].k = line + start;
        t[n].kl = (size_t)(eq - (line + start));
        t[n].v = eq + 1;
        t[n].vl = (size_t)(line + i - (eq + 1));
        n++;
        if (i < len)
            i++;
    }
    return n;
}

static const struct token *field(const struct token *t, int n, const char *key)
{
    size_t kl = strlen(key);
    for (int i = 0; i < n; i++)
        if (t[i].kl == kl && memcmp(t[i].k, key, kl) == 0)
            return &t[i];
    return NULL;
}

static struct em_mkt_sym *symbol(struct em_mkt *m, const char *sym, bool create)
{
    for (unsigned i = 0; i < m->n; i++)
        if (strcmp(m->s[i].sym, sym) == 0)
            return &m->s[i];
    if (!create || m->n == EM_MKT_SYMS)
        return NULL;
    struct em_mkt_sym *s = &m->s[m->n++];
    memset(s, 0, sizeof *s);
    strcpy(s->sym, sym);
    strcpy(s->phase, "-");
    strcpy(s->last, "-");
    return s;
}

/* An optional rule: its value when present and valid, "-" when absent.
 * False when present and not valid. */
static bool take_rule(char *out, const struct token *t)
{
    if (!t) {
        strcpy(out, "-");
        return true;
    }
    return take_str(out, EM_MKT_STR, t->v, t->vl, false);
}

const struct em_mkt_sym *em_mkt_find(const struct em_mkt *m, const char *sym)
{
    for (unsigned i = 0; i < m->n; i++)
        if (strcmp(m->s[i].sym, sym) == 0)
            return &m->s[i];
    return NULL;
}

int em_mkt_book(struct em_mkt *m, const char *line, size_t len, uint64_t now_ms)
{
    struct token t[24];
    int n = tokens(line, len, "MD", t, 24);
    if (n < 0) {
        m->rejected++;
        return CORE_EPROTO;
    }
    const struct token *sym = field(t, n, "sym"), *seq = field(t, n, "seq"),
                       *epoch = field(t, n, "epoch"), *phase = field(t, n, "phase"),
                       *last = field(t, n, "last"), *lq = field(t, n, "lastqty"),
                       *vol = field(t, n, "volume"), *trades = field(t, n, "trades"),
                       *bids = field(t, n, "bids"), *asks = field(t, n, "asks");
    struct em_mkt_sym b;
    char name[EM_MKT_STR];
    if (!sym || !seq || !epoch || !phase || !last || !lq || !vol || !trades || !bids || !asks ||
        !take_str(name, sizeof name, sym->v, sym->vl, false) ||
        !take_u64(&b.seq, seq->v, seq->vl) || !take_u64(&b.epoch, epoch->v, epoch->vl) ||
        !take_str(b.phase, sizeof b.phase, phase->v, phase->vl, false) ||
        !take_str(b.last, sizeof b.last, last->v, last->vl, false) ||
        !take_u64(&b.lastqty, lq->v, lq->vl) || !take_u64(&b.volume, vol->v, vol->vl) ||
        !take_u64(&b.trades, trades->v, trades->vl) ||
        !take_levels(b.bids, sizeof b.bids, bids->v, bids->vl) ||
        !take_levels(b.asks, sizeof b.asks, asks->v, asks->vl) ||
        !take_rule(b.tick, field(t, n, "tick")) || !take_rule(b.lot, field(t, n, "lot")) ||
        !take_rule(b.decimals, field(t, n, "decimals")) ||
        !take_rule(b.band, field(t, n, "band")) || !take_rule(b.cb_band, field(t, n, "cb_band"))) {
        m->rejected++;
        return CORE_EPROTO;
    }
    struct em_mkt_sym *s = symbol(m, name, true);
    if (!s) {
        m->rejected++;
        return CORE_ETOOBIG;
    }
    if (s->book_ms && s->epoch == b.epoch && b.seq <= s->seq)
        return CORE_EEXISTS; /* invariant 3 */
    s->seq = b.seq;
    s->epoch = b.epoch;
    s->volume = b.volume;
    s->trades = b.trades;
    s->lastqty = b.lastqty;
    s->book_ms = now_ms ? now_ms : 1;
    strcpy(s->phase, b.phase);
    strcpy(s->last, b.last);
    strcpy(s->bids, b.bids);
    strcpy(s->asks, b.asks);
    strcpy(s->tick, b.tick);
    strcpy(s->lot, b.lot);
    strcpy(s->decimals, b.decimals);
    strcpy(s->band, b.band);
    strcpy(s->cb_band, b.cb_band);
    m->books++;
    return 0;
}

int em_mkt_trade(struct em_mkt *m, const char *line, size_t len, uint64_t now_ms)
{
    struct token t[16];
    int n = tokens(line, len, "TRADE", t, 16);
    struct em_mkt_trade tr;
    char name[EM_MKT_STR];
    const struct token *tid = n >= 0 ? field(t, n, "tid") : NULL,
                       *sym = n >= 0 ? field(t, n, "sym") : NULL,
                       *px = n >= 0 ? field(t, n, "px") : NULL,
                       *qty = n >= 0 ? field(t, n, "qty") : NULL,
                       *buy = n >= 0 ? field(t, n, "buy") : NULL,
                       *sell = n >= 0 ? field(t, n, "sell") : NULL;
    char *end;
    if (!tid || !sym || !px || !qty || !buy || !sell || !take_u64(&tr.tid, tid->v, tid->vl) ||
        !take_str(name, sizeof name, sym->v, sym->vl, false) ||
        !take_str(tr.px, sizeof tr.px, px->v, px->vl, false) ||
        !take_u64(&tr.qty, qty->v, qty->vl) ||
        !take_str(tr.buy, sizeof tr.buy, buy->v, buy->vl, false) ||
        !take_str(tr.sell, sizeof tr.sell, sell->v, sell->vl, false)) {
        m->rejected++;
        return CORE_EPROTO;
    }
    double price = strtod(tr.px, &end);
    if (*end != '\0' || !isfinite(price)) {
        m->rejected++;
        return CORE_EPROTO;
    }
    struct em_mkt_sym *s = symbol(m, name, true);
    if (!s) {
        m->rejected++;
        return CORE_ETOOBIG;
    }
    if (s->tape_n && s->tape[(s->tape_head + EM_MKT_TAPE - 1) % EM_MKT_TAPE].tid >= tr.tid)
        return CORE_EEXISTS;
    tr.at_ms = now_ms;
    s->tape[s->tape_head] = tr;
    s->tape_head = (s->tape_head + 1) % EM_MKT_TAPE;
    if (s->tape_n < EM_MKT_TAPE)
        s->tape_n++;

    uint64_t bucket = now_ms - now_ms % m->bucket_ms;
    struct em_mkt_point *p =
        s->pt_n ? &s->pts[(s->pt_head + EM_MKT_POINTS - 1) % EM_MKT_POINTS] : NULL;
    if (!p || p->t_ms != bucket) {
        p = &s->pts[s->pt_head];
        s->pt_head = (s->pt_head + 1) % EM_MKT_POINTS;
        if (s->pt_n < EM_MKT_POINTS)
            s->pt_n++;
        *p = (struct em_mkt_point){bucket, price, price, price, 0};
    }
    p->last = price;
    if (price < p->low)
        p->low = price;
    if (price > p->high)
        p->high = price;
    p->volume += tr.qty;
    m->trades++;
    return 0;
}

static void put(struct core_buf *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct core_buf *out, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        core_buf_append(out, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* `px:qty:orders,...` (validated on input) as [["px",qty,orders],...]. */
static void levels_json(struct core_buf *out, const char *v)
{
    core_buf_append(out, "[", 1);
    bool first = true;
    while (*v) {
        const char *c1 = strchr(v, ':'), *c2 = strchr(c1 + 1, ':');
        const char *end = strchr(c2 + 1, ',');
        size_t tail = end ? (size_t)(end - c2 - 1) : strlen(c2 + 1);
        put(out, "%s[\"%.*s\",%.*s,%.*s]", first ? "" : ",", (int)(c1 - v), v, (int)(c2 - c1 - 1),
            c1 + 1, (int)tail, c2 + 1);
        first = false;
        v = end ? end + 1 : c2 + 1 + tail;
    }
    core_buf_append(out, "]", 1);
}

void em_mkt_json(const struct em_mkt *m, struct core_buf *out)
{
    put(out,
        "{\"books\":%" PRIu64 ",\"trades\":%" PRIu64 ",\"rejected\":%" PRIu64
        ",\"bucket_ms\":%" PRIu64 ",\"symbols\":[",
        m->books, m->trades, m->rejected, m->bucket_ms);
    for (unsigned i = 0; i < m->n; i++) {
        const struct em_mkt_sym *s = &m->s[i];
        put(out,
            "%s{\"sym\":\"%s\",\"phase\":\"%s\",\"seq\":%" PRIu64
            ",\"last\":\"%s\",\"lastqty\":%" PRIu64 ",\"volume\":%" PRIu64 ",\"trades\":%" PRIu64
            ",\"book_ms\":%" PRIu64 ",\"bids\":",
            i ? "," : "", s->sym, s->phase, s->seq, s->last, s->lastqty, s->volume, s->trades,
            s->book_ms);
        levels_json(out, s->bids);
        put(out, ",\"asks\":");
        levels_json(out, s->asks);
        put(out, ",\"tape\":[");
        for (unsigned k = 0; k < s->tape_n; k++) {
            const struct em_mkt_trade *t =
                &s->tape[(s->tape_head + EM_MKT_TAPE - 1 - k) % EM_MKT_TAPE];
            put(out,
                "%s{\"tid\":%" PRIu64 ",\"at_ms\":%" PRIu64 ",\"px\":\"%s\",\"qty\":%" PRIu64
                ",\"buy\":\"%s\",\"sell\":\"%s\"}",
                k ? "," : "", t->tid, t->at_ms, t->px, t->qty, t->buy, t->sell);
        }
        put(out, "],\"chart\":[");
        for (unsigned k = 0; k < s->pt_n; k++) {
            const struct em_mkt_point *p =
                &s->pts[(s->pt_head + EM_MKT_POINTS - s->pt_n + k) % EM_MKT_POINTS];
            put(out, "%s[%" PRIu64 ",%.10g,%.10g,%.10g,%" PRIu64 "]", k ? "," : "", p->t_ms,
                p->last, p->low, p->high, p->volume);
        }
        put(out, "]}");
    }
    put(out, "]}");
}
