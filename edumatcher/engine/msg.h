/*
 * EduMatcher messages: the C form of msg.def, its validators and the
 * binary frame codec.
 *
 * One flat struct, struct em_msg, carries any message: `kind` says which,
 * `present` has one bit per field (EM_BIT(f)) that is set. Only the fields
 * of the message's argument list (msg.def) may be present. Values are held
 * already parsed: strings NUL-terminated in fixed arrays, enumerations as
 * small integers, prices as a decimal (mantissa, decimals), since their
 * conversion to ticks needs the symbol (the engine does it).
 *
 * Invariants of a valid message (em_msg_check):
 *   1. every present field belongs to the message; every REQ field is set;
 *   2. every string has its ALF §2 form and length; every number its range;
 *   3. the fields agree with each other (em_msg_check_rules): the engine
 *      relies on it whether the message came as text or as a frame.
 *
 * Binary frame (little-endian, no padding; used between processes):
 *   u16 total length (including these two bytes) | u8 kind | u32 present |
 *   then each present field in the message's argument order:
 *     strings  u8 length + bytes      enums, BOOL  u8
 *     QTY, PCT u32                    COUNT, ID, MS u64
 *     PRICE    i64 mantissa + u8 decimals
 */
#ifndef EM_MSG_H
#define EM_MSG_H

#include <stddef.h>
#include <stdint.h>

/* ---- enumerations (values are the wire values; 0 means absent) ---- */
#define EM_SIDE_MAP(X)  X(BUY, "B") X(SELL, "S")
#define EM_OTYPE_MAP(X) X(LMT, "LMT") X(MKT, "MKT") X(STP, "STP") X(STL, "STL")
#define EM_TIF_MAP(X)   X(DAY, "DAY") X(GTC, "GTC") X(IOC, "IOC") X(FOK, "FOK")
#define EM_STP_MAP(X)   X(CN, "CN") X(CO, "CO") X(CB, "CB") X(DC, "DC")
#define EM_PHASE_MAP(X)                                                                            \
    X(CLOSED, "CLOSED")                                                                            \
    X(PREOPEN, "PREOPEN") X(CONTINUOUS, "CONTINUOUS") X(AUCTION, "AUCTION") X(HALTED, "HALTED")
/* ALF §4 REJECT codes, in the spec's order. */
#define EM_REJCODE_MAP(X)                                                                          \
    X(SYNTAX, "SYNTAX")                                                                            \
    X(MISSING_FIELD, "MISSING_FIELD")                                                              \
    X(BAD_VALUE, "BAD_VALUE")                                                                      \
    X(UNKNOWN_SYMBOL, "UNKNOWN_SYMBOL")                                                            \
    X(DUPLICATE_ID, "DUPLICATE_ID")                                                                \
    X(UNKNOWN_ORDER, "UNKNOWN_ORDER")                                                              \
    X(PHASE, "PHASE")                                                                              \
    X(HALTED, "HALTED")                                                                            \
    X(COLLAR, "COLLAR")                                                                            \
    X(AUTH, "AUTH")                                                                                \
    X(NOT_LOGGED_IN, "NOT_LOGGED_IN")                                                              \
    X(RATE_LIMIT, "RATE_LIMIT")                                                                    \
    X(LINE_TOO_LONG, "LINE_TOO_LONG")                                                              \
    X(GATEWAY_DISABLED, "GATEWAY_DISABLED")                                                        \
    X(RESEND, "RESEND")                                                                            \
    X(LOGGED_IN_ELSEWHERE, "LOGGED_IN_ELSEWHERE")
/* ALF §4 CANCELED reasons. */
#define EM_CXLWHY_MAP(X)                                                                           \
    X(USER, "USER")                                                                                \
    X(IOC, "IOC")                                                                                  \
    X(FOK, "FOK")                                                                                  \
    X(MKT, "MKT")                                                                                  \
    X(STP, "STP")                                                                                  \
    X(MASS, "MASS") X(DISCONNECT, "DISCONNECT") X(EXPIRED, "EXPIRED") X(REPLACE, "REPLACE")

