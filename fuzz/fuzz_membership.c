/*
 * libFuzzer target for the membership's text and the CLUSTER MEMBERSHIP
 * reply (gs_membership_parse_reply, gridsync/cluster/membership.h), which a
 * starting node reads from its seed. Checked: an accepted membership
 * formats back to text that parses to the same membership.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "gridsync/cluster/membership.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct gs_membership m, back;
    const char *p = (const char *)data;
    int rc = size && p[0] == '$' ? gs_membership_parse_reply(&m, p, size)
                                 : gs_membership_parse(&m, p, size);
    if (rc != 0)
        return 0;
    struct core_buf b = {0};
    if (gs_membership_format(&m, &b) != 0)
        abort();
    if (gs_membership_parse(&back, b.data, b.len) != 0 || memcmp(&m, &back, sizeof(m)) != 0)
        abort();
    core_buf_free(&b);
    return 0;
}
