#!/usr/bin/env bash
# gemm_model_check.sh — scripts/gemm-model-check.py on `tpbench project --gemms` of the sample
# (the H200 pair's link probe, single-GPU GEMMs of 8B) at TP 4 and 8, against GEMM-alone rows
# planted at known ratios to the estimates: every estimated GEMM 25 % slower reads −20.0 % in
# every role and degree; one shape twice as slow is that group's worst, named; a shape with no
# row exits 1 naming it; the same prediction twice changes nothing, nor rows of another dtype
# in AFTER alone. `--gemms` refuses --format json and --columns (exit 2); the script refuses a
# CSV of another kind, a line without a time or number (naming it, no traceback) and a file that
# is not a database (exit 2), and a prediction of BEFORE or AFTER it cannot read (exit 2, the
# line named). Skips (77) where python3 is missing.
# usage: gemm_model_check.sh REPO_ROOT TPBENCH
set -uo pipefail
repo=${1:?usage: gemm_model_check.sh REPO_ROOT TPBENCH}
tpbench=${2:?usage: gemm_model_check.sh REPO_ROOT TPBENCH}
script=$repo/scripts/gemm-model-check.py
command -v python3 > /dev/null || { echo "python3 missing: skipped"; exit 77; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }

db=$scratch/p.db
cp "$repo/examples/tpbench-h200-sample.db" "$db"
"$tpbench" import "$repo/examples/tpbench-h200-tp1-gemm.db" --db "$db" > /dev/null ||
  fail "import of the TP 1 GEMMs"
request=(--db "$db" --tp "4,8" --gemm-tp 1 --models 8b --tokens "4096,8192")
"$tpbench" project "${request[@]}" --gemms > "$scratch/gemms.csv" || fail "project --gemms"
"$tpbench" project "${request[@]}" --format csv > "$scratch/pred.csv" || fail "project csv"
# 8B's four projections × 2 token counts × 2 degrees: one stock GEMM each, a shard GEMM per
# all-gather op that fuses, a chunk GEMM per op that fuses
stock=$(grep -c ',stock,bf16,' "$scratch/gemms.csv")
[ "$stock" = 16 ] || fail "16 stock GEMMs expected, $stock listed"
grep -q ',shard,bf16,' "$scratch/gemms.csv" || fail "no shard GEMM listed"
grep -q ',chunk,bf16,' "$scratch/gemms.csv" || fail "no chunk GEMM listed"

for bad in "--format json" "--columns stock_us"; do
  # shellcheck disable=SC2086 # the option and its value, split on purpose
  "$tpbench" project "${request[@]}" --gemms $bad > /dev/null 2> "$scratch/bad.err"
  rc=$?
  [ "$rc" = 2 ] || fail "--gemms $bad: exit $rc, not 2"
  grep -q -- '--gemms writes its own CSV' "$scratch/bad.err" || fail "--gemms $bad: no reason"
done

# plant MEASURED_DB: every estimated shape at its estimate × factor, one shape (SLOW) × 2, one
# (DROP) left out
plant() {
  python3 - "$scratch/gemms.csv" "$1" "$2" "${3:-}" << 'PY'
import csv, sqlite3, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["exact"] == "0"]
db = sqlite3.connect(sys.argv[2])
db.executescript("CREATE TABLE configs (id INTEGER PRIMARY KEY, kind TEXT, status TEXT, pass TEXT,"
                 " dtype TEXT, m INT, n INT, k INT, n_weights INT);"
                 "CREATE TABLE results (config_id INT, median_us REAL);")
slow, drop, seen = sys.argv[3], sys.argv[4], set()
for r in rows:
    key = (r["dtype"], int(r["m"]), int(r["n"]), int(r["k"]), int(r["weights"]))
    shape = f"{r['m']}x{r['n']}x{r['k']}"
    if key in seen or shape == drop:
        continue
    seen.add(key)
    cur = db.execute("INSERT INTO configs (kind, status, pass, dtype, m, n, k, n_weights) "
                     "VALUES ('gemm', 'ok', 'fwd', ?, ?, ?, ?, ?)", key)
    factor = 2.0 if shape == slow else 1.25
    db.execute("INSERT INTO results VALUES (?, ?)", (cur.lastrowid, float(r["us"]) * factor))
db.commit()
PY
}
slow=$(awk -F, '$5 == "chunk" && $4 == 8 && $13 == 0 { print $7 "x" $8 "x" $9; exit }' "$scratch/gemms.csv")
[ -n "$slow" ] || fail "no estimated chunk GEMM at TP 8 to plant"

plant "$scratch/even.db" none
python3 "$script" "$scratch/gemms.csv" "$scratch/even.db" > "$scratch/even.md"
rc=$?
[ "$rc" = 0 ] || fail "every shape measured: exit $rc"
groups=$(grep -c '^| \(stock\|shard\|chunk\) |' "$scratch/even.md")
[ "$groups" -ge 4 ] || fail "fewer than 4 role and degree rows: $(cat "$scratch/even.md")"
bad_rows=$(grep '^| \(stock\|shard\|chunk\) |' "$scratch/even.md" |
  grep -v '| -20.0 % | 20.0 % | -20.0 % (' || true)
[ -z "$bad_rows" ] || fail "25 % slower everywhere must read -20.0 %: $bad_rows"

plant "$scratch/slow.db" "$slow"
python3 "$script" "$scratch/gemms.csv" "$scratch/slow.db" > "$scratch/slow.md" ||
  fail "the slow shape: exit $?"
