/*
 * libFuzzer target for the ALF text parser and the replay line handling.
 *
 * Each input is split into lines. Every line is parsed as an ALF message:
 * what parses must format back to a line that parses to the same message,
 * and survive the binary frame codec unchanged; SYMBOLS queries (the
 * gateway's own) give a valid symbol or a SYNTAX / BAD_VALUE code. Then the lines are fed,
 * as replay lines, to a fresh engine (with one symbol defined), whose
 * invariants are checked at the end of the input (checking after every
 * line, as the unit tests do, made runs several times slower).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "edumatcher/gateway/alf/alf.h"
#include "edumatcher/engine/engine.h"
#include "edumatcher/engine/msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void sink(void *ctx, uint16_t gw, const struct em_msg *ev)
{
    char buf[EM_ALF_FORMAT_MAX];
    (void)em_alf_format(ev, buf);
}

static void check_round_trip(const char *s, size_t n)
{
    /* the gateway's SYMBOLS query: a name it returns is a valid symbol */
    char sym[EM_SYM_MAX + 1];
    int q = em_alf_parse_symbols(s, n, sym);
    if (q == 0 && sym[0] && !em_valid_sym(sym, strlen(sym)))
        abort();
    if (q > 0 && q != EM_REJ_SYNTAX && q != EM_REJ_BAD_VALUE)
        abort();
    struct em_msg m, m2, d;
    if (em_alf_parse(s, n, &m) != 0)
        return;
    char a[EM_ALF_FORMAT_MAX], b[EM_ALF_FORMAT_MAX];
    size_t na = em_alf_format(&m, a);
    if (em_alf_parse(a, na, &m2) != 0)
        abort();
    size_t nb = em_alf_format(&m2, b);
    if (na != nb || memcmp(a, b, na) != 0)
        abort();
    uint8_t f[EM_FRAME_MAX];
    int fl = em_frame_encode(&m, f, sizeof f);
    if (fl <= 0 || em_frame_decode(f, (size_t)fl, &d) != fl)
        abort();
    nb = em_alf_format(&d, b);
    if (na != nb || memcmp(a, b, na) != 0)
        abort();
}

static void replay_line(struct em_engine *e, const char *s, size_t n)
{
    const char *sp = memchr(s, ' ', n);
    if (!sp)
        return;
    int gw = em_engine_gateway(e, s, (size_t)(sp - s));
    if (gw < 0)
        return;
    const char *msg = sp + 1;
    size_t mlen = n - (size_t)(msg - s);
    if (mlen > EM_ALF_LINE_MAX) {
        em_engine_reject(e, (uint16_t)gw, NULL, EM_REJ_LINE_TOO_LONG);
        return;
    }
    struct em_msg m;
    int code = em_alf_parse(msg, mlen, &m);
    int auth = code == EM_REJ_SYNTAX ? 0 : em_engine_authorize(e, (uint16_t)gw, m.kind);
    if (auth)
        code = auth;
    if (code)
        em_engine_reject(e, (uint16_t)gw, &m, code);
    else if (em_engine_submit(e, (uint16_t)gw, &m) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    /* small pools: growth is exercised, and each run stays cheap */
    struct em_engine_config cfg = {.sink = sink, .orders_hint = 4, .levels_hint = 4};
    struct em_engine *e = em_engine_new(&cfg);
    if (!e)
        return 0;
    static const char setup[] = "OPS SYMBOL sym=ABC tick=0.01 ref=10.00 band=50 cb_band=10";
    replay_line(e, setup, sizeof setup - 1);
    size_t start = 0;
    for (size_t i = 0; i <= size; i++) {
        if (i < size && s[i] != '\n')
            continue;
        size_t n = i - start;
        if (n && s[start + n - 1] == '\r')
            n--;
        check_round_trip(s + start, n);
        const char *sp = memchr(s + start, ' ', n);
        if (sp)
            check_round_trip(sp + 1, n - (size_t)(sp + 1 - (s + start)));
        replay_line(e, s + start, n);
        start = i + 1;
    }
    const char *what;
    if (em_engine_check(e, &what) != 0)
        abort();
    em_engine_free(e);
    return 0;
}
