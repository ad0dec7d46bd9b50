/*
 * Clearing state: the trade parser, accounts in an open-addressing table
 * keyed by (gw, sym), and the JSON rendering (invariants in
 * clearing_book.h).
 */
#include "edumatcher/clearing/clearing_book.h"

#include "core/error.h"
#include "core/hash.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ---- parser ---- */

static bool name_ok(const char *v, size_t n, size_t max, bool sym)
{
    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = v[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || (sym ? c == '.' : c == '_');
        if (!ok)
            return false;
    }
    return true;
}

static bool parse_u(const char *v, size_t n, uint64_t max, uint64_t *out)
{
    if (n == 0 || n > 18)
        return false;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return false;
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    if (x > max)
        return false;
    *out = x;
    return true;
}

/* ALF price form (docs/alf.md A.2): D+ or D+.D+, at most 18 digits, > 0. */
static bool parse_px(const char *v, size_t n, int64_t *mant, unsigned *dec)
{
    const char *dot = memchr(v, '.', n);
    size_t ip = dot ? (size_t)(dot - v) : n;
    size_t fp = dot ? n - ip - 1 : 0;
    if (ip == 0 || (dot && fp == 0) || ip + fp > 18)
        return false;
    uint64_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (v + i == dot)
            continue;
        if (v[i] < '0' || v[i] > '9')
            return false;
        m = m * 10 + (uint64_t)(v[i] - '0');
    }
    if (m == 0)
        return false;
    *mant = (int64_t)m;
    *dec = (unsigned)fp;
    return true;
}

int em_trade_parse(const char *s, size_t len, struct em_trade *t)
{
    memset(t, 0, sizeof *t);
    if (len < 6 || memcmp(s, "TRADE ", 6) != 0)
        return CORE_EPROTO;
    enum { TID = 1, SYM = 2, PX = 4, QTY = 8, BUY = 16, SELL = 32, BOID = 64, SOID = 128 };
    unsigned seen = 0;
    size_t i = 6;
    while (i < len) {
        size_t st = i;
        while (i < len && s[i] != ' ')
            i++;
        const char *tok = s + st;
        size_t tl = i - st;
        if (i < len)
            i++;
        if (tl == 0)
            continue; /* several spaces, as ALF allows */
        const char *eq = memchr(tok, '=', tl);
        if (!eq)
            return CORE_EPROTO;
        size_t kl = (size_t)(eq - tok);
        const char *v = eq + 1;
        size_t vl = tl - kl - 1;
        unsigned bit;
        bool ok;
        if (kl == 3 && memcmp(tok, "tid", 3) == 0) {
            bit = TID;
            ok = parse_u(v, vl, UINT64_MAX, &t->tid) && t->tid > 0;
        } else if (kl == 3 && memcmp(tok, "sym", 3) == 0) {
            bit = SYM;
            ok = name_ok(v, vl, 12, true);
            if (ok)
                memcpy(t->sym, v, vl);
        } else if (kl == 2 && memcmp(tok, "px", 2) == 0) {
            bit = PX;
            ok = parse_px(v, vl, &t->px, &t->dec);
        } else if (kl == 3 && memcmp(tok, "qty", 3) == 0) {
            uint64_t q = 0;
            bit = QTY;
            ok = parse_u(v, vl, 1000000000, &q) && q > 0;
            t->qty = (int64_t)q;
        } else if (kl == 3 && memcmp(tok, "buy", 3) == 0) {
            bit = BUY;
            ok = name_ok(v, vl, 16, false);
            if (ok)
                memcpy(t->buy, v, vl);
        } else if (kl == 4 && memcmp(tok, "sell", 4) == 0) {
            bit = SELL;
            ok = name_ok(v, vl, 16, false);
            if (ok)
                memcpy(t->sell, v, vl);
        } else if (kl == 7 && memcmp(tok, "buy_oid", 7) == 0) {
            bit = BOID;
            ok = parse_u(v, vl, UINT64_MAX, &t->buy_oid);
        } else if (kl == 8 && memcmp(tok, "sell_oid", 8) == 0) {
            bit = SOID;
            ok = parse_u(v, vl, UINT64_MAX, &t->sell_oid);
        } else {
            return CORE_EPROTO;
        }
        if (!ok || (seen & bit))
            return CORE_EPROTO;
        seen |= bit;
    }
    unsigned need = TID | SYM | PX | QTY | BUY | SELL;
    return (seen & need) == need ? 0 : CORE_EPROTO;
}

/* ---- accounts ---- */

void em_clearing_init(struct em_clearing *c)
{
    memset(c, 0, sizeof *c);
}

static uint32_t slot_of(const char *gw, const char *sym)
{
    char key[2 * EM_CLR_NAME];
    size_t a = strlen(gw), b = strlen(sym);
    memcpy(key, gw, a);
    key[a] = ' ';
    memcpy(key + a + 1, sym, b);
    return core_fnv1a32(key, a + 1 + b) & (EM_CLR_ACCOUNTS - 1);
}

/* Find (gw, sym), or the empty slot where it would go. */
static struct em_clr_account *lookup(struct em_clearing *c, const char *gw, const char *sym)
{
    uint32_t i = slot_of(gw, sym);
    for (unsigned n = 0; n < EM_CLR_ACCOUNTS; n++, i = (i + 1) & (EM_CLR_ACCOUNTS - 1)) {
        struct em_clr_account *a = &c->acct[i];
        if (!a->used || (strcmp(a->gw, gw) == 0 && strcmp(a->sym, sym) == 0))
            return a;
    }
    return NULL;
}

