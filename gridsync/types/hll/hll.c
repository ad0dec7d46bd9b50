/*
 * HyperLogLog in Redis 7.0's format (hll.h).
 */
#include "gridsync/types/hll/hll.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define P         14
#define Q         (64 - P) /* the hash bits that make the run */
#define REG_BYTES (GS_HLL_REGISTERS * 6 / 8)
#define ALPHA_INF 0.721347520444481703680 /* 0.5 / ln 2 */

/* Sparse opcodes. */
#define XZERO_BIT     0x40
#define VAL_BIT       0x80
#define VAL_MAX_VALUE 32
#define VAL_MAX_LEN   4
#define ZERO_MAX_LEN  64
#define XZERO_MAX_LEN 16384

static bool op_zero(const uint8_t *p)
{
    return (*p & 0xc0) == 0;
}

static bool op_xzero(const uint8_t *p)
{
    return (*p & 0xc0) == XZERO_BIT;
}

static bool op_val(const uint8_t *p)
{
    return (*p & VAL_BIT) != 0;
}

static unsigned zero_len(const uint8_t *p)
{
    return (unsigned)(*p & 0x3f) + 1;
}

static unsigned xzero_len(const uint8_t *p)
{
    return ((unsigned)(p[0] & 0x3f) << 8 | p[1]) + 1;
}

static unsigned val_value(const uint8_t *p)
{
    return (unsigned)((*p >> 2) & 0x1f) + 1;
}

static unsigned val_len(const uint8_t *p)
{
    return (unsigned)(*p & 0x3) + 1;
}

static void put_val(uint8_t *p, unsigned value, unsigned len)
{
    *p = (uint8_t)(((value - 1) << 2 | (len - 1)) | VAL_BIT);
}

/* A run of len zero registers: ZERO up to 64, else XZERO. Returns the
 * bytes written. */
static size_t put_zeros(uint8_t *p, unsigned len)
{
    if (len > ZERO_MAX_LEN) {
        unsigned l = len - 1;
        p[0] = (uint8_t)((l >> 8) | XZERO_BIT);
        p[1] = (uint8_t)(l & 0xff);
        return 2;
    }
    p[0] = (uint8_t)(len - 1);
    return 1;
}

/* ------------------------------------------------------------ header */

bool gs_hll_is_hll(const void *v, size_t len)
{
    const uint8_t *p = v;
    if (len < GS_HLL_HDR_SIZE || memcmp(p, "HYLL", 4) != 0 || p[4] > GS_HLL_SPARSE)
        return false;
    return p[4] != GS_HLL_DENSE || len == GS_HLL_DENSE_SIZE;
}

bool gs_hll_cache_valid(const void *v)
{
    return (((const uint8_t *)v)[15] & 0x80) == 0;
}

uint64_t gs_hll_cache_get(const void *v)
{
    const uint8_t *card = (const uint8_t *)v + 8;
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--)
        x = x << 8 | card[i];
    return x;
}

void gs_hll_cache_put(void *v, uint64_t card)
{
    uint8_t *p = (uint8_t *)v + 8;
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(card >> (8 * i));
}

void gs_hll_cache_invalidate(void *v)
{
    ((uint8_t *)v)[15] |= 0x80;
}

int gs_hll_init(struct core_buf *b)
{
    b->len = 0;
    uint8_t *p = (uint8_t *)core_buf_reserve(b, GS_HLL_SPARSE_NEW);
    if (!p)
        return GS_HLL_NOMEM;
    memset(p, 0, GS_HLL_SPARSE_NEW);
    memcpy(p, "HYLL", 4);
    p[4] = GS_HLL_SPARSE;
    put_zeros(p + GS_HLL_HDR_SIZE, GS_HLL_REGISTERS);
    b->len = GS_HLL_SPARSE_NEW;
    return 0;
}

/* -------------------------------------------------------------- hash */

