/*
 * FIX 4.4 tag=value codec (fix_codec.h). Framing checks what the session
 * protocol calls a garbled message (BeginString, BodyLength, CheckSum);
 * decoding checks each field and reports the first fault so the session
 * layer can answer it with a Reject(3).
 *
 * Invariants:
 *  1. Nothing reads outside [buf, buf + len); framing never asks for more
 *     than EM_FIX_MSG_MAX bytes, so a caller's buffer of that size always
 *     suffices.
 *  2. Field offsets fit in 16 bits because a message is at most
 *     EM_FIX_MSG_MAX bytes.
 */
#include "edumatcher/gateway/fix/fix_codec.h"

#include "core/error.h"

#include <string.h>
#include <time.h>

#define PREFIX     "8=" EM_FIX_BEGINSTRING "\001"
#define PREFIX_LEN (sizeof PREFIX - 1)
#define TRAILER    7 /* "10=ddd" SOH */

/* The next place a message could start: an '8' at p >= 1 followed by '='
 * (or at the very end, where it could be the start of one). */
static size_t next_start(const char *buf, size_t len)
{
    for (size_t p = 1; p < len; p++)
        if (buf[p] == '8' && (p + 1 == len || buf[p + 1] == '='))
            return p;
    return len;
}

int em_fix_frame(const char *buf, size_t len, size_t *msg_len)
{
    size_t n = len < PREFIX_LEN ? len : PREFIX_LEN;
    if (memcmp(buf, PREFIX, n) != 0)
        goto garbled;
    if (len < PREFIX_LEN + 2)
        return EM_FIX_FRAME_MORE;
    if (buf[PREFIX_LEN] != '9' || buf[PREFIX_LEN + 1] != '=')
        goto garbled;
    size_t p = PREFIX_LEN + 2, body = 0, digits = 0;
    for (;; p++) {
        if (p == len)
            return EM_FIX_FRAME_MORE;
        char c = buf[p];
        if (c == EM_FIX_SOH)
            break;
        if (c < '0' || c > '9' || digits == 4 || (digits == 0 && c == '0'))
            goto garbled;
        body = body * 10 + (size_t)(c - '0');
        digits++;
    }
    if (digits == 0)
        goto garbled;
    size_t head = p + 1, total = head + body + TRAILER;
    if (total > EM_FIX_MSG_MAX)
        goto garbled;
    if (len < total)
        return EM_FIX_FRAME_MORE;
    const char *t = buf + head + body;
    if (buf[head + body - 1] != EM_FIX_SOH || t[0] != '1' || t[1] != '0' || t[2] != '=' ||
        t[6] != EM_FIX_SOH)
        goto garbled;
    unsigned want = 0;
    for (int i = 3; i < 6; i++) {
        if (t[i] < '0' || t[i] > '9')
            goto garbled;
        want = want * 10 + (unsigned)(t[i] - '0');
    }
    unsigned sum = 0;
    for (size_t i = 0; i < head + body; i++)
        sum += (unsigned char)buf[i];
    if (sum % 256 != want)
        goto garbled;
    *msg_len = total;
    return 0;
garbled:
    *msg_len = next_start(buf, len);
    return EM_FIX_FRAME_GARBLED;
}

static void fault(struct em_fix_msg *m, int reason, uint32_t tag)
{
    if (m->fault_reason < 0) {
        m->fault_reason = reason;
        m->fault_tag = tag;
    }
}

static bool seen_before(const struct em_fix_msg *m, uint32_t tag)
{
    for (unsigned i = 0; i < m->nfields; i++)
        if (m->fields[i].tag == tag)
            return true;
    return false;
}

