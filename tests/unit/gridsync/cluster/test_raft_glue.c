/*
 * The Raft glue's state machine and proposer on libraft's deterministic
 * fixture (in-memory network and disk, simulated time): replication,
 * batching, elections after a leader loss, catch-up of a restarted
 * follower, snapshot install, the "limbo" rule (a write whose leader
 * stepped down is answered by what really happened to its entry), and
 * when a leader may answer reads from its store (a new leader only after
 * an entry of its term; a lease that runs out before anyone else can win
 * an election).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <raft.h>
#include <raft/fixture.h>

#include "core/error.h"
#include "core/log.h"
#include "gridsync/cluster/raft_glue.h"
#include "gridsync/store/store.h"
#include "test_exec.h"

#define MAX_NODES 5

/* libraft's default election timeout (the fixture keeps it) and the lease
 * the tests give their leaders: the timeout less a drift bound. */
#define ELECTION_MS 1000
#define LEASE_MS    700

/* ---- Cluster of n fixture servers, each with a store and a gs_fsm ---- */

/* A node's state besides its store (the cluster keeps its slot migration
 * state there), which snapshots must carry: here a string the tests set. */
struct side_state {
    bool have;
    char s[32];
};

struct cluster {
    struct raft_fixture f;
    unsigned n;
    struct gs_store *store[MAX_NODES];
    struct gs_fsm *fsm[MAX_NODES];
    struct side_state side[MAX_NODES];
};

static int side_encode(void *ctx, struct core_buf *b)
{
    const struct side_state *st = ctx;
    return st->have ? core_buf_append(b, st->s, strlen(st->s)) : 0;
}

static int side_restore(void *ctx, const char *p, size_t len)
{
    struct side_state *st = ctx;
    if (len >= sizeof(st->s))
        return CORE_EPROTO;
    st->have = p != NULL;
    memcpy(st->s, p ? p : "", p ? len : 0);
    st->s[p ? len : 0] = '\0';
    return 0;
}

/* The side state's validity: "bad..." is a record side_restore would
 * take but the state machine does not accept. */
static bool side_valid(const char *p, size_t len)
{
    return !(len >= 3 && memcmp(p, "bad", 3) == 0);
}

static int64_t fixture_clock(void *ctx)
{
    return (int64_t)raft_fixture_time(ctx);
}

static struct cluster *cluster_new_opts(unsigned n, unsigned max_inflight, bool fork)
{
    struct cluster *c = calloc(1, sizeof(*c)); /* the fixture must start zeroed */
    assert_non_null(c);
    assert_int_equal(raft_fixture_initialize(&c->f), 0);
    c->n = n;
    for (unsigned i = 0; i < n; i++) {
        struct gs_store_config scfg = {0};
        assert_int_equal(gs_store_new(&c->store[i], &scfg), 0);
        struct gs_fsm_config cfg = {
            .store = c->store[i],
            .exec = test_exec,
            .max_inflight = max_inflight,
            .limbo_timeout_ms = 60000,
            .clock_ms = fixture_clock,
            .clock_ctx = &c->f,
            .lease_ms = LEASE_MS, /* on raft's clock: the fixture's */
            .snapshot_fork = fork,
            .state_encode = side_encode,
            .state_restore = side_restore,
            .state_valid = side_valid,
            .state_ctx = &c->side[i],
        };
        assert_int_equal(gs_fsm_new(&c->fsm[i], &cfg), 0);
        /* The fixture's I/O has async_work but leaves its version unset,
         * and raft_init refuses an FSM of version 3 then: grow it as
         * version 1, then state the I/O's version (gs_group does the same
         * for libraft's uv I/O). */
        struct raft_fsm *rf = gs_fsm_raft(c->fsm[i]);
        int version = rf->version;
        rf->version = 1;
        assert_int_equal(raft_fixture_grow(&c->f, rf), 0);
        rf->version = version;
        if (fork) {
            struct raft_io *io = raft_fixture_get(&c->f, i)->io;
            assert_non_null(io->async_work);
            io->version = 2;
        }
        gs_fsm_attach(c->fsm[i], raft_fixture_get(&c->f, i));
        /* As gs_group configures real groups: a node cut off from the
         * others cannot disrupt them with ever-higher terms. */
        raft_set_pre_vote(raft_fixture_get(&c->f, i), true);
    }
    struct raft_configuration conf;
    assert_int_equal(raft_fixture_configuration(&c->f, n, &conf), 0);
    assert_int_equal(raft_fixture_bootstrap(&c->f, &conf), 0);
    raft_configuration_close(&conf);
    assert_int_equal(raft_fixture_start(&c->f), 0);
    return c;
}

