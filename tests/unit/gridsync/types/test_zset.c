/*
 * The sorted set type in both encodings: the listpack -> skiplist
 * conversion at zset-max-listpack-entries (128 stays, 129 converts) and
 * zset-max-listpack-value (64 stays, 65 converts), none back on removal,
 * the way back by gs_zset_fit; a seeded random run against a model (a
 * sorted array) checking order, ranks, range counts and memory against a
 * recount after every operation; the snapshot form round trip and its
 * validation; score parsing; SCAN covering every member.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "core/error.h"
#include "gridsync/types/value.h"
#include "gridsync/types/zset/zset.h"

static const struct gs_type_limits LIM = GS_TYPE_LIMITS_DEFAULT;

static void add(struct gs_obj *o, double s, const char *m, const struct gs_type_limits *lim)
{
    int out;
    assert_int_equal(gs_zset_add(o, s, m, strlen(m), 0, &out, NULL, lim), 0);
}

static void test_entries_threshold(void **state)
{
    (void)state;
    struct gs_obj o;
    char m[32];
    assert_int_equal(gs_zset_init(&o, false), 0);
    for (int i = 0; i < 128; i++) {
        snprintf(m, sizeof(m), "m%d", i);
        add(&o, i % 5, m, &LIM);
    }
    assert_int_equal(o.enc, GS_ENC_LISTPACK); /* exactly at the limit */
    add(&o, 1, "m0", &LIM);                   /* an update adds nothing */
    assert_int_equal(o.enc, GS_ENC_LISTPACK);
    add(&o, 1, "one-more", &LIM);
    assert_int_equal(o.enc, GS_ENC_SKIPLIST);
    assert_int_equal(gs_zset_len(&o), 129);
    assert_int_equal(gs_zset_mem(&o), gs_zset_recount(&o));
    gs_zset_delete_range(&o, 0, 127);
    assert_int_equal(gs_zset_len(&o), 2);
    assert_int_equal(o.enc, GS_ENC_SKIPLIST); /* never back by removals */
    assert_int_equal(gs_zset_mem(&o), gs_zset_recount(&o));
    gs_zset_fit(&o, &LIM);
    assert_int_equal(o.enc, GS_ENC_LISTPACK);
    assert_int_equal(gs_zset_len(&o), 2);
    gs_zset_free(&o);
}

static void test_value_threshold(void **state)
{
    (void)state;
    struct gs_obj o;
    char m[80];
    assert_int_equal(gs_zset_init(&o, false), 0);
    memset(m, 'x', 64);
    m[64] = '\0';
    add(&o, 1, m, &LIM);
    assert_int_equal(o.enc, GS_ENC_LISTPACK);
    memset(m, 'y', 65);
    m[65] = '\0';
    add(&o, 2, m, &LIM);
    assert_int_equal(o.enc, GS_ENC_SKIPLIST);
    assert_true(gs_zset_remove(&o, m, 65));
    gs_zset_fit(&o, &LIM); /* fits again: back, as ZUNIONSTORE would */
    assert_int_equal(o.enc, GS_ENC_LISTPACK);
    add(&o, 2, m, &LIM);
    struct gs_type_limits small = LIM;
    small.zset_max_listpack_value = 100;
    small.zset_max_listpack_entries = 1;
    gs_zset_fit(&o, &small); /* 2 members > 1: stays */
    assert_int_equal(o.enc, GS_ENC_SKIPLIST);
    gs_zset_free(&o);
}

/* The model: members by index, present or not, with scores. */
#define NM 120
struct model {
    bool in[NM];
    double score[NM];
};

static int member_of(int i, char *buf)
{
    /* members 0..39 are integers (listpack integer entries) */
    return i < 40 ? snprintf(buf, 16, "%d", i - 20) : snprintf(buf, 16, "m%03d", i);
}

struct elem {
    double s;
    char m[16];
    size_t len;
};

static int cmp_elem(const void *pa, const void *pb)
{
    const struct elem *a = pa, *b = pb;
    if (a->s != b->s)
        return a->s < b->s ? -1 : 1;
    size_t l = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->m, b->m, l);
    if (c)
        return c;
    return a->len < b->len ? -1 : a->len > b->len;
}

static size_t model_sorted(const struct model *md, struct elem *out)
{
    size_t n = 0;
    for (int i = 0; i < NM; i++) {
        if (!md->in[i])
            continue;
        out[n].s = md->score[i];
        out[n].len = (size_t)member_of(i, out[n].m);
        n++;
    }
    qsort(out, n, sizeof(*out), cmp_elem);
    return n;
}

