/*
 * The coordinator of one membership change, run by the meta leader
 * (cluster_meta.c) on a thread of its own: the steps
 * scripts/gridsync-reshard sends (docs/gridsync-cluster.md, "Join and
 * leave"), sent to the nodes' client ports over blocking connections of a
 * tiny RESP client, never from the loop.
 *
 *   1. unless some node already serves the target with no change (the
 *      change reached FINISH there): wait until every current member
 *      serves the current membership (no change, or this one), then
 *      CLUSTER ADDNODE/DELNODE NAME VERSION on every node;
 *   2. wait until every group of the target has converged (MIGRATE
 *      STATUS);
 *   3. per current group: BEGIN, EXPORT/IMPORT, SWITCH, OWN at the
 *      leaders;
 *   4. MIGRATE FINISH VERSION+1 on every node.
 *
 * Every step is repeatable and retried with backoff until it succeeds or
 * the job is stopped (the loop stops it when leadership is lost); a new
 * leader runs the change again from step 1. The thread touches nothing
 * but the job: its inputs are copied at start, its result is read by the
 * loop once done is set.
 */
#include "gridsync/cluster/cluster_internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core/addr.h"
#include "core/error.h"
#include "core/log.h"
#include "gridsync/cluster/membership.h"
#include "gridsync/protocol/resp_reply.h"

#define IO_TIMEOUT_MS  5000
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 1000
#define IMPORT_BATCH   100 /* keys per IMPORT */
/* A reply bigger than this is a broken peer: EXPORT answers a cursor's
 * worth of keys, far below it. */
#define MAX_REPLY_BYTES (64u * 1024 * 1024)

struct peer_conn {
    char name[GS_RING_NAME_MAX];
    int fd; /* -1: not connected */
    struct core_buf in;
};

struct gs_meta_job {
    uint64_t seq;
    bool add;
    char node[GS_RING_NAME_MAX];
    struct gs_membership *current; /* the membership before the change */
    struct peer_conn *conns;       /* current, then the added node */
    unsigned n_conns;
    pthread_t thread;
    bool started;
    atomic_bool stop, done;
    bool ok;
    uint64_t version; /* the version FINISH gave */
};

/* ------------------------------------------------------- a RESP client */

static void peer_close(struct peer_conn *pc)
{
    if (pc->fd >= 0)
        close(pc->fd);
    pc->fd = -1;
    pc->in.len = 0;
}

static int peer_connect(struct peer_conn *pc)
{
    char host[GS_RING_NAME_MAX];
    int port;
    if (core_addr_split(pc->name, strlen(pc->name), host, sizeof(host), &port) != 0)
        return CORE_EINVAL;
    struct sockaddr_storage ss;
    if (core_addr_ip(host, port, &ss) != 0)
        return CORE_EINVAL;
    socklen_t sl =
        ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return CORE_EIO;
    /* Linux bounds connect by the send timeout too. */
    struct timeval tv = {IO_TIMEOUT_MS / 1000, (IO_TIMEOUT_MS % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&ss, sl) != 0) {
        close(fd);
        return CORE_EIO;
    }
    pc->fd = fd;
    pc->in.len = 0;
    return 0;
}

/* Send argv as a command to pc and read its reply into *out (pointing
 * into pc->in until the next call). 0, or CORE_EIO (connection closed;
 * retrying reconnects), CORE_ENOMEM, CORE_EPROTO. */