static struct cluster *cluster_new(unsigned n, unsigned max_inflight)
{
    return cluster_new_opts(n, max_inflight, false);
}

static void cluster_free(struct cluster *c)
{
    raft_fixture_close(&c->f);
    for (unsigned i = 0; i < c->n; i++) {
        gs_fsm_free(c->fsm[i]);
        gs_store_free(c->store[i]);
    }
    free(c);
}

struct result {
    int called;
    int status;
    char reply[64];
};

static void on_write(void *data, int status, const char *r, size_t len)
{
    struct result *res = data;
    res->called++;
    res->status = status;
    size_t n = len < sizeof(res->reply) - 1 ? len : sizeof(res->reply) - 1;
    if (r)
        memcpy(res->reply, r, n);
    res->reply[r ? n : 0] = '\0';
}

static int submit(struct cluster *c, unsigned i, struct result *res, const char *a0, const char *a1,
                  const char *a2)
{
    const char *argv[3] = {a0, a1, a2};
    size_t len[3] = {strlen(a0), a1 ? strlen(a1) : 0, a2 ? strlen(a2) : 0};
    unsigned argc = a2 ? 3 : a1 ? 2 : 1;
    memset(res, 0, sizeof(*res));
    return gs_fsm_submit(c->fsm[i], argc, argv, len, on_write, res);
}

/* Step the fixture (flushing every node after each event, as the prepare
 * handle does once per loop iteration) until *flag is non-zero or the
 * simulated clock has advanced max_ms. */
static int step_until_called(struct cluster *c, const int *flag, unsigned max_ms)
{
    raft_time end = raft_fixture_time(&c->f) + max_ms;
    while (!*flag && raft_fixture_time(&c->f) < end) {
        raft_fixture_step(&c->f);
        for (unsigned i = 0; i < c->n; i++)
            gs_fsm_flush(c->fsm[i]);
    }
    return *flag;
}

static void step_until_leader_is_one_of(struct cluster *c, unsigned a, unsigned b, unsigned *out)
{
    raft_time end = raft_fixture_time(&c->f) + 10000;
    while (raft_fixture_time(&c->f) < end) {
        raft_fixture_step(&c->f);
        for (unsigned i = 0; i < c->n; i++)
            gs_fsm_flush(c->fsm[i]);
        if (raft_state(raft_fixture_get(&c->f, a)) == RAFT_LEADER) {
            *out = a;
            return;
        }
        if (raft_state(raft_fixture_get(&c->f, b)) == RAFT_LEADER) {
            *out = b;
            return;
        }
    }
    fail_msg("no new leader within 10 s of simulated time");
}

static void assert_value(struct cluster *c, unsigned i, const char *key, const char *want)
{
    struct gs_entry *e = gs_store_lookup(c->store[i], key, strlen(key), 0, GS_LOOKUP_NOTOUCH);
    if (!want) {
        assert_null(e);
        return;
    }
    assert_non_null(e);
    size_t vl;
    const char *v = gs_entry_value(e, &vl);
    if (vl != strlen(want) || memcmp(v, want, vl) != 0)
        fail_msg("node %u: %s = \"%.*s\", want \"%s\"", i, key, (int)vl, v, want);
}

static void wait_all_applied(struct cluster *c, unsigned leader)
{
    raft_index idx = raft_last_index(raft_fixture_get(&c->f, leader));
    assert_true(raft_fixture_step_until_applied(&c->f, c->n, idx, 5000));
}

/* ---- Tests ----------------------------------------------------------- */

static void test_replicates_a_batch_as_one_entry(void **state)
{
    struct cluster *c = cluster_new(3, 0);
    raft_fixture_elect(&c->f, 0);
    struct raft *leader = raft_fixture_get(&c->f, 0);
    raft_index before = raft_last_index(leader);

    struct result r[4];
    assert_int_equal(submit(c, 0, &r[0], "SET", "a", "1"), 0);
    assert_int_equal(submit(c, 0, &r[1], "INCR", "n", NULL), 0);
    assert_int_equal(submit(c, 0, &r[2], "INCR", "n", NULL), 0);
    assert_int_equal(submit(c, 0, &r[3], "BOGUS", NULL, NULL), 0);
    /* A follower refuses: writes go through the leader. */
    struct result rf;
    assert_int_equal(submit(c, 1, &rf, "SET", "x", "y"), CORE_ESTATE);

    assert_int_equal(gs_fsm_flush(c->fsm[0]), 4);
    assert_int_equal(raft_last_index(leader), before + 1); /* one entry */
    assert_int_equal(r[0].called, 0);                      /* only after commit */

    assert_true(step_until_called(c, &r[3].called, 5000));
    for (int i = 0; i < 4; i++) {
        assert_int_equal(r[i].called, 1);
        assert_int_equal(r[i].status, 0);
    }
    assert_string_equal(r[0].reply, "+OK\r\n");
    assert_string_equal(r[1].reply, ":1\r\n");
    assert_string_equal(r[2].reply, ":2\r\n");
    assert_string_equal(r[3].reply, "-ERR unknown command\r\n");

    wait_all_applied(c, 0);
    for (unsigned i = 0; i < 3; i++) {
        assert_value(c, i, "a", "1");
        assert_value(c, i, "n", "2");
    }
    struct gs_fsm_stats st;
    gs_fsm_stats(c->fsm[0], &st);
    assert_int_equal(st.entries_proposed, 1);
    assert_int_equal(st.commands_proposed, 4);
    assert_int_equal(st.inflight, 0);
    cluster_free(c);
}

