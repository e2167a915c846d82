#!/usr/bin/env bash
# device-session.sh — one call on a lent GPU machine for a whole session's
# check: every GPU test (ctest -L gpu, but the shared-GPU entries per TP degree, which
# scripts/device-gpu-tests.sh runs one degree per call), then the feature scripts named on the
# command line (device-NAME.sh BUILD_DIR, each into its own folder), each
# folder tarred as $OUT/NAME.tgz so the few files $OUT may return hold it all.
#
# usage: scripts/device-session.sh BUILD_DIR [--no-tests] [NAME...]
#   e.g. scripts/device-session.sh build graph-sizes drift stock-window
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-session.sh BUILD_DIR [--no-tests] [NAME...]}
shift
out=${OUT:-/tmp/tpbench-out}
mkdir -p "$out"
tp_device_env
tp_device_checkout_at_build_path "$build"
here=$(dirname "${BASH_SOURCE[0]}")
rc=0
if [ "${1:-}" = --no-tests ]; then
  shift
else
  # the shared-GPU entries per TP degree (label shared) take device-gpu-tests.sh's calls
  (cd "$build" && ctest -L gpu -LE shared --output-on-failure --timeout 600) \
    > "$out/gpu-tests.txt" 2>&1
  tests_rc=$?
  echo "gpu tests exit $tests_rc"
  grep -E "tests passed|\*\*\*Failed|Not Run|Skipped" "$out/gpu-tests.txt" | head -n 30
  rc=$((rc || tests_rc))
fi
for name in "$@"; do
  dir=$out/$name
  mkdir -p "$dir"
  start=$(date +%s)
  OUT=$dir bash "$here/device-$name.sh" "$build" > "$dir/stdout.txt" 2>&1
  step_rc=$?
  echo "== device-$name.sh exit $step_rc in $(($(date +%s) - start)) s"
  tail -n 25 "$dir/stdout.txt"
  rc=$((rc || step_rc))
  tar czf "$out/$name.tgz" -C "$out" "$name" && rm -rf "$dir"
done
exit "$rc"
