#!/usr/bin/env bash
# device-gemm-shapes.sh — the GEMMs of the TP 4/8 prediction, measured on one GPU, everything
# under $OUT (gemm-shapes.tgz beside summary.md):
#   1. `tpbench ops --tp 1` of the presets' projections (MODELS × TOKENS): the GEMM rates
#      `project --gemm-tp 1` reads (inputs.db);
#   2. `project --gemms` over them with the sample's link probe (its kernel cost k): every GEMM
#      the TP 4 and 8 predictions read, each a row of its exact shape or estimated (gemms.csv);
#   3. every estimated shape alone, `ops --tp 1 --shape M,N,K,OP`, in runs of a few shapes each
#      (an axis list holds 511 characters; scripts/lib.sh's tp_measure_estimated_gemms)
#      (shapes.db);
#   4. the prediction before and after those rows are added (before.csv, after.csv, after.md),
#      and scripts/gemm-model-check.py's table of estimated over measured (check.txt).
# One GPU does all of it: every GEMM of a TP W prediction is a single GPU's. The GEMMs and the
# prediction are the card's; the link costs are the sample's pair (H200), as in
# docs/projection.md.
#
# usage: scripts/device-gemm-shapes.sh BUILD_DIR [MODELS] [TOKENS] [DEGREES]
#   MODELS default 8b,70b,405b; TOKENS default 4096,8192,16384,32768; DEGREES default 4,8 (2,4,8
#   also measures the TP 2 validation's shard and chunk GEMMs)
#   exit 0 when every step passed, 1 otherwise
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-gemm-shapes.sh BUILD_DIR [MODELS] [TOKENS] [DEGREES]}
models=${2:-8b,70b,405b}
tokens=${3:-4096,8192,16384,32768}
degrees=${4:-4,8}
out=${OUT:-/tmp/tpbench-out}
work="$out/gemm-shapes"
mkdir -p "$work"
tp_device_env
tp_device_checkout_at_build_path "$build"
repo=$(tp_repo_root)
tpbench="$build/tpbench"
summary="$out/summary.md"
: >"$summary"
status=0
step() { tp_device_step "$work" "$summary" "$@" || status=1; }

nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv 2>&1 |
  tee "$work/host.txt" >>"$summary"
request=(--tp "$degrees" --gemm-tp 1 --models "$models" --tokens "$tokens")

step inputs tp_ops_gemms "$tpbench" --models "$models" --tokens "$tokens" --db "$work/inputs.db"
cp "$repo/examples/tpbench-h200-sample.db" "$work/predict.db"
"$tpbench" import "$work/inputs.db" --db "$work/predict.db" >/dev/null || status=1
"$tpbench" project --db "$work/predict.db" "${request[@]}" --format csv >"$work/before.csv" ||
  status=1

# The estimated shapes, once each, per dtype in runs of a few (scripts/lib.sh)
step measure-gemms tp_measure_estimated_gemms "$tpbench" "$work/predict.db" "$work/shapes.db" \
  "$work" "${request[@]}"
cat "$work/measure-gemms.log" >>"$summary"
echo "estimated GEMM shapes: $(wc -l <"$work/estimated.txt")" | tee -a "$summary"

if [ ! -s "$work/estimated.txt" ]; then
  echo "== nothing estimated: every GEMM the prediction reads is a row of its exact shape" |
    tee -a "$summary"
  tar czf "$out/gemm-shapes.tgz" -C "$out" gemm-shapes
  exit "$status"
fi
cp "$work/predict.db" "$work/exact.db"
"$tpbench" import "$work/shapes.db" --db "$work/exact.db" >/dev/null || status=1
"$tpbench" project --db "$work/exact.db" "${request[@]}" --format csv >"$work/after.csv" ||
  status=1
"$tpbench" project --db "$work/exact.db" "${request[@]}" >"$work/after.md" || status=1
if command -v python3 >/dev/null; then
  step check python3 "$repo/scripts/gemm-model-check.py" "$work/gemms.csv" "$work/shapes.db" \
    --predictions "$work/before.csv" "$work/after.csv"
else
  echo "== check: no python3 here: run scripts/gemm-model-check.py on the archive" |
    tee -a "$summary"
fi
tar czf "$out/gemm-shapes.tgz" -C "$out" gemm-shapes
exit "$status"