static void test_backpressure_grows_the_open_batch(void **state)
{
    struct cluster *c = cluster_new(3, 1); /* one entry in flight */
    raft_fixture_elect(&c->f, 0);
    struct result r[3];
    assert_int_equal(submit(c, 0, &r[0], "INCR", "n", NULL), 0);
    assert_int_equal(gs_fsm_flush(c->fsm[0]), 1);
    assert_int_equal(submit(c, 0, &r[1], "INCR", "n", NULL), 0);
    assert_int_equal(submit(c, 0, &r[2], "INCR", "n", NULL), 0);
    assert_int_equal(gs_fsm_flush(c->fsm[0]), 0); /* slot busy: wait */
    assert_true(step_until_called(c, &r[2].called, 5000));
    assert_string_equal(r[0].reply, ":1\r\n");
    assert_string_equal(r[2].reply, ":3\r\n");
    struct gs_fsm_stats st;
    gs_fsm_stats(c->fsm[0], &st);
    assert_int_equal(st.entries_proposed, 2); /* the last two shared an entry */
    cluster_free(c);
}

static void test_new_leader_after_leader_dies(void **state)
{
    struct cluster *c = cluster_new(3, 0);
    raft_fixture_elect(&c->f, 0);
    struct result r;
    assert_int_equal(submit(c, 0, &r, "INCR", "n", NULL), 0);
    assert_true(step_until_called(c, &r.called, 5000));
    assert_string_equal(r.reply, ":1\r\n");

    raft_fixture_kill(&c->f, 0);
    unsigned l;
    step_until_leader_is_one_of(c, 1, 2, &l);
    assert_int_equal(submit(c, l, &r, "INCR", "n", NULL), 0);
    assert_true(step_until_called(c, &r.called, 5000));
    assert_int_equal(r.status, 0);
    assert_string_equal(r.reply, ":2\r\n"); /* the acknowledged write survived */
    cluster_free(c);
}

static void test_restarted_follower_catches_up(void **state)
{
    struct cluster *c = cluster_new(3, 0);
    raft_fixture_elect(&c->f, 0);
    raft_fixture_kill(&c->f, 2);
    struct result r;
    char key[16], val[16];
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        snprintf(val, sizeof(val), "v%d", i);
        assert_int_equal(submit(c, 0, &r, "SET", key, val), 0);
        assert_true(step_until_called(c, &r.called, 5000));
    }
    assert_value(c, 2, "k0", NULL);
    raft_fixture_revive(&c->f, 2);
    wait_all_applied(c, 0);
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        snprintf(val, sizeof(val), "v%d", i);
        assert_value(c, 2, key, val);
    }
    cluster_free(c);
}

/* Three nodes that snapshot every 8 entries keeping 2, node 0 leading. */
static struct cluster *snapshotting_cluster(bool fork)
{
    struct cluster *c = cluster_new_opts(3, 0, fork);
    for (unsigned i = 0; i < 3; i++) {
        raft_set_snapshot_threshold(raft_fixture_get(&c->f, i), 8);
        raft_set_snapshot_trailing(raft_fixture_get(&c->f, i), 2);
    }
    raft_fixture_elect(&c->f, 0);
    return c;
}

/* SET k<from>..k<to - 1> to "v" through node 0, each answered. */
static void set_keys(struct cluster *c, int from, int to)
{
    struct result r;
    char key[16];
    for (int i = from; i < to; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        assert_int_equal(submit(c, 0, &r, "SET", key, "v"), 0);
        assert_true(step_until_called(c, &r.called, 5000));
    }
}

