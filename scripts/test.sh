#!/usr/bin/env bash
# test.sh — every check of the project, in order: set-up; configure, build and
# run all tests in build/ (GPU tests skip where there is no GPU); the CPU
# tests again under AddressSanitizer and UBSan in build-asan/; each libFuzzer
# target of tests/fuzz/ for 20 s in build-fuzz/ (scripts/fuzz.sh); clang-format
# over the C/CUDA sources; clang-tidy over the host C sources of
# build/compile_commands.json. A failing step does not stop the later ones;
# the summary lists the failures and the exit status is non-zero if any.
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(tp_repo_root)" || exit 1

bash scripts/setup.sh || exit 1

failed=()
step() {
  local name=$1
  shift
  echo "== $name"
  if "$@"; then
    echo "== $name: ok"
  else
    echo "== $name: FAILED"
    failed+=("$name")
    return 1
  fi
}

# shellcheck disable=SC2046 # the flags are meant to split
build_plain() {
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo $(tp_cuda_cmake_flags) &&
    cmake --build build -j "$(tp_jobs)"
}
test_plain() { (cd build && ctest --output-on-failure); }

build_asan() {
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTPBENCH_SANITIZE=ON -DTPBENCH_WITH_CUDA=OFF &&
    cmake --build build-asan -j "$(tp_jobs)"
}
test_asan() { (cd build-asan && ctest --output-on-failure -L cpu); }

# Keeps the fuzz targets alive: a short, fixed budget each (scripts/fuzz.sh).
fuzz_short() { bash scripts/fuzz.sh 20; }

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
  host_c_files | xargs -r -P 2 -n 1 clang-tidy -p build --quiet \
    --extra-arg=-Wno-unknown-warning-option
}

# Tests run only where their build succeeded.
if step "build (build/)" build_plain; then step "tests (build/)" test_plain; fi
if step "build (build-asan/)" build_asan; then step "sanitizer tests (build-asan/)" test_asan; fi
step "fuzz (build-fuzz/)" fuzz_short
step "clang-format" format_check
step "clang-tidy" tidy_check

if [ ${#failed[@]} -ne 0 ]; then
  echo "test.sh: FAILED: ${failed[*]}"
  exit 1
fi
echo "test.sh: all checks passed"
