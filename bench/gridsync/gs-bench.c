/*
 * gs-bench: a load generator for Redis-protocol caches (GridSync, Redis)
 * and, with --protocol memcache, memcached.
 *
 * One thread, one epoll loop, N TCP connections. Each request is a GET or
 * a SET of a key `key:%012d` chosen by a Zipfian law over the key space
 * (a precomputed CDF searched by bisection, driven by a seeded xoshiro256**
 * so the same seed gives the same key sequence). Latency is measured from
 * the send (closed loop) or from the intended send time (open loop, so a
 * stalled server cannot hide its queue: no coordinated omission) to the
 * moment the reply is parsed, into core/histogram.h histograms.
 *
 * Invariants:
 *   1. No allocation after start-up: connections, their in-flight rings,
 *      their output buffers, the shared input buffer and the histograms are
 *      allocated once in main.
 *   2. Replies arrive in request order on a connection (both protocols are
 *      strictly pipelined), so each connection keeps a FIFO ring of the
 *      send times of its requests in flight; a reply pops the oldest.
 *   3. A request is recorded iff its (intended) send time lies in the
 *      measured window; its reply may arrive during the drain that follows.
 *   4. One write() per connection per loop iteration: every request a
 *      connection generates in an iteration goes out in one batch.
 *
 * Cluster mode (--cluster): the slot map comes from CLUSTER SLOTS on the
 * given node; -c connections are opened to each node of the map (and to a
 * node first named by a redirection), and each request goes to a
 * connection of the node that owns its key's slot (gridsync/cluster/slot.h:
 * CRC16 with hash tags). The closed loop keeps connections x pipeline x
 * (nodes at start) requests in flight in total. A -MOVED reply updates
 * that slot, re-sends the request to the named node and re-reads the whole
 * map from it before the next requests are routed; -ASK re-sends it once,
 * preceded by ASKING, without touching the map. A redirected request keeps
 * its first send time, so its latency includes the redirection.
 *
 * Phases: CONNECT -> [LOAD] -> WARMUP -> MEASURE -> DRAIN -> report.
 *   LOAD    (--load) SETs every key once, pipelined, so GETs hit.
 *   WARMUP  runs the workload unrecorded for --warmup seconds.
 *   MEASURE runs for --duration seconds or --requests requests.
 *   DRAIN   sends nothing and waits (bounded) for the replies in flight.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/proc.h"
#include "bench/gridsync/reply.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/histogram.h"
#include "gridsync/cluster/slot.h"

#define NS_PER_S    1000000000ull
#define KEY_DIGITS  12
#define KEY_LEN     (4 + KEY_DIGITS) /* "key:" + digits */
#define MAX_KEYS    1000000000000ull /* what KEY_DIGITS can name */
#define IN_BUF_SIZE (256 * 1024)
#define MAX_EVENTS  256
#define MAX_NODES   16 /* cluster mode: nodes a run may talk to */
#define NO_NODE     0xff
#define MAP_BUF     (4 << 20) /* a CLUSTER SLOTS reply (a ring lists many ranges) */

/* ---- options ---------------------------------------------------------- */

struct options {
    const char *host;
    const char *port;
    enum gsb_protocol proto;
    unsigned conns;
    unsigned pipeline;
    uint64_t keys;
    double zipf;
    size_t value_size;
    double get_ratio;
    bool load;
    bool load_only;
    double duration_s;
    uint64_t requests; /* 0: run for duration_s */
    double warmup_s;
    double rate; /* requests/s over all connections; 0: closed loop */
    unsigned max_inflight;
    uint64_t seed;
    const char *json_path;
    bool progress;
    double drain_s;
    bool cluster;
};

static void usage(FILE *out)
{
    fprintf(out, "usage: gs-bench [options]\n"
                 "  -s, --host HOST          server address (127.0.0.1)\n"
                 "  -p, --port PORT          server port (6379)\n"
                 "      --protocol P         resp | memcache (resp)\n"
                 "  -c, --connections N      connections, all on one event loop (50)\n"
                 "  -P, --pipeline N         requests in flight per connection, closed loop (1)\n"
                 "  -k, --keys N             key space: key:000000000000 .. (1000)\n"
                 "  -z, --zipf S             Zipf exponent of the key choice; 0 = uniform (1.1)\n"
                 "  -d, --value-size N       SET value bytes (128)\n"
                 "  -g, --get-ratio F        fraction of GETs, the rest are SETs (0.9)\n"
                 "      --load               SET every key once before the run, so GETs hit\n"
                 "      --load-only          only do the load phase, then exit\n"
                 "  -t, --duration SEC       measured seconds (10)\n"
                 "  -n, --requests N         measure N requests instead of a duration\n"
                 "  -w, --warmup SEC         unrecorded seconds before measuring (1)\n"
                 "  -r, --rate R             open loop: R requests/s over all connections,\n"
                 "                           latency from the intended send time\n"
                 "      --max-inflight N     open loop: cap of requests in flight per connection\n"
                 "                           (1024)\n"
                 "      --seed N             PRNG seed (1)\n"
                 "      --json FILE          write results and the percentile curve as JSON\n"
                 "      --progress           a progress line every second even if not a TTY\n"
                 "      --drain SEC          wait at most this long for replies at the end (2)\n"
                 "      --cluster            route by CLUSTER SLOTS, follow -MOVED and -ASK;\n"
                 "                           -c connections to each node (closed loop only)\n"
                 "  -h, --help               this text\n");
}

static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi)
        return CORE_EINVAL;
    *out = v;
    return 0;
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return CORE_EINVAL;
    *out = v;
    return 0;
}

enum {
    OPT_PROTOCOL = 256,
    OPT_LOAD,
    OPT_LOAD_ONLY,
    OPT_MAX_INFLIGHT,
    OPT_SEED,
    OPT_JSON,
    OPT_PROGRESS,
    OPT_DRAIN,
    OPT_CLUSTER,
};

