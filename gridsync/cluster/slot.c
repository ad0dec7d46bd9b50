/*
 * Key -> slot (see slot.h for the rule, from the Redis Cluster spec).
 */
#include "gridsync/cluster/slot.h"

#include <string.h>

#include "core/hash.h"

const char *gs_key_hash_part(const void *key, size_t len, size_t *taglen)
{
    const char *k = key;
    const char *open = len ? memchr(k, '{', len) : NULL;
    if (open) {
        size_t start = (size_t)(open - k) + 1;
        const char *close = memchr(k + start, '}', len - start);
        /* Only a non-empty tag counts: "{}" hashes the whole key. */
        if (close && close > k + start) {
            *taglen = (size_t)(close - (k + start));
            return k + start;
        }
    }
    *taglen = len;
    return k;
}

unsigned gs_key_slot(const void *key, size_t len)
{
    size_t n;
    const char *part = gs_key_hash_part(key, len, &n);
    /* 16384 is a power of two: the mask is the modulo of the spec. */
    return core_crc16(part, n) & (GS_SLOTS - 1);
}

int gs_slot_state_next(const char *p, size_t len, size_t *off, unsigned *slot, unsigned *state,
                       const char **name, size_t *nlen)
{
    size_t at = *off;
    if (at == len)
        return 0;
    if (at > len || len - at < 4)
        return -1;
    const unsigned char *u = (const unsigned char *)p + at;
    size_t n = u[3];
    if (len - at - 4 < n)
        return -1;
    unsigned s = (unsigned)u[0] | (unsigned)u[1] << 8;
    if (s >= GS_SLOTS || (u[2] != GS_SLOT_BLOCKED && u[2] != GS_SLOT_GONE))
        return -1;
    *slot = s;
    *state = u[2];
    *name = p + at + 4;
    *nlen = n;
    *off = at + 4 + n;
    return 1;
}

bool gs_slot_state_valid(const char *p, size_t len)
{
    size_t off = 0, nlen;
    unsigned slot, state;
    const char *name;
    int r;
    while ((r = gs_slot_state_next(p, len, &off, &slot, &state, &name, &nlen)) == 1)
        ;
    return r == 0;
}
