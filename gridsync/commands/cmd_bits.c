/*
 * Bitmap commands on string values, following Redis 7.0's bitops.c:
 * GETBIT, SETBIT, BITCOUNT and BITPOS (with the BYTE|BIT range unit of
 * 7.0), BITOP, BITFIELD and BITFIELD_RO. Same argument checks in the same order, same error texts.
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

/* ------------------------------------------------------------ BITFIELD */

/* BITFIELD key [GET type offset] [SET type offset value] [INCRBY type
 * offset increment] [OVERFLOW WRAP|SAT|FAIL] ..., and BITFIELD_RO (GET
 * only), as Redis 7.0's bitfieldGeneric: every operation is parsed and
 * checked before the key is looked up, then run in order. Integers of
 * 1..64 bits (unsigned: 1..63) at any bit offset ("#n": n times the
 * width), most significant bit first; a write grows the string with
 * zero bytes to its farthest bit. */
enum { BF_GET, BF_SET, BF_INCRBY };
enum { BF_WRAP, BF_SAT, BF_FAIL };

struct bf_op {
    uint64_t offset;
    int64_t value;
    int opcode, overflow, bits;
    bool sign;
};

/* Redis's getBitfieldTypeFromArgument: i1..i64 or u1..u63 (the width
 * read as a C string, up to a NUL, as Redis reads it). */
static bool bf_type(struct gs_client *c, const struct gs_arg *a, bool *sign, int *bits)
{
    static const char err[] = "ERR Invalid bitfield type. Use something like i16 u8. Note that "
                              "u64 is not supported but i64 is.";
    int64_t n;
    if (a->len == 0 || (a->p[0] != 'i' && a->p[0] != 'u')) {
        gs_error(c, err);
        return false;
    }
    *sign = a->p[0] == 'i';
    size_t len = strnlen(a->p + 1, a->len - 1);
    if (!gs_string2ll(a->p + 1, len, &n) || n < 1 || n > (*sign ? 64 : 63)) {
        gs_error(c, err);
        return false;
    }
    *bits = (int)n;
    return true;
}

/* Redis's getBitOffsetFromArgument with BITFIELD's "#n" form. */
static bool bf_offset(struct gs_client *c, const struct gs_arg *a, int bits, uint64_t *out)
{
    bool hash = a->len > 0 && a->p[0] == '#';
    int64_t v;
    if (!gs_string2ll(a->p + hash, a->len - hash, &v)) {
        gs_error(c, "ERR bit offset is not an integer or out of range");
        return false;
    }
    if (hash)
        v = (int64_t)((uint64_t)v * (uint64_t)bits);
    if (v < 0 || (v >> 3) >= c->shared->proto_max_bulk_len) {
        gs_error(c, "ERR bit offset is not an integer or out of range");
        return false;
    }
    *out = (uint64_t)v;
    return true;
}

static uint64_t bf_get_u(const unsigned char *p, uint64_t offset, int bits)
{
    uint64_t v = 0;
    for (int j = 0; j < bits; j++) {
        uint64_t bit = offset + (uint64_t)j;
        v = v << 1 | ((p[bit >> 3] >> (7 - (bit & 7))) & 1);
    }
    return v;
}

static int64_t bf_get_i(const unsigned char *p, uint64_t offset, int bits)
{
    uint64_t v = bf_get_u(p, offset, bits);
    if (bits < 64 && (v & ((uint64_t)1 << (bits - 1))))
        v |= UINT64_MAX << bits; /* two's complement: extend the sign */
    return (int64_t)v;
}

static void bf_put(unsigned char *p, uint64_t offset, int bits, uint64_t v)
{
    for (int j = 0; j < bits; j++) {
        uint64_t bit = offset + (uint64_t)j;
        unsigned mask = 1u << (7 - (bit & 7));
        if ((v >> (bits - 1 - j)) & 1)
            p[bit >> 3] |= (unsigned char)mask;
        else
            p[bit >> 3] &= (unsigned char)~mask;
    }
}

/* Redis's checkUnsignedBitfieldOverflow: 0 when value + incr fits in
 * bits, else 1 (over) or -1 (under) with *limit the result under WRAP
 * or SAT (untouched under FAIL). */
