#!/usr/bin/env bash
# device-alloc-peak.sh — one call on a lent GPU machine (one H200 is enough,
# TP 1) for issue 15's peak memory per configuration: the GPU test of the
# ledger (gpu_alloc_peak), then `tpbench ops` and `tpbench run` on Llama 3 8B
# shapes, bf16 and fp8 ops, fwd and fwd+bwd, and the report of each with the
# driver's peak (stock_peak_mib), tpbench's own accounting
# (stock_alloc_peak_mib) and the workspace apart (stock_workspace_mib).
# Everything under $OUT: logs/ (test output, progress) and the two tables.
# About three minutes.
#
# usage: scripts/device-alloc-peak.sh BUILD_DIR
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-alloc-peak.sh BUILD_DIR}
out=${OUT:-/tmp/tpbench-out}
mkdir -p "$out/logs"
tp_device_env
tp_device_checkout_at_build_path "$build"
log=$out/logs
tp=("$build/tpbench")
quick=(--gpus 1 --warmup 5 --iters 20 --rounds 3 --quiet)

(cd "$build" && ctest -R '^gpu_alloc_peak$' -V --timeout 900) > "$log/gpu-alloc-peak.txt" 2>&1
test_rc=$?
echo "gpu_alloc_peak exit $test_rc"
grep -E "FAIL|Passed|Failed|tests passed" "$log/gpu-alloc-peak.txt" | tail -n 8

"${tp[@]}" ops "${quick[@]}" --tp 1 --models 8b --projs qkv,w13 --tokens 4096 \
  --dtype bf16,fp8 --pass fwd,fwd+bwd --db "$out/ops.db" > "$log/ops.md" 2> "$log/ops.err"
ops_rc=$?
echo "ops exit $ops_rc"
"${tp[@]}" run "${quick[@]}" --axis model=8b --axis layer=attention,ffn --axis seqlen=4096 \
  --axis pass=fwd,fwd+bwd --axis graph=off --axis tp=1 --db "$out/run.db" \
  > "$log/run.md" 2> "$log/run.err"
run_rc=$?
echo "run exit $run_rc"

columns=model,proj,tokens,dtype,pass,stock_ms,stock_peak_mib,stock_alloc_peak_mib,stock_workspace_mib
"${tp[@]}" report --db "$out/ops.db" --columns "$columns" | tee "$out/ops-memory.md"
columns=model,layer,tokens,dtype,pass,stock_ms,stock_peak_mib,stock_alloc_peak_mib,stock_workspace_mib
"${tp[@]}" report --db "$out/run.db" --columns "$columns" | tee "$out/run-memory.md"
rm -f "$out"/*.db-wal "$out"/*.db-shm
exit $(( test_rc != 0 || ops_rc != 0 || run_rc != 0 ))
