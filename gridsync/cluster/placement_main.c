/*
 * gridsync-placement: print where the ring puts the slots, and how many
 * would move for a hypothetical change.
 *
 *   gridsync-placement [--vnodes V] [--replicas RF] [--add NAME | --remove NAME]
 *                      [--slots] node1 node2 ...
 *
 * Prints one line per node (slots owned, share, groups it belongs to), and
 * with --add/--remove the number of slots whose owner changes and whose
 * replica set changes, against the ideal 1/N. --slots adds the slot ranges
 * of each group with its replica set, as CLUSTER SLOTS would show them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/error.h"
#include "core/proc.h"
#include "gridsync/cluster/ring.h"
#include "gridsync/cluster/slot.h"

static const char usage[] =
    "Usage: gridsync-placement [--vnodes V] [--replicas RF] [--add NAME | --remove NAME]\n"
    "                          [--slots] NODE...\n"
    "\n"
    "Print how the consistent-hash ring places the 16384 slots on NODEs (slots per\n"
    "node, and with --add/--remove how many move); --slots lists every slot.\n"
    "\n"
    "  -h, --help   print this and exit\n"
    "  --version    print the version and exit\n";

#define PROG "gridsync-placement"

static int count_arg(const char *opt, const char *v, unsigned *out)
{
    int64_t x;
    if (core_parse_int64(v, strlen(v), &x) != 0 || x < 0 || x > 1000000)
        return core_proc_bad_usage(PROG, "%s wants a number, not '%s'", opt, v);
    *out = (unsigned)x;
    return 0;
}

static void print_ring(const struct gs_ring *r)
{
    unsigned n = gs_ring_nodes(r);
    unsigned *counts = calloc(n, sizeof(*counts));
    unsigned *member = calloc(n, sizeof(*member));
    if (!counts || !member) {
        free(counts);
        free(member);
        return;
    }
    gs_ring_slot_counts(r, counts);
    for (unsigned g = 0; g < n; g++) {
        unsigned rep[GS_RING_MAX_REPLICAS];
        unsigned k = gs_ring_group_replicas(r, g, rep);
        for (unsigned i = 0; i < k; i++)
            member[rep[i]]++;
    }
    printf("%u nodes, replication factor %u\n", n, gs_ring_rf(r));
    printf("%-24s %7s %7s %7s  %s\n", "node", "slots", "share", "ideal", "group replicas");
    for (unsigned g = 0; g < n; g++) {
        unsigned rep[GS_RING_MAX_REPLICAS];
        unsigned k = gs_ring_group_replicas(r, g, rep);
        printf("%-24s %7u %6.2f%% %6.2f%% ", gs_ring_node_name(r, g), counts[g],
               100.0 * counts[g] / GS_SLOTS, 100.0 / n);
        for (unsigned i = 0; i < k; i++)
            printf(" %s", gs_ring_node_name(r, rep[i]));
        printf("  (member of %u groups)\n", member[g]);
    }
    free(counts);
    free(member);
}

static void print_slots(const struct gs_ring *r)
{
    unsigned start = 0;
    for (unsigned s = 1; s <= GS_SLOTS; s++) {
        if (s < GS_SLOTS && gs_ring_owner_of_slot(r, s) == gs_ring_owner_of_slot(r, start))
            continue;
        printf("%5u-%-5u %s\n", start, s - 1,
               gs_ring_node_name(r, gs_ring_owner_of_slot(r, start)));
        start = s;
    }
}

int main(int argc, char **argv)
{
    struct gs_ring_config cfg = {0, 0};
    const char *add = NULL, *remove = NULL;
    int slots = 0;
    const char *names[GS_RING_MAX_NODES];
    unsigned n = 0;
    int code = core_proc_early(PROG, usage, argc, argv);
    if (code >= 0)
        return code;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--vnodes") || !strcmp(a, "--replicas") || !strcmp(a, "--add") ||
            !strcmp(a, "--remove")) {
            if (i + 1 >= argc)
                return core_proc_bad_usage(PROG, "%s needs a value", a);
            const char *v = argv[++i];
            if (!strcmp(a, "--vnodes") && (code = count_arg(a, v, &cfg.vnodes)) != 0)
                return code;
            if (!strcmp(a, "--replicas") && (code = count_arg(a, v, &cfg.replicas)) != 0)
                return code;
            if (!strcmp(a, "--add"))
                add = v;
            else if (!strcmp(a, "--remove"))
                remove = v;
        } else if (!strcmp(a, "--slots")) {
            slots = 1;
        } else if (a[0] == '-') {
            return core_proc_bad_usage(PROG, "unknown option '%s'", a);
        } else if (n < GS_RING_MAX_NODES) {
            names[n++] = a;
        } else {
            return core_proc_bad_usage(PROG, "at most %d nodes", GS_RING_MAX_NODES);
        }
    }
    if (n == 0)
        return core_proc_bad_usage(PROG, "no NODE given");
    if (add && remove)
        return core_proc_bad_usage(PROG, "--add and --remove exclude each other");
    struct gs_ring *r;
    int rc = gs_ring_new(&r, names, n, &cfg);
    if (rc) {
        fprintf(stderr, "gridsync-placement: %s\n", core_strerror(rc));
        return 1;
    }
    print_ring(r);
    if (slots)
        print_slots(r);
    if (add || remove) {
        struct gs_ring *b;
        rc = add ? gs_ring_with_node(r, add, &b) : gs_ring_without_node(r, remove, &b);
        if (rc) {
            fprintf(stderr, "gridsync-placement: %s %s: %s\n", add ? "add" : "remove",
                    add ? add : remove, core_strerror(rc));
            gs_ring_free(r);
            return 1;
        }
        unsigned changed;
        unsigned moved = gs_ring_count_moved(r, b, &changed);
        unsigned big = n > gs_ring_nodes(b) ? n : gs_ring_nodes(b);
        printf("\nafter %s %s:\n", add ? "adding" : "removing", add ? add : remove);
        print_ring(b);
        printf("\nslots whose owner changes:       %5u of %u (%.2f%%; ideal 1/%u = %.2f%%)\n",
               moved, GS_SLOTS, 100.0 * moved / GS_SLOTS, big, 100.0 / big);
        printf("slots whose replica set changes: %5u of %u (%.2f%%)\n", changed, GS_SLOTS,
               100.0 * changed / GS_SLOTS);
        gs_ring_free(b);
    }
    gs_ring_free(r);
    return 0;
}
