/*
 * CURVE keys, allow-lists and the ZAP handler (see curve.h).
 *
 * ZAP (ZeroMQ RFC 27): libzmq sends the handler, for each handshake on a
 * socket with a ZAP domain, a request of frames
 *   version "1.0" | request id | domain | address | routing id |
 *   mechanism | credentials...   (CURVE: one frame, the 32-byte key)
 * and waits for the reply
 *   version | request id | status "200"/"400" | text | user id | metadata
 */
#include "edumatcher/bus/curve.h"
#include "edumatcher/bus/zmq_bus.h"

#include "core/error.h"
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

static const char z85_chars[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                ".-:+=^!/*?&<>()[]{}@%$#";

bool em_curve_available(void)
{
    return zmq_has("curve") != 0;
}

bool em_curve_z85_valid(const char *s, size_t len)
{
    if (len != EM_CURVE_Z85_LEN)
        return false;
    for (size_t i = 0; i < len; i++)
        if (s[i] == '\0' || !strchr(z85_chars, s[i]))
            return false;
    /* Each 5-character group must decode to at most 2^32 - 1. */
    for (size_t g = 0; g < len; g += 5) {
        uint64_t v = 0;
        for (size_t i = 0; i < 5; i++)
            v = v * 85 + (uint64_t)(strchr(z85_chars, s[g + i]) - z85_chars);
        if (v > UINT32_MAX)
            return false;
    }
    return true;
}

/* Read at most cap - 1 bytes of path into buf (NUL-terminated). Returns
 * the length or a CORE_E* code. */
static int read_small(const char *path, char *buf, size_t cap, struct stat *st)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? CORE_ENOTFOUND : core_from_errno(errno);
    if (st && fstat(fd, st) != 0) {
        close(fd);
        return CORE_EIO;
    }
    size_t n = 0;
    while (n < cap - 1) {
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            close(fd);
            return CORE_EIO;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    return (int)n;
}

/* The first word of text (up to blanks or a newline). */
static size_t first_word(const char *s, size_t len)
{
    size_t n = 0;
    while (n < len && s[n] != ' ' && s[n] != '\t' && s[n] != '\r' && s[n] != '\n')
        n++;
    return n;
}

static int write_file(const char *path, const char *text, int flags, unsigned mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, mode);
    if (fd < 0)
        return core_from_errno(errno);
    size_t len = strlen(text);
    bool ok = write(fd, text, len) == (ssize_t)len && fsync(fd) == 0;
    close(fd);
    return ok ? 0 : CORE_EIO;
}

static int create_pair(const char *path)
{
    char pub[EM_CURVE_Z85_LEN + 1], sec[EM_CURVE_Z85_LEN + 2];
    if (zmq_curve_keypair(pub, sec) != 0)
        return CORE_EIO;
    sec[EM_CURVE_Z85_LEN] = '\n';
    sec[EM_CURVE_Z85_LEN + 1] = '\0';
    /* O_EXCL: two processes starting at once never overwrite each other's
     * secret; the loser reads the winner's. */
    int rc = write_file(path, sec, O_EXCL, 0600);
    explicit_bzero(sec, sizeof sec);
    return rc == CORE_EEXISTS ? 0 : rc;
}

