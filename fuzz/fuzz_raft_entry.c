/*
 * libFuzzer target for the bytes GridSync reads back from Raft: log entries
 * (gs_batch_parse + gs_batch_next) and snapshots (gs_snapshot_parse). Both
 * decoders see every input; the magic decides which one gets far.
 * Invariant checked: a parsed batch yields exactly ncmds commands whose
 * arguments lie inside the input.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "gridsync/cluster/raft_batch.h"

static int count_entry(void *arg, const char *key, size_t klen, const char *val, size_t vlen,
                       int64_t expire_ms)
{
    (void)key;
    (void)val;
    (void)expire_ms;
    *(size_t *)arg += klen + vlen;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gs_batch_header h;
    struct gs_batch_reader rd = {0};
    if (gs_batch_parse(data, size, &h, &rd) == 0) {
        unsigned argc;
        const char *const *argv;
        const size_t *len;
        uint32_t n = 0;
        while (gs_batch_next(&rd, &argc, &argv, &len) == 1) {
            for (unsigned i = 0; i < argc; i++)
                if (argv[i] < (const char *)data || argv[i] + len[i] > (const char *)data + size)
                    abort();
            n++;
        }
        if (n != h.ncmds)
            abort();
    }
    gs_batch_reader_free(&rd);
    size_t total = 0;
    if (gs_snapshot_parse(data, size, count_entry, &total) == 0 && total > size)
        abort();
    return 0;
}
