#!/usr/bin/env bash
# device-ac.sh — one call on a lent GPU machine for activation checkpointing
# (issue 16): the GPU tests of the layers and blocks (gpu_layers: RoPE into
# another buffer; gpu_blocks: every ac mode against ac=none bit for bit, a
# backward whose unkept forward tensors are poisoned, a planted fault), then
# `tpbench run` of 8B's attention, FFN and block, fwd+bwd at seqlen 4096 with
# ac none, selective and full (stock at TP 1 on one GPU), the table of time,
# activation and peak memory per ac, and every configuration's ac=none
# checks; logs and the database under $OUT.
#
# usage: scripts/device-ac.sh BUILD_DIR [run options...]   (e.g. --gpus 2 on the pair)
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-ac.sh BUILD_DIR [run options]}
shift
out=${OUT:-/tmp/tpbench-out}
mkdir -p "$out/logs"
tp_device_env
tp_device_checkout_at_build_path "$build"
log=$out/logs
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$log/host.txt" 2>&1
(cd "$build" && ctest -R 'gpu_layers|gpu_blocks' --output-on-failure --timeout 600) \
  > "$log/gpu-tests.txt" 2>&1
echo "gpu tests (gpu_layers, gpu_blocks) exit $?"
tail -n 4 "$log/gpu-tests.txt"
grep -c ': ok$' "$log/gpu-tests.txt" | sed 's/^/checks ok: /'
grep -E 'FAIL|skipped' "$log/gpu-tests.txt" | head -n 20
db=$out/ac.db
# --gpus 1 unless the options name another (the last --gpus wins)
"$build/tpbench" run --gpus 1 --db "$db" --axis model=8b --axis layer=attention,ffn,block \
  --axis pass=fwd+bwd --axis seqlen=4096 --axis batch=1 --axis graph=off --axis backend=stock \
  --axis ac=none,selective,full "$@" > "$log/run.md" 2> "$log/run.err"
echo "run exit $?"
tail -n 3 "$log/run.err"
"$build/tpbench" report --db "$db" --columns \
  model,layer,pass,ac,stock_ms,gemm_ms,stock_tokens_per_s,stock_activation_mib,stock_peak_mib,stock_alloc_peak_mib,status,reason \
  > "$log/report-ac.md" 2>&1
echo "report exit $?"
cat "$log/report-ac.md"
# Every ac configuration's checks against its untimed ac=none step: rule exact, one per output.
python3 - "$db" > "$log/ac-checks.txt" 2>&1 <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute(
    "SELECT c.layer, c.ac, c.kind, k.output, k.rule, k.status, k.differ, k.nonfinite, k.reason "
    "FROM checks k JOIN configs c ON c.id = k.config_id WHERE k.output LIKE '%:ac_none' "
    "ORDER BY c.id, k.seq").fetchall()
bad = [r for r in rows if r[5] != "ok"]
for r in rows:
    print(" | ".join("" if v is None else str(v) for v in r))
print(f"{len(rows)} ac=none checks, {len(bad)} not ok")
EOF
echo "ac checks: $(tail -n 1 "$log/ac-checks.txt")"
tar czf "$out/all.tgz" -C "$out" logs ac.db && rm -rf "$log" "$db"
