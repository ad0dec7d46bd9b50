/* libFuzzer target for the clearing's TRADE parser (clearing_book.h): the
 * bus delivers untrusted bytes. A parsed trade is applied, and the
 * zero-sum invariant of the symbol is checked. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "edumatcher/clearing/clearing_book.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct em_clearing book;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    struct em_trade t;
    if (em_trade_parse(buf, size, &t) == 0) {
        em_clearing_init(&book);
        if (em_clearing_apply(&book, &t) != 0)
            abort();
        const struct em_clr_account *b = em_clearing_find(&book, t.buy, t.sym);
        const struct em_clr_account *s = em_clearing_find(&book, t.sell, t.sym);
        if (!b || !s)
            abort();
        if (b != s && (b->position + s->position != 0 || b->cash + s->cash != 0))
            abort();
        char out[64];
        em_clr_format_amount(b->cash, b->dec, out, sizeof out);
    }
    free(buf);
    return 0;
}
