/*
 * EduMatcher order book: one symbol's resting orders, by side and price.
 *
 * Orders and price levels live in engine-wide pools (struct em_pool) and
 * are named by 32-bit indices (0 is "none"), so a pool can grow by
 * doubling during warm-up without invalidating anything, and an order
 * record stays small (sizeof(struct em_order) <= 124, plus 4 bytes of
 * hash bucket: <= 128 bytes per resting order with its index entries).
 *
 * Price levels of a side are found three ways:
 *   - a window of EM_BOOK_WIN ticks starting at `base`: slot[] maps a
 *     price to its level, and a two-level 64-bit occupancy bitmap (64
 *     words under one summary word) gives the best level and the next
 *     level in O(1) with __builtin_ctzll / __builtin_clzll;
 *   - prices outside the window (ALF does not bound prices) go to an
 *     array of "outlier" levels sorted by price: binary search to find,
 *     memmove to insert or remove (O(log k) + a short copy);
 *   - resting market orders (only in PREOPEN/AUCTION, docs/alf.md D.4)
 *     have their own FIFO per side, `mkt`, ahead of every price.
 * The window is re-centred on a new order's price whenever it holds no
 * level (on either side) and that price falls outside it; the outliers
 * that the new window covers move into it. So a symbol that trades far
 * from where it started soon uses the window again.
 *
 * Invariants (checked by em_book_check):
 *   1. each level's orders are in strictly increasing arrival sequence
 *      (FIFO = time priority) and all have the level's price;
 *   2. level.vol = sum of its orders' leaves; level.count = their number;
 *   3. a window slot is non-zero iff its bitmap bit is set, and summary
 *      bit w is set iff word w is non-zero; no empty level exists;
 *   4. outlier levels lie outside the window, sorted by strictly
 *      increasing price, and nlevels = window levels + outliers;
 *   5. for every order, qty = cum + leaves and 0 < shown <= leaves.
 */
#ifndef EM_BOOK_H
#define EM_BOOK_H

#include <stdint.h>

#define EM_BOOK_WIN_BITS 12
#define EM_BOOK_WIN      (1u << EM_BOOK_WIN_BITS) /* 64 x 64 ticks */

enum em_order_state { EM_OS_FREE, EM_OS_RESTING, EM_OS_STOP, EM_OS_ACTIVE };

struct em_order {
    uint64_t oid;
    uint64_t seq;          /* arrival sequence (priority), ALF §5.1 */
    int64_t px;            /* limit price in ticks (LMT, STL) */
    int64_t stop;          /* stop price in ticks (STP, STL while pending) */
    uint32_t qty;          /* total, = cum + leaves */
    uint32_t cum;          /* filled */
    uint32_t leaves;       /* open */
    uint32_t shown;        /* displayed part still tradable (icebergs), <= leaves */
    uint32_t peak;         /* 0: not an iceberg */
    uint32_t prev, next;   /* FIFO in its level, or in its stop list; pool free list */
    uint32_t level;        /* its level while resting */
    uint32_t gprev, gnext; /* its gateway's live orders, in oid order */
    uint32_t hnext;        /* (gw, cl) index chain */
    uint16_t gw, sym;
    uint8_t side, type, tif, stp; /* enum em_side / em_otype / em_tif / em_stp */
    uint8_t state;                /* enum em_order_state */
    uint8_t cllen;
    char cl[32]; /* not NUL-terminated when 32 long */
};

struct em_level {
    int64_t px;
    uint64_t vol;   /* sum of leaves */
    uint32_t count; /* orders */
    uint32_t head, tail;
    uint32_t next; /* pool free list */
    uint8_t in_window;
};

/* Engine-wide pools. */
struct em_pool {
    struct em_order *orders;
    uint32_t norders_cap, order_free, orders_used;
    struct em_level *levels;
    uint32_t nlevels_cap, level_free;
};

struct em_book_side {
    uint32_t slot[EM_BOOK_WIN];
    uint64_t bits[EM_BOOK_WIN / 64];
    uint64_t summary;
    uint32_t *out; /* outlier levels, ascending price (owned) */
    uint32_t nout, outcap;
    uint32_t mkt;     /* level holding resting market orders */
    uint32_t nlevels; /* price levels (window + outliers) */
};

struct em_book {
    int64_t base;                /* price of slot 0 */
    struct em_book_side side[2]; /* [0] buy, [1] sell */
};

#define EM_BUY  0
#define EM_SELL 1

/* Pools: initialise with room for `orders` orders and `levels` levels
 * (both grow by doubling when exhausted, up to 2^31 records). Returns 0
 * or CORE_ENOMEM (also for a size beyond that). */
int em_pool_init(struct em_pool *p, uint32_t orders, uint32_t levels);
void em_pool_free(struct em_pool *p);
/* Take a zeroed order / give it back. 0 when memory is exhausted. */
uint32_t em_pool_order_get(struct em_pool *p);
void em_pool_order_put(struct em_pool *p, uint32_t o);

static inline struct em_order *em_ord(const struct em_pool *p, uint32_t o)
{
    return &p->orders[o];
}
static inline struct em_level *em_lvl(const struct em_pool *p, uint32_t l)
{
    return &p->levels[l];
}

/* Initialise an empty book (two market-order levels come from the pool).
 * Returns 0 or CORE_ENOMEM. em_book_free releases what the book owns (not
 * the pool's records). */
int em_book_init(struct em_book *b, struct em_pool *p);
void em_book_free(struct em_book *b);

/* Append order o (state, side, px, leaves set; market when type is MKT) at
 * the back of its level, creating the level if needed. O(1) for prices in
 * the window. Returns 0 or CORE_ENOMEM. */
int em_book_insert(struct em_book *b, struct em_pool *p, uint32_t o);

/* Unlink order o from its level (freeing an emptied level). O(1) in the
 * window. The order itself stays allocated. */
void em_book_remove(struct em_book *b, struct em_pool *p, uint32_t o);

/* Move order o to the back of its level (iceberg replenishment, §5.4). */
void em_book_requeue(struct em_book *b, struct em_pool *p, uint32_t o);

/* The order's leaves dropped by d: keep the level's aggregate. */
static inline void em_book_reduced(struct em_pool *p, uint32_t o, uint32_t d)
{
    em_lvl(p, em_ord(p, o)->level)->vol -= d;
}

/* Best price level of a side (highest buy, lowest sell), excluding market
 * orders; 0 when none. */
uint32_t em_book_best(const struct em_book *b, const struct em_pool *p, int side);

/* The next worse level after level l on a side; 0 when none. */
uint32_t em_book_next(const struct em_book *b, const struct em_pool *p, int side, uint32_t l);

/* Whether the book has no order at all. */
int em_book_empty(const struct em_book *b, const struct em_pool *p);

/* Check invariants 1–5; returns 0 or the number of the first broken one. */
int em_book_check(const struct em_book *b, const struct em_pool *p);

#endif