slow_shape=${slow//x/×}
grep '^| chunk | 8 |' "$scratch/slow.md" | grep -q -- "| -50.0 % (llama3-8b [a-z0-9]* [0-9]*: $slow_shape " ||
  fail "the twice-slow chunk $slow_shape is not TP 8's worst chunk: $(grep '^| chunk | 8 |' "$scratch/slow.md")"

plant "$scratch/drop.db" none "$slow"
python3 "$script" "$scratch/gemms.csv" "$scratch/drop.db" > /dev/null 2> "$scratch/drop.err"
rc=$?
[ "$rc" = 1 ] || fail "a shape without a row: exit $rc, not 1"
grep -q "${slow//x/,}," "$scratch/drop.err" || fail "the shape without a row is not named: $(cat "$scratch/drop.err")"

python3 "$script" "$scratch/gemms.csv" "$scratch/even.db" --predictions "$scratch/pred.csv" \
  "$scratch/pred.csv" > "$scratch/same.md" || fail "--predictions: exit $?"
same_rows=$(grep -c '^| [48] | 8 | +0.0 % | +0.0 % | +0.0 % |' "$scratch/same.md")
[ "$same_rows" = 2 ] || fail "the same prediction twice must change nothing: $(tail -n 4 "$scratch/same.md")"

# a database's shapes in two dtypes share model, proj, tokens and TP: AFTER's fp8 copy of every
# row (twice the time) is no change of the bf16 rows, nor a shape of BEFORE
python3 - "$scratch/pred.csv" "$scratch/two-dtypes.csv" << 'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
with open(sys.argv[2], "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    for r in rows:
        w.writerow(r)
    for r in rows:
        if r["result"] == "predicted" and r["speedup"]:
            w.writerow(dict(r, dtype="fp8", stock_us=2 * float(r["stock_us"]),
                            dist_us=float(r["dist_us"]), speedup=2 * float(r["speedup"])))
PY
python3 "$script" "$scratch/gemms.csv" "$scratch/even.db" --predictions "$scratch/pred.csv" \
  "$scratch/two-dtypes.csv" > "$scratch/dtypes.md" || fail "--predictions, two dtypes: exit $?"
same_rows=$(grep -c '^| [48] | 8 | +0.0 % | +0.0 % | +0.0 % |' "$scratch/dtypes.md")
[ "$same_rows" = 2 ] || fail "AFTER's rows of another dtype changed BEFORE's: $(tail -n 4 "$scratch/dtypes.md")"

# a line the script cannot read: no time (what project writes for a dtype without GEMM rows), a
# shape that is not a number, a line cut short: exit 2 naming the line, no traceback
for bad in "us=" "m=2048x" "cut"; do
  python3 - "$scratch/gemms.csv" "$scratch/bad.csv" "$bad" << 'PY'
import csv, sys
lines = list(csv.reader(open(sys.argv[1], newline="")))
header, edit = lines[0], sys.argv[3]
line = next(r for r in lines[1:] if r[header.index("exact")] == "0")
if edit == "cut":
    del line[header.index("n"):]
else:
    name, value = edit.split("=")
    line[header.index(name)] = value
csv.writer(open(sys.argv[2], "w", newline="")).writerows(lines)
PY
  python3 "$script" "$scratch/bad.csv" "$scratch/even.db" > /dev/null 2> "$scratch/bad.err"
  rc=$?
  [ "$rc" = 2 ] || fail "an unreadable line ($bad): exit $rc, not 2: $(tail -n 1 "$scratch/bad.err")"
  grep -q 'bad.csv: line 2:' "$scratch/bad.err" || fail "an unreadable line ($bad): not named: $(tail -n 1 "$scratch/bad.err")"
  grep -q Traceback "$scratch/bad.err" && fail "an unreadable line ($bad): a traceback"
done

# a prediction the script cannot read (AFTER's first prediction without a dist_gemm time, or with
# a speedup of 0): exit 2 naming the line, no traceback
for bad in "dist_us=" "speedup=0"; do
  python3 - "$scratch/pred.csv" "$scratch/bad-pred.csv" "$bad" << 'PY'
import csv, sys
lines = list(csv.reader(open(sys.argv[1], newline="")))
header = lines[0]
name, value = sys.argv[3].split("=")
lines[1][header.index(name)] = value
csv.writer(open(sys.argv[2], "w", newline="")).writerows(lines)
PY
  python3 "$script" "$scratch/gemms.csv" "$scratch/even.db" --predictions "$scratch/pred.csv" \
    "$scratch/bad-pred.csv" > /dev/null 2> "$scratch/bad-pred.err"
  rc=$?
  [ "$rc" = 2 ] || fail "an unreadable prediction ($bad): exit $rc, not 2: $(tail -n 1 "$scratch/bad-pred.err")"
  grep -q 'bad-pred.csv: line 2:' "$scratch/bad-pred.err" ||
    fail "an unreadable prediction ($bad): not named: $(tail -n 1 "$scratch/bad-pred.err")"
  grep -q Traceback "$scratch/bad-pred.err" && fail "an unreadable prediction ($bad): a traceback"
done

python3 "$script" "$scratch/pred.csv" "$scratch/even.db" > /dev/null 2> "$scratch/kind.err"
rc=$?
[ "$rc" = 2 ] || fail "a prediction CSV as the GEMM list: exit $rc, not 2"
grep -q "no column role" "$scratch/kind.err" || fail "the wrong CSV: no reason: $(cat "$scratch/kind.err")"
echo "not a database" > "$scratch/foreign.db"
python3 "$script" "$scratch/gemms.csv" "$scratch/foreign.db" > /dev/null 2> "$scratch/foreign.err"
rc=$?
[ "$rc" = 2 ] || fail "a file that is not a database: exit $rc, not 2"
grep -q "not a tpbench database" "$scratch/foreign.err" || fail "the foreign file: no reason"

if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "gemm_model_check: all checks passed"
