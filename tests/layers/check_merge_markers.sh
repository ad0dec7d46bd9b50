#!/bin/sh
# Fails when a tracked file still holds a merge's conflict markers (a line
# starting with seven '<' or '>' and a space, or exactly seven '='), which
# a merge can leave in files the compiler never reads (docs, CMake, tests).
# Usage: check_merge_markers.sh SOURCE_DIR
case "${1:-}" in
  -h | --help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  '' | -*) echo "usage: $0 SOURCE_DIR" >&2; exit 2 ;;
esac
cd "$1" || exit 2
if ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo "not a git checkout: nothing to check"
  exit 0
fi
if git grep -nE '^(<{7}|>{7}) |^={7}$'; then
  echo "conflict markers left by a merge (above)" >&2
  exit 1
fi
echo "no conflict markers"
