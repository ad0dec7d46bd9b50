/*
 * em-bench: the EduMatcher engine alone, in process.
 *
 * Three measurements, each printed as one `key=value` line that
 * bench/edumatcher/compare collects over several rounds:
 *
 *   mix      the exchange-core style mix on one book (mostly REPLACE that
 *            moves an order a few ticks, GTC placements, IOCs that trade,
 *            cancels; about 1,000 resting orders over about 750 levels),
 *            warmed up. Throughput from an untimed pass; per-message
 *            latency percentiles (core/histogram.h) from a timed pass.
 *   text     the same messages as ALF lines: parse + engine + format of
 *            every event, per message.
 *   million  1,000,000 resting GTC orders (and 10,000, for contrast):
 *            memory per order (record size, RSS growth) and the latency
 *            of cancels at that depth.
 *
 * The message stream is generated once by a dry run of the engine itself
 * (it is deterministic), so the timed passes replay valid messages
 * (cancels and replaces of orders that are live) with no bookkeeping.
 *
 * Usage: em-bench [--messages N] [--only mix|text|million] [--callgrind]
 *                 [--spread TICKS]
 *
 * --spread sets how far from the middle GTC orders are placed (default
 * 375 ticks: ~750 levels); beyond EM_BOOK_WIN / 2 = 2048 ticks, levels
 * fall outside the book's tick window, which measures the outlier path.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/histogram.h"
#include "edumatcher/gateway/alf/alf.h"
#include "edumatcher/engine/book.h"
#include "edumatcher/engine/engine.h"

#define MID     10000 /* ticks: 100.00 with tick 0.01 */
#define RESTING 1000
#define NGW     8

/* A compact message: the timed loop turns it into a struct em_msg by
 * setting a handful of fields of a per-kind template. */
struct bmsg {
    uint8_t kind, side, tif;
    uint16_t gw;
    uint32_t qty;
    int64_t px; /* ticks */
    char cl[12];
};

static struct bmsg *msgs;
static size_t nmsgs;

static uint64_t rng = 88172645463325252ull;
static int64_t spread = 375; /* GTC prices: MID ± 1..spread ticks */
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* ---- the dry run that generates the stream ---- */

struct slot {
    uint8_t side;
    uint16_t gw;
    int64_t px;
    uint32_t qty;
};
static struct slot *slots; /* by order number k (cl "o<k>") */
static uint32_t *live, *pos, nlive;
static uint32_t next_k;

static uint32_t cl_num(const char *cl)
{
    return (uint32_t)strtoul(cl + 1, NULL, 10);
}

static void live_add(uint32_t k)
{
    pos[k] = nlive;
    live[nlive++] = k;
}

static void live_del(uint32_t k)
{
    uint32_t i = pos[k], last = live[--nlive];
    live[i] = last;
    pos[last] = i;
    pos[k] = UINT32_MAX;
}

static void gen_sink(void *ctx, uint16_t gw, const struct em_msg *ev)
{
    if (ev->kind == EM_MSG_ACK) {
        live_add(cl_num(ev->cl));
    } else if ((ev->kind == EM_MSG_FILL && ev->leaves == 0) || ev->kind == EM_MSG_CANCELED) {
        uint32_t k = cl_num(ev->cl);
        if (pos[k] != UINT32_MAX)
            live_del(k);
    }
}

static struct em_msg tmpl[EM_MSG__COUNT];

static void templates(void)
{
    struct em_msg *m = &tmpl[EM_MSG_NEW];
    m->kind = EM_MSG_NEW;
    m->present = EM_BIT(cl) | EM_BIT(sym) | EM_BIT(side) | EM_BIT(qty) | EM_BIT(px) | EM_BIT(tif) |
                 EM_BIT(ord_type);
    strcpy(m->sym, "ABC");
    m->ord_type = EM_OTYPE_LMT;
    m = &tmpl[EM_MSG_CANCEL];
    m->kind = EM_MSG_CANCEL;
    m->present = EM_BIT(cl);
    m = &tmpl[EM_MSG_REPLACE];
    m->kind = EM_MSG_REPLACE;
    m->present = EM_BIT(cl) | EM_BIT(qty) | EM_BIT(px);
}

static uint16_t gws[NGW];

static void setup_engine(struct em_engine *e)
{
    struct em_msg m;
    const char *line = "SYMBOL sym=ABC tick=0.01";
    em_alf_parse(line, strlen(line), &m);
    em_engine_submit(e, (uint16_t)em_engine_gateway(e, "OPS", 3), &m);
    for (int g = 0; g < NGW; g++) {
        char name[8];
        sprintf(name, "G%d", g);
        gws[g] = (uint16_t)em_engine_gateway(e, name, strlen(name));
    }
}

