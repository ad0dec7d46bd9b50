/*
 * A random, deterministic ALF replay-line generator for the EduMatcher
 * tests and benchmarks: a mix of every client and operator message over a
 * few symbols (one with collar and breaker, one with a lot, one without a
 * reference whose prices wander outside the book's tick window), with
 * some malformed lines. Same seed, same lines.
 */
#ifndef EM_GEN_H
#define EM_GEN_H

#include <stddef.h>
#include <stdint.h>

struct em_gen {
    uint64_t state;
    uint64_t n;
};

void em_gen_init(struct em_gen *g, uint64_t seed);

/* The operator lines that define the symbols; call first. Returns the
 * number of lines written into lines[] (each NUL-terminated, <= 128). */
int em_gen_setup(char lines[][128], int max);

/* Write the next replay line (`<gw> <message>`, no newline, NUL-terminated)
 * into buf (at least 256 bytes). Returns its length. */
size_t em_gen_line(struct em_gen *g, char *buf);

#endif
