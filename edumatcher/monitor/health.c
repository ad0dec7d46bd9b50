/* Health beacon publishing (see health.h). */
#include "edumatcher/monitor/health.h"

#include "core/error.h"
#include "core/log.h"

#include <string.h>

int em_health_init(struct em_health *h, const char *proc)
{
    memset(h, 0, offsetof(struct em_health, line));
    int rc = core_metrics_init(&h->metrics, proc);
    if (rc)
        return rc;
    return em_bus_topic_set(&h->topic, "health.", proc, strlen(proc));
}

const char *em_health_beacon(struct em_health *h, int *len)
{
    if (h->hook)
        h->hook(h, h->hook_data);
    int n = core_metrics_beacon(&h->metrics, h->line, sizeof h->line);
    if (n < 0)
        return NULL;
    if (h->has_pub && em_bus_send(&h->pub, &h->topic, h->line, (size_t)n) == 0)
        h->sent++;
    if (len)
        *len = n;
    return h->line;
}

static void on_timer(uv_timer_t *t)
{
    em_health_beacon(t->data, NULL);
}

int em_health_start(struct em_health *h, uv_loop_t *loop, void *zctx, const char *endpoint,
                    uint64_t interval_ms, em_health_hook hook, void *data)
{
    h->hook = hook;
    h->hook_data = data;
    if (endpoint && *endpoint) {
        int rc = em_bus_open_curve(&h->pub, zctx, EM_BUS_PUB, endpoint, false, h->curve);
        if (rc)
            return rc;
        h->has_pub = true;
    }
    uv_timer_init(loop, &h->timer);
    h->timer.data = h;
    uv_timer_start(&h->timer, on_timer, interval_ms, interval_ms);
    /* A beacon must not keep a loop alive that has nothing else to do. */
    uv_unref((uv_handle_t *)&h->timer);
    return 0;
}

void em_health_stop(struct em_health *h)
{
    if (!uv_is_closing((uv_handle_t *)&h->timer) && h->timer.loop)
        uv_close((uv_handle_t *)&h->timer, NULL);
    if (h->has_pub) {
        em_bus_close(&h->pub);
        h->has_pub = false;
    }
}

int em_health_start_or_warn(const char *name, struct em_health *h, uv_loop_t *loop, void *zctx,
                            const char *endpoint, uint64_t interval_ms, em_health_hook hook,
                            void *data)
{
    int rc = em_health_start(h, loop, zctx, endpoint, interval_ms, hook, data);
    if (rc)
        CORE_WARN("%s: no health beacons (%s)", name, core_strerror(rc));
    return rc;
}
