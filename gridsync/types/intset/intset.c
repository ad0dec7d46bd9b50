/*
 * Intset: see intset.h.
 */
#include "gridsync/types/intset/intset.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define HDR 8u

static uint32_t rd32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static void wr32(unsigned char *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

uint32_t gs_is_width(const unsigned char *is)
{
    return rd32(is);
}

uint32_t gs_is_len(const unsigned char *is)
{
    return rd32(is + 4);
}

size_t gs_is_bytes(const unsigned char *is)
{
    return HDR + (size_t)gs_is_width(is) * gs_is_len(is);
}

unsigned char *gs_is_new(void)
{
    unsigned char *is = malloc(HDR);
    if (is) {
        wr32(is, 2);
        wr32(is + 4, 0);
    }
    return is;
}

static uint32_t width_for(int64_t v)
{
    if (v >= INT16_MIN && v <= INT16_MAX)
        return 2;
    if (v >= INT32_MIN && v <= INT32_MAX)
        return 4;
    return 8;
}

static int64_t get_w(const unsigned char *is, uint32_t w, uint32_t i)
{
    const unsigned char *p = is + HDR + (size_t)i * w;
    if (w == 2) {
        int16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    if (w == 4) {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    int64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void set_w(unsigned char *is, uint32_t w, uint32_t i, int64_t v)
{
    unsigned char *p = is + HDR + (size_t)i * w;
    if (w == 2) {
        int16_t x = (int16_t)v;
        memcpy(p, &x, 2);
    } else if (w == 4) {
        int32_t x = (int32_t)v;
        memcpy(p, &x, 4);
    } else {
        memcpy(p, &v, 8);
    }
}

int64_t gs_is_get(const unsigned char *is, uint32_t i)
{
    return get_w(is, gs_is_width(is), i);
}

/* Binary search: true and *pos when found, else *pos is where v goes. */
static bool search(const unsigned char *is, int64_t v, uint32_t *pos)
{
    uint32_t lo = 0, hi = gs_is_len(is), w = gs_is_width(is);
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int64_t m = get_w(is, w, mid);
        if (m == v) {
            *pos = mid;
            return true;
        }
        if (m < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    *pos = lo;
    return false;
}

bool gs_is_find(const unsigned char *is, int64_t v)
{
    uint32_t pos;
    return width_for(v) <= gs_is_width(is) && search(is, v, &pos);
}

int gs_is_add(unsigned char **pis, int64_t v, bool *added)
{
    unsigned char *is = *pis;
    uint32_t w = gs_is_width(is), n = gs_is_len(is), nw = width_for(v);
    if (nw > w) { /* upgrade: v is below or above every member */
        unsigned char *u = malloc(HDR + (size_t)nw * (n + 1));
        if (!u)
            return CORE_ENOMEM;
        wr32(u, nw);
        wr32(u + 4, n + 1);
        uint32_t shift = v < 0 ? 1 : 0;
        for (uint32_t i = 0; i < n; i++)
            set_w(u, nw, i + shift, get_w(is, w, i));
        set_w(u, nw, v < 0 ? 0 : n, v);
        free(is);
        *pis = u;
        *added = true;
        return 0;
    }
    uint32_t pos;
    if (search(is, v, &pos)) {
        *added = false;
        return 0;
    }
    unsigned char *g = realloc(is, HDR + (size_t)w * (n + 1));
    if (!g)
        return CORE_ENOMEM;
    memmove(g + HDR + (size_t)(pos + 1) * w, g + HDR + (size_t)pos * w, (size_t)(n - pos) * w);
    set_w(g, w, pos, v);
    wr32(g + 4, n + 1);
    *pis = g;
    *added = true;
    return 0;
}

bool gs_is_remove(unsigned char **pis, int64_t v)
{
    unsigned char *is = *pis;
    uint32_t pos, w = gs_is_width(is), n = gs_is_len(is);
    if (width_for(v) > w || !search(is, v, &pos))
        return false;
    memmove(is + HDR + (size_t)pos * w, is + HDR + (size_t)(pos + 1) * w,
            (size_t)(n - pos - 1) * w);
    wr32(is + 4, n - 1);
    unsigned char *s = realloc(is, HDR + (size_t)w * (n - 1));
    if (s)
        *pis = s;
    return true;
}

bool gs_is_validate(const unsigned char *is, size_t len)
{
    if (len < HDR)
        return false;
    uint32_t w = gs_is_width(is), n = gs_is_len(is);
    if ((w != 2 && w != 4 && w != 8) || len != HDR + (size_t)w * n)
        return false;
    for (uint32_t i = 1; i < n; i++)
        if (get_w(is, w, i - 1) >= get_w(is, w, i))
            return false;
    return true;
}
