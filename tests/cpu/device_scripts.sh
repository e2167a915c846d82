#!/usr/bin/env bash
# device_scripts.sh — the device scripts' parts that run without a GPU:
# scripts/device-gpu-tests.sh's stamp_lines gives each line back exactly after its stamp (a last
# line without a newline too); the script on a fake build folder (ctest entries that pass and
# fail, labelled tp2) gives exit 1 on a failure, its summary and a stamped copy of ctest's output;
# a folder that is not a build, a build without the degree's tests and a bad degree exit non-zero
# and say why; no run leaves a process or its temporary folder behind. scripts/device-recipe-check.sh
# refuses a PARTS word it does not know (exit 2, before running anything); its comparison (the
# python of step 3) reads rel_err to 12 digits and every other value whole (a count or a byte
# total stored as a float, a maximum), and names the side whose log or database is missing. Skips (77) where python3
# or ctest is missing. scripts/pack-build.sh refuses a build folder not built from HEAD with a clean
# tree (exit 2, no archive, the reason said). scripts/device-gemm-shapes.sh measures each shape
# `project --gemms` estimates once, in --shape lists within the axis limit (a stub tpbench).
# usage: device_scripts.sh REPO_ROOT
set -uo pipefail
repo=$(cd "${1:?usage: device_scripts.sh REPO_ROOT}" && pwd)
gpu_tests=$repo/scripts/device-gpu-tests.sh
recipe_check=$repo/scripts/device-recipe-check.sh
for tool in python3 ctest; do
  command -v "$tool" > /dev/null || { echo "$tool missing: skipped"; exit 77; }
done
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }

# 1. stamp_lines: "SSSSS.CC " and then the line as it came (backslashes, percent signs, leading
#    blanks, tabs, a CR, a line of 200000 characters, an empty line, no newline at the end)
python3 - "$scratch/in.txt" << 'PY'
import sys
open(sys.argv[1], "w", newline="").write(
    "plain\n  leading spaces\nback\\slash \\n \\t\npercent %s %d %%\n\ttab\n" + "x" * 200000
    + "\n\nempty above\r\ncr line\nlast without newline")
PY
(
  # shellcheck source=/dev/null
  source <(sed -n '/^stamp_lines() {/,/^}/p' "$gpu_tests")
  stamp_lines < "$scratch/in.txt" > "$scratch/stamped.txt"
)
grep -qvE '^ {0,4}[0-9]+\.[0-9]{2} ' "$scratch/stamped.txt" &&
  fail "stamp_lines: a line without its stamp: $(grep -vE '^ *[0-9]+\.[0-9]{2} ' "$scratch/stamped.txt" | head -c 200)"
sed 's/^.\{9\}//' "$scratch/stamped.txt" > "$scratch/back.txt" # (cut would add a newline)
cmp -s "$scratch/in.txt" "$scratch/back.txt" ||
  fail "stamp_lines: the text after the stamps differs from the input: $(cmp "$scratch/in.txt" "$scratch/back.txt" 2>&1)"

# 2. device-gpu-tests.sh on fake build folders (no GPU: nvidia-smi's errors land in its logs)
# fake_build DIR ENTRY...: a folder ctest reads, each ENTRY "NAME LABEL EXIT" a test printing a
# line with a backslash and a percent sign and exiting EXIT
fake_build() {
  local dir=$1 name label code
  shift
  mkdir -p "$dir"
  echo "CMAKE_HOME_DIRECTORY:INTERNAL=$repo" > "$dir/CMakeCache.txt"
  : > "$dir/CTestTestfile.cmake"
  for entry in "$@"; do
    read -r name label code <<< "$entry"
    printf 'add_test(%s "sh" "-c" "echo %s says back\\\\slash 100%%%%; exit %s")\n' \
      "$name" "$name" "$code" >> "$dir/CTestTestfile.cmake"
    printf 'set_tests_properties(%s PROPERTIES LABELS "%s")\n' "$name" "$label" \
      >> "$dir/CTestTestfile.cmake"
  done
}
# gpu_tests_run NAME BUILD DEGREES: runs the script with its own OUT and TMPDIR; rc, stdout and
# stderr in $scratch/NAME.{rc,out,err}; fails the check if it left a process or a folder behind
gpu_tests_run() {
  local name=$1 tmp=$scratch/$1.tmp
  mkdir -p "$tmp"
  OUT=$scratch/$name.outdir TMPDIR=$tmp GPU_TESTS_BUDGET_S=120 \
    timeout 100 bash "$gpu_tests" "$2" "$3" > "$scratch/$name.out" 2> "$scratch/$name.err"
  echo $? > "$scratch/$name.rc"
  sleep 0.2
  if pgrep -f "device-gpu-tests.sh $2" > /dev/null; then
    fail "$name: a process of the script is still running: $(pgrep -af "device-gpu-tests.sh $2")"
    pgrep -f "device-gpu-tests.sh $2" | xargs -r kill
  fi
  [ -z "$(ls -A "$tmp")" ] || fail "$name: left its temporary folder: $(ls "$tmp")"
}
rc_of() { cat "$scratch/$1.rc"; }

