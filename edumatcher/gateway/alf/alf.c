/*
 * ALF text parser and formatter, driven by the field and message tables
 * generated from msg.def.
 *
 * Parsing is one pass over the tokens that only records where each
 * field's value is (value spans), then the checks in the order the spec
 * ranks the faults (ALF §4, docs/alf.md A.10, B): SYNTAX for the whole
 * line first, then MISSING_FIELD, then malformed values, then the rules
 * that tie fields of NEW together (A.6). No allocation, no copy of the line.
 */
#include "edumatcher/gateway/alf/alf.h"

#include <stdbool.h>
#include <string.h>

struct span {
    const char *p;
    size_t n;
};

static int find_kind(const char *s, size_t n)
{
    for (int k = 1; k < EM_MSG__COUNT; k++)
        if (em_msgs[k].textlen == n && memcmp(em_msgs[k].text, s, n) == 0)
            return k;
    return EM_MSG__NONE;
}

static int find_arg(const struct em_msg_info *mi, const char *key, size_t n)
{
    for (unsigned i = 0; i < mi->nargs; i++) {
        const struct em_field_info *fi = &em_fields[mi->args[i]];
        if (fi->keylen == n && memcmp(fi->key, key, n) == 0)
            return mi->args[i];
    }
    return -1;
}

/* docs/alf.md A.1: one or more digits, at most 18. */
static int parse_uint(struct span v, uint64_t *out)
{
    if (v.n < 1 || v.n > EM_DIGITS_MAX)
        return 0;
    uint64_t x = 0;
    for (size_t i = 0; i < v.n; i++) {
        unsigned d = (unsigned)(v.p[i] - '0');
        if (d > 9)
            return 0;
        x = x * 10 + d;
    }
    *out = x;
    return 1;
}

/* docs/alf.md A.2: D+ or D+.D+, at most 18 digits, value > 0. */
static int parse_price(struct span v, struct em_price *out)
{
    uint64_t x = 0;
    size_t digits = 0, dec = 0, before = 0;
    int point = 0;
    for (size_t i = 0; i < v.n; i++) {
        char c = v.p[i];
        if (c == '.') {
            if (point || digits == 0)
                return 0;
            point = 1;
            before = digits;
            continue;
        }
        unsigned d = (unsigned)(c - '0');
        if (d > 9)
            return 0;
        if (++digits > EM_DIGITS_MAX)
            return 0;
        x = x * 10 + d;
        if (point)
            dec++;
    }
    if (digits == 0 || (point && dec == 0) || x == 0)
        return 0;
    (void)before;
    out->mant = (int64_t)x;
    out->dec = (uint8_t)dec;
    return 1;
}

/* docs/alf.md A.4: D+ or D+.D+ with at most two decimals, 0 < v < 100;
 * in basis points. */
static int parse_pct(struct span v, uint32_t *out)
{
    const char *dot = memchr(v.p, '.', v.n);
    struct span ip = {v.p, dot ? (size_t)(dot - v.p) : v.n};
    uint64_t i, f = 0;
    if (!parse_uint(ip, &i))
        return 0;
    if (dot) {
        struct span fp = {dot + 1, v.n - ip.n - 1};
        if (fp.n < 1 || fp.n > 2 || !parse_uint(fp, &f))
            return 0;
        if (fp.n == 1)
            f *= 10;
    }
    if (i >= 100)
        return 0;
    uint64_t bp = i * 100 + f;
    if (bp == 0)
        return 0;
    *out = (uint32_t)bp;
    return 1;
}

static int parse_enum(struct span v, const char *(*name)(unsigned), uint8_t *out)
{
    for (unsigned k = 1;; k++) {
        const char *s = name(k);
        if (!*s)
            return 0;
        if (strlen(s) == v.n && memcmp(s, v.p, v.n) == 0) {
            *out = (uint8_t)k;
            return 1;
        }
    }
}

static int copy_str(struct span v, int (*valid)(const char *, size_t), char *dst)
{
    if (!valid(v.p, v.n))
        return 0;
    memcpy(dst, v.p, v.n);
    dst[v.n] = 0;
    return 1;
}

