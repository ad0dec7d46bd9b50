/*
 * store-mem: how much resident memory the store needs for a data set, to
 * set beside Redis holding the same data (bench/gridsync/store-mem-vs-redis
 * runs both).
 *
 *   store-mem [KEYS [VALUE_BYTES [TTL_S]]]         load, print one line
 *   store-mem --resp [KEYS [VALUE_BYTES [TTL_S]]]  print the same data set as
 *                                                  RESP SET commands (for
 *                                                  redis-cli --pipe)
 *
 * Keys are "key:%09u" (13 bytes), values VALUE_BYTES of 'x', and with
 * TTL_S > 0 every key expires in TTL_S seconds; defaults 1,000,000, 128
 * and no TTL. Output (one line, key=value): keys, used_memory,
 * rss_bytes (whole process, read from /proc/self/statm), rss_delta (RSS
 * added by the load), and the same per key.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/proc.h"
#include "core/clock.h"
#include "core/error.h"
#include "gridsync/store/store.h"

static long rss_bytes(void)
{
    long pages_total = 0, pages_resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2)
        pages_resident = -1;
    fclose(f);
    return pages_resident * sysconf(_SC_PAGESIZE);
}

int main(int argc, char **argv)
{
    static const char usage[] =
        "Usage: store-mem [--resp] [KEYS [VALUE_BYTES [TTL_S]]]\n"
        "\n"
        "Fill a store with KEYS keys (default 1000000) of VALUE_BYTES (default 128),\n"
        "with a TTL of TTL_S seconds when not 0, and print the memory it accounts\n"
        "and the process RSS; --resp prints the same keys as RESP SET commands\n"
        "instead (for loading a Redis to compare with).\n"
        "\n"
        "  -h, --help   print this and exit\n"
        "  --version    print the version and exit\n";
    int code = core_proc_early("store-mem", usage, argc, argv);
    if (code >= 0)
        return code;
    int resp = argc > 1 && strcmp(argv[1], "--resp") == 0;
    int a = resp ? 2 : 1;
    if (argc > a + 3)
        return core_proc_bad_usage("store-mem", "too many arguments");
    int64_t nums[3] = {1000000, 128, 0};
    static const char *const names[] = {"KEYS", "VALUE_BYTES", "TTL_S"};
    for (int i = 0; i < 3 && a + i < argc; i++)
        if ((code = core_proc_int_arg("store-mem", names[i], argv[a + i], i == 0, 1 << 30,
                                      &nums[i])) != 0)
            return code;
    unsigned long keys = (unsigned long)nums[0];
    size_t vlen = (size_t)nums[1];
    unsigned long ttl_s = (unsigned long)nums[2];
    char *val = malloc(vlen + 1);
    if (!val)
        return 1;
    memset(val, 'x', vlen);
    val[vlen] = '\0';
    char key[32];

    if (resp) {
        for (unsigned long i = 0; i < keys; i++) {
            int kl = snprintf(key, sizeof(key), "key:%09lu", i);
            if (ttl_s == 0) {
                printf("*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%zu\r\n%s\r\n", kl, key, vlen, val);
            } else {
                char t[24];
                int tl = snprintf(t, sizeof(t), "%lu", ttl_s);
                printf("*5\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%zu\r\n%s\r\n$2\r\nEX\r\n$%d\r\n%s\r\n",
                       kl, key, vlen, val, tl, t);
            }
        }
        free(val);
        return 0;
    }

    long rss0 = rss_bytes();
    struct gs_store *s;
    struct gs_store_config cfg = {.maxmemory = 0, .policy = GS_EVICT_SLRU, .hash_seed = 0x5eed};
    if (gs_store_new(&s, &cfg) != 0)
        return 1;
    for (unsigned long i = 0; i < keys; i++) {
        int kl = snprintf(key, sizeof(key), "key:%09lu", i);
        int64_t expire = ttl_s ? core_wall_ms() + (int64_t)ttl_s * 1000 : -1;
        int rc = gs_store_set(s, key, (size_t)kl, val, vlen, expire, NULL);
        if (rc != 0) {
            fprintf(stderr, "store-mem: set: %s\n", core_strerror(rc));
            return 1;
        }
    }
    /* Let an unfinished rehash complete, as a server's timer would. */
    for (int i = 0; i < 100000; i++)
        gs_store_expire_cycle(s, 0, 1000);
    long rss1 = rss_bytes();
    struct gs_store_stats st;
    gs_store_stats(s, &st);
    printf("keys=%lu used_memory=%llu rss_bytes=%ld rss_delta=%ld used_per_key=%.1f "
           "rss_delta_per_key=%.1f\n",
           (unsigned long)st.keys, (unsigned long long)st.used_memory, rss1, rss1 - rss0,
           (double)st.used_memory / (double)(keys ? keys : 1),
           (double)(rss1 - rss0) / (double)(keys ? keys : 1));
    gs_store_free(s);
    free(val);
    return 0;
}
