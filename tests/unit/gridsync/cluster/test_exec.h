/* Test support for the Raft glue: a tiny deterministic executor over the
 * store (SET k v [EX s], INCR k, DEL k; anything else is an error reply),
 * standing in for the server's command table. */
#ifndef GS_TEST_EXEC_H
#define GS_TEST_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "gridsync/cluster/raft_batch.h"

struct gs_store;

void test_exec(void *ctx, struct gs_store *st, int64_t now_ms, unsigned argc,
               const char *const *argv, const size_t *len, struct core_buf *out);

#endif
