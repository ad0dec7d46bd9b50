/*
 * libFuzzer target for the config file line splitter (Redis's sdssplitargs
 * rules, core_config_split_args) and, on what it splits, GridSync's
 * client-output-buffer-limit parser. Checks: the argument count is within
 * bounds, every argument lies inside the output buffer and is terminated
 * there, and the output never needs more than the input's length + 1.
 */
#include "core/config.h"
#include "gridsync/node/node.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *out = malloc(size + 1);
    if (!out)
        return 0;
    char *argv[16];
    int argc = core_config_split_args((const char *)data, size, out, size + 1, argv, 16);
    assert(argc <= 16);
    assert(argc != CORE_ERANGE || size >= 16); /* len + 1 bytes always suffice */
    for (int i = 0; i < argc; i++) {
        assert(argv[i] >= out && argv[i] < out + size + 1);
        assert(memchr(argv[i], 0, (size_t)(out + size + 1 - argv[i])) != NULL);
    }
    if (argc > 0) {
        char value[CORE_OPT_STRLEN];
        size_t used = 0;
        for (int i = 0; i < argc && used + 1 < sizeof(value); i++) {
            size_t n = strlen(argv[i]);
            if (used + n + 2 >= sizeof(value))
                break;
            if (used)
                value[used++] = ' ';
            memcpy(value + used, argv[i], n);
            used += n;
        }
        value[used] = 0;
        struct gs_obuf_limit limits[GS_CLASS_COUNT] = {{0, 0, 0}};
        char why[128];
        if (gs_obuf_limits_parse(value, limits, why, sizeof(why)) == 0)
            for (int c = 0; c < GS_CLASS_COUNT; c++)
                assert(limits[c].hard >= 0 && limits[c].soft >= 0 && limits[c].soft_seconds >= 0);
    }
    free(out);
    return 0;
}
