/*
 * libFuzzer target for the collections' decoder (gs_obj_decode, the
 * value of a typed snapshot record, gridsync/types/value.h). The first
 * byte picks the type (hash 4, list 1, set 2, sorted set 3), the rest is
 * the payload; tiny limits in some runs force the hash-table and skiplist
 * forms and one-element list nodes. Invariants checked on success: the
 * memory count equals a recount, iteration yields exactly len elements (a
 * sorted set's in strictly ascending (score, member) order, each at its
 * rank), and encoding the result decodes again to the same length.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "gridsync/types/hash/hash.h"
#include "gridsync/types/quicklist/quicklist.h"
#include "gridsync/types/set/set.h"
#include "gridsync/types/value.h"
#include "gridsync/types/zset/zset.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int type = data[0] & 7;
    struct gs_type_limits lim = GS_TYPE_LIMITS_DEFAULT;
    if (data[0] & 8) {
        lim.hash_max_listpack_entries = 2;
        lim.hash_max_listpack_value = 4;
        lim.list_max_listpack_size = 1;
        lim.set_max_intset_entries = 2;
        lim.zset_max_listpack_entries = 2;
        lim.zset_max_listpack_value = 4;
    }
    struct gs_obj o;
    if (gs_obj_decode(type, data + 1, size - 1, &lim, &o) != 0)
        return 0;
    if (gs_obj_mem(&o) != gs_obj_recount(&o))
        abort();
    size_t n = 0;
    if (type == GS_TYPE_HASH) {
        struct gs_hash_iter it;
        const char *f, *v;
        size_t fl, vl;
        gs_hash_iter_init(&it, &o);
        while (gs_hash_iter_next(&it, &f, &fl, &v, &vl))
            n++;
    } else if (type == GS_TYPE_SET) {
        struct gs_set_iter it;
        const char *m;
        size_t ml;
        gs_set_iter_init(&it, &o);
        while (gs_set_iter_next(&it, &m, &ml))
            n++;
    } else if (type == GS_TYPE_ZSET) {
        struct gs_zset_iter it;
        const char *m, *pm = NULL;
        size_t ml, pl = 0, rank;
        double sc, ps = 0;
        gs_zset_iter_init(&it, &o, 0, false);
        while (gs_zset_iter_next(&it, &m, &ml, &sc)) {
            if (pm) {
                size_t l = pl < ml ? pl : ml;
                int c = l ? memcmp(pm, m, l) : 0;
                if (ps > sc || (ps == sc && (c > 0 || (c == 0 && pl >= ml))))
                    abort();
            }
            if (!gs_zset_rank(&o, m, ml, &rank) || rank != n)
                abort();
            /* a listpack's integer member is formatted into the iterator's
             * buffer: the previous one must be copied to stay valid */
            static char prev[64];
            pl = ml < sizeof(prev) ? ml : sizeof(prev);
            memcpy(prev, m, pl);
            pm = prev;
            if (ml >= sizeof(prev))
                pm = NULL; /* too long to keep: skip the next comparison */
            ps = sc;
            n++;
        }
    } else {
        const struct gs_quicklist *ql = o.ptr;
        for (struct gs_ql_pos p = gs_ql_index(ql, 0); p.node; p = gs_ql_next(ql, p))
            n++;
    }
    if (n != gs_obj_len(&o) || n == 0)
        abort();
    unsigned char *enc;
    size_t len;
    if (gs_obj_encode(&o, &enc, &len) == 0) {
        struct gs_obj back;
        if (gs_obj_decode(type, enc, len, &lim, &back) != 0 || gs_obj_len(&back) != n)
            abort();
        gs_obj_free(&back);
        free(enc);
    }
    gs_obj_free(&o);
    return 0;
}
