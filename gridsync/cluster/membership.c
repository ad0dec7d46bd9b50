/*
 * The membership's text, file and start-up fetch (membership.h).
 */
#include "gridsync/cluster/membership.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/addr.h"
#include "core/error.h"

#define HEADER "gridsync-membership 1"

static int add_line(struct core_buf *out, const char *key, const char *value)
{
    char line[GS_RING_NAME_MAX + 32];
    int n = snprintf(line, sizeof(line), "%s %s\n", key, value);
    return core_buf_append(out, line, (size_t)n);
}

int gs_membership_format(const struct gs_membership *m, struct core_buf *out)
{
    char num[24];
    int rc = core_buf_append(out, HEADER "\n", sizeof(HEADER));
    snprintf(num, sizeof(num), "%llu", (unsigned long long)m->version);
    rc = rc ? rc : add_line(out, "version", num);
    snprintf(num, sizeof(num), "%u", m->replicas);
    rc = rc ? rc : add_line(out, "replicas", num);
    if (m->self[0])
        rc = rc ? rc : add_line(out, "self", m->self);
    for (unsigned i = 0; i < m->n && !rc; i++)
        rc = add_line(out, "node", m->nodes[i]);
    if (m->change != GS_CHANGE_NONE && !rc) {
        char v[GS_RING_NAME_MAX + 8];
        snprintf(v, sizeof(v), "%s %s", m->change == GS_CHANGE_ADD ? "add" : "remove",
                 m->change_node);
        rc = add_line(out, "change", v);
    }
    return rc;
}

/* A name: 1..GS_RING_NAME_MAX-1 bytes, printable, no space. */
static bool take_name(char *dst, const char *p, size_t len)
{
    if (len == 0 || len >= GS_RING_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (p[i] <= ' ' || p[i] > '~')
            return false;
    memcpy(dst, p, len);
    dst[len] = '\0';
    return true;
}

static bool take_u64(uint64_t *out, const char *p, size_t len)
{
    if (len == 0 || len > 19)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    *out = v;
    return true;
}

static bool is_key(const char *p, size_t len, const char *key)
{
    return len == strlen(key) && memcmp(p, key, len) == 0;
}

static int find(const struct gs_membership *m, const char *name)
{
    for (unsigned i = 0; i < m->n; i++)
        if (strcmp(m->nodes[i], name) == 0)
            return (int)i;
    return -1;
}

int gs_membership_parse(struct gs_membership *m, const char *text, size_t len)
{
    memset(m, 0, sizeof(*m));
    size_t hl = sizeof(HEADER) - 1;
    if (len < hl + 1 || memcmp(text, HEADER, hl) != 0 || text[hl] != '\n')
        return CORE_EINVAL;
    bool have_version = false, have_replicas = false;
    size_t off = hl + 1;
    while (off < len) {
        const char *line = text + off;
        const char *nl = memchr(line, '\n', len - off);
        if (!nl)
            return CORE_EINVAL; /* every line ends with a newline */
        size_t ll = (size_t)(nl - line);
        off += ll + 1;
        const char *sp = memchr(line, ' ', ll);
        if (!sp)
            return CORE_EINVAL;
        size_t kl = (size_t)(sp - line);
        const char *v = sp + 1;
        size_t vl = ll - kl - 1;
        uint64_t num;
        if (is_key(line, kl, "version")) {
            if (have_version || !take_u64(&num, v, vl))
                return CORE_EINVAL;
            m->version = num;
            have_version = true;
        } else if (is_key(line, kl, "replicas")) {
            if (have_replicas || !take_u64(&num, v, vl) || num < 1 || num > GS_RING_MAX_REPLICAS)
                return CORE_EINVAL;
            m->replicas = (unsigned)num;
            have_replicas = true;
        } else if (is_key(line, kl, "self")) {
            if (m->self[0] || !take_name(m->self, v, vl))
                return CORE_EINVAL;
        } else if (is_key(line, kl, "node")) {
            if (m->n == GS_RING_MAX_NODES || !take_name(m->nodes[m->n], v, vl) ||
                find(m, m->nodes[m->n]) >= 0)
                return CORE_EINVAL;
            m->n++;
        } else if (is_key(line, kl, "change")) {
            const char *sp2 = memchr(v, ' ', vl);
            if (m->change != GS_CHANGE_NONE || !sp2)
                return CORE_EINVAL;
            size_t wl = (size_t)(sp2 - v);
            if (is_key(v, wl, "add"))
                m->change = GS_CHANGE_ADD;
            else if (is_key(v, wl, "remove"))
                m->change = GS_CHANGE_REMOVE;
            else
                return CORE_EINVAL;
            if (!take_name(m->change_node, sp2 + 1, vl - wl - 1))
                return CORE_EINVAL;
        } else {
            return CORE_EINVAL;
        }
    }
    if (!have_version || !have_replicas || m->n == 0)
        return CORE_EINVAL;
    /* The change's node is checked once every node line is read (the
     * lines may come in any order). */
    if (m->change == GS_CHANGE_ADD && (find(m, m->change_node) >= 0 || m->n == GS_RING_MAX_NODES))
        return CORE_EINVAL;
    if (m->change == GS_CHANGE_REMOVE && (find(m, m->change_node) < 0 || m->n < 2))
        return CORE_EINVAL;
    return 0;
}

static void path_of(char *out, size_t len, const char *dir, const char *name)
{
    snprintf(out, len, "%s/%s", dir[0] ? dir : ".", name);
}

static int write_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return CORE_EIO;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* mkdir -p: the data directory may not exist before the first start. */
static int make_dir(const char *dir)
{
    char path[4096];
    if (!dir[0] || snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path))
        return dir[0] ? CORE_EIO : 0;
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return CORE_EIO;
        *p = '/';
    }
    return mkdir(path, 0755) != 0 && errno != EEXIST ? CORE_EIO : 0;
}

