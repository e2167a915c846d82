#!/usr/bin/env bash
# device-before-after.sh — one call on a lent GPU machine that checks a change
# claimed to leave behaviour alone: the GPU tests of the new build, then the
# same `tpbench ops` matrix run by the old and the new binary in turns (old,
# new, old, new) into one database, then `tpbench compare OLD NEW` on it (two
# runs a side, so raw times are gated too) and each side's table. Logs and the
# database go to $OUT (all.tgz).
#
# usage: scripts/device-before-after.sh OLD_TPBENCH NEW_BUILD_DIR [ops options...]
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
old=${1:?usage: device-before-after.sh OLD_TPBENCH NEW_BUILD_DIR [ops options]}
build=${2:?usage: device-before-after.sh OLD_TPBENCH NEW_BUILD_DIR [ops options]}
shift 2
new=$build/tpbench
out=${OUT:-/tmp/tpbench-out}
log=$out/logs
mkdir -p "$log"
tp_device_env
tp_device_checkout_at_build_path "$build"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$log/host.txt" 2>&1

(cd "$build" && ctest -L gpu --output-on-failure --timeout 300) > "$log/gpu-tests.txt" 2>&1
echo "gpu tests exit $?"
grep -E "tests passed|tests failed|Skipped|Failed" "$log/gpu-tests.txt" | tail -n 6

db=$out/before-after.db
for turn in 1 2; do
  for side in old new; do
    bin=$old
    [ "$side" = new ] && bin=$new
    "$bin" ops --db "$db" "$@" > "$log/ops-$side-$turn.md" 2> "$log/ops-$side-$turn.err"
    echo "ops ($side, turn $turn) exit $?"
  done
done
# runs 1 and 3 are the old binary's, 2 and 4 the new one's
"$new" compare run:1,run:3 run:2,run:4 --db "$db" > "$log/compare.md" 2>&1
echo "compare old new exit $?"
"$new" compare run:1,run:3 run:2,run:4 --db "$db" --format json > "$log/compare.json" 2>&1
"$new" report --db "$db" --run 3 > "$log/report-old.md" 2>&1
"$new" report --db "$db" --run 4 > "$log/report-new.md" 2>&1
tail -n 25 "$log/compare.md"
tar czf "$out/all.tgz" -C "$out" logs before-after.db && rm -rf "$log" "$db"
