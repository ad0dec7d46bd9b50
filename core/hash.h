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
 */
#ifndef CORE_HASH_H
#define CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t core_hash64(const void *data, size_t len, uint64_t seed);
uint64_t core_fnv1a64(const void *data, size_t len);
uint32_t core_fnv1a32(const void *data, size_t len);
uint16_t core_crc16(const void *data, size_t len);

#endif
