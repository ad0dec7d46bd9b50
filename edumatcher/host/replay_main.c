/*
 * edumatcher-replay: run the engine over a replay stream (docs/alf.md §8
 * and C) and print every event as `<gw> <event>`.
 *
 * Usage: edumatcher-replay [FILE]   (standard input when FILE is absent)
 *
 * Lines are split in a large input buffer and events are formatted into a
 * large output buffer: no allocation per line, two system calls per
 * megabyte or so. A line longer than the buffer can only be too long for
 * ALF (§1), so only its gateway id is kept while the rest is skipped.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/proc.h"
#include "edumatcher/gateway/alf/alf.h"
#include "edumatcher/engine/engine.h"

#define IN_CAP  (1u << 20)
#define OUT_CAP (1u << 20)

static char inbuf[IN_CAP];
static char outbuf[OUT_CAP];
static size_t outlen;
static unsigned long long lineno;

static void flush_out(void)
{
    size_t off = 0;
    while (off < outlen) {
        ssize_t w = write(STDOUT_FILENO, outbuf + off, outlen - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            perror("edumatcher-replay: write");
            exit(1);
        }
        off += (size_t)w;
    }
    outlen = 0;
}

static void sink(void *ctx, uint16_t gw, const struct em_msg *ev)
{
    struct em_engine *e = *(struct em_engine **)ctx;
    if (outlen + EM_GW_MAX + 2 + EM_ALF_FORMAT_MAX > OUT_CAP)
        flush_out();
    const char *name = em_engine_gateway_name(e, gw);
    size_t n = strlen(name);
    memcpy(outbuf + outlen, name, n);
    outlen += n;
    outbuf[outlen++] = ' ';
    outlen += em_alf_format(ev, outbuf + outlen);
    outbuf[outlen++] = '\n';
}

static void skip(const char *why)
{
    fprintf(stderr, "edumatcher-replay: line %llu skipped: %s\n", lineno, why);
}

/* One replay line without its '\n'; total is its full length when only a
 * prefix s[0..n) was kept (an overlong line). */
static void handle_line(struct em_engine *e, const char *s, size_t n, size_t total)
{
    lineno++;
    if (total == n && n && s[n - 1] == '\r') /* §1: a \r before \n is ignored */
        n--, total--;
    if (total == 0)
        return; /* §1: empty lines are ignored */
    const char *sp = memchr(s, ' ', n);
    if (!sp) {
        skip("no message after the gateway id");
        return;
    }
    size_t gwlen = (size_t)(sp - s);
    int gw = em_engine_gateway(e, s, gwlen);
    if (gw < 0) {
        skip(gw == CORE_EINVAL ? "not a gateway id" : "too many gateways");
        return;
    }
    const char *msg = sp + 1;
    size_t mlen = total - gwlen - 1;
    if (mlen > EM_ALF_LINE_MAX) { /* docs/alf.md C.7 */
        em_engine_reject(e, (uint16_t)gw, NULL, EM_REJ_LINE_TOO_LONG);
        return;
    }
    size_t i = 0;
    while (i < mlen && msg[i] == ' ')
        i++;
    if (i == mlen) {
        skip("no message after the gateway id");
        return;
    }
    struct em_msg m;
    int code = em_alf_parse(msg, mlen, &m);
    int auth = code == EM_REJ_SYNTAX ? 0 : em_engine_authorize(e, (uint16_t)gw, m.kind);
    if (auth)
        code = auth; /* docs/alf.md A.7, C.4: after SYNTAX, before the rest */
    if (code) {
        em_engine_reject(e, (uint16_t)gw, &m, code);
        return;
    }
    int rc = em_engine_submit(e, (uint16_t)gw, &m);
    if (rc < 0) {
        fprintf(stderr, "edumatcher-replay: line %llu: engine error %d\n", lineno, rc);
        flush_out();
        exit(1);
    }
}

int main(int argc, char **argv)
{
    static const char usage[] =
        "Usage: edumatcher-replay [FILE | -]\n"
        "\n"
        "Drive the matching engine with the replay lines of FILE (standard input\n"
        "when FILE is - or absent) and print every event it emits, one per line.\n"
        "The same input gives the same output, byte for byte (docs/alf.md).\n"
        "\n"
        "  -h, --help   print this and exit\n"
        "  --version    print the version and exit\n";
    int fd = STDIN_FILENO, code;
    /* Two binaries are built from this file (the -checked one for tests). */
    const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    if ((code = core_proc_early(prog, usage, argc, argv)) >= 0)
        return code;
    int first = argc > 1 && strcmp(argv[1], "--") == 0 ? 2 : 1;
    if (argc - first > 1)
        return core_proc_bad_usage(prog, "at most one FILE");
    if (first == 1 && argc == 2 && argv[1][0] == '-' && argv[1][1])
        return core_proc_bad_usage(prog, "unknown option '%s'", argv[1]);
    const char *file = argc > first ? argv[first] : "-";
    if (strcmp(file, "-") != 0) {
        fd = open(file, O_RDONLY);
        if (fd < 0) {
            perror(file);
            return 1;
        }
    }
    struct em_engine *e = NULL;
    struct em_engine_config cfg = {.sink = sink, .sink_ctx = &e};
    e = em_engine_new(&cfg);
    if (!e) {
        fprintf(stderr, "edumatcher-replay: out of memory\n");
        return 1;
    }
    size_t len = 0;      /* bytes in inbuf */
    size_t overlong = 0; /* > 0: inside an overlong line of this many bytes so far */
    size_t keep = 0;     /* prefix of the overlong line kept at inbuf[0..keep) */
    int eof = 0;
    while (!eof) {
        ssize_t r = read(fd, inbuf + len, IN_CAP - len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            perror("edumatcher-replay: read");
            return 1;
        }
        if (r == 0)
            eof = 1;
        size_t end = len + (size_t)r, start = 0;
        if (overlong) {
            /* the kept prefix sits at inbuf[0..keep); skip until '\n' */
            char *nl = memchr(inbuf + keep, '\n', end - keep);
            if (!nl && !eof) {
                overlong += end - keep;
                len = keep;
                continue;
            }
            size_t upto = nl ? (size_t)(nl - inbuf) : end;
            overlong += upto - keep;
            handle_line(e, inbuf, keep, overlong);
            overlong = 0;
            start = nl ? upto + 1 : end;
        }
        for (;;) {
            char *nl = memchr(inbuf + start, '\n', end - start);
            if (!nl)
                break;
            handle_line(e, inbuf + start, (size_t)(nl - (inbuf + start)),
                        (size_t)(nl - (inbuf + start)));
            start = (size_t)(nl - inbuf) + 1;
        }
        size_t rest = end - start;
        if (eof) {
            if (rest)
                handle_line(e, inbuf + start, rest, rest);
            break;
        }
        if (rest == IN_CAP) {
            /* a line longer than the buffer: keep a prefix with its gw id */
            keep = EM_GW_MAX + 2;
            overlong = rest;
            len = keep;
            continue;
        }
        memmove(inbuf, inbuf + start, rest);
        len = rest;
    }
    flush_out();
    em_engine_free(e);
    if (fd != STDIN_FILENO)
        close(fd);
    return 0;
}