static void check_against(const struct gs_obj *o, const struct model *md)
{
    struct elem el[NM];
    size_t n = model_sorted(md, el);
    assert_int_equal(gs_zset_len(o), n);
    assert_int_equal(gs_zset_mem(o), gs_zset_recount(o));
    struct gs_zset_iter it;
    const char *m;
    size_t mlen;
    double s;
    gs_zset_iter_init(&it, o, 0, false);
    for (size_t i = 0; i < n; i++) {
        assert_true(gs_zset_iter_next(&it, &m, &mlen, &s));
        assert_int_equal(mlen, el[i].len);
        assert_memory_equal(m, el[i].m, mlen);
        assert_true(s == el[i].s);
        size_t r;
        assert_true(gs_zset_rank(o, el[i].m, el[i].len, &r));
        assert_int_equal(r, i);
    }
    assert_false(gs_zset_iter_next(&it, &m, &mlen, &s));
    if (n) {
        gs_zset_iter_init(&it, o, n - 1, true);
        for (size_t i = n; i-- > 0;) {
            assert_true(gs_zset_iter_next(&it, &m, &mlen, &s));
            assert_memory_equal(m, el[i].m, mlen);
        }
        assert_false(gs_zset_iter_next(&it, &m, &mlen, &s));
        /* counts below a score match a linear count */
        double x = el[rand() % n].s;
        size_t below = 0, below_eq = 0;
        for (size_t i = 0; i < n; i++) {
            below += el[i].s < x;
            below_eq += el[i].s <= x;
        }
        assert_int_equal(gs_zset_count_below(o, x, false), below);
        assert_int_equal(gs_zset_count_below(o, x, true), below_eq);
    }
}

static const double SCORES[] = {0, 1, -1, 2.5, 1e300, -INFINITY, INFINITY, 0.1, 7, 7, 7};

static void test_random_against_model(void **state)
{
    (void)state;
    srand(4242);
    struct gs_type_limits lim = LIM;
    lim.zset_max_listpack_entries = 40; /* both encodings in one run */
    for (int round = 0; round < 8; round++) {
        struct model md = {0};
        struct gs_obj o;
        assert_int_equal(gs_zset_init(&o, round == 7), 0);
        for (int step = 0; step < 500; step++) {
            int i = rand() % (round < 4 ? 50 : NM);
            char m[16];
            size_t len = (size_t)member_of(i, m);
            int op = rand() % 10;
            if (op < 5) {
                double s = SCORES[rand() % (sizeof(SCORES) / sizeof(SCORES[0]))];
                int flags = rand() % 4 == 0 ? GS_ZADD_INCR : 0, out;
                double ns;
                double want = flags && md.in[i] ? md.score[i] + s : s;
                int rc = gs_zset_add(&o, s, m, len, flags, &out, &ns, &lim);
                if (isnan(want)) {
                    assert_int_equal(rc, CORE_EINVAL);
                    continue;
                }
                assert_int_equal(rc, 0);
                assert_int_equal((out & GS_ZADD_ADDED) != 0, !md.in[i]);
                md.in[i] = true;
                md.score[i] = want == 0 ? 0 : want; /* -0 reads back as 0 */
                double got;
                assert_true(gs_zset_score(&o, m, len, &got));
                assert_true(got == want);
            } else if (op < 8) {
                assert_int_equal(gs_zset_remove(&o, m, len), md.in[i]);
                md.in[i] = false;
            } else if (gs_zset_len(&o) > 0) {
                /* delete a rank range through the model's order */
                struct elem el[NM];
                size_t n = model_sorted(&md, el);
                size_t start = (size_t)rand() % n, cnt = 1 + (size_t)rand() % 3;
                if (start + cnt > n)
                    cnt = n - start;
                gs_zset_delete_range(&o, start, cnt);
                for (size_t k = start; k < start + cnt; k++) {
                    for (int j = 0; j < NM; j++) {
                        char mm[16];
                        size_t ml = (size_t)member_of(j, mm);
                        if (md.in[j] && ml == el[k].len && memcmp(mm, el[k].m, ml) == 0)
                            md.in[j] = false;
                    }
                }
            }
            check_against(&o, &md);
        }
        /* the snapshot form round-trips, in either encoding */
        unsigned char *buf;
        size_t blen;
        assert_int_equal(gs_obj_encode(&o, &buf, &blen), 0);
        if (gs_zset_len(&o) > 0) {
            struct gs_obj back;
            assert_true(gs_obj_validate(GS_TYPE_ZSET, buf, blen));
            assert_int_equal(gs_obj_decode(GS_TYPE_ZSET, buf, blen, &lim, &back), 0);
            assert_int_equal(back.enc, gs_zset_len(&o) > 40 ? GS_ENC_SKIPLIST : GS_ENC_LISTPACK);
            check_against(&back, &md);
            struct gs_obj copy;
            assert_int_equal(gs_obj_dup(&copy, &back), 0);
            assert_int_equal(copy.enc, back.enc);
            check_against(&copy, &md);
            gs_obj_free(&copy);
            gs_obj_free(&back);
        }
        free(buf);
        gs_zset_free(&o);
    }
}

