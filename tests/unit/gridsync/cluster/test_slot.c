/* Key -> slot against the values a real Redis 7 (cluster-enabled) returns
 * for CLUSTER KEYSLOT, including the hash-tag corner cases of the spec. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "gridsync/cluster/slot.h"

struct vector {
    const char *key;
    unsigned slot;
};

static void test_slot_matches_redis(void **state)
{
    static const struct vector v[] = {
        {"foo", 12182},
        {"bar", 5061},
        {"hello", 866},
        {"a", 15495},
        {"key", 12539},
        {"test", 6918},
        {"123456789", 12739},
        {"", 0},
        /* Hash tags: only the first {...} with content counts. */
        {"{user1000}.following", 3443},
        {"{user1000}.followers", 3443},
        {"foo{}{bar}", 8363},    /* empty first tag: whole key */
        {"foo{{bar}}zap", 4015}, /* tag is "{bar" */
        {"foo{bar}{zap}", 5061}, /* tag is "bar" */
        {"{}", 15257},
        {"{", 4092},
        {"}{x}", 16287},
        {"{a}b", 15495},
        {"x{}y{z}", 15453},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        unsigned got = gs_key_slot(v[i].key, strlen(v[i].key));
        if (got != v[i].slot)
            fail_msg("slot of \"%s\": got %u, want %u", v[i].key, got, v[i].slot);
    }
}

static void test_slot_binary_safe(void **state)
{
    /* A NUL byte is part of the key, not its end. */
    const char k1[] = {'a', 0, 'b'};
    const char k2[] = {'a', 0, 'c'};
    assert_true(gs_key_slot(k1, 3) < GS_SLOTS);
    assert_int_not_equal(gs_key_slot(k1, 3), gs_key_slot(k2, 3));
    const char tagged[] = {'{', 'a', '}', 0, 'z'};
    assert_int_equal(gs_key_slot(tagged, sizeof(tagged)), gs_key_slot("a", 1));
}

static void test_hash_part(void **state)
{
    size_t n;
    const char *key = "pre{tag}post";
    const char *p = gs_key_hash_part(key, strlen(key), &n);
    assert_int_equal(n, 3);
    assert_memory_equal(p, "tag", 3);
    p = gs_key_hash_part("plain", 5, &n);
    assert_int_equal(n, 5);
    assert_memory_equal(p, "plain", 5);
}

/* The snapshot's slot-state records (gs_slot_state_next). */
static void test_slot_state_records(void **state)
{
    (void)state;
    /* slot 5 blocked to "n1", slot 16383 gone with no name */
    const char rec[] = {5, 0, 1, 2, 'n', '1', (char)0xff, 0x3f, 2, 0};
    size_t off = 0, nlen;
    unsigned slot, st;
    const char *name;
    assert_int_equal(gs_slot_state_next(rec, sizeof(rec), &off, &slot, &st, &name, &nlen), 1);
    assert_int_equal(slot, 5);
    assert_int_equal(st, 1);
    assert_int_equal(nlen, 2);
    assert_memory_equal(name, "n1", 2);
    assert_int_equal(gs_slot_state_next(rec, sizeof(rec), &off, &slot, &st, &name, &nlen), 1);
    assert_int_equal(slot, 16383);
    assert_int_equal(nlen, 0);
    assert_int_equal(gs_slot_state_next(rec, sizeof(rec), &off, &slot, &st, &name, &nlen), 0);
    /* every truncation is refused, never read past */
    for (size_t cut = 1; cut < 6; cut++) {
        off = 0;
        int r = gs_slot_state_next(rec, cut, &off, &slot, &st, &name, &nlen);
        assert_int_equal(r, -1);
    }
    const char out_of_range[] = {0, 0x40, 1, 0}; /* slot 16384 */
    off = 0;
    assert_int_equal(
        gs_slot_state_next(out_of_range, sizeof(out_of_range), &off, &slot, &st, &name, &nlen), -1);
    /* only the two non-serving states are records */
    const char serving[] = {1, 0, GS_SLOT_SERVING, 0}, other[] = {1, 0, 7, 0};
    off = 0;
    assert_int_equal(gs_slot_state_next(serving, sizeof(serving), &off, &slot, &st, &name, &nlen),
                     -1);
    off = 0;
    assert_int_equal(gs_slot_state_next(other, sizeof(other), &off, &slot, &st, &name, &nlen), -1);
    /* the whole-record check the snapshot's validation pass makes */
    assert_true(gs_slot_state_valid(rec, sizeof(rec)));
    assert_true(gs_slot_state_valid(rec, 0));
    assert_false(gs_slot_state_valid(rec, sizeof(rec) - 1));
    assert_false(gs_slot_state_valid(other, sizeof(other)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slot_matches_redis),
        cmocka_unit_test(test_slot_binary_safe),
        cmocka_unit_test(test_hash_part),
        cmocka_unit_test(test_slot_state_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
