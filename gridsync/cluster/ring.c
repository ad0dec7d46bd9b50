/*
 * Consistent-hash placement ring; the model and its invariants are in
 * ring.h. Everything is computed once at construction (a sorted point
 * array and a slot -> owner table), so lookups on the request path are one
 * array read.
 */
#include "gridsync/cluster/ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/hash.h"
#include "gridsync/cluster/slot.h"

#define DEFAULT_VNODES   256
#define DEFAULT_REPLICAS 3

struct point {
    uint64_t pos;
    unsigned node;
};

struct gs_ring {
    unsigned n;
    unsigned vnodes, replicas;
    char (*names)[GS_RING_NAME_MAX];
    unsigned *order;     /* node indexes sorted by node hash ("node order") */
    unsigned *order_pos; /* node -> its position in order */
    uint16_t owner[GS_SLOTS];
};

/* FNV-1a of short, similar strings ("n#1", "n#2") differs mostly in the
 * low and middle bits; ring positions are compared as whole words, so the
 * result is finished with a 64-bit avalanche (MurmurHash3's fmix64) to
 * spread every input bit over the high bits too. Still stable across runs
 * and machines. */
static uint64_t ring_hash(const char *s, size_t len)
{
    uint64_t h = core_fnv1a64(s, len);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

/* Slots sit on the ring in order, evenly spaced (slot s at the middle of
 * the s-th of 16384 equal arcs), not hashed: each point then owns a run
 * of consecutive slots, so CLUSTER SLOTS lists at most one range per
 * point instead of one per slot or two, while the points (hashed) still
 * decide the owners at random. */
static uint64_t slot_position(unsigned s)
{
    return ((uint64_t)s << 50) | (1ull << 49);
}

/* Comparators for qsort_r (arg is the ring): ties between equal hashes are
 * broken by name, so that the ring does not depend on the order names were
 * given in (invariant 1). */
static int point_cmp(const void *a, const void *b, void *arg)
{
    const struct gs_ring *r = arg;
    const struct point *x = a, *y = b;
    if (x->pos != y->pos)
        return x->pos < y->pos ? -1 : 1;
    return strcmp(r->names[x->node], r->names[y->node]);
}

static uint64_t node_hash(const struct gs_ring *r, unsigned node)
{
    return ring_hash(r->names[node], strlen(r->names[node]));
}

static int order_cmp(const void *a, const void *b, void *arg)
{
    const struct gs_ring *r = arg;
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    uint64_t hx = node_hash(r, x), hy = node_hash(r, y);
    if (hx != hy)
        return hx < hy ? -1 : 1;
    return strcmp(r->names[x], r->names[y]);
}

static int build(struct gs_ring *r)
{
    size_t npoints = (size_t)r->n * r->vnodes;
    struct point *pts = malloc(npoints * sizeof(*pts));
    if (!pts)
        return CORE_ENOMEM;
    char buf[GS_RING_NAME_MAX + 16];
    for (unsigned i = 0; i < r->n; i++) {
        for (unsigned v = 0; v < r->vnodes; v++) {
            int len = snprintf(buf, sizeof(buf), "%s#%u", r->names[i], v);
            pts[(size_t)i * r->vnodes + v] = (struct point){ring_hash(buf, (size_t)len), i};
        }
    }
    qsort_r(pts, npoints, sizeof(*pts), point_cmp, r);

    /* Owner of a slot: first point at or after the slot's position,
     * wrapping around. Slots are sorted by position so one merge-like pass
     * would do, but a binary search per slot is simple and runs once. */
    for (unsigned s = 0; s < GS_SLOTS; s++) {
        uint64_t pos = slot_position(s);
        size_t lo = 0, hi = npoints;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (pts[mid].pos < pos)
                lo = mid + 1;
            else
                hi = mid;
        }
        r->owner[s] = (uint16_t)pts[lo == npoints ? 0 : lo].node;
    }
    free(pts);

    for (unsigned i = 0; i < r->n; i++)
        r->order[i] = i;
    qsort_r(r->order, r->n, sizeof(*r->order), order_cmp, r);
    for (unsigned i = 0; i < r->n; i++)
        r->order_pos[r->order[i]] = i;
    return 0;
}

static int ring_alloc(struct gs_ring **out, unsigned n, unsigned vnodes, unsigned replicas)
{
    struct gs_ring *r = calloc(1, sizeof(*r));
    if (!r)
        return CORE_ENOMEM;
    r->n = n;
    r->vnodes = vnodes;
    r->replicas = replicas;
    r->names = calloc(n, sizeof(*r->names));
    r->order = calloc(n, sizeof(*r->order));
    r->order_pos = calloc(n, sizeof(*r->order_pos));
    if (!r->names || !r->order || !r->order_pos) {
        gs_ring_free(r);
        return CORE_ENOMEM;
    }
    *out = r;
    return 0;
}

