/*
 * Pub/Sub (Redis 7.0's pubsub.c): channels, patterns and shard channels,
 * their subscribers, and message delivery.
 *
 * The node owns one registry (struct gs_pubsub). Each client that has
 * subscribed owns a struct gs_subscriber (gs_client.sub; NULL before its
 * first subscription) listing what it is subscribed to, in order.
 *
 * Invariants:
 *  1. A channel (or pattern) is in the registry exactly while it has at
 *     least one subscriber; its subscriber array and every subscriber's
 *     own list agree (each pair once).
 *  2. A client with any subscription has the pubsub class's output limit
 *     (client-output-buffer-limit pubsub ...); with none, the server's.
 *  3. Delivery never frees a client while the registry is being walked:
 *     messages are appended first, connections are flushed (and possibly
 *     closed for their output limit) after the walk.
 */
#ifndef GS_PUBSUB_H
#define GS_PUBSUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gs_node;
struct gs_client;
struct gs_command;
struct gs_pubsub;
struct gs_subscriber;

/* Create / free the node's registry. gs_pubsub_new returns 0 or
 * CORE_ENOMEM. Free after every client has been closed. */
int gs_pubsub_new(struct gs_pubsub **out);
void gs_pubsub_free(struct gs_pubsub *ps);

/* The client is going away: drop all its subscriptions. */
void gs_pubsub_client_closed(struct gs_client *c);

/* Subscriptions of c: channels + patterns (what SUBSCRIBE replies count),
 * shard channels; for CLIENT LIST's sub=, psub=, ssub=. */
void gs_pubsub_counts(const struct gs_client *c, size_t *channels, size_t *patterns, size_t *shard);

/* Redis's RESP2 subscribed mode: true if c may not run cmd now; the
 * error has then been replied. */
bool gs_pubsub_refuses(struct gs_client *c, const struct gs_command *cmd);

/* True if c is in RESP2 subscribed mode (PING then answers ["pong", x]). */
bool gs_pubsub_resp2_subscribed(const struct gs_client *c);

/* Deliver a message published on this node (PUBLISH, or one a peer node
 * forwarded in cluster mode); returns the number of receivers here. */
size_t gs_pubsub_publish(struct gs_node *n, const char *ch, size_t chlen, const char *msg,
                         size_t msglen, bool shard);

/* Cluster mode, Redis 7.0's removeChannelsInSlot: every shard channel
 * for which drop(arg, name, len) is true leaves the registry, and each of
 * its subscribers is told with a "sunsubscribe" message for it (RESP2
 * ["sunsubscribe", channel, count], RESP3 a push; count: the shard
 * channels it still has), as if it had run SUNSUBSCRIBE channel. Returns
 * the number of channels removed. */
size_t gs_pubsub_shard_drop(struct gs_node *n, bool (*drop)(void *arg, const char *ch, size_t len),
                            void *arg);

/* client-output-buffer-limit changed: re-apply the pubsub class's limit
 * to every subscribed client (invariant 2). */
void gs_pubsub_apply_limits(struct gs_node *n);

#endif
