/*
 * libcurl's multi interface on a libuv loop (the socket-action pattern of
 * curl's own multi-uv example), shared by every module that talks HTTP
 * from a node's loop (gridsync/origin, gridsync/cluster/registry).
 *
 * Contract:
 * - core_curl_uv_new makes a multi handle whose sockets are watched with
 *   one uv_poll each and whose timeout is one uv_timer, all on `loop`.
 * - The owner adds easy handles to core_curl_uv_multi() itself. After
 *   every curl_multi_socket_action the module calls `activity(arg)`,
 *   always from a loop callback (never from inside a libcurl callback);
 *   the owner reads finished transfers there with curl_multi_info_read.
 * - core_curl_uv_close removes nothing: the owner first removes its easy
 *   handles. It cleans the multi handle up, closes every poll and the
 *   timer, and calls `closed(arg)` once all are closed (a later loop
 *   turn); `activity` is never called after core_curl_uv_close. The
 *   struct is freed by the module before `closed` runs.
 * Errors: core_curl_uv_new returns CORE_ENOMEM or CORE_EIO (curl's global
 * init or multi init failed).
 */
#ifndef CORE_CURL_UV_H
#define CORE_CURL_UV_H

#include <curl/curl.h>
#include <uv.h>

struct core_curl_uv;

typedef void (*core_curl_uv_fn)(void *arg);

int core_curl_uv_new(struct core_curl_uv **out, uv_loop_t *loop, core_curl_uv_fn activity,
                     void *arg);
CURLM *core_curl_uv_multi(struct core_curl_uv *cu);
void core_curl_uv_close(struct core_curl_uv *cu, core_curl_uv_fn closed);

#endif
