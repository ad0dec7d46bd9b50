/*
 * Simulation models of S3-FIFO and W-TinyLFU, written as gs_evict_ops
 * tables (gridsync/store/evict.h) so that evict-sim replays one key stream
 * through them and through the store's own LRU and SLRU alike.
 *
 * They are models, not store policies yet: they know the cache capacity
 * in entries (the store's limit is in bytes) and identify a key by its
 * entry's index in the simulator's array (a store policy would hash the
 * key bytes). Both fit the entry's 3 evict_bits and the policy's lists,
 * with their side state (ghost queue, frequency sketch) in gs_evict.priv.
 */
#ifndef EVICT_MODELS_H
#define EVICT_MODELS_H

#include <stdint.h>

#include "gridsync/store/evict.h"

enum evict_model {
    EVICT_MODEL_S3FIFO,
    EVICT_MODEL_WTINYLFU,
};

/* Set p up as the model for a cache of `capacity` entries whose entries
 * are base[0 .. ids-1]. Returns 0, or -1 when out of memory. */
int evict_model_init(struct gs_evict *p, enum evict_model model, struct gs_entry *base,
                     uint32_t ids, uint32_t capacity);

/* Release the model's side state. */
void evict_model_free(struct gs_evict *p);

#endif