uint64_t gs_hll_murmur64a(const void *key, size_t len, uint32_t seed)
{
    const uint64_t m = 0xc6a4a7935bd1e995ull;
    const int r = 47;
    const uint8_t *data = key;
    /* Redis takes the length as an int. */
    uint64_t h = seed ^ ((uint64_t)(int)len * m);
    size_t blocks = len / 8;
    for (size_t i = 0; i < blocks; i++) {
        uint64_t k = 0;
        for (int j = 7; j >= 0; j--)
            k = k << 8 | data[8 * i + (size_t)j];
        k *= m;
        k ^= k >> r;
        k *= m;
        h ^= k;
        h *= m;
    }
    const uint8_t *tail = data + blocks * 8;
    size_t rest = len & 7;
    if (rest) {
        for (size_t j = rest; j-- > 0;)
            h ^= (uint64_t)tail[j] << (8 * j);
        h *= m;
    }
    h ^= h >> r;
    h *= m;
    h ^= h >> r;
    return h;
}

/* The register an element goes to and the length of its 0...1 run. */
static uint8_t pattern(const void *ele, size_t len, unsigned *reg)
{
    uint64_t hash = gs_hll_murmur64a(ele, len, 0xadc83b19u);
    *reg = (unsigned)(hash & (GS_HLL_REGISTERS - 1));
    hash >>= P;
    hash |= (uint64_t)1 << Q; /* the run ends by bit Q */
    uint8_t count = 1;
    for (uint64_t bit = 1; (hash & bit) == 0; bit <<= 1)
        count++;
    return count;
}

/* ------------------------------------------------------------- dense */

uint8_t gs_hll_dense_get(const void *v, unsigned i)
{
    const uint8_t *r = (const uint8_t *)v + GS_HLL_HDR_SIZE;
    size_t byte = (size_t)i * 6 / 8;
    unsigned fb = (i * 6) & 7;
    unsigned b0 = r[byte];
    unsigned b1 = byte + 1 < REG_BYTES ? r[byte + 1] : 0;
    return (uint8_t)(((b0 >> fb) | (b1 << (8 - fb))) & 63);
}

static void dense_put(uint8_t *v, unsigned i, unsigned val)
{
    uint8_t *r = v + GS_HLL_HDR_SIZE;
    size_t byte = (size_t)i * 6 / 8;
    unsigned fb = (i * 6) & 7;
    r[byte] = (uint8_t)((r[byte] & ~(63u << fb)) | (val << fb));
    if (byte + 1 < REG_BYTES)
        r[byte + 1] = (uint8_t)((r[byte + 1] & ~(63u >> (8 - fb))) | (val >> (8 - fb)));
}

static int dense_set(uint8_t *v, unsigned i, uint8_t count)
{
    if (count <= gs_hll_dense_get(v, i))
        return 0;
    dense_put(v, i, count);
    return 1;
}

/* ------------------------------------------------------------ sparse */

/* Call fn(arg, first register, run length, value) for each run of the
 * sparse form; false when it does not cover exactly 16384 registers. */
typedef void run_fn(void *arg, unsigned first, unsigned len, unsigned value);

static bool sparse_runs(const uint8_t *p, const uint8_t *end, run_fn *fn, void *arg)
{
    unsigned idx = 0;
    while (p < end) {
        unsigned len, value = 0;
        if (op_zero(p)) {
            len = zero_len(p);
            p++;
        } else if (op_xzero(p)) {
            if (p + 1 >= end)
                return false;
            len = xzero_len(p);
            p += 2;
        } else {
            len = val_len(p);
            value = val_value(p);
            p++;
        }
        if (len + idx > GS_HLL_REGISTERS)
            return false;
        fn(arg, idx, len, value);
        idx += len;
    }
    return idx == GS_HLL_REGISTERS;
}

static void run_to_dense(void *arg, unsigned first, unsigned len, unsigned value)
{
    if (value)
        for (unsigned i = first; i < first + len; i++)
            dense_put(arg, i, value);
}

int gs_hll_to_dense(struct core_buf *b)
{
    uint8_t *old = (uint8_t *)b->data;
    if (old[4] == GS_HLL_DENSE)
        return 0;
    struct core_buf d = {0};
    uint8_t *p = (uint8_t *)core_buf_reserve(&d, GS_HLL_DENSE_SIZE);
    if (!p)
        return GS_HLL_NOMEM;
    memset(p, 0, GS_HLL_DENSE_SIZE);
    memcpy(p, old, GS_HLL_HDR_SIZE); /* the magic and the cached count */
    p[4] = GS_HLL_DENSE;
    if (!sparse_runs(old + GS_HLL_HDR_SIZE, old + b->len, run_to_dense, p)) {
        core_buf_free(&d);
        return GS_HLL_INVALID;
    }
    d.len = GS_HLL_DENSE_SIZE;
    core_buf_free(b);
    *b = d;
    return 0;
}

