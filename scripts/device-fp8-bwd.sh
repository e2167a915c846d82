#!/usr/bin/env bash
# device-fp8-bwd.sh — the fp8 backward at TP > 1 (issue 15) on the lent GPUs,
# in one call:
#   1. the GPU tests of its code: gpu_fp8_columns (the wgrad's transposed
#      pieces re-placed against quantizing the whole, ranks simulated),
#      gpu_fp8_comm (one GPU), gpu_fp8_comm_tp (TP 2, 4, 8 on the visible
#      GPUs; each degree above them skipped) and gpu_fp8_comm_tp2_shared (TP 2
#      with both ranks on device 0: TPBENCH_TEST_SHARE_GPU), gpu_fp8_ops (TP 1,
#      the shared backward code);
#   2. `tpbench ops --pass fwd+bwd` at TP 2 over fp8, fp8-row, fp8-block:
#      with two GPUs the measured rows (llama3-8b, T 4096 and 8192); with one,
#      the same configurations' code paths on the shared GPU
#      (TPBENCH_TEST_SHARE_GPU=1, recorded as a test knob: its times mean
#      nothing, its checks and stock-vs-dist_gemm comparisons do), small
#      shapes, few iterations;
#   3. `tpbench run` (fp8 layers, fwd+bwd) the same way.
# Logs and the databases go into $OUT/logs.
#
# usage: scripts/device-fp8-bwd.sh BUILD_DIR [--gpus N]
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-fp8-bwd.sh BUILD_DIR [--gpus N]}
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
if [[ -z $gpus ]]; then
  gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | wc -l)
fi
echo "GPUs: $gpus"

(cd "$build" && ctest -R '^(gpu_fp8_columns|gpu_fp8_comm|gpu_fp8_comm_tp|gpu_fp8_comm_tp2_shared|gpu_fp8_ops)$' \
  -V --timeout 600) > "$log/gpu-tests.txt" 2>&1
echo "gpu tests exit $?"
grep -E "tests passed|Skipped|skipped|FAIL|re-placed|bit for bit|within|backward|column|rank [0-9]:" \
  "$log/gpu-tests.txt" | head -n 60

fp8=fp8,fp8-row,fp8-block
if ((gpus >= 2)); then
  share=()
  ops_shape=(--axis model=8b --axis tokens=4096,8192)
  run_shape=(--axis model=8b --axis seqlen=4096)
  iters=(--warmup 5 --iters 30 --rounds 3)
else
  export TPBENCH_TEST_SHARE_GPU=1
  share=(TPBENCH_TEST_SHARE_GPU=1)
  ops_shape=(--axis model=debug --axis tokens=1024)
  run_shape=(--axis model=debug --axis seqlen=512)
  iters=(--warmup 1 --iters 3 --rounds 1)
fi
echo "${share[*]:-two GPUs}"
"$build/tpbench" ops --gpus 2 --db "$log/ops.db" --axis tp=2 "${ops_shape[@]}" \
  --axis proj=qkv,wo,w13,w2 --dtype "bf16,$fp8" --axis comm_dtype=bf16,fp8 \
  --axis pass=fwd+bwd --schedule auto,ce,sm --stock plain "${iters[@]}" --quiet \
  > "$log/ops.md" 2> "$log/ops.err"
echo "ops exit $?"
tail -n 5 "$log/ops.err"
summarize() { # $1: database: configurations by status, then every check that is not ok
  python3 - "$1" << 'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for status, n in db.execute("select status, count(*) from configs group by status"):
    print(f"configs {status}: {n}")
for row in db.execute("select status, count(*) from checks group by status"):
    print("checks %s: %d" % row)
for row in db.execute("select c.config_key, k.output, k.status, k.reason from checks k "
                      "join configs c on c.id = k.config_id where k.status = 'failed' limit 20"):
    print("FAILED CHECK", *row)
for row in db.execute("select config_key, reason from configs where status in ('failed', 'oom', "
                      "'timeout') limit 20"):
    print("FAILED CONFIG", *row)
PY
}
summarize "$log/ops.db"
"$build/tpbench" run --gpus 2 --db "$log/run.db" --axis tp=2 "${run_shape[@]}" \
  --axis layer=attention,ffn --axis dtype="$fp8" --axis comm_dtype=fp8 --axis sp=on \
  --axis pass=fwd+bwd --axis backend=stock,dist_gemm --axis graph=off "${iters[@]}" --quiet \
  > "$log/run.md" 2> "$log/run.err"
echo "run exit $?"
tail -n 5 "$log/run.err"
summarize "$log/run.db"
