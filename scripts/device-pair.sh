#!/usr/bin/env bash
# device-pair.sh — what only two GPUs can show, as four device calls of at
# most ten minutes each on the H200 pair (nvidia-h200-x2). Each call runs its
# steps in order, each under its own time cap, each step's folder tarred as
# $OUT/NAME.tgz, and prints every step's exit status and tail. The caps keep
# a call inside the device's limit when a step hangs; a step that hits its
# cap exits 124 and the next one still runs.
#
#   1  correctness at TP 2: every GPU test (their TP 2 halves run on two GPUs),
#      the planted one-rank allocation failure and the hung drift peer
#   2  issue 18 and 15 figures: the window stock at TP 2, symm=ipc against
#      symm=nccl on the default shapes, fp8 communication at TP 2 (ops, then
#      the layers' forward)
#   3  issue 16 figures: dp 2 x tp 1 and fsdp_traffic at TP 2, drift in both
#      reduction modes, ac and graph=mixed with dist_gemm
#   4  the earlier issues' pair runs: trust, faults, the torchrun profile
#   5  issue 15's fp8 backward at TP 2: its GPU tests, `ops` and `run` at
#      fwd+bwd over fp8, fp8-row, fp8-block (device-fp8-bwd.sh)
#
# (Without the pair, TPBENCH_TEST_SHARE_GPU=1 runs the TP 2 code paths on
# one GPU: `TPBENCH_TEST_SHARE_GPU=1 ctest -L gpu`, device-fp8-bwd.sh --gpus 1;
# correctness only, never timings.)
#
# usage: scripts/device-pair.sh BUILD_DIR CALL   (CALL 1..5)
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-pair.sh BUILD_DIR CALL}
call=${2:?usage: device-pair.sh BUILD_DIR CALL (1..5)}
here=$(dirname "${BASH_SOURCE[0]}")
out=${OUT:-/tmp/tpbench-out}
mkdir -p "$out"
tp_device_env
tp_device_checkout_at_build_path "$build"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
echo "GPUs visible: $gpus"
[ "$gpus" -ge 2 ] || echo "warning: fewer than 2 GPUs: the TP 2 halves will skip"

rc=0
# step NAME CAP_S COMMAND...: the command with OUT set to the step's folder
step() {
  local name=$1 cap=$2
  shift 2
  local dir=$out/$name start
  mkdir -p "$dir"
  start=$(date +%s)
  OUT=$dir timeout "$cap" "$@" > "$dir/stdout.txt" 2>&1
  local step_rc=$?
  echo "== $name exit $step_rc in $(($(date +%s) - start)) s (cap $cap s)"
  tail -n 20 "$dir/stdout.txt"
  tar czf "$out/$name.tgz" -C "$out" "$name" && rm -rf "$dir"
  rc=$((rc || step_rc))
}

case $call in
  1)
    step gpu-tests 330 bash -c "cd '$build' && ctest -L gpu --output-on-failure --timeout 300"
    step agree 90 bash "$here/device-agree.sh" "$build" --gpus 2
    step fp8-comm-tests 120 bash -c "cd '$build' && ctest -R gpu_fp8_comm -V --timeout 100"
    ;;
  2)
    step stock-window 150 bash "$here/device-stock-window.sh" "$build" --tp 2
    step symm-nccl 240 bash "$here/device-symm-nccl.sh" "$build" --gpus 2
    step fp8-comm 180 bash "$here/device-fp8-comm.sh" "$build" --gpus 2
    step fp8-layers 150 bash "$here/device-fp8-layers.sh" "$build" --gpus 2
    ;;
  3)
    step fsdp 180 bash "$here/device-fsdp.sh" "$build" --gpus 2
    step drift 120 bash "$here/device-drift.sh" "$build" --gpus 2
    step ac 120 bash "$here/device-ac.sh" "$build" --gpus 2 --axis backend=stock,dist_gemm
    step graph-sizes 120 bash "$here/device-graph-sizes.sh" "$build" --gpus 2
    ;;
  4)
    step trust 200 bash "$here/device-trust.sh" "$build" --gpus 2
    step faults 150 bash "$here/device-faults.sh" "$build"
    step profile 180 bash "$here/device-profile.sh" "$build" 2
    ;;
  5)
    step fp8-bwd 500 bash "$here/device-fp8-bwd.sh" "$build" --gpus 2
    ;;
  *)
    echo "device-pair.sh: CALL must be 1 to 5, not '$call'" >&2
    exit 2
    ;;
esac
exit "$rc"
