/*
 * Read-through origin with request coalescing (issue #6).
 *
 * When a GET misses, the server can ask the origin for the key: an HTTP
 * GET of a URL built from a template (`http://host/items/{key}`, the key
 * percent-encoded). N concurrent requests for one missing key cost one
 * origin fetch: the first starts it, the others join it as waiters, and
 * every waiter gets the same answer. That removes the stampede a
 * look-aside cache suffers when a hot key expires.
 *
 * The fetcher is independent of the server. It drives libcurl's multi
 * interface from the caller's libuv loop (curl_multi_socket_action with one
 * uv_poll per socket and one uv_timer for curl's timeout), so nothing ever
 * blocks the loop. It owns no store: when a fetch completes it calls the
 * `on_fill` hook once, with the value and the TTL to store it under (or the
 * decision not to store it), then calls every waiter. It does keep a small
 * negative cache of keys the origin answered 404 for, because the store
 * holds values only.
 *
 * Outcomes of a fetch:
 *   200          -> GS_ORIGIN_FOUND; TTL from Cache-Control (s-maxage, then
 *                   max-age, minus Age) when present, else the default.
 *                   no-store / no-cache / private or a TTL <= 0: delivered to
 *                   the waiters but not cacheable.
 *   404, 410     -> GS_ORIGIN_NOT_FOUND; remembered for negative_ttl_ms.
 *   anything else, a transport error, a body over max_value_bytes, or the
 *   deadline passing -> GS_ORIGIN_ERROR; nothing is cached and the next
 *   request for the key tries the origin again.
 *
 * Concurrency limit: at most max_concurrent HTTP fetches run at once.
 * Further distinct keys queue (FIFO, at most max_queued); requests for a
 * queued key still coalesce onto it. Beyond the queue, gs_origin_fetch
 * fails at once with CORE_EBUSY and the server answers an error: a bounded
 * queue keeps memory and waiting time bounded while still absorbing short
 * bursts. A fetch's deadline (timeout_ms) runs from when it was created, so
 * time spent queued counts: no waiter waits longer than timeout_ms (plus
 * one timer tick).
 *
 * Fetch life cycle (one slot of a preallocated pool):
 *
 *   FREE --fetch_begin--> QUEUED --start_transfer--> ACTIVE
 *     ^                     |  (deadline passed while queued)   |
 *     |                     v                                   v
 *     +------ release ---- DELIVERING <------- transfer_done ---+
 *
 * Invariants:
 *  1. A slot is in the in-flight table iff it is QUEUED or ACTIVE and was
 *     created with coalescing on; the table never holds two slots for one
 *     key. A DELIVERING slot is out of the table, so a waiter callback that
 *     asks for the same key starts a fresh fetch.
 *  2. Every waiter attached by a successful gs_origin_fetch is called
 *     exactly once, unless it is cancelled first; then never.
 *  3. active <= max_concurrent and queued <= max_queued.
 *  4. No allocation per request: waiters are embedded in the caller's
 *     objects; slots, their easy handles and buffers are reused. A fetch
 *     allocates only when a key or body outgrows its slot's buffers.
 *
 * Not thread-safe: the loop that owns it calls everything.
 */
#ifndef GS_ORIGIN_H
#define GS_ORIGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "core/histogram.h"
#include "core/list.h"

struct gs_origin;

/* Longest key the origin accepts (its percent-encoded form goes in a URL). */
#define GS_ORIGIN_MAX_KEY 4096

enum gs_origin_status {
    GS_ORIGIN_FOUND = 0,     /* 200: value holds the body */
    GS_ORIGIN_NOT_FOUND = 1, /* 404 / 410, or answered from the negative cache */
    GS_ORIGIN_ERROR = 2,     /* see error */
};

struct gs_origin_result {
    enum gs_origin_status status;
    /* FOUND: the body. Valid only during the callback; copy what you keep. */
    const char *value;
    size_t vlen;
    /* FOUND: store it (true) or only deliver it (false). */
    bool cacheable;
    /* FOUND and cacheable: TTL in ms to store the value with, or -1 for no
     * expiry. NOT_FOUND: how long the miss is remembered (0 = not). */
    int64_t ttl_ms;
    /* ERROR: CORE_ETIMEOUT (deadline), CORE_EIO (transport), CORE_EPROTO
     * (an HTTP status other than 200/404/410), CORE_ETOOBIG (body over
     * max_value_bytes), CORE_ECLOSED (the origin was freed). */
    int error;
    /* The HTTP status when one was received, else 0. */
    int http_status;
};