/* Returns 0, 1 after --help, or CORE_EINVAL (message printed). */
static int parse_options(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        {"host", required_argument, 0, 's'},
        {"port", required_argument, 0, 'p'},
        {"protocol", required_argument, 0, OPT_PROTOCOL},
        {"connections", required_argument, 0, 'c'},
        {"pipeline", required_argument, 0, 'P'},
        {"keys", required_argument, 0, 'k'},
        {"zipf", required_argument, 0, 'z'},
        {"value-size", required_argument, 0, 'd'},
        {"get-ratio", required_argument, 0, 'g'},
        {"load", no_argument, 0, OPT_LOAD},
        {"load-only", no_argument, 0, OPT_LOAD_ONLY},
        {"duration", required_argument, 0, 't'},
        {"requests", required_argument, 0, 'n'},
        {"warmup", required_argument, 0, 'w'},
        {"rate", required_argument, 0, 'r'},
        {"max-inflight", required_argument, 0, OPT_MAX_INFLIGHT},
        {"seed", required_argument, 0, OPT_SEED},
        {"json", required_argument, 0, OPT_JSON},
        {"progress", no_argument, 0, OPT_PROGRESS},
        {"drain", required_argument, 0, OPT_DRAIN},
        {"cluster", no_argument, 0, OPT_CLUSTER},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    *o = (struct options){
        .host = "127.0.0.1",
        .port = "6379",
        .proto = GSB_PROTO_RESP,
        .conns = 50,
        .pipeline = 1,
        .keys = 1000,
        .zipf = 1.1,
        .value_size = 128,
        .get_ratio = 0.9,
        .duration_s = 10,
        .warmup_s = 1,
        .max_inflight = 1024,
        .seed = 1,
        .drain_s = 2,
    };
    int c, err = 0;
    uint64_t u;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":s:p:c:P:k:z:d:g:t:n:w:r:h", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            o->host = optarg;
            break;
        case 'p':
            o->port = optarg;
            err = parse_u64(optarg, 1, 65535, &u);
            break;
        case OPT_PROTOCOL:
            if (strcmp(optarg, "resp") == 0)
                o->proto = GSB_PROTO_RESP;
            else if (strcmp(optarg, "memcache") == 0)
                o->proto = GSB_PROTO_MEMCACHE;
            else
                err = CORE_EINVAL;
            break;
        case 'c':
            err = parse_u64(optarg, 1, 10000, &u);
            o->conns = (unsigned)u;
            break;
        case 'P':
            err = parse_u64(optarg, 1, 4096, &u);
            o->pipeline = (unsigned)u;
            break;
        case 'k':
            err = parse_u64(optarg, 1, MAX_KEYS, &o->keys);
            break;
        case 'z':
            err = parse_double(optarg, 0, 10, &o->zipf);
            break;
        case 'd':
            err = parse_u64(optarg, 0, 16 << 20, &u);
            o->value_size = (size_t)u;
            break;
        case 'g':
            err = parse_double(optarg, 0, 1, &o->get_ratio);
            break;
        case OPT_LOAD:
            o->load = true;
            break;
        case OPT_LOAD_ONLY:
            o->load = o->load_only = true;
            break;
        case 't':
            err = parse_double(optarg, 0.001, 1e6, &o->duration_s);
            break;
        case 'n':
            err = parse_u64(optarg, 1, UINT64_MAX / 2, &o->requests);
            break;
        case 'w':
            err = parse_double(optarg, 0, 1e6, &o->warmup_s);
            break;
        case 'r':
            err = parse_double(optarg, 0, 1e9, &o->rate);
            break;
        case OPT_MAX_INFLIGHT:
            err = parse_u64(optarg, 1, 1 << 20, &u);
            o->max_inflight = (unsigned)u;
            break;
        case OPT_SEED:
            err = parse_u64(optarg, 0, UINT64_MAX, &o->seed);
            break;
        case OPT_JSON:
            o->json_path = optarg;
            break;
        case OPT_PROGRESS:
            o->progress = true;
            break;
        case OPT_DRAIN:
            err = parse_double(optarg, 0, 3600, &o->drain_s);
            break;
        case OPT_CLUSTER:
            o->cluster = true;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            /* One line, as every tool of the project (getopt's own message
             * is off: opterr = 0 below). */
            fprintf(stderr, "gs-bench: %s '%s' (see --help)\n",
                    c == ':' ? "a value is missing after" : "unknown option", argv[optind - 1]);
            return CORE_EINVAL;
        }
        if (err) {
            fprintf(stderr, "gs-bench: invalid value '%s' for option %s\n", optarg,
                    argv[optind - 1]);
            return CORE_EINVAL;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gs-bench: unexpected argument '%s'\n", argv[optind]);
        return CORE_EINVAL;
    }
    if (o->cluster && (o->proto != GSB_PROTO_RESP || o->rate > 0)) {
        fprintf(stderr,
                "gs-bench: --cluster needs --protocol resp and a closed loop (no --rate)\n");
        return CORE_EINVAL;
    }
    return 0;
}

/* ---- key choice ------------------------------------------------------- */

/* xoshiro256** (Blackman and Vigna), seeded through splitmix64 as its
 * authors recommend. */
