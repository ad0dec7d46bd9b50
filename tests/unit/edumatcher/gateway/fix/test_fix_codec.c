/* fix_codec: framing (BeginString, BodyLength, CheckSum; garbled input is
 * skipped to the next message), decoding faults (bad tags, empty values,
 * repeated tags, oversized values), typed getters, and the builder, whose
 * output frames and decodes back. The literal messages carry checksums
 * computed outside this code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/error.h"
#include "edumatcher/gateway/fix/fix_codec.h"

/* BodyLength 55, CheckSum 031, computed independently. */
static const char HB[] = "8=FIX.4.4\0019=55\00135=0\00149=T1\00156=EDUMATCHER\00134=2\001"
                         "52=20261201-12:00:00.000\00110=031\001";
#define HB_LEN (sizeof HB - 1)

static void test_frame_valid(void **state)
{
    (void)state;
    size_t n = 0;
    assert_int_equal(em_fix_frame(HB, HB_LEN, &n), 0);
    assert_int_equal(n, HB_LEN);
    /* every strict prefix is incomplete, never garbled */
    for (size_t len = 1; len < HB_LEN; len++)
        assert_int_equal(em_fix_frame(HB, len, &n), EM_FIX_FRAME_MORE);
    /* two messages back to back: the first alone */
    char two[2 * HB_LEN];
    memcpy(two, HB, HB_LEN);
    memcpy(two + HB_LEN, HB, HB_LEN);
    assert_int_equal(em_fix_frame(two, sizeof two, &n), 0);
    assert_int_equal(n, HB_LEN);
}

static void test_frame_garbled(void **state)
{
    (void)state;
    char b[256];
    size_t n;
    /* wrong checksum */
    memcpy(b, HB, HB_LEN);
    b[HB_LEN - 2] = '2';
    assert_int_equal(em_fix_frame(b, HB_LEN, &n), EM_FIX_FRAME_GARBLED);
    assert_true(n >= 1 && n <= HB_LEN);
    /* a flipped body byte: the checksum no longer matches */
    memcpy(b, HB, HB_LEN);
    b[30] = 'X';
    assert_int_equal(em_fix_frame(b, HB_LEN, &n), EM_FIX_FRAME_GARBLED);
    /* BodyLength one short: no "10=" where it points */
    memcpy(b, HB, HB_LEN);
    b[13] = '4';
    assert_int_equal(em_fix_frame(b, HB_LEN, &n), EM_FIX_FRAME_GARBLED);
    /* another version */
    memcpy(b, HB, HB_LEN);
    b[8] = '2';
    assert_int_equal(em_fix_frame(b, HB_LEN, &n), EM_FIX_FRAME_GARBLED);
    /* junk before a message is skipped up to it */
    int k = snprintf(b, sizeof b, "hello ");
    memcpy(b + k, HB, HB_LEN);
    assert_int_equal(em_fix_frame(b, (size_t)k + HB_LEN, &n), EM_FIX_FRAME_GARBLED);
    assert_int_equal(n, (size_t)k);
    assert_int_equal(em_fix_frame(b + n, HB_LEN, &n), 0);
    /* BodyLength not a number, or larger than a message may be */
    const char *bad[] = {"8=FIX.4.4\0019=x\001", "8=FIX.4.4\0019=99999\001",
                         "8=FIX.4.4\0019=4090\00135=0\001", "8=FIX.4.4\0019=0\001",
                         "8=FIX.4.4\0019=\001"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(em_fix_frame(bad[i], strlen(bad[i]), &n), EM_FIX_FRAME_GARBLED);
}

/* Build a message with the given body fields (SOH written as '|'). */
static size_t make(char *out, size_t cap, const char *body_bars)
{
    char body[EM_FIX_MSG_MAX];
    size_t bl = strlen(body_bars);
    for (size_t i = 0; i < bl; i++)
        body[i] = body_bars[i] == '|' ? '\001' : body_bars[i];
    char head[64];
    int h = snprintf(head, sizeof head, "8=FIX.4.4\0019=%zu\001", bl);
    assert_true((size_t)h + bl + 7 <= cap);
    memcpy(out, head, (size_t)h);
    memcpy(out + h, body, bl);
    unsigned sum = 0;
    for (size_t i = 0; i < (size_t)h + bl; i++)
        sum += (unsigned char)out[i];
    snprintf(out + h + bl, 8, "10=%03u\001", sum % 256);
    return (size_t)h + bl + 7;
}

static void test_decode_fields(void **state)
{
    (void)state;
    char b[512];
    size_t n =
        make(b, sizeof b, "35=D|49=T1|56=EDUMATCHER|34=7|43=Y|52=x|11=c1|38=100|44=10.50|54=1|");
    struct em_fix_msg m;
    size_t fl;
    assert_int_equal(em_fix_frame(b, n, &fl), 0);
    assert_int_equal(em_fix_decode(b, fl, &m), 0);
    assert_string_equal(m.type, "D");
    assert_int_equal(m.seq, 7);
    assert_true(m.poss_dup);
    uint64_t q;
    assert_int_equal(em_fix_get_uint(&m, EM_FIX_TAG_ORDERQTY, &q), 0);
    assert_int_equal(q, 100);
    int64_t mant;
    int dec;
    assert_int_equal(em_fix_get_price(&m, EM_FIX_TAG_PRICE, &mant, &dec), 0);
    assert_int_equal(mant, 1050);
    assert_int_equal(dec, 2);
    char side;
    assert_int_equal(em_fix_get_char(&m, EM_FIX_TAG_SIDE, &side), 0);
    assert_int_equal(side, '1');
    assert_int_equal(em_fix_get_uint(&m, EM_FIX_TAG_STOPPX, &q), CORE_ENOTFOUND);
    assert_int_equal(em_fix_get_uint(&m, EM_FIX_TAG_CLORDID, &q), CORE_EINVAL);
}

static void test_price_forms(void **state)
{
    (void)state;
    const char *ok[] = {"1", "0.5", "100.25", "007.10"};
    const int64_t mants[] = {1, 5, 10025, 710};
    const int decs[] = {0, 1, 2, 2};
    const char *bad[] = {".5", "5.", "1.2.3", "-1", "1e3", "1234567890123456789", "+1"};
    char b[256], body[128];
    struct em_fix_msg m;
    int64_t mant;
    int dec;
    for (size_t i = 0; i < 4; i++) {
        snprintf(body, sizeof body, "35=D|34=1|44=%s|", ok[i]);
        size_t n = make(b, sizeof b, body);
        assert_int_equal(em_fix_decode(b, n, &m), 0);
        assert_int_equal(em_fix_get_price(&m, EM_FIX_TAG_PRICE, &mant, &dec), 0);
        assert_int_equal(mant, mants[i]);
        assert_int_equal(dec, decs[i]);
    }
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(body, sizeof body, "35=D|34=1|44=%s|", bad[i]);
        size_t n = make(b, sizeof b, body);
        assert_int_equal(em_fix_decode(b, n, &m), 0);
        assert_int_equal(em_fix_get_price(&m, EM_FIX_TAG_PRICE, &mant, &dec), CORE_EINVAL);
    }
}

