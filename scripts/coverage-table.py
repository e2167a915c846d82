#!/usr/bin/env python3
"""coverage-table.py — the coverage table of a coverage database.

Reads a database made by scripts/device-coverage.sh (every TP degree and
dp x tp mesh of `tpbench ops`, `run` and `drift` on one GPU, the ranks
sharing it) and prints, in markdown, one row per path of the code that
depends on the TP degree (a schedule, a chunk count, a pass, a format, a
layer, a composition...) and one column per TP degree and mesh. A cell says
what the database holds for that path there:

  ok N · C checks     N configurations ended ok, their C numerics checks ok
  · R rejected        beside it: R more of that path were refused by a rule
  + F FAILED          F configurations failed, hung, ran out of memory, or
                      have a failed check (any of these makes the cell fail)
  rejected: RULE      nothing ran; the rule of the most frequent rejection
                      (+N other rules: how many more there were)
  not run             the database holds no configuration of that path there
  n/a: WHY            the path does not exist there (ops and drift have no
                      dp axis; nothing travels at TP 1; dp > 1 needs a mesh)

Nothing in the table is typed by hand: every cell is counted from the
database. Exit status: 0 when no cell failed, 1 when one did (or a
configuration of a degree or mesh no column shows failed: a line after the
table names them), 2 on bad usage or an unreadable database.

usage: scripts/coverage-table.py COVERAGE_DB
"""
import pathlib
import re
import signal
import sqlite3
import sys

# The columns: (heading, SQL over configs c selecting the degree or mesh).
COLUMNS = [
    ("TP 1", "c.tp = 1 AND c.dp = 1"),
    ("TP 2", "c.tp = 2 AND c.dp = 1"),
    ("TP 4", "c.tp = 4 AND c.dp = 1"),
    ("TP 8", "c.tp = 8 AND c.dp = 1"),
    ("dp 2 × tp 2", "c.tp = 2 AND c.dp = 2"),
    ("dp 2 × tp 4", "c.tp = 4 AND c.dp = 2"),
    ("dp 4 × tp 2", "c.tp = 2 AND c.dp = 4"),
]

OPS = "coalesce(c.proj, '') <> '' AND c.kind <> 'drift'"
RUN = "coalesce(c.proj, '') = '' AND c.kind <> 'drift'"
DIST = "c.backend = 'dist_gemm'"

# The rows: (group, path, SQL over configs c).
ROWS = [
    ("ops", "stock (NCCL + cuBLASLt)", f"{OPS} AND c.kind = 'op' AND c.backend = 'stock'"),
    ("ops", "GEMM alone, collective alone", f"{OPS} AND c.kind IN ('gemm', 'comm')"),
] + [
    ("ops", f"dist_gemm {s}", f"{OPS} AND {DIST} AND c.schedule = '{s}'")
    for s in ("auto", "ce", "sm", "ring")
] + [
    ("ops", f"dist_gemm chunks={n}", f"{OPS} AND {DIST} AND c.chunks = {n}") for n in (1, 2, 4)
] + [
    ("ops", f"pass {p}", f"{OPS} AND c.pass = '{p}'") for p in ("fwd", "bwd", "fwd+bwd")
] + [
    ("ops", f"save_gathered {v}", f"{OPS} AND c.pass <> 'fwd' AND c.save_gathered = {i}")
    for i, v in ((0, "off"), (1, "on"))
] + [
    ("ops", f"dtype {d}", f"{OPS} AND c.dtype = '{d}'")
    for d in ("bf16", "fp32", "fp8", "fp8-row", "fp8-block")
] + [
    ("ops", f"comm_dtype {d}", f"{OPS} AND c.comm_dtype = '{d}'") for d in ("bf16", "fp8")
] + [
    ("run", f"{layer}", f"{RUN} AND c.layer = '{layer}'") for layer in ("attention", "ffn", "block")
] + [
    ("run", "dist_gemm layer auto", f"{RUN} AND {DIST} AND c.schedule = 'auto'"),
    ("run", "dist_gemm layer ce", f"{RUN} AND {DIST} AND c.schedule = 'ce'"),
    ("run", "dist_gemm layer sm", f"{RUN} AND {DIST} AND c.schedule = 'sm'"),
    ("run", "sp off", f"{RUN} AND c.sp = 0"),
    ("run", "graph on", f"{RUN} AND c.graph = 1 AND c.graph_sizes IS NULL"),
    ("run", "graph mixed", f"{RUN} AND c.graph_sizes IS NOT NULL"),
] + [
    ("run", f"ac {a}", f"{RUN} AND c.pass = 'fwd+bwd' AND c.ac = '{a}'")
    for a in ("none", "selective", "full")
] + [
    ("run", "fsdp_traffic", f"{RUN} AND c.fsdp_traffic = 1"),
    ("run", "FSDP mesh (dp > 1)", f"{RUN} AND c.dp > 1"),
] + [
    ("run", f"dtype {d}", f"{RUN} AND c.dtype = '{d}'") for d in ("fp8", "fp8-row", "fp8-block")
]

FAILED = "('failed', 'oom', 'timeout')"


