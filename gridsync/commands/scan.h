/*
 * HSCAN, SSCAN and ZSCAN: the part they share (Redis 7.0's
 * scanGenericCommand for a value). The cursor and the options are parsed
 * as the key space's SCAN does (gs_parse_scan_cursor, gs_parse_scan_opts
 * in client/client.h); the elements the value type's scan visits that pass
 * MATCH are collected in the node's scratch buffer, then replied as
 * [cursor, [element, value, element, value ...]] (no value for a set).
 *
 * The elements are copied, not pointed at: a listpack hands its integers
 * out in buffers that do not outlive the visit. (The key space's SCAN and
 * KEYS point at the store's keys instead, which stay put while the
 * command runs: commands/cmd_keys.c.)
 */
#ifndef GS_COMMANDS_SCAN_H
#define GS_COMMANDS_SCAN_H

#include "gridsync/client/client.h"

#include <stddef.h>
#include <stdint.h>

/* What a type's visit fills; opaque to the visit, which only calls
 * gs_scan_collect. */
struct gs_scan_collect {
    struct core_buf *buf;         /* the node's scratch buffer */
    const struct gs_arg *pattern; /* MATCH; NULL: every element */
    size_t strings;               /* strings collected (a pair counts two) */
};

/* Keep the element elem, and val beside it (a hash's value, a zset's score
 * as its reply string; NULL for a set), if elem matches the pattern. Both
 * are copied. */
void gs_scan_collect(struct gs_scan_collect *sc, const char *elem, size_t len, const char *val,
                     size_t vlen);

/* A value type's scan: from cursor, about count elements of o, each handed
 * to gs_scan_collect; returns the next cursor (0: done), as gs_hash_scan,
 * gs_set_scan and gs_zset_scan do. */
typedef uint64_t gs_scan_visit_fn(const struct gs_obj *o, uint64_t cursor, size_t count,
                                  struct gs_scan_collect *sc);

/* The whole command `<cmd> key cursor [MATCH pattern] [COUNT count]` on
 * the value of type (a GS_TYPE_*) at argv[1], in Redis's order: the cursor
 * (ERR invalid cursor), the key (WRONGTYPE; a missing key is [0, []]
 * whatever the options), then the options. Replies. */
void gs_scan_value(struct gs_client *c, size_t argc, struct gs_arg *argv, int type,
                   gs_scan_visit_fn *visit);

#endif
