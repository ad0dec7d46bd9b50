/*
 * libFuzzer target for HyperLogLog values (gridsync/types/hll/hll.h): the
 * input is taken as a string value PFADD, PFCOUNT or PFMERGE would meet
 * (a client can SET any bytes and then PFADD them). When it passes the
 * header check: the count, the merge and the dense form agree with each
 * other (a sparse form that decodes is the same registers dense), and
 * adding elements to a valid form keeps it valid, with every register at
 * least what it was.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gridsync/types/hll/hll.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 64 * 1024 || !gs_hll_is_hll(data, size))
        return 0;
    static uint8_t before[GS_HLL_REGISTERS], after[GS_HLL_REGISTERS], dense[GS_HLL_REGISTERS];
    memset(before, 0, sizeof(before));
    bool invalid = false;
    uint64_t n = gs_hll_count(data, size, &invalid);
    bool valid = gs_hll_merge(before, data, size) == 0;
    if (valid == invalid)
        abort(); /* count and merge judge a form alike */
    struct core_buf b = {0};
    if (core_buf_append(&b, data, size))
        return 0;
    int rc = gs_hll_to_dense(&b);
    if ((rc == 0) != valid || (rc && rc != GS_HLL_INVALID))
        abort();
    if (valid) {
        memset(dense, 0, sizeof(dense));
        bool inv2 = false;
        if (gs_hll_merge(dense, b.data, b.len) || memcmp(before, dense, sizeof(dense)) ||
            gs_hll_count(b.data, b.len, &inv2) != n || inv2 || b.len != GS_HLL_DENSE_SIZE)
            abort();
        /* Add to the original form: it stays valid and only grows. */
        b.len = 0;
        core_buf_append(&b, data, size);
        for (size_t i = 0; i + 4 <= size && i < 256; i += 4)
            if (gs_hll_add(&b, data + i, 4, GS_HLL_SPARSE_MAX) < 0)
                abort();
        memset(after, 0, sizeof(after));
        if (!gs_hll_is_hll(b.data, b.len) || gs_hll_merge(after, b.data, b.len))
            abort();
        for (unsigned i = 0; i < GS_HLL_REGISTERS; i++)
            if (after[i] < before[i])
                abort();
    }
    core_buf_free(&b);
    return 0;
}
