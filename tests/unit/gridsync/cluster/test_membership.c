/* The membership's text (gridsync/cluster/membership.h): format and parse
 * round-trip, what the parser refuses, the CLUSTER MEMBERSHIP reply's
 * framing, and the file written atomically into a directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/error.h"
#include "gridsync/cluster/membership.h"

static struct gs_membership *sample(void)
{
    struct gs_membership *m = calloc(1, sizeof(*m));
    m->version = 7;
    m->replicas = 3;
    m->n = 3;
    strcpy(m->nodes[0], "127.0.0.1:7000");
    strcpy(m->nodes[1], "127.0.0.1:7001");
    strcpy(m->nodes[2], "[::1]:7002");
    m->change = GS_CHANGE_ADD;
    strcpy(m->change_node, "127.0.0.1:7003");
    strcpy(m->self, "127.0.0.1:7001");
    return m;
}

static void test_round_trip(void **state)
{
    (void)state;
    struct gs_membership *m = sample(), *back = malloc(sizeof(*back));
    struct core_buf b = {0};
    assert_int_equal(gs_membership_format(m, &b), 0);
    assert_int_equal(gs_membership_parse(back, b.data, b.len), 0);
    assert_memory_equal(m, back, sizeof(*m));
    /* Without self (the reply's form) and without a change. */
    memset(m->self, 0, sizeof(m->self));
    m->change = GS_CHANGE_NONE;
    memset(m->change_node, 0, sizeof(m->change_node));
    b.len = 0;
    assert_int_equal(gs_membership_format(m, &b), 0);
    assert_null(memmem(b.data, b.len, "self", 4)); /* the text is not NUL-terminated */
    assert_int_equal(gs_membership_parse(back, b.data, b.len), 0);
    assert_memory_equal(m, back, sizeof(*m));
    core_buf_free(&b);
    free(m);
    free(back);
}

static void test_refuses(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "gridsync-membership 2\nversion 1\nreplicas 3\nnode a:1\n",
        "gridsync-membership 1\nreplicas 3\nnode a:1\n",            /* no version */
        "gridsync-membership 1\nversion 1\nnode a:1\n",             /* no replicas */
        "gridsync-membership 1\nversion 1\nreplicas 3\n",           /* no node */
        "gridsync-membership 1\nversion 1\nreplicas 3\nnode a:1",   /* no final newline */
        "gridsync-membership 1\nversion 1\nreplicas 0\nnode a:1\n", /* replicas range */
        "gridsync-membership 1\nversion 1\nreplicas 8\nnode a:1\n",
        "gridsync-membership 1\nversion x\nreplicas 3\nnode a:1\n",
        "gridsync-membership 1\nversion 1\nversion 2\nreplicas 3\nnode a:1\n",
        "gridsync-membership 1\nversion 1\nreplicas 3\nnode a:1\nnode a:1\n", /* twice */
        "gridsync-membership 1\nversion 1\nreplicas 3\nnode a b\n",           /* space in name */
        "gridsync-membership 1\nversion 1\nreplicas 3\nnode \n",
        "gridsync-membership 1\nversion 1\nreplicas 3\nnode a:1\nother x\n",
        "gridsync-membership 1\nversion 1\nreplicas 3\nnode a:1\nchange add a:1\n",
        "gridsync-membership 1\nversion 1\nreplicas 3\nnode a:1\nnode b:1\nchange remove c:1\n",
        "gridsync-membership 1\nversion 1\nreplicas 3\nnode a:1\nchange remove a:1\n",
        "gridsync-membership 1\nversion 1\nreplicas 3\nnode a:1\nchange move b:1\n",
        "gridsync-membership 1\nversion 1\nreplicas 3\nnode a:1\nchange add b:1\nchange add c:1\n",
    };
    struct gs_membership *m = malloc(sizeof(*m));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(gs_membership_parse(m, bad[i], strlen(bad[i])), CORE_EINVAL);
    /* Lines in any order: a change named before the node lines. */
    static const char ok[] =
        "gridsync-membership 1\nchange remove b:1\nnode a:1\nnode b:1\nreplicas 1\nversion 0\n";
    assert_int_equal(gs_membership_parse(m, ok, strlen(ok)), 0);
    assert_int_equal(m->change, GS_CHANGE_REMOVE);
    assert_int_equal(m->n, 2);
    free(m);
}

static void test_reply(void **state)
{
    (void)state;
    struct gs_membership *m = sample(), *back = malloc(sizeof(*back));
    memset(m->self, 0, sizeof(m->self));
    struct core_buf text = {0}, reply = {0};
    assert_int_equal(gs_membership_format(m, &text), 0);
    char head[32];
    int hl = snprintf(head, sizeof(head), "$%zu\r\n", text.len);
    core_buf_append(&reply, head, (size_t)hl);
    core_buf_append(&reply, text.data, text.len);
    core_buf_append(&reply, "\r\n", 2);
    /* Every prefix is incomplete, the whole reply parses. */
    for (size_t len = 0; len < reply.len; len++)
        assert_int_equal(gs_membership_parse_reply(back, reply.data, len), CORE_EINCOMPLETE);
    assert_int_equal(gs_membership_parse_reply(back, reply.data, reply.len), 0);
    assert_memory_equal(m, back, sizeof(*m));
    static const char err[] = "-ERR This instance has cluster support disabled\r\n";
    assert_int_equal(gs_membership_parse_reply(back, err, strlen(err)), CORE_EPROTO);
    static const char huge[] = "$99999999999\r\n";
    assert_int_equal(gs_membership_parse_reply(back, huge, strlen(huge)), CORE_EPROTO);
    core_buf_free(&text);
    core_buf_free(&reply);
    free(m);
    free(back);
}

static void test_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/gs-membership-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sub[sizeof(dir) + 16];
    snprintf(sub, sizeof(sub), "%s/a/b", dir); /* created on the way */
    struct gs_membership *m = sample(), *back = malloc(sizeof(*back));
    assert_false(gs_membership_exists(sub));
    assert_int_equal(gs_membership_load(back, sub), CORE_ENOTFOUND);
    assert_int_equal(gs_membership_save(m, sub), 0);
    assert_true(gs_membership_exists(sub));
    m->version = 8;
    m->change = GS_CHANGE_NONE;
    memset(m->change_node, 0, sizeof(m->change_node));
    assert_int_equal(gs_membership_save(m, sub), 0);
    assert_int_equal(gs_membership_load(back, sub), 0);
    assert_memory_equal(m, back, sizeof(*m));
    /* A damaged file is an error, not a guess. */
    char path[sizeof(sub) + 32];
    snprintf(path, sizeof(path), "%s/%s", sub, GS_MEMBERSHIP_FILE);
    FILE *f = fopen(path, "w");
    fputs("gridsync-membership 1\nversion 8\n", f);
    fclose(f);
    assert_int_equal(gs_membership_load(back, sub), CORE_EINVAL);
    unlink(path);
    char p2[sizeof(dir) + 8];
    snprintf(p2, sizeof(p2), "%s/a", dir);
    rmdir(sub);
    rmdir(p2);
    rmdir(dir);
    free(m);
    free(back);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_refuses),
        cmocka_unit_test(test_reply),
        cmocka_unit_test(test_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
