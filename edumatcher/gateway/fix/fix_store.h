/*
 * The persistent state of one FIX session (docs/fix.md, "Restart"): the
 * next inbound and outbound MsgSeqNum, and every outbound message by its
 * sequence number, so that a restarted gateway resumes the session and
 * answers a ResendRequest(2) for messages sent before the restart.
 *
 * Two files per session in the store directory, named after the two
 * CompIDs (`<sender>-<target>.seqs`, `.msgs`):
 *   .seqs  one line "<next_in> <next_out>\n" of fixed width, rewritten in
 *          place with one pwrite (never a partial line: the width is
 *          fixed);
 *   .msgs  records [u64 seq][u32 len][len bytes], appended with one
 *          pwritev each. Appending does not rewrite .seqs: on open, the
 *          next outbound number is past the last stored message.
 * Data is written with write(2) and not fsync'ed: it survives the
 * gateway process, not the machine.
 *
 * Invariant: the in-memory index holds, for every stored seq, the file
 * offset of its record; sequence numbers are appended in increasing order
 * (a reset truncates both files).
 */
#ifndef EM_FIX_STORE_H
#define EM_FIX_STORE_H

#include <stddef.h>
#include <stdint.h>

struct em_fix_store {
    int seqs_fd, msgs_fd;
    uint64_t next_in, next_out;
    uint64_t *off; /* off[seq - first]: record offset, UINT64_MAX: none */
    uint64_t first, count, cap;
    uint64_t msgs_end;
};

/* Open (or create) the store of the session sender -> target in dir.
 * sender and target: 1–16 of [A-Za-z0-9_]. A new store starts at 1 / 1.
 * Returns 0, CORE_EINVAL (bad ids), CORE_EIO, CORE_ENOMEM. On failure
 * nothing is left open. */
int em_fix_store_open(struct em_fix_store *st, const char *dir, const char *sender,
                      const char *target);

/* Record the next expected inbound and next outbound sequence numbers.
 * Returns 0 or CORE_EIO. */
int em_fix_store_set_seqs(struct em_fix_store *st, uint64_t next_in, uint64_t next_out);

/* Append the outbound message seq (msg, len bytes, copied) and make
 * next_out seq + 1. seq must be greater than every stored one. Returns 0,
 * CORE_EINVAL, CORE_EIO, CORE_ENOMEM. */
int em_fix_store_append(struct em_fix_store *st, uint64_t seq, const char *msg, size_t len);

/* Copy the stored message seq into buf (cap bytes). Returns 0 with *len
 * set, CORE_ENOTFOUND, CORE_ETOOBIG (cap too small), CORE_EIO. */
int em_fix_store_get(struct em_fix_store *st, uint64_t seq, char *buf, size_t cap, size_t *len);

/* Forget everything (ResetSeqNumFlag): both sequence numbers back to 1,
 * no stored message. Returns 0 or CORE_EIO. */
int em_fix_store_reset(struct em_fix_store *st);

/* Close the files and free the index. Safe on a closed store. */
void em_fix_store_close(struct em_fix_store *st);

#endif