static int bf_overflow_u(uint64_t value, int64_t incr, int bits, int how, uint64_t *limit)
{
    uint64_t max = bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
    int64_t maxincr = (int64_t)(max - value), minincr = (int64_t)(0 - value);
    int rc = 0;
    if (value > max || (incr > 0 && incr > maxincr))
        rc = 1;
    else if (incr < 0 && incr < minincr)
        rc = -1;
    if (rc && how == BF_WRAP)
        *limit = (value + (uint64_t)incr) & ~(UINT64_MAX << bits);
    else if (rc && how == BF_SAT)
        *limit = rc > 0 ? max : 0;
    return rc;
}

/* Redis's checkSignedBitfieldOverflow, its arithmetic done unsigned
 * where Redis's could overflow. */
static int bf_overflow_i(int64_t value, int64_t incr, int bits, int how, int64_t *limit)
{
    int64_t max = bits == 64 ? INT64_MAX : ((int64_t)1 << (bits - 1)) - 1;
    int64_t min = -max - 1;
    int64_t maxincr = (int64_t)((uint64_t)max - (uint64_t)value);
    int64_t minincr = (int64_t)((uint64_t)min - (uint64_t)value);
    int rc = 0;
    if (value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr))
        rc = 1;
    else if (value < min || (bits != 64 && incr < minincr) ||
             (value < 0 && incr < 0 && incr < minincr))
        rc = -1;
    if (rc && how == BF_WRAP) {
        uint64_t s = (uint64_t)value + (uint64_t)incr;
        if (bits < 64) {
            uint64_t high = UINT64_MAX << bits;
            s = (s & ((uint64_t)1 << (bits - 1))) ? s | high : s & ~high;
        }
        *limit = (int64_t)s;
    } else if (rc && how == BF_SAT) {
        *limit = rc > 0 ? max : min;
    }
    return rc;
}

/* Run a SET or INCRBY on p; replies the result, or null when FAIL
 * refuses it. Returns whether the bits changed. */
static bool bf_write(struct gs_client *c, unsigned char *p, const struct bf_op *op)
{
    int ov;
    if (op->sign) {
        int64_t old = bf_get_i(p, op->offset, op->bits), nv, wrapped = 0, ret;
        if (op->opcode == BF_INCRBY) {
            ov = bf_overflow_i(old, op->value, op->bits, op->overflow, &wrapped);
            nv = ov ? wrapped : old + op->value;
            ret = nv;
        } else {
            nv = op->value;
            ov = bf_overflow_i(nv, 0, op->bits, op->overflow, &wrapped);
            if (ov)
                nv = wrapped;
            ret = old;
        }
        if (ov && op->overflow == BF_FAIL) {
            gs_reply_null(&c->w);
            return false;
        }
        gs_reply_int(&c->w, ret);
        bf_put(p, op->offset, op->bits, (uint64_t)nv);
        return old != nv;
    }
    uint64_t old = bf_get_u(p, op->offset, op->bits), nv, wrapped = 0, ret;
    if (op->opcode == BF_INCRBY) {
        nv = old + (uint64_t)op->value;
        ov = bf_overflow_u(old, op->value, op->bits, op->overflow, &wrapped);
        if (ov)
            nv = wrapped;
        ret = nv;
    } else {
        nv = (uint64_t)op->value;
        ov = bf_overflow_u(nv, 0, op->bits, op->overflow, &wrapped);
        if (ov)
            nv = wrapped;
        ret = old;
    }
    if (ov && op->overflow == BF_FAIL) {
        gs_reply_null(&c->w);
        return false;
    }
    gs_reply_int(&c->w, (int64_t)ret);
    bf_put(p, op->offset, op->bits, nv);
    return old != nv;
}

