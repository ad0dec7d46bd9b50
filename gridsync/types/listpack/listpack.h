/*
 * A listpack: a sequence of entries (binary-safe strings, or integers
 * when the string is a canonical decimal int64) packed into ONE
 * allocation, for the small form of hashes (and later sets, sorted sets
 * and list chunks). Redis's listpack entry encodings; the per-entry
 * back-length is optional, chosen when the listpack is created: a list's
 * nodes have it (RPOP, LINDEX -1 and LRANGE from the tail step backwards
 * in O(1) per entry, as in Redis), while hashes and sorted sets, which
 * walk forward only, do not pay for those bytes.
 *
 * Layout:  [u32 total bytes][u32 entry count | 0x80000000 if back-lengths]
 *          entry entry ...
 * With back-lengths every entry is followed by the size of its encoding
 * (first byte to last data byte) in 1 to 5 bytes that read from the
 * right (Redis's lpEncodeBacklen): the rightmost byte holds the low 7
 * bits, and a byte's top bit says that more bytes follow to its left.
 * Entry encodings (first byte):
 *   0xxxxxxx                 7-bit unsigned int
 *   10xxxxxx + bytes         string, length < 64
 *   110xxxxx + 1 byte        13-bit signed int
 *   1110xxxx + 1 byte + bytes string, length < 4096
 *   0xF0 + u32 len + bytes   string, any length
 *   0xF1/0xF2/0xF3/0xF4 + 2/3/4/8 bytes   16/24/32/64-bit signed int
 * A string is stored as an integer exactly when gs_string2ll accepts it,
 * so reading an entry back gives the same bytes that were stored.
 *
 * Ownership: a listpack is a malloc'd block owned by whoever holds the
 * pointer; functions that grow or shrink it take `unsigned char **` and
 * may move it (realloc). Entry positions are byte offsets from the start
 * (size_t), which stay meaningful across a move. Functions that can fail
 * return 0 or CORE_ENOMEM and leave the listpack unchanged on failure.
 */
#ifndef GS_LISTPACK_H
#define GS_LISTPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GS_LP_HDR 8u
/* Room a caller passes to gs_lp_get for an integer entry's digits. */
#define GS_LP_INTBUF 21

/* A new empty listpack, or NULL when out of memory; _backlen: one whose
 * entries carry back-lengths (the form is kept for its life, and by
 * gs_lp_split's tail). */
unsigned char *gs_lp_new(void);
unsigned char *gs_lp_new_backlen(void);
bool gs_lp_has_backlen(const unsigned char *lp);
void gs_lp_free(unsigned char *lp);

size_t gs_lp_bytes(const unsigned char *lp);
uint32_t gs_lp_count(const unsigned char *lp);

/* Offset of the first entry, or 0 when empty. */
size_t gs_lp_first(const unsigned char *lp);
/* Offset of the entry after the one at off, or 0 at the end. */
size_t gs_lp_next(const unsigned char *lp, size_t off);
/* Offset of the entry before the one at off, or 0 at the first. O(1)
 * with back-lengths, else a walk from the first entry. */
size_t gs_lp_prev(const unsigned char *lp, size_t off);
/* Offset of the last entry, or 0 when empty: O(1) with back-lengths,
 * else a walk over the entries. */
size_t gs_lp_last(const unsigned char *lp);
/* Offset of the entry at index i (0-based), or 0 when past the end. With
 * back-lengths an index in the second half is reached from the tail. */
size_t gs_lp_seek(const unsigned char *lp, uint32_t i);
/* Size in bytes of the entry at off (its back-length included). */
size_t gs_lp_entry_size(const unsigned char *lp, size_t off);

/* The entry at off as a string. For an integer entry the digits are
 * written to buf (GS_LP_INTBUF bytes) and buf returned. *ival, when not
 * NULL, gets the integer and the return says whether it was one. */
const char *gs_lp_get(const unsigned char *lp, size_t off, char *buf, size_t *len);
bool gs_lp_get_int(const unsigned char *lp, size_t off, int64_t *ival);

/* Whether the entry at off equals the string s. */
bool gs_lp_eq(const unsigned char *lp, size_t off, const char *s, size_t slen);

/* From the entry at off (0: the first), find an entry equal to s, looking
 * only at every (skip+1)-th entry: skip 1 searches the fields of a
 * field/value listpack. Returns its offset or 0. */
size_t gs_lp_find(const unsigned char *lp, size_t off, const char *s, size_t slen, unsigned skip);

/* Insert s before the entry at off (0 or gs_lp_bytes: append). */
int gs_lp_insert(unsigned char **lp, size_t off, const char *s, size_t slen);
int gs_lp_append(unsigned char **lp, const char *s, size_t slen);
/* Replace the entry at off by s. */
int gs_lp_replace(unsigned char **lp, size_t off, const char *s, size_t slen);
/* Delete n entries starting at off (they must exist). Never fails: a
 * shrinking realloc that fails keeps the bigger block. */
void gs_lp_delete(unsigned char **lp, size_t off, uint32_t n);

/* Move the entries from off to the end into a new listpack (*tail);
 * lp keeps those before off. Returns 0 or CORE_ENOMEM (nothing changed). */
int gs_lp_split(unsigned char **lp, size_t off, unsigned char **tail);

/* Validate a listpack received from outside (a snapshot): the header,
 * every entry inside the buffer, each back-length (when the listpack has
 * them) equal to its entry's encoding size, the count. For decoders and
 * checks; O(n). */
bool gs_lp_validate(const unsigned char *lp, size_t len);

/* The encoded size of s as one entry, without a back-length. */
size_t gs_lp_encoded_size(const char *s, size_t slen);
/* What inserting s adds to lp's bytes (its back-length included when lp
 * has them): to check a size limit before inserting. */
size_t gs_lp_entry_bytes(const unsigned char *lp, const char *s, size_t slen);

#endif
