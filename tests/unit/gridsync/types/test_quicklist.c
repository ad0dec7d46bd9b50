/*
 * The quicklist against a simple array model: seeded random pushes at
 * both ends, inserts before/after (splitting full nodes), replaces,
 * deletes by position and by range, with every fill setting (size limits
 * -1..-5 and element counts), checking contents both ways, the node
 * structure and memory against a recount after every step.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gridsync/types/listpack/listpack.h"
#include "gridsync/types/quicklist/quicklist.h"

#define MAXN 3000

struct model {
    char *v[MAXN];
    size_t n;
};

static void model_insert(struct model *m, size_t at, const char *s)
{
    memmove(&m->v[at + 1], &m->v[at], (m->n - at) * sizeof(char *));
    m->v[at] = strdup(s);
    m->n++;
}

static void model_delete(struct model *m, size_t at)
{
    free(m->v[at]);
    memmove(&m->v[at], &m->v[at + 1], (m->n - at - 1) * sizeof(char *));
    m->n--;
}

static void check(const struct gs_quicklist *ql, const struct model *m)
{
    assert_int_equal(ql->count, m->n);
    assert_int_equal(gs_ql_recount(ql), ql->mem);
    char buf[GS_LP_INTBUF];
    size_t i = 0, len;
    for (struct gs_ql_pos p = gs_ql_index(ql, 0); p.node; p = gs_ql_next(ql, p), i++) {
        const char *v = gs_ql_get(p, buf, &len);
        assert_int_equal(len, strlen(m->v[i]));
        assert_memory_equal(v, m->v[i], len);
    }
    assert_int_equal(i, m->n);
    i = m->n;
    for (struct gs_ql_pos p = gs_ql_index(ql, -1); p.node; p = gs_ql_prev(ql, p)) {
        i--;
        assert_true(gs_ql_eq(p, m->v[i], strlen(m->v[i])));
    }
    assert_int_equal(i, 0);
    /* an index from the tail names the same element as from the head */
    size_t ks[] = {1, 2, m->n / 3, m->n / 2, m->n - 1, m->n};
    for (size_t j = 0; j < sizeof(ks) / sizeof(ks[0]); j++) {
        if (ks[j] < 1 || ks[j] > m->n)
            continue;
        struct gs_ql_pos a = gs_ql_index(ql, -(int64_t)ks[j]);
        struct gs_ql_pos b = gs_ql_index(ql, (int64_t)(m->n - ks[j]));
        assert_ptr_equal(a.node, b.node);
        assert_int_equal(a.off, b.off);
    }
    assert_null(gs_ql_index(ql, -(int64_t)m->n - 1).node);
    for (const struct gs_qnode *n = ql->head; n; n = n->next)
        assert_true(gs_lp_has_backlen(n->lp));
}

static void random_value(char *v, size_t cap)
{
    int kind = rand() % 4;
    if (kind == 0)
        snprintf(v, cap, "%d", rand() % 1000 - 500);
    else if (kind == 1)
        snprintf(v, cap, "%ld", (long)rand() * 100000L);
    else {
        size_t len = (size_t)(rand() % (kind == 3 ? 300 : 12));
        for (size_t i = 0; i < len && i + 1 < cap; i++)
            v[i] = (char)('a' + rand() % 26);
        v[len < cap ? len : cap - 1] = 0;
    }
}

static void run(int fill, unsigned seed)
{
    srand(seed);
    struct gs_quicklist *ql = gs_ql_new(fill);
    struct model m = {{0}, 0};
    char v[400];
    for (int step = 0; step < 1500; step++) {
        int op = rand() % 10;
        random_value(v, sizeof(v));
        if (op < 4 || m.n == 0) {
            bool head = rand() % 2;
            assert_int_equal(gs_ql_push(ql, head, v, strlen(v)), 0);
            model_insert(&m, head ? 0 : m.n, v);
        } else if (op < 6) {
            size_t at = (size_t)rand() % m.n;
            bool after = rand() % 2;
            struct gs_ql_pos p = gs_ql_index(ql, (int64_t)at);
            assert_int_equal(gs_ql_insert(ql, p, after, v, strlen(v)), 0);
            model_insert(&m, after ? at + 1 : at, v);
        } else if (op == 6) {
            size_t at = (size_t)rand() % m.n;
            struct gs_ql_pos p = gs_ql_index(ql, -(int64_t)(m.n - at));
            assert_int_equal(gs_ql_replace(ql, p, v, strlen(v)), 0);
            free(m.v[at]);
            m.v[at] = strdup(v);
        } else if (op < 9) {
            size_t at = (size_t)rand() % m.n;
            struct gs_ql_pos p = gs_ql_index(ql, (int64_t)at);
            struct gs_ql_pos next = gs_ql_delete(ql, p);
            model_delete(&m, at);
            if (at < m.n)
                assert_true(gs_ql_eq(next, m.v[at], strlen(m.v[at])));
            else
                assert_null(next.node);
        } else {
            size_t at = (size_t)rand() % m.n, n = (size_t)rand() % (m.n - at + 1);
            gs_ql_delete_range(ql, at, n);
            for (size_t i = 0; i < n; i++)
                model_delete(&m, at);
        }
        check(ql, &m);
    }
    struct gs_quicklist *copy = gs_ql_dup(ql);
    check(copy, &m);
    gs_ql_free(copy);
    gs_ql_free(ql);
    for (size_t i = 0; i < m.n; i++)
        free(m.v[i]);
}

static void test_random_against_model(void **state)
{
    (void)state;
    int fills[] = {-1, -2, -5, 1, 2, 16, 128};
    for (size_t i = 0; i < sizeof(fills) / sizeof(fills[0]); i++)
        run(fills[i], 100 + (unsigned)i);
}

static void test_node_limits(void **state)
{
    (void)state;
    /* fill 3: three elements per node */
    struct gs_quicklist *ql = gs_ql_new(3);
    for (int i = 0; i < 10; i++)
        assert_int_equal(gs_ql_push(ql, false, "x", 1), 0);
    assert_int_equal(ql->nodes, 4);
    gs_ql_free(ql);
    /* fill -1: 4 KB nodes; 100-byte elements need several */
    ql = gs_ql_new(-1);
    char v[100];
    memset(v, 'v', sizeof(v));
    for (int i = 0; i < 100; i++)
        assert_int_equal(gs_ql_push(ql, true, v, sizeof(v)), 0);
    /* each entry is 2 + 100 bytes and a 1-byte back-length: 39 fit in
     * 4096 - 8, as in Redis, whose listpack counts back-lengths too */
    assert_int_equal(ql->nodes, 3);
    for (struct gs_qnode *n = ql->head; n; n = n->next) {
        assert_true(gs_lp_has_backlen(n->lp));
        assert_true(gs_lp_bytes(n->lp) <= 4096);
        assert_int_equal(gs_lp_count(n->lp),
                         n == ql->head ? 100 - 2 * 39 : 39); /* pushed at the head */
    }
    /* the tail and the step back from it, across the node boundary */
    char buf[GS_LP_INTBUF];
    size_t len;
    assert_int_equal(gs_ql_push(ql, false, "last", 4), 0);
    struct gs_ql_pos p = gs_ql_index(ql, -1);
    assert_ptr_equal(p.node, ql->tail);
    assert_memory_equal(gs_ql_get(p, buf, &len), "last", 4);
    p = gs_ql_prev(ql, p);
    assert_int_equal(gs_ql_get(p, buf, &len)[0], 'v');
    assert_int_equal(len, 100);
    gs_ql_free(ql);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_limits),
        cmocka_unit_test(test_random_against_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
