/* journal: round trip, torn tails, CRC corruption, snapshots, fsync
 * policies, and refusing corruption that is not at the tail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/error.h"
#include "edumatcher/bus/journal.h"

#include "alloc_count.h"

struct seen {
    uint64_t snap_seq;
    char snap[64];
    unsigned n;
    uint64_t seqs[256];
    char payload[256][32];
    int fail_at; /* return an error for this seq */
};

static int on_snap(const void *d, size_t len, uint64_t seq, void *ud)
{
    struct seen *s = ud;
    s->snap_seq = seq;
    memcpy(s->snap, d, len < 63 ? len : 63);
    return 0;
}

static int on_rec(const void *d, size_t len, uint64_t seq, void *ud)
{
    struct seen *s = ud;
    if ((int)seq == s->fail_at)
        return CORE_EINVAL;
    s->seqs[s->n] = seq;
    memcpy(s->payload[s->n], d, len < 31 ? len : 31);
    s->n++;
    return 0;
}

static char dir[256];

static int setup(void **state)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/em-journal-XXXXXX", tmp ? tmp : "/tmp");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[600];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
    return 0;
}

static void write_n(struct em_journal_opts *o, unsigned from, unsigned to)
{
    struct em_journal j;
    assert_int_equal(em_journal_open(&j, o, NULL, NULL, NULL, NULL), 0);
    for (unsigned i = from; i <= to; i++) {
        char p[32];
        int n = snprintf(p, sizeof p, "order-%u", i);
        uint64_t seq;
        assert_int_equal(em_journal_append(&j, p, (size_t)n, &seq), 0);
        assert_int_equal(seq, i);
    }
    assert_int_equal(em_journal_flush(&j), 0);
    em_journal_close(&j);
}

static void seg_path(char *out, size_t len, uint64_t first)
{
    snprintf(out, len, "%s/journal-%020llu.log", dir, (unsigned long long)first);
}

static off_t file_size(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? st.st_size : -1;
}

static int reopen(struct em_journal_opts *o, struct seen *s, struct em_journal_replay_stats *st)
{
    struct em_journal j;
    memset(s, 0, sizeof *s);
    s->fail_at = -1;
    int rc = em_journal_open(&j, o, on_snap, on_rec, s, st);
    if (rc == 0)
        em_journal_close(&j);
    return rc;
}

static void test_round_trip(void **state)
{
    struct em_journal_opts o = {.dir = dir, .fsync = EM_FSYNC_BATCH};
    write_n(&o, 1, 50);
    write_n(&o, 51, 60); /* continues the same segment */
    struct seen s;
    struct em_journal_replay_stats st;
    assert_int_equal(reopen(&o, &s, &st), 0);
    assert_int_equal(s.n, 60);
    assert_int_equal(st.records, 60);
    assert_int_equal(st.torn_bytes, 0);
    assert_int_equal(st.snapshot_seq, 0);
    for (unsigned i = 0; i < 60; i++) {
        char p[32];
        snprintf(p, sizeof p, "order-%u", i + 1);
        assert_int_equal(s.seqs[i], i + 1);
        assert_string_equal(s.payload[i], p);
    }
}

static void test_torn_tail_is_truncated(void **state)
{
    struct em_journal_opts o = {.dir = dir, .fsync = EM_FSYNC_BATCH};
    write_n(&o, 1, 10);
    char p[300];
    seg_path(p, sizeof p, 1);
    off_t full = file_size(p);
    /* Cut the last record in half, as a crash in the middle of write(). */
    assert_int_equal(truncate(p, full - 5), 0);
    struct seen s;
    struct em_journal_replay_stats st;
    assert_int_equal(reopen(&o, &s, &st), 0);
    assert_int_equal(s.n, 9);
    assert_true(st.torn_bytes > 0);
    off_t cut = file_size(p);
    assert_true(cut < full - 5);
    /* The next append takes seq 10 again and is read back. */
    write_n(&o, 10, 11);
    assert_int_equal(reopen(&o, &s, &st), 0);
    assert_int_equal(s.n, 11);
    assert_int_equal(st.torn_bytes, 0);
    assert_string_equal(s.payload[9], "order-10");
}

