/*
 * HSCAN, SSCAN and ZSCAN's shared body (scan.h).
 *
 * The scratch buffer holds, per string collected, its length (uint64_t)
 * then its bytes; strings counts them, so the reply needs no second pass
 * to size its array.
 */
#include "gridsync/commands/scan.h"

#include "gridsync/commands/glob.h"

#include <string.h>

/* A scan that grew the node's scratch buffer beyond this gives the memory
 * back (the buffer serves every client: struct gs_shared). */
#define SCRATCH_KEEP (256 * 1024)

static void collect_string(struct gs_scan_collect *sc, const char *s, size_t len)
{
    uint64_t l = len;
    core_buf_append(sc->buf, &l, sizeof(l));
    core_buf_append(sc->buf, s, len);
    sc->strings++;
}

void gs_scan_collect(struct gs_scan_collect *sc, const char *elem, size_t len, const char *val,
                     size_t vlen)
{
    if (sc->pattern && !gs_glob_match(sc->pattern->p, sc->pattern->len, elem, len, false))
        return;
    collect_string(sc, elem, len);
    if (val)
        collect_string(sc, val, vlen);
}

void gs_scan_value(struct gs_client *c, size_t argc, struct gs_arg *argv, int type,
                   gs_scan_visit_fn *visit)
{
    uint64_t cursor;
    if (!gs_parse_scan_cursor(c, &argv[2], &cursor))
        return;
    bool wrong;
    struct gs_entry *e = gs_lookup_typed(c, &argv[1], type, 0, &wrong);
    if (wrong)
        return;
    if (!e) { /* Redis's shared.emptyscan */
        gs_reply_array(&c->w, 2);
        gs_reply_bulk(&c->w, "0", 1);
        gs_reply_array(&c->w, 0);
        return;
    }
    struct gs_scan_opts opts;
    if (!gs_parse_scan_opts(c, argc, argv, 3, false, &opts))
        return;
    struct gs_obj o;
    gs_entry_obj(e, &o);
    struct core_buf *buf = &c->shared->scratch;
    buf->len = 0;
    struct gs_scan_collect sc = {buf, opts.pattern, 0};
    cursor = visit(&o, cursor, (size_t)opts.count, &sc);
    if (buf->oom) {
        core_buf_free(buf);
        gs_error_oom(c);
        return;
    }
    gs_reply_array(&c->w, 2);
    gs_reply_bulk_int(&c->w, (int64_t)cursor); /* Redis sends it as a string */
    gs_reply_array(&c->w, sc.strings);
    const char *p = buf->data;
    for (size_t i = 0; i < sc.strings; i++) {
        uint64_t l;
        memcpy(&l, p, sizeof(l));
        p += sizeof(l);
        gs_reply_bulk(&c->w, p, l);
        p += l;
    }
    if (buf->cap > SCRATCH_KEEP)
        core_buf_free(buf);
}
