/*
 * CURVE on the bus: who may connect to a process's ZeroMQ sockets
 * (docs/edumatcher-exchange.md, "Security").
 *
 * A tcp:// endpoint of a bus socket is open to anyone who can reach the
 * port. With CURVE (libzmq's CurveZMQ, built on libsodium) the traffic is
 * encrypted and the binding side, the server, learns each client's
 * long-term public key during the handshake; a ZAP handler in the server
 * process then lets in only the keys of its allow-list. A client that
 * presents no key or an unlisted one never completes the handshake: it
 * receives nothing, and what it sends is never read.
 *
 *   server (engine PUB / REP)           client (gateway, clearing, monitor)
 *     em_curve_key_load(own pair)         em_curve_key_load(own pair)
 *     em_curve_allow_load(allow-list)     em_curve_public_load(server's key)
 *     em_curve_zap_start(ctx, allow)
 *     em_bus_open_curve(bind, &pair)      em_bus_open_curve(connect, &pair)
 *
 * Files:
 *  - a key file holds one secret key in Z85 (40 characters, then a
 *    newline), mode 0600; it is made at first start when missing, and its
 *    public key is written beside it as `<file>.pub` (mode 0644) for the
 *    operator to copy into the server's allow-list or the clients'
 *    options. The public key is always derived from the secret, so a stale
 *    .pub cannot mislead the process itself.
 *  - an allow-list has one Z85 public key per line; text after the key
 *    (separated by blanks) is a comment, as are lines starting with `#`;
 *    blank lines are ignored. Anything else is an error, with its line.
 *
 * The ZAP handler runs on its own thread (a blocking inproc REP socket
 * bound to zeromq.zap.01 in the process's context): a handshake never
 * waits for the process's loop, and the allow-list belongs to the thread
 * once it runs (it alone re-reads the file), so it shares nothing mutable
 * but its counters. It answers 200
 * for a CURVE client whose key is listed and 400 for anything else (other
 * mechanisms, unlisted keys, malformed requests). Sockets without CURVE in
 * the same context are not affected: libzmq asks ZAP about the NULL
 * mechanism only when a socket sets a ZAP domain, which only CURVE servers
 * here do.
 *
 * Ownership: key pairs and allow-lists are plain caller-owned values; the
 * handler copies the allow-list. Stop order: close the sockets, terminate
 * the context (em_bus_ctx_term: that wakes the handler, which closes its
 * socket), then em_curve_zap_free joins the thread.
 */
#ifndef EM_CURVE_H
#define EM_CURVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/stat.h>

#include "core/metrics.h"

#define EM_CURVE_Z85_LEN  40   /* a 32-byte key in Z85 */
#define EM_CURVE_MAX_KEYS 1024 /* entries in one allow-list */

/* A key pair (and, on a client, the server's public key), in Z85. */
struct em_curve_pair {
    char public_key[EM_CURVE_Z85_LEN + 1];
    char secret_key[EM_CURVE_Z85_LEN + 1];
    char server_key[EM_CURVE_Z85_LEN + 1]; /* a client's; "" on a server */
};

struct em_curve_allow {
    unsigned count;
    uint8_t key[EM_CURVE_MAX_KEYS][32]; /* decoded public keys */
};

/* True when libzmq was built with CURVE. */
bool em_curve_available(void);

/* True when s is exactly one Z85-encoded 32-byte key. */
bool em_curve_z85_valid(const char *s, size_t len);

/*
 * Load the key pair whose secret is in path, creating it (a new random
 * pair; mode 0600, then path.pub) when missing and `create`. Fills
 * out->public_key and out->secret_key. Returns 0, CORE_ENOTFOUND (missing
 * and not created), CORE_EINVAL (the file does not hold one Z85 key, or
 * CURVE is unavailable), CORE_EPROTO (the file is readable by group or
 * others: a secret that may have leaked is refused) or CORE_EIO.
 */
int em_curve_key_load(const char *path, bool create, struct em_curve_pair *out);

/* A new random pair in memory only (benchmarks, tests). Returns 0 or
 * CORE_EINVAL (no CURVE). */
int em_curve_pair_new(struct em_curve_pair *out);

