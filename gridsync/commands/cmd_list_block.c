/*
 * The blocking list commands, following Redis 7.0's t_list.c
 * (blockingPopGenericCommand, blmoveGenericCommand, lmpopGenericCommand)
 * and blocked.c (serveClientBlockedOnList): each first tries its
 * non-blocking form (gs_list_pop / gs_list_move, cmd_list.h) and blocks
 * through client/blocking.h when every key is missing. Argument errors
 * come in Redis's order: BLMPOP checks numkeys, the side and COUNT before
 * the timeout, BLMOVE the sides before it.
 *
 * Replies: served, as LPOP/RPOP with the key ([key, element]), LMPOP
 * ([key, [elements]]) or LMOVE (the element); on a timeout, a null array
 * for all of them (BLMOVE too, as Redis 7.0); when the client may not
 * block (inside MULTI), a null array, but a null bulk for BLMOVE and
 * BRPOPLPUSH (Redis's blmoveGenericCommand).
 */
#include "gridsync/client/blocking.h"
#include "gridsync/commands/cmd_list.h"
#include "gridsync/commands/commands.h"
#include "gridsync/types/value.h"

#include <stdbool.h>

/* Block c on argv[first .. first + n) for a list, or reply OOM. */
static void block_on(struct gs_client *c, size_t argc, struct gs_arg *argv, size_t first, size_t n,
                     int64_t deadline, gs_block_serve_fn *serve)
{
    struct gs_block_spec spec = {GS_TYPE_LIST, first, n, deadline, serve, false};
    if (gs_block(c, argc, argv, &spec) != 0)
        gs_error_oom(c);
}

/* ---------------------------------------------------------- BLPOP BRPOP */

static int serve_pop(struct gs_client *c, size_t argc, struct gs_arg *argv, const char *key,
                     size_t klen)
{
    (void)argc;
    struct gs_arg k = {key, klen};
    bool head = gs_arg_is(&argv[0], "blpop");
    return gs_list_pop(c, &k, head, -1, true) != 0 ? GS_BLOCK_SERVED : GS_BLOCK_KEEP;
}

static void blocking_pop(struct gs_client *c, size_t argc, struct gs_arg *argv, bool head)
{
    int64_t deadline;
    if (!gs_block_parse_timeout(c, &argv[argc - 1], &deadline))
        return;
    for (size_t j = 1; j < argc - 1; j++)
        if (gs_list_pop(c, &argv[j], head, -1, true) != 0)
            return; /* popped, or WRONGTYPE */
    if (gs_block_denied(c)) {
        gs_reply_null_array(&c->w);
        return;
    }
    block_on(c, argc, argv, 1, argc - 2, deadline, serve_pop);
}

void gs_cmd_blpop(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    blocking_pop(c, argc, argv, true);
}

void gs_cmd_brpop(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    blocking_pop(c, argc, argv, false);
}

/* --------------------------------------------------------------- BLMPOP */

/* BLMPOP timeout numkeys key... LEFT|RIGHT [COUNT n] */
static int serve_mpop(struct gs_client *c, size_t argc, struct gs_arg *argv, const char *key,
                      size_t klen)
{
    int64_t numkeys, count;
    bool head;
    /* Checked when the command blocked: this cannot fail (or reply). */
    if (!gs_list_parse_mpop(c, argc, argv, 2, &numkeys, &head, &count))
        return GS_BLOCK_SERVED;
    struct gs_arg k = {key, klen};
    return gs_list_pop(c, &k, head, count, true) != 0 ? GS_BLOCK_SERVED : GS_BLOCK_KEEP;
}

void gs_cmd_blmpop(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    int64_t numkeys, count, deadline;
    bool head;
    if (!gs_list_parse_mpop(c, argc, argv, 2, &numkeys, &head, &count) ||
        !gs_block_parse_timeout(c, &argv[1], &deadline))
        return;
    for (int64_t i = 0; i < numkeys; i++)
        if (gs_list_pop(c, &argv[3 + i], head, count, true) != 0)
            return;
    if (gs_block_denied(c)) {
        gs_reply_null_array(&c->w);
        return;
    }
    block_on(c, argc, argv, 3, (size_t)numkeys, deadline, serve_mpop);
}

/* ------------------------------------------------- BLMOVE BRPOPLPUSH */

static bool side_of(const struct gs_arg *a, bool *head)
{
    if (gs_arg_is(a, "left"))
        *head = true;
    else if (gs_arg_is(a, "right"))
        *head = false;
    else
        return false;
    return true;
}

/* The sides of a blocked BLMOVE or BRPOPLPUSH (checked when it blocked). */
static void sides_of(size_t argc, struct gs_arg *argv, bool *from, bool *to)
{
    *from = false;
    *to = true; /* BRPOPLPUSH: RIGHT LEFT */
    if (argc == 6) {
        side_of(&argv[3], from);
        side_of(&argv[4], to);
    }
}

/* Serving BLMOVE: Redis pops only when the destination is not of another
 * type, else answers WRONGTYPE and unblocks the client. */
static int serve_move(struct gs_client *c, size_t argc, struct gs_arg *argv, const char *key,
                      size_t klen)
{
    bool from, to;
    sides_of(argc, argv, &from, &to);
    struct gs_arg src = {key, klen};
    return gs_list_move(c, &src, &argv[2], from, to) != 0 ? GS_BLOCK_SERVED : GS_BLOCK_KEEP;
}

static void blocking_move(struct gs_client *c, size_t argc, struct gs_arg *argv, bool from, bool to,
                          const struct gs_arg *timeout)
{
    int64_t deadline;
    if (!gs_block_parse_timeout(c, timeout, &deadline))
        return;
    if (gs_list_move(c, &argv[1], &argv[2], from, to) != 0)
        return; /* moved, or WRONGTYPE */
    if (gs_block_denied(c)) {
        gs_reply_null(&c->w);
        return;
    }
    block_on(c, argc, argv, 1, 1, deadline, serve_move);
}

void gs_cmd_blmove(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    bool from, to;
    if (!side_of(&argv[3], &from) || !side_of(&argv[4], &to)) {
        gs_error_syntax(c);
        return;
    }
    blocking_move(c, argc, argv, from, to, &argv[5]);
}

void gs_cmd_brpoplpush(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    blocking_move(c, argc, argv, false, true, &argv[3]);
}
