/*
 * The cluster's membership as one node knows it, in a form that survives
 * the node and crosses the network (docs/gridsync-cluster.md,
 * "Membership"): the nodes of the placement being served, the ring's
 * parameter (replicas), the change in progress (a node being added or
 * removed), a version that grows by one at each completed change, and
 * this node's own identity.
 *
 * The same text is the file DIR/cluster-membership (rewritten atomically
 * at each step of a change, so a node restarted in the middle of one
 * resumes it) and the bulk reply of CLUSTER MEMBERSHIP (what a node
 * started with only --cluster-seed learns the cluster from):
 *
 *   gridsync-membership 1
 *   version 4
 *   replicas 3
 *   self 127.0.0.1:7003          (file only: whose data directory this is)
 *   node 127.0.0.1:7000          (one line per node served, in any order)
 *   change add 127.0.0.1:7003    (optional: add|remove NAME)
 *
 * Pure data and I/O helpers: no cluster state, no loop.
 */
#ifndef GS_MEMBERSHIP_H
#define GS_MEMBERSHIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "gridsync/cluster/ring.h"

enum gs_change { GS_CHANGE_NONE = 0, GS_CHANGE_ADD = 1, GS_CHANGE_REMOVE = 2 };

/* About 64 KiB: allocate it, do not put it on the stack. */
struct gs_membership {
    uint64_t version;
    unsigned replicas; /* 1..GS_RING_MAX_REPLICAS */
    unsigned n;        /* nodes of the placement being served, >= 1 */
    char nodes[GS_RING_MAX_NODES][GS_RING_NAME_MAX];
    enum gs_change change;
    char change_node[GS_RING_NAME_MAX]; /* when change != NONE */
    char self[GS_RING_NAME_MAX];        /* "" when not known (a seed's reply) */
};

/* The file's name inside a node's data directory. */
#define GS_MEMBERSHIP_FILE "cluster-membership"

/* Append m's text to out. 0 or CORE_ENOMEM. */
int gs_membership_format(const struct gs_membership *m, struct core_buf *out);

/* Parse text[0..len) into m (overwritten). Strict: the header line, every
 * line a known key, names 1..GS_RING_NAME_MAX-1 printable characters
 * without spaces, no node twice, an added node not already a node, a
 * removed one among them, at least one node. 0 or CORE_EINVAL (m is then
 * unspecified). Names are not resolved here (cluster_peers.c does). */
int gs_membership_parse(struct gs_membership *m, const char *text, size_t len);

/* Write m to DIR/cluster-membership (DIR created if missing) atomically (a temporary file,
 * fsync, rename, fsync of the directory): after a crash the file is the
 * old or the new version, never a mix. 0, or CORE_EIO / CORE_ENOMEM (the
 * old file is still in place; retrying is safe). */
int gs_membership_save(const struct gs_membership *m, const char *dir);

/* Read DIR/cluster-membership into m. 0, CORE_ENOTFOUND when there is no
 * file (a first start), CORE_EIO, or CORE_EINVAL for a file that does not
 * parse (never guessed around: the node refuses to start). */
int gs_membership_load(struct gs_membership *m, const char *dir);

/* Is there a membership file in dir (this node has started before)? */
bool gs_membership_exists(const char *dir);

/* Parse a CLUSTER MEMBERSHIP reply (a RESP bulk string holding the text,
 * or an error) from buf[0..len). 0, CORE_EINCOMPLETE (read more),
 * CORE_EPROTO (not a bulk string: an error reply, e.g. from a node that is
 * not in cluster mode), or CORE_EINVAL (the text does not parse). */
int gs_membership_parse_reply(struct gs_membership *m, const char *buf, size_t len);

/* Ask the node at seed ("host:port", "[v6]:port") for its membership:
 * a blocking exchange of at most timeout_ms, meant for start-up only
 * (before the node's loop runs). 0, or CORE_EINVAL (bad address),
 * CORE_ETIMEOUT, CORE_EIO (cannot connect, connection lost), CORE_EPROTO
 * or CORE_EINVAL as gs_membership_parse_reply; err gets a one-line reason.
 * Retrying is safe (it only reads). */
int gs_membership_fetch(struct gs_membership *m, const char *seed, int timeout_ms, char *err,
                        size_t errlen);

#endif
