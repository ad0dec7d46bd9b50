/* curve: Z85 key checks, key files (made once, 0600, kept, a loose mode
 * refused), public keys given as text or a file, the allow-list parser,
 * and a real CURVE PUB/SUB pair in one process where the ZAP handler lets
 * the listed client in and keeps an unlisted one out; em_curve_guard
 * ending a removed client's connection already up. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <zmq.h>

#include "core/error.h"
#include "edumatcher/bus/curve.h"
#include "edumatcher/bus/zmq_bus.h"

static char dir[64];

static int setup(void **state)
{
    snprintf(dir, sizeof dir, "/tmp/test_curve.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_z85(void **state)
{
    char pub[41], sec[41];
    assert_int_equal(zmq_curve_keypair(pub, sec), 0);
    assert_true(em_curve_z85_valid(pub, 40));
    assert_false(em_curve_z85_valid(pub, 39));
    char bad[41];
    memcpy(bad, pub, 41);
    bad[7] = '"'; /* not in the alphabet */
    assert_false(em_curve_z85_valid(bad, 40));
    /* "#####" is 84 * (85^4 + ... + 1) > 2^32 - 1: not a 4-byte group */
    memcpy(bad, "#####", 5);
    memcpy(bad + 5, pub + 5, 36);
    assert_false(em_curve_z85_valid(bad, 40));
}

