/*
 * Streaming reply parser for the gs-bench load generator: RESP (Redis) and
 * the memcached text protocol.
 *
 * The load generator only needs to know where each reply ends and what
 * kind it is (status, error, bulk, null, ...); it never needs a reply's
 * payload. So the parser is a byte-driven state machine that keeps no
 * copy of the payload: a bulk string of any size is skipped as it streams
 * by, and bytes may arrive split anywhere. All state lives in the struct
 * (no allocation), so one parser per connection is enough.
 *
 * Invariants:
 *   1. gsb_reply_parse consumes bytes up to and including the end of at
 *      most one complete top-level reply; the bytes after it are left for
 *      the next call.
 *   2. Feeding a stream in any split yields the same replies as feeding it
 *      whole (the fuzz target fuzz_gs_bench_reply checks this).
 *   3. Once a call returns CORE_EPROTO the parser stays failed until
 *      gsb_reply_parser_init: the stream cannot be re-synchronised.
 *
 * Symbols of the load generator use the prefix gsb_ (GridSync bench).
 */
#ifndef GSB_REPLY_H
#define GSB_REPLY_H

#include <stddef.h>
#include <stdint.h>

enum gsb_protocol {
    GSB_PROTO_RESP,     /* RESP2, plus the RESP3 scalar and aggregate types */
    GSB_PROTO_MEMCACHE, /* memcached's text protocol (get/set replies) */
};

enum gsb_reply_kind {
    GSB_REPLY_STATUS, /* +OK, memcached STORED / NOT_STORED / ... */
    GSB_REPLY_ERROR,  /* -ERR ..., RESP3 blob error, memcached ERROR / *_ERROR */
    GSB_REPLY_INT,    /* :123 */
    GSB_REPLY_BULK,   /* $n (n >= 0); memcached VALUE ... END */
    GSB_REPLY_NULL,   /* $-1, *-1, RESP3 _; memcached END without VALUE */
    GSB_REPLY_ARRAY,  /* *n and other aggregates (elements were skipped) */
    GSB_REPLY_OTHER,  /* RESP3 double, boolean, big number */
};

/* What one complete top-level reply was. */
struct gsb_reply {
    enum gsb_reply_kind kind;
    int64_t len; /* BULK: payload bytes; ARRAY: element count; else 0 */
    /* RESP simple error (-...): its line without the '-', truncated to
     * GSB_REPLY_MAX_LINE - 1 bytes and NUL-terminated. It points into the
     * parser and is valid until the next gsb_reply_parse call on it.
     * NULL for every other reply. */
    const char *text;
    size_t text_len;
};

#define GSB_REPLY_MAX_DEPTH 16  /* nested aggregates; deeper is a protocol error */
#define GSB_REPLY_MAX_LINE  320 /* memcached reply line (keys are at most 250 bytes) */

struct gsb_reply_parser {
    enum gsb_protocol proto;
    int state;
    int failed;
    /* RESP: the type byte and number of the current line */
    char type;
    int negative;
    int digits;
    int64_t num;
    /* bytes of bulk payload still to skip */
    int64_t bulk_left;
    /* RESP aggregates: elements still expected at each open level */
    int depth;
    int64_t left[GSB_REPLY_MAX_DEPTH];
    /* the reply being assembled */
    struct gsb_reply cur;
    /* memcached: the current line, and whether a VALUE block was seen */
    size_t line_len;
    int got_value;
    char line[GSB_REPLY_MAX_LINE];
};

/* Reset a parser to expect the start of a reply in the given protocol. */
void gsb_reply_parser_init(struct gsb_reply_parser *p, enum gsb_protocol proto);

/*
 * Feed bytes. Parsing stops after the first complete top-level reply.
 *
 * Returns 1 when a reply completed (*out describes it, *consumed counts the
 * bytes of buf used, up to its last byte); 0 when all of buf was consumed
 * and the reply is still incomplete; CORE_EPROTO when the bytes are not a
 * valid reply (*consumed is then meaningless and the parser stays failed).
 * The parser keeps no pointer into buf.
 */
int gsb_reply_parse(struct gsb_reply_parser *p, const char *buf, size_t len, size_t *consumed,
                    struct gsb_reply *out);

#endif
