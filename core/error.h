/*
 * Error codes shared by every module.
 *
 * Functions return 0 on success and a negative CORE_E* code on failure, as
 * libuv does with UV_E*. Codes from errno, libuv, ZeroMQ and raft are
 * converted at the boundary where they arise (core_from_errno, core_from_uv),
 * so callers
 * see one vocabulary. The table below is the single source of the codes,
 * their names and their messages.
 */
#ifndef CORE_ERROR_H
#define CORE_ERROR_H

/* X(NAME, value, message) */
#define CORE_ERRNO_MAP(X)                                                                          \
    X(NOMEM, -1, "out of memory")                                                                  \
    X(INVAL, -2, "invalid argument")                                                               \
    X(RANGE, -3, "value out of range")                                                             \
    X(PROTO, -4, "protocol error")                                                                 \
    X(TOOBIG, -5, "too large")                                                                     \
    X(NOTFOUND, -6, "not found")                                                                   \
    X(EXISTS, -7, "already exists")                                                                \
    X(IO, -8, "I/O error")                                                                         \
    X(AGAIN, -9, "try again")                                                                      \
    X(CLOSED, -10, "closed")                                                                       \
    X(BUSY, -11, "busy")                                                                           \
    X(TIMEOUT, -12, "timed out")                                                                   \
    X(STATE, -13, "invalid state")                                                                 \
    X(INCOMPLETE, -14, "incomplete input")

enum core_errno {
#define X(name, value, msg) CORE_E##name = value,
    CORE_ERRNO_MAP(X)
#undef X
};

/* Return a static, human readable message for a CORE_E* code (or "unknown
 * error"). Never NULL. */
const char *core_strerror(int err);

/* Return the code's name without prefix ("NOMEM"), or "UNKNOWN". */
const char *core_err_name(int err);

/* Map a positive errno value to the nearest CORE_E* code. */
int core_from_errno(int errnum);

/* Map a libuv result (0 or a negative UV_E* code) to 0 or the nearest
 * CORE_E* code: the one place where libuv's codes are converted. An
 * address in use is CORE_EBUSY, end of stream CORE_ECLOSED, a failed name
 * lookup CORE_ENOTFOUND. */
int core_from_uv(int uverr);

#endif
