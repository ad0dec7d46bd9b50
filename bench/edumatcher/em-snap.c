/*
 * em-snap: what engine snapshots cost at depth (docs/perf.md).
 *
 * Builds an engine holding N resting GTC limit orders (default 1,000,000:
 * buys and sells on one symbol over a few thousand levels each, one in
 * ten an iceberg, from 64 gateways), then measures, printing one
 * `key=value` line each:
 *   build_ms      submitting the N NEW messages (what a journal replay
 *                 spends in the engine, without decoding and reading)
 *   snapshot_ms   em_engine_snapshot into memory; snapshot_bytes its size
 *   restore_ms    em_engine_restore of those bytes into a fresh engine
 * and checks that the restored engine snapshots to the same bytes.
 *
 * With --journal DIR it also writes the same input as an engine journal
 * (the records edumatcher-engine appends: [u8 len][gw][frame]) into DIR,
 * for timing a real process restart with and without a snapshot
 * (bench/edumatcher/snapshot-restart).
 *
 * --churn K then adds K orders that are placed and canceled at once (2K
 * more records, the same books at the end): a journal's length grows with
 * the flow, a snapshot's only with the open orders.
 *
 * Usage: em-snap [--orders N] [--churn K] [--journal DIR]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/proc.h"
#include "core/clock.h"
#include "edumatcher/engine/engine.h"
#include "edumatcher/bus/journal.h"
#include "edumatcher/engine/msg.h"

struct blob {
    unsigned char *p;
    size_t len, cap;
};

static int blob_add(void *ctx, const void *data, size_t len)
{
    struct blob *b = ctx;
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 1u << 20;
        while (cap < b->len + len)
            cap *= 2;
        unsigned char *n = realloc(b->p, cap);
        if (!n)
            return -1;
        b->p = n;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, len);
    b->len += len;
    return 0;
}

static void sink(void *ctx, uint16_t gw, const struct em_msg *ev)
{
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static double ms_since(uint64_t t0)
{
    return (double)(core_now_ns() - t0) / 1e6;
}

/* Append one journal record: [u8 len][gw][frame of m]. */
static void journal_add(struct em_journal *j, const char *gw, const struct em_msg *m)
{
    uint8_t rec[1 + EM_GW_MAX + EM_FRAME_MAX];
    size_t gl = strlen(gw);
    rec[0] = (uint8_t)gl;
    memcpy(rec + 1, gw, gl);
    int n = em_frame_encode(m, rec + 1 + gl, sizeof rec - 1 - gl);
    if (n < 0 || em_journal_append(j, rec, 1 + gl + (size_t)n, NULL) != 0) {
        fprintf(stderr, "em-snap: journal append failed\n");
        exit(1);
    }
}

