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
 *   fix      the same messages as FIX 4.4 (NewOrderSingle, OrderCancel-
 *            Request, OrderCancelReplaceRequest): frame (BodyLength and
 *            CheckSum checked) + decode + the fields to an engine message +
 *            engine + one ExecutionReport built per event (header,
 *            SendingTime, CheckSum), per message. The translation is the
 *            gateway's for these fields (edumatcher/gateway/fix/); the
 *            gateway's order table and session store are not in it.
 *   million  1,000,000 resting GTC orders (and 10,000, for contrast):
 *            memory per order (record size, RSS growth) and the latency
 *            of cancels at that depth.
 *
 * The message stream is generated once by a dry run of the engine itself
 * (it is deterministic), so the timed passes replay valid messages
 * (cancels and replaces of orders that are live) with no bookkeeping.
 *
 * Usage: em-bench [--messages N] [--only mix|text|fix|million] [--callgrind]
 *                 [--spread TICKS]
 *
 * --spread sets how far from the middle GTC orders are placed (default
 * 375 ticks: ~750 levels); beyond EM_BOOK_WIN / 2 = 2048 ticks, levels
 * fall outside the book's tick window, which measures the outlier path.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/proc.h"
#include "core/clock.h"
#include "core/histogram.h"
#include "edumatcher/gateway/alf/alf.h"
#include "edumatcher/engine/book.h"
#include "edumatcher/engine/engine.h"
#include "edumatcher/gateway/fix/fix_codec.h"

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

/* ---- FIX: frame + decode + translate + engine + ExecutionReports ---- */

static char fixout[EM_FIX_MSG_MAX];
static uint64_t fix_seq = 1;

static void fix_sink(void *ctx, uint16_t gw, const struct em_msg *ev)
{
    struct em_fix_out o;
    em_fix_begin(&o, fixout, sizeof fixout, ev->kind == EM_MSG_REJECT ? "9" : "8");
    em_fix_add_cstr(&o, EM_FIX_TAG_SENDERCOMPID, "EDUMATCHER");
    em_fix_add_cstr(&o, EM_FIX_TAG_TARGETCOMPID, "G1");
    em_fix_add_uint(&o, EM_FIX_TAG_MSGSEQNUM, fix_seq++);
    em_fix_add_time(&o, EM_FIX_TAG_SENDINGTIME, 1764590400000000000ull + fix_seq);
    em_fix_add_uint(&o, EM_FIX_TAG_ORDERID, ev->oid);
    em_fix_add_cstr(&o, EM_FIX_TAG_CLORDID, ev->cl);
    em_fix_add_uint(&o, EM_FIX_TAG_EXECID, ev->tid);
    em_fix_add_char(&o, EM_FIX_TAG_EXECTYPE, ev->kind == EM_MSG_FILL ? 'F' : '0');
    em_fix_add_char(&o, EM_FIX_TAG_ORDSTATUS, ev->leaves ? '1' : '2');
    em_fix_add_cstr(&o, EM_FIX_TAG_SYMBOL, "ABC");
    em_fix_add_char(&o, EM_FIX_TAG_SIDE, '1');
    em_fix_add_uint(&o, EM_FIX_TAG_LEAVESQTY, ev->leaves);
    em_fix_add_uint(&o, EM_FIX_TAG_CUMQTY, ev->cum);
    em_fix_add_price(&o, EM_FIX_TAG_AVGPX, ev->px.mant, ev->px.dec);
    if (ev->kind == EM_MSG_FILL) {
        em_fix_add_price(&o, EM_FIX_TAG_LASTPX, ev->px.mant, ev->px.dec);
        em_fix_add_uint(&o, EM_FIX_TAG_LASTQTY, ev->qty);
    }
    em_fix_add_time(&o, EM_FIX_TAG_TRANSACTTIME, 1764590400000000000ull + fix_seq);
    outlen += em_fix_finish(&o);
}

