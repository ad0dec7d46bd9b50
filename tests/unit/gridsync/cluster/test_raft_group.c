/*
 * gs_group with real libuv I/O: three groups of one shard in one process,
 * on loopback ports and temporary data directories. Checks what the
 * fixture cannot: bootstrap from a peer list, the per-iteration flush by
 * the prepare handle, a new leader after the leader's group is closed,
 * restart from the data directory (the log is replayed into an empty
 * store and the node catches up), leadership handed back to the
 * preferred node, and a membership change (a node joins, one leaves).
 *
 * Waits are bounded loops over the event loop (they give up after many
 * seconds; nothing asserts how fast anything was).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <signal.h>
#include <unistd.h>
#include <cmocka.h>

#include <uv.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "gridsync/cluster/raft_glue.h"
#include "gridsync/cluster/raft_transport.h"
#include "gridsync/store/store.h"
#include "test_exec.h"

#define N 3

struct node {
    struct gs_store *store;
    struct gs_group *group;
    char dir[256];
    char addr[32];
};

struct world {
    uv_loop_t loop;
    char base[128];
    struct node nodes[N];
    struct gs_raft_peer peers[N];
    int closed;
    /* Closed groups: freed once the loop has run dry (gs_group_close). */
    struct gs_group *dead[4 * N];
    unsigned n_dead;
};

/* A free port below the kernel's ephemeral range (32768 and up by
 * default), so that no outgoing connection takes it between this check
 * and the group's bind. */
