#!/usr/bin/env bash
# fuzz.sh [SECONDS [TARGET...]] — builds the libFuzzer targets of tests/fuzz/
# in build-fuzz/ (clang, -DTPBENCH_FUZZ=ON, CUDA off) and runs each (or the
# TARGETs named) for SECONDS (default 20) from its seed corpus,
# tests/fuzz/corpus/<target>/. New inputs go to
# build-fuzz/corpus/<target>/ (kept between runs; the seeds are only read),
# crashes to build-fuzz/artifacts/. Fails on any crash, leak, timeout (10 s
# for one input) or out-of-memory, printing the end of that target's log.
#
#   bash scripts/fuzz.sh                 # every target, 20 s each (test.sh)
#   bash scripts/fuzz.sh 3600 fuzz_cli   # one target, an hour
#   FUZZ_JOBS=2 bash scripts/fuzz.sh 600 # two processes per target
#   FUZZ_PARALLEL=2 bash scripts/fuzz.sh # two targets at a time (test.sh: one per core)
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(tp_repo_root)" || exit 1

seconds=${1:-20}
shift || true
targets=("$@")
jobs=${FUZZ_JOBS:-1}
parallel=${FUZZ_PARALLEL:-1}

# Longest input per target: room for the seeds (a small database is ~40 KiB).
max_len() {
  case $1 in
    fuzz_store_open) echo 131072 ;;
    fuzz_matrix_file) echo 16384 ;;
    *) echo 4096 ;;
  esac
}

build() {
  CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DTPBENCH_WITH_CUDA=OFF \
    -DTPBENCH_FUZZ=ON >/dev/null &&
    cmake --build build-fuzz -j "$(tp_jobs)" --target tp_fuzz_targets
}

# Runs one target; prints "TARGET: N inputs in S s" and returns its status.
run_target() {
  local t=$1 exe=build-fuzz/fuzz/$1 log=build-fuzz/logs/$1.log
  [ -x "$exe" ] || { echo "$t: not built"; return 1; }
  mkdir -p "build-fuzz/corpus/$t" build-fuzz/artifacts build-fuzz/logs
  local flags=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len="$(max_len "$t")"
               -close_fd_mask=3 -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$t-")
  [ "$jobs" -le 1 ] || flags+=(-fork="$jobs" -ignore_crashes=0)
  "$exe" "${flags[@]}" "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1
  local rc=$?
  local runs
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' |
    awk '{s += $1} END {print s + 0}')
  echo "$t: $runs inputs in $seconds s, exit $rc (log $log)"
  if [ $rc -ne 0 ]; then
    tail -n 40 "$log"
    return 1
  fi
}

build || exit 1
# Default: every target this tree built (tests/fuzz/CMakeLists.txt says which
# it leaves out and why).
if [ ${#targets[@]} -eq 0 ]; then
  for exe in build-fuzz/fuzz/fuzz_*; do [ -x "$exe" ] && targets+=("$(basename "$exe")"); done
fi
# FUZZ_PARALLEL targets at a time, each for the whole SECONDS; their reports
# printed in the targets' order.
status=0
mkdir -p build-fuzz/logs
for ((i = 0; i < ${#targets[@]}; i += parallel)); do
  pids=()
  for t in "${targets[@]:i:parallel}"; do
    run_target "$t" >"build-fuzz/logs/$t.report" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  for t in "${targets[@]:i:parallel}"; do cat "build-fuzz/logs/$t.report"; done
done
exit $status
