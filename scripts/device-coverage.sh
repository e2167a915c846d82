#!/usr/bin/env bash
# device-coverage.sh — the coverage matrix on a machine of ONE GPU: every
# TP-degree-dependent path of `tpbench ops`, `run` and `drift` at TP 1, 2, 4
# and 8 and on the dp x tp meshes 2 x 2, 2 x 4 and 4 x 2, the ranks sharing
# device 0 (TPBENCH_TEST_SHARE_GPU=1, a test knob recorded with every run:
# the timings mean nothing, the numerics checks and the schedule evidence do).
#
# Each command writes its own database; lanes run side by side (the card has
# room, the host has the cores for NCCL's loopback sockets), every command
# under a deadline so the whole call ends in time. Each finished database is
# appended at once to $OUT/coverage.tar (a kill loses only what was running),
# with its stderr. Then every database is imported into one, coverage.db, and
# `scripts/coverage-table.py` prints the table docs/coverage.md shows
# (`scripts/coverage-page.py coverage.db` writes it there).
#
# usage: scripts/device-coverage.sh BUILD_DIR [SECONDS]   (default 480)
#   LANES="a b" runs some lanes only (see the lane_* functions).
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-coverage.sh BUILD_DIR [SECONDS]}
budget=${2:-480}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-/tmp/tpbench-out}
work=$out/cov
mkdir -p "$work"
tar_file=$out/coverage.tar
tp_device_env
export TPBENCH_TEST_SHARE_GPU=1
tpbench=$build/tpbench
end=$(($(date +%s) + budget - 40)) # the import and the table need the last seconds
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader

# Appends files to the archive, one lane at a time.
keep() { (flock 9 && tar rf "$tar_file" -C "$out" "$@") 9> "$out/.tar.lock"; }

# run_cmd NAME CMD...: CMD under what is left of the deadline; its database,
# stdout and stderr kept as NAME.*; one status line.
run_cmd() {
  local name=$1
  shift
  local left=$((end - $(date +%s)))
  if ((left < 20)); then
    echo "$name: not run (deadline)"
    return
  fi
  local t0
  t0=$(date +%s)
  timeout -k 5 "$left" "$@" --db "$work/$name.db" > "$work/$name.out" 2> "$work/$name.err"
  local rc=$?
  echo "$name: exit $rc in $(($(date +%s) - t0)) s"
  local dbs
  mapfile -t dbs < <(cd "$out" && ls cov/"$name".db* 2> /dev/null)
  keep "cov/$name.out" "cov/$name.err" "${dbs[@]}"
}

few=(--warmup 1 --iters 2 --rounds 1 --quiet --timeout 90)
ops() { # ops NAME TP [axes...]
  local name=$1 tp=$2
  shift 2
  local gpus=$((tp > 1 ? tp : 1))
  run_cmd "$name" "$tpbench" ops --gpus "$gpus" --tp "$tp" --models 1b --projs qkv,w13,wo --tokens 1024 \
    --stock plain "${few[@]}" "$@"
}
layers() { # layers NAME DP TP [axes...]
  local name=$1 dp=$2 tp=$3
  shift 3
  run_cmd "$name" "$tpbench" run --gpus $((dp * tp)) --axis tp="$tp" --axis dp="$dp" \
    --models 1b --stock plain "${few[@]}" "$@"
}
drift() { # drift NAME TP
  run_cmd "$1" "$tpbench" drift --gpus "$2" --model 1b --layer ffn --seqlen 256 --steps 10 \
    --schedules ce --rs-sum epilogue,nccl --repeat 1 --timeout 90 --quiet
}

