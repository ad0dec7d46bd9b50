/*
 * The trade log (format and invariants in trade_log.h).
 */
#include "edumatcher/bus/trade_log.h"

#include "core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Does rec hold the TRADE line of trade `tid`? */
static bool record_ok(const char *rec, uint64_t tid)
{
    static const char head[] = "TRADE tid=";
    if (memcmp(rec, head, sizeof head - 1) != 0 || rec[EM_TRADE_LOG_REC - 1] != '\n')
        return false;
    uint64_t v = 0;
    size_t i = sizeof head - 1, start = i;
    while (i < EM_TRADE_LOG_REC && rec[i] >= '0' && rec[i] <= '9' && i - start < 19)
        v = v * 10 + (uint64_t)(rec[i++] - '0');
    return i > start && rec[i] == ' ' && v == tid;
}

static int pread_all(int fd, void *buf, size_t n, off_t off)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, (char *)buf + done, n - done, off + (off_t)done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return CORE_EIO;
        done += (size_t)r;
    }
    return 0;
}

int em_trade_log_open(struct em_trade_log *l, const char *dir, bool sync)
{
    memset(l, 0, sizeof *l);
    l->fd = -1;
    l->sync = sync;
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/trades.log", dir) >= (int)sizeof path)
        return CORE_EINVAL;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return CORE_EIO;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return CORE_EIO;
    }
    uint64_t n = (uint64_t)st.st_size / EM_TRADE_LOG_REC;
    /* A crash tears at most the buffer being written: step back over bad
     * records that far, and call anything worse a damaged file. */
    char rec[EM_TRADE_LOG_REC];
    unsigned back = 0;
    while (n > 0) {
        if (pread_all(fd, rec, sizeof rec, (off_t)((n - 1) * EM_TRADE_LOG_REC)) != 0) {
            close(fd);
            return CORE_EIO;
        }
        if (record_ok(rec, n))
            break;
        if (++back > EM_TRADE_LOG_BUF) {
            close(fd);
            return CORE_EPROTO;
        }
        n--;
    }
    if ((uint64_t)st.st_size != n * EM_TRADE_LOG_REC &&
        ftruncate(fd, (off_t)(n * EM_TRADE_LOG_REC)) != 0) {
        close(fd);
        return CORE_EIO;
    }
    l->fd = fd;
    l->count = n;
    return 0;
}

uint64_t em_trade_log_next(const struct em_trade_log *l)
{
    return l->count + l->pending + 1;
}

bool em_trade_log_full(const struct em_trade_log *l)
{
    return l->pending == EM_TRADE_LOG_BUF;
}

int em_trade_log_flush(struct em_trade_log *l)
{
    if (l->pending == 0)
        return 0;
    size_t n = (size_t)l->pending * EM_TRADE_LOG_REC, done = 0;
    off_t off = (off_t)(l->count * EM_TRADE_LOG_REC);
    while (done < n) {
        ssize_t w = pwrite(l->fd, l->buf + done, n - done, off + (off_t)done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return CORE_EIO;
        done += (size_t)w;
    }
    if (l->sync && fdatasync(l->fd) != 0)
        return CORE_EIO;
    l->count += l->pending;
    l->pending = 0;
    return 0;
}

int em_trade_log_append(struct em_trade_log *l, uint64_t tid, const char *line, size_t len)
{
    uint64_t next = em_trade_log_next(l);
    if (tid < next) {
        l->ignored++;
        return 0;
    }
    if (tid > next)
        return CORE_ESTATE;
    if (len > EM_TRADE_LOG_REC - 1)
        return CORE_ETOOBIG;
    if (l->pending == EM_TRADE_LOG_BUF)
        return CORE_EAGAIN; /* invariant 3: the caller flushes, journal first */
    char *rec = l->buf + l->pending * EM_TRADE_LOG_REC;
    memcpy(rec, line, len);
    memset(rec + len, ' ', EM_TRADE_LOG_REC - 1 - len);
    rec[EM_TRADE_LOG_REC - 1] = '\n';
    l->pending++;
    return 0;
}

long em_trade_log_read(const struct em_trade_log *l, uint64_t from_tid, unsigned max, char *out,
                       size_t cap, unsigned *ntrades)
{
    *ntrades = 0;
    if (from_tid == 0)
        from_tid = 1;
    size_t len = 0;
    char rec[EM_TRADE_LOG_REC];
    for (uint64_t tid = from_tid; tid <= l->count && *ntrades < max; tid++) {
        if (pread_all(l->fd, rec, sizeof rec, (off_t)((tid - 1) * EM_TRADE_LOG_REC)) != 0)
            return CORE_EIO;
        size_t n = EM_TRADE_LOG_REC - 1;
        while (n > 0 && rec[n - 1] == ' ')
            n--;
        if (len + n + 1 > cap)
            break;
        memcpy(out + len, rec, n);
        out[len + n] = '\n';
        len += n + 1;
        (*ntrades)++;
    }
    return (long)len;
}

void em_trade_log_close(struct em_trade_log *l)
{
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
}
