#!/usr/bin/env bash
# device-fp8-layers.sh — issue 15's fp8 layers on one lent GPU at TP 1, in one
# call: the GPU tests around them (gpu_fp8_blocks; gpu_blocks and gpu_fp8_ops,
# whose code the layers share), then `tpbench run` of llama3-8b's attention,
# FFN and block in bf16, fp8, fp8-row and fp8-block (mxfp8: cuBLASLt's refusal
# recorded below sm_100), fwd and fwd+bwd at seqlen 4096, batch 1; the
# bf16-vs-fp8 table (stock and GEMM-alone time, tokens/s, peak memory,
# workspace, the error against the bf16 layer) and every fp8 configuration's
# checks. Logs and the database go into $OUT/all.tgz. About 3-4 minutes on
# one H200 (warm-up 5, 30 iterations, 3 rounds).
#
# usage: scripts/device-fp8-layers.sh BUILD_DIR [more tpbench run options...]
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-fp8-layers.sh BUILD_DIR [run options]}
shift
out=${OUT:-/tmp/tpbench-out}
log=$out/logs
mkdir -p "$log"
tp_device_env
tp_device_checkout_at_build_path "$build"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$log/host.txt" 2>&1

(cd "$build" && ctest -R '^(gpu_fp8_blocks|gpu_fp8_ops|gpu_blocks)$' -V --timeout 600) \
  > "$log/gpu-tests.txt" 2>&1
tests_rc=$?
echo "gpu tests exit $tests_rc"
grep -E "tests passed|FAIL|NOTE" "$log/gpu-tests.txt" | head -n 20

db=$out/fp8-layers.db
"$build/tpbench" run --gpus 1 --db "$db" --axis tp=1 --axis model=8b \
  --axis layer=attention,ffn,block --axis dtype=bf16,fp8,fp8-row,fp8-block,mxfp8 \
  --axis pass=fwd,fwd+bwd --axis seqlen=4096 --axis batch=1 --axis graph=off \
  --warmup 5 --iters 30 --rounds 3 "$@" > "$log/run.md" 2> "$log/run.err"
run_rc=$?
echo "run exit $run_rc"
tail -n 3 "$log/run.err"

"$build/tpbench" report --db "$db" --columns \
  model,layer,dtype,pass,stock_ms,gemm_ms,stock_tokens_per_s,stock_peak_mib,stock_workspace_mib,stock_rel_err,status \
  > "$log/table.md" 2>&1
echo "report exit $?"
cat "$log/table.md"

# Every fp8 configuration that did not run (mxfp8's refusal, or a failure) and
# every check of the fp8 layers (PROJ:fp64 judged, NAME:bf16 reported).
python3 - "$db" > "$log/fp8-checks.txt" 2>&1 <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
q = """SELECT layer, dtype, pass, kind, backend, status, reason FROM configs
       WHERE dtype <> 'bf16' AND kind IN ('layer', 'gemm') AND backend IN ('stock', 'cublaslt')
         AND status <> 'ok' ORDER BY id"""
for row in db.execute(q):
    print("not run:", *row)
q = """SELECT c.layer, c.dtype, c.pass, c.kind, k.output, k.status, k.rel_err, k.reason
       FROM checks k JOIN configs c ON c.id = k.config_id
       WHERE c.dtype <> 'bf16' ORDER BY c.id, k.seq"""
for layer, dtype, pas, kind, output, status, rel, reason in db.execute(q):
    rel = "-" if rel is None else "%.3e" % rel
    print(f"{layer:9} {dtype:9} {pas:7} {kind:5} {output:22} {status:6} {rel:>10}  {reason or ''}")
EOF
echo "fp8 checks: $(grep -c ' failed ' "$log/fp8-checks.txt") failed"
grep -E ":bf16" "$log/fp8-checks.txt" | grep -E " y:bf16 " | head -n 20
failed_fp8=$(grep -c -E '^not run: .* (failed|oom|timeout) ' "$log/fp8-checks.txt")

tar czf "$out/all.tgz" -C "$out" logs fp8-layers.db && rm -rf "$log" "$db"
exit $((tests_rc != 0 || run_rc != 0 || failed_fp8 != 0))