enum em_side {
    EM_SIDE_NONE,
#define X(n, s) EM_SIDE_##n,
    EM_SIDE_MAP(X)
#undef X
};
enum em_otype {
    EM_OTYPE_NONE,
#define X(n, s) EM_OTYPE_##n,
    EM_OTYPE_MAP(X)
#undef X
};
enum em_tif {
    EM_TIF_NONE,
#define X(n, s) EM_TIF_##n,
    EM_TIF_MAP(X)
#undef X
};
enum em_stp {
    EM_STP_NONE,
#define X(n, s) EM_STP_##n,
    EM_STP_MAP(X)
#undef X
};
enum em_phase {
    EM_PHASE_NONE,
#define X(n, s) EM_PHASE_##n,
    EM_PHASE_MAP(X)
#undef X
};
enum em_rejcode {
    EM_REJ_NONE,
#define X(n, s) EM_REJ_##n,
    EM_REJCODE_MAP(X)
#undef X
};
enum em_cxlwhy {
    EM_WHY_NONE,
#define X(n, s) EM_WHY_##n,
    EM_CXLWHY_MAP(X)
#undef X
};

/* ---- value types ---- */
#define EM_GW_MAX    16
#define EM_CL_MAX    32
#define EM_SYM_MAX   12
#define EM_TOKEN_MAX 64
#define EM_QTY_MAX   1000000000u
/* Integers and prices have at most this many digits (docs/alf.md A.1–2). */
#define EM_DIGITS_MAX 18

/* A decimal price as written: value = mant / 10^dec. */
struct em_price {
    int64_t mant;
    uint8_t dec;
};

typedef char em_t_GW[EM_GW_MAX + 1];
typedef char em_t_CL[EM_CL_MAX + 1];
typedef char em_t_SYM[EM_SYM_MAX + 1];
typedef char em_t_TOKEN[EM_TOKEN_MAX + 1];
typedef uint8_t em_t_SIDE, em_t_OTYPE, em_t_TIF, em_t_STP, em_t_PHASE, em_t_REJCODE, em_t_CXLWHY,
    em_t_BOOL;
typedef uint32_t em_t_QTY, em_t_PCT;
typedef uint64_t em_t_COUNT, em_t_ID, em_t_MS;
typedef struct em_price em_t_PRICE;

/* The distinct value types, for the codec's switch. */
enum em_vtype {
    EM_VT_GW,
    EM_VT_CL,
    EM_VT_SYM,
    EM_VT_TOKEN,
    EM_VT_SIDE,
    EM_VT_OTYPE,
    EM_VT_TIF,
    EM_VT_STP,
    EM_VT_PHASE,
    EM_VT_REJCODE,
    EM_VT_CXLWHY,
    EM_VT_BOOL,
    EM_VT_QTY,
    EM_VT_PCT,
    EM_VT_COUNT,
    EM_VT_ID,
    EM_VT_MS,
    EM_VT_PRICE,
};

/* Field ids: EM_F_<name>. */
enum em_field {
#define EM_FIELD(name, key, type) EM_F_##name,
#include "edumatcher/engine/msg.def"
    EM_F__COUNT
};
#define EM_BIT(f) (1u << EM_F_##f)

/* Message kinds: EM_MSG_<NAME>; 0 is no message. */
enum em_kind {
    EM_MSG__NONE,
#define EM_MSG(name, text, cls) EM_MSG_##name,
#include "edumatcher/engine/msg.def"
    EM_MSG__COUNT
};

/* Who may send a message. */
enum em_class { EM_CLASS_CLIENT, EM_CLASS_OPER, EM_CLASS_EVENT };

/* Any message. Only the fields whose bit is in `present` are meaningful. */
struct em_msg {
    uint8_t kind; /* enum em_kind */
    uint32_t present;
#define EM_FIELD(name, key, type) em_t_##type name;
#include "edumatcher/engine/msg.def"
};

/* ---- tables generated from msg.def ---- */
struct em_field_info {
    const char *key;
    uint8_t keylen;
    uint8_t vtype;   /* enum em_vtype */
    uint16_t offset; /* in struct em_msg */
};
extern const struct em_field_info em_fields[EM_F__COUNT];

