/* Messages: binary round trip of every message, ALF parse/format round
 * trip, the fast builders pinned to the validating encoder, the parser's
 * fault order, malformed frames. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "edumatcher/gateway/alf/alf.h"
#include "edumatcher/engine/msg.h"

/* One line per message kind, with every field it can carry. */
static const char *const samples[] = {
    "LOGIN gw=GW_1 token=s3cr3t!",
    "NEW cl=Abc-1.x sym=ABC.L side=B qty=1000000000 px=123.45 type=STL stop=120.5 tif=GTC "
    "stp=DC",
    "NEW cl=a sym=A side=S qty=7 px=1 peak=3",
    "NEW cl=m sym=A side=S qty=7 type=MKT tif=FOK stp=CO",
    "CANCEL cl=x",
    "REPLACE cl=x qty=5 px=0.01",
    "MASSCANCEL sym=ABC",
    "MASSCANCEL",
    "PING",
    "LOGOUT",
    "DISCONNECT",
    "SYMBOL sym=ABC tick=0.01 lot=100 ref=99.5 band=2.5 cb_band=10 cb_ms=0",
    "PHASE sym=ABC phase=PREOPEN",
    "HALT sym=ABC",
    "RESUME sym=ABC",
    "GATEWAY gw=OPS enabled=0",
    "TICK ms=999999999999999999",
    "LOGGEDIN gw=X",
    "ACK cl=a oid=999999999999999999",
    "REJECT cl=a reason=GATEWAY_DISABLED",
    "REJECT reason=LINE_TOO_LONG",
    "FILL cl=a oid=1 tid=2 px=10.00 qty=5 leaves=0 cum=5",
    "CANCELED cl=a oid=1 qty=5 cum=0 reason=DISCONNECT",
    "REPLACED cl=a oid=1 qty=5 px=0.05 leaves=5",
    "TRIGGERED cl=a oid=3",
    "PONG",
    "OK",
    "ACK cl=a oid=1 seq=3 eseq=9",
    "FILL cl=a oid=1 tid=2 px=10.00 qty=5 leaves=0 cum=5 eseq=999999999999999999",
    "PONG seq=1 eseq=2",
    "RESYNC eseq=0",
    "RESYNC eseq=7 next=8 last=9",
};

static void test_every_kind_has_a_sample(void **state)
{
    int seen[EM_MSG__COUNT] = {0};
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        struct em_msg m;
        assert_int_equal(em_alf_parse(samples[i], strlen(samples[i]), &m), 0);
        seen[m.kind] = 1;
    }
    for (int k = 1; k < EM_MSG__COUNT; k++)
        assert_true(seen[k]);
}

static void test_alf_round_trip(void **state)
{
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        struct em_msg m;
        char out[EM_ALF_FORMAT_MAX];
        assert_int_equal(em_alf_parse(samples[i], strlen(samples[i]), &m), 0);
        size_t n = em_alf_format(&m, out);
        out[n] = 0;
        assert_string_equal(out, samples[i]);
    }
}

static void test_binary_round_trip(void **state)
{
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        struct em_msg m, d;
        uint8_t frame[EM_FRAME_MAX];
        char a[EM_ALF_FORMAT_MAX], b[EM_ALF_FORMAT_MAX];
        assert_int_equal(em_alf_parse(samples[i], strlen(samples[i]), &m), 0);
        assert_int_equal(em_msg_check(&m), 0);
        int n = em_frame_encode(&m, frame, sizeof frame);
        assert_true(n > 0);
        assert_int_equal(em_frame_decode(frame, (size_t)n, &d), n);
        assert_int_equal(d.kind, m.kind);
        assert_int_equal(d.present, m.present);
        a[em_alf_format(&m, a)] = 0;
        b[em_alf_format(&d, b)] = 0;
        assert_string_equal(a, b);
        /* every shorter prefix is incomplete, never misread */
        for (int k = 0; k < n; k++)
            assert_int_equal(em_frame_decode(frame, (size_t)k, &d), CORE_EINCOMPLETE);
        /* re-encoding the decoded message gives the same bytes */
        uint8_t again[EM_FRAME_MAX];
        assert_int_equal(em_frame_encode(&d, again, sizeof again), n);
        assert_memory_equal(frame, again, (size_t)n);
    }
}

