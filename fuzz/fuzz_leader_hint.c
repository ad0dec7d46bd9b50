/*
 * libFuzzer target for the datagrams a node's Raft-port UDP socket reads
 * (gridsync/cluster/raft_batch.h): the leadership hint (gs_hint_parse) and
 * the forwarded PUBLISH (gs_pub_parse). Checked: a parsed hint has at most
 * GS_HINT_MAX entries, the input is exactly as long as they say, and it
 * encodes back to the same bytes; a parsed PUBLISH's channel and message
 * lie inside the input and encode back to the same bytes.
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
    static char pout[GS_PUB_BYTES];
    struct gs_pub p;
    if (gs_pub_parse(data, size, &p) == 0) {
        const char *end = (const char *)data + size;
        if (p.channel < (const char *)data || p.channel + p.chlen > end ||
            p.message + p.msglen != end)
            abort();
        size_t plen = gs_pub_encode(pout, p.sender, p.channel, p.chlen, p.message, p.msglen);
        if (plen != size || memcmp(pout, data, size) != 0)
            abort();
        return 0;
    }
    if (gs_hint_parse(data, size, &h) != 0)
        return 0;
    if (h.n > GS_HINT_MAX || size != GS_HINT_HEADER + 12u * h.n)
        abort();
    size_t len = gs_hint_encode(out, &h);
    if (len != size || memcmp(out, data, size) != 0)
        abort();
    return 0;
}
