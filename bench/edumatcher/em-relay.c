/*
 * em-relay: the anchors of the order-path benchmark (bench/edumatcher/
 * exchange-path). Each answers em-load's ALF lines with no work at all, so
 * what em-load measures against it is the cost of the layout alone:
 *
 *   --role echo     em-load --TCP--> em-relay (answers)             two processes
 *   --role gateway  em-load --TCP--> em-relay --order link--> em-relay --role engine
 *                   em-load <--TCP-- em-relay <--order link-- (answers)
 *
 * The chain has the exchange's shape exactly: the same libuv loops, the
 * same TCP server (core/uv_server.h), the same order link with its records
 * and once-per-loop-turn batching (edumatcher/bus/order_link.h); only the
 * parsing, the sessions, the journal and the matching are missing.
 *
 * An answer: `LOGIN ...` gets `LOGGEDIN gw=R`, every other line `ACK cl=x
 * oid=1` (a direct reply for em-load, which ends the oldest request).
 * The gateway role names each TCP connection's records by its connection
 * id, as the exchange's gateway names them by the session's gw.
 *
 *   em-relay --role echo|gateway|engine [--port N] [--link unix:<path>]
 */
#include "core/config.h"
#include "core/error.h"
#include "core/proc.h"
#include "core/uv_server.h"
#include "edumatcher/bus/order_link.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char role[CORE_OPT_STRLEN] = "echo";
static int64_t port = 0;
static char link_ep[CORE_OPT_STRLEN] = "";

static const struct core_option options[] = {
    {"role", CORE_OPT_STRING, role, 0, 0, NULL, 0, "echo | gateway | engine"},
    {"port", CORE_OPT_INT, &port, 0, 65535, NULL, 0, "TCP port for em-load (echo, gateway)"},
    {"link", CORE_OPT_STRING, link_ep, 0, 0, NULL, 0,
     "the order link: unix:<path> (engine listens, gateway connects)"},
    {NULL, 0, NULL, 0, 0, NULL, 0, NULL},
};

static struct {
    uv_loop_t *loop;
    struct core_server *srv;
    struct em_link_server *lsrv;
    struct em_link_client *lcl;
    struct core_proc proc;
    uv_check_t check;
    char answer[EM_LINK_PAYLOAD_MAX + 64];
} R;

/* The answers to the complete lines of data[0..len) into out; the bytes
 * used. */
static size_t answer_lines(const char *data, size_t len, char *out, size_t cap, size_t *outlen)
{
    static const char ack[] = "ACK cl=x oid=1\n", in[] = "LOGGEDIN gw=R\n";
    size_t off = 0, n = 0;
    for (;;) {
        const char *nl = memchr(data + off, '\n', len - off);
        if (!nl || n + sizeof ack > cap)
            break;
        bool login = (size_t)(nl - (data + off)) >= 5 && memcmp(data + off, "LOGIN", 5) == 0;
        const char *a = login ? in : ack;
        size_t al = login ? sizeof in - 1 : sizeof ack - 1;
        memcpy(out + n, a, al);
        n += al;
        off = (size_t)(nl - data) + 1;
    }
    *outlen = n;
    return off;
}

/* ---- echo: answer on the connection ---- */

static size_t echo_data(struct core_conn *c, char *data, size_t len)
{
    size_t used = 0;
    while (used < len) {
        size_t n, took = answer_lines(data + used, len - used, R.answer, sizeof R.answer, &n);
        if (took == 0)
            break;
        core_buf_append(core_conn_out(c), R.answer, n);
        used += took;
    }
    return used;
}

/* ---- engine: answer each record on the link ---- */

static int engine_record(void *ctx, uint64_t conn, const char *gw, size_t gwlen,
                         const void *payload, size_t len)
{
    size_t n;
    answer_lines(payload, len, R.answer, sizeof R.answer, &n);
    em_link_reply(R.lsrv, gw, gwlen, R.answer, n);
    return 0;
}

/* ---- gateway: connections <-> records named by connection id ---- */

