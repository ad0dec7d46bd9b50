/*
 * DUMP, RESTORE and RESTORE-ASKING, following Redis 7.0's cluster.c
 * (dumpCommand, restoreCommand): the payload is a value in the RDB
 * format with its version and CRC64 (gridsync/types/rdb/rdb.h); RESTORE
 * checks its options, the key, the TTL, the footer and then the value,
 * in Redis's order and with its errors.
 *
 * IDLETIME and FREQ are checked as Redis checks them and not applied:
 * the store's access clock (OBJECT IDLETIME) starts at the restore.
 */
#include <string.h>

#include "gridsync/client/client.h"
#include "gridsync/commands/commands.h"
#include "gridsync/store/store.h"
#include "gridsync/types/rdb/rdb.h"

void gs_cmd_dump(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    (void)argc;
    struct gs_entry *e = gs_store_lookup(c->db->store, argv[1].p, argv[1].len, c->db->now_ms, 0);
    if (!e) {
        gs_reply_null(&c->w);
        return;
    }
    struct core_buf out = {0};
    int rc;
    if (gs_entry_type(e) == GS_TYPE_STRING) {
        size_t len;
        const char *v = gs_entry_value(e, &len);
        rc = gs_rdb_dump_string(v, len, &out);
    } else {
        struct gs_obj o;
        gs_entry_obj(e, &o);
        rc = gs_rdb_dump_obj(&o, &out);
    }
    if (rc)
        gs_error_oom(c);
    else
        gs_reply_bulk(&c->w, out.data, out.len);
    core_buf_free(&out);
}

/* RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds]
 * [FREQ frequency]. */
void gs_cmd_restore(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    bool replace = false, absttl = false;
    int64_t idle = -1, freq = -1, ttl;
    for (size_t j = 4; j < argc; j++) {
        size_t more = argc - j - 1;
        if (gs_arg_is(&argv[j], "replace")) {
            replace = true;
        } else if (gs_arg_is(&argv[j], "absttl")) {
            absttl = true;
        } else if (gs_arg_is(&argv[j], "idletime") && more >= 1 && freq == -1) {
            if (!gs_arg_int(c, &argv[j + 1], &idle, NULL))
                return;
            if (idle < 0) {
                gs_error(c, "ERR Invalid IDLETIME value, must be >= 0");
                return;
            }
            j++;
        } else if (gs_arg_is(&argv[j], "freq") && more >= 1 && idle == -1) {
            if (!gs_arg_int(c, &argv[j + 1], &freq, NULL))
                return;
            if (freq < 0 || freq > 255) {
                gs_error(c, "ERR Invalid FREQ value, must be >= 0 and <= 255");
                return;
            }
            j++;
        } else {
            gs_error_syntax(c);
            return;
        }
    }
    struct gs_store *s = c->db->store;
    const struct gs_arg *key = &argv[1];
    if (!replace && gs_store_lookup(s, key->p, key->len, c->db->now_ms, GS_LOOKUP_WRITE)) {
        gs_error(c, "BUSYKEY Target key name already exists.");
        return;
    }
    if (!gs_arg_int(c, &argv[2], &ttl, NULL))
        return;
    if (ttl < 0) {
        gs_error(c, "ERR Invalid TTL value, must be >= 0");
        return;
    }
    if (!gs_rdb_verify(argv[3].p, argv[3].len)) {
        gs_error(c, "ERR DUMP payload version or checksum are wrong");
        return;
    }
    struct gs_rdb_value v;
    int rc = gs_rdb_load(argv[3].p, argv[3].len, &c->shared->limits,
                         (size_t)c->shared->proto_max_bulk_len, &v);
    if (rc == CORE_ENOMEM) {
        gs_error_oom(c);
        return;
    }
    if (rc) {
        gs_error(c, "ERR Bad data format");
        return;
    }
    if (ttl && !absttl)
        ttl += c->db->now_ms;
    if (ttl && ttl <= c->db->now_ms) {
        /* Already expired: the key is gone (REPLACE removed it), as in Redis. */
        if (replace)
            gs_store_delete(s, key->p, key->len, c->db->now_ms);
        core_buf_free(&v.str);
        if (!v.is_string)
            gs_obj_free(&v.obj);
        gs_reply_ok(&c->w);
        return;
    }
    int64_t expire = ttl ? ttl : -1;
    if (v.is_string) {
        rc = gs_store_set(s, key->p, key->len, v.str.data ? v.str.data : "", v.str.len, expire,
                          NULL);
        core_buf_free(&v.str);
    } else {
        int type = v.obj.type;
        rc = gs_store_set_obj(s, key->p, key->len, &v.obj, expire, NULL);
        if (rc)
            gs_obj_free(&v.obj);
        else if (type == GS_TYPE_LIST || type == GS_TYPE_ZSET)
            gs_key_ready(c, c->db, key->p, key->len); /* BLPOP, BZPOPMIN... waiting */
    }
    if (rc) {
        gs_error_oom(c);
        return;
    }
    gs_reply_ok(&c->w);
}
