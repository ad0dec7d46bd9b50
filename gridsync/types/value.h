/*
 * Typed values: what a store entry holds when it is not a string. A
 * collection entry's value bytes are one struct gs_obj (the type, the
 * encoding, and a pointer to the collection's own blocks); the store
 * (store.h) owns the object, adds its memory to used_memory and frees it
 * with the entry. The type modules (types/hash/, ...) operate on a
 * struct gs_obj; this file dispatches what the store needs per type.
 *
 * Names follow Redis: TYPE reports gs_type_name, OBJECT ENCODING
 * gs_encoding_name.
 */
#ifndef GS_VALUE_H
#define GS_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum gs_type {
    GS_TYPE_STRING = 0,
    GS_TYPE_LIST = 1,
    GS_TYPE_SET = 2,
    GS_TYPE_ZSET = 3,
    GS_TYPE_HASH = 4,
};

enum gs_encoding {
    GS_ENC_RAW = 0, /* strings: OBJECT ENCODING says int/embstr/raw by content */
    GS_ENC_LISTPACK = 1,
    GS_ENC_HASHTABLE = 2,
    GS_ENC_QUICKLIST = 3, /* every list (types/quicklist/), as in Redis 7.0 */
    GS_ENC_INTSET = 4,    /* a set of integers (types/intset/) */
    GS_ENC_SKIPLIST = 5,  /* a big sorted set (types/zset/) */
};

/* 16 bytes, stored in the key's entry (store/entry.h): one key of a small
 * collection is its entry plus one block, so every byte here is paid once
 * per key (1M small sets: 16 MB). */
struct gs_obj {
    uint64_t type : 4;     /* enum gs_type, never GS_TYPE_STRING */
    uint64_t enc : 4;      /* enum gs_encoding */
    uint64_t counted : 56; /* the memory the store has added for ptr (store.c) */
    void *ptr;             /* the encoding's data: a listpack, a struct gs_htab... */
};
_Static_assert(sizeof(struct gs_obj) == 16, "struct gs_obj is paid once per key");

/* The conversion thresholds (CONFIG names in comments), Redis's defaults. */
struct gs_type_limits {
    int64_t hash_max_listpack_entries; /* hash-max-listpack-entries 512 */
    int64_t hash_max_listpack_value;   /* hash-max-listpack-value 64 */
    int64_t list_max_listpack_size;    /* list-max-listpack-size -2 (8 KB nodes) */
    int64_t set_max_intset_entries;    /* set-max-intset-entries 512 */
    int64_t zset_max_listpack_entries; /* zset-max-listpack-entries 128 */
    int64_t zset_max_listpack_value;   /* zset-max-listpack-value 64 */
    int64_t hll_sparse_max_bytes;      /* hll-sparse-max-bytes 3000 (hll/hll.h) */
};

#define GS_TYPE_LIMITS_DEFAULT                                                                     \
    {                                                                                              \
        512, 64, -2, 512, 128, 64, 3000                                                            \
    }

/* Bytes the allocator holds for the object's blocks; O(1). */
size_t gs_obj_mem(const struct gs_obj *o);
/* The same, recomputed block by block; O(n), for checks. */
size_t gs_obj_recount(const struct gs_obj *o);
/* Free the object's blocks (not the struct, which lives in the entry). */
void gs_obj_free(struct gs_obj *o);
/* A deep copy into *dst. Returns 0 or CORE_ENOMEM (dst untouched). */
int gs_obj_dup(struct gs_obj *dst, const struct gs_obj *src);
/* Elements: fields of a hash, members of a set... */
size_t gs_obj_len(const struct gs_obj *o);

/* Serialization for snapshots and migration: the collection as one
 * listpack (a hash: field, value, field, value...; a list or a set: its
 * elements), malloc'd into *out
 * (the caller frees it). Returns 0 or CORE_ENOMEM. */
int gs_obj_encode(const struct gs_obj *o, unsigned char **out, size_t *len);
/* Rebuild a collection of this type from gs_obj_encode's bytes, which may
 * come from outside: they are validated (listpack structure, pair count),
 * and the encoding is chosen by lim as if the elements had been added one
 * by one. Returns 0, CORE_EPROTO (malformed; nothing allocated) or
 * CORE_ENOMEM. */
bool gs_obj_validate(int type, const void *buf, size_t len);
int gs_obj_decode(int type, const void *buf, size_t len, const struct gs_type_limits *lim,
                  struct gs_obj *out);

const char *gs_type_name(int type);
const char *gs_encoding_name(int enc);

#endif
