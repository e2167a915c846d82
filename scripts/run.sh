#!/usr/bin/env bash
# run.sh — the main job: set up, build, then scripts/main-job.sh: with several
# GPUs the layers (`tpbench run`, quick preset; one worker per GPU) into
# tpbench.db and their throughput table; with one GPU what one GPU can show
# (the GEMM alone and stock at TP 1) and the predicted TP 2/4/8; without a
# GPU it says so, shows the sample database's report and exits 1. Extra
# arguments go to `tpbench run` (see `./build/tpbench run --help`).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(tp_repo_root)"

bash scripts/setup.sh
# shellcheck disable=SC2046 # the flags are meant to split
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo $(tp_cuda_cmake_flags)
# the binary only: the tests are scripts/test.sh's
cmake --build build -j "$(tp_jobs)" --target tpbench
exec bash scripts/main-job.sh "$@"
