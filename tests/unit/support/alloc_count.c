/* The counting allocator wrappers; see alloc_count.h. */
#include "alloc_count.h"

#include <stddef.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);

/* volatile: the compiler may assume that malloc touches no global of the
 * program, and would otherwise keep the counter in a register across the
 * code under test (and the test would read a stale value). */
static volatile unsigned long allocations;
static volatile int fail_next_calloc;

unsigned long test_allocations(void)
{
    return allocations;
}

void test_alloc_fail_next_calloc(void)
{
    fail_next_calloc = 1;
}

void *__wrap_malloc(size_t n)
{
    allocations++;
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    allocations++;
    if (fail_next_calloc) {
        fail_next_calloc = 0;
        return NULL;
    }
    return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    allocations++;
    return __real_realloc(p, n);
}