def not_applicable(group, path, heading):
    """Why a path cannot exist in a column, or None: these cells say so instead of "not run"
    (a rule of the commands, not a result: nothing is counted for them)."""
    mesh = heading.startswith("dp ")
    if group in ("ops", "drift") and mesh:
        return f"n/a: `{group}` has no dp axis"
    if group == "ops" and path.startswith("comm_dtype") and heading == "TP 1":
        return "n/a: nothing travels at TP 1"
    if path == "FSDP mesh (dp > 1)" and not mesh:
        return "n/a: dp = 1 in this column"
    return None


def cell(db, where):
    """One cell: counts of the configurations matching `where`."""
    by_status = dict(db.execute(
        f"SELECT c.status, count(*) FROM configs c WHERE {where} GROUP BY c.status").fetchall())
    checks = dict(db.execute(
        f"SELECT k.status, count(*) FROM checks k JOIN configs c ON c.id = k.config_id "
        f"WHERE {where} GROUP BY k.status").fetchall())
    failed = sum(n for s, n in by_status.items() if s in ("failed", "oom", "timeout"))
    failed_checks = db.execute(
        f"SELECT count(DISTINCT c.id) FROM checks k JOIN configs c ON c.id = k.config_id "
        f"WHERE {where} AND c.status = 'ok' AND k.status = 'failed'").fetchone()[0]
    ok = by_status.get("ok", 0)
    rejected = by_status.get("rejected", 0)
    bad = failed + failed_checks
    if ok:
        # an ok cell keeps its rejections in sight (a path can run in one format and be
        # refused in another)
        text = f"ok {ok} · {checks.get('ok', 0)} checks" + (f" · {rejected} rejected" if rejected else "")
    elif rejected:
        rules = db.execute(
            f"SELECT c.reason, count(*) n FROM configs c WHERE {where} AND c.status = 'rejected' "
            f"GROUP BY c.reason ORDER BY n DESC, c.reason").fetchall()
        text = "rejected: " + short(rules[0][0])
        if len(rules) > 1:
            text += f" (+{len(rules) - 1} other rule{'s' if len(rules) > 2 else ''})"
    elif not bad:
        text = "not run"
    else:
        text = ""
    if bad:
        text += (" + " if text else "") + f"{bad} FAILED"
    return text, bad


def short(reason, width=48):
    """A rejection's rule, on one line, cut to width, safe in a terminal and a page: control
    characters (ESC, BEL, C1) dropped, table bars and angle brackets replaced."""
    text = re.sub(r"[\x00-\x1f\x7f-\x9f]", " ", reason or "")
    one = " ".join(text.split()).replace("|", "/").replace("<", "‹").replace(">", "›")
    return one if len(one) <= width else one[: width - 1] + "…"


def drift_row(db):
    """Per column: drift's NCCL-order steps against the stock of the same run, bit for bit."""
    cells, bad_total = [], 0
    for heading, where in COLUMNS:
        why = not_applicable("drift", "", heading)
        others = db.execute(
            f"SELECT c.id, c.rs_sum, c.status, c.run_id, c.reason FROM configs c "
            f"WHERE c.kind = 'drift' AND c.backend = 'dist_gemm' AND {where} ORDER BY c.id").fetchall()
        stocks = db.execute(
            f"SELECT c.id, c.status, c.run_id FROM configs c WHERE c.kind = 'drift' "
            f"AND c.backend = 'stock' AND {where} ORDER BY c.id").fetchall()
        if not stocks and not others:
            cells.append(why or "not run")
            continue
        parts, bad = [], 0
        for cid, rs_sum, status, run, reason in others:
            # a rule's refusal is no failure; a failure, timeout or oom is
            if status == "rejected":
                parts.append(f"{rs_sum}: rejected: {short(reason)}")
                continue
            if status != "ok":
                parts.append(f"{rs_sum}: {status}")
                bad += status in ("failed", "oom", "timeout")
                continue
            stock = next((sid for sid, st, r in stocks if r == run and st == "ok"), None)
            if stock is None:
                parts.append(f"{rs_sum}: its run's stock did not end ok, nothing to compare")
                bad += 1
                continue
            steps, same = steps_equal(db, stock, cid)
            if rs_sum == "nccl":
                parts.append(f"nccl-order: {same}/{steps} steps bit-identical")
                bad += same != steps or steps == 0
            else:
                parts.append(f"epilogue: {same}/{steps} bit-identical")
        # stock's own failures count whatever the others did: with every dist_gemm refused (TP 1)
        # or compared with another stock of the run (--repeat 2), nothing above reports them
        stock_bad = sum(st in ("failed", "oom", "timeout") for _, st, _ in stocks)
        if not others:
            parts.append("stock only: " + ", ".join(sorted({st for _, st, _ in stocks})))
        elif stock_bad or all(status == "rejected" for _, _, status, _, _ in others):
            parts.append("stock: " + (", ".join(sorted({st for _, st, _ in stocks})) or "none"))
        bad += stock_bad
        cells.append("; ".join(parts) + (" FAILED" if bad else ""))
        bad_total += bad
    return cells, bad_total


