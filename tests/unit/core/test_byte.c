/* core/byte.h: little-endian layout and the bounded reader's sticky error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/buf.h"
#include "core/byte.h"

static void test_put_writes_least_significant_first(void **state)
{
    uint8_t b[8];
    core_put_le32(b, 0x11223344u);
    assert_memory_equal(b, "\x44\x33\x22\x11", 4);
    core_put_le64(b, 0x0102030405060708ull);
    assert_memory_equal(b, "\x08\x07\x06\x05\x04\x03\x02\x01", 8);
    core_put_le16(b, 0xbeef);
    assert_memory_equal(b, "\xef\xbe", 2);
    /* Odd widths keep the low bytes and report where the next field goes. */
    uint8_t *end = core_put_le(b, 0xaabbccddeeull, 3);
    assert_ptr_equal(end, b + 3);
    assert_memory_equal(b, "\xee\xdd\xcc", 3);
}

static void test_get_inverts_put_for_every_width(void **state)
{
    const uint64_t values[] = {
        0, 1, 0x7f, 0x80, 0xff, 0x1234, 0xffffffffu, 0x8000000000000000ull, UINT64_MAX};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        for (unsigned w = 1; w <= 8; w++) {
            uint8_t b[8];
            core_put_le(b, values[i], w);
            uint64_t mask = w == 8 ? UINT64_MAX : (1ull << (8 * w)) - 1;
            assert_true(core_get_le(b, w) == (values[i] & mask));
        }
    }
    uint8_t b[8];
    core_put_le64(b, 0xfedcba9876543210ull);
    assert_true(core_get_le64(b) == 0xfedcba9876543210ull);
    assert_true(core_get_le32(b) == 0x76543210u);
    assert_true(core_get_le16(b) == 0x3210);
}

static void test_reader_reads_fields_in_order(void **state)
{
    uint8_t b[15];
    uint8_t *p = b;
    p = core_put_le(p, 7, 1);
    p = core_put_le(p, 0x0102, 2);
    p = core_put_le(p, 0xdeadbeef, 4);
    memcpy(p, "abcdefgh", 8);
    struct core_reader r = core_reader_init(b, sizeof b);
    assert_int_equal(core_read_u8(&r), 7);
    assert_int_equal(core_read_u16(&r), 0x0102);
    assert_true(core_read_u32(&r) == 0xdeadbeefu);
    const uint8_t *s = core_read_bytes(&r, 8);
    assert_ptr_equal(s, b + 7);
    assert_true(core_reader_done(&r));
}

static void test_reader_error_is_sticky_and_checked_once(void **state)
{
    uint8_t b[6] = {1, 0, 0, 0, 9, 9};
    struct core_reader r = core_reader_init(b, sizeof b);
    assert_int_equal(core_read_u32(&r), 1);
    /* Two bytes left: an 8-byte read fails, consumes nothing, returns 0. */
    assert_true(core_read_u64(&r) == 0);
    assert_false(core_reader_ok(&r));
    assert_int_equal(r.left, 2);
    /* Later reads that would fit still fail: one check at the end is
     * enough to know the record was short. */
    assert_int_equal(core_read_u8(&r), 0);
    assert_null(core_read_bytes(&r, 1));
    assert_false(core_reader_done(&r));
}

static void test_reader_done_wants_input_used_up(void **state)
{
    uint8_t b[3] = {1, 2, 3};
    struct core_reader r = core_reader_init(b, sizeof b);
    assert_int_equal(core_read_u16(&r), 0x0201);
    assert_true(core_reader_ok(&r));
    assert_false(core_reader_done(&r)); /* a trailing byte is left */
    assert_non_null(core_read_bytes(&r, 1));
    assert_true(core_reader_done(&r));
    /* A length read off the wire larger than what is there fails. */
    struct core_reader big = core_reader_init(b, sizeof b);
    assert_null(core_read_bytes(&big, SIZE_MAX));
    assert_false(core_reader_ok(&big));
    /* A zero reader reads nothing. */
    struct core_reader z = {0};
    assert_int_equal(core_read_u8(&z), 0);
    assert_false(core_reader_ok(&z));
}

static void test_buf_put_le_appends(void **state)
{
    struct core_buf b = {0};
    assert_int_equal(core_buf_put_le(&b, 0x0a0b0c0d, 4), 0);
    assert_int_equal(core_buf_append(&b, "xy", 2), 0);
    assert_int_equal(core_buf_put_le(&b, 1, 8), 0);
    assert_int_equal(b.len, 14);
    assert_memory_equal(b.data, "\x0d\x0c\x0b\x0axy\x01\0\0\0\0\0\0\0", 14);
    core_buf_reset(&b);
    assert_int_equal(b.len, 0);
    assert_false(b.oom);
    core_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_writes_least_significant_first),
        cmocka_unit_test(test_get_inverts_put_for_every_width),
        cmocka_unit_test(test_reader_reads_fields_in_order),
        cmocka_unit_test(test_reader_error_is_sticky_and_checked_once),
        cmocka_unit_test(test_reader_done_wants_input_used_up),
        cmocka_unit_test(test_buf_put_le_appends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
