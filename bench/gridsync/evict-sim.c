/*
 * evict-sim: replay one key stream through the store's eviction policies
 * (LRU and SLRU, the code in gridsync/store/evict.c) and through models of
 * S3-FIFO and W-TinyLFU (evict_models.c, the same ops interface) at
 * several cache sizes, and print hit ratios side by side.
 *
 *   evict-sim [KEYS [REQUESTS [ZIPF_S [SCAN_FRACTION [SEED]]]]]
 *
 * The stream draws keys 0..KEYS-1 with Zipf(ZIPF_S) popularity (rank r has
 * weight 1/r^s, ranks shuffled over the key ids). With SCAN_FRACTION f > 0,
 * a run of 1,000 never-repeated keys (a scan or a batch job, what SLRU's
 * probation segment is for) starts with probability f/1000 per request,
 * so about f/(1+f) of the requests are scan keys (the exact share is
 * printed). Capacity is counted in entries; the cache is cold at the start
 * and all requests count. Defaults: 100000 keys, 2000000 requests, s 1.1,
 * no scan, seed 1. Deterministic for a given seed.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/proc.h"
#include "evict_models.h"
#include "gridsync/store/entry.h"
#include "gridsync/store/evict.h"

static uint64_t rng_state;

static uint64_t next_u64(void)
{
    /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double next_unit(void)
{
    return (double)(next_u64() >> 11) / 9007199254740992.0;
}

/* Generate the request stream once, so every policy and size sees the
 * same keys. */
static uint32_t *make_stream(uint32_t keys, uint32_t requests, double s, double scan_fraction,
                             uint32_t *distinct_out)
{
    double *cdf = malloc(sizeof(double) * keys);
    uint32_t *perm = malloc(sizeof(uint32_t) * keys);
    uint32_t *stream = malloc(sizeof(uint32_t) * requests);
    if (!cdf || !perm || !stream)
        exit(1);
    double sum = 0;
    for (uint32_t r = 0; r < keys; r++)
        cdf[r] = (sum += 1.0 / pow((double)(r + 1), s));
    for (uint32_t r = 0; r < keys; r++) {
        cdf[r] /= sum;
        perm[r] = r;
    }
    for (uint32_t i = keys - 1; i > 0; i--) {
        uint32_t j = (uint32_t)(next_u64() % (i + 1));
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    uint32_t next_scan_key = keys, scan_left = 0;
    for (uint32_t i = 0; i < requests; i++) {
        if (scan_left == 0 && scan_fraction > 0 && next_unit() < scan_fraction / 1000.0)
            scan_left = 1000;
        if (scan_left > 0) {
            scan_left--;
            stream[i] = next_scan_key++;
            continue;
        }
        double u = next_unit();
        uint32_t lo = 0, hi = keys - 1;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (cdf[mid] < u)
                lo = mid + 1;
            else
                hi = mid;
        }
        stream[i] = perm[lo];
    }
    free(cdf);
    free(perm);
    *distinct_out = next_scan_key;
    return stream;
}

enum { SIM_LRU, SIM_SLRU, SIM_S3FIFO, SIM_WTINYLFU, SIM_COUNT };
static const char *const sim_names[SIM_COUNT] = {"lru", "slru", "s3fifo", "w-tinylfu"};

