/*
 * FIX 4.4 tag=value codec: framing, decoding and building of messages, no
 * I/O and no allocation (docs/fix.md, "Wire format").
 *
 * A message on the wire is
 *
 *   8=FIX.4.4 <SOH> 9=<BodyLength> <SOH> 35=<MsgType> <SOH> ... 10=<CheckSum> <SOH>
 *
 * where BodyLength counts the bytes after the SOH that ends field 9 up to
 * and including the SOH before `10=`, and CheckSum is the sum of every
 * byte before `10=`, modulo 256, as three digits.
 *
 * Two steps, as the FIX session protocol separates them:
 *  1. em_fix_frame() finds one message in a byte stream and verifies
 *     BeginString, BodyLength and CheckSum. A message that fails there is
 *     *garbled*: the protocol says to drop it without a reply and without
 *     consuming a sequence number, so framing only says how many bytes to
 *     skip.
 *  2. em_fix_decode() splits a framed message into fields. A fault found
 *     here (a tag that is not a number, a field without a value, a tag
 *     twice, a value too long) is answered with a session-level Reject(3)
 *     naming the tag and a SessionRejectReason(373), so it is reported in
 *     `struct em_fix_msg` with as much of the header as could be read
 *     (MsgSeqNum above all).
 *
 * Sizes are bounded so that a peer cannot make the gateway buffer without
 * end: a message is at most EM_FIX_MSG_MAX bytes, EM_FIX_FIELDS_MAX
 * fields, values EM_FIX_VALUE_MAX bytes.
 */
#ifndef EM_FIX_CODEC_H
#define EM_FIX_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EM_FIX_SOH         '\001'
#define EM_FIX_MSG_MAX     4096u
#define EM_FIX_FIELDS_MAX  96u
#define EM_FIX_VALUE_MAX   128u
#define EM_FIX_BEGINSTRING "FIX.4.4"

/* Tags used by the codec, the session layer and the gateway. */
enum em_fix_tag {
    EM_FIX_TAG_ACCOUNT = 1,
    EM_FIX_TAG_AVGPX = 6,
    EM_FIX_TAG_BEGINSEQNO = 7,
    EM_FIX_TAG_BEGINSTRING = 8,
    EM_FIX_TAG_BODYLENGTH = 9,
    EM_FIX_TAG_CHECKSUM = 10,
    EM_FIX_TAG_CLORDID = 11,
    EM_FIX_TAG_CUMQTY = 14,
    EM_FIX_TAG_ENDSEQNO = 16,
    EM_FIX_TAG_EXECID = 17,
    EM_FIX_TAG_LASTPX = 31,
    EM_FIX_TAG_LASTQTY = 32,
    EM_FIX_TAG_MSGSEQNUM = 34,
    EM_FIX_TAG_MSGTYPE = 35,
    EM_FIX_TAG_NEWSEQNO = 36,
    EM_FIX_TAG_ORDERID = 37,
    EM_FIX_TAG_ORDERQTY = 38,
    EM_FIX_TAG_ORDSTATUS = 39,
    EM_FIX_TAG_ORDTYPE = 40,
    EM_FIX_TAG_ORIGCLORDID = 41,
    EM_FIX_TAG_POSSDUPFLAG = 43,
    EM_FIX_TAG_PRICE = 44,
    EM_FIX_TAG_REFSEQNUM = 45,
    EM_FIX_TAG_SENDERCOMPID = 49,
    EM_FIX_TAG_SENDINGTIME = 52,
    EM_FIX_TAG_SIDE = 54,
    EM_FIX_TAG_SYMBOL = 55,
    EM_FIX_TAG_TARGETCOMPID = 56,
    EM_FIX_TAG_TEXT = 58,
    EM_FIX_TAG_TIMEINFORCE = 59,
    EM_FIX_TAG_TRANSACTTIME = 60,
    EM_FIX_TAG_POSSRESEND = 97,
    EM_FIX_TAG_ENCRYPTMETHOD = 98,
    EM_FIX_TAG_STOPPX = 99,
    EM_FIX_TAG_CXLREJREASON = 102,
    EM_FIX_TAG_ORDREJREASON = 103,
    EM_FIX_TAG_HEARTBTINT = 108,
    EM_FIX_TAG_MAXFLOOR = 111,
    EM_FIX_TAG_TESTREQID = 112,
    EM_FIX_TAG_ORIGSENDINGTIME = 122,
    EM_FIX_TAG_GAPFILLFLAG = 123,
    EM_FIX_TAG_RESETSEQNUMFLAG = 141,
    EM_FIX_TAG_EXECTYPE = 150,
    EM_FIX_TAG_LEAVESQTY = 151,
    EM_FIX_TAG_REFTAGID = 371,
    EM_FIX_TAG_REFMSGTYPE = 372,
    EM_FIX_TAG_SESSIONREJECTREASON = 373,
    EM_FIX_TAG_BUSINESSREJECTREFID = 379,
    EM_FIX_TAG_BUSINESSREJECTREASON = 380,
    EM_FIX_TAG_CXLREJRESPONSETO = 434,
    EM_FIX_TAG_MASSCANCELREQUESTTYPE = 530,
    EM_FIX_TAG_MASSCANCELRESPONSE = 531,
    EM_FIX_TAG_MASSCANCELREJECTREASON = 532,
    EM_FIX_TAG_TOTALAFFECTEDORDERS = 533,
    EM_FIX_TAG_USERNAME = 553,
    EM_FIX_TAG_PASSWORD = 554,
};

