#!/usr/bin/env bash
# doc_commands.sh — every command the documentation shows is run and its output
# checked against the page (ctest test_doc_commands; the convention is in
# docs/dev/testing.md).
#
#   doc_commands.sh --exe TPBENCH --root REPO [--xfail FILE] [--cuda yes|no] [--update] [PAGE...]
#   doc_commands.sh --exe TPBENCH --root REPO --self-test
#
# A page's ```console blocks hold commands, each on a line starting with "$ "
# (a line ending in "\" continues it), followed by what it prints (stdout and
# stderr as a terminal shows them). Expected output matches line for line after
# trailing blanks are dropped, except that a line "..." stands for any number of
# lines and "…" inside a line for any text. Every command runs with bash in a
# scratch folder per page that holds copies of examples/ (the sample databases),
# tests/data/ and scripts/*.py, and build/tpbench, with `tpbench` first on PATH, in the page's order (a page's
# commands share the folder). A command must exit 0: a page shows another
# status with `; echo "exit $?"`. Any other fenced block that runs tpbench (but
# ```text, for help texts, and ```markdown, for page source) must
# follow a marker line `<!-- doc-test: skip REASON -->` (a GPU, a cluster, CI
# variables); a page of logs can say `<!-- doc-test: skip-file REASON -->`. A
# ```console block after `<!-- doc-test: cuda-build -->` needs a binary built
# with CUDA (no GPU): with --cuda no its commands count as exempt.
#
# --xfail FILE: lines "PAGE<TAB>COMMAND" (the command's first line, without
# "$ ") expected to fail for now: the page says what the binary should print and
# the binary does not yet. Such a command failing is reported, not counted as a
# failure; one that passes fails the test until it leaves the list.
# --update: rewrites each exact expected output that differs with what the
# command printed (never one with "..." or "…", never a failing command, never
# one on the expected-failure list).
# --self-test: plants drift into copies of a page (a changed figure, an
# unmarked block, a failing command) and fails unless each is caught.
set -uo pipefail

exe="" root="" xfail="" update=0 self_test=0 cuda=yes
pages=()
while [ $# -gt 0 ]; do
  case $1 in
    --exe) exe=$2; shift 2 ;;
    --root) root=$2; shift 2 ;;
    --xfail) xfail=$2; shift 2 ;;
    --cuda) cuda=$2; shift 2 ;;
    --update) update=1; shift ;;
    --self-test) self_test=1; shift ;;
    *) pages+=("$1"); shift ;;
  esac