struct rng {
    uint64_t s[4];
};

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void rng_seed(struct rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t rng_next(struct rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double rng_unit(struct rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* Zipf's law over ranks 1..n: P(rank i) is proportional to 1 / i^s. Key
 * index i - 1 has rank i, so key:000000000000 is the hottest. */
struct keychooser {
    uint64_t n;
    double *cdf; /* NULL when uniform (s == 0) */
};

static int keychooser_init(struct keychooser *kc, uint64_t n, double s)
{
    kc->n = n;
    kc->cdf = NULL;
    if (s == 0)
        return 0;
    if (n > (1ull << 28)) {
        fprintf(stderr, "gs-bench: a Zipfian key space is limited to 2^28 keys\n");
        return CORE_ERANGE;
    }
    kc->cdf = malloc(n * sizeof(double));
    if (!kc->cdf)
        return CORE_ENOMEM;
    double sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        sum += pow((double)(i + 1), -s);
        kc->cdf[i] = sum;
    }
    for (uint64_t i = 0; i < n; i++)
        kc->cdf[i] /= sum;
    kc->cdf[n - 1] = 1.0;
    return 0;
}

static inline uint64_t keychooser_next(const struct keychooser *kc, struct rng *r)
{
    if (!kc->cdf)
        return (uint64_t)(((unsigned __int128)rng_next(r) * kc->n) >> 64);
    double u = rng_unit(r);
    /* first index whose cumulative probability exceeds u */
    uint64_t lo = 0, hi = kc->n - 1;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (kc->cdf[mid] > u)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* ---- requests --------------------------------------------------------- */

/* A request is a copy of a prebuilt template with the key's digits written
 * in at key_at: no formatting per request. */
struct templ {
    char *bytes;
    size_t len;
    size_t key_at;
};

struct templates {
    struct templ get, set;
    size_t max_len;
};

static int templ_build(struct templ *t, const char *head, const char *mid, const char *value,
                       size_t value_size, const char *tail)
{
    size_t hl = strlen(head), ml = strlen(mid), tl = strlen(tail);
    t->len = hl + KEY_LEN + ml + value_size + tl;
    t->bytes = malloc(t->len);
    if (!t->bytes)
        return CORE_ENOMEM;
    char *p = t->bytes;
    memcpy(p, head, hl);
    p += hl;
    memcpy(p, "key:", 4);
    memset(p + 4, '0', KEY_DIGITS);
    t->key_at = hl + 4;
    p += KEY_LEN;
    memcpy(p, mid, ml);
    p += ml;
    if (value_size)
        memcpy(p, value, value_size);
    p += value_size;
    memcpy(p, tail, tl);
    return 0;
}

static int templates_build(struct templates *ts, enum gsb_protocol proto, size_t value_size)
{
    char *value = malloc(value_size + 1);
    if (!value)
        return CORE_ENOMEM;
    /* Printable, varied bytes: no server should get to compress a run. */
    for (size_t i = 0; i < value_size; i++)
        value[i] = (char)('a' + (i * 7 + i / 26) % 26);
    char head[64], mid[64];
    int err;
    if (proto == GSB_PROTO_RESP) {
        snprintf(head, sizeof(head), "*2\r\n$3\r\nGET\r\n$%d\r\n", KEY_LEN);
        err = templ_build(&ts->get, head, "\r\n", NULL, 0, "");
        snprintf(head, sizeof(head), "*3\r\n$3\r\nSET\r\n$%d\r\n", KEY_LEN);
        snprintf(mid, sizeof(mid), "\r\n$%zu\r\n", value_size);
        if (!err)
            err = templ_build(&ts->set, head, mid, value, value_size, "\r\n");
    } else {
        err = templ_build(&ts->get, "get ", "\r\n", NULL, 0, "");
        snprintf(mid, sizeof(mid), " 0 0 %zu\r\n", value_size);
        if (!err)
            err = templ_build(&ts->set, "set ", mid, value, value_size, "\r\n");
    }
    free(value);
    ts->max_len = ts->set.len > ts->get.len ? ts->set.len : ts->get.len;
    return err;
}

static inline void write_key_digits(char *at, uint64_t key)
{
    for (int i = KEY_DIGITS - 1; i >= 0; i--) {
        at[i] = (char)('0' + key % 10);
        key /= 10;
    }
}

/* ---- connections and the run ------------------------------------------ */

enum phase { PH_LOAD, PH_WARMUP, PH_MEASURE, PH_DRAIN, PH_DONE };

static const char *const phase_names[] = {"load", "warmup", "measure", "drain", "done"};

/* One request in flight. */
struct inflight {
    uint64_t t_ns; /* send time, or intended send time in open loop */
    uint64_t key;  /* cluster mode: to re-send it after a redirection */
    uint8_t is_get;
    uint8_t record; /* sent inside the measured window */
    uint8_t asking; /* the ASKING before a request: its +OK is not counted */
};

/* Cluster mode: a request waiting for room on its node's connections. */
struct pending {
    uint64_t t_ns, key;
    uint8_t is_get, record;
    uint8_t ask_node; /* NO_NODE: route by the slot map; else ASKING there */
};

struct node {
    char host[64];
    char port[8];
    bool opened; /* its connections were opened (they may have died since) */
    unsigned rr; /* round robin over its connections */
};

struct conn {
    int fd;
    bool alive;
    bool want_out; /* EPOLLOUT armed: the last write was partial */
    struct gsb_reply_parser parser;
    /* FIFO ring of requests in flight (invariant 2) */
    struct inflight *ring;
    unsigned ring_cap, head, count;
    /* bytes generated but not yet written */
    char *out;
    size_t out_cap, out_len, out_off;
    uint64_t next_due_ns; /* open loop: intended time of its next request */
};

struct counters {
    uint64_t sent; /* every request written, load and warm-up included */
    uint64_t completed;
    uint64_t gets, get_hits, get_misses, sets;
    uint64_t error_replies;
    uint64_t unexpected;              /* a reply of the wrong kind for its command */
    uint64_t protocol;                /* connections closed on an unparsable reply */
    uint64_t lost;                    /* in flight when a connection died or the drain ended */
    uint64_t closed;                  /* connections closed by the server */
    uint64_t unsent;                  /* open loop: due in the window but never sent */
    uint64_t moved, asked, map_reads; /* cluster mode */
};

struct bench {
    struct options o;
    struct templates tpl;
    struct keychooser kc;
    struct rng rng;
    struct conn *conns;
    unsigned nconns; /* conns[] entries: o.conns, or o.conns per node slot */
    unsigned alive;
    /* cluster mode: node i owns conns[i * o.conns .. (i + 1) * o.conns) */
    struct node nodes[MAX_NODES];
    unsigned nnodes;
    uint8_t slot_node[GS_SLOTS];
    uint64_t outstanding, outstanding_cap; /* requests not yet answered */
    struct pending *pend;
    unsigned pend_cap, pend_head, pend_count;
    int map_from; /* node to re-read CLUSTER SLOTS from, or -1 */
    unsigned nodes_at_start;
    char *map_buf;
    int ep;
    char *in;

    enum phase phase;
    unsigned depth; /* closed loop: requests in flight per connection */
    uint64_t load_next, load_done;
    uint64_t t_start, t_warm, t_meas, t_meas_end, t_last_reply, t_drain_end;
    uint64_t meas_sent; /* --requests: measured requests sent so far */
    uint64_t open_interval_ns;

    struct counters c;
    struct core_hist hist;     /* measured window */
    struct core_hist interval; /* since the last progress line */
    uint64_t interval_done;
    uint64_t next_progress;
    bool tty, progress;
};

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static int connect_one(const struct addrinfo *ai)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0)
        return -errno;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    /* Requests go out as soon as a batch is written, as every Redis
     * client does. */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    return fd;
}

static int open_connections(struct bench *b)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res;
    int rc = getaddrinfo(b->o.host, b->o.port, &hints, &res);
    if (rc) {
        fprintf(stderr, "gs-bench: %s:%s: %s\n", b->o.host, b->o.port, gai_strerror(rc));
        return CORE_EINVAL;
    }
    for (unsigned i = 0; i < b->o.conns; i++) {
        struct conn *cn = &b->conns[i];
        int fd = connect_one(res);
        if (fd < 0) {
            fprintf(stderr, "gs-bench: connect %s:%s: %s\n", b->o.host, b->o.port, strerror(-fd));
            freeaddrinfo(res);
            return core_from_errno(-fd);
        }
        cn->fd = fd;
        cn->alive = true;
        gsb_reply_parser_init(&cn->parser, b->o.proto);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};
        if (epoll_ctl(b->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
            freeaddrinfo(res);
            return core_from_errno(errno);
        }
        b->alive++;
    }
    freeaddrinfo(res);
    return 0;
}

static void conn_close(struct bench *b, struct conn *cn)
{
    if (!cn->alive)
        return;
    epoll_ctl(b->ep, EPOLL_CTL_DEL, cn->fd, NULL);
    close(cn->fd);
    cn->alive = false;
    unsigned lost = cn->count;
    if (b->o.cluster) { /* an ASKING is not a request */
        lost = 0;
        for (unsigned i = 0; i < cn->count; i++)
            lost += !cn->ring[(cn->head + i) % cn->ring_cap].asking;
        b->outstanding -= lost;
    }
    b->c.lost += lost;
    if (b->phase == PH_LOAD)
        b->load_done += lost; /* lost, but the load must not wait for them */
    cn->count = 0;
    cn->out_len = cn->out_off = 0;
    b->alive--;
}

/* Append one request to the connection's output and its in-flight ring.
 * The caller has checked there is room in both. */
static inline void conn_push(struct bench *b, struct conn *cn, bool is_get, uint64_t key,
                             uint64_t t_ns, bool record)
{
    const struct templ *t = is_get ? &b->tpl.get : &b->tpl.set;
    char *dst = cn->out + cn->out_len;
    memcpy(dst, t->bytes, t->len);
    write_key_digits(dst + t->key_at, key);
    cn->out_len += t->len;
    struct inflight *f = &cn->ring[(cn->head + cn->count) % cn->ring_cap];
    f->t_ns = t_ns;
    f->key = key;
    f->is_get = is_get;
    f->record = record;
    f->asking = 0;
    cn->count++;
    b->c.sent++;
}

static inline bool conn_has_room(const struct bench *b, const struct conn *cn)
{
    return cn->count < cn->ring_cap && cn->out_cap - cn->out_len >= b->tpl.max_len;
}

/* Whether the workload may send one more request now (not load/drain). */
static inline bool may_send_workload(const struct bench *b)
{
    if (b->phase == PH_WARMUP)
        return true;
    if (b->phase != PH_MEASURE)
        return false;
    return b->o.requests == 0 || b->meas_sent < b->o.requests;
}

static inline void push_workload(struct bench *b, struct conn *cn, uint64_t t_ns)
{
    bool is_get = b->o.get_ratio >= 1.0 || rng_unit(&b->rng) < b->o.get_ratio;
    uint64_t key = keychooser_next(&b->kc, &b->rng);
    bool record = b->phase == PH_MEASURE;
    if (record)
        b->meas_sent++;
    conn_push(b, cn, is_get, key, t_ns, record);
}

