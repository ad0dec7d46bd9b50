/*
 * Bitmap commands on string values, following Redis 7.0's bitops.c:
 * GETBIT, SETBIT, BITCOUNT and BITPOS (with the BYTE|BIT range unit of
 * 7.0), BITOP. Same argument checks in the same order, same error texts.
 *
 * Bit 0 is the most significant bit of the first byte. A missing key is
 * an empty string; SETBIT grows the value with zero bytes. Offsets are
 * bounded by proto-max-bulk-len (in bytes), as Redis bounds them.
 */
#include "gridsync/client/client.h"
#include "gridsync/commands/commands.h"
#include "gridsync/types/value.h"

#include <stdlib.h>
#include <string.h>

/* Redis's getBitOffsetFromArgument (without BITFIELD's '#'). */
static bool bit_offset(struct gs_client *c, const struct gs_arg *a, uint64_t *out)
{
    int64_t v;
    if (!gs_string2ll(a->p, a->len, &v) || v < 0 || (v >> 3) >= c->shared->proto_max_bulk_len) {
        gs_error(c, "ERR bit offset is not an integer or out of range");
        return false;
    }
    *out = (uint64_t)v;
    return true;
}

void gs_cmd_getbit(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    uint64_t off;
    if (!bit_offset(c, &argv[2], &off))
        return;
    bool wrong;
    struct gs_entry *e = gs_lookup_typed(c, &argv[1], GS_TYPE_STRING, 0, &wrong);
    if (wrong)
        return;
    int bit = 0;
    if (e) {
        size_t len;
        const unsigned char *v = (const unsigned char *)gs_entry_value(e, &len);
        if ((off >> 3) < len)
            bit = (v[off >> 3] >> (7 - (off & 7))) & 1;
    }
    gs_reply_int(&c->w, bit);
}

void gs_cmd_setbit(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    struct gs_store *s = c->db->store;
    uint64_t off;
    int64_t on;
    if (!bit_offset(c, &argv[2], &off) ||
        !gs_arg_int(c, &argv[3], &on, "ERR bit is not an integer or out of range"))
        return;
    if (on & ~1) {
        gs_error(c, "ERR bit is not an integer or out of range");
        return;
    }
    bool wrong;
    struct gs_entry *e = gs_lookup_typed(c, &argv[1], GS_TYPE_STRING, GS_LOOKUP_WRITE, &wrong);
    if (wrong)
        return;
    if (!e && gs_store_set(s, argv[1].p, argv[1].len, "", 0, -1, &e)) {
        gs_error_oom(c);
        return;
    }
    size_t byte = (size_t)(off >> 3), len;
    unsigned char *v = (unsigned char *)gs_entry_value(e, &len);
    if (byte >= len) {
        v = (unsigned char *)gs_store_resize_value(s, &e, byte + 1);
        if (!v) {
            gs_error_oom(c);
            return;
        }
        memset(v + len, 0, byte + 1 - len);
    }
    unsigned mask = 1u << (7 - (off & 7));
    int old = (v[byte] & mask) != 0;
    if (on)
        v[byte] |= (unsigned char)mask;
    else
        v[byte] &= (unsigned char)~mask;
    /* Written in place: WATCH must see it. Redis's setbitCommand signals
     * only a change (creation and growth were signalled by the store). */
    if (old != (int)on)
        gs_store_signal_modified(s, e);
    gs_reply_int(&c->w, old);
}

static int64_t popcount(const unsigned char *p, size_t n)
{
    int64_t count = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        count += __builtin_popcountll(w);
    }
    for (; i < n; i++)
        count += __builtin_popcount(p[i]);
    return count;
}

/* The byte range [*start, *end] a BITCOUNT/BITPOS range selects, and the
 * masks of the bits outside it in its first and last byte (BIT unit).
 * Redis's shared range arithmetic: negative indexes from the end, clamped
 * to the value. */
static void bit_range(int64_t *start, int64_t *end, int64_t totlen, bool isbit,
                      unsigned char *first_neg, unsigned char *last_neg)
{
    *first_neg = *last_neg = 0;
    if (isbit)
        totlen <<= 3;
    if (*start < 0)
        *start = totlen + *start;
    if (*end < 0)
        *end = totlen + *end;
    if (*start < 0)
        *start = 0;
    if (*end < 0)
        *end = 0;
    if (*end >= totlen)
        *end = totlen - 1;
    if (isbit && *start <= *end) {
        *first_neg = (unsigned char)(~((1u << (8 - (*start & 7))) - 1) & 0xFF);
        *last_neg = (unsigned char)((1u << (7 - (*end & 7))) - 1);
        *start >>= 3;
        *end >>= 3;
    }
}