/* Snapshots built in a fork()ed child (libraft's async snapshot): the
 * child's copy holds every entry up to the snapshot's index and none after
 * (INCRs applied twice, or lost, would show in the counter), and a
 * follower that missed the log catches up from it. */
static void test_forked_snapshot_is_exact(void **state)
{
    (void)state;
    struct cluster *c = snapshotting_cluster(true);
    raft_fixture_kill(&c->f, 2);
    struct result r;
    char key[16], val[16];
    for (int i = 0; i < 60; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        snprintf(val, sizeof(val), "v%d", i);
        assert_int_equal(submit(c, 0, &r, "SET", key, val), 0);
        assert_true(step_until_called(c, &r.called, 5000));
        assert_int_equal(submit(c, 0, &r, "INCR", "n", NULL), 0);
        assert_true(step_until_called(c, &r.called, 5000));
    }
    assert_string_equal(r.reply, ":60\r\n");
    raft_fixture_step_until_elapsed(&c->f, 200);
    struct gs_fsm_stats st;
    gs_fsm_stats(c->fsm[0], &st);
    assert_true(st.snapshots_taken > 0);
    assert_int_equal(st.snapshots_failed, 0);

    raft_fixture_revive(&c->f, 2);
    wait_all_applied(c, 0);
    gs_fsm_stats(c->fsm[2], &st);
    assert_true(st.snapshots_restored > 0);
    assert_value(c, 2, "n", "60");
    for (int i = 0; i < 60; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        snprintf(val, sizeof(val), "v%d", i);
        assert_value(c, 2, key, val);
    }
    cluster_free(c);
}

static void test_snapshot_install_restores_the_store(void **state)
{
    struct cluster *c = snapshotting_cluster(false);
    raft_fixture_kill(&c->f, 2);
    struct result r;
    char key[16], val[16];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        snprintf(val, sizeof(val), "v%d", i);
        assert_int_equal(submit(c, 0, &r, "SET", key, val), 0);
        assert_true(step_until_called(c, &r.called, 5000));
    }
    const char *argv[5] = {"SET", "ttl", "x", "EX", "1000"};
    size_t len[5] = {3, 3, 1, 2, 4};
    memset(&r, 0, sizeof(r));
    assert_int_equal(gs_fsm_submit(c->fsm[0], 5, argv, len, on_write, &r), 0);
    assert_true(step_until_called(c, &r.called, 5000));
    assert_int_equal(submit(c, 0, &r, "DEL", "k0", NULL), 0);
    assert_true(step_until_called(c, &r.called, 5000));
    /* Let the leader finish writing its snapshot. */
    raft_fixture_step_until_elapsed(&c->f, 200);

    struct gs_fsm_stats st;
    gs_fsm_stats(c->fsm[0], &st);
    assert_true(st.snapshots_taken > 0);

    raft_fixture_revive(&c->f, 2);
    wait_all_applied(c, 0);
    gs_fsm_stats(c->fsm[2], &st);
    assert_true(st.snapshots_restored > 0);
    assert_value(c, 2, "k0", NULL);
    for (int i = 1; i < 40; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        snprintf(val, sizeof(val), "v%d", i);
        assert_value(c, 2, key, val);
    }
    /* The expiry is absolute and identical on every replica. */
    struct gs_entry *e0 = gs_store_lookup(c->store[0], "ttl", 3, 0, GS_LOOKUP_NOTOUCH);
    struct gs_entry *e2 = gs_store_lookup(c->store[2], "ttl", 3, 0, GS_LOOKUP_NOTOUCH);
    assert_non_null(e0);
    assert_non_null(e2);
    assert_true(gs_entry_expire_ms(e0) > 0);
    assert_int_equal(gs_entry_expire_ms(e0), gs_entry_expire_ms(e2));
    cluster_free(c);
}

/* A follower restored from a snapshot takes the state machine's side
 * state as of the snapshot (the cluster's slot migration state), and has
 * none when the snapshot carries none: it must not keep what it had built
 * before, or it would decide later entries differently from the others. */
static void snapshot_carries_the_side_state(bool leader_has, bool fork)
{
    struct cluster *c = snapshotting_cluster(fork);
    raft_fixture_kill(&c->f, 2);
    c->side[2] = (struct side_state){true, "stale"};
    for (unsigned i = 0; i < 2; i++)
        c->side[i] = (struct side_state){leader_has, "blocked 5-9"};
    set_keys(c, 0, 40);
    raft_fixture_step_until_elapsed(&c->f, 200);
    /* Changed after the snapshot: the follower must get the state as of
     * the snapshot (later changes reach it through the log). */
    c->side[0] = (struct side_state){true, "later"};
    raft_fixture_revive(&c->f, 2);
    wait_all_applied(c, 0);
    struct gs_fsm_stats st;
    gs_fsm_stats(c->fsm[2], &st);
    assert_true(st.snapshots_restored > 0);
    assert_value(c, 2, "k39", "v");
    assert_int_equal(c->side[2].have, leader_has);
    if (leader_has)
        assert_string_equal(c->side[2].s, "blocked 5-9");
    cluster_free(c);
}

