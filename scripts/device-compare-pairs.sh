#!/usr/bin/env bash
# device-compare-pairs.sh — the compare gate's false-positive and detection
# rates, measured: N triples of back-to-back `tpbench ops` runs of one
# binary on one matrix — base, base again, then base with the test knob
# TPBENCH_TEST_DIST_DELAY_US=DELAY (every fused op slowed by DELAY µs) —
# each triple in its own database; `compare run:1 run:2` (identical code,
# no verdict expected) and `compare run:2 run:3` (slowed: a regression
# expected) per triple. Prints one line per compare with its exit status;
# databases and logs are tarred under $OUT (pairs.tgz). Stops starting new
# triples after BUDGET_S seconds (default 420), so one device call holds it.
#
# usage: [BUDGET_S=S] scripts/device-compare-pairs.sh BUILD_DIR N DELAY_US [ops options...]
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-compare-pairs.sh BUILD_DIR N DELAY_US [ops options]}
pairs=${2:?usage: device-compare-pairs.sh BUILD_DIR N DELAY_US [ops options]}
delay=${3:?usage: device-compare-pairs.sh BUILD_DIR N DELAY_US [ops options]}
shift 3
budget=${BUDGET_S:-420}
tp=$build/tpbench
out=${OUT:-/tmp/tpbench-out}
dir=$out/pairs
mkdir -p "$dir"
tp_device_env
t0=$(date +%s)
identical_flagged=0
slowed_flagged=0
done_pairs=0
for i in $(seq 1 "$pairs"); do
  if [ $(($(date +%s) - t0)) -gt "$budget" ]; then
    echo "budget of ${budget} s spent: stopped before triple $i"
    break
  fi
  db=$dir/triple-$i.db
  "$tp" ops --db "$db" --quiet "$@" > "$dir/base1-$i.md" 2> "$dir/base1-$i.err"
  r1=$?
  "$tp" ops --db "$db" --quiet "$@" > "$dir/base2-$i.md" 2> "$dir/base2-$i.err"
  r2=$?
  TPBENCH_TEST_DIST_DELAY_US=$delay "$tp" ops --db "$db" --quiet "$@" > "$dir/slow-$i.md" \
    2> "$dir/slow-$i.err"
  r3=$?
  "$tp" compare run:1 run:2 --db "$db" > "$dir/compare-identical-$i.md" 2>&1
  ci=$?
  "$tp" compare run:2 run:3 --db "$db" > "$dir/compare-slowed-$i.md" 2>&1
  cs=$?
  [ "$ci" -eq 1 ] && identical_flagged=$((identical_flagged + 1))
  [ "$cs" -eq 1 ] && slowed_flagged=$((slowed_flagged + 1))
  done_pairs=$i
  echo "triple $i: ops exits $r1 $r2 $r3; compare identical exit $ci, slowed exit $cs" \
    "($(($(date +%s) - t0)) s)"
done
echo "identical pairs flagged: $identical_flagged of $done_pairs;" \
  "slowed pairs flagged: $slowed_flagged of $done_pairs (delay ${delay} us)"
tar czf "$out/pairs.tgz" -C "$out" pairs && rm -rf "$dir"
