#!/usr/bin/env bash
# device-trust.sh — one call on a lent GPU machine for the trust checks: the
# GPU tests, then `tpbench ops` twice on the same matrix, once with --trace
# and once without (untraced medians with and without the collector), then
# the same with the test knob's fixed slowdown; everything under $OUT.
#
# usage: scripts/device-trust.sh BUILD_DIR [ops options...]
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-trust.sh BUILD_DIR [ops options]}
shift
out=${OUT:-/tmp/tpbench-out}
mkdir -p "$out/logs"
tp_device_env
tp_device_checkout_at_build_path "$build"
log=$out/logs
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$log/host.txt" 2>&1
(cd "$build" && ctest -L gpu --output-on-failure --timeout 300) > "$log/gpu-tests.txt" 2>&1
echo "gpu tests exit $?"
tail -n 4 "$log/gpu-tests.txt"
db=$out/trust.db
"$build/tpbench" ops --db "$db" --trace "$@" > "$log/ops-traced.md" 2> "$log/ops-traced.err"
echo "ops --trace exit $?"
"$build/tpbench" ops --db "$db" "$@" > "$log/ops-untraced.md" 2> "$log/ops-untraced.err"
echo "ops exit $?"
TPBENCH_TEST_DIST_DELAY_US=20 "$build/tpbench" ops --db "$db" "$@" > "$log/ops-slow.md" \
  2> "$log/ops-slow.err"
echo "ops (slowed) exit $?"
tail -n 3 "$log"/ops-*.err
# two runs of identical code (the untraced windows of run 1, run 2): no verdict expected
"$build/tpbench" compare run:1 run:2 --db "$db" > "$log/compare-identical.md" 2>&1
echo "compare run:1 run:2 (identical code) exit $?"
"$build/tpbench" report --db "$db" --run 2 > "$log/report-run2.md" 2>&1
echo "report exit $?"
tar czf "$out/all.tgz" -C "$out" logs trust.db && rm -rf "$log" "$db"
