/* libFuzzer target for engine snapshots (edumatcher/engine/engine.h,
 * em_engine_restore): arbitrary bytes must be refused (CORE_EPROTO) or
 * give an engine that passes em_engine_check, snapshots back to exactly
 * the same bytes, and goes on processing messages with every invariant
 * checked (the checked library aborts on a violation). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/byte.h"
#include "core/error.h"
#include "edumatcher/gateway/alf/alf.h"
#include "edumatcher/engine/engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void sink(void *ctx, uint16_t gw, const struct em_msg *ev)
{
    (*(uint64_t *)ctx)++;
}

struct cmp {
    const uint8_t *p;
    size_t left;
    int differs;
};

static int compare(void *ctx, const void *d, size_t len)
{
    struct cmp *c = ctx;
    if (len > c->left || memcmp(c->p, d, len) != 0)
        c->differs = 1;
    else {
        c->p += len;
        c->left -= len;
    }
    return c->differs ? CORE_EPROTO : 0;
}

/* Operator messages that walk every symbol through its phases: uncrosses,
 * stop loops, expiry and timers run on the restored state. */
static void drive(struct em_engine *e, uint16_t ops)
{
    /* head, then the symbol and tail when tail is not NULL */
    static const char *lines[][2] = {{"TICK ms=1000", NULL},
                                     {"PHASE sym=", " phase=PREOPEN"},
                                     {"PHASE sym=", " phase=CONTINUOUS"},
                                     {"HALT sym=", ""},
                                     {"RESUME sym=", ""},
                                     {"TICK ms=100000000", NULL},
                                     {"PHASE sym=", " phase=CLOSED"}};
    /* the symbols of the seed corpus (tests/unit/edumatcher/em_gen.c) */
    static const char *syms[] = {"ABC", "XYZ", "FAR"};
    for (size_t k = 0; k < sizeof lines / sizeof lines[0]; k++)
        for (size_t s = 0; s < sizeof syms / sizeof syms[0]; s++) {
            char line[128];
            int n = lines[k][1]
                        ? snprintf(line, sizeof line, "%s%s%s", lines[k][0], syms[s], lines[k][1])
                        : snprintf(line, sizeof line, "%s", lines[k][0]);
            struct em_msg m;
            if (em_alf_parse(line, (size_t)n, &m) == 0)
                em_engine_submit(e, ops, &m);
            if (!lines[k][1])
                break;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t events = 0;
    struct em_engine_config cfg = {.sink = sink, .sink_ctx = &events};
    struct em_engine *e = em_engine_new(&cfg);
    if (!e)
        return 0;
    int rc = em_engine_restore(e, data, size);
    if (rc != 0 && rc != CORE_EPROTO && rc != CORE_ENOMEM)
        abort();
    if (rc == 0) {
        const char *what = "";
        if (em_engine_check(e, &what))
            abort();
        if (events)
            abort(); /* a restore emits nothing */
        /* Accepted bytes of the current version are the canonical form of
         * their state; an older version is restored but written anew as
         * the current one, so only the current version compares. */
        uint32_t version = size >= 12 ? core_get_le32(data + 8) : 0;
        struct cmp c = {data, size, 0};
        if (version == EM_SNAPSHOT_VERSION &&
            (em_engine_snapshot(e, compare, &c) != 0 || c.differs || c.left))
            abort();
        drive(e, 1);
    }
    em_engine_free(e);
    return 0;
}