/* Closed loop and load: top the connection up to its depth. */
static void conn_refill(struct bench *b, struct conn *cn, uint64_t now)
{
    if (b->phase == PH_LOAD) {
        while (cn->count < b->depth && b->load_next < b->o.keys && conn_has_room(b, cn))
            conn_push(b, cn, false, b->load_next++, now, false);
        return;
    }
    if (b->o.rate > 0)
        return;
    while (cn->count < b->depth && conn_has_room(b, cn) && may_send_workload(b))
        push_workload(b, cn, now);
}

/* Open loop: generate every request whose intended time has come. */
static void conn_schedule(struct bench *b, struct conn *cn, uint64_t now)
{
    while (cn->next_due_ns <= now && conn_has_room(b, cn) && may_send_workload(b)) {
        /* The phase is decided by the intended time, not by when the
         * request could finally go out (invariant 3). */
        if (b->phase == PH_WARMUP && cn->next_due_ns >= b->t_meas)
            break;
        push_workload(b, cn, cn->next_due_ns);
        cn->next_due_ns += b->open_interval_ns;
    }
}

static void conn_flush(struct bench *b, struct conn *cn)
{
    while (cn->out_off < cn->out_len) {
        ssize_t n = write(cn->fd, cn->out + cn->out_off, cn->out_len - cn->out_off);
        if (n > 0) {
            cn->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!cn->want_out) {
                struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT,
                                         .data.u32 = (uint32_t)(cn - b->conns)};
                epoll_ctl(b->ep, EPOLL_CTL_MOD, cn->fd, &ev);
                cn->want_out = true;
            }
            return;
        }
        b->c.closed++;
        conn_close(b, cn);
        return;
    }
    cn->out_off = cn->out_len = 0;
    if (cn->want_out) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)(cn - b->conns)};
        epoll_ctl(b->ep, EPOLL_CTL_MOD, cn->fd, &ev);
        cn->want_out = false;
    }
}

/* Generate what the connection may send now and write it; repeat while a
 * whole batch went out and more may follow (an output buffer smaller than
 * the pipeline depth must not stall the connection until the next event). */
static void conn_top_up(struct bench *b, struct conn *cn, uint64_t now)
{
    while (cn->alive && !cn->want_out) {
        size_t before = cn->out_len;
        if (b->o.rate > 0 && b->phase != PH_LOAD)
            conn_schedule(b, cn, now);
        else
            conn_refill(b, cn, now);
        if (cn->out_len == before)
            return;
        conn_flush(b, cn);
    }
}

/* ---- cluster mode ----------------------------------------------------- */

static int node_find_or_add(struct bench *b, const char *host, size_t hl, long port)
{
    char ps[8];
    if (port <= 0 || port > 65535 || hl == 0 || hl >= sizeof(b->nodes[0].host))
        return -1;
    snprintf(ps, sizeof(ps), "%ld", port);
    for (unsigned i = 0; i < b->nnodes; i++)
        if (strlen(b->nodes[i].host) == hl && !memcmp(b->nodes[i].host, host, hl) &&
            !strcmp(b->nodes[i].port, ps))
            return (int)i;
    if (b->nnodes == MAX_NODES)
        return -1;
    struct node *n = &b->nodes[b->nnodes];
    memcpy(n->host, host, hl);
    n->host[hl] = '\0';
    memcpy(n->port, ps, sizeof(ps));
    n->opened = false;
    n->rr = 0;
    return (int)b->nnodes++;
}

/* Open the -c connections of node i (once: a node whose connections died
 * stays closed, its slots move on through -MOVED or a map read). */
static int node_open(struct bench *b, unsigned i)
{
    struct node *nd = &b->nodes[i];
    if (nd->opened)
        return 0;
    nd->opened = true;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res;
    if (getaddrinfo(nd->host, nd->port, &hints, &res)) {
        fprintf(stderr, "gs-bench: cannot resolve node %s:%s\n", nd->host, nd->port);
        return CORE_EINVAL;
    }
    int err = 0;
    for (unsigned k = 0; k < b->o.conns; k++) {
        unsigned idx = i * b->o.conns + k;
        struct conn *cn = &b->conns[idx];
        int fd = connect_one(res);
        if (fd < 0) {
            fprintf(stderr, "gs-bench: connect %s:%s: %s\n", nd->host, nd->port, strerror(-fd));
            err = core_from_errno(-fd);
            break;
        }
        cn->fd = fd;
        cn->alive = true;
        cn->want_out = false;
        cn->head = cn->count = 0;
        cn->out_len = cn->out_off = 0;
        gsb_reply_parser_init(&cn->parser, b->o.proto);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = idx};
        if (epoll_ctl(b->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
            close(fd);
            cn->alive = false;
            err = core_from_errno(errno);
            break;
        }
        b->alive++;
    }
    freeaddrinfo(res);
    return err;
}

/* A reader over one complete RESP reply (checked by gsb_reply_parse). */
struct resp_walk {
    const char *p, *end;
};

/* The number on a line of the given type ('*', ':' or '$'); the walk then
 * stands after the line. -1 on anything else. */
static long walk_num(struct resp_walk *w, char type)
{
    if (w->p >= w->end || *w->p != type)
        return -1;
    char *e;
    long v = strtol(w->p + 1, &e, 10);
    if (e + 2 > w->end || e[0] != '\r')
        return -1;
    w->p = e + 2;
    return v;
}

static const char *walk_bulk(struct resp_walk *w, size_t *len)
{
    long n = walk_num(w, '$');
    if (n < 0 || w->end - w->p < n + 2)
        return NULL;
    const char *s = w->p;
    w->p += n + 2;
    *len = (size_t)n;
    return s;
}

static int walk_skip(struct resp_walk *w, int depth)
{
    if (w->p >= w->end || depth > GSB_REPLY_MAX_DEPTH)
        return -1;
    size_t len;
    switch (*w->p) {
    case '*': {
        long n = walk_num(w, '*');
        for (long i = 0; i < n; i++)
            if (walk_skip(w, depth + 1))
                return -1;
        return 0;
    }
    case '$':
        return walk_bulk(w, &len) ? 0 : -1;
    default: {
        const char *e = memchr(w->p, '\n', (size_t)(w->end - w->p));
        if (!e)
            return -1;
        w->p = e + 1;
        return 0;
    }
    }
}

/* Read the slot map from node `from` with a blocking CLUSTER SLOTS. Each
 * range goes to its first listed node (the one that takes writes). */
