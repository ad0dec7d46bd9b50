/* The placement ring: determinism, balance, movement on join/leave, and
 * the group replica sets (ring.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/error.h"
#include "gridsync/cluster/ring.h"
#include "gridsync/cluster/slot.h"

#define MAXN 17

static char name_buf[MAXN][32];
static const char *names[MAXN];

static void make_names(unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        snprintf(name_buf[i], sizeof(name_buf[i]), "127.0.0.1:%u", 7000 + i);
        names[i] = name_buf[i];
    }
}

static void test_deterministic_and_order_independent(void **state)
{
    make_names(5);
    struct gs_ring *a, *b, *c;
    assert_int_equal(gs_ring_new(&a, names, 5, NULL), 0);
    assert_int_equal(gs_ring_new(&b, names, 5, NULL), 0);
    const char *rev[5] = {names[4], names[3], names[2], names[1], names[0]};
    assert_int_equal(gs_ring_new(&c, rev, 5, NULL), 0);
    for (unsigned s = 0; s < GS_SLOTS; s++) {
        assert_int_equal(gs_ring_owner_of_slot(a, s), gs_ring_owner_of_slot(b, s));
        assert_string_equal(gs_ring_node_name(a, gs_ring_owner_of_slot(a, s)),
                            gs_ring_node_name(c, gs_ring_owner_of_slot(c, s)));
    }
    assert_int_equal(gs_ring_count_moved(a, c, NULL), 0);
    gs_ring_free(a);
    gs_ring_free(b);
    gs_ring_free(c);
}

static void test_balance(void **state)
{
    /* With the default 256 points per node no node owns more than 1.25x or
     * less than 0.75x its fair share, for every size we test. */
    for (unsigned n = 1; n <= 16; n++) {
        make_names(n);
        struct gs_ring *r;
        assert_int_equal(gs_ring_new(&r, names, n, NULL), 0);
        unsigned counts[MAXN];
        gs_ring_slot_counts(r, counts);
        unsigned total = 0;
        for (unsigned i = 0; i < n; i++) {
            double share = (double)counts[i] * n / GS_SLOTS;
            if (share > 1.25 || share < 0.75)
                fail_msg("n=%u node %u owns %u slots (%.2f of fair)", n, i, counts[i], share);
            total += counts[i];
        }
        assert_int_equal(total, GS_SLOTS);
        gs_ring_free(r);
    }
}

static void test_adding_a_node_moves_about_1_over_n(void **state)
{
    for (unsigned n = 3; n <= 16; n++) {
        make_names(n + 1);
        struct gs_ring *a, *b;
        assert_int_equal(gs_ring_new(&a, names, n, NULL), 0);
        assert_int_equal(gs_ring_with_node(a, names[n], &b), 0);
        assert_int_equal(gs_ring_nodes(b), n + 1);
        unsigned moved = gs_ring_count_moved(a, b, NULL);
        if (moved > 1.1 * GS_SLOTS / n || moved == 0)
            fail_msg("adding a node to %u moved %u slots (bound %.0f)", n, moved,
                     1.1 * GS_SLOTS / n);
        /* Consistent hashing: every slot that moves, moves to the new node. */
        for (unsigned s = 0; s < GS_SLOTS; s++) {
            const char *before = gs_ring_node_name(a, gs_ring_owner_of_slot(a, s));
            const char *after = gs_ring_node_name(b, gs_ring_owner_of_slot(b, s));
            if (strcmp(before, after) != 0)
                assert_string_equal(after, names[n]);
        }
        gs_ring_free(a);
        gs_ring_free(b);
    }
}

static void test_removing_a_node_moves_only_its_slots(void **state)
{
    for (unsigned n = 4; n <= 16; n++) {
        make_names(n);
        struct gs_ring *a, *b;
        assert_int_equal(gs_ring_new(&a, names, n, NULL), 0);
        const char *victim = names[n / 2];
        assert_int_equal(gs_ring_without_node(a, victim, &b), 0);
        unsigned counts[MAXN];
        gs_ring_slot_counts(a, counts);
        unsigned moved = gs_ring_count_moved(a, b, NULL);
        assert_int_equal(moved, counts[n / 2]);
        assert_true(moved <= 1.1 * GS_SLOTS / (n - 1));
        assert_int_equal(gs_ring_find(b, victim), -1);
        gs_ring_free(a);
        gs_ring_free(b);
    }
}

static void test_group_replicas(void **state)
{
    make_names(8);
    struct gs_ring *r;
    assert_int_equal(gs_ring_new(&r, names, 8, NULL), 0);
    assert_int_equal(gs_ring_rf(r), 3);
    unsigned membership[8] = {0};
    for (unsigned g = 0; g < 8; g++) {
        unsigned rep[GS_RING_MAX_REPLICAS];
        assert_int_equal(gs_ring_group_replicas(r, g, rep), 3);
        assert_int_equal(rep[0], g); /* the preferred leader comes first */
        assert_int_not_equal(rep[0], rep[1]);
        assert_int_not_equal(rep[1], rep[2]);
        assert_int_not_equal(rep[0], rep[2]);
        for (unsigned i = 0; i < 3; i++)
            membership[rep[i]]++;
    }
    /* Every node is in exactly RF groups: at most RF Raft ports per node. */
    for (unsigned i = 0; i < 8; i++)
        assert_int_equal(membership[i], 3);
    gs_ring_free(r);

    /* Fewer nodes than RF: every group spans all of them. */
    assert_int_equal(gs_ring_new(&r, names, 2, NULL), 0);
    assert_int_equal(gs_ring_rf(r), 2);
    unsigned rep[GS_RING_MAX_REPLICAS];
    assert_int_equal(gs_ring_group_replicas(r, 1, rep), 2);
    assert_int_equal(rep[0], 1);
    assert_int_equal(rep[1], 0);
    gs_ring_free(r);
}

static void test_invalid(void **state)
{
    struct gs_ring *r;
    make_names(3);
    assert_int_equal(gs_ring_new(&r, names, 0, NULL), CORE_EINVAL);
    const char *dup[2] = {"a:1", "a:1"};
    assert_int_equal(gs_ring_new(&r, dup, 2, NULL), CORE_EINVAL);
    const char *empty[1] = {""};
    assert_int_equal(gs_ring_new(&r, empty, 1, NULL), CORE_EINVAL);
    struct gs_ring_config cfg = {16, GS_RING_MAX_REPLICAS + 1};
    assert_int_equal(gs_ring_new(&r, names, 3, &cfg), CORE_EINVAL);
    assert_int_equal(gs_ring_new(&r, names, 3, NULL), 0);
    struct gs_ring *b;
    assert_int_equal(gs_ring_without_node(r, "nope:1", &b), CORE_ENOTFOUND);
    assert_int_equal(gs_ring_with_node(r, names[0], &b), CORE_EINVAL);
    gs_ring_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deterministic_and_order_independent),
        cmocka_unit_test(test_balance),
        cmocka_unit_test(test_adding_a_node_moves_about_1_over_n),
        cmocka_unit_test(test_removing_a_node_moves_only_its_slots),
        cmocka_unit_test(test_group_replicas),
        cmocka_unit_test(test_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