int em_curve_key_load(const char *path, bool create, struct em_curve_pair *out)
{
    if (!em_curve_available())
        return CORE_EINVAL;
    char buf[128];
    struct stat st;
    int n = read_small(path, buf, sizeof buf, &st);
    if (n == CORE_ENOTFOUND && create) {
        int rc = create_pair(path);
        if (rc)
            return rc;
        n = read_small(path, buf, sizeof buf, &st);
    }
    if (n < 0)
        return n;
    int rc = 0;
    size_t w = first_word(buf, (size_t)n);
    if (st.st_mode & 0077)
        rc = CORE_EPROTO;
    else if (!em_curve_z85_valid(buf, w))
        rc = CORE_EINVAL;
    if (rc == 0) {
        memset(out->public_key, 0, sizeof out->public_key);
        memcpy(out->secret_key, buf, EM_CURVE_Z85_LEN);
        out->secret_key[EM_CURVE_Z85_LEN] = '\0';
        if (zmq_curve_public(out->public_key, out->secret_key) != 0)
            rc = CORE_EINVAL;
    }
    explicit_bzero(buf, sizeof buf);
    if (rc)
        return rc;
    /* The public half beside it, for the operator (rewritten each time:
     * derived, never trusted). Failing to write it is not fatal. */
    char pubpath[4096], pubtext[EM_CURVE_Z85_LEN + 2];
    if ((size_t)snprintf(pubpath, sizeof pubpath, "%s.pub", path) < sizeof pubpath) {
        snprintf(pubtext, sizeof pubtext, "%s\n", out->public_key);
        char old[64];
        if (read_small(pubpath, old, sizeof old, NULL) < 0 || strcmp(old, pubtext) != 0) {
            unlink(pubpath);
            write_file(pubpath, pubtext, O_TRUNC, 0644);
        }
    }
    return 0;
}

int em_curve_pair_new(struct em_curve_pair *out)
{
    memset(out, 0, sizeof *out);
    if (!em_curve_available() || zmq_curve_keypair(out->public_key, out->secret_key) != 0)
        return CORE_EINVAL;
    return 0;
}

int em_curve_public_load(const char *arg, char *out)
{
    size_t len = strlen(arg);
    if (em_curve_z85_valid(arg, len)) {
        memcpy(out, arg, len + 1);
        return 0;
    }
    char buf[256];
    int n = read_small(arg, buf, sizeof buf, NULL);
    if (n < 0)
        return n == CORE_ENOTFOUND && len == EM_CURVE_Z85_LEN ? CORE_EINVAL : n;
    size_t w = first_word(buf, (size_t)n);
    if (!em_curve_z85_valid(buf, w))
        return CORE_EINVAL;
    memcpy(out, buf, w);
    out[w] = '\0';
    return 0;
}

int em_curve_allow_parse(const char *text, size_t len, struct em_curve_allow *out, int *bad_line)
{
    out->count = 0;
    *bad_line = 0;
    int line = 0;
    for (size_t i = 0; i < len;) {
        line++;
        const char *nl = memchr(text + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - text) : len;
        size_t p = i;
        while (p < end && (text[p] == ' ' || text[p] == '\t' || text[p] == '\r'))
            p++;
        if (p < end && text[p] != '#') {
            size_t w = first_word(text + p, end - p);
            if (!em_curve_z85_valid(text + p, w)) {
                *bad_line = line;
                return CORE_EINVAL;
            }
            if (out->count == EM_CURVE_MAX_KEYS) {
                *bad_line = line;
                return CORE_ETOOBIG;
            }
            char z[EM_CURVE_Z85_LEN + 1];
            memcpy(z, text + p, EM_CURVE_Z85_LEN);
            z[EM_CURVE_Z85_LEN] = '\0';
            if (!zmq_z85_decode(out->key[out->count], z)) {
                *bad_line = line;
                return CORE_EINVAL;
            }
            out->count++;
        }
        i = end + 1;
    }
    return 0;
}

int em_curve_allow_load(const char *path, struct em_curve_allow *out, int *bad_line)
{
    enum { CAP = 1 << 20 };
    *bad_line = 0;
    char *buf = malloc(CAP + 1);
    if (!buf)
        return CORE_ENOMEM;
    int n = read_small(path, buf, CAP + 1, NULL);
    int rc = n < 0 ? n : em_curve_allow_parse(buf, (size_t)n, out, bad_line);
    free(buf);
    return rc;
}

bool em_curve_allowed(const struct em_curve_allow *a, const uint8_t key[32])
{
    for (unsigned i = 0; i < a->count; i++)
        if (memcmp(a->key[i], key, 32) == 0)
            return true;
    return false;
}