static void test_snapshot_carries_the_side_state(void **state)
{
    snapshot_carries_the_side_state(true, false);
    snapshot_carries_the_side_state(true, true);
}

static void test_snapshot_without_side_state_clears_it(void **state)
{
    snapshot_carries_the_side_state(false, false);
}

/* A snapshot whose side-state record state_valid refuses is refused
 * whole, before the store is cleared: the member keeps its keys and its
 * side state (and catches up once a good snapshot comes). */
static void test_snapshot_with_a_bad_side_state_is_refused_before_clearing(void **state)
{
    (void)state;
    struct cluster *c = snapshotting_cluster(false);
    struct result r;
    assert_int_equal(submit(c, 0, &r, "SET", "before", "1"), 0);
    assert_true(step_until_called(c, &r.called, 5000));
    wait_all_applied(c, 0);
    raft_fixture_kill(&c->f, 2);
    c->side[2] = (struct side_state){true, "mine"};
    for (unsigned i = 0; i < 2; i++)
        c->side[i] = (struct side_state){true, "bad record"};
    set_keys(c, 0, 40);
    raft_fixture_step_until_elapsed(&c->f, 200);
    raft_fixture_revive(&c->f, 2);
    raft_fixture_step_until_elapsed(&c->f, 2000);
    struct gs_fsm_stats st;
    gs_fsm_stats(c->fsm[2], &st);
    assert_int_equal(st.snapshots_restored, 0);
    assert_value(c, 2, "before", "1");
    assert_string_equal(c->side[2].s, "mine");
    /* The next snapshot is good: the member restores it and catches up. */
    for (unsigned i = 0; i < 2; i++)
        c->side[i] = (struct side_state){true, "good"};
    set_keys(c, 40, 80);
    wait_all_applied(c, 0);
    gs_fsm_stats(c->fsm[2], &st);
    assert_true(st.snapshots_restored > 0);
    assert_value(c, 2, "k79", "v");
    assert_string_equal(c->side[2].s, "good");
    cluster_free(c);
}

/* The leader's entry reaches both followers but their acknowledgements do
 * not reach it: it steps down (RAFT_LEADERSHIPLOST) with the write
 * pending. The next leader commits the entry; the old leader learns it
 * when it applies its own tag, and answers success with the reply of that
 * single application (no double INCR). */
static void test_limbo_entry_that_committed_succeeds(void **state)
{
    struct cluster *c = cluster_new(3, 0);
    raft_fixture_elect(&c->f, 0);
    raft_fixture_saturate(&c->f, 1, 0);
    raft_fixture_saturate(&c->f, 2, 0);
    struct result r1, r2;
    assert_int_equal(submit(c, 0, &r1, "INCR", "n", NULL), 0);
    assert_int_equal(gs_fsm_flush(c->fsm[0]), 1);
    raft_index idx = raft_last_index(raft_fixture_get(&c->f, 0));

    unsigned l;
    step_until_leader_is_one_of(c, 1, 2, &l);
    assert_true(raft_last_index(raft_fixture_get(&c->f, l)) >= idx);
    assert_int_not_equal(raft_state(raft_fixture_get(&c->f, 0)), RAFT_LEADER);
    assert_int_equal(r1.called, 0); /* in limbo, not failed */
    struct gs_fsm_stats st;
    gs_fsm_stats(c->fsm[0], &st);
    assert_int_equal(st.inflight, 1);

    assert_int_equal(submit(c, l, &r2, "INCR", "n", NULL), 0);
    assert_true(step_until_called(c, &r2.called, 5000));
    assert_string_equal(r2.reply, ":2\r\n");

    raft_fixture_desaturate(&c->f, 1, 0);
    raft_fixture_desaturate(&c->f, 2, 0);
    assert_true(step_until_called(c, &r1.called, 5000));
    assert_int_equal(r1.status, 0);
    assert_string_equal(r1.reply, ":1\r\n");
    gs_fsm_stats(c->fsm[0], &st);
    assert_int_equal(st.limbo_succeeded, 1);
    wait_all_applied(c, l);
    for (unsigned i = 0; i < 3; i++)
        assert_value(c, i, "n", "2");
    cluster_free(c);
}

