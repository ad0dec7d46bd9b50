/*
 * libFuzzer target for the CURVE allow-list parser (bus/curve.h), the text
 * the engine and the monitor read at start. Every accepted list must hold
 * at most EM_CURVE_MAX_KEYS keys, and each listed key must be found by
 * em_curve_allowed; an error must name a line that exists.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "edumatcher/bus/curve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct em_curve_allow a;
    int line = -1;
    int rc = em_curve_allow_parse((const char *)data, size, &a, &line);
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    if (rc == 0) {
        if (line != 0 || a.count > EM_CURVE_MAX_KEYS || a.count > lines)
            abort();
        for (unsigned i = 0; i < a.count; i++)
            if (!em_curve_allowed(&a, a.key[i]))
                abort();
        return 0;
    }
    if ((rc != CORE_EINVAL && rc != CORE_ETOOBIG) || line < 1 || (size_t)line > lines)
        abort();
    return 0;
}
