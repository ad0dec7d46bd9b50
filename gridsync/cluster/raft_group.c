/*
 * libraft glue, the group half: one Raft group on a libuv loop (gs_group):
 * its raft instance, its I/O (a port of its own or a channel of the node's
 * mux, raft_transport.h), its data directory, leadership transfer to the
 * preferred node and the reconciliation of its replica set. The state
 * machine it drives is raft_glue.c's gs_fsm, used here only through
 * raft_glue.h. The contract is in raft_glue.h.
 */
#include "gridsync/cluster/raft_glue.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/list.h"
#include "core/log.h"
#include "gridsync/cluster/raft_store_dynamo.h"
#include "gridsync/cluster/raft_transport.h"

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
    bool dynamo;                 /* Raft state in DynamoDB; dir is a scratch directory */
    unsigned snapshot_threshold; /* as configured (restored after a hold) */
    unsigned handles_open;
    void (*close_cb)(void *);
    void *close_data;
    /* libraft's close of its uv io, wrapped (io_close_once). */
    void (*uv_io_close)(struct raft_io *io, raft_io_close_cb cb);
    /* libraft's send, wrapped (send_guarded). */
    int (*uv_send)(struct raft_io *io, struct raft_io_send *req, const struct raft_message *message,
                   raft_io_send_cb cb);
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

/* libraft 0.15 can ask to send an AppendEntries result to an address it
 * does not hold, and its uv send would crash on it (seen as nodes killed
 * by SIGSEGV in the fault campaign): gs_raft_send_addressable says which
 * (raft_transport.h). Such a send is refused as a failed one, which
 * libraft handles as any other (the leader asks again). */
static int send_guarded(struct raft_io *io, struct raft_io_send *req,
                        const struct raft_message *message, raft_io_send_cb cb)
{
    struct gs_group *g = CORE_CONTAINER_OF(io, struct gs_group, io);
    if (!gs_raft_send_addressable(&g->raft, message))
        return RAFT_NOCONNECTION;
    return g->uv_send(io, req, message, cb);
}

static void release_io(struct gs_group *g)
{
    gs_raft_store_dynamo_release(&g->io);
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
    if (g->erase && g->dynamo)
        (void)gs_raft_store_dynamo_erase(&g->io); /* logged */
    if (g->erase || g->dynamo)
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
    /* With the state in DynamoDB, libraft's uv io (kept for its transport)
     * gets a scratch directory of its own, removed at close. */
    char scratch[PATH_MAX];
    if (cfg->store) {
        const char *tmp = getenv("TMPDIR");
        snprintf(scratch, sizeof(scratch), "%s/gridsync-raft-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (mkdtemp(scratch) == NULL) {
            CORE_WARN("raft: cannot create a scratch directory %s: %s", scratch, strerror(errno));
            return CORE_EIO;
        }
    }
    int rc = cfg->store ? 0 : mkdir_p(cfg->dir);
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
    snprintf(g->dir, sizeof(g->dir), "%s", cfg->store ? scratch : cfg->dir);
    g->dynamo = cfg->store != NULL;

    int rv;
    if (cfg->mux) {
        g->use_mux = true;
        rv = gs_mux_channel_init(&g->chan, cfg->mux, cfg->mux_group);
        if (rv == 0) {
            rv = raft_uv_init(&g->io, loop, g->dir, &g->chan.t);
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
            rv = raft_uv_init(&g->io, loop, g->dir, &g->transport.outer);
            if (rv != 0)
                raft_uv_tcp_close(&g->transport.inner);
        }
    }
    if (rv == 0 && cfg->store) {
        /* The group's key: this node's raft id and the group's name. */
        struct gs_raft_store_config sc = *cfg->store;
        const char *base = strrchr(cfg->dir, '/');
        snprintf(sc.key, sizeof(sc.key), "%llu#%s", (unsigned long long)cfg->id,
                 base ? base + 1 : cfg->dir);
        if (gs_raft_store_dynamo_attach(&g->io, loop, &sc) != 0) {
            CORE_WARN("raft: cannot read the Raft state of %s from DynamoDB", sc.key);
            erase_dir(g->dir);
            raft_uv_close(&g->io);
            if (!g->use_mux)
                raft_uv_tcp_close(&g->transport.inner);
            rv = RAFT_IOERR;
        }
    }
    if (rv == 0) {
        /* libraft 0.15's uv I/O implements async_work (thread-pool work,
         * what FSM version 3 builds snapshots with) but still says version
         * 1, and raft_init refuses a version 3 FSM on a version 1 io. The
         * only field version 2 adds is async_work: say so when it is there. */
        if (g->io.version < 2 && g->io.async_work)
            g->io.version = 2;
        g->uv_io_close = g->io.close;
        g->io.close = io_close_once;
        g->uv_send = g->io.send;
        g->io.send = send_guarded;
        raft_uv_set_connect_retry_delay(&g->io, cfg->connect_retry_ms ? cfg->connect_retry_ms
                                                                      : DEFAULT_RETRY_MS);
        rv = raft_init(&g->raft, &g->io, gs_fsm_raft(g->fsm), cfg->id, self);
        if (rv != 0) {
            CORE_WARN("raft: init %s: %s", self, raft_errmsg(&g->raft));
            gs_raft_store_dynamo_release(&g->io);
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
        return gs_from_raft(rv, CORE_EIO);
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
        return gs_from_raft(rv, CORE_EIO);
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
        return gs_from_raft(rv, CORE_EINVAL);
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
