/* Allocator-aware block costs (alloc.h). */
#include "core/alloc.h"

#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>

typedef size_t (*nallocx_fn)(size_t size, int flags);
typedef int (*mallctl_fn)(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

static struct {
    int known;
    nallocx_fn nallocx; /* NULL: glibc */
    char name[64];
} alloc;

/* Single-threaded callers (the servers' loops); a race would only look up
 * the same answer twice. */
static void detect(void)
{
    if (alloc.known)
        return;
    void *sym = dlsym(RTLD_DEFAULT, "nallocx");
    memcpy(&alloc.nallocx, &sym, sizeof(sym));
    snprintf(alloc.name, sizeof(alloc.name), "libc");
    if (alloc.nallocx) {
        mallctl_fn mallctl;
        void *m = dlsym(RTLD_DEFAULT, "mallctl");
        memcpy(&mallctl, &m, sizeof(m));
        const char *version = NULL;
        size_t len = sizeof(version);
        if (mallctl && mallctl("version", &version, &len, NULL, 0) == 0 && version) {
            /* "5.3.0-0-g54eaed1d8b56..." -> "jemalloc-5.3.0" */
            size_t n = strcspn(version, "-");
            snprintf(alloc.name, sizeof(alloc.name), "jemalloc-%.*s", (int)n, version);
        } else {
            snprintf(alloc.name, sizeof(alloc.name), "jemalloc");
        }
    }
    alloc.known = 1;
}

size_t core_alloc_cost(void *p)
{
    detect();
    size_t usable = malloc_usable_size(p);
    return alloc.nallocx ? usable : usable + sizeof(size_t);
}

size_t core_alloc_request_cost(size_t n)
{
    detect();
    if (alloc.nallocx)
        return alloc.nallocx(n ? n : 1, 0);
    size_t c = (n + sizeof(size_t) + 15) & ~(size_t)15;
    return c < 32 ? 32 : c;
}

const char *core_allocator_name(void)
{
    detect();
    return alloc.name;
}
