/*
 * ALF text form of EduMatcher messages (docs/alf.md §1–4, §7;
 * docs/alf.md A): parse one line into a struct em_msg, format one back.
 *
 * The parser applies the context-free checks in the spec's order: SYNTAX,
 * MISSING_FIELD, BAD_VALUE of the first class (a malformed value, or a
 * field not allowed for the order type). What needs the engine's state
 * (UNKNOWN_SYMBOL, tick and lot, DUPLICATE_ID, phases, collars) is the
 * engine's job. Neither function allocates.
 */
#ifndef EM_ALF_H
#define EM_ALF_H

#include <stddef.h>

#include "edumatcher/engine/msg.h"

/* ALF §1: a line (without its terminator) is at most this long. */
#define EM_ALF_LINE_MAX 1024
/* Room enough for any formatted message. */
#define EM_ALF_FORMAT_MAX 512

/* Parse the message s[0..n) (no line terminator; s need not be
 * NUL-terminated) into *out. Returns 0 when it is well formed, else the
 * first fault's EM_REJ_* code (SYNTAX, MISSING_FIELD or BAD_VALUE).
 * Whatever the result, out->kind is the message type when the first token
 * names one (else EM_MSG__NONE), and when the result is not 0, out->present
 * is EM_BIT(cl) with out->cl set if the line has a well-formed `cl` token
 * (docs/alf.md A.8: the REJECT echoes it), else 0. */
int em_alf_parse(const char *s, size_t n, struct em_msg *out);

/* The gateway's own query (docs/alf.md §9): `SYMBOLS` or `SYMBOLS sym=<s>`
 * in s[0..n) (no terminator; single spaces between tokens, as ALF §1).
 * Returns -1 when the line is not a SYMBOLS query (hand it to
 * em_alf_parse), 0 with sym set ("" for all symbols), or SYNTAX (another
 * field, or a repeated one) or BAD_VALUE (sym not a symbol name). */
int em_alf_parse_symbols(const char *s, size_t n, char sym[EM_SYM_MAX + 1]);

/* Format m as an ALF line without terminator into buf (at least
 * EM_ALF_FORMAT_MAX bytes). Fields are written in the message's order,
 * those present only. Returns the length written (no NUL added). */
size_t em_alf_format(const struct em_msg *m, char *buf);

/* Format a price with exactly its decimals ("10.50"). Returns the length. */
size_t em_alf_format_price(struct em_price p, char *buf);

#endif
