/*
 * The list operations other command families build on (the blocking
 * list commands): pop from a key and move between keys with the same
 * replies as LPOP/LMPOP/LMOVE, and the "key became ready" signal every
 * push sends through the key_ready hook of gs_shared (client/client.h).
 */
#ifndef GS_CMD_LIST_H
#define GS_CMD_LIST_H

#include <stdbool.h>
#include <stdint.h>

#include "gridsync/client/client.h"
#include "gridsync/commands/commands.h"

/* Pop from the list at key, from the head or the tail, and reply: one
 * bulk string when count < 0; an array of up to count elements
 * otherwise; with_key wraps that as [key, [elements]] (LMPOP). Returns 1
 * after replying, 0 when the key does not exist (nothing replied), -1
 * after replying WRONGTYPE or OOM. count must not be 0. */
int gs_list_pop(struct gs_client *c, const struct gs_arg *key, bool head, int64_t count,
                bool with_key);

/* LMOVE's step: pop from src's head or tail, push at dst's, reply with
 * the element. Returns 1 after replying, 0 when src does not exist
 * (nothing replied), -1 after an error reply (WRONGTYPE on either key,
 * OOM). */
int gs_list_move(struct gs_client *c, const struct gs_arg *src, const struct gs_arg *dst,
                 bool from_head, bool to_head);

/* Parse LMPOP's (and BLMPOP's) numkeys key... LEFT|RIGHT [COUNT n] from
 * argv[numkeys_idx] as Redis does; false after replying the error. */
bool gs_list_parse_mpop(struct gs_client *c, size_t argc, struct gs_arg *argv, size_t numkeys_idx,
                        int64_t *numkeys, bool *head, int64_t *count);

/* Tell the key_ready hook (c->shared, client.h) that key of c->db got
 * elements. */
void gs_list_signal_ready(struct gs_client *c, const struct gs_arg *key);

#endif
