/* Address text and socket addresses (contract in addr.h). */
#include "core/addr.h"

#include "core/error.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int core_addr_split(const char *s, size_t len, char *host, size_t hostlen, int *port)
{
    const char *h, *colon;
    size_t hl;
    if (len > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (!close || close == s + 1 || (size_t)(close - s) + 1 >= len || close[1] != ':')
            return CORE_EINVAL;
        h = s + 1;
        hl = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = NULL;
        for (size_t i = 0; i < len; i++)
            if (s[i] == ':') {
                if (colon)
                    return CORE_EINVAL; /* bare IPv6: ambiguous */
                colon = s + i;
            }
        if (!colon || colon == s)
            return CORE_EINVAL;
        h = s;
        hl = (size_t)(colon - s);
    }
    const char *p = colon + 1, *end = s + len;
    if (p == end || end - p > 5)
        return CORE_EINVAL;
    long v = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return CORE_EINVAL;
        v = v * 10 + (*p - '0');
    }
    if (v > 65535)
        return CORE_EINVAL;
    if (hl + 1 > hostlen)
        return CORE_ERANGE;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (int)v;
    return 0;
}

int core_addr_ip(const char *host, int port, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    if (port < 0 || port > 65535)
        return CORE_EINVAL;
    if (strchr(host, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        return inet_pton(AF_INET6, host, &a->sin6_addr) == 1 ? 0 : CORE_EINVAL;
    }
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : CORE_EINVAL;
}

int core_addr_format(char *out, size_t len, const char *host, int port)
{
    return snprintf(out, len, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

int core_addr_equal(const struct sockaddr *a, const struct sockaddr *b)
{
    if (a->sa_family != b->sa_family)
        return 0;
    if (a->sa_family == AF_INET) {
        const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    if (a->sa_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
        return x->sin6_port == y->sin6_port &&
               memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0;
    }
    return 0;
}
