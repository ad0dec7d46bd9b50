/*
 * The one module that wraps libraft (canonical/raft 0.15, Debian's
 * libraft-dev): raft_glue.c, with its transports in raft_transport.c.
 * Nothing else in GridSync includes raft.h.
 *
 * Two layers:
 *
 *  - gs_fsm: the replicated state machine of one shard (a gs_store) plus
 *    the proposer that turns write commands into log entries. It works on
 *    any struct raft, so the unit tests drive it with libraft's
 *    deterministic fixture (raft/fixture.h) and the server with real I/O
 *    (raft_glue.c).
 *
 *  - gs_group: one Raft group on a libuv loop: a raft instance, its uv
 *    I/O (log and snapshots under a data directory), its TCP transport
 *    (libraft's, wrapped to set TCP_NODELAY), a gs_fsm, a prepare handle
 *    that cuts one batch per loop iteration, and an optional preferred
 *    leader that leadership is handed back to once it is caught up
 *    (raft_group.c).
 *
 * Writes. gs_fsm_submit queues one command into the open batch; the batch
 * becomes one log entry at the end of the loop iteration (gs_fsm_flush,
 * called by the group's prepare handle), because libraft's throughput is
 * per entry, not per byte. Each command's callback fires once, after the
 * entry is committed and applied here (status 0, with the command's RESP
 * reply), or with an error:
 *
 *   CORE_ESTATE    not applied, and never will be: this node is not the
 *                  leader, or the entry was overwritten. Safe to retry on
 *                  the leader.
 *   CORE_ETIMEOUT  unknown: the entry was proposed and this node cannot
 *                  learn whether it committed (leadership was lost and
 *                  limbo did not resolve in time, or the group closed with
 *                  the entry in flight or in limbo: another leader may
 *                  still commit it). Not safe to retry a non-idempotent
 *                  command (INCR) blindly.
 *   CORE_ECLOSED   not applied: the group closed before the batch was
 *                  proposed.
 *   CORE_ENOMEM    not applied (the batch could not be built).
 *
 * Limbo. libraft fails a pending apply with RAFT_LEADERSHIPLOST when the
 * leader steps down, although the entry may still be committed by the
 * next leader. Answering "failed" then would let a client retry an INCR
 * that did happen (a double effect). So such a batch goes to limbo: every
 * entry carries (origin id, incarnation, seq); when this node later
 * applies an entry with its own tag, the batch succeeds with the replies
 * computed then; when this node has applied past the batch's index without
 * seeing it, the entry was overwritten and the batch fails with
 * CORE_ESTATE; a snapshot install or limbo_timeout_ms without either
 * answers CORE_ETIMEOUT.
 *
 * The states of one in-flight batch (a "slot"), with the function behind
 * each transition (gs_fsm_flush, apply_cb, fsm_apply/resolve_limbo,
 * fsm_restore):
 *
 *     FREE --flush: raft_apply ok--> INFLIGHT --apply cb 0--> FREE (replies)
 *       ^                              |
 *       |                              +--apply cb LEADERSHIPLOST--> LIMBO
 *       |                                                             |
 *       +---- own tag applied (replies) / passed over (ESTATE) / -----+
 *             snapshot restore or timeout (ETIMEOUT)
 *
 * Closing (gs_fsm_free) takes an INFLIGHT or LIMBO slot to FREE with
 * ETIMEOUT (it may still commit elsewhere) and the open batch's waiters
 * get ECLOSED (never proposed).
 *
 * FSM rules (libraft 0.15): apply must return 0 — a non-zero return halts
 * the node — so a malformed entry is logged and skipped, and a command
 * that fails yields an error reply, not an error code.
 *
 * Snapshots. A snapshot holds the store and, when the config gives
 * state_encode, one record of the state machine's side state, so that a
 * member restored from it has everything its entries had built.
 * With snapshot_fork (what groups use), a snapshot is built off
 * the loop (libraft's FSM version 3): the loop fork()s, the child encodes
 * the store as it was after the snapshot's last entry (a copy-on-write
 * view) into a pipe, a thread-pool thread reads it; the loop pauses only
 * for the fork, and the writes it applies meanwhile stay in the log after
 * the snapshot's index. Without it (the fixture's I/O has no async work),
 * the loop encodes the store itself. Restoring a snapshot runs on the
 * loop thread.
 */
#ifndef GS_RAFT_GLUE_H
#define GS_RAFT_GLUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gridsync/cluster/raft_batch.h"

struct gs_store;
struct raft;
struct raft_fsm;
struct uv_loop_s;

/* Apply one write command to the store, appending its RESP reply to out.
 * Must be deterministic: the same (store state, now_ms, argv) gives the
 * same result on every replica; read time only from now_ms (the
 * proposer's clock, carried in the entry). Must not fail: an error is an
 * error reply ("-ERR ..."). */
