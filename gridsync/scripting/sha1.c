/*
 * SHA-1 as FIPS 180-4 section 6.1.2 states it: 512-bit blocks, 80 rounds
 * over a 16-word schedule kept in a ring (w[t & 15]), the message padded
 * with 0x80, zeros and its length in bits, big-endian.
 */
#include "gridsync/scripting/sha1.h"

#include <stdint.h>
#include <string.h>

struct sha1 {
    uint32_t h[5];
    uint64_t bits;
    unsigned char block[64];
    size_t used;
};

static uint32_t rol(uint32_t x, unsigned n)
{
    return (x << n) | (x >> (32 - n));
}

static void compress(uint32_t h[5], const unsigned char *b)
{
    uint32_t w[16];
    for (int t = 0; t < 16; t++)
        w[t] = (uint32_t)b[4 * t] << 24 | (uint32_t)b[4 * t + 1] << 16 |
               (uint32_t)b[4 * t + 2] << 8 | (uint32_t)b[4 * t + 3];
    uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4];
    for (int t = 0; t < 80; t++) {
        if (t >= 16)
            w[t & 15] = rol(w[(t + 13) & 15] ^ w[(t + 8) & 15] ^ w[(t + 2) & 15] ^ w[t & 15], 1);
        uint32_t f, k;
        if (t < 20)
            f = (bb & c) | (~bb & d), k = 0x5A827999;
        else if (t < 40)
            f = bb ^ c ^ d, k = 0x6ED9EBA1;
        else if (t < 60)
            f = (bb & c) | (bb & d) | (c & d), k = 0x8F1BBCDC;
        else
            f = bb ^ c ^ d, k = 0xCA62C1D6;
        uint32_t tmp = rol(a, 5) + f + e + k + w[t & 15];
        e = d;
        d = c;
        c = rol(bb, 30);
        bb = a;
        a = tmp;
    }
    h[0] += a;
    h[1] += bb;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

static void update(struct sha1 *s, const unsigned char *p, size_t len)
{
    s->bits += (uint64_t)len * 8;
    while (len > 0) {
        size_t n = 64 - s->used < len ? 64 - s->used : len;
        memcpy(s->block + s->used, p, n);
        s->used += n;
        p += n;
        len -= n;
        if (s->used == 64) {
            compress(s->h, s->block);
            s->used = 0;
        }
    }
}

void gs_sha1hex(const void *p, size_t len, char out[GS_SHA1_HEX_LEN + 1])
{
    struct sha1 s = {{0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0}, 0, {0}, 0};
    if (len)
        update(&s, p, len);
    uint64_t bits = s.bits;
    static const unsigned char pad = 0x80, zero = 0;
    update(&s, &pad, 1);
    while (s.used != 56)
        update(&s, &zero, 1);
    unsigned char be[8];
    for (int i = 0; i < 8; i++)
        be[i] = (unsigned char)(bits >> (56 - 8 * i));
    update(&s, be, 8);
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 20; i++) {
        unsigned char byte = (unsigned char)(s.h[i / 4] >> (24 - 8 * (i % 4)));
        out[2 * i] = hex[byte >> 4];
        out[2 * i + 1] = hex[byte & 15];
    }
    out[GS_SHA1_HEX_LEN] = '\0';
}
