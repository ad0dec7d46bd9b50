/* libFuzzer target for the monitor's market view (edumatcher/monitor/
 * market.h): MD and TRADE lines come off the bus, so they are untrusted.
 * Each input is applied as both, then rendered; the JSON must stay free of
 * characters that break out of its strings. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "edumatcher/monitor/market.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct em_mkt m;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Forget the previous input's symbols (a new one is zeroed when it is
     * first seen); a full em_mkt_init per input would clear megabytes. */
    m.n = 0;
    m.bucket_ms = 1000;
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    int a = em_mkt_book(&m, buf, size, 5);
    int b = em_mkt_trade(&m, buf, size, 5);
    if ((a != 0 && a != CORE_EPROTO) || (b != 0 && b != CORE_EPROTO))
        abort();
    struct core_buf out = {0};
    em_mkt_json(&m, &out);
    for (size_t i = 0; i < out.len; i++)
        if (out.data[i] == '\\' || out.data[i] == '<' || (unsigned char)out.data[i] < 0x20)
            abort();
    core_buf_free(&out);
    free(buf);
    return 0;
}
