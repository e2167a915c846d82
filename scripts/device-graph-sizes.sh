#!/usr/bin/env bash
# device-graph-sizes.sh — one call on a lent GPU machine for several CUDA graph
# sizes on one workspace (`run --axis graph=mixed`): the GPU tests that hold the
# mechanics (gpu_graph_sizes; gpu_blocks, whose graph tests share the frozen
# group), then `tpbench run` of one mix beside the same sizes captured alone
# (graph=on), its table, and the checks that the rows say what ran; every log
# under $OUT. At TP 1 (one GPU) only stock and the GEMMs alone run; with
# --gpus 2 the dist_gemm rows are judged against stock too.
#
# usage: scripts/device-graph-sizes.sh BUILD_DIR [tpbench run options...]
#   default run options: --gpus 1 --iters 30 --warmup 5 --rounds 3; extra ones
#   (e.g. --gpus 2, --axis pass=fwd) come after them and win.
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-graph-sizes.sh BUILD_DIR [run options]}
shift
out=${OUT:-/tmp/tpbench-out}
mkdir -p "$out/logs"
tp_device_env
tp_device_checkout_at_build_path "$build"
log=$out/logs
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$log/host.txt" 2>&1

(cd "$build" && ctest -R '^gpu_(graph_sizes|blocks)$' --output-on-failure --timeout 600) \
  > "$log/gpu-tests.txt" 2>&1
tests_rc=$?
echo "gpu tests exit $tests_rc"
grep -E "FAIL|skipped|Passed|Failed|tests passed" "$log/gpu-tests.txt" | tail -n 8

db=$out/graph-sizes.db
start=$(date +%s)
"$build/tpbench" run --db "$db" --gpus 1 --iters 30 --warmup 5 --rounds 3 \
  --axis model=8b --axis layer=block --axis seqlen=2048,4096,8192 --axis graph=on,mixed "$@" \
  > "$log/run.md" 2> "$log/run.err"
run_rc=$?
echo "run exit $run_rc in $(( $(date +%s) - start )) s"
tail -n 4 "$log/run.err"
cat "$log/run.md"
"$build/tpbench" report --db "$db" --format csv \
  --columns model,layer,pass,tokens,graph,graph_sizes,stock_ms,dist_ms,gemm_ms,status,rel_err,stock_peak_mib,reason \
  > "$log/report.csv" 2>&1
echo "report exit $?"

# What the rows must say: each size of the mix its own ok row among all three sizes.
fails=0
check() { # what, command...
  local what=$1
  shift
  if "$@" > /dev/null 2>&1; then echo "PASS: $what"; else echo "FAIL: $what"; fails=$((fails + 1)); fi
}
check "run exit 0" test "$run_rc" -eq 0
check "mixed rows among 2048,4096,8192" grep -q '"2048,4096,8192"\|,2048,4096,8192,\|2048,4096,8192' "$log/report.csv"
for t in 2048 4096 8192; do
  check "a mixed row at $t tokens" grep -Eq "^[^,]*,[^,]*,[^,]*,$t,[^,]*,\"?2048,4096,8192" "$log/report.csv"
done
check "no configuration failed, timed out or ran out of memory" \
  bash -c "! grep -Eq ',(failed|timeout|oom),' '$log/report.csv'"
check "the progress lines say graph mixed and numerics" grep -q "graph mixed.*numerics" "$log/run.err"
echo "graph sizes: $fails check(s) failed"
tar czf "$out/all.tgz" -C "$out" logs graph-sizes.db && rm -rf "$db"
exit $(( tests_rc != 0 || run_rc != 0 || fails != 0 ))
