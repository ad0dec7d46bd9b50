/*
 * Encoding and validating decoding of Raft log entries and snapshots; the
 * formats are in raft_batch.h.
 *
 * Decoding never reads past `end` and never allocates from a length read
 * off the wire without first checking that the bytes are there, so a
 * corrupt or hostile entry costs at most its own size.
 */
#include "gridsync/cluster/raft_batch.h"
#include "gridsync/types/value.h"

#include <stdlib.h>
#include <string.h>

#include "core/byte.h"
#include "core/error.h"

int gs_batch_begin(struct core_buf *b, const struct gs_batch_header *h)
{
    core_buf_reset(b);
    char *p = core_buf_reserve(b, GS_BATCH_HEADER);
    if (!p)
        return CORE_ENOMEM;
    core_put_le32(p, GS_BATCH_MAGIC);
    core_put_le64(p + 4, h->origin_id);
    core_put_le64(p + 12, h->incarnation);
    core_put_le64(p + 20, h->seq);
    core_put_le64(p + 28, (uint64_t)h->now_ms);
    core_put_le32(p + 36, 0);
    b->len = GS_BATCH_HEADER;
    return 0;
}

void gs_batch_stamp(struct core_buf *b, const struct gs_batch_header *h)
{
    char *p = b->data;
    core_put_le64(p + 4, h->origin_id);
    core_put_le64(p + 12, h->incarnation);
    core_put_le64(p + 20, h->seq);
    core_put_le64(p + 28, (uint64_t)h->now_ms);
}

uint32_t gs_batch_count(const struct core_buf *b)
{
    return b->len >= GS_BATCH_HEADER ? core_get_le32(b->data + 36) : 0;
}

int gs_batch_add(struct core_buf *b, unsigned argc, const char *const *argv, const size_t *argvlen)
{
    if (argc == 0 || argc > GS_BATCH_MAX_ARGS || b->len < GS_BATCH_HEADER)
        return CORE_EINVAL;
    size_t need = 4;
    for (unsigned i = 0; i < argc; i++) {
        if (argvlen[i] > UINT32_MAX)
            return CORE_EINVAL;
        need += 4 + argvlen[i];
    }
    char *p = core_buf_reserve(b, need);
    if (!p)
        return CORE_ENOMEM;
    core_put_le32(p, argc);
    p += 4;
    for (unsigned i = 0; i < argc; i++) {
        core_put_le32(p, (uint32_t)argvlen[i]);
        if (argvlen[i])
            memcpy(p + 4, argv[i], argvlen[i]);
        p += 4 + argvlen[i];
    }
    b->len += need;
    core_put_le32(b->data + 36, gs_batch_count(b) + 1);
    return 0;
}

int gs_batch_parse(const void *buf, size_t len, struct gs_batch_header *h,
                   struct gs_batch_reader *rd)
{
    const char *p = buf, *end = p + len;
    if (len < GS_BATCH_HEADER || core_get_le32(p) != GS_BATCH_MAGIC)
        return CORE_EPROTO;
    h->origin_id = core_get_le64(p + 4);
    h->incarnation = core_get_le64(p + 12);
    h->seq = core_get_le64(p + 20);
    h->now_ms = (int64_t)core_get_le64(p + 28);
    h->ncmds = core_get_le32(p + 36);

    /* Walk the framing once so that gs_batch_next cannot fail on bad
     * input: the FSM must apply all of a batch or none of it. */
    const char *q = p + GS_BATCH_HEADER;
    for (uint32_t c = 0; c < h->ncmds; c++) {
        if (end - q < 4)
            return CORE_EPROTO;
        uint32_t argc = core_get_le32(q);
        q += 4;
        if (argc == 0 || argc > GS_BATCH_MAX_ARGS)
            return CORE_EPROTO;
        for (uint32_t i = 0; i < argc; i++) {
            if (end - q < 4)
                return CORE_EPROTO;
            uint32_t n = core_get_le32(q);
            q += 4;
            if ((size_t)(end - q) < n)
                return CORE_EPROTO;
            q += n;
        }
    }
    /* Up to 7 bytes of zero padding (see raft_batch.h). */
    if (end - q > 7)
        return CORE_EPROTO;
    for (; q < end; q++)
        if (*q != 0)
            return CORE_EPROTO;
    rd->p = p + GS_BATCH_HEADER;
    rd->end = end;
    rd->left = h->ncmds;
    return 0;
}

