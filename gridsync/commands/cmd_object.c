/*
 * OBJECT and MEMORY: what a key's value is made of (its encoding,
 * Redis's REFCOUNT rule) and what it costs in used_memory. The container
 * helpers are cmd_server.h's.
 */
#include "gridsync/commands/cmd_server.h"
#include "gridsync/types/value.h"

#include <stdint.h>
#include <string.h>

static const struct gs_subcommand object_subs[] = {
    {"encoding", 3, "object|encoding"}, {"refcount", 3, "object|refcount"},
    {"idletime", 3, "object|idletime"}, {"freq", 3, "object|freq"},
    {"help", 2, "object|help"},         {NULL, 0, NULL},
};

/* Redis's OBJECT ENCODING for a string: "int" for a canonical integer,
 * "embstr" up to 44 bytes, else "raw". Redis decides at write time (an
 * APPENDed short string stays "raw" there); here it is read from the
 * value, which agrees for values written by SET. */
static const char *string_encoding(struct gs_entry *e, bool *shared)
{
    size_t len;
    const char *v = gs_entry_value(e, &len);
    int64_t n;
    *shared = false;
    if (len <= 20 && gs_string2ll(v, len, &n)) {
        *shared = n >= 0 && n < 10000; /* Redis's shared integers */
        return "int";
    }
    return len <= 44 ? "embstr" : "raw";
}

void gs_cmd_object(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (!gs_subcommand_ok(c, argc, argv, object_subs, "OBJECT"))
        return;
    const struct gs_arg *sub = &argv[1];
    if (gs_arg_is(sub, "help")) {
        static const char *const lines[] = {
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
            "HELP",
            "    Prints this help.",
            NULL,
        };
        gs_reply_help(c, "OBJECT", lines);
        return;
    }
    struct gs_entry *e =
        gs_store_lookup(c->db->store, argv[2].p, argv[2].len, c->db->now_ms, GS_LOOKUP_NOTOUCH);
    if (!e) {
        gs_reply_null(&c->w);
        return;
    }
    if (gs_arg_is(sub, "encoding")) {
        struct gs_obj o;
        bool shared;
        const char *name =
            gs_entry_obj(e, &o) ? gs_encoding_name(o.enc) : string_encoding(e, &shared);
        gs_reply_bulk_cstr(&c->w, name);
    } else if (gs_arg_is(sub, "refcount")) {
        bool shared = false;
        if (gs_entry_type(e) == GS_TYPE_STRING)
            string_encoding(e, &shared);
        gs_reply_int(&c->w, shared ? INT32_MAX : 1);
    } else if (gs_arg_is(sub, "freq")) {
        /* Redis's text for a policy that is not LFU: every policy here
         * (noeviction, slru, allkeys-lru) orders by recency. */
        gs_error(c, "ERR An LFU maxmemory policy is not selected, access frequency not tracked. "
                    "Please note that when switching between policies at runtime LRU and LFU "
                    "data will take some time to adjust.");
    } else {
        /* Seconds since the key's last write or touching read, on the
         * store's 24-bit LRU clock (store.h), as Redis reports it under
         * an LRU policy or noeviction. The lookup above did not touch it. */
        gs_reply_int(&c->w, (int64_t)gs_store_idle_seconds(c->db->store, e));
    }
}

static const struct gs_subcommand memory_subs[] = {
    {"usage", -3, "memory|usage"},
    {"help", 2, "memory|help"},
    {NULL, 0, NULL},
};

/* MEMORY USAGE key [SAMPLES n]: the bytes the key costs in used_memory
 * (the entry and, for a collection, all its blocks), exactly, so SAMPLES
 * is parsed and ignored. */
void gs_cmd_memory(struct gs_client *c, size_t argc, struct gs_arg *argv)
{
    if (!gs_subcommand_ok(c, argc, argv, memory_subs, "MEMORY"))
        return;
    if (gs_arg_is(&argv[1], "help")) {
        static const char *const lines[] = {
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
            "HELP",
            "    Prints this help.",
            NULL,
        };
        gs_reply_help(c, "MEMORY", lines);
        return;
    }
    for (size_t j = 3; j < argc; j++) {
        int64_t samples;
        if (gs_arg_is(&argv[j], "samples") && j + 1 < argc) {
            if (!gs_arg_int(c, &argv[j + 1], &samples, NULL))
                return;
            if (samples < 0) {
                gs_error_syntax(c);
                return;
            }
            j++;
        } else {
            gs_error_syntax(c);
            return;
        }
    }
    struct gs_entry *e =
        gs_store_lookup(c->db->store, argv[2].p, argv[2].len, c->db->now_ms, GS_LOOKUP_NOTOUCH);
    if (!e) {
        gs_reply_null(&c->w);
        return;
    }
    gs_reply_int(&c->w, (int64_t)gs_store_entry_mem(e));
}
