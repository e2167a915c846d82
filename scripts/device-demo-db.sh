#!/usr/bin/env bash
# device-demo-db.sh — examples/tpbench-demo.db, made on one lent GPU (about two minutes with a
# build at hand): three runs of `tpbench ops` at TP 1, in rounds — 8B's qkv and w2 at 4096 and
# 8192 tokens, bf16, forward, plain stock: the stock op and the GEMM alone (dist_gemm and the
# collective alone need two GPUs and are rejected). Runs 1 and 2 are the code as it is; run 3
# has TPBENCH_TEST_DIST_DELAY_US=100, which at TP 1 (nothing fuses) slows every stock op by
# 100 µs, recorded in the run as a test knob. Then compare, as tests/cpu/test_demo_db.c runs
# it: run 1 against run 2 must be quiet (exit 0), run 1 against run 3 must gate (exit 1).
# Everything under $OUT: tpbench-demo.db (copy it to examples/), the compares, the logs.
#
# usage: scripts/device-demo-db.sh [BUILD_DIR]
#   BUILD_DIR (default build): a build with CUDA; it is built (the binary only) when missing.
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(tp_repo_root)" || exit 1
build=${1:-build}
out=${OUT:-/tmp/tpbench-out}
mkdir -p "$out"
tp_device_env
build_binary() {
  # shellcheck disable=SC2046 # the flags are meant to split
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo $(tp_cuda_cmake_flags) &&
    cmake --build "$build" -j "$(tp_jobs)" --target tpbench
}
if [ ! -x "$build/tpbench" ]; then
  if ! build_binary > "$out/build.txt" 2>&1; then
    echo "build failed"
    tail -n 30 "$out/build.txt"
    exit 1
  fi
else
  tp_device_checkout_at_build_path "$build"
fi
tp=$build/tpbench
db=$out/tpbench-demo.db
rm -f "$db" "$db-wal" "$db-shm"
# shellcheck disable=SC2054 # the commas are tpbench's list separators
matrix=(--gpus 1 --tp 1 --models 8b --projs qkv,w2 --tokens 4096,8192 --dtype bf16 --pass fwd
  --stock plain --rounds 5 --warmup 10 --iters 30)
rc=0
for run in 1 2 3; do
  knob=()
  if [ "$run" = 3 ]; then knob=(env TPBENCH_TEST_DIST_DELAY_US=100); fi
  start=$(date +%s)
  "${knob[@]}" "$tp" ops "${matrix[@]}" --db "$db" --quiet > "$out/ops-$run.md" 2> "$out/ops-$run.err"
  step=$?
  echo "ops run $run${knob:+ (${knob[1]})} exit $step in $(($(date +%s) - start)) s"
  rc=$((rc || step))
done
"$tp" runs --db "$db" | tee "$out/runs.md"
"$tp" compare run:1 run:2 --gate-references --db "$db" > "$out/compare-identical.md" 2>&1
echo "compare run:1 run:2 --gate-references exit $? (want 0: identical code)"
head -n 3 "$out/compare-identical.md"
"$tp" compare run:1 run:3 --gate-references --db "$db" > "$out/compare-slowed.md" 2>&1
echo "compare run:1 run:3 --gate-references exit $? (want 1: the planted slowdown)"
head -n 3 "$out/compare-slowed.md"
grep -A 12 '^### Regressed' "$out/compare-slowed.md" | head -n 16
# the database as the repository keeps it: one file, no -wal beside it
sqlite3 "$db" 'PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE; VACUUM;' > /dev/null 2>&1 ||
  python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute("PRAGMA journal_mode=DELETE"); c.execute("VACUUM")' "$db"
ls -l "$db"
exit "$rc"
