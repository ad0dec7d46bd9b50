/*
 * libFuzzer target for RESTORE's payload reader (gs_rdb_load,
 * gridsync/types/rdb/rdb.h): the input is a payload whose checksum is
 * not looked at (the last 10 bytes are its footer), so every byte
 * reaches the reader. Invariants when it loads: the value dumps again
 * into a payload that verifies and loads back to the same length, type
 * and encoding.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gridsync/types/rdb/rdb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct gs_type_limits lim = GS_TYPE_LIMITS_DEFAULT;
    if (size > 1 << 20)
        return 0;
    struct gs_rdb_value v;
    if (gs_rdb_load(data, size, &lim, 1 << 24, &v) != 0)
        return 0;
    struct core_buf out = {0};
    int rc = v.is_string ? gs_rdb_dump_string(v.str.data ? v.str.data : "", v.str.len, &out)
                         : gs_rdb_dump_obj(&v.obj, &out);
    if (rc || !gs_rdb_verify(out.data, out.len))
        abort();
    struct gs_rdb_value w;
    if (gs_rdb_load(out.data, out.len, &lim, 1 << 24, &w) != 0 || w.is_string != v.is_string)
        abort();
    if (v.is_string) {
        if (w.str.len != v.str.len || (v.str.len && memcmp(w.str.data, v.str.data, v.str.len)))
            abort();
    } else {
        if (w.obj.type != v.obj.type || w.obj.enc != v.obj.enc ||
            gs_obj_len(&w.obj) != gs_obj_len(&v.obj))
            abort();
        gs_obj_free(&w.obj);
        gs_obj_free(&v.obj);
    }
    core_buf_free(&w.str);
    core_buf_free(&v.str);
    core_buf_free(&out);
    return 0;
}
