/*
 * libFuzzer target for the order link's record decoder (bus/order_link.h),
 * the parser every engine and gateway runs on bytes from its peer. The
 * stream is walked as the link does (decode, advance, stop at the first
 * incomplete or bad record). Every accepted record must respect the
 * limits, lie inside the input, and encode back to the same header.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "edumatcher/bus/order_link.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    while (size > 0) {
        struct em_link_rec r;
        int n = em_link_decode(data, size, &r);
        if (n == CORE_EINCOMPLETE || n == CORE_EPROTO)
            return 0;
        if (n <= 0 || (size_t)n > size)
            abort();
        if (r.gwlen > EM_LINK_GW_MAX || r.len > EM_LINK_PAYLOAD_MAX)
            abort();
        if ((const uint8_t *)r.gw != data + EM_LINK_HDR || r.payload + r.len != data + n)
            abort();
        uint8_t hdr[EM_LINK_HDR + EM_LINK_GW_MAX];
        size_t hl = em_link_encode_header(hdr, r.gw, r.gwlen, r.len);
        if (hl != EM_LINK_HDR + r.gwlen || memcmp(hdr, data, hl) != 0)
            abort();
        data += n;
        size -= (size_t)n;
    }
    return 0;
}