fake_build "$scratch/good" "t_one_tp2_shared tp2 0" "t_two_tp2_shared tp2 0" "t_tp4_shared tp4 0"
gpu_tests_run good "$scratch/good" 2
[ "$(rc_of good)" = 0 ] || fail "good: exit $(rc_of good), not 0: $(cat "$scratch/good.out" "$scratch/good.err")"
grep -q '^TP 2: 2 selected: 2 passed, 0 failed, 0 timed out, 0 skipped, 0 not run;' "$scratch/good.out" ||
  fail "good: no summary line of 2 passed: $(cat "$scratch/good.out")"
if tar xzf "$scratch/good.outdir/gpu-tests.tgz" -C "$scratch/good.outdir"; then
  logs=$scratch/good.outdir/gpu-tests
  sed 's/^.\{9\}//' "$logs/tp2-stamped.txt" | cmp -s - <(tail -n +2 "$logs/tp2.txt") ||
    fail "good: tp2-stamped.txt is not tp2.txt's ctest output, stamped"
  grep -q 'says back\\slash 100%' "$logs/tp2.txt" || fail "good: the tests' output is not in tp2.txt"
  [ -e "$logs/load.txt" ] || fail "good: no load.txt"
else
  fail "good: no gpu-tests.tgz"
fi

fake_build "$scratch/bad" "t_ok_tp2_shared tp2 0" "t_failing_tp2_shared tp2 1"
gpu_tests_run bad "$scratch/bad" 2
[ "$(rc_of bad)" = 1 ] || fail "bad: a failing test gives exit $(rc_of bad), not 1"
grep -q '^TP 2: 2 selected: 1 passed, 1 failed' "$scratch/bad.out" ||
  fail "bad: no summary line of 1 failed: $(cat "$scratch/bad.out")"

gpu_tests_run nobuild "$scratch/no-such-build" 2
[ "$(rc_of nobuild)" = 2 ] || fail "nobuild: a missing build folder gives exit $(rc_of nobuild), not 2"
grep -q 'not a build folder' "$scratch/nobuild.err" ||
  fail "nobuild: no message saying why: $(cat "$scratch/nobuild.err")"

gpu_tests_run notests "$scratch/good" 8
[ "$(rc_of notests)" = 1 ] || fail "notests: a degree without tests gives exit $(rc_of notests), not 1"
grep -q '^TP 8: no test labelled tp8' "$scratch/notests.out" ||
  fail "notests: no line saying TP 8 has no tests: $(cat "$scratch/notests.out")"

for degree in 3 "2 x" 16 ","; do
  gpu_tests_run baddegree "$scratch/good" "$degree"
  [ "$(rc_of baddegree)" = 2 ] || fail "degree '$degree': exit $(rc_of baddegree), not 2"
  grep -q "degree.* '[^']*': each one of 2, 4, 8" "$scratch/baddegree.err" ||
    fail "degree '$degree': no message saying why: $(cat "$scratch/baddegree.err")"
done

# 3. device-recipe-check.sh's PARTS: a word it does not know stops it before anything runs
for side in old new; do
  mkdir -p "$scratch/rc-$side"
  printf '#!/bin/sh\necho "tpbench stub: $*" >> "%s/rc-ran"\nexit 1\n' "$scratch" \
    > "$scratch/rc-$side/tpbench"
  chmod +x "$scratch/rc-$side/tpbench"
