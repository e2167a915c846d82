#!/usr/bin/env bash
# device-stock-window.sh — the stock path's nccl-window variant (issue 18) on
# a lent GPU machine, in one call of about 3 minutes on one H200: the GPU
# test that holds stock on NCCL symmetric windows to plain stock bit for
# bit (and NCCL's runtime to what its sources say about one rank), then
# `tpbench ops` at TP 1 with both stock variants side by side, the throughput
# table with both stock columns, and a small `tpbench run` of the layers'
# window variant. Every log lands under $OUT.
#
# usage: scripts/device-stock-window.sh BUILD_DIR [extra tpbench ops options...]
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-stock-window.sh BUILD_DIR [ops options]}
shift
out=${OUT:-/tmp/tpbench-out}
mkdir -p "$out"
tp_device_env

{
  echo "== host"; hostname
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "== NCCL the binary loads"; ldd "$build/tpbench" | grep -E "nccl" || true
} 2>&1 | tee "$out/host.txt"

echo "== gpu_stock_window"
"$build/tests/gpu/gpu_stock_window" 2>&1 | tee "$out/gpu-stock-window.txt"
test_rc=${PIPESTATUS[0]}

# TP 1, both stock variants (the default stock axis: plain,window), every
# projection of llama3-8b at two token counts, three rounds.
echo "== ops (TP 1, stock plain and on NCCL windows)"
"$build/tpbench" ops --db "$out/window.db" --tp 1 --models 8b --projs qkv,wo,w13,w2 \
  --tokens 4096,16384 --stock plain,window --warmup 5 --iters 20 --rounds 3 "$@" \
  2>"$out/ops-progress.txt" | tee "$out/ops-table.md"
ops_rc=${PIPESTATUS[0]}
tail -n 5 "$out/ops-progress.txt"
"$build/tpbench" report --db "$out/window.db" \
  --columns model,op,shape,pass,stock_ms,stock_window_ms,best_stock,gemm_ms,status \
  2>&1 | tee "$out/ops-stock-columns.md"

echo "== run (TP 1, debug FFN and block, both stock variants)"
"$build/tpbench" run --db "$out/window-run.db" --tp 1 --axis model=debug \
  --axis layer=ffn,block --axis seqlen=2048 --axis pass=fwd+bwd --axis graph=off,on \
  --warmup 3 --iters 10 --rounds 2 2>"$out/run-progress.txt" | tee "$out/run-table.md"
run_rc=${PIPESTATUS[0]}
tail -n 5 "$out/run-progress.txt"

echo "gpu_stock_window exit $test_rc, ops exit $ops_rc, run exit $run_rc"
exit $(( test_rc != 0 || ops_rc != 0 || run_rc != 0 ))