typedef void (*gs_raft_exec_fn)(void *ctx, struct gs_store *store, int64_t now_ms, unsigned argc,
                                const char *const *argv, const size_t *argvlen,
                                struct core_buf *out);

/* Completion of one submitted write; see "Writes" above. reply (RESP) is
 * valid only during the call and is NULL unless status is 0. */
typedef void (*gs_write_cb)(void *data, int status, const char *reply, size_t len);

struct gs_fsm_config {
    struct gs_store *store; /* not owned; the shard's store */
    gs_raft_exec_fn exec;
    void *exec_ctx;
    unsigned max_inflight;       /* entries in flight; 0 = 64 */
    unsigned limbo_timeout_ms;   /* 0 = 5000 */
    int64_t (*clock_ms)(void *); /* NULL = core_wall_ms */
    void *clock_ctx;
    /* Leader lease (see "Reads" above): how long after proposing an entry
     * that commits this node may serve reads without a barrier. Must be
     * below the minimum election timeout minus the clock-drift bound; 0 =
     * no lease (lease reads always wait for a barrier). */
    unsigned lease_ms;
    /* Monotonic milliseconds for the lease, read fresh at each check.
     * NULL = raft's io->time (the fixture's simulated clock in tests). */
    int64_t (*mono_ms)(void *);
    void *mono_ctx;
    /* Build snapshots in a fork()ed child (see "Snapshots" above). Needs
     * a raft_io with async_work (libraft's uv I/O has it). */
    bool snapshot_fork;
    /* Optional: state that the group's entries build besides the store
     * (the cluster's slot migration state), carried in every snapshot so
     * that a member restored from one decides later entries as the
     * members that applied the log did. state_encode appends it to b; it
     * runs where the store is encoded (in the fork()ed child, whose memory
     * is as of the snapshot's last entry: it may only read and malloc) and
     * returns 0 or CORE_ENOMEM. state_restore replaces the state with what
     * state_encode wrote, or clears it (p NULL: the snapshot carries none),
     * and returns 0 or CORE_EPROTO / CORE_ENOMEM (the restore then fails).
     * state_valid, if set, says whether a record is one state_restore
     * accepts; it is asked before the store is cleared, so a snapshot
     * with a bad record is refused whole and leaves the member as it was
     * (without it, such a snapshot fails after the clear). */
    int (*state_encode)(void *ctx, struct core_buf *b);
    int (*state_restore)(void *ctx, const char *p, size_t len);
    bool (*state_valid)(const char *p, size_t len);
    void *state_ctx;
};

struct gs_fsm;

/* Create a state machine. Returns 0, CORE_EINVAL (no store or exec) or
 * CORE_ENOMEM. The caller owns *out; free it only after the raft instance
 * using it is closed. */
int gs_fsm_new(struct gs_fsm **out, const struct gs_fsm_config *cfg);

/* Answer everything pending, then release: the open batch (never
 * proposed) with CORE_ECLOSED, a batch in flight or in limbo with
 * CORE_ETIMEOUT (it may still commit elsewhere). */
void gs_fsm_free(struct gs_fsm *f);

/* The raft_fsm to give raft_init (or raft_fixture_grow). Owned by f. */
struct raft_fsm *gs_fsm_raft(struct gs_fsm *f);

/* Tell the FSM which raft instance it serves (after raft_init). Needed
 * before submit; its id tags this node's entries. */
void gs_fsm_attach(struct gs_fsm *f, struct raft *r);

/* Queue a write command (copied) into the open batch. Returns 0 (cb will
 * be called exactly once, never from inside this call), CORE_ESTATE if
 * this node is not the leader, CORE_EINVAL or CORE_ENOMEM (cb not called).
 */
int gs_fsm_submit(struct gs_fsm *f, unsigned argc, const char *const *argv, const size_t *argvlen,
                  gs_write_cb cb, void *data);

/* Propose the open batch as one entry if there is one and a slot is free,
 * and resolve limbo batches. Called once per loop iteration. Returns the
 * number of commands proposed. */
unsigned gs_fsm_flush(struct gs_fsm *f);

