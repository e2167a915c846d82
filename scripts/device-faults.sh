#!/usr/bin/env bash
# device-faults.sh — fault tests on a lent GPU machine: a worker killed
# mid-matrix (SIGKILL) and an interrupt (SIGINT) during `tpbench run`; each
# must end within --timeout plus a few seconds with what was measured intact
# (PRAGMA integrity_check) and the lost configuration recorded.
#
# usage: scripts/device-faults.sh BUILD_DIR   (logs under $OUT/faults)
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-faults.sh BUILD_DIR}
out=${OUT:-/tmp/tpbench-out}/faults
mkdir -p "$out"
tp_device_env
bin=$build/tpbench
args=(run --gpus 1 --timeout 20 --iters 200 --warmup 3 --axis model=8b --axis seqlen=2048,4096
      --axis pass=fwd,fwd+bwd --axis graph=off)

# the GPU host has no sqlite3 shell: Python's module reads the database
summary() { # db
  python3 - "$1" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print("integrity:", db.execute("PRAGMA integrity_check").fetchone()[0])
print("statuses:", db.execute("SELECT status, count(*) FROM configs GROUP BY status").fetchall())
for (r,) in db.execute("SELECT reason FROM configs WHERE reason LIKE '%died%' "
                      "OR status = 'timeout' OR reason LIKE '%case stopped%'"):
    print("lost:", r)
PY
}

# 1. a worker killed while it runs a configuration
"$bin" "${args[@]}" --db "$out/kill.db" > "$out/kill.md" 2> "$out/kill.err" &
parent=$!
sleep 12
worker=$(pgrep -P "$parent" | head -n 1)
t0=$(date +%s)
[ -n "$worker" ] && kill -9 "$worker" && echo "killed worker $worker"
wait "$parent"; echo "run after a killed worker: exit $? in $(( $(date +%s) - t0 )) s"
summary "$out/kill.db"

# 2. an interrupt (job control on: a non-interactive shell's background job
# would otherwise ignore SIGINT, and tpbench rightly keeps an ignored SIGINT ignored)
set -m
"$bin" "${args[@]}" --db "$out/int.db" > "$out/int.md" 2> "$out/int.err" &
parent=$!
sleep 12
t0=$(date +%s)
kill -INT "$parent"
wait "$parent"; echo "run after SIGINT: exit $? in $(( $(date +%s) - t0 )) s"
set +m
summary "$out/int.db"
# 3. windows longer than --timeout in ops: (a) w13 at 4096 tokens, ~6 s, seen by the
# harness's own wait; (b) w13 at 16384 tokens, ~50 s: the host blocks issuing
# steps, so the watchdog (2 x timeout + 10 s) ends the worker and new ones go on
for hang in "4096 1500" "16384 3000"; do
  set -- $hang
  t0=$(date +%s)
  "$bin" ops --gpus 1 --models 8b --projs wo,w13 --tokens "$1" --pass fwd+bwd --iters "$2" \
    --warmup 1 --rounds 1 --timeout 3 --db "$out/hang$1.db" > "$out/hang$1.md" 2> "$out/hang$1.err"
  echo "ops, tokens $1, $2 iterations, --timeout 3: exit $? in $(( $(date +%s) - t0 )) s"
  summary "$out/hang$1.db"
  grep -h -E "aborted|aborting|starting new|did not finish" "$out/hang$1.err" | head -n 4
done
# 4. (two GPUs or more) a hung collective: rank 1 withholds its work in configuration 0
# (TPBENCH_TEST_WITHHOLD), so rank 0's collective waits on it; the window must end within
# --timeout plus a few seconds, configuration 0 recorded as a timeout, the rest measured
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  t0=$(date +%s)
  TPBENCH_TEST_WITHHOLD=1:0 "$bin" ops --gpus 2 --models 8b --projs wo --tokens 4096 \
    --pass fwd --timeout 5 --db "$out/withhold.db" > "$out/withhold.md" 2> "$out/withhold.err"
  echo "ops with rank 1 withholding configuration 0, --timeout 5: exit $? in $(( $(date +%s) - t0 )) s"
  summary "$out/withhold.db"
else
  echo "hung-collective test: needs two GPUs, skipped"
fi
tail -n 3 "$out"/*.err
