/*
 * The quicklist: see quicklist.h.
 */
#include "gridsync/types/quicklist/quicklist.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "gridsync/types/htab/htab.h"
#include "gridsync/types/listpack/listpack.h"

/* Redis's SIZE_SAFETY_LIMIT: a node with a count limit still stops here. */
#define SAFETY_LIMIT 8192

struct gs_quicklist *gs_ql_new(int fill)
{
    struct gs_quicklist *ql = calloc(1, sizeof(*ql));
    if (!ql)
        return NULL;
    ql->fill = fill;
    ql->mem = gs_alloc_cost(ql);
    return ql;
}

static void node_free(struct gs_quicklist *ql, struct gs_qnode *n)
{
    ql->mem -= gs_alloc_cost(n->lp) + gs_alloc_cost(n);
    gs_lp_free(n->lp);
    free(n);
}

void gs_ql_free(struct gs_quicklist *ql)
{
    if (!ql)
        return;
    struct gs_qnode *n = ql->head;
    while (n) {
        struct gs_qnode *next = n->next;
        gs_lp_free(n->lp);
        free(n);
        n = next;
    }
    free(ql);
}

/* A new node holding lp, linked after `after` (NULL: at the head). */
static struct gs_qnode *node_link(struct gs_quicklist *ql, struct gs_qnode *after,
                                  unsigned char *lp)
{
    struct gs_qnode *n = malloc(sizeof(*n));
    if (!n)
        return NULL;
    n->lp = lp;
    n->prev = after;
    n->next = after ? after->next : ql->head;
    if (n->next)
        n->next->prev = n;
    else
        ql->tail = n;
    if (after)
        after->next = n;
    else
        ql->head = n;
    ql->nodes++;
    ql->mem += gs_alloc_cost(n) + gs_alloc_cost(lp);
    return n;
}

static void node_unlink(struct gs_quicklist *ql, struct gs_qnode *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        ql->head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        ql->tail = n->prev;
    ql->nodes--;
    node_free(ql, n);
}

static bool node_allows(const struct gs_quicklist *ql, const struct gs_qnode *n, size_t add)
{
    size_t sz = gs_lp_bytes(n->lp) + add;
    if (ql->fill < 0) {
        int f = ql->fill < -5 ? 5 : -ql->fill;
        return sz <= (size_t)4096 << (f - 1);
    }
    return sz <= SAFETY_LIMIT && gs_lp_count(n->lp) < (uint32_t)ql->fill;
}

/* Every edit of a node's listpack goes through here, so mem stays exact:
 * the block's cost before is swapped for its cost after. */
enum lp_op { LP_INSERT, LP_APPEND, LP_REPLACE };

static int lp_edit(struct gs_quicklist *ql, struct gs_qnode *n, enum lp_op op, size_t off,
                   const char *s, size_t len)
{
    size_t old = gs_alloc_cost(n->lp);
    int rc = op == LP_INSERT   ? gs_lp_insert(&n->lp, off, s, len)
             : op == LP_APPEND ? gs_lp_append(&n->lp, s, len)
                               : gs_lp_replace(&n->lp, off, s, len);
    ql->mem = ql->mem - old + gs_alloc_cost(n->lp);
    return rc;
}

static int new_node_with(struct gs_quicklist *ql, struct gs_qnode *after, const char *s, size_t len,
                         struct gs_qnode **out)
{
    /* Back-lengths: the tail is reached, and walked backwards, in O(1)
     * per entry (RPOP, LINDEX -1, LRANGE and LPOS from the tail). */
    unsigned char *lp = gs_lp_new_backlen();
    if (!lp)
        return CORE_ENOMEM;
    if (gs_lp_append(&lp, s, len) != 0) {
        gs_lp_free(lp);
        return CORE_ENOMEM;
    }
    struct gs_qnode *n = node_link(ql, after, lp);
    if (!n) {
        gs_lp_free(lp);
        return CORE_ENOMEM;
    }
    if (out)
        *out = n;
    return 0;
}

int gs_ql_push(struct gs_quicklist *ql, bool head, const char *s, size_t len)
{
    struct gs_qnode *n = head ? ql->head : ql->tail;
    int rc;
    if (n && node_allows(ql, n, gs_lp_entry_bytes(n->lp, s, len))) {
        rc = lp_edit(ql, n, head ? LP_INSERT : LP_APPEND, GS_LP_HDR, s, len);
    } else {
        rc = new_node_with(ql, head ? NULL : ql->tail, s, len, NULL);
    }
    if (rc == 0)
        ql->count++;
    return rc;
}

struct gs_ql_pos gs_ql_index(const struct gs_quicklist *ql, int64_t i)
{
    struct gs_ql_pos p = {NULL, 0};
    if (i < 0) {
        if ((uint64_t)-i > ql->count)
            return p;
        uint64_t back = (uint64_t)-i; /* 1 = the last */
        for (struct gs_qnode *n = ql->tail; n; n = n->prev) {
            uint32_t c = gs_lp_count(n->lp);
            if (back <= c) {
                p.node = n;
                p.off = gs_lp_seek(n->lp, (uint32_t)(c - back));
                return p;
            }
            back -= c;
        }
        return p;
    }
    if ((uint64_t)i >= ql->count)
        return p;
    uint64_t fwd = (uint64_t)i;
    for (struct gs_qnode *n = ql->head; n; n = n->next) {
        uint32_t c = gs_lp_count(n->lp);
        if (fwd < c) {
            p.node = n;
            p.off = gs_lp_seek(n->lp, (uint32_t)fwd);
            return p;
        }
        fwd -= c;
    }
    return p;
}

