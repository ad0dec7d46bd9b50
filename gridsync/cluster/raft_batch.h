/*
 * The bytes GridSync writes into Raft: log entries (batches of write
 * commands) and snapshots (a dump of one shard's store). Both cross the
 * network and the disk, so decoding validates every length and never
 * trusts the input.
 *
 * Log entry (all integers little-endian):
 *
 *   u32 magic "GSB1"   u64 origin raft id   u64 origin incarnation
 *   u64 origin seq     i64 now_ms           u32 ncmds
 *   ncmds x ( u32 argc, argc x ( u32 len, len bytes ) )
 *   0..7 zero bytes of padding
 *
 * The proposer pads an entry to a multiple of 8 bytes: libraft 0.15's uv
 * segment loader places the entries of a batch read back from disk at
 * 8-byte boundaries, so an unpadded entry comes back shifted after a
 * restart (seen here; the fixture's in-memory log does not show it).
 *
 * The origin triple lets the proposing node recognise its own entry when
 * it is applied, even after it lost leadership (see raft_glue.h, "limbo").
 * now_ms is the proposer's clock when the batch was cut: every replica
 * applies relative expiries (SET ... EX) against the same time, so they
 * stay identical.
 *
 * Snapshot:
 *
 *   u32 magic "GSS1"   u64 count
 *   count x ( u32 klen, u32 vlen, i64 expire_ms (-1 none), key, value )
 */
#ifndef GS_RAFT_BATCH_H
#define GS_RAFT_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

#define GS_BATCH_MAGIC    0x31425347u /* "GSB1" */
#define GS_SNAPSHOT_MAGIC 0x31535347u /* "GSS1" */
#define GS_BATCH_HEADER   40u         /* bytes before the first command */
#define GS_BATCH_MAX_ARGS 1048576u    /* per command, as Redis's default */

/* Entries and snapshots are built in a struct core_buf (core/buf.h): owned
 * by whoever holds it, zero-initialised, released with core_buf_free. The
 * begin functions reset it (clearing an earlier out-of-memory mark). */

struct gs_batch_header {
    uint64_t origin_id;
    uint64_t incarnation;
    uint64_t seq;
    int64_t now_ms;
    uint32_t ncmds;
};

/* Start a batch in b (cleared first): writes the header with ncmds 0.
 * Returns 0 or CORE_ENOMEM. */
int gs_batch_begin(struct core_buf *b, const struct gs_batch_header *h);

/* Rewrite the header of a begun batch with h (its ncmds is ignored: the
 * count of commands added is kept). */
void gs_batch_stamp(struct core_buf *b, const struct gs_batch_header *h);

/* Append one command to a begun batch and bump its ncmds. Returns 0,
 * CORE_EINVAL (argc 0 or above GS_BATCH_MAX_ARGS, an argument over 4 GB)
 * or CORE_ENOMEM; on error the batch is unchanged. */
int gs_batch_add(struct core_buf *b, unsigned argc, const char *const *argv, const size_t *argvlen);

/* Commands in a batch being built. */
uint32_t gs_batch_count(const struct core_buf *b);

/* Decoding. gs_batch_parse checks the header and the framing of every
 * command (so that a later walk cannot fail half-way) and returns 0 or
 * CORE_EPROTO. The reader then yields the commands one by one: argv and
 * argvlen point into buf and into arrays the reader grows (owned by the
 * reader; valid until the next call). */
struct gs_batch_reader {
    const char *p, *end;
    uint32_t left;
    const char **argv;
    size_t *argvlen;
    size_t cap;
};

int gs_batch_parse(const void *buf, size_t len, struct gs_batch_header *h,
                   struct gs_batch_reader *rd);

/* Next command: 1 and argc/argv/argvlen set, 0 at the end, or CORE_ENOMEM
 * (the reader's arrays could not grow). Only call after gs_batch_parse
 * succeeded on the same buffer. */
int gs_batch_next(struct gs_batch_reader *rd, unsigned *argc, const char *const **argv,
                  const size_t **argvlen);

void gs_batch_reader_free(struct gs_batch_reader *rd);

/* Snapshot encoding: begin, then one call per entry, then finish (which
 * writes the count into the header). An entry is a key, its expiry and its
 * value: type GS_TYPE_STRING (0) with the string's bytes, or a collection
 * type (gridsync/types/value.h) with gs_obj_encode's bytes. The type
 * rides in the top 3 bits of the record's key length (keys are below
 * 512 MB), so snapshots of strings only are read as before. */
int gs_snapshot_begin(struct core_buf *b);

/* A record of this type is not a key: its value is the state machine's
 * own state besides the store (gs_fsm_config.state_encode), at most one
 * per snapshot, with an empty key. */
#define GS_SNAPSHOT_STATE 7

