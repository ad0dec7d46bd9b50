/* market: books replaced only by newer ones, the tape newest first and
 * deduplicated, chart buckets, refusals of malformed lines, the JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/error.h"
#include "edumatcher/monitor/market.h"

static struct em_mkt *m;

static int setup(void **state)
{
    m = malloc(sizeof *m);
    em_mkt_init(m, 1000);
    return m ? 0 : -1;
}

static int teardown(void **state)
{
    free(m);
    return 0;
}

static int book(const char *line, uint64_t now)
{
    return em_mkt_book(m, line, strlen(line), now);
}

static int trade(const char *line, uint64_t now)
{
    return em_mkt_trade(m, line, strlen(line), now);
}

static void test_books(void **state)
{
    assert_int_equal(book("MD sym=ABC seq=2 epoch=7 phase=CONTINUOUS last=101.00 lastqty=2 "
                          "volume=2 trades=1 bids=99.00:4:1 asks=101.00:3:1,102.00:3:1",
                          10),
                     0);
    assert_int_equal(m->n, 1);
    assert_string_equal(m->s[0].asks, "101.00:3:1,102.00:3:1");
    /* older in the same epoch: ignored; a new epoch: taken */
    assert_int_equal(book("MD sym=ABC seq=1 epoch=7 phase=HALTED last=- lastqty=0 volume=0 "
                          "trades=0 bids= asks=",
                          11),
                     CORE_EEXISTS);
    assert_string_equal(m->s[0].phase, "CONTINUOUS");
    assert_int_equal(book("MD sym=ABC seq=1 epoch=8 phase=HALTED last=- lastqty=0 volume=0 "
                          "trades=0 bids= asks=",
                          12),
                     0);
    assert_string_equal(m->s[0].phase, "HALTED");
    assert_string_equal(m->s[0].bids, "");
    assert_string_equal(m->s[0].tick, "-"); /* a line without the rules */
    /* the rules, when the line has them; a bad one refuses the line */
    assert_int_equal(book("MD sym=ABC seq=2 epoch=8 phase=HALTED last=- lastqty=0 volume=0 "
                          "trades=0 tick=0.01 lot=10 decimals=2 band=20.00 cb_band=- bids= asks=",
                          13),
                     0);
    assert_string_equal(m->s[0].tick, "0.01");
    assert_string_equal(m->s[0].lot, "10");
    assert_string_equal(m->s[0].band, "20.00");
    assert_string_equal(m->s[0].cb_band, "-");
    assert_ptr_equal(em_mkt_find(m, "ABC"), &m->s[0]);
    assert_null(em_mkt_find(m, "XYZ"));
    assert_int_equal(book("MD sym=ABC seq=3 epoch=8 phase=HALTED last=- lastqty=0 volume=0 "
                          "trades=0 tick=\"x lot=10 bids= asks=",
                          14),
                     CORE_EPROTO);
    assert_string_equal(m->s[0].lot, "10");
    const char *bad[] = {
        "MD sym=ABC",
        "XX sym=ABC seq=1 epoch=1 phase=P last=- lastqty=0 volume=0 trades=0 bids= asks=",
        "MD sym=A\"C seq=3 epoch=8 phase=P last=- lastqty=0 volume=0 trades=0 bids= asks=",
        "MD sym=ABC seq=3 epoch=8 phase=P last=- lastqty=0 volume=0 trades=0 bids=1:2 asks=",
        "MD sym=ABC seq=3 epoch=8 phase=P last=- lastqty=0 volume=0 trades=0 bids=1:2:3, asks=",
        "MD sym=ABC seq=x epoch=8 phase=P last=- lastqty=0 volume=0 trades=0 bids= asks=",
        "MD sym=ABC seq=3 epoch=8 phase=<b> last=- lastqty=0 volume=0 trades=0 bids= asks=",
        "MD sym=ABC  seq=3",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (book(bad[i], 13) != CORE_EPROTO)
            fail_msg("accepted: %s", bad[i]);
    assert_string_equal(m->s[0].phase, "HALTED");
}

static void test_tape_and_chart(void **state)
{
    assert_int_equal(trade("TRADE tid=1 sym=ABC px=101.00 qty=2 buy=A sell=B", 1500), 0);
    assert_int_equal(trade("TRADE tid=1 sym=ABC px=101.00 qty=2 buy=A sell=B", 1600), CORE_EEXISTS);
    assert_int_equal(trade("TRADE tid=2 sym=ABC px=99.50 qty=3 buy=A sell=B buy_oid=1", 1700), 0);
    assert_int_equal(trade("TRADE tid=3 sym=ABC px=102.50 qty=1 buy=B sell=A", 2100), 0);
    assert_int_equal(trade("TRADE tid=4 sym=ABC px=inf qty=1 buy=B sell=A", 2100), CORE_EPROTO);
    assert_int_equal(trade("TRADE tid=4 sym=ABC qty=1 buy=B sell=A", 2100), CORE_EPROTO);
    const struct em_mkt_sym *s = &m->s[0];
    assert_int_equal(s->tape_n, 3);
    assert_int_equal(s->pt_n, 2); /* buckets 1000 and 2000 */
    assert_true(s->pts[0].low == 99.5 && s->pts[0].high == 101.0 && s->pts[0].last == 99.5);
    assert_int_equal(s->pts[0].volume, 5);
    assert_int_equal(s->pts[1].t_ms, 2000);

    book("MD sym=ABC seq=1 epoch=1 phase=CONTINUOUS last=102.50 lastqty=1 volume=6 trades=3 "
         "bids=99.00:4:1 asks=",
         2200);
    struct core_buf out = {0};
    em_mkt_json(m, &out);
    core_buf_append(&out, "", 1);
    assert_non_null(strstr(out.data, "\"sym\":\"ABC\",\"phase\":\"CONTINUOUS\",\"seq\":1,"
                                     "\"last\":\"102.50\""));
    assert_non_null(strstr(out.data, "\"bids\":[[\"99.00\",4,1]],\"asks\":[]"));
    /* newest first */
    assert_non_null(strstr(out.data, "\"tape\":[{\"tid\":3,\"at_ms\":2100,\"px\":\"102.50\""));
    assert_non_null(
        strstr(out.data, "\"chart\":[[1000,99.5,99.5,101,5],[2000,102.5,102.5,102.5,1]]"));
    core_buf_free(&out);
}

static void test_bounds(void **state)
{
    char line[128];
    for (int i = 0; i < EM_MKT_SYMS + 3; i++) {
        snprintf(line, sizeof line, "TRADE tid=1 sym=S%d px=1 qty=1 buy=A sell=B", i);
        int rc = trade(line, 0);
        assert_int_equal(rc, i < EM_MKT_SYMS ? 0 : CORE_ETOOBIG);
    }
    for (int i = 2; i < 3 * EM_MKT_TAPE; i++) {
        snprintf(line, sizeof line, "TRADE tid=%d sym=S0 px=1 qty=1 buy=A sell=B", i);
        assert_int_equal(trade(line, (uint64_t)i * 1000), 0);
    }
    assert_int_equal(m->s[0].tape_n, EM_MKT_TAPE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_books, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tape_and_chart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounds, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
