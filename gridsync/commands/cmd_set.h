/*
 * SPOP in cluster mode. Every replica must compute the same state from a
 * log entry (gridsync/cluster/cluster.c, invariant 3), but SPOP pops at
 * random, and a big set's hash table is seeded per process: "SPOP key"
 * applied on three replicas pops three different members.
 *
 *  - The leader picks the members when it proposes the write, from the
 *    state it has applied (gs_spop_hints), and proposes them with the
 *    command: [SPOP_ENTRY, key, count, member...].
 *  - Every replica applies that entry with gs_spop_apply: while the set
 *    still holds every picked member (and more), those are popped. If a
 *    write ordered between the pick and the entry changed the set, all
 *    replicas fall back to the canonical pick below instead.
 *  - The canonical pick, also what gs_cmd_spop does for a client with
 *    replica_apply set (a SPOP in a cluster transaction): the k members
 *    with the smallest core_hash64(member, seed), the seed taken from the
 *    entry's time and the key. It depends on the set's contents only.
 *    O(n) for one member, O(n) time and 8n bytes for k (O(n k) when those
 *    bytes cannot be had; the same members either way). Two members of
 *    one 64-bit rank would be told apart by the table's order: the one
 *    case left to chance.
 *
 * Whatever the path, the reply (bulk, null or a set of members) and the
 * errors are gs_cmd_spop's, i.e. Redis 7.0's.
 */
#ifndef GS_CMD_SET_H
#define GS_CMD_SET_H

#include <stddef.h>

#include "core/buf.h"
#include "gridsync/client/client.h"

/* For SPOP key [count] (argv as the client sent it) at the leader, in c's
 * database: the members it would pop, picked at random, in *hints (a
 * malloc'd array the caller frees, whose bytes are in *bytes, which the
 * caller frees too). Returns their number; 0 when the command needs no
 * pick (its effect is the same on every replica as it is: an error, no
 * such key, count 0, or a count that pops everything); -1 out of memory.
 * Changes nothing. */
long gs_spop_hints(struct gs_client *c, size_t argc, const struct gs_arg *argv,
                   struct core_buf *bytes, struct gs_arg **hints);

/* The handler of the SPOP_ENTRY entry: argv[1] the key, argv[2] the
 * count ("" for the form without one), argv[3..] the leader's picks. */
void gs_spop_apply(struct gs_client *c, size_t argc, struct gs_arg *argv);

#endif
