#!/usr/bin/env bash
# device-gemm-gaps.sh — stock's pace factor on a lent GPU machine, everything under $OUT:
# `tpbench link --gpus 1` (only the GEMMs between gaps: bench/gpu/link_pacing.h) twice, so the
# two runs can be put side by side; the GPU tests of the probe (gpu_link at TP 1 and TP 2
# sharing the GPU) and of the quantizer (gpu_quant); then `tpbench project` on the sample
# (examples/tpbench-h200-sample.db with examples/tpbench-h200-tp1-gemm.db) with and without the
# probe: the TP 2 validation's error summary both ways and the TP 4/8 prediction. project reads
# the probe only when it ran on the GEMM rows' GPU (the sample's: an H200); elsewhere the
# summary says it was not read, and the validation is unchanged.
#
# The probe runs first, alone on the GPU: a GEMM beside other work would not time its clock.
# $OUT brings back few files: the databases and logs go into gemm-gaps.tgz, beside summary.md.
#
# usage: scripts/device-gemm-gaps.sh BUILD_DIR
#   GPU_TESTS=0 leaves the GPU tests out (they take most of the ~300 s; the probe and project
#   take under a minute) for a call on little device time.
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-gemm-gaps.sh BUILD_DIR}
out=${OUT:-/tmp/tpbench-out}
work="$out/gemm-gaps"
mkdir -p "$work"
tp_device_env
tp_device_checkout_at_build_path "$build"
repo=$(tp_repo_root)
tpbench="$build/tpbench"
summary="$out/summary.md"
: >"$summary"
status=0

nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv 2>&1 |
  tee "$work/host.txt" >>"$summary"

# step NAME CMD...: CMD's output into NAME.txt and the summary; a failure fails the script.
step() { tp_device_step "$work" "$summary" "$@" || status=1; }

step probe-1 timeout 120 "$tpbench" link --gpus 1 --db "$work/gemm-gaps.db"
step probe-2 timeout 120 "$tpbench" link --gpus 1 --db "$work/gemm-gaps.db"
if [ "${GPU_TESTS:-1}" != 0 ]; then
  step gpu-link timeout 200 "$build/tests/gpu/gpu_link" --tp 1
  TPBENCH_TEST_SHARE_GPU=1 step gpu-link-tp2 timeout 200 "$build/tests/gpu/gpu_link" --tp 2
  step gpu-quant timeout 300 "$build/tests/gpu/gpu_quant"
else
  echo "== GPU tests left out (GPU_TESTS=0)" | tee -a "$summary"
fi

# The sample with the single-GPU GEMMs, with and without the probe.
base="$work/sample-tp1.db"
cp "$repo/examples/tpbench-h200-sample.db" "$base"
"$tpbench" import "$repo/examples/tpbench-h200-tp1-gemm.db" --db "$base" >/dev/null
paced="$work/sample-tp1-paced.db"
cp "$base" "$paced"
"$tpbench" import "$work/gemm-gaps.db" --db "$paced" >/dev/null
step validation-p1 "$tpbench" project --db "$base" --tp 2 --gemm-tp 1
step validation-paced "$tpbench" project --db "$paced" --tp 2 --gemm-tp 1
step prediction-paced "$tpbench" project --db "$paced" --tp 4,8 --gemm-tp 1 --models 8b,70b,405b \
  --tokens 4096,8192,16384,32768 --format csv
grep -h '^Error at TP\|GEMMs between gaps (stock' "$work"/validation-*.txt | tee -a "$summary"

tar czf "$out/gemm-gaps.tgz" -C "$out" gemm-gaps
exit "$status"
