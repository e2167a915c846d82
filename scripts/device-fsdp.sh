#!/usr/bin/env bash
# device-fsdp.sh — one call on a lent GPU machine for FSDP beside TP (issue 16
# items 1 and 2): the GPU test gpu_fsdp (FSDP's collectives beside a block's
# step bit-identical to without them, the gathered weights and the
# reduce-scatter exact, planted faults caught; its two-GPU parts skip on one),
# then `tpbench run` of 8B's attention, FFN and block, seqlen 4096, fwd and
# fwd+bwd, stock (and dist_gemm at TP 2), over dp=1,2 x fsdp_traffic=off,on:
#   one GPU   tp 1: fsdp_traffic off and on (at TP 1 the competing collectives
#             are one-rank copies); dp 2 needs 2 GPUs (planned, dropped)
#   two GPUs  tp 1,2: dp 2 x tp 1 (FSDP over the pair), dp 1 x tp 2 with
#             fsdp_traffic off and on (dp 1 x tp 1 is rejected in a 2-worker
#             job), then a one-GPU job of dp 1 x tp 1 at batch 1, the same
#             per-GPU work as dp 2's quiet counterpart
# The report (time, speedup, overlap from the traced window) and every FSDP
# check; logs and the databases under $OUT.
#
# usage: scripts/device-fsdp.sh BUILD_DIR [--gpus N]   (default 1; 2 on the pair)
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-fsdp.sh BUILD_DIR [--gpus N]}
shift
gpus=1
if [ "${1:-}" = "--gpus" ]; then
  gpus=${2:?--gpus needs a count}
  shift 2
fi
out=${OUT:-/tmp/tpbench-out}
mkdir -p "$out/logs"
tp_device_env
tp_device_checkout_at_build_path "$build"
log=$out/logs
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$log/host.txt" 2>&1
(cd "$build" && ctest -R 'gpu_fsdp' -V --timeout 300) > "$log/gpu-tests.txt" 2>&1
echo "gpu test (gpu_fsdp) exit $?"
tail -n 4 "$log/gpu-tests.txt"
grep -c ': ok$' "$log/gpu-tests.txt" | sed 's/^/checks ok: /'
grep -E 'FAIL|skipped' "$log/gpu-tests.txt" | head -n 20
columns=model,layer,pass,tp,dp,options,stock_ms,dist_ms,speedup,gemm_ms,comm_ms,overlap_pct,exposed_comm_ms,stock_tokens_per_s,status,reason
# shellcheck disable=SC2054 # the commas are tpbench's value lists
common=(--axis model=8b --axis layer=attention,ffn,block --axis pass=fwd,fwd+bwd --axis seqlen=4096
  --axis batch=2 --axis graph=off --axis stock=plain --axis dp=1,2 --axis fsdp_traffic=off,on --trace)
if [ "$gpus" -ge 2 ]; then
  # shellcheck disable=SC2054
  tps=(--axis tp=1,2 --axis backend=stock,dist_gemm)
else
  tps=(--axis tp=1 --axis backend=stock)
fi
db=$out/fsdp.db
"$build/tpbench" run --gpus "$gpus" --db "$db" "${common[@]}" "${tps[@]}" \
  > "$log/run.md" 2> "$log/run.err"
echo "run exit $?"
grep -c 'planned, not run' "$log/run.err" | sed 's/^/planned, not run: /'
tail -n 3 "$log/run.err"
if [ "$gpus" -ge 2 ]; then
  # dp 2's quiet counterpart: one GPU, dp 1 x tp 1, each dp rank's batch (1)
  "$build/tpbench" run --gpus 1 --db "$db" --axis model=8b --axis layer=attention,ffn,block \
    --axis pass=fwd,fwd+bwd --axis seqlen=4096 --axis batch=1 --axis graph=off --axis stock=plain \
    --axis tp=1 --axis backend=stock --trace > "$log/run-quiet.md" 2> "$log/run-quiet.err"
  echo "quiet one-GPU run exit $?"
  tail -n 3 "$log/run-quiet.err"
fi
"$build/tpbench" report --db "$db" --columns "$columns" > "$log/report-fsdp.md" 2>&1
echo "report exit $?"
cat "$log/report-fsdp.md"
# Every FSDP configuration's own checks: weights:gathered, grads:reduce_scatter, <output>:no_fsdp.
python3 - "$db" > "$log/fsdp-checks.txt" 2>&1 <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute(
    "SELECT c.layer, c.pass, c.tp, c.dp, c.kind, k.output, k.rule, k.status, k.differ, k.reason "
    "FROM checks k JOIN configs c ON c.id = k.config_id "
    "WHERE k.output LIKE '%:no_fsdp' OR k.output IN ('weights:gathered', 'grads:reduce_scatter') "
    "ORDER BY c.id, k.seq").fetchall()
bad = [r for r in rows if r[7] != "ok"]
for r in rows:
    print(" | ".join("" if v is None else str(v) for v in r))
print(f"{len(rows)} FSDP checks, {len(bad)} not ok")
PY
echo "fsdp checks: $(tail -n 1 "$log/fsdp-checks.txt")"
tar czf "$out/all.tgz" -C "$out" logs fsdp.db && rm -rf "$log" "$db"
