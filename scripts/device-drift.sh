#!/usr/bin/env bash
# device-drift.sh — `tpbench drift` on a lent GPU machine, in one call: the
# drift GPU test (gpu_drift), then drift runs of the default recipe (AdamW,
# 10 steps, stock twice, then dist_gemm ce with each rs_sum) on the 8B block
# and on a stack of two debug blocks trained on one batch, each table read
# back with --show; every log and the database under $OUT.
#
# On one GPU (TP 1) the dist_gemm configurations are rejected by the plan
# (no peer) and the tables show stock against stock; on two (`--gpus 2`) the
# dist_gemm rows appear, rs_sum=nccl expected bit-identical to stock.
#
# The build folder is made on the CPU machine and carried along (at least
# tpbench, tests/gpu/gpu_drift, lib/ and CMakeCache.txt); its binaries hold
# that machine's absolute paths (cmocka's rpath), so the checkout is made
# visible at the same path here first.
#
# usage: scripts/device-drift.sh BUILD_DIR [--gpus N] [more tpbench drift options]
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-drift.sh BUILD_DIR [--gpus N] [drift options]}
shift
out=${OUT:-/tmp/tpbench-out}
mkdir -p "$out"
tp_device_env
tp_device_checkout_at_build_path "$build"
db="$out/drift.db"

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$out/host.txt"

echo "== gpu_drift"
# The test binary itself (ctest's files are not needed: the script can run with only the
# binaries, build/lib and CMakeCache.txt carried).
"$build/tests/gpu/gpu_drift" 2>&1 | tee "$out/gpu-drift.txt"
test_rc=${PIPESTATUS[0]}

# One drift run: its table on stdout (also a file), progress on stderr; then
# the same table read back from the database must be the same bytes.
drift() {
  local name=$1
  shift
  echo "== drift $name: $*"
  "$build/tpbench" drift --db "$db" "$@" 2>"$out/$name-progress.txt" | tee "$out/$name.md"
  local rc=${PIPESTATUS[0]}
  cat "$out/$name-progress.txt"
  "$build/tpbench" drift --show latest --db "$db" >"$out/$name-show.md"
  if ! cmp -s "$out/$name.md" "$out/$name-show.md"; then
    echo "drift $name: --show printed another table"
    rc=1
  fi
  echo "drift $name exit $rc"
  return "$rc"
}

drift 8b-block "$@"
block_rc=$?
drift debug-stack --model debug --layer block --layers 2 --seqlen 256 --batch 2 --same-batch "$@"
stack_rc=$?
"$build/tpbench" runs --db "$db" | tee "$out/runs.md"
echo "gpu_drift exit $test_rc, drift 8b-block exit $block_rc, drift debug-stack exit $stack_rc"
exit $(( test_rc != 0 || block_rc != 0 || stack_rc != 0 ))