done
for parts in bogus "tests,bogus" "run" " "; do
  rm -rf "$scratch/rc-out" "$scratch/rc-ran"
  PARTS=$parts OUT=$scratch/rc-out timeout 60 bash "$recipe_check" "$scratch/rc-old" \
    "$scratch/rc-new" > "$scratch/rc.out" 2> "$scratch/rc.err"
  rc=$?
  [ "$rc" = 2 ] || fail "PARTS='$parts': exit $rc, not 2: $(cat "$scratch/rc.out" "$scratch/rc.err")"
  grep -q "PARTS" "$scratch/rc.err" || fail "PARTS='$parts': no message saying why: $(cat "$scratch/rc.err")"
  if [ -e "$scratch/rc-ran" ] || [ -e "$scratch/rc-out" ]; then fail "PARTS='$parts': it ran something"; fi
done
# ... and PARTS=runs runs the runs (a stub that fails them) and no GPU test
rm -rf "$scratch/rc-out" "$scratch/rc-ran"
PARTS=runs OUT=$scratch/rc-out timeout 60 bash "$recipe_check" "$scratch/rc-old" "$scratch/rc-new" \
  > "$scratch/rc.out" 2> "$scratch/rc.err"
grep -q '^tpbench stub: ops' "$scratch/rc-ran" 2> /dev/null || fail "PARTS=runs: tpbench ops did not run"
grep -q '^plain: the GPU tests did not run' "$scratch/rc.out" ||
  fail "PARTS=runs: the comparison does not say the GPU tests did not run: $(cat "$scratch/rc.out")"

# 4. the comparison, on folders made here
sed -n "/^python3 - \"\$work\" << 'PY'\$/,/^PY\$/p" "$recipe_check" | sed '1d;$d' > "$scratch/compare.py"
[ -s "$scratch/compare.py" ] || fail "no comparison heredoc in device-recipe-check.sh"
# make_db PATH REL_ERR MAX_ABS_ERR BYTES_MOVED ELEMENTS: one configuration with a check and a result
make_db() {
  python3 - "$@" << 'PY'
import sqlite3, sys
path, rel, mae, moved, elements = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
c = sqlite3.connect(path)
c.executescript("""
create table configs (id integer primary key, config_key text, status text, reason text);
create table schedules (config_id int, seq int, op text, schedule text, engine text, chunks int, reason text);
create table checks (config_id int, seq int, output text, rule text, status text, elements int, nonfinite int,
                     differ int, rel_err real, max_abs_err real, tolerance real, reason text);
create table results (config_id int, numerics text, numerics_reason text, rel_err real, max_abs_err real,
                      fused int, bytes_moved real, workspace_bytes int, alloc_peak_bytes int);
create table traces (config_id int, evidence text, evidence_message text);
insert into configs values (1, 'kind=op;tp=2', 'ok', null);
""")
c.execute("insert into checks values (1, 0, 'y', 'vs fp64', 'ok', ?, 0, 0, ?, ?, 0.01, null)", (elements, rel, mae))
c.execute("insert into results values (1, 'ok', null, ?, ?, 1, ?, 0, 0)", (rel, mae, moved))
c.commit()
PY
}
cmp_dir=$scratch/cmp
mkdir -p "$cmp_dir"
# ops-tp1: rel_err differs in its 16th digit only (atomicAdd's order): the same
make_db "$cmp_dir/old-ops-tp1.db" 0.0123456789012345 0.5 786432 1024
make_db "$cmp_dir/new-ops-tp1.db" 0.0123456789012347 0.5 786432 1024
# ops-tp2: a byte total stored as a float, 1e13 against 1e13 + 1: differs
make_db "$cmp_dir/old-ops-tp2.db" 0.01 0.5 10000000000000 1024
make_db "$cmp_dir/new-ops-tp2.db" 0.01 0.5 10000000000001 1024
# run-tp1: a maximum differing in its 14th digit: differs
make_db "$cmp_dir/old-run-tp1.db" 0.01 0.12345678901234 786432 1024
make_db "$cmp_dir/new-run-tp1.db" 0.01 0.12345678901237 786432 1024
# run-tp2: a count: differs; trace: the old side's database is missing
make_db "$cmp_dir/old-run-tp2.db" 0.01 0.5 786432 1024
make_db "$cmp_dir/new-run-tp2.db" 0.01 0.5 786432 1025
make_db "$cmp_dir/new-trace.db" 0.01 0.5 786432 1024
# the GPU tests: plain ran on the new side only
echo "1: hello" > "$cmp_dir/gpu-plain-new.log"
python3 "$scratch/compare.py" "$cmp_dir" > "$scratch/cmp.out" 2>&1 || fail "the comparison failed: $(cat "$scratch/cmp.out")"
section() { sed -n "/^$1:/,/^[a-z0-9-]*:/p" "$scratch/cmp.out"; }
section ops-tp1 | grep -qE '^  checks +same' ||
  fail "rel_err differing in its 16th digit reads as a difference: $(section ops-tp1)"
