/*
 * S3-FIFO and W-TinyLFU models for evict-sim (see evict_models.h).
 *
 * S3-FIFO (Yang et al., SOSP'23): a small FIFO (10 % of the capacity), a
 * main FIFO (the rest) with a 2-bit access counter per entry, and a ghost
 * FIFO of recently evicted keys (90 % of the capacity, keys only).
 *   insert: to main if the key is in the ghost, else to small; counter 0
 *   hit:    counter + 1, capped at 3; nothing moves
 *   evict:  from main when main is over its share or small is empty:
 *           CLOCK over main (an entry with counter > 0 goes back to the
 *           head with counter - 1; the first with 0 is the victim);
 *           else from small: a tail accessed at least twice moves to
 *           main (counter 0), and the first that was not is the victim
 *           and its key enters the ghost.
 *   Lists: list[0] small, list[1] main. evict_bits: bit 0 main, bits 1-2
 *   the counter.
 *
 * W-TinyLFU (Einziger et al.; Caffeine): a window LRU (1 % of the
 * capacity) in front of an SLRU main (protected at most 80 % of the
 * main), and a count-min sketch of access frequencies (4 rows of
 * saturating 4-bit counters, width the next power of two >= capacity,
 * all counters halved every 10 x capacity increments).
 *   every access (hit or insert) is counted in the sketch
 *   insert: window head; a window over its size sends its tail to
 *           probation's head, where it is the admission candidate
 *   hit:    window -> window head; probation -> protected head, demoting
 *           protected's tail to probation's head on overflow; protected
 *           -> protected head
 *   evict:  the candidate (if still on probation) duels probation's tail
 *           (or protected's, if the candidate is the tail): the one the
 *           sketch says is more frequent stays, a tie evicts the
 *           candidate (Caffeine, without its random admission of warm
 *           candidates); with no candidate, probation's tail goes.
 *   Lists: GS_SEG_PROBATION, GS_SEG_PROTECTED, GS_SEG_WINDOW; evict_bits
 *   holds the list index.
 */
#include "evict_models.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gridsync/store/entry.h"

#define NO_KEY UINT32_MAX

struct model {
    struct gs_entry *base;
    uint32_t capacity;
    /* S3-FIFO */
    uint32_t small_max;
    uint32_t *ghost_ring; /* keys, NO_KEY when empty */
    uint32_t *ghost_slot; /* per key: its ring slot + 1, or 0 */
    uint32_t ghost_cap, ghost_next;
    /* W-TinyLFU */
    uint32_t window_max, protected_max;
    struct gs_entry *candidate; /* last window graduate, or NULL */
    uint8_t *sketch;            /* 4 rows of width_mask + 1 counters */
    uint32_t width_mask;
    uint32_t additions, sample_size;
};

static uint32_t key_of(struct model *m, struct gs_entry *e)
{
    return (uint32_t)(e - m->base);
}

static struct gs_entry *tail(struct core_list *sentinel)
{
    struct core_list *l = core_list_last(sentinel);
    return l ? gs_evict_entry_of(l) : NULL;
}

/* Move e from list `from` to the head of list `to`; evict_bits is the
 * caller's to set. */
static void move_to(struct gs_evict *p, struct gs_entry *e, int from, int to)
{
    core_list_remove(&e->link);
    p->count[from]--;
    core_list_push_front(&p->list[to], &e->link);
    p->count[to]++;
}

static void links_moved(struct gs_evict *p, struct gs_entry *e)
{
    core_list_moved(&e->link);
}

/* ---- S3-FIFO ---- */

#define S3_MAIN       1u
#define S3_SMALL_LIST 0
#define S3_MAIN_LIST  1

static unsigned s3_freq(const struct gs_entry *e)
{
    return (e->evict_bits >> 1) & 3u;
}

static void s3_set(struct gs_entry *e, unsigned queue, unsigned freq)
{
    e->evict_bits = (queue & 1u) | (freq << 1);
}

static void ghost_forget(struct model *m, uint32_t key)
{
    if (m->ghost_slot[key]) {
        m->ghost_ring[m->ghost_slot[key] - 1] = NO_KEY;
        m->ghost_slot[key] = 0;
    }
}