static inline struct em_msg *to_msg(const struct bmsg *b)
{
    struct em_msg *m = &tmpl[b->kind];
    memcpy(m->cl, b->cl, sizeof b->cl);
    m->side = b->side;
    m->qty = b->qty;
    m->tif = b->tif;
    m->px.mant = b->px; /* tick 0.01: mantissa in hundredths = ticks */
    m->px.dec = 2;
    return m;
}

static struct bmsg make_new(uint8_t tif)
{
    struct bmsg b = {.kind = EM_MSG_NEW, .tif = tif};
    uint32_t k = next_k++;
    b.side = rnd() & 1 ? EM_SIDE_BUY : EM_SIDE_SELL;
    b.gw = (uint16_t)(k % NGW);
    b.qty = 1 + (uint32_t)(rnd() % 100);
    int64_t off = tif == EM_TIF_IOC ? -2 : 1 + (int64_t)(rnd() % (uint64_t)spread);
    b.px = b.side == EM_SIDE_BUY ? MID - off : MID + off;
    sprintf(b.cl, "o%u", k);
    slots[k] = (struct slot){b.side, b.gw, b.px, b.qty};
    return b;
}

/* Generate n messages of the mix, running them through engine e. */
static void generate(struct em_engine *e, size_t n)
{
    msgs = calloc(n, sizeof *msgs);
    size_t cap = n + RESTING * 2;
    slots = calloc(cap, sizeof *slots);
    live = calloc(cap, sizeof *live);
    pos = malloc(cap * sizeof *pos);
    if (!msgs || !slots || !live || !pos) {
        fprintf(stderr, "em-bench: out of memory\n");
        exit(1);
    }
    memset(pos, 0xff, cap * sizeof *pos);
    for (nmsgs = 0; nmsgs < n; nmsgs++) {
        struct bmsg b;
        unsigned r = (unsigned)(rnd() % 100);
        /* steer the resting count towards RESTING */
        unsigned gtc = nlive < RESTING ? 25 : 8;
        if (nlive < 10 || r < gtc) {
            b = make_new(EM_TIF_GTC);
        } else if (r < gtc + 9) {
            b = make_new(EM_TIF_IOC);
        } else if (r < gtc + 9 + (nlive > RESTING ? 20 : 8)) {
            uint32_t k = live[rnd() % nlive];
            b = (struct bmsg){.kind = EM_MSG_CANCEL, .gw = slots[k].gw};
            sprintf(b.cl, "o%u", k);
        } else {
            /* move: a few ticks either way, staying on its side of MID */
            uint32_t k = live[rnd() % nlive];
            struct slot *s = &slots[k];
            int64_t px = s->px + (int64_t)(rnd() % 11) - 5;
            if (s->side == EM_SIDE_BUY && px >= MID)
                px = MID - 1;
            if (s->side == EM_SIDE_SELL && px <= MID)
                px = MID + 1;
            s->px = px;
            b = (struct bmsg){.kind = EM_MSG_REPLACE, .gw = s->gw, .px = px, .qty = s->qty};
            sprintf(b.cl, "o%u", k);
        }
        msgs[nmsgs] = b;
        em_engine_submit(e, gws[b.gw], to_msg(&b));
    }
}

static void null_sink(void *ctx, uint16_t gw, const struct em_msg *ev)
{
    (*(uint64_t *)ctx)++;
}

static void print_hist(const char *name, const struct core_hist *h)
{
    printf("%s_p50_ns=%llu %s_p99_ns=%llu %s_p999_ns=%llu %s_max_ns=%llu", name,
           (unsigned long long)core_hist_percentile(h, 50), name,
           (unsigned long long)core_hist_percentile(h, 99), name,
           (unsigned long long)core_hist_percentile(h, 99.9), name, (unsigned long long)h->max);
}

static struct core_hist hist;

/* A fresh engine brought to the state the stream starts from: replay the
 * first `warm` messages untimed. */
static struct em_engine *fresh(em_sink_fn sink, void *ctx)
{
    struct em_engine_config cfg = {.sink = sink, .sink_ctx = ctx};
    struct em_engine *e = em_engine_new(&cfg);
    setup_engine(e);
    return e;
}

