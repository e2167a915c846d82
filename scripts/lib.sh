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

# Measures alone on this host's first GPU every GEMM `tpbench project` estimates for a request
# (its `--gemms` list, exact 0: no row of that shape), so that the request then reads each one
# exactly: per dtype, `ops --tp 1 --shape M,N,K,OP` runs whose shape list stays under the
# axis's 511 characters, into WRITE_DB. WORK gets the list (gemms.csv), the shapes
# (estimated.txt: "DTYPE M,N,K,OP" once each) and the ops output (measure-gemms.log).
# usage: tp_measure_estimated_gemms BIN READ_DB WRITE_DB WORK PROJECT_OPTIONS...
#   returns 1 if project or an ops run failed
tp_measure_estimated_gemms() {
  local bin=$1 read_db=$2 write_db=$3 work=$4
  shift 4
  "$bin" project --db "$read_db" "$@" --gemms >"$work/gemms.csv" || return 1
  # fields 6-10 and 13 come before the quoted source
  awk -F, 'NR > 1 && $13 == 0 { print $6, $7 "," $8 "," $9 "," $10 }' "$work/gemms.csv" |
    sort -u >"$work/estimated.txt"
  : >"$work/measure-gemms.log"
  local rc=0 dtype shape current="" length=0 batch=()
  while read -r dtype shape <&3; do
    if ((${#batch[@]})) && { [ "$dtype" != "$current" ] || ((length + ${#shape} + 1 > 480)); }; then
      tp_ops_shapes "$bin" "$write_db" "$current" "$work/measure-gemms.log" "${batch[@]}" || rc=1
      batch=()
      length=0
    fi
    current=$dtype
    batch+=("$shape")
    length=$((length + ${#shape} + 1))
  done 3<"$work/estimated.txt"
  if ((${#batch[@]})); then
    tp_ops_shapes "$bin" "$write_db" "$current" "$work/measure-gemms.log" "${batch[@]}" || rc=1
  fi
  return "$rc"
}

# `tpbench ops` as GEMM rates are measured: one GPU, TP 1 (the GEMM alone and stock), forward,
# plain stock, 5 warm-up and 20 measured iterations in 2 rounds, quiet; ARGS say what (models
# and tokens, or shapes, and the database).
# usage: tp_ops_gemms BIN ARGS...
tp_ops_gemms() {
  local bin=$1
  shift
  "$bin" ops --gpus 1 --tp 1 --pass fwd --stock plain --warmup 5 --iters 20 --rounds 2 --quiet "$@"
}

# One `ops` run of bare GEMM shapes in DTYPE, into DB; its output appended to LOG.
# usage: tp_ops_shapes BIN DB DTYPE LOG SHAPE...
tp_ops_shapes() {
  local bin=$1 db=$2 dtype=$3 log=$4 one args=()
  shift 4
  for one in "$@"; do args+=(--shape "$one"); done
  echo "== ops --dtype $dtype, $# shapes" >>"$log"
  tp_ops_gemms "$bin" --dtype "$dtype" "${args[@]}" --db "$db" >>"$log" 2>&1 </dev/null
}
