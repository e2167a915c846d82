# shellcheck shell=bash
# scripts/lib.sh — sourced by setup.sh, test.sh and run.sh: where the
# repository is, whether a CUDA compiler is there, and the CMake flags that
# follow from it.

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
