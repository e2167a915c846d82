#!/usr/bin/env bash
# coverage_table.sh — the coverage table of docs/coverage.md is what
# scripts/coverage-table.py prints for the committed coverage database (so it
# is never typed by hand), and the script fails a cell and its exit status on
# a planted failed configuration and on a planted failed check; bad usage
# and a foreign file exit 2. Skips (77) where python3 is missing.
# usage: coverage_table.sh REPO_ROOT
set -uo pipefail
repo=${1:?usage: coverage_table.sh REPO_ROOT}
db=$repo/examples/tpbench-h100-coverage.db
page=$repo/docs/coverage.md
script=$repo/scripts/coverage-table.py
command -v python3 > /dev/null || { echo "python3 missing: skipped"; exit 77; }
# sql DB STATEMENT: one statement through python3's sqlite3 module
sql() { python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute(sys.argv[2]); c.commit()' "$@"; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }

# 1. the page's table is the script's output, between its markers (whatever it
#    holds: a page may show failures, and says so)
python3 "$script" "$db" > "$scratch/table.md"
rc=$?
[ "$rc" -le 1 ] || fail "the committed database's table exits $rc"
sed -n '/^<!-- coverage table: scripts\/coverage-table.py writes it -->$/,/^<!-- end of the coverage table -->$/p' \
  "$page" | sed '1d;$d' > "$scratch/page.md"
[ -s "$scratch/page.md" ] || fail "docs/coverage.md has no table between its markers"
diff -u "$scratch/page.md" "$scratch/table.md" > "$scratch/diff" ||
  fail "docs/coverage.md's table differs from scripts/coverage-table.py's output: $(head -n 20 "$scratch/diff")"

# A copy with every failure healed must read clean (exit 0); the plants below start from it.
cp "$db" "$scratch/healed.db"
sql "$scratch/healed.db" "UPDATE configs SET status = 'ok', reason = NULL WHERE status IN ('failed', 'oom', 'timeout')"
sql "$scratch/healed.db" "UPDATE checks SET status = 'ok', reason = NULL WHERE status = 'failed'"
python3 "$script" "$scratch/healed.db" > /dev/null
rc=$?
[ "$rc" -eq 0 ] || fail "the healed copy exits $rc, not 0"

# 2. a planted failed configuration fails its cells and the exit status
cp "$scratch/healed.db" "$scratch/planted.db"
sql "$scratch/planted.db" "UPDATE configs SET status = 'failed', reason = 'planted' WHERE id =
  (SELECT id FROM configs WHERE status = 'ok' AND tp = 4 AND backend = 'dist_gemm' AND schedule = 'ce'
   AND coalesce(proj, '') <> '' ORDER BY id LIMIT 1)"
python3 "$script" "$scratch/planted.db" > "$scratch/planted.md"
rc=$?
[ "$rc" -eq 1 ] || fail "a planted failed configuration exits $rc, not 1"
grep -q '| ops | dist_gemm ce |.*1 FAILED' "$scratch/planted.md" ||
  fail "the planted failure is not shown in the dist_gemm ce row"

# 3. a planted failed check in a configuration that ended ok
cp "$scratch/healed.db" "$scratch/check.db"
sql "$scratch/check.db" "UPDATE checks SET status = 'failed', reason = 'planted' WHERE
  (config_id, seq) = (SELECT k.config_id, k.seq FROM checks k JOIN configs c ON c.id = k.config_id
   WHERE c.status = 'ok' AND c.tp = 8 AND k.status = 'ok' LIMIT 1)"
python3 "$script" "$scratch/check.db" > /dev/null
rc=$?
[ "$rc" -eq 1 ] || fail "a planted failed check exits $rc, not 1"

# 3b. a run built from a tree with uncommitted changes is said so beside its commit
cp "$scratch/healed.db" "$scratch/dirty.db"
sql "$scratch/dirty.db" "UPDATE runs SET dirty = 1 WHERE id = (SELECT min(id) FROM runs)"
python3 "$script" "$scratch/dirty.db" |
  grep -qE '^[0-9]+ runs \(commit ([0-9a-f]+, )*[0-9a-f]+ built with uncommitted changes[);]' ||
  fail "a dirty build's run is not said to be one"
sql "$scratch/dirty.db" "UPDATE runs SET dirty = 0"
python3 "$script" "$scratch/dirty.db" | grep -q 'uncommitted' && fail "a clean build is said to be dirty"
# one commit's runs, built clean and dirty: both named, apart
sql "$scratch/dirty.db" "UPDATE runs SET dirty = 1 WHERE id = (SELECT min(id) FROM runs)"
python3 "$script" "$scratch/dirty.db" |
  grep -qE '^[0-9]+ runs \(commit ([0-9a-f]+), \1 built with uncommitted changes\); ' ||
  fail "one commit's clean and dirty runs are not named apart: $(python3 "$script" "$scratch/dirty.db" | tail -n 1)"

# 4. bad usage and a foreign file
python3 "$script" > /dev/null 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "no argument exits $rc, not 2"
echo "not a database" > "$scratch/foreign.db"
python3 "$script" "$scratch/foreign.db" > /dev/null 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "a foreign file exits $rc, not 2"

# 5. hostile text in a rejection's reason reaches the table neither raw nor as markup
cp "$scratch/healed.db" "$scratch/hostile.db"
sql "$scratch/hostile.db" "UPDATE configs SET reason = char(27) || '[31mX' || char(7) || ' <b>|y</b>' ||
  char(10) || 'z' WHERE status = 'rejected'"
python3 "$script" "$scratch/hostile.db" > "$scratch/hostile.md"
if grep -q $'\x1b\|\x07\|<b>' "$scratch/hostile.md"; then fail "raw control bytes or markup in the table"; fi
[ "$(grep -c '^| ' "$scratch/hostile.md")" -eq "$(grep -c '^| ' "$scratch/table.md")" ] ||
  fail "a hostile reason broke the table's rows"

# 6. an older schema and a name with URI characters: exit 2, no file made
python3 "$script" "$repo/tests/data/h200_pair_run1.db" > /dev/null 2> "$scratch/old.err"
rc=$?
[ "$rc" -eq 2 ] || fail "an older schema exits $rc, not 2"
grep -q 'tpbench migrate' "$scratch/old.err" || fail "an older schema's message names no migrate"
(cd "$scratch" && python3 "$script" 'q?x.db' > /dev/null 2>&1)
rc=$?
[ "$rc" -eq 2 ] || fail "a missing 'q?x.db' exits $rc, not 2"
[ ! -e "$scratch/q" ] || fail "reading 'q?x.db' made a file 'q'"

# 7. drift: a rule's refusal is no failure, a failed run is; each compared with its own run's stock
cp "$scratch/healed.db" "$scratch/drift.db"
sql "$scratch/drift.db" "UPDATE configs SET status = 'rejected', reason = 'planted rule' WHERE
  kind = 'drift' AND backend = 'dist_gemm' AND tp = 4"
python3 "$script" "$scratch/drift.db" > "$scratch/drift.md"
rc=$?
[ "$rc" -eq 0 ] || fail "a rejected drift configuration exits $rc, not 0"
grep '^| drift ' "$scratch/drift.md" | grep -q 'nccl: rejected' ||
  fail "the rejected drift configuration is not shown as rejected"
sql "$scratch/drift.db" "UPDATE configs SET status = 'failed' WHERE kind = 'drift' AND
  backend = 'dist_gemm' AND tp = 4 AND rs_sum = 'nccl'"
python3 "$script" "$scratch/drift.db" > /dev/null
rc=$?
[ "$rc" -eq 1 ] || fail "a failed drift configuration exits $rc, not 1"

# 8. a cell that ran keeps its rejections in sight
grep -q '| ops | dist_gemm ce | [^|]*| ok [0-9]* · [0-9]* checks · [0-9]* rejected |' "$scratch/table.md" ||
  fail "the dist_gemm ce row's ok cells do not count their rejections"

# 9. a path that cannot exist in a column says n/a and why; one that does exist there after all
#    is counted, never hidden behind the n/a
grep -q '^| ops | comm_dtype fp8 | n/a: nothing travels at TP 1 |' "$scratch/table.md" ||
  fail "comm_dtype at TP 1 does not read n/a"
grep '^| ops | dist_gemm ce |' "$scratch/table.md" | grep -q '| n/a: `ops` has no dp axis |$' ||
  fail "ops on a mesh does not read n/a"
grep -q '^| run | FSDP mesh (dp > 1) | n/a: dp = 1 in this column |' "$scratch/table.md" ||
  fail "dp > 1 at dp 1 does not read n/a"
cp "$scratch/healed.db" "$scratch/na.db"
sql "$scratch/na.db" "UPDATE configs SET dp = 2 WHERE id = (SELECT id FROM configs WHERE
  status = 'ok' AND tp = 2 AND dp = 1 AND backend = 'dist_gemm' AND schedule = 'ce'
  AND coalesce(proj, '') <> '' ORDER BY id LIMIT 1)"
