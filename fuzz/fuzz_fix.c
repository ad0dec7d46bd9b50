/*
 * libFuzzer target for the FIX 4.4 codec and session layer
 * (edumatcher/gateway/fix/).
 *
 * First byte even: the input is raw wire bytes. Every message em_fix_frame
 * accepts must decode (or report a fault) without reading outside it, and
 * what decodes cleanly must build back to a message that frames and
 * decodes to the same fields. Then the bytes go, in two chunks split at a
 * byte the input chooses, to a fresh session.
 * First byte odd: the rest is split on '\n' into message bodies
 * ("35=...|34=...|", '|' for SOH), each framed with a right BodyLength
 * and CheckSum and fed to a session after a valid Logon, so the fuzzer
 * reaches the sequence-number, resend and reset logic, not only framing.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edumatcher/gateway/fix/fix_codec.h"
#include "edumatcher/gateway/fix/fix_session.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char store_dir[64];
static struct em_fix_session_config cfg = {
    .comp_id = "EDUMATCHER",
    .store_dir = store_dir,
    .logon_timeout_ns = 10000000000ull,
    .logout_timeout_ns = 2000000000ull,
    .max_heartbtint = 3600,
};

static void f_send(void *ctx, const char *buf, size_t len)
{
    size_t n;
    (void)ctx;
    if (em_fix_frame(buf, len, &n) != 0 || n != len)
        abort(); /* the session only ever writes valid messages */
}

static int f_logon(void *ctx, const struct em_fix_msg *m, const char **why)
{
    (void)ctx;
    (void)m;
    (void)why;
    return 0;
}

static void f_app(void *ctx, const struct em_fix_msg *m)
{
    (void)ctx;
    (void)m;
}

static void f_close(void *ctx, const char *why)
{
    (void)ctx;
    (void)why;
}

static const struct em_fix_session_ops ops = {f_send, f_logon, f_app, f_close};
static struct em_fix_session sess;

static void check_message(const char *buf, size_t len)
{
    static struct em_fix_msg m, m2;
    if (em_fix_decode(buf, len, &m) != 0)
        return;
    static char out[EM_FIX_MSG_MAX + 64];
    struct em_fix_out o;
    em_fix_begin(&o, out, sizeof out, m.type);
    for (unsigned i = 1; i < m.nfields; i++)
        em_fix_add_str(&o, m.fields[i].tag, m.buf + m.fields[i].off, m.fields[i].len);
    size_t n = em_fix_finish(&o), fl;
    if (n == 0 || em_fix_frame(out, n, &fl) != 0 || fl != n || em_fix_decode(out, n, &m2) != 0 ||
        m2.nfields != m.nfields || strcmp(m2.type, m.type) != 0)
        abort();
    for (unsigned i = 0; i < m.nfields; i++)
        if (m2.fields[i].tag != m.fields[i].tag || m2.fields[i].len != m.fields[i].len ||
            memcmp(m2.buf + m2.fields[i].off, m.buf + m.fields[i].off, m.fields[i].len) != 0)
            abort();
}

static size_t feed(const char *buf, size_t len, uint64_t now)
{
    return em_fix_session_input(&sess, buf, len, now);
}

static void raw(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data + 1;
    size_t len = size - 1, at = 0;
    while (at < len) {
        size_t n;
        int rc = em_fix_frame(buf + at, len - at, &n);
        if (rc == EM_FIX_FRAME_MORE)
            break;
        if (rc == 0)
            check_message(buf + at, n);
        at += n;
    }
    em_fix_session_init(&sess, &cfg, &ops, NULL, 1);
    size_t cut = len ? data[0] % (len + 1) : 0;
    size_t used = feed(buf, cut, 2);
    /* the caller keeps what was not consumed and adds the rest */
    static char again[2 * EM_FIX_MSG_MAX];
    size_t keep = cut - used;
    size_t rest = len - cut < EM_FIX_MSG_MAX ? len - cut : EM_FIX_MSG_MAX;
    if (keep <= EM_FIX_MSG_MAX) {
        memcpy(again, buf + used, keep);
        memcpy(again + keep, buf + cut, rest);
        feed(again, keep + rest, 3);
    }
    em_fix_session_tick(&sess, 40000000000ull);
    em_fix_session_end(&sess);
}

static size_t frame_body(char *out, const char *body, size_t bl)
{
    int h = snprintf(out, 32, "8=FIX.4.4\0019=%zu\001", bl);
    for (size_t i = 0; i < bl; i++)
        out[h + (int)i] = body[i] == '|' ? '\001' : body[i];
    unsigned sum = 0;
    for (size_t i = 0; i < (size_t)h + bl; i++)
        sum += (unsigned char)out[i];
    snprintf(out + h + bl, 8, "10=%03u\001", sum % 256);
    return (size_t)h + bl + 7;
}

static void bodies(const uint8_t *data, size_t size)
{
    static const char logon[] =
        "35=A|49=F1|56=EDUMATCHER|34=1|52=20261201-12:00:00.000|98=0|108=30|141=Y|";
    static char out[EM_FIX_MSG_MAX + 64];
    em_fix_session_init(&sess, &cfg, &ops, NULL, 1);
    feed(out, frame_body(out, logon, sizeof logon - 1), 1);
    const char *p = (const char *)data + 1, *end = (const char *)data + size;
    uint64_t now = 2;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t bl = (size_t)((nl ? nl : end) - p);
        if (bl > 0 && bl < EM_FIX_MSG_MAX - 64)
            feed(out, frame_body(out, p, bl), now);
        now += 7000000000ull; /* 7 s a message: the timers fire too */
        em_fix_session_tick(&sess, now);
        p += bl + 1;
    }
    em_fix_session_end(&sess);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!store_dir[0]) {
        snprintf(store_dir, sizeof store_dir, "/tmp/fuzz_fix.XXXXXX");
        if (!mkdtemp(store_dir))
            abort();
    }
    if (size == 0)
        return 0;
    if (data[0] % 2 == 0)
        raw(data, size);
    else
        bodies(data, size);
    return 0;
}
