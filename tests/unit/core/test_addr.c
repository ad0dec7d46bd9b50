/* core/addr.h: host:port and [v6]:port in, the same forms out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/addr.h"
#include "core/error.h"

#include <netinet/in.h>

static int split(const char *s, char *host, size_t hostlen, int *port)
{
    return core_addr_split(s, strlen(s), host, hostlen, port);
}

static void test_split_accepts_ipv4_names_and_bracketed_ipv6(void **state)
{
    char host[64];
    int port = -1;
    assert_int_equal(split("127.0.0.1:7000", host, sizeof host, &port), 0);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 7000);
    assert_int_equal(split("node-a:65535", host, sizeof host, &port), 0);
    assert_string_equal(host, "node-a");
    assert_int_equal(port, 65535);
    assert_int_equal(split("[::1]:7001", host, sizeof host, &port), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 7001);
    assert_int_equal(split("[fe80::1:2]:0", host, sizeof host, &port), 0);
    assert_string_equal(host, "fe80::1:2");
    assert_int_equal(port, 0);
    /* Not terminated at len: only len bytes are read. */
    assert_int_equal(core_addr_split("[::1]:7001,rest", 10, host, sizeof host, &port), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 7001);
}

static void test_split_refuses_ambiguous_and_malformed(void **state)
{
    char host[64];
    int port;
    const char *bad[] = {"::1:7000", "127.0.0.1",   "127.0.0.1:", ":7000",   "[::1]7000",
                         "[::1]",    "[]:7000",     "[::1:7000",  "h:65536", "h:12a",
                         "h:-1",     "h:000007000", "",           "[::1]:"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(split(bad[i], host, sizeof host, &port), CORE_EINVAL);
    char small[4];
    assert_int_equal(split("[::ffff]:1", small, sizeof small, &port), CORE_ERANGE);
    assert_int_equal(split("abc:1", small, sizeof small, &port), 0);
}

static void test_format_round_trips_through_split(void **state)
{
    const char *hosts[] = {"127.0.0.1", "::1", "2001:db8::7"};
    for (size_t i = 0; i < sizeof hosts / sizeof *hosts; i++) {
        char text[80], host[64];
        int port;
        core_addr_format(text, sizeof text, hosts[i], 7000 + (int)i);
        assert_int_equal(split(text, host, sizeof host, &port), 0);
        assert_string_equal(host, hosts[i]);
        assert_int_equal(port, 7000 + (int)i);
    }
    char text[32];
    core_addr_format(text, sizeof text, "::1", 17000);
    assert_string_equal(text, "[::1]:17000");
}

static void test_ip_picks_the_family_and_equal_compares_it(void **state)
{
    struct sockaddr_storage a, b, c;
    assert_int_equal(core_addr_ip("::1", 7000, &a), 0);
    assert_int_equal(a.ss_family, AF_INET6);
    assert_int_equal(ntohs(((struct sockaddr_in6 *)&a)->sin6_port), 7000);
    assert_int_equal(core_addr_ip("127.0.0.1", 7000, &b), 0);
    assert_int_equal(b.ss_family, AF_INET);
    assert_false(core_addr_equal((struct sockaddr *)&a, (struct sockaddr *)&b));
    assert_int_equal(core_addr_ip("0:0:0:0:0:0:0:1", 7000, &c), 0);
    assert_true(core_addr_equal((struct sockaddr *)&a, (struct sockaddr *)&c));
    assert_int_equal(core_addr_ip("::1", 7001, &c), 0);
    assert_false(core_addr_equal((struct sockaddr *)&a, (struct sockaddr *)&c));
    assert_int_equal(core_addr_ip("localhost", 7000, &c), CORE_EINVAL);
    assert_int_equal(core_addr_ip("[::1]", 7000, &c), CORE_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_accepts_ipv4_names_and_bracketed_ipv6),
        cmocka_unit_test(test_split_refuses_ambiguous_and_malformed),
        cmocka_unit_test(test_format_round_trips_through_split),
        cmocka_unit_test(test_ip_picks_the_family_and_equal_compares_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
