/*
 * A Raft group's persistent state in DynamoDB (--raft-store
 * dynamodb://HOST:PORT/TABLE; docs/gridsync-cluster.md, "Raft state in
 * DynamoDB"), private to gridsync/cluster/raft_group.c.
 *
 * It is a libraft 0.15 `struct raft_io` made from libraft's own uv io: the
 * uv io, set up by raft_uv_init on a scratch directory, keeps its transport
 * (start, send, time, random, close); this module overrides the
 * persistence calls (load, bootstrap, recover, set_term, set_vote, append,
 * truncate, snapshot_put, snapshot_get) in place, so the uv io's own files
 * are never written or read. Requests go through the registry's DynamoDB
 * client (registry.h: SigV4, retries with backoff of throttling, 5xx and
 * timeouts) on the group's loop.
 *
 * libraft's contract, and how it is kept:
 * - load, bootstrap and recover are synchronous in libraft (its uv io reads
 *   and writes its files synchronously too): the state is read when the
 *   store is attached, on a private loop, before the group serves.
 * - set_term and set_vote are synchronous in libraft but are written
 *   asynchronously here (one meta item, one write in flight, the latest
 *   state coalesced): until the meta item holding them is acknowledged,
 *   every message the group sends is held back, and no append completes.
 *   Nothing that depends on a term or vote leaves the node before it is
 *   durable, which is what a synchronous write guarantees.
 * - append's callback runs only once DynamoDB acknowledged every item of
 *   the entries (appends are pipelined, callbacks in order); truncate and
 *   snapshot_put wait for the appends before them and hold back the ones
 *   after them.
 *
 * Items (table key: pk string HASH, sk number RANGE; the table is created
 * if missing, and a table without that key is refused):
 *   pk = "raft#<key>", sk = 0               the meta item: term, vote,
 *        incarnation, log epoch, first log index, the snapshot's index,
 *        term, configuration and size
 *   pk = "raft#<key>", sk = index*4096 + c  chunk c of log entry `index`
 *   pk = "raft#<key>#snap", sk = index*65536 + c  chunk c of the snapshot
 *        taken at `index`
 * Chunks keep every item under DynamoDB's 400 KB.
 *
 * Stale processes: attaching bumps the meta item's incarnation; the meta
 * item is written only under "incarnation = mine", entries and snapshot
 * chunks only under "no incarnation or one not newer than mine", and a
 * timer re-reads the incarnation every second. A process that finds a
 * newer incarnation stops (exit status 1) with a message saying so.
 *
 * Errors: a request that fails after the client's retries (or is refused)
 * stops the process with a message naming the group and the request: a
 * write is never reported durable unless it is.
 */
#ifndef GS_RAFT_STORE_DYNAMO_H
#define GS_RAFT_STORE_DYNAMO_H

#include <stdbool.h>

#include <raft.h>
#include <uv.h>

#include "gridsync/cluster/registry.h"

#define GS_RAFT_STORE_KEYLEN 200

struct gs_raft_store_config {
    struct gs_registry_config ddb;  /* endpoint, table, region, credentials */
    char key[GS_RAFT_STORE_KEYLEN]; /* the group on this node, e.g. "<raft id>#group-<name>" */
};

/* Override io's persistence calls (io set up by raft_uv_init, not yet
 * given to raft_init) and read the group's state from DynamoDB, blocking
 * on a private loop. Returns 0, CORE_ENOMEM, CORE_EINVAL (the table's key
 * schema is not ours), or CORE_EIO / CORE_ETIMEOUT / CORE_EPROTO (DynamoDB
 * unreachable or refusing: logged; retrying later is safe). On failure io
 * is left as it was. */
int gs_raft_store_dynamo_attach(struct raft_io *io, uv_loop_t *loop,
                                const struct gs_raft_store_config *cfg);

/* Forget the group's state (a node leaving the group must not come back
 * with its old log): the meta item is reset to an empty state of a new
 * epoch, blocking on a private loop; the old items become garbage that a
 * later attach deletes. Call after the raft instance has closed. Returns 0
 * or a CORE_* error (logged). */
int gs_raft_store_dynamo_erase(struct raft_io *io);

/* Release the store of io (after the raft instance has closed); io itself
 * is then released with raft_uv_close. A no-op for an io without one. */
void gs_raft_store_dynamo_release(struct raft_io *io);

#endif