/* Parse one value into its field; 0 when malformed. */
static int parse_value(struct em_msg *m, unsigned f, struct span v)
{
    const struct em_field_info *fi = &em_fields[f];
    char *base = (char *)m + fi->offset;
    uint64_t x;
    switch (fi->vtype) {
    case EM_VT_GW:
        return copy_str(v, em_valid_gw, base);
    case EM_VT_CL:
        return copy_str(v, em_valid_cl, base);
    case EM_VT_SYM:
        return copy_str(v, em_valid_sym, base);
    case EM_VT_TOKEN:
        return copy_str(v, em_valid_token, base);
    case EM_VT_SIDE:
        return parse_enum(v, em_side_name, (uint8_t *)base);
    case EM_VT_OTYPE:
        return parse_enum(v, em_otype_name, (uint8_t *)base);
    case EM_VT_TIF:
        return parse_enum(v, em_tif_name, (uint8_t *)base);
    case EM_VT_STP:
        return parse_enum(v, em_stp_name, (uint8_t *)base);
    case EM_VT_PHASE:
        return parse_enum(v, em_phase_name, (uint8_t *)base);
    case EM_VT_REJCODE:
        return parse_enum(v, em_rejcode_name, (uint8_t *)base);
    case EM_VT_CXLWHY:
        return parse_enum(v, em_cxlwhy_name, (uint8_t *)base);
    case EM_VT_BOOL:
        if (!parse_uint(v, &x) || x > 1)
            return 0;
        *(uint8_t *)base = (uint8_t)x;
        return 1;
    case EM_VT_QTY: {
        if (!parse_uint(v, &x) || x < 1 || x > EM_QTY_MAX)
            return 0;
        uint32_t q = (uint32_t)x;
        memcpy(base, &q, 4);
        return 1;
    }
    case EM_VT_PCT: {
        uint32_t bp;
        if (!parse_pct(v, &bp))
            return 0;
        memcpy(base, &bp, 4);
        return 1;
    }
    case EM_VT_COUNT:
    case EM_VT_ID:
    case EM_VT_MS:
        if (!parse_uint(v, &x))
            return 0;
        memcpy(base, &x, 8);
        return 1;
    case EM_VT_PRICE: {
        struct em_price p;
        if (!parse_price(v, &p))
            return 0;
        memcpy(base, &p, sizeof p);
        return 1;
    }
    }
    return 0;
}

/* The line's first well-formed cl token, for the REJECT's echo (A.8). */
static void echo_cl(const char *s, size_t n, struct em_msg *out)
{
    out->present = 0;
    size_t i = 0;
    int first = 1;
    while (i < n) {
        while (i < n && s[i] == ' ')
            i++;
        size_t b = i;
        while (i < n && s[i] != ' ')
            i++;
        if (i == b)
            break;
        if (first) {
            first = 0;
            continue;
        }
        if (i - b > 3 && memcmp(s + b, "cl=", 3) == 0 && em_valid_cl(s + b + 3, i - b - 3)) {
            memcpy(out->cl, s + b + 3, i - b - 3);
            out->cl[i - b - 3] = 0;
            out->present = EM_BIT(cl);
            return;
        }
    }
}

static int fail(const char *s, size_t n, struct em_msg *out, int code)
{
    echo_cl(s, n, out);
    return code;
}

int em_alf_parse(const char *s, size_t n, struct em_msg *out)
{
    struct span vals[EM_F__COUNT];
    out->kind = EM_MSG__NONE;
    out->present = 0;
    size_t i = 0;
    while (i < n && s[i] == ' ')
        i++;
    size_t b = i;
    while (i < n && s[i] != ' ')
        i++;
    out->kind = (uint8_t)find_kind(s + b, i - b);
    if (out->kind == EM_MSG__NONE)
        return fail(s, n, out, EM_REJ_SYNTAX);
    const struct em_msg_info *mi = &em_msgs[out->kind];

    /* SYNTAX: every token key=value, key known for this message, once. */
    uint32_t seen = 0;
    for (;;) {
        while (i < n && s[i] == ' ')
            i++;
        if (i >= n)
            break;
        b = i;
        while (i < n && s[i] != ' ')
            i++;
        const char *eq = memchr(s + b, '=', i - b);
        if (!eq)
            return fail(s, n, out, EM_REJ_SYNTAX);
        int f = find_arg(mi, s + b, (size_t)(eq - (s + b)));
        if (f < 0 || (seen & (1u << f)))
            return fail(s, n, out, EM_REJ_SYNTAX);
        seen |= 1u << f;
        vals[f].p = eq + 1;
        vals[f].n = (size_t)(s + i - (eq + 1));
    }

    /* MISSING_FIELD (A.10). */
    if ((seen & mi->required) != mi->required)
        return fail(s, n, out, EM_REJ_MISSING_FIELD);
    if (out->kind == EM_MSG_NEW) {
        uint8_t t = EM_OTYPE_LMT;
        int typed =
            !(seen & EM_BIT(ord_type)) || parse_value(out, EM_F_ord_type, vals[EM_F_ord_type]);
        if (seen & EM_BIT(ord_type))
            t = out->ord_type;
        if (typed) {
            if ((t == EM_OTYPE_LMT || t == EM_OTYPE_STL) && !(seen & EM_BIT(px)))
                return fail(s, n, out, EM_REJ_MISSING_FIELD);
            if ((t == EM_OTYPE_STP || t == EM_OTYPE_STL) && !(seen & EM_BIT(stop)))
                return fail(s, n, out, EM_REJ_MISSING_FIELD);
        }
    } else if (out->kind == EM_MSG_REPLACE) {
        if (!(seen & (EM_BIT(qty) | EM_BIT(px))))
            return fail(s, n, out, EM_REJ_MISSING_FIELD);
    }

    /* BAD_VALUE, first class: malformed values, then fields the order
     * type does not allow (A.6). */
    for (unsigned a = 0; a < mi->nargs; a++) {
        unsigned f = mi->args[a];
        if ((seen & (1u << f)) && !parse_value(out, f, vals[f]))
            return fail(s, n, out, EM_REJ_BAD_VALUE);
    }
    out->present = seen;
    /* MISSING_FIELD was settled above, so only BAD_VALUE is left here */
    int rule = em_msg_check_rules(out);
    if (rule)
        return fail(s, n, out, rule);
    return 0;
}