done
[ -x "$exe" ] || { echo "doc_commands: no tpbench at '$exe'"; exit 2; }
[ -d "$root/examples" ] || { echo "doc_commands: '$root' has no examples/"; exit 2; }
exe=$(cd "$(dirname "$exe")" && pwd)/$(basename "$exe")
root=$(cd "$root" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/doc-commands.XXXXXX")
trap 'rm -rf "$work"' EXIT
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
self=$here/$(basename "${BASH_SOURCE[0]}")

# ---- extraction: one folder per page, N.cmd, N.exp and index (N, line) --------
# Also "untested" (blocks that run tpbench without a marker) and "exempt" (how
# many tpbench lines marked blocks hold, with the reason).
extract() { # $1 page, $2 out folder
  awk -v out="$2" -v nocuda="$([ "$cuda" = no ] && echo 1 || echo 0)" '
    function tp_lines(s) { # 1 when s runs tpbench (not a comment)
      if (s ~ /^[ \t]*#/) return 0
      return s ~ /(^|[ \t;|&(`"=])(\.\/)?(build\/)?tpbench[ \t]+[a-z-]/
    }
    function close_cmd() {
      if (n > 0 && !closed) { close(out "/" n ".cmd"); close(out "/" n ".exp"); closed = 1 }
    }
    BEGIN { n = 0; closed = 1; infence = 0; prev = ""; skipfile = "" }
    {
      line = $0
      if (!infence) {
        if (line ~ /^<!-- doc-test: skip-file/) skipfile = line
        if (line ~ /^[ \t]*```/) {
          indent = line; sub(/`.*/, "", indent); ilen = length(indent)
          ticks = substr(line, ilen + 1); match(ticks, /^`+/); flen = RLENGTH
          lang = substr(ticks, flen + 1); sub(/[ \t].*/, "", lang)
          infence = 1; fenceline = NR; count = 0; cont = 0
          marker = (prev ~ /^<!-- doc-test: skip/) ? prev : ""
          if (skipfile != "") marker = skipfile
          console = (lang == "console" && skipfile == "")
          needcuda = (console && prev ~ /^<!-- doc-test: cuda-build/)
          if (needcuda && nocuda) { console = 0; marker = prev; lang = "cudaonly" }
          next
        }
        if (line !~ /^[ \t]*$/) prev = line
        next
      }
      body = substr(line, 1, ilen) == indent ? substr(line, ilen + 1) : line
      t = body; gsub(/[ \t]/, "", t)
      if (t ~ /^```+$/ && length(t) >= flen) {
        infence = 0; prev = ""
        if (console) close_cmd()
        else if (count > 0 && lang != "text" && lang != "markdown") {
          if (marker != "") printf "%d\t%d\t%s\n", fenceline, count, marker >> (out "/exempt")
          else printf "%d\t%s\n", fenceline, first >> (out "/untested")
        }
        next
      }
      if (!console) {
        if (cont) { cont = (body ~ /\\$/); next }
        if (lang == "cudaonly" ? body ~ /^\$ / : tp_lines(body)) { if (count == 0) first = body; count++ }
        cont = (body ~ /\\$/)
        next
      }
      if (cont) { print body >> (out "/" n ".cmd"); cont = (body ~ /\\$/); next }
      if (body ~ /^\$ /) {
        close_cmd(); n++; closed = 0
        print substr(body, 3) > (out "/" n ".cmd")
        printf "" > (out "/" n ".exp")
        printf "%d\t%d\n", n, NR >> (out "/index")
        cont = (body ~ /\\$/)
        next
      }
      if (n == 0 || closed) { printf "%d\toutput before any command\n", NR >> (out "/untested"); next }
      print body >> (out "/" n ".exp")
    }
    END { close_cmd() }
  ' "$1"
}

# ---- matching: expected (with "..." and "…") against actual -------------------
matches() { # $1 expected, $2 actual; status 0 when they match
  awk -v expf="$1" -v actf="$2" '
    function rstrip(s) { sub(/[ \t\r]+$/, "", s); return s }
    function line_ok(p, s,    parts, k, i, pos, at) {
      if (index(p, "…") == 0) return p == s
      k = split(p, parts, "…")
      if (substr(s, 1, length(parts[1])) != parts[1]) return 0
      pos = length(parts[1]) + 1
      for (i = 2; i < k; i++) {
        at = index(substr(s, pos), parts[i]); if (at == 0) return 0
        pos += at - 1 + length(parts[i])
      }
      return length(s) - pos + 1 >= length(parts[k]) && \
             substr(s, length(s) - length(parts[k]) + 1) == parts[k]
    }
    BEGIN {
      np = 0; while ((getline l < expf) > 0) P[++np] = rstrip(l)
      na = 0; while ((getline l < actf) > 0) A[++na] = rstrip(l)
      # D[j]: P[1..i] matches A[1..j]
      D[0] = 1; for (j = 1; j <= na; j++) D[j] = 0
      for (i = 1; i <= np; i++) {
        star = (P[i] == "...")
        for (j = 0; j <= na; j++) O[j] = D[j]
        D[0] = star ? O[0] : 0
        for (j = 1; j <= na; j++)
          D[j] = star ? (O[j] || D[j - 1]) : (O[j - 1] && line_ok(P[i], A[j]))
      }
      exit D[na] ? 0 : 1
    }'
}

has_wildcard() { grep -qx -e '\.\.\.' "$1" || grep -q '…' "$1"; }

# ---- running one page ------------------------------------------------------------
checked=0 failed=0 exempt=0 xfailed=0
report_fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

is_xfail() { # $1 page (relative), $2 command's first line
  [ -n "$xfail" ] && [ -f "$xfail" ] || return 1
  grep -v '^#' "$xfail" | grep -qxF "$1"$'\t'"$2"
}

run_page() { # $1 page path
  local page=$1 rel dir scratch
  rel=${page#"$root"/}
  dir=$work/pages/$(echo "$rel" | tr '/' '_')
  mkdir -p "$dir"
  extract "$page" "$dir"
  if [ -f "$dir/untested" ]; then
    while IFS=$'\t' read -r line text; do
      report_fail "$rel:$line: a block runs tpbench but is neither \`\`\`console nor marked" \
        "<!-- doc-test: skip REASON -->: $text"
    done <"$dir/untested"
  fi
  if [ -f "$dir/exempt" ]; then
    while IFS=$'\t' read -r _ count _; do exempt=$((exempt + count)); done <"$dir/exempt"
  fi
  [ -f "$dir/index" ] || return 0
  scratch=$work/scratch/$(basename "$dir")
  mkdir -p "$scratch/build"
  cp -r "$root/examples" "$scratch/examples"
  if [ -d "$root/tests/data" ]; then mkdir -p "$scratch/tests" && cp -r "$root/tests/data" "$scratch/tests/data"; fi
  # the analysis scripts a page runs on the databases (python3 scripts/NAME.py)
  mkdir -p "$scratch/scripts" && cp "$root"/scripts/*.py "$scratch/scripts/"
  ln -s "$exe" "$scratch/build/tpbench"
  local n line first status
  declare -A replace=()
  while IFS=$'\t' read -r n line; do
    checked=$((checked + 1))
    first=$(head -n 1 "$dir/$n.cmd")
    (cd "$scratch" && env -i PATH="$(dirname "$exe"):/usr/local/bin:/usr/bin:/bin" \
      HOME="$scratch" LC_ALL=C.UTF-8 TZ=UTC TERM=dumb \
      ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
      UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
      timeout 300 stdbuf -oL bash -c "$(cat "$dir/$n.cmd")" >"$dir/$n.out" 2>&1)
    status=$?
    local ok=1 why=""
    if [ $status -ne 0 ]; then
      ok=0 why="exit $status (a page shows another status with ; echo \"exit \$?\")"
    elif ! matches "$dir/$n.exp" "$dir/$n.out"; then
      ok=0 why="its output differs from the page"
      has_wildcard "$dir/$n.exp" || replace[$n]=1
    fi
    if is_xfail "$rel" "$first"; then
      unset 'replace[$n]'
      if [ $ok -eq 1 ]; then
        report_fail "$rel:$line: \$ $first: passes now: take it off the expected-failure list"
      else
        xfailed=$((xfailed + 1))
        echo "xfail: $rel:$line: \$ $first: $why (expected until the binary is fixed)"
      fi
      continue
    fi
    if [ $ok -eq 0 ]; then
      report_fail "$rel:$line: \$ $first: $why"
      diff -u --label "page" --label "tpbench" "$dir/$n.exp" "$dir/$n.out" | head -n 60
    fi
  done <"$dir/index"
  if [ $update -eq 1 ] && [ ${#replace[@]} -gt 0 ]; then
    rewrite "$page" "$dir" "${!replace[@]}"
    echo "updated: $rel (${#replace[@]} outputs)"
  fi
}

# Rewrites the expected output of the commands numbered $3... of page $1 with
# what they printed ($2/N.out), keeping the block's indentation.
rewrite() {
  local page=$1 dir=$2
  shift 2
  awk -v dir="$dir" -v list="$*" '
    BEGIN { split(list, l, " "); for (i in l) R[l[i]] = 1; n = 0; infence = 0 }
    function flush(   f, s) {
      if (n > 0 && (n in R)) { f = dir "/" n ".out"; while ((getline s < f) > 0) print indent s; close(f) }
      else for (i = 1; i <= nb; i++) print buf[i]
      nb = 0
    }
    {
      line = $0
      if (!infence) {
        if (line ~ /^[ \t]*```console[ \t]*$/) { infence = 1; indent = line; sub(/```.*/, "", indent); nb = 0; cont = 0; cur = 0 }
        print line; next
      }
      body = substr(line, 1, length(indent)) == indent ? substr(line, length(indent) + 1) : line
      if (body ~ /^[ \t]*```[ \t]*$/) { if (cur) flush(); infence = 0; cur = 0; print line; next }
      if (cont) { print line; cont = (body ~ /\\$/); next }
      if (body ~ /^\$ /) { if (cur) flush(); n++; cur = 1; print line; cont = (body ~ /\\$/); next }
      buf[++nb] = line
    }' "$page" >"$page.new" && mv "$page.new" "$page"
}

# ---- self-test: planted drift must be caught ---------------------------------------
if [ $self_test -eq 1 ]; then
  page=$root/README.md
  fail=0
  mkdir -p "$work/planted"
  # 1. a figure of an expected output changed (the first digit of the first
  #    exact output line that has one)
  awk '
    /^```console/ { c = 1; print; next }
    c && /^```/ { c = 0 }
    c && !/^\$ / && !done && /[0-9]/ && $0 != "..." && index($0, "…") == 0 {
      match($0, /[0-9]/); d = substr($0, RSTART, 1)
      $0 = substr($0, 1, RSTART - 1) ((d + 1) % 10) substr($0, RSTART + 1); done = 1
    }
    { print }' "$page" >"$work/planted/figure.md"
  cmp -s "$page" "$work/planted/figure.md" && { echo "FAIL: no figure to plant in $page"; exit 1; }
  # 2. a block that runs tpbench, unmarked
  { cat "$page"; printf '\n```sh\ntpbench runs --db examples/tpbench-h200-sample.db\n```\n'; } \
    >"$work/planted/unmarked.md"
  # 3. a command that fails, shown as if it succeeded
  { cat "$page"; printf '\n```console\n$ tpbench report --db examples/no-such.db\n```\n'; } \
    >"$work/planted/failing.md"
  for planted in figure:"its output differs from the page" \
                 unmarked:"neither \`\`\`console nor marked" failing:"exit 2"; do
    name=${planted%%:*} want=${planted#*:}
    log=$("$self" --exe "$exe" --root "$root" "$work/planted/$name.md" 2>&1)
    status=$?
    if [ $status -ne 1 ] || ! grep -qF -- "$want" <<<"$log"; then
      echo "FAIL: planted $name drift not caught (exit $status):"
      echo "$log" | tail -n 20
      fail=1
    else
      echo "ok: planted $name drift caught: $(grep -m1 '^FAIL' <<<"$log")"
    fi
  done
  exit $fail
fi

# ---- every page ------------------------------------------------------------------------
if [ ${#pages[@]} -eq 0 ]; then
  while IFS= read -r p; do pages+=("$root/$p"); done < <(
    cd "$root" && find . -name '*.md' -not -path './build*' -not -path './.git/*' |
      sed 's#^\./##' | sort)
fi
for p in "${pages[@]}"; do run_page "$p"; done

echo "doc commands: $checked checked (in ${#pages[@]} pages), $exempt exempt (marked:" \
  "need a GPU, a cluster or CI), $xfailed expected failures, $failed failed"
[ $failed -eq 0 ]