static void ghost_add(struct model *m, uint32_t key)
{
    if (m->ghost_cap == 0)
        return;
    uint32_t slot = m->ghost_next++ % m->ghost_cap;
    uint32_t old = m->ghost_ring[slot];
    if (old != NO_KEY)
        m->ghost_slot[old] = 0; /* the FIFO forgets its oldest key */
    m->ghost_ring[slot] = key;
    m->ghost_slot[key] = slot + 1;
}

static void s3_insert(struct gs_evict *p, struct gs_entry *e)
{
    struct model *m = p->priv;
    uint32_t key = key_of(m, e);
    unsigned q = m->ghost_slot[key] ? S3_MAIN : 0;
    ghost_forget(m, key);
    s3_set(e, q, 0);
    core_list_push_front(&p->list[q], &e->link);
    p->count[q]++;
}

static void s3_hit(struct gs_evict *p, struct gs_entry *e)
{
    unsigned f = s3_freq(e);
    if (f < 3)
        s3_set(e, e->evict_bits & 1u, f + 1);
}

static void s3_remove(struct gs_evict *p, struct gs_entry *e)
{
    core_list_remove(&e->link);
    p->count[e->evict_bits & 1u]--;
}

static struct gs_entry *s3_victim(struct gs_evict *p)
{
    struct model *m = p->priv;
    for (;;) {
        size_t main_max = m->capacity - m->small_max;
        if (p->count[S3_MAIN_LIST] > main_max || p->count[S3_SMALL_LIST] == 0) {
            /* CLOCK: each pass lowers a counter, so this ends within
             * four passes over main. */
            struct gs_entry *t;
            while ((t = tail(&p->list[S3_MAIN_LIST])) != NULL && s3_freq(t) > 0) {
                s3_set(t, S3_MAIN, s3_freq(t) - 1);
                move_to(p, t, S3_MAIN_LIST, S3_MAIN_LIST);
            }
            return t;
        }
        struct gs_entry *t = tail(&p->list[S3_SMALL_LIST]);
        if (s3_freq(t) >= 2) {
            s3_set(t, S3_MAIN, 0);
            move_to(p, t, S3_SMALL_LIST, S3_MAIN_LIST);
            continue;
        }
        ghost_add(m, key_of(m, t));
        return t;
    }
}

static const struct gs_evict_ops s3fifo_ops = {
    .name = "s3fifo",
    .evicts = true,
    .on_insert = s3_insert,
    .on_hit = s3_hit,
    .on_remove = s3_remove,
    .on_move = links_moved,
    .victim = s3_victim,
};

/* ---- W-TinyLFU ---- */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint32_t sketch_index(const struct model *m, uint32_t key, unsigned row)
{
    uint64_t h = mix64((uint64_t)key * 4 + row + 0x9e3779b97f4a7c15ull);
    return row * (m->width_mask + 1) + ((uint32_t)h & m->width_mask);
}

static unsigned sketch_frequency(const struct model *m, uint32_t key)
{
    unsigned f = 15;
    for (unsigned row = 0; row < 4; row++) {
        unsigned c = m->sketch[sketch_index(m, key, row)];
        if (c < f)
            f = c;
    }
    return f;
}

/* Count one access; halve every counter after sample_size additions, so
 * that the sketch follows a changing popularity (Caffeine's reset). */
static void sketch_increment(struct model *m, uint32_t key)
{
    bool added = false;
    for (unsigned row = 0; row < 4; row++) {
        uint8_t *c = &m->sketch[sketch_index(m, key, row)];
        if (*c < 15) {
            (*c)++;
            added = true;
        }
    }
    if (added && ++m->additions >= m->sample_size) {
        for (size_t i = 0; i < 4 * ((size_t)m->width_mask + 1); i++)
            m->sketch[i] >>= 1;
        m->additions /= 2;
    }
}

static void wt_insert(struct gs_evict *p, struct gs_entry *e)
{
    struct model *m = p->priv;
    sketch_increment(m, key_of(m, e));
    e->evict_bits = GS_SEG_WINDOW;
    core_list_push_front(&p->list[GS_SEG_WINDOW], &e->link);
    p->count[GS_SEG_WINDOW]++;
    if (p->count[GS_SEG_WINDOW] > m->window_max) {
        struct gs_entry *g = tail(&p->list[GS_SEG_WINDOW]);
        g->evict_bits = GS_SEG_PROBATION;
        move_to(p, g, GS_SEG_WINDOW, GS_SEG_PROBATION);
        m->candidate = g;
    }
}

