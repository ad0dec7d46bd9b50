/*
 * Clocks. Monotonic time for measuring and timers; wall-clock time only
 * where a protocol speaks in it (Redis EXPIREAT takes Unix time).
 */
#ifndef CORE_CLOCK_H
#define CORE_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds from an arbitrary fixed point; never goes backwards. */
static inline uint64_t core_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Milliseconds since the Unix epoch (wall clock; may jump). */
static inline int64_t core_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
