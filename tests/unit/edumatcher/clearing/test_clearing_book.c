/* clearing_book: the TRADE parser, positions and exact cash, zero-sum per
 * symbol, duplicate trade ids, decimals, capacity and the JSON output. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/error.h"
#include "edumatcher/clearing/clearing_book.h"

static int apply(struct em_clearing *c, const char *line)
{
    struct em_trade t;
    int rc = em_trade_parse(line, strlen(line), &t);
    if (rc)
        return rc;
    return em_clearing_apply(c, &t);
}

static void test_parse(void **state)
{
    struct em_trade t;
    const char *ok = "TRADE tid=7 sym=AB.C px=10.50 qty=100 buy=GW1 sell=GW_2 buy_oid=3 sell_oid=1";
    assert_int_equal(em_trade_parse(ok, strlen(ok), &t), 0);
    assert_int_equal(t.tid, 7);
    assert_string_equal(t.sym, "AB.C");
    assert_int_equal(t.px, 1050);
    assert_int_equal(t.dec, 2);
    assert_int_equal(t.qty, 100);
    assert_string_equal(t.buy, "GW1");
    assert_string_equal(t.sell, "GW_2");
    assert_int_equal(t.buy_oid, 3);
    const char *bad[] = {
        "TRADE tid=1 sym=A px=1 qty=1 buy=G",              /* no sell */
        "TRADE tid=0 sym=A px=1 qty=1 buy=G sell=H",       /* tid 0 */
        "TRADE tid=1 sym=a px=1 qty=1 buy=G sell=H",       /* lower case */
        "TRADE tid=1 sym=A px=.5 qty=1 buy=G sell=H",      /* price form */
        "TRADE tid=1 sym=A px=0.00 qty=1 buy=G sell=H",    /* zero */
        "TRADE tid=1 sym=A px=1 qty=0 buy=G sell=H",       /* qty */
        "TRADE tid=1 sym=A px=1 qty=1 buy=G sell=H x=1",   /* unknown key */
        "TRADE tid=1 tid=2 sym=A px=1 qty=1 buy=G sell=H", /* duplicate */
        "TRADE tid=1 sym=A px=1 qty=1 buy=G sell",         /* no = */
        "FILL tid=1 sym=A px=1 qty=1 buy=G sell=H",
        "TRADE tid=1 sym=ABCDEFGHIJKLM px=1 qty=1 buy=G sell=H",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (em_trade_parse(bad[i], strlen(bad[i]), &t) != CORE_EPROTO)
            fail_msg("accepted: %s", bad[i]);
}

static void test_positions_and_cash(void **state)
{
    struct em_clearing *c = malloc(sizeof *c);
    em_clearing_init(c);
    assert_int_equal(apply(c, "TRADE tid=1 sym=ABC px=10.50 qty=100 buy=GW1 sell=GW2"), 0);
    assert_int_equal(apply(c, "TRADE tid=2 sym=ABC px=10.25 qty=40 buy=GW2 sell=GW1"), 0);
    assert_int_equal(apply(c, "TRADE tid=3 sym=XYZ px=5 qty=7 buy=GW3 sell=GW1"), 0);
    const struct em_clr_account *a = em_clearing_find(c, "GW1", "ABC");
    assert_non_null(a);
    assert_int_equal(a->position, 60);
    assert_int_equal(a->bought, 100);
    assert_int_equal(a->sold, 40);
    char s[64];
    em_clr_format_amount(a->cash, a->dec, s, sizeof s);
    assert_string_equal(s, "-640.00"); /* -1050.00 + 410.00 */
    const struct em_clr_account *b = em_clearing_find(c, "GW2", "ABC");
    assert_int_equal(a->position + b->position, 0); /* invariant 1 */
    assert_true(a->cash + b->cash == 0);
    em_clr_format_amount(em_clearing_find(c, "GW1", "XYZ")->cash, 0, s, sizeof s);
    assert_string_equal(s, "35");
    assert_null(em_clearing_find(c, "GW3", "ABC"));

    /* duplicates and decimals */
    assert_int_equal(apply(c, "TRADE tid=3 sym=ABC px=10.50 qty=1 buy=GW1 sell=GW2"), CORE_EEXISTS);
    assert_int_equal(apply(c, "TRADE tid=4 sym=ABC px=10.5 qty=1 buy=GW9 sell=GW8"), CORE_EINVAL);
    assert_int_equal(c->trades, 3);
    assert_int_equal(c->duplicates, 1);
    assert_int_equal(c->refused, 1);

    /* a self-trade changes nothing but the counts */
    assert_int_equal(apply(c, "TRADE tid=5 sym=ABC px=11.00 qty=5 buy=GW1 sell=GW1"), 0);
    assert_int_equal(a->position, 60);
    em_clr_format_amount(a->cash, a->dec, s, sizeof s);
    assert_string_equal(s, "-640.00");

    /* large values do not overflow: 10^9 x 10^9 */
    assert_int_equal(apply(c, "TRADE tid=6 sym=BIG px=1000000000 qty=1000000000 buy=A sell=B"), 0);
    em_clr_format_amount(em_clearing_find(c, "B", "BIG")->cash, 0, s, sizeof s);
    assert_string_equal(s, "1000000000000000000");
    em_clr_format_amount(-5, 2, s, sizeof s);
    assert_string_equal(s, "-0.05");

    struct core_http_response res = {0};
    em_clearing_json(c, "GW1", NULL, &res);
    core_http_write(&res, "", 1);
    assert_non_null(strstr(res.body.data, "{\"gw\":\"GW1\",\"sym\":\"ABC\",\"position\":60,"
                                          "\"bought\":105,\"sold\":45,\"cash\":\"-640.00\""));
    assert_null(strstr(res.body.data, "GW2"));
    const char *abc = strstr(res.body.data, "\"ABC\""), *xyz = strstr(res.body.data, "\"XYZ\"");
    assert_true(abc && xyz && abc < xyz);
    core_buf_free(&res.body);
    free(c);
}

static void test_capacity(void **state)
{
    struct em_clearing *c = malloc(sizeof *c);
    em_clearing_init(c);
    char line[128];
    int rc = 0;
    unsigned tid = 0;
    while (rc == 0) {
        tid++;
        snprintf(line, sizeof line, "TRADE tid=%u sym=S px=1 qty=1 buy=B%u sell=S%u", tid, tid,
                 tid);
        rc = apply(c, line);
    }
    assert_int_equal(rc, CORE_ETOOBIG);
    assert_true(c->naccounts <= EM_CLR_ACCOUNTS * 3 / 4);
    /* existing accounts still trade */
    snprintf(line, sizeof line, "TRADE tid=%u sym=S px=1 qty=1 buy=B1 sell=S1", tid + 1);
    assert_int_equal(apply(c, line), 0);
    /* position sum over all accounts stays zero */
    int64_t sum = 0;
    for (unsigned i = 0; i < EM_CLR_ACCOUNTS; i++)
        if (c->acct[i].used)
            sum += c->acct[i].position;
    assert_int_equal(sum, 0);
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_positions_and_cash),
        cmocka_unit_test(test_capacity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
