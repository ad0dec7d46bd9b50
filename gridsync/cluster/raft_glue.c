/*
 * libraft glue: the shard state machine with its proposer (gs_fsm) and a
 * Raft group on libuv (gs_group). The contract, the slot state machine and
 * the reasons (limbo, one entry per loop iteration, apply never fails) are
 * in raft_glue.h.
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

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stddef.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/list.h"
#include "core/log.h"
#include "gridsync/cluster/raft_transport.h"
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

/* libraft's codes to ours, the one place they are converted: out of
 * memory and "not the leader (any more)" mean the same everywhere; any
 * other failure means what the caller says (`otherwise`), because the same
 * RAFT_* code says different things from raft_apply and raft_start. */
static int from_raft(int rv, int otherwise)
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
};

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
}

/* raft_fsm.snapshot: the whole store in one buffer. Runs on the loop
 * thread, between messages (libraft 0.15, FSM version 1). */
static int fsm_snapshot(struct raft_fsm *rfsm, struct raft_buffer *bufs[], unsigned *n_bufs)
{
    struct gs_fsm *f = rfsm->data;
    struct core_buf b = {0};
    struct snap_ctx c = {&b, 0, gs_snapshot_begin(&b)};
    int64_t now = fsm_now(f);
    uint64_t cursor = 0;
    do {
        cursor = gs_store_scan(f->cfg.store, cursor, 1024, now, snap_entry, &c);
    } while (cursor != 0 && c.rc == 0);
    if (c.rc) {
        core_buf_free(&b);
        return RAFT_NOMEM;
    }
    gs_snapshot_finish(&b, c.count);
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
    return 0;
}

static int restore_entry(void *arg, int type, const char *key, size_t klen, const char *val,
                         size_t vlen, int64_t expire_ms)
{
    if (type == GS_TYPE_STRING)
        return gs_store_set(arg, key, klen, val, vlen, expire_ms, NULL);
    /* The thresholds of the node that restores are not known here: Redis's
     * defaults choose the encoding (OBJECT ENCODING may differ from the
     * leader's under other settings; the contents do not). */
    static const struct gs_type_limits lim = GS_TYPE_LIMITS_DEFAULT;
    struct gs_obj o;
    int rc = gs_obj_decode(type, val, vlen, &lim, &o);
    if (rc)
        return rc;
    rc = gs_store_set_obj(arg, key, klen, &o, expire_ms, NULL);
    if (rc)
        gs_obj_free(&o);
    return rc;
}

/* raft_fsm.restore: replace the store with the snapshot. On success the
 * buffer is ours to free; on failure libraft frees it. */