bool gs_membership_exists(const char *dir)
{
    char path[4096];
    path_of(path, sizeof(path), dir, GS_MEMBERSHIP_FILE);
    return access(path, F_OK) == 0;
}

int gs_membership_save(const struct gs_membership *m, const char *dir)
{
    if (make_dir(dir))
        return CORE_EIO;
    struct core_buf b = {0};
    if (gs_membership_format(m, &b)) {
        core_buf_free(&b);
        return CORE_ENOMEM;
    }
    char tmp[4096], path[4096];
    path_of(tmp, sizeof(tmp), dir, GS_MEMBERSHIP_FILE ".tmp");
    path_of(path, sizeof(path), dir, GS_MEMBERSHIP_FILE);
    int rc = CORE_EIO;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        rc = write_all(fd, b.data, b.len);
        if (rc == 0 && fsync(fd) != 0)
            rc = CORE_EIO;
        if (close(fd) != 0)
            rc = CORE_EIO;
        if (rc == 0 && rename(tmp, path) != 0)
            rc = CORE_EIO;
        if (rc != 0)
            (void)unlink(tmp);
    }
    core_buf_free(&b);
    if (rc == 0) {
        /* The rename is durable once the directory is. */
        int dfd = open(dir[0] ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || fsync(dfd) != 0)
            rc = CORE_EIO;
        if (dfd >= 0)
            close(dfd);
    }
    return rc;
}

int gs_membership_load(struct gs_membership *m, const char *dir)
{
    char path[4096];
    path_of(path, sizeof(path), dir, GS_MEMBERSHIP_FILE);
    FILE *f = fopen(path, "rb");
    if (!f)
        return errno == ENOENT ? CORE_ENOTFOUND : CORE_EIO;
    /* Bounded: a node line is at most GS_RING_NAME_MAX + 5 bytes. */
    size_t cap = (size_t)(GS_RING_MAX_NODES + 8) * (GS_RING_NAME_MAX + 16);
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        return CORE_ENOMEM;
    }
    size_t len = fread(buf, 1, cap, f);
    int rc = ferror(f) ? CORE_EIO : len == cap ? CORE_EINVAL : 0;
    fclose(f);
    if (rc == 0)
        rc = gs_membership_parse(m, buf, len);
    free(buf);
    return rc;
}