static void bench_mix(size_t n)
{
    uint64_t events = 0;
    size_t warm = n / 5;
    /* throughput: no clock reads inside the loop */
    struct em_engine *e = fresh(null_sink, &events);
    for (size_t i = 0; i < warm; i++)
        em_engine_submit(e, gws[msgs[i].gw], to_msg(&msgs[i]));
    events = 0;
    uint64_t t0 = core_now_ns();
    for (size_t i = warm; i < n; i++)
        em_engine_submit(e, gws[msgs[i].gw], to_msg(&msgs[i]));
    uint64_t t1 = core_now_ns();
    struct em_engine_stats st;
    em_engine_stats(e, &st);
    double secs = (double)(t1 - t0) / 1e9, rate = (double)(n - warm) / secs;
    em_engine_free(e);

    /* latency: each message timed on its own (includes ~2 clock reads) */
    e = fresh(null_sink, &events);
    for (size_t i = 0; i < warm; i++)
        em_engine_submit(e, gws[msgs[i].gw], to_msg(&msgs[i]));
    core_hist_reset(&hist);
    for (size_t i = warm; i < n; i++) {
        struct em_msg *m = to_msg(&msgs[i]);
        uint64_t a = core_now_ns();
        em_engine_submit(e, gws[msgs[i].gw], m);
        core_hist_record(&hist, core_now_ns() - a);
    }
    em_engine_free(e);
    printf("mix: msgs=%zu msgs_per_s=%.0f ns_per_msg=%.1f events_per_msg=%.2f "
           "resting_end=%llu ",
           n - warm, rate, 1e9 / rate, (double)events / (double)(n - warm),
           (unsigned long long)st.open_orders);
    print_hist("lat", &hist);
    printf(" python_ratio_latency=%.0f python_ratio_throughput=%.0f\n",
           22000.0 / (double)core_hist_percentile(&hist, 50), rate / 45000.0);
}

/* ---- parse + engine + format ---- */

static char outbuf[1 << 16];
static size_t outlen;

static void format_sink(void *ctx, uint16_t gw, const struct em_msg *ev)
{
    if (outlen > sizeof outbuf - EM_ALF_FORMAT_MAX - 32)
        outlen = 0;
    outlen += em_alf_format(ev, outbuf + outlen);
    outbuf[outlen++] = '\n';
}

static void bench_text(size_t n)
{
    /* every message as an ALF line */
    char *text = malloc(n * 64);
    size_t *off = malloc((n + 1) * sizeof *off);
    if (!text || !off)
        exit(1);
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        off[i] = len;
        len += em_alf_format(to_msg(&msgs[i]), text + len);
    }
    off[n] = len;
    size_t warm = n / 5;
    struct em_engine *e = fresh(format_sink, NULL);
    struct em_msg m;
    for (size_t i = 0; i < warm; i++) {
        em_alf_parse(text + off[i], off[i + 1] - off[i], &m);
        em_engine_submit(e, gws[msgs[i].gw], &m);
    }
    core_hist_reset(&hist);
    uint64_t t0 = core_now_ns();
    for (size_t i = warm; i < n; i++) {
        uint64_t a = core_now_ns();
        if (em_alf_parse(text + off[i], off[i + 1] - off[i], &m) == 0)
            em_engine_submit(e, gws[msgs[i].gw], &m);
        core_hist_record(&hist, core_now_ns() - a);
    }
    uint64_t t1 = core_now_ns();
    em_engine_free(e);
    free(text);
    free(off);
    printf("text: msgs=%zu msgs_per_s=%.0f ", n - warm,
           (double)(n - warm) / ((double)(t1 - t0) / 1e9));
    print_hist("lat", &hist);
    printf(" python_ratio_latency=%.0f\n", 22000.0 / (double)core_hist_percentile(&hist, 50));
}

/* ---- one million resting orders ---- */

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * 4;
}

static uint32_t order[1000000];

