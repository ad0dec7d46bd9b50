/*
 * libraft glue, the state machine half: the shard state machine with its
 * proposer, reads and lease (gs_fsm). A Raft group on libuv (gs_group) is
 * raft_group.c. The contract, the slot state machine and the reasons
 * (limbo, one entry per loop iteration, apply never fails) are in
 * raft_glue.h.
 *
 * Invariants:
 *  1. A slot's raft_apply request belongs to libraft from a successful
 *     raft_apply until apply_cb runs; only then may the slot be LIMBO or
 *     FREE.
 *  2. Every waiter's callback runs exactly once: from deliver(), which also
 *     empties the waiter list it walks.
 *  3. fsm_apply returns 0 whatever the entry holds (a non-zero return
 *     halts libraft).
 *  4. An entry is tagged with (raft id, incarnation, seq); incarnation is
 *     random per process so entries replayed from an earlier run of this
 *     node never match a live slot.
 *  5. Reads from the store are allowed (gs_fsm_read_now) only while
 *     ready_term is the current term, i.e. an entry this node proposed in
 *     its current term as leader has been applied here; the lease counts
 *     only while lease_term is the current term too.
 */
#include "gridsync/cluster/raft_glue.h"
#include "gridsync/types/value.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <raft.h>
#include <uv.h>

#include "core/clock.h"
#include "core/child.h"
#include "core/error.h"
#include "core/log.h"
#include "gridsync/store/store.h"

#define DEFAULT_INFLIGHT      64
#define DEFAULT_LIMBO_TIMEOUT 5000

enum slot_state { SLOT_FREE, SLOT_INFLIGHT, SLOT_LIMBO };

struct waiter {
    gs_write_cb cb;
    void *data;
    size_t off, len; /* the reply inside the slot's replies */
};

struct waiters {
    struct waiter *w;
    unsigned n, cap;
};

struct slot {
    enum slot_state state;
    bool applied; /* its entry went through fsm_apply here */
    uint64_t seq;
    raft_term term;     /* the term it was proposed in */
    int64_t propose_ms; /* monotonic, just before raft_apply: the lease's start */
    raft_index index;
    int64_t limbo_since_ms;
    struct raft_apply req;
    struct gs_fsm *fsm;
    struct waiters ws;
    struct core_buf replies;
};

struct gs_fsm {
    struct raft_fsm rfsm;
    struct gs_fsm_config cfg;
    struct raft *raft;
    uint64_t incarnation;
    uint64_t next_seq;
    struct slot *slots;
    unsigned nslots;
    struct core_buf open; /* the batch being built (encoded) */
    struct waiters open_ws;
    struct core_buf scratch; /* replies of entries other nodes proposed */
    struct gs_batch_reader rd;
    struct gs_fsm_stats st;
    /* reads (raft_glue.h, "Reads"; invariant 5) */
    raft_term ready_term;
    raft_term lease_term;
    int64_t lease_until_ms; /* monotonic */
    bool renewing;          /* a background lease renewal is in flight */
    /* The snapshot being built off the loop (see "Snapshots off the
     * loop"): libraft takes one at a time, so one of each suffices. */
    pid_t snap_pid; /* the child encoding it; 0 = built on the loop */
    int snap_fd;    /* read end of the child's pipe; -1 = none */
    struct core_buf snap;
    struct raft_buffer snap_rb;
};

static int64_t fsm_now(struct gs_fsm *f)
{
    return f->cfg.clock_ms ? f->cfg.clock_ms(f->cfg.clock_ctx) : core_wall_ms();
}

static int64_t mono_now(struct gs_fsm *f)
{
    if (f->cfg.mono_ms)
        return f->cfg.mono_ms(f->cfg.mono_ctx);
    return (int64_t)f->raft->io->time(f->raft->io);
}

/* An entry this node proposed at start_ms in term has committed and been
 * applied here: the node may read (invariant 5), and a majority heard from
 * it at or after start_ms, which extends the lease. */
static void committed_own(struct gs_fsm *f, raft_term term, int64_t start_ms)
{
    if (!f->raft || term != f->raft->current_term || raft_state(f->raft) != RAFT_LEADER)
        return;
    f->ready_term = term;
    if (!f->cfg.lease_ms)
        return;
    int64_t until = start_ms + (int64_t)f->cfg.lease_ms;
    if (f->lease_term != term || until > f->lease_until_ms) {
        f->lease_term = term;
        f->lease_until_ms = until;
        f->st.lease_renewed++;
    }
}

