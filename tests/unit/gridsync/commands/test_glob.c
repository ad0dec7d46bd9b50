/* Glob matching as Redis's stringmatchlen (KEYS, SCAN MATCH, CONFIG GET). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gridsync/commands/glob.h"

static bool m(const char *pat, const char *str)
{
    return gs_glob_match(pat, strlen(pat), str, strlen(str), false);
}

static void test_basic(void **state)
{
    /* As stringmatchlen: an empty string matches only the empty pattern
     * (KEYS and SCAN special-case a lone "*" before matching). */
    assert_false(m("*", ""));
    assert_true(m("", ""));
    assert_true(m("*", "anything"));
    assert_true(m("h?llo", "hello"));
    assert_false(m("h?llo", "hllo"));
    assert_true(m("h*llo", "heeeello"));
    assert_true(m("h*llo", "hllo"));
    assert_true(m("h[ae]llo", "hallo"));
    assert_false(m("h[ae]llo", "hillo"));
    assert_true(m("h[^e]llo", "hallo"));
    assert_false(m("h[^e]llo", "hello"));
    assert_true(m("h[a-b]llo", "hbllo"));
    assert_false(m("h[a-b]llo", "hcllo"));
    assert_true(m("h\\*llo", "h*llo"));
    assert_false(m("h\\*llo", "hello"));
    assert_true(m("user:*:name", "user:42:name"));
    assert_false(m("user:*:name", "user:42:age"));
    assert_true(m("a*b*c", "aXbYc"));
    assert_false(m("a*b*c", "aXbY"));
    assert_false(m("abc", "abcd"));
    assert_true(m("abc*", "abc"));
}

/* Classes whose last byte is ']' or '-', answers taken from Redis 7.0's
 * KEYS (tests/integration/gridsync/test_compat_vs_redis.py compares). */
static void test_class_edges(void **state)
{
    assert_true(m("k[1-]", "k1"));
    assert_true(m("k[1-]", "kA")); /* the range 1..] */
    assert_false(m("k[1-]", "k-"));
    assert_true(m("[a-]]", "a"));
    assert_true(m("[a-]]", "]"));
    assert_false(m("[a-]]", "b"));
    assert_true(m("[--]", "-"));
    assert_true(m("[--]", "A"));    /* the range -..], and the class is unclosed */
    assert_false(m("[]]", "]"));    /* an empty class, which never matches */
    assert_true(m("k[1-", "k1"));   /* unclosed: the class runs to the end */
    assert_false(m("k[1-", "k1x")); /* and consumes the whole pattern */
    assert_true(m("[^", "x"));
    assert_true(gs_glob_match("[A-C]", 5, "b", 1, true));
    assert_false(gs_glob_match("[\\A]", 5, "a", 1, true)); /* escapes do not fold */
}

static void test_nocase(void **state)
{
    assert_true(gs_glob_match("MAX*", 4, "maxmemory", 9, true));
    assert_false(gs_glob_match("MAX*", 4, "maxmemory", 9, false));
}

static void test_no_blowup(void **state)
{
    /* Exponential for a naive recursive matcher; linear-ish here. */
    char str[200];
    memset(str, 'a', sizeof(str) - 1);
    str[sizeof(str) - 1] = 0;
    assert_false(m("a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", str));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_class_edges),
        cmocka_unit_test(test_nocase),
        cmocka_unit_test(test_no_blowup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