static int fsm_restore(struct raft_fsm *rfsm, struct raft_buffer *buf)
{
    struct gs_fsm *f = rfsm->data;
    if (gs_snapshot_parse(buf->base, buf->len, NULL, NULL) != 0) {
        CORE_WARN("raft: refusing a malformed snapshot of %zu bytes", buf->len);
        return RAFT_MALFORMED;
    }
    gs_store_clear(f->cfg.store);
    if (gs_snapshot_parse(buf->base, buf->len, restore_entry, f->cfg.store) != 0) {
        CORE_WARN("raft: out of memory restoring a snapshot");
        return RAFT_NOMEM;
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
    f->rfsm.version = 1;
    f->rfsm.data = f;
    f->rfsm.apply = fsm_apply;
    f->rfsm.snapshot = fsm_snapshot;
    f->rfsm.restore = fsm_restore;
    *out = f;
    return 0;
}

void gs_fsm_free(struct gs_fsm *f)
{
    if (!f)
        return;
    deliver(&f->open_ws, CORE_ECLOSED, NULL);
    for (unsigned i = 0; i < f->nslots; i++) {
        struct slot *s = &f->slots[i];
        if (s->state != SLOT_FREE)
            deliver(&s->ws, CORE_ECLOSED, NULL);
        free(s->ws.w);
        core_buf_free(&s->replies);
    }
    free(f->slots);
    free(f->open_ws.w);
    core_buf_free(&f->open);
    core_buf_free(&f->scratch);
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
        slot_finish(s, CORE_ECLOSED);
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
        slot_finish(s, from_raft(rc, CORE_ESTATE));
        return 0;
    }
    s->index = s->req.index;
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
        return from_raft(rv, CORE_ESTATE);
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

/* ---- gs_group ----------------------------------------------------------- */

#define DEFAULT_ELECTION_MS   150
#define DEFAULT_HEARTBEAT_MS  15
#define DEFAULT_RETRY_MS      50
#define REBALANCE_INTERVAL_MS 100
#define MAX_DESIRED           8

struct gs_group {
    struct raft raft;
    struct raft_io io;
    bool use_mux;
    struct gs_nodelay_transport transport; /* its own port (no mux) */
    struct gs_mux_channel chan;            /* or a channel of the node's mux */
    struct gs_fsm *fsm;
    uv_prepare_t prepare;
    uv_timer_t rebalance;
    struct raft_transfer transfer;
    bool transferring;
    uint64_t preferred;
    /* membership reconciliation: the wanted replica set */
    struct raft_change change;
    bool changing;
    unsigned n_desired;
    uint64_t desired[MAX_DESIRED];
    char desired_addr[MAX_DESIRED][GS_MUX_ADDR_MAX + 1];
    char dir[PATH_MAX];
    bool erase;
    unsigned snapshot_threshold; /* as configured (restored after a hold) */
    unsigned handles_open;
    void (*close_cb)(void *);
    void *close_data;
    /* libraft's close of its uv io, wrapped (io_close_once). */
    void (*uv_io_close)(struct raft_io *io, raft_io_close_cb cb);
    raft_io_close_cb raft_io_closed;
    bool io_closed;
    bool orphan; /* its start failed: nobody holds it, it frees itself */
};

/* The lease clock: read fresh, unlike libuv's loop time, which is cached
 * at the start of each iteration and so may lag behind by what the
 * iteration has done so far. */
static int64_t mono_ms_now(void *ctx)
{
    (void)ctx;
    return (int64_t)(core_now_ns() / 1000000u);
}

static int mkdir_p(const char *dir)
{
    char path[PATH_MAX];
    size_t len = strlen(dir);
    if (len == 0 || len >= sizeof(path))
        return CORE_EINVAL;
    memcpy(path, dir, len + 1);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return core_from_errno(errno);
        *p = '/';
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return core_from_errno(errno);
    return 0;
}

/* Cut one entry per loop iteration: prepare handles run after all of the
 * iteration's I/O callbacks, just before the loop blocks. */
static void on_prepare(uv_prepare_t *h)
{
    struct gs_group *g = h->data;
    gs_fsm_flush(g->fsm);
}

static void on_transfer_done(struct raft_transfer *req)
{
    struct gs_group *g = req->data;
    g->transferring = false;
}

/* Hand leadership back to the preferred node (so that leaders stay spread
 * one per node), but only when it is connected and fully caught up:
 * libraft refuses writes while a transfer runs, so a transfer to a node
 * that cannot take over would stall the group for an election timeout. */
static bool reconcile(struct gs_group *g);

static void on_rebalance(uv_timer_t *t)
{
    struct gs_group *g = t->data;
    struct raft *r = &g->raft;
    if (reconcile(g))
        return;
    if (!g->preferred || g->preferred == r->id || g->transferring || raft_state(r) != RAFT_LEADER)
        return;
    for (unsigned i = 0; i < r->configuration.n; i++) {
        if (r->configuration.servers[i].id != g->preferred)
            continue;
        /* leader_state.progress parallels configuration.servers. */
        const struct raft_progress *p = &r->leader_state.progress[i];
        if (!p->recent_recv || p->match_index != raft_last_index(r))
            return;
        gs_group_transfer(g, g->preferred);
        return;
    }
}

static void on_change_done(struct raft_change *req, int status)
{
    struct gs_group *g = req->data;
    g->changing = false;
    if (status != 0)
        CORE_INFO("raft: membership change of %s failed: %s (retried)", g->dir,
                  raft_strerror(status));
}

static bool is_desired(const struct gs_group *g, raft_id id)
{
    for (unsigned i = 0; i < g->n_desired; i++)
        if (g->desired[i] == id)
            return true;
    return false;
}

/* One step towards the desired replica set, at the leader. Returns true
 * when a change is running (or was just started): no leadership transfer
 * then, libraft allows one thing at a time. */
static bool reconcile(struct gs_group *g)
{
    struct raft *r = &g->raft;
    if (g->changing)
        return true;
    if (g->n_desired == 0 || g->transferring || raft_state(r) != RAFT_LEADER)
        return false;
    int rv = 0;
    for (unsigned i = 0; i < g->n_desired && rv == 0; i++) {
        const struct raft_server *srv = NULL;
        for (unsigned j = 0; j < r->configuration.n; j++)
            if (r->configuration.servers[j].id == g->desired[i])
                srv = &r->configuration.servers[j];
        if (!srv) {
            rv = raft_add(r, &g->change, g->desired[i], g->desired_addr[i], on_change_done);
            if (rv == 0) {
                CORE_INFO("raft: adding %s to %s", g->desired_addr[i], g->dir);
                g->changing = true;
                return true;
            }
        } else if (srv->role != RAFT_VOTER) {
            /* libraft catches the server up in rounds before promoting it
             * (a new member never votes without the log). */
            rv = raft_assign(r, &g->change, srv->id, RAFT_VOTER, on_change_done);
            if (rv == 0) {
                g->changing = true;
                return true;
            }
        }
    }
    for (unsigned j = 0; j < r->configuration.n && rv == 0; j++) {
        raft_id id = r->configuration.servers[j].id;
        if (id == r->id || is_desired(g, id))
            continue;
        rv = raft_remove(r, &g->change, id, on_change_done);
        if (rv == 0) {
            CORE_INFO("raft: removing member %llu from %s", (unsigned long long)id, g->dir);
            g->changing = true;
            return true;
        }
    }
    if (rv != 0)
        CORE_DEBUG("raft: membership step in %s: %s", g->dir, raft_strerror(rv));
    return false;
}

int gs_group_set_desired(struct gs_group *g, const struct gs_raft_peer *peers, unsigned n)
{
    if (n > MAX_DESIRED)
        return CORE_EINVAL;
    for (unsigned i = 0; i < n; i++) {
        size_t len = strlen(peers[i].address);
        if (len > GS_MUX_ADDR_MAX || peers[i].id == 0)
            return CORE_EINVAL;
        memcpy(g->desired_addr[i], peers[i].address, len + 1);
        g->desired[i] = peers[i].id;
    }
    g->n_desired = n;
    return 0;
}

bool gs_group_converged(struct gs_group *g)
{
    struct raft *r = &g->raft;
    if (g->changing || raft_state(r) != RAFT_LEADER || g->n_desired == 0 ||
        r->configuration.n != g->n_desired)
        return false;
    for (unsigned j = 0; j < r->configuration.n; j++)
        if (r->configuration.servers[j].role != RAFT_VOTER ||
            !is_desired(g, r->configuration.servers[j].id))
            return false;
    return true;
}

/* The group's directory holds libraft's files only (no subdirectories). */
static void erase_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[PATH_MAX + 256];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

/* libraft 0.15's uv io fires its close callback without waiting for a
 * segment finalize (truncate and rename of the last open segment, started
 * by the close itself) still on the thread pool. When that work completes
 * it runs the close check again, which calls the close callback a second
 * time: raft's own callback would free raft's memory twice, and the work's
 * completion reads the uv io, so that memory must outlive it. The wrapper
 * passes the first call on and drops any later one; the io's memory goes
 * only in gs_group_free, once the loop has run dry. */
static void on_io_closed(struct raft_io *io)
{
    struct gs_group *g = CORE_CONTAINER_OF(io, struct gs_group, io);
    if (g->io_closed)
        return;
    g->io_closed = true;
    g->raft_io_closed(io);
}

static void io_close_once(struct raft_io *io, raft_io_close_cb cb)
{
    struct gs_group *g = CORE_CONTAINER_OF(io, struct gs_group, io);
    g->raft_io_closed = cb;
    g->uv_io_close(io, on_io_closed);
}

static void release_io(struct gs_group *g)
{
    raft_uv_close(&g->io);
    if (!g->use_mux)
        raft_uv_tcp_close(&g->transport.inner);
}

void gs_group_free(struct gs_group *g)
{
    if (!g)
        return;
    release_io(g);
    free(g);
}

static void group_closed(struct gs_group *g)
{
    void (*cb)(void *) = g->close_cb;
    void *data = g->close_data;
    if (g->erase)
        erase_dir(g->dir);
    gs_fsm_free(g->fsm);
    g->fsm = NULL;
    if (g->orphan)
        gs_group_free(g);
    if (cb)
        cb(data);
}

static void on_handle_closed(uv_handle_t *h)
{
    struct gs_group *g = h->data;
    if (--g->handles_open == 0)
        group_closed(g);
}

static void on_raft_closed(struct raft *r)
{
    struct gs_group *g = r->data;
    g->handles_open = 2;
    uv_close((uv_handle_t *)&g->prepare, on_handle_closed);
    uv_close((uv_handle_t *)&g->rebalance, on_handle_closed);
}

static void free_failed_group(uv_handle_t *h)
{
    struct gs_group *g = h->data;
    gs_fsm_free(g->fsm);
    free(g);
}

int gs_group_start(struct gs_group **out, struct uv_loop_s *loop, const struct gs_group_config *cfg)
{
    const char *self = NULL;
    for (unsigned i = 0; i < cfg->n_peers; i++)
        if (cfg->peers[i].id == cfg->id)
            self = cfg->peers[i].address;
    if (!cfg->id || !self || !cfg->dir)
        return CORE_EINVAL;
    int rc = mkdir_p(cfg->dir);
    if (rc) {
        CORE_WARN("raft: cannot create %s: %s", cfg->dir, core_strerror(rc));
        return CORE_EIO;
    }
    struct gs_group *g = calloc(1, sizeof(*g));
    if (!g)
        return CORE_ENOMEM;
    unsigned election_ms = cfg->election_ms ? cfg->election_ms : DEFAULT_ELECTION_MS;
    struct gs_fsm_config fcfg = cfg->fsm;
    if (!fcfg.lease_ms) {
        unsigned drift = cfg->lease_drift_ms ? cfg->lease_drift_ms : election_ms / 3;
        fcfg.lease_ms = drift < election_ms ? election_ms - drift : 0;
    }
    if (!fcfg.mono_ms)
        fcfg.mono_ms = mono_ms_now;
    rc = gs_fsm_new(&g->fsm, &fcfg);
    if (rc) {
        free(g);
        return rc;
    }
    g->preferred = cfg->preferred_leader;
    g->transfer.data = g;
    g->change.data = g;
    snprintf(g->dir, sizeof(g->dir), "%s", cfg->dir);

    int rv;
    if (cfg->mux) {
        g->use_mux = true;
        rv = gs_mux_channel_init(&g->chan, cfg->mux, cfg->mux_group);
        if (rv == 0) {
            rv = raft_uv_init(&g->io, loop, cfg->dir, &g->chan.t);
            if (rv != 0) {
                /* The channel's timer must close before g goes. */
                g->chan.defer.data = g;
                uv_close((uv_handle_t *)&g->chan.defer, free_failed_group);
                return CORE_EIO;
            }
        }
    } else {
        rv = gs_nodelay_transport_init(&g->transport, loop);
        if (rv == 0) {
            rv = raft_uv_init(&g->io, loop, cfg->dir, &g->transport.outer);
            if (rv != 0)
                raft_uv_tcp_close(&g->transport.inner);
        }
    }
    if (rv == 0) {
        g->uv_io_close = g->io.close;
        g->io.close = io_close_once;
        raft_uv_set_connect_retry_delay(&g->io, cfg->connect_retry_ms ? cfg->connect_retry_ms
                                                                      : DEFAULT_RETRY_MS);
        rv = raft_init(&g->raft, &g->io, gs_fsm_raft(g->fsm), cfg->id, self);
        if (rv != 0) {
            CORE_WARN("raft: init %s: %s", self, raft_errmsg(&g->raft));
            raft_uv_close(&g->io);
            if (!g->use_mux)
                raft_uv_tcp_close(&g->transport.inner);
        }
    }
    if (rv != 0) {
        if (g->use_mux) {
            g->chan.defer.data = g;
            uv_close((uv_handle_t *)&g->chan.defer, free_failed_group);
        } else {
            gs_fsm_free(g->fsm);
            free(g);
        }
        return from_raft(rv, CORE_EIO);
    }
    g->raft.data = g;
    gs_fsm_attach(g->fsm, &g->raft);
    raft_set_election_timeout(&g->raft, election_ms);
    raft_set_heartbeat_timeout(&g->raft,
                               cfg->heartbeat_ms ? cfg->heartbeat_ms : DEFAULT_HEARTBEAT_MS);
    raft_set_pre_vote(&g->raft, true);
    if (cfg->snapshot_threshold)
        raft_set_snapshot_threshold(&g->raft, cfg->snapshot_threshold);
    if (cfg->snapshot_trailing)
        raft_set_snapshot_trailing(&g->raft, cfg->snapshot_trailing);
    g->snapshot_threshold = (unsigned)g->raft.snapshot.threshold;

    uv_prepare_init(loop, &g->prepare);
    g->prepare.data = g;
    uv_timer_init(loop, &g->rebalance);
    g->rebalance.data = g;

    /* Every member bootstraps the same configuration; a directory that
     * already holds state refuses (RAFT_CANTBOOTSTRAP) and keeps its own. */
    struct raft_configuration conf;
    raft_configuration_init(&conf);
    for (unsigned i = 0; i < cfg->n_peers && rv == 0; i++)
        rv = raft_configuration_add(&conf, cfg->peers[i].id, cfg->peers[i].address, RAFT_VOTER);
    /* A joining member starts empty and learns the configuration (and the
     * data, from a snapshot or the log) from the leader that adds it. */
    if (rv == 0 && !cfg->join) {
        rv = raft_bootstrap(&g->raft, &conf);
        if (rv == RAFT_CANTBOOTSTRAP)
            rv = 0;
    }
    raft_configuration_close(&conf);
    if (rv == 0) {
        gs_transport_deaf(g->use_mux ? &g->chan.t : &g->transport.outer, g->use_mux, election_ms);
        rv = raft_start(&g->raft);
    }
    if (rv != 0) {
        CORE_WARN("raft: start %s in %s: %s (%s%s%s)", self, cfg->dir, raft_strerror(rv),
                  raft_errmsg(&g->raft), g->io.errmsg[0] ? "; " : "", g->io.errmsg);
        /* Memory goes once the loop has closed everything. Nothing was
         * appended, so no segment finalize can outlive the close. */
        g->orphan = true;
        raft_close(&g->raft, on_raft_closed);
        return from_raft(rv, CORE_EIO);
    }
    uv_prepare_start(&g->prepare, on_prepare);
    uv_timer_start(&g->rebalance, on_rebalance, REBALANCE_INTERVAL_MS, REBALANCE_INTERVAL_MS);
    *out = g;
    return 0;
}

void gs_group_hold_snapshots(struct gs_group *g, bool hold)
{
    raft_set_snapshot_threshold(&g->raft, hold ? UINT_MAX : g->snapshot_threshold);
}

void gs_group_close_erase(struct gs_group *g, void (*cb)(void *data), void *data)
{
    g->erase = true;
    gs_group_close(g, cb, data);
}

void gs_group_close(struct gs_group *g, void (*cb)(void *data), void *data)
{
    g->close_cb = cb;
    g->close_data = data;
    uv_prepare_stop(&g->prepare);
    uv_timer_stop(&g->rebalance);
    raft_close(&g->raft, on_raft_closed);
}

struct gs_fsm *gs_group_fsm(struct gs_group *g)
{
    return g->fsm;
}

bool gs_group_is_leader(struct gs_group *g)
{
    return raft_state(&g->raft) == RAFT_LEADER;
}

int gs_group_leader(struct gs_group *g, uint64_t *id, char *addr, size_t addrlen)
{
    raft_id lid;
    const char *laddr;
    raft_leader(&g->raft, &lid, &laddr);
    if (lid == 0 || laddr == NULL)
        return CORE_ENOTFOUND;
    if (id)
        *id = lid;
    if (addr && addrlen) {
        size_t n = strlen(laddr);
        if (n >= addrlen)
            n = addrlen - 1;
        memcpy(addr, laddr, n);
        addr[n] = '\0';
    }
    return 0;
}

int gs_group_transfer(struct gs_group *g, uint64_t id)
{
    if (g->transferring || raft_state(&g->raft) != RAFT_LEADER)
        return CORE_ESTATE;
    /* The target starts its election at once (libraft's TimeoutNow lets
     * it disrupt this leader), so no lease may outlive this call. */
    gs_fsm_end_lease(g->fsm);
    int rv = raft_transfer(&g->raft, &g->transfer, id, on_transfer_done);
    if (rv != 0)
        return from_raft(rv, CORE_EINVAL);
    g->transferring = true;
    return 0;
}

int gs_group_barrier(struct gs_group *g, void (*cb)(void *data, int status), void *data)
{
    return gs_fsm_barrier(g->fsm, cb, data);
}

void gs_group_raft_info(struct gs_group *g, uint64_t *term, uint64_t *commit, uint64_t *applied)
{
    *term = g->raft.current_term;
    *commit = g->raft.commit_index;
    *applied = raft_last_applied(&g->raft);
}
