/* The Raft entry and snapshot formats: round trips, and rejection of every
 * truncation and of corrupt lengths (these bytes come off disk and the
 * network). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/error.h"
#include "gridsync/cluster/raft_batch.h"
#include "gridsync/types/hash/hash.h"
#include <stdlib.h>

static void build(struct core_buf *b)
{
    struct gs_batch_header h = {7, 0x1122334455667788ull, 42, 1700000000123ll, 0};
    assert_int_equal(gs_batch_begin(b, &h), 0);
    const char *a1[] = {"SET", "key", "value"};
    size_t l1[] = {3, 3, 5};
    assert_int_equal(gs_batch_add(b, 3, a1, l1), 0);
    const char bin[] = {'a', 0, 'b'};
    const char *a2[] = {"INCR", bin};
    size_t l2[] = {4, 3};
    assert_int_equal(gs_batch_add(b, 2, a2, l2), 0);
    const char *a3[] = {"DEL", ""};
    size_t l3[] = {3, 0};
    assert_int_equal(gs_batch_add(b, 2, a3, l3), 0);
}

static void test_batch_round_trip(void **state)
{
    struct core_buf b = {0};
    build(&b);
    assert_int_equal(gs_batch_count(&b), 3);
    struct gs_batch_header h;
    struct gs_batch_reader rd = {0};
    assert_int_equal(gs_batch_parse(b.data, b.len, &h, &rd), 0);
    assert_true(h.origin_id == 7);
    assert_true(h.incarnation == 0x1122334455667788ull);
    assert_true(h.seq == 42);
    assert_true(h.now_ms == 1700000000123ll);
    assert_int_equal(h.ncmds, 3);

    unsigned argc;
    const char *const *argv;
    const size_t *len;
    assert_int_equal(gs_batch_next(&rd, &argc, &argv, &len), 1);
    assert_int_equal(argc, 3);
    assert_memory_equal(argv[2], "value", 5);
    assert_int_equal(gs_batch_next(&rd, &argc, &argv, &len), 1);
    assert_int_equal(argc, 2);
    assert_int_equal(len[1], 3);
    assert_memory_equal(argv[1], "a\0b", 3);
    assert_int_equal(gs_batch_next(&rd, &argc, &argv, &len), 1);
    assert_int_equal(len[1], 0);
    assert_int_equal(gs_batch_next(&rd, &argc, &argv, &len), 0);

    /* Stamping rewrites the origin but keeps the commands. */
    struct gs_batch_header h2 = {9, 1, 2, 3, 0};
    gs_batch_stamp(&b, &h2);
    assert_int_equal(gs_batch_parse(b.data, b.len, &h, &rd), 0);
    assert_true(h.origin_id == 9 && h.seq == 2 && h.ncmds == 3);
    gs_batch_reader_free(&rd);
    core_buf_free(&b);
}

static void test_batch_rejects_truncation_and_garbage(void **state)
{
    struct core_buf b = {0};
    build(&b);
    struct gs_batch_header h;
    struct gs_batch_reader rd = {0};
    for (size_t n = 0; n < b.len; n++)
        assert_int_equal(gs_batch_parse(b.data, n, &h, &rd), CORE_EPROTO);
    /* Trailing bytes are corruption too. */
    assert_int_equal(core_buf_append(&b, "x", 1), 0);
    assert_int_equal(gs_batch_parse(b.data, b.len, &h, &rd), CORE_EPROTO);
    b.len--;
    /* A length that points past the end. */
    b.data[GS_BATCH_HEADER + 4] = (char)0xff;
    assert_int_equal(gs_batch_parse(b.data, b.len, &h, &rd), CORE_EPROTO);
    /* Wrong magic. */
    build(&b);
    b.data[0] ^= 1;
    assert_int_equal(gs_batch_parse(b.data, b.len, &h, &rd), CORE_EPROTO);
    /* Empty commands are refused on both sides. */
    build(&b);
    assert_int_equal(gs_batch_add(&b, 0, NULL, NULL), CORE_EINVAL);
    gs_batch_reader_free(&rd);
    core_buf_free(&b);
}

struct seen {
    int n;
    char keys[4][8];
    int64_t exp[4];
    int type[4];
};

static int collect(void *arg, int type, const char *key, size_t klen, const char *val, size_t vlen,
                   int64_t expire_ms)
{
    struct seen *s = arg;
    s->type[s->n < 4 ? s->n : 0] = type;
    if (s->n == 4)
        return CORE_ERANGE;
    memcpy(s->keys[s->n], key, klen < 7 ? klen : 7);
    s->exp[s->n++] = expire_ms;
    return 0;
}

