#!/usr/bin/env bash
# main-job.sh — the main job once the binary is built (scripts/run.sh builds it, then runs
# this): what it does depends on the GPUs CUDA can use on this host.
#   - Several GPUs: `tpbench run` (the layers, quick preset) into tpbench.db and its table.
#   - One GPU: tensor parallelism needs two, so no wall of rejected TP 2 configurations: the
#     GEMM alone and stock at TP 1 (`tpbench ops` on its default models and projections at
#     8192 tokens, bf16 and the fp8 recipes), a short table of them, then every stock, shard
#     and chunk GEMM the TP 2, 4 and 8 prediction reads, each alone (scripts/lib.sh's
#     tp_measure_estimated_gemms), then `tpbench project`'s TP 2, 4 and 8 from those GEMMs,
#     marked as predicted (its compact table; the command that shows every input, --columns
#     all, follows it).
#   - No GPU (or a build without CUDA): says so and shows the sample database's report
#     (examples/tpbench-h200-sample.db, measured on two H200s), marked as the sample's; exits 1,
#     since nothing was measured here.
# Arguments, when given, go to `tpbench run` as they are, whatever the host.
#
# usage: scripts/main-job.sh [tpbench run options...]
#   TPBENCH_BIN (default build/tpbench) and TPBENCH_DB (default tpbench.db) name the binary
#   and the database; TPBENCH_LINK_GBPS (default 389) the per-GPU link bandwidth the one-GPU
#   prediction assumes.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(tp_repo_root)"

bin=${TPBENCH_BIN:-./build/tpbench}
if [ ! -x "$bin" ]; then
  echo "main-job.sh: no tpbench binary at $bin (run.sh builds it; TPBENCH_BIN names another)" >&2
  exit 2
fi
db=${TPBENCH_DB:-tpbench.db}
sample=examples/tpbench-h200-sample.db
# The copy-engine push peak the sample's link probe measured on the H200 pair (run 4, 256 MiB):
# the bandwidth a one-GPU host's prediction assumes, said where it is used.
link_gbps=${TPBENCH_LINK_GBPS:-389}

