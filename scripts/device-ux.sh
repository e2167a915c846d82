#!/usr/bin/env bash
# device-ux.sh — one call on a lent GPU machine for what a user sees: the GPU
# tests, a traced `tpbench ops` on a terminal (the progress line), then on its
# database `runs`, the compact table, OpenMetrics, the Chrome and Kineto trace
# exports of a traced configuration and the dashboard; and single-rank runs
# started as Slurm and Open MPI would start them. Everything under $OUT (all.tgz).
#
# usage: scripts/device-ux.sh BUILD_DIR [ops options...]
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-ux.sh BUILD_DIR [ops options]}
shift
tp=$build/tpbench
out=${OUT:-/tmp/tpbench-out}
log=$out/logs
mkdir -p "$log"
tp_device_env
tp_device_checkout_at_build_path "$build"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$log/host.txt" 2>&1

(cd "$build" && ctest -L gpu --output-on-failure --timeout 300) > "$log/gpu-tests.txt" 2>&1
echo "gpu tests exit $?"
grep -E "Test +#|tests passed" "$log/gpu-tests.txt"

db=$out/ux.db
# on a pseudo-terminal, so the progress line updates in place
script -qfec "$tp ops --db $db --trace $*" "$log/ops-tty.txt" > /dev/null 2>&1
echo "ops --trace (on a terminal) exit $?"
tr '\r' '\n' < "$log/ops-tty.txt" | grep -E '^\[ *[0-9]+/[0-9]+\] elapsed' | tail -n 3
"$tp" runs --db "$db" | tee "$log/runs.md"
"$tp" report --db "$db" > "$log/report.md" 2>&1
echo "report exit $?"; head -n 40 "$log/report.md"
"$tp" report --db "$db" --format openmetrics > "$log/report.om" 2>&1
echo "openmetrics exit $? ($(wc -l < "$log/report.om") lines, last: $(tail -n 1 "$log/report.om"))"
traced=$(python3 -c 'import sqlite3,sys; r=sqlite3.connect(sys.argv[1]).execute("select max(config_id) from traces").fetchone(); print(r[0] or "")' "$db")
echo "a traced configuration: ${traced:-none}"
if [ -n "$traced" ] && [ "${UX_ONLY_LAUNCHERS:-0}" = 0 ]; then
  "$tp" trace --db "$db" --config "$traced" --out "$log/trace-$traced.json"
  echo "trace (chrome) exit $?"
  "$tp" trace --db "$db" --config "$traced" --format kineto --out "$log/kineto-$traced"
  echo "trace (kineto) exit $?"; ls -la "$log/kineto-$traced"
fi
"$tp" dashboard --db "$db" --out "$log/dashboard" > "$log/dashboard.txt" 2>&1
echo "dashboard exit $?"; cat "$log/dashboard.txt"; du -sh "$log/dashboard" "$log/dashboard/index.html"

# single-rank jobs as Slurm's srun and Open MPI's mpirun start them (an external
# launcher's ranks share a job secret)
TPBENCH_JOB_SECRET=$(python3 -c 'import secrets; print(secrets.token_hex(32))')
export TPBENCH_JOB_SECRET
env SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_LOCALID=0 SLURM_NODELIST=localhost \
  SLURM_JOB_ID=4242 "$tp" ops --db "$out/slurm.db" --models debug --tokens 1024 --tp 1 \
  > "$log/slurm.md" 2> "$log/slurm.err"
echo "ops under Slurm's variables exit $?"
env OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_LOCAL_RANK=0 \
  OMPI_COMM_WORLD_LOCAL_SIZE=1 "$tp" ops --db "$out/mpi.db" --models debug --tokens 1024 --tp 1 \
  > "$log/mpi.md" 2> "$log/mpi.err"
echo "ops under Open MPI's variables exit $?"
"$tp" report --db "$out/slurm.db" | sed -n '1,12p'
"$tp" report --db "$out/mpi.db" | grep -E 'launcher|rank 0'
tar czf "$out/all.tgz" -C "$out" logs ux.db slurm.db mpi.db
rm -rf "$log" "$db" "$out/slurm.db" "$out/mpi.db"
