/*
 * A fork()ed child that only computes and writes (a snapshot: the engine's
 * books, a shard's store) shares its parent's descriptors: listening
 * sockets, connections, locks. An engine or node restarted after a kill -9
 * while such a child still runs could not bind its ports. The child
 * closes them first.
 */
#ifndef CORE_CHILD_H
#define CORE_CHILD_H

/* Close every descriptor from 3 up but `keep` (< 0: none). stdin, stdout
 * and stderr stay (logging). Only descriptors: the child's memory is its
 * parent's copy, untouched. Call it right after fork(), in the child. */
void core_child_close_fds(int keep);

#endif