static void test_validate_rejects(void **state)
{
    (void)state;
    struct gs_obj o;
    assert_int_equal(gs_zset_init(&o, false), 0);
    add(&o, 1.5, "a", &LIM);
    add(&o, 2, "b", &LIM);
    unsigned char *buf;
    size_t blen;
    assert_int_equal(gs_obj_encode(&o, &buf, &blen), 0);
    assert_true(gs_zset_validate(buf, blen));
    assert_false(gs_zset_validate(buf, blen - 1));
    /* an odd count: a member without its score */
    unsigned char *lp = gs_lp_new();
    assert_int_equal(gs_lp_append(&lp, "a", 1), 0);
    assert_false(gs_zset_validate(lp, gs_lp_bytes(lp)));
    /* a score that is neither an integer nor a tagged double */
    assert_int_equal(gs_lp_append(&lp, "x", 1), 0);
    assert_false(gs_zset_validate(lp, gs_lp_bytes(lp)));
    gs_lp_free(lp);
    /* a tagged NaN */
    lp = gs_lp_new();
    char nanb[9] = {GS_ZSET_SCORE_TAG};
    double nan = NAN;
    memcpy(nanb + 1, &nan, sizeof(nan));
    assert_int_equal(gs_lp_append(&lp, "a", 1), 0);
    assert_int_equal(gs_lp_append(&lp, nanb, 9), 0);
    assert_false(gs_zset_validate(lp, gs_lp_bytes(lp)));
    gs_lp_free(lp);
    /* an empty listpack is no sorted set */
    lp = gs_lp_new();
    assert_false(gs_zset_validate(lp, gs_lp_bytes(lp)));
    gs_lp_free(lp);
    free(buf);
    gs_zset_free(&o);
}

static void test_parse_score(void **state)
{
    (void)state;
    double d;
    assert_true(gs_zset_parse_score("1.5", 3, &d) && d == 1.5);
    assert_true(gs_zset_parse_score("-inf", 4, &d) && isinf(d) && d < 0);
    assert_true(gs_zset_parse_score("+Infinity", 9, &d) && isinf(d));
    assert_true(gs_zset_parse_score("0x10", 4, &d) && d == 16);
    assert_true(gs_zset_parse_score("4.9e-324", 8, &d) && d > 0); /* denormal: kept */
    assert_false(gs_zset_parse_score("nan", 3, &d));
    assert_false(gs_zset_parse_score("", 0, &d));
    assert_false(gs_zset_parse_score(" 1", 2, &d));
    assert_false(gs_zset_parse_score("1 ", 2, &d));
    assert_false(gs_zset_parse_score("1\0x", 3, &d)); /* a NUL inside */
    assert_false(gs_zset_parse_score("1e400", 5, &d));
    assert_false(gs_zset_parse_score("1e-400", 6, &d)); /* underflow to zero */
}

struct seen {
    unsigned char hit[2000];
};

static void mark(void *arg, const char *m, size_t mlen, double score)
{
    (void)score;
    struct seen *s = arg;
    char b[16];
    assert_true(mlen < sizeof(b));
    memcpy(b, m, mlen);
    b[mlen] = '\0';
    s->hit[atoi(b + 1)] = 1;
}

static void test_scan_covers_every_member(void **state)
{
    (void)state;
    struct gs_obj o;
    char m[16];
    assert_int_equal(gs_zset_init(&o, false), 0);
    for (int i = 0; i < 2000; i++) {
        snprintf(m, sizeof(m), "m%d", i);
        add(&o, i % 13, m, &LIM);
    }
    struct seen s = {{0}};
    uint64_t cursor = 0;
    do
        cursor = gs_zset_scan(&o, cursor, 10, mark, &s);
    while (cursor);
    for (int i = 0; i < 2000; i++)
        assert_int_equal(s.hit[i], 1);
    gs_zset_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entries_threshold),
        cmocka_unit_test(test_value_threshold),
        cmocka_unit_test(test_random_against_model),
        cmocka_unit_test(test_validate_rejects),
        cmocka_unit_test(test_parse_score),
        cmocka_unit_test(test_scan_covers_every_member),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
