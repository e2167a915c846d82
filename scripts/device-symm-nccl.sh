#!/usr/bin/env bash
# device-symm-nccl.sh — dist_gemm's two transports (issue 18: symm=ipc, the
# CUDA-IPC heap, against symm=nccl, NCCL symmetric windows) on a lent GPU
# machine. Always: the GPU test gpu_symm_nccl (at one GPU it holds the NCCL
# runtime in use to what it says of one rank — refused before 2.28.7, the
# heap working from 2.28.7 — and with two it holds every fused op over
# symm=nccl to symm=ipc bit for bit). With --gpus 2 (two GPUs visible):
# `tpbench ops --symm ipc,nccl` on ops' default shapes at TP 2, then a
# comparison of the two transports per configuration (median and the rounds'
# confidence interval; "beyond noise" means the intervals do not overlap) and
# the verdict the default is chosen by: nccl may become the default only
# where it is faster somewhere beyond noise and slower nowhere beyond noise;
# then a traced pass of ce and sm over both, for the schedule evidence
# (whether CUPTI shows the pushes into NCCL-mapped memory as peer copies).
# Every log lands under $OUT. To try a newer NCCL at one GPU:
#   LD_LIBRARY_PATH=/path/to/nvidia/nccl/lib scripts/device-symm-nccl.sh build
#
# usage: scripts/device-symm-nccl.sh BUILD_DIR [--gpus N] [extra tpbench ops options...]
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=${1:?usage: device-symm-nccl.sh BUILD_DIR [--gpus N] [ops options]}
shift
gpus=1
if [ "${1:-}" = --gpus ]; then
  gpus=${2:?--gpus needs a number}
  shift 2
fi
out=${OUT:-/tmp/tpbench-out}
mkdir -p "$out"
tp_device_env

{
  echo "== host"; hostname
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "== NCCL the binary loads"; ldd "$build/tpbench" | grep -E "nccl" || true
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
} 2>&1 | tee "$out/host.txt"

echo "== gpu_symm_nccl"
"$build/tests/gpu/gpu_symm_nccl" 2>&1 | tee "$out/gpu-symm-nccl.txt"
test_rc=${PIPESTATUS[0]}

if [ "$gpus" -lt 2 ]; then
  echo "gpu_symm_nccl exit $test_rc (one GPU: the ops comparison needs --gpus 2)"
  exit $(( test_rc != 0 ))
fi

echo "== ops (TP 2, default shapes, dist_gemm over symm=ipc and symm=nccl)"
"$build/tpbench" ops --db "$out/symm.db" --gpus 2 --tp 2 --symm ipc,nccl --stock plain \
  --warmup 10 --iters 50 --rounds 5 "$@" 2>"$out/ops-progress.txt" | tee "$out/ops-table.md"
ops_rc=${PIPESTATUS[0]}
tail -n 5 "$out/ops-progress.txt"
"$build/tpbench" report --db "$out/symm.db" \
  --columns model,op,shape,pass,symm,stock_ms,dist_ms,speedup,status \
  2>&1 | tee "$out/ops-report.md"

echo "== symm=nccl against symm=ipc, per configuration"
python3 - "$out/symm.db" <<'PY' 2>&1 | tee "$out/symm-compare.md"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("""
  SELECT i.model, i.proj, i.tokens, i.pass, i.schedule, i.chunks,
         i.median_us, i.ci_lo_us, i.ci_hi_us, i.status,
         n.median_us, n.ci_lo_us, n.ci_hi_us, n.status, n.reason
  FROM config_results i JOIN config_results n
    ON n.run_id = i.run_id AND n.case_key = i.case_key AND n.backend = 'dist_gemm'
   AND n.schedule IS i.schedule AND n.chunks = i.chunks AND n.symm = 'nccl'
  WHERE i.backend = 'dist_gemm' AND i.symm = 'ipc'
  ORDER BY i.model, i.proj, i.tokens, i.pass, i.schedule""").fetchall()
if not rows:
    print("no symm=ipc / symm=nccl pairs in the database")
    sys.exit(1)
print("| model | proj | tokens | pass | schedule | ipc us [CI] | nccl us [CI] | nccl/ipc | verdict |")
print("|---|---|---|---|---|---|---|---|---|")
faster = slower = compared = 0
for (model, proj, tokens, pas, sched, chunks, im, ilo, ihi, ist, nm, nlo, nhi, nst, nwhy) in rows:
    if ist != "ok" or nst != "ok" or im is None or nm is None:
        verdict = f"not compared: ipc {ist}, nccl {nst}" + (f" ({nwhy})" if nst != "ok" and nwhy else "")
        ratio = ""
    else:
        compared += 1
        ratio = f"{nm / im:.3f}"
        if None in (ilo, ihi, nlo, nhi):
            verdict = "no confidence interval (one round?): not judged"
        elif nhi < ilo:
            verdict, faster = "nccl faster beyond noise", faster + 1
        elif nlo > ihi:
            verdict, slower = "nccl SLOWER beyond noise", slower + 1
        else:
            verdict = "within noise"
    ci = lambda m, lo, hi: "-" if m is None else (f"{m:.1f}" if lo is None else f"{m:.1f} [{lo:.1f}, {hi:.1f}]")
    print(f"| {model} | {proj} | {tokens} | {pas} | {sched} x{chunks} | {ci(im, ilo, ihi)} | "
          f"{ci(nm, nlo, nhi)} | {ratio} | {verdict} |")
print()
print(f"{len(rows)} pairs, {compared} compared: nccl faster beyond noise in {faster}, "
      f"slower beyond noise in {slower}")
if compared == 0:
    print("verdict: nothing compared; the default stays ipc")
elif slower == 0 and faster > 0:
    print("verdict: nccl is faster somewhere and slower nowhere beyond noise: it may become the default")
else:
    print("verdict: the default stays ipc (nccl " +
          ("slower beyond noise somewhere" if slower else "never faster beyond noise") + ")")
PY
cmp_rc=${PIPESTATUS[0]}

echo "== traced ce and sm over both transports (schedule evidence)"
"$build/tpbench" ops --db "$out/symm-trace.db" --gpus 2 --tp 2 --symm ipc,nccl --stock plain \
  --models 8b --projs qkv,w2 --tokens 8192 --schedule ce,sm --warmup 5 --iters 20 --rounds 2 \
  --trace 2>"$out/trace-progress.txt" | tee "$out/trace-table.md"
trace_rc=${PIPESTATUS[0]}
python3 - "$out/symm-trace.db" <<'PY' 2>&1 | tee "$out/trace-evidence.md"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for row in db.execute("""
  SELECT c.proj, c.schedule, c.symm, t.evidence, t.evidence_message
  FROM configs c JOIN traces t ON t.config_id = c.id
  WHERE c.backend = 'dist_gemm' ORDER BY c.proj, c.schedule, c.symm"""):
    print(" | ".join("" if v is None else str(v) for v in row))
PY

echo "gpu_symm_nccl exit $test_rc, ops exit $ops_rc, compare exit $cmp_rc, traced ops exit $trace_rc"
exit $(( test_rc != 0 || ops_rc != 0 || cmp_rc != 0 || trace_rc != 0 ))