/*
 * A public key given as an option: either the 40 Z85 characters
 * themselves or the path of a file that starts with them (such as a
 * server's `<keyfile>.pub`). Writes out[EM_CURVE_Z85_LEN + 1]. Returns 0,
 * CORE_EINVAL or a CORE_E* code for the file.
 */
int em_curve_public_load(const char *arg, char *out);

/*
 * Parse an allow-list text (format above) into out. Returns 0, CORE_EINVAL
 * with *bad_line (1-based) set for a line that is not a key, or
 * CORE_ETOOBIG past EM_CURVE_MAX_KEYS keys (*bad_line: that line).
 */
int em_curve_allow_parse(const char *text, size_t len, struct em_curve_allow *out, int *bad_line);

/* Read and parse the allow-list file path (at most 1 MiB). Returns as
 * em_curve_allow_parse, or a CORE_E* code for the file (*bad_line 0). */
int em_curve_allow_load(const char *path, struct em_curve_allow *out, int *bad_line);

/* True when the 32-byte key is in the list. */
bool em_curve_allowed(const struct em_curve_allow *a, const uint8_t key[32]);

/*
 * A client process's options, checked in one place: own key file (made at
 * first start) and the server's public key (Z85 or a file holding it).
 * No server key: no CURVE, returns CORE_ENOTFOUND (after making or checking
 * the key file if one is given: a first start with only --curve-key makes
 * the pair for the server's allow-list). A server key without a key file,
 * or a bad key: logs why (prefixed with `who` and the option names) and
 * returns CORE_EINVAL (a process exits 2 for a bad option) or the file's
 * CORE_E* code. 0: *out is ready for em_bus_open_curve.
 */
int em_curve_client_config(const char *who, const char *key_opt, const char *key_file,
                           const char *server_opt, const char *server_key,
                           struct em_curve_pair *out);

/*
 * The key options of every bus client's main (gateway, FIX gateway,
 * clearing), as core/config.h option entries on the caller's strings:
 * --curve-key (own key file), --engine-key (the engine's public key, for
 * `engine_for`: the sockets it covers) and --monitor-key (for --health).
 */
/* One option entry per two lines, as in the mains option tables. */
/* clang-format off */
#define EM_CURVE_CLIENT_OPTIONS(curve_key, engine_key, monitor_key, engine_for)                    \
    {"curve-key", CORE_OPT_STRING, curve_key, 0, 0, NULL, CORE_OPT_IMMUTABLE,                      \
     "this process's CURVE secret key file, made at first start (mode 0600; the public key "       \
     "in FILE.pub goes in the engine's --curve-clients); with --engine-key"},                      \
    {"engine-key", CORE_OPT_STRING, engine_key, 0, 0, NULL, CORE_OPT_IMMUTABLE,                    \
     "the engine's CURVE public key (Z85, or a file such as <journal-dir>/curve.key.pub) for "     \
     engine_for " (\"\": no CURVE)"},                                                              \
    {"monitor-key", CORE_OPT_STRING, monitor_key, 0, 0, NULL, CORE_OPT_IMMUTABLE,                  \
     "the monitor's CURVE public key (Z85 or a file) for --health; with --curve-key (\"\": "       \
     "no CURVE)"}
/* clang-format on */

/* A client process's CURVE, from those options: toward the engine and
 * toward the monitor (NULL: that side has no CURVE). */
struct em_curve_client {
    struct em_curve_pair engine_pair, monitor_pair;
    const struct em_curve_pair *engine, *monitor;
};

/* em_curve_client_config for --engine-key and for --monitor-key, with
 * the same --curve-key. Returns 0 (*out filled), CORE_EINVAL (a bad
 * option, logged: the process exits 2) or a key file's CORE_E* code
 * (logged: exit 1). */
int em_curve_client_setup(const char *who, const char *curve_key, const char *engine_key,
                          const char *monitor_key, struct em_curve_client *out);

/* Log the start-up warning for a bound socket that is not CURVE: on
 * tcp:// anyone who reaches the port may connect. Other transports
 * (ipc:// in a private directory, inproc://) say nothing. */
void em_curve_warn_open(const char *who, const char *what, const char *endpoint);

