/*
 * SHA-1 (FIPS 180-4) of a byte string, as the lower-case hex digest that
 * names a script (Redis's sha1hex: EVALSHA, SCRIPT LOAD, redis.sha1hex).
 * Pure computation: no allocation, no state between calls.
 */
#ifndef GS_SHA1_H
#define GS_SHA1_H

#include <stddef.h>

#define GS_SHA1_HEX_LEN 40

/* Write the 40 hex digits of SHA-1(p[0..len)) and a NUL into out (41
 * bytes, owned by the caller). p may be NULL when len is 0. */
void gs_sha1hex(const void *p, size_t len, char out[GS_SHA1_HEX_LEN + 1]);

#endif