/* The leader is cut off before its entry leaves it; another leader writes
 * at the same index. The old leader's write must fail definitively (safe
 * to retry), not succeed and not hang. */
static void test_limbo_entry_that_was_overwritten_fails(void **state)
{
    struct cluster *c = cluster_new(3, 0);
    raft_fixture_elect(&c->f, 0);
    raft_fixture_saturate(&c->f, 0, 1);
    raft_fixture_saturate(&c->f, 0, 2);
    struct result r1, r2;
    assert_int_equal(submit(c, 0, &r1, "INCR", "n", NULL), 0);
    assert_int_equal(gs_fsm_flush(c->fsm[0]), 1);

    unsigned l;
    step_until_leader_is_one_of(c, 1, 2, &l);
    assert_int_equal(submit(c, l, &r2, "INCR", "n", NULL), 0);
    assert_true(step_until_called(c, &r2.called, 5000));
    assert_string_equal(r2.reply, ":1\r\n");

    raft_fixture_desaturate(&c->f, 0, 1);
    raft_fixture_desaturate(&c->f, 0, 2);
    assert_true(step_until_called(c, &r1.called, 5000));
    assert_int_equal(r1.status, CORE_ESTATE);
    struct gs_fsm_stats st;
    gs_fsm_stats(c->fsm[0], &st);
    assert_int_equal(st.limbo_failed, 1);
    wait_all_applied(c, l);
    for (unsigned i = 0; i < 3; i++)
        assert_value(c, i, "n", "1");
    cluster_free(c);
}

/* A group closing (its node leaves it at FINISH, or stops) answers a
 * batch it never proposed "closed" (not applied), but one it proposed
 * "unknown": another leader may still commit it. */
static void test_close_answers_unknown_for_a_proposed_batch(void **state)
{
    struct cluster *c = cluster_new(3, 0);
    raft_fixture_elect(&c->f, 0);
    raft_fixture_saturate(&c->f, 0, 1);
    raft_fixture_saturate(&c->f, 0, 2);
    struct result proposed, open;
    assert_int_equal(submit(c, 0, &proposed, "INCR", "n", NULL), 0);
    assert_int_equal(gs_fsm_flush(c->fsm[0]), 1);
    assert_int_equal(submit(c, 0, &open, "INCR", "m", NULL), 0);
    cluster_free(c); /* raft closed, then every fsm freed */
    assert_int_equal(proposed.called, 1);
    assert_int_equal(proposed.status, CORE_ETIMEOUT);
    assert_int_equal(open.called, 1);
    assert_int_equal(open.status, CORE_ECLOSED);
}

/* The deposed leader's entry reached the others and the new leader
 * committed it; the old leader, still in limbo (it cannot hear the new
 * one), closes the group: its answer must be "unknown", since the write
 * did happen (before, "closed", which clients take as not applied). */
static void test_close_in_limbo_of_a_committed_entry_is_unknown(void **state)
{
    struct cluster *c = cluster_new(3, 0);
    raft_fixture_elect(&c->f, 0);
    raft_fixture_saturate(&c->f, 1, 0);
    raft_fixture_saturate(&c->f, 2, 0);
    struct result r1, r2;
    assert_int_equal(submit(c, 0, &r1, "SET", "k", "lost-or-not"), 0);
    assert_int_equal(gs_fsm_flush(c->fsm[0]), 1);
    unsigned l;
    step_until_leader_is_one_of(c, 1, 2, &l);
    assert_int_equal(submit(c, l, &r2, "INCR", "n", NULL), 0);
    assert_true(step_until_called(c, &r2.called, 5000));
    assert_int_equal(r2.status, 0);
    assert_value(c, l, "k", "lost-or-not"); /* committed by the new leader */
    assert_int_equal(r1.called, 0);         /* node 0 has not learnt it */
    cluster_free(c);
    assert_int_equal(r1.called, 1);
    assert_int_equal(r1.status, CORE_ETIMEOUT);
}

/* An entry that is not a batch is skipped (an FSM error would halt
 * libraft) and the group keeps working. */
static void test_malformed_entry_is_skipped(void **state)
{
    struct cluster *c = cluster_new(3, 0);
    raft_fixture_elect(&c->f, 0);
    static struct raft_apply req;
    struct raft_buffer buf = {raft_malloc(5), 5};
    memcpy(buf.base, "junk!", 5);
    assert_int_equal(raft_apply(raft_fixture_get(&c->f, 0), &req, &buf, 1, NULL), 0);
    struct result r;
    assert_int_equal(submit(c, 0, &r, "INCR", "n", NULL), 0);
    assert_true(step_until_called(c, &r.called, 5000));
    assert_string_equal(r.reply, ":1\r\n");
    wait_all_applied(c, 0);
    for (unsigned i = 0; i < 3; i++) {
        struct gs_fsm_stats st;
        gs_fsm_stats(c->fsm[i], &st);
        assert_int_equal(st.entries_malformed, 1);
    }
    cluster_free(c);
}