static void test_snapshot_round_trip_and_corruption(void **state)
{
    struct core_buf b = {0};
    assert_int_equal(gs_snapshot_begin(&b), 0);
    assert_int_equal(gs_snapshot_add(&b, GS_TYPE_STRING, "k1", 2, "v1", 2, -1), 0);
    assert_int_equal(gs_snapshot_add(&b, GS_TYPE_STRING, "k2", 2, "", 0, 1234), 0);
    /* a hash record: the listpack of its pairs */
    struct gs_obj h;
    static const struct gs_type_limits lim = GS_TYPE_LIMITS_DEFAULT;
    assert_int_equal(gs_hash_init(&h), 0);
    assert_int_equal(gs_hash_set(&h, "f", 1, "123", 3, &lim, NULL), 0);
    unsigned char *enc;
    size_t enclen;
    assert_int_equal(gs_obj_encode(&h, &enc, &enclen), 0);
    assert_int_equal(gs_snapshot_add(&b, GS_TYPE_HASH, "k3", 2, enc, enclen, -1), 0);
    gs_snapshot_finish(&b, 3);
    struct seen s = {0};
    assert_int_equal(gs_snapshot_parse(b.data, b.len, collect, &s), 0);
    assert_int_equal(s.n, 3);
    assert_string_equal(s.keys[1], "k2");
    assert_string_equal(s.keys[2], "k3");
    assert_true(s.type[0] == GS_TYPE_STRING && s.type[2] == GS_TYPE_HASH);
    assert_true(s.exp[0] == -1 && s.exp[1] == 1234);
    struct gs_obj back;
    assert_int_equal(gs_obj_decode(GS_TYPE_HASH, enc, enclen, &lim, &back), 0);
    char buf[GS_LP_INTBUF];
    const char *v;
    size_t vlen;
    assert_true(gs_hash_get(&back, "f", 1, buf, &v, &vlen));
    assert_int_equal(vlen, 3);
    assert_memory_equal(v, "123", 3);
    gs_hash_free(&back);
    gs_hash_free(&h);

    /* a hash record whose listpack is corrupt fails validation, before
     * any entry reaches fn */
    size_t last = b.len - enclen;
    b.data[last + 4] ^= 0x01; /* the listpack's entry count */
    memset(&s, 0, sizeof(s));
    assert_int_equal(gs_snapshot_parse(b.data, b.len, collect, &s), CORE_EPROTO);
    assert_int_equal(s.n, 0);
    b.data[last + 4] ^= 0x01;
    free(enc);
    assert_int_equal(gs_snapshot_parse(b.data, b.len, NULL, NULL), 0);

    /* A corrupt snapshot calls fn for nothing: it is validated first. */
    for (size_t n = 0; n < b.len; n++) {
        memset(&s, 0, sizeof(s));
        assert_int_equal(gs_snapshot_parse(b.data, n, collect, &s), CORE_EPROTO);
        assert_int_equal(s.n, 0);
    }
    gs_snapshot_finish(&b, 1000000); /* count larger than the bytes allow */
    assert_int_equal(gs_snapshot_parse(b.data, b.len, collect, &s), CORE_EPROTO);
    core_buf_free(&b);
}

static void test_mux_handshake(void **state)
{
    char buf[GS_MUX_MAX];
    size_t n = gs_mux_handshake_encode(buf, 7, 0x0102030405060708ull, "10.0.0.1:17000");
    assert_int_equal(n, GS_MUX_HEADER + 14);
    uint32_t group;
    uint64_t id;
    const char *addr;
    size_t alen, need;
    /* Byte by byte, as a socket may deliver it. */
    for (size_t len = 0; len < n; len++) {
        int rc = gs_mux_handshake_parse(buf, len, &group, &id, &addr, &alen, &need);
        assert_int_equal(rc, CORE_EINCOMPLETE);
        assert_true(need > len && need <= n);
    }
    assert_int_equal(gs_mux_handshake_parse(buf, n, &group, &id, &addr, &alen, &need), 0);
    assert_int_equal(group, 7);
    assert_true(id == 0x0102030405060708ull);
    assert_int_equal(alen, 14);
    assert_memory_equal(addr, "10.0.0.1:17000", 14);
    assert_int_equal(need, n);
    /* Bad magic (noticed as soon as it is here), bad lengths. */
    buf[0] ^= 1;
    assert_int_equal(gs_mux_handshake_parse(buf, 4, &group, &id, &addr, &alen, &need), CORE_EPROTO);
    buf[0] ^= 1;
    buf[16] = 0;
    assert_int_equal(gs_mux_handshake_parse(buf, n, &group, &id, &addr, &alen, &need), CORE_EPROTO);
    char longaddr[GS_MUX_ADDR_MAX + 2];
    memset(longaddr, 'a', sizeof(longaddr) - 1);
    longaddr[sizeof(longaddr) - 1] = '\0';
    assert_int_equal(gs_mux_handshake_encode(buf, 1, 1, longaddr), 0);
    assert_int_equal(gs_mux_handshake_encode(buf, 1, 1, ""), 0);
}