/* A FIX message for b (header of a trader G<gw>). */
static size_t fix_message(const struct bmsg *b, uint64_t seq, char *out, size_t cap)
{
    static const char *const types[EM_MSG__COUNT] = {
        [EM_MSG_NEW] = "D", [EM_MSG_CANCEL] = "F", [EM_MSG_REPLACE] = "G"};
    struct em_fix_out o;
    char sender[8];
    snprintf(sender, sizeof sender, "G%u", b->gw);
    em_fix_begin(&o, out, cap, types[b->kind]);
    em_fix_add_cstr(&o, EM_FIX_TAG_SENDERCOMPID, sender);
    em_fix_add_cstr(&o, EM_FIX_TAG_TARGETCOMPID, "EDUMATCHER");
    em_fix_add_uint(&o, EM_FIX_TAG_MSGSEQNUM, seq);
    em_fix_add_cstr(&o, EM_FIX_TAG_SENDINGTIME, "20261201-12:00:00.000");
    if (b->kind == EM_MSG_NEW) {
        em_fix_add_cstr(&o, EM_FIX_TAG_CLORDID, b->cl);
    } else {
        em_fix_add_cstr(&o, EM_FIX_TAG_CLORDID, "r1");
        em_fix_add_cstr(&o, EM_FIX_TAG_ORIGCLORDID, b->cl);
    }
    em_fix_add_cstr(&o, EM_FIX_TAG_SYMBOL, "ABC");
    em_fix_add_char(&o, EM_FIX_TAG_SIDE, b->side == EM_SIDE_SELL ? '2' : '1');
    if (b->kind != EM_MSG_CANCEL) {
        em_fix_add_uint(&o, EM_FIX_TAG_ORDERQTY, b->qty);
        em_fix_add_char(&o, EM_FIX_TAG_ORDTYPE, '2');
        em_fix_add_price(&o, EM_FIX_TAG_PRICE, b->px, 2);
    }
    if (b->kind == EM_MSG_NEW)
        em_fix_add_char(&o, EM_FIX_TAG_TIMEINFORCE, b->tif == EM_TIF_IOC ? '3' : '1');
    em_fix_add_cstr(&o, EM_FIX_TAG_TRANSACTTIME, "20261201-12:00:00.000");
    return em_fix_finish(&o);
}

/* The gateway's translation of the fields this stream uses. */
static int fix_to_msg(const char *buf, size_t len, struct em_msg *m)
{
    static struct em_fix_msg f;
    size_t n;
    if (em_fix_frame(buf, len, &n) != 0 || em_fix_decode(buf, n, &f) != 0)
        return -1;
    const char *v;
    size_t vl;
    char c;
    memset(m, 0, sizeof *m);
    if (f.type[0] == 'D') {
        m->kind = EM_MSG_NEW;
        if (!em_fix_get(&f, EM_FIX_TAG_CLORDID, &v, &vl) || !em_valid_cl(v, vl))
            return -1;
    } else {
        m->kind = f.type[0] == 'F' ? EM_MSG_CANCEL : EM_MSG_REPLACE;
        if (!em_fix_get(&f, EM_FIX_TAG_ORIGCLORDID, &v, &vl) || !em_valid_cl(v, vl))
            return -1;
    }
    memcpy(m->cl, v, vl);
    m->cl[vl] = '\0';
    m->present = EM_BIT(cl);
    if (m->kind == EM_MSG_CANCEL)
        return 0;
    uint64_t q;
    int64_t mant;
    int dec;
    if (em_fix_get_uint(&f, EM_FIX_TAG_ORDERQTY, &q) != 0 ||
        em_fix_get_price(&f, EM_FIX_TAG_PRICE, &mant, &dec) != 0)
        return -1;
    m->qty = (uint32_t)q;
    m->px.mant = mant;
    m->px.dec = (uint8_t)dec;
    m->present |= EM_BIT(qty) | EM_BIT(px);
    if (m->kind == EM_MSG_REPLACE)
        return 0;
    if (!em_fix_get(&f, EM_FIX_TAG_SYMBOL, &v, &vl) || !em_valid_sym(v, vl) ||
        em_fix_get_char(&f, EM_FIX_TAG_SIDE, &c) != 0)
        return -1;
    memcpy(m->sym, v, vl);
    m->sym[vl] = '\0';
    m->side = c == '2' ? EM_SIDE_SELL : EM_SIDE_BUY;
    m->ord_type = EM_OTYPE_LMT;
    m->tif =
        em_fix_get_char(&f, EM_FIX_TAG_TIMEINFORCE, &c) == 0 && c == '3' ? EM_TIF_IOC : EM_TIF_GTC;
    m->present |= EM_BIT(sym) | EM_BIT(side) | EM_BIT(ord_type) | EM_BIT(tif);
    return em_msg_check(m) == 0 ? 0 : -1;
}