int em_curve_client_config(const char *who, const char *key_opt, const char *key_file,
                           const char *server_opt, const char *server_key,
                           struct em_curve_pair *out)
{
    memset(out, 0, sizeof *out);
    if (!server_key[0] && !key_file[0])
        return CORE_ENOTFOUND;
    if (!key_file[0]) {
        CORE_WARN("%s: --%s needs --%s (this process's own CURVE key)", who, server_opt, key_opt);
        return CORE_EINVAL;
    }
    if (!em_curve_available()) {
        CORE_WARN("%s: this libzmq has no CURVE support", who);
        return CORE_EINVAL;
    }
    int rc = server_key[0] ? em_curve_public_load(server_key, out->server_key) : 0;
    if (rc) {
        CORE_WARN("%s: --%s %s: not a Z85 public key or a file starting with one (%s)", who,
                  server_opt, server_key, core_strerror(rc));
        return rc;
    }
    rc = em_curve_key_load(key_file, true, out);
    if (rc) {
        CORE_WARN("%s: --%s %s: %s", who, key_opt, key_file,
                  rc == CORE_EPROTO   ? "readable by others (chmod 600 it)"
                  : rc == CORE_EINVAL ? "not a Z85 secret key"
                                      : core_strerror(rc));
        return rc;
    }
    /* A key file alone makes the pair (for the server's allow-list) but
     * connects without CURVE. */
    return server_key[0] ? 0 : CORE_ENOTFOUND;
}

int em_curve_client_setup(const char *who, const char *curve_key, const char *engine_key,
                          const char *monitor_key, struct em_curve_client *out)
{
    int rc = em_curve_client_config(who, "curve-key", curve_key, "engine-key", engine_key,
                                    &out->engine_pair);
    if (rc && rc != CORE_ENOTFOUND)
        return rc;
    out->engine = rc ? NULL : &out->engine_pair;
    rc = em_curve_client_config(who, "curve-key", curve_key, "monitor-key", monitor_key,
                                &out->monitor_pair);
    if (rc && rc != CORE_ENOTFOUND)
        return rc;
    out->monitor = rc ? NULL : &out->monitor_pair;
    return 0;
}

void em_curve_warn_open(const char *who, const char *what, const char *endpoint)
{
    if (strncmp(endpoint, "tcp://", 6) == 0)
        CORE_WARN("%s: %s %s has no CURVE keys: anyone who can reach it may connect "
                  "(docs/edumatcher-exchange.md, Security)",
                  who, what, endpoint);
}

/* ---- the ZAP handler ---- */

struct em_curve_zap {
    pthread_t thread;
    void *sock;
    struct em_curve_zap_stats stats;
    struct em_curve_allow allow;
    /* reloading (path[0] != 0): what the file was when last read */
    char path[4096];
    struct stat seen;
    struct em_curve_allow next;
};

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Before a handshake is answered: the allow-list file changed? */
static void maybe_reload(struct em_curve_zap *z)
{
    struct stat st;
    if (!z->path[0] || stat(z->path, &st) != 0 || same_file(&st, &z->seen))
        return;
    z->seen = st;
    int line;
    int rc = em_curve_allow_load(z->path, &z->next, &line);
    if (rc) {
        if (line)
            CORE_WARN("curve: %s line %d: not a Z85 public key; the list in force is kept", z->path,
                      line);
        else
            CORE_WARN("curve: %s: %s; the list in force is kept", z->path, core_strerror(rc));
        return;
    }
    memcpy(&z->allow, &z->next, sizeof z->allow);
    __atomic_fetch_add(&z->stats.reloads, 1, __ATOMIC_RELAXED);
    CORE_INFO("curve: %s re-read: %u allowed keys", z->path, z->allow.count);
}

#define ZAP_FRAMES 8 /* a CURVE request has 7 */