struct barrier_result {
    int called, status;
};

static void on_barrier(void *data, int status)
{
    struct barrier_result *b = data;
    b->called++;
    b->status = status;
}

static void barrier(struct cluster *c, unsigned i)
{
    struct barrier_result b = {0};
    assert_int_equal(gs_fsm_barrier(c->fsm[i], on_barrier, &b), 0);
    assert_true(step_until_called(c, &b.called, 5000));
    assert_int_equal(b.status, 0);
}

/* The read-after-failover anomaly, reproduced: the leader acknowledges
 * SET k new once a follower has the entry, and dies before any follower
 * learns that it committed. The follower elected next holds the entry but
 * has not applied it (Raft commits an earlier term's entry only through
 * one of the new term), so its store still says "old": answering a GET
 * from it would return a value older than an acknowledged write. It must
 * not serve reads, in any mode, until an entry of its own term has been
 * applied; then the store has "new". */
static void test_new_leader_reads_only_after_an_entry_of_its_term(void **state)
{
    struct cluster *c = cluster_new(3, 0);
    raft_fixture_elect(&c->f, 0);
    struct result r;
    assert_int_equal(submit(c, 0, &r, "SET", "k", "old"), 0);
    assert_true(step_until_called(c, &r.called, 5000));
    wait_all_applied(c, 0);
    assert_true(gs_fsm_read_now(c->fsm[0], GS_READ_ANY));

    assert_int_equal(submit(c, 0, &r, "SET", "k", "new"), 0);
    assert_true(step_until_called(c, &r.called, 5000));
    assert_int_equal(r.status, 0); /* acknowledged */
    raft_index idx = raft_last_index(raft_fixture_get(&c->f, 0));
    for (unsigned i = 1; i < 3; i++) {
        /* Both followers have the entry, neither knows it committed. */
        assert_true(raft_last_index(raft_fixture_get(&c->f, i)) >= idx);
        assert_true(raft_fixture_get(&c->f, i)->commit_index < idx);
    }
    raft_fixture_kill(&c->f, 0);

    unsigned l;
    step_until_leader_is_one_of(c, 1, 2, &l);
    assert_value(c, l, "k", "old"); /* what a read would have returned */
    assert_false(gs_fsm_read_now(c->fsm[l], GS_READ_ANY));
    assert_false(gs_fsm_read_now(c->fsm[l], GS_READ_LEASE));
    assert_false(gs_fsm_read_now(c->fsm[l], GS_READ_BARRIER));

    barrier(c, l);
    assert_value(c, l, "k", "new");
    assert_true(gs_fsm_read_now(c->fsm[l], GS_READ_ANY));
    assert_true(gs_fsm_read_now(c->fsm[l], GS_READ_LEASE));
    assert_false(gs_fsm_read_now(c->fsm[l], GS_READ_BARRIER)); /* always waits */
    cluster_free(c);
}

/* A leader cut off from both followers keeps believing it leads until
 * libraft's check-quorum deposes it, up to two election timeouts later;
 * meanwhile the others elect a leader of their own. Its lease must end
 * before that election: the last simulated instant at which it would
 * still answer a lease read comes before the new leader exists. */
