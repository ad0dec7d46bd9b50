#!/usr/bin/env python3
"""Fail if a source file includes a header of a higher layer.

The layers are the folder READMEs' dependency rules (gridsync/README.md,
edumatcher/README.md): a folder may include its own headers and those of
folders of a lower rank, never one of the same or a higher rank. A folder
that is not in the table fails too, so that a new folder gets its place.

Usage: check_layers.py [REPO_ROOT]   (default: the repository of this file)
"""
import os
import re
import sys

# Rank by folder (product/folder; "gridsync/server" is gridsync/server.c).
# gridsync: server -> node -> {cluster, origin, scripting} -> commands -> client
#           -> store -> types -> protocol -> core
# edumatcher: host -> {gateway, clearing} -> monitor -> {engine, bus} -> core
RANK = {
    "core": 0,
    "gridsync/protocol": 1,
    "gridsync/types": 2,
    "gridsync/store": 3,
    "gridsync/client": 4,
    "gridsync/commands": 5,
    "gridsync/cluster": 6,
    "gridsync/origin": 6,
    "gridsync/scripting": 6,
    "gridsync/node": 7,
    "gridsync/server": 8,
    "edumatcher/engine": 1,
    "edumatcher/bus": 1,
    "edumatcher/monitor": 2,
    "edumatcher/gateway": 3,
    "edumatcher/clearing": 3,
    "edumatcher/host": 4,
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder(path):
    """The layer a repository path belongs to, or None outside the products."""
    parts = path.split("/")
    if parts[0] == "core":
        return "core"
    if parts[0] not in ("gridsync", "edumatcher"):
        return None
    if len(parts) == 2:  # a file at the product's top: gridsync/server.c
        return parts[0] + "/" + os.path.splitext(parts[1])[0]
    return parts[0] + "/" + parts[1]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    bad = []
    checked = 0
    for top in ("core", "gridsync", "edumatcher"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if not name.endswith((".c", ".h", ".def")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                src = folder(rel)
                if src not in RANK:
                    bad.append(f"{rel}: folder {src} has no layer (tests/layers/check_layers.py)")
                    continue
                with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        checked += 1
                        dst = folder(m.group(1))
                        if dst is None or dst == src:
                            continue  # a header beside it, or a system/third-party one
                        if dst not in RANK:
                            bad.append(f"{rel}:{lineno}: includes {m.group(1)}, folder {dst} has no layer")
                        elif RANK[dst] >= RANK[src]:
                            bad.append(f"{rel}:{lineno}: {src} (layer {RANK[src]}) includes "
                                       f"{m.group(1)} ({dst}, layer {RANK[dst]})")
    for line in bad:
        print(line)
    if checked == 0:
        print("no #include lines found: wrong root?")
        return 1
    print(f"{checked} includes checked, {len(bad)} against the layers")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