static void wt_hit(struct gs_evict *p, struct gs_entry *e)
{
    struct model *m = p->priv;
    sketch_increment(m, key_of(m, e));
    int seg = e->evict_bits;
    if (seg != GS_SEG_PROBATION) {
        move_to(p, e, seg, seg);
        return;
    }
    e->evict_bits = GS_SEG_PROTECTED;
    move_to(p, e, GS_SEG_PROBATION, GS_SEG_PROTECTED);
    if (p->count[GS_SEG_PROTECTED] > m->protected_max) {
        struct gs_entry *d = tail(&p->list[GS_SEG_PROTECTED]);
        d->evict_bits = GS_SEG_PROBATION;
        move_to(p, d, GS_SEG_PROTECTED, GS_SEG_PROBATION);
    }
}

static void wt_remove(struct gs_evict *p, struct gs_entry *e)
{
    struct model *m = p->priv;
    if (m->candidate == e)
        m->candidate = NULL;
    core_list_remove(&e->link);
    p->count[e->evict_bits]--;
}

static struct gs_entry *wt_victim(struct gs_evict *p)
{
    struct model *m = p->priv;
    struct gs_entry *cand = m->candidate;
    m->candidate = NULL;
    if (cand && cand->evict_bits == GS_SEG_PROBATION) {
        struct gs_entry *v = tail(&p->list[GS_SEG_PROBATION]);
        if (v == cand)
            v = tail(&p->list[GS_SEG_PROTECTED]);
        if (!v)
            return cand;
        /* TinyLFU admission: the candidate enters the main space only if
         * it is more frequent than what it would push out. */
        return sketch_frequency(m, key_of(m, cand)) > sketch_frequency(m, key_of(m, v)) ? v : cand;
    }
    struct gs_entry *v = tail(&p->list[GS_SEG_PROBATION]);
    if (!v)
        v = tail(&p->list[GS_SEG_PROTECTED]);
    if (!v)
        v = tail(&p->list[GS_SEG_WINDOW]);
    return v;
}

static const struct gs_evict_ops wtinylfu_ops = {
    .name = "w-tinylfu",
    .evicts = true,
    .on_insert = wt_insert,
    .on_hit = wt_hit,
    .on_remove = wt_remove,
    .on_move = links_moved,
    .victim = wt_victim,
};

/* ---- set-up ---- */

int evict_model_init(struct gs_evict *p, enum evict_model model, struct gs_entry *base,
                     uint32_t ids, uint32_t capacity)
{
    struct model *m = calloc(1, sizeof(*m));
    if (!m)
        return -1;
    gs_evict_init(p, GS_EVICT_LRU); /* sentinels and counts; ops replaced below */
    m->base = base;
    m->capacity = capacity;
    if (model == EVICT_MODEL_S3FIFO) {
        m->small_max = capacity / 10;
        m->ghost_cap = capacity - capacity / 10;
        m->ghost_ring = malloc(sizeof(uint32_t) * (m->ghost_cap ? m->ghost_cap : 1));
        m->ghost_slot = calloc(ids, sizeof(uint32_t));
        if (!m->ghost_ring || !m->ghost_slot) {
            evict_model_free(&(struct gs_evict){.priv = m});
            return -1;
        }
        for (uint32_t i = 0; i < m->ghost_cap; i++)
            m->ghost_ring[i] = NO_KEY;
        p->ops = &s3fifo_ops;
    } else {
        m->window_max = capacity / 100 ? capacity / 100 : 1;
        m->protected_max = (capacity - m->window_max) * 4 / 5;
        uint32_t width = 16;
        while (width < capacity)
            width <<= 1;
        m->width_mask = width - 1;
        m->sample_size = 10 * capacity;
        m->sketch = calloc(4 * (size_t)width, 1);
        if (!m->sketch) {
            free(m);
            return -1;
        }
        p->ops = &wtinylfu_ops;
    }
    p->priv = m;
    return 0;
}

void evict_model_free(struct gs_evict *p)
{
    struct model *m = p->priv;
    if (!m)
        return;
    free(m->ghost_ring);
    free(m->ghost_slot);
    free(m->sketch);
    free(m);
    p->priv = NULL;
}