static void expect_fault(const char *body, int reason, uint32_t tag, uint64_t seq)
{
    char b[EM_FIX_MSG_MAX];
    size_t n = make(b, sizeof b, body);
    size_t fl;
    assert_int_equal(em_fix_frame(b, n, &fl), 0);
    struct em_fix_msg m;
    assert_int_equal(em_fix_decode(b, fl, &m), CORE_EPROTO);
    assert_int_equal(m.fault_reason, reason);
    assert_int_equal(m.fault_tag, tag);
    assert_int_equal(m.seq, seq); /* the header is still read for RefSeqNum */
}

static void test_decode_faults(void **state)
{
    (void)state;
    expect_fault("35=D|34=3|11=a|11=b|", EM_FIX_RR_TAG_APPEARS_TWICE, 11, 3);
    expect_fault("35=D|34=3|11=|", EM_FIX_RR_TAG_WITHOUT_VALUE, 11, 3);
    expect_fault("35=D|34=3|1x=a|", EM_FIX_RR_INVALID_TAG_NUMBER, 0, 3);
    expect_fault("35=D|34=3|011=a|", EM_FIX_RR_INVALID_TAG_NUMBER, 0, 3);
    expect_fault("35=D|34=3|novalue|", EM_FIX_RR_INVALID_TAG_NUMBER, 0, 3);
    expect_fault("34=3|35=D|", EM_FIX_RR_TAG_OUT_OF_ORDER, 35, 3);
    expect_fault("35=D|34=x|", EM_FIX_RR_INCORRECT_DATA_FORMAT, 34, 0);
    expect_fault("35=D|34=3|43=maybe|", EM_FIX_RR_INCORRECT_DATA_FORMAT, 43, 3);
    expect_fault("35=D|34=3|10=000|", EM_FIX_RR_TAG_OUT_OF_ORDER, 10, 3);
    char body[1024];
    int k = snprintf(body, sizeof body, "35=D|34=4|58=");
    memset(body + k, 'a', EM_FIX_VALUE_MAX + 1);
    snprintf(body + k + EM_FIX_VALUE_MAX + 1, 8, "|");
    expect_fault(body, EM_FIX_RR_VALUE_OUT_OF_RANGE, 58, 4);
    /* more fields than a message may have */
    char many[EM_FIX_MSG_MAX];
    k = snprintf(many, sizeof many, "35=D|34=5|");
    for (unsigned t = 1000; t < 1000 + EM_FIX_FIELDS_MAX; t++)
        k += snprintf(many + k, sizeof many - (size_t)k, "%u=1|", t);
    expect_fault(many, EM_FIX_RR_OTHER, 1000 + EM_FIX_FIELDS_MAX - 2, 5);
}

