/* Configuration: memory units, flags, files, ranges, immutables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/config.h"
#include "core/error.h"

static int64_t port = 7000, maxmemory = 0;
static bool daemonize_flag = false;
static int policy = 0;
static char bind_addr[CORE_OPT_STRLEN] = "127.0.0.1";
static const char *const policies[] = {"noeviction", "slru", NULL};

static const struct core_option opts[] = {
    {"port", CORE_OPT_INT, &port, 0, 65535, NULL, CORE_OPT_IMMUTABLE, "TCP port"},
    {"maxmemory", CORE_OPT_MEMORY, &maxmemory, 0, INT64_MAX, NULL, 0, "memory limit"},
    {"maxmemory-policy", CORE_OPT_ENUM, &policy, 0, 0, policies, 0, "eviction"},
    {"flag", CORE_OPT_BOOL, &daemonize_flag, 0, 0, NULL, 0, "a switch"},
    {"bind", CORE_OPT_STRING, bind_addr, 0, 0, NULL, 0, "address"},
    {NULL, 0, NULL, 0, 0, NULL, 0, NULL},
};

static void test_parse_memory(void **state)
{
    int64_t v;
    assert_int_equal(core_parse_memory("100mb", &v), 0);
    assert_true(v == 100LL * 1024 * 1024);
    assert_int_equal(core_parse_memory("1GB", &v), 0);
    assert_true(v == 1024LL * 1024 * 1024);
    assert_int_equal(core_parse_memory("4k", &v), 0);
    assert_true(v == 4000);
    assert_int_equal(core_parse_memory("12345", &v), 0);
    assert_true(v == 12345);
    assert_int_equal(core_parse_memory("12x", &v), CORE_EINVAL);
    assert_int_equal(core_parse_memory("mb", &v), CORE_EINVAL);
    assert_int_equal(core_parse_memory("99999999999999gb", &v), CORE_ERANGE);
}

static void test_parse_int64_edges(void **state)
{
    int64_t v;
    assert_int_equal(core_parse_int64("-9223372036854775808", 20, &v), 0);
    assert_true(v == INT64_MIN);
    assert_int_equal(core_parse_int64("9223372036854775808", 19, &v), CORE_ERANGE);
    assert_int_equal(core_parse_int64("", 0, &v), CORE_EINVAL);
    assert_int_equal(core_parse_int64("-", 1, &v), CORE_EINVAL);
    assert_int_equal(core_parse_int64("1 ", 2, &v), CORE_EINVAL);
}

static void test_args_and_help(void **state)
{
    char err[256];
    char *argv[] = {"prog",   "--port", "7100",    "--maxmemory",        "1mb",
                    "--flag", "--bind", "0.0.0.0", "--maxmemory-policy", "SLRU"};
    assert_int_equal(core_config_parse_args(opts, 10, argv, "usage", err, sizeof(err)), 0);
    assert_true(port == 7100 && maxmemory == 1048576 && daemonize_flag && policy == 1);
    assert_string_equal(bind_addr, "0.0.0.0");

    char *bad[] = {"prog", "--port", "70000"};
    assert_int_equal(core_config_parse_args(opts, 3, bad, "usage", err, sizeof(err)), CORE_ERANGE);
    assert_non_null(strstr(err, "port"));
    char *unknown[] = {"prog", "--nope", "1"};
    assert_int_equal(core_config_parse_args(opts, 3, unknown, "usage", err, sizeof(err)),
                     CORE_ENOTFOUND);
    assert_non_null(strstr(err, "nope"));
}

static void test_runtime_set_respects_immutable(void **state)
{
    char err[256], out[64];
    assert_int_equal(core_config_set(opts, "port", "1", false, err, sizeof(err)), CORE_EINVAL);
    assert_int_equal(core_config_set(opts, "maxmemory", "2mb", false, err, sizeof(err)), 0);
    core_config_format(core_config_find(opts, "MAXMEMORY"), out, sizeof(out));
    assert_string_equal(out, "2097152");
    assert_int_equal(core_config_set(opts, "maxmemory-policy", "lru", false, err, sizeof(err)),
                     CORE_EINVAL);
}

static void test_config_file(void **state)
{
    char path[] = "/tmp/core-config-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "# comment\n\nport 7200\nbind \"10.0.0.1\"\nmaxmemory 3mb  \n";
    assert_true(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    char err[256];
    char *argv[] = {"prog", path, "--port", "7300"};
    assert_int_equal(core_config_parse_args(opts, 4, argv, "usage", err, sizeof(err)), 0);
    assert_true(port == 7300); /* flags win over the file */
    assert_true(maxmemory == 3LL * 1024 * 1024);
    assert_string_equal(bind_addr, "10.0.0.1");

    fd = open(path, O_WRONLY | O_TRUNC);
    const char *broken = "port\n";
    assert_true(write(fd, broken, strlen(broken)) == (ssize_t)strlen(broken));
    close(fd);
    assert_int_equal(core_config_load_file(opts, path, err, sizeof(err)), CORE_EINVAL);
    assert_non_null(strstr(err, ":1:"));
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_memory),  cmocka_unit_test(test_parse_int64_edges),
        cmocka_unit_test(test_args_and_help), cmocka_unit_test(test_runtime_set_respects_immutable),
        cmocka_unit_test(test_config_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
