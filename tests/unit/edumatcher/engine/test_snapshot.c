/* Engine snapshots (em_engine_snapshot / em_engine_restore): for many
 * seeds, a generated stream run uninterrupted and run again through an
 * engine that, at random points, snapshots itself, is freed, and goes on
 * as a fresh engine restored from the snapshot, must give the same events
 * byte for byte; a restored engine snapshots to the same bytes; a
 * truncated or damaged snapshot is refused, never a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "edumatcher/gateway/alf/alf.h"
#include "edumatcher/engine/engine.h"
#include "em_drive.h"
#include "em_gen.h"

/* A growing byte buffer: the events of a run, or a snapshot. */
struct bytes {
    unsigned char *p;
    size_t len, cap;
};

static void bytes_add(struct bytes *b, const void *data, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        assert_non_null(b->p);
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static int snap_write(void *ctx, const void *data, size_t len)
{
    bytes_add(ctx, data, len);
    return 0;
}

/* Every event as `<gw id> <ALF line>\n`. */
static void sink(void *ctx, uint16_t gw, const struct em_msg *ev)
{
    char line[EM_ALF_FORMAT_MAX + 16];
    int k = snprintf(line, 8, "%u ", (unsigned)gw);
    size_t n = em_alf_format(ev, line + k) + (size_t)k;
    line[n++] = '\n';
    bytes_add(ctx, line, n);
}

static struct em_engine *engine_new(struct bytes *out)
{
    struct em_engine_config cfg = {.sink = sink, .sink_ctx = out};
    struct em_engine *e = em_engine_new(&cfg);
    assert_non_null(e);
    return e;
}

static void setup_symbols(struct em_engine *e)
{
    char setup[8][128];
    int ns = em_gen_setup(setup, 8);
    for (int i = 0; i < ns; i++)
        assert_int_equal(em_drive_line(e, setup[i], strlen(setup[i])), 0);
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Snapshot e, free it, restore the bytes into a fresh engine writing to
 * out, and check that the new engine snapshots to the same bytes. */
static struct em_engine *snapshot_and_restore(struct em_engine *e, struct bytes *out,
                                              size_t *snap_bytes)
{
    struct bytes a = {0}, b = {0};
    assert_int_equal(em_engine_snapshot(e, snap_write, &a), 0);
    struct em_engine_stats before;
    em_engine_stats(e, &before);
    em_engine_free(e);
    struct em_engine *r = engine_new(out);
    assert_int_equal(em_engine_restore(r, a.p, a.len), 0);
    const char *what = "";
    assert_int_equal(em_engine_check(r, &what), 0);
    struct em_engine_stats after;
    em_engine_stats(r, &after);
    assert_memory_equal(&before, &after, sizeof before);
    assert_int_equal(em_engine_snapshot(r, snap_write, &b), 0);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.p, b.p, a.len);
    *snap_bytes = a.len;
    free(a.p);
    free(b.p);
    return r;
}

#define SEEDS 40
#define LINES 4000
#define CUTS  6

static void test_restored_engine_gives_the_same_events(void **state)
{
    size_t max_snap = 0;
    for (uint64_t seed = 1; seed <= SEEDS; seed++) {
        struct bytes plain = {0}, cut = {0};
        struct em_engine *a = engine_new(&plain), *b = engine_new(&cut);
        setup_symbols(a);
        setup_symbols(b);
        /* the points after which b is snapshotted and replaced */
        int at[CUTS];
        uint64_t rs = seed * 0x9e3779b97f4a7c15ull;
        for (int k = 0; k < CUTS; k++)
            at[k] = (int)(rnd(&rs) % LINES);
        struct em_gen ga, gb;
        em_gen_init(&ga, seed);
        em_gen_init(&gb, seed);
        char buf[256];
        for (int i = 0; i < LINES; i++) {
            size_t n = em_gen_line(&ga, buf);
            assert_int_equal(em_drive_line(a, buf, n), 0);
            n = em_gen_line(&gb, buf);
            assert_int_equal(em_drive_line(b, buf, n), 0);
            for (int k = 0; k < CUTS; k++)
                if (at[k] == i) {
                    size_t sz;
                    b = snapshot_and_restore(b, &cut, &sz);
                    if (sz > max_snap)
                        max_snap = sz;
                }
        }
        assert_int_equal(plain.len, cut.len);
        assert_memory_equal(plain.p, cut.p, plain.len);
        /* and the final states agree */
        struct bytes sa = {0}, sb = {0};
        assert_int_equal(em_engine_snapshot(a, snap_write, &sa), 0);
        assert_int_equal(em_engine_snapshot(b, snap_write, &sb), 0);
        assert_int_equal(sa.len, sb.len);
        assert_memory_equal(sa.p, sb.p, sa.len);
        free(sa.p);
        free(sb.p);
        em_engine_free(a);
        em_engine_free(b);
        free(plain.p);
        free(cut.p);
    }
    /* the streams really leave orders on the books to carry over */
    assert_true(max_snap > 2000);
}

/* A state with every kind of order: a snapshot of it, to damage. */
static void sample_snapshot(struct bytes *snap)
{
    struct bytes ev = {0};
    struct em_engine *e = engine_new(&ev);
    setup_symbols(e);
    struct em_gen g;
    em_gen_init(&g, 7);
    char buf[256];
    for (int i = 0; i < 600; i++) {
        size_t n = em_gen_line(&g, buf);
        assert_int_equal(em_drive_line(e, buf, n), 0);
    }
    assert_int_equal(em_engine_snapshot(e, snap_write, snap), 0);
    em_engine_free(e);
    free(ev.p);
}

static void test_truncated_snapshot_is_refused(void **state)
{
    struct bytes snap = {0}, ev = {0};
    sample_snapshot(&snap);
    for (size_t n = 0; n < snap.len; n++) {
        struct em_engine *e = engine_new(&ev);
        assert_int_equal(em_engine_restore(e, snap.p, n), CORE_EPROTO);
        em_engine_free(e);
    }
    /* trailing bytes too */
    bytes_add(&snap, "x", 1);
    struct em_engine *e = engine_new(&ev);
    assert_int_equal(em_engine_restore(e, snap.p, snap.len), CORE_EPROTO);
    em_engine_free(e);
    assert_int_equal(ev.len, 0); /* a restore emits nothing */
    free(snap.p);
}

static void test_damaged_snapshot_is_refused_or_consistent(void **state)
{
    struct bytes snap = {0}, ev = {0};
    sample_snapshot(&snap);
    uint64_t rs = 12345;
    int refused = 0;
    for (int k = 0; k < 3000; k++) {
        unsigned char *copy = malloc(snap.len);
        assert_non_null(copy);
        memcpy(copy, snap.p, snap.len);
        size_t at = rnd(&rs) % snap.len;
        copy[at] ^= (unsigned char)(1u << (rnd(&rs) % 8));
        struct em_engine *e = engine_new(&ev);
        int rc = em_engine_restore(e, copy, snap.len);
        assert_true(rc == 0 || rc == CORE_EPROTO);
        if (rc == 0) {
            /* a flip that still describes a consistent state */
            const char *what = "";
            assert_int_equal(em_engine_check(e, &what), 0);
        } else {
            refused++;
        }
        em_engine_free(e);
        free(copy);
    }
    assert_true(refused > 0);
    free(snap.p);
    free(ev.p);
}

static void test_restore_needs_a_fresh_engine(void **state)
{
    struct bytes snap = {0}, ev = {0};
    sample_snapshot(&snap);
    struct em_engine *e = engine_new(&ev);
    setup_symbols(e);
    assert_int_equal(em_engine_restore(e, snap.p, snap.len), CORE_EINVAL);
    em_engine_free(e);
    e = engine_new(&ev);
    assert_int_equal(em_engine_restore(e, "EMENGSNP\x02\0\0\0", 12), CORE_EPROTO);
    em_engine_free(e);
    free(snap.p);
    free(ev.p);
}

/* An empty engine round-trips too (no symbol, only OPS). */
static void test_empty_engine(void **state)
{
    struct bytes a = {0}, b = {0}, ev = {0};
    struct em_engine *e = engine_new(&ev);
    assert_int_equal(em_engine_snapshot(e, snap_write, &a), 0);
    em_engine_free(e);
    e = engine_new(&ev);
    assert_int_equal(em_engine_restore(e, a.p, a.len), 0);
    assert_int_equal(em_engine_snapshot(e, snap_write, &b), 0);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.p, b.p, a.len);
    em_engine_free(e);
    free(a.p);
    free(b.p);
}

