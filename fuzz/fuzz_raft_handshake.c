/*
 * libFuzzer target for the handshake that opens a connection to a node's
 * shared Raft port (gs_mux_handshake_parse, gridsync/cluster/raft_batch.h).
 * Checked: a complete handshake lies within the input and asks for no
 * more than GS_MUX_MAX bytes; an incomplete one asks for more than it has.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"
#include "gridsync/cluster/raft_batch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t group;
    uint64_t id;
    const char *addr;
    size_t alen, need = 0;
    int rc = gs_mux_handshake_parse(data, size, &group, &id, &addr, &alen, &need);
    if (rc == 0 && (need > size || need > GS_MUX_MAX || addr + alen > (const char *)data + size))
        abort();
    if (rc == CORE_EINCOMPLETE && (need <= size || need > GS_MUX_MAX))
        abort();
    return 0;
}
