/*
 * libFuzzer target for the registry's URL parser (gs_registry_parse_url,
 * gridsync/cluster/registry.h). Checked: an accepted URL gives an endpoint
 * "http://HOST:PORT/" that is a prefix-rewrite of the input and a table
 * name of 3+ allowed characters.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gridsync/cluster/registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char url[1024];
    static struct gs_registry_config c;
    char err[GS_REGISTRY_STRLEN * 2];
    if (size >= sizeof(url))
        return 0;
    memcpy(url, data, size);
    url[size] = '\0';
    memset(&c, 0, sizeof(c));
    if (gs_registry_parse_url(url, &c, err, sizeof(err)) != 0)
        return 0;
    size_t el = strlen(c.endpoint), tl = strlen(c.table);
    if (strncmp(c.endpoint, "http://", 7) != 0 || el < 10 || c.endpoint[el - 1] != '/')
        abort();
    /* dynamodb://HOST:PORT/TABLE == "dynamodb://" + endpoint[7..] + TABLE */
    if (strlen(url) != 11 + (el - 7) + tl || memcmp(url + 11, c.endpoint + 7, el - 7) != 0 ||
        strcmp(url + 11 + el - 7, c.table) != 0 || tl < 3)
        abort();
    return 0;
}