static void test_key_file(void **state)
{
    char path[128], pubpath[140];
    snprintf(path, sizeof path, "%s/curve.key", dir);
    snprintf(pubpath, sizeof pubpath, "%s.pub", path);
    struct em_curve_pair a, b;
    assert_int_equal(em_curve_key_load(path, false, &a), CORE_ENOTFOUND);
    assert_int_equal(em_curve_key_load(path, true, &a), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_true(em_curve_z85_valid(a.public_key, strlen(a.public_key)));
    assert_true(em_curve_z85_valid(a.secret_key, strlen(a.secret_key)));
    /* the public half beside it, and the same pair next time */
    char pub[41];
    assert_int_equal(em_curve_public_load(pubpath, pub), 0);
    assert_string_equal(pub, a.public_key);
    assert_int_equal(em_curve_key_load(path, true, &b), 0);
    assert_string_equal(a.public_key, b.public_key);
    assert_string_equal(a.secret_key, b.secret_key);
    /* a stale .pub is rewritten from the secret */
    FILE *f = fopen(pubpath, "w");
    fputs("0000000000000000000000000000000000000000\n", f);
    fclose(f);
    assert_int_equal(em_curve_key_load(path, false, &b), 0);
    assert_int_equal(em_curve_public_load(pubpath, pub), 0);
    assert_string_equal(pub, a.public_key);
    /* a secret others may have read is refused */
    chmod(path, 0640);
    assert_int_equal(em_curve_key_load(path, false, &b), CORE_EPROTO);
    /* a file that is not a key */
    char junk[128];
    snprintf(junk, sizeof junk, "%s/junk.key", dir);
    f = fopen(junk, "w");
    fputs("hello\n", f);
    fclose(f);
    chmod(junk, 0600);
    assert_int_equal(em_curve_key_load(junk, true, &b), CORE_EINVAL);
}

static void test_public_arg(void **state)
{
    char pub[41], sec[41], out[41];
    zmq_curve_keypair(pub, sec);
    assert_int_equal(em_curve_public_load(pub, out), 0);
    assert_string_equal(out, pub);
    assert_int_equal(em_curve_public_load("short", out), CORE_ENOTFOUND);
    char bad[41];
    memcpy(bad, pub, 41);
    bad[0] = '"';
    assert_int_equal(em_curve_public_load(bad, out), CORE_EINVAL);
}

static void test_allow_parse(void **state)
{
    char k1[41], k2[41], sec[41];
    zmq_curve_keypair(k1, sec);
    zmq_curve_keypair(k2, sec);
    static struct em_curve_allow a;
    int line;
    char text[512];
    int n = snprintf(text, sizeof text, "# comment\n\n  %s gateway GW1\r\n\t%s\n   \n", k1, k2);
    assert_int_equal(em_curve_allow_parse(text, (size_t)n, &a, &line), 0);
    assert_int_equal(a.count, 2);
    uint8_t bin[32];
    zmq_z85_decode(bin, k2);
    assert_true(em_curve_allowed(&a, bin));
    zmq_z85_decode(bin, k1);
    assert_true(em_curve_allowed(&a, bin));
    bin[0] ^= 1;
    assert_false(em_curve_allowed(&a, bin));
    /* no newline at the end */
    n = snprintf(text, sizeof text, "%s", k1);
    assert_int_equal(em_curve_allow_parse(text, (size_t)n, &a, &line), 0);
    assert_int_equal(a.count, 1);
    /* an empty list is valid: nobody may connect */
    assert_int_equal(em_curve_allow_parse("", 0, &a, &line), 0);
    assert_int_equal(a.count, 0);
    /* errors name their line */
    n = snprintf(text, sizeof text, "%s\n# x\nnot-a-key\n", k1);
    assert_int_equal(em_curve_allow_parse(text, (size_t)n, &a, &line), CORE_EINVAL);
    assert_int_equal(line, 3);
    n = snprintf(text, sizeof text, "%sX\n", k1); /* 41 characters */
    assert_int_equal(em_curve_allow_parse(text, (size_t)n, &a, &line), CORE_EINVAL);
    assert_int_equal(line, 1);
    /* a NUL inside is not a key character */
    memcpy(text, k1, 40);
    text[10] = '\0';
    assert_int_equal(em_curve_allow_parse(text, 40, &a, &line), CORE_EINVAL);
    /* past the limit */
    static char many[(EM_CURVE_MAX_KEYS + 1) * 41];
    for (int i = 0; i <= EM_CURVE_MAX_KEYS; i++) {
        memcpy(many + i * 41, k1, 40);
        many[i * 41 + 40] = '\n';
    }
    assert_int_equal(em_curve_allow_parse(many, sizeof many, &a, &line), CORE_ETOOBIG);
    assert_int_equal(line, EM_CURVE_MAX_KEYS + 1);
    assert_int_equal(em_curve_allow_load("/nonexistent/allow", &a, &line), CORE_ENOTFOUND);
    assert_int_equal(line, 0);
}

/* One message from pub to sub, published until it arrives or the wait
 * runs out (a SUB's join is asynchronous). */
static bool delivered(struct em_bus_sock *pub, struct em_bus_sock *sub)
{
    static const struct em_bus_topic t = {5, "md.AB"};
    for (int i = 0; i < 40; i++) {
        em_bus_send(pub, &t, "x", 1);
        if (em_bus_recv_wait(sub, 50) == 0)
            return true;
    }
    return false;
}

static void test_zap_allows_only_listed(void **state)
{
    void *ctx;
    assert_int_equal(em_bus_ctx_new(&ctx), 0);
    struct em_curve_pair server, ok, other;
    char path[128];
    snprintf(path, sizeof path, "%s/server.key", dir);
    assert_int_equal(em_curve_key_load(path, true, &server), 0);
    snprintf(path, sizeof path, "%s/ok.key", dir);
    assert_int_equal(em_curve_key_load(path, true, &ok), 0);
    snprintf(path, sizeof path, "%s/other.key", dir);
    assert_int_equal(em_curve_key_load(path, true, &other), 0);
    memcpy(ok.server_key, server.public_key, 41);
    memcpy(other.server_key, server.public_key, 41);

    static struct em_curve_allow allow;
    int line;
    char list[128];
    snprintf(list, sizeof list, "%s/clients", dir);
    FILE *f = fopen(list, "w");
    fprintf(f, "%s ok\n", ok.public_key);
    fclose(f);
    assert_int_equal(em_curve_allow_load(list, &allow, &line), 0);
    struct em_curve_zap *zap;
    assert_int_equal(em_curve_zap_start(&zap, ctx, &allow, list), 0);
    struct em_curve_zap *again;
    assert_int_equal(em_curve_zap_start(&again, ctx, &allow, NULL), CORE_EBUSY);

    static struct em_bus_sock pub, sub_ok, sub_other, sub_plain;
    assert_int_equal(em_bus_open_curve(&pub, ctx, EM_BUS_PUB, "tcp://127.0.0.1:*", true, &server),
                     0);
    char ep[64];
    assert_int_equal(em_bus_last_endpoint(&pub, ep, sizeof ep), 0);
    assert_int_equal(em_bus_open_curve(&sub_other, ctx, EM_BUS_SUB, ep, false, &other), 0);
    assert_int_equal(em_bus_open(&sub_plain, ctx, EM_BUS_SUB, ep, false), 0);
    assert_int_equal(em_bus_open_curve(&sub_ok, ctx, EM_BUS_SUB, ep, false, &ok), 0);
    em_bus_subscribe(&sub_ok, "");
    em_bus_subscribe(&sub_other, "");
    em_bus_subscribe(&sub_plain, "");
    assert_true(delivered(&pub, &sub_ok));
    /* what the listed client got, the others never see */
    assert_int_equal(em_bus_recv_wait(&sub_other, 200), CORE_ETIMEOUT);
    assert_int_equal(em_bus_recv_wait(&sub_plain, 0), CORE_ETIMEOUT);
    const struct em_curve_zap_stats *zs = em_curve_zap_stats(zap);
    assert_true(__atomic_load_n(&zs->allowed, __ATOMIC_RELAXED) >= 1);
    assert_true(__atomic_load_n(&zs->denied, __ATOMIC_RELAXED) >= 1);

    /* The list is re-read when its file changes: a key added by rename is
     * let in without a restart; a file that stops parsing keeps the list
     * in force (ok is still let in). */
    char tmp[140];
    snprintf(tmp, sizeof tmp, "%s.new", list);
    f = fopen(tmp, "w");
    fprintf(f, "%s ok\n%s other\n", ok.public_key, other.public_key);
    fclose(f);
    assert_int_equal(rename(tmp, list), 0);
    static struct em_bus_sock sub_new;
    assert_int_equal(em_bus_open_curve(&sub_new, ctx, EM_BUS_SUB, ep, false, &other), 0);
    em_bus_subscribe(&sub_new, "");
    assert_true(delivered(&pub, &sub_new));
    assert_true(__atomic_load_n(&zs->reloads, __ATOMIC_RELAXED) == 1);
    f = fopen(tmp, "w");
    fputs("garbage\n", f);
    fclose(f);
    assert_int_equal(rename(tmp, list), 0);
    static struct em_bus_sock sub_ok2;
    assert_int_equal(em_bus_open_curve(&sub_ok2, ctx, EM_BUS_SUB, ep, false, &ok), 0);
    em_bus_subscribe(&sub_ok2, "");
    assert_true(delivered(&pub, &sub_ok2));
    assert_true(__atomic_load_n(&zs->reloads, __ATOMIC_RELAXED) == 1);
    em_bus_close(&sub_new);
    em_bus_close(&sub_ok2);

    /* a client without the server's key is refused at open */
    struct em_curve_pair nokey = ok;
    nokey.server_key[0] = '\0';
    static struct em_bus_sock bad;
    assert_int_equal(em_bus_open_curve(&bad, ctx, EM_BUS_SUB, ep, false, &nokey), CORE_EINVAL);

    em_bus_close(&sub_ok);
    em_bus_close(&sub_other);
    em_bus_close(&sub_plain);
    em_bus_close(&pub);
    em_bus_ctx_term(ctx);
    em_curve_zap_free(zap);
}

/* em_curve_guard: a key removed from the file unbinds the guarded socket
 * and binds it again, so the removed client's connection already up ends
 * while the listed one reconnects; an unchanged file does nothing. */
static void test_guard_revokes(void **state)
{
    void *ctx;
    assert_int_equal(em_bus_ctx_new(&ctx), 0);
    struct em_curve_pair server, ok, gone;
    char path[128];
    snprintf(path, sizeof path, "%s/server.key", dir);
    assert_int_equal(em_curve_key_load(path, true, &server), 0);
    snprintf(path, sizeof path, "%s/ok.key", dir);
    assert_int_equal(em_curve_key_load(path, true, &ok), 0);
    snprintf(path, sizeof path, "%s/gone.key", dir);
    assert_int_equal(em_curve_key_load(path, true, &gone), 0);
    memcpy(ok.server_key, server.public_key, 41);
    memcpy(gone.server_key, server.public_key, 41);

    char list[128], tmp[140];
    snprintf(list, sizeof list, "%s/clients", dir);
    snprintf(tmp, sizeof tmp, "%s.new", list);
    FILE *f = fopen(list, "w");
    fprintf(f, "%s ok\n%s gone\n", ok.public_key, gone.public_key);
    fclose(f);
    static struct em_curve_allow allow;
    int line;
    assert_int_equal(em_curve_allow_load(list, &allow, &line), 0);
    struct em_curve_zap *zap;
    assert_int_equal(em_curve_zap_start(&zap, ctx, &allow, list), 0);
    static struct em_bus_sock pub, sub_ok, sub_gone, spare;
    assert_int_equal(em_bus_open_curve(&pub, ctx, EM_BUS_PUB, "tcp://127.0.0.1:*", true, &server),
                     0);
    char ep[64];
    assert_int_equal(em_bus_last_endpoint(&pub, ep, sizeof ep), 0);
    static struct em_curve_guard g;
    em_curve_guard_init(&g, "test", list, &allow);
    assert_int_equal(em_curve_guard_add(&g, &pub, "--pub"), 0);
    static struct em_curve_guard full; /* the limit, on a guard never stepped */
    em_curve_guard_init(&full, "test", list, &allow);
    for (int i = 0; i < EM_CURVE_GUARD_SOCKS; i++)
        assert_int_equal(em_curve_guard_add(&full, &spare, "spare"), 0);
    assert_int_equal(em_curve_guard_add(&full, &spare, "one too many"), CORE_ETOOBIG);

    assert_int_equal(em_bus_open_curve(&sub_ok, ctx, EM_BUS_SUB, ep, false, &ok), 0);
    assert_int_equal(em_bus_open_curve(&sub_gone, ctx, EM_BUS_SUB, ep, false, &gone), 0);
    em_bus_subscribe(&sub_ok, "");
    em_bus_subscribe(&sub_gone, "");
    assert_true(delivered(&pub, &sub_ok));
    assert_true(delivered(&pub, &sub_gone));
    assert_int_equal(em_curve_guard_step(&g), 0);
    assert_false(g.s[0].unbound); /* the file did not change: never unbound */
    assert_string_equal(g.s[0].endpoint, "");

    f = fopen(tmp, "w");
    fprintf(f, "%s ok\n", ok.public_key);
    fclose(f);
    assert_int_equal(rename(tmp, list), 0);
    assert_int_equal(em_curve_guard_step(&g), 0);
    for (int i = 0; i < 1000 && g.s[0].unbound; i++) { /* the port comes free */
        usleep(10000);
        assert_int_equal(em_curve_guard_step(&g), 0);
    }
    assert_false(g.s[0].unbound);
    /* unbound (the endpoint kept: the same step may bind it again at once) */
    assert_string_equal(g.s[0].endpoint, ep);
    char again[64];
    assert_int_equal(em_bus_last_endpoint(&pub, again, sizeof again), 0);
    assert_string_equal(again, ep);

    while (em_bus_recv_wait(&sub_gone, 0) == 0) /* what it had before */
        ;
    assert_true(delivered(&pub, &sub_ok)); /* reconnected by itself */
    for (int i = 0; i < 5; i++)
        assert_true(delivered(&pub, &sub_ok));
    assert_int_equal(em_bus_recv_wait(&sub_gone, 200), CORE_ETIMEOUT);

    em_bus_close(&sub_ok);
    em_bus_close(&sub_gone);
    em_bus_close(&pub);
    em_bus_ctx_term(ctx);
    em_curve_zap_free(zap);
}

int main(void)
{
    if (!em_curve_available()) {
        fprintf(stderr, "libzmq without CURVE: skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_z85),
        cmocka_unit_test_setup_teardown(test_key_file, setup, teardown),
        cmocka_unit_test(test_public_arg),
        cmocka_unit_test(test_allow_parse),
        cmocka_unit_test_setup_teardown(test_zap_allows_only_listed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_guard_revokes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
