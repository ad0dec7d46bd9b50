/* libFuzzer target for the HTTP request parser (core/http.h), which the
 * monitor, the clearing and every HTTP endpoint use: it must never read
 * past its input, and what it reports must lie inside it. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A private copy so ASan catches a read one past the end. */
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    for (size_t i = 0; i < size; i++)
        buf[i] = (char)data[i];
    struct core_http_request req;
    int n = core_http_parse_request(buf, size, &req);
    if (n > 0) {
        if ((size_t)n > size)
            abort();
        if (req.path < buf || req.path + req.path_len > buf + size)
            abort();
        if (req.query < buf || req.query + req.query_len > buf + size)
            abort();
        char v[64];
        core_http_query_get(&req, "sym", v, sizeof v);
        core_http_query_get(&req, "", v, sizeof v);
        (void)core_http_path_is(&req, "/metrics");
    } else if (n != CORE_EINCOMPLETE && n != CORE_ETOOBIG && n != CORE_EPROTO) {
        abort();
    }
    free(buf);
    return 0;
}
