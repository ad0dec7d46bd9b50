/*
 * libFuzzer target for what the origin parses from an HTTP response: the
 * header lines libcurl hands over (status line, Cache-Control, Age,
 * Content-Length) and the TTL decision drawn from them. The input is split
 * at '\n' into lines, as libcurl delivers them. Also builds a URL with
 * the input as the key and checks the percent-encoding.
 *
 * Checked: no out-of-bounds read (ASan), and the documented ranges:
 * status 0 or 100..599, delta-seconds within 0..2^31, TTL -1 or >= 0.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gridsync/origin/origin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gs_origin_headers h;
    gs_origin_headers_init(&h);
    size_t start = 0;
    for (size_t i = 0; i <= size; i++) {
        if (i == size || data[i] == '\n') {
            size_t end = i < size ? i + 1 : i;
            /* A heap copy of exactly the line, so ASan sees any over-read. */
            char *line = malloc(end - start + 1);
            if (line == NULL)
                return 0;
            memcpy(line, data + start, end - start);
            gs_origin_header_line(&h, line, end - start);
            free(line);
            start = end;
        }
    }
    if (h.status != 0 && (h.status < 100 || h.status > 599))
        abort();
    if (h.max_age_s < -1 || h.max_age_s > 2147483648LL || h.s_maxage_s < -1 ||
        h.s_maxage_s > 2147483648LL || h.age_s < 0 || h.age_s > 2147483648LL)
        abort();
    int64_t ttl = gs_origin_headers_ttl_ms(&h);
    if (ttl < -1 || (h.no_store && ttl != 0))
        abort();

    /* The raw value as one Cache-Control field, too. */
    char *cc = malloc(size ? size : 1);
    if (cc == NULL)
        return 0;
    memcpy(cc, data, size);
    gs_origin_headers_init(&h);
    gs_origin_parse_cache_control(&h, cc, size);
    free(cc);

    size_t need = gs_origin_build_url("http://o/{key}", data, size, NULL, 0);
    if (need < 9 + size || need > 9 + 3 * size)
        abort();
    char *url = malloc(need + 1);
    if (url == NULL)
        return 0;
    if (gs_origin_build_url("http://o/{key}", data, size, url, need + 1) != need ||
        strlen(url) != need)
        abort();
    for (size_t i = 9; i < need; i++) {
        char c = url[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              strchr("-._~%", c)))
            abort();
    }
    free(url);
    return 0;
}