static void test_partitioned_leader_stops_lease_reads_before_a_new_election(void **state)
{
    struct cluster *c = cluster_new(3, 0);
    /* Node 0 wins the first election; node 1 later times out as early as
     * the lease allows for (the minimum election timeout, plus 10 ms so
     * that the first election does not split). */
    raft_fixture_set_randomized_election_timeout(&c->f, 0, ELECTION_MS);
    raft_fixture_set_randomized_election_timeout(&c->f, 1, ELECTION_MS + 10);
    assert_true(raft_fixture_step_until_has_leader(&c->f, 5000));
    assert_int_equal(raft_fixture_leader_index(&c->f), 0);
    assert_false(gs_fsm_read_now(c->fsm[0], GS_READ_LEASE)); /* no entry of its term yet */
    barrier(c, 0);
    assert_true(gs_fsm_read_now(c->fsm[0], GS_READ_LEASE));
    /* A committed write renews the lease as a barrier does. */
    struct result r;
    assert_int_equal(submit(c, 0, &r, "SET", "k", "v"), 0);
    assert_true(step_until_called(c, &r.called, 5000));
    struct gs_fsm_stats st;
    gs_fsm_stats(c->fsm[0], &st);
    assert_true(st.lease_renewed >= 2);

    /* Node 2 is cut off first: it stops hearing from the leader and is
     * left without one, ready to vote. The leader keeps its majority (and
     * lease) through node 1 until that is cut too: then the quickest
     * election there can be follows. */
    raft_fixture_saturate(&c->f, 0, 2);
    raft_fixture_saturate(&c->f, 2, 0);
    raft_fixture_step_until_elapsed(&c->f, 3 * ELECTION_MS);
    assert_int_equal(raft_state(raft_fixture_get(&c->f, 0)), RAFT_LEADER);
    barrier(c, 0);
    raft_time cut = raft_fixture_time(&c->f);
    raft_fixture_saturate(&c->f, 0, 1);
    raft_fixture_saturate(&c->f, 1, 0);
    raft_time last_lease_read = 0, end = cut + 10 * ELECTION_MS;
    bool served_after_cut = false;
    unsigned l = 0;
    while (raft_fixture_time(&c->f) < end && l == 0) {
        raft_fixture_step(&c->f);
        for (unsigned i = 0; i < c->n; i++)
            gs_fsm_flush(c->fsm[i]);
        if (gs_fsm_read_now(c->fsm[0], GS_READ_LEASE)) {
            last_lease_read = raft_fixture_time(&c->f);
            served_after_cut = true;
        }
        for (unsigned i = 1; i < 3; i++)
            if (raft_state(raft_fixture_get(&c->f, i)) == RAFT_LEADER)
                l = i;
    }
    assert_int_not_equal(l, 0);
    raft_time elected = raft_fixture_time(&c->f);
    /* check-quorum has not deposed the old leader yet: only the lease
     * keeps it from answering stale reads now. */
    assert_int_equal(raft_state(raft_fixture_get(&c->f, 0)), RAFT_LEADER);
    assert_true(served_after_cut); /* the lease was in use across the cut */
    if (last_lease_read >= elected)
        fail_msg("old leader served a lease read at %llu, new leader at %llu",
                 (unsigned long long)last_lease_read, (unsigned long long)elected);
    assert_false(gs_fsm_read_now(c->fsm[0], GS_READ_LEASE));
    cluster_free(c);
}

/* A leadership transfer lets the target win at once: the lease ends when
 * it starts. */
static void test_transfer_ends_the_lease(void **state)
{
    struct cluster *c = cluster_new(3, 0);
    raft_fixture_elect(&c->f, 0);
    barrier(c, 0);
    assert_true(gs_fsm_read_now(c->fsm[0], GS_READ_LEASE));
    gs_fsm_end_lease(c->fsm[0]);
    assert_false(gs_fsm_read_now(c->fsm[0], GS_READ_LEASE));
    assert_true(gs_fsm_read_now(c->fsm[0], GS_READ_ANY));
    barrier(c, 0); /* a barrier renews it */
    assert_true(gs_fsm_read_now(c->fsm[0], GS_READ_LEASE));
    cluster_free(c);
}

int main(void)
{
    core_log_init('T', CORE_LOG_WARNING);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replicates_a_batch_as_one_entry),
        cmocka_unit_test(test_backpressure_grows_the_open_batch),
        cmocka_unit_test(test_new_leader_after_leader_dies),
        cmocka_unit_test(test_restarted_follower_catches_up),
        cmocka_unit_test(test_snapshot_install_restores_the_store),
        cmocka_unit_test(test_forked_snapshot_is_exact),
        cmocka_unit_test(test_snapshot_carries_the_side_state),
        cmocka_unit_test(test_snapshot_without_side_state_clears_it),
        cmocka_unit_test(test_snapshot_with_a_bad_side_state_is_refused_before_clearing),
        cmocka_unit_test(test_limbo_entry_that_committed_succeeds),
        cmocka_unit_test(test_limbo_entry_that_was_overwritten_fails),
        cmocka_unit_test(test_close_answers_unknown_for_a_proposed_batch),
        cmocka_unit_test(test_close_in_limbo_of_a_committed_entry_is_unknown),
        cmocka_unit_test(test_malformed_entry_is_skipped),
        cmocka_unit_test(test_new_leader_reads_only_after_an_entry_of_its_term),
        cmocka_unit_test(test_partitioned_leader_stops_lease_reads_before_a_new_election),
        cmocka_unit_test(test_transfer_ends_the_lease),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
