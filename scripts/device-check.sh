#!/usr/bin/env bash
# device-check.sh — one whole check on a lent GPU machine, in one call:
# the GPU tests, then the op benchmark, with every log under $OUT.
#
# The build folder is made on the CPU machine and carried along; ctest's
# files hold that machine's absolute paths, so the checkout is made visible
# at the same path here before ctest runs.
#
# usage: scripts/device-check.sh BUILD_DIR [tpbench ops options...]
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-check.sh BUILD_DIR [ops options]}
shift
out=${OUT:-/tmp/tpbench-out}
mkdir -p "$out"
tp_device_env
tp_device_checkout_at_build_path "$build"

{
  echo "== host"; hostname; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  echo "== topology"; nvidia-smi topo -m
  echo "== libraries"; ldd "$build/tpbench" | grep -E "cuda|cublas|nccl|cupti|sqlite|jansson|cmocka" || true
} 2>&1 | tee "$out/host.txt"

echo "== gpu tests"
(cd "$build" && ctest -L gpu -V --timeout 600) 2>&1 | tee "$out/gpu-tests.txt"
tests_rc=${PIPESTATUS[0]}

echo "== ops"
"$build/tpbench" ops --db "$out/tpbench.db" "$@" 2>"$out/ops-progress.txt" | tee "$out/ops-table.md"
ops_rc=${PIPESTATUS[0]}
tail -n 5 "$out/ops-progress.txt"
echo "gpu tests exit $tests_rc, ops exit $ops_rc"
exit $(( tests_rc != 0 || ops_rc != 0 ))