static void bench_fix(size_t n)
{
    char *text = malloc(n * 256);
    size_t *off = malloc((n + 1) * sizeof *off);
    if (!text || !off)
        exit(1);
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        off[i] = len;
        len += fix_message(&msgs[i], i + 2, text + len, 256);
    }
    off[n] = len;
    size_t warm = n / 5, bad = 0;
    struct em_engine *e = fresh(fix_sink, NULL);
    struct em_msg m;
    for (size_t i = 0; i < warm; i++)
        if (fix_to_msg(text + off[i], off[i + 1] - off[i], &m) == 0)
            em_engine_submit(e, gws[msgs[i].gw], &m);
    core_hist_reset(&hist);
    uint64_t t0 = core_now_ns();
    for (size_t i = warm; i < n; i++) {
        uint64_t a = core_now_ns();
        if (fix_to_msg(text + off[i], off[i + 1] - off[i], &m) == 0)
            em_engine_submit(e, gws[msgs[i].gw], &m);
        else
            bad++;
        core_hist_record(&hist, core_now_ns() - a);
        outlen = 0;
    }
    uint64_t t1 = core_now_ns();
    em_engine_free(e);
    free(text);
    free(off);
    if (bad) {
        fprintf(stderr, "em-bench: %zu FIX messages did not translate\n", bad);
        exit(1);
    }
    printf("fix: msgs=%zu msgs_per_s=%.0f ", n - warm,
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
    static const char usage[] =
        "Usage: em-bench [--messages N] [--only mix|text|fix|million] [--spread T] [--callgrind]\n"
        "\n"
        "In-process micro-benchmark of the matching engine: N generated messages\n"
        "(default 2000000) through em_engine_submit, the ALF text path, the FIX path,\n"
        "and a book of a\n"
        "million orders; --spread T sets the price spread in ticks; --callgrind runs\n"
        "the passes that bench/edumatcher/compare counts instructions of.\n"
        "\n"
        "  -h, --help   print this and exit\n"
        "  --version    print the version and exit\n";
    size_t n = 2000000;
    const char *only = NULL;
    int code = core_proc_early("em-bench", usage, argc, argv);
    if (code >= 0)
        return code;
    for (int i = 1; i < argc; i++) {
        int64_t v;
        const char *a = argv[i];
        if ((!strcmp(a, "--messages") || !strcmp(a, "--only") || !strcmp(a, "--spread")) &&
            i + 1 >= argc)
            return core_proc_bad_usage("em-bench", "%s needs a value", a);
        if (!strcmp(a, "--messages")) {
            if ((code = core_proc_int_arg("em-bench", a, argv[++i], 1, INT64_MAX, &v)) != 0)
                return code;
            n = (size_t)v;
        } else if (!strcmp(a, "--only")) {
            only = argv[++i];
            if (strcmp(only, "mix") && strcmp(only, "text") && strcmp(only, "fix") &&
                strcmp(only, "million"))
                return core_proc_bad_usage("em-bench",
                                           "--only is mix, text, fix or million, not '%s'", only);
        } else if (!strcmp(a, "--spread")) {
            if ((code = core_proc_int_arg("em-bench", a, argv[++i], 1, 1000000, &v)) != 0)
                return code;
            spread = v;
        } else if (!strcmp(a, "--callgrind")) {
            only = "callgrind";
        } else {
            return core_proc_bad_usage("em-bench", "unknown option '%s'", a);
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
    if (!only || !strcmp(only, "fix"))
        bench_fix(n);
    if (!only || !strcmp(only, "million")) {
        bench_depth(10000); /* the same cancel at a shallow book, for contrast */
        bench_depth(1000000);
    }
    return 0;
}
