/* libFuzzer target for the health beacon parser (core/metrics.h): beacons
 * arrive from the bus, so the monitor parses untrusted bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    struct core_beacon b;
    int rc = core_beacon_parse(buf, size, &b);
    if (rc == 0 && (b.proc[0] == '\0' || b.n > CORE_METRICS_MAX))
        abort();
    if (rc != 0 && rc != CORE_EPROTO)
        abort();
    free(buf);
    return 0;
}
