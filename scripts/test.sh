#!/usr/bin/env bash
# test.sh — every check of the project: set-up; configure, build and run all
# tests in build/ (GPU tests skip where there is no GPU); the CPU tests again
# under AddressSanitizer and UBSan in build-asan/; each libFuzzer target of
# tests/fuzz/ for 20 s in build-fuzz/ (scripts/fuzz.sh); clang-format over the
# C/CUDA sources; clang-tidy over the host C sources of
# build/compile_commands.json. A failing step does not stop the later ones;
# the summary lists the failures and the exit status is non-zero if any.
#
# The checks run in four lanes side by side, so that a core one lane leaves
# idle (a test waiting on a timeout, a link, a serial step) does another's
# work: (1) build/ and its tests, (2) build-asan/ and its tests, (3) the fuzz
# targets once both builds are done (a fuzzer runs for a fixed time and fails
# an input slower than 10 s, so it must not starve behind compilers), (4)
# clang-format, then clang-tidy once build/ is built, at a lower priority than
# the tests. ctest runs its tests in parallel (GPU tests one at a time:
# RESOURCE_LOCK gpu). Each step's output goes to build-logs/STEP.log and is
# printed when the step ends. TPBENCH_TEST_LANES=1 runs the steps one after
# another instead, as before.
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(tp_repo_root)" || exit 1

bash scripts/setup.sh || exit 1

jobs=$(tp_jobs)
# ctest slots: twice the cores, since many tests wait (timeouts, child
# processes, a browser) more than they compute
test_jobs=$((jobs * 2))
logs="build-logs"
rm -rf "$logs" && mkdir -p "$logs"
t0=$(date +%s)

# step NAME CMD...: runs CMD with its output in $logs/NAME.log, records the
# status in $logs/NAME.status, and prints the log when it ends.
step() {
  local name=$1 file
  shift
  file=$logs/$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_')
  local start status
  start=$(date +%s)
  "$@" >"$file.log" 2>&1
  status=$?
  echo "$status" >"$file.status"
  local verdict=ok
  [ $status -eq 0 ] || verdict=FAILED
  # one block per step, printed whole (lanes end in any order)
  {
    echo "== $name"
    cat "$file.log"
    echo "== $name: $verdict ($(($(date +%s) - start)) s, at $(($(date +%s) - t0)) s)"
  } | flock "$logs" cat
  return $status
}

# shellcheck disable=SC2046 # the flags are meant to split
build_plain() {
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo $(tp_cuda_cmake_flags) &&
    cmake --build build -j "$jobs"
}
test_plain() { (cd build && ctest --output-on-failure -j "$test_jobs"); }

build_asan() {
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTPBENCH_SANITIZE=ON -DTPBENCH_WITH_CUDA=OFF &&
    cmake --build build-asan -j "$jobs"
}
# The documentation's tests (label docs: the pages' commands against the
# binary's output) run in build/; the sanitized binary's commands are the other
# CPU tests' work.
test_asan() { (cd build-asan && ctest --output-on-failure -L cpu -LE docs -j "$test_jobs"); }

# Keeps the fuzz targets alive: a short, fixed budget each (scripts/fuzz.sh),
# as many targets at once as there are cores.
fuzz_short() { FUZZ_PARALLEL=$jobs bash scripts/fuzz.sh 20; }

format_check() {
  git ls-files -z --cached --others --exclude-standard -- '*.c' '*.h' '*.cu' '*.cuh' |
    xargs -0 -r clang-format --dry-run --Werror
}

# Host C files of this repository (not generated ones under build*/).
host_c_files() {
  local root
  root=$(pwd)
  grep -o '"file": *"[^"]*\.c"' build/compile_commands.json |
    sed 's/^"file": *"\(.*\)"$/\1/' |
    grep "^$root/" | grep -v "^$root/build" | sort -u
}

tidy_check() {
  [ -f build/compile_commands.json ] || { echo "no build/compile_commands.json"; return 1; }
  host_c_files | nice -n 10 xargs -r -P "$jobs" -n 1 clang-tidy -p build --quiet \
    --extra-arg=-Wno-unknown-warning-option
}

# Tests run only where their build succeeded; clang-tidy reads what build/
# generates (compile_commands.json, generated headers), so it waits for it.
lane_plain() {
  if step "build (build/)" build_plain; then
    touch "$logs/plain-built"
    step "tests (build/)" test_plain
  else
    touch "$logs/plain-built"
  fi
}
lane_asan() {
  if step "build (build-asan/)" build_asan; then
    touch "$logs/asan-built"
    step "sanitizer tests (build-asan/)" test_asan
  else
    touch "$logs/asan-built"
  fi
}
lane_fuzz() {
  while [ ! -e "$logs/plain-built" ] || [ ! -e "$logs/asan-built" ]; do sleep 2; done
  step "fuzz (build-fuzz/)" fuzz_short
}
lane_lint() {
  step "clang-format" format_check
  while [ ! -e "$logs/plain-built" ]; do sleep 2; done
  step "clang-tidy" tidy_check
}

if [ "${TPBENCH_TEST_LANES:-4}" = 1 ]; then
  lane_plain
  lane_asan
  lane_fuzz
  lane_lint
else
  lane_plain &
  lane_asan &
  lane_fuzz &
  lane_lint &
  wait
fi

failed=()
for name in "build (build/)" "tests (build/)" "build (build-asan/)" "sanitizer tests (build-asan/)" \
  "fuzz (build-fuzz/)" "clang-format" "clang-tidy"; do
  file=$logs/$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_')
  [ -f "$file.status" ] || continue # not run: its build failed
  [ "$(cat "$file.status")" = 0 ] || failed+=("$name")
done
for build in "build (build/)" "build (build-asan/)"; do
  file=$logs/$(echo "$build" | tr -c 'a-zA-Z0-9\n' '_')
  [ -f "$file.status" ] || failed+=("$build")
done

echo "test.sh: $(($(date +%s) - t0)) s on $jobs cores (load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
if [ ${#failed[@]} -ne 0 ]; then
  echo "test.sh: FAILED: ${failed[*]}"
  exit 1
fi
echo "test.sh: all checks passed"
