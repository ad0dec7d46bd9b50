/*
 * libFuzzer target for the bytes GridSync reads back from Raft: log entries
 * (gs_batch_parse + gs_batch_next) and snapshots (gs_snapshot_parse). Both
 * decoders see every input; the magic decides which one gets far.
 * Invariants checked: a parsed batch yields exactly ncmds commands whose
 * arguments lie inside the input; a snapshot that parses restores into a
 * store (collections decoded by gs_obj_decode) that passes gs_store_check,
 * and its one state record (GS_SNAPSHOT_STATE) reads as slot records.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "gridsync/cluster/raft_batch.h"
#include "gridsync/cluster/slot.h"
#include "core/error.h"
#include "gridsync/store/store.h"
#include "gridsync/types/value.h"

struct restore {
    size_t total;
    struct gs_store *store;
    bool state_seen;
};

/* As raft_glue.c's restore_entry, counting the bytes seen. */
static int restore_entry(void *arg, int type, const char *key, size_t klen, const char *val,
                         size_t vlen, int64_t expire_ms)
{
    struct restore *r = arg;
    r->total += klen + vlen;
    if (type == GS_SNAPSHOT_STATE) {
        /* At most one, read as cluster_migrate.c's restore reads it. */
        if (r->state_seen)
            return CORE_EPROTO;
        r->state_seen = true;
        size_t off = 0, nlen;
        unsigned slot, st;
        const char *name;
        int n;
        while ((n = gs_slot_state_next(val, vlen, &off, &slot, &st, &name, &nlen)) == 1)
            if (slot >= GS_SLOTS || name < val || name + nlen > val + vlen ||
                (st != GS_SLOT_BLOCKED && st != GS_SLOT_GONE))
                abort();
        /* gs_slot_state_valid (the glue's validation pass) agrees with
         * reading the records one by one. */
        if ((n == 0) != gs_slot_state_valid(val, vlen))
            abort();
        return n == 0 ? 0 : CORE_EPROTO;
    }
    if (type == GS_TYPE_STRING)
        return gs_store_set(r->store, key, klen, val, vlen, expire_ms, NULL);
    static const struct gs_type_limits lim = GS_TYPE_LIMITS_DEFAULT;
    struct gs_obj o;
    int rc = gs_obj_decode(type, val, vlen, &lim, &o);
    if (rc == CORE_EPROTO)
        abort(); /* the validation pass let a bad collection through */
    if (rc)
        return rc;
    rc = gs_store_set_obj(r->store, key, klen, &o, expire_ms, NULL);
    if (rc)
        gs_obj_free(&o);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gs_batch_header h;
    struct gs_batch_reader rd = {0};
    if (gs_batch_parse(data, size, &h, &rd) == 0) {
        unsigned argc;
        const char *const *argv;
        const size_t *len;
        uint32_t n = 0;
        while (gs_batch_next(&rd, &argc, &argv, &len) == 1) {
            for (unsigned i = 0; i < argc; i++)
                if (argv[i] < (const char *)data || argv[i] + len[i] > (const char *)data + size)
                    abort();
            n++;
        }
        if (n != h.ncmds)
            abort();
    }
    gs_batch_reader_free(&rd);
    struct restore r = {0, NULL, false};
    struct gs_store_config cfg = {.maxmemory = 0, .policy = GS_EVICT_SLRU, .hash_seed = 1};
    if (gs_store_new(&r.store, &cfg) != 0)
        return 0;
    /* expire times in the past are fine: nothing looks keys up here */
    if (gs_snapshot_parse(data, size, restore_entry, &r) == 0 &&
        (r.total > size || gs_store_check(r.store) != 0))
        abort();
    gs_store_free(r.store);
    return 0;
}