static void zap_reply(void *sock, const zmq_msg_t *req_id, const char *status, const char *text)
{
    zmq_send(sock, "1.0", 3, ZMQ_SNDMORE);
    zmq_send(sock, zmq_msg_data((zmq_msg_t *)req_id), zmq_msg_size(req_id), ZMQ_SNDMORE);
    zmq_send(sock, status, 3, ZMQ_SNDMORE);
    zmq_send(sock, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(sock, "", 0, ZMQ_SNDMORE); /* user id */
    zmq_send(sock, "", 0, 0);           /* metadata */
}

static bool frame_is(const zmq_msg_t *m, const char *s)
{
    size_t n = strlen(s);
    return zmq_msg_size(m) == n && memcmp(zmq_msg_data((zmq_msg_t *)m), s, n) == 0;
}

static void *zap_main(void *arg)
{
    struct em_curve_zap *z = arg;
    for (;;) {
        zmq_msg_t f[ZAP_FRAMES];
        int nf = 0;
        bool more = true, term = false;
        while (more) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, z->sock, 0) < 0) {
                zmq_msg_close(&m);
                if (errno == EINTR)
                    continue; /* signals are blocked here; kept for safety */
                term = true;  /* ETERM: the context is ending */
                break;
            }
            more = zmq_msg_more(&m);
            if (nf < ZAP_FRAMES)
                f[nf++] = m;
            else
                zmq_msg_close(&m);
        }
        if (term) {
            for (int i = 0; i < nf; i++)
                zmq_msg_close(&f[i]);
            break;
        }
        maybe_reload(z);
        bool ok = nf == 7 && frame_is(&f[0], "1.0") && frame_is(&f[5], "CURVE") &&
                  zmq_msg_size(&f[6]) == 32 && em_curve_allowed(&z->allow, zmq_msg_data(&f[6]));
        if (nf >= 2) {
            if (ok)
                zap_reply(z->sock, &f[1], "200", "OK");
            else
                zap_reply(z->sock, &f[1], "400", "not an allowed key");
            __atomic_fetch_add(ok ? &z->stats.allowed : &z->stats.denied, 1, __ATOMIC_RELAXED);
        } else {
            /* Not a request a REP can answer meaningfully; reply anyway to
             * keep the REP's receive/send alternation. */
            zmq_msg_t empty;
            zmq_msg_init(&empty);
            zap_reply(z->sock, &empty, "400", "malformed");
            zmq_msg_close(&empty);
        }
        for (int i = 0; i < nf; i++)
            zmq_msg_close(&f[i]);
    }
    zmq_close(z->sock);
    return NULL;
}

int em_curve_zap_start(struct em_curve_zap **out, void *zctx, const struct em_curve_allow *allow,
                       const char *path)
{
    struct em_curve_zap *z = calloc(1, sizeof *z);
    if (!z)
        return CORE_ENOMEM;
    memcpy(&z->allow, allow, sizeof z->allow);
    /* The file as it is now is what allow came from (a change between the
     * caller's read and this stat is picked up at the next change). */
    if (path && strlen(path) < sizeof z->path && stat(path, &z->seen) == 0)
        memcpy(z->path, path, strlen(path) + 1);
    z->sock = zmq_socket(zctx, ZMQ_REP);
    if (!z->sock) {
        free(z);
        return CORE_EIO;
    }
    int linger = 0;
    zmq_setsockopt(z->sock, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(z->sock, "inproc://zeromq.zap.01") != 0) {
        int rc = errno == EADDRINUSE ? CORE_EBUSY : CORE_EIO;
        zmq_close(z->sock);
        free(z);
        return rc;
    }
    /* The thread takes no signals (they belong to the process's loop), so
     * its receives are never interrupted. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int prc = pthread_create(&z->thread, NULL, zap_main, z);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (prc != 0) {
        zmq_close(z->sock);
        free(z);
        return CORE_EIO;
    }
    *out = z;
    return 0;
}

const struct em_curve_zap_stats *em_curve_zap_stats(const struct em_curve_zap *z)
{
    return &z->stats;
}

int em_curve_zap_metrics(const struct em_curve_zap *z, struct core_metrics *m)
{
    /* written by the handler's thread (relaxed atomics), read by the
     * beacon: a rough figure, as the header says */
    const struct em_curve_zap_stats *st = em_curve_zap_stats(z);
    int rc = core_metrics_counter(m, "zap_allowed", &st->allowed);
    if (rc == 0)
        rc = core_metrics_counter(m, "zap_denied", &st->denied);
    if (rc == 0)
        rc = core_metrics_counter(m, "zap_reloads", &st->reloads);
    return rc;
}

