/* A snapshot child's descriptors (child.h). */
#include "core/child.h"

#include <limits.h>
#include <unistd.h>

void core_child_close_fds(int keep)
{
    if (keep < 3) {
        close_range(3, UINT_MAX, 0);
        return;
    }
    if (keep > 3)
        close_range(3, (unsigned)keep - 1, 0);
    close_range((unsigned)keep + 1, UINT_MAX, 0);
}