# The covering set: every path value at every degree at least once, on two
# projections (qkv: the all-gather side; wo: the reduce-scatter side; w13,
# the two-weight gather, where chunks are varied), few iterations. The
# layers force ce and sm: on these small shapes auto takes the stock path
# (below 4 MiB a transfer), which would leave the fused layers unrun.
ops_degree() {
  local tp=$1
  ops "ops-tp$tp-formats" "$tp" --projs qkv,wo --dtype bf16,fp32,fp8,fp8-row,fp8-block \
    --schedule ce --pass fwd+bwd
  ops "ops-tp$tp-schedules" "$tp" --projs qkv,wo --dtype bf16,fp8 --schedule auto,sm,ring \
    --pass fwd,bwd
  ops "ops-tp$tp-chunks" "$tp" --projs qkv,w13,wo --dtype bf16 --schedule ce,sm \
    --chunks 1,2,4 --pass bwd --save-gathered on
  ops "ops-tp$tp-comm" "$tp" --projs qkv,wo --dtype fp8-row --axis comm_dtype=bf16 \
    --schedule ce --pass fwd
  ops_trace "$tp"
}
ops_trace() {
  ops "ops-tp$1-trace" "$1" --projs qkv,wo --dtype bf16,fp8 --schedule ce,sm --pass fwd --trace
}
layers_degree() {
  local tp=$1
  layers "run-tp$tp-layers" 1 "$tp" --axis layer=attention,ffn,block --axis seqlen=512 \
    --axis sp=on,off --axis graph=off --axis pass=fwd+bwd --axis backend=stock,dist_gemm --axis schedule=ce,sm
  layers "run-tp$tp-graphs" 1 "$tp" --axis layer=block --axis seqlen=256,512 \
    --axis graph=on,mixed --axis pass=fwd --axis backend=stock,dist_gemm --axis schedule=ce,sm
  layers "run-tp$tp-ac" 1 "$tp" --axis layer=block --axis seqlen=512 --axis graph=off \
    --axis ac=selective,full --axis pass=fwd+bwd --axis backend=stock,dist_gemm --axis schedule=ce,sm
  layers "run-tp$tp-formats" 1 "$tp" --axis layer=ffn --axis seqlen=512 \
    --axis dtype=fp8,fp8-row,fp8-block --axis graph=off --axis pass=fwd+bwd \
    --axis backend=stock,dist_gemm --axis schedule=ce,sm
  layers "run-tp$tp-fsdp" 1 "$tp" --axis layer=ffn --axis seqlen=512 --axis graph=off \
    --axis fsdp_traffic=on --axis pass=fwd+bwd --axis backend=stock,dist_gemm --axis schedule=ce,sm
  layers_auto "$tp"
}
# auto's own choice in a layer (on these shapes it may take the stock path: recorded); stock runs
# beside it because a layer's numerics checks compare with the case's stock configuration
layers_auto() {
  layers "run-tp$1-auto" 1 "$1" --axis layer=attention,block --axis seqlen=512 --axis graph=off \
    --axis pass=fwd+bwd --axis backend=stock,dist_gemm --axis schedule=auto
}
mesh() { # mesh DP TP
  layers "run-dp$1-tp$2" "$1" "$2" --axis layer=ffn,block --axis batch=4 --axis seqlen=256 \
    --axis ac=none,full --axis graph=off --axis pass=fwd+bwd --axis backend=stock,dist_gemm \
    --axis schedule=ce,sm
}
mesh_more() { # mesh_more DP TP: attention, SP off, selective recomputation and auto on a mesh
  layers "run-dp$1-tp$2-more" "$1" "$2" --axis layer=attention,ffn --axis batch=4 --axis seqlen=256 \
    --axis sp=on,off --axis ac=selective --axis graph=off --axis pass=fwd+bwd \
    --axis backend=stock,dist_gemm --axis schedule=auto,ce,sm
}

# Lanes side by side, the largest degrees first; LANES picks some (default
# a-h: TP 8, 4, 2, the meshes (two lanes), drift, and TP 1 last).
lane_a() { ops_degree 8; }
lane_b() { ops_degree 4; }
lane_c() { ops_degree 2; layers_degree 2; }
lane_d() { layers_degree 8; }
lane_e() { layers_degree 4; }
lane_f() { mesh 2 2; mesh 2 4; mesh 4 2; }
lane_f2() { mesh_more 2 2; mesh_more 2 4; mesh_more 4 2; }
lane_g() { drift drift-tp8 8; drift drift-tp4 4; drift drift-tp2 2; }
lane_h() { ops_degree 1; layers_degree 1; drift drift-tp1 1; }
# Short calls: one mesh a lane; fp32 and traced windows at TP 4 and 8.
lane_m1() { mesh 2 2; }
lane_m2() { mesh 2 4; }
lane_m3() { mesh 4 2; }
lane_fp32() {
  ops ops-tp4-fp32 4 --projs qkv,w13,wo --dtype fp32 --schedule ce,sm --pass fwd,fwd+bwd
  ops ops-tp8-fp32 8 --projs qkv,w13,wo --dtype fp32 --schedule ce,sm --pass fwd,fwd+bwd
}
lane_trace() { ops_trace 4; ops_trace 8; }
# What the default set gained after the committed database's runs: auto in the layers, drift
# at TP 1 (with lane f2, the meshes' second run).
lane_added() { layers_auto 8; layers_auto 4; layers_auto 2; layers_auto 1; drift drift-tp1 1; }

for lane in ${LANES:-a b c d e f f2 g h}; do
  "lane_$lane" > "$work/lane-$lane.log" 2>&1 &
done
wait
cat "$work"/lane-*.log

dbs=()
for f in "$work"/*.db; do [ -s "$f" ] && dbs+=("$f"); done
rm -f "$out/coverage.db"
if ((${#dbs[@]})); then
  "$tpbench" import "${dbs[@]}" --db "$out/coverage.db" > "$work/import.log" 2>&1 ||
    echo "import failed: $(tail -n 3 "$work/import.log")"
  python3 "$here/coverage-table.py" "$out/coverage.db" | tee "$out/coverage.md"
fi
mapfile -t logs < <(cd "$out" && ls cov/lane-*.log cov/import.log 2> /dev/null)
keep "${logs[@]}"
