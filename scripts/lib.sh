# shellcheck shell=bash
# scripts/lib.sh — sourced by setup.sh, test.sh, run.sh, fuzz.sh and the
# device-*.sh scripts: where the repository is, whether a CUDA compiler is
# there, the CMake flags that follow from it, and the set-up of a lent GPU
# machine.

# The repository root (the folder above scripts/).
tp_repo_root() { (cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd); }

# Prints the path of nvcc (PATH first, then the toolkit's usual home); fails
# if there is none.
tp_nvcc() {
  if command -v nvcc 2>/dev/null; then return 0; fi
  if [ -x /usr/local/cuda/bin/nvcc ]; then echo /usr/local/cuda/bin/nvcc; return 0; fi
  return 1
}

# CMake flags for the CUDA side: on with the found nvcc, off without one.
tp_cuda_cmake_flags() {
  local nvcc
  if nvcc=$(tp_nvcc); then
    echo "-DTPBENCH_WITH_CUDA=ON -DCMAKE_CUDA_COMPILER=$nvcc"
  else
    echo "-DTPBENCH_WITH_CUDA=OFF"
  fi
}

# Parallel build jobs.
tp_jobs() { nproc 2>/dev/null || echo 2; }

# On a lent GPU machine: NVLink multicast (NVLS) stays off in NCCL, PyTorch
# and NVSHMEM, which that machine's fabric does not offer.
tp_device_env() {
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
}

# A build folder made on the CPU machine and carried along holds that
# machine's absolute paths in ctest's files: makes this checkout visible at
# the same path. $1: the build folder.
tp_device_checkout_at_build_path() {
  local src_abs
  src_abs=$(grep -m1 '^CMAKE_HOME_DIRECTORY' "$1/CMakeCache.txt" | cut -d= -f2)
  if [ -n "$src_abs" ] && [ ! -e "$src_abs" ]; then
    mkdir -p "$(dirname "$src_abs")" && ln -s "$PWD" "$src_abs"
  fi
}

# One step of a device script: runs CMD, its output into WORK/NAME.txt and
# onto SUMMARY between "== NAME" lines; returns CMD's status.
# usage: tp_device_step WORK SUMMARY NAME CMD...
tp_device_step() {
  local work=$1 summary=$2 name=$3
  shift 3
  echo "== $name: $*" | tee -a "$summary"
  "$@" >"$work/$name.txt" 2>&1
  local rc=$?
  cat "$work/$name.txt" >>"$summary"
  echo "== $name exit $rc" | tee -a "$summary"
  return "$rc"
}
