/* trade_log: append, flush and read back by id; replayed trades ignored;
 * gaps refused; torn and zero-filled tails truncated on reopen; a damaged
 * middle refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/error.h"
#include "edumatcher/bus/trade_log.h"

static struct em_trade_log l;
static char dir[64];
static char path[128];

static int setup(void **state)
{
    strcpy(dir, "/tmp/test_trade_log.XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(path, sizeof path, "%s/trades.log", dir);
    return 0;
}

static int teardown(void **state)
{
    em_trade_log_close(&l);
    unlink(path);
    rmdir(dir);
    return 0;
}

static int append(uint64_t tid)
{
    char line[128];
    int n = snprintf(line, sizeof line, "TRADE tid=%llu sym=ABC px=10.5 qty=%llu buy=A sell=B",
                     (unsigned long long)tid, (unsigned long long)tid * 10);
    return em_trade_log_append(&l, tid, line, (size_t)n);
}

static void test_round_trip(void **state)
{
    assert_int_equal(em_trade_log_open(&l, dir, false), 0);
    assert_int_equal(em_trade_log_next(&l), 1);
    for (uint64_t t = 1; t <= 100; t++) {
        if (em_trade_log_full(&l)) {
            /* never written early: the caller flushes (journal first) */
            assert_int_equal(append(t), CORE_EAGAIN);
            assert_int_equal(l.count, 0);
            assert_int_equal(em_trade_log_flush(&l), 0);
        }
        assert_int_equal(append(t), 0);
    }
    assert_int_equal(l.count, EM_TRADE_LOG_BUF);
    assert_int_equal(append(50), 0); /* regenerated on replay: ignored */
    assert_int_equal(l.ignored, 1);
    assert_int_equal(append(102), CORE_ESTATE);
    char out[4096];
    unsigned n;
    /* Only flushed trades are readable. */
    long len = em_trade_log_read(&l, 90, 5, out, sizeof out, &n);
    assert_int_equal(len, 0);
    assert_int_equal(em_trade_log_flush(&l), 0);
    len = em_trade_log_read(&l, 99, 5, out, sizeof out, &n);
    assert_int_equal(n, 2);
    out[len] = '\0';
    assert_string_equal(out, "TRADE tid=99 sym=ABC px=10.5 qty=990 buy=A sell=B\n"
                             "TRADE tid=100 sym=ABC px=10.5 qty=1000 buy=A sell=B\n");
    /* cap limits whole lines; max limits the count */
    len = em_trade_log_read(&l, 1, 1000, out, 60, &n);
    assert_int_equal(n, 1);
    len = em_trade_log_read(&l, 1, 3, out, sizeof out, &n);
    assert_int_equal(n, 3);
    assert_int_equal(em_trade_log_read(&l, 101, 3, out, sizeof out, &n), 0);

    em_trade_log_close(&l);
    assert_int_equal(em_trade_log_open(&l, dir, true), 0);
    assert_int_equal(l.count, 100);
    assert_int_equal(em_trade_log_next(&l), 101);
    assert_int_equal(append(101), 0);
    assert_int_equal(em_trade_log_flush(&l), 0);
    assert_int_equal(l.count, 101);
}

static void write_tail(const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, p, n), (ssize_t)n);
    close(fd);
}

static void test_torn_tails(void **state)
{
    assert_int_equal(em_trade_log_open(&l, dir, false), 0);
    for (uint64_t t = 1; t <= 10; t++)
        append(t);
    em_trade_log_flush(&l);
    em_trade_log_close(&l);
    /* half a record */
    write_tail("TRADE tid=11 sym=A", 18);
    assert_int_equal(em_trade_log_open(&l, dir, false), 0);
    assert_int_equal(l.count, 10);
    em_trade_log_close(&l);
    /* zeros the filesystem allocated: three whole records of them */
    static char zeros[3 * EM_TRADE_LOG_REC];
    write_tail(zeros, sizeof zeros);
    assert_int_equal(em_trade_log_open(&l, dir, false), 0);
    assert_int_equal(l.count, 10);
    assert_int_equal(append(11), 0);
    assert_int_equal(em_trade_log_flush(&l), 0);
    char out[512];
    unsigned n;
    long len = em_trade_log_read(&l, 11, 1, out, sizeof out, &n);
    assert_int_equal(n, 1);
    assert_true(len > 0 && memcmp(out, "TRADE tid=11 ", 13) == 0);
}

static void test_damaged_middle_refused(void **state)
{
    assert_int_equal(em_trade_log_open(&l, dir, false), 0);
    for (uint64_t t = 1; t <= 10; t++)
        append(t);
    em_trade_log_flush(&l);
    em_trade_log_close(&l);
    /* more bad records than a crash can leave */
    static char junk[(EM_TRADE_LOG_BUF + 2) * EM_TRADE_LOG_REC];
    memset(junk, 'x', sizeof junk);
    write_tail(junk, sizeof junk);
    assert_int_equal(em_trade_log_open(&l, dir, false), CORE_EPROTO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_tails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_middle_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
