#!/usr/bin/env bash
# Prints facts about the source tree that anyone can recompute: lines per folder,
# the lines outside tests/, the largest files and functions, the median function
# length, and (where the `duplicates` command exists) the count of repeated
# blocks of six or more lines, over the whole tree and over its non-test code.
# Usage: scripts/code-facts.sh [REPO_DIR]   (default: the repository holding this script)
set -euo pipefail
repo=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$repo"
mapfile -t files < <(git ls-files -- '*.c' '*.h' '*.cu' '*.cuh' | grep -v '^tests/fuzz/corpus/')

echo "## lines of code per folder (C, headers, CUDA)"
for f in "${files[@]}"; do printf '%s %s\n' "$(dirname "$f")" "$(wc -l <"$f")"; done |
  awk '{n[$1]+=$2; c[$1]++} END {for (d in n) printf "%6d lines %3d files  %s\n", n[d], c[d], d}' | sort -k4

echo "## non-test lines (C, headers, CUDA outside tests/)"
for f in "${files[@]}"; do case $f in tests/*) ;; *) cat "$f" ;; esac; done | wc -l

echo "## largest files"
wc -l "${files[@]}" | grep -v ' total$' | sort -rn | head -10

echo "## largest functions (lines, name, file:line)"
ctags --output-format=json --fields=+ne --kinds-C=f --language-force=C -o - "${files[@]}" 2>/dev/null |
  python3 -c '
import json, statistics, sys
rows = []
for line in sys.stdin:
    tag = json.loads(line)
    if tag.get("kind") == "function" and "end" in tag:
        rows.append((tag["end"] - tag["line"] + 1, tag["name"], "%s:%d" % (tag["path"], tag["line"])))
rows.sort(reverse=True)
for n, name, where in rows[:10]:
    print("%5d  %s  %s" % (n, name, where))
print("functions: %d, median %g lines, over 60 lines: %d" % (
    len(rows), statistics.median(r[0] for r in rows), sum(1 for r in rows if r[0] > 60)))
'

echo "## repeated blocks (six or more lines)"
if command -v duplicates >/dev/null; then
  duplicates --repo "$repo" --most 1 --seconds 120 | head -1
  # the same over a copy of the tracked files without tests/ (duplicates reads a folder)
  nontest=$(mktemp -d)
  git ls-files | grep -v '^tests/' | tar -cf - -T - | tar -xf - -C "$nontest"
  printf 'non-test code: '
  (cd "$nontest" && duplicates --most 1 --seconds 300 | head -1)
  rm -rf "$nontest"
else
  echo "the duplicates command is not on this machine"
fi
