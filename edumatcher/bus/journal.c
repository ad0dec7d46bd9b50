/*
 * Journal and snapshots (format and invariants in journal.h).
 *
 * Open sequence:
 *   list dir -> newest snapshot whose CRC holds -> on_snapshot
 *   -> segments in first_seq order: records with seq <= snapshot skipped,
 *      later ones to on_record; seq must continue without gap
 *   -> a bad record at the tail of the last segment: truncate (torn write)
 *   -> append position = end of the last segment (or a new segment)
 *
 * Reading uses one buffer the size of the segment, allocated at open only;
 * appending never allocates (invariant 4).
 */
#include "edumatcher/bus/journal.h"

#include "core/byte.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const em_fsync_policy_names[] = {"always", "batch", "interval", "never", NULL};

#define SEG_MAGIC     "EMJOURNL"
#define SNAP_MAGIC    "EMSNAPSH"
#define SEG_HEADER    24
#define REC_HEADER    16
#define SNAP_HEADER   32
#define MAX_FILES     4096
#define DEFAULT_BATCH (256u * 1024)

/* The CRC covers the sequence number too, so a record copied to another
 * position does not pass. */
static uint32_t record_crc(uint64_t seq, const void *payload, size_t len)
{
    unsigned char s[8];
    core_put_le64(s, seq);
    return core_crc32c(core_crc32c(0, s, 8), payload, len);
}

/* ---- file helpers ---- */

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return CORE_EIO;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_file(int dir_fd, const char *name, unsigned char **out, size_t *len)
{
    int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return CORE_EIO;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return CORE_EIO;
    }
    size_t n = (size_t)st.st_size;
    unsigned char *b = malloc(n ? n : 1);
    if (!b) {
        close(fd);
        return CORE_ENOMEM;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, b + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    *out = b;
    *len = got;
    return 0;
}

static void seg_name(char *out, size_t outlen, uint64_t first)
{
    snprintf(out, outlen, "journal-%020" PRIu64 ".log", first);
}

static void snap_name(char *out, size_t outlen, uint64_t seq)
{
    snprintf(out, outlen, "snapshot-%020" PRIu64 ".snap", seq);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Collect the sequence numbers in the names of segments and snapshots. */
static int list_dir(int dir_fd, uint64_t *segs, size_t *nsegs, uint64_t *snaps, size_t *nsnaps)
{
    int fd = dup(dir_fd);
    if (fd < 0)
        return CORE_EIO;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return CORE_EIO;
    }
    rewinddir(d); /* the dup shares the offset of earlier listings */
    *nsegs = *nsnaps = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        uint64_t v;
        char tail[16];
        if (sscanf(e->d_name, "journal-%20" SCNu64 ".%15s", &v, tail) == 2 &&
            strcmp(tail, "log") == 0 && *nsegs < MAX_FILES)
            segs[(*nsegs)++] = v;
        else if (sscanf(e->d_name, "snapshot-%20" SCNu64 ".%15s", &v, tail) == 2 &&
                 strcmp(tail, "snap") == 0 && *nsnaps < MAX_FILES)
            snaps[(*nsnaps)++] = v;
    }
    closedir(d);
    qsort(segs, *nsegs, sizeof *segs, cmp_u64);
    qsort(snaps, *nsnaps, sizeof *snaps, cmp_u64);
    return 0;
}

/* Load the newest snapshot that is intact. Returns 0 with *seq = 0 if there
 * is none. */
static int load_snapshot(struct em_journal *j, const uint64_t *snaps, size_t nsnaps,
                         em_journal_snapshot_cb cb, void *ud, uint64_t *seq)
{
    *seq = 0;
    for (size_t i = nsnaps; i-- > 0;) {
        char name[64];
        snap_name(name, sizeof name, snaps[i]);
        unsigned char *b;
        size_t n;
        int rc = read_file(j->dir_fd, name, &b, &n);
        if (rc == CORE_ENOMEM)
            return rc;
        if (rc)
            continue;
        bool ok = n >= SNAP_HEADER && memcmp(b, SNAP_MAGIC, 8) == 0 &&
                  core_get_le32(b + 8) == EM_JOURNAL_VERSION && core_get_le64(b + 16) == snaps[i] &&
                  core_get_le64(b + 24) == n - SNAP_HEADER &&
                  core_get_le32(b + 12) == record_crc(snaps[i], b + SNAP_HEADER, n - SNAP_HEADER);
        if (!ok) {
            CORE_WARN("journal: snapshot %s is damaged; trying an older one", name);
            free(b);
            continue;
        }
        rc = cb ? cb(b + SNAP_HEADER, n - SNAP_HEADER, snaps[i], ud) : 0;
        free(b);
        if (rc)
            return rc;
        *seq = snaps[i];
        return 0;
    }
    return 0;
}

static bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/*
 * Replay one segment. *expect is the next sequence number wanted (records
 * below it are skipped, a jump above it is a gap). On return *valid_len is
 * the length of the intact prefix. A bad record is tolerated only at the
 * tail of the last segment (invariant 2).
 */
static int replay_segment(struct em_journal *j, uint64_t first, bool last, uint64_t skip_to,
                          uint64_t *expect, em_journal_record_cb cb, void *ud,
                          struct em_journal_replay_stats *st, size_t *valid_len, size_t *file_len)
{
    char name[64];
    seg_name(name, sizeof name, first);
    unsigned char *b;
    size_t n;
    int rc = read_file(j->dir_fd, name, &b, &n);
    if (rc)
        return rc;
    *file_len = n;
    *valid_len = 0;
    if (n < SEG_HEADER || memcmp(b, SEG_MAGIC, 8) != 0 || core_get_le64(b + 16) != first) {
        free(b);
        /* A header that never made it to disk: the segment was just
         * created when the process died. */
        if (last && (n < SEG_HEADER || all_zero(b, n)))
            return 0;
        CORE_WARN("journal: %s has a bad header", name);
        return CORE_EIO;
    }
    if (core_get_le32(b + 8) != EM_JOURNAL_VERSION) {
        free(b);
        CORE_WARN("journal: %s has unsupported version", name);
        return CORE_EIO;
    }
    size_t off = SEG_HEADER;
    uint64_t seq_here = first;
    while (off < n) {
        size_t left = n - off;
        bool bad = left < REC_HEADER;
        uint32_t len = 0;
        uint64_t seq = 0;
        if (!bad) {
            len = core_get_le32(b + off);
            seq = core_get_le64(b + off + 8);
            bad = len > EM_JOURNAL_RECORD_MAX || left - REC_HEADER < len || seq != seq_here ||
                  core_get_le32(b + off + 4) != record_crc(seq, b + off + REC_HEADER, len);
        }
        if (bad) {
            /* Torn if nothing intact can follow: the record runs past the
             * end, or the rest is zeros (space the fs allocated but the
             * write never filled). */
            bool reaches_end = left < REC_HEADER || left - REC_HEADER <= len;
            if (last && (reaches_end || all_zero(b + off, left)))
                break;
            CORE_WARN("journal: %s: corrupt record at offset %zu (seq %" PRIu64 ")", name, off,
                      seq_here);
            free(b);
            return CORE_EIO;
        }
        if (seq >= skip_to) {
            if (seq != *expect) {
                free(b);
                CORE_WARN("journal: gap before seq %" PRIu64 " (wanted %" PRIu64 ")", seq, *expect);
                return CORE_EIO;
            }
            rc = cb ? cb(b + off + REC_HEADER, len, seq, ud) : 0;
            if (rc) {
                free(b);
                return rc;
            }
            st->records++;
            (*expect)++;
        }
        seq_here++;
        off += REC_HEADER + len;
    }
    *valid_len = off;
    free(b);
    return 0;
}

static int sync_fd(int fd)
{
    return fdatasync(fd) == 0 ? 0 : CORE_EIO;
}

/* Create segment journal-<first>.log with its header, synced with its
 * directory entry so a crash never leaves records in a nameless file. */
