/* core/error: the code table and the conversions at the boundaries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <cmocka.h>
#include <uv.h>

#include "core/error.h"

static void test_names_and_messages(void **state)
{
    assert_string_equal(core_err_name(CORE_ENOMEM), "NOMEM");
    assert_string_equal(core_strerror(CORE_EPROTO), "protocol error");
    assert_string_equal(core_err_name(0), "OK");
    assert_string_equal(core_err_name(12345), "UNKNOWN");
    assert_string_equal(core_strerror(-999), "unknown error");
}

static void test_from_errno(void **state)
{
    assert_int_equal(core_from_errno(0), 0);
    assert_int_equal(core_from_errno(ENOMEM), CORE_ENOMEM);
    assert_int_equal(core_from_errno(ENOENT), CORE_ENOTFOUND);
    assert_int_equal(core_from_errno(ECONNRESET), CORE_ECLOSED);
    assert_int_equal(core_from_errno(EACCES), CORE_EIO);
}

static void test_from_uv(void **state)
{
    assert_int_equal(core_from_uv(0), 0);
    assert_int_equal(core_from_uv(UV_EADDRINUSE), CORE_EBUSY);
    assert_int_equal(core_from_uv(UV_EINVAL), CORE_EINVAL);
    assert_int_equal(core_from_uv(UV_ENOMEM), CORE_ENOMEM);
    assert_int_equal(core_from_uv(UV_ENOBUFS), CORE_ENOMEM);
    assert_int_equal(core_from_uv(UV_EOF), CORE_ECLOSED);
    assert_int_equal(core_from_uv(UV_EPIPE), CORE_ECLOSED);
    assert_int_equal(core_from_uv(UV_ETIMEDOUT), CORE_ETIMEOUT);
    assert_int_equal(core_from_uv(UV_EAI_NONAME), CORE_ENOTFOUND);
    assert_int_equal(core_from_uv(UV_EAGAIN), CORE_EAGAIN);
    /* Every result is a known code: nothing leaks through unconverted. */
    for (int e = -4096; e < 0; e++)
        assert_string_not_equal(core_err_name(core_from_uv(e)), "UNKNOWN");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_messages),
        cmocka_unit_test(test_from_errno),
        cmocka_unit_test(test_from_uv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
