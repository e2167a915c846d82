#!/usr/bin/env bash
# device_scripts.sh — the device scripts' parts that run without a GPU:
# scripts/device-gpu-tests.sh's stamp_lines gives each line back exactly after its stamp (a last
# line without a newline too). Skips (77) where python3 is missing.
# usage: device_scripts.sh REPO_ROOT
set -uo pipefail
repo=${1:?usage: device_scripts.sh REPO_ROOT}
gpu_tests=$repo/scripts/device-gpu-tests.sh
command -v python3 > /dev/null || { echo "python3 missing: skipped"; exit 77; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }

# 1. stamp_lines: "SSSSS.CC " and then the line as it came (backslashes, percent signs, leading
#    blanks, tabs, a CR, a line of 200000 characters, an empty line, no newline at the end)
python3 - "$scratch/in.txt" << 'PY'
import sys
open(sys.argv[1], "w", newline="").write(
    "plain\n  leading spaces\nback\\slash \\n \\t\npercent %s %d %%\n\ttab\n" + "x" * 200000
    + "\n\nempty above\r\ncr line\nlast without newline")
PY
(
  # shellcheck source=/dev/null
  source <(sed -n '/^stamp_lines() {/,/^}/p' "$gpu_tests")
  stamp_lines < "$scratch/in.txt" > "$scratch/stamped.txt"
)
grep -qvE '^ {0,4}[0-9]+\.[0-9]{2} ' "$scratch/stamped.txt" &&
  fail "stamp_lines: a line without its stamp: $(grep -vE '^ *[0-9]+\.[0-9]{2} ' "$scratch/stamped.txt" | head -c 200)"
sed 's/^.\{9\}//' "$scratch/stamped.txt" > "$scratch/back.txt" # (cut would add a newline)
cmp -s "$scratch/in.txt" "$scratch/back.txt" ||
  fail "stamp_lines: the text after the stamps differs from the input: $(cmp "$scratch/in.txt" "$scratch/back.txt" 2>&1)"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "device scripts: all checks passed"