static void bitfield(struct gs_client *c, size_t argc, struct gs_arg *argv, bool ro)
{
    size_t n = 0;
    int overflow = BF_WRAP;
    bool readonly = true;
    uint64_t highest = 0;
    /* At most one operation per 3 arguments: the array is bounded by argc. */
    struct bf_op *ops = malloc((argc / 3 + 1) * sizeof(*ops));
    if (!ops) {
        gs_error_oom(c);
        return;
    }
    for (size_t j = 2; j < argc; j++) {
        size_t rest = argc - j - 1;
        struct bf_op op = {0};
        if (gs_arg_is(&argv[j], "get") && rest >= 2) {
            op.opcode = BF_GET;
        } else if (gs_arg_is(&argv[j], "set") && rest >= 3) {
            op.opcode = BF_SET;
        } else if (gs_arg_is(&argv[j], "incrby") && rest >= 3) {
            op.opcode = BF_INCRBY;
        } else if (gs_arg_is(&argv[j], "overflow") && rest >= 1) {
            const struct gs_arg *t = &argv[++j];
            if (gs_arg_is(t, "wrap")) {
                overflow = BF_WRAP;
            } else if (gs_arg_is(t, "sat")) {
                overflow = BF_SAT;
            } else if (gs_arg_is(t, "fail")) {
                overflow = BF_FAIL;
            } else {
                gs_error(c, "ERR Invalid OVERFLOW type specified");
                free(ops);
                return;
            }
            continue;
        } else {
            gs_error_syntax(c);
            free(ops);
            return;
        }
        if (!bf_type(c, &argv[j + 1], &op.sign, &op.bits) ||
            !bf_offset(c, &argv[j + 2], op.bits, &op.offset)) {
            free(ops);
            return;
        }
        if (op.opcode != BF_GET) {
            readonly = false;
            if (highest < op.offset + (uint64_t)op.bits - 1)
                highest = op.offset + (uint64_t)op.bits - 1;
            if (!gs_arg_int(c, &argv[j + 3], &op.value, NULL)) {
                free(ops);
                return;
            }
        }
        op.overflow = overflow;
        ops[n++] = op;
        j += op.opcode == BF_GET ? 2 : 3;
    }
    bool wrong, grown = false;
    struct gs_entry *e;
    unsigned char *p = NULL;
    size_t len = 0;
    if (readonly) {
        e = gs_lookup_typed(c, &argv[1], GS_TYPE_STRING, 0, &wrong);
        if (wrong) {
            free(ops);
            return;
        }
        if (e)
            p = (unsigned char *)gs_entry_value(e, &len);
    } else {
        if (ro) {
            free(ops);
            gs_error(c, "ERR BITFIELD_RO only supports the GET subcommand");
            return;
        }
        /* Redis's lookupStringForBitCommand: made, or grown with zeros, to
         * hold the farthest bit written. */
        struct gs_store *s = c->db->store;
        e = gs_lookup_typed(c, &argv[1], GS_TYPE_STRING, GS_LOOKUP_WRITE, &wrong);
        if (wrong) {
            free(ops);
            return;
        }
        if (!e) {
            if (gs_store_set(s, argv[1].p, argv[1].len, "", 0, -1, &e)) {
                free(ops);
                gs_error_oom(c);
                return;
            }
            grown = true;
        }
        size_t need = (size_t)(highest >> 3) + 1;
        p = (unsigned char *)gs_entry_value(e, &len);
        if (len < need) {
            p = (unsigned char *)gs_store_resize_value(s, &e, need);
            if (!p) {
                free(ops);
                gs_error_oom(c);
                return;
            }
            memset(p + len, 0, need - len);
            len = need;
            grown = true;
        }
    }
    gs_reply_array(&c->w, n);
    bool changed = false;
    for (size_t i = 0; i < n; i++) {
        const struct bf_op *op = &ops[i];
        if (op->opcode != BF_GET) {
            changed |= bf_write(c, p, op);
            continue;
        }
        /* A GET reads a zero-padded copy of the 9 bytes it may span. */
        unsigned char buf[9] = {0};
        uint64_t byte = op->offset >> 3;
        for (uint64_t k = 0; k < 9 && p && byte + k < len; k++)
            buf[k] = p[byte + k];
        uint64_t at = op->offset - byte * 8;
        if (op->sign)
            gs_reply_int(&c->w, bf_get_i(buf, at, op->bits));
        else
            gs_reply_int(&c->w, (int64_t)bf_get_u(buf, at, op->bits));
    }
    if (changed || grown) /* WATCH sees what Redis signals */
        gs_store_signal_modified(c->db->store, e);
    free(ops);
}

void gs_cmd_bitfield(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    bitfield(c, argc, argv, false);
}

void gs_cmd_bitfield_ro(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    bitfield(c, argc, argv, true);
}