static void test_decode_rejects_bad_frames(void **state)
{
    struct em_msg m, d;
    uint8_t f[EM_FRAME_MAX];
    const char *line = "FILL cl=a oid=1 tid=2 px=10.00 qty=5 leaves=0 cum=5";
    assert_int_equal(em_alf_parse(line, strlen(line), &m), 0);
    int n = em_frame_encode(&m, f, sizeof f);
    assert_true(n > 0);
    f[2] = 0; /* no such kind */
    assert_int_equal(em_frame_decode(f, (size_t)n, &d), CORE_EPROTO);
    f[2] = EM_MSG_FILL;
    m.qty = 0; /* out of range */
    n = em_frame_encode(&m, f, sizeof f);
    assert_int_equal(em_frame_decode(f, (size_t)n, &d), CORE_EPROTO);
    m.qty = 5;
    m.present &= ~EM_BIT(tid); /* a required field missing */
    n = em_frame_encode(&m, f, sizeof f);
    assert_int_equal(em_frame_decode(f, (size_t)n, &d), CORE_EPROTO);
    m.present |= EM_BIT(tid);
    n = em_frame_encode(&m, f, sizeof f);
    f[0] = (uint8_t)(n + 1); /* length says more than the fields hold */
    f[n] = 0;
    assert_int_equal(em_frame_decode(f, (size_t)n + 1, &d), CORE_EPROTO);
    strcpy(m.cl, "bad cl");
    n = em_frame_encode(&m, f, sizeof f);
    assert_int_equal(em_frame_decode(f, (size_t)n, &d), CORE_EPROTO);
    assert_int_equal(em_frame_encode(&m, f, 10), CORE_ETOOBIG);
}

/* Encode the message of ALF line s after clearing the fields in `drop`,
 * then decode it: the decoder's result. */
static int decode_without(const char *s, uint32_t drop, struct em_msg *d)
{
    struct em_msg m;
    uint8_t f[EM_FRAME_MAX];
    assert_int_equal(em_alf_parse(s, strlen(s), &m), 0);
    m.present &= ~drop;
    int n = em_frame_encode(&m, f, sizeof f);
    assert_true(n > 0);
    return em_frame_decode(f, (size_t)n, d);
}

/* A frame comes from another process: the decoder applies the rules that
 * tie fields together (ALF §3, docs/alf.md A.6, A.10) as the ALF parser
 * does, or the engine would take a limit order without a price. */
static void test_decode_applies_message_rules(void **state)
{
    struct em_msg d;
    uint8_t f[EM_FRAME_MAX];
    assert_true(decode_without("NEW cl=a sym=A side=B qty=2 px=1 peak=1", 0, &d) > 0);
    /* LMT, STL need px; STP, STL need stop; REPLACE needs qty or px */
    assert_int_equal(decode_without("NEW cl=a sym=A side=B qty=1 px=1", EM_BIT(px), &d),
                     CORE_EPROTO);
    assert_int_equal(
        decode_without("NEW cl=a sym=A side=B qty=1 px=1 type=STL stop=1", EM_BIT(stop), &d),
        CORE_EPROTO);
    assert_int_equal(
        decode_without("NEW cl=a sym=A side=B qty=1 type=STP stop=1", EM_BIT(stop), &d),
        CORE_EPROTO);
    assert_int_equal(decode_without("REPLACE cl=a qty=1 px=1", EM_BIT(qty) | EM_BIT(px), &d),
                     CORE_EPROTO);
    /* fields the order type does not allow */
    struct em_msg m;
    const char *mkt = "NEW cl=a sym=A side=B qty=2 type=MKT";
    assert_int_equal(em_alf_parse(mkt, strlen(mkt), &m), 0);
    m.present |= EM_BIT(px);
    m.px = (struct em_price){1, 0};
    assert_int_equal(em_frame_decode(f, (size_t)em_frame_encode(&m, f, sizeof f), &d), CORE_EPROTO);
    m.present &= ~EM_BIT(px);
    m.present |= EM_BIT(peak);
    m.peak = 1;
    assert_int_equal(em_frame_decode(f, (size_t)em_frame_encode(&m, f, sizeof f), &d), CORE_EPROTO);
    const char *lmt = "NEW cl=a sym=A side=B qty=2 px=1 peak=1";
    assert_int_equal(em_alf_parse(lmt, strlen(lmt), &m), 0);
    m.peak = 2; /* peak >= qty */
    assert_int_equal(em_frame_decode(f, (size_t)em_frame_encode(&m, f, sizeof f), &d), CORE_EPROTO);
    m.peak = 1;
    m.present |= EM_BIT(tif);
    m.tif = EM_TIF_IOC;
    assert_int_equal(em_frame_decode(f, (size_t)em_frame_encode(&m, f, sizeof f), &d), CORE_EPROTO);
    m.tif = EM_TIF_GTC;
    m.present |= EM_BIT(stop);
    m.stop = (struct em_price){1, 0};
    assert_int_equal(em_frame_decode(f, (size_t)em_frame_encode(&m, f, sizeof f), &d), CORE_EPROTO);
    /* an operator sets PREOPEN, CONTINUOUS or CLOSED only (§7) */
    const char *ph = "PHASE sym=A phase=PREOPEN";
    assert_int_equal(em_alf_parse(ph, strlen(ph), &m), 0);
    m.phase = EM_PHASE_AUCTION;
    assert_int_equal(em_frame_decode(f, (size_t)em_frame_encode(&m, f, sizeof f), &d), CORE_EPROTO);
    m.phase = EM_PHASE_HALTED;
    assert_int_equal(em_frame_decode(f, (size_t)em_frame_encode(&m, f, sizeof f), &d), CORE_EPROTO);
}