if [ $# -gt 0 ]; then exec "$bin" run --db "$db" "$@"; fi

# GPUs CUDA can use: nvidia-smi's list, cut to CUDA_VISIBLE_DEVICES when that is set; none
# when the binary was built without CUDA.
gpu_count() {
  if [ -f build/CMakeCache.txt ] && ! grep -q '^TPBENCH_WITH_CUDA:BOOL=ON' build/CMakeCache.txt &&
    [ -z "${TPBENCH_BIN:-}" ]; then
    echo 0
    return
  fi
  command -v nvidia-smi > /dev/null 2>&1 || { echo 0; return; }
  local n
  n=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ' || true)
  if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
    local visible=()
    IFS=, read -ra visible <<< "$CUDA_VISIBLE_DEVICES"
    if [ "${#visible[@]}" -lt "$n" ]; then n=${#visible[@]}; fi
  fi
  echo "$n"
}

no_gpu() {
  cat << MSG
run.sh: no GPU here that CUDA can use (nvidia-smi lists none, or this build has no CUDA):
nothing can be measured on this host. tpbench still reads databases: below is the report of
the sample database's run 5 ($sample), the layers of llama3-8b and the toy debug
model, stock against dist_gemm, measured on two H200s. The figures are the sample's, not
this host's.

MSG
  "$bin" report --db "$sample" --run 5
  cat << MSG

More on the sample without a GPU: $bin runs --db $sample, $bin compare e92c4c5 a06011f
--db $sample, $bin dashboard --db $sample --out tpbench-dashboard (examples/README.md).
run.sh: exit 1: nothing was measured.
MSG
  exit 1
}

# The id of the database's last run (the largest: `runs` lists them by start time, which a run
# imported from a host whose clock ran ahead puts last); 0 when it has none (or no database).
last_run_id() {
  { "$bin" runs --db "$db" --format csv 2> /dev/null || true; } |
    awk -F, 'NR > 1 && $1 + 0 > id { id = $1 + 0 } END { print id + 0 }'
}

one_gpu() {
  local quiet=()
  [ -t 2 ] || quiet=(--quiet) # a log gets the tables, not a line per configuration
  cat << MSG
run.sh: one GPU. Tensor parallelism needs two or more, so this host measures what one GPU can
show: the GEMM alone and stock at TP 1 (no collective: NCCL copies on one rank) for the
default models and projections at 8192 tokens, in bf16 and the fp8 recipes, and each stock,
shard and chunk GEMM of TP 2, 4 and 8 alone, into $db; then predicts TP 2, 4 and 8 from those
GEMMs.
MSG
  # its full table (every rejected TP 2 configuration) stays in the database; the short one below
  local rc=0 before ops_run
  before=$(last_run_id)
  "$bin" ops --gpus 1 --tp 1 --tokens 8192 --dtype bf16,fp8,fp8-row,fp8-block --stock plain \
    --pass fwd --db "$db" "${quiet[@]}" > /dev/null || rc=$?
  ops_run=$(last_run_id)
  if [ "$ops_run" -le "$before" ]; then
    echo "main-job.sh: tpbench ops recorded no run in $db (exit $rc)" >&2
    exit "$((rc ? rc : 1))"
  fi
  echo
  echo "== Measured on this GPU, TP 1 (stock = the GEMM after a one-rank collective)"
  "$bin" report --db "$db" --run "$ops_run" \
    --columns model,proj,tokens,dtype,stock_ms,gemm_ms,stock_tokens_per_s,stock_rel_err || true
  # every GEMM the prediction reads (each rank's stock GEMM, shard and chunks) is one GPU's:
  # measured here, so that none is estimated from the FLOPs of the whole ones above; the shapes
  # predicted are this job's ops run's, not the bare GEMM shapes measured for the rates
  local request=(--tp "2,4,8" --gemm-tp 1 --link-gbps "$link_gbps" --shapes-run "$ops_run")
  local work shapes measure_rc=0
  work=$(mktemp -d)
  tp_measure_estimated_gemms "$bin" "$db" "$db" "$work" "${request[@]}" || measure_rc=1
  echo
  if [ -f "$work/estimated.txt" ]; then
    shapes=$(wc -l < "$work/estimated.txt")
    echo "== Measured on this GPU: the $shapes GEMM shapes of TP 2, 4 and 8 (stock's, the shards'"
    echo "   and the chunks') that the rows above do not hold, each alone (ops --shape; in $db)"
    if [ "$measure_rc" -ne 0 ]; then tail -n 20 "$work/measure-gemms.log"; fi
  else
    echo "== Nothing measured alone: tpbench project --gemms failed, so the prediction below (if"
    echo "   it runs) estimates its GEMMs from FLOPs"
  fi
  rm -rf "$work"
  echo
  echo "== PREDICTED, not measured: TP 2, 4 and 8 on an NVSwitch host (tpbench project), from the"
  echo "   GEMMs above and an assumed link of $link_gbps GB/s per GPU (the copy-engine peak the"
  echo "   sample's probe measured on two H200s; TPBENCH_LINK_GBPS sets another)"
  local project_rc=0
  "$bin" project --db "$db" "${request[@]}" || project_rc=$?
  # the compact table fits a terminal; the inputs of each row are a command away (quoted so
  # that it pastes whatever the paths hold)
  if [ "$project_rc" -eq 0 ]; then
    echo "== Every input of each prediction (GEMM times and their rows, collective, pipeline):"
    printf '   %q project --db %q --tp 2,4,8 --gemm-tp 1 --link-gbps %q --shapes-run %q' \
      "$bin" "$db" "$link_gbps" "$ops_run"
    echo ' --columns all'
  fi
  # ops' status first (a configuration that failed is kept and shown), then measuring's, then
  # project's
  if [ "$rc" -eq 0 ]; then rc=$measure_rc; fi
  if [ "$rc" -eq 0 ]; then rc=$project_rc; fi
  exit "$rc"
}

gpus=$(gpu_count)
case "$gpus" in
  0) no_gpu ;;
  1) one_gpu ;;
  *) exec "$bin" run --db "$db" ;;
esac