/* ---- Reads ----
 *
 * How a read at the leader is made linearizable (docs/gridsync-cluster.md,
 * "Consistency"):
 *
 *   GS_READ_ANY      the leader answers from its store. Stale only in
 *                    the window where a deposed leader still believes it
 *                    leads (until it steps down, up to two election
 *                    timeouts after losing its majority).
 *   GS_READ_LEASE    the leader answers from its store while its lease
 *                    holds: an entry it proposed at time t has committed,
 *                    so a majority heard from it at or after t and none
 *                    of them grants a vote before t + the election
 *                    timeout (libraft rejects votes while it knows a
 *                    leader; pre-vote keeps a cut-off node from raising
 *                    terms). The lease is lease_ms after t; it ends at a
 *                    term change or a leadership transfer. Otherwise the
 *                    read waits for a barrier, which renews the lease.
 *   GS_READ_BARRIER  every read waits for a barrier issued after it.
 *
 * In every mode a new leader first commits and applies an entry of its own
 * term: until then it may hold committed entries it has not applied (Raft
 * thesis 6.4: the leader learns its commit index only through an entry of
 * its term), and its store may miss writes the previous leader
 * acknowledged. */
enum gs_read_mode { GS_READ_LEASE = 0, GS_READ_BARRIER = 1, GS_READ_ANY = 2 };

/* May this node answer a read from its store now, in mode? False when it
 * is not the leader, has not applied an entry of its term yet, or (lease)
 * its lease has run out: the caller then waits for gs_fsm_barrier (when
 * leader) or redirects. In lease mode a lease past half its life is
 * renewed in the background (one barrier at a time), so steady reads do
 * not wait. */
bool gs_fsm_read_now(struct gs_fsm *f, enum gs_read_mode mode);

/* A linearizable-read barrier: cb(data, 0) once an entry of this node's
 * term, appended after the call, is committed and applied here (so every
 * entry committed before the call is applied, this node was still leader
 * after the call, and its lease is renewed from the call), else
 * cb(data, CORE_ESTATE). Returns 0 (cb called exactly once, never from
 * inside this call), or CORE_ESTATE / CORE_ENOMEM (cb not called). */
int gs_fsm_barrier(struct gs_fsm *f, void (*cb)(void *data, int status), void *data);

/* End the lease now (a leadership transfer is starting: the target may
 * win an election at once, without waiting for an election timeout). */
void gs_fsm_end_lease(struct gs_fsm *f);

/* Counters, for INFO and tests. */
struct gs_fsm_stats {
    uint64_t entries_proposed;  /* raft_apply calls that succeeded */
    uint64_t commands_proposed; /* commands inside them */
    uint64_t entries_applied;   /* entries applied here (any origin) */
    uint64_t entries_malformed; /* skipped on apply */
    uint64_t limbo_succeeded, limbo_failed, limbo_unknown;
    uint64_t snapshots_taken, snapshots_restored;
    uint64_t snapshots_failed;      /* fork mode: the child did not finish */
    uint64_t snapshot_pause_max_us; /* longest loop time in one snapshot call */
    unsigned inflight_max;          /* most entries in flight at a proposal:
                                     * above 1, a new entry went to the
                                     * followers before the previous one
                                     * had committed (pipelined) */
    uint64_t barriers;              /* gs_fsm_barrier calls and lease renewals */
    uint64_t lease_renewed;         /* commits that extended the lease */
    unsigned inflight;              /* slots not FREE */
    unsigned queued;                /* commands in the open batch */
};
void gs_fsm_stats(const struct gs_fsm *f, struct gs_fsm_stats *out);

/* ---- A group on a libuv loop ------------------------------------------ */

struct gs_raft_peer {
    uint64_t id;         /* > 0, stable for the node */
    const char *address; /* "host:port" the node's raft transport binds */
};

/* One Raft port for every group of a node (see raft_glue.c): groups
 * started with the same mux share its listening socket, and a member's
 * Raft address is its node's, whatever the group. */
struct gs_raft_mux;

/* Listen on address ("a.b.c.d:port"). Returns 0, CORE_EINVAL, CORE_EBUSY
 * (in use) or CORE_EIO. *out is owned by the caller until closed. */
int gs_raft_mux_start(struct gs_raft_mux **out, struct uv_loop_s *loop, const char *address);

/* Close the listener once every group using it is closed; cb (may be
 * NULL) runs when the memory has been released. */
void gs_raft_mux_close(struct gs_raft_mux *m, void (*cb)(void *data), void *data);

struct gs_group_config {
    uint64_t id;                      /* this node's raft id: one of peers[] */
    const char *dir;                  /* this group's data directory; created if missing */
    const struct gs_raft_peer *peers; /* the initial voters, self included */
    unsigned n_peers;
    uint64_t preferred_leader;   /* id to hand leadership to, 0 = none */
    unsigned election_ms;        /* 0 = 150 */
    unsigned heartbeat_ms;       /* 0 = 15 */
    unsigned snapshot_threshold; /* entries between snapshots; 0 = 1024 */
    unsigned snapshot_trailing;  /* entries kept after one; 0 = 128 */
    unsigned connect_retry_ms;   /* 0 = 50 */
    unsigned lease_drift_ms;     /* clock-drift bound taken off the lease
                                  * (fsm.lease_ms = election_ms - this when
                                  * fsm.lease_ms is 0); 0 = election_ms / 3 */
    struct gs_raft_mux *mux;     /* NULL: a port of its own (this node's
                                  * peers[] address) */
    uint32_t mux_group;          /* with a mux: the group's number, the
                                  * same on every member */
    bool join;                   /* join a running group: no bootstrap; the
                                  * leader adds this node (peers[] need only
                                  * hold this node) */
    /* NULL: Raft state under dir. Else it is kept in DynamoDB
     * (raft_store_dynamo.h; copied), under a key made of id and dir's last
     * component, and dir itself is not used. */
    const struct gs_raft_store_config *store;
    struct gs_fsm_config fsm;
};

