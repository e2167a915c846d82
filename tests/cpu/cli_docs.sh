#!/usr/bin/env bash
# cli_docs.sh TPBENCH CLI_MD — ctest test_cli_docs: docs/cli.md must be exactly
# what `tpbench --help-markdown` prints from the option tables (regenerate it
# with scripts/gen-cli-docs.sh, never by hand). First proves the comparison can
# fail: a copy of the page with one option's help changed must differ.
set -uo pipefail
exe=$1
page=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

"$exe" --help-markdown >"$scratch/generated.md" || { echo "FAIL: tpbench --help-markdown exited $?"; exit 1; }
grep -q '^## tpbench report$' "$scratch/generated.md" || { echo "FAIL: no report section generated"; exit 1; }

# The comparison catches a planted drift (a default typed by hand).
sed 's/| `--iters` | `N` |  | `50` |/| `--iters` | `N` |  | `40` |/' "$scratch/generated.md" >"$scratch/planted.md"
if cmp -s "$scratch/planted.md" "$scratch/generated.md"; then
  echo "FAIL: the planted drift did not change the page (the --iters row moved?)"
  exit 1
fi
if diff -q "$scratch/planted.md" "$scratch/generated.md" >/dev/null; then
  echo "FAIL: diff saw no difference in the planted page"
  exit 1
fi

if ! diff -u "$page" "$scratch/generated.md"; then
  echo "FAIL: $page is stale: run scripts/gen-cli-docs.sh (it writes the page from the option tables)"
  exit 1
fi
echo "ok: $page is what tpbench --help-markdown prints ($(grep -c '^## tpbench ' "$page") command forms)"
