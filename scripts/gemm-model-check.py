#!/usr/bin/env python3
"""gemm-model-check.py — how far `tpbench project`'s estimated GEMM times are from the same
GEMMs measured alone.

`tpbench project --gemms` lists every GEMM a prediction reads (stock's G(T), dist_gemm's
G(S) and G(R)) with its time: a row of its exact shape, or estimated from FLOPs (model point 2
of docs/projection.md). This script reads that list and a database holding GEMM-alone rows of
the estimated shapes (`tpbench ops --tp 1 --shape M,N,K,OP`, measured on one GPU, not given to
the prediction), and prints, per role and degree, the signed median, median |error| and worst
error of estimated over measured. With --predictions it also sets two `project --format csv`
outputs side by side (the same request before and after the measured shapes were added):
per degree, stock's and dist_gemm's median change and the geometric-mean speedup of each.

usage: scripts/gemm-model-check.py GEMMS_CSV MEASURED_DB [--predictions BEFORE.csv AFTER.csv]
exit: 0 printed; 1 an estimated GEMM has no measured row (named); 2 bad usage or input
"""
import csv
import math
import sqlite3
import statistics
import sys

ROLES = ("stock", "shard", "chunk")


def fail(message, code=2):
    print(f"gemm-model-check.py: {message}", file=sys.stderr)
    sys.exit(code)


def read_csv(path, needed):
    """The rows of path, each with its line number under "line"; exit 2 when path cannot be
    read, has no rows or lacks a needed column."""
    rows = []
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            for row in reader:
                rows.append(dict(row, line=reader.line_num))
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    except (UnicodeDecodeError, csv.Error) as e:
        fail(f"{path}: not a CSV ({e})")
    if not rows:
        fail(f"{path}: no lines after the header")
    missing = [c for c in needed if c not in rows[0]]
    if missing:
        fail(f"{path}: no column {', '.join(missing)} (not the CSV this script reads)")
    return rows


