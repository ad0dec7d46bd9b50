/*
 * Feed one replay line (`<gw> <message>`) to an engine the way
 * edumatcher-replay does (docs/alf.md C): parse, authorize, submit or
 * reject. For tests and benchmarks.
 */
#ifndef EM_DRIVE_H
#define EM_DRIVE_H

#include <string.h>

#include "edumatcher/gateway/alf/alf.h"
#include "edumatcher/engine/engine.h"

static inline int em_drive_line(struct em_engine *e, const char *s, size_t n)
{
    const char *sp = memchr(s, ' ', n);
    if (!sp)
        return 0;
    int gw = em_engine_gateway(e, s, (size_t)(sp - s));
    if (gw < 0)
        return 0;
    const char *msg = sp + 1;
    size_t mlen = n - (size_t)(msg - s);
    struct em_msg m;
    int code = em_alf_parse(msg, mlen, &m);
    int auth = code == EM_REJ_SYNTAX ? 0 : em_engine_authorize(e, (uint16_t)gw, m.kind);
    if (auth)
        code = auth;
    if (code) {
        em_engine_reject(e, (uint16_t)gw, &m, code);
        return 0;
    }
    return em_engine_submit(e, (uint16_t)gw, &m);
}

#endif
