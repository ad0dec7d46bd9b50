/*
 * An intrusive, circular, doubly-linked list (the Linux kernel's list_head).
 *
 * A struct core_list is embedded in each element; the list itself is one
 * more struct core_list, the sentinel, whose next is the first element and
 * whose prev the last. With a sentinel no operation has a special case for
 * the ends or for an empty list, insert and remove are O(1), and nothing is
 * allocated: the memory of the elements is their owner's.
 *
 * Invariants (for every node n of an initialised list):
 *  1. n->next->prev == n and n->prev->next == n.
 *  2. The list is empty exactly when sentinel.next == &sentinel.
 *  3. A node that was removed with core_list_remove points at itself, so
 *     removing it again is harmless and core_list_linked tells whether it
 *     is in a list.
 *
 * Not for index-linked pools (the order book links orders by pool index so
 * that a snapshot is position independent); for pointer-linked objects.
 */
#ifndef CORE_LIST_H
#define CORE_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct core_list {
    struct core_list *prev;
    struct core_list *next;
};

/* The struct of type `type` whose member `member` is at ptr. */
#define CORE_CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* Make l an empty list (for a sentinel) or an unlinked node. */
static inline void core_list_init(struct core_list *l)
{
    l->prev = l->next = l;
}

static inline bool core_list_empty(const struct core_list *head)
{
    return head->next == head;
}

/* Whether node n is in a list (false after core_list_init/remove). */
static inline bool core_list_linked(const struct core_list *n)
{
    return n->next != n;
}

static inline void core_list_insert_between(struct core_list *n, struct core_list *prev,
                                            struct core_list *next)
{
    n->prev = prev;
    n->next = next;
    prev->next = n;
    next->prev = n;
}

/* Insert n first / last in the list headed by head. n must not be linked. */
static inline void core_list_push_front(struct core_list *head, struct core_list *n)
{
    core_list_insert_between(n, head, head->next);
}

static inline void core_list_push_back(struct core_list *head, struct core_list *n)
{
    core_list_insert_between(n, head->prev, head);
}

/* Unlink n from whatever list holds it and leave it pointing at itself. */
static inline void core_list_remove(struct core_list *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = n;
}

/* First / last node of the list, or NULL when it is empty. */
static inline struct core_list *core_list_first(const struct core_list *head)
{
    return head->next == head ? NULL : head->next;
}

static inline struct core_list *core_list_last(const struct core_list *head)
{
    return head->prev == head ? NULL : head->prev;
}

/* After a node was moved in memory (realloc) with its links copied, point
 * its neighbours at its new address. */
static inline void core_list_moved(struct core_list *n)
{
    n->prev->next = n;
    n->next->prev = n;
}

/* Iterate over the nodes of head, first to last. The _safe form allows the
 * body to remove (and free) the current node; `tmp` holds the next one. */
#define core_list_foreach(it, head) for ((it) = (head)->next; (it) != (head); (it) = (it)->next)

#define core_list_foreach_safe(it, tmp, head)                                                      \
    for ((it) = (head)->next, (tmp) = (it)->next; (it) != (head); (it) = (tmp), (tmp) = (it)->next)

#endif
