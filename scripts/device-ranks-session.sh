#!/usr/bin/env bash
# device-ranks-session.sh — a whole session's checks in one call on a
# machine of ONE GPU, in two phases:
#   1. on the quiet card, the jobs whose timings are reported: the main job
#      (scripts/device-main-job.sh) and the demo database
#      (scripts/device-demo-db.sh), each under its own time cap;
#   2. side by side under one deadline, the checks whose timings mean
#      nothing (ranks share the GPU, TPBENCH_TEST_SHARE_GPU=1): the GPU tests
#      at TP 8 and 4 (device-gpu-tests.sh, one degree a lane), the coverage
#      matrix (device-coverage.sh), gpu_gemm_rows, and in one lane the GPU
#      tests at TP 2 then the link probe's per-call costs at 2, 4 and 8 ranks
#      (device-link-costs.sh).
# Every part writes into a folder of its own under $OUT; each folder is
# archived as it ends, so a kill loses only what was running.
#
# usage: scripts/device-ranks-session.sh BUILD_DIR [SECONDS]   (default 560)
#   PHASE1_S caps phase 1 (default 130 s; 0 skips it); GPU_TEST_DEGREES the degrees of the
#   GPU tests' own lanes (default "8 4"); LINK_COSTS=0 leaves out the lane of the TP 2 GPU
#   tests and the link costs.
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-ranks-session.sh BUILD_DIR [SECONDS]}
budget=${2:-560}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-/tmp/tpbench-out}
mkdir -p "$out"
tp_device_env
tp_device_checkout_at_build_path "$build"
start=$(date +%s)
end=$((start + budget))
left() { echo $((end - $(date +%s))); }

# part NAME SECONDS CMD...: CMD with OUT=$out/NAME, under a cap; archived after.
part() {
  local name=$1 cap=$2
  shift 2
  mkdir -p "$out/$name"
  local t0
  t0=$(date +%s)
  OUT=$out/$name timeout -k 5 "$cap" "$@" > "$out/$name/stdout.txt" 2>&1
  echo "== $name: exit $? in $(($(date +%s) - t0)) s"
  tail -n 40 "$out/$name/stdout.txt"
  tar czf "$out/$name.tgz" -C "$out" "$name" && rm -rf "${out:?}/$name"
}

nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
phase1=${PHASE1_S:-130} # 0: no phase 1
p1_end=$((start + phase1))
if ((phase1 > 0)) && [ -f "$here/device-main-job.sh" ]; then
  part main-job $((p1_end - $(date +%s) > 20 ? p1_end - $(date +%s) : 20)) \
    bash "$here/device-main-job.sh" "$build"
fi
if ((phase1 > 0)) && [ -f "$here/device-demo-db.sh" ] && (($(date +%s) < p1_end)); then
  part demo-db $((p1_end - $(date +%s) + 30)) bash "$here/device-demo-db.sh" "$build"
fi

# Phase 2: what is left, less the archive's time.
p2=$(($(left) - 25))
echo "== phase 2: $p2 s"
part gemm-rows 120 bash -c "cd '$build' && ctest -R '^gpu_gemm_rows\$' -V" &
for degree in ${GPU_TEST_DEGREES:-8 4}; do
  GPU_TESTS_BUDGET_S=$((p2 - 10)) part "gpu-tests-tp$degree" "$p2" \
    bash "$here/device-gpu-tests.sh" "$build" "$degree" &
done
part coverage "$p2" bash "$here/device-coverage.sh" "$build" $((p2 - 5)) &
if [ "${LINK_COSTS:-1}" = 1 ]; then
  (
    GPU_TESTS_BUDGET_S=$((p2 * 2 / 3)) part gpu-tests-tp2 $((p2 * 2 / 3 + 5)) \
      bash "$here/device-gpu-tests.sh" "$build" 2
    part link-costs $(($(left) - 20)) bash "$here/device-link-costs.sh" "$build"
  ) &
fi
wait
echo "session: $(($(date +%s) - start)) s"
