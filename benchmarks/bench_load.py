"""How much loading a report into DuckDB costs over reading it bare.

    python benchmarks/bench_load.py [REPORT] [--reps N]

REPORT defaults to the largest fixtures/reports/*.ncu-rep. Measured in one run, the two
alternating, N times each (default 5), median:

  bare    ncu_report.load_report + every value of every metric of every action,
          aggregate and instances, into Python: the typed accessor for each value's kind
          (IMetric.value() is also shown; it costs ~3x as much per value)
  wsperf  wsperf.collectors.ncu.load_report into a fresh in-memory store: reading in
          reader processes (correlation ids, units, SASS text, source lines, rules too),
          staging as CSV (collectors/staging.py), one DuckDB transaction

Bare runs in a fresh process each time, after one untimed read of the same report (so
ncu_report's one-time set-up is behind it, and the ~7x the report's size that
ncu_report keeps per load does not pile up). wsperf keeps its reader processes between
loads, so its first repetition pays the one-time costs (interpreter start, ncu_report's
~0.5 s disassembler set-up, metric units) and is shown apart as "first". The target is
wsperf <= 1.5 x bare in wall-clock time on the medians of the rest. CPU time (wsperf:
this process and its readers, Linux only) is shown too: wsperf reaches the target by
reading on two cores, so a machine busy with other work moves the wall ratio towards
the CPU ratio.
"""

from __future__ import annotations

import argparse
import os
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


def readers_cpu() -> float:
    """CPU seconds used so far by this process's live children (the readers); 0 where
    /proc is not there."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[1]) == os.getpid():  # ppid; utime and stime follow at 11, 12
            total += int(fields[11]) + int(fields[12])
    return total / tick


def wsperf_load(path: Path) -> tuple[float, float, int]:
    """Wall and CPU seconds of one load_report into a fresh in-memory store (creating
    the store is not timed), and the metric rows it stored."""
    con = open_store(None)
    t, cpu = time.perf_counter(), time.process_time() + readers_cpu()
    result = load_report(con, path)
    dt, dcpu = time.perf_counter() - t, time.process_time() + readers_cpu() - cpu
    con.close()
    return dt, dcpu, result.rows["metrics"]


BARE = {"bare": bare_typed, "bare (IMetric.value)": bare_value}


def bare_once(path: Path, label: str) -> int:
    """`--bare LABEL`: an untimed read, then a timed one; prints 'wall cpu values'."""
    BARE[label](path)
    t, cpu = time.perf_counter(), time.process_time()
    n = BARE[label](path)
    print(f"{time.perf_counter() - t} {time.process_time() - cpu} {n}")
    return 0


def run_bare(path: Path, label: str) -> tuple[float, float, int]:
    out = subprocess.run([sys.executable, __file__, str(path), "--bare", label], capture_output=True, text=True,
                         check=True).stdout.split()
    return float(out[0]), float(out[1]), int(out[2])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", nargs="?", type=Path, help="an .ncu-rep (default: the largest fixture report)")
    ap.add_argument("--reps", type=int, default=5, help="repetitions of each (default 5)")
    ap.add_argument("--bare", choices=BARE, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    report = args.report or max(REPORTS.glob("*.ncu-rep"), key=lambda p: p.stat().st_size)
    if args.bare:
        return bare_once(report, args.bare)

    labels = [*BARE, "wsperf"]
    wall: dict[str, list[float]] = {label: [] for label in labels}
    cpu: dict[str, list[float]] = {label: [] for label in labels}
    counts = {}
    for _ in range(args.reps):
        for label in labels:
            dt, dcpu, counts[label] = wsperf_load(report) if label == "wsperf" else run_bare(report, label)
            wall[label].append(dt)
            cpu[label].append(dcpu)

    def median(ts: list[float]) -> float:
        return statistics.median(ts[1:] or ts)

    print(f"report: {report} ({report.stat().st_size / 2**20:.1f} MiB), {args.reps} repetitions")
    print(f"values read bare: {counts['bare']}; metric rows stored by wsperf: {counts['wsperf']}")
    for label in labels:
        print(f"{label:22s} first {wall[label][0]:6.3f} s   median of the rest {median(wall[label]):6.3f} s wall, "
              f"{median(cpu[label]):6.3f} s CPU")
    ratio = median(wall["wsperf"]) / median(wall["bare"])
    print(f"ratio wsperf / bare: {ratio:.2f}x wall (target <= {TARGET}x), "
          f"{median(cpu['wsperf']) / median(cpu['bare']):.2f}x CPU; "
          f"first repetition {wall['wsperf'][0] / wall['bare'][0]:.2f}x wall")
    return 0 if ratio <= TARGET else 1

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