def measured_gemms(path):
    """(dtype, m, n, k, weights) -> (median µs, config id) of the latest ok GEMM-alone row."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = db.execute(
            "SELECT c.dtype, c.m, c.n, c.k, c.n_weights, r.median_us, c.id FROM configs c "
            "JOIN results r ON r.config_id = c.id WHERE c.kind = 'gemm' AND c.status = 'ok' "
            "AND c.pass = 'fwd' AND r.median_us > 0 ORDER BY c.id").fetchall()
    except sqlite3.Error as e:
        fail(f"{path}: not a tpbench database ({e})")
    return {(d, m, n, k, w): (us, cid) for d, m, n, k, w, us, cid in rows}


def estimated_gemm(path, g):
    """An estimated GEMM's key (dtype, m, n, k, weights), degree and time; exit 2 naming the
    line when a field is missing or not a number, or the time is not above 0 (project leaves
    it empty where no GEMM row has the dtype)."""
    try:
        key = (g["dtype"], *(int(g[field]) for field in ("m", "n", "k", "weights")))
        tp, us = int(g["tp"]), float(g["us"] or "nan")
    except (TypeError, ValueError):
        fail(f"{path}: line {g['line']}: a field is missing or not a number")
    if not (math.isfinite(us) and us > 0):
        fail(f"{path}: line {g['line']}: no estimated time (us '{g['us']}': {g['source']})")
    return key, tp, us


def gemm_errors(path, gemms, measured):
    """{(role, tp): [(error %, label)]} of the estimated GEMMs; the shapes not measured."""
    errors, unmeasured = {}, set()
    for g in gemms:
        if g["exact"] == "1":
            continue
        key, tp, estimate = estimated_gemm(path, g)
        if key not in measured:
            unmeasured.add(f"{g['m']},{g['n']},{g['k']},{g['op']} ({g['dtype']})")
            continue
        us, cid = measured[key]
        err = 100.0 * (estimate / us - 1.0)
        label = (f"{g['model']} {g['proj']} {g['tokens']}: {g['m']}×{g['n']}×{g['k']} "
                 f"{estimate:.1f} vs {us:.1f} µs (config {cid})")
        errors.setdefault((g["role"], tp), []).append((err, label))
    return errors, unmeasured


def print_gemm_table(errors):
    print("| role | TP | GEMMs | signed median | median \\|error\\| | worst |")
    print("|---|---:|---:|---:|---:|---|")
    order = sorted(errors, key=lambda rk: (ROLES.index(rk[0]) if rk[0] in ROLES else 9, rk[1]))
    for role, tp in order:
        errs = errors[(role, tp)]
        values = [e for e, _ in errs]
        worst = max(errs, key=lambda e: abs(e[0]))
        print(f"| {role} | {tp} | {len(errs)} | {statistics.median(values):+.1f} % | "
              f"{statistics.median(abs(v) for v in values):.1f} % | {worst[0]:+.1f} % "
              f"({worst[1]}) |")


def prediction_change(before_path, after_path):
    needed = ("result", "model", "proj", "op", "dtype", "tokens", "tp", "stock_us", "dist_us",
              "speedup")
    before, after = read_csv(before_path, needed), read_csv(after_path, needed)

    def times(path, r):  # stock, dist_gemm and speedup, each a number above 0, else exit 2
        try:
            values = tuple(float(r[field]) for field in ("stock_us", "dist_us", "speedup"))
            int(r["tp"])
        except (TypeError, ValueError):
            fail(f"{path}: line {r['line']}: a field is missing or not a number")
        if not all(math.isfinite(v) and v > 0 for v in values):
            fail(f"{path}: line {r['line']}: a time or speedup that is not above 0")
        return r

    def keyed(path, rows):  # a database's shapes may differ in op or dtype alone
        return {(r["model"], r["proj"], r["tokens"], r["tp"], r["op"], r["dtype"]): times(path, r)
                for r in rows if r["result"] == "predicted" and r["speedup"]}

    b, a = keyed(before_path, before), keyed(after_path, after)
    common = sorted(set(b) & set(a), key=lambda k: (int(k[3]), k[0], k[1], int(k[2]), k[4:]))
    if not common:
        fail(f"{before_path} and {after_path} share no predicted row")
    print("\n| TP | shapes | stock, median change | dist_gemm, median change | "
          "dist_gemm, largest change | speedup geomean before | after |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for tp in sorted({int(k[3]) for k in common}):
        keys = [k for k in common if int(k[3]) == tp]
        stock = [100 * (float(a[k]["stock_us"]) / float(b[k]["stock_us"]) - 1) for k in keys]
        dist = [100 * (float(a[k]["dist_us"]) / float(b[k]["dist_us"]) - 1) for k in keys]

        def geomean(rows):
            return math.exp(statistics.fmean(math.log(float(rows[k]["speedup"])) for k in keys))

        print(f"| {tp} | {len(keys)} | {statistics.median(stock):+.1f} % | "
              f"{statistics.median(dist):+.1f} % | {max(dist, key=abs):+.1f} % | "
              f"{geomean(b):.3f} | {geomean(a):.3f} |")


def main(argv):
    if len(argv) not in (3, 6) or (len(argv) == 6 and argv[3] != "--predictions"):
        fail("usage: gemm-model-check.py GEMMS_CSV MEASURED_DB "
             "[--predictions BEFORE.csv AFTER.csv]")
    gemms = read_csv(argv[1], ("model", "proj", "tokens", "tp", "role", "dtype", "m", "n", "k",
                               "op", "weights", "exact", "us", "source"))
    errors, unmeasured = gemm_errors(argv[1], gemms, measured_gemms(argv[2]))
    if unmeasured:
        fail(f"{len(unmeasured)} estimated GEMM shapes have no GEMM-alone row in {argv[2]}: "
             + "; ".join(sorted(unmeasured)[:5]) + (" ..." if len(unmeasured) > 5 else ""), 1)
    if not errors:
        fail(f"{argv[1]}: every GEMM is a row of its exact shape: nothing estimated to check")
    print_gemm_table(errors)
    if len(argv) == 6:
        prediction_change(argv[4], argv[5])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
