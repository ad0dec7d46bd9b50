/*
 * em-load: an ALF load generator for an EduMatcher gateway.
 *
 * Opens N trader connections (each `LOGIN gw=<prefix><i>` first), then
 * sends a realistic order mix and measures every request's round trip
 * into a preallocated core_hist:
 *
 *   open loop  (--rate R): requests are scheduled at fixed intervals over
 *              all connections; latency is measured from the *scheduled*
 *              send time, so a stalled server is not hidden by a stalled
 *              client (coordinated omission).
 *   closed loop (--rate 0): each connection keeps --depth requests in
 *              flight and sends the next when a reply arrives; reports the
 *              maximum throughput.
 *
 * Which reply ends a request: every request gets exactly one direct reply
 * on its own connection, in request order (ALF §4–5: a NEW's ACK or REJECT,
 * a CANCEL's CANCELED reason=USER or REJECT). Other lines (FILLs of resting
 * orders, IOC/MKT remainders, TRIGGERED) are counted but end nothing. So a
 * connection needs only a FIFO of send times, no per-order state that grows.
 *
 * Order mix per request: 55 % passive limit (1–10 ticks behind the mid),
 * 20 % aggressive limit (crossing by up to 3 ticks), 5 % market IOC,
 * 20 % cancel of one of the connection's recent orders (when it has one).
 * Quantities 1–10 lots. The mid walks randomly; the random generator is
 * seeded (--seed), so a run is repeatable given the same server.
 *
 * --proto fix sends the same mix as FIX 4.4 to edumatcher-fix (docs/fix.md):
 * Logon (SenderCompID <prefix><n>, ResetSeqNumFlag=Y), NewOrderSingle and
 * OrderCancelRequest; the direct replies are the ExecutionReport New (or
 * Rejected) of a NewOrderSingle and the ExecutionReport Canceled (with
 * OrigClOrdID) or the OrderCancelReject of a cancel, in request order as
 * with ALF, so the two gateways are timed on the same requests.
 */
#include "core/proc.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "core/histogram.h"
#include "edumatcher/gateway/fix/fix_codec.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

static char host[CORE_OPT_STRLEN] = "127.0.0.1";
static int64_t port = 9001;
static int64_t nconns = 4;
static int64_t rate = 10000;
static int64_t depth = 16;
static int64_t duration_s = 10;
static int64_t warmup_s = 2;
static int64_t seed = 1;
static char symbols[CORE_OPT_STRLEN] = "ABC";
static char gw_prefix[CORE_OPT_STRLEN] = "LOAD";
static char mid_px[CORE_OPT_STRLEN] = "100.00";
static char proto[CORE_OPT_STRLEN] = "alf";
static char comp_id[CORE_OPT_STRLEN] = "EDUMATCHER";

static const struct core_option options[] = {
    {"host", CORE_OPT_STRING, host, 0, 0, NULL, 0,
     "gateway host: a name or an IPv4 or IPv6 address"},
    {"port", CORE_OPT_INT, &port, 1, 65535, NULL, 0, "gateway port"},
    {"conns", CORE_OPT_INT, &nconns, 1, 1024, NULL, 0, "trader connections"},
    {"rate", CORE_OPT_INT, &rate, 0, 10000000, NULL, 0,
     "requests per second over all connections (0: closed loop)"},
    {"depth", CORE_OPT_INT, &depth, 1, 1024, NULL, 0, "closed loop: requests in flight per conn"},
    {"duration", CORE_OPT_INT, &duration_s, 1, 3600, NULL, 0, "measured seconds"},
    {"warmup", CORE_OPT_INT, &warmup_s, 0, 600, NULL, 0, "seconds before measuring"},
    {"seed", CORE_OPT_INT, &seed, 0, INT64_MAX, NULL, 0, "random seed"},
    {"symbols", CORE_OPT_STRING, symbols, 0, 0, NULL, 0, "comma-separated symbols"},
    {"gw-prefix", CORE_OPT_STRING, gw_prefix, 0, 0, NULL, 0, "gateway ids are <prefix><n>"},
    {"mid", CORE_OPT_STRING, mid_px, 0, 0, NULL, 0, "starting mid price (2 decimals)"},
    {"proto", CORE_OPT_STRING, proto, 0, 0, NULL, 0, "alf | fix"},
    {"comp-id", CORE_OPT_STRING, comp_id, 0, 0, NULL, 0, "fix: the gateway's CompID"},
    {NULL, 0, NULL, 0, 0, NULL, 0, NULL},
};

