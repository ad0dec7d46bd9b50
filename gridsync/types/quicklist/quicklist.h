/*
 * A quicklist: a doubly linked list of listpacks (types/listpack/), the
 * encoding of every list (Redis 7.0 reports "quicklist" for all lists).
 * Each node's listpack holds at most list-max-listpack-size: a negative
 * value -1..-5 caps a node at 4, 8, 16, 32 or 64 KB, a positive one at
 * that many elements (and 8 KB, Redis's safety limit). Pushes at either
 * end touch one node; an insert into a full node splits it.
 * The nodes' listpacks carry back-lengths (counted in their bytes, and so
 * in the size limit, as Redis's are), so the tail and every step
 * backwards are O(1) within a node.
 *
 * Positions are (node, byte offset) pairs, valid until the list changes
 * (except as each function says). Memory: `mem` is always the sum over
 * the struct, the nodes and their listpacks of malloc_usable_size + 8,
 * as the store counts (store.h invariant 3). Functions that can fail
 * return 0 or CORE_ENOMEM with the list unchanged.
 */
#ifndef GS_QUICKLIST_H
#define GS_QUICKLIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gs_qnode {
    struct gs_qnode *prev, *next;
    unsigned char *lp; /* never empty while in a list */
};

struct gs_quicklist {
    struct gs_qnode *head, *tail;
    size_t count; /* elements */
    size_t nodes;
    size_t mem;
    int fill; /* list-max-listpack-size */
};

struct gs_ql_pos {
    struct gs_qnode *node; /* NULL: no such element */
    size_t off;
};

struct gs_quicklist *gs_ql_new(int fill);
void gs_ql_free(struct gs_quicklist *ql);
struct gs_quicklist *gs_ql_dup(const struct gs_quicklist *ql);

/* Push s at the head (head true) or the tail. */
int gs_ql_push(struct gs_quicklist *ql, bool head, const char *s, size_t len);

/* The element at index i (negative counts from the tail, -1 the last);
 * pos.node NULL when out of range. O(nodes + node size). */
struct gs_ql_pos gs_ql_index(const struct gs_quicklist *ql, int64_t i);
/* The element after / before p (node NULL at the end). */
struct gs_ql_pos gs_ql_next(const struct gs_quicklist *ql, struct gs_ql_pos p);
struct gs_ql_pos gs_ql_prev(const struct gs_quicklist *ql, struct gs_ql_pos p);
/* The element's bytes (an integer entry is formatted into buf,
 * GS_LP_INTBUF bytes). */
const char *gs_ql_get(struct gs_ql_pos p, char *buf, size_t *len);
bool gs_ql_eq(struct gs_ql_pos p, const char *s, size_t len);

/* Delete the element at p; returns the position of the element that
 * followed it (node NULL if none). */
struct gs_ql_pos gs_ql_delete(struct gs_quicklist *ql, struct gs_ql_pos p);
/* Delete n elements from index start (0 <= start, start + n <= count). */
void gs_ql_delete_range(struct gs_quicklist *ql, size_t start, size_t n);
/* Replace the element at p by s. */
int gs_ql_replace(struct gs_quicklist *ql, struct gs_ql_pos p, const char *s, size_t len);
/* Insert s before (after false: after) the element at p. */
int gs_ql_insert(struct gs_quicklist *ql, struct gs_ql_pos p, bool after, const char *s,
                 size_t len);

/* Recompute mem from the blocks, and check the structure (counts,
 * links, no empty node); returns (size_t)-1 if the structure is broken.
 * For tests and the store's check. */
size_t gs_ql_recount(const struct gs_quicklist *ql);

#endif