static int peer_call(struct peer_conn *pc, unsigned argc, const char *const *argv,
                     const size_t *len, struct gs_resp_reply *out)
{
    if (pc->fd < 0 && peer_connect(pc) != 0)
        return CORE_EIO;
    struct core_buf req = {0};
    char hdr[32];
    int hl = snprintf(hdr, sizeof(hdr), "*%u\r\n", argc);
    core_buf_append(&req, hdr, (size_t)hl);
    for (unsigned i = 0; i < argc; i++) {
        hl = snprintf(hdr, sizeof(hdr), "$%zu\r\n", len[i]);
        core_buf_append(&req, hdr, (size_t)hl);
        core_buf_append(&req, argv[i], len[i]);
        core_buf_append(&req, "\r\n", 2);
    }
    if (req.oom) {
        core_buf_free(&req);
        return CORE_ENOMEM;
    }
    for (size_t off = 0; off < req.len;) {
        ssize_t w = send(pc->fd, req.data + off, req.len - off, MSG_NOSIGNAL);
        if (w <= 0) {
            core_buf_free(&req);
            peer_close(pc);
            return CORE_EIO;
        }
        off += (size_t)w;
    }
    core_buf_free(&req);
    pc->in.len = 0;
    for (;;) {
        size_t pos = 0;
        int r = pc->in.len ? gs_resp_reply_parse(pc->in.data, pc->in.len, &pos, out) : 0;
        if (r == 1)
            return 0;
        if (r < 0) {
            peer_close(pc);
            return CORE_EPROTO;
        }
        char chunk[16384];
        ssize_t n = recv(pc->fd, chunk, sizeof(chunk), 0);
        if (n <= 0 || pc->in.len + (size_t)n > MAX_REPLY_BYTES ||
            core_buf_append(&pc->in, chunk, (size_t)n) != 0) {
            peer_close(pc);
            return CORE_EIO;
        }
    }
}

/* --------------------------------------------------------------- steps */

