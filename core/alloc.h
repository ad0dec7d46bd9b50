/*
 * What a heap block really costs the process, for memory accounting that
 * matches the allocator the binary runs on (gridsync's used_memory,
 * MEMORY USAGE, maxmemory).
 *
 * glibc's malloc puts an 8-byte size word in front of each block and
 * rounds chunks to 16 bytes (at least 32); jemalloc (which gridsync-server
 * links, as Redis does) keeps no header and rounds to its size classes.
 * Which one is running is found once, on first use, by looking for
 * jemalloc's `nallocx` in the process (so a test binary on glibc, a
 * sanitizer build and a server on jemalloc each count their own truth).
 */
#ifndef CORE_ALLOC_H
#define CORE_ALLOC_H

#include <stddef.h>

/* Bytes the live block p (from malloc/realloc) holds: its usable size
 * plus the allocator's per-block header. */
size_t core_alloc_cost(void *p);

/* What a malloc(n) would hold, without allocating (below glibc's mmap
 * threshold; jemalloc's nallocx otherwise). */
size_t core_alloc_request_cost(size_t n);

/* "jemalloc-5.3.0" or "libc", as Redis's INFO mem_allocator says. */
const char *core_allocator_name(void);

#endif