section ops-tp1 | grep -qE '^  numerics +same' ||
  fail "rel_err differing in its 16th digit reads as a difference: $(section ops-tp1)"
section ops-tp2 | grep -qE '^  numerics +DIFFERS' ||
  fail "bytes_moved 1e13 against 1e13 + 1 reads the same: $(section ops-tp2)"
section run-tp1 | grep -qE '^  checks +DIFFERS' ||
  fail "max_abs_err differing in its 14th digit reads the same: $(section run-tp1)"
section run-tp2 | grep -qE '^  checks +DIFFERS' || fail "elements 1024 against 1025 reads the same: $(section run-tp2)"
grep -q '^trace: MISSING: no old side' "$scratch/cmp.out" ||
  fail "a database missing on one side is not named: $(grep '^trace' "$scratch/cmp.out")"
grep -q '^plain: MISSING: no old side' "$scratch/cmp.out" ||
  fail "a GPU log missing on one side is not named: $(grep '^plain' "$scratch/cmp.out")"
grep -q '^shared: the GPU tests did not run' "$scratch/cmp.out" ||
  fail "GPU tests run on neither side are not said so: $(grep '^shared' "$scratch/cmp.out")"

# scripts/pack-build.sh packs only a build of HEAD with a clean tree: a binary built before the
# last commit would file its runs under the commit before it, marked dirty. What the binary says
# (`tpbench --version`) counts, not generated/tp_buildinfo.h, which a cut build or `--target
# tp_buildinfo` rewrites to HEAD without relinking the binary. A fake build folder (a tpbench
# that says its commit) of HEAD dirty, of another commit, of none, and of HEAD dirty beside a
# build info of HEAD clean: refused, exit 2, no archive; PACK_ANY_BUILD=1 lets it past the guard.
# A relative build folder above the current one (../build) is refused: staged, it lands outside
# the stage.
pack=$repo/scripts/pack-build.sh
head_sha=$(git -C "$repo" rev-parse HEAD 2> /dev/null)
if [ -n "$head_sha" ]; then
  fake=$scratch/fake-build
  mkdir -p "$fake/generated"
  for info in "$head_sha 1" "0123456789abcdef0123456789abcdef01234567 0" "none" "$head_sha 1 info-clean"; do
    rm -f "$fake/generated/tp_buildinfo.h" "$scratch/pack.tar.xz"
    read -r sha dirty header <<< "$info"
    if [ "$sha" = none ]; then
      printf '#!/bin/sh\n' > "$fake/tpbench"
    else
      printf '#!/bin/sh\necho "tpbench 0.1.0 (commit %s%s)"\n' "$sha" \
        "$([ "$dirty" = 1 ] && echo ", with uncommitted changes")" > "$fake/tpbench"
      [ "$header" = info-clean ] && dirty=0
      printf '#define TP_BUILD_COMMIT "%s"\n#define TP_BUILD_DIRTY %s\n' "$sha" "$dirty" > "$fake/generated/tp_buildinfo.h"
    fi
    chmod +x "$fake/tpbench"
    bash "$pack" "$fake" "$scratch/pack.tar.xz" > "$scratch/pack.out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "pack-build.sh of a build of ($info) exits $rc, not 2"
    [ -e "$scratch/pack.tar.xz" ] && fail "pack-build.sh of a build of ($info) wrote an archive"
    grep -q "not from HEAD $head_sha with a clean tree" "$scratch/pack.out" ||
      fail "pack-build.sh of a build of ($info) does not say why: $(cat "$scratch/pack.out")"
  done
  # (the fake has no GPU tests to pack: past the guard it fails on them, which is all it shows)
  PACK_ANY_BUILD=1 bash "$pack" "$fake" "$scratch/pack.tar.xz" > "$scratch/pack.out" 2>&1
  grep -q "not from HEAD" "$scratch/pack.out" && fail "PACK_ANY_BUILD=1 is refused all the same"
  # a build of HEAD, clean, given as ../NAME: refused, nothing staged beside the stage
  printf '#!/bin/sh\necho "tpbench 0.1.0 (commit %s)"\n' "$head_sha" > "$fake/tpbench"
  mkdir -p "$scratch/below"
  (cd "$scratch/below" && TMPDIR=$scratch/below bash "$pack" ../fake-build "$scratch/pack.tar.xz") \
    > "$scratch/pack.out" 2>&1
  rc=$?
  [ "$rc" -eq 2 ] || fail "pack-build.sh of ../fake-build exits $rc, not 2: $(cat "$scratch/pack.out")"
  grep -q "above this folder" "$scratch/pack.out" ||
    fail "pack-build.sh of ../fake-build does not say why: $(cat "$scratch/pack.out")"
