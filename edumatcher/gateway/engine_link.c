/*
 * A gateway's way to the engine (engine_link.h): the order link under the
 * sessions' bus, and the market-data SUB.
 */
#include "edumatcher/gateway/engine_link.h"

#include "core/error.h"
#include "core/log.h"

#include <string.h>

static int link_send(void *ctx, const char *gw, size_t gwlen, const void *frames, size_t len)
{
    struct em_gw_link *l = ctx;
    return em_link_client_send(l->link, gw, gwlen, frames, len);
}

/* Replies come on the link the gw's messages went out on: nothing to do. */
static void link_subscribe(void *ctx, const char *topic)
{
    (void)ctx;
    (void)topic;
}

const struct em_gw_bus em_gw_link_bus = {
    .send = link_send, .subscribe = link_subscribe, .unsubscribe = link_subscribe};

/* A record from the engine: gw's events, handed over as the bus message
 * `order.ack.<gw>` the sessions know. */
static void on_record(void *ctx, const char *gw, size_t gwlen, const void *payload, size_t len)
{
    struct em_gw_link *l = ctx;
    char topic[16 + EM_LINK_GW_MAX];
    memcpy(topic, "order.ack.", 10);
    memcpy(topic + 10, gw, gwlen);
    em_gw_bus_message(l->gw, topic, 10 + gwlen, payload, len);
}

static void on_records_done(void *ctx, unsigned handled)
{
    struct em_gw_link *l = ctx;
    (void)handled;
    em_gw_bus_batch_end(l->gw);
}

static void on_md(struct em_bus_sock *b, const char *topic, size_t tl, const void *payload,
                  size_t len, void *data)
{
    struct em_gw_link *l = data;
    (void)b;
    em_gw_bus_message(l->gw, topic, tl, payload, len);
}

static void on_md_batch(struct em_bus_sock *b, unsigned handled, void *data)
{
    (void)b;
    (void)handled;
    (void)data;
}

/* The link is lost: the sessions queue their RESYNC first, ahead of what
 * is sent while it is down (docs/alf.md I.6). It came back after a loss:
 * the engine may have restarted without what was in flight, so the
 * sessions resend their unanswered messages now (docs/alf.md I) instead
 * of waiting for a RESEND or their timeout. */
static void on_link_state(void *ctx, bool up)
{
    struct em_gw_link *l = ctx;
    if (!up) {
        if (!l->was_down)
            em_gw_engine_lost(l->gw);
        l->was_down = true;
        return;
    }
    if (l->was_down)
        em_gw_engine_restarted(l->gw);
    l->was_down = false;
}

int em_gw_link_open(struct em_gw_link *l, struct em_gw *gw, uv_loop_t *loop, void *zctx,
                    const struct em_gw_link_opts *o)
{
    l->gw = gw;
    uint8_t key[EM_LINK_KEY_MAX];
    int keylen = 0;
    if (strncmp(o->orders, "tcp://", 6) == 0) {
        if (!o->key_file || !o->key_file[0]) {
            CORE_WARN("gateway: a TCP order link needs the engine's link key (--link-key)");
            return CORE_EINVAL;
        }
        keylen = em_link_key_load(o->key_file, false, key, sizeof key);
        if (keylen < 0) {
            CORE_WARN("gateway: cannot read the link key %s: %s", o->key_file,
                      core_strerror(keylen));
            return keylen;
        }
    }
    struct em_link_client_config cc = {.endpoint = o->orders,
                                       .key = key,
                                       .keylen = (size_t)keylen,
                                       .on_record = on_record,
                                       .on_batch = on_records_done,
                                       .on_state = on_link_state,
                                       .ctx = l};
    int rc = em_link_client_open(&l->link, loop, &cc);
    if (rc) {
        CORE_WARN("gateway: bad order link %s: %s", o->orders, core_strerror(rc));
        return rc;
    }
    rc = em_bus_open_curve(&l->sub, zctx, EM_BUS_SUB, o->pub, false, o->curve);
    if (rc) {
        CORE_WARN("gateway: cannot connect to %s: %s", o->pub, core_strerror(rc));
        return rc;
    }
    l->sub_open = true;
    em_bus_watch(&l->sub, loop, 1024, on_md, l);
    l->sub.on_batch = on_md_batch;
    return em_bus_subscribe(&l->sub, "md."); /* SYMBOLS: each symbol's book and rules */
}

void em_gw_link_flush(struct em_gw_link *l)
{
    em_gw_flush(l->gw);
    em_link_client_flush(l->link);
}

void em_gw_link_close(struct em_gw_link *l)
{
    em_link_client_flush(l->link);
    em_link_client_close(l->link);
    if (l->sub_open)
        em_bus_close(&l->sub);
    l->sub_open = false;
}

void em_gw_link_free(struct em_gw_link *l)
{
    em_link_client_free(l->link);
    l->link = NULL;
}