static void test_torn_header_of_record(void **state)
{
    struct em_journal_opts o = {.dir = dir, .fsync = EM_FSYNC_NEVER};
    write_n(&o, 1, 3);
    char p[300];
    seg_path(p, sizeof p, 1);
    int fd = open(p, O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "\x07\x00\x00", 3), 3); /* 3 bytes of a header */
    close(fd);
    struct seen s;
    struct em_journal_replay_stats st;
    assert_int_equal(reopen(&o, &s, &st), 0);
    assert_int_equal(s.n, 3);
    assert_int_equal(st.torn_bytes, 3);
}

static void test_zero_filled_tail(void **state)
{
    struct em_journal_opts o = {.dir = dir};
    write_n(&o, 1, 4);
    char p[300];
    seg_path(p, sizeof p, 1);
    off_t full = file_size(p);
    assert_int_equal(truncate(p, full + 4096), 0); /* zeros */
    struct seen s;
    struct em_journal_replay_stats st;
    assert_int_equal(reopen(&o, &s, &st), 0);
    assert_int_equal(s.n, 4);
    assert_int_equal(st.torn_bytes, 4096);
    assert_int_equal(file_size(p), full);
}

static void flip_byte(const char *p, off_t at)
{
    int fd = open(p, O_RDWR);
    assert_true(fd >= 0);
    unsigned char c;
    assert_int_equal(pread(fd, &c, 1, at), 1);
    c ^= 0x40;
    assert_int_equal(pwrite(fd, &c, 1, at), 1);
    close(fd);
}

static void test_crc_corruption_mid_log_is_refused(void **state)
{
    struct em_journal_opts o = {.dir = dir};
    write_n(&o, 1, 10);
    char p[300];
    seg_path(p, sizeof p, 1);
    /* Header 24 bytes, first record: 16-byte header + "order-1". */
    flip_byte(p, 24 + 16 + 3);
    struct seen s;
    assert_int_equal(reopen(&o, &s, NULL), CORE_EIO);
    /* Nothing was truncated: an operator can still inspect it. */
    assert_true(file_size(p) > 24 + 10 * 16);
}

static void test_crc_corruption_of_last_record_is_torn(void **state)
{
    struct em_journal_opts o = {.dir = dir};
    write_n(&o, 1, 10);
    char p[300];
    seg_path(p, sizeof p, 1);
    flip_byte(p, file_size(p) - 1);
    struct seen s;
    struct em_journal_replay_stats st;
    assert_int_equal(reopen(&o, &s, &st), 0);
    assert_int_equal(s.n, 9);
    assert_true(st.torn_bytes > 0);
}

static void test_snapshot_bounds_replay(void **state)
{
    struct em_journal_opts o = {.dir = dir, .fsync = EM_FSYNC_BATCH};
    struct em_journal j;
    assert_int_equal(em_journal_open(&j, &o, NULL, NULL, NULL, NULL), 0);
    for (int i = 1; i <= 5; i++)
        assert_int_equal(em_journal_append(&j, "a", 1, NULL), 0);
    assert_int_equal(em_journal_snapshot(&j, "state-after-5", 13), 0);
    for (int i = 6; i <= 8; i++)
        assert_int_equal(em_journal_append(&j, "b", 1, NULL), 0);
    assert_int_equal(em_journal_snapshot(&j, "state-after-8", 13), 0);
    assert_int_equal(em_journal_append(&j, "c9", 2, NULL), 0);
    em_journal_close(&j);

    char p[300];
    seg_path(p, sizeof p, 1);
    assert_int_equal(file_size(p), -1); /* superseded segment removed */
    snprintf(p, sizeof p, "%s/snapshot-%020d.snap", dir, 5);
    assert_int_equal(file_size(p), -1); /* superseded snapshot removed */

    struct seen s;
    struct em_journal_replay_stats st;
    assert_int_equal(reopen(&o, &s, &st), 0);
    assert_int_equal(st.snapshot_seq, 8);
    assert_string_equal(s.snap, "state-after-8");
    assert_int_equal(s.n, 1);
    assert_int_equal(s.seqs[0], 9);
    assert_string_equal(s.payload[0], "c9");
}

