/*
 * libFuzzer target for the listpack validator (gs_lp_validate,
 * gridsync/types/listpack/listpack.h), both forms: the input is taken as
 * a listpack as it is (the count word's top bit asks for back-lengths).
 * Invariants checked when it validates: a forward walk visits exactly
 * count entries inside the buffer; with back-lengths, the walk backwards
 * from gs_lp_last and gs_lp_seek at every index find the same offsets;
 * every entry reads back; and after deleting the last entry and appending
 * one, the copy still validates with the count adjusted.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gridsync/types/listpack/listpack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20) || !gs_lp_validate(data, size))
        return 0;
    uint32_t n = gs_lp_count(data);
    size_t *fwd = malloc(((size_t)n + 1) * sizeof(*fwd));
    if (!fwd)
        return 0;
    uint32_t i = 0;
    for (size_t off = gs_lp_first(data); off; off = gs_lp_next(data, off)) {
        if (i >= n || off >= size)
            abort();
        fwd[i++] = off;
        char buf[GS_LP_INTBUF];
        size_t len;
        const char *v = gs_lp_get(data, off, buf, &len);
        if ((v < (const char *)data || v + len > (const char *)data + size) && v != buf)
            abort();
    }
    if (i != n || gs_lp_last(data) != (n ? fwd[n - 1] : 0))
        abort();
    size_t off = gs_lp_last(data);
    for (i = n; i > 0; i--) {
        if (off != fwd[i - 1] || gs_lp_seek(data, i - 1) != fwd[i - 1])
            abort();
        off = gs_lp_prev(data, off);
    }
    if (off != 0)
        abort();
    free(fwd);

    unsigned char *lp = malloc(size);
    if (!lp)
        return 0;
    memcpy(lp, data, size);
    if (n)
        gs_lp_delete(&lp, gs_lp_last(lp), 1);
    if (gs_lp_append(&lp, "fuzz", 4) == 0 &&
        (gs_lp_count(lp) != n + (n ? 0 : 1) || !gs_lp_validate(lp, gs_lp_bytes(lp)) ||
         gs_lp_has_backlen(lp) != gs_lp_has_backlen(data) ||
         !gs_lp_eq(lp, gs_lp_last(lp), "fuzz", 4)))
        abort();
    free(lp);
    return 0;
}