static int new_segment(struct em_journal *j, uint64_t first)
{
    char name[64];
    seg_name(name, sizeof name, first);
    int fd = openat(j->dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return CORE_EIO;
    unsigned char h[SEG_HEADER] = {0};
    memcpy(h, SEG_MAGIC, 8);
    core_put_le32(h + 8, EM_JOURNAL_VERSION);
    core_put_le64(h + 16, first);
    if (write_all(fd, h, sizeof h) || sync_fd(fd) || fsync(j->dir_fd) != 0) {
        close(fd);
        return CORE_EIO;
    }
    if (j->fd >= 0)
        close(j->fd);
    j->fd = fd;
    return 0;
}

int em_journal_open(struct em_journal *j, const struct em_journal_opts *o,
                    em_journal_snapshot_cb on_snapshot, em_journal_record_cb on_record, void *ud,
                    struct em_journal_replay_stats *stats)
{
    memset(j, 0, sizeof *j);
    j->fd = j->dir_fd = -1;
    struct em_journal_replay_stats local;
    struct em_journal_replay_stats *st = stats ? stats : &local;
    memset(st, 0, sizeof *st);
    if (!o->dir || strlen(o->dir) >= sizeof j->dir || o->fsync > EM_FSYNC_NEVER)
        return CORE_EINVAL;
    strcpy(j->dir, o->dir);
    j->policy = o->fsync;
    j->interval_ns = o->fsync_interval_ms * 1000000u;
    j->last_sync_ns = core_now_ns(); /* what open finds is on disk */
    j->cap = o->batch_bytes ? o->batch_bytes : DEFAULT_BATCH;
    if (j->cap < REC_HEADER + 64)
        j->cap = REC_HEADER + 64;
    if (mkdir(o->dir, 0755) != 0 && errno != EEXIST)
        return CORE_EIO;
    j->dir_fd = open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (j->dir_fd < 0)
        return CORE_EIO;
    j->buf = malloc(j->cap);
    uint64_t *segs = malloc(2 * MAX_FILES * sizeof *segs);
    if (!j->buf || !segs) {
        free(segs);
        em_journal_close(j);
        return CORE_ENOMEM;
    }
    uint64_t *snaps = segs + MAX_FILES;
    size_t nsegs, nsnaps;
    int rc = list_dir(j->dir_fd, segs, &nsegs, snaps, &nsnaps);
    uint64_t snap_seq = 0;
    if (rc == 0)
        rc = load_snapshot(j, snaps, nsnaps, on_snapshot, ud, &snap_seq);
    st->snapshot_seq = snap_seq;
    uint64_t expect = snap_seq + 1;
    size_t valid = 0, file_len = 0;
    for (size_t i = 0; rc == 0 && i < nsegs; i++) {
        /* A segment whose successor starts at or before the snapshot holds
         * nothing after it. */
        if (i + 1 < nsegs && segs[i + 1] <= snap_seq + 1)
            continue;
        rc = replay_segment(j, segs[i], i + 1 == nsegs, snap_seq + 1, &expect, on_record, ud, st,
                            &valid, &file_len);
    }
    if (rc == 0 && nsegs == 0 && snap_seq > 0)
        expect = snap_seq + 1;
    j->next_seq = expect;
    j->synced_seq = expect - 1;
    j->snapshot_seq = snap_seq;
    if (rc == 0 && nsegs > 0 && valid >= SEG_HEADER) {
        /* Continue the last segment, cutting a torn tail off first. */
        char name[64];
        seg_name(name, sizeof name, segs[nsegs - 1]);
        int fd = openat(j->dir_fd, name, O_WRONLY | O_APPEND | O_CLOEXEC);
        if (fd < 0) {
            rc = CORE_EIO;
        } else {
            j->fd = fd;
            if (file_len > valid) {
                st->torn_bytes = file_len - valid;
                CORE_WARN("journal: truncating a torn tail of %zu bytes in %s", file_len - valid,
                          name);
                if (ftruncate(fd, (off_t)valid) != 0 || sync_fd(fd) != 0)
                    rc = CORE_EIO;
            }
        }
    } else if (rc == 0) {
        if (nsegs > 0) { /* the last segment had no intact header: replace it */
            char name[64];
            seg_name(name, sizeof name, segs[nsegs - 1]);
            unlinkat(j->dir_fd, name, 0);
            st->torn_bytes = file_len;
        }
        rc = new_segment(j, j->next_seq);
    }
    free(segs);
    if (rc)
        em_journal_close(j);
    return rc;
}

static int write_batch(struct em_journal *j)
{
    if (j->len == 0)
        return 0;
    if (write_all(j->fd, j->buf, j->len))
        return CORE_EIO;
    j->writes++;
    j->len = 0;
    j->dirty = true;
    return 0;
}

static int do_sync(struct em_journal *j)
{
    if (!j->dirty)
        return 0;
    if (sync_fd(j->fd))
        return CORE_EIO;
    j->syncs++;
    j->dirty = false;
    j->synced_seq = j->next_seq - 1;
    j->last_sync_ns = core_now_ns();
    return 0;
}

int em_journal_append(struct em_journal *j, const void *data, size_t len, uint64_t *seq)
{
    if (len > EM_JOURNAL_RECORD_MAX)
        return CORE_ETOOBIG;
    size_t need = REC_HEADER + len;
    if (j->cap - j->len < need) {
        int rc = write_batch(j);
        if (rc)
            return rc;
    }
    uint64_t s = j->next_seq;
    unsigned char h[REC_HEADER];
    core_put_le32(h, (uint32_t)len);
    core_put_le32(h + 4, record_crc(s, data, len));
    core_put_le64(h + 8, s);
    if (need > j->cap) {
        /* Larger than the whole buffer: write it through. */
        if (write_all(j->fd, h, sizeof h) || write_all(j->fd, data, len))
            return CORE_EIO;
        j->writes++;
        j->dirty = true;
    } else {
        memcpy(j->buf + j->len, h, sizeof h);
        memcpy(j->buf + j->len + REC_HEADER, data, len);
        j->len += need;
    }
    j->next_seq++;
    j->records++;
    j->bytes += need;
    if (seq)
        *seq = s;
    if (j->policy == EM_FSYNC_ALWAYS)
        return em_journal_flush(j);
    return 0;
}

int em_journal_flush(struct em_journal *j)
{
    int rc = write_batch(j);
    if (rc)
        return rc;
    switch (j->policy) {
    case EM_FSYNC_ALWAYS:
    case EM_FSYNC_BATCH:
        return do_sync(j);
    case EM_FSYNC_INTERVAL:
        if (core_now_ns() - j->last_sync_ns >= j->interval_ns)
            return do_sync(j);
        return 0;
    case EM_FSYNC_NEVER:
        j->synced_seq = j->next_seq - 1;
        return 0;
    }
    return 0;
}

int em_journal_snapshot_begin(struct em_journal *j, uint64_t *seq)
{
    int rc = write_batch(j);
    if (rc == 0)
        rc = do_sync(j);
    if (rc)
        return rc;
    *seq = j->next_seq - 1;
    /* A new segment now, so that the ones the snapshot supersedes are
     * whole files (invariant 3) and appends go on while it is written. */
    return new_segment(j, j->next_seq);
}

int em_journal_snapshot_write(const struct em_journal *j, uint64_t seq, const void *data,
                              size_t len)
{
    unsigned char h[SNAP_HEADER] = {0};
    memcpy(h, SNAP_MAGIC, 8);
    core_put_le32(h + 8, EM_JOURNAL_VERSION);
    core_put_le32(h + 12, record_crc(seq, data, len));
    core_put_le64(h + 16, seq);
    core_put_le64(h + 24, len);
    const char *tmp = "snapshot.tmp";
    int fd = openat(j->dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return CORE_EIO;
    if (write_all(fd, h, sizeof h) || write_all(fd, data, len) || fsync(fd) != 0) {
        close(fd);
        unlinkat(j->dir_fd, tmp, 0);
        return CORE_EIO;
    }
    close(fd);
    char name[64];
    snap_name(name, sizeof name, seq);
    if (renameat(j->dir_fd, tmp, j->dir_fd, name) != 0 || fsync(j->dir_fd) != 0)
        return CORE_EIO;
    return 0;
}

void em_journal_snapshot_done(struct em_journal *j, uint64_t seq)
{
    if (seq > j->snapshot_seq)
        j->snapshot_seq = seq;
    uint64_t *segs = malloc(2 * MAX_FILES * sizeof *segs);
    if (!segs)
        return; /* nothing lost: the old files merely stay */
    uint64_t *snaps = segs + MAX_FILES;
    size_t nsegs, nsnaps;
    char name[64];
    if (list_dir(j->dir_fd, segs, &nsegs, snaps, &nsnaps) == 0) {
        /* a segment is superseded when the next one starts at or before
         * seq + 1: all its records are in the snapshot */
        for (size_t i = 0; i + 1 < nsegs; i++) {
            if (segs[i + 1] <= seq + 1) {
                seg_name(name, sizeof name, segs[i]);
                unlinkat(j->dir_fd, name, 0);
            }
        }
        for (size_t i = 0; i < nsnaps; i++) {
            if (snaps[i] < seq) {
                snap_name(name, sizeof name, snaps[i]);
                unlinkat(j->dir_fd, name, 0);
            }
        }
        fsync(j->dir_fd);
    }
    free(segs);
}

int em_journal_snapshot(struct em_journal *j, const void *data, size_t len)
{
    uint64_t seq;
    int rc = em_journal_snapshot_begin(j, &seq);
    if (rc == 0)
        rc = em_journal_snapshot_write(j, seq, data, len);
    if (rc == 0)
        em_journal_snapshot_done(j, seq);
    return rc;
}

void em_journal_close(struct em_journal *j)
{
    if (j->fd >= 0) {
        write_batch(j);
        do_sync(j);
        close(j->fd);
    }
    if (j->dir_fd >= 0)
        close(j->dir_fd);
    free(j->buf);
    j->buf = NULL;
    j->fd = j->dir_fd = -1;
}
