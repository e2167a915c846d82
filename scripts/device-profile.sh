#!/usr/bin/env bash
# device-profile.sh — one call on a lent GPU machine for `tpbench profile`
# (first step, one process): tpbench's own `ops` profiled from outside, a
# command that exits 3, and a small PyTorch matmul loop where PyTorch is
# installed; the reports, a trace export and `runs`, under $OUT.
#
# usage: scripts/device-profile.sh BUILD_DIR
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-profile.sh BUILD_DIR}
tp=$build/tpbench
out=${OUT:-/tmp/tpbench-out}
mkdir -p "$out"
tp_device_env
tp_device_checkout_at_build_path "$build"
db=$out/profile.db

"$tp" profile --db "$db" --label ops-debug -- "$tp" ops --gpus 1 --tp 1 --models debug \
  --warmup 2 --iters 5 --db "$out/ops.db" > "$out/profile-ops.txt" 2>&1
echo "profile of ops exit $? (ops' own status expected: 0)"
tail -n 3 "$out/profile-ops.txt"
"$tp" report --db "$db" | head -n 30
"$tp" trace --db "$db" --config 1 --out "$out/profile-ops.json"
echo "trace exit $?"
"$tp" profile --db "$db" -- sh -c 'exit 3'
echo "profile of a command exiting 3: exit $?"
if python3 -c 'import torch' 2> /dev/null; then
  "$tp" profile --db "$db" --label torch -- python3 -c "import torch
a = torch.randn(4096, 4096, device='cuda')
for _ in range(20): b = a @ a
torch.cuda.synchronize()"
  echo "profile of a PyTorch loop exit $?"
  "$tp" report --db "$db" | head -n 25
else
  echo "PyTorch is not installed here: its profile skipped"
fi
"$tp" runs --db "$db"