static double simulate(int which, const uint32_t *stream, uint32_t requests, uint32_t ids,
                       uint32_t capacity)
{
    struct gs_entry *ents = calloc(ids, sizeof(*ents));
    bool *cached = calloc(ids, sizeof(*cached));
    if (!ents || !cached)
        exit(1);
    struct gs_evict p;
    if (which == SIM_LRU)
        gs_evict_init(&p, GS_EVICT_LRU);
    else if (which == SIM_SLRU)
        gs_evict_init(&p, GS_EVICT_SLRU);
    else if (evict_model_init(&p, which == SIM_S3FIFO ? EVICT_MODEL_S3FIFO : EVICT_MODEL_WTINYLFU,
                              ents, ids, capacity) != 0)
        exit(1);
    uint64_t hits = 0;
    for (uint32_t i = 0; i < requests; i++) {
        uint32_t k = stream[i];
        if (cached[k]) {
            hits++;
            p.ops->on_hit(&p, &ents[k]);
            continue;
        }
        if (gs_evict_count(&p) >= capacity) {
            struct gs_entry *v = p.ops->victim(&p);
            p.ops->on_remove(&p, v);
            cached[v - ents] = false;
        }
        p.ops->on_insert(&p, &ents[k]);
        cached[k] = true;
    }
    if (gs_evict_count(&p) > capacity) {
        fprintf(stderr, "evict-sim: %s holds more than its capacity\n", sim_names[which]);
        exit(1);
    }
    if (which >= SIM_S3FIFO)
        evict_model_free(&p);
    free(ents);
    free(cached);
    return (double)hits / (double)requests;
}

int main(int argc, char **argv)
{
    static const char usage[] =
        "Usage: evict-sim [KEYS [REQUESTS [ZIPF_S [SCAN_FRACTION [SEED]]]]]\n"
        "\n"
        "Trace-driven simulation of the eviction policies (LRU, SLRU, W-TinyLFU,\n"
        "S3-FIFO) on one Zipf key stream: KEYS distinct keys (default 100000),\n"
        "REQUESTS requests (2000000), exponent ZIPF_S (1.1), a SCAN_FRACTION of\n"
        "one-off scan keys (0), SEED (1); prints each policy's miss ratio per cache size.\n"
        "\n"
        "  -h, --help   print this and exit\n"
        "  --version    print the version and exit\n";
    int code = core_proc_early("evict-sim", usage, argc, argv);
    if (code >= 0)
        return code;
    if (argc > 6)
        return core_proc_bad_usage("evict-sim", "too many arguments");
    int64_t keys64 = 100000, requests64 = 2000000, seed64 = 1;
    double s = 1.1, scan = 0.0;
    if ((argc > 1 && (code = core_proc_int_arg("evict-sim", "KEYS", argv[1], 2, UINT32_MAX / 2,
                                               &keys64)) != 0) ||
        (argc > 2 && (code = core_proc_int_arg("evict-sim", "REQUESTS", argv[2], 1, UINT32_MAX,
                                               &requests64)) != 0) ||
        (argc > 3 &&
         (code = core_proc_double_arg("evict-sim", "ZIPF_S", argv[3], 0, 10, &s)) != 0) ||
        (argc > 4 &&
         (code = core_proc_double_arg("evict-sim", "SCAN_FRACTION", argv[4], 0, 1, &scan)) != 0) ||
        (argc > 5 &&
         (code = core_proc_int_arg("evict-sim", "SEED", argv[5], 0, INT64_MAX, &seed64)) != 0))
        return code;
    uint32_t keys = (uint32_t)keys64, requests = (uint32_t)requests64;
    rng_state = (uint64_t)seed64;
    uint32_t ids;
    uint32_t *stream = make_stream(keys, requests, s, scan, &ids);
    static const double sizes[] = {0.001, 0.005, 0.01, 0.05, 0.10, 0.25, 0.50};
    printf("# keys=%u requests=%u zipf_s=%.2f scan_fraction=%.2f seed=%s: %.1f%% of requests "
           "are scan keys; hit ratios in %%\n",
           keys, requests, s, scan, argc > 5 ? argv[5] : "1",
           100.0 * (double)(ids - keys) / (double)requests);
    printf("%8s %10s", "cache", "entries");
    for (int w = 0; w < SIM_COUNT; w++)
        printf(" %9s", sim_names[w]);
    printf("\n");
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint32_t cap = (uint32_t)(sizes[i] * keys);
        if (cap < 1)
            cap = 1;
        printf("%7.1f%% %10u", sizes[i] * 100, cap);
        for (int w = 0; w < SIM_COUNT; w++)
            printf(" %9.2f", 100 * simulate(w, stream, requests, ids, cap));
        printf("\n");
    }
    free(stream);
    return 0;
}