/* SessionRejectReason(373) values the codec and the session layer use. */
enum em_fix_reject_reason {
    EM_FIX_RR_INVALID_TAG_NUMBER = 0,
    EM_FIX_RR_REQUIRED_TAG_MISSING = 1,
    EM_FIX_RR_TAG_NOT_DEFINED_FOR_MSGTYPE = 2,
    EM_FIX_RR_TAG_WITHOUT_VALUE = 4,
    EM_FIX_RR_VALUE_OUT_OF_RANGE = 5,
    EM_FIX_RR_INCORRECT_DATA_FORMAT = 6,
    EM_FIX_RR_COMPID_PROBLEM = 9,
    EM_FIX_RR_SENDINGTIME_ACCURACY = 10,
    EM_FIX_RR_INVALID_MSGTYPE = 11,
    EM_FIX_RR_TAG_APPEARS_TWICE = 13,
    EM_FIX_RR_TAG_OUT_OF_ORDER = 14,
    EM_FIX_RR_OTHER = 99,
};

/* em_fix_frame() results besides 0 (a whole, valid message). */
enum em_fix_frame_result {
    EM_FIX_FRAME_MORE = 1,    /* not a whole message yet: read more */
    EM_FIX_FRAME_GARBLED = 2, /* drop *skip bytes, try again */
};

/* Find the message at the start of buf[0, len).
 * Returns 0 and sets *msg_len when buf starts with a whole message whose
 * BeginString is FIX.4.4 and whose BodyLength and CheckSum are right.
 * Returns EM_FIX_FRAME_MORE when buf holds the start of such a message but
 * not all of it (len < EM_FIX_MSG_MAX is then guaranteed). Returns
 * EM_FIX_FRAME_GARBLED and sets *msg_len to the number of bytes to drop
 * (at least 1, up to the next `8=FIX` or the end of buf) when the bytes at
 * the start cannot be a valid message: wrong BeginString, BodyLength not a
 * number or too large, no `10=` where BodyLength says, wrong CheckSum.
 * Never reads outside buf; buf is not modified. */
int em_fix_frame(const char *buf, size_t len, size_t *msg_len);

struct em_fix_field {
    uint32_t tag;
    uint16_t off; /* of the value, from the start of the message */
    uint16_t len;
};

/* A decoded message. Values point into the caller's buffer (the message
 * passed to em_fix_decode), which must outlive every use of the fields. */
