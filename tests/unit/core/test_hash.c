/* Hash functions against published reference values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/hash.h"

static void test_crc16_redis_cluster_vectors(void **state)
{
    /* Redis Cluster spec: CRC16 of "123456789" is 0x31C3. */
    assert_int_equal(core_crc16("123456789", 9), 0x31c3);
    /* Slots that redis-cli CLUSTER KEYSLOT reports. */
    assert_int_equal(core_crc16("foo", 3) % 16384, 12182);
    assert_int_equal(core_crc16("bar", 3) % 16384, 5061);
}

static void test_fnv1a_vectors(void **state)
{
    assert_true(core_fnv1a64("", 0) == 0xcbf29ce484222325ull);
    assert_true(core_fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull);
    assert_true(core_fnv1a32("a", 1) == 0xe40c292cu);
    assert_true(core_fnv1a32("foobar", 6) == 0xbf9cf968u);
}

static void test_hash64_seed_and_length_matter(void **state)
{
    char buf[64];
    memset(buf, 'x', sizeof(buf));
    uint64_t seen[65];
    for (size_t n = 0; n <= 64; n++) {
        seen[n] = core_hash64(buf, n, 1);
        for (size_t m = 0; m < n; m++)
            assert_true(seen[m] != seen[n]);
    }
    assert_true(core_hash64("key", 3, 1) != core_hash64("key", 3, 2));
    assert_true(core_hash64("key", 3, 7) == core_hash64("key", 3, 7));
}

static void test_crc32c_vectors(void **state)
{
    /* The check value of CRC-32C, and RFC 3720 (iSCSI) B.4 vectors. */
    assert_true(core_crc32c(0, "123456789", 9) == 0xe3069283u);
    unsigned char b[32];
    memset(b, 0, sizeof b);
    assert_true(core_crc32c(0, b, sizeof b) == 0x8a9136aau);
    memset(b, 0xff, sizeof b);
    assert_true(core_crc32c(0, b, sizeof b) == 0x62a8ab43u);
    for (int i = 0; i < 32; i++)
        b[i] = (unsigned char)i;
    assert_true(core_crc32c(0, b, sizeof b) == 0x46dd794eu);
    assert_true(core_crc32c(0, "", 0) == 0);
}

static void test_crc32c_continues_across_pieces(void **state)
{
    const char *s = "the quick brown fox jumps over the lazy dog";
    size_t n = strlen(s);
    uint32_t whole = core_crc32c(0, s, n);
    for (size_t cut = 0; cut <= n; cut++)
        assert_true(core_crc32c(core_crc32c(0, s, cut), s + cut, n - cut) == whole);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc16_redis_cluster_vectors),
        cmocka_unit_test(test_fnv1a_vectors),
        cmocka_unit_test(test_hash64_seed_and_length_matter),
        cmocka_unit_test(test_crc32c_vectors),
        cmocka_unit_test(test_crc32c_continues_across_pieces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
