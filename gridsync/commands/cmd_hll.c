/*
 * HyperLogLog commands, following Redis 7.0's hyperloglog.c: PFADD,
 * PFCOUNT, PFMERGE, PFDEBUG. An HLL is a string value in Redis's format
 * (gridsync/types/hll/hll.h); a command copies it into the node's scratch
 * buffer, edits it there and writes it back, so a failed edit leaves the
 * key as it was. Checks in Redis's order, its error texts.
 *
 * Cluster mode: PFCOUNT of one key does not write the count it computed
 * into the value's cache, as Redis does: a read runs on the leader only,
 * and the cache bytes would then differ between replicas.
 */
#include <string.h>

#include "gridsync/client/client.h"
#include "gridsync/commands/commands.h"
#include "gridsync/store/store.h"
#include "gridsync/types/hll/hll.h"

static const char NOT_HLL[] = "WRONGTYPE Key is not a valid HyperLogLog string value.";
static const char CORRUPT[] = "INVALIDOBJ Corrupted HLL object detected";

/* The node's scratch buffer, empty. */
static struct core_buf *hll_buf(struct gs_client *c)
{
    struct core_buf *b = &c->shared->scratch;
    if (b->oom)
        core_buf_free(b);
    b->len = 0;
    return b;
}

static size_t sparse_max(const struct gs_client *c)
{
    int64_t v = c->shared->limits.hll_sparse_max_bytes;
    return v < 0 ? 0 : (size_t)v;
}

/* key's HLL as a string entry: NULL with *bad set after replying
 * WRONGTYPE (another type, or a string that is no HLL); NULL with *bad
 * false when there is no such key. */
static struct gs_entry *hll_lookup(struct gs_client *c, const struct gs_arg *key, int flags,
                                   bool *bad)
{
    struct gs_entry *e = gs_lookup_typed(c, key, GS_TYPE_STRING, flags, bad);
    if (!e)
        return NULL;
    size_t len;
    const char *v = gs_entry_value(e, &len);
    if (!gs_hll_is_hll(v, len)) {
        gs_error(c, NOT_HLL);
        *bad = true;
        return NULL;
    }
    return e;
}

/* Copy e's value into b. False after replying OOM. */
static bool hll_load(struct gs_client *c, struct gs_entry *e, struct core_buf *b)
{
    size_t len;
    const char *v = gs_entry_value(e, &len);
    if (core_buf_append(b, v, len)) {
        gs_error_oom(c);
        return false;
    }
    return true;
}

/* Store b as key's value (e: its entry, NULL for a new key). False after
 * replying OOM. */
static bool hll_store(struct gs_client *c, const struct gs_arg *key, struct gs_entry *e,
                      const struct core_buf *b)
{
    struct gs_store *s = c->db->store;
    if (!e) {
        if (gs_store_set(s, key->p, key->len, b->data, b->len, -1, NULL)) {
            gs_error_oom(c);
            return false;
        }
        return true;
    }
    char *dst = gs_store_resize_value(s, &e, b->len);
    if (!dst) {
        gs_error_oom(c);
        return false;
    }
    memcpy(dst, b->data, b->len);
    gs_store_signal_modified(s, e); /* written in place: WATCH must see it */
    return true;
}

/* Make b dense. False after replying OOM or a corrupted form. */
static bool hll_to_dense(struct gs_client *c, struct core_buf *b)
{
    int rc = gs_hll_to_dense(b);
    if (rc == GS_HLL_NOMEM)
        gs_error_oom(c);
    else if (rc)
        gs_error(c, CORRUPT);
    return rc == 0;
}

/* PFADD key [element ...]: 1 when a register grew (or the key was made). */
void gs_cmd_pfadd(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    bool bad;
    struct gs_entry *e = hll_lookup(c, &argv[1], GS_LOOKUP_WRITE, &bad);
    if (bad)
        return;
    struct core_buf *b = hll_buf(c);
    int updated = 0;
    if (!e) {
        if (gs_hll_init(b)) {
            gs_error_oom(c);
            return;
        }
        updated = 1;
    } else if (!hll_load(c, e, b)) {
        return;
    }
    for (size_t i = 2; i < argc; i++) {
        int rc = gs_hll_add(b, argv[i].p, argv[i].len, sparse_max(c));
        if (rc == GS_HLL_NOMEM) {
            gs_error_oom(c);
            return;
        }
        if (rc == GS_HLL_INVALID) {
            /* Redis edits in place: the registers raised so far stay. */
            if (updated && !hll_store(c, &argv[1], e, b))
                return;
            gs_error(c, CORRUPT);
            return;
        }
        updated += rc;
    }
    if (updated) {
        gs_hll_cache_invalidate(b->data);
        if (!hll_store(c, &argv[1], e, b))
            return;
    }
    gs_reply_int(&c->w, updated ? 1 : 0);
}

/* PFCOUNT key [key ...]: one key's count (cached in the value), or the
 * count of the union of several. */
