#!/usr/bin/env bash
# device-fp8-layers.sh — issue 15's fp8 layers on the lent GPUs, in one call:
# the GPU tests around them (gpu_fp8_blocks, whose TP 2 half skips below 2
# GPUs; gpu_blocks and gpu_fp8_ops, whose code the layers share), then
# `tpbench run` of llama3-8b's attention, FFN and block at seqlen 4096, batch 1:
#   --gpus 1 (the default with one GPU): TP 1, bf16, fp8, fp8-row, fp8-block
#     (mxfp8: cuBLASLt's refusal recorded below sm_100), fwd and fwd+bwd; the
#     bf16-vs-fp8 table (stock and GEMM-alone time, tokens/s, peak memory,
#     workspace, the error against the bf16 layer). About 3-4 minutes on one
#     H200 (warm-up 5, 30 iterations, 3 rounds).
#   --gpus 2 (two GPUs present): TP 2, the forward, bf16 and the fp8 formats,
#     stock against dist_gemm (auto, ce, sm), comm_dtype bf16 and fp8 (only the
#     fp8 layers multiply by it; dist_gemm runs fp8 only); the table with
#     stock_ms, dist_ms, speedup, dist_over_bound, stock_tokens_per_s,
#     stock_alloc_peak_mib and comm_dtype.
# Then every fp8 configuration's checks (PROJ:fp64 judged, NAME:bf16 reported,
# dist_gemm's outputs against stock's). Logs and the database go into
# $OUT/all.tgz.
#
# usage: scripts/device-fp8-layers.sh BUILD_DIR [--gpus N] [more tpbench run options...]
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-fp8-layers.sh BUILD_DIR [--gpus N] [run options]}
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
  ((gpus > 2)) && gpus=2
fi
echo "GPUs used: $gpus"

(cd "$build" && ctest -R '^(gpu_fp8_blocks|gpu_fp8_ops|gpu_blocks)$' -V --timeout 600) \
  > "$log/gpu-tests.txt" 2>&1
tests_rc=$?
echo "gpu tests exit $tests_rc"
grep -E "tests passed|FAIL|NOTE|skipped|vs stock|comm_dtype bf16 vs" "$log/gpu-tests.txt" |
  head -n 40

db=$out/fp8-layers.db
if ((gpus >= 2)); then
  "$build/tpbench" run --gpus 2 --db "$db" --axis tp=2 --axis model=8b \
    --axis layer=attention,ffn,block --axis dtype=bf16,fp8,fp8-row,fp8-block \
    --axis backend=stock,dist_gemm --axis schedule=auto,ce,sm --axis comm_dtype=bf16,fp8 \
    --axis pass=fwd --axis seqlen=4096 --axis batch=1 --axis graph=off --axis stock=plain \
    --warmup 5 --iters 30 --rounds 3 "$@" > "$log/run.md" 2> "$log/run.err"
  run_rc=$?
  columns=model,layer,dtype,comm_dtype,schedule,stock_ms,dist_ms,speedup,dist_over_bound,stock_tokens_per_s,stock_alloc_peak_mib,status
else
  "$build/tpbench" run --gpus 1 --db "$db" --axis tp=1 --axis model=8b \
    --axis layer=attention,ffn,block --axis dtype=bf16,fp8,fp8-row,fp8-block,mxfp8 \
    --axis pass=fwd,fwd+bwd --axis seqlen=4096 --axis batch=1 --axis graph=off \
    --warmup 5 --iters 30 --rounds 3 "$@" > "$log/run.md" 2> "$log/run.err"
  run_rc=$?
  columns=model,layer,dtype,pass,stock_ms,gemm_ms,stock_tokens_per_s,stock_peak_mib,stock_workspace_mib,stock_rel_err,status
fi
echo "run exit $run_rc (TP $gpus)"
tail -n 3 "$log/run.err"

"$build/tpbench" report --db "$db" --columns "$columns" > "$log/table.md" 2>&1
echo "report exit $?"
cat "$log/table.md"

# Every fp8 configuration that did not run (mxfp8's refusal, or a failure) and
# every check of the fp8 layers (PROJ:fp64 judged, NAME:bf16 reported).
python3 - "$db" > "$log/fp8-checks.txt" 2>&1 <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
q = """SELECT layer, dtype, pass, comm_dtype, kind, backend, schedule, status, reason FROM configs
       WHERE dtype <> 'bf16' AND kind IN ('layer', 'gemm')
         AND backend IN ('stock', 'dist_gemm', 'cublaslt') AND status <> 'ok' ORDER BY id"""
for row in db.execute(q):
    print("not run:", *["-" if v is None else v for v in row])
q = """SELECT c.layer, c.dtype, c.pass, c.comm_dtype, c.backend, k.output, k.status, k.rel_err,
              k.reason
       FROM checks k JOIN configs c ON c.id = k.config_id
       WHERE c.dtype <> 'bf16' ORDER BY c.id, k.seq"""
for layer, dtype, pas, comm, backend, output, status, rel, reason in db.execute(q):
    rel = "-" if rel is None else "%.3e" % rel
    comm = comm or "-"
    print(f"{layer:9} {dtype:9} {pas:7} {comm:4} {backend:9} {output:22} {status:6} {rel:>10}  "
          f"{reason or ''}")
EOF
echo "fp8 checks: $(grep -c ' failed ' "$log/fp8-checks.txt") failed"
grep -E ":bf16" "$log/fp8-checks.txt" | grep -E " y:bf16 " | head -n 20
failed_fp8=$(grep -c -E '^not run: .* (failed|oom|timeout) ' "$log/fp8-checks.txt")

tar czf "$out/all.tgz" -C "$out" logs fp8-layers.db && rm -rf "$log" "$db"
exit $((tests_rc != 0 || run_rc != 0 || failed_fp8 != 0))