struct gs_origin_waiter;

/* Called once with the fetch's outcome. The waiter is detached before the
 * call, so the callback may free or reuse it, call gs_origin_fetch again
 * (even for the same key) or cancel other waiters. */
typedef void (*gs_origin_cb)(struct gs_origin_waiter *w, const struct gs_origin_result *r);

/* One request waiting for a key. Embed it in the object that waits (the
 * server's reply slot); set cb (and data if you like) before
 * gs_origin_fetch. The other fields are private. */
struct gs_origin_waiter {
    gs_origin_cb cb;
    void *data;
    /* private */
    struct core_list link; /* in its fetch's list of waiters */
    struct gs_origin_fetch *fetch;
};

/* Called once per completed fetch, before its waiters, with the key and
 * the outcome: the place to store a cacheable value. May be NULL. */
typedef void (*gs_origin_fill_cb)(void *arg, const char *key, size_t klen,
                                  const struct gs_origin_result *r);

struct gs_origin_config {
    /* http:// or https:// URL with at least one "{key}"; copied. */
    const char *url_template;
    uint32_t timeout_ms;      /* whole-fetch deadline, queueing included; > 0 */
    int64_t default_ttl_ms;   /* TTL of a 200 without max-age; 0 = no expiry */
    int64_t negative_ttl_ms;  /* how long a 404 is remembered; 0 = not at all */
    uint32_t max_concurrent;  /* HTTP fetches at once; >= 1 */
    uint32_t max_queued;      /* distinct keys waiting for a fetch slot */
    uint32_t negative_max;    /* entries in the negative cache; 0 = 4096 */
    uint64_t max_value_bytes; /* larger bodies are an error; 0 = 512 MB */
    bool coalesce;            /* false: one fetch per request (for comparison) */
    gs_origin_fill_cb on_fill;
    void *fill_arg;
};

/* Counters are totals since creation (or gs_origin_reset_stats). */
struct gs_origin_stats {
    uint64_t requests;      /* successful gs_origin_fetch calls (waiters attached) */
    uint64_t fetches;       /* HTTP fetches started */
    uint64_t coalesced;     /* waiters that joined a fetch already in flight */
    uint64_t found;         /* fetches answered 200 */
    uint64_t not_found;     /* fetches answered 404 / 410 */
    uint64_t errors;        /* fetches that failed, timeouts included */
    uint64_t timeouts;      /* fetches that missed their deadline */
    uint64_t rejected;      /* gs_origin_fetch calls refused with CORE_EBUSY */
    uint64_t queued_total;  /* fetches that waited for a free fetch slot */
    uint64_t negative_hits; /* requests answered from the negative cache */
    uint64_t cancelled;     /* waiters cancelled before their answer */
    uint64_t in_flight;     /* gauge: HTTP fetches running now */
    uint64_t queue_len;     /* gauge: fetches waiting for a slot now */
    uint64_t negative_keys; /* gauge: live entries in the negative cache */
};

/* Create an origin on loop. The configuration is validated (CORE_EINVAL:
 * no template, no "{key}", not http(s), zero timeout or concurrency) and
 * copied. Returns 0, CORE_EINVAL, CORE_ENOMEM or CORE_EIO (libcurl
 * failed to initialise). *out belongs to the caller until gs_origin_free. */
int gs_origin_new(struct gs_origin **out, uv_loop_t *loop, const struct gs_origin_config *cfg);

/* Fail every pending waiter with CORE_ECLOSED (on_fill is not called),
 * stop every transfer and close the origin's handles. The memory is
 * released by the handles' close callbacks, so the loop must run once more
 * (as with uv_close). NULL is ignored. Not from inside an origin callback
 * (on_fill or a waiter's). */
void gs_origin_free(struct gs_origin *o);

