/*
 * Hash functions.
 *
 * - core_hash64: fast seeded 64-bit hash for in-memory hash tables (a
 *   wyhash-style multiply-fold). Seed it per process so that keys chosen
 *   by a client cannot be aimed at one bucket.
 * - core_fnv1a64 / core_fnv1a32: FNV-1a, stable across runs and machines:
 *   used where the value is part of a protocol or placement (the
 *   consistent-hash ring).
 * - core_crc16: CRC16-CCITT (XMODEM), the function Redis Cluster hashes
 *   keys to slots with (slot = crc16(key) % 16384).
 * - core_crc32c: CRC-32C (Castagnoli), the checksum of records on disk (the
 *   journal): better error detection than CRC-32 for the same cost.
 */
#ifndef CORE_HASH_H
#define CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t core_hash64(const void *data, size_t len, uint64_t seed);
uint64_t core_fnv1a64(const void *data, size_t len);
uint32_t core_fnv1a32(const void *data, size_t len);
uint16_t core_crc16(const void *data, size_t len);

/* CRC-32C of len bytes, continuing from crc: start with 0, and pass the
 * previous result to checksum data that arrives in pieces
 * (core_crc32c(core_crc32c(0, a, n), b, m) == CRC-32C of a then b). */
uint32_t core_crc32c(uint32_t crc, const void *data, size_t len);

#endif