def steps_equal(db, a, b):
    """Steps of configurations a and b, and how many agree in loss and grad norm exactly."""
    rows = db.execute(
        "SELECT x.loss = y.loss AND x.grad_norm = y.grad_norm FROM drift_steps x "
        "JOIN drift_steps y ON y.step = x.step WHERE x.config_id = ? AND y.config_id = ?",
        (a, b)).fetchall()
    return len(rows), sum(1 for (same,) in rows if same)


def open_read_only(path):
    """The database at path, read only, whatever characters its name holds; a database in a
    folder this user cannot write (its WAL index cannot be made) is opened immutable."""
    uri = pathlib.Path(path).resolve().as_uri()
    if not pathlib.Path(path).is_file():
        raise sqlite3.OperationalError("no such file")
    try:
        db = sqlite3.connect(f"{uri}?mode=ro", uri=True)
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return db
    except sqlite3.OperationalError:
        db = sqlite3.connect(f"{uri}?immutable=1", uri=True)
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return db


def main(argv):
    if len(argv) != 2:
        print("usage: coverage-table.py COVERAGE_DB", file=sys.stderr)
        return 2
    try:
        db = open_read_only(argv[1])
        columns = {row[1] for row in db.execute("PRAGMA table_info(configs)")}
        if not {"dp", "fsdp_traffic", "comm_dtype", "graph_sizes"} <= columns:
            print(f"coverage-table.py: {argv[1]}: not a tpbench database of this schema "
                  f"(no configs.dp, ...): run `tpbench migrate --db {argv[1]}` first",
                  file=sys.stderr)
            return 2
        # a binary built from a tree with uncommitted changes is no commit's: said beside it
        runs = db.execute(
            "SELECT count(*), (SELECT group_concat(name, ', ') FROM (SELECT DISTINCT "
            "coalesce(nullif(commit_sha, ''), 'unknown') || CASE WHEN dirty THEN "
            "' built with uncommitted changes' ELSE '' END AS name FROM runs ORDER BY name)) "
            "FROM runs").fetchone()
        shared = db.execute("SELECT count(*) FROM runs WHERE test_knobs LIKE "
                            "'%TPBENCH_TEST_SHARE_GPU%'").fetchone()[0]
    except sqlite3.Error as e:
        print(f"coverage-table.py: {argv[1]}: {e}", file=sys.stderr)
        return 2
    if shared == 0:
        print(f"coverage-table.py: {argv[1]}: no run here was made with TPBENCH_TEST_SHARE_GPU "
              "(scripts/device-coverage.sh's); counting its configurations all the same",
              file=sys.stderr)
    print("| | path | " + " | ".join(h for h, _ in COLUMNS) + " |")
    print("|---|---|" + "---|" * len(COLUMNS))
    failures = 0
    for group, path, where in ROWS:
        cells = []
        for heading, col in COLUMNS:
            text, bad = cell(db, f"({where}) AND {col}")
            why = not_applicable(group, path, heading)
            if why and text == "not run":
                text = why
            cells.append(text)
            failures += bad
        print(f"| {group} | {path} | " + " | ".join(cells) + " |")
    cells, bad = drift_row(db)
    failures += bad
    print("| drift | 10 steps vs stock | " + " | ".join(cells) + " |")
    # a failure no column holds (another degree or mesh) still fails the table
    outside = db.execute(
        f"SELECT c.tp, c.dp, count(DISTINCT c.id) FROM configs c LEFT JOIN checks k "
        f"ON k.config_id = c.id AND k.status = 'failed' WHERE NOT ("
        + " OR ".join(f"({col})" for _, col in COLUMNS) + f") AND (c.status IN {FAILED} OR "
        f"(c.status = 'ok' AND k.config_id IS NOT NULL)) GROUP BY c.tp, c.dp "
        f"ORDER BY c.dp, c.tp").fetchall()
    totals = dict(db.execute("SELECT status, count(*) FROM configs GROUP BY status").fetchall())
    checks = dict(db.execute("SELECT status, count(*) FROM checks GROUP BY status").fetchall())
    evidence = dict(db.execute(
        "SELECT coalesce(evidence, 'none'), count(*) FROM traces GROUP BY 1").fetchall())
    print()
    print(f"{runs[0]} runs (commit {runs[1]}); configurations: " + ", ".join(
        f"{s} {totals.get(s, 0)}" for s in ("ok", "rejected", "failed", "oom", "timeout")) +
          "; checks: " + ", ".join(f"{s} {checks.get(s, 0)}" for s in ("ok", "failed",
                                                                      "not checked")) +
          "; traced schedule evidence: " + ", ".join(
              f"{s} {evidence.get(s, 0)}" for s in ("ok", "failed", "not checked")))
    if outside:
        print("FAILED outside the table's columns: " + ", ".join(
            f"{n} at dp {dp} × tp {tp}" for tp, dp, n in outside))
        failures += sum(n for _, _, n in outside)
    return 1 if failures else 0


if __name__ == "__main__":
    # a reader that stops early (| head) ends the table quietly, as a shell tool does
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main(sys.argv))
