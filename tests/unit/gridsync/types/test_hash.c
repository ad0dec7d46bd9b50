/*
 * The hash type: the listpack -> hashtable conversion at each threshold
 * (entries and value length, field length; exactly at the limit stays a
 * listpack, one past converts; deleting back below does not convert back,
 * as Redis 7.0), and a seeded random run against a simple model checking
 * contents, iteration, and memory against a recount after every step.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gridsync/types/hash/hash.h"

static const struct gs_type_limits LIM = GS_TYPE_LIMITS_DEFAULT;

static void set(struct gs_obj *o, const char *f, const char *v, const struct gs_type_limits *lim)
{
    assert_int_equal(gs_hash_set(o, f, strlen(f), v, strlen(v), lim, NULL), 0);
    assert_int_equal(gs_hash_mem(o), gs_hash_recount(o));
}

static void test_entries_threshold(void **state)
{
    (void)state;
    struct gs_obj o;
    assert_int_equal(gs_hash_init(&o), 0);
    char f[32];
    int max = (int)LIM.hash_max_listpack_entries;
    assert_int_equal(max, 512); /* Redis 7.0's default */
    for (int i = 0; i < max; i++) {
        snprintf(f, sizeof(f), "f%d", i);
        set(&o, f, "v", &LIM);
    }
    assert_int_equal(gs_hash_len(&o), max);
    assert_int_equal(o.enc, GS_ENC_LISTPACK); /* exactly at the limit */
    set(&o, "f0", "overwrite", &LIM);         /* an overwrite adds nothing */
    assert_int_equal(o.enc, GS_ENC_LISTPACK);
    snprintf(f, sizeof(f), "f%d", max);
    set(&o, f, "v", &LIM);
    assert_int_equal(o.enc, GS_ENC_HASHTABLE);
    assert_int_equal(gs_hash_len(&o), max + 1);
    for (int i = 0; i < max - 8; i++) {
        snprintf(f, sizeof(f), "f%d", i);
        assert_true(gs_hash_delete(&o, f, strlen(f)));
    }
    assert_int_equal(o.enc, GS_ENC_HASHTABLE); /* no conversion back */
    char buf[GS_LP_INTBUF];
    const char *v;
    size_t vlen;
    snprintf(f, sizeof(f), "f%d", max);
    assert_true(gs_hash_get(&o, f, strlen(f), buf, &v, &vlen));
    assert_false(gs_hash_get(&o, "f0", 2, buf, &v, &vlen));
    gs_hash_free(&o);
}

static void test_value_and_field_threshold(void **state)
{
    (void)state;
    char v64[65], v65[66];
    memset(v64, 'x', 64);
    v64[64] = 0;
    memset(v65, 'x', 65);
    v65[65] = 0;
    struct gs_obj o;
    assert_int_equal(gs_hash_init(&o), 0);
    set(&o, "a", v64, &LIM);
    set(&o, v64, "b", &LIM);
    assert_int_equal(o.enc, GS_ENC_LISTPACK);
    set(&o, "c", v65, &LIM); /* value one past */
    assert_int_equal(o.enc, GS_ENC_HASHTABLE);
    gs_hash_free(&o);

    assert_int_equal(gs_hash_init(&o), 0);
    set(&o, v65, "1", &LIM); /* field one past */
    assert_int_equal(o.enc, GS_ENC_HASHTABLE);
    gs_hash_free(&o);

    /* limits are the caller's: 0 entries means never a listpack hash */
    struct gs_type_limits zero = {0, 64, -2, 512, 128, 64, 3000};
    assert_int_equal(gs_hash_init(&o), 0);
    set(&o, "a", "1", &zero);
    assert_int_equal(o.enc, GS_ENC_HASHTABLE);
    gs_hash_free(&o);
}

/* The model: up to MAXF fields f<i> with a value each (NULL: absent). */
#define MAXF 300
struct model {
    char *val[MAXF];
    size_t n;
};

static void check_against(const struct gs_obj *o, const struct model *m)
{
    assert_int_equal(gs_hash_len(o), m->n);
    assert_int_equal(gs_hash_mem(o), gs_hash_recount(o));
    char f[16], buf[GS_LP_INTBUF];
    for (int i = 0; i < MAXF; i++) {
        snprintf(f, sizeof(f), "f%d", i);
        const char *v;
        size_t vlen;
        bool got = gs_hash_get(o, f, strlen(f), buf, &v, &vlen);
        assert_int_equal(got, m->val[i] != NULL);
        if (got) {
            assert_int_equal(vlen, strlen(m->val[i]));
            assert_memory_equal(v, m->val[i], vlen);
        }
    }
    /* iteration visits each field once */
    unsigned char seen[MAXF] = {0};
    struct gs_hash_iter it;
    const char *fp, *vp;
    size_t fl, vl, count = 0;
    gs_hash_iter_init(&it, o);
    while (gs_hash_iter_next(&it, &fp, &fl, &vp, &vl)) {
        char num[16];
        assert_true(fl > 1 && fl < sizeof(num));
        memcpy(num, fp + 1, fl - 1); /* fields are not NUL-terminated */
        num[fl - 1] = 0;
        int i = atoi(num);
        assert_true(i >= 0 && i < MAXF);
        assert_false(seen[i]);
        seen[i] = 1;
        count++;
    }
    assert_int_equal(count, m->n);
}

static void test_random_against_model(void **state)
{
    (void)state;
    srand(12345);
    struct gs_type_limits lim = {64,  16, -2,  512,
                                 128, 64, 3000}; /* small, so both encodings are hit */
    for (int round = 0; round < 20; round++) {
        struct gs_obj o;
        struct model m = {{0}, 0};
        assert_int_equal(gs_hash_init(&o), 0);
        for (int step = 0; step < 400; step++) {
            int i = rand() % (round < 10 ? 70 : MAXF);
            char f[16], v[40];
            snprintf(f, sizeof(f), "f%d", i);
            if (rand() % 3) {
                int kind = rand() % 3;
                if (kind == 0)
                    snprintf(v, sizeof(v), "%d", rand() - RAND_MAX / 2);
                else
                    snprintf(v, sizeof(v), "%.*s", 1 + rand() % 30,
                             "abcdefghijklmnopqrstuvwxyz0123456789");
                if (kind == 2)
                    v[0] = 0; /* empty value */
                bool created;
                assert_int_equal(gs_hash_set(&o, f, strlen(f), v, strlen(v), &lim, &created), 0);
                assert_int_equal(created, m.val[i] == NULL);
                if (!m.val[i])
                    m.n++;
                free(m.val[i]);
                m.val[i] = strdup(v);
            } else {
                bool had = gs_hash_delete(&o, f, strlen(f));
                assert_int_equal(had, m.val[i] != NULL);
                if (had) {
                    free(m.val[i]);
                    m.val[i] = NULL;
                    m.n--;
                }
            }
            check_against(&o, &m);
        }
        struct gs_obj copy;
        assert_int_equal(gs_hash_dup(&copy, &o), 0);
        check_against(&copy, &m);
        gs_hash_free(&copy);
        gs_hash_free(&o);
        for (int i = 0; i < MAXF; i++)
            free(m.val[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entries_threshold),
        cmocka_unit_test(test_value_and_field_threshold),
        cmocka_unit_test(test_random_against_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
