/*
 * The option table is bound by name: every row of the node's and the
 * features' tables points at its own field of struct gs_config, whatever
 * the order of rows, and every option is in the table once.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gridsync/cluster/cluster.h"
#include "gridsync/node/node.h"
#include "gridsync/origin/origin_node.h"

static const struct gs_feature *const features[] = {&gs_origin_feature, &gs_cluster_feature, NULL};

static void set(struct core_option *opts, const char *name, const char *value)
{
    char why[256];
    char buf[256];
    strcpy(buf, value);
    assert_int_equal(core_config_set(opts, name, buf, true, why, sizeof(why)), 0);
}

static void test_each_option_sets_its_field(void **state)
{
    (void)state;
    struct gs_config cfg;
    struct core_option opts[GS_NODE_MAX_OPTS];
    gs_config_defaults(&cfg);
    gs_config_bind(&cfg, opts, features);
    set(opts, "port", "7001");
    set(opts, "maxclients", "77");
    set(opts, "hz", "42");
    set(opts, "origin-timeout", "1234");
    set(opts, "origin-queue", "99");
    set(opts, "cluster-replicas", "5");
    set(opts, "cluster-snapshot-entries", "4321");
    set(opts, "cluster-peers", "a:1,b:2");
    set(opts, "dir", "/nowhere");
    assert_int_equal(cfg.port, 7001);
    assert_int_equal(cfg.maxclients, 77);
    assert_int_equal(cfg.hz, 42);
    assert_int_equal(cfg.origin_timeout, 1234);
    assert_int_equal(cfg.origin_queue, 99);
    assert_int_equal(cfg.cluster_replicas, 5);
    assert_int_equal(cfg.cluster_snapshot_entries, 4321);
    assert_string_equal(cfg.cluster_peers, "a:1,b:2");
    assert_string_equal(cfg.dir, "/nowhere");
    /* Untouched fields keep their defaults. */
    struct gs_config dflt;
    gs_config_defaults(&dflt);
    assert_int_equal(cfg.origin_ttl, dflt.origin_ttl);
    assert_int_equal(cfg.maxmemory, dflt.maxmemory);
}

static void test_every_row_binds_a_distinct_field(void **state)
{
    (void)state;
    struct gs_config cfg;
    struct core_option opts[GS_NODE_MAX_OPTS];
    gs_config_defaults(&cfg);
    gs_config_bind(&cfg, opts, features);
    size_t n = 0;
    for (; opts[n].name; n++) {
        assert_true((char *)opts[n].ptr >= (char *)&cfg);
        assert_true((char *)opts[n].ptr < (char *)(&cfg + 1));
        bool aliased = false; /* an alias binds the field of an earlier row */
        for (size_t k = 0; k < n; k++) {
            if (opts[k].ptr == opts[n].ptr) {
                assert_true(opts[n].flags & CORE_OPT_ALIAS);
                assert_false(opts[k].flags & CORE_OPT_ALIAS);
                aliased = true;
            }
            assert_string_not_equal(opts[k].name, opts[n].name);
        }
        assert_true(aliased == !!(opts[n].flags & CORE_OPT_ALIAS));
    }
    assert_true(n > 20); /* the node's, the origin's and the cluster's */
    /* Without features only the node's own rows are there. */
    gs_config_bind(&cfg, opts, NULL);
    assert_null(core_config_find(opts, "origin-timeout"));
    assert_non_null(core_config_find(opts, "port"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_option_sets_its_field),
        cmocka_unit_test(test_every_row_binds_a_distinct_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