static int map_read(struct bench *b, unsigned from)
{
    static const char req[] = "*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n";
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res;
    const struct node *nd = &b->nodes[from];
    if (getaddrinfo(nd->host, nd->port, &hints, &res))
        return CORE_EINVAL;
    int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
    if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) < 0) {
        if (fd >= 0)
            close(fd);
        freeaddrinfo(res);
        return CORE_ECLOSED;
    }
    freeaddrinfo(res);
    b->c.map_reads++;
    struct gsb_reply_parser ps;
    struct gsb_reply r = {0};
    gsb_reply_parser_init(&ps, GSB_PROTO_RESP);
    size_t have = 0, parsed = 0;
    int done = 0;
    if (write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1)) {
        close(fd);
        return CORE_ECLOSED;
    }
    while (!done && have < MAP_BUF) {
        ssize_t n = read(fd, b->map_buf + have, MAP_BUF - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        have += (size_t)n;
        size_t used = 0;
        done = gsb_reply_parse(&ps, b->map_buf + parsed, have - parsed, &used, &r);
        parsed += used;
        if (done < 0)
            break;
    }
    close(fd);
    if (done != 1 || r.kind != GSB_REPLY_ARRAY) {
        fprintf(stderr, "gs-bench: CLUSTER SLOTS from %s:%s: no slot map\n", nd->host, nd->port);
        return CORE_EPROTO;
    }
    memset(b->slot_node, NO_NODE, sizeof(b->slot_node));
    struct resp_walk w = {b->map_buf, b->map_buf + parsed};
    long ranges = walk_num(&w, '*');
    for (long i = 0; i < ranges; i++) {
        long m = walk_num(&w, '*');
        long lo = walk_num(&w, ':'), hi = walk_num(&w, ':');
        if (m < 3 || lo < 0 || hi < lo || hi >= GS_SLOTS)
            return CORE_EPROTO;
        long k = walk_num(&w, '*');
        size_t hl = 0;
        const char *host = walk_bulk(&w, &hl);
        long port = walk_num(&w, ':');
        if (k < 2 || !host)
            return CORE_EPROTO;
        for (long j = 2; j < k; j++)
            if (walk_skip(&w, 0))
                return CORE_EPROTO;
        for (long j = 3; j < m; j++) /* replicas */
            if (walk_skip(&w, 0))
                return CORE_EPROTO;
        if (hl == 0) { /* "" names the node asked */
            host = nd->host;
            hl = strlen(nd->host);
        }
        int id = node_find_or_add(b, host, hl, port);
        if (id < 0)
            return CORE_EINVAL;
        memset(b->slot_node + lo, id, (size_t)(hi - lo + 1));
    }
    return 0;
}

static unsigned key_node(const struct bench *b, uint64_t key)
{
    char k[KEY_LEN];
    memcpy(k, "key:", 4);
    write_key_digits(k + 4, key);
    uint8_t n = b->slot_node[gs_key_slot(k, KEY_LEN)];
    return n == NO_NODE ? 0 : n; /* an unmapped slot: its owner will say -MOVED */
}

/* A live connection of node i with room for `need` ring entries. */
static struct conn *node_conn(struct bench *b, unsigned i, unsigned need)
{
    struct node *nd = &b->nodes[i];
    if (!nd->opened && node_open(b, i))
        return NULL;
    for (unsigned k = 0; k < b->o.conns; k++) {
        unsigned idx = i * b->o.conns + (nd->rr + k) % b->o.conns;
        struct conn *cn = &b->conns[idx];
        if (cn->alive && !cn->want_out && cn->count + need <= cn->ring_cap &&
            cn->out_cap - cn->out_len >= need * b->tpl.max_len) {
            nd->rr = (nd->rr + k + 1) % b->o.conns;
            return cn;
        }
    }
    return NULL;
}

static void pend_add(struct bench *b, const struct pending *p)
{
    /* outstanding <= outstanding_cap == pend_cap: there is always room */
    b->pend[(b->pend_head + b->pend_count) % b->pend_cap] = *p;
    b->pend_count++;
}

/* Send one request (or queue it if its node has no room now). */
static bool cluster_send(struct bench *b, const struct pending *p)
{
    bool ask = p->ask_node != NO_NODE;
    struct conn *cn = node_conn(b, ask ? p->ask_node : key_node(b, p->key), ask ? 2 : 1);
    if (!cn)
        return false;
    if (ask) {
        static const char asking[] = "*1\r\n$6\r\nASKING\r\n";
        memcpy(cn->out + cn->out_len, asking, sizeof(asking) - 1);
        cn->out_len += sizeof(asking) - 1;
        struct inflight *f = &cn->ring[(cn->head + cn->count) % cn->ring_cap];
        *f = (struct inflight){.t_ns = p->t_ns, .asking = 1};
        cn->count++;
    }
    conn_push(b, cn, p->is_get, p->key, p->t_ns, p->record);
    return true;
}

/* Closed loop (and load) in cluster mode: re-send what waits, then draw
 * new requests while fewer than outstanding_cap are unanswered, then write. */
static void cluster_top_up(struct bench *b, uint64_t now)
{
    if (b->map_from >= 0) {
        unsigned from = (unsigned)b->map_from;
        b->map_from = -1;
        if (map_read(b, from))
            fprintf(stderr, "gs-bench: slot map re-read failed; routing by redirections\n");
    }
    while (b->pend_count) {
        if (!cluster_send(b, &b->pend[b->pend_head]))
            break;
        b->pend_head = (b->pend_head + 1) % b->pend_cap;
        b->pend_count--;
    }
    uint64_t cap = (uint64_t)b->depth * b->o.conns * b->nodes_at_start;
    while (b->pend_count == 0 && b->outstanding < cap) {
        struct pending p = {.t_ns = now, .ask_node = NO_NODE};
        if (b->phase == PH_LOAD) {
            if (b->load_next >= b->o.keys)
                break;
            p.key = b->load_next++;
        } else {
            if (!may_send_workload(b))
                break;
            p.is_get = b->o.get_ratio >= 1.0 || rng_unit(&b->rng) < b->o.get_ratio;
            p.key = keychooser_next(&b->kc, &b->rng);
            p.record = b->phase == PH_MEASURE;
            if (p.record)
                b->meas_sent++;
        }
        b->outstanding++;
        if (!cluster_send(b, &p))
            pend_add(b, &p);
    }
    for (unsigned i = 0; i < b->nconns; i++)
        if (b->conns[i].alive && !b->conns[i].want_out && b->conns[i].out_len)
            conn_flush(b, &b->conns[i]);
}

/* -MOVED <slot> <host>:<port> or -ASK ...: re-send the request there.
 * Returns false if the error is not a redirection. */
static bool cluster_redirect(struct bench *b, const struct inflight *f, const struct gsb_reply *r)
{
    bool moved = r->text_len > 6 && !memcmp(r->text, "MOVED ", 6);
    bool ask = r->text_len > 4 && !memcmp(r->text, "ASK ", 4);
    if (!moved && !ask)
        return false;
    char *e;
    long slot = strtol(r->text + (moved ? 6 : 4), &e, 10);
    const char *addr = e + 1;
    const char *colon = strrchr(addr, ':');
    if (*e != ' ' || !colon || slot < 0 || slot >= GS_SLOTS)
        return false;
    int id = node_find_or_add(b, addr, (size_t)(colon - addr), strtol(colon + 1, NULL, 10));
    if (id < 0)
        return false;
    struct pending p = {.t_ns = f->t_ns,
                        .key = f->key,
                        .is_get = f->is_get,
                        .record = f->record,
                        .ask_node = NO_NODE};
    if (moved) {
        b->c.moved++;
        b->slot_node[slot] = (uint8_t)id;
        b->map_from = id;
    } else {
        b->c.asked++;
        p.ask_node = (uint8_t)id;
    }
    pend_add(b, &p);
    return true;
}