/* n resting orders, then cancels of random ones (each timed). */
static void bench_depth(uint32_t N)
{
    uint32_t CANCELS = N / 5;
    uint64_t events = 0;
    long rss0 = rss_kb();
    /* pools sized at start, as a server would */
    struct em_engine_config cfg = {
        .sink = null_sink, .sink_ctx = &events, .orders_hint = N, .levels_hint = 4096};
    struct em_engine *e = em_engine_new(&cfg);
    setup_engine(e);
    struct bmsg b = {.kind = EM_MSG_NEW, .tif = EM_TIF_GTC};
    uint64_t t0 = core_now_ns();
    for (uint32_t k = 0; k < N; k++) {
        b.side = k & 1 ? EM_SIDE_BUY : EM_SIDE_SELL;
        b.gw = (uint16_t)(k % NGW);
        b.qty = 1 + k % 100;
        int64_t off = 1 + (int64_t)(k / 2 % 1500); /* 3,000 levels in all */
        b.px = b.side == EM_SIDE_BUY ? MID - off : MID + off;
        sprintf(b.cl, "m%u", k);
        em_engine_submit(e, gws[b.gw], to_msg(&b));
    }
    uint64_t t1 = core_now_ns();
    struct em_engine_stats st;
    em_engine_stats(e, &st);
    long rss1 = rss_kb();
    /* cancel random resting orders, each timed */
    core_hist_reset(&hist);
    for (uint32_t i = 0; i < N; i++)
        order[i] = i;
    for (uint32_t i = N - 1; i > 0; i--) {
        uint32_t j = (uint32_t)(rnd() % (i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    struct em_msg *m = &tmpl[EM_MSG_CANCEL];
    for (uint32_t i = 0; i < CANCELS; i++) {
        uint32_t k = order[i];
        snprintf(m->cl, sizeof m->cl, "m%u", k);
        uint64_t a = core_now_ns();
        em_engine_submit(e, gws[k % NGW], m);
        core_hist_record(&hist, core_now_ns() - a);
    }
    em_engine_free(e);
    printf("depth: resting=%llu insert_ns_per_order=%.0f order_record_bytes=%zu "
           "rss_bytes_per_order=%.0f ",
           (unsigned long long)st.open_orders, (double)(t1 - t0) / N, sizeof(struct em_order),
           (double)(rss1 - rss0) * 1024.0 / N);
    print_hist("cancel", &hist);
    printf("\n");
}

/* For callgrind (--toggle-collect=replay_pass / replay_text_pass): one
 * plain pass over the stream, engine alone / parse + engine + format. */
__attribute__((noinline)) static void replay_pass(struct em_engine *e, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        em_engine_submit(e, gws[msgs[i].gw], to_msg(&msgs[i]));
}

__attribute__((noinline)) static void replay_text_pass(struct em_engine *e, const char *text,
                                                       const size_t *off, size_t from, size_t to)
{
    struct em_msg m;
    for (size_t i = from; i < to; i++)
        if (em_alf_parse(text + off[i], off[i + 1] - off[i], &m) == 0)
            em_engine_submit(e, gws[msgs[i].gw], &m);
}

static void callgrind_passes(size_t n)
{
    uint64_t events = 0;
    size_t warm = n / 5;
    struct em_engine *e = fresh(null_sink, &events);
    for (size_t i = 0; i < warm; i++)
        em_engine_submit(e, gws[msgs[i].gw], to_msg(&msgs[i]));
    replay_pass(e, warm, n);
    em_engine_free(e);
    char *text = malloc(n * 64);
    size_t *off = malloc((n + 1) * sizeof *off);
    if (!text || !off)
        exit(1);
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        off[i] = len;
        len += em_alf_format(to_msg(&msgs[i]), text + len);
    }
    off[n] = len;
    e = fresh(format_sink, NULL);
    replay_text_pass(e, text, off, 0, warm);
    replay_text_pass(e, text, off, warm, n);
    em_engine_free(e);
    free(text);
    free(off);
    printf("callgrind: messages_per_pass=%zu (the second replay_text_pass call is the timed one)\n",
           n - warm);
}

int main(int argc, char **argv)
{
    size_t n = 2000000;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--messages") && i + 1 < argc)
            n = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--spread") && i + 1 < argc)
            spread = strtoll(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--callgrind"))
            only = "callgrind";
        else {
            fprintf(stderr, "usage: em-bench [--messages N] [--only mix|text|million] [--spread T] "
                            "[--callgrind]\n");
            return 2;
        }
    }
    templates();
    if (!only || strcmp(only, "million") != 0) {
        struct em_engine_config cfg = {.sink = gen_sink};
        struct em_engine *e = em_engine_new(&cfg);
        setup_engine(e);
        generate(e, n);
        em_engine_free(e);
    }
    if (only && !strcmp(only, "callgrind")) {
        callgrind_passes(n);
        return 0;
    }
    if (!only || !strcmp(only, "mix"))
        bench_mix(n);
    if (!only || !strcmp(only, "text"))
        bench_text(n);
    if (!only || !strcmp(only, "million")) {
        bench_depth(10000); /* the same cancel at a shallow book, for contrast */
        bench_depth(1000000);
    }
    return 0;
}
