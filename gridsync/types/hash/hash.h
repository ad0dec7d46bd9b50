/*
 * The hash type: field -> value, both binary-safe strings. Small hashes
 * are a listpack of field, value, field, value... in insertion order
 * (types/listpack/); a hash converts to a hash table (types/htab/) when
 * it would hold more than hash-max-listpack-entries fields or a field or
 * value longer than hash-max-listpack-value bytes, and stays one, as in
 * Redis 7.0 (there is no conversion back).
 *
 * Every function takes a struct gs_obj of type GS_TYPE_HASH (value.h);
 * the object owns its blocks. Functions that can fail return 0 or
 * CORE_ENOMEM with the hash unchanged.
 */
#ifndef GS_HASH_H
#define GS_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gridsync/types/listpack/listpack.h"
#include "gridsync/types/value.h"

/* An empty hash (listpack). */
int gs_hash_init(struct gs_obj *o);
void gs_hash_free(struct gs_obj *o);
int gs_hash_dup(struct gs_obj *dst, const struct gs_obj *src);
size_t gs_hash_mem(const struct gs_obj *o);
size_t gs_hash_recount(const struct gs_obj *o);
size_t gs_hash_len(const struct gs_obj *o);

/* The value of field f, or false. An integer stored in a listpack is
 * written into buf (GS_LP_INTBUF bytes); *v points into the hash or buf,
 * valid until the hash is modified. */
bool gs_hash_get(const struct gs_obj *o, const char *f, size_t flen, char *buf, const char **v,
                 size_t *vlen);

/* Set f to v, converting to a hash table first when the limits say so.
 * *created (if not NULL) says whether f is new. */
int gs_hash_set(struct gs_obj *o, const char *f, size_t flen, const char *v, size_t vlen,
                const struct gs_type_limits *lim, bool *created);

/* Delete f; returns whether it was there. */
bool gs_hash_delete(struct gs_obj *o, const char *f, size_t flen);

/* Convert a listpack hash to a hash table (also used by the thresholds). */
int gs_hash_convert(struct gs_obj *o);

/* Iteration over every field in the encoding's order (insertion order
 * for a listpack). The hash must not be modified meanwhile. */
struct gs_hash_iter {
    const struct gs_obj *o;
    size_t off;       /* listpack: the next field's offset */
    uint64_t bucket;  /* hash table: the next bucket */
    const void *elem; /* hash table: the next element in the bucket */
    char fbuf[GS_LP_INTBUF], vbuf[GS_LP_INTBUF];
};
void gs_hash_iter_init(struct gs_hash_iter *it, const struct gs_obj *o);
bool gs_hash_iter_next(struct gs_hash_iter *it, const char **f, size_t *flen, const char **v,
                       size_t *vlen);

/* HSCAN: a listpack is returned whole with cursor 0 (as Redis); a table
 * is scanned by the dictScan contract. fn gets each field and value. */
typedef void gs_hash_scan_fn(void *arg, const char *f, size_t flen, const char *v, size_t vlen);
uint64_t gs_hash_scan(const struct gs_obj *o, uint64_t cursor, size_t count, gs_hash_scan_fn *fn,
                      void *arg);

/* A random field (and its value). rnd is a random number from the caller
 * (listpacks pick rnd % len); the hash must not be empty. */
void gs_hash_random(const struct gs_obj *o, uint64_t rnd, char *fbuf, char *vbuf, const char **f,
                    size_t *flen, const char **v, size_t *vlen);

#endif