static int free_port(uv_loop_t *loop)
{
    for (int attempt = 0; attempt < 1000; attempt++) {
        int port = 10000 + (int)((core_now_ns() / 1000 + (uint64_t)attempt * 7919) % 20000);
        uv_tcp_t t;
        struct sockaddr_in sa;
        uv_ip4_addr("127.0.0.1", port, &sa);
        uv_tcp_init(loop, &t);
        int rc = uv_tcp_bind(&t, (struct sockaddr *)&sa, 0);
        if (rc == 0) {
            /* bind is lazy in libuv: listen makes the kernel check. */
            rc = uv_listen((uv_stream_t *)&t, 1, NULL);
        }
        uv_close((uv_handle_t *)&t, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
        if (rc == 0)
            return port;
    }
    fail_msg("no free port");
    return 0;
}

static void start_node(struct world *w, unsigned i, uint64_t preferred)
{
    struct node *n = &w->nodes[i];
    if (!n->store) {
        struct gs_store_config scfg = {0};
        assert_int_equal(gs_store_new(&n->store, &scfg), 0);
    }
    struct gs_group_config cfg = {
        .id = i + 1,
        .dir = n->dir,
        .peers = w->peers,
        .n_peers = N,
        .preferred_leader = preferred,
        .fsm = {.store = n->store, .exec = test_exec},
    };
    assert_int_equal(gs_group_start(&n->group, &w->loop, &cfg), 0);
}

static void on_closed(void *data)
{
    ((struct world *)data)->closed++;
}

static void stop_node(struct world *w, unsigned i)
{
    int before = w->closed;
    assert_true(w->n_dead < sizeof(w->dead) / sizeof(w->dead[0]));
    w->dead[w->n_dead++] = w->nodes[i].group;
    gs_group_close(w->nodes[i].group, on_closed, w);
    w->nodes[i].group = NULL;
    uint64_t end = core_now_ns() + 10000000000ull;
    while (w->closed == before && core_now_ns() < end)
        uv_run(&w->loop, UV_RUN_ONCE);
    assert_int_equal(w->closed, before + 1);
}

/* Run the loop until a node leads (returns its index) or 20 s pass. */
static unsigned wait_leader(struct world *w, int want)
{
    uint64_t end = core_now_ns() + 20000000000ull;
    while (core_now_ns() < end) {
        for (unsigned i = 0; i < N; i++)
            if (w->nodes[i].group && gs_group_is_leader(w->nodes[i].group) &&
                (want < 0 || (unsigned)want == i))
                return i;
        uv_run(&w->loop, UV_RUN_ONCE);
    }
    fail_msg("no leader%s within 20 s", want >= 0 ? " on the preferred node" : "");
    return N;
}

struct result {
    int called, status;
    char reply[32];
};

static void on_write(void *data, int status, const char *r, size_t len)
{
    struct result *res = data;
    res->called = 1;
    res->status = status;
    snprintf(res->reply, sizeof(res->reply), "%.*s", (int)len, r ? r : "");
}

static void incr(struct world *w, unsigned i, struct result *res)
{
    const char *argv[2] = {"INCR", "n"};
    size_t len[2] = {4, 1};
    memset(res, 0, sizeof(*res));
    assert_int_equal(gs_fsm_submit(gs_group_fsm(w->nodes[i].group), 2, argv, len, on_write, res),
                     0);
    uint64_t end = core_now_ns() + 20000000000ull;
    while (!res->called && core_now_ns() < end)
        uv_run(&w->loop, UV_RUN_ONCE);
    assert_int_equal(res->called, 1);
}

static int store_n(struct world *w, unsigned i)
{
    struct gs_entry *e = gs_store_lookup(w->nodes[i].store, "n", 1, 0, GS_LOOKUP_NOTOUCH);
    if (!e)
        return 0;
    size_t vl;
    const char *v = gs_entry_value(e, &vl);
    char tmp[16] = {0};
    memcpy(tmp, v, vl < 15 ? vl : 15);
    return atoi(tmp);
}

static void wait_value(struct world *w, unsigned i, int want)
{
    uint64_t end = core_now_ns() + 20000000000ull;
    while (store_n(w, i) != want && core_now_ns() < end)
        uv_run(&w->loop, UV_RUN_ONCE);
    assert_int_equal(store_n(w, i), want);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void test_group_end_to_end(void **state)
{
    struct world *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    assert_int_equal(uv_loop_init(&w->loop), 0);
    snprintf(w->base, sizeof(w->base), "/tmp/gs-raft-group-XXXXXX");
    assert_non_null(mkdtemp(w->base));
    for (unsigned i = 0; i < N; i++) {
        snprintf(w->nodes[i].dir, sizeof(w->nodes[i].dir), "%s/node%u/group", w->base, i);
        snprintf(w->nodes[i].addr, sizeof(w->nodes[i].addr), "127.0.0.1:%d", free_port(&w->loop));
        w->peers[i] = (struct gs_raft_peer){i + 1, w->nodes[i].addr};
    }
    /* Node 0 (raft id 1) is the group's preferred leader. */
    for (unsigned i = 0; i < N; i++)
        start_node(w, i, 1);

    unsigned l = wait_leader(w, -1);
    struct result r;
    for (int k = 1; k <= 5; k++) {
        incr(w, l, &r);
        assert_int_equal(r.status, 0);
    }
    assert_string_equal(r.reply, ":5\r\n");
    char addr[64];
    uint64_t id;
    assert_int_equal(gs_group_leader(w->nodes[(l + 1) % N].group, &id, addr, sizeof(addr)), 0);
    assert_int_equal(id, l + 1);
    assert_string_equal(addr, w->nodes[l].addr);

    /* The leader goes away: another node leads and nothing acknowledged is
     * lost. */
    stop_node(w, l);
    unsigned l2 = wait_leader(w, -1);
    assert_int_not_equal(l2, l);
    incr(w, l2, &r);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.reply, ":6\r\n");

    /* Restart from its directory with an empty store: the log replays and
     * the node catches up. */
    gs_store_clear(w->nodes[l].store);
    start_node(w, l, 1);
    wait_value(w, l, 6);

    /* Leadership returns to the preferred node once it is caught up. */
    wait_leader(w, 0);
    incr(w, 0, &r);
    assert_string_equal(r.reply, ":7\r\n");
    for (unsigned i = 0; i < N; i++)
        wait_value(w, i, 7);

    for (unsigned i = 0; i < N; i++)
        stop_node(w, i);
    for (unsigned i = 0; i < N; i++)
        gs_store_free(w->nodes[i].store);
    uv_run(&w->loop, UV_RUN_DEFAULT);
    for (unsigned i = 0; i < w->n_dead; i++)
        gs_group_free(w->dead[i]);
    assert_int_equal(uv_loop_close(&w->loop), 0);
    nftw(w->base, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(w);
}

/* Two groups on three nodes, every node with one Raft port (a mux) for
 * both: each group elects its preferred leader and replicates, through
 * connections that the same listeners demultiplex. */
static void on_closed_count(void *data)
{
    (*(int *)data)++;
}

static int value_of(struct gs_store *st)
{
    struct gs_entry *e = gs_store_lookup(st, "n", 1, 0, GS_LOOKUP_NOTOUCH);
    if (!e)
        return 0;
    size_t vl;
    const char *v = gs_entry_value(e, &vl);
    return atoi(v); /* the store NUL-terminates values */
}

static void test_groups_share_one_port(void **state)
{
    enum { G = 2 };
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    char base[64] = "/tmp/gs-raft-mux-XXXXXX";
    assert_non_null(mkdtemp(base));
    char addr[N][32];
    struct gs_raft_peer peers[N];
    struct gs_raft_mux *mux[N];
    for (unsigned i = 0; i < N; i++) {
        snprintf(addr[i], sizeof(addr[i]), "127.0.0.1:%d", free_port(&loop));
        assert_int_equal(gs_raft_mux_start(&mux[i], &loop, addr[i]), 0);
        peers[i] = (struct gs_raft_peer){i + 1, addr[i]};
    }
    struct gs_store *st[N][G];
    struct gs_group *grp[N][G];
    for (unsigned i = 0; i < N; i++) {
        for (unsigned g = 0; g < G; g++) {
            struct gs_store_config scfg = {0};
            assert_int_equal(gs_store_new(&st[i][g], &scfg), 0);
            char dir[128];
            snprintf(dir, sizeof(dir), "%s/n%u/g%u", base, i, g);
            struct gs_group_config cfg = {
                .id = i + 1,
                .dir = dir,
                .peers = peers,
                .n_peers = N,
                .preferred_leader = g + 1, /* node g leads group g */
                .mux = mux[i],
                .mux_group = g,
                .fsm = {.store = st[i][g], .exec = test_exec},
            };
            assert_int_equal(gs_group_start(&grp[i][g], &loop, &cfg), 0);
        }
    }
    uint64_t end = core_now_ns() + 20000000000ull;
    while (core_now_ns() < end && !(gs_group_is_leader(grp[0][0]) && gs_group_is_leader(grp[1][1])))
        uv_run(&loop, UV_RUN_ONCE);
    assert_true(gs_group_is_leader(grp[0][0]));
    assert_true(gs_group_is_leader(grp[1][1]));

    struct result r[G];
    for (unsigned g = 0; g < G; g++) {
        const char *argv[2] = {"INCR", "n"};
        size_t len[2] = {4, 1};
        memset(&r[g], 0, sizeof(r[g]));
        assert_int_equal(gs_fsm_submit(gs_group_fsm(grp[g][g]), 2, argv, len, on_write, &r[g]), 0);
    }
    end = core_now_ns() + 20000000000ull;
    bool done = false;
    while (core_now_ns() < end && !done) {
        uv_run(&loop, UV_RUN_ONCE);
        done = r[0].called && r[1].called;
        for (unsigned i = 0; i < N && done; i++)
            for (unsigned g = 0; g < G && done; g++)
                done = value_of(st[i][g]) == 1;
    }
    assert_true(done);
    assert_string_equal(r[0].reply, ":1\r\n");
    assert_string_equal(r[1].reply, ":1\r\n");

    int closed = 0;
    for (unsigned i = 0; i < N; i++)
        for (unsigned g = 0; g < G; g++)
            gs_group_close(grp[i][g], on_closed_count, &closed);
    end = core_now_ns() + 20000000000ull;
    while (closed < N * G && core_now_ns() < end)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(closed, N * G);
    for (unsigned i = 0; i < N; i++)
        gs_raft_mux_close(mux[i], on_closed_count, &closed);
    while (closed < N * G + N && core_now_ns() < end)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(closed, N * G + N);
    for (unsigned i = 0; i < N; i++)
        for (unsigned g = 0; g < G; g++)
            gs_store_free(st[i][g]);
    uv_run(&loop, UV_RUN_DEFAULT);
    for (unsigned i = 0; i < N; i++)
        for (unsigned g = 0; g < G; g++)
            gs_group_free(grp[i][g]);
    assert_int_equal(uv_loop_close(&loop), 0);
    nftw(base, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Membership change (docs/gridsync-cluster.md, "Join and leave"): a
 * fourth node joins a running group empty (no bootstrap), the leader
 * converges the configuration to a desired set that replaces the third
 * node with it, the newcomer catches up, and the new configuration is the
 * one that counts: with the replaced node and one other stopped, the
 * leader and the newcomer still commit. The replaced node's directory is
 * erased when it leaves. */
static void test_group_membership_change(void **state)
{
    enum { M = 4 };
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    char base[64] = "/tmp/gs-raft-join-XXXXXX";
    assert_non_null(mkdtemp(base));
    char addr[M][32], dir[M][128];
    struct gs_raft_peer peers[M];
    struct gs_store *st[M];
    struct gs_group *grp[M];
    for (unsigned i = 0; i < M; i++) {
        snprintf(addr[i], sizeof(addr[i]), "127.0.0.1:%d", free_port(&loop));
        snprintf(dir[i], sizeof(dir[i]), "%s/n%u", base, i);
        peers[i] = (struct gs_raft_peer){i + 1, addr[i]};
        struct gs_store_config scfg = {0};
        assert_int_equal(gs_store_new(&st[i], &scfg), 0);
    }
    for (unsigned i = 0; i < M; i++) {
        struct gs_group_config cfg = {
            .id = i + 1,
            .dir = dir[i],
            .peers = i < 3 ? peers : &peers[3], /* the newcomer knows only itself */
            .n_peers = i < 3 ? 3 : 1,
            .preferred_leader = 1,
            .join = i == 3,
            .fsm = {.store = st[i], .exec = test_exec},
        };
        assert_int_equal(gs_group_start(&grp[i], &loop, &cfg), 0);
    }
    uint64_t end = core_now_ns() + 20000000000ull;
    while (core_now_ns() < end && !gs_group_is_leader(grp[0]))
        uv_run(&loop, UV_RUN_ONCE);
    assert_true(gs_group_is_leader(grp[0]));
    const char *argv[2] = {"INCR", "n"};
    size_t len[2] = {4, 1};
    struct result r;
    for (int k = 0; k < 3; k++) {
        memset(&r, 0, sizeof(r));
        assert_int_equal(gs_fsm_submit(gs_group_fsm(grp[0]), 2, argv, len, on_write, &r), 0);
        while (!r.called && core_now_ns() < end)
            uv_run(&loop, UV_RUN_ONCE);
        assert_int_equal(r.status, 0);
    }
    assert_int_equal(value_of(st[3]), 0); /* not a member yet */
    assert_false(gs_group_converged(grp[0]));

    struct gs_raft_peer want[3] = {peers[0], peers[1], peers[3]};
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(gs_group_set_desired(grp[i], want, 3), 0);
    end = core_now_ns() + 30000000000ull;
    while (core_now_ns() < end && !gs_group_converged(grp[0]))
        uv_run(&loop, UV_RUN_ONCE);
    assert_true(gs_group_converged(grp[0]));
    while (core_now_ns() < end && value_of(st[3]) != 3)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(value_of(st[3]), 3);

    int closed = 0;
    gs_group_close_erase(grp[2], on_closed_count, &closed);
    gs_group_close(grp[1], on_closed_count, &closed);
    while (closed < 2 && core_now_ns() < end)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(closed, 2);
    assert_int_equal(access(dir[2], F_OK), -1);

    memset(&r, 0, sizeof(r));
    assert_true(gs_group_is_leader(grp[0]));
    assert_int_equal(gs_fsm_submit(gs_group_fsm(grp[0]), 2, argv, len, on_write, &r), 0);
    while (!r.called && core_now_ns() < end)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.reply, ":4\r\n");
    while (core_now_ns() < end && value_of(st[3]) != 4)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(value_of(st[3]), 4);

    gs_group_close(grp[0], on_closed_count, &closed);
    gs_group_close(grp[3], on_closed_count, &closed);
    while (closed < M && core_now_ns() < end)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(closed, M);
    for (unsigned i = 0; i < M; i++)
        gs_store_free(st[i]);
    uv_run(&loop, UV_RUN_DEFAULT);
    for (unsigned i = 0; i < M; i++)
        gs_group_free(grp[i]);
    assert_int_equal(uv_loop_close(&loop), 0);
    nftw(base, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void on_closed_int(void *data)
{
    ++*(int *)data;
}

static void test_close_outlives_thread_pool_work(void **state)
{
    enum { CYCLES = 5 };
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    char base[64] = "/tmp/gs-raft-close-XXXXXX";
    assert_non_null(mkdtemp(base));
    char addr[32], dir[128];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", free_port(&loop));
    snprintf(dir, sizeof(dir), "%s/g", base);
    struct gs_raft_peer peer = {1, addr};
    struct gs_store *st;
    struct gs_store_config scfg = {0};
    assert_int_equal(gs_store_new(&st, &scfg), 0);
    struct gs_group_config cfg = {
        .id = 1,
        .dir = dir,
        .peers = &peer,
        .n_peers = 1,
        .preferred_leader = 1,
        .fsm = {.store = st, .exec = test_exec},
    };
    for (int cycle = 0; cycle < CYCLES; cycle++) {
        gs_store_clear(st); /* the log replays into it */
        struct gs_group *g;
        assert_int_equal(gs_group_start(&g, &loop, &cfg), 0);
        uint64_t end = core_now_ns() + 20000000000ull;
        while (!gs_group_is_leader(g) && core_now_ns() < end)
            uv_run(&loop, UV_RUN_ONCE);
        assert_true(gs_group_is_leader(g));
        const char *argv[2] = {"INCR", "n"};
        size_t len[2] = {4, 1};
        struct result r = {0};
        for (int k = 0; k < 3; k++) {
            memset(&r, 0, sizeof(r));
            assert_int_equal(gs_fsm_submit(gs_group_fsm(g), 2, argv, len, on_write, &r), 0);
            while (!r.called && core_now_ns() < end)
                uv_run(&loop, UV_RUN_ONCE);
            assert_int_equal(r.status, 0);
        }
        char want[16];
        snprintf(want, sizeof(want), ":%d\r\n", 3 * (cycle + 1));
        assert_string_equal(r.reply, want); /* nothing lost across the closes */

        int closed = 0;
        gs_group_close(g, on_closed_int, &closed);
        /* Until the loop runs dry: the close's own thread-pool work included. */
        uv_run(&loop, UV_RUN_DEFAULT);
        assert_int_equal(closed, 1);
        gs_group_free(g);
        assert_int_equal(uv_loop_close(&loop), 0);
        if (cycle + 1 < CYCLES)
            assert_int_equal(uv_loop_init(&loop), 0);
    }
    gs_store_free(st);
    nftw(base, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The receivers libraft 0.15 may ask a group to send to, as the fault
 * campaign met them (a node killed by SIGSEGV in strlen under libraft's
 * uv send): gs_raft_send_addressable refuses those the send would read
 * garbage from, and passes every real one. */
static void test_send_refuses_receivers_libraft_does_not_hold(void **state)
{
    (void)state;
    struct raft r;
    struct raft_message m;
    memset(&r, 0, sizeof r);
    memset(&m, 0, sizeof m);
    char leader[] = "127.0.0.1:17001", sender[] = "127.0.0.1:17002";

    /* A follower answers its leader. */
    m.type = RAFT_IO_APPEND_ENTRIES_RESULT;
    r.state = RAFT_FOLLOWER;
    r.follower_state.current_leader.id = 2;
    r.follower_state.current_leader.address = leader;
    m.server_id = r.follower_state.current_leader.id;
    m.server_address = r.follower_state.current_leader.address;
    assert_true(gs_raft_send_addressable(&r, &m));

    /* ... after it forgot that leader (a vote for another candidate). */
    r.follower_state.current_leader.id = 0;
    r.follower_state.current_leader.address = NULL;
    m.server_id = r.follower_state.current_leader.id;
    m.server_address = r.follower_state.current_leader.address;
    assert_false(gs_raft_send_addressable(&r, &m));

    /* A snapshot install completes after the follower became a candidate
     * in pre-vote: libraft reads the candidate's state as a leader. */
    bool votes[3] = {true, false, false};
    memset(&r.follower_state, 0, sizeof r.follower_state);
    r.state = RAFT_CANDIDATE;
    r.candidate_state.votes = votes;
    r.candidate_state.disrupt_leader = false;
    r.candidate_state.in_pre_vote = true;
    m.server_id = r.follower_state.current_leader.id;
    m.server_address = r.follower_state.current_leader.address;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    assert_int_equal((uintptr_t)m.server_address, 0x100); /* the campaign's fault address */
#endif
    assert_false(gs_raft_send_addressable(&r, &m));

    /* ... and one after it became leader (leader_state in the union). */
    r.state = RAFT_LEADER;
    memset(&r.leader_state, 0, sizeof r.leader_state);
    r.leader_state.promotee_id = 3;
    m.server_id = r.follower_state.current_leader.id;
    m.server_address = r.follower_state.current_leader.address;
    assert_false(gs_raft_send_addressable(&r, &m));

    /* A candidate or leader refusing a stale leader's AppendEntries answers
     * that request's sender: sent. */
    m.server_id = 3;
    m.server_address = sender;
    assert_true(gs_raft_send_addressable(&r, &m));
    r.state = RAFT_CANDIDATE;
    assert_true(gs_raft_send_addressable(&r, &m));

    /* Other messages name their receiver themselves. */
    m.type = RAFT_IO_REQUEST_VOTE;
    assert_true(gs_raft_send_addressable(&r, &m));
}

int main(void)
{
    core_log_init('T', CORE_LOG_WARNING);
    /* libraft writes to peers that may have gone (gs_group's contract). */
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_group_end_to_end),
        cmocka_unit_test(test_groups_share_one_port),
        cmocka_unit_test(test_group_membership_change),
        cmocka_unit_test(test_close_outlives_thread_pool_work),
        cmocka_unit_test(test_send_refuses_receivers_libraft_does_not_hold),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
