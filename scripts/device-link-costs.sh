#!/usr/bin/env bash
# device-link-costs.sh — the link probe's per-call costs on a lent GPU machine
# (`tpbench link`: a 64 KiB point of every transport, a copy within one GPU,
# the fused op's barrier, a flag round trip, a met flag wait) and the
# prediction that reads them (`tpbench project`), everything under $OUT.
#
# One GPU: the probe runs with 2, 4 and 8 ranks sharing it
# (TPBENCH_TEST_SHARE_GPU=1). That proves the probe's code at every degree
# and that `project` reads the new points; its timings mean nothing (the run
# records the test knob, and `project` says so when it reads such a probe).
# Two or more GPUs: the probe of the real links, then the TP 2 validation
# from the TP 1 GEMMs (examples/tpbench-h200-tp1-gemm.db) against the
# sample's TP 2 rows with the costs measured, and the TP 4/8 prediction.
# --gemms: also `ops` at TP 1 on one GPU for 8B, 70B and 405B at 4096-32768
# tokens: the GEMM rates the TP 4/8 prediction reads (the examples hold 8B
# and 70B up to 16384 tokens only), and that prediction from them.
#
# $OUT brings back few files: the databases and logs go into one archive,
# link-costs.tgz, beside summary.md.
#
# usage: scripts/device-link-costs.sh BUILD_DIR [--gemms]
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-link-costs.sh BUILD_DIR [--gemms]}
gemms=${2:-}
out=${OUT:-/tmp/tpbench-out}
work="$out/files"
mkdir -p "$work"
tp_device_env
tp_device_checkout_at_build_path "$build"
repo=$(tp_repo_root)
tpbench="$build/tpbench"
summary="$out/summary.md"
: >"$summary"
status=0

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$work/host.txt"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')

# step NAME CMD...: CMD's output into NAME.txt and the summary; a failure fails the script.
step() { tp_device_step "$work" "$summary" "$@" || status=1; }

# A database of the TP 1 GEMMs (and, with --gemms, the new ones) and a probe.
project_db() {
  local db=$1 probe=$2
  cp "$repo/examples/tpbench-h200-tp1-gemm.db" "$db"
  [ -n "$probe" ] && "$tpbench" import "$probe" --db "$db" >/dev/null
  [ -f "$work/tp1-gemms.db" ] && "$tpbench" import "$work/tp1-gemms.db" --db "$db" >/dev/null
  return 0
}

if [ "$gemms" = "--gemms" ]; then
  step ops-tp1-gemms "$tpbench" ops --gpus 1 --tp 1 --pass fwd --models 8b,70b,405b \
    --tokens 4096,8192,16384,32768 --warmup 5 --iters 20 --db "$work/tp1-gemms.db" --quiet
fi

if [ "$gpus" -ge 2 ]; then
  step link-pair "$tpbench" link --gpus 2 --db "$work/link-pair.db"
  # the judged set: the sample's TP 2 rows, the TP 1 GEMMs, this probe (the latest)
  cp "$repo/examples/tpbench-h200-sample.db" "$work/validate.db"
  "$tpbench" import "$repo/examples/tpbench-h200-tp1-gemm.db" --db "$work/validate.db" >/dev/null
  "$tpbench" import "$work/link-pair.db" --db "$work/validate.db" >/dev/null
  step project-tp2 "$tpbench" project --db "$work/validate.db" --tp 2 --gemm-tp 1
  "$tpbench" project --db "$work/validate.db" --tp 2 --gemm-tp 1 --format csv \
    >"$work/project-tp2.csv" 2>&1
  project_db "$work/predict.db" "$work/link-pair.db"
else
  for ranks in 2 4 8; do
    TPBENCH_TEST_SHARE_GPU=1 step "link-shared-$ranks" "$tpbench" link --gpus "$ranks" \
      --sizes 8,32 --iters 10 --db "$work/link-shared-$ranks.db"
  done
  project_db "$work/predict.db" "$work/link-shared-2.db"
fi
step project-tp48 "$tpbench" project --db "$work/predict.db" --tp 4,8 --gemm-tp 1 \
  --models 8b,70b,405b --tokens 4096,8192,16384,32768
"$tpbench" project --db "$work/predict.db" --tp 4,8 --gemm-tp 1 --models 8b,70b,405b \
  --tokens 4096,8192,16384,32768 --format csv >"$work/project-tp48.csv" 2>&1

tar czf "$out/link-costs.tgz" -C "$work" .
echo "device-link-costs: exit $status (GPUs: $gpus)" | tee -a "$summary"
exit "$status"