/*
 * Revocation: the ZAP handler re-reads the allow-list only when a
 * handshake comes, so a key removed would keep the connections already
 * up. The process's loop watches the file too (em_curve_watch_revoked on
 * a timer) and, when a key it allowed is gone, unbinds and rebinds its
 * CURVE sockets (zmq_bus.h em_bus_unbind): every client reconnects
 * through ZAP, and the removed one is refused.
 */
struct em_curve_watch {
    char path[4096];
    struct stat seen;
    struct em_curve_allow allow, next; /* in force; being read */
};
/* Start watching path, whose list in force is allow (copied). */
void em_curve_watch_init(struct em_curve_watch *w, const char *path,
                         const struct em_curve_allow *allow);
/* True when the file changed since the last call and parses, and a key of
 * the list in force is not in it (which then becomes the list in force).
 * A file that does not parse changes nothing (the ZAP handler logs it). */
bool em_curve_watch_revoked(struct em_curve_watch *w);

/*
 * A watch with the bound CURVE sockets it guards, as every CURVE server
 * main (engine --pub/--query, monitor --health) runs it: on the loop's
 * timer, em_curve_guard_step unbinds every socket when a key left the
 * file, then binds each again until its port is free (em_bus_bind_again).
 * The caller owns the sockets and the timer; the guard keeps their bound
 * endpoints. Large (two allow-lists): not on the stack.
 */
#define EM_CURVE_GUARD_SOCKS 2
struct em_bus_sock;
struct em_curve_guard {
    struct em_curve_watch watch;
    const char *who; /* log prefix: "engine", "monitor" */
    unsigned n;
    struct {
        struct em_bus_sock *sock;
        const char *what; /* the option it binds: "--pub" */
        char endpoint[256];
        bool unbound;
    } s[EM_CURVE_GUARD_SOCKS];
};
/* Watch path (its list in force: allow) for who; no sockets yet. */
void em_curve_guard_init(struct em_curve_guard *g, const char *who, const char *path,
                         const struct em_curve_allow *allow);
/* Guard the bound socket s, named `what` in logs (static strings). At
 * most EM_CURVE_GUARD_SOCKS: returns 0 or CORE_ETOOBIG. */
int em_curve_guard_add(struct em_curve_guard *g, struct em_bus_sock *s, const char *what);
/* One timer tick: check the file unless a socket is still unbound, unbind
 * all on a revocation, bind what is unbound again. Logs "a key left" and
 * "bound again". Returns 0, or the CORE_E* code of a bind that failed for
 * good (logged; the process cannot serve that socket: it exits). */
int em_curve_guard_step(struct em_curve_guard *g);

struct em_curve_zap;

/*
 * Start the ZAP handler for zctx with a copy of allow. With `path` (the
 * file allow was loaded from; NULL: never), the handler re-reads the file
 * before answering a handshake when it changed since (inode, size or
 * mtime): a key added is let in without a restart, a key removed is
 * refused from its next connection on (connections already up stay: see
 * em_curve_guard for closing them). A
 * file that no longer parses is logged and the list in force kept. Write
 * the file by rename for an atomic change. Returns 0 and *out, CORE_EBUSY
 * (a handler is already bound in this context), CORE_ENOMEM or CORE_EIO.
 */
int em_curve_zap_start(struct em_curve_zap **out, void *zctx, const struct em_curve_allow *allow,
                       const char *path);

/* Handshakes answered: let in, turned away (for metrics). The counters
 * are written by the handler's thread; read them as a rough figure. */
struct em_curve_zap_stats {
    uint64_t allowed, denied, reloads;
};
const struct em_curve_zap_stats *em_curve_zap_stats(const struct em_curve_zap *z);
/* Register those counters with m as zap_allowed, zap_denied and
 * zap_reloads (exported by the monitor's /metrics as
 * edumatcher_zap_allowed_total{proc=...} and so on). z must outlive m's
 * use. Returns 0 or core_metrics_counter's error. */
int em_curve_zap_metrics(const struct em_curve_zap *z, struct core_metrics *m);

/* Join the handler's thread and free it: call after em_bus_ctx_term of its
 * context (which makes the thread exit). NULL is ignored. */
void em_curve_zap_free(struct em_curve_zap *z);

#endif
