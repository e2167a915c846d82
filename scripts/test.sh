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
# idle (a test waiting on a timeout or a child, a serial link step) does
# another's work, without piling up more work than the cores can take (on a
# busy 2-core machine that only stretches every test towards its timeout):
#   builds: build/, then build-asan/, then the fuzz targets (and their runs);
#   tests:  build/'s tests once it is built;
#   sanitized tests: build-asan/'s CPU tests once it is built (the longest
#           step: it starts as soon as it can, its longest tests first: COST);
#   lint:   clang-format, then clang-tidy as soon as build/ is configured and
#           its one generated header written (clang-tidy is the largest single
#           piece of work, about 350 CPU seconds: it must not wait for the
#           build, nor trail behind the tests on one core), one file per core.
# ctest runs as many tests at once as there are cores (GPU tests one at a
# time: RESOURCE_LOCK gpu). Each step's output goes to build-logs/STEP.log and
# is printed when the step ends. TPBENCH_TEST_LANES=1 runs the steps one after
# another instead, as before.
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(tp_repo_root)" || exit 1

bash scripts/setup.sh || exit 1

jobs=$(tp_jobs)
tidy_jobs=$jobs
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
    cmake --build build --target tp_buildinfo && touch "$logs/plain-configured" &&
    cmake --build build -j "$jobs"
}
test_plain() { (cd build && ctest --output-on-failure -j "$jobs"); }

build_asan() {
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTPBENCH_SANITIZE=ON -DTPBENCH_WITH_CUDA=OFF &&
    cmake --build build-asan -j "$jobs"
}
# The documentation's tests (label docs: the pages' commands against the
# binary's output) run in build/; the sanitized binary's commands are the other
# CPU tests' work.
test_asan() { (cd build-asan && ctest --output-on-failure -L cpu -LE docs -j "$jobs"); }

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
  host_c_files | xargs -r -P "$tidy_jobs" -n 1 clang-tidy -p build --quiet \
    --extra-arg=-Wno-unknown-warning-option
}

# Tests run only where their build succeeded (a lane waits for the marker a
# build leaves, ok or not, and reads its status); clang-tidy reads what
# build/'s configuration writes (compile_commands.json, the build-info header).
built_ok() { [ "$(cat "$logs/$1.status" 2>/dev/null)" = 0 ]; }
wait_for() { while [ ! -e "$logs/$1" ]; do sleep 2; done; }
lane_builds() {
  step "build (build/)" build_plain
  touch "$logs/plain-built" "$logs/plain-configured"
  step "build (build-asan/)" build_asan
  touch "$logs/asan-built"
  step "fuzz (build-fuzz/)" fuzz_short
}
lane_tests() {
  wait_for plain-built
  if built_ok build__build__; then step "tests (build/)" test_plain; fi
}
lane_asan_tests() {
  wait_for asan-built
  if built_ok build__build_asan__; then step "sanitizer tests (build-asan/)" test_asan; fi
}
lane_lint() {
  step "clang-format" format_check
  wait_for plain-configured
  step "clang-tidy" tidy_check
}

if [ "${TPBENCH_TEST_LANES:-4}" = 1 ]; then
  lane_builds
  lane_tests
  lane_asan_tests
  lane_lint
else
  lane_builds &
  lane_tests &
  lane_asan_tests &
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
