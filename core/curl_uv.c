/*
 * libcurl multi on libuv (contract in curl_uv.h). curl tells us which
 * sockets to watch for what (on_curl_socket -> one uv_poll per socket) and
 * when it next needs a timeout (on_curl_timer -> one uv_timer); we tell
 * curl what happened (curl_multi_socket_action from on_poll / on_timer)
 * and then let the owner collect finished transfers.
 */
#include "core/curl_uv.h"

#include <stdbool.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/list.h"

struct sock_ctx {
    uv_poll_t poll;
    curl_socket_t fd;
    struct core_curl_uv *cu;
    struct core_list link; /* in socks: open polls, so that close can close them */
};

struct core_curl_uv {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;
    core_curl_uv_fn activity;
    core_curl_uv_fn closed;
    void *arg;
    struct core_list socks; /* sock_ctx.link: polls not yet closing */
    unsigned open_handles;  /* timer + polls not yet closed */
    bool closing;
};

static void maybe_free(struct core_curl_uv *cu)
{
    if (cu->closing && cu->open_handles == 0) {
        core_curl_uv_fn closed = cu->closed;
        void *arg = cu->arg;
        free(cu);
        if (closed)
            closed(arg);
    }
}

static void on_handle_closed(uv_handle_t *h)
{
    struct core_curl_uv *cu;
    if (h->type == UV_POLL) {
        struct sock_ctx *c = h->data;
        cu = c->cu;
        free(c);
    } else {
        cu = h->data;
    }
    cu->open_handles--;
    maybe_free(cu);
}

static void sock_close(struct sock_ctx *c)
{
    core_list_remove(&c->link);
    uv_close((uv_handle_t *)&c->poll, on_handle_closed);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    struct sock_ctx *c = h->data;
    struct core_curl_uv *cu = c->cu;
    int flags = 0;
    if (status < 0)
        flags = CURL_CSELECT_ERR;
    if (events & UV_READABLE)
        flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        flags |= CURL_CSELECT_OUT;
    int running;
    /* c may be closed by this call (CURL_POLL_REMOVE); it is freed only in
     * its close callback, and not touched after. */
    curl_multi_socket_action(cu->multi, c->fd, flags, &running);
    if (!cu->closing)
        cu->activity(cu->arg);
}

static void on_timer(uv_timer_t *t)
{
    struct core_curl_uv *cu = t->data;
    int running;
    curl_multi_socket_action(cu->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    if (!cu->closing)
        cu->activity(cu->arg);
}

static int on_curl_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    (void)easy;
    struct core_curl_uv *cu = userp;
    struct sock_ctx *c = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (c) {
            curl_multi_assign(cu->multi, s, NULL);
            sock_close(c);
        }
        return 0;
    }
    if (c == NULL) {
        c = malloc(sizeof(*c));
        if (c == NULL)
            return -1;
        if (uv_poll_init_socket(cu->loop, &c->poll, s) < 0) {
            free(c);
            return -1;
        }
        c->fd = s;
        c->cu = cu;
        c->poll.data = c;
        core_list_push_front(&cu->socks, &c->link);
        cu->open_handles++;
        curl_multi_assign(cu->multi, s, c);
    }
    int ev = 0;
    if (what & CURL_POLL_IN)
        ev |= UV_READABLE;
    if (what & CURL_POLL_OUT)
        ev |= UV_WRITABLE;
    return uv_poll_start(&c->poll, ev, on_poll) < 0 ? -1 : 0;
}

static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    struct core_curl_uv *cu = userp;
    if (timeout_ms < 0)
        return uv_timer_stop(&cu->timer) < 0 ? -1 : 0;
    /* 0 means "act now"; curl forbids calling socket_action from inside
     * this callback, so the loop's next turn does it. */
    return uv_timer_start(&cu->timer, on_timer, (uint64_t)timeout_ms, 0) < 0 ? -1 : 0;
}

int core_curl_uv_new(struct core_curl_uv **out, uv_loop_t *loop, core_curl_uv_fn activity,
                     void *arg)
{
    static bool curl_ready;
    if (!curl_ready) {
        /* Once per process, before any other curl call (it is not
         * thread-safe, and a node has one loop thread). */
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
            return CORE_EIO;
        curl_ready = true;
    }
    struct core_curl_uv *cu = calloc(1, sizeof(*cu));
    if (cu == NULL)
        return CORE_ENOMEM;
    cu->multi = curl_multi_init();
    if (cu->multi == NULL) {
        free(cu);
        return CORE_EIO;
    }
    cu->loop = loop;
    cu->activity = activity;
    cu->arg = arg;
    core_list_init(&cu->socks);
    curl_multi_setopt(cu->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
    curl_multi_setopt(cu->multi, CURLMOPT_SOCKETDATA, cu);
    curl_multi_setopt(cu->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    curl_multi_setopt(cu->multi, CURLMOPT_TIMERDATA, cu);
    uv_timer_init(loop, &cu->timer);
    cu->timer.data = cu;
    cu->open_handles = 1;
    *out = cu;
    return 0;
}

CURLM *core_curl_uv_multi(struct core_curl_uv *cu)
{
    return cu->multi;
}

void core_curl_uv_close(struct core_curl_uv *cu, core_curl_uv_fn closed)
{
    cu->closing = true;
    cu->closed = closed;
    /* May call on_curl_socket(REMOVE) for cached connections, which closes
     * their polls. */
    curl_multi_cleanup(cu->multi);
    cu->multi = NULL;
    /* Whatever curl did not report removed is closed here: the sockets are
     * gone with the multi handle. */
    struct core_list *l;
    while ((l = core_list_first(&cu->socks)) != NULL)
        sock_close(CORE_CONTAINER_OF(l, struct sock_ctx, link));
    uv_close((uv_handle_t *)&cu->timer, on_handle_closed);
}