static int set_name(struct gs_ring *r, unsigned i, const char *name)
{
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len >= GS_RING_NAME_MAX)
        return CORE_EINVAL;
    for (unsigned j = 0; j < i; j++)
        if (strcmp(r->names[j], name) == 0)
            return CORE_EINVAL;
    memcpy(r->names[i], name, len + 1);
    return 0;
}

int gs_ring_new(struct gs_ring **out, const char *const *names, unsigned n,
                const struct gs_ring_config *cfg)
{
    unsigned vnodes = cfg && cfg->vnodes ? cfg->vnodes : DEFAULT_VNODES;
    unsigned replicas = cfg && cfg->replicas ? cfg->replicas : DEFAULT_REPLICAS;
    if (n == 0 || n > GS_RING_MAX_NODES || replicas > GS_RING_MAX_REPLICAS || vnodes > 65536)
        return CORE_EINVAL;
    struct gs_ring *r;
    int rc = ring_alloc(&r, n, vnodes, replicas);
    if (rc)
        return rc;
    for (unsigned i = 0; i < n && rc == 0; i++)
        rc = set_name(r, i, names[i]);
    if (rc == 0)
        rc = build(r);
    if (rc) {
        gs_ring_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void gs_ring_free(struct gs_ring *r)
{
    if (!r)
        return;
    free(r->names);
    free(r->order);
    free(r->order_pos);
    free(r);
}

int gs_ring_with_node(const struct gs_ring *r, const char *name, struct gs_ring **out)
{
    if (r->n + 1 > GS_RING_MAX_NODES)
        return CORE_EINVAL;
    const char *names[GS_RING_MAX_NODES];
    for (unsigned i = 0; i < r->n; i++)
        names[i] = r->names[i];
    names[r->n] = name;
    struct gs_ring_config cfg = {r->vnodes, r->replicas};
    return gs_ring_new(out, names, r->n + 1, &cfg);
}

int gs_ring_without_node(const struct gs_ring *r, const char *name, struct gs_ring **out)
{
    int victim = gs_ring_find(r, name);
    if (victim < 0)
        return CORE_ENOTFOUND;
    const char *names[GS_RING_MAX_NODES];
    unsigned n = 0;
    for (unsigned i = 0; i < r->n; i++)
        if ((int)i != victim)
            names[n++] = r->names[i];
    struct gs_ring_config cfg = {r->vnodes, r->replicas};
    return gs_ring_new(out, names, n, &cfg);
}

unsigned gs_ring_nodes(const struct gs_ring *r)
{
    return r->n;
}

const char *gs_ring_node_name(const struct gs_ring *r, unsigned node)
{
    return node < r->n ? r->names[node] : NULL;
}

int gs_ring_find(const struct gs_ring *r, const char *name)
{
    for (unsigned i = 0; i < r->n; i++)
        if (strcmp(r->names[i], name) == 0)
            return (int)i;
    return -1;
}

unsigned gs_ring_rf(const struct gs_ring *r)
{
    return r->replicas < r->n ? r->replicas : r->n;
}

unsigned gs_ring_owner_of_slot(const struct gs_ring *r, unsigned slot)
{
    return r->owner[slot & (GS_SLOTS - 1)];
}

unsigned gs_ring_group_replicas(const struct gs_ring *r, unsigned group, unsigned *out)
{
    unsigned rf = gs_ring_rf(r);
    unsigned p = r->order_pos[group];
    for (unsigned i = 0; i < rf; i++)
        out[i] = r->order[(p + i) % r->n];
    return rf;
}

void gs_ring_slot_counts(const struct gs_ring *r, unsigned *out)
{
    memset(out, 0, r->n * sizeof(*out));
    for (unsigned s = 0; s < GS_SLOTS; s++)
        out[r->owner[s]]++;
}

/* Is the replica set of slot s the same (as a set of names) in a and b? */
static int same_replica_set(const struct gs_ring *a, const struct gs_ring *b, unsigned s)
{
    unsigned ra[GS_RING_MAX_REPLICAS], rb[GS_RING_MAX_REPLICAS];
    unsigned na = gs_ring_group_replicas(a, a->owner[s], ra);
    unsigned nb = gs_ring_group_replicas(b, b->owner[s], rb);
    if (na != nb)
        return 0;
    for (unsigned i = 0; i < na; i++) {
        int found = 0;
        for (unsigned j = 0; j < nb && !found; j++)
            found = strcmp(a->names[ra[i]], b->names[rb[j]]) == 0;
        if (!found)
            return 0;
    }
    return 1;
}

unsigned gs_ring_count_moved(const struct gs_ring *a, const struct gs_ring *b,
                             unsigned *replica_set_changed)
{
    unsigned moved = 0, changed = 0;
    for (unsigned s = 0; s < GS_SLOTS; s++) {
        if (strcmp(a->names[a->owner[s]], b->names[b->owner[s]]) != 0)
            moved++;
        if (replica_set_changed && !same_replica_set(a, b, s))
            changed++;
    }
    if (replica_set_changed)
        *replica_set_changed = changed;
    return moved;
}
