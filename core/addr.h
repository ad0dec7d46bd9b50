/*
 * Network addresses as text: "host:port" for an IPv4 address or a name,
 * "[v6]:port" for an IPv6 address (RFC 3986's form), and the numeric
 * socket address of either. One place for the rule, so that every listener,
 * peer list and transport accepts the same spellings.
 *
 * No function allocates; every output buffer is the caller's.
 */
#ifndef CORE_ADDR_H
#define CORE_ADDR_H

#include <stddef.h>
#include <sys/socket.h>

/* Split s (len bytes, not necessarily terminated) into host and port.
 * Accepts "host:port" (host without ':') and "[v6]:port"; the brackets
 * are not copied into host. The port is decimal, 0..65535. A bare IPv6
 * address ("::1:7000") is refused: its port cannot be told apart.
 * Returns 0, CORE_EINVAL (bad shape or port) or CORE_ERANGE (host longer
 * than hostlen - 1). */
int core_addr_split(const char *s, size_t len, char *host, size_t hostlen, int *port);

/* The numeric socket address of host (an IPv4 or IPv6 literal, without
 * brackets; a host with ':' is IPv6) and port. Returns 0 or CORE_EINVAL
 * (not a literal: names are not resolved here, and an IPv6 scope id
 * "%eth0" is not accepted). */
int core_addr_ip(const char *host, int port, struct sockaddr_storage *ss);

/* Write "host:port", bracketing a host that contains ':' ("[::1]:7000"),
 * the form core_addr_split reads back. Returns what snprintf returns: the
 * output was cut if that is >= len. */
int core_addr_format(char *out, size_t len, const char *host, int port);

/* Do a and b name the same address and port (IPv4 or IPv6)? */
int core_addr_equal(const struct sockaddr *a, const struct sockaddr *b);

#endif