/* ---- formatting ---- */

static char *put_uint(char *p, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

size_t em_alf_format_price(struct em_price pr, char *buf)
{
    /* the digits, zero-padded to at least dec + 1 (5 with 2 decimals: 005) */
    char digits[48];
    size_t zeros = 0;
    char tmp[24];
    size_t nd = (size_t)(put_uint(tmp, (uint64_t)pr.mant) - tmp);
    if (nd < (size_t)pr.dec + 1)
        zeros = pr.dec + 1 - nd;
    memset(digits, '0', zeros);
    memcpy(digits + zeros, tmp, nd);
    size_t total = zeros + nd;
    if (pr.dec == 0) {
        memcpy(buf, digits, total);
        return total;
    }
    size_t lead = total - pr.dec;
    memcpy(buf, digits, lead);
    buf[lead] = '.';
    memcpy(buf + lead + 1, digits + lead, pr.dec);
    return total + 1;
}

static char *put_str(char *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

size_t em_alf_format(const struct em_msg *m, char *buf)
{
    const struct em_msg_info *mi = &em_msgs[m->kind < EM_MSG__COUNT ? m->kind : 0];
    char *p = buf;
    if (!mi->text)
        return 0;
    memcpy(p, mi->text, mi->textlen);
    p += mi->textlen;
    for (unsigned a = 0; a < mi->nargs; a++) {
        unsigned f = mi->args[a];
        if (!(m->present & (1u << f)))
            continue;
        const struct em_field_info *fi = &em_fields[f];
        const char *base = (const char *)m + fi->offset;
        *p++ = ' ';
        memcpy(p, fi->key, fi->keylen);
        p += fi->keylen;
        *p++ = '=';
        uint64_t x;
        uint32_t y;
        switch (fi->vtype) {
        case EM_VT_GW:
        case EM_VT_CL:
        case EM_VT_SYM:
        case EM_VT_TOKEN:
            p = put_str(p, base);
            break;
        case EM_VT_SIDE:
            p = put_str(p, em_side_name(*(const uint8_t *)base));
            break;
        case EM_VT_OTYPE:
            p = put_str(p, em_otype_name(*(const uint8_t *)base));
            break;
        case EM_VT_TIF:
            p = put_str(p, em_tif_name(*(const uint8_t *)base));
            break;
        case EM_VT_STP:
            p = put_str(p, em_stp_name(*(const uint8_t *)base));
            break;
        case EM_VT_PHASE:
            p = put_str(p, em_phase_name(*(const uint8_t *)base));
            break;
        case EM_VT_REJCODE:
            p = put_str(p, em_rejcode_name(*(const uint8_t *)base));
            break;
        case EM_VT_CXLWHY:
            p = put_str(p, em_cxlwhy_name(*(const uint8_t *)base));
            break;
        case EM_VT_BOOL:
            p = put_uint(p, *(const uint8_t *)base);
            break;
        case EM_VT_QTY:
            memcpy(&y, base, 4);
            p = put_uint(p, y);
            break;
        case EM_VT_PCT:
            memcpy(&y, base, 4);
            p = put_uint(p, y / 100);
            if (y % 100) {
                *p++ = '.';
                *p++ = (char)('0' + (y % 100) / 10);
                if (y % 10)
                    *p++ = (char)('0' + y % 10);
            }
            break;
        case EM_VT_COUNT:
        case EM_VT_ID:
        case EM_VT_MS:
            memcpy(&x, base, 8);
            p = put_uint(p, x);
            break;
        case EM_VT_PRICE: {
            struct em_price pr;
            memcpy(&pr, base, sizeof pr);
            p += em_alf_format_price(pr, p);
            break;
        }
        }
    }
    return (size_t)(p - buf);
}

int em_alf_parse_symbols(const char *s, size_t n, char sym[EM_SYM_MAX + 1])
{
    static const char word[] = "SYMBOLS";
    const size_t wl = sizeof word - 1;
    if (n < wl || memcmp(s, word, wl) != 0 || (n > wl && s[wl] != ' '))
        return -1;
    sym[0] = '\0';
    size_t i = wl;
    bool seen = false;
    while (i < n) {
        i++; /* the space */
        size_t start = i;
        while (i < n && s[i] != ' ')
            i++;
        size_t tl = i - start;
        if (tl < 4 || memcmp(s + start, "sym=", 4) != 0 || seen)
            return EM_REJ_SYNTAX;
        if (!em_valid_sym(s + start + 4, tl - 4))
            return EM_REJ_BAD_VALUE;
        memcpy(sym, s + start + 4, tl - 4);
        sym[tl - 4] = '\0';
        seen = true;
    }
    return 0;
}
