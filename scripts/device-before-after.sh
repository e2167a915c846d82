#!/usr/bin/env bash
# device-before-after.sh — one call on a lent GPU machine that checks a change
# claimed to leave behaviour alone: the GPU tests of the new build, then the
# same matrix of `tpbench ops` (or of `tpbench run` with TPBENCH_CMD=run) run by
# the old and the new binary in turns (old, new, old, new: TURNS=2) into one
# database, then `tpbench compare OLD NEW` on it and each side's last table.
# Logs and the database go to $OUT (all.tgz).
#
# usage: [TPBENCH_CMD=ops|run] [TURNS=N] scripts/device-before-after.sh OLD_TPBENCH NEW_BUILD_DIR [options...]
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
old=${1:?usage: device-before-after.sh OLD_TPBENCH NEW_BUILD_DIR [ops options]}
build=${2:?usage: device-before-after.sh OLD_TPBENCH NEW_BUILD_DIR [ops options]}
shift 2
new=$build/tpbench
cmd=${TPBENCH_CMD:-ops}
turns=${TURNS:-2}
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
for turn in $(seq 1 "$turns"); do
  for side in old new; do
    bin=$old
    [ "$side" = new ] && bin=$new
    "$bin" "$cmd" --db "$db" "$@" > "$log/$cmd-$side-$turn.md" 2> "$log/$cmd-$side-$turn.err"
    echo "$cmd ($side, turn $turn) exit $?"
  done
done
# odd runs are the old binary's, even ones the new one's
old_runs=$(seq -s, -f 'run:%g' 1 2 $((2 * turns)))
new_runs=$(seq -s, -f 'run:%g' 2 2 $((2 * turns)))
"$new" compare "$old_runs" "$new_runs" --db "$db" > "$log/compare.md" 2>&1
echo "compare old new exit $?"
"$new" compare "$old_runs" "$new_runs" --db "$db" --format json > "$log/compare.json" 2>&1
"$new" report --db "$db" --run $((2 * turns - 1)) > "$log/report-old.md" 2>&1
"$new" report --db "$db" --run $((2 * turns)) > "$log/report-new.md" 2>&1
tail -n 25 "$log/compare.md"
tar czf "$out/all.tgz" -C "$out" logs before-after.db && rm -rf "$log" "$db"
