/* SLOWLOG entries and latency events (see slowlog.h). */
#include "gridsync/commands/slowlog.h"

#include "core/error.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SLOWLOG_ENTRY_MAX_ARGC   32 /* Redis's slowlog.h */
#define SLOWLOG_ENTRY_MAX_STRING 128
#define LATENCY_EVENTS           8

struct entry {
    struct entry *next; /* older */
    uint64_t id;
    int64_t time_s;
    uint64_t usec;
    size_t argc;
    char **argv;
    size_t *arglen;
    char *peer, *name;
};

struct event {
    const char *name; /* NULL: free slot */
    int64_t latest_s;
    uint64_t latest_ms, max_ms;
};

struct gs_slowlog {
    struct entry *head; /* newest */
    size_t len;
    uint64_t next_id;
    struct event events[LATENCY_EVENTS];
};

int gs_slowlog_new(struct gs_slowlog **out)
{
    *out = calloc(1, sizeof(**out));
    return *out ? 0 : CORE_ENOMEM;
}

static void entry_free(struct entry *e)
{
    for (size_t i = 0; i < e->argc; i++)
        free(e->argv[i]);
    free(e->argv);
    free(e->arglen);
    free(e->peer);
    free(e->name);
    free(e);
}

void gs_slowlog_reset(struct gs_slowlog *sl)
{
    while (sl->head) {
        struct entry *e = sl->head;
        sl->head = e->next;
        entry_free(e);
    }
    sl->len = 0;
}

void gs_slowlog_free(struct gs_slowlog *sl)
{
    if (!sl)
        return;
    gs_slowlog_reset(sl);
    free(sl);
}

static char *dup_text(const char *p, size_t len)
{
    char *s = malloc(len + 1);
    if (s) {
        memcpy(s, p, len);
        s[len] = 0;
    }
    return s;
}

/* Redis's slowlogCreateEntry: the arguments as given, the last slot saying
 * how many more there were, each cut with how many more bytes it had. */
static struct entry *entry_new(size_t argc, const struct gs_arg *argv)
{
    struct entry *e = calloc(1, sizeof(*e));
    size_t n = argc > SLOWLOG_ENTRY_MAX_ARGC ? SLOWLOG_ENTRY_MAX_ARGC : argc;
    if (!e || !(e->argv = calloc(n, sizeof(*e->argv))) ||
        !(e->arglen = calloc(n, sizeof(*e->arglen)))) {
        if (e)
            free(e->argv);
        free(e);
        return NULL;
    }
    e->argc = n;
    for (size_t i = 0; i < n; i++) {
        char buf[SLOWLOG_ENTRY_MAX_STRING + 64];
        const char *p = argv[i].p;
        size_t len = argv[i].len;
        if (n != argc && i == n - 1) {
            len = (size_t)snprintf(buf, sizeof(buf), "... (%zu more arguments)", argc - n + 1);
            p = buf;
        } else if (len > SLOWLOG_ENTRY_MAX_STRING) {
            memcpy(buf, p, SLOWLOG_ENTRY_MAX_STRING);
            len = SLOWLOG_ENTRY_MAX_STRING +
                  (size_t)snprintf(buf + SLOWLOG_ENTRY_MAX_STRING,
                                   sizeof(buf) - SLOWLOG_ENTRY_MAX_STRING, "... (%zu more bytes)",
                                   argv[i].len - SLOWLOG_ENTRY_MAX_STRING);
            p = buf;
        }
        e->argv[i] = dup_text(p, len);
        e->arglen[i] = e->argv[i] ? len : 0;
    }
    return e;
}

void gs_slowlog_push(struct gs_slowlog *sl, size_t max_len, int64_t now_s, uint64_t usec,
                     size_t argc, const struct gs_arg *argv, const char *peer, const char *name)
{
    struct entry *e = entry_new(argc, argv);
    if (!e)
        return; /* out of memory: the entry is lost, the command is not */
    e->id = sl->next_id++;
    e->time_s = now_s;
    e->usec = usec;
    e->peer = dup_text(peer ? peer : "", peer ? strlen(peer) : 0);
    e->name = dup_text(name ? name : "", name ? strlen(name) : 0);
    e->next = sl->head;
    sl->head = e;
    sl->len++;
    /* Drop the oldest beyond max_len (O(len); max_len is small). */
    if (sl->len > max_len) {
        struct entry **pp = &sl->head;
        for (size_t i = 0; i < max_len && *pp; i++)
            pp = &(*pp)->next;
        while (*pp) {
            struct entry *old = *pp;
            *pp = old->next;
            entry_free(old);
            sl->len--;
        }
    }
}

size_t gs_slowlog_len(const struct gs_slowlog *sl)
{
    return sl->len;
}

void gs_slowlog_reply(const struct gs_slowlog *sl, struct gs_writer *w, int64_t count)
{
    size_t n = count < 0 || (uint64_t)count > sl->len ? sl->len : (size_t)count;
    gs_reply_array(w, n);
    const struct entry *e = sl->head;
    for (size_t i = 0; i < n; i++, e = e->next) {
        gs_reply_array(w, 6);
        gs_reply_int(w, (int64_t)e->id);
        gs_reply_int(w, e->time_s);
        gs_reply_int(w, (int64_t)e->usec);
        gs_reply_array(w, e->argc);
        for (size_t j = 0; j < e->argc; j++)
            gs_reply_bulk(w, e->argv[j] ? e->argv[j] : "", e->arglen[j]);
        gs_reply_bulk_cstr(w, e->peer ? e->peer : "");
        gs_reply_bulk_cstr(w, e->name ? e->name : "");
    }
}

void gs_latency_add(struct gs_slowlog *sl, const char *event, int64_t now_s, uint64_t ms)
{
    struct event *free_slot = NULL;
    for (int i = 0; i < LATENCY_EVENTS; i++) {
        struct event *ev = &sl->events[i];
        if (ev->name && strcmp(ev->name, event) == 0) {
            ev->latest_s = now_s;
            ev->latest_ms = ms;
            if (ms > ev->max_ms)
                ev->max_ms = ms;
            return;
        }
        if (!ev->name && !free_slot)
            free_slot = ev;
    }
    if (free_slot)
        *free_slot = (struct event){event, now_s, ms, ms};
}

void gs_latency_latest(const struct gs_slowlog *sl, struct gs_writer *w)
{
    size_t n = 0;
    for (int i = 0; i < LATENCY_EVENTS; i++)
        n += sl->events[i].name != NULL;
    gs_reply_array(w, n);
    for (int i = 0; i < LATENCY_EVENTS; i++) {
        const struct event *ev = &sl->events[i];
        if (!ev->name)
            continue;
        gs_reply_array(w, 4);
        gs_reply_bulk_cstr(w, ev->name);
        gs_reply_int(w, ev->latest_s);
        gs_reply_int(w, (int64_t)ev->latest_ms);
        gs_reply_int(w, (int64_t)ev->max_ms);
    }
}

size_t gs_latency_reset(struct gs_slowlog *sl, size_t argc, const struct gs_arg *events)
{
    size_t reset = 0;
    for (int i = 0; i < LATENCY_EVENTS; i++) {
        struct event *ev = &sl->events[i];
        if (!ev->name)
            continue;
        bool named = argc == 0;
        for (size_t j = 0; j < argc && !named; j++)
            named = strlen(ev->name) == events[j].len &&
                    strncasecmp(ev->name, events[j].p, events[j].len) == 0;
        if (named) {
            ev->name = NULL;
            reset++;
        }
    }
    return reset;
}
