/*
 * Tables generated from msg.def, value validators and the binary frame
 * codec (layout in msg.h).
 *
 * The codec writes every multi-byte integer little-endian byte by byte, so
 * a frame means the same on every machine; decoding checks every length
 * and value before it trusts it, since a frame may come from another
 * process.
 */
#include "edumatcher/engine/msg.h"

#include <string.h>

#include "core/byte.h"
#include "core/error.h"

const struct em_field_info em_fields[EM_F__COUNT] = {
#define EM_FIELD(name, key, type)                                                                  \
    [EM_F_##name] = {key, sizeof(key) - 1, EM_VT_##type, offsetof(struct em_msg, name)},
#include "edumatcher/engine/msg.def"
};

/* Each message's table entry comes from its EM_ARGS_<NAME> list,
 * expanded three times: the field ids, the bit set of all of them, the
 * bit set of the required ones. */
enum { REQ = 1, OPT = 0 };
#define ARG_ID(f, r)  EM_F_##f,
#define ARG_ONE(f, r) +1
#define ARG_BIT(f, r) | (1u << EM_F_##f)
#define ARG_REQ(f, r) | ((r) ? 1u << EM_F_##f : 0u)

const struct em_msg_info em_msgs[EM_MSG__COUNT] = {
#define EM_MSG(name, text, cls)                                                                    \
    [EM_MSG_##name] = {text,                                                                       \
                       sizeof(text) - 1,                                                           \
                       EM_CLASS_##cls,                                                             \
                       0 EM_ARGS_##name(ARG_ONE),                                                  \
                       {EM_ARGS_##name(ARG_ID)},                                                   \
                       0 EM_ARGS_##name(ARG_BIT),                                                  \
                       0 EM_ARGS_##name(ARG_REQ)},
#include "edumatcher/engine/msg.def"
};

#define NAME_FN(fn, MAP)                                                                           \
    const char *fn(unsigned v)                                                                     \
    {                                                                                              \
        static const char *const names[] = {"", MAP(NAME_ENTRY)};                                  \
        return v < sizeof(names) / sizeof(names[0]) ? names[v] : "";                               \
    }
#define NAME_ENTRY(n, s) s,
NAME_FN(em_side_name, EM_SIDE_MAP)
NAME_FN(em_otype_name, EM_OTYPE_MAP)
NAME_FN(em_tif_name, EM_TIF_MAP)
NAME_FN(em_stp_name, EM_STP_MAP)
NAME_FN(em_phase_name, EM_PHASE_MAP)
NAME_FN(em_rejcode_name, EM_REJCODE_MAP)
NAME_FN(em_cxlwhy_name, EM_CXLWHY_MAP)

static unsigned enum_count(unsigned vtype)
{
    switch (vtype) {
#define ONE(n, s) +1
    case EM_VT_SIDE:
        return 0 EM_SIDE_MAP(ONE);
    case EM_VT_OTYPE:
        return 0 EM_OTYPE_MAP(ONE);
    case EM_VT_TIF:
        return 0 EM_TIF_MAP(ONE);
    case EM_VT_STP:
        return 0 EM_STP_MAP(ONE);
    case EM_VT_PHASE:
        return 0 EM_PHASE_MAP(ONE);
    case EM_VT_REJCODE:
        return 0 EM_REJCODE_MAP(ONE);
    case EM_VT_CXLWHY:
        return 0 EM_CXLWHY_MAP(ONE);
    case EM_VT_BOOL:
        return 2;
#undef ONE
    }
    return 0;
}

/* ALF §2: gw is 1–16 of A-Z 0-9 _ */
int em_valid_gw(const char *s, size_t n)
{
    if (n < 1 || n > EM_GW_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
            return 0;
    }
    return 1;
}

/* ALF §2: cl is 1–32 of A-Z a-z 0-9 _ - . */
int em_valid_cl(const char *s, size_t n)
{
    if (n < 1 || n > EM_CL_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return 0;
    }
    return 1;
}

/* ALF §2: sym is 1–12 of A-Z 0-9 . */
int em_valid_sym(const char *s, size_t n)
{
    if (n < 1 || n > EM_SYM_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.'))
            return 0;
    }
    return 1;
}

/* docs/alf.md H.1: a token is 1–64 printable ASCII characters but space. */
int em_valid_token(const char *s, size_t n)
{
    if (n < 1 || n > EM_TOKEN_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] <= ' ' || s[i] > '~')
            return 0;
    return 1;
}

/* 10^EM_DIGITS_MAX: the first integer ALF cannot write (docs/alf.md A.1). */
#define DIGITS_LIMIT 1000000000000000000ull

static int price_ok(struct em_price p)
{
    if (p.mant <= 0 || p.dec >= EM_DIGITS_MAX)
        return 0;
    /* at most 18 digits in all, at least one before the point */
    return p.mant < (int64_t)DIGITS_LIMIT;
}

static int field_ok(const struct em_msg *m, unsigned f)
{
    const struct em_field_info *fi = &em_fields[f];
    const char *base = (const char *)m + fi->offset;
    switch (fi->vtype) {
    case EM_VT_GW:
        return em_valid_gw(base, strnlen(base, EM_GW_MAX + 1));
    case EM_VT_CL:
        return em_valid_cl(base, strnlen(base, EM_CL_MAX + 1));
    case EM_VT_SYM:
        return em_valid_sym(base, strnlen(base, EM_SYM_MAX + 1));
    case EM_VT_TOKEN:
        return em_valid_token(base, strnlen(base, EM_TOKEN_MAX + 1));
    case EM_VT_SIDE:
    case EM_VT_OTYPE:
    case EM_VT_TIF:
    case EM_VT_STP:
    case EM_VT_PHASE:
    case EM_VT_REJCODE:
    case EM_VT_CXLWHY: {
        uint8_t v = *(const uint8_t *)base;
        return v >= 1 && v <= enum_count(fi->vtype);
    }
    case EM_VT_BOOL:
        return *(const uint8_t *)base <= 1;
    case EM_VT_QTY: {
        uint32_t v;
        memcpy(&v, base, sizeof v);
        return v >= 1 && v <= EM_QTY_MAX;
    }
    case EM_VT_PCT: {
        uint32_t v;
        memcpy(&v, base, sizeof v);
        return v >= 1 && v < 10000;
    }
    case EM_VT_MS: {
        uint64_t v;
        memcpy(&v, base, sizeof v);
        return v < DIGITS_LIMIT;
    }
    case EM_VT_COUNT:
    case EM_VT_ID: {
        /* The engine's events carry any 64-bit id or count; a client's or
         * an operator's message only what ALF input can write (at most 18
         * digits, docs/alf.md A.1), so every request a frame carries has
         * a text form (a gateway's seq never comes near it). */
        if (em_msgs[m->kind].cls == EM_CLASS_EVENT)
            return 1;
        uint64_t v;
        memcpy(&v, base, sizeof v);
        return v < DIGITS_LIMIT;
    }
    case EM_VT_PRICE: {
        struct em_price p;
        memcpy(&p, base, sizeof p);
        return price_ok(p);
    }
    }
    return 0;
}

int em_msg_check_rules(const struct em_msg *m)
{
    uint32_t f = m->present;
    if (m->kind == EM_MSG_NEW) {
        /* ALF §3; docs/alf.md A.6, A.10 */
        uint8_t t = (f & EM_BIT(ord_type)) ? m->ord_type : EM_OTYPE_LMT;
        uint8_t tif = (f & EM_BIT(tif)) ? m->tif : EM_TIF_DAY;
        if ((t == EM_OTYPE_LMT || t == EM_OTYPE_STL) && !(f & EM_BIT(px)))
            return EM_REJ_MISSING_FIELD;
        if ((t == EM_OTYPE_STP || t == EM_OTYPE_STL) && !(f & EM_BIT(stop)))
            return EM_REJ_MISSING_FIELD;
        if ((f & EM_BIT(px)) && (t == EM_OTYPE_MKT || t == EM_OTYPE_STP))
            return EM_REJ_BAD_VALUE;
        if ((f & EM_BIT(stop)) && (t == EM_OTYPE_LMT || t == EM_OTYPE_MKT))
            return EM_REJ_BAD_VALUE;
        if ((f & EM_BIT(peak)) &&
            (t != EM_OTYPE_LMT || tif == EM_TIF_IOC || tif == EM_TIF_FOK || m->peak >= m->qty))
            return EM_REJ_BAD_VALUE;
    } else if (m->kind == EM_MSG_REPLACE) {
        if (!(f & (EM_BIT(qty) | EM_BIT(px))))
            return EM_REJ_MISSING_FIELD;
    } else if (m->kind == EM_MSG_PHASE) {
        /* §7: an operator sets PREOPEN, CONTINUOUS or CLOSED only */
        if (m->phase != EM_PHASE_PREOPEN && m->phase != EM_PHASE_CONTINUOUS &&
            m->phase != EM_PHASE_CLOSED)
            return EM_REJ_BAD_VALUE;
    }
    return 0;
}

int em_msg_check(const struct em_msg *m)
{
    if (m->kind == EM_MSG__NONE || m->kind >= EM_MSG__COUNT)
        return EM_REJ_SYNTAX;
    const struct em_msg_info *mi = &em_msgs[m->kind];
    if (m->present & ~mi->allowed)
        return EM_REJ_SYNTAX;
    if ((m->present & mi->required) != mi->required)
        return EM_REJ_MISSING_FIELD;
    for (unsigned i = 0; i < mi->nargs; i++) {
        unsigned f = mi->args[i];
        if ((m->present & (1u << f)) && !field_ok(m, f))
            return EM_REJ_BAD_VALUE;
    }
    return em_msg_check_rules(m);
}

/* ---- binary codec ---- */

static size_t field_max_size(unsigned vtype)
{
    switch (vtype) {
    case EM_VT_GW:
        return 1 + EM_GW_MAX;
    case EM_VT_CL:
        return 1 + EM_CL_MAX;
    case EM_VT_SYM:
        return 1 + EM_SYM_MAX;
    case EM_VT_TOKEN:
        return 1 + EM_TOKEN_MAX;
    case EM_VT_QTY:
    case EM_VT_PCT:
        return 4;
    case EM_VT_COUNT:
    case EM_VT_ID:
    case EM_VT_MS:
        return 8;
    case EM_VT_PRICE:
        return 9;
    default:
        return 1;
    }
}

static size_t str_cap(unsigned vtype)
{
    switch (vtype) {
    case EM_VT_GW:
        return EM_GW_MAX;
    case EM_VT_CL:
        return EM_CL_MAX;
    case EM_VT_SYM:
        return EM_SYM_MAX;
    case EM_VT_TOKEN:
        return EM_TOKEN_MAX;
    }
    return 0;
}

int em_frame_encode(const struct em_msg *m, uint8_t *buf, size_t cap)
{
    if (m->kind == EM_MSG__NONE || m->kind >= EM_MSG__COUNT)
        return CORE_EINVAL;
    const struct em_msg_info *mi = &em_msgs[m->kind];
    size_t need = 7;
    for (unsigned i = 0; i < mi->nargs; i++)
        if (m->present & (1u << mi->args[i]))
            need += field_max_size(em_fields[mi->args[i]].vtype);
    if (need > cap)
        return CORE_ETOOBIG;
    uint8_t *p = buf + 2;
    *p++ = m->kind;
    p = core_put_le(p, m->present & mi->allowed, 4);
    for (unsigned i = 0; i < mi->nargs; i++) {
        unsigned f = mi->args[i];
        if (!(m->present & (1u << f)))
            continue;
        const struct em_field_info *fi = &em_fields[f];
        const char *base = (const char *)m + fi->offset;
        switch (fi->vtype) {
        case EM_VT_GW:
        case EM_VT_CL:
        case EM_VT_SYM:
        case EM_VT_TOKEN: {
            size_t n = strnlen(base, str_cap(fi->vtype));
            *p++ = (uint8_t)n;
            memcpy(p, base, n);
            p += n;
            break;
        }
        case EM_VT_QTY:
        case EM_VT_PCT: {
            uint32_t v;
            memcpy(&v, base, 4);
            p = core_put_le(p, v, 4);
            break;
        }
        case EM_VT_COUNT:
        case EM_VT_ID:
        case EM_VT_MS: {
            uint64_t v;
            memcpy(&v, base, 8);
            p = core_put_le(p, v, 8);
            break;
        }
        case EM_VT_PRICE: {
            struct em_price v;
            memcpy(&v, base, sizeof v);
            p = core_put_le(p, (uint64_t)v.mant, 8);
            *p++ = v.dec;
            break;
        }
        default:
            *p++ = *(const uint8_t *)base;
            break;
        }
    }
    size_t len = (size_t)(p - buf);
    core_put_le(buf, len, 2);
    return (int)len;
}

int em_frame_decode(const uint8_t *buf, size_t len, struct em_msg *out)
{
    if (len < 2)
        return CORE_EINCOMPLETE;
    size_t flen = (size_t)core_get_le(buf, 2);
    if (flen < 7 || flen > EM_FRAME_MAX)
        return CORE_EPROTO;
    if (len < flen)
        return CORE_EINCOMPLETE;
    memset(out, 0, sizeof *out);
    out->kind = buf[2];
    if (out->kind == EM_MSG__NONE || out->kind >= EM_MSG__COUNT)
        return CORE_EPROTO;
    const struct em_msg_info *mi = &em_msgs[out->kind];
    out->present = (uint32_t)core_get_le(buf + 3, 4);
    if (out->present & ~mi->allowed)
        return CORE_EPROTO;
    /* Field by field; a short frame sets the reader's error, checked once
     * at the end together with "nothing left over". */
    struct core_reader r = core_reader_init(buf + 7, flen - 7);
    for (unsigned i = 0; i < mi->nargs; i++) {
        unsigned f = mi->args[i];
        if (!(out->present & (1u << f)))
            continue;
        const struct em_field_info *fi = &em_fields[f];
        char *base = (char *)out + fi->offset;
        switch (fi->vtype) {
        case EM_VT_GW:
        case EM_VT_CL:
        case EM_VT_SYM:
        case EM_VT_TOKEN: {
            size_t n = core_read_u8(&r);
            const uint8_t *str = core_read_bytes(&r, n);
            if (!str || n > str_cap(fi->vtype) || memchr(str, 0, n))
                return CORE_EPROTO;
            memcpy(base, str, n);
            base[n] = 0;
            break;
        }
        case EM_VT_QTY:
        case EM_VT_PCT: {
            uint32_t v = core_read_u32(&r);
            memcpy(base, &v, 4);
            break;
        }
        case EM_VT_COUNT:
        case EM_VT_ID:
        case EM_VT_MS: {
            uint64_t v = core_read_u64(&r);
            memcpy(base, &v, 8);
            break;
        }
        case EM_VT_PRICE: {
            struct em_price v = {(int64_t)core_read_u64(&r), 0};
            v.dec = core_read_u8(&r);
            memcpy(base, &v, sizeof v);
            break;
        }
        default:
            *(uint8_t *)base = core_read_u8(&r);
            break;
        }
    }
    if (!core_reader_done(&r))
        return CORE_EPROTO;
    if (em_msg_check(out) != 0)
        return CORE_EPROTO;
    return (int)flen;
}

/* The fast builders lay out exactly what em_frame_encode lays out for an
 * ACK / FILL with every field present (test_msg pins the bytes). */
static uint8_t *put_cl(uint8_t *p, const char *cl)
{
    size_t n = strnlen(cl, EM_CL_MAX);
    *p++ = (uint8_t)n;
    memcpy(p, cl, n);
    return p + n;
}

size_t em_frame_build_ack(uint8_t *buf, const char *cl, uint64_t oid)
{
    uint8_t *p = buf + 2;
    *p++ = EM_MSG_ACK;
    p = core_put_le(p, EM_BIT(cl) | EM_BIT(oid), 4);
    p = put_cl(p, cl);
    p = core_put_le(p, oid, 8);
    size_t len = (size_t)(p - buf);
    core_put_le(buf, len, 2);
    return len;
}

size_t em_frame_build_fill(uint8_t *buf, const char *cl, uint64_t oid, uint64_t tid,
                           struct em_price px, uint32_t qty, uint64_t leaves, uint64_t cum)
{
    uint8_t *p = buf + 2;
    *p++ = EM_MSG_FILL;
    p = core_put_le(p,
                    EM_BIT(cl) | EM_BIT(oid) | EM_BIT(tid) | EM_BIT(px) | EM_BIT(qty) |
                        EM_BIT(leaves) | EM_BIT(cum),
                    4);
    p = put_cl(p, cl);
    p = core_put_le(p, oid, 8);
    p = core_put_le(p, tid, 8);
    p = core_put_le(p, (uint64_t)px.mant, 8);
    *p++ = px.dec;
    p = core_put_le(p, qty, 4);
    p = core_put_le(p, leaves, 8);
    p = core_put_le(p, cum, 8);
    size_t len = (size_t)(p - buf);
    core_put_le(buf, len, 2);
    return len;
}

size_t em_frame_append_id(uint8_t *buf, size_t len, unsigned field, uint64_t v)
{
    if (len < 7 || buf[2] == EM_MSG__NONE || buf[2] >= EM_MSG__COUNT || len + 8 > EM_FRAME_MAX)
        return 0;
    const struct em_msg_info *mi = &em_msgs[buf[2]];
    uint32_t present = (uint32_t)core_get_le(buf + 3, 4);
    unsigned i = 0;
    while (i < mi->nargs && mi->args[i] != field)
        i++;
    if (i == mi->nargs || em_fields[field].vtype != EM_VT_ID || (present & (1u << field)))
        return 0;
    for (unsigned k = i + 1; k < mi->nargs; k++)
        if (present & (1u << mi->args[k]))
            return 0; /* a later field is there: the value would go before it */
    core_put_le(buf + 3, present | (1u << field), 4);
    core_put_le(buf + len, v, 8);
    core_put_le(buf, len + 8, 2);
    return len + 8;
}

size_t em_frame_append_seq(uint8_t *buf, size_t len, uint64_t seq)
{
    return em_frame_append_id(buf, len, EM_F_seq, seq);
}