static void test_leader_hint(void **state)
{
    struct gs_hint h = {.sender = 0x1122334455667788ull, .n = 2}, back;
    h.group[0] = 7;
    h.term[0] = 3;
    h.group[1] = 0xfffffffeu;
    h.term[1] = 1ull << 40;
    char buf[GS_HINT_BYTES];
    size_t n = gs_hint_encode(buf, &h);
    assert_int_equal(n, GS_HINT_HEADER + 24);
    assert_int_equal(gs_hint_parse(buf, n, &back), 0);
    assert_int_equal(back.sender, h.sender);
    assert_int_equal(back.n, 2);
    assert_int_equal(back.group[1], h.group[1]);
    assert_true(back.term[1] == h.term[1]);
    /* Every other length, a bad magic, a count past the maximum: refused. */
    for (size_t len = 0; len < n + 12; len++)
        if (len != n)
            assert_int_equal(gs_hint_parse(buf, len, &back), CORE_EPROTO);
    buf[0] ^= 1;
    assert_int_equal(gs_hint_parse(buf, n, &back), CORE_EPROTO);
    buf[0] ^= 1;
    h.n = GS_HINT_MAX + 1;
    assert_int_equal(gs_hint_encode(buf, &h), 0);
    h.n = 0;
    assert_int_equal(gs_hint_parse(buf, gs_hint_encode(buf, &h), &back), 0);
    assert_int_equal(back.n, 0);
}

static void test_publish_datagram(void **state)
{
    (void)state;
    static char buf[GS_PUB_BYTES + 8];
    struct gs_pub p;
    size_t n = gs_pub_encode(buf, 42, "news", 4, "hello", 5);
    assert_int_equal(n, GS_PUB_HEADER + 9);
    assert_int_equal(gs_pub_parse(buf, n, &p), 0);
    assert_true(p.sender == 42);
    assert_int_equal(p.chlen, 4);
    assert_memory_equal(p.channel, "news", 4);
    assert_int_equal(p.msglen, 5);
    assert_memory_equal(p.message, "hello", 5);
    /* Every other length and a bad magic are refused; so is a hint. */
    for (size_t len = 0; len < n + 8; len++)
        if (len != n)
            assert_int_equal(gs_pub_parse(buf, len, &p), CORE_EPROTO);
    buf[3] ^= 1;
    assert_int_equal(gs_pub_parse(buf, n, &p), CORE_EPROTO);
    struct gs_hint h = {.sender = 1, .n = 0};
    assert_int_equal(gs_pub_parse(buf, gs_hint_encode(buf, &h), &p), CORE_EPROTO);
    /* Empty channel and message; the largest that fits; one byte more. */
    assert_int_equal(gs_pub_parse(buf, gs_pub_encode(buf, 1, "", 0, "", 0), &p), 0);
    static char big[GS_PUB_BYTES];
    memset(big, 'x', sizeof(big));
    size_t most = GS_PUB_BYTES - GS_PUB_HEADER - 1;
    assert_int_equal(gs_pub_encode(buf, 1, "c", 1, big, most), GS_PUB_BYTES);
    assert_int_equal(gs_pub_parse(buf, GS_PUB_BYTES, &p), 0);
    assert_int_equal(gs_pub_encode(buf, 1, "c", 1, big, most + 1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_round_trip),
        cmocka_unit_test(test_batch_rejects_truncation_and_garbage),
        cmocka_unit_test(test_snapshot_round_trip_and_corruption),
        cmocka_unit_test(test_mux_handshake),
        cmocka_unit_test(test_leader_hint),
        cmocka_unit_test(test_publish_datagram),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