python3 "$script" "$scratch/na.db" > "$scratch/na.md"
grep '^| ops | dist_gemm ce |' "$scratch/na.md" | grep -q '| ok 1 · [0-9]* checks[^|]* | n/a' ||
  fail "a configuration in an n/a cell is not counted: $(grep '^| ops | dist_gemm ce |' "$scratch/na.md")"

# 10. drift where every dist_gemm configuration was refused (as at TP 1): stock's failure still
#     fails the cell and the exit status, and a stock that trained is shown
cp "$scratch/healed.db" "$scratch/tp1drift.db"
sql "$scratch/tp1drift.db" "UPDATE configs SET status = 'rejected', reason = 'dist_gemm needs TP > 1'
  WHERE kind = 'drift' AND backend = 'dist_gemm' AND tp = 2"
python3 "$script" "$scratch/tp1drift.db" > "$scratch/tp1drift.md"
rc=$?
[ "$rc" -eq 0 ] || fail "drift with dist_gemm refused and stock ok exits $rc, not 0"
grep '^| drift ' "$scratch/tp1drift.md" | grep -q 'rejected: dist_gemm needs TP › 1; stock: ok |' ||
  fail "drift with dist_gemm refused does not show its stock: $(grep '^| drift ' "$scratch/tp1drift.md")"