#define FIFO   4096 /* requests in flight per connection, at most */
#define RECENT 64   /* recent order ids kept for cancels */
#define MAXSYM 16

struct conn {
    int fd;
    int idx;
    bool logged_in;
    uint64_t next_cl;
    uint64_t fix_seq; /* fix: our next MsgSeqNum */
    char gw[CORE_OPT_STRLEN + 16];
    /* send times of requests awaiting their direct reply */
    uint64_t fifo[FIFO];
    unsigned head, tail;
    uint64_t recent[RECENT]; /* cl numbers of recent NEW orders */
    unsigned nrecent;
    char in[65536];
    size_t in_len;
    char out[65536];
    size_t out_len;
};

static struct {
    struct conn *c;
    int n;
    int epfd;
    uint64_t rng;
    char sym[MAXSYM][16];
    int nsym;
    int64_t mid[MAXSYM]; /* in ticks (hundredths) */
    bool measuring;
    struct core_hist hist;
    uint64_t sent, replies, rejects, fills, other, overflow;
    uint64_t reject_reasons[16];
    bool fix;
} L;

static uint64_t rnd(void)
{
    /* xorshift64* */
    L.rng ^= L.rng >> 12;
    L.rng ^= L.rng << 25;
    L.rng ^= L.rng >> 27;
    return L.rng * 2685821657736338717ull;
}