const struct em_clr_account *em_clearing_find(const struct em_clearing *c, const char *gw,
                                              const char *sym)
{
    const struct em_clr_account *a = lookup((struct em_clearing *)c, gw, sym);
    return a && a->used ? a : NULL;
}

/* The decimals of a symbol, from any of its accounts (-1: none yet). */
static int sym_decimals(struct em_clearing *c, const struct em_trade *t)
{
    const struct em_clr_account *a = em_clearing_find(c, t->buy, t->sym);
    if (!a)
        a = em_clearing_find(c, t->sell, t->sym);
    if (a)
        return (int)a->dec;
    /* Any other account of the symbol: a linear scan, only on the first
     * trade of a new (gw, sym) pair. */
    for (unsigned i = 0; i < EM_CLR_ACCOUNTS; i++)
        if (c->acct[i].used && strcmp(c->acct[i].sym, t->sym) == 0)
            return (int)c->acct[i].dec;
    return -1;
}

static void claim(struct em_clearing *c, struct em_clr_account *a, const char *gw,
                  const struct em_trade *t)
{
    memset(a, 0, sizeof *a);
    a->used = true;
    strcpy(a->gw, gw);
    strcpy(a->sym, t->sym);
    a->dec = t->dec;
    c->naccounts++;
}

int em_clearing_apply(struct em_clearing *c, const struct em_trade *t)
{
    if (t->tid <= c->last_tid) {
        c->duplicates++;
        return CORE_EEXISTS;
    }
    int dec = sym_decimals(c, t);
    if (dec >= 0 && (unsigned)dec != t->dec) {
        c->refused++;
        return CORE_EINVAL;
    }
    /* Claim the buyer's account before looking up the seller's: two new
     * keys may probe to the same empty slot. Keep a quarter of the table
     * free so probes stay short. */
    unsigned limit = EM_CLR_ACCOUNTS * 3 / 4;
    struct em_clr_account *b = lookup(c, t->buy, t->sym);
    bool b_new = b && !b->used;
    if (!b || (b_new && c->naccounts + 1 > limit)) {
        c->refused++;
        return CORE_ETOOBIG;
    }
    if (b_new)
        claim(c, b, t->buy, t);
    struct em_clr_account *s = lookup(c, t->sell, t->sym);
    if (!s || (!s->used && c->naccounts + 1 > limit)) {
        if (b_new) { /* nothing was inserted after b: undoing is safe */
            b->used = false;
            c->naccounts--;
        }
        c->refused++;
        return CORE_ETOOBIG;
    }
    if (!s->used)
        claim(c, s, t->sell, t);
    __int128 value = (__int128)t->px * t->qty;
    b->position += t->qty;
    b->bought += t->qty;
    b->cash -= value;
    b->trades++;
    s->position -= t->qty;
    s->sold += t->qty;
    s->cash += value;
    if (s != b)
        s->trades++;
    c->last_tid = t->tid;
    c->trades++;
    return 0;
}

void em_clr_format_amount(__int128 v, unsigned dec, char *out, size_t outlen)
{
    char digits[64];
    int n = 0;
    bool neg = v < 0;
    unsigned __int128 u = neg ? (unsigned __int128)(-(v + 1)) + 1 : (unsigned __int128)v;
    do {
        digits[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u && n < 60);
    while (n <= (int)dec)
        digits[n++] = '0';
    size_t o = 0;
    if (neg && o + 1 < outlen)
        out[o++] = '-';
    for (int i = n - 1; i >= 0 && o + 1 < outlen; i--) {
        out[o++] = digits[i];
        if (i == (int)dec && dec > 0 && o + 1 < outlen)
            out[o++] = '.';
    }
    out[o] = '\0';
}

static int cmp_acct(const void *x, const void *y)
{
    const struct em_clr_account *a = *(const struct em_clr_account *const *)x;
    const struct em_clr_account *b = *(const struct em_clr_account *const *)y;
    int r = strcmp(a->gw, b->gw);
    return r ? r : strcmp(a->sym, b->sym);
}

void em_clearing_json(const struct em_clearing *c, const char *gw, const char *sym,
                      struct core_http_response *res)
{
    /* Sorted output for stable answers; a query is rare, so sort a list of
     * pointers per request. */
    const struct em_clr_account **list = malloc(EM_CLR_ACCOUNTS * sizeof *list);
    if (!list) {
        res->body.oom = true;
        return;
    }
    size_t n = 0;
    for (unsigned i = 0; i < EM_CLR_ACCOUNTS; i++) {
        const struct em_clr_account *a = &c->acct[i];
        if (!a->used || (gw && *gw && strcmp(a->gw, gw) != 0) ||
            (sym && *sym && strcmp(a->sym, sym) != 0))
            continue;
        list[n++] = a;
    }
    qsort(list, n, sizeof *list, cmp_acct);
    core_http_printf(res,
                     "{\"trades\":%" PRIu64 ",\"last_tid\":%" PRIu64 ",\"duplicates\":%" PRIu64
                     ",\"refused\":%" PRIu64 ",\"accounts\":[",
                     c->trades, c->last_tid, c->duplicates, c->refused);
    for (size_t i = 0; i < n; i++) {
        const struct em_clr_account *a = list[i];
        char cash[64];
        em_clr_format_amount(a->cash, a->dec, cash, sizeof cash);
        core_http_printf(
            res,
            "%s{\"gw\":\"%s\",\"sym\":\"%s\",\"position\":%" PRId64 ",\"bought\":%" PRId64
            ",\"sold\":%" PRId64 ",\"cash\":\"%s\",\"trades\":%" PRIu64 "}",
            i ? "," : "", a->gw, a->sym, a->position, a->bought, a->sold, cash, a->trades);
    }
    core_http_printf(res, "]}\n");
    free(list);
}
