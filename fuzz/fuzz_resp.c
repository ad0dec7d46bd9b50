/*
 * libFuzzer target for the RESP request parser. The input is delivered as
 * a stream in chunks (the first byte picks the chunk size), through a
 * buffer that is reallocated on every read as a connection's may be, so
 * the parser's resume-after-partial-input path is exercised along with
 * whole requests. Checks: consumed bytes stay within the input and every
 * argument points inside the request it came from.
 */
#include "core/error.h"
#include "gridsync/protocol/resp.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t chunk = (size_t)(data[0] % 32) + 1;
    bool auth = data[0] & 0x80;
    data++;
    size--;
    struct gs_resp_parser p;
    gs_resp_parser_init(&p, 1024 * 1024);
    p.authenticated = auth;
    char *buf = NULL;
    size_t len = 0, fed = 0;
    while (fed < size) {
        size_t n = size - fed < chunk ? size - fed : chunk;
        char *nb = malloc(len + n); /* a fresh buffer: the old one "moved" */
        if (!nb)
            break;
        if (len)
            memcpy(nb, buf, len);
        memcpy(nb + len, data + fed, n);
        free(buf);
        buf = nb;
        len += n;
        fed += n;
        size_t off = 0;
        for (;;) {
            size_t used = 0, argc = 0;
            struct gs_arg *argv = NULL;
            const char *err = NULL;
            int rc = gs_resp_parse(&p, buf + off, len - off, &used, &argc, &argv, &err);
            if (rc == GS_RESP_NEED_MORE)
                break;
            if (rc < 0) {
                if (rc == CORE_EPROTO && (!err || strncmp(err, "Protocol error: ", 16) != 0))
                    abort();
                off = len; /* the connection would be closed */
                fed = size;
                break;
            }
            if (used == 0 || used > len - off)
                abort();
            for (size_t i = 0; i < argc; i++) {
                if (argv[i].p < buf + off || argv[i].p + argv[i].len > buf + off + used)
                    abort();
            }
            off += used;
        }
        memmove(buf, buf + off, len - off);
        len -= off;
    }
    free(buf);
    gs_resp_parser_free(&p);
    return 0;
}