fi

# 6. scripts/device-gemm-shapes.sh measures every estimated shape `project --gemms` lists exactly
#    once, in runs whose --shape list stays within the axis's 511 characters (its batch loop
#    once overwrote the shape being read: some shapes twice, others never). A stub tpbench lists
#    40 estimated shapes (and one exact, never measured) and logs each `ops` call's shapes.
stub=$scratch/gs-build
mkdir -p "$stub"
echo "CMAKE_HOME_DIRECTORY:INTERNAL=$repo" > "$stub/CMakeCache.txt"
cat > "$stub/tpbench" << STUB
#!/usr/bin/env bash
case "\$1 \$*" in
  "project "*--gemms*)
    # CRLF line ends, as project writes its CSV
    printf '%s\r\n' "model,proj,tokens,tp,role,dtype,m,n,k,op,weights,gflop,exact,us,source"
    for i in \$(seq 1 40); do
      printf '%s\r\n' "m,qkv,4096,8,chunk,bf16,\$((512 * i)),12345,16384,ag_linear_multi,2,1.0,0,9.0,\"a, b\""
    done
    printf '%s\r\n' "m,wo,4096,8,stock,bf16,4096,4096,512,linear_rs,1,1.0,1,9.0,config 7" ;;
  "ops "*)
    line=""
    prev=""
    for a in "\$@"; do
      [ "\$prev" = --shape ] && line="\$line\$a,"
      prev=\$a
    done
    echo "\$line" >> "$scratch/gs-shapes.log" ;;
esac
exit 0
STUB
chmod +x "$stub/tpbench"
: > "$scratch/gs-shapes.log"
OUT=$scratch/gs-out timeout 60 bash "$repo/scripts/device-gemm-shapes.sh" "$stub" > "$scratch/gs.out" 2>&1
# the first ops call is the TP 1 inputs (no --shape): an empty line
measured=$(tail -n +2 "$scratch/gs-shapes.log" | tr ',' '\n' | grep . | paste -d, - - - - | grep -c .)
unique=$(tail -n +2 "$scratch/gs-shapes.log" | tr ',' '\n' | grep . | paste -d, - - - - | sort -u | grep -c .)
[ "$measured" = 40 ] && [ "$unique" = 40 ] ||
  fail "device-gemm-shapes.sh measured $measured shapes ($unique distinct), not the 40 estimated once each: $(head -c 600 "$scratch/gs-shapes.log")"
grep -q '4096,4096,512,linear_rs' "$scratch/gs-shapes.log" &&
  fail "device-gemm-shapes.sh measured a shape the prediction reads exactly"
longest=$(tail -n +2 "$scratch/gs-shapes.log" | awk '{ if (length($0) > n) n = length($0) } END { print n + 0 }')
[ "$longest" -le 511 ] || fail "device-gemm-shapes.sh gave one ops call $longest characters of shapes"
batches=$(tail -n +2 "$scratch/gs-shapes.log" | grep -c .)
[ "$batches" -ge 2 ] || fail "40 shapes of about 30 characters in $batches ops call(s): no batching seen"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "device scripts: all checks passed"
