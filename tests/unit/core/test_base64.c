/* core/base64.h: RFC 4648's test vectors, round trips, non-canonical input refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/base64.h"
#include "core/error.h"

static void test_rfc4648_vectors(void **state)
{
    (void)state;
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const coded[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                        "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    char out[16];
    uint8_t back[16];
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
        core_base64_encode((const uint8_t *)plain[i], strlen(plain[i]), out);
        assert_string_equal(out, coded[i]);
        assert_int_equal(strlen(out), CORE_BASE64_ENCODED_LEN(strlen(plain[i])));
        ssize_t n = core_base64_decode(coded[i], strlen(coded[i]), back);
        assert_int_equal(n, (ssize_t)strlen(plain[i]));
        assert_memory_equal(back, plain[i], strlen(plain[i]));
    }
}

static void test_every_byte_round_trips(void **state)
{
    (void)state;
    uint8_t in[256], back[256];
    char out[CORE_BASE64_ENCODED_LEN(256) + 1];
    for (int i = 0; i < 256; i++)
        in[i] = (uint8_t)i;
    for (size_t n = 0; n <= 256; n += 17) {
        core_base64_encode(in, n, out);
        assert_int_equal(core_base64_decode(out, strlen(out), back), (ssize_t)n);
        assert_memory_equal(back, in, n);
    }
}

static void test_refuses_what_is_not_canonical(void **state)
{
    (void)state;
    uint8_t back[16];
    assert_int_equal(core_base64_decode("Zg=", 3, back), CORE_EPROTO);      /* length */
    assert_int_equal(core_base64_decode("Zh==", 4, back), CORE_EPROTO);     /* dropped bits set */
    assert_int_equal(core_base64_decode("Z===", 4, back), CORE_EPROTO);     /* too much padding */
    assert_int_equal(core_base64_decode("Zg==Zg==", 8, back), CORE_EPROTO); /* padding inside */
    assert_int_equal(core_base64_decode("Zm9*", 4, back), CORE_EPROTO);     /* alphabet */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc4648_vectors),
        cmocka_unit_test(test_every_byte_round_trips),
        cmocka_unit_test(test_refuses_what_is_not_canonical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
