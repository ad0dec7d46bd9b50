/*
 * Metrics registry, latency window and the health beacon (see metrics.h).
 *
 * Invariant: ring_read <= ring_head; the window of a beacon is the samples
 * in [max(ring_read, ring_head - RING), ring_head). Samples older than the
 * ring's size were overwritten and are simply not in the window.
 */
#include "core/metrics.h"

#include "core/clock.h"
#include "core/error.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const uint64_t core_metrics_lat_bounds_ns[CORE_METRICS_LAT_BOUNDS] = {
    1000,   2000,    5000,    10000,   20000,    50000,    100000,    200000,
    500000, 1000000, 2000000, 5000000, 10000000, 50000000, 100000000, 1000000000,
};

static bool valid_name(const char *s, size_t len)
{
    if (len == 0 || len >= CORE_METRICS_NAME)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
            return false;
    }
    return true;
}

int core_metrics_init(struct core_metrics *m, const char *proc)
{
    memset(m, 0, sizeof *m);
    if (!valid_name(proc, strlen(proc)))
        return CORE_EINVAL;
    strcpy(m->proc, proc);
    m->start_ns = core_now_ns();
    return 0;
}

static int add(struct core_metrics *m, const char *name, enum core_metric_kind kind,
               const void *cell)
{
    if (!valid_name(name, strlen(name)) || !cell)
        return CORE_EINVAL;
    for (unsigned i = 0; i < m->n; i++)
        if (strcmp(m->m[i].name, name) == 0)
            return CORE_EEXISTS;
    if (m->n == CORE_METRICS_MAX)
        return CORE_ETOOBIG;
    strcpy(m->m[m->n].name, name);
    m->m[m->n].kind = kind;
    m->m[m->n].cell = cell;
    m->n++;
    return 0;
}

int core_metrics_counter(struct core_metrics *m, const char *name, const uint64_t *cell)
{
    return add(m, name, CORE_METRIC_COUNTER, cell);
}

int core_metrics_gauge(struct core_metrics *m, const char *name, const int64_t *cell)
{
    return add(m, name, CORE_METRIC_GAUGE, cell);
}

uint64_t core_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    unsigned long long size = 0, resident = 0;
    int n = fscanf(f, "%llu %llu", &size, &resident);
    fclose(f);
    if (n != 2)
        return 0;
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array. */
static uint32_t rank(const uint32_t *v, size_t n, unsigned pct)
{
    if (n == 0)
        return 0;
    size_t r = (n * pct + 99) / 100; /* ceil(n * pct / 100), 1-based */
    return v[r ? r - 1 : 0];
}

int core_metrics_beacon(struct core_metrics *m, char *out, size_t cap)
{
    uint64_t from = m->ring_read;
    if (m->ring_head - from > CORE_METRICS_RING)
        from = m->ring_head - CORE_METRICS_RING;
    size_t n = (size_t)(m->ring_head - from);
    for (size_t i = 0; i < n; i++)
        m->scratch[i] = m->ring[(from + i) & (CORE_METRICS_RING - 1)];
    qsort(m->scratch, n, sizeof *m->scratch, cmp_u32);
    /* Sorted, so one pass over the bounds counts every bucket. */
    uint64_t hist[CORE_METRICS_LAT_BOUNDS + 1] = {0}, sum = 0;
    for (size_t i = 0, b = 0; i < n; i++) {
        while (b < CORE_METRICS_LAT_BOUNDS && m->scratch[i] > core_metrics_lat_bounds_ns[b])
            b++;
        hist[b]++;
        sum += m->scratch[i];
    }

    size_t len = 0;
    int w = snprintf(out, cap,
                     "health v=1 proc=%s pid=%d seq=%" PRIu64 " up_ms=%" PRIu64 " rss=%" PRIu64
                     " lat_n=%zu lat_p50=%u lat_p99=%u lat_max=%u",
                     m->proc, (int)getpid(), m->seq + 1, (core_now_ns() - m->start_ns) / 1000000u,
                     core_rss_bytes(), n, rank(m->scratch, n, 50), rank(m->scratch, n, 99),
                     n ? m->scratch[n - 1] : 0);
    if (w < 0 || (size_t)w >= cap)
        return CORE_ETOOBIG;
    len = (size_t)w;
    for (unsigned i = 0; i < m->n; i++) {
        const struct core_metric *c = &m->m[i];
        if (c->kind == CORE_METRIC_COUNTER)
            w = snprintf(out + len, cap - len, " c.%s=%" PRIu64, c->name,
                         *(const uint64_t *)c->cell);
        else
            w = snprintf(out + len, cap - len, " g.%s=%" PRId64, c->name,
                         *(const int64_t *)c->cell);
        if (w < 0 || (size_t)w >= cap - len)
            return CORE_ETOOBIG;
        len += (size_t)w;
    }
    uint64_t lat_sum = m->lat_sum + sum < m->lat_sum ? UINT64_MAX : m->lat_sum + sum;
    w = snprintf(out + len, cap - len,
                 " lat_cnt=%" PRIu64 " lat_sum=%" PRIu64 " lat_h=", m->lat_cnt + n, lat_sum);
    if (w < 0 || (size_t)w >= cap - len)
        return CORE_ETOOBIG;
    len += (size_t)w;
    for (unsigned b = 0; b <= CORE_METRICS_LAT_BOUNDS; b++) {
        w = snprintf(out + len, cap - len, "%s%" PRIu64, b ? "," : "", m->lat_h[b] + hist[b]);
        if (w < 0 || (size_t)w >= cap - len)
            return CORE_ETOOBIG;
        len += (size_t)w;
    }
    /* Only a beacon that fits consumes the window. */
    for (unsigned b = 0; b <= CORE_METRICS_LAT_BOUNDS; b++)
        m->lat_h[b] += hist[b];
    m->lat_cnt += n;
    m->lat_sum = lat_sum;
    m->ring_read = m->ring_head;
    m->seq++;
    return (int)len;
}