struct gs_ql_pos gs_ql_next(const struct gs_quicklist *ql, struct gs_ql_pos p)
{
    (void)ql;
    size_t off = gs_lp_next(p.node->lp, p.off);
    if (off) {
        p.off = off;
        return p;
    }
    p.node = p.node->next;
    p.off = p.node ? GS_LP_HDR : 0;
    return p;
}

struct gs_ql_pos gs_ql_prev(const struct gs_quicklist *ql, struct gs_ql_pos p)
{
    (void)ql;
    if (p.off > GS_LP_HDR) {
        p.off = gs_lp_prev(p.node->lp, p.off);
        return p;
    }
    p.node = p.node->prev;
    p.off = p.node ? gs_lp_last(p.node->lp) : 0;
    return p;
}

const char *gs_ql_get(struct gs_ql_pos p, char *buf, size_t *len)
{
    return gs_lp_get(p.node->lp, p.off, buf, len);
}

bool gs_ql_eq(struct gs_ql_pos p, const char *s, size_t len)
{
    return gs_lp_eq(p.node->lp, p.off, s, len);
}

struct gs_ql_pos gs_ql_delete(struct gs_quicklist *ql, struct gs_ql_pos p)
{
    struct gs_qnode *n = p.node;
    ql->count--;
    if (gs_lp_count(n->lp) == 1) {
        struct gs_qnode *next = n->next;
        node_unlink(ql, n);
        p.node = next;
        p.off = next ? GS_LP_HDR : 0;
        return p;
    }
    size_t old = gs_alloc_cost(n->lp);
    gs_lp_delete(&n->lp, p.off, 1);
    ql->mem = ql->mem - old + gs_alloc_cost(n->lp);
    if (p.off >= gs_lp_bytes(n->lp)) { /* it was the node's last */
        p.node = n->next;
        p.off = p.node ? GS_LP_HDR : 0;
    }
    return p;
}

void gs_ql_delete_range(struct gs_quicklist *ql, size_t start, size_t n)
{
    struct gs_ql_pos p = gs_ql_index(ql, (int64_t)start);
    while (n > 0 && p.node) {
        uint32_t c = gs_lp_count(p.node->lp);
        if (p.off == GS_LP_HDR && n >= c) { /* a whole node */
            struct gs_qnode *next = p.node->next;
            ql->count -= c;
            n -= c;
            node_unlink(ql, p.node);
            p.node = next;
            p.off = GS_LP_HDR;
            continue;
        }
        p = gs_ql_delete(ql, p);
        n--;
    }
}

int gs_ql_replace(struct gs_quicklist *ql, struct gs_ql_pos p, const char *s, size_t len)
{
    return lp_edit(ql, p.node, LP_REPLACE, p.off, s, len);
}

int gs_ql_insert(struct gs_quicklist *ql, struct gs_ql_pos p, bool after, const char *s, size_t len)
{
    struct gs_qnode *n = p.node;
    size_t at = after ? p.off + gs_lp_entry_size(n->lp, p.off) : p.off;
    int rc;
    if (node_allows(ql, n, gs_lp_entry_bytes(n->lp, s, len))) {
        rc = lp_edit(ql, n, LP_INSERT, at, s, len);
    } else if (at == GS_LP_HDR) { /* before a full node's first: a new node */
        rc = new_node_with(ql, n->prev, s, len, NULL);
    } else if (at >= gs_lp_bytes(n->lp)) { /* after its last */
        rc = new_node_with(ql, n, s, len, NULL);
    } else { /* in the middle of a full node: split it there */
        unsigned char *tail;
        size_t old = gs_alloc_cost(n->lp);
        rc = gs_lp_split(&n->lp, at, &tail);
        ql->mem = ql->mem - old + gs_alloc_cost(n->lp);
        if (rc)
            return rc;
        if (!node_link(ql, n, tail)) {
            /* put the halves back together rather than lose elements */
            for (size_t o = gs_lp_first(tail); o; o = gs_lp_next(tail, o)) {
                char b[GS_LP_INTBUF];
                size_t l;
                const char *v = gs_lp_get(tail, o, b, &l);
                (void)lp_edit(ql, n, LP_APPEND, 0, v, l);
            }
            gs_lp_free(tail);
            return CORE_ENOMEM;
        }
        rc = lp_edit(ql, n, LP_APPEND, 0, s, len);
    }
    if (rc == 0)
        ql->count++;
    return rc;
}

struct gs_quicklist *gs_ql_dup(const struct gs_quicklist *ql)
{
    struct gs_quicklist *c = gs_ql_new(ql->fill);
    if (!c)
        return NULL;
    for (struct gs_qnode *n = ql->head; n; n = n->next) {
        size_t len = gs_lp_bytes(n->lp);
        unsigned char *lp = malloc(len);
        if (!lp || (memcpy(lp, n->lp, len), !node_link(c, c->tail, lp))) {
            free(lp);
            gs_ql_free(c);
            return NULL;
        }
    }
    c->count = ql->count;
    return c;
}

size_t gs_ql_recount(const struct gs_quicklist *ql)
{
    size_t mem = gs_alloc_cost((void *)ql), count = 0, nodes = 0;
    const struct gs_qnode *prev = NULL;
    for (const struct gs_qnode *n = ql->head; n; prev = n, n = n->next) {
        if (n->prev != prev || gs_lp_count(n->lp) == 0 ||
            !gs_lp_validate(n->lp, gs_lp_bytes(n->lp)))
            return (size_t)-1;
        mem += gs_alloc_cost((void *)n) + gs_alloc_cost(n->lp);
        count += gs_lp_count(n->lp);
        nodes++;
    }
    if (prev != ql->tail || count != ql->count || nodes != ql->nodes)
        return (size_t)-1;
    return mem;
}
