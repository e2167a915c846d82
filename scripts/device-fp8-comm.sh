#!/usr/bin/env bash
# device-fp8-comm.sh — issue 15's fp8 communication on the lent GPUs, in one
# call: the GPU tests (gpu_fp8_comm on one GPU: the re-placement of gathered
# shards' scales and the chunk GEMMs on their own scales; gpu_fp8_comm_tp,
# the real paths at TP 2, 4 and 8, each degree above the visible GPUs
# skipped; gpu_fp8_ops and gpu_quant, whose code it shares),
# then `tpbench ops`:
#   --gpus 2 (two GPUs present): TP 2, llama3-8b's qkv, wo, w13, w2 at T 4096
#     and 8192, dtypes bf16, fp8, fp8-row, fp8-block, comm_dtype bf16 and fp8
#     (only the fp8 all-gather side multiplies by it), forward; the table with
#     comm_dtype, stock / dist_gemm / GEMM-alone / collective-alone times, the
#     speedup over the faster stock and dist_gemm / bound;
#   --gpus 1: the TP 1 rows (stock and the GEMM alone) of the same dtypes,
#     which is what one GPU can run (the fp8 communication itself needs 2).
# Logs and the database go into $OUT/all.tgz.
#
# usage: scripts/device-fp8-comm.sh BUILD_DIR [--gpus N] [more tpbench ops options...]
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-fp8-comm.sh BUILD_DIR [--gpus N] [ops options]}
shift
gpus=""
if [[ ${1:-} == --gpus ]]; then
  gpus=${2:?--gpus needs a number}
  shift 2
fi
out=${OUT:-/tmp/tpbench-out}
log=$out/logs
mkdir -p "$log"
tp_device_env
tp_device_checkout_at_build_path "$build"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$log/host.txt" 2>&1
if [[ -z $gpus ]]; then
  gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | wc -l)
fi
echo "GPUs used: $gpus"

(cd "$build" && ctest -R '^(gpu_fp8_comm|gpu_fp8_comm_tp|gpu_fp8_ops|gpu_quant)$' -V --timeout 600) \
  > "$log/gpu-tests.txt" 2>&1
tests_rc=$?
echo "gpu tests exit $tests_rc"
grep -E "tests passed|Skipped|skipped|FAIL|re-placed|chunks of|bit for bit|within" \
  "$log/gpu-tests.txt" | head -n 40

db=$out/fp8-comm.db
if ((gpus >= 2)); then
  tp=2
  axes=(--axis "comm_dtype=bf16,fp8")
else
  tp=1
  axes=()
fi
"$build/tpbench" ops --gpus "$tp" --db "$db" --axis tp="$tp" --axis model=8b \
  --axis proj=qkv,wo,w13,w2 --axis tokens=4096,8192 --dtype bf16,fp8,fp8-row,fp8-block \
  "${axes[@]}" --axis pass=fwd --warmup 5 --iters 30 --rounds 3 "$@" \
  > "$log/ops.md" 2> "$log/ops.err"
ops_rc=$?
echo "ops exit $ops_rc (TP $tp)"
tail -n 3 "$log/ops.err"

"$build/tpbench" report --db "$db" --columns \
  model,proj,tokens,tp,dtype,comm_dtype,stock_ms,dist_ms,gemm_ms,comm_ms,speedup,dist_over_bound,stock_peak_mib,status \
  > "$log/table.md" 2>&1
echo "report exit $?"
cat "$log/table.md"

# Every fp8 configuration that did not run, with its reason (the rules' rejections
# included: the backward at TP > 1, dist_gemm with comm_dtype bf16, mxfp8 below sm_100).
python3 - "$db" > "$log/fp8-not-run.txt" 2>&1 << 'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
q = """SELECT proj, tokens, dtype, comm_dtype, kind, backend, schedule, status, reason
       FROM configs WHERE dtype <> 'bf16' AND status <> 'ok' ORDER BY id"""
for row in db.execute(q):
    print(*["-" if v is None else v for v in row])
EOF
failed=$(grep -c -E ' (failed|oom|timeout) ' "$log/fp8-not-run.txt")
echo "fp8 configurations failed: $failed"
grep -E ' (failed|oom|timeout) ' "$log/fp8-not-run.txt" | head -n 20

tar czf "$out/all.tgz" -C "$out" logs fp8-comm.db && rm -rf "$log" "$db"
exit $((tests_rc != 0 || ops_rc != 0 || failed != 0))
