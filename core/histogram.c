/* Log-linear histogram; see histogram.h for the bucket layout. */
#include "core/histogram.h"

#include <string.h>

void core_hist_reset(struct core_hist *h)
{
    memset(h, 0, sizeof(*h));
    h->min = UINT64_MAX;
}

void core_hist_merge(struct core_hist *dst, const struct core_hist *src)
{
    if (src->count == 0)
        return;
    for (unsigned i = 0; i < CORE_HIST_BUCKETS; i++)
        dst->buckets[i] += src->buckets[i];
    dst->count += src->count;
    uint64_t s = dst->sum + src->sum;
    dst->sum = s < dst->sum ? UINT64_MAX : s;
    if (src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
}

uint64_t core_hist_bucket_low(unsigned idx)
{
    if (idx < 2 * CORE_HIST_SUB)
        return idx;
    unsigned e = idx / CORE_HIST_SUB - 1;
    uint64_t m = idx % CORE_HIST_SUB + CORE_HIST_SUB;
    return m << e;
}

uint64_t core_hist_bucket_high(unsigned idx)
{
    if (idx < 2 * CORE_HIST_SUB)
        return idx;
    unsigned e = idx / CORE_HIST_SUB - 1;
    uint64_t m = idx % CORE_HIST_SUB + CORE_HIST_SUB;
    if (e == 63 - CORE_HIST_SUB_BITS && m == 2 * CORE_HIST_SUB - 1)
        return UINT64_MAX;
    return ((m + 1) << e) - 1;
}

uint64_t core_hist_percentile(const struct core_hist *h, double p)
{
    if (h->count == 0)
        return 0;
    if (p <= 0)
        return h->min;
    if (p >= 100)
        return h->max;
    /* The rank of the p-th value, 1-based, rounded up (nearest-rank). */
    double want = p / 100.0 * (double)h->count;
    uint64_t rank = (uint64_t)want;
    if ((double)rank < want)
        rank++;
    if (rank == 0)
        rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < CORE_HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank) {
            uint64_t v = core_hist_bucket_high(i);
            if (v > h->max)
                v = h->max;
            if (v < h->min)
                v = h->min;
            return v;
        }
    }
    return h->max;
}

double core_hist_mean(const struct core_hist *h)
{
    return h->count ? (double)h->sum / (double)h->count : 0.0;
}
