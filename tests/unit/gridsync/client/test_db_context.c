/*
 * The database context (gridsync/client/client.h): a handler reads and
 * writes only c->db->store, and judges expiry only by c->db->now_ms. The
 * handlers are called directly, with contexts built here, as the cluster
 * calls them for an applied log entry.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gridsync/node/node.h"

struct harness {
    uv_loop_t loop;
    struct gs_node node;
    struct gs_db dbs[2];
    struct gs_client client;
    struct core_buf out;
};

static struct harness *setup_harness(void)
{
    struct harness *h = calloc(1, sizeof(*h));
    uv_loop_init(&h->loop);
    struct gs_node *n = &h->node;
    n->loop = &h->loop;
    gs_config_defaults(&n->cfg);
    gs_config_bind(&n->cfg, n->opts, NULL);
    gs_command_index_build(n);
    for (unsigned d = 0; d < 2; d++) {
        struct gs_store_config sc = {.policy = GS_EVICT_SLRU, .hash_seed = 42 + d};
        assert_int_equal(gs_store_new(&h->dbs[d].store, &sc), 0);
        h->dbs[d].id = d;
    }
    n->dbs = h->dbs;
    n->n_dbs = 2;
    struct gs_client *c = &h->client;
    c->node = n;
    c->db = &h->dbs[0];
    c->shared = &n->shared;
    n->shared.proto_max_bulk_len = n->cfg.proto_max_bulk_len;
    c->authenticated = true;
    c->w.buf = &h->out;
    c->w.proto = 2;
    return h;
}

static void teardown_harness(struct harness *h)
{
    for (unsigned d = 0; d < 2; d++)
        gs_store_free(h->dbs[d].store);
    core_buf_free(&h->out);
    gs_cmd_stats_free(&h->node.cmdstats); /* what gs_command_index_build made */
    free(h->node.cmd_names);
    uv_loop_close(&h->loop);
    free(h);
}

/* Run one command through its handler (no dispatcher: the context is the
 * caller's) and return its reply, NUL-terminated. */
static const char *run(struct harness *h, struct gs_db *db, int64_t now_ms, const char *line)
{
    char buf[256];
    struct gs_arg argv[8];
    size_t argc = 0;
    strcpy(buf, line);
    for (char *tok = strtok(buf, " "); tok && argc < 8; tok = strtok(NULL, " "))
        argv[argc++] = (struct gs_arg){tok, strlen(tok)};
    const struct gs_command *cmd = gs_command_lookup(&h->node, argv[0].p, argv[0].len);
    assert_non_null(cmd);
    h->out.len = 0;
    db->now_ms = now_ms;
    h->client.db = db;
    cmd->fn(&h->client, argc, argv);
    core_buf_append(&h->out, "", 1);
    return h->out.data;
}

static void test_handlers_use_only_their_database(void **state)
{
    (void)state;
    struct harness *h = setup_harness();
    assert_string_equal(run(h, &h->dbs[0], 1000, "SET k zero"), "+OK\r\n");
    assert_string_equal(run(h, &h->dbs[1], 1000, "SET k one"), "+OK\r\n");
    assert_string_equal(run(h, &h->dbs[0], 1000, "GET k"), "$4\r\nzero\r\n");
    assert_string_equal(run(h, &h->dbs[1], 1000, "GET k"), "$3\r\none\r\n");
    assert_string_equal(run(h, &h->dbs[1], 1000, "DEL k"), ":1\r\n");
    assert_string_equal(run(h, &h->dbs[0], 1000, "EXISTS k"), ":1\r\n");
    assert_string_equal(run(h, &h->dbs[1], 1000, "DBSIZE"), ":0\r\n");
    assert_string_equal(run(h, &h->dbs[0], 1000, "DBSIZE"), ":1\r\n");
    teardown_harness(h);
}

static void test_expiry_follows_the_context_clock(void **state)
{
    (void)state;
    struct harness *h = setup_harness();
    struct gs_db *db = &h->dbs[0];
    /* Times far from the machine's clock: only the context's can count. */
    assert_string_equal(run(h, db, 1000, "SET k v PX 100"), "+OK\r\n");
    assert_string_equal(run(h, db, 1000, "PEXPIRETIME k"), ":1100\r\n");
    assert_string_equal(run(h, db, 1050, "PTTL k"), ":50\r\n");
    assert_string_equal(run(h, db, 1099, "GET k"), "$1\r\nv\r\n");
    assert_string_equal(run(h, db, 1100, "GET k"), "$-1\r\n");
    assert_string_equal(run(h, db, 1100, "DBSIZE"), ":0\r\n");
    /* EXPIREAT in the context's past deletes at once. */
    assert_string_equal(run(h, db, 5000, "SET j v"), "+OK\r\n");
    assert_string_equal(run(h, db, 5000, "PEXPIREAT j 4999"), ":1\r\n");
    assert_string_equal(run(h, db, 5000, "EXISTS j"), ":0\r\n");
    teardown_harness(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handlers_use_only_their_database),
        cmocka_unit_test(test_expiry_follows_the_context_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