int gs_snapshot_add(struct core_buf *b, int type, const void *key, size_t klen, const void *val,
                    size_t vlen, int64_t expire_ms);
void gs_snapshot_finish(struct core_buf *b, uint64_t count);

/* Decode a snapshot, calling fn for each entry (pointers into buf, valid
 * during the call). The whole buffer is validated before fn is first
 * called, so a corrupt snapshot changes nothing. fn returns 0 to go on or a
 * negative code to stop with that code. Returns 0, CORE_EPROTO or fn's
 * code. */
typedef int (*gs_snapshot_entry_fn)(void *arg, int type, const char *key, size_t klen,
                                    const char *val, size_t vlen, int64_t expire_ms);
int gs_snapshot_parse(const void *buf, size_t len, gs_snapshot_entry_fn fn, void *arg);

/* The handshake that opens a connection to a node's shared Raft port
 * (gs_raft_mux, raft_glue.h): it names the group the connection is for,
 * then the sender's raft id and address, as libraft's own handshake does.
 *
 *   u32 magic "GSRM"   u32 group   u64 raft id   u32 address length (1..255)
 *   address bytes
 */
#define GS_MUX_MAGIC    0x4d525347u /* "GSRM" */
#define GS_MUX_HEADER   20u
#define GS_MUX_ADDR_MAX 255u
#define GS_MUX_MAX      (GS_MUX_HEADER + GS_MUX_ADDR_MAX)

/* Write the handshake into out (at least GS_MUX_MAX bytes). Returns its
 * length, or 0 if the address is empty or longer than GS_MUX_ADDR_MAX. */
size_t gs_mux_handshake_encode(char *out, uint32_t group, uint64_t id, const char *address);

/* Parse a handshake from the len bytes received so far. Returns 0 with
 * the fields set (address points into buf, not NUL-terminated; *need is
 * the handshake's length), CORE_EINCOMPLETE with *need the total number
 * of bytes to have before calling again (never more than GS_MUX_MAX), or
 * CORE_EPROTO. */
int gs_mux_handshake_parse(const void *buf, size_t len, uint32_t *group, uint64_t *id,
                           const char **address, size_t *addrlen, size_t *need);

/* A leadership hint: the UDP datagram a node sends, from its Raft port to
 * every other node's, naming the groups it leads (leader_hints.c), so that
 * a node outside a group redirects clients to its current leader.
 *
 *   u32 magic "GSLH"   u64 sender raft id   u32 n (0..GS_HINT_MAX)
 *   n x ( u32 group number on Raft ports, u64 term )
 *
 * The length must be exactly that; n may be 0 (a "still here").
 */
#define GS_HINT_MAGIC  0x484c5347u /* "GSLH" */
#define GS_HINT_HEADER 16u
#define GS_HINT_MAX    64u
#define GS_HINT_BYTES  (GS_HINT_HEADER + GS_HINT_MAX * 12u)

struct gs_hint {
    uint64_t sender;
    uint32_t n;
    uint32_t group[GS_HINT_MAX];
    uint64_t term[GS_HINT_MAX];
};

/* Write h into out (at least GS_HINT_BYTES). Returns the length, or 0 if
 * h->n > GS_HINT_MAX. */
size_t gs_hint_encode(char *out, const struct gs_hint *h);

/* Parse a datagram of len bytes into *h. Returns 0 or CORE_EPROTO. */
int gs_hint_parse(const void *buf, size_t len, struct gs_hint *h);

/* A forwarded PUBLISH: the datagram a node sends on the same socket to
 * every other node, so that subscribers anywhere in the cluster get a
 * message published on any node (leader_hints.c), as Redis Cluster's bus
 * carries PUBLISH; at most once (a lost datagram is a lost message).
 *
 *   u32 magic "GSPM"   u64 sender raft id   u32 channel length
 *   u32 message length   channel bytes   message bytes
 *
 * The length must be exactly that, and at most GS_PUB_BYTES (one UDP
 * datagram over IPv4).
 */
#define GS_PUB_MAGIC  0x4d505347u /* "GSPM" */
#define GS_PUB_HEADER 20u
#define GS_PUB_BYTES  65507u

struct gs_pub {
    uint64_t sender;
    const char *channel, *message; /* into the parsed buffer */
    size_t chlen, msglen;
};

/* Write a datagram into out (at least GS_PUB_BYTES). Returns its length,
 * or 0 when the channel and message do not fit in one. */
size_t gs_pub_encode(char *out, uint64_t sender, const char *channel, size_t chlen,
                     const char *message, size_t msglen);

/* Parse a datagram of len bytes into *p (pointers into buf). Returns 0 or
 * CORE_EPROTO. */
int gs_pub_parse(const void *buf, size_t len, struct gs_pub *p);

#endif
