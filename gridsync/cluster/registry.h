/*
 * The cluster's registry in DynamoDB (docs/gridsync-cluster.md, "Registry"):
 * DynamoDB's JSON API (POST, X-Amz-Target DynamoDB_20120810.<Op>, signed
 * with AWS Signature V4 by libcurl) on a libuv loop through core/curl_uv.h,
 * bodies built and parsed with jansson.
 *
 * Items of the table (hash key "pk", a string):
 *   pk = "node#<host:port>"   addr, heartbeat_ms, expires_ms: a node's
 *                             registration, put again every heartbeat
 *   pk = "event#<ms>#<addr>"  kind ("join"/"leave"), addr, at_ms: one
 *                             membership change
 * A node is live while expires_ms (wall clock, ms) is in the future.
 *
 * Errors: HTTP 5xx and DynamoDB's throttling errors
 * (ProvisionedThroughputExceededException, ThrottlingException) and
 * transfer timeouts are retried with exponential backoff; other 4xx and
 * connection failures are reported to the caller. Functions return 0 or a
 * negative core error (core/error.h).
 */
#ifndef GS_REGISTRY_H
#define GS_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#define GS_REGISTRY_STRLEN 256

struct gs_registry_config {
    char endpoint[GS_REGISTRY_STRLEN]; /* http://HOST:PORT/ */
    char table[GS_REGISTRY_STRLEN];
    char region[GS_REGISTRY_STRLEN];
    char access_key[GS_REGISTRY_STRLEN];
    char secret_key[GS_REGISTRY_STRLEN];
    /* Attempts of one request (first try + retries) before it fails. */
    unsigned max_attempts;
    int64_t timeout_ms; /* per attempt */
};

/* Parse "dynamodb://HOST:PORT/TABLE" into cfg->endpoint and cfg->table.
 * CORE_EINVAL (with a reason in err) if malformed. */
int gs_registry_parse_url(const char *url, struct gs_registry_config *cfg, char *err,
                          size_t errlen);

struct gs_registry;

/* Completion of one request: err is 0 and reply the parsed JSON body
 * (borrowed, valid during the call), or err < 0, reply NULL and msg a
 * one-line reason (DynamoDB's __type/message, or curl's error). */
typedef void (*gs_registry_cb)(void *arg, int err, json_t *reply, const char *msg);

int gs_registry_new(struct gs_registry **out, uv_loop_t *loop,
                    const struct gs_registry_config *cfg);

/* Send operation op (e.g. "PutItem") with body (reference stolen; the
 * configured table is added as TableName unless the body has RequestItems,
 * as BatchWriteItem's does). cb runs later from a loop callback, once,
 * unless the registry is freed first. Also the DynamoDB client of
 * raft_store_dynamo.h. */
int gs_registry_call(struct gs_registry *r, const char *op, json_t *body, gs_registry_cb cb,
                     void *arg);

/* Count of retried attempts so far (INFO, tests). */
uint64_t gs_registry_retries(const struct gs_registry *r);

/* Cancel every request (their callbacks do not run) and close; memory is
 * released once the loop has closed the handles. */
void gs_registry_free(struct gs_registry *r);

/* ---- the node's use of it ---- */

/* Start-up, run on a private loop before the node serves: CreateTable if
 * missing, register this node (self = host:port), then Scan until at least
 * `size` live nodes are registered (size 0: no waiting). On success fills
 * peers with the live nodes' addresses sorted, comma-separated (the same
 * list on every node). An unreachable registry or a rejected request is
 * an error, with a reason in err. */
int gs_registry_startup(const struct gs_registry_config *cfg, const char *self, int64_t size,
                        int64_t ttl_ms, char *peers, size_t peerslen, char *err, size_t errlen);

/* The running node's heartbeat: PutItem of this node every period_ms with
 * an expiry ttl_ms later, on loop. Failures are logged and retried; the
 * node keeps serving from what it knows. */
struct gs_registry_heartbeat;
int gs_registry_heartbeat_start(struct gs_registry_heartbeat **out, uv_loop_t *loop,
                                const struct gs_registry_config *cfg, const char *self,
                                int64_t period_ms, int64_t ttl_ms);
/* Record a leave event and stop (asynchronously). */
void gs_registry_heartbeat_stop(struct gs_registry_heartbeat *h);
uint64_t gs_registry_heartbeat_count(const struct gs_registry_heartbeat *h);

#endif
