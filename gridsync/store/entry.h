/*
 * The layout of one store entry. Internal to the store and its eviction
 * policies (store.c, evict.c, and white-box tests); everyone else uses the
 * accessors in store.h.
 *
 * An entry is ONE allocation, like a memcached item:
 *
 *   +----------------- 32-byte header -----------------+
 *   | hnext | link.prev | link.next | klen:29 bits:2 obj:1 | vlen:31 ttl:1 |
 *   +---------------------------------------------------+
 *   | [expire field, 12 bytes, only when has_expire_field]
 *   | key bytes (klen) | value bytes (vlen) | '\0' | access clock, 3 bytes
 *
 * Invariants:
 *  E1. The allocation is exactly entry_alloc_size(has_expire_field, klen,
 *      vlen) bytes requested (the allocator may hand out more; the store
 *      accounts what malloc_usable_size reports).
 *  E2. value[vlen] == '\0', so numeric commands may parse the value as a C
 *      string (it may also contain NULs: lengths are authoritative).
 *  E3. The expire field, once present, stays for the entry's life: its
 *      expire_ms is -1 after PERSIST, and heap_idx is GS_NO_HEAP_IDX
 *      exactly when expire_ms is -1.
 *  E4. is_obj == 1 exactly when the value bytes are one struct gs_obj
 *      (vlen == sizeof(struct gs_obj)): a hash, set, sorted set or list
 *      whose blocks the entry owns. Its counted field is what the store
 *      added to used_memory for those blocks.
 *  E5. The 3 bytes after the value's NUL are the entry's access clock,
 *      little-endian: Redis's 24-bit LRU clock (Unix seconds mod 2^24)
 *      of the entry's last write or touching lookup (OBJECT IDLETIME).
 *      The header has no spare bits, so the clock rides at the end of the
 *      allocation, where the value's last cache line usually is already;
 *      glibc and jemalloc round a request up to 16 bytes or more, so the
 *      3 bytes cost a size class only when the request lands within 3
 *      bytes of one (docs/gridsync-store.md, "Access clock").
 */
#ifndef GS_ENTRY_H
#define GS_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include "gridsync/store/evict.h"

/* Redis's limit on a key (512 MB); klen has 29 bits. */
#define GS_KEY_MAX ((size_t)(1u << 29) - 1)
/* Values up to 2 GB - 1 (vlen has 31 bits); Redis's limit is 512 MB. */
#define GS_VALUE_MAX ((size_t)(1u << 31) - 1)

#define GS_NO_HEAP_IDX UINT32_MAX

struct gs_entry {
    struct gs_entry *hnext; /* next entry in the hash bucket's chain */
    struct core_list link;  /* the eviction policy's list */
    uint32_t klen : 29;
    uint32_t evict_bits : 2; /* owned by the eviction policy (SLRU: segment) */
    uint32_t is_obj : 1;     /* the value is a struct gs_obj (types/value.h) */
    uint32_t vlen : 31;
    uint32_t has_expire_field : 1;
    char data[]; /* [struct gs_expire_field] key value '\0' */
};

/* Present only in entries that have (or had) a TTL. Packed to 12 bytes; it
 * sits at offset 32, so both members are naturally aligned anyway. */
struct __attribute__((packed, aligned(4))) gs_expire_field {
    int64_t expire_ms; /* absolute Unix ms, or -1 */
    uint32_t heap_idx; /* index in the store's expiry heap, or GS_NO_HEAP_IDX */
};

_Static_assert(sizeof(struct gs_entry) == 32, "entry header must stay 32 bytes");
_Static_assert(sizeof(struct gs_expire_field) == 12, "expire field must stay 12 bytes");

static inline struct gs_expire_field *gs_entry_expire_field(struct gs_entry *e)
{
    return e->has_expire_field ? (struct gs_expire_field *)e->data : NULL;
}

static inline size_t gs_entry_key_offset(int has_expire_field)
{
    return has_expire_field ? sizeof(struct gs_expire_field) : 0;
}

static inline char *gs_entry_keyp(struct gs_entry *e)
{
    return e->data + gs_entry_key_offset(e->has_expire_field);
}

static inline char *gs_entry_valp(struct gs_entry *e)
{
    return gs_entry_keyp(e) + e->klen;
}

/* Redis's LRU clock: 24 bits of seconds (LRU_CLOCK_MAX, resolution 1 s). */
#define GS_ENTRY_CLOCK_BYTES 3u
#define GS_ENTRY_CLOCK_MAX   ((1u << 24) - 1)

/* Bytes to request for an entry of this shape (invariant E1). */
static inline size_t gs_entry_alloc_size(int has_expire_field, size_t klen, size_t vlen)
{
    return sizeof(struct gs_entry) + gs_entry_key_offset(has_expire_field) + klen + vlen + 1 +
           GS_ENTRY_CLOCK_BYTES;
}

/* The access clock (invariant E5). */
static inline unsigned char *gs_entry_clockp(struct gs_entry *e)
{
    return (unsigned char *)gs_entry_valp(e) + e->vlen + 1;
}

static inline uint32_t gs_entry_clock(struct gs_entry *e)
{
    const unsigned char *p = gs_entry_clockp(e);
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
}

static inline void gs_entry_set_clock(struct gs_entry *e, uint32_t clock)
{
    unsigned char *p = gs_entry_clockp(e);
    p[0] = (unsigned char)clock;
    p[1] = (unsigned char)(clock >> 8);
    p[2] = (unsigned char)(clock >> 16);
}

#endif
