/*
 * Glob-style pattern matching as Redis's stringmatchlen (KEYS, SCAN MATCH,
 * CONFIG GET): `*`, `?`, `[abc]`, `[^a-z]`, `\x` escapes. Binary safe.
 *
 * Runs in O(pattern * string) time in the worst case: a `*` is retried
 * from one backtrack point only (the classic wildcard algorithm), so a
 * hostile pattern like "a*a*a*a*b" cannot make it exponential.
 */
#ifndef GS_GLOB_H
#define GS_GLOB_H

#include <stdbool.h>
#include <stddef.h>

bool gs_glob_match(const char *pat, size_t plen, const char *str, size_t slen, bool nocase);

#endif
