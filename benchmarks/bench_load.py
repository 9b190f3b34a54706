"""How much loading a report into DuckDB costs over reading it bare.

    python benchmarks/bench_load.py [REPORT] [--reps N]

REPORT defaults to the largest fixtures/reports/*.ncu-rep. Measured in one run, the two
alternating, N times each (default 5), median:

  bare    ncu_report.load_report + every value of every metric of every action,
          aggregate and instances, into Python: the typed accessor for each value's kind
          (IMetric.value() is also shown; it costs ~3x as much per value)
  wsperf  wsperf.collectors.ncu.load_report into a fresh in-memory store: reading in
          reader processes (correlation ids, units, SASS text, source lines, rules too),
          staging as Arrow, one DuckDB transaction

Bare runs in a fresh process each time, after one untimed read of the same report (so
ncu_report's one-time set-up is behind it, and the ~7x the report's size that
ncu_report keeps per load does not pile up). wsperf keeps its reader processes between
loads, so its first repetition pays the one-time costs (interpreter start, ncu_report's
~0.5 s disassembler set-up, metric units) and is shown apart as "first". The target is
wsperf <= 1.5 x bare on the medians of the rest.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import ncu_report

from wsperf.collectors.ncu import load_report
from wsperf.collectors.store import open_store

REPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "reports"
TARGET = 1.5


def every_metric(path: Path):
    """Every IMetric of every action of the report, each looked up once."""
    ctx = ncu_report.load_report(str(path))
    for ri in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(ri)
        for ai in range(rng.num_actions()):
            action = rng.action_by_idx(ai)
            for name in action.metric_names():
                yield action.metric_by_name(name)


def bare_typed(path: Path) -> int:
    """Read every metric value with the accessor for its kind; the number of values."""
    im = ncu_report.IMetric
    get = {im.ValueKind_DOUBLE: im.as_double, im.ValueKind_FLOAT: im.as_double, im.ValueKind_UINT32: im.as_uint64,
           im.ValueKind_UINT64: im.as_uint64, im.ValueKind_STRING: im.as_string}
    n = 0
    for m in every_metric(path):
        f = get.get(m.kind())
        values = [f(m) if f else None]
        k = m.num_instances()
        if k:
            f = get.get(m.kind(0))
            values += [f(m, j) for j in range(k)] if f else [None] * k
        n += len(values)
    return n


def bare_value(path: Path) -> int:
    """The same with IMetric.value(), the convenience accessor."""
    n = 0
    for m in every_metric(path):
        values = [m.value()] + [m.value(j) for j in range(m.num_instances())]
        n += len(values)
    return n


def wsperf_load(path: Path) -> tuple[float, int]:
    con = open_store(None)  # a fresh in-memory store each time; creating it is not timed
    t = time.perf_counter()
    result = load_report(con, path)
    dt = time.perf_counter() - t
    con.close()
    return dt, result.rows["metrics"]


BARE = {"bare": bare_typed, "bare (IMetric.value)": bare_value}


def bare_once(path: Path, label: str) -> int:
    """`--bare LABEL`: an untimed read, then a timed one; prints 'seconds values'."""
    BARE[label](path)
    t = time.perf_counter()
    n = BARE[label](path)
    print(f"{time.perf_counter() - t} {n}")
    return 0


def run_bare(path: Path, label: str) -> tuple[float, int]:
    out = subprocess.run([sys.executable, __file__, str(path), "--bare", label], capture_output=True, text=True,
                         check=True).stdout.split()
    return float(out[0]), int(out[1])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", nargs="?", type=Path, help="an .ncu-rep (default: the largest fixture report)")
    ap.add_argument("--reps", type=int, default=5, help="repetitions of each (default 5)")
    ap.add_argument("--bare", choices=BARE, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    report = args.report or max(REPORTS.glob("*.ncu-rep"), key=lambda p: p.stat().st_size)
    if args.bare:
        return bare_once(report, args.bare)

    times: dict[str, list[float]] = {"bare": [], "bare (IMetric.value)": [], "wsperf": []}
    counts = {}
    for _ in range(args.reps):
        for label in BARE:
            dt, counts[label] = run_bare(report, label)
            times[label].append(dt)
        dt, counts["wsperf"] = wsperf_load(report)
        times["wsperf"].append(dt)

    print(f"report: {report} ({report.stat().st_size / 2**20:.1f} MiB), {args.reps} repetitions")
    print(f"values read bare: {counts['bare']}; metric rows stored by wsperf: {counts['wsperf']}")
    for label, ts in times.items():
        rest = ts[1:] or ts
        print(f"{label:22s} first {ts[0]:6.3f} s   median of the rest {statistics.median(rest):6.3f} s")
    bare = statistics.median(times["bare"][1:] or times["bare"])
    ws = statistics.median(times["wsperf"][1:] or times["wsperf"])
    first = times["wsperf"][0] / times["bare"][0]
    ratio = ws / bare
    print(f"ratio wsperf / bare: {ratio:.2f}x (target <= {TARGET}x); first repetition {first:.2f}x")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
