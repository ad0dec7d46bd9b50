/* Glob matching (see glob.h). */
#include "gridsync/commands/glob.h"

#include <ctype.h>

static int fold(int c, bool nocase)
{
    return nocase ? tolower(c) : c;
}

/* The pattern byte at i, or 0 past the end: Redis's patterns are NUL
 * terminated sds strings and stringmatchlen peeks at that terminator. */
static unsigned char at(const char *pat, size_t plen, size_t i)
{
    return i < plen ? (unsigned char)pat[i] : 0;
}

/* Match one character class starting at pat[*pi] == '['; leaves *pi on
 * the closing ']' or, for an unclosed class, on the last pattern byte.
 * A port of the '[' case of Redis's stringmatchlen, quirks included: a
 * range's end may be ']' or '-' when three bytes remain (`[1-]`, `[--]`),
 * an escaped byte is compared without case folding, and a range's bounds
 * are swapped before they are folded. */
static bool match_class(const char *pat, size_t plen, size_t *pi, unsigned char c, bool nocase)
{
    size_t i = *pi + 1;
    bool neg = at(pat, plen, i) == '^', hit = false;
    if (neg)
        i++;
    for (;;) {
        size_t left = i < plen ? plen - i : 0;
        if (at(pat, plen, i) == '\\' && left >= 2) {
            i++;
            if ((unsigned char)pat[i] == c)
                hit = true;
        } else if (at(pat, plen, i) == ']') {
            break;
        } else if (left == 0) {
            i--;
            break;
        } else if (left >= 3 && pat[i + 1] == '-') {
            int lo = (unsigned char)pat[i], hi = (unsigned char)pat[i + 2], x = c;
            if (lo > hi) {
                int t = lo;
                lo = hi;
                hi = t;
            }
            if (nocase) {
                lo = tolower(lo);
                hi = tolower(hi);
                x = tolower(x);
            }
            i += 2;
            if (x >= lo && x <= hi)
                hit = true;
        } else if (fold((unsigned char)pat[i], nocase) == fold(c, nocase)) {
            hit = true;
        }
        i++;
    }
    *pi = i;
    return neg ? !hit : hit;
}

bool gs_glob_match(const char *pat, size_t plen, const char *str, size_t slen, bool nocase)
{
    size_t p = 0, s = 0;
    size_t star_p = (size_t)-1, star_s = 0;
    /* stringmatchlen never matches an empty string against a non-empty
     * pattern, not even "*" (KEYS and SCAN special-case a lone "*"). */
    if (slen == 0)
        return plen == 0;
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
                np++;
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
