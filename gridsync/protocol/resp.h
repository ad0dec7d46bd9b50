/*
 * RESP (the Redis serialization protocol): the request parser and the
 * reply writer.
 *
 * Requests are parsed as redis-server does (networking.c,
 * processMultibulkBuffer / processInlineBuffer): a request starting with
 * '*' is a multibulk array of bulk strings, anything else is an inline
 * command split on spaces with quotes. Protocol errors carry Redis's texts.
 *
 * The parser is incremental: given the unconsumed input (from the start of
 * the current request) it resumes where it stopped on the previous call,
 * so a request split across many reads is scanned once. Arguments are kept
 * as offsets into that input and handed out as pointers into it: argument
 * bytes are never copied by the parser (inline arguments with quotes are
 * unescaped in place, which is why the input is writable).
 *
 * The writer appends replies in the client's protocol version: RESP2, or
 * RESP3 after HELLO 3 (maps, doubles, null, booleans, verbatim strings get
 * their own types; in RESP2 they degrade as Redis degrades them).
 */
#ifndef GS_RESP_H
#define GS_RESP_H

#include "core/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Redis's limits (server.h): an inline request or a count line longer than
 * this without a newline is an error; a bulk is at most proto_max_bulk_len
 * (512 MB by default, configurable). */
#define GS_RESP_INLINE_MAX     (64 * 1024)
#define GS_RESP_MAX_BULK_DEFLT (512LL * 1024 * 1024)
/* Before authentication Redis refuses bigger requests (networking.c), so an
 * unauthenticated client cannot make the server buffer much. */
#define GS_RESP_UNAUTH_MAX_ARGS 10
#define GS_RESP_UNAUTH_MAX_BULK 16384

/* One argument: a pointer into the input buffer and its length. */
struct gs_arg {
    const char *p;
    size_t len;
};

struct gs_resp_parser {
    /* resume state of a partly received multibulk */
    int64_t multibulk_left; /* arguments still to read; 0 = at a request start */
    int64_t bulk_len;       /* length of the bulk being read, -1 = its header */
    size_t pos;             /* parse position from the request start */
    /* arguments as offsets (the buffer may move between reads) */
    size_t *off, *len;
    size_t argc, cap;
    /* the completed request */
    struct gs_arg *argv;
    size_t argv_cap;
    /* limits; the owner may change them between requests */
    int64_t max_bulk;
    bool authenticated; /* false: Redis's unauthenticated limits apply */
    char mode;          /* 0 at a request start, '*' multibulk, 'i' inline */
    char errbuf[64];    /* a formatted error message */
};

enum {
    GS_RESP_NEED_MORE = 0, /* incomplete: call again with more input */
    GS_RESP_REQUEST = 1,   /* a complete request: argc/argv set */
};

/* Initialise an empty parser (no allocation until the first request).
 * max_bulk: the largest accepted bulk length (proto-max-bulk-len). */
void gs_resp_parser_init(struct gs_resp_parser *p, int64_t max_bulk);

/* Release the parser's arrays. */
void gs_resp_parser_free(struct gs_resp_parser *p);

/* Parse the request that starts at buf[0]; len is all the input
 * available. Returns:
 *  - GS_RESP_REQUEST: *consumed is the request's length; *argc and *argv
 *    hold its arguments (pointers into buf, valid until buf changes; argv
 *    owned by the parser and valid until the next call, which frees
 *    arrays a very long request made grow). *argc may be 0 (an empty
 *    line or "*0"): skip it.
 *  - GS_RESP_NEED_MORE: nothing consumed; the parser remembers how far it
 *    got. Call again with the same bytes plus more (they may have moved).
 *  - CORE_EPROTO: *errmsg is Redis's error text (without "-ERR "),
 *    in the parser's static storage or a string literal; the connection
 *    should reply with it and close.
 *  - CORE_ENOMEM: the argument array could not grow.
 * The parser resets itself after REQUEST and after an error. */
int gs_resp_parse(struct gs_resp_parser *p, char *buf, size_t len, size_t *consumed, size_t *argc,
                  struct gs_arg **argv, const char **errmsg);

/* ---------------------------------------------------------------- writer */

struct gs_writer {
    struct core_buf *buf; /* the connection's output buffer (not owned) */
    int proto;            /* 2 or 3 */
};

void gs_reply_simple(struct gs_writer *w, const char *s, size_t len); /* +OK */
void gs_reply_ok(struct gs_writer *w);
/* An error line; msg starts with the class ("ERR ...", "WRONGTYPE ...").
 * \r and \n in msg become spaces so the line cannot break the protocol. */
void gs_reply_error(struct gs_writer *w, const char *msg, size_t len);
void gs_reply_errorf(struct gs_writer *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void gs_reply_int(struct gs_writer *w, int64_t v);
void gs_reply_bulk(struct gs_writer *w, const void *p, size_t len);
void gs_reply_bulk_cstr(struct gs_writer *w, const char *s);
void gs_reply_bulk_int(struct gs_writer *w, int64_t v);
void gs_reply_null(struct gs_writer *w);       /* $-1 / _ */
void gs_reply_null_array(struct gs_writer *w); /* *-1 / _ */
void gs_reply_array(struct gs_writer *w, size_t n);
void gs_reply_set(struct gs_writer *w, size_t n);  /* ~n in RESP3, *n in RESP2 */
void gs_reply_push(struct gs_writer *w, size_t n); /* >n in RESP3, *n in RESP2 */
/* n key-value pairs: %n in RESP3, *2n in RESP2. */
void gs_reply_map(struct gs_writer *w, size_t n);
/* A double: ,<v> in RESP3; a bulk string in RESP2 (as Redis's
 * addReplyDouble, with 17 significant digits). */
void gs_reply_double(struct gs_writer *w, double v);
void gs_reply_bool(struct gs_writer *w, bool v); /* #t/#f, or :1/:0 */
/* A verbatim string (=len\r\ntxt:...) in RESP3; a bulk string in RESP2. */
void gs_reply_verbatim(struct gs_writer *w, const char *p, size_t len, const char *ext);
/* Bytes already in RESP form. */
void gs_reply_raw(struct gs_writer *w, const char *p, size_t len);

/* Parse a whole decimal int64 exactly as Redis's string2ll: no leading
 * '+', no leading zeros, no spaces, "-0" refused. Returns true on
 * success. Used for protocol lengths and for every integer argument, so
 * that what Redis refuses we refuse. */
bool gs_string2ll(const char *s, size_t len, int64_t *out);

/* Format v in decimal into out (at least 21 bytes); returns the length. */
size_t gs_fmt_int(char *out, int64_t v);

#endif
