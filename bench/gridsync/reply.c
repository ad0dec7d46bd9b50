/*
 * Streaming reply parser (RESP and memcached text); see reply.h.
 *
 * State machine, one byte at a time except bulk payloads, which are
 * skipped a chunk at a time:
 *
 *   RESP:      TYPE --type byte--> LINE --'\r'--> LF --'\n'--> (line done)
 *              line done: $n / !n / =n  --> BULK --n bytes--> BULK_CR --> BULK_LF
 *                         *n / %n / ~n / >n --> push a level, back to TYPE
 *                         else          --> element done
 *              element done: pop finished levels; at depth 0 the reply is
 *              complete and the machine is back at TYPE.
 *   memcached: MC_LINE --'\r'--> MC_LF --'\n'--> (line done)
 *              "VALUE k f n" --> BULK (n bytes) --> BULK_CR --> BULK_LF --> MC_LINE
 *              "END", "STORED", errors ... --> reply complete, back at MC_LINE
 *
 * RESP per https://redis.io/docs/reference/protocol-spec/ ; memcached per
 * its protocol.txt ("get" answers VALUE blocks then END).
 */
#include "bench/gridsync/reply.h"

#include <string.h>

#include "core/error.h"

enum {
    S_TYPE,
    S_LINE,
    S_LF,
    S_BULK,
    S_BULK_CR,
    S_BULK_LF,
    S_MC_LINE,
    S_MC_LF,
};

/* Larger lengths are not something a server sends to a benchmark: treat
 * them as corruption rather than skip terabytes. */
#define MAX_LENGTH (INT64_C(1) << 40)

void gsb_reply_parser_init(struct gsb_reply_parser *p, enum gsb_protocol proto)
{
    memset(p, 0, sizeof(*p));
    p->proto = proto;
    p->state = proto == GSB_PROTO_MEMCACHE ? S_MC_LINE : S_TYPE;
}

static int fail(struct gsb_reply_parser *p)
{
    p->failed = 1;
    return CORE_EPROTO;
}

/* Types whose line is a length or count; ':' is a plain integer. */
static int type_has_number(char t)
{
    return t == '$' || t == '*' || t == ':' || t == '!' || t == '=' || t == '%' || t == '~' ||
           t == '>';
}

static int type_known(char t)
{
    return type_has_number(t) || t == '+' || t == '-' || t == '_' || t == ',' || t == '#' ||
           t == '(';
}

/* One element finished. Returns 1 if that completed the top-level reply. */
static int element_done(struct gsb_reply_parser *p)
{
    while (p->depth > 0) {
        if (--p->left[p->depth - 1] > 0) {
            p->state = S_TYPE;
            return 0;
        }
        p->depth--;
    }
    p->state = p->proto == GSB_PROTO_MEMCACHE ? S_MC_LINE : S_TYPE;
    return 1;
}

/* A RESP line ended (after its "\r\n"). Returns 1 if the reply completed,
 * 0 to go on, CORE_EPROTO if the line is invalid. */
static int resp_line_done(struct gsb_reply_parser *p)
{
    int top = p->depth == 0;
    char t = p->type;
    int64_t n = p->negative ? -p->num : p->num;
    if (top) {
        p->cur.text = NULL;
        p->cur.text_len = 0;
    }

    if (type_has_number(t) && p->digits == 0)
        return fail(p);
    switch (t) {
    case '$':
    case '!':
    case '=':
        if (n < -1)
            return fail(p);
        if (top) {
            p->cur.kind = n < 0 ? GSB_REPLY_NULL : (t == '!' ? GSB_REPLY_ERROR : GSB_REPLY_BULK);
            p->cur.len = n < 0 ? 0 : n;
        }
        if (n < 0)
            return element_done(p);
        p->bulk_left = n;
        p->state = n > 0 ? S_BULK : S_BULK_CR;
        return 0;
    case '*':
    case '%':
    case '~':
    case '>':
        if (n < -1)
            return fail(p);
        if (top) {
            p->cur.kind = n < 0 ? GSB_REPLY_NULL : GSB_REPLY_ARRAY;
            p->cur.len = n < 0 ? 0 : n;
        }
        if (t == '%')
            n *= 2; /* a map has a key and a value per entry */
        if (n <= 0)
            return element_done(p);
        if (p->depth == GSB_REPLY_MAX_DEPTH)
            return fail(p);
        p->left[p->depth++] = n;
        p->state = S_TYPE;
        return 0;
    default:
        if (top) {
            p->cur.len = 0;
            switch (t) {
            case '+':
                p->cur.kind = GSB_REPLY_STATUS;
                break;
            case '-':
                p->cur.kind = GSB_REPLY_ERROR;
                p->cur.text = p->line;
                p->cur.text_len = p->line_len;
                break;
            case ':':
                p->cur.kind = GSB_REPLY_INT;
                break;
            case '_':
                p->cur.kind = GSB_REPLY_NULL;
                break;
            default:
                p->cur.kind = GSB_REPLY_OTHER;
                break;
            }
        }
        return element_done(p);
    }
}

static int line_is(const struct gsb_reply_parser *p, const char *word)
{
    size_t n = strlen(word);
    return p->line_len == n && memcmp(p->line, word, n) == 0;
}

static int line_starts(const struct gsb_reply_parser *p, const char *word)
{
    size_t n = strlen(word);
    return p->line_len >= n && memcmp(p->line, word, n) == 0;
}