/* Parse an unsigned decimal of 1-19 digits. */
static bool parse_u64(const char *s, size_t len, uint64_t *out)
{
    if (len == 0 || len > 19)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

static bool parse_i64(const char *s, size_t len, int64_t *out)
{
    bool neg = len > 0 && s[0] == '-';
    uint64_t v;
    if (!parse_u64(s + neg, len - neg, &v))
        return false;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return true;
}

int core_beacon_parse(const char *line, size_t len, struct core_beacon *out)
{
    memset(out, 0, sizeof *out);
    static const char head[] = "health ";
    if (len < sizeof head - 1 || memcmp(line, head, sizeof head - 1) != 0)
        return CORE_EPROTO;
    size_t i = sizeof head - 1;
    bool have_version = false;
    while (i < len) {
        size_t start = i;
        while (i < len && line[i] != ' ')
            i++;
        const char *tok = line + start;
        size_t tl = i - start;
        if (i < len)
            i++; /* the space */
        if (tl == 0)
            return CORE_EPROTO; /* two spaces, or a trailing one */
        const char *eq = memchr(tok, '=', tl);
        if (!eq)
            return CORE_EPROTO;
        size_t kl = (size_t)(eq - tok);
        const char *val = eq + 1;
        size_t vl = tl - kl - 1;
        if (kl >= 2 && (tok[0] == 'c' || tok[0] == 'g') && tok[1] == '.') {
            if (!valid_name(tok + 2, kl - 2) || out->n == CORE_METRICS_MAX)
                return CORE_EPROTO;
            int64_t v;
            if (tok[0] == 'c') {
                uint64_t u;
                if (!parse_u64(val, vl, &u) || u > INT64_MAX)
                    return CORE_EPROTO;
                v = (int64_t)u;
            } else if (!parse_i64(val, vl, &v)) {
                return CORE_EPROTO;
            }
            memcpy(out->m[out->n].name, tok + 2, kl - 2);
            out->m[out->n].name[kl - 2] = '\0';
            out->m[out->n].kind = tok[0] == 'c' ? CORE_METRIC_COUNTER : CORE_METRIC_GAUGE;
            out->m[out->n].value = v;
            out->n++;
            continue;
        }
        if (kl == 5 && memcmp(tok, "lat_h", 5) == 0) {
            unsigned k = 0;
            size_t at = 0;
            for (;;) {
                size_t end = at;
                while (end < vl && val[end] != ',')
                    end++;
                if (k > CORE_METRICS_LAT_BOUNDS || !parse_u64(val + at, end - at, &out->lat_h[k]))
                    return CORE_EPROTO;
                k++;
                if (end == vl)
                    break;
                at = end + 1;
            }
            if (k != CORE_METRICS_LAT_BOUNDS + 1)
                return CORE_EPROTO;
            out->has_hist = true;
            continue;
        }
        if (kl == 4 && memcmp(tok, "proc", 4) == 0) {
            if (!valid_name(val, vl))
                return CORE_EPROTO;
            memcpy(out->proc, val, vl);
            out->proc[vl] = '\0';
            continue;
        }
        static const struct {
            const char *key;
            size_t off;
        } nums[] = {
            {"pid", offsetof(struct core_beacon, pid)},
            {"seq", offsetof(struct core_beacon, seq)},
            {"up_ms", offsetof(struct core_beacon, up_ms)},
            {"rss", offsetof(struct core_beacon, rss)},
            {"lat_n", offsetof(struct core_beacon, lat_n)},
            {"lat_p50", offsetof(struct core_beacon, lat_p50)},
            {"lat_p99", offsetof(struct core_beacon, lat_p99)},
            {"lat_max", offsetof(struct core_beacon, lat_max)},
            {"lat_cnt", offsetof(struct core_beacon, lat_cnt)},
            {"lat_sum", offsetof(struct core_beacon, lat_sum)},
        };
        bool known = false;
        for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++) {
            if (strlen(nums[k].key) == kl && memcmp(nums[k].key, tok, kl) == 0) {
                if (!parse_u64(val, vl, (uint64_t *)((char *)out + nums[k].off)))
                    return CORE_EPROTO;
                known = true;
                break;
            }
        }
        if (!known && kl == 1 && tok[0] == 'v') {
            uint64_t v;
            if (!parse_u64(val, vl, &v) || v != 1)
                return CORE_EPROTO;
            have_version = true;
        }
        /* other keys: from a newer writer; ignored */
    }
    if (!have_version || out->proc[0] == '\0')
        return CORE_EPROTO;
    return 0;
}