static void test_damaged_snapshot_without_history_is_refused(void **state)
{
    struct em_journal_opts o = {.dir = dir};
    struct em_journal j;
    assert_int_equal(em_journal_open(&j, &o, NULL, NULL, NULL, NULL), 0);
    for (int i = 1; i <= 3; i++)
        assert_int_equal(em_journal_append(&j, "a", 1, NULL), 0);
    assert_int_equal(em_journal_snapshot(&j, "S3", 2), 0);
    assert_int_equal(em_journal_append(&j, "d", 1, NULL), 0);
    em_journal_close(&j);
    char p[300];
    snprintf(p, sizeof p, "%s/snapshot-%020d.snap", dir, 3);
    flip_byte(p, 33);
    /* Records 1-3 are gone with the snapshot that replaced them: starting
     * from record 4 would be a different state, so open refuses. */
    struct seen s;
    assert_int_equal(reopen(&o, &s, NULL), CORE_EIO);
}

static void test_fsync_policies(void **state)
{
    struct em_journal j;
    struct em_journal_opts o = {.dir = dir, .fsync = EM_FSYNC_ALWAYS};
    assert_int_equal(em_journal_open(&j, &o, NULL, NULL, NULL, NULL), 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(em_journal_append(&j, "x", 1, NULL), 0);
    assert_int_equal(j.syncs, 5);
    assert_int_equal(j.synced_seq, 5);
    em_journal_close(&j);

    o.fsync = EM_FSYNC_BATCH;
    assert_int_equal(em_journal_open(&j, &o, NULL, NULL, NULL, NULL), 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(em_journal_append(&j, "x", 1, NULL), 0);
    assert_int_equal(j.syncs, 0);
    assert_int_equal(j.writes, 0); /* still in the batch buffer */
    assert_int_equal(em_journal_flush(&j), 0);
    assert_int_equal(j.writes, 1);
    assert_int_equal(j.syncs, 1);
    assert_int_equal(j.synced_seq, 10);
    assert_int_equal(em_journal_flush(&j), 0); /* nothing new: no sync */
    assert_int_equal(j.syncs, 1);
    em_journal_close(&j);

    o.fsync = EM_FSYNC_INTERVAL;
    o.fsync_interval_ms = 3600 * 1000;
    assert_int_equal(em_journal_open(&j, &o, NULL, NULL, NULL, NULL), 0);
    assert_int_equal(em_journal_append(&j, "x", 1, NULL), 0);
    assert_int_equal(em_journal_flush(&j), 0);
    assert_int_equal(em_journal_append(&j, "x", 1, NULL), 0);
    assert_int_equal(em_journal_flush(&j), 0);
    assert_int_equal(j.syncs, 0); /* within the hour: written, not synced */
    assert_int_equal(j.writes, 2);
    em_journal_close(&j);
    o.fsync_interval_ms = 0;
    assert_int_equal(em_journal_open(&j, &o, NULL, NULL, NULL, NULL), 0);
    assert_int_equal(em_journal_append(&j, "x", 1, NULL), 0);
    assert_int_equal(em_journal_flush(&j), 0);
    assert_int_equal(j.syncs, 1); /* interval elapsed: synced */
    em_journal_close(&j);

    o.fsync = EM_FSYNC_NEVER;
    assert_int_equal(em_journal_open(&j, &o, NULL, NULL, NULL, NULL), 0);
    assert_int_equal(em_journal_append(&j, "x", 1, NULL), 0);
    assert_int_equal(em_journal_flush(&j), 0);
    assert_int_equal(j.syncs, 0);
    em_journal_close(&j);

    struct seen s;
    assert_int_equal(reopen(&o, &s, NULL), 0);
    assert_int_equal(s.n, 14);
}

static void test_big_records_and_limits(void **state)
{
    struct em_journal j;
    struct em_journal_opts o = {.dir = dir, .batch_bytes = 128};
    assert_int_equal(em_journal_open(&j, &o, NULL, NULL, NULL, NULL), 0);
    static char big[EM_JOURNAL_RECORD_MAX + 1];
    memset(big, 'z', sizeof big);
    assert_int_equal(em_journal_append(&j, big, sizeof big, NULL), CORE_ETOOBIG);
    assert_int_equal(em_journal_append(&j, "small", 5, NULL), 0);
    assert_int_equal(em_journal_append(&j, big, 1000, NULL), 0); /* > batch buffer */
    assert_int_equal(em_journal_append(&j, "tail", 4, NULL), 0);
    em_journal_close(&j);
    struct seen s;
    assert_int_equal(reopen(&o, &s, NULL), 0);
    assert_int_equal(s.n, 3);
    assert_string_equal(s.payload[0], "small");
    assert_int_equal(s.payload[1][0], 'z');
    assert_string_equal(s.payload[2], "tail");
}

static void test_callback_error_stops_replay(void **state)
{
    struct em_journal_opts o = {.dir = dir};
    write_n(&o, 1, 5);
    struct seen s = {.fail_at = 3};
    struct em_journal j;
    assert_int_equal(em_journal_open(&j, &o, on_snap, on_rec, &s, NULL), CORE_EINVAL);
    assert_int_equal(s.n, 2);
}

static void test_new_segment_with_torn_header(void **state)
{
    struct em_journal_opts o = {.dir = dir};
    write_n(&o, 1, 2);
    /* A crash right after creating a later segment's file. */
    char p[300];
    seg_path(p, sizeof p, 3);
    int fd = open(p, O_WRONLY | O_CREAT, 0644);
    assert_int_equal(write(fd, "EMJ", 3), 3);
    close(fd);
    struct seen s;
    struct em_journal_replay_stats st;
    assert_int_equal(reopen(&o, &s, &st), 0);
    assert_int_equal(s.n, 2);
    write_n(&o, 3, 4);
    assert_int_equal(reopen(&o, &s, &st), 0);
    assert_int_equal(s.n, 4);
}

/* Invariant 4 of journal.h: appending and flushing never allocate. */
static void test_append_does_not_allocate(void **state)
{
    struct em_journal j;
    struct em_journal_opts o = {.dir = dir, .fsync = EM_FSYNC_NEVER, .batch_bytes = 4096};
    unsigned long at_open = test_allocations();
    assert_int_equal(em_journal_open(&j, &o, NULL, NULL, NULL, NULL), 0);
    assert_true(test_allocations() > at_open); /* the counting works: open allocates */
    char rec[48];
    memset(rec, 'r', sizeof rec);
    unsigned long before = test_allocations();
    for (int i = 0; i < 20000; i++) {
        assert_int_equal(em_journal_append(&j, rec, sizeof rec, NULL), 0);
        if (i % 64 == 0)
            assert_int_equal(em_journal_flush(&j), 0);
    }
    assert_int_equal(em_journal_flush(&j), 0);
    assert_int_equal(test_allocations() - before, 0);
    em_journal_close(&j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_tail_is_truncated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_header_of_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zero_filled_tail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crc_corruption_mid_log_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crc_corruption_of_last_record_is_torn, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_bounds_replay, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_snapshot_without_history_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fsync_policies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_big_records_and_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callback_error_stops_replay, setup, teardown),
        cmocka_unit_test_setup_teardown(test_new_segment_with_torn_header, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_does_not_allocate, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
