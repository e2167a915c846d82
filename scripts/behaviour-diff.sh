#!/usr/bin/env bash
# behaviour-diff.sh — checks on the CPU that two tpbench binaries behave the
# same: runs one battery of invocations (help texts, matrix, ops --list,
# report, compare, history, trace, dashboard, import, migrate, bad inputs)
# with each binary in a fresh scratch folder holding copies of the sample
# databases, and compares stdout, stderr, the exit status and every file the
# command left behind (databases by their SQL dump when their bytes differ).
# The only differences forgiven are the ones a build cannot help: each
# binary's own commit (replaced by <COMMIT>), the " with uncommitted changes"
# note and timestamps of today (replaced by <NOW>). No GPU is needed; commands
# that want one are run too, for their refusal.
#
# usage: scripts/behaviour-diff.sh OLD_TPBENCH NEW_TPBENCH
# Prints one line per command: same or DIFFERS (with the diff's first lines),
# then a count; exits 0 when everything matched, 1 otherwise, 2 on bad usage.
# BEHAVIOUR_DIFF_KEEP=1 keeps the scratch folder (its path is printed).
set -uo pipefail

usage="usage: behaviour-diff.sh OLD_TPBENCH NEW_TPBENCH"
if [ $# -ne 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
  echo "$usage" >&2
  exit 2
fi
old_bin=$(realpath "$1")
new_bin=$(realpath "$2")
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sample_db=$repo/examples/tpbench-h200-sample.db
v1_db=$repo/tests/data/h200_pair_run1.db
matrix_dir=$repo/tests/fuzz/corpus/fuzz_matrix_file
for input in "$sample_db" "$v1_db" "$matrix_dir"; do
  [ -e "$input" ] || { echo "missing input: $input" >&2; exit 2; }
done
command -v sqlite3 > /dev/null || { echo "sqlite3 is needed (to dump databases)" >&2; exit 2; }

work=$(mktemp -d /tmp/behaviour-diff.XXXXXX)
if [ "${BEHAVIOUR_DIFF_KEEP:-0}" = 1 ]; then
  echo "scratch: $work"
else
  trap 'rm -rf "$work"' EXIT
fi
today=$(date -u +%Y-%m-%d)

# The commit a binary prints in --version (empty if it prints none).
commit_of() { "$1" --version 2>/dev/null | sed -n 's/.*commit \([0-9a-f]\{7,40\}\).*/\1/p'; }
old_commit=$(commit_of "$old_bin")
new_commit=$(commit_of "$new_bin")

# Replaces what may differ between two builds of the same behaviour: the
# binary's commit (full and short), the uncommitted-changes note, and
# timestamps of today (the time the command ran). Reads stdin.
normalise() {
  local script="s/${today}[T ][0-9:.]*Z\{0,1\}/<NOW>/g; s/, with uncommitted changes//g"
  local sha
  for sha in "$old_commit" "$new_commit"; do
    [ -n "$sha" ] && script="$script; s/$sha/<COMMIT>/g; s/${sha:0:7}/<COMMIT>/g"
  done
  sed -e "$script"
}

# Fills the current folder with the inputs a command names: copies of the
# databases and matrix files, and the broken inputs made here.
stage_inputs() {
  local cmd=$1
  case $cmd in *sample.db*) cp "$sample_db" sample.db ;; esac
  case $cmd in *v1.db*) cp "$v1_db" v1.db ;; esac
  case $cmd in *m/*) mkdir m && cp "$matrix_dir"/*.json m/ ;; esac
  case $cmd in *corrupt.db*) printf 'SQLite format 3\000%0200d' 7 > corrupt.db ;; esac
  case $cmd in *text.db*) printf 'not a database\n' > text.db ;; esac
  case $cmd in *empty.db*) : > empty.db ;; esac
  case $cmd in *foreign.db*) sqlite3 foreign.db 'CREATE TABLE t (x); INSERT INTO t VALUES (1);' ;; esac
  case $cmd in *adir*) mkdir adir ;; esac
  case $cmd in *bad.json*) printf '{"axes": {"seqlen": [2048,' > bad.json ;; esac
  case $cmd in *list.json*) printf '[1, 2]\n' > list.json ;; esac
  case $cmd in *extra.json*) printf '{"preset": "quick", "colour": "red"}\n' > extra.json ;; esac
  case $cmd in *twice.json*) printf '{"axes": {"seqlen": [2048, 2048]}}\n' > twice.json ;; esac
  case $cmd in *badval.json*) printf '{"axes": {"model": ["gpt5"]}}\n' > badval.json ;; esac
  case $cmd in *empty.json*) : > empty.json ;; esac
  # the files the command starts from, to tell the ones it wrote or changed
  find . -type f -exec sha256sum {} + | sort -k2 > "$2"
}

# Runs one command string with tpbench = $1, in a fresh folder at a fixed
# path (so printed paths match), and moves the folder to $2.
run_side() {
  local bin=$1 dest=$2 cmd=$3 here=$work/run
  rm -rf "$here"
  mkdir -p "$here" "$dest"
  (
    cd "$here" || exit 1
    stage_inputs "$cmd" "$dest/inputs.sha"
    # shellcheck disable=SC2317  # called from the eval below
    tp() { "$bin" "$@"; }
    set +e
    eval "$cmd" > "$dest/stdout" 2> "$dest/stderr"
    echo "exit $?" > "$dest/status"
  )
  mv "$here" "$dest/files"
}

# A listing of what a command leaves behind: every file that is new or
# changed against the inputs, with its content (a database by its dump).
describe_files() {
  local side=$1 f
  (
    cd "$side/files" || exit 1
    find . -mindepth 1 | sort | while read -r f; do
      if [ -d "$f" ]; then echo "dir $f"; continue; fi
      if [ "$(awk -v f="$f" '$2 == f { print $1 }' "$side/inputs.sha")" = "$(sha256sum "$f" | cut -d' ' -f1)" ]; then
        echo "unchanged $f"
        continue
      fi
      echo "written $f"
      if [ "$(head -c 15 "$f")" = "SQLite format 3" ] && sqlite3 "$f" 'PRAGMA schema_version' > /dev/null 2>&1; then
        echo "--- sqlite dump of $f (user_version $(sqlite3 "$f" 'PRAGMA user_version'))"
        sqlite3 "$f" .dump
      else
        echo "--- content of $f"
        cat "$f"
        echo
      fi
    done
  ) | normalise
}

total=0
differ=0
# check NAME COMMAND: runs COMMAND (a shell string in which `tp` is tpbench)
# with both binaries and prints one line.
check() {
  local name=$1 cmd=$2 dir
  total=$((total + 1))
  dir=$work/$(printf '%03d' "$total")
  run_side "$old_bin" "$dir/old" "$cmd"
  run_side "$new_bin" "$dir/new" "$cmd"
  local side part
  for side in old new; do
    for part in stdout stderr status; do
      normalise < "$dir/$side/$part" > "$dir/$side/$part.n"
    done
    describe_files "$dir/$side" > "$dir/$side/files.n"
  done
  local diffs=""
  for part in status stdout stderr files; do
    if ! cmp -s "$dir/old/$part.n" "$dir/new/$part.n"; then
      diffs="$diffs $part"
    fi
  done
  if [ -z "$diffs" ]; then
    printf 'same     %03d %-34s %s\n' "$total" "$name" "$cmd"
    return
  fi
  differ=$((differ + 1))
  printf 'DIFFERS  %03d %-34s %s  [%s ]\n' "$total" "$name" "$cmd" "$diffs"
  for part in $diffs; do
    diff "$dir/old/$part.n" "$dir/new/$part.n" | head -n 8 | sed 's/^/           /'
  done
}

key_242="kind=op;model=llama3-8b;layer=ag_linear;proj=qkv;backend=dist_gemm;schedule=auto;chunks=0;tp=2;batch=0;seqlen=0;tokens=4096;m=4096;n=3072;k=4096;n_weights=1;dtype=bf16;sp=1;pass=fwd;graph=0;save_gathered=0"

# --- top level and help texts
check no-args 'tp'
check help 'tp --help'
check help-short 'tp -h'
check help-word 'tp help'
check version 'tp --version'
check unknown-command 'tp frobnicate'
check unknown-option-top 'tp --frobnicate'
for sub in ops link run matrix report compare history trace import dashboard migrate; do
  check "help-$sub" "tp $sub --help"
done
check help-after-options 'tp report --db sample.db --help'
check unknown-option-sub 'tp report --frobnicate'
check missing-value 'tp report --db'

# --- matrix
check matrix-default 'tp matrix'
check matrix-quick 'tp matrix --preset quick'
check matrix-full 'tp matrix --preset full'
check matrix-model 'tp matrix --axis model=8b'
check matrix-seqlen-tp 'tp matrix --axis seqlen=2048,4096 --axis tp=1,2,4,8'
check matrix-pass-dtype 'tp matrix --axis layer=ffn --axis pass=fwd,fwd+bwd --axis dtype=bf16,fp32'
check matrix-pass-bwd 'tp matrix --axis layer=ffn --axis pass=fwd,bwd,fwd+bwd'
check matrix-schedules 'tp matrix --axis backend=stock,dist_gemm --axis schedule=auto,ce,sm,ring,multimem --axis chunks=0,2,3'
check matrix-flags 'tp matrix --axis sp=on,off --axis graph=on,off --axis save_gathered=on,off --axis batch=1,2'
check matrix-full-models 'tp matrix --preset full --axis model=debug,1b,8b,70b,405b --axis layer=block'
check matrix-axis-twice 'tp matrix --axis model=8b --axis model=70b'
for f in "$matrix_dir"/*.json; do
  check "matrix-file-$(basename "$f" .json)" "tp matrix --matrix m/$(basename "$f")"
done
check matrix-file-and-axis 'tp matrix --matrix m/readme_example.json --axis seqlen=1024'
check matrix-file-and-preset 'tp matrix --matrix m/full_ffn.json --preset quick'
check matrix-unknown-axis 'tp matrix --axis colour=red'
check matrix-unknown-value 'tp matrix --axis model=gpt5'
check matrix-value-twice 'tp matrix --axis seqlen=2048,2048'
check matrix-tp-zero 'tp matrix --axis tp=0'
check matrix-tp-three 'tp matrix --axis tp=3'
check matrix-seqlen-negative 'tp matrix --axis seqlen=-1'
check matrix-seqlen-huge 'tp matrix --axis seqlen=99999999999'
check matrix-chunks-huge 'tp matrix --axis chunks=999999'
check matrix-not-number 'tp matrix --axis seqlen=abc'
check matrix-empty-list 'tp matrix --axis seqlen='
check matrix-no-equals 'tp matrix --axis seqlen'
check matrix-bad-preset 'tp matrix --preset huge'
check matrix-missing-file 'tp matrix --matrix nothere.json'
check matrix-bad-json 'tp matrix --matrix bad.json'
check matrix-empty-json 'tp matrix --matrix empty.json'
check matrix-json-list 'tp matrix --matrix list.json'
check matrix-json-extra-key 'tp matrix --matrix extra.json'
check matrix-json-value-twice 'tp matrix --matrix twice.json'
check matrix-json-bad-value 'tp matrix --matrix badval.json'
check matrix-positional 'tp matrix extra'

# --- ops --list (and the GPU commands' refusal in a CPU build)
check ops-list 'tp ops --list'
check ops-list-wide 'tp ops --list --models debug,8b --tp 1,2,4 --pass fwd,bwd,fwd+bwd --dtype bf16,fp32 --schedule auto,ce,sm,ring,multimem --chunks 0,2 --save-gathered off,on'
check ops-list-formats 'tp ops --list --format csv; tp ops --list --format json'
check ops-list-shapes 'tp ops --list --models 405b,1b --projs qkv,w2 --tokens 1024,2048'
check ops-list-rounds 'tp ops --list --rounds 2 --order shuffle --seed 7 --gpus 4'
check ops-list-tp8 'tp ops --list --tp 8'
check ops-unknown-model 'tp ops --list --models gpt5'
check ops-unknown-schedule 'tp ops --list --schedule warp'
check ops-bad-chunks 'tp ops --list --chunks x'
check ops-tokens-indivisible 'tp ops --list --tokens 4097 --tp 2'
check ops-tokens-zero 'tp ops --list --tokens 0'
check ops-tp-three 'tp ops --list --tp 3'
check ops-warmup-negative 'tp ops --list --warmup -1'
check ops-iters-word 'tp ops --list --iters abc'
check ops-dtype-fp16 'tp ops --list --dtype fp16'
check ops-pass-both 'tp ops --list --pass both'
check ops-save-gathered-bad 'tp ops --list --save-gathered maybe'
check ops-format-xml 'tp ops --list --format xml'
check ops-value-twice 'tp ops --list --models 8b,8b'
check ops-unknown-option 'tp ops --list --frobnicate'
check ops-no-gpu 'tp ops --db sample.db --models debug --tp 1'
check link-no-gpu 'tp link --db x.db'
check run-no-gpu 'tp run --db x.db --axis model=debug'
check run-bad-axis 'tp run --axis colour=red'

# --- report
check report-latest 'tp report --db sample.db'
for r in 1 2 3 4 5; do
  check "report-run$r" "tp report --db sample.db --run $r"
done
for fmt in csv json; do
  check "report-run1-$fmt" "tp report --db sample.db --run 1 --format $fmt"
  check "report-run5-$fmt" "tp report --db sample.db --run 5 --format $fmt"
  check "report-run4-$fmt" "tp report --db sample.db --run 4 --format $fmt"
done
check report-commit 'tp report --db sample.db --commit a06011f'
check report-commit-old 'tp report --db sample.db --commit e92c4c5 --format json'
check report-commit-none 'tp report --db sample.db --commit 0000000'
check report-commit-and-run 'tp report --db sample.db --commit a06011f --run 2'
check report-model 'tp report --db sample.db --run 1 --model 8b'
check report-model-long 'tp report --db sample.db --run 1 --model llama3-70b --format csv'
check report-layer 'tp report --db sample.db --run 2 --layer ag_linear'
check report-layer-layers 'tp report --db sample.db --run 5 --layer attention --format json'
check report-pass 'tp report --db sample.db --run 1 --pass fwd+bwd'
check report-dtype 'tp report --db sample.db --run 1 --dtype bf16 --format csv'
check report-dtype-none 'tp report --db sample.db --dtype fp32'
check report-filters-all 'tp report --db sample.db --run 1 --model 8b --layer linear_rs --pass fwd --dtype bf16'
check report-model-unknown 'tp report --db sample.db --model gpt5'
check report-run-missing 'tp report --db sample.db --run 99'
check report-run-word 'tp report --db sample.db --run abc'
check report-format-xml 'tp report --db sample.db --format xml'
check report-v1-unmigrated 'tp report --db v1.db'
check report-v1-migrated 'tp migrate --db v1.db && tp report --db v1.db && tp report --db v1.db --format json'
check report-v1-filters 'tp migrate --db v1.db > /dev/null && tp report --db v1.db --model 70b --layer linear_rs --pass fwd --dtype bf16 --format csv'
check v1-compare-history-trace 'tp migrate --db v1.db > /dev/null && tp compare run:1 run:1 --db v1.db --format json; tp history --db v1.db --config 2 --format json; tp trace --db v1.db --config 2'
check v1-dashboard 'tp migrate --db v1.db > /dev/null && tp dashboard --db v1.db --out dash'

# --- compare
check compare-commits 'tp compare e92c4c5 a06011f --db sample.db'
check compare-commits-json 'tp compare e92c4c5 a06011f --db sample.db --format json'
check compare-commits-csv 'tp compare e92c4c5 a06011f --db sample.db --format csv'
check compare-runs 'tp compare run:1 run:2 --db sample.db'
check compare-runs-json 'tp compare run:1 run:3 --db sample.db --format json'
check compare-run-lists 'tp compare run:1 run:2,run:3 --db sample.db'
check compare-reversed 'tp compare a06011f e92c4c5 --db sample.db'
check compare-threshold-alpha 'tp compare e92c4c5 a06011f --db sample.db --threshold 0 --alpha 0.5'
check compare-threshold-high 'tp compare e92c4c5 a06011f --db sample.db --threshold 50 --format json'
check compare-gate-refs 'tp compare e92c4c5 a06011f --db sample.db --gate-references'
check compare-filters 'tp compare e92c4c5 a06011f --db sample.db --model llama3-70b --kind op --backend dist_gemm --pass fwd'
check compare-filter-layer 'tp compare e92c4c5 a06011f --db sample.db --layer linear_rs --dtype bf16 --format json'
check compare-filter-none 'tp compare e92c4c5 a06011f --db sample.db --model 405b'
check compare-nothing-common 'tp compare run:4 run:5 --db sample.db'
check compare-nothing-json 'tp compare run:4 run:5 --db sample.db --format json'
check compare-same-run 'tp compare run:2 run:2 --db sample.db'
check compare-unknown-commit 'tp compare 0000000 a06011f --db sample.db'
check compare-run-missing 'tp compare run:1 run:99 --db sample.db'
check compare-one-side 'tp compare run:1 --db sample.db'
check compare-three-sides 'tp compare run:1 run:2 run:3 --db sample.db'
check compare-alpha-bad 'tp compare run:1 run:2 --db sample.db --alpha 2'
check compare-threshold-bad 'tp compare run:1 run:2 --db sample.db --threshold -5'
check compare-kind-bad 'tp compare run:1 run:2 --db sample.db --kind block'
check compare-imported-v1 'tp migrate --db v1.db > /dev/null && tp import v1.db --db sample.db > /dev/null && tp compare run:6 run:1 --db sample.db --format json'
check compare-mixed-hardware 'tp migrate --db v1.db > /dev/null && tp import v1.db --db sample.db > /dev/null && tp compare run:6 run:1 --db sample.db --allow-mixed-hardware && tp compare run:6 run:1 --db sample.db --allow-mixed-hardware --format json --threshold 5 --alpha 0.1'

# --- history and trace
check history-config 'tp history --db sample.db --config 242'
check history-config-csv 'tp history --db sample.db --config 242 --format csv'
check history-config-json 'tp history --db sample.db --config 242 --format json'
check history-key "tp history --db sample.db --key '$key_242'"
check history-layer 'tp history --db sample.db --config 601'
check history-config-missing 'tp history --db sample.db --config 99999'
check history-key-missing 'tp history --db sample.db --key kind=op'
check history-nothing 'tp history --db sample.db'
check trace-out 'tp trace --db sample.db --config 242 --out t.json'
check trace-stdout 'tp trace --db sample.db --config 254'
check trace-key "tp trace --db sample.db --key '$key_242' --out k.json"
check trace-key-run "tp trace --db sample.db --key '$key_242' --run 2 --out k.json"
check trace-key-run-wrong "tp trace --db sample.db --key '$key_242' --run 1"
check trace-untraced 'tp trace --db sample.db --config 1'
check trace-config-missing 'tp trace --db sample.db --config 99999'
check trace-out-bad-dir 'tp trace --db sample.db --config 242 --out nodir/t.json'
check trace-nothing 'tp trace --db sample.db'

# --- dashboard, import, migrate
check dashboard 'tp dashboard --db sample.db --out dash'
check dashboard-max-events 'tp dashboard --db sample.db --out dash --max-events 100'
check dashboard-no-out 'tp dashboard --db sample.db'
check dashboard-v1 'tp dashboard --db v1.db --out dash'
check import-v1 'tp migrate --db v1.db > /dev/null && tp import v1.db --db sample.db'
check import-unmigrated 'tp import v1.db --db sample.db'
check import-into-new 'tp import sample.db --db new.db'
check import-twice 'tp import sample.db --db new.db && tp import sample.db --db new.db'
check import-missing 'tp import nothere.db --db sample.db'
check import-corrupt 'tp import corrupt.db --db sample.db'
check import-nothing 'tp import --db sample.db'
check migrate-v1 'tp migrate --db v1.db'
check migrate-twice 'tp migrate --db v1.db && tp migrate --db v1.db'
check migrate-current 'tp migrate --db sample.db'

# --- broken, foreign, missing databases and a folder as --db
for db in corrupt.db text.db empty.db foreign.db nothere.db adir; do
  check "report-$db" "tp report --db $db"
done
check compare-corrupt 'tp compare run:1 run:2 --db corrupt.db'
check compare-missing 'tp compare run:1 run:2 --db nothere.db'
check history-foreign 'tp history --db foreign.db --config 1'
check trace-text 'tp trace --db text.db --config 1'
check dashboard-missing 'tp dashboard --db nothere.db --out dash'
check dashboard-dir 'tp dashboard --db adir --out dash'
check migrate-corrupt 'tp migrate --db corrupt.db'
check migrate-foreign 'tp migrate --db foreign.db'
check migrate-missing 'tp migrate --db nothere.db'
check migrate-dir 'tp migrate --db adir'
check import-into-dir 'tp import sample.db --db adir'
check import-into-foreign 'tp import sample.db --db foreign.db'

echo "$total commands, $((total - differ)) same, $differ differ"
[ "$differ" -eq 0 ]