/* Raise register index to count in the sparse form (Redis's
 * hllSparseSet, see hll.h). */
static int sparse_set(struct core_buf *b, unsigned index, uint8_t count, size_t sparse_max)
{
    if (count > VAL_MAX_VALUE)
        goto promote;
    /* The worst edit grows the form by 3 bytes (XZERO -> XZERO VAL XZERO). */
    if (!core_buf_reserve(b, 3))
        return GS_HLL_NOMEM;
    uint8_t *sparse = (uint8_t *)b->data + GS_HLL_HDR_SIZE;
    uint8_t *end = (uint8_t *)b->data + b->len;
    uint8_t *p = sparse, *prev = NULL, *next;
    unsigned first = 0, span = 0;
    while (p < end) {
        size_t oplen = 1;
        if (op_zero(p)) {
            span = zero_len(p);
        } else if (op_val(p)) {
            span = val_len(p);
        } else {
            if (p + 1 >= end)
                return GS_HLL_INVALID;
            span = xzero_len(p);
            oplen = 2;
        }
        if (index <= first + span - 1)
            break;
        prev = p;
        p += oplen;
        first += span;
    }
    if (span == 0 || p >= end)
        return GS_HLL_INVALID;
    bool is_zero = op_zero(p), is_xzero = op_xzero(p), is_val = op_val(p);
    next = is_xzero ? p + 2 : p + 1;
    if (next >= end)
        next = NULL;
    unsigned runlen = is_zero ? zero_len(p) : is_xzero ? xzero_len(p) : val_len(p);

    if (is_val) {
        if (val_value(p) >= count)
            return 0;
        if (runlen == 1) {
            put_val(p, count, 1);
            goto updated;
        }
    }
    if (is_zero && runlen == 1) {
        put_val(p, count, 1);
        goto updated;
    }
    {
        /* Split the run into (before) VAL:count,1 (after). */
        uint8_t seq[5], *n = seq;
        unsigned last = first + span - 1;
        if (is_zero || is_xzero) {
            if (index != first)
                n += put_zeros(n, index - first);
            put_val(n++, count, 1);
            if (index != last)
                n += put_zeros(n, last - index);
        } else {
            unsigned cur = val_value(p);
            if (index != first)
                put_val(n++, cur, index - first);
            put_val(n++, count, 1);
            if (index != last)
                put_val(n++, cur, last - index);
        }
        size_t seqlen = (size_t)(n - seq), oldlen = is_xzero ? 2 : 1;
        if (seqlen > oldlen && b->len + (seqlen - oldlen) > sparse_max)
            goto promote;
        if (seqlen != oldlen && next)
            memmove(p + seqlen, next, (size_t)(end - next));
        memcpy(p, seq, seqlen);
        b->len = b->len + seqlen - oldlen;
        end = (uint8_t *)b->data + b->len;
    }
updated:
    /* Merge equal VALs next to each other, over at most five opcodes
     * from the one before the edit. */
    p = prev ? prev : sparse;
    for (int scan = 5; p < end && scan-- > 0;) {
        if (op_xzero(p)) {
            p += 2;
            continue;
        }
        if (op_zero(p)) {
            p++;
            continue;
        }
        if (p + 1 < end && op_val(p + 1)) {
            unsigned v1 = val_value(p), v2 = val_value(p + 1);
            unsigned len = val_len(p) + val_len(p + 1);
            if (v1 == v2 && len <= VAL_MAX_LEN) {
                put_val(p + 1, v1, len);
                memmove(p, p + 1, (size_t)(end - p - 1));
                b->len--;
                end--;
                continue; /* and try the merged one with the next */
            }
        }
        p++;
    }
    gs_hll_cache_invalidate(b->data);
    return 1;

promote : {
    int rc = gs_hll_to_dense(b);
    if (rc)
        return rc;
    return dense_set((uint8_t *)b->data, index, count) ? 1 : 0;
}
}

int gs_hll_set(struct core_buf *b, unsigned index, uint8_t count, size_t sparse_max)
{
    uint8_t *p = (uint8_t *)b->data;
    if (p[4] == GS_HLL_DENSE)
        return dense_set(p, index, count);
    return sparse_set(b, index, count, sparse_max);
}

