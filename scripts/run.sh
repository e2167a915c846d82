#!/usr/bin/env bash
# run.sh — the main job: set up, build, run the layers (`tpbench run`, quick
# preset unless the arguments say otherwise; one worker per GPU) into
# tpbench.db and print its throughput table. Extra arguments go to
# `tpbench run` (see `./build/tpbench run --help`). Without a GPU, tpbench
# says so and this script exits non-zero.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(tp_repo_root)"

bash scripts/setup.sh
# shellcheck disable=SC2046 # the flags are meant to split
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo $(tp_cuda_cmake_flags)
cmake --build build -j "$(tp_jobs)"
exec ./build/tpbench run --db tpbench.db "$@"