static bool stopped(struct gs_meta_job *j)
{
    return atomic_load(&j->stop);
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Sleep the backoff, doubling it. False once the job is stopped. */
static bool backoff(struct gs_meta_job *j, unsigned *ms)
{
    if (stopped(j))
        return false;
    sleep_ms(*ms);
    *ms = *ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : *ms * 2;
    return !stopped(j);
}

static struct peer_conn *conn_of(struct gs_meta_job *j, const char *name)
{
    for (unsigned i = 0; i < j->n_conns; i++)
        if (strcmp(j->conns[i].name, name) == 0)
            return &j->conns[i];
    return NULL;
}

/* A command of string words (argv[argc]). */
static int call_words(struct peer_conn *pc, unsigned argc, const char *const *argv,
                      struct gs_resp_reply *out)
{
    size_t len[16];
    for (unsigned i = 0; i < argc; i++)
        len[i] = strlen(argv[i]);
    return peer_call(pc, argc, argv, len, out);
}

/* Send the command to every node of the change until each answers
 * without an error. False when stopped. */
static bool on_every(struct gs_meta_job *j, unsigned argc, const char *const *argv)
{
    for (unsigned i = 0; i < j->n_conns; i++) {
        unsigned wait = BACKOFF_MIN_MS, tries = 0;
        for (;;) {
            struct gs_resp_reply v;
            int rc = call_words(&j->conns[i], argc, argv, &v);
            if (rc == 0 && v.type != '-') {
                gs_resp_reply_free(&v);
                break;
            }
            if (++tries % 20 == 0)
                CORE_WARN("cluster: meta: %s %s: %s%.*s", j->conns[i].name, argv[1],
                          rc ? core_strerror(rc) : "", rc ? 0 : (int)(v.len > 200 ? 200 : v.len),
                          rc ? "" : v.p);
            if (rc == 0)
                gs_resp_reply_free(&v);
            if (!backoff(j, &wait))
                return false;
        }
    }
    return true;
}

static bool retryable(const struct gs_resp_reply *v)
{
    return gs_resp_reply_starts(v, "NOTLEADER") || gs_resp_reply_starts(v, "TRYAGAIN") ||
           gs_resp_reply_starts(v, "MOVED") || gs_resp_reply_starts(v, "CLUSTERDOWN");
}

/* Send the command to whichever node leads group (tried first, then the
 * others), until one answers without a redirect. *out is the reply and
 * *who the node (its connection buffer holds the reply). False when
 * stopped. */
static bool on_leader(struct gs_meta_job *j, const char *group, unsigned argc,
                      const char *const *argv, const size_t *len, struct gs_resp_reply *out,
                      struct peer_conn **who)
{
    unsigned wait = BACKOFF_MIN_MS, rounds = 0;
    struct peer_conn *first = conn_of(j, group);
    for (;;) {
        for (unsigned k = 0; k <= j->n_conns; k++) {
            struct peer_conn *pc = k == 0 ? first : &j->conns[k - 1];
            if (!pc || (k > 0 && pc == first))
                continue;
            int rc = peer_call(pc, argc, argv, len, out);
            if (rc != 0)
                continue;
            if (out->type != '-') {
                *who = pc;
                return true;
            }
            if (!retryable(out) && ++rounds % 20 == 0)
                CORE_WARN("cluster: meta: %s: %s %s: %.*s", pc->name, argv[2], group,
                          (int)(out->len > 200 ? 200 : out->len), out->p);
            gs_resp_reply_free(out);
        }
        if (!backoff(j, &wait))
            return false;
    }
}

static bool leader_words(struct gs_meta_job *j, const char *group, unsigned argc,
                         const char *const *argv)
{
    size_t len[16];
    for (unsigned i = 0; i < argc; i++)
        len[i] = strlen(argv[i]);
    struct gs_resp_reply v;
    struct peer_conn *who;
    if (!on_leader(j, group, argc, argv, len, &v, &who))
        return false;
    gs_resp_reply_free(&v);
    return true;
}

/* A node's CLUSTER MEMBERSHIP into m, or false. */
static bool membership_of(struct peer_conn *pc, struct gs_membership *m)
{
    const char *argv[] = {"CLUSTER", "MEMBERSHIP"};
    struct gs_resp_reply v;
    if (call_words(pc, 2, argv, &v) != 0)
        return false;
    bool ok = v.type == '$' && v.len >= 0 && gs_membership_parse(m, v.p, (size_t)v.len) == 0;
    gs_resp_reply_free(&v);
    return ok;
}

static bool same_nodes(const struct gs_membership *a, const struct gs_membership *b)
{
    if (a->n != b->n)
        return false;
    for (unsigned i = 0; i < a->n; i++) {
        bool found = false;
        for (unsigned k = 0; k < b->n && !found; k++)
            found = strcmp(a->nodes[i], b->nodes[k]) == 0;
        if (!found)
            return false;
    }
    return true;
}

static bool is_this_change(const struct gs_meta_job *j, const struct gs_membership *m)
{
    return m->change == (j->add ? GS_CHANGE_ADD : GS_CHANGE_REMOVE) &&
           strcmp(m->change_node, j->node) == 0;
}

struct views {
    struct gs_membership *m; /* one per connection */
    bool *ok;
};

static void read_views(struct gs_meta_job *j, struct views *v)
{
    for (unsigned i = 0; i < j->n_conns; i++)
        v->ok[i] = membership_of(&j->conns[i], &v->m[i]);
}

static int run(struct gs_meta_job *j, struct views *v, struct gs_membership *target)
{
    char base[24], next[24];
    /* Target: the current membership with the change. */
    memcpy(target, j->current, sizeof(*target));
    target->change = GS_CHANGE_NONE;
    if (j->add)
        snprintf(target->nodes[target->n++], sizeof(target->nodes[0]), "%s", j->node);
    else
        for (unsigned i = 0; i < target->n; i++)
            if (strcmp(target->nodes[i], j->node) == 0) {
                memmove(target->nodes[i], target->nodes[i + 1],
                        (target->n - i - 1) * sizeof(target->nodes[0]));
                target->n--;
                break;
            }
    unsigned wait = BACKOFF_MIN_MS;
    bool finished = false;
    for (;;) {
        read_views(j, v);
        unsigned ready = 0, members = 0;
        uint64_t ver = 0;
        for (unsigned i = 0; i < j->n_conns; i++) {
            if (v->ok[i] && v->m[i].change == GS_CHANGE_NONE && same_nodes(&v->m[i], target))
                finished = true;
            bool member = !(j->add && strcmp(j->conns[i].name, j->node) == 0);
            members += member;
            if (member && v->ok[i] && same_nodes(&v->m[i], j->current) &&
                (v->m[i].change == GS_CHANGE_NONE || is_this_change(j, &v->m[i]))) {
                ready++;
                ver = v->m[i].version > ver ? v->m[i].version : ver;
            }
        }
        if (finished)
            break;
        if (ready == members) {
            snprintf(base, sizeof(base), "%llu", (unsigned long long)ver);
            break;
        }
        if (!backoff(j, &wait))
            return CORE_ECLOSED;
        wait = wait > 200 ? 200 : wait;
    }
    if (!finished) {
        const char *a1[] = {"CLUSTER", j->add ? "ADDNODE" : "DELNODE", j->node, base};
        if (!on_every(j, 4, a1))
            return CORE_ECLOSED;
        /* 2. every target group converged somewhere */
        for (wait = BACKOFF_MIN_MS;;) {
            unsigned conv = 0;
            for (unsigned t = 0; t < target->n; t++) {
                bool seen = false;
                for (unsigned i = 0; i < j->n_conns && !seen; i++) {
                    const char *a2[] = {"CLUSTER", "MIGRATE", "STATUS"};
                    struct gs_resp_reply r;
                    if (call_words(&j->conns[i], 3, a2, &r) != 0)
                        continue;
                    for (long long e = 0; r.type == '*' && e < r.len && !seen; e++)
                        seen = r.el[e].type == '$' &&
                               r.el[e].len == (long long)strlen(target->nodes[t]) &&
                               memcmp(r.el[e].p, target->nodes[t], (size_t)r.el[e].len) == 0;
                    gs_resp_reply_free(&r);
                }
                conv += seen;
            }
            if (conv == target->n)
                break;
            if (!backoff(j, &wait))
                return CORE_ECLOSED;
            wait = wait > 200 ? 200 : wait;
        }
        /* 3. move each current group's leaving slots */
        for (unsigned s = 0; s < j->current->n; s++) {
            const char *src = j->current->nodes[s];
            const char *b[] = {"CLUSTER", "MIGRATE", "BEGIN", src};
            if (!leader_words(j, src, 4, b))
                return CORE_ECLOSED;
            char cursor[24] = "0";
            struct peer_conn *leader = NULL;
            for (;;) {
                const char *e[] = {"CLUSTER", "MIGRATE", "EXPORT", src, cursor};
                size_t el[] = {7, 7, 6, strlen(src), strlen(cursor)};
                struct gs_resp_reply r;
                struct peer_conn *who;
                if (!on_leader(j, src, 5, e, el, &r, &who))
                    return CORE_ECLOSED;
                if (r.type != '*' || r.len != 2 || r.el[0].type != '$' || r.el[1].type != '*' ||
                    r.el[0].len <= 0 || r.el[0].len >= (long long)sizeof(cursor)) {
                    gs_resp_reply_free(&r);
                    return CORE_EPROTO;
                }
                if (leader && who != leader) {
                    /* Another leader: its cursor means something else.
                     * Start over (importing twice is harmless). */
                    gs_resp_reply_free(&r);
                    leader = who;
                    snprintf(cursor, sizeof(cursor), "0");
                    continue;
                }
                leader = who;
                char nc[24];
                memcpy(nc, r.el[0].p, (size_t)r.el[0].len);
                nc[r.el[0].len] = '\0';
                /* The reply lives in who's buffer: copy the items out
                 * before using any connection again. */
                struct gs_resp_reply *items = &r.el[1];
                size_t nitems = (size_t)(items->len > 0 ? items->len : 0) / 4;
                bool bulks = true; /* dst, key, value, expiry: bulk strings */
                for (size_t k = 0; k < nitems * 4; k++)
                    bulks = bulks && items->el[k].type == '$' && items->el[k].len >= 0;
                if (!bulks) {
                    gs_resp_reply_free(&r);
                    return CORE_EPROTO;
                }
                struct core_buf copy = {0};
                for (size_t k = 0; k < nitems * 4; k++) {
                    uint32_t l = (uint32_t)items->el[k].len;
                    core_buf_append(&copy, &l, sizeof(l));
                    core_buf_append(&copy, items->el[k].p, l);
                }
                gs_resp_reply_free(&r);
                if (copy.oom) {
                    core_buf_free(&copy);
                    return CORE_ENOMEM;
                }
                int rc = 0;
                /* per item: dst, key, value, expiry; IMPORT per dst in
                 * batches */
                const char **iv = malloc((4 + 3 * IMPORT_BATCH) * sizeof(*iv));
                size_t *il = malloc((4 + 3 * IMPORT_BATCH) * sizeof(*il));
                const char **field = malloc(nitems * 4 * sizeof(*field) + 1);
                size_t *flen = malloc(nitems * 4 * sizeof(*flen) + 1);
                bool *sent = calloc(nitems + 1, 1);
                if (!iv || !il || !field || !flen || !sent)
                    rc = CORE_ENOMEM;
                for (size_t off = 0, k = 0; rc == 0 && k < nitems * 4; k++) {
                    uint32_t l;
                    memcpy(&l, copy.data + off, sizeof(l));
                    field[k] = copy.data + off + sizeof(l);
                    flen[k] = l;
                    off += sizeof(l) + l;
                }
                for (size_t k = 0; rc == 0 && k < nitems; k++) {
                    if (sent[k])
                        continue;
                    char dst[GS_RING_NAME_MAX];
                    size_t dl = flen[4 * k] < sizeof(dst) ? flen[4 * k] : sizeof(dst) - 1;
                    memcpy(dst, field[4 * k], dl);
                    dst[dl] = '\0';
                    unsigned argc = 4;
                    iv[0] = "CLUSTER", iv[1] = "MIGRATE", iv[2] = "IMPORT", iv[3] = dst;
                    il[0] = 7, il[1] = 7, il[2] = 6, il[3] = dl;
                    for (size_t q = k; q < nitems && argc < 4 + 3 * IMPORT_BATCH; q++) {
                        if (sent[q] || flen[4 * q] != dl || memcmp(field[4 * q], dst, dl) != 0)
                            continue;
                        for (unsigned f = 1; f < 4; f++) {
                            iv[argc] = field[4 * q + f];
                            il[argc++] = flen[4 * q + f];
                        }
                        sent[q] = true;
                    }
                    struct gs_resp_reply ir;
                    struct peer_conn *iw;
                    if (!on_leader(j, dst, argc, iv, il, &ir, &iw))
                        rc = CORE_ECLOSED;
                    else
                        gs_resp_reply_free(&ir);
                }
                free(iv);
                free(il);
                free(field);
                free(flen);
                free(sent);
                core_buf_free(&copy);
                if (rc)
                    return rc;
                snprintf(cursor, sizeof(cursor), "%s", nc);
                if (strcmp(cursor, "0") == 0)
                    break;
            }
            const char *sw[] = {"CLUSTER", "MIGRATE", "SWITCH", src};
            if (!leader_words(j, src, 4, sw))
                return CORE_ECLOSED;
            for (unsigned t = 0; t < target->n; t++) {
                if (strcmp(target->nodes[t], src) == 0)
                    continue;
                const char *own[] = {"CLUSTER", "MIGRATE", "OWN", target->nodes[t], src};
                if (!leader_words(j, target->nodes[t], 5, own))
                    return CORE_ECLOSED;
            }
        }
    }
    /* 4. FINISH with the new version: one more than the nodes still in
     * the change have, or what a finished node has. */
    read_views(j, v);
    uint64_t nv = 0;
    for (unsigned i = 0; i < j->n_conns; i++)
        if (v->ok[i]) {
            uint64_t x = v->m[i].version + (v->m[i].change != GS_CHANGE_NONE ? 1 : 0);
            nv = x > nv ? x : nv;
        }
    if (nv <= j->current->version)
        nv = j->current->version + 1;
    snprintf(next, sizeof(next), "%llu", (unsigned long long)nv);
    const char *f[] = {"CLUSTER", "MIGRATE", "FINISH", next};
    if (!on_every(j, 4, f))
        return CORE_ECLOSED;
    j->version = nv;
    return 0;
}

static void *job_main(void *arg)
{
    struct gs_meta_job *j = arg;
    struct views v = {calloc(j->n_conns, sizeof(*v.m)), calloc(j->n_conns, sizeof(*v.ok))};
    struct gs_membership *target = malloc(sizeof(*target));
    int rc = CORE_ENOMEM;
    unsigned wait = BACKOFF_MIN_MS;
    while (v.m && v.ok && target && !stopped(j)) {
        rc = run(j, &v, target);
        if (rc == 0 || rc == CORE_ECLOSED)
            break;
        CORE_WARN("cluster: meta: change %llu: %s; starting it again", (unsigned long long)j->seq,
                  core_strerror(rc));
        if (!backoff(j, &wait))
            break;
    }
    j->ok = rc == 0;
    free(v.m);
    free(v.ok);
    free(target);
    for (unsigned i = 0; i < j->n_conns; i++)
        peer_close(&j->conns[i]);
    atomic_store(&j->done, true);
    return NULL;
}

int gs_meta_job_start(struct gs_meta_job **out, uint64_t seq, bool add, const char *node,
                      const struct gs_membership *current)
{
    struct gs_meta_job *j = calloc(1, sizeof(*j));
    if (!j)
        return CORE_ENOMEM;
    j->seq = seq;
    j->add = add;
    snprintf(j->node, sizeof(j->node), "%s", node);
    j->current = malloc(sizeof(*j->current));
    j->conns = calloc(current->n + 1, sizeof(*j->conns));
    if (!j->current || !j->conns) {
        gs_meta_job_free(j);
        return CORE_ENOMEM;
    }
    memcpy(j->current, current, sizeof(*current));
    for (unsigned i = 0; i < current->n; i++) {
        snprintf(j->conns[j->n_conns].name, GS_RING_NAME_MAX, "%s", current->nodes[i]);
        j->conns[j->n_conns++].fd = -1;
    }
    if (add) {
        snprintf(j->conns[j->n_conns].name, GS_RING_NAME_MAX, "%s", node);
        j->conns[j->n_conns++].fd = -1;
    }
    atomic_init(&j->stop, false);
    atomic_init(&j->done, false);
    if (pthread_create(&j->thread, NULL, job_main, j) != 0) {
        gs_meta_job_free(j);
        return CORE_ENOMEM;
    }
    j->started = true;
    *out = j;
    return 0;
}

bool gs_meta_job_done(struct gs_meta_job *j)
{
    return atomic_load(&j->done);
}

bool gs_meta_job_result(struct gs_meta_job *j, uint64_t *version)
{
    *version = j->version;
    return j->ok;
}

void gs_meta_job_stop(struct gs_meta_job *j)
{
    atomic_store(&j->stop, true);
}

void gs_meta_job_free(struct gs_meta_job *j)
{
    if (!j)
        return;
    if (j->started) {
        atomic_store(&j->stop, true);
        pthread_join(j->thread, NULL); /* at most one I/O timeout */
    }
    for (unsigned i = 0; j->conns && i < j->n_conns; i++)
        core_buf_free(&j->conns[i].in);
    free(j->conns);
    free(j->current);
    free(j);
}