static void test_build_roundtrip(void **state)
{
    (void)state;
    char b[512];
    struct em_fix_out o;
    em_fix_begin(&o, b, sizeof b, "8");
    em_fix_add_cstr(&o, EM_FIX_TAG_SENDERCOMPID, "EDUMATCHER");
    em_fix_add_uint(&o, EM_FIX_TAG_MSGSEQNUM, 12345);
    em_fix_add_time(&o, EM_FIX_TAG_SENDINGTIME, 1764590400123000000ull);
    em_fix_add_price(&o, EM_FIX_TAG_PRICE, 1050, 2);
    em_fix_add_price(&o, EM_FIX_TAG_LASTPX, 5, 3);
    em_fix_add_price(&o, EM_FIX_TAG_AVGPX, 0, 0);
    em_fix_add_char(&o, EM_FIX_TAG_SIDE, '2');
    size_t n = em_fix_finish(&o);
    assert_true(n > 0);
    size_t fl;
    assert_int_equal(em_fix_frame(b, n, &fl), 0);
    assert_int_equal(fl, n);
    struct em_fix_msg m;
    assert_int_equal(em_fix_decode(b, n, &m), 0);
    assert_string_equal(m.type, "8");
    assert_int_equal(m.seq, 12345);
    const char *v;
    size_t vl;
    assert_true(em_fix_get(&m, EM_FIX_TAG_SENDINGTIME, &v, &vl));
    assert_int_equal(vl, 21);
    assert_memory_equal(v, "20251201-12:00:00.123", 21);
    assert_true(em_fix_get(&m, EM_FIX_TAG_PRICE, &v, &vl));
    assert_memory_equal(v, "10.50", vl);
    assert_true(em_fix_get(&m, EM_FIX_TAG_LASTPX, &v, &vl));
    assert_memory_equal(v, "0.005", vl);
    assert_true(em_fix_get(&m, EM_FIX_TAG_AVGPX, &v, &vl));
    assert_memory_equal(v, "0", vl);
    /* the literal heartbeat, rebuilt, is byte for byte the same */
    em_fix_begin(&o, b, sizeof b, "0");
    em_fix_add_cstr(&o, EM_FIX_TAG_SENDERCOMPID, "T1");
    em_fix_add_cstr(&o, EM_FIX_TAG_TARGETCOMPID, "EDUMATCHER");
    em_fix_add_uint(&o, EM_FIX_TAG_MSGSEQNUM, 2);
    em_fix_add_cstr(&o, EM_FIX_TAG_SENDINGTIME, "20261201-12:00:00.000");
    assert_int_equal(em_fix_finish(&o), HB_LEN);
    assert_memory_equal(b, HB, HB_LEN);
}

static void test_build_overflow(void **state)
{
    (void)state;
    char b[80];
    struct em_fix_out o;
    em_fix_begin(&o, b, sizeof b, "8");
    em_fix_add_cstr(&o, EM_FIX_TAG_TEXT, "a long text that does not fit in eighty bytes of buffer");
    em_fix_add_cstr(&o, EM_FIX_TAG_TEXT, "more");
    assert_int_equal(em_fix_finish(&o), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_valid),    cmocka_unit_test(test_frame_garbled),
        cmocka_unit_test(test_decode_fields),  cmocka_unit_test(test_price_forms),
        cmocka_unit_test(test_decode_faults),  cmocka_unit_test(test_build_roundtrip),
        cmocka_unit_test(test_build_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