static bool range_unit(struct gs_client *c, const struct gs_arg *a, bool *isbit)
{
    if (gs_arg_is(a, "bit"))
        *isbit = true;
    else if (gs_arg_is(a, "byte"))
        *isbit = false;
    else {
        gs_error_syntax(c);
        return false;
    }
    return true;
}

/* BITCOUNT key [start end [BYTE|BIT]] (Redis 7.0's bitcountCommand). */
void gs_cmd_bitcount(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    bool wrong;
    struct gs_entry *e = gs_lookup_typed(c, &argv[1], GS_TYPE_STRING, 0, &wrong);
    if (wrong)
        return;
    if (!e) { /* as Redis: a missing key is 0 before the range is looked at */
        gs_reply_int(&c->w, 0);
        return;
    }
    size_t slen;
    const unsigned char *p = (const unsigned char *)gs_entry_value(e, &slen);
    int64_t start, end;
    unsigned char first_neg = 0, last_neg = 0;
    if (argc == 4 || argc == 5) {
        bool isbit = false;
        if (!gs_arg_int(c, &argv[2], &start, NULL) || !gs_arg_int(c, &argv[3], &end, NULL))
            return;
        if (start < 0 && end < 0 && start > end) {
            gs_reply_int(&c->w, 0);
            return;
        }
        if (argc == 5 && !range_unit(c, &argv[4], &isbit))
            return;
        bit_range(&start, &end, (int64_t)slen, isbit, &first_neg, &last_neg);
    } else if (argc == 2) {
        start = 0;
        end = (int64_t)slen - 1;
    } else {
        gs_error_syntax(c);
        return;
    }
    if (start > end) {
        gs_reply_int(&c->w, 0);
        return;
    }
    int64_t count = popcount(p + start, (size_t)(end - start + 1));
    if (first_neg || last_neg) { /* take off the bits of the edge bytes outside the range */
        unsigned char edges[2] = {(unsigned char)(first_neg ? p[start] & first_neg : 0),
                                  (unsigned char)(last_neg ? p[end] & last_neg : 0)};
        count -= popcount(edges, 2);
    }
    gs_reply_int(&c->w, count);
}

/* Redis's redisBitpos: the first bit equal to `bit` in p[0..count), or
 * -1 when looking for a 1 and there is none; looking for a 0 in all-ones
 * bytes gives count * 8 (the first bit after them, zero padding). */
static int64_t first_bit(const unsigned char *p, size_t count, int bit)
{
    for (size_t i = 0; i < count; i++) {
        unsigned char b = bit ? p[i] : (unsigned char)~p[i];
        if (b)
            return (int64_t)i * 8 + __builtin_clz((unsigned)b << 24);
    }
    return bit ? -1 : (int64_t)count * 8;
}

/* BITPOS key bit [start [end [BYTE|BIT]]] (Redis 7.0's bitposCommand). */
void gs_cmd_bitpos(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t bit;
    if (!gs_arg_int(c, &argv[2], &bit, NULL))
        return;
    if (bit != 0 && bit != 1) {
        gs_error(c, "ERR The bit argument must be 1 or 0.");
        return;
    }
    bool wrong;
    struct gs_entry *e = gs_lookup_typed(c, &argv[1], GS_TYPE_STRING, 0, &wrong);
    if (wrong)
        return;
    if (!e) { /* an infinite run of zero bits */
        gs_reply_int(&c->w, bit ? -1 : 0);
        return;
    }
    size_t slen;
    const unsigned char *p = (const unsigned char *)gs_entry_value(e, &slen);
    int64_t start, end;
    bool end_given = false;
    unsigned char first_neg = 0, last_neg = 0;
    if (argc >= 4 && argc <= 6) {
        bool isbit = false;
        if (!gs_arg_int(c, &argv[3], &start, NULL))
            return;
        if (argc == 6 && !range_unit(c, &argv[5], &isbit))
            return;
        if (argc >= 5) {
            if (!gs_arg_int(c, &argv[4], &end, NULL))
                return;
            end_given = true;
        } else {
            end = (int64_t)slen - 1;
        }
        bit_range(&start, &end, (int64_t)slen, isbit, &first_neg, &last_neg);
    } else if (argc == 3) {
        start = 0;
        end = (int64_t)slen - 1;
    } else {
        gs_error_syntax(c);
        return;
    }
    if (start > end) { /* an empty range holds neither a 0 nor a 1 */
        gs_reply_int(&c->w, -1);
        return;
    }
    int64_t bytes = end - start + 1, pos;
    unsigned char tmp;
    if (first_neg) {
        tmp = bit ? (unsigned char)(p[start] & ~first_neg) : (unsigned char)(p[start] | first_neg);
        if (last_neg && bytes == 1) /* one byte: both edges are in it */
            tmp = bit ? (unsigned char)(tmp & ~last_neg) : (unsigned char)(tmp | last_neg);
        pos = first_bit(&tmp, 1, (int)bit);
        if (bytes == 1 || (pos != -1 && pos != 8))
            goto result;
        start++;
        bytes--;
    }
    int64_t whole = bytes - (last_neg ? 1 : 0); /* bytes with every bit in range */
    if (whole > 0) {
        pos = first_bit(p + start, (size_t)whole, (int)bit);
        if (bytes == whole || (pos != -1 && pos != whole << 3))
            goto result;
        start += whole;
        bytes -= whole;
    }
    tmp = bit ? (unsigned char)(p[end] & ~last_neg) : (unsigned char)(p[end] | last_neg);
    pos = first_bit(&tmp, 1, (int)bit);
result:
    /* Looking for a 0 in an explicit range that has none: the padding
     * beyond the range does not count. */
    if (end_given && bit == 0 && pos == bytes << 3) {
        gs_reply_int(&c->w, -1);
        return;
    }
    if (pos != -1)
        pos += start << 3;
    gs_reply_int(&c->w, pos);
}