struct gs_group;
struct gs_raft_store_config;

/* Create and start a group on loop. The process must ignore SIGPIPE (as
 * servers do): libraft writes to peers that may have just gone away. Makes
 * the directory, bootstraps the
 * configuration if the directory holds no Raft state yet (a restart keeps
 * its log and term, and catches up), binds the transport. Returns 0,
 * CORE_EINVAL, CORE_EIO (directory or raft error; logged) or CORE_ENOMEM.
 * On success the group belongs to the caller until gs_group_free. */
int gs_group_start(struct gs_group **out, struct uv_loop_s *loop,
                   const struct gs_group_config *cfg);

/* Close asynchronously: pending writes are answered as gs_fsm_free says
 * (CORE_ECLOSED if never proposed, else CORE_ETIMEOUT); cb (may be
 * NULL) runs once the raft instance and every handle are closed. The state
 * machine is gone by then, but not the group's memory: libraft 0.15 may
 * still complete thread-pool work on the group's I/O after the close (a
 * segment finalize), so the caller frees the group with gs_group_free only
 * once the loop has run dry (uv_run(UV_RUN_DEFAULT) returned). */
void gs_group_close(struct gs_group *g, void (*cb)(void *data), void *data);

/* Release a closed group (see gs_group_close); NULL is ignored. */
void gs_group_free(struct gs_group *g);

struct gs_fsm *gs_group_fsm(struct gs_group *g);
bool gs_group_is_leader(struct gs_group *g);

/* The current leader as known here: copies its address (raft frees its own
 * copy on every state change). Returns 0, or CORE_ENOTFOUND when no leader
 * is known. */
int gs_group_leader(struct gs_group *g, uint64_t *id, char *addr, size_t addrlen);

/* Ask leadership to move to node id (0: any up-to-date voter). Returns 0,
 * CORE_ESTATE if not leader or a transfer is running, CORE_EINVAL. */
int gs_group_transfer(struct gs_group *g, uint64_t id);

/* gs_fsm_barrier on the group's state machine. */
int gs_group_barrier(struct gs_group *g, void (*cb)(void *data, int status), void *data);

/* Membership reconciliation (docs/gridsync-cluster.md, "Join and
 * leave"). Set the replica set the group should converge to (copied; n 0
 * clears it). While this node leads, a timer moves the Raft configuration
 * towards it one single-server change at a time (Raft thesis 4.1):
 * raft_add a missing member (as spare), raft_assign it voter (libraft
 * catches it up first, so it votes only with the log), raft_remove a
 * member not wanted (never the leader itself: leadership first returns to
 * the preferred node, which is always wanted). Returns 0, CORE_EINVAL (too
 * many) or CORE_ENOMEM. */
int gs_group_set_desired(struct gs_group *g, const struct gs_raft_peer *peers, unsigned n);

/* True when this node leads the group, no change is running and the
 * configuration is exactly the desired set, all voters. */
bool gs_group_converged(struct gs_group *g);

/* Stop (hold true) or resume taking snapshots. A slot migration keeps
 * state outside the store (which slots are blocked or gone), which a
 * snapshot would not carry: while it runs, members that fall behind catch
 * up from the log, which then still holds the migration's entries. */
void gs_group_hold_snapshots(struct gs_group *g, bool hold);

/* Close like gs_group_close, then delete the group's data directory (a
 * node that left the group must not come back with its old log). */
void gs_group_close_erase(struct gs_group *g, void (*cb)(void *data), void *data);

/* Raft facts for CLUSTER INFO / INFO: term, commit and applied index. */
void gs_group_raft_info(struct gs_group *g, uint64_t *term, uint64_t *commit, uint64_t *applied);

/* ---- libraft's codes ---------------------------------------------------- */

/* libraft's codes to ours, the one place they are converted (raft_glue.c,
 * raft_group.c): out of memory and "not the leader (any more)" mean the
 * same everywhere; any other failure means what the caller says
 * (`otherwise`), because the same RAFT_* code says different things from
 * raft_apply and raft_start. 0 stays 0. */
int gs_from_raft(int rv, int otherwise);

#endif
