/*
 * A growable byte buffer for connection input and output.
 *
 * Invariants:
 *  1. len <= cap; data is NULL only while cap == 0.
 *  2. Growth doubles the capacity, so appending n bytes one at a time costs
 *     O(n) copies and a buffer that is reused for every request of a
 *     connection stops allocating once it has reached its working size.
 *  3. After a failed allocation `oom` is set and further appends are
 *     dropped: the owner checks the flag between requests and closes the
 *     connection rather than sending a truncated reply.
 */
#ifndef CORE_BUF_H
#define CORE_BUF_H

#include "core/byte.h"
#include "core/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct core_buf {
    char *data;
    size_t len;
    size_t cap;
    bool oom;
};

/* Make room for at least `need` more bytes. Returns 0 or CORE_ENOMEM (and
 * sets b->oom). Slow path of core_buf_reserve. */
static inline int core_buf_grow(struct core_buf *b, size_t need)
{
    size_t want = b->len + need;
    if (want < b->len) { /* overflow */
        b->oom = true;
        return CORE_ENOMEM;
    }
    size_t cap = b->cap ? b->cap : 64;
    while (cap < want)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->oom = true;
        return CORE_ENOMEM;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

/* Return a pointer to `need` writable bytes at the end of the buffer (not
 * yet counted in len; the caller adds what it wrote), or NULL when out of
 * memory. The pointer is valid until the next call that grows b. */
static inline char *core_buf_reserve(struct core_buf *b, size_t need)
{
    if (b->oom)
        return NULL;
    if (b->cap - b->len < need && core_buf_grow(b, need))
        return NULL;
    return b->data + b->len;
}

/* Append n bytes (copied). Returns 0, or CORE_ENOMEM with b->oom set and
 * the buffer's bytes unchanged. Callers that append many pieces may ignore
 * the result and check b->oom once at the end. */
static inline int core_buf_append(struct core_buf *b, const void *p, size_t n)
{
    char *dst = core_buf_reserve(b, n);
    if (!dst)
        return CORE_ENOMEM;
    if (n)
        memcpy(dst, p, n);
    b->len += n;
    return 0;
}

/* Append the low `width` bytes (1..8) of v, little-endian (core/byte.h).
 * Errors as core_buf_append. */
static inline int core_buf_put_le(struct core_buf *b, uint64_t v, unsigned width)
{
    char *dst = core_buf_reserve(b, width);
    if (!dst)
        return CORE_ENOMEM;
    core_put_le(dst, v, width);
    b->len += width;
    return 0;
}

/* Empty the buffer but keep its memory, and clear a recorded failure: the
 * start of the next message built in a reused buffer. */
static inline void core_buf_reset(struct core_buf *b)
{
    b->len = 0;
    b->oom = false;
}

/* Release the memory; the buffer is empty and reusable afterwards. */
static inline void core_buf_free(struct core_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->oom = false;
}

#endif
