/* engine_host: the inbound path (journal before publish), acks and TRADE
 * lines, market data from the engine's totals, the clock and schedule,
 * restarts from the journal and from snapshots (today's and the older
 * format with the host's own section), driven through a fake bus and a
 * fake clock on a real journal in a temporary directory. */
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
#include "edumatcher/gateway/alf/alf.h"
#include "edumatcher/host/engine_host.h"

/* ---- a fake bus: every message published, as text ---- */

#define MAXPUB 64

struct pub {
    char topic[64];
    char text[1024]; /* text lines as they are, frames as ALF lines */
};

static struct {
    uint64_t now;
    struct pub p[MAXPUB];
    unsigned n;
    bool eseq;       /* show the events' numbers (off: the lines a trader gets) */
    unsigned heads;  /* > 0: format only the first `heads` frames of a message */
    unsigned frames; /* order.ack frames published (a count the test resets) */
} B;

static int publish(void *ctx, const struct em_bus_topic *topic, const void *data, size_t len)
{
    assert_true(B.n < MAXPUB);
    struct pub *p = &B.p[B.n++];
    memcpy(p->topic, topic->s, topic->len);
    p->topic[topic->len] = 0;
    if (strncmp(p->topic, "order.ack.", 10) != 0) {
        assert_true(len < sizeof p->text);
        memcpy(p->text, data, len);
        p->text[len] = 0;
        return 0;
    }
    size_t at = 0;
    for (unsigned k = 0, off = 0; off < len; k++, B.frames++) {
        struct em_msg m;
        int n = em_frame_decode((const uint8_t *)data + off, len - off, &m);
        assert_true(n > 0);
        off += (size_t)n;
        if (B.heads && k >= B.heads)
            continue;
        if (!B.eseq)
            m.present &= ~EM_BIT(eseq);
        if (at)
            p->text[at++] = '|';
        at += em_alf_format(&m, p->text + at);
    }
    p->text[at] = 0;
    return 0;
}

static uint64_t now_ns(void *ctx)
{
    return B.now;
}

static const struct em_host_bus bus = {.publish = publish, .now_ns = now_ns};

/* The first message published on topic since `from`, or NULL. */
static const char *published(const char *topic, unsigned from)
{
    for (unsigned i = from; i < B.n; i++)
        if (strcmp(B.p[i].topic, topic) == 0)
            return B.p[i].text;
    return NULL;
}

/* An MD line without its epoch (the run's wall-clock start). */
static const char *no_epoch(const char *line)
{
    static char out[1024];
    assert_non_null(line);
    const char *e = strstr(line, " epoch=");
    assert_non_null(e);
    size_t n = (size_t)(e - line);
    memcpy(out, line, n);
    e += 7;
    while (*e >= '0' && *e <= '9')
        e++;
    strcpy(out + n, e);
    return out;
}

/* ---- helpers ---- */

static char dir[64];

static void make_dir(void)
{
    strcpy(dir, "/tmp/test_em_hostXXXXXX");
    assert_non_null(mkdtemp(dir));
}

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static bool snapshot_fork; /* open_host's hosts write snapshots from a child */

