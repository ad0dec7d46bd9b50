/*
 * The promise of node.c: once a connection's buffers have reached their
 * working size, GET and SET (overwriting a key with a value of the same
 * size) parse, execute and reply without a single allocation. malloc,
 * calloc and realloc are wrapped at link time (-Wl,--wrap) and counted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gridsync/node/node.h"

#include "alloc_count.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct harness {
    uv_loop_t loop;
    struct gs_node node;
    struct gs_db db;
    struct gs_client client;
    struct core_buf out;
    char in[1 << 16];
};

static struct harness *setup_harness(void)
{
    struct harness *h = calloc(1, sizeof(*h));
    uv_loop_init(&h->loop);
    struct gs_node *n = &h->node;
    n->loop = &h->loop;
    gs_config_defaults(&n->cfg);
    gs_config_bind(&n->cfg, n->opts, NULL);
    assert_int_equal(gs_command_index_build(n), 0);
    struct gs_store_config sc = {.maxmemory = 0, .policy = GS_EVICT_SLRU, .hash_seed = 42};
    assert_int_equal(gs_store_new(&h->db.store, &sc), 0);
    n->dbs = &h->db;
    n->n_dbs = 1;
    struct gs_client *c = &h->client;
    c->node = n;
    c->db = &n->dbs[0];
    c->shared = &n->shared;
    n->shared.proto_max_bulk_len = n->cfg.proto_max_bulk_len;
    c->authenticated = true;
    c->w.buf = &h->out;
    c->w.proto = 2;
    gs_resp_parser_init(&c->parser, n->cfg.proto_max_bulk_len);
    c->parser.authenticated = true;
    return h;
}

static void teardown_harness(struct harness *h)
{
    gs_resp_parser_free(&h->client.parser);
    gs_store_free(h->db.store);
    gs_cmd_stats_free(&h->node.cmdstats);
    free(h->node.cmd_names);
    core_buf_free(&h->out);
    core_buf_free(&h->node.shared.scratch);
    uv_loop_close(&h->loop);
    free(h);
}

/* Run every request in `pipeline` (as the connection's on_data does). */
static void run(struct harness *h, const char *pipeline)
{
    size_t len = strlen(pipeline), off = 0;
    memcpy(h->in, pipeline, len);
    while (off < len) {
        size_t used, argc;
        struct gs_arg *argv;
        const char *err;
        int rc =
            gs_resp_parse(&h->client.parser, h->in + off, len - off, &used, &argc, &argv, &err);
        assert_int_equal(rc, GS_RESP_REQUEST);
        off += used;
        gs_execute(&h->client, argc, argv);
    }
}

static void test_get_set_do_not_allocate(void **state)
{
    struct harness *h = setup_harness();
    char pipeline[8192] = "";
    for (int i = 0; i < 16; i++) {
        char req[128];
        snprintf(req, sizeof(req),
                 "*3\r\n$3\r\nSET\r\n$6\r\nkey:%02d\r\n$5\r\nvalue\r\n"
                 "*2\r\n$3\r\nGET\r\n$6\r\nkey:%02d\r\n"
                 "GET key:%02d\r\n",
                 i, i, i);
        strcat(pipeline, req);
    }
    unsigned long before = test_allocations();
    run(h, pipeline);                         /* warm-up: keys created, buffers grown */
    assert_true(test_allocations() > before); /* the counting works */
    h->out.len = 0;
    before = test_allocations();
    for (int round = 0; round < 100; round++) {
        run(h, pipeline);
        h->out.len = 0; /* as if written to the socket */
    }
    assert_int_equal(test_allocations() - before, 0);
    /* and the replies were right */
    run(h, "GET key:07\r\n");
    assert_int_equal(h->out.len, strlen("$5\r\nvalue\r\n"));
    assert_memory_equal(h->out.data, "$5\r\nvalue\r\n", h->out.len);
    teardown_harness(h);
}

/* Not the hot path, but the same harness: KEYS and RENAME go through the
 * node's shared scratch buffer, which must not stay at the size of the
 * biggest key list or value it ever carried. */
static void test_scratch_given_back(void **state)
{
    struct harness *h = setup_harness();
    struct gs_node *n = &h->node;
    size_t big = 1 << 20;
    char *v = calloc(1, big);
    assert_int_equal(gs_store_set(n->dbs[0].store, "big", 3, v, big, -1, NULL), 0);
    free(v);
    run(h, "RENAME big big2\r\n");
    assert_memory_equal(h->out.data, "+OK\r\n", 5);
    assert_true(n->shared.scratch.cap <= 256 * 1024);
    for (int i = 0; i < 30000; i++) {
        char k[16];
        int kl = snprintf(k, sizeof(k), "k%d", i);
        assert_int_equal(gs_store_set(n->dbs[0].store, k, (size_t)kl, "v", 1, -1, NULL), 0);
    }
    h->out.len = 0;
    run(h, "KEYS *\r\n");
    assert_memory_equal(h->out.data, "*30001\r\n", 8);
    assert_true(n->shared.scratch.cap <= 256 * 1024);
    teardown_harness(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_set_do_not_allocate),
        cmocka_unit_test(test_scratch_given_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