/* A frame's request has a text form: its ids stay within ALF's 18 digits
 * (docs/alf.md A.1), as the ALF parser requires; an event's need not. The
 * fuzzer found a REPLACE with seq=18374686754550448143 that decoded but
 * whose text did not parse. */
static void test_decode_bounds_the_ids_of_requests(void **state)
{
    (void)state;
    struct em_msg m, d;
    uint8_t f[EM_FRAME_MAX];
    const char *rep = "REPLACE cl=a qty=1 seq=1";
    assert_int_equal(em_alf_parse(rep, strlen(rep), &m), 0);
    m.seq = 999999999999999999ull; /* 18 digits */
    assert_true(em_frame_decode(f, (size_t)em_frame_encode(&m, f, sizeof f), &d) > 0);
    m.seq = 1000000000000000000ull; /* 19 */
    assert_int_equal(em_frame_decode(f, (size_t)em_frame_encode(&m, f, sizeof f), &d), CORE_EPROTO);
    m.seq = 18374686754550448143ull;
    assert_int_equal(em_frame_decode(f, (size_t)em_frame_encode(&m, f, sizeof f), &d), CORE_EPROTO);
    const char *rs = "RESYNC eseq=1";
    assert_int_equal(em_alf_parse(rs, strlen(rs), &m), 0);
    m.eseq = UINT64_MAX;
    assert_int_equal(em_frame_decode(f, (size_t)em_frame_encode(&m, f, sizeof f), &d), CORE_EPROTO);
    /* the engine's events: any 64-bit id */
    uint8_t ack[EM_FRAME_MAX];
    size_t n = em_frame_build_ack(ack, "a", UINT64_MAX);
    assert_true(em_frame_decode(ack, n, &d) > 0);
    assert_true(d.oid == UINT64_MAX);
}

