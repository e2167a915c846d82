#!/usr/bin/env bash
# device-gpu-tests.sh — the GPU tests at TP 2, 4 and 8 on a lent machine of one GPU (issue 28):
# for each degree N asked, `ctest -L tpN`, the entries NAME_tpN_shared (every rank on device 0,
# TPBENCH_TEST_SHARE_GPU=1, NCCL over loopback sockets; tests/gpu/gpu_harness.h), one line per
# degree (passed, failed, timed out, skipped, not run, and ctest's own summary line) and the
# failed ones named, every log (per degree: ctest -V's output, ctest's LastTest.log, the tests
# selected; summary.txt) tarred into $OUT/gpu-tests.tgz after each degree (a kill loses
# nothing finished).
#
# Time: the whole ends within GPU_TESTS_BUDGET_S seconds (default 480; a device command may run
# 600). Each degree gets an equal share of what is left when it starts (so time a fast degree
# leaves over goes to the next) as a deadline, ctest --stop-time: a test still running then is
# killed (ctest says Timeout), the ones after it are not started (counted "not run"). ctest
# --timeout would not do it: it only applies to tests without a TIMEOUT of their own, and every
# GPU test has one. N processes on one GPU are slow: one degree per call is the safe way,
# e.g. `... build 2`, then `... build 4`, then `... build 8`.
#
# usage: scripts/device-gpu-tests.sh BUILD_DIR [DEGREES]
#   DEGREES: 2, 4 and/or 8, space- or comma-separated [default: "2 4 8"]
#   after a build in the same device command, leave it room: GPU_TESTS_BUDGET_S=$((540 - SECONDS))
#   exit: 0 when every selected test passed or skipped, 1 otherwise (failed, timed out, not run,
#   a degree without tests), 2 on bad usage (a degree not 2, 4 or 8, a folder that is not a build)
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-gpu-tests.sh BUILD_DIR [DEGREES]}
degrees=${2:-2 4 8}
degrees=${degrees//,/ }
budget=${GPU_TESTS_BUDGET_S:-480}
read -ra asked <<< "$degrees"
if ((${#asked[@]} == 0)); then
  echo "device-gpu-tests.sh: no degree in '$2': each one of 2, 4, 8" >&2
  exit 2
fi
for degree in "${asked[@]}"; do
  case $degree in
    2 | 4 | 8) ;;
    *)
      echo "device-gpu-tests.sh: degree '$degree': each one of 2, 4, 8" >&2
      exit 2
      ;;
  esac
done
if [ ! -f "$build/CTestTestfile.cmake" ]; then
  echo "device-gpu-tests.sh: $build is not a build folder (no CTestTestfile.cmake)" >&2
  exit 2
fi
out=${OUT:-/tmp/tpbench-out}
# the logs live outside $OUT (which brings back a few files only) and travel in one tarball
work=$(mktemp -d "${TMPDIR:-/tmp}/tpbench-gpu-tests.XXXXXX")
log=$work/gpu-tests
mkdir -p "$log" "$out"
tp_device_env
tp_device_checkout_at_build_path "$build"
build=$(cd "$build" && pwd)
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv > "$log/host.txt" 2>&1


# The tests ctest selects for label tpN (one name per line).
selected_tests() {
  (cd "$build" && ctest -N -L "^tp$1\$") | sed -n 's/^ *Test *#[0-9]*: *//p'
}

# What ctest's progress lines (N/M Test #K: NAME ....   Passed) say of one status.
count_status() { # status-regex file
  grep -cE "^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*($1)" "$2"
}

# One line for a degree's run, then the failed and timed-out tests by name.
summarize() { # degree file seconds share selected
  local d=$1 file=$2 took=$3 share=$4 selected=$5 passed failed timeout skipped ran ctest_line
  passed=$(count_status ' Passed' "$file")
  failed=$(count_status '\*\*\*Failed|\*\*\*Exception|\*\*\*Not Run' "$file")
  timeout=$(count_status '\*\*\*Timeout' "$file")
  skipped=$(count_status '\*\*\*Skipped' "$file")
  ran=$((passed + failed + timeout + skipped))
  ctest_line=$(grep -E 'tests passed|No tests were found' "$file" | tail -n 1)
  echo "TP $d: $selected selected: $passed passed, $failed failed, $timeout timed out," \
    "$skipped skipped, $((selected - ran)) not run; ${took} s of a ${share} s share |" \
    "ctest: ${ctest_line:-no summary (killed?)}"
  grep -E '^ *[0-9]+/[0-9]+ Test .*\*\*\*(Failed|Timeout|Exception|Not Run)' "$file" | sed 's/^/    /'
}

# Each line prefixed with the seconds since the degree began (bash's clock, no extra tool); a
# last line without a newline (a killed ctest's) is kept, as it came.
stamp_lines() {
  local t0=${EPOCHREALTIME//[!0-9]/} line cs
  while IFS= read -r line; do
    cs=$(((${EPOCHREALTIME//[!0-9]/} - t0) / 10000))
    printf '%5d.%02d %s\n' $((cs / 100)) $((cs % 100)) "$line"
  done
  if [ -n "$line" ]; then
    cs=$(((${EPOCHREALTIME//[!0-9]/} - t0) / 10000))
    printf '%5d.%02d %s' $((cs / 100)) $((cs % 100)) "$line"
  fi
}

# The GPU's utilisation and memory, and the host's load, every 2 s while the tests run.
sample_load() {
  while :; do
    printf '%s load %s gpu %s\n' "$(date +%T)" "$(cut -d' ' -f1-3 /proc/loadavg)" \
      "$(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader 2>&1 | head -n 1)"
    sleep 2
  done
}
sample_load > "$log/load.txt" 2>&1 &
sampler=$!
trap 'kill "$sampler" 2> /dev/null' EXIT

start=$(date +%s)
deadline=$((start + budget))
read -ra todo <<< "$degrees"
rc=0
for ((i = 0; i < ${#todo[@]}; ++i)); do
  degree=${todo[i]}
  now=$(date +%s)
  share=$(((deadline - now) / (${#todo[@]} - i)))
  file=$log/tp$degree.txt
  selected=$(selected_tests "$degree" | tee "$log/tp$degree-tests.txt" | wc -l)
  if ((selected == 0)); then
    echo "TP $degree: no test labelled tp$degree in $build (a build without CUDA?)" |
      tee -a "$log/summary.txt"
    rc=1
    continue
  fi
  if ((share < 30)); then
    echo "TP $degree: $selected selected, not started: ${share} s left of the ${budget} s budget" |
      tee -a "$log/summary.txt"
    rc=1
    continue
  fi
  # a wall-clock time of day, as ctest --stop-time reads it (local time)
  stop=$(date -d "@$((now + share))" +%H:%M:%S)
  echo "== TP $degree: ctest -L '^tp$degree\$' --stop-time $stop ($share s)" > "$file"
  # a second copy with each line's arrival time, to see where a degree's minutes go
  (cd "$build" && ctest -L "^tp$degree\$" -V --stop-time "$stop") 2>&1 | tee -a "$file" |
    stamp_lines > "$log/tp$degree-stamped.txt"
  ctest_rc=${PIPESTATUS[0]}
  took=$(($(date +%s) - now))
  cp "$build/Testing/Temporary/LastTest.log" "$log/tp$degree-LastTest.log" 2> /dev/null
  summarize "$degree" "$file" "$took" "$share" "$selected" | tee -a "$log/summary.txt"
  ran=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: ' "$file")
  if ((ctest_rc != 0 || ran < selected)); then rc=1; fi
  # everything so far, in one file $OUT brings back even if a later degree is killed
  tar czf "$out/gpu-tests.tgz" -C "$work" gpu-tests
done
echo "gpu tests: exit $rc after $(($(date +%s) - start)) s (logs: gpu-tests.tgz)" |
  tee -a "$log/summary.txt"
tar czf "$out/gpu-tests.tgz" -C "$work" gpu-tests && rm -rf "$work"
exit "$rc"
