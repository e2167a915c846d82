#!/usr/bin/env bash
# device-main-job.sh — the main job on a lent GPU machine, as a user runs it: `bash
# scripts/run.sh` (set-up, a fresh build of the binary, scripts/main-job.sh: with one GPU
# the TP 1 table and the predicted TP 2/4/8, with several `tpbench run`), everything under
# $OUT: main-job.txt (what it printed), main-job.rc, gpus.txt (nvidia-smi -L) and the
# database it wrote (tpbench.db).
#
# usage: scripts/device-main-job.sh [BUILD_DIR]
#   With BUILD_DIR (a build carried from the CPU machine) the set-up and build are skipped and
#   scripts/main-job.sh runs on that binary: for a machine whose packages cannot be installed.
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(tp_repo_root)" || exit 1
out=${OUT:-/tmp/tpbench-out}
mkdir -p "$out"
tp_device_env
nvidia-smi -L > "$out/gpus.txt" 2>&1
export TPBENCH_DB=$out/tpbench.db
rm -f "$TPBENCH_DB"
start=$(date +%s)
if [ $# -gt 0 ]; then
  tp_device_checkout_at_build_path "$1"
  TPBENCH_BIN=$1/tpbench bash scripts/main-job.sh > "$out/main-job.txt" 2>&1
else
  bash scripts/run.sh > "$out/main-job.txt" 2>&1
fi
rc=$?
echo "$rc" > "$out/main-job.rc"
echo "main job exit $rc in $(($(date +%s) - start)) s ($(grep -c . "$out/main-job.txt") lines)"
# what a reader sees: the job's own lines, the tables' heads (the build's lines left out)
grep -v -E '^\[ *[0-9]+%\]|^-- |^(Scanning|Consolidate|Built target)' "$out/main-job.txt" | head -n 80
exit "$rc"
