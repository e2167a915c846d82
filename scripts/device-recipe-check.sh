#!/usr/bin/env bash
# device-recipe-check.sh — on a machine with one GPU, checks that a build
# behaves as an older one did (issue 29: the fp8 formats as recipes of the one
# TP projection), in one call of a few minutes:
#   1. the GPU tests of both builds, plain and at TP 2 with both ranks on
#      one GPU (TPBENCH_TEST_SHARE_GPU=1: the NAME_tp2_shared entries), old
#      and new side by side; each test's output with times, addresses, ports
#      and paths masked, old against new;
#   2. `tpbench ops` and `tpbench run` with both builds on small shapes: the
#      debug model (1b for the traced case), bf16 and the
#      fp8 formats, fwd and fwd+bwd, TP 1 and TP 2 on the shared GPU, plus a
#      traced fp8 dist_gemm case (--trace);
#   3. old against new: every configuration's status and reason, the
#      schedules that ran, every check's verdict and numbers (elements, not
#      finite, differing, errors, bound) and the traces' evidence; timings
#      and memory readings are left out (memory is listed apart: the fp8
#      projections share the group's cuBLASLt workspace since issue 29).
# Everything goes into $OUT/recipe-check.tgz; the comparison is printed too.
#
# usage: scripts/device-recipe-check.sh OLD_BUILD NEW_BUILD
#   SERIAL=1           run the old and new sides one after the other (default: at once)
#   PARTS="tests runs" the parts to run, space- or comma-separated (tests: 1, runs: 2; default
#                      both; another word exits 2); 3 compares the parts this call ran and says
#                      which did not run (each call writes its own $OUT/recipe-check.tgz: a
#                      second call with the same OUT replaces the first's)
#   TESTS_EXCLUDE=RE   GPU tests left out (default '^gpu_quant$': the quantizer's own
#                      test, 2 of the suite's 3.5 minutes, code issue 29 does not touch)
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
usage="usage: device-recipe-check.sh OLD_BUILD NEW_BUILD"
old=${1:?$usage}
new=${2:?$usage}
parts=${PARTS:-tests runs}
read -ra part_list <<< "${parts//,/ }"
if ((${#part_list[@]} == 0)); then
  echo "device-recipe-check.sh: PARTS='$parts' names no part (tests, runs)" >&2
  exit 2
fi
parts=" ${part_list[*]} "
for part in "${part_list[@]}"; do
  case $part in
    tests | runs) ;;
    *)
      echo "device-recipe-check.sh: PARTS: '$part' is not a part (tests, runs)" >&2
      exit 2
      ;;
  esac
done
for b in "$old" "$new"; do [ -x "$b/tpbench" ] || { echo "no tpbench in $b" >&2; exit 2; }; done
old=$(realpath "$old")
new=$(realpath "$new")
exclude=${TESTS_EXCLUDE-^gpu_quant\$}
out=${OUT:-/tmp/tpbench-out}
work=$out/recipe-check
mkdir -p "$work"
tp_device_env
tp_device_checkout_at_build_path "$new"
tp_device_checkout_at_build_path "$old"
nvidia-smi --query-gpu=name,driver_version --format=csv > "$work/host.txt" 2>&1
started=$SECONDS

# Runs "$@" for the old and the new side (at once unless SERIAL=1); each
# command gets SIDE (old or new) and BUILD in its environment.
both() {
  local pids=()
  for side in old new; do
    local build=$old
    [ "$side" = new ] && build=$new
    if [ "${SERIAL:-0}" = 1 ]; then
      SIDE=$side BUILD=$build "$@"
    else
      SIDE=$side BUILD=$build "$@" &
      pids+=($!)
    fi
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
}

# ---- 1. the GPU tests ----------------------------------------------------------------------
# plain: every GPU test's own entry (one rank per GPU); shared: TP 2 with both ranks on device
# 0 — the NAME_tp2_shared entries where the build has them (label tp2, their own
# TPBENCH_TEST_SHARE_GPU=1), else every GPU test under TPBENCH_TEST_SHARE_GPU=1 (builds from
# before the GPU tests ran per degree)
gpu_tests() { # $1: plain or shared
  local mode=$1 select=(-L gpu -LE shared) env=()
  if [ "$mode" = shared ]; then
    if (cd "$BUILD" && ctest -N -L shared | grep -q 'Total Tests: [1-9]'); then
      select=(-L '^tp2$')
    else
      select=(-L gpu)
      env=(TPBENCH_TEST_SHARE_GPU=1)
    fi
  fi
  (cd "$BUILD" && env "${env[@]}" ctest "${select[@]}" ${exclude:+-E "$exclude"} -V --timeout 300) \
    > "$work/gpu-$mode-$SIDE.log" 2>&1
  echo "gpu tests ($mode, $SIDE) exit $?"
}
if [[ $parts = *" tests "* ]]; then
  both gpu_tests plain
  both gpu_tests shared
  echo "gpu tests done after $((SECONDS - started)) s"
fi

# ---- 2. ops and run ------------------------------------------------------------------------
fp8=fp8,fp8-row,fp8-block,mxfp8
few=(--warmup 1 --iters 3 --rounds 1 --quiet)
tpbench_runs() {
  local bin=$BUILD/tpbench db=$work/$SIDE
  "$bin" ops --gpus 1 --tp 1 --db "$db-ops-tp1.db" --models debug --tokens 1024 \
    --dtype "bf16,$fp8" --pass fwd,fwd+bwd "${few[@]}" > "$db-ops-tp1.log" 2>&1
  echo "ops TP 1 ($SIDE) exit $?"
  TPBENCH_TEST_SHARE_GPU=1 "$bin" ops --gpus 2 --tp 2 --db "$db-ops-tp2.db" --models debug \
    --tokens 1024 --dtype "bf16,$fp8" --pass fwd,fwd+bwd --schedule auto,ce,sm \
    --axis comm_dtype=bf16,fp8 --stock plain "${few[@]}" > "$db-ops-tp2.log" 2>&1
  echo "ops TP 2 shared ($SIDE) exit $?"
  "$bin" run --gpus 1 --db "$db-run-tp1.db" --axis tp=1 --axis model=debug --axis seqlen=512 \
    --axis layer=attention,ffn,block --axis dtype="bf16,$fp8" --axis pass=fwd,fwd+bwd \
    --axis graph=off "${few[@]}" > "$db-run-tp1.log" 2>&1
  echo "run TP 1 ($SIDE) exit $?"
  TPBENCH_TEST_SHARE_GPU=1 "$bin" run --gpus 2 --db "$db-run-tp2.db" --axis tp=2 \
    --axis model=debug --axis seqlen=512 --axis layer=attention,ffn --axis dtype="bf16,$fp8" \
    --axis comm_dtype=bf16,fp8 --axis pass=fwd,fwd+bwd --axis graph=off --axis stock=plain \
    --axis schedule=auto,ce "${few[@]}" > "$db-run-tp2.log" 2>&1
  echo "run TP 2 shared ($SIDE) exit $?"
  # an fp8 dist_gemm configuration traced: fp8-block and mxfp8 need no amax agreement
  TPBENCH_TEST_SHARE_GPU=1 "$bin" ops --gpus 2 --tp 2 --db "$db-trace.db" --models 1b \
    --projs qkv,wo --tokens 2048 --dtype bf16,fp8,fp8-block --pass fwd,fwd+bwd \
    --schedule ce,sm --stock plain --trace --trace-iters 2 "${few[@]}" > "$db-trace.log" 2>&1
  echo "ops --trace TP 2 shared ($SIDE) exit $?"
}
if [[ $parts = *" runs "* ]]; then
  both tpbench_runs
  echo "ops and run done after $((SECONDS - started)) s"
fi

# ---- 3. old against new --------------------------------------------------------------------
python3 - "$work" << 'PY'
import difflib, os, re, sqlite3, sys
work = sys.argv[1]

def mask(text):
    """What may differ between two runs of the same behaviour: times, addresses, ports, pids,
    paths, source line numbers, memory shares."""
    # a source line named in a message moves with any edit of its file (first: the path rules
    # below would take the file name with it)
    text = re.sub(r"\b([\w.-]+\.(c|cu|h)):\d+", r"\1:<LINE>", text)
    text = re.sub(r"0x[0-9a-fA-F]+", "<ADDR>", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ?", "<TIME>", text)
    text = re.sub(r"\b\d+(\.\d+)?(e[-+]?\d+)?\s*(sec|s|ms|us|µs|ns|GB/s|TFLOP/s|MiB/s)\b", "<T>", text)
    text = re.sub(r"(port|pid|PID|tid)[ =:]+\d+", r"\1 <N>", text)
    text = re.sub(r"\d+(\.\d+)? (MiB|GiB) (each|free|per rank)", r"<MEM> \3", text)
    text = re.sub(r"(^|[\s'\"(=])/[^\s:'\")]+", r"\1<PATH>", text)
    return text

def test_outputs(log):
    """ctest -V output per test: its number's lines ('N: ...'), masked."""
    per = {}
    names = {}
    for line in open(log, errors="replace"):
        m = re.match(r"^(\d+): (.*)$", line.rstrip("\n"))
        if m:
            per.setdefault(m.group(1), []).append(mask(m.group(2)))
        m = re.match(r"^\s*\d+/\d+ Test\s+#(\d+): (\S+) \.+\s*(\S.*?)\s+[\d.]+ sec", line)
        if m:
            names[m.group(1)] = (m.group(2), m.group(3))
    return {names.get(k, (k, "?"))[0]: (names.get(k, (k, "?"))[1], v) for k, v in per.items()}

print("== GPU tests: old against new (output masked) ==")
for mode in ("plain", "shared"):
    missing = [side for side in ("old", "new")
               if not os.path.exists(os.path.join(work, f"gpu-{mode}-{side}.log"))]
    if len(missing) == 2:
        print(f"{mode}: the GPU tests did not run in this call")
        continue
    if missing:
        print(f"{mode}: MISSING: no {missing[0]} side's log (gpu-{mode}-{missing[0]}.log)")
        continue
    o = test_outputs(os.path.join(work, f"gpu-{mode}-old.log"))
    n = test_outputs(os.path.join(work, f"gpu-{mode}-new.log"))
    for name in sorted(set(o) | set(n)):
        so, lo = o.get(name, ("missing", []))
        sn, ln = n.get(name, ("missing", []))
        if so == sn and (lo == ln or (mode == "shared" and sorted(lo) == sorted(ln))):
            # ranks sharing a GPU print side by side: their lines' order is not behaviour
            print(f"{mode:6} {name:28} same ({sn})")
            continue
        diff = list(difflib.unified_diff(lo, ln, "old", "new", n=0, lineterm=""))
        print(f"{mode:6} {name:28} DIFFERS: old {so}, new {sn}, {len(diff)} diff lines")
        for d in diff[:12]:
            print("    " + d)

QUERIES = {
    "configs": "select config_key, status, coalesce(reason, '') from configs order by config_key",
    "schedules": "select c.config_key, s.seq, s.op, s.schedule, coalesce(s.engine, ''), s.chunks, "
                 "coalesce(s.reason, '') from schedules s join configs c on c.id = s.config_id "
                 "order by 1, 2",
    "checks": "select c.config_key, k.seq, k.output, k.rule, k.status, k.elements, k.nonfinite, "
              "k.differ, k.rel_err, k.max_abs_err, k.tolerance, coalesce(k.reason, '') from checks k "
              "join configs c on c.id = k.config_id order by 1, 2",
    "numerics": "select c.config_key, r.numerics, coalesce(r.numerics_reason, ''), r.rel_err, "
                "r.max_abs_err, r.fused, r.bytes_moved from results r join configs c on "
                "c.id = r.config_id order by 1",
    "evidence": "select c.config_key, t.evidence, coalesce(t.evidence_message, '') from traces t "
                "join configs c on c.id = t.config_id order by 1",
    "memory (expected to differ for fp8)": "select c.config_key, r.workspace_bytes, "
                "r.alloc_peak_bytes from results r join configs c on c.id = r.config_id order by 1",
}

def rows(db, sql):
    con = sqlite3.connect(db)
    try:
        # rel_err to 12 digits: the GPU sums a check's squared errors with atomicAdd across warps
        # (kernels/tp_copy.cu, compare_kernel), so two runs of the same bits may differ in the
        # last few of a double's 17; every other value (counts, maxima, tolerances, bytes, some
        # of them stored as floats) is compared whole
        cur = con.execute(sql)
        rounded = [d[0] == "rel_err" for d in cur.description]
        return [tuple("%.12g" % v if r and isinstance(v, float) else "%.17g" % v if isinstance(v, float)
                      else v for r, v in zip(rounded, row)) for row in cur]
    finally:
        con.close()

print("\n== ops and run: old against new (timings left out) ==")
for name in ("ops-tp1", "ops-tp2", "run-tp1", "run-tp2", "trace"):
    dbs = [os.path.join(work, f"{side}-{name}.db") for side in ("old", "new")]
    missing = [side for side, d in zip(("old", "new"), dbs) if not os.path.exists(d)]
    if len(missing) == 2:
        print(f"{name}: not run in this call (no database on either side)")
        continue
    if missing:
        print(f"{name}: MISSING: no {missing[0]} side's database ({missing[0]}-{name}.db; "
              f"its log: {missing[0]}-{name}.log)")
        continue
    statuses = rows(dbs[1], "select status, count(*) from configs group by status")
    print(f"{name}: new configs " + ", ".join(f"{s} {n}" for s, n in statuses))
    for what, sql in QUERIES.items():
        o, n = rows(dbs[0], sql), rows(dbs[1], sql)
        if o == n:
            print(f"  {what:38} same ({len(n)} rows)")
            continue
        so, sn = set(o), set(n)
        only_o, only_n = [r for r in o if r not in sn], [r for r in n if r not in so]
        print(f"  {what:38} DIFFERS: {len(only_o)} rows only old, {len(only_n)} only new")
        for r in only_o[:6]:
            print("    old " + " | ".join(map(str, r))[:400])
        for r in only_n[:6]:
            print("    new " + " | ".join(map(str, r))[:400])
PY
echo "compared after $((SECONDS - started)) s"
tar czf "$out/recipe-check.tgz" -C "$out" recipe-check && rm -rf "$work"