sql "$scratch/tp1drift.db" "UPDATE configs SET status = 'oom', reason = 'planted' WHERE kind = 'drift'
  AND backend = 'stock' AND tp = 2"
python3 "$script" "$scratch/tp1drift.db" > "$scratch/tp1drift.md"
rc=$?
[ "$rc" -eq 1 ] || fail "a failed drift stock beside refused dist_gemm exits $rc, not 1"
grep '^| drift ' "$scratch/tp1drift.md" | grep -q 'stock: oom FAILED |' ||
  fail "a failed drift stock beside refused dist_gemm is not shown FAILED"

# 11. a failure at a degree or mesh no column shows (TP 16, dp 8) still fails the exit status and
#     is named under the table; a failed check there too
for plant in "tp = 16" "dp = 8"; do
  cp "$scratch/healed.db" "$scratch/outside.db"
  sql "$scratch/outside.db" "UPDATE configs SET status = 'failed', reason = 'planted', $plant WHERE
    id = (SELECT id FROM configs WHERE status = 'ok' AND kind = 'layer' ORDER BY id LIMIT 1)"
  python3 "$script" "$scratch/outside.db" > "$scratch/outside.md"
  rc=$?
  [ "$rc" -eq 1 ] || fail "a failed configuration at $plant exits $rc, not 1"
  grep -q '^FAILED outside the table.s columns: 1 at ' "$scratch/outside.md" ||
    fail "a failed configuration at $plant is not named under the table"
done
cp "$scratch/healed.db" "$scratch/outside.db"
sql "$scratch/outside.db" "UPDATE configs SET tp = 16 WHERE id = (SELECT c.id FROM configs c JOIN
  checks k ON k.config_id = c.id WHERE c.status = 'ok' ORDER BY c.id LIMIT 1)"
python3 "$script" "$scratch/outside.db" > /dev/null
rc=$?
[ "$rc" -eq 0 ] || fail "an ok configuration at TP 16 exits $rc, not 0"
sql "$scratch/outside.db" "UPDATE checks SET status = 'failed', reason = 'planted' WHERE config_id =
  (SELECT id FROM configs WHERE tp = 16)"
python3 "$script" "$scratch/outside.db" > /dev/null
rc=$?
[ "$rc" -eq 1 ] || fail "a failed check at TP 16 exits $rc, not 1"

# 12. coverage-page.py writes the script's table into a page between its markers: the committed
#     page comes back unchanged; a planted failure reaches the page and the exit status; a page
#     without markers, or a table script that died halfway, exits 2 and leaves the page alone
cp "$page" "$scratch/page-copy.md"
python3 "$repo/scripts/coverage-page.py" "$db" "$scratch/page-copy.md"
rc=$?
[ "$rc" -eq 0 ] || fail "coverage-page.py on the committed database exits $rc, not 0"
cmp -s "$page" "$scratch/page-copy.md" || fail "coverage-page.py changed the committed page"
python3 "$repo/scripts/coverage-page.py" "$scratch/planted.db" "$scratch/page-copy.md"
rc=$?
[ "$rc" -eq 1 ] || fail "coverage-page.py on a planted failure exits $rc, not 1"
grep -q '| ops | dist_gemm ce |.*1 FAILED' "$scratch/page-copy.md" ||
  fail "the planted failure did not reach the page"
ln -s "$scratch/page-copy.md" "$scratch/link.md"
cp "$scratch/page-copy.md" "$scratch/before-link.md"
python3 "$repo/scripts/coverage-page.py" "$db" "$scratch/link.md" 2> /dev/null
rc=$?
[ "$rc" -eq 2 ] || fail "a page named through a symbolic link exits $rc, not 2"
cmp -s "$scratch/page-copy.md" "$scratch/before-link.md" && [ -L "$scratch/link.md" ] ||
  fail "a page named through a symbolic link was written"
echo "no markers" > "$scratch/bare.md"
python3 "$repo/scripts/coverage-page.py" "$db" "$scratch/bare.md" 2> /dev/null
rc=$?
[ "$rc" -eq 2 ] || fail "a page without markers exits $rc, not 2"
# a table script that dies halfway (here: no traces table) also exits 1; its cut table must not
# reach the page
cp "$db" "$scratch/no-traces.db"
sql "$scratch/no-traces.db" "DROP TABLE traces"
cp "$page" "$scratch/page-copy.md"
python3 "$repo/scripts/coverage-page.py" "$scratch/no-traces.db" "$scratch/page-copy.md" 2> /dev/null
rc=$?
[ "$rc" -eq 2 ] || fail "coverage-page.py after a crash of the table script exits $rc, not 2"
cmp -s "$page" "$scratch/page-copy.md" || fail "a crashed table script's output reached the page"

if [ "$failures" -ne 0 ]; then
  echo "coverage_table: $failures failure(s)"
  exit 1
fi
echo "coverage_table: the page's table matches the database; planted failures caught"