/* "VALUE <key> <flags> <bytes> [<cas>]": return <bytes> or -1. */
static int64_t mc_value_bytes(const struct gsb_reply_parser *p)
{
    size_t i = 0;
    for (int field = 0; field < 3; field++) {
        while (i < p->line_len && p->line[i] != ' ')
            i++;
        while (i < p->line_len && p->line[i] == ' ')
            i++;
    }
    int64_t n = 0;
    int digits = 0;
    for (; i < p->line_len && p->line[i] != ' '; i++, digits++) {
        char c = p->line[i];
        if (c < '0' || c > '9' || n > MAX_LENGTH)
            return -1;
        n = n * 10 + (c - '0');
    }
    return digits > 0 && n <= MAX_LENGTH ? n : -1;
}

/* A memcached line ended. Returns 1 if the reply completed, 0 to go on,
 * CORE_EPROTO if the line is not a reply we know. */
static int mc_line_done(struct gsb_reply_parser *p)
{
    if (line_starts(p, "VALUE ")) {
        int64_t n = mc_value_bytes(p);
        if (n < 0)
            return fail(p);
        p->got_value = 1;
        p->cur.len = n;
        p->bulk_left = n;
        p->state = n > 0 ? S_BULK : S_BULK_CR;
        return 0;
    }
    if (line_is(p, "END")) {
        p->cur.kind = p->got_value ? GSB_REPLY_BULK : GSB_REPLY_NULL;
        if (!p->got_value)
            p->cur.len = 0;
        p->got_value = 0;
        return element_done(p);
    }
    if (p->got_value)
        return fail(p); /* only END may follow a VALUE block */
    p->cur.len = 0;
    if (line_is(p, "ERROR") || line_starts(p, "CLIENT_ERROR") || line_starts(p, "SERVER_ERROR")) {
        p->cur.kind = GSB_REPLY_ERROR;
        return element_done(p);
    }
    if (line_is(p, "STORED") || line_is(p, "NOT_STORED") || line_is(p, "EXISTS") ||
        line_is(p, "NOT_FOUND") || line_is(p, "DELETED") || line_is(p, "TOUCHED") ||
        line_is(p, "OK")) {
        p->cur.kind = GSB_REPLY_STATUS;
        return element_done(p);
    }
    if (p->line_len > 0 && p->line_len <= 20 && strspn(p->line, "0123456789") >= p->line_len) {
        p->cur.kind = GSB_REPLY_INT; /* incr / decr */
        return element_done(p);
    }
    return fail(p);
}

int gsb_reply_parse(struct gsb_reply_parser *p, const char *buf, size_t len, size_t *consumed,
                    struct gsb_reply *out)
{
    size_t i = 0;
    int r = 0;

    if (p->failed)
        return CORE_EPROTO;
    while (i < len) {
        char c = buf[i];
        switch (p->state) {
        case S_TYPE:
            if (!type_known(c))
                return fail(p);
            p->type = c;
            p->line_len = 0;
            p->line[0] = '\0';
            p->negative = 0;
            p->digits = 0;
            p->num = 0;
            p->state = S_LINE;
            i++;
            break;
        case S_LINE:
            i++;
            if (c == '\r') {
                p->state = S_LF;
            } else if (c == '\n') {
                return fail(p);
            } else if (p->type == '-') {
                /* Kept (truncated) for -MOVED / -ASK redirections. */
                if (p->depth == 0 && p->line_len < GSB_REPLY_MAX_LINE - 1) {
                    p->line[p->line_len++] = c;
                    p->line[p->line_len] = '\0';
                }
            } else if (type_has_number(p->type)) {
                if (c == '-' && p->digits == 0 && !p->negative) {
                    p->negative = 1;
                } else if (c >= '0' && c <= '9' && p->num <= MAX_LENGTH) {
                    p->num = p->num * 10 + (c - '0');
                    p->digits++;
                } else {
                    return fail(p);
                }
            }
            break;
        case S_LF:
            if (c != '\n')
                return fail(p);
            i++;
            r = resp_line_done(p);
            break;
        case S_BULK: {
            size_t n = len - i;
            if ((int64_t)n > p->bulk_left)
                n = (size_t)p->bulk_left;
            p->bulk_left -= (int64_t)n;
            i += n;
            if (p->bulk_left == 0)
                p->state = S_BULK_CR;
            break;
        }
        case S_BULK_CR:
            if (c != '\r')
                return fail(p);
            i++;
            p->state = S_BULK_LF;
            break;
        case S_BULK_LF:
            if (c != '\n')
                return fail(p);
            i++;
            if (p->proto == GSB_PROTO_MEMCACHE) {
                p->state = S_MC_LINE;
                p->line_len = 0;
            } else {
                r = element_done(p);
            }
            break;
        case S_MC_LINE:
            i++;
            if (c == '\r') {
                p->state = S_MC_LF;
            } else if (c == '\n' || c == '\0' || p->line_len == GSB_REPLY_MAX_LINE - 1) {
                return fail(p);
            } else {
                p->line[p->line_len++] = c;
                p->line[p->line_len] = '\0';
            }
            break;
        case S_MC_LF:
            if (c != '\n')
                return fail(p);
            i++;
            r = mc_line_done(p);
            p->line_len = 0;
            break;
        default:
            return fail(p);
        }
        if (r < 0)
            return r;
        if (r == 1) {
            *out = p->cur;
            *consumed = i;
            return 1;
        }
    }
    *consumed = i;
    return 0;
}