int gs_batch_next(struct gs_batch_reader *rd, unsigned *argc, const char *const **argv,
                  const size_t **argvlen)
{
    if (rd->left == 0)
        return 0;
    uint32_t n = core_get_le32(rd->p);
    if (n > rd->cap) {
        size_t cap = rd->cap ? rd->cap : 8;
        while (cap < n)
            cap *= 2;
        const char **a = realloc(rd->argv, cap * sizeof(*a));
        if (!a)
            return CORE_ENOMEM;
        rd->argv = a;
        size_t *l = realloc(rd->argvlen, cap * sizeof(*l));
        if (!l)
            return CORE_ENOMEM;
        rd->argvlen = l;
        rd->cap = cap;
    }
    const char *q = rd->p + 4;
    for (uint32_t i = 0; i < n; i++) {
        rd->argvlen[i] = core_get_le32(q);
        rd->argv[i] = q + 4;
        q += 4 + rd->argvlen[i];
    }
    rd->p = q;
    rd->left--;
    *argc = n;
    *argv = rd->argv;
    *argvlen = rd->argvlen;
    return 1;
}

void gs_batch_reader_free(struct gs_batch_reader *rd)
{
    free(rd->argv);
    free(rd->argvlen);
    *rd = (struct gs_batch_reader){0};
}

int gs_snapshot_begin(struct core_buf *b)
{
    core_buf_reset(b);
    char *p = core_buf_reserve(b, 12);
    if (!p)
        return CORE_ENOMEM;
    core_put_le32(p, GS_SNAPSHOT_MAGIC);
    core_put_le64(p + 4, 0);
    b->len = 12;
    return 0;
}

#define SNAP_TYPE_SHIFT 29
#define SNAP_KLEN_MASK  ((1u << SNAP_TYPE_SHIFT) - 1)

int gs_snapshot_add(struct core_buf *b, int type, const void *key, size_t klen, const void *val,
                    size_t vlen, int64_t expire_ms)
{
    if (klen > SNAP_KLEN_MASK || vlen > UINT32_MAX || type < 0 || type > 7)
        return CORE_EINVAL;
    char *p = core_buf_reserve(b, 16 + klen + vlen);
    if (!p)
        return CORE_ENOMEM;
    core_put_le32(p, (uint32_t)klen | (uint32_t)type << SNAP_TYPE_SHIFT);
    core_put_le32(p + 4, (uint32_t)vlen);
    core_put_le64(p + 8, (uint64_t)expire_ms);
    if (klen)
        memcpy(p + 16, key, klen);
    if (vlen)
        memcpy(p + 16 + klen, val, vlen);
    b->len += 16 + klen + vlen;
    return 0;
}

void gs_snapshot_finish(struct core_buf *b, uint64_t count)
{
    core_put_le64(b->data + 4, count);
}

/* Walk the entries; with fn NULL only validate. */
static int snapshot_walk(const char *p, const char *end, uint64_t count, gs_snapshot_entry_fn fn,
                         void *arg)
{
    for (uint64_t i = 0; i < count; i++) {
        if (end - p < 16)
            return CORE_EPROTO;
        uint32_t klen = core_get_le32(p) & SNAP_KLEN_MASK, vlen = core_get_le32(p + 4);
        int type = (int)(core_get_le32(p) >> SNAP_TYPE_SHIFT);
        int64_t expire = (int64_t)core_get_le64(p + 8);
        p += 16;
        if ((size_t)(end - p) < (size_t)klen + vlen)
            return CORE_EPROTO;
        /* A collection's bytes are checked here too, so that restoring
         * (which clears the store first) cannot meet a bad one. */
        if (!fn && type != GS_TYPE_STRING && type != GS_SNAPSHOT_STATE &&
            !gs_obj_validate(type, p + klen, vlen))
            return CORE_EPROTO;
        if (fn) {
            int rc = fn(arg, type, p, klen, p + klen, vlen, expire);
            if (rc)
                return rc;
        }
        p += (size_t)klen + vlen;
    }
    return p == end ? 0 : CORE_EPROTO;
}

int gs_snapshot_parse(const void *buf, size_t len, gs_snapshot_entry_fn fn, void *arg)
{
    const char *p = buf;
    if (len < 12 || core_get_le32(p) != GS_SNAPSHOT_MAGIC)
        return CORE_EPROTO;
    uint64_t count = core_get_le64(p + 4);
    /* Each entry takes at least 16 bytes: a larger count is corrupt (and
     * would make the validation loop long for nothing). */
    if (count > (len - 12) / 16)
        return CORE_EPROTO;
    int rc = snapshot_walk(p + 12, p + len, count, NULL, NULL);
    if (rc)
        return rc;
    return snapshot_walk(p + 12, p + len, count, fn, arg);
}

