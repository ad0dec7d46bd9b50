/*
 * The engine's journal: an append-only log of the binary frames it accepted,
 * plus snapshots that bound replay time.
 *
 * Rule (docs/edumatcher-exchange.md, the journal): every accepted inbound message is
 * appended before its effects are published. The engine appends each
 * message as it handles it, and calls em_journal_flush before it publishes
 * the events of a batch; the flush writes and, per the fsync policy,
 * syncs. A restarted engine calls em_journal_open, which loads the latest
 * snapshot and hands back every record after it, in order.
 *
 * On disk, in one directory:
 *
 *   journal-<first seq, 20 digits>.log   segments
 *   snapshot-<last seq, 20 digits>.snap  engine state after record <seq>
 *
 *   segment  = header record*
 *   header   = "EMJOURNL" u32 version(1) u32 0 u64 first_seq      (24 bytes)
 *   record   = u32 len  u32 crc32c(seq, payload)  u64 seq  payload[len]
 *   snapshot = "EMSNAPSH" u32 version(1) u32 crc32c(seq, payload)
 *              u64 seq  u64 len  payload[len]
 *
 * All integers little-endian. Sequence numbers start at 1 and have no gaps.
 *
 * Invariants:
 *  1. Records are only appended; a segment is never rewritten except that a
 *     torn tail (a last record whose write did not complete) is truncated
 *     on open.
 *  2. A bad record that is not at the tail (more records after it) is
 *     corruption, not a crash artefact: open fails with CORE_EIO rather
 *     than silently dropping acknowledged orders.
 *  3. A snapshot is written to a temporary file, synced and renamed, so a
 *     crash leaves either the old or the new one. After it is durable the
 *     journal starts a new segment and deletes the segments and snapshots
 *     it supersedes.
 *  4. Appends copy into a preallocated batch buffer; no allocation per
 *     record.
 */
#ifndef EM_JOURNAL_H
#define EM_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EM_JOURNAL_VERSION    1
#define EM_JOURNAL_RECORD_MAX (1u << 20) /* larger records are refused */

enum em_fsync_policy {
    EM_FSYNC_ALWAYS,   /* write and fsync on every append */
    EM_FSYNC_BATCH,    /* fsync on every em_journal_flush */
    EM_FSYNC_INTERVAL, /* fsync on a flush when interval_ms have passed */
    EM_FSYNC_NEVER,    /* leave it to the kernel */
};

/* "always", "batch", "interval", "never"; NULL-terminated, for
 * CORE_OPT_ENUM. */
extern const char *const em_fsync_policy_names[];

struct em_journal_opts {
    const char *dir;            /* created if missing */
    enum em_fsync_policy fsync; /* EM_FSYNC_INTERVAL also needs a periodic
                                   em_journal_flush from an idle loop */
    uint64_t fsync_interval_ms; /* EM_FSYNC_INTERVAL */
    size_t batch_bytes;         /* batch buffer (0: 256 KiB) */
};

/* Called for the snapshot found on open (at most once), then for each
 * record after it. data is valid only during the call. A non-zero return
 * stops the replay and em_journal_open returns it. */
typedef int (*em_journal_snapshot_cb)(const void *data, size_t len, uint64_t seq, void *ud);
typedef int (*em_journal_record_cb)(const void *data, size_t len, uint64_t seq, void *ud);

struct em_journal_replay_stats {
    uint64_t snapshot_seq; /* 0: no snapshot */
    uint64_t records;      /* records handed to the record callback */
    uint64_t torn_bytes;   /* truncated from the tail */
};

struct em_journal {
    char dir[200];
    int fd; /* current segment */
    int dir_fd;
    enum em_fsync_policy policy;
    uint64_t interval_ns;
    uint64_t last_sync_ns;
    uint64_t next_seq;   /* of the next append */
    uint64_t synced_seq; /* last record known durable per the policy */
    uint64_t snapshot_seq;
    unsigned char *buf; /* batch buffer */
    size_t len, cap;
    bool dirty; /* written but not synced */
    /* totals since open, for metrics */
    uint64_t records, bytes, writes, syncs;
};

/*
 * Open (creating if needed) the journal in opts->dir and replay it: the
 * latest valid snapshot goes to on_snapshot, then every later record to
 * on_record, in sequence order. A torn tail is truncated. Afterwards the
 * journal is ready for appends. j is caller storage; the journal owns its
 * buffer and file descriptors until em_journal_close. Either callback may
 * be NULL. Returns 0, CORE_ENOMEM, CORE_EIO (unreadable, or corruption
 * before the tail: invariant 2), CORE_EINVAL (bad options) or a callback's
 * non-zero result.
 */
int em_journal_open(struct em_journal *j, const struct em_journal_opts *opts,
                    em_journal_snapshot_cb on_snapshot, em_journal_record_cb on_record, void *ud,
                    struct em_journal_replay_stats *stats);

/*
 * Append one record (copied into the batch buffer) and return its sequence
 * number in *seq (may be NULL). With EM_FSYNC_ALWAYS it is written and
 * synced before return; otherwise it reaches the file at the next
 * em_journal_flush or when the buffer fills. Returns 0, CORE_ETOOBIG
 * (len > EM_JOURNAL_RECORD_MAX) or CORE_EIO.
 */
int em_journal_append(struct em_journal *j, const void *data, size_t len, uint64_t *seq);

/* Write the batch buffer to the file and sync it as the policy says. Call
 * before publishing the effects of the appended records. Returns 0 or
 * CORE_EIO. */
int em_journal_flush(struct em_journal *j);

/*
 * Record a snapshot of the state after the last appended record: flushes
 * and syncs, writes the snapshot durably (invariant 3), starts a new
 * segment and removes the superseded files. data is copied. Returns 0 or
 * CORE_EIO.
 */
int em_journal_snapshot(struct em_journal *j, const void *data, size_t len);

/*
 * The same in three steps, so that the state can be serialized and written
 * elsewhere (a forked child: the engine host) while appends go on:
 *  - begin: flush and sync, *seq = the last record, start a new segment
 *    (later appends go there). CORE_EIO: the journal failed.
 *  - write: the snapshot of the state after record seq, durably (temp
 *    file, sync, rename, sync the directory). Touches no field of j, so a
 *    child process may call it on its copy. CORE_EIO: nothing changed on
 *    disk but perhaps a temp file; retry with a later begin is safe.
 *  - done: after write succeeded, remove the segments and snapshots it
 *    supersedes and set snapshot_seq. Never fails (files it cannot remove
 *    stay, and open skips what the snapshot covers).
 * Until done, a restart simply replays from an older snapshot: a crash
 * between the steps loses nothing.
 */
int em_journal_snapshot_begin(struct em_journal *j, uint64_t *seq);
int em_journal_snapshot_write(const struct em_journal *j, uint64_t seq, const void *data,
                              size_t len);
void em_journal_snapshot_done(struct em_journal *j, uint64_t seq);

/* Flush, sync, and release everything. Also safe after a failed open. */
void em_journal_close(struct em_journal *j);

#endif
