/*
 * Base64 (RFC 4648, standard alphabet, padded), as DynamoDB's JSON API
 * carries binary attributes ("B").
 *
 * core_base64_encode writes 4 * ceil(n / 3) characters and a NUL into out
 * (CORE_BASE64_ENCODED_LEN(n) + 1 bytes). core_base64_decode accepts only
 * canonical padded input (length a multiple of 4, '=' only at the end) and
 * writes at most CORE_BASE64_DECODED_MAX(len) bytes; it returns the number
 * written, or CORE_EPROTO for anything else (nothing to retry: the input
 * is wrong).
 */
#ifndef CORE_BASE64_H
#define CORE_BASE64_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CORE_BASE64_ENCODED_LEN(n) ((((n) + 2) / 3) * 4)
#define CORE_BASE64_DECODED_MAX(n) (((n) / 4) * 3)

void core_base64_encode(const uint8_t *in, size_t n, char *out);
ssize_t core_base64_decode(const char *in, size_t len, uint8_t *out);

#endif