static void die(const char *what)
{
    fprintf(stderr, "em-load: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void flush_out(struct conn *c)
{
    size_t off = 0;
    while (off < c->out_len) {
        ssize_t w = write(c->fd, c->out + off, c->out_len - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                break;
            die("write");
        }
        off += (size_t)w;
    }
    memmove(c->out, c->out + off, c->out_len - off);
    c->out_len -= off;
}

static void queue_line(struct conn *c, const char *line, int n)
{
    if (c->out_len + (size_t)n > sizeof c->out)
        flush_out(c);
    if (c->out_len + (size_t)n > sizeof c->out) {
        L.overflow++;
        return;
    }
    memcpy(c->out + c->out_len, line, (size_t)n);
    c->out_len += (size_t)n;
}

static unsigned in_flight(const struct conn *c)
{
    return c->tail - c->head;
}

/* ---- FIX ---- */

static struct em_fix_out *fix_begin(struct conn *c, char *buf, size_t cap, const char *type)
{
    static struct em_fix_out o;
    em_fix_begin(&o, buf, cap, type);
    em_fix_add_cstr(&o, EM_FIX_TAG_SENDERCOMPID, c->gw);
    em_fix_add_cstr(&o, EM_FIX_TAG_TARGETCOMPID, comp_id);
    em_fix_add_uint(&o, EM_FIX_TAG_MSGSEQNUM, c->fix_seq++);
    em_fix_add_time(&o, EM_FIX_TAG_SENDINGTIME, (uint64_t)core_wall_ms() * 1000000u);
    return &o;
}

/* The mix of send_request as one FIX message in buf; its length. */
static int fix_request(struct conn *c, char *buf, size_t cap, unsigned s, uint64_t r)
{
    char id[32];
    struct em_fix_out *o;
    if (r < 20 && c->nrecent > 0) {
        uint64_t cl = c->recent[rnd() % c->nrecent];
        o = fix_begin(c, buf, cap, "F");
        snprintf(id, sizeof id, "x%" PRIu64, ++c->next_cl);
        em_fix_add_cstr(o, EM_FIX_TAG_CLORDID, id);
        snprintf(id, sizeof id, "c%" PRIu64, cl);
        em_fix_add_cstr(o, EM_FIX_TAG_ORIGCLORDID, id);
        em_fix_add_cstr(o, EM_FIX_TAG_SYMBOL, L.sym[s]);
        em_fix_add_char(o, EM_FIX_TAG_SIDE, '1');
    } else {
        bool buy = rnd() & 1;
        uint64_t qty = rnd() % 10 + 1;
        uint64_t cl = ++c->next_cl;
        c->recent[c->nrecent < RECENT ? c->nrecent++ : (unsigned)(rnd() % RECENT)] = cl;
        o = fix_begin(c, buf, cap, "D");
        snprintf(id, sizeof id, "c%" PRIu64, cl);
        em_fix_add_cstr(o, EM_FIX_TAG_CLORDID, id);
        em_fix_add_cstr(o, EM_FIX_TAG_SYMBOL, L.sym[s]);
        em_fix_add_char(o, EM_FIX_TAG_SIDE, buy ? '1' : '2');
        em_fix_add_uint(o, EM_FIX_TAG_ORDERQTY, qty);
        if (r < 25) {
            em_fix_add_char(o, EM_FIX_TAG_ORDTYPE, '1');
            em_fix_add_char(o, EM_FIX_TAG_TIMEINFORCE, '3');
        } else {
            int64_t off = r < 45 ? -(int64_t)(rnd() % 4) : (int64_t)(rnd() % 10) + 1;
            int64_t px = buy ? L.mid[s] - off : L.mid[s] + off;
            em_fix_add_char(o, EM_FIX_TAG_ORDTYPE, '2');
            em_fix_add_price(o, EM_FIX_TAG_PRICE, px, 2);
        }
        em_fix_add_time(o, EM_FIX_TAG_TRANSACTTIME, (uint64_t)core_wall_ms() * 1000000u);
    }
    return (int)em_fix_finish(o);
}

/* Queue one request on c, remembering t_sched as its send time. */
static bool send_request(struct conn *c, uint64_t t_sched)
{
    if (in_flight(c) >= FIFO) {
        L.overflow++;
        return false;
    }
    char line[512];
    int n;
    unsigned s = (unsigned)(rnd() % (uint64_t)L.nsym);
    uint64_t r = rnd() % 100;
    /* random walk of the mid, by at most a tick */
    L.mid[s] += (int64_t)(rnd() % 3) - 1;
    if (L.mid[s] < 1000)
        L.mid[s] = 1000;
    if (L.fix)
        n = fix_request(c, line, sizeof line, s, r);
    else if (r < 20 && c->nrecent > 0) {
        uint64_t cl = c->recent[rnd() % c->nrecent];
        n = snprintf(line, sizeof line, "CANCEL cl=c%" PRIu64 "\n", cl);
    } else {
        bool buy = rnd() & 1;
        int64_t qty = (int64_t)(rnd() % 10) + 1;
        uint64_t cl = ++c->next_cl;
        c->recent[c->nrecent < RECENT ? c->nrecent++ : (unsigned)(rnd() % RECENT)] = cl;
        if (r < 25) {
            n = snprintf(line, sizeof line,
                         "NEW cl=c%" PRIu64 " sym=%s side=%c qty=%" PRId64 " type=MKT tif=IOC\n",
                         cl, L.sym[s], buy ? 'B' : 'S', qty);
        } else {
            int64_t off = r < 45 ? -(int64_t)(rnd() % 4) : (int64_t)(rnd() % 10) + 1;
            int64_t px = buy ? L.mid[s] - off : L.mid[s] + off;
            n = snprintf(line, sizeof line,
                         "NEW cl=c%" PRIu64 " sym=%s side=%c qty=%" PRId64 " px=%" PRId64
                         ".%02" PRId64 "\n",
                         cl, L.sym[s], buy ? 'B' : 'S', qty, px / 100, px % 100);
        }
    }
    queue_line(c, line, n);
    c->fifo[c->tail++ % FIFO] = t_sched;
    L.sent++;
    return true;
}

static const char *const reasons[] = {
    "SYNTAX",        "MISSING_FIELD", "BAD_VALUE",     "UNKNOWN_SYMBOL",  "DUPLICATE_ID",
    "UNKNOWN_ORDER", "PHASE",         "HALTED",        "COLLAR",          "AUTH",
    "NOT_LOGGED_IN", "RATE_LIMIT",    "LINE_TOO_LONG", "GATEWAY_DISABLED"};

static void count_reject(const char *line, size_t len)
{
    const char *r = memmem(line, len, "reason=", 7);
    if (!r)
        return;
    r += 7;
    size_t rl = (size_t)(line + len - r);
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if (strlen(reasons[i]) == rl && memcmp(reasons[i], r, rl) == 0)
            L.reject_reasons[i]++;
}

static bool starts(const char *line, size_t len, const char *p)
{
    size_t n = strlen(p);
    return len >= n && memcmp(line, p, n) == 0;
}

/* One reply line: end the oldest request if it is a direct reply. */
static void on_line(struct conn *c, const char *line, size_t len, uint64_t now)
{
    bool direct = false;
    if (starts(line, len, "ACK ")) {
        direct = true;
    } else if (starts(line, len, "REJECT ")) {
        direct = true;
        L.rejects++;
        count_reject(line, len);
    } else if (starts(line, len, "CANCELED ")) {
        direct = memmem(line, len, "reason=USER", 11) != NULL;
    } else if (starts(line, len, "FILL ")) {
        L.fills++;
    } else if (starts(line, len, "LOGGEDIN")) {
        c->logged_in = true;
        return;
    } else {
        L.other++;
    }
    if (!direct || in_flight(c) == 0)
        return;
    uint64_t t0 = c->fifo[c->head++ % FIFO];
    L.replies++;
    if (L.measuring && now >= t0)
        core_hist_record(&L.hist, now - t0);
}

/* One FIX message: as on_line, by ExecType / MsgType. */
static void on_fix_message(struct conn *c, const char *buf, size_t len, uint64_t now)
{
    static struct em_fix_msg m;
    if (em_fix_decode(buf, len, &m) != 0)
        return;
    bool direct = false;
    char et = 0;
    const char *v;
    size_t vl;
    if (!strcmp(m.type, "A")) {
        c->logged_in = true;
        return;
    } else if (!strcmp(m.type, "8") && em_fix_get_char(&m, EM_FIX_TAG_EXECTYPE, &et) == 0) {
        if (et == '0')
            direct = true;
        else if (et == '8') {
            direct = true;
            L.rejects++;
        } else if (et == '4')
            direct = em_fix_get(&m, EM_FIX_TAG_ORIGCLORDID, &v, &vl);
        else if (et == 'F')
            L.fills++;
        else
            L.other++;
    } else if (!strcmp(m.type, "9")) {
        direct = true;
        L.rejects++;
        L.reject_reasons[5]++; /* UNKNOWN_ORDER: a cancel of a finished order */
    } else {
        L.other++;
    }
    if (!direct || in_flight(c) == 0)
        return;
    uint64_t t0 = c->fifo[c->head++ % FIFO];
    L.replies++;
    if (L.measuring && now >= t0)
        core_hist_record(&L.hist, now - t0);
}

static void on_readable(struct conn *c)
{
    for (;;) {
        ssize_t n = read(c->fd, c->in + c->in_len, sizeof c->in - c->in_len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return;
            die("read");
        }
        if (n == 0) {
            fprintf(stderr, "em-load: connection %d closed by the server\n", c->idx);
            exit(1);
        }
        c->in_len += (size_t)n;
        uint64_t now = core_now_ns();
        size_t start = 0;
        if (L.fix) {
            for (;;) {
                size_t ml = 0;
                int fr = em_fix_frame(c->in + start, c->in_len - start, &ml);
                if (fr == EM_FIX_FRAME_MORE)
                    break;
                if (fr == 0)
                    on_fix_message(c, c->in + start, ml, now);
                start += ml;
            }
            memmove(c->in, c->in + start, c->in_len - start);
            c->in_len -= start;
            continue;
        }
        for (size_t i = 0; i < c->in_len; i++) {
            if (c->in[i] == '\n') {
                size_t l = i - start;
                if (l && c->in[start + l - 1] == '\r')
                    l--;
                on_line(c, c->in + start, l, now);
                start = i + 1;
            }
        }
        memmove(c->in, c->in + start, c->in_len - start);
        c->in_len -= start;
        if (c->in_len == sizeof c->in)
            c->in_len = 0; /* a line longer than the buffer: drop it */
    }
}

static void connect_all(void)
{
    /* A name or an address of either family ("127.0.0.1", "::1",
     * "localhost"): the first address getaddrinfo gives. */
    char service[16];
    snprintf(service, sizeof service, "%" PRId64, port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(host, service, &hints, &ai);
    if (gai != 0 || !ai) {
        fprintf(stderr, "em-load: bad host %s: %s\n", host, gai_strerror(gai));
        exit(2);
    }
    L.epfd = epoll_create1(0);
    for (int i = 0; i < L.n; i++) {
        struct conn *c = &L.c[i];
        c->idx = i;
        c->fd = socket(ai->ai_family, SOCK_STREAM, 0);
        if (c->fd < 0 || connect(c->fd, ai->ai_addr, ai->ai_addrlen) != 0)
            die("connect");
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fcntl(c->fd, F_SETFL, O_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(L.epfd, EPOLL_CTL_ADD, c->fd, &ev);
        char line[256];
        snprintf(c->gw, sizeof c->gw, "%s%d", gw_prefix, i + 1);
        int n;
        if (L.fix) {
            c->fix_seq = 1;
            struct em_fix_out *o = fix_begin(c, line, sizeof line, "A");
            em_fix_add_char(o, EM_FIX_TAG_ENCRYPTMETHOD, '0');
            em_fix_add_uint(o, EM_FIX_TAG_HEARTBTINT, 30);
            em_fix_add_char(o, EM_FIX_TAG_RESETSEQNUMFLAG, 'Y');
            n = (int)em_fix_finish(o);
        } else {
            n = snprintf(line, sizeof line, "LOGIN gw=%s\n", c->gw);
        }
        queue_line(c, line, n);
        flush_out(c);
    }
    freeaddrinfo(ai);
    /* wait for every LOGGEDIN (bounded) */
    uint64_t deadline = core_now_ns() + 5000000000ull;
    int ok = 0;
    while (ok < L.n && core_now_ns() < deadline) {
        struct epoll_event evs[64];
        int k = epoll_wait(L.epfd, evs, 64, 100);
        for (int i = 0; i < k; i++)
            on_readable(evs[i].data.ptr);
        ok = 0;
        for (int i = 0; i < L.n; i++)
            ok += L.c[i].logged_in;
    }
    if (ok < L.n) {
        fprintf(stderr, "em-load: only %d of %d connections logged in\n", ok, L.n);
        exit(1);
    }
}

static void poll_once(int timeout_ms)
{
    struct epoll_event evs[256];
    int k = epoll_wait(L.epfd, evs, 256, timeout_ms);
    for (int i = 0; i < k; i++)
        on_readable(evs[i].data.ptr);
}

/* Sleep until a reply arrives or ns pass, with nanosecond resolution
 * (epoll_wait's is a millisecond): ppoll on the epoll fd itself. */
static void wait_ns(uint64_t ns)
{
    struct pollfd p = {.fd = L.epfd, .events = POLLIN};
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
                          .tv_nsec = (long)(ns % 1000000000u)};
    if (ns && ppoll(&p, 1, &ts, NULL) <= 0)
        return;
    poll_once(0);
}

static void flush_all(void)
{
    for (int i = 0; i < L.n; i++)
        if (L.c[i].out_len)
            flush_out(&L.c[i]);
}

static void run(void)
{
    uint64_t t_start = core_now_ns();
    uint64_t t_measure = t_start + (uint64_t)warmup_s * 1000000000ull;
    uint64_t t_end = t_measure + (uint64_t)duration_s * 1000000000ull;
    uint64_t sent_at_measure = 0, replies_at_measure = 0;
    uint64_t interval = rate ? 1000000000ull / (uint64_t)rate : 0;
    uint64_t next = t_start;
    unsigned rr = 0;
    if (!rate)
        for (int i = 0; i < L.n; i++)
            for (int d = 0; d < depth; d++)
                send_request(&L.c[i], core_now_ns());
    flush_all();
    for (;;) {
        uint64_t now = core_now_ns();
        if (!L.measuring && now >= t_measure) {
            L.measuring = true;
            sent_at_measure = L.sent;
            replies_at_measure = L.replies;
        }
        if (now >= t_end)
            break;
        if (rate) {
            /* open loop: everything due by now, at its scheduled time */
            while (next <= now) {
                send_request(&L.c[rr++ % (unsigned)L.n], next);
                next += interval;
            }
            flush_all();
            uint64_t wait = next > now ? next - now : 0;
            wait_ns(wait);
        } else {
            poll_once(1);
            for (int i = 0; i < L.n; i++) {
                struct conn *c = &L.c[i];
                while (in_flight(c) < (unsigned)depth)
                    send_request(c, core_now_ns());
            }
            flush_all();
        }
    }
    double secs = (double)(core_now_ns() - t_measure) / 1e9;
    uint64_t sent = L.sent - sent_at_measure, replies = L.replies - replies_at_measure;
    /* drain what is still in flight (bounded), not measured */
    L.measuring = false;
    uint64_t drain_end = core_now_ns() + 2000000000ull;
    while (core_now_ns() < drain_end) {
        unsigned pending = 0;
        for (int i = 0; i < L.n; i++)
            pending += in_flight(&L.c[i]);
        if (!pending)
            break;
        poll_once(10);
    }
    const struct core_hist *h = &L.hist;
    printf("em-load: %s, %d conns, %s%" PRId64 "/s, %.1f s measured\n",
           rate ? "open loop" : "closed loop", L.n, rate ? "rate " : "depth ", rate ? rate : depth,
           secs);
    printf("  sent %" PRIu64 "  replies %" PRIu64 "  throughput %.0f replies/s  rejects %" PRIu64
           "  fills %" PRIu64 "\n",
           sent, replies, (double)replies / secs, L.rejects, L.fills);
    printf("  latency us: p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max %.1f  (n=%" PRIu64 ")\n",
           core_hist_percentile(h, 50) / 1e3, core_hist_percentile(h, 90) / 1e3,
           core_hist_percentile(h, 99) / 1e3, core_hist_percentile(h, 99.9) / 1e3,
           (double)h->max / 1e3, h->count);
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if (L.reject_reasons[i])
            printf("  REJECT %s: %" PRIu64 "\n", reasons[i], L.reject_reasons[i]);
    /* one machine-readable line for scripts */
    printf("RESULT proto=%s mode=%s conns=%d rate=%" PRId64 " secs=%.2f sent=%" PRIu64
           " replies=%" PRIu64
           " tput=%.0f p50_us=%.2f p99_us=%.2f p999_us=%.2f max_us=%.2f rejects=%" PRIu64
           " overflow=%" PRIu64 "\n",
           proto, rate ? "open" : "closed", L.n, rate, secs, sent, replies, (double)replies / secs,
           core_hist_percentile(h, 50) / 1e3, core_hist_percentile(h, 99) / 1e3,
           core_hist_percentile(h, 99.9) / 1e3, (double)h->max / 1e3, L.rejects, L.overflow);
}

int main(int argc, char **argv)
{
    int code;
    if (core_proc_options("em-load", 'L', options, NULL, argc, argv, &code))
        return code;
    L.n = (int)nconns;
    L.fix = !strcmp(proto, "fix");
    if (!L.fix && strcmp(proto, "alf") != 0) {
        fprintf(stderr, "em-load: --proto must be alf or fix\n");
        return 2;
    }
    L.c = calloc((size_t)L.n, sizeof *L.c);
    L.rng = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 1;
    core_hist_reset(&L.hist);
    for (char *save = NULL, *s = strtok_r(symbols, ",", &save); s && L.nsym < MAXSYM;
         s = strtok_r(NULL, ",", &save)) {
        snprintf(L.sym[L.nsym], sizeof L.sym[0], "%s", s);
        L.nsym++;
    }
    int64_t units = 0, cents = 0;
    if (L.nsym == 0 || !L.c || sscanf(mid_px, "%" SCNd64 ".%2" SCNd64, &units, &cents) < 1) {
        fprintf(stderr, "em-load: bad --symbols or --mid\n");
        return 2;
    }
    for (int i = 0; i < L.nsym; i++)
        L.mid[i] = units * 100 + cents;
    /* Timer slack would round every short sleep up by 50 us. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    connect_all();
    run();
    return 0;
}