static int failing_write(void *ctx, const void *data, size_t len)
{
    return CORE_EIO;
}

static void test_write_error_is_returned(void **state)
{
    struct bytes ev = {0};
    struct em_engine *e = engine_new(&ev);
    setup_symbols(e);
    assert_int_equal(em_engine_snapshot(e, failing_write, NULL), CORE_EIO);
    em_engine_free(e);
    free(ev.p);
}

/* ---- market data kept by the engine (em_symbol_md, em_trade) ---- */

struct trades {
    struct em_trade t[8];
    char sym[8][EM_SYM_MAX + 1];
    unsigned n;
    struct bytes events;
};

static void trades_sink(void *ctx, uint16_t gw, const struct em_msg *ev)
{
    struct trades *t = ctx;
    sink(&t->events, gw, ev);
}

static void on_trade(void *ctx, const struct em_trade *tr)
{
    struct trades *t = ctx;
    assert_true(t->n < 8);
    t->t[t->n] = *tr;
    strcpy(t->sym[t->n], tr->sym);
    t->t[t->n].sym = t->sym[t->n];
    t->n++;
}

static void drive(struct em_engine *e, const char *line)
{
    assert_int_equal(em_drive_line(e, line, strlen(line)), 0);
}

static struct em_engine *md_engine(struct trades *t)
{
    memset(t, 0, sizeof *t);
    struct em_engine_config cfg = {.sink = trades_sink, .sink_ctx = t, .on_trade = on_trade};
    struct em_engine *e = em_engine_new(&cfg);
    assert_non_null(e);
    drive(e, "OPS SYMBOL sym=ABC tick=0.01");
    return e;
}

