/*
 * The sorted set type: distinct binary-safe members, each with a double
 * score, ordered by (score, member) where members compare as memcmp then
 * length (Redis's sdscmp). Two encodings, as in Redis 7.0:
 *
 *  - listpack (GS_ENC_LISTPACK): member, score, member, score... in order,
 *    in one block (types/listpack/). A score is an integer entry when it is
 *    integral and below 2^53 in magnitude (exact as a double; -0 becomes 0,
 *    as in Redis's listpack), else
 *    a 9-byte string: GS_ZSET_SCORE_TAG and the double's 8 bytes (the tag
 *    keeps the listpack from reading the bytes as digits).
 *  - skiplist (GS_ENC_SKIPLIST): Redis's skiplist with spans (rank in
 *    O(log n)) whose nodes are also chained in a hash table by member: one
 *    block per member (score, links, member bytes), no separate dict entry.
 *
 * A sorted set is created as a listpack and becomes a skiplist when an
 * insertion would make it longer than zset-max-listpack-entries or adds a
 * member longer than zset-max-listpack-value; it never goes back by
 * removals (Redis's zsetAdd). gs_zset_fit is the way back Redis takes on
 * its store and load paths (ZUNIONSTORE..., a snapshot).
 *
 * Memory: gs_zset_mem is the sum of malloc_usable_size + 8 over the blocks
 * (value.h's rule), kept in O(1) per change; gs_zset_recount recomputes it.
 *
 * Every function takes a struct gs_obj of type GS_TYPE_ZSET (value.h).
 * Functions that can fail return 0 or CORE_ENOMEM with the set unchanged
 * unless said otherwise. Scores are never NaN.
 */
#ifndef GS_ZSET_H
#define GS_ZSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gridsync/types/listpack/listpack.h"
#include "gridsync/types/value.h"

#define GS_ZSET_SCORE_TAG 'f'

/* ZADD's input flags and output flags (Redis's ZADD_IN_* / ZADD_OUT_*). */
enum {
    GS_ZADD_NX = 1 << 0,
    GS_ZADD_XX = 1 << 1,
    GS_ZADD_GT = 1 << 2,
    GS_ZADD_LT = 1 << 3,
    GS_ZADD_INCR = 1 << 4,
};
enum {
    GS_ZADD_NOP = 1 << 0,     /* nothing done (NX/XX/GT/LT said no) */
    GS_ZADD_ADDED = 1 << 1,   /* a new member */
    GS_ZADD_UPDATED = 1 << 2, /* an existing member's score changed */
};

/* An empty sorted set: a listpack, or a skiplist when big (Redis creates
 * one directly when zset-max-listpack-entries is 0 or the first member is
 * too long for a listpack). */
int gs_zset_init(struct gs_obj *o, bool big);
void gs_zset_free(struct gs_obj *o);
int gs_zset_dup(struct gs_obj *dst, const struct gs_obj *src);
size_t gs_zset_mem(const struct gs_obj *o);
size_t gs_zset_recount(const struct gs_obj *o);
size_t gs_zset_len(const struct gs_obj *o);

/* Redis's zsetAdd: add or update member m with score (with GS_ZADD_INCR,
 * score is an increment), under the NX/XX/GT/LT rules. *out gets the
 * GS_ZADD_* output flags; *newscore (when not NULL) the member's score
 * after the call when it exists. Converts to a skiplist per lim first.
 * Returns 0, CORE_ENOMEM, or CORE_EINVAL when the increment makes the
 * score NaN (nothing changed; Redis's "resulting score is not a number"). */
int gs_zset_add(struct gs_obj *o, double score, const char *m, size_t mlen, int flags, int *out,
                double *newscore, const struct gs_type_limits *lim);
/* Whether m is a member; its score into *score. */
bool gs_zset_score(const struct gs_obj *o, const char *m, size_t mlen, double *score);
/* Remove m; returns whether it was there. */
bool gs_zset_remove(struct gs_obj *o, const char *m, size_t mlen);
/* m's 0-based rank in ascending order; false if not a member. */
bool gs_zset_rank(const struct gs_obj *o, const char *m, size_t mlen, size_t *rank);

/* One end of a lex range (ZRANGEBYLEX's "[m", "(m", "-", "+"). */
struct gs_zlex {
    const char *p;
    size_t len;
    int inf; /* -1: "-" (below every member), 1: "+" (above every member), 0: p */
    bool ex;
};

/* The number of leading elements (ascending) whose score is below x, or
 * at most x when inclusive. Every range query is a rank range built from
 * two of these: elements in [min, max] are ranks [below(min), below_eq(max)). */
size_t gs_zset_count_below(const struct gs_obj *o, double x, bool inclusive);
/* The same by member for a lex bound (members compared as in ZRANGEBYLEX;
 * meaningful when all scores are equal, as Redis documents). */
size_t gs_zset_count_below_lex(const struct gs_obj *o, const struct gs_zlex *b, bool inclusive);

/* Iteration from a rank, ascending or (rev) descending. Valid while the
 * set does not change. */
struct gs_zset_iter {
    const struct gs_obj *o;
    size_t rank; /* the next element's ascending rank */
    size_t left; /* elements left in this direction */
    bool rev;
    size_t off; /* listpack: the next member's offset */
    void *node; /* skiplist: the next node */
    char buf[GS_LP_INTBUF];
};
void gs_zset_iter_init(struct gs_zset_iter *it, const struct gs_obj *o, size_t rank, bool rev);
bool gs_zset_iter_next(struct gs_zset_iter *it, const char **m, size_t *mlen, double *score);

/* Delete the n elements of ascending ranks [start, start + n) (they must
 * exist). Never fails. */
void gs_zset_delete_range(struct gs_obj *o, size_t start, size_t n);

/* The element at ascending rank r (< len); member bytes in buf (an
 * integer entry of a listpack) or in the set. */
void gs_zset_at(const struct gs_obj *o, size_t r, char *buf, const char **m, size_t *mlen,
                double *score);

/* Back to a listpack when it fits lim (length and every member), as Redis's
 * zsetConvertToListpackIfNeeded on its store and load paths. A failed
 * conversion (out of memory) leaves the skiplist, which is still right. */
void gs_zset_fit(struct gs_obj *o, const struct gs_type_limits *lim);

/* ZSCAN: a listpack whole with cursor 0 (as Redis), a skiplist by the
 * dictScan contract over its member table. */
typedef void gs_zset_scan_fn(void *arg, const char *m, size_t mlen, double score);
uint64_t gs_zset_scan(const struct gs_obj *o, uint64_t cursor, size_t count, gs_zset_scan_fn *fn,
                      void *arg);

/* The snapshot form: the listpack encoding's bytes (a skiplist is written
 * in that layout), malloc'd into *out for the caller. */
int gs_zset_encode(const struct gs_obj *o, unsigned char **out, size_t *len);

/* Validate the snapshot form (a listpack of member, score pairs in this
 * module's score encoding), for gs_obj_validate. */
bool gs_zset_validate(const unsigned char *lp, size_t len);

/* Redis's strtod-based score parsing (getDoubleFromObject): the whole
 * argument is a number, no leading space, no NaN, no overflow/underflow
 * to zero. */
bool gs_zset_parse_score(const char *p, size_t len, double *out);

#endif
