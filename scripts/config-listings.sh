#!/usr/bin/env bash
# config-listings.sh — writes the configurations one tpbench binary lists,
# without a GPU, into OUT_DIR, one file per invocation (stdout, then the exit
# status; stderr beside it): `ops --list` and `matrix` (run's configurations,
# and `--for ops`) for the default and wide matrices at every TP degree, the
# bare shapes and the composition table. Two binaries behave the same on the
# matrix when `diff -r OLD_DIR NEW_DIR` prints nothing: run it around a change
# that must not touch a configuration's key, status or reason.
#
# usage: scripts/config-listings.sh TPBENCH OUT_DIR
# shellcheck disable=SC2054 # the commas separate an option's values, not array elements
set -uo pipefail
if [ $# -ne 2 ] || [ ! -x "$1" ]; then
  echo "usage: config-listings.sh TPBENCH OUT_DIR" >&2
  exit 2
fi
bin=$1 out=$2
mkdir -p "$out"
wide_ops=(--models debug,1b,8b,70b --projs qkv,wo,w13,w2 --tokens 2048,4096,8192
  --dtype bf16,fp32,fp8,fp8-row,fp8-block,mxfp8 --schedule auto,ce,sm,ring,multimem
  --chunks 0,1,2,4 --pass fwd,bwd,fwd+bwd --save-gathered off,on --stock plain,window
  --symm ipc,nccl --axis comm_dtype=bf16,fp8)
wide_run=(--preset full --axis model=debug,8b --axis seqlen=2048,4096 --axis graph=off --axis dp=1
  --axis dtype=bf16,fp32,fp8,fp8-row,fp8-block,mxfp8 --axis schedule=auto,ce,sm,ring,multimem
  --axis chunks=0,1,2 --axis comm_dtype=bf16,fp8 --axis pass=fwd,fwd+bwd --axis sp=on,off
  --axis tp=1,2,4,8)
wide_run_ops=(--for ops --axis dtype=bf16,fp8,fp8-row,fp8-block,mxfp8
  --axis schedule=auto,ce,sm,ring --axis pass=fwd,bwd,fwd+bwd --axis comm_dtype=bf16,fp8
  --axis tp=1,2,4,8)
list() { # $1: the file's name; the rest: tpbench's arguments
  local name=$1
  shift
  "$bin" "$@" > "$out/$name.out" 2> "$out/$name.err"
  echo "exit $?" >> "$out/$name.out"
}
list ops-default ops --list
for tp in 1 2 4 8; do list "ops-wide-tp$tp" ops --list --gpus "$tp" --tp "$tp" "${wide_ops[@]}"; done
list ops-shapes ops --list --gpus 2 --tp 2 --shape 4096,4096,4096 --shape 4096,4096,4096,linear_rs \
  --shape 2048,4096,4096,ag_linear_multi --dtype bf16,fp8,fp8-row,fp8-block,mxfp8 \
  --pass fwd,fwd+bwd --schedule auto,ce,sm --chunks 0,1,2 --axis comm_dtype=bf16,fp8
list matrix-default matrix
list matrix-quick-ops matrix --for ops
list matrix-full matrix --preset full
for g in 1 2 4 8; do
  list "matrix-wide-g$g" matrix --gpus "$g" "${wide_run[@]}"
  list "matrix-wide-ops-g$g" matrix --gpus "$g" "${wide_run_ops[@]}"
done
list matrix-composition matrix --composition --gpus 8
n=0
for f in "$out"/*.out; do [ -e "$f" ] && n=$((n + 1)); done
echo "$n listings in $out"