static void test_trades_and_totals(void **state)
{
    struct trades t;
    struct em_engine *e = md_engine(&t);
    uint16_t id = em_engine_symbol_id(e, "ABC");
    assert_int_equal(id, 1);
    assert_int_equal(em_engine_symbol_id(e, "XYZ"), 0);
    assert_int_equal(em_engine_nsymbols(e), 1);
    struct em_symbol_md md;
    assert_int_equal(em_engine_symbol_md(e, id, &md), 0);
    assert_string_equal(md.name, "ABC");
    assert_int_equal(md.has_last, 0);
    assert_int_equal(md.trades, 0);
    assert_int_equal(em_engine_symbol_md(e, 2, &md), CORE_ENOTFOUND);
    uint64_t v = md.version;

    drive(e, "S1 NEW cl=s1 sym=ABC side=S qty=10 px=10.01");
    assert_int_equal(em_engine_symbol_md(e, id, &md), 0);
    assert_true(md.version > v); /* its book changed */
    v = md.version;
    drive(e, "S1 NEW cl=bad sym=XYZ side=S qty=10 px=10.01"); /* rejected */
    assert_int_equal(em_engine_symbol_md(e, id, &md), 0);
    assert_int_equal(md.version, v);

    /* a buy takes 4 then the seller's remainder trades with another buy */
    drive(e, "B1 NEW cl=b1 sym=ABC side=B qty=4 px=10.01");
    assert_int_equal(t.n, 1);
    assert_string_equal(t.t[0].sym, "ABC");
    assert_int_equal(t.t[0].sym_id, id);
    assert_int_equal(t.t[0].qty, 4);
    assert_int_equal(t.t[0].px.mant, 1001);
    assert_int_equal(t.t[0].px.dec, 2);
    assert_string_equal(em_engine_gateway_name(e, t.t[0].buy_gw), "B1");
    assert_string_equal(em_engine_gateway_name(e, t.t[0].sell_gw), "S1");
    assert_int_equal(t.t[0].sell_oid, 1);
    assert_int_equal(t.t[0].buy_oid, 2);
    /* reported after both FILLs */
    assert_non_null(strstr((char *)t.events.p, "FILL cl=b1"));
    drive(e, "B2 NEW cl=b2 sym=ABC side=B qty=6 px=10.01");
    assert_int_equal(t.n, 2);
    assert_int_equal(t.t[1].qty, 6);
    assert_int_equal(em_engine_symbol_md(e, id, &md), 0);
    assert_int_equal(md.has_last, 1);
    assert_int_equal(md.last.mant, 1001);
    assert_int_equal(md.last_qty, 6);
    assert_int_equal(md.volume, 10);
    assert_int_equal(md.trades, 2);

    /* a sell aggressor: the resting buy is the buyer */
    drive(e, "B1 NEW cl=b3 sym=ABC side=B qty=1 px=10.00");
    drive(e, "S1 NEW cl=s2 sym=ABC side=S qty=1 px=10.00");
    assert_int_equal(t.n, 3);
    assert_string_equal(em_engine_gateway_name(e, t.t[2].buy_gw), "B1");
    assert_string_equal(em_engine_gateway_name(e, t.t[2].sell_gw), "S1");

    /* a phase change alone changes the version */
    assert_int_equal(em_engine_symbol_md(e, id, &md), 0);
    v = md.version;
    drive(e, "OPS PHASE sym=ABC phase=PREOPEN");
    assert_int_equal(em_engine_symbol_md(e, id, &md), 0);
    assert_true(md.version > v);
    assert_int_equal(md.phase, EM_PHASE_PREOPEN);

    /* the uncross reports its trades too */
    drive(e, "B1 NEW cl=b4 sym=ABC side=B qty=3 px=10.05");
    drive(e, "S1 NEW cl=s3 sym=ABC side=S qty=3 px=10.03");
    assert_int_equal(t.n, 3);
    drive(e, "OPS PHASE sym=ABC phase=CONTINUOUS");
    assert_int_equal(t.n, 4);
    assert_int_equal(t.t[3].qty, 3);
    assert_int_equal(em_engine_symbol_md(e, id, &md), 0);
    assert_int_equal(md.volume, 14);
    assert_int_equal(md.trades, 4);
    free(t.events.p);
    em_engine_free(e);
}

