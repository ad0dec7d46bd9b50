/* Random replay lines for tests and benchmarks; see em_gen.h. */
#include "em_gen.h"

#include <stdio.h>
#include <string.h>

static uint64_t rnd(struct em_gen *g)
{
    /* xorshift64*: small, fast, the same everywhere */
    uint64_t x = g->state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    g->state = x;
    return x * 2685821657736338717ull;
}

static unsigned pick(struct em_gen *g, unsigned n)
{
    return (unsigned)((rnd(g) >> 33) % n);
}

void em_gen_init(struct em_gen *g, uint64_t seed)
{
    g->state = seed * 0x9e3779b97f4a7c15ull + 1;
    g->n = 0;
}

int em_gen_setup(char lines[][128], int max)
{
    static const char *const setup[] = {
        "OPS SYMBOL sym=ABC tick=0.01 ref=100.00 band=20 cb_band=5 cb_ms=2000",
        "OPS SYMBOL sym=XYZ tick=1 lot=10",
        "OPS SYMBOL sym=FAR tick=0.01",
    };
    int n = 0;
    for (; n < (int)(sizeof setup / sizeof setup[0]) && n < max; n++)
        snprintf(lines[n], 128, "%s", setup[n]);
    return n;
}

static const char *const syms[] = {"ABC", "XYZ", "FAR"};

/* A price string for symbol s near its usual range. */
static void price(struct em_gen *g, unsigned s, char *out)
{
    if (s == 1) {
        sprintf(out, "%u", 90 + pick(g, 21));
        return;
    }
    unsigned ticks = 9970 + pick(g, 61); /* 99.70 … 100.30 */
    if (s == 2 && pick(g, 8) == 0)
        ticks = pick(g, 2) ? 100 + pick(g, 300) : 20000 + pick(g, 9000); /* outside the window */
    sprintf(out, "%u.%02u", ticks / 100, ticks % 100);
}

size_t em_gen_line(struct em_gen *g, char *buf)
{
    g->n++;
    unsigned r = pick(g, 1000), s = pick(g, 3);
    char gw[8], cl[16], px[24], stop[24];
    sprintf(gw, "G%u", pick(g, 6));
    sprintf(cl, "c%u", pick(g, 40));
    unsigned lot = s == 1 ? 10 : 1;
    int n;
    if (r < 450) {
        unsigned qty = (1 + pick(g, 20)) * lot;
        unsigned t = pick(g, 100);
        const char *type = t < 76 ? "LMT" : t < 84 ? "MKT" : t < 92 ? "STP" : "STL";
        unsigned ti = pick(g, 100);
        const char *tif = ti < 55 ? "DAY" : ti < 80 ? "GTC" : ti < 92 ? "IOC" : "FOK";
        char extra[64] = "";
        price(g, s, px);
        price(g, s, stop);
        if (type[0] == 'L' && tif[0] != 'I' && tif[0] != 'F' && qty > lot && pick(g, 6) == 0)
            sprintf(extra + strlen(extra), " peak=%u", lot * (1 + pick(g, qty / lot - 1)));
        if (pick(g, 5) == 0) {
            static const char *const m[] = {"CN", "CO", "CB", "DC"};
            sprintf(extra + strlen(extra), " stp=%s", m[pick(g, 4)]);
        }
        n = sprintf(buf, "%s NEW cl=%s sym=%s side=%s qty=%u type=%s tif=%s", gw, cl, syms[s],
                    pick(g, 2) ? "B" : "S", qty, type, tif);
        if (!strcmp(type, "LMT") || !strcmp(type, "STL"))
            n += sprintf(buf + n, " px=%s", px);
        if (!strcmp(type, "STP") || !strcmp(type, "STL"))
            n += sprintf(buf + n, " stop=%s", stop);
        n += sprintf(buf + n, "%s", extra);
    } else if (r < 650) {
        n = sprintf(buf, "%s CANCEL cl=%s", gw, cl);
    } else if (r < 850) {
        price(g, s, px);
        unsigned k = pick(g, 3);
        n = sprintf(buf, "%s REPLACE cl=%s", gw, cl);
        if (k != 1)
            n += sprintf(buf + n, " qty=%u", (1 + pick(g, 20)) * lot);
        if (k != 0)
            n += sprintf(buf + n, " px=%s", px);
    } else if (r < 870) {
        n = pick(g, 2) ? sprintf(buf, "%s MASSCANCEL", gw)
                       : sprintf(buf, "%s MASSCANCEL sym=%s", gw, syms[s]);
    } else if (r < 880) {
        n = sprintf(buf, "%s %s", gw, pick(g, 2) ? "DISCONNECT" : "LOGOUT");
    } else if (r < 920) {
        static const char *const ph[] = {"CONTINUOUS", "CONTINUOUS", "PREOPEN", "CLOSED"};
        n = sprintf(buf, "OPS PHASE sym=%s phase=%s", syms[s], ph[pick(g, 4)]);
    } else if (r < 935) {
        n = sprintf(buf, "OPS %s sym=%s", pick(g, 2) ? "HALT" : "RESUME", syms[s]);
    } else if (r < 965) {
        n = sprintf(buf, "OPS TICK ms=%u", pick(g, 3000));
    } else if (r < 975) {
        n = sprintf(buf, "%s GATEWAY gw=G%u enabled=%u", pick(g, 4) ? "OPS" : gw, pick(g, 6),
                    pick(g, 4) ? 1u : 0u);
    } else {
        static const char *const junk[] = {
            "NEW cl=x",    "NEW cl=y sym=ABC side=B qty=0 px=1",     "new",    "PING",
            "LOGIN gw=G1", "NEW cl=z sym=ABC side=B qty=1 px=1.001", "CANCEL", "REPLACE cl=c1",
            "FOO=1",       "NEW cl=w sym=NOPE side=S qty=1 px=1"};
        n = sprintf(buf, "%s %s", gw, junk[pick(g, 10)]);
    }
    return (size_t)n;
}
