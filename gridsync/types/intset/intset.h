/*
 * An intset: a sorted array of distinct int64 values in ONE allocation,
 * each stored in the smallest width (2, 4 or 8 bytes) that fits every
 * member; adding a value that needs a wider type upgrades the whole array
 * (Redis's intset, the small form of a set of integers).
 *
 * Layout: [u32 width][u32 count] values... (host byte order). Functions
 * that grow it take `unsigned char **` and may move it; they return 0 or
 * CORE_ENOMEM with the intset unchanged.
 */
#ifndef GS_INTSET_H
#define GS_INTSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

unsigned char *gs_is_new(void);
uint32_t gs_is_len(const unsigned char *is);
size_t gs_is_bytes(const unsigned char *is);
uint32_t gs_is_width(const unsigned char *is);

/* The i-th smallest member (i < len). */
int64_t gs_is_get(const unsigned char *is, uint32_t i);
bool gs_is_find(const unsigned char *is, int64_t v);

/* Add v; *added says whether it was new. */
int gs_is_add(unsigned char **is, int64_t v, bool *added);
/* Remove v; returns whether it was there (never fails; the block may
 * shrink). */
bool gs_is_remove(unsigned char **is, int64_t v);

/* Validate an intset from outside: header, width, length, strictly
 * increasing members, and members that need the declared width at most. */
bool gs_is_validate(const unsigned char *is, size_t len);

#endif