/* The totals survive a snapshot; a version 1 snapshot (before the engine
 * kept them) is still restored, with totals 0 until set. */
static void test_totals_in_snapshots(void **state)
{
    struct trades t;
    struct em_engine *e = md_engine(&t);
    drive(e, "S1 NEW cl=s1 sym=ABC side=S qty=10 px=10.01");
    drive(e, "B1 NEW cl=b1 sym=ABC side=B qty=10 px=10.01");
    struct bytes snap = {0};
    assert_int_equal(em_engine_snapshot(e, snap_write, &snap), 0);
    em_engine_free(e);

    struct bytes ev = {0};
    struct em_engine *r = engine_new(&ev);
    assert_int_equal(em_engine_restore(r, snap.p, snap.len), 0);
    struct em_symbol_md md;
    assert_int_equal(em_engine_symbol_md(r, 1, &md), 0);
    assert_int_equal(md.volume, 10);
    assert_int_equal(md.trades, 1);
    assert_int_equal(md.last_qty, 10);
    em_engine_free(r);

    /* version 1: the same bytes without the 20 bytes of totals, which
     * follow the symbol's fixed part (engine_snapshot.c's layout: header
     * 68, gateways OPS, S1, B1, the symbol count, then 84 bytes for ABC) */
    size_t at = 68 + 4 + (2 + 3) + (2 + 2) + (2 + 2) + 4 + 84;
    assert_true(snap.len > at + 20);
    assert_int_equal(snap.p[68 + 4 + (2 + 3) + (2 + 2) + (2 + 2) + 4 + 1], 'A');
    memmove(snap.p + at, snap.p + at + 20, snap.len - at - 20);
    snap.len -= 20;
    snap.p[8] = 1;
    r = engine_new(&ev);
    assert_int_equal(em_engine_restore(r, snap.p, snap.len), 0);
    assert_int_equal(em_engine_symbol_md(r, 1, &md), 0);
    assert_int_equal(md.trades, 0);
    assert_int_equal(md.has_last, 1); /* the last price was always kept */
    assert_int_equal(em_engine_set_symbol_totals(r, "ABC", 10, 10, 1), 0);
    assert_int_equal(em_engine_set_symbol_totals(r, "XYZ", 1, 1, 1), CORE_ENOTFOUND);
    assert_int_equal(em_engine_symbol_md(r, 1, &md), 0);
    assert_int_equal(md.volume, 10);
    em_engine_free(r);
    /* an unknown version is refused */
    snap.p[8] = 3;
    r = engine_new(&ev);
    assert_int_equal(em_engine_restore(r, snap.p, snap.len), CORE_EPROTO);
    em_engine_free(r);
    free(snap.p);
    free(ev.p);
    free(t.events.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restored_engine_gives_the_same_events),
        cmocka_unit_test(test_truncated_snapshot_is_refused),
        cmocka_unit_test(test_damaged_snapshot_is_refused_or_consistent),
        cmocka_unit_test(test_restore_needs_a_fresh_engine),
        cmocka_unit_test(test_empty_engine),
        cmocka_unit_test(test_write_error_is_returned),
        cmocka_unit_test(test_trades_and_totals),
        cmocka_unit_test(test_totals_in_snapshots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