size_t gs_mux_handshake_encode(char *out, uint32_t group, uint64_t id, const char *address)
{
    size_t alen = strlen(address);
    if (alen == 0 || alen > GS_MUX_ADDR_MAX)
        return 0;
    core_put_le32(out, GS_MUX_MAGIC);
    core_put_le32(out + 4, group);
    core_put_le64(out + 8, id);
    core_put_le32(out + 16, (uint32_t)alen);
    memcpy(out + GS_MUX_HEADER, address, alen);
    return GS_MUX_HEADER + alen;
}

int gs_mux_handshake_parse(const void *buf, size_t len, uint32_t *group, uint64_t *id,
                           const char **address, size_t *addrlen, size_t *need)
{
    const char *p = buf;
    if (len < GS_MUX_HEADER) {
        /* The magic is checked as soon as it is here. */
        if (len >= 4 && core_get_le32(p) != GS_MUX_MAGIC)
            return CORE_EPROTO;
        *need = GS_MUX_HEADER;
        return CORE_EINCOMPLETE;
    }
    uint32_t alen = core_get_le32(p + 16);
    if (core_get_le32(p) != GS_MUX_MAGIC || alen == 0 || alen > GS_MUX_ADDR_MAX)
        return CORE_EPROTO;
    *need = GS_MUX_HEADER + alen;
    if (len < *need)
        return CORE_EINCOMPLETE;
    *group = core_get_le32(p + 4);
    *id = core_get_le64(p + 8);
    *address = p + GS_MUX_HEADER;
    *addrlen = alen;
    return 0;
}

size_t gs_hint_encode(char *out, const struct gs_hint *h)
{
    if (h->n > GS_HINT_MAX)
        return 0;
    core_put_le32(out, GS_HINT_MAGIC);
    core_put_le64(out + 4, h->sender);
    core_put_le32(out + 12, h->n);
    for (uint32_t i = 0; i < h->n; i++) {
        core_put_le32(out + GS_HINT_HEADER + 12 * i, h->group[i]);
        core_put_le64(out + GS_HINT_HEADER + 12 * i + 4, h->term[i]);
    }
    return GS_HINT_HEADER + 12u * h->n;
}

int gs_hint_parse(const void *buf, size_t len, struct gs_hint *h)
{
    const char *p = buf;
    if (len < GS_HINT_HEADER || core_get_le32(p) != GS_HINT_MAGIC)
        return CORE_EPROTO;
    uint32_t n = core_get_le32(p + 12);
    if (n > GS_HINT_MAX || len != GS_HINT_HEADER + 12u * n)
        return CORE_EPROTO;
    h->sender = core_get_le64(p + 4);
    h->n = n;
    for (uint32_t i = 0; i < n; i++) {
        h->group[i] = core_get_le32(p + GS_HINT_HEADER + 12 * i);
        h->term[i] = core_get_le64(p + GS_HINT_HEADER + 12 * i + 4);
    }
    return 0;
}

size_t gs_pub_encode(char *out, uint64_t sender, const char *channel, size_t chlen,
                     const char *message, size_t msglen)
{
    if (chlen > GS_PUB_BYTES - GS_PUB_HEADER || msglen > GS_PUB_BYTES - GS_PUB_HEADER - chlen)
        return 0;
    core_put_le32(out, GS_PUB_MAGIC);
    core_put_le64(out + 4, sender);
    core_put_le32(out + 12, (uint32_t)chlen);
    core_put_le32(out + 16, (uint32_t)msglen);
    memcpy(out + GS_PUB_HEADER, channel, chlen);
    memcpy(out + GS_PUB_HEADER + chlen, message, msglen);
    return GS_PUB_HEADER + chlen + msglen;
}

int gs_pub_parse(const void *buf, size_t len, struct gs_pub *p)
{
    const char *b = buf;
    if (len < GS_PUB_HEADER || len > GS_PUB_BYTES || core_get_le32(b) != GS_PUB_MAGIC)
        return CORE_EPROTO;
    uint64_t chlen = core_get_le32(b + 12), msglen = core_get_le32(b + 16);
    if (GS_PUB_HEADER + chlen + msglen != len)
        return CORE_EPROTO;
    p->sender = core_get_le64(b + 4);
    p->chlen = (size_t)chlen;
    p->msglen = (size_t)msglen;
    p->channel = b + GS_PUB_HEADER;
    p->message = b + GS_PUB_HEADER + chlen;
    return 0;
}
