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
build=${1:?usage: device-check.sh BUILD_DIR [ops options]}
shift
out=${OUT:-/tmp/tpbench-out}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

src_abs=$(grep -m1 '^CMAKE_HOME_DIRECTORY' "$build/CMakeCache.txt" | cut -d= -f2)
if [ -n "$src_abs" ] && [ ! -e "$src_abs" ]; then
  mkdir -p "$(dirname "$src_abs")" && ln -s "$PWD" "$src_abs"
fi

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
