/*
 * HyperLogLog in Redis 7.0's string format, byte for byte: the value of
 * a key that PFADD, PFCOUNT and PFMERGE use (gridsync/commands/cmd_hll.c)
 * is a plain string, which GET returns and SET may write, so the bytes
 * after any sequence of adds must be the ones Redis would hold.
 *
 *   +------+---+-------+--------------+------------------------+
 *   | HYLL | E | 0 0 0 | card (8, LE) | registers              |
 *   +------+---+-------+--------------+------------------------+
 *
 * E is 0 (dense) or 1 (sparse); card caches the last count, stale while
 * the top bit of its last byte is set. 16384 registers (P = 14): an
 * element's 64-bit MurmurHash64A picks a register with its low 14 bits,
 * and the register keeps the longest 0...1 run seen in the other 50
 * (1..51).
 *
 *  - dense: 6 bits per register, packed from each byte's least
 *    significant bit on: 12288 bytes, GS_HLL_DENSE_SIZE with the header.
 *  - sparse: runs. 00xxxxxx ZERO (1..64 zero registers), 01xxxxxx
 *    yyyyyyyy XZERO (1..16384), 1vvvvvxx VAL (value 1..32, 1..4
 *    registers). A new HLL is XZERO:16384 (18 bytes). A value above 32,
 *    or a sparse form that would grow past hll-sparse-max-bytes, makes it
 *    dense, for good.
 *
 * A sparse update edits in place as Redis does: the opcode holding the
 * register is split into at most three (ZERO/XZERO by length), then equal
 * VALs next to each other are merged, looking at most five opcodes from
 * the one before the edit. The count is Ertl's estimator ("New
 * cardinality estimation algorithms for HyperLogLog sketches") over the
 * registers' histogram, with Redis's floating-point operations in
 * Redis's order, so the integers match too.
 *
 * The functions work on a buffer the caller owns (the value's bytes,
 * copied out of the store and back); a sparse edit may grow it. No I/O,
 * no clock. Complexity: add O(1) dense, O(sparse bytes) sparse; count
 * and merge O(16384).
 */
#ifndef GS_HLL_H
#define GS_HLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

#define GS_HLL_REGISTERS  16384
#define GS_HLL_HDR_SIZE   16
#define GS_HLL_DENSE_SIZE (GS_HLL_HDR_SIZE + GS_HLL_REGISTERS * 6 / 8)
#define GS_HLL_SPARSE_NEW (GS_HLL_HDR_SIZE + 2)
#define GS_HLL_SPARSE_MAX 3000 /* hll-sparse-max-bytes, Redis's default */

enum { GS_HLL_DENSE = 0, GS_HLL_SPARSE = 1 };

/* What an edit returns besides 0 (no register grew) and 1 (one did): a
 * sparse form that does not decode to 16384 registers (Redis's
 * "Corrupted HLL object"), or no memory (b unchanged). */
enum { GS_HLL_INVALID = -1, GS_HLL_NOMEM = -2 };

/* Redis's isHLLObjectOrReply, past the type check: at least a header,
 * the magic, a known encoding, and a dense form of exactly its size. */
bool gs_hll_is_hll(const void *p, size_t len);

/* Replace b's contents with a new, empty (sparse) HLL. 0 or
 * GS_HLL_NOMEM. */
int gs_hll_init(struct core_buf *b);

/* MurmurHash64A (Redis's variant, little-endian reads) of len bytes. */
uint64_t gs_hll_murmur64a(const void *key, size_t len, uint32_t seed);

/* Add an element to the HLL in b (gs_hll_is_hll). sparse_max bounds the
 * sparse form (hll-sparse-max-bytes). Returns 1, 0, GS_HLL_INVALID or
 * GS_HLL_NOMEM. A 1 leaves the cached count stale. */
int gs_hll_add(struct core_buf *b, const void *ele, size_t len, size_t sparse_max);

/* Raise register index to count if lower (PFMERGE's step); as gs_hll_add. */
int gs_hll_set(struct core_buf *b, unsigned index, uint8_t count, size_t sparse_max);

/* Make b dense (nothing to do if it is). 0, GS_HLL_INVALID, GS_HLL_NOMEM. */
int gs_hll_to_dense(struct core_buf *b);

/* max[i] = MAX(max[i], register i) for the HLL p[0..len). 0 or
 * GS_HLL_INVALID. */
int gs_hll_merge(uint8_t max[GS_HLL_REGISTERS], const void *p, size_t len);

/* The estimated count of the HLL p[0..len); *invalid is set when its
 * sparse form does not decode. Ignores and does not write the cache. */
uint64_t gs_hll_count(const void *p, size_t len, bool *invalid);

/* The estimated count of registers held one per byte (PFCOUNT of
 * several keys). */
uint64_t gs_hll_count_registers(const uint8_t regs[GS_HLL_REGISTERS]);

/* The cache: whether it holds a count, which one, and writing one. */
bool gs_hll_cache_valid(const void *p);
uint64_t gs_hll_cache_get(const void *p);
void gs_hll_cache_put(void *p, uint64_t card);
void gs_hll_cache_invalidate(void *p);

/* Register i of a dense HLL p (gs_hll_is_hll, encoding dense). */
uint8_t gs_hll_dense_get(const void *p, unsigned i);

/* PFDEBUG DECODE: the sparse form p[0..len) as Redis prints it
 * ("Z:16384", "z:3 v:2,1 ..."), appended to out. */
void gs_hll_decode(const void *p, size_t len, struct core_buf *out);

#endif