static bool parse_uint(const char *v, size_t n, uint64_t *out)
{
    if (n == 0 || n > 18)
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

int em_fix_decode(const char *buf, size_t len, struct em_fix_msg *m)
{
    m->buf = buf;
    m->len = len;
    m->type[0] = '\0';
    m->seq = 0;
    m->poss_dup = false;
    m->fault_reason = -1;
    m->fault_tag = 0;
    m->nfields = 0;
    /* skip BeginString and BodyLength (framing checked them) */
    size_t p = PREFIX_LEN;
    while (p < len && buf[p] != EM_FIX_SOH)
        p++;
    p++;
    size_t end = len - TRAILER; /* where CheckSum starts */
    while (p < end) {
        size_t tag_at = p;
        uint32_t tag = 0;
        bool tag_ok = true;
        while (p < end && buf[p] != '=' && buf[p] != EM_FIX_SOH) {
            char c = buf[p];
            if (c < '0' || c > '9' || (p == tag_at && c == '0') || p - tag_at >= 9)
                tag_ok = false;
            else
                tag = tag * 10 + (uint32_t)(c - '0');
            p++;
        }
        if (p == tag_at)
            tag_ok = false;
        if (p >= end || buf[p] != '=') {
            /* no '=': the field cannot be read at all */
            fault(m, EM_FIX_RR_INVALID_TAG_NUMBER, 0);
            while (p < end && buf[p] != EM_FIX_SOH)
                p++;
            p++;
            continue;
        }
        p++; /* '=' */
        size_t val_at = p;
        while (p < end && buf[p] != EM_FIX_SOH)
            p++;
        size_t vlen = p - val_at;
        p++; /* SOH */
        if (!tag_ok) {
            fault(m, EM_FIX_RR_INVALID_TAG_NUMBER, 0);
            continue;
        }
        if (m->nfields == 0 && tag != EM_FIX_TAG_MSGTYPE)
            fault(m, EM_FIX_RR_TAG_OUT_OF_ORDER, EM_FIX_TAG_MSGTYPE);
        if (tag == EM_FIX_TAG_BEGINSTRING || tag == EM_FIX_TAG_BODYLENGTH ||
            tag == EM_FIX_TAG_CHECKSUM) {
            fault(m, EM_FIX_RR_TAG_OUT_OF_ORDER, tag);
            continue;
        }
        if (vlen == 0) {
            fault(m, EM_FIX_RR_TAG_WITHOUT_VALUE, tag);
            continue;
        }
        if (vlen > EM_FIX_VALUE_MAX) {
            fault(m, EM_FIX_RR_VALUE_OUT_OF_RANGE, tag);
            continue;
        }
        if (seen_before(m, tag)) {
            fault(m, EM_FIX_RR_TAG_APPEARS_TWICE, tag);
            continue;
        }
        if (m->nfields == EM_FIX_FIELDS_MAX) {
            fault(m, EM_FIX_RR_OTHER, tag);
            continue;
        }
        struct em_fix_field *f = &m->fields[m->nfields++];
        f->tag = tag;
        f->off = (uint16_t)val_at;
        f->len = (uint16_t)vlen;
        if (tag == EM_FIX_TAG_MSGTYPE) {
            if (vlen <= 2) {
                memcpy(m->type, buf + val_at, vlen);
                m->type[vlen] = '\0';
            } else {
                fault(m, EM_FIX_RR_INVALID_MSGTYPE, tag);
            }
        } else if (tag == EM_FIX_TAG_MSGSEQNUM) {
            if (!parse_uint(buf + val_at, vlen, &m->seq) || m->seq == 0) {
                m->seq = 0;
                fault(m, EM_FIX_RR_INCORRECT_DATA_FORMAT, tag);
            }
        } else if (tag == EM_FIX_TAG_POSSDUPFLAG) {
            char c = buf[val_at];
            if (vlen != 1 || (c != 'Y' && c != 'N'))
                fault(m, EM_FIX_RR_INCORRECT_DATA_FORMAT, tag);
            m->poss_dup = c == 'Y';
        }
    }
    if (m->type[0] == '\0')
        fault(m, EM_FIX_RR_REQUIRED_TAG_MISSING, EM_FIX_TAG_MSGTYPE);
    return m->fault_reason < 0 ? 0 : CORE_EPROTO;
}

bool em_fix_get(const struct em_fix_msg *m, uint32_t tag, const char **val, size_t *len)
{
    for (unsigned i = 0; i < m->nfields; i++) {
        if (m->fields[i].tag == tag) {
            *val = m->buf + m->fields[i].off;
            *len = m->fields[i].len;
            return true;
        }
    }
    return false;
}

int em_fix_get_uint(const struct em_fix_msg *m, uint32_t tag, uint64_t *out)
{
    const char *v;
    size_t n;
    if (!em_fix_get(m, tag, &v, &n))
        return CORE_ENOTFOUND;
    return parse_uint(v, n, out) ? 0 : CORE_EINVAL;
}

int em_fix_get_char(const struct em_fix_msg *m, uint32_t tag, char *out)
{
    const char *v;
    size_t n;
    if (!em_fix_get(m, tag, &v, &n))
        return CORE_ENOTFOUND;
    if (n != 1)
        return CORE_EINVAL;
    *out = v[0];
    return 0;
}

int em_fix_get_price(const struct em_fix_msg *m, uint32_t tag, int64_t *mant, int *decimals)
{
    const char *v;
    size_t n;
    if (!em_fix_get(m, tag, &v, &n))
        return CORE_ENOTFOUND;
    int64_t x = 0;
    int digits = 0, dec = -1;
    for (size_t i = 0; i < n; i++) {
        if (v[i] == '.') {
            if (dec >= 0)
                return CORE_EINVAL;
            dec = 0;
            continue;
        }
        if (v[i] < '0' || v[i] > '9')
            return CORE_EINVAL;
        if (x != 0 || v[i] != '0')
            digits++;
        if (digits > 18)
            return CORE_EINVAL;
        x = x * 10 + (v[i] - '0');
        if (dec >= 0)
            dec++;
    }
    size_t int_digits = dec < 0 ? n : n - (size_t)dec - 1;
    if (int_digits == 0 || dec == 0)
        return CORE_EINVAL; /* ".5", "5." */
    *mant = x;
    *decimals = dec < 0 ? 0 : dec;
    return 0;
}

/* ---- building ---- */

/* Room kept in front of the body for "8=FIX.4.4|9=dddd|". */
#define HEAD_ROOM (PREFIX_LEN + 2 + 4 + 1)

static void put(struct em_fix_out *o, const char *s, size_t n)
{
    if (o->overflow || o->len + n + TRAILER > o->cap) {
        o->overflow = true;
        return;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

static size_t fmt_uint(char *out, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

static void put_tag(struct em_fix_out *o, uint32_t tag)
{
    char t[12];
    size_t n = fmt_uint(t, tag);
    t[n++] = '=';
    put(o, t, n);
}

void em_fix_begin(struct em_fix_out *o, char *buf, size_t cap, const char *msgtype)
{
    o->buf = buf;
    o->cap = cap;
    o->len = HEAD_ROOM;
    o->overflow = cap < HEAD_ROOM + TRAILER;
    em_fix_add_cstr(o, EM_FIX_TAG_MSGTYPE, msgtype);
}

void em_fix_add_str(struct em_fix_out *o, uint32_t tag, const char *val, size_t len)
{
    put_tag(o, tag);
    put(o, val, len);
    put(o, "\001", 1);
}

void em_fix_add_cstr(struct em_fix_out *o, uint32_t tag, const char *val)
{
    em_fix_add_str(o, tag, val, strlen(val));
}

void em_fix_add_uint(struct em_fix_out *o, uint32_t tag, uint64_t v)
{
    char t[20];
    em_fix_add_str(o, tag, t, fmt_uint(t, v));
}

void em_fix_add_char(struct em_fix_out *o, uint32_t tag, char c)
{
    em_fix_add_str(o, tag, &c, 1);
}

void em_fix_add_price(struct em_fix_out *o, uint32_t tag, int64_t mant, int decimals)
{
    char t[48];
    size_t n = 0;
    uint64_t u = mant < 0 ? (uint64_t)0 - (uint64_t)mant : (uint64_t)mant;
    if (mant < 0)
        t[n++] = '-';
    char d[20];
    size_t nd = fmt_uint(d, u);
    if (decimals <= 0) {
        memcpy(t + n, d, nd);
        n += nd;
    } else {
        size_t dec = (size_t)decimals;
        if (dec > 20)
            dec = 20;
        if (nd <= dec) { /* 0.00ddd */
            t[n++] = '0';
            t[n++] = '.';
            for (size_t i = nd; i < dec; i++)
                t[n++] = '0';
            memcpy(t + n, d, nd);
            n += nd;
        } else {
            memcpy(t + n, d, nd - dec);
            n += nd - dec;
            t[n++] = '.';
            memcpy(t + n, d + nd - dec, dec);
            n += dec;
        }
    }
    em_fix_add_str(o, tag, t, n);
}

/* gmtime_r and strftime cost more than the rest of an ExecutionReport
 * (docs/perf.md): the date and time of day are formatted once per second
 * and kept, per thread, for the messages of that second. */
static _Thread_local struct {
    uint64_t sec;
    char text[17]; /* YYYYMMDD-HH:MM:SS */
} time_cache = {UINT64_MAX, {0}};

static void put2(char *p, int v)
{
    p[0] = (char)('0' + v / 10);
    p[1] = (char)('0' + v % 10);
}

void em_fix_add_time(struct em_fix_out *o, uint32_t tag, uint64_t unix_ns)
{
    uint64_t sec = unix_ns / 1000000000u;
    unsigned ms = (unsigned)(unix_ns / 1000000u % 1000u);
    if (time_cache.sec != sec) {
        time_t secs = (time_t)sec;
        struct tm tm;
        gmtime_r(&secs, &tm);
        char *t = time_cache.text;
        int year = tm.tm_year + 1900;
        put2(t, year / 100 % 100);
        put2(t + 2, year % 100);
        put2(t + 4, tm.tm_mon + 1);
        put2(t + 6, tm.tm_mday);
        t[8] = '-';
        put2(t + 9, tm.tm_hour);
        t[11] = ':';
        put2(t + 12, tm.tm_min);
        t[14] = ':';
        put2(t + 15, tm.tm_sec);
        time_cache.sec = sec;
    }
    char t[21];
    memcpy(t, time_cache.text, 17);
    t[17] = '.';
    t[18] = (char)('0' + ms / 100);
    t[19] = (char)('0' + ms / 10 % 10);
    t[20] = (char)('0' + ms % 10);
    em_fix_add_str(o, tag, t, sizeof t);
}

size_t em_fix_finish(struct em_fix_out *o)
{
    if (o->overflow)
        return 0;
    size_t body = o->len - HEAD_ROOM;
    char head[HEAD_ROOM];
    size_t h = PREFIX_LEN;
    memcpy(head, PREFIX, PREFIX_LEN);
    head[h++] = '9';
    head[h++] = '=';
    h += fmt_uint(head + h, body);
    head[h++] = EM_FIX_SOH;
    /* the body moves left over the unused part of the head room */
    memmove(o->buf + h, o->buf + HEAD_ROOM, body);
    memcpy(o->buf, head, h);
    size_t n = h + body;
    unsigned sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += (unsigned char)o->buf[i];
    sum %= 256;
    char *t = o->buf + n;
    t[0] = '1';
    t[1] = '0';
    t[2] = '=';
    t[3] = (char)('0' + sum / 100);
    t[4] = (char)('0' + sum / 10 % 10);
    t[5] = (char)('0' + sum % 10);
    t[6] = EM_FIX_SOH;
    o->len = n + TRAILER;
    return o->len;
}
