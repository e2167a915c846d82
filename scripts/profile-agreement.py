#!/usr/bin/env python3
"""profile-agreement.py: does `tpbench profile`, watching tpbench's own `ops` from outside,
find what `ops --trace` found from inside?

    profile-agreement.py TRACE_DB PROFILE_DB [--tolerance POINTS]

TRACE_DB holds one `tpbench ops --trace` run; PROFILE_DB one `tpbench profile --range REGEX --
tpbench ops ...` run of the same matrix (one shape per op, so an op's NVTX range name names one
configuration). For every op range of the profile ("<op>.<pass> <backend> <schedule> x<chunks>",
as kernels/tp_linear_plan.c names them) it finds the traced configuration of that op, pass and
backend whose recorded schedule is that schedule, and compares:
  - the transport: the schedule says what must move the bytes (ce and ring: copy-engine peer
    copies; sm: SM copy kernels; nccl: NCCL kernels; at TP 1 nothing moves: none) and the
    profile's transport for that range must be it;
  - the overlap: the median over the traced windows of the overlap % (ops --trace) against the
    median over the profile's windows of that range; they must agree within POINTS (default 10)
    percentage points. The two runs are different processes, so their timings differ by noise;
    the windows differ too (ops traces whole iterations, the profile each op range).
Prints one line per op range and exits 1 when any disagrees, 2 on bad input.
"""

import argparse
import sqlite3
import statistics
import sys

EXPECTED = {"ce": "copy-engine", "ring": "copy-engine", "sm": "sm-copy", "nccl": "nccl"}


def parse_range(name):
    """('ag_linear', 'fwd', 'dist_gemm', 'ce') from 'ag_linear.fwd dist_gemm ce x2', else None."""
    head, _, rest = name.partition(" ")
    op, dot, pass_ = head.partition(".")
    words = rest.split()
    if not dot or len(words) != 3 or not words[2].startswith("x"):
        return None
    return op, pass_, words[0], words[1]


def traced_configs(db):
    """{(op, pass, backend, schedule): (config_id, tp, [overlap %])} of the traced run."""
    out = {}
    rows = db.execute(
        "SELECT c.id, c.layer, c.pass, c.backend, s.schedule, c.tp FROM configs c "
        "JOIN schedules s ON s.config_id = c.id AND s.seq = 0 "
        "JOIN traces t ON t.config_id = c.id WHERE c.kind = 'op'"
    ).fetchall()
    for cid, op, pass_, backend, schedule, tp in rows:
        key = (op, pass_, backend, schedule)
        if key in out:
            sys.exit(f"profile-agreement: {key} has several traced configurations: run one shape per op")
        pct = [r[0] for r in db.execute(
            "SELECT overlap_pct FROM overlap WHERE config_id = ? AND overlap_pct IS NOT NULL", (cid,))]
        out[key] = (cid, tp, pct)
    return out


def profiled_ranges(db):
    """{range name: (transport set, [overlap %])} of the profile run."""
    out = {}
    for name, transport in db.execute("SELECT range_name, transport FROM profile_schedules"):
        out.setdefault(name, (set(), []))[0].add(transport)
    for name, comm, overlap in db.execute("SELECT name, comm_ns, overlap_ns FROM profile_steps"):
        if name in out and comm > 0:
            out[name][1].append(100.0 * overlap / comm)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace_db")
    ap.add_argument("profile_db")
    ap.add_argument("--tolerance", type=float, default=10.0, help="overlap points (default 10)")
    a = ap.parse_args()
    try:
        traced = traced_configs(sqlite3.connect(f"file:{a.trace_db}?mode=ro", uri=True))
        profiled = profiled_ranges(sqlite3.connect(f"file:{a.profile_db}?mode=ro", uri=True))
    except sqlite3.Error as e:
        print(f"profile-agreement: {e}", file=sys.stderr)
        return 2
    bad = compared = 0
    for name, (transports, pcts) in sorted(profiled.items()):
        key = parse_range(name)
        if not key or key not in traced:
            continue
        cid, tp, traced_pct = traced[key]
        want = "none" if tp == 1 else EXPECTED.get(key[3], "?")
        got = "/".join(sorted(transports))
        ok_transport = transports == {want}
        a_pct = statistics.median(traced_pct) if traced_pct else None
        b_pct = statistics.median(pcts) if pcts else None
        ok_overlap = (a_pct is None and b_pct is None) or (
            a_pct is not None and b_pct is not None and abs(a_pct - b_pct) <= a.tolerance)
        compared += 1
        bad += not (ok_transport and ok_overlap)
        fmt = lambda v: "-" if v is None else f"{v:.1f} %"
        print(f"{'ok  ' if ok_transport and ok_overlap else 'DIFF'} {name}: transport {got} "
              f"(expected {want}), overlap traced {fmt(a_pct)} (config {cid}) vs profiled {fmt(b_pct)}")
    if compared == 0:
        print("profile-agreement: no op range of the profile matches a traced configuration",
              file=sys.stderr)
        return 2
    print(f"{compared - bad} of {compared} op ranges agree (overlap within {a.tolerance} points)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
