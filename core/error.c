/* Error code table: names and messages generated from CORE_ERRNO_MAP. */
#include "core/error.h"

#include <errno.h>
#include <uv.h>

const char *core_strerror(int err)
{
    switch (err) {
#define X(name, value, msg)                                                                        \
    case value:                                                                                    \
        return msg;
        CORE_ERRNO_MAP(X)
#undef X
    case 0:
        return "success";
    default:
        return "unknown error";
    }
}

const char *core_err_name(int err)
{
    switch (err) {
#define X(name, value, msg)                                                                        \
    case value:                                                                                    \
        return #name;
        CORE_ERRNO_MAP(X)
#undef X
    case 0:
        return "OK";
    default:
        return "UNKNOWN";
    }
}

int core_from_errno(int errnum)
{
    switch (errnum) {
    case 0:
        return 0;
    case ENOMEM:
        return CORE_ENOMEM;
    case EINVAL:
        return CORE_EINVAL;
    case ERANGE:
    case EOVERFLOW:
        return CORE_ERANGE;
    case ENOENT:
        return CORE_ENOTFOUND;
    case EEXIST:
        return CORE_EEXISTS;
    case EAGAIN:
        return CORE_EAGAIN;
    case EBUSY:
        return CORE_EBUSY;
    case ETIMEDOUT:
        return CORE_ETIMEOUT;
    case EPIPE:
    case ECONNRESET:
        return CORE_ECLOSED;
    default:
        return CORE_EIO;
    }
}

int core_from_uv(int uverr)
{
    switch (uverr) {
    case 0:
        return 0;
    case UV_EADDRINUSE:
        return CORE_EBUSY;
    case UV_EOF:
        return CORE_ECLOSED;
    case UV_ECANCELED:
        return CORE_ECLOSED;
    case UV_EAI_NONAME:
    case UV_EAI_NODATA:
    case UV_EAI_FAMILY:
        return CORE_ENOTFOUND;
    case UV_ENOBUFS:
        return CORE_ENOMEM;
    default:
        /* On Unix every other UV_E* code is a negated errno value. */
        return uverr < 0 && uverr > -4096 ? core_from_errno(-uverr) : CORE_EIO;
    }
}