int gs_hll_add(struct core_buf *b, const void *ele, size_t len, size_t sparse_max)
{
    unsigned reg;
    uint8_t count = pattern(ele, len, &reg);
    return gs_hll_set(b, reg, count, sparse_max);
}

/* ------------------------------------------------------------- count */

static void run_to_max(void *arg, unsigned first, unsigned len, unsigned value)
{
    uint8_t *max = arg;
    for (unsigned i = first; i < first + len; i++)
        if (value > max[i])
            max[i] = (uint8_t)value;
}

int gs_hll_merge(uint8_t max[GS_HLL_REGISTERS], const void *v, size_t len)
{
    const uint8_t *p = v;
    if (p[4] == GS_HLL_DENSE) {
        for (unsigned i = 0; i < GS_HLL_REGISTERS; i++) {
            uint8_t r = gs_hll_dense_get(p, i);
            if (r > max[i])
                max[i] = r;
        }
        return 0;
    }
    return sparse_runs(p + GS_HLL_HDR_SIZE, p + len, run_to_max, max) ? 0 : GS_HLL_INVALID;
}

/* Ertl's sigma and tau, as Redis computes them. */
static double hll_sigma(double x)
{
    if (x == 1.)
        return INFINITY;
    double zp, y = 1, z = x;
    do {
        x *= x;
        zp = z;
        z += x * y;
        y += y;
    } while (zp != z);
    return z;
}

static double hll_tau(double x)
{
    if (x == 0. || x == 1.)
        return 0.;
    double zp, y = 1.0, z = 1 - x;
    do {
        x = sqrt(x);
        zp = z;
        y *= 0.5;
        z -= pow(1 - x, 2) * y;
    } while (zp != z);
    return z / 3;
}

static uint64_t estimate(const int histo[64])
{
    double m = GS_HLL_REGISTERS;
    double z = m * hll_tau((m - histo[Q + 1]) / (double)m);
    for (int j = Q; j >= 1; --j) {
        z += histo[j];
        z *= 0.5;
    }
    z += m * hll_sigma(histo[0] / (double)m);
    return (uint64_t)llroundl(ALPHA_INF * m * m / z);
}

struct histo_arg {
    int h[64];
};

static void run_to_histo(void *arg, unsigned first, unsigned len, unsigned value)
{
    (void)first;
    ((struct histo_arg *)arg)->h[value] += (int)len;
}

uint64_t gs_hll_count(const void *v, size_t len, bool *invalid)
{
    const uint8_t *p = v;
    struct histo_arg a = {{0}};
    if (p[4] == GS_HLL_DENSE) {
        for (unsigned i = 0; i < GS_HLL_REGISTERS; i++)
            a.h[gs_hll_dense_get(p, i)]++;
    } else if (!sparse_runs(p + GS_HLL_HDR_SIZE, p + len, run_to_histo, &a)) {
        *invalid = true;
    }
    return estimate(a.h);
}

uint64_t gs_hll_count_registers(const uint8_t regs[GS_HLL_REGISTERS])
{
    int h[64] = {0};
    for (unsigned i = 0; i < GS_HLL_REGISTERS; i++)
        h[regs[i] & 63]++;
    return estimate(h);
}

/* ----------------------------------------------------------- PFDEBUG */

void gs_hll_decode(const void *v, size_t len, struct core_buf *out)
{
    const uint8_t *p = (const uint8_t *)v + GS_HLL_HDR_SIZE, *end = (const uint8_t *)v + len;
    char tmp[32];
    bool any = false;
    while (p < end) {
        int n;
        if (op_zero(p)) {
            n = snprintf(tmp, sizeof(tmp), "z:%u", zero_len(p));
            p++;
        } else if (op_xzero(p) && p + 1 < end) {
            n = snprintf(tmp, sizeof(tmp), "Z:%u", xzero_len(p));
            p += 2;
        } else if (op_xzero(p)) {
            break;
        } else {
            n = snprintf(tmp, sizeof(tmp), "v:%u,%u", val_value(p), val_len(p));
            p++;
        }
        if (any)
            core_buf_append(out, " ", 1);
        core_buf_append(out, tmp, (size_t)n);
        any = true;
    }
}
