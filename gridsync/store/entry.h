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
 *   | key bytes (klen) | value bytes (vlen) | '\0'
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

/* Bytes to request for an entry of this shape (invariant E1). */
static inline size_t gs_entry_alloc_size(int has_expire_field, size_t klen, size_t vlen)
{
    return sizeof(struct gs_entry) + gs_entry_key_offset(has_expire_field) + klen + vlen + 1;
}

#endif
