/*
 * Eviction policies: SLRU, plain LRU and noeviction as ops tables over the
 * entries' intrusive links. The rules and invariants are in evict.h.
 *
 * Lists are core/list.h lists with their sentinel in struct gs_evict: the
 * first node is the most recently used, the last the next victim.
 * With a sentinel, a moved entry is fixed by pointing its neighbours at it,
 * whatever they are (on_move), and no operation has a special case for an
 * empty list.
 */
#include "gridsync/store/evict.h"

#include <string.h>

#include "core/error.h"
#include "gridsync/store/entry.h"

/* SLRU's one bit in gs_entry.evict_bits: which segment the entry is in. */
#define SEG_BIT 1u

struct gs_entry *gs_evict_entry_of(struct core_list *l)
{
    return (struct gs_entry *)((char *)l - offsetof(struct gs_entry, link));
}

static struct gs_entry *list_tail(struct core_list *sentinel)
{
    struct core_list *l = core_list_last(sentinel);
    return l ? gs_evict_entry_of(l) : NULL;
}

/* Shared by every list-based policy: after a realloc the neighbours still
 * point at the old address. */
static void links_moved(struct gs_evict *p, struct gs_entry *e)
{
    core_list_moved(&e->link);
}

/* ---- LRU: one list, list 0 ---- */

static void lru_insert(struct gs_evict *p, struct gs_entry *e)
{
    e->evict_bits = 0;
    core_list_push_front(&p->list[0], &e->link);
    p->count[0]++;
}

static void lru_hit(struct gs_evict *p, struct gs_entry *e)
{
    if (p->list[0].next == &e->link)
        return; /* already the head: skip touching the neighbours */
    core_list_remove(&e->link);
    core_list_push_front(&p->list[0], &e->link);
}

static void lru_remove(struct gs_evict *p, struct gs_entry *e)
{
    core_list_remove(&e->link);
    p->count[0]--;
}

static struct gs_entry *lru_victim(struct gs_evict *p)
{
    return list_tail(&p->list[0]);
}

/* ---- noeviction: insertion order, hits ignored ---- */

static void noevict_hit(struct gs_evict *p, struct gs_entry *e)
{
}

/* ---- SLRU ---- */

static size_t slru_protected_max(const struct gs_evict *p)
{
    size_t total = p->count[GS_SEG_PROBATION] + p->count[GS_SEG_PROTECTED];
    return total - total / 5;
}

/* Invariant S1: demote protected's tail to probation's head while
 * protected is over its share. Each caller changes the counts by one, so
 * this loop runs at most once; it is a loop only to make S1 evident. */
static void slru_rebalance(struct gs_evict *p)
{
    while (p->count[GS_SEG_PROTECTED] > slru_protected_max(p)) {
        struct gs_entry *d = list_tail(&p->list[GS_SEG_PROTECTED]);
        core_list_remove(&d->link);
        p->count[GS_SEG_PROTECTED]--;
        d->evict_bits &= ~SEG_BIT;
        core_list_push_front(&p->list[GS_SEG_PROBATION], &d->link);
        p->count[GS_SEG_PROBATION]++;
    }
}

static void slru_insert(struct gs_evict *p, struct gs_entry *e)
{
    e->evict_bits = 0; /* probation */
    core_list_push_front(&p->list[GS_SEG_PROBATION], &e->link);
    p->count[GS_SEG_PROBATION]++;
}

static void slru_hit(struct gs_evict *p, struct gs_entry *e)
{
    if (e->evict_bits & SEG_BIT) {
        if (p->list[GS_SEG_PROTECTED].next != &e->link) {
            core_list_remove(&e->link);
            core_list_push_front(&p->list[GS_SEG_PROTECTED], &e->link);
        }
        return;
    }
    /* Promotion: a second access proves the entry is worth protecting. */
    core_list_remove(&e->link);
    p->count[GS_SEG_PROBATION]--;
    e->evict_bits |= SEG_BIT;
    core_list_push_front(&p->list[GS_SEG_PROTECTED], &e->link);
    p->count[GS_SEG_PROTECTED]++;
    slru_rebalance(p);
}

static void slru_remove(struct gs_evict *p, struct gs_entry *e)
{
    core_list_remove(&e->link);
    p->count[(e->evict_bits & SEG_BIT) ? GS_SEG_PROTECTED : GS_SEG_PROBATION]--;
    slru_rebalance(p);
}

static struct gs_entry *slru_victim(struct gs_evict *p)
{
    struct gs_entry *v = list_tail(&p->list[GS_SEG_PROBATION]);
    return v ? v : list_tail(&p->list[GS_SEG_PROTECTED]);
}

static const struct gs_evict_ops noeviction_ops = {
    .name = "noeviction",
    .evicts = false,
    .on_insert = lru_insert,
    .on_hit = noevict_hit,
    .on_remove = lru_remove,
    .on_move = links_moved,
    .victim = lru_victim,
};

static const struct gs_evict_ops lru_ops = {
    .name = "allkeys-lru",
    .evicts = true,
    .on_insert = lru_insert,
    .on_hit = lru_hit,
    .on_remove = lru_remove,
    .on_move = links_moved,
    .victim = lru_victim,
};

static const struct gs_evict_ops slru_ops = {
    .name = "slru",
    .evicts = true,
    .on_insert = slru_insert,
    .on_hit = slru_hit,
    .on_remove = slru_remove,
    .on_move = links_moved,
    .victim = slru_victim,
};

static const struct gs_evict_ops *ops_of(enum gs_evict_policy policy)
{
    switch (policy) {
    case GS_EVICT_NOEVICTION:
        return &noeviction_ops;
    case GS_EVICT_LRU:
        return &lru_ops;
    case GS_EVICT_SLRU:
    default:
        return &slru_ops;
    }
}

void gs_evict_init(struct gs_evict *p, enum gs_evict_policy policy)
{
    memset(p, 0, sizeof(*p));
    p->ops = ops_of(policy);
    /* An unknown value falls back to the default, and says so. */
    p->policy = p->ops == &slru_ops ? GS_EVICT_SLRU : policy;
    for (int i = 0; i < GS_SEG_COUNT; i++)
        core_list_init(&p->list[i]);
}

size_t gs_evict_count(const struct gs_evict *p)
{
    size_t n = 0;
    for (int i = 0; i < GS_SEG_COUNT; i++)
        n += p->count[i];
    return n;
}

const char *gs_evict_policy_name(enum gs_evict_policy policy)
{
    return ops_of(policy)->name;
}

int gs_evict_policy_parse(const char *name, enum gs_evict_policy *out)
{
    static const enum gs_evict_policy all[] = {GS_EVICT_NOEVICTION, GS_EVICT_SLRU, GS_EVICT_LRU};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        if (strcmp(name, ops_of(all[i])->name) == 0) {
            *out = all[i];
            return 0;
        }
    }
    return CORE_EINVAL;
}
