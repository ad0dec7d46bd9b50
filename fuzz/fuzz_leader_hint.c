/*
 * libFuzzer target for the leadership hint datagram (gs_hint_parse,
 * gridsync/cluster/raft_batch.h). Checked: a parsed hint has at most
 * GS_HINT_MAX entries, the input is exactly as long as they say, and it
 * encodes back to the same bytes.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gridsync/cluster/raft_batch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct gs_hint h;
    static char out[GS_HINT_BYTES];
    if (gs_hint_parse(data, size, &h) != 0)
        return 0;
    if (h.n > GS_HINT_MAX || size != GS_HINT_HEADER + 12u * h.n)
        abort();
    size_t len = gs_hint_encode(out, &h);
    if (len != size || memcmp(out, data, size) != 0)
        abort();
    return 0;
}