void gs_cmd_pfcount(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    bool bad;
    if (argc > 2) {
        uint8_t max[GS_HLL_REGISTERS];
        memset(max, 0, sizeof(max));
        for (size_t i = 1; i < argc; i++) {
            struct gs_entry *e = hll_lookup(c, &argv[i], 0, &bad);
            if (bad)
                return;
            if (!e)
                continue; /* no key: an empty HLL */
            size_t len;
            const char *v = gs_entry_value(e, &len);
            if (gs_hll_merge(max, v, len)) {
                gs_error(c, CORRUPT);
                return;
            }
        }
        gs_reply_int(&c->w, (int64_t)gs_hll_count_registers(max));
        return;
    }
    struct gs_entry *e = hll_lookup(c, &argv[1], 0, &bad);
    if (bad)
        return;
    if (!e) {
        gs_reply_int(&c->w, 0);
        return;
    }
    size_t len;
    char *v = gs_entry_value(e, &len);
    uint64_t card;
    if (gs_hll_cache_valid(v)) {
        card = gs_hll_cache_get(v);
    } else {
        bool invalid = false;
        card = gs_hll_count(v, len, &invalid);
        if (invalid) {
            gs_error(c, CORRUPT);
            return;
        }
        if (!c->shared->cluster_mode) {
            gs_hll_cache_put(v, card);
            gs_store_signal_modified(c->db->store, e);
        }
    }
    gs_reply_int(&c->w, (int64_t)card);
}

/* PFMERGE destkey [sourcekey ...]: destkey becomes the union of itself
 * and the sources; dense when any of them is. */
void gs_cmd_pfmerge(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    uint8_t max[GS_HLL_REGISTERS];
    memset(max, 0, sizeof(max));
    bool bad, dense = false;
    for (size_t i = 1; i < argc; i++) {
        struct gs_entry *e = hll_lookup(c, &argv[i], 0, &bad);
        if (bad)
            return;
        if (!e)
            continue;
        size_t len;
        const char *v = gs_entry_value(e, &len);
        if (v[4] == GS_HLL_DENSE)
            dense = true;
        if (gs_hll_merge(max, v, len)) {
            gs_error(c, CORRUPT);
            return;
        }
    }
    struct gs_entry *e = hll_lookup(c, &argv[1], GS_LOOKUP_WRITE, &bad);
    if (bad)
        return;
    struct core_buf *b = hll_buf(c);
    if (!e && gs_hll_init(b)) {
        gs_error_oom(c);
        return;
    }
    if (e && !hll_load(c, e, b))
        return;
    if (dense && !hll_to_dense(c, b))
        return;
    for (unsigned j = 0; j < GS_HLL_REGISTERS; j++) {
        /* As Redis, an edit of a corrupted sparse form is skipped. */
        if (max[j] && gs_hll_set(b, j, max[j], sparse_max(c)) == GS_HLL_NOMEM) {
            gs_error_oom(c);
            return;
        }
    }
    gs_hll_cache_invalidate(b->data);
    if (hll_store(c, &argv[1], e, b))
        gs_reply_ok(&c->w);
}

/* PFDEBUG GETREG|DECODE|ENCODING|TODENSE key. */
void gs_cmd_pfdebug(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    (void)argc;
    bool bad;
    struct gs_entry *e = hll_lookup(c, &argv[2], GS_LOOKUP_WRITE, &bad);
    if (bad)
        return;
    if (!e) {
        gs_error(c, "ERR The specified key does not exist");
        return;
    }
    size_t len;
    const char *v = gs_entry_value(e, &len);
    bool sparse = v[4] == GS_HLL_SPARSE;
    const struct gs_arg *sub = &argv[1];
    if (gs_arg_is(sub, "getreg") || gs_arg_is(sub, "todense")) {
        struct core_buf *b = hll_buf(c);
        if (!hll_load(c, e, b))
            return;
        if (sparse && (!hll_to_dense(c, b) || !hll_store(c, &argv[2], e, b)))
            return;
        if (gs_arg_is(sub, "todense")) {
            gs_reply_int(&c->w, sparse ? 1 : 0);
            return;
        }
        gs_reply_array(&c->w, GS_HLL_REGISTERS);
        for (unsigned j = 0; j < GS_HLL_REGISTERS; j++)
            gs_reply_int(&c->w, gs_hll_dense_get(b->data, j));
    } else if (gs_arg_is(sub, "decode")) {
        if (!sparse) {
            gs_error(c, "ERR HLL encoding is not sparse");
            return;
        }
        struct core_buf *b = hll_buf(c);
        gs_hll_decode(v, len, b);
        if (b->oom) {
            gs_error_oom(c);
            return;
        }
        gs_reply_bulk(&c->w, b->data, b->len);
    } else if (gs_arg_is(sub, "encoding")) {
        if (sparse)
            gs_reply_simple(&c->w, "sparse", 6);
        else
            gs_reply_simple(&c->w, "dense", 5);
    } else {
        gs_errorf(c, "ERR Unknown PFDEBUG subcommand '%.*s'", (int)sub->len, sub->p);
    }
}
