/*
 * Values in Redis 7.0's DUMP format (the serialization of one value in an
 * RDB file), for DUMP and RESTORE (gridsync/commands/cmd_dump.c):
 *
 *   [type][value][RDB version, 2 bytes LE: 10][CRC64 of all before, 8 bytes LE]
 *
 * What DUMP writes, per value (Redis 7.0's rdbSaveObject):
 *   string          0  the RDB string: an 8/16/32-bit integer when the
 *                      bytes are one (up to 11 of them), LZF-compressed
 *                      (liblzf, as Debian's Redis) when longer than 20
 *                      bytes and it saves at least 4, else length + bytes
 *   list           18  quicklist 2: node count, then per node PACKED (2)
 *                      and a Redis listpack as an RDB string
 *   set (intset)   11  the intset's bytes (Redis's layout, little-endian)
 *   set            2   count + members
 *   sorted set (lp) 17 a Redis listpack: member, score (text, as
 *                      Redis's d2string)
 *   sorted set     5   count + (member, 8-byte double) from the highest
 *   hash (lp)      16  a Redis listpack: field, value
 *   hash           4   count + (field, value)
 * A Redis listpack: [u32 total bytes][u16 count] entries (each followed by
 * its back-length) 0xFF; GridSync's own listpacks (types/listpack/) have
 * another header, so they are written entry by entry. A small value's
 * payload is byte for byte Redis's; a list of several nodes, or a big
 * set, hash or sorted set, can have its nodes or elements in another
 * order, which RESTORE (here or in Redis) reads the same.
 *
 * RESTORE reads those types (and RDB versions up to 10) and builds the
 * value through the types' own functions with the configured thresholds,
 * so it gets the encoding Redis would give it. Older encodings (ziplists,
 * zipmaps, the linked list, the sorted set with text scores, modules,
 * streams) are refused. Every length is checked against the bytes left
 * before anything is allocated: any input gets a clear answer (fuzzed by
 * fuzz/fuzz_gs_rdb.c). No I/O, no clock.
 */
#ifndef GS_RDB_H
#define GS_RDB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "gridsync/types/value.h"

#define GS_RDB_VERSION 10

/* CRC-64/Jones (reflected, polynomial 0xad93d23594c935a9, no final xor),
 * Redis's crc64: crc64(0, "123456789") = 0xe9c6d914c4b8d9ca. */
uint64_t gs_crc64(uint64_t crc, const void *p, size_t len);

/* Append DUMP's payload for a string value / a collection to out.
 * 0 or CORE_ENOMEM (out->oom). */
int gs_rdb_dump_string(const void *v, size_t len, struct core_buf *out);
int gs_rdb_dump_obj(const struct gs_obj *o, struct core_buf *out);

/* Redis's verifyDumpPayload: at least the footer, a version up to 10,
 * and the checksum. */
bool gs_rdb_verify(const void *p, size_t len);

/* A value read back: a string (its bytes in str, which the caller frees)
 * or a collection (obj, which the caller owns). */
struct gs_rdb_value {
    bool is_string;
    struct core_buf str;
    struct gs_obj obj;
};

enum { GS_RDB_BAD = -1000 }; /* Redis's "Bad data format" */

/* Read a payload's value (gs_rdb_verify passed), building collections
 * with lim. max_len bounds any string in it (proto-max-bulk-len).
 * Returns 0, GS_RDB_BAD or CORE_ENOMEM; on failure nothing is left to
 * free. */
int gs_rdb_load(const void *p, size_t len, const struct gs_type_limits *lim, size_t max_len,
                struct gs_rdb_value *out);

#endif