void em_curve_zap_free(struct em_curve_zap *z)
{
    if (!z)
        return;
    pthread_join(z->thread, NULL);
    free(z);
}

/* ---- revocation, from the process's loop ---- */

void em_curve_watch_init(struct em_curve_watch *w, const char *path,
                         const struct em_curve_allow *allow)
{
    snprintf(w->path, sizeof w->path, "%s", path);
    memcpy(&w->allow, allow, sizeof w->allow);
    if (stat(w->path, &w->seen) != 0)
        memset(&w->seen, 0, sizeof w->seen);
}

bool em_curve_watch_revoked(struct em_curve_watch *w)
{
    struct stat st;
    int line;
    if (stat(w->path, &st) != 0 || same_file(&st, &w->seen))
        return false;
    w->seen = st;
    if (em_curve_allow_load(w->path, &w->next, &line) != 0)
        return false;
    bool revoked = false;
    for (unsigned i = 0; i < w->allow.count && !revoked; i++)
        revoked = !em_curve_allowed(&w->next, w->allow.key[i]);
    memcpy(&w->allow, &w->next, sizeof w->allow);
    return revoked;
}

void em_curve_guard_init(struct em_curve_guard *g, const char *who, const char *path,
                         const struct em_curve_allow *allow)
{
    em_curve_watch_init(&g->watch, path, allow);
    g->who = who;
    g->n = 0;
}

int em_curve_guard_add(struct em_curve_guard *g, struct em_bus_sock *s, const char *what)
{
    if (g->n == EM_CURVE_GUARD_SOCKS)
        return CORE_ETOOBIG;
    g->s[g->n].sock = s;
    g->s[g->n].what = what;
    g->s[g->n].endpoint[0] = '\0';
    g->s[g->n].unbound = false;
    g->n++;
    return 0;
}

/* A key left the list: its peer's connection, already up, must end too.
 * Unbinding closes every connection accepted on the socket; the clients
 * reconnect (ZeroMQ does, by itself) and each passes ZAP with the list as
 * it is now. The allowed ones miss what was sent meanwhile (a PUB's
 * subscribers see the gap in their seq; beacons simply come again). */
static void guard_unbind_all(struct em_curve_guard *g)
{
    char names[128] = "";
    for (unsigned i = 0; i < g->n; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? " and " : "",
                 g->s[i].what);
    CORE_WARN("%s: a key left %s: closing every connection to %s; the allowed clients reconnect",
              g->who, g->watch.path, names);
    for (unsigned i = 0; i < g->n; i++) {
        int rc = em_bus_unbind(g->s[i].sock, g->s[i].endpoint, sizeof g->s[i].endpoint);
        g->s[i].unbound = rc == 0;
        if (rc)
            CORE_WARN("%s: cannot unbind %s: %s (its connections stay)", g->who, g->s[i].what,
                      core_strerror(rc));
    }
}

int em_curve_guard_step(struct em_curve_guard *g)
{
    bool busy = false;
    for (unsigned i = 0; i < g->n; i++)
        busy |= g->s[i].unbound;
    if (!busy && em_curve_watch_revoked(&g->watch))
        guard_unbind_all(g);
    for (unsigned i = 0; i < g->n; i++) {
        if (!g->s[i].unbound)
            continue;
        int rc = em_bus_bind_again(g->s[i].sock, g->s[i].endpoint);
        if (rc == 0) {
            g->s[i].unbound = false;
            CORE_INFO("%s: %s %s bound again", g->who, g->s[i].what, g->s[i].endpoint);
        } else if (rc != CORE_EBUSY) {
            CORE_WARN("%s: cannot bind %s again: %s", g->who, g->s[i].endpoint, core_strerror(rc));
            return rc;
        }
    }
    return 0;
}
