/*
 * The set type: distinct binary-safe strings. A set whose members are all
 * integers is an intset (types/intset/), sorted; it becomes a hash table
 * (types/htab/, empty values) when a member is not an integer or it would
 * hold more than set-max-intset-entries members, and stays one, as in
 * Redis 7.0.
 *
 * Every function takes a struct gs_obj of type GS_TYPE_SET (value.h).
 * Functions that can fail return 0 or CORE_ENOMEM with the set unchanged.
 */
#ifndef GS_SET_H
#define GS_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gridsync/types/listpack/listpack.h"
#include "gridsync/types/value.h"

int gs_set_init(struct gs_obj *o);
void gs_set_free(struct gs_obj *o);
int gs_set_dup(struct gs_obj *dst, const struct gs_obj *src);
size_t gs_set_mem(const struct gs_obj *o);
size_t gs_set_recount(const struct gs_obj *o);
size_t gs_set_len(const struct gs_obj *o);

int gs_set_add(struct gs_obj *o, const char *s, size_t len, const struct gs_type_limits *lim,
               bool *added);
bool gs_set_remove(struct gs_obj *o, const char *s, size_t len);
bool gs_set_contains(const struct gs_obj *o, const char *s, size_t len);
int gs_set_convert(struct gs_obj *o);

/* Iteration in the encoding's order (ascending for an intset). */
struct gs_set_iter {
    const struct gs_obj *o;
    uint64_t i;       /* intset: the next index; table: the next bucket */
    const void *elem; /* table: the next element in the bucket */
    char buf[GS_LP_INTBUF];
};
void gs_set_iter_init(struct gs_set_iter *it, const struct gs_obj *o);
bool gs_set_iter_next(struct gs_set_iter *it, const char **s, size_t *len);

/* A random member; rnd from the caller; the set must not be empty. The
 * bytes are in buf (an intset member) or in the set. */
const char *gs_set_random(const struct gs_obj *o, uint64_t rnd, char *buf, size_t *len);

/* SSCAN: an intset whole with cursor 0 (as Redis), a table by the
 * dictScan contract. */
typedef void gs_set_scan_fn(void *arg, const char *s, size_t len);
uint64_t gs_set_scan(const struct gs_obj *o, uint64_t cursor, size_t count, gs_set_scan_fn *fn,
                     void *arg);

#endif