static void on_reply(struct bench *b, struct conn *cn, const struct gsb_reply *r, uint64_t now)
{
    if (cn->count == 0) {
        b->c.unexpected++; /* a reply nobody asked for */
        return;
    }
    struct inflight f = cn->ring[cn->head];
    cn->head = (cn->head + 1) % cn->ring_cap;
    cn->count--;
    if (b->o.cluster) {
        if (f.asking)
            return; /* its request's own reply follows */
        if (r->kind == GSB_REPLY_ERROR && r->text && cluster_redirect(b, &f, r))
            return;
        b->outstanding--;
    }
    b->t_last_reply = now;
    uint64_t lat = now > f.t_ns ? now - f.t_ns : 0;
    core_hist_record(&b->interval, lat);
    b->interval_done++;
    if (b->phase == PH_LOAD) {
        b->load_done++;
        if (r->kind == GSB_REPLY_ERROR)
            b->c.error_replies++;
        else if (r->kind != GSB_REPLY_STATUS)
            b->c.unexpected++;
        return;
    }
    if (!f.record)
        return;
    b->c.completed++;
    core_hist_record(&b->hist, lat);
    if (r->kind == GSB_REPLY_ERROR) {
        b->c.error_replies++;
    } else if (f.is_get) {
        b->c.gets++;
        if (r->kind == GSB_REPLY_BULK)
            b->c.get_hits++;
        else if (r->kind == GSB_REPLY_NULL)
            b->c.get_misses++;
        else
            b->c.unexpected++;
    } else {
        b->c.sets++;
        if (r->kind != GSB_REPLY_STATUS)
            b->c.unexpected++;
    }
}

static void conn_readable(struct bench *b, struct conn *cn)
{
    for (;;) {
        ssize_t n = read(cn->fd, b->in, IN_BUF_SIZE);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            b->c.closed++;
            conn_close(b, cn);
            return;
        }
        /* One clock read per read(): every reply in this buffer arrived
         * together. */
        uint64_t now = core_now_ns();
        size_t off = 0;
        while (off < (size_t)n) {
            size_t used = 0;
            struct gsb_reply r;
            int rc = gsb_reply_parse(&cn->parser, b->in + off, (size_t)n - off, &used, &r);
            if (rc < 0) {
                b->c.protocol++;
                conn_close(b, cn);
                return;
            }
            off += used;
            if (rc == 1)
                on_reply(b, cn, &r, now);
        }
        if ((size_t)n < IN_BUF_SIZE)
            return;
    }
}

static void print_progress(struct bench *b, uint64_t now)
{
    double el = (double)(now - b->t_start) / 1e9;
    double dt = (double)(now - (b->next_progress - NS_PER_S)) / 1e9;
    if (dt <= 0)
        dt = 1;
    char line[200];
    snprintf(
        line, sizeof(line), "[%-7s %6.1fs] %9.0f req/s  p50 %8.1f us  p99 %8.1f us  errors %llu",
        phase_names[b->phase], el, (double)b->interval_done / dt,
        (double)core_hist_percentile(&b->interval, 50) / 1e3,
        (double)core_hist_percentile(&b->interval, 99) / 1e3,
        (unsigned long long)(b->c.error_replies + b->c.unexpected + b->c.protocol + b->c.lost));
    if (b->tty)
        fprintf(stderr, "\r\033[K%s", line);
    else
        fprintf(stderr, "%s\n", line);
    core_hist_reset(&b->interval);
    b->interval_done = 0;
}

static uint64_t requests_in_flight(const struct bench *b)
{
    if (b->o.cluster)
        return b->outstanding;
    uint64_t n = 0;
    for (unsigned i = 0; i < b->o.conns; i++)
        n += b->conns[i].alive ? b->conns[i].count : 0;
    return n;
}

/* Open loop: the requests due inside the measured window that never went
 * out because the connection's ring or output was full. They are not in
 * the histogram, so the report names them: the server fell behind. */
static void count_unsent(struct bench *b)
{
    for (unsigned i = 0; i < b->o.conns; i++) {
        const struct conn *cn = &b->conns[i];
        if (cn->next_due_ns < b->t_meas_end)
            b->c.unsent += (b->t_meas_end - cn->next_due_ns - 1) / b->open_interval_ns + 1;
    }
}

static void start_phase(struct bench *b, enum phase ph, uint64_t now)
{
    b->phase = ph;
    switch (ph) {
    case PH_WARMUP:
        b->depth = b->o.pipeline;
        b->t_warm = now;
        b->t_meas = now + (uint64_t)(b->o.warmup_s * 1e9);
        b->t_meas_end = b->o.requests ? UINT64_MAX : b->t_meas + (uint64_t)(b->o.duration_s * 1e9);
        if (b->o.rate > 0) {
            b->open_interval_ns = (uint64_t)((double)b->o.conns * 1e9 / b->o.rate);
            if (b->open_interval_ns == 0)
                b->open_interval_ns = 1;
            /* Stagger the connections evenly over one interval. */
            for (unsigned i = 0; i < b->o.conns; i++)
                b->conns[i].next_due_ns = now + b->open_interval_ns * i / b->o.conns;
        }
        if (b->o.warmup_s == 0)
            b->phase = PH_MEASURE;
        break;
    case PH_MEASURE:
        break;
    case PH_DRAIN:
        if (b->t_meas_end == UINT64_MAX)
            b->t_meas_end = now;
        if (b->o.rate > 0)
            count_unsent(b);
        b->t_drain_end = now + (uint64_t)(b->o.drain_s * 1e9);
        break;
    default:
        break;
    }
}

