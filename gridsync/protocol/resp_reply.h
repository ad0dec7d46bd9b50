/*
 * A RESP2 reply read by a node from another node (the meta group's
 * coordinator, docs/gridsync-cluster.md "Membership"): one whole reply
 * parsed into a small tree, with limits, so that a peer that is broken or
 * hostile costs an error, never memory or stack beyond the bounds below.
 *
 * Invariants:
 *   1. gs_resp_reply_parse reads only buf[*pos..len) and, on 1, advances
 *      *pos past exactly one reply; on 0 or -1 *pos is unchanged and
 *      nothing is left allocated.
 *   2. Bounds: nesting depth <= GS_RESP_REPLY_MAX_DEPTH, a bulk string
 *      <= GS_RESP_REPLY_MAX_BULK bytes, an array <= GS_RESP_REPLY_MAX_ELEMS
 *      elements, and never more elements than the bytes that are left
 *      could hold (3 bytes each at least), so allocation is bounded by the
 *      input's size. Lengths are decimal digits only (a '-' only for -1);
 *      every line ends in CRLF.
 *   3. A complete tree points into buf (p fields): buf must outlive it and
 *      not move. gs_resp_reply_free releases the arrays' element vectors.
 *
 * Types: '+' status, '-' error (p/len: the text), ':' integer (len: the
 * value), '$' bulk (len -1: nil), '*' array (len -1: nil array; el: len
 * elements).
 */
#ifndef GS_RESP_REPLY_H
#define GS_RESP_REPLY_H

#include <stdbool.h>
#include <stddef.h>

#define GS_RESP_REPLY_MAX_DEPTH 8
#define GS_RESP_REPLY_MAX_BULK  (512u * 1024 * 1024)
#define GS_RESP_REPLY_MAX_ELEMS (1u << 20)

struct gs_resp_reply {
    char type;
    long long len;
    const char *p;
    struct gs_resp_reply *el;
};

/* Parse one reply at buf[*pos..len) into *out. 1 complete, 0 incomplete
 * (read more), -1 malformed or over a bound, or out of memory (close the
 * connection). */
int gs_resp_reply_parse(const char *buf, size_t len, size_t *pos, struct gs_resp_reply *out);

void gs_resp_reply_free(struct gs_resp_reply *r);

/* A status, error or bulk reply whose text starts with prefix. */
bool gs_resp_reply_starts(const struct gs_resp_reply *r, const char *prefix);

#endif