int gs_membership_parse_reply(struct gs_membership *m, const char *buf, size_t len)
{
    if (len == 0)
        return CORE_EINCOMPLETE;
    if (buf[0] != '$')
        return CORE_EPROTO;
    const char *crlf = NULL;
    for (size_t i = 1; i + 1 < len; i++)
        if (buf[i] == '\r' && buf[i + 1] == '\n') {
            crlf = buf + i;
            break;
        }
    if (!crlf)
        return len > 24 ? CORE_EPROTO : CORE_EINCOMPLETE;
    uint64_t blen;
    if (!take_u64(&blen, buf + 1, (size_t)(crlf - buf - 1)) ||
        blen > (uint64_t)(GS_RING_MAX_NODES + 8) * (GS_RING_NAME_MAX + 16))
        return CORE_EPROTO;
    size_t start = (size_t)(crlf - buf) + 2;
    if (len < start + blen + 2)
        return CORE_EINCOMPLETE;
    if (buf[start + blen] != '\r' || buf[start + blen + 1] != '\n')
        return CORE_EPROTO;
    return gs_membership_parse(m, buf + start, (size_t)blen);
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for fd to be ready for ev until the deadline. 0 or CORE_ETIMEOUT. */
static int wait_fd(int fd, short ev, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - mono_ms();
        if (left <= 0)
            return CORE_ETIMEOUT;
        struct pollfd p = {fd, ev, 0};
        int r = poll(&p, 1, (int)left);
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return CORE_EIO;
    }
}

int gs_membership_fetch(struct gs_membership *m, const char *seed, int timeout_ms, char *err,
                        size_t errlen)
{
    char host[GS_RING_NAME_MAX];
    int port;
    struct sockaddr_storage ss;
    if (core_addr_split(seed, strlen(seed), host, sizeof(host), &port) != 0 || port <= 0 ||
        core_addr_ip(host, port, &ss) != 0) {
        snprintf(err, errlen, "cluster-seed: bad address '%s' (want IP:port)", seed);
        return CORE_EINVAL;
    }
    int64_t deadline = mono_ms() + timeout_ms;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "cluster-seed %s: socket: %s", seed, strerror(errno));
        return CORE_EIO;
    }
    socklen_t sl =
        ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    int rc = 0;
    if (connect(fd, (struct sockaddr *)&ss, sl) != 0) {
        if (errno != EINPROGRESS)
            rc = CORE_EIO;
        else if ((rc = wait_fd(fd, POLLOUT, deadline)) == 0) {
            int soerr = 0;
            socklen_t el = sizeof(soerr);
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &el) != 0 || soerr != 0)
                rc = CORE_EIO;
        }
    }
    static const char req[] = "*2\r\n$7\r\nCLUSTER\r\n$10\r\nMEMBERSHIP\r\n";
    size_t sent = 0;
    while (rc == 0 && sent < sizeof(req) - 1) {
        ssize_t w = send(fd, req + sent, sizeof(req) - 1 - sent, MSG_NOSIGNAL);
        if (w > 0)
            sent += (size_t)w;
        else if (w < 0 && (errno == EAGAIN || errno == EINTR))
            rc = wait_fd(fd, POLLOUT, deadline);
        else
            rc = CORE_EIO;
    }
    struct core_buf in = {0};
    while (rc == 0) {
        char *p = core_buf_reserve(&in, 4096);
        if (!p) {
            rc = CORE_ENOMEM;
            break;
        }
        ssize_t r = recv(fd, p, 4096, 0);
        if (r > 0) {
            in.len += (size_t)r;
            rc = gs_membership_parse_reply(m, in.data, in.len);
            if (rc != CORE_EINCOMPLETE)
                break;
            rc = 0;
        } else if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
            rc = wait_fd(fd, POLLIN, deadline);
        } else {
            rc = CORE_EIO;
        }
    }
    close(fd);
    if (rc == CORE_EPROTO)
        snprintf(err, errlen, "cluster-seed %s: unexpected reply '%.*s'", seed,
                 (int)(in.len > 80 ? 80 : in.len), in.data ? in.data : "");
    else if (rc == CORE_EINVAL)
        snprintf(err, errlen, "cluster-seed %s: malformed membership", seed);
    else if (rc)
        snprintf(err, errlen, "cluster-seed %s: %s", seed, core_strerror(rc));
    core_buf_free(&in);
    return rc;
}
