/* Glob matching (see glob.h). */
#include "gridsync/commands/glob.h"

#include <ctype.h>

static int fold(int c, bool nocase)
{
    return nocase ? tolower(c) : c;
}

/* Match one character class starting at pat[*pi] == '['; advances *pi past
 * the closing ']' (or to the end, as Redis treats an unclosed class). */
static bool match_class(const char *pat, size_t plen, size_t *pi, unsigned char c, bool nocase)
{
    size_t i = *pi + 1;
    bool neg = false, hit = false;
    if (i < plen && pat[i] == '^') {
        neg = true;
        i++;
    }
    while (i < plen && pat[i] != ']') {
        if (pat[i] == '\\' && i + 1 < plen) {
            i++;
            if (fold((unsigned char)pat[i], nocase) == fold(c, nocase))
                hit = true;
            i++;
        } else if (i + 2 < plen && pat[i + 1] == '-' && pat[i + 2] != ']') {
            int lo = fold((unsigned char)pat[i], nocase),
                hi = fold((unsigned char)pat[i + 2], nocase);
            if (lo > hi) {
                int t = lo;
                lo = hi;
                hi = t;
            }
            int x = fold(c, nocase);
            if (x >= lo && x <= hi)
                hit = true;
            i += 3;
        } else {
            if (fold((unsigned char)pat[i], nocase) == fold(c, nocase))
                hit = true;
            i++;
        }
    }
    *pi = i < plen ? i + 1 : i;
    return neg ? !hit : hit;
}

bool gs_glob_match(const char *pat, size_t plen, const char *str, size_t slen, bool nocase)
{
    size_t p = 0, s = 0;
    size_t star_p = (size_t)-1, star_s = 0;
    while (s < slen) {
        if (p < plen && pat[p] == '*') {
            while (p < plen && pat[p] == '*')
                p++;
            if (p == plen)
                return true;
            star_p = p;
            star_s = s;
            continue;
        }
        if (p < plen) {
            unsigned char c = (unsigned char)str[s];
            bool ok;
            size_t np = p;
            if (pat[p] == '?') {
                ok = true;
                np = p + 1;
            } else if (pat[p] == '[') {
                ok = match_class(pat, plen, &np, c, nocase);
            } else if (pat[p] == '\\' && p + 1 < plen) {
                ok = fold((unsigned char)pat[p + 1], nocase) == fold(c, nocase);
                np = p + 2;
            } else {
                ok = fold((unsigned char)pat[p], nocase) == fold(c, nocase);
                np = p + 1;
            }
            if (ok) {
                p = np;
                s++;
                continue;
            }
        }
        if (star_p == (size_t)-1)
            return false;
        /* Let the last '*' swallow one more character and retry. */
        p = star_p;
        s = ++star_s;
    }
    while (p < plen && pat[p] == '*')
        p++;
    return p == plen;
}