static int waiters_push(struct waiters *ws, gs_write_cb cb, void *data)
{
    if (ws->n == ws->cap) {
        unsigned cap = ws->cap ? ws->cap * 2 : 16;
        struct waiter *w = realloc(ws->w, cap * sizeof(*w));
        if (!w)
            return CORE_ENOMEM;
        ws->w = w;
        ws->cap = cap;
    }
    ws->w[ws->n++] = (struct waiter){cb, data, 0, 0};
    return 0;
}

/* Run every waiter's callback once (invariant 2). With status 0 each gets
 * its reply from `replies`. The list is detached first so that a callback
 * may submit new writes. */
static void deliver(struct waiters *ws, int status, const struct core_buf *replies)
{
    unsigned n = ws->n;
    ws->n = 0;
    for (unsigned i = 0; i < n; i++) {
        struct waiter *w = &ws->w[i];
        if (status == 0)
            w->cb(w->data, 0, replies->data + w->off, w->len);
        else
            w->cb(w->data, status, NULL, 0);
    }
}

static void slot_finish(struct slot *s, int status)
{
    s->state = SLOT_FREE;
    deliver(&s->ws, status, &s->replies);
    core_buf_reset(&s->replies);
}

/* Limbo batches whose fate is now known (see raft_glue.h, "Limbo"). */
static void resolve_limbo(struct gs_fsm *f)
{
    if (!f->raft)
        return;
    raft_index applied = raft_last_applied(f->raft);
    int64_t now = fsm_now(f);
    for (unsigned i = 0; i < f->nslots; i++) {
        struct slot *s = &f->slots[i];
        if (s->state != SLOT_LIMBO)
            continue;
        if (applied >= s->index) {
            /* Applied past its index without meeting our tag there: the
             * entry was overwritten by another leader's. */
            f->st.limbo_failed++;
            slot_finish(s, CORE_ESTATE);
        } else if (now - s->limbo_since_ms >= (int64_t)f->cfg.limbo_timeout_ms) {
            f->st.limbo_unknown++;
            slot_finish(s, CORE_ETIMEOUT);
        }
    }
}

static void limbo_all_unknown(struct gs_fsm *f)
{
    for (unsigned i = 0; i < f->nslots; i++) {
        if (f->slots[i].state == SLOT_LIMBO) {
            f->st.limbo_unknown++;
            slot_finish(&f->slots[i], CORE_ETIMEOUT);
        }
    }
}

static struct slot *own_slot(struct gs_fsm *f, const struct gs_batch_header *h)
{
    if (!f->raft || h->origin_id != f->raft->id || h->incarnation != f->incarnation)
        return NULL;
    for (unsigned i = 0; i < f->nslots; i++) {
        struct slot *s = &f->slots[i];
        if (s->state != SLOT_FREE && !s->applied && s->seq == h->seq && s->ws.n == h->ncmds)
            return s;
    }
    return NULL;
}

/* raft_fsm.apply: run every command of the batch through the executor.
 * Returns 0 always (invariant 3). */
static int fsm_apply(struct raft_fsm *rfsm, const struct raft_buffer *buf, void **result)
{
    struct gs_fsm *f = rfsm->data;
    struct gs_batch_header h;
    *result = NULL;
    if (gs_batch_parse(buf->base, buf->len, &h, &f->rd) != 0) {
        f->st.entries_malformed++;
        CORE_WARN("raft: skipping a malformed log entry of %zu bytes", buf->len);
        return 0;
    }
    struct slot *own = own_slot(f, &h);
    struct core_buf *out = own ? &own->replies : &f->scratch;
    core_buf_reset(out);
    unsigned argc, i = 0;
    const char *const *argv;
    const size_t *argvlen;
    int rc;
    while ((rc = gs_batch_next(&f->rd, &argc, &argv, &argvlen)) == 1) {
        if (!own)
            core_buf_reset(out); /* nobody waits for these replies */
        size_t off = out->len;
        f->cfg.exec(f->cfg.exec_ctx, f->cfg.store, h.now_ms, argc, argv, argvlen, out);
        if (own) {
            own->ws.w[i].off = off;
            own->ws.w[i].len = out->len - off;
        }
        i++;
    }
    if (rc < 0)
        CORE_WARN("raft: out of memory decoding an entry: %u of %u commands applied", i, h.ncmds);
    f->st.entries_applied++;
    if (own) {
        own->applied = true;
        if (own->state == SLOT_LIMBO) {
            f->st.limbo_succeeded++;
            slot_finish(own, 0);
        }
    }
    resolve_limbo(f);
    return 0;
}

