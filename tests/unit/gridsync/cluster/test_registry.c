/* The registry's URL parser (gs_registry_parse_url): what it accepts, how it
 * splits it into endpoint and table, and that every malformed form is
 * refused with a reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/error.h"
#include "gridsync/cluster/registry.h"

static void test_parse_url_accepts(void **state)
{
    (void)state;
    struct gs_registry_config c;
    char err[512];
    memset(&c, 0, sizeof(c));
    assert_int_equal(
        gs_registry_parse_url("dynamodb://127.0.0.1:8000/gridsync", &c, err, sizeof(err)), 0);
    assert_string_equal(c.endpoint, "http://127.0.0.1:8000/");
    assert_string_equal(c.table, "gridsync");
    assert_int_equal(
        gs_registry_parse_url("dynamodb://dynamo.local:4567/a.b-c_1", &c, err, sizeof(err)), 0);
    assert_string_equal(c.endpoint, "http://dynamo.local:4567/");
    assert_string_equal(c.table, "a.b-c_1");
}

static void test_parse_url_refuses(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "http://127.0.0.1:8000/t123",
        "dynamodb://127.0.0.1/t123",
        "dynamodb://127.0.0.1:/t123",
        "dynamodb://:8000/t123",
        "dynamodb://127.0.0.1:80x0/t123",
        "dynamodb://127.0.0.1:8000/",
        "dynamodb://127.0.0.1:8000",
        "dynamodb://127.0.0.1:8000/ab",
        "dynamodb://127.0.0.1:8000/t12/x",
        "dynamodb://127.0.0.1:8000/bad name",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct gs_registry_config c;
        char err[512] = "";
        memset(&c, 0, sizeof(c));
        assert_int_equal(gs_registry_parse_url(bad[i], &c, err, sizeof(err)), CORE_EINVAL);
        assert_true(strlen(err) > 0);
        assert_string_equal(c.table, "");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_url_accepts),
        cmocka_unit_test(test_parse_url_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