struct em_fix_msg {
    const char *buf;
    size_t len;
    char type[3]; /* MsgType(35), NUL-terminated ("" when missing) */
    uint64_t seq; /* MsgSeqNum(34), 0 when missing or malformed */
    bool poss_dup;
    /* the first fault found, reason < 0: none. tag: the field concerned
     * (0 when the tag itself could not be read) */
    int fault_reason;
    uint32_t fault_tag;
    uint16_t nfields; /* from MsgType(35) on, CheckSum(10) not included */
    struct em_fix_field fields[EM_FIX_FIELDS_MAX];
};

/* Split a framed message (buf, len as em_fix_frame returned) into fields.
 * Returns 0 when the message is well formed: MsgType third, every tag a
 * positive number without leading zeros, every value non-empty, at most
 * EM_FIX_VALUE_MAX bytes, no tag twice, at most EM_FIX_FIELDS_MAX fields.
 * Otherwise returns CORE_EPROTO and m->fault_reason / fault_tag say why;
 * m->type and m->seq are still set when they could be read. */
int em_fix_decode(const char *buf, size_t len, struct em_fix_msg *m);

/* The value of tag in m: sets *val (not NUL-terminated) and *len and
 * returns true, or returns false when the tag is absent. */
bool em_fix_get(const struct em_fix_msg *m, uint32_t tag, const char **val, size_t *len);

/* The value of tag as an unsigned decimal integer (1 to 18 digits).
 * Returns 0, CORE_ENOTFOUND when absent, CORE_EINVAL when malformed. */
int em_fix_get_uint(const struct em_fix_msg *m, uint32_t tag, uint64_t *out);

/* The value of tag as one character. Returns 0, CORE_ENOTFOUND, or
 * CORE_EINVAL when the value is longer than one character. */
int em_fix_get_char(const struct em_fix_msg *m, uint32_t tag, char *out);

/* The value of tag as a FIX Price: digits with at most one '.', at least
 * one digit, no sign, no exponent, at most 18 significant digits. Sets
 * *mant and *decimals so that the value is mant / 10^decimals (trailing
 * zeros kept: "10.50" is 1050, 2). Returns 0, CORE_ENOTFOUND, CORE_EINVAL. */
int em_fix_get_price(const struct em_fix_msg *m, uint32_t tag, int64_t *mant, int *decimals);

/* Builds one message into a caller's buffer. Usage:
 *
 *   struct em_fix_out o;
 *   em_fix_begin(&o, buf, sizeof buf, "8");
 *   em_fix_add_str(&o, EM_FIX_TAG_SENDERCOMPID, "EDUMATCHER", 10); ...
 *   size_t n = em_fix_finish(&o);   // 0: did not fit
 *
 * Fields are written in the order added, after BeginString, BodyLength
 * and MsgType; em_fix_finish fills BodyLength and appends CheckSum.
 * Values are copied as given: the caller keeps SOH out of them. */
struct em_fix_out {
    char *buf;
    size_t cap, len;
    bool overflow;
};

/* buf: at least 64 bytes, owned by the caller; msgtype: 1–2 characters. */
void em_fix_begin(struct em_fix_out *o, char *buf, size_t cap, const char *msgtype);
void em_fix_add_str(struct em_fix_out *o, uint32_t tag, const char *val, size_t len);
void em_fix_add_cstr(struct em_fix_out *o, uint32_t tag, const char *val);
void em_fix_add_uint(struct em_fix_out *o, uint32_t tag, uint64_t v);
void em_fix_add_char(struct em_fix_out *o, uint32_t tag, char c);
/* A price mant / 10^decimals, printed with exactly `decimals` decimals. */
void em_fix_add_price(struct em_fix_out *o, uint32_t tag, int64_t mant, int decimals);
/* UTCTimestamp with milliseconds (YYYYMMDD-HH:MM:SS.sss) of ns since the
 * epoch. */
void em_fix_add_time(struct em_fix_out *o, uint32_t tag, uint64_t unix_ns);
/* Returns the message's length, or 0 when it did not fit in cap. */
size_t em_fix_finish(struct em_fix_out *o);

#endif