static struct em_host *open_host(uint64_t snapshot_records)
{
    struct em_host_config cfg = {.bus = &bus,
                                 .journal = {.dir = dir, .fsync = EM_FSYNC_BATCH},
                                 .md_depth = 2,
                                 .snapshot_records = snapshot_records,
                                 .snapshot_fork = snapshot_fork};
    struct em_host *h = NULL;
    assert_int_equal(em_host_open(&h, &cfg), 0);
    return h;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A gateway's bus message of one or more ALF lines (separated by '|'). */
static void from_gw(struct em_host *h, const char *gw, const char *lines)
{
    uint8_t buf[4096];
    size_t len = 0;
    const char *p = lines;
    while (*p) {
        const char *end = strchr(p, '|');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        struct em_msg m;
        assert_int_equal(em_alf_parse(p, n, &m), 0);
        int k = em_frame_encode(&m, buf + len, sizeof buf - len);
        assert_true(k > 0);
        len += (size_t)k;
        p += n + (end ? 1 : 0);
    }
    assert_int_equal(em_host_inbound(h, gw, strlen(gw), buf, len), 0);
}

static void symbols_file(struct em_host *h)
{
    char path[128];
    snprintf(path, sizeof path, "%s.symbols", dir);
    write_file(path, "# sample\nSYMBOL sym=ABC tick=0.01\nAT 1000 PHASE sym=ABC phase=CLOSED\n");
    assert_int_equal(em_host_load_symbols(h, path), 0);
    unlink(path);
}

/* One trade of 4 at 10.01: S1 sells 10, B1 buys 4. */
static void trade(struct em_host *h)
{
    from_gw(h, "S1", "NEW cl=s1 sym=ABC side=S qty=10 px=10.01");
    from_gw(h, "B1", "NEW cl=b1 sym=ABC side=B qty=4 px=10.01");
}

/* ---- tests ---- */

static void test_journal_before_publish(void **state)
{
    make_dir();
    memset(&B, 0, sizeof B);
    struct em_host *h = open_host(0);
    assert_true(em_host_fresh(h));
    symbols_file(h);
    unsigned from = B.n;
    trade(h);
    assert_int_equal(B.n, from); /* staged, not published before the flush */
    assert_int_equal(em_host_batch_end(h, 2), 0);
    /* each trader's events of a batch in one message, in order */
    assert_string_equal(published("order.ack.S1", from),
                        "ACK cl=s1 oid=1|FILL cl=s1 oid=1 tid=1 px=10.01 qty=4 leaves=6 cum=4");
    assert_string_equal(published("order.ack.B1", from),
                        "ACK cl=b1 oid=2|FILL cl=b1 oid=2 tid=1 px=10.01 qty=4 leaves=0 cum=4");
    assert_string_equal(published("trade.executed", from),
                        "TRADE tid=1 sym=ABC px=10.01 qty=4 buy=B1 sell=S1 buy_oid=2 sell_oid=1");
    struct em_host_stats *st = em_host_stats(h);
    assert_int_equal(st->msgs_in, 2);
    assert_int_equal(st->trades_out, 1);
    assert_int_equal(st->open_orders, 1);
    assert_int_equal(em_host_journal(h)->records, 3); /* the SYMBOL too */

    /* market data: from the engine's totals, only when changed */
    from = B.n;
    em_host_publish_md(h);
    assert_string_equal(no_epoch(published("md.ABC", from)),
                        "MD sym=ABC seq=1 phase=CONTINUOUS last=10.01 lastqty=4 volume=4 trades=1 "
                        "tick=0.01 lot=1 decimals=2 band=- cb_band=- bids= asks=10.01:6:1");
    from = B.n;
    em_host_publish_md(h);
    assert_int_equal(B.n, from);

    /* queries: the book now, numbered as the stream's last message, and
     * trades by id from the trade log */
    const struct em_bus_topic *reply;
    char out[4096];
    size_t n = em_host_query(h, "book", 4, "ABC", 3, &reply, out, sizeof out);
    out[n] = 0;
    assert_memory_equal(reply->s, "book", 4);
    assert_string_equal(
        no_epoch(out), "MD sym=ABC seq=1 phase=CONTINUOUS last=10.01 lastqty=4 volume=4 "
                       "trades=1 tick=0.01 lot=1 decimals=2 band=- cb_band=- bids= asks=10.01:6:1");
    n = em_host_query(h, "book", 4, "XYZ", 3, &reply, out, sizeof out);
    assert_memory_equal(reply->s, "error", 5);
    /* the same by position (a late gateway walks 1, 2, ... to the end) */
    char by_name[4096];
    n = em_host_query(h, "book", 4, "ABC", 3, &reply, by_name, sizeof by_name);
    by_name[n] = 0;
    n = em_host_query(h, "symbol", 6, "1", 1, &reply, out, sizeof out);
    out[n] = 0;
    assert_memory_equal(reply->s, "book", 4);
    assert_string_equal(out, by_name);
    n = em_host_query(h, "symbol", 6, "2", 1, &reply, out, sizeof out);
    out[n] = 0;
    assert_memory_equal(reply->s, "error", 5);
    assert_string_equal(out, "unknown symbol");
    n = em_host_query(h, "symbol", 6, "0", 1, &reply, out, sizeof out);
    assert_memory_equal(reply->s, "error", 5);
    n = em_host_query(h, "trades", 6, "1", 1, &reply, out, sizeof out);
    out[n] = 0;
    assert_memory_equal(reply->s, "trades", 6);
    assert_non_null(strstr(out, "TRADE tid=1 sym=ABC px=10.01 qty=4 buy=B1 sell=S1"));
    n = em_host_query(h, "trades", 6, "2", 1, &reply, out, sizeof out);
    assert_int_equal(n, 0); /* none yet */
    em_host_query(h, "what", 4, "", 0, &reply, out, sizeof out);
    assert_memory_equal(reply->s, "error", 5);
    assert_int_equal(em_host_stats(h)->queries, 9);

    /* a frame that does not decode is counted, not published */
    uint8_t junk[3] = {0xff, 0xff, 0xff};
    assert_int_equal(em_host_inbound(h, "B1", 2, junk, sizeof junk), 0);
    assert_int_equal(em_host_batch_end(h, 1), 0);
    assert_int_equal(em_host_stats(h)->bad_frames, 1);
    assert_int_equal(B.n, from);
    em_host_close(h);
    remove_dir();
}

static void test_clock_and_schedule(void **state)
{
    make_dir();
    memset(&B, 0, sizeof B);
    struct em_host *h = open_host(0);
    symbols_file(h);
    trade(h);
    assert_int_equal(em_host_batch_end(h, 2), 0);
    unsigned from = B.n;
    B.now += 999 * 1000000ull;
    assert_int_equal(em_host_tick(h), 0);
    assert_int_equal(em_host_clock_ms(h), 999);
    assert_null(published("order.ack.S1", from)); /* not yet */
    B.now += 1 * 1000000ull;
    assert_int_equal(em_host_tick(h), 0);
    assert_int_equal(em_host_clock_ms(h), 1000);
    /* AT 1000: the close expires S1's DAY remainder */
    assert_string_equal(published("order.ack.S1", from),
                        "CANCELED cl=s1 oid=1 qty=6 cum=4 reason=EXPIRED");
    em_host_publish_md(h);
    const char *md = published("md.ABC", from);
    assert_non_null(md);
    assert_non_null(strstr(md, "phase=CLOSED"));
    em_host_close(h);

    /* a restart replays the journal: the same clock, totals, phase; the AT
     * line that fired is not fired again, the symbol file not applied */
    memset(&B, 0, sizeof B);
    B.now = 5;
    h = open_host(0);
    assert_false(em_host_fresh(h));
    assert_int_equal(em_host_stats(h)->replayed, 6); /* SYMBOL, 2 NEW, 2 TICK, PHASE */
    assert_int_equal(em_host_clock_ms(h), 1000);
    symbols_file(h);
    assert_int_equal(B.n, 0);
    em_host_publish_md(h);
    assert_string_equal(no_epoch(published("md.ABC", 0)),
                        "MD sym=ABC seq=1 phase=CLOSED last=10.01 lastqty=4 volume=4 trades=1 "
                        "tick=0.01 lot=1 decimals=2 band=- cb_band=- bids= "
                        "asks=");
    assert_int_equal(em_host_journal(h)->records, 0);
    em_host_close(h);
    remove_dir();
}

static void test_snapshot_and_restore(void **state)
{
    make_dir();
    memset(&B, 0, sizeof B);
    struct em_host *h = open_host(2);
    symbols_file(h);
    trade(h);
    assert_int_equal(em_host_batch_end(h, 2), 0);
    if (!snapshot_fork)
        assert_int_equal(em_host_stats(h)->snapshots, 1);
    /* forked: the child writes it while this record goes to the journal */
    from_gw(h, "B1", "NEW cl=b2 sym=ABC side=B qty=1 px=10.01");
    assert_int_equal(em_host_batch_end(h, 1), 0);
    if (!snapshot_fork)
        assert_int_equal(em_host_stats(h)->snapshots, 1); /* one record since */
    em_host_close(h);                                     /* waits for the child */

    memset(&B, 0, sizeof B);
    h = open_host(0);
    struct em_host_stats *st = em_host_stats(h);
    assert_int_equal(st->restored_seq, 3);
    assert_int_equal(st->replayed, 1);
    em_host_publish_md(h);
    assert_string_equal(no_epoch(published("md.ABC", 0)),
                        "MD sym=ABC seq=1 phase=CONTINUOUS last=10.01 lastqty=1 volume=5 trades=2 "
                        "tick=0.01 lot=1 decimals=2 band=- cb_band=- bids= asks=10.01:5:1");
    /* ids go on where they were */
    unsigned from = B.n;
    from_gw(h, "B1", "NEW cl=b3 sym=ABC side=B qty=1 px=10.01");
    assert_int_equal(em_host_batch_end(h, 1), 0);
    assert_string_equal(published("trade.executed", from),
                        "TRADE tid=3 sym=ABC px=10.01 qty=1 buy=B1 sell=S1 buy_oid=4 sell_oid=1");
    em_host_close(h);
    remove_dir();
}

/* The same with the snapshot written by a forked child while the parent
 * journals the next record: the restart restores the state after record 3
 * (the child's copy), not what the parent did afterwards. */
static void test_snapshot_forked(void **state)
{
    snapshot_fork = true;
    test_snapshot_and_restore(state);
    snapshot_fork = false;
}

/* Resent messages (engine_host_dedup.c): a number handled before gets its
 * first reply again and is not journaled; one after a gap gets RESEND; the
 * state survives a restart, by replay and by the snapshot. */
static void resend_round(struct em_host *h, uint64_t records, const char *what)
{
    unsigned from = B.n;
    from_gw(h, "B1", "NEW cl=b1 sym=ABC side=B qty=4 px=10.01 seq=1");
    from_gw(h, "B1", "PING seq=2");
    assert_int_equal(em_host_batch_end(h, 1), 0);
    assert_string_equal(published("order.ack.B1", from), "ACK cl=b1 oid=2 seq=1|PONG seq=2");
    assert_int_equal(em_host_journal(h)->next_seq - 1, records);
    assert_int_equal(em_host_stats(h)->duplicates, 2);
    (void)what;
}

static void test_resent_messages(void **state)
{
    make_dir();
    memset(&B, 0, sizeof B);
    struct em_host *h = open_host(0);
    symbols_file(h);
    from_gw(h, "S1", "NEW cl=s1 sym=ABC side=S qty=10 px=10.01");
    from_gw(h, "B1", "LOGIN gw=B1");
    assert_int_equal(em_host_batch_end(h, 2), 0);
    unsigned from = B.n;
    from_gw(h, "B1", "NEW cl=b1 sym=ABC side=B qty=4 px=10.01 seq=1|PING seq=2");
    assert_int_equal(em_host_batch_end(h, 2), 0);
    /* the first reply carries the number, the fills that follow do not */
    assert_string_equal(published("order.ack.B1", from),
                        "ACK cl=b1 oid=2 seq=1|FILL cl=b1 oid=2 tid=1 px=10.01 qty=4 leaves=0 "
                        "cum=4|PONG seq=2");
    uint64_t records = em_host_journal(h)->next_seq - 1;
    resend_round(h, records, "live");
    /* 4 after 2: 3 never came; nothing is journaled */
    from = B.n;
    from_gw(h, "B1", "CANCEL cl=b1 seq=4");
    assert_int_equal(em_host_batch_end(h, 1), 0);
    assert_string_equal(published("order.ack.B1", from), "REJECT cl=b1 reason=RESEND seq=4");
    assert_int_equal(em_host_stats(h)->resend_requests, 1);
    assert_int_equal(em_host_journal(h)->next_seq - 1, records);
    em_host_close(h);

    /* rebuilt by replay */
    memset(&B, 0, sizeof B);
    h = open_host(0);
    resend_round(h, records, "replay");
    /* 3 is new: handled; a later LOGIN numbers from 1 again */
    from = B.n;
    from_gw(h, "B1", "CANCEL cl=b1 seq=3");
    assert_int_equal(em_host_batch_end(h, 1), 0);
    assert_string_equal(published("order.ack.B1", from), "REJECT cl=b1 reason=UNKNOWN_ORDER seq=3");
    records++;
    em_host_close(h);

    /* and by a snapshot (taken at the first batch) */
    memset(&B, 0, sizeof B);
    h = open_host(1);
    from_gw(h, "B1", "PING");
    assert_int_equal(em_host_batch_end(h, 1), 0);
    assert_int_equal(em_host_stats(h)->snapshots, 1);
    em_host_close(h);
    memset(&B, 0, sizeof B);
    h = open_host(0);
    assert_int_equal(em_host_stats(h)->replayed, 0);
    resend_round(h, records + 1, "snapshot");
    from = B.n;
    from_gw(h, "B1", "LOGIN gw=B1|NEW cl=n1 sym=ABC side=B qty=1 px=9.00 seq=1");
    assert_int_equal(em_host_batch_end(h, 1), 0);
    assert_string_equal(published("order.ack.B1", from), "LOGGEDIN gw=B1|ACK cl=n1 oid=3 seq=1");
    em_host_close(h);
    remove_dir();
}

/* Events (engine_host_dedup.c, docs/alf.md I.6): numbered per gateway id
 * from its LOGIN, on replay as live; RESYNC answered from the window, not
 * journaled; the numbers and the window survive a restart by replay and
 * by the snapshot; older than the window, or beyond the last: told so. */
static void resync_round(struct em_host *h, uint64_t records)
{
    unsigned from = B.n;
    from_gw(h, "S1", "RESYNC eseq=1");
    assert_int_equal(em_host_batch_end(h, 1), 0);
    assert_string_equal(published("order.ack.S1", from),
                        "RESYNC eseq=1 next=2 last=3|ACK cl=s1 oid=1 seq=1 eseq=2|FILL cl=s1 oid=1 "
                        "tid=1 px=10.01 qty=4 leaves=6 cum=4 eseq=3");
    from = B.n;
    from_gw(h, "B1", "RESYNC eseq=3");
    assert_int_equal(em_host_batch_end(h, 1), 0);
    assert_string_equal(published("order.ack.B1", from), "RESYNC eseq=3 next=4 last=3");
    assert_int_equal(em_host_journal(h)->next_seq - 1, records); /* never journaled */
}

static void test_event_resync(void **state)
{
    make_dir();
    memset(&B, 0, sizeof B);
    B.eseq = true;
    struct em_host *h = open_host(0);
    symbols_file(h);
    unsigned from = B.n;
    from_gw(h, "S1", "LOGIN gw=S1|NEW cl=s1 sym=ABC side=S qty=10 px=10.01 seq=1");
    from_gw(h, "B1", "LOGIN gw=B1|NEW cl=b1 sym=ABC side=B qty=4 px=10.01 seq=1");
    assert_int_equal(em_host_batch_end(h, 2), 0);
    /* a number per event of the gw, after seq on a first reply */
    assert_string_equal(published("order.ack.S1", from),
                        "LOGGEDIN gw=S1 eseq=1|ACK cl=s1 oid=1 seq=1 eseq=2|FILL cl=s1 oid=1 "
                        "tid=1 px=10.01 qty=4 leaves=6 cum=4 eseq=3");
    assert_string_equal(published("order.ack.B1", from),
                        "LOGGEDIN gw=B1 eseq=1|ACK cl=b1 oid=2 seq=1 eseq=2|FILL cl=b1 oid=2 "
                        "tid=1 px=10.01 qty=4 leaves=0 cum=4 eseq=3");
    uint64_t records = em_host_journal(h)->next_seq - 1;
    resync_round(h, records);
    /* the answer to a duplicate is the kept first reply, without a number:
     * not an event of its own */
    from = B.n;
    from_gw(h, "S1", "NEW cl=s1 sym=ABC side=S qty=10 px=10.01 seq=1");
    assert_int_equal(em_host_batch_end(h, 1), 0);
    assert_string_equal(published("order.ack.S1", from), "ACK cl=s1 oid=1 seq=1");
    assert_int_equal(em_host_stats(h)->resyncs, 2);
    assert_int_equal(em_host_stats(h)->events_resent, 2);
    em_host_close(h);

    /* rebuilt by replay: the same numbers, the next continues them */
    memset(&B, 0, sizeof B);
    B.eseq = true;
    h = open_host(0);
    resync_round(h, records);
    from = B.n;
    from_gw(h, "S1", "CANCEL cl=s1 seq=2");
    assert_int_equal(em_host_batch_end(h, 1), 0);
    assert_string_equal(published("order.ack.S1", from),
                        "CANCELED cl=s1 oid=1 qty=6 cum=4 reason=USER seq=2 eseq=4");
    records++;
    em_host_close(h);

    /* and by a snapshot (taken at the first batch) */
    memset(&B, 0, sizeof B);
    B.eseq = true;
    h = open_host(1);
    from_gw(h, "OPS", "TICK ms=1");
    assert_int_equal(em_host_batch_end(h, 1), 0);
    assert_int_equal(em_host_stats(h)->snapshots, 1);
    em_host_close(h);
    memset(&B, 0, sizeof B);
    B.eseq = true;
    h = open_host(0);
    assert_int_equal(em_host_stats(h)->replayed, 0);
    from = B.n;
    from_gw(h, "S1", "RESYNC eseq=3");
    assert_int_equal(em_host_batch_end(h, 1), 0);
    assert_string_equal(published("order.ack.S1", from),
                        "RESYNC eseq=3 next=4 last=4|CANCELED cl=s1 oid=1 qty=6 cum=4 reason=USER "
                        "seq=2 eseq=4");

    /* more than the window since: the oldest kept comes first, next says
     * where; beyond the last: next is the last + 1, nothing follows */
    B.heads = 2;
    for (int i = 0; i < EM_EVENT_WINDOW + 10; i++)
        from_gw(h, "S1", "PING");
    assert_int_equal(em_host_batch_end(h, 1), 0);
    from = B.n;
    B.frames = 0;
    from_gw(h, "S1", "RESYNC eseq=4");
    assert_int_equal(em_host_batch_end(h, 1), 0);
    char want[128];
    snprintf(want, sizeof want, "RESYNC eseq=4 next=15 last=%d|PONG eseq=15",
             4 + EM_EVENT_WINDOW + 10);
    assert_string_equal(published("order.ack.S1", from), want);
    assert_int_equal(B.frames, 1 + EM_EVENT_WINDOW);
    assert_int_equal(em_host_stats(h)->resyncs_short, 1);
    from = B.n;
    B.frames = 0;
    from_gw(h, "S1", "RESYNC eseq=5000");
    assert_int_equal(em_host_batch_end(h, 1), 0);
    snprintf(want, sizeof want, "RESYNC eseq=5000 next=%d last=%d", 4 + EM_EVENT_WINDOW + 10 + 1,
             4 + EM_EVENT_WINDOW + 10);
    assert_string_equal(published("order.ack.S1", from), want);
    assert_int_equal(B.frames, 1);
    /* a LOGIN numbers from 1 again */
    B.heads = 0;
    from = B.n;
    from_gw(h, "S1", "LOGIN gw=S1");
    assert_int_equal(em_host_batch_end(h, 1), 0);
    assert_string_equal(published("order.ack.S1", from), "LOGGEDIN gw=S1 eseq=1");
    em_host_close(h);
    remove_dir();
}

/* ---- the older snapshot format: the host's section, then engine v1 ---- */

struct bytes {
    unsigned char p[1 << 16];
    size_t len;
};

static int to_bytes(void *ctx, const void *data, size_t len)
{
    struct bytes *b = ctx;
    assert_true(b->len + len <= sizeof b->p);
    memcpy(b->p + b->len, data, len);
    b->len += len;
    return 0;
}

static void sink(void *ctx, uint16_t gw, const struct em_msg *ev)
{
}

static void put(struct bytes *b, uint64_t v, unsigned width)
{
    for (unsigned i = 0; i < width; i++)
        b->p[b->len++] = (unsigned char)(v >> (8 * i));
}

static void submit(struct em_engine *e, const char *gw, const char *line)
{
    struct em_msg m;
    assert_int_equal(em_alf_parse(line, strlen(line), &m), 0);
    int id = em_engine_gateway(e, gw, strlen(gw));
    assert_true(id > 0);
    assert_int_equal(em_engine_submit(e, (uint16_t)id, &m), 0);
}

static void test_legacy_snapshot(void **state)
{
    /* an engine snapshot in version 1: without the 20 bytes of totals
     * after the symbol's fixed part (see engine_snapshot.c's layout) */
    struct em_engine_config ec = {.sink = sink};
    struct em_engine *e = em_engine_new(&ec);
    submit(e, "OPS", "SYMBOL sym=ABC tick=0.01");
    submit(e, "OPS", "TICK ms=250");
    submit(e, "S1", "NEW cl=s1 sym=ABC side=S qty=10 px=10.01");
    submit(e, "B1", "NEW cl=b1 sym=ABC side=B qty=4 px=10.01");
    static struct bytes eng, blob;
    eng.len = blob.len = 0;
    assert_int_equal(em_engine_snapshot(e, to_bytes, &eng), 0);
    em_engine_free(e);
    size_t at = 68 + 4 + (2 + 3) + (2 + 2) + (2 + 2) + 4 + 84;
    assert_int_equal(eng.p[at - 84 + 1], 'A');
    memmove(eng.p + at, eng.p + at + 20, eng.len - at - 20);
    eng.len -= 20;
    eng.p[8] = 1;
    /* the host's section: clock, then per symbol last, last_qty, volume,
     * trades (the totals the older host kept) */
    memcpy(blob.p, "EMENGPRC", 8);
    blob.len = 8;
    put(&blob, 1, 4);
    put(&blob, 250, 8);
    put(&blob, 1, 4);
    put(&blob, 3, 1);
    memcpy(blob.p + blob.len, "ABC", 3);
    blob.len += 3;
    put(&blob, 1001, 8);
    put(&blob, 2, 1);
    put(&blob, 4, 4);
    put(&blob, 4, 8);
    put(&blob, 1, 8);
    to_bytes(&blob, eng.p, eng.len);

    make_dir();
    struct em_journal j;
    struct em_journal_opts jo = {.dir = dir, .fsync = EM_FSYNC_BATCH};
    assert_int_equal(em_journal_open(&j, &jo, NULL, NULL, NULL, NULL), 0);
    uint8_t rec[64] = {3, 'O', 'P', 'S'};
    struct em_msg m;
    assert_int_equal(em_alf_parse("TICK ms=1", 9, &m), 0);
    int n = em_frame_encode(&m, rec + 4, sizeof rec - 4);
    assert_true(n > 0);
    assert_int_equal(em_journal_append(&j, rec, 4 + (size_t)n, NULL), 0);
    assert_int_equal(em_journal_snapshot(&j, blob.p, blob.len), 0);
    em_journal_close(&j);

    memset(&B, 0, sizeof B);
    struct em_host *h = open_host(0);
    assert_int_equal(em_host_stats(h)->restored_seq, 1);
    assert_int_equal(em_host_clock_ms(h), 250);
    em_host_publish_md(h);
    assert_string_equal(no_epoch(published("md.ABC", 0)),
                        "MD sym=ABC seq=1 phase=CONTINUOUS last=10.01 lastqty=4 volume=4 trades=1 "
                        "tick=0.01 lot=1 decimals=2 band=- cb_band=- bids= asks=10.01:6:1");
    em_host_close(h);

    /* a damaged section is refused: open fails rather than guess */
    remove_dir();
    make_dir();
    assert_int_equal(em_journal_open(&j, &jo, NULL, NULL, NULL, NULL), 0);
    assert_int_equal(em_journal_append(&j, rec, 4 + (size_t)n, NULL), 0);
    blob.p[8] = 7; /* unknown section version */
    assert_int_equal(em_journal_snapshot(&j, blob.p, blob.len), 0);
    em_journal_close(&j);
    struct em_host_config cfg = {.bus = &bus, .journal = jo};
    struct em_host *bad = NULL;
    assert_int_equal(em_host_open(&bad, &cfg), CORE_EIO);
    remove_dir();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_journal_before_publish), cmocka_unit_test(test_clock_and_schedule),
        cmocka_unit_test(test_snapshot_and_restore),   cmocka_unit_test(test_snapshot_forked),
        cmocka_unit_test(test_legacy_snapshot),        cmocka_unit_test(test_resent_messages),
        cmocka_unit_test(test_event_resync),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