static void test_fast_builders_match_encoder(void **state)
{
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 2000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        struct em_msg m;
        memset(&m, 0, sizeof m);
        size_t cl_len = 1 + x % EM_CL_MAX;
        for (size_t k = 0; k < cl_len; k++)
            m.cl[k] = "abcXYZ019_-."[(x >> (k % 50)) % 12];
        m.oid = x;
        m.tid = x >> 3;
        m.px.mant = (int64_t)(1 + (x >> 5) % 999999999999ull);
        m.px.dec = (uint8_t)(x % 9);
        m.qty = (uint32_t)(1 + x % EM_QTY_MAX);
        m.leaves = x >> 20;
        m.cum = x >> 30;
        uint8_t a[EM_FRAME_MAX], b[EM_FRAME_MAX];

        m.kind = EM_MSG_FILL;
        m.present = EM_BIT(cl) | EM_BIT(oid) | EM_BIT(tid) | EM_BIT(px) | EM_BIT(qty) |
                    EM_BIT(leaves) | EM_BIT(cum);
        int n = em_frame_encode(&m, a, sizeof a);
        size_t f = em_frame_build_fill(b, m.cl, m.oid, m.tid, m.px, m.qty, m.leaves, m.cum);
        assert_int_equal((size_t)n, f);
        assert_memory_equal(a, b, f);

        /* the engine's number appended: as encoded with it */
        m.eseq = x >> 7;
        m.present |= EM_BIT(eseq);
        n = em_frame_encode(&m, a, sizeof a);
        f = em_frame_append_id(b, f, EM_F_eseq, m.eseq);
        assert_int_equal((size_t)n, f);
        assert_memory_equal(a, b, f);
        assert_true(f <= 93); /* the longest event the host keeps (EV_FRAME 96) */

        m.kind = EM_MSG_ACK;
        m.present = EM_BIT(cl) | EM_BIT(oid);
        n = em_frame_encode(&m, a, sizeof a);
        f = em_frame_build_ack(b, m.cl, m.oid);
        assert_int_equal((size_t)n, f);
        assert_memory_equal(a, b, f);

        /* seq, then eseq after it; not seq after eseq, nor twice */
        m.seq = x >> 9;
        m.present |= EM_BIT(seq) | EM_BIT(eseq);
        n = em_frame_encode(&m, a, sizeof a);
        f = em_frame_append_seq(b, f, m.seq);
        f = em_frame_append_id(b, f, EM_F_eseq, m.eseq);
        assert_int_equal((size_t)n, f);
        assert_memory_equal(a, b, f);
        assert_int_equal(em_frame_append_seq(b, f, m.seq), 0);
        assert_int_equal(em_frame_append_id(b, f, EM_F_eseq, 1), 0);
        f = em_frame_build_ack(b, m.cl, m.oid);
        f = em_frame_append_id(b, f, EM_F_eseq, m.eseq);
        assert_int_equal(em_frame_append_seq(b, f, m.seq), 0);
        assert_int_equal(em_frame_append_id(b, f, EM_F_oid, 1), 0); /* present */
        assert_int_equal(em_frame_append_id(b, f, EM_F_tid, 1), 0); /* not an ACK's */
    }
}

/* Parse s; return the reject code, and the echoed cl in *cl ("" if none). */
static int parse(const char *s, char *cl)
{
    struct em_msg m;
    int rc = em_alf_parse(s, strlen(s), &m);
    strcpy(cl, rc && (m.present & EM_BIT(cl)) ? m.cl : "");
    return rc;
}

