/*
 * File-backed store of one FIX session's sequence numbers and outbound
 * messages (fix_store.h). The index of record offsets grows by doubling,
 * so appending allocates only when the session's message count doubles.
 */
#include "edumatcher/gateway/fix/fix_store.h"

#include "core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define SEQS_LINE 40 /* "%019" PRIu64 " %019" PRIu64 "\n" */
#define REC_HEAD  12 /* u64 seq, u32 len */

static int valid_id(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 16)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return 0;
    }
    return 1;
}

static int write_all(int fd, const void *p, size_t n, off_t at)
{
    const char *c = p;
    while (n) {
        ssize_t w = pwrite(fd, c, n, at);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return CORE_EIO;
        }
        c += w;
        n -= (size_t)w;
        at += w;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t n, off_t at)
{
    char *c = p;
    while (n) {
        ssize_t r = pread(fd, c, n, at);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return CORE_EIO;
        c += r;
        n -= (size_t)r;
        at += r;
    }
    return 0;
}

static int index_put(struct em_fix_store *st, uint64_t seq, uint64_t off)
{
    if (st->count == 0)
        st->first = seq;
    if (seq < st->first + st->count)
        return CORE_EINVAL;
    uint64_t need = seq - st->first + 1;
    if (need > st->cap) {
        uint64_t cap = st->cap ? st->cap : 1024;
        while (cap < need)
            cap *= 2;
        uint64_t *n = realloc(st->off, cap * sizeof *n);
        if (!n)
            return CORE_ENOMEM;
        st->off = n;
        st->cap = cap;
    }
    for (uint64_t i = st->count; i + 1 < need; i++)
        st->off[i] = UINT64_MAX; /* gaps: sequence numbers never stored */
    st->off[need - 1] = off;
    st->count = need;
    return 0;
}

int em_fix_store_set_seqs(struct em_fix_store *st, uint64_t next_in, uint64_t next_out)
{
    char line[SEQS_LINE + 1];
    snprintf(line, sizeof line, "%019" PRIu64 " %019" PRIu64 "\n", next_in, next_out);
    st->next_in = next_in;
    st->next_out = next_out;
    return write_all(st->seqs_fd, line, SEQS_LINE, 0);
}

int em_fix_store_open(struct em_fix_store *st, const char *dir, const char *sender,
                      const char *target)
{
    memset(st, 0, sizeof *st);
    st->seqs_fd = st->msgs_fd = -1;
    if (!valid_id(sender) || !valid_id(target))
        return CORE_EINVAL;
    char path[PATH_MAX];
    int rc = CORE_EIO;
    if (snprintf(path, sizeof path, "%s/%s-%s.seqs", dir, sender, target) >= (int)sizeof path)
        return CORE_EINVAL;
    st->seqs_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    snprintf(path, sizeof path, "%s/%s-%s.msgs", dir, sender, target);
    st->msgs_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (st->seqs_fd < 0 || st->msgs_fd < 0)
        goto fail;
    char line[SEQS_LINE + 1] = {0};
    ssize_t n = pread(st->seqs_fd, line, SEQS_LINE, 0);
    uint64_t in = 1, out = 1;
    if (n == SEQS_LINE && sscanf(line, "%" SCNu64 " %" SCNu64, &in, &out) == 2 && in && out) {
        st->next_in = in;
        st->next_out = out;
    } else if ((rc = em_fix_store_set_seqs(st, 1, 1)) != 0) {
        goto fail;
    }
    /* rebuild the index; a torn record at the end (a crash mid-append) is
     * cut off */
    off_t end = lseek(st->msgs_fd, 0, SEEK_END);
    uint64_t at = 0;
    while (end >= 0 && at + REC_HEAD <= (uint64_t)end) {
        unsigned char h[REC_HEAD];
        if (read_all(st->msgs_fd, h, REC_HEAD, (off_t)at))
            break;
        uint64_t seq;
        uint32_t len;
        memcpy(&seq, h, 8);
        memcpy(&len, h + 8, 4);
        if (at + REC_HEAD + len > (uint64_t)end)
            break;
        if ((rc = index_put(st, seq, at)) != 0)
            goto fail;
        at += REC_HEAD + len;
    }
    /* the .seqs line may lag behind the messages sent (appending does not
     * rewrite it): the next outbound number follows the last one stored */
    if (st->count && st->first + st->count > st->next_out)
        st->next_out = st->first + st->count;
    if (ftruncate(st->msgs_fd, (off_t)at) != 0) {
        rc = CORE_EIO;
        goto fail;
    }
    st->msgs_end = at;
    return 0;
fail:
    em_fix_store_close(st);
    return rc;
}

int em_fix_store_append(struct em_fix_store *st, uint64_t seq, const char *msg, size_t len)
{
    if (len > UINT32_MAX)
        return CORE_EINVAL;
    int rc = index_put(st, seq, st->msgs_end);
    if (rc)
        return rc;
    unsigned char h[REC_HEAD];
    uint32_t l = (uint32_t)len;
    memcpy(h, &seq, 8);
    memcpy(h + 8, &l, 4);
    /* one system call per message: header and bytes together */
    struct iovec iov[2] = {{h, REC_HEAD}, {(void *)msg, len}};
    ssize_t w;
    do
        w = pwritev(st->msgs_fd, iov, 2, (off_t)st->msgs_end);
    while (w < 0 && errno == EINTR);
    if (w < 0 || (size_t)w != REC_HEAD + len) {
        /* a short write (disk full): the torn record is overwritten by the
         * next append, or cut off at the next open */
        st->count = seq - st->first; /* not stored after all */
        return CORE_EIO;
    }
    st->msgs_end += REC_HEAD + len;
    st->next_out = seq + 1;
    return 0;
}

int em_fix_store_get(struct em_fix_store *st, uint64_t seq, char *buf, size_t cap, size_t *len)
{
    if (st->count == 0 || seq < st->first || seq >= st->first + st->count ||
        st->off[seq - st->first] == UINT64_MAX)
        return CORE_ENOTFOUND;
    uint64_t at = st->off[seq - st->first];
    unsigned char h[REC_HEAD];
    if (read_all(st->msgs_fd, h, REC_HEAD, (off_t)at))
        return CORE_EIO;
    uint32_t l;
    memcpy(&l, h + 8, 4);
    if (l > cap)
        return CORE_ETOOBIG;
    if (read_all(st->msgs_fd, buf, l, (off_t)(at + REC_HEAD)))
        return CORE_EIO;
    *len = l;
    return 0;
}

int em_fix_store_reset(struct em_fix_store *st)
{
    if (ftruncate(st->msgs_fd, 0) != 0)
        return CORE_EIO;
    st->msgs_end = 0;
    st->count = 0;
    return em_fix_store_set_seqs(st, 1, 1);
}

void em_fix_store_close(struct em_fix_store *st)
{
    if (st->seqs_fd >= 0)
        close(st->seqs_fd);
    if (st->msgs_fd >= 0)
        close(st->msgs_fd);
    st->seqs_fd = st->msgs_fd = -1;
    free(st->off);
    st->off = NULL;
    st->count = st->cap = 0;
}
