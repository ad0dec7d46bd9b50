/* See test_exec.h. */
#include "test_exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gridsync/store/store.h"

static int arg_is(const char *a, size_t n, const char *s)
{
    return n == strlen(s) && strncasecmp(a, s, n) == 0;
}

/* Arguments are not NUL-terminated: copy before parsing a number. */
static long long arg_ll(const char *a, size_t n)
{
    char tmp[32] = {0};
    memcpy(tmp, a, n < sizeof(tmp) - 1 ? n : sizeof(tmp) - 1);
    return strtoll(tmp, NULL, 10);
}

static void reply(struct core_buf *out, const char *s)
{
    core_buf_append(out, s, strlen(s));
}

void test_exec(void *ctx, struct gs_store *st, int64_t now_ms, unsigned argc,
               const char *const *argv, const size_t *len, struct core_buf *out)
{
    char buf[64];
    if (argc >= 3 && arg_is(argv[0], len[0], "SET")) {
        int64_t exp = -1;
        if (argc == 5 && arg_is(argv[3], len[3], "EX"))
            exp = now_ms + 1000 * arg_ll(argv[4], len[4]);
        gs_store_set(st, argv[1], len[1], argv[2], len[2], exp, NULL);
        reply(out, "+OK\r\n");
    } else if (argc == 2 && arg_is(argv[0], len[0], "INCR")) {
        struct gs_entry *e = gs_store_lookup(st, argv[1], len[1], now_ms, 0);
        long long v = 0;
        if (e) {
            size_t vl;
            const char *p = gs_entry_value(e, &vl);
            v = arg_ll(p, vl);
        }
        v++;
        int n = snprintf(buf, sizeof(buf), "%lld", v);
        gs_store_set(st, argv[1], len[1], buf, (size_t)n, -1, NULL);
        snprintf(buf, sizeof(buf), ":%lld\r\n", v);
        reply(out, buf);
    } else if (argc == 2 && arg_is(argv[0], len[0], "DEL")) {
        reply(out, gs_store_delete(st, argv[1], len[1], now_ms) ? ":1\r\n" : ":0\r\n");
    } else {
        reply(out, "-ERR unknown command\r\n");
    }
}
