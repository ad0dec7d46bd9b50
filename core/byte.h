/*
 * Little-endian integers in byte buffers, and a bounded reader.
 *
 * Every format the project writes to disk or the network (Raft entries
 * and snapshots, journal records, bus frames, engine snapshots) stores
 * its integers little-endian whatever the host, so the files and frames
 * of one machine read back on another. x86 and ARM compile these helpers
 * to plain loads and stores.
 *
 * The reader (struct core_reader) is for decoders of untrusted input: a
 * read past the end returns zeros and sets `bad`, which stays set, so a
 * decoder reads a whole record field by field and checks the error once at
 * the end instead of after every field. A pointer it returns always lies
 * inside the input.
 *
 * Widths are 1, 2, 4 or 8 bytes; core_put_le/core_get_le take any width
 * from 1 to 8 (the codecs that store a field's width in a table use them).
 */
#ifndef CORE_BYTE_H
#define CORE_BYTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Write the low `width` bytes (1..8) of v at p, least significant first.
 * Returns p + width, so that writers chain. */
static inline uint8_t *core_put_le(void *p, uint64_t v, unsigned width)
{
    uint8_t *b = p;
    for (unsigned i = 0; i < width; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    return b + width;
}

/* Read `width` bytes (1..8) at p as a little-endian unsigned integer. */
static inline uint64_t core_get_le(const void *p, unsigned width)
{
    const uint8_t *b = p;
    uint64_t v = 0;
    for (unsigned i = 0; i < width; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return v;
}

static inline void core_put_le16(void *p, uint16_t v)
{
    core_put_le(p, v, 2);
}

static inline void core_put_le32(void *p, uint32_t v)
{
    core_put_le(p, v, 4);
}

static inline void core_put_le64(void *p, uint64_t v)
{
    core_put_le(p, v, 8);
}

static inline uint16_t core_get_le16(const void *p)
{
    return (uint16_t)core_get_le(p, 2);
}

static inline uint32_t core_get_le32(const void *p)
{
    return (uint32_t)core_get_le(p, 4);
}

static inline uint64_t core_get_le64(const void *p)
{
    return core_get_le(p, 8);
}

/* A cursor over len bytes at data (not owned; the bytes must outlive the
 * reader). Zero-initialised it reads nothing and goes bad on first read. */
struct core_reader {
    const uint8_t *p;
    size_t left;
    bool bad;
};

static inline struct core_reader core_reader_init(const void *data, size_t len)
{
    struct core_reader r = {data, len, false};
    return r;
}

/* Next `width` bytes (1..8) as a little-endian integer, or 0 with r->bad
 * set when fewer remain (nothing is consumed then). */
static inline uint64_t core_read_le(struct core_reader *r, unsigned width)
{
    if (r->bad || r->left < width) {
        r->bad = true;
        return 0;
    }
    uint64_t v = core_get_le(r->p, width);
    r->p += width;
    r->left -= width;
    return v;
}

static inline uint8_t core_read_u8(struct core_reader *r)
{
    return (uint8_t)core_read_le(r, 1);
}

static inline uint16_t core_read_u16(struct core_reader *r)
{
    return (uint16_t)core_read_le(r, 2);
}

static inline uint32_t core_read_u32(struct core_reader *r)
{
    return (uint32_t)core_read_le(r, 4);
}

static inline uint64_t core_read_u64(struct core_reader *r)
{
    return core_read_le(r, 8);
}

/* The next n bytes (a pointer into the input), or NULL with r->bad set
 * when fewer remain. n == 0 returns the current position. */
static inline const uint8_t *core_read_bytes(struct core_reader *r, size_t n)
{
    if (r->bad || r->left < n) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *b = r->p;
    r->p += n;
    r->left -= n;
    return b;
}

/* Whether every read so far was in bounds. */
static inline bool core_reader_ok(const struct core_reader *r)
{
    return !r->bad;
}

/* Whether every read was in bounds and the input is used up exactly: the
 * check a decoder of a whole record makes at its end. */
static inline bool core_reader_done(const struct core_reader *r)
{
    return !r->bad && r->left == 0;
}

#endif
