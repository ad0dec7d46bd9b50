/* libFuzzer target for the engine host's snapshot section (the resend
 * state before the engine's bytes, edumatcher/host/engine_host.h,
 * em_host_snapshot_section): arbitrary bytes are refused or give a
 * position inside the input, after which the engine's bytes are restored
 * (or refused) by a fresh engine. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"
#include "edumatcher/engine/engine.h"
#include "edumatcher/host/engine_host.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void sink(void *ctx, uint16_t gw, const struct em_msg *ev)
{
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;
    int rc = em_host_snapshot_section(data, size, &off);
    if (rc != 0) {
        if (rc != CORE_EPROTO)
            abort();
        return 0;
    }
    if (off > size)
        abort();
    struct em_engine_config cfg = {.sink = sink};
    struct em_engine *e = em_engine_new(&cfg);
    if (!e)
        return 0;
    rc = em_engine_restore(e, data + off, size - off);
    if (rc != 0 && rc != CORE_EPROTO)
        abort();
    em_engine_free(e);
    return 0;
}
