/*
 * libFuzzer target for core/base64.h. Checked: decoding never writes past
 * CORE_BASE64_DECODED_MAX; whatever decodes encodes back to the same text
 * (only canonical input is accepted), and any bytes encode then decode to
 * themselves.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base64.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    static uint8_t dec[4096];
    static char enc[CORE_BASE64_ENCODED_LEN(4096) + 1];
    ssize_t n = core_base64_decode((const char *)data, size, dec);
    if (n >= 0) {
        if ((size_t)n > CORE_BASE64_DECODED_MAX(size))
            abort();
        core_base64_encode(dec, (size_t)n, enc);
        if (strlen(enc) != size || memcmp(enc, data, size) != 0)
            abort();
    }
    core_base64_encode(data, size, enc);
    n = core_base64_decode(enc, strlen(enc), dec);
    if (n != (ssize_t)size || memcmp(dec, data, size) != 0)
        abort();
    return 0;
}
