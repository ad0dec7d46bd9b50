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

#include <stdbool.h>
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

/* A slot's migration state in its group. Only the two non-serving
 * states are ever recorded in a snapshot. */
enum { GS_SLOT_SERVING = 0, GS_SLOT_BLOCKED = 1, GS_SLOT_GONE = 2 };

/* A group's slot migration state as its snapshots carry it (written by
 * cluster_migrate.c's gs_cl_migration_encode): records of u16 slot
 * (little-endian), u8 state (GS_SLOT_BLOCKED or GS_SLOT_GONE), u8 name
 * length, then the destination's name. Reads the record at p[*off..len):
 * 1 (a record; *off moved past it; name points into p), 0 (the end:
 * *off == len), -1 (truncated, a slot out of range, or another state).
 * Pure: fuzzed through fuzz_raft_entry. */
int gs_slot_state_next(const char *p, size_t len, size_t *off, unsigned *slot, unsigned *state,
                       const char **name, size_t *nlen);

/* Whether p[0..len) is a whole sequence of such records: the snapshot's
 * validation pass (raft_batch.c) checks it before a restore clears the
 * store, so that the restore cannot fail halfway on it. */
bool gs_slot_state_valid(const char *p, size_t len);

#endif