static void test_parse_fault_order(void **state)
{
    char cl[64];
    /* ALF §4 / docs/alf.md A, B: SYNTAX before MISSING_FIELD before BAD_VALUE */
    assert_int_equal(parse("NEW cl=a side=Q foo=1", cl), EM_REJ_SYNTAX);
    assert_string_equal(cl, "a");
    assert_int_equal(parse("NEW cl=a side=Q", cl), EM_REJ_MISSING_FIELD);
    assert_int_equal(parse("NEW cl=a sym=A side=Q qty=1 px=1", cl), EM_REJ_BAD_VALUE);
    assert_int_equal(parse("NEW cl=a sym=A side=B qty=1 type=XX", cl), EM_REJ_BAD_VALUE);
    assert_int_equal(parse("NEW cl=a sym=A side=B qty=1 type=STL px=1", cl), EM_REJ_MISSING_FIELD);
    assert_int_equal(parse("NEW cl=a sym=A side=B qty=1 px=1 stop=1", cl), EM_REJ_BAD_VALUE);
    assert_int_equal(parse("NEW cl=a sym=A side=B qty=2 px=1 peak=1 tif=IOC", cl),
                     EM_REJ_BAD_VALUE);
    assert_int_equal(parse("NEW cl=a sym=A side=B qty=2 px=1 peak=1", cl), 0);
    assert_int_equal(parse("NEW cl= sym=A side=B qty=1 px=1", cl), EM_REJ_BAD_VALUE);
    assert_string_equal(cl, "");
    assert_int_equal(parse("CANCEL", cl), EM_REJ_MISSING_FIELD);
    assert_int_equal(parse("CANCEL cl=a cl=b", cl), EM_REJ_SYNTAX);
    assert_string_equal(cl, "a");
    assert_int_equal(parse("cancel cl=a", cl), EM_REJ_SYNTAX);
    assert_int_equal(parse("PING x", cl), EM_REJ_SYNTAX);
    assert_int_equal(parse("  PING  ", cl), 0);
    /* values: docs/alf.md A.1, A.2, A.4 */
    static const char *const bad_px[] = {".5", "5.",   "-1",   "1e3",
                                         "0",  "0.00", "1..2", "1234567890123456789"};
    for (size_t i = 0; i < sizeof bad_px / sizeof bad_px[0]; i++) {
        char line[80];
        sprintf(line, "NEW cl=a sym=A side=B qty=1 px=%s", bad_px[i]);
        assert_int_equal(parse(line, cl), EM_REJ_BAD_VALUE);
    }
    assert_int_equal(parse("NEW cl=a sym=A side=B qty=007 px=0.5", cl), 0);
    assert_int_equal(parse("NEW cl=a sym=A side=B qty=1000000001 px=1", cl), EM_REJ_BAD_VALUE);
    assert_int_equal(parse("SYMBOL sym=A tick=1 band=100", cl), EM_REJ_BAD_VALUE);
    assert_int_equal(parse("SYMBOL sym=A tick=1 band=0.001", cl), EM_REJ_BAD_VALUE);
    assert_int_equal(parse("SYMBOL sym=A tick=1 band=99.99", cl), 0);
    assert_int_equal(parse("GATEWAY gw=A enabled=2", cl), EM_REJ_BAD_VALUE);
    assert_int_equal(parse("GATEWAY gw=a enabled=1", cl), EM_REJ_BAD_VALUE);
    assert_int_equal(parse("PHASE sym=A phase=HALTED", cl), EM_REJ_BAD_VALUE);
}

static void test_price_format(void **state)
{
    char b[32];
    struct em_price p = {5, 2};
    b[em_alf_format_price(p, b)] = 0;
    assert_string_equal(b, "0.05");
    p = (struct em_price){1050, 2};
    b[em_alf_format_price(p, b)] = 0;
    assert_string_equal(b, "10.50");
    p = (struct em_price){7, 0};
    b[em_alf_format_price(p, b)] = 0;
    assert_string_equal(b, "7");
}

/* The gateway's SYMBOLS query (docs/alf.md §9). */
static void test_parse_symbols(void **state)
{
    char sym[EM_SYM_MAX + 1];
#define Q(line) em_alf_parse_symbols(line, strlen(line), sym)
    assert_int_equal(Q("SYMBOLS"), 0);
    assert_string_equal(sym, "");
    assert_int_equal(Q("SYMBOLS sym=AB.C1"), 0);
    assert_string_equal(sym, "AB.C1");
    assert_int_equal(Q("SYMBOLSX"), -1); /* not the query: for em_alf_parse */
    assert_int_equal(Q("SYMBOL sym=ABC tick=1"), -1);
    assert_int_equal(Q("SYMBOLS side=B"), EM_REJ_SYNTAX);
    assert_int_equal(Q("SYMBOLS sym=A sym=B"), EM_REJ_SYNTAX);
    assert_int_equal(Q("SYMBOLS "), EM_REJ_SYNTAX);
    assert_int_equal(Q("SYMBOLS sym=abc"), EM_REJ_BAD_VALUE);
    assert_int_equal(Q("SYMBOLS sym=ABCDEFGHIJKLM"), EM_REJ_BAD_VALUE);
#undef Q
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_kind_has_a_sample),
        cmocka_unit_test(test_alf_round_trip),
        cmocka_unit_test(test_binary_round_trip),
        cmocka_unit_test(test_decode_rejects_bad_frames),
        cmocka_unit_test(test_decode_applies_message_rules),
        cmocka_unit_test(test_decode_bounds_the_ids_of_requests),
        cmocka_unit_test(test_fast_builders_match_encoder),
        cmocka_unit_test(test_parse_fault_order),
        cmocka_unit_test(test_price_format),
        cmocka_unit_test(test_parse_symbols),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