struct snap_ctx {
    struct core_buf *b;
    uint64_t count;
    int rc;
    int fd; /* >= 0: stream the encoding there (the fork child) */
};

/* Write all of b to fd and empty b. Returns 0 or CORE_EIO. */
static int drain(struct core_buf *b, int fd)
{
    size_t off = 0;
    while (off < b->len) {
        ssize_t n = write(fd, b->data + off, b->len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return CORE_EIO;
        off += (size_t)n;
    }
    core_buf_reset(b);
    return 0;
}

#define SNAP_CHUNK (64u * 1024u)

static void snap_entry(void *arg, const struct gs_entry *e)
{
    struct snap_ctx *c = arg;
    size_t klen, vlen;
    const char *key = gs_entry_key(e, &klen);
    struct gs_obj o;
    if (gs_entry_obj(e, &o)) { /* a collection: its snapshot record */
        unsigned char *enc = NULL;
        if (c->rc == 0 && (c->rc = gs_obj_encode(&o, &enc, &vlen)) == 0)
            c->rc = gs_snapshot_add(c->b, o.type, key, klen, enc, vlen, gs_entry_expire_ms(e));
        free(enc);
        c->count++;
        return;
    }
    /* gs_entry_value takes a mutable entry; we only read it. */
    const char *val = gs_entry_value((struct gs_entry *)e, &vlen);
    if (c->rc == 0)
        c->rc = gs_snapshot_add(c->b, GS_TYPE_STRING, key, klen, val, vlen, gs_entry_expire_ms(e));
    c->count++;
    if (c->fd >= 0 && c->rc == 0 && c->b->len >= SNAP_CHUNK)
        c->rc = drain(c->b, c->fd);
}

/* Encode the whole store into b, or (fd >= 0) stream it to fd through b
 * (the header's count is then left 0: see snapshot_child). Returns 0 or
 * a CORE_* code; *count is the number of entries. */
static int encode_store(struct gs_fsm *f, struct core_buf *b, int fd, int64_t now, uint64_t *count)
{
    struct snap_ctx c = {b, 0, gs_snapshot_begin(b), fd};
    uint64_t cursor = 0;
    do {
        cursor = gs_store_scan(f->cfg.store, cursor, 1024, now, snap_entry, &c);
    } while (cursor != 0 && c.rc == 0);
    if (c.rc == 0 && f->cfg.state_encode) {
        struct core_buf st = {0};
        c.rc = f->cfg.state_encode(f->cfg.state_ctx, &st);
        if (c.rc == 0 && st.oom)
            c.rc = CORE_ENOMEM;
        /* No record when there is no state: restore then clears it. */
        if (c.rc == 0 && st.data) {
            c.rc = gs_snapshot_add(b, GS_SNAPSHOT_STATE, NULL, 0, st.data, st.len, -1);
            c.count++;
        }
        core_buf_free(&st);
    }
    *count = c.count;
    return c.rc;
}

static void note_pause(struct gs_fsm *f, uint64_t start_ns)
{
    uint64_t us = (core_now_ns() - start_ns) / 1000u;
    if (us > f->st.snapshot_pause_max_us)
        f->st.snapshot_pause_max_us = us;
}

/* raft_fsm.snapshot, version 1 (snapshot_fork off): the whole store in
 * one buffer, encoded on the loop thread, between messages: a pause
 * proportional to the shard's size. */
static int fsm_snapshot(struct raft_fsm *rfsm, struct raft_buffer *bufs[], unsigned *n_bufs)
{
    struct gs_fsm *f = rfsm->data;
    uint64_t t0 = core_now_ns();
    struct core_buf b = {0};
    uint64_t count;
    if (encode_store(f, &b, -1, fsm_now(f), &count)) {
        core_buf_free(&b);
        return RAFT_NOMEM;
    }
    gs_snapshot_finish(&b, count);
    /* libraft releases both with raft_free. */
    struct raft_buffer *rb = raft_malloc(sizeof(*rb));
    void *base = raft_malloc(b.len);
    if (!rb || !base) {
        raft_free(rb);
        raft_free(base);
        core_buf_free(&b);
        return RAFT_NOMEM;
    }
    memcpy(base, b.data, b.len);
    rb->base = base;
    rb->len = b.len;
    core_buf_free(&b);
    *bufs = rb;
    *n_bufs = 1;
    f->st.snapshots_taken++;
    note_pause(f, t0);
    return 0;
}

/* ---- Snapshots off the loop (FSM version 3) ----
 *
 * libraft calls snapshot on the loop right after applying entry
 * last_applied, then snapshot_async on a thread-pool thread (io->async_work),
 * then snapshot_finalize on the loop; entries keep being applied
 * meanwhile. The consistent view is a fork()ed child: it holds the store
 * exactly as it was after last_applied (its pages are copy-on-write), so
 * the snapshot has every entry up to its index and none after, while the
 * loop goes on applying later entries to its own copy (they stay in the
 * log after the snapshot's index). The loop's pause is the fork (copying
 * page tables), not the encoding.
 *
 * The child streams the encoding into a pipe, with the snapshot header's
 * count left 0, then a trailer (u64 count, u32 SNAP_END) that proves it got
 * to the end; it uses nothing but the store, malloc and write, and leaves
 * with _exit. The thread reads the pipe to EOF, checks the trailer and the
 * child's exit, and writes the count into the header. If fork fails, the
 * loop encodes the snapshot itself, as version 1 does. */
#define SNAP_END    0x444e4553u /* "SEND" */
#define SNAP_HEADER 12u         /* magic and count (raft_batch.h) */

static void snapshot_child(struct gs_fsm *f, int fd, int64_t now)
{
    /* Nobody reads the pipe after the node dies: do not outlive it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* Background work: leave the CPU to the event loops first. */
    if (setpriority(PRIO_PROCESS, 0, 10) != 0) {
        /* not fatal: the snapshot is built at the node's priority */
    }
    struct core_buf b = {0};
    uint64_t count = 0;
    int rc = encode_store(f, &b, fd, now, &count);
    if (rc == 0) {
        char *t = core_buf_reserve(&b, 12);
        if (!t)
            rc = CORE_ENOMEM;
        else {
            uint32_t end = SNAP_END;
            memcpy(t, &count, 8); /* little-endian, as raft_batch.h */
            memcpy(t + 8, &end, 4);
            b.len += 12;
            rc = drain(&b, fd);
        }
    }
    _exit(rc == 0 ? 0 : 1);
}

static int fsm_snapshot_fork(struct raft_fsm *rfsm, struct raft_buffer *bufs[], unsigned *n_bufs)
{
    struct gs_fsm *f = rfsm->data;
    uint64_t t0 = core_now_ns();
    int64_t now = fsm_now(f);
    core_buf_reset(&f->snap);
    f->snap_pid = 0;
    f->snap_fd = -1;
    int p[2];
    pid_t pid = -1;
    if (pipe2(p, O_CLOEXEC) == 0) {
        pid = fork();
        if (pid == 0) {
            /* only the pipe: no listening socket or connection of the node */
            core_child_close_fds(p[1]);
            snapshot_child(f, p[1], now);
        }
        close(p[1]);
        if (pid < 0)
            close(p[0]);
    }
    if (pid > 0) {
        f->snap_pid = pid;
        f->snap_fd = p[0];
    } else {
        CORE_WARN("raft: cannot fork to build a snapshot (%s): building it on the loop",
                  strerror(errno));
        uint64_t count;
        if (encode_store(f, &f->snap, -1, now, &count)) {
            core_buf_free(&f->snap);
            return RAFT_NOMEM;
        }
        gs_snapshot_finish(&f->snap, count);
    }
    f->snap_rb = (struct raft_buffer){f->snap.data, f->snap.len};
    *bufs = &f->snap_rb;
    *n_bufs = 1;
    note_pause(f, t0);
    return 0;
}

/* Thread-pool thread: nothing here may touch the store or libraft. */
static int fsm_snapshot_async(struct raft_fsm *rfsm, struct raft_buffer *bufs[], unsigned *n_bufs)
{
    struct gs_fsm *f = rfsm->data;
    if (f->snap_fd < 0)
        return 0; /* built on the loop */
    int rc = 0;
    for (;;) {
        char *p = core_buf_reserve(&f->snap, SNAP_CHUNK);
        if (!p) {
            rc = RAFT_NOMEM;
            break;
        }
        ssize_t n = read(f->snap_fd, p, SNAP_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            rc = RAFT_IOERR;
        if (n <= 0)
            break;
        f->snap.len += (size_t)n;
    }
    close(f->snap_fd);
    f->snap_fd = -1;
    int status = 0;
    pid_t w;
    while ((w = waitpid(f->snap_pid, &status, 0)) < 0 && errno == EINTR)
        ;
    /* ECHILD (SIGCHLD ignored: already reaped) leaves the trailer to tell. */
    if (w == f->snap_pid && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        rc = rc ? rc : RAFT_IOERR;
    uint32_t end = 0;
    uint64_t count = 0;
    if (rc == 0 && f->snap.len >= SNAP_HEADER + 12) {
        memcpy(&count, f->snap.data + f->snap.len - 12, 8);
        memcpy(&end, f->snap.data + f->snap.len - 4, 4);
    }
    if (rc == 0 && end != SNAP_END)
        rc = RAFT_IOERR; /* the child did not finish */
    if (rc != 0) {
        core_buf_reset(&f->snap);
        bufs[0]->base = NULL;
        bufs[0]->len = 0;
        return rc;
    }
    f->snap.len -= 12;
    gs_snapshot_finish(&f->snap, count);
    bufs[0]->base = f->snap.data;
    bufs[0]->len = f->snap.len;
    (void)n_bufs;
    return 0;
}

/* Loop, after snapshot_async (whatever it returned) and the snapshot's
 * write: the buffer is ours (FSM version >= 2). */
static int fsm_snapshot_finalize(struct raft_fsm *rfsm, struct raft_buffer *bufs[],
                                 unsigned *n_bufs)
{
    struct gs_fsm *f = rfsm->data;
    if (f->snap.len > 0)
        f->st.snapshots_taken++;
    else
        f->st.snapshots_failed++;
    core_buf_free(&f->snap);
    f->snap_rb = (struct raft_buffer){NULL, 0};
    f->snap_pid = 0;
    *bufs = NULL;
    *n_bufs = 0;
    return 0;
}

struct restore_ctx {
    struct gs_fsm *f;
    bool state_seen;
};

static int restore_entry(void *arg, int type, const char *key, size_t klen, const char *val,
                         size_t vlen, int64_t expire_ms)
{
    struct restore_ctx *r = arg;
    struct gs_store *store = r->f->cfg.store;
    if (type == GS_SNAPSHOT_STATE) {
        if (r->state_seen || !r->f->cfg.state_restore)
            return r->state_seen ? CORE_EPROTO : 0;
        r->state_seen = true;
        return r->f->cfg.state_restore(r->f->cfg.state_ctx, val, vlen);
    }
    if (type == GS_TYPE_STRING)
        return gs_store_set(store, key, klen, val, vlen, expire_ms, NULL);
    /* The thresholds of the node that restores are not known here: Redis's
     * defaults choose the encoding (OBJECT ENCODING may differ from the
     * leader's under other settings; the contents do not). */
    static const struct gs_type_limits lim = GS_TYPE_LIMITS_DEFAULT;
    struct gs_obj o;
    int rc = gs_obj_decode(type, val, vlen, &lim, &o);
    if (rc)
        return rc;
    rc = gs_store_set_obj(store, key, klen, &o, expire_ms, NULL);
    if (rc)
        gs_obj_free(&o);
    return rc;
}

/* The validation pass's look at the side-state record (state_valid). */
static int check_state(void *arg, int type, const char *key, size_t klen, const char *val,
                       size_t vlen, int64_t expire_ms)
{
    const struct gs_fsm *f = arg;
    (void)key, (void)klen, (void)expire_ms;
    if (type == GS_SNAPSHOT_STATE && f->cfg.state_valid && !f->cfg.state_valid(val, vlen))
        return CORE_EPROTO;
    return 0;
}

/* raft_fsm.restore: replace the store with the snapshot. On success the
 * buffer is ours to free; on failure libraft frees it (and, in 0.15, leaks
 * the 16-byte array that held it: tests/unit/support/lsan-libraft.supp). */
static int fsm_restore(struct raft_fsm *rfsm, struct raft_buffer *buf)
{
    struct gs_fsm *f = rfsm->data;
    if (gs_snapshot_parse(buf->base, buf->len, f->cfg.state_valid ? check_state : NULL, f) != 0) {
        CORE_WARN("raft: refusing a malformed snapshot of %zu bytes", buf->len);
        return RAFT_MALFORMED;
    }
    gs_store_clear(f->cfg.store);
    struct restore_ctx r = {f, false};
    int rc = gs_snapshot_parse(buf->base, buf->len, restore_entry, &r);
    if (rc == 0 && !r.state_seen && f->cfg.state_restore)
        rc = f->cfg.state_restore(f->cfg.state_ctx, NULL, 0);
    if (rc != 0) {
        CORE_WARN("raft: cannot restore a snapshot: %s", core_strerror(rc));
        return rc == CORE_ENOMEM ? RAFT_NOMEM : RAFT_MALFORMED;
    }
    raft_free(buf->base);
    /* Our limbo entries may be inside the snapshot or not: unknown. */
    limbo_all_unknown(f);
    f->st.snapshots_restored++;
    return 0;
}

static uint64_t random_incarnation(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
        v = core_now_ns() ^ ((uint64_t)getpid() << 32);
    return v;
}

int gs_fsm_new(struct gs_fsm **out, const struct gs_fsm_config *cfg)
{
    if (!cfg->store || !cfg->exec)
        return CORE_EINVAL;
    struct gs_fsm *f = calloc(1, sizeof(*f));
    if (!f)
        return CORE_ENOMEM;
    f->cfg = *cfg;
    if (!f->cfg.max_inflight)
        f->cfg.max_inflight = DEFAULT_INFLIGHT;
    if (!f->cfg.limbo_timeout_ms)
        f->cfg.limbo_timeout_ms = DEFAULT_LIMBO_TIMEOUT;
    f->nslots = f->cfg.max_inflight;
    f->slots = calloc(f->nslots, sizeof(*f->slots));
    if (!f->slots) {
        free(f);
        return CORE_ENOMEM;
    }
    for (unsigned i = 0; i < f->nslots; i++) {
        f->slots[i].fsm = f;
        f->slots[i].req.data = &f->slots[i];
    }
    f->incarnation = random_incarnation();
    f->snap_fd = -1;
    f->rfsm.data = f;
    f->rfsm.apply = fsm_apply;
    f->rfsm.restore = fsm_restore;
    if (f->cfg.snapshot_fork) {
        f->rfsm.version = 3;
        f->rfsm.snapshot = fsm_snapshot_fork;
        f->rfsm.snapshot_async = fsm_snapshot_async;
        f->rfsm.snapshot_finalize = fsm_snapshot_finalize;
    } else {
        f->rfsm.version = 1;
        f->rfsm.snapshot = fsm_snapshot;
    }
    *out = f;
    return 0;
}

void gs_fsm_free(struct gs_fsm *f)
{
    if (!f)
        return;
    /* The open batch was never proposed: not applied. A batch in flight or
     * in limbo was: another leader may still commit it after this node has
     * left the group or stopped, so its outcome is unknown (answering
     * "closed", which clients read as "not applied", would be a lie). */
    deliver(&f->open_ws, CORE_ECLOSED, NULL);
    for (unsigned i = 0; i < f->nslots; i++) {
        struct slot *s = &f->slots[i];
        if (s->state != SLOT_FREE)
            deliver(&s->ws, CORE_ETIMEOUT, NULL);
        free(s->ws.w);
        core_buf_free(&s->replies);
    }
    free(f->slots);
    free(f->open_ws.w);
    core_buf_free(&f->open);
    core_buf_free(&f->scratch);
    /* libraft's close waits for its async work, so a snapshot has been
     * finalized by now; a child left over from a failed start is killed. */
    if (f->snap_pid > 0 && kill(f->snap_pid, SIGKILL) == 0)
        waitpid(f->snap_pid, NULL, 0);
    core_buf_free(&f->snap);
    gs_batch_reader_free(&f->rd);
    free(f);
}

struct raft_fsm *gs_fsm_raft(struct gs_fsm *f)
{
    return &f->rfsm;
}

void gs_fsm_attach(struct gs_fsm *f, struct raft *r)
{
    f->raft = r;
}

int gs_fsm_submit(struct gs_fsm *f, unsigned argc, const char *const *argv, const size_t *argvlen,
                  gs_write_cb cb, void *data)
{
    if (!f->raft || raft_state(f->raft) != RAFT_LEADER)
        return CORE_ESTATE;
    if (!cb)
        return CORE_EINVAL;
    if (f->open.len == 0) {
        /* The header is stamped at flush; zeros until then. */
        struct gs_batch_header h = {0};
        int rc = gs_batch_begin(&f->open, &h);
        if (rc)
            return rc;
    }
    int rc = waiters_push(&f->open_ws, cb, data);
    if (rc)
        return rc;
    rc = gs_batch_add(&f->open, argc, argv, argvlen);
    if (rc) {
        f->open_ws.n--;
        return rc;
    }
    return 0;
}

static void apply_cb(struct raft_apply *req, int status, void *result)
{
    struct slot *s = req->data;
    struct gs_fsm *f = s->fsm;
    (void)result;
    if (status == 0 || s->applied) {
        if (status == 0)
            committed_own(f, s->term, s->propose_ms);
        if (!s->applied) {
            /* Committed but not seen by fsm_apply: cannot happen with one
             * buffer per entry; answer "unknown" rather than a wrong reply. */
            CORE_WARN("raft: entry %llu applied without its tag", (unsigned long long)s->index);
            slot_finish(s, CORE_ETIMEOUT);
            return;
        }
        slot_finish(s, 0);
    } else if (status == RAFT_LEADERSHIPLOST) {
        s->state = SLOT_LIMBO;
        s->limbo_since_ms = fsm_now(f);
        resolve_limbo(f);
    } else if (status == RAFT_SHUTDOWN) {
        /* Proposed, then closed before we learnt its fate: unknown. */
        slot_finish(s, CORE_ETIMEOUT);
    } else {
        CORE_WARN("raft: apply of entry %llu failed: %s", (unsigned long long)s->index,
                  raft_strerror(status));
        slot_finish(s, CORE_ETIMEOUT);
    }
}

unsigned gs_fsm_flush(struct gs_fsm *f)
{
    resolve_limbo(f);
    if (f->open_ws.n == 0)
        return 0;
    if (!f->raft || raft_state(f->raft) != RAFT_LEADER) {
        /* Lost leadership since submit: nothing was proposed. */
        core_buf_reset(&f->open);
        deliver(&f->open_ws, CORE_ESTATE, NULL);
        return 0;
    }
    struct slot *s = NULL;
    for (unsigned i = 0; i < f->nslots && !s; i++)
        if (f->slots[i].state == SLOT_FREE)
            s = &f->slots[i];
    if (!s)
        return 0; /* all in flight: the open batch keeps growing */

    unsigned n = f->open_ws.n;
    struct gs_batch_header h = {f->raft->id, f->incarnation, ++f->next_seq, fsm_now(f), n};
    size_t len = f->open.len;
    gs_batch_stamp(&f->open, &h);

    /* libraft takes ownership of a raft_malloc'd buffer. Its length is
     * padded to a multiple of 8 (raft_batch.h says why). */
    size_t padded = (len + 7) & ~(size_t)7;
    struct raft_buffer rb = {raft_malloc(padded), padded};
    if (!rb.base) {
        core_buf_reset(&f->open);
        deliver(&f->open_ws, CORE_ENOMEM, NULL);
        return 0;
    }
    memcpy(rb.base, f->open.data, len);
    memset((char *)rb.base + len, 0, padded - len);
    core_buf_reset(&f->open);

    /* The open waiters become the slot's; the slot's empty list is reused
     * for the next batch (no allocation once warm). */
    struct waiters tmp = s->ws;
    s->ws = f->open_ws;
    f->open_ws = tmp;
    s->seq = h.seq;
    s->term = f->raft->current_term;
    s->propose_ms = mono_now(f);
    s->applied = false;
    core_buf_reset(&s->replies);
    s->state = SLOT_INFLIGHT;
    int rc = raft_apply(f->raft, &s->req, &rb, 1, apply_cb);
    if (rc) {
        raft_free(rb.base);
        slot_finish(s, gs_from_raft(rc, CORE_ESTATE));
        return 0;
    }
    s->index = s->req.index;
    unsigned inflight = 0;
    for (unsigned i = 0; i < f->nslots; i++)
        inflight += f->slots[i].state == SLOT_INFLIGHT;
    if (inflight > f->st.inflight_max)
        f->st.inflight_max = inflight;
    f->st.entries_proposed++;
    f->st.commands_proposed += n;
    return n;
}

struct fsm_barrier {
    struct raft_barrier req;
    struct gs_fsm *fsm;
    raft_term term;
    int64_t start_ms;
    void (*cb)(void *, int);
    void *data;
};

static void on_fsm_barrier(struct raft_barrier *req, int status)
{
    struct fsm_barrier *b = req->data;
    struct gs_fsm *f = b->fsm;
    if (status == 0)
        committed_own(f, b->term, b->start_ms);
    if (b->cb)
        b->cb(b->data, status == 0 ? 0 : CORE_ESTATE);
    else
        f->renewing = false;
    free(b);
}

static int fsm_barrier(struct gs_fsm *f, void (*cb)(void *, int), void *data)
{
    if (!f->raft || raft_state(f->raft) != RAFT_LEADER)
        return CORE_ESTATE;
    struct fsm_barrier *b = malloc(sizeof(*b));
    if (!b)
        return CORE_ENOMEM;
    *b = (struct fsm_barrier){.fsm = f, .cb = cb, .data = data};
    b->req.data = b;
    b->term = f->raft->current_term;
    /* Taken before the entry exists, so before any message carrying it
     * leaves: a conservative start for the lease. */
    b->start_ms = mono_now(f);
    int rv = raft_barrier(f->raft, &b->req, on_fsm_barrier);
    if (rv != 0) {
        free(b);
        return gs_from_raft(rv, CORE_ESTATE);
    }
    f->st.barriers++;
    return 0;
}

int gs_fsm_barrier(struct gs_fsm *f, void (*cb)(void *data, int status), void *data)
{
    if (!cb)
        return CORE_EINVAL;
    return fsm_barrier(f, cb, data);
}

bool gs_fsm_read_now(struct gs_fsm *f, enum gs_read_mode mode)
{
    if (!f->raft || raft_state(f->raft) != RAFT_LEADER)
        return false;
    raft_term term = f->raft->current_term;
    if (f->ready_term != term || mode == GS_READ_BARRIER)
        return false;
    if (mode == GS_READ_ANY)
        return true;
    if (f->lease_term != term || !f->cfg.lease_ms)
        return false;
    int64_t left = f->lease_until_ms - mono_now(f);
    if (left <= 0)
        return false;
    if (left < (int64_t)f->cfg.lease_ms / 2 && !f->renewing && fsm_barrier(f, NULL, NULL) == 0)
        f->renewing = true;
    return true;
}

void gs_fsm_end_lease(struct gs_fsm *f)
{
    f->lease_term = 0;
    f->lease_until_ms = 0;
}

void gs_fsm_stats(const struct gs_fsm *f, struct gs_fsm_stats *out)
{
    *out = f->st;
    out->inflight = 0;
    for (unsigned i = 0; i < f->nslots; i++)
        out->inflight += f->slots[i].state != SLOT_FREE;
    out->queued = f->open_ws.n;
}

/* ---- libraft's codes ---------------------------------------------------- */

int gs_from_raft(int rv, int otherwise)
{
    switch (rv) {
    case 0:
        return 0;
    case RAFT_NOMEM:
        return CORE_ENOMEM;
    case RAFT_NOTLEADER:
    case RAFT_LEADERSHIPLOST:
        return CORE_ESTATE;
    default:
        return otherwise;
    }
}