struct em_msg_info {
    const char *text;
    uint8_t textlen;
    uint8_t cls; /* enum em_class */
    uint8_t nargs;
    uint8_t args[12];  /* field ids in wire order */
    uint32_t allowed;  /* bit set of args */
    uint32_t required; /* bit set of REQ args */
};
extern const struct em_msg_info em_msgs[EM_MSG__COUNT];

/* Enumeration names ("B", "LMT", "SYNTAX", …); "" for 0 or out of range. */
const char *em_side_name(unsigned v);
const char *em_otype_name(unsigned v);
const char *em_tif_name(unsigned v);
const char *em_stp_name(unsigned v);
const char *em_phase_name(unsigned v);
const char *em_rejcode_name(unsigned v);
const char *em_cxlwhy_name(unsigned v);

/* ---- value validators (shared by the text parser and the codec) ---- */

/* Whether s[0..n) has the form of a gateway id / client order id / symbol
 * / login token (ALF §2; docs/alf.md). */
int em_valid_gw(const char *s, size_t n);
int em_valid_cl(const char *s, size_t n);
int em_valid_sym(const char *s, size_t n);
int em_valid_token(const char *s, size_t n);

/* Check a whole message against its definition: invariants 1–3 above.
 * Returns 0, or EM_REJ_MISSING_FIELD / EM_REJ_BAD_VALUE / EM_REJ_SYNTAX
 * (a field that does not belong, or an unknown kind). */
int em_msg_check(const struct em_msg *m);

/* Invariant 3 alone, on a message whose fields are each valid: the rules
 * that tie fields together (ALF §3, §7; docs/alf.md A.6, A.10): NEW's px
 * and stop by order type, peak (LMT, not IOC/FOK, < qty), REPLACE's qty or
 * px, PHASE's phase. Returns 0, EM_REJ_MISSING_FIELD or EM_REJ_BAD_VALUE. */
int em_msg_check_rules(const struct em_msg *m);

/* Numbered messages a gateway keeps until answered, per session, and the
 * first replies the engine keeps per gateway id to answer them again
 * (field seq; docs/alf.md I): the same bound on both sides. */
#define EM_RESEND_WINDOW 4096
/* Events the engine keeps per gateway id to send again after a RESYNC
 * (field eseq; docs/alf.md I.6). */
#define EM_EVENT_WINDOW 1024

/* ---- binary frames ---- */
#define EM_FRAME_MAX 512

/* Encode m into buf (capacity cap). Returns the frame length (> 0) or
 * CORE_ETOOBIG when it does not fit. Does not validate m. */
int em_frame_encode(const struct em_msg *m, uint8_t *buf, size_t cap);

/* Decode one frame from buf[0..len) into *out, validating it completely
 * (em_msg_check). Returns the frame length consumed, CORE_EINCOMPLETE when
 * buf holds less than a frame, or CORE_EPROTO when it is malformed. */
int em_frame_decode(const uint8_t *buf, size_t len, struct em_msg *out);

/* Unchecked fast builders for the hot events (the caller is the engine,
 * the authority for these values). They write exactly the bytes that
 * em_frame_encode writes for the same message (tests/unit pins this);
 * cl must be NUL-terminated and at most EM_CL_MAX bytes. buf must hold
 * EM_FRAME_MAX bytes. Return the frame length. */
size_t em_frame_build_ack(uint8_t *buf, const char *cl, uint64_t oid);
size_t em_frame_build_fill(uint8_t *buf, const char *cl, uint64_t oid, uint64_t tid,
                           struct em_price px, uint32_t qty, uint64_t leaves, uint64_t cum);
/* Add the ID field `field` (EM_F_seq, EM_F_eseq) with value v to the
 * encoded frame buf[0..len): the same bytes as encoding the message with
 * it set. buf holds at least len + 8 bytes. Returns the new length, or 0
 * (the kind has no such field, it is present, a field after it in wire
 * order is present, or the frame would exceed EM_FRAME_MAX). */
size_t em_frame_append_id(uint8_t *buf, size_t len, unsigned field, uint64_t v);
/* em_frame_append_id(buf, len, EM_F_seq, seq). */
size_t em_frame_append_seq(uint8_t *buf, size_t len, uint64_t seq);

#endif
