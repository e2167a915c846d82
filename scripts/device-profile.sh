#!/usr/bin/env bash
# device-profile.sh — one call on a lent GPU machine for `tpbench profile`:
# the GPU test (a CUDA program profiled from outside: step windows against
# its own CUDA-event times, --overhead, missing steps, CUPTI claimed by the
# program) and the collector's own GPU test; tpbench's own `ops` profiled
# from outside with its op ranges as windows and held against `ops --trace`
# (scripts/profile-agreement.py); the PyTorch example
# (examples/symm_mem_tp.py) under torchrun with --steps and --overhead, its
# report and both trace exports; a program that runs torch.profiler itself
# (two CUPTI clients). Reports and traces under $OUT.
#
# usage: scripts/device-profile.sh BUILD_DIR [GPUS]
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-profile.sh BUILD_DIR [GPUS]}
gpus=${2:-$(nvidia-smi -L 2> /dev/null | wc -l)}
tp=$build/tpbench
out=${OUT:-/tmp/tpbench-out}
mkdir -p "$out"
tp_device_env
tp_device_checkout_at_build_path "$build"
db=$out/profile.db

(cd "$build" && ctest -R 'gpu_profile|gpu_collector' -V) > "$out/ctest-profile.txt" 2>&1
echo "ctest gpu_profile + gpu_collector exit $?"
grep -E "tests passed|step [0-9]: tpbench|overhead on|busy:|Passed|Failed|FAIL" "$out/ctest-profile.txt"

# tpbench's own ops, traced from inside and profiled from outside, one shape per op
shapes=(--shape 4096,4096,4096 --shape 4096,8192,4096,ag_linear_multi --shape 4096,4096,8192,linear_rs)
"$tp" ops --gpus "$gpus" --tp "$gpus" "${shapes[@]}" --pass fwd --trace --warmup 2 --iters 10 \
  --db "$out/ops-trace.db" > "$out/ops-trace.txt" 2>&1
echo "ops --trace exit $?"
"$tp" profile --db "$out/ops-profile.db" --label ops --range '\.fwd ' -- "$tp" ops --gpus "$gpus" \
  --tp "$gpus" "${shapes[@]}" --pass fwd --warmup 2 --iters 10 --db "$out/ops.db" \
  > "$out/profile-ops.txt" 2>&1
echo "profile of ops exit $?"
tail -n 4 "$out/profile-ops.txt"
"$tp" report --db "$out/ops-profile.db" | sed -n '/## transports/,/## kernels/p'
python3 "$(dirname "${BASH_SOURCE[0]}")/profile-agreement.py" "$out/ops-trace.db" "$out/ops-profile.db"
echo "agreement exit $?"

if python3 -c 'import torch' 2> /dev/null; then
  python3 -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda)'
  # overhead twice: API records of query calls left out (the default) and kept
  for every in 1 0; do
    TPBENCH_CUPTI_EVERY_API=$every "$tp" profile --db "$db" --label "overhead-every-api-$every" \
      --steps 4:24 --overhead -- python3 -m torch.distributed.run --standalone \
      --nproc-per-node "$gpus" examples/symm_mem_tp.py --steps 24 --tokens 16384 \
      > "$out/profile-overhead-$every.txt" 2>&1
    echo "overhead run (TPBENCH_CUPTI_EVERY_API=$every) exit $?"
    grep -E "baseline:|overhead on" "$out/profile-overhead-$every.txt"
  done
  "$tp" profile --db "$db" --label symm_mem_tp --steps 2:10 -- \
    python3 -m torch.distributed.run --standalone --nproc-per-node "$gpus" \
    examples/symm_mem_tp.py --steps 10 > "$out/profile-example.txt" 2>&1
  echo "profile of examples/symm_mem_tp.py exit $?"
  tail -n 8 "$out/profile-example.txt"
  run=$("$tp" runs --db "$db" --format csv 2> /dev/null | tail -n 1 | cut -d, -f1)
  "$tp" report --db "$db" --run "$run" | tee "$out/report-example.txt" | head -n 80
  cfg=$(sed -n 's/^# profile run [0-9]*, configuration \([0-9]*\)$/\1/p' "$out/report-example.txt")
  if [ -n "$cfg" ]; then
    "$tp" trace --db "$db" --config "$cfg" --out "$out/example-trace.json"
    echo "trace exit $?"
    "$tp" trace --db "$db" --config "$cfg" --format kineto --out "$out/example-kineto"
    echo "kineto trace exit $?"
  fi
  "$tp" profile --db "$db" --label torch-profiler -- python3 -c "import torch
from torch.profiler import profile, ProfilerActivity
a = torch.randn(2048, 2048, device='cuda')
with profile(activities=[ProfilerActivity.CUDA]) as p:
    for _ in range(5): b = a @ a
    torch.cuda.synchronize()
print('torch.profiler events:', len(p.events()))" > "$out/profile-torch-profiler.txt" 2>&1
  echo "profile of a torch.profiler program exit $?"
  tail -n 6 "$out/profile-torch-profiler.txt"
else
  echo "PyTorch is not installed here: the example is skipped"
fi
"$tp" runs --db "$db"