int main(int argc, char **argv)
{
    static const char usage[] =
        "Usage: em-snap [--orders N] [--churn K] [--journal DIR]\n"
        "\n"
        "Benchmark the engine snapshot: rest N orders (default 1000000), cancel and\n"
        "replace K of them, then time em_engine_snapshot and em_engine_restore (and,\n"
        "with --journal, writing the snapshot durably into a journal in DIR).\n"
        "\n"
        "  -h, --help   print this and exit\n"
        "  --version    print the version and exit\n";
    uint32_t norders = 1000000, churn = 0;
    const char *jdir = NULL;
    int code = core_proc_early("em-snap", usage, argc, argv);
    if (code >= 0)
        return code;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i];
        int64_t v;
        if (strcmp(a, "--orders") && strcmp(a, "--churn") && strcmp(a, "--journal"))
            return core_proc_bad_usage("em-snap", "unknown option '%s'", a);
        if (i + 1 >= argc)
            return core_proc_bad_usage("em-snap", "%s needs a value", a);
        if (!strcmp(a, "--journal")) {
            jdir = argv[i + 1];
            continue;
        }
        if ((code = core_proc_int_arg("em-snap", a, argv[i + 1], 0, UINT32_MAX, &v)) != 0)
            return code;
        if (!strcmp(a, "--orders"))
            norders = (uint32_t)v;
        else
            churn = (uint32_t)v;
    }
    struct em_journal j;
    if (jdir) {
        struct em_journal_opts jo = {.dir = jdir, .fsync = EM_FSYNC_NEVER};
        if (em_journal_open(&j, &jo, NULL, NULL, NULL, NULL) != 0) {
            fprintf(stderr, "em-snap: cannot open a journal in %s\n", jdir);
            return 1;
        }
    }
    struct em_engine_config cfg = {.sink = sink, .orders_hint = norders + 16};
    struct em_engine *e = em_engine_new(&cfg);
    if (!e)
        return 1;
    uint16_t ops = 1, gws[64];
    char names[64][8];
    for (int g = 0; g < 64; g++) {
        snprintf(names[g], sizeof names[g], "G%d", g);
        gws[g] = (uint16_t)em_engine_gateway(e, names[g], strlen(names[g]));
    }
    struct em_msg m;
    memset(&m, 0, sizeof m);
    m.kind = EM_MSG_SYMBOL;
    m.present = EM_BIT(sym) | EM_BIT(tick);
    strcpy(m.sym, "ABC");
    m.tick = (struct em_price){1, 2};
    em_engine_submit(e, ops, &m);
    if (jdir)
        journal_add(&j, EM_OPS_GW, &m);

    uint64_t t0 = core_now_ns();
    for (uint32_t i = 0; i < norders; i++) {
        memset(&m, 0, sizeof m);
        m.kind = EM_MSG_NEW;
        m.present =
            EM_BIT(cl) | EM_BIT(sym) | EM_BIT(side) | EM_BIT(qty) | EM_BIT(px) | EM_BIT(tif);
        snprintf(m.cl, sizeof m.cl, "c%u", i);
        strcpy(m.sym, "ABC");
        int buy = rnd() & 1;
        m.side = buy ? EM_SIDE_BUY : EM_SIDE_SELL;
        m.qty = 1 + (uint32_t)(rnd() % 100);
        /* buys 50.00-89.99, sells 110.00-149.99: nothing crosses */
        int64_t t = (int64_t)(rnd() % 4000);
        m.px = (struct em_price){buy ? 5000 + t : 11000 + t, 2};
        m.tif = EM_TIF_GTC;
        if (rnd() % 10 == 0 && m.qty > 1) {
            m.present |= EM_BIT(peak);
            m.peak = 1 + m.qty / 4;
        }
        int g = (int)(rnd() % 64);
        em_engine_submit(e, gws[g], &m);
        if (jdir)
            journal_add(&j, names[g], &m);
    }
    for (uint32_t i = 0; i < churn; i++) {
        int g = (int)(rnd() % 64);
        memset(&m, 0, sizeof m);
        m.kind = EM_MSG_NEW;
        m.present = EM_BIT(cl) | EM_BIT(sym) | EM_BIT(side) | EM_BIT(qty) | EM_BIT(px);
        snprintf(m.cl, sizeof m.cl, "k%u", i);
        strcpy(m.sym, "ABC");
        m.side = EM_SIDE_BUY;
        m.qty = 1 + (uint32_t)(rnd() % 100);
        m.px = (struct em_price){5000 + (int64_t)(rnd() % 4000), 2};
        em_engine_submit(e, gws[g], &m);
        if (jdir)
            journal_add(&j, names[g], &m);
        m.kind = EM_MSG_CANCEL;
        m.present = EM_BIT(cl);
        em_engine_submit(e, gws[g], &m);
        if (jdir)
            journal_add(&j, names[g], &m);
    }
    double build_ms = ms_since(t0);
    if (jdir)
        em_journal_close(&j);
    struct em_engine_stats st;
    em_engine_stats(e, &st);

    struct blob a = {0}, b = {0};
    t0 = core_now_ns();
    if (em_engine_snapshot(e, blob_add, &a) != 0)
        return 1;
    double snap_ms = ms_since(t0);
    em_engine_free(e);

    struct em_engine *r = em_engine_new(&cfg);
    if (!r)
        return 1;
    t0 = core_now_ns();
    int rc = em_engine_restore(r, a.p, a.len);
    double restore_ms = ms_since(t0);
    if (rc != 0 || em_engine_snapshot(r, blob_add, &b) != 0 || a.len != b.len ||
        memcmp(a.p, b.p, a.len) != 0) {
        fprintf(stderr, "em-snap: the restored engine differs (rc %d)\n", rc);
        return 1;
    }
    printf("open_orders=%llu\n", (unsigned long long)st.open_orders);
    printf("build_ms=%.1f\n", build_ms);
    printf("snapshot_bytes=%zu\n", a.len);
    printf("snapshot_ms=%.1f\n", snap_ms);
    printf("restore_ms=%.1f\n", restore_ms);
    em_engine_free(r);
    free(a.p);
    free(b.p);
    return 0;
}
