/*
 * Allocation counting for the tests that promise "no malloc per message".
 *
 * A test binary registered with core_count_allocations() in CMake is linked
 * with `ld --wrap=malloc,--wrap=calloc,--wrap=realloc`: every call to those
 * from the binary's own code and the project's static libraries goes
 * through the wrappers in alloc_count.c, which count it. Allocations made
 * inside shared libraries (libzmq, libuv, libc itself) are not seen: they
 * are those libraries' business.
 *
 * Read the counter before and after the code under test and assert on the
 * difference; assert once that the counter moves when something is known
 * to allocate, so a broken wrap cannot pass the test by counting nothing.
 */
#ifndef TEST_ALLOC_COUNT_H
#define TEST_ALLOC_COUNT_H

/* malloc + calloc + realloc calls so far in this process. */
unsigned long test_allocations(void);

/* Make the next calloc return NULL (once), to test an out-of-memory path. */
void test_alloc_fail_next_calloc(void);

#endif
