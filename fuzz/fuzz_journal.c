/* libFuzzer target for the journal reader (edumatcher/bus/journal.h): a segment
 * file with arbitrary bytes after a valid header must open cleanly (torn
 * tail truncated) or be refused with CORE_EIO, never crash; what it hands
 * to the callback lies inside the file. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "edumatcher/bus/journal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];
static size_t file_size;

static int on_record(const void *d, size_t len, uint64_t seq, void *ud)
{
    if (len > file_size)
        abort();
    volatile unsigned char sink = len ? ((const unsigned char *)d)[len - 1] : 0;
    (void)sink;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        core_log_init('F', CORE_LOG_WARNING + 1); /* quiet */
        /* tmpfs when there is one: the journal syncs, which disks make slow */
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(dir, sizeof dir, "%s/fuzz-journal-%d", base, (int)getpid());
    }
    char path[128];
    snprintf(path, sizeof path, "%s/journal-%020d.log", dir, 1);
    mkdir(dir, 0755);
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    /* a valid header, then the input */
    unsigned char h[24] = {'E', 'M', 'J', 'O', 'U', 'R', 'N', 'L', 1, 0, 0, 0,
                           0,   0,   0,   0,   1,   0,   0,   0,   0, 0, 0, 0};
    fwrite(h, 1, sizeof h, f);
    fwrite(data, 1, size, f);
    fclose(f);
    file_size = size;
    struct em_journal j;
    struct em_journal_opts o = {.dir = dir, .fsync = EM_FSYNC_NEVER};
    int rc = em_journal_open(&j, &o, NULL, on_record, NULL, NULL);
    if (rc == 0) {
        if (em_journal_append(&j, "x", 1, NULL) != 0)
            abort();
        em_journal_close(&j);
    } else if (rc != CORE_EIO) {
        abort();
    }
    unlink(path);
    rmdir(dir);
    return 0;
}