/* Move between phases by the clock and the counters. */
static void advance_phase(struct bench *b, uint64_t now)
{
    if (interrupted && b->phase < PH_DRAIN) {
        if (b->phase != PH_MEASURE)
            b->t_meas = now;
        b->t_meas_end = now;
        start_phase(b, PH_DRAIN, now);
    }
    switch (b->phase) {
    case PH_LOAD:
        if (b->load_done >= b->o.keys || b->alive == 0) {
            if (b->o.load_only) {
                b->phase = PH_DONE;
                b->t_meas = b->t_meas_end = now;
            } else {
                start_phase(b, PH_WARMUP, now);
            }
        }
        break;
    case PH_WARMUP:
        if (now >= b->t_meas)
            start_phase(b, PH_MEASURE, now);
        break;
    case PH_MEASURE:
        if (now >= b->t_meas_end || (b->o.requests && b->meas_sent >= b->o.requests))
            start_phase(b, PH_DRAIN, now);
        break;
    case PH_DRAIN:
        if (requests_in_flight(b) == 0 || now >= b->t_drain_end) {
            b->c.lost += requests_in_flight(b);
            b->phase = PH_DONE;
        }
        break;
    default:
        break;
    }
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* epoll with a nanosecond timeout (the open-loop schedule needs better
 * than epoll_wait's milliseconds); where epoll_pwait2 is missing (kernels
 * before 5.11, valgrind) fall back to epoll_wait, rounding up. */
static int wait_events(int ep, struct epoll_event *evs, uint64_t wait_ns)
{
    static bool no_pwait2;
    if (!no_pwait2) {
        struct timespec ts = {.tv_sec = (time_t)(wait_ns / NS_PER_S),
                              .tv_nsec = (long)(wait_ns % NS_PER_S)};
        int n = epoll_pwait2(ep, evs, MAX_EVENTS, &ts, NULL);
        if (n >= 0 || errno != ENOSYS)
            return n;
        no_pwait2 = true;
    }
    uint64_t ms = (wait_ns + 999999) / 1000000;
    return epoll_wait(ep, evs, MAX_EVENTS, ms > INT32_MAX ? INT32_MAX : (int)ms);
}

/* The loop: wait for sockets or the next deadline, read and parse, top up
 * and write each connection once (invariant 4). */
static int run(struct bench *b)
{
    struct epoll_event evs[MAX_EVENTS];
    uint64_t now = core_now_ns();
    b->t_start = now;
    b->next_progress = now + NS_PER_S;
    if (b->o.load) {
        b->phase = PH_LOAD;
        b->depth = b->o.pipeline > 32 ? b->o.pipeline : 32;
    } else {
        start_phase(b, PH_WARMUP, now);
    }
    if (b->o.cluster)
        cluster_top_up(b, now);
    else
        for (unsigned i = 0; i < b->o.conns; i++)
            conn_top_up(b, &b->conns[i], now);
    while (b->phase != PH_DONE) {
        if (b->alive == 0) {
            fprintf(stderr, "gs-bench: every connection is closed\n");
            return CORE_ECLOSED;
        }
        uint64_t deadline = b->next_progress;
        if (b->phase == PH_WARMUP)
            deadline = min_u64(deadline, b->t_meas);
        if (b->phase == PH_MEASURE)
            deadline = min_u64(deadline, b->t_meas_end);
        if (b->phase == PH_DRAIN)
            deadline = min_u64(deadline, b->t_drain_end);
        if (b->o.rate > 0 && (b->phase == PH_WARMUP || b->phase == PH_MEASURE))
            for (unsigned i = 0; i < b->o.conns; i++)
                if (b->conns[i].alive && !b->conns[i].want_out && conn_has_room(b, &b->conns[i]))
                    deadline = min_u64(deadline, b->conns[i].next_due_ns);
        now = core_now_ns();
        uint64_t wait = deadline > now ? deadline - now : 0;
        int n = wait_events(b->ep, evs, wait);
        if (n < 0 && errno != EINTR) {
            perror("gs-bench: epoll_wait");
            return core_from_errno(errno);
        }
        for (int i = 0; i < n; i++) {
            struct conn *cn = &b->conns[evs[i].data.u32];
            if (!cn->alive)
                continue;
            if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                conn_readable(b, cn);
            if (cn->alive && (evs[i].events & EPOLLOUT))
                conn_flush(b, cn);
        }
        now = core_now_ns();
        advance_phase(b, now);
        /* Top up: closed loop refills the connections that got replies
         * (and any other short of its depth); open loop sends what is due. */
        if (b->o.cluster)
            cluster_top_up(b, now);
        else
            for (unsigned i = 0; i < b->o.conns; i++)
                conn_top_up(b, &b->conns[i], now);
        if (now >= b->next_progress) {
            if (b->tty || b->progress) {
                print_progress(b, now);
            } else {
                core_hist_reset(&b->interval);
                b->interval_done = 0;
            }
            b->next_progress += NS_PER_S;
            if (b->next_progress < now)
                b->next_progress = now + NS_PER_S;
        }
    }
    if (b->tty)
        fprintf(stderr, "\r\033[K");
    return 0;
}

/* ---- report ----------------------------------------------------------- */

static double measured_seconds(const struct bench *b)
{
    uint64_t end = b->t_meas_end;
    if (b->o.requests && b->t_last_reply > b->t_meas)
        end = b->t_last_reply;
    return end > b->t_meas ? (double)(end - b->t_meas) / 1e9 : 0;
}

static uint64_t errors_total(const struct counters *c)
{
    return c->error_replies + c->unexpected + c->protocol + c->lost;
}

static void report_text(const struct bench *b)
{
    const struct options *o = &b->o;
    const struct core_hist *h = &b->hist;
    double secs = measured_seconds(b);
    printf("gs-bench: %s:%s %s, %u connections, pipeline %u, %s\n", o->host, o->port,
           o->proto == GSB_PROTO_RESP ? "resp" : "memcache", o->conns, o->pipeline,
           o->rate > 0 ? "open loop" : "closed loop");
    if (o->rate > 0)
        printf("rate: %.0f req/s scheduled\n", o->rate);
    printf("workload: %llu keys, zipf %.2f, value %zu B, %.0f%% GET, seed %llu\n",
           (unsigned long long)o->keys, o->zipf, o->value_size, o->get_ratio * 100,
           (unsigned long long)o->seed);
    if (o->load)
        printf("load: %llu keys SET\n", (unsigned long long)b->load_done);
    if (o->load_only)
        return;
    printf("measured: %.3f s, %llu requests, %.0f req/s (GET %llu: %llu hits, %llu misses; "
           "SET %llu)\n",
           secs, (unsigned long long)b->c.completed, secs > 0 ? (double)b->c.completed / secs : 0,
           (unsigned long long)b->c.gets, (unsigned long long)b->c.get_hits,
           (unsigned long long)b->c.get_misses, (unsigned long long)b->c.sets);
    printf("latency us: min %.1f  p50 %.1f  p99 %.1f  p99.9 %.1f  max %.1f  mean %.1f\n",
           h->count ? (double)h->min / 1e3 : 0, (double)core_hist_percentile(h, 50) / 1e3,
           (double)core_hist_percentile(h, 99) / 1e3, (double)core_hist_percentile(h, 99.9) / 1e3,
           (double)h->max / 1e3, core_hist_mean(h) / 1e3);
    if (o->rate > 0)
        printf("open loop: %llu requests due in the window were never sent (server behind)\n",
               (unsigned long long)b->c.unsent);
    printf("errors: %llu (error replies %llu, unexpected %llu, protocol %llu, lost %llu, "
           "connections closed %llu)\n",
           (unsigned long long)errors_total(&b->c), (unsigned long long)b->c.error_replies,
           (unsigned long long)b->c.unexpected, (unsigned long long)b->c.protocol,
           (unsigned long long)b->c.lost, (unsigned long long)b->c.closed);
    if (o->cluster)
        printf("cluster: %u nodes, MOVED followed %llu, ASK followed %llu, slot map read %llu "
               "times\n",
               b->nnodes, (unsigned long long)b->c.moved, (unsigned long long)b->c.asked,
               (unsigned long long)b->c.map_reads);
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static int report_json(const struct bench *b, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "gs-bench: %s: %s\n", path, strerror(errno));
        return core_from_errno(errno);
    }
    const struct options *o = &b->o;
    const struct core_hist *h = &b->hist;
    double secs = measured_seconds(b);
    fprintf(f, "{\n  \"tool\": \"gs-bench\",\n  \"config\": {\"host\": ");
    json_string(f, o->host);
    fprintf(f, ", \"port\": ");
    json_string(f, o->port);
    fprintf(f,
            ", \"protocol\": \"%s\", \"connections\": %u, \"pipeline\": %u, \"keys\": %llu, "
            "\"zipf\": %g, \"value_size\": %zu, \"get_ratio\": %g, \"load\": %s, "
            "\"duration_s\": %g, \"requests\": %llu, \"warmup_s\": %g, \"rate\": %g, "
            "\"seed\": %llu},\n",
            o->proto == GSB_PROTO_RESP ? "resp" : "memcache", o->conns, o->pipeline,
            (unsigned long long)o->keys, o->zipf, o->value_size, o->get_ratio,
            o->load ? "true" : "false", o->duration_s, (unsigned long long)o->requests, o->warmup_s,
            o->rate, (unsigned long long)o->seed);
    fprintf(f,
            "  \"results\": {\"seconds\": %.6f, \"requests\": %llu, \"throughput\": %.1f, "
            "\"gets\": %llu, \"get_hits\": %llu, \"get_misses\": %llu, \"sets\": %llu, "
            "\"loaded\": %llu, \"sent_total\": %llu,\n",
            secs, (unsigned long long)b->c.completed, secs > 0 ? (double)b->c.completed / secs : 0,
            (unsigned long long)b->c.gets, (unsigned long long)b->c.get_hits,
            (unsigned long long)b->c.get_misses, (unsigned long long)b->c.sets,
            (unsigned long long)b->load_done, (unsigned long long)b->c.sent);
    fprintf(
        f,
        "    \"errors\": {\"total\": %llu, \"error_replies\": %llu, \"unexpected\": %llu, "
        "\"protocol\": %llu, \"lost\": %llu, \"connections_closed\": %llu}, \"unsent\": %llu,\n",
        (unsigned long long)errors_total(&b->c), (unsigned long long)b->c.error_replies,
        (unsigned long long)b->c.unexpected, (unsigned long long)b->c.protocol,
        (unsigned long long)b->c.lost, (unsigned long long)b->c.closed,
        (unsigned long long)b->c.unsent);
    fprintf(f,
            "    \"cluster\": {\"nodes\": %u, \"moved\": %llu, \"asked\": %llu, \"map_reads\": "
            "%llu},\n",
            b->nodes_at_start ? b->nnodes : 0, (unsigned long long)b->c.moved,
            (unsigned long long)b->c.asked, (unsigned long long)b->c.map_reads);
    fprintf(f,
            "    \"latency_us\": {\"min\": %.3f, \"mean\": %.3f, \"p50\": %.3f, \"p90\": %.3f, "
            "\"p99\": %.3f, \"p99.9\": %.3f, \"p99.99\": %.3f, \"max\": %.3f},\n",
            h->count ? (double)h->min / 1e3 : 0, core_hist_mean(h) / 1e3,
            (double)core_hist_percentile(h, 50) / 1e3, (double)core_hist_percentile(h, 90) / 1e3,
            (double)core_hist_percentile(h, 99) / 1e3, (double)core_hist_percentile(h, 99.9) / 1e3,
            (double)core_hist_percentile(h, 99.99) / 1e3, (double)h->max / 1e3);
    /* The percentile curve, evenly spaced in log(1 / (1 - p)) as
     * HdrHistogram plots it: ten points per decade up to 99.999 %. */
    fprintf(f, "    \"percentiles\": [");
    for (int i = 0; i <= 50; i++) {
        double p = 100.0 * (1.0 - pow(10.0, -(double)i / 10.0));
        fprintf(f, "%s[%.5f, %.3f]", i ? ", " : "", p, (double)core_hist_percentile(h, p) / 1e3);
    }
    fprintf(f, ", [100, %.3f]],\n", (double)h->max / 1e3);
    /* The raw buckets (index, upper bound in ns, count), so that runs can
     * be merged exactly. */
    fprintf(f, "    \"buckets\": [");
    bool first = true;
    for (unsigned i = 0; i < CORE_HIST_BUCKETS; i++) {
        if (!h->buckets[i])
            continue;
        fprintf(f, "%s[%u, %llu, %llu]", first ? "" : ", ", i,
                (unsigned long long)core_hist_bucket_high(i), (unsigned long long)h->buckets[i]);
        first = false;
    }
    fprintf(f, "]\n  }\n}\n");
    if (fclose(f) != 0) {
        fprintf(stderr, "gs-bench: %s: %s\n", path, strerror(errno));
        return CORE_EIO;
    }
    return 0;
}

