/*
 * Fuzz target for gs-bench's streaming reply parser (bench/gridsync/reply.c).
 *
 * The first input byte picks the protocol (bit 0) and a chunk size (the
 * other bits); the rest is the byte stream from a "server". Checks, beyond
 * the sanitizers: the parser never reports consuming more than it was
 * given, and feeding the stream whole or in chunks yields the same replies
 * and the same final verdict (reply.h, invariant 2).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "bench/gridsync/reply.h"

struct outcome {
    uint64_t replies;
    uint64_t digest; /* of every reply's kind and length, in order */
    int rc;
};

static struct outcome parse_stream(enum gsb_protocol proto, const uint8_t *data, size_t len,
                                   size_t chunk)
{
    struct gsb_reply_parser p;
    struct outcome o = {0, 1469598103934665603ull, 0};
    gsb_reply_parser_init(&p, proto);
    size_t off = 0;
    while (off < len) {
        size_t end = off + chunk < len ? off + chunk : len;
        while (off < end) {
            size_t used = 0, avail = end - off;
            struct gsb_reply r;
            int rc = gsb_reply_parse(&p, (const char *)data + off, avail, &used, &r);
            if (rc < 0) {
                o.rc = rc;
                return o;
            }
            /* never past the input; "incomplete" means all of it was used */
            if (used > avail || (rc == 0 && used != avail))
                abort();
            off += used;
            if (rc == 1) {
                o.replies++;
                o.digest = (o.digest ^ (uint64_t)r.kind) * 1099511628211ull;
                o.digest = (o.digest ^ (uint64_t)r.len) * 1099511628211ull;
            }
        }
    }
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    enum gsb_protocol proto = (data[0] & 1) ? GSB_PROTO_MEMCACHE : GSB_PROTO_RESP;
    size_t chunk = (size_t)(data[0] >> 1) + 1;
    data++;
    size--;
    struct outcome whole = parse_stream(proto, data, size, size ? size : 1);
    struct outcome split = parse_stream(proto, data, size, chunk);
    if (whole.replies != split.replies || whole.digest != split.digest || whole.rc != split.rc)
        abort();
    return 0;
}
