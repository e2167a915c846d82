#!/usr/bin/env bash
# device-agree.sh — the review's three reliability hazards on a lent GPU
# machine, in one call (docs/dev/NOTES.md, "Left open, seen in the review", now
# done): gpu_agree (the ledger counting NCCL windows, or NCCL 2.28.3's
# refusal at one rank asserted; the planted one-rank allocation failure,
# TPBENCH_TEST_FAIL_ALLOC, failing every rank's window, workspace and `ops`
# configuration alike within seconds; `tpbench drift`'s watchdog ending a
# planted hung step, TPBENCH_TEST_HANG_STEP, with the finished steps
# stored), then the GPU tests of the code it changed (gpu_stock_window:
# the window allocation; gpu_drift: the training loop). Every log under $OUT.
#
# On one GPU (TP 1) gpu_agree's TP 2 cases report skipped with a message;
# `--gpus 2` on the pair runs them. The build folder is made on the CPU
# machine and carried along (at least tpbench, tests/gpu/gpu_agree,
# gpu_stock_window, gpu_drift, lib/ and CMakeCache.txt); its binaries hold
# that machine's absolute paths (cmocka's rpath), so the checkout is made
# visible at the same path here first.
#
# usage: scripts/device-agree.sh BUILD_DIR [--gpus N]
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-agree.sh BUILD_DIR [--gpus N]}
shift
gpus=1
if [[ ${1:-} == --gpus ]]; then
  gpus=${2:?--gpus needs a number}
  shift 2
fi
[[ $# -eq 0 ]] || { echo "device-agree.sh: unexpected arguments: $*" >&2; exit 2; }
out=${OUT:-/tmp/tpbench-out}
mkdir -p "$out"
tp_device_env
tp_device_checkout_at_build_path "$build"
CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((gpus - 1)))
export CUDA_VISIBLE_DEVICES

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$out/host.txt"

rc=0
for t in gpu_agree gpu_stock_window gpu_drift; do
  echo "== $t (CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES)"
  start=$(date +%s)
  "$build/tests/gpu/$t" > "$out/$t.txt" 2>&1
  t_rc=$?
  tail -n 40 "$out/$t.txt"
  echo "== $t exit $t_rc in $(($(date +%s) - start)) s"
  [[ $t_rc -eq 0 ]] || rc=1
done
exit "$rc"
