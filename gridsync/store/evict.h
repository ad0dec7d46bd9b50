/*
 * Eviction policies: which entry to drop when the store is over its memory
 * limit.
 *
 * A policy is a small ops table (struct gs_evict_ops) over the entries'
 * intrusive list links (a struct core_list, embedded in every entry) and
 * a few policy-owned bits in the entry header (gs_entry.evict_bits). The
 * store tells the policy of every insert, hit, removal and move of an
 * entry, and asks it for a victim; the policy never allocates and never
 * frees an entry. Adding W-TinyLFU or S3-FIFO means writing another ops
 * table (a 2-bit frequency and a queue bit fit in evict_bits; a sketch or
 * ghost queue hangs off gs_evict.priv).
 *
 * Policies here:
 *  - SLRU (the default): two LRU lists, probation and protected. Sizes are
 *    counted in entries, not bytes (see docs/gridsync-store.md for why):
 *    protected holds at most total - total/5 entries (80 %, rounded so
 *    that one entry may be protected), probation the rest.
 *      insert              -> probation head
 *      hit in probation    -> protected head (promotion)
 *      hit in protected    -> protected head
 *      protected overflow  -> protected tail demoted to probation head
 *      victim              -> probation tail, or protected tail if
 *                             probation is empty
 *    The overflow rule is also applied on removal, so invariant S1 holds
 *    after every call.
 *  - LRU: one list; insert and hit move to the head; victim is the tail.
 *  - noeviction: one list in insertion order (so that a later switch to
 *    another policy has an order to start from); hits are ignored and
 *    gs_evict_ops.evicts is false, so the store never asks it for a victim.
 *
 * Invariants:
 *  S1. SLRU: count[GS_SEG_PROTECTED] <= total - total / 5, where total is
 *      count[0] + count[1].
 *  S2. Every entry in the store is on exactly one list of the policy, and
 *      count[] equals the lengths of the lists.
 */
#ifndef GS_EVICT_H
#define GS_EVICT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/list.h"
#include "gridsync/store/store.h"

/* List indices. LRU and noeviction use list 0 only, SLRU lists 0 and 1;
 * a third list is there for W-TinyLFU's admission window (an SLRU main
 * behind a small LRU window), as bench/gridsync/evict_models.c uses it. */
enum {
    GS_SEG_PROBATION = 0,
    GS_SEG_PROTECTED = 1,
    GS_SEG_WINDOW = 2,
    GS_SEG_COUNT = 3,
};

struct gs_evict_ops;

/* One policy instance. Its lists' sentinels live inside it, so it must not
 * be copied or moved while it holds entries. */
struct gs_evict {
    const struct gs_evict_ops *ops;
    enum gs_evict_policy policy;
    struct core_list list[GS_SEG_COUNT]; /* sentinels: next = head (MRU), prev = tail */
    size_t count[GS_SEG_COUNT];
    void *priv; /* for policies with side state (a sketch, a ghost queue) */
};

struct gs_evict_ops {
    const char *name;
    bool evicts; /* false: the store never evicts (noeviction) */
    /* e is new in the store; its link is unset. */
    void (*on_insert)(struct gs_evict *p, struct gs_entry *e);
    /* e was found by a lookup (or overwritten). */
    void (*on_hit)(struct gs_evict *p, struct gs_entry *e);
    /* e leaves the store (deleted, expired or evicted). */
    void (*on_remove)(struct gs_evict *p, struct gs_entry *e);
    /* e was reallocated: its link holds the old neighbours' addresses,
     * which must now point at e. */
    void (*on_move)(struct gs_evict *p, struct gs_entry *e);
    /* The entry to evict next, left on its list (the store removes it,
     * which calls on_remove); NULL when the policy holds nothing. A
     * CLOCK-like policy (S3-FIFO, SIEVE) may move entries among its own
     * lists here while it looks for one. */
    struct gs_entry *(*victim)(struct gs_evict *p);
};

/* Initialise p empty, with the given policy's ops. Never fails. */
void gs_evict_init(struct gs_evict *p, enum gs_evict_policy policy);

/* Total entries the policy holds. */
size_t gs_evict_count(const struct gs_evict *p);

/* The policy's name as CONFIG accepts it ("slru", "allkeys-lru",
 * "noeviction"). */
const char *gs_evict_policy_name(enum gs_evict_policy policy);

/* Parse a policy name (case-sensitive). Returns 0 and sets *out, or
 * CORE_EINVAL. */
int gs_evict_policy_parse(const char *name, enum gs_evict_policy *out);

/* The entry that owns a link (for walking a list, as tests do). */
struct gs_entry *gs_evict_entry_of(struct core_list *l);

#endif