/* Ask for key (binary safe, copied). Returns:
 *  0                    w is attached; w->cb will be called exactly once,
 *                       later, from the loop, unless gs_origin_cancel(w).
 *  GS_ORIGIN_NEGATIVE   the key is in the negative cache: answer nil now;
 *                       w->cb is not called.
 *  CORE_EBUSY           max_concurrent fetches run and the queue is full.
 *  CORE_ETOOBIG         klen > GS_ORIGIN_MAX_KEY.
 *  CORE_ENOMEM, CORE_EIO  allocation or libcurl failure.
 * On any return but 0 the callback is never called (libuv's contract). */
#define GS_ORIGIN_NEGATIVE 1
int gs_origin_fetch(struct gs_origin *o, const void *key, size_t klen, struct gs_origin_waiter *w);

/* Detach a waiter (its client disconnected). The fetch goes on for the
 * others, and fills the cache even when nobody waits any more. A waiter
 * that is not attached is ignored. */
void gs_origin_cancel(struct gs_origin_waiter *w);

/* Whether w is attached (waiting for its callback). */
static inline bool gs_origin_waiting(const struct gs_origin_waiter *w)
{
    return w->fetch != NULL;
}

/* Drop key from the negative cache (a SET of that key, say). */
void gs_origin_forget(struct gs_origin *o, const void *key, size_t klen);

/* Change coalescing at run time (CONFIG SET origin-coalesce). Fetches in
 * flight are not affected. */
void gs_origin_set_coalesce(struct gs_origin *o, bool on);

void gs_origin_stats(const struct gs_origin *o, struct gs_origin_stats *out);

/* Latency of completed HTTP fetches (from start of transfer to its end),
 * in nanoseconds. Owned by the origin. */
const struct core_hist *gs_origin_latency(const struct gs_origin *o);

/* Zero the counters (not the gauges) and the histogram (CONFIG RESETSTAT). */
void gs_origin_reset_stats(struct gs_origin *o);

/* Write the INFO section ("# Origin" and name:value lines ending in
 * \r\n) into buf. Returns the length it needed, as snprintf does; the text
 * is truncated (and NUL-terminated) when that is >= len. o may be NULL
 * (origin not configured). */
size_t gs_origin_info(const struct gs_origin *o, char *buf, size_t len);

/* ---- Pure helpers, exposed for tests and the fuzzer. ---- */

/* Build the URL: the template with every "{key}" replaced by the key
 * percent-encoded (everything but RFC 3986 unreserved characters A-Z a-z
 * 0-9 - . _ ~). Returns the URL's length; writes at most len bytes and
 * NUL-terminates when len > 0, as snprintf. */
size_t gs_origin_build_url(const char *tmpl, const void *key, size_t klen, char *out, size_t len);

/* What a response's header block says about caching. */
struct gs_origin_headers {
    int status;             /* from the status line; 0 until one is seen */
    int64_t max_age_s;      /* max-age, -1 when absent */
    int64_t s_maxage_s;     /* s-maxage (shared caches, wins), -1 when absent */
    int64_t age_s;          /* Age header, 0 when absent */
    bool no_store;          /* no-store, no-cache or private */
    int64_t content_length; /* -1 when absent */
};

void gs_origin_headers_init(struct gs_origin_headers *h);

/* Feed one raw header line as libcurl delivers it ("Name: value\r\n", or
 * a status line "HTTP/1.1 200 OK\r\n" which starts a new block: after a
 * 100 Continue or a redirect only the last block counts). Never fails:
 * what it cannot parse it ignores. */
void gs_origin_header_line(struct gs_origin_headers *h, const char *line, size_t len);

/* Parse a Cache-Control value (RFC 9111 5.2) into h: directives are
 * comma-separated, names case-insensitive, arguments a token or a quoted
 * string. The first valid max-age / s-maxage wins; a value beyond 2^31 is
 * taken as 2^31 (RFC 9111 1.2.2); an invalid one is ignored. */
void gs_origin_parse_cache_control(struct gs_origin_headers *h, const char *v, size_t len);

/* Freshness lifetime in ms the headers give, minus Age: -1 when the
 * headers say nothing (use the default), 0 when the response must not be
 * stored, else > 0. */
int64_t gs_origin_headers_ttl_ms(const struct gs_origin_headers *h);

#endif
