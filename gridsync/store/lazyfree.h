/*
 * Lazy free (UNLINK of a large collection): a background thread frees the
 * value's blocks, so the loop does not stop for a big free, as Redis's
 * lazyfree.c. One thread per store, started on the first use.
 *
 * Ownership: gs_lazyfree_push takes the value's blocks when it returns
 * true; the caller takes them off its memory count. Everything pushed is
 * freed by the time gs_lazyfree_stop returns.
 */
#ifndef GS_LAZYFREE_H
#define GS_LAZYFREE_H

#include <stdbool.h>
#include <stdint.h>

struct gs_obj;
struct gs_lazyfree;

/* Queue o for the thread, starting it (and *lf) when *lf is NULL. false
 * when that is not possible (no memory, no thread): the caller frees o
 * itself and *lf is unchanged. */
bool gs_lazyfree_push(struct gs_lazyfree **lf, const struct gs_obj *o);

/* Values queued and not yet freed (0 for a NULL lf). */
uint64_t gs_lazyfree_pending(struct gs_lazyfree *lf);

/* Free everything queued, stop the thread and set *lf to NULL (no-op when
 * *lf is NULL). */
void gs_lazyfree_stop(struct gs_lazyfree **lf);

#endif
