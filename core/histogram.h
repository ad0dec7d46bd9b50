/*
 * Log-linear latency histogram (the HdrHistogram layout, fixed precision).
 *
 * Values are unsigned 64-bit (nanoseconds, by convention). Values below
 * 2^CORE_HIST_SUB_BITS are counted exactly; above, each power of two is cut
 * into 2^CORE_HIST_SUB_BITS equal buckets, so a reported percentile is at
 * most 1/128 (0.8 %) above the true value. The struct is a fixed ~59 KB
 * block with no pointers: allocate it once (statically, or with the object
 * that owns it) and record into it on a hot path without allocation.
 */
#ifndef CORE_HISTOGRAM_H
#define CORE_HISTOGRAM_H

#include <stdint.h>

#define CORE_HIST_SUB_BITS 7
#define CORE_HIST_SUB      (1u << CORE_HIST_SUB_BITS)
#define CORE_HIST_BUCKETS  ((64 - CORE_HIST_SUB_BITS + 1) * CORE_HIST_SUB)

struct core_hist {
    uint64_t count;
    uint64_t sum; /* saturates rather than wraps */
    uint64_t min;
    uint64_t max;
    uint64_t buckets[CORE_HIST_BUCKETS];
};

/* Empty the histogram. A zeroed struct is not valid (min must be set). */
void core_hist_reset(struct core_hist *h);

/* Bucket index of a value; exposed for tests. */
static inline unsigned core_hist_index(uint64_t v)
{
    if (v < 2 * CORE_HIST_SUB)
        return (unsigned)v;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned e = msb - CORE_HIST_SUB_BITS;
    return (e + 1) * CORE_HIST_SUB + (unsigned)((v >> e) - CORE_HIST_SUB);
}

/* Count one value. O(1), no allocation. */
static inline void core_hist_record(struct core_hist *h, uint64_t v)
{
    h->buckets[core_hist_index(v)]++;
    h->count++;
    uint64_t s = h->sum + v;
    h->sum = s < h->sum ? UINT64_MAX : s;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
}

/* Add every count of src into dst. */
void core_hist_merge(struct core_hist *dst, const struct core_hist *src);

/* Smallest and largest value that land in bucket idx. */
uint64_t core_hist_bucket_low(unsigned idx);
uint64_t core_hist_bucket_high(unsigned idx);

/* Value at percentile p (0..100): the upper end of the bucket that holds
 * the p-th value, clipped to the recorded max. 0 when empty. */
uint64_t core_hist_percentile(const struct core_hist *h, double p);

/* Arithmetic mean (0 when empty). */
double core_hist_mean(const struct core_hist *h);

#endif
