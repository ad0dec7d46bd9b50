/* libFuzzer target for the address splitter (core/addr.h): CLUSTER
 * ADDNODE hands it a client's bytes. A split address must format back to
 * text that splits to the same host and port. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/addr.h"
#include "core/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    char host[64], again[64], text[96];
    int port, port2;
    int rc = core_addr_split(buf, size, host, sizeof(host), &port);
    if (rc != 0 && rc != CORE_EINVAL && rc != CORE_ERANGE)
        abort();
    if (rc == 0) {
        if (port < 0 || port > 65535 || memchr(host, '\0', sizeof(host)) == NULL)
            abort();
        /* A host with a NUL inside formats shorter: only check a clean one. */
        if (strlen(host) == strcspn(host, "[]")) {
            int n = core_addr_format(text, sizeof(text), host, port);
            if (n < 0 || (size_t)n >= sizeof(text))
                abort();
            if (core_addr_split(text, (size_t)n, again, sizeof(again), &port2) == 0 &&
                (strcmp(again, host) != 0 || port2 != port))
                abort();
        }
        struct sockaddr_storage ss;
        (void)core_addr_ip(host, port, &ss);
    }
    free(buf);
    return 0;
}