static size_t gateway_data(struct core_conn *c, char *data, size_t len)
{
    /* whole lines only, at most a record's payload at a time */
    size_t used = 0;
    char id[24];
    int il = snprintf(id, sizeof id, "%" PRIu64, core_conn_id(c));
    while (used < len) {
        size_t take = len - used < EM_LINK_PAYLOAD_MAX ? len - used : EM_LINK_PAYLOAD_MAX;
        const char *p = data + used, *last = NULL;
        for (const char *q = p; (q = memchr(q, '\n', take - (size_t)(q - p))) != NULL; q++)
            last = q;
        if (!last)
            break;
        size_t n = (size_t)(last - p) + 1;
        em_link_client_send(R.lcl, id, (size_t)il, p, n);
        used += n;
    }
    return used;
}

static void gateway_record(void *ctx, const char *gw, size_t gwlen, const void *payload, size_t len)
{
    char id[24];
    memcpy(id, gw, gwlen < sizeof id - 1 ? gwlen : sizeof id - 1);
    id[gwlen < sizeof id - 1 ? gwlen : sizeof id - 1] = '\0';
    struct core_conn *c = core_server_find(R.srv, strtoull(id, NULL, 10));
    if (c) {
        core_buf_append(core_conn_out(c), payload, len);
        core_conn_flush(c);
    }
}

static void gateway_check(uv_check_t *h)
{
    em_link_client_flush(R.lcl);
}

static void on_stop(struct core_proc *p, void *data)
{
    if (R.srv)
        core_server_stop(R.srv);
    if (R.lsrv)
        em_link_server_stop(R.lsrv);
    if (R.lcl) {
        em_link_client_close(R.lcl);
        uv_close((uv_handle_t *)&R.check, NULL);
    }
}

int main(int argc, char **argv)
{
    int code;
    if (core_proc_options("em-relay", 'R', options, NULL, argc, argv, &code))
        return code;
    bool echo = !strcmp(role, "echo"), gw = !strcmp(role, "gateway"), eng = !strcmp(role, "engine");
    if (!echo && !gw && !eng) {
        fprintf(stderr, "em-relay: --role must be echo, gateway or engine\n");
        return 2;
    }
    if ((gw || eng) && !link_ep[0]) {
        fprintf(stderr, "em-relay: --link is required for the %s role\n", role);
        return 2;
    }
    R.loop = uv_default_loop();
    int rc = 0;
    if (eng) {
        struct em_link_server_config lc = {.endpoint = link_ep, .on_record = engine_record};
        rc = em_link_server_open(&R.lsrv, R.loop, &lc);
    } else {
        static const struct core_server_ops echo_ops = {.on_data = echo_data};
        static const struct core_server_ops gw_ops = {.on_data = gateway_data};
        struct core_server_limits lim = {.maxclients = 1024, .query_buf_limit = 1 << 20};
        rc = core_server_new(&R.srv, R.loop, echo ? &echo_ops : &gw_ops, NULL, &lim, NULL);
        if (rc == 0)
            rc = core_server_listen(R.srv, "127.0.0.1", (int)port);
        if (rc == 0 && gw) {
            struct em_link_client_config cc = {.endpoint = link_ep, .on_record = gateway_record};
            rc = em_link_client_open(&R.lcl, R.loop, &cc);
            uv_check_init(R.loop, &R.check);
            uv_check_start(&R.check, gateway_check);
        }
    }
    if (rc) {
        fprintf(stderr, "em-relay: %s: %s\n", role, core_strerror(rc));
        return 1;
    }
    core_proc_signals_start(&R.proc, R.loop, "em-relay", on_stop, NULL);
    printf("em-relay %s port %d link %s\n", role, R.srv ? core_server_port(R.srv) : 0, link_ep);
    fflush(stdout);
    uv_run(R.loop, UV_RUN_DEFAULT);
    core_proc_signals_close(&R.proc, R.loop);
    core_server_free(R.srv);
    em_link_server_free(R.lsrv);
    em_link_client_free(R.lcl);
    return 0;
}
