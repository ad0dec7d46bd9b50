/*
 * Key -> slot, exactly as Redis Cluster computes it, so that cluster-aware
 * clients (redis-cli -c, redis-py RedisCluster) route to the right node by
 * themselves.
 *
 * Redis Cluster spec, "Keys distribution model" and "Hash tags":
 *   HASH_SLOT = CRC16(key) mod 16384
 * where, if the key contains a '{' followed later by a '}' with at least
 * one byte between them, only the bytes between the first '{' and the
 * first '}' after it are hashed. "{}" (empty tag) means the whole key is
 * hashed.
 */
#ifndef GS_SLOT_H
#define GS_SLOT_H

#include <stddef.h>
#include <stdint.h>

#define GS_SLOTS 16384

/* The slot (0..GS_SLOTS-1) of a binary-safe key. Never fails; the empty
 * key is slot 0. */
unsigned gs_key_slot(const void *key, size_t len);

/* The part of the key that is hashed: the hash tag if there is a
 * non-empty one, else the whole key. Returns a pointer into key and sets
 * *taglen. Used by multi-key commands to check that keys share a slot
 * without hashing each (same tag => same slot). */
const char *gs_key_hash_part(const void *key, size_t len, size_t *taglen);

#endif