/* ---- main ------------------------------------------------------------- */

static struct bench bench; /* the histograms are large: not on the stack */

static int setup(struct bench *b)
{
    int err = templates_build(&b->tpl, b->o.proto, b->o.value_size);
    if (err)
        return err;
    err = keychooser_init(&b->kc, b->o.keys, b->o.zipf);
    if (err)
        return err;
    rng_seed(&b->rng, b->o.seed);
    core_hist_reset(&b->hist);
    core_hist_reset(&b->interval);

    /* Sizes are fixed here for the whole run (invariant 1). */
    unsigned depth = b->o.pipeline > 32 ? b->o.pipeline : 32; /* load phase depth */
    unsigned ring_cap = b->o.rate > 0 ? b->o.max_inflight : b->o.pipeline;
    if (ring_cap < depth && b->o.load)
        ring_cap = depth;
    if (ring_cap < b->o.pipeline)
        ring_cap = b->o.pipeline;
    b->nconns = b->o.conns;
    if (b->o.cluster) {
        b->map_buf = malloc(MAP_BUF);
        if (!b->map_buf)
            return CORE_ENOMEM;
        b->map_from = -1;
        if (node_find_or_add(b, b->o.host, strlen(b->o.host), strtol(b->o.port, NULL, 10)) < 0)
            return CORE_EINVAL;
        err = map_read(b, 0);
        if (err)
            return err;
        b->nodes_at_start = b->nnodes;
        /* Every request in flight may be redirected to one node, each
         * with an ASKING before it: its connections hold them all. */
        b->outstanding_cap = (uint64_t)depth * b->o.conns * b->nnodes;
        ring_cap = 2 * depth * b->nnodes;
        b->pend_cap = (unsigned)b->outstanding_cap;
        b->pend = calloc(b->pend_cap, sizeof(*b->pend));
        b->nconns = MAX_NODES * b->o.conns;
        if (!b->pend)
            return CORE_ENOMEM;
    }
    /* Output: one batch of requests; an open-loop burst beyond it waits
     * for the next iteration (its latency still counts from its intended
     * time). */
    unsigned batch = ring_cap < 64 ? ring_cap : 64;
    if (batch < b->o.pipeline)
        batch = b->o.pipeline;
    size_t batch_cap = (4u << 20) / b->tpl.max_len; /* large values: smaller batches */
    if (batch > batch_cap)
        batch = batch_cap > 0 ? (unsigned)batch_cap : 1;
    b->in = malloc(IN_BUF_SIZE);
    b->conns = calloc(b->nconns, sizeof(*b->conns));
    if (!b->in || !b->conns)
        return CORE_ENOMEM;
    for (unsigned i = 0; i < b->nconns; i++) {
        struct conn *cn = &b->conns[i];
        cn->fd = -1;
        cn->ring_cap = ring_cap;
        cn->ring = calloc(ring_cap, sizeof(*cn->ring));
        cn->out_cap = (size_t)batch * b->tpl.max_len;
        cn->out = malloc(cn->out_cap);
        if (!cn->ring || !cn->out)
            return CORE_ENOMEM;
    }
    b->ep = epoll_create1(EPOLL_CLOEXEC);
    if (b->ep < 0)
        return core_from_errno(errno);
    return 0;
}

int main(int argc, char **argv)
{
    struct bench *b = &bench;
    if (core_proc_version("gs-bench", argc, argv))
        return 0;
    int rc = parse_options(argc, argv, &b->o);
    if (rc)
        return rc > 0 ? 0 : 2;
    b->tty = isatty(STDERR_FILENO);
    b->progress = b->o.progress;
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_sigint};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    rc = setup(b);
    if (rc) {
        fprintf(stderr, "gs-bench: setup: %s\n", core_strerror(rc));
        return 1;
    }
    if (b->o.cluster) {
        for (unsigned i = 0; i < b->nnodes && !rc; i++)
            rc = node_open(b, i);
    } else {
        rc = open_connections(b);
    }
    if (rc)
        return 1;
    rc = run(b);
    if (rc)
        return 1;
    report_text(b);
    if (b->o.json_path && report_json(b, b->o.json_path))
        return 1;
    return 0;
}