/* BITOP AND|OR|XOR|NOT destkey key [key ...] (Redis's bitopCommand): the
 * result is as long as the longest source, shorter ones count as zero
 * bytes; an empty result deletes destkey. Replies the result's length. */
void gs_cmd_bitop(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    enum { AND, OR, XOR, NOT } op;
    if (gs_arg_is(&argv[1], "and"))
        op = AND;
    else if (gs_arg_is(&argv[1], "or"))
        op = OR;
    else if (gs_arg_is(&argv[1], "xor"))
        op = XOR;
    else if (gs_arg_is(&argv[1], "not"))
        op = NOT;
    else {
        gs_error_syntax(c);
        return;
    }
    if (op == NOT && argc != 4) {
        gs_error(c, "ERR BITOP NOT must be called with a single source key.");
        return;
    }
    int64_t now = c->db->now_ms;
    size_t nsrc = argc - 3, maxlen = 0;
    /* First pass: the result's length. Values are then read one source at
     * a time into the result (built in the scratch buffer, as lookups do
     * not move entries but the final set may). */
    for (size_t i = 0; i < nsrc; i++) {
        bool wrong;
        struct gs_entry *e = gs_lookup_typed(c, &argv[3 + i], GS_TYPE_STRING, 0, &wrong);
        if (wrong)
            return;
        size_t len = 0;
        if (e)
            gs_entry_value(e, &len);
        if (len > maxlen)
            maxlen = len;
    }
    if (maxlen == 0) {
        gs_store_delete(c->db->store, argv[2].p, argv[2].len, now);
        gs_reply_int(&c->w, 0);
        return;
    }
    c->shared->scratch.len = 0;
    unsigned char *res = (unsigned char *)core_buf_reserve(&c->shared->scratch, maxlen);
    if (!res) {
        core_buf_free(&c->shared->scratch);
        gs_error_oom(c);
        return;
    }
    for (size_t i = 0; i < nsrc; i++) {
        struct gs_entry *e =
            gs_store_lookup(c->db->store, argv[3 + i].p, argv[3 + i].len, now, GS_LOOKUP_NOTOUCH);
        size_t len = 0;
        const unsigned char *v = e ? (const unsigned char *)gs_entry_value(e, &len) : NULL;
        for (size_t j = 0; j < maxlen; j++) {
            unsigned char b = j < len ? v[j] : 0;
            if (i == 0)
                res[j] = op == NOT ? (unsigned char)~b : b;
            else if (op == AND)
                res[j] &= b;
            else if (op == OR)
                res[j] |= b;
            else
                res[j] ^= b;
        }
    }
    int rc = gs_store_set(c->db->store, argv[2].p, argv[2].len, res, maxlen, -1, NULL);
    if (c->shared->scratch.cap > 256 * 1024) /* as scratch_done in cmd_keys.c */
        core_buf_free(&c->shared->scratch);
    if (rc) {
        gs_error_oom(c);
        return;
    }
    gs_reply_int(&c->w, (int64_t)maxlen);
}
